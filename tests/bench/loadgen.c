/*
 * loadgen.c -- NFSv3 load generator for the benchmark (`make bench`).
 *
 *   loadgen -H host -n nfsport -m mountport -e /export [-c conns] [-d depth]
 *           [-t seconds] [-w warmup] [-o op[,op..]] [-l label] [-k]
 *           [-b bytes] [-p usecs]
 *   loadgen [-H host] -T label:nfsport:mountport:/export [-T ...] [-s slice]
 *           [the options above but -n, -m, -e, -l]
 *
 * Opens C TCP connections straight to the given NFS port (no rpcbind: the
 * ports come from the command line), mounts the export once over MOUNT v3 on
 * the mount port for the root file handle, and keeps D requests in flight on
 * every connection: as soon as a reply arrives its slot sends the next
 * request. For each op it runs a warm-up, then a time-bounded window; a reply
 * that arrives inside the window counts as one operation and its latency
 * (from queueing the call to the reply's callback, CLOCK_MONOTONIC) goes
 * into a log-linear histogram (64 sub-buckets per power of two, so a
 * percentile is exact to within 1/64 of its value).
 *
 * Ops: null, getattr (of the root), lookup (cycling over 64 names),
 * read and write (4 KiB, or -b bytes, at a random offset aligned to that
 * size in a 1 MiB file of each connection; write asks FILE_SYNC), create (a CREATE UNCHECKED of a name
 * of the slot, then the REMOVE of it: one pair is one operation).
 * What an op needs is set up before it runs and removed at the end (-k keeps
 * it).
 *
 * -p: once a connection was ready (a reply came or a call went out) and at
 * a window's start, the client polls its connections without sleeping for
 * that many microseconds (an integer, 0-1000000) before it sleeps in poll()
 * again, as presto-nfsd's event loop does after a batch, and yields the CPU
 * between polls (0, the default: it always sleeps). On a VM whose idle vCPU halts at once
 * (haltpoll with guest_halt_poll_ns=0) the wake-up of a client asleep when
 * the reply comes is a VM exit of 12-18 us that lands on some replies and
 * not others, depending on how long the server took: at one call in flight
 * it, not the server, would set the p50. Spinning, the client measures the
 * servers' latency; it costs a core while a call is out, so `make bench`
 * uses it (bench-nfsd.sh, PRESTO_BENCH_SPIN). It holds only while the
 * server has a CPU of its own: in one of nine runs with a third busy thread
 * on the two cores, every WRITE 1x1 reply came just after the 100 us of
 * polling (p50 113 us for presto on and for async alike, against 12 with
 * the client sleeping).
 * "woken" in the JSON counts the replies of the window that were taken
 * after poll() slept: near "ops", the polling did not work and a 1x1 p50
 * is the client's, not the server's.
 *
 * Every reply's status is checked: an RPC failure, an NFS error or a reply
 * that is short (READ/WRITE count) or less stable than asked (WRITE) counts
 * as an error, never as a timed success; the first error is reported.
 *
 * With -T, once per server, it measures several servers side by side: each
 * is set up as above (connections of its own), then every op runs on them
 * in turns of -s seconds (0.25) until each had -t seconds, see
 * run_interleaved. A server whose set-up or connection fails is reported
 * failed; the others go on.
 *
 * Output: one JSON object per op and server on stdout ("seconds" is the
 * time measured, "slices" the windows it came in), one human line per op
 * and server on stderr.
 * Exit status 0 when every op ran (errors are in the JSON), 1 when a set-up
 * failed or a connection died, 2 on bad usage.
 *
 * Design: one thread and one poll() over every rpc_context of libnfs's raw
 * async API. The client shares the machine with the server, so it must stay
 * cheap: no threads to wake, no copies besides libnfs's own. Requests are
 * sent from the reply callbacks, which libnfs allows.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>

#define LOADGEN_IO_SIZE 4096		/* READ and WRITE, unless -b */
#define LOADGEN_FILE_SIZE (1024 * 1024)	/* the most -b takes */
#define LOADGEN_SETUP_CHUNK (32 * 1024)
#define LOADGEN_NAMES 64
#define LOADGEN_MAX_CONNS 256
#define LOADGEN_MAX_DEPTH 1024
#define LOADGEN_SYNC_TIMEOUT_NS (30 * 1000000000ull)
#define LOADGEN_DRAIN_NS (10 * 1000000000ull)
#define LOADGEN_SETTLE_NS (50 * 1000000ull)
/* histogram: values < 64 ns exact, then 64 sub-buckets per power of two */
#define LOADGEN_SUB_BITS 6
#define LOADGEN_SUB (1 << LOADGEN_SUB_BITS)
#define LOADGEN_BUCKETS (LOADGEN_SUB + (64 - LOADGEN_SUB_BITS) * LOADGEN_SUB)

enum loadgen_op {
	LOADGEN_NULL,
	LOADGEN_GETATTR,
	LOADGEN_LOOKUP,
	LOADGEN_READ,
	LOADGEN_WRITE,
	LOADGEN_CREATE,
	LOADGEN_NOPS
};

static const char *const loadgen_op_names[LOADGEN_NOPS] = {
	[LOADGEN_NULL] = "null",
	[LOADGEN_GETATTR] = "getattr",
	[LOADGEN_LOOKUP] = "lookup",
	[LOADGEN_READ] = "read",
	[LOADGEN_WRITE] = "write",
	[LOADGEN_CREATE] = "create",
};

struct loadgen_conn;

/* One request slot: at most one request (or CREATE+REMOVE pair) at a time. */
struct loadgen_slot {
	struct loadgen_conn *conn;
	uint64_t t_start;
	char name[64];		/* CREATE+REMOVE name of this slot */
};

