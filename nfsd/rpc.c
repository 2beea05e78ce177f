/*
 * rpc.c -- the RPC transport: listeners, record marking, epoll loop, workers.
 *
 * Threads: one event loop thread (the caller of rpc_run) accepts, reads and
 * cuts records; NTHREADS workers run the dispatch function; any thread may
 * send a reply. Design choices:
 * - Level-triggered epoll. A connection's interest set is derived from its
 *   state under its lock (readable unless throttled, writable while output is
 *   queued), so a worker and the loop never disagree about it.
 * - Reads go through a 64 KiB staging buffer: many small pipelined calls cost
 *   one read(2), and a record is copied once into a buffer of its own size
 *   that the request then owns.
 * - A reply is written directly by the thread that produced it when nothing
 *   is queued before it (the common case: no wake-up of the loop); otherwise
 *   it is queued and the loop writes it on EPOLLOUT.
 * - A connection is reference counted: the loop holds one reference while
 *   the socket is open, each request one. A connection is closed under its
 *   lock (any thread): its socket is shut down and no longer used; the loop
 *   thread closes the descriptor when it drops its reference (reap_closed),
 *   so neither its unlocked read nor a worker ever meets a reused number.
 * - Idle connections are found by a coarse sweep (conn_sweep, every few
 *   seconds) rather than by a timer per connection or a timestamp per read:
 *   a read sets a flag, nothing more, and the loop runs ~500k calls/s.
 * - Over the connection limit, or out of descriptors, a new connection
 *   closes the idle one quiet for longest (knfsd's choice: the new client
 *   has a call to make, the idle one reconnects when it has one), found by
 *   a scan of the open connections: rare, so no LRU list is kept per read.
 */
#include "nfsd/rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "nfsd/log.h"

enum ep_kind { EP_LISTEN, EP_CONN, EP_EVENT, EP_SIGNAL };

struct ep_item {
	enum ep_kind kind;
	int fd;
};

struct outbuf {
	struct outbuf *next;
	uint8_t *data;
	size_t len, off;
	/* the memory it holds beyond its unsent bytes (the buffer's slack,
	 * this struct), counted in out_bytes and queued_total with them until
	 * it is freed: a small reply is a few bytes in a buffer of a few KiB,
	 * and counted by its bytes alone, the bound on what a client leaves
	 * unread (RPC_MAX_QUEUED) let one client that sends NULL calls and
	 * reads nothing hold some 150 times that in memory */
	size_t extra;
};

struct rpc_conn {
	struct ep_item ep;		/* first: epoll data points here */
	int refs;			/* atomic */
	pthread_mutex_t lock;
	bool closed;
	bool close_after;		/* close once output drains */
	bool read_eof;			/* the client shut its side down: not read
					 * any more, closed once no call is in
					 * flight and the output has drained */
	bool throttled;
	/* not read while the calls in flight, all connections', hold
	 * R.request_memory or more (lock; on R.mem_waiters, whose link is the
	 * loop thread's) */
	bool mem_wait;
	struct rpc_conn *mem_next;
	uint32_t events;		/* current epoll interest set */
	unsigned inflight;
	struct outbuf *out_head, *out_tail;
	size_t out_bytes;		/* queued for output, not yet sent (written under
					 * lock, read without: atomic stores and loads) */
	/* input read but not consumed while out_bytes is over RPC_MAX_QUEUED
	 * or the connection is throttled (loop thread; set and cleared under
	 * lock) */
	uint8_t *held;
	size_t held_len;
	/* on R.resumes: a worker lifted the throttle of a connection with
	 * held input, the loop goes on with it (lock; the link: R.conns_lock) */
	bool resume_queued;
	struct rpc_conn *resume_next;
	/* replies of calls run on the loop thread wait here until the end of
	 * its batch (loop thread only: the flag and the list link) */
	bool corked;
	struct rpc_conn *cork_next;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	/* idle time (loop thread only): a read sets heard; the sweep
	 * (conn_sweep) clears it and moves quiet_since to its own time while
	 * the connection is heard from or busy */
	bool heard;
	uint64_t quiet_since;
	/* replies its client does not take (conn_sweep): bytes sent so far
	 * (lock), what the sweep saw of it and of the socket's unacknowledged
	 * bytes, and since when neither moved */
	uint64_t out_sent, out_seen, stall_since;
	int outq_seen;
	/* the record in progress (conn_sweep; loop thread only): records cut
	 * so far, their count when a sweep first saw this one unfinished, and
	 * when */
	uint64_t nrec, mid_nrec, mid_since;
	size_t mid_len;			/* its bytes then */
	/* receive state: event loop thread only */
	uint8_t mark[4];
	size_t mark_got;
	size_t frag_left;
	bool last_frag;
	uint8_t *rec;
	size_t rec_len, rec_cap;	/* rec_len: counted in R.rec_mem */
	/* on R.recs while its record has bytes (loop thread) */
	bool on_recs;
	struct rpc_conn *recs_prev, *recs_next;
	/* lists: connections whose loop reference is held (R.open, loop
	 * thread only), connections closed but whose loop reference is not yet
	 * dropped (R.closed, R.conns_lock) */
	struct rpc_conn *open_prev, *open_next, *closed_next;
};

#define RPC_MAX_LISTENERS 8
/* a record in progress for record_timeout or longer must have come at this
 * rate (bytes a second) at least since a sweep first saw it */
#define RPC_RECORD_MIN_RATE 1024u
#define RPC_BUSY_POLL_NS (100 * 1000)
/* a fragment's rest at least this long is read into its record directly */
#define RPC_DIRECT_MIN (32 * 1024)
/* the idle sweep runs every quarter of the shortest timeout, within these */
#define RPC_SWEEP_MIN_NS (100 * 1000 * 1000ull)
#define RPC_SWEEP_MAX_NS (5 * 1000 * 1000 * 1000ull)
/* TCP keepalive of accepted connections: the first probe after 60 s of
 * silence, closed after 6 unanswered ones 10 s apart */
#define RPC_KEEPALIVE_IDLE_S 60
#define RPC_KEEPALIVE_INTVL_S 10
#define RPC_KEEPALIVE_CNT 6
/* how long the listeners are not watched when no connection can be taken */
#define RPC_LISTEN_PAUSE_NS (100 * 1000 * 1000ull)

static struct {
	int epfd;
	int evfd;
	struct ep_item ev_item, sig_item;
	struct ep_item listeners[RPC_MAX_LISTENERS];
	unsigned nlisteners;
	rpc_dispatch_fn dispatch;
	bool draining;			/* atomic: rpc_run stops; calls in flight finish,
					 * no input is read */
	bool (*inline_ok)(const struct rpc_req *req);
	pthread_t *threads;
	unsigned nthreads;
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct rpc_req *qhead, *qtail;
	bool quit_workers;

