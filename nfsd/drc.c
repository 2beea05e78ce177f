/*
 * drc.c -- duplicate request cache (see drc.h).
 *
 * A chained hash table over a fixed number of entries with an LRU list;
 * the oldest completed entry is recycled when the table is full. In-progress
 * entries are never recycled (they are bounded by the calls in flight). One
 * mutex: the cache is touched twice per non-idempotent call only.
 */
#include "nfsd/drc.h"

#include <pthread.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DRC_BUCKETS 16384	/* chains of about half an entry when full */

struct drc_entry {
	struct drc_key key;
	uint32_t h;				/* key_hash(&key) */
	bool done;
	uint8_t *rec;
	size_t len;
	struct drc_entry *hnext;		/* hash chain */
	struct drc_entry *lprev, *lnext;	/* LRU: head is newest */
};

static struct {
	pthread_mutex_t lock;
	struct drc_entry *buckets[DRC_BUCKETS];
	struct drc_entry *lru_head, *lru_tail;
	size_t n;
	uint64_t hits, drops;
} D = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

void drc_key_init(struct drc_key *k, const struct sockaddr *sa, socklen_t salen, uint32_t xid,
		  uint32_t prog, uint32_t vers, uint32_t proc, const void *args, size_t len)
{
	memset(k, 0, sizeof(*k));
	if (salen > sizeof(k->addr))
		salen = sizeof(k->addr);
	memcpy(&k->addr, sa, salen);
	k->xid = xid;
	k->prog = prog;
	k->vers = vers;
	k->proc = proc;
	/* The first 512 bytes of arguments tell apart two clients behind one
	 * address that happen to reuse an xid (knfsd checksums likewise). */
	k->sum = fnv1a(0xcbf29ce484222325ull, args, len < 512 ? len : 512);
}

