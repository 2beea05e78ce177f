/*
 * presto-log.c -- the NVRAM log's tool:
 *
 *   presto-log format PATH SIZE [--force]   create or reformat a log (SIZE: bytes, K, M, G)
 *   presto-log dump PATH [--json]           superblock slots and records, read-only (forensics)
 *   presto-log bench DIR [--shm DIR] [--json FILE] [--quick]
 *                                           append+persist latency against pwrite+fdatasync
 *
 * dump maps the log read-only and never changes it (opening it with the
 * library would bump the epoch and seal the head). bench re-executes itself
 * once per configuration (the hidden subcommand bench-one) because libpmem
 * reads PMEM_IS_PMEM_FORCE once per process.
 *
 * Exit status: 0 success, 1 failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/nvlog.h"
#include "cache/nvlog_format.h"

static void usage(void)
{
	fprintf(stderr,
	    "usage: presto-log format PATH SIZE [--force]\n"
	    "       presto-log dump PATH [--json]\n"
	    "       presto-log bench DIR [--shm DIR] [--json FILE] [--quick]\n");
	exit(2);
}

/* parse_size -- "64M" and friends. Returns 0 or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (v > (SIZE_MAX >> shift))
		return -EINVAL;		/* would wrap */
	v <<= shift;
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* ---- format ---- */

static int cmd_format(int argc, char **argv)
{
	const char *path = NULL, *size_s = NULL;
	struct nvlog_opts o = { 0 };
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--force") == 0)
			o.flags |= NVLOG_O_FORCE;
		else if (!path)
			path = argv[i];
		else if (!size_s)
			size_s = argv[i];
		else
			usage();
	}
	uint64_t size;
	if (!path || !size_s || parse_size(size_s, &size))
		usage();
	int rc = nvlog_format(path, size, &o);
	if (rc == -EEXIST) {
		fprintf(stderr, "presto-log: %s holds live records; --force to reformat it anyway\n", path);
		return 1;
	}
	if (rc == -EBUSY) {
		fprintf(stderr, "presto-log: %s is open in another process (a running presto-nfsd?): "
			"not formatted, even with --force\n", path);
		return 1;
	}
	if (rc) {
		fprintf(stderr, "presto-log: format %s: %s\n", path, strerror(-rc));
		return 1;
	}
	printf("formatted %s: %" PRIu64 " bytes\n", path, size & ~(uint64_t)4095);
	return 0;
}

/* ---- dump ---- */

static void fmt_uuid(const uint8_t u[16], char out[37])
{
	static const char hx[] = "0123456789abcdef";
	int k = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hx[u[i] >> 4];
		out[k++] = hx[u[i] & 15];
	}
	out[k] = 0;
}

static void fmt_time(uint64_t ns, char *out, size_t n)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + k, n - k, ".%06lluZ", (unsigned long long)(ns % 1000000000ull / 1000));
}

struct dump_ctx {
	bool json;
	uint64_t n;
};

static int dump_rec(void *arg, const struct nvlog_walk_rec *r)
{
	struct dump_ctx *d = arg;
	char ts[64];
	fmt_time(r->hdr->time_ns, ts, sizeof(ts));
	if (d->json)
		printf("%s\n    {\"lsn\": %" PRIu64 ", \"type\": %u, \"flags\": %u, \"len\": %u, "
		    "\"epoch\": %u, \"dlsn\": %" PRIu64 ", \"time\": \"%s\", \"offset\": %" PRIu64
		    ", \"crc\": \"%08x\"}",
		    d->n ? "," : "", r->hdr->lsn, r->hdr->type, r->hdr->flags, r->hdr->len,
		    r->hdr->epoch, r->hdr->dlsn, ts, (uint64_t)NVLOG_AREA_OFF + r->off, r->hdr->crc);
	else
		printf("%10" PRIu64 "  %5u  %8u  %6u  %10" PRIu64 "  %s  %10" PRIu64 "  %08x\n",
		    r->hdr->lsn, r->hdr->type, r->hdr->len, r->hdr->epoch, r->hdr->dlsn, ts,
		    (uint64_t)NVLOG_AREA_OFF + r->off, r->hdr->crc);
	d->n++;
	return 0;
}

