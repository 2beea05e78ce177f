/*
 * presto.c -- the operator's command, after Prestoserve's presto(8).
 *
 *   presto [-s SOCKET] [--json]              state of the NVRAM log and the exports
 *   presto -p                                statistics
 *   presto -l                                exports, clients and options
 *   presto -R | -F | -u [EXPORT...] | -d [EXPORT...]
 *   presto ... -w SECONDS [COUNT]            repeat, like vmstat
 *
 * It talks only to presto-nfsd's control socket (nfsd/control.c: one JSON
 * object per line each way, protocol version 1) and knows nothing else of
 * the server. Exit status: 0 done, 1 the server refused a request (the
 * message says why, e.g. the unknown export's name), 2 the server could not
 * be reached (the message names the socket and the reason), or a usage
 * error.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PRESTO_DEFAULT_SOCKET "/var/lib/presto/control.sock"
#define PRESTO_QUERY_TIMEOUT_MS 30000
/* flush and disable wait for the backing filesystems: a full log of
 * several GiB takes a while to destage */
#define PRESTO_SLOW_TIMEOUT_MS 900000
#define PRESTO_MAX_ANSWER (16 * 1024 * 1024)

enum { EXIT_REFUSED = 1, EXIT_UNREACHABLE = 2, EXIT_USAGE = 64 };

static const char *sock_path;
static bool json_out;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: presto [-s SOCKET] [--json] [-p] [-l] [-R] [-F] [-u|-d [EXPORT...]]\n"
		"              [-w SECONDS [COUNT]]\n"
		"\n"
		"  (no option)     state of the NVRAM write log and of every export\n"
		"  -p              statistics: procedures, log, destager, recovery\n"
		"  -l              exports with their clients and options\n"
		"  -R              reset the statistics (starts a new interval)\n"
		"  -F              flush: destage the log now, return when durable\n"
		"  -u [EXPORT...]  enable acceleration (all exports when none is named)\n"
		"  -d [EXPORT...]  disable acceleration, flushing first (all when none named)\n"
		"  -w SECONDS [COUNT]  repeat the display every SECONDS, COUNT times\n"
		"  --json          print the server's answers as JSON, one object a line\n"
		"  -s, --socket SOCKET  control socket (default $PRESTO_SOCKET or\n"
		"                  " PRESTO_DEFAULT_SOCKET ")\n"
		"  -h, --help      this text\n"
		"\n"
		"Exit status: 0 success, 1 request refused, 2 presto-nfsd unreachable.\n"
		"See presto(8).\n");
}

/* ---- the connection ---- */

static int conn_fd = -1;
static char *conn_buf;
static size_t conn_len, conn_cap;

/* a watch (-w) past its first report: a server away (restarting) costs
 * the report due, not the watch */
static jmp_buf watch_jmp;
static bool watch_armed;

/*
 * shown -- s as printed: the bytes a terminal acts on (C0 controls, DEL, and
 * C1 controls encoded in UTF-8) as \xNN or \u00NN, and a backslash doubled,
 * so that an export path, a client name or a message from the server cannot
 * move the cursor, retitle the window or clear the screen. One of 8 buffers
 * in turn (a printf may show several); cut at 16 KiB.
 */
static const char *shown(const char *s)
{
	static char ring[8][4 * PATH_MAX + 8];
	static unsigned next;
	char *b = ring[next++ % 8], *p = b;
	const char *end = b + sizeof(ring[0]) - 8;

	for (; s && *s && p < end; s++) {
		unsigned char c = (unsigned char)*s, d = (unsigned char)s[1];

		if (c < 0x20 || c == 0x7f) {
			p += sprintf(p, "\\x%02x", c);
		} else if (c == 0xc2 && d >= 0x80 && d <= 0x9f) {
			p += sprintf(p, "\\u%04x", d);
			s++;
		} else {
			if (c == '\\')
				*p++ = '\\';
			*p++ = (char)c;
		}
	}
	*p = '\0';
	return b;
}

/* unreachable -- report that the server cannot be reached and exit 2 (or,
 * in a watch, go on with the next report). */
static void __attribute__((noreturn)) unreachable(const char *why)
{
	fprintf(stderr, "presto: cannot reach presto-nfsd at %s: %s\n", shown(sock_path), shown(why));
	if (watch_armed)
		longjmp(watch_jmp, 1);
	exit(EXIT_UNREACHABLE);
}