struct loadgen_conn {
	struct rpc_context *rpc;
	int idx;
	int dead;
	uint64_t rand;		/* xorshift64 state */
	unsigned lookup_next;
	nfs_fh3 file;		/* this connection's data file */
	char file_name[64];
	struct loadgen_slot *slots;
};

/* The state of the op being measured. */
struct loadgen_run {
	enum loadgen_op op;
	uint64_t measure_start;	/* ns, CLOCK_MONOTONIC */
	uint64_t measure_end;
	uint64_t ops;		/* replies inside the window */
	uint64_t woken;		/* of those, taken after poll() slept */
	uint64_t errors;	/* failed replies, any time */
	uint64_t hist[LOADGEN_BUCKETS];
	uint64_t lat_max;
	double lat_sum;
	char first_error[256];
};

/* One server under load: where it is, its connections, its measurements.
 * Several (-T) are measured in turn, slice by slice (run_interleaved). */
struct loadgen_target {
	const char *label;
	const char *host;
	int nfs_port;
	int mount_port;
	const char *export;
	nfs_fh3 root_fh;
	struct loadgen_conn *conns;
	struct loadgen_run run;
	double measured_s;	/* seconds its windows measured, this op */
	int slices;		/* how many windows measured, this op */
	int failed;		/* set-up failed or a connection died */
};

#define LOADGEN_MAX_TARGETS 8

static struct {
	int conns;
	int depth;
	double seconds;
	double warmup;
	double slice;
	int keep;
	uint64_t spin_ns;	/* -p */
} cfg = {
	.conns = 4,
	.depth = 16,
	.seconds = 5,
	.warmup = 1,
	.slice = 0,	/* -s; unset: 0.25 s with -T, else all of -t */
};

static struct loadgen_target targets[LOADGEN_MAX_TARGETS];
static int ntargets;
/* the target being set up or measured: the reply callbacks of its
 * connections run only while it is (rpc_service is called for it alone) */
static struct loadgen_target *T;
static char lookup_names[LOADGEN_NAMES][64];
static char write_buf[LOADGEN_FILE_SIZE];
static uint32_t io_size = LOADGEN_IO_SIZE;	/* -b */
static int woke;	/* the replies being taken came while poll() slept */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t conn_rand(struct loadgen_conn *c)
{
	uint64_t x = c->rand;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	c->rand = x;
	return x;
}

static const char *nfsstat_name(int st)
{
	switch (st) {
	case NFS3ERR_PERM: return "NFS3ERR_PERM";
	case NFS3ERR_NOENT: return "NFS3ERR_NOENT";
	case NFS3ERR_IO: return "NFS3ERR_IO";
	case NFS3ERR_NXIO: return "NFS3ERR_NXIO";
	case NFS3ERR_ACCES: return "NFS3ERR_ACCES";
	case NFS3ERR_EXIST: return "NFS3ERR_EXIST";
	case NFS3ERR_NOTDIR: return "NFS3ERR_NOTDIR";
	case NFS3ERR_ISDIR: return "NFS3ERR_ISDIR";
	case NFS3ERR_INVAL: return "NFS3ERR_INVAL";
	case NFS3ERR_FBIG: return "NFS3ERR_FBIG";
	case NFS3ERR_NOSPC: return "NFS3ERR_NOSPC";
	case NFS3ERR_ROFS: return "NFS3ERR_ROFS";
	case NFS3ERR_NAMETOOLONG: return "NFS3ERR_NAMETOOLONG";
	case NFS3ERR_STALE: return "NFS3ERR_STALE";
	case NFS3ERR_BADHANDLE: return "NFS3ERR_BADHANDLE";
	case NFS3ERR_NOTSUPP: return "NFS3ERR_NOTSUPP";
	case NFS3ERR_SERVERFAULT: return "NFS3ERR_SERVERFAULT";
	case NFS3ERR_JUKEBOX: return "NFS3ERR_JUKEBOX";
	default: return "NFS3ERR_?";
	}
}

/* ---- histogram ---- */

static unsigned hist_index(uint64_t v)
{
	unsigned e;

	if (v < LOADGEN_SUB)
		return (unsigned)v;
	e = 63 - (unsigned)__builtin_clzll(v);	/* e >= LOADGEN_SUB_BITS */
	return LOADGEN_SUB + (e - LOADGEN_SUB_BITS) * LOADGEN_SUB +
	    (unsigned)((v >> (e - LOADGEN_SUB_BITS)) - LOADGEN_SUB);
}

/* hist_value -- the middle of bucket i, in ns */
static double hist_value(unsigned i)
{
	unsigned e, sub;
	double lo, width;

	if (i < LOADGEN_SUB)
		return i;
	e = (i - LOADGEN_SUB) / LOADGEN_SUB + LOADGEN_SUB_BITS;
	sub = (i - LOADGEN_SUB) % LOADGEN_SUB;
	width = (double)(1ull << (e - LOADGEN_SUB_BITS));
	lo = (double)(LOADGEN_SUB + sub) * width;
	return lo + width / 2;
}

/* hist_percentile -- latency in ns below which fraction p of the ops fall */
static double hist_percentile(const uint64_t *h, uint64_t n, double p)
{
	uint64_t want, seen = 0;
	unsigned i;

	if (n == 0)
		return 0;
	want = (uint64_t)(p * (double)n);
	if ((double)want < p * (double)n)
		want++;
	if (want == 0)
		want = 1;
	for (i = 0; i < LOADGEN_BUCKETS; i++) {
		seen += h[i];
		if (seen >= want)
			return hist_value(i);
	}
	return hist_value(LOADGEN_BUCKETS - 1);
}

