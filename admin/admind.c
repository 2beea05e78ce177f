/*
 * admind.c -- presto-admind: statistics history and the HTTP console.
 *
 *   presto-admind [--state-dir DIR] [--control PATH] [--db PATH]
 *                 [--listen ADDR:PORT] [--web DIR] [--token-file PATH]
 *                 [--raw-retention T] [--rollup-retention T]
 *
 * The main thread is the sampler: once a second (just after the wall-clock
 * second, waiting on the monotonic clock: see sampler_next) it asks presto-nfsd for "stats" and "status" over one control connection,
 * turns the counters into per-second rates, writes them to SQLite in one
 * transaction and publishes the answers as the latest snapshot for the HTTP
 * threads (admind_http.c, libmicrohttpd). Once a minute it folds the last
 * minute into the rollups and prunes what has outlived its retention.
 *
 * presto-nfsd going away is a gap: no "up" sample is written while the
 * control socket does not answer, and the first sample after it came back
 * (a new pid) only sets the baseline of the counters. After a reset of
 * the statistics (presto-nfsd's "resets" count changed) the counters count
 * from zero; a counter that went down is taken as reset too.
 *
 * Locks: one mutex, held only to swap or copy the snapshot. The HTTP side
 * never dumps the shared object (jansson's encoder is not documented as
 * safe on an object other threads read), it takes a deep copy.
 */
#include "admin/admind.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef ADMIND_WEB_DIR
#define ADMIND_WEB_DIR "/usr/local/share/presto/web"
#endif
#define ADMIND_STATE_DIR "/var/lib/presto"
#define ADMIND_MAX_CTRS 1024
#define ADMIND_TOKEN_BYTES 32

struct admind_conf admind_conf;

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *snap;			/* never changed once published */
static volatile sig_atomic_t stopping;

json_t *admind_snapshot(void)
{
	json_t *s;

	pthread_mutex_lock(&snap_lock);
	s = json_deep_copy(snap);
	pthread_mutex_unlock(&snap_lock);
	return s;
}

static void snapshot_publish(json_t *s)
{
	json_t *old;

	pthread_mutex_lock(&snap_lock);
	old = snap;
	snap = s;
	pthread_mutex_unlock(&snap_lock);
	json_decref(old);
}

/* ---- counters and rates ---- */

struct ctr {
	char name[64];
	double v;
	enum admind_kind kind;	/* how its rate is stored */
};

struct sample {
	bool have;
	int64_t pid;
	double resets;		/* presto-nfsd's count of statistics resets */
	double mono;		/* seconds, CLOCK_MONOTONIC, when answered */
	size_t n;
	struct ctr c[ADMIND_MAX_CTRS];
};

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_number(v) ? json_number_value(v) : 0;
}

static void ctr_add(struct sample *s, const char *name, double v)
{
	if (s->n >= ADMIND_MAX_CTRS)
		return;
	snprintf(s->c[s->n].name, sizeof(s->c[0].name), "%s", name);
	s->c[s->n++].v = v;
}

static const struct ctr *ctr_find(const struct sample *s, size_t hint, const char *name)
{
	if (hint < s->n && strcmp(s->c[hint].name, name) == 0)
		return &s->c[hint];
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->c[i].name, name) == 0)
			return &s->c[i];
	return NULL;
}

/* is_mount_proc -- a MOUNT procedure: its calls are not NFS operations and
 * stay out of "ops", "errors" and "lat_us" (ops.MNT... still has them) */
static bool is_mount_proc(const char *name)
{
	return strncmp(name, "MNT", 3) == 0 || strncmp(name, "UMNT", 4) == 0;
}

/* sample_counters -- the monotonic counters of one stats answer. For each
 * procedure: count, errors and the sum of latencies (mean * count). */
