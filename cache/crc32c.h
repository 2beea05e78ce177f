/*
 * crc32c.h -- CRC-32C (Castagnoli), with the SSE4.2 instruction where the CPU
 * has it and a table otherwise.
 */
#ifndef PRESTO_CRC32C_H
#define PRESTO_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * crc32c -- extend crc (0 to start) with n bytes of buf; zlib's convention,
 * so crc32c(crc32c(0, a), b) == crc32c(0, a followed by b).
 * Returns the new CRC; crc32c(0, "123456789", 9) == 0xe3069283.
 */
uint32_t crc32c(uint32_t crc, const void *buf, size_t n);

/* crc32c_sw -- the same, always by table (for tests). */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t n);

/* crc32c_hw_available -- true when crc32c() uses the CPU instruction. */
bool crc32c_hw_available(void);

#endif
