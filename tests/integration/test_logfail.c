/*
 * test_logfail.c -- a persist of the NVRAM log that fails, for real: the log
 * is the msync kind (a file made durable with msync) on an ext4 image on a
 * loop device whose backing file lies in a small tmpfs. The backing pages
 * of the log's record area (not its superblocks) are punched out and the
 * tmpfs is filled: the next msync of a record fails (the loop device's
 * write gets ENOSPC) while its bytes stay in the page cache, and a
 * superblock write (a trim) still succeeds. Root only (mount).
 *
 *  - records whose persist failed are trimmed by the sync that covers them:
 *    a replay (whose scan reads them, from the page cache or from a medium
 *    they reached after all) must not apply them over changes answered
 *    since (presto_sync_unlogged stopped the trim at the durable LSN);
 *  - a flush after such a failure ends (it waited for the head forever);
 *  - calls queued on a connection that a failed persist closed are not run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define EXPORT_RW "127.0.0.1(rw,insecure,no_root_squash)"
#define DATA_LEN (64 * 1024)	/* 16 pages: past the few a full tmpfs still takes */
#define NFILES 64
#define THREADS "4"

static struct it_server srv;
static struct it_res r;
static char lf_dir[128];	/* ours: the tmpfs (back), the image's mount (m) */
static char lf_log[192];
static char lf_bind[256];	/* srv.dir/b bound to m/exp, when made */

/* lf_setup -- the image, mounted at lf_dir/m, with m/exp (mode 777) */
static int lf_setup(void **state)
{
	char cmd[4096];

	(void)state;
	if (geteuid() != 0) {
		print_message("not root: skipped\n");
		skip();
	}
	snprintf(lf_dir, sizeof(lf_dir), "/tmp/presto-logfail-XXXXXX");
	assert_non_null(mkdtemp(lf_dir));
	snprintf(lf_log, sizeof(lf_log), "%s/m/nvram.log", lf_dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; d='%s'; mkdir -p \"$d/back\" \"$d/m\"; "
		 "mount -t tmpfs -o size=40M tmpfs \"$d/back\"; "
		 "truncate -s 32M \"$d/img0\"; "
		 "mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 \"$d/img0\" >/dev/null 2>&1; "
		 "cp --sparse=never \"$d/img0\" \"$d/back/img\"; rm \"$d/img0\"; "
		 "mount -o loop,errors=continue \"$d/back/img\" \"$d/m\"; "
		 "mkdir \"$d/m/exp\"; chmod 777 \"$d/m/exp\"",
		 lf_dir);
	if (system(cmd) != 0)
		fail_msg("could not make the image: %s", cmd);
	it_res_init(&r);
	return 0;
}

static int lf_teardown(void **state)
{
	char cmd[512];

	(void)state;
	it_res_free(&r);
	it_presto_extra[0] = NULL;
	if (lf_bind[0]) {
		umount2(lf_bind, MNT_DETACH);
		lf_bind[0] = '\0';
	}
	/* the outcome is the test's: a server that lost its log may not
	 * stop cleanly */
	if (srv.pid > 0 || srv.dir[0])
		it_server_stop(&srv);
	if (lf_dir[0]) {
		snprintf(cmd, sizeof(cmd), "%s/m", lf_dir);
		umount2(cmd, MNT_DETACH);
		snprintf(cmd, sizeof(cmd), "%s/back", lf_dir);
		umount2(cmd, MNT_DETACH);
		it_rm_rf(lf_dir);
		lf_dir[0] = '\0';
	}
	return 0;
}

/* lf_start -- presto-nfsd with the msync log on the image; extra
 * arguments (NULL-terminated, at most 3) */
static void lf_start(const char *a0, const char *a1)
{
	it_nvram = IT_NVRAM_MSYNC;
	it_nvram_size = "8M";
	it_presto_extra[0] = "--nvram";
	it_presto_extra[1] = lf_log;
	it_presto_extra[2] = "--threads";
	it_presto_extra[3] = THREADS;
	it_presto_extra[4] = a0;
	it_presto_extra[5] = a0 ? a1 : NULL;
	it_presto_extra[6] = NULL;
	assert_int_equal(it_server_start(&srv, EXPORT_RW), 0);
	struct stat st;
	assert_int_equal(stat(lf_log, &st), 0);	/* the log is on the image */
	print_message("server in %s\n", srv.dir);
}

