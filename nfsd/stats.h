/*
 * stats.h -- per-procedure counters and latency histograms of presto-nfsd.
 * Lock-free (relaxed atomics): recording costs a few increments.
 */
#ifndef PRESTO_STATS_H
#define PRESTO_STATS_H

#include <stdbool.h>
#include <stdint.h>

#define STATS_NFS_BASE 0		/* NFSv3 procedures 0..21 */
#define STATS_MNT_BASE 22		/* MOUNT procedures 0..5 */
#define STATS_NPROCS   28
#define STATS_BUCKETS  256		/* log-linear: 4 per power of two */

struct stats_proc {
	uint64_t count;
	uint64_t errors;		/* replies with a status other than OK */
	uint64_t sum_ns;
	uint64_t hist[STATS_BUCKETS];
	/* calls answered from the NVRAM log, and their time in it: the
	 * record's encoding, its append (copy and persist), the directory
	 * stamps and any wait for a group commit; part of sum_ns */
	uint64_t log_count;
	uint64_t log_ns;
};

/* stats_record -- count one call of procedure idx that took ns. */
void stats_record(int idx, uint64_t ns, bool error);
/* stats_record_log -- one call of procedure idx spent ns in the log. */
void stats_record_log(int idx, uint64_t ns);
/* stats_snapshot -- copy the counters of every procedure. */
void stats_snapshot(struct stats_proc out[STATS_NPROCS]);
void stats_reset(void);
/* stats_percentile -- the q-quantile (0..1) of p's latency in ns (the upper
 * bound of the bucket that holds it); 0 when empty. */
uint64_t stats_percentile(const struct stats_proc *p, double q);
/* stats_count_le -- calls of p whose latency bucket lies wholly at or below
 * ns (a Prometheus histogram's cumulative "le" count; each of our buckets
 * is at most 25% wide, so it falls within 25% of the boundary). */
uint64_t stats_count_le(const struct stats_proc *p, uint64_t ns);
/* Calls on the event loop thread: run there to the end (inline), handed to
 * a worker because they would have waited (deferred), and the pauses of
 * inline changes after slow ones (dispatch.c). */
enum stats_loop_event { STATS_LOOP_INLINE, STATS_LOOP_DEFERRED, STATS_LOOP_PAUSE };
struct stats_loop {
	uint64_t inline_calls, deferred, pauses;
};
void stats_loop(enum stats_loop_event e);
void stats_loop_snapshot(struct stats_loop *out);
/* stats_bucket -- histogram index of a latency in ns (exposed for tests). */
unsigned stats_bucket(uint64_t ns);
/* stats_proc_name -- "GETATTR", "MNT", ... for idx. */
const char *stats_proc_name(int idx);

#endif
