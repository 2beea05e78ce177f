/*
 * admind_http.c -- presto-admind's HTTP server (libmicrohttpd).
 *
 *   GET  /api/status                  admind and presto-nfsd state, alarms
 *   GET  /api/stats                   the latest sample: counters and rates
 *   GET  /api/series?metric=a,b&from=&to=&step=   history from SQLite
 *   GET  /api/metrics                 the metric names stored, with kinds
 *   GET  /api/exports                 exports and their acceleration
 *   POST /api/flush                   destage the log now
 *   POST /api/exports/NAME/presto     {"presto": true|false} (NAME: path or id)
 *   POST /api/stats/reset             start a new statistics interval
 *   GET  /metrics                     Prometheus text exposition
 *   GET  /, /FILE                     the console (files of --web DIR)
 *
 * Access. Bound to loopback: reads are open, a POST needs the admin token
 * ("Authorization: Bearer TOKEN", or Basic with the token as the password)
 * and must not come from another origin (Origin, else Sec-Fetch-Site); the
 * Host header must name a loopback host, so that a DNS-rebound page cannot
 * read either. Bound elsewhere: every request needs the token (Basic lets a
 * browser ask for it). No CORS headers are ever sent.
 *
 * Threads. One thread per connection (libmicrohttpd's), at most
 * HTTP_MAX_CONNS: a flush that waits minutes for the disk holds its own
 * connection only. Each request opens its own read-only SQLite connection
 * and its own control connection: nothing is shared but the snapshot copy.
 *
 * Slow clients. The connection limits (HTTP_MAX_CONNS, half of it per
 * address) make connections worth holding, and MHD's timeout is an idle
 * one: a client that sends a header line every few seconds, never ending
 * its headers, would keep its connection for ever, before its token could
 * be looked at (slowloris). So a request's headers must be in within
 * HTTP_HEADER_TIMEOUT of the connection, or of the answer to the one
 * before (a kept-alive connection waiting for its next request), and so
 * must its body (at most HTTP_MAX_BODY bytes, which a client trickling one
 * byte at a time would otherwise spread over hours): a watchdog thread
 * shuts the socket down after that (MHD 0.9 has no such option). Once the
 * headers are in, the request is refused there if it may not go on (its
 * token, its Host, its origin, a body announced too large), without
 * reading its body; a refusal for the token also closes the connection.
 * What is left is a client that reconnects as fast as it is cut: that only
 * a firewall or a proxy in front can stop.
 *
 * Bounds: a request body is at most HTTP_MAX_BODY bytes (413), headers are
 * bounded by MHD's connection memory limit, a series by ADMIND_DB_MAX_BUCKETS
 * points and the series of one request by ADMIND_DB_MAX_POINTS. Every error
 * is a JSON object {"error": "...", "status": N}.
 */
#include "admin/admind.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HTTP_MAX_BODY   4096
#define HTTP_MAX_CONNS  64
#define HTTP_MAX_SERIES 32
#define HTTP_IDLE_TIMEOUT   30	/* s without a byte either way */
#define HTTP_HEADER_TIMEOUT 10	/* s for a request's headers and body, however they trickle */
#define HTTP_WATCH_MS       250	/* how often the watchdog looks */

/* one open connection, for the header deadline */
struct http_conn {
	struct http_conn *prev, *next;
	int fd;			/* our duplicate of its socket: shut down, never
				 * a descriptor MHD may have closed and reused */
	double deadline;	/* CLOCK_MONOTONIC s; 0 while a request is in hand */
};

struct admind_http {
	struct MHD_Daemon *d;
	const struct admind_conf *conf;
	char token[256];
	size_t token_len;
	int lfd, port;
	bool loopback;
	/* the connections and the watchdog that cuts the slow ones */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct http_conn *conns;
	pthread_t watchdog;
	bool stopping;
};

struct http_req {
	size_t len;
	bool too_big;
	char body[HTTP_MAX_BODY + 1];
};

/* ---- replies ---- */

static void add_common_headers(struct MHD_Response *r)
{
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "X-Frame-Options", "DENY");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, "Cache-Control", "no-store");
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *type,
				  char *text, size_t len)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	add_common_headers(r);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* reply_json -- send body (stolen) */
