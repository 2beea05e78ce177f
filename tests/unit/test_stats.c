/*
 * test_stats.c -- per-procedure statistics (nfsd/stats.h): the log-linear
 * histogram's buckets are monotonic and contiguous, each bucket's upper bound
 * is the largest value it holds and is within 25% of any value in it;
 * percentiles of known distributions land in the bucket of the exact
 * percentile; counters, reset and the procedure names; a snapshot taken
 * while calls are recorded has no more histogram entries, errors or
 * logged calls than calls.
 *
 * bucket_upper() is static: stats_percentile() of a histogram with a single
 * count in bucket b returns it, which is how these tests read it.
 */
#include "nfsd/stats.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mount3.h"
#include "nfs3_prot.h"

static struct stats_proc one;

/* upper -- the upper bound of bucket b, as stats_percentile reports it. */
static uint64_t upper(unsigned b)
{
	memset(&one, 0, sizeof(one));
	one.hist[b] = 1;
	return stats_percentile(&one, 0.5);
}

/* values -- a spread of values over the whole 64-bit range: every value up
 * to 4096, then around each power of two and each quarter, then a pseudo-random
 * walk. fn is called on each in increasing order. */
static void values(void (*fn)(uint64_t v, void *arg), void *arg)
{
	for (uint64_t v = 0; v <= 4096; v++)
		fn(v, arg);
	for (unsigned s = 13; s < 64; s++) {
		uint64_t p = 1ull << s;
		for (uint64_t d = 0; d < 8; d++)	/* p-1, p, 5p/4-1, 5p/4, ... 7p/4 */
			fn(p + p / 4 * (d / 2) - 1 + (d & 1), arg);
		fn(p + p / 2 + p / 4 + p / 8, arg);
	}
	fn(UINT64_MAX - 1, arg);
	fn(UINT64_MAX, arg);
}

struct mono {
	uint64_t last_v;
	unsigned last_b;
	int first;
	unsigned long n;
};

static void check_value(uint64_t v, void *arg)
{
	struct mono *m = arg;
	unsigned b = stats_bucket(v);

	m->n++;
	if (b >= STATS_BUCKETS)
		fail_msg("value %llu: bucket %u out of range", (unsigned long long)v, b);
	uint64_t up = upper(b);
	if (up < v)
		fail_msg("value %llu in bucket %u whose upper bound is %llu", (unsigned long long)v, b,
			 (unsigned long long)up);
	/* log-linear with 4 sub-buckets per power of two: the bound is within
	 * 25% of the value (exact below 8) */
	if (v >= 8 && (up - v) > v / 4)
		fail_msg("value %llu: upper bound %llu is more than 25%% away", (unsigned long long)v,
			 (unsigned long long)up);
	if (v < 8 && up != v)
		fail_msg("small value %llu: upper bound %llu", (unsigned long long)v,
			 (unsigned long long)up);
	/* the upper bound is in the same bucket and the next value in the next */
	if (stats_bucket(up) != b)
		fail_msg("upper bound %llu of bucket %u is in bucket %u", (unsigned long long)up, b,
			 stats_bucket(up));
	if (up != UINT64_MAX && stats_bucket(up + 1) != b + 1)
		fail_msg("%llu (after bucket %u) is in bucket %u", (unsigned long long)(up + 1), b,
			 stats_bucket(up + 1));
	if (!m->first) {
		if (v < m->last_v || b < m->last_b)
			fail_msg("bucket of %llu (%u) below that of %llu (%u)", (unsigned long long)v, b,
				 (unsigned long long)m->last_v, m->last_b);
	}
	m->first = 0;
	m->last_v = v;
	m->last_b = b;
}

static void test_buckets_monotonic_contiguous(void **state)
{
	struct mono m = { .first = 1 };
	(void)state;

	values(check_value, &m);
	assert_true(m.n > 4000);
	assert_int_equal(stats_bucket(0), 0);
	assert_int_equal(stats_bucket(3), 3);
	assert_int_equal(stats_bucket(4), 4);
	assert_true(stats_bucket(UINT64_MAX) < STATS_BUCKETS);
}

static void test_bucket_walk(void **state)
{
	(void)state;

	/* from bucket 0, upper + 1 is always the first value of the next
	 * bucket: the buckets tile 0 .. UINT64_MAX with no gap and no overlap */
	uint64_t v = 0;
	unsigned b = 0, steps = 0;
	for (;;) {
		assert_int_equal(stats_bucket(v), b);
		uint64_t up = upper(b);
		assert_true(up >= v);
		if (v > 0)
			assert_int_equal(stats_bucket(v - 1), b - 1);
		steps++;
		if (up == UINT64_MAX)
			break;
		v = up + 1;
		b++;
		assert_true(b < STATS_BUCKETS);
	}
	assert_int_equal(stats_bucket(UINT64_MAX), b);
	assert_true(steps > 200);
}

