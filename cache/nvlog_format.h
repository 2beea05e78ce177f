/*
 * nvlog_format.h -- the on-media format of the presto NVRAM log, and the
 * helpers that validate it (shared by the library and the forensic tool).
 *
 * This comment is the specification; code and tests follow it. The same text,
 * with pictures, is docs/nvlog-format.md.
 *
 * 1. Layout
 *
 *   The log is one file or device of SIZE bytes (a multiple of 4096, at least
 *   NVLOG_MIN_SIZE), mapped whole with libpmem:
 *
 *     [0, 4096)          superblock page: slot 0 at offset 0, slot 1 at 2048
 *     [4096, SIZE)       record area of L = SIZE - 4096 bytes, circular
 *
 *   All integers are little-endian (the library refuses to build elsewhere).
 *
 * 2. Superblock
 *
 *   Two slots of struct nvlog_sb (128 bytes). A slot is valid when its magic,
 *   version and CRC32C (field crc, over bytes [0, offsetof(crc)) of the slot,
 *   then in version 2 the 4 bytes of tail_epoch after it) check out, its
 *   sizes are consistent with the mapping, its tail_pos is a multiple of the
 *   version's record alignment, (version 2) tail_epoch <= boot_epoch, and
 *   tail_pos, tail_lsn, seq and boot_epoch are below 2^62 (no run counts that
 *   far; a tail_pos near 2^64 would wrap the walk's bounds). The valid slot
 *   with the larger seq is current. An update writes the whole new content
 *   (seq + 1) into the other slot and persists it; the old slot stays intact,
 *   so a crash mid-update leaves either the old or the new content current,
 *   never a mix. No valid slot: not a log (-EUCLEAN).
 *
 *   Fields: size and area geometry; uuid (random at format); salt (random at
 *   format and at nvlog_reset, see 4); boot_epoch, incremented durably at
 *   every open, the NFS write verifier comes from it; boot_id, the machine's
 *   /proc/sys/kernel/random/boot_id at the last open (a different one at the
 *   next open means the machine rebooted and unsynced page-cache writes may be
 *   lost); tail_pos/tail_lsn, the oldest live record (4); tail_epoch
 *   (version 2), a lower bound on the epoch of the record at the tail: the
 *   epoch of the last record a trim stepped over, or the epoch of the open
 *   that found the log empty (section 5 says why); clean, set by a clean
 *   close and cleared by open.
 *
 * 3. Records
 *
 *   A record is a 40-byte header (struct nvlog_rec_hdr) followed by len bytes
 *   of payload, padded with zeroes to a multiple of A, the record alignment
 *   of the log's version: A = 64 (one cache line) in version 2, the version
 *   written by format; A = 8 in version 1, which the library still reads and
 *   appends to (nvlog_open turns an empty version-1 log into version 2). The
 *   size on media is nvlog_rec_size(A, len) = alignA(40 + len). Records are
 *   A-byte aligned and never straddle the end of the area:
 *
 *   - if fewer than 40 bytes remain before the end of the area, the writer
 *     skips them (implicit wrap) and the reader does the same (version 1
 *     only: with 64-byte records at least 64 bytes always remain);
 *   - otherwise, if the record does not fit, the writer first writes a pad
 *     record (type NVLOG_TYPE_PAD) covering exactly the rest of the area; the
 *     pad carries the LSN of the record that follows it at offset 0; its CRC
 *     covers its header only (its payload bytes are undefined).
 *
 *   Header fields: crc (below); len (payload bytes); type (1 ..
 *   NVLOG_TYPE_USER_MAX for the caller, NVLOG_TYPE_PAD for the library; 0 is
 *   never valid so zeroed media never parses); flags (0; bits are reserved);
 *   epoch (low 32 bits of the superblock's boot_epoch when it was written);
 *   lsn; dlsn (every LSN <= dlsn was durable when this record was written;
 *   always < lsn); time_ns (CLOCK_REALTIME_COARSE at append, for ages and
 *   forensics).
 *
 *   crc = CRC32C over: the superblock's salt (8 bytes, little-endian), then
 *   header bytes [4, 40), then the payload (not for a pad).
 *
 * 4. LSNs and positions
 *
 *   LSNs number the caller's records 1, 2, 3, ... with no gaps (pads carry no
 *   LSN of their own). Positions are logical byte counts that only grow: the
 *   record at position p lives at area offset p mod L. The live log runs from
 *   the tail (tail_pos, tail_lsn in the superblock) to the head (found by the
 *   recovery scan, kept in memory while open); head_pos - tail_pos <= L, so a
 *   writer never overwrites a live record. Trim moves the tail forward
 *   durably (a superblock update).
 *
 * 5. Validity rule
 *
 *   The scan expects, at position p, the record with LSN n and an epoch at
 *   least e (the previous record's; at the tail, the superblock's tail_epoch
 *   in version 2 and 0 in version 1). The bytes there are the
 *   expected record when all of these hold:
 *     - the header lies inside the area (implicit wrap handled first);
 *     - 40 + len fits between the offset and the end of the area, and the
 *       record ends at most L bytes after tail_pos (lengths are checked
 *       before anything is read through them);
 *     - lsn == n; dlsn < lsn; e <= epoch <= the superblock's boot_epoch;
 *     - type is a user type, or NVLOG_TYPE_PAD with len == the rest of the
 *       area minus the header; flags == 0;
 *     - the CRC matches (the salt is in it).
 *   A damaged pad is stepped over when the expected record n validates at
 *   offset 0 of the next lap: only a wrap can have put record n there.
 *   Why stale bytes never validate: a record left from an earlier lap has a
 *   smaller LSN than any the scan can expect at its place; a record from an
 *   earlier format (or before nvlog_reset) has another salt; a record written
 *   past a hole in an earlier crashed run has an older epoch than the records
 *   that a later run wrote before it (every open bumps the epoch, and writing
 *   resumes at the hole), or, when a trim has taken all of those later
 *   records and left the tail exactly on the stale record, an older epoch
 *   than the tail_epoch floor the trim recorded (version 1 lacks the floor).
 *
 * 6. Recovery scan
 *
 *   From (tail_pos, tail_lsn) take records while they are valid, handing the
 *   caller's records to the callback in LSN order, until the first position
 *   that does not hold the expected record (the head), or until L bytes have
 *   been consumed. Then classify the end:
 *     - END: the header bytes there are all zero, or hold a valid-CRC record
 *       with a smaller LSN (stale bytes of an earlier lap): an orderly end.
 *       A clean close writes a zero header at the head (the seal) for this.
 *       After an unclean stop, stale mid-record bytes of an earlier lap at
 *       the head look like a torn record and are reported as TORN.
 *     - TORN: anything else; a crash mid-append. The partial record was
 *       never acknowledged (acknowledgement waits for every earlier record to
 *       be durable), so it is dropped, and so is everything after it.
 *     - CORRUPT: TORN, and some later A-byte aligned position in the rest of
 *       the area holds a record that validates on its own (bounds, salt, CRC,
 *       epoch) with lsn > n and dlsn >= n: proof that record n had been durable
 *       (acknowledged) and has since been damaged. The scan reports the LSN
 *       and offset of the bad record; the library opens such a log read-only.
 *   Corruption inside a group of records that were persisted together, with
 *   no later record proving it, cannot be told from a crash mid-append; it is
 *   reported as TORN. Every write-ahead log without a second copy has this
 *   limit.
 *
 * 7. Persistence order
 *
 *   Validity is by CRC over the whole record, not by a commit word, so one
 *   persist covers header and payload together; a torn record fails its CRC
 *   (with probability 1 - 2^-32). A record is acknowledged only when it and
 *   every record before it are durable; the head therefore never has a hole
 *   behind an acknowledged record. A superblock slot is persisted as a whole
 *   before the other slot is ever written again.
 */
