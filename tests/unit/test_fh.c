/*
 * test_fh.c -- one test per rule of the file handle format (nfsd/fh.h).
 *
 * The rules: fh_init creates STATE_DIR/fh.key (32 bytes, 0600) and reuses it;
 * fh_make/fh_parse round-trip every field; fh_parse refuses (-EBADMSG) any
 * handle that is altered in any bit, truncated, extended, of another version,
 * with non-zero reserved bytes, with a kernel length that disagrees with the
 * total length, longer than 64 bytes, or minted under another key; fh_of gives
 * a kernel handle that open_by_handle_at opens again.
 *
 * The structural rules are each tested twice: on a tampered handle (which the
 * MAC alone would refuse) and on a handle forged with the right key (read from
 * fh.key, so its MAC verifies), which shows that the structural check itself
 * refuses it.
 */
#include "nfsd/fh.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

static char dir_a[64], dir_b[64], scratch[64];

static void rm_rf(const char *d)
{
	char cmd[128];

	if (!d[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir_a, sizeof(dir_a), "/tmp/presto-fh-a-XXXXXX");
	snprintf(dir_b, sizeof(dir_b), "/tmp/presto-fh-b-XXXXXX");
	snprintf(scratch, sizeof(scratch), "/tmp/presto-fh-s-XXXXXX");
	if (!mkdtemp(dir_a) || !mkdtemp(dir_b) || !mkdtemp(scratch))
		return -1;
	if (sodium_init() < 0)
		return -1;
	return fh_init(dir_a) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	rm_rf(dir_a);
	rm_rf(dir_b);
	rm_rf(scratch);
	return 0;
}

/* use_key -- make DIR's key the current one (every test leaves dir_a's). */
static void use_key(const char *dir)
{
	assert_int_equal(fh_init(dir), 0);
}

static void read_key(const char *dir, uint8_t key[32])
{
	char p[128];
	snprintf(p, sizeof(p), "%s/fh.key", dir);
	int fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, key, 32), 32);
	close(fd);
}

/* sample -- a kernel handle of LEN bytes with recognisable contents. */
static struct fh_kernel sample(unsigned len, int type)
{
	struct fh_kernel kh;
	memset(&kh, 0, sizeof(kh));
	kh.type = type;
	kh.len = len;
	for (unsigned i = 0; i < len; i++)
		kh.bytes[i] = (uint8_t)(0xa5 ^ (i * 37));
	return kh;
}

static int parse(const uint8_t *d, size_t len)
{
	uint32_t id;
	struct fh_kernel kh;
	return fh_parse(d, len, &id, &kh);
}

/* forge -- a handle with the given header fields and total length TOTAL
 * whose MAC (over 12 + L bytes, L = kl_mac) is correct under dir_a's key. */
static size_t forge(uint8_t *out, size_t cap, uint8_t version, uint8_t kl, uint8_t r2, uint8_t r3,
		    unsigned kl_mac, size_t total)
{
	uint8_t key[32];

	read_key(dir_a, key);
	assert_true(total <= cap && FH_HDR + kl_mac + FH_MAC <= cap);
	memset(out, 0, cap);
	out[0] = version;
	out[1] = kl;
	out[2] = r2;
	out[3] = r3;
	out[4] = 0x12; out[5] = 0x34; out[6] = 0x56; out[7] = 0x78;
	out[11] = 1;
	for (unsigned i = 0; i < kl_mac; i++)
		out[FH_HDR + i] = (uint8_t)i;
	crypto_generichash(out + FH_HDR + kl_mac, FH_MAC, out, FH_HDR + kl_mac, key, sizeof(key));
	return total;
}

/* ---- fh_init ---- */

static void test_init_creates_key_0600(void **state)
{
	char p[128];
	struct stat st;
	(void)state;

	snprintf(p, sizeof(p), "%s/fh.key", dir_a);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, 32);
}

