/*
 * nvlog.c -- the NVRAM log at run time: open (map, pre-fault, recover, bump
 * the epoch), append with group commit, trim, scan, close. The format and the
 * recovery rule are in nvlog_format.h; this file keeps them.
 *
 * Group commit. An appender takes the log lock only to reserve: an LSN, a
 * position and the durable LSN of the moment (the record's dlsn). It then
 * copies header and payload into the mapping outside the lock (ops.copy, then
 * ops.drain by the same thread) and marks its ring slot "copied" with a
 * release store. A thread that must wait for LSN x becomes the leader if no
 * commit is in progress: it extends the copied frontier over every
 * contiguously copied record (spinning briefly if a predecessor is still
 * copying: a record is never acknowledged while an earlier one is incomplete),
 * issues one ops.persist over the whole range, publishes the durable LSN and
 * wakes the waiters. Everyone else sleeps on a condition variable.
 *
 * Why each appender drains its own copy (pmem): on x86 an SFENCE orders only
 * the flushes of the thread that issues it, so a leader's single drain would
 * not cover another thread's CLWBs. The drain per appender is what makes its
 * copy durable; the leader's persist is then empty for pmem, and is the one
 * msync of the batch otherwise. Alternatives considered: the leader
 * re-flushing the whole range (double flush traffic); a dedicated committer
 * thread (a wake-up per batch on the latency path, and a thread the library
 * would have to own). For pmem, since the leader would persist nothing, an
 * appender also moves the durable LSN itself right after its drain when
 * nobody leads and the lock is free (nvlog_advance): the usual single
 * appender then never needs nvlog_wait's round trip.
 *
 * Full log. Space is freed only by nvlog_trim, whose caller (the destager)
 * needs durable records; so an appender that finds no space first commits
 * everything reserved so far (nvlog_wait), then sleeps on cond_space until
 * trim frees enough or opts.full_wait_ms passes (-EAGAIN). New appenders queue
 * behind such waiters rather than overtake them. No lock is held while
 * waiting, so it cannot deadlock with a destager that appends or trims.
 *
 * Locks: sb_lock (superblock updates, the tail walk of trim) is taken before
 * lock (reservations, frontier, durable LSN, tail, statistics) when both are
 * needed.
 */
#include "cache/nvlog.h"

#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/crc32c.h"
#include "cache/nvlog_format.h"

#define NVLOG_RING 65536u /* records in flight (reserved, not yet durable) at most */
#define NVLOG_RING_MASK (NVLOG_RING - 1)
#define NVLOG_DEFAULT_FULL_WAIT_MS 1000u

struct nvlog_slot {
	uint64_t lsn;     /* == the LSN once its record is copied (release/acquire) */
	uint64_t end_pos; /* head position after that record */
};

struct nvlog {
	uint8_t *base;
	size_t map_len;
	uint8_t *area;
	uint64_t L;
	uint64_t align;       /* record alignment of the log's version */
	enum nvlog_kind kind;
	struct nvlog_persist_ops ops;
	unsigned full_wait_ms;
	uint64_t max_payload;
	uint64_t salt;
	uint32_t epoch32;
	bool was_clean, boot_id_changed;
	uint8_t prev_boot_id[16];
	struct nvlog_scan_report open_scan;

	pthread_mutex_t sb_lock;
	struct nvlog_sb sb;   /* current superblock (sb_lock) */
	int sb_slot;

	pthread_mutex_t lock;
	pthread_cond_t cond_durable;
	pthread_cond_t cond_space;
	uint64_t next_lsn;    /* next LSN to reserve */
	/* head_pos, tail_pos and space_waiters change under lock and are also
	 * read without it (nvlog_space): written with atomic stores */
	uint64_t head_pos;    /* position after the last reserved record */
	uint64_t tail_pos, tail_lsn;
	unsigned space_waiters;
	bool leader;          /* a commit is in progress */
	uint64_t copied_lsn, copied_pos; /* frontier the last commit reached */
	uint64_t durable_pos;
	uint64_t durable_lsn; /* atomic: read without the lock */
	int failed;           /* sticky -EIO after a failed persist */
	bool read_only;
	int lock_fd;          /* holds the file's flock while open */
	struct nvlog_stats st;
	struct nvlog_slot *ring;
};

/* ---- persistence ops ---- */

/*
 * Non-temporal stores at every size: libpmem would otherwise write a copy
 * under 256 bytes with ordinary stores and flush each line with CLWB, which
 * costs about 150 ns a line on this machine's VMs against a few ns streamed.
 * The appender hands over whole lines in a version-2 log (nvlog_put); the
 * partial lines left are a pad's header, the seal at close, and every record
 * of a version-1 log, whose records are 8-byte aligned.
 */
