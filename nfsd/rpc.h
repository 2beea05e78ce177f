/*
 * rpc.h -- ONC RPC (RFC 5531) transport of presto-nfsd: TCP listeners,
 * record marking, an epoll event loop and a pool of worker threads.
 *
 * The event loop thread reads: it cuts the byte stream into records
 * (multi-fragment, bounded by RPC_MAX_RECORD) and either runs a record's
 * rpc_dispatch_fn itself (the calls inline_ok picks, which hand themselves
 * to a worker with rpc_defer when they find they would wait) or queues it
 * as an rpc_req for the workers, which run rpc_dispatch_fn on it; the reply
 * may be sent from any thread at any later time with rpc_reply(), which
 * writes directly when the connection's queue is empty and otherwise queues
 * the bytes for the event loop (EPOLLOUT). So replies may leave out of
 * order and later than their request (the NVRAM log defers them).
 */
#ifndef PRESTO_RPC_H
#define PRESTO_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A record larger than this closes the connection: the largest legal call is
 * a WRITE of NFSD_MAX_IO bytes plus its header. */
#define RPC_MAX_RECORD (1024 * 1024 + 64 * 1024)
/* A connection with this many calls in flight is not read until it drains to
 * half of it: one client cannot queue unbounded work. The record that reaches
 * it is the last one taken, even from the middle of a read. */
#define RPC_MAX_INFLIGHT 256
/* A connection with this many bytes of replies queued (its client does not
 * read them; counted with the memory their buffers hold) is not read until
 * they drain below it: the replies of a client that never reads are bounded
 * by this plus its calls in flight. */
#define RPC_MAX_QUEUED (4u * 1024 * 1024)

struct rpc_conn;

/* rpc_req -- one call record. The request owns buf until it is replied to or
 * dropped; decoded arguments borrow from it. */
struct rpc_req {
	struct rpc_conn *conn;
	uint8_t *buf;
	size_t len;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	uint64_t t_recv_ns;		/* CLOCK_MONOTONIC at receipt */
	size_t mem;			/* what it holds, counted in the calls'
					 * memory (rpc_limits.request_memory) */
	bool drc_held;			/* deferred by the loop thread with its
					 * duplicate-request-cache entry kept in
					 * progress (dispatch.c) */
	struct rpc_req *next;		/* worker queue link */
};

struct rpc_listen {
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

typedef void (*rpc_dispatch_fn)(struct rpc_req *req);

/* rpc_listen_addr -- parse a numeric IPv4/IPv6 address and port into l; no
 * name resolution (AI_ADDRCONFIG would refuse 127.0.0.1 in a namespace that
 * has only lo). Returns 0 or -EINVAL. */
int rpc_listen_addr(const char *addr, unsigned port, struct rpc_listen *l);

/* rpc_init -- create the event loop and nthreads workers that call fn.
 * inline_ok, if given, picks the calls that may try to run on the event
 * loop thread itself (no hand-off to a worker: one wake-up less per call);
 * such a call must never wait for the disk or for the log: when it finds
 * it would, it gives itself to a worker with rpc_defer before changing
 * anything. */
int rpc_init(unsigned nthreads, rpc_dispatch_fn fn, bool (*inline_ok)(const struct rpc_req *req));
/* rpc_add_listener -- bind and listen on l (port 0: ephemeral; the chosen
 * port is written back into l). Returns 0 or -errno. */
int rpc_add_listener(struct rpc_listen *l);
/* The limits of connections (0: none). */
struct rpc_limits {
	/* connections at most: over it, accepting one closes the idle one
	 * quiet for longest, or refuses the new one when none is idle. Out of
	 * descriptors, accepting does the same whatever the count. */
	unsigned max_conns;
	/* bytes of replies queued, all connections together: over it, the
	 * sweep closes those holding RPC_MAX_QUEUED or more whose clients took
	 * none since the last sweep */
	size_t reply_memory;
	/* bytes the calls in flight hold (their records), all connections
	 * together: once a call brings them over it, no connection is read
	 * (each stops after its record in progress) until the calls are down
	 * to half of it. Calls wait for workers (an fsync, a READ from the
	 * disk), and each connection may have RPC_MAX_INFLIGHT of them: 256
	 * WRITEs of 1 MiB a client. The bytes of the records in progress (up
	 * to RPC_MAX_RECORD each) are held to it apart: bytes that would bring
	 * them over it close the connection whose record in progress began
	 * first (one with no call in flight, among the oldest few), until they
	 * fit. */
	size_t request_memory;
	/* a connection with no call in flight, no output queued and nothing
	 * heard from its client for this long is closed (knfsd: 6 minutes) */
	unsigned idle_timeout_s;
	/* the same for one that stopped in the middle of a record (it pins a
	 * buffer of up to RPC_MAX_RECORD bytes): shorter */
	unsigned record_timeout_s;
};

/* rpc_set_limits -- apply l from the next rpc_run on (before it). Timeouts
 * are checked by a sweep every quarter of the shorter one (0.1 to 5 s), so
 * a connection goes between timeout and timeout plus two sweeps after it was
 * last heard from. */
void rpc_set_limits(const struct rpc_limits *l);
/* rpc_run -- serve until on_signal returns non-zero (SIGTERM, SIGINT);
 * returns when the calls in flight are done (bounded by drain_ms). */
void rpc_run(int (*on_signal)(int signo), unsigned drain_ms);
/* rpc_set_batch_end -- fn runs on the loop thread at the end of each batch
 * of events, before the replies of the calls it ran inline go out (set
 * before rpc_run) */
void rpc_set_batch_end(void (*fn)(void));
void rpc_shutdown(void);

/* rpc_reply -- send rec (len bytes; its first 4 bytes are space for the
 * record mark, which is filled here) on req's connection and free req.
 * Takes ownership of rec (malloc'ed). Any thread. */
void rpc_reply(struct rpc_req *req, uint8_t *rec, size_t len);
/* rpc_drop -- finish req without a reply. */
void rpc_drop(struct rpc_req *req);
/* rpc_close_conn -- close req's connection after this request (bad stream). */
void rpc_close_conn(struct rpc_req *req);

/* rpc_conn_closed -- whether req's connection was closed, or is to be
 * once its output drains (rpc_close_conn): a call of it not yet run is not
 * run, since its reply could not go out (the client sends it again on a
 * new connection). */
bool rpc_conn_closed(const struct rpc_req *req);
/* rpc_on_loop -- whether the calling thread is the event loop's (a call
 * running inline). */
bool rpc_on_loop(void);
/* rpc_busy_conns -- how many connections have calls in flight. */
unsigned rpc_busy_conns(void);
/* rpc_request_memory -- the bytes the calls in flight hold now, and how
 * many times reading stopped at rpc_limits.request_memory. */
void rpc_request_memory(size_t *held, uint64_t *waits);
/* rpc_record_memory -- the bytes the records in progress hold now, and how
 * many connections were closed to keep them under request_memory. */
void rpc_record_memory(size_t *held, uint64_t *closed);
/* rpc_defer -- hand req, which started inline on the loop thread and found
 * it would have to wait, to a worker that runs it from the start. */
void rpc_defer(struct rpc_req *req);

/* rpc_now_ns -- CLOCK_MONOTONIC in nanoseconds. */
uint64_t rpc_now_ns(void);

/* addr_to_string -- numeric text of a socket address (no port); "?" for
 * another family. */
struct sockaddr;
const char *addr_to_string(const struct sockaddr *sa, char *buf, size_t len);

#endif
