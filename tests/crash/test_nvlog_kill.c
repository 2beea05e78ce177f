/*
 * test_nvlog_kill.c -- the NVRAM log under SIGKILL, with real processes.
 *
 * The parent runs rounds: it starts a child (this program re-executed with
 * --child, alternately with PMEM_IS_PMEM_FORCE=1), which opens the log and
 * appends from four threads (a fifth trims, as the destager would), reporting each acknowledged LSN and its payload
 * key on a pipe (and each trim before it calls it); after a random delay the
 * parent SIGKILLs it, drains the pipe, reopens the log and checks that the
 * scan holds every acknowledged record that was not trimmed exactly once, in
 * LSN order, with its payload; records it finds beyond those (durable but not
 * yet acknowledged when the child died) must be whole and must stay from then
 * on. At least 200 kills, capped at 60 seconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache/nvlog.h"

#define LOG_SIZE (1u << 20)
#define THREADS 4
#define MIN_KILLS 200
#define MAX_SECONDS 60
#define MSG_ACK 1
#define MSG_TRIM 2
#define MSG_ERR 3
#define MSG_READY 4

struct msg {
	uint64_t kind;
	uint64_t lsn;  /* ACK: the LSN; TRIM: upto; ERR: -rc */
	uint64_t key;
};

static size_t key_len(uint64_t key)
{
	return 16 + (size_t)((key * 2654435761u) % 3000);
}

static void key_fill(uint8_t *buf, uint64_t key, size_t n)
{
	memcpy(buf, &key, 8);
	memcpy(buf + 8, &n, 8);
	for (size_t i = 16; i < n; i++)
		buf[i] = (uint8_t)(key ^ (key >> 13) ^ (i * 29));
}

/* ---- the child ---- */

static struct nvlog *child_log;
static int child_fd;
static uint64_t child_round;

