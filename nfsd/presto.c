/*
 * presto.c -- Presto acceleration: the NVRAM log in front of the backing
 * filesystem (see presto.h for the write path).
 *
 * Design choices and the alternatives considered:
 * - The log holds operations, not blocks (ZFS ZIL, NetApp NVLOG): the page
 *   cache keeps the working state, so reads need no overlay; the log only has
 *   to survive a power cut.
 * - Ordering: striped mutexes keyed by (dev, ino). An operation locks every
 *   object it touches, applies, appends its record, unlocks. Two operations
 *   on a common object therefore append in apply order (invariant 2). A
 *   global lock would be simpler and serialise all modifications; striping
 *   lets unrelated operations apply in parallel.
 * - Room in the log is checked before anything is applied, so a full log
 *   answers NFS3ERR_JUKEBOX with nothing changed (invariant 5: slow down,
 *   never drop). Should an append still fail after applying, the operation is
 *   made durable the presto-off way (syncfs) before its reply.
 * - The destager is one thread: syncfs of every exported filesystem, then
 *   trim up to the LSN appended before the syncfs began. syncfs covers every
 *   record appended before it started because a record is appended only
 *   after its operation was applied. Targeted fsyncs would sync less but
 *   need per-record bookkeeping; syncfs is one system call per filesystem.
 *
 * Replay rules (invariant 3). Records are replayed in LSN order. When record
 * i is replayed, every object it touches reflects a prefix of its own
 * operations that contains all of records < i (replayed already) and maybe
 * some of records >= i (the page cache or the journal kept them). So each
 * rule only has to tell "i is not applied" from "i and maybe later ones are":
 * - WRITE, SETATTR: applying again is harmless (same bytes, same values).
 * - CREATE/MKDIR/SYMLINK/MKNOD: if the name exists, or the recorded object
 *   still exists under another name, it was applied; else create it again
 *   and record a redirect from the recorded kernel handle to the new object
 *   (later records and clients' old handles resolve through it); the object
 *   takes its name only once the redirect is durable (replay_tmp_name).
 * - REMOVE/RMDIR: unlink only if the name still holds the recorded victim
 *   (directly or through a redirect).
 * - RENAME: rename only if the source name still holds the recorded object
 *   (and if the target name holds it too, a replayed LINK brought the source
 *   name back: unlink it, as rename(2) between two links does nothing);
 *   if it does not (applied) but the target name holds the object the rename
 *   replaced (brought back by an earlier replayed record), remove that.
 * - LINK: link only if the name is absent and the object exists.
 * A record whose objects no longer exist (removed by a later operation that
 * was applied) is skipped.
 *
 * Applied stamps. The rules above cannot tell "not applied" from "applied,
 * then undone by a later record" when a name is absent, and acting on the
 * wrong guess can move an object over a newer one. So every directory an
 * operation changes carries a stamp, the extended attribute
 * trusted.presto.lsn = {log uuid, LSN of the last record that changed it},
 * set right after the append while the stripe locks still hold. Because a
 * directory's operations are appended in the order they were applied, a
 * stamp at or past a record's LSN (with the log's uuid) proves that the
 * directory reflects that record: replay skips a namespace record when any
 * directory it changed says so, and stamps the directories it changes
 * itself. The stamp is written after the operation, so the journal of the
 * backing filesystem never makes it durable before the operation; a stamp
 * that is missing (a power cut between the two, or a filesystem without
 * extended attributes) leaves the rules above to decide.
 * Regular files carry a stamp for SETATTR only, set twice: before the change
 * to the last LSN appended (every record of the file up to there is applied:
 * the stripe lock is held) and after the append to the record's LSN. It lets
 * a replay onto a tree whose page cache survived (same boot: --replay=always
 * after a crash of the process) skip the records a file already reflects, so
 * that a truncation applied but never logged (the process died between apply
 * and append) is not mixed with older writes replayed over it. WRITEs need
 * no stamp (one setxattr less per WRITE): replaying a file's blind writes
 * and size changes in order onto a state that already reflects them gives
 * that state again; only the bytes of a WRITE applied but never logged may
 * come out mixed with older data within its own range, which an
 * unacknowledged WRITE may leave anyway (NFS writes are not atomic) and the
 * client sends again. After a reboot file stamps are not trusted: the
 * journal orders metadata, not the data of overwrites, so a stamp could be
 * durable without the data it vouches for; every WRITE and SETATTR is then
 * applied again.
 */
#include "nfsd/presto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cache/nvlog.h"
#include "nfsd/export_table.h"
#include "nfsd/fdcache.h"
#include "nfsd/fh.h"
#include "nfsd/log.h"
#include "nfsd/nfsd.h"
#include "nfsd/rpc.h"
#include "nfsd/vfs.h"

#define NSTRIPES 256
/* bytes kept free beyond a record's estimate: room for the replies and keys
 * that are encoded into the record only after the check */
#define SPACE_SLACK (64 * 1024)

struct redirect {
	uint32_t export_id;
	struct fh_kernel old_kh, new_kh;
	bool no_mac;	/* loaded from a line without a MAC: saved without one */
	uint32_t epoch;	/* boot epoch (low 32 bits) of the replay that made it */
};

static struct {
	struct presto_conf conf;
	char nvram_path[4096];
	struct nvlog *log;
	uint8_t verf[8];
	uint8_t uuid[16];		/* the log's: part of every directory stamp */
	bool trust_file_stamps;		/* the page cache survived (same boot) */
	uint32_t stamp_epoch;		/* the epoch this run's stamps carry (set at
					   start, before any call is served) */
	uint32_t open_epoch;		/* this open's epoch and the log's last LSN */
	uint64_t open_head_lsn;		/* at open: no stamp can be past them (replay) */
	bool fast_persist;		/* persists are CPU work (pmem), no I/O */
	/* a syncfs failed this run (atomic): writeback lost data that only
	 * the log still holds, and syncfs reports such an error once per
	 * descriptor, so no later sync proves anything; nothing is trimmed
	 * any more, and the next start replays the whole log */
	bool wb_failed;
	unsigned space_wanted;		/* calls waiting for room (atomic) */
	unsigned syncing;		/* atomic: syncfs calls in progress */
	uint64_t claimed;		/* atomic: log bytes claimed by calls between
					 * begin and append (space_reserve) */
	pthread_mutex_t stripes[NSTRIPES];
	/* stripes released by threads other than the loop, counted before
	 * the unlock (presto_release_gen) */
	uint64_t released;		/* atomic */

	/* run-time switches: the exports switched off (ids, ascending;
	 * malloc'ed, under sw_lock), pruned to the table at each reload */
	pthread_mutex_t sw_lock;
	uint32_t *off_ids;
	unsigned noff;
	size_t off_cap;
	/* exports whose root took no mark (a filesystem without extended
	 * attributes): no mark, no stamps, so no safe replay; presto is off
	 * for them (presto_marks_update) */
	uint32_t *unmarked_ids;		/* ascending, malloc'ed; replaced under sw_lock */
	unsigned nunmarked;

	/* redirects made by replay, in the order they were added, and their
	 * index by (export, old handle) */
	pthread_rwlock_t rd_lock;
	struct redirect *rd;
	size_t nrd, rd_cap;
	size_t *rd_idx;			/* open addressing: 1 + the entry, 0: free */
	size_t rd_idx_cap;		/* a power of 2 above twice nrd, or 0 */

	/* destager */
	pthread_t destager;
	bool destager_running;
	pthread_mutex_t d_lock;
	pthread_cond_t d_cond;		/* destager wakes */
	pthread_cond_t d_done;		/* flushers and space waiters wake */
	bool stop;
	bool held;
	uint64_t flush_target;		/* destage at least up to this LSN */
	uint64_t destaged_lsn;		/* trimmed up to here */
	int last_error;

	const char *state;
	/* counters (relaxed atomics) */
	uint64_t jukebox, space_waits, destage_runs, destage_errors, destage_ns_total, destage_ns_last;
	uint64_t destage_bytes, commits_avoided, log_fallbacks, wait_ns_total, through_appends;
	uint64_t stamps_coalesced;
	uint64_t rec_records, rec_bytes, rec_ns, rec_redirects, rec_errors;
	bool rec_replayed;
} P = {
	.sw_lock = PTHREAD_MUTEX_INITIALIZER,
	.rd_lock = PTHREAD_RWLOCK_INITIALIZER,
	.d_lock = PTHREAD_MUTEX_INITIALIZER,
	.d_cond = PTHREAD_COND_INITIALIZER,
	.d_done = PTHREAD_COND_INITIALIZER,
	.state = "DOWN",
};

#define CNT_ADD(f, v) __atomic_add_fetch(&P.f, (v), __ATOMIC_RELAXED)

/* ---- identity of objects ---- */

