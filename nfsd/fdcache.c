/*
 * fdcache.c -- O_PATH descriptors by file handle (see fdcache.h).
 *
 * A chained hash table with an LRU list under one mutex; the system call that
 * fills a miss (open_by_handle_at) runs outside it. An evicted or forgotten
 * entry leaves the table at once and closes when its last user puts it.
 */
#include "nfsd/fdcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FDC_BUCKETS 4096

struct fdcache_ref {
	uint32_t export_id;
	struct fh_kernel kh;
	int fd;
	int rfd, wfd;			/* data descriptors, -1 until needed */
	int refs;			/* under the mutex; the table holds one */
	bool in_table;
	struct fdcache_ref *hnext;
	struct fdcache_ref *lprev, *lnext;
};

static struct {
	pthread_mutex_t lock;
	unsigned max;
	unsigned n;
	struct fdcache_ref *buckets[FDC_BUCKETS];
	struct fdcache_ref *lru_head, *lru_tail;
} C = { .lock = PTHREAD_MUTEX_INITIALIZER };

void fdcache_init(unsigned entries)
{
	C.max = entries;
}

static unsigned hash(uint32_t id, const struct fh_kernel *kh)
{
	return (unsigned)(fh_kernel_hash(id, kh) % FDC_BUCKETS);
}

static bool match(const struct fdcache_ref *e, uint32_t id, const struct fh_kernel *kh)
{
	return e->export_id == id && e->kh.type == kh->type && e->kh.len == kh->len &&
	       memcmp(e->kh.bytes, kh->bytes, kh->len) == 0;
}

static void lru_unlink(struct fdcache_ref *e)
{
	if (e->lprev)
		e->lprev->lnext = e->lnext;
	else
		C.lru_head = e->lnext;
	if (e->lnext)
		e->lnext->lprev = e->lprev;
	else
		C.lru_tail = e->lprev;
	e->lprev = e->lnext = NULL;
}

static void lru_push(struct fdcache_ref *e)
{
	e->lnext = C.lru_head;
	e->lprev = NULL;
	if (C.lru_head)
		C.lru_head->lprev = e;
	C.lru_head = e;
	if (!C.lru_tail)
		C.lru_tail = e;
}

void fdcache_close_later(int fd);

/* unref_locked -- drop one reference; returns the fd to close (or -1). */
static int unref_locked(struct fdcache_ref *e)
{
	if (--e->refs > 0)
		return -1;
	int fd = e->fd;
	/* the O_PATH descriptor is returned for the caller to close; the data
	 * descriptors go to the reaper (their close may evict the inode) */
	if (e->rfd >= 0)
		fdcache_close_later(e->rfd);
	if (e->wfd >= 0)
		fdcache_close_later(e->wfd);
	free(e);
	return fd;
}

/* remove_locked -- take e out of the table (its table reference too). */
static int remove_locked(struct fdcache_ref *e)
{
	if (!e->in_table)
		return -1;
	struct fdcache_ref **pp = &C.buckets[hash(e->export_id, &e->kh)];
	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(e);
	e->in_table = false;
	C.n--;
	return unref_locked(e);
}

