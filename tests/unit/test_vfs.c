/*
 * test_vfs.c -- nfsd/vfs.h: the one errno -> nfsstat3 mapping, fattr3 /
 * pre-op / post-op attributes from real stats of every file type, and the
 * per-thread identity (vfs_become, vfs_become_root, vfs_caller_uid), checked
 * by what the kernel really does: the owner of a file created while
 * squashed, a permission refused, /proc/thread-self/status, and another
 * thread left untouched.
 *
 * Runs as root (the server does; open_by_handle_at and setfsuid need it).
 */
#include "nfsd/vfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/presto-vfs-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	/* anyone may create here: the squashed identities write into it */
	return chmod(dir, 0777);
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	vfs_become_root();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* every identity test ends as root again, whether it passed or not */
static int back_to_root(void **state)
{
	(void)state;
	vfs_become_root();
	return 0;
}

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* ---- vfs_nfserr ---- */

static void test_nfserr_mapped(void **state)
{
	static const struct {
		int err;
		nfsstat3 st;
	} map[] = {
		{ 0, NFS3_OK },
		{ EPERM, NFS3ERR_PERM },
		{ ENOENT, NFS3ERR_NOENT },
		{ ENXIO, NFS3ERR_NXIO },
		{ EACCES, NFS3ERR_ACCES },
		{ EEXIST, NFS3ERR_EXIST },
		{ EXDEV, NFS3ERR_XDEV },
		{ ENODEV, NFS3ERR_NODEV },
		{ ENOTDIR, NFS3ERR_NOTDIR },
		{ EISDIR, NFS3ERR_ISDIR },
		{ EINVAL, NFS3ERR_INVAL },
		{ EFBIG, NFS3ERR_FBIG },
		{ ENOSPC, NFS3ERR_NOSPC },
		{ EROFS, NFS3ERR_ROFS },
		{ EMLINK, NFS3ERR_MLINK },
		{ ENAMETOOLONG, NFS3ERR_NAMETOOLONG },
		{ ENOTEMPTY, NFS3ERR_NOTEMPTY },
		{ EDQUOT, NFS3ERR_DQUOT },
		{ ESTALE, NFS3ERR_STALE },
		{ EBADMSG, NFS3ERR_BADHANDLE },	/* fh_parse's refusal */
		{ EOPNOTSUPP, NFS3ERR_NOTSUPP },
		{ ENOTSUP, NFS3ERR_NOTSUPP },
		{ ELOOP, NFS3ERR_NOTDIR },
		{ EAGAIN, NFS3ERR_JUKEBOX },
		{ EWOULDBLOCK, NFS3ERR_JUKEBOX },
		{ ETIMEDOUT, NFS3ERR_JUKEBOX },
		{ ENOMEM, NFS3ERR_SERVERFAULT },
		{ EIO, NFS3ERR_IO },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (vfs_nfserr(map[i].err) != map[i].st)
			fail_msg("errno %d (%s): %d, want %d", map[i].err, strerror(map[i].err),
				 vfs_nfserr(map[i].err), map[i].st);
		/* the negative errno of our return convention maps the same */
		if (vfs_nfserr(-map[i].err) != map[i].st)
			fail_msg("errno -%d (%s): %d, want %d", map[i].err, strerror(map[i].err),
				 vfs_nfserr(-map[i].err), map[i].st);
	}
}

static void test_nfserr_unmapped_is_io(void **state)
{
	static const int other[] = { EIO, EBADF, EINTR, E2BIG, ENOSYS, EFAULT, EBUSY, ETXTBSY,
				     EOVERFLOW, ERANGE, EPIPE, ECONNRESET, 4095, 100000, INT_MAX };
	(void)state;

	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		assert_int_equal(vfs_nfserr(other[i]), NFS3ERR_IO);
		assert_int_equal(vfs_nfserr(-other[i]), NFS3ERR_IO);
	}
}