/* ---- the measured run ---- */

static void run_error(const char *fmt, ...)
{
	va_list ap;

	T->run.errors++;
	if (T->run.first_error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(T->run.first_error, sizeof(T->run.first_error), fmt, ap);
	va_end(ap);
}

/* rpc_failed -- true (and an error counted) when the RPC itself failed */
static int rpc_failed(int status, void *data, const char *what)
{
	if (status == RPC_STATUS_SUCCESS)
		return 0;
	run_error("%s: RPC %s: %s", what,
	    status == RPC_STATUS_CANCEL ? "cancelled" :
	    status == RPC_STATUS_TIMEOUT ? "timed out" : "failed",
	    status == RPC_STATUS_ERROR && data ? (char *)data : "");
	return 1;
}

static int nfs_failed(int st, const char *what)
{
	if (st == NFS3_OK)
		return 0;
	run_error("%s: %s (%d)", what, nfsstat_name(st), st);
	return 1;
}

static void slot_send(struct loadgen_slot *s);

/* slot_done -- a request (or pair) of slot s ended; ok: it succeeded */
static void slot_done(struct loadgen_slot *s, int ok)
{
	uint64_t t = now_ns(), lat;

	if (ok && t >= T->run.measure_start && t < T->run.measure_end) {
		lat = t - s->t_start;
		T->run.ops++;
		T->run.woken += woke;
		T->run.hist[hist_index(lat)]++;
		T->run.lat_sum += (double)lat;
		if (lat > T->run.lat_max)
			T->run.lat_max = lat;
	}
	if (t < T->run.measure_end && !s->conn->dead)
		slot_send(s);
}

static void null_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	(void)rpc;
	slot_done(private_data, !rpc_failed(status, data, "NULL"));
}

static void getattr_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	GETATTR3res *res = data;
	int ok = 0;

	(void)rpc;
	if (!rpc_failed(status, data, "GETATTR"))
		ok = !nfs_failed(res->status, "GETATTR");
	slot_done(private_data, ok);
}

static void lookup_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	LOOKUP3res *res = data;
	int ok = 0;

	(void)rpc;
	if (!rpc_failed(status, data, "LOOKUP"))
		ok = !nfs_failed(res->status, "LOOKUP");
	slot_done(private_data, ok);
}

static void read_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	READ3res *res = data;
	int ok = 0;

	(void)rpc;
	if (!rpc_failed(status, data, "READ") &&
	    !nfs_failed(res->status, "READ")) {
		if (res->READ3res_u.resok.count != io_size)
			run_error("READ: short read of %u bytes",
			    res->READ3res_u.resok.count);
		else
			ok = 1;
	}
	slot_done(private_data, ok);
}

static void write_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	WRITE3res *res = data;
	int ok = 0;

	(void)rpc;
	if (!rpc_failed(status, data, "WRITE") &&
	    !nfs_failed(res->status, "WRITE")) {
		if (res->WRITE3res_u.resok.count != io_size)
			run_error("WRITE: short write of %u bytes",
			    res->WRITE3res_u.resok.count);
		else if (res->WRITE3res_u.resok.committed != FILE_SYNC)
			run_error("WRITE: FILE_SYNC asked, committed=%d",
			    (int)res->WRITE3res_u.resok.committed);
		else
			ok = 1;
	}
	slot_done(private_data, ok);
}

static void remove_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	REMOVE3res *res = data;
	int ok = 0;

	(void)rpc;
	if (!rpc_failed(status, data, "REMOVE"))
		ok = !nfs_failed(res->status, "REMOVE");
	slot_done(private_data, ok);
}

static void create_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	struct loadgen_slot *s = private_data;
	CREATE3res *res = data;
	REMOVE3args a;

	if (rpc_failed(status, data, "CREATE") ||
	    nfs_failed(res->status, "CREATE")) {
		slot_done(s, 0);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.object.dir = T->root_fh;
	a.object.name = s->name;
	if (rpc_nfs3_remove_async(rpc, remove_cb, &a, s) != 0) {
		run_error("REMOVE: cannot queue: %s", rpc_get_error(rpc));
		s->conn->dead = 1;
	}
}

/* slot_send -- queue the next request of slot s */
static void slot_send(struct loadgen_slot *s)
{
	struct loadgen_conn *c = s->conn;
	struct rpc_context *rpc = c->rpc;
	int rc = -1;

	s->t_start = now_ns();
	switch (T->run.op) {
	case LOADGEN_NULL:
		rc = rpc_nfs3_null_async(rpc, null_cb, s);
		break;
	case LOADGEN_GETATTR: {
		GETATTR3args a = { .object = T->root_fh };

		rc = rpc_nfs3_getattr_async(rpc, getattr_cb, &a, s);
		break;
	}
	case LOADGEN_LOOKUP: {
		LOOKUP3args a;

		a.what.dir = T->root_fh;
		a.what.name = lookup_names[c->lookup_next++ % LOADGEN_NAMES];
		rc = rpc_nfs3_lookup_async(rpc, lookup_cb, &a, s);
		break;
	}
	case LOADGEN_READ: {
		READ3args a;

		a.file = c->file;
		a.offset = (conn_rand(c) % (LOADGEN_FILE_SIZE / io_size)) * io_size;
		a.count = io_size;
		rc = rpc_nfs3_read_async(rpc, read_cb, &a, s);
		break;
	}
	case LOADGEN_WRITE: {
		WRITE3args a;

		a.file = c->file;
		a.offset = (conn_rand(c) % (LOADGEN_FILE_SIZE / io_size)) * io_size;
		a.count = io_size;
		a.stable = FILE_SYNC;
		a.data.data_len = io_size;
		a.data.data_val = write_buf;
		rc = rpc_nfs3_write_async(rpc, write_cb, &a, s);
		break;
	}
	case LOADGEN_CREATE: {
		CREATE3args a;

		memset(&a, 0, sizeof(a));
		a.where.dir = T->root_fh;
		a.where.name = s->name;
		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
		rc = rpc_nfs3_create_async(rpc, create_cb, &a, s);
		break;
	}
	case LOADGEN_NOPS:
		break;
	}
	if (rc != 0) {
		run_error("%s: cannot queue: %s", loadgen_op_names[T->run.op],
		    rpc_get_error(rpc));
		c->dead = 1;
	}
}

