/*
 * nvlog.h -- the presto NVRAM log: a circular log of opaque records on
 * persistent memory (PMDK libpmem), with group commit, recovery scan and trim.
 * It knows nothing about NFS. The format is specified in cache/nvlog_format.h.
 *
 * Errors are negative errno values:
 *   -EINVAL    bad argument (type 0 or above NVLOG_TYPE_USER_MAX, record
 *              larger than nvlog_max_payload(), size too small)
 *   -EAGAIN    the log stayed full for longer than opts.full_wait_ms
 *              (the server maps it to NFS3ERR_JUKEBOX)
 *   -EIO       a persist failed: nothing at or after the first LSN it covered
 *              is durable; the log refuses further appends (sticky)
 *   -EROFS     the log was found CORRUPT at open: it is read-only until
 *              nvlog_reset()
 *   -EUCLEAN   the file is not a presto log (no valid superblock slot)
 *   -EEXIST    nvlog_format() without NVLOG_O_FORCE on a log with live
 *              records, or on a non-blank file that is not a log
 *   -EBUSY     nvlog_open() or nvlog_format() of a log that another open
 *              holds (its flock: a running server, even NVLOG_O_FORCE)
 *
 * Threads: nvlog_append*, nvlog_wait, nvlog_durable_lsn, nvlog_trim,
 * nvlog_info and nvlog_stats may be called from any number of threads at
 * once. nvlog_scan may run concurrently with appends (it reads only durable
 * records); run concurrently with nvlog_trim it may end early (TORN) where a
 * trimmed record is being reused. nvlog_close and nvlog_reset must not race
 * with anything else.
 */
#ifndef PRESTO_NVLOG_H
#define PRESTO_NVLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct nvlog;

/*
 * The persistence operations. A range of the mapping is durable once the
 * thread that wrote it called copy() into it and then drain(), and then any
 * thread called persist() over a range covering it. The library provides two
 * tables (pmem: copy = pmem_memcpy with non-temporal stores and no drain,
 * drain = pmem_drain, persist = nothing; msync: copy = memcpy, drain =
 * nothing, persist = pmem_msync) and picks one from pmem_is_pmem() at open.
 * Tests pass their own to simulate power loss. persist() returns 0 or
 * -errno; a failure is never ignored.
 */
struct nvlog_persist_ops {
	const char *name;
	void (*copy)(void *ctx, void *dst, const void *src, size_t n);
	void (*drain)(void *ctx);
	int (*persist)(void *ctx, const void *addr, size_t n);
	void (*mapped)(void *ctx, void *base, size_t len); /* optional: told the mapping at open/format */
	void *ctx;
};

#define NVLOG_O_FORCE 0x1u /* nvlog_format: reformat even live records or a non-log file */
#define NVLOG_O_NO_PREFAULT 0x2u /* nvlog_open: do not pre-fault the mapping */

struct nvlog_opts {
	size_t size;                          /* format size (bytes, multiple of 4096) */
	unsigned full_wait_ms;                /* append on a full log: wait this long, then -EAGAIN (0: 1000) */
	const struct nvlog_persist_ops *ops;  /* NULL: chosen from pmem_is_pmem() */
	unsigned flags;                       /* NVLOG_O_* */
};

enum nvlog_kind {
	NVLOG_KIND_PMEM = 0,     /* real persistent memory: flush + drain */
	NVLOG_KIND_EMULATED = 1, /* pmem_is_pmem() forced by PMEM_IS_PMEM_FORCE=1 */
	NVLOG_KIND_MSYNC = 2,    /* not persistent memory: msync */
	NVLOG_KIND_OPS = 3,      /* the caller's persist ops */
};

enum nvlog_scan_end {
	NVLOG_SCAN_CLEAN = 0,    /* reached the head in good order */
	NVLOG_SCAN_TORN = 1,     /* dropped a torn record at the head (crash mid-append) */
	NVLOG_SCAN_CORRUPT = 2,  /* a bad record, and later records prove it had been durable */
};