static void test_init_reuses_key(void **state)
{
	uint8_t k1[32], k2[32];
	struct fh h;
	struct fh_kernel kh = sample(8, 1);
	(void)state;

	read_key(dir_a, k1);
	assert_int_equal(fh_make(7, &kh, &h), 0);
	use_key(dir_a);		/* a restart: the key is read back, not rewritten */
	read_key(dir_a, k2);
	assert_memory_equal(k1, k2, 32);
	assert_int_equal(parse(h.data, h.len), 0);
}

static void test_init_two_dirs_two_keys(void **state)
{
	uint8_t ka[32], kb[32];
	(void)state;

	use_key(dir_b);
	read_key(dir_a, ka);
	read_key(dir_b, kb);
	assert_memory_not_equal(ka, kb, 32);
	use_key(dir_a);
}

static void test_init_short_key_refused(void **state)
{
	char d[128], p[160];
	(void)state;

	snprintf(d, sizeof(d), "%s/short", scratch);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(p, sizeof(p), "%s/fh.key", d);
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "12345", 5), 5);
	close(fd);
	assert_int_equal(fh_init(d), -EIO);
	/* the short key was not replaced */
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 5);
	use_key(dir_a);
}

static void test_init_key_made_private(void **state)
{
	/* whoever reads the key forges handles: a key others may read is made
	 * 0600 (and kept: changing it would make every handle stale) */
	char p[128];
	uint8_t k1[32], k2[32];
	struct stat st;
	(void)state;

	snprintf(p, sizeof(p), "%s/fh.key", dir_a);
	read_key(dir_a, k1);
	/* any bit for group or others, each on its own */
	static const mode_t modes[] = { 0644, 0604, 0640, 0620, 0602, 0610, 0601, 0700 | 077 };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		assert_int_equal(chmod(p, modes[i]), 0);
		use_key(dir_a);
		assert_int_equal(stat(p, &st), 0);
		if ((st.st_mode & 07777) != 0600)
			fail_msg("a key of mode %04o was left %04o", (unsigned)modes[i],
				 (unsigned)(st.st_mode & 07777));
		read_key(dir_a, k2);
		assert_memory_equal(k1, k2, 32);
	}
	/* a key another user owns (mode 0600: he reads it) is made root's */
	if (geteuid() == 0) {
		assert_int_equal(chown(p, 4321, 4321), 0);
		use_key(dir_a);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_uid, 0);
		assert_int_equal(st.st_gid, 0);
		assert_int_equal(st.st_mode & 07777, 0600);
		read_key(dir_a, k2);
		assert_memory_equal(k1, k2, 32);
	}
}

static void test_init_missing_dir(void **state)
{
	char d[128];
	(void)state;

	snprintf(d, sizeof(d), "%s/does/not/exist", scratch);
	assert_int_equal(fh_init(d), -ENOENT);
	use_key(dir_a);
}

/* ---- fh_make / fh_parse ---- */

static void test_round_trip(void **state)
{
	static const uint32_t ids[] = { 0, 1, 0x12345678, 0xffffffffu };
	static const int types[] = { 0, 1, 0x81, -1, 0x7fffffff };
	(void)state;

	for (unsigned l = 0; l <= FH_KH_MAX; l++)
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
			for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
				struct fh_kernel kh = sample(l, types[t]), out;
				struct fh h;
				uint32_t id = 0;
				assert_int_equal(fh_make(ids[i], &kh, &h), 0);
				assert_int_equal(h.len, FH_HDR + l + FH_MAC);
				assert_true(h.len <= FH_MAX);
				assert_int_equal(h.data[0], FH_VERSION);
				assert_int_equal(h.data[1], l);
				assert_int_equal(h.data[2], 0);
				assert_int_equal(h.data[3], 0);
				memset(&out, 0xee, sizeof(out));
				assert_int_equal(fh_parse(h.data, h.len, &id, &out), 0);
				assert_int_equal(id, ids[i]);
				assert_int_equal(out.type, types[t]);
				assert_int_equal(out.len, l);
				if (l)
					assert_memory_equal(out.bytes, kh.bytes, l);
			}
}

