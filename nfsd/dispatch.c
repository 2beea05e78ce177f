/*
 * dispatch.c -- from a call record to a reply record (RFC 5531).
 *
 * Runs on a worker thread: decode the call header with libtirpc's XDR,
 * authenticate (AUTH_SYS, AUTH_NONE), find the procedure in the program's
 * table, decode its arguments, consult the duplicate request cache for
 * non-idempotent procedures, run the handler, encode the reply with
 * xdr_replymsg and hand it to the transport. Every failure that RFC 5531 can
 * express gets its reply (RPC_MISMATCH, AUTH_ERROR, PROG_UNAVAIL,
 * PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR); a record too short
 * to carry an xid closes its connection.
 */
#include "nfsd/nfsd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "nfsd/drc.h"
#include "nfsd/export_table.h"
#include "nfsd/log.h"
#include "nfsd/stats.h"
#include "nfsd/vfs.h"

#define NFS_PROGRAM_NUM   100003u
#define MOUNT_PROGRAM_NUM 100005u
#define RPCSEC_GSS_FLAVOR 6u
/* The largest reply we build: a READ of NFSD_MAX_IO plus headers. */
#define REPLY_MAX (NFSD_MAX_IO + 64 * 1024)


/* send_msg -- encode msg into a new record and reply with it. Returns the
 * record (for the DRC) through rec/len when asked, else frees it after the
 * transport took its copy. */
static int encode_msg(struct rpc_msg *msg, size_t hint, uint8_t **rec, size_t *len)
{
	size_t size = hint;

	for (;;) {
		uint8_t *buf = malloc(size + 4);
		XDR x;

		if (!buf)
			return -ENOMEM;
		xdrmem_create(&x, (char *)buf + 4, (u_int)size, XDR_ENCODE);
		if (xdr_replymsg(&x, msg)) {
			*len = xdr_getpos(&x) + 4;
			xdr_destroy(&x);
			*rec = buf;
			return 0;
		}
		xdr_destroy(&x);
		free(buf);
		if (size >= REPLY_MAX)
			return -EMSGSIZE;
		size = size * 4 > REPLY_MAX ? REPLY_MAX : size * 4;
	}
}

static void reply_msg(struct rpc_req *req, struct rpc_msg *msg)
{
	uint8_t *rec;
	size_t len;

	if (encode_msg(msg, NFSD_REPLY_SMALL, &rec, &len) < 0) {
		rpc_drop(req);
		return;
	}
	rpc_reply(req, rec, len);
}

static void reply_accepted(struct rpc_req *req, uint32_t xid, enum accept_stat st,
			   uint32_t lo, uint32_t hi)
{
	struct rpc_msg m;

	memset(&m, 0, sizeof(m));
	m.rm_xid = xid;
	m.rm_direction = REPLY;
	m.rm_reply.rp_stat = MSG_ACCEPTED;
	m.acpted_rply.ar_verf = _null_auth;
	m.acpted_rply.ar_stat = st;
	if (st == PROG_MISMATCH) {
		m.acpted_rply.ar_vers.low = lo;
		m.acpted_rply.ar_vers.high = hi;
	} else if (st == SUCCESS) {
		m.acpted_rply.ar_results.where = NULL;
		m.acpted_rply.ar_results.proc = XDRPROC(xdr_void);
	}
	reply_msg(req, &m);
}

static void reply_denied(struct rpc_req *req, uint32_t xid, enum reject_stat rs, enum auth_stat why)
{
	struct rpc_msg m;

	memset(&m, 0, sizeof(m));
	m.rm_xid = xid;
	m.rm_direction = REPLY;
	m.rm_reply.rp_stat = MSG_DENIED;
	m.rjcted_rply.rj_stat = rs;
	if (rs == RPC_MISMATCH) {
		m.rjcted_rply.rj_vers.low = 2;
		m.rjcted_rply.rj_vers.high = 2;
	} else {
		m.rjcted_rply.rj_why = why;
	}
	reply_msg(req, &m);
}

/* decode_cred -- fill c->cred from an RPC credential; returns the auth_stat
 * to refuse it with, or AUTH_OK. */