	int stopping;			/* atomic */
	int pending;			/* atomic: requests not yet finished */
	int busy_conns;			/* atomic: connections with calls in flight */
	/* The loop thread drops a closed connection's loop reference only
	 * between epoll batches, so no event of the current batch can point to
	 * freed memory, whichever thread closed it. */
	pthread_mutex_t conns_lock;
	struct rpc_conn *closed;
	struct rpc_conn *open;		/* loop thread only: the loop's references */
	int nconns;			/* atomic: connections not closed */
	unsigned max_conns;		/* over it, accept closes an idle one (0: none) */
	size_t reply_memory;		/* queued replies, all connections (0: no bound) */
	size_t queued_total;		/* atomic: the sum of every connection's out_bytes */
	size_t request_memory;		/* calls in flight, all connections (0: no bound) */
	size_t req_mem;			/* atomic: what they hold (rpc_req.mem) */
	uint64_t mem_waits;		/* atomic: times reading stopped at request_memory */
	/* the bytes of records in progress, all connections (loop thread;
	 * atomic for the statistics), held to request_memory apart from the
	 * calls (conn_rec_room); those connections in the order their
	 * records began (loop thread), and how many were closed for them */
	size_t rec_mem;
	struct rpc_conn *recs_head, *recs_tail;
	uint64_t rec_evictions;
	/* connections not read for request_memory (loop thread; each holds a
	 * reference), and their count (atomic: workers read it) */
	struct rpc_conn *mem_waiters;
	int nmem_waiters;
	int mem_wake;			/* atomic: a worker woke the loop for them */
	/* a descriptor kept open (/dev/null) to take and close a pending
	 * connection with when out of descriptors (loop thread) */
	int spare_fd;
	bool listen_paused;		/* listeners not watched until listen_until */
	uint64_t listen_until;		/* (loop thread) */
	/* timeouts (0: none) and the sweep that applies them (loop thread) */
	uint64_t idle_ns, record_ns, sweep_ns;
	uint64_t next_sweep;		/* CLOCK_MONOTONIC */
	uint64_t next_tick;		/* the next rpc_tick: sweep, listeners back */
	struct rpc_conn *corked;	/* loop thread only: connections to flush */
	/* connections whose held input may go on (R.conns_lock; read without
	 * it as a hint: atomic loads and stores) */
	struct rpc_conn *resumes;
	uint8_t stage[64 * 1024];
} R;

static void worker_enqueue(struct rpc_req *req);
static __thread bool on_loop_thread;

unsigned rpc_busy_conns(void)
{
	return (unsigned)__atomic_load_n(&R.busy_conns, __ATOMIC_RELAXED);
}

void rpc_request_memory(size_t *held, uint64_t *waits)
{
	*held = __atomic_load_n(&R.req_mem, __ATOMIC_RELAXED);
	*waits = __atomic_load_n(&R.mem_waits, __ATOMIC_RELAXED);
}

void rpc_record_memory(size_t *held, uint64_t *closed)
{
	*held = __atomic_load_n(&R.rec_mem, __ATOMIC_RELAXED);
	*closed = __atomic_load_n(&R.rec_evictions, __ATOMIC_RELAXED);
}

bool rpc_on_loop(void)
{
	return on_loop_thread;
}

void rpc_defer(struct rpc_req *req)
{
	worker_enqueue(req);
}

uint64_t rpc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int rpc_listen_addr(const char *addr, unsigned port, struct rpc_listen *l)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)&l->addr;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&l->addr;
	char buf[64];
	size_t n = strlen(addr);

	memset(l, 0, sizeof(*l));
	if (port > 65535)
		return -EINVAL;
	/* accept "[::1]" as well as "::1" */
	if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']' && n - 2 < sizeof(buf)) {
		memcpy(buf, addr + 1, n - 2);
		buf[n - 2] = '\0';
		addr = buf;
	}
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		l->addrlen = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		l->addrlen = sizeof(*s6);
		return 0;
	}
	return -EINVAL;
}

static void worker_enqueue(struct rpc_req *req)
{
	pthread_mutex_lock(&R.qlock);
	req->next = NULL;
	if (R.qtail)
		R.qtail->next = req;
	else
		R.qhead = req;
	R.qtail = req;
	pthread_cond_signal(&R.qcond);
	pthread_mutex_unlock(&R.qlock);
}

static void *worker_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct rpc_req *req;

		pthread_mutex_lock(&R.qlock);
		while (!R.qhead && !R.quit_workers)
			pthread_cond_wait(&R.qcond, &R.qlock);
		req = R.qhead;
		if (!req) {
			pthread_mutex_unlock(&R.qlock);
			return NULL;
		}
		R.qhead = req->next;
		if (!R.qhead)
			R.qtail = NULL;
		pthread_mutex_unlock(&R.qlock);
		R.dispatch(req);
	}
}

int rpc_init(unsigned nthreads, rpc_dispatch_fn fn, bool (*inline_ok)(const struct rpc_req *req))
{
	sigset_t mask;
	int sfd;

	R.dispatch = fn;
	R.inline_ok = inline_ok;
	R.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (R.spare_fd < 0)
		return -errno;

	pthread_mutex_init(&R.qlock, NULL);
	pthread_mutex_init(&R.conns_lock, NULL);
	pthread_cond_init(&R.qcond, NULL);
	R.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (R.epfd < 0)
		return -errno;
	R.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (R.evfd < 0)
		return -errno;
	R.ev_item = (struct ep_item){ EP_EVENT, R.evfd };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &R.ev_item };
	if (epoll_ctl(R.epfd, EPOLL_CTL_ADD, R.evfd, &ev) < 0)
		return -errno;

	/* Signals are taken by the loop through a signalfd; block them in
	 * every thread (workers inherit this mask). */
	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0)
		return -errno;
	R.sig_item = (struct ep_item){ EP_SIGNAL, sfd };
	ev = (struct epoll_event){ .events = EPOLLIN, .data.ptr = &R.sig_item };
	if (epoll_ctl(R.epfd, EPOLL_CTL_ADD, sfd, &ev) < 0)
		return -errno;

	R.threads = calloc(nthreads, sizeof(*R.threads));
	if (!R.threads)
		return -ENOMEM;
	for (unsigned i = 0; i < nthreads; i++) {
		int rc = pthread_create(&R.threads[i], NULL, worker_main, NULL);
		if (rc)
			return -rc;
		R.nthreads++;
	}
	return 0;
}

int rpc_add_listener(struct rpc_listen *l)
{
	int fd, one = 1;

	if (R.nlisteners == RPC_MAX_LISTENERS)
		return -ENOSPC;
	fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l->addr.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&l->addr, l->addrlen) < 0 || listen(fd, 128) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	socklen_t len = l->addrlen;
	getsockname(fd, (struct sockaddr *)&l->addr, &len);

	struct ep_item *it = &R.listeners[R.nlisteners++];
	*it = (struct ep_item){ EP_LISTEN, fd };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = it };
	if (epoll_ctl(R.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = -errno;
		close(fd);
		R.nlisteners--;
		return e;
	}
	return 0;
}

/* recs_unlink -- c's record in progress leaves R.rec_mem and R.recs (its
 * buffer stays). Loop thread. */
static void recs_unlink(struct rpc_conn *c)
{
	if (!c->on_recs)
		return;
	__atomic_sub_fetch(&R.rec_mem, c->rec_len, __ATOMIC_RELAXED);
	if (c->recs_prev)
		c->recs_prev->recs_next = c->recs_next;
	else
		R.recs_head = c->recs_next;
	if (c->recs_next)
		c->recs_next->recs_prev = c->recs_prev;
	else
		R.recs_tail = c->recs_prev;
	c->recs_prev = c->recs_next = NULL;
	c->on_recs = false;
}

/* conn_rec_free -- drop c's record in progress, its buffer and its count.
 * Loop thread. */
static void conn_rec_free(struct rpc_conn *c)
{
	recs_unlink(c);
	free(c->rec);
	c->rec = NULL;
	c->rec_len = c->rec_cap = 0;
}