/* ---- percentiles ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* check_percentiles -- record V (n values) under proc 3 and check that each
 * percentile is the upper bound of the bucket of the exact one (the value
 * of rank floor(q * n), 0-based, in sorted order). */
static void check_percentiles(uint64_t *v, size_t n)
{
	static const double qs[] = { 0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0 };
	static struct stats_proc snap[STATS_NPROCS];
	uint64_t sum = 0;

	stats_reset();
	for (size_t i = 0; i < n; i++) {
		stats_record(3, v[i], false);
		sum += v[i];
	}
	stats_snapshot(snap);
	assert_int_equal(snap[3].count, n);
	assert_int_equal(snap[3].sum_ns, sum);
	qsort(v, n, sizeof(v[0]), cmp_u64);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		size_t rank = (size_t)(qs[i] * (double)n);
		if (rank >= n)
			rank = n - 1;
		uint64_t exact = v[rank];
		uint64_t got = stats_percentile(&snap[3], qs[i]);
		if (stats_bucket(got) != stats_bucket(exact) || got < exact)
			fail_msg("q=%g of %zu values: got %llu, exact %llu (buckets %u, %u)", qs[i], n,
				 (unsigned long long)got, (unsigned long long)exact, stats_bucket(got),
				 stats_bucket(exact));
		if (i > 0)
			assert_true(got >= stats_percentile(&snap[3], qs[i - 1]));
	}
}

static void test_percentile_constant(void **state)
{
	uint64_t v[1000];
	(void)state;

	for (size_t i = 0; i < 1000; i++)
		v[i] = 250000;	/* 250 us */
	check_percentiles(v, 1000);
	static struct stats_proc snap[STATS_NPROCS];
	stats_snapshot(snap);
	uint64_t p = stats_percentile(&snap[3], 0.5);
	assert_true(p >= 250000 && p <= 250000 + 250000 / 4);
	assert_int_equal(stats_percentile(&snap[3], 0.99), p);
}

static void test_percentile_uniform(void **state)
{
	static uint64_t v[10000];
	(void)state;

	for (size_t i = 0; i < 10000; i++)
		v[i] = (i + 1) * 1000;	/* 1 us .. 10 ms */
	check_percentiles(v, 10000);
}

static void test_percentile_bimodal(void **state)
{
	static uint64_t v[1000];
	static struct stats_proc snap[STATS_NPROCS];
	(void)state;

	/* 90% fast (50 us, cache hits), 10% slow (20 ms, disk) */
	for (size_t i = 0; i < 1000; i++)
		v[i] = i % 10 == 9 ? 20000000 : 50000;
	check_percentiles(v, 1000);
	stats_snapshot(snap);
	assert_int_equal(stats_bucket(stats_percentile(&snap[3], 0.5)), stats_bucket(50000));
	assert_int_equal(stats_bucket(stats_percentile(&snap[3], 0.89)), stats_bucket(50000));
	assert_int_equal(stats_bucket(stats_percentile(&snap[3], 0.91)), stats_bucket(20000000));
	assert_int_equal(stats_bucket(stats_percentile(&snap[3], 0.99)), stats_bucket(20000000));
}

static void test_percentile_exponential(void **state)
{
	static uint64_t v[20000];
	uint64_t x = 88172645463325252ull;
	(void)state;

	/* heavy tail: xorshift, value = 2^k * (1 + frac) with k geometric */
	for (size_t i = 0; i < 20000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned k = (unsigned)__builtin_ctzll(x | (1ull << 40)) + 6;
		v[i] = (1ull << k) + (x >> (64 - k));
	}
	check_percentiles(v, 20000);
}

static void test_percentile_single_and_empty(void **state)
{
	static struct stats_proc snap[STATS_NPROCS];
	(void)state;

	stats_reset();
	stats_snapshot(snap);
	assert_int_equal(stats_percentile(&snap[5], 0.5), 0);
	assert_int_equal(stats_percentile(&snap[5], 0.99), 0);
	stats_record(5, 0, false);
	stats_snapshot(snap);
	assert_int_equal(stats_percentile(&snap[5], 0.5), 0);
	stats_reset();
	stats_record(5, 12345678, false);
	stats_snapshot(snap);
	uint64_t p = stats_percentile(&snap[5], 0.0);
	assert_int_equal(p, stats_percentile(&snap[5], 1.0));
	assert_int_equal(stats_bucket(p), stats_bucket(12345678));
	assert_true(p >= 12345678);
}