#ifndef PRESTO_NVLOG_FORMAT_H
#define PRESTO_NVLOG_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the nvlog format is little-endian; add byte swapping before porting"
#endif

#define NVLOG_SB_MAGIC     0x474f4c4f54534552ULL /* "RESTOLOG" little-endian */
#define NVLOG_VERSION      2u  /* written by format: 64-byte records */
#define NVLOG_VERSION_V1   1u  /* read and appended to: 8-byte records */
#define NVLOG_SB_SLOT_OFF0 0u
#define NVLOG_SB_SLOT_OFF1 2048u
#define NVLOG_AREA_OFF     4096u
#define NVLOG_MIN_SIZE     (NVLOG_AREA_OFF + 65536u)
#define NVLOG_HDR_SIZE     40u
#define NVLOG_ALIGN        64u /* record alignment of NVLOG_VERSION */
#define NVLOG_ALIGN_V1     8u  /* record alignment of NVLOG_VERSION_V1 */
/* the record size on media in a log of NVLOG_VERSION */
#define NVLOG_REC_SIZE(len) nvlog_rec_size(NVLOG_ALIGN, (len))
#define NVLOG_TYPE_USER_MAX 0xff00u
#define NVLOG_TYPE_PAD      0xffffu

/* one superblock slot (128 bytes on media) */
struct nvlog_sb {
	uint64_t magic;
	uint32_t version;
	uint32_t clean;       /* 1: the last close was clean */
	uint64_t seq;         /* slot update counter; the larger valid one wins */
	uint64_t size;        /* bytes of the log (superblock page + area) */
	uint64_t area_off;    /* NVLOG_AREA_OFF */
	uint64_t area_len;    /* L */
	uint8_t uuid[16];
	uint64_t salt;
	uint64_t boot_epoch;
	uint8_t boot_id[16];
	uint64_t tail_pos;
	uint64_t tail_lsn;
	uint64_t format_time; /* CLOCK_REALTIME seconds at format */
	uint32_t crc;         /* CRC32C of the other bytes of the slot (v1: of the bytes before it) */
	uint32_t tail_epoch;  /* v2: the epoch floor at the tail (v1: 0, not covered by crc) */
};