static void sample_counters(json_t *stats, struct sample *s)
{
	json_t *procs = json_object_get(stats, "procs"), *p;
	json_t *lg = json_object_get(stats, "log"), *ds = json_object_get(stats, "destage");
	size_t i;
	char k[64];

	s->n = 0;
	json_array_foreach(procs, i, p) {
		const char *name = json_string_value(json_object_get(p, "name"));

		if (!name)
			continue;
		snprintf(k, sizeof(k), "ops.%s", name);
		ctr_add(s, k, num(p, "count"));
		snprintf(k, sizeof(k), "errors.%s", name);
		ctr_add(s, k, num(p, "errors"));
		snprintf(k, sizeof(k), "lat_sum.%s", name);
		ctr_add(s, k, num(p, "mean_us") * num(p, "count"));
		/* the latency histogram, cumulative at the answer's
		 * latency_le_us: the interval's percentiles come from its growth */
		json_t *le = json_object_get(p, "le_counts"), *v;
		size_t b;
		json_array_foreach(le, b, v) {
			snprintf(k, sizeof(k), "le.%s.%zu", name, b);
			ctr_add(s, k, json_is_number(v) ? json_number_value(v) : 0);
		}
	}
	ctr_add(s, "log.appends", num(lg, "appends"));
	ctr_add(s, "log.append_bytes", num(lg, "append_bytes"));
	ctr_add(s, "log.persists", num(lg, "persists"));
	ctr_add(s, "log.full_waits", num(lg, "full_waits"));
	ctr_add(s, "log.fallbacks", num(lg, "fallbacks"));
	ctr_add(s, "destage.runs", num(ds, "runs"));
	ctr_add(s, "destage.bytes", num(ds, "bytes"));
	ctr_add(s, "destage.total_ms", num(ds, "total_ms"));
	ctr_add(s, "commits_avoided", num(stats, "commits_avoided"));
}

/* delta -- growth of a counter since prev; after a reset (the counter went
 * down) the whole current value is new */
static double delta(const struct sample *prev, size_t i, const struct ctr *c)
{
	const struct ctr *p = ctr_find(prev, i, c->name);

	if (!p)
		return NAN;
	return c->v >= p->v ? c->v - p->v : c->v;
}

/* interval_quantile -- the q-quantile (us) of proc's calls between prev and
 * cur, total of them: from the growth of its cumulative bucket counts
 * (le.PROC.b at bounds[b], right after ops.PROC at index i), interpolated
 * linearly within the bucket, as Prometheus' histogram_quantile. NAN when a
 * count went down (a reset) or is missing. */
static double interval_quantile(const struct sample *prev, const struct sample *cur, size_t i,
				const char *proc, json_t *bounds, double total, double q)
{
	double target = q * total, below = 0, lo = 0;
	char k[96];

	for (size_t b = 0; b < json_array_size(bounds); b++) {
		snprintf(k, sizeof(k), "le.%s.%zu", proc, b);
		const struct ctr *c = ctr_find(cur, i + 3 + b, k);
		const struct ctr *p = c ? ctr_find(prev, i + 3 + b, k) : NULL;
		if (!c || !p || c->v < p->v)
			return NAN;
		double cum = c->v - p->v;
		double hi = json_number_value(json_array_get(bounds, b));
		if (cum >= target && cum > below)
			return lo + (hi - lo) * (target - below) / (cum - below);
		below = cum;
		lo = hi;
	}
	return lo;	/* beyond the last bound: at least that */
}

struct writer {
	struct admind_db *db;
	int64_t ts;
	json_t *rates;		/* for the snapshot */
	int rc;
};

static void put(struct writer *w, const char *name, enum admind_kind kind, double v)
{
	int rc;

	if (!isfinite(v))
		return;
	if (kind == ADMIND_RATE)
		json_object_set_new(w->rates, name, json_real(v));
	if (kind == ADMIND_RATE && v == 0) {
		/* not stored: a missing rate of a known name reads as zero
		 * while "up" */
		if (w->db && (rc = admind_db_declare(w->db, name, kind)) < 0 && w->rc == 0)
			w->rc = rc;
		return;
	}
	if (w->db && (rc = admind_db_put(w->db, w->ts, name, kind, v)) < 0 && w->rc == 0)
		w->rc = rc;
}