static bool kh_eq(const struct fh_kernel *a, const struct fh_kernel *b)
{
	return a->type == b->type && a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

/* the record's handles and MACs are the NFS handle's parts (presto_kh,
 * presto_mac copy them over): the sizes must agree */
_Static_assert(PLOG_KH_MAX == FH_KH_MAX, "plog.x PLOG_KH_MAX is fh.h FH_KH_MAX");
_Static_assert(PLOG_MAC_SIZE == FH_MAC, "plog.x PLOG_MAC_SIZE is fh.h FH_MAC");

static void kh_from_plog(const plog_kh *p, struct fh_kernel *kh)
{
	kh->type = p->type;
	kh->len = p->bytes.bytes_len <= FH_KH_MAX ? p->bytes.bytes_len : FH_KH_MAX;
	if (kh->len)	/* an empty one's bytes_val may be NULL */
		memcpy(kh->bytes, p->bytes.bytes_val, kh->len);
}

/* plog_nobjs -- how many plog_obj an op of type has (their MACs follow
 * the record; plog.x) */
static unsigned plog_nobjs(int type)
{
	if (type == PLOG_DRC)
		return 0;
	return type == PLOG_RENAME || type == PLOG_LINK ? 2 : 1;
}

void presto_mac(struct presto_txn *t, unsigned slot, const uint8_t *mac)
{
	memcpy(t->macs[slot], mac, PLOG_MAC_SIZE);
}

void presto_kh(struct presto_txn *t, unsigned slot, plog_kh *dst, const struct fh_kernel *kh)
{
	memcpy(t->khs[slot], kh->bytes, kh->len);
	dst->type = kh->type;
	dst->bytes.bytes_len = kh->len;
	dst->bytes.bytes_val = t->khs[slot];
}

#define STAMP_XATTR "trusted.presto.lsn"

/*
 * A stamp is {log uuid, LSN, epoch of the record}. The epoch is there
 * because LSNs can be used twice: a record appended but never durable (an
 * earlier one was torn by the crash) loses its LSN to the next run's
 * record, while its stamp may have reached the disk. Runs are ordered (a
 * start replays and trims everything before it serves), so a stamp covers
 * a record of a later epoch never, of an earlier one always, and of the
 * same epoch when its LSN is at or past the record's. A stamp of 24 bytes
 * (written before the epoch was added) compares LSNs only.
 */
struct stamp {
	uint8_t uuid[16];
	uint64_t lsn;
	uint32_t epoch;
	uint32_t zero;
};
#define STAMP_V1_SIZE 24

/* stamp_set -- mark directory dirfd (any kind of descriptor) as changed by
 * record (epoch, lsn). Best effort: without a stamp replay falls back to its
 * rules. */
static void stamp_set(int dirfd, bool o_path, uint32_t epoch, uint64_t lsn)
{
	struct stamp st;
	char p[32];
	int rc;

	memcpy(st.uuid, P.uuid, 16);
	st.lsn = lsn;
	st.epoch = epoch;
	st.zero = 0;
	if (o_path) {
		/* the xattr calls refuse O_PATH descriptors: go by the path */
		vfs_proc_path(dirfd, p);
		rc = setxattr(p, STAMP_XATTR, &st, sizeof(st), 0);
	} else {
		rc = fsetxattr(dirfd, STAMP_XATTR, &st, sizeof(st), 0);
	}
	if (rc < 0 && errno != ENOTSUP) {
		static long tok;
		if (log_ratelimited(&tok))
			log_warn("stamping a directory with LSN %llu", (unsigned long long)lsn);
	}
}

/* How far past the log's last LSN a stamp may legitimately be: records
 * appended and stamped but never durable (torn by the crash) are at most
 * the calls in flight; far more is slack. */
#define STAMP_LSN_SLACK (1u << 20)

/* stamp_covers -- whether dirfd's stamp proves it reflects record (epoch,
 * lsn). A stamp is input too: one no run could have written (an epoch from
 * this open on, an LSN far past the log's last) is garbled, and is taken
 * for no stamp rather than for one that covers every record. */
/* stamp_value_covers -- whether stamp st (v1: 24 bytes, no epoch), read
 * from attribute name, covers record (epoch, lsn); one of another log, or
 * one no run could have written, covers nothing */
static bool stamp_value_covers(const struct stamp *st, bool v1, const char *name, uint32_t epoch,
			       uint64_t lsn)
{
	if (memcmp(st->uuid, P.uuid, 16) != 0)
		return false;
	if ((!v1 && st->epoch >= P.open_epoch) ||
	    ((v1 || st->epoch == epoch) && st->lsn > P.open_head_lsn + STAMP_LSN_SLACK)) {
		static long tok;
		if (log_ratelimited(&tok))
			log_warnx("%s: a stamp no run could have written (epoch %u, LSN %llu; this "
				  "open's epoch is %u, the log's last LSN %llu): ignored",
				  name, v1 ? 0 : st->epoch,
				  (unsigned long long)st->lsn, P.open_epoch,
				  (unsigned long long)P.open_head_lsn);
		return false;
	}
	if (v1 || st->epoch == epoch)
		return st->lsn >= lsn;
	return st->epoch > epoch;
}

static bool stamp_covers(int dirfd, uint32_t epoch, uint64_t lsn)
{
	struct stamp st;
	char p[32];

	vfs_proc_path(dirfd, p);
	ssize_t n = getxattr(p, STAMP_XATTR, &st, sizeof(st));
	if (n != (ssize_t)sizeof(st) && n != STAMP_V1_SIZE)
		return false;
	return stamp_value_covers(&st, n == STAMP_V1_SIZE, STAMP_XATTR, epoch, lsn);
}

/* A truncation's mark (trusted.presto.size): the stamp of the last record
 * applied before it, and the size it set. */
#define SIZE_XATTR "trusted.presto.size"
struct size_mark {
	struct stamp st;
	uint64_t size;
};

/* size_mark_covers -- whether fd carries a truncation mark whose stamp covers
 * record (epoch, lsn), as stamp_covers judges a stamp: that record was
 * applied before a truncation to *size */
static bool size_mark_covers(int fd, uint32_t epoch, uint64_t lsn, uint64_t *size)
{
	struct size_mark m;
	char p[32];

	vfs_proc_path(fd, p);
	if (getxattr(p, SIZE_XATTR, &m, sizeof(m)) != (ssize_t)sizeof(m))
		return false;
	*size = m.size;
	return stamp_value_covers(&m.st, false, SIZE_XATTR, epoch, lsn);
}

void presto_stamp(struct presto_txn *t, int fd, struct fdcache_ref *ref, const struct stat *st)
{
	if (!(S_ISDIR(st->st_mode) || S_ISREG(st->st_mode)))
		return;
	for (unsigned i = 0; i < t->nstamps; i++)
		if (t->stampino[i] == st->st_ino && t->stampdev[i] == st->st_dev)
			return;
	if (t->nstamps >= PRESTO_MAX_OBJS)
		return;
	unsigned k = t->nstamps;
	if (ref) {
		/* a cached object: its entry stays until the stamp is set, and
		 * its cached read descriptor takes fsetxattr (no dup, no path) */
		t->stamprefs[k] = fdcache_hold(ref);
		t->stampfds[k] = -1;
	} else {
		t->stamprefs[k] = NULL;
		t->stampfds[k] = dup(fd);
		if (t->stampfds[k] < 0)
			return;
	}
	t->stampdev[k] = st->st_dev;
	t->stampdir[k] = S_ISDIR(st->st_mode);
	t->stampino[k] = st->st_ino;
	t->nstamps++;
}

/* stamp_ref -- stamp the object of descriptor cache entry ref, or else of
 * O_PATH descriptor fd, with lsn (as root) */
static void stamp_ref(struct fdcache_ref *ref, int fd, uint64_t lsn)
{
	if (!ref) {
		stamp_set(fd, true, P.stamp_epoch, lsn);
		return;
	}
	int dfd = fdcache_data_fd(ref, O_RDONLY);
	if (dfd >= 0)
		stamp_set(dfd, false, P.stamp_epoch, lsn);
	else
		stamp_set(fdcache_fd(ref), true, P.stamp_epoch, lsn);
}

/* stamp_obj -- stamp object i of t with t->lsn (as root). */
static void stamp_obj(struct presto_txn *t, unsigned i)
{
	stamp_ref(t->stamprefs[i], t->stampfds[i], t->lsn);
}

/*
 * Deferred directory stamps. A directory's stamp is an fsetxattr, a
 * journalled change of its inode: one per namespace operation cost a fifth
 * of CREATE+REMOVE at 32 calls in flight. So the event loop's calls leave
 * theirs in SD, one entry per directory with the LSN of its last record,
 * and the loop sets them at the end of its batch (presto_stamps_flush),
 * before any reply of the batch goes out: no client hears of an operation
 * whose stamp is not set. A stamp set later than its operation changes one
 * thing: the journal may now commit a later operation of the directory
 * before the stamp, and a power cut then leaves records the directory
 * reflects without a stamp, for the rules to judge. That is harmless when
 * the later operations are CREATEs and REMOVEs: a record judged not applied
 * is applied again, and the later records, replayed after it, undo it as
 * they did the first time (a CREATE makes a new handle, which no earlier
 * record names; a REMOVE only takes names away). It is not when one is a
 * RENAME or a LINK, which can bring an existing object back under a name an
 * earlier record removed (ARCHITECTURE.md, the known gap), nor when an
 * object made again is a directory (the records inside it would all be
 * judged by the rules alone). Hence:
 * - a RENAME, LINK or MKDIR sets the pending stamps of the objects whose
 *   stripes it holds before it changes anything (presto_stamps_settle),
 *   and a MKDIR sets its own at once;
 * - workers set their stamps at once, after dropping a pending entry of
 *   the same directory (theirs is newer: they hold its stripe), under
 *   SD.lock, which the loop holds while it sets its own: no stamp goes
 *   down. The loop waits on SD.lock for a worker's system call only when
 *   a worker answers a retransmission from the DRC, whose original may
 *   be a call of the loop's open batch: it sets the pending stamps first.
 * - the loop sets them before every round of replies it sends (rpc.c,
 *   rpc_uncork: sending can resume held input, whose calls reply too).
 */
#define SD_MAX 64
struct sd_entry {
	dev_t dev;
	ino_t ino;
	uint64_t lsn;
	struct fdcache_ref *ref;	/* held, or else the owned O_PATH fd */
	int fd;
};
static struct {
	pthread_mutex_t lock;
	unsigned n;
	struct sd_entry e[SD_MAX];
} SD = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void sd_release(struct sd_entry *e)
{
	if (e->ref)
		fdcache_put(e->ref);
	else if (e->fd >= 0)
		close(e->fd);
}

/* sd_find -- the entry of (dev, ino), or -1. Under SD.lock. */
static int sd_find(dev_t dev, ino_t ino)
{
	for (unsigned i = 0; i < SD.n; i++)
		if (SD.e[i].dev == dev && SD.e[i].ino == ino)
			return (int)i;
	return -1;
}

/* stamp_defer -- leave directory i of t pending with t->lsn; its reference
 * goes to the entry (or is dropped for an entry already there). false:
 * the table is full, stamp it now. */
static bool stamp_defer(struct presto_txn *t, unsigned i)
{
	struct sd_entry mine = { t->stampdev[i], t->stampino[i], t->lsn, t->stamprefs[i],
				 t->stampfds[i] };

	pthread_mutex_lock(&SD.lock);
	int k = sd_find(mine.dev, mine.ino);
	if (k < 0 && SD.n == SD_MAX) {
		pthread_mutex_unlock(&SD.lock);
		return false;
	}
	if (k >= 0) {
		SD.e[k].lsn = mine.lsn;	/* later: the stripe is held */
		CNT_ADD(stamps_coalesced, 1);
	} else {
		SD.e[SD.n++] = mine;
	}
	pthread_mutex_unlock(&SD.lock);
	if (k >= 0)
		sd_release(&mine);
	t->stamprefs[i] = NULL;
	t->stampfds[i] = -1;
	return true;
}

/* stamp_now -- stamp object i of t at once, after dropping the pending
 * entry of a directory (older: the stripe is held) */
static void stamp_now(struct presto_txn *t, unsigned i)
{
	if (t->stampdir[i]) {
		struct sd_entry old = { .fd = -1 };
		pthread_mutex_lock(&SD.lock);
		int k = sd_find(t->stampdev[i], t->stampino[i]);
		if (k >= 0) {
			old = SD.e[k];
			SD.e[k] = SD.e[--SD.n];
		}
		pthread_mutex_unlock(&SD.lock);
		sd_release(&old);
	}
	stamp_obj(t, i);
}

void presto_stamps_flush(void)
{
	pthread_mutex_lock(&SD.lock);
	for (unsigned i = 0; i < SD.n; i++) {
		stamp_ref(SD.e[i].ref, SD.e[i].fd, SD.e[i].lsn);
		sd_release(&SD.e[i]);
	}
	SD.n = 0;
	pthread_mutex_unlock(&SD.lock);
}

static unsigned stripe_of(dev_t dev, ino_t ino);

void presto_stamps_settle(struct presto_txn *t)
{
	struct sd_entry mine[SD_MAX];
	unsigned n = 0;

	if (!t->active)
		return;
	/* taken out under the lock, set after it: their stripes are held,
	 * so nobody stamps or defers these directories meanwhile */
	pthread_mutex_lock(&SD.lock);
	for (unsigned i = 0; i < SD.n;) {
		unsigned s = stripe_of(SD.e[i].dev, SD.e[i].ino), j;
		for (j = 0; j < t->nstripes && t->stripes[j] != s; j++)
			;
		if (j < t->nstripes) {
			mine[n++] = SD.e[i];
			SD.e[i] = SD.e[--SD.n];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&SD.lock);
	for (unsigned i = 0; i < n; i++) {
		stamp_ref(mine[i].ref, mine[i].fd, mine[i].lsn);
		sd_release(&mine[i]);
	}
}

void presto_prestamp(struct presto_txn *t, int fd, bool o_path, uint64_t size)
{
	uint64_t used, area, head;
	unsigned waiters;

	if (!t->active)
		return;
	nvlog_space(P.log, &used, &area, &head, &waiters);
	if (!head)
		return;
	stamp_set(fd, o_path, P.stamp_epoch, head);
	/* the size: before the truncation too (the journal keeps the two in
	 * this order), so a truncation on disk always has its mark */
	struct size_mark m;
	char p[32];
	memcpy(m.st.uuid, P.uuid, 16);
	m.st.lsn = head;
	m.st.epoch = P.stamp_epoch;
	m.st.zero = 0;
	m.size = size;
	vfs_proc_path(fd, p);
	if (setxattr(p, SIZE_XATTR, &m, sizeof(m), 0) < 0 && errno != ENOTSUP) {
		static long tok;
		if (log_ratelimited(&tok))
			log_warn("marking a truncation with LSN %llu", (unsigned long long)head);
	}
}

void presto_size_settle(struct presto_txn *t, int fd, uint64_t size)
{
	struct stat st;
	char p[32];

	if (!t->active)
		return;
	vfs_become_root();
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == size)
		return;		/* made (or the size it had): the mark holds */
	vfs_proc_path(fd, p);
	if (removexattr(p, SIZE_XATTR) < 0 && errno != ENODATA && errno != ENOTSUP) {
		static long tok;
		if (log_ratelimited(&tok))
			log_warn("removing the mark of a truncation that was refused");
	}
}

char *presto_name(struct presto_txn *t, unsigned slot, const char *name)
{
	/* a copy, cut to the slot (snprintf "%s" showed in profiles) */
	size_t n = strnlen(name, sizeof(t->names[slot]) - 1);
	memcpy(t->names[slot], name, n);
	t->names[slot][n] = '\0';
	return t->names[slot];
}

/* ---- redirects ---- */

/* rd_slot -- the index slot of (export_id, kh): the one that holds it, or
 * the free one where it goes. P.rd_idx_cap > 0, under P.rd_lock. */
static size_t rd_slot(uint32_t export_id, const struct fh_kernel *kh)
{
	uint64_t h = fh_kernel_hash(export_id, kh);
	size_t mask = P.rd_idx_cap - 1, at = (size_t)(h ^ (h >> 29)) & mask;
	while (P.rd_idx[at]) {
		const struct redirect *r = &P.rd[P.rd_idx[at] - 1];
		if (r->export_id == export_id && kh_eq(&r->old_kh, kh))
			break;
		at = (at + 1) & mask;
	}
	return at;
}

/* rd_index -- entry i into the index. An object re-created twice (by two
 * replays) redirects to the object of the later replay: by epoch, not by
 * place in the table, which holds the redirects file's lines before the
 * log's records (rd_scan); among equals (lines of an older server), the
 * one added last. */
static void rd_index(size_t i)
{
	size_t at = rd_slot(P.rd[i].export_id, &P.rd[i].old_kh);

	if (!P.rd_idx[at] || P.rd[i].epoch >= P.rd[P.rd_idx[at] - 1].epoch)
		P.rd_idx[at] = i + 1;
}

/* rd_reindex -- the index anew, in cap slots (a power of 2 above 2 * nrd),
 * or in place when cap is 0. Returns 0 or -ENOMEM (the old one stays). */
static int rd_reindex(size_t cap)
{
	if (cap) {
		size_t *n = calloc(cap, sizeof(*n));
		if (!n)
			return -ENOMEM;
		free(P.rd_idx);
		P.rd_idx = n;
		P.rd_idx_cap = cap;
	} else if (P.rd_idx_cap) {
		memset(P.rd_idx, 0, P.rd_idx_cap * sizeof(*P.rd_idx));
	}
	for (size_t i = 0; i < P.nrd && P.rd_idx_cap; i++)
		rd_index(i);
	return 0;
}

int presto_redirect(uint32_t export_id, const struct fh_kernel *old_kh, struct fh_kernel *new_kh)
{
	int rc = -ENOENT;

	pthread_rwlock_rdlock(&P.rd_lock);
	if (P.rd_idx_cap) {
		size_t at = rd_slot(export_id, old_kh);
		if (P.rd_idx[at]) {
			*new_kh = P.rd[P.rd_idx[at] - 1].new_kh;
			rc = 0;
		}
	}
	pthread_rwlock_unlock(&P.rd_lock);
	return rc;
}

static int rd_add(uint32_t export_id, const struct fh_kernel *old_kh,
		  const struct fh_kernel *new_kh, bool no_mac, uint32_t epoch)
{
	int rc = 0;

	pthread_rwlock_wrlock(&P.rd_lock);
	if (P.nrd == P.rd_cap) {
		size_t cap = P.rd_cap ? P.rd_cap * 2 : 64;
		struct redirect *n = realloc(P.rd, cap * sizeof(*n));
		if (!n) {
			rc = -ENOMEM;
			goto out;
		}
		P.rd = n;
		P.rd_cap = cap;
	}
	if (2 * (P.nrd + 1) >= P.rd_idx_cap &&
	    (rc = rd_reindex(P.rd_idx_cap ? 2 * P.rd_idx_cap : 128)) < 0)
		goto out;
	P.rd[P.nrd] = (struct redirect){ export_id, *old_kh, *new_kh, no_mac, epoch };
	rd_index(P.nrd++);
out:
	pthread_rwlock_unlock(&P.rd_lock);
	return rc;
}

static void hex(char *out, const uint8_t *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = '\0';
}

static int unhex(const char *s, uint8_t *b, unsigned max, unsigned *n)
{
	size_t l = strlen(s);

	if (l % 2 || l / 2 > max)
		return -EINVAL;
	for (size_t i = 0; i < l / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		b[i] = (uint8_t)v;
	}
	*n = (unsigned)(l / 2);
	return 0;
}

static int sync_state_dir(void)
{
	int dfd = open(P.conf.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	int rc = fsync(dfd) < 0 ? -errno : 0;
	close(dfd);
	return rc;
}

/* state_file_commit -- close f, written as tmp, and make it path durably
 * (fsync, rename, fsync of STATE_DIR). Returns 0 or -errno. */
static int state_file_commit(FILE *f, const char *tmp, const char *path)
{
	int rc = 0;

	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		rc = -errno;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc ? rc : sync_state_dir();
}

/* Redirect file: STATE_DIR/redirects, one line per redirect:
 *   EXPORT_ID OLD_TYPE OLD_HEX NEW_TYPE NEW_HEX MAC_HEX
 * rewritten whole (tmp + fsync + rename) after a replay that made some.
 * MAC_HEX is the MAC of the new handle (fh_mac_of): the file is input, and
 * a line that could name any inode would let a client's handle reach
 * outside an export that is a subdirectory of its filesystem. A line
 * without it (written before it) is kept only for an export that is a
 * whole filesystem. */
static bool whole_fs(const struct xexport *xe);
static bool export_mark_ok(const struct xexport *xe, bool quiet);

static void rd_load(struct xtab *xt)
{
	char path[4200], line[512], oh[128], nh[128], mh[64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/redirects", P.conf.state_dir);
	f = fopen(path, "re");
	if (!f)
		return;
	unsigned lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		struct fh_kernel o, n;
		unsigned id;
		uint8_t mac[FH_MAC];
		unsigned ml = 0, epoch = 0;
		lineno++;
		/* the epoch (7th field) is missing from an older server's lines */
		int k = sscanf(line, "%u %d %127s %d %127s %63s %u", &id, &o.type, oh, &n.type, nh, mh,
			       &epoch);
		if (k < 5 || unhex(oh, o.bytes, FH_KH_MAX, &o.len) < 0 ||
		    unhex(nh, n.bytes, FH_KH_MAX, &n.len) < 0 ||
		    (k >= 6 && (unhex(mh, mac, FH_MAC, &ml) < 0 || ml != FH_MAC))) {
			log_warnx("%s:%u: malformed redirect ignored", path, lineno);
			continue;
		}
		if (k >= 6 && !fh_mac_ok(id, &n, mac)) {
			log_warnx("%s:%u: redirect whose MAC does not check out ignored (a line "
				  "this appliance did not write)", path, lineno);
			continue;
		}
		const struct xexport *xe = xtab_by_id(xt, id);
		if (k == 5 && !(xe && whole_fs(xe))) {
			log_warnx("%s:%u: redirect without a MAC (written by an older presto-nfsd) "
				  "ignored: its export is not a whole filesystem", path, lineno);
			continue;
		}
		rd_add(id, &o, &n, k == 5, epoch);
	}
	fclose(f);
}

/* rd_prune -- forget redirects whose new object is gone (replay re-creates
 * objects that later records remove again): the table keeps only what a
 * client's handle can still lead to. */
static void rd_prune(struct xtab *xt)
{
	union {
		struct file_handle h;
		uint8_t raw[sizeof(struct file_handle) + FH_KH_MAX];
	} u;
	size_t k = 0;

	pthread_rwlock_wrlock(&P.rd_lock);
	for (size_t i = 0; i < P.nrd; i++) {
		const struct xexport *xe = xtab_by_id(xt, P.rd[i].export_id);
		/* kept unless known gone: an export not in the table now, or
		 * whose filesystem is not mounted, may be back at the next
		 * start, and its clients' handles with it */
		bool alive = true;
		if (xe && export_mark_ok(xe, true)) {
			u.h.handle_bytes = P.rd[i].new_kh.len;
			u.h.handle_type = P.rd[i].new_kh.type;
			memcpy(u.h.f_handle, P.rd[i].new_kh.bytes, P.rd[i].new_kh.len);
			int fd = open_by_handle_at(xe->root_fd, &u.h, O_PATH | O_CLOEXEC);
			if (fd >= 0) {
				struct stat st;
				alive = fstat(fd, &st) != 0 || st.st_nlink > 0;
				close(fd);
			} else {
				alive = errno != ESTALE && errno != ENOENT;
			}
		}
		if (alive)
			P.rd[k++] = P.rd[i];
	}
	P.nrd = k;
	rd_reindex(0);
	pthread_rwlock_unlock(&P.rd_lock);
}

static int rd_save(void)
{
	char path[4200], tmp[4200], oh[128], nh[128], mh[64];
	FILE *f;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/redirects", P.conf.state_dir);
	snprintf(tmp, sizeof(tmp), "%s/redirects.tmp", P.conf.state_dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	pthread_rwlock_rdlock(&P.rd_lock);
	for (size_t i = 0; i < P.nrd; i++) {
		/* a line loaded without a MAC stays without one: it was kept
		 * only because its export was a whole filesystem */
		uint8_t mac[FH_MAC];
		mh[0] = '\0';
		if (!P.rd[i].no_mac) {
			if (fh_mac_of(P.rd[i].export_id, &P.rd[i].new_kh, mac) < 0)
				continue;
			mh[0] = ' ';
			hex(mh + 1, mac, FH_MAC);
		}
		hex(oh, P.rd[i].old_kh.bytes, P.rd[i].old_kh.len);
		hex(nh, P.rd[i].new_kh.bytes, P.rd[i].new_kh.len);
		if (mh[0])
			fprintf(f, "%u %d %s %d %s%s %u\n", P.rd[i].export_id, P.rd[i].old_kh.type,
				oh, P.rd[i].new_kh.type, nh, mh, P.rd[i].epoch);
		else
			fprintf(f, "%u %d %s %d %s\n", P.rd[i].export_id, P.rd[i].old_kh.type, oh,
				P.rd[i].new_kh.type, nh);
	}
	pthread_rwlock_unlock(&P.rd_lock);
	return state_file_commit(f, tmp, path);
}

/* rd_append -- add one redirect of this run's replay to the file durably
 * (one line and one fsync, not a rewrite; rd_save compacts after): where
 * rd_log cannot */
static int rd_append(uint32_t export_id, const struct fh_kernel *old_kh, const struct fh_kernel *new_kh)
{
	char path[4200], line[600], oh[128], nh[128], mh[64];
	uint8_t mac[FH_MAC];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/redirects", P.conf.state_dir);
	if ((rc = fh_mac_of(export_id, new_kh, mac)) < 0)
		return rc;
	hex(oh, old_kh->bytes, old_kh->len);
	hex(nh, new_kh->bytes, new_kh->len);
	hex(mh, mac, FH_MAC);
	int n = snprintf(line, sizeof(line), "%u %d %s %d %s %s %u\n", export_id, old_kh->type, oh,
			 new_kh->type, nh, mh, P.open_epoch);
	bool created = access(path, F_OK) != 0;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, line, (size_t)n);
	if (w < 0)
		rc = -errno;
	else if (w != n)
		rc = -EIO;
	else if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && created)
		rc = sync_state_dir();
	return rc;
}

/* rd_log -- make one redirect of this run's replay durable as a record of
 * the log (plog.x, plog_redirect): a persist of a few hundred bytes where
 * rd_append costs a file fsync, which made a replay's time grow with the
 * objects it re-created (about 0.5 ms each on this machine's disk). Only on
 * persistent memory (on the msync kind a persist is a disk flush too). The
 * records stay until the trim that ends the replay, after rd_save; a replay
 * that does not get there finds them again (rd_scan). -ENOSPC: not
 * persistent memory, or the log may not have room for it (nothing trims
 * during a replay, so an append would wait for nothing): the caller falls
 * back to the file. */
static int rd_log(uint32_t export_id, const struct fh_kernel *old_kh, const struct fh_kernel *new_kh)
{
	uint8_t buf[512], mac[FH_MAC];
	struct nvlog_info info;
	plog_rec r;
	XDR x;
	int e;

	if (!P.fast_persist)
		return -ENOSPC;
	if ((e = fh_mac_of(export_id, new_kh, mac)) < 0)
		return e;
	memset(&r, 0, sizeof(r));
	r.op.type = PLOG_REDIRECT;
	plog_redirect *d = &r.op.plog_op_u.redirect;
	d->obj.export_id = export_id;
	d->obj.kh.type = new_kh->type;
	d->obj.kh.bytes.bytes_len = new_kh->len;
	d->obj.kh.bytes.bytes_val = (char *)new_kh->bytes;
	d->was.type = old_kh->type;
	d->was.bytes.bytes_len = old_kh->len;
	d->was.bytes.bytes_val = (char *)old_kh->bytes;
	plog_macs m = { { FH_MAC, (char *)mac } };
	xdrmem_create(&x, (char *)buf, sizeof(buf), XDR_ENCODE);
	bool ok = xdr_plog_rec(&x, &r) && xdr_plog_macs(&x, &m);
	struct iovec iov = { buf, xdr_getpos(&x) };
	xdr_destroy(&x);
	if (!ok)
		return -EMSGSIZE;
	/* the replay is the only appender: room now is room at the append
	 * (a wrap pads away at most one record's size) */
	nvlog_info(P.log, &info);
	if (info.area_size - info.used_bytes < 2 * (iov.iov_len + 4096))
		return -ENOSPC;
	uint64_t lsn;
	return nvlog_append(P.log, PLOG_REDIRECT, &iov, 1, &lsn);
}

/*
 * drc_relog -- the duplicate request cache a recovery rebuilt, logged again
 * (PLOG_DRC records, oldest entry first) before the trim that ends the
 * recovery takes the records it came from: else a second crash before the
 * client retransmits (a crash loop) would find neither record nor entry,
 * and a retransmitted REMOVE would be answered NOENT. The records live as
 * any until the destager trims them. All are appended, then persisted
 * once. If the log has no room for them beside the records still there
 * (nothing trims during recovery), the caller trims first and calls again
 * (*room false): then a crash between the two loses the entries, as before
 * there were these records. Returns 0 or -errno (nothing is trimmed on an
 * error: the caller gives up its start as for any failed append).
 */
struct drc_relog {
	uint64_t bytes, n, lsn;	/* sizing pass: bytes and n; append pass: last LSN */
	bool append;
	int err;
};

static int drc_relog_cb(void *arg, const struct drc_key *k, const uint8_t *rep, size_t len)
{
	struct drc_relog *d = arg;
	uint8_t buf[PLOG_KEY_MAX + PLOG_REPLY_MAX + 64];
	plog_rec r;
	XDR x;

	if (len > PLOG_REPLY_MAX)
		return 0;	/* not from a record (cannot be during recovery) */
	if (!d->append) {
		d->bytes += len + sizeof(*k) + 256;	/* XDR, record header, alignment */
		d->n++;
		return 0;
	}
	memset(&r, 0, sizeof(r));
	r.op.type = PLOG_DRC;
	r.drc_key.drc_key_len = sizeof(*k);
	r.drc_key.drc_key_val = (char *)k;
	r.reply.reply_len = (u_int)len;
	r.reply.reply_val = (char *)rep;
	xdrmem_create(&x, (char *)buf, sizeof(buf), XDR_ENCODE);
	bool ok = xdr_plog_rec(&x, &r);
	struct iovec iov = { buf, xdr_getpos(&x) };
	xdr_destroy(&x);
	if (!ok)
		return d->err = -EMSGSIZE;
	return d->err = nvlog_append_nowait(P.log, PLOG_DRC, &iov, 1, &d->lsn);
}

static int drc_relog(bool *room)
{
	struct drc_relog d = { 0 };
	struct nvlog_info info;

	drc_foreach(drc_relog_cb, &d);
	if (d.n == 0)
		return 0;
	nvlog_info(P.log, &info);
	/* a wrap pads away at most one record's size */
	if (info.area_size - info.used_bytes < d.bytes + 2 * (PLOG_KEY_MAX + PLOG_REPLY_MAX + 4096)) {
		if (*room) {
			*room = false;
			log_info("recovery: the %llu duplicate request cache entries it rebuilt are "
				 "logged again after the trim (no room before it)",
				 (unsigned long long)d.n);
			return 0;
		}
		log_warnx("recovery: no room in the NVRAM log for the %llu duplicate request cache "
			  "entries it rebuilt (%llu bytes): they are kept in memory only",
			  (unsigned long long)d.n, (unsigned long long)d.bytes);
		return 0;
	}
	d.append = true;
	drc_foreach(drc_relog_cb, &d);
	if (d.err == 0 && d.lsn)
		d.err = nvlog_wait(P.log, d.lsn);
	if (d.err < 0) {
		errno = -d.err;
		log_warn("recovery: logging the duplicate request cache again");
	} else {
		log_info("recovery: %llu duplicate request cache entr%s logged again (%s the trim)",
			 (unsigned long long)d.n, d.n == 1 ? "y" : "ies", *room ? "before" : "after");
	}
	return d.err;
}

/*
 * xsame -- an XDR stream that encodes nothing: it compares what would be
 * written with the bytes a record was decoded from. Every word goes through
 * x_putlong (x_inline gives no buffer): a string's length as encoded (its
 * strlen) against the length it had, and every bool, enum and number. Runs
 * of bytes are compared only up to 3 long (the padding after an opaque or
 * a string, zeroes as the server writes it); a longer run was just decoded
 * from those very bytes, a string's up to its length (checked before it),
 * so a record's megabyte of data costs nothing here.
 */
struct xsame {
	const uint8_t *p;
	u_int len, pos;
};

static bool_t xsame_putlong(XDR *x, const long *lp)
{
	struct xsame *c = (struct xsame *)x->x_private;
	uint32_t w = htonl((uint32_t)*lp);

	if (c->len - c->pos < 4 || memcmp(c->p + c->pos, &w, 4) != 0)
		return FALSE;
	c->pos += 4;
	return TRUE;
}

static bool_t xsame_putbytes(XDR *x, const char *b, u_int n)
{
	struct xsame *c = (struct xsame *)x->x_private;

	if (c->len - c->pos < n || (n <= 3 && memcmp(c->p + c->pos, b, n) != 0))
		return FALSE;
	c->pos += n;
	return TRUE;
}

static u_int xsame_getpos(XDR *x)
{
	return ((struct xsame *)x->x_private)->pos;
}

static int32_t *xsame_inline(XDR *x, u_int n)
{
	(void)x, (void)n;
	return NULL;
}

static bool_t xsame_no(XDR *x, int how, void *arg)
{
	(void)x, (void)how, (void)arg;
	return FALSE;
}

static void xsame_destroy(XDR *x)
{
	(void)x;
}

static bool_t xsame_getlong(XDR *x, long *lp)
{
	(void)x, (void)lp;
	return FALSE;	/* encoding only */
}

static bool_t xsame_getbytes(XDR *x, char *b, u_int n)
{
	(void)x, (void)b, (void)n;
	return FALSE;
}

static bool_t xsame_setpos(XDR *x, u_int pos)
{
	(void)x, (void)pos;
	return FALSE;
}

/* xsame_check -- whether r encodes to exactly the len bytes at p */
static bool xsame_check(plog_rec *r, const uint8_t *p, u_int len)
{
	static const struct xdr_ops ops = {
		.x_getlong = xsame_getlong, .x_putlong = xsame_putlong,
		.x_getbytes = xsame_getbytes, .x_putbytes = xsame_putbytes,
		.x_getpostn = xsame_getpos, .x_setpostn = xsame_setpos, .x_inline = xsame_inline,
		.x_destroy = xsame_destroy, .x_control = xsame_no,
	};
	struct xsame c = { p, len, 0 };
	XDR x;

	memset(&x, 0, sizeof(x));
	x.x_op = XDR_ENCODE;
	x.x_ops = &ops;
	x.x_private = (char *)&c;
	return xdr_plog_rec(&x, r) && c.pos == len;
}

/* plog_decode -- record rec as a plog_rec into *r (xdr_free it after) and
 * the MACs after it (plog.x: none in a record of a server before them, or
 * exactly one per plog_obj, 2 at most) into macs, their count into *nmacs.
 * false: it does not decode (nothing to free). */
static bool plog_decode(const struct nvlog_rec *rec, plog_rec *r,
			uint8_t macs[][PLOG_MAC_SIZE], unsigned *nmacs)
{
	XDR x;

	memset(r, 0, sizeof(*r));
	*nmacs = 0;
	xdrmem_create(&x, (char *)rec->payload, rec->len, XDR_DECODE);
	bool ok = xdr_plog_rec(&x, r) && (uint16_t)r->op.type == rec->type;
	/* a name or a symlink's target with a NUL in it decodes (an XDR
	 * string has a length) to a C string that ends there, and would act
	 * on another name: what was decoded must encode to the same bytes */
	if (ok && !xsame_check(r, rec->payload, xdr_getpos(&x)))
		ok = false;
	if (ok && xdr_getpos(&x) < rec->len) {
		plog_macs m = { { 0, NULL } };
		unsigned n = plog_nobjs(r->op.type);
		ok = xdr_plog_macs(&x, &m) && m.mac.mac_len == n * PLOG_MAC_SIZE &&
		     xdr_getpos(&x) == rec->len;
		if (ok) {
			memcpy(macs, m.mac.mac_val, m.mac.mac_len);
			*nmacs = n;
		}
		xdr_free(XDRPROC(xdr_plog_macs), (char *)&m);
	}
	xdr_destroy(&x);
	if (!ok)
		xdr_free(XDRPROC(xdr_plog_rec), (char *)r);
	return ok;
}

/* plog_kh_ok -- whether a recorded kernel handle has a length a filesystem
 * could give out */
static bool plog_kh_ok(const plog_kh *kh)
{
	return kh->bytes.bytes_len > 0 && kh->bytes.bytes_len <= FH_KH_MAX;
}

/* rd_scan_cb -- nvlog_scan callback of rd_scan: a redirect record into the
 * table, when it decodes and its MAC checks out */
struct rd_scan_ctx {
	uint64_t n;
	int err;
};

static int rd_scan_cb(void *arg, const struct nvlog_rec *rec)
{
	struct rd_scan_ctx *sc = arg;
	uint8_t macs[2][PLOG_MAC_SIZE];
	unsigned nmacs;
	plog_rec r;

	if (rec->type != PLOG_REDIRECT)
		return 0;
	sc->n++;
	if (!plog_decode(rec, &r, macs, &nmacs))
		return 0;	/* replay_cb says so, and counts it */
	const plog_redirect *d = &r.op.plog_op_u.redirect;
	struct fh_kernel o, n;
	kh_from_plog(&d->obj.kh, &n);
	kh_from_plog(&d->was, &o);
	if (nmacs != 1 || !plog_kh_ok(&d->obj.kh) || !plog_kh_ok(&d->was) ||
	    !fh_mac_ok(d->obj.export_id, &n, macs[0])) {
		/* not followed; and an error of the replay, as any record whose
		 * MAC fails: without the redirect, the records that use the
		 * handle it stood for would be skipped as of an object removed
		 * later, and their changes lost without a word */
		CNT_ADD(rec_errors, 1);
		log_warnx("NVRAM log record LSN %llu: a redirect without a MAC that checks out "
			  "(a record this appliance did not write): not followed",
			  (unsigned long long)rec->lsn);
	} else if (!sc->err) {
		sc->err = rd_add(d->obj.export_id, &o, &n, false, rec->epoch);
	}
	xdr_free(XDRPROC(xdr_plog_rec), (char *)&r);
	return 0;
}

/* rd_scan -- the redirects an interrupted replay logged (rd_log) into the
 * table, before a replay applies anything: they come after the records of
 * the objects they lead to. Returns 0 or -errno. */
static int rd_scan(void)
{
	struct rd_scan_ctx sc = { 0, 0 };
	int rc = nvlog_scan(P.log, rd_scan_cb, &sc, NULL);

	if (rc == 0)
		rc = sc.err;
	if (rc == 0 && sc.n > 0)
		log_info("NVRAM log holds %llu redirect(s) of an earlier replay",
			 (unsigned long long)sc.n);
	return rc;
}

/*
 * The replay-pending mark: STATE_DIR/replay-pending exists (durably) from
 * before a replay starts until the log has been trimmed after it. A start
 * that finds it replays again even in the same boot: an interrupted replay
 * (killed, or a failed sync or trim) left records unapplied that the page
 * cache, which survived, does not hold. Its content says whether that
 * replay trusted file stamps: one that began after a reboot did not, and
 * neither may its retry in the same boot (a SETATTR's stamp can have
 * outlived the data of the WRITEs before it).
 */
static void replay_mark_path(char *buf, size_t n)
{
	snprintf(buf, n, "%s/replay-pending", P.conf.state_dir);
}

static bool replay_pending(bool *untrusted)
{
	char path[4200], buf[16] = "";
	replay_mark_path(path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	/* anything but "trusted" (an empty or garbled mark too) trusts nothing */
	*untrusted = !(n >= 7 && memcmp(buf, "trusted", 7) == 0);
	return true;
}

static int replay_mark(bool on, bool trusted)
{
	char path[4200];
	replay_mark_path(path, sizeof(path));
	if (!on) {
		if (unlink(path) < 0)
			return errno == ENOENT ? 0 : -errno;
		return sync_state_dir();
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	const char *what = trusted ? "trusted\n" : "untrusted\n";
	int rc = write(fd, what, strlen(what)) != (ssize_t)strlen(what) || fsync(fd) < 0 ? -EIO : 0;
	close(fd);
	return rc ? rc : sync_state_dir();
}

/* ---- switches ---- */

static int id_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* id_in -- whether id is among the n ascending ids at v */
static bool id_in(const uint32_t *v, unsigned n, uint32_t id)
{
	return n && bsearch(&id, v, n, sizeof(*v), id_cmp) != NULL;
}

/* unmarked_locked -- whether export id is listed as taking no mark (sw_lock
 * held) */
static bool unmarked_locked(uint32_t id)
{
	return id_in(P.unmarked_ids, P.nunmarked, id);
}

bool presto_enabled(const struct xexport *xe, bool export_opt)
{
	bool on = P.log != NULL && export_opt;

	if (!on)
		return false;
	/* every change and LOOKUP asks: no lock while no export is switched
	 * off (a call racing a switch-off may still log; the log is durable) */
	if (__atomic_load_n(&P.noff, __ATOMIC_ACQUIRE) == 0 &&
	    __atomic_load_n(&P.nunmarked, __ATOMIC_ACQUIRE) == 0)
		return true;
	pthread_mutex_lock(&P.sw_lock);
	if (id_in(P.off_ids, P.noff, xe->e->id) || unmarked_locked(xe->e->id))
		on = false;
	pthread_mutex_unlock(&P.sw_lock);
	return on;
}

bool presto_logs(const struct xexport *xe)
{
	if (!P.log)
		return false;
	if (__atomic_load_n(&P.nunmarked, __ATOMIC_ACQUIRE) == 0)
		return true;
	return !presto_unmarked(xe->e->id);
}

bool presto_unmarked(uint32_t export_id)
{
	pthread_mutex_lock(&P.sw_lock);
	bool yes = unmarked_locked(export_id);
	pthread_mutex_unlock(&P.sw_lock);
	return yes;
}

int presto_set_exports(const uint32_t *ids, size_t n, bool on)
{
	uint32_t *sorted = NULL;	/* switching on: ids, to look up */
	struct xtab *x = NULL;
	int rc = 0;

	if (on && n) {
		if (!(sorted = malloc(n * sizeof(*sorted))))
			return -ENOMEM;
		memcpy(sorted, ids, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), id_cmp);
	}
	if (!on && n) {
		/* switching off: what the log holds must be on disk first (once
		 * for all of them: a call that races a switch-off may still
		 * log, and the log is durable) */
		rc = presto_flush();
		if (rc < 0)
			return rc;
	}
	pthread_mutex_lock(&P.sw_lock);
	if (!on) {
		if (P.noff + n > P.off_cap) {
			size_t cap = P.off_cap ? P.off_cap : 16;
			while (cap < P.noff + n)
				cap *= 2;
			uint32_t *v = realloc(P.off_ids, cap * sizeof(*v));
			if (!v) {
				rc = -ENOMEM;
				goto out;
			}
			P.off_ids = v;
			P.off_cap = cap;
		}
		/* only exports of the table in force: a reload (SIGHUP, on
		 * another thread) may have dropped one and pruned the switches
		 * since the caller chose the exports; its switch would outlive
		 * the prune, and the export come back off when added again */
		x = xtab_get();	/* under sw_lock: before the prune, or the new table */
		unsigned k = P.noff;
		for (size_t i = 0; i < n; i++)
			if (!id_in(P.off_ids, P.noff, ids[i]) && (!x || xtab_by_id(x, ids[i])))
				P.off_ids[k++] = ids[i];
		if (k > 1)	/* off_ids may still be NULL with k == 0 */
			qsort(P.off_ids, k, sizeof(*P.off_ids), id_cmp);
		unsigned w = 0;	/* an id named twice in ids counts once */
		for (unsigned i = 0; i < k; i++)
			if (!w || P.off_ids[w - 1] != P.off_ids[i])
				P.off_ids[w++] = P.off_ids[i];
		__atomic_store_n(&P.noff, w, __ATOMIC_RELEASE);
	} else if (sorted) {
		unsigned w = 0;
		for (unsigned i = 0; i < P.noff; i++)
			if (!id_in(sorted, (unsigned)n, P.off_ids[i]))
				P.off_ids[w++] = P.off_ids[i];
		__atomic_store_n(&P.noff, w, __ATOMIC_RELEASE);
	}
out:
	pthread_mutex_unlock(&P.sw_lock);
	if (x)
		xtab_put(x);
	free(sorted);
	return rc;
}

void presto_switches_prune(const struct xtab *xt)
{
	pthread_mutex_lock(&P.sw_lock);
	unsigned w = 0;
	for (unsigned i = 0; i < P.noff; i++)
		if (xtab_by_id(xt, P.off_ids[i]))
			P.off_ids[w++] = P.off_ids[i];
	__atomic_store_n(&P.noff, w, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&P.sw_lock);
}

void presto_write_verf(uint8_t out[8], bool logged)
{
	memcpy(out, P.verf, 8);
	if (!logged)
		out[7] ^= 0x80;	/* the epoch's top bit, never set by a count */
}

/* ---- syncing the backing filesystems ---- */

/*
 * Retired tables. A reload can drop an export, or find its path on another
 * filesystem, while the log still holds records of it whose data is only in
 * the page cache: the destager must go on syncing that filesystem until a
 * sync covers every such record, or it would trim them unsynced. So the
 * table a reload replaces is kept here (with its roots open) when one of
 * its filesystems is not in the new table. A table no call uses any more
 * (only our reference left: no call can take it again) cannot gain records;
 * the first complete sync that starts after it was seen so covers all of
 * them, and it is released then.
 */
static struct {
	pthread_mutex_t lock;
	struct xtab **v;
	unsigned n, cap;
} R = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool xtab_has_dev(const struct xtab *x, dev_t dev)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->v[i].dev == dev)
			return true;
	return false;
}

