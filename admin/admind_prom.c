/*
 * admind_prom.c -- GET /metrics: the latest snapshot in the Prometheus text
 * exposition format (version 0.0.4).
 *
 * Names follow the Prometheus conventions: a presto_ prefix, base units
 * (seconds, bytes, ratios 0..1), _total on counters. Procedure latency comes
 * from presto-nfsd as cumulative counts at fixed boundaries per procedure
 * (the "stats" answer's le_counts at latency_le_us), so it is a histogram
 * (_bucket, _sum, _count); the records per persist come as
 * power-of-two buckets (nvlog.h: bucket i holds 2^(i-1) < n <= 2^i, the
 * last one everything above), so they are a histogram with le = 1, 2, 4, ...
 * Counters restart from zero after `presto -R` or POST /api/stats/reset,
 * which Prometheus' rate() takes as a counter reset.
 */
#include "admin/admind.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	char *buf;
	size_t len;
	FILE *f;
};

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_number(v) ? json_number_value(v) : 0;
}

/* val -- v as a sample value (and the line's end) that reads back as the same double: the
 * shortest of 15 or 17 significant digits. %.12g printed a byte counter past
 * 10^12 (some 25 minutes of WRITEs at 600 MB/s) rounded to a multiple of 10
 * or more. */
static void val(FILE *f, double v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, sizeof(buf), "%.17g", v);
	fputs(buf, f);
	fputc('\n', f);
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
	head(f, name, type, help);
	fprintf(f, "%s ", name);
	val(f, v);
}

/* label -- v escaped as a label value (backslash, quote, newline) */
static void label(FILE *f, const char *v)
{
	for (; v && *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*v, f);
	}
}

static void procs_family(FILE *f, json_t *procs, const char *name, const char *type,
			 const char *help, const char *key, double scale)
{
	json_t *p;
	size_t i;

	head(f, name, type, help);
	json_array_foreach(procs, i, p) {
		fprintf(f, "%s{proc=\"", name);
		label(f, json_string_value(json_object_get(p, "name")));
		fputs("\"} ", f);
		val(f, num(p, key) * scale);
	}
}