static void nvlog_pmem_copy(void *ctx, void *dst, const void *src, size_t n)
{
	(void)ctx;
	pmem_memcpy(dst, src, n, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
}

static void nvlog_pmem_drain(void *ctx)
{
	(void)ctx;
	pmem_drain();
}

static int nvlog_pmem_persist(void *ctx, const void *addr, size_t n)
{
	(void)ctx, (void)addr, (void)n;
	return 0; /* each appender flushed and drained its own copy */
}

static void nvlog_msync_copy(void *ctx, void *dst, const void *src, size_t n)
{
	(void)ctx;
	memcpy(dst, src, n);
}

static void nvlog_msync_drain(void *ctx)
{
	(void)ctx;
}

static int nvlog_msync_persist(void *ctx, const void *addr, size_t n)
{
	(void)ctx;
	return pmem_msync(addr, n) ? -errno : 0;
}

static const struct nvlog_persist_ops nvlog_pmem_ops = {
	.name = "pmem", .copy = nvlog_pmem_copy, .drain = nvlog_pmem_drain,
	.persist = nvlog_pmem_persist,
};

static const struct nvlog_persist_ops nvlog_msync_ops = {
	.name = "msync", .copy = nvlog_msync_copy, .drain = nvlog_msync_drain,
	.persist = nvlog_msync_persist,
};

const char *nvlog_kind_name(enum nvlog_kind kind)
{
	switch (kind) {
	case NVLOG_KIND_PMEM: return "pmem";
	case NVLOG_KIND_EMULATED: return "emulated";
	case NVLOG_KIND_MSYNC: return "msync";
	case NVLOG_KIND_OPS: return "ops";
	}
	return "?";
}

/* ---- helpers ---- */

static uint64_t nvlog_now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* nvlog_boot_id -- this boot's id as 16 bytes (zeroes if unreadable). */
static void nvlog_boot_id(uint8_t id[16])
{
	char buf[64];
	memset(id, 0, 16);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (fgets(buf, sizeof(buf), f)) {
		int k = 0;
		for (char *p = buf; *p && k < 32; p++) {
			int v;
			if (*p >= '0' && *p <= '9') v = *p - '0';
			else if (*p >= 'a' && *p <= 'f') v = *p - 'a' + 10;
			else if (*p >= 'A' && *p <= 'F') v = *p - 'A' + 10;
			else continue;
			id[k / 2] |= (uint8_t)(v << ((k & 1) ? 0 : 4));
			k++;
		}
	}
	fclose(f);
}

/* nvlog_random -- n random bytes. Returns 0 or -errno. */
static int nvlog_random(void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* nvlog_persist_range -- persist [pos, end) of the area (wraps at most once). */
static int nvlog_persist_range(struct nvlog *log, uint64_t pos, uint64_t end)
{
	uint64_t len = end - pos, off = pos % log->L;
	if (len == 0)
		return 0;
	if (off + len <= log->L)
		return log->ops.persist(log->ops.ctx, log->area + off, len);
	int rc = log->ops.persist(log->ops.ctx, log->area + off, log->L - off);
	if (rc == 0)
		rc = log->ops.persist(log->ops.ctx, log->area, len - (log->L - off));
	return rc;
}

/*
 * nvlog_sb_write -- make *nsb the current superblock: write it into the other
 * slot with seq + 1 and persist it. Caller holds sb_lock (or is alone).
 * Returns 0 or -errno (the current superblock is then unchanged).
 */
static int nvlog_sb_write(struct nvlog *log, struct nvlog_sb *nsb)
{
	int slot = 1 - log->sb_slot;
	uint8_t *dst = log->base + (slot ? NVLOG_SB_SLOT_OFF1 : NVLOG_SB_SLOT_OFF0);

	nsb->seq = log->sb.seq + 1;
	nsb->crc = nvlog_sb_crc(nsb);
	log->ops.copy(log->ops.ctx, dst, nsb, sizeof(*nsb));
	log->ops.drain(log->ops.ctx);
	int rc = log->ops.persist(log->ops.ctx, dst, sizeof(*nsb));
	if (rc)
		return rc;
	log->sb = *nsb;
	log->sb_slot = slot;
	return 0;
}

/*
 * nvlog_seal_head -- write and persist a zero header at the head, so that a
 * scan ending there reports an orderly END rather than the stale bytes of an
 * earlier lap (which it would report as TORN). Only free space is written.
 * Done at a clean close only: at open, the bytes at the head may be a torn
 * record that `presto-log dump` should still be able to show.
 * Returns 0 or -errno.
 */
static int nvlog_seal_head(struct nvlog *log)
{
	static const uint8_t zero[NVLOG_HDR_SIZE];
	uint64_t p = log->head_pos, rem = log->L - p % log->L;

	if (rem < NVLOG_HDR_SIZE)
		p += rem;
	if (p + NVLOG_HDR_SIZE > log->tail_pos + log->L)
		return 0; /* exactly full: the scan stops at the tail anyway */
	uint8_t *dst = log->area + p % log->L;
	log->ops.copy(log->ops.ctx, dst, zero, sizeof(zero));
	log->ops.drain(log->ops.ctx);
	return log->ops.persist(log->ops.ctx, dst, sizeof(zero));
}

/*
 * nvlog_prefault -- fault in every page writable, without changing data.
 * MADV_POPULATE_WRITE fills the page tables in one call, but it is not
 * enough under a paravirtualised guest's shadow paging (this machine's
 * VMs): the hypervisor maps a page for the process only at its first store
 * from user space, about 5 us a page, so an append's copy into a page of
 * the log's first lap took 4-5 us per 4 KiB against 0.3 us once mapped.
 * So every page is also written from here, with the value it holds (an
 * atomic OR of 0; nothing else uses the log yet). A 256 MiB log takes
 * about 0.37 s at open on such a guest, the madvise included; the writes
 * alone, each then also a guest page fault, took 0.75 s. (After 20 s
 * untouched, a lap's copies cost about 1.5 us again: the hypervisor drops
 * part of its mappings, which no touch at open can prevent.)
 */
static void nvlog_prefault(uint8_t *base, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	(void)madvise(base, len, MADV_POPULATE_WRITE);
#endif
	long pg = sysconf(_SC_PAGESIZE);
	for (size_t off = 0; off < len; off += (size_t)pg)
		__atomic_fetch_or(base + off, 0, __ATOMIC_RELAXED);
}

static void nvlog_report_from_walk(struct nvlog_scan_report *rep, const struct nvlog_sb *sb,
    const struct nvlog_walk_end *w)
{
	memset(rep, 0, sizeof(*rep));
	rep->end = (enum nvlog_scan_end)w->end;
	rep->records = w->records;
	rep->bytes = w->bytes;
	rep->first_lsn = sb->tail_lsn;
	rep->last_lsn = w->last_lsn;
	if (w->end != NVLOG_END_CLEAN) {
		rep->bad_lsn = w->bad_lsn;
		rep->bad_offset = sb->area_off + w->bad_off;
		rep->proof_lsn = w->proof_lsn;
		rep->why = w->why;
	}
}

/* ---- format ---- */

/* nvlog_zero -- zero and persist [off, off+len) of a mapping at format time. */
static int nvlog_zero(uint8_t *base, uint64_t off, uint64_t len, bool is_pmem,
    const struct nvlog_persist_ops *ops)
{
	if (ops) {
		memset(base + off, 0, len);
		return ops->persist(ops->ctx, base + off, len);
	}
	if (is_pmem) {
		pmem_memset_persist(base + off, 0, len);
		return 0;
	}
	memset(base + off, 0, len);
	return pmem_msync(base + off, len) ? -errno : 0;
}

static int nvlog_count_cb(void *arg, const struct nvlog_walk_rec *r)
{
	(void)r;
	(*(uint64_t *)arg)++;
	return 0;
}

/*
 * nvlog_lock -- open path (creating it, empty, with O_EXCL when create) and
 * take its exclusive flock without waiting: one process at a time opens or
 * formats a log. The lock belongs to the returned descriptor (its open file
 * description): mappings made through other descriptors do not hold it, and
 * it goes with the last close or the process. -EBUSY when another holds it.
 */
/* nvlog_empty -- whether fd is an empty regular file: a format cut short
 * between creating the file and sizing it, or a touched one */
static bool nvlog_empty(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

static int nvlog_lock(const char *path, bool create, int *fdp)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	*fdp = fd;
	return 0;
}

/* nvlog_sync_parent -- make a new log file's directory entry durable: a
 * log formatted but lost with its name at a power cut would be formatted
 * afresh at the next start, its records with it */
static int nvlog_sync_parent(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	if (slash && n == 0)
		n = 1;		/* the root directory */
	memcpy(dir, slash ? path : ".", slash ? n : 1);
	dir[slash ? n : 1] = '\0';
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

int nvlog_format(const char *path, size_t size, const struct nvlog_opts *o)
{
	unsigned flags = o ? o->flags : 0;
	const struct nvlog_persist_ops *ops = o ? o->ops : NULL;
	size_t mlen = 0;
	int is_pmem = 0, rc;
	uint8_t *base;

	size &= ~(size_t)4095;
	bool created = false;
	int lfd = -1;
	rc = nvlog_lock(path, false, &lfd);
	if (rc == -ENOENT) {
		if (size < NVLOG_MIN_SIZE)
			return -EINVAL;
		rc = nvlog_lock(path, true, &lfd);	/* created empty, locked */
		if (rc == -EEXIST)
			rc = -EBUSY;			/* another one just created it */
		if (rc < 0)
			return rc;
		created = true;
		base = NULL;
	} else if (rc < 0) {
		return rc;
	} else {
		if (nvlog_empty(lfd)) {
			base = NULL;	/* nothing to keep */
		} else {
			base = pmem_map_file(path, 0, 0, 0, &mlen, &is_pmem);
			if (!base) {
				rc = -errno;
				close(lfd);
				return rc;
			}
		}
	}
	if (base) {
		struct nvlog_sb sb;
		static const uint8_t zero[NVLOG_AREA_OFF];
		bool is_log = nvlog_sb_pick(base, mlen, &sb, NULL) == 0;
		if (!is_log && !(flags & NVLOG_O_FORCE) && mlen >= NVLOG_AREA_OFF &&
		    memcmp(base, zero, NVLOG_AREA_OFF) != 0) {
			pmem_unmap(base, mlen); /* not a log, and not blank: not ours to erase */
			close(lfd);
			return -EEXIST;
		}
		if (is_log && !(flags & NVLOG_O_FORCE)) {
			struct nvlog_view v = { .base = base, .map_len = mlen, .sb = sb };
			struct nvlog_walk_end w;
			uint64_t n = 0;
			nvlog_walk(&v, UINT64_MAX, nvlog_count_cb, &n, &w);
			if (n > 0) {
				pmem_unmap(base, mlen);
				close(lfd);
				return -EEXIST;
			}
		}
		if (size == 0)
			size = mlen & ~(size_t)4095;
		if (size != mlen) {
			pmem_unmap(base, mlen);
			base = NULL; /* a regular file: recreate at the new size below */
		}
	}
	if (size < NVLOG_MIN_SIZE) {
		if (base)
			pmem_unmap(base, mlen);
		close(lfd);
		return -EINVAL;
	}
	if (!base) {
		/* the file locked above, set to its size (libpmem allocates it) */
		base = pmem_map_file(path, size, PMEM_FILE_CREATE, 0600, &mlen, &is_pmem);
		if (!base) {
			rc = -errno;
			if (created)
				unlink(path);
			close(lfd);
			return rc;
		}
	}

	if (ops && ops->mapped)
		ops->mapped(ops->ctx, base, mlen);
	struct nvlog_sb sb = {
		.magic = NVLOG_SB_MAGIC, .version = NVLOG_VERSION, .clean = 1, .seq = 1,
		.size = size, .area_off = NVLOG_AREA_OFF, .area_len = size - NVLOG_AREA_OFF,
		.tail_pos = 0, .tail_lsn = 1, .format_time = nvlog_now_ns(CLOCK_REALTIME) / 1000000000ull,
	};
	if ((rc = nvlog_random(sb.uuid, sizeof(sb.uuid))) ||
	    (rc = nvlog_random(&sb.salt, sizeof(sb.salt))))
		goto out;
	/* old slots first, then the area (so no record of the old salt is left
	 * to be reported as torn), then the new slot 0 */
	if ((rc = nvlog_zero(base, 0, NVLOG_AREA_OFF, is_pmem, ops)) ||
	    (rc = nvlog_zero(base, NVLOG_AREA_OFF, size - NVLOG_AREA_OFF, is_pmem, ops)))
		goto out;
	sb.crc = nvlog_sb_crc(&sb);
	memcpy(base + NVLOG_SB_SLOT_OFF0, &sb, sizeof(sb));
	if (ops)
		rc = ops->persist(ops->ctx, base, sizeof(sb));
	else if (is_pmem)
		pmem_persist(base, sizeof(sb));
	else
		rc = pmem_msync(base, sizeof(sb)) ? -errno : 0;
	if (rc == 0 && created)
		rc = nvlog_sync_parent(path);
out:
	pmem_unmap(base, mlen);
	close(lfd);
	return rc;
}

/* ---- open / close ---- */

int nvlog_open(const char *path, const struct nvlog_opts *o, struct nvlog **out)
{
	size_t mlen = 0;
	int is_pmem = 0, rc;
	uint8_t *base;
	struct nvlog *log = NULL;

	*out = NULL;
	int lfd = -1;
	rc = nvlog_lock(path, false, &lfd);
	if (rc == 0 && o && o->size && nvlog_empty(lfd)) {
		close(lfd);	/* formatted as if new */
		rc = -ENOENT;
	}
	if (rc == -ENOENT && o && o->size) {
		if ((rc = nvlog_format(path, o->size, o)))
			return rc;
		rc = nvlog_lock(path, false, &lfd);
	}
	if (rc < 0)
		return rc;
	struct stat lst;
	if (fstat(lfd, &lst) == 0 && S_ISREG(lst.st_mode) && lst.st_size < (off_t)NVLOG_MIN_SIZE) {
		close(lfd);	/* an empty or short file: not a log (nvlog_why_not) */
		return -EUCLEAN;
	}
	base = pmem_map_file(path, 0, 0, 0, &mlen, &is_pmem);
	if (!base) {
		rc = -errno;
		close(lfd);
		return rc;
	}

	log = calloc(1, sizeof(*log));
	if (!log) {
		rc = -ENOMEM;
		goto fail;
	}
	log->ring = calloc(NVLOG_RING, sizeof(*log->ring));
	if (!log->ring) {
		rc = -ENOMEM;
		goto fail;
	}
	log->base = base;
	log->map_len = mlen;
	log->lock_fd = lfd;
	if ((rc = nvlog_sb_pick(base, mlen, &log->sb, &log->sb_slot)))
		goto fail;
	log->area = base + log->sb.area_off;
	log->L = log->sb.area_len;
	log->align = nvlog_align(log->sb.version);
	log->salt = log->sb.salt;
	log->max_payload = log->L / 4 - NVLOG_HDR_SIZE;
	if (log->max_payload > UINT32_MAX - NVLOG_ALIGN)	/* the widest pad of any version */
		log->max_payload = UINT32_MAX - NVLOG_ALIGN;
	log->full_wait_ms = (o && o->full_wait_ms) ? o->full_wait_ms : NVLOG_DEFAULT_FULL_WAIT_MS;
	if (o && o->ops) {
		log->kind = NVLOG_KIND_OPS;
		log->ops = *o->ops;
	} else if (is_pmem) {
		const char *f = getenv("PMEM_IS_PMEM_FORCE");
		log->kind = (f && strcmp(f, "1") == 0) ? NVLOG_KIND_EMULATED : NVLOG_KIND_PMEM;
		log->ops = nvlog_pmem_ops;
	} else {
		log->kind = NVLOG_KIND_MSYNC;
		log->ops = nvlog_msync_ops;
	}
	if (log->ops.mapped)
		log->ops.mapped(log->ops.ctx, base, mlen);
	if (!(o && (o->flags & NVLOG_O_NO_PREFAULT)))
		nvlog_prefault(base, mlen);

	/* recovery: find the head (nvlog_format.h, section 6) */
	struct nvlog_view v = { .base = base, .map_len = mlen, .sb = log->sb };
	struct nvlog_walk_end w;
	nvlog_walk(&v, UINT64_MAX, NULL, NULL, &w);
	nvlog_report_from_walk(&log->open_scan, &log->sb, &w);
	log->read_only = w.end == NVLOG_END_CORRUPT;
	log->tail_pos = log->sb.tail_pos;
	log->tail_lsn = log->sb.tail_lsn;
	log->head_pos = log->durable_pos = log->copied_pos = w.head_pos;
	log->next_lsn = w.last_lsn + 1;
	log->durable_lsn = log->copied_lsn = w.last_lsn;

	/* a new epoch, this boot's id, not clean until a clean close */
	uint8_t bid[16];
	nvlog_boot_id(bid);
	struct nvlog_sb nsb = log->sb;
	log->was_clean = nsb.clean != 0;
	log->boot_id_changed = memcmp(nsb.boot_id, bid, 16) != 0;
	memcpy(log->prev_boot_id, nsb.boot_id, 16);
	if (nsb.boot_epoch + 1 >= UINT32_MAX) {
		/* records carry the epoch in 32 bits and a superblock at the top
		 * of that range is not valid (nvlog_sb_why): bumped, the log
		 * would become unreadable at the next open, its records with it.
		 * Refused while it still reads; after 4 billion opens. (Starting
		 * the epochs again is not done: directory stamps and redirects
		 * order themselves by epoch.) */
		fprintf(stderr, "nvlog: %s: the boot epoch is exhausted (%llu opens): "
				"presto-log dump reads the records; format the log to use it again\n",
		    path, (unsigned long long)nsb.boot_epoch);
		rc = -EOVERFLOW;
		goto fail;
	}
	nsb.boot_epoch++;
	nsb.clean = 0;
	memcpy(nsb.boot_id, bid, 16);
	bool empty = !log->read_only && w.last_lsn + 1 == log->tail_lsn;
	bool upgrade = empty && nsb.version != NVLOG_VERSION && w.end == NVLOG_END_CLEAN;
	if (upgrade) {
		/* an empty, orderly log of an older version: continue in the
		 * current one from the next aligned position (the bytes skipped
		 * were free), sealed so that it ends CLEAN there (a TORN end is
		 * kept as it is, for presto-log dump, until a clean open) */
		static const uint8_t zero[NVLOG_ALIGN];
		uint64_t p = (log->head_pos + NVLOG_ALIGN - 1) & ~(uint64_t)(NVLOG_ALIGN - 1);
		uint8_t *dst = log->area + p % log->L;
		log->ops.copy(log->ops.ctx, dst, zero, sizeof(zero));
		log->ops.drain(log->ops.ctx);
		if ((rc = log->ops.persist(log->ops.ctx, dst, sizeof(zero))))
			goto fail;
		nsb.version = NVLOG_VERSION;
		nsb.tail_pos = p;
	}
	if (empty && nsb.version != NVLOG_VERSION_V1)
		nsb.tail_epoch = (uint32_t)nsb.boot_epoch; /* whatever lies at the tail is older */
	if ((rc = nvlog_sb_write(log, &nsb)))
		goto fail;
	/* both slots in the new version: a binary that knows only the old one
	 * must not fall back to the other slot, older tail and all */
	if (upgrade && (rc = nvlog_sb_write(log, &nsb)))
		goto fail;
	if (upgrade) {
		log->align = NVLOG_ALIGN;
		log->tail_pos = log->head_pos = log->durable_pos = log->copied_pos = nsb.tail_pos;
	}
	log->epoch32 = (uint32_t)log->sb.boot_epoch;

	pthread_mutex_init(&log->sb_lock, NULL);
	pthread_mutex_init(&log->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&log->cond_durable, &ca);
	pthread_cond_init(&log->cond_space, &ca);
	pthread_condattr_destroy(&ca);
	*out = log;
	return 0;
fail:
	if (log) {
		free(log->ring);
		free(log);
	}
	pmem_unmap(base, mlen);
	close(lfd);
	return rc;
}

void nvlog_why_not(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	snprintf(buf, len, "?");
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(buf, len, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	off_t size = S_ISREG(st.st_mode) ? st.st_size : lseek(fd, 0, SEEK_END);
	if (size < (off_t)NVLOG_MIN_SIZE) {
		snprintf(buf, len, "the file has %lld bytes, fewer than the smallest log (%llu)",
			 (long long)size, (unsigned long long)NVLOG_MIN_SIZE);
		close(fd);
		return;
	}
	struct nvlog_sb sb[2];
	if (pread(fd, &sb[0], sizeof(sb[0]), NVLOG_SB_SLOT_OFF0) != (ssize_t)sizeof(sb[0]) ||
	    pread(fd, &sb[1], sizeof(sb[1]), NVLOG_SB_SLOT_OFF1) != (ssize_t)sizeof(sb[1])) {
		snprintf(buf, len, "cannot read its superblocks: %s", strerror(errno));
		close(fd);
		return;
	}
	close(fd);
	size_t k = 0;
	for (int i = 0; i < 2 && k < len; i++) {
		const char *why = nvlog_sb_why(&sb[i], (size_t)size);
		int n;
		if (why && sb[i].size > (uint64_t)size && nvlog_sb_crc(&sb[i]) == sb[i].crc)
			n = snprintf(buf + k, len - k, "%sslot %d: it says %llu bytes, the file has %lld "
				     "(truncated?)", i ? "; " : "", i,
				     (unsigned long long)sb[i].size, (long long)size);
		else
			n = snprintf(buf + k, len - k, "%sslot %d: %s", i ? "; " : "", i,
				     why ? why : "valid");
		if (n < 0)
			break;
		k += (size_t)n;
	}
}

void nvlog_close(struct nvlog *log, bool clean)
{
	if (!log)
		return;
	if (!log->read_only && !log->failed && log->next_lsn > 1)
		nvlog_wait(log, log->next_lsn - 1);
	if (clean && !log->failed) {
		if (!log->read_only && nvlog_seal_head(log))
			fprintf(stderr, "nvlog: close: cannot persist the end mark\n");
		pthread_mutex_lock(&log->sb_lock);
		struct nvlog_sb nsb = log->sb;
		nsb.clean = 1;
		if (nvlog_sb_write(log, &nsb))
			fprintf(stderr, "nvlog: close: cannot persist the clean flag\n");
		pthread_mutex_unlock(&log->sb_lock);
	}
	pmem_unmap(log->base, log->map_len);
	close(log->lock_fd);	/* after the unmap: the next opener finds it all written */
	pthread_cond_destroy(&log->cond_durable);
	pthread_cond_destroy(&log->cond_space);
	pthread_mutex_destroy(&log->lock);
	pthread_mutex_destroy(&log->sb_lock);
	free(log->ring);
	free(log);
}

/* ---- append / group commit ---- */

size_t nvlog_max_payload(struct nvlog *log)
{
	return log->max_payload;
}

uint64_t nvlog_durable_lsn(struct nvlog *log)
{
	return __atomic_load_n(&log->durable_lsn, __ATOMIC_ACQUIRE);
}

static unsigned nvlog_bucket(uint64_t k)
{
	unsigned b = k <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(k - 1);
	return b < NVLOG_BATCH_BUCKETS ? b : NVLOG_BATCH_BUCKETS - 1;
}

/* nvlog_copied_through -- move (*f, *fpos) over the records copied
 * contiguously after *f (their slots published) */
static void nvlog_copied_through(struct nvlog *log, uint64_t *f, uint64_t *fpos)
{
	for (;;) {
		struct nvlog_slot *s = &log->ring[(*f + 1) & NVLOG_RING_MASK];
		if (__atomic_load_n(&s->lsn, __ATOMIC_ACQUIRE) != *f + 1)
			return;
		(*f)++;
		*fpos = s->end_pos;
	}
}

/* nvlog_durable_to -- records (before, f] are durable, up to position fpos
 * (lock held): publish it and count the persist */
static void nvlog_durable_to(struct nvlog *log, uint64_t before, uint64_t f, uint64_t fpos)
{
	log->durable_pos = fpos;
	__atomic_store_n(&log->durable_lsn, f, __ATOMIC_RELEASE);
	log->st.persists++;
	log->st.batch_hist[nvlog_bucket(f - before)]++;
}

int nvlog_wait(struct nvlog *log, uint64_t lsn)
{
	int rc;

	if (nvlog_durable_lsn(log) >= lsn)
		return 0;
	pthread_mutex_lock(&log->lock);
	for (;;) {
		if (log->durable_lsn >= lsn) {
			rc = 0;
			break;
		}
		if (log->failed) {
			rc = log->failed;
			break;
		}
		if (lsn >= log->next_lsn) {
			rc = -EINVAL; /* never reserved */
			break;
		}
		if (log->leader) {
			pthread_cond_wait(&log->cond_durable, &log->lock);
			continue;
		}
		/* lead one commit */
		log->leader = true;
		uint64_t f = log->copied_lsn, fpos = log->copied_pos, from = log->durable_pos;
		uint64_t before = log->durable_lsn;
		pthread_mutex_unlock(&log->lock);
		for (unsigned spins = 0;; spins++) {
			nvlog_copied_through(log, &f, &fpos);
			if (f >= lsn)
				break;
			/* a predecessor is still copying: it never takes long */
			if (spins < 100)
				__builtin_ia32_pause();
			else
				sched_yield();
		}
		int prc = nvlog_persist_range(log, from, fpos);
		pthread_mutex_lock(&log->lock);
		log->copied_lsn = f;
		log->copied_pos = fpos;
		if (prc) {
			log->failed = -EIO;
			log->st.persist_errors++;
			fprintf(stderr, "nvlog: persist of LSN %llu..%llu failed: %s\n",
			    (unsigned long long)before + 1, (unsigned long long)f, strerror(-prc));
		} else {
			nvlog_durable_to(log, before, f, fpos);
		}
		log->leader = false;
		pthread_cond_broadcast(&log->cond_durable);
	}
	pthread_mutex_unlock(&log->lock);
	return rc;
}

/*
 * nvlog_advance -- an appender's shortcut when its own drain made its copy
 * durable (pmem): with the lock free and no commit in progress, move the
 * durable frontier over the copied records itself. The usual case, a call
 * run alone, then finds its record durable and skips nvlog_wait's round
 * trip (two lock passes and a wake-up). Nothing is persisted here: for pmem
 * the leader's persist is empty anyway. If the lock is busy, a waiter's
 * nvlog_wait still does the work.
 */
static void nvlog_advance(struct nvlog *log)
{
	if (pthread_mutex_trylock(&log->lock) != 0)
		return;
	if (!log->leader && !log->failed) {
		uint64_t before = log->durable_lsn, f = log->copied_lsn, fpos = log->copied_pos;
		nvlog_copied_through(log, &f, &fpos);
		if (f > before) {
			log->copied_lsn = f;
			log->copied_pos = fpos;
			nvlog_durable_to(log, before, f, fpos);
		}
	}
	pthread_mutex_unlock(&log->lock);
}

/* nvlog_fits -- would a record of size bytes fit now? (lock held) */
static bool nvlog_fits(struct nvlog *log, uint64_t size)
{
	uint64_t rec_pos, end = nvlog_next_pos(log->L, log->head_pos, size, &rec_pos);
	return end - log->tail_pos <= log->L;
}

/*
 * nvlog_reserve -- take an LSN and a place for a record of size bytes,
 * waiting (bounded) for space. Fills *lsn, *pos (the head before: a pad goes
 * there if *rec_pos differs), *rec_pos, *end and *dlsn. Returns 0 or -errno.
 */
static int nvlog_reserve(struct nvlog *log, uint64_t size, uint64_t len, uint64_t *lsn,
    uint64_t *pos, uint64_t *rec_pos, uint64_t *end, uint64_t *dlsn)
{
	struct timespec deadline;
	bool waiting = false, committed = false;
	uint64_t t0 = 0;
	int rc = 0;

	pthread_mutex_lock(&log->lock);
	for (;;) {
		if (log->read_only) {
			rc = -EROFS;
			break;
		}
		if (log->failed) {
			rc = log->failed;
			break;
		}
		if (log->next_lsn - log->durable_lsn >= NVLOG_RING) {
			/* too many records in flight: commit the oldest */
			uint64_t x = log->next_lsn - NVLOG_RING + 1;
			pthread_mutex_unlock(&log->lock);
			rc = nvlog_wait(log, x);
			pthread_mutex_lock(&log->lock);
			if (rc)
				break;
			continue;
		}
		bool queue_ok = waiting || log->space_waiters == 0;
		if (queue_ok && nvlog_fits(log, size))
			break;
		if (!waiting) {
			waiting = true;
			__atomic_store_n(&log->space_waiters, log->space_waiters + 1, __ATOMIC_RELAXED);
			log->st.full_waits++;
			t0 = nvlog_now_ns(CLOCK_MONOTONIC);
			clock_gettime(CLOCK_MONOTONIC, &deadline);
			deadline.tv_sec += log->full_wait_ms / 1000;
			deadline.tv_nsec += (long)(log->full_wait_ms % 1000) * 1000000L;
			if (deadline.tv_nsec >= 1000000000L) {
				deadline.tv_sec++;
				deadline.tv_nsec -= 1000000000L;
			}
		}
		if (!committed && log->next_lsn > 1) {
			/* trim needs durable records: make all reserved ones durable */
			committed = true;
			uint64_t x = log->next_lsn - 1;
			pthread_mutex_unlock(&log->lock);
			nvlog_wait(log, x);
			pthread_mutex_lock(&log->lock);
			continue;
		}
		if (pthread_cond_timedwait(&log->cond_space, &log->lock, &deadline) == ETIMEDOUT &&
		    !nvlog_fits(log, size)) {
			log->st.full_timeouts++;
			rc = -EAGAIN;
			break;
		}
	}
	if (waiting) {
		__atomic_store_n(&log->space_waiters, log->space_waiters - 1, __ATOMIC_RELAXED);
		log->st.full_wait_ns += nvlog_now_ns(CLOCK_MONOTONIC) - t0;
		pthread_cond_broadcast(&log->cond_space); /* the next in line re-checks */
	}
	if (rc == 0) {
		*lsn = log->next_lsn;
		__atomic_store_n(&log->next_lsn, *lsn + 1, __ATOMIC_RELAXED);
		*pos = log->head_pos;
		*end = nvlog_next_pos(log->L, log->head_pos, size, rec_pos);
		__atomic_store_n(&log->head_pos, *end, __ATOMIC_RELEASE);
		*dlsn = __atomic_load_n(&log->durable_lsn, __ATOMIC_RELAXED);
		log->st.appends++;
		log->st.append_bytes += len;
	}
	pthread_mutex_unlock(&log->lock);
	return rc;
}

/*
 * Writing a record in whole cache lines. A line that a copy covers only in
 * part is flushed line by line (CLWB) by libpmem, about 150 ns each here,
 * where whole lines stream with non-temporal stores for a few ns; and the
 * header, payload runs and pad of a record used to be three copies with a
 * partial line at each seam. So the appender gathers the record in a small
 * per-thread buffer and hands the log only runs that start on a line
 * boundary and are whole lines long, in a version-2 log (a version-1 log's
 * records are 8-byte aligned: the runs are shifted by the record's offset in
 * its line, and the last may end early; correct, only slower). A run of at least
 * NVLOG_DIRECT_MIN bytes is copied from where it lies once the buffer has
 * completed its line, so WRITE data is not copied twice.
 */
#define NVLOG_LINE 64u
#define NVLOG_STAGE 1024u
#define NVLOG_DIRECT_MIN 256u

struct nvlog_put {
	struct nvlog *log;
	uint8_t *dst;  /* where the buffer's first byte goes */
	size_t fill;   /* bytes in the buffer */
	uint8_t *buf;  /* NVLOG_STAGE bytes, line-aligned */
};

static _Thread_local uint8_t nvlog_stage[NVLOG_STAGE] __attribute__((aligned(NVLOG_LINE)));

static void nvlog_put_flush(struct nvlog_put *p)
{
	if (!p->fill)
		return;
	p->log->ops.copy(p->log->ops.ctx, p->dst, p->buf, p->fill);
	p->dst += p->fill;
	p->fill = 0;
}

static void nvlog_put(struct nvlog_put *p, const void *src, size_t n)
{
	const uint8_t *s = src;

	while (n) {
		size_t m;
		if (n >= NVLOG_DIRECT_MIN) {
			if (p->fill % NVLOG_LINE == 0) {
				nvlog_put_flush(p);
				m = n & ~(size_t)(NVLOG_LINE - 1);
				p->log->ops.copy(p->log->ops.ctx, p->dst, s, m);
				p->dst += m;
				s += m;
				n -= m;
				continue;
			}
			m = NVLOG_LINE - p->fill % NVLOG_LINE; /* complete the line */
		} else {
			m = NVLOG_STAGE - p->fill < n ? NVLOG_STAGE - p->fill : n;
		}
		memcpy(p->buf + p->fill, s, m);
		p->fill += m;
		s += m;
		n -= m;
		if (p->fill == NVLOG_STAGE)
			nvlog_put_flush(p);
	}
}

/* nvlog_put_zero -- n zero bytes (the pad after a payload: under a line) */
static void nvlog_put_zero(struct nvlog_put *p, size_t n)
{
	static const uint8_t zero[NVLOG_LINE];
	while (n) {
		size_t m = n < sizeof(zero) ? n : sizeof(zero);
		nvlog_put(p, zero, m);
		n -= m;
	}
}

int nvlog_append_nowait(struct nvlog *log, uint16_t type, const struct iovec *iov, int iovcnt,
    uint64_t *lsn)
{
	uint64_t len = 0, pos, rec_pos, end, dlsn, l;
	int rc;

	if (type == 0 || type > NVLOG_TYPE_USER_MAX || iovcnt < 0 || (iovcnt && !iov))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > log->max_payload - len)
			return -EINVAL;	/* also a sum that would wrap */
		len += iov[i].iov_len;
	}
	uint64_t size = nvlog_rec_size(log->align, len);
	if ((rc = nvlog_reserve(log, size, len, &l, &pos, &rec_pos, &end, &dlsn)))
		return rc;

	/* the record's time only dates it (dump, the oldest record's age):
	 * the coarse clock (a tick, 4 ms here) is enough and costs less */
	uint64_t now = nvlog_now_ns(CLOCK_REALTIME_COARSE);
	if (rec_pos != pos) {
		uint64_t poff = pos % log->L, rem = log->L - poff;
		if (rem >= NVLOG_HDR_SIZE) {
			struct nvlog_rec_hdr ph = {
				.len = (uint32_t)(rem - NVLOG_HDR_SIZE), .type = NVLOG_TYPE_PAD,
				.epoch = log->epoch32, .lsn = l, .dlsn = dlsn, .time_ns = now,
			};
			ph.crc = nvlog_rec_crc(log->salt, &ph, NULL);
			log->ops.copy(log->ops.ctx, log->area + poff, &ph, sizeof(ph));
		}
	}
	struct nvlog_rec_hdr h = {
		.len = (uint32_t)len, .type = type, .epoch = log->epoch32, .lsn = l, .dlsn = dlsn,
		.time_ns = now,
	};
	/* the CRC first: the header goes out with the first line */
	uint32_t c = crc32c(0, &log->salt, sizeof(log->salt));
	c = crc32c(c, (const uint8_t *)&h + 4, NVLOG_HDR_SIZE - 4);
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len)
			c = crc32c(c, iov[i].iov_base, iov[i].iov_len);
	h.crc = c;
	struct nvlog_put p = { .log = log, .dst = log->area + rec_pos % log->L, .buf = nvlog_stage };
	nvlog_put(&p, &h, sizeof(h));
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len)
			nvlog_put(&p, iov[i].iov_base, iov[i].iov_len);
	nvlog_put_zero(&p, size - NVLOG_HDR_SIZE - len);
	nvlog_put_flush(&p);
	log->ops.drain(log->ops.ctx);

	struct nvlog_slot *s = &log->ring[l & NVLOG_RING_MASK];
	s->end_pos = end;
	__atomic_store_n(&s->lsn, l, __ATOMIC_RELEASE);
	if (log->kind == NVLOG_KIND_PMEM || log->kind == NVLOG_KIND_EMULATED)
		nvlog_advance(log);	/* its drain made the copy durable */
	*lsn = l;
	return 0;
}

