/*
 * fdcache.h -- a cache of O_PATH descriptors by file handle, so that the
 * common call (GETATTR, LOOKUP, READ, WRITE on a handle used a moment ago)
 * skips open_by_handle_at. Entries are reference counted: a descriptor stays
 * open while a call uses it, whatever the cache evicts meanwhile.
 *
 * Each entry may also keep a read and a write descriptor of a regular file
 * (fdcache_data_fd), so that READ and WRITE open nothing.
 *
 * An O_PATH descriptor keeps its inode alive after the last name is gone, so
 * a cached descriptor whose inode has no link left means "stale": callers
 * check st_nlink and forget the entry (fdcache_forget).
 */
#ifndef PRESTO_FDCACHE_H
#define PRESTO_FDCACHE_H

#include <stdint.h>

#include "nfsd/fh.h"

struct fdcache_ref;

/* fdcache_init -- size the cache (entries); 0 disables it. */
void fdcache_init(unsigned entries);
/* fdcache_get -- an O_PATH descriptor of kh in export export_id, opened with
 * mount_fd when not cached. Returns the descriptor (valid until
 * fdcache_put(*ref)) or -errno. */
int fdcache_get(uint32_t export_id, const struct fh_kernel *kh, int mount_fd, struct fdcache_ref **ref);
void fdcache_put(struct fdcache_ref *ref);
/* fdcache_hold -- one more reference to ref (dropped with fdcache_put);
 * returns ref. */
struct fdcache_ref *fdcache_hold(struct fdcache_ref *ref);
/* fdcache_fd -- ref's O_PATH descriptor. */
int fdcache_fd(const struct fdcache_ref *ref);
/* fdcache_forget -- drop the entry of ref (still valid until put). */
void fdcache_forget(struct fdcache_ref *ref);
/* fdcache_data_fd -- a descriptor for reading (O_RDONLY) or writing
 * (O_WRONLY) the regular file of ref, opened by root and kept with the entry
 * (not to be closed by the caller). The caller has checked the caller's
 * permission. Returns the descriptor or -errno. */
int fdcache_data_fd(struct fdcache_ref *ref, int flags);
/* fdcache_drop -- forget the entry of kh if cached (its object lost a name:
 * do not keep a deleted inode alive in the cache). */
void fdcache_drop(uint32_t export_id, const struct fh_kernel *kh);
/* fdcache_close_later -- close fd on the reaper thread. The last close of
 * an unlinked inode evicts it, and eviction waits for any writeback of its
 * pages that a destage started: a REMOVE must not wait for that disk I/O. */
void fdcache_close_later(int fd);
/* fdcache_stop_reaper -- close what is queued and stop the reaper. */
void fdcache_stop_reaper(void);
/* fdcache_clear -- drop every unused entry (exports reloaded, shut-down). */
void fdcache_clear(void);

#endif