void presto_retire(struct xtab *old, const struct xtab *cur)
{
	bool keep = false;

	if (!old)
		return;
	for (size_t i = 0; P.log && cur && i < old->n && !keep; i++)
		keep = !xtab_has_dev(cur, old->v[i].dev);
	pthread_mutex_lock(&R.lock);
	if (keep && R.n == R.cap) {
		unsigned ncap = R.cap ? 2 * R.cap : 4;
		struct xtab **nv = realloc(R.v, ncap * sizeof(*nv));
		if (nv) {
			R.v = nv;
			R.cap = ncap;
		}
	}
	if (keep && R.n < R.cap) {
		R.v[R.n] = old;
		__atomic_store_n(&R.n, R.n + 1, __ATOMIC_RELAXED);
		old = NULL;
	}
	pthread_mutex_unlock(&R.lock);
	if (old && keep) {
		/* no memory to keep it: sync its filesystems now, the best
		 * that can be done for records of calls still running */
		for (size_t i = 0; i < old->n; i++)
			if (syncfs(old->v[i].root_fd) < 0)
				log_warn("syncfs of dropped export %s", old->v[i].e->path);
	}
	if (old)
		xtab_put(old);
}

/* retired_drop_locked -- take t off the retired list, if there, with the
 * list's reference (R.lock held) */