static enum auth_stat decode_cred(struct call *c, const struct opaque_auth *cred)
{
	switch (cred->oa_flavor) {
	case AUTH_NONE:
		/* anonymous: mapped to the export's anonuid/anongid */
		c->cred.flavor = AUTH_NONE;
		c->cred.uid = c->cred.gid = 65534;
		c->cred.ngids = 0;
		return AUTH_OK;
	case AUTH_SYS: {
		char mach[MAX_MACHINE_NAME + 1];
		gid_t gids[NGRPS];
		struct authunix_parms p;
		XDR x;
		bool ok;

		memset(&p, 0, sizeof(p));
		p.aup_machname = mach;
		p.aup_gids = gids;
		/* with the buffers preset, the decoder allocates nothing */
		xdrmem_create(&x, cred->oa_base, cred->oa_length, XDR_DECODE);
		ok = xdr_authunix_parms(&x, &p);
		xdr_destroy(&x);
		if (!ok || p.aup_len > NFSD_MAX_GIDS)
			return AUTH_BADCRED;
		c->cred.flavor = AUTH_SYS;
		c->cred.uid = p.aup_uid;
		c->cred.gid = p.aup_gid;
		c->cred.ngids = p.aup_len;
		for (unsigned i = 0; i < p.aup_len; i++)
			c->cred.gids[i] = gids[i];
		return AUTH_OK;
	}
	case AUTH_DES:
	case RPCSEC_GSS_FLAVOR:
		return AUTH_TOOWEAK;
	default:
		return AUTH_BADCRED;
	}
}

static const struct rpc_proc *find_proc(struct rpc_req *req, struct call *c)
{
	const struct rpc_proc *t;
	unsigned n;

	switch (c->prog) {
	case NFS_PROGRAM_NUM:
		if (c->vers != 3) {
			reply_accepted(req, c->xid, PROG_MISMATCH, 3, 3);
			return NULL;
		}
		t = nfs3_procs;
		n = nfs3_nprocs;
		break;
	case MOUNT_PROGRAM_NUM:
		if (c->vers == 3) {
			t = mount3_procs;
			n = mount3_nprocs;
		} else if (c->vers == 1 || c->vers == 2) {
			t = mount1_procs;
			n = mount1_nprocs;
		} else {
			reply_accepted(req, c->xid, PROG_MISMATCH, 1, 3);
			return NULL;
		}
		break;
	default:
		reply_accepted(req, c->xid, PROG_UNAVAIL, 0, 0);
		return NULL;
	}
	if (c->proc >= n || !t[c->proc].handler) {
		reply_accepted(req, c->xid, PROC_UNAVAIL, 0, 0);
		return NULL;
	}
	return &t[c->proc];
}

/* Inline calls that may defer: a call over INLINE_SLOW_NS while another
 * connection waits is slow; when slow calls add up to INLINE_WINDOW_SLOW_NS
 * within INLINE_WINDOW_NS, such calls go to the workers for a while
 * (INLINE_OFF_MIN_NS, doubling up to INLINE_OFF_MAX_NS while it happens
 * again within INLINE_CALM_NS of the end of the last pause). */
#define INLINE_SLOW_NS (1000 * 1000ull)
#define INLINE_WINDOW_NS (1000 * 1000 * 1000ull)
#define INLINE_WINDOW_SLOW_NS (50 * 1000 * 1000ull)
#define INLINE_OFF_MIN_NS (100 * 1000 * 1000ull)
#define INLINE_OFF_MAX_NS (5 * 1000 * 1000 * 1000ull)
#define INLINE_CALM_NS (1000 * 1000 * 1000ull)
static uint64_t inline_off_until;	/* atomic: CLOCK_MONOTONIC ns */

/* inline_paused -- whether a pause after slow inline calls is on (no clock
 * read while none ever was) */
static bool inline_paused(void)
{
	uint64_t until = __atomic_load_n(&inline_off_until, __ATOMIC_RELAXED);

	return until && rpc_now_ns() < until;
}

