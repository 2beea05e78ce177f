/*
 * nvlog_format.c -- validation of the on-media format: superblock slots,
 * record checksums and the recovery walk (nvlog_format.h, sections 2, 5, 6).
 *
 * Nothing here writes to the log or keeps state, so the forensic dump can walk
 * a log mapped read-only and the library can walk it at open and at scan.
 */
#include "cache/nvlog_format.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cache/crc32c.h"

uint32_t nvlog_sb_crc(const struct nvlog_sb *sb)
{
	uint32_t c = crc32c(0, sb, offsetof(struct nvlog_sb, crc));
	if (sb->version != NVLOG_VERSION_V1)
		c = crc32c(c, &sb->tail_epoch, sizeof(sb->tail_epoch));
	return c;
}

/*
 * nvlog_sb_why -- which rule a superblock slot fails for a mapping of
 * map_len bytes, or NULL when it is valid.
 */
const char *nvlog_sb_why(const struct nvlog_sb *sb, size_t map_len)
{
	static const uint8_t zero[sizeof(struct nvlog_sb)];

	if (memcmp(sb, zero, sizeof(zero)) == 0)
		return "blank (all zero)";
	if (sb->magic != NVLOG_SB_MAGIC)
		return "no superblock magic";
	if (sb->version != NVLOG_VERSION && sb->version != NVLOG_VERSION_V1)
		return "unknown version";
	if (sb->crc != nvlog_sb_crc(sb))
		return "checksum";
	if (sb->size > map_len)
		return "the superblock's size is larger than the file: truncated?";
	if (sb->size < NVLOG_MIN_SIZE || sb->size % 4096 || sb->area_off != NVLOG_AREA_OFF ||
	    sb->area_len != sb->size - sb->area_off)
		return "size or area fields";
	if (sb->tail_lsn == 0 || sb->tail_pos % nvlog_align(sb->version))
		return "tail LSN or tail position";
	/* positions, LSNs, epochs and the sequence grow by one per byte,
	 * record or write: no run reaches the top of their range, and a
	 * position near 2^64 would wrap the walk's bounds */
	if (sb->tail_pos > UINT64_MAX / 4 || sb->tail_lsn > UINT64_MAX / 4 ||
	    sb->seq > UINT64_MAX / 4)
		return "a counter out of range";
	/* records carry the epoch in 32 bits: the open's bump must not wrap
	 * it below the records already in the log */
	if (sb->boot_epoch >= UINT32_MAX)
		return "boot epoch out of range";
	if (sb->version != NVLOG_VERSION_V1 && sb->tail_epoch > (uint32_t)sb->boot_epoch)
		return "tail epoch after the boot epoch";
	return NULL;
}

/*
 * nvlog_sb_check -- is this slot a valid superblock for a mapping of map_len
 * bytes? Returns 0 or -EUCLEAN.
 */
int nvlog_sb_check(const struct nvlog_sb *sb, size_t map_len)
{
	return nvlog_sb_why(sb, map_len) ? -EUCLEAN : 0;
}

/*
 * nvlog_sb_pick -- read both superblock slots and choose the current one
 * (the valid one with the larger seq). Returns 0 and fills *out and *slot,
 * or -EUCLEAN when neither slot is valid.
 */
int nvlog_sb_pick(const uint8_t *base, size_t map_len, struct nvlog_sb *out, int *slot)
{
	struct nvlog_sb s[2];
	int ok[2];

	if (map_len < NVLOG_MIN_SIZE)
		return -EUCLEAN;
	memcpy(&s[0], base + NVLOG_SB_SLOT_OFF0, sizeof(s[0]));
	memcpy(&s[1], base + NVLOG_SB_SLOT_OFF1, sizeof(s[1]));
	ok[0] = nvlog_sb_check(&s[0], map_len) == 0;
	ok[1] = nvlog_sb_check(&s[1], map_len) == 0;
	if (!ok[0] && !ok[1])
		return -EUCLEAN;
	int i = (ok[0] && ok[1]) ? (s[1].seq > s[0].seq) : ok[1];
	*out = s[i];
	if (slot)
		*slot = i;
	return 0;
}

/* nvlog_rec_crc -- the CRC of a record (section 3); payload NULL for a pad. */
uint32_t nvlog_rec_crc(uint64_t salt, const struct nvlog_rec_hdr *h, const void *payload)
{
	uint32_t c = crc32c(0, &salt, sizeof(salt));
	c = crc32c(c, (const uint8_t *)h + 4, NVLOG_HDR_SIZE - 4);
	if (payload && h->type != NVLOG_TYPE_PAD)
		c = crc32c(c, payload, h->len);
	return c;
}

