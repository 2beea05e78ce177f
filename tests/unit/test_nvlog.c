/*
 * test_nvlog.c -- unit tests of the NVRAM log: one test per rule of the format
 * (cache/nvlog_format.h) and the behaviour of the API (group commit, trim,
 * full log, statistics). Logs live in a temporary directory under /dev/shm.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cache/crc32c.h"
#include "cache/nvlog.h"
#include "cache/nvlog_format.h"

#define SMALL (NVLOG_AREA_OFF + 65536) /* the smallest log: a 64 KiB area */

static char tdir[64];

static void tpath(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", tdir, name);
}

/* payload of record number k: length and bytes derived from k */
static size_t plen(uint64_t k)
{
	return (size_t)((k * 7919) % 1500);
}

static void pfill(uint8_t *buf, uint64_t k, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(k * 31 + i);
}

static uint64_t app(struct nvlog *log, uint64_t k)
{
	uint8_t buf[2000];
	size_t n = plen(k);
	pfill(buf, k, n);
	struct iovec iov = { buf, n };
	uint64_t lsn = 0;
	assert_int_equal(nvlog_append(log, (uint16_t)(1 + k % 100), &iov, 1, &lsn), 0);
	return lsn;
}

struct seen {
	uint64_t n;
	uint64_t lsn[4096];
	uint64_t off[4096];
	uint32_t len[4096];
	uint64_t key0;  /* expected k of lsn[0] is key0 + (lsn - first) */
	int check;      /* verify payloads as app() wrote them with k == lsn + delta */
	int64_t delta;
};

static int collect(void *arg, const struct nvlog_rec *r)
{
	struct seen *s = arg;
	if (s->n > 0)
		assert_int_equal(r->lsn, s->lsn[s->n - 1] + 1);
	if (s->check) {
		uint64_t k = (uint64_t)((int64_t)r->lsn + s->delta);
		uint8_t buf[2000];
		assert_int_equal(r->len, plen(k));
		assert_int_equal(r->type, 1 + k % 100);
		pfill(buf, k, r->len);
		assert_memory_equal(r->payload, buf, r->len);
	}
	if (s->n < 4096) {
		s->lsn[s->n] = r->lsn;
		s->off[s->n] = r->offset;
		s->len[s->n] = r->len;
	}
	s->n++;
	return 0;
}

static struct seen *scan_all(struct nvlog *log, struct nvlog_scan_report *rep)
{
	struct seen *s = calloc(1, sizeof(*s));
	s->check = 1;
	assert_int_equal(nvlog_scan(log, collect, s, rep), 0);
	return s;
}

static void file_rw(const char *path, uint64_t off, void *buf, size_t n, bool write)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	ssize_t r = write ? pwrite(fd, buf, n, (off_t)off) : pread(fd, buf, n, (off_t)off);
	assert_int_equal(r, (ssize_t)n);
	close(fd);
}

static void flip_byte(const char *path, uint64_t off)
{
	uint8_t b;
	file_rw(path, off, &b, 1, false);
	b ^= 0x5a;
	file_rw(path, off, &b, 1, true);
}

static struct nvlog *open_log(const char *path)
{
	struct nvlog *log = NULL;
	struct nvlog_opts o = { .full_wait_ms = 50 };
	assert_int_equal(nvlog_open(path, &o, &log), 0);
	return log;
}

static int setup(void **state)
{
	(void)state;
	snprintf(tdir, sizeof(tdir), "/dev/shm/test_nvlog.XXXXXX");
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

/* ---- tests ---- */

static void test_crc32c(void **state)
{
	(void)state;
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(crc32c_sw(0, "123456789", 9), 0xe3069283u);
	uint8_t buf[1031];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (size_t a = 0; a < 9; a++)
		assert_int_equal(crc32c(0, buf + a, sizeof(buf) - a), crc32c_sw(0, buf + a, sizeof(buf) - a));
	assert_int_equal(crc32c(crc32c(0, buf, 100), buf + 100, 931), crc32c(0, buf, 1031));
	/* long buffers, odd lengths and alignments: ISA-L's folding and its tails */
	uint8_t *big = malloc(70000);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < 70000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		big[i] = (uint8_t)x;
	}
	size_t lens[] = { 767, 768, 769, 6143, 6144, 6145, 6144 + 768 + 7, 65536, 69990 };
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		for (size_t a = 0; a < 3; a++)
			assert_int_equal(crc32c(0x12345678u, big + a, lens[k]),
			    crc32c_sw(0x12345678u, big + a, lens[k]));
	free(big);
}

/* reopen after a clean close: records, epoch, clean flag, boot id */
static void test_reopen_clean(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "reopen");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_true(in.was_clean);
	assert_true(in.boot_id_changed); /* a fresh log has no boot id */
	assert_int_equal(in.epoch, 1);
	assert_int_equal(in.tail_lsn, 1);
	assert_int_equal(in.head_lsn, 0);
	for (uint64_t k = 1; k <= 100; k++)
		assert_int_equal(app(log, k), k);
	nvlog_close(log, true);

	log = open_log(p);
	nvlog_info(log, &in);
	assert_true(in.was_clean);
	assert_false(in.boot_id_changed);
	assert_memory_equal(in.boot_id, in.prev_boot_id, 16);
	assert_int_equal(in.epoch, 2);
	assert_int_equal(in.head_lsn, 100);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
	struct nvlog_scan_report rep;
	struct seen *s = scan_all(log, &rep);
	assert_int_equal(s->n, 100);
	assert_int_equal(rep.end, NVLOG_SCAN_CLEAN);
	assert_int_equal(rep.first_lsn, 1);
	assert_int_equal(rep.last_lsn, 100);
	free(s);
	/* appending goes on after the recovered head */
	assert_int_equal(app(log, 101), 101);
	nvlog_close(log, false);

	log = open_log(p);
	nvlog_info(log, &in);
	assert_false(in.was_clean);
	assert_int_equal(in.epoch, 3);
	s = scan_all(log, &rep);
	assert_int_equal(s->n, 101);
	free(s);
	nvlog_close(log, true);
}

/* format refuses live records unless forced; open formats a missing file */
static void test_format_refuses_live(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "refuse");
	struct nvlog *log = NULL;
	struct nvlog_opts o = { .size = SMALL };
	assert_int_equal(nvlog_open(p, &o, &log), 0); /* formats at first use */
	app(log, 1);
	nvlog_close(log, true);
	assert_int_equal(nvlog_format(p, SMALL, NULL), -EEXIST);
	o.flags = NVLOG_O_FORCE;
	assert_int_equal(nvlog_format(p, SMALL, &o), 0);
	log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.head_lsn, 0);
	assert_int_equal(in.open_scan.records, 0);
	nvlog_close(log, true);
	/* an empty log may be reformatted, to another size too */
	assert_int_equal(nvlog_format(p, 2 * SMALL, NULL), 0);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 2 * SMALL);
	assert_int_equal(nvlog_format(p, 4096, &o), -EINVAL);
	/* not a log */
	tpath(p, sizeof(p), "notalog");
	int fd = open(p, O_CREAT | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, SMALL), 0);
	close(fd);
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
	/* a file that is neither a log nor blank is not format's to erase */
	file_rw(p, 100, "data", 4, true);
	assert_int_equal(nvlog_format(p, SMALL, NULL), -EEXIST);
	assert_int_equal(nvlog_format(p, SMALL, &o), 0);
}

/* one opener at a time: a second open or a format (even forced, even from
 * another process: presto-log) of an open log is refused and changes
 * nothing; after the close the log opens again with its records */
