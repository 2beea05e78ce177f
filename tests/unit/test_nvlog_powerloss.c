/*
 * test_nvlog_powerloss.c -- power-loss simulation in the style of SQLite's
 * test6.c. The log's persistence goes through a simulated ops table that
 * keeps a "durable image" of the file: a persist copies its range (widened to
 * cache lines) from the mapping into the image. At the Nth persist the
 * simulation "loses power": that persist and every later one fail, and the
 * file is replaced by the durable image in which every 8-byte word that was
 * written but not persisted has either been dropped, landed, or been
 * garbled, chosen per cache line. The log is then reopened with the real ops
 * and must hold every acknowledged record, once, in order, with its payload.
 * The sweep runs every N from the first persist (the epoch bump at open) to
 * past the last, single-threaded and with four threads, on a log of the
 * current version, on a version-1 log, and on an empty version-1 log that the
 * open under simulation turns into version 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache/nvlog.h"
#include "cache/nvlog_format.h"

#define LOG_SIZE (NVLOG_AREA_OFF + 65536)
#define LINE 64

struct sim {
	uint8_t *base;
	size_t len;
	uint8_t *durable;
	uint8_t *cut;   /* the mapping at the moment of the power cut */
	pthread_mutex_t mu;
	int persists;
	int crash_at;   /* 0: never */
	bool crashed;
	uint64_t seed;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void sim_mapped(void *ctx, void *base, size_t len)
{
	struct sim *s = ctx;
	s->base = base;
	s->len = len;
	memcpy(s->durable, base, len); /* the file as it was when mapped */
}

static void sim_copy(void *ctx, void *dst, const void *src, size_t n)
{
	(void)ctx;
	memcpy(dst, src, n);
}

static void sim_drain(void *ctx)
{
	(void)ctx;
}