static int conns_busy(void)
{
	int i;

	for (i = 0; i < cfg.conns; i++)
		if (!T->conns[i].dead && rpc_queue_length(T->conns[i].rpc) > 0)
			return 1;
	return 0;
}

/*
 * run_window -- one window of op on target t: every slot sends at once and
 * goes on sending until warm + measure ns have passed; replies that arrive
 * in the last measure ns count (added to t->run); then the calls in flight
 * drain. Returns 0, or -1 (t->failed set) when a connection died or replies
 * did not come back.
 */
static int run_window(struct loadgen_target *t, enum loadgen_op op,
    uint64_t warm, uint64_t measure)
{
	struct pollfd pfd[LOADGEN_MAX_CONNS];
	uint64_t t0, now, heard;
	int i, j, n, ready, spinning;

	T = t;
	T->run.op = op;
	t0 = now_ns();
	heard = t0;
	T->run.measure_start = t0 + warm;
	T->run.measure_end = T->run.measure_start + measure;
	for (i = 0; i < cfg.conns; i++)
		for (j = 0; j < cfg.depth; j++)
			slot_send(&T->conns[i].slots[j]);

	for (;;) {
		now = now_ns();
		if (now >= T->run.measure_end && !conns_busy())
			break;
		if (now >= T->run.measure_end + LOADGEN_DRAIN_NS) {
			run_error("%s: replies missing %.0f s after the end",
			    loadgen_op_names[op], LOADGEN_DRAIN_NS / 1e9);
			goto failed;
		}
		n = 0;
		for (i = 0; i < cfg.conns; i++) {
			if (T->conns[i].dead)
				continue;
			pfd[n].fd = rpc_get_fd(T->conns[i].rpc);
			pfd[n].events = (short)rpc_which_events(T->conns[i].rpc);
			pfd[n].revents = 0;
			n++;
		}
		if (n == 0) {
			run_error("%s: every connection is lost",
			    loadgen_op_names[op]);
			goto failed;
		}
		/* sleep only once -p has passed with no connection ready */
		spinning = now - heard < cfg.spin_ns;
		ready = poll(pfd, (nfds_t)n, spinning ? 0 : 10);
		if (ready < 0 && errno != EINTR) {
			run_error("poll: %s", strerror(errno));
			goto failed;
		}
		woke = ready > 0 && !spinning;
		if (ready > 0)
			heard = now_ns();
		else if (ready == 0 && spinning)
			sched_yield();	/* a thread of the server's may wait for a CPU */
		n = 0;
		for (i = 0; i < cfg.conns; i++) {
			struct loadgen_conn *c = &T->conns[i];

			if (c->dead)
				continue;
			if (pfd[n].revents &&
			    rpc_service(c->rpc, pfd[n].revents) < 0) {
				run_error("connection %d: %s", i,
				    rpc_get_error(c->rpc));
				c->dead = 1;
			}
			n++;
		}
	}
	if (measure > 0) {
		T->measured_s += (double)measure / 1e9;
		T->slices++;
	}
	for (i = 0; i < cfg.conns; i++)
		if (T->conns[i].dead)
			goto failed;
	return 0;
failed:
	T->failed = 1;
	return -1;
}

/* run_start -- forget t's measurements of the op before (a failed target
 * keeps its first error: it runs no more) */
static void run_start(struct loadgen_target *t)
{
	char e[sizeof(t->run.first_error)];

	memcpy(e, t->run.first_error, sizeof(e));
	memset(&t->run, 0, sizeof(t->run));
	if (t->failed)
		memcpy(t->run.first_error, e, sizeof(e));
	t->measured_s = 0;
	t->slices = 0;
}

/*
 * run_interleaved -- op on every target that is still sound: cfg.seconds
 * each in slices of cfg.slice (one slice without -s and -T), the targets
 * taking turns slice by slice, the first slice of each after its warm-up. This machine is shared and its speed drifts
 * over seconds; with the servers' windows a fraction of a second apart, a
 * slow moment falls on all of them alike instead of on the one that ran
 * then. Two things keep the turns fair: a server that follows another
 * starts cold (caches and TLB hold the other's data; over 0.25 s slices
 * that cost presto on 5% against async when it ran twice in a row and
 * async never did), so every slice settles for a fifth of its length (at
 * most LOADGEN_SETTLE_NS) before it counts; and turn k starts with target
 * k (mod their number), so that no target follows itself while another
 * never does.
 */