static void retired_drop_locked(struct xtab *t)
{
	for (unsigned k = 0; k < R.n; k++) {
		if (R.v[k] != t)
			continue;
		memmove(&R.v[k], &R.v[k + 1], (R.n - k - 1) * sizeof(R.v[0]));
		__atomic_store_n(&R.n, R.n - 1, __ATOMIC_RELAXED);
		xtab_put(t);
		return;
	}
}

/* wb_failure -- a syncfs failed: the pages whose writeback failed are clean
 * now, their data on no disk, and the error is reported once, so the next
 * syncfs succeeds. Only the log's records still hold that data: from now
 * on nothing is trimmed (the log fills, clients are slowed, then told to
 * retry), and STATE_DIR/replay-pending makes the next start replay the
 * whole log, trusting no file's stamp. */
static void wb_failure(void)
{
	if (__atomic_exchange_n(&P.wb_failed, true, __ATOMIC_ACQ_REL))
		return;
	__atomic_store_n(&P.state, "ERROR", __ATOMIC_RELAXED);
	int rc = replay_mark(true, false);
	if (rc < 0) {
		errno = -rc;
		log_warn("%s/replay-pending", P.conf.state_dir);
	}
	log_warnx("a filesystem lost written data (writeback error): the NVRAM log keeps every "
		  "record from now on and is never trimmed in this run. Repair the filesystem and "
		  "restart presto-nfsd: it replays the log");
}

/* sync_table -- syncfs each filesystem of x not in done[] (n of them so far,
 * room for max); returns 0 or the last -errno */
static int sync_table(const struct xtab *x, dev_t *done, size_t *n, size_t max, const char *what)
{
	int rc = 0;

	for (size_t i = 0; i < x->n; i++) {
		bool seen = false;
		for (size_t k = 0; k < *n; k++)
			if (done[k] == x->v[i].dev)
				seen = true;
		if (seen)
			continue;
		__atomic_add_fetch(&P.syncing, 1, __ATOMIC_RELAXED);
		if (syncfs(x->v[i].root_fd) < 0) {
			rc = -errno;
			wb_failure();
			errno = -rc;
			log_warn("syncfs of %s %s", what, x->v[i].e->path);
		} else if (*n < max) {
			done[(*n)++] = x->v[i].dev;
		}
		__atomic_sub_fetch(&P.syncing, 1, __ATOMIC_RELAXED);
	}
	return rc;
}

/* One sync at a time: a writeback error is reported to one syncfs per
 * descriptor, and a second sync running beside it must not pass the
 * wb_failed check before the first has set it. */
static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;

static int presto_sync_all_locked(void);

int presto_sync_all(void)
{
	pthread_mutex_lock(&sync_lock);
	int rc = presto_sync_all_locked();
	pthread_mutex_unlock(&sync_lock);
	return rc;
}

static int presto_sync_all_locked(void)
{
	struct xtab *x = xtab_get();
	struct xtab **old = NULL;
	bool *idle = NULL;
	dev_t done[256];
	size_t ndone = 0;
	unsigned nold = 0;
	int rc = 0;

	/* the retired tables, and which of them no call uses (before the
	 * syncs: their records are all applied by then) */
	pthread_mutex_lock(&R.lock);
	if (R.n) {
		old = malloc(R.n * sizeof(*old));
		idle = malloc(R.n * sizeof(*idle));
		if (old && idle)
			nold = R.n;
		else
			rc = -ENOMEM;	/* not a complete sync */
	}
	for (unsigned i = 0; i < nold; i++) {
		old[i] = R.v[i];
		__atomic_add_fetch(&old[i]->refs, 1, __ATOMIC_ACQ_REL);
		idle[i] = __atomic_load_n(&old[i]->refs, __ATOMIC_ACQUIRE) == 2;
	}
	pthread_mutex_unlock(&R.lock);
	if (x) {
		int xrc = sync_table(x, done, &ndone, sizeof(done) / sizeof(done[0]), "export");
		if (xrc < 0)
			rc = xrc;
	}
	for (unsigned i = 0; i < nold; i++) {
		int orc = sync_table(old[i], done, &ndone, sizeof(done) / sizeof(done[0]),
				     "dropped export");
		if (orc < 0) {
			rc = orc;
			idle[i] = false;	/* not covered: keep it */
		}
	}
	/* after a writeback error no sync covers anything (wb_failure) */
	if (__atomic_load_n(&P.wb_failed, __ATOMIC_ACQUIRE))
		rc = -EIO;
	/* release the idle ones that this sync covered */
	pthread_mutex_lock(&R.lock);
	for (unsigned i = 0; i < nold; i++)
		if (idle[i] && rc == 0)
			retired_drop_locked(old[i]);
	pthread_mutex_unlock(&R.lock);
	for (unsigned i = 0; i < nold; i++)
		xtab_put(old[i]);
	free(old);
	free(idle);
	if (x)
		xtab_put(x);
	return rc;
}

/* retired_settle -- the destager, idle: each retired table no call uses
 * any more gets its filesystems synced once more and is let go, so that a
 * dropped export's roots close soon (its filesystem can be unmounted) even
 * when no destage comes. */
static void retired_settle(void)
{
	if (__atomic_load_n(&R.n, __ATOMIC_RELAXED) == 0)
		return;
	pthread_mutex_lock(&R.lock);
	struct xtab *t = NULL;
	for (unsigned i = 0; i < R.n && !t; i++)
		if (__atomic_load_n(&R.v[i]->refs, __ATOMIC_ACQUIRE) == 1) {
			t = R.v[i];
			__atomic_add_fetch(&t->refs, 1, __ATOMIC_ACQ_REL);
		}
	pthread_mutex_unlock(&R.lock);
	if (!t)
		return;
	dev_t done[256];
	size_t ndone = 0;
	pthread_mutex_lock(&sync_lock);	/* as presto_sync_all: one sync at a time */
	bool synced = sync_table(t, done, &ndone, sizeof(done) / sizeof(done[0]),
				 "dropped export") == 0 &&
		      !__atomic_load_n(&P.wb_failed, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&sync_lock);
	if (synced) {
		pthread_mutex_lock(&R.lock);
		retired_drop_locked(t);
		pthread_mutex_unlock(&R.lock);
	}
	xtab_put(t);
}

bool presto_syncing(void)
{
	return __atomic_load_n(&P.syncing, __ATOMIC_RELAXED) != 0;
}

bool presto_sync_short(void)
{
	return __atomic_load_n(&P.destage_ns_last, __ATOMIC_RELAXED) < 50 * 1000000ull;
}

/* ---- the write path ---- */

static unsigned stripe_of(dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)ino * 0xbf58476d1ce4e5b9ull);
	return (unsigned)((h >> 32) % NSTRIPES);
}

/* space_reserve -- claim log space for a call between its begin and its
 * append: twice est (the record, and the worst pad before it), if the log's
 * free space covers every claim in flight plus that and slack (and, with
 * no_waiters, nobody waits for room: an append would queue behind them).
 * Claims are released by presto_abort, after the append. Appends of calls
 * that claimed are therefore never short of room: the event loop thread
 * never waits in nvlog_append_nowait. The claims are
 * read before the log's gauges: a call that appended and then released its
 * claim in between is then counted in the gauges (its append happened
 * before its release), never in neither. Returns whether claimed. */