static void test_open_log_is_locked(void **state)
{
	(void)state;
	char p[128], cmd[1024], tool[512];
	tpath(p, sizeof(p), "locked");
	struct nvlog *log = NULL, *two = NULL;
	struct nvlog_opts o = { .size = SMALL };
	assert_int_equal(nvlog_open(p, &o, &log), 0);
	app(log, 1);
	uint8_t sb_before[NVLOG_AREA_OFF], sb_after[NVLOG_AREA_OFF];
	file_rw(p, 0, sb_before, sizeof(sb_before), false);
	assert_int_equal(nvlog_open(p, &o, &two), -EBUSY);
	assert_null(two);
	struct nvlog_opts force = { .flags = NVLOG_O_FORCE };
	assert_int_equal(nvlog_format(p, SMALL, &force), -EBUSY);
	assert_int_equal(nvlog_format(p, 2 * SMALL, &force), -EBUSY);
	const char *bin = getenv("PRESTO_BIN");
	snprintf(tool, sizeof(tool), "%s/presto-log", bin ? bin : "bin");
	if (access(tool, X_OK) == 0) {
		snprintf(cmd, sizeof(cmd), "'%s' format --force '%s' 1M 2>/dev/null", tool, p);
		assert_int_not_equal(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "'%s' dump '%s' >/dev/null", tool, p);
		assert_int_equal(system(cmd), 0);	/* reading needs no lock */
	}
	file_rw(p, 0, sb_after, sizeof(sb_after), false);
	assert_memory_equal(sb_before, sb_after, sizeof(sb_before));
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, SMALL);
	app(log, 2);	/* the first opener is unharmed */
	nvlog_close(log, true);
	log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.records, 2);
	nvlog_close(log, true);
	/* a log being created is locked too: a format that creates it
	 * leaves no lock behind */
	tpath(p, sizeof(p), "created");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	log = open_log(p);
	nvlog_close(log, true);
}

/* hostile files: each refused with its reason, nothing hangs or wraps */
static void test_hostile_log_files(void **state)
{
	(void)state;
	char p[128], cmd[1024], tool[512], why[512];
	struct nvlog *log = NULL;
	struct nvlog_opts o = { .size = SMALL };

	/* truncated: refused, and the reason says so */
	tpath(p, sizeof(p), "trunc");
	struct nvlog_opts big = { .size = 2 * SMALL };
	assert_int_equal(nvlog_open(p, &big, &log), 0);
	app(log, 1);
	nvlog_close(log, true);
	assert_int_equal(truncate(p, SMALL + 4096), 0);
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
	nvlog_why_not(p, why, sizeof(why));
	if (!strstr(why, "truncated?"))
		fail_msg("truncated log: %s", why);
	/* empty (a format cut short, or touched): without a size refused as
	 * not a log (was EINVAL); with one formatted as if new, and so does
	 * format (was EINVAL, even forced) */
	tpath(p, sizeof(p), "empty");
	int fd = open(p, O_CREAT | O_RDWR, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
	nvlog_why_not(p, why, sizeof(why));
	assert_non_null(strstr(why, "0 bytes"));
	assert_int_equal(nvlog_open(p, &o, &log), 0);
	nvlog_close(log, true);
	assert_int_equal(truncate(p, 0), 0);
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	log = open_log(p);
	nvlog_close(log, true);
	/* a valid CRC on a tail position near 2^64 (the walk's bound would
	 * wrap and the log read as empty) */
	tpath(p, sizeof(p), "wrap");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	struct nvlog_sb sb;
	file_rw(p, NVLOG_SB_SLOT_OFF0, &sb, sizeof(sb), false);
	sb.tail_pos = 0xffffffffffffff00ull;
	sb.crc = nvlog_sb_crc(&sb);
	file_rw(p, NVLOG_SB_SLOT_OFF0, &sb, sizeof(sb), true);
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
	nvlog_why_not(p, why, sizeof(why));
	assert_non_null(strstr(why, "out of range"));

	const char *bin = getenv("PRESTO_BIN");
	snprintf(tool, sizeof(tool), "%s/presto-log", bin ? bin : "bin");
	if (access(tool, X_OK) != 0)
		return;
	/* a size that would wrap */
	tpath(p, sizeof(p), "huge");
	snprintf(cmd, sizeof(cmd), "'%s' format '%s' 17592186044424M 2>/dev/null", tool, p);
	assert_int_not_equal(system(cmd), 0);
	assert_int_not_equal(access(p, F_OK), 0);
	/* a FIFO: refused, not waited on */
	tpath(p, sizeof(p), "fifo");
	assert_int_equal(mkfifo(p, 0600), 0);
	snprintf(cmd, sizeof(cmd), "timeout 5 '%s' dump '%s' 2>/dev/null", tool, p);
	int st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	/* --json with a quote and a backslash in the path: valid JSON */
	tpath(p, sizeof(p), "q\"b\\s");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	snprintf(cmd, sizeof(cmd), "'%s' dump --json '%s' | python3 -c 'import json,sys; "
		 "sys.exit(0 if json.load(sys.stdin)[\"path\"] == sys.argv[1] else 1)' '%s'",
		 tool, p, p);
	assert_int_equal(system(cmd), 0);
}

/* wrap-around across many laps, with pads and implicit wraps; reopen often */
static void test_wrap_many_laps(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "laps");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	struct nvlog *log = open_log(p);
	uint64_t k = 0, trimmed = 0;
	struct nvlog_info in;
	for (int round = 0; round < 400; round++) {
		int n = 1 + round % 13;
		for (int i = 0; i < n; i++) {
			k++;
			uint64_t lsn;
			uint8_t buf[2000];
			pfill(buf, k, plen(k));
			struct iovec iov = { buf, plen(k) };
			nvlog_info(log, &in);
			if (in.used_bytes > in.area_size / 2) { /* the destager's part */
				trimmed = in.tail_lsn + (in.head_lsn - in.tail_lsn) / 2;
				assert_int_equal(nvlog_trim(log, trimmed), 0);
			}
			assert_int_equal(nvlog_append(log, (uint16_t)(1 + k % 100), &iov, 1, &lsn), 0);
			assert_int_equal(lsn, k);
		}
		if (round % 7 == 3) {
			nvlog_close(log, round % 2);
			log = open_log(p);
			nvlog_info(log, &in);
			assert_int_equal(in.head_lsn, k);
			/* an unclean close leaves stale bytes of an earlier lap at the
			 * head: reported TORN, never CORRUPT */
			if (round % 2)
				assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
			else
				assert_int_not_equal(in.open_scan.end, NVLOG_SCAN_CORRUPT);
			struct nvlog_scan_report rep;
			struct seen *s = scan_all(log, &rep);
			assert_int_equal(s->n, k - in.tail_lsn + 1);
			assert_int_equal(rep.end, NVLOG_SCAN_CLEAN);
			free(s);
		}
	}
	nvlog_info(log, &in);
	/* ~1.3 million payload bytes went through a 64 KiB area */
	assert_true(k * 700 > 15 * in.area_size);
	nvlog_close(log, true);
}

/* find the records of a closed log: lsn -> file offset and length */
static struct seen *records_of(const char *path)
{
	struct nvlog *log = open_log(path);
	struct seen *s = calloc(1, sizeof(*s));
	assert_int_equal(nvlog_scan(log, collect, s, NULL), 0);
	nvlog_close(log, true);
	return s;
}

/* a torn record at the head is dropped, everything before it survives */
static void test_torn_head(void **state)
{
	(void)state;
	char p[128];
	for (int variant = 0; variant < 4; variant++) {
		tpath(p, sizeof(p), "torn");
		struct nvlog_opts fo = { .flags = NVLOG_O_FORCE };
		assert_int_equal(nvlog_format(p, 1 << 20, &fo), 0);
		struct nvlog *log = open_log(p);
		for (uint64_t k = 1; k <= 20; k++)
			app(log, k + 1000); /* payload long enough to cut */
		nvlog_close(log, false);
		struct seen *s = records_of(p);
		assert_int_equal(s->n, 20);
		uint64_t off = s->off[19], len = s->len[19];
		uint8_t zero[4096] = { 0 };
		switch (variant) {
		case 0: /* truncated mid-record: the second half never landed */
			file_rw(p, off + NVLOG_HDR_SIZE + len / 2, zero, len - len / 2, true);
			break;
		case 1: /* a flipped byte in the payload of the last record */
			flip_byte(p, off + NVLOG_HDR_SIZE + len - 1);
			break;
		case 2: /* a flipped byte in its header */
			flip_byte(p, off + 10);
			break;
		case 3: /* only the header landed */
			file_rw(p, off + NVLOG_HDR_SIZE, zero, len, true);
			break;
		}
		free(s);
		log = open_log(p);
		struct nvlog_info in;
		nvlog_info(log, &in);
		assert_int_equal(in.open_scan.end, NVLOG_SCAN_TORN);
		assert_int_equal(in.open_scan.bad_lsn, 20);
		assert_int_equal(in.open_scan.bad_offset, off);
		assert_false(in.read_only);
		assert_int_equal(in.head_lsn, 19);
		struct seen *s2 = calloc(1, sizeof(*s2));
		s2->check = 1;
		s2->delta = 1000;
		nvlog_scan(log, collect, s2, NULL);
		assert_int_equal(s2->n, 19);
		free(s2);
		/* the head resumes at the torn place */
		assert_int_equal(app(log, 2000), 20);
		nvlog_close(log, true);
		log = open_log(p);
		nvlog_info(log, &in);
		assert_int_equal(in.head_lsn, 20);
		nvlog_close(log, true);
	}
}