static void run_interleaved(enum loadgen_op op)
{
	uint64_t warm = (uint64_t)(cfg.warmup * 1e9), slice, settle;
	int slices = (int)(cfg.seconds / cfg.slice + 0.5), i, k;

	if (slices < 1)
		slices = 1;
	slice = (uint64_t)(cfg.seconds / slices * 1e9);
	for (i = 0; i < ntargets; i++)
		run_start(&targets[i]);
	settle = slice / 5 < LOADGEN_SETTLE_NS ? slice / 5 : LOADGEN_SETTLE_NS;
	for (k = 0; k < slices; k++)
		for (i = 0; i < ntargets; i++) {
			struct loadgen_target *t = &targets[(k + i) % ntargets];

			/* a target's first window warms it up, the others settle */
			if (!t->failed)
				run_window(t, op, k == 0 ? warm : settle, slice);
		}
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* report -- t's result for op: one JSON line on stdout, one human line on
 * stderr. ops_per_s is over the time its windows measured (measured_s). */
static void report(struct loadgen_target *t, enum loadgen_op op)
{
	const struct loadgen_run *r = &t->run;
	double ops_s = t->measured_s > 0 ? (double)r->ops / t->measured_s : 0;
	double p50 = hist_percentile(r->hist, r->ops, 0.50) / 1e3;
	double p99 = hist_percentile(r->hist, r->ops, 0.99) / 1e3;
	double p999 = hist_percentile(r->hist, r->ops, 0.999) / 1e3;
	double mean = r->ops ? r->lat_sum / (double)r->ops / 1e3 : 0;

	printf("{\"label\":");
	json_string(stdout, t->label);
	printf(",\"op\":\"%s\",\"host\":", loadgen_op_names[op]);
	json_string(stdout, t->host);
	printf(",\"export\":");
	json_string(stdout, t->export);
	printf(",\"io_size\":%u,\"spin_us\":%g,\"conns\":%d,\"depth\":%d,"
	    "\"warmup_s\":%g,\"seconds\":%g,"
	    "\"slices\":%d,\"ops\":%" PRIu64 ",\"ops_per_s\":%.1f,"
	    "\"mean_us\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
	    "\"p999_us\":%.1f,\"max_us\":%.1f,\"woken\":%" PRIu64 ","
	    "\"errors\":%" PRIu64 ",\"failed\":%s,\"first_error\":",
	    io_size, (double)cfg.spin_ns / 1e3, cfg.conns, cfg.depth, cfg.warmup, t->measured_s, t->slices, r->ops,
	    ops_s, mean, p50, p99, p999, (double)r->lat_max / 1e3, r->woken, r->errors,
	    t->failed ? "true" : "false");
	json_string(stdout, r->first_error);
	printf("}\n");
	fflush(stdout);
	fprintf(stderr, "loadgen: %s%s%-8s %dx%d %gs: %.0f ops/s, p50 %.1f us, "
	    "p99 %.1f us, p999 %.1f us, %" PRIu64 " errors%s%s\n",
	    t->label, t->label[0] ? " " : "", loadgen_op_names[op],
	    cfg.conns, cfg.depth, t->measured_s, ops_s, p50, p99, p999,
	    r->errors, r->first_error[0] ? ": " : "", r->first_error);
}

/* ---- synchronous calls, for set-up and clean-up ---- */

struct sync_call {
	int done;
	int status;		/* RPC status */
	int nfs_status;
	uint32_t count;		/* WRITE */
	nfs_fh3 fh;		/* LOOKUP, MNT (malloc'ed) */
	char error[256];
};

/* sync_wait -- serve rpc until call w completes; 0, or -1 with a message */
static int sync_wait(struct rpc_context *rpc, struct sync_call *w,
    const char *what)
{
	uint64_t deadline = now_ns() + LOADGEN_SYNC_TIMEOUT_NS;
	struct pollfd pfd;

	while (!w->done) {
		if (now_ns() > deadline) {
			fprintf(stderr, "loadgen: %s: no reply\n", what);
			return -1;
		}
		pfd.fd = rpc_get_fd(rpc);
		pfd.events = (short)rpc_which_events(rpc);
		pfd.revents = 0;
		if (poll(&pfd, 1, 100) < 0 && errno != EINTR) {
			fprintf(stderr, "loadgen: poll: %s\n", strerror(errno));
			return -1;
		}
		if (rpc_service(rpc, pfd.revents) < 0) {
			fprintf(stderr, "loadgen: %s: %s\n", what,
			    rpc_get_error(rpc));
			return -1;
		}
	}
	if (w->status != RPC_STATUS_SUCCESS) {
		fprintf(stderr, "loadgen: %s: %s\n", what, w->error);
		return -1;
	}
	return 0;
}

static void sync_status(struct sync_call *w, int status, void *data)
{
	w->done = 1;
	w->status = status;
	if (status != RPC_STATUS_SUCCESS)
		snprintf(w->error, sizeof(w->error), "RPC failed: %s",
		    status == RPC_STATUS_ERROR && data ? (char *)data : "");
}

static void fh_copy(nfs_fh3 *dst, u_int len, const char *val)
{
	dst->data.data_len = len;
	dst->data.data_val = malloc(len ? len : 1);
	if (dst->data.data_val == NULL) {
		fprintf(stderr, "loadgen: out of memory\n");
		exit(1);
	}
	memcpy(dst->data.data_val, val, len);
}

static void sync_connect_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	(void)rpc;
	sync_status(private_data, status, data);
}

static void sync_mnt_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	struct sync_call *w = private_data;
	mountres3 *res = data;

	(void)rpc;
	sync_status(w, status, data);
	if (status != RPC_STATUS_SUCCESS)
		return;
	w->nfs_status = res->fhs_status;
	if (res->fhs_status == MNT3_OK)
		fh_copy(&w->fh, res->mountres3_u.mountinfo.fhandle.fhandle3_len,
		    res->mountres3_u.mountinfo.fhandle.fhandle3_val);
}