static void test_layout_big_endian(void **state)
{
	struct fh_kernel kh = sample(4, 0x01020304);
	struct fh h;
	(void)state;

	assert_int_equal(fh_make(0xa1b2c3d4, &kh, &h), 0);
	static const uint8_t want[12] = { 1, 4, 0, 0, 0xa1, 0xb2, 0xc3, 0xd4, 1, 2, 3, 4 };
	assert_memory_equal(h.data, want, 12);
	assert_memory_equal(h.data + 12, kh.bytes, 4);
}

static void test_deterministic(void **state)
{
	struct fh_kernel kh = sample(20, 1);
	struct fh h1, h2;
	(void)state;

	/* the same object gets the same handle every time (clients compare them) */
	assert_int_equal(fh_make(9, &kh, &h1), 0);
	assert_int_equal(fh_make(9, &kh, &h2), 0);
	assert_int_equal(h1.len, h2.len);
	assert_memory_equal(h1.data, h2.data, h1.len);
}

static void test_make_too_long(void **state)
{
	struct fh_kernel kh = sample(FH_KH_MAX, 1);
	struct fh h;
	(void)state;

	kh.len = FH_KH_MAX + 1;
	assert_int_equal(fh_make(1, &kh, &h), -EOVERFLOW);
	kh.len = 1000;
	assert_int_equal(fh_make(1, &kh, &h), -EOVERFLOW);
}

static void test_every_bit_flip_refused(void **state)
{
	static const unsigned lens[] = { 0, 1, 8, 12, 20, FH_KH_MAX };
	(void)state;

	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		struct fh_kernel kh = sample(lens[li], 1);
		struct fh h;
		assert_int_equal(fh_make(0xdeadbeef, &kh, &h), 0);
		for (unsigned bit = 0; bit < h.len * 8u; bit++) {
			uint8_t d[FH_MAX];
			memcpy(d, h.data, h.len);
			d[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			if (parse(d, h.len) != -EBADMSG)
				fail_msg("L=%u: flipping bit %u (byte %u) was accepted", lens[li], bit,
					 bit / 8);
		}
		assert_int_equal(parse(h.data, h.len), 0);
	}
}

static void test_truncated_refused(void **state)
{
	struct fh_kernel kh = sample(FH_KH_MAX, 1);
	struct fh h;
	(void)state;

	assert_int_equal(fh_make(3, &kh, &h), 0);
	for (size_t n = 0; n < h.len; n++)
		if (parse(h.data, n) != -EBADMSG)
			fail_msg("a handle truncated to %zu bytes was accepted", n);
	kh = sample(0, 1);
	assert_int_equal(fh_make(3, &kh, &h), 0);
	for (size_t n = 0; n < h.len; n++)
		if (parse(h.data, n) != -EBADMSG)
			fail_msg("a handle (L=0) truncated to %zu bytes was accepted", n);
}

static void test_extended_refused(void **state)
{
	uint8_t d[256];
	(void)state;

	for (unsigned l = 0; l <= FH_KH_MAX; l += 4) {
		struct fh_kernel kh = sample(l, 1);
		struct fh h;
		assert_int_equal(fh_make(3, &kh, &h), 0);
		memset(d, 0, sizeof(d));
		memcpy(d, h.data, h.len);
		for (size_t n = h.len + 1; n <= sizeof(d); n++)
			if (parse(d, n) != -EBADMSG)
				fail_msg("L=%u: handle extended with zeros to %zu bytes accepted", l, n);
	}
}

static void test_wrong_version_refused(void **state)
{
	uint8_t d[FH_MAX];
	(void)state;

	for (unsigned v = 0; v < 256; v++) {
		size_t n = forge(d, sizeof(d), (uint8_t)v, 8, 0, 0, 8, FH_HDR + 8 + FH_MAC);
		if (v == FH_VERSION)
			assert_int_equal(parse(d, n), 0);	/* the forger is right */
		else if (parse(d, n) != -EBADMSG)
			fail_msg("version %u with a valid MAC was accepted", v);
	}
}

