/*
 * cthon.c -- Connectathon-style tests of an NFSv3 server, on libnfs.
 *
 * The basic suite follows the structure and the default parameters of the
 * Connectathon 2004 "basic" tests (test1..test9), re-written here on libnfs's
 * sync API instead of a kernel mount:
 *
 *   test1  Create     a tree LEVELS deep, FILES files and DIRS dirs a level
 *                     (5, 5, 2: 155 files, 62 directories)
 *   test2  Remove     the same tree, depth first
 *   test3  Lookup     COUNT (250) getcwd-like walks: stat the test directory,
 *                     stat its parent, find the directory in the parent by
 *                     its file id (what getcwd does, one level up)
 *   test4  Setattr    FILES (10) files, COUNT (50) rounds of chmod 0 / stat /
 *                     chmod 0666 / stat
 *   test5  Write/Read a SIZE (1 MiB) file written COUNT (10) times in 8 KiB
 *                     writes, then read COUNT times and compared
 *   test6  Readdir    FILES (200) files, COUNT (200) rounds: read the whole
 *                     directory (every name seen exactly once, no stranger),
 *                     then remove one file
 *   test7  Link/rename FILES (10) files, COUNT (10) rounds of rename, link,
 *                     unlink with the link counts checked
 *   test8  Symlink    FILES (10) x COUNT (20) symlink / lstat / readlink /
 *                     unlink
 *   test9  Statfs     COUNT (1500) statfs calls
 *
 * The same operations run through the POSIX API on a local directory (the
 * "local filesystem" column of the benchmark): every test is written once
 * against the small struct ct_ops table below, with a libnfs and a POSIX
 * implementation.
 *
 * The special tests (functional mode only, NFSv3 procedures where libnfs's
 * high-level API would hide the answer): holey files and truncation, rename
 * over an existing file or directory, the name of an open file removed (the
 * client's silly rename, then the real remove), CREATE EXCLUSIVE with its
 * verifier, GUARDED and UNCHECKED, a large directory whose entries are removed
 * between READDIR pages, READDIR resumed at any cookie (telldir/seekdir),
 * offsets and sizes at the limits, over-long names, the directory errors
 * (EXIST, NOTEMPTY, rename into a descendant), and "." / ".." at the export
 * root and below a MOUNT of a subdirectory.
 *
 * Modes:
 *   cthon [-q]                 functional (make test): starts two presto-nfsd
 *                              (presto on with a /dev/shm log, presto off),
 *                              runs every test on both, through both
 *                              clients, and on a local directory; PASS/FAIL
 *                              lines and a final "N passed, N failed"
 *   cthon -t -n PORT -m PORT -e EXPORT [-c nfs3|libnfs] [-r N] [-L LABEL] [-w WHAT] [-p USECS]
 *   cthon -t -l DIR [-r N] [-L LABEL] [-w WHAT]
 *                              timed (make bench): one JSON object on stdout,
 *                              seconds per basic test row (the median of N
 *                              runs of the suite), tar-extract and rm -rf
 *                              seconds, Postmark transactions per second.
 *                              WHAT: basic,tar,postmark (default all)
 *
 * Three NFS clients: "libnfs" (libnfs's sync API, paths resolved from the
 * root by libnfs at every call), "nfs3" (libnfs's raw API, one NFSv3
 * procedure per operation on cached handles, as a kernel client) and
 * "nfs3-ac" (the same with a kernel client's attribute and negative-name
 * cache); see "raw client" below. The functional mode runs all three; the
 * timed mode uses nfs3 unless told otherwise, so that the table measures the
 * server's procedures rather than libnfs's path walks.
 *
 * Exit status: 0 when every check passed, 1 otherwise, 2 on bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>

/* Paths here are a directory of ours plus names of at most a few hundred
 * bytes; a truncated one would fail its check, never overflow. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define CT_TIMEOUT_MS 20000	/* one RPC; a hung server fails, it does not hang us */
#define CT_TESTDIR "cthon.dir"	/* the Connectathon test directory, under the export */
#define CT_BUFSZ 8192		/* test5's write and read size */
#define CT_MSG 512

/* ------------------------------------------------------------ utilities */