static void child_send(uint64_t kind, uint64_t lsn, uint64_t key)
{
	struct msg m = { kind, lsn, key };
	if (write(child_fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
		_exit(3);
}

static void *child_thread(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;
	uint8_t buf[3100];
	for (uint64_t seq = 0;; seq++) {
		uint64_t key = child_round << 40 | id << 32 | seq, lsn;
		size_t n = key_len(key);
		key_fill(buf, key, n);
		struct iovec iov[2] = { { buf, 8 }, { buf + 8, n - 8 } };
		int rc;
		if (seq % 4 == 3) {
			rc = nvlog_append_nowait(child_log, 7, iov, 2, &lsn);
			if (rc == 0)
				rc = nvlog_wait(child_log, lsn);
		} else {
			rc = nvlog_append(child_log, 7, iov, 2, &lsn);
		}
		if (rc == -EAGAIN)
			continue;
		if (rc) {
			child_send(MSG_ERR, (uint64_t)-rc, key);
			_exit(2);
		}
		child_send(MSG_ACK, lsn, key);
	}
	return NULL;
}

/* the destager: keeps the last 300 records, announcing each trim first */
static void *child_trimmer(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
		uint64_t d = nvlog_durable_lsn(child_log);
		if (d > 300) {
			child_send(MSG_TRIM, d - 300, 0);
			int rc = nvlog_trim(child_log, d - 300);
			if (rc) {
				child_send(MSG_ERR, (uint64_t)-rc, 0);
				_exit(2);
			}
		}
	}
	return NULL;
}

static int child_main(const char *path, int fd, uint64_t round)
{
	struct nvlog_opts o = { .full_wait_ms = 100 };
	child_fd = fd;
	child_round = round;
	int rc = nvlog_open(path, &o, &child_log);
	if (rc) {
		child_send(MSG_ERR, (uint64_t)-rc, 0);
		return 2;
	}
	child_send(MSG_READY, 0, 0);
	pthread_t th[THREADS], tt;
	pthread_create(&tt, NULL, child_trimmer, NULL);
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, child_thread, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	return 0;
}

/* ---- the parent ---- */

static char tdir[64], logpath[128], self[4096];
static uint64_t *expect; /* key expected at each LSN (0: none known) */
static size_t expect_cap;
static uint64_t trimmed;  /* highest trim upto announced */
static uint64_t acked_total, unacked_found;
static bool child_ready;

static void expect_set(uint64_t lsn, uint64_t key)
{
	if (lsn >= expect_cap) {
		size_t ncap = expect_cap ? expect_cap : 1 << 16;
		while (ncap <= lsn)
			ncap *= 2;
		expect = realloc(expect, ncap * sizeof(*expect));
		memset(expect + expect_cap, 0, (ncap - expect_cap) * sizeof(*expect));
		expect_cap = ncap;
	}
	if (expect[lsn] && expect[lsn] != key)
		fail_msg("LSN %llu acknowledged with key %llx, earlier %llx", (unsigned long long)lsn,
		    (unsigned long long)key, (unsigned long long)expect[lsn]);
	expect[lsn] = key;
}

static void handle(const struct msg *m)
{
	switch (m->kind) {
	case MSG_ACK:
		assert_int_not_equal(m->key, 0);
		expect_set(m->lsn, m->key);
		acked_total++;
		break;
	case MSG_TRIM:
		if (m->lsn > trimmed)
			trimmed = m->lsn;
		break;
	case MSG_READY:
		child_ready = true;
		break;
	case MSG_ERR:
		fail_msg("child failed: %s (key %llx)", strerror((int)m->lsn), (unsigned long long)m->key);
		break;
	default:
		fail_msg("bad message kind %llu", (unsigned long long)m->kind);
	}
}

struct reader {
	uint8_t buf[sizeof(struct msg) * 512];
	size_t have;
};

/* drain -- read what is there (until EOF when wait_eof), handling messages */
static bool drain(int fd, struct reader *r, int timeout_ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	if (poll(&p, 1, timeout_ms) <= 0)
		return true;
	ssize_t n = read(fd, r->buf + r->have, sizeof(r->buf) - r->have);
	if (n <= 0)
		return false; /* EOF */
	r->have += (size_t)n;
	size_t done = 0;
	while (r->have - done >= sizeof(struct msg)) {
		struct msg m;
		memcpy(&m, r->buf + done, sizeof(m));
		handle(&m);
		done += sizeof(m);
	}
	memmove(r->buf, r->buf + done, r->have - done);
	r->have -= done;
	return true;
}

struct verify {
	uint64_t prev, n;
	uint64_t first, last;
};

static int verify_cb(void *arg, const struct nvlog_rec *rec)
{
	struct verify *v = arg;
	uint8_t buf[3100];
	uint64_t key;
	if (v->prev)
		assert_int_equal(rec->lsn, v->prev + 1); /* in order, each once */
	else
		v->first = rec->lsn;
	v->prev = v->last = rec->lsn;
	v->n++;
	assert_true(rec->len >= 16);
	memcpy(&key, rec->payload, 8);
	assert_int_equal(rec->len, key_len(key));
	key_fill(buf, key, rec->len);
	assert_memory_equal(rec->payload, buf, rec->len);
	if (rec->lsn < expect_cap && expect[rec->lsn]) {
		assert_int_equal(expect[rec->lsn], key);
	} else {
		expect_set(rec->lsn, key); /* durable now: it must stay */
		unacked_found++;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_kill_loop(void **state)
{
	(void)state;
	struct nvlog_opts fo = { .flags = NVLOG_O_FORCE };
	assert_int_equal(nvlog_format(logpath, LOG_SIZE, &fo), 0);
	double t0 = now_s();
	uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
	int kills = 0, torn = 0;
	uint64_t max_lsn = 0;
	print_message("seed %llu\n", (unsigned long long)seed);
	for (uint64_t round = 1; kills < MIN_KILLS && now_s() - t0 < MAX_SECONDS; round++) {
		int pfd[2];
		assert_int_equal(pipe(pfd), 0);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(pfd[0]);
			char fdarg[16], rarg[24];
			snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
			snprintf(rarg, sizeof(rarg), "%llu", (unsigned long long)round);
			if (round % 2)
				setenv("PMEM_IS_PMEM_FORCE", "1", 1);
			else
				unsetenv("PMEM_IS_PMEM_FORCE");
			execl(self, self, "--child", logpath, fdarg, rarg, (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		fcntl(pfd[0], F_SETPIPE_SZ, 1 << 20); /* room for every ack of a round */
		/* a random moment: one round in four from the start (during exec
		 * and open), the others within 12 ms of the child being ready */
		bool from_start = (seed >> 33) % 4 == 0;
		int delay_us = from_start ? (int)((seed >> 20) % 5000) : (int)((seed >> 20) % 12000);
		struct reader r = { .have = 0 };
		child_ready = false;
		if (!from_start) {
			/* wait for the child to be ready, then leave it alone: reading
			 * each ack as it comes would cost it a context switch each */
			double until = now_s() + 2.0;
			while (!child_ready && now_s() < until)
				if (!drain(pfd[0], &r, 10))
					break;
		}
		struct timespec ts = { 0, (long)delay_us * 1000L };
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
			fail_msg("child ended by itself (status %#x)", st);
		kills++;
		while (drain(pfd[0], &r, 1000))
			;
		assert_int_equal(r.have, 0);
		close(pfd[0]);

		/* recovery */
		struct nvlog *log;
		assert_int_equal(nvlog_open(logpath, NULL, &log), 0);
		struct nvlog_info in;
		nvlog_info(log, &in);
		if (in.open_scan.end == NVLOG_SCAN_CORRUPT)
			fail_msg("round %llu: corruption reported at LSN %llu offset %llu (%s)",
			    (unsigned long long)round, (unsigned long long)in.open_scan.bad_lsn,
			    (unsigned long long)in.open_scan.bad_offset, in.open_scan.why);
		torn += in.open_scan.end == NVLOG_SCAN_TORN;
		struct verify v = { 0, 0, 0, 0 };
		assert_int_equal(nvlog_scan(log, verify_cb, &v, NULL), 0);
		assert_true(in.tail_lsn <= trimmed + 1);
		/* every acknowledged (or earlier recovered) record past the tail is there */
		uint64_t top = expect_cap;
		while (top > 0 && !expect[top - 1])
			top--;
		for (uint64_t l = in.tail_lsn; l < top; l++) {
			if (expect[l] && (l < in.tail_lsn || l > in.head_lsn))
				fail_msg("round %llu: acknowledged LSN %llu missing (tail %llu head %llu)",
				    (unsigned long long)round, (unsigned long long)l,
				    (unsigned long long)in.tail_lsn, (unsigned long long)in.head_lsn);
		}
		if (top > 0)
			assert_true(in.head_lsn >= top - 1);
		assert_int_equal(v.n, in.head_lsn - in.tail_lsn + 1);
		if (v.n)
			assert_int_equal(v.first, in.tail_lsn);
		max_lsn = in.head_lsn;
		nvlog_close(log, false);
	}
	print_message("%d kills in %.1f s, %llu acknowledged appends, last LSN %llu, "
	    "%d recoveries dropped a torn record, %llu unacknowledged records found durable\n",
	    kills, now_s() - t0, (unsigned long long)acked_total, (unsigned long long)max_lsn, torn,
	    (unsigned long long)unacked_found);
	assert_true(kills >= MIN_KILLS);
	assert_true(acked_total > 1000);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tdir, sizeof(tdir), "/dev/shm/test_nvlog_kill.XXXXXX");
	assert_non_null(mkdtemp(tdir));
	snprintf(logpath, sizeof(logpath), "%s/log", tdir);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	free(expect);
	return system(cmd);
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_loop),
	};
	return cmocka_run_group_tests_name("nvlog_kill", tests, setup, teardown);
}