/* lf_break -- from now on a persist of the log's records fails: the backing
 * pages of its record area (every page but the first, the superblocks')
 * punched out, the tmpfs filled.
 *
 * Punch the whole area, not only the pages after the last written one: the
 * loop driver ends a WRITE whose backing write was short (ENOSPC after the
 * first pages) with success, so an msync whose range starts on a page still
 * backed and runs into a punched one returns 0 (and fdatasync too) with the
 * tail never written: an artefact of the rig (a loop device over a file that
 * fills up), not of nvlog. With the whole area punched, every record's
 * writeback starts on a punched page and fails outright (while the tmpfs
 * stays full: a bio that gets some pages and not the rest is short again). */
static void lf_break(void)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "set -e; d='%s'; sync -f \"$d/m\"; "
		 "filefrag -e -b4096 '%s' | "
		 "sed -n 's/^ *[0-9]*: *\\([0-9]*\\)\\.\\. *[0-9]*: *\\([0-9]*\\)\\.\\. *\\([0-9]*\\):.*/\\1 \\2 \\3/p' | "
		 "while read l a b; do "
		 "  if [ \"$l\" -eq 0 ]; then a=$((a + 1)); fi; "
		 "  [ \"$a\" -le \"$b\" ] || continue; "
		 "  fallocate -p -o $((a * 4096)) -l $(((b - a + 1) * 4096)) \"$d/back/img\"; done; "
		 "dd if=/dev/zero of=\"$d/back/fill\" bs=1M count=64 2>/dev/null || true",
		 lf_dir, lf_log);
	if (system(cmd) != 0)
		fail_msg("could not break the log: %s", cmd);
}

static void control(const char *req, char *buf, size_t cap)
{
	if (it_control(&srv, req, buf, cap) < 0)
		fail_msg("control request %s: %s", req, strerror(errno));
}

/* write_f -- DATA_LEN bytes from seed at offset 0 of f (made first when
 * create), FILE_SYNC, on a connection of its own; the status or -1 */