static double ct_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ct_fill -- deterministic bytes (xorshift), so that a read can be compared */
static void ct_fill(void *buf, size_t len, uint32_t seed)
{
	unsigned char *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

static uint64_t ct_rand_state = 88172645463325252ull;

static uint32_t ct_rand(void)
{
	ct_rand_state ^= ct_rand_state << 13;
	ct_rand_state ^= ct_rand_state >> 7;
	ct_rand_state ^= ct_rand_state << 17;
	return (uint32_t)(ct_rand_state >> 16);
}

/* ------------------------------------------------------------ the fs table */

struct ct_stat {
	uint64_t ino;
	uint64_t size;
	uint32_t mode;		/* with the S_IFMT bits */
	uint32_t nlink;
};

struct ct_fh {
	uint32_t len;
	char data[NFS3_FHSIZE];
};

struct ct_file {
	struct nfsfh *fh;	/* NFS through libnfs */
	int fd;			/* local */
	struct ct_fh kfh;	/* NFS through the raw client (struct ct_kc) */
	int dirty;		/* raw client: UNSTABLE writes to COMMIT at close */
	char kpath[256];	/* raw client: the path it was opened by */
};

struct ct_fs;
struct ct_kc;

/* ct_readdir_cb -- one entry; a non-zero return stops the walk */
typedef int (*ct_readdir_cb)(void *arg, const char *name, uint64_t ino, int is_dir);

/*
 * struct ct_ops -- the operations the tests use. Paths are relative to the
 * root of the run (the export, or the local directory), "" being the root.
 * Every function returns 0 (or a count) or a negative errno.
 */
struct ct_ops {
	int (*mkdir)(struct ct_fs *fs, const char *path, int mode);
	int (*rmdir)(struct ct_fs *fs, const char *path);
	int (*create)(struct ct_fs *fs, const char *path, int flags, int mode, struct ct_file *f);
	int (*open)(struct ct_fs *fs, const char *path, int flags, struct ct_file *f);
	ssize_t (*pwrite)(struct ct_fs *fs, struct ct_file *f, const void *buf, size_t len, uint64_t off);
	ssize_t (*pread)(struct ct_fs *fs, struct ct_file *f, void *buf, size_t len, uint64_t off);
	int (*fstat)(struct ct_fs *fs, struct ct_file *f, struct ct_stat *st);
	int (*ftruncate)(struct ct_fs *fs, struct ct_file *f, uint64_t len);
	int (*close)(struct ct_fs *fs, struct ct_file *f);
	int (*stat)(struct ct_fs *fs, const char *path, struct ct_stat *st);
	int (*lstat)(struct ct_fs *fs, const char *path, struct ct_stat *st);
	int (*chmod)(struct ct_fs *fs, const char *path, int mode);
	int (*utimes)(struct ct_fs *fs, const char *path, time_t t);
	int (*unlink)(struct ct_fs *fs, const char *path);
	int (*rename)(struct ct_fs *fs, const char *from, const char *to);
	int (*link)(struct ct_fs *fs, const char *from, const char *to);
	int (*symlink)(struct ct_fs *fs, const char *target, const char *path);
	ssize_t (*readlink)(struct ct_fs *fs, const char *path, char *buf, size_t len);
	int (*statfs)(struct ct_fs *fs, const char *path, uint64_t *blocks, uint64_t *files);
	int (*readdir)(struct ct_fs *fs, const char *path, ct_readdir_cb cb, void *arg);
};

struct ct_fs {
	const struct ct_ops *ops;
	const char *kind;		/* "nfs" or "local" */
	struct nfs_context *nfs;
	char base[PATH_MAX];		/* local: the directory; NFS: the export */
	int nfs_port, mount_port;	/* NFS */
	struct ct_kc *kc;		/* the raw client's connection and name cache */
};

/* ---- NFS (libnfs sync API) */

/* ct_nfs_path -- "/" + path into one of four rotating buffers */
static const char *ct_nfs_path(const char *path)
{
	static char buf[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "/%s", path);
	return buf[i];
}

static void ct_nfs_st(struct ct_stat *st, const struct nfs_stat_64 *n)
{
	st->ino = n->nfs_ino;
	st->size = n->nfs_size;
	st->mode = (uint32_t)n->nfs_mode;
	st->nlink = (uint32_t)n->nfs_nlink;
}

static int ct_nfs_mkdir(struct ct_fs *fs, const char *path, int mode)
{
	return nfs_mkdir2(fs->nfs, ct_nfs_path(path), mode);
}

static int ct_nfs_rmdir(struct ct_fs *fs, const char *path)
{
	return nfs_rmdir(fs->nfs, ct_nfs_path(path));
}

static int ct_nfs_create(struct ct_fs *fs, const char *path, int flags, int mode, struct ct_file *f)
{
	f->fh = NULL;
	return nfs_create(fs->nfs, ct_nfs_path(path), flags, mode, &f->fh);
}

static int ct_nfs_open(struct ct_fs *fs, const char *path, int flags, struct ct_file *f)
{
	f->fh = NULL;
	return nfs_open(fs->nfs, ct_nfs_path(path), flags, &f->fh);
}

static ssize_t ct_nfs_pwrite(struct ct_fs *fs, struct ct_file *f, const void *buf, size_t len, uint64_t off)
{
	return nfs_pwrite(fs->nfs, f->fh, off, len, buf);
}

static ssize_t ct_nfs_pread(struct ct_fs *fs, struct ct_file *f, void *buf, size_t len, uint64_t off)
{
	return nfs_pread(fs->nfs, f->fh, off, len, buf);
}

static int ct_nfs_fstat(struct ct_fs *fs, struct ct_file *f, struct ct_stat *st)
{
	struct nfs_stat_64 n;
	int rc = nfs_fstat64(fs->nfs, f->fh, &n);

	if (rc == 0)
		ct_nfs_st(st, &n);
	return rc;
}

static int ct_nfs_ftruncate(struct ct_fs *fs, struct ct_file *f, uint64_t len)
{
	return nfs_ftruncate(fs->nfs, f->fh, len);
}

static int ct_nfs_close(struct ct_fs *fs, struct ct_file *f)
{
	int rc = f->fh ? nfs_close(fs->nfs, f->fh) : 0;

	f->fh = NULL;
	return rc;
}

static int ct_nfs_stat(struct ct_fs *fs, const char *path, struct ct_stat *st)
{
	struct nfs_stat_64 n;
	int rc = nfs_stat64(fs->nfs, ct_nfs_path(path), &n);

	if (rc == 0)
		ct_nfs_st(st, &n);
	return rc;
}

static int ct_nfs_lstat(struct ct_fs *fs, const char *path, struct ct_stat *st)
{
	struct nfs_stat_64 n;
	int rc = nfs_lstat64(fs->nfs, ct_nfs_path(path), &n);

	if (rc == 0)
		ct_nfs_st(st, &n);
	return rc;
}

static int ct_nfs_chmod(struct ct_fs *fs, const char *path, int mode)
{
	return nfs_chmod(fs->nfs, ct_nfs_path(path), mode);
}

static int ct_nfs_utimes(struct ct_fs *fs, const char *path, time_t t)
{
	struct timeval tv[2] = { { .tv_sec = t }, { .tv_sec = t } };

	return nfs_utimes(fs->nfs, ct_nfs_path(path), tv);
}

static int ct_nfs_unlink(struct ct_fs *fs, const char *path)
{
	return nfs_unlink(fs->nfs, ct_nfs_path(path));
}

static int ct_nfs_rename(struct ct_fs *fs, const char *from, const char *to)
{
	return nfs_rename(fs->nfs, ct_nfs_path(from), ct_nfs_path(to));
}

static int ct_nfs_link(struct ct_fs *fs, const char *from, const char *to)
{
	return nfs_link(fs->nfs, ct_nfs_path(from), ct_nfs_path(to));
}

static int ct_nfs_symlink(struct ct_fs *fs, const char *target, const char *path)
{
	return nfs_symlink(fs->nfs, target, ct_nfs_path(path));
}

static ssize_t ct_nfs_readlink(struct ct_fs *fs, const char *path, char *buf, size_t len)
{
	int rc;

	memset(buf, 0, len);
	rc = nfs_readlink(fs->nfs, ct_nfs_path(path), buf, (int)len - 1);
	if (rc < 0)
		return rc;
	return (ssize_t)strlen(buf);
}

static int ct_nfs_statfs(struct ct_fs *fs, const char *path, uint64_t *blocks, uint64_t *files)
{
	struct nfs_statvfs_64 v;
	int rc = nfs_statvfs64(fs->nfs, ct_nfs_path(path), &v);

	if (rc == 0) {
		*blocks = v.f_blocks;
		*files = v.f_files;
	}
	return rc;
}

static int ct_nfs_readdir(struct ct_fs *fs, const char *path, ct_readdir_cb cb, void *arg)
{
	struct nfsdir *d = NULL;
	struct nfsdirent *e;
	int rc = nfs_opendir(fs->nfs, ct_nfs_path(path), &d);

	if (rc < 0)
		return rc;
	while ((e = nfs_readdir(fs->nfs, d)) != NULL)
		if (cb(arg, e->name, e->inode, e->type == NF3DIR))
			break;
	nfs_closedir(fs->nfs, d);
	return 0;
}

static const struct ct_ops ct_nfs_ops = {
	.mkdir = ct_nfs_mkdir,
	.rmdir = ct_nfs_rmdir,
	.create = ct_nfs_create,
	.open = ct_nfs_open,
	.pwrite = ct_nfs_pwrite,
	.pread = ct_nfs_pread,
	.fstat = ct_nfs_fstat,
	.ftruncate = ct_nfs_ftruncate,
	.close = ct_nfs_close,
	.stat = ct_nfs_stat,
	.lstat = ct_nfs_lstat,
	.chmod = ct_nfs_chmod,
	.utimes = ct_nfs_utimes,
	.unlink = ct_nfs_unlink,
	.rename = ct_nfs_rename,
	.link = ct_nfs_link,
	.symlink = ct_nfs_symlink,
	.readlink = ct_nfs_readlink,
	.statfs = ct_nfs_statfs,
	.readdir = ct_nfs_readdir,
};

/* ---- local (POSIX) */

/* ct_lp -- base + "/" + path into one of four rotating buffers */
static const char *ct_lp(struct ct_fs *fs, const char *path)
{
	static char buf[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", fs->base, path);
	return buf[i];
}

static int ct_err(int rc)
{
	return rc < 0 ? -errno : rc;
}

static void ct_local_st(struct ct_stat *st, const struct stat *s)
{
	st->ino = s->st_ino;
	st->size = (uint64_t)s->st_size;
	st->mode = s->st_mode;
	st->nlink = (uint32_t)s->st_nlink;
}

static int ct_local_mkdir(struct ct_fs *fs, const char *path, int mode)
{
	return ct_err(mkdir(ct_lp(fs, path), (mode_t)mode));
}

static int ct_local_rmdir(struct ct_fs *fs, const char *path)
{
	return ct_err(rmdir(ct_lp(fs, path)));
}

static int ct_local_create(struct ct_fs *fs, const char *path, int flags, int mode, struct ct_file *f)
{
	f->fd = open(ct_lp(fs, path), flags | O_CREAT | O_CLOEXEC, mode);
	return f->fd < 0 ? -errno : 0;
}

static int ct_local_open(struct ct_fs *fs, const char *path, int flags, struct ct_file *f)
{
	f->fd = open(ct_lp(fs, path), flags | O_CLOEXEC);
	return f->fd < 0 ? -errno : 0;
}

static ssize_t ct_local_pwrite(struct ct_fs *fs, struct ct_file *f, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	(void)fs;
	n = pwrite(f->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

static ssize_t ct_local_pread(struct ct_fs *fs, struct ct_file *f, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	(void)fs;
	n = pread(f->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

static int ct_local_fstat(struct ct_fs *fs, struct ct_file *f, struct ct_stat *st)
{
	struct stat s;

	(void)fs;
	if (fstat(f->fd, &s) < 0)
		return -errno;
	ct_local_st(st, &s);
	return 0;
}

static int ct_local_ftruncate(struct ct_fs *fs, struct ct_file *f, uint64_t len)
{
	(void)fs;
	return ct_err(ftruncate(f->fd, (off_t)len));
}

static int ct_local_close(struct ct_fs *fs, struct ct_file *f)
{
	int rc = 0;

	(void)fs;
	if (f->fd >= 0)
		rc = ct_err(close(f->fd));
	f->fd = -1;
	return rc;
}

static int ct_local_stat(struct ct_fs *fs, const char *path, struct ct_stat *st)
{
	struct stat s;

	if (stat(ct_lp(fs, path), &s) < 0)
		return -errno;
	ct_local_st(st, &s);
	return 0;
}

static int ct_local_lstat(struct ct_fs *fs, const char *path, struct ct_stat *st)
{
	struct stat s;

	if (lstat(ct_lp(fs, path), &s) < 0)
		return -errno;
	ct_local_st(st, &s);
	return 0;
}

static int ct_local_chmod(struct ct_fs *fs, const char *path, int mode)
{
	return ct_err(chmod(ct_lp(fs, path), (mode_t)mode));
}

static int ct_local_utimes(struct ct_fs *fs, const char *path, time_t t)
{
	struct timeval tv[2] = { { .tv_sec = t }, { .tv_sec = t } };

	return ct_err(utimes(ct_lp(fs, path), tv));
}

static int ct_local_unlink(struct ct_fs *fs, const char *path)
{
	return ct_err(unlink(ct_lp(fs, path)));
}

static int ct_local_rename(struct ct_fs *fs, const char *from, const char *to)
{
	return ct_err(rename(ct_lp(fs, from), ct_lp(fs, to)));
}

static int ct_local_link(struct ct_fs *fs, const char *from, const char *to)
{
	return ct_err(link(ct_lp(fs, from), ct_lp(fs, to)));
}

static int ct_local_symlink(struct ct_fs *fs, const char *target, const char *path)
{
	return ct_err(symlink(target, ct_lp(fs, path)));
}

static ssize_t ct_local_readlink(struct ct_fs *fs, const char *path, char *buf, size_t len)
{
	ssize_t n = readlink(ct_lp(fs, path), buf, len - 1);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

static int ct_local_statfs(struct ct_fs *fs, const char *path, uint64_t *blocks, uint64_t *files)
{
	struct statvfs v;

	if (statvfs(ct_lp(fs, path), &v) < 0)
		return -errno;
	*blocks = v.f_blocks;
	*files = v.f_files;
	return 0;
}

static int ct_local_readdir(struct ct_fs *fs, const char *path, ct_readdir_cb cb, void *arg)
{
	DIR *d = opendir(ct_lp(fs, path));
	struct dirent *e;

	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL)
		if (cb(arg, e->d_name, e->d_ino, e->d_type == DT_DIR))
			break;
	closedir(d);
	return 0;
}

static const struct ct_ops ct_local_ops = {
	.mkdir = ct_local_mkdir,
	.rmdir = ct_local_rmdir,
	.create = ct_local_create,
	.open = ct_local_open,
	.pwrite = ct_local_pwrite,
	.pread = ct_local_pread,
	.fstat = ct_local_fstat,
	.ftruncate = ct_local_ftruncate,
	.close = ct_local_close,
	.stat = ct_local_stat,
	.lstat = ct_local_lstat,
	.chmod = ct_local_chmod,
	.utimes = ct_local_utimes,
	.unlink = ct_local_unlink,
	.rename = ct_local_rename,
	.link = ct_local_link,
	.symlink = ct_local_symlink,
	.readlink = ct_local_readlink,
	.statfs = ct_local_statfs,
	.readdir = ct_local_readdir,
};

/* ct_fs_nfs -- mount EXPORT of 127.0.0.1 on the given ports; 0 or -1 */
static int ct_fs_nfs(struct ct_fs *fs, int nfs_port, int mount_port, const char *export)
{
	char url[PATH_MAX + 128];
	struct nfs_url *u;

	memset(fs, 0, sizeof(*fs));
	fs->ops = &ct_nfs_ops;
	fs->kind = "nfs";
	fs->nfs_port = nfs_port;
	fs->mount_port = mount_port;
	snprintf(fs->base, sizeof(fs->base), "%s", export);
	fs->nfs = nfs_init_context();
	if (!fs->nfs)
		return -1;
	snprintf(url, sizeof(url), "nfs://127.0.0.1%s?nfsport=%d&mountport=%d&version=3", export,
		 nfs_port, mount_port);
	u = nfs_parse_url_dir(fs->nfs, url);
	if (!u) {
		fprintf(stderr, "cthon: %s: %s\n", url, nfs_get_error(fs->nfs));
		goto fail;
	}
	nfs_set_timeout(fs->nfs, CT_TIMEOUT_MS);
	nfs_set_autoreconnect(fs->nfs, 0);
	/* every operation must reach the server: no client caches */
	nfs_set_dircache(fs->nfs, 0);
	nfs_set_pagecache(fs->nfs, 0);
	nfs_set_readahead(fs->nfs, 0);
	if (nfs_mount(fs->nfs, u->server, u->path) < 0) {
		fprintf(stderr, "cthon: mount %s: %s\n", url, nfs_get_error(fs->nfs));
		nfs_destroy_url(u);
		goto fail;
	}
	nfs_destroy_url(u);
	return 0;
fail:
	nfs_destroy_context(fs->nfs);
	fs->nfs = NULL;
	return -1;
}

static void ct_fs_local(struct ct_fs *fs, const char *dir)
{
	memset(fs, 0, sizeof(*fs));
	fs->ops = &ct_local_ops;
	fs->kind = "local";
	snprintf(fs->base, sizeof(fs->base), "%s", dir);
}

static void ct_kc_free(struct ct_kc *kc);

static void ct_fs_close(struct ct_fs *fs)
{
	if (fs->nfs)
		nfs_destroy_context(fs->nfs);
	fs->nfs = NULL;
	ct_kc_free(fs->kc);
	fs->kc = NULL;
}

/* ------------------------------------------------------------ checks */

/* the rows of the Connectathon table, in its order */
enum ct_row {
	CT_CREATE, CT_REMOVE, CT_LOOKUP, CT_SETATTR, CT_WRITE, CT_READ, CT_READDIR,
	CT_LINK, CT_SYMLINK, CT_STATFS, CT_NROWS
};

static const char *const ct_row_name[CT_NROWS] = {
	"create", "remove", "lookup", "setattr", "write", "read", "readdir",
	"link_rename", "symlink", "statfs",
};

struct ct_params {
	int levels, files, dirs;	/* test1, test2 */
	int lookups;			/* test3 */
	int attr_files, attr_count;	/* test4 */
	int size, rw_count;		/* test5 */
	int dir_files, dir_count;	/* test6 */
	int link_files, link_count;	/* test7 */
	int sym_files, sym_count;	/* test8 */
	int statfs_count;		/* test9 */
};

/* Connectathon 2004's defaults */
static const struct ct_params ct_default_params = {
	.levels = 5, .files = 5, .dirs = 2,
	.lookups = 250,
	.attr_files = 10, .attr_count = 50,
	.size = 1048576, .rw_count = 10,
	.dir_files = 200, .dir_count = 200,
	.link_files = 10, .link_count = 10,
	.sym_files = 10, .sym_count = 20,
	.statfs_count = 1500,
};

/* functional mode: the same tree and directory, fewer timed repetitions */
static const struct ct_params ct_quick_params = {
	.levels = 5, .files = 5, .dirs = 2,
	.lookups = 20,
	.attr_files = 10, .attr_count = 2,
	.size = 1048576, .rw_count = 2,
	.dir_files = 200, .dir_count = 40,
	.link_files = 10, .link_count = 2,
	.sym_files = 10, .sym_count = 2,
	.statfs_count = 50,
};

struct ct_ctx {
	struct ct_fs *fs;
	struct ct_params p;
	const char *label;
	double secs[CT_NROWS];
	int done[CT_NROWS];
	char msg[CT_MSG];		/* the failure of the current check */
	int passed, failed;
	int quiet;
	FILE *out;			/* PASS/FAIL lines (timed mode: stderr) */
	char *failures;			/* timed mode: the failures, for the JSON */
	size_t failures_len;
};

/* ct_fail -- record why the current check fails; returns -1 */
__attribute__((format(printf, 2, 3)))
static int ct_fail(struct ct_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	return -1;
}

static const char *ct_strerr(int rc)
{
	return rc < 0 ? strerror(-rc) : "no error";
}

/* ct_report -- one PASS/FAIL line for check NAME whose result is RC */
static void ct_report(struct ct_ctx *c, const char *name, int rc, const char *what)
{
	if (rc == 0) {
		c->passed++;
		if (!c->quiet)
			fprintf(c->out, "PASS %s %s%s%s\n", c->label, name, what ? ": " : "",
				what ? what : "");
	} else {
		c->failed++;
		fprintf(c->out, "FAIL %s %s: %s\n", c->label, name, c->msg);
		if (c->failures_len < 4096) {
			char line[CT_MSG + 128];
			int n = snprintf(line, sizeof(line), "%s%s: %s", c->failures_len ? "; " : "",
					 name, c->msg);
			char *m = realloc(c->failures, c->failures_len + (size_t)n + 1);

			if (m) {
				c->failures = m;
				memcpy(m + c->failures_len, line, (size_t)n + 1);
				c->failures_len += (size_t)n;
			}
		}
	}
	fflush(c->out);
	c->msg[0] = '\0';
}

/* ------------------------------------------------------------ tree helpers */

/* ct_rm_rf -- remove PATH and everything below it (no error when absent) */
struct ct_names {
	char **v;
	int n, cap;
	int *is_dir;
};

static int ct_names_add(void *arg, const char *name, uint64_t ino, int is_dir)
{
	struct ct_names *ns = arg;

	(void)ino;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (ns->n == ns->cap) {
		int cap = ns->cap ? ns->cap * 2 : 64;
		char **v = realloc(ns->v, (size_t)cap * sizeof(*v));
		int *d = realloc(ns->is_dir, (size_t)cap * sizeof(*d));

		if (v)
			ns->v = v;
		if (d)
			ns->is_dir = d;
		if (!v || !d)
			return 1;
		ns->cap = cap;
	}
	ns->v[ns->n] = strdup(name);
	ns->is_dir[ns->n] = is_dir;
	if (ns->v[ns->n])
		ns->n++;
	return 0;
}

static void ct_names_free(struct ct_names *ns)
{
	for (int i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	free(ns->is_dir);
	memset(ns, 0, sizeof(*ns));
}

/* ct_rm_rf -- rm -rf PATH through the fs table: readdir, unlink the
 * non-directories, recurse into the directories, rmdir; 0 or -errno */
static int ct_rm_rf(struct ct_fs *fs, const char *path)
{
	struct ct_names ns = { 0 };
	struct ct_stat st;
	int rc = fs->ops->lstat(fs, path, &st);

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if (!S_ISDIR(st.mode))
		return fs->ops->unlink(fs, path);
	rc = fs->ops->readdir(fs, path, ct_names_add, &ns);
	for (int i = 0; rc == 0 && i < ns.n; i++) {
		char sub[PATH_MAX];

		snprintf(sub, sizeof(sub), "%s/%s", path, ns.v[i]);
		rc = ns.is_dir[i] ? ct_rm_rf(fs, sub) : fs->ops->unlink(fs, sub);
	}
	ct_names_free(&ns);
	return rc ? rc : fs->ops->rmdir(fs, path);
}

/* ct_testdir -- a fresh, empty test directory (Connectathon's testdir()) */
static int ct_testdir(struct ct_ctx *c)
{
	int rc = ct_rm_rf(c->fs, CT_TESTDIR);

	if (rc < 0)
		return ct_fail(c, "cannot remove an old %s: %s", CT_TESTDIR, ct_strerr(rc));
	rc = c->fs->ops->mkdir(c->fs, CT_TESTDIR, 0777);
	if (rc < 0)
		return ct_fail(c, "mkdir %s: %s", CT_TESTDIR, ct_strerr(rc));
	return 0;
}

/* ------------------------------------------------------------ basic tests */

/* ct_dirtree -- test1's dirtree(): FILES files then DIRS dirs a level, each
 * dir recursively, LEV levels */
static int ct_dirtree(struct ct_ctx *c, const char *dir, int lev, int *files, int *dirs)
{
	char p[PATH_MAX];
	int rc;

	if (lev-- == 0)
		return 0;
	for (int f = 0; f < c->p.files; f++) {
		struct ct_file fl = { .fd = -1 };

		snprintf(p, sizeof(p), "%s/file.%d", dir, f);
		rc = c->fs->ops->create(c->fs, p, O_RDWR | O_TRUNC, 0666, &fl);
		if (rc < 0)
			return ct_fail(c, "creat %s: %s", p, ct_strerr(rc));
		rc = c->fs->ops->close(c->fs, &fl);
		if (rc < 0)
			return ct_fail(c, "close %s: %s", p, ct_strerr(rc));
		(*files)++;
	}
	for (int d = 0; d < c->p.dirs; d++) {
		snprintf(p, sizeof(p), "%s/dir.%d", dir, d);
		rc = c->fs->ops->mkdir(c->fs, p, 0777);
		if (rc < 0)
			return ct_fail(c, "mkdir %s: %s", p, ct_strerr(rc));
		(*dirs)++;
		if (ct_dirtree(c, p, lev, files, dirs) < 0)
			return -1;
	}
	return 0;
}

/* ct_check_tree -- every directory of the tree holds exactly its files
 * (regular, empty, mode 0666) and dirs */
static int ct_check_tree(struct ct_ctx *c, const char *dir, int lev)
{
	struct ct_names ns = { 0 };
	int rc, nf = 0, nd = 0;

	if (lev-- == 0)
		return 0;
	rc = c->fs->ops->readdir(c->fs, dir, ct_names_add, &ns);
	if (rc < 0)
		return ct_fail(c, "readdir %s: %s", dir, ct_strerr(rc));
	for (int i = 0; i < ns.n && rc == 0; i++) {
		char p[PATH_MAX];
		struct ct_stat st;
		int k;

		snprintf(p, sizeof(p), "%s/%s", dir, ns.v[i]);
		rc = c->fs->ops->lstat(c->fs, p, &st);
		if (rc < 0) {
			rc = ct_fail(c, "stat %s: %s", p, ct_strerr(rc));
		} else if (sscanf(ns.v[i], "file.%d", &k) == 1 && k >= 0 && k < c->p.files) {
			nf++;
			if (!S_ISREG(st.mode) || st.size != 0 || (st.mode & 07777) != 0666)
				rc = ct_fail(c, "%s: mode 0%o size %" PRIu64 ", expected a regular "
					     "empty file of mode 0666", p, st.mode, st.size);
		} else if (sscanf(ns.v[i], "dir.%d", &k) == 1 && k >= 0 && k < c->p.dirs && lev > 0) {
			nd++;
			if (!S_ISDIR(st.mode))
				rc = ct_fail(c, "%s: mode 0%o, expected a directory", p, st.mode);
			else
				rc = ct_check_tree(c, p, lev);
		} else if (sscanf(ns.v[i], "dir.%d", &k) == 1 && k >= 0 && k < c->p.dirs) {
			nd++;
			if (!S_ISDIR(st.mode))
				rc = ct_fail(c, "%s: mode 0%o, expected a directory", p, st.mode);
		} else {
			rc = ct_fail(c, "unexpected entry %s", p);
		}
	}
	if (rc == 0 && (nf != c->p.files || nd != c->p.dirs))
		rc = ct_fail(c, "%s holds %d files and %d dirs, expected %d and %d", dir, nf, nd,
			     c->p.files, c->p.dirs);
	ct_names_free(&ns);
	return rc;
}

static int ct_test1(struct ct_ctx *c, char *what, size_t wlen)
{
	int files = 0, dirs = 0;
	double t;

	if (ct_testdir(c) < 0)
		return -1;
	t = ct_now();
	if (ct_dirtree(c, CT_TESTDIR, c->p.levels, &files, &dirs) < 0)
		return -1;
	c->secs[CT_CREATE] = ct_now() - t;
	c->done[CT_CREATE] = 1;
	snprintf(what, wlen, "created %d files %d directories %d levels deep in %.3f s", files, dirs,
		 c->p.levels, c->secs[CT_CREATE]);
	return ct_check_tree(c, CT_TESTDIR, c->p.levels);
}

/* ct_rmdirtree -- test2's rmdirtree(): the files, then each dir's tree, then
 * the dir */
static int ct_rmdirtree(struct ct_ctx *c, const char *dir, int lev, int *files, int *dirs)
{
	char p[PATH_MAX];
	int rc;

	if (lev-- == 0)
		return 0;
	for (int f = 0; f < c->p.files; f++) {
		snprintf(p, sizeof(p), "%s/file.%d", dir, f);
		rc = c->fs->ops->unlink(c->fs, p);
		if (rc < 0)
			return ct_fail(c, "unlink %s: %s", p, ct_strerr(rc));
		(*files)++;
	}
	for (int d = 0; d < c->p.dirs; d++) {
		snprintf(p, sizeof(p), "%s/dir.%d", dir, d);
		if (ct_rmdirtree(c, p, lev, files, dirs) < 0)
			return -1;
		rc = c->fs->ops->rmdir(c->fs, p);
		if (rc < 0)
			return ct_fail(c, "rmdir %s: %s", p, ct_strerr(rc));
		(*dirs)++;
	}
	return 0;
}

static int ct_count_entries(void *arg, const char *name, uint64_t ino, int is_dir)
{
	(void)ino;
	(void)is_dir;
	if (strcmp(name, ".") && strcmp(name, ".."))
		(*(int *)arg)++;
	return 0;
}

static int ct_test2(struct ct_ctx *c, char *what, size_t wlen)
{
	int files = 0, dirs = 0, left = 0, rc;
	struct ct_stat st;
	double t = ct_now();

	if (ct_rmdirtree(c, CT_TESTDIR, c->p.levels, &files, &dirs) < 0)
		return -1;
	c->secs[CT_REMOVE] = ct_now() - t;
	c->done[CT_REMOVE] = 1;
	snprintf(what, wlen, "removed %d files %d directories %d levels deep in %.3f s", files, dirs,
		 c->p.levels, c->secs[CT_REMOVE]);
	rc = c->fs->ops->readdir(c->fs, CT_TESTDIR, ct_count_entries, &left);
	if (rc < 0)
		return ct_fail(c, "readdir %s: %s", CT_TESTDIR, ct_strerr(rc));
	if (left)
		return ct_fail(c, "%s still holds %d entries after the removal", CT_TESTDIR, left);
	rc = c->fs->ops->stat(c->fs, CT_TESTDIR "/dir.0", &st);
	if (rc != -ENOENT)
		return ct_fail(c, "stat of the removed %s/dir.0: %s, expected ENOENT", CT_TESTDIR,
			       ct_strerr(rc));
	return 0;
}

struct ct_find {
	uint64_t ino;
	char name[256];
	int found;
};

static int ct_find_ino(void *arg, const char *name, uint64_t ino, int is_dir)
{
	struct ct_find *f = arg;

	(void)is_dir;
	if (ino != f->ino || !strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->found++;
	return 0;
}

/* test3: getcwd-like walks across the root of the export */
static int ct_test3(struct ct_ctx *c, char *what, size_t wlen)
{
	struct ct_stat st, parent, first;
	double t;
	int rc;

	if (ct_testdir(c) < 0)
		return -1;
	rc = c->fs->ops->stat(c->fs, CT_TESTDIR, &first);
	if (rc < 0)
		return ct_fail(c, "stat %s: %s", CT_TESTDIR, ct_strerr(rc));
	t = ct_now();
	for (int i = 0; i < c->p.lookups; i++) {
		struct ct_find f = { 0 };

		rc = c->fs->ops->stat(c->fs, CT_TESTDIR, &st);
		if (rc < 0)
			return ct_fail(c, "stat %s: %s", CT_TESTDIR, ct_strerr(rc));
		if (st.ino != first.ino || !S_ISDIR(st.mode))
			return ct_fail(c, "stat %s: file id %" PRIu64 " mode 0%o, expected %" PRIu64
				       " and a directory", CT_TESTDIR, st.ino, st.mode, first.ino);
		rc = c->fs->ops->stat(c->fs, "", &parent);
		if (rc < 0)
			return ct_fail(c, "stat of the root: %s", ct_strerr(rc));
		f.ino = st.ino;
		rc = c->fs->ops->readdir(c->fs, "", ct_find_ino, &f);
		if (rc < 0)
			return ct_fail(c, "readdir of the root: %s", ct_strerr(rc));
		if (f.found != 1 || strcmp(f.name, CT_TESTDIR))
			return ct_fail(c, "file id %" PRIu64 " found %d times in the root (name \"%s\"), "
				       "expected once as %s", st.ino, f.found, f.name, CT_TESTDIR);
	}
	c->secs[CT_LOOKUP] = ct_now() - t;
	c->done[CT_LOOKUP] = 1;
	snprintf(what, wlen, "%d getcwd walks and stats in %.3f s", c->p.lookups, c->secs[CT_LOOKUP]);
	return 0;
}

static int ct_make_files(struct ct_ctx *c, const char *fmt, int n)
{
	for (int i = 0; i < n; i++) {
		struct ct_file f = { .fd = -1 };
		char p[PATH_MAX];
		int rc;

		snprintf(p, sizeof(p), fmt, i);
		rc = c->fs->ops->create(c->fs, p, O_RDWR | O_TRUNC, 0666, &f);
		if (rc < 0)
			return ct_fail(c, "creat %s: %s", p, ct_strerr(rc));
		c->fs->ops->close(c->fs, &f);
	}
	return 0;
}

/* test4: setattr, getattr, lookup */
static int ct_test4(struct ct_ctx *c, char *what, size_t wlen)
{
	static const int modes[2] = { 0, 0666 };
	double t;

	if (ct_testdir(c) < 0 || ct_make_files(c, CT_TESTDIR "/file.%d", c->p.attr_files) < 0)
		return -1;
	t = ct_now();
	for (int ct = 0; ct < c->p.attr_count; ct++) {
		for (int i = 0; i < c->p.attr_files; i++) {
			char p[PATH_MAX];

			snprintf(p, sizeof(p), CT_TESTDIR "/file.%d", i);
			for (int m = 0; m < 2; m++) {
				struct ct_stat st;
				int rc = c->fs->ops->chmod(c->fs, p, modes[m]);

				if (rc < 0)
					return ct_fail(c, "chmod %s 0%o: %s", p, modes[m], ct_strerr(rc));
				rc = c->fs->ops->stat(c->fs, p, &st);
				if (rc < 0)
					return ct_fail(c, "stat %s: %s", p, ct_strerr(rc));
				if ((st.mode & 07777) != (uint32_t)modes[m])
					return ct_fail(c, "%s has mode 0%o after chmod 0%o", p,
						       st.mode & 07777, modes[m]);
			}
		}
	}
	c->secs[CT_SETATTR] = ct_now() - t;
	c->done[CT_SETATTR] = 1;
	snprintf(what, wlen, "%d chmods and stats on %d files in %.3f s",
		 c->p.attr_count * c->p.attr_files * 4, c->p.attr_files, c->secs[CT_SETATTR]);
	return 0;
}

/* test5: write a SIZE file COUNT times, then read it COUNT times and compare */
static int ct_test5(struct ct_ctx *c, char *what, size_t wlen)
{
	const char *p = CT_TESTDIR "/bigfile";
	size_t size = (size_t)c->p.size;
	unsigned char *pat = malloc(size), *buf = malloc(CT_BUFSZ);
	double t;
	int rc = -1;

	if (!pat || !buf) {
		ct_fail(c, "out of memory");
		goto out;
	}
	ct_fill(pat, size, 5);
	if (ct_testdir(c) < 0)
		goto out;
	t = ct_now();
	for (int ct = 0; ct < c->p.rw_count; ct++) {
		struct ct_file f = { .fd = -1 };
		struct ct_stat st;
		int r = c->fs->ops->create(c->fs, p, O_RDWR | O_TRUNC, 0666, &f);

		if (r < 0) {
			ct_fail(c, "creat %s: %s", p, ct_strerr(r));
			goto out;
		}
		for (size_t off = 0; off < size; off += CT_BUFSZ) {
			size_t n = size - off < CT_BUFSZ ? size - off : CT_BUFSZ;
			ssize_t w = c->fs->ops->pwrite(c->fs, &f, pat + off, n, off);

			if (w != (ssize_t)n) {
				ct_fail(c, "write %s at %zu: %zd (%s), expected %zu", p, off, w,
					ct_strerr(w < 0 ? (int)w : 0), n);
				c->fs->ops->close(c->fs, &f);
				goto out;
			}
		}
		r = c->fs->ops->fstat(c->fs, &f, &st);
		c->fs->ops->close(c->fs, &f);
		if (r < 0 || st.size != size) {
			ct_fail(c, "%s: size %" PRIu64 " (%s) after writing %zu bytes", p,
				r < 0 ? 0 : st.size, ct_strerr(r), size);
			goto out;
		}
	}
	c->secs[CT_WRITE] = ct_now() - t;
	c->done[CT_WRITE] = 1;
	t = ct_now();
	for (int ct = 0; ct < c->p.rw_count; ct++) {
		struct ct_file f = { .fd = -1 };
		int r = c->fs->ops->open(c->fs, p, O_RDONLY, &f);

		if (r < 0) {
			ct_fail(c, "open %s: %s", p, ct_strerr(r));
			goto out;
		}
		for (size_t off = 0; off < size; off += CT_BUFSZ) {
			size_t n = size - off < CT_BUFSZ ? size - off : CT_BUFSZ;
			ssize_t g = c->fs->ops->pread(c->fs, &f, buf, n, off);

			if (g != (ssize_t)n) {
				ct_fail(c, "read %s at %zu: %zd (%s), expected %zu", p, off, g,
					ct_strerr(g < 0 ? (int)g : 0), n);
				c->fs->ops->close(c->fs, &f);
				goto out;
			}
			if (memcmp(buf, pat + off, n)) {
				ct_fail(c, "%s: bad data in the %zu bytes at offset %zu", p, n, off);
				c->fs->ops->close(c->fs, &f);
				goto out;
			}
		}
		c->fs->ops->close(c->fs, &f);
	}
	c->secs[CT_READ] = ct_now() - t;
	c->done[CT_READ] = 1;
	snprintf(what, wlen, "wrote %d byte file %d times in %.3f s, read it %d times in %.3f s",
		 c->p.size, c->p.rw_count, c->secs[CT_WRITE], c->p.rw_count, c->secs[CT_READ]);
	rc = c->fs->ops->unlink(c->fs, p);
	if (rc < 0)
		ct_fail(c, "unlink %s: %s", p, ct_strerr(rc));
out:
	free(pat);
	free(buf);
	return rc < 0 ? -1 : 0;
}

struct ct_seen {
	struct ct_ctx *c;
	int *count;		/* times file.N was seen */
	int nfiles;
	int dots, strangers;
	char stranger[256];
};

static int ct_seen_add(void *arg, const char *name, uint64_t ino, int is_dir)
{
	struct ct_seen *s = arg;
	char *end;
	long k;

	(void)ino;
	(void)is_dir;
	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		s->dots++;
		return 0;
	}
	if (strncmp(name, "file.", 5) == 0) {
		k = strtol(name + 5, &end, 10);
		if (*end == '\0' && end != name + 5 && k >= 0 && k < s->nfiles) {
			s->count[k]++;
			return 0;
		}
	}
	s->strangers++;
	snprintf(s->stranger, sizeof(s->stranger), "%s", name);
	return 0;
}

/* test6: readdir of a directory of FILES entries, COUNT times, removing one
 * file after each pass */
static int ct_test6(struct ct_ctx *c, char *what, size_t wlen)
{
	int n = c->p.dir_files, *count = calloc((size_t)n, sizeof(int)), rc = -1, entries = 0;
	double t;

	if (!count)
		return ct_fail(c, "out of memory");
	if (ct_testdir(c) < 0 || ct_make_files(c, CT_TESTDIR "/file.%d", n) < 0)
		goto out;
	t = ct_now();
	for (int ct = 0; ct < c->p.dir_count; ct++) {
		struct ct_seen s = { .c = c, .count = count, .nfiles = n };
		int r;

		memset(count, 0, (size_t)n * sizeof(int));
		r = c->fs->ops->readdir(c->fs, CT_TESTDIR, ct_seen_add, &s);
		if (r < 0) {
			ct_fail(c, "readdir %s: %s", CT_TESTDIR, ct_strerr(r));
			goto out;
		}
		if (s.strangers) {
			ct_fail(c, "pass %d: unexpected entry \"%s\"", ct, s.stranger);
			goto out;
		}
		if (s.dots != 2 && !strcmp(c->fs->kind, "local")) {
			ct_fail(c, "pass %d: %d of . and .., expected 2", ct, s.dots);
			goto out;
		}
		for (int i = 0; i < n; i++) {
			int want = i < ct && i < n ? 0 : 1;

			if (count[i] != want) {
				ct_fail(c, "pass %d: file.%d seen %d times, expected %d", ct, i,
					count[i], want);
				goto out;
			}
			entries += count[i];
		}
		if (ct < n) {
			char p[PATH_MAX];

			snprintf(p, sizeof(p), CT_TESTDIR "/file.%d", ct);
			r = c->fs->ops->unlink(c->fs, p);
			if (r < 0) {
				ct_fail(c, "unlink %s: %s", p, ct_strerr(r));
				goto out;
			}
		}
	}
	c->secs[CT_READDIR] = ct_now() - t;
	c->done[CT_READDIR] = 1;
	snprintf(what, wlen, "%d entries read in %d passes over %d files in %.3f s", entries,
		 c->p.dir_count, n, c->secs[CT_READDIR]);
	rc = ct_rm_rf(c->fs, CT_TESTDIR);
	if (rc < 0)
		ct_fail(c, "rm -rf %s: %s", CT_TESTDIR, ct_strerr(rc));
out:
	free(count);
	return rc < 0 ? -1 : 0;
}

static int ct_expect_nlink(struct ct_ctx *c, const char *p, uint32_t nlink)
{
	struct ct_stat st;
	int rc = c->fs->ops->stat(c->fs, p, &st);

	if (rc < 0)
		return ct_fail(c, "stat %s: %s", p, ct_strerr(rc));
	if (st.nlink != nlink)
		return ct_fail(c, "%s has %u links, expected %u", p, st.nlink, nlink);
	return 0;
}

/* test7: rename, link, unlink with the link counts */
static int ct_test7(struct ct_ctx *c, char *what, size_t wlen)
{
	double t;

	if (ct_testdir(c) < 0 || ct_make_files(c, CT_TESTDIR "/file.%d", c->p.link_files) < 0)
		return -1;
	t = ct_now();
	for (int ct = 0; ct < c->p.link_count; ct++) {
		for (int i = 0; i < c->p.link_files; i++) {
			char p[PATH_MAX], q[PATH_MAX];
			struct ct_stat st;
			int rc;

			snprintf(p, sizeof(p), CT_TESTDIR "/file.%d", i);
			snprintf(q, sizeof(q), CT_TESTDIR "/newfile.%d", i);
			rc = c->fs->ops->rename(c->fs, p, q);
			if (rc < 0)
				return ct_fail(c, "rename %s %s: %s", p, q, ct_strerr(rc));
			rc = c->fs->ops->stat(c->fs, p, &st);
			if (rc != -ENOENT)
				return ct_fail(c, "stat %s after its rename: %s, expected ENOENT", p,
					       ct_strerr(rc));
			if (ct_expect_nlink(c, q, 1) < 0)
				return -1;
			rc = c->fs->ops->link(c->fs, q, p);
			if (rc < 0)
				return ct_fail(c, "link %s %s: %s", q, p, ct_strerr(rc));
			if (ct_expect_nlink(c, q, 2) < 0 || ct_expect_nlink(c, p, 2) < 0)
				return -1;
			rc = c->fs->ops->unlink(c->fs, q);
			if (rc < 0)
				return ct_fail(c, "unlink %s: %s", q, ct_strerr(rc));
			if (ct_expect_nlink(c, p, 1) < 0)
				return -1;
		}
	}
	c->secs[CT_LINK] = ct_now() - t;
	c->done[CT_LINK] = 1;
	snprintf(what, wlen, "%d renames and links on %d files in %.3f s",
		 c->p.link_count * c->p.link_files * 2, c->p.link_files, c->secs[CT_LINK]);
	return 0;
}

/* test8: symlink, lstat, readlink, unlink */
static int ct_test8(struct ct_ctx *c, char *what, size_t wlen)
{
	double t;

	if (ct_testdir(c) < 0)
		return -1;
	t = ct_now();
	for (int ct = 0; ct < c->p.sym_count; ct++) {
		for (int i = 0; i < c->p.sym_files; i++) {
			char p[PATH_MAX], target[64], buf[PATH_MAX];
			struct ct_stat st;
			ssize_t n;
			int rc;

			snprintf(p, sizeof(p), CT_TESTDIR "/file.%d", i);
			snprintf(target, sizeof(target), "/this/is/a/symlink%d", i);
			rc = c->fs->ops->symlink(c->fs, target, p);
			if (rc < 0)
				return ct_fail(c, "symlink %s -> %s: %s", p, target, ct_strerr(rc));
			rc = c->fs->ops->lstat(c->fs, p, &st);
			if (rc < 0)
				return ct_fail(c, "lstat %s: %s", p, ct_strerr(rc));
			if (!S_ISLNK(st.mode))
				return ct_fail(c, "%s: mode 0%o, expected a symbolic link", p, st.mode);
			n = c->fs->ops->readlink(c->fs, p, buf, sizeof(buf));
			if (n < 0)
				return ct_fail(c, "readlink %s: %s", p, ct_strerr((int)n));
			if ((size_t)n != strlen(target) || strcmp(buf, target))
				return ct_fail(c, "readlink %s: \"%s\", expected \"%s\"", p, buf, target);
			rc = c->fs->ops->unlink(c->fs, p);
			if (rc < 0)
				return ct_fail(c, "unlink %s: %s", p, ct_strerr(rc));
		}
	}
	c->secs[CT_SYMLINK] = ct_now() - t;
	c->done[CT_SYMLINK] = 1;
	snprintf(what, wlen, "%d symlinks and readlinks on %d files in %.3f s",
		 c->p.sym_count * c->p.sym_files * 2, c->p.sym_files, c->secs[CT_SYMLINK]);
	return 0;
}

/* test9: statfs */
static int ct_test9(struct ct_ctx *c, char *what, size_t wlen)
{
	double t;

	if (ct_testdir(c) < 0)
		return -1;
	t = ct_now();
	for (int ct = 0; ct < c->p.statfs_count; ct++) {
		uint64_t blocks = 0, files = 0;
		int rc = c->fs->ops->statfs(c->fs, CT_TESTDIR, &blocks, &files);

		if (rc < 0)
			return ct_fail(c, "statfs %s: %s", CT_TESTDIR, ct_strerr(rc));
		if (blocks == 0)
			return ct_fail(c, "statfs %s: 0 blocks", CT_TESTDIR);
	}
	c->secs[CT_STATFS] = ct_now() - t;
	c->done[CT_STATFS] = 1;
	snprintf(what, wlen, "%d statfs calls in %.3f s", c->p.statfs_count, c->secs[CT_STATFS]);
	return ct_rm_rf(c->fs, CT_TESTDIR) < 0 ? ct_fail(c, "rm -rf %s", CT_TESTDIR) : 0;
}

typedef int (*ct_test_fn)(struct ct_ctx *c, char *what, size_t wlen);

static const struct {
	const char *name;
	ct_test_fn fn;
} ct_basic[] = {
	{ "test1 (create)", ct_test1 },
	{ "test2 (remove)", ct_test2 },
	{ "test3 (lookups, getcwd)", ct_test3 },
	{ "test4 (setattr, getattr)", ct_test4 },
	{ "test5 (write, read, compare)", ct_test5 },
	{ "test6 (readdir)", ct_test6 },
	{ "test7 (link, rename)", ct_test7 },
	{ "test8 (symlink, readlink)", ct_test8 },
	{ "test9 (statfs)", ct_test9 },
};

static void ct_run_basic(struct ct_ctx *c)
{
	for (size_t i = 0; i < sizeof(ct_basic) / sizeof(ct_basic[0]); i++) {
		char what[CT_MSG] = "";
		int rc = ct_basic[i].fn(c, what, sizeof(what));

		ct_report(c, ct_basic[i].name, rc, what);
		/* test2 needs test1's tree; without it, it has nothing to remove */
		if (rc < 0 && i == 0) {
			ct_fail(c, "skipped: test1 failed");
			ct_report(c, ct_basic[1].name, -1, NULL);
			i++;
		}
	}
}

/* ------------------------------------------------------------ raw NFSv3 */

/*
 * The special tests that must see the server's own answer (CREATE modes and
 * verifiers, READDIR pages and cookies, offsets libnfs would refuse, names
 * libnfs would split) talk NFSv3 through libnfs's raw API on connections of
 * their own. A reply that never comes fails the check; its callback may still
 * fire later, so a timed-out context is never destroyed (struct ct_res lives
 * in static storage while a call is pending: see ct_raw_call).
 */
struct ct_dent {
	char name[256];
	uint64_t fileid;
	uint64_t cookie;
	int type;			/* READDIRPLUS: ftype3, 0 unknown */
};

struct ct_res {
	int proc;
	int done;
	int rpc_status;
	char err[160];
	int status;			/* nfsstat3 (mountstat3 for MNT) */
	int has_fh;
	struct ct_fh fh;
	int has_attr;
	fattr3 attr;
	uint32_t count;
	int eof;
	int committed;			/* WRITE: stable_how of the reply */
	char verf[8];			/* READDIR cookieverf */
	struct ct_dent *ents;		/* READDIR: this page's entries */
	size_t nents;
	uint64_t maxfilesize;		/* FSINFO */
	uint64_t tbytes, tfiles;	/* FSSTAT */
	void *rbuf;			/* READ data / READLINK path go here */
	size_t rlen;			/* room in rbuf */
	size_t got;			/* bytes copied to rbuf */
};

struct ct_raw {
	struct rpc_context *rpc;
	struct ct_fh root;
	int dead;			/* a call timed out: the context is abandoned */
};

#define CT_PROC_MNT 1000

static void ct_copy_fh(struct ct_fh *dst, const nfs_fh3 *src)
{
	dst->len = src->data.data_len > NFS3_FHSIZE ? NFS3_FHSIZE : src->data.data_len;
	memcpy(dst->data, src->data.data_val, dst->len);
}

static nfs_fh3 ct_fh3(const struct ct_fh *fh)
{
	nfs_fh3 f;

	f.data.data_len = fh->len;
	f.data.data_val = (char *)fh->data;
	return f;
}

static void ct_copy_attr(struct ct_res *r, const post_op_attr *a)
{
	if (a->attributes_follow) {
		r->has_attr = 1;
		r->attr = a->post_op_attr_u.attributes;
	}
}

/* ct_copy_new -- the handle and attributes of a CREATE, MKDIR or SYMLINK */
static void ct_copy_new(struct ct_res *r, const post_op_fh3 *fh, const post_op_attr *a)
{
	if (fh->handle_follows) {
		r->has_fh = 1;
		ct_copy_fh(&r->fh, &fh->post_op_fh3_u.handle);
	}
	ct_copy_attr(r, a);
}

static void ct_raw_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct ct_res *r = priv;

	(void)rpc;
	r->done = 1;
	r->rpc_status = status;
	if (status != RPC_STATUS_SUCCESS) {
		snprintf(r->err, sizeof(r->err), "%s",
			 status == RPC_STATUS_ERROR && data ? (const char *)data : "cancelled");
		return;
	}
	/* every result starts with its status (nfsstat3, mountstat3) */
	r->status = r->proc == 0 ? 0 : data ? *(int *)data : -1;
	switch (r->proc) {
	case CT_PROC_MNT: {
		mountres3 *m = data;

		if (m->fhs_status == MNT3_OK) {
			fhandle3 *h = &m->mountres3_u.mountinfo.fhandle;

			r->has_fh = 1;
			r->fh.len = h->fhandle3_len > NFS3_FHSIZE ? NFS3_FHSIZE : h->fhandle3_len;
			memcpy(r->fh.data, h->fhandle3_val, r->fh.len);
		}
		break;
	}
	case NFS3_LOOKUP: {
		LOOKUP3res *l = data;

		if (l->status == NFS3_OK) {
			r->has_fh = 1;
			ct_copy_fh(&r->fh, &l->LOOKUP3res_u.resok.object);
			ct_copy_attr(r, &l->LOOKUP3res_u.resok.obj_attributes);
		}
		break;
	}
	case NFS3_GETATTR: {
		GETATTR3res *g = data;

		if (g->status == NFS3_OK) {
			r->has_attr = 1;
			r->attr = g->GETATTR3res_u.resok.obj_attributes;
		}
		break;
	}
	case NFS3_CREATE: {
		CREATE3res *c = data;

		if (c->status == NFS3_OK)
			ct_copy_new(r, &c->CREATE3res_u.resok.obj, &c->CREATE3res_u.resok.obj_attributes);
		break;
	}
	case NFS3_MKDIR: {
		MKDIR3res *m = data;

		if (m->status == NFS3_OK)
			ct_copy_new(r, &m->MKDIR3res_u.resok.obj, &m->MKDIR3res_u.resok.obj_attributes);
		break;
	}
	case NFS3_SYMLINK: {
		SYMLINK3res *m = data;

		if (m->status == NFS3_OK)
			ct_copy_new(r, &m->SYMLINK3res_u.resok.obj, &m->SYMLINK3res_u.resok.obj_attributes);
		break;
	}
	case NFS3_READLINK: {
		READLINK3res *l = data;

		if (l->status == NFS3_OK && r->rbuf && r->rlen) {
			const char *t = l->READLINK3res_u.resok.data;
			size_t n = strlen(t);

			if (n > r->rlen - 1)
				n = r->rlen - 1;
			memcpy(r->rbuf, t, n);
			((char *)r->rbuf)[n] = '\0';
			r->got = n;
		}
		break;
	}
	case NFS3_LINK: {
		LINK3res *l = data;

		if (l->status == NFS3_OK)
			ct_copy_attr(r, &l->LINK3res_u.resok.file_attributes);
		break;
	}
	case NFS3_FSSTAT: {
		FSSTAT3res *f = data;

		if (f->status == NFS3_OK) {
			r->tbytes = f->FSSTAT3res_u.resok.tbytes;
			r->tfiles = f->FSSTAT3res_u.resok.tfiles;
		}
		break;
	}
	case NFS3_SETATTR: {
		SETATTR3res *a = data;

		if (a->status == NFS3_OK && a->SETATTR3res_u.resok.obj_wcc.after.attributes_follow) {
			r->has_attr = 1;
			r->attr = a->SETATTR3res_u.resok.obj_wcc.after.post_op_attr_u.attributes;
		}
		break;
	}
	case NFS3_READDIRPLUS: {
		READDIRPLUS3res *d = data;

		if (d->status == NFS3_OK) {
			size_t n = 0;

			entryplus3 e;	/* copied out: see READDIR */

			for (void *p = d->READDIRPLUS3res_u.resok.reply.entries; p; p = e.nextentry) {
				memcpy(&e, p, sizeof(e));
				n++;
			}
			r->ents = calloc(n ? n : 1, sizeof(*r->ents));
			if (!r->ents) {
				r->status = -1;
				break;
			}
			for (void *p = d->READDIRPLUS3res_u.resok.reply.entries; p; p = e.nextentry) {
				struct ct_dent *x = &r->ents[r->nents++];

				memcpy(&e, p, sizeof(e));
				snprintf(x->name, sizeof(x->name), "%s", e.name);
				x->fileid = e.fileid;
				x->cookie = e.cookie;
				if (e.name_attributes.attributes_follow)
					x->type = e.name_attributes.post_op_attr_u.attributes.type;
			}
			r->eof = d->READDIRPLUS3res_u.resok.reply.eof;
			memcpy(r->verf, d->READDIRPLUS3res_u.resok.cookieverf, 8);
		}
		break;
	}
	case NFS3_READ: {
		READ3res *rd = data;

		if (rd->status == NFS3_OK) {
			r->count = rd->READ3res_u.resok.count;
			r->eof = rd->READ3res_u.resok.eof;
			if (r->rbuf) {
				size_t n = rd->READ3res_u.resok.data.data_len;

				if (n > r->rlen)
					n = r->rlen;
				memcpy(r->rbuf, rd->READ3res_u.resok.data.data_val, n);
				r->got = n;
			}
		}
		break;
	}
	case NFS3_WRITE: {
		WRITE3res *w = data;

		if (w->status == NFS3_OK) {
			r->count = w->WRITE3res_u.resok.count;
			r->committed = w->WRITE3res_u.resok.committed;
		}
		break;
	}
	case NFS3_READDIR: {
		READDIR3res *d = data;

		if (d->status == NFS3_OK) {
			size_t n = 0;

			/* libnfs 4.0's decoder may place entries at addresses not
			 * aligned for their 64-bit members (UBSan says so): each is
			 * copied out before use */
			entry3 e;

			for (void *p = d->READDIR3res_u.resok.reply.entries; p; p = e.nextentry) {
				memcpy(&e, p, sizeof(e));
				n++;
			}
			r->ents = calloc(n ? n : 1, sizeof(*r->ents));
			if (!r->ents) {
				r->status = -1;
				break;
			}
			for (void *p = d->READDIR3res_u.resok.reply.entries; p; p = e.nextentry) {
				struct ct_dent *x = &r->ents[r->nents++];

				memcpy(&e, p, sizeof(e));
				snprintf(x->name, sizeof(x->name), "%s", e.name);
				x->fileid = e.fileid;
				x->cookie = e.cookie;
			}
			r->eof = d->READDIR3res_u.resok.reply.eof;
			memcpy(r->verf, d->READDIR3res_u.resok.cookieverf, 8);
		}
		break;
	}
	case NFS3_FSINFO: {
		FSINFO3res *f = data;

		if (f->status == NFS3_OK)
			r->maxfilesize = f->FSINFO3res_u.resok.maxfilesize;
		break;
	}
	default:	/* 0 (a connection) and the rest: the status only */
		break;
	}
}

/* -p: seconds the raw client polls without sleeping after it sends a call
 * (timed mode; as loadgen -p, see tests/bench/loadgen.c: on this VM a client
 * asleep when its reply comes pays the wake-up of its halted vCPU) */
static double ct_spin_s;

/* ct_rpc_wait -- run RPC's loop until *done; 0, or -1 on timeout or error */
static int ct_rpc_wait(struct rpc_context *rpc, const int *done)
{
	double now = ct_now(), deadline = now + CT_TIMEOUT_MS / 1000.0;
	double spin_end = now + ct_spin_s;

	while (!*done) {
		struct pollfd p = { .fd = rpc_get_fd(rpc), .events = (short)rpc_which_events(rpc) };
		int n;

		now = ct_now();
		if (now > deadline)
			return -1;
		n = poll(&p, 1, now < spin_end ? 0 : 100);
		if (n < 0 && errno != EINTR)
			return -1;
		if (n == 0 && now < spin_end)
			sched_yield();	/* a thread of the server's waits for a CPU */
		if (rpc_service(rpc, n > 0 ? p.revents : 0) < 0)
			return -1;
	}
	return 0;
}

static void ct_res_reset(struct ct_res *r, int proc)
{
	free(r->ents);
	memset(r, 0, sizeof(*r));
	r->proc = proc;
	r->status = -1;
}

static int ct_connect(struct rpc_context *rpc, int port, int prog, int vers)
{
	static struct ct_res r;

	ct_res_reset(&r, 0);
	if (rpc_connect_port_async(rpc, "127.0.0.1", port, prog, vers, ct_raw_cb, &r) < 0)
		return -1;
	if (ct_rpc_wait(rpc, &r.done) < 0 || r.rpc_status != RPC_STATUS_SUCCESS)
		return -1;
	return 0;
}

/* ct_raw_open -- MNT EXPORT on MOUNT_PORT, then a connection to NFS_PORT */
static int ct_raw_open(struct ct_raw *raw, int nfs_port, int mount_port, const char *export)
{
	struct rpc_context *mnt = rpc_init_context();
	static struct ct_res r;
	int rc = -1;

	memset(raw, 0, sizeof(*raw));
	if (!mnt)
		return -1;
	if (ct_connect(mnt, mount_port, MOUNT_PROGRAM, MOUNT_V3) < 0)
		goto out;
	ct_res_reset(&r, CT_PROC_MNT);
	if (rpc_mount3_mnt_async(mnt, ct_raw_cb, (char *)export, &r) < 0 ||
	    ct_rpc_wait(mnt, &r.done) < 0 || r.status != 0 || !r.has_fh)
		goto out;
	raw->root = r.fh;
	raw->rpc = rpc_init_context();
	if (!raw->rpc || ct_connect(raw->rpc, nfs_port, NFS_PROGRAM, NFS_V3) < 0) {
		if (raw->rpc)
			rpc_destroy_context(raw->rpc);
		raw->rpc = NULL;
		goto out;
	}
	rc = 0;
out:
	if (r.done || rc == 0)
		rpc_destroy_context(mnt);
	return rc;
}

static void ct_raw_close(struct ct_raw *raw)
{
	if (raw->rpc && !raw->dead)
		rpc_destroy_context(raw->rpc);
	raw->rpc = NULL;
}

/*
 * ct_raw_call -- send PROC with ARGS, wait for the reply into *R; returns the
 * nfsstat3, or -1 when the RPC failed (r->err). R must outlive the context
 * when the call times out: callers pass static results.
 */
static int ct_raw_send(struct ct_raw *raw, int proc, void *args, struct ct_res *r)
{
	int rc;

	if (!raw->rpc || raw->dead) {
		snprintf(r->err, sizeof(r->err), "no connection");
		return -1;
	}
	switch (proc) {
	case NFS3_LOOKUP: rc = rpc_nfs3_lookup_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_GETATTR: rc = rpc_nfs3_getattr_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_SETATTR: rc = rpc_nfs3_setattr_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_CREATE: rc = rpc_nfs3_create_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_REMOVE: rc = rpc_nfs3_remove_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_READ: rc = rpc_nfs3_read_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_WRITE: rc = rpc_nfs3_write_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_READDIR: rc = rpc_nfs3_readdir_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_FSINFO: rc = rpc_nfs3_fsinfo_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_FSSTAT: rc = rpc_nfs3_fsstat_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_MKDIR: rc = rpc_nfs3_mkdir_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_RMDIR: rc = rpc_nfs3_rmdir_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_SYMLINK: rc = rpc_nfs3_symlink_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_READLINK: rc = rpc_nfs3_readlink_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_RENAME: rc = rpc_nfs3_rename_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_LINK: rc = rpc_nfs3_link_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_COMMIT: rc = rpc_nfs3_commit_async(raw->rpc, ct_raw_cb, args, r); break;
	case NFS3_READDIRPLUS: rc = rpc_nfs3_readdirplus_async(raw->rpc, ct_raw_cb, args, r); break;
	default: rc = -1; break;
	}
	if (rc < 0) {
		snprintf(r->err, sizeof(r->err), "cannot queue: %s", rpc_get_error(raw->rpc));
		return -1;
	}
	if (ct_rpc_wait(raw->rpc, &r->done) < 0) {
		snprintf(r->err, sizeof(r->err), "no reply within %d ms", CT_TIMEOUT_MS);
		raw->dead = 1;
		return -1;
	}
	return r->rpc_status == RPC_STATUS_SUCCESS ? r->status : -1;
}

static int ct_raw_call(struct ct_raw *raw, int proc, void *args, struct ct_res *r)
{
	ct_res_reset(r, proc);
	return ct_raw_send(raw, proc, args, r);
}

/* ct_raw_call_buf -- the same, READ data or READLINK path into BUF */
static int ct_raw_call_buf(struct ct_raw *raw, int proc, void *args, struct ct_res *r, void *buf, size_t len)
{
	ct_res_reset(r, proc);
	r->rbuf = buf;
	r->rlen = len;
	return ct_raw_send(raw, proc, args, r);
}

static int ct_raw_lookup(struct ct_raw *raw, const struct ct_fh *dir, const char *name, struct ct_res *r)
{
	LOOKUP3args a = { .what = { .dir = ct_fh3(dir), .name = (char *)name } };

	return ct_raw_call(raw, NFS3_LOOKUP, &a, r);
}

/* ct_raw_create -- CREATE NAME in DIR: how UNCHECKED/GUARDED with MODE (or
 * -1: no attributes), EXCLUSIVE with VERF */
static int ct_raw_create(struct ct_raw *raw, const struct ct_fh *dir, const char *name, int how,
			 int mode, const char *verf, struct ct_res *r)
{
	CREATE3args a;

	memset(&a, 0, sizeof(a));
	a.where.dir = ct_fh3(dir);
	a.where.name = (char *)name;
	a.how.mode = how;
	if (how == EXCLUSIVE) {
		memcpy(a.how.createhow3_u.verf, verf, NFS3_CREATEVERFSIZE);
	} else if (mode >= 0) {
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = (mode3)mode;
	}
	return ct_raw_call(raw, NFS3_CREATE, &a, r);
}

static const char *ct_nfsstat(int st)
{
	static char buf[64];

	if (st == -1)
		return "no reply";
	snprintf(buf, sizeof(buf), "%s (%d)", nfsstat3_to_str(st), st);
	return buf;
}

/* ------------------------------------------------------------ raw client */

/*
 * The "nfs3" client: the same operations as the libnfs backend, sent as
 * single NFSv3 procedures on (directory handle, name) the way a kernel
 * client sends them once its dentry cache knows the directory. libnfs's
 * high-level API resolves every path from the root with one LOOKUP per
 * component, so its create of dir.0/dir.1/dir.0/dir.1/file.3 is six
 * LOOKUPs and one CREATE: LOOKUPs, which no stable-storage policy changes,
 * would then dominate every row. This client keeps the handles it learns
 * (LOOKUP, CREATE, MKDIR, SYMLINK) in a small name cache, drops them on
 * REMOVE, RMDIR and RENAME, and does what Linux's NFSv3 client does per
 * call: open(O_CREAT|O_EXCL) is CREATE EXCLUSIVE then SETATTR of the mode,
 * other creates are UNCHECKED with the mode; writes are UNSTABLE and close
 * COMMITs them (close-to-open) unless every reply said the data was already
 * on stable storage (FILE_SYNC or DATA_SYNC); readdir is READDIRPLUS; stat
 * of a known name is GETATTR, of a new one LOOKUP. stat does not follow a
 * symbolic link (the tests never stat one through its link).
 *
 * "nfs3-ac" adds what a kernel client's attribute cache does (actimeo 3 s):
 * the post-op attributes of LOOKUP, CREATE, MKDIR, SYMLINK, SETATTR, LINK
 * and GETATTR answer a stat for 3 s, names removed or renamed away answer
 * ENOENT without a LOOKUP, and a WRITE, a REMOVE or a RENAME over a name
 * forgets the attributes of the object they changed (of all its names).
 * Every stat of "nfs3" reaches the server; "nfs3-ac" sends the server what a
 * Connectathon run on a kernel mount sends it.
 */
#define CT_KC_BUCKETS 4096

struct ct_kc_ent {
	struct ct_kc_ent *next;
	struct ct_fh fh;
	int negative;			/* a name known not to exist (nfs3-ac) */
	int has_attr;			/* attr valid (nfs3-ac) */
	double attr_t;			/* when attr or negative was learnt */
	fattr3 attr;
	char path[];
};

struct ct_kc {
	struct ct_raw raw;
	struct ct_kc_ent *b[CT_KC_BUCKETS];
	uint32_t verf;			/* CREATE EXCLUSIVE verifiers */
	double actimeo;			/* nfs3-ac: attribute and negative-name cache
					   lifetime in seconds; 0: no such cache */
	struct ct_res r;		/* static for the lifetime of the context */
};

static uint32_t ct_kc_hash(const char *p)
{
	uint32_t h = 2166136261u;

	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h % CT_KC_BUCKETS;
}

static struct ct_kc_ent *ct_kc_find(struct ct_kc *kc, const char *path)
{
	for (struct ct_kc_ent *e = kc->b[ct_kc_hash(path)]; e; e = e->next)
		if (!strcmp(e->path, path))
			return e;
	return NULL;
}

static int ct_kc_get(struct ct_kc *kc, const char *path, struct ct_fh *fh)
{
	struct ct_kc_ent *e;

	if (!*path) {
		*fh = kc->raw.root;
		return 1;
	}
	e = ct_kc_find(kc, path);
	if (!e || e->negative)
		return 0;
	*fh = e->fh;
	return 1;
}

static struct ct_kc_ent *ct_kc_put(struct ct_kc *kc, const char *path, const struct ct_fh *fh)
{
	uint32_t h = ct_kc_hash(path);
	struct ct_kc_ent *e = ct_kc_find(kc, path);

	if (!e) {
		e = calloc(1, sizeof(*e) + strlen(path) + 1);
		if (!e)
			return NULL;
		strcpy(e->path, path);
		e->next = kc->b[h];
		kc->b[h] = e;
	}
	if (e->negative || fh->len != e->fh.len || memcmp(fh->data, e->fh.data, fh->len))
		e->has_attr = 0;
	e->negative = 0;
	e->fh = *fh;
	return e;
}

/* ct_kc_attr -- nfs3-ac: attributes of PATH from a reply (post-op
 * attributes, as a kernel client keeps them) */
static void ct_kc_attr(struct ct_kc *kc, const char *path, const fattr3 *a)
{
	struct ct_kc_ent *e;

	if (!kc->actimeo || !path || !(e = ct_kc_find(kc, path)) || e->negative)
		return;
	e->attr = *a;
	e->has_attr = 1;
	e->attr_t = ct_now();
}

/* ct_kc_unattr -- PATH's attributes changed in a way no reply told */
static void ct_kc_unattr(struct ct_kc *kc, const char *path)
{
	struct ct_kc_ent *e = path && *path ? ct_kc_find(kc, path) : NULL;

	if (e)
		e->has_attr = 0;
}

/* ct_kc_unattr_obj -- nfs3-ac: PATH's object changed (its link count, by
 * a REMOVE or a RENAME over it): forget the attributes of every name of
 * that object, as a kernel client's inode holds them for all its names */
static void ct_kc_unattr_obj(struct ct_kc *kc, const char *path)
{
	struct ct_kc_ent *e = kc->actimeo ? ct_kc_find(kc, path) : NULL;
	struct ct_fh fh;

	if (!e || e->negative)
		return;
	fh = e->fh;
	for (int i = 0; i < CT_KC_BUCKETS; i++)
		for (e = kc->b[i]; e; e = e->next)
			if (!e->negative && e->fh.len == fh.len && !memcmp(e->fh.data, fh.data, fh.len))
				e->has_attr = 0;
}

/* ct_kc_negative -- nfs3-ac: PATH is known not to exist */
static void ct_kc_negative(struct ct_kc *kc, const char *path)
{
	struct ct_fh none = { 0 };
	struct ct_kc_ent *e;

	if (!kc->actimeo || !(e = ct_kc_put(kc, path, &none)))
		return;
	e->negative = 1;
	e->attr_t = ct_now();
}

/* ct_kc_cached -- nfs3-ac: 0 and *st from fresh cached attributes,
 * -ENOENT for a fresh negative name, 1 when the server must be asked */
static int ct_kc_cached(struct ct_kc *kc, const char *path, struct ct_stat *st);

/* ct_kc_drop -- forget PATH and, with TREE, every name below it */
static void ct_kc_drop(struct ct_kc *kc, const char *path, int tree)
{
	size_t n = strlen(path);

	for (uint32_t i = tree ? 0 : ct_kc_hash(path); i < CT_KC_BUCKETS; i++) {
		for (struct ct_kc_ent **pp = &kc->b[i]; *pp;) {
			struct ct_kc_ent *e = *pp;

			if (!strcmp(e->path, path) || (tree && !strncmp(e->path, path, n) && e->path[n] == '/')) {
				*pp = e->next;
				free(e);
			} else {
				pp = &e->next;
			}
		}
		if (!tree)
			break;
	}
}

static void ct_kc_free(struct ct_kc *kc)
{
	if (!kc)
		return;
	for (int i = 0; i < CT_KC_BUCKETS; i++)
		while (kc->b[i]) {
			struct ct_kc_ent *e = kc->b[i];

			kc->b[i] = e->next;
			free(e);
		}
	ct_raw_close(&kc->raw);
	if (!kc->raw.dead)
		free(kc);
}

/* ct_kc_errno -- an NFSv3 status (or -1: no reply) as a negative errno */
static int ct_kc_errno(int st)
{
	int e;

	if (st == NFS3_OK)
		return 0;
	if (st < 0)
		return -EIO;
	e = nfsstat3_to_errno(st);
	if (e == 0)
		return -EIO;
	return e < 0 ? e : -e;
}

/* ct_kc_split -- PATH into its parent and last name (NAME points into PATH) */
static void ct_kc_split(const char *path, char *parent, size_t plen, const char **name)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		parent[0] = '\0';
		*name = path;
		return;
	}
	snprintf(parent, plen, "%.*s", (int)(slash - path), path);
	*name = slash + 1;
}

/* ct_kc_fh -- the handle of PATH (cached, or LOOKUP of each unknown
 * component); with ATTR, also its attributes when a LOOKUP gave them */
static int ct_kc_fh(struct ct_kc *kc, const char *path, struct ct_fh *fh, fattr3 *attr, int *has_attr)
{
	char parent[PATH_MAX];
	const char *name;
	struct ct_fh dir;
	int rc, st;

	if (has_attr)
		*has_attr = 0;
	if (ct_kc_get(kc, path, fh))
		return 0;
	if (kc->actimeo) {
		struct ct_kc_ent *e = ct_kc_find(kc, path);

		if (e && e->negative && ct_now() - e->attr_t < kc->actimeo)
			return -ENOENT;
	}
	ct_kc_split(path, parent, sizeof(parent), &name);
	rc = ct_kc_fh(kc, parent, &dir, NULL, NULL);
	if (rc < 0)
		return rc;
	st = ct_raw_lookup(&kc->raw, &dir, name, &kc->r);
	if (st == NFS3ERR_NOENT)
		ct_kc_negative(kc, path);
	if (st != NFS3_OK)
		return ct_kc_errno(st);
	*fh = kc->r.fh;
	if (attr && kc->r.has_attr) {
		*attr = kc->r.attr;
		*has_attr = 1;
	}
	ct_kc_put(kc, path, fh);
	if (kc->r.has_attr)
		ct_kc_attr(kc, path, &kc->r.attr);
	return 0;
}

static int ct_kc_parent(struct ct_kc *kc, const char *path, struct ct_fh *dir, const char **name)
{
	char parent[PATH_MAX];

	ct_kc_split(path, parent, sizeof(parent), name);
	return ct_kc_fh(kc, parent, dir, NULL, NULL);
}

static void ct_kc_st(struct ct_stat *st, const fattr3 *a)
{
	static const uint32_t type[] = { 0, S_IFREG, S_IFDIR, S_IFBLK, S_IFCHR, S_IFLNK, S_IFSOCK, S_IFIFO };

	st->ino = a->fileid;
	st->size = a->size;
	st->mode = (a->mode & 07777) | (a->type < 8 ? type[a->type] : 0);
	st->nlink = a->nlink;
}

static int ct_kc_cached(struct ct_kc *kc, const char *path, struct ct_stat *st)
{
	struct ct_kc_ent *e;

	if (!kc->actimeo || !*path || !(e = ct_kc_find(kc, path)) || ct_now() - e->attr_t >= kc->actimeo)
		return 1;
	if (e->negative)
		return -ENOENT;
	if (!e->has_attr)
		return 1;
	ct_kc_st(st, &e->attr);
	return 0;
}

static int ct_kc_mkdir(struct ct_fs *fs, const char *path, int mode)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh dir;
	const char *name;
	MKDIR3args a;
	int rc = ct_kc_parent(kc, path, &dir, &name), st;

	if (rc < 0)
		return rc;
	memset(&a, 0, sizeof(a));
	a.where.dir = ct_fh3(&dir);
	a.where.name = (char *)name;
	a.attributes.mode.set_it = 1;
	a.attributes.mode.set_mode3_u.mode = (mode3)mode;
	st = ct_raw_call(&kc->raw, NFS3_MKDIR, &a, &kc->r);
	if (st == NFS3_OK && kc->r.has_fh) {
		ct_kc_put(kc, path, &kc->r.fh);
		if (kc->r.has_attr)
			ct_kc_attr(kc, path, &kc->r.attr);
	}
	return ct_kc_errno(st);
}

static int ct_kc_rmdir(struct ct_fs *fs, const char *path)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh dir;
	const char *name;
	int rc = ct_kc_parent(kc, path, &dir, &name), st;
	RMDIR3args a;

	if (rc < 0)
		return rc;
	a.object.dir = ct_fh3(&dir);
	a.object.name = (char *)name;
	st = ct_raw_call(&kc->raw, NFS3_RMDIR, &a, &kc->r);
	if (st == NFS3_OK) {
		ct_kc_drop(kc, path, 1);
		ct_kc_negative(kc, path);
	}
	return ct_kc_errno(st);
}

/* ct_kc_setattr -- SETATTR of FH (PATH when known: its cached attributes
 * become the reply's post-op attributes) */
static int ct_kc_setattr(struct ct_kc *kc, const struct ct_fh *fh, const char *path, const sattr3 *attr)
{
	SETATTR3args a;
	int st;

	memset(&a, 0, sizeof(a));
	a.object = ct_fh3(fh);
	a.new_attributes = *attr;
	st = ct_raw_call(&kc->raw, NFS3_SETATTR, &a, &kc->r);
	if (st == NFS3_OK && kc->r.has_attr)
		ct_kc_attr(kc, path, &kc->r.attr);
	else
		ct_kc_unattr(kc, path);
	return ct_kc_errno(st);
}

static int ct_kc_create(struct ct_fs *fs, const char *path, int flags, int mode, struct ct_file *f)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh dir;
	const char *name;
	CREATE3args a;
	int rc = ct_kc_parent(kc, path, &dir, &name), st;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (rc < 0)
		return rc;
	memset(&a, 0, sizeof(a));
	a.where.dir = ct_fh3(&dir);
	a.where.name = (char *)name;
	if (flags & O_EXCL) {
		uint32_t v[2] = { (uint32_t)getpid(), ++kc->verf };

		a.how.mode = EXCLUSIVE;
		memcpy(a.how.createhow3_u.verf, v, sizeof(v));
	} else {
		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = (mode3)mode;
		if (flags & O_TRUNC) {
			a.how.createhow3_u.obj_attributes.size.set_it = 1;
			a.how.createhow3_u.obj_attributes.size.set_size3_u.size = 0;
		}
	}
	st = ct_raw_call(&kc->raw, NFS3_CREATE, &a, &kc->r);
	if (st != NFS3_OK)
		return ct_kc_errno(st);
	snprintf(f->kpath, sizeof(f->kpath), "%s", path);
	if (kc->r.has_fh) {
		f->kfh = kc->r.fh;
		ct_kc_put(kc, path, &f->kfh);
		if (kc->r.has_attr)
			ct_kc_attr(kc, path, &kc->r.attr);
	} else {
		ct_kc_drop(kc, path, 0);
		rc = ct_kc_fh(kc, path, &f->kfh, NULL, NULL);
		if (rc < 0)
			return rc;
	}
	if (flags & O_EXCL) {
		/* the attributes an EXCLUSIVE create could not carry */
		sattr3 sa;

		memset(&sa, 0, sizeof(sa));
		sa.mode.set_it = 1;
		sa.mode.set_mode3_u.mode = (mode3)mode;
		return ct_kc_setattr(kc, &f->kfh, path, &sa);
	}
	return 0;
}

static int ct_kc_open(struct ct_fs *fs, const char *path, int flags, struct ct_file *f)
{
	struct ct_kc *kc = fs->kc;
	int rc;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	rc = ct_kc_fh(kc, path, &f->kfh, NULL, NULL);
	snprintf(f->kpath, sizeof(f->kpath), "%s", path);
	if (rc == 0 && (flags & O_TRUNC)) {
		sattr3 sa;

		memset(&sa, 0, sizeof(sa));
		sa.size.set_it = 1;
		sa.size.set_size3_u.size = 0;
		rc = ct_kc_setattr(kc, &f->kfh, path, &sa);
	}
	return rc;
}

static ssize_t ct_kc_pwrite(struct ct_fs *fs, struct ct_file *f, const void *buf, size_t len, uint64_t off)
{
	struct ct_kc *kc = fs->kc;
	WRITE3args a;
	int st;

	memset(&a, 0, sizeof(a));
	a.file = ct_fh3(&f->kfh);
	a.offset = off;
	a.count = (count3)len;
	a.stable = UNSTABLE;
	a.data.data_len = (u_int)len;
	a.data.data_val = (char *)buf;
	st = ct_raw_call(&kc->raw, NFS3_WRITE, &a, &kc->r);
	if (st != NFS3_OK)
		return ct_kc_errno(st);
	/* only data the server acknowledged as UNSTABLE needs a COMMIT */
	if (kc->r.committed == UNSTABLE)
		f->dirty = 1;
	ct_kc_unattr(kc, f->kpath);
	return kc->r.count;
}

static ssize_t ct_kc_pread(struct ct_fs *fs, struct ct_file *f, void *buf, size_t len, uint64_t off)
{
	struct ct_kc *kc = fs->kc;
	size_t done = 0;

	/* one READ of at most 64 KiB per call, as many as LEN needs */
	while (done < len) {
		size_t n = len - done < 65536 ? len - done : 65536;
		READ3args a = { .file = ct_fh3(&f->kfh), .offset = off + done, .count = (count3)n };
		int st = ct_raw_call_buf(&kc->raw, NFS3_READ, &a, &kc->r, (char *)buf + done, n);

		if (st != NFS3_OK)
			return ct_kc_errno(st);
		done += kc->r.got;
		if (kc->r.eof || kc->r.got == 0)
			break;
	}
	return (ssize_t)done;
}

static int ct_kc_getattr(struct ct_kc *kc, const struct ct_fh *fh, struct ct_stat *st)
{
	GETATTR3args a = { .object = ct_fh3(fh) };
	int s = ct_raw_call(&kc->raw, NFS3_GETATTR, &a, &kc->r);

	if (s == NFS3_OK)
		ct_kc_st(st, &kc->r.attr);
	return ct_kc_errno(s);
}

static int ct_kc_fstat(struct ct_fs *fs, struct ct_file *f, struct ct_stat *st)
{
	return ct_kc_getattr(fs->kc, &f->kfh, st);
}

static int ct_kc_ftruncate(struct ct_fs *fs, struct ct_file *f, uint64_t len)
{
	sattr3 sa;

	memset(&sa, 0, sizeof(sa));
	sa.size.set_it = 1;
	sa.size.set_size3_u.size = len;
	return ct_kc_setattr(fs->kc, &f->kfh, f->kpath, &sa);
}

static int ct_kc_close(struct ct_fs *fs, struct ct_file *f)
{
	COMMIT3args a = { .file = ct_fh3(&f->kfh) };
	int st;

	if (!f->dirty)
		return 0;
	f->dirty = 0;
	st = ct_raw_call(&fs->kc->raw, NFS3_COMMIT, &a, &fs->kc->r);
	return ct_kc_errno(st);
}

static int ct_kc_stat(struct ct_fs *fs, const char *path, struct ct_stat *st)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh fh;
	fattr3 attr;
	int has_attr, rc;

	rc = ct_kc_cached(kc, path, st);
	if (rc <= 0)
		return rc;
	if (ct_kc_get(kc, path, &fh)) {
		rc = ct_kc_getattr(kc, &fh, st);
		if (rc == 0)
			ct_kc_attr(kc, path, &kc->r.attr);
		if (rc != -ESTALE)
			return rc;
		/* removed behind the cache's back (a test's raw call): look again */
		ct_kc_drop(kc, path, 1);
	}
	rc = ct_kc_fh(kc, path, &fh, &attr, &has_attr);
	if (rc < 0)
		return rc;
	if (has_attr) {
		ct_kc_st(st, &attr);
		return 0;
	}
	return ct_kc_getattr(kc, &fh, st);
}

