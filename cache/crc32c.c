/*
 * crc32c.c -- CRC-32C (Castagnoli, reflected polynomial 0x82f63b78).
 *
 * The hardware path uses the SSE4.2 crc32 instruction eight bytes at a time.
 * The instruction has a latency of 3 cycles and a throughput of 1, so one
 * dependent stream runs at a third of its speed: long buffers are cut into
 * three blocks whose CRCs are computed in one interleaved loop and then
 * combined. Combining uses linearity: the CRC register after A followed by B
 * is shift(reg after A, |B|) xor (reg of B from zero), where shift(r, n), the
 * register after n zero bytes, is linear in r and so a 4 x 256 table for a
 * fixed n (built at init from 32 basis vectors). For the log's 64 KiB
 * records this is about 3x faster than one stream. The choice of path is
 * made once, from cpuid, on first use.
 */
#include "cache/crc32c.h"

#include <string.h>

#define CRC32C_POLY 0x82f63b78u

#define CRC32C_LONG 2048  /* block of the 3-way loop for long buffers */
#define CRC32C_SHORT 256  /* and for the rest */

static uint32_t crc32c_table[256];
static uint32_t crc32c_long[4][256], crc32c_short[4][256]; /* shift by a block */
static int crc32c_mode; /* 0: undecided, 1: table, 2: hardware */

/* crc32c_zeros -- the register r after n zero bytes (slow; init only). */
static uint32_t crc32c_zeros(uint32_t r, size_t n)
{
	while (n--)
		r = crc32c_table[r & 0xff] ^ (r >> 8);
	return r;
}

/* crc32c_shift_table -- t such that crc32c_shift(t, r) == crc32c_zeros(r, n) */
static void crc32c_shift_table(uint32_t t[4][256], size_t n)
{
	uint32_t basis[32];
	for (int i = 0; i < 32; i++)
		basis[i] = crc32c_zeros(1u << i, n);
	for (int k = 0; k < 4; k++) {
		for (uint32_t b = 0; b < 256; b++) {
			uint32_t v = 0;
			for (int bit = 0; bit < 8; bit++)
				if (b >> bit & 1)
					v ^= basis[8 * k + bit];
			t[k][b] = v;
		}
	}
}

static inline uint32_t crc32c_shift(const uint32_t t[4][256], uint32_t r)
{
	return t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ t[2][(r >> 16) & 0xff] ^ t[3][r >> 24];
}

/* crc32c_init -- fill the tables and pick the implementation (idempotent). */
static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc32c_table[i] = c;
	}
	crc32c_shift_table(crc32c_long, CRC32C_LONG);
	crc32c_shift_table(crc32c_short, CRC32C_SHORT);
	int mode = 1;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		mode = 2;
#endif
	__atomic_store_n(&crc32c_mode, mode, __ATOMIC_RELEASE);
}

static int crc32c_get_mode(void)
{
	int m = __atomic_load_n(&crc32c_mode, __ATOMIC_ACQUIRE);
	if (m == 0) {
		crc32c_init(); /* racing initialisers write the same values */
		m = __atomic_load_n(&crc32c_mode, __ATOMIC_ACQUIRE);
	}
	return m;
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	crc32c_get_mode();
	crc = ~crc;
	while (n--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
/* crc32c_hw3 -- consume 3 * blk bytes at a time as three interleaved streams */
__attribute__((target("sse4.2")))
static uint64_t crc32c_hw3(uint64_t c0, const uint8_t **pp, size_t *nn, size_t blk,
    const uint32_t t[4][256])
{
	const uint8_t *p = *pp;
	size_t n = *nn;
	while (n >= 3 * blk) {
		uint64_t c1 = 0, c2 = 0;
		const uint8_t *e = p + blk;
		do {
			uint64_t w0, w1, w2;
			memcpy(&w0, p, 8);
			memcpy(&w1, p + blk, 8);
			memcpy(&w2, p + 2 * blk, 8);
			c0 = __builtin_ia32_crc32di(c0, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
			p += 8;
		} while (p < e);
		c0 = crc32c_shift(t, (uint32_t)c0) ^ c1;
		c0 = crc32c_shift(t, (uint32_t)c0) ^ c2;
		p += 2 * blk;
		n -= 3 * blk;
	}
	*pp = p;
	*nn = n;
	return c0;
}

__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	c = crc32c_hw3(c, &p, &n, CRC32C_LONG, crc32c_long);
	c = crc32c_hw3(c, &p, &n, CRC32C_SHORT, crc32c_short);
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
#if defined(__x86_64__)
	if (crc32c_get_mode() == 2)
		return crc32c_hw(crc, buf, n);
#endif
	return crc32c_sw(crc, buf, n);
}

bool crc32c_hw_available(void)
{
	return crc32c_get_mode() == 2;
}