static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, json_t *body)
{
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	if (!s)
		return MHD_NO;
	return reply_text(c, status, "application/json", s, strlen(s));
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* utf8_clean -- make s valid UTF-8 in place: each byte that does not start
 * a well-formed sequence (a URL's %FF, a character cut by the message's
 * length) becomes '?'. JSON strings must be UTF-8. */
static void utf8_clean(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		unsigned n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 :
			     (*p & 0xf8) == 0xf0 ? 3 : 9;
		uint32_t cp = n == 0 ? *p : n == 1 ? *p & 0x1fu : n == 2 ? *p & 0x0fu : *p & 0x07u;
		unsigned k = 1;
		for (; n != 9 && k <= n && (p[k] & 0xc0) == 0x80; k++)
			cp = cp << 6 | (p[k] & 0x3fu);
		bool ok = n != 9 && k == n + 1 &&
			  (n == 0 || (n == 1 && cp >= 0x80) ||
			   (n == 2 && cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff)) ||
			   (n == 3 && cp >= 0x10000 && cp <= 0x10ffff));
		if (!ok) {
			*p++ = '?';
			continue;
		}
		p += n + 1;
	}
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_clean(msg);	/* else json_pack fails and no answer goes out */
	return reply_json(c, status, json_pack("{ss si}", "error", msg, "status", (int)status));
}

static enum MHD_Result reply_auth(struct admind_http *h, struct MHD_Connection *c, const char *why)
{
	json_t *body = json_pack("{ss si}", "error", why, "status", 401);
	char *s = json_dumps(body, JSON_COMPACT);
	struct MHD_Response *r;
	enum MHD_Result ret;