/* made_tail -- a log at p (area of L bytes) whose one record was made
 * garbage, so that its scan ends TORN at LSN 1; the file offset of the area
 * and its superblock in *area_at and *sb */
static void made_tail(const char *p, uint64_t L, uint64_t *area_at, struct nvlog_sb *sb)
{
	struct nvlog_opts fo = { .flags = NVLOG_O_FORCE };
	assert_int_equal(nvlog_format(p, NVLOG_AREA_OFF + L, &fo), 0);
	struct nvlog *log = open_log(p);
	app(log, 1001);
	nvlog_close(log, false);
	struct seen *s = records_of(p);
	assert_int_equal(s->n, 1);
	*area_at = s->off[0];
	free(s);
	uint8_t *head = malloc(NVLOG_AREA_OFF);
	int slot;
	assert_non_null(head);
	file_rw(p, 0, head, NVLOG_AREA_OFF, false);
	assert_int_equal(nvlog_sb_pick(head, NVLOG_AREA_OFF + L, sb, &slot), 0);
	free(head);
	assert_int_equal(*area_at, sb->area_off + sb->tail_pos % L);
}

/* a file made so that, after a torn record, every later position passes the
 * cheap tests of a record proving it durable: the search hashes a bounded
 * number of bytes (at each position the rest of the area before: about
 * L^2/128 bytes, 40 s for this 16 MiB area, hours for 256 MiB), and the log
 * opens TORN */
static void test_proof_search_bounded(void **state)
{
	(void)state;
	char p[128];
	const uint64_t L = 16u << 20;
	uint64_t at;
	struct nvlog_sb sb;
	tpath(p, sizeof(p), "proofs");
	made_tail(p, L, &at, &sb);
	uint8_t *area = malloc(L);
	assert_non_null(area);
	memset(area, 0xab, NVLOG_ALIGN);	/* record 1 torn */
	for (uint64_t q = NVLOG_ALIGN; q + NVLOG_ALIGN <= L; q += NVLOG_ALIGN) {
		struct nvlog_rec_hdr h = {
			.crc = 0x12345678, .len = (uint32_t)(L - q - NVLOG_HDR_SIZE), .type = 1,
			.lsn = 2, .dlsn = 1,
		};
		memset(area + q, 0xcd, NVLOG_ALIGN);
		memcpy(area + q, &h, sizeof(h));
	}
	file_rw(p, at, area, L - (at - sb.area_off), true);
	free(area);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct nvlog *log = open_log(p);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	print_message("opened in %.3f s\n", s);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_TORN);
	assert_int_equal(in.open_scan.bad_lsn, 1);
	nvlog_close(log, false);
	if (s > 2.0)
		fail_msg("a log made to defeat the proof search took %.1f s to open", s);
}

/* a CRC-valid pad over the whole area at its start (no writer makes one:
 * every record fits there) is not taken for one: the log would be full for
 * good, every append waiting and failing */
static void test_pad_at_start_refused(void **state)
{
	(void)state;
	char p[128];
	const uint64_t L = 65536;
	uint64_t at;
	struct nvlog_sb sb;
	tpath(p, sizeof(p), "padstart");
	made_tail(p, L, &at, &sb);
	assert_int_equal(at, sb.area_off);	/* the tail at the area's start */
	struct nvlog_rec_hdr h = {
		.len = (uint32_t)(L - NVLOG_HDR_SIZE), .type = NVLOG_TYPE_PAD,
		.epoch = sb.tail_epoch, .lsn = sb.tail_lsn, .dlsn = sb.tail_lsn - 1,
	};
	h.crc = nvlog_rec_crc(sb.salt, &h, NULL);
	file_rw(p, at, &h, sizeof(h), true);
	struct nvlog *log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_not_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
	assert_false(in.read_only);
	uint64_t lsn;
	struct iovec iov = { "after", 5 };
	assert_int_equal(nvlog_append(log, 1, &iov, 1, &lsn), 0);
	nvlog_close(log, true);
}

/* padded_log -- a closed log at p of 60 live records of 920 bytes (960 on
 * media: 65536 % 960 leaves a pad) that wrapped once: the pad's offset in
 * *pad, the LSN of the record at offset 0 after it in *at0 */
static void padded_log(const char *p, uint64_t *pad, uint64_t *at0)
{
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	struct nvlog *log = open_log(p);
	uint8_t buf[920] = { 0 };
	struct iovec iov = { buf, sizeof(buf) };
	uint64_t lsn;
	for (int i = 0; i < 90; i++) {
		assert_int_equal(nvlog_append(log, 4, &iov, 1, &lsn), 0);
		if (i == 40)
			assert_int_equal(nvlog_trim(log, 30), 0);
	}
	nvlog_close(log, true);
	struct seen *s = records_of(p);
	assert_int_equal(s->n, 60);
	*pad = 0;
	for (uint64_t i = 0; i + 1 < s->n; i++)
		if (s->off[i + 1] < s->off[i]) {
			*pad = s->off[i] + NVLOG_REC_SIZE(s->len[i]);
			*at0 = s->lsn[i + 1];
		}
	free(s);
	assert_true(*pad > 0 && *pad + NVLOG_HDR_SIZE <= SMALL);
}

/* a damaged pad is stepped over: the record after it is whole at offset 0 */
static void test_damaged_pad(void **state)
{
	(void)state;
	char p[128];
	uint64_t pad, at0;
	tpath(p, sizeof(p), "pad");
	padded_log(p, &pad, &at0);
	flip_byte(p, pad + 20);
	struct nvlog *log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.records, 60);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
	assert_int_equal(nvlog_trim(log, 80), 0); /* trim walks over it too */
	nvlog_info(log, &in);
	assert_int_equal(in.tail_lsn, 81);
	nvlog_close(log, true);
}

/* a pad whose type field is damaged still carries the LSN and length of
 * a record: the scan steps over it (record n is whole at offset 0), and the
 * trim must too, or it stores a tail at record n's own place: the records
 * acknowledged after it were gone at the next open, and every later trim
 * failed (-EUCLEAN) */
static void test_damaged_pad_type(void **state)
{
	(void)state;
	char p[128];
	uint64_t pad, last;
	uint8_t buf[920] = { 0 };
	struct iovec iov = { buf, sizeof(buf) };
	tpath(p, sizeof(p), "padtype");
	padded_log(p, &pad, &last);
	flip_byte(p, pad + offsetof(struct nvlog_rec_hdr, type));
	struct nvlog *log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
	assert_int_equal(nvlog_trim(log, last), 0);
	uint64_t a, b;
	assert_int_equal(nvlog_append(log, 4, &iov, 1, &a), 0);
	assert_int_equal(nvlog_append(log, 4, &iov, 1, &b), 0);
	assert_int_equal(nvlog_trim(log, a), 0);
	nvlog_close(log, false);
	log = open_log(p);
	nvlog_info(log, &in);
	if (in.head_lsn != b || in.tail_lsn != b)
		fail_msg("after a trim over a pad with a damaged type: LSN %llu..%llu in the log, "
			 "want %llu..%llu", (unsigned long long)in.tail_lsn,
			 (unsigned long long)in.head_lsn, (unsigned long long)b, (unsigned long long)b);
	nvlog_close(log, true);
}