static void test_nfserr_from_real_calls(void **state)
{
	char p[128], q[128];
	(void)state;

	/* what the kernel really returns, through the mapping */
	path_of(p, sizeof(p), "nfserr-file");
	int fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	path_of(q, sizeof(q), "nfserr-file/below");
	assert_int_equal(mkdir(q, 0755), -1);
	assert_int_equal(vfs_nfserr(-errno), NFS3ERR_NOTDIR);
	assert_int_equal(mkdir(p, 0755), -1);
	assert_int_equal(vfs_nfserr(-errno), NFS3ERR_EXIST);
	path_of(q, sizeof(q), "nfserr-absent");
	assert_int_equal(unlink(q), -1);
	assert_int_equal(vfs_nfserr(-errno), NFS3ERR_NOENT);
	assert_int_equal(rmdir(dir), -1);
	assert_int_equal(vfs_nfserr(-errno), NFS3ERR_NOTEMPTY);
	char longname[300];
	memset(longname, 'n', 299);
	longname[299] = '\0';
	snprintf(q, sizeof(q), "%s/", dir);
	char lp[512];
	snprintf(lp, sizeof(lp), "%s%s", q, longname);
	assert_int_equal(open(lp, O_RDONLY), -1);
	assert_int_equal(vfs_nfserr(-errno), NFS3ERR_NAMETOOLONG);
	unlink(p);
}

/* ---- attributes ---- */

static void check_fattr(const struct stat *st, const fattr3 *a, uint64_t fsid, ftype3 type)
{
	assert_int_equal(a->type, type);
	assert_int_equal(a->mode, st->st_mode & 07777);
	assert_int_equal(a->nlink, st->st_nlink);
	assert_int_equal(a->uid, st->st_uid);
	assert_int_equal(a->gid, st->st_gid);
	assert_int_equal(a->size, (uint64_t)st->st_size);
	assert_int_equal(a->used, (uint64_t)st->st_blocks * 512);
	assert_int_equal(a->rdev.specdata1, major(st->st_rdev));
	assert_int_equal(a->rdev.specdata2, minor(st->st_rdev));
	assert_int_equal(a->fsid, fsid);
	assert_int_equal(a->fileid, st->st_ino);
	assert_int_equal(a->atime.seconds, (uint32_t)st->st_atim.tv_sec);
	assert_int_equal(a->atime.nseconds, st->st_atim.tv_nsec);
	assert_int_equal(a->mtime.seconds, (uint32_t)st->st_mtim.tv_sec);
	assert_int_equal(a->mtime.nseconds, st->st_mtim.tv_nsec);
	assert_int_equal(a->ctime.seconds, (uint32_t)st->st_ctim.tv_sec);
	assert_int_equal(a->ctime.nseconds, st->st_ctim.tv_nsec);
}

static void set_times(const char *p, int flags)
{
	struct timespec ts[2] = {
		{ .tv_sec = 1000000000, .tv_nsec = 123456789 },	/* atime */
		{ .tv_sec = 1234567890, .tv_nsec = 987654321 },	/* mtime */
	};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, flags), 0);
}

static void test_fattr_file(void **state)
{
	char p[128], buf[5000];
	struct stat st;
	fattr3 a;
	(void)state;

	path_of(p, sizeof(p), "attr-file");
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	memset(buf, 'z', sizeof(buf));
	assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	assert_int_equal(fsync(fd), 0);
	close(fd);
	assert_int_equal(chmod(p, 06751), 0);	/* setuid, setgid: kept */
	assert_int_equal(chown(p, 1234, 5678), 0);
	assert_int_equal(chmod(p, 06751), 0);	/* chown cleared them */
	char l2[128];
	path_of(l2, sizeof(l2), "attr-file-link");
	assert_int_equal(link(p, l2), 0);
	set_times(p, 0);
	assert_int_equal(stat(p, &st), 0);

	memset(&a, 0xee, sizeof(a));
	vfs_fattr(&st, 0x1122334455667788ull, &a);
	check_fattr(&st, &a, 0x1122334455667788ull, NF3REG);
	assert_int_equal(a.mode, 06751);
	assert_int_equal(a.nlink, 2);
	assert_int_equal(a.uid, 1234);
	assert_int_equal(a.gid, 5678);
	assert_int_equal(a.size, 5000);
	assert_true(a.used >= 5000);
	assert_int_equal(a.atime.seconds, 1000000000);
	assert_int_equal(a.atime.nseconds, 123456789);
	assert_int_equal(a.mtime.seconds, 1234567890);
	assert_int_equal(a.mtime.nseconds, 987654321);
	unlink(l2);
	unlink(p);
}