	json_decref(body);
	if (!s)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	add_common_headers(r);
	/* off loopback the browser must be able to ask for the token */
	MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
				h->loopback ? "Bearer realm=\"presto-admind\""
					    : "Basic realm=\"presto-admind\", charset=\"UTF-8\"");
	/* no kept connection for a client without the token (off loopback,
	 * any client): it would hold one of the limited connections */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_method(struct MHD_Connection *c, const char *allow)
{
	json_t *body = json_pack("{ss si}", "error", "method not allowed", "status", 405);
	char *s = json_dumps(body, JSON_COMPACT);
	struct MHD_Response *r;
	enum MHD_Result ret;

	json_decref(body);
	if (!s)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	add_common_headers(r);
	ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- access ---- */

/* authorized -- the request carries the admin token */
static bool authorized(struct admind_http *h, struct MHD_Connection *c)
{
	const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	unsigned char bin[512];
	size_t blen = 0;
	const char *tok = NULL;
	size_t tlen = 0;

	if (!a)
		return false;
	if (strncasecmp(a, "Bearer ", 7) == 0) {
		tok = a + 7;
		while (*tok == ' ')
			tok++;
		tlen = strlen(tok);
	} else if (strncasecmp(a, "Basic ", 6) == 0) {
		const char *b = a + 6, *colon;

		while (*b == ' ')
			b++;
		if (strlen(b) > 600 ||
		    sodium_base642bin(bin, sizeof(bin) - 1, b, strlen(b), NULL, &blen, NULL,
				      sodium_base64_VARIANT_ORIGINAL) != 0)
			return false;
		bin[blen] = '\0';
		colon = memchr(bin, ':', blen);
		if (!colon)
			return false;
		tok = colon + 1;
		tlen = blen - (size_t)(colon + 1 - (const char *)bin);
	}
	return tok && tlen == h->token_len && sodium_memcmp(tok, h->token, tlen) == 0;
}

/* host_part -- the host of a Host header value, without port or brackets */
static void host_part(const char *host, char *out, size_t len)
{
	const char *end;

	if (host[0] == '[') {
		end = strchr(host, ']');
		host++;
	} else {
		end = strrchr(host, ':');
	}
	if (!end)
		end = host + strlen(host);
	snprintf(out, len, "%.*s", (int)(end - host), host);
}

static bool host_is_loopback(const char *host)
{
	char h[256];
	struct in_addr a4;
	struct in6_addr a6;

	host_part(host, h, sizeof(h));
	if (strcasecmp(h, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, h, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, h, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return false;
}

/* same_origin -- a state change may come from the console or from a program
 * (no Origin, no Sec-Fetch-Site), never from another site's page */
static bool same_origin(struct MHD_Connection *c)
{
	const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
	const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	char want[300];

	if (origin) {
		if (!host)
			return false;
		snprintf(want, sizeof(want), "http://%s", host);
		return strcasecmp(origin, want) == 0;
	}
	if (site)
		return strcmp(site, "same-origin") == 0 || strcmp(site, "none") == 0;
	return true;
}

/* ---- the API ---- */

static json_t *alarms_of(json_t *snap)
{
	json_t *a = json_array(), *st = json_object_get(snap, "status");
	json_t *stats = json_object_get(snap, "stats");
	json_t *lg = json_object_get(stats, "log"), *ds = json_object_get(stats, "destage");
	const char *state = json_string_value(json_object_get(st, "state"));
	double occ = json_number_value(json_object_get(st, "occupancy_pct"));
	double age = json_number_value(json_object_get(st, "oldest_age_ms"));

#define ALARM(level, ...) do { \
		char m_[256]; \
		snprintf(m_, sizeof(m_), __VA_ARGS__); \
		json_array_append_new(a, json_pack("{ss ss}", "level", level, "text", m_)); \
	} while (0)
	if (!json_is_true(json_object_get(snap, "reachable"))) {
		ALARM("critical", "presto-nfsd unreachable: %s",
		      json_string_value(json_object_get(snap, "error")) ?: "?");
		return a;
	}
	if (state && strcmp(state, "UP") != 0)
		ALARM(strcmp(state, "RECOVERING") == 0 ? "warning" : "critical", "log state %s", state);
	if (json_is_false(json_object_get(st, "log_open")))
		ALARM("warning", "no NVRAM log open: every modification is synced");
	if (occ >= 90)
		ALARM("critical", "NVRAM %.0f%% full: clients wait for the destager", occ);
	else if (occ >= 75)
		ALARM("warning", "NVRAM %.0f%% full", occ);
	if (age >= 60000)
		ALARM("warning", "oldest log record %.0f s old", age / 1000);
	if (json_is_true(json_object_get(st, "held")))
		ALARM("warning", "destaging held");
	if (json_integer_value(json_object_get(lg, "persist_errors")) > 0)
		ALARM("critical", "%lld persist errors",
		      (long long)json_integer_value(json_object_get(lg, "persist_errors")));
	if (json_integer_value(json_object_get(ds, "errors")) > 0)
		ALARM("critical", "%lld destage errors",
		      (long long)json_integer_value(json_object_get(ds, "errors")));
	if (json_integer_value(json_object_get(lg, "fallbacks")) > 0)
		ALARM("warning", "%lld records could not be logged (synced instead)",
		      (long long)json_integer_value(json_object_get(lg, "fallbacks")));
#undef ALARM
	return a;
}

static enum MHD_Result api_status(struct admind_http *h, struct MHD_Connection *c)
{
	json_t *snap = admind_snapshot(), *ad, *res;
	struct admind_db *db;
	int64_t raw = -1, roll = -1;
	char err[512];

	if (!snap)
		return reply_error(c, 503, "no snapshot yet");
	if (admind_db_open(h->conf->db, true, &db, err, sizeof(err)) == 0) {
		admind_db_counts(db, &raw, &roll);
		admind_db_close(db);
	}
	ad = json_pack("{si sI sI sI ss ss sI sI sI sI}",
		       "pid", (int)getpid(),
		       "started", json_integer_value(json_object_get(snap, "started")),
		       "uptime_s", (json_int_t)(time(NULL) - json_integer_value(json_object_get(snap, "started"))),
		       "samples", json_integer_value(json_object_get(snap, "samples")),
		       "db", h->conf->db, "control", h->conf->control,
		       "raw_retention_s", (json_int_t)h->conf->raw_keep,
		       "rollup_retention_s", (json_int_t)h->conf->rollup_keep,
		       "raw_rows", (json_int_t)raw, "rollup_rows", (json_int_t)roll);
	res = json_pack("{so sO sO sO sO so}", "admind", ad,
			"ts", json_object_get(snap, "ts"),
			"reachable", json_object_get(snap, "reachable"),
			"error", json_object_get(snap, "error"),
			"nfsd", json_object_get(snap, "status"),
			"alarms", alarms_of(snap));
	json_decref(snap);
	return reply_json(c, MHD_HTTP_OK, res);
}

static enum MHD_Result api_stats(struct MHD_Connection *c)
{
	json_t *snap = admind_snapshot(), *res;

	if (!snap || json_is_null(json_object_get(snap, "stats"))) {
		enum MHD_Result r = reply_error(c, 503, "presto-nfsd unreachable: %s",
			json_string_value(json_object_get(snap, "error")) ?: "not sampled yet");

		json_decref(snap);
		return r;
	}
	res = json_pack("{sO sO sO}", "ts", json_object_get(snap, "ts"),
			"stats", json_object_get(snap, "stats"), "rates", json_object_get(snap, "rates"));
	json_decref(snap);
	return reply_json(c, MHD_HTTP_OK, res);
}

/* arg_int -- a query argument as a whole integer; false when malformed */
static bool arg_int(struct MHD_Connection *c, const char *name, int64_t dflt, int64_t *v)
{
	const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	char *end;
	long long x;

	if (!s || !*s) {
		*v = dflt;
		return true;
	}
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno || *end || x < -(1LL << 40) || x > (1LL << 40))
		return false;
	*v = x;
	return true;
}

static enum MHD_Result api_series(struct admind_http *h, struct MHD_Connection *c)
{
	const char *m = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "metric");
	const char *names[HTTP_MAX_SERIES];
	char buf[HTTP_MAX_SERIES * 65], *save, *tok, err[512];
	size_t n = 0;
	int64_t now = time(NULL), from, to, step;
	struct admind_db *db;
	json_t *res;
	int rc;

	if (!m || !*m)
		return reply_error(c, 400, "metric is required (e.g. metric=ops,lat_us; "
				   "GET /api/metrics lists them)");
	if (strlen(m) >= sizeof(buf))
		return reply_error(c, 400, "metric list too long");
	for (const char *p = m; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._,-", *p))
			return reply_error(c, 400, "metric names are letters, digits, '.', '_' and '-'");
	strcpy(buf, m);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == HTTP_MAX_SERIES)
			return reply_error(c, 400, "at most %d metrics at once", HTTP_MAX_SERIES);
		if (strlen(tok) > 64)
			return reply_error(c, 400, "metric name longer than 64 characters");
		names[n++] = tok;
	}
	if (!n)
		return reply_error(c, 400, "metric is required");
	if (!arg_int(c, "to", now + 1, &to) || !arg_int(c, "from", to - 300, &from))
		return reply_error(c, 400, "from and to are unix seconds, or negative: seconds before now");
	if (to <= 0)
		to += now + 1;
	if (from < 0)
		from += now + 1;
	if (from >= to)
		return reply_error(c, 400, "from must be before to");
	if (!arg_int(c, "step", (to - from + 299) / 300, &step) || step <= 0)
		return reply_error(c, 400, "step is a positive number of seconds");
	rc = admind_db_open(h->conf->db, true, &db, err, sizeof(err));
	if (rc < 0)
		return reply_error(c, 503, "history unavailable: %s", err);
	rc = admind_db_series(db, names, n, from, to, step, now, h->conf->raw_keep, &res, err,
			      sizeof(err));
	admind_db_close(db);
	if (rc == -EINVAL)
		return reply_error(c, 400, "%s", err);
	if (rc < 0)
		return reply_error(c, 500, "%s", err);
	return reply_json(c, MHD_HTTP_OK, res);
}