/* a bad record in the middle, followed by valid ones, is corruption */
static void test_corrupt_middle(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "corrupt");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	for (uint64_t k = 1; k <= 30; k++)
		app(log, k + 1000);
	nvlog_close(log, true);
	struct seen *s = records_of(p);
	uint64_t off = s->off[9]; /* LSN 10 */
	flip_byte(p, off + NVLOG_HDR_SIZE + 3);
	free(s);

	log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CORRUPT);
	assert_int_equal(in.open_scan.bad_lsn, 10);
	assert_int_equal(in.open_scan.bad_offset, off);
	assert_true(in.open_scan.proof_lsn > 10);
	assert_string_equal(in.open_scan.why, "crc");
	assert_true(in.read_only);
	struct nvlog_scan_report rep;
	struct seen *s2 = calloc(1, sizeof(*s2));
	s2->check = 1;
	s2->delta = 1000;
	nvlog_scan(log, collect, s2, &rep);
	assert_int_equal(s2->n, 9); /* what is before the bad record can be salvaged */
	assert_int_equal(rep.end, NVLOG_SCAN_CORRUPT);
	free(s2);
	uint64_t lsn;
	struct iovec iov = { "x", 1 };
	assert_int_equal(nvlog_append(log, 1, &iov, 1, &lsn), -EROFS);
	/* the operator resets it after salvage */
	assert_int_equal(nvlog_reset(log), 0);
	assert_int_equal(nvlog_append(log, 1, &iov, 1, &lsn), 0);
	assert_int_equal(lsn, 10);
	nvlog_close(log, true);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
	assert_int_equal(in.open_scan.records, 1);
	assert_false(in.read_only);
	nvlog_close(log, true);
}

/* a valid record from an earlier lap, or an earlier format, never validates */
static void test_stale_never_validates(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "stale");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	struct nvlog *log = open_log(p);
	/* fill about 1.5 laps, trimming, so the area holds records of two laps */
	uint64_t k;
	struct nvlog_info in;
	for (k = 1;; k++) {
		uint8_t buf[512];
		pfill(buf, k, sizeof(buf));
		struct iovec iov = { buf, sizeof(buf) };
		uint64_t lsn;
		assert_int_equal(nvlog_append(log, 7, &iov, 1, &lsn), 0);
		if (k % 8 == 0)
			assert_int_equal(nvlog_trim(log, k - 4), 0);
		nvlog_info(log, &in);
		if (k * NVLOG_REC_SIZE(512) > in.area_size * 3 / 2)
			break;
	}
	assert_int_equal(nvlog_trim(log, k), 0); /* empty: every byte is stale */
	nvlog_close(log, true);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.records, 0);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
	assert_int_equal(in.tail_lsn, k + 1);
	/* now copy an old record (valid CRC, earlier lap) to where the next one goes */
	uint64_t lsn;
	struct iovec iov = { "y", 1 };
	assert_int_equal(nvlog_append(log, 7, &iov, 1, &lsn), 0);
	nvlog_close(log, true);
	struct seen *s = records_of(p);
	assert_int_equal(s->n, 1);
	uint64_t head_off = s->off[0] + NVLOG_REC_SIZE(1);
	free(s);
	uint8_t old[NVLOG_HDR_SIZE + 512];
	file_rw(p, NVLOG_AREA_OFF, old, sizeof(old), false); /* an early record at offset 0 */
	struct nvlog_rec_hdr h;
	memcpy(&h, old, sizeof(h));
	assert_true(h.lsn < k); /* from an earlier lap */
	if (head_off + sizeof(old) <= SMALL)
		file_rw(p, head_off, old, sizeof(old), true);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.records, 1);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN); /* stale, not torn */
	nvlog_close(log, true);

	/* records of an earlier format (another salt) */
	tpath(p, sizeof(p), "stale2");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	log = open_log(p);
	for (k = 1; k <= 10; k++)
		app(log, k);
	nvlog_close(log, true);
	uint8_t *area = malloc(SMALL - NVLOG_AREA_OFF);
	file_rw(p, NVLOG_AREA_OFF, area, SMALL - NVLOG_AREA_OFF, false);
	struct nvlog_opts fo = { .flags = NVLOG_O_FORCE };
	assert_int_equal(nvlog_format(p, SMALL, &fo), 0);
	file_rw(p, NVLOG_AREA_OFF, area, SMALL - NVLOG_AREA_OFF, true);
	free(area);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.records, 0);
	assert_int_not_equal(in.open_scan.end, NVLOG_SCAN_CORRUPT);
	nvlog_close(log, true);
}

/* a record written past a hole by an earlier crashed run never validates */
static void test_stale_epoch(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "epoch");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	for (uint64_t k = 1; k <= 4; k++)
		app(log, k);
	/* 5 and 6 copied before either is durable, as by two threads */
	uint64_t l5, l6;
	uint8_t b5[2000], b6[2000];
	pfill(b5, 5, plen(5));
	pfill(b6, 6, plen(6));
	struct iovec i5 = { b5, plen(5) }, i6 = { b6, plen(6) };
	assert_int_equal(nvlog_append_nowait(log, 1 + 5 % 100, &i5, 1, &l5), 0);
	assert_int_equal(nvlog_append_nowait(log, 1 + 6 % 100, &i6, 1, &l6), 0);
	assert_int_equal(nvlog_wait(log, l6), 0);
	nvlog_close(log, false);
	struct seen *s = records_of(p); /* opens: epoch 2 */
	/* run 1's record 5 is torn, 6 intact: run 2 resumes at 5 */
	uint64_t off5 = s->off[4];
	free(s);
	flip_byte(p, off5 + NVLOG_HDR_SIZE);
	log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_TORN);
	assert_int_equal(in.head_lsn, 4);
	/* run 3 writes a new record 5 of exactly the old size: the old 6 lies
	 * where the new 6 is expected, with the right LSN and CRC, but an older
	 * epoch */
	uint8_t buf[2000];
	pfill(buf, 5, plen(5));
	struct iovec iov = { buf, plen(5) };
	uint64_t lsn;
	assert_int_equal(nvlog_append(log, 1 + 5 % 100, &iov, 1, &lsn), 0);
	assert_int_equal(lsn, 5);
	nvlog_close(log, true);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.head_lsn, 5);
	assert_int_equal(in.open_scan.records, 5);
	nvlog_close(log, true);
}

/* lengths that point outside the area are refused before anything is read */
static void test_length_bounds(void **state)
{
	(void)state;
	char p[128];
	uint32_t bad_len[] = { 0xffffffffu, 0x7ffffff0u, SMALL, SMALL - NVLOG_AREA_OFF - 8 };
	for (unsigned v = 0; v < sizeof(bad_len) / sizeof(bad_len[0]); v++) {
		tpath(p, sizeof(p), "bounds");
		struct nvlog_opts fo = { .flags = NVLOG_O_FORCE };
		assert_int_equal(nvlog_format(p, SMALL, &fo), 0);
		struct nvlog *log = open_log(p);
		for (uint64_t k = 1; k <= 5; k++)
			app(log, k);
		nvlog_close(log, true);
		struct seen *s = records_of(p);
		uint64_t off = s->off[4];
		free(s);
		file_rw(p, off + offsetof(struct nvlog_rec_hdr, len), &bad_len[v], 4, true);
		log = open_log(p); /* ASan would catch a read past the mapping */
		struct nvlog_info in;
		nvlog_info(log, &in);
		assert_int_equal(in.head_lsn, 4);
		assert_int_equal(in.open_scan.end, NVLOG_SCAN_TORN);
		assert_string_equal(in.open_scan.why, "length");
		nvlog_close(log, true);
	}
	/* oversize appends are refused too */
	tpath(p, sizeof(p), "bounds");
	struct nvlog *log = open_log(p);
	uint64_t lsn;
	size_t max = nvlog_max_payload(log);
	uint8_t *big = calloc(1, max + 1);
	struct iovec iov = { big, max + 1 };
	assert_int_equal(nvlog_append(log, 1, &iov, 1, &lsn), -EINVAL);
	iov.iov_len = max;
	assert_int_equal(nvlog_append(log, 1, &iov, 1, &lsn), 0);
	assert_int_equal(nvlog_append(log, 0, &iov, 1, &lsn), -EINVAL);
	assert_int_equal(nvlog_append(log, NVLOG_TYPE_PAD, &iov, 1, &lsn), -EINVAL);
	/* and runs whose lengths add up past 2^64 to a small sum */
	struct iovec wrap[2] = { { big, SIZE_MAX }, { big, 2 } };
	assert_int_equal(nvlog_append(log, 1, wrap, 2, &lsn), -EINVAL);
	free(big);
	nvlog_close(log, true);
}