static bool space_reserve(struct presto_txn *t, uint64_t est, uint64_t slack, bool no_waiters)
{
	uint64_t used, area, head;
	unsigned waiters;

	/* the record may not fit before the end of the ring: then a pad of
	 * up to its own size goes first. Claimed too, or the append would wait
	 * (on the loop thread) and then fail. */
	est *= 2;
	for (;;) {
		uint64_t cur = __atomic_load_n(&P.claimed, __ATOMIC_ACQUIRE);
		nvlog_space(P.log, &used, &area, &head, &waiters);
		if (no_waiters && waiters)
			return false;
		uint64_t free_bytes = area > used ? area - used : 0;
		if (free_bytes < cur + est + slack)
			return false;
		if (__atomic_compare_exchange_n(&P.claimed, &cur, cur + est, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			break;
	}
	t->claimed = est;
	return true;
}

static void kick_destager(void)
{
	pthread_mutex_lock(&P.d_lock);
	pthread_cond_signal(&P.d_cond);
	pthread_mutex_unlock(&P.d_lock);
}

static void space_release(struct presto_txn *t);

/* sort_stripes -- t's stripes for objects (devs, inos), distinct, in the
 * one locking order (ascending) that keeps two operations from deadlocking. */
static void sort_stripes(struct presto_txn *t, const dev_t *devs, const ino_t *inos, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned s = stripe_of(devs[i], inos[i]);
		unsigned k;
		for (k = 0; k < t->nstripes && t->stripes[k] != s; k++)
			;
		if (k == t->nstripes)
			t->stripes[t->nstripes++] = s;
	}
	for (unsigned i = 1; i < t->nstripes; i++)
		for (unsigned k = i; k > 0 && t->stripes[k - 1] > t->stripes[k]; k--) {
			unsigned tmp = t->stripes[k];
			t->stripes[k] = t->stripes[k - 1];
			t->stripes[k - 1] = tmp;
		}
}

int presto_begin_nowait(struct presto_txn *t, const dev_t *devs, const ino_t *inos, unsigned n,
			size_t est_bytes)
{
	memset(t, 0, sizeof(*t));
	if (!P.fast_persist)
		return -EWOULDBLOCK;	/* every persist is an msync: a worker's job */
	if (!space_reserve(t, est_bytes, 2 * SPACE_SLACK, true))
		return -EWOULDBLOCK;	/* the full-log wait is a worker's job */
	sort_stripes(t, devs, inos, n);
	for (unsigned i = 0; i < t->nstripes; i++) {
		if (pthread_mutex_trylock(&P.stripes[t->stripes[i]]) != 0) {
			while (i-- > 0)
				pthread_mutex_unlock(&P.stripes[t->stripes[i]]);
			t->nstripes = 0;
			space_release(t);
			return -EWOULDBLOCK;
		}
	}
	t->active = true;
	return 0;
}

int presto_begin(struct presto_txn *t, const dev_t *devs, const ino_t *inos, unsigned n,
		 size_t est_bytes)
{
	memset(t, 0, sizeof(*t));
	if (!space_reserve(t, est_bytes, SPACE_SLACK, false)) {
		/* full: the destager makes room; wait for it, bounded */
		uint64_t deadline = rpc_now_ns() + (uint64_t)P.conf.full_wait_ms * 1000000ull;
		CNT_ADD(space_waits, 1);
		/* a held destager runs for it too: a call that cannot get room
		 * is a full log, whatever the occupancy (destage_due) */
		__atomic_add_fetch(&P.space_wanted, 1, __ATOMIC_ACQ_REL);
		kick_destager();
		for (;;) {
			if (space_reserve(t, est_bytes, SPACE_SLACK, false))
				break;
			if (rpc_now_ns() >= deadline) {
				__atomic_sub_fetch(&P.space_wanted, 1, __ATOMIC_ACQ_REL);
				CNT_ADD(jukebox, 1);
				return -EAGAIN;
			}
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 5 * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_mutex_lock(&P.d_lock);
			pthread_cond_signal(&P.d_cond);
			pthread_cond_timedwait(&P.d_done, &P.d_lock, &ts);
			pthread_mutex_unlock(&P.d_lock);
		}
		__atomic_sub_fetch(&P.space_wanted, 1, __ATOMIC_ACQ_REL);
	}
	sort_stripes(t, devs, inos, n);
	for (unsigned i = 0; i < t->nstripes; i++)
		pthread_mutex_lock(&P.stripes[t->stripes[i]]);
	t->active = true;
	return 0;
}

int presto_dir_hold(dev_t dev, ino_t ino, bool nowait, unsigned *stripe)
{
	unsigned s = stripe_of(dev, ino);

	if (nowait) {
		if (pthread_mutex_trylock(&P.stripes[s]) != 0)
			return -EWOULDBLOCK;
	} else {
		pthread_mutex_lock(&P.stripes[s]);
	}
	*stripe = s;
	return 0;
}

/* count_release -- before a stripe is unlocked: off the loop, count it (the
 * count is read by the loop under a stripe, so it must be there before the
 * unlock) */
static void count_release(void)
{
	if (!rpc_on_loop())
		__atomic_add_fetch(&P.released, 1, __ATOMIC_RELEASE);
}

uint64_t presto_release_gen(void)
{
	return __atomic_load_n(&P.released, __ATOMIC_ACQUIRE);
}

void presto_dir_release(unsigned stripe)
{
	count_release();
	pthread_mutex_unlock(&P.stripes[stripe]);
}

static void space_release(struct presto_txn *t)
{
	if (t->claimed)
		__atomic_sub_fetch(&P.claimed, t->claimed, __ATOMIC_RELEASE);	/* after the append */
	t->claimed = 0;
}

static void unlock_stripes(struct presto_txn *t)
{
	if (t->nstripes)
		count_release();
	for (unsigned i = t->nstripes; i-- > 0;)
		pthread_mutex_unlock(&P.stripes[t->stripes[i]]);
	t->active = false;
}

/* presto_abort -- unlock without a record (nothing was changed), or after
 * the append: release the stripes, the claim on the log, the stamps. */
static void presto_abort(struct presto_txn *t)
{
	if (t->active)
		unlock_stripes(t);
	space_release(t);
	for (unsigned i = 0; i < t->nstamps; i++) {
		if (t->stamprefs[i])
			fdcache_put(t->stamprefs[i]);
		else if (t->stampfds[i] >= 0)
			close(t->stampfds[i]);
	}
	t->nstamps = 0;
	free(t->target);
	t->target = NULL;
	t->has_op = false;
}

/* encbuf -- a thread's buffer for encoding records, kept until the thread
 * ends. Long opaques (a WRITE's data, a long reply) stay out of it (xiov),
 * so records need a few KiB at most: ENCBUF_MIN covers every one. */
struct encbuf {
	uint8_t *buf;
	size_t cap;
};
#define ENCBUF_MIN (16 * 1024)
static pthread_key_t encbuf_key;
static pthread_once_t encbuf_once = PTHREAD_ONCE_INIT;

static _Thread_local struct encbuf *encbuf_mine;

static void encbuf_free(void *p)
{
	struct encbuf *eb = p;

	encbuf_mine = NULL;	/* runs in the exiting thread */

	free(eb->buf);
	free(eb);
}

static void encbuf_init(void)
{
	pthread_key_create(&encbuf_key, encbuf_free);
}

/* encbuf_get -- the thread's buffer, through encbuf_mine: no pthread_once
 * and key lookup per record (the key is there for its destructor) */
static struct encbuf *encbuf_get(size_t size)
{
	struct encbuf *eb = encbuf_mine;
	if (!eb) {
		pthread_once(&encbuf_once, encbuf_init);
		eb = calloc(1, sizeof(*eb));
		if (!eb || pthread_setspecific(encbuf_key, eb) != 0) {
			free(eb);
			return NULL;
		}
		encbuf_mine = eb;
	}
	if (eb->cap < size) {
		size_t ncap = size < ENCBUF_MIN ? ENCBUF_MIN : size;
		uint8_t *nb = malloc(ncap);
		if (!nb)
			return NULL;
		free(eb->buf);
		eb->buf = nb;
		eb->cap = ncap;
	}
	return eb;
}

/* xiov -- an XDR encoding stream that does not copy long opaques (a
 * WRITE's data, a reply): xdrmem over the encoding buffer, except that
 * putbytes of XIOV_MIN bytes or more notes where the run belongs instead of
 * copying it. The record is the buffer cut at those places with the runs in
 * between: the same bytes as xdrmem alone would give, one copy less on the
 * way into the log (the log's own copy is the only one). The runs must stay
 * valid until the append. */
#define XIOV_MIN 512
#define XIOV_RUNS 4
struct xiov {
	struct xdr_ops ops;		/* xdrmem's, with xiov_putbytes */
	bool_t (*mem_putbytes)(XDR *, const char *, u_int);
	unsigned n;
	struct {
		u_int at;		/* buffer position the run follows */
		const char *p;
		u_int len;
	} run[XIOV_RUNS];
};

static bool_t xiov_putbytes(XDR *x, const char *p, u_int len)
{
	struct xiov *v = (struct xiov *)x->x_public;

	if (len < XIOV_MIN || v->n == XIOV_RUNS)
		return v->mem_putbytes(x, p, len);
	/* the run is a multiple of 4 bytes: its last len % 4 go into the
	 * buffer with the padding, which keeps the buffer's positions 4-byte
	 * aligned for rpcgen's inline 32-bit stores (XDR_INLINE) */
	u_int whole = len & ~3u;
	v->run[v->n].at = xdr_getpos(x);
	v->run[v->n].p = p;
	v->run[v->n].len = whole;
	v->n++;
	return whole == len || v->mem_putbytes(x, p + whole, len - whole);
}

static void xiov_create(XDR *x, struct xiov *v, uint8_t *buf, u_int size)
{
	xdrmem_create(x, (char *)buf, size, XDR_ENCODE);
	v->ops = *x->x_ops;
	v->mem_putbytes = v->ops.x_putbytes;
	v->ops.x_putbytes = xiov_putbytes;
	v->n = 0;
	x->x_ops = &v->ops;
	x->x_public = (char *)v;
}

/* xiov_iov -- the encoded record as iov[] (room for 2 * XIOV_RUNS + 1);
 * returns the count. */
static int xiov_iov(XDR *x, const struct xiov *v, uint8_t *buf, struct iovec *iov)
{
	u_int end = xdr_getpos(x), at = 0;
	int n = 0;

	for (unsigned i = 0; i < v->n; i++) {
		if (v->run[i].at > at)
			iov[n++] = (struct iovec){ buf + at, v->run[i].at - at };
		iov[n++] = (struct iovec){ (void *)v->run[i].p, v->run[i].len };
		at = v->run[i].at;
	}
	if (end > at)
		iov[n++] = (struct iovec){ buf + at, end - at };
	return n;
}

int presto_commit(struct presto_txn *t, const struct drc_key *key, const uint8_t *reply,
		  size_t reply_len)
{
	plog_rec r;
	size_t size = 1024 + reply_len + sizeof(*key);
	int rc;

	if (!t->has_op) {
		presto_abort(t);
		return 0;
	}
	memset(&r, 0, sizeof(r));
	r.op = t->op;
	if (key) {
		r.drc_key.drc_key_val = (char *)key;
		r.drc_key.drc_key_len = sizeof(*key);
	}
	/* the reply serves the DRC only: a WRITE (idempotent) keeps none */
	if (key && reply && reply_len <= PLOG_REPLY_MAX) {
		r.reply.reply_val = (char *)reply;
		r.reply.reply_len = (u_int)reply_len;
	}
	/* a WRITE's data goes into the buffer only when short (xiov) */
	if (t->op.type == PLOG_WRITE)
		size += t->op.plog_op_u.write.data.data_len < XIOV_MIN ?
			t->op.plog_op_u.write.data.data_len : 0;
	/* one encoding buffer per thread, kept (a malloc and free per call
	 * showed in profiles) */
	struct encbuf *eb = encbuf_get(size);
	if (!eb) {
		rc = -ENOMEM;
		goto out;
	}
	uint8_t *buf = eb->buf;
	XDR x;
	struct xiov xv;
	struct iovec iov[2 * XIOV_RUNS + 1];
	xiov_create(&x, &xv, buf, (u_int)size);
	plog_macs m = { { plog_nobjs(t->op.type) * PLOG_MAC_SIZE, (char *)t->macs } };
	if (!xdr_plog_rec(&x, &r) || !xdr_plog_macs(&x, &m)) {
		xdr_destroy(&x);
		rc = -EMSGSIZE;
		goto out;
	}
	int niov = xiov_iov(&x, &xv, buf, iov);
	xdr_destroy(&x);
	rc = nvlog_append_nowait(P.log, (uint16_t)t->op.type, iov, niov, &t->lsn);
	if (rc == 0) {
		t->logged = true;
		if (t->through)
			CNT_ADD(through_appends, 1);
		/* still under the stripe locks: no later record on these
		 * directories can stamp them first. The loop's directory
		 * stamps wait for the end of its batch, except a MKDIR's
		 * ("Deferred directory stamps") */
		bool defer = rpc_on_loop() &&
			     !(t->op.type == PLOG_CREATE &&
			       (t->op.plog_op_u.create.type & S_IFMT) == S_IFDIR);
		for (unsigned i = 0; i < t->nstamps; i++)
			if (!(defer && t->stampdir[i] && stamp_defer(t, i)))
				stamp_now(t, i);
	}
out:
	if (rc < 0) {
		static long tok;
		CNT_ADD(log_fallbacks, 1);
		if (log_ratelimited(&tok)) {
			errno = -rc;
			log_warn("append to the NVRAM log failed; syncing instead");
		}
	}
	presto_abort(t);
	return rc;
}

int presto_wait(struct presto_txn *t)
{
	if (!t->logged || nvlog_durable_lsn(P.log) >= t->lsn)
		return 0;
	uint64_t t0 = rpc_now_ns();
	int rc = nvlog_wait(P.log, t->lsn);
	t->waited_ns = rpc_now_ns() - t0;
	CNT_ADD(wait_ns_total, t->waited_ns);
	return rc;
}

void presto_count_commit_avoided(void)
{
	CNT_ADD(commits_avoided, 1);
}

/* ---- the destager ---- */

static bool destage_due(uint64_t *target)
{
	struct nvlog_stats s;

	nvlog_stats(P.log, &s);
	*target = s.head_lsn;
	if (s.head_lsn < s.tail_lsn)
		return false;		/* empty */
	if (P.flush_target >= s.tail_lsn && P.flush_target != 0)
		return true;
	uint64_t pct = s.area_bytes ? s.used_bytes * 100 / s.area_bytes : 0;
	/* a call that cannot get room is a full log, whatever the occupancy
	 * (a 1 MiB WRITE claims twice its size: it can wait below the high
	 * water mark), held or not: never drop work */
	if (__atomic_load_n(&P.space_wanted, __ATOMIC_ACQUIRE) > 0)
		return true;
	if (P.held)
		return pct >= 90;
	return pct >= P.conf.high_water_pct || s.oldest_age_ns >= (uint64_t)P.conf.destage_age_ms * 1000000ull;
}

/* destage_once -- make the filesystems durable and trim. Called with d_lock
 * not held. */
static int destage_once(uint64_t head)
{
	struct nvlog_stats before, after;
	uint64_t t0 = rpc_now_ns();
	int rc;

	nvlog_stats(P.log, &before);
	rc = presto_sync_all();
	if (rc < 0) {
		CNT_ADD(destage_errors, 1);
		return rc;
	}
	/* records appended but not yet persisted are covered by the syncfs
	 * too (each was applied before it was appended); persist them (group
	 * commit) so that the trim may pass them. If that persist fails (the
	 * log refuses appends from then on), the trim passes them all the
	 * same: stopped at the durable LSN, it left them behind the tail,
	 * where a recovery would find those whose bytes reached the medium
	 * after all and replay them over the changes answered since without
	 * a record (presto_sync_unlogged), and a flush waiting for the head
	 * never ended. */
	uint64_t upto = head;
	bool durable = nvlog_durable_lsn(P.log) >= upto || nvlog_wait(P.log, upto) == 0;
	if (upto >= before.tail_lsn) {
		rc = durable ? nvlog_trim(P.log, upto) : nvlog_trim_synced(P.log, upto);
		if (rc < 0) {
			CNT_ADD(destage_errors, 1);
			return rc;
		}
	}
	nvlog_stats(P.log, &after);
	/* nvlog_trim_synced stops before a record still being copied */
	if (after.tail_lsn <= upto)
		upto = after.tail_lsn - 1;
	uint64_t ns = rpc_now_ns() - t0;
	CNT_ADD(destage_runs, 1);
	CNT_ADD(destage_ns_total, ns);
	__atomic_store_n(&P.destage_ns_last, ns, __ATOMIC_RELAXED);
	if (before.used_bytes > after.used_bytes)
		CNT_ADD(destage_bytes, before.used_bytes - after.used_bytes);
	pthread_mutex_lock(&P.d_lock);
	if (upto > P.destaged_lsn)
		P.destaged_lsn = upto;
	pthread_mutex_unlock(&P.d_lock);
	return 0;
}

static void *destager_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&P.d_lock);
	while (!P.stop) {
		uint64_t head;
		if (!destage_due(&head)) {
			pthread_mutex_unlock(&P.d_lock);
			retired_settle();
			pthread_mutex_lock(&P.d_lock);
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 50 * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&P.d_cond, &P.d_lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&P.d_lock);
		int rc = destage_once(head);
		pthread_mutex_lock(&P.d_lock);
		P.last_error = rc;
		if (rc < 0) {
			static long tok;
			if (log_ratelimited(&tok)) {
				errno = -rc;
				log_warn("destage failed; the log keeps its records, retrying");
			}
			pthread_cond_broadcast(&P.d_done);
			/* back off a little before retrying */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&P.d_cond, &P.d_lock, &ts);
			continue;
		}
		if (P.flush_target && P.destaged_lsn >= P.flush_target)
			P.flush_target = 0;
		pthread_cond_broadcast(&P.d_done);
	}
	pthread_mutex_unlock(&P.d_lock);
	return NULL;
}

int presto_flush(void)
{
	struct nvlog_stats s;
	int rc = 0;

	if (!P.log)
		return presto_sync_all();
	nvlog_stats(P.log, &s);
	if (s.head_lsn < s.tail_lsn)
		return presto_sync_all();	/* nothing logged; still honour "durable" */
	uint64_t target = s.head_lsn;
	pthread_mutex_lock(&P.d_lock);
	if (target > P.flush_target)
		P.flush_target = target;
	pthread_cond_signal(&P.d_cond);
	while (P.destaged_lsn < target && !P.stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&P.d_done, &P.d_lock, &ts);
		if (P.last_error < 0 && P.destaged_lsn < target) {
			rc = P.last_error;
			break;
		}
		if (P.flush_target < target && P.destaged_lsn < target) {
			P.flush_target = target;
			pthread_cond_signal(&P.d_cond);
		}
	}
	pthread_mutex_unlock(&P.d_lock);
	return rc;
}

int presto_sync_unlogged(void)
{
	struct nvlog_stats s;

	if (!P.log)
		return presto_sync_all();
	nvlog_stats(P.log, &s);
	if (s.head_lsn < s.tail_lsn)
		return presto_sync_all();
	/* every record up to the head was applied before it was appended:
	 * the sync covers them all, held or not */
	return destage_once(s.head_lsn);
}

void presto_hold(bool hold)
{
	pthread_mutex_lock(&P.d_lock);
	P.held = hold;
	pthread_cond_signal(&P.d_cond);
	pthread_mutex_unlock(&P.d_lock);
}

/* ---- recovery ---- */

struct replay_ctx {
	struct xtab *xt;
	bool apply;
	uint64_t last_lsn;
	uint64_t lsn;			/* of the record being replayed */
	uint32_t epoch;			/* its epoch */
	uint64_t stamped_skips;		/* namespace records a stamp proved applied */
	/* the MACs of the record's plog_obj (plog.x); 0: a record of a server
	 * before them */
	unsigned nmacs;
	uint8_t macs[2][PLOG_MAC_SIZE];
	/* whole_fs of the exports records without MACs named (asked once) */
	struct {
		uint32_t id;
		bool whole;
	} wf[16];
	unsigned nwf;
	bool unexported;		/* a record names an export not in xt */
	/* no stamps after a record that could not be replayed, on the
	 * filesystems it names (all of them when unknown, or too many) */
	bool nostamp_all;
	unsigned nnostamp;
	dev_t nostamp[8];
	/* the devices of the current record's exports (0: none known) */
	dev_t cur_dev[2];
};

/*
 * replay_stamp -- stamp what the current record changed, unless a record of
 * this replay that names its filesystem could not be replayed: the start
 * then fails and the replay is tried again, and a later record's stamp on
 * the same directory or file would make that retry skip the failed record
 * as applied. Records on other filesystems keep their stamps, which spare
 * the retry the rules alone (see "Applied stamps").
 */