static enum MHD_Result api_metrics(struct admind_http *h, struct MHD_Connection *c)
{
	struct admind_db *db;
	json_t *m;
	char err[512];
	int rc = admind_db_open(h->conf->db, true, &db, err, sizeof(err));

	if (rc < 0)
		return reply_error(c, 503, "history unavailable: %s", err);
	rc = admind_db_metrics(db, &m);
	admind_db_close(db);
	if (rc < 0)
		return reply_error(c, 500, "reading the metric list: %s", strerror(-rc));
	return reply_json(c, MHD_HTTP_OK, json_pack("{so}", "metrics", m));
}

/* ctl_reply -- forward one control command; the answer (envelope removed)
 * or the error as a reply. exports is borrowed. */
static enum MHD_Result ctl_reply(struct admind_http *h, struct MHD_Connection *c, const char *cmd,
				 json_t *exports, int timeout_ms)
{
	json_t *ans;
	char err[512];
	int rc = admind_ctl_once(h->conf->control, cmd, exports, timeout_ms, &ans, err, sizeof(err));
	json_int_t e;

	if (rc < 0)
		return reply_error(c, rc == -ETIMEDOUT ? 504 : rc == -ECANCELED ? 503 : 502, "%s", err);
	if (!json_is_true(json_object_get(ans, "ok"))) {
		/* the request's fault (404, 400), a conflict with the export's
		 * state (409), or the server's trouble: busy (no errno), I/O */
		e = json_integer_value(json_object_get(ans, "errno"));
		unsigned st = e == ENOENT ? 404 : e == EINVAL ? 400 : e == EIO ? 500 :
			      e == 0 || e == EAGAIN || e == EBUSY ? 503 : 409;
		rc = reply_error(c, st, "presto-nfsd: %s",
				 json_string_value(json_object_get(ans, "error")) ?: "refused");
		json_decref(ans);
		return rc;
	}
	json_object_del(ans, "v");
	json_object_del(ans, "cmd");
	return reply_json(c, MHD_HTTP_OK, ans);
}