/* a superblock slot torn mid-update: the other slot wins */
static void test_superblock_torn(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "sb");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	for (uint64_t k = 1; k <= 10; k++)
		app(log, k);
	assert_int_equal(nvlog_trim(log, 5), 0);
	nvlog_close(log, false); /* no superblock update at close */
	struct nvlog_sb sb[2];
	file_rw(p, NVLOG_SB_SLOT_OFF0, &sb[0], sizeof(sb[0]), false);
	file_rw(p, NVLOG_SB_SLOT_OFF1, &sb[1], sizeof(sb[1]), false);
	int cur = sb[1].seq > sb[0].seq;
	assert_int_equal(sb[cur].tail_lsn, 6);
	assert_int_equal(sb[1 - cur].tail_lsn, 1);
	/* tear the newest slot in its middle, as a crash during its persist */
	uint8_t junk[40];
	memset(junk, 0xa5, sizeof(junk));
	file_rw(p, (cur ? NVLOG_SB_SLOT_OFF1 : NVLOG_SB_SLOT_OFF0) + 60, junk, sizeof(junk), true);
	log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	/* the trim is undone: records 1-5 are live again (replay is idempotent) */
	assert_int_equal(in.tail_lsn, 1);
	assert_int_equal(in.head_lsn, 10);
	assert_int_equal(in.epoch, 2); /* the older slot had epoch 1 */
	struct seen *s = scan_all(log, NULL);
	assert_int_equal(s->n, 10);
	free(s);
	nvlog_close(log, true);
	/* both slots bad: not a log */
	memset(junk, 0, sizeof(junk));
	file_rw(p, NVLOG_SB_SLOT_OFF0 + 8, junk, 8, true);
	file_rw(p, NVLOG_SB_SLOT_OFF1 + 8, junk, 8, true);
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
}

/* set_boot_epoch -- give both superblock slots of the log at p the boot
 * epoch e (their CRCs made good again) */
static void set_boot_epoch(const char *p, uint64_t e)
{
	struct nvlog_sb sb[2];
	const uint64_t off[2] = { NVLOG_SB_SLOT_OFF0, NVLOG_SB_SLOT_OFF1 };

	for (int i = 0; i < 2; i++) {
		file_rw(p, off[i], &sb[i], sizeof(sb[i]), false);
		if (nvlog_sb_check(&sb[i], SIZE_MAX) != 0)
			continue;	/* a slot never written */
		sb[i].boot_epoch = e;
		sb[i].crc = nvlog_sb_crc(&sb[i]);
		file_rw(p, off[i], &sb[i], sizeof(sb[i]), true);
	}
}

/*
 * The boot epoch is bumped at every open and records carry it in 32 bits: a
 * superblock at UINT32_MAX is not valid. The open that would bump the epoch
 * there refuses (-EOVERFLOW) and leaves the log as it was, readable, with
 * its records; the open before it still works.
 */
static void test_boot_epoch_exhausted(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "epoch-top");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	for (uint64_t k = 1; k <= 3; k++)
		app(log, k);
	nvlog_close(log, false);

	/* two opens left: the first works and appends at the last epoch */
	set_boot_epoch(p, UINT32_MAX - 2);
	log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.epoch, UINT32_MAX - 1);
	app(log, 4);
	nvlog_close(log, false);

	/* the next is refused, and writes nothing */
	uint8_t before[2 * 4096], after[2 * 4096];
	file_rw(p, 0, before, sizeof(before), false);
	assert_int_equal(nvlog_open(p, NULL, &log), -EOVERFLOW);
	assert_null(log);
	file_rw(p, 0, after, sizeof(after), false);
	assert_memory_equal(before, after, sizeof(before));

	/* the log still reads, its four records with it, as presto-log
	 * reads it (a walk over the file, no open, no bump) */
	static uint8_t img[1 << 20];
	struct nvlog_view v = { .base = img, .map_len = sizeof(img) };
	struct nvlog_walk_end w;
	file_rw(p, 0, img, sizeof(img), false);
	assert_int_equal(nvlog_sb_pick(img, sizeof(img), &v.sb, NULL), 0);
	assert_int_equal(v.sb.boot_epoch, UINT32_MAX - 1);
	assert_int_equal(nvlog_walk(&v, UINT64_MAX, NULL, NULL, &w), 0);
	assert_int_equal(w.end, NVLOG_END_CLEAN);
	assert_int_equal(w.records, 4);
	assert_int_equal(w.last_epoch, UINT32_MAX - 1);

	/* a superblock at UINT32_MAX itself is not a log */
	set_boot_epoch(p, UINT32_MAX);
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
}

/* a record as a version-1 writer put it: 8-byte aligned, at pos */
static uint64_t put_v1_rec(const char *path, const struct nvlog_sb *sb, uint64_t pos, uint64_t lsn,
    const uint8_t *payload, uint32_t len)
{
	struct nvlog_rec_hdr h = {
		.len = len, .type = 7, .epoch = (uint32_t)sb->boot_epoch, .lsn = lsn, .dlsn = lsn - 1,
	};
	h.crc = nvlog_rec_crc(sb->salt, &h, payload);
	file_rw(path, NVLOG_AREA_OFF + pos, &h, sizeof(h), true);
	file_rw(path, NVLOG_AREA_OFF + pos + NVLOG_HDR_SIZE, (void *)payload, len, true);
	return pos + nvlog_rec_size(NVLOG_ALIGN_V1, len);
}

/*
 * Version 1 (8-byte records) is still read and appended to; an empty one
 * becomes version 2 (64-byte records) at open. A superblock of an unknown
 * version, or a tail off its version's alignment, is not a log.
 */