char *admind_prometheus(json_t *snap)
{
	json_t *stats = json_object_get(snap, "stats"), *st = json_object_get(snap, "status");
	json_t *procs = json_object_get(stats, "procs"), *lg = json_object_get(stats, "log");
	json_t *ds = json_object_get(stats, "destage"), *rc = json_object_get(stats, "recovery");
	json_t *drc = json_object_get(stats, "drc"), *hist, *p;
	char *buf = NULL;
	size_t len = 0, i;
	double cum = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	metric(f, "presto_up", "gauge", "1 when presto-admind reached presto-nfsd at its last sample.",
	       json_is_true(json_object_get(snap, "reachable")));
	metric(f, "presto_admind_samples_total", "counter", "Samples taken by presto-admind.",
	       num(snap, "samples"));
	/* unreachable: the snapshot holds JSON nulls; no made-up zeros (a
	 * counter reset to Prometheus, alerts gone quiet) */
	if (!json_is_object(stats) || !json_is_object(st))
		goto out;

	head(f, "presto_log_state", "gauge", "State of the NVRAM log (1 for the current state).");
	fprintf(f, "presto_log_state{state=\"");
	label(f, json_string_value(json_object_get(st, "state")));
	fprintf(f, "\"} 1\n");
	metric(f, "presto_nvram_size_bytes", "gauge", "Size of the NVRAM device.",
	       num(json_object_get(st, "nvram"), "size"));
	metric(f, "presto_log_area_bytes", "gauge", "Bytes of the NVRAM that hold log records.",
	       num(st, "area_bytes"));
	metric(f, "presto_log_dirty_bytes", "gauge", "Bytes of live (not yet destaged) log records.",
	       num(st, "dirty_bytes"));
	metric(f, "presto_log_occupancy_ratio", "gauge", "Live log bytes over the log area (0..1).",
	       num(st, "occupancy_pct") / 100);
	metric(f, "presto_log_oldest_record_age_seconds", "gauge", "Age of the oldest live log record.",
	       num(st, "oldest_age_ms") / 1000);
	metric(f, "presto_log_appends_total", "counter", "Records appended to the log.",
	       num(lg, "appends"));
	metric(f, "presto_log_append_bytes_total", "counter", "Bytes appended to the log.",
	       num(lg, "append_bytes"));
	metric(f, "presto_log_persists_total", "counter", "Persists (group commits) of the log.",
	       num(lg, "persists"));
	metric(f, "presto_log_persist_errors_total", "counter", "Persists that failed.",
	       num(lg, "persist_errors"));
	metric(f, "presto_log_full_waits_total", "counter", "Appends that waited for log space.",
	       num(lg, "full_waits"));
	metric(f, "presto_log_fallbacks_total", "counter",
	       "Modifications that could not be logged and were synced instead.", num(lg, "fallbacks"));
	metric(f, "presto_log_wait_seconds_total", "counter", "Time calls spent waiting for their records' persist (group commit).",
	       num(lg, "wait_ms_total") / 1000);

	hist = json_object_get(lg, "batch_hist");
	head(f, "presto_log_records_per_persist", "histogram", "Records made durable by one persist.");
	json_array_foreach(hist, i, p) {
		cum += json_number_value(p);
		if (i + 1 < json_array_size(hist)) {
			fprintf(f, "presto_log_records_per_persist_bucket{le=\"%llu\"} ", 1ULL << i);
			val(f, cum);
		}
	}
	fputs("presto_log_records_per_persist_bucket{le=\"+Inf\"} ", f);
	val(f, cum);
	fputs("presto_log_records_per_persist_sum ", f);
	val(f, num(lg, "appends"));
	fputs("presto_log_records_per_persist_count ", f);
	val(f, cum);

	metric(f, "presto_destage_runs_total", "counter", "Destager runs (checkpoints).",
	       num(ds, "runs"));
	metric(f, "presto_destage_errors_total", "counter", "Destager runs that failed.",
	       num(ds, "errors"));
	metric(f, "presto_destage_bytes_total", "counter", "Log bytes trimmed after destaging.",
	       num(ds, "bytes"));
	metric(f, "presto_destage_duration_seconds_total", "counter", "Time spent destaging.",
	       num(ds, "total_ms") / 1000);
	metric(f, "presto_destage_last_duration_seconds", "gauge", "Duration of the last destage.",
	       num(ds, "last_ms") / 1000);
	metric(f, "presto_commits_avoided_total", "counter",
	       "UNSTABLE writes answered FILE_SYNC and COMMITs answered at once.",
	       num(stats, "commits_avoided"));
	metric(f, "presto_recovery_records", "gauge", "Log records replayed at the last start.",
	       num(rc, "records"));
	metric(f, "presto_recovery_duration_seconds", "gauge", "Duration of the last recovery.",
	       num(rc, "ms") / 1000);
	metric(f, "presto_drc_hits_total", "counter", "Retransmissions answered from the duplicate request cache.",
	       num(drc, "hits"));
	metric(f, "presto_drc_drops_total", "counter", "Retransmissions dropped while in progress.",
	       num(drc, "drops"));
	metric(f, "presto_drc_entries", "gauge", "Entries in the duplicate request cache.",
	       num(drc, "entries"));

	procs_family(f, procs, "presto_nfs_requests_total", "counter",
		     "NFSv3 and MOUNT calls served, by procedure.", "count", 1);
	procs_family(f, procs, "presto_nfs_request_errors_total", "counter",
		     "Calls answered with an error status, by procedure.", "errors", 1);
	head(f, "presto_nfs_request_duration_seconds", "histogram",
	     "Service time of calls since the statistics were reset, by procedure.");
	json_t *bounds = json_object_get(stats, "latency_le_us");
	json_array_foreach(procs, i, p) {
		json_t *counts = json_object_get(p, "le_counts");
		size_t k;
		json_t *b;

		json_array_foreach(bounds, k, b) {
			fprintf(f, "presto_nfs_request_duration_seconds_bucket{proc=\"");
			label(f, json_string_value(json_object_get(p, "name")));
			fprintf(f, "\",le=\"%.6g\"} ", (double)json_integer_value(b) / 1e6);
			val(f, (double)json_integer_value(json_array_get(counts, k)));
		}
		fprintf(f, "presto_nfs_request_duration_seconds_bucket{proc=\"");
		label(f, json_string_value(json_object_get(p, "name")));
		fputs("\",le=\"+Inf\"} ", f);
		val(f, num(p, "count"));
		fprintf(f, "presto_nfs_request_duration_seconds_sum{proc=\"");
		label(f, json_string_value(json_object_get(p, "name")));
		fputs("\"} ", f);
		val(f, num(p, "mean_us") * num(p, "count") / 1e6);
		fprintf(f, "presto_nfs_request_duration_seconds_count{proc=\"");
		label(f, json_string_value(json_object_get(p, "name")));
		fputs("\"} ", f);
		val(f, num(p, "count"));
	}

	procs_family(f, procs, "presto_nfs_logged_requests_total", "counter",
		     "Calls answered from the NVRAM log, by procedure.", "log_count", 1);
	head(f, "presto_nfs_log_seconds_total", "counter",
	     "Time the calls answered from the NVRAM log spent in it (record, append, persist, "
	     "stamps), by procedure.");
	json_array_foreach(procs, i, p) {
		fprintf(f, "presto_nfs_log_seconds_total{proc=\"");
		label(f, json_string_value(json_object_get(p, "name")));
		fputs("\"} ", f);
		val(f, num(p, "log_mean_us") * num(p, "log_count") / 1e6);
	}

	head(f, "presto_export_acceleration", "gauge", "1 when presto is on for the export.");
	json_array_foreach(json_object_get(st, "exports"), i, p) {
		fprintf(f, "presto_export_acceleration{export=\"");
		label(f, json_string_value(json_object_get(p, "path")));
		fprintf(f, "\"} %d\n", json_is_true(json_object_get(p, "presto")));
	}
out:
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
