/*
 * test_presto.c -- what only presto-nfsd promises, seen by a client (all
 * tests skipped under Ganesha):
 *  - a log much smaller than the data written slows clients down but never
 *    drops work (invariant 5): every write answered, every byte there;
 *  - replaying the live log after a crash (--replay=always, as after a power
 *    cut) reproduces the acknowledged state and never rolls a file back to
 *    an older version (invariant 3: replay is idempotent, in LSN order);
 *  - nopresto exports work with the log present;
 *  - changes run on the event loop thread when nothing makes them wait, and
 *    go to the workers when something would (a nopresto export's fsync).
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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/nvlog.h"
#include "cache/nvlog_format.h"
#include "tests/integration/harness.h"

#define EXPORT_RW "127.0.0.1(rw,insecure,no_root_squash)"

static struct it_server srv;
static struct it_res r;

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool whole_fs_mounted;	/* a filesystem a test mounted under the export */
static int nvram_kind = 1;	/* it_nvram of start_logged and its flags */

static int pending;	/* calls sent and not yet answered */

static int test_teardown(void **state)
{
	(void)state;
	it_res_free(&r);
	pending = 0;	/* calls a failed test left unanswered */
	it_nvram_size = "64M";
	it_presto_extra[0] = NULL;
	nvram_kind = 1;
	if (whole_fs_mounted && umount2(srv.export, MNT_DETACH) == 0)
		whole_fs_mounted = false;
	return srv.pid > 0 || srv.dir[0] ? it_server_stop(&srv) : 0;
}

struct slot {
	int done;
	int status;
};

static void slot_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct slot *s = priv;

	(void)rpc;
	s->done = 1;
	s->status = status == RPC_STATUS_SUCCESS && data ? *(int *)data : -1;
	pending--;
}

static void test_small_log_never_drops(void **state)
{
	/* an 8 MiB log (the smallest presto-nfsd takes), 4 clients writing
	 * 48 MiB in 128 KiB UNSTABLE writes with 16 in flight each: all
	 * answered OK, all data there */
	enum { NC = 4, CHUNK = 128 * 1024, PER = 96 };
	static char data[NC][PER * CHUNK];
	static struct slot s[NC][PER];
	struct rpc_context *c[NC];
	struct it_fh root, f[NC];
	time_t end;

	it_presto_only();
	(void)state;
	it_res_init(&r);
	it_nvram = 1;
	it_nvram_size = "8M";
	assert_int_equal(it_server_start(&srv, EXPORT_RW), 0);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	for (int i = 0; i < NC; i++) {
		char name[16];

		c[i] = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(c[i]);
		snprintf(name, sizeof(name), "w%d", i);
		assert_int_equal(it_create(c[i], &root, name, UNCHECKED, 0644, NULL, &r), NFS3_OK);
		f[i] = r.fh;
		it_fill(data[i], sizeof(data[i]), 1000 + (uint32_t)i);
	}
	end = time(NULL) + 40;
	for (int k = 0; k < PER; k += 16) {
		for (int i = 0; i < NC; i++)
			for (int j = k; j < k + 16 && j < PER; j++) {
				WRITE3args a = it_write3(&f[i], (uint64_t)j * CHUNK,
							 data[i] + (size_t)j * CHUNK, CHUNK,
							 UNSTABLE);

				assert_int_equal(rpc_nfs3_write_async(c[i], slot_cb, &a, &s[i][j]), 0);
				pending++;
			}
		long long left = (long long)(end - time(NULL)) * 1000;
		int rc = it_wait_all(c, NC, &pending, left > 0 ? (int)left : 0);

		if (rc == -1)
			fail_msg("%d writes unanswered after 40 s with a full log", pending);
		if (rc < -1)
			fail_msg("client %d: %s", -2 - rc, rpc_get_error(c[-2 - rc]));
	}
	for (int i = 0; i < NC; i++) {
		char name[16];
		size_t len;
		char *p;

		for (int j = 0; j < PER; j++)
			if (s[i][j].status != NFS3_OK)
				fail_msg("client %d write %d: status %d", i, j, s[i][j].status);
		snprintf(name, sizeof(name), "w%d", i);
		p = it_read_file(it_path(&srv, name), &len);
		assert_non_null(p);
		assert_int_equal(len, sizeof(data[i]));
		assert_memory_equal(p, data[i], len);
		free(p);
		it_rpc_close(c[i]);
	}
}

/* replay_always_no_destage -- presto on; every start replays the whole log
 * (as after a power cut), and nothing is ever trimmed from it */
static void no_destage(void)
{
	it_nvram = nvram_kind;
	it_presto_extra[0] = "--no-destage";		/* keep every record live */
	it_presto_extra[1] = NULL;
}

static void replay_always_no_destage(void)
{
	it_nvram = nvram_kind;
	it_presto_extra[0] = "--replay=always";
	it_presto_extra[1] = "--no-destage";		/* keep every record live */
	it_presto_extra[2] = NULL;
}

/* start_logged -- a presto test's server exporting to clients, with the log
 * and, unless NULL, flags() (no_destage or replay_always_no_destage) */
static void start_logged(const char *clients, void (*flags)(void))
{
	it_presto_only();
	it_res_init(&r);
	it_nvram = nvram_kind;
	if (flags)
		flags();
	assert_int_equal(it_server_start(&srv, clients), 0);
}

static struct rpc_context *connect_create(const char *name, struct it_fh *f);
static struct rpc_context *connect_root(struct it_fh *root);
static void control(const char *req, char *buf, size_t cap);
static bool log_says(const struct it_server *s, const char *what);
static void pending_after_reboot(struct it_server *s);

static void test_held_log_makes_room(void **state)
{
	/* the destager held (--no-destage) ran only at 90% full: on an 8 MiB
	 * log a 1 MiB WRITE needs more than 10% free, so from about 87% every
	 * one was JUKEBOX, for ever. A call waiting for room is a full log:
	 * the held destager runs for it */
	static char big[1 << 20];
	struct it_fh f;
	int jukebox = 0;

	(void)state;
	it_nvram_size = "8M";
	start_logged(EXPORT_RW, no_destage);
	struct rpc_context *rpc = connect_create("big", &f);
	memset(big, 'B', sizeof(big));
	for (int i = 0; i < 16; i++) {
		int st = it_write(rpc, &f, (uint64_t)i * sizeof(big), big, sizeof(big), FILE_SYNC, &r);
		if (st == NFS3ERR_JUKEBOX && ++jukebox < 20) {
			i--;	/* again, as a client does */
			continue;
		}
		if (st != NFS3_OK)
			fail_msg("1 MiB WRITE %d into a held 8 MiB log: %d after %d JUKEBOX", i, st, jukebox);
	}
	it_rpc_close(rpc);
}

static void test_waiting_call_starts_a_destage(void **state)
{
	/* a 1 MiB WRITE claims twice its record: on an 8 MiB log with the
	 * high-water mark at 90% it had to wait from about 72% full, and
	 * nothing destaged before the oldest record was 5 s old: each such
	 * WRITE waited 2 s and was answered JUKEBOX. A call waiting for room
	 * starts a destage. */
	static char big[1 << 20];
	char conf[600];
	struct it_fh f;

	(void)state;
	it_nvram_size = "8M";
	start_logged(EXPORT_RW, NULL);
	snprintf(conf, sizeof(conf), "--config=%s/hw.conf", srv.dir);
	{
		char path[520];
		snprintf(path, sizeof(path), "%s/hw.conf", srv.dir);
		assert_int_equal(it_write_file(path, "high_water_pct = 90\n", 20, 0644), 0);
	}
	it_presto_extra[0] = conf;
	it_presto_extra[1] = NULL;
	assert_int_equal(it_server_restart(&srv, SIGTERM), 0);
	struct rpc_context *rpc = connect_create("big", &f);
	memset(big, 'C', sizeof(big));
	for (int i = 0; i < 24; i++) {
		int st = it_write(rpc, &f, (uint64_t)i * sizeof(big), big, sizeof(big), FILE_SYNC, &r);
		if (st != NFS3_OK)
			fail_msg("1 MiB WRITE %d into an 8 MiB log (high water 90%%): %d", i, st);
	}
	it_rpc_close(rpc);
}

static void test_append_never_waits_for_a_pad(void **state)
{
	/* the claim on the log counted a record but not the pad that may go
	 * before it at the end of the ring: with the head 0.96 MB before the
	 * end and 1.36 MB free, a 1 MiB WRITE ran inline, was applied, then
	 * waited in the append (the event loop with it) for 2 s, failed, was
	 * synced instead, and was rolled back by the replay of the older
	 * records of its bytes */
	static char big[1 << 20], small[65536];
	char buf[4096];
	struct it_fh f;

	(void)state;
	it_nvram_size = "8M";
	start_logged(EXPORT_RW, replay_always_no_destage);
	struct rpc_context *rpc = connect_create("f", &f);
	memset(small, 'A', sizeof(small));
	memset(big, 'B', sizeof(big));
	control("{\"cmd\":\"flush\"}\n", buf, sizeof(buf));
	for (int i = 0; i < 6; i++)
		assert_int_equal(it_write(rpc, &f, 0, small, sizeof(small), FILE_SYNC, &r), NFS3_OK);
	control("{\"cmd\":\"flush\"}\n", buf, sizeof(buf));
	for (int i = 0; i < 107; i++)
		assert_int_equal(it_write(rpc, &f, 0, small, sizeof(small), FILE_SYNC, &r), NFS3_OK);
	long long t0 = now_ms();
	assert_int_equal(it_write(rpc, &f, 0, big, sizeof(big), FILE_SYNC, &r), NFS3_OK);
	long long ms = now_ms() - t0;
	it_rpc_close(rpc);
	if (log_says(&srv, "append to the NVRAM log failed"))
		fail_msg("an append found no room for its pad (the WRITE took %lld ms)", ms);
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);	/* a power cut */
	size_t len;
	char *p = it_read_file(it_path(&srv, "f"), &len);
	assert_non_null(p);
	if (len < 4 || memcmp(p, "BBBB", 4) != 0)
		fail_msg("the acknowledged 1 MiB WRITE was rolled back by the replay");
	free(p);
}

static void test_replay_never_rolls_back(void **state)
{
	/* a file rewritten several times, renamed, truncated, and a name removed
	 * and created again; SIGKILL; replay everything still in the log: the
	 * last acknowledged state, not an older one */
	static char v1[200000], v2[150000], v3[5000];
	struct rpc_context *rpc;
	struct it_fh root, f, g;
	size_t len;
	char *p;

	(void)state;
	it_fill(v1, sizeof(v1), 1);
	it_fill(v2, sizeof(v2), 2);
	it_fill(v3, sizeof(v3), 3);
	start_logged(EXPORT_RW, replay_always_no_destage);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &root, "doc", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_write(rpc, &f, 0, v1, sizeof(v1), UNSTABLE, &r), NFS3_OK);
	assert_int_equal(it_write(rpc, &f, 0, v2, sizeof(v2), UNSTABLE, &r), NFS3_OK);
	{
		SETATTR3args a;

		memset(&a, 0, sizeof(a));
		a.object = it_fh3(&f);
		a.new_attributes.size.set_it = 1;
		a.new_attributes.size.set_size3_u.size = 1000;
		assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3_OK);
	}
	assert_int_equal(it_write(rpc, &f, 1000, v3, sizeof(v3), FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_rename(rpc, &root, "doc", &root, "doc.final", &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &root, "doc", GUARDED, 0600, NULL, &r), NFS3_OK);
	g = r.fh;
	assert_int_equal(it_write(rpc, &g, 0, "new doc", 7, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_mkdir(rpc, &root, "d", 0755, &r), NFS3_OK);
	assert_int_equal(it_rmdir(rpc, &root, "d", &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &root, "tmp", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_remove(rpc, &root, "tmp", &r), NFS3_OK);
	it_rpc_close(rpc);

	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);

	p = it_read_file(it_path(&srv, "doc.final"), &len);
	assert_non_null(p);
	assert_int_equal(len, 1000 + sizeof(v3));
	assert_memory_equal(p, v2, 1000);
	assert_memory_equal(p + 1000, v3, sizeof(v3));
	free(p);
	p = it_read_file(it_path(&srv, "doc"), &len);
	assert_non_null(p);
	assert_int_equal(len, 7);
	assert_memory_equal(p, "new doc", 7);
	free(p);
	assert_int_not_equal(access(it_path(&srv, "d"), F_OK), 0);
	assert_int_not_equal(access(it_path(&srv, "tmp"), F_OK), 0);
	/* the old handles name the same objects */
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(r.attr.size, 1000 + sizeof(v3));
	assert_int_equal(it_getattr(rpc, &g, &r), NFS3_OK);
	assert_int_equal(r.attr.size, 7);
	assert_int_equal(r.attr.mode & 07777, 0600);
	it_rpc_close(rpc);
	/* and again: a second replay of the same log changes nothing */
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	p = it_read_file(it_path(&srv, "doc.final"), &len);
	assert_non_null(p);
	assert_int_equal(len, 1000 + sizeof(v3));
	assert_memory_equal(p + 1000, v3, sizeof(v3));
	free(p);
}

/* the sizes around the record encoder's cut (data of XIOV_MIN = 512 bytes
 * and more goes into the log from the request, shorter data through the
 * encoding buffer) and beyond a page */
static const size_t lost_sizes[] = { 1, 511, 512, 513, 4096 + 3, 65536 };
#define LOST_FILES (sizeof(lost_sizes) / sizeof(lost_sizes[0]))

static void lose_file_data(struct it_server *s)
{
	for (size_t i = 0; i < LOST_FILES; i++) {
		char name[32];

		snprintf(name, sizeof(name), "lost.%zu", i);
		assert_int_equal(truncate(it_path(s, name), 0), 0);
	}
	/* the symlink and the directory's applied stamp, lost together (they
	 * share a journal: a power cut keeps both or neither) */
	assert_int_equal(unlink(it_path(s, "lost.link")), 0);
	assert_int_equal(removexattr(it_path(s, "."), "trusted.presto.lsn"), 0);
}

static void test_replay_restores_lost_writes(void **state)
{
	/* WRITEs of several sizes, SIGKILL, the files' data lost behind the
	 * server's back (as a power cut loses the page cache), replay: every
	 * byte comes back from the log's records */
	static char data[LOST_FILES][65536];
	static char target[514];
	struct rpc_context *rpc;
	struct it_fh root;
	size_t len;
	char *p;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	for (size_t i = 0; i < LOST_FILES; i++) {
		char name[32];

		snprintf(name, sizeof(name), "lost.%zu", i);
		it_fill(data[i], lost_sizes[i], (uint32_t)(100 + i));
		assert_int_equal(it_create(rpc, &root, name, UNCHECKED, 0644, NULL, &r), NFS3_OK);
		struct it_fh f = r.fh;
		assert_int_equal(it_write(rpc, &f, 0, data[i], lost_sizes[i], FILE_SYNC, &r),
				 NFS3_OK);
	}
	/* a symlink target of 513 bytes: a run of the encoder followed by
	 * more fields (the created object's attributes) */
	for (size_t i = 0; i + 1 < sizeof(target); i++)
		target[i] = (char)('a' + i % 26);
	target[sizeof(target) - 1] = '\0';
	assert_int_equal(it_symlink(rpc, &root, "lost.link", target, &r), NFS3_OK);
	it_rpc_close(rpc);

	assert_int_equal(it_server_restart_after(&srv, SIGKILL, lose_file_data), 0);
	for (size_t i = 0; i < LOST_FILES; i++) {
		char name[32];

		snprintf(name, sizeof(name), "lost.%zu", i);
		p = it_read_file(it_path(&srv, name), &len);
		assert_non_null(p);
		if (len != lost_sizes[i])
			fail_msg("%s: %zu bytes after replay, not the %zu written", name, len,
				 lost_sizes[i]);
		if (memcmp(p, data[i], len) != 0)
			fail_msg("%s: its %zu bytes differ from those written", name, len);
		free(p);
	}
	char back[1024];
	ssize_t n = readlink(it_path(&srv, "lost.link"), back, sizeof(back));
	if (n != (ssize_t)strlen(target) || memcmp(back, target, (size_t)n) != 0)
		fail_msg("lost.link after replay: %zd bytes of target, not the %zu created", n,
			 strlen(target));
}

/* the creations refused an attribute, and what was made in them, lost with
 * the root's stamp (they share its journal) as by a power cut */
static void lose_refused(struct it_server *s)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", it_path(s, "nogid"), it_path(s, "huge"));
	assert_int_equal(system(cmd), 0);
	assert_int_equal(removexattr(it_path(s, "."), "trusted.presto.lsn"), 0);
}

/* expect_file -- the file name of the export holds exactly text */
static void expect_file(const char *name, const char *text)
{
	size_t len;
	char *p = it_read_file(it_path(&srv, name), &len);

	if (!p)
		fail_msg("%s is missing", name);
	if (len != strlen(text) || memcmp(p, text, len) != 0)
		fail_msg("%s: %zu bytes, not \"%s\"", name, len, text);
	free(p);
}

