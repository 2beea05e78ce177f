/*
 * test_exports.c -- the export rules of exports(5) as presto-nfsd applies
 * them: ro (NFS3ERR_ROFS on every modifying procedure), root_squash (the
 * default), no_root_squash, all_squash, anonuid/anongid, secure (the
 * default: a source port >= 1024 is refused) / insecure, the client list
 * (a client not in it gets MNT3ERR_ACCES and nothing through a handle),
 * several exports, and SIGHUP reloading the file.
 *
 * Each test starts a server of its own. A client at 127.0.0.2 is a raw
 * socket bound to that address (the whole 127/8 is loopback).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static struct it_server srv;
static struct it_res r;

static int test_teardown(void **state)
{
	(void)state;
	it_res_free(&r);
	return srv.pid > 0 || srv.dir[0] ? it_server_stop(&srv) : 0;
}

/* start -- a server with CLIENTS; a raw NFS context (as uid/gid) and the
 * root handle */
static struct rpc_context *start(const char *clients, int uid, int gid, struct it_fh *root)
{
	struct rpc_context *rpc;

	it_res_init(&r);
	assert_int_equal(it_server_start(&srv, clients), 0);
	assert_int_equal(it_root_fh(&srv, root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	if (uid >= 0) {
		rpc_set_uid(rpc, uid);
		rpc_set_gid(rpc, gid);
	}
	return rpc;
}

static void owner_is(const char *rel, uid_t uid, gid_t gid)
{
	struct stat st;

	assert_int_equal(lstat(it_path(&srv, rel), &st), 0);
	if (st.st_uid != uid || st.st_gid != gid)
		fail_msg("%s is owned by %u:%u, want %u:%u", rel, (unsigned)st.st_uid, (unsigned)st.st_gid,
			 (unsigned)uid, (unsigned)gid);
}

static void test_ro(void **state)
{
	struct it_fh root, f, d;
	struct rpc_context *rpc;
	struct nfs_context *nfs;
	struct nfsfh *nfh;
	MKNOD3args mk;
	SETATTR3args sa;
	ACCESS3args ac;
	size_t len;
	char *p;

	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_start(&srv, "127.0.0.1(ro,insecure,no_root_squash)"), 0);
	assert_int_equal(it_write_file(it_path(&srv, "f"), "keep", 4, 0666), 0);
	assert_int_equal(mkdir(it_path(&srv, "d"), 0777), 0);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_lookup(rpc, &root, "f", &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_lookup(rpc, &root, "d", &r), NFS3_OK);
	d = r.fh;
	/* reading works */
	assert_int_equal(it_read(rpc, &f, 0, 100, &r), NFS3_OK);
	assert_int_equal(r.count, 4);
	assert_int_equal(it_readdir_all(rpc, &root, 1, 4096, &r, NULL), NFS3_OK);
	/* every modifying procedure gets NFS3ERR_ROFS (RFC 1813 2.6) */
	assert_int_equal(it_write(rpc, &f, 0, "XXXX", 4, FILE_SYNC, &r), NFS3ERR_ROFS);
	assert_int_equal(it_create(rpc, &root, "new", UNCHECKED, 0644, NULL, &r), NFS3ERR_ROFS);
	assert_int_equal(it_create(rpc, &root, "new", EXCLUSIVE, 0, "12345678", &r), NFS3ERR_ROFS);
	assert_int_equal(it_mkdir(rpc, &root, "newdir", 0755, &r), NFS3ERR_ROFS);
	assert_int_equal(it_symlink(rpc, &root, "newlink", "f", &r), NFS3ERR_ROFS);
	memset(&mk, 0, sizeof(mk));
	mk.where.dir = it_fh3(&root);
	mk.where.name = "fifo";
	mk.what.type = NF3FIFO;
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &mk, &r), NFS3ERR_ROFS);
	assert_int_equal(it_remove(rpc, &root, "f", &r), NFS3ERR_ROFS);
	assert_int_equal(it_rmdir(rpc, &root, "d", &r), NFS3ERR_ROFS);
	assert_int_equal(it_rename(rpc, &root, "f", &d, "g", &r), NFS3ERR_ROFS);
	assert_int_equal(it_link(rpc, &f, &d, "h", &r), NFS3ERR_ROFS);
	assert_int_equal(it_setattr_mode(rpc, &f, 0600, &r), NFS3ERR_ROFS);
	memset(&sa, 0, sizeof(sa));
	sa.object = it_fh3(&f);
	sa.new_attributes.size.set_it = 1;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &sa, &r), NFS3ERR_ROFS);
	/* ACCESS does not grant modify, extend or delete */
	ac.object = it_fh3(&f);
	ac.access = 0x3f;
	assert_int_equal(it_nfs3(rpc, NFS3_ACCESS, &ac, &r), NFS3_OK);
	assert_true(r.access & ACCESS3_READ);
	assert_false(r.access & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE));
	ac.object = it_fh3(&root);
	assert_int_equal(it_nfs3(rpc, NFS3_ACCESS, &ac, &r), NFS3_OK);
	assert_false(r.access & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE));
	it_rpc_close(rpc);
	/* nothing changed on disk */
	p = it_read_file(it_path(&srv, "f"), &len);
	assert_non_null(p);
	assert_int_equal(len, 4);
	assert_memory_equal(p, "keep", 4);
	free(p);
	assert_int_not_equal(access(it_path(&srv, "new"), F_OK), 0);
	assert_int_not_equal(access(it_path(&srv, "newdir"), F_OK), 0);
	assert_int_equal(access(it_path(&srv, "d"), F_OK), 0);
	/* the sync API sees EROFS */
	nfs = it_nfs_mount(&srv, NULL, -1, -1, NULL);
	assert_non_null(nfs);
	assert_int_equal(nfs_creat(nfs, "/x", 0644, &nfh), -EROFS);
	assert_int_equal(nfs_mkdir(nfs, "/y"), -EROFS);
	it_nfs_close(nfs);
}