/* sample_write -- the metrics of one sample (see admind_db.c for kinds) */
static void sample_write(struct writer *w, json_t *stats, json_t *status, const struct sample *prev,
			 const struct sample *cur)
{
	double dt = cur->mono - prev->mono, ops = 0, errs = 0, lat = 0, dappends = NAN;
	double dpersists = NAN, druns = NAN, dms = NAN;
	char k[96];

	put(w, "up", ADMIND_GAUGE, 1);
	put(w, "log.occupancy_pct", ADMIND_GAUGE, num(status, "occupancy_pct"));
	put(w, "log.dirty_bytes", ADMIND_GAUGE, num(status, "dirty_bytes"));
	put(w, "log.oldest_age_ms", ADMIND_GAUGE, num(status, "oldest_age_ms"));
	put(w, "destage.last_ms", ADMIND_GAUGE, num(json_object_get(stats, "destage"), "last_ms"));
	if (!prev->have || dt <= 0.2)
		return;		/* a baseline only: no rates */
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctr *c = &cur->c[i];
		double d = delta(prev, i, c);

		if (isnan(d))
			continue;
		if (strncmp(c->name, "ops.", 4) == 0) {
			const char *proc = c->name + 4;
			const struct ctr *lc;
			double dl;

			put(w, c->name, ADMIND_RATE, d / dt);
			if (is_mount_proc(proc) || d <= 0)
				continue;
			ops += d;
			snprintf(k, sizeof(k), "lat_sum.%s", proc);
			lc = ctr_find(cur, i + 2, k);
			dl = lc ? delta(prev, i + 2, lc) : NAN;
			if (isfinite(dl)) {
				lat += dl;
				snprintf(k, sizeof(k), "lat_us.%s", proc);
				put(w, k, ADMIND_GAUGE, dl / d);
			}
			/* the percentiles of this second's calls, not of the
			 * statistics interval's (nfsd's p50_us, p99_us) */
			json_t *bounds = json_object_get(stats, "latency_le_us");
			snprintf(k, sizeof(k), "p50_us.%s", proc);
			put(w, k, ADMIND_GAUGE, interval_quantile(prev, cur, i, proc, bounds, d, 0.50));
			snprintf(k, sizeof(k), "p99_us.%s", proc);
			put(w, k, ADMIND_GAUGE, interval_quantile(prev, cur, i, proc, bounds, d, 0.99));
		} else if (strncmp(c->name, "errors.", 7) == 0) {
			/* over the calls "ops" counts: NFS's, not MOUNT's (a
			 * refused MNT would otherwise be an error of no op) */
			if (!is_mount_proc(c->name + 7))
				errs += d;
		} else if (strncmp(c->name, "lat_sum.", 8) == 0 || strncmp(c->name, "le.", 3) == 0) {
			continue;
		} else {
			if (strcmp(c->name, "log.appends") == 0)
				dappends = d;
			if (strcmp(c->name, "log.persists") == 0)
				dpersists = d;
			if (strcmp(c->name, "destage.runs") == 0)
				druns = d;
			if (strcmp(c->name, "destage.total_ms") == 0) {
				dms = d;
				continue;
			}
			put(w, c->name, ADMIND_RATE, d / dt);
		}
	}
	put(w, "ops", ADMIND_RATE, ops / dt);
	put(w, "errors", ADMIND_RATE, errs / dt);
	if (ops > 0)
		put(w, "lat_us", ADMIND_GAUGE, lat / ops);
	if (dpersists > 0)
		put(w, "log.records_per_persist", ADMIND_GAUGE, dappends / dpersists);
	if (druns > 0)
		put(w, "destage.ms", ADMIND_GAUGE, dms / druns);
}

/* ---- the sampler ---- */

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void strip_envelope(json_t *o)
{
	json_object_del(o, "v");
	json_object_del(o, "ok");
	json_object_del(o, "cmd");
}

struct sampler {
	struct admind_db *db;
	struct admind_ctl *ctl;
	struct sample prev, cur;
	bool reachable;
	char error[512];
	int64_t samples, last_minute;
	int64_t started;
};