static void sync_nfs_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	struct sync_call *w = private_data;

	(void)rpc;
	sync_status(w, status, data);
	if (status == RPC_STATUS_SUCCESS)
		w->nfs_status = *(nfsstat3 *)data; /* first member of every res */
}

static void sync_lookup_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	struct sync_call *w = private_data;
	LOOKUP3res *res = data;

	sync_nfs_cb(rpc, status, data, private_data);
	if (status == RPC_STATUS_SUCCESS && res->status == NFS3_OK)
		fh_copy(&w->fh, res->LOOKUP3res_u.resok.object.data.data_len,
		    res->LOOKUP3res_u.resok.object.data.data_val);
}

static void sync_write_cb(struct rpc_context *rpc, int status, void *data,
    void *private_data)
{
	struct sync_call *w = private_data;
	WRITE3res *res = data;

	sync_nfs_cb(rpc, status, data, private_data);
	if (status == RPC_STATUS_SUCCESS && res->status == NFS3_OK)
		w->count = res->WRITE3res_u.resok.count;
}

/* nfs_check -- 0 when w succeeded at the NFS level; else a message, -1 */
static int nfs_check(struct sync_call *w, const char *what, const char *name)
{
	if (w->nfs_status == NFS3_OK)
		return 0;
	fprintf(stderr, "loadgen: %s %s: %s (%d)\n", what, name,
	    nfsstat_name(w->nfs_status), w->nfs_status);
	return -1;
}

static struct rpc_context *connect_to(int port, int program, int version)
{
	struct rpc_context *rpc = rpc_init_context();
	struct sync_call w = { 0 };
	char what[128];

	if (rpc == NULL) {
		fprintf(stderr, "loadgen: rpc_init_context failed\n");
		return NULL;
	}
	if (rpc_connect_port_async(rpc, T->host, port, program, version,
	    sync_connect_cb, &w) != 0) {
		fprintf(stderr, "loadgen: connect %s:%d: %s\n", T->host, port,
		    rpc_get_error(rpc));
		rpc_destroy_context(rpc);
		return NULL;
	}
	snprintf(what, sizeof(what), "connect %s:%d", T->host, port);
	if (sync_wait(rpc, &w, what) < 0) {
		rpc_destroy_context(rpc);
		return NULL;
	}
	return rpc;
}

static int do_mount(void)
{
	struct rpc_context *rpc;
	struct sync_call w = { 0 };
	int rc = -1;

	rpc = connect_to(T->mount_port, MOUNT_PROGRAM, MOUNT_V3);
	if (rpc == NULL)
		return -1;
	if (rpc_mount3_mnt_async(rpc, sync_mnt_cb, (char *)T->export,
	    &w) != 0) {
		fprintf(stderr, "loadgen: MNT: %s\n", rpc_get_error(rpc));
		goto out;
	}
	if (sync_wait(rpc, &w, "MNT") < 0)
		goto out;
	if (w.nfs_status != MNT3_OK) {
		fprintf(stderr, "loadgen: MNT %s: refused, mountstat3 %d%s\n",
		    T->export, w.nfs_status,
		    w.nfs_status == MNT3ERR_ACCES ? " (MNT3ERR_ACCES)" :
		    w.nfs_status == MNT3ERR_NOENT ? " (MNT3ERR_NOENT)" : "");
		goto out;
	}
	T->root_fh = w.fh;
	rc = 0;
out:
	rpc_destroy_context(rpc);
	return rc;
}

static int sync_create(struct rpc_context *rpc, const char *name)
{
	struct sync_call w = { 0 };
	CREATE3args a;

	memset(&a, 0, sizeof(a));
	a.where.dir = T->root_fh;
	a.where.name = (char *)name;
	a.how.mode = UNCHECKED;
	a.how.createhow3_u.obj_attributes.mode.set_it = 1;
	a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0644;
	if (rpc_nfs3_create_async(rpc, sync_nfs_cb, &a, &w) != 0 ||
	    sync_wait(rpc, &w, "CREATE") < 0)
		return -1;
	return nfs_check(&w, "CREATE", name);
}

static int sync_lookup(struct rpc_context *rpc, const char *name, nfs_fh3 *fh)
{
	struct sync_call w = { 0 };
	LOOKUP3args a;

	a.what.dir = T->root_fh;
	a.what.name = (char *)name;
	if (rpc_nfs3_lookup_async(rpc, sync_lookup_cb, &a, &w) != 0 ||
	    sync_wait(rpc, &w, "LOOKUP") < 0 ||
	    nfs_check(&w, "LOOKUP", name) < 0)
		return -1;
	*fh = w.fh;
	return 0;
}

static int sync_remove(struct rpc_context *rpc, const char *name)
{
	struct sync_call w = { 0 };
	REMOVE3args a;

	a.object.dir = T->root_fh;
	a.object.name = (char *)name;
	if (rpc_nfs3_remove_async(rpc, sync_nfs_cb, &a, &w) != 0 ||
	    sync_wait(rpc, &w, "REMOVE") < 0)
		return -1;
	return nfs_check(&w, "REMOVE", name);
}