static void test_fattr_large_sparse(void **state)
{
	char p[128];
	struct stat st;
	fattr3 a;
	(void)state;

	/* 5 GiB: the size is 64 bits on the wire; used counts blocks */
	path_of(p, sizeof(p), "attr-sparse");
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 5ll << 30), 0);
	close(fd);
	assert_int_equal(stat(p, &st), 0);
	vfs_fattr(&st, 1, &a);
	check_fattr(&st, &a, 1, NF3REG);
	assert_int_equal(a.size, 5ull << 30);
	assert_true(a.used < a.size);
	unlink(p);
}

static void test_fattr_dir(void **state)
{
	char p[128], sub[160];
	struct stat st;
	fattr3 a;
	(void)state;

	path_of(p, sizeof(p), "attr-dir");
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chmod(p, 01775), 0);	/* sticky kept */
	snprintf(sub, sizeof(sub), "%s/sub", p);
	assert_int_equal(mkdir(sub, 0755), 0);
	set_times(p, 0);
	assert_int_equal(stat(p, &st), 0);
	vfs_fattr(&st, 7, &a);
	check_fattr(&st, &a, 7, NF3DIR);
	assert_int_equal(a.mode, 01775);
	assert_int_equal(a.nlink, 3);
	rmdir(sub);
	rmdir(p);
}

static void test_fattr_symlink(void **state)
{
	char p[128];
	struct stat st;
	fattr3 a;
	(void)state;

	path_of(p, sizeof(p), "attr-link");
	assert_int_equal(symlink("some/where/else", p), 0);
	set_times(p, AT_SYMLINK_NOFOLLOW);
	assert_int_equal(lstat(p, &st), 0);
	vfs_fattr(&st, 7, &a);
	check_fattr(&st, &a, 7, NF3LNK);
	assert_int_equal(a.size, strlen("some/where/else"));
	assert_int_equal(a.mtime.seconds, 1234567890);
	unlink(p);
}

static void test_fattr_fifo(void **state)
{
	char p[128];
	struct stat st;
	fattr3 a;
	(void)state;

	path_of(p, sizeof(p), "attr-fifo");
	assert_int_equal(mkfifo(p, 0620), 0);
	assert_int_equal(chmod(p, 0620), 0);
	assert_int_equal(lstat(p, &st), 0);
	vfs_fattr(&st, 7, &a);
	check_fattr(&st, &a, 7, NF3FIFO);
	assert_int_equal(a.mode, 0620);
	assert_int_equal(a.size, 0);
	unlink(p);
}