/* sampler_query -- one cmd on the sampler's connection (reconnecting);
 * NULL with s->error set when presto-nfsd does not answer */
static json_t *sampler_query(struct sampler *s, const char *cmd)
{
	json_t *req, *ans = NULL;
	int rc;

	if (!s->ctl && admind_ctl_open(admind_conf.control, &s->ctl, s->error, sizeof(s->error)) < 0)
		return NULL;
	req = json_pack("{ss}", "cmd", cmd);
	rc = admind_ctl_call(s->ctl, req, ADMIND_CTL_QUERY_MS, &ans, s->error, sizeof(s->error));
	json_decref(req);
	if (rc < 0) {
		admind_ctl_close(s->ctl);
		s->ctl = NULL;
		return NULL;
	}
	if (!json_is_true(json_object_get(ans, "ok"))) {
		snprintf(s->error, sizeof(s->error), "presto-nfsd refused %s: %s", cmd,
			 json_string_value(json_object_get(ans, "error")) ?: "?");
		json_decref(ans);
		return NULL;
	}
	strip_envelope(ans);
	return ans;
}

/* prev_zero -- the counters as a reset left them, for the first sample
 * after one: every count the sample holds was made since */
static void prev_zero(struct sample *prev)
{
	for (size_t i = 0; i < prev->n; i++)
		prev->c[i].v = 0;
}

static void sampler_tick(struct sampler *s)
{
	int64_t ts = time(NULL);
	json_t *ping = NULL, *stats = NULL, *status = NULL, *snapshot;
	struct writer w = { .db = s->db, .ts = ts, .rates = json_object() };
	bool was = s->reachable;

	ping = sampler_query(s, "ping");
	if (ping)
		stats = sampler_query(s, "stats");
	if (stats)
		status = sampler_query(s, "status");
	s->reachable = status != NULL;
	if (s->reachable) {
		int64_t pid = (int64_t)num(ping, "pid");

		s->error[0] = '\0';
		if (s->prev.have && s->prev.pid != pid)
			s->prev.have = false;	/* a new presto-nfsd: a baseline */
		s->cur.pid = pid;
		s->cur.mono = mono_s();
		sample_counters(stats, &s->cur);
		s->cur.resets = num(stats, "resets");
		if (s->prev.have && s->prev.resets != s->cur.resets)
			prev_zero(&s->prev);	/* reset since: all of it is new */
		s->cur.have = true;
		if (admind_db_begin(s->db) == 0) {
			sample_write(&w, stats, status, &s->prev, &s->cur);
			if (w.rc == 0)
				w.rc = admind_db_commit(s->db);
			else
				admind_db_commit(s->db);
		} else {
			w.rc = -EBUSY;
		}
		if (w.rc < 0)
			fprintf(stderr, "presto-admind: writing the sample of %lld to %s: %s\n",
				(long long)ts, admind_conf.db, strerror(-w.rc));
		else
			s->samples++;
		s->prev = s->cur;
		if (!was)
			fprintf(stderr, "presto-admind: sampling presto-nfsd (pid %lld) at %s\n",
				(long long)pid, admind_conf.control);
	} else {
		s->prev.have = false;
		if (was || s->samples == 0) {
			static bool told;

			if (was || !told)
				fprintf(stderr, "presto-admind: %s (a gap in the history until it answers)\n",
					s->error);
			told = true;
		}
	}
	snapshot = json_pack("{sI sb so sI sI sI so so so}",
			     "ts", (json_int_t)ts,
			     "reachable", s->reachable,
			     "error", s->error[0] ? json_string(s->error) : json_null(),
			     "nfsd_pid", (json_int_t)(s->reachable ? s->cur.pid : 0),
			     "samples", (json_int_t)s->samples,
			     "started", (json_int_t)s->started,
			     "status", status ? status : json_null(),
			     "stats", stats ? stats : json_null(),
			     "rates", w.rates);
	if (snapshot)
		snapshot_publish(snapshot);
	json_decref(ping);

	if (ts / 60 != s->last_minute) {
		int rc = admind_db_maintain(s->db, ts, admind_conf.raw_keep, admind_conf.rollup_keep);

		if (rc < 0)
			fprintf(stderr, "presto-admind: rollup and pruning of %s: %s\n", admind_conf.db,
				strerror(-rc));
		else
			s->last_minute = ts / 60;
	}
}