static int ct_kc_chmod(struct ct_fs *fs, const char *path, int mode)
{
	struct ct_fh fh;
	sattr3 sa;
	int rc = ct_kc_fh(fs->kc, path, &fh, NULL, NULL);

	if (rc < 0)
		return rc;
	memset(&sa, 0, sizeof(sa));
	sa.mode.set_it = 1;
	sa.mode.set_mode3_u.mode = (mode3)mode;
	return ct_kc_setattr(fs->kc, &fh, path, &sa);
}

static int ct_kc_utimes(struct ct_fs *fs, const char *path, time_t t)
{
	struct ct_fh fh;
	sattr3 sa;
	int rc = ct_kc_fh(fs->kc, path, &fh, NULL, NULL);

	if (rc < 0)
		return rc;
	memset(&sa, 0, sizeof(sa));
	sa.atime.set_it = SET_TO_CLIENT_TIME;
	sa.atime.set_atime_u.atime.seconds = (u_int)t;
	sa.mtime.set_it = SET_TO_CLIENT_TIME;
	sa.mtime.set_mtime_u.mtime.seconds = (u_int)t;
	return ct_kc_setattr(fs->kc, &fh, path, &sa);
}

static int ct_kc_unlink(struct ct_fs *fs, const char *path)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh dir;
	const char *name;
	int rc = ct_kc_parent(kc, path, &dir, &name), st;
	REMOVE3args a;

	if (rc < 0)
		return rc;
	a.object.dir = ct_fh3(&dir);
	a.object.name = (char *)name;
	st = ct_raw_call(&kc->raw, NFS3_REMOVE, &a, &kc->r);
	if (st == NFS3_OK) {
		ct_kc_unattr_obj(kc, path);
		ct_kc_drop(kc, path, 0);
		ct_kc_negative(kc, path);
	}
	return ct_kc_errno(st);
}