static void test_fattr_devices_and_socket(void **state)
{
	char p[128];
	struct stat st;
	fattr3 a;
	(void)state;

	/* a character device: /dev/null is 1:3 */
	assert_int_equal(stat("/dev/null", &st), 0);
	vfs_fattr(&st, 7, &a);
	check_fattr(&st, &a, 7, NF3CHR);
	assert_int_equal(a.rdev.specdata1, 1);
	assert_int_equal(a.rdev.specdata2, 3);

	/* a block device with a large minor (mknod needs CAP_MKNOD: skipped
	 * when refused) */
	path_of(p, sizeof(p), "attr-blk");
	if (mknod(p, S_IFBLK | 0600, makedev(259, 70000)) == 0) {
		assert_int_equal(lstat(p, &st), 0);
		vfs_fattr(&st, 7, &a);
		check_fattr(&st, &a, 7, NF3BLK);
		assert_int_equal(a.rdev.specdata1, 259);
		assert_int_equal(a.rdev.specdata2, 70000);
		unlink(p);
	}

	/* a socket */
	path_of(p, sizeof(p), "attr-sock");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s >= 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	assert_true(strlen(p) < sizeof(sun.sun_path));
	memcpy(sun.sun_path, p, strlen(p) + 1);
	assert_int_equal(bind(s, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(lstat(p, &st), 0);
	vfs_fattr(&st, 7, &a);
	check_fattr(&st, &a, 7, NF3SOCK);
	close(s);
	unlink(p);
}

static void test_pre_post_op_wcc(void **state)
{
	char p[128], buf[32];
	struct stat st;
	post_op_attr po;
	pre_op_attr pr;
	wcc_data w;
	(void)state;

	path_of(p, sizeof(p), "attr-wcc");
	int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "abc", 3), 3);
	set_times(p, 0);
	assert_int_equal(fstat(fd, &st), 0);

	vfs_post_op(&po, &st, 9);
	assert_true(po.attributes_follow);
	check_fattr(&st, &po.post_op_attr_u.attributes, 9, NF3REG);
	memset(&po, 0, sizeof(po));
	vfs_post_op_fd(&po, fd, 9);
	assert_true(po.attributes_follow);
	check_fattr(&st, &po.post_op_attr_u.attributes, 9, NF3REG);
	vfs_post_op_fd(&po, -1, 9);
	assert_false(po.attributes_follow);
	int closed = dup(fd);
	close(closed);
	vfs_post_op_fd(&po, closed, 9);
	assert_false(po.attributes_follow);

	vfs_pre_op(&pr, NULL);
	assert_false(pr.attributes_follow);
	vfs_pre_op(&pr, &st);
	assert_true(pr.attributes_follow);
	assert_int_equal(pr.pre_op_attr_u.attributes.size, 3);
	assert_int_equal(pr.pre_op_attr_u.attributes.mtime.seconds, 1234567890);
	assert_int_equal(pr.pre_op_attr_u.attributes.mtime.nseconds, 987654321);
	assert_int_equal(pr.pre_op_attr_u.attributes.ctime.seconds, (uint32_t)st.st_ctim.tv_sec);
	assert_int_equal(pr.pre_op_attr_u.attributes.ctime.nseconds, st.st_ctim.tv_nsec);

	/* wcc: before is the given stat, after is the file now */
	assert_int_equal(write(fd, "defg", 4), 4);
	struct stat now;
	assert_int_equal(fstat(fd, &now), 0);
	vfs_wcc(&w, &st, fd, 9);
	assert_true(w.before.attributes_follow);
	assert_int_equal(w.before.pre_op_attr_u.attributes.size, 3);
	assert_true(w.after.attributes_follow);
	check_fattr(&now, &w.after.post_op_attr_u.attributes, 9, NF3REG);
	assert_int_equal(w.after.post_op_attr_u.attributes.size, 7);
	vfs_wcc(&w, NULL, -1, 9);
	assert_false(w.before.attributes_follow);
	assert_false(w.after.attributes_follow);
	close(fd);
	unlink(p);

	vfs_proc_path(12345, buf);
	assert_string_equal(buf, "/proc/self/fd/12345");
	vfs_proc_path(0, buf);
	assert_string_equal(buf, "/proc/self/fd/0");
}

/* ---- identity ---- */

static struct export_opts opts(enum export_squash sq, uint32_t anonuid, uint32_t anongid)
{
	struct export_opts o;
	memset(&o, 0, sizeof(o));
	o.squash = sq;
	o.anonuid = anonuid;
	o.anongid = anongid;
	return o;
}