static void conn_put(struct rpc_conn *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	while (c->out_head) {
		struct outbuf *o = c->out_head;
		c->out_head = o->next;
		free(o->data);
		free(o);
	}
	free(c->held);
	free(c->rec);	/* none: reap_closed freed it (and its count, on R.recs) */
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* conn_update_events -- make the epoll interest set match c's state. Caller
 * holds c->lock. */
static void conn_update_events(struct rpc_conn *c)
{
	uint32_t want = 0;

	if (c->closed)
		return;
	if (!c->throttled && !c->mem_wait && !c->close_after && !c->read_eof && !c->held_len &&
	    !__atomic_load_n(&R.draining, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&c->out_bytes, __ATOMIC_RELAXED) < RPC_MAX_QUEUED)
		want |= EPOLLIN;
	if (c->out_head)
		want |= EPOLLOUT;
	if (want == c->events)
		return;
	struct epoll_event ev = { .events = want, .data.ptr = &c->ep };
	if (epoll_ctl(R.epfd, EPOLL_CTL_MOD, c->ep.fd, &ev) == 0)
		c->events = want;
}

/* conn_close_locked -- close c's socket; queued output is dropped. The loop
 * reference is dropped later by the loop thread (see R.closed). */
static void conn_close_locked(struct rpc_conn *c)
{
	uint64_t one = 1;

	if (c->closed)
		return;
	c->closed = true;
	__atomic_sub_fetch(&R.nconns, 1, __ATOMIC_RELAXED);
	/* its queue is not sent any more (conn_put frees it) */
	__atomic_sub_fetch(&R.queued_total, c->out_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&c->out_bytes, 0, __ATOMIC_RELAXED);
	epoll_ctl(R.epfd, EPOLL_CTL_DEL, c->ep.fd, NULL);
	if (on_loop_thread) {
		/* the loop thread is the only one that uses the descriptor
		 * without the lock: it can go now (a descriptor closed to make
		 * room for a new connection is wanted at once) */
		close(c->ep.fd);
		c->ep.fd = -1;
	} else {
		/* shut down, not closed: the loop thread may be reading
		 * c->ep.fd without the lock (conn_readable) right now, and a
		 * number closed here could be another file's by then.
		 * reap_closed, on the loop thread, closes it. */
		shutdown(c->ep.fd, SHUT_RDWR);
	}
	pthread_mutex_lock(&R.conns_lock);
	c->closed_next = R.closed;
	R.closed = c;
	pthread_mutex_unlock(&R.conns_lock);
	if (write(R.evfd, &one, sizeof(one)) < 0) {
		/* counter already set: the loop wakes anyway */
	}
}

/* reap_closed -- drop the loop reference of every connection closed since
 * the last call. Loop thread only, between epoll batches. */
static void reap_closed(void)
{
	pthread_mutex_lock(&R.conns_lock);
	struct rpc_conn *c = R.closed;
	R.closed = NULL;
	pthread_mutex_unlock(&R.conns_lock);
	while (c) {
		struct rpc_conn *next = c->closed_next;
		if (c->ep.fd >= 0)
			close(c->ep.fd);	/* a worker's conn_close_locked shut it down */
		if (c->open_prev)
			c->open_prev->open_next = c->open_next;
		else
			R.open = c->open_next;
		if (c->open_next)
			c->open_next->open_prev = c->open_prev;
		/* its input is never read again: the buffer and its count go
		 * now, not when a worker drops the last reference */
		conn_rec_free(c);
		conn_put(c);
		c = next;
	}
}

/* conn_flush_locked -- write queued output; returns -1 when the connection
 * broke (and was closed). */
static int conn_flush_locked(struct rpc_conn *c)
{
	if (c->closed)
		return -1;
	while (c->out_head) {
		/* the queued replies in one sendmsg: one train of segments and
		 * one wake-up of the client instead of one per reply */
		struct iovec iov[64];
		struct msghdr mh = { .msg_iov = iov };
		size_t total = 0;
		for (struct outbuf *o = c->out_head; o && mh.msg_iovlen < 64; o = o->next) {
			iov[mh.msg_iovlen].iov_base = o->data + o->off;
			iov[mh.msg_iovlen].iov_len = o->len - o->off;
			total += o->len - o->off;
			mh.msg_iovlen++;
		}
		ssize_t n = sendmsg(c->ep.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_close_locked(c);
			return -1;
		}
		size_t left = (size_t)n;
		c->out_sent += (size_t)n;
		/* writers hold c->lock; conn_input reads it without */
		__atomic_store_n(&c->out_bytes, c->out_bytes - (size_t)n, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&R.queued_total, (size_t)n, __ATOMIC_RELAXED);
		while (c->out_head && left >= c->out_head->len - c->out_head->off) {
			struct outbuf *o = c->out_head;
			left -= o->len - o->off;
			c->out_head = o->next;
			if (!c->out_head)
				c->out_tail = NULL;
			__atomic_store_n(&c->out_bytes, c->out_bytes - o->extra, __ATOMIC_RELAXED);
			__atomic_sub_fetch(&R.queued_total, o->extra, __ATOMIC_RELAXED);
			free(o->data);
			free(o);
		}
		if (c->out_head)
			c->out_head->off += left;
		if ((size_t)n < total)
			break;		/* the socket is full: EPOLLOUT resumes */
	}
	if (!c->out_head && (c->close_after || (c->read_eof && !c->inflight))) {
		conn_close_locked(c);
		return -1;
	}
	return 0;
}

/* conn_resume_later -- c's throttle was lifted while it holds input: the
 * loop goes on with it after its batch (rpc_resume_held). Caller holds
 * c->lock; any thread. */
static void conn_resume_later(struct rpc_conn *c)
{
	uint64_t one = 1;

	if (c->resume_queued || c->closed)
		return;
	c->resume_queued = true;
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&R.conns_lock);
	c->resume_next = R.resumes;
	__atomic_store_n(&R.resumes, c, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&R.conns_lock);
	/* from the loop thread too: its batch may be over (a call run by
	 * rpc_resume_held itself), and the loop must not sleep on it */
	if (write(R.evfd, &one, sizeof(one)) < 0) {
		/* counter already set: the loop wakes anyway */
	}
}

static void req_finish(struct rpc_req *req)
{
	struct rpc_conn *c = req->conn;

	pthread_mutex_lock(&c->lock);
	if (--c->inflight == 0)
		__atomic_sub_fetch(&R.busy_conns, 1, __ATOMIC_RELAXED);
	if (c->throttled && c->inflight <= RPC_MAX_INFLIGHT / 2) {
		c->throttled = false;
		if (c->held_len)
			conn_resume_later(c);
		conn_update_events(c);
	}
	if (c->read_eof && !c->inflight && !c->out_head)
		conn_close_locked(c);	/* the last reply went out */
	pthread_mutex_unlock(&c->lock);
	conn_put(c);
	size_t mem = req->mem;
	free(req->buf);
	free(req);
	/* sequentially consistent, as the loop's count of waiters and its
	 * check of the bytes: one of the two sides sees the other's change */
	size_t left = __atomic_sub_fetch(&R.req_mem, mem, __ATOMIC_SEQ_CST);
	/* down to half the bound: the loop reads the waiting connections
	 * again (rpc_mem_resume). The loop checks this itself before it
	 * sleeps; a worker wakes it, once. */
	if (__atomic_load_n(&R.nmem_waiters, __ATOMIC_SEQ_CST) && left <= R.request_memory / 2 &&
	    !on_loop_thread && !__atomic_exchange_n(&R.mem_wake, 1, __ATOMIC_SEQ_CST)) {
		uint64_t one = 1;
		if (write(R.evfd, &one, sizeof(one)) < 0) {
			/* counter already set: the loop wakes anyway */
		}
	}
	__atomic_sub_fetch(&R.pending, 1, __ATOMIC_ACQ_REL);
}

void rpc_reply(struct rpc_req *req, uint8_t *rec, size_t len)
{
	struct rpc_conn *c = req->conn;
	uint32_t mark = htonl(0x80000000u | (uint32_t)(len - 4));
	size_t off = 0;

	memcpy(rec, &mark, 4);
	pthread_mutex_lock(&c->lock);
	if (c->closed) {
		free(rec);
		goto out;
	}
	/* a call run inline queues its reply: the loop sends each
	 * connection's replies together at the end of its batch (rpc_uncork);
	 * a worker writes at once when nothing is queued before it */
	if (!on_loop_thread && !c->out_head) {
		while (off < len) {
			ssize_t n = send(c->ep.fd, rec + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno != EAGAIN) {
					conn_close_locked(c);
					free(rec);
					goto out;
				}
				break;
			}
			off += (size_t)n;
		}
		if (off == len) {
			free(rec);
			goto out;
		}
	}
	struct outbuf *o = malloc(sizeof(*o));
	if (!o) {
		/* Cannot queue: the stream would lose a record; close it so the
		 * client reconnects and retransmits. */
		conn_close_locked(c);
		free(rec);
		goto out;
	}
	size_t extra = malloc_usable_size(rec) - len + sizeof(*o);
	*o = (struct outbuf){ NULL, rec, len, off, extra };
	__atomic_store_n(&c->out_bytes, c->out_bytes + (len - off) + extra, __ATOMIC_RELAXED);
	__atomic_add_fetch(&R.queued_total, len - off + extra, __ATOMIC_RELAXED);
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	if (!on_loop_thread) {
		conn_update_events(c);
	} else if (!c->corked) {
		c->corked = true;
		__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
		c->cork_next = R.corked;
		R.corked = c;
	}