static void conn_open(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char why[512];

	if (strlen(sock_path) >= sizeof(sa.sun_path))
		unreachable("socket path too long");
	strcpy(sa.sun_path, sock_path);
	conn_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (conn_fd < 0)
		unreachable(strerror(errno));
	if (connect(conn_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return;
	switch (errno) {
	case ENOENT:
		snprintf(why, sizeof(why), "no such socket: presto-nfsd is not running, or "
			 "listens elsewhere (its \"control\" setting; use -s SOCKET)");
		break;
	case ECONNREFUSED:
		snprintf(why, sizeof(why), "not running (connection refused: a stale socket)");
		break;
	case EACCES:
	case EPERM:
		snprintf(why, sizeof(why), "permission denied (the socket is root's, mode 0600)");
		break;
	case ENOTDIR:
	case ENOTSOCK:
		snprintf(why, sizeof(why), "not a socket");
		break;
	default:
		snprintf(why, sizeof(why), "%s", strerror(errno));
	}
	unreachable(why);
}

/* conn_call -- send req (taken) and return the server's answer (a new
 * reference). Exits 2 when the server is gone or silent. */
static json_t *conn_call(json_t *req, int timeout_ms)
{
	char *line = json_dumps(req, JSON_COMPACT);
	size_t n, off = 0;
	char *nl;
	json_error_t je;
	json_t *ans;
	char why[256];

	json_decref(req);
	if (!line)
		unreachable("out of memory");
	n = strlen(line);
	line[n++] = '\n';		/* json_dumps' NUL is ours to replace */
	while (off < n) {
		ssize_t w = send(conn_fd, line + off, n - off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			snprintf(why, sizeof(why), "lost the connection: %s", strerror(errno));
			free(line);
			unreachable(why);
		}
		off += (size_t)w;
	}
	free(line);

	while (!(nl = conn_len ? memchr(conn_buf, '\n', conn_len) : NULL)) {
		struct pollfd p = { .fd = conn_fd, .events = POLLIN };
		int r = poll(&p, 1, timeout_ms);
		ssize_t got;

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0) {
			snprintf(why, sizeof(why), "no answer within %d s", timeout_ms / 1000);
			unreachable(why);
		}
		if (conn_len + 65536 > conn_cap) {
			if (conn_cap >= PRESTO_MAX_ANSWER)
				unreachable("answer too long");
			conn_cap = conn_cap ? conn_cap * 2 : 65536 * 2;
			if (!(conn_buf = realloc(conn_buf, conn_cap)))
				unreachable("out of memory");
		}
		got = recv(conn_fd, conn_buf + conn_len, conn_cap - conn_len, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			snprintf(why, sizeof(why), "the server closed the connection%s%s",
				 got < 0 ? ": " : "", got < 0 ? strerror(errno) : "");
			unreachable(why);
		}
		conn_len += (size_t)got;
	}
	ans = json_loadb(conn_buf, (size_t)(nl - conn_buf), 0, &je);
	conn_len -= (size_t)(nl + 1 - conn_buf);
	memmove(conn_buf, nl + 1, conn_len);
	if (!json_is_object(ans)) {
		snprintf(why, sizeof(why), "answer is not a JSON object: %s", je.text);
		json_decref(ans);
		unreachable(why);
	}
	if (json_is_true(json_object_get(ans, "refused"))) {
		snprintf(why, sizeof(why), "%s", json_string_value(json_object_get(ans, "error")) ?: "refused");
		json_decref(ans);
		unreachable(why);
	}
	return ans;
}

/* request -- run cmd (with the exports array names, or none) and return
 * the answer; with --json print it. A refusal is reported and *status set
 * to 1; the answer is returned all the same (NULL if refused). */
static json_t *request(const char *cmd, json_t *names, int *status)
{
	json_t *req = json_pack("{s:i, s:s}", "v", 1, "cmd", cmd);
	bool slow = !strcmp(cmd, "flush") || !strcmp(cmd, "disable") || !strcmp(cmd, "enable") ||
		    !strcmp(cmd, "reload");
	json_t *ans;

	if (names)
		json_object_set(req, "exports", names);
	ans = conn_call(req, slow ? PRESTO_SLOW_TIMEOUT_MS : PRESTO_QUERY_TIMEOUT_MS);
	if (json_out) {
		/* ASCII only: a C1 control of a name in a message (U+009B,
		 * CSI) reaches no terminal raw, as \u009b */
		char *s = json_dumps(ans, JSON_COMPACT | JSON_ENSURE_ASCII);

		if (s)
			printf("%s\n", s);
		free(s);
		fflush(stdout);
	}
	if (!json_is_true(json_object_get(ans, "ok"))) {
		const char *e = json_string_value(json_object_get(ans, "error"));

		fprintf(stderr, "presto: %s: %s\n", cmd, e ? shown(e) : "refused");
		*status = EXIT_REFUSED;
		json_decref(ans);
		return NULL;
	}
	return ans;
}

/* ---- formatting ---- */

static uint64_t num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	return json_is_real(v) ? (uint64_t)json_real_value(v) : 0;
}

