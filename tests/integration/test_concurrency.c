/*
 * test_concurrency.c -- several clients at once, each with many calls in
 * flight (libnfs raw async API, one event loop over all connections): every
 * call is answered once and does what it says whatever the interleaving,
 * racing exclusive operations have exactly one winner, and a directory
 * listed while it changes shows every entry that stays exactly once.
 * (Calls in flight together may be executed in any order: a test never
 * queues two calls where the second depends on the first.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define NCLIENTS 8

static struct it_server srv;
static struct it_fh root;
static struct it_res r;
static struct rpc_context *cl[NCLIENTS];

struct slot {
	int done;
	int status;			/* nfsstat3, or -1 for an RPC failure */
};

static int pending;

static void slot_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct slot *s = priv;

	(void)rpc;
	s->done = 1;
	s->status = status == RPC_STATUS_SUCCESS && data ? *(int *)data : -1;
	pending--;
}

/* run_all -- service every client until no call is pending (30 s bound) */
static void run_all(void)
{
	int rc = it_wait_all(cl, NCLIENTS, &pending, 30 * 1000);

	if (rc == -1)
		fail_msg("%d calls still pending after 30 s", pending);
	if (rc < -1)
		fail_msg("client %d: %s", -2 - rc, rpc_get_error(cl[-2 - rc]));
}

static int setup(void **state)
{
	(void)state;
	it_res_init(&r);
	if (it_server_start(&srv, "127.0.0.1(rw,insecure,no_root_squash)") < 0)
		return -1;
	if (it_root_fh(&srv, &root) != MNT3_OK)
		return -1;
	for (int i = 0; i < NCLIENTS; i++)
		if (!(cl[i] = it_rpc_connect(&srv, IT_NFS_PROG, 3)))
			return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < NCLIENTS; i++)
		it_rpc_close(cl[i]);
	it_res_free(&r);
	return it_server_stop(&srv);
}

static void test_race_exclusive_create(void **state)
{
	/* the same name from every client at once: exactly one winner */
	static struct slot s[NCLIENTS * 3];
	int ok;

	(void)state;
	for (int round = 0; round < 3; round++) {
		char name[32];

		snprintf(name, sizeof(name), "race-%d", round);
		for (int i = 0; i < NCLIENTS; i++) {
			struct slot *sl = &s[round * NCLIENTS + i];

			if (round < 2) {
				CREATE3args a;

				memset(&a, 0, sizeof(a));
				a.where.dir = it_fh3(&root);
				a.where.name = name;
				a.how.mode = round == 0 ? GUARDED : EXCLUSIVE;
				if (round == 1)
					memcpy(a.how.createhow3_u.verf, "verf-00", 7),
					a.how.createhow3_u.verf[7] = (char)('0' + i);
				assert_int_equal(rpc_nfs3_create_async(cl[i], slot_cb, &a, sl), 0);
			} else {
				MKDIR3args a;

				memset(&a, 0, sizeof(a));
				a.where.dir = it_fh3(&root);
				a.where.name = name;
				assert_int_equal(rpc_nfs3_mkdir_async(cl[i], slot_cb, &a, sl), 0);
			}
			pending++;
		}
	}
	run_all();
	for (int round = 0; round < 3; round++) {
		ok = 0;
		for (int i = 0; i < NCLIENTS; i++) {
			int st = s[round * NCLIENTS + i].status;

			if (st == NFS3_OK)
				ok++;
			else if (st != NFS3ERR_EXIST)
				fail_msg("round %d client %d: status %d, want OK or EXIST", round, i, st);
		}
		if (ok != 1)
			fail_msg("round %d (%s): %d winners, want exactly 1", round,
				 round == 0 ? "GUARDED" : round == 1 ? "EXCLUSIVE" : "MKDIR", ok);
	}
}

