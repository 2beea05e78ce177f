/*
 * test_admind_prom.c -- presto-admind's Prometheus text (admin/admind_prom.c)
 * from a snapshot made here: every sample value reads back as the double it
 * came from (counters past 10^12 used to be rounded to 12 digits), in the
 * shortest form that does; an unreachable server's snapshot has no made-up
 * zeros.
 */
#include "admin/admind.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* has_line -- text holds line (a whole line) */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

static char *render(const char *snap_json)
{
	json_error_t e;
	json_t *snap = json_loads(snap_json, 0, &e);
	assert_non_null(snap);
	char *text = admind_prometheus(snap);
	json_decref(snap);
	assert_non_null(text);
	return text;
}

static void test_exact_values(void **state)
{
	(void)state;
	char *text = render(
	    "{\"reachable\": true, \"samples\": 7,"
	    " \"status\": {\"state\": \"enabled\", \"nvram\": {\"size\": 68719476736},"
	    "  \"area_bytes\": 68719472640, \"dirty_bytes\": 12345, \"occupancy_pct\": 10,"
	    "  \"oldest_age_ms\": 1500},"
	    " \"stats\": {\"log\": {\"appends\": 4503599627370497,"
	    "  \"append_bytes\": 1234567890123456, \"batch_hist\": [3, 1]},"
	    "  \"procs\": [{\"name\": \"WRITE\", \"count\": 1000000000007,"
	    "   \"mean_us\": 0.1, \"bounds_us\": [], \"hist\": []}]}}");

	/* 16 and 13 digits: %.12g made them 1.23456789012e+15 and 1e+12 */
	assert_true(has_line(text, "presto_log_append_bytes_total 1234567890123456"));
	assert_true(has_line(text, "presto_nfs_requests_total{proc=\"WRITE\"} 1000000000007"));
	/* 2^52 + 1, exact in a double: 16 digits */
	assert_true(has_line(text, "presto_log_appends_total 4503599627370497"));
	assert_true(has_line(text, "presto_nvram_size_bytes 68719476736"));
	/* the shortest form: not 0.10000000000000001 */
	assert_true(has_line(text, "presto_log_occupancy_ratio 0.1"));
	assert_true(has_line(text, "presto_log_oldest_record_age_seconds 1.5"));
	assert_true(has_line(text, "presto_admind_samples_total 7"));
	assert_true(has_line(text, "presto_up 1"));
	/* no value in a form %.12g would have given */
	assert_null(strstr(text, "e+12"));
	assert_null(strstr(text, "e+15"));
	free(text);
}

static void test_unreachable(void **state)
{
	(void)state;
	char *text = render("{\"reachable\": false, \"samples\": 2, \"status\": null, \"stats\": null}");
	assert_true(has_line(text, "presto_up 0"));
	assert_true(has_line(text, "presto_admind_samples_total 2"));
	assert_null(strstr(text, "presto_log_"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_values),
		cmocka_unit_test(test_unreachable),
	};
	return cmocka_run_group_tests_name("admin/prometheus", tests, NULL, NULL);
}