static double real(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/* str -- the string o.k as printed (shown), "" when there is none */
static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? shown(s) : "";
}

/* human_bytes -- "12.3 MiB" */
static const char *human_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)b);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

/* human_time -- "01:02:03 (3723 s)", days prefixed when there are some */
static const char *human_time(uint64_t s, char *buf, size_t len)
{
	if (s >= 86400)
		snprintf(buf, len, "%llud %02llu:%02llu:%02llu (%llu s)", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600), (unsigned long long)(s % 3600 / 60),
			 (unsigned long long)(s % 60), (unsigned long long)s);
	else
		snprintf(buf, len, "%02llu:%02llu:%02llu (%llu s)", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60), (unsigned long long)(s % 60),
			 (unsigned long long)s);
	return buf;
}

static const char *kind_text(const char *kind)
{
	if (!strcmp(kind, "pmem"))
		return "real persistent memory (CPU cache flushes)";
	if (!strcmp(kind, "emulated"))
		return "emulated persistent memory (PMEM_IS_PMEM_FORCE: not power-safe)";
	if (!strcmp(kind, "msync"))
		return "msync-backed file (not persistent memory)";
	if (!strcmp(kind, "none") || !*kind)
		return "none (no NVRAM log: every export writes through)";
	return kind;
}

#define ROW "%-22s "

/* off_reason -- " (why)" export e (of a status or exports answer) cannot be
 * accelerated, or "" when nothing in its configuration stops it */
static const char *off_reason(json_t *e)
{
	if (json_is_true(json_object_get(e, "read_only")))
		return " (read-only)";
	if (!json_is_true(json_object_get(e, "presto_option")))
		return " (nopresto in the exports file)";
	if (json_is_true(json_object_get(e, "no_mark")))
		return " (its root refuses the log's extended attribute)";
	return "";
}

static void show_status(json_t *st)
{
	json_t *nv = json_object_get(st, "nvram"), *ex = json_object_get(st, "exports"), *e;
	char b1[64], b2[64];
	size_t i, on = 0, width = 0;

	printf(ROW "%s\n", "state", str(st, "state"));
	if (json_is_true(json_object_get(st, "log_open"))) {
		printf(ROW "%s\n", "NVRAM", str(nv, "path"));
		printf(ROW "%s\n", "  kind", kind_text(str(nv, "kind")));
		printf(ROW "%s (%llu bytes)\n", "  size", human_bytes(num(nv, "size"), b1, sizeof(b1)),
		       (unsigned long long)num(nv, "size"));
		printf(ROW "%.1f%% of %s\n", "occupancy", real(st, "occupancy_pct"),
		       human_bytes(num(st, "area_bytes"), b1, sizeof(b1)));
		printf(ROW "%s (%llu bytes)\n", "dirty", human_bytes(num(st, "dirty_bytes"), b2, sizeof(b2)),
		       (unsigned long long)num(st, "dirty_bytes"));
		if (num(st, "dirty_bytes"))
			printf(ROW "%.1f s\n", "oldest record", real(st, "oldest_age_ms") / 1000);
		else
			printf(ROW "-\n", "oldest record");
	} else {
		printf(ROW "%s\n", "NVRAM", kind_text(str(nv, "kind")));
	}
	if (json_is_true(json_object_get(st, "held")))
		printf(ROW "held (destaging only when the log fills)\n", "destager");
	printf(ROW "%s\n", "statistics interval", human_time(num(st, "interval_s"), b1, sizeof(b1)));
	if (json_is_number(json_object_get(st, "efficiency_pct")))
		printf(ROW "%.1f%% (%llu of %llu modifying calls logged)\n", "write-log efficiency",
		       real(st, "efficiency_pct"), (unsigned long long)num(st, "logged_calls"),
		       (unsigned long long)num(st, "modifying_calls"));
	else
		printf(ROW "- (no modifying calls yet)\n", "write-log efficiency");
	json_array_foreach(ex, i, e) {
		size_t l = strlen(str(e, "path"));

		on += json_is_true(json_object_get(e, "presto"));
		if (l > width)
			width = l;
	}
	if (json_array_size(ex) == 0)
		printf(ROW "none\n", "exports");
	else if (on == json_array_size(ex))
		printf(ROW "all %zu accelerated\n", "exports", on);
	else
		printf(ROW "%zu of %zu accelerated\n", "exports", on, json_array_size(ex));
	json_array_foreach(ex, i, e) {
		bool acc = json_is_true(json_object_get(e, "presto"));
		printf("  %-*s  %s%s\n", (int)width, str(e, "path"), acc ? "on" : "off",
		       acc ? "" : off_reason(e));
	}
}

