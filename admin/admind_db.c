/*
 * admind_db.c -- presto-admind's statistics history in SQLite.
 *
 * One database file (by default under the state directory), WAL mode, so
 * the HTTP threads read while the sampler writes. The schema's version is
 * PRAGMA user_version; admind_db_open applies the migrations from the
 * file's version up to ADMIND_DB_VERSION, each in its own transaction, and
 * refuses a file written by a newer presto-admind.
 *
 *   metric(id, name, kind)           kind: ADMIND_GAUGE or ADMIND_RATE
 *   sample(metric, ts, value)        raw, one row a metric a second
 *   rollup(metric, ts, n, sum, min, max)   one row a metric a minute
 *   meta(key, value)                 "rolled_up_to": first minute not folded
 *
 * Gaps. The sampler writes metric "up" = 1 every second it reached
 * presto-nfsd, and nothing while it did not: a bucket without "up" is a gap
 * (null in a series), whatever the reason (presto-nfsd down, presto-admind
 * down). Rates are written only when non-zero (most procedures are idle most
 * of the time) and a bucket's rate is sum / count("up"): a second that was
 * up and has no row was a zero. Gauges are the mean of the rows present.
 *
 * Rollups. Every complete minute is folded once (rolled_up_to moves
 * forward; INSERT OR REPLACE keeps a repeat harmless), before raw rows are
 * pruned, so a raw row is never pruned unrolled as long as raw_keep is more
 * than a minute (admind.c enforces 120 s). A series whose range lies within
 * the raw retention and whose step is under a minute is read from the raw
 * rows; otherwise from the rollups, with the step rounded up to a minute.
 */
#include "admin/admind.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADMIND_DB_MAX_BUCKETS 20000
/* points of all the series of one request: each is a JSON value until the
 * reply is written (some 50 bytes), and 32 series of 20,000 held 33 MB per
 * request, read without a token on loopback; the console asks for 33,000 at
 * most (its busiest chart: a series per procedure, 1,440 points) */
#define ADMIND_DB_MAX_POINTS 100000
#define ADMIND_DB_MAX_METRICS 4096

struct admind_db {
	sqlite3 *h;
	sqlite3_stmt *put, *metric_get, *metric_add;
	/* metric name -> id, the sampler's small cache */
	struct { char *name; int64_t id; } *cache;
	size_t ncache;
};

/* each migration takes the schema from version i to i + 1 */
static const char *const db_migrations[ADMIND_DB_VERSION] = {
	/* 0 -> 1: the tables */
	"CREATE TABLE metric(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	"  kind INTEGER NOT NULL);"
	"CREATE TABLE sample(metric INTEGER NOT NULL, ts INTEGER NOT NULL, value REAL NOT NULL,"
	"  PRIMARY KEY(metric, ts)) WITHOUT ROWID;"
	"CREATE TABLE rollup(metric INTEGER NOT NULL, ts INTEGER NOT NULL, n INTEGER NOT NULL,"
	"  sum REAL NOT NULL, min REAL NOT NULL, max REAL NOT NULL,"
	"  PRIMARY KEY(metric, ts)) WITHOUT ROWID;"
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER);",
	/* 1 -> 2: pruning and rollup scan by time, not by metric */
	"CREATE INDEX sample_ts ON sample(ts);"
	"CREATE INDEX rollup_ts ON rollup(ts);",
};

static int db_errno(sqlite3 *h, int rc)
{
	(void)h;
	switch (rc & 0xff) {
	case SQLITE_OK: case SQLITE_DONE: case SQLITE_ROW: return 0;
	case SQLITE_NOMEM: return -ENOMEM;
	case SQLITE_BUSY: case SQLITE_LOCKED: return -EBUSY;
	case SQLITE_READONLY: case SQLITE_PERM: case SQLITE_AUTH: return -EACCES;
	case SQLITE_FULL: return -ENOSPC;
	case SQLITE_CANTOPEN: return -ENOENT;
	case SQLITE_CORRUPT: case SQLITE_NOTADB: return -EPROTO;
	default: return -EIO;
	}
}