static void test_race_guarded_setattr(void **state)
{
	/* every client sends a SETATTR guarded by the same ctime at once: the
	 * check and the change are one step (RFC 1813, 3.3.2), so exactly one
	 * wins and the others get NFS3ERR_NOT_SYNC (two won, now and then,
	 * while the guard was checked before the object was locked) */
	static struct slot s[NCLIENTS];
	struct it_fh f;

	(void)state;
	assert_int_equal(it_create(cl[0], &root, "guarded", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	for (int round = 0; round < 40; round++) {
		assert_int_equal(it_getattr(cl[0], &f, &r), NFS3_OK);
		nfstime3 ctime = r.attr.ctime;
		for (int i = 0; i < NCLIENTS; i++) {
			SETATTR3args a;

			memset(&a, 0, sizeof(a));
			a.object = it_fh3(&f);
			a.new_attributes.mode.set_it = 1;
			a.new_attributes.mode.set_mode3_u.mode = 0600 + (unsigned)i;
			a.guard.check = 1;
			a.guard.sattrguard3_u.obj_ctime = ctime;
			s[i] = (struct slot){ 0, 0 };
			assert_int_equal(rpc_nfs3_setattr_async(cl[i], slot_cb, &a, &s[i]), 0);
			pending++;
		}
		run_all();
		int ok = 0;
		for (int i = 0; i < NCLIENTS; i++) {
			if (s[i].status == NFS3_OK)
				ok++;
			else if (s[i].status != NFS3ERR_NOT_SYNC)
				fail_msg("round %d client %d: status %d, want OK or NOT_SYNC", round, i,
					 s[i].status);
		}
		if (ok != 1)
			fail_msg("round %d: %d guarded SETATTRs won, want exactly 1", round, ok);
	}
}

static void test_parallel_writes_one_file(void **state)
{
	/* every client writes its own interleaved 16 KiB stripes of one file */
	enum { STRIPE = 16384, PER = 24 };
	static char data[NCLIENTS * PER * STRIPE];
	static struct slot s[NCLIENTS * PER];
	struct it_fh f;
	size_t len;
	char *p;

	(void)state;
	it_fill(data, sizeof(data), 99);
	assert_int_equal(it_create(cl[0], &root, "striped", UNCHECKED, 0644, NULL, &r), NFS3_OK);
	f = r.fh;
	for (int k = 0; k < PER; k++)
		for (int i = 0; i < NCLIENTS; i++) {
			size_t off = ((size_t)k * NCLIENTS + (size_t)i) * STRIPE;
			WRITE3args a = it_write3(&f, off, data + off, STRIPE,
						 k % 3 == 0 ? FILE_SYNC : UNSTABLE);

			assert_int_equal(rpc_nfs3_write_async(cl[i], slot_cb, &a, &s[k * NCLIENTS + i]), 0);
			pending++;
		}
	run_all();
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		assert_int_equal(s[i].status, NFS3_OK);
	{
		COMMIT3args c = { .file = it_fh3(&f) };

		assert_int_equal(it_nfs3(cl[0], NFS3_COMMIT, &c, &r), NFS3_OK);
	}
	p = it_read_file(it_path(&srv, "striped"), &len);
	assert_non_null(p);
	assert_int_equal(len, sizeof(data));
	if (memcmp(p, data, len) != 0) {
		for (size_t i = 0; i < len; i += STRIPE)
			if (memcmp(p + i, data + i, STRIPE))
				fail_msg("stripe at offset %zu differs", i);
	}
	free(p);
}

static void test_namespace_storm(void **state)
{
	/* per client: create 40 files, then (in flight together) write each,
	 * rename it, and remove every third; the result is exactly what was
	 * asked, whatever the interleaving between clients */
	enum { N = 40 };
	static struct slot s[NCLIENTS * N * 3];
	static struct it_fh fh[NCLIENTS][N];
	char name[64], to[64];
	int k = 0;

	(void)state;
	assert_int_equal(it_mkdir(cl[0], &root, "storm", 0777, &r), NFS3_OK);
	{
		struct it_fh d = r.fh;

		for (int i = 0; i < NCLIENTS; i++)
			for (int j = 0; j < N; j++) {
				snprintf(name, sizeof(name), "c%d-f%d", i, j);
				assert_int_equal(it_create(cl[i], &d, name, GUARDED, 0644, NULL, &r), NFS3_OK);
				fh[i][j] = r.fh;
			}
		for (int j = 0; j < N; j++)
			for (int i = 0; i < NCLIENTS; i++) {
				RENAME3args rn;

				snprintf(name, sizeof(name), "c%d-f%d", i, j);
				snprintf(to, sizeof(to), "c%d-g%d", i, j);
				WRITE3args w = it_write3(&fh[i][j], 0, name, (uint32_t)strlen(name),
							 FILE_SYNC);
				assert_int_equal(rpc_nfs3_write_async(cl[i], slot_cb, &w, &s[k++]), 0);
				rn.from.dir = it_fh3(&d);
				rn.from.name = name;
				rn.to.dir = it_fh3(&d);
				rn.to.name = to;
				assert_int_equal(rpc_nfs3_rename_async(cl[i], slot_cb, &rn, &s[k++]), 0);
				pending += 2;
			}
		run_all();
		/* calls in flight together may run in any order (a client waits
		 * for the reply of the RENAME before it removes the new name) */
		for (int j = 0; j < N; j += 3)
			for (int i = 0; i < NCLIENTS; i++) {
				REMOVE3args rm;

				snprintf(to, sizeof(to), "c%d-g%d", i, j);
				rm.object.dir = it_fh3(&d);
				rm.object.name = to;
				assert_int_equal(rpc_nfs3_remove_async(cl[i], slot_cb, &rm, &s[k++]), 0);
				pending++;
			}
		run_all();
		for (int i = 0; i < k; i++)
			if (s[i].status != NFS3_OK)
				fail_msg("call %d of the storm: status %d", i, s[i].status);
	}
	for (int i = 0; i < NCLIENTS; i++)
		for (int j = 0; j < N; j++) {
			char rel[96];
			struct stat st;
			int there;

			snprintf(rel, sizeof(rel), "storm/c%d-f%d", i, j);
			assert_int_not_equal(lstat(it_path(&srv, rel), &st), 0);
			snprintf(rel, sizeof(rel), "storm/c%d-g%d", i, j);
			there = lstat(it_path(&srv, rel), &st) == 0;
			if (there != (j % 3 != 0))
				fail_msg("%s: %s", rel, there ? "still there" : "missing");
			if (there) {
				snprintf(name, sizeof(name), "c%d-f%d", i, j);
				assert_int_equal(st.st_size, strlen(name));
			}
		}
}

static void test_readdir_while_changing(void **state)
{
	/* list 400 entries 1 KiB at a time while another client removes and
	 * creates other entries: every entry that stays is seen exactly once
	 * (a BAD_COOKIE answer restarts the listing, as a client would) */
	enum { N = 400 };
	static int seen[N];
	struct it_res g;
	struct it_fh d;
	uint64_t cookie = 0;
	char verf[8] = { 0 }, name[300];
	int calls = 0, restarts = 0, churn = 0;

	(void)state;
	it_res_init(&g);
	assert_int_equal(it_mkdir(cl[0], &root, "churn", 0777, &r), NFS3_OK);
	d = r.fh;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "%s/churn/stay-%03d", srv.export, i);
		assert_int_equal(it_write_file(name, "", 0, 0644), 0);
		snprintf(name, sizeof(name), "%s/churn/go-%03d", srv.export, i);
		assert_int_equal(it_write_file(name, "", 0, 0644), 0);
	}
	memset(seen, 0, sizeof(seen));
	for (;;) {
		READDIR3args a = { .dir = it_fh3(&d), .cookie = cookie, .count = 1024 };
		int st;

		memcpy(a.cookieverf, verf, 8);
		st = it_nfs3(cl[0], NFS3_READDIR, &a, &r);
		calls++;
		if (st == NFS3ERR_BAD_COOKIE && restarts < 3) {
			restarts++;
			cookie = 0;
			memset(verf, 0, 8);
			memset(seen, 0, sizeof(seen));
			continue;
		}
		assert_int_equal(st, NFS3_OK);
		for (size_t i = 0; i < r.nents; i++) {
			int k;

			if (sscanf(r.ents[i].name, "stay-%d", &k) == 1) {
				assert_true(k >= 0 && k < N);
				if (seen[k]++)
					fail_msg("stay-%03d listed twice (READDIR call %d)", k, calls);
			}
		}
		if (r.nents)
			cookie = r.ents[r.nents - 1].cookie;
		memcpy(verf, r.verf, 8);
		if (r.eof)
			break;
		assert_true(calls < 10000);
		/* churn between the calls, through another client */
		for (int c = 0; c < 10 && churn < N; c++, churn++) {
			snprintf(name, sizeof(name), "go-%03d", churn);
			assert_int_equal(it_remove(cl[1], &d, name, &g), NFS3_OK);
			snprintf(name, sizeof(name), "new-%03d", churn);
			assert_int_equal(it_create(cl[1], &d, name, UNCHECKED, 0644, NULL, &g), NFS3_OK);
		}
	}
	for (int k = 0; k < N; k++)
		if (seen[k] != 1)
			fail_msg("stay-%03d listed %d times", k, seen[k]);
	print_message("%d READDIR calls, %d restarts, %d changes\n", calls, restarts, churn);
	it_res_free(&g);
}