/* api_presto -- POST /api/exports/NAME/presto; NAME is the export's path
 * (URL-escaped slashes or not) or its numeric id */
static enum MHD_Result api_presto(struct admind_http *h, struct MHD_Connection *c, const char *name,
				  size_t nlen, struct http_req *rq)
{
	json_t *body, *v, *ans, *x, *names;
	json_error_t je;
	char err[512], path[4096];
	bool on;
	size_t i;
	enum MHD_Result r;

	if (rq->len == 0)
		return reply_error(c, 400, "body required: {\"presto\": true} or {\"presto\": false}");
	body = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &je);
	v = json_object_get(body, "presto");
	if (json_is_boolean(v))
		on = json_is_true(v);
	else if (json_is_string(v) && (strcmp(json_string_value(v), "on") == 0 ||
				       strcmp(json_string_value(v), "off") == 0))
		on = strcmp(json_string_value(v), "on") == 0;
	else {
		json_decref(body);
		return reply_error(c, 400, "body must be {\"presto\": true|false|\"on\"|\"off\"}");
	}
	json_decref(body);
	if (nlen == 0 || nlen >= sizeof(path))
		return reply_error(c, 400, "export name missing or too long");
	snprintf(path, sizeof(path), "%.*s", (int)nlen, name);
	if (path[0] != '/') {
		/* an id: find its path */
		char *end;
		unsigned long long id;

		errno = 0;
		id = strtoull(path, &end, 10);
		if (errno || *end || !isdigit((unsigned char)path[0]))
			return reply_error(c, 400, "an export is named by its absolute path or its id");
		if (admind_ctl_once(h->conf->control, "exports", NULL, ADMIND_CTL_QUERY_MS, &ans, err,
				    sizeof(err)) < 0)
			return reply_error(c, 502, "%s", err);
		path[0] = '\0';
		json_array_foreach(json_object_get(ans, "exports"), i, x)
			if ((unsigned long long)json_integer_value(json_object_get(x, "id")) == id)
				snprintf(path, sizeof(path), "%s",
					 json_string_value(json_object_get(x, "path")) ?: "");
		json_decref(ans);
		if (!path[0])
			return reply_error(c, 404, "no export with id %llu", id);
	}
	names = json_pack("[s]", path);
	if (!names)	/* NULL would ask for every export */
		return reply_error(c, 400, "an export name must be valid UTF-8");
	/* enable too: presto-nfsd runs it on the worker behind any flush or
	 * disable, so it can wait as long as they do (as presto(8)) */
	r = ctl_reply(h, c, on ? "enable" : "disable", names, ADMIND_CTL_SLOW_MS);
	json_decref(names);
	return r;
}