int nvlog_append(struct nvlog *log, uint16_t type, const struct iovec *iov, int iovcnt, uint64_t *lsn)
{
	uint64_t l;
	int rc = nvlog_append_nowait(log, type, iov, iovcnt, &l);
	if (rc)
		return rc;
	if ((rc = nvlog_wait(log, l)))
		return rc;
	*lsn = l;
	return 0;
}

/* ---- trim / reset ---- */

/*
 * nvlog_trim_to -- nvlog_trim and nvlog_trim_synced: past_durable lets the
 * tail pass records that were copied whole but never made durable (their
 * persist failed), which the caller vouches for by other means.
 */
static int nvlog_trim_to(struct nvlog *log, uint64_t upto, bool past_durable)
{
	int rc = 0;

	pthread_mutex_lock(&log->sb_lock);
	pthread_mutex_lock(&log->lock);
	uint64_t d = log->durable_lsn, pos = log->tail_pos, n = log->tail_lsn, start = pos;
	if (past_durable) {
		/* the records copied whole, contiguously: the frontier a
		 * commit would persist up to */
		uint64_t f = log->copied_lsn, fpos = log->copied_pos;
		nvlog_copied_through(log, &f, &fpos);
		if (f > d)
			d = f;
	}
	/* as the scan: a version-1 superblock's tail epoch is padding,
	 * outside its CRC */
	uint32_t ep = log->sb.version == NVLOG_VERSION_V1 ? 0 : log->sb.tail_epoch;
	pthread_mutex_unlock(&log->lock);
	if (upto > d)
		upto = d;
	if (upto < n)
		goto out;
	/* records up to the durable LSN (past_durable: the copied one) are
	 * immutable: walk them without the lock */
	while (n <= upto) {
		uint64_t off = pos % log->L, rem = log->L - off;
		if (rem < NVLOG_HDR_SIZE) {
			pos += rem;
			continue;
		}
		const struct nvlog_rec_hdr *h = (const void *)(log->area + off);
		if ((h->lsn != n || (uint64_t)h->len + NVLOG_HDR_SIZE > rem) && off != 0) {
			pos += rem; /* a damaged pad, stepped over as by the scan */
			continue;
		}
		const struct nvlog_rec_hdr *h0 = (const void *)log->area;
		if (off != 0 && h0->lsn == n && h0->type != NVLOG_TYPE_PAD) {
			/* record n may be at the start of the area, and the bytes
			 * here a damaged pad that still reads as record n (a
			 * flipped type, a torn header of an earlier run): judged
			 * as the scan judges them, CRC and all (once a lap) */
			struct nvlog_view v = { .base = log->base, .map_len = log->map_len, .sb = log->sb };
			if (nvlog_pad_skip(&v, pos, n, ep, start + log->L)) {
				pos += rem;
				continue;
			}
		}
		if (h->lsn != n || (uint64_t)h->len + NVLOG_HDR_SIZE > rem) {
			fprintf(stderr, "nvlog: trim: record %llu at offset %llu is damaged\n",
			    (unsigned long long)n, (unsigned long long)off);
			rc = -EUCLEAN;
			goto out;
		}
		if (h->epoch > ep)
			ep = h->epoch;
		if (h->type == NVLOG_TYPE_PAD) {
			pos += rem;
			continue;
		}
		pos += nvlog_rec_size(log->align, h->len);
		n++;
	}
	struct nvlog_sb nsb = log->sb;
	nsb.tail_pos = pos;
	nsb.tail_lsn = n;
	if (nsb.version != NVLOG_VERSION_V1)
		nsb.tail_epoch = ep; /* epochs never decrease along the log */
	if ((rc = nvlog_sb_write(log, &nsb)))
		goto out;
	pthread_mutex_lock(&log->lock);
	__atomic_store_n(&log->tail_pos, pos, __ATOMIC_RELEASE);
	log->tail_lsn = n;
	log->st.trims++;
	pthread_cond_broadcast(&log->cond_space);
	pthread_mutex_unlock(&log->lock);
out:
	pthread_mutex_unlock(&log->sb_lock);
	return rc;
}