/* flip_start -- make DIRNAME with p, q and x (a link to q), and fork a
 * local process that renames p and q over x in turn (at most 30 s): x is
 * always p's or q's inode, each of which keeps a name, so a handle of x
 * never goes stale. Returns the process; *d is the directory's handle, *t0
 * the time it started. */
static pid_t flip_start(const char *dirname, struct it_fh *d, struct timespec *t0)
{
	char path[300], q[330], x[330];

	assert_int_equal(it_mkdir(cl[0], &root, dirname, 0777, &r), NFS3_OK);
	*d = r.fh;
	for (const char *n = "pq"; *n; n++) {
		snprintf(path, sizeof(path), "%s/%s/%c", srv.export, dirname, *n);
		assert_int_equal(it_write_file(path, n, 1, 0644), 0);
	}
	snprintf(path, sizeof(path), "%s/%s", srv.export, dirname);
	snprintf(q, sizeof(q), "%s/q", path);
	snprintf(x, sizeof(x), "%s/x", path);
	assert_int_equal(link(q, x), 0);	/* (of p, the first rename would do nothing) */
	pid_t kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		alarm(30);
		if (chdir(path) < 0)
			_exit(1);
		for (;;) {
			if (link("p", "t1") == 0)
				rename("t1", "x");
			if (link("q", "t2") == 0)
				rename("t2", "x");
		}
	}
	clock_gettime(CLOCK_MONOTONIC, t0);
	return kid;
}