/* json_str -- s as a JSON string, quoted and escaped */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void dump_slot(const struct nvlog_sb *s, int i, const char *why, bool current, bool json)
{
	bool valid = !why;
	char u[37], bid[37];
	fmt_uuid(s->uuid, u);
	fmt_uuid(s->boot_id, bid);
	if (json) {
		printf("    {\"slot\": %d, \"valid\": %s, \"current\": %s, \"seq\": %" PRIu64
		    ", \"version\": %u, \"size\": %" PRIu64 ", \"area_len\": %" PRIu64
		    ", \"uuid\": \"%s\", \"salt\": \"%016" PRIx64 "\", \"boot_epoch\": %" PRIu64
		    ", \"boot_id\": \"%s\", \"tail_pos\": %" PRIu64 ", \"tail_lsn\": %" PRIu64
		    ", \"tail_epoch\": %u, \"record_align\": %" PRIu64
		    ", \"clean\": %s, \"format_time\": %" PRIu64 "}",
		    i, valid ? "true" : "false", current ? "true" : "false", s->seq, s->version,
		    s->size, s->area_len, u, s->salt, s->boot_epoch, bid, s->tail_pos, s->tail_lsn,
		    s->version == NVLOG_VERSION_V1 ? 0 : s->tail_epoch, nvlog_align(s->version),
		    s->clean ? "true" : "false", s->format_time);
		return;
	}
	printf("slot %d: %s%s%s%s%s seq %" PRIu64 "\n", i, valid ? "valid" : "INVALID",
	    valid ? "" : " (", valid ? "" : why, valid ? "" : ")", current ? " (current)" : "", s->seq);
	if (!valid)
		return;
	printf("  version %u (%" PRIu64 "-byte records)  size %" PRIu64 "  area %" PRIu64
	    " bytes at %" PRIu64 "\n", s->version, nvlog_align(s->version), s->size, s->area_len,
	    s->area_off);
	printf("  uuid %s  salt %016" PRIx64 "\n", u, s->salt);
	printf("  boot epoch %" PRIu64 "  boot id %s  clean %s\n", s->boot_epoch, bid,
	    s->clean ? "yes" : "no");
	printf("  tail lsn %" PRIu64 " at position %" PRIu64 " (offset %" PRIu64 "), epoch >= %u\n",
	    s->tail_lsn, s->tail_pos, s->area_len ? NVLOG_AREA_OFF + s->tail_pos % s->area_len : 0,
	    s->version == NVLOG_VERSION_V1 ? 0 : s->tail_epoch);
}

static const char *end_name(enum nvlog_end e)
{
	return e == NVLOG_END_CLEAN ? "clean" : e == NVLOG_END_TORN ? "torn" : "corrupt";
}