static void test_creation_refused_an_attribute_is_logged(void **state)
{
	/* CREATE with a size past the limit answers FBIG, but the file exists,
	 * and a client may look it up and use it: what it is told is done
	 * there must survive a power cut, so the creation is logged all the
	 * same. MKDIR with a group the caller is not in answered PERM the same
	 * way; the group is ignored now (as knfsd ignores the owner and group
	 * of a creation by anyone but root): OK, the caller's group, logged */
	struct it_fh root, dir, f, huge;
	MKDIR3args m;
	CREATE3args c;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	assert_int_equal(chmod(srv.export, 0777), 0);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	rpc_set_auth(rpc, libnfs_authunix_create("it", 1000, 1000, 0, NULL));
	memset(&m, 0, sizeof(m));
	m.where.dir = it_fh3(&root);
	m.where.name = "nogid";
	m.attributes.mode.set_it = TRUE;
	m.attributes.mode.set_mode3_u.mode = 0755;
	m.attributes.gid.set_it = TRUE;
	m.attributes.gid.set_gid3_u.gid = 4242;
	assert_int_equal(it_nfs3(rpc, NFS3_MKDIR, &m, &r), NFS3_OK);
	assert_true(r.has_attr);
	assert_int_equal(r.attr.gid, 1000);
	memset(&c, 0, sizeof(c));
	c.where.dir = it_fh3(&root);
	c.where.name = "huge";
	c.how.mode = GUARDED;
	c.how.createhow3_u.obj_attributes.size.set_it = TRUE;
	c.how.createhow3_u.obj_attributes.size.set_size3_u.size = 1ull << 62;
	assert_int_equal(it_nfs3(rpc, NFS3_CREATE, &c, &r), NFS3ERR_FBIG);

	assert_int_equal(it_lookup(rpc, &root, "nogid", &r), NFS3_OK);
	dir = r.fh;
	assert_int_equal(it_create(rpc, &dir, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_write(rpc, &f, 0, "in nogid", 8, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_lookup(rpc, &root, "huge", &r), NFS3_OK);
	huge = r.fh;
	assert_int_equal(it_write(rpc, &huge, 0, "in huge", 7, FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);

	assert_int_equal(it_server_restart_after(&srv, SIGKILL, lose_refused), 0);
	struct stat st;
	assert_int_equal(stat(it_path(&srv, "nogid"), &st), 0);
	if (!S_ISDIR(st.st_mode) || st.st_uid != 1000 || st.st_gid != 1000 ||
	    (st.st_mode & 07777) != 0755)
		fail_msg("nogid after replay: mode %o uid %u gid %u, not a directory 0755 of "
			 "uid and gid 1000", st.st_mode, st.st_uid, st.st_gid);
	expect_file("nogid/f", "in nogid");
	expect_file("huge", "in huge");
	/* the handles the client held still work */
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_getattr(rpc, &f, &r), NFS3_OK);
	assert_int_equal(it_getattr(rpc, &huge, &r), NFS3_OK);
	it_rpc_close(rpc);
}

/* ---- wcc data of calls that waited for their file's stripe ---- */

struct wcc_slot {
	int done;
	int status;
	int has_before, has_after;
	wcc_attr before;
	fattr3 after;
};

static void wcc_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct wcc_slot *s = priv;
	WRITE3res *res = data;

	(void)rpc;
	s->done = 1;
	pending--;
	if (status != RPC_STATUS_SUCCESS || !res) {
		s->status = -1;
		return;
	}
	s->status = res->status;
	wcc_data *w = res->status == NFS3_OK ? &res->WRITE3res_u.resok.file_wcc
					     : &res->WRITE3res_u.resfail.file_wcc;
	s->has_before = w->before.attributes_follow;
	if (s->has_before)
		s->before = w->before.pre_op_attr_u.attributes;
	s->has_after = w->after.attributes_follow;
	if (s->has_after)
		s->after = w->after.post_op_attr_u.attributes;
}

/* leased_file -- an empty file "leased" in the export, looked up on rpc
 * into *f, and a read lease on it held by this process (a local reader);
 * returns the lease's fd (closing it gives the lease back) */
static int leased_file(struct rpc_context *rpc, const struct it_fh *root, struct it_fh *f)
{
	const char *path = it_path(&srv, "leased");
	int lfd;

	assert_int_equal(it_write_file(path, "", 0, 0644), 0);
	assert_int_equal(it_lookup(rpc, root, "leased", &r), NFS3_OK);
	*f = r.fh;
	lfd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(lfd >= 0);
	if (fcntl(lfd, F_SETLEASE, F_RDLCK) < 0)
		fail_msg("F_SETLEASE: %s", strerror(errno));
	return lfd;
}

static void queue_write(struct rpc_context *rpc, const struct it_fh *f, uint64_t off, char *data,
			uint32_t len, struct wcc_slot *s)
{
	WRITE3args a = it_write3(f, off, data, len, FILE_SYNC);

	memset(s, 0, sizeof(*s));
	assert_int_equal(rpc_nfs3_write_async(rpc, wcc_cb, &a, s), 0);
	pending++;
}

static void test_write_wcc_taken_under_the_stripe(void **state)
{
	/* WRITE A holds its file's stripe while its open for writing waits
	 * for a local lease to be given back; WRITE B of the same file, run
	 * by another worker, waits for the stripe meanwhile. B's pre-op
	 * attributes must be the ones A left (10 bytes), not the ones B saw
	 * before it waited (empty): a client that cached the empty file would
	 * take A's change for B's own and keep its stale cache. With the log
	 * (a nopresto export, so that both calls go to workers) and without */
	static char a_data[10] = "AAAAAAAAAA", b_data[10] = "BBBBBBBBBB";
	static const char *const clients[2] = {
		EXPORT_RW, "127.0.0.1(rw,insecure,no_root_squash,nopresto)"
	};
	struct wcc_slot wa, wb;
	struct it_fh root, f;

	(void)state;
	it_presto_only();
	signal(SIGIO, SIG_IGN);	/* the lease break's signal */
	for (int with_log = 1; with_log >= 0; with_log--) {
		it_res_init(&r);
		it_nvram = with_log ? nvram_kind : 0;
		assert_int_equal(it_server_start(&srv, clients[with_log]), 0);
		struct rpc_context *rpc = connect_root(&root);
		int lfd = leased_file(rpc, &root, &f);
		queue_write(rpc, &f, 0, a_data, sizeof(a_data), &wa);
		assert_int_equal(it_wait(rpc, &wa.done, 300), -1);	/* A waits for the lease */
		queue_write(rpc, &f, sizeof(a_data), b_data, sizeof(b_data), &wb);
		assert_int_equal(it_wait(rpc, &wb.done, 300), -1);	/* B for the stripe */
		assert_int_equal(fcntl(lfd, F_SETLEASE, F_UNLCK), 0);
		close(lfd);
		assert_int_equal(it_wait_all(&rpc, 1, &pending, IT_TIMEOUT_MS), 0);
		assert_int_equal(wa.status, NFS3_OK);
		assert_int_equal(wb.status, NFS3_OK);
		assert_true(wa.has_after);
		assert_true(wb.has_after);
		if (wb.has_before &&
		    (wb.before.size != wa.after.size ||
		     wb.before.mtime.seconds != wa.after.mtime.seconds ||
		     wb.before.mtime.nseconds != wa.after.mtime.nseconds ||
		     wb.before.ctime.seconds != wa.after.ctime.seconds ||
		     wb.before.ctime.nseconds != wa.after.ctime.nseconds))
			fail_msg("%s: the second WRITE's pre-op attributes (size %llu) are not "
				 "the ones the first left (size %llu)",
				 with_log ? "with the log" : "without a log",
				 (unsigned long long)wb.before.size,
				 (unsigned long long)wa.after.size);
		assert_int_equal(wb.after.size, 20);
		it_rpc_close(rpc);
		assert_int_equal(it_server_stop(&srv), 0);
	}
}

/* ---- CREATE UNCHECKED of a name another filesystem is mounted on ---- */

static char mounted_file[600];

static int mount_teardown(void **state)
{
	if (mounted_file[0] && umount2(mounted_file, MNT_DETACH) == 0)
		mounted_file[0] = '\0';
	return test_teardown(state);
}

static void test_create_cannot_truncate_a_mount(void **state)
{
	/* a file of the export's directory with another file bind-mounted on
	 * its name (a mount: no handle of the export reaches it, LOOKUP says
	 * ACCES): CREATE UNCHECKED with a size of 0 of that name truncated the
	 * mounted file, then found it had no handle to give, and answered OK
	 * with none, logging nothing. The handle comes first now: ACCES, and
	 * nothing changed */
	char outside[600];
	CREATE3args c;
	struct it_fh root;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	snprintf(outside, sizeof(outside), "%s/outside", srv.dir);
	assert_int_equal(it_write_file(outside, "intact", 6, 0644), 0);
	assert_int_equal(it_write_file(it_path(&srv, "victim"), "", 0, 0644), 0);
	snprintf(mounted_file, sizeof(mounted_file), "%s", it_path(&srv, "victim"));
	if (mount(outside, mounted_file, NULL, MS_BIND, NULL) < 0) {
		mounted_file[0] = '\0';
		fail_msg("bind mount: %s", strerror(errno));
	}
	struct rpc_context *rpc = connect_root(&root);
	assert_int_equal(it_lookup(rpc, &root, "victim", &r), NFS3ERR_ACCES);
	memset(&c, 0, sizeof(c));
	c.where.dir = it_fh3(&root);
	c.where.name = "victim";
	c.how.mode = UNCHECKED;
	c.how.createhow3_u.obj_attributes.size.set_it = TRUE;
	c.how.createhow3_u.obj_attributes.size.set_size3_u.size = 0;
	int st = it_nfs3(rpc, NFS3_CREATE, &c, &r);
	size_t len;
	char *p = it_read_file(outside, &len);
	assert_non_null(p);
	bool intact = len == 6 && memcmp(p, "intact", 6) == 0;
	free(p);
	if (!intact || st != NFS3ERR_ACCES)
		fail_msg("CREATE UNCHECKED of a mounted name: status %d (%s a handle), the "
			 "mounted file %s", st, r.has_fh ? "with" : "without",
			 intact ? "intact" : "truncated");
	it_rpc_close(rpc);
}

#define MARK_XATTR "trusted.presto.export"
static uint8_t saved_mark[16];
static char kept_data[5000];

/* file_says -- file path holds text what */
static bool file_says(const char *path, const char *what)
{
	size_t len;
	char *p = it_read_file(path, &len);
	bool yes = p && strstr(p, what);
	free(p);
	return yes;
}

static bool log_says(const struct it_server *s, const char *what)
{
	return file_says(s->log, what);
}

static bool state_has(const struct it_server *s, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/state/%s", s->dir, name);
	return access(path, F_OK) == 0;
}

/* another filesystem at the export's place (say its disk failed to mount):
 * the root has another mark, and the page cache's data is gone */
static void swap_mark(struct it_server *s)
{
	uint8_t other[16];
	assert_int_equal(getxattr(it_path(s, "."), MARK_XATTR, saved_mark, sizeof(saved_mark)),
			 sizeof(saved_mark));
	memset(other, 0x5a, sizeof(other));
	assert_int_equal(setxattr(it_path(s, "."), MARK_XATTR, other, sizeof(other), 0), 0);
	assert_int_equal(truncate(it_path(s, "kept"), 0), 0);
}

static void restore_mark(struct it_server *s)
{
	assert_int_equal(setxattr(it_path(s, "."), MARK_XATTR, saved_mark, sizeof(saved_mark), 0), 0);
}

static void lose_forced(struct it_server *s)
{
	uint8_t other[16];
	memset(other, 0xa5, sizeof(other));
	assert_int_equal(setxattr(it_path(s, "."), MARK_XATTR, other, sizeof(other), 0), 0);
	assert_int_equal(truncate(it_path(s, "forced"), 0), 0);
}

/* expect_kept -- name holds kept_data after a replay, which left no
 * replay-pending mark; why: what went wrong if not */
static void expect_kept(const char *name, const char *why)
{
	size_t len;
	char *p = it_read_file(it_path(&srv, name), &len);

	assert_non_null(p);
	if (len != sizeof(kept_data) || memcmp(p, kept_data, len) != 0)
		fail_msg("%s: %zu bytes, not the %zu written: %s", name, len, sizeof(kept_data), why);
	free(p);
	assert_false(state_has(&srv, "replay-pending"));
}

/* write_kept -- fill kept_data from seed, then CREATE name, WRITE kept_data
 * and (mode >= 0) SETATTR its mode, through the server */
static void write_kept(const char *name, uint32_t seed, int mode)
{
	struct it_fh root;
	struct rpc_context *rpc;

	it_fill(kept_data, sizeof(kept_data), seed);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &root, name, UNCHECKED, 0644, NULL, &r), NFS3_OK);
	struct it_fh f = r.fh;
	assert_int_equal(it_write(rpc, &f, 0, kept_data, sizeof(kept_data), FILE_SYNC, &r),
			 NFS3_OK);
	if (mode >= 0)
		assert_int_equal(it_setattr_mode(rpc, &f, mode, &r), NFS3_OK);
	it_rpc_close(rpc);
}

/* umount_teardown -- a test's own mount at mnt (if any) goes, then
 * test_teardown */
static int umount_teardown(char *mnt, void **state)
{
	if (mnt[0]) {
		umount2(mnt, MNT_DETACH);
		mnt[0] = '\0';
	}
	return test_teardown(state);
}

/* second_fs: the directory "tb" beside the export, a tmpfs exported too
 * (test_stamps_after_a_failed_record) */
static char second_fs[600];

static int second_fs_teardown(void **state)
{
	return umount_teardown(second_fs, state);
}

/* fail_first_fs -- the export's records cannot be replayed (swap_mark),
 * and tb lost its file "later" and its root's applied stamp together, as a
 * power cut loses them (one journal) */
static void fail_first_fs(struct it_server *s)
{
	char p[700];

	swap_mark(s);
	snprintf(p, sizeof(p), "%s/later", second_fs);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(removexattr(second_fs, "trusted.presto.lsn"), 0);
}

static void test_stamps_after_a_failed_record(void **state)
{
	/* a record that cannot be replayed stops the replay's applied stamps
	 * on its own filesystem only: a later record of an export on another
	 * filesystem is stamped as it is applied, so that the retry, once the
	 * operator has mounted the right filesystem, skips it by its stamp.
	 * (Every stamp stopped before: the retry had the rules alone, whose
	 * known gap could then undo an acknowledged change elsewhere.) */
	const struct it_export one = { "export", "127.0.0.1(rw,insecure,no_root_squash)" };
	const struct it_export two[] = {
		one, { "tb", "127.0.0.1(rw,insecure,no_root_squash)" },
	};
	struct rpc_context *m, *rpc;
	struct it_fh tb;
	char cmd[700];
	int mst = -1;

	(void)state;
	it_presto_only();
	it_res_init(&r);
	replay_always_no_destage();
	assert_int_equal(it_server_startv(&srv, &one, 1, 0), 0);
	snprintf(second_fs, sizeof(second_fs), "%s/tb", srv.dir);
	assert_int_equal(mkdir(second_fs, 0777), 0);
	snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=4m presto-it %s", second_fs);
	if (system(cmd) != 0) {
		second_fs[0] = '\0';
		fail_msg("cannot mount a tmpfs: %s", cmd);
	}
	assert_int_equal(it_server_reload(&srv, two, 2), 0);
	m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	for (int i = 0; i < 50 && (mst = it_mnt(m, second_fs, &tb)) != MNT3_OK; i++)
		usleep(100 * 1000);	/* the reload runs beside the calls */
	it_rpc_close(m);
	assert_int_equal(mst, MNT3_OK);
	/* a record of the export, then one of tb */
	write_kept("kept", 93, -1);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &tb, "later", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	it_rpc_close(rpc);

	assert_int_equal(it_server_restart_after(&srv, SIGKILL, fail_first_fs), -1);
	if (!log_says(&srv, "could not be replayed"))
		fail_msg("presto-nfsd did not refuse to start");
	char st[64];
	snprintf(cmd, sizeof(cmd), "%s/later", second_fs);
	assert_int_equal(access(cmd, F_OK), 0);	/* replayed */
	if (getxattr(second_fs, "trusted.presto.lsn", st, sizeof(st)) <= 0)
		fail_msg("tb's CREATE, after the export's failed record, was applied unstamped");
	/* the right filesystem back: the retry replays all */
	it_server_restart_after(&srv, SIGKILL, restore_mark);	/* -1: the last one died */
	assert_true(it_server_running(&srv));
	expect_kept("kept", "the retry did not restore it");
	snprintf(cmd, sizeof(cmd), "%s/later", second_fs);
	assert_int_equal(access(cmd, F_OK), 0);
}

/* lose_marks_and_mount -- STATE_DIR/export-marks lost, and the export's
 * root a directory without a mark (as an unmounted filesystem leaves its
 * mount point), the file's data with it */
static void lose_marks_and_mount(struct it_server *s)
{
	char p[700];

	snprintf(p, sizeof(p), "%s/state/export-marks", s->dir);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(getxattr(it_path(s, "."), MARK_XATTR, saved_mark, sizeof(saved_mark)),
			 sizeof(saved_mark));
	assert_int_equal(removexattr(it_path(s, "."), MARK_XATTR), 0);
	assert_int_equal(truncate(it_path(s, "kept"), 0), 0);
}

/* refused_then_replayed -- "kept" written (its data from seed) with every
 * record kept; a restart after hook, which loses the file's data and makes
 * the export's filesystem look like another, refuses to start and says
 * why, replaying nothing there; the next, after restore, replays it */
static void refused_then_replayed(uint32_t seed, void (*hook)(struct it_server *), const char *says)
{
	size_t len;
	char *p;

	start_logged(EXPORT_RW, replay_always_no_destage);
	write_kept("kept", seed, -1);
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, hook), -1);
	assert_false(it_server_running(&srv));
	if (!log_says(&srv, says))
		fail_msg("presto-nfsd did not say why it refused to start");
	assert_true(state_has(&srv, "replay-pending"));
	p = it_read_file(it_path(&srv, "kept"), &len);
	assert_non_null(p);
	assert_int_equal(len, 0);	/* nothing went onto the wrong filesystem */
	free(p);
	it_server_restart_after(&srv, SIGKILL, restore_mark);	/* -1: the last one died */
	assert_true(it_server_running(&srv));
	expect_kept("kept", "the replay on the right filesystem did not restore it");
}

static void test_replay_without_remembered_marks(void **state)
{
	/* with no mark remembered (the state file lost), an export whose root
	 * carries no mark of this appliance is not taken for the filesystem
	 * the records were written for: the start fails and says why (every
	 * record there used to read as "removed later", to be trimmed); with
	 * the filesystem back (its root marked) the replay restores the data */
	(void)state;
	refused_then_replayed(95, lose_marks_and_mount, "no mark remembered for it");
}

static void test_replay_refuses_other_filesystem(void **state)
{
	/* records for an export whose root is not the one they were written
	 * for (its mark differs): the server keeps the log and does not start;
	 * with the right filesystem back it replays them; --replay=force
	 * discards what cannot be replayed */
	size_t len;
	char *p;

	(void)state;
	refused_then_replayed(77, swap_mark, "could not be replayed");

	write_kept("forced", 77, -1);	/* the same data as "kept" */
	it_presto_extra[0] = "--replay=force";
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, lose_forced), 0);
	p = it_read_file(it_path(&srv, "forced"), &len);
	assert_non_null(p);
	assert_int_equal(len, 0);	/* discarded, as asked */
	free(p);
	assert_false(state_has(&srv, "replay-pending"));
}

/* second_server -- run another presto-nfsd on srv's log and exports with
 * state directory STATE (under srv.dir); its exit status, its stderr in out */
static int second_server(const char *state, char *out, size_t outlen)
{
	char cmd[2048], errf[256];
	const char *bin = getenv("PRESTO_BIN");

	snprintf(errf, sizeof(errf), "%s/second.err", srv.dir);
	snprintf(cmd, sizeof(cmd),
		 "PMEM_IS_PMEM_FORCE=1 timeout 10 '%s/presto-nfsd' --exports '%s' --state-dir '%s/%s' "
		 "--bind 127.0.0.1 --nfs-port 0 --mount-port 0 --no-rpcbind --foreground "
		 "--nvram '%s/nvram.log' --replay=always >/dev/null 2>'%s'",
		 bin && *bin ? bin : "bin", srv.exports_file, srv.dir, state, srv.dir, errf);
	int st = system(cmd);
	size_t len;
	char *p = it_read_file(errf, &len);
	snprintf(out, outlen, "%s", p ? p : "");
	free(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_state_files_are_private(void **state)
{
	/* the server runs with umask 0 (clients' modes are taken exactly): its
	 * own files must say their modes. export-marks was 0666 */
	char dir[256];
	int n = 0;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	write_kept("private", 5, -1);
	snprintf(dir, sizeof(dir), "%s/state", srv.dir);
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		assert_int_equal(fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW), 0);
		unsigned allowed = strcmp(de->d_name, "ports") == 0 ? 0644 : 0600;
		if ((st.st_mode & 0777 & ~allowed) != 0)
			fail_msg("state file %s has mode %o", de->d_name, st.st_mode & 0777);
		n++;
	}
	closedir(d);
	assert_true(n >= 4);	/* fh.key, lock, export-marks, ports, control.sock */
}

static void test_second_server_is_refused(void **state)
{
	/* a second presto-nfsd on a running one's state directory or NVRAM
	 * log is refused before it touches the log (a new boot epoch there
	 * would make the running server's records fail the epoch rule), and
	 * the running one's records still replay */
	char err[4096], log_path[256];
	uint8_t sb_before[NVLOG_AREA_OFF], sb_after[NVLOG_AREA_OFF];

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	write_kept("first", 71, -1);
	snprintf(log_path, sizeof(log_path), "%s/nvram.log", srv.dir);
	int fd = open(log_path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, sb_before, sizeof(sb_before), 0), sizeof(sb_before));

	assert_int_equal(second_server("state", err, sizeof(err)), 1);
	if (!strstr(err, "is in use by another presto-nfsd (pid "))
		fail_msg("same state directory: %s", err);
	assert_int_equal(second_server("state2", err, sizeof(err)), 1);
	if (!strstr(err, "nvram.log is in use by another process"))
		fail_msg("same log, another state directory: %s", err);
	assert_int_equal(pread(fd, sb_after, sizeof(sb_after), 0), sizeof(sb_after));
	close(fd);
	assert_memory_equal(sb_before, sb_after, sizeof(sb_before));	/* untouched */

	assert_true(it_server_alive(&srv));
	write_kept("second", 72, -1);
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	expect_kept("second", "the records after the refused starts were not replayed");
	it_fill(kept_data, sizeof(kept_data), 71);
	expect_kept("first", "the records before the refused starts were not replayed");
}

static void control(const char *req, char *buf, size_t cap);
static char dropped_mnt[160];

static int drop_teardown(void **state)
{
	return umount_teardown(dropped_mnt, state);
}

/* both_exports -- the export and "b", both read-write */
static const struct it_export both_exports[] = {
	{ "export", EXPORT_RW },
	{ "b", EXPORT_RW },
};

/* add_image_export -- "b", an ext4 image loop-mounted with mount options
 * opts under srv.dir (dropped_mnt, unmounted by drop_teardown), exported
 * as ex (the export and b) and reloaded in, the reload done when this
 * returns */
static void add_image_export(char *img, size_t imglen, const char *opts,
			     const struct it_export *ex)
{
	char cmd[2048], buf[4096];

	snprintf(img, imglen, "%s/b.img", srv.dir);
	snprintf(dropped_mnt, sizeof(dropped_mnt), "%s/b", srv.dir);
	snprintf(cmd, sizeof(cmd), "truncate -s 32M '%s' && mkfs.ext4 -q -F '%s' >/dev/null 2>&1 && "
		 "mkdir -p '%s' && mount -o %s '%s' '%s' && chmod 777 '%s'",
		 img, img, dropped_mnt, opts, img, dropped_mnt, dropped_mnt);
	if (system(cmd) != 0) {
		dropped_mnt[0] = '\0';
		fail_msg("could not mount an ext4 image: %s", cmd);
	}
	assert_int_equal(it_server_reload(&srv, ex, 2), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));	/* done when it answers */
}