static enum MHD_Result api_metrics_text(struct MHD_Connection *c)
{
	json_t *snap = admind_snapshot();
	char *text = admind_prometheus(snap);

	json_decref(snap);
	if (!text)
		return reply_error(c, 500, "out of memory");
	return reply_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text,
			  strlen(text));
}

/* ---- the console's files ---- */

static const char *mime_of(const char *name)
{
	static const struct { const char *ext, *type; } types[] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".js", "text/javascript; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },
		{ ".svg", "image/svg+xml" },
		{ ".png", "image/png" },
		{ ".ico", "image/x-icon" },
		{ ".json", "application/json" },
	};
	const char *dot = strrchr(name, '.');

	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return NULL;
}

static enum MHD_Result serve_file(struct admind_http *h, struct MHD_Connection *c, const char *url)
{
	const char *name = strcmp(url, "/") == 0 ? "index.html" : url + 1;
	const char *type = mime_of(name);
	struct MHD_Response *r;
	enum MHD_Result ret;
	struct stat st;
	char path[4096];
	int fd;

	/* one flat folder: no '/', no leading '.', nothing but [A-Za-z0-9._-] */
	if (!type || name[0] == '.' || strlen(name) > 128)
		return reply_error(c, 404, "no such page: %s", url);
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return reply_error(c, 404, "no such page");
	snprintf(path, sizeof(path), "%s/%s", h->conf->web, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return reply_error(c, 404, "no such page: %s", url);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return reply_error(c, 404, "no such page: %s", url);
	}
	r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (!r) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	add_common_headers(r);
	/* everything the page uses comes from here; uPlot sets inline styles */
	MHD_add_response_header(r, "Content-Security-Policy",
				"default-src 'self'; style-src 'self' 'unsafe-inline'; "
				"img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- dispatch ---- */

static bool is_get(const char *m)
{
	return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0;
}

static enum MHD_Result route(struct admind_http *h, struct MHD_Connection *c, const char *url,
			     const char *method, struct http_req *rq)
{
	bool post = strcmp(method, "POST") == 0;
	static const char pfx[] = "/api/exports/", sfx[] = "/presto";
	size_t ulen = strlen(url);

	/* access was checked on the headers (refusal) */
	if (rq->too_big)
		return reply_error(c, 413, "request body larger than %d bytes", HTTP_MAX_BODY);

	if (strcmp(url, "/api/flush") == 0)
		return post ? ctl_reply(h, c, "flush", NULL, ADMIND_CTL_SLOW_MS)
			    : reply_method(c, "POST");
	if (strcmp(url, "/api/stats/reset") == 0)
		return post ? ctl_reply(h, c, "reset", NULL, ADMIND_CTL_QUERY_MS)
			    : reply_method(c, "POST");
	if (ulen > sizeof(pfx) - 1 + sizeof(sfx) - 1 && strncmp(url, pfx, sizeof(pfx) - 1) == 0 &&
	    strcmp(url + ulen - (sizeof(sfx) - 1), sfx) == 0)
		return post ? api_presto(h, c, url + sizeof(pfx) - 1,
					 ulen - (sizeof(pfx) - 1) - (sizeof(sfx) - 1), rq)
			    : reply_method(c, "POST");

	if (strcmp(url, "/api/status") == 0)
		return is_get(method) ? api_status(h, c) : reply_method(c, "GET, HEAD");
	if (strcmp(url, "/api/stats") == 0)
		return is_get(method) ? api_stats(c) : reply_method(c, "GET, HEAD");
	if (strcmp(url, "/api/series") == 0)
		return is_get(method) ? api_series(h, c) : reply_method(c, "GET, HEAD");
	if (strcmp(url, "/api/metrics") == 0)
		return is_get(method) ? api_metrics(h, c) : reply_method(c, "GET, HEAD");
	if (strcmp(url, "/api/exports") == 0)
		return is_get(method) ? ctl_reply(h, c, "exports", NULL, ADMIND_CTL_QUERY_MS)
				      : reply_method(c, "GET, HEAD");
	if (strcmp(url, "/metrics") == 0)
		return is_get(method) ? api_metrics_text(c) : reply_method(c, "GET, HEAD");
	if (strncmp(url, "/api/", 5) == 0 || strcmp(url, "/api") == 0)
		return reply_error(c, 404, "no such API: %s", url);
	if (!is_get(method))
		return reply_method(c, "GET, HEAD");
	return serve_file(h, c, url);
}

/* refusal -- queue the refusal of a request that may not go on, on its
 * headers alone, before any of its body is read: a Host that is not a
 * loopback name (bound to loopback), no token (bound elsewhere, or a POST),
 * another site's POST, a body announced too large. Returns true when one
 * was queued, with MHD's result in *ret. */
static bool refusal(struct admind_http *h, struct MHD_Connection *c, const char *method,
		    enum MHD_Result *ret)
{
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	bool post = strcmp(method, "POST") == 0;

	if (h->loopback && host && !host_is_loopback(host))
		*ret = reply_error(c, 421, "this server answers only to a loopback host name");
	else if (!h->loopback && !authorized(h, c))
		*ret = reply_auth(h, c, "the admin token is required");
	else if (post && !same_origin(c))
		*ret = reply_error(c, 403, "cross-origin request refused");
	else if (post && !authorized(h, c))
		*ret = reply_auth(h, c, "the admin token is required for changes");
	else if (cl && strtoull(cl, NULL, 10) > HTTP_MAX_BODY)
		*ret = reply_error(c, 413, "request body larger than %d bytes", HTTP_MAX_BODY);
	else
		return false;
	return true;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* conn_deadline -- the connection of c must have the whole of its next
 * request (headers and body) within HTTP_HEADER_TIMEOUT (on), or has it
 * (off) */
static void conn_deadline(struct admind_http *h, struct MHD_Connection *c, bool on)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct http_conn *hc = ci ? ci->socket_context : NULL;

	if (!hc)
		return;
	pthread_mutex_lock(&h->lock);
	hc->deadline = on ? mono_s() + HTTP_HEADER_TIMEOUT : 0;
	pthread_mutex_unlock(&h->lock);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **con_cls)
{
	struct admind_http *h = cls;
	struct http_req *rq = *con_cls;

	(void)version;
	if (!rq) {
		enum MHD_Result ret;

		/* the headers are in; the deadline runs on until the body
		 * is too (a body trickled a byte at a time would hold the
		 * connection as trickled headers would) */
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		*con_cls = rq;
		if (refusal(h, c, method, &ret))
			return ret;
		return MHD_YES;
	}
	if (*size) {
		if (rq->len + *size > HTTP_MAX_BODY)
			rq->too_big = true;	/* read on and discard; answer 413 */
		else
			memcpy(rq->body + rq->len, data, *size);
		if (!rq->too_big)
			rq->len += *size;
		*size = 0;
		return MHD_YES;
	}
	/* the whole request is in */
	conn_deadline(h, c, false);
	rq->body[rq->len] = '\0';
	return route(h, c, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)toe;
	/* answered: the next request's headers are due (a kept-alive
	 * connection waits for them no longer than for the first) */
	conn_deadline(cls, c, true);
	free(*con_cls);
	*con_cls = NULL;
}

/* on_connection -- track each connection from its accept, with the
 * deadline for its first request's headers */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct admind_http *h = cls;
	struct http_conn *hc = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		hc = calloc(1, sizeof(*hc));
		if (!hc)
			return;	/* not watched: MHD's idle timeout still applies */
		hc->fd = ci ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
		if (hc->fd < 0) {
			free(hc);
			return;
		}
		pthread_mutex_lock(&h->lock);
		hc->deadline = mono_s() + HTTP_HEADER_TIMEOUT;
		hc->next = h->conns;
		if (h->conns)
			h->conns->prev = hc;
		h->conns = hc;
		pthread_mutex_unlock(&h->lock);
		*socket_context = hc;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && hc) {
		pthread_mutex_lock(&h->lock);
		if (hc->prev)
			hc->prev->next = hc->next;
		else
			h->conns = hc->next;
		if (hc->next)
			hc->next->prev = hc->prev;
		pthread_mutex_unlock(&h->lock);
		close(hc->fd);
		free(hc);
		*socket_context = NULL;
	}
}

