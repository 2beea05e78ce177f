/*
 * test_drc.c -- the duplicate request cache (nfsd/drc.h), one test per rule:
 * miss -> in progress -> done -> hit with the same bytes; a retransmission of
 * a call in progress is dropped; abort forgets; every field of the key
 * (address, port, xid, program, version, procedure, argument bytes) tells
 * calls apart; the table stays bounded at DRC_MAX_ENTRIES by recycling the
 * least recently used finished entry and never an in-progress one; drc_insert
 * (log recovery) makes a finished entry.
 *
 * The cache is one process-wide table with no reset, so every test uses xids
 * of its own (next_xid()) and checks counters as differences.
 */
#include "nfsd/drc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint32_t xid_counter = 1;

static uint32_t next_xid(void)
{
	return xid_counter++;
}

static struct sockaddr_in sin4(const char *a, unsigned port)
{
	struct sockaddr_in s;
	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
	return s;
}

static struct sockaddr_in6 sin6(const char *a, unsigned port)
{
	struct sockaddr_in6 s;
	memset(&s, 0, sizeof(s));
	s.sin6_family = AF_INET6;
	s.sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
	return s;
}

/* key -- a WRITE-like call from 10.0.0.1:700 with ARGS as its arguments. */
static struct drc_key key(uint32_t xid, const char *args)
{
	struct drc_key k;
	struct sockaddr_in s = sin4("10.0.0.1", 700);
	drc_key_init(&k, (struct sockaddr *)&s, sizeof(s), xid, 100003, 3, 7, args, strlen(args));
	return k;
}

static void stats(uint64_t *hits, uint64_t *drops, uint64_t *entries)
{
	drc_stats(hits, drops, entries);
}

/* complete -- begin (expect a miss) and end K with REPLY. */
static void complete(const struct drc_key *k, const char *reply)
{
	uint8_t *r = NULL;
	size_t n = 0;
	assert_int_equal(drc_begin(k, &r, &n), DRC_MISS);
	drc_end(k, (const uint8_t *)reply, strlen(reply));
}

static void expect_hit(const struct drc_key *k, const char *reply)
{
	uint8_t *r = NULL;
	size_t n = 0;
	assert_int_equal(drc_begin(k, &r, &n), DRC_DONE);
	assert_non_null(r);
	assert_int_equal(n, strlen(reply));
	assert_memory_equal(r, reply, n);
	free(r);
}

static void expect_miss_then_abort(const struct drc_key *k)
{
	uint8_t *r = NULL;
	size_t n = 0;
	assert_int_equal(drc_begin(k, &r, &n), DRC_MISS);
	drc_abort(k);
}

/* ---- the life of an entry ---- */

static void test_miss_in_progress_done_hit(void **state)
{
	uint64_t h0, d0, e0, h, d, e;
	uint8_t *r = NULL;
	size_t n = 0;
	uint8_t rec[300];
	(void)state;

	for (size_t i = 0; i < sizeof(rec); i++)
		rec[i] = (uint8_t)(i * 7 + 1);
	struct drc_key k = key(next_xid(), "args");
	stats(&h0, &d0, &e0);
	assert_int_equal(drc_begin(&k, &r, &n), DRC_MISS);
	stats(&h, &d, &e);
	assert_int_equal(e, e0 + 1);
	/* a retransmission while the first is executing: dropped */
	assert_int_equal(drc_begin(&k, &r, &n), DRC_IN_PROGRESS);
	assert_int_equal(drc_begin(&k, &r, &n), DRC_IN_PROGRESS);
	stats(&h, &d, &e);
	assert_int_equal(d, d0 + 2);
	assert_int_equal(h, h0);

	drc_end(&k, rec, sizeof(rec));
	rec[0] ^= 0xff;		/* the cache kept its own copy */
	for (int i = 0; i < 3; i++) {
		r = NULL;
		assert_int_equal(drc_begin(&k, &r, &n), DRC_DONE);
		assert_int_equal(n, sizeof(rec));
		assert_int_equal(r[0], 1);
		assert_memory_equal(r + 1, rec + 1, sizeof(rec) - 1);
		r[1] ^= 0xff;	/* each hit gets its own copy (rpc_reply frees it) */
		free(r);
	}
	stats(&h, &d, &e);
	assert_int_equal(h, h0 + 3);
	assert_int_equal(d, d0 + 2);
	assert_int_equal(e, e0 + 1);
}

