/*
 * export_table.c -- the exports in force (see export_table.h).
 */
#include "nfsd/export_table.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t xt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xtab *xt_current;

static void xtab_free(struct xtab *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n; i++)
		if (x->v[i].root_fd >= 0)
			close(x->v[i].root_fd);
	free(x->v);
	exports_free(x->exp);
	free(x);
}

/* probe_maxfilesize -- the largest size a file may have on the filesystem
 * of the directory dirfd (the kernel's s_maxbytes, which no system call
 * reports): a binary search with ftruncate on an unnamed temporary file,
 * which allocates nothing. LLONG_MAX when it cannot be probed (read-only,
 * no O_TMPFILE). Under an RLIMIT_FSIZE the process's own limit is found
 * (SIGXFSZ is ignored: main), which is what the server can write. */
static uint64_t probe_maxfilesize(int dirfd)
{
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	uint64_t lo = 0, hi = (uint64_t)LLONG_MAX;

	if (fd < 0)
		return hi;
	if (ftruncate(fd, (off_t)hi) == 0) {
		close(fd);
		return hi;
	}
	while (lo < hi) {		/* lo fits, hi + 1 does not */
		uint64_t mid = lo + (hi - lo + 1) / 2;
		if (ftruncate(fd, (off_t)mid) == 0)
			lo = mid;
		else if (errno == EFBIG || errno == EINVAL)
			hi = mid - 1;
		else {
			lo = (uint64_t)LLONG_MAX;	/* cannot tell */
			break;
		}
	}
	close(fd);
	return lo;
}

int xtab_load(const char *path, struct xtab **out, char *err, size_t errlen)
{
	struct xtab *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	x->refs = 1;
	rc = exports_parse_file(path, &x->exp, err, errlen);
	if (rc < 0) {
		free(x);
		return rc;
	}
	x->v = calloc(x->exp->n ? x->exp->n : 1, sizeof(*x->v));
	if (!x->v) {
		xtab_free(x);
		return -ENOMEM;
	}
	for (size_t i = 0; i < x->exp->n; i++) {
		struct xexport *xe = &x->v[i];
		struct fh_kernel kh;
		struct stat st;

		xe->e = &x->exp->v[i];
		/* not O_PATH: open_by_handle_at refuses an O_PATH mount_fd */
		xe->root_fd = open(xe->e->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		x->n = i + 1;
		if (xe->root_fd < 0 || fstat(xe->root_fd, &st) < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s:%u: export %s: %s", path, xe->e->line, xe->e->path,
				 strerror(errno));
			goto fail;
		}
		xe->dev = st.st_dev;
		xe->ino = st.st_ino;
		xe->maxfilesize = probe_maxfilesize(xe->root_fd);
		rc = fh_of(xe->root_fd, "", &kh, &xe->mount_id);
		if (rc == 0)
			rc = fh_make(xe->e->id, &kh, &xe->root_fh);
		if (rc < 0) {
			snprintf(err, errlen,
				 "%s:%u: export %s: its filesystem gives no usable file handles: %s",
				 path, xe->e->line, xe->e->path, strerror(-rc));
			goto fail;
		}
	}
	*out = x;
	return 0;
fail:
	xtab_free(x);
	return rc;
}

void xtab_install(struct xtab *x)
{
	pthread_mutex_lock(&xt_lock);
	struct xtab *old = xt_current;
	xt_current = x;
	pthread_mutex_unlock(&xt_lock);
	if (old)
		xtab_put(old);
}

struct xtab *xtab_get(void)
{
	pthread_mutex_lock(&xt_lock);
	struct xtab *x = xt_current;
	if (x)
		__atomic_add_fetch(&x->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&xt_lock);
	return x;
}

void xtab_put(struct xtab *x)
{
	if (x && __atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL) == 0)
		xtab_free(x);
}

const struct xexport *xtab_by_id(const struct xtab *x, uint32_t id)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->v[i].e->id == id)
			return &x->v[i];
	return NULL;
}

const struct xexport *xtab_by_path(const struct xtab *x, const char *path)
{
	const struct export *e = exports_find_path(x->exp, path);

	return e ? xtab_by_id(x, e->id) : NULL;
}

bool xexport_writable(const struct xexport *xe)
{
	for (size_t i = 0; i < xe->e->nclients; i++)
		if (xe->e->clients[i].opts.rw)
			return true;
	return false;
}