static int db_exec(struct admind_db *db, const char *sql, char *err, size_t errlen)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db->h, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		if (err)
			snprintf(err, errlen, "sqlite: %s", msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return db_errno(db->h, rc);
	}
	return 0;
}

static int64_t db_scalar(struct admind_db *db, const char *sql, int64_t dflt)
{
	sqlite3_stmt *st;
	int64_t v = dflt;

	if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
		return dflt;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* db_migrate -- bring the schema to ADMIND_DB_VERSION */
static int db_migrate(struct admind_db *db, const char *path, char *err, size_t errlen)
{
	int64_t v = db_scalar(db, "PRAGMA user_version", -1);
	int rc;

	if (v < 0) {
		snprintf(err, errlen, "%s: cannot read the schema version: %s", path,
			 sqlite3_errmsg(db->h));
		return -EPROTO;
	}
	if (v > ADMIND_DB_VERSION) {
		snprintf(err, errlen, "%s: schema version %lld is newer than this presto-admind's (%d)",
			 path, (long long)v, ADMIND_DB_VERSION);
		return -EPROTO;
	}
	for (; v < ADMIND_DB_VERSION; v++) {
		char sql[64];

		rc = db_exec(db, "BEGIN IMMEDIATE", err, errlen);
		if (rc == 0)
			rc = db_exec(db, db_migrations[v], err, errlen);
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld", (long long)v + 1);
		if (rc == 0)
			rc = db_exec(db, sql, err, errlen);
		if (rc == 0)
			rc = db_exec(db, "COMMIT", err, errlen);
		if (rc < 0) {
			db_exec(db, "ROLLBACK", NULL, 0);
			snprintf(err + strlen(err), errlen - strlen(err), " (migrating %s to version %lld)",
				 path, (long long)v + 1);
			return rc;
		}
	}
	return 0;
}

int admind_db_open(const char *path, bool readonly, struct admind_db **out, char *err,
		   size_t errlen)
{
	struct admind_db *db;
	int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	int rc;

	*out = NULL;
	db = calloc(1, sizeof(*db));
	if (!db) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = sqlite3_open_v2(path, &db->h, flags | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
		rc = db_errno(db->h, rc);
		admind_db_close(db);
		return rc;
	}
	sqlite3_busy_timeout(db->h, 2000);
	if (!readonly) {
		/* WAL: readers (the HTTP threads) never wait for the sampler;
		 * synchronous=NORMAL: a power cut may lose the last seconds of
		 * history, never the file */
		rc = db_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", err, errlen);
		if (rc == 0)
			rc = db_migrate(db, path, err, errlen);
		if (rc == 0 && (sqlite3_prepare_v2(db->h,
				"INSERT OR REPLACE INTO sample(metric, ts, value) VALUES(?, ?, ?)",
				-1, &db->put, NULL) != SQLITE_OK ||
			sqlite3_prepare_v2(db->h, "SELECT id FROM metric WHERE name = ?", -1,
				&db->metric_get, NULL) != SQLITE_OK ||
			sqlite3_prepare_v2(db->h, "INSERT INTO metric(name, kind) VALUES(?, ?)", -1,
				&db->metric_add, NULL) != SQLITE_OK)) {
			snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db->h));
			rc = -EIO;
		}
	} else {
		int64_t v = db_scalar(db, "PRAGMA user_version", -1);

		if (v != ADMIND_DB_VERSION) {
			snprintf(err, errlen, "%s: schema version %lld, expected %d", path, (long long)v,
				 ADMIND_DB_VERSION);
			rc = -EPROTO;
		}
	}
	if (rc < 0) {
		admind_db_close(db);
		return rc;
	}
	*out = db;
	return 0;
}