static void show_stats(json_t *st)
{
	json_t *procs = json_object_get(st, "procs"), *p;
	json_t *lg = json_object_get(st, "log"), *ds = json_object_get(st, "destage");
	json_t *rc = json_object_get(st, "recovery"), *drc = json_object_get(st, "drc");
	char b1[64], b2[64];
	uint64_t total = 0, errors = 0;
	size_t i;

	printf("%-22s %s\n", "statistics interval", human_time(num(st, "interval_s"), b1, sizeof(b1)));
	printf("%-22s %s\n", "uptime", human_time(num(st, "uptime_s"), b2, sizeof(b2)));
	printf("%-22s %s\n\n", "state", str(st, "state"));

	printf("%-12s %12s %10s %12s %12s %12s %12s %12s\n", "procedure", "calls", "errors",
	       "mean us", "p50 us", "p99 us", "logged", "in log us");
	json_array_foreach(procs, i, p) {
		if (!num(p, "count"))
			continue;
		total += num(p, "count");
		errors += num(p, "errors");
		printf("%-12s %12llu %10llu %12.1f %12.1f %12.1f %12llu %12.1f\n", str(p, "name"),
		       (unsigned long long)num(p, "count"), (unsigned long long)num(p, "errors"),
		       real(p, "mean_us"), real(p, "p50_us"), real(p, "p99_us"),
		       (unsigned long long)num(p, "log_count"), real(p, "log_mean_us"));
	}
	printf("%-12s %12llu %10llu\n\n", "total", (unsigned long long)total,
	       (unsigned long long)errors);

#define KV(label, fmt, ...) printf("  %-26s " fmt "\n", label, __VA_ARGS__)
	printf("NVRAM log\n");
	KV("appends", "%14llu", (unsigned long long)num(lg, "appends"));
	KV("bytes appended", "%14llu  (%s)", (unsigned long long)num(lg, "append_bytes"),
	   human_bytes(num(lg, "append_bytes"), b1, sizeof(b1)));
	KV("persists", "%14llu", (unsigned long long)num(lg, "persists"));
	KV("records per persist", "%14.2f", real(lg, "records_per_persist"));
	KV("persist errors", "%14llu", (unsigned long long)num(lg, "persist_errors"));
	KV("full-log waits", "%14llu", (unsigned long long)num(lg, "full_waits"));
	KV("full-log timeouts", "%14llu", (unsigned long long)num(lg, "full_timeouts"));
	KV("JUKEBOX replies", "%14llu", (unsigned long long)num(lg, "jukebox"));
	KV("fallbacks to sync", "%14llu", (unsigned long long)num(lg, "fallbacks"));
	KV("time waiting for persists", "%14.1f ms", real(lg, "wait_ms_total"));
	KV("dirty bytes", "%14llu", (unsigned long long)num(lg, "dirty_bytes"));
	KV("COMMITs avoided", "%14llu", (unsigned long long)num(st, "commits_avoided"));
	KV("directory stamps coalesced", "%14llu", (unsigned long long)num(st, "stamps_coalesced"));
	printf("destager\n");
	KV("runs", "%14llu", (unsigned long long)num(ds, "runs"));
	KV("bytes destaged", "%14llu  (%s)", (unsigned long long)num(ds, "bytes"),
	   human_bytes(num(ds, "bytes"), b1, sizeof(b1)));
	KV("errors", "%14llu", (unsigned long long)num(ds, "errors"));
	KV("checkpoint time, last", "%14.1f ms", real(ds, "last_ms"));
	KV("checkpoint time, mean", "%14.1f ms", real(ds, "mean_ms"));
	KV("checkpoint time, total", "%14.1f ms", real(ds, "total_ms"));
	printf("recovery (at start-up)\n");
	KV("replayed", "%14s", json_is_true(json_object_get(rc, "replayed")) ? "yes" : "no");
	KV("records", "%14llu", (unsigned long long)num(rc, "records"));
	KV("bytes", "%14llu", (unsigned long long)num(rc, "bytes"));
	KV("time", "%14.1f ms", real(rc, "ms"));
	KV("handle redirects", "%14llu", (unsigned long long)num(rc, "redirects"));
	KV("errors", "%14llu", (unsigned long long)num(rc, "errors"));
	json_t *lp = json_object_get(st, "loop");
	if (lp) {
		printf("event loop thread\n");
		KV("calls run there", "%14llu", (unsigned long long)num(lp, "inline"));
		KV("handed to workers", "%14llu", (unsigned long long)num(lp, "deferred"));
		KV("pauses after slow calls", "%14llu", (unsigned long long)num(lp, "pauses"));
		KV("calls in flight hold", "%14llu bytes", (unsigned long long)num(lp, "request_bytes"));
		KV("stops at request_memory", "%14llu",
		   (unsigned long long)num(lp, "request_memory_waits"));
		KV("records in progress hold", "%14llu bytes",
		   (unsigned long long)num(lp, "record_bytes"));
		KV("closed for their records", "%14llu",
		   (unsigned long long)num(lp, "record_memory_closes"));
	}
	printf("duplicate request cache\n");
	KV("replayed replies", "%14llu", (unsigned long long)num(drc, "hits"));
	KV("retransmits dropped", "%14llu", (unsigned long long)num(drc, "drops"));
	KV("entries", "%14llu", (unsigned long long)num(drc, "entries"));
#undef KV
}

