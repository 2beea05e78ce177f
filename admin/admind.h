/*
 * admind.h -- the parts of presto-admind and what they share.
 *
 *   admind.c       options, the sampler thread, the latest snapshot
 *   admind_ctl.c   client of presto-nfsd's control socket (protocol v1)
 *   admind_db.c    statistics history in SQLite (raw samples, minute rollups)
 *   admind_http.c  the HTTP server: JSON API, /metrics, the console's files
 *
 * presto-admind is only a client of presto-nfsd: it reaches it through the
 * control socket, whose control thread never blocks on a client, so nothing
 * here can stall the NFS server.
 */
#ifndef PRESTO_ADMIND_H
#define PRESTO_ADMIND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- admind_ctl.c: the control socket ---- */

#define ADMIND_CTL_QUERY_MS 3000
/* flush and disable wait for the backing filesystems, and enable behind
 * them on presto-nfsd's control worker (as presto(8) does) */
#define ADMIND_CTL_SLOW_MS  900000

struct admind_ctl;

/* admind_ctl_open -- connect to the control socket at path.
 * Returns 0, or -errno with a message in err. */
int admind_ctl_open(const char *path, struct admind_ctl **out, char *err, size_t errlen);

/* admind_ctl_call -- send req (a JSON object; "v" is added) and wait up to
 * timeout_ms for its answer line. *answer is the parsed answer, whether it
 * says ok or not. Returns 0, or -errno with a message in err; after an error
 * the connection is unusable and must be closed. */
int admind_ctl_call(struct admind_ctl *c, json_t *req, int timeout_ms, json_t **answer,
		    char *err, size_t errlen);

void admind_ctl_close(struct admind_ctl *c);

/* admind_ctl_cancel -- from now on every wait for presto-nfsd ends at once
 * (-ECANCELED): the daemon is stopping, and the HTTP threads must not hold
 * it for the length of a flush. */
void admind_ctl_cancel(void);
/* admind_ctl_once -- open, one call of cmd (with exports when not NULL),
 * close. Returns as admind_ctl_call. */
int admind_ctl_once(const char *path, const char *cmd, json_t *exports, int timeout_ms,
		    json_t **answer, char *err, size_t errlen);

/* ---- admind_db.c: the history ---- */

#define ADMIND_DB_VERSION 2

enum admind_kind {
	/* sampled every second while presto-nfsd answers: a bucket's value
	 * is the mean of the samples present */
	ADMIND_GAUGE = 0,
	/* a rate written only when non-zero: a bucket's value is the sum
	 * over the seconds presto-nfsd was up ("up" samples), so a second
	 * without a row counts as 0 and a second without "up" as a gap */
	ADMIND_RATE = 1,
};

struct admind_db;

/* admind_db_open -- open or create the database at path (WAL), migrating
 * its schema to ADMIND_DB_VERSION. A file of a newer version is refused.
 * Returns 0, or -errno / -EPROTO with a message in err. */
int admind_db_open(const char *path, bool readonly, struct admind_db **out, char *err,
		   size_t errlen);
void admind_db_close(struct admind_db *db);

/* admind_db_begin/commit -- one transaction per sample */
int admind_db_begin(struct admind_db *db);
int admind_db_commit(struct admind_db *db);

/* admind_db_declare -- make metric name known without a value: a rate that
 * was always zero (zeros are not stored) reads 0 while presto-nfsd is up,
 * and a name never declared (a typo) reads null */
int admind_db_declare(struct admind_db *db, const char *name, enum admind_kind kind);
/* admind_db_put -- store one value of metric name at ts (unix seconds) */
int admind_db_put(struct admind_db *db, int64_t ts, const char *name, enum admind_kind kind,
		  double value);

/* admind_db_maintain -- fold the complete minutes before now into rollups,
 * then delete raw samples older than raw_keep and rollups older than
 * rollup_keep (seconds). Returns 0 or a negative errno. */
int admind_db_maintain(struct admind_db *db, int64_t now, int64_t raw_keep, int64_t rollup_keep);

/* admind_db_series -- the metrics named in names (count n) over [from, to)
 * in buckets of step seconds, from the raw samples when they cover the
 * range, from the rollups otherwise. Fills *out with
 * {"from","to","step","source","t":[...],"series":{name:[value|null]}}.
 * Returns 0, -EINVAL (message in err), or another negative errno. */
int admind_db_series(struct admind_db *db, const char *const *names, size_t n, int64_t from,
		     int64_t to, int64_t step, int64_t now, int64_t raw_keep, json_t **out,
		     char *err, size_t errlen);

/* admind_db_metrics -- {"name": "gauge"|"rate", ...} of every metric stored */
int admind_db_metrics(struct admind_db *db, json_t **out);

/* admind_db_counts -- number of raw samples and rollup rows */
int admind_db_counts(struct admind_db *db, int64_t *raw, int64_t *rollup);

/* ---- admind.c: what the sampler knows, for the HTTP side ---- */

struct admind_conf {
	const char *control;
	const char *db;
	const char *listen;
	const char *web;
	const char *token_file;
	int64_t raw_keep, rollup_keep;	/* seconds */
	bool listen_loopback;
};

extern struct admind_conf admind_conf;

/* admind_snapshot -- a new reference to the latest snapshot:
 * {"ts", "reachable", "error", "nfsd_pid", "samples", "status", "stats",
 *  "rates": {...}} (status/stats null while presto-nfsd is unreachable) */
json_t *admind_snapshot(void);

/* ---- admind_http.c ---- */

struct admind_http;

/* admind_http_start -- listen on conf->listen and serve in MHD's threads.
 * Returns 0 or -errno with a message in err; *port is the bound port. */
int admind_http_start(const struct admind_conf *conf, const char *token, struct admind_http **out,
		      int *port, char *err, size_t errlen);
void admind_http_stop(struct admind_http *h);

/* admind_prometheus -- the text exposition of a snapshot (malloc'd) */
char *admind_prometheus(json_t *snap);

#endif