static int cmd_dump(int argc, char **argv)
{
	const char *path = NULL;
	bool json = false;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (!path)
			path = argv[i];
		else
			usage();
	}
	if (!path)
		usage();
	/* O_NONBLOCK: a FIFO must not hang the open (it is refused below) */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "presto-log: %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
		fprintf(stderr, "presto-log: %s: not a file or a device\n", path);
		close(fd);
		return 1;
	}
	off_t len = fstat(fd, &st) == 0 && st.st_size ? st.st_size : lseek(fd, 0, SEEK_END);
	if (len < (off_t)NVLOG_MIN_SIZE) {
		fprintf(stderr, "presto-log: %s: too small to be a log\n", path);
		close(fd);
		return 1;
	}
	const uint8_t *base = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		fprintf(stderr, "presto-log: mmap %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct nvlog_sb s[2], cur;
	memcpy(&s[0], base + NVLOG_SB_SLOT_OFF0, sizeof(s[0]));
	memcpy(&s[1], base + NVLOG_SB_SLOT_OFF1, sizeof(s[1]));
	int slot = -1;
	int rc = nvlog_sb_pick(base, (size_t)len, &cur, &slot);
	if (json) {
		printf("{\n  \"path\": ");
		json_str(path);
		printf(",\n  \"slots\": [\n");
	}
	else
		printf("%s: %s\n", path, rc ? "NOT A PRESTO LOG (no valid superblock slot)" : "presto NVRAM log");
	for (int i = 0; i < 2; i++) {
		dump_slot(&s[i], i, nvlog_sb_why(&s[i], (size_t)len), i == slot, json);
		if (json)
			printf("%s\n", i == 0 ? "," : "");
	}
	if (rc) {
		if (json)
			printf("  ]\n}\n");
		munmap((void *)base, (size_t)len);
		return 1;
	}
	struct nvlog_view v = { .base = base, .map_len = (size_t)len, .sb = cur };
	struct nvlog_walk_end w;
	struct dump_ctx d = { json, 0 };
	if (json)
		printf("  ],\n  \"records\": [");
	else
		printf("\n%10s  %5s  %8s  %6s  %10s  %-27s  %10s  %8s\n", "lsn", "type", "len", "epoch",
		    "dlsn", "time (UTC)", "offset", "crc");
	nvlog_walk(&v, UINT64_MAX, dump_rec, &d, &w);
	uint64_t used = w.head_pos - cur.tail_pos;
	if (json) {
		printf("\n  ],\n  \"end\": {\"state\": \"%s\", \"records\": %" PRIu64 ", \"bytes\": %" PRIu64
		    ", \"first_lsn\": %" PRIu64 ", \"last_lsn\": %" PRIu64 ", \"used_bytes\": %" PRIu64,
		    end_name(w.end), w.records, w.bytes, cur.tail_lsn, w.last_lsn, used);
		if (w.end != NVLOG_END_CLEAN)
			printf(", \"bad_lsn\": %" PRIu64 ", \"bad_offset\": %" PRIu64 ", \"why\": \"%s\"",
			    w.bad_lsn, (uint64_t)NVLOG_AREA_OFF + w.bad_off, w.why);
		if (w.end == NVLOG_END_CORRUPT)
			printf(", \"proof_lsn\": %" PRIu64 ", \"proof_offset\": %" PRIu64, w.proof_lsn,
			    (uint64_t)NVLOG_AREA_OFF + w.proof_off);
		printf("}\n}\n");
	} else {
		printf("\n%" PRIu64 " live records, %" PRIu64 " payload bytes, %" PRIu64 " of %" PRIu64
		    " bytes used; end: %s", w.records, w.bytes, used, cur.area_len, end_name(w.end));
		if (w.end != NVLOG_END_CLEAN)
			printf(" at LSN %" PRIu64 ", offset %" PRIu64 " (%s)", w.bad_lsn,
			    (uint64_t)NVLOG_AREA_OFF + w.bad_off, w.why);
		if (w.end == NVLOG_END_CORRUPT)
			printf("; LSN %" PRIu64 " at offset %" PRIu64 " proves it had been durable",
			    w.proof_lsn, (uint64_t)NVLOG_AREA_OFF + w.proof_off);
		printf("\n");
	}
	munmap((void *)base, (size_t)len);
	return w.end == NVLOG_END_CORRUPT ? 1 : 0;
}

/* ---- bench ---- */

#define BENCH_LOG_SIZE (64u << 20)
#define BENCH_MAX_SAMPLES 400000

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct bench_thread {
	pthread_t th;
	struct nvlog *log;     /* log mode */
	int fd;                /* pwrite mode */
	uint64_t region;       /* pwrite mode: this thread's part of the file */
	size_t size;
	uint64_t deadline;
	uint64_t *lat;
	size_t n;
	int err;
};

static volatile int bench_stop;

static void *bench_log_thread(void *a)
{
	struct bench_thread *t = a;
	uint8_t *buf = malloc(t->size);
	memset(buf, 0xa5, t->size);
	struct iovec iov = { buf, t->size };
	while (t->n < BENCH_MAX_SAMPLES && !bench_stop) {
		uint64_t lsn, t0 = now_ns();
		int rc = nvlog_append(t->log, 1, &iov, 1, &lsn);
		uint64_t t1 = now_ns();
		if (rc) {
			t->err = rc;
			break;
		}
		t->lat[t->n++] = t1 - t0;
		if ((t->n & 15) == 0 && t1 > t->deadline)
			break;
	}
	free(buf);
	return NULL;
}