/* sampler_next -- when to sample next, on CLOCK_MONOTONIC: just after the
 * next wall-clock second, so that each sample has a second (time()) of its
 * own. Only the delay is taken from the wall clock; the sleep itself is on
 * the monotonic clock, so a step of the wall clock during it changes
 * nothing: sleeping until a CLOCK_REALTIME instant, a step back of an hour
 * would stall the sampler (no samples, a stale snapshot) for that hour. */
static void sampler_next(struct timespec *next)
{
	struct timespec wall;
	long delay_ns;

	clock_gettime(CLOCK_REALTIME, &wall);
	clock_gettime(CLOCK_MONOTONIC, next);
	/* to the next second, plus 20 ms: at most 1.02 s */
	delay_ns = 1000000000L - wall.tv_nsec + 20 * 1000 * 1000;
	next->tv_nsec += delay_ns;
	while (next->tv_nsec >= 1000000000L) {
		next->tv_sec++;
		next->tv_nsec -= 1000000000L;
	}
}

/* ---- the admin token ---- */

/* token_load -- read the token at path, creating it (0600, random) the first
 * time. A token file that others may read is refused. Returns 0 or -errno. */
static int token_load(const char *path, char *tok, size_t len)
{
	unsigned char raw[ADMIND_TOKEN_BYTES];
	struct stat st;
	ssize_t r;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			goto fail;
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
			goto fail;
		for (size_t i = 0; i < sizeof(raw); i++)
			sprintf(tok + 2 * i, "%02x", raw[i]);
		tok[2 * sizeof(raw)] = '\n';
		if (write(fd, tok, 2 * sizeof(raw) + 1) != (ssize_t)(2 * sizeof(raw) + 1) ||
		    fsync(fd) < 0)
			goto fail;
		tok[2 * sizeof(raw)] = '\0';
		close(fd);
		fprintf(stderr, "presto-admind: created the admin token %s\n", path);
		return 0;
	}
	if (fd < 0 || fstat(fd, &st) < 0)
		goto fail;
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077) || st.st_uid != geteuid()) {
		fprintf(stderr, "presto-admind: %s: the token file must be a regular file of ours, "
			"mode 0600 (chmod 600 it)\n", path);
		close(fd);
		return -EPERM;
	}
	r = read(fd, tok, len - 1);
	if (r < 0)
		goto fail;
	close(fd);
	tok[r] = '\0';
	tok[strcspn(tok, " \t\r\n")] = '\0';
	if (strlen(tok) < 16) {
		fprintf(stderr, "presto-admind: %s: the token is shorter than 16 characters\n", path);
		return -EINVAL;
	}
	return 0;
fail:
	rc = -errno;
	fprintf(stderr, "presto-admind: token file %s: %s\n", path, strerror(-rc));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- options ---- */

/* parse_duration -- seconds from "90", "90s", "15m", "24h", "90d" */
static int64_t parse_duration(const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || v <= 0)
		return -1;
	switch (*end) {
	case '\0': case 's': break;
	case 'm': v *= 60; break;
	case 'h': v *= 3600; break;
	case 'd': v *= 86400; break;
	default: return -1;
	}
	if (*end && end[1])
		return -1;
	return v;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: presto-admind [--state-dir DIR] [--control PATH] [--db PATH]\n"
		"                     [--listen ADDR:PORT] [--web DIR] [--token-file PATH]\n"
		"                     [--raw-retention T] [--rollup-retention T]\n"
		"\n"
		"  --state-dir DIR     where the defaults below live (" ADMIND_STATE_DIR ")\n"
		"  --control PATH      presto-nfsd's control socket (DIR/control.sock)\n"
		"  --db PATH           the SQLite history (DIR/admind.db)\n"
		"  --listen ADDR:PORT  HTTP address (127.0.0.1:8080; port 0: any free port);\n"
		"                      off loopback every request needs the token\n"
		"  --web DIR           the console's files (" ADMIND_WEB_DIR ")\n"
		"  --token-file PATH   the admin token, created 0600 at first start\n"
		"                      (DIR/admin.token)\n"
		"  --raw-retention T   keep per-second samples T (24h; s, m, h, d; at least 2m)\n"
		"  --rollup-retention T  keep per-minute rollups T (90d)\n"
		"See presto-admind(8).\n");
}