static struct call_cred cred(uint32_t flavor, uint32_t uid, uint32_t gid, unsigned ng, ...)
{
	struct call_cred c;
	va_list ap;
	memset(&c, 0, sizeof(c));
	c.flavor = flavor;
	c.uid = uid;
	c.gid = gid;
	c.ngids = ng;
	va_start(ap, ng);
	for (unsigned i = 0; i < ng; i++)
		c.gids[i] = va_arg(ap, uint32_t);
	va_end(ap);
	return c;
}

/* thread_status -- the fs uid, fs gid and groups of the calling thread, from
 * /proc/thread-self/status ("Uid: r e s fs"). */
static void thread_status(unsigned *fsuid, unsigned *fsgid, char *groups, size_t glen)
{
	char line[512];
	unsigned a, b, c;
	FILE *f = fopen("/proc/thread-self/status", "r");
	assert_non_null(f);
	groups[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %u %u %u %u", &a, &b, &c, fsuid) == 4)
			continue;
		if (sscanf(line, "Gid: %u %u %u %u", &a, &b, &c, fsgid) == 4)
			continue;
		if (!strncmp(line, "Groups:", 7)) {
			char *s = line + 7;
			while (*s == ' ' || *s == '\t')
				s++;
			s[strcspn(s, "\n")] = '\0';
			/* trailing space in the kernel's list */
			size_t n = strlen(s);
			while (n && s[n - 1] == ' ')
				s[--n] = '\0';
			snprintf(groups, glen, "%.200s", s);
		}
	}
	fclose(f);
}

/* create_owner -- create NAME in the scratch dir as the current identity and
 * return its owner; the file is then removed (as root). */
static void create_owner(const char *name, uid_t *uid, gid_t *gid)
{
	char p[128];
	struct stat st;
	path_of(p, sizeof(p), name);
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd < 0)
		fail_msg("create %s: %s", p, strerror(errno));
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	*uid = st.st_uid;
	*gid = st.st_gid;
	assert_int_equal(unlink(p), 0);
}

static void expect_identity(unsigned uid, unsigned gid, const char *groups)
{
	unsigned fu = 99999, fg = 99999;
	char g[256];
	uid_t ou;
	gid_t og;

	assert_int_equal((unsigned)setfsuid((uid_t)-1), uid);
	assert_int_equal((unsigned)setfsgid((gid_t)-1), gid);
	thread_status(&fu, &fg, g, sizeof(g));
	assert_int_equal(fu, uid);
	assert_int_equal(fg, gid);
	assert_string_equal(g, groups);
	create_owner("owned", &ou, &og);
	assert_int_equal(ou, uid);
	assert_int_equal(og, gid);
}

static void test_become_no_squash(void **state)
{
	struct export_opts o = opts(EXPORT_NO_ROOT_SQUASH, 65534, 65534);
	struct call_cred c = cred(AUTH_SYS, 1000, 2000, 2, 2000, 3000);
	(void)state;

	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(1000, 2000, "2000 3000");
	vfs_become_root();
	expect_identity(0, 0, "");

	/* no_root_squash: root stays root */
	c = cred(AUTH_SYS, 0, 0, 1, 0);
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(0, 0, "0");
}

static void test_become_root_squash(void **state)
{
	struct export_opts o = opts(EXPORT_ROOT_SQUASH, 4321, 8765);
	struct call_cred c = cred(AUTH_SYS, 0, 0, 3, 0, 5, 6);
	(void)state;

	/* uid 0, gid 0 and group 0 among the others become anonymous */
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(4321, 8765, "5 6 8765");
	vfs_become_root();

	/* a user keeps its uid; only gid 0 is squashed */
	c = cred(AUTH_SYS, 1000, 0, 2, 0, 7);
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(1000, 8765, "7 8765");
	vfs_become_root();

	c = cred(AUTH_SYS, 1000, 2000, 0);
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(1000, 2000, "");
}