bool dispatch_inline_ok(const struct rpc_req *req)
{
	/* xid, direction, rpcvers, prog, vers, proc: fixed offsets */
	if (req->len < 24)
		return false;
	const uint8_t *b = req->buf;
	uint32_t prog = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
	uint32_t vers = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
	uint32_t proc = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];

	if (prog != NFS_PROGRAM_NUM || vers != 3)
		return prog == MOUNT_PROGRAM_NUM && proc == 0;
	switch (proc) {
	/* Attribute and name lookups that the inode and dentry caches answer. */
	case 0:		/* NULL */
	case 1:		/* GETATTR */
	case 3:		/* LOOKUP */
	case 4:		/* ACCESS */
	case 5:		/* READLINK */
	case 18:	/* FSSTAT */
	case 19:	/* FSINFO */
	case 20:	/* PATHCONF */
		return true;
	/* Calls that defer themselves to a worker (call_defer in nfs3.c)
	 * before they would wait: a READ the page cache cannot serve, a
	 * change that presto off must flush, a held stripe, a full log, a log
	 * whose persist is an msync. What is left is CPU work on the page and
	 * dentry caches plus, presto on, a persist to memory. Unless a recent
	 * one took long (a filesystem under writeback pressure can stall even
	 * those): then they go to the workers for a while. Changes also go
	 * to the workers while a destage's syncfs runs, the journal commit
	 * it forces can hold them for milliseconds, when another connection
	 * has calls in flight (it would wait behind them on the loop) or the
	 * last destage took 50 ms or more (a client that comes meanwhile
	 * would wait about that long). Otherwise a call waits as long on a
	 * worker, plus the hand-off (at one call in flight that hand-off
	 * raised WRITE's p50 from 45 to 50-60 us whenever a destage fell into
	 * the run). */
	case 6:		/* READ */
	case 21:	/* COMMIT */
	case 16:	/* READDIR: of a small directory (else it defers) */
	case 17:	/* READDIRPLUS: the same */
		return !inline_paused();
	case 2:		/* SETATTR */
	case 7:		/* WRITE */
	case 8:		/* CREATE */
	case 9:		/* MKDIR */
	case 10:	/* SYMLINK */
	case 11:	/* MKNOD */
	case 12:	/* REMOVE */
	case 13:	/* RMDIR */
	case 14:	/* RENAME */
	case 15:	/* LINK */
		/* a change waits for the journal while a destage commits it:
		 * not on the loop while others have calls in flight, or when
		 * destages take long */
		return (!presto_syncing() || (rpc_busy_conns() < 2 && presto_sync_short())) &&
		       !inline_paused();
	default:
		return false;
	}
}

/* inline_check -- after a call ran inline: every other connection waited as
 * long as it took; when that adds up, keep the calls that may defer on the
 * workers for a while. */
static void inline_check(const struct rpc_proc *p, uint64_t t0)
{
	/* loop thread only */
	static uint64_t off_ns = INLINE_OFF_MIN_NS, win_start, win_slow;
	uint64_t now = rpc_now_ns();
	uint64_t until = __atomic_load_n(&inline_off_until, __ATOMIC_RELAXED);

	/* a slow call delays only its own client's calls unless another
	 * connection has calls in flight (this one counts itself) */
	if (now - t0 <= INLINE_SLOW_NS || rpc_busy_conns() < 2)
		return;
	/* one slow call may be the scheduler's doing (two cores, many
	 * threads); slow calls adding up to a share of the loop's time are a
	 * filesystem that blocks */
	if (now - win_start > INLINE_WINDOW_NS) {
		win_start = now;
		win_slow = 0;
	}
	win_slow += now - t0;
	if (win_slow <= INLINE_WINDOW_SLOW_NS)
		return;
	win_start = now;
	win_slow = 0;
	/* slow again soon after the last time: twice as long off */
	if (until && now < until + INLINE_CALM_NS)
		off_ns = off_ns * 2 > INLINE_OFF_MAX_NS ? INLINE_OFF_MAX_NS : off_ns * 2;
	else
		off_ns = INLINE_OFF_MIN_NS;
	__atomic_store_n(&inline_off_until, now + off_ns, __ATOMIC_RELAXED);
	stats_loop(STATS_LOOP_PAUSE);
	static long tok;
	if (log_ratelimited(&tok))
		log_warnx("%s took %llu us on the event loop thread, slow calls over 50 ms in 1 s; "
			  "changes and READs go to the workers for the next %llu ms", p->name,
			  (unsigned long long)((now - t0) / 1000),
			  (unsigned long long)(off_ns / 1000000));
}