/* write_kept_in_b -- kept_data (from seed) written FILE_SYNC to a new
 * file f of the image export b, through the server */
static void write_kept_in_b(uint32_t seed)
{
	struct it_fh broot;
	struct rpc_context *m = it_rpc_connect(&srv, MOUNT_PROG, 3);

	assert_non_null(m);
	assert_int_equal(it_mnt(m, dropped_mnt, &broot), MNT3_OK);
	it_rpc_close(m);
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	it_fill(kept_data, sizeof(kept_data), seed);
	assert_int_equal(it_create(rpc, &broot, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	struct it_fh f = r.fh;
	assert_int_equal(it_write(rpc, &f, 0, kept_data, sizeof(kept_data), FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);
}

/* image_holds_kept -- whether /f of the ext4 image img holds kept_data:
 * what the image holds (debugfs reads it), not the page cache */
static bool image_holds_kept(const char *img)
{
	char cmd[2048], sum[64] = "", want[64] = "";

	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /f' '%s' 2>/dev/null | md5sum | cut -c1-32", img);
	FILE *pf = popen(cmd, "r");
	assert_non_null(pf);
	assert_non_null(fgets(sum, sizeof(sum), pf));
	pclose(pf);
	snprintf(cmd, sizeof(cmd), "%s/kept.ref", srv.dir);
	assert_int_equal(it_write_file(cmd, kept_data, sizeof(kept_data), 0644), 0);
	char sh[2200];
	snprintf(sh, sizeof(sh), "md5sum < '%s' | cut -c1-32", cmd);
	pf = popen(sh, "r");
	assert_non_null(pf);
	assert_non_null(fgets(want, sizeof(want), pf));
	pclose(pf);
	return strcmp(sum, want) == 0;
}

static void test_dropped_export_is_synced_before_trim(void **state)
{
	/* a reload drops an export whose records are still in the log, their
	 * data only in the page cache: the destager must still sync its
	 * filesystem before it trims them. The export is an ext4 image
	 * mounted with a 60 s journal commit, so that nothing but a sync puts
	 * the data in the image (read with debugfs) within the test */
	char img[160], buf[4096];

	(void)state;
	start_logged(EXPORT_RW, NULL);
	add_image_export(img, sizeof(img), "loop,commit=60", both_exports);

	write_kept_in_b(91);

	/* drop b, then destage everything: the log is trimmed */
	assert_int_equal(it_server_reload(&srv, both_exports, 1), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));
	control("{\"cmd\":\"flush\"}\n", buf, sizeof(buf));
	if (!strstr(buf, "\"ok\":true"))
		fail_msg("flush: %s", buf);

	if (!image_holds_kept(img))
		fail_msg("the log was trimmed but the dropped export's data is not on its disk");
}

/* A filesystem whose writeback fails: b, an ext4 image on a loop device
 * whose backing file lies in a small tmpfs ("back"), every block mkfs used
 * allocated there and the free ones punched out; filling the tmpfs then
 * makes every write to a new data block fail (ENOSPC) while the journal,
 * allocated, still commits (mounted errors=continue). */
static char wb_back[200];

static int wb_teardown(void **state)
{
	if (dropped_mnt[0]) {
		umount2(dropped_mnt, MNT_DETACH);
		dropped_mnt[0] = '\0';
	}
	if (wb_back[0]) {
		umount2(wb_back, MNT_DETACH);
		wb_back[0] = '\0';
	}
	return test_teardown(state);
}

static void add_failing_export(char *img, size_t imglen)
{
	char cmd[4096], buf[4096];

	snprintf(wb_back, sizeof(wb_back), "%s/back", srv.dir);
	snprintf(img, imglen, "%s/img", wb_back);
	snprintf(dropped_mnt, sizeof(dropped_mnt), "%s/b", srv.dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; d='%s'; mkdir -p \"$d/back\" \"$d/b\"; "
		 "mount -t tmpfs -o size=40M tmpfs \"$d/back\"; "
		 "truncate -s 32M \"$d/img0\"; "
		 "mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 \"$d/img0\" >/dev/null 2>&1; "
		 "cp --sparse=never \"$d/img0\" \"$d/back/img\"; "
		 "bs=$(dumpe2fs -h \"$d/img0\" 2>/dev/null | sed -n 's/^Block size: *//p'); "
		 "dumpe2fs \"$d/img0\" 2>/dev/null | sed -n 's/^  Free blocks: //p' | tr ',' '\\n' | "
		 "while read rg; do a=${rg%%-*}; b=${rg#*-}; [ -n \"$a\" ] || continue; "
		 "fallocate -p -o $((a * bs)) -l $(((b - a + 1) * bs)) \"$d/back/img\"; done; "
		 "rm \"$d/img0\"; mount -o loop,errors=continue \"$d/back/img\" \"$d/b\"; "
		 "chmod 777 \"$d/b\"; sync",
		 srv.dir);
	if (system(cmd) != 0) {
		dropped_mnt[0] = '\0';
		fail_msg("could not make the failing image: %s", cmd);
	}
	assert_int_equal(it_server_reload(&srv, both_exports, 2), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));	/* done when it answers */
}

/* the operator's repair: room in the tmpfs, the filesystem (which the
 * journal's failed writes turned read-only) checked and mounted again */
static void repair_failing_export(struct it_server *s)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd),
		 "d='%s'; rm \"$d/back/fill\" && umount \"$d/b\" && "
		 "{ e2fsck -fy \"$d/back/img\" >/dev/null 2>&1; [ $? -le 1 ]; } && "
		 "mount -o loop \"$d/back/img\" \"$d/b\"", s->dir);
	if (system(cmd) != 0)
		fail_msg("could not repair the image: %s", cmd);
}

static void test_writeback_error_keeps_the_log(void **state)
{
	/* syncfs reports a writeback error once per descriptor: the
	 * destager's retry succeeded and trimmed records whose data was on no
	 * disk. Now nothing is trimmed after such an error, and the next start
	 * replays the log, so the data reaches the disk once it has room */
	char img[300], cmd[600], buf[4096];

	(void)state;
	start_logged(EXPORT_RW, NULL);
	add_failing_export(img, sizeof(img));
	snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of='%s/fill' bs=1M count=64 2>/dev/null", wb_back);
	assert_true(system(cmd) != -1);		/* fills the tmpfs: ENOSPC is the point */
	write_kept_in_b(93);

	/* the first flush fails; a second (a new syncfs, no error to report)
	 * must not trim either */
	control("{\"cmd\":\"flush\"}\n", buf, sizeof(buf));
	if (strstr(buf, "\"ok\":true"))
		fail_msg("a flush onto a filesystem that cannot write succeeded: %s", buf);
	sleep(2);	/* the destager retries every second */
	control("{\"cmd\":\"flush\"}\n", buf, sizeof(buf));
	if (strstr(buf, "\"ok\":true"))
		fail_msg("a flush after a writeback error succeeded (its records trimmed): %s", buf);
	control("{\"cmd\":\"status\"}\n", buf, sizeof(buf));
	if (!strstr(buf, "\"ERROR\""))
		fail_msg("the status does not say ERROR after a writeback error: %s", buf);
	if (!state_has(&srv, "replay-pending"))
		fail_msg("no replay-pending mark after a writeback error");

	/* a crash, the filesystem repaired: the restart replays, the data
	 * reaches the image (read with debugfs, not through the page cache) */
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, repair_failing_export), 0);
	if (!image_holds_kept(img))
		fail_msg("the data of an acknowledged WRITE is not on the disk after the restart");
}

/* a restart in the same boot (the page cache survived: nothing is
 * replayed, the filesystems are synced and the log trimmed) after b was
 * dropped from the exports file: b's records are trimmed too, so b's
 * filesystem must be synced though no export names it */
static void drop_b_from_exports(struct it_server *s)
{
	FILE *f = fopen(s->exports_file, "w");

	assert_non_null(f);
	fprintf(f, "%s/export %s\n", s->dir, EXPORT_RW);
	assert_int_equal(fclose(f), 0);
}

static void test_restart_syncs_dropped_export(void **state)
{
	char img[160];

	(void)state;
	start_logged(EXPORT_RW, no_destage);
	add_image_export(img, sizeof(img), "loop,commit=60", both_exports);
	write_kept_in_b(92);
	it_presto_extra[0] = NULL;	/* destage again: the restart trims */
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, drop_b_from_exports), 0);
	if (!log_says(&srv, "the page cache survived"))
		fail_msg("the restart in the same boot replayed");
	if (!image_holds_kept(img))
		fail_msg("the restart trimmed the dropped export's records, its data not on its disk");
}

static void test_dropped_export_can_be_unmounted(void **state)
{
	/* a dropped export's table is kept for its records' sake, but not
	 * its roots forever: with nothing to destage the destager lets it go,
	 * and the filesystem can be unmounted (it stayed busy until a flush) */
	char img[160], buf[4096];

	(void)state;
	start_logged(EXPORT_RW, NULL);
	add_image_export(img, sizeof(img), "loop", both_exports);
	control("{\"cmd\":\"exports\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, dropped_mnt));
	assert_int_equal(it_server_reload(&srv, both_exports, 1), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));
	int rc = -1;
	for (int i = 0; i < 50 && rc != 0; i++) {
		rc = umount2(dropped_mnt, 0);
		if (rc != 0)
			usleep(100 * 1000);
	}
	if (rc != 0)
		fail_msg("the dropped export's filesystem is still busy 5 s after the reload");
	dropped_mnt[0] = '\0';
}

static bool b_frozen;

static int freeze_teardown(void **state)
{
	char cmd[256];

	if (b_frozen) {
		snprintf(cmd, sizeof(cmd), "fsfreeze -u '%s'", dropped_mnt);
		if (system(cmd) == 0)
			b_frozen = false;
	}
	return drop_teardown(state);
}

/* cpu_ticks -- user + system time of process pid, in clock ticks */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	long long ut = -1, st = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	char *p = strrchr(buf, ')');	/* past the command name */
	assert_non_null(p);
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld",
				&ut, &st), 2);
	return ut + st;
}

static void test_drain_does_not_spin(void **state)
{
	/* SIGTERM while a call is in flight: the server stops reading and
	 * lets the call finish. A client that sent a call after the SIGTERM
	 * left input unread on its connection, and the level-triggered
	 * epoll_wait of the drain came back at once, again and again: a core
	 * spun until the call finished or the 10-s deadline. The call held
	 * here: a WRITE to a nopresto export (run on a worker) whose ext4 is
	 * frozen */
	static const struct it_export ex[] = {
		{ "export", EXPORT_RW },
		{ "b", "127.0.0.1(rw,insecure,no_root_squash,nopresto)" },
	};
	char img[160], cmd[256];
	struct it_fh broot, f;
	struct slot w = { 0, 0 }, n = { 0, 0 };

	(void)state;
	start_logged(EXPORT_RW, NULL);
	add_image_export(img, sizeof(img), "loop", ex);
	struct rpc_context *m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	assert_int_equal(it_mnt(m, dropped_mnt, &broot), MNT3_OK);
	it_rpc_close(m);
	struct rpc_context *a = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	struct rpc_context *b = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(it_create(a, &broot, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;

	snprintf(cmd, sizeof(cmd), "fsfreeze -f '%s'", dropped_mnt);
	assert_int_equal(system(cmd), 0);
	b_frozen = true;
	WRITE3args wa = it_write3(&f, 0, "held", 4, FILE_SYNC);
	pending = 1;
	assert_int_equal(rpc_nfs3_write_async(a, slot_cb, &wa, &w), 0);
	it_wait(a, &w.done, 300);	/* sent; it waits for the thaw */
	assert_false(w.done);

	assert_int_equal(kill(srv.pid, SIGTERM), 0);
	usleep(300 * 1000);		/* the server drains */
	pending++;
	assert_int_equal(rpc_nfs3_null_async(b, slot_cb, &n), 0);
	it_wait(b, &n.done, 200);	/* sent, never read */
	long long t0 = cpu_ticks(srv.pid);
	usleep(1000 * 1000);
	long long used = cpu_ticks(srv.pid) - t0;
	print_message("the draining server used %lld ticks of CPU in 1 s\n", used);

	snprintf(cmd, sizeof(cmd), "fsfreeze -u '%s'", dropped_mnt);
	assert_int_equal(system(cmd), 0);
	b_frozen = false;
	it_wait(a, &w.done, 5000);
	assert_true(w.done);
	assert_int_equal(w.status, NFS3_OK);	/* the call in flight was answered */
	it_rpc_close(a);
	it_rpc_close(b);
	assert_int_equal(it_server_restart(&srv, SIGTERM), 0);	/* it exited 0 */
	if (used > sysconf(_SC_CLK_TCK) / 4)
		fail_msg("the draining server spun: %lld ticks of CPU in 1 s", used);
}

static void other_mark(struct it_server *s)
{
	uint8_t other[16];
	memset(other, 0x3c, sizeof(other));
	assert_int_equal(setxattr(it_path(s, "."), MARK_XATTR, other, sizeof(other), 0), 0);
}

static void test_reload_keeps_marks(void **state)
{
	/* another filesystem under the export's path, then an exports reload,
	 * while the log holds the export's records: the reload keeps the
	 * remembered mark, so the replay still refuses the other filesystem */
	const struct it_export ex[] = { { "export", "127.0.0.1(rw,insecure,no_root_squash)" } };

	(void)state;
	start_logged(ex[0].clients, replay_always_no_destage);
	write_kept("kept", 80, -1);
	assert_int_equal(getxattr(it_path(&srv, "."), MARK_XATTR, saved_mark, sizeof(saved_mark)),
			 sizeof(saved_mark));
	other_mark(&srv);
	assert_int_equal(it_server_reload(&srv, ex, 1), 0);
	for (int i = 0; i < 100 && !log_says(&srv, "reloaded"); i++)
		usleep(50 * 1000);
	assert_true(log_says(&srv, "reloaded"));
	if (it_server_restart_after(&srv, SIGKILL, NULL) == 0)
		fail_msg("the replay went onto the other filesystem: the reload took its mark");
	assert_false(it_server_running(&srv));
	it_server_restart_after(&srv, SIGKILL, restore_mark);	/* -1: the last one died */
	assert_true(it_server_running(&srv));
}

static void interrupt_replay(struct it_server *s)
{
	char path[512];
	/* what an interrupted replay had not reached yet: the data and the
	 * file's applied stamp (same boot: a reached one would be in the page
	 * cache with its data) */
	assert_int_equal(truncate(it_path(s, "resume"), 0), 0);
	removexattr(it_path(s, "resume"), "trusted.presto.lsn");
	snprintf(path, sizeof(path), "%s/state/replay-pending", s->dir);
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
}

static void test_unfinished_replay_resumes(void **state)
{
	/* a replay that did not finish (killed, or its sync failed) leaves
	 * STATE_DIR/replay-pending: the next start replays even in the same
	 * boot, where --replay=auto would otherwise only sync the page cache */
	(void)state;
	start_logged(EXPORT_RW, no_destage);
	write_kept("resume", 78, -1);
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, interrupt_replay), 0);
	if (!log_says(&srv, "an earlier replay did not finish"))
		fail_msg("presto-nfsd did not replay after finding replay-pending");
	expect_kept("resume", "the restart did not replay");
}

/* the export root's applied stamp (trusted.presto.lsn, nfsd/presto.c) */
struct test_stamp {
	uint8_t uuid[16];
	uint64_t lsn;
	uint32_t epoch;
	uint32_t zero;
};

static void root_stamp(struct it_server *s, struct test_stamp *st)
{
	assert_int_equal(getxattr(it_path(s, "."), "trusted.presto.lsn", st, sizeof(*st)),
			 sizeof(*st));
}

/* set_root_stamp_losing_e1 -- st on the root, and the CREATE of e1 lost */
static void set_root_stamp_losing_e1(struct it_server *s, const struct test_stamp *st)
{
	assert_int_equal(setxattr(it_path(s, "."), "trusted.presto.lsn", st, sizeof(*st), 0), 0);
	assert_int_equal(unlink(it_path(s, "e1")), 0);
}

/* a truncation to 4096 applied but never logged (in flight at a power cut
 * that kept it: the journal committed it), as the server marks it, and a
 * start after a reboot: the older WRITEs replayed over it must not bring
 * back the bytes it cut */
static void truncation_kept_by_reboot(struct it_server *s)
{
	struct test_stamp st;
	struct {
		struct test_stamp st;
		uint64_t size;
	} m;

	root_stamp(s, &st);	/* the CREATE's: uuid, epoch, and an LSN below the WRITEs' */
	m.st = st;
	m.st.lsn = st.lsn + 10;	/* covers both WRITEs */
	m.size = 4096;
	assert_int_equal(truncate(it_path(s, "cut"), 4096), 0);
	assert_int_equal(setxattr(it_path(s, "cut"), "trusted.presto.size", &m, sizeof(m), 0), 0);
	pending_after_reboot(s);
}

static void test_truncation_in_flight_survives_reboot_replay(void **state)
{
	static char x[8192];
	struct it_fh f;
	struct stat st;

	(void)state;
	start_logged(EXPORT_RW, no_destage);
	struct rpc_context *rpc = connect_create("cut", &f);
	memset(x, 'X', sizeof(x));
	assert_int_equal(it_write(rpc, &f, 0, x, sizeof(x), FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_write(rpc, &f, 8192, x, sizeof(x), FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, truncation_kept_by_reboot), 0);
	assert_int_equal(stat(it_path(&srv, "cut"), &st), 0);
	if (st.st_size != 4096)
		fail_msg("after the replay the truncated file has %lld bytes, not 4096 (the older "
			 "WRITEs replayed over the truncation)", (long long)st.st_size);
}

/* expect_x8192 -- name holds exactly the 8192 'X' bytes written to it */
static void expect_x8192(const char *name, const char *why)
{
	size_t len;
	char *p = it_read_file(it_path(&srv, name), &len);

	assert_non_null(p);
	size_t xs = 0;
	for (size_t i = 0; i < len; i++)
		xs += p[i] == 'X';
	free(p);
	if (len != 8192 || xs != 8192)
		fail_msg("%s: %zu bytes, %zu of them 'X': %s", name, len, xs, why);
}

static void test_refused_truncation_leaves_no_mark(void **state)
{
	/* a truncation refused (EACCES as uid 1000, EFBIG past the
	 * filesystem's limit) kept the mark made before it: a replay after a
	 * reboot then cut the file's acknowledged data, or failed and kept
	 * the server from starting */
	static char x[8192];
	struct it_fh f, g;

	(void)state;
	start_logged(EXPORT_RW, no_destage);
	struct rpc_context *rpc = connect_create("denied", &f);
	memset(x, 'X', sizeof(x));
	assert_int_equal(it_write(rpc, &f, 0, x, sizeof(x), FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);
	rpc = connect_create("big", &g);
	assert_int_equal(it_write(rpc, &g, 0, x, sizeof(x), FILE_SYNC, &r), NFS3_OK);
	SETATTR3args a;
	memset(&a, 0, sizeof(a));
	a.object = it_fh3(&g);
	a.new_attributes.size.set_it = TRUE;
	a.new_attributes.size.set_size3_u.size = 1ull << 60;
	assert_int_equal(it_nfs3(rpc, NFS3_SETATTR, &a, &r), NFS3ERR_FBIG);
	it_rpc_close(rpc);
	struct nfs_context *nfs = it_nfs_mount(&srv, NULL, 1000, 1000, NULL);
	assert_non_null(nfs);
	assert_true(nfs_truncate(nfs, "/denied", 0) < 0);
	nfs_destroy_context(nfs);
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, pending_after_reboot), 0);
	expect_x8192("denied", "cut by the replay of a truncation refused with EACCES");
	expect_x8192("big", "changed by the replay of a truncation refused with EFBIG");
}

/* a stamp left by a record that never became durable: its LSN may be
 * reused by the next run, so it carries the epoch of its run */
static void stamp_from_lost_run(struct it_server *s)
{
	struct test_stamp st;

	root_stamp(s, &st);
	assert_true(st.epoch >= 1);
	st.lsn += 1000000;	/* covers every LSN of the log, by number */
	st.epoch -= 1;		/* but was written by the run before */
	set_root_stamp_losing_e1(s, &st);
}

/* e1_replayed -- CREATE e1, kill the server, change the tree with between,
 * start again (a replay); whether e1 is there then */
static bool e1_replayed(void (*between)(struct it_server *s))
{
	struct rpc_context *rpc;
	struct it_fh root;
	struct stat st;

	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &root, "e1", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	it_rpc_close(rpc);
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, between), 0);
	return stat(it_path(&srv, "e1"), &st) == 0;
}

