/*
 * test_drc.c -- the duplicate request cache: a retransmission (same
 * connection, same xid, same procedure) of a non-idempotent call gets the
 * original reply instead of being executed again (REMOVE twice -> OK both
 * times, not NOENT the second time); another procedure or another client
 * using the same xid is executed normally.
 *
 * libnfs's rpc_set_next_xid() makes the raw context reuse an xid.
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

/* again -- the next call reuses XID, as a client's retransmission after a
 * lost reply would (a moment later: NFS-Ganesha 4.3 drops a duplicate that
 * arrives while it still files the original in its cache) */
static void again(struct rpc_context *c, uint32_t xid)
{
	usleep(50 * 1000);
	rpc_set_next_xid(c, xid);
}

static int exists(const char *rel)
{
	struct stat st;

	return lstat(it_path(&srv, rel), &st) == 0;
}

static void test_drc_remove(void **state)
{
	(void)state;
	assert_int_equal(it_write_file(it_path(&srv, "rm1"), "x", 1, 0644), 0);
	rpc_set_next_xid(rpc, 0x10001);
	assert_int_equal(it_remove(rpc, &root, "rm1", &r), NFS3_OK);
	assert_false(exists("rm1"));
	again(rpc, 0x10001);
	assert_int_equal(it_remove(rpc, &root, "rm1", &r), NFS3_OK);
	/* a new xid is a new request */
	rpc_set_next_xid(rpc, 0x10002);
	assert_int_equal(it_remove(rpc, &root, "rm1", &r), NFS3ERR_NOENT);
}

static void test_drc_create_guarded(void **state)
{
	struct it_fh first;

	(void)state;
	rpc_set_next_xid(rpc, 0x20001);
	assert_int_equal(it_create(rpc, &root, "cr1", GUARDED, 0644, NULL, &r), NFS3_OK);
	first = r.fh;
	again(rpc, 0x20001);
	assert_int_equal(it_create(rpc, &root, "cr1", GUARDED, 0644, NULL, &r), NFS3_OK);
	if (r.has_fh) {
		assert_int_equal(r.fh.len, first.len);
		assert_memory_equal(r.fh.data, first.data, first.len);
	}
	rpc_set_next_xid(rpc, 0x20002);
	assert_int_equal(it_create(rpc, &root, "cr1", GUARDED, 0644, NULL, &r), NFS3ERR_EXIST);
}

static void test_drc_mkdir_rmdir(void **state)
{
	(void)state;
	rpc_set_next_xid(rpc, 0x30001);
	assert_int_equal(it_mkdir(rpc, &root, "md1", 0755, &r), NFS3_OK);
	again(rpc, 0x30001);
	assert_int_equal(it_mkdir(rpc, &root, "md1", 0755, &r), NFS3_OK);
	rpc_set_next_xid(rpc, 0x30002);
	assert_int_equal(it_rmdir(rpc, &root, "md1", &r), NFS3_OK);
	again(rpc, 0x30002);
	assert_int_equal(it_rmdir(rpc, &root, "md1", &r), NFS3_OK);
	assert_false(exists("md1"));
	rpc_set_next_xid(rpc, 0x30003);
	assert_int_equal(it_rmdir(rpc, &root, "md1", &r), NFS3ERR_NOENT);
}

static void test_drc_rename(void **state)
{
	(void)state;
	assert_int_equal(it_write_file(it_path(&srv, "rn-a"), "x", 1, 0644), 0);
	rpc_set_next_xid(rpc, 0x40001);
	assert_int_equal(it_rename(rpc, &root, "rn-a", &root, "rn-b", &r), NFS3_OK);
	again(rpc, 0x40001);
	assert_int_equal(it_rename(rpc, &root, "rn-a", &root, "rn-b", &r), NFS3_OK);
	assert_false(exists("rn-a"));
	assert_true(exists("rn-b"));
}

