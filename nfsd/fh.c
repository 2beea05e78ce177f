/*
 * fh.c -- NFS file handles (format in fh.h).
 */
#include "nfsd/fh.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfsd/log.h"

static uint8_t fh_key[crypto_generichash_KEYBYTES];

uint64_t fh_kernel_hash(uint32_t export_id, const struct fh_kernel *kh)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = (h ^ export_id) * 0x100000001b3ull;
	h = (h ^ (uint32_t)kh->type) * 0x100000001b3ull;
	for (unsigned i = 0; i < kh->len; i++)
		h = (h ^ kh->bytes[i]) * 0x100000001b3ull;
	return h;
}

int fh_init(const char *state_dir)
{
	char path[4096], tmp[4200];
	int fd, rc;
	ssize_t n;

	if (sodium_init() < 0)
		return -EIO;
	snprintf(path, sizeof(path), "%s/fh.key", state_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		struct stat st;
		/* whoever reads the key can forge a handle of any object on an
		 * exported filesystem: the key is root's alone */
		if (fstat(fd, &st) == 0 && (st.st_uid != 0 || (st.st_mode & 077))) {
			log_warnx("%s: owner %u, mode %03o: made root's and 0600 (others may have "
				  "read it; to change the key, remove it: every handle goes stale)",
				  path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
			if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0600) < 0) {
				rc = -errno;
				close(fd);
				return rc;
			}
		}
		n = read(fd, fh_key, sizeof(fh_key));
		close(fd);
		if (n != (ssize_t)sizeof(fh_key)) {
			log_warnx("%s: short or unreadable handle key; refusing to mint handles", path);
			return -EIO;
		}
		return 0;
	}
	if (errno != ENOENT)
		return -errno;
	/* A new key: written and synced under a temporary name, then linked in
	 * (link fails if another server got there first: use its key) and the
	 * directory synced, so that a power cut never leaves a short key nor
	 * loses one that minted handles. */
	randombytes_buf(fh_key, sizeof(fh_key));
	snprintf(tmp, sizeof(tmp), "%s/fh.key.%d", state_dir, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, fh_key, sizeof(fh_key));
	if (n != (ssize_t)sizeof(fh_key) || fsync(fd) < 0) {
		rc = n < 0 ? -errno : -EIO;
		close(fd);
		unlink(tmp);
		return rc;
	}
	close(fd);
	rc = link(tmp, path) < 0 ? -errno : 0;
	unlink(tmp);
	if (rc == -EEXIST)
		return fh_init(state_dir);
	if (rc < 0)
		return rc;
	fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void fh_mac(const uint8_t *p, size_t n, uint8_t out[FH_MAC])
{
	crypto_generichash(out, FH_MAC, p, n, fh_key, sizeof(fh_key));
}

int fh_make(uint32_t export_id, const struct fh_kernel *kh, struct fh *out)
{
	if (kh->len > FH_KH_MAX)
		return -EOVERFLOW;
	memset(out, 0, sizeof(*out));
	out->data[0] = FH_VERSION;
	out->data[1] = (uint8_t)kh->len;
	put32(out->data + 4, export_id);
	put32(out->data + 8, (uint32_t)kh->type);
	memcpy(out->data + FH_HDR, kh->bytes, kh->len);
	fh_mac(out->data, FH_HDR + kh->len, out->data + FH_HDR + kh->len);
	out->len = (uint8_t)(FH_HDR + kh->len + FH_MAC);
	return 0;
}

int fh_mac_of(uint32_t export_id, const struct fh_kernel *kh, uint8_t mac[FH_MAC])
{
	struct fh f;
	int rc = fh_make(export_id, kh, &f);

	if (rc == 0)
		memcpy(mac, f.data + FH_HDR + kh->len, FH_MAC);
	return rc;
}

bool fh_mac_ok(uint32_t export_id, const struct fh_kernel *kh, const uint8_t mac[FH_MAC])
{
	uint8_t want[FH_MAC];

	return fh_mac_of(export_id, kh, want) == 0 && sodium_memcmp(want, mac, FH_MAC) == 0;
}

int fh_parse(const uint8_t *data, size_t len, uint32_t *export_id, struct fh_kernel *kh)
{
	uint8_t mac[FH_MAC];

	if (len < FH_HDR + FH_MAC || len > FH_MAX || data[0] != FH_VERSION)
		return -EBADMSG;
	size_t kl = data[1];
	if (kl > FH_KH_MAX || len != FH_HDR + kl + FH_MAC || data[2] || data[3])
		return -EBADMSG;
	fh_mac(data, FH_HDR + kl, mac);
	if (sodium_memcmp(mac, data + FH_HDR + kl, FH_MAC) != 0)
		return -EBADMSG;
	*export_id = get32(data + 4);
	kh->type = (int)get32(data + 8);
	kh->len = (unsigned)kl;
	memcpy(kh->bytes, data + FH_HDR, kl);
	return 0;
}

int fh_of(int dirfd, const char *name, struct fh_kernel *kh, int *mount_id)
{
	union {
		struct file_handle h;
		uint8_t raw[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} u;
	int mid;

	u.h.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(dirfd, name, &u.h, &mid, name[0] ? 0 : AT_EMPTY_PATH) < 0)
		return -errno;
	if (u.h.handle_bytes > FH_KH_MAX)
		return -EOVERFLOW;
	kh->type = u.h.handle_type;
	kh->len = u.h.handle_bytes;
	memcpy(kh->bytes, u.h.f_handle, u.h.handle_bytes);
	if (mount_id)
		*mount_id = mid;
	return 0;
}

bool fh_kernel_ino(const struct fh_kernel *kh, uint64_t *ino)
{
	uint32_t v;

	/* include/linux/exportfs.h: FILEID_INO32_GEN = 1 */
	if (kh->type != 1 || kh->len != 8)
		return false;
	memcpy(&v, kh->bytes, sizeof(v));
	*ino = v;
	return true;
}
