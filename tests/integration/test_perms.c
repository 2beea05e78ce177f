/*
 * test_perms.c -- the server runs as root but acts as the caller: AUTH_SYS
 * uid, gid and supplementary groups decide what a request may do, with the
 * backing filesystem's rules (mode bits, owner-only chmod/chown, the sticky
 * bit). A server that forgets to switch identity passes every other test.
 *
 * Export "127.0.0.1(rw,insecure,no_root_squash)"; files are prepared
 * locally as root with chown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static struct it_server srv;
static struct it_fh root;
static struct it_res r;

static int setup(void **state)
{
	(void)state;
	it_res_init(&r);
	if (it_server_start(&srv, "127.0.0.1(rw,insecure,no_root_squash)") < 0)
		return -1;
	return it_root_fh(&srv, &root) == MNT3_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	it_res_free(&r);
	return it_server_stop(&srv);
}

/* as -- a raw context speaking for uid/gid with NGROUPS supplementary groups */
static struct rpc_context *as(uint32_t uid, uint32_t gid, uint32_t ngroups, uint32_t *groups)
{
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);

	assert_non_null(rpc);
	rpc_set_auth(rpc, libnfs_authunix_create("it", uid, gid, ngroups, groups));
	return rpc;
}

/* walk -- the handle of REL, one LOOKUP per component */
static struct it_fh walk(struct rpc_context *rpc, const char *rel)
{
	struct it_fh fh = root;
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", rel);
	for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		assert_int_equal(it_lookup(rpc, &fh, c, &r), NFS3_OK);
		fh = r.fh;
	}
	return fh;
}

/* mkfile -- REL owned by uid:gid with MODE, created locally; its handle */
static struct it_fh mkfile(const char *rel, uid_t uid, gid_t gid, mode_t mode)
{
	struct rpc_context *rpc = as(0, 0, 0, NULL);
	const char *p = it_path(&srv, rel);
	struct it_fh fh;

	assert_int_equal(it_write_file(p, "data", 4, 0600), 0);
	assert_int_equal(chown(p, uid, gid), 0);
	assert_int_equal(chmod(p, mode), 0);
	fh = walk(rpc, rel);
	it_rpc_close(rpc);
	return fh;
}

static struct it_fh mkdirectory(const char *rel, uid_t uid, gid_t gid, mode_t mode)
{
	struct rpc_context *rpc = as(0, 0, 0, NULL);
	const char *p = it_path(&srv, rel);
	struct it_fh fh;

	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chown(p, uid, gid), 0);
	assert_int_equal(chmod(p, mode), 0);
	fh = walk(rpc, rel);
	it_rpc_close(rpc);
	return fh;
}