void admind_db_close(struct admind_db *db)
{
	if (!db)
		return;
	sqlite3_finalize(db->put);
	sqlite3_finalize(db->metric_get);
	sqlite3_finalize(db->metric_add);
	sqlite3_close(db->h);
	for (size_t i = 0; i < db->ncache; i++)
		free(db->cache[i].name);
	free(db->cache);
	free(db);
}

int admind_db_begin(struct admind_db *db)
{
	return db_exec(db, "BEGIN IMMEDIATE", NULL, 0);
}

int admind_db_commit(struct admind_db *db)
{
	int rc = db_exec(db, "COMMIT", NULL, 0);

	if (rc < 0) {
		db_exec(db, "ROLLBACK", NULL, 0);
		/* metric rows added in the transaction are gone too */
		for (size_t i = 0; i < db->ncache; i++)
			free(db->cache[i].name);
		db->ncache = 0;
	}
	return rc;
}

/* db_metric_id -- the id of metric name, created on first use */
static int db_metric_id(struct admind_db *db, const char *name, enum admind_kind kind, int64_t *id)
{
	int rc;

	for (size_t i = 0; i < db->ncache; i++)
		if (strcmp(db->cache[i].name, name) == 0) {
			*id = db->cache[i].id;
			return 0;
		}
	if (db->ncache >= ADMIND_DB_MAX_METRICS)
		return -ENOSPC;
	sqlite3_reset(db->metric_get);
	sqlite3_bind_text(db->metric_get, 1, name, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(db->metric_get);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(db->metric_get, 0);
	} else {
		sqlite3_reset(db->metric_add);
		sqlite3_bind_text(db->metric_add, 1, name, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int(db->metric_add, 2, kind);
		rc = sqlite3_step(db->metric_add);
		if (rc != SQLITE_DONE)
			return db_errno(db->h, rc);
		*id = sqlite3_last_insert_rowid(db->h);
	}
	sqlite3_reset(db->metric_get);
	void *p = realloc(db->cache, (db->ncache + 1) * sizeof(*db->cache));
	if (!p)
		return -ENOMEM;
	db->cache = p;
	db->cache[db->ncache].name = strdup(name);
	if (!db->cache[db->ncache].name)
		return -ENOMEM;
	db->cache[db->ncache++].id = *id;
	return 0;
}

int admind_db_declare(struct admind_db *db, const char *name, enum admind_kind kind)
{
	int64_t id;

	return db_metric_id(db, name, kind, &id);
}

int admind_db_put(struct admind_db *db, int64_t ts, const char *name, enum admind_kind kind,
		  double value)
{
	int64_t id = 0;
	int rc;

	if (!isfinite(value))
		return -EINVAL;
	rc = db_metric_id(db, name, kind, &id);
	if (rc < 0)
		return rc;
	sqlite3_reset(db->put);
	sqlite3_bind_int64(db->put, 1, id);
	sqlite3_bind_int64(db->put, 2, ts);
	sqlite3_bind_double(db->put, 3, value);
	rc = sqlite3_step(db->put);
	sqlite3_reset(db->put);
	return rc == SQLITE_DONE ? 0 : db_errno(db->h, rc);
}

static int db_run(struct admind_db *db, const char *sql, int64_t a, int64_t b)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return db_errno(db->h, rc);
	sqlite3_bind_int64(st, 1, a);
	if (sqlite3_bind_parameter_count(st) >= 2)
		sqlite3_bind_int64(st, 2, b);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_errno(db->h, rc);
}