static void flip_stop(pid_t kid)
{
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
}

/* flip_check -- the handle of x (fh) names the inode whose attributes came
 * with it (fileid), as GETATTR of the handle shows; else stop kid and fail */
static void flip_check(pid_t kid, const char *what, int call, const struct it_fh *fh,
		       uint64_t fileid, struct it_res *g)
{
	assert_int_equal(it_getattr(cl[1], fh, g), NFS3_OK);
	if (g->attr.fileid == fileid)
		return;
	flip_stop(kid);
	fail_msg("%s call %d: x has the attributes of inode %llu and the handle of inode %llu",
		 what, call, (unsigned long long)fileid, (unsigned long long)g->attr.fileid);
}

static bool flip_time_left(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000 < 3000;
}

static void test_readdirplus_while_renamed_over(void **state)
{
	/* a local process renames two files over "x" in turn while READDIRPLUS
	 * lists it: each entry's attributes and handle are of one inode, as
	 * GETATTR of the handle shows (looking the name up twice paired one
	 * file's attributes with the other's handle). At most 3 s. */
	struct it_res g;
	struct it_fh d;
	int calls = 0, checked = 0;

	(void)state;
	it_res_init(&g);
	struct timespec t0;
	pid_t kid = flip_start("flip", &d, &t0);
	do {
		READDIRPLUS3args a = { .dir = it_fh3(&d), .dircount = 4096, .maxcount = 16384 };

		assert_int_equal(it_nfs3(cl[0], NFS3_READDIRPLUS, &a, &r), NFS3_OK);
		calls++;
		for (size_t i = 0; i < r.nents; i++) {
			struct it_dirent *e = &r.ents[i];

			if (strcmp(e->name, "x") != 0 || !e->has_attr || !e->has_fh)
				continue;
			flip_check(kid, "READDIRPLUS", calls, &e->fh, e->attr.fileid, &g);
			checked++;
		}
	} while (calls < 5000 && flip_time_left(&t0));
	flip_stop(kid);
	assert_true(checked > 0);
	print_message("%d READDIRPLUS calls, %d entries x checked\n", calls, checked);
	it_res_free(&g);
}

static void test_lookup_while_renamed_over(void **state)
{
	/* the same for LOOKUP of x: its handle and its object attributes are
	 * of one inode. At most 3 s. */
	struct it_res g;
	struct it_fh d;
	int calls = 0, checked = 0;

	(void)state;
	it_res_init(&g);
	struct timespec t0;
	pid_t kid = flip_start("flip-lookup", &d, &t0);
	do {
		assert_int_equal(it_lookup(cl[0], &d, "x", &r), NFS3_OK);
		calls++;
		if (!r.has_fh || !r.has_attr)
			continue;
		flip_check(kid, "LOOKUP", calls, &r.fh, r.attr.fileid, &g);
		checked++;
	} while (calls < 20000 && flip_time_left(&t0));
	flip_stop(kid);
	assert_true(checked > 0);
	print_message("%d LOOKUP calls, %d checked\n", calls, checked);
	it_res_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_race_exclusive_create),
		cmocka_unit_test(test_race_guarded_setattr),
		cmocka_unit_test(test_parallel_writes_one_file),
		cmocka_unit_test(test_namespace_storm),
		cmocka_unit_test(test_readdir_while_changing),
		cmocka_unit_test(test_readdirplus_while_renamed_over),
		cmocka_unit_test(test_lookup_while_renamed_over),
	};

	it_init(58);
	return cmocka_run_group_tests_name("integration/concurrency", tests, setup, teardown);
}