static void test_abort_forgets(void **state)
{
	uint64_t h0, d0, e0, h, d, e;
	(void)state;

	struct drc_key k = key(next_xid(), "args");
	stats(&h0, &d0, &e0);
	expect_miss_then_abort(&k);
	stats(&h, &d, &e);
	assert_int_equal(e, e0);
	/* the retransmission executes again */
	complete(&k, "reply");
	expect_hit(&k, "reply");
	/* abort of a finished entry changes nothing */
	drc_abort(&k);
	expect_hit(&k, "reply");
	/* abort and end of a key never begun change nothing */
	struct drc_key other = key(next_xid(), "args");
	drc_abort(&other);
	drc_end(&other, (const uint8_t *)"x", 1);
	stats(&h, &d, &e);
	assert_int_equal(e, e0 + 1);
	expect_miss_then_abort(&other);
}

static void test_end_twice_keeps_first(void **state)
{
	(void)state;

	struct drc_key k = key(next_xid(), "args");
	complete(&k, "first");
	drc_end(&k, (const uint8_t *)"second", 6);
	expect_hit(&k, "first");
}

static void test_empty_reply(void **state)
{
	uint8_t *r = NULL;
	size_t n = 99;
	(void)state;

	struct drc_key k = key(next_xid(), "args");
	assert_int_equal(drc_begin(&k, &r, &n), DRC_MISS);
	drc_end(&k, (const uint8_t *)"", 0);
	assert_int_equal(drc_begin(&k, &r, &n), DRC_DONE);
	assert_int_equal(n, 0);
	free(r);
}

/* ---- the key ---- */

static void test_key_fields_distinguish(void **state)
{
	struct drc_key k[16];
	int nk = 0;
	uint32_t xid = next_xid();
	next_xid();
	struct sockaddr_in a = sin4("10.0.0.1", 700), a_port = sin4("10.0.0.1", 701),
			   a_addr = sin4("10.0.0.2", 700);
	struct sockaddr_in6 b = sin6("fd00::1", 700), b_addr = sin6("fd00::2", 700),
			    b_mapped = sin6("::ffff:10.0.0.1", 700);
	const char *args = "the arguments";
	size_t al = strlen(args);
	(void)state;

#define K(sa, x, prog, vers, proc, p, l) \
	drc_key_init(&k[nk++], (struct sockaddr *)&(sa), sizeof(sa), x, prog, vers, proc, p, l)
	K(a, xid, 100003, 3, 7, args, al);		/* the reference */
	K(a, xid + 1, 100003, 3, 7, args, al);		/* xid */
	K(a, xid, 100003, 3, 8, args, al);		/* procedure */
	K(a, xid, 100005, 3, 7, args, al);		/* program */
	K(a, xid, 100003, 2, 7, args, al);		/* version */
	K(a_port, xid, 100003, 3, 7, args, al);		/* port */
	K(a_addr, xid, 100003, 3, 7, args, al);		/* address */
	K(a, xid, 100003, 3, 7, "the argumentS", al);	/* one argument byte */
	K(a, xid, 100003, 3, 7, args, al - 1);		/* argument length */
	K(a, xid, 100003, 3, 7, args, 0);		/* no arguments */
	K(b, xid, 100003, 3, 7, args, al);		/* IPv6 */
	K(b_addr, xid, 100003, 3, 7, args, al);		/* another IPv6 address */
	K(b_mapped, xid, 100003, 3, 7, args, al);	/* v4-mapped is not the v4 peer */
#undef K
	for (int i = 0; i < nk; i++)
		for (int j = 0; j < i; j++)
			if (memcmp(&k[i], &k[j], sizeof(k[i])) == 0)
				fail_msg("keys %d and %d are equal", i, j);
	/* each is an entry of its own: all miss, then each hits its own reply */
	for (int i = 0; i < nk; i++) {
		uint8_t *r;
		size_t n;
		char reply[32];
		snprintf(reply, sizeof(reply), "reply %d", i);
		if (drc_begin(&k[i], &r, &n) != DRC_MISS)
			fail_msg("key %d did not miss", i);
		drc_end(&k[i], (const uint8_t *)reply, strlen(reply));
	}
	for (int i = 0; i < nk; i++) {
		char reply[32];
		snprintf(reply, sizeof(reply), "reply %d", i);
		expect_hit(&k[i], reply);
	}
}

