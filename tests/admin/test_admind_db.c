/*
 * test_admind_db.c -- presto-admind's history (admin/admind_db.c) against a
 * real SQLite file: WAL mode and the schema version, migration of a version 1
 * file and refusal of a newer one, rollups (once per minute, repeatable,
 * the minutes not folded yet read from the raw rows), retention of raw rows
 * and rollups, gaps (no "up") versus idle seconds (no rate row), series
 * errors, history kept across a reopen, a reader beside the writer.
 */
#include "admin/admind.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64], path[128], err[1024];

/* a minute boundary well in the past, so that "now" is ours to choose */
#define T0 1700000040LL

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/presto-admind-db-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/h.db", dir);
	return 0;
}

static int teardown(void **state)
{
	char p[160];

	(void)state;
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
	rmdir(dir);
	return 0;
}

static int64_t scalar(const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int64_t v = -1;

	assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

static void exec(const char *sql)
{
	sqlite3 *h;

	assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

static struct admind_db *open_rw(void)
{
	struct admind_db *db;

	assert_int_equal(admind_db_open(path, false, &db, err, sizeof(err)), 0);
	return db;
}

/* put one second: "up", a gauge and (when non-zero) a rate */
static void second(struct admind_db *db, int64_t ts, double gauge, double rate)
{
	assert_int_equal(admind_db_begin(db), 0);
	assert_int_equal(admind_db_put(db, ts, "up", ADMIND_GAUGE, 1), 0);
	assert_int_equal(admind_db_put(db, ts, "g", ADMIND_GAUGE, gauge), 0);
	if (rate != 0)
		assert_int_equal(admind_db_put(db, ts, "r", ADMIND_RATE, rate), 0);
	assert_int_equal(admind_db_commit(db), 0);
}

static json_t *series(struct admind_db *db, const char *name, int64_t from, int64_t to,
		      int64_t step, int64_t now, int64_t raw_keep)
{
	const char *names[] = { name };
	json_t *out;

	assert_int_equal(admind_db_series(db, names, 1, from, to, step, now, raw_keep, &out, err,
					  sizeof(err)), 0);
	return out;
}

static json_t *values(json_t *s, const char *name)
{
	return json_object_get(json_object_get(s, "series"), name);
}

static void test_new_file_is_wal_and_current(void **state)
{
	struct admind_db *db;

	(void)state;
	db = open_rw();
	assert_int_equal(scalar("PRAGMA user_version"), ADMIND_DB_VERSION);
	admind_db_close(db);
	{
		sqlite3 *h;
		sqlite3_stmt *st;

		assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
		sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
		sqlite3_finalize(st);
		sqlite3_close(h);
	}
}

static void test_migrates_version_1(void **state)
{
	struct admind_db *db;
	json_t *s;

	(void)state;
	/* a file as the first presto-admind left it: the tables, no indexes */
	exec("CREATE TABLE metric(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	     "  kind INTEGER NOT NULL);"
	     "CREATE TABLE sample(metric INTEGER NOT NULL, ts INTEGER NOT NULL, value REAL NOT NULL,"
	     "  PRIMARY KEY(metric, ts)) WITHOUT ROWID;"
	     "CREATE TABLE rollup(metric INTEGER NOT NULL, ts INTEGER NOT NULL, n INTEGER NOT NULL,"
	     "  sum REAL NOT NULL, min REAL NOT NULL, max REAL NOT NULL,"
	     "  PRIMARY KEY(metric, ts)) WITHOUT ROWID;"
	     "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER);"
	     "INSERT INTO metric VALUES(1, 'up', 0), (2, 'g', 0);"
	     "INSERT INTO sample VALUES(1, 1700000040, 1), (2, 1700000040, 42);"
	     "PRAGMA user_version = 1;");
	db = open_rw();
	assert_int_equal(scalar("PRAGMA user_version"), 2);
	assert_int_equal(scalar("SELECT count(*) FROM sqlite_master WHERE name = 'sample_ts'"), 1);
	s = series(db, "g", T0, T0 + 2, 1, T0 + 2, 86400);
	assert_true(json_real_value(json_array_get(values(s, "g"), 0)) == 42);
	json_decref(s);
	admind_db_close(db);
}

static void test_refuses_newer_version(void **state)
{
	struct admind_db *db;

	(void)state;
	exec("CREATE TABLE x(y); PRAGMA user_version = 99;");
	assert_int_equal(admind_db_open(path, false, &db, err, sizeof(err)), -EPROTO);
	assert_null(db);
	assert_non_null(strstr(err, "newer"));
	assert_int_equal(scalar("PRAGMA user_version"), 99);	/* left alone */
}

static void test_not_a_database(void **state)
{
	struct admind_db *db;
	FILE *f = fopen(path, "w");

	(void)state;
	fputs("this is not an SQLite database, it is a text file of some length ....\n", f);
	for (int i = 0; i < 100; i++)
		fputs("garbage garbage garbage garbage garbage garbage garbage garbage\n", f);
	fclose(f);
	assert_true(admind_db_open(path, false, &db, err, sizeof(err)) < 0);
	assert_null(db);
}

/* three minutes of seconds; the rollup of the first two, the third raw */
static void test_rollup_and_series(void **state)
{
	struct admind_db *db;
	json_t *s, *v;
	int64_t raw, roll;

	(void)state;
	db = open_rw();
	for (int64_t t = T0; t < T0 + 180; t++) {
		if (t >= T0 + 70 && t < T0 + 80)
			continue;	/* ten seconds of gap in minute 2 */
		/* the rate is 10 on even seconds, idle (no row) on odd ones */
		second(db, t, (double)(t - T0), (t % 2) == 0 ? 10 : 0);
	}
	/* now: 30 s into the fourth minute; two complete minutes before... three */
	assert_int_equal(admind_db_maintain(db, T0 + 180 + 30, 86400, 90 * 86400), 0);
	assert_int_equal(admind_db_counts(db, &raw, &roll), 0);
	assert_int_equal(roll, 3 * 3);	/* up, g and r for each minute */
	assert_int_equal(scalar("SELECT n FROM rollup r JOIN metric m ON m.id = r.metric"
				" WHERE m.name = 'up' AND ts = 1700000100"), 50);
	/* repeating it changes nothing */
	assert_int_equal(admind_db_maintain(db, T0 + 180 + 30, 86400, 90 * 86400), 0);
	assert_int_equal(admind_db_counts(db, &raw, &roll), 0);
	assert_int_equal(roll, 9);

	/* raw, 10 s buckets: the rate averages 5/s, the gap is null */
	s = series(db, "r", T0, T0 + 180, 10, T0 + 200, 86400);
	assert_string_equal(json_string_value(json_object_get(s, "source")), "raw");
	v = values(s, "r");
	assert_int_equal(json_array_size(v), 18);
	assert_true(fabs(json_real_value(json_array_get(v, 0)) - 5) < 1e-9);
	assert_true(json_is_null(json_array_get(v, 7)));	/* T0+70 .. T0+80 */
	json_decref(s);

	/* the same from the rollups: one point a minute */
	s = series(db, "r", T0, T0 + 180, 60, T0 + 200, 86400);
	assert_string_equal(json_string_value(json_object_get(s, "source")), "rollup");
	v = values(s, "r");
	assert_int_equal(json_array_size(v), 3);
	for (int i = 0; i < 3; i++)
		assert_true(fabs(json_real_value(json_array_get(v, i)) - 5) < 1e-9);
	json_decref(s);
	s = series(db, "g", T0, T0 + 60, 60, T0 + 200, 86400);
	assert_true(fabs(json_real_value(json_array_get(values(s, "g"), 0)) - 29.5) < 1e-9);
	json_decref(s);

	/* a fourth minute, not folded yet: a rollup series reads it raw */
	for (int64_t t = T0 + 180; t < T0 + 200; t++)
		second(db, t, 1, 4);
	s = series(db, "r", T0, T0 + 240, 60, T0 + 200, 86400);
	v = values(s, "r");
	assert_int_equal(json_array_size(v), 4);
	assert_true(fabs(json_real_value(json_array_get(v, 3)) - 4) < 1e-9);
	json_decref(s);

	/* a metric never stored reads as an idle rate while up, null in a gap */
	s = series(db, "never", T0 + 60, T0 + 90, 10, T0 + 200, 86400);
	v = values(s, "never");
	assert_true(json_real_value(json_array_get(v, 0)) == 0);
	assert_true(json_is_null(json_array_get(v, 1)));
	json_decref(s);
	admind_db_close(db);
}

static void test_retention(void **state)
{
	struct admind_db *db;
	int64_t raw, roll, now = T0 + 3600;

	(void)state;
	db = open_rw();
	for (int64_t t = T0; t < T0 + 120; t++)		/* an hour ago */
		second(db, t, 1, 1);
	for (int64_t t = now - 100; t < now; t++)	/* the last 100 s */
		second(db, t, 2, 2);
	/* keep raw rows 150 s, rollups 30 min */
	assert_int_equal(admind_db_maintain(db, now, 150, 1800), 0);
	assert_int_equal(admind_db_counts(db, &raw, &roll), 0);
	assert_int_equal(scalar("SELECT count(*) FROM sample WHERE ts < 1700003490"), 0);
	assert_int_equal(raw, 100 * 3);
	/* the old minutes were rolled up, then outlived 30 min: gone too */
	assert_int_equal(scalar("SELECT count(*) FROM rollup WHERE ts < 1700001840"), 0);
	/* the recent complete minute is a rollup */
	assert_true(roll >= 3);
	admind_db_close(db);

	/* rollups outlive raw rows: keep them 2 h this time */
	teardown(state);
	setup(state);
	db = open_rw();
	for (int64_t t = T0; t < T0 + 120; t++)
		second(db, t, 1, 1);
	assert_int_equal(admind_db_maintain(db, now, 150, 7200), 0);
	assert_int_equal(admind_db_counts(db, &raw, &roll), 0);
	assert_int_equal(raw, 0);
	assert_int_equal(roll, 2 * 3);
	{
		json_t *s = series(db, "r", T0, T0 + 120, 1, now, 150);	/* raw gone: rollups */

		assert_string_equal(json_string_value(json_object_get(s, "source")), "rollup");
		assert_true(json_real_value(json_array_get(values(s, "r"), 1)) == 1);
		json_decref(s);
	}
	admind_db_close(db);
}

static void test_history_survives_reopen_and_reader(void **state)
{
	struct admind_db *db, *ro;
	json_t *s;

	(void)state;
	db = open_rw();
	for (int64_t t = T0; t < T0 + 10; t++)
		second(db, t, 7, 3);
	/* a reader (an HTTP thread) while the writer holds the file */
	assert_int_equal(admind_db_open(path, true, &ro, err, sizeof(err)), 0);
	s = series(ro, "g", T0, T0 + 10, 1, T0 + 10, 86400);
	assert_true(json_real_value(json_array_get(values(s, "g"), 9)) == 7);
	json_decref(s);
	admind_db_close(ro);
	admind_db_close(db);

	db = open_rw();
	s = series(db, "r", T0, T0 + 10, 5, T0 + 10, 86400);
	assert_true(json_real_value(json_array_get(values(s, "r"), 0)) == 3);
	json_decref(s);
	admind_db_close(db);
}

static void test_series_errors(void **state)
{
	struct admind_db *db;
	const char *names[] = { "up" };
	json_t *out = NULL;

	(void)state;
	db = open_rw();
	assert_int_equal(admind_db_series(db, names, 1, T0, T0, 1, T0, 86400, &out, err,
					  sizeof(err)), -EINVAL);
	assert_int_equal(admind_db_series(db, names, 1, T0, T0 + 10, 0, T0, 86400, &out, err,
					  sizeof(err)), -EINVAL);
	assert_int_equal(admind_db_series(db, names, 1, T0 - 86000, T0, 1, T0, 86400, &out, err,
					  sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "raise step"));
	assert_null(out);
	/* 6 series of 20,000 points: each within its bound, 120,000 in all */
	const char *six[] = { "a", "b", "c", "d", "e", "f" };
	assert_int_equal(admind_db_series(db, six, 6, T0 - 20000, T0, 1, T0, 86400, &out, err,
					  sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "points in all"));
	assert_null(out);
	assert_int_equal(admind_db_series(db, six, 5, T0 - 20000, T0, 1, T0, 86400, &out, err,
					  sizeof(err)), 0);
	json_decref(out);
	out = NULL;
	assert_int_equal(admind_db_put(db, T0, "x", ADMIND_GAUGE, NAN), -EINVAL);
	admind_db_close(db);
	admind_db_close(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_new_file_is_wal_and_current, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migrates_version_1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuses_newer_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_database, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollup_and_series, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_survives_reopen_and_reader, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_series_errors, setup, teardown),
	};

	return cmocka_run_group_tests_name("admind_db", tests, NULL, NULL);
}