static void test_reserved_nonzero_refused(void **state)
{
	uint8_t d[FH_MAX];
	(void)state;

	for (unsigned v = 1; v < 256; v++) {
		size_t n = forge(d, sizeof(d), FH_VERSION, 8, (uint8_t)v, 0, 8, FH_HDR + 8 + FH_MAC);
		if (parse(d, n) != -EBADMSG)
			fail_msg("reserved byte 2 = %u with a valid MAC was accepted", v);
		n = forge(d, sizeof(d), FH_VERSION, 8, 0, (uint8_t)v, 8, FH_HDR + 8 + FH_MAC);
		if (parse(d, n) != -EBADMSG)
			fail_msg("reserved byte 3 = %u with a valid MAC was accepted", v);
	}
}

static void test_kernel_length_inconsistent_refused(void **state)
{
	uint8_t d[FH_MAX];
	(void)state;

	/* MAC right for L = 8 bytes of kernel handle; byte 1 says otherwise */
	for (unsigned kl = 0; kl < 256; kl++) {
		if (kl == 8)
			continue;
		size_t n = forge(d, sizeof(d), FH_VERSION, (uint8_t)kl, 0, 0, 8, FH_HDR + 8 + FH_MAC);
		if (parse(d, n) != -EBADMSG)
			fail_msg("kernel length %u in a %zu-byte handle was accepted", kl, n);
	}
	/* byte 1 and the MAC agree (L = 8), the total length does not */
	for (size_t n = FH_HDR + FH_MAC; n <= FH_MAX; n++) {
		if (n == FH_HDR + 8 + FH_MAC)
			continue;
		forge(d, sizeof(d), FH_VERSION, 8, 0, 0, 8, FH_MAX);
		if (parse(d, n) != -EBADMSG)
			fail_msg("L=8 in a %zu-byte handle was accepted", n);
	}
}

static void test_over_64_bytes_refused(void **state)
{
	uint8_t d[128];
	(void)state;

	/* consistent in every other way (L = 37, total 65, valid MAC) */
	size_t n = forge(d, sizeof(d), FH_VERSION, FH_KH_MAX + 1, 0, 0, FH_KH_MAX + 1,
			 FH_HDR + FH_KH_MAX + 1 + FH_MAC);
	assert_int_equal(n, FH_MAX + 1);
	assert_int_equal(parse(d, n), -EBADMSG);
	n = forge(d, sizeof(d), FH_VERSION, 100, 0, 0, 100, FH_HDR + 100 + FH_MAC);
	assert_int_equal(parse(d, n), -EBADMSG);
	/* and the largest legal one passes */
	n = forge(d, sizeof(d), FH_VERSION, FH_KH_MAX, 0, 0, FH_KH_MAX, FH_MAX);
	assert_int_equal(parse(d, n), 0);
}

static void test_other_key_refused(void **state)
{
	struct fh_kernel kh = sample(12, 1);
	struct fh ha, hb;
	(void)state;

	assert_int_equal(fh_make(5, &kh, &ha), 0);
	use_key(dir_b);
	assert_int_equal(parse(ha.data, ha.len), -EBADMSG);
	assert_int_equal(fh_make(5, &kh, &hb), 0);
	assert_int_equal(parse(hb.data, hb.len), 0);
	assert_memory_not_equal(ha.data + FH_HDR + 12, hb.data + FH_HDR + 12, FH_MAC);
	use_key(dir_a);
	assert_int_equal(parse(ha.data, ha.len), 0);
	assert_int_equal(parse(hb.data, hb.len), -EBADMSG);
}

static void test_zero_handle_refused(void **state)
{
	uint8_t d[FH_MAX];
	(void)state;

	memset(d, 0, sizeof(d));
	for (size_t n = 0; n <= FH_MAX; n++)
		assert_int_equal(parse(d, n), -EBADMSG);
	/* right header, MAC all zeros */
	d[0] = FH_VERSION;
	assert_int_equal(parse(d, FH_HDR + FH_MAC), -EBADMSG);
}