static int ct_kc_rename(struct ct_fs *fs, const char *from, const char *to)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh fdir, tdir;
	const char *fname, *tname;
	RENAME3args a;
	int rc, st;

	rc = ct_kc_parent(kc, from, &fdir, &fname);
	if (rc == 0)
		rc = ct_kc_parent(kc, to, &tdir, &tname);
	if (rc < 0)
		return rc;
	a.from.dir = ct_fh3(&fdir);
	a.from.name = (char *)fname;
	a.to.dir = ct_fh3(&tdir);
	a.to.name = (char *)tname;
	st = ct_raw_call(&kc->raw, NFS3_RENAME, &a, &kc->r);
	if (st == NFS3_OK && strcmp(from, to)) {
		ct_kc_unattr_obj(kc, to);
		ct_kc_drop(kc, from, 1);
		ct_kc_drop(kc, to, 1);
		ct_kc_negative(kc, from);
	}
	return ct_kc_errno(st);
}

static int ct_kc_link(struct ct_fs *fs, const char *from, const char *to)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh fh, dir;
	const char *name;
	LINK3args a;
	int rc = ct_kc_fh(kc, from, &fh, NULL, NULL);

	if (rc == 0)
		rc = ct_kc_parent(kc, to, &dir, &name);
	if (rc < 0)
		return rc;
	a.file = ct_fh3(&fh);
	a.link.dir = ct_fh3(&dir);
	a.link.name = (char *)name;
	rc = ct_kc_errno(ct_raw_call(&kc->raw, NFS3_LINK, &a, &kc->r));
	if (rc == 0) {
		ct_kc_put(kc, to, &fh);
		/* the link count changed: LINK's post-op attributes say how */
		if (kc->r.has_attr) {
			ct_kc_attr(kc, from, &kc->r.attr);
			ct_kc_attr(kc, to, &kc->r.attr);
		} else {
			ct_kc_unattr(kc, from);
		}
	}
	return rc;
}