int nvlog_trim(struct nvlog *log, uint64_t upto)
{
	return nvlog_trim_to(log, upto, false);
}

int nvlog_trim_synced(struct nvlog *log, uint64_t upto)
{
	return nvlog_trim_to(log, upto, true);
}

int nvlog_reset(struct nvlog *log)
{
	int rc;

	if (!log->read_only && !log->failed && log->next_lsn > 1)
		nvlog_wait(log, log->next_lsn - 1);
	pthread_mutex_lock(&log->sb_lock);
	struct nvlog_sb nsb = log->sb;
	if ((rc = nvlog_random(&nsb.salt, sizeof(nsb.salt))))
		goto out;
	nsb.tail_pos = log->head_pos;
	nsb.tail_lsn = log->next_lsn;
	if (nsb.version != NVLOG_VERSION_V1)
		nsb.tail_epoch = log->epoch32;
	if ((rc = nvlog_sb_write(log, &nsb))) {
		/* the new slot may have reached the medium all the same:
		 * records appended with the old salt would not validate under
		 * it. No more appends (the log is failed until reopened). */
		pthread_mutex_lock(&log->lock);
		log->failed = -EIO;
		pthread_cond_broadcast(&log->cond_durable);
		pthread_cond_broadcast(&log->cond_space);
		pthread_mutex_unlock(&log->lock);
		goto out;
	}
	pthread_mutex_lock(&log->lock);
	log->salt = nsb.salt;
	__atomic_store_n(&log->tail_pos, nsb.tail_pos, __ATOMIC_RELEASE);
	log->tail_lsn = nsb.tail_lsn;
	log->durable_lsn = log->copied_lsn = log->next_lsn - 1;
	log->durable_pos = log->copied_pos = log->head_pos;
	log->read_only = false;
	pthread_cond_broadcast(&log->cond_space);
	pthread_mutex_unlock(&log->lock);
out:
	pthread_mutex_unlock(&log->sb_lock);
	return rc;
}