out:
	pthread_mutex_unlock(&c->lock);
	req_finish(req);
}

void rpc_drop(struct rpc_req *req)
{
	req_finish(req);
}

bool rpc_conn_closed(const struct rpc_req *req)
{
	struct rpc_conn *c = req->conn;

	pthread_mutex_lock(&c->lock);
	bool closed = c->closed || c->close_after;
	pthread_mutex_unlock(&c->lock);
	return closed;
}

void rpc_close_conn(struct rpc_req *req)
{
	struct rpc_conn *c = req->conn;

	pthread_mutex_lock(&c->lock);
	if (c->out_head) {
		c->close_after = true;
		conn_update_events(c);
	} else {
		conn_close_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
	req_finish(req);
}

const char *addr_to_string(const struct sockaddr *sa, char *buf, size_t len)
{
	if (sa->sa_family == AF_INET)
		return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
	if (sa->sa_family == AF_INET6)
		return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len);
	snprintf(buf, len, "?");
	return buf;
}

/* conn_idle_locked -- c has no call in flight, no output queued, no input
 * held and is not waiting for the calls' memory: nothing of the server's is
 * pending on it. Caller holds c->lock. */
static bool conn_idle_locked(const struct rpc_conn *c)
{
	/* one waiting for the calls' memory (conn_mem_wait) may have calls
	 * unread in its socket: not idle, though nothing is read from it */
	return !c->closed && !c->inflight && !c->out_head && !c->held_len && !c->mem_wait;
}

/* conn_evict -- close the idle connection (conn_idle_locked) quiet for
 * longest, to make room for a new one (why: for the log); false when none
 * is idle. One heard from since the last sweep counts as the most
 * recent. knfsd does the same over its connection limit: better than
 * refusing the new client, which has a call to make. Loop thread; O(number
 * of connections), only when one is over the limit. */
static bool conn_evict(const char *why)
{
	struct rpc_conn *victim = NULL;
	uint64_t oldest = UINT64_MAX;

	/* R.open runs from the newest: on a tie (heard since the last sweep,
	 * all of them), the one accepted first */
	for (struct rpc_conn *c = R.open; c; c = c->open_next) {
		uint64_t t = c->heard ? UINT64_MAX - 1 : c->quiet_since;
		if (t > oldest)
			continue;
		pthread_mutex_lock(&c->lock);
		bool idle = conn_idle_locked(c);
		pthread_mutex_unlock(&c->lock);
		if (idle) {
			victim = c;
			oldest = t;
		}
	}
	if (!victim)
		return false;
	static long tok;
	char a[INET6_ADDRSTRLEN];
	if (log_ratelimited(&tok))
		log_warnx("%s (%d connections): closing the idle connection from %s", why,
			  __atomic_load_n(&R.nconns, __ATOMIC_RELAXED), addr_to_string((const struct sockaddr *)&victim->peer, a, sizeof(a)));
	pthread_mutex_lock(&victim->lock);
	conn_close_locked(victim);
	pthread_mutex_unlock(&victim->lock);
	return true;
}

/* accept_spare -- accept4 failed for want of a descriptor (EMFILE,
 * ENFILE), which leaves the pending connection pending and the listener
 * readable: the loop would spin on it, serving no one. Take the connection
 * with the number of the spare descriptor, then make room for it by closing
 * the idle connection quiet for longest (conn_evict), or else turn it away
 * (the client sees an end of file and tries again). Returns the new
 * connection's descriptor, or -1 with errno: EAGAIN (none was pending),
 * ECONNABORTED (turned away), or that of accept4 (no spare descriptor: it
 * is opened again by rpc_tick). */