/* ---- counters ---- */

static void test_record_snapshot_reset(void **state)
{
	static struct stats_proc snap[STATS_NPROCS];
	(void)state;

	stats_reset();
	stats_record(STATS_NFS_BASE + NFSPROC3_WRITE, 1000, false);
	stats_record(STATS_NFS_BASE + NFSPROC3_WRITE, 3000, true);
	stats_record(STATS_MNT_BASE + MOUNTPROC3_MNT, 7, true);
	/* out of range: ignored, no crash */
	stats_record(-1, 1, true);
	stats_record(STATS_NPROCS, 1, true);
	stats_record(1000000, 1, true);
	stats_snapshot(snap);
	for (int i = 0; i < STATS_NPROCS; i++) {
		uint64_t hsum = 0;
		for (int b = 0; b < STATS_BUCKETS; b++)
			hsum += snap[i].hist[b];
		assert_int_equal(hsum, snap[i].count);
		if (i == STATS_NFS_BASE + NFSPROC3_WRITE) {
			assert_int_equal(snap[i].count, 2);
			assert_int_equal(snap[i].errors, 1);
			assert_int_equal(snap[i].sum_ns, 4000);
			assert_int_equal(snap[i].hist[stats_bucket(1000)], 1);
			assert_int_equal(snap[i].hist[stats_bucket(3000)], 1);
		} else if (i == STATS_MNT_BASE + MOUNTPROC3_MNT) {
			assert_int_equal(snap[i].count, 1);
			assert_int_equal(snap[i].errors, 1);
			assert_int_equal(snap[i].sum_ns, 7);
			assert_int_equal(snap[i].hist[7], 1);
		} else {
			assert_int_equal(snap[i].count, 0);
			assert_int_equal(snap[i].errors, 0);
			assert_int_equal(snap[i].sum_ns, 0);
		}
	}
	stats_reset();
	stats_snapshot(snap);
	for (int i = 0; i < STATS_NPROCS; i++) {
		assert_int_equal(snap[i].count, 0);
		assert_int_equal(snap[i].errors, 0);
		assert_int_equal(snap[i].sum_ns, 0);
		for (int b = 0; b < STATS_BUCKETS; b++)
			assert_int_equal(snap[i].hist[b], 0);
	}
}

/* ---- a snapshot taken while calls are recorded ---- */

static volatile int recording;

static void *recorder(void *arg)
{
	uint64_t ns = 1000;

	(void)arg;
	while (recording) {
		stats_record(STATS_NFS_BASE + NFSPROC3_WRITE, ns, (ns & 1) != 0);
		stats_record_log(STATS_NFS_BASE + NFSPROC3_WRITE, ns / 2);
		ns = ns * 7 % 1000003 + 1;
	}
	return NULL;
}

/* A snapshot taken while calls go on is consistent in what its readers
 * rely on: no more calls in the latency histogram than counted (a
 * Prometheus histogram whose le bucket is above +Inf, i.e. _count), no
 * more errors than calls, no more calls answered from the log than calls. */
static void test_snapshot_while_recording(void **state)
{
	static struct stats_proc snap[STATS_NPROCS];
	const struct stats_proc *w = &snap[STATS_NFS_BASE + NFSPROC3_WRITE];
	pthread_t th[2];
	unsigned bad_hist = 0, bad_errors = 0, bad_log = 0, n;

	(void)state;
	stats_reset();
	recording = 1;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, recorder, NULL), 0);
	for (n = 0; n < 20000; n++) {
		uint64_t hsum = 0;

		stats_snapshot(snap);
		for (int b = 0; b < STATS_BUCKETS; b++)
			hsum += w->hist[b];
		bad_hist += hsum > w->count;
		bad_errors += w->errors > w->count;
		bad_log += w->log_count > w->count;
	}
	recording = 0;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	if (bad_hist || bad_errors || bad_log)
		fail_msg("of %u snapshots, %u had more calls in the histogram than counted, "
			 "%u more errors than calls, %u more logged calls than calls",
			 n, bad_hist, bad_errors, bad_log);
	stats_reset();
}

/* ---- names ---- */