static void *bench_pwrite_thread(void *a)
{
	struct bench_thread *t = a;
	uint8_t *buf = malloc(t->size);
	memset(buf, 0x5a, t->size);
	uint64_t off = 0;
	while (t->n < BENCH_MAX_SAMPLES) {
		uint64_t t0 = now_ns();
		if (pwrite(t->fd, buf, t->size, (off_t)(t->region + off)) != (ssize_t)t->size ||
		    fdatasync(t->fd)) {
			t->err = -errno;
			break;
		}
		uint64_t t1 = now_ns();
		t->lat[t->n++] = t1 - t0;
		off = (off + t->size) % (BENCH_LOG_SIZE / 8 - t->size);
		if (t1 > t->deadline)
			break;
	}
	free(buf);
	return NULL;
}

/* the destager of the benchmark: trims whatever is durable when half full */
static void *bench_trimmer(void *a)
{
	struct nvlog *log = a;
	while (!bench_stop) {
		struct nvlog_stats st;
		nvlog_stats(log, &st);
		if (st.used_bytes > st.area_bytes / 2)
			nvlog_trim(log, st.durable_lsn);
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * bench_one -- one configuration, in its own process: MODE (log|pwrite) PATH
 * SIZE THREADS MILLISECONDS. Prints "p50_ns p99_ns ops seconds recs_per_persist kind".
 */
static int cmd_bench_one(int argc, char **argv)
{
	if (argc != 7)
		usage();
	const char *mode = argv[2], *path = argv[3];
	size_t size = strtoul(argv[4], NULL, 10);
	int nt = atoi(argv[5]);
	uint64_t ms = strtoull(argv[6], NULL, 10);
	struct bench_thread t[16];
	struct nvlog *log = NULL;
	int fd = -1, rc = 0;
	pthread_t trimmer;
	const char *kind = "pwrite+fdatasync";

	if (nt < 1 || nt > 16)
		usage();
	if (strcmp(mode, "log") == 0) {
		struct nvlog_opts o = { .flags = NVLOG_O_FORCE, .full_wait_ms = 5000 };
		if ((rc = nvlog_format(path, BENCH_LOG_SIZE, &o)) || (rc = nvlog_open(path, &o, &log))) {
			fprintf(stderr, "presto-log bench: %s: %s\n", path, strerror(-rc));
			return 1;
		}
		struct nvlog_info in;
		nvlog_info(log, &in);
		kind = in.kind_name;
		/* warm up, then count from zero */
		uint8_t *w = calloc(1, size);
		struct iovec iov = { w, size };
		uint64_t lsn = 0;
		for (int i = 0; i < 200; i++)
			nvlog_append(log, 1, &iov, 1, &lsn);
		free(w);
		nvlog_trim(log, lsn);
		nvlog_stats_reset(log);
		pthread_create(&trimmer, NULL, bench_trimmer, log);
	} else {
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || posix_fallocate(fd, 0, BENCH_LOG_SIZE) || fsync(fd)) {
			fprintf(stderr, "presto-log bench: %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	uint64_t t0 = now_ns(), deadline = t0 + ms * 1000000ull;
	for (int i = 0; i < nt; i++) {
		t[i] = (struct bench_thread){ .log = log, .fd = fd, .size = size, .deadline = deadline,
			.region = (uint64_t)i * (BENCH_LOG_SIZE / 8),
			.lat = malloc(BENCH_MAX_SAMPLES * sizeof(uint64_t)) };
		pthread_create(&t[i].th, NULL, log ? bench_log_thread : bench_pwrite_thread, &t[i]);
	}
	size_t total = 0;
	for (int i = 0; i < nt; i++) {
		pthread_join(t[i].th, NULL);
		total += t[i].n;
		if (t[i].err)
			rc = t[i].err;
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	bench_stop = 1;
	double rpp = 0;
	if (log) {
		pthread_join(trimmer, NULL);
		struct nvlog_stats st;
		nvlog_stats(log, &st);
		rpp = st.persists ? (double)st.appends / (double)st.persists : 0;
		nvlog_close(log, true);
	} else {
		close(fd);
	}
	unlink(path);
	if (rc) {
		fprintf(stderr, "presto-log bench: %s: %s\n", path, strerror(-rc));
		return 1;
	}
	uint64_t *all = malloc((total + 1) * sizeof(uint64_t));
	size_t k = 0;
	for (int i = 0; i < nt; i++) {
		memcpy(all + k, t[i].lat, t[i].n * sizeof(uint64_t));
		k += t[i].n;
		free(t[i].lat);
	}
	qsort(all, total, sizeof(uint64_t), cmp_u64);
	uint64_t p50 = total ? all[total / 2] : 0, p99 = total ? all[total * 99 / 100] : 0;
	free(all);
	printf("%" PRIu64 " %" PRIu64 " %zu %.3f %.2f %s\n", p50, p99, total, secs, rpp, kind);
	return 0;
}

struct bench_result {
	const char *config;
	size_t size;
	int threads;
	double p50_us, p99_us, ops_s, rpp;
	char kind[32];
	bool ok;
};

/* run_one -- run bench-one in a child with PMEM_IS_PMEM_FORCE as given (NULL: unset) */
static int run_one(const char *self, const char *force, const char *mode, const char *path,
    size_t size, int threads, int ms, struct bench_result *r)
{
	int p[2];
	if (pipe(p))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 1);
		if (force)
			setenv("PMEM_IS_PMEM_FORCE", force, 1);
		else
			unsetenv("PMEM_IS_PMEM_FORCE");
		char s[32], t[16], m[16];
		snprintf(s, sizeof(s), "%zu", size);
		snprintf(t, sizeof(t), "%d", threads);
		snprintf(m, sizeof(m), "%d", ms);
		execl(self, self, "bench-one", mode, path, s, t, m, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[256] = { 0 };
	size_t have = 0;
	ssize_t n;
	while (have < sizeof(buf) - 1 && (n = read(p[0], buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	unsigned long long p50, p99;
	size_t ops;
	double secs;
	if (!WIFEXITED(st) || WEXITSTATUS(st) ||
	    sscanf(buf, "%llu %llu %zu %lf %lf %31s", &p50, &p99, &ops, &secs, &r->rpp, r->kind) != 6)
		return -EIO;
	r->p50_us = (double)p50 / 1000.0;
	r->p99_us = (double)p99 / 1000.0;
	r->ops_s = secs > 0 ? (double)ops / secs : 0;
	r->ok = true;
	return 0;
}

static int cmd_bench(int argc, char **argv)
{
	const char *dir = NULL, *shm = "/dev/shm", *json = NULL;
	bool quick = false;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--shm") == 0 && i + 1 < argc)
			shm = argv[++i];
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else if (strcmp(argv[i], "--quick") == 0)
			quick = true;
		else if (!dir)
			dir = argv[i];
		else
			usage();
	}
	if (!dir)
		usage();
	struct stat st;
	char ddir[4096];
	snprintf(ddir, sizeof(ddir), "%s", dir);
	if (stat(ddir, &st) || !S_ISDIR(st.st_mode)) {
		char *slash = strrchr(ddir, '/');
		if (slash && slash != ddir)
			*slash = 0;
		else
			snprintf(ddir, sizeof(ddir), ".");
	}
	struct statfs sf;
	if (statfs(ddir, &sf) == 0 && sf.f_type == 0x01021994 /* TMPFS_MAGIC */)
		fprintf(stderr, "presto-log bench: warning: %s is tmpfs, not a disk\n", ddir);
	char self[4096];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0)
		return 1;
	self[sl] = 0;

	char shm_log[4200], disk_log[4200], disk_dat[4200];
	snprintf(shm_log, sizeof(shm_log), "%s/presto-bench-%d.log", shm, (int)getpid());
	snprintf(disk_log, sizeof(disk_log), "%s/presto-bench-%d.log", ddir, (int)getpid());
	snprintf(disk_dat, sizeof(disk_dat), "%s/presto-bench-%d.dat", ddir, (int)getpid());
	struct {
		const char *name, *force, *mode, *path;
		int ms;
	} cfg[] = {
		{ "shm, PMEM_IS_PMEM_FORCE=1", "1", "log", shm_log, 300 },
		{ "shm, msync", "0", "log", shm_log, 300 },
		{ "disk file, msync", "0", "log", disk_log, 1000 },
		{ "disk, pwrite+fdatasync", NULL, "pwrite", disk_dat, 1000 },
	};
	size_t sizes[] = { 128, 4096, 65536 };
	int threads[] = { 1, 8 };
	struct bench_result res[4 * 3 * 2];
	int nres = 0, failed = 0;

	printf("presto-log bench: shm %s, disk %s; append+persist latency (pwrite+fdatasync for the last)\n\n",
	    shm, ddir);
	printf("%-27s %-9s %6s %7s %10s %10s %11s %9s\n", "configuration", "kind", "size", "threads",
	    "p50 us", "p99 us", "ops/s", "rec/pers");
	for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		for (size_t s = 0; s < 3; s++) {
			for (size_t t = 0; t < 2; t++) {
				struct bench_result *r = &res[nres++];
				memset(r, 0, sizeof(*r));
				r->config = cfg[c].name;
				r->size = sizes[s];
				r->threads = threads[t];
				int ms = quick ? cfg[c].ms / 5 : cfg[c].ms;
				if (run_one(self, cfg[c].force, cfg[c].mode, cfg[c].path, sizes[s], threads[t], ms, r)) {
					printf("%-27s %-9s %6zu %7d   failed\n", cfg[c].name, "-", sizes[s], threads[t]);
					failed++;
					continue;
				}
				char rpp[16] = "-";
				if (strcmp(cfg[c].mode, "log") == 0)
					snprintf(rpp, sizeof(rpp), "%.2f", r->rpp);
				printf("%-27s %-9s %6zu %7d %10.2f %10.2f %11.0f %9s\n", cfg[c].name,
				    strcmp(cfg[c].mode, "log") ? "-" : r->kind, sizes[s], threads[t], r->p50_us,
				    r->p99_us, r->ops_s, rpp);
				fflush(stdout);
			}
		}
	}
	/* the two claims: 4 KiB p50 on emulated pmem, and the ratio to fdatasync */
	struct bench_result *emu4k = &res[0 * 6 + 1 * 2 + 0], *dsk4k = &res[3 * 6 + 1 * 2 + 0];
	struct bench_result *msd4k = &res[2 * 6 + 1 * 2 + 0];
	printf("\n");
	if (emu4k->ok)
		printf("4 KiB, 1 thread, shm with PMEM_IS_PMEM_FORCE=1: p50 %.2f us (target < 2 us): %s\n",
		    emu4k->p50_us, emu4k->p50_us < 2.0 ? "met" : "NOT met");
	if (emu4k->ok && dsk4k->ok)
		printf("4 KiB, 1 thread: pwrite+fdatasync p50 %.1f us is %.0fx the emulated-pmem append "
		    "(target >= 100x): %s\n", dsk4k->p50_us, dsk4k->p50_us / emu4k->p50_us,
		    dsk4k->p50_us / emu4k->p50_us >= 100 ? "met" : "NOT met");
	if (msd4k->ok && dsk4k->ok)
		printf("4 KiB, 1 thread: log on the disk file with msync p50 %.1f us\n", msd4k->p50_us);
	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			fprintf(stderr, "presto-log bench: %s: %s\n", json, strerror(errno));
			return 1;
		}
		fprintf(f, "{\n  \"benchmark\": \"nvlog\",\n  \"shm\": \"%s\",\n  \"disk\": \"%s\",\n  \"results\": [", shm, ddir);
		for (int i = 0; i < nres; i++)
			fprintf(f, "%s\n    {\"config\": \"%s\", \"kind\": \"%s\", \"size\": %zu, \"threads\": %d, "
			    "\"ok\": %s, \"p50_us\": %.3f, \"p99_us\": %.3f, \"ops_per_s\": %.0f, "
			    "\"records_per_persist\": %.2f}",
			    i ? "," : "", res[i].config, res[i].kind, res[i].size, res[i].threads,
			    res[i].ok ? "true" : "false", res[i].p50_us, res[i].p99_us, res[i].ops_s, res[i].rpp);
		fprintf(f, "\n  ]\n}\n");
		fclose(f);
	}
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "format") == 0)
		return cmd_format(argc, argv);
	if (strcmp(argv[1], "dump") == 0)
		return cmd_dump(argc, argv);
	if (strcmp(argv[1], "bench") == 0)
		return cmd_bench(argc, argv);
	if (strcmp(argv[1], "bench-one") == 0)
		return cmd_bench_one(argc, argv);
	usage();
	return 2;
}