static void show_exports(json_t *ans)
{
	json_t *ex = json_object_get(ans, "exports"), *e, *cl, *c;
	size_t i, j;

	json_array_foreach(ex, i, e) {
		bool acc = json_is_true(json_object_get(e, "presto"));
		printf("%s\tid=%llu presto=%s%s\n", str(e, "path"), (unsigned long long)num(e, "id"),
		       acc ? "on" : "off", acc ? "" : off_reason(e));
		cl = json_object_get(e, "clients");
		json_array_foreach(cl, j, c)
			printf("\t%s(%s)\n", str(c, "client"), str(c, "options"));
	}
}

static void show_switched(json_t *ans, json_t *names, bool on)
{
	json_t *ex = json_object_get(ans, "exports"), *e;
	size_t i;

	json_array_foreach(ex, i, e) {
		bool named = json_array_size(names) == 0;
		size_t k;
		json_t *n;

		json_array_foreach(names, k, n) {
			/* the server normalised the path; compare loosely on a trailing '/' */
			const char *a = json_string_value(n), *b = json_string_value(json_object_get(e, "path"));
			size_t la = strlen(a);

			if (!b)
				continue;

			while (la > 1 && a[la - 1] == '/')
				la--;
			named |= la == strlen(b) && !strncmp(a, b, la);
		}
		if (named) {
			bool acc = json_is_true(json_object_get(e, "presto"));
			printf("%s: presto %s%s\n", str(e, "path"), acc ? "on" : "off",
			       acc || !on ? "" : off_reason(e));
		}
	}
}

static void show_time_header(void)
{
	char buf[64];
	time_t t = time(NULL);

	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", localtime(&t));
	printf("--- %s\n", buf);
}

/* report -- one report of the displays asked for; the exit status it
 * comes to. A report of a watch after the first (again) asks on a new
 * connection: the server drops a client idle for 15 minutes, and may have
 * restarted meanwhile; while it is away, that report says so and is the
 * only one lost. */
static int report_status;

static void report_show(bool status_display, bool p, bool l, bool repeat)
{
	json_t *ans;

	if (repeat && !json_out)
		show_time_header();
	if (status_display && (ans = request("status", NULL, &report_status))) {
		if (!json_out)
			show_status(ans);
		json_decref(ans);
	}
	if (p && (ans = request("stats", NULL, &report_status))) {
		if (!json_out) {
			if (status_display)
				printf("\n");
			show_stats(ans);
		}
		json_decref(ans);
	}
	if (l && (ans = request("exports", NULL, &report_status))) {
		if (!json_out) {
			if (status_display || p)
				printf("\n");
			show_exports(ans);
		}
		json_decref(ans);
	}
}