/*
 * nvlog_next_pos -- where a record of rec_size bytes goes when the head is at
 * pos (section 3: implicit wrap, or a pad to the end of the area). Sets
 * *rec_pos and returns the head position after the record.
 */
uint64_t nvlog_next_pos(uint64_t area_len, uint64_t pos, uint64_t rec_size, uint64_t *rec_pos)
{
	uint64_t rem = area_len - pos % area_len;
	if (rem < NVLOG_HDR_SIZE || rem < rec_size)
		pos += rem;
	*rec_pos = pos;
	return pos + rec_size;
}

/* the bounds/type/flags part of the rule: may this header be read further? */
static const char *nvlog_rec_shape(const struct nvlog_rec_hdr *h, uint64_t rem)
{
	if (h->type == 0 || (h->type > NVLOG_TYPE_USER_MAX && h->type != NVLOG_TYPE_PAD))
		return "type";
	if (h->flags != 0)
		return "flags";
	if (h->type == NVLOG_TYPE_PAD) {
		if ((uint64_t)h->len + NVLOG_HDR_SIZE != rem)
			return "pad length";
	} else if ((uint64_t)h->len + NVLOG_HDR_SIZE > rem) {
		return "length";
	}
	return NULL;
}

/*
 * nvlog_rec_valid -- section 5 for the record expected at pos (LSN n, epoch
 * at least e). Returns NULL when valid, else the name of the failed rule.
 * The header is judged from a copy, which *out receives (when not NULL):
 * what the caller goes on with is what was checked, even if the mapping
 * changes meanwhile (its length bounds every read of the payload).
 */
static const char *nvlog_rec_valid(const struct nvlog_view *v, const uint8_t *area,
    uint64_t pos, uint64_t n, uint32_t e, uint64_t limit, struct nvlog_rec_hdr *out)
{
	uint64_t L = v->sb.area_len, off = pos % L, rem = L - off;
	struct nvlog_rec_hdr h;
	const char *why;

	memcpy(&h, area + off, sizeof(h));
	if (out)
		*out = h;
	if ((why = nvlog_rec_shape(&h, rem)))
		return why;
	/* a pad fills the end of the area that a record did not fit in: at
	 * its start every record fits (a pad there would make the log full) */
	if (h.type == NVLOG_TYPE_PAD && off == 0)
		return "pad at the start";
	uint64_t size = h.type == NVLOG_TYPE_PAD ? rem : nvlog_rec_size(nvlog_align(v->sb.version), h.len);
	if (pos + size > limit)
		return "overlaps tail";
	if (h.lsn != n)
		return "lsn";
	if (h.dlsn >= h.lsn)
		return "dlsn";
	if (h.epoch < e || h.epoch > (uint32_t)v->sb.boot_epoch)
		return "epoch";
	if (h.crc != nvlog_rec_crc(v->sb.salt, &h, area + off + NVLOG_HDR_SIZE))
		return "crc";
	return NULL;
}

bool nvlog_pad_skip(const struct nvlog_view *v, uint64_t pos, uint64_t n, uint32_t e, uint64_t limit)
{
	const uint8_t *area = v->base + v->sb.area_off;
	uint64_t L = v->sb.area_len, off = pos % L, rem = L - off;

	return off != 0 && nvlog_rec_valid(v, area, pos, n, e, limit, NULL) &&
	    !nvlog_rec_valid(v, area, pos + rem, n, e, limit, NULL) &&
	    ((const struct nvlog_rec_hdr *)area)->type != NVLOG_TYPE_PAD;
}

/* true when the bytes at off are a CRC-valid record from an earlier lap */
static bool nvlog_rec_stale(const struct nvlog_view *v, const uint8_t *area, uint64_t off, uint64_t n)
{
	uint64_t rem = v->sb.area_len - off;
	struct nvlog_rec_hdr h;
	static const uint8_t zero[NVLOG_HDR_SIZE];

	if (memcmp(area + off, zero, NVLOG_HDR_SIZE) == 0)
		return true; /* never written */
	memcpy(&h, area + off, sizeof(h));
	return !nvlog_rec_shape(&h, rem) && h.lsn < n &&
	    h.crc == nvlog_rec_crc(v->sb.salt, &h, area + off + NVLOG_HDR_SIZE);
}

/*
 * nvlog_rec_proof -- does the record at off prove that LSN n had been durable
 * (section 6, CORRUPT)? Valid on its own, lsn > n, dlsn >= n.
 */
