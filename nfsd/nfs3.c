/*
 * nfs3.c -- the 22 procedures of NFS version 3 (RFC 1813) and their table.
 *
 * Every handler has the same shape: resolve the handles (as root: the
 * handle's MAC, its export, whether this client may use it, then
 * open_by_handle_at to an O_PATH descriptor), take the caller's identity
 * (vfs_become: the kernel then checks permissions exactly as for a local
 * process of that user), call the backing filesystem with *at() system
 * calls on single components (no path is ever walked, no symlink followed),
 * and fill the result with wcc_data / post-op attributes.
 *
 * Durability. Presto on (the export's option and run-time switch, and an
 * NVRAM log): a modifying handler locks its objects (presto_begin, which
 * answers NFS3ERR_JUKEBOX when the log stays full), applies without any
 * fsync and describes what it did in c->txn.op; dispatch appends the record
 * with the reply and waits for it to be durable before replying (presto.h).
 * WRITE then answers FILE_SYNC and COMMIT has nothing to do. Presto off: a
 * stable WRITE is fdatasync'ed/fsync'ed and every directory change fsyncs
 * the new object and its directory before the reply, like a knfsd "sync"
 * export. An "async" export skips those flushes (unsafe; for comparison).
 */
#include "nfsd/nfsd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nfs3_prot.h"
#include "nfsd/export_table.h"
#include "nfsd/fdcache.h"
#include "nfsd/fh.h"
#include "nfsd/log.h"
#include "nfsd/presto.h"
#include "nfsd/stats.h"
#include "nfsd/vfs.h"

/* the wire bounds of nfs3_prot.x against what the server takes */
_Static_assert(NFS3_WIRE_MAXDATA == RPC_MAX_RECORD, "WRITE data bounded by the largest record");
_Static_assert(NFS3_WIRE_MAXNAME >= NAME_MAX + 1, "a name just too long reaches check_name");
_Static_assert(NFS3_WIRE_MAXPATH >= PATH_MAX, "a symlink text just too long reaches SYMLINK");

/* obj -- a resolved file handle. */
struct obj {
	const struct xexport *xe;
	const struct export_opts *opts;
	int fd;				/* O_PATH, or -1 */
	struct stat st;
	struct fh_kernel kh;		/* the kernel handle it was opened with */
	struct fdcache_ref *ref;	/* fd belongs to the cache when set */
	uint8_t mac[FH_MAC];		/* the MAC of its handle (of kh) */
};

#define OBJ_INIT { NULL, NULL, -1, { 0 }, { 0 }, NULL, { 0 } }

static void obj_put(struct obj *o)
{
	if (o->ref)
		fdcache_put(o->ref);
	else if (o->fd >= 0)
		close(o->fd);
	o->ref = NULL;
	o->fd = -1;
}

static uint64_t obj_fsid(const struct obj *o)
{
	return o->xe->e->id;
}

/* call_defer -- a call running inline on the loop thread would have to wait
 * here: give it to a worker (dispatch does, when the handler returns). The
 * status only makes the handler unwind; nobody sees it. */
static nfsstat3 call_defer(struct call *c)
{
	c->defer = true;
	return NFS3ERR_JUKEBOX;
}

/* obj_get -- resolve fh for call c (as root). */
static nfsstat3 obj_get(struct call *c, const nfs_fh3 *fh, struct obj *o)
{
	struct fh_kernel kh;
	uint32_t id;
	const struct sockaddr *peer = (const struct sockaddr *)&c->req->peer;

	o->fd = -1;
	if (fh_parse((const uint8_t *)fh->data.data_val, fh->data.data_len, &id, &kh) < 0)
		return NFS3ERR_BADHANDLE;
	o->xe = xtab_by_id(c->xt, id);
	if (!o->xe)
		return NFS3ERR_STALE;	/* the export is gone */
	const struct export_client *cl = exports_match(o->xe->e, peer);
	if (!cl)
		return NFS3ERR_ACCES;
	if (!exports_port_ok(&cl->opts, peer))
		return NFS3ERR_PERM;
	o->opts = &cl->opts;
	bool redirected = false;
	for (int pass = 0, tries = 0;; pass++) {
		int fd = fdcache_get(id, &kh, o->xe->root_fd, &o->ref);
		if (fd >= 0) {
			o->fd = fd;
			break;
		}
		o->ref = NULL;
		if (fd == -ENOMEM && ++tries < 3) {
			/* seen right after a power-cut replay: the kernel could
			 * not decode a valid handle for a moment; try again (on a
			 * worker: the loop thread does not sleep), and if it
			 * persists tell the client to retry later */
			if (c->on_loop)
				return call_defer(c);
			pass--;
			usleep(1000);
			continue;
		}
		if (fd != -ESTALE && fd != -ENOENT && fd != -EINVAL) {
			static long tok;
			if (log_ratelimited(&tok)) {
				errno = -fd;
				log_warn("open_by_handle_at in export %s", o->xe->e->path);
			}
			return fd == -ENOMEM ? NFS3ERR_JUKEBOX : vfs_nfserr(fd);
		}
		/* replay re-created the object under a new inode: the client's
		 * handle stands for it through a durable redirect */
		struct fh_kernel n;
		if (pass > 0 || presto_redirect(id, &kh, &n) < 0)
			return NFS3ERR_STALE;
		kh = n;
		redirected = true;
	}
	o->kh = kh;
	/* the MAC a record of this object carries: the client's, unless a
	 * redirect gave another kernel handle */
	if (!redirected)
		memcpy(o->mac, (const uint8_t *)fh->data.data_val + FH_HDR + kh.len, FH_MAC);
	else if (fh_mac_of(id, &kh, o->mac) < 0)
		memset(o->mac, 0, FH_MAC);	/* too long for a handle: not loggable anyway */
	if (fstat(o->fd, &o->st) < 0) {
		obj_put(o);
		return vfs_nfserr(errno);
	}
	if (o->st.st_nlink == 0) {
		/* a cached descriptor outlived the object's last name */
		fdcache_forget(o->ref);
		obj_put(o);
		return NFS3ERR_STALE;
	}
	return NFS3_OK;
}

static nfsstat3 become(struct call *c, const struct obj *o)
{
	return vfs_become(&c->cred, o->opts) < 0 ? NFS3ERR_PERM : NFS3_OK;
}

/* ---- Presto: the log record of a modifying call ---- */

static bool presto_on(const struct obj *o)
{
	return presto_enabled(o->xe, o->opts->presto);
}

/* logs -- whether changes in o's export are logged (presto on or off, see
 * presto_logs) */
static bool logs(const struct obj *o)
{
	return presto_logs(o->xe);
}

/* accelerated -- the call's change is logged and presto is on: its record
 * makes it durable, nothing is flushed */
static bool accelerated(const struct call *c)
{
	return c->txn.active && c->accel;
}

/* log_begin -- on the loop thread (c->on_loop) it never waits: it defers
 * the call instead (call_defer) when presto is off and a flush is due, or
 * when presto_begin_nowait would have to wait. Presto on: lock the objects
 * (each given by its stat) and make room in the log; NFS3ERR_JUKEBOX when
 * the log stays full. Presto off: nothing. */
static nfsstat3 log_begin(struct call *c, const struct obj *o, const struct stat *const *sts,
			  unsigned n, size_t est)
{
	dev_t devs[PRESTO_MAX_OBJS];
	ino_t inos[PRESTO_MAX_OBJS];
	unsigned k = 0;

	c->accel = presto_on(o);
	/* presto off flushes before the reply: not on the loop thread */
	if (!c->accel && c->on_loop && !o->opts->async)
		return call_defer(c);
	if (!logs(o))
		return NFS3_OK;
	for (unsigned i = 0; i < n && k < PRESTO_MAX_OBJS; i++) {
		if (!sts[i])
			continue;
		devs[k] = sts[i]->st_dev;
		inos[k] = sts[i]->st_ino;
		k++;
	}
	if (c->on_loop ? presto_begin_nowait(&c->txn, devs, inos, k, est) < 0
		       : presto_begin(&c->txn, devs, inos, k, est) < 0)
		return c->on_loop ? call_defer(c) : NFS3ERR_JUKEBOX;
	c->txn.through = !c->accel;
	return NFS3_OK;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/* relock -- a name looked up before log_begin now names another object,
 * whose stripe is not held and cannot be taken now (lock order). Nothing is
 * changed yet: unlock, and the caller starts again as root, as the call
 * began (on the loop thread, a worker does; a worker tries 3 times, then
 * the client retries later). */
static nfsstat3 relock(struct call *c, int *tries)
{
	presto_commit(&c->txn, NULL, NULL, 0);	/* no record: unlocks */
	vfs_become_root();	/* the look starts again as root (obj_get) */
	if (c->on_loop)
		return call_defer(c);
	return ++*tries < 3 ? NFS3_OK : NFS3ERR_JUKEBOX;
}

static void log_obj(struct call *c, unsigned slot, plog_obj *dst, const struct obj *o)
{
	dst->export_id = o->xe->e->id;
	presto_kh(&c->txn, slot, &dst->kh, &o->kh);
	presto_mac(&c->txn, slot, o->mac);
}

/* log_attr -- the attributes of st, as a replay should set them. */
static void log_attr(plog_attr *a, const struct stat *st, bool with_size)
{
	memset(a, 0, sizeof(*a));
	a->set_mode = true;
	a->mode = st->st_mode & 07777;
	a->set_uid = true;
	a->uid = st->st_uid;
	a->set_gid = true;
	a->gid = st->st_gid;
	if (with_size) {
		a->set_size = true;
		a->size = (uint64_t)st->st_size;
	}
	a->atime = (plog_time){ true, (unsigned)st->st_atim.tv_sec, (unsigned)st->st_atim.tv_nsec };
	a->mtime = (plog_time){ true, (unsigned)st->st_mtim.tv_sec, (unsigned)st->st_mtim.tv_nsec };
}

static uid_t caller_uid(struct call *c, const struct obj *o)
{
	uid_t u;

	vfs_caller_uid(&c->cred, o->opts, &u);
	return u;
}

/* check_name -- copy a filename3 into buf after RFC 1813's rules: not empty,
 * at most NAME_MAX bytes, no '/' and no NUL. "." and ".." pass: each
 * procedure decides about them. */
static nfsstat3 check_name(const filename3 *n, char buf[NAME_MAX + 1])
{
	if (n->filename3_len == 0)
		return NFS3ERR_ACCES;
	if (n->filename3_len > NAME_MAX)
		return NFS3ERR_NAMETOOLONG;
	if (memchr(n->filename3_val, '/', n->filename3_len) ||
	    memchr(n->filename3_val, '\0', n->filename3_len))
		return NFS3ERR_ACCES;
	memcpy(buf, n->filename3_val, n->filename3_len);
	buf[n->filename3_len] = '\0';
	return NFS3_OK;
}

static bool is_dot(const char *n)
{
	return n[0] == '.' && n[1] == '\0';
}

static bool is_dotdot(const char *n)
{
	return n[0] == '.' && n[1] == '.' && n[2] == '\0';
}

static bool is_export_root(const struct obj *o)
{
	return o->st.st_dev == o->xe->dev && o->st.st_ino == o->xe->ino;
}

/* EXPORT_DEPTH_MAX -- no export is deeper than this below its filesystem's
 * root: a longer walk up is taken for a loop and for outside */
#define EXPORT_DEPTH_MAX 4096

/* in_export -- whether the directory open as fd lies under export xe's
 * root (or is it). A handle stays valid when its object moves, and a directory
 * can move out of its export: renamed by a client from a nested export's
 * subtree into the outer export's, or moved by a local process. Walking ".."
 * from there must not reach the rest of the filesystem, so LOOKUP and
 * READDIRPLUS check the ".." they opened before they give its handle. Call
 * as root (the caller may lack search permission above); bounded. */
static bool in_export(int fd, const struct xexport *xe)
{
	struct stat st;
	int cur = fd;
	bool inside = false;

	if (fstat(fd, &st) < 0)
		return false;

	for (unsigned depth = 0; depth < EXPORT_DEPTH_MAX; depth++) {
		if (st.st_dev != xe->dev)
			break;
		if (st.st_ino == xe->ino) {
			inside = true;
			break;
		}
		int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (cur != fd)
			close(cur);
		cur = up;
		struct stat ust;
		if (up < 0 || fstat(up, &ust) < 0)
			break;
		if (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)
			break;	/* the filesystem's root: its ".." is itself */
		st = ust;
	}
	if (cur >= 0 && cur != fd)
		close(cur);
	if (!inside) {
		static long tok;
		if (log_ratelimited(&tok))
			log_warnx("a client asked for \"..\" of a directory that is no longer "
				  "in export %s (moved out of it): refused", xe->e->path);
	}
	return inside;
}

/* set_fh -- copy fh into an XDR nfs_fh3 (freed by xdr_free). */
static bool set_fh(nfs_fh3 *out, const struct fh *fh)
{
	out->data.data_val = malloc(fh->len);
	if (!out->data.data_val)
		return false;
	memcpy(out->data.data_val, fh->data, fh->len);
	out->data.data_len = fh->len;
	return true;
}

/* handle_of -- the NFS handle of (dirfd, name) in dir's export, and its
 * kernel handle in *kh_out when asked. Returns 0 or -errno. */
static int handle_of(const struct obj *dir, int dirfd, const char *name, struct fh *out,
		     struct fh_kernel *kh_out)
{
	struct fh_kernel kh;
	int mid, rc;

	rc = fh_of(dirfd, name, &kh, &mid);
	if (rc < 0)
		return rc;
	/* an object on another filesystem mounted inside the export cannot be
	 * reopened through the export's mount_fd: refuse rather than hand out
	 * a handle that would go stale */
	if (mid != dir->xe->mount_id)
		return -EXDEV;
	if (kh_out)
		*kh_out = kh;
	return fh_make(dir->xe->e->id, &kh, out);
}

/*
 * entry_of -- the attributes and the handle of the object named name (one
 * component; "": dirfd itself) in directory dir open at dirfd, both of one
 * inode. Returns 0
 * with *st filled, or -errno (no attributes); *fh_rc is 0 when *fh was
 * filled too, else -errno (-EXDEV: another filesystem is mounted there).
 *
 * Both go by name, the handle first, and are kept when the handle's inode
 * number (fh_kernel_ino) is st_ino and st_dev the export's: a rename in
 * between that puts another object under the name shows as another number
 * (a mount on the name, as another device). The same number with
 * another generation means that the handle's object was deleted and its
 * inode reused meanwhile: such a handle is stale (NFS3ERR_STALE at its
 * first use), so the attributes are never those of another live object it
 * names. Otherwise (a handle of another layout, or no match) the name is
 * opened once (O_PATH) and both come from that descriptor, which the
 * reaper closes. On ext4 that is two system calls instead of three, and no
 * descriptor to open and close.
 */
static int entry_of(const struct obj *dir, int dirfd, const char *name, struct stat *st,
		    struct fh *fh, int *fh_rc)
{
	struct fh_kernel kh;
	uint64_t ino;
	int mid, rc = 0;

	if (name[0] && !__atomic_load_n(&dir->xe->names_by_fd, __ATOMIC_RELAXED) &&
	    fh_of(dirfd, name, &kh, &mid) == 0) {
		if (!fh_kernel_ino(&kh, &ino)) {
			/* the export's filesystem writes handles of another
			 * layout (btrfs, tmpfs, XFS with 64-bit inode numbers):
			 * by name it would cost a system call more per entry */
			if (mid == dir->xe->mount_id)
				__atomic_store_n((bool *)&dir->xe->names_by_fd, true,
						 __ATOMIC_RELAXED);	/* a hint, kept in the table */
		} else if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 && st->st_ino == ino &&
			   st->st_dev == dir->xe->dev) {
			/* the device too: a filesystem mounted on the name in
			 * between has inode numbers of its own */
			*fh_rc = mid != dir->xe->mount_id ? -EXDEV : fh_make(dir->xe->e->id, &kh, fh);
			return 0;
		}
	}
	int ofd = name[0] ? openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC) : dirfd;
	if (ofd < 0) {
		*fh_rc = -errno;
		return -errno;
	}
	if (fstatat(ofd, "", st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0)
		rc = -errno;
	*fh_rc = rc ? rc : handle_of(dir, ofd, "", fh, NULL);
	if (ofd != dirfd)
		fdcache_close_later(ofd);	/* a batch at a time, off the call's path */
	return rc;
}