static void test_stamp_of_earlier_run_covers_nothing_later(void **state)
{
	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	if (!e1_replayed(stamp_from_lost_run))
		fail_msg("e1 not re-created: the stamp of an earlier run, with a larger LSN, "
			 "was taken to cover a record of a later one");
}

/* a garbled stamp on the root: an epoch no run has had yet (garble_lsn
 * false), or this run's epoch with an LSN far past the log's last; and the
 * CREATE of e1 lost */
static bool garble_lsn;

static void garbled_stamp(struct it_server *s)
{
	struct test_stamp st;

	root_stamp(s, &st);
	if (garble_lsn)
		st.lsn |= 1ull << 40;
	else
		st.epoch |= 0x80000000u;
	set_root_stamp_losing_e1(s, &st);
}

static void test_garbled_stamp_covers_nothing(void **state)
{
	/* a stamp is read from the filesystem: one with a flipped high bit
	 * would cover every record and make the replay skip them; it is
	 * ignored instead, so the lost CREATE is replayed */
	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	for (int lsn = 0; lsn < 2; lsn++) {
		garble_lsn = lsn;
		if (!e1_replayed(garbled_stamp))
			fail_msg("e1 not re-created: a garbled stamp (%s) was taken to cover it",
				 lsn ? "LSN" : "epoch");
		if (!log_says(&srv, "a stamp no run could have written"))
			fail_msg("presto-nfsd did not say it ignored a garbled stamp");
		assert_int_equal(unlink(it_path(&srv, "e1")), 0);
	}
}

/* a replay that began after a reboot and did not finish: its mark says it
 * trusted no file stamp; the data of "t" is lost behind the server's back
 * but the stamp of its later SETATTR, which covers its WRITE, is there */
static void untrusted_replay_pending(struct it_server *s)
{
	char path[512];
	assert_int_equal(truncate(it_path(s, "t"), 0), 0);
	snprintf(path, sizeof(path), "%s/state/replay-pending", s->dir);
	assert_int_equal(it_write_file(path, "untrusted\n", 10, 0600), 0);
}

static void test_retry_of_replay_after_reboot_trusts_no_file_stamp(void **state)
{
	(void)state;
	start_logged(EXPORT_RW, no_destage);
	write_kept("t", 79, 0600);	/* the SETATTR stamps t */
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, untrusted_replay_pending), 0);
	expect_kept("t", "a file stamp was trusted by the retry of a replay that began after a reboot");
}

/* a start "after a reboot" (the retry of a replay that began after one):
 * no file's stamp is trusted, everything stays on disk */
static void pending_after_reboot(struct it_server *s)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/state/replay-pending", s->dir);
	assert_int_equal(it_write_file(path, "untrusted\n", 10, 0600), 0);
}

static void test_replay_after_reboot_keeps_directory_stamps(void **state)
{
	/* after a reboot a directory's SETATTR is applied again (its stamp is
	 * not trusted for attributes), but its stamp must not go back to that
	 * record's LSN: the LINK and RENAME after it would then look undone,
	 * and replay would bring D/l back (f with three links) */
	struct it_fh root, d, e, f;
	struct stat st;

	(void)state;
	start_logged(EXPORT_RW, no_destage);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_mkdir(rpc, &root, "D", 0755, &r), NFS3_OK);
	d = r.fh;
	assert_int_equal(it_mkdir(rpc, &root, "E", 0755, &r), NFS3_OK);
	e = r.fh;
	assert_int_equal(it_create(rpc, &root, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_setattr_mode(rpc, &d, 0750, &r), NFS3_OK);
	assert_int_equal(it_link(rpc, &f, &d, "l", &r), NFS3_OK);
	assert_int_equal(it_rename(rpc, &d, "l", &e, "g", &r), NFS3_OK);
	it_rpc_close(rpc);
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, pending_after_reboot), 0);
	if (lstat(it_path(&srv, "D/l"), &st) == 0)
		fail_msg("D/l, renamed to E/g, is back after the replay");
	assert_int_equal(lstat(it_path(&srv, "E/g"), &st), 0);
	assert_int_equal(lstat(it_path(&srv, "f"), &st), 0);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(lstat(it_path(&srv, "D"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
}

/* a replay that cannot write past 512 KiB (RLIMIT_FSIZE, inherited by the
 * restarted server; SIGXFSZ is ignored there, so the write is EFBIG) */
static struct rlimit fsize_saved;

static void lose_data_limit_size(struct it_server *s)
{
	struct rlimit small = { .rlim_cur = 512 * 1024, .rlim_max = RLIM_INFINITY };

	assert_int_equal(truncate(it_path(s, "two"), 0), 0);	/* the page cache lost it */
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &fsize_saved), 0);
	small.rlim_max = fsize_saved.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
}

static void unlimit_size(struct it_server *s)
{
	(void)s;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &fsize_saved), 0);
}

static void test_failed_record_is_not_stamped_over(void **state)
{
	/* a replay goes on past a record it cannot apply, then refuses to
	 * start; a later record of the same file must not stamp the file, or
	 * the retry takes the failed record for applied and skips it */
	struct rpc_context *rpc;
	struct it_fh root, f;
	static char far[4096], near[4096];
	size_t len;
	char *p;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	it_fill(far, sizeof(far), 81);
	it_fill(near, sizeof(near), 82);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &root, "two", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_write(rpc, &f, 1 << 20, far, sizeof(far), FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(it_write(rpc, &f, 0, near, sizeof(near), FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);

	/* the WRITE at 1 MiB fails (EFBIG), the one at 0 does not */
	int rc = it_server_restart_after(&srv, SIGKILL, lose_data_limit_size);
	unlimit_size(&srv);
	assert_int_equal(rc, -1);
	assert_true(state_has(&srv, "replay-pending"));
	/* the retry, in the same boot, trusts file stamps */
	it_server_restart_after(&srv, SIGKILL, NULL);	/* -1: the last one died */
	assert_true(it_server_running(&srv));
	p = it_read_file(it_path(&srv, "two"), &len);
	assert_non_null(p);
	if (len != (1 << 20) + sizeof(far) || memcmp(p + (1 << 20), far, sizeof(far)) != 0 ||
	    memcmp(p, near, sizeof(near)) != 0)
		fail_msg("after the retry: %zu bytes, want %zu with both writes: a record that "
			 "failed was skipped as applied", len, (size_t)(1 << 20) + sizeof(far));
	free(p);
	assert_false(state_has(&srv, "replay-pending"));
}

/* XDR by hand, for records written into a log (libnfs's headers and
 * libtirpc's do not mix): each put_ returns the bytes it wrote at buf */
static size_t put_u32(uint8_t *buf, uint32_t v)
{
	v = htonl(v);
	memcpy(buf, &v, 4);
	return 4;
}

/* put_bytes -- opaque<>: the length, the bytes, zeroes to a multiple of 4 */
static size_t put_bytes(uint8_t *buf, const void *p, size_t len)
{
	size_t n = put_u32(buf, (uint32_t)len);

	memset(buf + n, 0, (len + 3) & ~(size_t)3);
	if (len)
		memcpy(buf + n, p, len);
	return n + ((len + 3) & ~(size_t)3);
}

static size_t put_name(uint8_t *buf, const char *name)
{
	return put_bytes(buf, name, strlen(name));
}

/* put_kh -- an NFS handle's kernel handle as plog_kh {type, bytes<>} */
static size_t put_kh(uint8_t *buf, const struct it_fh *f)
{
	size_t n = put_u32(buf, (uint32_t)f->data[8] << 24 | (uint32_t)f->data[9] << 16 |
				    (uint32_t)f->data[10] << 8 | f->data[11]);

	return n + put_bytes(buf + n, f->data + 12, f->data[1]);
}

static uint32_t export_id_of(const struct it_fh *f)
{
	return (uint32_t)f->data[4] << 24 | (uint32_t)f->data[5] << 16 |
	       (uint32_t)f->data[6] << 8 | f->data[7];
}

/* a REMOVE record, CRC-valid and well-formed, whose directory handle is
 * empty: no filesystem gives such a handle out (open_by_handle_at: EINVAL) */
static uint32_t bad_export_id;

/* learn_export_id -- bad_export_id: the export id in the root's handle */
static void learn_export_id(void)
{
	struct it_fh root;

	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	bad_export_id = export_id_of(&root);
}

/* restart_forced -- after a start refused over records that could not be
 * replayed (the server died): start again with --replay=force */
static void restart_forced(void)
{
	it_presto_extra[0] = "--replay=force";
	it_server_restart_after(&srv, SIGKILL, NULL);	/* -1: the last one died */
	assert_true(it_server_running(&srv));
}

/* log_append_record -- a record of type written into the stopped server's
 * log as the server would write it: CRC-valid, whatever it says */
static void log_append_record(struct it_server *s, uint16_t type, const void *buf, size_t n)
{
	char path[600];
	struct nvlog_opts o;
	struct nvlog *log;
	uint64_t lsn;

	snprintf(path, sizeof(path), "%s/nvram.log", s->dir);
	memset(&o, 0, sizeof(o));
	assert_int_equal(nvlog_open(path, &o, &log), 0);
	struct iovec iov = { (void *)buf, n };
	assert_int_equal(nvlog_append(log, type, &iov, 1, &lsn), 0);
	nvlog_close(log, false);
}

/* a handle whose MAC (its last 16 bytes) is zeroes */
static const struct it_fh zero_mac = { .len = 16 };

/* append_forged -- end the plog_rec op of n bytes in buf (room for 40 more)
 * as the server does (drc_key<0>, reply<0>, then plog_macs: the MACs of m0
 * and, if given, m1, from their handles) and write it into s's log */
static void append_forged(struct it_server *s, uint16_t type, uint8_t *buf, size_t n,
			  const struct it_fh *m0, const struct it_fh *m1)
{
	n += put_u32(buf + n, 0);	/* drc_key<0> */
	n += put_u32(buf + n, 0);	/* reply<0> */
	n += put_u32(buf + n, m1 ? 32 : 16);
	memcpy(buf + n, m0->data + m0->len - 16, 16);
	n += 16;
	if (m1) {
		memcpy(buf + n, m1->data + m1->len - 16, 16);
		n += 16;
	}
	log_append_record(s, type, buf, n);
}

static void append_bad_handle_record(struct it_server *s)
{
	/* plog_rec (nfsd/plog.x): op PLOG_REMOVE (4) {dir {export_id, kh
	 * {type 1, bytes<0>}}, name "kept", victim {type 1, bytes<0>}, isdir
	 * FALSE}, drc_key<0>, reply<0> */
	uint8_t buf[64];
	size_t n = 0;

	n += put_u32(buf + n, 4);
	n += put_u32(buf + n, bad_export_id);
	n += put_u32(buf + n, 1);
	n += put_bytes(buf + n, NULL, 0);
	n += put_name(buf + n, "kept");
	n += put_u32(buf + n, 1);
	n += put_bytes(buf + n, NULL, 0);
	n += put_u32(buf + n, 0);
	n += put_u32(buf + n, 0);
	n += put_u32(buf + n, 0);
	log_append_record(s, 4, buf, n);
}

static void test_malformed_handle_is_an_error(void **state)
{
	/* a record whose handle is malformed is not "an object removed
	 * later" (skipped in silence): the start is refused and says so;
	 * --replay=force discards it */
	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	write_kept("kept", 83, -1);
	learn_export_id();
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, append_bad_handle_record), -1);
	if (!log_says(&srv, "could not be replayed"))
		fail_msg("presto-nfsd did not refuse a record with an empty handle");
	assert_true(state_has(&srv, "replay-pending"));
	restart_forced();
	expect_kept("kept", "the good records were not replayed around the bad one");
}

/* a WRITE record, CRC-valid and well-formed, of a file of the same
 * filesystem outside the export (the export is a subdirectory of it): with
 * a MAC of 16 zero bytes when outside_mac, else without MACs (a record as
 * servers before them wrote) */
static int outside_mac;	/* 2: a redirect line with the epoch too */
static char outside_path[600];

static void append_outside_record(struct it_server *s)
{
	union {
		struct file_handle h;
		uint8_t raw[sizeof(struct file_handle) + 128];
	} u;
	int mid;
	uint8_t buf[256];
	size_t n = 0;

	u.h.handle_bytes = 128;
	assert_int_equal(name_to_handle_at(AT_FDCWD, outside_path, &u.h, &mid, 0), 0);
	assert_true(u.h.handle_bytes <= 36);
	/* plog_rec (nfsd/plog.x): op PLOG_WRITE (1) {file {export_id, kh
	 * {type, bytes<L>}}, offset 0, data<5> "owned"}, drc_key<0>, reply<0>;
	 * then plog_macs {mac<16>} or nothing */
	static const uint8_t zero_mac[16];
	n += put_u32(buf + n, 1);
	n += put_u32(buf + n, bad_export_id);
	n += put_u32(buf + n, (uint32_t)u.h.handle_type);
	n += put_bytes(buf + n, u.h.f_handle, u.h.handle_bytes);
	n += put_u32(buf + n, 0);	/* offset (hyper) */
	n += put_u32(buf + n, 0);
	n += put_bytes(buf + n, "owned", 5);
	n += put_u32(buf + n, 0);	/* drc_key<0>, reply<0> */
	n += put_u32(buf + n, 0);
	if (outside_mac)
		n += put_bytes(buf + n, zero_mac, sizeof(zero_mac));
	log_append_record(s, 1, buf, n);
}

/* expect_outside_intact -- the file outside the export as it was */
static void expect_outside_intact(void)
{
	size_t len;
	char *p = it_read_file(outside_path, &len);

	assert_non_null(p);
	if (len != 6 || memcmp(p, "intact", 6) != 0)
		fail_msg("replay wrote outside the export: %.*s", (int)len, p);
	free(p);
}

static void test_record_outside_export_is_refused(void **state)
{
	/* open_by_handle_at opens any inode of the filesystem: a record must
	 * not reach outside an export that is a subdirectory of it. A record
	 * whose MAC does not check out, or one without MACs there, is refused
	 * (the start fails and says why; --replay=force discards it) */
	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	write_kept("kept", 84, -1);
	learn_export_id();
	snprintf(outside_path, sizeof(outside_path), "%s/outside", srv.dir);
	assert_int_equal(it_write_file(outside_path, "intact", 6, 0644), 0);
	for (int legacy = 0; legacy < 2; legacy++) {
		outside_mac = !legacy;
		it_presto_extra[0] = "--replay=always";
		assert_int_equal(it_server_restart_after(&srv, SIGKILL, append_outside_record), -1);
		if (!log_says(&srv, legacy ? "has no handle MACs" : "fails its MAC check"))
			fail_msg("presto-nfsd did not refuse a record of a file outside the export "
				 "(%s)", legacy ? "without MACs" : "with a wrong MAC");
		expect_outside_intact();
		assert_true(state_has(&srv, "replay-pending"));
		restart_forced();
		expect_kept("kept", "the good records were not replayed around the bad one");
		expect_outside_intact();
	}
}

/* a RENAME or LINK record across two exports of one filesystem, CRC-valid,
 * with the right MACs of both directories (as a client's handles carry
 * them): no client can cause one (NFS3ERR_XDEV), so a replay refuses it
 * rather than move or link a file from one export into the other */
static struct it_fh cross_a, cross_b, cross_x;
static int cross_link;

static void append_cross_record(struct it_server *s)
{
	uint8_t buf[512];
	size_t n = 0;

	if (cross_link) {
		/* PLOG_LINK {file {export a, x}, dir {export b}, name "y"} */
		n += put_u32(buf + n, 6);
		n += put_u32(buf + n, export_id_of(&cross_x));
		n += put_kh(buf + n, &cross_x);
		n += put_u32(buf + n, export_id_of(&cross_b));
		n += put_kh(buf + n, &cross_b);
		n += put_name(buf + n, "y");
	} else {
		/* PLOG_RENAME {fromdir {export a}, "x", todir {export b}, "y",
		 * source x, replaced FALSE, target {0, <>}, FALSE, FALSE} */
		n += put_u32(buf + n, 5);
		n += put_u32(buf + n, export_id_of(&cross_a));
		n += put_kh(buf + n, &cross_a);
		n += put_name(buf + n, "x");
		n += put_u32(buf + n, export_id_of(&cross_b));
		n += put_kh(buf + n, &cross_b);
		n += put_name(buf + n, "y");
		n += put_kh(buf + n, &cross_x);
		n += put_u32(buf + n, 0);
		n += put_u32(buf + n, 0);
		n += put_u32(buf + n, 0);
		n += put_u32(buf + n, 0);
		n += put_u32(buf + n, 0);
	}
	/* the MACs of the op's two objects */
	append_forged(s, cross_link ? 6 : 5, buf, n, cross_link ? &cross_x : &cross_a, &cross_b);
}

static void test_record_across_exports_is_refused(void **state)
{
	const struct it_export ex[] = {
		{ "a", "127.0.0.1(rw,insecure,no_root_squash)" },
		{ "b", "127.0.0.1(rw,insecure,no_root_squash)" },
	};
	char b_path[600], y_path[700];
	struct rpc_context *m, *rpc;

	it_presto_only();
	(void)state;
	for (cross_link = 0; cross_link < 2; cross_link++) {
		it_res_init(&r);
		replay_always_no_destage();
		assert_int_equal(it_server_startv(&srv, ex, 2, 0), 0);
		snprintf(b_path, sizeof(b_path), "%s/b", srv.dir);
		snprintf(y_path, sizeof(y_path), "%s/y", b_path);
		m = it_rpc_connect(&srv, MOUNT_PROG, 3);
		assert_non_null(m);
		assert_int_equal(it_mnt(m, srv.export, &cross_a), MNT3_OK);
		assert_int_equal(it_mnt(m, b_path, &cross_b), MNT3_OK);
		it_rpc_close(m);
		assert_int_not_equal(export_id_of(&cross_a), export_id_of(&cross_b));
		rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(rpc);
		assert_int_equal(it_create(rpc, &cross_a, "x", UNCHECKED, 0644, NULL, &r), NFS3_OK);
		cross_x = r.fh;
		/* what a client gets for the same change */
		int st = cross_link ? it_link(rpc, &cross_x, &cross_b, "y", &r)
				    : it_rename(rpc, &cross_a, "x", &cross_b, "y", &r);
		assert_int_equal(st, NFS3ERR_XDEV);
		it_rpc_close(rpc);
		assert_int_equal(it_server_restart_after(&srv, SIGKILL, append_cross_record), -1);
		if (access(y_path, F_OK) == 0)
			fail_msg("a replayed %s record put a file of export a into export b",
				 cross_link ? "LINK" : "RENAME");
		if (!log_says(&srv, "could not be replayed"))
			fail_msg("presto-nfsd did not refuse a %s record across two exports",
				 cross_link ? "LINK" : "RENAME");
		assert_true(state_has(&srv, "replay-pending"));
		restart_forced();
		assert_int_equal(access(it_path(&srv, "x"), F_OK), 0);
		assert_int_not_equal(access(y_path, F_OK), 0);
		it_server_stop(&srv);
	}
}

/* a REDIRECT record (written by a replay that re-created an object) from
 * the handle of x to x, whose MAC is 16 zero bytes */
static void append_bad_redirect_record(struct it_server *s)
{
	uint8_t buf[256];
	size_t n = 0;

	/* PLOG_REDIRECT {obj {export a, x}, was x}, drc_key<0>, reply<0>,
	 * plog_macs {mac<16>} */
	n += put_u32(buf + n, 7);
	n += put_u32(buf + n, export_id_of(&cross_a));
	n += put_kh(buf + n, &cross_x);
	n += put_kh(buf + n, &cross_x);
	append_forged(s, 7, buf, n, &zero_mac, NULL);
}

/* start_with_x -- a server with the log (replay always, destager held)
 * whose root is cross_a, and a file x in it (cross_x) */
static void start_with_x(void)
{
	start_logged(EXPORT_RW, replay_always_no_destage);
	assert_int_equal(it_root_fh(&srv, &cross_a), MNT3_OK);
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &cross_a, "x", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	cross_x = r.fh;
	it_rpc_close(rpc);
}

static void test_bad_redirect_record_is_refused(void **state)
{
	/* a redirect record whose MAC fails is not followed, and is an error
	 * of the recovery as any other such record: the records that use the
	 * handle it would redirect could otherwise be skipped in silence */
	(void)state;
	start_with_x();
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, append_bad_redirect_record), -1);
	if (!log_says(&srv, "a redirect without a MAC that checks out"))
		fail_msg("presto-nfsd did not say why it refused a redirect record");
	if (!log_says(&srv, "could not be replayed"))
		fail_msg("presto-nfsd started over a redirect record whose MAC fails");
	restart_forced();
	assert_int_equal(access(it_path(&srv, "x"), F_OK), 0);
}