static void replay_stamp(struct replay_ctx *rc, int fd)
{
	if (rc->nostamp_all)
		return;
	if (rc->nnostamp) {
		/* the object's device, and its exports' (a btrfs subvolume
		 * inside an export has a device number of its own) */
		struct stat st;
		if (fstat(fd, &st) < 0)
			return;
		for (unsigned i = 0; i < rc->nnostamp; i++)
			if (rc->nostamp[i] == st.st_dev || rc->nostamp[i] == rc->cur_dev[0] ||
			    rc->nostamp[i] == rc->cur_dev[1])
				return;
	}
	/* never lowered: after a reboot a file's or directory's stamp is not
	 * trusted for its data and attributes, so its records are applied
	 * again, but a directory's stamp still proves its namespace records
	 * applied, and a later record's stamp must stay */
	if (!stamp_covers(fd, rc->epoch, rc->lsn))
		stamp_set(fd, true, rc->epoch, rc->lsn);
}

/* rec_exports -- the exports a record's objects belong to (twice the same
 * but for RENAME and LINK) */
static void rec_exports(const plog_op *op, uint32_t ids[2])
{
	ids[0] = ids[1] = 0;
	switch (op->type) {
	case PLOG_WRITE: ids[0] = ids[1] = op->plog_op_u.write.file.export_id; break;
	case PLOG_SETATTR: ids[0] = ids[1] = op->plog_op_u.setattr.obj.export_id; break;
	case PLOG_CREATE: ids[0] = ids[1] = op->plog_op_u.create.dir.export_id; break;
	case PLOG_REMOVE: ids[0] = ids[1] = op->plog_op_u.remove.dir.export_id; break;
	case PLOG_RENAME:
		ids[0] = op->plog_op_u.rename.fromdir.export_id;
		ids[1] = op->plog_op_u.rename.todir.export_id;
		break;
	case PLOG_LINK:
		ids[0] = op->plog_op_u.link.file.export_id;
		ids[1] = op->plog_op_u.link.dir.export_id;
		break;
	case PLOG_REDIRECT:
	case PLOG_DRC:
		break;
	}
}

/* nostamp_after -- the current record could not be replayed: no more
 * stamps on the filesystems of its exports (rc->cur_dev), or on all of them
 * when it did not decode, names an export not in the table, or the list is
 * full */
static void nostamp_after(struct replay_ctx *rc, bool decoded)
{
	for (int i = 0; i < 2 && !rc->nostamp_all; i++) {
		dev_t d = rc->cur_dev[i];
		bool seen = false;
		for (unsigned k = 0; k < rc->nnostamp; k++)
			seen |= rc->nostamp[k] == d;
		if (!decoded || !d ||
		    (!seen && rc->nnostamp == sizeof(rc->nostamp) / sizeof(rc->nostamp[0])))
			rc->nostamp_all = true;
		else if (!seen)
			rc->nostamp[rc->nnostamp++] = d;
	}
}

/* stamped -- whether dirfd proves the current record applied; counts it. */
static bool stamped(struct replay_ctx *rc, int dirfd)
{
	if (!stamp_covers(dirfd, rc->epoch, rc->lsn))
		return false;
	rc->stamped_skips++;
	return true;
}

/*
 * Export marks. A replay must go onto the filesystems the log was written
 * for: an export whose filesystem failed to mount is a directory of another
 * filesystem, where every recorded handle is stale, and "stale" reads as
 * "removed later". So each export's root carries a random mark (xattr
 * trusted.presto.export) and STATE_DIR/export-marks keeps every export's
 * mark as of the last start or exports reload. A replay resolves nothing in
 * an export whose root lacks its remembered mark: -EXDEV, an error.
 */
#define EXPORT_MARK_XATTR "trusted.presto.export"
#define EXPORT_MARK_LEN 16

struct xmark {
	uint32_t id;
	uint8_t mark[EXPORT_MARK_LEN];
	bool warned;
};

static struct {
	pthread_mutex_t lock;
	struct xmark *v;
	size_t n;
} M = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void marks_path(char *buf, size_t n, bool tmp)
{
	snprintf(buf, n, "%s/export-marks%s", P.conf.state_dir, tmp ? ".tmp" : "");
}

/* marks_load -- the remembered marks (a missing file: none) */
static void marks_load(void)
{
	char path[4200], line[256], hx[64];
	FILE *f;

	marks_path(path, sizeof(path), false);
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		struct xmark m = { 0 };
		unsigned len;
		if (sscanf(line, "%u %63s", &m.id, hx) != 2 ||
		    unhex(hx, m.mark, EXPORT_MARK_LEN, &len) < 0 || len != EXPORT_MARK_LEN) {
			log_warnx("%s: malformed line ignored", path);
			continue;
		}
		struct xmark *n = realloc(M.v, (M.n + 1) * sizeof(*n));
		if (!n)
			break;
		M.v = n;
		M.v[M.n++] = m;
	}
	fclose(f);
}

/*
 * stamp_placeholder -- give a root that has no directory stamp yet one that
 * covers nothing (no log's uuid), before its mark is set. The root is
 * stamped at every change of its entries, and on ext4 with 256-byte inodes
 * only the first of the two attributes fits in the inode: the stamp set
 * after the mark went to an attribute block, where each fsetxattr cost
 * 1.6-2.3 us against 1.1-1.6 in the inode (200,000 in a row, /tmp
 * microbenchmark on a fresh ext4).
 */
static void stamp_placeholder(int fd)
{
	struct stamp st;

	memset(&st, 0, sizeof(st));
	if (fgetxattr(fd, STAMP_XATTR, NULL, 0) < 0 && errno == ENODATA)
		(void)fsetxattr(fd, STAMP_XATTR, &st, sizeof(st), XATTR_CREATE);
}

/* mark_of -- the remembered mark of export id, or NULL (M.lock held) */
static struct xmark *mark_of(uint32_t id)
{
	for (size_t i = 0; i < M.n; i++)
		if (M.v[i].id == id)
			return &M.v[i];
	return NULL;
}

/* export_mark_ok -- is xe's root the one the log's records were written
 * for? (nothing remembered for it: does it carry a mark at all?) quiet:
 * say nothing of it (a check that decides no record's fate) */
static bool export_mark_ok(const struct xexport *xe, bool quiet)
{
	uint8_t cur[EXPORT_MARK_LEN];
	bool ok = true;

	pthread_mutex_lock(&M.lock);
	struct xmark *m = mark_of(xe->e->id);
	if (m) {
		ok = fgetxattr(xe->root_fd, EXPORT_MARK_XATTR, cur, sizeof(cur)) == sizeof(cur) &&
		     memcmp(cur, m->mark, sizeof(cur)) == 0;
		if (!ok && !quiet && !m->warned) {
			m->warned = true;
			log_warnx("export %s: its root does not carry the mark it had when the log's "
				  "records were written (%s/export-marks): not the same filesystem "
				  "(is it mounted?); its records are not replayed",
				  xe->e->path, P.conf.state_dir);
		}
	} else {
		/* none remembered (the state file lost, or never written):
		 * at least a mark of this appliance's, which the directory an
		 * unmounted filesystem leaves behind does not carry; without
		 * one every record there would read as "removed later" */
		static long tok;
		ok = fgetxattr(xe->root_fd, EXPORT_MARK_XATTR, cur, sizeof(cur)) == sizeof(cur);
		if (!ok && !quiet && log_ratelimited(&tok))
			log_warnx("export %s: no mark remembered for it (%s/export-marks) and its root "
				  "carries none: not known to be the filesystem the log's records were "
				  "written for (is it mounted?); its records are not replayed",
				  xe->e->path, P.conf.state_dir);
	}
	pthread_mutex_unlock(&M.lock);
	return ok;
}

/* unmarked_publish -- make ids (n of them, malloc'ed; taken) the exports
 * presto is off for because their root takes no mark */
static void unmarked_publish(uint32_t *ids, size_t n)
{
	qsort(ids, n, sizeof(*ids), id_cmp);	/* unmarked_locked looks them up */
	pthread_mutex_lock(&P.sw_lock);
	uint32_t *old = P.unmarked_ids;
	P.unmarked_ids = ids;
	__atomic_store_n(&P.nunmarked, (unsigned)n, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&P.sw_lock);
	free(old);
}

int presto_marks_update(const struct xtab *xt, bool adopt)
{
	char path[4200], tmp[4200], hx[2 * EXPORT_MARK_LEN + 1];
	struct xmark *v = calloc(xt->n ? xt->n : 1, sizeof(*v));
	uint32_t *unmarked = calloc(xt->n ? xt->n : 1, sizeof(*unmarked));
	size_t n = 0, nu = 0;
	int rc = 0;

	if (!P.log)
		goto out;	/* no log, no records to guard */
	if (!v || !unmarked) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < xt->n; i++) {
		const struct xexport *xe = &xt->v[i];
		uint8_t m[EXPORT_MARK_LEN], cur[EXPORT_MARK_LEN];
		bool known = false, marked = true;
		if (!adopt) {
			/* a reload: the log may hold records of this export,
			 * written against the root that had the remembered mark */
			pthread_mutex_lock(&M.lock);
			const struct xmark *k = mark_of(xe->e->id);
			if ((known = k != NULL))
				memcpy(m, k->mark, sizeof(m));
			pthread_mutex_unlock(&M.lock);
		}
		if (known) {
			/* kept for the replay; but a root that now takes no
			 * extended attribute (another filesystem there) gets no
			 * stamps either */
			if (fgetxattr(xe->root_fd, EXPORT_MARK_XATTR, cur, sizeof(cur)) < 0 &&
			    (errno == ENOTSUP || errno == EOPNOTSUPP))
				marked = false;
		} else if (fgetxattr(xe->root_fd, EXPORT_MARK_XATTR, m, sizeof(m)) != (ssize_t)sizeof(m)) {
			stamp_placeholder(xe->root_fd);
			randombytes_buf(m, sizeof(m));
			if (fsetxattr(xe->root_fd, EXPORT_MARK_XATTR, m, sizeof(m), 0) < 0 ||
			    fsync(xe->root_fd) < 0)
				marked = false;
		}
		if (!marked) {
			/* read-only, or no extended attributes: no mark and no
			 * stamps, so a replay could not tell what its records
			 * did: presto stays off for the export */
			unmarked[nu++] = xe->e->id;
			if (xexport_writable(xe))
				log_warn("export %s: its root does not take the extended attribute "
					 "%s, which the log's replay relies on: presto is off for "
					 "it (written through, as with nopresto)",
					 xe->e->path, EXPORT_MARK_XATTR);
			if (!known)
				continue;
		}
		v[n].id = xe->e->id;
		memcpy(v[n].mark, m, sizeof(m));
		n++;
	}
	/* before the state file: whatever becomes of it, these exports must
	 * not be served with presto on */
	unmarked_publish(unmarked, nu);
	unmarked = NULL;
	marks_path(path, sizeof(path), false);
	marks_path(tmp, sizeof(tmp), true);
	/* 0600 as every state file: the server runs with umask 0 */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		hex(hx, v[i].mark, EXPORT_MARK_LEN);
		fprintf(f, "%u %s\n", v[i].id, hx);
	}
	if ((rc = state_file_commit(f, tmp, path)) == 0) {
		pthread_mutex_lock(&M.lock);
		free(M.v);
		M.v = v;
		M.n = n;
		v = NULL;
		pthread_mutex_unlock(&M.lock);
	}
out:
	free(unmarked);
	free(v);
	return rc;
}

/* name_ok -- a name from the log is one directory entry (the log is input
 * too: CRC-valid is not well-formed) */
static bool name_ok(const char *n)
{
	return n && n[0] && strlen(n) <= NAME_MAX && !strchr(n, '/') && strcmp(n, ".") &&
	       strcmp(n, "..");
}

/* whole_fs -- whether export xe's root is the root directory of its
 * filesystem (a mount of the filesystem's "/", at the export's root): then
 * every inode open_by_handle_at reaches through it is inside the export */
static bool whole_fs(const struct xexport *xe)
{
	struct statx sx;
	char *line = NULL;
	size_t cap = 0;
	bool whole = false;

	if (statx(xe->root_fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) < 0 ||
	    !(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
	    !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return false;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": ROOT is the directory of
	 * the filesystem the mount shows (octal escapes; "/" has none) */
	while (getline(&line, &cap, f) > 0) {
		int id, at = 0;
		if (sscanf(line, "%d %*d %*s %n", &id, &at) == 1 && at > 0 && id == xe->mount_id) {
			whole = line[at] == '/' && line[at + 1] == ' ';
			break;
		}
	}
	free(line);
	fclose(f);
	return whole;
}

/* authentic -- whether the record may name the object o: its handle carries
 * the MAC of a handle minted for that export (plog.x), or, in a record of a
 * server before the MACs, the export is a whole filesystem. */
static bool authentic(struct replay_ctx *rc, const struct xexport *xe, const plog_obj *o, int slot)
{
	struct fh_kernel kh;

	kh_from_plog(&o->kh, &kh);
	if (rc->nmacs) {
		if ((unsigned)slot < rc->nmacs && fh_mac_ok(o->export_id, &kh, rc->macs[slot]))
			return true;
		log_warnx("NVRAM log record LSN %llu: a handle in export %s fails its MAC check "
			  "(a record this appliance did not write)",
			  (unsigned long long)rc->lsn, xe->e->path);
		return false;
	}
	unsigned i;
	for (i = 0; i < rc->nwf && rc->wf[i].id != o->export_id; i++)
		;
	bool whole = i < rc->nwf ? rc->wf[i].whole : whole_fs(xe);
	if (i == rc->nwf && i < sizeof(rc->wf) / sizeof(rc->wf[0])) {
		rc->wf[i].id = o->export_id;
		rc->wf[i].whole = whole;
		rc->nwf++;
	}
	if (whole)
		return true;
	log_warnx("NVRAM log record LSN %llu has no handle MACs (written by an older "
		  "presto-nfsd) and export %s is not a whole filesystem: its handles cannot "
		  "be trusted to stay inside it",
		  (unsigned long long)rc->lsn, xe->e->path);
	return false;
}

/* resolve -- an O_PATH descriptor of a logged object, through a redirect
 * when its recorded handle went stale. -ESTALE when it does not exist.
 * slot: the object's place among the record's plog_obj, whose MAC must
 * check out; -1 for a probe of existence only (nothing is opened for use). */
static int resolve(struct replay_ctx *rc, const plog_obj *o, int slot, struct fh_kernel *now)
{
	const struct xexport *xe = xtab_by_id(rc->xt, o->export_id);
	union {
		struct file_handle h;
		uint8_t raw[sizeof(struct file_handle) + FH_KH_MAX];
	} u;
	struct fh_kernel kh;

	if (!xe)
		return -ENXIO;	/* not "removed later": the export is gone */
	if (!export_mark_ok(xe, false))
		return -EXDEV;	/* not its filesystem (not mounted?) */
	/* a handle no filesystem would give out is a malformed record, not an
	 * object removed later (which open_by_handle_at reports as ESTALE or
	 * ENOENT; EINVAL means the handle itself is wrong) */
	if (!plog_kh_ok(&o->kh))
		return -EINVAL;
	if (slot >= 0 && !authentic(rc, xe, o, slot))
		return -EPERM;
	kh_from_plog(&o->kh, &kh);
	for (int pass = 0; pass < 2; pass++) {
		u.h.handle_bytes = kh.len;
		u.h.handle_type = kh.type;
		memcpy(u.h.f_handle, kh.bytes, kh.len);
		int fd = open_by_handle_at(xe->root_fd, &u.h, O_PATH | O_CLOEXEC);
		if (fd >= 0) {
			if (now)
				*now = kh;
			return fd;
		}
		if (errno != ESTALE && errno != ENOENT)
			return -errno;
		struct fh_kernel n;
		if (pass == 1 || presto_redirect(o->export_id, &kh, &n) < 0)
			break;
		kh = n;
	}
	return -ESTALE;
}

/* same_object -- whether (dirfd, name) is the recorded object (or what it
 * was redirected to). */
static bool same_object(uint32_t export_id, int dirfd, const char *name, const plog_kh *rec)
{
	struct fh_kernel cur, want, red;

	if (fh_of(dirfd, name, &cur, NULL) < 0)
		return false;
	kh_from_plog(rec, &want);
	if (kh_eq(&cur, &want))
		return true;
	return presto_redirect(export_id, &want, &red) == 0 && kh_eq(&cur, &red);
}

static int replay_attr(int fd, const plog_attr *a, bool is_link)
{
	char p[32];

	/* a time as the client set it: nanoseconds under 10^9, which the
	 * server checked (NFS3ERR_INVAL); UTIME_NOW or UTIME_OMIT from a
	 * record would take the time of the replay, or none. Refused before
	 * anything of the record is applied. */
	if ((a->atime.set && a->atime.nsec >= 1000000000u) ||
	    (a->mtime.set && a->mtime.nsec >= 1000000000u))
		return -EINVAL;
	vfs_proc_path(fd, p);
	if ((a->set_uid || a->set_gid) &&
	    fchownat(fd, "", a->set_uid ? a->uid : (uid_t)-1, a->set_gid ? a->gid : (gid_t)-1,
		     AT_EMPTY_PATH) < 0)
		return -errno;
	if (a->set_size && !is_link) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (!S_ISREG(st.st_mode))
			return -EINVAL;	/* sizes are logged for files only */
		if (a->size > (uint64_t)LLONG_MAX)
			return -EFBIG;	/* as SETATTR answers it (NFS3ERR_FBIG) */
		/* truncate sets mtime even to the same size: not when applied */
		if ((uint64_t)st.st_size != a->size && truncate(p, (off_t)a->size) < 0)
			return -errno;
	}
	if (a->set_mode && !is_link && chmod(p, a->mode & 07777) < 0)
		return -errno;
	if (a->atime.set || a->mtime.set) {
		struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
		if (a->atime.set)
			ts[0] = (struct timespec){ a->atime.sec, a->atime.nsec };
		if (a->mtime.set)
			ts[1] = (struct timespec){ a->mtime.sec, a->mtime.nsec };
		if (utimensat(fd, "", ts, AT_EMPTY_PATH) < 0)
			return -errno;
	}
	return 0;
}

/* replay_retruncate -- after a reboot (file stamps untrusted), once record
 * rc->lsn of regular file fd is applied: if the file carries the mark of a
 * truncation made after that record, truncate it again, so that the older
 * records replayed over a truncation on disk (applied, maybe never logged:
 * in flight at the power cut) do not come out mixed with it. Records after
 * the truncation are all still in the log (trims go in order), and are
 * replayed after. */
static int replay_retruncate(struct replay_ctx *rc, int fd)
{
	uint64_t size;
	struct stat st;
	char p[32];

	if (P.trust_file_stamps || !size_mark_covers(fd, rc->epoch, rc->lsn, &size))
		return 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size == size || size > (uint64_t)LLONG_MAX)
		return 0;
	vfs_proc_path(fd, p);
	if (truncate(p, (off_t)size) == 0)
		return 0;
	if (errno == EFBIG || errno == EINVAL) {
		/* a size no truncation can have made (a mark left by a server
		 * before presto_size_settle): not a failed record */
		static long tok;
		if (log_ratelimited(&tok))
			log_warn("replay of LSN %llu: a truncation mark of %llu bytes ignored",
				 (unsigned long long)rc->lsn, (unsigned long long)size);
		return 0;
	}
	return -errno;
}