int admind_db_maintain(struct admind_db *db, int64_t now, int64_t raw_keep, int64_t rollup_keep)
{
	int64_t minute = now - (now % 60);
	int64_t from = db_scalar(db, "SELECT value FROM meta WHERE key = 'rolled_up_to'", -1);
	int rc;

	if (from < 0)
		from = db_scalar(db, "SELECT min(ts) FROM sample", minute);
	from -= from % 60;
	rc = db_exec(db, "BEGIN IMMEDIATE", NULL, 0);
	if (rc < 0)
		return rc;
	if (from < minute) {
		rc = db_run(db,
			"INSERT OR REPLACE INTO rollup(metric, ts, n, sum, min, max)"
			" SELECT metric, ts - ts % 60, count(*), sum(value), min(value), max(value)"
			" FROM sample WHERE ts >= ?1 AND ts < ?2 GROUP BY metric, ts - ts % 60",
			from, minute);
		if (rc == 0)
			rc = db_run(db, "INSERT OR REPLACE INTO meta(key, value)"
				    " VALUES('rolled_up_to', ?1)", minute, 0);
	}
	if (rc == 0)
		rc = db_run(db, "DELETE FROM sample WHERE ts < ?1", now - raw_keep, 0);
	if (rc == 0)
		rc = db_run(db, "DELETE FROM rollup WHERE ts < ?1", now - rollup_keep, 0);
	if (rc == 0)
		return admind_db_commit(db);
	db_exec(db, "ROLLBACK", NULL, 0);
	return rc;
}

/* db_buckets -- add each row's (sum, count) of metric id over [lo, to)
 * into sums[]/counts[] by bucket of step seconds from from; the rollups
 * when rollup is set */
static int db_buckets(struct admind_db *db, bool rollup, int64_t id, int64_t lo, int64_t from,
		      int64_t to, int64_t step, size_t nb, double *sums, double *counts)
{
	const char *sql = rollup
		? "SELECT (ts - ?2) / ?4, sum(sum), sum(n) FROM rollup"
		  " WHERE metric = ?1 AND ts >= ?5 AND ts < ?3 GROUP BY 1"
		: "SELECT (ts - ?2) / ?4, sum(value), count(*) FROM sample"
		  " WHERE metric = ?1 AND ts >= ?5 AND ts < ?3 GROUP BY 1";
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return db_errno(db->h, rc);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, from);
	sqlite3_bind_int64(st, 3, to);
	sqlite3_bind_int64(st, 4, step);
	sqlite3_bind_int64(st, 5, lo > from ? lo : from);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t b = sqlite3_column_int64(st, 0);

		if (b < 0 || (size_t)b >= nb)
			continue;
		sums[b] += sqlite3_column_double(st, 1);
		counts[b] += sqlite3_column_double(st, 2);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_errno(db->h, rc);
}

/* db_series_buckets -- db_buckets over the whole range: for rollups, the
 * minutes not folded yet come from the raw samples */
static int db_series_buckets(struct admind_db *db, bool rollup, int64_t folded, int64_t id,
			     int64_t from, int64_t to, int64_t step, size_t nb, double *sums,
			     double *counts)
{
	int rc;

	if (!rollup)
		return db_buckets(db, false, id, from, from, to, step, nb, sums, counts);
	rc = db_buckets(db, true, id, from, from, folded < to ? folded : to, step, nb, sums, counts);
	if (rc == 0 && folded < to)
		rc = db_buckets(db, false, id, folded, from, to, step, nb, sums, counts);
	return rc;
}

static int db_lookup(struct admind_db *db, const char *name, int64_t *id, int *kind)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db->h, "SELECT id, kind FROM metric WHERE name = ?", -1, &st, NULL);

	if (rc != SQLITE_OK)
		return db_errno(db->h, rc);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(st, 0);
		*kind = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : db_errno(db->h, rc);
}