static void test_root_squash_default(void **state)
{
	struct it_fh root;
	struct rpc_context *rpc = start("127.0.0.1(rw,insecure)", 0, 0, &root);
	struct rpc_context *u;
	struct it_fh f;

	(void)state;
	/* root becomes 65534:65534 */
	assert_int_equal(it_create(rpc, &root, "by-root", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-root", 65534, 65534);
	assert_int_equal(it_mkdir(rpc, &root, "dir-by-root", 0755, &r), NFS3_OK);
	owner_is("dir-by-root", 65534, 65534);
	/* a root-owned 0600 file is not readable by a squashed root */
	assert_int_equal(it_write_file(it_path(&srv, "secret"), "s", 1, 0600), 0);
	assert_int_equal(it_lookup(rpc, &root, "secret", &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_read(rpc, &f, 0, 10, &r), NFS3ERR_ACCES);
	/* chown to root is refused (the caller is not root) or, as NFS-Ganesha
	 * does, squashed too: the file never becomes root's */
	{
		SETATTR3args a;

		assert_int_equal(it_create(rpc, &root, "mine", UNCHECKED, 0644, NULL, &r), NFS3_OK);
		memset(&a, 0, sizeof(a));
		a.object = it_fh3(&r.fh);
		a.new_attributes.uid.set_it = 1;
		a.new_attributes.uid.set_uid3_u.uid = 0;
		{
			int st = it_nfs3(rpc, NFS3_SETATTR, &a, &r);

			if (st != NFS3_OK && st != NFS3ERR_PERM && st != NFS3ERR_ACCES)
				fail_msg("SETATTR uid=0 by a squashed root: %d, want NFS3ERR_PERM (1) or ACCES", st);
		}
		owner_is("mine", 65534, 65534);
	}
	/* root_squash squashes gid 0 as well (knfsd: root's group is root) */
	rpc_set_uid(rpc, 1000);
	rpc_set_gid(rpc, 0);
	assert_int_equal(it_create(rpc, &root, "gid0", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("gid0", 1000, 65534);
	rpc_set_uid(rpc, 0);
	/* another user is not squashed */
	u = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(u);
	rpc_set_uid(u, 1000);
	rpc_set_gid(u, 1000);
	assert_int_equal(it_create(u, &root, "by-1000", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-1000", 1000, 1000);
	it_rpc_close(u);
	it_rpc_close(rpc);
}

static void test_no_root_squash(void **state)
{
	struct it_fh root;
	struct rpc_context *rpc = start("127.0.0.1(rw,insecure,no_root_squash)", 0, 0, &root);

	(void)state;
	assert_int_equal(it_create(rpc, &root, "by-root", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-root", 0, 0);
	assert_int_equal(it_write_file(it_path(&srv, "secret"), "s", 1, 0600), 0);
	assert_int_equal(it_lookup(rpc, &root, "secret", &r), NFS3_OK);
	assert_int_equal(it_read(rpc, &r.fh, 0, 10, &r), NFS3_OK);
	it_rpc_close(rpc);
}

static void test_all_squash(void **state)
{
	struct it_fh root;
	struct rpc_context *rpc = start("127.0.0.1(rw,insecure,all_squash)", 1000, 1000, &root);

	(void)state;
	assert_int_equal(it_create(rpc, &root, "by-1000", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-1000", 65534, 65534);
	rpc_set_uid(rpc, 0);
	rpc_set_gid(rpc, 0);
	assert_int_equal(it_create(rpc, &root, "by-root", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-root", 65534, 65534);
	it_rpc_close(rpc);
}

static void test_anonuid(void **state)
{
	struct it_fh root;
	struct rpc_context *rpc =
		start("127.0.0.1(rw,insecure,all_squash,anonuid=1234,anongid=4321)", 1000, 1000, &root);

	(void)state;
	assert_int_equal(it_create(rpc, &root, "by-1000", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-1000", 1234, 4321);
	assert_int_equal(it_mkdir(rpc, &root, "dir", 0755, &r), NFS3_OK);
	owner_is("dir", 1234, 4321);
	it_rpc_close(rpc);
}

static void test_anonuid_root_squash(void **state)
{
	struct it_fh root;
	struct rpc_context *rpc = start("127.0.0.1(rw,insecure,anonuid=2000,anongid=3000)", 0, 0, &root);

	(void)state;
	assert_int_equal(it_create(rpc, &root, "by-root", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-root", 2000, 3000);
	rpc_set_uid(rpc, 1000);
	rpc_set_gid(rpc, 1000);
	assert_int_equal(it_create(rpc, &root, "by-1000", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("by-1000", 1000, 1000);
	it_rpc_close(rpc);
}

static void test_denied_client(void **state)
{
	struct rpc_context *m;
	struct it_fh fh;
	int err = 0;
	struct nfs_context *nfs;

	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_start(&srv, "127.0.0.2(rw,insecure,no_root_squash)"), 0);
	/* 127.0.0.1 is not in the list */
	m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	assert_int_equal(it_mnt(m, srv.export, &fh), MNT3ERR_ACCES);
	it_rpc_close(m);
	nfs = it_nfs_mount(&srv, NULL, -1, -1, &err);
	assert_null(nfs);
	assert_int_not_equal(err, 0);
	/* 127.0.0.2 is */
	assert_int_equal(it_raw_mnt(&srv, "127.0.0.2", 0, srv.export, &fh), MNT3_OK);
	assert_int_equal(it_raw_getattr(&srv, "127.0.0.2", 0, &fh), NFS3_OK);
	/* the handle it got is useless from 127.0.0.1: ACCES or STALE (or an
	 * RPC-level AUTH_ERROR), never the attributes */
	{
		int st = it_raw_getattr(&srv, "127.0.0.1", 0, &fh);

		if (st != NFS3ERR_ACCES && st != NFS3ERR_STALE && st != NFS3ERR_PERM && st != -201)
			fail_msg("GETATTR of a valid handle from a client not in the export list: %d, "
				 "want NFS3ERR_ACCES (13) or NFS3ERR_STALE (70)", st);
	}
	/* nor through libnfs's raw API */
	{
		struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		int st;

		assert_non_null(rpc);
		st = it_create(rpc, &fh, "intruder", UNCHECKED, 0644, NULL, &r);
		assert_int_not_equal(st, NFS3_OK);
		it_rpc_close(rpc);
		assert_int_not_equal(access(it_path(&srv, "intruder"), F_OK), 0);
	}
}

static void test_ipv6_only_client(void **state)
{
	struct rpc_context *m;
	struct it_fh fh;

	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_start(&srv, "::1(rw,insecure)"), 0);
	m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	assert_int_equal(it_mnt(m, srv.export, &fh), MNT3ERR_ACCES);
	it_rpc_close(m);
}

static void test_client_list(void **state)
{
	/* the first matching entry of the line decides */
	struct it_fh root, fh;
	struct rpc_context *rpc;
	struct it_buf *call = calloc(1, sizeof(*call)), *reply = calloc(1, sizeof(*reply));
	int st;

	(void)state;
	assert_non_null(call);
	assert_non_null(reply);
	rpc = start("127.0.0.2(rw,insecure,no_root_squash) 127.0.0.1(ro,insecure)", -1, -1, &root);
	assert_int_equal(it_create(rpc, &root, "from-1", UNCHECKED, 0644, NULL, &r), NFS3ERR_ROFS);
	it_rpc_close(rpc);
	/* 127.0.0.2 may write */
	assert_int_equal(it_raw_mnt(&srv, "127.0.0.2", 0, srv.export, &fh), MNT3_OK);
	it_put_call(call, 0x5001, 2, IT_NFS_PROG, 3, NFS3_CREATE, IT_AUTH_SYS, 0, 0);
	it_put_fh(call, &fh);
	it_put_string(call, "from-2");
	it_put32(call, UNCHECKED);
	for (int i = 0; i < 6; i++)
		it_put32(call, 0);
	st = it_raw_status(srv.nfs_port, "127.0.0.2", 0, call, reply, NULL);
	assert_int_equal(st, NFS3_OK);
	owner_is("from-2", 0, 0);
	free(call);
	free(reply);
}

/* mnt_as -- start a server with one export line, MNT it from 127.0.0.1 and
 * try a CREATE; returns the mountstat3, *create gets the nfsstat3 */
static int mnt_and_create(const char *sub, const char *clients, int *create)
{
	struct it_export ex = { sub, clients };
	struct rpc_context *m, *rpc;
	struct it_fh fh;
	char path[256];
	int st;

	*create = -1;
	if (it_server_startv(&srv, &ex, 1, 0) < 0)
		fail_msg("the server refused the line: %s", clients);
	snprintf(path, sizeof(path), "%s/%s", srv.dir, sub);
	m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	st = it_mnt(m, path, &fh);
	it_rpc_close(m);
	if (st == MNT3_OK) {
		rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(rpc);
		*create = it_create(rpc, &fh, "probe", UNCHECKED, 0644, NULL, &r);
		it_rpc_close(rpc);
	}
	assert_int_equal(it_server_stop(&srv), 0);
	return st;
}

static void test_client_forms(void **state)
{
	int c;

	(void)state;
	it_res_init(&r);
	assert_int_equal(mnt_and_create("export", "127.0.0.0/8(rw,insecure)", &c), MNT3_OK);
	assert_int_equal(c, NFS3_OK);
	assert_int_equal(mnt_and_create("export", "127.0.0.2/32(rw,insecure)", &c), MNT3ERR_ACCES);
	assert_int_equal(mnt_and_create("export", "10.0.0.0/8(rw,insecure)", &c), MNT3ERR_ACCES);
	assert_int_equal(mnt_and_create("export", "*(ro,insecure)", &c), MNT3_OK);
	assert_int_equal(c, NFS3ERR_ROFS);
	assert_int_equal(mnt_and_create("export", "localhost(rw,insecure)", &c), MNT3_OK);
	assert_int_equal(c, NFS3_OK);
	/* a path with a space, quoted */
	assert_int_equal(mnt_and_create("with space", "127.0.0.1(rw,insecure)", &c), MNT3_OK);
	assert_int_equal(c, NFS3_OK);
	if (!it_is_ganesha()) {
		/* a netmask (Ganesha's CLIENT blocks take CIDR only) */
		assert_int_equal(mnt_and_create("export", "127.0.0.0/255.255.255.0(rw,insecure)", &c), MNT3_OK);
		assert_int_equal(c, NFS3_OK);
		/* default options before the clients (exports(5)) */
		assert_int_equal(mnt_and_create("export", "-ro,insecure 127.0.0.1", &c), MNT3_OK);
		assert_int_equal(c, NFS3ERR_ROFS);
		assert_int_equal(mnt_and_create("export", "-ro,insecure 127.0.0.1(rw)", &c), MNT3_OK);
		assert_int_equal(c, NFS3_OK);
	}
}

static void test_bad_exports_refused(void **state)
{
	/* presto-nfsd refuses a file it does not understand (etc/exports) */
	static const char *bad[] = {
		"127.0.0.1 (rw)",		/* space before '(' */
		"127.0.0.1(rw,bogus_option)",
		"127.0.0.1(rw",
	};
	struct it_export ex = { "export", NULL };

	it_presto_only();
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ex.clients = bad[i];
		print_message("exports line \"%s\" (expect a refusal below)\n", bad[i]);
		if (it_server_startv(&srv, &ex, 1, 0) == 0) {
			it_server_stop(&srv);
			fail_msg("presto-nfsd started with the exports line \"%s\"", bad[i]);
		}
	}
}

static void test_secure_port(void **state)
{
	/* "secure" (the default): calls from a source port >= 1024 are refused,
	 * from a reserved port accepted */
	struct it_fh fh, good;
	int st, port;

	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_start(&srv, "127.0.0.1(rw,no_root_squash)"), 0);
	/* MNT itself may be allowed (knfsd enforces "secure" on NFS calls) */
	st = it_raw_mnt(&srv, "127.0.0.1", 0, srv.export, &fh);	/* ephemeral port */
	print_message("MNT from an unreserved port on a secure export: %d\n", st);
	/* from a reserved port: find a free one */
	st = -1;
	for (port = 1023; port > 600; port--) {
		int s = it_raw_mnt(&srv, "127.0.0.1", port, srv.export, &good);

		if (s == -1 && (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == EACCES))
			continue;
		st = s;
		break;
	}
	assert_int_equal(st, MNT3_OK);
	/* the good handle, used from an unreserved port, gives nothing */
	st = it_raw_getattr(&srv, "127.0.0.1", 0, &good);
	if (st == NFS3_OK)
		fail_msg("GETATTR from an unreserved port on a secure export: NFS3_OK");
	/* and from a reserved one, it works */
	for (port = 1000; port > 600; port--) {
		st = it_raw_getattr(&srv, "127.0.0.1", port, &good);
		if (st == -1 && (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == EACCES))
			continue;
		break;
	}
	assert_int_equal(st, NFS3_OK);
}

static void test_two_exports(void **state)
{
	/* a handle from the ro export cannot write, even through a rw mount */
	const struct it_export ex[] = {
		{ "rw", "127.0.0.1(rw,insecure,no_root_squash)" },
		{ "ro", "127.0.0.1(ro,insecure,no_root_squash)" },
	};
	struct rpc_context *m, *rpc;
	struct it_fh rwroot, roroot, f;
	char ro_path[256];

	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_startv(&srv, ex, 2, 0), 0);
	snprintf(ro_path, sizeof(ro_path), "%s/ro", srv.dir);
	assert_int_equal(it_write_file(it_path(&srv, "../ro/file"), "ro", 2, 0666), 0);
	m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	assert_int_equal(it_mnt(m, srv.export, &rwroot), MNT3_OK);
	assert_int_equal(it_mnt(m, ro_path, &roroot), MNT3_OK);
	it_rpc_close(m);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &rwroot, "w", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &roroot, "w", UNCHECKED, 0644, NULL, &r), NFS3ERR_ROFS);
	assert_int_equal(it_lookup(rpc, &roroot, "file", &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_write(rpc, &f, 0, "xx", 2, FILE_SYNC, &r), NFS3ERR_ROFS);
	/* cross-export operations are refused (XDEV or ROFS) */
	assert_int_not_equal(it_link(rpc, &f, &rwroot, "crosslink", &r), NFS3_OK);
	assert_int_not_equal(it_rename(rpc, &roroot, "file", &rwroot, "stolen", &r), NFS3_OK);
	assert_int_equal(access(it_path(&srv, "../ro/file"), F_OK), 0);
	/* nor may a file of the rw export be moved into the ro one: the
	 * rw check is the source directory's, so only XDEV stops it */
	assert_int_equal(it_rename(rpc, &rwroot, "w", &roroot, "planted", &r), NFS3ERR_XDEV);
	assert_int_equal(access(it_path(&srv, "w"), F_OK), 0);
	assert_int_not_equal(access(it_path(&srv, "../ro/planted"), F_OK), 0);
	/* the two roots are different objects */
	assert_false(rwroot.len == roroot.len && !memcmp(rwroot.data, roroot.data, rwroot.len));
	it_rpc_close(rpc);
}

/* dotdot_entry -- READDIRPLUS of dir (into r); its ".." entry */
static const struct it_dirent *dotdot_entry(struct rpc_context *rpc, const struct it_fh *dir)
{
	assert_int_equal(it_readdir_all(rpc, dir, 1, 8192, &r, NULL), NFS3_OK);
	for (size_t i = 0; i < r.nents; i++)
		if (!strcmp(r.ents[i].name, ".."))
			return &r.ents[i];
	fail_msg("READDIRPLUS gave no \"..\"");
	return NULL;
}

/* dotdot_refused -- LOOKUP ".." of dir is refused and READDIRPLUS of dir
 * gives its ".." neither attributes nor a handle */
static void dotdot_refused(struct rpc_context *rpc, const struct it_fh *dir, const char *why)
{
	int st = it_lookup(rpc, dir, "..", &r);
	if (st == NFS3_OK)
		fail_msg("%s: LOOKUP \"..\" gave a handle outside the export", why);
	assert_int_equal(st, NFS3ERR_ACCES);
	const struct it_dirent *e = dotdot_entry(rpc, dir);
	if (e->has_fh || e->has_attr)
		fail_msg("%s: READDIRPLUS gave \"..\" a handle or attributes", why);
}

/* dotdot_is -- LOOKUP ".." of dir and READDIRPLUS's ".." entry of dir both
 * give parent (its handle, and its inode as the attributes' fileid) */
static void dotdot_is(struct rpc_context *rpc, const struct it_fh *dir, const struct it_fh *parent,
		      uint64_t ino)
{
	assert_int_equal(it_lookup(rpc, dir, "..", &r), NFS3_OK);
	assert_int_equal(r.attr.fileid, ino);
	assert_int_equal(r.fh.len, parent->len);
	assert_memory_equal(r.fh.data, parent->data, parent->len);
	const struct it_dirent *e = dotdot_entry(rpc, dir);
	assert_true(e->has_attr && e->has_fh);
	assert_int_equal(e->attr.fileid, ino);
	assert_int_equal(e->fh.len, parent->len);
	assert_memory_equal(e->fh.data, parent->data, parent->len);
}

static void test_dotdot_of_a_directory_moved_out(void **state)
{
	/* a handle stays valid when its directory moves, also out of its
	 * export: out of a nested export's subtree by a client's RENAME in
	 * the outer export, or out of every export by a local mv. Its ".."
	 * must not lead on to the rest of the filesystem (the state directory
	 * with fh.key, /etc) */
	const struct it_export ex[] = {
		{ "export", "127.0.0.1(rw,insecure,no_root_squash)" },
		{ "export/nested", "127.0.0.1(ro,insecure,all_squash)" },
	};
	struct rpc_context *m, *rpc;
	struct it_fh oroot, nroot, onested, dd, odd;
	char nested[256], path[512], out[512];
	struct stat nst;

	it_presto_only();
	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_startv(&srv, ex, 2, 0), 0);
	snprintf(nested, sizeof(nested), "%s/export/nested", srv.dir);
	snprintf(path, sizeof(path), "%s/dd", nested);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(stat(nested, &nst), 0);
	m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	assert_int_equal(it_mnt(m, srv.export, &oroot), MNT3_OK);
	assert_int_equal(it_mnt(m, nested, &nroot), MNT3_OK);
	it_rpc_close(m);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_lookup(rpc, &nroot, "dd", &r), NFS3_OK);
	dd = r.fh;
	/* inside, ".." works: LOOKUP and READDIRPLUS give the nested root */
	dotdot_is(rpc, &dd, &nroot, (uint64_t)nst.st_ino);

	/* the outer export moves dd out of the nested one */
	assert_int_equal(it_lookup(rpc, &oroot, "nested", &r), NFS3_OK);
	onested = r.fh;
	assert_int_equal(it_rename(rpc, &onested, "dd", &oroot, "dd_moved", &r), NFS3_OK);
	dotdot_refused(rpc, &dd, "a directory moved out of a nested export");
	/* the outer export still reaches it, and its ".." (the outer root) */
	assert_int_equal(it_lookup(rpc, &oroot, "dd_moved", &r), NFS3_OK);
	odd = r.fh;
	assert_int_equal(it_lookup(rpc, &odd, "..", &r), NFS3_OK);

	/* moved back: ".." works again */
	assert_int_equal(it_rename(rpc, &oroot, "dd_moved", &onested, "dd", &r), NFS3_OK);
	dotdot_is(rpc, &dd, &nroot, (uint64_t)nst.st_ino);

	/* a local mv out of every export */
	snprintf(out, sizeof(out), "%s/outside", srv.dir);
	assert_int_equal(rename(path, out), 0);
	dotdot_refused(rpc, &dd, "a directory moved out by a local mv");
	dotdot_refused(rpc, &odd, "a directory moved out by a local mv (outer handle)");
	assert_int_equal(rename(out, path), 0);
	/* still serving (not it_server_alive: libnfs's mount of a server with
	 * nested exports leaks an allocation of its own under ASan) */
	assert_int_equal(it_getattr(rpc, &oroot, &r), NFS3_OK);
	it_rpc_close(rpc);
	assert_true(it_server_running(&srv));
}

/* same_object -- the handle fh and the local path name one object: GETATTR
 * through the handle gives the inode that lstat gives */
static void same_object(struct rpc_context *rpc, const struct it_fh *fh, const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(it_getattr(rpc, fh, &r), NFS3_OK);
	if (r.attr.fileid != (uint64_t)st.st_ino)
		fail_msg("%s: the handle names inode %llu, the path %llu", path,
			 (unsigned long long)r.attr.fileid, (unsigned long long)st.st_ino);
}

/* tmpfs_teardown -- test_export_on_tmpfs's mount goes first, also after a
 * failed assertion */
static int tmpfs_teardown(void **state)
{
	char cmd[512];

	if (srv.dir[0]) {
		snprintf(cmd, sizeof(cmd), "mountpoint -q %s/tmpx && umount -l %s/tmpx", srv.dir, srv.dir);
		int rc = system(cmd);	/* nonzero when nothing is mounted */
		(void)rc;
	}
	return test_teardown(state);
}

static void test_export_on_tmpfs(void **state)
{
	/* an export on a filesystem whose handles do not carry the inode
	 * number as ext4's do (tmpfs): LOOKUP and READDIRPLUS take handle and
	 * attributes from one descriptor (entry_of), and each entry gets its
	 * own, before and after the server has learnt the layout */
	const struct it_export one = { "export", "127.0.0.1(rw,insecure,no_root_squash)" };
	const struct it_export two[] = {
		one, { "tmpx", "127.0.0.1(rw,insecure,no_root_squash)" },
	};
	static const char *names[] = { "a", "b", "c" };
	struct rpc_context *m, *rpc;
	struct it_fh troot, fh[3];
	char tdir[256], p[3][300], cmd[512];

	it_presto_only();
	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_startv(&srv, &one, 1, 0), 0);
	snprintf(tdir, sizeof(tdir), "%s/tmpx", srv.dir);
	assert_int_equal(mkdir(tdir, 0777), 0);
	snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=1m presto-it %s", tdir);
	assert_int_equal(system(cmd), 0);
	for (int i = 0; i < 3; i++)
		snprintf(p[i], sizeof(p[i]), "%s/%s", tdir, names[i]);
	int fd = open(p[0], O_CREAT | O_WRONLY, 0644);
	bool made = fd >= 0 && mkdir(p[1], 0755) == 0 && symlink("a", p[2]) == 0;
	if (fd >= 0)
		close(fd);
	bool reloaded = made && it_server_reload(&srv, two, 2) == 0;
	m = reloaded ? it_rpc_connect(&srv, MOUNT_PROG, 3) : NULL;
	int mst = -1;
	/* the reload runs beside the calls: MNT until the export is there */
	for (int i = 0; m && i < 50 && (mst = it_mnt(m, tdir, &troot)) != MNT3_OK; i++)
		usleep(100 * 1000);
	if (m)
		it_rpc_close(m);
	rpc = mst == MNT3_OK ? it_rpc_connect(&srv, IT_NFS_PROG, 3) : NULL;
	for (int pass = 0; rpc && pass < 2; pass++) {
		for (int i = 0; i < 3; i++) {
			assert_int_equal(it_lookup(rpc, &troot, names[i], &r), NFS3_OK);
			fh[i] = r.fh;
			same_object(rpc, &fh[i], p[i]);
		}
		assert_int_equal(it_readdir_all(rpc, &troot, 1, 8192, &r, NULL), NFS3_OK);
		int seen = 0;
		struct it_dirent ents[8];
		size_t n = r.nents < 8 ? r.nents : 8;
		memcpy(ents, r.ents, n * sizeof(ents[0]));
		for (size_t k = 0; k < n; k++)
			for (int i = 0; i < 3; i++) {
				if (strcmp(ents[k].name, names[i]))
					continue;
				seen++;
				assert_true(ents[k].has_attr && ents[k].has_fh);
				assert_int_equal(ents[k].fh.len, fh[i].len);
				assert_memory_equal(ents[k].fh.data, fh[i].data, fh[i].len);
				same_object(rpc, &ents[k].fh, p[i]);
			}
		assert_int_equal(seen, 3);
	}
	if (rpc)
		it_rpc_close(rpc);
	assert_true(made);
	assert_true(reloaded);
	assert_int_equal(mst, MNT3_OK);
	assert_true(it_server_running(&srv));
}

static void test_ipv6(void **state)
{
	/* listening on ::1 too: an IPv6 client in the list mounts and works,
	 * the IPv4-only entry does not admit it */
	const struct it_export ex[] = {
		{ "export", "::1(rw,insecure,no_root_squash) 127.0.0.1(ro,insecure)" },
		{ "v4only", "127.0.0.1(rw,insecure,no_root_squash)" },
	};
	struct rpc_context *m, *rpc;
	struct it_fh fh;
	char v4only[256];

	it_presto_only();
	(void)state;
	it_res_init(&r);
	assert_int_equal(it_server_startv(&srv, ex, 2, IT_IPV6), 0);
	snprintf(v4only, sizeof(v4only), "%s/v4only", srv.dir);
	m = it_rpc_connect_to(&srv, "::1", MOUNT_PROG, 3);
	assert_non_null(m);
	assert_int_equal(it_mnt(m, srv.export, &fh), MNT3_OK);
	assert_int_equal(it_mnt(m, v4only, &r.fh), MNT3ERR_ACCES);
	it_rpc_close(m);
	rpc = it_rpc_connect_to(&srv, "::1", IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &fh, "via-v6", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	owner_is("via-v6", 0, 0);
	it_rpc_close(rpc);
	/* the same export from 127.0.0.1 is read-only */
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &fh, "via-v4", UNCHECKED, 0644, NULL, &r), NFS3ERR_ROFS);
	it_rpc_close(rpc);
}

static void test_sighup_reload(void **state)
{
	struct it_fh root, fh;
	struct rpc_context *rpc;
	const struct it_export ro = { "export", "127.0.0.1(ro,insecure,no_root_squash)" };
	const struct it_export gone = { "export", "127.0.0.2(rw,insecure,no_root_squash)" };
	int st = -1;

	it_presto_only();
	(void)state;
	rpc = start("127.0.0.1(rw,insecure,no_root_squash)", -1, -1, &root);
	assert_int_equal(it_create(rpc, &root, "before", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	/* rw -> ro: the same handle now gets ROFS */
	assert_int_equal(it_server_reload(&srv, &ro, 1), 0);
	for (int i = 0; i < 50; i++) {
		st = it_create(rpc, &root, "after", UNCHECKED, 0644, NULL, &r);
		if (st != NFS3_OK)
			break;
		/* the reload runs beside the calls: it may land in between */
		st = it_remove(rpc, &root, "after", &r);
		if (st != NFS3_OK)
			break;
		usleep(100 * 1000);
	}
	assert_int_equal(st, NFS3ERR_ROFS);
	/* 127.0.0.1 removed from the list: MNT refused, the old handle useless */
	assert_int_equal(it_server_reload(&srv, &gone, 1), 0);
	for (int i = 0; i < 50; i++) {
		st = it_getattr(rpc, &root, &r);
		if (st != NFS3_OK)
			break;
		usleep(100 * 1000);
	}
	assert_true(st == NFS3ERR_ACCES || st == NFS3ERR_STALE || st == NFS3ERR_PERM || st == -1);
	assert_int_equal(it_raw_mnt(&srv, "127.0.0.1", 0, srv.export, &fh), MNT3ERR_ACCES);
	assert_true(it_server_running(&srv));
	it_rpc_close(rpc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_ro, test_teardown),
		cmocka_unit_test_teardown(test_root_squash_default, test_teardown),
		cmocka_unit_test_teardown(test_no_root_squash, test_teardown),
		cmocka_unit_test_teardown(test_all_squash, test_teardown),
		cmocka_unit_test_teardown(test_anonuid, test_teardown),
		cmocka_unit_test_teardown(test_anonuid_root_squash, test_teardown),
		cmocka_unit_test_teardown(test_denied_client, test_teardown),
		cmocka_unit_test_teardown(test_ipv6_only_client, test_teardown),
		cmocka_unit_test_teardown(test_client_list, test_teardown),
		cmocka_unit_test_teardown(test_client_forms, test_teardown),
		cmocka_unit_test_teardown(test_bad_exports_refused, test_teardown),
		cmocka_unit_test_teardown(test_secure_port, test_teardown),
		cmocka_unit_test_teardown(test_two_exports, test_teardown),
		cmocka_unit_test_teardown(test_dotdot_of_a_directory_moved_out, test_teardown),
		cmocka_unit_test_teardown(test_export_on_tmpfs, tmpfs_teardown),
		cmocka_unit_test_teardown(test_ipv6, test_teardown),
		cmocka_unit_test_teardown(test_sighup_reload, test_teardown),
	};

	it_init(58);
	return cmocka_run_group_tests_name("integration/exports", tests, NULL, NULL);
}