static void test_version1_log(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "v1");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	struct nvlog_sb sb;
	file_rw(p, NVLOG_SB_SLOT_OFF0, &sb, sizeof(sb), false);
	assert_int_equal(sb.version, NVLOG_VERSION);
	sb.version = NVLOG_VERSION_V1;
	sb.crc = nvlog_sb_crc(&sb);
	file_rw(p, NVLOG_SB_SLOT_OFF0, &sb, sizeof(sb), true);
	uint8_t buf[100];
	const uint32_t lens[3] = { 5, 13, 100 };
	uint64_t pos = 0, offs[4];
	for (int i = 0; i < 3; i++) {
		pfill(buf, (uint64_t)i, lens[i]);
		offs[i] = pos;
		pos = put_v1_rec(p, &sb, pos, (uint64_t)i + 1, buf, lens[i]);
	}
	assert_int_equal(pos, 48 + 56 + 144);

	/* read as written, and appended to at 8-byte alignment */
	struct nvlog *log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.version, NVLOG_VERSION_V1);
	assert_int_equal(in.open_scan.records, 3);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_CLEAN);
	struct iovec iov = { buf, 7 };
	uint64_t lsn;
	pfill(buf, 3, 7);
	assert_int_equal(nvlog_append(log, 7, &iov, 1, &lsn), 0);
	assert_int_equal(lsn, 4);
	offs[3] = pos;
	nvlog_close(log, true);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.version, NVLOG_VERSION_V1);
	struct seen *s = calloc(1, sizeof(*s));
	assert_int_equal(nvlog_scan(log, collect, s, NULL), 0);
	assert_int_equal(s->n, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(s->off[i], NVLOG_AREA_OFF + offs[i]);
		assert_int_equal(s->len[i], i < 3 ? lens[i] : 7);
	}
	free(s);

	/* several laps of 8-byte records: pads and implicit wraps */
	for (uint64_t k = 5; k <= 400; k++) {
		assert_int_equal(app(log, k), k);
		if (k % 20 == 0)
			assert_int_equal(nvlog_trim(log, k - 10), 0);
	}
	nvlog_close(log, true);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.version, NVLOG_VERSION_V1);
	assert_int_equal(in.tail_lsn, 391);
	s = calloc(1, sizeof(*s));
	s->check = 1;
	assert_int_equal(nvlog_scan(log, collect, s, NULL), 0);
	assert_int_equal(s->n, 10);
	bool off_line = false;
	for (uint64_t i = 0; i < s->n; i++) {
		assert_int_equal((s->off[i] - NVLOG_AREA_OFF) % NVLOG_ALIGN_V1, 0);
		off_line |= (s->off[i] - NVLOG_AREA_OFF) % NVLOG_ALIGN != 0;
	}
	assert_true(off_line);
	uint64_t L = SMALL - NVLOG_AREA_OFF;
	uint64_t q = s->off[9] - NVLOG_AREA_OFF + nvlog_rec_size(NVLOG_ALIGN_V1, s->len[9]);
	if (L - q % L < NVLOG_HDR_SIZE)
		q += L - q % L; /* implicit wrap */
	uint64_t expect = ((q + NVLOG_ALIGN - 1) & ~(uint64_t)(NVLOG_ALIGN - 1)) % L;
	free(s);

	/* emptied: the next open continues in version 2, at an aligned place */
	assert_int_equal(nvlog_trim(log, 400), 0);
	nvlog_close(log, true);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.version, NVLOG_VERSION);
	assert_int_equal(in.tail_lsn, 401);
	for (uint64_t k = 401; k <= 436; k++)
		assert_int_equal(app(log, k), k);
	nvlog_close(log, true);
	/* both superblock slots are version 2 */
	struct nvlog_sb two[2];
	file_rw(p, NVLOG_SB_SLOT_OFF0, &two[0], sizeof(sb), false);
	file_rw(p, NVLOG_SB_SLOT_OFF1, &two[1], sizeof(sb), false);
	assert_int_equal(two[0].version, NVLOG_VERSION);
	assert_int_equal(two[1].version, NVLOG_VERSION);
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.version, NVLOG_VERSION);
	s = calloc(1, sizeof(*s));
	s->check = 1;
	assert_int_equal(nvlog_scan(log, collect, s, NULL), 0);
	assert_int_equal(s->n, 36);
	assert_int_equal(s->off[0], NVLOG_AREA_OFF + expect); /* rounded up to a line */
	for (uint64_t i = 0; i < s->n; i++)
		assert_int_equal((s->off[i] - NVLOG_AREA_OFF) % NVLOG_ALIGN, 0);
	free(s);
	nvlog_close(log, true);

	/* hostile superblocks */
	struct nvlog_sb cur[2];
	file_rw(p, NVLOG_SB_SLOT_OFF0, &cur[0], sizeof(sb), false);
	file_rw(p, NVLOG_SB_SLOT_OFF1, &cur[1], sizeof(sb), false);
	for (int i = 0; i < 2; i++) {
		cur[i].version = 3;
		cur[i].crc = nvlog_sb_crc(&cur[i]);
		file_rw(p, i ? NVLOG_SB_SLOT_OFF1 : NVLOG_SB_SLOT_OFF0, &cur[i], sizeof(sb), true);
	}
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
	for (int i = 0; i < 2; i++) {
		cur[i].version = NVLOG_VERSION;
		cur[i].tail_pos += 8;
		cur[i].crc = nvlog_sb_crc(&cur[i]);
		file_rw(p, i ? NVLOG_SB_SLOT_OFF1 : NVLOG_SB_SLOT_OFF0, &cur[i], sizeof(sb), true);
	}
	assert_int_equal(nvlog_open(p, NULL, &log), -EUCLEAN);
}

/* append record k (as app() does) without waiting for its commit */
static void app_nowait(struct nvlog *log, uint64_t k)
{
	uint8_t buf[2000];
	size_t n = plen(k);
	pfill(buf, k, n);
	struct iovec iov = { buf, n };
	uint64_t lsn = 0;
	assert_int_equal(nvlog_append_nowait(log, (uint16_t)(1 + k % 100), &iov, 1, &lsn), 0);
	assert_int_equal(lsn, k);
}

/*
 * A trim that leaves the tail exactly on a stale record of an earlier crashed
 * run: the record has the expected LSN and a valid CRC, and only the epoch
 * floor kept in the superblock (tail_epoch) turns it away.
 */
static void test_tail_epoch_floor(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "floor");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	/* run A: 1 and 2 committed; 3, 4, 5 copied while 2 was the durable
	 * LSN (dlsn 2: no proof), then 3 is torn by the crash */
	struct nvlog *log = open_log(p);
	app(log, 1);
	app(log, 2);
	for (uint64_t k = 3; k <= 5; k++)
		app_nowait(log, k);
	nvlog_close(log, false);
	uint64_t off3 = nvlog_rec_size(NVLOG_ALIGN, plen(1)) + nvlog_rec_size(NVLOG_ALIGN, plen(2));
	flip_byte(p, NVLOG_AREA_OFF + off3 + NVLOG_HDR_SIZE + 5);

	/* run B: 3 again, the same size, so A's 4 now lies right after it;
	 * the destager trims up to 3; crash before anything else */
	log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.end, NVLOG_SCAN_TORN);
	assert_int_equal(in.open_scan.records, 2);
	assert_int_equal(app(log, 3), 3);
	assert_int_equal(nvlog_trim(log, 3), 0);
	nvlog_close(log, false);

	/* A's 4 and 5 are not live records */
	log = open_log(p);
	nvlog_info(log, &in);
	assert_int_equal(in.open_scan.records, 0);
	assert_int_equal(in.head_lsn, 3);
	assert_int_equal(in.tail_lsn, 4);
	assert_true(in.open_scan.end != NVLOG_SCAN_CORRUPT);
	assert_false(in.read_only);
	nvlog_close(log, true);
}

struct iov_seen {
	uint64_t n;
	uint32_t len[64];
	uint8_t *data[64];
};

static int iov_collect(void *arg, const struct nvlog_rec *r)
{
	struct iov_seen *s = arg;
	assert_true(s->n < 64);
	assert_int_equal(r->len, s->len[s->n]);
	assert_memory_equal(r->payload, s->data[s->n], r->len);
	assert_int_equal((r->offset - NVLOG_AREA_OFF) % NVLOG_ALIGN, 0);
	s->n++;
	return 0;
}

/* persist ops that count the copies into the record area that are not
 * whole lines (header-only copies, a pad's or the seal at close, aside) */
struct line_ops {
	uint8_t *area, *end;
	unsigned copies, partial;
};

static void line_copy(void *ctx, void *dst, const void *src, size_t n)
{
	struct line_ops *c = ctx;
	uint8_t *d = dst;
	memcpy(dst, src, n);
	if (d < c->area || d >= c->end || n == NVLOG_HDR_SIZE)
		return;
	c->copies++;
	if ((size_t)(d - c->area) % NVLOG_ALIGN || n % NVLOG_ALIGN)
		c->partial++;
}

static void line_drain(void *ctx)
{
	(void)ctx;
}

static int line_persist(void *ctx, const void *addr, size_t n)
{
	(void)ctx, (void)addr, (void)n;
	return 0;
}

static void line_mapped(void *ctx, void *base, size_t len)
{
	struct line_ops *c = ctx;
	c->area = (uint8_t *)base + NVLOG_AREA_OFF;
	c->end = (uint8_t *)base + len;
}

/*
 * The appender gathers header, runs and pad into whole lines (small runs
 * through a buffer, long ones copied in place): every copy into the area is
 * whole lines, and payloads of many runs, of every size around the buffer's
 * and the line's edges, come back whole.
 */
