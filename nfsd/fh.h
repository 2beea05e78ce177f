/*
 * fh.h -- NFS file handles of presto-nfsd.
 *
 * Format (version 1), at most NFS3_FHSIZE (64) bytes, all integers big-endian:
 *
 *   offset  size  field
 *   0       1     version (1)
 *   1       1     L: length of the kernel handle (at most FH_KH_MAX = 36)
 *   2       2     reserved, zero
 *   4       4     export id (fsid= of the export, or a hash of its path)
 *   8       4     kernel handle type (struct file_handle.handle_type)
 *   12      L     kernel handle bytes (name_to_handle_at on the backing fs)
 *   12+L    16    MAC: keyed BLAKE2b (libsodium crypto_generichash) of bytes
 *                 0 .. 12+L-1 under the appliance's secret
 *
 * The kernel handle makes the NFS handle stable across restarts (it names
 * the inode and its generation on the backing filesystem); the MAC makes it
 * unforgeable: a handle not minted by this appliance, or altered in any
 * byte, is refused (NFS3ERR_BADHANDLE) before it reaches open_by_handle_at.
 * The secret is 32 random bytes in STATE_DIR/fh.key, created 0600 at first
 * start and never rewritten.
 */
#ifndef PRESTO_FH_H
#define PRESTO_FH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_VERSION 1
#define FH_HDR 12
#define FH_MAC 16
#define FH_MAX 64
#define FH_KH_MAX (FH_MAX - FH_HDR - FH_MAC)

struct fh {
	uint8_t len;
	uint8_t data[FH_MAX];
};

/* fh_kernel -- a kernel handle (the parts of struct file_handle we keep). */
struct fh_kernel {
	int type;
	unsigned len;
	uint8_t bytes[FH_KH_MAX];
};

/* fh_kernel_hash -- a hash (64-bit FNV-1a) of kh in export export_id, for
 * tables keyed by both: not a MAC */
uint64_t fh_kernel_hash(uint32_t export_id, const struct fh_kernel *kh);
/* fh_init -- load the secret from STATE_DIR/fh.key, creating it (0600) if
 * absent. Returns 0 or -errno. */
int fh_init(const char *state_dir);
/* fh_make -- mint the handle of kernel handle kh in export export_id.
 * Returns 0, or -EOVERFLOW when kh is too long for an NFSv3 handle. */
int fh_make(uint32_t export_id, const struct fh_kernel *kh, struct fh *out);
/* fh_parse -- check data (len bytes) and return its export id and kernel
 * handle. Returns 0, or -EBADMSG for a handle that is malformed or whose MAC
 * does not verify. */
int fh_parse(const uint8_t *data, size_t len, uint32_t *export_id, struct fh_kernel *kh);
/* fh_mac_of -- the MAC the handle of kh in export export_id carries (as
 * fh_make mints it). Returns 0, or -EOVERFLOW as fh_make. */
int fh_mac_of(uint32_t export_id, const struct fh_kernel *kh, uint8_t mac[FH_MAC]);
/* fh_mac_ok -- whether mac is that MAC (compared in constant time). */
bool fh_mac_ok(uint32_t export_id, const struct fh_kernel *kh, const uint8_t mac[FH_MAC]);
/* fh_of_fd -- the kernel handle of the object at (dirfd, name) without
 * following a final symlink; name "" means dirfd itself. Returns 0 or -errno. */
int fh_of(int dirfd, const char *name, struct fh_kernel *kh, int *mount_id);
/* fh_kernel_ino -- the inode number kh names, for the one layout known
 * here: FILEID_INO32_GEN (type 1) of 8 bytes, a 32-bit inode number and its
 * generation in the CPU's byte order (Linux's generic_encode_ino32_fh: ext2,
 * ext3, ext4; XFS for 32-bit inode numbers). false for anything else (tmpfs
 * uses type 1 with 12 bytes in another order): the handle is opaque. */
bool fh_kernel_ino(const struct fh_kernel *kh, uint64_t *ino);

#endif
