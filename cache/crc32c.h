/*
 * crc32c.h -- CRC-32C (Castagnoli): ISA-L's crc32_iscsi, and a table version
 * for the tests.
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

#endif
