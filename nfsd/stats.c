/*
 * stats.c -- per-procedure statistics (see stats.h).
 */
#include "nfsd/stats.h"

#include <string.h>

static struct stats_proc S[STATS_NPROCS];

static const char *const names[STATS_NPROCS] = {
	"NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
	"CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK",
	"READDIR", "READDIRPLUS", "FSSTAT", "FSINFO", "PATHCONF", "COMMIT",
	"MNT_NULL", "MNT", "MNT_DUMP", "UMNT", "UMNTALL", "MNT_EXPORT",
};

const char *stats_proc_name(int idx)
{
	return idx >= 0 && idx < STATS_NPROCS ? names[idx] : "?";
}

unsigned stats_bucket(uint64_t ns)
{
	if (ns < 4)
		return (unsigned)ns;
	unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
	unsigned sub = (unsigned)(ns >> (msb - 2)) & 3u;
	unsigned idx = (msb - 1) * 4 + sub;
	return idx < STATS_BUCKETS ? idx : STATS_BUCKETS - 1;
}

/* bucket_upper -- the largest value that falls into bucket i. */
static uint64_t bucket_upper(unsigned i)
{
	if (i < 4)
		return i;
	unsigned msb = i / 4 + 1;
	uint64_t sub = i % 4;
	return ((4 + sub + 1) << (msb - 2)) - 1;
}

void stats_record(int idx, uint64_t ns, bool error)
{
	if (idx < 0 || idx >= STATS_NPROCS)
		return;
	struct stats_proc *p = &S[idx];
	/* count first, the rest after it (release): a snapshot that reads the
	 * rest first (acquire) and count last never sees a call in the
	 * histogram or the errors that it does not count */
	__atomic_add_fetch(&p->count, 1, __ATOMIC_RELAXED);
	if (error)
		__atomic_add_fetch(&p->errors, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&p->sum_ns, ns, __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->hist[stats_bucket(ns)], 1, __ATOMIC_RELEASE);
}

void stats_record_log(int idx, uint64_t ns)
{
	if (idx < 0 || idx >= STATS_NPROCS)
		return;
	/* after stats_record's count (dispatch.c records the call first) */
	__atomic_add_fetch(&S[idx].log_count, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&S[idx].log_ns, ns, __ATOMIC_RELAXED);
}

/* stats_snapshot -- count is read last: every call the histogram, errors
 * or log_count hold was counted before them, so the copy never has more of
 * them than calls (a Prometheus histogram bucket above _count otherwise). */
void stats_snapshot(struct stats_proc out[STATS_NPROCS])
{
	for (int i = 0; i < STATS_NPROCS; i++) {
		out[i].log_count = __atomic_load_n(&S[i].log_count, __ATOMIC_ACQUIRE);
		out[i].log_ns = __atomic_load_n(&S[i].log_ns, __ATOMIC_RELAXED);
		out[i].errors = __atomic_load_n(&S[i].errors, __ATOMIC_ACQUIRE);
		out[i].sum_ns = __atomic_load_n(&S[i].sum_ns, __ATOMIC_RELAXED);
		for (int b = 0; b < STATS_BUCKETS; b++)
			out[i].hist[b] = __atomic_load_n(&S[i].hist[b], __ATOMIC_ACQUIRE);
		out[i].count = __atomic_load_n(&S[i].count, __ATOMIC_ACQUIRE);
	}
}

static uint64_t L[3];	/* enum stats_loop_event */

void stats_loop(enum stats_loop_event e)
{
	__atomic_add_fetch(&L[e], 1, __ATOMIC_RELAXED);
}

void stats_loop_snapshot(struct stats_loop *out)
{
	out->inline_calls = __atomic_load_n(&L[STATS_LOOP_INLINE], __ATOMIC_RELAXED);
	out->deferred = __atomic_load_n(&L[STATS_LOOP_DEFERRED], __ATOMIC_RELAXED);
	out->pauses = __atomic_load_n(&L[STATS_LOOP_PAUSE], __ATOMIC_RELAXED);
}

void stats_reset(void)
{
	for (int i = 0; i < 3; i++)
		__atomic_store_n(&L[i], 0, __ATOMIC_RELAXED);
	for (int i = 0; i < STATS_NPROCS; i++) {
		__atomic_store_n(&S[i].count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&S[i].errors, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&S[i].sum_ns, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&S[i].log_count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&S[i].log_ns, 0, __ATOMIC_RELAXED);
		for (int b = 0; b < STATS_BUCKETS; b++)
			__atomic_store_n(&S[i].hist[b], 0, __ATOMIC_RELAXED);
	}
}

uint64_t stats_percentile(const struct stats_proc *p, double q)
{
	uint64_t total = 0, seen = 0;

	for (int b = 0; b < STATS_BUCKETS; b++)
		total += p->hist[b];
	if (total == 0)
		return 0;
	uint64_t want = (uint64_t)(q * (double)total);
	if (want >= total)
		want = total - 1;
	for (unsigned b = 0; b < STATS_BUCKETS; b++) {
		seen += p->hist[b];
		if (seen > want)
			return bucket_upper(b);
	}
	return bucket_upper(STATS_BUCKETS - 1);
}

uint64_t stats_count_le(const struct stats_proc *p, uint64_t ns)
{
	uint64_t n = 0;

	for (unsigned b = 0; b < STATS_BUCKETS && bucket_upper(b) <= ns; b++)
		n += p->hist[b];
	return n;
}