static int ct_kc_symlink(struct ct_fs *fs, const char *target, const char *path)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh dir;
	const char *name;
	SYMLINK3args a;
	int rc = ct_kc_parent(kc, path, &dir, &name), st;

	if (rc < 0)
		return rc;
	memset(&a, 0, sizeof(a));
	a.where.dir = ct_fh3(&dir);
	a.where.name = (char *)name;
	a.symlink.symlink_attributes.mode.set_it = 1;
	a.symlink.symlink_attributes.mode.set_mode3_u.mode = 0777;
	a.symlink.symlink_data = (char *)target;
	st = ct_raw_call(&kc->raw, NFS3_SYMLINK, &a, &kc->r);
	if (st == NFS3_OK && kc->r.has_fh) {
		ct_kc_put(kc, path, &kc->r.fh);
		if (kc->r.has_attr)
			ct_kc_attr(kc, path, &kc->r.attr);
	}
	return ct_kc_errno(st);
}

static ssize_t ct_kc_readlink(struct ct_fs *fs, const char *path, char *buf, size_t len)
{
	struct ct_fh fh;
	READLINK3args a;
	int rc = ct_kc_fh(fs->kc, path, &fh, NULL, NULL), st;

	if (rc < 0)
		return rc;
	a.symlink = ct_fh3(&fh);
	buf[0] = '\0';
	st = ct_raw_call_buf(&fs->kc->raw, NFS3_READLINK, &a, &fs->kc->r, buf, len);
	if (st != NFS3_OK)
		return ct_kc_errno(st);
	return (ssize_t)fs->kc->r.got;
}

static int ct_kc_statfs(struct ct_fs *fs, const char *path, uint64_t *blocks, uint64_t *files)
{
	struct ct_fh fh;
	FSSTAT3args a;
	int rc = ct_kc_fh(fs->kc, path, &fh, NULL, NULL), st;

	if (rc < 0)
		return rc;
	a.fsroot = ct_fh3(&fh);
	st = ct_raw_call(&fs->kc->raw, NFS3_FSSTAT, &a, &fs->kc->r);
	if (st == NFS3_OK) {
		*blocks = fs->kc->r.tbytes / 512;
		*files = fs->kc->r.tfiles;
	}
	return ct_kc_errno(st);
}

static int ct_kc_readdir(struct ct_fs *fs, const char *path, ct_readdir_cb cb, void *arg)
{
	struct ct_kc *kc = fs->kc;
	struct ct_fh dir;
	uint64_t cookie = 0;
	char verf[8] = { 0 };
	int rc = ct_kc_fh(kc, path, &dir, NULL, NULL), pages = 0;

	if (rc < 0)
		return rc;
	for (;;) {
		READDIRPLUS3args a = { .dir = ct_fh3(&dir), .cookie = cookie, .dircount = 8192,
				       .maxcount = 32768 };
		int st, stop = 0;

		memcpy(a.cookieverf, verf, 8);
		st = ct_raw_call(&kc->raw, NFS3_READDIRPLUS, &a, &kc->r);
		if (st != NFS3_OK)
			return ct_kc_errno(st);
		for (size_t i = 0; i < kc->r.nents && !stop; i++)
			stop = cb(arg, kc->r.ents[i].name, kc->r.ents[i].fileid, kc->r.ents[i].type == NF3DIR);
		if (stop || kc->r.eof)
			return 0;
		if (!kc->r.nents || ++pages > 1000000)
			return -EIO;
		cookie = kc->r.ents[kc->r.nents - 1].cookie;
		memcpy(verf, kc->r.verf, 8);
	}
}

static const struct ct_ops ct_kc_ops = {
	.mkdir = ct_kc_mkdir,
	.rmdir = ct_kc_rmdir,
	.create = ct_kc_create,
	.open = ct_kc_open,
	.pwrite = ct_kc_pwrite,
	.pread = ct_kc_pread,
	.fstat = ct_kc_fstat,
	.ftruncate = ct_kc_ftruncate,
	.close = ct_kc_close,
	.stat = ct_kc_stat,
	.lstat = ct_kc_stat,
	.chmod = ct_kc_chmod,
	.utimes = ct_kc_utimes,
	.unlink = ct_kc_unlink,
	.rename = ct_kc_rename,
	.link = ct_kc_link,
	.symlink = ct_kc_symlink,
	.readlink = ct_kc_readlink,
	.statfs = ct_kc_statfs,
	.readdir = ct_kc_readdir,
};

/* ct_fs_kc -- the raw client on EXPORT of 127.0.0.1, with an attribute and
 * negative-name cache of ACTIMEO seconds (0: none); 0 or -1 */
static int ct_fs_kc(struct ct_fs *fs, int nfs_port, int mount_port, const char *export, double actimeo)
{
	memset(fs, 0, sizeof(*fs));
	fs->ops = &ct_kc_ops;
	fs->kind = actimeo > 0 ? "nfs3-ac" : "nfs3";
	fs->nfs_port = nfs_port;
	fs->mount_port = mount_port;
	snprintf(fs->base, sizeof(fs->base), "%s", export);
	fs->kc = calloc(1, sizeof(*fs->kc));
	if (!fs->kc)
		return -1;
	fs->kc->actimeo = actimeo;
	if (ct_raw_open(&fs->kc->raw, nfs_port, mount_port, export) < 0) {
		fprintf(stderr, "cthon: MOUNT %s or the NFS connection failed\n", export);
		free(fs->kc);
		fs->kc = NULL;
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ special tests */

/* holey files, extension and truncation */
static int ct_sp_holes(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	const char *p = CT_TESTDIR "/holey";
	const uint64_t hole_end = 1048576 + 17, tail = 4096;
	unsigned char a[4096], b[4096], *buf = malloc(65536);
	struct ct_file f = { .fd = -1 };
	struct ct_stat st;
	int rc = -1, r;
	ssize_t n;

	(void)raw;
	if (!buf)
		return ct_fail(c, "out of memory");
	ct_fill(a, sizeof(a), 1);
	ct_fill(b, sizeof(b), 2);
	if (ct_testdir(c) < 0)
		goto out;
	r = c->fs->ops->create(c->fs, p, O_RDWR | O_TRUNC, 0644, &f);
	if (r < 0) {
		ct_fail(c, "creat %s: %s", p, ct_strerr(r));
		goto out;
	}
	if (c->fs->ops->pwrite(c->fs, &f, a, sizeof(a), 0) != (ssize_t)sizeof(a) ||
	    c->fs->ops->pwrite(c->fs, &f, b, sizeof(b), hole_end) != (ssize_t)sizeof(b)) {
		ct_fail(c, "write %s at 0 or %" PRIu64 " failed", p, hole_end);
		goto out;
	}
	r = c->fs->ops->fstat(c->fs, &f, &st);
	if (r < 0 || st.size != hole_end + tail) {
		ct_fail(c, "%s: size %" PRIu64 " (%s), expected %" PRIu64, p, r < 0 ? 0 : st.size,
			ct_strerr(r), hole_end + tail);
		goto out;
	}
	n = c->fs->ops->pread(c->fs, &f, buf, sizeof(a), 0);
	if (n != (ssize_t)sizeof(a) || memcmp(buf, a, sizeof(a))) {
		ct_fail(c, "%s: the first 4096 bytes read back wrong (%zd)", p, n);
		goto out;
	}
	for (uint64_t off = sizeof(a); off < hole_end; off += (uint64_t)n) {
		size_t want = hole_end - off < 65536 ? (size_t)(hole_end - off) : 65536;

		n = c->fs->ops->pread(c->fs, &f, buf, want, off);
		if (n <= 0) {
			ct_fail(c, "%s: read of the hole at %" PRIu64 ": %zd", p, off, n);
			goto out;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i]) {
				ct_fail(c, "%s: byte %" PRIu64 " of the hole is 0x%02x, expected 0", p,
					off + (uint64_t)i, buf[i]);
				goto out;
			}
	}
	n = c->fs->ops->pread(c->fs, &f, buf, 8192, hole_end);
	if (n != (ssize_t)tail || memcmp(buf, b, sizeof(b))) {
		ct_fail(c, "%s: the 4096 bytes after the hole read back wrong (%zd)", p, n);
		goto out;
	}
	r = c->fs->ops->ftruncate(c->fs, &f, 3 * 1048576);
	n = c->fs->ops->pread(c->fs, &f, buf, 4096, 2 * 1048576);
	if (r < 0 || n != 4096 || memchr(buf, 1, 4096) || c->fs->ops->fstat(c->fs, &f, &st) < 0 ||
	    st.size != 3 * 1048576) {
		ct_fail(c, "%s: extending to 3 MiB: truncate %s, read %zd, size %" PRIu64, p,
			ct_strerr(r), n, st.size);
		goto out;
	}
	r = c->fs->ops->ftruncate(c->fs, &f, 100);
	n = c->fs->ops->pread(c->fs, &f, buf, 4096, 0);
	if (r < 0 || n != 100 || memcmp(buf, a, 100)) {
		ct_fail(c, "%s: truncated to 100 bytes: truncate %s, read %zd bytes", p, ct_strerr(r), n);
		goto out;
	}
	snprintf(what, wlen, "a 1 MiB hole reads as zeros; extended to 3 MiB, truncated to 100 bytes");
	rc = 0;
out:
	c->fs->ops->close(c->fs, &f);
	free(buf);
	return rc;
}

static int ct_put(struct ct_ctx *c, const char *p, const void *buf, size_t len)
{
	struct ct_file f = { .fd = -1 };
	int rc = c->fs->ops->create(c->fs, p, O_RDWR | O_TRUNC, 0644, &f);

	if (rc < 0)
		return ct_fail(c, "creat %s: %s", p, ct_strerr(rc));
	if (len && c->fs->ops->pwrite(c->fs, &f, buf, len, 0) != (ssize_t)len) {
		c->fs->ops->close(c->fs, &f);
		return ct_fail(c, "write %s failed", p);
	}
	return c->fs->ops->close(c->fs, &f) < 0 ? ct_fail(c, "close %s failed", p) : 0;
}

/* ct_expect_err -- RC must be one of the negative errnos in ALLOWED (0-ended) */
static int ct_expect_err(struct ct_ctx *c, const char *op, int rc, const int *allowed, const char *rfc)
{
	char list[128] = "";

	for (const int *e = allowed; *e; e++) {
		if (rc == -*e)
			return 0;
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
			 e == allowed ? "" : " or ", strerror(*e));
	}
	return ct_fail(c, "%s: got %s, expected %s (RFC 1813 %s)", op, rc == 0 ? "success" : ct_strerr(rc),
		       list, rfc);
}

/* rename over an existing file, an empty and a non-empty directory */
static int ct_sp_rename(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static const int notempty[] = { ENOTEMPTY, EEXIST, 0 };
	static const int isdir[] = { EISDIR, EEXIST, 0 };
	static const int notdir[] = { ENOTDIR, EEXIST, 0 };
	static const int inval[] = { EINVAL, 0 };
	unsigned char a[1000], b[3000], buf[4096];
	struct ct_file f = { .fd = -1 };
	struct ct_stat st;
	ssize_t n;
	int rc;

	(void)raw;
	ct_fill(a, sizeof(a), 3);
	ct_fill(b, sizeof(b), 4);
	if (ct_testdir(c) < 0 || ct_put(c, CT_TESTDIR "/a", a, sizeof(a)) < 0 ||
	    ct_put(c, CT_TESTDIR "/b", b, sizeof(b)) < 0)
		return -1;
	rc = c->fs->ops->rename(c->fs, CT_TESTDIR "/a", CT_TESTDIR "/b");
	if (rc < 0)
		return ct_fail(c, "rename a b (b exists): %s, expected success (RFC 1813 3.3.14)",
			       ct_strerr(rc));
	rc = c->fs->ops->stat(c->fs, CT_TESTDIR "/a", &st);
	if (rc != -ENOENT)
		return ct_fail(c, "stat a after rename a b: %s, expected ENOENT", ct_strerr(rc));
	rc = c->fs->ops->open(c->fs, CT_TESTDIR "/b", O_RDONLY, &f);
	if (rc < 0)
		return ct_fail(c, "open b: %s", ct_strerr(rc));
	n = c->fs->ops->pread(c->fs, &f, buf, sizeof(buf), 0);
	c->fs->ops->close(c->fs, &f);
	if (n != (ssize_t)sizeof(a) || memcmp(buf, a, sizeof(a)))
		return ct_fail(c, "b after rename a b: %zd bytes, expected a's 1000 bytes", n);
	if (ct_expect_nlink(c, CT_TESTDIR "/b", 1) < 0)
		return -1;
	rc = c->fs->ops->rename(c->fs, CT_TESTDIR "/b", CT_TESTDIR "/b");
	if (rc < 0 || c->fs->ops->stat(c->fs, CT_TESTDIR "/b", &st) < 0)
		return ct_fail(c, "rename b b: %s, expected success and b still there", ct_strerr(rc));
	/* directories */
	if ((rc = c->fs->ops->mkdir(c->fs, CT_TESTDIR "/d1", 0755)) < 0 ||
	    (rc = c->fs->ops->mkdir(c->fs, CT_TESTDIR "/d2", 0755)) < 0 ||
	    (rc = c->fs->ops->mkdir(c->fs, CT_TESTDIR "/d3", 0755)) < 0)
		return ct_fail(c, "mkdir: %s", ct_strerr(rc));
	if (ct_put(c, CT_TESTDIR "/d1/x", a, 10) < 0 || ct_put(c, CT_TESTDIR "/d3/y", a, 10) < 0)
		return -1;
	rc = c->fs->ops->rename(c->fs, CT_TESTDIR "/d1", CT_TESTDIR "/d2");
	if (rc < 0)
		return ct_fail(c, "rename d1 d2 (d2 an empty directory): %s, expected success "
			       "(RFC 1813 3.3.14)", ct_strerr(rc));
	if (c->fs->ops->stat(c->fs, CT_TESTDIR "/d2/x", &st) < 0 ||
	    c->fs->ops->stat(c->fs, CT_TESTDIR "/d1", &st) != -ENOENT)
		return ct_fail(c, "after rename d1 d2: d2/x missing or d1 still there");
	rc = c->fs->ops->rename(c->fs, CT_TESTDIR "/d2", CT_TESTDIR "/d3");
	if (ct_expect_err(c, "rename d2 d3 (d3 not empty)", rc, notempty, "3.3.14") < 0)
		return -1;
	rc = c->fs->ops->rename(c->fs, CT_TESTDIR "/b", CT_TESTDIR "/d3");
	if (ct_expect_err(c, "rename of file b over directory d3", rc, isdir, "3.3.14") < 0)
		return -1;
	rc = c->fs->ops->rename(c->fs, CT_TESTDIR "/d2", CT_TESTDIR "/b");
	if (ct_expect_err(c, "rename of directory d2 over file b", rc, notdir, "3.3.14") < 0)
		return -1;
	rc = c->fs->ops->rename(c->fs, CT_TESTDIR "/d3", CT_TESTDIR "/d3/y2");
	if (ct_expect_err(c, "rename of d3 into itself (d3/y2)", rc, inval, "3.3.14") < 0)
		return -1;
	if (c->fs->ops->stat(c->fs, CT_TESTDIR "/d3/y", &st) < 0 ||
	    c->fs->ops->stat(c->fs, CT_TESTDIR "/d2/x", &st) < 0 ||
	    c->fs->ops->stat(c->fs, CT_TESTDIR "/b", &st) < 0)
		return ct_fail(c, "a refused rename changed the tree");
	snprintf(what, wlen, "over a file, an empty directory; refused over a non-empty directory, "
		 "file/dir mismatches and into itself");
	return 0;
}

/* the name of an open file removed: the client's silly rename, then the
 * real remove while the handle is still open */
static int ct_sp_open_unlink(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	unsigned char a[8192], b[8192], buf[16384];
	struct ct_file f = { .fd = -1 };
	struct ct_stat st;
	const char *p = CT_TESTDIR "/open", *silly = CT_TESTDIR "/.nfs0000cafe0001";
	int rc, local = !strcmp(c->fs->kind, "local"), lib_rc = 0;
	char raw_read[80] = "";
	ssize_t n;

	ct_fill(a, sizeof(a), 5);
	ct_fill(b, sizeof(b), 6);
	if (ct_testdir(c) < 0)
		return -1;
	rc = c->fs->ops->create(c->fs, p, O_RDWR | O_TRUNC, 0644, &f);
	if (rc < 0)
		return ct_fail(c, "creat %s: %s", p, ct_strerr(rc));
	if (c->fs->ops->pwrite(c->fs, &f, a, sizeof(a), 0) != (ssize_t)sizeof(a)) {
		c->fs->ops->close(c->fs, &f);
		return ct_fail(c, "write %s failed", p);
	}
	/* what a client does on unlink of an open file: rename it away */
	rc = c->fs->ops->rename(c->fs, p, silly);
	if (rc < 0) {
		c->fs->ops->close(c->fs, &f);
		return ct_fail(c, "rename %s %s: %s", p, silly, ct_strerr(rc));
	}
	rc = c->fs->ops->stat(c->fs, p, &st);
	n = c->fs->ops->pwrite(c->fs, &f, b, sizeof(b), sizeof(a));
	if (rc != -ENOENT || n != (ssize_t)sizeof(b)) {
		c->fs->ops->close(c->fs, &f);
		return ct_fail(c, "after the silly rename: stat of the old name %s (expected ENOENT), "
			       "write through the open file %zd", ct_strerr(rc), n);
	}
	n = c->fs->ops->pread(c->fs, &f, buf, sizeof(buf), 0);
	if (n != (ssize_t)sizeof(buf) || memcmp(buf, a, sizeof(a)) || memcmp(buf + sizeof(a), b, sizeof(b))) {
		c->fs->ops->close(c->fs, &f);
		return ct_fail(c, "read through the open file after the silly rename: %zd bytes, "
			       "expected the 16384 written", n);
	}
	/* the last close: the client removes the silly name */
	rc = c->fs->ops->unlink(c->fs, silly);
	if (rc < 0) {
		c->fs->ops->close(c->fs, &f);
		return ct_fail(c, "unlink %s: %s", silly, ct_strerr(rc));
	}
	/* the handle of a removed file: the data or ESTALE (RFC 1813 3.3.6), never other data */
	n = c->fs->ops->pread(c->fs, &f, buf, sizeof(buf), 0);
	c->fs->ops->close(c->fs, &f);
	if (n >= 0 && (n != (ssize_t)sizeof(buf) || memcmp(buf, a, sizeof(a)))) {
		return ct_fail(c, "read through the handle of the removed file: %zd bytes, not the "
			       "file's data", n);
	}
	/* libnfs reports every failed READ chunk as EFAULT (its message says
	 * which status): the wire status is checked below, on the raw API */
	if (n < 0 && local)
		lib_rc = ct_fail(c, "libnfs read through the handle of the removed file: %s (errno %d), "
			       "expected the data%s", ct_strerr((int)n), (int)-n,
			       local ? "" : " or ESTALE (RFC 1813 3.3.6)");
	rc = c->fs->ops->stat(c->fs, "", &st);
	if (rc < 0)
		return ct_fail(c, "stat of the root afterwards: %s", ct_strerr(rc));
	if (raw) {
		char lib_msg[CT_MSG];

		snprintf(lib_msg, sizeof(lib_msg), "%s", c->msg);
		/* the same on the wire: READ and GETATTR of a removed file's handle */
		static struct ct_res r;
		struct ct_fh dir, fh;
		int s1, s2;

		s1 = ct_raw_lookup(raw, &raw->root, CT_TESTDIR, &r);
		if (s1 != NFS3_OK)
			return ct_fail(c, "LOOKUP %s: %s", CT_TESTDIR, ct_nfsstat(s1));
		dir = r.fh;
		s1 = ct_raw_create(raw, &dir, "gone", GUARDED, 0644, NULL, &r);
		if (s1 != NFS3_OK || !r.has_fh)
			return ct_fail(c, "CREATE gone: %s", ct_nfsstat(s1));
		fh = r.fh;
		{
			WRITE3args w = { .file = ct_fh3(&fh), .count = 16, .stable = FILE_SYNC };

			w.data.data_len = 16;
			w.data.data_val = (char *)a;
			s1 = ct_raw_call(raw, NFS3_WRITE, &w, &r);
			if (s1 != NFS3_OK)
				return ct_fail(c, "WRITE gone: %s", ct_nfsstat(s1));
		}
		{
			REMOVE3args rm = { .object = { .dir = ct_fh3(&dir), .name = "gone" } };

			s1 = ct_raw_call(raw, NFS3_REMOVE, &rm, &r);
			if (s1 != NFS3_OK)
				return ct_fail(c, "REMOVE gone: %s", ct_nfsstat(s1));
		}
		{
			READ3args rd = { .file = ct_fh3(&fh), .count = 4096 };
			GETATTR3args ga = { .object = ct_fh3(&fh) };

			s1 = ct_raw_call(raw, NFS3_READ, &rd, &r);
			snprintf(raw_read, sizeof(raw_read), "%s", ct_nfsstat(s1));
			if (!(s1 == NFS3_OK && r.count == 16) && s1 != NFS3ERR_STALE)
				return ct_fail(c, "READ of a removed file's handle: %s (count %u), expected "
					       "NFS3_OK with its 16 bytes or NFS3ERR_STALE (RFC 1813 3.3.6, "
					       "2.6 NFS3ERR_STALE)%s%s", ct_nfsstat(s1), r.count,
					       lib_rc ? "; and " : "", lib_rc ? lib_msg : "");
			s2 = ct_raw_call(raw, NFS3_GETATTR, &ga, &r);
			if (s2 != NFS3_OK && s2 != NFS3ERR_STALE)
				return ct_fail(c, "GETATTR of a removed file's handle: %s, expected NFS3_OK "
					       "or NFS3ERR_STALE (RFC 1813 3.3.1)", ct_nfsstat(s2));
		}
		snprintf(c->msg, sizeof(c->msg), "%s", lib_msg);
	}
	if (lib_rc < 0)
		return -1;
	snprintf(what, wlen, "silly rename kept the data; after the remove, READ of the handle gives %s",
		 raw_read[0] ? raw_read : n < 0 ? ct_strerr((int)n) : "the data");
	return 0;
}