static void test_drc_link_symlink(void **state)
{
	struct it_fh f;

	(void)state;
	assert_int_equal(it_create(rpc, &root, "ln-src", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	rpc_set_next_xid(rpc, 0x50001);
	assert_int_equal(it_link(rpc, &f, &root, "ln-dst", &r), NFS3_OK);
	again(rpc, 0x50001);
	assert_int_equal(it_link(rpc, &f, &root, "ln-dst", &r), NFS3_OK);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(r.attr.nlink, 2);
	rpc_set_next_xid(rpc, 0x50002);
	assert_int_equal(it_symlink(rpc, &root, "sl", "target", &r), NFS3_OK);
	again(rpc, 0x50002);
	assert_int_equal(it_symlink(rpc, &root, "sl", "target", &r), NFS3_OK);
}

static void test_drc_mknod(void **state)
{
	MKNOD3args a;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.where.dir = it_fh3(&root);
	a.where.name = "fifo";
	a.what.type = NF3FIFO;
	rpc_set_next_xid(rpc, 0x60001);
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3_OK);
	again(rpc, 0x60001);
	assert_int_equal(it_nfs3(rpc, NFS3_MKNOD, &a, &r), NFS3_OK);
}

static void test_drc_exclusive_create(void **state)
{
	(void)state;
	rpc_set_next_xid(rpc, 0x70001);
	assert_int_equal(it_create(rpc, &root, "excl", EXCLUSIVE, 0, "drcverf1", &r), NFS3_OK);
	again(rpc, 0x70001);
	assert_int_equal(it_create(rpc, &root, "excl", EXCLUSIVE, 0, "drcverf1", &r), NFS3_OK);
}

static void test_drc_setattr_guard(void **state)
{
	/* SETATTR with a ctime guard changes ctime: executed twice, the second
	 * would fail with NOT_SYNC; retransmitted, it gets the first OK */
	struct it_fh f;
	SETATTR3args a;

	(void)state;
	assert_int_equal(it_create(rpc, &root, "guard", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&f);
	a.new_attributes.mode.set_it = 1;
	a.new_attributes.mode.set_mode3_u.mode = 0600;
	a.guard.check = 1;
	a.guard.sattrguard3_u.obj_ctime = r.attr.ctime;
	usleep(20 * 1000);	/* so that the new ctime differs */
	rpc_set_next_xid(rpc, 0x75001);
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	again(rpc, 0x75001);
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	rpc_set_next_xid(rpc, 0x75002);
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3ERR_NOT_SYNC);
}

static void test_drc_other_procedure(void **state)
{
	/* the same xid with another procedure is a new request */
	(void)state;
	assert_int_equal(it_write_file(it_path(&srv, "op-a"), "x", 1, 0644), 0);
	rpc_set_next_xid(rpc, 0x80001);
	assert_int_equal(it_remove(rpc, &root, "op-a", &r), NFS3_OK);
	again(rpc, 0x80001);
	assert_int_equal(it_mkdir(rpc, &root, "op-b", 0755, &r), NFS3_OK);
	assert_true(exists("op-b"));
}

static void test_drc_other_client(void **state)
{
	/* another connection (another source port) reusing the xid is another
	 * client: its call is executed, it does not get the first one's reply */
	struct rpc_context *other = it_rpc_connect(&srv, IT_NFS_PROG, 3);

	(void)state;
	assert_non_null(other);
	assert_int_equal(it_write_file(it_path(&srv, "cl-a"), "x", 1, 0644), 0);
	assert_int_equal(it_write_file(it_path(&srv, "cl-b"), "x", 1, 0644), 0);
	rpc_set_next_xid(rpc, 0x90001);
	assert_int_equal(it_remove(rpc, &root, "cl-a", &r), NFS3_OK);
	rpc_set_next_xid(other, 0x90001);
	assert_int_equal(it_remove(other, &root, "cl-b", &r), NFS3_OK);
	assert_false(exists("cl-b"));
	again(other, 0x90001);
	assert_int_equal(it_remove(other, &root, "cl-b", &r), NFS3_OK);	/* its own replay */
	it_rpc_close(other);
	/* a third client reusing it for a name that does not exist: NOENT */
	other = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(other);
	again(other, 0x90001);
	assert_int_equal(it_remove(other, &root, "cl-a", &r), NFS3ERR_NOENT);
	it_rpc_close(other);
}

static void test_drc_idempotent_reexecuted(void **state)
{
	/* READ and GETATTR are idempotent: a repeated xid sees current data */
	struct it_fh f;

	(void)state;
	assert_int_equal(it_write_file(it_path(&srv, "idem"), "one", 3, 0644), 0);
	assert_int_equal(it_lookup(rpc, &root, "idem", &r), NFS3_OK);
	f = r.fh;
	rpc_set_next_xid(rpc, 0xa0001);
	assert_int_equal(it_read(rpc, &f, 0, 100, &r), NFS3_OK);
	assert_int_equal(r.count, 3);
	assert_int_equal(it_write_file(it_path(&srv, "idem"), "twotwo", 6, 0644), 0);
	again(rpc, 0xa0001);
	assert_int_equal(it_read(rpc, &f, 0, 100, &r), NFS3_OK);
	assert_int_equal(r.count, 6);
	assert_memory_equal(r.data, "twotwo", 6);
}

static void test_drc_many(void **state)
{
	/* 300 removes, each retransmitted once: every one answered OK twice */
	char name[32];

	(void)state;
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "many-%d", i);
		assert_int_equal(it_write_file(it_path(&srv, name), "", 0, 0644), 0);
	}
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "many-%d", i);
		rpc_set_next_xid(rpc, 0xb0000 + (uint32_t)i);
		assert_int_equal(it_remove(rpc, &root, name, &r), NFS3_OK);
	}
	/* retransmissions of the most recent 16 still hit the cache */
	usleep(50 * 1000);
	for (int i = 284; i < 300; i++) {
		snprintf(name, sizeof(name), "many-%d", i);
		rpc_set_next_xid(rpc, 0xb0000 + (uint32_t)i);
		assert_int_equal(it_remove(rpc, &root, name, &r), NFS3_OK);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drc_remove),
		cmocka_unit_test(test_drc_create_guarded),
		cmocka_unit_test(test_drc_mkdir_rmdir),
		cmocka_unit_test(test_drc_rename),
		cmocka_unit_test(test_drc_link_symlink),
		cmocka_unit_test(test_drc_mknod),
		cmocka_unit_test(test_drc_exclusive_create),
		cmocka_unit_test(test_drc_setattr_guard),
		cmocka_unit_test(test_drc_other_procedure),
		cmocka_unit_test(test_drc_other_client),
		cmocka_unit_test(test_drc_idempotent_reexecuted),
		cmocka_unit_test(test_drc_many),
	};

	it_init(55);
	it_call_timeout_ms = 3000;	/* a dropped retransmission fails fast */
	return cmocka_run_group_tests_name("integration/drc", tests, setup, teardown);
}