static void test_key_same_call_same_key(void **state)
{
	struct drc_key k1, k2;
	struct sockaddr_in a = sin4("192.168.1.5", 1023);
	struct sockaddr_storage ss;
	char args1[64], args2[64];
	(void)state;

	/* the same call decoded twice into different buffers, and from a
	 * sockaddr_storage with garbage after the sockaddr_in */
	memset(args1, 'x', sizeof(args1));
	memset(args2, 'x', sizeof(args2));
	memset(&ss, 0xab, sizeof(ss));
	memcpy(&ss, &a, sizeof(a));
	drc_key_init(&k1, (struct sockaddr *)&a, sizeof(a), 5, 100003, 3, 7, args1, 64);
	drc_key_init(&k2, (struct sockaddr *)&ss, sizeof(a), 5, 100003, 3, 7, args2, 64);
	assert_memory_equal(&k1, &k2, sizeof(k1));
	/* an oversized address length is clamped, not overrun */
	drc_key_init(&k2, (struct sockaddr *)&ss, 100000, 5, 100003, 3, 7, args2, 64);
	assert_int_equal(k2.xid, 5);
}

static void test_key_first_512_argument_bytes(void **state)
{
	struct drc_key k1, k2;
	struct sockaddr_in a = sin4("10.0.0.9", 900);
	static uint8_t args1[4096], args2[4096];
	(void)state;

	/* drc.c: the checksum covers the first 512 bytes of arguments (knfsd
	 * likewise); a difference further on (WRITE data) is the same key */
	memset(args1, 1, sizeof(args1));
	memset(args2, 1, sizeof(args2));
	args2[600] = 2;
	drc_key_init(&k1, (struct sockaddr *)&a, sizeof(a), 9, 100003, 3, 7, args1, sizeof(args1));
	drc_key_init(&k2, (struct sockaddr *)&a, sizeof(a), 9, 100003, 3, 7, args2, sizeof(args2));
	assert_memory_equal(&k1, &k2, sizeof(k1));
	args2[511] = 2;
	drc_key_init(&k2, (struct sockaddr *)&a, sizeof(a), 9, 100003, 3, 7, args2, sizeof(args2));
	assert_memory_not_equal(&k1, &k2, sizeof(k1));
}

/* ---- bounds and recycling ---- */

static void test_bounded_lru(void **state)
{
	uint64_t h, d, e;
	const unsigned n = DRC_MAX_ENTRIES + DRC_MAX_ENTRIES / 2;
	uint32_t base = xid_counter;
	(void)state;

	xid_counter += n;
	/* first entry: refreshed by a hit half-way, so it outlives its peers */
	for (unsigned i = 0; i < n; i++) {
		struct drc_key k = key(base + i, "bulk");
		complete(&k, "bulk reply");
		stats(&h, &d, &e);
		if (e > DRC_MAX_ENTRIES)
			fail_msg("%llu entries after %u calls", (unsigned long long)e, i + 1);
		if (i == DRC_MAX_ENTRIES / 2) {
			struct drc_key k0 = key(base, "bulk");
			expect_hit(&k0, "bulk reply");
		}
	}
	stats(&h, &d, &e);
	assert_int_equal(e, DRC_MAX_ENTRIES);
	/* the most recent DRC_MAX_ENTRIES - 1 calls and the refreshed one remain */
	struct drc_key k0 = key(base, "bulk");
	expect_hit(&k0, "bulk reply");
	for (unsigned i = n - (DRC_MAX_ENTRIES - 1); i < n; i++) {
		struct drc_key k = key(base + i, "bulk");
		uint8_t *r;
		size_t len;
		if (drc_begin(&k, &r, &len) != DRC_DONE)
			fail_msg("recent call %u was evicted", i);
		free(r);
	}
	/* the oldest unrefreshed one is gone: its retransmission executes */
	struct drc_key k1 = key(base + 1, "bulk");
	expect_miss_then_abort(&k1);
	stats(&h, &d, &e);
	assert_true(e <= DRC_MAX_ENTRIES);
}