/* commit_fd -- make the object behind an O_PATH fd durable (as root). */
static int commit_fd(int fd, bool datasync)
{
	char p[32];
	int rfd, rc = 0;

	vfs_proc_path(fd, p);
	rfd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (rfd < 0)
		return errno == ENXIO || errno == ELOOP ? 0 : -errno;
	if ((datasync ? fdatasync(rfd) : fsync(rfd)) < 0)
		rc = -errno;
	close(rfd);
	return rc;
}

/* commit_change -- presto off: make a directory change durable before the
 * reply. The new object first (its inode), then its directory (the entry).
 * Symlinks, devices, FIFOs and sockets cannot be opened for fsync: the
 * directory's fsync commits the journal transaction that created them. */
static nfsstat3 commit_change(struct call *c, const struct obj *dir, int dirfd, const char *newname)
{
	int rc = 0;

	if (dir->opts->async || accelerated(c))
		return NFS3_OK;		/* unsafe export, or the log makes it durable */
	vfs_become_root();
	if (newname) {
		int fd = openat(dirfd, newname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			struct stat st;
			if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) &&
			    fsync(fd) < 0)
				rc = -errno;
			close(fd);
		}
	}
	if (rc == 0)
		rc = commit_fd(dirfd, false);
	if (rc < 0) {
		static long tok;
		if (log_ratelimited(&tok)) {
			errno = -rc;
			log_warn("fsync of a directory change in export %s", dir->xe->e->path);
		}
		return NFS3ERR_IO;
	}
	return NFS3_OK;
}

/* open_data -- a descriptor to read or write a regular file as the caller.
 * The owner may read and write his own file whatever its mode says (knfsd's
 * owner override: a client that created a file 0444 still writes to it).
 * With a cached object the descriptor is the cache's (*owned false) after a
 * permission check as the caller; otherwise it is opened through /proc as
 * the caller (*owned true: close it). */
static int open_data(struct call *c, struct obj *o, int flags, bool *owned)
{
	char p[32];
	int fd;
	bool owner = caller_uid(c, o) == o->st.st_uid;

	/* An open that conflicts with a local process's lease (F_SETLEASE: a
	 * read lease and an open for writing, a write lease and any open)
	 * waits until the holder gives it back, up to lease-break-time (45 s):
	 * on the loop thread that would stall every client. There the open
	 * does not wait (EWOULDBLOCK; the break is started all the same) and
	 * the caller hands the call to a worker or answers JUKEBOX, as knfsd
	 * does. O_NONBLOCK changes nothing else for a regular file. */
	if (c->on_loop)
		flags |= O_NONBLOCK;

	if (o->ref) {
		int mode = (flags & O_ACCMODE) == O_RDONLY ? R_OK : W_OK;
		if (!owner && syscall(SYS_faccessat2, o->fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) < 0)
			return -1;
		*owned = false;
		vfs_become_root();
		fd = fdcache_data_fd(o->ref, flags);
		vfs_become(&c->cred, o->opts);
		if (fd < 0) {
			errno = -fd;
			return -1;
		}
		return fd;
	}
	*owned = true;
	vfs_proc_path(o->fd, p);
	fd = open(p, flags | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && owner) {
		vfs_become_root();
		fd = open(p, flags | O_CLOEXEC);
		int e = errno;
		vfs_become(&c->cred, o->opts);
		errno = e;
	}
	return fd;
}

static struct timespec ts_of(const nfstime3 *t)
{
	return (struct timespec){ .tv_sec = t->seconds, .tv_nsec = t->nseconds };
}

/* sattr_times_ok -- a client's times have nanoseconds under 10^9: checked
 * before anything is changed or created (utimensat would take UTIME_NOW's
 * and UTIME_OMIT's values, 2^30 - 1 and 2^30 - 2, for "now" and "leave
 * it", and refuse the rest only after the owner, size and mode changed) */
static bool sattr_times_ok(const sattr3 *sa)
{
	return !sa ||
	       ((sa->atime.set_it != SET_TO_CLIENT_TIME ||
		 sa->atime.set_atime_u.atime.nseconds < 1000000000u) &&
		(sa->mtime.set_it != SET_TO_CLIENT_TIME ||
		 sa->mtime.set_mtime_u.mtime.nseconds < 1000000000u));
}

/* sattr_any -- whether apply_sattr(sa, skip_mode) would change anything */
static bool sattr_any(const struct obj *o, const sattr3 *sa, bool skip_mode)
{
	return sa->uid.set_it || sa->gid.set_it || sa->size.set_it ||
	       (sa->mode.set_it && !skip_mode && !S_ISLNK(o->st.st_mode)) ||
	       sa->atime.set_it != DONT_CHANGE || sa->mtime.set_it != DONT_CHANGE;
}

/* apply_sattr -- set the attributes a client asked for on o (as the caller).
 * Returns 0 or -errno. */