static void test_append_gather(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "gather");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct line_ops lc = { 0 };
	struct nvlog_persist_ops lops = {
		.name = "lines", .copy = line_copy, .drain = line_drain, .persist = line_persist,
		.mapped = line_mapped, .ctx = &lc,
	};
	struct nvlog_opts lo = { .ops = &lops };
	struct nvlog *log = NULL;
	assert_int_equal(nvlog_open(p, &lo, &log), 0);
	static const size_t sz[] = { 0, 1, 3, 23, 24, 25, 63, 64, 65, 255, 256, 257, 300, 983, 984,
		985, 1023, 1024, 1025, 2047, 4096, 4099, 9000 };
	const size_t nsz = sizeof(sz) / sizeof(sz[0]);
	struct iov_seen seen = { 0 };
	uint64_t rnd = 12345;
	for (int r = 0; r < 48; r++) {
		struct iovec iov[8];
		int cnt = 1 + r % 8;
		uint32_t total = 0;
		for (int i = 0; i < cnt; i++) {
			rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
			size_t n = r < (int)nsz && i == 0 ? sz[r] : sz[(rnd >> 33) % nsz];
			uint8_t *b = malloc(n + 1);
			for (size_t j = 0; j < n; j++)
				b[j] = (uint8_t)(rnd >> 24) + (uint8_t)j * 13;
			iov[i] = (struct iovec){ b, n };
			total += (uint32_t)n;
		}
		uint8_t *all = malloc(total + 1), *q = all;
		for (int i = 0; i < cnt; i++) {
			memcpy(q, iov[i].iov_base, iov[i].iov_len);
			q += iov[i].iov_len;
			free(iov[i].iov_base);
			iov[i].iov_base = all + (q - all) - iov[i].iov_len; /* same bytes, from all */
		}
		uint64_t lsn;
		assert_int_equal(nvlog_append(log, 9, iov, cnt, &lsn), 0);
		seen.len[r] = total;
		seen.data[r] = all;
	}
	nvlog_close(log, true);
	assert_true(lc.copies >= 48);
	assert_int_equal(lc.partial, 0);
	log = open_log(p);
	struct iov_seen check = seen;
	check.n = 0;
	assert_int_equal(nvlog_scan(log, iov_collect, &check, NULL), 0);
	assert_int_equal(check.n, 48);
	nvlog_close(log, true);
	for (int r = 0; r < 48; r++)
		free(seen.data[r]);
}

struct mt_arg {
	struct nvlog *log;
	int id, n;
	uint64_t *lsns;
};

static void *mt_worker(void *a)
{
	struct mt_arg *m = a;
	for (int i = 0; i < m->n; i++) {
		uint64_t v[2] = { (uint64_t)m->id, (uint64_t)i }, lsn;
		struct iovec iov = { v, sizeof(v) };
		int rc = (i % 2) ? nvlog_append(m->log, 2, &iov, 1, &lsn)
		    : nvlog_append_nowait(m->log, 2, &iov, 1, &lsn);
		if (rc == 0 && !(i % 2))
			rc = nvlog_wait(m->log, lsn);
		assert_int_equal(rc, 0);
		assert_true(nvlog_durable_lsn(m->log) >= lsn);
		m->lsns[i] = lsn;
	}
	return NULL;
}

struct mt_check {
	int next[8];
	uint64_t n;
};

static int mt_cb(void *arg, const struct nvlog_rec *r)
{
	struct mt_check *c = arg;
	uint64_t v[2];
	assert_int_equal(r->len, sizeof(v));
	memcpy(v, r->payload, sizeof(v));
	assert_true(v[0] < 8);
	assert_int_equal(v[1], c->next[v[0]]); /* each thread's records in its order */
	c->next[v[0]]++;
	c->n++;
	return 0;
}

/* group commit from 8 threads: unique LSNs, every record once, batches */
static void test_group_commit_threads(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "mt");
	assert_int_equal(nvlog_format(p, 8 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	enum { T = 8, N = 2000 };
	pthread_t th[T];
	struct mt_arg a[T];
	for (int i = 0; i < T; i++) {
		a[i] = (struct mt_arg){ .log = log, .id = i, .n = N, .lsns = calloc(N, 8) };
		pthread_create(&th[i], NULL, mt_worker, &a[i]);
	}
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	uint8_t *seen = calloc(T * N + 1, 1);
	for (int i = 0; i < T; i++) {
		for (int j = 0; j < N; j++) {
			uint64_t l = a[i].lsns[j];
			assert_true(l >= 1 && l <= T * N);
			assert_int_equal(seen[l], 0);
			seen[l] = 1;
			if (j)
				assert_true(l > a[i].lsns[j - 1]);
		}
		free(a[i].lsns);
	}
	free(seen);
	struct nvlog_stats st;
	nvlog_stats(log, &st);
	assert_int_equal(st.appends, T * N);
	assert_int_equal(st.durable_lsn, T * N);
	uint64_t batches = 0;
	for (int b = 0; b < NVLOG_BATCH_BUCKETS; b++)
		batches += st.batch_hist[b];
	assert_int_equal(batches, st.persists);
	assert_true(st.persists <= T * N);
	struct mt_check c = { { 0 }, 0 };
	nvlog_close(log, true);
	log = open_log(p);
	assert_int_equal(nvlog_scan(log, mt_cb, &c, NULL), 0);
	assert_int_equal(c.n, T * N);
	nvlog_close(log, true);
}

struct trimmer {
	struct nvlog *log;
	int delay_ms;
};

static void *trim_later(void *a)
{
	struct trimmer *t = a;
	struct timespec ts = { 0, t->delay_ms * 1000000L };
	nanosleep(&ts, NULL);
	nvlog_trim(t->log, UINT64_MAX);
	return NULL;
}

/* a full log waits for trim, bounded, then -EAGAIN; it never overwrites */
static void test_full_log(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "full");
	assert_int_equal(nvlog_format(p, SMALL, NULL), 0);
	struct nvlog *log = open_log(p); /* full_wait_ms = 50 */
	uint8_t buf[1000] = { 1 };
	struct iovec iov = { buf, sizeof(buf) };
	uint64_t lsn, n = 0;
	int rc;
	struct timespec t0, t1;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = nvlog_append(log, 3, &iov, 1, &lsn);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (rc)
			break;
		n++;
	}
	assert_int_equal(rc, -EAGAIN);
	double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(waited >= 0.045 && waited < 2.0);
	assert_int_equal(n, (SMALL - NVLOG_AREA_OFF) / NVLOG_REC_SIZE(sizeof(buf))); /* 60 */
	struct nvlog_stats st;
	nvlog_stats(log, &st);
	assert_int_equal(st.full_waits, 1);
	assert_int_equal(st.full_timeouts, 1);
	assert_true(st.used_bytes <= st.area_bytes);
	/* a trim from another thread lets a waiting append through (a longer
	 * bound here, so a loaded machine cannot make it time out) */
	nvlog_close(log, true);
	struct nvlog_opts lo = { .full_wait_ms = 10000 };
	assert_int_equal(nvlog_open(p, &lo, &log), 0);
	pthread_t th;
	struct trimmer t = { log, 20 };
	pthread_create(&th, NULL, trim_later, &t);
	rc = nvlog_append(log, 3, &iov, 1, &lsn);
	pthread_join(th, NULL);
	assert_int_equal(rc, 0);
	assert_int_equal(lsn, n + 1);
	nvlog_stats(log, &st);
	assert_int_equal(st.full_waits, 1);
	assert_int_equal(st.full_timeouts, 0);
	nvlog_close(log, true);
	/* nothing live was overwritten: the scan holds exactly the last record */
	log = open_log(p);
	struct seen *s = calloc(1, sizeof(*s));
	nvlog_scan(log, collect, s, NULL);
	assert_int_equal(s->n, 1);
	assert_int_equal(s->lsn[0], n + 1);
	free(s);
	nvlog_close(log, true);
}