static void test_in_progress_never_evicted(void **state)
{
	uint64_t h, d, e;
	uint8_t *r;
	size_t len;
	uint32_t base;
	(void)state;

	/* the oldest entry of the table is a call still executing */
	struct drc_key slow = key(next_xid(), "slow call");
	assert_int_equal(drc_begin(&slow, &r, &len), DRC_MISS);
	base = xid_counter;
	xid_counter += 2 * DRC_MAX_ENTRIES;
	for (unsigned i = 0; i < 2 * DRC_MAX_ENTRIES; i++) {
		struct drc_key k = key(base + i, "filler");
		complete(&k, "filler reply");
	}
	stats(&h, &d, &e);
	assert_int_equal(e, DRC_MAX_ENTRIES);
	assert_int_equal(drc_begin(&slow, &r, &len), DRC_IN_PROGRESS);
	drc_end(&slow, (const uint8_t *)"slow reply", 10);
	expect_hit(&slow, "slow reply");
}

static void test_all_in_progress_grows(void **state)
{
	uint64_t h, d, e0, e;
	const unsigned n = DRC_MAX_ENTRIES + 10;
	uint32_t base = xid_counter;
	(void)state;

	/* calls in flight are bounded by the transport, not by the cache: with
	 * nothing finished to recycle the table grows rather than forget one */
	xid_counter += n;
	for (unsigned i = 0; i < n; i++) {
		struct drc_key k = key(base + i, "in flight");
		uint8_t *r;
		size_t len;
		assert_int_equal(drc_begin(&k, &r, &len), DRC_MISS);
	}
	stats(&h, &d, &e0);
	assert_int_equal(e0, n);
	for (unsigned i = 0; i < n; i++) {
		struct drc_key k = key(base + i, "in flight");
		uint8_t *r;
		size_t len;
		if (drc_begin(&k, &r, &len) != DRC_IN_PROGRESS)
			fail_msg("in-progress call %u was evicted", i);
		drc_abort(&k);
	}
	stats(&h, &d, &e);
	assert_int_equal(e, 0);
}

/* ---- drc_insert ---- */

static void test_insert(void **state)
{
	uint64_t h0, d0, e0, h, d, e;
	(void)state;

	struct drc_key k = key(next_xid(), "recovered");
	stats(&h0, &d0, &e0);
	drc_insert(&k, (const uint8_t *)"logged reply", 12);
	stats(&h, &d, &e);
	assert_int_equal(e, e0 + 1);
	assert_int_equal(h, h0);
	assert_int_equal(d, d0);
	expect_hit(&k, "logged reply");
	/* inserting a key already finished keeps the first reply, and is
	 * not a hit (a recovery meets a record and the entry logged again
	 * from it) */
	stats(&h0, &d0, &e0);
	drc_insert(&k, (const uint8_t *)"other", 5);
	stats(&h, &d, &e);
	assert_int_equal(h, h0);
	assert_int_equal(e, e0);
	expect_hit(&k, "logged reply");
	/* a recovered reply completes a call in progress */
	struct drc_key k2 = key(next_xid(), "recovered");
	uint8_t *r;
	size_t len;
	assert_int_equal(drc_begin(&k2, &r, &len), DRC_MISS);
	drc_insert(&k2, (const uint8_t *)"from log", 8);
	expect_hit(&k2, "from log");
}