/* ---- fh_of ---- */

/* reopen -- open_by_handle_at(mount_fd, kh) after a trip through fh_make/fh_parse */
static int reopen(int mount_fd, const struct fh_kernel *kh0, int flags)
{
	struct fh h;
	struct fh_kernel kh;
	uint32_t id;
	union {
		struct file_handle h;
		uint8_t raw[sizeof(struct file_handle) + FH_KH_MAX];
	} u;

	assert_int_equal(fh_make(42, kh0, &h), 0);
	assert_int_equal(fh_parse(h.data, h.len, &id, &kh), 0);
	assert_int_equal(id, 42);
	u.h.handle_bytes = kh.len;
	u.h.handle_type = kh.type;
	memcpy(u.h.f_handle, kh.bytes, kh.len);
	return open_by_handle_at(mount_fd, &u.h, flags);
}

static void same_inode(int fd, const char *path)
{
	struct stat a, b;
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(lstat(path, &b), 0);
	assert_int_equal(a.st_dev, b.st_dev);
	assert_int_equal(a.st_ino, b.st_ino);
}

/* mnt_id_of -- the mnt_id line of /proc/self/fdinfo/FD */
static int mnt_id_of(int fd)
{
	char p[64], line[256];
	int id = -1;
	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "mnt_id: %d", &id) == 1)
			break;
	fclose(f);
	return id;
}