/* CREATE EXCLUSIVE (verifier), GUARDED, UNCHECKED; RFC 1813 3.3.8 */
static int ct_sp_exclusive(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static struct ct_res r;
	static const int exist[] = { EEXIST, 0 };
	struct ct_fh dir, fh;
	uint64_t fileid;
	struct ct_file f = { .fd = -1 };
	int st, rc;

	if (ct_testdir(c) < 0)
		return -1;
	if (!raw) {
		rc = c->fs->ops->create(c->fs, CT_TESTDIR "/excl", O_RDWR | O_EXCL, 0644, &f);
		c->fs->ops->close(c->fs, &f);
		if (rc < 0)
			return ct_fail(c, "O_EXCL create: %s", ct_strerr(rc));
		rc = c->fs->ops->create(c->fs, CT_TESTDIR "/excl", O_RDWR | O_EXCL, 0644, &f);
		c->fs->ops->close(c->fs, &f);
		if (ct_expect_err(c, "second O_EXCL create", rc, exist, "3.3.8") < 0)
			return -1;
		snprintf(what, wlen, "O_EXCL twice: EEXIST");
		return 0;
	}
	st = ct_raw_lookup(raw, &raw->root, CT_TESTDIR, &r);
	if (st != NFS3_OK)
		return ct_fail(c, "LOOKUP %s: %s %s", CT_TESTDIR, ct_nfsstat(st), r.err);
	dir = r.fh;
	st = ct_raw_create(raw, &dir, "excl", EXCLUSIVE, -1, "verf0001", &r);
	if (st != NFS3_OK || !r.has_fh || !r.has_attr)
		return ct_fail(c, "CREATE EXCLUSIVE excl: %s, handle %d attributes %d, expected NFS3_OK "
			       "with both (RFC 1813 3.3.8)", ct_nfsstat(st), r.has_fh, r.has_attr);
	fh = r.fh;
	fileid = r.attr.fileid;
	st = ct_raw_create(raw, &dir, "excl", EXCLUSIVE, -1, "verf0001", &r);
	if (st != NFS3_OK || !r.has_attr || r.attr.fileid != fileid)
		return ct_fail(c, "CREATE EXCLUSIVE excl again with the same verifier (a retransmission): "
			       "%s, file id %" PRIu64 ", expected NFS3_OK and file id %" PRIu64
			       " (RFC 1813 3.3.8)", ct_nfsstat(st), r.has_attr ? (uint64_t)r.attr.fileid : 0,
			       fileid);
	st = ct_raw_create(raw, &dir, "excl", EXCLUSIVE, -1, "verf0002", &r);
	if (st != NFS3ERR_EXIST)
		return ct_fail(c, "CREATE EXCLUSIVE excl with another verifier: %s, expected NFS3ERR_EXIST "
			       "(RFC 1813 3.3.8)", ct_nfsstat(st));
	st = ct_raw_create(raw, &dir, "excl", GUARDED, 0600, NULL, &r);
	if (st != NFS3ERR_EXIST)
		return ct_fail(c, "CREATE GUARDED of the existing excl: %s, expected NFS3ERR_EXIST "
			       "(RFC 1813 3.3.8)", ct_nfsstat(st));
	{
		/* the client then sets the attributes it could not send */
		SETATTR3args a;

		memset(&a, 0, sizeof(a));
		a.object = ct_fh3(&fh);
		a.new_attributes.mode.set_it = 1;
		a.new_attributes.mode.set_mode3_u.mode = 0640;
		st = ct_raw_call(raw, NFS3_SETATTR, &a, &r);
		if (st != NFS3_OK)
			return ct_fail(c, "SETATTR mode 0640 after CREATE EXCLUSIVE: %s (RFC 1813 3.3.2)",
				       ct_nfsstat(st));
	}
	{
		GETATTR3args a = { .object = ct_fh3(&fh) };

		st = ct_raw_call(raw, NFS3_GETATTR, &a, &r);
		if (st != NFS3_OK || (r.attr.mode & 07777) != 0640)
			return ct_fail(c, "GETATTR of excl: %s, mode 0%o, expected 0640 (set by SETATTR)",
				       ct_nfsstat(st), r.attr.mode & 07777);
	}
	st = ct_raw_create(raw, &dir, "excl", UNCHECKED, 0600, NULL, &r);
	if (st != NFS3_OK || !r.has_attr || r.attr.fileid != fileid)
		return ct_fail(c, "CREATE UNCHECKED of the existing excl: %s, expected NFS3_OK on the "
			       "same file (RFC 1813 3.3.8)", ct_nfsstat(st));
	st = ct_raw_create(raw, &dir, "guarded", GUARDED, 0600, NULL, &r);
	if (st != NFS3_OK || !r.has_attr || (r.attr.mode & 07777) != 0600)
		return ct_fail(c, "CREATE GUARDED guarded mode 0600: %s, mode 0%o, expected NFS3_OK and "
			       "0600 (RFC 1813 3.3.8)", ct_nfsstat(st), r.has_attr ? r.attr.mode & 07777 : 0);
	rc = c->fs->ops->create(c->fs, CT_TESTDIR "/guarded", O_RDWR | O_EXCL, 0644, &f);
	c->fs->ops->close(c->fs, &f);
	if (ct_expect_err(c, "libnfs O_CREAT|O_EXCL of the existing guarded", rc, exist, "3.3.8") < 0)
		return -1;
	snprintf(what, wlen, "EXCLUSIVE replay with the same verifier answered OK on file id %" PRIu64
		 ", another verifier and GUARDED got NFS3ERR_EXIST", fileid);
	return 0;
}

/* a large directory whose entries are removed between READDIR pages:
 * every entry never removed is returned exactly once (RFC 1813 3.3.16) */
#define CT_BIGDIR 600

static int ct_sp_bigdir(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static struct ct_res r;
	int seen[CT_BIGDIR], removed[CT_BIGDIR], pages = 0, restarts = 0, nremoved = 0;
	uint64_t cookie = 0;
	char verf[8] = { 0 };
	struct ct_fh dir;
	int st;

	if (!raw) {
		snprintf(what, wlen, "NFS only");
		return 0;
	}
	if (ct_testdir(c) < 0 || ct_make_files(c, CT_TESTDIR "/e.%03d", CT_BIGDIR) < 0)
		return -1;
	st = ct_raw_lookup(raw, &raw->root, CT_TESTDIR, &r);
	if (st != NFS3_OK)
		return ct_fail(c, "LOOKUP %s: %s %s", CT_TESTDIR, ct_nfsstat(st), r.err);
	dir = r.fh;
	memset(seen, 0, sizeof(seen));
	memset(removed, 0, sizeof(removed));
	for (;;) {
		READDIR3args a = { .dir = ct_fh3(&dir), .cookie = cookie, .count = 1024 };

		memcpy(a.cookieverf, verf, 8);
		st = ct_raw_call(raw, NFS3_READDIR, &a, &r);
		if (st == NFS3ERR_BAD_COOKIE && restarts == 0) {
			/* the server may invalidate cookies when the directory
			 * changes; the client starts over, and from then on every
			 * remaining name must come exactly once */
			restarts++;
			memset(seen, 0, sizeof(seen));
			cookie = 0;
			memset(verf, 0, 8);
			continue;
		}
		if (st != NFS3_OK)
			return ct_fail(c, "READDIR page %d (cookie %" PRIu64 "): %s %s", pages, cookie,
				       ct_nfsstat(st), r.err);
		pages++;
		for (size_t i = 0; i < r.nents; i++) {
			int k;

			if (!strcmp(r.ents[i].name, ".") || !strcmp(r.ents[i].name, ".."))
				continue;
			if (sscanf(r.ents[i].name, "e.%d", &k) != 1 || k < 0 || k >= CT_BIGDIR)
				return ct_fail(c, "READDIR: unexpected entry \"%s\"", r.ents[i].name);
			if (seen[k]++)
				return ct_fail(c, "READDIR: %s returned twice (page %d, cookie %" PRIu64 ")",
					       r.ents[i].name, pages, r.ents[i].cookie);
		}
		if (r.eof)
			break;
		if (!r.nents)
			return ct_fail(c, "READDIR page %d: no entry and no eof", pages);
		cookie = r.ents[r.nents - 1].cookie;
		memcpy(verf, r.verf, 8);
		if (pages == 1) {
			/* remove 100 names not seen yet and 50 already seen */
			int unseen = 0, old = 0;

			for (int k = CT_BIGDIR - 1; k >= 0 && (unseen < 100 || old < 50); k--) {
				char p[PATH_MAX];
				int rc;

				if ((seen[k] && old >= 50) || (!seen[k] && unseen >= 100))
					continue;
				snprintf(p, sizeof(p), CT_TESTDIR "/e.%03d", k);
				rc = c->fs->ops->unlink(c->fs, p);
				if (rc < 0)
					return ct_fail(c, "unlink %s: %s", p, ct_strerr(rc));
				removed[k] = 1;
				nremoved++;
				if (seen[k])
					old++;
				else
					unseen++;
			}
		}
		if (pages > 10 * CT_BIGDIR)
			return ct_fail(c, "READDIR: no eof after %d pages", pages);
	}
	for (int k = 0; k < CT_BIGDIR; k++)
		if (!removed[k] && seen[k] != 1)
			return ct_fail(c, "READDIR: e.%03d (never removed) returned %d times, expected once "
				       "(RFC 1813 3.3.16)", k, seen[k]);
	snprintf(what, wlen, "%d entries, %d removed between pages, %d pages of 1 KiB%s", CT_BIGDIR,
		 nremoved, pages, restarts ? ", restarted once on NFS3ERR_BAD_COOKIE" : "");
	return 0;
}

/* offsets and sizes at the limits: FSINFO's maxfilesize, 2^63 */
static int ct_sp_limits(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static struct ct_res r;
	const uint64_t big = 1ull << 40;
	uint64_t max, over;
	struct ct_fh dir, fh;
	char data[16] = "0123456789abcdef", at50[64] = "";
	int st;

	if (!raw) {
		snprintf(what, wlen, "NFS only");
		return 0;
	}
	if (ct_testdir(c) < 0)
		return -1;
	{
		FSINFO3args a = { .fsroot = ct_fh3(&raw->root) };

		st = ct_raw_call(raw, NFS3_FSINFO, &a, &r);
		if (st != NFS3_OK)
			return ct_fail(c, "FSINFO: %s %s", ct_nfsstat(st), r.err);
		max = r.maxfilesize;
	}
	st = ct_raw_lookup(raw, &raw->root, CT_TESTDIR, &r);
	if (st != NFS3_OK)
		return ct_fail(c, "LOOKUP %s: %s", CT_TESTDIR, ct_nfsstat(st));
	dir = r.fh;
	st = ct_raw_create(raw, &dir, "limits", GUARDED, 0644, NULL, &r);
	if (st != NFS3_OK || !r.has_fh)
		return ct_fail(c, "CREATE limits: %s", ct_nfsstat(st));
	fh = r.fh;
	/* a write far out (1 TiB) makes a sparse file of that size */
	if (max > big + 16) {
		WRITE3args w = { .file = ct_fh3(&fh), .offset = big, .count = 16, .stable = FILE_SYNC };
		READ3args rd = { .file = ct_fh3(&fh), .offset = big, .count = 4096 };

		w.data.data_len = 16;
		w.data.data_val = data;
		st = ct_raw_call(raw, NFS3_WRITE, &w, &r);
		if (st != NFS3_OK || r.count != 16)
			return ct_fail(c, "WRITE 16 bytes at 2^40 (maxfilesize %" PRIu64 "): %s, count %u, "
				       "expected NFS3_OK and 16 (RFC 1813 3.3.7)", max, ct_nfsstat(st), r.count);
		st = ct_raw_call(raw, NFS3_READ, &rd, &r);
		if (st != NFS3_OK || r.count != 16 || !r.eof)
			return ct_fail(c, "READ 4096 at 2^40 of a 2^40+16 byte file: %s, count %u eof %d, "
				       "expected NFS3_OK, 16, eof (RFC 1813 3.3.6)", ct_nfsstat(st), r.count,
				       r.eof);
	}
	/* a write past maxfilesize: NFS3ERR_FBIG (or INVAL when the offset
	 * does not even fit the server's off_t) */
	over = max < UINT64_MAX - 1 ? max + 1 : max;
	if (over > (1ull << 63))
		over = 1ull << 63;
	{
		WRITE3args w = { .file = ct_fh3(&fh), .offset = over, .count = 10, .stable = FILE_SYNC };

		w.data.data_len = 10;
		w.data.data_val = data;
		st = ct_raw_call(raw, NFS3_WRITE, &w, &r);
		if (st != NFS3ERR_FBIG && st != NFS3ERR_INVAL)
			return ct_fail(c, "WRITE 10 bytes at offset %" PRIu64 " (maxfilesize %" PRIu64 "): %s, "
				       "expected NFS3ERR_FBIG (RFC 1813 3.3.7) or NFS3ERR_INVAL", over, max,
				       ct_nfsstat(st));
	}
	{
		SETATTR3args a;

		memset(&a, 0, sizeof(a));
		a.object = ct_fh3(&fh);
		a.new_attributes.size.set_it = 1;
		a.new_attributes.size.set_size3_u.size = over;
		st = ct_raw_call(raw, NFS3_SETATTR, &a, &r);
		if (st != NFS3ERR_FBIG && st != NFS3ERR_INVAL)
			return ct_fail(c, "SETATTR size %" PRIu64 " (maxfilesize %" PRIu64 "): %s, expected "
				       "NFS3ERR_FBIG or NFS3ERR_INVAL (RFC 1813 3.3.2)", over, max,
				       ct_nfsstat(st));
	}
	{
		/* a read at an offset that is negative as an off_t */
		READ3args rd = { .file = ct_fh3(&fh), .offset = (1ull << 63) + 5, .count = 100 };

		st = ct_raw_call(raw, NFS3_READ, &rd, &r);
		if (!(st == NFS3_OK && r.count == 0 && r.eof) && st != NFS3ERR_INVAL && st != NFS3ERR_FBIG)
			return ct_fail(c, "READ 100 bytes at 2^63+5: %s count %u eof %d, expected NFS3_OK with "
				       "count 0 and eof (RFC 1813 3.3.6), or NFS3ERR_INVAL", ct_nfsstat(st),
				       r.count, r.eof);
		rd.offset = UINT64_MAX - 10;
		st = ct_raw_call(raw, NFS3_READ, &rd, &r);
		if (!(st == NFS3_OK && r.count == 0 && r.eof) && st != NFS3ERR_INVAL && st != NFS3ERR_FBIG)
			return ct_fail(c, "READ 100 bytes at 2^64-11 (offset + count wraps): %s count %u, "
				       "expected NFS3_OK with count 0 and eof, or NFS3ERR_INVAL", ct_nfsstat(st),
				       r.count);
	}
	{
		/* 2^50 (1 PiB): past ext4's 16 TiB, within what FSINFO may claim;
		 * the data lands, or NFS3ERR_FBIG (the backing file system's
		 * EFBIG), never another error */
		WRITE3args w = { .file = ct_fh3(&fh), .offset = 1ull << 50, .count = 10,
				 .stable = FILE_SYNC };

		w.data.data_len = 10;
		w.data.data_val = data;
		st = ct_raw_call(raw, NFS3_WRITE, &w, &r);
		if (st != NFS3_OK && st != NFS3ERR_FBIG)
			return ct_fail(c, "WRITE 10 bytes at 2^50 (maxfilesize %" PRIu64 "): %s, expected "
				       "NFS3_OK or NFS3ERR_FBIG (RFC 1813 3.3.7)", max, ct_nfsstat(st));
		snprintf(at50, sizeof(at50), "%s", ct_nfsstat(st));
		if (st == NFS3_OK) {
			SETATTR3args a;

			memset(&a, 0, sizeof(a));
			a.object = ct_fh3(&fh);
			a.new_attributes.size.set_it = 1;
			a.new_attributes.size.set_size3_u.size = big + 16;
			st = ct_raw_call(raw, NFS3_SETATTR, &a, &r);
			if (st != NFS3_OK)
				return ct_fail(c, "SETATTR size 2^40+16: %s", ct_nfsstat(st));
		}
	}
	{
		GETATTR3args a = { .object = ct_fh3(&fh) };
		uint64_t want = max > big + 16 ? big + 16 : 0;

		st = ct_raw_call(raw, NFS3_GETATTR, &a, &r);
		if (st != NFS3_OK || r.attr.size != want)
			return ct_fail(c, "GETATTR limits after the refused calls: %s, size %" PRIu64
				       ", expected %" PRIu64, ct_nfsstat(st), (uint64_t)r.attr.size, want);
	}
	snprintf(what, wlen, "maxfilesize %" PRIu64 "; 2^40 sparse write read back; 2^50: %s; past "
		 "maxfilesize refused; reads at 2^63 and 2^64-11 answered", max, at50);
	return 0;
}

/* names: 255 bytes allowed, 256 refused; ".", ".." and "a/b" never create */
static int ct_sp_names(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static struct ct_res r;
	char name[300];
	struct ct_fh dir;
	struct ct_stat sst;
	int st;

	if (!raw) {
		snprintf(what, wlen, "NFS only");
		return 0;
	}
	if (ct_testdir(c) < 0 || c->fs->ops->mkdir(c->fs, CT_TESTDIR "/sub", 0755) < 0)
		return ct_fail(c, "mkdir %s/sub failed", CT_TESTDIR);
	st = ct_raw_lookup(raw, &raw->root, CT_TESTDIR, &r);
	if (st != NFS3_OK)
		return ct_fail(c, "LOOKUP %s: %s", CT_TESTDIR, ct_nfsstat(st));
	dir = r.fh;
	memset(name, 'n', 255);
	name[255] = '\0';
	st = ct_raw_create(raw, &dir, name, GUARDED, 0644, NULL, &r);
	if (st != NFS3_OK)
		return ct_fail(c, "CREATE of a 255-byte name: %s, expected NFS3_OK", ct_nfsstat(st));
	st = ct_raw_lookup(raw, &dir, name, &r);
	if (st != NFS3_OK)
		return ct_fail(c, "LOOKUP of the 255-byte name: %s", ct_nfsstat(st));
	name[255] = 'n';
	name[256] = '\0';
	st = ct_raw_create(raw, &dir, name, GUARDED, 0644, NULL, &r);
	if (st != NFS3ERR_NAMETOOLONG)
		return ct_fail(c, "CREATE of a 256-byte name: %s, expected NFS3ERR_NAMETOOLONG "
			       "(RFC 1813 3.3.8)", ct_nfsstat(st));
	st = ct_raw_lookup(raw, &dir, name, &r);
	if (st != NFS3ERR_NAMETOOLONG && st != NFS3ERR_NOENT)
		return ct_fail(c, "LOOKUP of a 256-byte name: %s, expected NFS3ERR_NAMETOOLONG "
			       "(RFC 1813 3.3.3) or NFS3ERR_NOENT", ct_nfsstat(st));
	st = ct_raw_create(raw, &dir, ".", UNCHECKED, 0644, NULL, &r);
	if (st == NFS3_OK)
		return ct_fail(c, "CREATE \".\": NFS3_OK, expected an error (NFS3ERR_EXIST)");
	st = ct_raw_create(raw, &dir, "..", UNCHECKED, 0644, NULL, &r);
	if (st == NFS3_OK)
		return ct_fail(c, "CREATE \"..\": NFS3_OK, expected an error (NFS3ERR_EXIST)");
	st = ct_raw_create(raw, &dir, "sub/x", GUARDED, 0644, NULL, &r);
	if (st == NFS3_OK || c->fs->ops->stat(c->fs, CT_TESTDIR "/sub/x", &sst) == 0)
		return ct_fail(c, "CREATE \"sub/x\": %s, expected an error (NFS3ERR_INVAL or "
			       "NFS3ERR_ACCES) and no sub/x", ct_nfsstat(st));
	st = ct_raw_create(raw, &dir, "", GUARDED, 0644, NULL, &r);
	if (st == NFS3_OK)
		return ct_fail(c, "CREATE of the empty name: NFS3_OK, expected an error");
	snprintf(what, wlen, "255 bytes created, 256 NAMETOOLONG; \".\", \"..\", \"sub/x\", \"\" refused");
	return 0;
}

/* directory errors: EXIST, NOTEMPTY, NOTDIR, ISDIR, NOENT */
static int ct_sp_direrr(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static const int exist[] = { EEXIST, 0 };
	static const int notempty[] = { ENOTEMPTY, EEXIST, 0 };
	static const int notdir[] = { ENOTDIR, 0 };
	static const int noent[] = { ENOENT, 0 };
	static const int unlinkdir[] = { EISDIR, EPERM, EACCES, EINVAL, 0 };
	static const int linkdir[] = { EISDIR, EPERM, EACCES, EINVAL, EXDEV, 0 };
	struct ct_stat st;
	int rc;

	(void)raw;
	if (ct_testdir(c) < 0)
		return -1;
	if (c->fs->ops->mkdir(c->fs, CT_TESTDIR "/d", 0755) < 0 ||
	    ct_put(c, CT_TESTDIR "/d/f", "x", 1) < 0)
		return ct_fail(c, "mkdir d or creat d/f failed");
	rc = c->fs->ops->mkdir(c->fs, CT_TESTDIR "/d", 0755);
	if (ct_expect_err(c, "mkdir of the existing d", rc, exist, "3.3.9") < 0)
		return -1;
	rc = c->fs->ops->rmdir(c->fs, CT_TESTDIR "/d");
	if (ct_expect_err(c, "rmdir of the non-empty d", rc, notempty, "3.3.13") < 0)
		return -1;
	rc = c->fs->ops->rmdir(c->fs, CT_TESTDIR "/d/f");
	if (ct_expect_err(c, "rmdir of the file d/f", rc, notdir, "3.3.13") < 0)
		return -1;
	rc = c->fs->ops->unlink(c->fs, CT_TESTDIR "/d");
	if (ct_expect_err(c, "remove of the directory d", rc, unlinkdir, "3.3.12") < 0)
		return -1;
	rc = c->fs->ops->link(c->fs, CT_TESTDIR "/d", CT_TESTDIR "/dlink");
	if (ct_expect_err(c, "link to the directory d", rc, linkdir, "3.3.15") < 0)
		return -1;
	rc = c->fs->ops->link(c->fs, CT_TESTDIR "/d/f", CT_TESTDIR "/d");
	if (ct_expect_err(c, "link d/f to the existing name d", rc, exist, "3.3.15") < 0)
		return -1;
	rc = c->fs->ops->mkdir(c->fs, CT_TESTDIR "/d/f/g", 0755);
	if (ct_expect_err(c, "mkdir under the file d/f", rc, notdir, "3.3.9") < 0)
		return -1;
	rc = c->fs->ops->stat(c->fs, CT_TESTDIR "/nothere", &st);
	if (ct_expect_err(c, "lookup of a missing name", rc, noent, "3.3.3") < 0)
		return -1;
	rc = c->fs->ops->unlink(c->fs, CT_TESTDIR "/nothere");
	if (ct_expect_err(c, "remove of a missing name", rc, noent, "3.3.12") < 0)
		return -1;
	if (c->fs->ops->stat(c->fs, CT_TESTDIR "/d/f", &st) < 0 || st.nlink != 1)
		return ct_fail(c, "d/f changed by the refused calls");
	rc = c->fs->ops->unlink(c->fs, CT_TESTDIR "/d/f");
	if (rc == 0)
		rc = c->fs->ops->rmdir(c->fs, CT_TESTDIR "/d");
	if (rc < 0)
		return ct_fail(c, "cleaning d: %s", ct_strerr(rc));
	snprintf(what, wlen, "EEXIST, ENOTEMPTY, ENOTDIR, ENOENT and refusals where due");
	return ct_rm_rf(c->fs, CT_TESTDIR) < 0 ? ct_fail(c, "rm -rf %s", CT_TESTDIR) : 0;
}