int admind_db_series(struct admind_db *db, const char *const *names, size_t n, int64_t from,
		     int64_t to, int64_t step, int64_t now, int64_t raw_keep, json_t **out,
		     char *err, size_t errlen)
{
	bool rollup;
	size_t nb;
	double *sums = NULL, *counts = NULL, *up = NULL;
	int64_t up_id, folded;
	int up_kind, rc = 0;
	json_t *res = NULL, *t, *series;

	*out = NULL;
	if (step <= 0 || from >= to) {
		snprintf(err, errlen, "need from < to and step > 0");
		return -EINVAL;
	}
	rollup = step >= 60 || from < now - raw_keep;
	if (rollup) {
		step = (step + 59) / 60 * 60;
		from -= from % 60;	/* buckets start on rollup minutes */
	}
	nb = (size_t)((to - from + step - 1) / step);
	if (nb > ADMIND_DB_MAX_BUCKETS) {
		snprintf(err, errlen, "%zu points asked for, at most %d: raise step", nb,
			 ADMIND_DB_MAX_BUCKETS);
		return -EINVAL;
	}
	if (nb * n > ADMIND_DB_MAX_POINTS) {
		snprintf(err, errlen, "%zu points in all asked for (%zu series of %zu), at most %d: "
			 "raise step or ask for fewer series", nb * n, n, nb, ADMIND_DB_MAX_POINTS);
		return -EINVAL;
	}
	sums = calloc(nb, sizeof(double));
	counts = calloc(nb, sizeof(double));
	up = calloc(nb, sizeof(double));
	res = json_object();
	t = json_array();
	series = json_object();
	if (!sums || !counts || !up || !res || !t || !series) {
		rc = -ENOMEM;
		goto out;
	}
	json_object_set_new(res, "from", json_integer(from));
	json_object_set_new(res, "to", json_integer(to));
	json_object_set_new(res, "step", json_integer(step));
	json_object_set_new(res, "source", json_string(rollup ? "rollup" : "raw"));
	json_object_set_new(res, "t", t);
	json_object_set_new(res, "series", series);
	for (size_t b = 0; b < nb; b++)
		json_array_append_new(t, json_integer(from + (int64_t)b * step));
	folded = db_scalar(db, "SELECT value FROM meta WHERE key = 'rolled_up_to'", 0);
	if (db_lookup(db, "up", &up_id, &up_kind) == 0)
		rc = db_series_buckets(db, rollup, folded, up_id, from, to, step, nb, sums, up);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		json_t *vals = json_array();
		int64_t id;
		int kind = ADMIND_GAUGE;
		bool known = db_lookup(db, names[i], &id, &kind) == 0;

		memset(sums, 0, nb * sizeof(double));
		memset(counts, 0, nb * sizeof(double));
		if (known)
			rc = db_series_buckets(db, rollup, folded, id, from, to, step, nb, sums,
					       counts);
		if (rc < 0) {
			json_decref(vals);
			goto out;
		}
		for (size_t b = 0; b < nb; b++) {
			double v;

			if (kind == ADMIND_RATE && up[b] > 0)
				v = sums[b] / up[b];
			else if (kind == ADMIND_GAUGE && counts[b] > 0)
				v = sums[b] / counts[b];
			else
				v = NAN;
			json_array_append_new(vals, isnan(v) ? json_null() : json_real(v));
		}
		json_object_set_new(series, names[i], vals);
	}
out:
	free(sums);
	free(counts);
	free(up);
	if (rc < 0) {
		json_decref(res);
		snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(db->h));
		return rc;
	}
	*out = res;
	return 0;
}

int admind_db_metrics(struct admind_db *db, json_t **out)
{
	sqlite3_stmt *st;
	json_t *o = json_object();
	int rc = sqlite3_prepare_v2(db->h, "SELECT name, kind FROM metric ORDER BY name", -1, &st, NULL);

	if (rc != SQLITE_OK) {
		json_decref(o);
		return db_errno(db->h, rc);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		json_object_set_new(o, (const char *)sqlite3_column_text(st, 0),
				    json_string(sqlite3_column_int(st, 1) == ADMIND_RATE ? "rate" : "gauge"));
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		json_decref(o);
		return db_errno(db->h, rc);
	}
	*out = o;
	return 0;
}

int admind_db_counts(struct admind_db *db, int64_t *raw, int64_t *rollup)
{
	*raw = db_scalar(db, "SELECT count(*) FROM sample", -1);
	*rollup = db_scalar(db, "SELECT count(*) FROM rollup", -1);
	return *raw < 0 || *rollup < 0 ? -EIO : 0;
}