/* ---- scan ---- */

struct nvlog_scan_ctx {
	const struct nvlog *log;
	int (*cb)(void *arg, const struct nvlog_rec *rec);
	void *arg;
};

static int nvlog_scan_cb(void *arg, const struct nvlog_walk_rec *r)
{
	struct nvlog_scan_ctx *c = arg;
	struct nvlog_rec rec = {
		.lsn = r->hdr->lsn, .type = r->hdr->type, .flags = r->hdr->flags,
		.epoch = r->hdr->epoch, .time_ns = r->hdr->time_ns, .payload = r->payload,
		.len = r->hdr->len, .offset = c->log->sb.area_off + r->off,
	};
	return c->cb(c->arg, &rec);
}

int nvlog_scan(struct nvlog *log, int (*cb)(void *arg, const struct nvlog_rec *rec), void *arg,
    struct nvlog_scan_report *rep)
{
	struct nvlog_view v = { .base = log->base, .map_len = log->map_len };
	struct nvlog_scan_ctx c = { .log = log, .cb = cb, .arg = arg };
	struct nvlog_walk_end w;

	pthread_mutex_lock(&log->sb_lock);
	v.sb = log->sb;
	pthread_mutex_unlock(&log->sb_lock);
	/* a read-only (corrupt) log has no durable frontier of its own: walk it all */
	uint64_t max = log->read_only ? UINT64_MAX : nvlog_durable_lsn(log);
	int rc = nvlog_walk(&v, max, cb ? nvlog_scan_cb : NULL, &c, &w);
	if (rep)
		nvlog_report_from_walk(rep, &v.sb, &w);
	return rc;
}