static int apply_sattr(struct call *c, struct obj *o, const sattr3 *sa, bool skip_mode)
{
	char p[32];

	if (!sattr_times_ok(sa))
		return -EINVAL;	/* the callers checked: nothing is changed */
	vfs_proc_path(o->fd, p);
	if (sa->uid.set_it || sa->gid.set_it) {
		uid_t u = sa->uid.set_it ? sa->uid.set_uid3_u.uid : (uid_t)-1;
		gid_t g = sa->gid.set_it ? sa->gid.set_gid3_u.gid : (gid_t)-1;
		if (fchownat(o->fd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	if (sa->size.set_it) {
		if (S_ISDIR(o->st.st_mode))
			return -EISDIR;
		if (!S_ISREG(o->st.st_mode))
			return -EINVAL;
		if ((uint64_t)sa->size.set_size3_u.size > (uint64_t)LLONG_MAX)
			return -EFBIG;
		bool owned;
		int fd = open_data(c, o, O_WRONLY, &owned);
		if (fd < 0)
			return -errno;
		int rc = ftruncate(fd, (off_t)sa->size.set_size3_u.size) < 0 ? -errno : 0;
		if (owned)
			close(fd);
		if (rc < 0)
			return rc;
	}
	if (sa->mode.set_it && !skip_mode && !S_ISLNK(o->st.st_mode)) {
		if (chmod(p, sa->mode.set_mode3_u.mode & 07777) < 0)
			return -errno;
	}
	if (sa->atime.set_it != DONT_CHANGE || sa->mtime.set_it != DONT_CHANGE) {
		struct timespec ts[2];
		ts[0].tv_nsec = UTIME_OMIT;
		ts[1].tv_nsec = UTIME_OMIT;
		if (sa->atime.set_it == SET_TO_SERVER_TIME)
			ts[0].tv_nsec = UTIME_NOW;
		else if (sa->atime.set_it == SET_TO_CLIENT_TIME)
			ts[0] = ts_of(&sa->atime.set_atime_u.atime);
		if (sa->mtime.set_it == SET_TO_SERVER_TIME)
			ts[1].tv_nsec = UTIME_NOW;
		else if (sa->mtime.set_it == SET_TO_CLIENT_TIME)
			ts[1] = ts_of(&sa->mtime.set_mtime_u.mtime);
		if (utimensat(o->fd, "", ts, AT_EMPTY_PATH) < 0)
			return -errno;
	}
	return 0;
}

/* ---- NULL (0) ---- */

static void nfs3_null(struct call *c, void *a, void *r)
{
	(void)c;
	(void)a;
	(void)r;
}

/* ---- GETATTR (1) ---- */

static void nfs3_getattr(struct call *c, void *a, void *r)
{
	GETATTR3args *args = a;
	GETATTR3res *res = r;
	struct obj o = OBJ_INIT;

	res->status = obj_get(c, &args->object, &o);
	if (res->status == NFS3_OK)
		vfs_fattr(&o.st, obj_fsid(&o), &res->GETATTR3res_u.resok.obj_attributes);
	obj_put(&o);
}

/* ---- SETATTR (2) ---- */

static void nfs3_setattr(struct call *c, void *a, void *r)
{
	SETATTR3args *args = a;
	SETATTR3res *res = r;
	wcc_data *wcc = &res->SETATTR3res_u.resfail.obj_wcc;
	struct obj o = OBJ_INIT;
	struct stat before;
	unsigned stripe;
	bool held = false, marked = false, have_before = false, have_after = false;
	struct stat after;
	int rc;

	res->status = obj_get(c, &args->object, &o);
	if (res->status != NFS3_OK)
		goto out;
	if (!o.opts->rw) {
		res->status = NFS3ERR_ROFS;
		goto wcc;
	}
	if (!sattr_times_ok(&args->new_attributes)) {
		res->status = NFS3ERR_INVAL;
		goto wcc;
	}
	const struct stat *sts[] = { &o.st };
	if ((res->status = log_begin(c, &o, sts, 1, 512)) != NFS3_OK)
		goto wcc;
	if (!c->txn.active) {
		/* presto off: no stripe was taken; SETATTRs of one object
		 * still go one at a time, for the guard */
		if (presto_dir_hold(o.st.st_dev, o.st.st_ino, c->on_loop, &stripe) < 0) {
			res->status = call_defer(c);
			goto wcc;
		}
		held = true;
	}
	/* the guard is checked and the change made under the object's stripe:
	 * one step for every other SETATTR (RFC 1813, 3.3.2); the pre-op
	 * attributes are taken there too (see WRITE), and the answers before
	 * this point carry none */
	have_before = fstat(o.fd, &before) == 0;
	if (!have_before)
		before = o.st;	/* the guard's best knowledge */
	if (args->guard.check &&
	    (args->guard.sattrguard3_u.obj_ctime.seconds != (uint32)before.st_ctim.tv_sec ||
	     args->guard.sattrguard3_u.obj_ctime.nseconds != (uint32)before.st_ctim.tv_nsec)) {
		res->status = NFS3ERR_NOT_SYNC;
		goto wcc;
	}
	if (args->new_attributes.size.set_it && S_ISREG(o.st.st_mode)) {
		presto_prestamp(&c->txn, o.fd, true, args->new_attributes.size.set_size3_u.size);
		marked = true;
	}
	if ((res->status = become(c, &o)) != NFS3_OK)
		goto wcc;
	rc = apply_sattr(c, &o, &args->new_attributes, false);
	/* the post-op attributes under the stripe as well (a flush below
	 * changes none of them) */
	have_after = fstat(o.fd, &after) == 0;
	if (c->txn.active) {
		/* even a partly applied SETATTR is logged: what changed must
		 * survive; the record holds the resulting values */
		const struct stat now = after;
		if (have_after) {
			plog_setattr *ps = &c->txn.op.plog_op_u.setattr;
			const sattr3 *sa = &args->new_attributes;
			c->txn.op.type = PLOG_SETATTR;
			log_obj(c, 0, &ps->obj, &o);
			presto_stamp(&c->txn, o.fd, o.ref, &o.st);
			log_attr(&ps->attr, &now, S_ISREG(now.st_mode));
			ps->attr.set_mode = sa->mode.set_it;
			ps->attr.set_uid = sa->uid.set_it;
			ps->attr.set_gid = sa->gid.set_it;
			ps->attr.set_size = sa->size.set_it && S_ISREG(now.st_mode);
			ps->attr.atime.set = sa->atime.set_it != DONT_CHANGE;
			ps->attr.mtime.set = sa->mtime.set_it != DONT_CHANGE;
			c->txn.has_op = true;
		}
	}
	if (held) {
		presto_dir_release(stripe);	/* not across the fsync below */
		held = false;
	}
	if (rc < 0) {
		res->status = vfs_nfserr(rc);
		goto wcc;
	}
	if (!o.opts->async && !accelerated(c)) {
		vfs_become_root();
		if (commit_fd(o.fd, false) < 0)
			res->status = NFS3ERR_IO;
	}
wcc:
	if (marked) {
		/* a mark removed changes the ctime: the post-op attributes
		 * after it (presto on: the stripe is still held) */
		presto_size_settle(&c->txn, o.fd, args->new_attributes.size.set_size3_u.size);
		if (have_after && c->txn.active)
			have_after = fstat(o.fd, &after) == 0;
	}
	/* SETATTR3resok and SETATTR3resfail are both just obj_wcc */
	if (have_after) {
		vfs_pre_op(&wcc->before, have_before ? &before : NULL);
		vfs_post_op(&wcc->after, &after, obj_fsid(&o));
	} else {
		vfs_wcc(wcc, have_before ? &before : NULL, o.fd, obj_fsid(&o));
	}
	if (held)
		presto_dir_release(stripe);
out:
	obj_put(&o);
}

/* ---- LOOKUP (3) ---- */

static void nfs3_lookup(struct call *c, void *a, void *r)
{
	LOOKUP3args *args = a;
	LOOKUP3res *res = r;
	struct obj d = OBJ_INIT;
	char name[NAME_MAX + 1];
	struct fh fh;
	struct stat est;
	int fd = -1, rc;
	unsigned stripe;
	bool held = false, by_name;

	res->status = obj_get(c, &args->what.dir, &d);
	if (res->status != NFS3_OK)
		goto out;
	if (!S_ISDIR(d.st.st_mode)) {
		res->status = NFS3ERR_NOTDIR;
		goto fail;
	}
	if (logs(&d)) {
		/* no handle of an entry whose creation is not logged yet */
		if (presto_dir_hold(d.st.st_dev, d.st.st_ino, c->on_loop, &stripe) < 0) {
			res->status = call_defer(c);
			goto out;
		}
		held = true;
	}
	if ((res->status = check_name(&args->what.name, name)) != NFS3_OK ||
	    (res->status = become(c, &d)) != NFS3_OK)
		goto fail;
	if (is_dot(name) || (is_dotdot(name) && is_export_root(&d))) {
		/* no walk above the export's root: its ".." is itself; the
		 * caller still needs search permission on it */
		if (faccessat(d.fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0) {
			res->status = vfs_nfserr(errno);
			goto fail;
		}
	}
	/* a name, ".", or ".." at the root (itself): entry_of; ".." elsewhere
	 * by its descriptor, which must lie inside the export */
	by_name = !is_dotdot(name) || is_export_root(&d);
	if (by_name) {
		int frc;
		rc = entry_of(&d, d.fd, is_dot(name) || is_dotdot(name) ? "" : name, &est, &fh,
			      &frc);
		if (rc == 0)
			rc = frc;
	} else {
		fd = openat(d.fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			res->status = vfs_nfserr(errno);
			goto fail;
		}
		vfs_become_root();
		bool inside = in_export(fd, d.xe);
		if ((res->status = become(c, &d)) != NFS3_OK)
			goto fail;
		if (!inside) {
			res->status = NFS3ERR_ACCES;	/* d moved out of the export */
			goto fail;
		}
		rc = handle_of(&d, fd, "", &fh, NULL);
	}
	if (rc == -EXDEV) {
		res->status = NFS3ERR_ACCES;
		goto fail;
	}
	if (rc < 0 || !set_fh(&res->LOOKUP3res_u.resok.object, &fh)) {
		res->status = rc < 0 ? vfs_nfserr(rc) : NFS3ERR_SERVERFAULT;
		goto fail;
	}
	if (by_name)
		vfs_post_op(&res->LOOKUP3res_u.resok.obj_attributes, &est, obj_fsid(&d));
	else
		vfs_post_op_fd(&res->LOOKUP3res_u.resok.obj_attributes, fd, obj_fsid(&d));
	vfs_post_op_fd(&res->LOOKUP3res_u.resok.dir_attributes, d.fd, obj_fsid(&d));
	goto out;
fail:
	vfs_post_op_fd(&res->LOOKUP3res_u.resfail.dir_attributes, d.fd, obj_fsid(&d));
out:
	if (held)
		presto_dir_release(stripe);
	fdcache_close_later(fd);	/* as READDIRPLUS: the reaper closes it */
	obj_put(&d);
}

/* ---- ACCESS (4) ---- */

static bool may(int fd, int mode)
{
	return syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) == 0;
}

static void nfs3_access(struct call *c, void *a, void *r)
{
	ACCESS3args *args = a;
	ACCESS3res *res = r;
	struct obj o = OBJ_INIT;
	uint32 want = args->access, got = 0;

	res->status = obj_get(c, &args->object, &o);
	if (res->status != NFS3_OK)
		goto out;
	if ((res->status = become(c, &o)) != NFS3_OK)
		goto fail;
	/* the mode bits as they are, without the owner override that READ
	 * and WRITE give (open_data): the client checks open(2) and access(2)
	 * with this answer, and the owner's open of his own 0444 file for
	 * writing must fail there (knfsd's nfsd_access likewise) */
	bool dir = S_ISDIR(o.st.st_mode);
	if ((want & ACCESS3_READ) && may(o.fd, R_OK))
		got |= ACCESS3_READ;
	if ((want & ACCESS3_LOOKUP) && dir && may(o.fd, X_OK))
		got |= ACCESS3_LOOKUP;
	if ((want & ACCESS3_EXECUTE) && !dir && may(o.fd, X_OK))
		got |= ACCESS3_EXECUTE;
	if (o.opts->rw && (want & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE)) &&
	    may(o.fd, W_OK)) {
		got |= want & (ACCESS3_MODIFY | ACCESS3_EXTEND);
		if (dir)
			got |= want & ACCESS3_DELETE;
	}
	res->ACCESS3res_u.resok.access = got;
	vfs_post_op(&res->ACCESS3res_u.resok.obj_attributes, &o.st, obj_fsid(&o));
	goto out;
fail:
	vfs_post_op(&res->ACCESS3res_u.resfail.obj_attributes, &o.st, obj_fsid(&o));
out:
	obj_put(&o);
}

/* ---- READLINK (5) ---- */

static void nfs3_readlink(struct call *c, void *a, void *r)
{
	READLINK3args *args = a;
	READLINK3res *res = r;
	struct obj o = OBJ_INIT;
	char *buf = NULL;
	ssize_t n;

	res->status = obj_get(c, &args->symlink, &o);
	if (res->status != NFS3_OK)
		goto out;
	if (!S_ISLNK(o.st.st_mode)) {
		res->status = NFS3ERR_INVAL;
		goto fail;
	}
	if ((res->status = become(c, &o)) != NFS3_OK)
		goto fail;
	buf = malloc(PATH_MAX);
	if (!buf) {
		res->status = NFS3ERR_SERVERFAULT;
		goto fail;
	}
	n = readlinkat(o.fd, "", buf, PATH_MAX);
	if (n < 0) {
		res->status = vfs_nfserr(errno);
		free(buf);
		goto fail;
	}
	res->READLINK3res_u.resok.data.nfspath3_val = buf;
	res->READLINK3res_u.resok.data.nfspath3_len = (u_int)n;
	vfs_post_op(&res->READLINK3res_u.resok.symlink_attributes, &o.st, obj_fsid(&o));
	goto out;
fail:
	vfs_post_op(&res->READLINK3res_u.resfail.symlink_attributes, &o.st, obj_fsid(&o));
out:
	obj_put(&o);
}

/* ---- READ (6) ---- */

static size_t read_reply_size(const void *a)
{
	const READ3args *args = a;

	return (args->count < NFSD_MAX_IO ? args->count : NFSD_MAX_IO) + 512;
}

static void nfs3_read(struct call *c, void *a, void *r)
{
	READ3args *args = a;
	READ3res *res = r;
	struct obj o = OBJ_INIT;
	int fd = -1;
	bool owned = false;

	res->status = obj_get(c, &args->file, &o);
	if (res->status != NFS3_OK)
		goto out;
	if (!S_ISREG(o.st.st_mode)) {
		res->status = S_ISDIR(o.st.st_mode) ? NFS3ERR_ISDIR : NFS3ERR_INVAL;
		goto fail;
	}
	if ((res->status = become(c, &o)) != NFS3_OK)
		goto fail;
	fd = open_data(c, &o, O_RDONLY, &owned);
	if (fd < 0) {
		/* a local write lease: a worker waits for it (nothing changed) */
		res->status = errno == EWOULDBLOCK && c->on_loop ? call_defer(c)
								 : vfs_nfserr(errno);
		goto fail;
	}
	size_t count = args->count < NFSD_MAX_IO ? args->count : NFSD_MAX_IO;
	/* no file reaches 2^63 - 1: beyond it nothing is read, and the count
	 * stops there (preadv2 refuses a range past it), as knfsd */
	if (args->offset >= (uint64_t)LLONG_MAX)
		count = 0;
	else if (count > (uint64_t)LLONG_MAX - args->offset)
		count = (size_t)((uint64_t)LLONG_MAX - args->offset);
	char *buf = malloc(count ? count : 1);
	if (!buf) {
		res->status = NFS3ERR_SERVERFAULT;
		goto fail;
	}
	size_t got = 0;
	while (got < count) {
		/* on the loop thread only what the page cache holds */
		struct iovec iov = { buf + got, count - got };
		ssize_t n = preadv2(fd, &iov, 1, (off_t)(args->offset + got),
				    c->on_loop ? RWF_NOWAIT : 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (c->on_loop && (errno == EAGAIN || errno == EOPNOTSUPP)) {
				free(buf);
				res->status = call_defer(c);
				goto fail;
			}
			res->status = vfs_nfserr(errno);
			free(buf);
			goto fail;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		st = o.st;
	READ3resok *ok = &res->READ3res_u.resok;
	ok->data.data_val = buf;
	ok->data.data_len = (u_int)got;
	ok->count = (count3)got;
	ok->eof = args->offset + got >= (uint64_t)st.st_size;
	vfs_post_op(&ok->file_attributes, &st, obj_fsid(&o));
	goto out;
fail:
	vfs_post_op_fd(&res->READ3res_u.resfail.file_attributes, o.fd, obj_fsid(&o));
out:
	if (fd >= 0 && owned)
		close(fd);
	obj_put(&o);
}

/* ---- WRITE (7) ---- */

static void nfs3_write(struct call *c, void *a, void *r)
{
	WRITE3args *args = a;
	WRITE3res *res = r;
	struct obj o = OBJ_INIT;
	struct stat before, after;
	int fd = -1;
	unsigned stripe;
	bool have_before = false, have_after = false, held = false, owned = false;
	/* read before obj_get's stat (see below) */
	uint64_t gen = c->on_loop ? presto_release_gen() : 0;

	res->status = obj_get(c, &args->file, &o);
	if (res->status != NFS3_OK)
		goto out;
	if (!S_ISREG(o.st.st_mode)) {
		res->status = S_ISDIR(o.st.st_mode) ? NFS3ERR_ISDIR : NFS3ERR_INVAL;
		goto fail;
	}
	if (!o.opts->rw) {
		res->status = NFS3ERR_ROFS;
		goto fail;
	}
	/* count must describe the data that came with it */
	if (args->count != args->data.data_len || args->stable > FILE_SYNC) {
		res->status = NFS3ERR_INVAL;
		goto fail;
	}
	if (args->offset > (uint64_t)LLONG_MAX - args->count) {
		res->status = NFS3ERR_FBIG;
		goto fail;
	}
	const struct stat *sts[] = { &o.st };
	if ((res->status = log_begin(c, &o, sts, 1, args->data.data_len + 512)) != NFS3_OK)
		goto fail;
	if (!c->txn.active) {
		/* no log: no stripe was taken; WRITEs and SETATTRs of one file
		 * still go one at a time, for the wcc data below */
		if (presto_dir_hold(o.st.st_dev, o.st.st_ino, c->on_loop, &stripe) < 0) {
			res->status = call_defer(c);
			goto fail;
		}
		held = true;
	}
	/* the pre-op attributes under the file's stripe, so that no other
	 * WRITE or SETATTR falls between them and this one's change: taken
	 * before (obj_get, or before a deferred call's worker waited for the
	 * stripe), they could match a client's cache while the post-op
	 * attributes carry another client's change too, and the client would
	 * take that change for its own and keep its stale cache (the Linux
	 * client's wcc check). The error answers before this point carry no
	 * pre-op attributes, for the same reason. On the loop obj_get's stat
	 * serves when no worker released a stripe since just before it: the
	 * loop runs one call at a time, so nothing else of this server can
	 * have changed the file in between (a stat less per WRITE). */
	if (c->on_loop && presto_release_gen() == gen) {
		before = o.st;
		have_before = true;
	} else {
		have_before = fstat(o.fd, &before) == 0;
	}
	if ((res->status = become(c, &o)) != NFS3_OK)
		goto fail;
	fd = open_data(c, &o, O_WRONLY, &owned);
	if (fd < 0) {
		/* a local lease: a worker waits for it (nothing changed yet) */
		res->status = errno == EWOULDBLOCK && c->on_loop ? call_defer(c)
								 : vfs_nfserr(errno);
		goto fail;
	}
	if (c->txn.active) {
		/* the data is borrowed from the decoded arguments, which live
		 * until dispatch has appended the record */
		plog_write *pw = &c->txn.op.plog_op_u.write;
		c->txn.op.type = PLOG_WRITE;
		log_obj(c, 0, &pw->file, &o);
		/* no stamp: see presto.c, "Applied stamps" */
		pw->offset = args->offset;
		pw->data.data_len = args->data.data_len;
		pw->data.data_val = args->data.data_val;
	}
	size_t done = 0;
	while (done < args->data.data_len) {
		ssize_t n = pwrite(fd, args->data.data_val + done, args->data.data_len - done,
				   (off_t)(args->offset + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			res->status = vfs_nfserr(errno);
			/* a partial write changed the file: log what was asked,
			 * replaying it is harmless */
			c->txn.has_op = c->txn.active && done > 0;
			goto fail;
		}
		done += (size_t)n;
		c->txn.has_op = c->txn.active;
	}
	/* the post-op attributes under the stripe too (a flush below changes
	 * none of them) */
	have_after = fstat(fd, &after) == 0;
	if (held) {
		presto_dir_release(stripe);	/* not across the fsync below */
		held = false;
	}
	stable_how committed = args->stable;
	if (accelerated(c)) {
		/* durable in the NVRAM log before the reply: FILE_SYNC */
		if (args->stable == UNSTABLE)
			presto_count_commit_avoided();
		committed = FILE_SYNC;
	} else if (o.opts->async) {
		committed = FILE_SYNC;	/* the unsafe export's lie, as knfsd async */
	} else if (args->stable != UNSTABLE) {
		if ((args->stable == DATA_SYNC ? fdatasync(fd) : fsync(fd)) < 0) {
			static long tok;
			if (log_ratelimited(&tok))
				log_warn("fsync of a WRITE in export %s", o.xe->e->path);
			res->status = NFS3ERR_IO;
			goto fail;
		}
	}
	WRITE3resok *ok = &res->WRITE3res_u.resok;
	ok->count = (count3)done;
	ok->committed = committed;
	presto_write_verf((uint8_t *)ok->verf, accelerated(c));
	vfs_pre_op(&ok->file_wcc.before, have_before && have_after ? &before : NULL);
	if (have_after)
		vfs_post_op(&ok->file_wcc.after, &after, obj_fsid(&o));
	else
		ok->file_wcc.after.attributes_follow = FALSE;
	goto out;
fail:
	if (have_after) {
		/* the change is made, the flush failed: the attributes of
		 * both ends were taken under the stripe */
		vfs_pre_op(&res->WRITE3res_u.resfail.file_wcc.before, have_before ? &before : NULL);
		vfs_post_op(&res->WRITE3res_u.resfail.file_wcc.after, &after, obj_fsid(&o));
	} else {
		vfs_wcc(&res->WRITE3res_u.resfail.file_wcc, have_before ? &before : NULL, o.fd,
			o.xe ? obj_fsid(&o) : 0);
	}
out:
	if (held)
		presto_dir_release(stripe);
	if (fd >= 0 && owned)
		close(fd);
	obj_put(&o);
}

/* ---- CREATE, MKDIR, SYMLINK, MKNOD: shared parts ---- */

/* create_begin -- resolve the directory of a creation and check its name.
 * "." and ".." exist already. */
static nfsstat3 create_begin(struct call *c, const diropargs3 *where, struct obj *d, char *name,
			     bool lock_existing, struct stat *locked)
{
	nfsstat3 st = obj_get(c, &where->dir, d);

	if (st != NFS3_OK)
		return st;
	if (!S_ISDIR(d->st.st_mode))
		return NFS3ERR_NOTDIR;
	if (!d->opts->rw)
		return NFS3ERR_ROFS;
	if ((st = check_name(&where->name, name)) != NFS3_OK)
		return st;
	if (is_dot(name) || is_dotdot(name))
		return NFS3ERR_EXIST;
	/* CREATE UNCHECKED with a size truncates a file that exists: lock it
	 * too, so that its WRITEs and the truncation append in apply order */
	struct stat est;
	bool existing = lock_existing && logs(d) &&
			fstatat(d->fd, name, &est, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(est.st_mode);
	const struct stat *sts[] = { &d->st, existing ? &est : NULL };
	if (locked) {
		memset(locked, 0, sizeof(*locked));
		if (existing)
			*locked = est;
	}
	if ((st = log_begin(c, d, sts, 2, 1024)) != NFS3_OK)
		return st;
	/* a MKDIR after the directory's pending stamps, as RENAME (presto.c,
	 * "Deferred directory stamps"), as root */
	if (c->proc == NFSPROC3_MKDIR)
		presto_stamps_settle(&c->txn);
	return become(c, d);
}

/* create_finish -- after the object exists (created, or found by CREATE
 * UNCHECKED or EXCLUSIVE: created false): take its handle, set its
 * attributes (as the caller), fill handle and attributes, describe it for
 * the log, commit.
 *
 * The handle comes first, before anything is changed, as knfsd composes
 * its handle before it creates or truncates: an object that no handle of
 * the export can name (another filesystem mounted on the name: LOOKUP says
 * ACCES) is answered ACCES and left as it was, and a creation that cannot
 * be described is taken back (undo), so that no change goes unlogged.
 * The owner and group a client asks for are set only when the caller is
 * root (after squashing), and ignored otherwise, as knfsd's
 * nfsd_create_setattr does (IRIX sends the directory's group with a
 * creation to mimic setgid directories): a creation is not refused for
 * them after it was made. Afterwards, an attribute that cannot be set (a
 * size past the limit, a time the filesystem refuses) is the answer, but
 * the object exists all the same, and may be looked up and used: it is logged as it is, as SETATTR
 * logs what it changed before failing. A file that existed changes only
 * by the truncation of CREATE UNCHECKED with a size, logged as a SETATTR of
 * its size whenever it was made, whatever the answer. */
static nfsstat3 create_finish(struct call *c, struct obj *d, const char *name, const sattr3 *sa,
			      bool skip_mode, bool created, post_op_fh3 *pfh, post_op_attr *pa)
{
	struct obj n = OBJ_INIT;
	nfsstat3 st = NFS3_OK, refused = NFS3_OK;
	struct fh fh;
	struct fh_kernel kh;
	struct stat now;
	bool truncated = false;
	int rc;

	n.xe = d->xe;
	n.opts = d->opts;
	n.fd = openat(d->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (n.fd < 0 || fstat(n.fd, &n.st) < 0) {
		st = vfs_nfserr(errno);
		goto undo;
	}
	/* one handle and one stat of the object serve the reply and the log
	 * record */
	rc = handle_of(d, n.fd, "", &fh, &kh);
	if (rc < 0) {
		st = rc == -EXDEV ? NFS3ERR_ACCES : vfs_nfserr(rc);
		goto undo;
	}
	sattr3 mine;
	uid_t caller;
	if (sa && (sa->uid.set_it || sa->gid.set_it) && !vfs_caller_uid(&c->cred, d->opts, &caller)) {
		mine = *sa;
		mine.uid.set_it = mine.gid.set_it = FALSE;
		sa = &mine;
	}
	/* most creations leave nothing to set after mknodat/mkdirat: then the
	 * stat above is the object's attributes already */
	bool changed = sa && sattr_any(&n, sa, skip_mode);
	if (changed) {
		/* a size: a new file's, or an existing file truncated by
		 * CREATE UNCHECKED */
		bool marked = sa->size.set_it && S_ISREG(n.st.st_mode) && c->txn.active;
		if (marked) {
			vfs_become_root();
			presto_prestamp(&c->txn, n.fd, true, sa->size.set_size3_u.size);
			st = become(c, d);
		}
		if (st == NFS3_OK) {
			rc = apply_sattr(c, &n, sa, skip_mode);
			if (rc < 0)
				refused = vfs_nfserr(rc);
			else if (!created && sa->size.set_it)
				truncated = true;
		}
		if (marked) {
			presto_size_settle(&c->txn, n.fd, sa->size.set_size3_u.size);
			if (st == NFS3_OK)
				st = become(c, d);	/* settle left it root */
		}
	}
	bool have_now = true;
	if (changed)
		have_now = fstat(n.fd, &now) == 0;
	else
		now = n.st;
	if (created && !have_now) {
		st = vfs_nfserr(errno);	/* cannot be described for the log */
		goto undo;
	}
	pfh->handle_follows = set_fh(&pfh->post_op_fh3_u.handle, &fh);
	if (have_now)
		vfs_post_op(pa, &now, obj_fsid(d));
	else
		pa->attributes_follow = FALSE;
	if (c->txn.active && created) {
		plog_create *pc = &c->txn.op.plog_op_u.create;
		c->txn.op.type = PLOG_CREATE;
		log_obj(c, 0, &pc->dir, d);
		pc->name = presto_name(&c->txn, 0, name);
		presto_stamp(&c->txn, d->fd, d->ref, &d->st);
		pc->type = now.st_mode & S_IFMT;
		pc->mode = now.st_mode & 07777;
		pc->rdev_major = major(now.st_rdev);
		pc->rdev_minor = minor(now.st_rdev);
		if (!pc->target)
			pc->target = presto_name(&c->txn, 1, "");
		log_attr(&pc->attr, &now, S_ISREG(now.st_mode) && now.st_size > 0);
		presto_kh(&c->txn, 1, &pc->result, &kh);
		presto_mac(&c->txn, 1, fh.data + fh.len - FH_MAC);
		c->txn.has_op = true;
	} else if (c->txn.active && truncated) {
		/* its stripe is held (create_begin locked it), as SETATTR's */
		plog_setattr *ps = &c->txn.op.plog_op_u.setattr;
		memset(ps, 0, sizeof(*ps));
		c->txn.op.type = PLOG_SETATTR;
		ps->obj.export_id = d->xe->e->id;
		presto_kh(&c->txn, 0, &ps->obj.kh, &kh);
		presto_mac(&c->txn, 0, fh.data + fh.len - FH_MAC);
		presto_stamp(&c->txn, n.fd, NULL, &n.st);
		ps->attr.set_size = true;
		ps->attr.size = sa->size.set_size3_u.size;
		c->txn.has_op = true;
	}
	nfsstat3 cst = commit_change(c, d, d->fd, name);
	if (st == NFS3_OK)
		st = cst;
	if (st == NFS3_OK)
		st = refused;
	goto out;
undo:
	if (created) {
		/* neither answered nor logged: it must not stay (a client
		 * could find it and use it, unlogged); as the caller, who
		 * made it */
		if (unlinkat(d->fd, name, 0) < 0 && errno == EISDIR)
			unlinkat(d->fd, name, AT_REMOVEDIR);
	}
out:
	obj_put(&n);
	return st;
}

/* sattr_rest -- a copy of sa without the mode (applied at creation) and
 * without a size of 0 (a new file is empty already). */
static sattr3 sattr_rest(const sattr3 *sa)
{
	sattr3 r = *sa;

	r.mode.set_it = FALSE;
	if (r.size.set_it && r.size.set_size3_u.size == 0)
		r.size.set_it = FALSE;	/* a new file is empty already */
	return r;
}

/* ---- CREATE (8) ---- */

static uint32_t be32(const char *p)
{
	const uint8_t *b = (const uint8_t *)p;

	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static void nfs3_create(struct call *c, void *a, void *r)
{
	CREATE3args *args = a;
	CREATE3res *res = r;
	CREATE3resok *ok = &res->CREATE3res_u.resok;
	struct obj d = OBJ_INIT;
	char name[NAME_MAX + 1];
	struct stat before;
	bool have_before = false;
	mode_t mode = 0644;
	sattr3 rest;
	const sattr3 *sa = NULL;

	/* only UNCHECKED with a size can change a file that exists (the rest
	 * of its attributes are kept): only then is it looked for and locked */
	bool may_truncate = args->how.mode == UNCHECKED &&
			    args->how.createhow3_u.obj_attributes.size.set_it;
	struct stat locked;
	int tries = 0;
again:
	res->status = create_begin(c, &args->where, &d, name, may_truncate, &locked);
	if (d.fd >= 0) {
		before = d.st;
		have_before = true;
	}
	if (res->status != NFS3_OK)
		goto fail;
	if (args->how.mode != EXCLUSIVE) {
		const sattr3 *in = &args->how.createhow3_u.obj_attributes;
		if (in->mode.set_it)
			mode = in->mode.set_mode3_u.mode & 07777;
		rest = sattr_rest(in);
		sa = &rest;
	}
	if (args->how.mode > EXCLUSIVE || !sattr_times_ok(sa)) {
		res->status = NFS3ERR_INVAL;
		goto fail;
	}
	bool created = false;
	nfsstat3 refused = NFS3_OK;
	if (mknodat(d.fd, name, S_IFREG | (args->how.mode == EXCLUSIVE ? 0600 : mode), 0) == 0) {
		created = true;
		if (args->how.mode == EXCLUSIVE) {
			/* the verifier lives in atime/mtime until the client's
			 * SETATTR replaces them (knfsd does the same) */
			struct timespec ts[2] = {
				{ .tv_sec = be32(args->how.createhow3_u.verf) & 0x7fffffff },
				{ .tv_sec = be32(args->how.createhow3_u.verf + 4) & 0x7fffffff },
			};
			if (utimensat(d.fd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
				refused = vfs_nfserr(errno);	/* the file is logged all the same */
		}
	} else if (errno != EEXIST) {
		res->status = vfs_nfserr(errno);
		goto fail;
	} else {
		struct stat st;
		if (fstatat(d.fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			res->status = vfs_nfserr(errno);
			goto fail;
		}
		switch (args->how.mode) {
		case UNCHECKED:
			if (!S_ISREG(st.st_mode)) {
				res->status = NFS3ERR_EXIST;
				goto fail;
			}
			if (may_truncate && c->txn.active && !same_inode(&st, &locked)) {
				/* the file appeared (or was replaced) after
				 * create_begin looked: start again, it locked */
				res->status = relock(c, &tries);
				obj_put(&d);
				d = (struct obj)OBJ_INIT;
				have_before = false;
				if (res->status != NFS3_OK)
					goto fail;
				goto again;
			}
			/* an existing file keeps its attributes but the size */
			rest = args->how.createhow3_u.obj_attributes;
			rest.mode.set_it = rest.uid.set_it = rest.gid.set_it = FALSE;
			rest.atime.set_it = rest.mtime.set_it = DONT_CHANGE;
			sa = &rest;
			break;
		case GUARDED:
			res->status = NFS3ERR_EXIST;
			goto fail;
		case EXCLUSIVE:
			if (!S_ISREG(st.st_mode) ||
			    (uint32_t)st.st_atim.tv_sec != (be32(args->how.createhow3_u.verf) & 0x7fffffff) ||
			    (uint32_t)st.st_mtim.tv_sec != (be32(args->how.createhow3_u.verf + 4) & 0x7fffffff)) {
				res->status = NFS3ERR_EXIST;
				goto fail;
			}
			break;	/* a retransmission of our own create */
		}
	}
	res->status = create_finish(c, &d, name, sa, true, created, &ok->obj, &ok->obj_attributes);
	if (res->status == NFS3_OK)
		res->status = refused;
	if (res->status != NFS3_OK) {
		xdr_free(XDRPROC(xdr_post_op_fh3), (char *)&ok->obj);
		memset(ok, 0, sizeof(*ok));
		goto fail;
	}
	vfs_wcc(&ok->dir_wcc, &before, d.fd, obj_fsid(&d));
	goto out;
fail:
	if (d.xe)
		vfs_wcc(&res->CREATE3res_u.resfail.dir_wcc, have_before ? &before : NULL, d.fd, obj_fsid(&d));
out:
	obj_put(&d);
}

/* ---- MKDIR (9), SYMLINK (10), MKNOD (11) ---- */

/* node -- what MKDIR, SYMLINK and MKNOD create. */
struct node {
	nfsstat3 refuse;		/* not NFS3_OK: answer this after the
					 * directory is resolved (for its wcc) */
	mode_t type;			/* S_IFDIR, S_IFLNK, S_IFCHR, S_IFBLK, ... */
	mode_t mode;
	dev_t rdev;
	const char *target;		/* symlinks */
	const sattr3 *sa;
};

/* node_create -- the body the three share: resolve the directory, create,
 * set the attributes, describe it for the log, and fill the result. Their
 * resok parts are laid out alike (obj, obj_attributes, dir_wcc), as are
 * their resfail parts (dir_wcc); ok is the resok, ok_size its size. */
static nfsstat3 node_create(struct call *c, const diropargs3 *where, const struct node *n,
			    post_op_fh3 *pfh, post_op_attr *pa, wcc_data *ok_wcc, wcc_data *fail_wcc,
			    void *ok, size_t ok_size)
{
	struct obj d = OBJ_INIT;
	char name[NAME_MAX + 1];
	struct stat before;
	bool have_before = false;
	int rc;
	nfsstat3 st = create_begin(c, where, &d, name, false, NULL);

	if (d.fd >= 0) {
		before = d.st;
		have_before = true;
	}
	if (st == NFS3_OK)
		st = n->refuse;
	if (st == NFS3_OK && !sattr_times_ok(n->sa))
		st = NFS3ERR_INVAL;
	if (st != NFS3_OK)
		goto fail;
	switch (n->type) {
	case S_IFDIR:
		rc = mkdirat(d.fd, name, n->mode);
		break;
	case S_IFLNK:
		/* stored as the client gave it; the server never follows it
		 * (every lookup is O_NOFOLLOW on one component) */
		rc = symlinkat(n->target, d.fd, name);
		break;
	default:
		rc = mknodat(d.fd, name, n->type | n->mode, n->rdev);
		break;
	}
	if (rc < 0) {
		st = vfs_nfserr(errno);
		goto fail;
	}
	if (n->type == S_IFLNK && c->txn.active) {
		/* the txn owns its copy of the target until the append */
		c->txn.target = strdup(n->target);
		c->txn.op.plog_op_u.create.target = c->txn.target;
	}
	sattr3 rest = sattr_rest(n->sa);
	rest.size.set_it = FALSE;
	st = create_finish(c, &d, name, &rest, true, true, pfh, pa);
	if (st != NFS3_OK) {
		xdr_free(XDRPROC(xdr_post_op_fh3), (char *)pfh);
		memset(ok, 0, ok_size);
		goto fail;
	}
	vfs_wcc(ok_wcc, &before, d.fd, obj_fsid(&d));
	goto out;
fail:
	if (d.xe)
		vfs_wcc(fail_wcc, have_before ? &before : NULL, d.fd, obj_fsid(&d));
out:
	obj_put(&d);
	return st;
}

static void nfs3_mkdir(struct call *c, void *a, void *r)
{
	MKDIR3args *args = a;
	MKDIR3res *res = r;
	MKDIR3resok *ok = &res->MKDIR3res_u.resok;
	const sattr3 *sa = &args->attributes;
	struct node n = { .type = S_IFDIR, .sa = sa,
			  .mode = sa->mode.set_it ? sa->mode.set_mode3_u.mode & 07777 : 0755 };

	res->status = node_create(c, &args->where, &n, &ok->obj, &ok->obj_attributes, &ok->dir_wcc,
				  &res->MKDIR3res_u.resfail.dir_wcc, ok, sizeof(*ok));
}

static void nfs3_symlink(struct call *c, void *a, void *r)
{
	SYMLINK3args *args = a;
	SYMLINK3res *res = r;
	SYMLINK3resok *ok = &res->SYMLINK3res_u.resok;
	const nfspath3 *t = &args->symlink.symlink_data;
	struct node n = { .type = S_IFLNK, .mode = 0777, .sa = &args->symlink.symlink_attributes };
	char *target = NULL;

	if (t->nfspath3_len == 0 || memchr(t->nfspath3_val, '\0', t->nfspath3_len))
		n.refuse = NFS3ERR_INVAL;
	else if (t->nfspath3_len >= PATH_MAX)
		n.refuse = NFS3ERR_NAMETOOLONG;
	else if (!(target = strndup(t->nfspath3_val, t->nfspath3_len)))
		n.refuse = NFS3ERR_SERVERFAULT;
	n.target = target;
	res->status = node_create(c, &args->where, &n, &ok->obj, &ok->obj_attributes, &ok->dir_wcc,
				  &res->SYMLINK3res_u.resfail.dir_wcc, ok, sizeof(*ok));
	free(target);
}

static void nfs3_mknod(struct call *c, void *a, void *r)
{
	MKNOD3args *args = a;
	MKNOD3res *res = r;
	MKNOD3resok *ok = &res->MKNOD3res_u.resok;
	static const sattr3 none;	/* BADTYPE: nothing to set */
	struct node n = { .sa = &none };

	switch (args->what.type) {
	case NF3CHR:
	case NF3BLK:
		n.type = args->what.type == NF3CHR ? S_IFCHR : S_IFBLK;
		n.sa = &args->what.mknoddata3_u.device.dev_attributes;
		n.rdev = makedev(args->what.mknoddata3_u.device.spec.specdata1,
				 args->what.mknoddata3_u.device.spec.specdata2);
		break;
	case NF3SOCK:
	case NF3FIFO:
		n.type = args->what.type == NF3SOCK ? S_IFSOCK : S_IFIFO;
		n.sa = &args->what.mknoddata3_u.pipe_attributes;
		break;
	default:
		n.refuse = NFS3ERR_BADTYPE;
		break;
	}
	n.mode = n.sa->mode.set_it ? n.sa->mode.set_mode3_u.mode & 07777 : 0644;
	res->status = node_create(c, &args->where, &n, &ok->obj, &ok->obj_attributes, &ok->dir_wcc,
				  &res->MKNOD3res_u.resfail.dir_wcc, ok, sizeof(*ok));
}

/* ---- REMOVE (12), RMDIR (13) ---- */

static nfsstat3 unlink_common(struct call *c, const diropargs3 *what, bool rmdir, wcc_data *wcc)
{
	struct obj d = OBJ_INIT;
	char name[NAME_MAX + 1];
	struct stat before;
	bool have_before = false;
	nfsstat3 st = obj_get(c, &what->dir, &d);

	if (st != NFS3_OK)
		goto out;
	before = d.st;
	have_before = true;
	if (!S_ISDIR(d.st.st_mode)) {
		st = NFS3ERR_NOTDIR;
		goto done;
	}
	if (!d.opts->rw) {
		st = NFS3ERR_ROFS;
		goto done;
	}
	if ((st = check_name(&what->name, name)) != NFS3_OK)
		goto done;
	if (is_dot(name)) {
		st = rmdir ? NFS3ERR_INVAL : NFS3ERR_ACCES;
		goto done;
	}
	if (is_dotdot(name)) {
		st = rmdir ? NFS3ERR_NOTEMPTY : NFS3ERR_ACCES;
		goto done;
	}
	struct stat vst, locked;
	struct fh_kernel vkh;
	bool have_victim;
	int tries = 0;
again:;
	/* read before the look (see nfs3_write) */
	uint64_t gen = c->on_loop ? presto_release_gen() : 0;
	have_victim = fstatat(d.fd, name, &locked, AT_SYMLINK_NOFOLLOW) == 0;
	const struct stat *sts[] = { &d.st, have_victim ? &locked : NULL };
	if ((st = log_begin(c, &d, sts, 2, 1024)) != NFS3_OK)
		goto done;
	if ((st = become(c, &d)) != NFS3_OK)
		goto done;
	if (c->txn.active) {
		/* the victim, looked up again under the locks: what is
		 * unlinked (its handle goes into the record). On the loop,
		 * when no worker released a stripe since just before the
		 * look above, that look stands (a stat less per REMOVE) */
		bool looked = have_victim && c->on_loop && presto_release_gen() == gen;
		if (looked)
			vst = locked;
		if ((!looked && fstatat(d.fd, name, &vst, AT_SYMLINK_NOFOLLOW) < 0) ||
		    fh_of(d.fd, name, &vkh, NULL) < 0) {
			st = vfs_nfserr(errno);
			goto done;
		}
		if (!have_victim || !same_inode(&vst, &locked)) {
			/* the name was replaced since the look above: the
			 * victim's stripe is not held. Nothing is changed yet:
			 * start again, the new victim locked. */
			if ((st = relock(c, &tries)) != NFS3_OK)
				goto done;
			goto again;
		}
		have_victim = true;
	} else if (have_victim) {
		have_victim = fh_of(d.fd, name, &vkh, NULL) == 0;
	}
	/* a reference to the victim keeps its eviction (which waits for any
	 * writeback of its pages) out of this call: the reaper drops it */
	int hold = openat(d.fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (unlinkat(d.fd, name, rmdir ? AT_REMOVEDIR : 0) < 0) {
		st = vfs_nfserr(errno);
		if (hold >= 0)
			close(hold);
		goto done;
	}
	fdcache_close_later(hold);
	if (have_victim)
		fdcache_drop(d.xe->e->id, &vkh);
	if (c->txn.active) {
		plog_remove *pr = &c->txn.op.plog_op_u.remove;
		c->txn.op.type = PLOG_REMOVE;
		log_obj(c, 0, &pr->dir, &d);
		pr->name = presto_name(&c->txn, 0, name);
		presto_kh(&c->txn, 1, &pr->victim, &vkh);
		presto_stamp(&c->txn, d.fd, d.ref, &d.st);
		pr->isdir = rmdir;
		c->txn.has_op = true;
	}
	st = commit_change(c, &d, d.fd, NULL);
done:
	vfs_wcc(wcc, have_before ? &before : NULL, d.fd, obj_fsid(&d));
out:
	obj_put(&d);
	return st;
}

static void nfs3_remove(struct call *c, void *a, void *r)
{
	REMOVE3args *args = a;
	REMOVE3res *res = r;

	res->status = unlink_common(c, &args->object, false, &res->REMOVE3res_u.resfail.dir_wcc);
}

static void nfs3_rmdir(struct call *c, void *a, void *r)
{
	RMDIR3args *args = a;
	RMDIR3res *res = r;

	res->status = unlink_common(c, &args->object, true, &res->RMDIR3res_u.resfail.dir_wcc);
}

/* ---- RENAME (14) ---- */

static void nfs3_rename(struct call *c, void *a, void *r)
{
	RENAME3args *args = a;
	RENAME3res *res = r;
	RENAME3resfail *rf = &res->RENAME3res_u.resfail;
	struct obj fd = OBJ_INIT, td = OBJ_INIT;
	char fname[NAME_MAX + 1], tname[NAME_MAX + 1];
	struct stat fbefore, tbefore;
	bool have_f = false, have_t = false;

	res->status = obj_get(c, &args->from.dir, &fd);
	if (res->status != NFS3_OK)
		goto out;
	fbefore = fd.st;
	have_f = true;
	res->status = obj_get(c, &args->to.dir, &td);
	if (res->status != NFS3_OK)
		goto done;
	tbefore = td.st;
	have_t = true;
	if (fd.xe != td.xe) {
		res->status = NFS3ERR_XDEV;
		goto done;
	}
	if (!S_ISDIR(fd.st.st_mode) || !S_ISDIR(td.st.st_mode)) {
		res->status = NFS3ERR_NOTDIR;
		goto done;
	}
	if (!fd.opts->rw) {
		res->status = NFS3ERR_ROFS;
		goto done;
	}
	if ((res->status = check_name(&args->from.name, fname)) != NFS3_OK ||
	    (res->status = check_name(&args->to.name, tname)) != NFS3_OK)
		goto done;
	if (is_dot(fname) || is_dotdot(fname) || is_dot(tname) || is_dotdot(tname)) {
		res->status = NFS3ERR_INVAL;
		goto done;
	}
	struct stat sst, tst, sst2, tst2;
	struct fh_kernel skh, tkh;
	bool have_s, have_t2, have_tkh;
	int tries = 0;
again:
	have_s = logs(&fd) && fstatat(fd.fd, fname, &sst, AT_SYMLINK_NOFOLLOW) == 0;
	have_t2 = have_s && fstatat(td.fd, tname, &tst, AT_SYMLINK_NOFOLLOW) == 0;
	const struct stat *sts[] = { &fd.st, &td.st, have_s ? &sst : NULL, have_t2 ? &tst : NULL };
	if ((res->status = log_begin(c, &fd, sts, 4, 1024)) != NFS3_OK)
		goto done;
	/* the directories' pending stamps first (presto.c, "Deferred
	 * directory stamps"), as root */
	presto_stamps_settle(&c->txn);
	if ((res->status = become(c, &fd)) != NFS3_OK)
		goto done;
	if (c->txn.active && (fstatat(fd.fd, fname, &sst2, AT_SYMLINK_NOFOLLOW) < 0 ||
			      fh_of(fd.fd, fname, &skh, NULL) < 0)) {
		res->status = vfs_nfserr(errno);
		goto done;
	}
	have_tkh = fh_of(td.fd, tname, &tkh, NULL) == 0 &&
		   fstatat(td.fd, tname, &tst2, AT_SYMLINK_NOFOLLOW) == 0;
	if (c->txn.active && (!have_s || !same_inode(&sst2, &sst) ||
			      (have_tkh && (!have_t2 || !same_inode(&tst2, &tst))))) {
		/* the source or the target was replaced since the look
		 * above: its stripe is not held. Nothing is changed yet:
		 * start again, the objects named now locked. */
		if ((res->status = relock(c, &tries)) != NFS3_OK)
			goto done;
		goto again;
	}
	int hold = have_tkh ? openat(td.fd, tname, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (renameat(fd.fd, fname, td.fd, tname) < 0) {
		res->status = vfs_nfserr(errno);
		if (hold >= 0)
			close(hold);
		goto done;
	}
	fdcache_close_later(hold);	/* the replaced object: evicted off this call */
	if (have_tkh)
		fdcache_drop(td.xe->e->id, &tkh);	/* replaced: maybe its last name */
	if (c->txn.active) {
		plog_rename *pr = &c->txn.op.plog_op_u.rename;
		c->txn.op.type = PLOG_RENAME;
		log_obj(c, 0, &pr->fromdir, &fd);
		pr->fromname = presto_name(&c->txn, 0, fname);
		log_obj(c, 1, &pr->todir, &td);
		pr->toname = presto_name(&c->txn, 1, tname);
		presto_stamp(&c->txn, fd.fd, fd.ref, &fd.st);
		presto_stamp(&c->txn, td.fd, td.ref, &td.st);
		presto_kh(&c->txn, 2, &pr->source, &skh);
		pr->same_file = have_tkh && tst2.st_ino == sst.st_ino && tst2.st_dev == sst.st_dev;
		pr->replaced = have_tkh && !pr->same_file;
		if (pr->replaced) {
			presto_kh(&c->txn, 3, &pr->target, &tkh);
			pr->target_isdir = S_ISDIR(tst2.st_mode);
		} else {
			pr->target = pr->source;	/* encodes; unused */
		}
		c->txn.has_op = true;
	}
	res->status = commit_change(c, &fd, fd.fd, NULL);
	if (res->status == NFS3_OK && (fd.st.st_ino != td.st.st_ino || fd.st.st_dev != td.st.st_dev))
		res->status = commit_change(c, &td, td.fd, NULL);
done:
	/* resok and resfail are laid out alike: fromdir_wcc, todir_wcc */
	if (fd.xe)
		vfs_wcc(&rf->fromdir_wcc, have_f ? &fbefore : NULL, fd.fd, obj_fsid(&fd));
	if (td.xe)
		vfs_wcc(&rf->todir_wcc, have_t ? &tbefore : NULL, td.fd, obj_fsid(&td));
out:
	obj_put(&fd);
	obj_put(&td);
}

/* ---- LINK (15) ---- */

static void nfs3_link(struct call *c, void *a, void *r)
{
	LINK3args *args = a;
	LINK3res *res = r;
	LINK3resfail *rf = &res->LINK3res_u.resfail;
	struct obj f = OBJ_INIT, d = OBJ_INIT;
	char name[NAME_MAX + 1], p[32];
	struct stat before;
	bool have_before = false;

	res->status = obj_get(c, &args->file, &f);
	if (res->status != NFS3_OK)
		goto out;
	res->status = obj_get(c, &args->link.dir, &d);
	if (res->status != NFS3_OK)
		goto done;
	before = d.st;
	have_before = true;
	if (f.xe != d.xe) {
		res->status = NFS3ERR_XDEV;
		goto done;
	}
	if (!S_ISDIR(d.st.st_mode)) {
		res->status = NFS3ERR_NOTDIR;
		goto done;
	}
	if (S_ISDIR(f.st.st_mode)) {
		res->status = NFS3ERR_ISDIR;
		goto done;
	}
	if (!d.opts->rw) {
		res->status = NFS3ERR_ROFS;
		goto done;
	}
	if ((res->status = check_name(&args->link.name, name)) != NFS3_OK)
		goto done;
	if (is_dot(name) || is_dotdot(name)) {
		res->status = NFS3ERR_EXIST;
		goto done;
	}
	const struct stat *sts[] = { &f.st, &d.st };
	if ((res->status = log_begin(c, &d, sts, 2, 1024)) != NFS3_OK)
		goto done;
	presto_stamps_settle(&c->txn);	/* as in RENAME */
	if ((res->status = become(c, &d)) != NFS3_OK)
		goto done;
	/* linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH, which the
	 * caller's identity lacks; the /proc magic link needs nothing */
	vfs_proc_path(f.fd, p);
	if (linkat(AT_FDCWD, p, d.fd, name, AT_SYMLINK_FOLLOW) < 0) {
		res->status = vfs_nfserr(errno);
		goto done;
	}
	if (c->txn.active) {
		plog_link *pl = &c->txn.op.plog_op_u.link;
		c->txn.op.type = PLOG_LINK;
		log_obj(c, 0, &pl->file, &f);
		log_obj(c, 1, &pl->dir, &d);
		pl->name = presto_name(&c->txn, 0, name);
		presto_stamp(&c->txn, d.fd, d.ref, &d.st);
		c->txn.has_op = true;
	}
	res->status = commit_change(c, &d, d.fd, name);
done:
	vfs_post_op_fd(&rf->file_attributes, f.fd, f.xe ? obj_fsid(&f) : 0);
	if (d.xe)
		vfs_wcc(&rf->linkdir_wcc, have_before ? &before : NULL, d.fd, obj_fsid(&d));
out:
	obj_put(&f);
	obj_put(&d);
}

/* ---- READDIR (16), READDIRPLUS (17) ---- */

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* dir_verf -- the cookie verifier of a directory. Cookies are the backing
 * filesystem's own directory offsets (d_off), stable across changes and
 * restarts, so the verifier need not change when the directory does; it
 * names the directory, so a cookie is refused when presented for another. */
static void dir_verf(const struct obj *d, char out[NFS3_COOKIEVERFSIZE])
{
	uint64_t h = 0xcbf29ce484222325ull ^ d->xe->e->id;

	h = (h ^ (uint64_t)d->st.st_ino) * 0x100000001b3ull;
	h = (h ^ (uint64_t)d->st.st_dev) * 0x100000001b3ull;
	memcpy(out, &h, 8);
}

static size_t xdr_pad(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

static size_t readdir_reply_size(const void *a)
{
	const READDIR3args *args = a;

	return (args->count < 1024 * 1024 ? args->count : 1024 * 1024) + 512;
}

static size_t readdirplus_reply_size(const void *a)
{
	const READDIRPLUS3args *args = a;

	return (args->maxcount < 1024 * 1024 ? args->maxcount : 1024 * 1024) + 512;
}

/* On the event loop thread a listing runs only for a directory of one block
 * and up to 512 entries (some filesystems do not give a directory's size in
 * bytes), and while another connection has calls in flight (they would
 * wait behind it) only up to a few: READDIRPLUS costs a stat and a handle
 * per entry, 2-3 us. A longer one goes to a worker, from the start. */
#define READDIR_LOOP_MAX_SIZE 4096
#define READDIR_LOOP_MAX_ENTRIES 512
#define READDIRPLUS_LOOP_BUSY_ENTRIES 64

/* readdir_common -- both READDIR and READDIRPLUS: plus selects entryplus3.
 * dircount bounds the directory part (READDIRPLUS), maxcount the reply. */
static nfsstat3 readdir_common(struct call *c, const nfs_fh3 *fh, cookie3 cookie, const char *verf,
			       size_t dircount, size_t maxcount, bool plus, struct obj *d,
			       char *outverf, void **entries, bool_t *eof)
{
	char zero[NFS3_COOKIEVERFSIZE] = { 0 };
	char buf[32768];
	int dfd = -1;
	bool presto = false;
	nfsstat3 st = obj_get(c, fh, d);
	/* status, dir attributes, verifier, list end, eof */
	size_t used = 4 + 88 + 8 + 4 + 4, dirused = 0;
	size_t nentries = 0;
	entry3 **tail3 = (entry3 **)entries;
	entryplus3 **tailp = (entryplus3 **)entries;

	*entries = NULL;
	*eof = FALSE;
	if (st != NFS3_OK)
		return st;
	if (!S_ISDIR(d->st.st_mode))
		return NFS3ERR_NOTDIR;
	if (c->on_loop && d->st.st_size > READDIR_LOOP_MAX_SIZE)
		return call_defer(c);
	presto = plus && logs(d);
	dir_verf(d, outverf);
	if (cookie != 0 && memcmp(verf, zero, 8) != 0 && memcmp(verf, outverf, 8) != 0)
		return NFS3ERR_BAD_COOKIE;
	if ((st = become(c, d)) != NFS3_OK)
		return st;
	/* through /proc, as the caller: read permission on the directory is
	 * enough to list its names (an openat of "." would also want search
	 * permission, which only the entries' attributes and handles need) */
	char p[32];
	vfs_proc_path(d->fd, p);
	dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		st = vfs_nfserr(errno);
		goto out;
	}
	if (cookie != 0 && lseek(dfd, (off_t)cookie, SEEK_SET) < 0) {
		st = NFS3ERR_BAD_COOKIE;
		goto out;
	}
	if (maxcount > 1024 * 1024)
		maxcount = 1024 * 1024;
	for (;;) {
		long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		if (n < 0) {
			st = vfs_nfserr(errno);
			goto out;
		}
		if (n == 0) {
			*eof = TRUE;
			break;
		}
		if (c->on_loop) {
			/* count first: a listing too long for the loop goes to a
			 * worker before any entry costs a stat */
			size_t k = nentries;
			for (long off = 0; off < n; off += ((struct linux_dirent64 *)(buf + off))->d_reclen)
				k++;
			if (k > (plus && rpc_busy_conns() >= 2 ? READDIRPLUS_LOOP_BUSY_ENTRIES
							     : READDIR_LOOP_MAX_ENTRIES)) {
				st = call_defer(c);
				goto out;
			}
		}
		for (long off = 0; off < n;) {
			struct linux_dirent64 *de = (struct linux_dirent64 *)(buf + off);
			off += de->d_reclen;
			size_t nl = strlen(de->d_name);
			size_t dsize = 8 + 4 + xdr_pad(nl) + 8;
			size_t esize = 4 + dsize;
			struct stat est;
			struct fh efh;
			bool have_st = false, have_fh = false;
			uint64_t ino = de->d_ino;

			if (plus) {
				int efd = d->fd;
				const char *en = de->d_name;
				unsigned stripe;
				if (is_dot(en) || (is_dotdot(en) && is_export_root(d)))
					en = "";	/* the directory itself */
				bool outside = false;
				int up = -1;
				if (is_dotdot(en)) {
					/* as LOOKUP: nothing of a parent outside
					 * the export (the walk runs as root), and
					 * the handle and attributes of the very
					 * directory checked, not of a second
					 * lookup of ".." after a move */
					vfs_become_root();
					up = openat(efd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
					outside = up < 0 || !in_export(up, d->xe);
					if ((st = become(c, d)) != NFS3_OK) {
						if (up >= 0)
							close(up);
						goto out;
					}
					if (up >= 0) {
						efd = up;
						en = "";
					}
				}
				/* an entry's handle: as LOOKUP (presto_dir_hold),
				 * entry by entry, so that a long listing does not
				 * hold the directory's changes */
				if (presto &&
				    presto_dir_hold(d->st.st_dev, d->st.st_ino, c->on_loop, &stripe) < 0) {
					if (up >= 0)
						close(up);
					st = call_defer(c);
					goto out;
				}
				/* attributes and handle of one inode (entry_of:
				 * a local rename between two lookups must not pair
				 * one file's attributes with another's handle) */
				int frc = -1;
				have_st = !outside && entry_of(d, efd, en, &est, &efh, &frc) == 0;
				have_fh = have_st && frc == 0;
				if (up >= 0)
					close(up);
				if (presto)
					presto_dir_release(stripe);
				if (have_st)
					ino = est.st_ino;
				esize += 4 + (have_st ? 84 : 0) + 4 + (have_fh ? 4 + xdr_pad(efh.len) : 0);
			} else if (is_dotdot(de->d_name) && is_export_root(d)) {
				ino = d->st.st_ino;
			}
			if (used + esize > maxcount || (plus && dirused + dsize > dircount)) {
				if (nentries == 0) {
					st = NFS3ERR_TOOSMALL;
					goto out;
				}
				goto full;
			}
			used += esize;
			dirused += dsize;
			char *nm = malloc(nl ? nl : 1);
			if (!nm) {
				st = NFS3ERR_SERVERFAULT;
				goto out;
			}
			memcpy(nm, de->d_name, nl);
			if (plus) {
				entryplus3 *e = calloc(1, sizeof(*e));
				if (!e) {
					free(nm);
					st = NFS3ERR_SERVERFAULT;
					goto out;
				}
				e->fileid = ino;
				e->name.filename3_val = nm;
				e->name.filename3_len = (u_int)nl;
				e->cookie = (cookie3)de->d_off;
				if (have_st)
					vfs_post_op(&e->name_attributes, &est, obj_fsid(d));
				if (have_fh)
					e->name_handle.handle_follows = set_fh(&e->name_handle.post_op_fh3_u.handle, &efh);
				*tailp = e;
				tailp = &e->nextentry;
			} else {
				entry3 *e = calloc(1, sizeof(*e));
				if (!e) {
					free(nm);
					st = NFS3ERR_SERVERFAULT;
					goto out;
				}
				e->fileid = ino;
				e->name.filename3_val = nm;
				e->name.filename3_len = (u_int)nl;
				e->cookie = (cookie3)de->d_off;
				*tail3 = e;
				tail3 = &e->nextentry;
			}
			nentries++;
		}
	}
full:
	st = NFS3_OK;
out:
	if (dfd >= 0)
		close(dfd);
	return st;
}

/* readdir_reply -- the directory attributes of either reply, or, on error,
 * the freed resok (ok, ok_size, freed with free_ok) and the resfail's. */
static void readdir_reply(nfsstat3 st, struct obj *d, xdrproc_t free_ok, void *ok, size_t ok_size,
			  post_op_attr *ok_attr, post_op_attr *fail_attr)
{
	if (st != NFS3_OK) {
		xdr_free(free_ok, ok);
		memset(ok, 0, ok_size);
		if (d->fd >= 0)
			vfs_post_op_fd(fail_attr, d->fd, obj_fsid(d));
	} else {
		vfs_post_op_fd(ok_attr, d->fd, obj_fsid(d));
	}
	obj_put(d);
}

static void nfs3_readdir(struct call *c, void *a, void *r)
{
	READDIR3args *args = a;
	READDIR3res *res = r;
	READDIR3resok *ok = &res->READDIR3res_u.resok;
	struct obj d = OBJ_INIT;
	void *entries;

	res->status = readdir_common(c, &args->dir, args->cookie, args->cookieverf, SIZE_MAX,
				     args->count, false, &d, ok->cookieverf, &entries, &ok->reply.eof);
	ok->reply.entries = entries;
	readdir_reply(res->status, &d, XDRPROC(xdr_READDIR3resok), ok, sizeof(*ok),
		      &ok->dir_attributes, &res->READDIR3res_u.resfail.dir_attributes);
}

static void nfs3_readdirplus(struct call *c, void *a, void *r)
{
	READDIRPLUS3args *args = a;
	READDIRPLUS3res *res = r;
	READDIRPLUS3resok *ok = &res->READDIRPLUS3res_u.resok;
	struct obj d = OBJ_INIT;
	void *entries;

	res->status = readdir_common(c, &args->dir, args->cookie, args->cookieverf, args->dircount,
				     args->maxcount, true, &d, ok->cookieverf, &entries, &ok->reply.eof);
	ok->reply.entries = entries;
	readdir_reply(res->status, &d, XDRPROC(xdr_READDIRPLUS3resok), ok, sizeof(*ok),
		      &ok->dir_attributes, &res->READDIRPLUS3res_u.resfail.dir_attributes);
}

/* ---- FSSTAT (18), FSINFO (19), PATHCONF (20) ---- */

static void nfs3_fsstat(struct call *c, void *a, void *r)
{
	FSSTAT3args *args = a;
	FSSTAT3res *res = r;
	FSSTAT3resok *ok = &res->FSSTAT3res_u.resok;
	struct obj o = OBJ_INIT;
	struct statvfs sv;

	res->status = obj_get(c, &args->fsroot, &o);
	if (res->status != NFS3_OK)
		goto out;
	if (fstatvfs(o.fd, &sv) < 0) {
		res->status = vfs_nfserr(errno);
		vfs_post_op(&res->FSSTAT3res_u.resfail.obj_attributes, &o.st, obj_fsid(&o));
		goto out;
	}
	ok->tbytes = (uint64)sv.f_blocks * sv.f_frsize;
	ok->fbytes = (uint64)sv.f_bfree * sv.f_frsize;
	ok->abytes = (uint64)sv.f_bavail * sv.f_frsize;
	ok->tfiles = sv.f_files;
	ok->ffiles = sv.f_ffree;
	ok->afiles = sv.f_favail;
	ok->invarsec = 0;
	vfs_post_op(&ok->obj_attributes, &o.st, obj_fsid(&o));
out:
	obj_put(&o);
}

static void nfs3_fsinfo(struct call *c, void *a, void *r)
{
	FSINFO3args *args = a;
	FSINFO3res *res = r;
	FSINFO3resok *ok = &res->FSINFO3res_u.resok;
	struct obj o = OBJ_INIT;

	res->status = obj_get(c, &args->fsroot, &o);
	if (res->status != NFS3_OK)
		goto out;
	ok->rtmax = NFSD_MAX_IO;
	ok->rtpref = NFSD_MAX_IO;
	ok->rtmult = 4096;
	ok->wtmax = NFSD_MAX_IO;
	ok->wtpref = NFSD_MAX_IO;
	ok->wtmult = 4096;
	ok->dtpref = 64 * 1024;
	ok->maxfilesize = o.xe->maxfilesize;
	ok->time_delta.seconds = 0;
	ok->time_delta.nseconds = 1;
	ok->properties = FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
	vfs_post_op(&ok->obj_attributes, &o.st, obj_fsid(&o));
out:
	obj_put(&o);
}

static void nfs3_pathconf(struct call *c, void *a, void *r)
{
	PATHCONF3args *args = a;
	PATHCONF3res *res = r;
	PATHCONF3resok *ok = &res->PATHCONF3res_u.resok;
	struct obj o = OBJ_INIT;
	char p[32];

	res->status = obj_get(c, &args->object, &o);
	if (res->status != NFS3_OK)
		goto out;
	vfs_proc_path(o.fd, p);
	long lm = S_ISLNK(o.st.st_mode) ? -1 : pathconf(p, _PC_LINK_MAX);
	long nm = S_ISLNK(o.st.st_mode) ? -1 : pathconf(p, _PC_NAME_MAX);
	ok->linkmax = lm > 0 ? (uint32)lm : 65000;
	ok->name_max = nm > 0 && nm <= NAME_MAX ? (uint32)nm : NAME_MAX;
	ok->no_trunc = TRUE;
	ok->chown_restricted = TRUE;
	ok->case_insensitive = FALSE;
	ok->case_preserving = TRUE;
	vfs_post_op(&ok->obj_attributes, &o.st, obj_fsid(&o));
out:
	obj_put(&o);
}

/* ---- COMMIT (21) ---- */

static void nfs3_commit(struct call *c, void *a, void *r)
{
	COMMIT3args *args = a;
	COMMIT3res *res = r;
	struct obj o = OBJ_INIT;
	struct stat before;

	res->status = obj_get(c, &args->file, &o);
	if (res->status != NFS3_OK)
		goto out;
	before = o.st;
	if (!S_ISREG(o.st.st_mode)) {
		res->status = S_ISDIR(o.st.st_mode) ? NFS3ERR_ISDIR : NFS3ERR_INVAL;
		vfs_wcc(&res->COMMIT3res_u.resfail.file_wcc, &before, o.fd, obj_fsid(&o));
		goto out;
	}
	bool on = presto_on(&o);
	if (on) {
		/* every WRITE answered with this verifier is in the NVRAM
		 * log already (presto_write_verf) */
		presto_count_commit_avoided();
	} else if (!o.opts->async && c->on_loop) {
		call_defer(c);
		goto out;
	} else if (!o.opts->async && commit_fd(o.fd, false) < 0) {
		static long tok;
		if (log_ratelimited(&tok))
			log_warn("COMMIT: fsync in export %s", o.xe->e->path);
		res->status = NFS3ERR_IO;
		vfs_wcc(&res->COMMIT3res_u.resfail.file_wcc, &before, o.fd, obj_fsid(&o));
		goto out;
	}
	presto_write_verf((uint8_t *)res->COMMIT3res_u.resok.verf, on);
	vfs_wcc(&res->COMMIT3res_u.resok.file_wcc, &before, o.fd, obj_fsid(&o));
out:
	obj_put(&o);
}

/* ---- the table ---- */

#define PROC(num, nm, fn, argt, rest, nonidem, rsize)                                              \
	[num] = { .name = nm, .xdr_args = XDRPROC(xdr_##argt), .xdr_res = XDRPROC(xdr_##rest), \
		  .args_size = sizeof(argt), .res_size = sizeof(rest), .handler = fn,              \
		  .drc = nonidem, .reply_size = rsize, .stat_idx = STATS_NFS_BASE + num,            \
		  .res_status = true }

const struct rpc_proc nfs3_procs[] = {
	[0] = { .name = "NULL", .xdr_args = XDRPROC(xdr_void), .xdr_res = XDRPROC(xdr_void),
		.handler = nfs3_null, .stat_idx = STATS_NFS_BASE },
	PROC(1, "GETATTR", nfs3_getattr, GETATTR3args, GETATTR3res, false, NULL),
	PROC(2, "SETATTR", nfs3_setattr, SETATTR3args, SETATTR3res, true, NULL),
	PROC(3, "LOOKUP", nfs3_lookup, LOOKUP3args, LOOKUP3res, false, NULL),
	PROC(4, "ACCESS", nfs3_access, ACCESS3args, ACCESS3res, false, NULL),
	PROC(5, "READLINK", nfs3_readlink, READLINK3args, READLINK3res, false, NULL),
	PROC(6, "READ", nfs3_read, READ3args, READ3res, false, read_reply_size),
	PROC(7, "WRITE", nfs3_write, WRITE3args, WRITE3res, false, NULL),
	PROC(8, "CREATE", nfs3_create, CREATE3args, CREATE3res, true, NULL),
	PROC(9, "MKDIR", nfs3_mkdir, MKDIR3args, MKDIR3res, true, NULL),
	PROC(10, "SYMLINK", nfs3_symlink, SYMLINK3args, SYMLINK3res, true, NULL),
	PROC(11, "MKNOD", nfs3_mknod, MKNOD3args, MKNOD3res, true, NULL),
	PROC(12, "REMOVE", nfs3_remove, REMOVE3args, REMOVE3res, true, NULL),
	PROC(13, "RMDIR", nfs3_rmdir, RMDIR3args, RMDIR3res, true, NULL),
	PROC(14, "RENAME", nfs3_rename, RENAME3args, RENAME3res, true, NULL),
	PROC(15, "LINK", nfs3_link, LINK3args, LINK3res, true, NULL),
	PROC(16, "READDIR", nfs3_readdir, READDIR3args, READDIR3res, false, readdir_reply_size),
	PROC(17, "READDIRPLUS", nfs3_readdirplus, READDIRPLUS3args, READDIRPLUS3res, false,
	     readdirplus_reply_size),
	PROC(18, "FSSTAT", nfs3_fsstat, FSSTAT3args, FSSTAT3res, false, NULL),
	PROC(19, "FSINFO", nfs3_fsinfo, FSINFO3args, FSINFO3res, false, NULL),
	PROC(20, "PATHCONF", nfs3_pathconf, PATHCONF3args, PATHCONF3res, false, NULL),
	PROC(21, "COMMIT", nfs3_commit, COMMIT3args, COMMIT3res, false, NULL),
};
const unsigned nfs3_nprocs = sizeof(nfs3_procs) / sizeof(nfs3_procs[0]);
