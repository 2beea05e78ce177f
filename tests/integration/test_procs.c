/*
 * test_procs.c -- every NFSv3 procedure (RFC 1813 section 3.3) against a live
 * server through libnfs: the raw (asynchronous) API for exact arguments and
 * replies, the high-level synchronous API as an application uses it, and the
 * high-level asynchronous API with many calls in flight on one connection.
 *
 * One server for the whole program, export "127.0.0.1(rw,insecure,
 * no_root_squash)"; each test works in a directory of its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static struct it_server srv;
static struct rpc_context *rpc;
static struct it_fh root;
static struct it_res r;

static int setup(void **state)
{
	(void)state;
	if (it_server_start(&srv, "127.0.0.1(rw,insecure,no_root_squash)") < 0)
		return -1;
	if (it_root_fh(&srv, &root) != MNT3_OK)
		return -1;
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	it_res_init(&r);
	return rpc ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	it_res_free(&r);
	it_rpc_close(rpc);
	return it_server_stop(&srv);
}

/* mkdir_fh -- a fresh directory NAME under the root; its handle */
static struct it_fh mkdir_fh(const char *name)
{
	struct it_fh fh;

	assert_int_equal(it_mkdir(rpc, &root, name, 0755, &r), NFS3_OK);
	assert_true(r.has_fh);
	fh = r.fh;
	return fh;
}

static struct it_fh create_fh(const struct it_fh *dir, const char *name, int mode)
{
	struct it_fh fh;

	assert_int_equal(it_create(rpc, dir, name, UNCHECKED, mode, NULL, &r), NFS3_OK);
	assert_true(r.has_fh);
	fh = r.fh;
	return fh;
}

static void assert_post_op(const char *what)
{
	if (!r.has_after)
		fail_msg("%s: no post-op attributes in wcc_data", what);
}

static void test_null(void **state)
{
	(void)state;
	assert_int_equal(it_nfs3(rpc, NFS3_NULL, NULL, &r), 0);
}

static void test_getattr(void **state)
{
	struct stat st;
	struct it_fh d = mkdir_fh("getattr");
	struct it_fh f = create_fh(&d, "f", 0640);
	char buf[1000];

	(void)state;
	it_fill(buf, sizeof(buf), 1);
	assert_int_equal(it_write(rpc, &f, 0, buf, sizeof(buf), FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "getattr/f"), &st), 0);
	assert_int_equal(r.attr.type, NF3REG);
	assert_int_equal(r.attr.mode & 07777, st.st_mode & 07777);
	assert_int_equal(r.attr.mode & 07777, 0640);
	assert_int_equal(r.attr.size, 1000);
	assert_int_equal(r.attr.nlink, 1);
	assert_int_equal(r.attr.uid, st.st_uid);
	assert_int_equal(r.attr.gid, st.st_gid);
	assert_int_equal(r.attr.mtime.seconds, (uint32_t)st.st_mtime);
	assert_int_equal(it_getattr(rpc, &d, &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3DIR);
	assert_int_equal(it_getattr(rpc, &root, &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3DIR);
}

static void test_setattr(void **state)
{
	struct it_fh d = mkdir_fh("setattr");
	struct it_fh f = create_fh(&d, "f", 0644);
	SETATTR3args a;
	nfstime3 ctime;
	struct stat st;

	(void)state;
	/* mode */
	assert_int_equal(it_setattr_mode(rpc, &f, 0604, &r), NFS3_OK);
	assert_post_op("SETATTR mode");
	assert_int_equal(r.after.mode & 07777, 0604);
	assert_int_equal(stat(it_path(&srv, "setattr/f"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);

	/* size: extend then truncate */
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&f);
	a.new_attributes.size.set_it = 1;
	a.new_attributes.size.set_size3_u.size = 100000;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	assert_post_op("SETATTR size");
	assert_int_equal(r.after.size, 100000);
	a.new_attributes.size.set_size3_u.size = 10;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	assert_int_equal(r.after.size, 10);
	assert_int_equal(stat(it_path(&srv, "setattr/f"), &st), 0);
	assert_int_equal(st.st_size, 10);

	/* times set by the client */
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&f);
	a.new_attributes.atime.set_it = SET_TO_CLIENT_TIME;
	a.new_attributes.atime.set_atime_u.atime.seconds = 1000000000;
	a.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
	a.new_attributes.mtime.set_mtime_u.mtime.seconds = 1100000000;
	a.new_attributes.mtime.set_mtime_u.mtime.nseconds = 500;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "setattr/f"), &st), 0);
	assert_int_equal(st.st_atime, 1000000000);
	assert_int_equal(st.st_mtime, 1100000000);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(r.attr.mtime.seconds, 1100000000);
	assert_int_equal(r.attr.mtime.nseconds, 500);	/* ext4 keeps nanoseconds */
	assert_int_equal(r.attr.atime.seconds, 1000000000);

	/* times set to the server's clock */
	a.new_attributes.atime.set_it = SET_TO_SERVER_TIME;
	a.new_attributes.mtime.set_it = SET_TO_SERVER_TIME;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "setattr/f"), &st), 0);
	assert_true(st.st_mtime > 1600000000);

	/* a client's time with 10^9 nanoseconds or more: NFS3ERR_INVAL, and
	 * nothing changes, also for the values utimensat takes for "now"
	 * (2^30 - 1) and "leave it" (2^30 - 2) */
	if (!it_is_ganesha()) {
		static const uint32_t bad_ns[] = { 1000000000u, 0x3fffffffu, 0x3ffffffeu };
		for (unsigned i = 0; i < 3; i++) {
			memset(&a, 0, sizeof(a));
			a.object = it_fh3(&f);
			a.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
			a.new_attributes.mtime.set_mtime_u.mtime.seconds = 1200000000;
			a.new_attributes.mtime.set_mtime_u.mtime.nseconds = bad_ns[i];
			a.new_attributes.mode.set_it = 1;	/* not half done */
			a.new_attributes.mode.set_mode3_u.mode = 0640;
			assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3ERR_INVAL);
			struct stat st2;
			assert_int_equal(stat(it_path(&srv, "setattr/f"), &st2), 0);
			assert_int_equal(st2.st_mtim.tv_sec, st.st_mtim.tv_sec);
			assert_int_equal(st2.st_mtim.tv_nsec, st.st_mtim.tv_nsec);
			assert_int_equal(st2.st_mode, st.st_mode);
		}
		/* nor is anything created with such a time */
		CREATE3args ca;
		memset(&ca, 0, sizeof(ca));
		ca.where.dir = it_fh3(&d);
		ca.where.name = "badtime";
		ca.how.mode = UNCHECKED;
		ca.how.createhow3_u.obj_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
		ca.how.createhow3_u.obj_attributes.mtime.set_mtime_u.mtime.nseconds = 0x3fffffffu;
		assert_int_equal(it_nfs3(rpc, NFS3_CREATE, &ca, &r), NFS3ERR_INVAL);
		MKDIR3args ma;
		memset(&ma, 0, sizeof(ma));
		ma.where.dir = it_fh3(&d);
		ma.where.name = "badtime";
		ma.attributes.mtime.set_it = SET_TO_CLIENT_TIME;
		ma.attributes.mtime.set_mtime_u.mtime.nseconds = 1000000000u;
		assert_int_equal(it_nfs3(rpc, NFS3_MKDIR, &ma, &r), NFS3ERR_INVAL);
		assert_int_not_equal(access(it_path(&srv, "setattr/badtime"), F_OK), 0);
	}

	/* guard: a wrong ctime -> NFS3ERR_NOT_SYNC and nothing changes */
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	ctime = r.attr.ctime;
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&f);
	a.new_attributes.mode.set_it = 1;
	a.new_attributes.mode.set_mode3_u.mode = 0600;
	a.guard.check = 1;
	a.guard.sattrguard3_u.obj_ctime.seconds = ctime.seconds - 100;
	a.guard.sattrguard3_u.obj_ctime.nseconds = ctime.nseconds;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3ERR_NOT_SYNC);
	assert_int_equal(stat(it_path(&srv, "setattr/f"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	/* the right ctime -> applied */
	a.guard.sattrguard3_u.obj_ctime = ctime;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "setattr/f"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	/* wcc: pre-op attributes describe the object before the change */
	if (r.has_before)
		assert_int_equal(r.before.ctime.seconds, ctime.seconds);

	/* size on a directory -> an error (RFC 1813 3.3.2: INVAL or ISDIR) */
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&d);
	a.new_attributes.size.set_it = 1;
	assert_int_not_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);

	/* uid/gid change by root */
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&f);
	a.new_attributes.uid.set_it = 1;
	a.new_attributes.uid.set_uid3_u.uid = 1234;
	a.new_attributes.gid.set_it = 1;
	a.new_attributes.gid.set_gid3_u.gid = 4321;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "setattr/f"), &st), 0);
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 4321);
}