/* ---- info / stats ---- */

int nvlog_info(struct nvlog *log, struct nvlog_info *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&log->sb_lock);
	memcpy(out->uuid, log->sb.uuid, 16);
	out->epoch = log->sb.boot_epoch;
	out->size = log->sb.size;
	pthread_mutex_unlock(&log->sb_lock);
	out->area_size = log->L;
	memcpy(out->boot_id, log->sb.boot_id, 16);
	memcpy(out->prev_boot_id, log->prev_boot_id, 16);
	out->was_clean = log->was_clean;
	out->boot_id_changed = log->boot_id_changed;
	out->kind = log->kind;
	out->kind_name = log->kind == NVLOG_KIND_OPS ? log->ops.name : nvlog_kind_name(log->kind);
	out->max_payload = log->max_payload;
	out->version = log->align == NVLOG_ALIGN_V1 ? NVLOG_VERSION_V1 : NVLOG_VERSION;
	out->open_scan = log->open_scan;
	pthread_mutex_lock(&log->lock);
	out->read_only = log->read_only;
	out->tail_lsn = log->tail_lsn;
	out->head_lsn = log->next_lsn - 1;
	out->durable_lsn = log->durable_lsn;
	out->used_bytes = log->head_pos - log->tail_pos;
	pthread_mutex_unlock(&log->lock);
	return 0;
}