/* http_watchdog -- shut down each connection past its header deadline: its
 * thread in MHD sees the end of the stream and closes it. Shutting down
 * (not closing) our own duplicate cannot touch another socket. */
static void *http_watchdog(void *arg)
{
	struct admind_http *h = arg;
	struct timespec ts;

	pthread_mutex_lock(&h->lock);
	while (!h->stopping) {
		double now = mono_s();

		for (struct http_conn *hc = h->conns; hc; hc = hc->next)
			if (hc->deadline > 0 && now >= hc->deadline) {
				shutdown(hc->fd, SHUT_RDWR);
				hc->deadline = 0;	/* once */
			}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += HTTP_WATCH_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h->wake, &h->lock, &ts);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fprintf(stderr, "presto-admind: http: ");
	vfprintf(stderr, fmt, ap);
}

/* listen_on -- a listening socket for "ADDR:PORT" or "[ADDR6]:PORT" */
static int listen_on(const char *spec, bool *loopback, int *port, char *err, size_t errlen)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	char host[128];
	const char *colon = strrchr(spec, ':');
	char *end;
	long p;
	int fd, one = 1, rc;

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
		goto bad;
	p = strtol(colon + 1, &end, 10);
	if (*end || colon[1] == '\0' || p < 0 || p > 65535)
		goto bad;
	if (spec[0] == '[') {
		if (colon[-1] != ']')
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec - 2), spec + 1);
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			goto bad;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)p);
		sl = sizeof(*s6);
		*loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
	} else {
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			goto bad;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)p);
		sl = sizeof(*s4);
		*loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		close(fd);
		snprintf(err, errlen, "listening on %s: %s", spec, strerror(-rc));
		return rc;
	}
	*port = ntohs(ss.ss_family == AF_INET ? s4->sin_port : s6->sin6_port);
	return fd;
