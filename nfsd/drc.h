/*
 * drc.h -- the duplicate request cache: a retransmitted non-idempotent call
 * (same client address and port, xid, program, version, procedure and
 * argument checksum) gets the reply of the first execution instead of a
 * second execution. A call still in progress makes its retransmission
 * silently dropped: the reply to the first will answer both.
 */
#ifndef PRESTO_DRC_H
#define PRESTO_DRC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DRC_MAX_ENTRIES 8192

struct drc_key {
	struct sockaddr_storage addr;
	uint32_t xid, prog, vers, proc;
	uint64_t sum;			/* hash of the argument bytes */
};

enum drc_result { DRC_MISS, DRC_IN_PROGRESS, DRC_DONE };

/* drc_key_init -- fill k for a call whose arguments are args[0..len). */
void drc_key_init(struct drc_key *k, const struct sockaddr *sa, socklen_t salen, uint32_t xid,
		  uint32_t prog, uint32_t vers, uint32_t proc, const void *args, size_t len);
/* drc_begin -- look k up. DRC_MISS: an in-progress entry was made, the caller
 * executes and then calls drc_end or drc_abort. DRC_DONE: *reply is a
 * malloc'ed copy of the cached reply record (len bytes, with space for the
 * record mark). DRC_IN_PROGRESS: drop the call. */
enum drc_result drc_begin(const struct drc_key *k, uint8_t **reply, size_t *len);
/* drc_end -- remember the reply (len bytes of rec) for k. */
void drc_end(const struct drc_key *k, const uint8_t *rec, size_t len);
/* drc_abort -- forget the in-progress entry for k. */
void drc_abort(const struct drc_key *k);
/* drc_insert -- remember a finished call's reply (recovered from the log). */
void drc_insert(const struct drc_key *k, const uint8_t *rec, size_t len);
/* drc_foreach -- cb on every finished entry, oldest first (the order in
 * which drc_insert rebuilds the same cache), under the cache's lock: cb
 * must not call into the cache. Stops at cb's first non-zero return and
 * returns it; 0 otherwise. */
int drc_foreach(int (*cb)(void *arg, const struct drc_key *k, const uint8_t *rec, size_t len),
		void *arg);
/* drc_stats -- hits (replayed replies), drops (in progress), entries. */
void drc_stats(uint64_t *hits, uint64_t *drops, uint64_t *entries);

#endif
