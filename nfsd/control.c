/*
 * control.c -- the control socket (see control.h).
 *
 * Protocol (version 1): one JSON object per line each way. A request is
 *     {"v":1,"cmd":"status"}                 ("v" may be left out; "id" is echoed)
 * and its answer
 *     {"v":1,"ok":true,"cmd":"status",...}   or
 *     {"v":1,"ok":false,"cmd":"enable","error":"unknown export /x","errno":2}
 * One connection may send many requests; answers come back in request order.
 * The commands, their arguments and their answers are listed in ctl_cmds[]
 * below and in docs/presto.8.
 *
 * Threads. One control thread owns the listening socket and every
 * connection: non-blocking sockets under epoll, so a client that sends half
 * a line, or never reads its answers, only ever costs its own buffers. The
 * commands that may wait for the disk (flush, enable, disable, reload) do
 * not run there: they go to one worker thread, in order, and their answers
 * come back through an eventfd. So `presto -p` keeps answering while a flush
 * of a full log is under way, and the NFS workers never wait on anything of
 * ours: the queries only read counters (stats, presto_get_stats).
 * One worker rather than a thread per request: two reloads or a flush and a
 * disable have no reason to run at the same time, and the serial order is
 * the one the operator typed.
 *
 * Bounds: a request line is at most CONTROL_MAX_LINE bytes (longer: an error
 * answer, then the connection is closed); at most CONTROL_MAX_CLIENTS
 * connections (one more is told so and closed); a client stops being read
 * while CONTROL_OUT_PAUSE bytes of its answers wait, and is dropped when it
 * has taken nothing for CONTROL_STUCK_MS, or stayed silent CONTROL_IDLE_MS.
 *
 * Access: the socket is made 0600 before bind (the Linux AF_UNIX bind takes
 * the mode of the socket's inode, and the server runs with umask 0), and a
 * peer whose SO_PEERCRED uid is neither 0 nor ours is refused as well.
 */
#include "nfsd/control.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nfsd/drc.h"
#include "nfsd/export_table.h"
#include "nfsd/exports.h"
#include "nfsd/log.h"
#include "nfsd/presto.h"
#include "nfsd/rpc.h"
#include "nfsd/stats.h"

#define CONTROL_VERSION     1
#define CONTROL_MAX_LINE    (64 * 1024)
#define CONTROL_MAX_CLIENTS 32
#define CONTROL_OUT_PAUSE   (256 * 1024)
#define CONTROL_OUT_MAX     (4 * 1024 * 1024)
#define CONTROL_STUCK_MS    10000
#define CONTROL_IDLE_MS     (15 * 60 * 1000)

struct ctl_client {
	int fd;
	char *in;			/* CONTROL_MAX_LINE + 1 bytes */
	size_t in_len;
	char *out;
	size_t out_len, out_off, out_cap;
	bool busy;			/* a request is with the worker */
	bool eof;			/* the peer shut its side: answer, then close */
	bool hup;			/* the peer is gone both ways: run what it
					 * sent, then close (no answer reaches it) */
	bool closing;			/* close once the output is drained */
	bool dead;			/* closed while busy: the job frees it */
	uint32_t events;		/* as registered with epoll */
	int64_t last_ms;		/* last byte read or written */
	struct ctl_client *prev, *next;
};

struct ctl_job {
	struct ctl_client *c;
	json_t *req;
	const struct ctl_cmd *cmd;
	char *reply;			/* one line, '\n' included */
	struct ctl_job *next;
};

struct ctl_cmd {
	const char *name;
	/* fill rep; return 0, or -errno with a message in err */
	int (*fn)(json_t *req, json_t *rep, char *err, size_t errlen);
	bool slow;			/* may wait for the disk: run on the worker */
};

static struct {
	bool running;
	atomic_bool stop;
	int lfd, ep, evfd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t dev;
	ino_t ino;
	pthread_t thread, worker;
	pthread_mutex_t lock;		/* todo and done */
	pthread_cond_t cond;
	struct ctl_job *todo, **todo_tail;
	struct ctl_job *done;
	struct ctl_client *clients;
	unsigned nclients;
	int (*reload)(char *err, size_t errlen);
} ctl = { .lfd = -1, .ep = -1, .evfd = -1, .lock = PTHREAD_MUTEX_INITIALIZER,
	  .cond = PTHREAD_COND_INITIALIZER };

/* epoll tags of the two descriptors that are not clients */
static char ctl_tag_listen, ctl_tag_event;

/* process start and start of the statistics interval (CLOCK_MONOTONIC ns) */
static int64_t ctl_start_ns;
static _Atomic int64_t ctl_interval_ns;
static _Atomic uint64_t ctl_resets;	/* statistics resets since start */

static int64_t ctl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ctl_note_start -- uptime counts from the start of the process, not from
 * control_start (which comes after recovery). */
__attribute__((constructor)) static void ctl_note_start(void)
{
	ctl_start_ns = ctl_now_ns();
	atomic_store(&ctl_interval_ns, ctl_start_ns);
}

void control_set_reload(int (*fn)(char *err, size_t errlen))
{
	ctl.reload = fn;
}

/* ---- the commands ---- */

static void set_u64(json_t *o, const char *k, uint64_t v)
{
	json_object_set_new(o, k, json_integer((json_int_t)v));
}

static void set_ms(json_t *o, const char *k, uint64_t ns)
{
	json_object_set_new(o, k, json_real((double)ns / 1e6));
}