/* "." and ".." at and below the export root, and a MOUNT of a directory
 * below the export: no handle reaches outside the export (RFC 1813 3.3.3;
 * the design's invariant 4) */
static int ct_sp_dotdot(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static struct ct_res r;
	struct ct_fh sub, dd;
	uint64_t root_id, sub_id;
	char sub_path[PATH_MAX + 32];
	struct ct_raw raw2;
	int st;

	if (!raw) {
		snprintf(what, wlen, "NFS only");
		return 0;
	}
	if (ct_testdir(c) < 0)
		return -1;
	{
		GETATTR3args a = { .object = ct_fh3(&raw->root) };

		st = ct_raw_call(raw, NFS3_GETATTR, &a, &r);
		if (st != NFS3_OK)
			return ct_fail(c, "GETATTR of the export root: %s", ct_nfsstat(st));
		root_id = r.attr.fileid;
	}
	st = ct_raw_lookup(raw, &raw->root, ".", &r);
	if (st != NFS3_OK || !r.has_attr || r.attr.fileid != root_id)
		return ct_fail(c, "LOOKUP \".\" in the export root: %s, file id %" PRIu64 ", expected "
			       "NFS3_OK and the root's %" PRIu64 " (RFC 1813 3.3.3)", ct_nfsstat(st),
			       r.has_attr ? (uint64_t)r.attr.fileid : 0, root_id);
	st = ct_raw_lookup(raw, &raw->root, "..", &r);
	if (st == NFS3_OK) {
		GETATTR3args a;

		dd = r.fh;
		a.object = ct_fh3(&dd);
		st = ct_raw_call(raw, NFS3_GETATTR, &a, &r);
		if (st != NFS3_OK || r.attr.fileid != root_id)
			return ct_fail(c, "LOOKUP \"..\" in the export root gave a handle of file id %" PRIu64
				       " (GETATTR %s), outside the export: expected the root itself (%" PRIu64
				       ") or an error (RFC 1813 3.3.3; invariant 4)",
				       (uint64_t)r.attr.fileid, ct_nfsstat(st), root_id);
	} else if (st != NFS3ERR_NOENT && st != NFS3ERR_ACCES && st != NFS3ERR_PERM) {
		return ct_fail(c, "LOOKUP \"..\" in the export root: %s, expected NFS3_OK on the root "
			       "itself, NFS3ERR_NOENT or NFS3ERR_ACCES", ct_nfsstat(st));
	}
	st = ct_raw_lookup(raw, &raw->root, CT_TESTDIR, &r);
	if (st != NFS3_OK || !r.has_attr)
		return ct_fail(c, "LOOKUP %s: %s", CT_TESTDIR, ct_nfsstat(st));
	sub = r.fh;
	sub_id = r.attr.fileid;
	st = ct_raw_lookup(raw, &sub, "..", &r);
	if (st != NFS3_OK || !r.has_attr || r.attr.fileid != root_id)
		return ct_fail(c, "LOOKUP \"..\" in %s: %s, file id %" PRIu64 ", expected NFS3_OK and the "
			       "export root's %" PRIu64 " (RFC 1813 3.3.3)", CT_TESTDIR, ct_nfsstat(st),
			       r.has_attr ? (uint64_t)r.attr.fileid : 0, root_id);
	/* MOUNT of the directory below the export: its handle, and ".." from
	 * it is the export root, not beyond */
	snprintf(sub_path, sizeof(sub_path), "%s/%s", c->fs->base, CT_TESTDIR);
	if (ct_raw_open(&raw2, c->fs->nfs_port, c->fs->mount_port, sub_path) < 0)
		return ct_fail(c, "MNT %s (a directory below the export) failed", sub_path);
	{
		GETATTR3args a = { .object = ct_fh3(&raw2.root) };

		st = ct_raw_call(&raw2, NFS3_GETATTR, &a, &r);
		if (st != NFS3_OK || r.attr.fileid != sub_id) {
			ct_raw_close(&raw2);
			return ct_fail(c, "GETATTR of the handle MNT gave for %s: %s, file id %" PRIu64
				       ", expected %" PRIu64, sub_path, ct_nfsstat(st),
				       (uint64_t)r.attr.fileid, sub_id);
		}
		st = ct_raw_lookup(&raw2, &raw2.root, "..", &r);
		ct_raw_close(&raw2);
		if (st == NFS3_OK && (!r.has_attr || r.attr.fileid != root_id))
			return ct_fail(c, "LOOKUP \"..\" from the MNT handle of %s: file id %" PRIu64
				       ", expected the export root's %" PRIu64, sub_path,
				       r.has_attr ? (uint64_t)r.attr.fileid : 0, root_id);
	}
	snprintf(what, wlen, "\".\" is the root, \"..\" of the root stays inside the export, \"..\" of "
		 "%s and of its MNT handle is the root", CT_TESTDIR);
	return 0;
}

/* telldir/seekdir (Connectathon's special "telldir"): READDIR resumed at
 * any entry's cookie continues with the entries that followed it */
#define CT_SEEKDIR 300

static int ct_sp_seekdir(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen)
{
	static struct ct_res r;
	static struct ct_dent all[CT_SEEKDIR + 8];
	size_t n = 0;
	uint64_t cookie = 0;
	char verf[8] = { 0 }, first_verf[8] = { 0 };
	struct ct_fh dir;
	int st, pages = 0, probes = 0;

	if (!raw) {
		snprintf(what, wlen, "NFS only");
		return 0;
	}
	if (ct_testdir(c) < 0 || ct_make_files(c, CT_TESTDIR "/t.%03d", CT_SEEKDIR) < 0)
		return -1;
	st = ct_raw_lookup(raw, &raw->root, CT_TESTDIR, &r);
	if (st != NFS3_OK)
		return ct_fail(c, "LOOKUP %s: %s", CT_TESTDIR, ct_nfsstat(st));
	dir = r.fh;
	for (;;) {
		READDIR3args a = { .dir = ct_fh3(&dir), .cookie = cookie, .count = 2048 };

		memcpy(a.cookieverf, verf, 8);
		st = ct_raw_call(raw, NFS3_READDIR, &a, &r);
		if (st != NFS3_OK)
			return ct_fail(c, "READDIR (cookie %" PRIu64 "): %s", cookie, ct_nfsstat(st));
		if (pages++ == 0)
			memcpy(first_verf, r.verf, 8);
		for (size_t i = 0; i < r.nents && n < sizeof(all) / sizeof(all[0]); i++)
			all[n++] = r.ents[i];
		if (r.eof)
			break;
		if (!r.nents || pages > 1000)
			return ct_fail(c, "READDIR: no progress at page %d", pages);
		cookie = r.ents[r.nents - 1].cookie;
		memcpy(verf, r.verf, 8);
	}
	if (n != CT_SEEKDIR + 2)
		return ct_fail(c, "READDIR listed %zu entries, expected %d files plus . and ..", n, CT_SEEKDIR);
	/* resume after entry k, for a spread of k, with the verifier given */
	for (size_t k = 0; k + 1 < n; k += 37) {
		READDIR3args a = { .dir = ct_fh3(&dir), .cookie = all[k].cookie, .count = 1024 };

		memcpy(a.cookieverf, first_verf, 8);
		st = ct_raw_call(raw, NFS3_READDIR, &a, &r);
		if (st != NFS3_OK)
			return ct_fail(c, "READDIR resumed at the cookie %" PRIu64 " of entry %zu (%s): %s "
				       "(RFC 1813 3.3.16)", all[k].cookie, k, all[k].name, ct_nfsstat(st));
		if (!r.nents || strcmp(r.ents[0].name, all[k + 1].name))
			return ct_fail(c, "READDIR resumed after entry %zu (%s) returned \"%s\" first, expected "
				       "\"%s\" (RFC 1813 3.3.16)", k, all[k].name,
				       r.nents ? r.ents[0].name : "(nothing)", all[k + 1].name);
		probes++;
	}
	snprintf(what, wlen, "%zu entries in %d pages; resumed at %d cookies, each continuing in order",
		 n, pages, probes);
	return ct_rm_rf(c->fs, CT_TESTDIR) < 0 ? ct_fail(c, "rm -rf %s", CT_TESTDIR) : 0;
}

typedef int (*ct_special_fn)(struct ct_ctx *c, struct ct_raw *raw, char *what, size_t wlen);

static const struct {
	const char *name;
	ct_special_fn fn;
} ct_special[] = {
	{ "special (holey file, extend, truncate)", ct_sp_holes },
	{ "special (rename over existing file and directory)", ct_sp_rename },
	{ "special (unlink of an open file's name)", ct_sp_open_unlink },
	{ "special (exclusive create)", ct_sp_exclusive },
	{ "special (large directory, removal while reading)", ct_sp_bigdir },
	{ "special (telldir/seekdir: READDIR resumed at any cookie)", ct_sp_seekdir },
	{ "special (offsets and sizes at the limits)", ct_sp_limits },
	{ "special (names: length, dot, dot-dot, slash)", ct_sp_names },
	{ "special (directory errors)", ct_sp_direrr },
	{ "special (. and .. at the export root, MNT below it)", ct_sp_dotdot },
};

static void ct_run_special(struct ct_ctx *c, struct ct_raw *raw)
{
	for (size_t i = 0; i < sizeof(ct_special) / sizeof(ct_special[0]); i++) {
		char what[CT_MSG] = "";
		int rc = ct_special[i].fn(c, raw, what, sizeof(what));

		ct_report(c, ct_special[i].name, rc, what);
	}
	ct_rm_rf(c->fs, CT_TESTDIR);
}

/* ------------------------------------------------------------ tar x, rm -rf */

/*
 * Prestoserve's experiment: "create and destroy a /usr/include directory
 * clone via tar(8)". The archive is /usr/include's first two levels (files
 * at the top and in each first-level directory, in name order, at most
 * CT_TAR_MAX files) read into memory first, so that only the extraction is
 * timed; where /usr/include is missing or small, generated files of the
 * same shape (40 directories, sizes 200 B..20 KiB) make up the count.
 * Extraction does what tar x does per member: mkdir, or create-exclusive +
 * write + close + set the mtime; directories get their mtime at the end.
 * Removal is rm -rf: readdir, unlink, recurse, rmdir.
 */
#define CT_TAR_MAX 2000
#define CT_TAR_SRC "/usr/include"

struct ct_tar_ent {
	char path[256];
	int is_dir;
	int mode;
	time_t mtime;
	size_t size;
	unsigned char *data;
};

struct ct_tar {
	struct ct_tar_ent *e;
	int n, cap, files, dirs;
	uint64_t bytes;
};

static struct ct_tar_ent *ct_tar_add(struct ct_tar *t)
{
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 256;
		struct ct_tar_ent *e = realloc(t->e, (size_t)cap * sizeof(*e));

		if (!e)
			return NULL;
		t->e = e;
		t->cap = cap;
	}
	memset(&t->e[t->n], 0, sizeof(t->e[0]));
	return &t->e[t->n++];
}

static unsigned char *ct_slurp(const char *path, size_t size)
{
	unsigned char *p = malloc(size ? size : 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;

	if (!p || fd < 0) {
		free(p);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (got < size) {
		ssize_t r = read(fd, p + got, size - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (got < size)
		memset(p + got, 0, size - got);
	return p;
}

/* ct_tar_scan -- add DIR's regular files (and, when DEPTH > 0, its
 * subdirectories with their files) under the archive name PREFIX */
static void ct_tar_scan(struct ct_tar *t, const char *dir, const char *prefix, int depth)
{
	struct dirent **list = NULL;
	int n = scandir(dir, &list, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		char src[PATH_MAX], name[256];
		struct stat st;
		struct ct_tar_ent *e;

		if (list[i]->d_name[0] == '.' || t->files >= CT_TAR_MAX)
			goto next;
		snprintf(src, sizeof(src), "%s/%s", dir, list[i]->d_name);
		if (snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "/" : "",
			     list[i]->d_name) >= (int)sizeof(name) || lstat(src, &st) < 0)
			goto next;
		if (S_ISREG(st.st_mode) && st.st_size < 4 * 1048576) {
			e = ct_tar_add(t);
			if (!e)
				goto next;
			snprintf(e->path, sizeof(e->path), "%s", name);
			e->mode = st.st_mode & 0777;
			e->mtime = st.st_mtime;
			e->size = (size_t)st.st_size;
			e->data = ct_slurp(src, e->size);
			if (!e->data) {
				t->n--;
				goto next;
			}
			t->files++;
			t->bytes += e->size;
		} else if (S_ISDIR(st.st_mode) && depth > 0) {
			e = ct_tar_add(t);
			if (!e)
				goto next;
			snprintf(e->path, sizeof(e->path), "%s", name);
			e->is_dir = 1;
			e->mode = st.st_mode & 0777;
			e->mtime = st.st_mtime;
			t->dirs++;
			ct_tar_scan(t, src, name, depth - 1);
		}
next:
		free(list[i]);
	}
	free(list);
}

static void ct_tar_build(struct ct_tar *t)
{
	memset(t, 0, sizeof(*t));
	ct_tar_scan(t, CT_TAR_SRC, "", 1);
	for (int d = 0; t->files < CT_TAR_MAX; d++) {
		struct ct_tar_ent *e = ct_tar_add(t);

		if (!e)
			return;
		snprintf(e->path, sizeof(e->path), "gen%02d", d % 40);
		e->is_dir = 1;
		e->mode = 0755;
		e->mtime = 1000000000;
		if (d >= 40)
			t->n--;	/* the directory exists already */
		else
			t->dirs++;
		for (int f = 0; f < 50 && t->files < CT_TAR_MAX; f++) {
			e = ct_tar_add(t);
			if (!e)
				return;
			snprintf(e->path, sizeof(e->path), "gen%02d/f%d.%d.h", d % 40, d, f);
			e->mode = 0644;
			e->mtime = 1000000000;
			e->size = 200 + ct_rand() % 20000;
			e->data = malloc(e->size);
			if (!e->data) {
				t->n--;
				return;
			}
			ct_fill(e->data, e->size, (uint32_t)(d * 100 + f));
			t->files++;
			t->bytes += e->size;
		}
	}
}

static void ct_tar_free(struct ct_tar *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->e[i].data);
	free(t->e);
	memset(t, 0, sizeof(*t));
}

#define CT_TAR_DIR "tar.dir"

/* ct_tar_extract -- the timed "tar x"; 0 or -1 (c->msg) */
static int ct_tar_extract(struct ct_ctx *c, const struct ct_tar *t)
{
	char p[PATH_MAX];
	int rc = c->fs->ops->mkdir(c->fs, CT_TAR_DIR, 0755);

	if (rc < 0)
		return ct_fail(c, "mkdir %s: %s", CT_TAR_DIR, ct_strerr(rc));
	for (int i = 0; i < t->n; i++) {
		const struct ct_tar_ent *e = &t->e[i];
		struct ct_file f = { .fd = -1 };

		snprintf(p, sizeof(p), CT_TAR_DIR "/%s", e->path);
		if (e->is_dir) {
			rc = c->fs->ops->mkdir(c->fs, p, e->mode | 0700);
			if (rc < 0)
				return ct_fail(c, "mkdir %s: %s", p, ct_strerr(rc));
			continue;
		}
		rc = c->fs->ops->create(c->fs, p, O_WRONLY | O_EXCL, e->mode, &f);
		if (rc < 0)
			return ct_fail(c, "creat %s: %s", p, ct_strerr(rc));
		for (size_t off = 0; off < e->size;) {
			size_t len = e->size - off < 65536 ? e->size - off : 65536;
			ssize_t w = c->fs->ops->pwrite(c->fs, &f, e->data + off, len, off);

			if (w <= 0) {
				c->fs->ops->close(c->fs, &f);
				return ct_fail(c, "write %s: %s", p, ct_strerr(w < 0 ? (int)w : -EIO));
			}
			off += (size_t)w;
		}
		rc = c->fs->ops->close(c->fs, &f);
		if (rc == 0)
			rc = c->fs->ops->utimes(c->fs, p, e->mtime);
		if (rc < 0)
			return ct_fail(c, "close or utimes %s: %s", p, ct_strerr(rc));
	}
	/* tar sets the directories' times last (their contents changed them) */
	for (int i = t->n - 1; i >= 0; i--) {
		if (!t->e[i].is_dir)
			continue;
		snprintf(p, sizeof(p), CT_TAR_DIR "/%s", t->e[i].path);
		rc = c->fs->ops->utimes(c->fs, p, t->e[i].mtime);
		if (rc < 0)
			return ct_fail(c, "utimes %s: %s", p, ct_strerr(rc));
	}
	return 0;
}

/* ct_tar_verify -- sizes of every 50th file and the content of a few */
static int ct_tar_verify(struct ct_ctx *c, const struct ct_tar *t)
{
	for (int i = 0; i < t->n; i += 50) {
		const struct ct_tar_ent *e = &t->e[i];
		char p[PATH_MAX];
		struct ct_stat st;
		int rc;

		snprintf(p, sizeof(p), CT_TAR_DIR "/%s", e->path);
		rc = c->fs->ops->stat(c->fs, p, &st);
		if (rc < 0)
			return ct_fail(c, "stat %s: %s", p, ct_strerr(rc));
		if (!e->is_dir && st.size != e->size)
			return ct_fail(c, "%s: size %" PRIu64 ", expected %zu", p, st.size, e->size);
		if (!e->is_dir && e->size && e->size <= 65536) {
			struct ct_file f = { .fd = -1 };
			unsigned char *buf = malloc(e->size);
			ssize_t n = -1;

			if (buf && c->fs->ops->open(c->fs, p, O_RDONLY, &f) == 0) {
				n = c->fs->ops->pread(c->fs, &f, buf, e->size, 0);
				c->fs->ops->close(c->fs, &f);
			}
			rc = n == (ssize_t)e->size && !memcmp(buf, e->data, e->size);
			free(buf);
			if (!rc)
				return ct_fail(c, "%s: content differs from the archive's", p);
		}
	}
	return 0;
}

/* ------------------------------------------------------------ Postmark */

/*
 * A Postmark-style transaction mix (Katcher 1997, NetApp TR-3022): a pool of
 * PM_FILES files of 500..10000 bytes in PM_SUBDIRS directories; then
 * PM_TX transactions, each a read-or-append of a random file and a
 * create-or-delete (even biases, as Postmark's defaults); then every file
 * deleted. I/O goes in 4 KiB blocks (a client's page; Postmark's default of
 * 512 bytes would measure RPC count, not the server). Transactions per
 * second count the transaction phase only, as Postmark reports them.
 */
#define PM_FILES 500
#define PM_TX 2000
#define PM_SUBDIRS 10
#define PM_MIN 500
#define PM_MAX 10000
#define PM_BLOCK 4096
#define PM_DIR "pm.dir"

struct ct_pm {
	double create_s, tx_s, delete_s;
	int tx, created, deleted, reads, appends;
	uint64_t bytes_read, bytes_written;
};

struct pm_file {
	char name[64];
	uint64_t size;
};

static int pm_write(struct ct_ctx *c, const char *p, struct ct_file *f, uint64_t off, uint64_t len,
		    const unsigned char *blk)
{
	while (len) {
		size_t n = len < PM_BLOCK ? (size_t)len : PM_BLOCK;
		ssize_t w = c->fs->ops->pwrite(c->fs, f, blk, n, off);

		if (w != (ssize_t)n)
			return ct_fail(c, "write %s at %" PRIu64 ": %zd", p, off, w);
		off += n;
		len -= n;
	}
	return 0;
}

static int pm_create(struct ct_ctx *c, struct pm_file *pf, int id, const unsigned char *blk)
{
	struct ct_file f = { .fd = -1 };
	int rc;

	snprintf(pf->name, sizeof(pf->name), PM_DIR "/s%d/f%06d", id % PM_SUBDIRS, id);
	pf->size = PM_MIN + ct_rand() % (PM_MAX - PM_MIN + 1);
	rc = c->fs->ops->create(c->fs, pf->name, O_WRONLY | O_EXCL, 0644, &f);
	if (rc < 0)
		return ct_fail(c, "creat %s: %s", pf->name, ct_strerr(rc));
	rc = pm_write(c, pf->name, &f, 0, pf->size, blk);
	c->fs->ops->close(c->fs, &f);
	return rc;
}

static int ct_postmark(struct ct_ctx *c, struct ct_pm *pm)
{
	struct pm_file *files = calloc(PM_FILES + PM_TX, sizeof(*files));
	unsigned char blk[PM_BLOCK], *buf = malloc(PM_MAX + PM_TX * PM_BLOCK);
	int n = 0, next_id = 0, rc = -1;
	double t;

	memset(pm, 0, sizeof(*pm));
	if (!files || !buf) {
		ct_fail(c, "out of memory");
		goto out;
	}
	ct_fill(blk, sizeof(blk), 77);
	ct_rand_state = 0x5eed5eed5eedull;
	t = ct_now();
	if ((rc = c->fs->ops->mkdir(c->fs, PM_DIR, 0755)) < 0) {
		ct_fail(c, "mkdir %s: %s", PM_DIR, ct_strerr(rc));
		goto out;
	}
	for (int d = 0; d < PM_SUBDIRS; d++) {
		char p[64];

		snprintf(p, sizeof(p), PM_DIR "/s%d", d);
		if ((rc = c->fs->ops->mkdir(c->fs, p, 0755)) < 0) {
			ct_fail(c, "mkdir %s: %s", p, ct_strerr(rc));
			goto out;
		}
	}
	for (; n < PM_FILES; n++)
		if ((rc = pm_create(c, &files[n], next_id++, blk)) < 0)
			goto out;
	pm->create_s = ct_now() - t;
	t = ct_now();
	for (int tx = 0; tx < PM_TX; tx++) {
		struct ct_file f = { .fd = -1 };
		struct pm_file *pf;

		if (n == 0)
			break;
		pf = &files[ct_rand() % (unsigned)n];
		if (ct_rand() % 2) {
			ssize_t r;

			rc = c->fs->ops->open(c->fs, pf->name, O_RDONLY, &f);
			for (uint64_t off = 0; rc == 0 && off < pf->size; off += (uint64_t)r) {
				r = c->fs->ops->pread(c->fs, &f, buf, PM_BLOCK, off);
				if (r <= 0)
					rc = r < 0 ? (int)r : -EIO;
			}
			c->fs->ops->close(c->fs, &f);
			if (rc < 0) {
				ct_fail(c, "read %s: %s", pf->name, ct_strerr(rc));
				goto out;
			}
			pm->reads++;
			pm->bytes_read += pf->size;
		} else {
			uint64_t len = PM_MIN + ct_rand() % (PM_BLOCK - PM_MIN + 1);

			rc = c->fs->ops->open(c->fs, pf->name, O_WRONLY, &f);
			if (rc == 0)
				rc = pm_write(c, pf->name, &f, pf->size, len, blk);
			else
				ct_fail(c, "open %s: %s", pf->name, ct_strerr(rc));
			c->fs->ops->close(c->fs, &f);
			if (rc < 0)
				goto out;
			pf->size += len;
			pm->appends++;
			pm->bytes_written += len;
		}
		if (ct_rand() % 2) {
			if ((rc = pm_create(c, &files[n], next_id++, blk)) < 0)
				goto out;
			n++;
			pm->created++;
		} else {
			int k = (int)(ct_rand() % (unsigned)n);

			rc = c->fs->ops->unlink(c->fs, files[k].name);
			if (rc < 0) {
				ct_fail(c, "unlink %s: %s", files[k].name, ct_strerr(rc));
				goto out;
			}
			files[k] = files[--n];
			pm->deleted++;
		}
		pm->tx++;
	}
	pm->tx_s = ct_now() - t;
	t = ct_now();
	for (int k = 0; k < n; k++) {
		rc = c->fs->ops->unlink(c->fs, files[k].name);
		if (rc < 0) {
			ct_fail(c, "unlink %s: %s", files[k].name, ct_strerr(rc));
			goto out;
		}
	}
	for (int d = 0; d < PM_SUBDIRS; d++) {
		char p[64];

		snprintf(p, sizeof(p), PM_DIR "/s%d", d);
		if ((rc = c->fs->ops->rmdir(c->fs, p)) < 0) {
			ct_fail(c, "rmdir %s: %s", p, ct_strerr(rc));
			goto out;
		}
	}
	rc = c->fs->ops->rmdir(c->fs, PM_DIR);
	if (rc < 0)
		ct_fail(c, "rmdir %s: %s", PM_DIR, ct_strerr(rc));
	pm->delete_s = ct_now() - t;
out:
	free(files);
	free(buf);
	return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ servers */

/* a presto-nfsd of the functional mode: DIR/export, DIR/state, DIR/exports,
 * DIR/server.log; with NVRAM, a log file under /dev/shm */
struct ct_server {
	const char *label;
	pid_t pid;
	int out_fd;			/* the read end of its stdout */
	int nfs_port, mount_port;
	char dir[PATH_MAX];
	char export[PATH_MAX];
	char log[PATH_MAX];
	char nvram[PATH_MAX];		/* "" without --nvram */
};

static struct ct_server *ct_servers[4];

static void ct_server_log(const struct ct_server *s)
{
	char cmd[PATH_MAX + 64];

	fprintf(stderr, "---- last lines of %s\n", s->log);
	fflush(stderr);
	snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", s->log);
	if (system(cmd) != 0)
		fprintf(stderr, "(no log)\n");
}

/* ct_server_start -- start presto-nfsd; NVRAM: presto on with a log under
 * /dev/shm; EXPORT_OPTS: the knfsd options; 0 when it is ready, -1 */
static int ct_server_start(struct ct_server *s, const char *label, const char *base, int nvram,
			   const char *export_opts)
{
	const char *bin = getenv("PRESTO_BIN");
	char exe[PATH_MAX], exports[PATH_MAX + 16], state[PATH_MAX + 16], line[512];
	size_t used = 0;
	int out[2], logfd;
	double deadline;
	FILE *f;

	memset(s, 0, sizeof(*s));
	s->label = label;
	s->pid = -1;
	s->out_fd = -1;
	snprintf(s->dir, sizeof(s->dir), "%s/%s", base, label);
	snprintf(s->export, sizeof(s->export), "%s/export", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	snprintf(exports, sizeof(exports), "%s/exports", s->dir);
	snprintf(state, sizeof(state), "%s/state", s->dir);
	if (nvram)
		snprintf(s->nvram, sizeof(s->nvram), "/dev/shm/presto-cthon-%d-%s.nvlog", (int)getpid(),
			 label);
	if (mkdir(s->dir, 0755) < 0 || mkdir(s->export, 0777) < 0 || mkdir(state, 0700) < 0)
		return -1;
	chmod(s->export, 0777);
	f = fopen(exports, "w");
	if (!f)
		return -1;
	fprintf(f, "%s 127.0.0.1(%s)\n", s->export, export_opts);
	fclose(f);
	snprintf(exe, sizeof(exe), "%s/presto-nfsd", bin && *bin ? bin : "bin");
	if (pipe2(out, O_CLOEXEC) < 0)
		return -1;
	logfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return -1;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(out[1], 1);
		dup2(logfd, 2);
		setenv("PMEM_IS_PMEM_FORCE", "1", 1);
		if (nvram)
			execl(exe, exe, "--exports", exports, "--state-dir", state, "--bind", "127.0.0.1",
			      "--nfs-port", "0", "--mount-port", "0", "--no-rpcbind", "--foreground",
			      "--nvram", s->nvram, "--nvram-size", "32M", (char *)NULL);
		else
			execl(exe, exe, "--exports", exports, "--state-dir", state, "--bind", "127.0.0.1",
			      "--nfs-port", "0", "--mount-port", "0", "--no-rpcbind", "--foreground",
			      (char *)NULL);
		dprintf(2, "exec %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(logfd);
	for (int i = 0; i < 4; i++)
		if (!ct_servers[i]) {
			ct_servers[i] = s;
			break;
		}
	deadline = ct_now() + 20;
	while (ct_now() < deadline) {
		struct pollfd p = { .fd = out[0], .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, 100) <= 0)
			continue;
		r = read(out[0], line + used, sizeof(line) - 1 - used);
		if (r <= 0)
			break;
		used += (size_t)r;
		line[used] = '\0';
		if (!strchr(line, '\n') && used < sizeof(line) - 1)
			continue;
		if (sscanf(line, "presto-nfsd: ready nfs=%d mount=%d", &s->nfs_port, &s->mount_port) == 2) {
			/* stdout stays open until the server stops: it prints
			 * this one line only */
			s->out_fd = out[0];
			return 0;
		}
		break;
	}
	close(out[0]);
	fprintf(stderr, "cthon: %s: presto-nfsd did not print its ready line (got \"%.*s\")\n", label,
		(int)used, line);
	ct_server_log(s);
	return -1;
}

/* ct_server_stop -- SIGTERM, wait (SIGKILL after 20 s); 0 when it exited 0 */
static int ct_server_stop(struct ct_server *s)
{
	int st = 0, rc = -1;
	double deadline = ct_now() + 20;
	pid_t w = 0;

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		while (ct_now() < deadline && (w = waitpid(s->pid, &st, WNOHANG)) == 0)
			usleep(20000);
		if (w != s->pid) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &st, 0);
		} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			rc = 0;
		}
		s->pid = -1;
	}
	if (rc < 0)
		ct_server_log(s);
	if (s->out_fd >= 0)
		close(s->out_fd);
	s->out_fd = -1;
	if (s->nvram[0])
		unlink(s->nvram);
	for (int i = 0; i < 4; i++)
		if (ct_servers[i] == s)
			ct_servers[i] = NULL;
	return rc;
}

