/*
 * crc32c.c -- CRC-32C (Castagnoli, reflected polynomial 0x82f63b78).
 *
 * crc32c() is ISA-L's crc32_iscsi (Debian's libisal), which picks the
 * fastest code the CPU allows at run time (PCLMULQDQ folding, AVX-512):
 * about 60 ns for a 4 KiB record here, 3.5x the SSE4.2 crc32 instruction in
 * three interleaved streams that this file used to hand-write. ISA-L's
 * function neither inverts the register on entry nor on exit; zlib's
 * convention, which the log format states, is ~f(buf, ~crc).
 *
 * crc32c_sw() is the byte-at-a-time table version: the reference the unit
 * tests hold the fast one to.
 */
#include "cache/crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>

#define CRC32C_POLY 0x82f63b78u

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
	unsigned char *p = (unsigned char *)buf;	/* ISA-L's prototype lacks const */
	uint32_t c = ~crc;

	while (n > 0) {
		int k = n > (size_t)INT_MAX ? INT_MAX & ~7 : (int)n;
		c = crc32_iscsi(p, k, c);
		p += k;
		n -= (size_t)k;
	}
	return ~c;
}

static uint32_t crc32c_table[256];
static int crc32c_table_ready;	/* atomic */

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	if (!__atomic_load_n(&crc32c_table_ready, __ATOMIC_ACQUIRE)) {
		/* racing initialisers write the same values */
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
			crc32c_table[i] = c;
		}
		__atomic_store_n(&crc32c_table_ready, 1, __ATOMIC_RELEASE);
	}
	crc = ~crc;
	while (n--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