static void test_lookup(void **state)
{
	struct it_fh d = mkdir_fh("lookup");
	struct it_fh f = create_fh(&d, "file", 0644);
	struct it_fh got;
	uint64_t fileid;

	(void)state;
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	fileid = r.attr.fileid;
	assert_int_equal(it_lookup(rpc, &d, "file", &r), NFS3_OK);
	got = r.fh;
	assert_true(r.has_attr);
	assert_int_equal(r.attr.fileid, fileid);
	assert_true(r.has_dir_attr);
	assert_int_equal(r.dir_attr.type, NF3DIR);
	assert_int_equal(it_getattr(rpc, &got, &r), NFS3_OK);
	assert_int_equal(r.attr.fileid, fileid);
	/* missing -> NOENT, with the directory's attributes (post_op, optional) */
	assert_int_equal(it_lookup(rpc, &d, "missing", &r), NFS3ERR_NOENT);
	/* a file as the directory -> NOTDIR */
	assert_int_equal(it_lookup(rpc, &f, "x", &r), NFS3ERR_NOTDIR);
	/* "." is the directory itself */
	assert_int_equal(it_lookup(rpc, &d, ".", &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3DIR);
	/* ".." of a subdirectory is its parent (the root) */
	assert_int_equal(it_getattr(rpc, &root, &r), NFS3_OK);
	fileid = r.attr.fileid;
	assert_int_equal(it_lookup(rpc, &d, "..", &r), NFS3_OK);
	assert_int_equal(r.attr.fileid, fileid);
}

static void test_access(void **state)
{
	struct it_fh d = mkdir_fh("access");
	struct it_fh f = create_fh(&d, "f", 0644);
	ACCESS3args a = { .object = it_fh3(&f), .access = 0x3f };
	struct rpc_context *u;

	(void)state;
	assert_int_equal(it_nfs3(rpc, NFS3_ACCESS, &a, &r), NFS3_OK);
	/* root on a 0644 file: read, modify, extend; no execute (no x bit) */
	assert_true(r.access & ACCESS3_READ);
	assert_true(r.access & ACCESS3_MODIFY);
	assert_true(r.access & ACCESS3_EXTEND);
	assert_false(r.access & ACCESS3_EXECUTE);
	/* only bits asked for come back */
	a.access = ACCESS3_READ;
	assert_int_equal(it_nfs3(rpc, NFS3_ACCESS, &a, &r), NFS3_OK);
	assert_int_equal(r.access & ~ACCESS3_READ, 0);
	/* a directory: lookup + delete for root */
	a.object = it_fh3(&d);
	a.access = ACCESS3_LOOKUP | ACCESS3_DELETE | ACCESS3_MODIFY;
	assert_int_equal(it_nfs3(rpc, NFS3_ACCESS, &a, &r), NFS3_OK);
	assert_true(r.access & ACCESS3_LOOKUP);
	if (!it_is_ganesha()) {
		/* DELETE is a directory's (removing an entry of it), as
		 * knfsd: not granted on a file, granted on a writable
		 * directory */
		assert_true(r.access & ACCESS3_DELETE);
		a.object = it_fh3(&f);
		a.access = ACCESS3_DELETE | ACCESS3_MODIFY;
		assert_int_equal(it_nfs3(rpc, NFS3_ACCESS, &a, &r), NFS3_OK);
		assert_true(r.access & ACCESS3_MODIFY);
		assert_false(r.access & ACCESS3_DELETE);
	}
	/* another user on a root-owned 0644 file: read only */
	u = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(u);
	rpc_set_uid(u, 1000);
	rpc_set_gid(u, 1000);
	a.object = it_fh3(&f);
	a.access = 0x3f;
	assert_int_equal(it_nfs3(u, NFS3_ACCESS, &a, &r), NFS3_OK);
	assert_true(r.access & ACCESS3_READ);
	assert_false(r.access & ACCESS3_MODIFY);
	assert_false(r.access & ACCESS3_EXTEND);
	/* ACCESS gives the owner no override (test_perms), not on a
	 * directory either: a read-only directory it owns is not writable */
	assert_int_equal(mkdir(it_path(&srv, "access/ro"), 0555), 0);
	assert_int_equal(chown(it_path(&srv, "access/ro"), 1000, 1000), 0);
	assert_int_equal(it_lookup(rpc, &d, "ro", &r), NFS3_OK);
	{
		struct it_fh ro = r.fh;

		a.object = it_fh3(&ro);
		a.access = ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
		assert_int_equal(it_nfs3(u, NFS3_ACCESS, &a, &r), NFS3_OK);
		assert_true(r.access & ACCESS3_LOOKUP);
		assert_int_equal(r.access & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE), 0);
	}
	it_rpc_close(u);
}