static void test_names(void **state)
{
	(void)state;

	static const struct {
		int idx;
		const char *name;
	} want[] = {
		{ STATS_NFS_BASE + NFSPROC3_NULL, "NULL" },
		{ STATS_NFS_BASE + NFSPROC3_GETATTR, "GETATTR" },
		{ STATS_NFS_BASE + NFSPROC3_SETATTR, "SETATTR" },
		{ STATS_NFS_BASE + NFSPROC3_LOOKUP, "LOOKUP" },
		{ STATS_NFS_BASE + NFSPROC3_ACCESS, "ACCESS" },
		{ STATS_NFS_BASE + NFSPROC3_READLINK, "READLINK" },
		{ STATS_NFS_BASE + NFSPROC3_READ, "READ" },
		{ STATS_NFS_BASE + NFSPROC3_WRITE, "WRITE" },
		{ STATS_NFS_BASE + NFSPROC3_CREATE, "CREATE" },
		{ STATS_NFS_BASE + NFSPROC3_MKDIR, "MKDIR" },
		{ STATS_NFS_BASE + NFSPROC3_SYMLINK, "SYMLINK" },
		{ STATS_NFS_BASE + NFSPROC3_MKNOD, "MKNOD" },
		{ STATS_NFS_BASE + NFSPROC3_REMOVE, "REMOVE" },
		{ STATS_NFS_BASE + NFSPROC3_RMDIR, "RMDIR" },
		{ STATS_NFS_BASE + NFSPROC3_RENAME, "RENAME" },
		{ STATS_NFS_BASE + NFSPROC3_LINK, "LINK" },
		{ STATS_NFS_BASE + NFSPROC3_READDIR, "READDIR" },
		{ STATS_NFS_BASE + NFSPROC3_READDIRPLUS, "READDIRPLUS" },
		{ STATS_NFS_BASE + NFSPROC3_FSSTAT, "FSSTAT" },
		{ STATS_NFS_BASE + NFSPROC3_FSINFO, "FSINFO" },
		{ STATS_NFS_BASE + NFSPROC3_PATHCONF, "PATHCONF" },
		{ STATS_NFS_BASE + NFSPROC3_COMMIT, "COMMIT" },
		{ STATS_MNT_BASE + MOUNTPROC3_NULL, "MNT_NULL" },
		{ STATS_MNT_BASE + MOUNTPROC3_MNT, "MNT" },
		{ STATS_MNT_BASE + MOUNTPROC3_DUMP, "MNT_DUMP" },
		{ STATS_MNT_BASE + MOUNTPROC3_UMNT, "UMNT" },
		{ STATS_MNT_BASE + MOUNTPROC3_UMNTALL, "UMNTALL" },
		{ STATS_MNT_BASE + MOUNTPROC3_EXPORT, "MNT_EXPORT" },
	};
	assert_int_equal(sizeof(want) / sizeof(want[0]), STATS_NPROCS);
	assert_int_equal(STATS_MNT_BASE, NFSPROC3_COMMIT + 1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(stats_proc_name(want[i].idx), want[i].name);
	/* every index has a distinct name */
	for (int i = 0; i < STATS_NPROCS; i++)
		for (int j = 0; j < i; j++)
			assert_string_not_equal(stats_proc_name(i), stats_proc_name(j));
	assert_string_equal(stats_proc_name(-1), "?");
	assert_string_equal(stats_proc_name(STATS_NPROCS), "?");
	assert_string_equal(stats_proc_name(1 << 30), "?");
}

/* stats_count_le: cumulative, never counts a call above the boundary, and
 * counts every call at or below 80% of it (buckets are at most 25% wide). */
static void test_count_le(void **state)
{
	struct stats_proc p;
	static const uint64_t lat[] = { 900, 5000, 12000, 40000, 90000, 2000000 };

	(void)state;
	memset(&p, 0, sizeof(p));
	for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++)
		p.hist[stats_bucket(lat[i])]++;
	uint64_t prev = 0;
	for (uint64_t le = 1000; le <= 4000000; le *= 2) {
		uint64_t n = stats_count_le(&p, le), above = 0, surely = 0;
		for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
			if (lat[i] <= le)
				above++;
			if (lat[i] * 5 <= le * 4)
				surely++;
		}
		assert_true(n >= prev);
		assert_true(n <= above);
		assert_true(n >= surely);
		prev = n;
	}
	assert_int_equal(stats_count_le(&p, UINT64_MAX), 6);
	assert_int_equal(stats_count_le(&p, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets_monotonic_contiguous),
		cmocka_unit_test(test_bucket_walk),
		cmocka_unit_test(test_percentile_constant),
		cmocka_unit_test(test_percentile_uniform),
		cmocka_unit_test(test_percentile_bimodal),
		cmocka_unit_test(test_percentile_exponential),
		cmocka_unit_test(test_percentile_single_and_empty),
		cmocka_unit_test(test_record_snapshot_reset),
		cmocka_unit_test(test_snapshot_while_recording),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_count_le),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