static int report(bool status_display, bool p, bool l, bool repeat, bool again)
{
	report_status = 0;
	if (again) {
		if (conn_fd >= 0)
			close(conn_fd);
		conn_fd = -1;
		conn_len = 0;
		watch_armed = true;
		if (setjmp(watch_jmp))
			return EXIT_UNREACHABLE;
		conn_open();
	}
	report_show(status_display, p, l, repeat);
	return report_status;
}

static bool parse_uint(const char *s, unsigned long *out)
{
	char *end;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return !errno && !*end;
}

int main(int argc, char **argv)
{
	enum { O_JSON = 256 };
	static const struct option opts[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool p = false, l = false, R = false, F = false, u = false, d = false;
	unsigned long interval = 0, count = 0;
	bool repeat = false;
	json_t *names = NULL, *ans;
	int c, status = 0;

	sock_path = getenv("PRESTO_SOCKET");
	if (!sock_path || !*sock_path)
		sock_path = PRESTO_DEFAULT_SOCKET;
	while ((c = getopt_long(argc, argv, "plRFudw:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': p = true; break;
		case 'l': l = true; break;
		case 'R': R = true; break;
		case 'F': F = true; break;
		case 'u': u = true; break;
		case 'd': d = true; break;
		case 'w':
			/* sleep(3) takes an unsigned int: more would wrap, to 0 */
			if (!parse_uint(optarg, &interval) || interval == 0 || interval > UINT_MAX) {
				fprintf(stderr, "presto: -w wants a whole number of seconds, not \"%s\"\n", optarg);
				return EXIT_USAGE;
			}
			repeat = true;
			break;
		case 's': sock_path = optarg; break;
		case O_JSON: json_out = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (u && d) {
		fprintf(stderr, "presto: -u and -d together: say which\n");
		return EXIT_USAGE;
	}
	names = json_array();
	for (int i = optind; i < argc; i++) {
		if (repeat && i == optind && parse_uint(argv[i], &count) && count > 0) {
			continue;	/* COUNT: an export is an absolute path */
		} else if (u || d) {
			json_t *name = json_string(argv[i]);
			if (!name || json_array_append_new(names, name) < 0) {
				/* not one name dropped: an empty list means every export */
				fprintf(stderr, "presto: export name \"%s\" is not valid UTF-8\n", argv[i]);
				json_decref(names);
				return EXIT_USAGE;
			}
		} else {
			fprintf(stderr, "presto: unexpected argument \"%s\"%s\n", argv[i],
				repeat ? " (COUNT is a positive number)" : " (export names go with -u or -d)");
			usage(stderr);
			json_decref(names);
			return EXIT_USAGE;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	conn_open();

	/* actions first, in Prestoserve's order: -d before -u and -R */
	if (d && (ans = request("disable", names, &status))) {
		if (!json_out)
			show_switched(ans, names, false);
		json_decref(ans);
	}
	if (u && !status && (ans = request("enable", names, &status))) {
		if (!json_out)
			show_switched(ans, names, true);
		json_decref(ans);
	}
	if (F && !status && (ans = request("flush", NULL, &status))) {
		if (!json_out)
			printf("flushed: the log is destaged and durable (%.1f ms)\n", real(ans, "ms"));
		json_decref(ans);
	}
	if (R && !status && (ans = request("reset", NULL, &status))) {
		if (!json_out)
			printf("statistics reset\n");
		json_decref(ans);
	}
	if (status)
		goto out;

	/* then the displays: the state when nothing else was asked */
	bool status_display = !p && !l && !(u || d || F || R);
	if (!status_display && !p && !l && !repeat)
		goto out;
	if (!status_display && !p && !l)
		status_display = true;	/* -w with an action alone: watch the state */
	for (unsigned long n = 0;; n++) {
		if (n > 0) {
			if (!json_out)
				printf("\n");
			sleep((unsigned)interval);
		}
		status = report(status_display, p, l, repeat, n > 0);
		if (!repeat || status == EXIT_REFUSED || (count && n + 1 >= count))
			break;
	}
out:
	watch_armed = false;
	json_decref(names);
	if (conn_fd >= 0)
		close(conn_fd);
	free(conn_buf);
	return status;
}