static void test_readlink(void **state)
{
	struct it_fh d = mkdir_fh("readlink");
	struct it_fh f = create_fh(&d, "f", 0644);
	READLINK3args a;
	char target[300];

	(void)state;
	assert_int_equal(it_symlink(rpc, &d, "l", "some/where/else", &r), NFS3_OK);
	assert_true(r.has_fh);
	a.symlink = it_fh3(&r.fh);
	{
		struct it_fh l = r.fh;

		a.symlink = it_fh3(&l);
		assert_int_equal(it_nfs3(rpc, NFS3_READLINK, &a, &r), NFS3_OK);
		assert_string_equal(r.data, "some/where/else");
	}
	/* a local symlink is read as is */
	assert_int_equal(symlink("/etc/passwd", it_path(&srv, "readlink/abs")), 0);
	assert_int_equal(it_lookup(rpc, &d, "abs", &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3LNK);
	{
		struct it_fh l = r.fh;

		a.symlink = it_fh3(&l);
		assert_int_equal(it_nfs3(rpc, NFS3_READLINK, &a, &r), NFS3_OK);
		assert_string_equal(r.data, "/etc/passwd");
	}
	/* a long target */
	memset(target, 'x', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';
	target[0] = 't';
	assert_int_equal(it_symlink(rpc, &d, "long", target, &r), NFS3_OK);
	{
		struct it_fh l = r.fh;

		a.symlink = it_fh3(&l);
		assert_int_equal(it_nfs3(rpc, NFS3_READLINK, &a, &r), NFS3_OK);
		assert_string_equal(r.data, target);
	}
	/* READLINK of a regular file -> INVAL (RFC 1813 3.3.5) */
	a.symlink = it_fh3(&f);
	assert_int_equal(it_nfs3(rpc, NFS3_READLINK, &a, &r), NFS3ERR_INVAL);
}

static void test_read(void **state)
{
	struct it_fh d = mkdir_fh("read");
	static char buf[200000];
	struct it_fh f;

	(void)state;
	it_fill(buf, sizeof(buf), 7);
	assert_int_equal(it_write_file(it_path(&srv, "read/f"), buf, sizeof(buf), 0644), 0);
	assert_int_equal(it_lookup(rpc, &d, "f", &r), NFS3_OK);
	f = r.fh;
	/* a middle part: not eof */
	assert_int_equal(it_read(rpc, &f, 1000, 5000, &r), NFS3_OK);
	assert_int_equal(r.count, 5000);
	assert_int_equal(r.data_len, 5000);
	assert_false(r.eof);
	assert_memory_equal(r.data, buf + 1000, 5000);
	assert_true(r.has_attr);
	assert_int_equal(r.attr.size, sizeof(buf));
	/* the tail: eof, short count */
	assert_int_equal(it_read(rpc, &f, sizeof(buf) - 100, 4096, &r), NFS3_OK);
	assert_int_equal(r.count, 100);
	assert_true(r.eof);
	assert_memory_equal(r.data, buf + sizeof(buf) - 100, 100);
	/* exactly to the end: eof (RFC 1813 3.3.6: eof if the read ended at eof) */
	assert_int_equal(it_read(rpc, &f, sizeof(buf) - 4096, 4096, &r), NFS3_OK);
	assert_int_equal(r.count, 4096);
	assert_true(r.eof);
	/* past the end: 0 bytes, eof */
	assert_int_equal(it_read(rpc, &f, sizeof(buf) + 10000, 100, &r), NFS3_OK);
	assert_int_equal(r.count, 0);
	assert_true(r.eof);
	/* far past the end, up to where offset + count would pass 2^63 and
	 * 2^64: 0 bytes, eof (as knfsd, which clamps the offset), not INVAL */
	if (!it_is_ganesha()) {
		static const uint64_t far[] = { 0x7ffffffffffffff6ull, 0x7fffffffffffffffull,
						0x8000000000000000ull, 0xffffffffffffffffull };
		for (size_t i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
			if (it_read(rpc, &f, far[i], 4096, &r) != NFS3_OK)
				fail_msg("READ at offset %#llx: %d, not OK", (unsigned long long)far[i],
					 r.status);
			assert_int_equal(r.count, 0);
			assert_true(r.eof);
		}
	}
	/* count 0 */
	assert_int_equal(it_read(rpc, &f, 0, 0, &r), NFS3_OK);
	assert_int_equal(r.count, 0);
	/* a directory -> ISDIR (or INVAL) */
	assert_int_not_equal(it_read(rpc, &d, 0, 100, &r), NFS3_OK);
	/* whole file in rtmax-sized pieces */
	{
		FSINFO3args fa = { .fsroot = it_fh3(&root) };
		uint32_t chunk;
		uint64_t off = 0;

		assert_int_equal(it_nfs3(rpc, NFS3_FSINFO, &fa, &r), NFS3_OK);
		chunk = r.fsinfo.rtpref ? r.fsinfo.rtpref : 32768;
		if (chunk > 65536)
			chunk = 65536;
		while (off < sizeof(buf)) {
			assert_int_equal(it_read(rpc, &f, off, chunk, &r), NFS3_OK);
			assert_true(r.count > 0);
			assert_memory_equal(r.data, buf + off, r.count);
			off += r.count;
			if (r.eof)
				break;
		}
		assert_int_equal(off, sizeof(buf));
	}
}

static void test_write(void **state)
{
	struct it_fh d = mkdir_fh("write");
	struct it_fh f = create_fh(&d, "f", 0644);
	static char buf[65536];
	char verf[8];
	size_t len;
	char *back;

	(void)state;
	it_fill(buf, sizeof(buf), 3);
	/* UNSTABLE: any committed level, a verifier */
	assert_int_equal(it_write(rpc, &f, 0, buf, 4096, UNSTABLE, &r), NFS3_OK);
	assert_int_equal(r.count, 4096);
	assert_true(r.committed >= UNSTABLE && r.committed <= FILE_SYNC);
	/* presto on: the reply waits for the durable log record, so even an
	 * UNSTABLE write is answered FILE_SYNC (docs: design) */
	if (it_nvram && !it_is_ganesha() && r.committed != FILE_SYNC)
		fail_msg("presto on: an UNSTABLE WRITE answered committed=%d, want FILE_SYNC (2)", r.committed);
	assert_post_op("WRITE");
	assert_int_equal(r.after.size, 4096);
	memcpy(verf, r.verf, 8);
	/* DATA_SYNC: at least DATA_SYNC (RFC 1813 3.3.7) */
	assert_int_equal(it_write(rpc, &f, 4096, buf + 4096, 4096, DATA_SYNC, &r), NFS3_OK);
	assert_int_equal(r.count, 4096);
	assert_true(r.committed >= DATA_SYNC);
	assert_memory_equal(r.verf, verf, 8);
	/* FILE_SYNC: exactly FILE_SYNC */
	assert_int_equal(it_write(rpc, &f, 8192, buf + 8192, sizeof(buf) - 8192, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(r.count, sizeof(buf) - 8192);
	assert_int_equal(r.committed, FILE_SYNC);
	assert_memory_equal(r.verf, verf, 8);
	assert_int_equal(r.after.size, sizeof(buf));
	back = it_read_file(it_path(&srv, "write/f"), &len);
	assert_non_null(back);
	assert_int_equal(len, sizeof(buf));
	assert_memory_equal(back, buf, sizeof(buf));
	free(back);
	/* wcc: the pre-op size is the size before this write */
	assert_int_equal(it_write(rpc, &f, 0, buf, 10, FILE_SYNC, &r), NFS3_OK);
	if (r.has_before)
		assert_int_equal(r.before.size, sizeof(buf));
	/* a hole: write far past the end */
	assert_int_equal(it_write(rpc, &f, 1 << 20, "end", 3, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(r.after.size, (1 << 20) + 3);
	assert_int_equal(it_read(rpc, &f, 100000, 10, &r), NFS3_OK);
	assert_memory_equal(r.data, "\0\0\0\0\0\0\0\0\0\0", 10);
	/* count 0 is fine */
	assert_int_equal(it_write(rpc, &f, 0, buf, 0, UNSTABLE, &r), NFS3_OK);
	assert_int_equal(r.count, 0);
	/* a directory -> ISDIR (or INVAL) */
	assert_int_not_equal(it_write(rpc, &d, 0, buf, 10, FILE_SYNC, &r), NFS3_OK);
	/* the verifier is stable within a run: COMMIT returns it too */
	{
		COMMIT3args c = { .file = it_fh3(&f), .offset = 0, .count = 0 };

		assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);
		assert_memory_equal(r.verf, verf, 8);
	}
}

static void test_large_offsets(void **state)
{
	/* 64-bit offsets: a sparse file of 5 GiB */
	struct it_fh d = mkdir_fh("large");
	struct it_fh f = create_fh(&d, "sparse", 0644);
	const uint64_t off = 5ull << 30;
	struct stat st;

	(void)state;
	assert_int_equal(it_write(rpc, &f, off, "far away", 8, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(r.after.size, off + 8);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(r.attr.size, off + 8);
	assert_true(r.attr.used < (1u << 20));
	assert_int_equal(it_read(rpc, &f, off - 2, 100, &r), NFS3_OK);
	assert_int_equal(r.count, 10);
	assert_true(r.eof);
	assert_memory_equal(r.data, "\0\0far away", 10);
	assert_int_equal(stat(it_path(&srv, "large/sparse"), &st), 0);
	assert_int_equal((uint64_t)st.st_size, off + 8);
	/* truncating back below 4 GiB */
	{
		SETATTR3args a;

		memset(&a, 0, sizeof(a));
		a.object = it_fh3(&f);
		a.new_attributes.size.set_it = 1;
		a.new_attributes.size.set_size3_u.size = (1ull << 32) + 1;
		assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
		assert_int_equal(r.after.size, (1ull << 32) + 1);
	}
}

static void test_fileids(void **state)
{
	/* fileids are distinct within the export, fsid is the same everywhere,
	 * and the fileid of a name is stable */
	struct it_fh d = mkdir_fh("fileids");
	uint64_t ids[20], fsid;

	(void)state;
	assert_int_equal(it_getattr(rpc, &d, &r), NFS3_OK);
	fsid = r.attr.fsid;
	for (int i = 0; i < 20; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(it_create(rpc, &d, name, GUARDED, 0644, NULL, &r), NFS3_OK);
		assert_true(r.has_attr);
		ids[i] = r.attr.fileid;
		assert_int_equal(r.attr.fsid, fsid);
		for (int j = 0; j < i; j++)
			assert_true(ids[j] != ids[i]);
		assert_int_equal(it_lookup(rpc, &d, name, &r), NFS3_OK);
		assert_int_equal(r.attr.fileid, ids[i]);
	}
	assert_int_equal(it_getattr(rpc, &root, &r), NFS3_OK);
	assert_int_equal(r.attr.fsid, fsid);
}

static void test_write_count_mismatch(void **state)
{
	/* count > data length: libnfs sends what we say; RFC 1813 3.3.7 leaves
	 * the answer to the server but it must not write past the data */
	struct it_fh d = mkdir_fh("wcount");
	struct it_fh f = create_fh(&d, "f", 0644);
	WRITE3args a = it_write3(&f, 0, "0123456789", 10, FILE_SYNC);
	struct stat st;
	int rc;

	(void)state;
	a.count = 100;
	rc = it_nfs3(rpc, NFS3_WRITE, &a, &r);
	assert_int_equal(stat(it_path(&srv, "wcount/f"), &st), 0);
	if (rc == NFS3_OK)
		assert_true(r.count <= 10);
	assert_true(st.st_size <= 10);
}

static void test_create(void **state)
{
	struct it_fh d = mkdir_fh("create");
	struct it_fh f, g;
	struct stat st;
	uint64_t fileid;

	(void)state;
	/* UNCHECKED: created with the mode asked for, handle and attributes back */
	assert_int_equal(it_create(rpc, &d, "u", UNCHECKED, 0612, NULL, &r), NFS3_OK);
	assert_true(r.has_fh);
	assert_true(r.has_attr);
	assert_post_op("CREATE");
	assert_int_equal(r.attr.type, NF3REG);
	assert_int_equal(r.attr.mode & 07777, 0612);
	f = r.fh;
	fileid = r.attr.fileid;
	assert_int_equal(stat(it_path(&srv, "create/u"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0612);
	/* UNCHECKED on an existing file: OK, the same file */
	assert_int_equal(it_write(rpc, &f, 0, "data", 4, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &d, "u", UNCHECKED, -1, NULL, &r), NFS3_OK);
	assert_int_equal(r.attr.fileid, fileid);
	/* ... which keeps its mode, owner and times: a create racing with
	 * another client's must not chmod or chown that client's file */
	{
		CREATE3args a;
		struct stat st0;

		assert_int_equal(stat(it_path(&srv, "create/u"), &st0), 0);
		memset(&a, 0, sizeof(a));
		a.where.dir = it_fh3(&d);
		a.where.name = "u";
		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0777;
		a.how.createhow3_u.obj_attributes.uid.set_it = 1;
		a.how.createhow3_u.obj_attributes.uid.set_uid3_u.uid = 4321;
		a.how.createhow3_u.obj_attributes.gid.set_it = 1;
		a.how.createhow3_u.obj_attributes.gid.set_gid3_u.gid = 4321;
		a.how.createhow3_u.obj_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
		a.how.createhow3_u.obj_attributes.mtime.set_mtime_u.mtime.seconds = 1000000;
		assert_int_equal(it_nfs3(rpc, NFS3_CREATE, &a, &r), NFS3_OK);
		assert_int_equal(r.attr.fileid, fileid);
		assert_int_equal(r.attr.mode & 07777, 0612);
		assert_int_equal(stat(it_path(&srv, "create/u"), &st), 0);
		assert_int_equal(st.st_mode & 07777, 0612);
		assert_int_equal(st.st_uid, st0.st_uid);
		assert_int_equal(st.st_gid, st0.st_gid);
		assert_int_equal(st.st_mtime, st0.st_mtime);
		assert_int_equal(st.st_size, 4);
	}
	/* UNCHECKED with size 0 on an existing file truncates it (3.3.8) */
	{
		CREATE3args a;

		memset(&a, 0, sizeof(a));
		a.where.dir = it_fh3(&d);
		a.where.name = "u";
		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes.size.set_it = 1;
		a.how.createhow3_u.obj_attributes.size.set_size3_u.size = 0;
		assert_int_equal(it_nfs3(rpc, NFS3_CREATE, &a, &r), NFS3_OK);
		assert_int_equal(stat(it_path(&srv, "create/u"), &st), 0);
		assert_int_equal(st.st_size, 0);
	}
	/* GUARDED on an existing name -> EXIST */
	assert_int_equal(it_create(rpc, &d, "u", GUARDED, 0644, NULL, &r), NFS3ERR_EXIST);
	assert_int_equal(it_create(rpc, &d, "g", GUARDED, 0644, NULL, &r), NFS3_OK);
	/* a name that is a directory: GUARDED -> EXIST */
	assert_int_equal(it_mkdir(rpc, &d, "sub", 0755, &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &d, "sub", GUARDED, 0644, NULL, &r), NFS3ERR_EXIST);
	/* EXCLUSIVE: the same verifier again succeeds with the same object,
	 * another verifier gets EXIST */
	assert_int_equal(it_create(rpc, &d, "x", EXCLUSIVE, 0, "verifier", &r), NFS3_OK);
	assert_true(r.has_fh);
	g = r.fh;
	assert_int_equal(it_getattr(rpc, &g, &r), NFS3_OK);
	fileid = r.attr.fileid;
	assert_int_equal(it_create(rpc, &d, "x", EXCLUSIVE, 0, "verifier", &r), NFS3_OK);
	if (r.has_fh) {
		assert_int_equal(it_getattr(rpc, &r.fh, &r), NFS3_OK);
		assert_int_equal(r.attr.fileid, fileid);
	}
	assert_int_equal(it_create(rpc, &d, "x", EXCLUSIVE, 0, "otherver", &r), NFS3ERR_EXIST);
	/* EXCLUSIVE over a file made by UNCHECKED -> EXIST */
	assert_int_equal(it_create(rpc, &d, "u", EXCLUSIVE, 0, "verifier", &r), NFS3ERR_EXIST);
	/* after an exclusive create, the client sets the attributes */
	assert_int_equal(it_setattr_mode(rpc, &g, 0640, &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "create/x"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* the directory changed: wcc of the parent */
	assert_int_equal(it_create(rpc, &d, "w", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_post_op("CREATE dir_wcc");
	assert_int_equal(r.after.type, NF3DIR);
	/* CREATE in a file -> NOTDIR */
	assert_int_equal(it_create(rpc, &f, "z", UNCHECKED, 0644, NULL, &r), NFS3ERR_NOTDIR);
}

static void test_mkdir(void **state)
{
	struct it_fh d = mkdir_fh("mkdir");
	struct stat st;

	(void)state;
	assert_int_equal(it_mkdir(rpc, &d, "a", 0750, &r), NFS3_OK);
	assert_true(r.has_fh);
	assert_true(r.has_attr);
	assert_int_equal(r.attr.type, NF3DIR);
	assert_int_equal(r.attr.mode & 07777, 0750);
	assert_post_op("MKDIR");
	assert_int_equal(stat(it_path(&srv, "mkdir/a"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_int_equal(it_mkdir(rpc, &d, "a", 0750, &r), NFS3ERR_EXIST);
	assert_int_equal(it_create(rpc, &d, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_mkdir(rpc, &d, "f", 0750, &r), NFS3ERR_EXIST);
	/* nested */
	{
		struct it_fh a;

		assert_int_equal(it_lookup(rpc, &d, "a", &r), NFS3_OK);
		a = r.fh;
		assert_int_equal(it_mkdir(rpc, &a, "b", 0755, &r), NFS3_OK);
		assert_int_equal(stat(it_path(&srv, "mkdir/a/b"), &st), 0);
		/* nlink of the parent counts the new subdirectory */
		assert_int_equal(it_getattr(rpc, &a, &r), NFS3_OK);
		assert_int_equal(r.attr.nlink, 3);
	}
}

static void test_symlink(void **state)
{
	struct it_fh d = mkdir_fh("symlink");
	char buf[64];
	ssize_t n;

	(void)state;
	assert_int_equal(it_symlink(rpc, &d, "l", "../target", &r), NFS3_OK);
	assert_true(r.has_fh);
	assert_post_op("SYMLINK");
	if (r.has_attr) {
		assert_int_equal(r.attr.type, NF3LNK);
		assert_int_equal(r.attr.size, strlen("../target"));
	}
	n = readlink(it_path(&srv, "symlink/l"), buf, sizeof(buf) - 1);
	assert_int_equal(n, strlen("../target"));
	buf[n] = '\0';
	assert_string_equal(buf, "../target");
	assert_int_equal(it_symlink(rpc, &d, "l", "x", &r), NFS3ERR_EXIST);
	assert_int_equal(it_lookup(rpc, &d, "l", &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3LNK);
}

static void test_mknod(void **state)
{
	struct it_fh d = mkdir_fh("mknod");
	MKNOD3args a;
	struct stat st;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.where.dir = it_fh3(&d);

	a.where.name = "fifo";
	a.what.type = NF3FIFO;
	a.what.mknoddata3_u.pipe_attributes.mode.set_it = 1;
	a.what.mknoddata3_u.pipe_attributes.mode.set_mode3_u.mode = 0640;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3_OK);
	assert_true(r.has_fh);
	assert_post_op("MKNOD");
	assert_int_equal(lstat(it_path(&srv, "mknod/fifo"), &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(it_lookup(rpc, &d, "fifo", &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3FIFO);

	memset(&a.what, 0, sizeof(a.what));
	a.where.name = "sock";
	a.what.type = NF3SOCK;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3_OK);
	assert_int_equal(lstat(it_path(&srv, "mknod/sock"), &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(it_lookup(rpc, &d, "sock", &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3SOCK);

	/* character and block devices: root only */
	memset(&a.what, 0, sizeof(a.what));
	a.where.name = "chr";
	a.what.type = NF3CHR;
	a.what.mknoddata3_u.chr_device.spec.specdata1 = 1;
	a.what.mknoddata3_u.chr_device.spec.specdata2 = 3;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3_OK);
	assert_int_equal(lstat(it_path(&srv, "mknod/chr"), &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(major(st.st_rdev), 1);
	assert_int_equal(minor(st.st_rdev), 3);
	assert_int_equal(it_lookup(rpc, &d, "chr", &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3CHR);
	assert_int_equal(r.attr.rdev.specdata1, 1);
	assert_int_equal(r.attr.rdev.specdata2, 3);

	memset(&a.what, 0, sizeof(a.what));
	a.where.name = "blk";
	a.what.type = NF3BLK;
	a.what.mknoddata3_u.blk_device.spec.specdata1 = 7;
	a.what.mknoddata3_u.blk_device.spec.specdata2 = 0;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3_OK);
	assert_int_equal(lstat(it_path(&srv, "mknod/blk"), &st), 0);
	assert_true(S_ISBLK(st.st_mode));
	assert_int_equal(major(st.st_rdev), 7);

	/* an existing name -> EXIST; a regular file type -> BADTYPE (3.3.11) */
	memset(&a.what, 0, sizeof(a.what));
	a.where.name = "fifo";
	a.what.type = NF3FIFO;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3ERR_EXIST);
	a.where.name = "reg";
	a.what.type = NF3REG;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3ERR_BADTYPE);
	a.where.name = "dir";
	a.what.type = NF3DIR;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3ERR_BADTYPE);
}

static void test_remove(void **state)
{
	struct it_fh d = mkdir_fh("remove");
	struct it_fh f = create_fh(&d, "f", 0644);
	struct stat st;

	(void)state;
	assert_int_equal(it_remove(rpc, &d, "f", &r), NFS3_OK);
	assert_post_op("REMOVE");
	assert_int_not_equal(stat(it_path(&srv, "remove/f"), &st), 0);
	assert_int_equal(it_remove(rpc, &d, "f", &r), NFS3ERR_NOENT);
	/* the handle of a removed file is stale */
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3ERR_STALE);
	/* REMOVE of a directory fails (ISDIR, or ACCES/PERM/NOTEMPTY on some servers) */
	assert_int_equal(it_mkdir(rpc, &d, "sub", 0755, &r), NFS3_OK);
	assert_int_not_equal(it_remove(rpc, &d, "sub", &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "remove/sub"), &st), 0);
	/* REMOVE of a symlink removes the link, not its target */
	assert_int_equal(it_create(rpc, &d, "t", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_symlink(rpc, &d, "l", "t", &r), NFS3_OK);
	assert_int_equal(it_remove(rpc, &d, "l", &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "remove/t"), &st), 0);
}

static void test_rmdir(void **state)
{
	struct it_fh d = mkdir_fh("rmdir");
	struct it_fh sub;
	struct stat st;

	(void)state;
	assert_int_equal(it_mkdir(rpc, &d, "empty", 0755, &r), NFS3_OK);
	assert_int_equal(it_rmdir(rpc, &d, "empty", &r), NFS3_OK);
	assert_post_op("RMDIR");
	assert_int_not_equal(stat(it_path(&srv, "rmdir/empty"), &st), 0);
	assert_int_equal(it_rmdir(rpc, &d, "empty", &r), NFS3ERR_NOENT);
	/* not empty -> NOTEMPTY (3.3.13) */
	assert_int_equal(it_mkdir(rpc, &d, "full", 0755, &r), NFS3_OK);
	sub = r.fh;
	assert_int_equal(it_create(rpc, &sub, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_rmdir(rpc, &d, "full", &r), NFS3ERR_NOTEMPTY);
	assert_int_equal(stat(it_path(&srv, "rmdir/full/f"), &st), 0);
	/* a file -> NOTDIR */
	assert_int_equal(it_create(rpc, &d, "file", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_rmdir(rpc, &d, "file", &r), NFS3ERR_NOTDIR);
	/* "." -> INVAL (or another error), never removes anything */
	assert_int_not_equal(it_rmdir(rpc, &sub, ".", &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "rmdir/full"), &st), 0);
}

static void test_rename(void **state)
{
	struct it_fh d = mkdir_fh("rename");
	struct it_fh d2, a;
	uint64_t fid;
	struct stat st;
	size_t len;
	char *p;

	(void)state;
	a = create_fh(&d, "a", 0644);
	assert_int_equal(it_write(rpc, &a, 0, "AAAA", 4, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_getattr(rpc, &a, &r), NFS3_OK);
	fid = r.attr.fileid;
	/* simple rename */
	assert_int_equal(it_rename(rpc, &d, "a", &d, "b", &r), NFS3_OK);
	assert_true(r.has_after && r.has_after2);
	assert_int_not_equal(stat(it_path(&srv, "rename/a"), &st), 0);
	assert_int_equal(stat(it_path(&srv, "rename/b"), &st), 0);
	/* the handle survives a rename */
	assert_int_equal(it_getattr(rpc, &a, &r), NFS3_OK);
	assert_int_equal(r.attr.fileid, fid);
	/* over an existing file: it is replaced atomically */
	assert_int_equal(it_create(rpc, &d, "c", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_write(rpc, &r.fh, 0, "CC", 2, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_rename(rpc, &d, "b", &d, "c", &r), NFS3_OK);
	p = it_read_file(it_path(&srv, "rename/c"), &len);
	assert_non_null(p);
	assert_int_equal(len, 4);
	assert_memory_equal(p, "AAAA", 4);
	free(p);
	assert_int_equal(it_lookup(rpc, &d, "c", &r), NFS3_OK);
	assert_int_equal(r.attr.fileid, fid);
	assert_int_equal(it_lookup(rpc, &d, "b", &r), NFS3ERR_NOENT);
	/* across directories */
	assert_int_equal(it_mkdir(rpc, &d, "d2", 0755, &r), NFS3_OK);
	d2 = r.fh;
	assert_int_equal(it_rename(rpc, &d, "c", &d2, "moved", &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "rename/d2/moved"), &st), 0);
	/* fromdir_wcc describes the source directory, todir_wcc the target:
	 * a client updates its cache of each from them */
	{
		struct stat fst, tst;

		assert_true(r.has_after && r.has_after2);
		assert_int_equal(stat(it_path(&srv, "rename"), &fst), 0);
		assert_int_equal(stat(it_path(&srv, "rename/d2"), &tst), 0);
		assert_int_equal(r.after.fileid, (uint64_t)fst.st_ino);
		assert_int_equal(r.after.nlink, fst.st_nlink);
		assert_int_equal(r.after2.fileid, (uint64_t)tst.st_ino);
		assert_int_equal(r.after2.nlink, tst.st_nlink);
		assert_int_equal(r.after2.mtime.seconds, (uint32_t)tst.st_mtim.tv_sec);
		assert_int_equal(r.after2.mtime.nseconds, (uint32_t)tst.st_mtim.tv_nsec);
	}
	/* a missing source -> NOENT */
	assert_int_equal(it_rename(rpc, &d, "nothere", &d, "x", &r), NFS3ERR_NOENT);
	/* a directory over a non-empty directory -> NOTEMPTY or EXIST (3.3.14) */
	assert_int_equal(it_mkdir(rpc, &d, "e", 0755, &r), NFS3_OK);
	{
		int st3 = it_rename(rpc, &d, "e", &d, "d2", &r);

		assert_true(st3 == NFS3ERR_NOTEMPTY || st3 == NFS3ERR_EXIST);
	}
	/* a directory into its own subdirectory -> INVAL */
	assert_int_not_equal(it_rename(rpc, &d, "d2", &d2, "loop", &r), NFS3_OK);
	/* a file over a directory -> an error (ISDIR/EXIST) */
	assert_int_equal(it_create(rpc, &d, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_not_equal(it_rename(rpc, &d, "f", &d, "e", &r), NFS3_OK);
	/* to the same name: OK, nothing changes */
	assert_int_equal(it_rename(rpc, &d, "f", &d, "f", &r), NFS3_OK);
	assert_int_equal(stat(it_path(&srv, "rename/f"), &st), 0);
}

static void test_link(void **state)
{
	struct it_fh d = mkdir_fh("link");
	struct it_fh f = create_fh(&d, "f", 0644);
	struct stat st;

	(void)state;
	assert_int_equal(it_link(rpc, &f, &d, "g", &r), NFS3_OK);
	assert_true(r.has_attr);
	assert_int_equal(r.attr.nlink, 2);
	assert_post_op("LINK linkdir_wcc");
	assert_int_equal(stat(it_path(&srv, "link/g"), &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(r.attr.nlink, 2);
	/* an existing name -> EXIST */
	assert_int_equal(it_link(rpc, &f, &d, "g", &r), NFS3ERR_EXIST);
	/* removing one name: nlink back to 1, the other still reads */
	assert_int_equal(it_remove(rpc, &d, "f", &r), NFS3_OK);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(r.attr.nlink, 1);
	/* a hard link to a directory is refused */
	assert_int_not_equal(it_link(rpc, &d, &root, "dirlink", &r), NFS3_OK);
}

/* check_listing -- every name of 0..n-1 seen exactly once, "." and ".."
 * allowed, nothing else */
static void check_listing(const struct it_res *res, int n, const char *prefix)
{
	char *seen = calloc((size_t)n, 1);
	size_t plen = strlen(prefix);

	assert_non_null(seen);
	for (size_t i = 0; i < res->nents; i++) {
		const char *name = res->ents[i].name;
		int k;

		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		if (strncmp(name, prefix, plen) != 0)
			fail_msg("unexpected name \"%s\" in the listing", name);
		k = atoi(name + plen);
		assert_true(k >= 0 && k < n);
		if (seen[k])
			fail_msg("\"%s\" returned twice", name);
		seen[k] = 1;
	}
	for (int k = 0; k < n; k++)
		if (!seen[k])
			fail_msg("\"%s%d\" missing from the listing", prefix, k);
	free(seen);
}

static void test_readdir(void **state)
{
	struct it_fh d = mkdir_fh("readdir");
	const int n = 600;
	char name[512];
	int calls = 0;

	(void)state;
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s/readdir/entry-with-a-longish-name-%04d", srv.export, i);
		assert_int_equal(it_write_file(name, "", 0, 0644), 0);
	}
	/* small replies: many round trips with cookies and the cookie verifier */
	assert_int_equal(it_readdir_all(rpc, &d, 0, 1024, &r, &calls), NFS3_OK);
	assert_true(calls > 3);
	check_listing(&r, n, "entry-with-a-longish-name-");
	/* entries carry fileids that match a LOOKUP */
	for (size_t i = 0; i < r.nents; i++)
		if (!strcmp(r.ents[i].name, "entry-with-a-longish-name-0042")) {
			uint64_t fid = r.ents[i].fileid;

			assert_int_equal(it_lookup(rpc, &d, "entry-with-a-longish-name-0042", &r), NFS3_OK);
			assert_int_equal(r.attr.fileid, fid);
			break;
		}
	/* a large count: still everything exactly once */
	assert_int_equal(it_readdir_all(rpc, &d, 0, 32768, &r, &calls), NFS3_OK);
	check_listing(&r, n, "entry-with-a-longish-name-");
	/* an empty directory: ".", ".." at most, eof */
	assert_int_equal(it_mkdir(rpc, &d, "emptydir", 0755, &r), NFS3_OK);
	{
		struct it_fh e = r.fh;

		assert_int_equal(it_readdir_all(rpc, &e, 0, 4096, &r, &calls), NFS3_OK);
		assert_true(r.nents <= 2);
		assert_int_equal(calls, 1);
	}
	/* a count too small for one entry -> TOOSMALL (3.3.16) */
	{
		READDIR3args a = { .dir = it_fh3(&d), .cookie = 0, .count = 8 };
		int st = it_nfs3(rpc, NFS3_READDIR, &a, &r);

		/* NFS-Ganesha 4.3 ignores the count and returns one entry */
		if (!(it_is_ganesha() && st == NFS3_OK))
			assert_int_equal(st, NFS3ERR_TOOSMALL);
	}
	/* a file -> NOTDIR */
	{
		struct it_fh f;
		READDIR3args a;

		assert_int_equal(it_lookup(rpc, &d, "entry-with-a-longish-name-0001", &r), NFS3_OK);
		f = r.fh;
		memset(&a, 0, sizeof(a));
		a.dir = it_fh3(&f);
		a.count = 4096;
		assert_int_equal(it_nfs3(rpc, NFS3_READDIR, &a, &r), NFS3ERR_NOTDIR);
	}
}

static void test_readdirplus(void **state)
{
	struct it_fh d = mkdir_fh("readdirplus");
	const int n = 300;
	char name[300];
	int calls = 0;
	size_t with_fh = 0;

	(void)state;
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s/readdirplus/p%d", srv.export, i);
		assert_int_equal(it_write_file(name, name, (size_t)(i % 50), 0644), 0);
	}
	assert_int_equal(it_readdir_all(rpc, &d, 1, 1024, &r, &calls), NFS3_OK);
	assert_true(calls > 2);
	check_listing(&r, n, "p");
	{
		struct it_res g;
		struct it_dirent *ents = r.ents;
		size_t nents = r.nents;

		it_res_init(&g);
		for (size_t i = 0; i < nents; i++) {
			struct it_dirent *e = &ents[i];

			if (e->name[0] == '.')
				continue;
			if (e->has_attr) {
				assert_int_equal(e->attr.fileid, e->fileid);
				assert_int_equal(e->attr.size, (uint64_t)(atoi(e->name + 1) % 50));
			}
			if (e->has_fh) {
				with_fh++;
				/* every handle works and names its own entry */
				assert_int_equal(it_getattr(rpc, &e->fh, &g), NFS3_OK);
				assert_int_equal(g.attr.fileid, e->fileid);
			}
		}
		it_res_free(&g);
	}
	/* handles are optional per entry, but a server that never sends them
	 * makes READDIRPLUS pointless */
	assert_true(with_fh > 0);
	/* maxcount too small -> TOOSMALL */
	{
		READDIRPLUS3args a = { .dir = it_fh3(&d), .cookie = 0, .dircount = 8, .maxcount = 8 };
		int st = it_nfs3(rpc, NFS3_READDIRPLUS, &a, &r);

		if (!(it_is_ganesha() && st == NFS3_OK))
			assert_int_equal(st, NFS3ERR_TOOSMALL);
	}
}

static void test_fsstat(void **state)
{
	FSSTAT3args a = { .fsroot = it_fh3(&root) };

	(void)state;
	assert_int_equal(it_nfs3(rpc, NFS3_FSSTAT, &a, &r), NFS3_OK);
	assert_true(r.fsstat.tbytes > 0);
	assert_true(r.fsstat.fbytes <= r.fsstat.tbytes);
	assert_true(r.fsstat.abytes <= r.fsstat.fbytes);
	assert_true(r.fsstat.ffiles <= r.fsstat.tfiles);
	assert_true(r.fsstat.afiles <= r.fsstat.ffiles);
	/* on any handle of the export, not only the root */
	{
		struct it_fh d = mkdir_fh("fsstat");

		a.fsroot = it_fh3(&d);
		assert_int_equal(it_nfs3(rpc, NFS3_FSSTAT, &a, &r), NFS3_OK);
	}
}

static void test_fsinfo(void **state)
{
	FSINFO3args a = { .fsroot = it_fh3(&root) };

	(void)state;
	assert_int_equal(it_nfs3(rpc, NFS3_FSINFO, &a, &r), NFS3_OK);
	assert_true(r.fsinfo.rtmax >= 4096);
	assert_true(r.fsinfo.rtpref > 0 && r.fsinfo.rtpref <= r.fsinfo.rtmax);
	assert_true(r.fsinfo.wtmax >= 4096);
	assert_true(r.fsinfo.wtpref > 0 && r.fsinfo.wtpref <= r.fsinfo.wtmax);
	assert_true(r.fsinfo.dtpref > 0);
	assert_true(r.fsinfo.maxfilesize > (1ull << 31));
	if (!it_is_ganesha()) {
		/* the backing filesystem's own limit: a file of maxfilesize
		 * bytes is possible there, one byte more is EFBIG */
		uint64_t max = r.fsinfo.maxfilesize;
		int fd = open(it_path(&srv, "fsinfo.max"), O_CREAT | O_RDWR, 0644);

		assert_true(fd >= 0);
		assert_true(max <= (uint64_t)LLONG_MAX);
		if (ftruncate(fd, (off_t)max) != 0)
			fail_msg("FSINFO maxfilesize %llu: the export's filesystem refuses "
				 "that size: %s", (unsigned long long)max, strerror(errno));
		if (max < (uint64_t)LLONG_MAX && ftruncate(fd, (off_t)max + 1) == 0)
			fail_msg("FSINFO maxfilesize %llu: the export's filesystem takes a "
				 "file one byte bigger", (unsigned long long)max);
		close(fd);
		unlink(it_path(&srv, "fsinfo.max"));
	}
	assert_true(r.fsinfo.properties & FSF3_LINK);
	assert_true(r.fsinfo.properties & FSF3_SYMLINK);
	assert_true(r.fsinfo.properties & FSF3_CANSETTIME);
	assert_true(r.has_attr);
}

static void test_pathconf(void **state)
{
	PATHCONF3args a = { .object = it_fh3(&root) };

	(void)state;
	assert_int_equal(it_nfs3(rpc, NFS3_PATHCONF, &a, &r), NFS3_OK);
	/* presto limits names to 255 bytes (NAME_MAX); Ganesha says 1024 */
	if (it_is_ganesha())
		assert_true(r.pathconf.name_max >= 255);
	else
		assert_int_equal(r.pathconf.name_max, 255);
	assert_true(r.pathconf.linkmax >= 1);
	assert_true(r.pathconf.no_trunc);
	assert_true(r.pathconf.case_preserving);
	assert_false(r.pathconf.case_insensitive);
}

static void test_commit(void **state)
{
	struct it_fh d = mkdir_fh("commit");
	struct it_fh f = create_fh(&d, "f", 0644);
	COMMIT3args c = { .file = it_fh3(&f), .offset = 0, .count = 0 };
	static char buf[100000];
	char verf[8];

	(void)state;
	it_fill(buf, sizeof(buf), 9);
	for (uint32_t off = 0; off < sizeof(buf); off += 10000) {
		assert_int_equal(it_write(rpc, &f, off, buf + off, 10000, UNSTABLE, &r), NFS3_OK);
		if (off == 0)
			memcpy(verf, r.verf, 8);
		assert_memory_equal(r.verf, verf, 8);
	}
	assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);
	assert_memory_equal(r.verf, verf, 8);
	assert_post_op("COMMIT");
	assert_int_equal(r.after.size, sizeof(buf));
	/* a range */
	c.offset = 5000;
	c.count = 20000;
	assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);
	assert_memory_equal(r.verf, verf, 8);
	/* the data is there */
	{
		size_t len;
		char *p = it_read_file(it_path(&srv, "commit/f"), &len);

		assert_non_null(p);
		assert_int_equal(len, sizeof(buf));
		assert_memory_equal(p, buf, len);
		free(p);
	}
}

static void test_stale_after_rmdir(void **state)
{
	struct it_fh d = mkdir_fh("stale");
	struct it_fh s;

	(void)state;
	assert_int_equal(it_mkdir(rpc, &d, "gone", 0755, &r), NFS3_OK);
	s = r.fh;
	assert_int_equal(it_rmdir(rpc, &d, "gone", &r), NFS3_OK);
	assert_int_equal(it_getattr(rpc, &s, &r), NFS3ERR_STALE);
	assert_int_equal(it_create(rpc, &s, "x", UNCHECKED, 0644, NULL, &r), NFS3ERR_STALE);
	assert_int_equal(it_lookup(rpc, &s, "x", &r), NFS3ERR_STALE);
}

/* ---------------------------------------------------------- mount protocol */

static void mount_export_cb(struct rpc_context *c, int status, void *data, void *priv)
{
	int *found = priv;
	exports p = NULL;
	struct exportnode e;

	(void)c;
	found[1] = 1;
	if (status != RPC_STATUS_SUCCESS)
		return;
	memcpy(&p, data, sizeof(p));
	for (; p; p = e.ex_next) {
		memcpy(&e, p, sizeof(e));	/* libnfs: possibly unaligned */
		if (!strcmp(e.ex_dir, srv.export))
			found[0] = 1;
	}
}

static void mount_null_cb(struct rpc_context *c, int status, void *data, void *priv)
{
	int *done = priv;

	(void)c;
	(void)data;
	done[0] = status == RPC_STATUS_SUCCESS;
	done[1] = 1;
}

/* dump_cb -- MOUNT DUMP: dump[0] success, dump[1] done, dump[2] entries,
 * dump[3] entries naming dump_dir exactly */
static char dump_dir[256];
static void dump_cb(struct rpc_context *c, int status, void *data, void *priv)
{
	int *dump = priv;
	mountlist p = NULL;
	struct mountbody b;

	(void)c;
	dump[1] = 1;
	dump[0] = status == RPC_STATUS_SUCCESS;
	if (status != RPC_STATUS_SUCCESS)
		return;
	memcpy(&p, data, sizeof(p));
	for (; p; p = b.ml_next) {
		memcpy(&b, p, sizeof(b));	/* libnfs: possibly unaligned */
		dump[2]++;
		if (b.ml_directory && strcmp(b.ml_directory, dump_dir) == 0)
			dump[3]++;
	}
}

static void test_mount_dump_bounded(void **state)
{
	/* 1,100 spellings of one directory (extra slashes, about 1,000 bytes
	 * each) are one mount: DUMP answers and lists it once (each was an
	 * entry, and past 1 MiB DUMP failed for everyone) */
	struct rpc_context *m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	static char path[1100];
	int dump[4] = { 0 }, n = 0;
	struct it_fh fh;

	(void)state;
	it_presto_only();	/* how a server keeps its list is its own */
	assert_non_null(m);
	snprintf(dump_dir, sizeof(dump_dir), "%s/dumpdir", srv.export);
	assert_int_equal(mkdir(dump_dir, 0755), 0);
	for (int a = 1; a <= 40 && n < 1100; a++) {
		for (int b = 0; b < 30 && n < 1100; b++, n++) {
			size_t k = (size_t)snprintf(path, sizeof(path), "%s", srv.export);
			for (int i = 0; i < a; i++)
				path[k++] = '/';
			k += (size_t)snprintf(path + k, sizeof(path) - k, "dumpdir");
			for (int i = 0; i < b; i++)
				path[k++] = '/';
			while (k < (size_t)(900 + a + b))
				path[k++] = '/';
			path[k] = '\0';
			if (it_mnt(m, path, &fh) != MNT3_OK)
				fail_msg("MNT of a spelling of %s refused: %s", dump_dir, path);
		}
	}
	assert_int_equal(rpc_mount3_dump_async(m, dump_cb, dump), 0);
	assert_int_equal(it_wait(m, &dump[1], IT_TIMEOUT_MS), 0);
	if (!dump[0])
		fail_msg("MOUNT DUMP failed after 1,100 MNTs of one directory");
	assert_int_equal(dump[3], 1);
	assert_true(dump[2] < 10);
	/* UMNT of one spelling forgets the mount */
	int done[2] = { 0, 0 };
	assert_int_equal(rpc_mount3_umnt_async(m, mount_null_cb, path, done), 0);
	assert_int_equal(it_wait(m, &done[1], IT_TIMEOUT_MS), 0);
	memset(dump, 0, sizeof(dump));
	assert_int_equal(rpc_mount3_dump_async(m, dump_cb, dump), 0);
	assert_int_equal(it_wait(m, &dump[1], IT_TIMEOUT_MS), 0);
	assert_true(dump[0]);
	assert_int_equal(dump[3], 0);
	it_rpc_close(m);
}

static void test_mount_protocol(void **state)
{
	struct rpc_context *m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	int found[2] = { 0, 0 }, done[2] = { 0, 0 };
	struct it_fh fh;

	(void)state;
	assert_non_null(m);
	assert_int_equal(rpc_mount3_null_async(m, mount_null_cb, done), 0);
	assert_int_equal(it_wait(m, &done[1], IT_TIMEOUT_MS), 0);
	assert_true(done[0]);
	assert_int_equal(rpc_mount3_export_async(m, mount_export_cb, found), 0);
	assert_int_equal(it_wait(m, &found[1], IT_TIMEOUT_MS), 0);
	assert_true(found[0]);
	/* MNT returns the same root handle twice; UMNT answers */
	assert_int_equal(it_mnt(m, srv.export, &fh), MNT3_OK);
	assert_int_equal(fh.len, root.len);
	assert_true(fh.len <= NFS3_FHSIZE);
	assert_memory_equal(fh.data, root.data, fh.len);
	done[0] = done[1] = 0;
	assert_int_equal(rpc_mount3_umnt_async(m, mount_null_cb, srv.export, done), 0);
	assert_int_equal(it_wait(m, &done[1], IT_TIMEOUT_MS), 0);
	assert_true(done[0]);
	/* a path that is not exported, relative or empty */
	assert_int_not_equal(it_mnt(m, "/etc", &fh), MNT3_OK);
	assert_int_not_equal(it_mnt(m, "/nonexistent/path", &fh), MNT3_OK);
	assert_int_not_equal(it_mnt(m, "", &fh), MNT3_OK);
	assert_int_not_equal(it_mnt(m, srv.export + 1, &fh), MNT3_OK);
	assert_int_not_equal(it_mnt(m, "/", &fh), MNT3_OK);
	it_rpc_close(m);
}

/* ------------------------------------------------------------ sync API */

static void test_sync_api(void **state)
{
	struct nfs_context *nfs = it_nfs_mount(&srv, NULL, -1, -1, NULL);
	static char buf[1 << 20], back[1 << 20];
	struct nfs_stat_64 st;
	struct statvfs vfs;
	struct nfsfh *fh;
	struct nfsdir *dir;
	struct nfsdirent *de;
	char link[64];
	int n, seen = 0;

	(void)state;
	assert_non_null(nfs);
	it_fill(buf, sizeof(buf), 11);
	assert_int_equal(nfs_mkdir(nfs, "/sync"), 0);
	assert_int_equal(nfs_creat(nfs, "/sync/f", 0600, &fh), 0);
	assert_int_equal(nfs_write(nfs, fh, sizeof(buf), buf), (int)sizeof(buf));
	assert_int_equal(nfs_fsync(nfs, fh), 0);
	assert_int_equal(nfs_close(nfs, fh), 0);
	assert_int_equal(nfs_stat64(nfs, "/sync/f", &st), 0);
	assert_int_equal(st.nfs_size, sizeof(buf));
	assert_int_equal(st.nfs_mode & 07777, 0600);
	assert_int_equal(nfs_open(nfs, "/sync/f", O_RDONLY, &fh), 0);
	n = 0;
	while (n < (int)sizeof(back)) {
		int k = nfs_pread(nfs, fh, n, sizeof(back) - n, back + n);

		assert_true(k > 0);
		n += k;
	}
	assert_memory_equal(back, buf, sizeof(buf));
	assert_int_equal(nfs_close(nfs, fh), 0);
	assert_int_equal(nfs_truncate(nfs, "/sync/f", 1000), 0);
	assert_int_equal(nfs_stat64(nfs, "/sync/f", &st), 0);
	assert_int_equal(st.nfs_size, 1000);
	assert_int_equal(nfs_chmod(nfs, "/sync/f", 0640), 0);
	assert_int_equal(nfs_chown(nfs, "/sync/f", 1000, 1000), 0);
	assert_int_equal(nfs_stat64(nfs, "/sync/f", &st), 0);
	assert_int_equal(st.nfs_mode & 07777, 0640);
	assert_int_equal(st.nfs_uid, 1000);
	{
		struct timeval tv[2] = { { 1234567890, 0 }, { 1234567891, 0 } };

		assert_int_equal(nfs_utimes(nfs, "/sync/f", tv), 0);
		assert_int_equal(nfs_stat64(nfs, "/sync/f", &st), 0);
		assert_int_equal(st.nfs_mtime, 1234567891);
	}
	assert_int_equal(nfs_link(nfs, "/sync/f", "/sync/hard"), 0);
	assert_int_equal(nfs_stat64(nfs, "/sync/f", &st), 0);
	assert_int_equal(st.nfs_nlink, 2);
	assert_int_equal(nfs_symlink(nfs, "f", "/sync/soft"), 0);
	memset(link, 0, sizeof(link));
	assert_int_equal(nfs_readlink(nfs, "/sync/soft", link, sizeof(link)), 0);
	assert_string_equal(link, "f");
	assert_int_equal(nfs_rename(nfs, "/sync/hard", "/sync/renamed"), 0);
	assert_int_equal(nfs_mknod(nfs, "/sync/fifo", S_IFIFO | 0644, 0), 0);
	assert_int_equal(nfs_access(nfs, "/sync/f", R_OK | W_OK), 0);
	assert_int_equal(nfs_statvfs(nfs, "/", &vfs), 0);
	assert_true(vfs.f_blocks > 0);
	assert_int_equal(nfs_opendir(nfs, "/sync", &dir), 0);
	while ((de = nfs_readdir(nfs, dir)) != NULL) {
		if (!strcmp(de->name, "f") || !strcmp(de->name, "soft") || !strcmp(de->name, "renamed") ||
		    !strcmp(de->name, "fifo"))
			seen++;
		else if (strcmp(de->name, ".") && strcmp(de->name, ".."))
			fail_msg("unexpected entry %s", de->name);
	}
	nfs_closedir(nfs, dir);
	assert_int_equal(seen, 4);
	assert_int_not_equal(nfs_rmdir(nfs, "/sync"), 0);	/* not empty */
	assert_int_equal(nfs_unlink(nfs, "/sync/f"), 0);
	assert_int_equal(nfs_unlink(nfs, "/sync/soft"), 0);
	assert_int_equal(nfs_unlink(nfs, "/sync/renamed"), 0);
	assert_int_equal(nfs_unlink(nfs, "/sync/fifo"), 0);
	assert_int_equal(nfs_rmdir(nfs, "/sync"), 0);
	assert_int_not_equal(nfs_stat64(nfs, "/sync", &st), 0);
	it_nfs_close(nfs);
}

/* ----------------------------------------------------------- async API */

struct async_state {
	int pending;
	int errors;
	struct nfsfh *fh;
	int done;
	char *back;
};

static void async_open_cb(int err, struct nfs_context *nfs, void *data, void *priv)
{
	struct async_state *s = priv;

	(void)nfs;
	if (err < 0)
		s->errors++;
	else
		s->fh = data;
	s->done = 1;
}

static void async_io_cb(int err, struct nfs_context *nfs, void *data, void *priv)
{
	struct async_state *s = priv;

	(void)nfs;
	(void)data;
	if (err < 0)
		s->errors++;
	s->pending--;
	s->done = s->pending == 0;
}

struct async_read {
	struct async_state *s;
	uint64_t off;
};

static void async_read_cb(int err, struct nfs_context *nfs, void *data, void *priv)
{
	struct async_read *rd = priv;

	(void)nfs;
	if (err < 0)
		rd->s->errors++;
	else
		memcpy(rd->s->back + rd->off, data, (size_t)err);
	rd->s->pending--;
	rd->s->done = rd->s->pending == 0;
}

static void test_async_api(void **state)
{
	/* 64 writes, then 64 reads, all in flight at once on one connection */
	struct nfs_context *nfs = it_nfs_mount(&srv, NULL, -1, -1, NULL);
	enum { CHUNK = 32768, N = 64 };
	static char buf[CHUNK * N], back[CHUNK * N];
	static struct async_read rd[N];
	struct async_state s = { 0 };
	size_t len;
	char *p;

	(void)state;
	assert_non_null(nfs);
	it_fill(buf, sizeof(buf), 21);
	assert_int_equal(nfs_creat_async(nfs, "/async", 0644, async_open_cb, &s), 0);
	assert_int_equal(it_nfs_wait(nfs, &s.done, IT_TIMEOUT_MS), 0);
	assert_int_equal(s.errors, 0);
	assert_non_null(s.fh);
	s.done = 0;
	s.pending = N;
	for (int i = N - 1; i >= 0; i--)	/* out of order on purpose */
		assert_int_equal(nfs_pwrite_async(nfs, s.fh, (uint64_t)i * CHUNK, CHUNK, buf + i * CHUNK,
						  async_io_cb, &s), 0);
	assert_int_equal(it_nfs_wait(nfs, &s.done, 3 * IT_TIMEOUT_MS), 0);
	assert_int_equal(s.errors, 0);
	s.done = 0;
	s.pending = 1;
	assert_int_equal(nfs_fsync_async(nfs, s.fh, async_io_cb, &s), 0);
	assert_int_equal(it_nfs_wait(nfs, &s.done, IT_TIMEOUT_MS), 0);
	p = it_read_file(it_path(&srv, "async"), &len);
	assert_non_null(p);
	assert_int_equal(len, sizeof(buf));
	assert_memory_equal(p, buf, len);
	free(p);
	s.back = back;
	s.done = 0;
	s.pending = N;
	for (int i = 0; i < N; i++) {
		rd[i].s = &s;
		rd[i].off = (uint64_t)i * CHUNK;
		assert_int_equal(nfs_pread_async(nfs, s.fh, rd[i].off, CHUNK, async_read_cb, &rd[i]), 0);
	}
	assert_int_equal(it_nfs_wait(nfs, &s.done, 3 * IT_TIMEOUT_MS), 0);
	assert_int_equal(s.errors, 0);
	assert_memory_equal(back, buf, sizeof(buf));
	s.done = 0;
	s.pending = 1;
	assert_int_equal(nfs_close_async(nfs, s.fh, async_io_cb, &s), 0);
	assert_int_equal(it_nfs_wait(nfs, &s.done, IT_TIMEOUT_MS), 0);
	it_nfs_close(nfs);
}

struct raw_many {
	int pending;
	int ok;
	int done;
};

static void raw_getattr_cb(struct rpc_context *c, int status, void *data, void *priv)
{
	struct raw_many *m = priv;

	(void)c;
	if (status == RPC_STATUS_SUCCESS && ((GETATTR3res *)data)->status == NFS3_OK)
		m->ok++;
	m->pending--;
	m->done = m->pending == 0;
}

static void test_raw_pipelined(void **state)
{
	/* 200 GETATTRs queued before any reply is read */
	struct raw_many m = { 200, 0, 0 };
	GETATTR3args a = { .object = it_fh3(&root) };

	(void)state;
	for (int i = 0; i < 200; i++)
		assert_int_equal(rpc_nfs3_getattr_async(rpc, raw_getattr_cb, &a, &m), 0);
	if (it_wait(rpc, &m.done, 3 * IT_TIMEOUT_MS) < 0)
		fail_msg("%d GETATTRs still pending", m.pending);
	assert_int_equal(m.ok, 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_null),
		cmocka_unit_test(test_getattr),
		cmocka_unit_test(test_setattr),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_access),
		cmocka_unit_test(test_readlink),
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_write),
		cmocka_unit_test(test_write_count_mismatch),
		cmocka_unit_test(test_large_offsets),
		cmocka_unit_test(test_fileids),
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_mkdir),
		cmocka_unit_test(test_symlink),
		cmocka_unit_test(test_mknod),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_rmdir),
		cmocka_unit_test(test_rename),
		cmocka_unit_test(test_link),
		cmocka_unit_test(test_readdir),
		cmocka_unit_test(test_readdirplus),
		cmocka_unit_test(test_fsstat),
		cmocka_unit_test(test_fsinfo),
		cmocka_unit_test(test_pathconf),
		cmocka_unit_test(test_commit),
		cmocka_unit_test(test_stale_after_rmdir),
		cmocka_unit_test(test_mount_protocol),
cmocka_unit_test(test_mount_dump_bounded),
		cmocka_unit_test(test_sync_api),
		cmocka_unit_test(test_async_api),
		cmocka_unit_test(test_raw_pipelined),
	};

	it_init(55);
	return cmocka_run_group_tests_name("integration/procs", tests, setup, teardown);
}