static bool nvlog_rec_proof(const struct nvlog_view *v, const uint8_t *area, uint64_t off, uint64_t n,
    uint64_t *budget)
{
	uint64_t rem = v->sb.area_len - off, lsn, dlsn;
	struct nvlog_rec_hdr h;

	/* cheap first look: this runs at every aligned position after a hole */
	memcpy(&lsn, area + off + offsetof(struct nvlog_rec_hdr, lsn), 8);
	memcpy(&dlsn, area + off + offsetof(struct nvlog_rec_hdr, dlsn), 8);
	if (lsn <= n || dlsn < n || dlsn >= lsn)
		return false;
	/* a live record cannot be further ahead of n than the area holds
	 * headers: this turns away nearly all payload bytes (random WRITE data
	 * passes the test above half the time) before any CRC is computed */
	if (lsn - n > v->sb.area_len / NVLOG_HDR_SIZE)
		return false;
	memcpy(&h, area + off, sizeof(h));
	if (h.type == NVLOG_TYPE_PAD)
		return false;
	if (nvlog_rec_shape(&h, rem) || h.epoch > (uint32_t)v->sb.boot_epoch)
		return false;
	/* a file made to pass the tests above at every position would have
	 * the rest of the area hashed at each: bounded (nvlog_walk) */
	if ((uint64_t)h.len + NVLOG_HDR_SIZE > *budget) {
		*budget = 0;
		return false;
	}
	*budget -= (uint64_t)h.len + NVLOG_HDR_SIZE;
	return h.crc == nvlog_rec_crc(v->sb.salt, &h, area + off + NVLOG_HDR_SIZE);
}

/*
 * nvlog_walk -- the recovery scan of section 6 over a mapped log: hand every
 * valid caller record from the tail, in LSN order, to cb (may be NULL), up to
 * LSN max_lsn, then classify the end into *out. Never reads outside the area.
 * Returns 0, or the first non-zero value cb returned (the walk stops there).
 */
int nvlog_walk(const struct nvlog_view *v, uint64_t max_lsn,
    int (*cb)(void *arg, const struct nvlog_walk_rec *r), void *arg,
    struct nvlog_walk_end *out)
{
	const uint8_t *area = v->base + v->sb.area_off;
	uint64_t L = v->sb.area_len, align = nvlog_align(v->sb.version);
	uint64_t pos = v->sb.tail_pos, n = v->sb.tail_lsn, limit = pos + L;
	uint32_t e = v->sb.version == NVLOG_VERSION_V1 ? 0 : v->sb.tail_epoch;
	const char *why = NULL;

	memset(out, 0, sizeof(*out));
	out->end = NVLOG_END_CLEAN;
	out->last_lsn = n - 1;
	for (;;) {
		if (n > max_lsn || pos >= limit)
			break;
		uint64_t off = pos % L, rem = L - off;
		if (rem < NVLOG_HDR_SIZE) {
			pos += rem; /* implicit wrap */
			continue;
		}
		struct nvlog_rec_hdr hc;
		why = nvlog_rec_valid(v, area, pos, n, e, limit, &hc);
		if (why && nvlog_pad_skip(v, pos, n, e, limit)) {
			/* a damaged pad: record n is whole at the start of the area,
			 * where only a wrap can have put it (section 5) */
			pos += rem;
			why = nvlog_rec_valid(v, area, pos, n, e, limit, &hc);
		}
		if (why)
			break;
		off = pos % L;
		rem = L - off;
		const struct nvlog_rec_hdr *h = &hc;	/* as checked */
		e = h->epoch;
		if (h->type == NVLOG_TYPE_PAD) {
			pos += rem;
			continue;
		}
		if (cb) {
			struct nvlog_walk_rec r = {
				.hdr = h, .payload = area + off + NVLOG_HDR_SIZE, .pos = pos, .off = off,
			};
			int rc = cb(arg, &r);
			if (rc) {
				out->head_pos = pos;
				return rc;
			}
		}
		out->records++;
		out->bytes += h->len;
		out->last_lsn = n;
		out->last_epoch = h->epoch;
		pos += nvlog_rec_size(align, h->len);
		n++;
	}
	out->head_pos = pos;
	if (!why)
		return 0;

	uint64_t bad_off = pos % L;
	if (nvlog_rec_stale(v, area, bad_off, n))
		return 0;
	out->end = NVLOG_END_TORN;
	out->bad_lsn = n;
	out->bad_off = bad_off;
	out->why = why;
	/* look for proof that record n had been durable (section 6). The
	 * records of a real log are hashed once each, at most the area; more
	 * than four areas' worth of candidates is a made file: it stays TORN */
	uint64_t budget = 4 * L;
	for (uint64_t q = pos + align; q < limit && budget; q += align) {
		uint64_t off = q % L;
		if (L - off < NVLOG_HDR_SIZE)
			continue;
		if (nvlog_rec_proof(v, area, off, n, &budget)) {
			out->end = NVLOG_END_CORRUPT;
			out->proof_lsn = ((const struct nvlog_rec_hdr *)(area + off))->lsn;
			out->proof_off = off;
			break;
		}
	}
	return 0;
}