static int sim_persist(void *ctx, const void *addr, size_t n)
{
	struct sim *s = ctx;
	int rc = 0;
	pthread_mutex_lock(&s->mu);
	if (s->crashed) {
		rc = -EIO;
	} else if (++s->persists == s->crash_at) {
		s->crashed = true; /* this persist never completes */
		memcpy(s->cut, s->base, s->len);
		rc = -EIO;
	} else {
		size_t a = (size_t)((const uint8_t *)addr - s->base), b = a + n;
		a &= ~(size_t)(LINE - 1);
		b = (b + LINE - 1) & ~(size_t)(LINE - 1);
		if (b > s->len)
			b = s->len;
		memcpy(s->durable + a, s->base + a, b - a);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static const struct nvlog_persist_ops sim_ops_tmpl = {
	.name = "sim", .copy = sim_copy, .drain = sim_drain, .persist = sim_persist,
	.mapped = sim_mapped,
};

/*
 * sim_crash_image -- what the medium holds after the power cut: the durable
 * image, plus for each cache line with unpersisted words one fate: dropped,
 * landed, each word landed or not, or garbled (random bytes in those words).
 */
static void sim_crash_image(struct sim *s, uint8_t *img, bool drop_all)
{
	memcpy(img, s->durable, s->len);
	if (drop_all)
		return;
	for (size_t l = 0; l < s->len; l += LINE) {
		if (memcmp(s->cut + l, s->durable + l, LINE) == 0)
			continue;
		int fate = (int)(rnd(&s->seed) % 4);
		for (size_t w = l; w < l + LINE; w += 8) {
			if (memcmp(s->cut + w, s->durable + w, 8) == 0)
				continue;
			if (fate == 1 || (fate == 2 && (rnd(&s->seed) & 1))) {
				memcpy(img + w, s->cut + w, 8);
			} else if (fate == 3) {
				uint64_t g = rnd(&s->seed);
				memcpy(img + w, &g, 8);
			}
		}
	}
}

/* ---- the workload ---- */

struct acked {
	pthread_mutex_t mu;
	uint64_t lsn[8192];
	uint64_t key[8192];
	int n;
	uint64_t trimmed; /* the highest upto of a trim called (it may land even if it failed) */
};

static void fill(uint8_t *buf, uint64_t key, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(key * 131 + i * 7);
}

static size_t key_len(uint64_t key)
{
	return 8 + (size_t)((key * 2654435761u) % 2600);
}

/* append record `key`; payload = key followed by a pattern of it */
static int put(struct nvlog *log, uint64_t key, bool nowait, struct acked *a)
{
	uint8_t buf[2700];
	size_t n = key_len(key);
	memcpy(buf, &key, 8);
	fill(buf + 8, key, n - 8);
	struct iovec iov[2] = { { buf, 8 }, { buf + 8, n - 8 } };
	uint64_t lsn;
	int rc = nowait ? nvlog_append_nowait(log, 5, iov, 2, &lsn) : nvlog_append(log, 5, iov, 2, &lsn);
	if (rc == 0 && nowait)
		rc = nvlog_wait(log, lsn);
	if (rc == 0) {
		pthread_mutex_lock(&a->mu);
		a->lsn[a->n] = lsn;
		a->key[a->n] = key;
		a->n++;
		pthread_mutex_unlock(&a->mu);
	}
	return rc;
}

struct worker {
	struct nvlog *log;
	struct acked *a;
	int id, nthreads, count;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < w->count; i++) {
		uint64_t key = (uint64_t)w->id << 32 | (uint64_t)i;
		if (put(w->log, key, i % 3 == 1, w->a))
			break;
		if (i % 9 == 8) {
			/* the destager: everything but the last few is elsewhere */
			uint64_t d = nvlog_durable_lsn(w->log);
			if (d > 12) {
				pthread_mutex_lock(&w->a->mu);
				if (d - 12 > w->a->trimmed)
					w->a->trimmed = d - 12;
				pthread_mutex_unlock(&w->a->mu);
				if (nvlog_trim(w->log, d - 12))
					break;
			}
		}
	}
	return NULL;
}

struct check {
	struct acked *a;
	uint64_t prev;
	uint64_t n;
	uint8_t *found; /* per acked index */
};

static int check_cb(void *arg, const struct nvlog_rec *r)
{
	struct check *c = arg;
	uint64_t key;
	uint8_t buf[2700];
	assert_true(r->lsn > c->prev);
	if (c->prev)
		assert_int_equal(r->lsn, c->prev + 1);
	c->prev = r->lsn;
	assert_int_equal(r->type, 5);
	assert_true(r->len >= 8);
	memcpy(&key, r->payload, 8);
	assert_int_equal(r->len, key_len(key)); /* every record found is whole */
	fill(buf, key, r->len - 8);
	assert_memory_equal((const uint8_t *)r->payload + 8, buf, r->len - 8);
	for (int i = 0; i < c->a->n; i++) {
		if (c->a->lsn[i] == r->lsn) {
			assert_int_equal(c->a->key[i], key);
			c->found[i]++;
		}
	}
	c->n++;
	return 0;
}

/* the log's format at the start of a run */
enum start {
	START_V2,       /* the current version, 20 acknowledged records */
	START_V1,       /* version 1 (8-byte records): one written by hand, then 20 */
	START_V1_EMPTY, /* version 1, empty: the simulated open turns it into version 2 */
};

/* make the fresh log at path version 1, with one record (key) if key != 0 */
static void make_v1(const char *path, uint64_t key, struct acked *a)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct nvlog_sb sb;
	assert_int_equal(pread(fd, &sb, sizeof(sb), NVLOG_SB_SLOT_OFF0), (ssize_t)sizeof(sb));
	sb.version = NVLOG_VERSION_V1;
	sb.crc = nvlog_sb_crc(&sb);
	assert_int_equal(pwrite(fd, &sb, sizeof(sb), NVLOG_SB_SLOT_OFF0), (ssize_t)sizeof(sb));
	if (key) {
		uint8_t buf[NVLOG_HDR_SIZE + 2700];
		size_t n = key_len(key);
		memcpy(buf + NVLOG_HDR_SIZE, &key, 8);
		fill(buf + NVLOG_HDR_SIZE + 8, key, n - 8);
		struct nvlog_rec_hdr h = {
			.len = (uint32_t)n, .type = 5, .epoch = (uint32_t)sb.boot_epoch, .lsn = 1,
		};
		h.crc = nvlog_rec_crc(sb.salt, &h, buf + NVLOG_HDR_SIZE);
		memcpy(buf, &h, sizeof(h));
		assert_int_equal(pwrite(fd, buf, NVLOG_HDR_SIZE + n, NVLOG_AREA_OFF),
		    (ssize_t)(NVLOG_HDR_SIZE + n));
		a->lsn[a->n] = 1;
		a->key[a->n] = key;
		a->n++;
	}
	close(fd);
}

/*
 * one_run -- a fresh log (see enum start), then the workload with the
 * simulated ops, crashing at persist crash_at (0: never). Returns the number
 * of persists the run made.
 */
static int one_run(const char *path, int crash_at, int nthreads, uint64_t seed, bool drop_all,
    enum start start)
{
	struct acked *a = calloc(1, sizeof(*a));
	pthread_mutex_init(&a->mu, NULL);
	struct nvlog_opts fo = { .flags = NVLOG_O_FORCE };
	assert_int_equal(nvlog_format(path, LOG_SIZE, &fo), 0);
	struct nvlog *log;
	struct nvlog_opts o = { .full_wait_ms = 20 };
	struct nvlog_info in;
	if (start != START_V2)
		make_v1(path, start == START_V1 ? 0xfd00000000ull : 0, a);
	if (start != START_V1_EMPTY) {
		assert_int_equal(nvlog_open(path, &o, &log), 0);
		nvlog_info(log, &in);
		assert_int_equal(in.version, start == START_V1 ? NVLOG_VERSION_V1 : NVLOG_VERSION);
		for (uint64_t k = 0; k < 20; k++)
			assert_int_equal(put(log, 0xff00000000ull + k, false, a), 0);
		nvlog_close(log, false);
	}

