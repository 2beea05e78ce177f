/*
 * test_restart.c -- invariant 4 (a handle stays valid across restarts and
 * crashes for as long as the object exists) and the durability promise of a
 * reply, seen by a client: after a clean restart (SIGTERM) and after a crash
 * (SIGKILL), the handles a client holds still work, FILE_SYNC and COMMITted
 * data is there, the namespace operations that were answered are there, and
 * an EXCLUSIVE CREATE retransmitted with the same verifier still succeeds.
 * (Power loss is tests/crash's business: here the page cache survives.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static struct it_server srv;
static struct it_res r;

static int setup(void **state)
{
	(void)state;
	it_res_init(&r);
	return it_server_start(&srv, "127.0.0.1(rw,insecure,no_root_squash)");
}

static int teardown(void **state)
{
	(void)state;
	it_res_free(&r);
	return it_server_stop(&srv);
}

static void restart_keeps_state(int sig, const char *tag)
{
	struct rpc_context *rpc;
	struct it_fh root, d, f, g, x;
	static char buf[300000];
	char verf[8], name[64];
	COMMIT3args c;

	it_fill(buf, sizeof(buf), (uint32_t)sig);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	snprintf(name, sizeof(name), "dir-%s", tag);
	assert_int_equal(it_mkdir(rpc, &root, name, 0755, &r), NFS3_OK);
	d = r.fh;
	assert_int_equal(it_create(rpc, &d, "sync", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_write(rpc, &f, 0, buf, 100000, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &d, "unstable", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	g = r.fh;
	assert_int_equal(it_write(rpc, &g, 0, buf, 50000, UNSTABLE, &r), NFS3_OK);
	assert_int_equal(it_write(rpc, &g, 50000, buf + 50000, 50000, UNSTABLE, &r), NFS3_OK);
	memcpy(verf, r.verf, 8);
	memset(&c, 0, sizeof(c));
	c.file = it_fh3(&g);
	assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);
	assert_memory_equal(r.verf, verf, 8);
	assert_int_equal(it_create(rpc, &d, "excl", EXCLUSIVE, 0, "restart!", &r), NFS3_OK);
	x = r.fh;
	assert_int_equal(it_symlink(rpc, &d, "link", "sync", &r), NFS3_OK);
	assert_int_equal(it_rename(rpc, &d, "link", &d, "link2", &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &d, "gone", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_remove(rpc, &d, "gone", &r), NFS3_OK);
	it_rpc_close(rpc);

	assert_int_equal(it_server_restart(&srv, sig), 0);

	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	/* the old handles, without a new MNT or LOOKUP */
	assert_int_equal(it_getattr(rpc, &root, &r), NFS3_OK);
	assert_int_equal(it_getattr(rpc, &d, &r), NFS3_OK);
	assert_int_equal(r.attr.type, NF3DIR);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(r.attr.size, 100000);
	assert_int_equal(it_read(rpc, &f, 0, 100000, &r), NFS3_OK);
	assert_int_equal(r.count, 100000);
	assert_memory_equal(r.data, buf, 100000);
	assert_int_equal(it_getattr(rpc, &g, &r), NFS3_OK);
	assert_int_equal(r.attr.size, 100000);
	assert_int_equal(it_read(rpc, &g, 0, 100000, &r), NFS3_OK);
	assert_memory_equal(r.data, buf, 100000);
	assert_int_equal(it_getattr(rpc, &x, &r), NFS3_OK);
	/* the same root handle from MNT */
	{
		struct it_fh again;

		assert_int_equal(it_root_fh(&srv, &again), MNT3_OK);
		assert_int_equal(again.len, root.len);
		assert_memory_equal(again.data, root.data, root.len);
	}
	/* the namespace as answered */
	assert_int_equal(it_lookup(rpc, &d, "link2", &r), NFS3_OK);
	assert_int_equal(it_lookup(rpc, &d, "link", &r), NFS3ERR_NOENT);
	assert_int_equal(it_lookup(rpc, &d, "gone", &r), NFS3ERR_NOENT);
	/* EXCLUSIVE retransmitted after the restart: same verifier -> OK,
	 * another -> EXIST (the verifier lives with the file) */
	assert_int_equal(it_create(rpc, &d, "excl", EXCLUSIVE, 0, "restart!", &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &d, "excl", EXCLUSIVE, 0, "another!", &r), NFS3ERR_EXIST);
	/* and it keeps serving writes */
	assert_int_equal(it_write(rpc, &f, 100000, buf + 100000, 200000, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(r.after.size, 300000);
	it_rpc_close(rpc);
}

static void test_restart_sigterm(void **state)
{
	(void)state;
	restart_keeps_state(SIGTERM, "term");
}

static void test_restart_sigkill(void **state)
{
	(void)state;
	restart_keeps_state(SIGKILL, "kill");
}

static void test_restart_twice_sync_api(void **state)
{
	/* a libnfs context mounted before a restart is of no use after it (the
	 * port changed), but a new mount sees everything */
	struct nfs_context *nfs = it_nfs_mount(&srv, NULL, -1, -1, NULL);
	struct nfs_stat_64 st;
	struct nfsfh *fh;

	(void)state;
	assert_non_null(nfs);
	assert_int_equal(nfs_creat(nfs, "/twice", 0600, &fh), 0);
	assert_int_equal(nfs_write(nfs, fh, 5, "twice"), 5);
	assert_int_equal(nfs_fsync(nfs, fh), 0);
	assert_int_equal(nfs_close(nfs, fh), 0);
	it_nfs_close(nfs);
	assert_int_equal(it_server_restart(&srv, SIGTERM), 0);
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	nfs = it_nfs_mount(&srv, NULL, -1, -1, NULL);
	assert_non_null(nfs);
	assert_int_equal(nfs_stat64(nfs, "/twice", &st), 0);
	assert_int_equal(st.nfs_size, 5);
	assert_int_equal(st.nfs_mode & 07777, 0600);
	it_nfs_close(nfs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_sigterm),
		cmocka_unit_test(test_restart_sigkill),
		cmocka_unit_test(test_restart_twice_sync_api),
	};

	it_init(58);
	return cmocka_run_group_tests_name("integration/restart", tests, setup, teardown);
}