/* a SETATTR record of x, CRC-valid and with x's MAC, whose mtime has
 * 2^30 - 1 nanoseconds: utimensat's UTIME_NOW, which no client can set
 * (NFS3ERR_INVAL) */
static void append_utime_now_record(struct it_server *s)
{
	uint8_t buf[256];
	size_t n = 0;

	/* PLOG_SETATTR {obj {export a, x}, attr {mode 0600; uid, gid, size:
	 * not set; atime not set; mtime {TRUE, 1200000000, 0x3fffffff}}},
	 * drc_key<0>, reply<0>, plog_macs {mac<16>} */
	n += put_u32(buf + n, 2);
	n += put_u32(buf + n, export_id_of(&cross_x));
	n += put_kh(buf + n, &cross_x);
	n += put_u32(buf + n, 1);
	n += put_u32(buf + n, 0600);
	for (int i = 0; i < 4; i++)
		n += put_u32(buf + n, 0);	/* set_uid, uid, set_gid, gid */
	n += put_u32(buf + n, 0);		/* set_size */
	n += put_u32(buf + n, 0);		/* size (hyper) */
	n += put_u32(buf + n, 0);
	n += put_u32(buf + n, 0);		/* atime {FALSE, 0, 0} */
	n += put_u32(buf + n, 0);
	n += put_u32(buf + n, 0);
	n += put_u32(buf + n, 1);		/* mtime */
	n += put_u32(buf + n, 1200000000);
	n += put_u32(buf + n, 0x3fffffff);
	append_forged(s, 2, buf, n, &cross_x, NULL);
}

static void test_utime_now_record_is_refused(void **state)
{
	/* replayed, it would set x's mtime to the time of the replay; and
	 * nothing of it is applied, not its mode either */
	struct stat before, after;

	(void)state;
	start_with_x();
	assert_int_equal(stat(it_path(&srv, "x"), &before), 0);
	sleep(1);	/* a replay's "now" differs from the mtime by a second */
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, append_utime_now_record), -1);
	if (!log_says(&srv, "could not be replayed"))
		fail_msg("presto-nfsd started over a SETATTR record of mtime nanoseconds 2^30 - 1");
	assert_int_equal(stat(it_path(&srv, "x"), &after), 0);
	assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
	assert_int_equal(after.st_mode & 07777, before.st_mode & 07777);
	restart_forced();
	assert_int_equal(stat(it_path(&srv, "x"), &after), 0);
	assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
}

/* a REMOVE record in the root of "x\0y", CRC-valid and with the root's MAC,
 * whose victim is x: as a C string its name is "x" */
static void append_nul_name_record(struct it_server *s)
{
	uint8_t buf[256];
	size_t n = 0;

	/* PLOG_REMOVE {dir {export, root}, name "x\0y", victim x, isdir
	 * FALSE}, drc_key<0>, reply<0>, plog_macs {mac<16>} */
	n += put_u32(buf + n, 4);
	n += put_u32(buf + n, export_id_of(&cross_a));
	n += put_kh(buf + n, &cross_a);
	n += put_bytes(buf + n, "x\0y", 3);
	n += put_kh(buf + n, &cross_x);
	n += put_u32(buf + n, 0);		/* isdir */
	append_forged(s, 4, buf, n, &cross_a, NULL);
}

static void test_nul_in_name_record_is_refused(void **state)
{
	/* replayed, it would remove x: no client can name "x\0y" (the server
	 * refuses the name, NFS3ERR_ACCES or INVAL), so no record does */
	(void)state;
	start_with_x();
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, append_nul_name_record), -1);
	if (!log_says(&srv, "does not decode"))
		fail_msg("presto-nfsd did not refuse a REMOVE record of a name with a NUL in it");
	assert_int_equal(access(it_path(&srv, "x"), F_OK), 0);
	restart_forced();
	assert_int_equal(access(it_path(&srv, "x"), F_OK), 0);
}

/* mount_whole_fs -- put a tmpfs under the export, with the export's mark
 * (so that the replay takes it for the export's filesystem: the export is
 * now a whole filesystem), a file "inside" on it, and a record of that file
 * without MACs */
static void mount_whole_fs(struct it_server *s)
{
	uint8_t mark[16];

	assert_int_equal(getxattr(it_path(s, "."), MARK_XATTR, mark, sizeof(mark)), sizeof(mark));
	assert_int_equal(mount("presto-it", s->export, "tmpfs", 0, "size=16m,mode=0777"), 0);
	whole_fs_mounted = true;
	assert_int_equal(setxattr(it_path(s, "."), MARK_XATTR, mark, sizeof(mark), 0), 0);
	snprintf(outside_path, sizeof(outside_path), "%s", it_path(s, "inside"));
	assert_int_equal(it_write_file(outside_path, "intact", 6, 0644), 0);
	outside_mac = false;
	append_outside_record(s);
}

static void test_record_without_macs_on_whole_fs(void **state)
{
	/* a record of a server before the MACs stays good where no handle can
	 * reach outside the export: an export that is its filesystem's root */
	size_t len;
	char *p;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	learn_export_id();
	if (it_server_restart_after(&srv, SIGKILL, mount_whole_fs) != 0)
		fail_msg("a record without MACs was refused in an export that is a whole "
			 "filesystem");
	p = it_read_file(outside_path, &len);
	assert_non_null(p);
	if (len != 6 || memcmp(p, "ownedt", 6) != 0)
		fail_msg("the record was not replayed: %.*s", (int)len, p);
	free(p);
}

/* bind_sub -- a bind mount of another directory of the same filesystem
 * (with the export's mark) over the export: a mount root, but not of the
 * filesystem's root; and a record without MACs of a file outside it */
static void bind_sub(struct it_server *s)
{
	char sub[600];
	uint8_t mark[16];

	assert_int_equal(getxattr(it_path(s, "."), MARK_XATTR, mark, sizeof(mark)), sizeof(mark));
	snprintf(sub, sizeof(sub), "%s/sub", s->dir);
	assert_int_equal(mkdir(sub, 0777), 0);
	assert_int_equal(setxattr(sub, MARK_XATTR, mark, sizeof(mark), 0), 0);
	assert_int_equal(mount(sub, s->export, NULL, MS_BIND, NULL), 0);
	whole_fs_mounted = true;
	outside_mac = false;
	append_outside_record(s);
}

static void test_record_without_macs_in_bind_mount(void **state)
{
	/* an export whose root is a bind mount of a subdirectory is not a
	 * whole filesystem, though its root is a mount root: a record without
	 * MACs is refused there too */
	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	learn_export_id();
	snprintf(outside_path, sizeof(outside_path), "%s/outside", srv.dir);
	assert_int_equal(it_write_file(outside_path, "intact", 6, 0644), 0);
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, bind_sub), -1);
	if (!log_says(&srv, "has no handle MACs"))
		fail_msg("presto-nfsd took a bind mount of a subdirectory for a whole filesystem");
	restart_forced();
	expect_outside_intact();
}

/* a redirect, in STATE_DIR/redirects, from the handle of the removed file
 * "victim" to the file outside_path: with a MAC of zeroes when outside_mac,
 * else without one (a line as servers before the MACs wrote) */
static struct it_fh victim_fh;

static void forge_redirect(struct it_server *s)
{
	union {
		struct file_handle h;
		uint8_t raw[sizeof(struct file_handle) + 128];
	} u;
	char path[600], oh[128], nh[128], line[512];
	int mid;
	unsigned ol = victim_fh.data[1];
	int otype = (int)((uint32_t)victim_fh.data[8] << 24 | (uint32_t)victim_fh.data[9] << 16 |
			  (uint32_t)victim_fh.data[10] << 8 | victim_fh.data[11]);

	assert_int_equal(unlink(it_path(s, "victim")), 0);
	u.h.handle_bytes = 128;
	assert_int_equal(name_to_handle_at(AT_FDCWD, outside_path, &u.h, &mid, 0), 0);
	for (unsigned i = 0; i < ol; i++)
		sprintf(oh + 2 * i, "%02x", victim_fh.data[12 + i]);
	for (unsigned i = 0; i < u.h.handle_bytes; i++)
		sprintf(nh + 2 * i, "%02x", u.h.f_handle[i]);
	int n = snprintf(line, sizeof(line), "%u %d %s %d %s%s%s\n", bad_export_id, otype, oh,
			 u.h.handle_type, nh, outside_mac ? " 00000000000000000000000000000000" : "",
			 outside_mac == 2 ? " 1" : "");
	snprintf(path, sizeof(path), "%s/state/redirects", s->dir);
	assert_int_equal(it_write_file(path, line, (size_t)n, 0600), 0);
}

static void test_forged_redirect_is_ignored(void **state)
{
	/* a client's handle of a removed object follows a redirect only if
	 * this appliance wrote it: a line with a wrong MAC, or one without a
	 * MAC in an export that is a subdirectory of its filesystem, would
	 * lead outside the export */
	struct rpc_context *rpc;
	struct it_fh root;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	learn_export_id();
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	snprintf(outside_path, sizeof(outside_path), "%s/outside", srv.dir);
	assert_int_equal(it_write_file(outside_path, "intact", 6, 0644), 0);
	/* forms: a wrong MAC and the epoch (as this server writes its lines),
	 * a wrong MAC alone, no MAC (as servers before the MACs wrote) */
	for (int form = 2; form >= 0; form--) {
		bool legacy = form == 0;
		rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(rpc);
		assert_int_equal(it_create(rpc, &root, "victim", UNCHECKED, 0644, NULL, &r), NFS3_OK);
		victim_fh = r.fh;
		it_rpc_close(rpc);
		outside_mac = form;
		assert_int_equal(it_server_restart_after(&srv, SIGTERM, forge_redirect), 0);
		rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(rpc);
		int st = it_getattr(rpc, &victim_fh, &r);
		it_rpc_close(rpc);
		if (st != NFS3ERR_STALE)
			fail_msg("the handle of a removed file, through a forged redirect (%s): %d, "
				 "want NFS3ERR_STALE", legacy ? "without a MAC" : "wrong MAC", st);
		if (!log_says(&srv, legacy ? "redirect without a MAC" : "redirect whose MAC"))
			fail_msg("presto-nfsd did not say it ignored a forged redirect (%s)",
				 legacy ? "without a MAC" : "with a wrong MAC");
	}
}

/* remove_victim -- "victim" made in the export's root and REMOVEd by a raw
 * call (xid, AUTH_SYS) from a fixed source port near port_base, as a kernel
 * client keeps it across reconnections; the call in *call, the port
 * returned */
static int remove_victim(uint32_t xid, int port_base, struct it_buf *call, struct it_buf *reply)
{
	struct it_fh root;
	int sport = 0, st = -1;

	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	assert_int_equal(it_write_file(it_path(&srv, "victim"), "v", 1, 0644), 0);
	it_put_call(call, xid, 2, IT_NFS_PROG, 3, NFS3_REMOVE, IT_AUTH_SYS, 0, 0);
	it_put_fh(call, &root);
	it_put_string(call, "victim");
	for (int i = 0; i < 50 && st < 0; i++) {
		sport = port_base + (int)((getpid() * 7 + i * 13) % 2000);
		st = it_raw_status(srv.nfs_port, "127.0.0.1", sport, call, reply, NULL);
	}
	assert_int_equal(st, NFS3_OK);
	assert_int_not_equal(access(it_path(&srv, "victim"), F_OK), 0);
	return sport;
}

/* retransmit -- call again from sport after a restart (the old 4-tuple
 * may linger a moment); its nfsstat3, or < 0 */
static int retransmit(int sport, struct it_buf *call, struct it_buf *reply)
{
	int st = -1;

	for (int i = 0; i < 20 && st < 0; i++) {
		st = it_raw_status(srv.nfs_port, "127.0.0.1", sport, call, reply, NULL);
		if (st < 0)
			usleep(100 * 1000);
	}
	return st;
}

static void test_drc_survives_crash(void **state)
{
	/* docs/ARCHITECTURE.md: with presto on, the DRC is rebuilt from the live
	 * log records, so a client retransmitting a REMOVE (same source address
	 * and port, same xid) after a crash gets the original NFS3_OK */
	static struct it_buf call, reply;

	(void)state;
	start_logged(EXPORT_RW, no_destage);
	int sport = remove_victim(0x7e570000u + (uint32_t)(getpid() & 0xffff), 42000, &call, &reply);
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	int st = retransmit(sport, &call, &reply);
	if (st != NFS3_OK)
		fail_msg("REMOVE retransmitted after a crash from the same address and port: %d, "
			 "want the original NFS3_OK from the rebuilt DRC", st);
	/* another source port with the same xid is another client: NOENT */
	st = it_raw_status(srv.nfs_port, "127.0.0.1", 0, &call, &reply, NULL);
	assert_int_equal(st, NFS3ERR_NOENT);
}

static void test_drc_survives_two_crashes(void **state)
{
	/* the entries a recovery rebuilds from the log are logged again before
	 * it trims the records they came from: a second crash before the client
	 * retransmits (a crash loop) keeps them too. Both restarts replay. */
	static struct it_buf call, reply;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	int sport = remove_victim(0x7e5a0000u + (uint32_t)(getpid() & 0xffff), 46000, &call, &reply);
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	if (!log_says(&srv, "1 duplicate request cache entry logged again (before the trim)"))
		fail_msg("the first recovery did not say it logged the REMOVE's entry again");
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	int st = retransmit(sport, &call, &reply);
	if (st != NFS3_OK)
		fail_msg("REMOVE retransmitted after two crashes in a row: %d, want the original "
			 "NFS3_OK (the DRC entry rebuilt by the first recovery was lost)", st);
	/* the third start finds the entry too, and the file stays removed */
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	st = retransmit(sport, &call, &reply);
	assert_int_equal(st, NFS3_OK);
	assert_int_not_equal(access(it_path(&srv, "victim"), F_OK), 0);
}