/* export_presto_opt -- whether the exports file asks for presto on xe. The
 * option is per client and only matters where a client may write: on if
 * any read-write client has it. */
static bool export_presto_opt(const struct xexport *xe)
{
	for (size_t i = 0; i < xe->e->nclients; i++)
		if (xe->e->clients[i].opts.rw && xe->e->clients[i].opts.presto)
			return true;
	return false;
}

static json_t *export_json(const struct xexport *xe, bool clients)
{
	json_t *o = json_object();
	bool opt = export_presto_opt(xe);

	json_object_set_new(o, "path", json_string(xe->e->path));
	set_u64(o, "id", xe->e->id);
	json_object_set_new(o, "presto", json_boolean(presto_enabled(xe, opt)));
	json_object_set_new(o, "presto_option", json_boolean(opt));
	json_object_set_new(o, "no_mark", json_boolean(presto_unmarked(xe->e->id)));
	json_object_set_new(o, "read_only", json_boolean(!xexport_writable(xe)));
	if (clients) {
		json_t *a = json_array();

		for (size_t i = 0; i < xe->e->nclients; i++) {
			const struct export_client *c = &xe->e->clients[i];
			char opts[512];
			json_t *co = json_object();

			exports_format_opts(&c->opts, opts, sizeof(opts));
			json_object_set_new(co, "client", json_string(c->spec));
			json_object_set_new(co, "options", json_string(opts));
			json_array_append_new(a, co);
		}
		json_object_set_new(o, "clients", a);
	}
	return o;
}

static json_t *exports_json(bool clients)
{
	struct xtab *x = xtab_get();
	json_t *a = json_array();

	for (size_t i = 0; x && i < x->n; i++)
		json_array_append_new(a, export_json(&x->v[i], clients));
	if (x)
		xtab_put(x);
	return a;
}

static void set_times(json_t *rep)
{
	int64_t now = ctl_now_ns();

	json_object_set_new(rep, "uptime_s", json_integer((now - ctl_start_ns) / 1000000000));
	json_object_set_new(rep, "interval_s",
			    json_integer((now - atomic_load(&ctl_interval_ns)) / 1000000000));
	/* a reader of the counters tells a reset by this, not by a counter
	 * going down: one may climb past its old value before it looks */
	json_object_set_new(rep, "resets", json_integer((json_int_t)atomic_load(&ctl_resets)));
}

/* The modifying NFSv3 procedures, whose successful calls each append one
 * log record on an accelerated export (COMMIT is not one: it is answered at
 * once and counted under commits_avoided). */