/* two-phase append, trim clamping, statistics */
static void test_nowait_trim_stats(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "stats");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	uint64_t l1, l2;
	struct iovec iov[2] = { { "ab", 2 }, { "cde", 3 } };
	assert_int_equal(nvlog_append_nowait(log, 9, iov, 2, &l1), 0);
	assert_int_equal(nvlog_append_nowait(log, 9, iov, 1, &l2), 0);
	assert_int_equal(l2, l1 + 1);
	assert_int_equal(nvlog_durable_lsn(log), 0);
	assert_int_equal(nvlog_trim(log, 2), 0); /* nothing durable: no-op */
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_int_equal(in.tail_lsn, 1);
	assert_int_equal(nvlog_wait(log, l2), 0);
	assert_int_equal(nvlog_durable_lsn(log), 2);
	assert_int_equal(nvlog_wait(log, 3), -EINVAL); /* never reserved */
	struct nvlog_stats st;
	nvlog_stats(log, &st);
	assert_int_equal(st.appends, 2);
	assert_int_equal(st.append_bytes, 7);
	assert_int_equal(st.persists, 1);
	assert_int_equal(st.batch_hist[1], 1); /* two records in one persist */
	assert_int_equal(st.used_bytes, NVLOG_REC_SIZE(5) + NVLOG_REC_SIZE(2));
	assert_true(st.oldest_age_ns < 10ull * 1000000000ull);
	assert_int_equal(nvlog_trim(log, 1), 0);
	nvlog_stats(log, &st);
	assert_int_equal(st.tail_lsn, 2);
	assert_int_equal(st.trims, 1);
	assert_int_equal(st.used_bytes, NVLOG_REC_SIZE(2));
	struct seen *s = calloc(1, sizeof(*s));
	nvlog_scan(log, collect, s, NULL);
	assert_int_equal(s->n, 1);
	assert_int_equal(s->lsn[0], 2);
	free(s);
	nvlog_stats_reset(log);
	nvlog_stats(log, &st);
	assert_int_equal(st.appends, 0);
	assert_int_equal(st.tail_lsn, 2);
	assert_int_equal(nvlog_trim(log, UINT64_MAX), 0);
	nvlog_stats(log, &st);
	assert_int_equal(st.used_bytes, 0);
	assert_int_equal(st.oldest_age_ns, 0);
	nvlog_info(log, &in);
	assert_string_equal(in.kind_name, getenv("PMEM_IS_PMEM_FORCE") ? "emulated" : "msync");
	nvlog_close(log, true);
}

/* bin/presto-log: format refuses live records, dump reads without changing */
static void test_presto_log_tool(void **state)
{
	(void)state;
	char tool[512], p[128], cmd[1024], out[128];
	const char *bin = getenv("PRESTO_BIN");
	snprintf(tool, sizeof(tool), "%s/presto-log", bin ? bin : "bin");
	if (access(tool, X_OK) != 0) {
		print_message("no %s: skipped\n", tool);
		skip();
	}
	tpath(p, sizeof(p), "tool");
	tpath(out, sizeof(out), "tool.json");
	snprintf(cmd, sizeof(cmd), "'%s' format '%s' 1M >/dev/null", tool, p);
	assert_int_equal(system(cmd), 0);
	struct nvlog *log = open_log(p);
	for (uint64_t k = 1; k <= 5; k++)
		app(log, k);
	nvlog_close(log, false);
	snprintf(cmd, sizeof(cmd), "'%s' format '%s' 1M 2>/dev/null", tool, p);
	assert_int_not_equal(system(cmd), 0); /* live records */
	uint8_t sb_before[4096], sb_after[4096];
	file_rw(p, 0, sb_before, sizeof(sb_before), false);
	snprintf(cmd, sizeof(cmd), "'%s' dump --json '%s' > '%s'", tool, p, out);
	assert_int_equal(system(cmd), 0);
	file_rw(p, 0, sb_after, sizeof(sb_after), false);
	assert_memory_equal(sb_before, sb_after, sizeof(sb_before)); /* read-only */
	FILE *f = fopen(out, "r");
	assert_non_null(f);
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	assert_non_null(strstr(buf, "\"records\": 5"));
	assert_non_null(strstr(buf, "\"lsn\": 5,"));
	assert_non_null(strstr(buf, "\"state\": \"clean\""));
	snprintf(cmd, sizeof(cmd), "'%s' format --force '%s' 1M >/dev/null", tool, p);
	assert_int_equal(system(cmd), 0);
}

/* on persistent memory (here emulated) each appender's drain makes its
 * copy durable, and the appender commits itself: its record is durable when
 * nvlog_append_nowait returns, with no nvlog_wait */
static void test_pmem_appender_commits_itself(void **state)
{
	(void)state;
	char p[128];
	tpath(p, sizeof(p), "pmem");
	assert_int_equal(nvlog_format(p, 1 << 20, NULL), 0);
	struct nvlog *log = open_log(p);
	struct nvlog_info in;
	nvlog_info(log, &in);
	assert_string_equal(in.kind_name, "emulated");
	struct iovec iov = { "abc", 3 };
	for (uint64_t i = 1; i <= 3; i++) {
		uint64_t l;
		assert_int_equal(nvlog_append_nowait(log, 9, &iov, 1, &l), 0);
		assert_int_equal(l, i);
		assert_int_equal(nvlog_durable_lsn(log), l);
	}
	struct nvlog_stats st;
	nvlog_stats(log, &st);
	assert_int_equal(st.persists, 3);
	assert_int_equal(st.batch_hist[0], 3); /* one record each */
	assert_int_equal(nvlog_trim(log, 3), 0); /* durable, so trimmed */
	nvlog_info(log, &in);
	assert_int_equal(in.tail_lsn, 4);
	nvlog_close(log, true);
}

int main(int argc, char **argv)
{
	/* the first group is the msync kind's: libpmem reads
	 * PMEM_IS_PMEM_FORCE when it loads, so start again without it */
	if (argc == 1 && getenv("PMEM_IS_PMEM_FORCE")) {
		unsetenv("PMEM_IS_PMEM_FORCE");
		execl("/proc/self/exe", argv[0], (char *)NULL);
		return 1;
	}
	if (argc > 1 && strcmp(argv[1], "pmem") == 0) {
		const struct CMUnitTest pmem[] = {
			cmocka_unit_test(test_pmem_appender_commits_itself),
			cmocka_unit_test(test_group_commit_threads),
		};
		return cmocka_run_group_tests_name("nvlog on emulated pmem", pmem, setup, teardown);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_reopen_clean),
		cmocka_unit_test(test_format_refuses_live),
		cmocka_unit_test(test_open_log_is_locked),
		cmocka_unit_test(test_hostile_log_files),
		cmocka_unit_test(test_wrap_many_laps),
		cmocka_unit_test(test_torn_head),
		cmocka_unit_test(test_damaged_pad),
		cmocka_unit_test(test_damaged_pad_type),
		cmocka_unit_test(test_corrupt_middle),
		cmocka_unit_test(test_stale_never_validates),
		cmocka_unit_test(test_stale_epoch),
		cmocka_unit_test(test_length_bounds),
		cmocka_unit_test(test_superblock_torn),
		cmocka_unit_test(test_boot_epoch_exhausted),
		cmocka_unit_test(test_version1_log),
		cmocka_unit_test(test_append_gather),
		cmocka_unit_test(test_tail_epoch_floor),
		cmocka_unit_test(test_proof_search_bounded),
		cmocka_unit_test(test_pad_at_start_refused),
		cmocka_unit_test(test_group_commit_threads),
		cmocka_unit_test(test_full_log),
		cmocka_unit_test(test_nowait_trim_stats),
		cmocka_unit_test(test_presto_log_tool),
	};
	int failed = cmocka_run_group_tests_name("nvlog", tests, setup, teardown);

	/* the pmem tests again in a program of their own: libpmem reads
	 * PMEM_IS_PMEM_FORCE when it loads */
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("PMEM_IS_PMEM_FORCE", "1", 1);
		execl("/proc/self/exe", argv[0], "pmem", (char *)NULL);
		_exit(127);
	}
	int ws = 0;
	pid_t w = -1;
	if (pid > 0)
		while ((w = waitpid(pid, &ws, 0)) < 0 && errno == EINTR)
			;
	/* the counts are in the output; the status only says whether all passed */
	return failed || w != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
}