static int replay_write(struct replay_ctx *rc, const plog_write *w)
{
	/* as WRITE answers it (NFS3ERR_FBIG): no such record is written */
	if (w->offset > (uint64_t)LLONG_MAX - w->data.data_len)
		return -EFBIG;
	int fd = resolve(rc, &w->file, 0, NULL);
	char p[32];

	if (fd < 0)
		return fd == -ESTALE ? 0 : fd;	/* removed later */
	if (P.trust_file_stamps && stamped(rc, fd)) {
		close(fd);
		return 0;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EBADF;	/* WRITEs are logged for regular files only */
	}
	vfs_proc_path(fd, p);
	/* bytes already there are not written again: a write changes the
	 * file's mtime, and a later change of its times (a SETATTR applied,
	 * in flight at the crash) would come out half undone */
	if (w->offset + w->data.data_len <= (uint64_t)st.st_size && w->data.data_len > 0 &&
	    w->data.data_len <= NFSD_MAX_IO) {
		int rfd = open(p, O_RDONLY | O_NOATIME | O_NONBLOCK | O_CLOEXEC);	/* no atime change either */
		char *cur = rfd >= 0 ? malloc(w->data.data_len) : NULL;
		bool same = cur && pread(rfd, cur, w->data.data_len, (off_t)w->offset) ==
					   (ssize_t)w->data.data_len &&
			    memcmp(cur, w->data.data_val, w->data.data_len) == 0;
		free(cur);
		if (rfd >= 0)
			close(rfd);
		if (same) {
			int e = replay_retruncate(rc, fd);
			if (e == 0)
				replay_stamp(rc, fd);
			close(fd);
			return e;
		}
	}
	int wfd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);	/* a regular file (above) */
	close(fd);
	if (wfd < 0)
		return -errno;
	ssize_t n = pwrite(wfd, w->data.data_val, w->data.data_len, (off_t)w->offset);
	int e = n < 0 ? -errno : (size_t)n != w->data.data_len ? -EIO : 0;
	if (e == 0)
		e = replay_retruncate(rc, wfd);
	if (e == 0)
		replay_stamp(rc, wfd);
	close(wfd);
	return e;
}

