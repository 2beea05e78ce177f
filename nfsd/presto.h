/*
 * presto.h -- Presto acceleration: the NVRAM log in front of the backing
 * filesystem (design.md "How a modifying request flows").
 *
 * With presto on for an export, a modifying procedure
 *   1. locks the stripes of every object it touches (presto_begin), after
 *      waiting, bounded, for room in the log (else NFS3ERR_JUKEBOX);
 *   2. applies itself to the backing filesystem without any fsync;
 *   3. describes itself in a log record (presto_set_record: operation,
 *      arguments, outcome such as the new object's kernel handle);
 * then dispatch encodes the reply, appends the record, with the reply and
 * its DRC key for the procedures the DRC keeps (presto_commit: the append
 * happens under the same stripe locks as the apply, so for any two
 * operations on a common object log order equals apply order), unlocks,
 * waits for the group commit (presto_wait) and only then sends the reply.
 *
 * The destager thread makes the backing filesystems durable (syncfs) and
 * trims the log up to the LSN that is now durable elsewhere. At start-up,
 * presto_open replays live records when the machine may have lost unsynced
 * writes (boot id changed, or --replay=always), rebuilds the duplicate
 * request cache from them, makes everything durable and trims, before any
 * client is served.
 */
#ifndef PRESTO_PRESTO_H
#define PRESTO_PRESTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nfsd/drc.h"
#include "plog.h"

struct xexport;
struct xtab;

/* presto_marks_update -- mark every export's root (xattr) and remember the
 * marks in STATE_DIR/export-marks: a replay goes only onto roots that carry
 * their mark. Called at start, after recovery, with adopt (the log is empty:
 * every root as it is now), and at every exports reload without (an export
 * already known keeps its remembered mark: the log may hold its records).
 * Returns 0 or -errno. */
int presto_marks_update(const struct xtab *xt, bool adopt);

/* auto: replay after a reboot (or an unfinished replay); always: as after a
 * power cut; force: always, and trim even records that could not be
 * replayed (an operator's decision, after reading why) */
enum presto_replay { PRESTO_REPLAY_AUTO, PRESTO_REPLAY_ALWAYS, PRESTO_REPLAY_FORCE };

struct presto_conf {
	const char *nvram;		/* log path; NULL: no log, every export presto off */
	size_t nvram_size;		/* format size at first use */
	enum presto_replay replay;
	bool no_destage;		/* hold the destager (until released or full) */
	unsigned destage_age_ms;	/* oldest record age that triggers destage (5000) */
	unsigned high_water_pct;	/* occupancy that triggers destage (50) */
	unsigned full_wait_ms;		/* bound on waiting for log space (JUKEBOX after) */
	const char *state_dir;
};

/* Maximum objects one operation locks (RENAME: two directories, source,
 * target). */
#define PRESTO_MAX_OBJS 4

/* presto_txn -- one modifying call's passage through the log. Lives in the
 * call; zero-initialised means "not logged". The operation's strings and
 * kernel handles point into the txn's own storage; WRITE data points into
 * the call's decoded arguments, which outlive presto_commit. */
struct presto_txn {
	bool active;			/* stripes locked */
	bool has_op;			/* the filesystem changed: a record is due */
	bool logged;			/* appended: wait for lsn before replying */
	bool through;			/* presto off: logged, and flushed by the
					 * call as well (set after presto_begin) */
	unsigned nstripes;
	unsigned stripes[PRESTO_MAX_OBJS];
	plog_op op;
	char names[2][PLOG_NAME_MAX + 1];
	char khs[PRESTO_MAX_OBJS][PLOG_KH_MAX];
	uint8_t macs[PRESTO_MAX_OBJS][PLOG_MAC_SIZE];	/* of khs (presto_mac) */
	char *target;			/* symlink target (owned) */
	/* objects to stamp: a held descriptor cache entry, or else a dup'ed
	 * (owned) O_PATH descriptor */
	struct fdcache_ref *stamprefs[PRESTO_MAX_OBJS];
	int stampfds[PRESTO_MAX_OBJS];
	dev_t stampdev[PRESTO_MAX_OBJS];
	ino_t stampino[PRESTO_MAX_OBJS];
	bool stampdir[PRESTO_MAX_OBJS];	/* a directory (its stamp may wait:
					 * presto_stamps_flush) */
	unsigned nstamps;
	uint64_t lsn;
	uint64_t claimed;		/* log bytes claimed (space_reserve) */
	uint64_t waited_ns;		/* presto_wait's wait for a group commit */
};

/* presto_open -- open (format at first use) the log, recover, start the
 * destager. xt: the exports in force (for replay). Returns 0 or -errno with
 * a message logged. */