/* fill_file -- write LOADGEN_FILE_SIZE bytes into fh, FILE_SYNC */
static int fill_file(struct rpc_context *rpc, nfs_fh3 *fh, const char *name)
{
	static char chunk[LOADGEN_SETUP_CHUNK];
	uint64_t off = 0;

	memset(chunk, 'p', sizeof(chunk));
	while (off < LOADGEN_FILE_SIZE) {
		struct sync_call w = { 0 };
		WRITE3args a;

		a.file = *fh;
		a.offset = off;
		a.count = LOADGEN_SETUP_CHUNK;
		a.stable = FILE_SYNC;
		a.data.data_len = LOADGEN_SETUP_CHUNK;
		a.data.data_val = chunk;
		if (rpc_nfs3_write_async(rpc, sync_write_cb, &a, &w) != 0 ||
		    sync_wait(rpc, &w, "WRITE") < 0 ||
		    nfs_check(&w, "WRITE", name) < 0)
			return -1;
		if (w.count == 0) {
			fprintf(stderr, "loadgen: WRITE %s: wrote nothing\n",
			    name);
			return -1;
		}
		off += w.count;
	}
	return 0;
}

/* setup -- create what the ops need: names for LOOKUP, data files */
static int setup(const int *ops, int nops)
{
	struct rpc_context *rpc = T->conns[0].rpc;
	int need_names = 0, need_files = 0, i;

	for (i = 0; i < nops; i++) {
		need_names |= ops[i] == LOADGEN_LOOKUP;
		need_files |= ops[i] == LOADGEN_READ || ops[i] == LOADGEN_WRITE;
	}
	if (need_names)
		for (i = 0; i < LOADGEN_NAMES; i++)
			if (sync_create(rpc, lookup_names[i]) < 0)
				return -1;
	if (need_files)
		for (i = 0; i < cfg.conns; i++) {
			struct loadgen_conn *c = &T->conns[i];

			if (sync_create(rpc, c->file_name) < 0 ||
			    sync_lookup(rpc, c->file_name, &c->file) < 0 ||
			    fill_file(rpc, &c->file, c->file_name) < 0)
				return -1;
		}
	return 0;
}

/* cleanup -- remove what setup and the CREATE slots may have left */
static void cleanup(const int *ops, int nops)
{
	struct rpc_context *rpc = T->conns[0].rpc;
	int i, j, k;

	for (k = 0; k < nops; k++) {
		switch (ops[k]) {
		case LOADGEN_LOOKUP:
			for (i = 0; i < LOADGEN_NAMES; i++)
				sync_remove(rpc, lookup_names[i]);
			break;
		case LOADGEN_READ:
		case LOADGEN_WRITE:
			for (i = 0; i < cfg.conns; i++)
				if (T->conns[i].file.data.data_val) {
					sync_remove(rpc, T->conns[i].file_name);
					free(T->conns[i].file.data.data_val);
					T->conns[i].file.data.data_val = NULL;
				}
			break;
		default:
			break;
		}
	}
	/* a CREATE whose REMOVE failed leaves its name behind; quietly try */
	for (k = 0; k < nops; k++)
		if (ops[k] == LOADGEN_CREATE)
			for (i = 0; i < cfg.conns; i++)
				for (j = 0; j < cfg.depth; j++) {
					struct sync_call w = { 0 };
					REMOVE3args a;

					a.object.dir = T->root_fh;
					a.object.name = T->conns[i].slots[j].name;
					if (rpc_nfs3_remove_async(rpc,
					    sync_nfs_cb, &a, &w) == 0)
						sync_wait(rpc, &w, "REMOVE");
				}
}

static void usage(void)
{
	fprintf(stderr,
	    "usage: loadgen -H host -n nfsport -m mountport -e /export [-l label]\n"
	    "               [-c conns] [-d depth] [-t seconds] [-w warmup]\n"
	    "               [-o op[,op..]] [-k] [-b bytes] [-p usecs]\n"
	    "       loadgen [-H host] -T label:nfsport:mountport:/export\n"
	    "               [-T ...] [-s slice] [the options above]\n"
	    "ops: null getattr lookup read write create (CREATE+REMOVE)\n"
	    "-b: the size of a READ or WRITE (4096; a divisor of 1 MiB)\n"
	    "-p: poll without sleeping for usecs after a connection was ready\n"
	    "   (0, the default: sleep at once; at most 1000000)\n"
	    "-T, once per server: the servers take turns in slices of\n"
	    "   -s seconds (0.25) until each had -t seconds\n");
	exit(2);
}

/* parse_target -- "label:nfsport:mountport:/export" into a new target */
static void parse_target(char *arg)
{
	struct loadgen_target *t;
	char *label = arg, *nfs, *mnt, *exp;

	if (ntargets == LOADGEN_MAX_TARGETS)
		usage();
	if ((nfs = strchr(label, ':')) == NULL)
		usage();
	*nfs++ = '\0';
	if ((mnt = strchr(nfs, ':')) == NULL)
		usage();
	*mnt++ = '\0';
	if ((exp = strchr(mnt, ':')) == NULL)
		usage();
	*exp++ = '\0';
	t = &targets[ntargets++];
	t->label = label;
	t->nfs_port = atoi(nfs);
	t->mount_port = atoi(mnt);
	t->export = exp;
}

/* target_open -- mount t's export, connect its connections, set up what
 * ops need. -1 (and t->failed) when any of it failed. */