static const int ctl_modifying[] = { 2, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

static int cmd_ping(json_t *req, json_t *rep, char *err, size_t errlen)
{
	(void)req, (void)err, (void)errlen;
	json_object_set_new(rep, "protocol", json_integer(CONTROL_VERSION));
	json_object_set_new(rep, "server", json_string("presto-nfsd"));
	json_object_set_new(rep, "pid", json_integer(getpid()));
	return 0;
}

static int cmd_status(json_t *req, json_t *rep, char *err, size_t errlen)
{
	struct presto_stats ps;
	static struct stats_proc sp[STATS_NPROCS];	/* control thread only */
	uint64_t modifying = 0;
	json_t *nv = json_object();

	(void)req, (void)err, (void)errlen;
	presto_get_stats(&ps);
	stats_snapshot(sp);
	for (size_t i = 0; i < sizeof(ctl_modifying) / sizeof(ctl_modifying[0]); i++) {
		const struct stats_proc *p = &sp[STATS_NFS_BASE + ctl_modifying[i]];

		modifying += p->count - (p->errors < p->count ? p->errors : p->count);
	}

	json_object_set_new(rep, "state", json_string(ps.state ? ps.state : "DOWN"));
	json_object_set_new(rep, "log_open", json_boolean(ps.log_open));
	json_object_set_new(nv, "path", ps.nvram_path ? json_string(ps.nvram_path) : json_null());
	json_object_set_new(nv, "kind", ps.nvram_kind ? json_string(ps.nvram_kind) : json_null());
	set_u64(nv, "size", ps.nvram_size);
	json_object_set_new(rep, "nvram", nv);
	set_u64(rep, "area_bytes", ps.area_bytes);
	set_u64(rep, "dirty_bytes", ps.used_bytes);
	json_object_set_new(rep, "occupancy_pct",
			    json_real(ps.area_bytes ? 100.0 * (double)ps.used_bytes / (double)ps.area_bytes : 0));
	set_ms(rep, "oldest_age_ms", ps.oldest_age_ns);
	json_object_set_new(rep, "held", json_boolean(ps.held));
	set_times(rep);
	set_u64(rep, "modifying_calls", modifying);
	/* accelerated: logged with presto on (presto off logs and flushes) */
	uint64_t accel = ps.appends > ps.through_appends ? ps.appends - ps.through_appends : 0;
	set_u64(rep, "logged_calls", accel);
	json_object_set_new(rep, "efficiency_pct",
			    modifying ? json_real(accel >= modifying ? 100.0
						  : 100.0 * (double)accel / (double)modifying)
				      : json_null());
	json_object_set_new(rep, "exports", exports_json(false));
	return 0;
}

/* Latency histogram boundaries (microseconds) of the "stats" answer. */
static const uint64_t latency_le_us[] = { 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
					  10000, 25000, 50000, 100000, 250000, 1000000 };

static int cmd_stats(json_t *req, json_t *rep, char *err, size_t errlen)
{
	struct presto_stats ps;
	static struct stats_proc sp[STATS_NPROCS];	/* control thread only */
	uint64_t hits, drops, entries;
	json_t *procs = json_array(), *lg = json_object(), *ds = json_object(), *rc = json_object();
	json_t *drc = json_object(), *hist = json_array();

	(void)req, (void)err, (void)errlen;
	presto_get_stats(&ps);
	stats_snapshot(sp);
	drc_stats(&hits, &drops, &entries);
	set_times(rep);
	json_object_set_new(rep, "state", json_string(ps.state ? ps.state : "DOWN"));

	for (int i = 0; i < STATS_NPROCS; i++) {
		json_t *p = json_object();

		json_object_set_new(p, "name", json_string(stats_proc_name(i)));
		set_u64(p, "count", sp[i].count);
		set_u64(p, "errors", sp[i].errors);
		json_object_set_new(p, "mean_us", json_real(sp[i].count ? (double)sp[i].sum_ns / (double)sp[i].count / 1e3 : 0));
		json_object_set_new(p, "p50_us", json_real((double)stats_percentile(&sp[i], 0.50) / 1e3));
		json_object_set_new(p, "p99_us", json_real((double)stats_percentile(&sp[i], 0.99) / 1e3));
		/* the calls answered from the NVRAM log, and their mean time in it */
		set_u64(p, "log_count", sp[i].log_count);
		json_object_set_new(p, "log_mean_us", json_real(sp[i].log_count ?
			(double)sp[i].log_ns / (double)sp[i].log_count / 1e3 : 0));
		/* cumulative counts at latency_le_us[]: a histogram for /metrics */
		json_t *le = json_array();
		for (size_t k = 0; k < sizeof(latency_le_us) / sizeof(latency_le_us[0]); k++)
			json_array_append_new(le, json_integer((json_int_t)stats_count_le(
							   &sp[i], latency_le_us[k] * 1000ull)));
		json_object_set_new(p, "le_counts", le);
		json_array_append_new(procs, p);
	}
	json_object_set_new(rep, "procs", procs);
	json_t *bounds = json_array();
	for (size_t k = 0; k < sizeof(latency_le_us) / sizeof(latency_le_us[0]); k++)
		json_array_append_new(bounds, json_integer((json_int_t)latency_le_us[k]));
	json_object_set_new(rep, "latency_le_us", bounds);

	set_u64(lg, "appends", ps.appends);
	set_u64(lg, "append_bytes", ps.append_bytes);
	set_u64(lg, "persists", ps.persists);
	json_object_set_new(lg, "records_per_persist",
			    json_real(ps.persists ? (double)ps.appends / (double)ps.persists : 0));
	set_u64(lg, "persist_errors", ps.persist_errors);
	for (size_t i = 0; i < sizeof(ps.batch_hist) / sizeof(ps.batch_hist[0]); i++)
		json_array_append_new(hist, json_integer((json_int_t)ps.batch_hist[i]));
	json_object_set_new(lg, "batch_hist", hist);
	set_u64(lg, "full_waits", ps.full_waits);
	set_u64(lg, "full_timeouts", ps.full_timeouts);
	set_u64(lg, "jukebox", ps.jukebox);
	set_u64(lg, "fallbacks", ps.log_fallbacks);
	set_ms(lg, "wait_ms_total", ps.wait_ns_total);
	set_u64(lg, "dirty_bytes", ps.used_bytes);
	set_u64(lg, "area_bytes", ps.area_bytes);
	json_object_set_new(rep, "log", lg);

	set_u64(ds, "runs", ps.destage_runs);
	set_u64(ds, "errors", ps.destage_errors);
	set_u64(ds, "bytes", ps.destage_bytes);
	set_ms(ds, "last_ms", ps.destage_ns_last);
	set_ms(ds, "total_ms", ps.destage_ns_total);
	set_ms(ds, "mean_ms", ps.destage_runs ? ps.destage_ns_total / ps.destage_runs : 0);
	json_object_set_new(ds, "held", json_boolean(ps.held));
	json_object_set_new(rep, "destage", ds);

	set_u64(rep, "commits_avoided", ps.commits_avoided);
	set_u64(rep, "stamps_coalesced", ps.stamps_coalesced);

	struct stats_loop sl;
	json_t *loop = json_object();
	stats_loop_snapshot(&sl);
	set_u64(loop, "inline", sl.inline_calls);
	set_u64(loop, "deferred", sl.deferred);
	set_u64(loop, "pauses", sl.pauses);
	size_t held;
	uint64_t waits;
	rpc_request_memory(&held, &waits);
	set_u64(loop, "request_bytes", held);
	set_u64(loop, "request_memory_waits", waits);
	uint64_t evictions;
	rpc_record_memory(&held, &evictions);
	set_u64(loop, "record_bytes", held);
	set_u64(loop, "record_memory_closes", evictions);
	json_object_set_new(rep, "loop", loop);

	json_object_set_new(rc, "replayed", json_boolean(ps.recovery_replayed));
	set_u64(rc, "records", ps.recovery_records);
	set_u64(rc, "bytes", ps.recovery_bytes);
	set_ms(rc, "ms", ps.recovery_ns);
	set_u64(rc, "redirects", ps.recovery_redirects);
	set_u64(rc, "errors", ps.recovery_errors);
	json_object_set_new(rep, "recovery", rc);

	set_u64(drc, "hits", hits);
	set_u64(drc, "drops", drops);
	set_u64(drc, "entries", entries);
	json_object_set_new(rep, "drc", drc);
	return 0;
}

static int cmd_reset(json_t *req, json_t *rep, char *err, size_t errlen)
{
	(void)req, (void)rep, (void)err, (void)errlen;
	stats_reset();
	presto_reset_stats();
	atomic_store(&ctl_interval_ns, ctl_now_ns());
	atomic_fetch_add(&ctl_resets, 1);
	return 0;
}

static int cmd_exports(json_t *req, json_t *rep, char *err, size_t errlen)
{
	(void)req, (void)err, (void)errlen;
	json_object_set_new(rep, "exports", exports_json(true));
	return 0;
}

/* set_presto -- enable (on) or disable the exports named in req's "exports"
 * (all when absent or empty). Every name is checked before anything is
 * changed, so a typo changes nothing. */
static int set_presto(json_t *req, json_t *rep, char *err, size_t errlen, bool on)
{
	json_t *names = json_object_get(req, "exports"), *name;
	struct xtab *x = xtab_get();
	const struct xexport **sel = NULL;
	uint32_t *ids = NULL;
	size_t nsel = 0, i;
	struct presto_stats ps;
	int rc = 0;

	if (names && !json_is_null(names) && !json_is_array(names)) {
		snprintf(err, errlen, "\"exports\" must be an array of export paths");
		rc = -EINVAL;
		goto out;
	}
	if (!x || !(sel = calloc(x->n + 1, sizeof(*sel)))) {
		rc = -ENOMEM;
		goto out;
	}
	if (!names || json_array_size(names) == 0) {
		for (i = 0; i < x->n; i++)
			if (!on || (export_presto_opt(&x->v[i]) && !presto_unmarked(x->v[i].e->id)))
				sel[nsel++] = &x->v[i];
	} else {
		json_array_foreach(names, i, name) {
			const struct xexport *xe;

			if (!json_is_string(name)) {
				snprintf(err, errlen, "\"exports\" must be an array of export paths");
				rc = -EINVAL;
				goto out;
			}
			xe = xtab_by_path(x, json_string_value(name));
			if (!xe) {
				snprintf(err, errlen, "unknown export %s", json_string_value(name));
				rc = -ENOENT;
				goto out;
			}
			if (on && presto_unmarked(xe->e->id)) {
				snprintf(err, errlen, "export %s: its root does not take extended "
					 "attributes, which the log's replay relies on", xe->e->path);
				rc = -EOPNOTSUPP;
				goto out;
			}
			if (on && !export_presto_opt(xe)) {
				snprintf(err, errlen, "export %s has %s in the exports file", xe->e->path,
					 xexport_writable(xe) ? "nopresto" : "no read-write client");
				rc = -EPERM;
				goto out;
			}
			if (nsel < x->n)	/* a path named twice counts once */
				sel[nsel++] = xe;
		}
	}
	presto_get_stats(&ps);
	if (on && !ps.log_open) {
		snprintf(err, errlen, "no NVRAM log is open: presto-nfsd was started without one");
		rc = -ENODEV;
		goto out;
	}
	if (!(ids = calloc(nsel ? nsel : 1, sizeof(*ids)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < nsel; i++)
		ids[i] = sel[i]->e->id;
	rc = presto_set_exports(ids, nsel, on);
	if (rc < 0) {
		snprintf(err, errlen, "%s %s: %s", on ? "enabling" : "disabling",
			 nsel == 1 ? sel[0]->e->path : "the exports", strerror(-rc));
		log_warnx("control: %s", err);
		goto out;
	}
	for (i = 0; i < nsel; i++)
		log_info("control: presto %s for %s", on ? "enabled" : "disabled", sel[i]->e->path);
	json_object_set_new(rep, "exports", exports_json(false));
out:
	free(ids);
	free(sel);
	if (x)
		xtab_put(x);
	return rc;
}

static int cmd_enable(json_t *req, json_t *rep, char *err, size_t errlen)
{
	return set_presto(req, rep, err, errlen, true);
}

static int cmd_disable(json_t *req, json_t *rep, char *err, size_t errlen)
{
	return set_presto(req, rep, err, errlen, false);
}

static int cmd_flush(json_t *req, json_t *rep, char *err, size_t errlen)
{
	int64_t t0 = ctl_now_ns();
	int rc;

	(void)req;
	rc = presto_flush();
	if (rc < 0) {
		snprintf(err, errlen, "flush failed: %s", strerror(-rc));
		log_warnx("control: %s", err);
		return rc;
	}
	set_ms(rep, "ms", (uint64_t)(ctl_now_ns() - t0));
	return 0;
}

static int cmd_reload(json_t *req, json_t *rep, char *err, size_t errlen)
{
	struct xtab *x;
	int rc;

	(void)req;
	if (!ctl.reload) {
		snprintf(err, errlen, "this server cannot reload its exports");
		return -ENOSYS;
	}
	rc = ctl.reload(err, errlen);
	if (rc < 0) {
		if (!err[0])
			snprintf(err, errlen, "reload failed: %s", strerror(-rc));
		return rc;
	}
	x = xtab_get();
	json_object_set_new(rep, "exports", json_integer(x ? (json_int_t)x->n : 0));
	if (x)
		xtab_put(x);
	return 0;
}

/* cmd_hold -- {"cmd":"hold","hold":true|false}: hold the destager (records
 * stay in the log until released or the log is 90% full) or release it.
 * For operators and for tests that simulate a power cut. */
static int cmd_hold(json_t *req, json_t *rep, char *err, size_t errlen)
{
	json_t *h = json_object_get(req, "hold");
	struct presto_stats ps;

	if (h && !json_is_boolean(h)) {
		snprintf(err, errlen, "\"hold\" must be true or false");
		return -EINVAL;
	}
	presto_get_stats(&ps);
	if (!ps.log_open) {
		snprintf(err, errlen, "no NVRAM log is open: presto-nfsd was started without one");
		return -ENODEV;
	}
	bool hold = !h || json_is_true(h);
	presto_hold(hold);
	log_info("control: destager %s", hold ? "held" : "released");
	json_object_set_new(rep, "held", json_boolean(hold));
	return 0;
}

/* One table drives the protocol. */
static const struct ctl_cmd ctl_cmds[] = {
	{ .name = "ping", .fn = cmd_ping },
	{ .name = "status", .fn = cmd_status },
	{ .name = "stats", .fn = cmd_stats },
	{ .name = "reset", .fn = cmd_reset },
	{ .name = "exports", .fn = cmd_exports },
	{ .name = "enable", .fn = cmd_enable, .slow = true },
	{ .name = "disable", .fn = cmd_disable, .slow = true },
	{ .name = "flush", .fn = cmd_flush, .slow = true },
	{ .name = "reload", .fn = cmd_reload, .slow = true },
	{ .name = "hold", .fn = cmd_hold },
};

/* utf8_clean -- drop from s the pieces of characters that truncations left
 * (snprintf and "%.64s" count bytes, and messages quote the client's names):
 * jansson refuses a string that is not UTF-8, and the answer went out
 * without its "error". What is whole stays (overlong forms and the like
 * are jansson's to refuse; the names came through it). */
static void utf8_clean(char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char *o = s;

	while (*p) {
		size_t len = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 0;
		size_t k = 1;
		while (k < len && (p[k] & 0xC0) == 0x80)
			k++;
		if (len && k == len) {
			memmove(o, p, len);
			o += len;
			p += len;
		} else {
			p += k;	/* a piece, or a stray continuation byte */
		}
	}
	*o = '\0';
}

/* ctl_answer -- the reply line to req (NULL: it did not parse; err says
 * why) as a malloc'ed string ending in '\n'. */
static char *ctl_answer(json_t *req, const struct ctl_cmd *cmd, const char *parse_err)
{
	json_t *rep = json_object(), *id = req ? json_object_get(req, "id") : NULL;
	char err[1024] = "";
	char *s, *line;
	int rc;

	json_object_set_new(rep, "v", json_integer(CONTROL_VERSION));
	if (id)
		json_object_set(rep, "id", id);
	if (cmd) {
		json_object_set_new(rep, "cmd", json_string(cmd->name));
		rc = cmd->fn(req, rep, err, sizeof(err));
		if (rc < 0 && !err[0])
			snprintf(err, sizeof(err), "%s", strerror(-rc));
	} else {
		rc = -EINVAL;
		snprintf(err, sizeof(err), "%s", parse_err);
	}
	json_object_set_new(rep, "ok", json_boolean(rc == 0));
	if (rc < 0) {
		utf8_clean(err);
		json_object_set_new(rep, "error", json_string(err));
		json_object_set_new(rep, "errno", json_integer(-rc));
	}
	s = json_dumps(rep, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(rep);
	if (!s)
		return NULL;
	line = malloc(strlen(s) + 2);
	if (line)
		sprintf(line, "%s\n", s);
	free(s);
	return line;
}

/* ctl_parse -- the command of one request line; NULL with err filled when
 * the line is not a request we know. *req gets the parsed object (or NULL). */
static const struct ctl_cmd *ctl_parse(const char *line, size_t len, json_t **req, char *err,
				       size_t errlen)
{
	json_error_t je;
	json_t *v, *c;
	const char *name;

	*req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!*req) {
		snprintf(err, errlen, "bad request: not JSON: %s (column %d)", je.text, je.column);
		return NULL;
	}
	if (!json_is_object(*req)) {
		snprintf(err, errlen, "bad request: not a JSON object");
		return NULL;
	}
	v = json_object_get(*req, "v");
	if (v && !(json_is_integer(v) && json_integer_value(v) == CONTROL_VERSION)) {
		snprintf(err, errlen, "unsupported protocol version (this server speaks %d)", CONTROL_VERSION);
		return NULL;
	}
	c = json_object_get(*req, "cmd");
	if (!json_is_string(c)) {
		snprintf(err, errlen, "bad request: no \"cmd\" string");
		return NULL;
	}
	name = json_string_value(c);
	for (size_t i = 0; i < sizeof(ctl_cmds) / sizeof(ctl_cmds[0]); i++)
		if (!strcmp(ctl_cmds[i].name, name))
			return &ctl_cmds[i];
	/* the list from the table: it cannot leave one out */
	size_t k = (size_t)snprintf(err, errlen, "unknown command \"%.64s\" (known:", name);
	for (size_t i = 0; i < sizeof(ctl_cmds) / sizeof(ctl_cmds[0]) && k < errlen; i++)
		k += (size_t)snprintf(err + k, errlen - k, " %s", ctl_cmds[i].name);
	if (k < errlen)
		snprintf(err + k, errlen - k, ")");
	return NULL;
}

/* ---- the worker ---- */

static void *ctl_worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ctl.lock);
	for (;;) {
		struct ctl_job *j;
		uint64_t one = 1;

		while (!ctl.todo && !atomic_load(&ctl.stop))
			pthread_cond_wait(&ctl.cond, &ctl.lock);
		if (atomic_load(&ctl.stop))
			break;
		j = ctl.todo;
		ctl.todo = j->next;
		if (!ctl.todo)
			ctl.todo_tail = &ctl.todo;
		pthread_mutex_unlock(&ctl.lock);

		j->reply = ctl_answer(j->req, j->cmd, NULL);

		pthread_mutex_lock(&ctl.lock);
		j->next = ctl.done;
		ctl.done = j;
		if (write(ctl.evfd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow at our rate: nothing to do */
		}
	}
	pthread_mutex_unlock(&ctl.lock);
	return NULL;
}

/* ---- connections ---- */

static int64_t ctl_now_ms(void)
{
	return ctl_now_ns() / 1000000;
}

static void ctl_client_close(struct ctl_client *c)
{
	if (c->fd >= 0) {
		epoll_ctl(ctl.ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		ctl.clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	ctl.nclients--;
	free(c->in);
	c->in = NULL;
	free(c->out);
	c->out = NULL;
	if (c->busy)
		c->dead = true;		/* the job still points here */
	else
		free(c);
}

/* ctl_queue -- append a reply line to c's output (takes line). */
static int ctl_queue(struct ctl_client *c, char *line)
{
	size_t n;

	if (!line)
		return -ENOMEM;
	n = strlen(line);
	if (c->out_off > 0) {
		/* what was sent makes room: a client that reads steadily while
		 * it keeps requests coming never lets the buffer empty, and its
		 * end would otherwise grow past CONTROL_OUT_MAX */
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *p;

		while (cap < c->out_len + n)
			cap *= 2;
		if (cap > CONTROL_OUT_MAX) {
			free(line);
			return -ENOBUFS;
		}
		if (!(p = realloc(c->out, cap))) {
			free(line);
			return -ENOMEM;
		}
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, line, n);
	c->out_len += n;
	free(line);
	return 0;
}

/* ctl_request -- handle one line: answer at once, or hand it to the worker
 * (c becomes busy). */
static void ctl_request(struct ctl_client *c, const char *line, size_t len)
{
	char err[256];
	json_t *req;
	const struct ctl_cmd *cmd = ctl_parse(line, len, &req, err, sizeof(err));

	if (cmd && cmd->slow) {
		struct ctl_job *j = calloc(1, sizeof(*j));

		if (j) {
			j->c = c;
			j->req = req;
			j->cmd = cmd;
			c->busy = true;
			pthread_mutex_lock(&ctl.lock);
			*ctl.todo_tail = j;
			ctl.todo_tail = &j->next;
			pthread_cond_signal(&ctl.cond);
			pthread_mutex_unlock(&ctl.lock);
			return;
		}
		cmd = NULL;
		snprintf(err, sizeof(err), "out of memory");
	}
	if (ctl_queue(c, ctl_answer(req, cmd, err)) < 0)
		c->closing = true;
	json_decref(req);
}

/* ctl_drain_lines -- run the complete lines buffered in c's input while c
 * may take more work. */
static void ctl_drain_lines(struct ctl_client *c)
{
	size_t off = 0;

	c->in[c->in_len] = '\0';	/* bounds the strspn below (in has one spare byte) */
	while (!c->busy && !c->closing && c->out_len - c->out_off < CONTROL_OUT_PAUSE) {
		char *nl = memchr(c->in + off, '\n', c->in_len - off);
		size_t len;

		if (!nl) {
			/* an unterminated last line counts when the peer is done */
			if (!c->eof || off == c->in_len)
				break;
			nl = c->in + c->in_len;
		}
		len = (size_t)(nl - (c->in + off));
		if (strspn(c->in + off, " \t\r") < len)
			ctl_request(c, c->in + off, len);
		off += len + (nl < c->in + c->in_len);
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	if (!c->busy && !c->closing && c->in_len >= CONTROL_MAX_LINE &&
	    !memchr(c->in, '\n', c->in_len)) {
		char msg[96];

		snprintf(msg, sizeof(msg), "request longer than %d bytes", CONTROL_MAX_LINE);
		ctl_queue(c, ctl_answer(NULL, NULL, msg));
		c->closing = true;
	}
}

/* ctl_has_line -- whether c's input holds a request ready to run. */
static bool ctl_has_line(const struct ctl_client *c)
{
	return c->in_len > 0 && (c->eof || memchr(c->in, '\n', c->in_len));
}

/* ctl_client_update -- run the buffered requests, write what can be
 * written, register the events c now waits for, or close it. */
static void ctl_client_update(struct ctl_client *c)
{
	uint32_t want = 0;

	for (;;) {
		if (!c->busy)
			ctl_drain_lines(c);
		if (c->hup)
			c->out_off = c->out_len;	/* no one to read it */
		while (c->out_off < c->out_len) {
			ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
					 MSG_NOSIGNAL);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (n <= 0) {
				ctl_client_close(c);
				return;
			}
			c->out_off += (size_t)n;
			c->last_ms = ctl_now_ms();
		}
		if (c->out_off == c->out_len)
			c->out_off = c->out_len = 0;
		/* everything went out: the requests held back may run now */
		if (c->out_len == 0 && !c->busy && !c->closing && ctl_has_line(c))
			continue;
		break;
	}
	if (c->hup) {
		/* nothing can be sent: close once the requests it sent have
		 * run. While one is with the worker, leave epoll, which would
		 * report the hang-up again and again; ctl_collect comes back. */
		if (!c->busy) {
			ctl_client_close(c);
		} else if (c->events) {
			epoll_ctl(ctl.ep, EPOLL_CTL_DEL, c->fd, NULL);
			c->events = 0;
		}
		return;
	}
	if (c->out_len > c->out_off) {
		want |= EPOLLOUT;
	} else if (c->closing || (c->eof && !c->busy && c->in_len == 0)) {
		ctl_client_close(c);
		return;
	}
	if (!c->eof && !c->closing && !c->busy && c->in_len < CONTROL_MAX_LINE &&
	    c->out_len - c->out_off < CONTROL_OUT_PAUSE)
		want |= EPOLLIN;
	if (want != c->events) {
		struct epoll_event ev = { .events = want, .data.ptr = c };

		if (epoll_ctl(ctl.ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
			ctl_client_close(c);
			return;
		}
		c->events = want;
	}
}

static void ctl_client_read(struct ctl_client *c)
{
	while (c->in_len < CONTROL_MAX_LINE) {
		ssize_t n = recv(c->fd, c->in + c->in_len, CONTROL_MAX_LINE - c->in_len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0) {
			ctl_client_close(c);
			return;
		}
		if (n == 0) {
			c->eof = true;
			break;
		}
		c->in_len += (size_t)n;
		c->last_ms = ctl_now_ms();
	}
	ctl_client_update(c);
}

/* ctl_refuse -- tell a connection we will not serve it, without waiting.
 * "refused" tells a client that no request of its was looked at. */
static void ctl_refuse(int fd, const char *why)
{
	char line[256];
	int n = snprintf(line, sizeof(line),
			 "{\"v\":%d,\"ok\":false,\"refused\":true,\"error\":\"%s\"}\n",
			 CONTROL_VERSION, why);

	if (send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* it goes away anyway */
	}
	close(fd);
}

static void ctl_accept(void)
{
	for (;;) {
		int fd = accept4(ctl.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		struct ctl_client *c;
		struct epoll_event ev;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				static long token;

				if (log_ratelimited(&token))
					log_warn("control: accept on %s", ctl.path);
			}
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 ||
		    (cr.uid != 0 && cr.uid != geteuid())) {
			ctl_refuse(fd, "permission denied");
			continue;
		}
		if (ctl.nclients >= CONTROL_MAX_CLIENTS) {
			ctl_refuse(fd, "too many control connections");
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c || !(c->in = malloc(CONTROL_MAX_LINE + 1))) {
			free(c);
			ctl_refuse(fd, "out of memory");
			continue;
		}
		c->fd = fd;
		c->events = EPOLLIN;
		c->last_ms = ctl_now_ms();
		ev.events = EPOLLIN;
		ev.data.ptr = c;
		if (epoll_ctl(ctl.ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(c->in);
			free(c);
			close(fd);
			continue;
		}
		c->next = ctl.clients;
		if (c->next)
			c->next->prev = c;
		ctl.clients = c;
		ctl.nclients++;
	}
}

/* ctl_collect -- take the worker's answers to their connections. */
static void ctl_collect(void)
{
	struct ctl_job *j, *next;
	uint64_t v;

	if (read(ctl.evfd, &v, sizeof(v)) < 0) {
		/* EAGAIN: woken for stop, or already drained */
	}
	pthread_mutex_lock(&ctl.lock);
	j = ctl.done;
	ctl.done = NULL;
	pthread_mutex_unlock(&ctl.lock);
	for (; j; j = next) {
		struct ctl_client *c = j->c;

		next = j->next;
		c->busy = false;
		if (c->dead) {
			free(j->reply);
			free(c);
		} else {
			if (ctl_queue(c, j->reply) < 0)
				c->closing = true;
			ctl_client_update(c);
		}
		json_decref(j->req);
		free(j);
	}
}

/* ctl_sweep -- drop the connections that stopped reading or went silent. */
static void ctl_sweep(void)
{
	int64_t now = ctl_now_ms();
	struct ctl_client *c, *next;

	for (c = ctl.clients; c; c = next) {
		next = c->next;
		if (c->out_len > c->out_off && now - c->last_ms > CONTROL_STUCK_MS) {
			log_warnx("control: dropping a client that has not read its answers for %d s",
				  CONTROL_STUCK_MS / 1000);
			ctl_client_close(c);
		} else if (!c->busy && now - c->last_ms > CONTROL_IDLE_MS) {
			ctl_client_close(c);
		}
	}
}

static void *ctl_main(void *arg)
{
	int64_t last_sweep = ctl_now_ms();

	(void)arg;
	while (!atomic_load(&ctl.stop)) {
		struct epoll_event ev[16];
		int n = epoll_wait(ctl.ep, ev, 16, 1000);

		for (int i = 0; i < n && !atomic_load(&ctl.stop); i++) {
			if (ev[i].data.ptr == &ctl_tag_listen) {
				ctl_accept();
			} else if (ev[i].data.ptr == &ctl_tag_event) {
				ctl_collect();
			} else {
				struct ctl_client *c = ev[i].data.ptr;

				/* closed earlier in this batch? its fd is gone */
				bool live = false;
				for (struct ctl_client *k = ctl.clients; k; k = k->next)
					live |= k == c;
				if (!live)
					continue;
				/* gone both ways: no answer can reach it any more,
				 * but the requests it wrote before it went are
				 * carried out (whether or not the hang-up came
				 * before the control thread read them) */
				if (ev[i].events & EPOLLERR) {
					ctl_client_close(c);
				} else if (ev[i].events & EPOLLHUP) {
					c->hup = true;
					ctl_client_read(c);
				} else if (ev[i].events & EPOLLIN) {
					ctl_client_read(c);
				} else {
					ctl_client_update(c);
				}
			}
		}
		if (ctl_now_ms() - last_sweep >= 1000) {
			ctl_sweep();
			last_sweep = ctl_now_ms();
		}
	}
	return NULL;
}

/* ---- start and stop ---- */

/* ctl_clear_stale -- remove a socket left by a server that is gone; refuse
 * to touch a live one or anything that is not a socket. */
static int ctl_clear_stale(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, rc;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		log_warnx("control: %s exists and is not a socket; not replacing it", sa->sun_path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (rc == 0) {
		log_warnx("control: another server is listening on %s", sa->sun_path);
		return -EADDRINUSE;
	}
	if (unlink(sa->sun_path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int control_start(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev;
	struct stat st;
	int rc;

	if (ctl.running)
		return -EALREADY;
	if (!path || !*path)
		return -EINVAL;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_warnx("control: socket path %s is longer than %zu bytes", path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	strcpy(ctl.path, path);
	if ((rc = ctl_clear_stale(&sa)) < 0)
		return rc;

	ctl.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl.lfd < 0)
		goto fail;
	/* mode before bind: no window in which others could connect */
	if (fchmod(ctl.lfd, 0600) < 0)
		goto fail;
	if (bind(ctl.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	if (chmod(path, 0600) < 0 || lstat(path, &st) < 0)
		goto fail_unlink;
	ctl.dev = st.st_dev;
	ctl.ino = st.st_ino;
	if (listen(ctl.lfd, 64) < 0)
		goto fail_unlink;
	ctl.ep = epoll_create1(EPOLL_CLOEXEC);
	ctl.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctl.ep < 0 || ctl.evfd < 0)
		goto fail_unlink;
	ev.events = EPOLLIN;
	ev.data.ptr = &ctl_tag_listen;
	if (epoll_ctl(ctl.ep, EPOLL_CTL_ADD, ctl.lfd, &ev) < 0)
		goto fail_unlink;
	ev.data.ptr = &ctl_tag_event;
	if (epoll_ctl(ctl.ep, EPOLL_CTL_ADD, ctl.evfd, &ev) < 0)
		goto fail_unlink;

	atomic_store(&ctl.stop, false);
	ctl.todo = NULL;
	ctl.todo_tail = &ctl.todo;
	ctl.done = NULL;
	if ((rc = pthread_create(&ctl.worker, NULL, ctl_worker, NULL)) != 0) {
		errno = rc;
		goto fail_unlink;
	}
	if ((rc = pthread_create(&ctl.thread, NULL, ctl_main, NULL)) != 0) {
		atomic_store(&ctl.stop, true);
		pthread_mutex_lock(&ctl.lock);
		pthread_cond_signal(&ctl.cond);
		pthread_mutex_unlock(&ctl.lock);
		pthread_join(ctl.worker, NULL);
		errno = rc;
		goto fail_unlink;
	}
	ctl.running = true;
	log_info("control socket %s", path);
	return 0;

fail_unlink:
	rc = -errno;
	unlink(path);
	goto fail_close;
fail:
	rc = -errno;
fail_close:
	log_warnx("control: listening on %s: %s", path, strerror(-rc));
	if (ctl.lfd >= 0)
		close(ctl.lfd);
	if (ctl.ep >= 0)
		close(ctl.ep);
	if (ctl.evfd >= 0)
		close(ctl.evfd);
	ctl.lfd = ctl.ep = ctl.evfd = -1;
	return rc;
}

void control_stop(void)
{
	struct stat st;
	uint64_t one = 1;
	struct ctl_job *j, *next;

	if (!ctl.running)
		return;
	atomic_store(&ctl.stop, true);
	if (write(ctl.evfd, &one, sizeof(one)) < 0) {
		/* the control thread wakes within a second anyway */
	}
	pthread_mutex_lock(&ctl.lock);
	pthread_cond_signal(&ctl.cond);
	pthread_mutex_unlock(&ctl.lock);
	pthread_join(ctl.thread, NULL);
	/* a flush in progress is finished, not abandoned */
	pthread_join(ctl.worker, NULL);

	for (j = ctl.todo; j; j = next) {
		next = j->next;
		j->c->busy = false;
		if (j->c->dead)
			free(j->c);
		json_decref(j->req);
		free(j);
	}
	for (j = ctl.done; j; j = next) {
		next = j->next;
		j->c->busy = false;
		if (j->c->dead)
			free(j->c);
		json_decref(j->req);
		free(j->reply);
		free(j);
	}
	ctl.todo = ctl.done = NULL;
	while (ctl.clients)
		ctl_client_close(ctl.clients);

	/* remove the socket only if it is still ours */
	if (lstat(ctl.path, &st) == 0 && st.st_dev == ctl.dev && st.st_ino == ctl.ino)
		unlink(ctl.path);
	close(ctl.lfd);
	close(ctl.ep);
	close(ctl.evfd);
	ctl.lfd = ctl.ep = ctl.evfd = -1;
	ctl.running = false;
}
