/*
 * nfsd.h -- what the parts of presto-nfsd share: the call context handed to
 * a procedure handler, the procedure table's entry, and the server-wide
 * settings.
 */
#ifndef PRESTO_NFSD_H
#define PRESTO_NFSD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <rpc/rpc.h>

#include "nfsd/presto.h"
#include "nfsd/rpc.h"

/* The largest READ and WRITE we offer in FSINFO (rtmax, wtmax). */
#define NFSD_MAX_IO (1024 * 1024)
/* AUTH_SYS carries at most 16 supplementary groups (RFC 5531 appendix A). */
#define NFSD_MAX_GIDS 16

struct xtab;
struct xexport;

/* call_cred -- who asks, as decoded from the RPC credential. */
struct call_cred {
	uint32_t flavor;		/* AUTH_NONE or AUTH_SYS */
	uint32_t uid, gid;
	uint32_t ngids;
	uint32_t gids[NFSD_MAX_GIDS];
};

/* call -- one call being served: borrowed by the handler from dispatch. */
struct call {
	struct rpc_req *req;
	uint32_t xid, prog, vers, proc;
	struct call_cred cred;
	struct xtab *xt;		/* exports in force for this call (a reference) */
	struct presto_txn txn;		/* the call's log record (presto_logs) */
	bool accel;			/* presto on: the record alone makes the
					 * change durable (no flush); see
					 * accelerated() in nfs3.c */
	bool on_loop;			/* running inline on the event loop thread */
	bool defer;			/* set by a handler running inline that would
					 * have to wait (fsync, a held stripe, a full
					 * log, an uncached READ) before it changed
					 * anything: dispatch hands the call to a
					 * worker, which runs it again from the start */
};

/* rpc_proc -- one row of a program's procedure table (Linux nfs3proc.c
 * style): how to decode, run and encode a procedure. */
struct rpc_proc {
	const char *name;
	xdrproc_t xdr_args;
	xdrproc_t xdr_res;
	size_t args_size;
	size_t res_size;
	void (*handler)(struct call *c, void *args, void *res);
	/* not idempotent: replies go through the duplicate request cache */
	bool drc;
	/* reply buffer size for these arguments; NULL means NFSD_REPLY_SMALL */
	size_t (*reply_size)(const void *args);
	int stat_idx;			/* index into the statistics tables */
	/* the result begins with a status (nfsstat3, mountstat3): non-zero
	 * counts as an error in the statistics */
	bool res_status;
};

#define NFSD_REPLY_SMALL 4096

/* XDRPROC -- an XDR routine as libtirpc's xdrproc_t. The detour through
 * void (*)(void) is the cast C allows between function pointer types
 * (xdr_void takes no arguments, the generated routines take two). */
#define XDRPROC(f) ((xdrproc_t)(void (*)(void))(f))


/* Procedure tables (nfs3.c, mount3.c). */
extern const struct rpc_proc nfs3_procs[];
extern const unsigned nfs3_nprocs;
extern const struct rpc_proc mount3_procs[];
extern const unsigned mount3_nprocs;
extern const struct rpc_proc mount1_procs[];
extern const unsigned mount1_nprocs;

/* dispatch -- the worker entry point: decode, authenticate, run, reply. */
void dispatch(struct rpc_req *req);
/* dispatch_inline_ok -- whether req may try to run on the event loop thread:
 * the procedures served from the inode and dentry caches, and those that
 * defer themselves to a worker when they would wait (see dispatch.c). */
bool dispatch_inline_ok(const struct rpc_req *req);


#endif