static void test_become_all_squash_and_auth_none(void **state)
{
	struct export_opts o = opts(EXPORT_ALL_SQUASH, 4321, 8765);
	struct call_cred c = cred(AUTH_SYS, 1000, 2000, 2, 3000, 4000);
	(void)state;

	/* every user, and no supplementary group survives */
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(4321, 8765, "");
	vfs_become_root();
	c = cred(AUTH_SYS, 0, 0, 0);
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(4321, 8765, "");
	vfs_become_root();

	/* AUTH_NONE is anonymous whatever the export says */
	o = opts(EXPORT_NO_ROOT_SQUASH, 1111, 2222);
	c = cred(AUTH_NONE, 0, 0, 1, 0);
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(1111, 2222, "");
}

static void test_become_really_restricts(void **state)
{
	char p[128], d[128], q[160];
	struct export_opts o = opts(EXPORT_ROOT_SQUASH, 65534, 65534);
	(void)state;

	/* a root-only file: root reads it, a squashed root does not */
	path_of(p, sizeof(p), "secret");
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	struct call_cred c = cred(AUTH_SYS, 0, 0, 0);
	assert_int_equal(vfs_become(&c, &o), 0);
	assert_int_equal(open(p, O_RDONLY), -1);
	assert_int_equal(errno, EACCES);
	vfs_become_root();
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	close(fd);

	/* a directory writable by group 3000 only: the supplementary group
	 * is what lets uid 1000 in */
	path_of(d, sizeof(d), "group-dir");
	assert_int_equal(mkdir(d, 0700), 0);
	assert_int_equal(chown(d, 0, 3000), 0);
	assert_int_equal(chmod(d, 0070), 0);
	snprintf(q, sizeof(q), "%s/f", d);
	c = cred(AUTH_SYS, 1000, 2000, 1, 3000);
	assert_int_equal(vfs_become(&c, &o), 0);
	fd = open(q, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	vfs_become_root();
	assert_int_equal(unlink(q), 0);
	c = cred(AUTH_SYS, 1000, 2000, 0);
	assert_int_equal(vfs_become(&c, &o), 0);
	assert_int_equal(open(q, O_CREAT | O_WRONLY, 0644), -1);
	assert_int_equal(errno, EACCES);
	vfs_become_root();
	unlink(p);
	rmdir(d);
}

static void test_become_sixteen_groups(void **state)
{
	struct export_opts o = opts(EXPORT_NO_ROOT_SQUASH, 65534, 65534);
	struct call_cred c = cred(AUTH_SYS, 1000, 2000, 0);
	char want[256] = "";
	(void)state;

	c.ngids = NFSD_MAX_GIDS;
	for (unsigned i = 0; i < NFSD_MAX_GIDS; i++) {
		c.gids[i] = 100 + i;
		char s[16];
		snprintf(s, sizeof(s), i ? " %u" : "%u", 100 + i);
		strcat(want, s);
	}
	assert_int_equal(vfs_become(&c, &o), 0);
	expect_identity(1000, 2000, want);
}

/* per thread: another thread's identity is not touched */
static pthread_barrier_t bar;
static unsigned other_fsuid, other_fsgid;
static char other_groups[256];
static uid_t other_owner;
static gid_t other_group;

static void *other_thread(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&bar);	/* 1: the main thread is squashed now */
	other_fsuid = (unsigned)setfsuid((uid_t)-1);
	other_fsgid = (unsigned)setfsgid((gid_t)-1);
	char p[128];
	path_of(p, sizeof(p), "other-thread");
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd >= 0) {
		struct stat st;
		fstat(fd, &st);
		other_owner = st.st_uid;
		other_group = st.st_gid;
		close(fd);
		unlink(p);
	}
	/* groups read from this thread's own status */
	FILE *f = fopen("/proc/thread-self/status", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Groups:", 7))
			snprintf(other_groups, sizeof(other_groups), "%.200s", line + 7);
	if (f)
		fclose(f);
	pthread_barrier_wait(&bar);	/* 2: done */
	return NULL;
}