void nvlog_stats(struct nvlog *log, struct nvlog_stats *out)
{
	uint64_t tail_pos, tail_lsn, durable;

	pthread_mutex_lock(&log->sb_lock); /* keeps trim from moving the tail */
	pthread_mutex_lock(&log->lock);
	*out = log->st;
	out->used_bytes = log->head_pos - log->tail_pos;
	out->area_bytes = log->L;
	out->tail_lsn = tail_lsn = log->tail_lsn;
	out->head_lsn = log->next_lsn - 1;
	out->durable_lsn = durable = log->durable_lsn;
	tail_pos = log->tail_pos;
	pthread_mutex_unlock(&log->lock);
	out->oldest_age_ns = 0;
	if (tail_lsn <= durable) {
		for (int k = 0; k < 3; k++) { /* skip an implicit wrap and a pad */
			uint64_t off = tail_pos % log->L, rem = log->L - off;
			if (rem < NVLOG_HDR_SIZE) {
				tail_pos += rem;
				continue;
			}
			const struct nvlog_rec_hdr *h = (const void *)(log->area + off);
			if (h->type == NVLOG_TYPE_PAD) {
				tail_pos += rem;
				continue;
			}
			uint64_t now = nvlog_now_ns(CLOCK_REALTIME);
			if (h->lsn == tail_lsn && h->time_ns <= now)
				out->oldest_age_ns = now - h->time_ns;
			break;
		}
	}
	pthread_mutex_unlock(&log->sb_lock);
}

void nvlog_space(struct nvlog *log, uint64_t *used_bytes, uint64_t *area_bytes, uint64_t *head_lsn,
    unsigned *space_waiters)
{
	/* without the lock (it is on every call's path): the tail first, so
	 * that a reservation or trim in between can only make used_bytes larger
	 * than it was at some moment, never smaller (the caller's claims stay
	 * on the safe side) */
	uint64_t tail = __atomic_load_n(&log->tail_pos, __ATOMIC_ACQUIRE);
	uint64_t head = __atomic_load_n(&log->head_pos, __ATOMIC_ACQUIRE);
	*used_bytes = head - tail;
	*head_lsn = __atomic_load_n(&log->next_lsn, __ATOMIC_RELAXED) - 1;
	*space_waiters = __atomic_load_n(&log->space_waiters, __ATOMIC_RELAXED);
	*area_bytes = log->L;
}

void nvlog_stats_reset(struct nvlog *log)
{
	pthread_mutex_lock(&log->lock);
	memset(&log->st, 0, sizeof(log->st));
	pthread_mutex_unlock(&log->lock);
}