int presto_open(const struct presto_conf *pc, struct xtab *xt);
/* presto_close -- flush everything (destage), mark the log clean, close. */
void presto_close(void);
/* presto_enabled -- whether modifications in export xe are accelerated:
 * answered once their record is durable, without waiting for the disk (the
 * log is open, the export's option and the run-time switch agree). */
bool presto_enabled(const struct xexport *xe, bool export_opt);
/* presto_logs -- whether modifications in export xe are logged at all: the
 * log is open and the export's root carries its mark. Presto off (nopresto,
 * a client line's option, or switched off) still logs, and flushes before
 * the reply too: a change written through but not logged would be rolled
 * back by a replay of the object's older records still in the log. */
bool presto_logs(const struct xexport *xe);
/* presto_unmarked -- whether export id's root took no mark (no extended
 * attributes, or read-only): presto is off for it whatever the switches. */
bool presto_unmarked(uint32_t export_id);
/* presto_set_exports -- the run-time switch for n exports by id (on: true).
 * Turning them off flushes the log first, once. No bound on how many are
 * off. Returns 0 or -errno (then none was switched). */
int presto_set_exports(const uint32_t *ids, size_t n, bool on);
/* presto_switches_prune -- forget the switches of exports not in xt (a
 * reload dropped them: one added again later starts with presto on). */
void presto_switches_prune(const struct xtab *xt);
/* presto_write_verf -- the write verifier: the log's boot epoch (or a random
 * value per start without a log), with its top bit flipped for a call that
 * ran with presto off (logged: false). A WRITE answered UNSTABLE with presto
 * off is in no log: a COMMIT that presto on answers without a sync (the
 * export switched on since) must not match its verifier, so that the client
 * sends the data again. Both come from the mode the call really ran in. */
void presto_write_verf(uint8_t out[8], bool logged);

/* presto_begin -- lock the stripes of the objects (dev, ino) and make sure
 * the log has room for about est_bytes. Returns 0, or -EAGAIN when the log
 * stayed full past the bound (the caller answers NFS3ERR_JUKEBOX without
 * applying anything). */
int presto_begin(struct presto_txn *t, const dev_t *devs, const ino_t *inos, unsigned n,
		 size_t est_bytes);
/* presto_begin_nowait -- presto_begin for the event loop thread: never
 * waits. Returns -EWOULDBLOCK (nothing locked) when it would have to: a
 * stripe is held by another call, the log is near full, or a persist of this
 * log is an msync rather than CPU work; the call then goes to a worker. */
int presto_begin_nowait(struct presto_txn *t, const dev_t *devs, const ino_t *inos, unsigned n,
			size_t est_bytes);
/* presto_dir_hold -- hold the stripe of directory (dev, ino) while a
 * LOOKUP or READDIRPLUS hands out handles of its entries, so that none is
 * handed out between a CREATE-like call's apply and its append (a client
 * could otherwise WRITE the new object and log that WRITE before the
 * record that creates it: a replay would skip the WRITE, then create the
 * object empty). nowait (the loop thread): -EWOULDBLOCK instead of
 * waiting. Fills *stripe for presto_dir_release. */
int presto_dir_hold(dev_t dev, ino_t ino, bool nowait, unsigned *stripe);
void presto_dir_release(unsigned stripe);
/* presto_release_gen -- how many times threads other than the loop have
 * released stripes. Read on the loop before a call's first stat of an
 * object and again once the call holds the object's stripe: the same count
 * says that no worker changed anything in between, so that stat is as good
 * as one taken under the stripe. */
uint64_t presto_release_gen(void);
/* presto_mac -- the handle MAC (fh.h) of the kernel handle in t's slot: the
 * record carries those of its plog_obj (slots 0 and 1). */
void presto_mac(struct presto_txn *t, unsigned slot, const uint8_t *mac);
/* presto_kh -- fill *dst with kernel handle kh, stored in t's slot. */
struct fh_kernel;
void presto_kh(struct presto_txn *t, unsigned slot, plog_kh *dst, const struct fh_kernel *kh);
/* presto_stamp -- a directory or regular file (O_PATH descriptor fd, from
 * descriptor cache entry ref if not NULL; its stat is st) the operation
 * changes: once the record is appended, it is stamped with the record's LSN
 * (see presto.c, "Applied stamps"). Other kinds of objects are not
 * stamped. */
struct stat;
struct fdcache_ref;
void presto_stamp(struct presto_txn *t, int fd, struct fdcache_ref *ref, const struct stat *st);
/* presto_stamps_flush -- set the directory stamps the event loop's calls
 * left pending (presto.c, "Deferred directory stamps"). The loop calls it
 * at the end of each batch, before it sends the batch's replies. */
void presto_stamps_flush(void);
/* presto_stamps_settle -- set the pending directory stamps of the objects
 * whose stripes t holds: a RENAME or LINK calls it before it changes
 * anything. */