static int target_open(struct loadgen_target *t, const int *ops, int nops,
    pid_t pid)
{
	int i, j;

	T = t;
	if (do_mount() < 0)
		goto failed;
	T->conns = calloc((size_t)cfg.conns, sizeof(*T->conns));
	if (T->conns == NULL)
		goto failed;
	for (i = 0; i < cfg.conns; i++) {
		struct loadgen_conn *c = &T->conns[i];

		c->idx = i;
		c->rand = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) ^ (uint64_t)pid;
		snprintf(c->file_name, sizeof(c->file_name), "lg%d.d%d",
		    (int)pid, i);
		c->slots = calloc((size_t)cfg.depth, sizeof(*c->slots));
		if (c->slots == NULL)
			goto failed;
		for (j = 0; j < cfg.depth; j++) {
			c->slots[j].conn = c;
			snprintf(c->slots[j].name, sizeof(c->slots[j].name),
			    "lg%d.c%d.%d", (int)pid, i, j);
		}
		c->rpc = connect_to(T->nfs_port, NFS_PROGRAM, NFS_V3);
		if (c->rpc == NULL)
			goto failed;
		/* distinct xids across connections, for the server's DRC */
		rpc_set_next_xid(c->rpc, (uint32_t)(i + 1) << 24 ^
		    (uint32_t)pid << 8);
	}
	if (setup(ops, nops) < 0) {
		fprintf(stderr, "loadgen: %s%sset-up failed\n", T->label,
		    T->label[0] ? ": " : "");
		goto failed;
	}
	return 0;
failed:
	T->failed = 1;
	snprintf(T->run.first_error, sizeof(T->run.first_error),
	    "set-up failed");
	return -1;
}

static void target_close(struct loadgen_target *t, const int *ops, int nops)
{
	int i;

	T = t;
	if (!cfg.keep && !t->failed && t->conns)
		cleanup(ops, nops);
	if (t->conns) {
		for (i = 0; i < cfg.conns; i++) {
			if (t->conns[i].rpc)
				rpc_destroy_context(t->conns[i].rpc);
			free(t->conns[i].slots);
			free(t->conns[i].file.data.data_val);
		}
		free(t->conns);
	}
	free(t->root_fh.data.data_val);
}

static int parse_ops(char *list, int *ops)
{
	char *tok, *save = NULL;
	int n = 0, i;

	for (tok = strtok_r(list, ",", &save); tok;
	    tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < LOADGEN_NOPS; i++)
			if (strcmp(tok, loadgen_op_names[i]) == 0)
				break;
		if (i == LOADGEN_NOPS) {
			fprintf(stderr, "loadgen: unknown op %s\n", tok);
			usage();
		}
		if (n == LOADGEN_NOPS * 4)
			usage();
		ops[n++] = i;
	}
	return n;
}

int main(int argc, char **argv)
{
	static char default_ops[] = "null,getattr,lookup,read,write,create";
	struct loadgen_target one = { .export = "/", .label = "" };
	int ops[LOADGEN_NOPS * 4];
	int nops, opt, i, k, rc = 0;
	char *oplist = default_ops;
	const char *host = "127.0.0.1";
	pid_t pid = getpid();

	while ((opt = getopt(argc, argv, "H:n:m:e:c:d:t:w:o:l:kT:s:b:p:")) != -1) {
		switch (opt) {
		case 'H': host = optarg; break;
		case 'n': one.nfs_port = atoi(optarg); break;
		case 'm': one.mount_port = atoi(optarg); break;
		case 'e': one.export = optarg; break;
		case 'c': cfg.conns = atoi(optarg); break;
		case 'd': cfg.depth = atoi(optarg); break;
		case 't': cfg.seconds = atof(optarg); break;
		case 'w': cfg.warmup = atof(optarg); break;
		case 'o': oplist = optarg; break;
		case 'l': one.label = optarg; break;
		case 'k': cfg.keep = 1; break;
		case 'T': parse_target(optarg); break;
		case 's': cfg.slice = atof(optarg); break;
		case 'b': {
			char *end;
			unsigned long long b = strtoull(optarg, &end, 10);
			if (*end || b > LOADGEN_FILE_SIZE)
				usage();	/* also what would wrap */
			io_size = (uint32_t)b;
			break;
		}
		case 'p': {
			char *end;
			unsigned long long us = strtoull(optarg, &end, 10);
			if (!*optarg || *end || us > 1000000)
				usage();
			cfg.spin_ns = us * 1000;
			break;
		}
		default: usage();
		}
	}
	if (ntargets == 0) {
		targets[ntargets++] = one;
		if (cfg.slice == 0)
			cfg.slice = cfg.seconds;	/* one window, as ever */
	} else if (one.nfs_port || one.mount_port) {
		usage();	/* -T names every server */
	} else if (cfg.slice == 0) {
		cfg.slice = 0.25;
	}
	for (i = 0; i < ntargets; i++) {
		targets[i].host = host;
		if (targets[i].nfs_port <= 0 || targets[i].nfs_port > 65535 ||
		    targets[i].mount_port <= 0 ||
		    targets[i].mount_port > 65535)
			usage();
	}
	if (optind != argc ||
	    cfg.conns < 1 || cfg.conns > LOADGEN_MAX_CONNS ||
	    cfg.depth < 1 || cfg.depth > LOADGEN_MAX_DEPTH ||
	    !(cfg.seconds > 0) || cfg.warmup < 0 || !(cfg.slice > 0) ||
	    io_size < 1 || io_size > LOADGEN_FILE_SIZE || LOADGEN_FILE_SIZE % io_size)
		usage();
	nops = parse_ops(oplist, ops);

	memset(write_buf, 'w', sizeof(write_buf));
	for (i = 0; i < LOADGEN_NAMES; i++)
		snprintf(lookup_names[i], sizeof(lookup_names[i]),
		    "lg%d.n%d", (int)pid, i);

	for (i = 0; i < ntargets; i++)
		if (target_open(&targets[i], ops, nops, pid) < 0)
			rc = 1;
	for (k = 0; k < nops; k++) {
		run_interleaved(ops[k]);
		for (i = 0; i < ntargets; i++) {
			report(&targets[i], ops[k]);
			if (targets[i].failed)
				rc = 1;
		}
	}
	for (i = 0; i < ntargets; i++)
		target_close(&targets[i], ops, nops);
	return rc;
}