static bool key_eq(const struct drc_key *a, const struct drc_key *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

/* the hash's key: random per run (hash_key_init) */
static unsigned char hash_key[crypto_shorthash_KEYBYTES];
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;

static void hash_key_init(void)
{
	if (sodium_init() < 0)
		abort();	/* no random source: nothing would be safe */
	randombytes_buf(hash_key, sizeof(hash_key));
}

/*
 * key_hash -- a hash of k (its bucket: the low bits), computed once per call
 * and kept in its entry, where it also spares most key comparisons.
 * It covers the words that differ between calls (xid, argument sum, and the
 * peer's address and port, which lie in the first 28 bytes of any address
 * family's sockaddr; the rest of the key is zero or constant). A byte-wise
 * FNV over the whole 152-byte key, four times per call, was 1.6 us of every
 * CREATE+REMOVE pair on the event loop (perf). SipHash (libsodium's
 * crypto_shorthash) with a key of this run: a client that could tell which
 * calls share a bucket (the xid and the arguments are its own, and the
 * argument sum is FNV) would put thousands of entries in one chain, walked
 * under the cache's lock by every client's non-idempotent call.
 */
static uint32_t key_hash(const struct drc_key *k)
{
	uint64_t w[6];
	unsigned char out[crypto_shorthash_BYTES];
	uint32_t h;

	pthread_once(&hash_once, hash_key_init);
	w[0] = k->sum;
	w[1] = (uint64_t)k->xid << 32 | k->proc;
	memcpy(w + 2, &k->addr, 4 * sizeof(w[0]));
	crypto_shorthash(out, (const unsigned char *)w, sizeof(w), hash_key);
	memcpy(&h, out, sizeof(h));
	return h;
}

#define BUCKET(h) ((h) % DRC_BUCKETS)

static void lru_unlink(struct drc_entry *e)
{
	if (e->lprev)
		e->lprev->lnext = e->lnext;
	else
		D.lru_head = e->lnext;
	if (e->lnext)
		e->lnext->lprev = e->lprev;
	else
		D.lru_tail = e->lprev;
	e->lprev = e->lnext = NULL;
}

static void lru_push(struct drc_entry *e)
{
	e->lprev = NULL;
	e->lnext = D.lru_head;
	if (D.lru_head)
		D.lru_head->lprev = e;
	D.lru_head = e;
	if (!D.lru_tail)
		D.lru_tail = e;
}

static void hash_remove(struct drc_entry *e)
{
	struct drc_entry **pp = &D.buckets[BUCKET(e->h)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
}

static struct drc_entry *find(const struct drc_key *k, uint32_t h)
{
	for (struct drc_entry *e = D.buckets[BUCKET(h)]; e; e = e->hnext)
		if (e->h == h && key_eq(&e->key, k))
			return e;
	return NULL;
}

/* evict_one -- take the oldest completed entry out of the cache; it is
 * returned for reuse (zeroed), or NULL if every entry is in progress */
static struct drc_entry *evict_one(void)
{
	for (struct drc_entry *e = D.lru_tail; e; e = e->lprev) {
		if (!e->done)
			continue;
		lru_unlink(e);
		hash_remove(e);
		free(e->rec);
		memset(e, 0, sizeof(*e));
		D.n--;
		return e;
	}
	return NULL;
}

/* new_entry -- a free entry for k (hash h) in the table and on the LRU
 * list, not done; NULL without memory (lock held) */
static struct drc_entry *new_entry(const struct drc_key *k, uint32_t h)
{
	struct drc_entry *e = D.n >= DRC_MAX_ENTRIES ? evict_one() : NULL;

	if (!e)
		e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = *k;
	e->h = h;
	e->hnext = D.buckets[BUCKET(h)];
	D.buckets[BUCKET(h)] = e;
	lru_push(e);
	D.n++;
	return e;
}

/* drop_entry -- take e out of the table and free it (lock held) */
static void drop_entry(struct drc_entry *e)
{
	lru_unlink(e);
	hash_remove(e);
	free(e->rec);
	free(e);
	D.n--;
}

/* finish -- e is done with a copy of the reply; without memory for it the
 * entry goes (lock held) */
static void finish(struct drc_entry *e, const uint8_t *rec, size_t len)
{
	if ((e->rec = malloc(len)) != NULL) {
		memcpy(e->rec, rec, len);
		e->len = len;
		e->done = true;
	} else {
		drop_entry(e);
	}
}

enum drc_result drc_begin(const struct drc_key *k, uint8_t **reply, size_t *len)
{
	enum drc_result r = DRC_MISS;
	uint32_t h = key_hash(k);

	pthread_mutex_lock(&D.lock);
	struct drc_entry *e = find(k, h);
	if (e) {
		if (!e->done) {
			D.drops++;
			r = DRC_IN_PROGRESS;
		} else if ((*reply = malloc(e->len)) != NULL) {
			memcpy(*reply, e->rec, e->len);
			*len = e->len;
			D.hits++;
			lru_unlink(e);
			lru_push(e);
			r = DRC_DONE;
		} else {
			r = DRC_IN_PROGRESS;	/* no memory: drop, client retries */
		}
		goto out;
	}
	(void)new_entry(k, h);	/* NULL: executes without DRC protection */
out:
	pthread_mutex_unlock(&D.lock);
	return r;
}

void drc_end(const struct drc_key *k, const uint8_t *rec, size_t len)
{
	uint32_t h = key_hash(k);

	pthread_mutex_lock(&D.lock);
	struct drc_entry *e = find(k, h);
	if (e && !e->done)
		finish(e, rec, len);
	pthread_mutex_unlock(&D.lock);
}

void drc_insert(const struct drc_key *k, const uint8_t *rec, size_t len)
{
	uint32_t h = key_hash(k);

	/* a key already finished (a recovery that met the record and the
	 * entry a recovery before logged again from it, drc_relog) keeps its
	 * reply and is not a hit; one in progress is finished */
	pthread_mutex_lock(&D.lock);
	struct drc_entry *e = find(k, h);
	if (!e)
		e = new_entry(k, h);
	if (e && !e->done)
		finish(e, rec, len);
	pthread_mutex_unlock(&D.lock);
}

int drc_foreach(int (*cb)(void *arg, const struct drc_key *k, const uint8_t *rec, size_t len),
		void *arg)
{
	int rc = 0;

	pthread_mutex_lock(&D.lock);
	for (struct drc_entry *e = D.lru_tail; e && rc == 0; e = e->lprev)
		if (e->done)
			rc = cb(arg, &e->key, e->rec, e->len);
	pthread_mutex_unlock(&D.lock);
	return rc;
}

void drc_abort(const struct drc_key *k)
{
	uint32_t h = key_hash(k);

	pthread_mutex_lock(&D.lock);
	struct drc_entry *e = find(k, h);
	if (e && !e->done)
		drop_entry(e);
	pthread_mutex_unlock(&D.lock);
}

void drc_stats(uint64_t *hits, uint64_t *drops, uint64_t *entries)
{
	pthread_mutex_lock(&D.lock);
	*hits = D.hits;
	*drops = D.drops;
	*entries = D.n;
	pthread_mutex_unlock(&D.lock);
}