fail:
	rc = -errno;
	snprintf(err, errlen, "listening on %s: %s", spec, strerror(-rc));
	return rc;
bad:
	snprintf(err, errlen, "--listen %s: expected a numeric ADDR:PORT (e.g. 127.0.0.1:8080)", spec);
	return -EINVAL;
}

static void http_watchdog_stop(struct admind_http *h)
{
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->watchdog, NULL);
}

int admind_http_start(const struct admind_conf *conf, const char *token, struct admind_http **out,
		      int *port, char *err, size_t errlen)
{
	struct admind_http *h;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return -EIO;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->conf = conf;
	snprintf(h->token, sizeof(h->token), "%s", token);
	h->token_len = strlen(h->token);
	rc = listen_on(conf->listen, &h->loopback, &h->port, err, errlen);
	if (rc < 0) {
		free(h);
		return rc;
	}
	h->lfd = rc;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->wake, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&h->watchdog, NULL, http_watchdog, h);
	if (rc < 0) {
		snprintf(err, errlen, "starting the HTTP watchdog: %s", strerror(-rc));
		goto fail;
	}
	h->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
				MHD_USE_ERROR_LOG,
				0, NULL, NULL, on_request, h,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
				MHD_OPTION_LISTEN_SOCKET, h->lfd,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(HTTP_MAX_CONNS / 2),
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
				MHD_OPTION_END);
	if (!h->d) {
		snprintf(err, errlen, "libmicrohttpd did not start on %s", conf->listen);
		rc = -EIO;
		http_watchdog_stop(h);
		goto fail;
	}
	*port = h->port;
	*out = h;
	return 0;
fail:
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->lock);
	close(h->lfd);
	free(h);
	return rc;
}

void admind_http_stop(struct admind_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);	/* closes the listening socket too */
	http_watchdog_stop(h);	/* every connection is closed (and unlisted) */
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