	struct sim s = { .crash_at = crash_at, .seed = seed * 2654435761u + 1 };
	pthread_mutex_init(&s.mu, NULL);
	s.durable = malloc(LOG_SIZE);
	s.cut = malloc(LOG_SIZE);
	struct nvlog_persist_ops ops = sim_ops_tmpl;
	ops.ctx = &s;
	o.ops = &ops;
	int rc = nvlog_open(path, &o, &log);
	if (rc == 0) {
		nvlog_info(log, &in);
		assert_int_equal(in.version, start == START_V1 ? NVLOG_VERSION_V1 : NVLOG_VERSION);
		pthread_t th[8];
		struct worker w[8];
		for (int i = 0; i < nthreads; i++) {
			w[i] = (struct worker){ log, a, i, nthreads, 240 / nthreads };
			pthread_create(&th[i], NULL, work, &w[i]);
		}
		for (int i = 0; i < nthreads; i++)
			pthread_join(th[i], NULL);
		pthread_mutex_lock(&s.mu);
		if (!s.crashed)
			s.crash_at = -1; /* no crash: the close's persists are fine */
		pthread_mutex_unlock(&s.mu);
		nvlog_close(log, !s.crashed);
	} else {
		assert_int_equal(rc, -EIO);
		assert_true(s.crashed);
	}
	int persists = s.persists;

	if (s.crashed) {
		/* the power cut: the file becomes what the medium held */
		uint8_t *img = malloc(LOG_SIZE);
		sim_crash_image(&s, img, drop_all);
		int fd = open(path, O_RDWR);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, img, LOG_SIZE, 0), LOG_SIZE);
		close(fd);
		free(img);
	}

	/* recovery with the real ops */
	struct nvlog_opts ro = { 0 };
	assert_int_equal(nvlog_open(path, &ro, &log), 0);
	nvlog_info(log, &in);
	if (start == START_V1)
		assert_int_equal(in.version, NVLOG_VERSION_V1); /* never empty */
	assert_int_not_equal(in.open_scan.end, NVLOG_SCAN_CORRUPT);
	struct check c = { .a = a, .found = calloc((size_t)a->n + 1, 1) };
	assert_int_equal(nvlog_scan(log, check_cb, &c, NULL), 0);
	for (int i = 0; i < a->n; i++) {
		if (a->lsn[i] > a->trimmed) {
			if (c.found[i] != 1)
				fail_msg("crash at persist %d (%d threads): acknowledged LSN %llu "
				    "found %d times; tail %llu head %llu",
				    crash_at, nthreads, (unsigned long long)a->lsn[i], c.found[i],
				    (unsigned long long)in.tail_lsn, (unsigned long long)in.head_lsn);
		}
	}
	assert_true(in.tail_lsn <= a->trimmed + 1 || a->trimmed == 0);
	/* the log goes on working after recovery */
	assert_int_equal(nvlog_trim(log, UINT64_MAX), 0);
	assert_int_equal(put(log, 0xfe00000000ull, false, a), 0);
	nvlog_close(log, true);
	free(c.found);
	free(s.durable);
	free(s.cut);
	free(a);
	return persists;
}

static char tdir[64];

static void sweep(int nthreads, enum start start)
{
	static const char *name[] = { "version 2", "version 1", "empty version 1" };
	char p[128];
	snprintf(p, sizeof(p), "%s/pl%d", tdir, nthreads);
	int total = one_run(p, 0, nthreads, 1, false, start);
	assert_true(total > 30);
	int runs = 0;
	for (int n = 1; n <= total + 3; n++) {
		one_run(p, n, nthreads, (uint64_t)n, false, start);
		one_run(p, n, nthreads, (uint64_t)n + 7777, true, start);
		runs += 2;
	}
	print_message("%s, %d threads: %d persists per run, %d crash runs\n", name[start], nthreads,
	    total, runs);
}

static void test_powerloss_sweep_1thread(void **state)
{
	(void)state;
	sweep(1, START_V2);
}

static void test_powerloss_sweep_4threads(void **state)
{
	(void)state;
	sweep(4, START_V2);
}

/* a version-1 log's appends and trims, and the open that upgrades one */
static void test_powerloss_sweep_v1(void **state)
{
	(void)state;
	sweep(1, START_V1);
	sweep(4, START_V1);
	sweep(1, START_V1_EMPTY);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tdir, sizeof(tdir), "/dev/shm/test_nvlog_pl.XXXXXX");
	assert_non_null(mkdtemp(tdir));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	return system(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_powerloss_sweep_1thread),
		cmocka_unit_test(test_powerloss_sweep_4threads),
		cmocka_unit_test(test_powerloss_sweep_v1),
	};
	return cmocka_run_group_tests_name("nvlog_powerloss", tests, setup, teardown);
}