static void test_fh_of_reopens(void **state)
{
	char d[128], file[160], sub[160], link[160];
	struct fh_kernel kh;
	int mid = -1;
	(void)state;

	snprintf(d, sizeof(d), "%s/tree", scratch);
	assert_int_equal(mkdir(d, 0755), 0);
	snprintf(file, sizeof(file), "%s/file", d);
	snprintf(sub, sizeof(sub), "%s/sub", d);
	snprintf(link, sizeof(link), "%s/link", d);
	int w = open(file, O_CREAT | O_WRONLY, 0644);
	assert_true(w >= 0);
	assert_int_equal(write(w, "hello", 5), 5);
	close(w);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(symlink("file", link), 0);

	int dfd = open(d, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);

	/* a regular file: reopened, same inode, same contents */
	assert_int_equal(fh_of(dfd, "file", &kh, &mid), 0);
	assert_true(kh.len > 0 && kh.len <= FH_KH_MAX);
	assert_int_equal(mid, mnt_id_of(dfd));
	int fd = reopen(dfd, &kh, O_RDONLY);
	assert_true(fd >= 0);
	same_inode(fd, file);
	char buf[8] = { 0 };
	assert_int_equal(read(fd, buf, sizeof(buf)), 5);
	assert_string_equal(buf, "hello");
	close(fd);

	/* a directory by name, and dirfd itself with "" */
	assert_int_equal(fh_of(dfd, "sub", &kh, NULL), 0);
	fd = reopen(dfd, &kh, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	same_inode(fd, sub);
	close(fd);
	assert_int_equal(fh_of(dfd, "", &kh, &mid), 0);
	fd = reopen(dfd, &kh, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	same_inode(fd, d);
	close(fd);

	/* a symlink: the handle names the link, not its target */
	assert_int_equal(fh_of(dfd, "link", &kh, NULL), 0);
	fd = reopen(dfd, &kh, O_PATH | O_NOFOLLOW);
	assert_true(fd >= 0);
	same_inode(fd, link);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	close(fd);

	/* a missing name */
	assert_int_equal(fh_of(dfd, "nothing", &kh, NULL), -ENOENT);

	/* a removed file's handle goes stale */
	assert_int_equal(fh_of(dfd, "file", &kh, NULL), 0);
	assert_int_equal(unlink(file), 0);
	fd = reopen(dfd, &kh, O_RDONLY);
	assert_int_equal(fd, -1);
	assert_int_equal(errno, ESTALE);

	close(dfd);
}

static void test_kernel_ino(void **state)
{
	char d[128];
	struct fh_kernel kh;
	struct statfs sfs;
	struct stat st;
	uint64_t ino;
	(void)state;

	/* the one layout known: type 1 (FILEID_INO32_GEN), 8 bytes */
	memset(&kh, 0, sizeof(kh));
	kh.type = 1;
	kh.len = 8;
	uint32_t v[2] = { 123456789u, 7u };
	memcpy(kh.bytes, v, sizeof(v));
	assert_true(fh_kernel_ino(&kh, &ino));
	assert_int_equal(ino, 123456789u);
	kh.len = 12;		/* tmpfs: type 1, 12 bytes, generation first */
	assert_false(fh_kernel_ino(&kh, &ino));
	kh.len = 16;
	kh.type = 2;		/* with the parent: never asked for */
	assert_false(fh_kernel_ino(&kh, &ino));
	kh.type = 0x81;		/* XFS's 64-bit layout, and any other */
	kh.len = 8;
	assert_false(fh_kernel_ino(&kh, &ino));

	/* on the real filesystems: a file, a directory and a symlink of the
	 * scratch tree, and of /dev/shm: whenever a number is read, it is
	 * the object's; on ext4 it is read */
	const char *roots[] = { scratch, "/dev/shm" };
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		snprintf(d, sizeof(d), "%s/ino-XXXXXX", roots[i]);
		if (!mkdtemp(d))
			fail_msg("mkdtemp %s: %s", d, strerror(errno));
		int dfd = open(d, O_RDONLY | O_DIRECTORY);
		assert_true(dfd >= 0);
		assert_int_equal(fstatfs(dfd, &sfs), 0);
		int w = openat(dfd, "f", O_CREAT | O_WRONLY, 0644);
		assert_true(w >= 0);
		close(w);
		assert_int_equal(mkdirat(dfd, "s", 0755), 0);
		assert_int_equal(symlinkat("f", dfd, "l"), 0);
		int known = 0;
		for (const char *n = "fsl"; *n; n++) {
			char name[2] = { *n, 0 };
			assert_int_equal(fh_of(dfd, name, &kh, NULL), 0);
			assert_int_equal(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
			if (fh_kernel_ino(&kh, &ino)) {
				assert_int_equal(ino, st.st_ino);
				known++;
			}
		}
		if (sfs.f_type == EXT4_SUPER_MAGIC)
			assert_int_equal(known, 3);
		if (sfs.f_type == TMPFS_MAGIC)
			assert_int_equal(known, 0);
		for (const char *n = "fl"; *n; n++) {
			char name[2] = { *n, 0 };
			assert_int_equal(unlinkat(dfd, name, 0), 0);
		}
		assert_int_equal(unlinkat(dfd, "s", AT_REMOVEDIR), 0);
		close(dfd);
		assert_int_equal(rmdir(d), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_creates_key_0600),
		cmocka_unit_test(test_init_reuses_key),
		cmocka_unit_test(test_init_two_dirs_two_keys),
		cmocka_unit_test(test_init_short_key_refused),
		cmocka_unit_test(test_init_key_made_private),
		cmocka_unit_test(test_init_missing_dir),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_layout_big_endian),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_make_too_long),
		cmocka_unit_test(test_every_bit_flip_refused),
		cmocka_unit_test(test_truncated_refused),
		cmocka_unit_test(test_extended_refused),
		cmocka_unit_test(test_wrong_version_refused),
		cmocka_unit_test(test_reserved_nonzero_refused),
		cmocka_unit_test(test_kernel_length_inconsistent_refused),
		cmocka_unit_test(test_over_64_bytes_refused),
		cmocka_unit_test(test_other_key_refused),
		cmocka_unit_test(test_zero_handle_refused),
		cmocka_unit_test(test_fh_of_reopens),
		cmocka_unit_test(test_kernel_ino),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