static char *path_in(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		exit(1);
	return p;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state-dir", required_argument, NULL, 'S' },
		{ "control", required_argument, NULL, 'c' },
		{ "db", required_argument, NULL, 'D' },
		{ "listen", required_argument, NULL, 'l' },
		{ "web", required_argument, NULL, 'w' },
		{ "token-file", required_argument, NULL, 't' },
		{ "raw-retention", required_argument, NULL, 'r' },
		{ "rollup-retention", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *state = ADMIND_STATE_DIR;
	char err[1024], token[256];
	struct sampler s = { 0 };
	struct admind_http *http = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	int opt, port, rc;

	admind_conf.listen = "127.0.0.1:8080";
	admind_conf.web = ADMIND_WEB_DIR;
	admind_conf.raw_keep = 86400;
	admind_conf.rollup_keep = 90 * 86400;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'S': state = optarg; break;
		case 'c': admind_conf.control = optarg; break;
		case 'D': admind_conf.db = optarg; break;
		case 'l': admind_conf.listen = optarg; break;
		case 'w': admind_conf.web = optarg; break;
		case 't': admind_conf.token_file = optarg; break;
		case 'r': case 'R': {
			int64_t v = parse_duration(optarg);

			if (v < 0 || (opt == 'r' && v < 120)) {
				fprintf(stderr, "presto-admind: bad retention \"%s\" (e.g. 24h, 90d; "
					"raw at least 2m)\n", optarg);
				return 64;
			}
			*(opt == 'r' ? &admind_conf.raw_keep : &admind_conf.rollup_keep) = v;
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 64;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 64;
	}
	if (!admind_conf.control)
		admind_conf.control = path_in(state, "control.sock");
	if (!admind_conf.db)
		admind_conf.db = path_in(state, "admind.db");
	if (!admind_conf.token_file)
		admind_conf.token_file = path_in(state, "admin.token");

	rc = token_load(admind_conf.token_file, token, sizeof(token));
	if (rc < 0)
		return 1;
	rc = admind_db_open(admind_conf.db, false, &s.db, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "presto-admind: %s\n", err);
		return 1;
	}
	s.started = time(NULL);
	snapshot_publish(json_pack("{sI sb ss sI sI sI sn sn so}", "ts", (json_int_t)s.started,
				   "reachable", 0, "error", "not sampled yet", "nfsd_pid",
				   (json_int_t)0, "samples", (json_int_t)0, "started",
				   (json_int_t)s.started, "status", "stats", "rates", json_object()));

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = admind_http_start(&admind_conf, token, &http, &port, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "presto-admind: %s\n", err);
		admind_db_close(s.db);
		return 1;
	}
	{
		const char *colon = strrchr(admind_conf.listen, ':');
		int hl = colon ? (int)(colon - admind_conf.listen) : 0;

		printf("presto-admind: ready http://%.*s:%d/ (history %s, token %s)\n", hl,
		       admind_conf.listen, port, admind_conf.db, admind_conf.token_file);
		fflush(stdout);
	}

	while (!stopping) {
		struct timespec next;

		sampler_tick(&s);
		sampler_next(&next);
		while (!stopping && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
	fprintf(stderr, "presto-admind: stopping\n");
	admind_ctl_cancel();	/* requests waiting for presto-nfsd answer 503 */
	admind_http_stop(http);
	admind_ctl_close(s.ctl);
	admind_db_close(s.db);
	snapshot_publish(NULL);
	return 0;
}