static int replay_setattr(struct replay_ctx *rc, const plog_setattr *s)
{
	int fd = resolve(rc, &s->obj, 0, NULL);
	struct stat st;

	if (fd < 0)
		return fd == -ESTALE ? 0 : fd;
	if (P.trust_file_stamps && stamped(rc, fd)) {
		close(fd);
		return 0;
	}
	int e = fstat(fd, &st) < 0 ? -errno : replay_attr(fd, &s->attr, S_ISLNK(st.st_mode));
	if (e == 0 && S_ISREG(st.st_mode))
		e = replay_retruncate(rc, fd);
	if (e == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
		replay_stamp(rc, fd);
	close(fd);
	return e;
}

/*
 * A re-created object is made under a temporary name in its directory, gets
 * its attributes there, and takes its own name only once the redirect from
 * the recorded handle to it is durable (rd_append). A replay killed between
 * the creation and the redirect must not leave the name taken: the retry
 * would take the record for applied, and every later record of the old
 * handle for one whose object was removed later (skipped: acknowledged data
 * lost). A temporary name is a function of the record, so that the retry
 * finds what the interrupted replay made, and keyed (under the handle key,
 * STATE_DIR/fh.key), so that no client can have made one: ".presto-replay-"
 * and 32 hex digits. It outlives the replay of its record only when the
 * process dies during it; the retry, which replays the same records, then
 * finishes the job.
 */
#define REPLAY_TMP_PREFIX ".presto-replay-"
#define REPLAY_TMP_SIZE (sizeof(REPLAY_TMP_PREFIX) + 32)

/* replay_tmp_name -- the temporary name of the object record c creates:
 * a keyed hash of the log's uuid, the record's epoch and LSN and the
 * recorded handle. The key is the MAC (fh_mac_of) of a kernel handle that
 * no filesystem gives out (type "PRTP", bytes a text), and is never shown:
 * the name is not the MAC of a handle. */
static int replay_tmp_name(const struct replay_ctx *rc, const plog_create *c,
			   char out[REPLAY_TMP_SIZE])
{
	static const char tag[] = "presto-nfsd replay temp names";
	struct fh_kernel k = { .type = 0x50525450, .len = sizeof(tag) - 1 };
	uint8_t key[FH_MAC], h[16], msg[16 + 4 + 8 + 4 + FH_KH_MAX];
	size_t n = 0;
	int e;

	_Static_assert(sizeof(tag) - 1 <= FH_KH_MAX, "tag fits a kernel handle");
	memcpy(k.bytes, tag, k.len);
	if ((e = fh_mac_of(c->dir.export_id, &k, key)) < 0)
		return e;
	uint32_t type = (uint32_t)c->result.type;
	unsigned len = c->result.bytes.bytes_len <= FH_KH_MAX ? c->result.bytes.bytes_len : FH_KH_MAX;
	memcpy(msg + n, P.uuid, 16);
	n += 16;
	memcpy(msg + n, &rc->epoch, 4);
	n += 4;
	memcpy(msg + n, &rc->lsn, 8);
	n += 8;
	memcpy(msg + n, &type, 4);
	n += 4;
	memcpy(msg + n, c->result.bytes.bytes_val, len);
	n += len;
	crypto_generichash(h, sizeof(h), msg, n, key, sizeof(key));
	memcpy(out, REPLAY_TMP_PREFIX, sizeof(REPLAY_TMP_PREFIX) - 1);
	hex(out + sizeof(REPLAY_TMP_PREFIX) - 1, h, sizeof(h));
	return 0;
}

/* replay_tmp_drop -- remove what the temporary name tmp holds in dirfd, if
 * anything: the object of a creation that failed (nothing durable leads to
 * it but a redirect, which rd_prune drops), or, when stray, one left by an
 * interrupted replay of a record now proved applied otherwise (a state no
 * sequence of this code leaves: said so). */
static void replay_tmp_drop(struct replay_ctx *rc, int dirfd, const char *tmp, bool stray)
{
	struct stat st;

	if (fstatat(dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (stray)
		log_warnx("replay of LSN %llu: removing %s, left by an interrupted replay of a "
			  "creation that is applied", (unsigned long long)rc->lsn, tmp);
	if (unlinkat(dirfd, tmp, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		log_warn("replay of LSN %llu: removing %s", (unsigned long long)rc->lsn, tmp);
}

/* replay_tmp_rename -- tmp takes the name name in dirfd, which must not
 * exist. Returns 0 or -errno (-EEXIST when it does). */
static int replay_tmp_rename(int dirfd, const char *tmp, const char *name)
{
	struct stat st;

	if (renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* a filesystem without RENAME_NOREPLACE: nothing else changes the
	 * tree while the log is replayed (no client is served yet) */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST;
	return renameat(dirfd, tmp, dirfd, name) < 0 ? -errno : 0;
}

/* replay_tmp_finish -- the object of record c is at tmp (made now, or by an
 * interrupted replay): set its attributes, make the redirect from the
 * recorded handle to it durable unless it is there already (an interrupted
 * replay may have saved it: compared by handle), then give it its name and
 * stamp the directory. An attribute that cannot be set does not stop the
 * rest (the object exists, as when it was first created; the error is
 * returned, so no stamp, and a retry finds the name holding the redirect's
 * target and sets the attributes again); any other failure removes the
 * object again, so that no temporary name outlives a replay that ran to
 * its end. */
static int replay_tmp_finish(struct replay_ctx *rc, const plog_create *c, int dirfd,
			     const char *tmp)
{
	struct fh_kernel old, now, red;
	int e, ea;
	int nfd = openat(dirfd, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (nfd < 0) {
		e = -errno;
		goto drop;
	}
	ea = replay_attr(nfd, &c->attr, (c->type & S_IFMT) == S_IFLNK);
	e = fh_of(nfd, "", &now, NULL);
	close(nfd);
	if (e < 0)
		goto drop;	/* no redirect could lead to it */
	kh_from_plog(&c->result, &old);
	if (!kh_eq(&old, &now) &&
	    !(presto_redirect(c->dir.export_id, &old, &red) == 0 && kh_eq(&red, &now))) {
		/* durable before the name is taken (above) */
		e = rd_add(c->dir.export_id, &old, &now, false, P.open_epoch);
		if (e == 0 && (e = rd_log(c->dir.export_id, &old, &now)) == -ENOSPC)
			e = rd_append(c->dir.export_id, &old, &now);
		if (e < 0)
			goto drop;
		CNT_ADD(rec_redirects, 1);
	}
	if ((e = replay_tmp_rename(dirfd, tmp, c->name)) < 0)
		goto drop;
	if (ea == 0)
		replay_stamp(rc, dirfd);
	return ea;
drop:
	replay_tmp_drop(rc, dirfd, tmp, false);
	return e;
}

static int replay_create(struct replay_ctx *rc, const plog_create *c)
{
	if (!name_ok(c->name) || ((c->type & S_IFMT) == S_IFLNK && !c->target))
		return -EINVAL;
	int dfd = resolve(rc, &c->dir, 0, NULL);
	char tmp[REPLAY_TMP_SIZE];
	struct stat st;
	int e = 0;

	if (dfd < 0)
		return dfd == -ESTALE ? 0 : dfd;	/* its directory went later */
	if ((e = replay_tmp_name(rc, c, tmp)) < 0)
		goto out;
	if (stamped(rc, dfd)) {
		replay_tmp_drop(rc, dfd, tmp, true);
		goto out;
	}
	if (fstatat(dfd, c->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* applied (maybe replaced later); if an interrupted replay
		 * re-created it (the name holds the object the recorded one
		 * redirects to, and the directory has no stamp for it), its
		 * attributes may not have been set: set them */
		struct fh_kernel want, red, cur;
		replay_tmp_drop(rc, dfd, tmp, true);
		kh_from_plog(&c->result, &want);
		if (presto_redirect(c->dir.export_id, &want, &red) == 0 &&
		    fh_of(dfd, c->name, &cur, NULL) == 0 && kh_eq(&cur, &red)) {
			int nfd = openat(dfd, c->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			e = nfd < 0 ? -errno : replay_attr(nfd, &c->attr, (c->type & S_IFMT) == S_IFLNK);
			if (nfd >= 0)
				close(nfd);
			if (e == 0)
				replay_stamp(rc, dfd);
		}
		goto out;
	}
	/* an interrupted replay made the object already: finish the job (before
	 * the test below, which its redirect, if saved, would pass) */
	if (fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		e = replay_tmp_finish(rc, c, dfd, tmp);
		goto out;
	}
	plog_obj res = { c->dir.export_id, c->result };
	int ofd = resolve(rc, &res, -1, NULL);
	if (ofd >= 0) {
		close(ofd);			/* applied, renamed away later */
		goto out;
	}
	if (ofd != -ESTALE) {
		/* not known to be absent (out of descriptors, a malformed
		 * result handle): making it again could duplicate it */
		e = ofd;
		goto out;
	}
	mode_t mode = c->mode & 07777;
	switch (c->type & S_IFMT) {
	case S_IFDIR:
		e = mkdirat(dfd, tmp, mode);
		break;
	case S_IFLNK:
		e = symlinkat(c->target, dfd, tmp);
		break;
	default:
		e = mknodat(dfd, tmp, (c->type & S_IFMT) | mode, makedev(c->rdev_major, c->rdev_minor));
		break;
	}
	if (e < 0) {
		e = -errno;
		goto out;
	}
	e = replay_tmp_finish(rc, c, dfd, tmp);
out:
	close(dfd);
	return e;
}

static int replay_remove(struct replay_ctx *rc, const plog_remove *r)
{
	if (!name_ok(r->name))
		return -EINVAL;
	int dfd = resolve(rc, &r->dir, 0, NULL);
	int e = 0;

	if (dfd < 0)
		return dfd == -ESTALE ? 0 : dfd;
	if (!stamped(rc, dfd) && same_object(r->dir.export_id, dfd, r->name, &r->victim)) {
		if (unlinkat(dfd, r->name, r->isdir ? AT_REMOVEDIR : 0) < 0)
			e = -errno;
		else
			replay_stamp(rc, dfd);
	}
	close(dfd);
	return e;
}

static int replay_rename(struct replay_ctx *rc, const plog_rename *r)
{
	if (!name_ok(r->fromname) || !name_ok(r->toname))
		return -EINVAL;
	/* no client can move an object from one export into another
	 * (NFS3ERR_XDEV): a record that does, this appliance did not write */
	if (r->fromdir.export_id != r->todir.export_id)
		return -EXDEV;
	int fdir = resolve(rc, &r->fromdir, 0, NULL);
	int e = 0;

	if (fdir < 0)
		return fdir == -ESTALE ? 0 : fdir;
	int tdir = resolve(rc, &r->todir, 1, NULL);
	if (tdir < 0) {
		close(fdir);
		return tdir == -ESTALE ? 0 : tdir;
	}
	int done = 1;	/* 1: nothing to change; else the system call's result */
	if (r->same_file) {
		/* both names were links to one file: rename(2) did nothing */
	} else if (stamped(rc, fdir) || stamped(rc, tdir)) {
		/* applied */
	} else if (same_object(r->fromdir.export_id, fdir, r->fromname, &r->source)) {
		/* not applied; or applied, and an earlier replayed LINK brought
		 * the old name back: rename(2) would do nothing between two
		 * links of one file, so finish the move by hand */
		done = same_object(r->todir.export_id, tdir, r->toname, &r->source)
			       ? unlinkat(fdir, r->fromname, 0)
			       : renameat(fdir, r->fromname, tdir, r->toname);
	} else if (r->replaced && same_object(r->todir.export_id, tdir, r->toname, &r->target) &&
		   !same_object(r->todir.export_id, tdir, r->toname, &r->source)) {
		/* applied already, but an earlier replayed record brought back
		 * the object this rename had replaced: remove it again */
		done = unlinkat(tdir, r->toname, r->target_isdir ? AT_REMOVEDIR : 0);
	}
	if (done < 0) {
		e = -errno;
	} else if (done == 0) {
		replay_stamp(rc, fdir);
		replay_stamp(rc, tdir);
	}
	close(fdir);
	close(tdir);
	return e;
}

static int replay_link(struct replay_ctx *rc, const plog_link *l)
{
	struct stat st;
	char p[32];
	int e = 0;
	if (!name_ok(l->name))
		return -EINVAL;
	if (l->file.export_id != l->dir.export_id)
		return -EXDEV;	/* as a RENAME's (NFS3ERR_XDEV) */
	int dfd = resolve(rc, &l->dir, 1, NULL);

	if (dfd < 0)
		return dfd == -ESTALE ? 0 : dfd;
	if (stamped(rc, dfd) || fstatat(dfd, l->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		close(dfd);
		return 0;
	}
	int ffd = resolve(rc, &l->file, 0, NULL);
	if (ffd >= 0) {
		vfs_proc_path(ffd, p);
		if (linkat(AT_FDCWD, p, dfd, l->name, AT_SYMLINK_FOLLOW) < 0)
			e = -errno;
		else
			replay_stamp(rc, dfd);
		close(ffd);
	} else if (ffd != -ESTALE) {
		e = ffd;	/* not "removed later": the link is not made */
	}
	close(dfd);
	return e;
}

static int replay_cb(void *arg, const struct nvlog_rec *rec)
{
	struct replay_ctx *rc = arg;
	plog_rec r;
	int e = 0;

	rc->last_lsn = rec->lsn;
	rc->lsn = rec->lsn;
	rc->epoch = rec->epoch;	/* what replay stamps, it stamps as of this record */
	CNT_ADD(rec_records, 1);
	CNT_ADD(rec_bytes, rec->len);
	if (!plog_decode(rec, &r, rc->macs, &rc->nmacs)) {
		CNT_ADD(rec_errors, 1);
		nostamp_after(rc, false);
		log_warnx("NVRAM log record LSN %llu (type %u, %u bytes at offset %llu) does not decode "
			  "(inspect it with presto-log dump)",
			  (unsigned long long)rec->lsn, rec->type, rec->len,
			  (unsigned long long)rec->offset);
		return 0;
	}
	if (r.op.type == PLOG_REDIRECT) {
		/* in the table already (rd_scan) */
		xdr_free(XDRPROC(xdr_plog_rec), (char *)&r);
		return 0;
	}
	if (r.op.type == PLOG_DRC)
		goto drc;	/* only the cache entry (drc_relog) */
	uint32_t ids[2];
	rec_exports(&r.op, ids);
	if (!rc->apply) {
		for (int i = 0; i < 2; i++)
			if (!xtab_by_id(rc->xt, ids[i]))
				rc->unexported = true;
	} else {
		for (int i = 0; i < 2; i++) {
			const struct xexport *xe = xtab_by_id(rc->xt, ids[i]);
			rc->cur_dev[i] = xe ? xe->dev : 0;
		}
		switch (r.op.type) {
		case PLOG_WRITE:
			e = replay_write(rc, &r.op.plog_op_u.write);
			break;
		case PLOG_SETATTR:
			e = replay_setattr(rc, &r.op.plog_op_u.setattr);
			break;
		case PLOG_CREATE:
			e = replay_create(rc, &r.op.plog_op_u.create);
			break;
		case PLOG_REMOVE:
			e = replay_remove(rc, &r.op.plog_op_u.remove);
			break;
		case PLOG_RENAME:
			e = replay_rename(rc, &r.op.plog_op_u.rename);
			break;
		case PLOG_LINK:
			e = replay_link(rc, &r.op.plog_op_u.link);
			break;
		case PLOG_REDIRECT:
		case PLOG_DRC:
			break;	/* returned above */
		}
		if (e < 0) {
			CNT_ADD(rec_errors, 1);
			nostamp_after(rc, true);
			errno = -e;
			log_warn("replay of LSN %llu (type %u)", (unsigned long long)rec->lsn, rec->type);
		}
	}
	/* a retransmission gets the original reply, unless the operation
	 * could not be replayed (then the client must not be told it was done) */
drc:
	if (e == 0 && r.drc_key.drc_key_len == sizeof(struct drc_key) && r.reply.reply_len >= 4) {
		struct drc_key k;
		memcpy(&k, r.drc_key.drc_key_val, sizeof(k));
		drc_insert(&k, (const uint8_t *)r.reply.reply_val, r.reply.reply_len);
	}
	xdr_free(XDRPROC(xdr_plog_rec), (char *)&r);
	return 0;
}

int presto_open(const struct presto_conf *pc, struct xtab *xt)
{
	struct nvlog_opts o;
	struct nvlog_info info;
	int rc;

	P.conf = *pc;
	if (!P.conf.full_wait_ms)
		P.conf.full_wait_ms = 2000;
	if (!P.conf.destage_age_ms)
		P.conf.destage_age_ms = 5000;
	if (!P.conf.high_water_pct)
		P.conf.high_water_pct = 50;
	for (int i = 0; i < NSTRIPES; i++)
		pthread_mutex_init(&P.stripes[i], NULL);
	if (!pc->nvram) {
		randombytes_buf(P.verf, sizeof(P.verf));
		P.state = "DOWN";
		return 0;
	}
	snprintf(P.nvram_path, sizeof(P.nvram_path), "%s", pc->nvram);
	P.conf.nvram = P.nvram_path;
	memset(&o, 0, sizeof(o));
	o.size = pc->nvram_size;
	o.full_wait_ms = P.conf.full_wait_ms;
	rc = nvlog_open(pc->nvram, &o, &P.log);
	if (rc == -EBUSY) {
		log_warnx("NVRAM log %s is in use by another process (another presto-nfsd, or "
			  "presto-log format): refusing to start", pc->nvram);
		P.state = "ERROR";
		return rc;
	}
	if (rc == -EUCLEAN) {
		char why[512];
		nvlog_why_not(pc->nvram, why, sizeof(why));
		log_warnx("NVRAM log %s is not a presto log (%s): refusing to start; inspect it "
			  "with presto-log dump, or format it with presto-log format", pc->nvram, why);
		P.state = "ERROR";
		return rc;
	}
	if (rc < 0) {
		errno = -rc;
		log_warn("NVRAM log %s", pc->nvram);
		P.state = "ERROR";
		return rc;
	}
	nvlog_info(P.log, &info);
	if (info.read_only) {
		log_warnx("NVRAM log %s is corrupt at LSN %llu (offset %llu: %s): refusing to serve; "
			  "inspect it with presto-log dump",
			  pc->nvram, (unsigned long long)info.open_scan.bad_lsn,
			  (unsigned long long)info.open_scan.bad_offset,
			  info.open_scan.why ? info.open_scan.why : "?");
		nvlog_close(P.log, false);
		P.log = NULL;
		P.state = "ERROR";
		return -EIO;
	}
	memcpy(P.verf, &info.epoch, 8);
	memcpy(P.uuid, info.uuid, 16);
	P.fast_persist = info.kind == NVLOG_KIND_PMEM || info.kind == NVLOG_KIND_EMULATED;
	bool untrusted = false, pending = replay_pending(&untrusted);
	P.trust_file_stamps = !info.boot_id_changed && !(pending && untrusted);
	P.state = "RECOVERING";
	rd_load(xt);
	marks_load();
	if (pending && info.head_lsn < info.tail_lsn && (rc = replay_mark(false, false)) < 0) {
		errno = -rc;	/* a crash between the last trim and the unlink */
		log_warn("%s/replay-pending", P.conf.state_dir);
	}

	P.open_epoch = (uint32_t)info.epoch;
	P.open_head_lsn = info.head_lsn;
	if (info.head_lsn >= info.tail_lsn) {
		struct replay_ctx rctx = { .xt = xt };
		struct nvlog_scan_report rep;
		uint64_t t0 = rpc_now_ns();

		rctx.apply = pc->replay != PRESTO_REPLAY_AUTO || info.boot_id_changed || pending;
		P.rec_replayed = rctx.apply;
		log_info("NVRAM log %s holds LSN %llu..%llu: %s", pc->nvram,
			 (unsigned long long)info.tail_lsn, (unsigned long long)info.head_lsn,
			 !rctx.apply ? "the page cache survived; syncing it"
			 : pending && !info.boot_id_changed && pc->replay == PRESTO_REPLAY_AUTO
				     ? "an earlier replay did not finish; replaying again"
				     : "replaying onto the backing filesystem");
		if (rctx.apply && (rc = replay_mark(true, P.trust_file_stamps)) < 0) {
			errno = -rc;
			log_warn("%s/replay-pending", P.conf.state_dir);
			P.state = "ERROR";
			return rc;
		}
		rc = rd_scan();
		if (rc == 0)
			rc = nvlog_scan(P.log, replay_cb, &rctx, &rep);
		if (rc < 0) {
			errno = -rc;
			log_warn("scanning the NVRAM log");
			P.state = "ERROR";
			return rc;
		}
		if (P.rec_errors > 0 && pc->replay != PRESTO_REPLAY_FORCE) {
			/* nothing acknowledged is dropped without an operator */
			log_warnx("recovery: %llu of %llu record(s) could not be replayed (see above); "
				  "the NVRAM log keeps them and presto-nfsd does not start. Mount "
				  "every export's filesystem and restore the exports, then start "
				  "again; or start once with --replay=force to discard them",
				  (unsigned long long)P.rec_errors, (unsigned long long)P.rec_records);
			P.state = "ERROR";
			return -EIO;
		}
		if (rctx.unexported) {
			/* the page cache survived, but some records are of an
			 * export no longer in the table: its filesystem is
			 * synced by no syncfs below (unmounted, it was synced) */
			log_info("recovery: the log holds records of an export no longer exported; "
				 "syncing every filesystem");
			sync();
		}
		rc = presto_sync_all();
		if (rc < 0) {
			P.state = "ERROR";
			return rc;
		}
		/* redirects of objects removed later go only now: until the
		 * removal is durable, a retry of this replay needs them to
		 * tell the re-created object from another */
		size_t before = P.nrd;
		rd_prune(xt);
		if ((P.nrd > 0 || before > 0) && (rc = rd_save()) < 0) {
			errno = -rc;
			log_warn("saving %s/redirects", P.conf.state_dir);
			P.state = "ERROR";
			return rc;
		}
		/* with the redirects this replay logged (rd_log): the file
		 * holds them now; not the DRC's records logged after them */
		struct nvlog_info end;
		nvlog_info(P.log, &end);
		bool room = true;
		if ((rc = drc_relog(&room)) < 0) {
			P.state = "ERROR";
			return rc;
		}
		if (rep.records > 0 && (rc = nvlog_trim(P.log, end.head_lsn)) < 0) {
			errno = -rc;
			log_warn("trimming the NVRAM log after recovery");
			P.state = "ERROR";
			return rc;
		}
		if (!room && (rc = drc_relog(&room)) < 0) {
			P.state = "ERROR";
			return rc;
		}
		if ((rc = replay_mark(false, false)) < 0) {
			errno = -rc;
			log_warn("%s/replay-pending", P.conf.state_dir);
			P.state = "ERROR";
			return rc;
		}
		P.rec_ns = rpc_now_ns() - t0;
		log_info("recovery: %llu record(s), %llu byte(s), %llu proved applied by their "
			 "directories' stamps, %llu redirect(s), %llu error(s) in %.1f ms",
			 (unsigned long long)P.rec_records, (unsigned long long)P.rec_bytes,
			 (unsigned long long)rctx.stamped_skips, (unsigned long long)P.rec_redirects,
			 (unsigned long long)P.rec_errors, (double)P.rec_ns / 1e6);
	}
	if ((rc = presto_marks_update(xt, true)) < 0) {
		errno = -rc;
		log_warn("%s/export-marks", P.conf.state_dir);
		P.state = "ERROR";
		return rc;
	}
	/* a log formatted (presto-log) smaller than presto-nfsd would: its
	 * records cannot hold a WRITE of wtmax bytes, which would be applied
	 * and then not logged. Refused once recovery has emptied it. */
	size_t need = NFSD_MAX_IO + 4096;
	if (nvlog_max_payload(P.log) < need) {
		log_warnx("NVRAM log %s is too small: a record holds at most %zu bytes, a WRITE of "
			  "%u bytes needs %zu. Format it anew, 8 MiB or more (presto-log format "
			  "--force PATH SIZE; it holds no change now, at most the duplicate "
			  "request cache's entries)",
			  pc->nvram, nvlog_max_payload(P.log), (unsigned)NFSD_MAX_IO, need);
		nvlog_close(P.log, true);
		P.log = NULL;
		P.state = "ERROR";
		return -EINVAL;
	}
	/* this run's stamps: records carry the low 32 bits of the boot epoch */
	P.stamp_epoch = (uint32_t)info.epoch;
	P.held = pc->no_destage;
	P.state = "UP";
	rc = pthread_create(&P.destager, NULL, destager_main, NULL);
	if (rc) {
		P.state = "ERROR";
		return -rc;
	}
	P.destager_running = true;
	return 0;
}

void presto_close(void)
{
	if (!P.log)
		return;
	presto_stamps_flush();
	/* SIGTERM: flush what the log holds, mark it clean */
	int rc = presto_flush();
	pthread_mutex_lock(&P.d_lock);
	P.stop = true;
	pthread_cond_broadcast(&P.d_cond);
	pthread_cond_broadcast(&P.d_done);
	pthread_mutex_unlock(&P.d_lock);
	if (P.destager_running)
		pthread_join(P.destager, NULL);
	P.destager_running = false;
	struct nvlog_stats s;
	nvlog_stats(P.log, &s);
	bool empty = s.head_lsn < s.tail_lsn;
	if (rc < 0 || !empty)
		log_warnx("closing the NVRAM log with live records (LSN %llu..%llu): they will be "
			  "recovered at the next start",
			  (unsigned long long)s.tail_lsn, (unsigned long long)s.head_lsn);
	nvlog_close(P.log, rc == 0 && empty);
	P.log = NULL;
	P.state = "DOWN";
	pthread_mutex_lock(&R.lock);
	for (unsigned i = 0; i < R.n; i++)
		xtab_put(R.v[i]);
	free(R.v);
	R.v = NULL;
	R.n = R.cap = 0;
	pthread_mutex_unlock(&R.lock);
	pthread_rwlock_wrlock(&P.rd_lock);
	free(P.rd);
	P.rd = NULL;
	P.nrd = P.rd_cap = 0;
	free(P.rd_idx);
	P.rd_idx = NULL;
	P.rd_idx_cap = 0;
	pthread_rwlock_unlock(&P.rd_lock);
	pthread_mutex_lock(&M.lock);
	free(M.v);
	M.v = NULL;
	M.n = 0;
	pthread_mutex_unlock(&M.lock);
	pthread_mutex_lock(&P.sw_lock);
	free(P.off_ids);
	P.off_ids = NULL;
	P.off_cap = 0;
	__atomic_store_n(&P.noff, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&P.sw_lock);
}

/* ---- statistics ---- */

#define LD(f) __atomic_load_n(&P.f, __ATOMIC_RELAXED)

void presto_get_stats(struct presto_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->log_open = P.log != NULL;
	out->state = __atomic_load_n(&P.state, __ATOMIC_RELAXED);
	out->nvram_path = P.conf.nvram ? P.nvram_path : "";
	if (P.log) {
		struct nvlog_info info;
		struct nvlog_stats s;
		nvlog_info(P.log, &info);
		nvlog_stats(P.log, &s);
		out->nvram_kind = info.kind_name;
		out->nvram_size = info.size;
		out->used_bytes = s.used_bytes;
		out->area_bytes = s.area_bytes;
		out->oldest_age_ns = s.oldest_age_ns;
		out->appends = s.appends;
		out->append_bytes = s.append_bytes;
		out->persists = s.persists;
		out->persist_errors = s.persist_errors;
		memcpy(out->batch_hist, s.batch_hist, sizeof(out->batch_hist));
		/* waits for room before applying (presto_begin) and inside the
		 * log's append */
		out->full_waits = s.full_waits + LD(space_waits);
		out->full_timeouts = s.full_timeouts;
	} else {
		out->nvram_kind = "none";
	}
	out->jukebox = LD(jukebox);
	out->destage_runs = LD(destage_runs);
	out->destage_errors = LD(destage_errors);
	out->destage_ns_total = LD(destage_ns_total);
	out->destage_ns_last = LD(destage_ns_last);
	out->destage_bytes = LD(destage_bytes);
	out->commits_avoided = LD(commits_avoided);
	out->through_appends = LD(through_appends);
	out->stamps_coalesced = LD(stamps_coalesced);
	out->log_fallbacks = LD(log_fallbacks);
	out->wait_ns_total = LD(wait_ns_total);
	out->recovery_records = LD(rec_records);
	out->recovery_bytes = LD(rec_bytes);
	out->recovery_ns = LD(rec_ns);
	out->recovery_redirects = LD(rec_redirects);
	out->recovery_errors = LD(rec_errors);
	out->recovery_replayed = P.rec_replayed;
	out->held = P.held;
}

void presto_reset_stats(void)
{
	if (P.log)
		nvlog_stats_reset(P.log);
	__atomic_store_n(&P.jukebox, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.space_waits, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.destage_runs, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.destage_errors, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.destage_ns_total, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.destage_bytes, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.commits_avoided, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.through_appends, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.stamps_coalesced, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.log_fallbacks, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&P.wait_ns_total, 0, __ATOMIC_RELAXED);
}