int fdcache_get(uint32_t export_id, const struct fh_kernel *kh, int mount_fd, struct fdcache_ref **ref)
{
	union {
		struct file_handle h;
		uint8_t raw[sizeof(struct file_handle) + FH_KH_MAX];
	} u;
	unsigned b = hash(export_id, kh);

	pthread_mutex_lock(&C.lock);
	for (struct fdcache_ref *e = C.buckets[b]; e; e = e->hnext) {
		if (match(e, export_id, kh)) {
			e->refs++;
			lru_unlink(e);
			lru_push(e);
			pthread_mutex_unlock(&C.lock);
			*ref = e;
			return e->fd;
		}
	}
	pthread_mutex_unlock(&C.lock);

	u.h.handle_bytes = kh->len;
	u.h.handle_type = kh->type;
	memcpy(u.h.f_handle, kh->bytes, kh->len);
	int fd = open_by_handle_at(mount_fd, &u.h, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct fdcache_ref *n = calloc(1, sizeof(*n));
	if (!n) {
		close(fd);
		return -ENOMEM;
	}
	n->export_id = export_id;
	n->kh = *kh;
	n->fd = fd;
	n->rfd = n->wfd = -1;
	n->refs = 1;			/* the caller's */
	if (C.max == 0) {
		*ref = n;
		return fd;
	}

	int to_close[2] = { -1, -1 };
	pthread_mutex_lock(&C.lock);
	for (struct fdcache_ref *e = C.buckets[b]; e; e = e->hnext) {
		if (match(e, export_id, kh)) {
			/* another thread filled it meanwhile: use that one */
			e->refs++;
			lru_unlink(e);
			lru_push(e);
			pthread_mutex_unlock(&C.lock);
			close(fd);
			free(n);
			*ref = e;
			return e->fd;
		}
	}
	if (C.n >= C.max && C.lru_tail)
		to_close[0] = remove_locked(C.lru_tail);
	n->refs++;			/* the table's */
	n->in_table = true;
	n->hnext = C.buckets[b];
	C.buckets[b] = n;
	lru_push(n);
	C.n++;
	pthread_mutex_unlock(&C.lock);
	for (int i = 0; i < 2; i++)
		if (to_close[i] >= 0)
			close(to_close[i]);
	*ref = n;
	return fd;
}

void fdcache_put(struct fdcache_ref *ref)
{
	if (!ref)
		return;
	pthread_mutex_lock(&C.lock);
	int fd = unref_locked(ref);
	pthread_mutex_unlock(&C.lock);
	fdcache_close_later(fd);
}

struct fdcache_ref *fdcache_hold(struct fdcache_ref *ref)
{
	pthread_mutex_lock(&C.lock);
	ref->refs++;
	pthread_mutex_unlock(&C.lock);
	return ref;
}

int fdcache_fd(const struct fdcache_ref *ref)
{
	return ref->fd;
}

void fdcache_forget(struct fdcache_ref *ref)
{
	pthread_mutex_lock(&C.lock);
	int fd = remove_locked(ref);
	pthread_mutex_unlock(&C.lock);
	fdcache_close_later(fd);
}

int fdcache_data_fd(struct fdcache_ref *ref, int flags)
{
	int *slot = (flags & O_ACCMODE) == O_RDONLY ? &ref->rfd : &ref->wfd;
	int fd = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	char p[32];

	if (fd >= 0)
		return fd;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", ref->fd);
	/* the magic link must be followed; O_NONBLOCK: a lease is not waited
	 * for (open_data) */
	fd = open(p, (flags & (O_ACCMODE | O_NONBLOCK)) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int expected = -1;
	if (!__atomic_compare_exchange_n(slot, &expected, fd, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		close(fd);		/* another thread was first */
		fd = expected;
	}
	return fd;
}

/* ---- the reaper: closes that may evict an inode, off the request path ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int *fds;
	size_t n, cap;
	bool running, stop;
	pthread_t thread;
} Rp = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

#define REAP_BATCH 64
#define REAP_DELAY_NS (10 * 1000 * 1000)

static void *reaper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&Rp.lock);
	for (;;) {
		while (Rp.n == 0 && !Rp.stop)
			pthread_cond_wait(&Rp.cond, &Rp.lock);
		if (Rp.n == 0 && Rp.stop)
			break;
		if (Rp.n < REAP_BATCH && !Rp.stop) {
			/* let a few gather: one wake-up per batch, not per close
			 * (a REMOVE's close would wake this thread every time) */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += REAP_DELAY_NS;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&Rp.cond, &Rp.lock, &ts);
		}
		while (Rp.n > 0) {
			int fd = Rp.fds[--Rp.n];
			pthread_mutex_unlock(&Rp.lock);
			close(fd);
			pthread_mutex_lock(&Rp.lock);
		}
	}
	pthread_mutex_unlock(&Rp.lock);
	return NULL;
}

void fdcache_close_later(int fd)
{
	if (fd < 0)
		return;
	pthread_mutex_lock(&Rp.lock);
	if (!Rp.running && !Rp.stop) {
		/* the batching wait measures on the monotonic clock */
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_destroy(&Rp.cond);
		pthread_cond_init(&Rp.cond, &ca);
		pthread_condattr_destroy(&ca);
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		Rp.running = pthread_create(&Rp.thread, NULL, reaper_main, NULL) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	/* bounded: past 4096 queued closes (the disk is far behind), close
	 * here and let this call wait rather than grow without limit */
	if (!Rp.running || Rp.n >= 4096) {
		pthread_mutex_unlock(&Rp.lock);
		close(fd);
		return;
	}
	if (Rp.n == Rp.cap) {
		size_t cap = Rp.cap ? Rp.cap * 2 : 64;
		int *n = realloc(Rp.fds, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&Rp.lock);
			close(fd);
			return;
		}
		Rp.fds = n;
		Rp.cap = cap;
	}
	Rp.fds[Rp.n++] = fd;
	/* the first close wakes the reaper, which then waits REAP_DELAY_NS for
	 * more; a full batch wakes it at once */
	if (Rp.n == 1 || Rp.n == REAP_BATCH)
		pthread_cond_signal(&Rp.cond);
	pthread_mutex_unlock(&Rp.lock);
}

void fdcache_stop_reaper(void)
{
	pthread_mutex_lock(&Rp.lock);
	Rp.stop = true;
	bool running = Rp.running;
	pthread_cond_signal(&Rp.cond);
	pthread_mutex_unlock(&Rp.lock);
	if (running)
		pthread_join(Rp.thread, NULL);
	Rp.running = false;
	free(Rp.fds);
	Rp.fds = NULL;
	Rp.n = Rp.cap = 0;
}

void fdcache_drop(uint32_t export_id, const struct fh_kernel *kh)
{
	int fd = -1;

	pthread_mutex_lock(&C.lock);
	for (struct fdcache_ref *e = C.buckets[hash(export_id, kh)]; e; e = e->hnext) {
		if (match(e, export_id, kh)) {
			fd = remove_locked(e);
			break;
		}
	}
	pthread_mutex_unlock(&C.lock);
	fdcache_close_later(fd);
}

void fdcache_clear(void)
{
	for (;;) {
		pthread_mutex_lock(&C.lock);
		struct fdcache_ref *e = C.lru_tail;
		int fd = e ? remove_locked(e) : -1;
		pthread_mutex_unlock(&C.lock);
		if (!e)
			break;
		if (fd >= 0)
			close(fd);
	}
}