static char ct_base[PATH_MAX];		/* the functional run's directory */

/* ct_emergency -- SIGALRM (the watchdog), SIGABRT (a sanitizer), SIGSEGV:
 * kill the servers, remove their NVRAM files and the run's directory; only
 * async-signal-safe calls */
static void ct_emergency(int sig)
{
	static const char msg[] = "cthon: watchdog expired or fatal signal: killing the servers\n";

	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to do */
	}
	for (int i = 0; i < 4; i++) {
		if (ct_servers[i] && ct_servers[i]->pid > 0)
			kill(ct_servers[i]->pid, SIGKILL);
		if (ct_servers[i] && ct_servers[i]->nvram[0])
			unlink(ct_servers[i]->nvram);
	}
	if (ct_base[0] && fork() == 0) {
		char *argv[] = { "rm", "-rf", ct_base, NULL };

		execv("/bin/rm", argv);
		_exit(127);
	}
	if (sig == SIGALRM)
		_exit(1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int ct_rm_local(const char *path)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	return system(cmd);
}

/* ------------------------------------------------------------ modes */

static void ct_ctx_init(struct ct_ctx *c, struct ct_fs *fs, const char *label, const struct ct_params *p)
{
	memset(c, 0, sizeof(*c));
	c->fs = fs;
	c->label = label;
	c->p = *p;
	c->out = stdout;
}

/* ct_functional_client -- the basic and special tests through one client */
static void ct_functional_client(struct ct_ctx *total, struct ct_server *s, const char *client)
{
	char label[128];
	struct ct_fs fs;
	struct ct_raw raw;
	struct ct_ctx c;
	int rc;

	snprintf(label, sizeof(label), "%s/%s", s->label, client);
	ct_ctx_init(&c, &fs, label, &ct_quick_params);
	c.quiet = total->quiet;
	rc = !strcmp(client, "libnfs") ? ct_fs_nfs(&fs, s->nfs_port, s->mount_port, s->export)
				       : ct_fs_kc(&fs, s->nfs_port, s->mount_port, s->export,
						  !strcmp(client, "nfs3-ac") ? 3.0 : 0);
	if (rc < 0) {
		ct_fail(&c, "could not mount %s", s->export);
		ct_report(&c, "mount", -1, NULL);
		goto out;
	}
	ct_run_basic(&c);
	if (ct_raw_open(&raw, s->nfs_port, s->mount_port, s->export) < 0) {
		ct_fail(&c, "raw MOUNT + NFS connection failed");
		ct_report(&c, "raw connection", -1, NULL);
		ct_run_special(&c, NULL);
	} else {
		ct_run_special(&c, &raw);
		ct_raw_close(&raw);
	}
	ct_fs_close(&fs);
out:
	total->passed += c.passed;
	total->failed += c.failed;
	free(c.failures);
}

/* ct_functional_server -- every test against one presto-nfsd, through
 * libnfs's sync API and through the raw client */
static void ct_functional_server(struct ct_ctx *total, const char *base, const char *label, int nvram,
				 const char *opts)
{
	struct ct_server s;
	struct ct_ctx c;
	int rc;

	ct_ctx_init(&c, NULL, label, &ct_quick_params);
	c.quiet = total->quiet;
	if (ct_server_start(&s, label, base, nvram, opts) < 0) {
		ct_fail(&c, "presto-nfsd did not start (see its log above)");
		ct_report(&c, "server start", -1, NULL);
		ct_server_stop(&s);
		goto out;
	}
	ct_functional_client(total, &s, "libnfs");
	ct_functional_client(total, &s, "nfs3");
	ct_functional_client(total, &s, "nfs3-ac");
	rc = ct_server_stop(&s);
	if (rc < 0)
		ct_fail(&c, "presto-nfsd did not exit with status 0 on SIGTERM");
	ct_report(&c, "server exits 0 on SIGTERM", rc, NULL);
out:
	total->passed += c.passed;
	total->failed += c.failed;
	free(c.failures);
}

static int ct_functional(int quiet)
{
	char base[PATH_MAX] = "var/cthon.XXXXXX", local[PATH_MAX + 16];
	struct ct_ctx total, c;
	struct ct_fs fs;

	signal(SIGALRM, ct_emergency);
	signal(SIGABRT, ct_emergency);
	signal(SIGSEGV, ct_emergency);
	signal(SIGPIPE, SIG_IGN);
	alarm(110);
	memset(&total, 0, sizeof(total));
	total.quiet = quiet;
	mkdir("var", 0755);
	if (!mkdtemp(base)) {
		snprintf(base, sizeof(base), "/var/tmp/cthon.XXXXXX");
		if (!mkdtemp(base)) {
			perror("cthon: mkdtemp");
			printf("0 passed, 1 failed\n");
			return 1;
		}
	}
	{
		char *abs = realpath(base, NULL);

		if (abs) {
			snprintf(base, sizeof(base), "%s", abs);
			free(abs);
		}
	}
	chmod(base, 0755);
	if (!getenv("PRESTO_CTHON_KEEP"))
		snprintf(ct_base, sizeof(ct_base), "%s", base);
	ct_functional_server(&total, base, "presto-on", 1, "rw,insecure,no_root_squash");
	ct_functional_server(&total, base, "presto-off", 0, "rw,insecure,no_root_squash");
	/* the local column's operations, so that the benchmark's baseline is
	 * known to do the same work */
	snprintf(local, sizeof(local), "%s/local", base);
	mkdir(local, 0755);
	ct_fs_local(&fs, local);
	ct_ctx_init(&c, &fs, "local", &ct_quick_params);
	c.quiet = quiet;
	ct_run_basic(&c);
	ct_run_special(&c, NULL);
	total.passed += c.passed;
	total.failed += c.failed;
	free(c.failures);
	if (!getenv("PRESTO_CTHON_KEEP"))
		ct_rm_local(base);
	printf("%d passed, %d failed\n", total.passed, total.failed);
	return total.failed ? 1 : 0;
}

static void ct_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

#define CT_MAX_REPEAT 15

static int ct_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ct_timed -- the benchmark's runs on one server or directory; the basic
 * suite REPEAT times (each row's median); one JSON object on stdout */
static int ct_timed(struct ct_fs *fs, const char *label, const char *what, int repeat)
{
	struct ct_ctx c;
	struct ct_tar tar = { 0 };
	struct ct_pm pm = { 0 };
	double tar_x = -1, tar_rm = -1, total = 0;
	int tar_ok = 0, pm_ok = 0, do_basic = strstr(what, "basic") != NULL,
	    do_tar = strstr(what, "tar") != NULL, do_pm = strstr(what, "postmark") != NULL;

	double all[CT_MAX_REPEAT][CT_NROWS];
	int alldone[CT_MAX_REPEAT][CT_NROWS];

	ct_ctx_init(&c, fs, label, &ct_default_params);
	c.quiet = 1;
	memset(alldone, 0, sizeof(alldone));
	/* the checks' lines go to stderr: stdout carries the JSON only */
	c.out = stderr;
	for (int k = 0; do_basic && k < repeat; k++) {
		memset(c.done, 0, sizeof(c.done));
		ct_run_basic(&c);
		memcpy(all[k], c.secs, sizeof(c.secs));
		memcpy(alldone[k], c.done, sizeof(c.done));
	}
	/* each row: the median of the repetitions that completed it */
	for (int i = 0; do_basic && i < CT_NROWS; i++) {
		double v[CT_MAX_REPEAT];
		int n = 0;

		for (int k = 0; k < repeat; k++)
			if (alldone[k][i])
				v[n++] = all[k][i];
		c.done[i] = n > 0;
		if (n) {
			qsort(v, (size_t)n, sizeof(v[0]), ct_cmp_double);
			c.secs[i] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
		}
	}
	if (do_tar) {
		double t;

		ct_rand_state = 0x7a7a7a7aull;
		ct_tar_build(&tar);
		ct_rm_rf(fs, CT_TAR_DIR);
		t = ct_now();
		if (ct_tar_extract(&c, &tar) == 0) {
			tar_x = ct_now() - t;
			if (ct_tar_verify(&c, &tar) == 0) {
				int rc;

				t = ct_now();
				rc = ct_rm_rf(fs, CT_TAR_DIR);
				if (rc == 0) {
					tar_rm = ct_now() - t;
					tar_ok = 1;
				} else {
					ct_fail(&c, "rm -rf %s: %s", CT_TAR_DIR, ct_strerr(rc));
				}
			}
		}
		ct_report(&c, "tar x, rm -rf", tar_ok ? 0 : -1, NULL);
	}
	if (do_pm) {
		ct_rm_rf(fs, PM_DIR);
		pm_ok = ct_postmark(&c, &pm) == 0;
		ct_report(&c, "postmark", pm_ok ? 0 : -1, NULL);
	}
	printf("{\"label\":");
	ct_json_str(stdout, label);
	printf(",\"kind\":\"%s\",\"rows\":{", fs->kind);
	for (int i = 0, first = 1; i < CT_NROWS; i++) {
		if (!c.done[i])
			continue;
		printf("%s\"%s\":%.6f", first ? "" : ",", ct_row_name[i], c.secs[i]);
		total += c.secs[i];
		first = 0;
	}
	printf("},\"total\":%.6f,\"repeat\":%d,\"client\":\"%s\"", total, repeat, fs->kind);
	if (do_basic) {
		printf(",\"rows_all\":{");
		for (int i = 0, first = 1; i < CT_NROWS; i++) {
			printf("%s\"%s\":[", first ? "" : ",", ct_row_name[i]);
			for (int k = 0, f2 = 1; k < repeat; k++) {
				if (!alldone[k][i])
					continue;
				printf("%s%.6f", f2 ? "" : ",", all[k][i]);
				f2 = 0;
			}
			printf("]");
			first = 0;
		}
		printf("}");
	}
	if (do_tar) {
		printf(",\"tar\":{\"ok\":%s,\"files\":%d,\"dirs\":%d,\"bytes\":%" PRIu64
		       ",\"extract_s\":%.6f,\"remove_s\":%.6f}", tar_ok ? "true" : "false", tar.files,
		       tar.dirs, tar.bytes, tar_x, tar_rm);
	}
	if (do_pm) {
		printf(",\"postmark\":{\"ok\":%s,\"files\":%d,\"transactions\":%d,\"subdirs\":%d,"
		       "\"min_size\":%d,\"max_size\":%d,\"block\":%d,\"reads\":%d,\"appends\":%d,"
		       "\"created\":%d,\"deleted\":%d,\"create_s\":%.6f,\"transactions_s\":%.6f,"
		       "\"delete_s\":%.6f,\"tx_per_s\":%.1f}", pm_ok ? "true" : "false", PM_FILES, pm.tx,
		       PM_SUBDIRS, PM_MIN, PM_MAX, PM_BLOCK, pm.reads, pm.appends, pm.created,
		       pm.deleted, pm.create_s, pm.tx_s, pm.delete_s,
		       pm.tx_s > 0 ? pm.tx / pm.tx_s : 0.0);
	}
	printf(",\"params\":{\"levels\":%d,\"files\":%d,\"dirs\":%d,\"lookups\":%d,\"attr_files\":%d,"
	       "\"attr_count\":%d,\"size\":%d,\"rw_count\":%d,\"dir_files\":%d,\"dir_count\":%d,"
	       "\"link_files\":%d,\"link_count\":%d,\"sym_files\":%d,\"sym_count\":%d,"
	       "\"statfs_count\":%d}", c.p.levels, c.p.files, c.p.dirs, c.p.lookups, c.p.attr_files,
	       c.p.attr_count, c.p.size, c.p.rw_count, c.p.dir_files, c.p.dir_count, c.p.link_files,
	       c.p.link_count, c.p.sym_files, c.p.sym_count, c.p.statfs_count);
	printf(",\"passed\":%d,\"failed\":%d,\"failures\":", c.passed, c.failed);
	ct_json_str(stdout, c.failures ? c.failures : "");
	printf("}\n");
	ct_tar_free(&tar);
	free(c.failures);
	return c.failed ? 1 : 0;
}

static void ct_usage(void)
{
	fprintf(stderr,
		"usage: cthon [-q]                       functional tests (starts presto-nfsd)\n"
		"       cthon -t -n NFSPORT -m MNTPORT -e EXPORT [-c nfs3|nfs3-ac|libnfs] [-r N] [-L LABEL] [-w WHAT]\n"
		"                [-p USECS]\n"
		"       cthon -t -l DIR [-r N] [-L LABEL] [-w WHAT]\n"
		"  -r N: the basic suite N times (at most 15), each row's median\n"
		"  WHAT: a list of basic,tar,postmark (default: all)\n"
		"  -p USECS: nfs3 clients poll without sleeping that long after a call\n"
		"            (0, the default: they sleep at once; at most 1 s)\n");
}

int main(int argc, char **argv)
{
	const char *export = NULL, *local = NULL, *label = NULL, *what = "basic,tar,postmark",
		   *client = "nfs3";
	int timed = 0, quiet = 0, nfs_port = 0, mount_port = 0, repeat = 1, opt, rc;
	struct ct_fs fs;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "qtn:m:e:l:L:w:c:r:p:h")) != -1) {
		switch (opt) {
		case 'q': quiet = 1; break;
		case 't': timed = 1; break;
		case 'n': nfs_port = atoi(optarg); break;
		case 'm': mount_port = atoi(optarg); break;
		case 'e': export = optarg; break;
		case 'l': local = optarg; break;
		case 'L': label = optarg; break;
		case 'w': what = optarg; break;
		case 'c': client = optarg; break;
		case 'r':
			repeat = atoi(optarg);
			if (repeat < 1 || repeat > CT_MAX_REPEAT) {
				ct_usage();
				return 2;
			}
			break;
		case 'p': {
			char *end;
			long us = strtol(optarg, &end, 10);

			if (!*optarg || *end || us < 0 || us > 1000000) {
				ct_usage();
				return 2;
			}
			ct_spin_s = (double)us / 1e6;
			break;
		}
		default: ct_usage(); return 2;
		}
	}
	umask(0);
	if (!timed)
		return ct_functional(quiet);
	if (local) {
		ct_fs_local(&fs, local);
	} else if (export && nfs_port > 0 && mount_port > 0) {
		if (strcmp(client, "libnfs") && strcmp(client, "nfs3") && strcmp(client, "nfs3-ac")) {
			ct_usage();
			return 2;
		}
		if ((!strcmp(client, "libnfs") ? ct_fs_nfs(&fs, nfs_port, mount_port, export)
					       : ct_fs_kc(&fs, nfs_port, mount_port, export,
							  !strcmp(client, "nfs3-ac") ? 3.0 : 0)) < 0)
			return 1;
	} else {
		ct_usage();
		return 2;
	}
	rc = ct_timed(&fs, label ? label : (local ? "local" : "nfs"), what, repeat);
	ct_fs_close(&fs);
	return rc;
}