static int write_f(struct it_fh *f, bool create, uint32_t seed)
{
	static unsigned char data[DATA_LEN];
	struct it_fh root;
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);

	assert_non_null(rpc);
	if (create) {
		assert_int_equal(it_root_fh(&srv, &root), 0);
		assert_int_equal(it_create(rpc, &root, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
		*f = r.fh;
	}
	it_fill(data, sizeof(data), seed);
	int st = it_write(rpc, f, 0, data, sizeof(data), FILE_SYNC, &r);
	it_rpc_close(rpc);
	return st;
}

/* f_holds -- whether the export's f holds the data of seed (read on the
 * host) */
static bool f_holds(uint32_t seed)
{
	static unsigned char want[DATA_LEN];
	size_t len = 0;
	char *p = it_read_file(it_path(&srv, "f"), &len);

	it_fill(want, sizeof(want), seed);
	bool same = p && len == DATA_LEN && memcmp(p, want, DATA_LEN) == 0;
	free(p);
	return same;
}

static void test_unpersisted_records_are_trimmed(void **state)
{
	/* B's persist fails; B is answered once the filesystem is synced.
	 * C cannot be appended (the log refuses appends after a failed
	 * persist): it is answered after a sync and a trim
	 * (presto_sync_unlogged). That trim stopped at the durable LSN,
	 * before B, whose bytes are in the page cache: a replay then applied
	 * B over the answered C */
	struct it_fh f;
	char buf[4096];

	(void)state;
	lf_start(NULL, NULL);
	assert_int_equal(write_f(&f, true, 1), NFS3_OK);
	control("{\"cmd\":\"flush\"}\n", buf, sizeof(buf));	/* A destaged */
	lf_break();
	int b = write_f(&f, false, 2);
	print_message("WRITE B after the failed persist: %d\n", b);
	assert_int_equal(write_f(&f, false, 3), NFS3_OK);
	assert_true(f_holds(3));

	/* a crash, then a replay that reads the log as the page cache has it
	 * (a replay in the same boot; or B's bytes reached the disk) */
	it_presto_extra[4] = "--replay=always";
	it_presto_extra[5] = NULL;
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	if (!f_holds(3))
		fail_msg("the answered WRITE C was rolled back by the replay of a record whose "
			 "persist had failed (%s)", f_holds(2) ? "B's data" : "other data");
}

static void test_flush_after_failed_persist_ends(void **state)
{
	/* the destager trimmed to the durable LSN only, below the head that
	 * a flush waits for: the flush (and SIGTERM's) never ended */
	struct it_fh f;
	char buf[4096];

	(void)state;
	lf_start(NULL, NULL);
	assert_int_equal(write_f(&f, true, 1), NFS3_OK);
	lf_break();
	print_message("WRITE B after the failed persist: %d\n", write_f(&f, false, 2));
	control("{\"cmd\":\"flush\"}\n", buf, sizeof(buf));
	if (!strstr(buf, "\"ok\":true"))
		fail_msg("the flush after a failed persist (the filesystem synced) failed: %s", buf);
	if (it_server_stop(&srv) != 0)
		fail_msg("SIGTERM after a failed persist: no clean exit (status %#x)", srv.exit_status);
}

static void test_calls_of_closed_connection_not_run(void **state)
{
	/* NFILES REMOVEs pipelined on one connection; the log's persist
	 * fails and so does the sync of the export (a file of its filesystem
	 * cannot be written back): the first call to find both closes the
	 * connection unanswered. The calls still queued for the workers were
	 * run all the same, each file removed and no reply sent: at most the
	 * calls running at the close (THREADS workers) may be */
	static const struct it_export ex[] = {
		{ "export", EXPORT_RW },
		{ "b", EXPORT_RW },
	};
	char path[512], buf[4096];
	struct it_fh dir;
	static struct it_buf call, reply;

	(void)state;
	lf_start(NULL, NULL);
	snprintf(lf_bind, sizeof(lf_bind), "%s/b", srv.dir);
	snprintf(path, sizeof(path), "%s/m/exp", lf_dir);
	assert_int_equal(mkdir(lf_bind, 0777), 0);
	assert_int_equal(mount(path, lf_bind, NULL, MS_BIND, NULL), 0);
	for (int i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/m/exp/g%d", lf_dir, i);
		assert_int_equal(it_write_file(path, "", 0, 0644), 0);
	}
	assert_int_equal(it_server_reload(&srv, ex, 2), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));
	assert_int_equal(it_raw_mnt(&srv, NULL, 0, lf_bind, &dir), MNT3_OK);

	lf_break();
	/* data that cannot be written back: the next syncfs fails */
	snprintf(path, sizeof(path), "%s/m/exp/dirty", lf_dir);
	static char junk[256 * 1024];
	memset(junk, 'x', sizeof(junk));
	assert_int_equal(it_write_file(path, junk, sizeof(junk), 0644), 0);

	int fd = it_tcp_connect(NULL, 0, srv.nfs_port);
	assert_true(fd >= 0);
	it_buf_reset(&call);
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		size_t at = call.len;

		call.len += 4;		/* the record mark */
		it_put_call(&call, 0x6c660000u + (uint32_t)i, 2, IT_NFS_PROG, 3, 12 /* REMOVE */,
			    IT_AUTH_SYS, 0, 0);
		it_put_fh(&call, &dir);
		snprintf(name, sizeof(name), "g%d", i);
		it_put_string(&call, name);
		uint32_t mark = htonl(0x80000000u | (uint32_t)(call.len - at - 4));
		memcpy(call.b + at, &mark, 4);
	}
	assert_int_equal(it_send_all(fd, call.b, call.len), 0);
	int answered = 0;
	for (;;) {
		struct it_reply rep;
		ssize_t n = it_recv_record(fd, &reply, IT_TIMEOUT_MS);
		if (n <= 0)
			break;
		if (it_parse_reply(&reply, &rep) == 0)
			answered++;
	}
	close(fd);

	/* the calls queued behind the close: a MNT goes through the same
	 * queue, so when it is answered every REMOVE has left it; then the
	 * count must stay put */
	struct it_fh again;
	assert_int_equal(it_raw_mnt(&srv, NULL, 0, lf_bind, &again), MNT3_OK);
	int removed = -1;
	for (int quiet = 0, k = 0; quiet < 15 && k < 200; k++) {
		int now = 0;
		for (int i = 0; i < NFILES; i++) {
			struct stat st;
			snprintf(path, sizeof(path), "%s/m/exp/g%d", lf_dir, i);
			if (lstat(path, &st) != 0)
				now++;
		}
		quiet = now == removed ? quiet + 1 : 0;
		removed = now;
		usleep(100 * 1000);
	}
	print_message("%d REMOVEs: %d answered, %d files removed\n", NFILES, answered, removed);
	if (removed - answered > atoi(THREADS))
		fail_msg("%d REMOVEs applied without a reply, more than the %s calls that can run "
			 "at once: calls of a closed connection were run", removed - answered, THREADS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unpersisted_records_are_trimmed, lf_setup,
						lf_teardown),
		cmocka_unit_test_setup_teardown(test_flush_after_failed_persist_ends, lf_setup,
						lf_teardown),
		cmocka_unit_test_setup_teardown(test_calls_of_closed_connection_not_run, lf_setup,
						lf_teardown),
	};

	it_init(240);
	return cmocka_run_group_tests_name("integration/logfail", tests, NULL, NULL);
}