void dispatch(struct rpc_req *req)
{
	struct call c;
	uint32_t dir, rpcvers;
	char credbuf[MAX_AUTH_BYTES], verfbuf[MAX_AUTH_BYTES];
	struct opaque_auth cred = { .oa_base = credbuf }, verf = { .oa_base = verfbuf };
	XDR x;

	memset(&c, 0, sizeof(c));
	c.req = req;
	xdrmem_create(&x, (char *)req->buf, (u_int)req->len, XDR_DECODE);
	if (!xdr_u_int32_t(&x, &c.xid) || !xdr_u_int32_t(&x, &dir)) {
		xdr_destroy(&x);
		rpc_close_conn(req);	/* not even an xid: nothing to answer */
		return;
	}
	if (dir != CALL) {
		xdr_destroy(&x);
		rpc_drop(req);
		return;
	}
	if (!xdr_u_int32_t(&x, &rpcvers) || rpcvers != RPC_MSG_VERSION) {
		xdr_destroy(&x);
		reply_denied(req, c.xid, RPC_MISMATCH, AUTH_OK);
		return;
	}
	if (!xdr_u_int32_t(&x, &c.prog) || !xdr_u_int32_t(&x, &c.vers) ||
	    !xdr_u_int32_t(&x, &c.proc)) {
		xdr_destroy(&x);
		reply_accepted(req, c.xid, GARBAGE_ARGS, 0, 0);
		return;
	}
	if (!xdr_opaque_auth(&x, &cred) || !xdr_opaque_auth(&x, &verf)) {
		xdr_destroy(&x);
		reply_denied(req, c.xid, AUTH_ERROR, AUTH_BADCRED);
		return;
	}
	enum auth_stat as = decode_cred(&c, &cred);
	if (as != AUTH_OK) {
		xdr_destroy(&x);
		reply_denied(req, c.xid, AUTH_ERROR, as);
		return;
	}

	const struct rpc_proc *p = find_proc(req, &c);
	if (!p) {
		xdr_destroy(&x);
		return;
	}

	size_t argpos = xdr_getpos(&x);
	struct drc_key key;
	if (p->drc)
		drc_key_init(&key, (struct sockaddr *)&req->peer, req->peerlen, c.xid, c.prog,
			     c.vers, c.proc, req->buf + argpos, req->len - argpos);
	void *args = calloc(1, p->args_size ? p->args_size : 1);
	void *res = calloc(1, p->res_size ? p->res_size : 1);
	if (!args || !res) {
		free(args);
		free(res);
		xdr_destroy(&x);
		if (req->drc_held)
			drc_abort(&key);
		reply_accepted(req, c.xid, SYSTEM_ERR, 0, 0);
		return;
	}
	if (!p->xdr_args(&x, args)) {
		xdr_free(p->xdr_args, args);
		free(args);
		free(res);
		xdr_destroy(&x);
		static long tok;
		if (log_ratelimited(&tok)) {
			char a[INET6_ADDRSTRLEN];
			log_warnx("GARBAGE_ARGS: %s call from %s (xid %#x)", p->name,
				  addr_to_string((struct sockaddr *)&req->peer, a, sizeof(a)), c.xid);
		}
		if (req->drc_held)
			drc_abort(&key);
		reply_accepted(req, c.xid, GARBAGE_ARGS, 0, 0);
		return;
	}
	xdr_destroy(&x);

	/* a call queued for a worker whose connection was closed meanwhile
	 * (rpc_close_conn: a call before it found the log and the filesystem
	 * unable to persist) is not run: its reply could not go out, and an
	 * unanswered change would meet the client's retransmission on a new
	 * connection. (The loop cuts no call from a closed connection.) */
	if (!rpc_on_loop() && rpc_conn_closed(req)) {
		xdr_free(p->xdr_args, args);
		free(args);
		free(res);
		if (req->drc_held)
			drc_abort(&key);
		rpc_drop(req);
		return;
	}

	if (p->drc && !req->drc_held) {
		uint8_t *cached;
		size_t clen;

		switch (drc_begin(&key, &cached, &clen)) {
		case DRC_DONE:
			xdr_free(p->xdr_args, args);
			free(args);
			free(res);
			/* the original may be a call of the loop's batch whose
			 * directory stamp is still pending: a worker answers at
			 * once (the loop's answer waits for the batch's end) */
			if (!rpc_on_loop())
				presto_stamps_flush();
			rpc_reply(req, cached, clen);
			return;
		case DRC_IN_PROGRESS:
			xdr_free(p->xdr_args, args);
			free(args);
			free(res);
			rpc_drop(req);
			return;
		case DRC_MISS:
			break;
		}
	}

	c.xt = xtab_get();
	c.on_loop = rpc_on_loop();
	uint64_t t0 = c.on_loop ? rpc_now_ns() : 0;
	p->handler(&c, args, res);
	vfs_become_root();
	if (c.on_loop && c.proc != 0)
		inline_check(p, t0);
	if (c.defer) {
		/* nothing was changed: a worker runs the call from the start */
		if (c.txn.active)
			presto_commit(&c.txn, NULL, NULL, 0);	/* no record: unlocks */
		xdr_free(p->xdr_args, args);
		xdr_free(p->xdr_res, res);
		free(args);
		free(res);
		xtab_put(c.xt);
		/* the DRC entry stays in progress (a retransmission meanwhile
		 * is dropped); the worker's run uses it as its own */
		req->drc_held = p->drc;
		stats_loop(STATS_LOOP_DEFERRED);
		rpc_defer(req);
		return;
	}
	if (c.on_loop)
		stats_loop(STATS_LOOP_INLINE);

	struct rpc_msg m;
	memset(&m, 0, sizeof(m));
	m.rm_xid = c.xid;
	m.rm_direction = REPLY;
	m.rm_reply.rp_stat = MSG_ACCEPTED;
	m.acpted_rply.ar_verf = _null_auth;
	m.acpted_rply.ar_stat = SUCCESS;
	m.acpted_rply.ar_results.where = res;
	m.acpted_rply.ar_results.proc = p->xdr_res;

	uint8_t *rec = NULL;
	size_t len = 0;
	int rc = encode_msg(&m, p->reply_size ? p->reply_size(args) : NFSD_REPLY_SMALL, &rec, &len);
	bool err = p->res_status && *(int32_t *)res != 0;

	/* Presto: the record goes into the log with the reply, still under the
	 * stripe locks of the apply (so log order is apply order); WRITE data
	 * is borrowed from args, freed only after. */
	uint64_t log_ns = 0;
	if (c.txn.active) {
		uint64_t tl = rpc_now_ns();
		if (presto_commit(&c.txn, p->drc ? &key : NULL, rc == 0 ? rec : NULL,
				  rc == 0 ? len : 0) < 0 &&
		    presto_sync_unlogged() < 0)
			rc = -EIO;
		log_ns = rpc_now_ns() - tl;
	}
	xdr_free(p->xdr_args, args);
	xdr_free(p->xdr_res, res);
	free(args);
	free(res);
	xtab_put(c.xt);
	/* no reply before the record is durable (invariant 1); if the log
	 * cannot persist it, the filesystem must, and the records before it
	 * must go: an older record of the same object, durable and live, would
	 * otherwise be replayed over this change after a power cut, its own
	 * record lost with the failed persist (presto_sync_unlogged: sync,
	 * then trim every record appended so far, persisted or not) */
	if (c.txn.logged && presto_wait(&c.txn) < 0 && presto_sync_unlogged() < 0) {
		free(rec);
		if (p->drc)
			drc_abort(&key);
		rpc_close_conn(req);	/* unanswered: the client retransmits */
		return;
	}
	stats_record(p->stat_idx, rpc_now_ns() - req->t_recv_ns, err || rc < 0);
	if (c.txn.logged && !c.txn.through)	/* answered from the log */
		stats_record_log(p->stat_idx, log_ns + c.txn.waited_ns);

	if (rc < 0) {
		static long tok;
		free(rec);
		if (log_ratelimited(&tok))
			log_warnx("%s: reply could not be built or made durable: SYSTEM_ERR", p->name);
		if (p->drc)
			drc_abort(&key);
		reply_accepted(req, c.xid, SYSTEM_ERR, 0, 0);
		return;
	}
	if (p->drc)
		drc_end(&key, rec, len);
	rpc_reply(req, rec, len);
}