struct nvlog_scan_report {
	enum nvlog_scan_end end;
	uint64_t records;        /* records handed to the callback */
	uint64_t bytes;          /* their payload bytes */
	uint64_t first_lsn, last_lsn;  /* last_lsn < first_lsn when none */
	uint64_t bad_lsn;        /* TORN/CORRUPT: LSN expected at the bad place */
	uint64_t bad_offset;     /* TORN/CORRUPT: its offset in the file */
	uint64_t proof_lsn;      /* CORRUPT: a later valid record that proves it */
	const char *why;         /* TORN/CORRUPT: the rule that failed (static string) */
};

struct nvlog_info {
	uint8_t uuid[16];
	uint64_t epoch;          /* boot epoch of this open (write verifier) */
	uint64_t size;           /* bytes of the log */
	uint64_t area_size;      /* bytes of its record area */
	bool was_clean;          /* the previous close was clean */
	bool boot_id_changed;    /* the machine rebooted since the previous open */
	uint8_t boot_id[16];     /* this boot's /proc/sys/kernel/random/boot_id */
	uint8_t prev_boot_id[16];/* the one recorded by the previous open (zero: none) */
	bool read_only;          /* found CORRUPT at open (see open_scan) */
	enum nvlog_kind kind;
	const char *kind_name;   /* "pmem", "emulated", "msync" or ops->name */
	uint64_t tail_lsn;       /* oldest live LSN (== head_lsn + 1 when empty) */
	uint64_t head_lsn;       /* last LSN appended (maybe not yet durable) */
	uint64_t durable_lsn;    /* every LSN up to it is durable */
	uint64_t used_bytes;     /* live bytes, including padding */
	uint64_t max_payload;    /* largest record payload accepted */
	uint32_t version;        /* format version (nvlog_format.h): 2, or 1 until emptied */
	struct nvlog_scan_report open_scan; /* what the scan at open found */
};

struct nvlog_rec {
	uint64_t lsn;
	uint16_t type;
	uint16_t flags;
	uint32_t epoch;          /* low 32 bits of the boot epoch it was written in */
	uint64_t time_ns;        /* CLOCK_REALTIME_COARSE at append (a tick early at most) */
	const void *payload;     /* points into the mapping; valid during the callback */
	uint32_t len;
	uint64_t offset;         /* offset of the record header in the file */
};

#define NVLOG_BATCH_BUCKETS 12 /* records per persist: 1, 2, 3-4, 5-8, ..., >= 1024 */

struct nvlog_stats {
	uint64_t appends;        /* records appended */
	uint64_t append_bytes;   /* their payload bytes */
	uint64_t persists;       /* group commits (one persist each; on pmem,
				  * where each appender's drain persists its
				  * copy, each move of the durable LSN, most
				  * often by the appender itself: 1 record) */
	uint64_t persist_errors;
	uint64_t batch_hist[NVLOG_BATCH_BUCKETS]; /* bucket i: 2^(i-1) < records <= 2^i */
	uint64_t full_waits;     /* appends that waited for space */
	uint64_t full_timeouts;  /* of those, the ones that gave up (-EAGAIN) */
	uint64_t full_wait_ns;   /* total time spent waiting for space */
	uint64_t trims;
	uint64_t used_bytes;     /* gauges: current occupancy */
	uint64_t area_bytes;
	uint64_t oldest_age_ns;  /* age of the tail record (0 when empty) */
	uint64_t tail_lsn, head_lsn, durable_lsn;
};

/*
 * nvlog_format -- create or reformat the log at path with size bytes (0: the
 * size of an existing file or device). Refuses a log that has live records
 * unless o->flags has NVLOG_O_FORCE. o may be NULL. Never a log that is
 * open (-EBUSY): format and open take the file's exclusive flock.
 * Returns 0, -EEXIST, -EBUSY, -EINVAL or -errno.
 */
int nvlog_format(const char *path, size_t size, const struct nvlog_opts *o);

/*
 * nvlog_open -- map the log, pre-fault it, run the recovery scan to find the
 * head, and bump the boot epoch durably (recording this boot's id). If the
 * file does not exist and o->size is set, formats it first. A log found
 * CORRUPT opens read-only. Holds the file's exclusive flock until
 * nvlog_close: a second open, in this process or another, gets -EBUSY.
 * Returns 0 and *out, or -errno.
 */
int nvlog_open(const char *path, const struct nvlog_opts *o, struct nvlog **out);