static void test_become_is_per_thread(void **state)
{
	struct export_opts o = opts(EXPORT_NO_ROOT_SQUASH, 4321, 8765);
	struct call_cred c = cred(AUTH_SYS, 1000, 2000, 2, 3000, 4000);
	pthread_t t;
	(void)state;

	other_owner = 99999;
	assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	assert_int_equal(vfs_become(&c, &o), 0);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&bar);
	expect_identity(1000, 2000, "3000 4000");
	assert_int_equal(other_fsuid, 0);
	assert_int_equal(other_fsgid, 0);
	assert_int_equal(other_owner, 0);
	assert_int_equal(other_group, 0);
	assert_null(strstr(other_groups, "3000"));
}

static void test_caller_uid(void **state)
{
	static const struct {
		enum export_squash sq;
		uint32_t flavor, uid, anonuid;
		uid_t want;
		bool root;
	} cases[] = {
		{ EXPORT_ROOT_SQUASH, AUTH_SYS, 1000, 65534, 1000, false },
		{ EXPORT_ROOT_SQUASH, AUTH_SYS, 0, 65534, 65534, false },
		{ EXPORT_NO_ROOT_SQUASH, AUTH_SYS, 0, 65534, 0, true },
		{ EXPORT_NO_ROOT_SQUASH, AUTH_SYS, 1000, 65534, 1000, false },
		{ EXPORT_ALL_SQUASH, AUTH_SYS, 1000, 4321, 4321, false },
		{ EXPORT_ALL_SQUASH, AUTH_SYS, 0, 4321, 4321, false },
		{ EXPORT_NO_ROOT_SQUASH, AUTH_NONE, 0, 4321, 4321, false },
		{ EXPORT_NO_ROOT_SQUASH, AUTH_NONE, 1000, 4321, 4321, false },
		/* anonuid=0 makes the squashed caller root (as in knfsd) */
		{ EXPORT_ROOT_SQUASH, AUTH_SYS, 0, 0, 0, true },
		{ EXPORT_ALL_SQUASH, AUTH_SYS, 1000, 0, 0, true },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct export_opts o = opts(cases[i].sq, cases[i].anonuid, 65534);
		struct call_cred c = cred(cases[i].flavor, cases[i].uid, 100, 0);
		uid_t u = 12345;
		bool root = vfs_caller_uid(&c, &o, &u);
		if (u != cases[i].want || root != cases[i].root)
			fail_msg("case %zu: uid %u root %d, want %u %d", i, (unsigned)u, root,
				 (unsigned)cases[i].want, cases[i].root);
		/* vfs_become agrees with vfs_caller_uid */
		assert_int_equal(vfs_become(&c, &o), 0);
		assert_int_equal((unsigned)setfsuid((uid_t)-1), (unsigned)cases[i].want);
		vfs_become_root();
	}
}

#define ID_TEST(f) cmocka_unit_test_teardown(f, back_to_root)

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_vfs: must run as root (setfsuid, chown, mknod)\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nfserr_mapped),
		cmocka_unit_test(test_nfserr_unmapped_is_io),
		cmocka_unit_test(test_nfserr_from_real_calls),
		cmocka_unit_test(test_fattr_file),
		cmocka_unit_test(test_fattr_large_sparse),
		cmocka_unit_test(test_fattr_dir),
		cmocka_unit_test(test_fattr_symlink),
		cmocka_unit_test(test_fattr_fifo),
		cmocka_unit_test(test_fattr_devices_and_socket),
		cmocka_unit_test(test_pre_post_op_wcc),
		ID_TEST(test_become_no_squash),
		ID_TEST(test_become_root_squash),
		ID_TEST(test_become_all_squash_and_auth_none),
		ID_TEST(test_become_really_restricts),
		ID_TEST(test_become_sixteen_groups),
		ID_TEST(test_become_is_per_thread),
		ID_TEST(test_caller_uid),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