void presto_stamps_settle(struct presto_txn *t);
/* presto_prestamp -- before a truncation of regular file fd to size, which
 * older records must not be replayed over: stamp it with the last LSN
 * appended, and mark it (trusted.presto.size) with that LSN and the size, so
 * that a replay after a reboot, which trusts no file stamp, truncates it
 * again after those records. The caller holds its stripe, so every record of
 * it up to there is applied. */
void presto_prestamp(struct presto_txn *t, int fd, bool o_path, uint64_t size);
/* presto_size_settle -- after the truncation presto_prestamp marked, made
 * or not (still under the stripe): a file that did not take the size loses
 * the mark, or a replay after a reboot would make the refused truncation.
 * Leaves the thread as root. */
void presto_size_settle(struct presto_txn *t, int fd, uint64_t size);
/* presto_name -- a NUL-terminated copy of name in t's name slot. */
char *presto_name(struct presto_txn *t, unsigned slot, const char *name);
/* presto_commit -- append t's record, with the reply when a DRC key is
 * given (only the DRC uses it), then unlock. Returns 0, or -errno when the
 * record could not be appended: the caller must then make the operation
 * durable itself (presto_sync_unlogged). */
int presto_commit(struct presto_txn *t, const struct drc_key *key, const uint8_t *reply,
		  size_t reply_len);
/* presto_wait -- wait until t's record is durable. Returns 0 or -EIO. */
int presto_wait(struct presto_txn *t);
/* presto_sync_all -- syncfs every exported filesystem (the fallback when a
 * record cannot be logged), and those of the tables retired by
 * presto_retire. Returns 0 or -errno. */
int presto_sync_all(void);
/* presto_sync_unlogged -- the fallback of a change whose record could not
 * be appended: presto_sync_all, then trim every record appended so far.
 * Older records of the changed objects must not stay in the log: a replay
 * after a power cut would apply them over the change. Returns 0 or -errno. */
int presto_sync_unlogged(void);
/* presto_retire -- a reload is about to install cur in place of old (call
 * it before xtab_install): takes the caller's reference to old, and keeps
 * old when one of its filesystems is not in cur (a dropped export, a path
 * now on another filesystem) until a sync that starts once no call uses it
 * covers its records: presto_sync_all's, or the idle destager's own;
 * else releases it. */
struct xtab;
void presto_retire(struct xtab *old, const struct xtab *cur);

/* presto_syncing -- whether a syncfs of an exported filesystem is in
 * progress (a destage): changes to it may wait for the journal meanwhile. */
bool presto_syncing(void);
/* presto_sync_short -- the last destage took under 50 ms: a change that
 * waits for this one's journal commit on the event loop thread holds it
 * about as long, at most. */
bool presto_sync_short(void);

/* presto_flush -- destage now and wait until the log is empty up to what
 * was appended when called. Returns 0 or -errno. */
int presto_flush(void);
/* presto_hold -- hold (true) or release the destager. */
void presto_hold(bool hold);

/* presto_redirect -- the kernel handle an old handle now stands for, when
 * replay had to re-create its object. Returns 0 and fills new_kh, or
 * -ENOENT. */
int presto_redirect(uint32_t export_id, const struct fh_kernel *old_kh, struct fh_kernel *new_kh);

/* Statistics of the log, the destager and recovery, for the CLI and the
 * admin daemon. */
struct presto_stats {
	bool log_open;
	const char *state;		/* "UP", "DOWN", "RECOVERING", "ERROR" */
	const char *nvram_path;
	const char *nvram_kind;		/* "pmem", "emulated", "msync" */
	uint64_t nvram_size;
	uint64_t used_bytes, area_bytes;
	uint64_t oldest_age_ns;
	uint64_t appends, append_bytes, persists, persist_errors;
	uint64_t batch_hist[12];
	uint64_t full_waits, full_timeouts, jukebox;
	uint64_t destage_runs, destage_errors, destage_ns_total, destage_ns_last;
	uint64_t destage_bytes;		/* log bytes trimmed after a destage */
	uint64_t commits_avoided;	/* UNSTABLE writes answered FILE_SYNC, COMMITs answered at once */
	uint64_t stamps_coalesced;	/* directory stamps of the loop's calls a later
					 * one of the same batch took over */
	uint64_t through_appends;	/* records of calls with presto off (flushed too) */
	uint64_t log_fallbacks;		/* records that could not be appended (synced instead) */
	uint64_t recovery_records, recovery_bytes, recovery_ns, recovery_redirects;
	uint64_t recovery_errors;
	bool recovery_replayed;
	bool held;
	uint64_t wait_ns_total;		/* time calls spent waiting for persists */
};
void presto_get_stats(struct presto_stats *out);
void presto_reset_stats(void);
void presto_count_commit_avoided(void);

#endif