static void test_write_needs_permission(void **state)
{
	struct it_fh f644 = mkfile("root644", 0, 0, 0644);
	struct it_fh f666 = mkfile("root666", 0, 0, 0666);
	struct it_fh f600 = mkfile("root600", 0, 0, 0600);
	struct rpc_context *u = as(1000, 1000, 0, NULL);
	size_t len;
	char *p;

	(void)state;
	assert_int_equal(it_write(u, &f644, 0, "EVIL", 4, FILE_SYNC, &r), NFS3ERR_ACCES);
	assert_int_equal(it_write(u, &f666, 0, "OKAY", 4, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_read(u, &f644, 0, 4, &r), NFS3_OK);
	assert_int_equal(it_read(u, &f600, 0, 4, &r), NFS3ERR_ACCES);
	p = it_read_file(it_path(&srv, "root644"), &len);
	assert_non_null(p);
	assert_memory_equal(p, "data", 4);
	free(p);
	/* truncation is a write too */
	{
		SETATTR3args a;

		memset(&a, 0, sizeof(a));
		a.object = it_fh3(&f644);
		a.new_attributes.size.set_it = 1;
		assert_int_equal(it_nfs3(u, NFS3_SETATTR, &a, &r), NFS3ERR_ACCES);
	}
	it_rpc_close(u);
}

static void test_owner_only_attributes(void **state)
{
	struct it_fh f = mkfile("owned-by-root", 0, 0, 0666);
	struct it_fh mine = mkfile("owned-by-1000", 1000, 1000, 0644);
	struct rpc_context *u = as(1000, 1000, 0, NULL);
	SETATTR3args a;
	struct stat st;

	(void)state;
	/* chmod of another's file: PERM (RFC 1813: not the owner) */
	assert_int_equal(it_setattr_mode(u, &f, 0777, &r), NFS3ERR_PERM);
	/* chmod of one's own file: fine */
	assert_int_equal(it_setattr_mode(u, &mine, 0600, &r), NFS3_OK);
	/* giving a file away is root's privilege */
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&mine);
	a.new_attributes.uid.set_it = 1;
	a.new_attributes.uid.set_uid3_u.uid = 0;
	assert_int_equal(it_nfs3(u, NFS3_SETATTR, &a, &r), NFS3ERR_PERM);
	/* setting times to an arbitrary value on another's file: PERM/ACCES */
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&f);
	a.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
	a.new_attributes.mtime.set_mtime_u.mtime.seconds = 1000;
	{
		int s = it_nfs3(u, NFS3_SETATTR, &a, &r);

		assert_true(s == NFS3ERR_PERM || s == NFS3ERR_ACCES);
	}
	assert_int_equal(stat(it_path(&srv, "owned-by-root"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0666);
	assert_int_equal(st.st_uid, 0);
	assert_true(st.st_mtime != 1000);
	assert_int_equal(stat(it_path(&srv, "owned-by-1000"), &st), 0);
	assert_int_equal(st.st_uid, 1000);
	it_rpc_close(u);
}

static void test_directory_permissions(void **state)
{
	struct it_fh d = mkdirectory("rootdir", 0, 0, 0755);
	struct rpc_context *u = as(1000, 1000, 0, NULL);
	struct it_fh victim;
	MKNOD3args mk;

	(void)state;
	victim = mkfile("rootdir/victim", 0, 0, 0666);
	(void)victim;
	assert_int_equal(it_create(u, &d, "planted", UNCHECKED, 0644, NULL, &r), NFS3ERR_ACCES);
	assert_int_equal(it_mkdir(u, &d, "planted", 0755, &r), NFS3ERR_ACCES);
	assert_int_equal(it_symlink(u, &d, "planted", "x", &r), NFS3ERR_ACCES);
	memset(&mk, 0, sizeof(mk));
	mk.where.dir = it_fh3(&d);
	mk.where.name = "planted";
	mk.what.type = NF3FIFO;
	assert_int_equal(it_nfs3(u, NFS3_MKNOD, &mk, &r), NFS3ERR_ACCES);
	assert_int_equal(it_remove(u, &d, "victim", &r), NFS3ERR_ACCES);
	assert_int_equal(it_rename(u, &d, "victim", &d, "renamed", &r), NFS3ERR_ACCES);
	assert_int_equal(it_link(u, &victim, &d, "hard", &r), NFS3ERR_ACCES);
	assert_int_equal(access(it_path(&srv, "rootdir/victim"), F_OK), 0);
	assert_int_not_equal(access(it_path(&srv, "rootdir/planted"), F_OK), 0);
	/* a directory without x for the caller cannot be searched */
	{
		struct it_fh closed = mkdirectory("closed", 0, 0, 0700);

		assert_int_equal(it_write_file(it_path(&srv, "closed/inner"), "i", 1, 0644), 0);
		assert_int_equal(it_lookup(u, &closed, "inner", &r), NFS3ERR_ACCES);
		assert_int_not_equal(it_readdir_all(u, &closed, 0, 4096, &r, NULL), NFS3_OK);
	}
	/* the caller only creates things as itself */
	{
		struct it_fh open = mkdirectory("open", 0, 0, 0777);
		struct stat st;

		assert_int_equal(it_create(u, &open, "mine", UNCHECKED, 0644, NULL, &r), NFS3_OK);
		assert_int_equal(stat(it_path(&srv, "open/mine"), &st), 0);
		assert_int_equal(st.st_uid, 1000);
		assert_int_equal(st.st_gid, 1000);
		assert_int_equal(it_mkdir(u, &open, "mydir", 0755, &r), NFS3_OK);
		assert_int_equal(stat(it_path(&srv, "open/mydir"), &st), 0);
		assert_int_equal(st.st_uid, 1000);
		assert_int_equal(it_symlink(u, &open, "mylink", "t", &r), NFS3_OK);
		assert_int_equal(lstat(it_path(&srv, "open/mylink"), &st), 0);
		assert_int_equal(st.st_uid, 1000);
	}
	it_rpc_close(u);
}

static void test_sticky_directory(void **state)
{
	struct it_fh d = mkdirectory("tmp", 0, 0, 01777);
	struct rpc_context *a = as(1001, 1001, 0, NULL), *b = as(1002, 1002, 0, NULL);

	(void)state;
	assert_int_equal(it_create(a, &d, "a-file", UNCHECKED, 0666, NULL, &r), NFS3_OK);
	/* EPERM from the filesystem: PERM (ACCES accepted) */
	{
		int s1 = it_remove(b, &d, "a-file", &r);
		int s2 = it_rename(b, &d, "a-file", &d, "b-owns-it", &r);

		assert_true(s1 == NFS3ERR_PERM || s1 == NFS3ERR_ACCES);
		assert_true(s2 == NFS3ERR_PERM || s2 == NFS3ERR_ACCES);
	}
	assert_int_equal(access(it_path(&srv, "tmp/a-file"), F_OK), 0);
	assert_int_equal(it_remove(a, &d, "a-file", &r), NFS3_OK);
	it_rpc_close(a);
	it_rpc_close(b);
}

static void test_groups(void **state)
{
	/* group permission through the primary gid and through a supplementary
	 * group; a group not listed gives nothing */
	struct it_fh f = mkfile("group-file", 0, 2000, 0660);
	uint32_t groups[] = { 3000, 2000 };
	struct rpc_context *prim = as(1000, 2000, 0, NULL);
	struct rpc_context *supp = as(1000, 1000, 2, groups);
	struct rpc_context *none = as(1000, 1000, 1, groups);

	(void)state;
	assert_int_equal(it_write(prim, &f, 0, "prim", 4, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_write(supp, &f, 0, "supp", 4, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_write(none, &f, 0, "none", 4, FILE_SYNC, &r), NFS3ERR_ACCES);
	assert_int_equal(it_read(none, &f, 0, 4, &r), NFS3ERR_ACCES);
	/* ACCESS says the same */
	{
		ACCESS3args a = { .object = it_fh3(&f), .access = ACCESS3_READ | ACCESS3_MODIFY };

		assert_int_equal(it_nfs3(supp, NFS3_ACCESS, &a, &r), NFS3_OK);
		assert_int_equal(r.access, ACCESS3_READ | ACCESS3_MODIFY);
		assert_int_equal(it_nfs3(none, NFS3_ACCESS, &a, &r), NFS3_OK);
		assert_int_equal(r.access, 0);
	}
	/* a file created with a supplementary group context gets the primary gid */
	{
		struct it_fh d = mkdirectory("gdir", 0, 0, 0777);
		struct stat st;

		assert_int_equal(it_create(supp, &d, "g", UNCHECKED, 0644, NULL, &r), NFS3_OK);
		assert_int_equal(stat(it_path(&srv, "gdir/g"), &st), 0);
		assert_int_equal(st.st_gid, 1000);
	}
	it_rpc_close(prim);
	it_rpc_close(supp);
	it_rpc_close(none);
}

static void test_identity_does_not_leak(void **state)
{
	/* requests of root and of a user interleaved on two connections: each
	 * is done with its own identity (a server thread that keeps the last
	 * caller's fsuid would mix them up) */
	struct it_fh d = mkdirectory("mix", 0, 0, 0777);
	struct rpc_context *ro = as(0, 0, 0, NULL), *u = as(1000, 1000, 0, NULL);
	char name[32];
	struct stat st;

	(void)state;
	for (int i = 0; i < 40; i++) {
		struct rpc_context *c = i % 2 ? u : ro;

		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(it_create(c, &d, name, UNCHECKED, 0644, NULL, &r), NFS3_OK);
	}
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "mix/f%d", i);
		assert_int_equal(stat(it_path(&srv, name), &st), 0);
		if (st.st_uid != (uid_t)(i % 2 ? 1000 : 0))
			fail_msg("%s created by uid %d is owned by %u", name, i % 2 ? 1000 : 0,
				 (unsigned)st.st_uid);
	}
	it_rpc_close(ro);
	it_rpc_close(u);
}

static void test_access_without_owner_override(void **state)
{
	/* ACCESS tells the mode bits as they are, also to the owner (knfsd:
	 * no owner override in nfsd_access): the Linux client checks open(2)
	 * and access(2) with it, so an owner's open for writing of his own
	 * 0444 file must fail there as on a local disk. The owner override
	 * is for the I/O itself: WRITE to a file the owner opened before a
	 * chmod 0444 (or created 0444) still succeeds. */
	struct it_fh ro = mkfile("own444", 1000, 1000, 0444);
	struct it_fh none = mkfile("own000", 1000, 1000, 0000);
	struct rpc_context *u = as(1000, 1000, 0, NULL);
	ACCESS3args a = { .access = ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_EXECUTE };

	(void)state;
	a.object = it_fh3(&ro);
	assert_int_equal(it_nfs3(u, NFS3_ACCESS, &a, &r), NFS3_OK);
	assert_int_equal(r.access, ACCESS3_READ);
	a.object = it_fh3(&none);
	assert_int_equal(it_nfs3(u, NFS3_ACCESS, &a, &r), NFS3_OK);
	assert_int_equal(r.access, 0);
	assert_int_equal(it_write(u, &ro, 0, "mine", 4, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_read(u, &none, 0, 4, &r), NFS3_OK);
	it_rpc_close(u);
}

static void test_readdir_without_search_permission(void **state)
{
	/* a directory the caller may read but not search (r--): its names
	 * are listed, as by ls on a local disk and by knfsd (READDIRPLUS gives
	 * no attributes or handles for them); a LOOKUP in it is refused */
	struct it_fh d = mkdirectory("noexec", 1001, 1001, 0744);
	struct rpc_context *u = as(1000, 1000, 0, NULL);
	int found;

	(void)state;
	mkfile("noexec/inside", 1001, 1001, 0644);
	for (int plus = 0; plus < 2; plus++) {
		assert_int_equal(it_readdir_all(u, &d, plus, 4096, &r, NULL), NFS3_OK);
		found = 0;
		for (size_t i = 0; i < r.nents; i++)
			if (!strcmp(r.ents[i].name, "inside")) {
				found = 1;
				if (plus)
					assert_false(r.ents[i].has_fh);
			}
		if (!found)
			fail_msg("READDIR%s of a r-- directory: \"inside\" not listed", plus ? "PLUS" : "");
	}
	assert_int_equal(it_lookup(u, &d, "inside", &r), NFS3ERR_ACCES);
	it_rpc_close(u);
}

static void test_creation_owner_only_from_root(void **state)
{
	/* the owner and group a CREATE, MKDIR, SYMLINK or MKNOD asks for are
	 * set for root and ignored for anyone else, as knfsd does: the object
	 * is made with the caller's, and the answer is OK (it was PERM, for
	 * an object made all the same) */
	struct rpc_context *rpc = as(1000, 1000, 0, NULL);
	struct rpc_context *su = as(0, 0, 0, NULL);
	CREATE3args c;
	MKDIR3args m;
	SYMLINK3args sl;
	MKNOD3args mk;
	struct stat st;

	(void)state;
	it_presto_only();
	assert_int_equal(chmod(srv.export, 0777), 0);
	for (int who = 0; who < 2; who++) {
		struct rpc_context *x = who ? su : rpc;
		char fname[24], dname[24], lname[24], pname[24];
		uint32_t want = who ? 4242 : 1000;

		snprintf(fname, sizeof(fname), "own-f%d", who);
		snprintf(dname, sizeof(dname), "own-d%d", who);
		snprintf(lname, sizeof(lname), "own-l%d", who);
		snprintf(pname, sizeof(pname), "own-p%d", who);
		memset(&c, 0, sizeof(c));
		c.where.dir = it_fh3(&root);
		c.where.name = fname;
		c.how.mode = GUARDED;
		c.how.createhow3_u.obj_attributes.uid.set_it = TRUE;
		c.how.createhow3_u.obj_attributes.uid.set_uid3_u.uid = 4242;
		c.how.createhow3_u.obj_attributes.gid.set_it = TRUE;
		c.how.createhow3_u.obj_attributes.gid.set_gid3_u.gid = 4242;
		assert_int_equal(it_nfs3(x, NFS3_CREATE, &c, &r), NFS3_OK);
		memset(&m, 0, sizeof(m));
		m.where.dir = it_fh3(&root);
		m.where.name = dname;
		m.attributes = c.how.createhow3_u.obj_attributes;
		assert_int_equal(it_nfs3(x, NFS3_MKDIR, &m, &r), NFS3_OK);
		memset(&sl, 0, sizeof(sl));
		sl.where.dir = it_fh3(&root);
		sl.where.name = lname;
		sl.symlink.symlink_attributes = c.how.createhow3_u.obj_attributes;
		sl.symlink.symlink_data = "target";
		assert_int_equal(it_nfs3(x, NFS3_SYMLINK, &sl, &r), NFS3_OK);
		memset(&mk, 0, sizeof(mk));
		mk.where.dir = it_fh3(&root);
		mk.where.name = pname;
		mk.what.type = NF3FIFO;
		mk.what.mknoddata3_u.pipe_attributes = c.how.createhow3_u.obj_attributes;
		assert_int_equal(it_nfs3(x, NFS3_MKNOD, &mk, &r), NFS3_OK);
		const char *names[] = { fname, dname, lname, pname };
		for (int i = 0; i < 4; i++) {
			assert_int_equal(lstat(it_path(&srv, names[i]), &st), 0);
			if (st.st_uid != want || st.st_gid != want)
				fail_msg("%s made by uid %d: owner %u:%u, not %u:%u", names[i],
					 who ? 0 : 1000, st.st_uid, st.st_gid, want, want);
		}
	}
	it_rpc_close(rpc);
	it_rpc_close(su);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_needs_permission),
		cmocka_unit_test(test_owner_only_attributes),
		cmocka_unit_test(test_directory_permissions),
		cmocka_unit_test(test_sticky_directory),
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_identity_does_not_leak),
		cmocka_unit_test(test_access_without_owner_override),
		cmocka_unit_test(test_readdir_without_search_permission),
		cmocka_unit_test(test_creation_owner_only_from_root),
	};

	it_init(55);
	return cmocka_run_group_tests_name("integration/perms", tests, setup, teardown);
}