/*
 * nvlog_why_not -- why nvlog_open found path not a log (-EUCLEAN), slot by
 * slot, into buf: for the operator's message.
 */
void nvlog_why_not(const char *path, char *buf, size_t len);

/*
 * nvlog_close -- make every appended record durable, then unmap. With clean,
 * the superblock records a clean shutdown: the caller's statement that it
 * stopped in good order (live records may remain; they are replayed or not
 * by the caller's own rule). nvlog_close(NULL, ...) does nothing.
 */
void nvlog_close(struct nvlog *log, bool clean);

/* nvlog_info -- fill *out. Returns 0. */
int nvlog_info(struct nvlog *log, struct nvlog_info *out);

/* nvlog_max_payload -- the largest payload nvlog_append accepts. */
size_t nvlog_max_payload(struct nvlog *log);

/*
 * nvlog_append -- append one record (payload gathered from iov, which must
 * not change during the call: its CRC is computed from it) and wait until it
 * and every earlier record are durable (group commit).
 * Returns 0 and *lsn, or -EINVAL, -EAGAIN, -EIO, -EROFS.
 */
int nvlog_append(struct nvlog *log, uint16_t type, const struct iovec *iov, int iovcnt, uint64_t *lsn);

/*
 * nvlog_append_nowait -- reserve an LSN and copy the record, without waiting
 * for durability: call nvlog_wait(*lsn) before acknowledging it. LSN order is
 * the order of the calls. Returns as nvlog_append.
 */
int nvlog_append_nowait(struct nvlog *log, uint16_t type, const struct iovec *iov, int iovcnt,
    uint64_t *lsn);

/*
 * nvlog_wait -- wait until every record up to lsn is durable, leading a group
 * commit if none is in progress. Returns 0 or -EIO.
 */
int nvlog_wait(struct nvlog *log, uint64_t lsn);

/* nvlog_durable_lsn -- every LSN up to the value returned is durable. */
uint64_t nvlog_durable_lsn(struct nvlog *log);

/*
 * nvlog_trim -- everything up to upto_lsn is durable elsewhere: advance the
 * tail durably past it (clamped to the durable LSN) and free the space.
 * Returns 0, or -errno when the superblock could not be persisted (the tail
 * then stays where it was).
 */
int nvlog_trim(struct nvlog *log, uint64_t upto_lsn);
/*
 * nvlog_trim_synced -- the same, for records the caller made durable by
 * other means whether or not their own persist succeeded (the filesystem
 * they describe was synced after they were applied): the tail may pass
 * records that are not durable (a failed persist, -EIO), up to the last one
 * copied whole. Such a record must not be found live by a later recovery,
 * where its bytes may have reached the medium after all.
 */
int nvlog_trim_synced(struct nvlog *log, uint64_t upto_lsn);

/*
 * nvlog_scan -- validate the live records from the tail and hand them to cb in
 * LSN order (up to the durable LSN), then fill *rep (may be NULL). Returns 0,
 * or the first non-zero value cb returned (the scan stops there).
 */
int nvlog_scan(struct nvlog *log, int (*cb)(void *arg, const struct nvlog_rec *rec), void *arg,
    struct nvlog_scan_report *rep);

/*
 * nvlog_reset -- durably empty the log (new salt: every old record stops
 * validating), keeping the LSN sequence going; clears read-only. For a log
 * found CORRUPT, after the caller salvaged what the scan gave. Returns 0 or
 * -errno.
 */
int nvlog_reset(struct nvlog *log);

/* nvlog_stats -- counters since open or the last reset, and gauges. */
void nvlog_stats(struct nvlog *log, struct nvlog_stats *out);
void nvlog_stats_reset(struct nvlog *log);
/* nvlog_space -- the gauges of the request path, cheaply: live bytes (with
 * padding), bytes of the record area, the last LSN reserved, and how many
 * appenders wait for room (new appenders queue behind them). */
void nvlog_space(struct nvlog *log, uint64_t *used_bytes, uint64_t *area_bytes, uint64_t *head_lsn,
    unsigned *space_waiters);

/* nvlog_kind_name -- "pmem", "emulated", "msync" or "ops". */
const char *nvlog_kind_name(enum nvlog_kind kind);

#endif