static void test_drc_survives_two_crashes_full_log(void **state)
{
	/* the same with the log too full at the restart for the entries to
	 * go in beside the records they come from: they go in after the
	 * trim, and still survive the second crash */
	static struct it_buf call, reply;
	static char big[256 << 10];
	char path[32];
	struct it_fh root, f;

	(void)state;
	it_nvram_size = "8M";
	start_logged(EXPORT_RW, replay_always_no_destage);
	/* 3,000 REMOVEs (records of about 380 bytes; their entries want 1.5
	 * MB here) and 23 WRITEs of 256 KiB fill about 7.2 MB of the 8 MiB
	 * (the held destager runs at 90%) */
	struct rpc_context *rpc = connect_root(&root);
	for (int i = 0; i < 3000; i++) {
		snprintf(path, sizeof(path), "r%d", i);
		assert_int_equal(it_write_file(it_path(&srv, path), "r", 1, 0644), 0);
		assert_int_equal(it_remove(rpc, &root, path, &r), NFS3_OK);
	}
	assert_int_equal(it_create(rpc, &root, "fill", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	memset(big, 'F', sizeof(big));
	for (int n = 0; n < 23; n++)
		assert_int_equal(it_write(rpc, &f, (uint64_t)n * sizeof(big), big, sizeof(big),
					  FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);
	int sport = remove_victim(0x7e5b0000u + (uint32_t)(getpid() & 0xffff), 48000, &call, &reply);
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	if (!log_says(&srv, "logged again after the trim"))
		fail_msg("the log had room for the rebuilt DRC beside its records: the test "
			 "needs it full");
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	int st = retransmit(sport, &call, &reply);
	if (st != NFS3_OK)
		fail_msg("REMOVE retransmitted after two crashes, the first with a full log: %d, "
			 "want the original NFS3_OK", st);
}

static void other_filesystem(struct it_server *s)
{
	uint8_t other[16];
	memset(other, 0xa6, sizeof(other));
	assert_int_equal(setxattr(it_path(s, "."), MARK_XATTR, other, sizeof(other), 0), 0);
}

static void test_discarded_record_leaves_no_drc_entry(void **state)
{
	/* a REMOVE whose record cannot be replayed (the root is another
	 * filesystem's) and is discarded by --replay=force was not done, as
	 * far as the client can know: its retransmission must be executed
	 * again (NOENT here), not answered the original OK from a DRC rebuilt
	 * out of the discarded record */
	static struct it_buf call, reply;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	int sport = remove_victim(0x7e580000u + (uint32_t)(getpid() & 0xffff), 44000, &call, &reply);
	it_presto_extra[0] = "--replay=force";
	assert_int_equal(it_server_restart_after(&srv, SIGKILL, other_filesystem), 0);
	if (!log_says(&srv, "could not be replayed") && !log_says(&srv, "replay of LSN"))
		fail_msg("the REMOVE's record was replayed: the test needs it refused");
	int st = retransmit(sport, &call, &reply);
	if (st != NFS3ERR_NOENT)
		fail_msg("the retransmitted REMOVE of a discarded record: %d, want NOENT (run again)",
			 st);
}

/* connect_create -- a connection to srv's NFS, and an empty file name
 * CREATEd (UNCHECKED, 0644) in the export's root into *f */
static struct rpc_context *connect_create(const char *name, struct it_fh *f)
{
	struct it_fh root;
	struct rpc_context *rpc;

	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &root, name, UNCHECKED, 0644, NULL, &r), NFS3_OK);
	*f = r.fh;
	return rpc;
}

/* written_then_crash -- f created and written "AAAA" by client a (presto
 * on), then "BBBB" (FILE_SYNC) by client b after between() switched presto
 * off for b; a power cut (SIGKILL, --replay=always): the replay must not
 * roll "BBBB" back to the older record's "AAAA" */
static void written_then_crash(struct rpc_context *a, struct rpc_context *b,
			       void (*between)(void), const char *what)
{
	struct it_fh root, f;
	size_t len;

	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	assert_int_equal(it_create(a, &root, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_write(a, &f, 0, "AAAA", 4, FILE_SYNC, &r), NFS3_OK);
	if (between)
		between();
	assert_int_equal(it_write(b, &f, 0, "BBBB", 4, FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(a);
	if (b != a)
		it_rpc_close(b);
	assert_int_equal(it_server_restart(&srv, SIGKILL), 0);
	char *p = it_read_file(it_path(&srv, "f"), &len);
	assert_non_null(p);
	if (len != 4 || memcmp(p, "BBBB", 4) != 0)
		fail_msg("%s: the FILE_SYNC WRITE made with presto off was rolled back by the replay "
			 "(\"%.*s\")", what, (int)(len < 8 ? len : 8), p);
	free(p);
}

static void test_presto_off_change_survives_replay(void **state)
{
	/* one export, its 127.0.0.1 line accelerated, its ::1 line nopresto:
	 * a change through ::1 is flushed, and logged too, so that the replay
	 * of the older record does not undo it */
	static const struct it_export mixed = {
		"export", "127.0.0.1(rw,insecure,no_root_squash) ::1(rw,insecure,no_root_squash,nopresto)"
	};

	(void)state;
	it_presto_only();
	it_res_init(&r);
	replay_always_no_destage();
	assert_int_equal(it_server_startv(&srv, &mixed, 1, IT_IPV6), 0);
	struct rpc_context *a = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	struct rpc_context *b = it_rpc_connect_to(&srv, "::1", IT_NFS_PROG, 3);
	assert_non_null(a);
	assert_non_null(b);
	written_then_crash(a, b, NULL, "a nopresto client line");
}

static void reload_nopresto(void)
{
	static const struct it_export off = { "export", "127.0.0.1(rw,insecure,no_root_squash,nopresto)" };
	char buf[8192];

	assert_int_equal(it_server_reload(&srv, &off, 1), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));	/* done when it answers */
	control("{\"cmd\":\"exports\"}\n", buf, sizeof(buf));
	if (!strstr(buf, "\"presto\":false"))
		fail_msg("the reload did not switch presto off: %s", buf);
}

static void test_reload_to_nopresto_survives_replay(void **state)
{
	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	struct rpc_context *a = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(a);
	written_then_crash(a, a, reload_nopresto, "a reload to nopresto");
}

static void test_nopresto_export(void **state)
{
	/* with the log present, a nopresto export writes through: FILE_SYNC
	 * writes are FILE_SYNC and the data is there */
	struct rpc_context *rpc;
	struct it_fh f;
	size_t len;
	char *p;

	(void)state;
	start_logged("127.0.0.1(rw,insecure,no_root_squash,nopresto)", NULL);
	rpc = connect_create("plain", &f);
	assert_int_equal(it_write(rpc, &f, 0, "written through", 15, FILE_SYNC, &r), NFS3_OK);
	assert_int_equal(r.committed, FILE_SYNC);
	assert_int_equal(it_write(rpc, &f, 15, "!", 1, UNSTABLE, &r), NFS3_OK);
	{
		COMMIT3args c = { .file = it_fh3(&f) };
		char verf[8];

		memcpy(verf, r.verf, 8);
		assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);
		assert_memory_equal(r.verf, verf, 8);
	}
	p = it_read_file(it_path(&srv, "plain"), &len);
	assert_non_null(p);
	assert_int_equal(len, 16);
	assert_memory_equal(p, "written through!", 16);
	free(p);
	it_rpc_close(rpc);
}

/* control -- one request on the server's control socket; its reply line
 * into buf (NUL-terminated) */
static void control(const char *req, char *buf, size_t cap)
{
	if (it_control(&srv, req, buf, cap) < 0)
		fail_msg("control request %s: %s", req, strerror(errno));
}

/* loop_stats -- the server's counters of calls run on its event loop thread
 * and of calls handed from there to a worker (control socket "stats"). */
static void loop_stats(uint64_t *inl, uint64_t *deferred)
{
	char buf[65536];
	const char *p;

	control("{\"cmd\":\"stats\"}\n", buf, sizeof(buf));
	p = strstr(buf, "\"inline\":");
	assert_non_null(p);
	*inl = strtoull(p + 9, NULL, 10);
	p = strstr(buf, "\"deferred\":");
	assert_non_null(p);
	*deferred = strtoull(p + 11, NULL, 10);
}

/* mount_no_xattrs -- under the export, a FUSE view of a directory that
 * refuses every extended attribute (bindfs --xattr-none) */
static void mount_no_xattrs(struct it_server *s)
{
	char cmd[1400], backing[600];

	snprintf(backing, sizeof(backing), "%s/backing", s->dir);
	assert_int_equal(mkdir(backing, 0777), 0);
	snprintf(cmd, sizeof(cmd), "bindfs --xattr-none -o allow_other %s %s", backing, s->export);
	assert_int_equal(system(cmd), 0);
	whole_fs_mounted = true;
}

static uint64_t log_appends(void)
{
	char buf[65536];
	const char *p;

	control("{\"cmd\":\"stats\"}\n", buf, sizeof(buf));
	static const char key[] = "\"appends\":";
	p = strstr(buf, key);
	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

static void test_export_without_xattrs_writes_through(void **state)
{
	/* an export whose root takes no extended attribute gets no mark and
	 * no stamps, so a replay could not tell what its records did: presto
	 * is off for it (changes durable before the reply, nothing logged),
	 * it says why, and "enable" refuses */
	struct rpc_context *rpc;
	struct it_fh f;
	char buf[65536];

	(void)state;
	if (system("command -v bindfs >/dev/null") != 0)
		skip();		/* appliance/deps.sh installs it for the tests */
	start_logged(EXPORT_RW, NULL);
	assert_int_equal(it_server_restart_after(&srv, SIGTERM, mount_no_xattrs), 0);
	if (!log_says(&srv, "presto is off for it"))
		fail_msg("presto-nfsd did not say that presto is off for an export without "
			 "extended attributes");
	control("{\"cmd\":\"exports\"}\n", buf, sizeof(buf));
	if (!strstr(buf, "\"presto\":false") || !strstr(buf, "\"no_mark\":true"))
		fail_msg("the export without extended attributes is listed with presto on, or "
			 "without the reason: %s", buf);
	/* and the operator's command says why */
	const char *bin = getenv("PRESTO_BIN");
	char cmd[800], out[4096];
	snprintf(cmd, sizeof(cmd), "%s/presto -s %s/state/control.sock", bin && *bin ? bin : "bin",
		 srv.dir);
	FILE *pp = popen(cmd, "r");
	assert_non_null(pp);
	size_t got = fread(out, 1, sizeof(out) - 1, pp);
	out[got] = '\0';
	pclose(pp);
	if (!strstr(out, "off (its root refuses the log's extended attribute)"))
		fail_msg("presto does not say why the export is off:\n%s", out);
	uint64_t a0 = log_appends();
	rpc = connect_create("through", &f);
	assert_int_equal(it_write(rpc, &f, 0, "written through!", 16, FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);
	if (log_appends() != a0)
		fail_msg("changes in an export without extended attributes went into the log");
	control("{\"cmd\":\"enable\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));	/* all: the others */
	control("{\"cmd\":\"exports\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"presto\":false"));
	char req[512];
	snprintf(req, sizeof(req), "{\"cmd\":\"enable\",\"exports\":[\"%s\"]}\n", srv.export);
	control(req, buf, sizeof(buf));
	if (!strstr(buf, "\"ok\":false") || !strstr(buf, "extended attributes"))
		fail_msg("enable of an export without extended attributes: %s", buf);
}

static void test_commit_after_switching_on(void **state)
{
	/* an UNSTABLE WRITE answered with presto off is in no log; after the
	 * export is switched on, COMMIT answers without a sync, so its
	 * verifier must differ and the client sends the data again */
	struct rpc_context *rpc;
	struct it_fh f;
	char buf[4096], req[512], off_verf[8], on_verf[8];
	COMMIT3args c;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	snprintf(req, sizeof(req), "{\"cmd\":\"disable\",\"exports\":[\"%s\"]}\n", srv.export);
	control(req, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	rpc = connect_create("u", &f);
	c = (COMMIT3args){ .file = it_fh3(&f) };
	assert_int_equal(it_write(rpc, &f, 0, "unstable", 8, UNSTABLE, &r), NFS3_OK);
	assert_int_equal(r.committed, UNSTABLE);
	memcpy(off_verf, r.verf, 8);
	assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);	/* off: syncs */
	assert_memory_equal(r.verf, off_verf, 8);
	assert_int_equal(it_write(rpc, &f, 8, "again", 5, UNSTABLE, &r), NFS3_OK);
	assert_memory_equal(r.verf, off_verf, 8);

	snprintf(req, sizeof(req), "{\"cmd\":\"enable\",\"exports\":[\"%s\"]}\n", srv.export);
	control(req, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);	/* on: no sync */
	if (memcmp(r.verf, off_verf, 8) == 0)
		fail_msg("COMMIT after the switch on matched the verifier of a WRITE it never synced");
	/* on: WRITEs are FILE_SYNC, and COMMIT agrees with them */
	assert_int_equal(it_write(rpc, &f, 8, "again", 5, UNSTABLE, &r), NFS3_OK);
	assert_int_equal(r.committed, FILE_SYNC);
	memcpy(on_verf, r.verf, 8);
	assert_int_equal(it_nfs3(rpc, NFS3_COMMIT, &c, &r), NFS3_OK);
	assert_memory_equal(r.verf, on_verf, 8);
	it_rpc_close(rpc);
}

/* count_presto -- how many exports a control reply lists with "presto"
 * true and false */
static void count_presto(const char *buf, int *on, int *off)
{
	*on = *off = 0;
	for (const char *p = buf; (p = strstr(p, "\"presto\":")) != NULL; p++) {
		p += strlen("\"presto\":");
		if (!strncmp(p, "true", 4))
			(*on)++;
		else if (!strncmp(p, "false", 5))
			(*off)++;
	}
}

static void test_switch_many_exports(void **state)
{
	/* `presto -d` with no export switches every export off: with more
	 * than 256 exports it stopped at the 257th with ENOSPC (a fixed list
	 * of the exports switched off), the first 256 left off. And the
	 * exports dropped from the exports file left their place taken. */
	enum { N = 300 };
	static struct it_export ex[N];
	static char names[N][16];
	static char buf[1 << 20];
	int on, off;

	(void)state;
	it_presto_only();
	it_res_init(&r);
	it_nvram = nvram_kind;
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "e%d", i);
		ex[i] = (struct it_export){ names[i], EXPORT_RW };
	}
	assert_int_equal(it_server_startv(&srv, ex, N, 0), 0);
	control("{\"cmd\":\"disable\"}\n", buf, sizeof(buf));
	if (!strstr(buf, "\"ok\":true"))
		fail_msg("presto -d of %d exports: %.300s", N, buf);
	count_presto(buf, &on, &off);
	assert_int_equal(on, 0);
	assert_int_equal(off, N);
	control("{\"cmd\":\"enable\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	count_presto(buf, &on, &off);
	assert_int_equal(on, N);
	assert_int_equal(off, 0);
	/* one off, the rest on */
	snprintf(buf, sizeof(buf), "{\"cmd\":\"disable\",\"exports\":[\"%s/e7\"]}\n", srv.dir);
	control(buf, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	count_presto(buf, &on, &off);
	assert_int_equal(on, N - 1);
	assert_int_equal(off, 1);
	/* e7 dropped from the exports file, then back: it comes back on, its
	 * switch gone with it (the list kept it before) */
	ex[7] = ex[N - 1];
	assert_int_equal(it_server_reload(&srv, ex, N - 1), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	control("{\"cmd\":\"exports\"}\n", buf, sizeof(buf));
	count_presto(buf, &on, &off);
	assert_int_equal(on, N - 1);
	assert_int_equal(off, 0);
	ex[7] = (struct it_export){ names[7], EXPORT_RW };
	assert_int_equal(it_server_reload(&srv, ex, N), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	control("{\"cmd\":\"exports\"}\n", buf, sizeof(buf));
	count_presto(buf, &on, &off);
	assert_int_equal(on, N);
	assert_int_equal(off, 0);
}

static void test_disable_with_no_exports(void **state)
{
	/* no export left (a reload), nothing ever switched off: "disable" of
	 * none handed qsort the list's NULL (UBSan stopped the server) */
	char buf[4096];

	(void)state;
	start_logged(EXPORT_RW, NULL);
	assert_int_equal(it_server_reload(&srv, NULL, 0), 0);
	control("{\"cmd\":\"reload\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	control("{\"cmd\":\"disable\"}\n", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ok\":true"));
	control("{\"cmd\":\"ping\"}\n", buf, sizeof(buf));	/* still there */
	assert_non_null(strstr(buf, "\"ok\":true"));
}

static void test_readdir_inline_small_dirs(void **state)
{
	/* a listing of a one-block directory runs on the event loop thread
	 * (no hand-off); a longer directory goes to a worker; every entry is
	 * listed either way */
	struct rpc_context *rpc;
	struct it_fh root, small, big;
	uint64_t inl0, def0, inl1, def1, inl2, def2;
	char name[64];

	(void)state;
	start_logged(EXPORT_RW, NULL);
	assert_int_equal(mkdir(it_path(&srv, "small"), 0755), 0);
	assert_int_equal(mkdir(it_path(&srv, "big"), 0755), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "small/f%d", i);
		assert_int_equal(it_write_file(it_path(&srv, name), "x", 1, 0644), 0);
	}
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "big/a-rather-long-file-name-%04d", i);
		assert_int_equal(it_write_file(it_path(&srv, name), "x", 1, 0644), 0);
	}
	struct stat bst;
	assert_int_equal(stat(it_path(&srv, "big"), &bst), 0);
	assert_true(bst.st_size > 4096);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_lookup(rpc, &root, "small", &r), NFS3_OK);
	small = r.fh;
	assert_int_equal(it_lookup(rpc, &root, "big", &r), NFS3_OK);
	big = r.fh;

	for (int plus = 0; plus < 2; plus++) {
		loop_stats(&inl0, &def0);
		assert_int_equal(it_readdir_all(rpc, &small, plus, 65536, &r, NULL), NFS3_OK);
		assert_int_equal(r.nents, 12);	/* . and .. too */
		loop_stats(&inl1, &def1);
		if (def1 != def0)
			fail_msg("READDIR%s of a 10-file directory was handed to a worker",
				 plus ? "PLUS" : "");
		assert_true(inl1 > inl0);
		assert_int_equal(it_readdir_all(rpc, &big, plus, 65536, &r, NULL), NFS3_OK);
		assert_int_equal(r.nents, 402);
		loop_stats(&inl2, &def2);
		if (def2 == def1)
			fail_msg("READDIR%s of a %lld-byte directory ran on the event loop thread",
				 plus ? "PLUS" : "", (long long)bst.st_size);
	}
	it_rpc_close(rpc);
}

static void test_root_stamp_before_mark(void **state)
{
	/* the export root's directory stamp is set before its mark, so that
	 * the stamp, rewritten at every change in the root, is the attribute
	 * that stays in the inode on ext4 (listed there before those of an
	 * attribute block) and the mark, set once, is the one that moves to a
	 * block when both do not fit */
	char names[1024];
	struct statfs sfs;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	/* the placeholder covers no record: it carries no log's uuid */
	uint8_t st[32], zero[32] = { 0 };
	assert_int_equal(getxattr(it_path(&srv, "."), "trusted.presto.lsn", st, sizeof(st)), 32);
	assert_memory_equal(st, zero, sizeof(st));
	assert_int_equal(statfs(it_path(&srv, "."), &sfs), 0);
	if (sfs.f_type != 0xEF53)
		return;		/* the order of listxattr is ext4's */
	ssize_t n = listxattr(it_path(&srv, "."), names, sizeof(names));
	assert_true(n > 0);
	int stamp_at = -1, mark_at = -1, i = 0;
	for (const char *p = names; p < names + n; p += strlen(p) + 1, i++) {
		if (strcmp(p, "trusted.presto.lsn") == 0)
			stamp_at = i;
		else if (strcmp(p, MARK_XATTR) == 0)
			mark_at = i;
	}
	assert_true(stamp_at >= 0 && mark_at >= 0);
	if (stamp_at > mark_at)
		fail_msg("the root's stamp is listed after its mark: it was set after it");
}

/* the root's stamp, whole (uuid, LSN, epoch) */
struct stamp {
	uint8_t b[32];
};
static struct stamp saved_stamp;

static void get_stamp(struct it_server *s, struct stamp *st)
{
	assert_int_equal(getxattr(it_path(s, "."), "trusted.presto.lsn", st->b, sizeof(st->b)),
			 sizeof(st->b));
}

/* the stamps from the RENAME on lost, the operations kept (a power cut
 * between the RENAME and its stamp, the journal keeping what came after) */
static void lose_rename_stamp(struct it_server *s)
{
	assert_int_equal(setxattr(it_path(s, "."), "trusted.presto.lsn", saved_stamp.b,
				  sizeof(saved_stamp.b), 0), 0);
}

static void test_removal_of_one_link_keeps_its_stamp(void **state)
{
	/* REMOVE a (the file has a second link, z), then RENAME z -> a: the
	 * file is back under a. Without a stamp of its own, a replay that
	 * misses the RENAME's stamp finds a holding the REMOVE's victim,
	 * unlinks it (its last link by then) and skips the RENAME (applied):
	 * the file is lost. Then a CREATE and REMOVE of "gone", whose stamps
	 * are lost too: replay re-creates it and removes it again. */
	struct rpc_context *rpc;
	struct it_fh root, f;
	struct stamp before;
	struct stat st;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	write_kept("a", 80, -1);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_lookup(rpc, &root, "a", &r), NFS3_OK);
	f = r.fh;
	assert_int_equal(it_link(rpc, &f, &root, "z", &r), NFS3_OK);
	get_stamp(&srv, &before);
	assert_int_equal(it_remove(rpc, &root, "a", &r), NFS3_OK);
	get_stamp(&srv, &saved_stamp);
	if (memcmp(before.b, saved_stamp.b, sizeof(before.b)) == 0)
		fail_msg("the removal of a link of a file with two set no stamp");
	assert_int_equal(it_rename(rpc, &root, "z", &root, "a", &r), NFS3_OK);
	assert_int_equal(it_create(rpc, &root, "gone", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	assert_int_equal(it_remove(rpc, &root, "gone", &r), NFS3_OK);
	it_rpc_close(rpc);

	assert_int_equal(it_server_restart_after(&srv, SIGKILL, lose_rename_stamp), 0);
	expect_kept("a", "the replayed REMOVE unlinked the file the RENAME had brought back");
	if (lstat(it_path(&srv, "z"), &st) == 0)
		fail_msg("z is back: the RENAME was undone");
	if (lstat(it_path(&srv, "gone"), &st) == 0)
		fail_msg("gone is back: its replayed CREATE was not undone by its REMOVE");
}

static void test_changes_inline_or_deferred(void **state)
{
	/* With the log in (emulated) persistent memory, changes to a presto
	 * export run on the event loop thread; changes to a nopresto export,
	 * which must fsync, are handed to the workers; so are changes to an
	 * object whose stripe a worker holds. Every reply and every byte is
	 * right either way. */
	const struct it_export ex[] = {
		{ "on", "127.0.0.1(rw,insecure,no_root_squash)" },
		{ "off", "127.0.0.1(rw,insecure,no_root_squash,nopresto)" },
	};
	struct rpc_context *m, *rpc;
	struct it_fh on, off, f_on, f_off;
	char off_path[256], block[4096];
	uint64_t inl0, def0, inl1, def1, inl2, def2;
	size_t len;
	char *p;

	it_presto_only();
	(void)state;
	it_res_init(&r);
	it_nvram = 1;
	assert_int_equal(it_server_startv(&srv, ex, 2, 0), 0);
	snprintf(off_path, sizeof(off_path), "%s/off", srv.dir);
	m = it_rpc_connect(&srv, MOUNT_PROG, 3);
	assert_non_null(m);
	assert_int_equal(it_mnt(m, srv.export, &on), MNT3_OK);
	assert_int_equal(it_mnt(m, off_path, &off), MNT3_OK);
	it_rpc_close(m);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);

	loop_stats(&inl0, &def0);
	assert_int_equal(it_create(rpc, &on, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f_on = r.fh;
	for (int i = 0; i < 32; i++) {
		memset(block, 'a' + i % 26, sizeof(block));
		assert_int_equal(it_write(rpc, &f_on, (uint64_t)i * sizeof(block), block,
					  sizeof(block), FILE_SYNC, &r), NFS3_OK);
		assert_int_equal(r.committed, FILE_SYNC);
	}
	loop_stats(&inl1, &def1);
	/* the CREATE and the 32 WRITEs (and the first stats call's nothing) */
	assert_true(inl1 - inl0 >= 33);
	assert_int_equal(def1 - def0, 0);

	assert_int_equal(it_create(rpc, &off, "f", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f_off = r.fh;
	for (int i = 0; i < 32; i++) {
		memset(block, 'A' + i % 26, sizeof(block));
		assert_int_equal(it_write(rpc, &f_off, (uint64_t)i * sizeof(block), block,
					  sizeof(block), FILE_SYNC, &r), NFS3_OK);
		assert_int_equal(r.committed, FILE_SYNC);
	}
	assert_int_equal(it_remove(rpc, &off, "gone", &r), NFS3ERR_NOENT);
	loop_stats(&inl2, &def2);
	/* the CREATE, the 32 WRITEs and the REMOVE went to the workers */
	assert_true(def2 - def1 >= 34);

	p = it_read_file(it_path(&srv, "f"), &len);
	assert_non_null(p);
	assert_int_equal(len, 32 * sizeof(block));
	for (int i = 0; i < 32; i++)
		assert_int_equal(p[i * sizeof(block)], 'a' + i % 26);
	free(p);
	p = it_read_file(it_path(&srv, "../off/f"), &len);
	assert_non_null(p);
	assert_int_equal(len, 32 * sizeof(block));
	for (int i = 0; i < 32; i++)
		assert_int_equal(p[i * sizeof(block) + 4095], 'A' + i % 26);
	free(p);
	it_rpc_close(rpc);
}

static void test_deferred_call_keeps_drc_entry(void **state)
{
	/* A change to a nopresto export starts on the event loop thread and
	 * defers itself to a worker (it must fsync). Its retransmission, sent
	 * right behind it on the same connection, must find the call in the
	 * duplicate request cache (in progress: dropped; done: the cached
	 * reply), never run it a second time: every reply is NFS3_OK, none
	 * NFS3ERR_NOENT. */
	static struct it_buf call, reply;
	struct it_fh root;
	uint64_t inl0, def0, inl1, def1;
	char name[32];

	(void)state;
	start_logged("127.0.0.1(rw,insecure,no_root_squash,nopresto)", NULL);
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	loop_stats(&inl0, &def0);
	for (int i = 0; i < 20; i++) {
		struct it_reply rep;
		int fd, replies = 0;

		snprintf(name, sizeof(name), "twice-%d", i);
		assert_int_equal(it_write_file(it_path(&srv, name), "x", 1, 0644), 0);
		it_buf_reset(&call);
		it_put_call(&call, 0x3d3d0000u + (uint32_t)i, 2, IT_NFS_PROG, 3, NFS3_REMOVE,
			    IT_AUTH_SYS, 0, 0);
		it_put_fh(&call, &root);
		it_put_string(&call, name);
		fd = it_tcp_connect(NULL, 0, srv.nfs_port);
		assert_true(fd >= 0);
		assert_int_equal(it_send_record(fd, &call), 0);
		assert_int_equal(it_send_record(fd, &call), 0);
		/* the first reply, then maybe a second (from the cache) */
		while (it_recv_record(fd, &reply, replies ? 300 : IT_TIMEOUT_MS) > 0) {
			assert_int_equal(it_parse_reply(&reply, &rep), 0);
			assert_int_equal(rep.reply_stat, 0);
			assert_int_equal(rep.accept_stat, 0);
			if (it_get32(&reply) != NFS3_OK)
				fail_msg("REMOVE %s and its retransmission right behind it: a reply "
					 "is not NFS3_OK (executed twice?)", name);
			replies++;
		}
		close(fd);
		assert_true(replies >= 1);
		assert_int_not_equal(access(it_path(&srv, name), F_OK), 0);
	}
	loop_stats(&inl1, &def1);
	(void)inl0;
	(void)inl1;
	assert_true(def1 - def0 >= 20);	/* the path under test was taken */
}

static void test_lookup_waits_for_namespace_change(void **state)
{
	/* LOOKUP and READDIRPLUS hold the directory's stripe while they hand
	 * out handles (presto_dir_hold), as a CREATE does from its apply to
	 * its append: no client gets the handle of an object whose creation is
	 * not logged yet. Seen from outside: a LOOKUP in a directory that a
	 * long READDIRPLUS (6,000 entries, on a worker) is listing cannot run
	 * on the event loop thread; it is handed to a worker that waits. */
	static struct it_buf call, reply;
	struct it_fh root, big;
	uint64_t inl0, def0, inl1, def1;
	bool waited = false;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	assert_int_equal(mkdir(it_path(&srv, "big"), 0755), 0);
	for (int i = 0; i < 6000; i++) {
		char name[64];
		snprintf(name, sizeof(name), "big/entry-with-a-longer-name.%d", i);
		assert_int_equal(it_write_file(it_path(&srv, name), "", 0, 0644), 0);
	}
	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	{
		struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(rpc);
		assert_int_equal(it_lookup(rpc, &root, "big", &r), NFS3_OK);
		big = r.fh;
		it_rpc_close(rpc);
	}
	for (int attempt = 0; attempt < 8 && !waited; attempt++) {
		struct it_reply rep;
		int fd1 = it_tcp_connect(NULL, 0, srv.nfs_port);
		int fd2 = it_tcp_connect(NULL, 0, srv.nfs_port);

		assert_true(fd1 >= 0 && fd2 >= 0);
		loop_stats(&inl0, &def0);
		it_buf_reset(&call);
		it_put_call(&call, 0x4c4b0000u + (uint32_t)attempt, 2, IT_NFS_PROG, 3,
			    NFS3_READDIRPLUS, IT_AUTH_SYS, 0, 0);
		it_put_fh(&call, &big);
		it_put64(&call, 0);			/* cookie */
		it_put64(&call, 0);			/* cookieverf */
		it_put32(&call, 1024 * 1024);		/* dircount */
		it_put32(&call, 1024 * 1024);		/* maxcount */
		assert_int_equal(it_send_record(fd1, &call), 0);
		usleep(3000);				/* the worker is listing */
		it_buf_reset(&call);
		it_put_call(&call, 0x4c4c0000u + (uint32_t)attempt, 2, IT_NFS_PROG, 3, NFS3_LOOKUP,
			    IT_AUTH_SYS, 0, 0);
		it_put_fh(&call, &big);
		it_put_string(&call, "entry-with-a-longer-name.17");
		assert_int_equal(it_send_record(fd2, &call), 0);
		assert_true(it_recv_record(fd2, &reply, IT_TIMEOUT_MS) > 0);
		assert_int_equal(it_parse_reply(&reply, &rep), 0);
		assert_int_equal(rep.accept_stat, 0);
		assert_int_equal(it_get32(&reply), NFS3_OK);
		/* the listing's reply (about 1 MiB) is not read: closing the
		 * connection drops it */
		loop_stats(&inl1, &def1);
		(void)inl0;
		(void)inl1;
		waited = def1 > def0;	/* the LOOKUP was handed to a worker */
		close(fd1);
		close(fd2);
	}
	if (!waited)
		fail_msg("a LOOKUP sent while a READDIRPLUS lists the same directory ran on the "
			 "event loop thread each of 8 times: nothing keeps it from handing out a "
			 "handle during a CREATE there");
}

/*
 * A replay killed between re-creating an object and saving the redirect to
 * it from the recorded handle, in the redirects file: the log is the msync
 * kind, where a replay appends each redirect to the file (on persistent
 * memory it logs them: test_replay_killed_after_logging_redirects). For the
 * killed start STATE_DIR/redirects is a FIFO: rd_load reads it to its end (the test holds a writer until the
 * server has it open, then lets go), and the append of the first redirect
 * then blocks in open(2) for want of a reader, with the object re-created
 * already. The test waits for the export to gain an entry and for the
 * server to block there (its wchan), and SIGKILLs it: a kill in the window,
 * without a debugger. The next start (--replay=auto: replay-pending)
 * replays again and must bring back everything acknowledged.
 */
static struct {
	char fifo[512];
	int rw;			/* the test's end of the FIFO, until rd_load has it */
	char appeared[300];	/* the first entry the killed replay made */
	bool blocked;		/* the server was seen blocked in the FIFO's open */
	bool killed;
	pthread_t thread;
} kw = { .rw = -1 };

/* kw_reading -- whether process pid has path open read-only (not the
 * test's read-write end, which the child has until its exec) */
static bool kw_reading(pid_t pid, const char *path)
{
	char dir[64], link[600], to[600];
	bool found = false;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		ssize_t n = readlink(link, to, sizeof(to) - 1);
		if (n <= 0)
			continue;
		to[n] = '\0';
		if (strcmp(to, path) != 0)
			continue;
		snprintf(link, sizeof(link), "/proc/%d/fdinfo/%s", (int)pid, e->d_name);
		FILE *f = fopen(link, "re");
		unsigned flags;
		if (f && fscanf(f, "pos: %*s flags: %o", &flags) == 1)
			found = (flags & O_ACCMODE) == O_RDONLY;
		if (f)
			fclose(f);
	}
	closedir(d);
	return found;
}

/* kw_in_fifo_open -- whether a thread of pid waits in the open of a FIFO
 * for its other end */
static bool kw_in_fifo_open(pid_t pid)
{
	char dir[64], path[600], wchan[128];
	bool found = false;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/wchan", dir, e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, wchan, sizeof(wchan) - 1);
		close(fd);
		if (n > 0) {
			wchan[n] = '\0';
			found = strstr(wchan, "wait_for_partner") != NULL;
		}
	}
	closedir(d);
	return found;
}

/* kw_first_entry -- the first entry of directory path, into out */
static bool kw_first_entry(const char *path, char *out, size_t len)
{
	struct dirent *e;
	DIR *d = opendir(path);

	if (!d)
		return false;
	while ((e = readdir(d)) && (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")))
		;
	if (e)
		snprintf(out, len, "%s", e->d_name);
	closedir(d);
	return e != NULL;
}

/* srv_until -- poll the server's pid until ok(pid, arg) or the time end
 * (ms); the pid last seen into *pid. Returns whether ok said yes. */
static bool srv_until(long long end, bool (*ok)(pid_t, const char *), const char *arg, pid_t *pid)
{
	*pid = -1;
	while (now_ms() < end) {
		*pid = __atomic_load_n(&srv.pid, __ATOMIC_SEQ_CST);
		if (*pid > 0 && ok(*pid, arg))
			return true;
		usleep(1000);
	}
	return false;
}

static bool kw_fifo_open(pid_t pid, const char *unused)
{
	(void)unused;
	return kw_in_fifo_open(pid);
}

static void *kw_main(void *arg)
{
	long long end = now_ms() + 8000;	/* within the start's 10 s */
	pid_t pid;

	(void)arg;
	/* rd_load has the FIFO open and waits for more: let it see the end */
	srv_until(end, kw_reading, kw.fifo, &pid);
	close(kw.rw);
	kw.rw = -1;
	/* the replay re-creates the first object, then blocks in the append
	 * of its redirect */
	while (now_ms() < end && !kw_first_entry(srv.export, kw.appeared, sizeof(kw.appeared)))
		usleep(1000);
	long long blocked_by = now_ms() + 3000;
	while (kw.appeared[0] && now_ms() < blocked_by && !(kw.blocked = kw_in_fifo_open(pid)))
		usleep(1000);
	if (pid > 0)
		kw.killed = kill(pid, SIGKILL) == 0;
	return NULL;
}

/* kw_arm -- between two starts: what a power cut lost (kw_lose: the objects
 * made, and the root's stamp, which shares their journal), and the FIFO with
 * the thread that kills the next start in the window */
static const char *kw_lose;

static void kw_arm(struct it_server *s)
{
	char cmd[600], any[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", it_path(s, kw_lose));
	assert_int_equal(system(cmd), 0);
	assert_int_equal(removexattr(it_path(s, "."), "trusted.presto.lsn"), 0);
	assert_false(kw_first_entry(s->export, any, sizeof(any)));	/* the root is empty */
	snprintf(kw.fifo, sizeof(kw.fifo), "%s/state/redirects", s->dir);
	assert_false(state_has(s, "redirects"));
	assert_int_equal(mkfifo(kw.fifo, 0600), 0);
	kw.rw = open(kw.fifo, O_RDWR | O_CLOEXEC);	/* the server must not inherit it */
	assert_true(kw.rw >= 0);
	kw.appeared[0] = '\0';
	kw.blocked = kw.killed = false;
	assert_int_equal(pthread_create(&kw.thread, NULL, kw_main, NULL), 0);
}

static void kw_disarm(struct it_server *s)
{
	(void)s;
	assert_int_equal(unlink(kw.fifo), 0);
}

/* kw_names -- the entries of directory rel of the export, sorted, joined
 * with spaces */
static void kw_names(const char *rel, char *out, size_t len)
{
	struct dirent **v;
	int n = scandir(it_path(&srv, rel), &v, NULL, alphasort);
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, "..") && used < len)
			used += (size_t)snprintf(out + used, len - used, "%s%s", used ? " " : "",
						 v[i]->d_name);
		free(v[i]);
	}
	if (n >= 0)
		free(v);
}

static void test_replay_killed_before_redirect_resumes(void **state)
{
	/* for a file, a directory and a symlink, each the first object the
	 * killed replay re-creates: the later records of its old handle (a
	 * WRITE into it; a CREATE and WRITE inside it; a RENAME of it) must
	 * survive the kill, and the client's old handles keep working */
	static const char data[] = "acknowledged before the crash";
	static const char *const lose[] = { "f", "d", "t" };
	struct rpc_context *rpc;
	struct it_fh root, obj, inner;
	char names[600];
	size_t len;

	(void)state;
	nvram_kind = IT_NVRAM_MSYNC;
	for (int kind = 0; kind < 3; kind++) {
		if (kind > 0) {
			it_res_free(&r);	/* start_logged's it_res_init would drop the READ's data */
			assert_int_equal(it_server_stop(&srv), 0);
		}
		start_logged(EXPORT_RW, replay_always_no_destage);
		assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
		rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(rpc);
		switch (kind) {
		case 0:
			assert_int_equal(it_create(rpc, &root, "f", UNCHECKED, 0640, NULL, &r), NFS3_OK);
			obj = r.fh;
			assert_int_equal(it_write(rpc, &obj, 0, data, sizeof(data), FILE_SYNC, &r),
					 NFS3_OK);
			break;
		case 1:
			assert_int_equal(it_mkdir(rpc, &root, "d", 0750, &r), NFS3_OK);
			obj = r.fh;
			assert_int_equal(it_create(rpc, &obj, "g", UNCHECKED, 0644, NULL, &r), NFS3_OK);
			inner = r.fh;
			assert_int_equal(it_write(rpc, &inner, 0, data, sizeof(data), FILE_SYNC, &r),
					 NFS3_OK);
			break;
		default:
			assert_int_equal(it_symlink(rpc, &root, "s", data, &r), NFS3_OK);
			obj = r.fh;
			assert_int_equal(it_rename(rpc, &root, "s", &root, "t", &r), NFS3_OK);
			break;
		}
		it_rpc_close(rpc);

		kw_lose = lose[kind];
		int rc = it_server_restart_after(&srv, SIGKILL, kw_arm);
		pthread_join(kw.thread, NULL);
		if (rc == 0 || !kw.killed || !kw.appeared[0])
			fail_msg("%s: the replay was not killed after re-creating an object (start %d, "
				 "entry \"%s\")", lose[kind], rc, kw.appeared);
		if (!kw.blocked)
			print_message("%s: killed with \"%s\" made, not seen blocked in the append of "
				      "its redirect\n", lose[kind], kw.appeared);
		no_destage();	/* --replay=auto: the next start replays for replay-pending */
		it_server_restart_after(&srv, SIGKILL, kw_disarm);	/* -1: the last one died */
		assert_true(it_server_running(&srv));
		if (!log_says(&srv, "an earlier replay did not finish"))
			fail_msg("%s: presto-nfsd did not replay again after a killed replay", lose[kind]);
		assert_false(state_has(&srv, "replay-pending"));
		char st_buf[4096];
		control("{\"cmd\":\"status\"}\n", st_buf, sizeof(st_buf));
		if (!strstr(st_buf, "\"kind\":\"msync\""))
			fail_msg("the log is not the msync kind, whose replays append redirects to "
				 "the file: %s", st_buf);

		/* on the backing filesystem: the names, data and attributes */
		kw_names(".", names, sizeof(names));
		if (strcmp(names, lose[kind]) != 0)
			fail_msg("the export holds \"%s\" after the replay, not \"%s\"", names, lose[kind]);
		if (kind == 0 || kind == 1) {
			const char *file = kind == 0 ? "f" : "d/g";
			char *p = it_read_file(it_path(&srv, file), &len);
			if (!p || len != sizeof(data) || memcmp(p, data, len) != 0)
				fail_msg("%s: %zu bytes after the replay, not the %zu written: the records "
					 "of the re-created object's old handle were skipped",
					 file, p ? len : 0, sizeof(data));
			free(p);
		}
		struct stat st;
		if (kind == 0) {
			assert_int_equal(stat(it_path(&srv, "f"), &st), 0);
			assert_int_equal(st.st_mode & 07777, 0640);
		}
		if (kind == 1) {
			kw_names("d", names, sizeof(names));
			if (strcmp(names, "g") != 0)
				fail_msg("d holds \"%s\" after the replay, not \"g\"", names);
			assert_int_equal(stat(it_path(&srv, "d"), &st), 0);
			assert_int_equal(st.st_mode & 07777, 0750);
		}
		if (kind == 2) {
			char back[128];
			ssize_t n = readlink(it_path(&srv, "t"), back, sizeof(back));
			if (n != (ssize_t)strlen(data) || memcmp(back, data, (size_t)n) != 0)
				fail_msg("t is not the symlink renamed from s after the replay");
		}
		/* through the handles the client got before the crash (redirects) */
		rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
		assert_non_null(rpc);
		if (it_getattr(rpc, &obj, &r) != NFS3_OK)
			fail_msg("%s: the client's handle of it does not work after the replay", lose[kind]);
		if (kind == 0 || kind == 1) {
			assert_int_equal(it_read(rpc, kind == 0 ? &obj : &inner, 0, 4096, &r), NFS3_OK);
			assert_int_equal(r.data_len, sizeof(data));
		}
		it_rpc_close(rpc);
	}
}

/*
 * Redirects in the log. On persistent memory a replay makes the redirect to
 * each object it re-creates durable as a record of the log (one persist, not
 * a file fsync), and the redirects file holds them only from the end of the
 * replay (rd_save). For the killed start STATE_DIR/redirects.tmp is a FIFO:
 * rd_save blocks in its open for want of a reader, with every object
 * re-created, named and synced, and the test SIGKILLs it there (kf_*).
 */
static struct {
	bool blocked, killed;
	pthread_t thread;
} kf;

static void *kf_main(void *arg)
{
	pid_t pid;

	(void)arg;
	kf.blocked = srv_until(now_ms() + 8000, kw_fifo_open, NULL, &pid);
	if (pid > 0)
		kf.killed = kill(pid, SIGKILL) == 0;
	return NULL;
}


/* kf_arm -- between two starts: a power cut lost the file "f" (and the
 * root's stamp, which shares its journal); the next start is killed in
 * rd_save */
static void kf_arm(struct it_server *s)
{
	char fifo[512];

	assert_int_equal(unlink(it_path(s, "f")), 0);
	if (removexattr(it_path(s, "."), "trusted.presto.lsn") < 0)
		assert_int_equal(errno, ENODATA);
	snprintf(fifo, sizeof(fifo), "%s/state/redirects.tmp", s->dir);
	if (access(fifo, F_OK) != 0)
		assert_int_equal(mkfifo(fifo, 0600), 0);
	kf.blocked = kf.killed = false;
	assert_int_equal(pthread_create(&kf.thread, NULL, kf_main, NULL), 0);
}

static void kf_disarm(struct it_server *s)
{
	char fifo[512];

	snprintf(fifo, sizeof(fifo), "%s/state/redirects.tmp", s->dir);
	assert_int_equal(unlink(fifo), 0);
}

/* kf_killed_start -- restart (kf_arm) and see the start killed in rd_save */
static void kf_killed_start(const char *what)
{
	int rc = it_server_restart_after(&srv, SIGKILL, kf_arm);

	pthread_join(kf.thread, NULL);
	if (rc == 0 || !kf.killed || !kf.blocked)
		fail_msg("%s: the replay was not killed in the save of the redirects (start %d, "
			 "killed %d, blocked %d)", what, rc, kf.killed, kf.blocked);
	assert_true(state_has(&srv, "replay-pending"));
	assert_int_equal(access(it_path(&srv, "f"), F_OK), 0);	/* re-created */
}

/* kf_create -- "f" with data, acknowledged; its handle into *f */
static void kf_create(struct it_fh *f, const char *data, size_t len)
{
	struct it_fh root;
	struct rpc_context *rpc;

	assert_int_equal(it_root_fh(&srv, &root), MNT3_OK);
	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	assert_int_equal(it_create(rpc, &root, "f", UNCHECKED, 0640, NULL, &r), NFS3_OK);
	*f = r.fh;
	assert_int_equal(it_write(rpc, f, 0, data, len, FILE_SYNC, &r), NFS3_OK);
	it_rpc_close(rpc);
}

/* kf_check -- the client's handle f of "f" works and reads data */
static void kf_check(const struct it_fh *f, const char *data, size_t len, const char *what)
{
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);

	assert_non_null(rpc);
	int st = it_read(rpc, f, 0, 4096, &r);
	if (st != NFS3_OK || r.data_len != len || memcmp(r.data, data, len) != 0)
		fail_msg("%s: the client's handle of the re-created file: READ %d, %u bytes", what,
			 st, st == NFS3_OK ? r.data_len : 0);
	it_rpc_close(rpc);
	size_t n;
	char *p = it_read_file(it_path(&srv, "f"), &n);
	if (!p || n != len || memcmp(p, data, len) != 0)
		fail_msg("%s: f holds %zu bytes after the replay, not the %zu written", what,
			 p ? n : 0, len);
	free(p);
}

static const char kf_data[] = "acknowledged before the crash";

/* kf_first_replay_killed -- "f" made with kf_data (its handle into *f),
 * then a replay that re-creates it killed in rd_save: the redirect is in
 * the log only */
static void kf_first_replay_killed(struct it_fh *f, const char *what)
{
	start_logged(EXPORT_RW, replay_always_no_destage);
	kf_create(f, kf_data, sizeof(kf_data));
	kf_killed_start(what);
	assert_false(state_has(&srv, "redirects"));
}

/* kf_last_start -- a start without the FIFO that replays for replay-pending
 * (--replay=auto) and gets through */
static void kf_last_start(void)
{
	no_destage();
	it_server_restart_after(&srv, SIGKILL, kf_disarm);	/* -1: the last one died */
	assert_true(it_server_running(&srv));
	assert_false(state_has(&srv, "replay-pending"));
}

static void test_replay_killed_after_logging_redirects(void **state)
{
	/* the replay re-created f and logged its redirect, then died before
	 * the redirects file held it: the next start must take it from the
	 * log (rd_scan), or the name f, which holds the re-created object,
	 * passes for applied and the client's handle is stale */
	struct it_fh f;

	(void)state;
	kf_first_replay_killed(&f, "the first replay");
	kf_last_start();
	if (!log_says(&srv, "holds 1 redirect(s) of an earlier replay"))
		fail_msg("the start after the killed replay did not load the redirect it logged");
	assert_true(state_has(&srv, "redirects"));
	kf_check(&f, kf_data, sizeof(kf_data), "after a replay killed with its redirect logged");
}

static void test_redirect_of_the_later_replay_wins(void **state)
{
	/* the object of f re-created twice by two replays, each killed before
	 * its end: the first logs its redirect (persistent memory), a power
	 * cut loses what it re-created, and the second (the same log, the
	 * msync kind) appends its redirect to the file. The start after them
	 * loads the file's redirect first and the log's after it: the newer
	 * one is the file's, by the replays' epochs, and it must be the one
	 * the replay follows */
	struct it_fh f;

	(void)state;
	kf_first_replay_killed(&f, "the first replay (persistent memory)");
	nvram_kind = IT_NVRAM_MSYNC;
	replay_always_no_destage();
	kf_killed_start("the second replay (msync)");
	if (!log_says(&srv, "holds 1 redirect(s) of an earlier replay"))
		fail_msg("the second replay did not load the redirect the first one logged");
	assert_true(state_has(&srv, "redirects"));
	/* as if the second replay had been killed between the rename of its
	 * object into place and its WRITE into it (which stamps the file as
	 * well): the next replay must write the data into that object,
	 * through the newer redirect (the older one leads nowhere, and a
	 * WRITE whose object is gone is skipped) */
	assert_int_equal(truncate(it_path(&srv, "f"), 0), 0);
	assert_int_equal(removexattr(it_path(&srv, "f"), "trusted.presto.lsn"), 0);
	kf_last_start();
	kf_check(&f, kf_data, sizeof(kf_data), "after two killed replays");
}

/* stat_u64 -- the first number named key in the server's "stats" answer */
static uint64_t stat_u64(const char *key)
{
	char buf[65536], k[64];

	control("{\"cmd\":\"stats\"}\n", buf, sizeof(buf));
	snprintf(k, sizeof(k), "\"%s\":", key);
	const char *p = strstr(buf, k);
	if (!p)
		fail_msg("no %s in the stats", key);
	return strtoull(p + strlen(k), NULL, 10);
}

/* connect_root -- a connection to the server and the export root's handle */
static struct rpc_context *connect_root(struct it_fh *root)
{
	assert_int_equal(it_root_fh(&srv, root), MNT3_OK);
	struct rpc_context *rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	return rpc;
}

/* queue_create -- send a GUARDED CREATE of name in dir, answered to cb */
static void queue_create(struct rpc_context *rpc, const struct it_fh *dir, const char *name,
			 rpc_cb cb, void *priv)
{
	CREATE3args a;

	memset(&a, 0, sizeof(a));
	a.where.dir = it_fh3(dir);
	a.where.name = (char *)name;	/* encoded by the call */
	a.how.mode = GUARDED;
	assert_int_equal(rpc_nfs3_create_async(rpc, cb, &a, priv), 0);
	pending++;
}

static void test_batch_stamps_coalesced(void **state)
{
	/* 32 CREATEs in the export root sent at once, run in one batch or a
	 * few by the event loop: the root's stamp is written once a batch, not
	 * once a call ("Deferred directory stamps"), and, the replies all in,
	 * it covers the last of them (no reply before its stamp) */
	enum { N = 32 };
	static struct slot s[N];
	struct it_fh root;
	struct test_stamp st;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	struct rpc_context *rpc = connect_root(&root);
	for (int i = 0; i < N; i++) {
		char name[32];

		snprintf(name, sizeof(name), "c%02d", i);
		queue_create(rpc, &root, name, slot_cb, &s[i]);
	}
	if (it_wait_all(&rpc, 1, &pending, IT_TIMEOUT_MS) != 0)
		fail_msg("%d CREATEs unanswered", pending);
	for (int i = 0; i < N; i++)
		assert_int_equal(s[i].status, NFS3_OK);
	it_rpc_close(rpc);
	unsigned long long coalesced = stat_u64("stamps_coalesced");
	unsigned long long appends = stat_u64("appends");
	print_message("%d CREATEs: %llu records, %llu root stamps coalesced\n", N, appends,
		      coalesced);
	assert_int_equal(appends, N);	/* LSN 1 to N */
	if (coalesced == 0)
		fail_msg("32 CREATEs in one directory sent at once: every one wrote its stamp");
	root_stamp(&srv, &st);
	if (st.lsn != N)
		fail_msg("the root's stamp is at LSN %llu after the replies of LSN 1 to %d",
			 (unsigned long long)st.lsn, N);
}

/* uc_* -- a CREATE's reply seen by the client: the root's stamp then must
 * cover its record (LSN uc_base + i + 1: the calls of one connection run
 * in order, and only they append) */
static uint64_t uc_base;
static struct uc_slot {
	int index;
	int status;
	uint64_t stamp;
} uc[8];

static void uc_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct uc_slot *u = priv;
	struct test_stamp st;

	(void)rpc;
	u->status = status == RPC_STATUS_SUCCESS && data ? *(int *)data : -1;
	u->stamp = getxattr(it_path(&srv, "."), "trusted.presto.lsn", &st, sizeof(st)) ==
			   sizeof(st) ? st.lsn : 0;
	pending--;
}

static void test_stamps_before_replies_of_resumed_calls(void **state)
{
	/* 6 READs of 1 MiB fill the connection's output queue past its bound,
	 * so the loop holds the 8 CREATEs behind them and runs them when the
	 * end of its batch sends the READs' replies: those CREATEs' replies
	 * must wait for their stamps too (they went out with the stamps
	 * still pending) */
	enum { READS = 6, MIB = 1 << 20 };
	static struct slot rs[READS];
	static char data[MIB];
	struct it_fh root, f;

	(void)state;
	start_logged(EXPORT_RW, NULL);
	struct rpc_context *rpc = connect_root(&root);
	assert_int_equal(it_create(rpc, &root, "big", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	it_fill(data, sizeof(data), 7);
	assert_int_equal(it_write_file(it_path(&srv, "big"), data, sizeof(data), 0644), 0);
	for (int round = 0; round < 5; round++) {
		uc_base = stat_u64("appends");
		for (int i = 0; i < READS; i++) {
			READ3args a = { .file = it_fh3(&f), .offset = 0, .count = MIB };
			assert_int_equal(rpc_nfs3_read_async(rpc, slot_cb, &a, &rs[i]), 0);
			pending++;
		}
		for (int i = 0; i < 8; i++) {
			char name[32];

			snprintf(name, sizeof(name), "r%dc%d", round, i);
			uc[i] = (struct uc_slot){ .index = i };
			queue_create(rpc, &root, name, uc_cb, &uc[i]);
		}
		if (it_wait_all(&rpc, 1, &pending, IT_TIMEOUT_MS) != 0)
			fail_msg("round %d: %d calls unanswered", round, pending);
		for (int i = 0; i < READS; i++)
			assert_int_equal(rs[i].status, NFS3_OK);
		for (int i = 0; i < 8; i++) {
			assert_int_equal(uc[i].status, NFS3_OK);
			if (uc[i].stamp < uc_base + (uint64_t)i + 1)
				fail_msg("round %d: the reply of CREATE %d (LSN %llu) came while the "
					 "root's stamp was at LSN %llu", round, i,
					 (unsigned long long)(uc_base + (uint64_t)i + 1),
					 (unsigned long long)uc[i].stamp);
		}
	}
	it_rpc_close(rpc);
}

/* ---- a kill between an applied change and its record ---- */

static pid_t gdb_pid = -1;

/* o_print -- the text of file path, as the test's output */
static void o_print(const char *path)
{
	size_t len;
	char *o = it_read_file(path, &len);

	print_message("%s:\n%s\n", path, o ? o : "(none)");
	free(o);
}

static int gdb_teardown(void **state)
{
	if (gdb_pid > 0) {
		kill(gdb_pid, SIGKILL);
		waitpid(gdb_pid, NULL, 0);
		gdb_pid = -1;
	}
	return test_teardown(state);
}

/* gdb_kill_at_remove -- attach gdb to the server so that it stops the
 * server where a REMOVE's record is about to be appended (presto_commit:
 * the name is unlinked, nothing of it is in the log) and kills it there
 * (SIGKILL). Returns once gdb lets the server run on: 0, or -1 when this
 * machine does not let gdb attach (ptrace refused). gdb's output goes to
 * out. */
static int gdb_kill_at_remove(const char *out)
{
	char cmds[256], pid[32];
	FILE *f;

	snprintf(cmds, sizeof(cmds), "%s/gdb.cmds", srv.dir);
	f = fopen(cmds, "w");
	assert_non_null(f);
	fprintf(f, "set pagination off\n"
		   "set confirm off\n"
		   "handle all nostop noprint pass\n"
		   "break presto_commit if t->op.type == PLOG_REMOVE\n"
		   "echo gdb: running on\\n\n"
		   "continue\n"
		   "kill\n"
		   "quit\n");
	fclose(f);
	snprintf(pid, sizeof(pid), "%d", (int)srv.pid);
	gdb_pid = fork();
	assert_true(gdb_pid >= 0);
	if (gdb_pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp("gdb", "gdb", "-nx", "-batch", "-p", pid, "-x", cmds, (char *)NULL);
		_exit(127);
	}
	for (long long end = now_ms() + 60000; now_ms() < end; usleep(50 * 1000)) {
		if (file_says(out, "gdb: running on"))
			return 0;
		if (file_says(out, "ptrace:"))
			return -1;
		if (waitpid(gdb_pid, NULL, WNOHANG) == gdb_pid) {
			gdb_pid = -1;
			break;
		}
	}
	o_print(out);
	fail_msg("gdb did not start the server again (its output above)");
	return -1;
}

static void test_kill_between_apply_and_append(void **state)
{
	/* the window random kills hardly ever reach: a CREATE answered, then
	 * a REMOVE of its name unlinked but not yet in the log when the
	 * server dies. A replay (--replay=always: the page cache survived)
	 * then finds the CREATE's record and no file. Only the directory's
	 * stamp, set before the CREATE's reply, tells it that the record was
	 * applied and undone since; made again, the file would be a new inode
	 * behind the client's handle (a changed fileid, ESTALE to a kernel
	 * client). The server is stopped there with gdb and killed. */
	struct rpc_context *rpc;
	struct it_fh root, f;
	struct slot rm = { 0, 0 };
	char out[256];
	uint64_t fileid;

	(void)state;
	start_logged(EXPORT_RW, replay_always_no_destage);
	rpc = connect_root(&root);
	assert_int_equal(it_create(rpc, &root, "a", GUARDED, 0644, NULL, &r), NFS3_OK);
	assert_true(r.has_fh && r.has_attr);
	f = r.fh;
	fileid = r.attr.fileid;
	snprintf(out, sizeof(out), "%s/gdb.out", srv.dir);
	if (gdb_kill_at_remove(out) < 0) {
		o_print(out);
		print_message("gdb may not attach to a process here (ptrace refused): skipped\n");
		it_rpc_close(rpc);
		skip();
	}
	REMOVE3args a = { .object = { .dir = it_fh3(&root), .name = "a" } };
	assert_int_equal(rpc_nfs3_remove_async(rpc, slot_cb, &a, &rm), 0);
	pending++;
	/* no reply comes: sent (the client's loop runs while it waits), the
	 * call stops the server in gdb, which kills it and exits */
	for (long long end = now_ms() + 30000; gdb_pid > 0 && now_ms() < end;) {
		if (!rm.done)
			it_wait(rpc, &rm.done, 50);
		else
			usleep(50 * 1000);
		if (waitpid(gdb_pid, NULL, WNOHANG) == gdb_pid)
			gdb_pid = -1;
	}
	it_rpc_close(rpc);
	if (gdb_pid > 0 || !file_says(out, "Breakpoint 1, presto_commit")) {
		o_print(out);
		fail_msg("gdb did not stop the server at the REMOVE's append (its output above)");
	}
	if (access(it_path(&srv, "a"), F_OK) == 0)
		fail_msg("the server died before the REMOVE unlinked the name");
	assert_int_equal(it_server_restart_killed(&srv), 0);

	rpc = it_rpc_connect(&srv, IT_NFS_PROG, 3);
	assert_non_null(rpc);
	int gst = it_getattr(rpc, &f, &r);
	if (gst == NFS3_OK && r.attr.fileid != fileid)
		fail_msg("after the replay the CREATE's handle names fileid %llu, its reply said %llu: "
			 "the CREATE was made again", (unsigned long long)r.attr.fileid,
			 (unsigned long long)fileid);
	assert_int_equal(gst, NFS3ERR_STALE);	/* the REMOVE was applied */
	assert_int_equal(it_lookup(rpc, &root, "a", &r), NFS3ERR_NOENT);
	it_rpc_close(rpc);
}

static void test_lease_does_not_stall_the_loop(void **state)
{
	/* a local process's read lease on a file: an open for writing waits
	 * until the holder gives it back (up to lease-break-time, 45 s). A
	 * WRITE with presto on runs on the loop thread: it must not wait
	 * there, or every client waits with it. A worker waits instead, and
	 * the WRITE is answered once the lease is given back */
	static char data[10] = "LLLLLLLLLL";
	struct wcc_slot w;
	struct slot g = { 0, 0 };
	struct it_fh root, f;
	uint64_t inl0, def0, inl1, def1;

	(void)state;
	signal(SIGIO, SIG_IGN);	/* the lease break's signal */
	start_logged(EXPORT_RW, NULL);
	struct rpc_context *rpc = connect_root(&root);
	struct rpc_context *other = connect_root(&root);
	int lfd = leased_file(rpc, &root, &f);
	loop_stats(&inl0, &def0);
	queue_write(rpc, &f, 0, data, sizeof(data), &w);
	assert_int_equal(it_wait(rpc, &w.done, 300), -1);	/* it waits for the lease */
	GETATTR3args ga = { .object = it_fh3(&root) };
	assert_int_equal(rpc_nfs3_getattr_async(other, slot_cb, &ga, &g), 0);
	pending++;
	bool answered = it_wait(other, &g.done, 5000) == 0;
	assert_int_equal(fcntl(lfd, F_SETLEASE, F_UNLCK), 0);
	close(lfd);
	if (it_wait(rpc, &w.done, IT_TIMEOUT_MS) != 0)
		fail_msg("the WRITE is unanswered after the lease was given back");
	if (!answered)
		fail_msg("a GETATTR on another connection waited with the WRITE for the local "
			 "lease (the event loop thread waited in the open)");
	assert_int_equal(g.status, NFS3_OK);
	assert_int_equal(w.status, NFS3_OK);
	loop_stats(&inl1, &def1);
	assert_true(def1 - def0 >= 1);	/* the WRITE, handed to a worker */
	size_t len;
	char *p = it_read_file(it_path(&srv, "leased"), &len);
	assert_non_null(p);
	assert_int_equal(len, sizeof(data));
	assert_memory_equal(p, data, sizeof(data));
	free(p);
	it_rpc_close(other);
	it_rpc_close(rpc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_small_log_never_drops, test_teardown),
		cmocka_unit_test_teardown(test_held_log_makes_room, test_teardown),
		cmocka_unit_test_teardown(test_append_never_waits_for_a_pad, test_teardown),
		cmocka_unit_test_teardown(test_waiting_call_starts_a_destage, test_teardown),
		cmocka_unit_test_teardown(test_replay_never_rolls_back, test_teardown),
		cmocka_unit_test_teardown(test_replay_restores_lost_writes, test_teardown),
		cmocka_unit_test_teardown(test_creation_refused_an_attribute_is_logged, test_teardown),
		cmocka_unit_test_teardown(test_write_wcc_taken_under_the_stripe, test_teardown),
		cmocka_unit_test_teardown(test_create_cannot_truncate_a_mount, mount_teardown),
		cmocka_unit_test_teardown(test_replay_refuses_other_filesystem, test_teardown),
		cmocka_unit_test_teardown(test_replay_without_remembered_marks, test_teardown),
		cmocka_unit_test_teardown(test_stamps_after_a_failed_record, second_fs_teardown),
		cmocka_unit_test_teardown(test_reload_keeps_marks, test_teardown),
		cmocka_unit_test_teardown(test_second_server_is_refused, test_teardown),
		cmocka_unit_test_teardown(test_state_files_are_private, test_teardown),
		cmocka_unit_test_teardown(test_dropped_export_is_synced_before_trim, drop_teardown),
		cmocka_unit_test_teardown(test_drain_does_not_spin, freeze_teardown),
		cmocka_unit_test_teardown(test_dropped_export_can_be_unmounted, drop_teardown),
		cmocka_unit_test_teardown(test_restart_syncs_dropped_export, drop_teardown),
		cmocka_unit_test_teardown(test_writeback_error_keeps_the_log, wb_teardown),
		cmocka_unit_test_teardown(test_unfinished_replay_resumes, test_teardown),
		cmocka_unit_test_teardown(test_stamp_of_earlier_run_covers_nothing_later, test_teardown),
		cmocka_unit_test_teardown(test_garbled_stamp_covers_nothing, test_teardown),
		cmocka_unit_test_teardown(test_truncation_in_flight_survives_reboot_replay, test_teardown),
		cmocka_unit_test_teardown(test_refused_truncation_leaves_no_mark, test_teardown),
		cmocka_unit_test_teardown(test_retry_of_replay_after_reboot_trusts_no_file_stamp,
					  test_teardown),
		cmocka_unit_test_teardown(test_replay_after_reboot_keeps_directory_stamps, test_teardown),
		cmocka_unit_test_teardown(test_drc_survives_crash, test_teardown),
		cmocka_unit_test_teardown(test_drc_survives_two_crashes, test_teardown),
		cmocka_unit_test_teardown(test_drc_survives_two_crashes_full_log, test_teardown),
		cmocka_unit_test_teardown(test_discarded_record_leaves_no_drc_entry, test_teardown),
		cmocka_unit_test_teardown(test_nopresto_export, test_teardown),
		cmocka_unit_test_teardown(test_presto_off_change_survives_replay, test_teardown),
		cmocka_unit_test_teardown(test_reload_to_nopresto_survives_replay, test_teardown),
		cmocka_unit_test_teardown(test_commit_after_switching_on, test_teardown),
		cmocka_unit_test_teardown(test_switch_many_exports, test_teardown),
		cmocka_unit_test_teardown(test_disable_with_no_exports, test_teardown),
		cmocka_unit_test_teardown(test_changes_inline_or_deferred, test_teardown),
		cmocka_unit_test_teardown(test_batch_stamps_coalesced, test_teardown),
		cmocka_unit_test_teardown(test_stamps_before_replies_of_resumed_calls, test_teardown),
		cmocka_unit_test_teardown(test_kill_between_apply_and_append, gdb_teardown),
		cmocka_unit_test_teardown(test_lease_does_not_stall_the_loop, test_teardown),
		cmocka_unit_test_teardown(test_readdir_inline_small_dirs, test_teardown),
		cmocka_unit_test_teardown(test_export_without_xattrs_writes_through, test_teardown),
		cmocka_unit_test_teardown(test_root_stamp_before_mark, test_teardown),
		cmocka_unit_test_teardown(test_removal_of_one_link_keeps_its_stamp, test_teardown),
		cmocka_unit_test_teardown(test_failed_record_is_not_stamped_over, test_teardown),
		cmocka_unit_test_teardown(test_malformed_handle_is_an_error, test_teardown),
		cmocka_unit_test_teardown(test_record_outside_export_is_refused, test_teardown),
		cmocka_unit_test_teardown(test_record_across_exports_is_refused, test_teardown),
		cmocka_unit_test_teardown(test_bad_redirect_record_is_refused, test_teardown),
		cmocka_unit_test_teardown(test_utime_now_record_is_refused, test_teardown),
		cmocka_unit_test_teardown(test_nul_in_name_record_is_refused, test_teardown),
		cmocka_unit_test_teardown(test_record_without_macs_on_whole_fs, test_teardown),
		cmocka_unit_test_teardown(test_record_without_macs_in_bind_mount, test_teardown),
		cmocka_unit_test_teardown(test_forged_redirect_is_ignored, test_teardown),
		cmocka_unit_test_teardown(test_deferred_call_keeps_drc_entry, test_teardown),
		cmocka_unit_test_teardown(test_lookup_waits_for_namespace_change, test_teardown),
		cmocka_unit_test_teardown(test_replay_killed_before_redirect_resumes, test_teardown),
		cmocka_unit_test_teardown(test_replay_killed_after_logging_redirects, test_teardown),
		cmocka_unit_test_teardown(test_redirect_of_the_later_replay_wins, test_teardown),
	};

	it_init(90);
	return cmocka_run_group_tests_name("integration/presto", tests, NULL, NULL);
}