/* foreach_cb -- collects the replies drc_foreach hands over */
struct seen {
	char replies[8][16];
	int n, stop_at;
};

static int foreach_cb(void *arg, const struct drc_key *k, const uint8_t *rec, size_t len)
{
	struct seen *s = arg;
	(void)k;
	if (len > 0 && len < sizeof(s->replies[0]) && rec[0] == '#' && s->n < 8) {
		memcpy(s->replies[s->n], rec, len);
		s->replies[s->n][len] = 0;
		if (++s->n == s->stop_at)
			return 7;
	}
	return 0;
}

static void test_foreach_oldest_first(void **state)
{
	(void)state;
	/* the finished entries, least recently used first (the order a
	 * recovery logs them in, so that inserting them again rebuilds the
	 * same LRU order); an entry in progress is not one; a hit makes an
	 * entry the newest; the callback's non-zero return stops the walk */
	struct drc_key a = key(next_xid(), "fe"), b = key(next_xid(), "fe"),
		       c = key(next_xid(), "fe"), p = key(next_xid(), "fe");
	complete(&a, "#a");
	drc_insert(&b, (const uint8_t *)"#b", 2);
	complete(&c, "#c");
	uint8_t *r = NULL;
	size_t n;
	assert_int_equal(drc_begin(&p, &r, &n), DRC_MISS);	/* in progress */
	expect_hit(&a, "#a");
	struct seen s = { .stop_at = -1 };
	assert_int_equal(drc_foreach(foreach_cb, &s), 0);
	/* other tests' entries are older, and their replies do not start with '#' */
	assert_int_equal(s.n, 3);
	assert_string_equal(s.replies[0], "#b");
	assert_string_equal(s.replies[1], "#c");
	assert_string_equal(s.replies[2], "#a");
	struct seen t = { .stop_at = 2 };
	assert_int_equal(drc_foreach(foreach_cb, &t), 7);
	assert_int_equal(t.n, 2);
	drc_abort(&p);
}

/* ---- concurrency ---- */

#define RACERS 8

static struct drc_key race_key;
static pthread_barrier_t race_barrier;

static void *racer(void *arg)
{
	uint8_t *r = NULL;
	size_t n;
	(void)arg;
	pthread_barrier_wait(&race_barrier);
	enum drc_result res = drc_begin(&race_key, &r, &n);
	if (res == DRC_MISS)
		drc_end(&race_key, (const uint8_t *)"once", 4);
	if (res == DRC_DONE)
		free(r);
	return (void *)(intptr_t)res;
}

static void test_one_execution_per_race(void **state)
{
	(void)state;

	for (int round = 0; round < 50; round++) {
		pthread_t t[RACERS];
		int misses = 0;
		race_key = key(next_xid(), "raced");
		assert_int_equal(pthread_barrier_init(&race_barrier, NULL, RACERS), 0);
		for (int i = 0; i < RACERS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, racer, NULL), 0);
		for (int i = 0; i < RACERS; i++) {
			void *res;
			pthread_join(t[i], &res);
			if ((intptr_t)res == DRC_MISS)
				misses++;
		}
		pthread_barrier_destroy(&race_barrier);
		assert_int_equal(misses, 1);
		expect_hit(&race_key, "once");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_miss_in_progress_done_hit),
		cmocka_unit_test(test_abort_forgets),
		cmocka_unit_test(test_end_twice_keeps_first),
		cmocka_unit_test(test_empty_reply),
		cmocka_unit_test(test_key_fields_distinguish),
		cmocka_unit_test(test_key_same_call_same_key),
		cmocka_unit_test(test_key_first_512_argument_bytes),
		cmocka_unit_test(test_bounded_lru),
		cmocka_unit_test(test_in_progress_never_evicted),
		cmocka_unit_test(test_all_in_progress_grows),
		cmocka_unit_test(test_insert),
		cmocka_unit_test(test_foreach_oldest_first),
		cmocka_unit_test(test_one_execution_per_race),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