/* a record header (40 bytes on media) */
struct nvlog_rec_hdr {
	uint32_t crc;
	uint32_t len;
	uint16_t type;
	uint16_t flags;
	uint32_t epoch;
	uint64_t lsn;
	uint64_t dlsn;
	uint64_t time_ns;
};

/* nvlog_align -- the record alignment of a (checked) superblock version */
static inline uint64_t nvlog_align(uint32_t version)
{
	return version == NVLOG_VERSION_V1 ? NVLOG_ALIGN_V1 : NVLOG_ALIGN;
}

/* nvlog_rec_size -- bytes on media of a record of len payload bytes */
static inline uint64_t nvlog_rec_size(uint64_t align, uint64_t len)
{
	return (NVLOG_HDR_SIZE + len + align - 1) & ~(align - 1);
}

_Static_assert(sizeof(struct nvlog_sb) == 128, "superblock slot is 128 bytes");
_Static_assert(sizeof(struct nvlog_rec_hdr) == NVLOG_HDR_SIZE, "header is 40 bytes");

/* how a scan ended (section 6) */
enum nvlog_end {
	NVLOG_END_CLEAN = 0,  /* END: orderly end of the log */
	NVLOG_END_TORN = 1,   /* a torn record at the head was dropped */
	NVLOG_END_CORRUPT = 2 /* a bad record followed by proof it had been durable */
};

/* a read-only view of a mapped log, for walking it */
struct nvlog_view {
	const uint8_t *base;  /* start of the mapping */
	size_t map_len;       /* bytes mapped */
	struct nvlog_sb sb;   /* the current superblock */
};

/* one record as the walker found it */
struct nvlog_walk_rec {
	const struct nvlog_rec_hdr *hdr; /* a copy, as checked: valid during the callback */
	const uint8_t *payload;
	uint64_t pos;         /* logical position */
	uint64_t off;         /* offset in the area */
};

/* what a walk found */
struct nvlog_walk_end {
	enum nvlog_end end;
	uint64_t records;     /* caller records taken */
	uint64_t bytes;       /* payload bytes taken */
	uint64_t last_lsn;    /* last record taken (tail_lsn - 1 if none) */
	uint32_t last_epoch;
	uint64_t head_pos;    /* position after the last record taken */
	uint64_t bad_lsn;     /* TORN/CORRUPT: the LSN expected there */
	uint64_t bad_off;     /* TORN/CORRUPT: area offset of the bad bytes */
	uint64_t proof_lsn;   /* CORRUPT: the later record proving durability */
	uint64_t proof_off;
	const char *why;      /* TORN/CORRUPT: the first rule that failed */
};

uint32_t nvlog_sb_crc(const struct nvlog_sb *sb);
int nvlog_sb_check(const struct nvlog_sb *sb, size_t map_len);
const char *nvlog_sb_why(const struct nvlog_sb *sb, size_t map_len);
int nvlog_sb_pick(const uint8_t *base, size_t map_len, struct nvlog_sb *out, int *slot);
uint32_t nvlog_rec_crc(uint64_t salt, const struct nvlog_rec_hdr *h, const void *payload);
int nvlog_walk(const struct nvlog_view *v, uint64_t max_lsn,
    int (*cb)(void *arg, const struct nvlog_walk_rec *r), void *arg,
    struct nvlog_walk_end *out);
uint64_t nvlog_next_pos(uint64_t area_len, uint64_t pos, uint64_t rec_size, uint64_t *rec_pos);
/* nvlog_pad_skip -- the walk's rule for the bytes at pos, where record n
 * (epoch at least e) is expected: not valid as record n, while record n is
 * whole at the start of the area (not a pad): a damaged pad, stepped over.
 * The trim must judge such bytes as the walk does. */
bool nvlog_pad_skip(const struct nvlog_view *v, uint64_t pos, uint64_t n, uint32_t e, uint64_t limit);

#endif