static int accept_spare(struct ep_item *l, struct sockaddr_storage *ss, socklen_t *sl)
{
	int fd, err = errno;

	if (R.spare_fd < 0) {
		errno = err;
		return -1;
	}
	close(R.spare_fd);
	*sl = sizeof(*ss);
	fd = accept4(l->fd, (struct sockaddr *)ss, sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
	err = errno;
	if (fd >= 0 && !conn_evict("out of descriptors")) {
		static long tok;
		if (log_ratelimited(&tok))
			log_warnx("out of descriptors (%d connections), none idle: turning a connection away",
				  __atomic_load_n(&R.nconns, __ATOMIC_RELAXED));
		close(fd);
		fd = -1;
		err = ECONNABORTED;
	}
	R.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	errno = err;
	return fd;
}

/* listen_pause -- nothing can take the pending connections now: stop
 * watching the listeners for RPC_LISTEN_PAUSE_NS (rpc_tick resumes them)
 * rather than spin on them, level-triggered */
static void listen_pause(void)
{
	uint64_t until = rpc_now_ns() + RPC_LISTEN_PAUSE_NS;

	for (unsigned i = 0; i < R.nlisteners; i++) {
		struct epoll_event ev = { .events = 0, .data.ptr = &R.listeners[i] };
		epoll_ctl(R.epfd, EPOLL_CTL_MOD, R.listeners[i].fd, &ev);
	}
	R.listen_paused = true;
	R.listen_until = until;
	if (until < R.next_tick)
		R.next_tick = until;
}

static void do_accept(struct ep_item *l)
{
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			fd = accept_spare(l, &ss, &sl);
		if (fd < 0) {
			static long tok;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM)
				continue;	/* that one is gone: the next */
			/* The pending connection stays and keeps the listener
			 * readable (ENOBUFS, ENOMEM, no spare descriptor): stop
			 * watching it for a moment rather than spin on it. */
			if (log_ratelimited(&tok))
				log_warn("accept (not listening for %llu ms)",
					 (unsigned long long)(RPC_LISTEN_PAUSE_NS / 1000000));
			listen_pause();
			return;
		}
		if (R.max_conns && (unsigned)__atomic_load_n(&R.nconns, __ATOMIC_RELAXED) >= R.max_conns &&
		    !conn_evict("connection limit")) {
			static long tok;
			char a[INET6_ADDRSTRLEN];
			if (log_ratelimited(&tok))
				log_warnx("connection limit (%u), none idle: refusing a connection from %s",
					  R.max_conns, addr_to_string((const struct sockaddr *)&ss, a, sizeof(a)));
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* a client gone without a word (power cut, cable, crash of its
		 * host) is found in about two minutes: one with a call in flight
		 * is never idle, and the idle timeout is longer */
		int ka_idle = RPC_KEEPALIVE_IDLE_S, ka_intvl = RPC_KEEPALIVE_INTVL_S, ka_cnt = RPC_KEEPALIVE_CNT;
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &ka_idle, sizeof(ka_idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &ka_intvl, sizeof(ka_intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &ka_cnt, sizeof(ka_cnt));
		struct rpc_conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->ep = (struct ep_item){ EP_CONN, fd };
		c->refs = 1;
		pthread_mutex_init(&c->lock, NULL);
		memcpy(&c->peer, &ss, sl);
		c->peerlen = sl;
		c->events = EPOLLIN;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &c->ep };
		if (epoll_ctl(R.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			pthread_mutex_destroy(&c->lock);
			free(c);
			continue;
		}
		__atomic_add_fetch(&R.nconns, 1, __ATOMIC_RELAXED);
		c->quiet_since = rpc_now_ns();
		c->open_next = R.open;
		if (R.open)
			R.open->open_prev = c;
		R.open = c;
	}
}

/* conn_mem_wait -- the calls in flight hold R.request_memory or more: c is
 * not read until they are down to half of it (rpc_mem_resume). Loop
 * thread. Returns true when c was paused (false: closed). */
static bool conn_mem_wait(struct rpc_conn *c)
{
	pthread_mutex_lock(&c->lock);
	bool wait = !c->closed && !c->close_after;
	if (wait && !c->mem_wait) {
		c->mem_wait = true;
		conn_update_events(c);
		__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
		c->mem_next = R.mem_waiters;
		R.mem_waiters = c;
		/* a wake-up left from before: a worker that sees the count
		 * must find the flag clear, or it would not wake the loop */
		if (!R.nmem_waiters)
			__atomic_store_n(&R.mem_wake, 0, __ATOMIC_SEQ_CST);
		if (__atomic_add_fetch(&R.nmem_waiters, 1, __ATOMIC_SEQ_CST) == 1) {
			static long tok;
			__atomic_add_fetch(&R.mem_waits, 1, __ATOMIC_RELAXED);
			if (log_ratelimited(&tok))
				log_warnx("calls in flight hold %zu MiB, request_memory is %zu MiB: reading no more calls until they are down to half",
					  __atomic_load_n(&R.req_mem, __ATOMIC_RELAXED) >> 20,
					  R.request_memory >> 20);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return wait;
}

/* conn_record -- a whole record arrived: run it or hand it to a worker.
 * Returns 1 when it brought c to RPC_MAX_INFLIGHT calls in flight, or the
 * calls in flight of all connections to R.request_memory (the caller reads
 * no further record), -1 when c is closed or closing
 * (rpc_close_conn): the call is not run, nor any after it, since no reply
 * could go out (a call run inline may have closed c after a failed persist;
 * a worker may have, beside the loop), and a change applied without its
 * reply would meet the retransmission on a new connection (another port,
 * another DRC key: a REMOVE answered NFS3ERR_NOENT). 0 otherwise. */
static int conn_record(struct rpc_conn *c)
{
	struct rpc_req *req = calloc(1, sizeof(*req));
	bool full;

	recs_unlink(c);	/* whole: a call's now, or dropped */
	if (!req) {
		/* Out of memory: drop the call; the client retransmits. */
		c->rec_len = 0;
		return 0;
	}
	pthread_mutex_lock(&c->lock);
	if (c->closed || c->close_after) {
		pthread_mutex_unlock(&c->lock);
		free(req);
		c->rec_len = 0;
		return -1;
	}
	if (c->inflight++ == 0)
		__atomic_add_fetch(&R.busy_conns, 1, __ATOMIC_RELAXED);
	full = c->inflight >= RPC_MAX_INFLIGHT;
	if (full) {
		c->throttled = true;
		conn_update_events(c);
	}
	pthread_mutex_unlock(&c->lock);
	req->conn = c;
	req->buf = c->rec;
	req->len = c->rec_len;
	req->peer = c->peer;
	req->peerlen = c->peerlen;
	req->t_recv_ns = rpc_now_ns();
	req->mem = malloc_usable_size(c->rec) + sizeof(*req);
	c->rec = NULL;
	c->rec_len = c->rec_cap = 0;
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&R.pending, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&R.req_mem, req->mem, __ATOMIC_SEQ_CST);
	/* The loop holds its reference on c across this call, so a reply that
	 * closes the connection cannot free it under conn_input. */
	if (R.inline_ok && R.inline_ok(req))
		R.dispatch(req);
	else
		worker_enqueue(req);
	/* a call run here is done (its memory returned); one left for a
	 * worker may bring the calls in flight over the bound. While
	 * connections wait, every other one waits too when it cuts a record:
	 * one that goes on being read would keep the calls between half the
	 * bound and the bound, and the waiting ones unread for as long. */
	if (R.request_memory &&
	    (R.mem_waiters || __atomic_load_n(&R.req_mem, __ATOMIC_SEQ_CST) >= R.request_memory))
		full |= conn_mem_wait(c);
	return full;
}

/* conn_paused_locked -- whether c takes no new call now: RPC_MAX_INFLIGHT
 * calls in flight, or RPC_MAX_QUEUED bytes of replies its client does not
 * read. Caller holds c->lock. */
static bool conn_paused_locked(struct rpc_conn *c)
{
	return c->throttled || c->mem_wait ||
	       __atomic_load_n(&c->out_bytes, __ATOMIC_RELAXED) >= RPC_MAX_QUEUED;
}

/* conn_hold -- keep the n bytes of input at p for later: c is paused (see
 * conn_paused_locked). Its socket is not read meanwhile; conn_resume goes
 * on once the replies drain (a flush) or the calls do (req_finish). The
 * pause is checked again under the lock that req_finish lifts it under, so
 * a lift cannot be missed. Returns 0 when held, 1 when c is no longer
 * paused (the caller goes on), -1 out of memory. */
static int conn_hold(struct rpc_conn *c, const uint8_t *p, size_t n)
{
	if (c->held)
		return -1;	/* never: the socket is not read while input is held */
	uint8_t *b = malloc(n);
	if (!b)
		return -1;
	memcpy(b, p, n);
	pthread_mutex_lock(&c->lock);
	if (!conn_paused_locked(c)) {
		pthread_mutex_unlock(&c->lock);
		free(b);
		return 1;
	}
	c->held = b;
	c->held_len = n;
	conn_update_events(c);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/*
 * conn_rec_room -- make room for more bytes of c's record in progress: the
 * bytes of all connections' records in progress stay under request_memory.
 * Over it, the connection whose record in progress began first is closed
 * and its buffer freed, until they fit: a client that trickles a record
 * (1 KiB/s keeps it past record_timeout) cannot pin most of RPC_MAX_RECORD
 * on each of thousands of connections, and a record that comes at the
 * network's speed is not the oldest for long. Bytes are counted as they
 * come, not at the mark, so marks alone cost no one a connection. Among
 * the oldest few, one with no call in flight and no reply queued goes
 * first (closing a busy one drops its replies, and its client's
 * retransmissions come from another port, past the DRC). false: c is the
 * one to go (the caller closes it). Loop thread.
 */
#define RPC_RECS_SPARE 8	/* how many of the oldest are looked at for an idle one */

static bool conn_rec_room(struct rpc_conn *c, size_t more)
{
	static long tok;
	char a[INET6_ADDRSTRLEN];

	while (R.request_memory &&
	       __atomic_load_n(&R.rec_mem, __ATOMIC_RELAXED) + more > R.request_memory) {
		struct rpc_conn *v = NULL;	/* the oldest, unless an idle one follows */
		bool was_closed = false;
		int k = 0;
		for (struct rpc_conn *o = R.recs_head; o && k < RPC_RECS_SPARE; o = o->recs_next, k++) {
			pthread_mutex_lock(&o->lock);
			bool closed = o->closed, idle = closed || (!o->inflight && !o->out_head);
			pthread_mutex_unlock(&o->lock);
			if (!v || idle) {
				v = o;
				was_closed = closed;
			}
			if (idle)
				break;
		}
		if (!v)
			v = c;	/* cannot be: c's record alone is under the bound */
		if (!was_closed) {
			__atomic_add_fetch(&R.rec_evictions, 1, __ATOMIC_RELAXED);
			if (log_ratelimited(&tok))
				log_warnx("closing connection from %s: its record in progress is the "
					  "oldest while all connections' hold request_memory",
					  addr_to_string((const struct sockaddr *)&v->peer, a,
							 sizeof(a)));
		}
		if (v == c)
			return false;
		if (!was_closed) {
			pthread_mutex_lock(&v->lock);
			conn_close_locked(v);
			pthread_mutex_unlock(&v->lock);
		}
		conn_rec_free(v);	/* its input is never read again */
	}
	return true;
}

/*
 * conn_took -- k more bytes of the current fragment are in c->rec (room
 * made by conn_rec_room): count them, and at the fragment's end cut the
 * record if it was the last. Returns 0 (no record cut), 1 (a record cut),
 * 2 (a record cut, and c is now paused: conn_record's "full"), -1 on a
 * framing error (an empty call), -3 when c was closed under the record.
 */
static int conn_took(struct rpc_conn *c, size_t k)
{
	if (k) {
		if (!c->on_recs) {
			c->on_recs = true;
			c->recs_prev = R.recs_tail;
			if (R.recs_tail)
				R.recs_tail->recs_next = c;
			else
				R.recs_head = c;
			R.recs_tail = c;
		}
		__atomic_add_fetch(&R.rec_mem, k, __ATOMIC_RELAXED);
	}
	c->rec_len += k;
	c->frag_left -= k;
	if (c->frag_left > 0)
		return 0;
	c->mark_got = 0;
	if (!c->last_frag)
		return 0;
	if (c->rec_len == 0)
		return -1;	/* an empty call is garbage */
	c->nrec++;
	int st = conn_record(c);
	if (st < 0)
		return -3;
	return st > 0 ? 2 : 1;
}

/* conn_input -- consume n bytes of the stream; returns -1 on a framing error
 * (the caller closes the connection), -2 when c's record would take more
 * memory than records in progress may (conn_rec_room closed the others it
 * could). Stops after the record that paused c
 * (RPC_MAX_INFLIGHT calls in flight, or replies over RPC_MAX_QUEUED), holding
 * the rest (conn_hold): one read of small pipelined calls holds hundreds. */
static int conn_input(struct rpc_conn *c, const uint8_t *p, size_t n)
{
	while (n > 0) {
		if (c->mark_got < 4) {
			size_t k = 4 - c->mark_got < n ? 4 - c->mark_got : n;
			memcpy(c->mark + c->mark_got, p, k);
			c->mark_got += k;
			p += k;
			n -= k;
			if (c->mark_got < 4)
				break;
			uint32_t m;
			memcpy(&m, c->mark, 4);
			m = ntohl(m);
			c->last_frag = (m & 0x80000000u) != 0;
			c->frag_left = m & 0x7fffffffu;
			if (c->rec_len + c->frag_left > RPC_MAX_RECORD)
				return -1;
			if (c->rec_len + c->frag_left > c->rec_cap) {
				/* at least doubled: a record of many small
				 * fragments is not copied over once per fragment */
				size_t cap = c->rec_len + c->frag_left;
				if (cap < 2 * c->rec_cap)
					cap = 2 * c->rec_cap < RPC_MAX_RECORD ? 2 * c->rec_cap : RPC_MAX_RECORD;
				uint8_t *nb = realloc(c->rec, cap ? cap : 1);
				if (!nb)
					return -1;
				c->rec = nb;
				c->rec_cap = cap;
			}
		}
		size_t k = c->frag_left < n ? c->frag_left : n;
		/* an empty fragment may come before any buffer */
		if (k && !conn_rec_room(c, k))
			return -2;
		if (k)
			memcpy(c->rec + c->rec_len, p, k);
		int st = conn_took(c, k);
		p += k;
		n -= k;
		if (st == -1)
			return -1;
		if (st == -3)
			return 0;	/* closed: the rest is not run */
		if (st > 0 && n > 0 &&
		    (st == 2 || __atomic_load_n(&c->out_bytes, __ATOMIC_RELAXED) >= RPC_MAX_QUEUED)) {
			int rc = conn_hold(c, p, n);	/* a record was cut, and c paused */
			if (rc <= 0)
				return rc;
		}
	}
	return 0;
}

static void conn_readable(struct rpc_conn *c)
{
	for (int i = 0; i < 16; i++) {
		/* the rest of a long fragment is read straight into its
		 * record's buffer (taken whole at the mark): a 1 MiB WRITE is
		 * not copied once more through the stage. Shorter ones, and
		 * marks, go through the stage: one read takes many calls. */
		bool direct = c->mark_got == 4 && c->frag_left >= RPC_DIRECT_MIN;
		size_t want = direct ? c->frag_left : sizeof(R.stage);
		ssize_t n = read(c->ep.fd, direct ? c->rec + c->rec_len : R.stage, want);
		if (n > 0) {
			c->heard = true;
			int irc;
			if (direct) {
				irc = conn_rec_room(c, (size_t)n) ? conn_took(c, (size_t)n) : -2;
				if (irc > 0 || irc == -3)
					irc = 0;	/* paused or closed: the check below stops */
			} else {
				irc = conn_input(c, R.stage, (size_t)n);
			}
			if (irc == -2)
				goto close;	/* conn_rec_room said why */
			if (irc < 0) {
				static long tok;
				char a[INET6_ADDRSTRLEN];
				if (log_ratelimited(&tok))
					log_warnx("closing connection from %s: bad record mark or record over %d bytes",
						  addr_to_string((const struct sockaddr *)&c->peer, a, sizeof(a)), RPC_MAX_RECORD);
				goto close;
			}
			if ((size_t)n < want || c->held_len)
				return;
			pthread_mutex_lock(&c->lock);
			/* close_after: conn_record refused a call (a failed
			 * persist closed c) and dropped the rest of that read;
			 * reading on would parse from the middle of a record,
			 * fail its framing and close c before its queued
			 * replies went out. */
			bool stop = c->throttled || c->mem_wait || c->closed || c->close_after ||
				    __atomic_load_n(&c->out_bytes, __ATOMIC_RELAXED) >= RPC_MAX_QUEUED;
			pthread_mutex_unlock(&c->lock);
			if (stop)
				return;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == 0) {
			/* The client shut its side down (or closed: we cannot
			 * tell until a write fails). Its calls in flight are
			 * still answered: stop reading, close once they are
			 * and their replies have gone out. A second end of
			 * file is EPOLLHUP or EPOLLERR: nothing can go out. */
			pthread_mutex_lock(&c->lock);
			if (!c->read_eof && (c->inflight || c->out_head)) {
				c->read_eof = true;
				conn_update_events(c);
			} else {
				conn_close_locked(c);
			}
			pthread_mutex_unlock(&c->lock);
			return;
		}
		goto close;
	}
	return;
close:
	pthread_mutex_lock(&c->lock);
	conn_close_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* conn_resume_due -- after a flush (lock held): whether held input may go
 * on now */
static bool conn_resume_due(struct rpc_conn *c)
{
	return !c->closed && c->held_len && !__atomic_load_n(&R.draining, __ATOMIC_ACQUIRE) &&
	       !conn_paused_locked(c);
}

/* conn_resume -- consume the input held by conn_hold (loop thread, lock not
 * held); it may be held again. */
static void conn_resume(struct rpc_conn *c)
{
	pthread_mutex_lock(&c->lock);
	uint8_t *b = c->held;
	size_t n = c->held_len;
	c->held = NULL;
	c->held_len = 0;
	pthread_mutex_unlock(&c->lock);
	int rc = conn_input(c, b, n);
	free(b);
	pthread_mutex_lock(&c->lock);
	if (rc < 0)
		conn_close_locked(c);
	else if (!c->closed)
		conn_update_events(c);
	pthread_mutex_unlock(&c->lock);
}

static void conn_writable(struct rpc_conn *c)
{
	pthread_mutex_lock(&c->lock);
	if (!c->closed) {
		conn_flush_locked(c);
		conn_update_events(c);
	}
	bool resume = conn_resume_due(c);
	pthread_mutex_unlock(&c->lock);
	if (resume)
		conn_resume(c);
}

static void (*batch_end)(void);

/* rpc_uncork_round -- send the queued replies of the corked connections
 * round (a list through cork_next) */
static void rpc_uncork_round(struct rpc_conn *round)
{
	while (round) {
		struct rpc_conn *c = round;
		round = c->cork_next;
		c->cork_next = NULL;
		pthread_mutex_lock(&c->lock);
		c->corked = false;
		if (!c->closed) {
			conn_flush_locked(c);
			if (!c->closed)
				conn_update_events(c);
		}
		bool resume = conn_resume_due(c);
		pthread_mutex_unlock(&c->lock);
		if (resume)
			conn_resume(c);
		conn_put(c);
	}
}

/* rpc_uncork -- send the replies queued by calls run inline (loop thread),
 * each round after batch_end: a connection resumed by its flush runs calls
 * inline, whose replies form the next round. */
static void rpc_uncork(void)
{
	do {
		if (batch_end)
			batch_end();
		struct rpc_conn *round = R.corked;
		R.corked = NULL;
		rpc_uncork_round(round);
	} while (R.corked);
}

/* rpc_mem_resume -- read the connections that waited for the calls' memory
 * again, once it is down to half the bound (or at the end: force). Loop
 * thread. */
static void rpc_mem_resume(bool force)
{
	if (!R.mem_waiters)
		return;
	__atomic_store_n(&R.mem_wake, 0, __ATOMIC_SEQ_CST);
	if (!force && __atomic_load_n(&R.req_mem, __ATOMIC_SEQ_CST) > R.request_memory / 2)
		return;
	struct rpc_conn *c = R.mem_waiters;
	R.mem_waiters = NULL;
	__atomic_store_n(&R.nmem_waiters, 0, __ATOMIC_SEQ_CST);
	while (c) {
		struct rpc_conn *next = c->mem_next;
		c->mem_next = NULL;
		pthread_mutex_lock(&c->lock);
		c->mem_wait = false;
		bool resume = !force && conn_resume_due(c);
		if (!resume)
			conn_update_events(c);
		pthread_mutex_unlock(&c->lock);
		if (resume)
			conn_resume(c);
		conn_put(c);
		c = next;
	}
}

/* rpc_resume_held -- go on with the connections whose throttle was lifted
 * while they held input (conn_resume_later). Loop thread. */
static void rpc_resume_held(void)
{
	pthread_mutex_lock(&R.conns_lock);
	struct rpc_conn *c = R.resumes;
	__atomic_store_n(&R.resumes, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&R.conns_lock);
	while (c) {
		struct rpc_conn *next = c->resume_next;
		pthread_mutex_lock(&c->lock);
		c->resume_queued = false;
		bool resume = conn_resume_due(c);
		pthread_mutex_unlock(&c->lock);
		if (resume)
			conn_resume(c);
		conn_put(c);
		c = next;
	}
}

/* conn_stuck_locked -- close c (and return true) when its client has
 * taken none of its queued replies for R.idle_ns (a connection with output
 * pending is never idle, and the limit's eviction takes only idle ones: a
 * client that stops reading would keep its connection and its replies, up
 * to RPC_MAX_INFLIGHT of them, for good), or since the last sweep while
 * all connections' replies are over R.reply_memory, or when the record it
 * is sending has come slower than RPC_RECORD_MIN_RATE for R.record_ns or
 * more since a sweep first saw it unfinished while its input was read (one
 * byte now and then would keep the quiet-based check below from ever
 * firing). Caller holds c->lock; loop thread. */
static bool conn_stuck_locked(struct rpc_conn *c, bool mid, uint64_t now)
{
	char a[INET6_ADDRSTRLEN];
	static long tok;
	const char *why = NULL;
	uint64_t limit = 0;

	if (c->closed)
		return false;
	if (c->out_head) {
		/* what the client acknowledges leaves the socket's send queue
		 * long before the socket takes more (it wakes its writer when
		 * much of it is free): a slow reader moves that */
		int q = -1;
		if (ioctl(c->ep.fd, SIOCOUTQ, &q) < 0)
			q = -1;
		if (!c->stall_since || c->out_sent != c->out_seen || q != c->outq_seen) {
			c->out_seen = c->out_sent;
			c->outq_seen = q;
			c->stall_since = now;
		} else if (R.idle_ns && now - c->stall_since >= R.idle_ns) {
			why = "none of its replies taken";
			limit = R.idle_ns;
		}
	} else {
		c->stall_since = 0;
	}
	/* over reply_memory, all connections together: those holding
	 * RPC_MAX_QUEUED or more that took nothing since the last sweep go
	 * (a READ the page cache cannot serve runs on a worker, past the
	 * loop's check of the queue before it takes a call: 256 of 1 MiB
	 * could queue), while those whose clients take their replies stay */
	if (!why && R.reply_memory && c->out_bytes >= RPC_MAX_QUEUED && c->stall_since &&
	    c->stall_since != now &&
	    __atomic_load_n(&R.queued_total, __ATOMIC_RELAXED) > R.reply_memory) {
		why = "none of its replies taken while all connections' are over reply_memory";
		limit = now - c->stall_since;
	}
	if (!why && mid && R.record_ns && !c->held_len && !conn_paused_locked(c) &&
	    !c->close_after && !c->read_eof) {
		if (!c->mid_since || c->mid_nrec != c->nrec) {
			c->mid_nrec = c->nrec;
			c->mid_since = now;
			c->mid_len = c->rec_len;
		} else if (now - c->mid_since >= R.record_ns &&
			   (c->rec_len - c->mid_len) * 1000000000ull <
				   (now - c->mid_since) * RPC_RECORD_MIN_RATE) {
			why = "its record coming slower than 1 KiB/s";
			limit = R.record_ns;
		}
	} else if (!why) {
		c->mid_since = 0;	/* the clock starts again once it is read */
	}
	if (!why)
		return false;
	if (log_ratelimited(&tok))
		log_warnx("closing connection from %s: %s in %llu s",
			  addr_to_string((const struct sockaddr *)&c->peer, a, sizeof(a)), why,
			  (unsigned long long)(limit / 1000000000ull));
	conn_close_locked(c);
	return true;
}

/* conn_sweep -- close the connections idle for R.idle_ns, or for R.record_ns
 * when they sit in the middle of a record (a client that announced a record
 * of up to RPC_MAX_RECORD bytes and went silent pins its buffer). Idle time
 * counts from the first sweep that found the connection neither heard from
 * (a read) nor busy, so reads cost no clock. Loop thread. */
static void conn_sweep(uint64_t now)
{
	for (struct rpc_conn *c = R.open; c; c = c->open_next) {
		bool mid = c->mark_got || c->frag_left || c->rec_len;
		bool heard = c->heard;
		c->heard = false;
		pthread_mutex_lock(&c->lock);
		if (conn_stuck_locked(c, mid, now)) {
			pthread_mutex_unlock(&c->lock);
			continue;
		}
		if (heard || !conn_idle_locked(c)) {
			c->quiet_since = now;
		} else {
			uint64_t limit = R.idle_ns;
			if (mid && R.record_ns && (!limit || R.record_ns < limit))
				limit = R.record_ns;
			if (limit && now - c->quiet_since >= limit) {
				char a[INET6_ADDRSTRLEN];
				if (mid) {
					static long tok;
					if (log_ratelimited(&tok))
						log_warnx("closing connection from %s: no byte of its record for %llu s",
							  addr_to_string((const struct sockaddr *)&c->peer, a, sizeof(a)),
							  (unsigned long long)(limit / 1000000000ull));
				} else {
					log_debug("closing connection from %s: idle for %llu s", addr_to_string((const struct sockaddr *)&c->peer, a, sizeof(a)),
						  (unsigned long long)(limit / 1000000000ull));
				}
				conn_close_locked(c);
			}
		}
		pthread_mutex_unlock(&c->lock);
	}
}

/* rpc_tick -- the loop's periodic work, at R.next_tick (loop thread): the
 * sweep; the listeners back after listen_pause; the spare descriptor again
 * if another thread took the number meanwhile */
static void rpc_tick(uint64_t now)
{
	if (now >= R.next_sweep) {
		conn_sweep(now);
		R.next_sweep = R.sweep_ns ? now + R.sweep_ns : UINT64_MAX;
	}
	R.next_tick = R.next_sweep;
	if (R.listen_paused && now < R.listen_until && R.listen_until < R.next_tick)
		R.next_tick = R.listen_until;
	if (R.listen_paused && now >= R.listen_until) {
		for (unsigned i = 0; i < R.nlisteners; i++) {
			struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &R.listeners[i] };
			epoll_ctl(R.epfd, EPOLL_CTL_MOD, R.listeners[i].fd, &ev);
		}
		R.listen_paused = false;
	}
	if (R.spare_fd < 0)
		R.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (R.spare_fd < 0 && now + 1000000000ull < R.next_tick)
		R.next_tick = now + 1000000000ull;
}

/* rpc_sleep_ms -- how long the loop may sleep in epoll_wait: up to the next
 * tick, a second at most */
static int rpc_sleep_ms(uint64_t now)
{
	if (R.next_tick <= now)
		return 0;
	uint64_t left = R.next_tick - now;
	return left >= 1000000000ull ? 1000 : (int)((left + 999999) / 1000000);
}

void rpc_set_limits(const struct rpc_limits *l)
{
	uint64_t shortest;

	R.idle_ns = (uint64_t)l->idle_timeout_s * 1000000000ull;
	R.record_ns = (uint64_t)l->record_timeout_s * 1000000000ull;
	shortest = R.idle_ns && R.record_ns ? (R.idle_ns < R.record_ns ? R.idle_ns : R.record_ns)
					    : R.idle_ns | R.record_ns;
	R.max_conns = l->max_conns;
	R.reply_memory = l->reply_memory;
	R.request_memory = l->request_memory;
	R.sweep_ns = shortest / 4;
	if (R.sweep_ns && R.sweep_ns < RPC_SWEEP_MIN_NS)
		R.sweep_ns = RPC_SWEEP_MIN_NS;
	if (R.sweep_ns > RPC_SWEEP_MAX_NS || (!R.sweep_ns && R.reply_memory))
		R.sweep_ns = RPC_SWEEP_MAX_NS;	/* reply_memory is the sweep's too */
}

void rpc_set_batch_end(void (*fn)(void))
{
	batch_end = fn;
}

void rpc_run(int (*on_signal)(int signo), unsigned drain_ms)
{
	struct epoll_event evs[64];

	uint64_t busy_until = 0;

	on_loop_thread = true;
	R.next_sweep = R.next_tick = R.sweep_ns ? rpc_now_ns() + R.sweep_ns : UINT64_MAX;
	while (!__atomic_load_n(&R.stopping, __ATOMIC_ACQUIRE)) {
		uint64_t now = rpc_now_ns();
		if (now >= R.next_tick)
			rpc_tick(now);
		/* Right after serving, poll without sleeping for a short while:
		 * a client that answers quickly then finds the loop awake, and a
		 * wake-up of an idle CPU (tens of microseconds on a VM) is saved
		 * per call. Bounded: the loop sleeps as soon as it has been idle
		 * for RPC_BUSY_POLL_NS. */
		bool polling = now < busy_until;
		int n = epoll_wait(R.epfd, evs, 64, polling ? 0 : rpc_sleep_ms(now));
		if (n == 0 && polling)
			sched_yield();	/* a thread sharing this CPU may want it */
		for (int i = 0; i < n; i++) {
			struct ep_item *it = evs[i].data.ptr;
			switch (it->kind) {
			case EP_LISTEN:
				do_accept(it);
				break;
			case EP_EVENT: {
				uint64_t v;
				if (read(R.evfd, &v, sizeof(v)) < 0) {
					/* EAGAIN: nothing to consume */
				}
				break;
			}
			case EP_SIGNAL: {
				struct signalfd_siginfo si;
				while (read(it->fd, &si, sizeof(si)) == sizeof(si))
					if (on_signal && on_signal((int)si.ssi_signo))
						__atomic_store_n(&R.stopping, 1, __ATOMIC_RELEASE);
				break;
			}
			case EP_CONN: {
				struct rpc_conn *c = (struct rpc_conn *)it;
				if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
					conn_writable(c);
				if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
					/* with input held (paused) the socket is not
					 * read, or the stream would be parsed out of
					 * order and the held bytes lost: an error or
					 * hang-up then (they come unasked) means
					 * nothing can go out, so it closes */
					pthread_mutex_lock(&c->lock);
					bool open = !c->closed;
					if (open && c->held_len && (evs[i].events & (EPOLLERR | EPOLLHUP))) {
						conn_close_locked(c);
						open = false;
					}
					bool held = c->held_len != 0;
					pthread_mutex_unlock(&c->lock);
					if (open && !held)
						conn_readable(c);
				}
				break;
			}
			}
		}
		if (__atomic_load_n(&R.resumes, __ATOMIC_ACQUIRE))
			rpc_resume_held();
		rpc_mem_resume(false);
		rpc_uncork();
		/* counted from the end of the batch: the calls it ran inline
		 * must not eat the client's window */
		if (n > 0)
			busy_until = rpc_now_ns() + RPC_BUSY_POLL_NS;
		reap_closed();
	}

	/* Stop accepting; let the calls in flight finish and their replies go
	 * out (bounded), keep serving output on the open connections. */
	for (unsigned i = 0; i < R.nlisteners; i++) {
		epoll_ctl(R.epfd, EPOLL_CTL_DEL, R.listeners[i].fd, NULL);
		close(R.listeners[i].fd);
	}
	R.nlisteners = 0;
	/* no held input resumes, no input is read: no new calls */
	__atomic_store_n(&R.draining, true, __ATOMIC_RELEASE);
	rpc_mem_resume(true);	/* their references go */
	uint64_t deadline = rpc_now_ns() + (uint64_t)drain_ms * 1000000ull;
	while (__atomic_load_n(&R.pending, __ATOMIC_ACQUIRE) > 0 && rpc_now_ns() < deadline) {
		int n = epoll_wait(R.epfd, evs, 64, 10);
		for (int i = 0; i < n; i++) {
			struct ep_item *it = evs[i].data.ptr;
			struct rpc_conn *c = (struct rpc_conn *)it;
			if (it->kind != EP_CONN) {
				/* consumed, or it would come back at once */
				uint8_t junk[sizeof(struct signalfd_siginfo)];
				while (read(it->fd, junk, it->kind == EP_EVENT ? 8 : sizeof(junk)) > 0)
					;
				continue;
			}
			if (evs[i].events & EPOLLOUT) {
				conn_writable(c);
			} else if (evs[i].events & EPOLLIN) {
				/* a client that goes on sending: no longer
				 * watched for input (level-triggered, it would
				 * spin the loop until the deadline) */
				pthread_mutex_lock(&c->lock);
				conn_update_events(c);
				pthread_mutex_unlock(&c->lock);
			} else if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
				/* nothing can go out; it would come back at
				 * once (level-triggered) until the deadline */
				pthread_mutex_lock(&c->lock);
				conn_close_locked(c);
				pthread_mutex_unlock(&c->lock);
			}
		}
		rpc_resume_held();	/* nothing resumes: the references go */
		reap_closed();
	}
}

void rpc_shutdown(void)
{
	pthread_mutex_lock(&R.qlock);
	R.quit_workers = true;
	pthread_cond_broadcast(&R.qcond);
	pthread_mutex_unlock(&R.qlock);
	for (unsigned i = 0; i < R.nthreads; i++)
		pthread_join(R.threads[i], NULL);
	free(R.threads);
	R.threads = NULL;
	R.nthreads = 0;

	/* Workers are gone: close what is still open and free it. */
	rpc_resume_held();
	for (struct rpc_conn *c = R.open; c; c = c->open_next) {
		pthread_mutex_lock(&c->lock);
		conn_close_locked(c);
		pthread_mutex_unlock(&c->lock);
	}
	reap_closed();
	if (R.spare_fd >= 0)
		close(R.spare_fd);
	close(R.sig_item.fd);
	close(R.evfd);
	close(R.epfd);
}
