/*
 * mount3.c -- the MOUNT protocol (RFC 1813 appendix I; versions 1 and 2 of
 * RFC 1094 share DUMP, UMNT, UMNTALL and EXPORT).
 *
 * The mount list (DUMP) is advisory, as in every implementation: it is kept
 * in memory and lost at restart; a client's handles never depend on it.
 */
#include "nfsd/nfsd.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "mount3.h"
#include "nfsd/export_table.h"
#include "nfsd/log.h"
#include "nfsd/presto.h"
#include "nfsd/stats.h"

struct mount_entry {
	struct mount_entry *next;
	char host[64];
	char *dir;
};

static pthread_mutex_t ml_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mount_entry *ml_head;
static size_t ml_bytes;
/* The list is informational (showmount -a) and must fit one DUMP reply
 * (REPLY_MAX, about 1 MiB): at most ML_HOST_MAX entries per host and
 * ML_BYTES_MAX in all; MNTs past that are served but not listed. */
#define ML_HOST_MAX 64
#define ML_BYTES_MAX (512 * 1024)

/* ml_size -- what an entry of host and dir adds to a DUMP reply, about */
static size_t ml_size(const char *host, const char *dir)
{
	return 32 + strlen(host) + strlen(dir);
}

/* ml_norm -- dir in one spelling: no repeated "/", no "." component, no
 * trailing "/" (each spelling a client sends would be an entry else) */
static void ml_norm(const char *dir, char *out, size_t len)
{
	size_t k = 0;

	for (const char *p = dir; *p && k + 1 < len;) {
		if (*p == '/') {
			while (*p == '/')
				p++;
			if (p[0] == '.' && (p[1] == '/' || p[1] == '\0')) {
				p++;
				continue;
			}
			if (*p)
				out[k++] = '/';
			continue;
		}
		out[k++] = *p++;
	}
	if (k == 0 && len > 1)
		out[k++] = '/';
	out[k] = '\0';
}

static void ml_add(const char *host, const char *path)
{
	char dir[MNTPATHLEN + 1];
	unsigned of_host = 0;

	ml_norm(path, dir, sizeof(dir));
	pthread_mutex_lock(&ml_lock);
	for (struct mount_entry *m = ml_head; m; m = m->next) {
		if (strcmp(m->host, host) != 0)
			continue;
		if (strcmp(m->dir, dir) == 0)
			goto out;
		of_host++;
	}
	if (of_host >= ML_HOST_MAX || ml_bytes + ml_size(host, dir) > ML_BYTES_MAX)
		goto out;
	struct mount_entry *m = calloc(1, sizeof(*m));
	if (!m || !(m->dir = strdup(dir))) {
		free(m);
		goto out;
	}
	snprintf(m->host, sizeof(m->host), "%s", host);
	m->next = ml_head;
	ml_head = m;
	ml_bytes += ml_size(m->host, m->dir);
out:
	pthread_mutex_unlock(&ml_lock);
}

/* ml_remove -- forget host's mount of path (every one when path is NULL). */
static void ml_remove(const char *host, const char *path)
{
	char dir[MNTPATHLEN + 1];

	if (path)
		ml_norm(path, dir, sizeof(dir));
	pthread_mutex_lock(&ml_lock);
	for (struct mount_entry **pp = &ml_head; *pp;) {
		struct mount_entry *m = *pp;
		if (strcmp(m->host, host) == 0 && (!path || strcmp(m->dir, dir) == 0)) {
			*pp = m->next;
			ml_bytes -= ml_size(m->host, m->dir);
			free(m->dir);
			free(m);
		} else {
			pp = &m->next;
		}
	}
	pthread_mutex_unlock(&ml_lock);
}

static const char *peer_host(struct call *c, char *buf, size_t len)
{
	return addr_to_string((const struct sockaddr *)&c->req->peer, buf, len);
}

static void mnt_null(struct call *c, void *a, void *r)
{
	(void)c;
	(void)a;
	(void)r;
}

/* export_under -- the export whose path is path or the longest one that
 * contains it; *rest gets the remainder ("" or "a/b"). */
static const struct xexport *export_under(const struct xtab *xt, const char *path, const char **rest)
{
	const struct xexport *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < xt->n; i++) {
		const char *ep = xt->v[i].e->path;
		size_t n = strlen(ep);
		if (strcmp(ep, "/") == 0)
			n = 0;	/* "/" contains everything */
		if (strncmp(path, ep, n) != 0 || (path[n] != '\0' && path[n] != '/'))
			continue;
		if (!best || n >= best_len) {
			best = &xt->v[i];
			best_len = n;
		}
	}
	if (best) {
		*rest = path + best_len;
		while (**rest == '/')
			(*rest)++;
	}
	return best;
}

/* mnt_lookup -- the handle of path for this client: an export root, or a
 * directory below one (as knfsd's mountd allows), reached one component
 * at a time without following symlinks and never through "..". */
static mountstat3 mnt_lookup(struct call *c, const char *path, const struct xexport **out,
			     struct fh *fh)
{
	const struct sockaddr *peer = (const struct sockaddr *)&c->req->peer;
	const char *rest;
	const struct xexport *xe = export_under(c->xt, path, &rest);

	if (!xe)
		return MNT3ERR_NOENT;
	const struct export_client *cl = exports_match(xe->e, peer);
	if (!cl)
		return MNT3ERR_ACCES;
	if (!exports_port_ok(&cl->opts, peer))
		return MNT3ERR_PERM;
	*out = xe;
	if (!*rest) {
		*fh = xe->root_fh;
		return MNT3_OK;
	}
	char comp[MNTPATHLEN + 1];
	int fd = dup(xe->root_fd);
	mountstat3 st = MNT3_OK;
	unsigned stripe;
	bool held = false;
	if (fd < 0)
		return MNT3ERR_SERVERFAULT;
	while (*rest) {
		size_t n = strcspn(rest, "/");
		if (n > 255) {
			st = MNT3ERR_NAMETOOLONG;
			goto out;
		}
		memcpy(comp, rest, n);
		comp[n] = '\0';
		rest += n;
		while (*rest == '/')
			rest++;
		if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
			st = MNT3ERR_INVAL;
			goto out;
		}
		struct stat pst;
		if (!*rest && presto_logs(xe) && fstat(fd, &pst) == 0) {
			/* the handle handed out: as LOOKUP does (presto_dir_hold) */
			presto_dir_hold(pst.st_dev, pst.st_ino, false, &stripe);
			held = true;
		}
		int nfd = openat(fd, comp, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		if (nfd < 0) {
			st = errno == ENOENT ? MNT3ERR_NOENT : errno == ENOTDIR || errno == ELOOP ? MNT3ERR_NOTDIR
										 : MNT3ERR_IO;
			goto out;
		}
		close(fd);
		fd = nfd;
	}
	struct fh_kernel kh;
	int mid;
	if (fh_of(fd, "", &kh, &mid) < 0 || mid != xe->mount_id || fh_make(xe->e->id, &kh, fh) < 0)
		st = MNT3ERR_NOTSUPP;
out:
	if (held)
		presto_dir_release(stripe);
	close(fd);
	return st;
}

/* printable -- s for a log line: bytes outside printable ASCII, and the
 * backslash, as \xHH (a client's path must not forge log lines), cut at
 * n - 1 bytes of output */
static const char *printable(const char *s, char *out, size_t n)
{
	size_t k = 0;

	for (; *s && k + 5 < n; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch < 0x20 || ch >= 0x7f || ch == '\\')
			k += (size_t)snprintf(out + k, n - k, "\\x%02x", ch);
		else
			out[k++] = (char)ch;
	}
	out[k] = '\0';
	return out;
}

static void mnt_mnt(struct call *c, void *a, void *r)
{
	dirpath *path = a;
	mountres3 *res = r;
	const struct xexport *xe;
	struct fh fh;
	char host[64], shown[512];
	static long tok;

	res->fhs_status = mnt_lookup(c, *path, &xe, &fh);
	peer_host(c, host, sizeof(host));
	if (res->fhs_status != MNT3_OK) {
		if (log_ratelimited(&tok))
			log_info("MNT %s from %s refused (status %d)", printable(*path, shown, sizeof(shown)),
				 host, res->fhs_status);
		return;
	}
	mountres3_ok *ok = &res->mountres3_u.mountinfo;
	ok->fhandle.fhandle3_val = malloc(fh.len);
	ok->auth_flavors.auth_flavors_val = malloc(2 * sizeof(int));
	if (!ok->fhandle.fhandle3_val || !ok->auth_flavors.auth_flavors_val) {
		res->fhs_status = MNT3ERR_SERVERFAULT;
		free(ok->fhandle.fhandle3_val);
		free(ok->auth_flavors.auth_flavors_val);
		memset(ok, 0, sizeof(*ok));
		return;
	}
	memcpy(ok->fhandle.fhandle3_val, fh.data, fh.len);
	ok->fhandle.fhandle3_len = fh.len;
	ok->auth_flavors.auth_flavors_val[0] = AUTH_SYS;
	ok->auth_flavors.auth_flavors_val[1] = AUTH_NONE;
	ok->auth_flavors.auth_flavors_len = 2;
	ml_add(host, *path);
	log_debug("MNT %s from %s", *path, host);
}

/* mnt1_mnt -- version 1 MNT: a 32-byte handle cannot hold ours (see fh.h),
 * so version 1 and 2 clients are told to use version 3. */
static void mnt1_mnt(struct call *c, void *a, void *r)
{
	dirpath *path = a;
	fhstatus1 *res = r;
	const struct xexport *xe;
	struct fh fh;
	mountstat3 st = mnt_lookup(c, *path, &xe, &fh);

	res->fhs_status = st != MNT3_OK ? (unsigned)st : EOPNOTSUPP;
}

static void mnt_dump(struct call *c, void *a, void *r)
{
	mountlist *res = r;
	mountlist *tail = res;

	(void)c;
	(void)a;
	*res = NULL;
	pthread_mutex_lock(&ml_lock);
	for (struct mount_entry *m = ml_head; m; m = m->next) {
		struct mountbody *b = calloc(1, sizeof(*b));
		if (!b)
			break;
		b->ml_hostname = strdup(m->host);
		b->ml_directory = strdup(m->dir);
		if (!b->ml_hostname || !b->ml_directory) {
			free(b->ml_hostname);
			free(b->ml_directory);
			free(b);
			break;
		}
		*tail = b;
		tail = &b->ml_next;
	}
	pthread_mutex_unlock(&ml_lock);
}

static void mnt_umnt(struct call *c, void *a, void *r)
{
	dirpath *path = a;
	char host[64];

	(void)r;
	ml_remove(peer_host(c, host, sizeof(host)), *path);
}

static void mnt_umntall(struct call *c, void *a, void *r)
{
	char host[64];

	(void)a;
	(void)r;
	ml_remove(peer_host(c, host, sizeof(host)), NULL);
}

static void mnt_export(struct call *c, void *a, void *r)
{
	mntexports *res = r;
	mntexports *tail = res;

	(void)a;
	*res = NULL;
	for (size_t i = 0; i < c->xt->exp->n; i++) {
		const struct export *e = &c->xt->exp->v[i];
		struct exportnode *n = calloc(1, sizeof(*n));
		if (!n || !(n->ex_dir = strdup(e->path))) {
			free(n);
			return;
		}
		*tail = n;
		tail = &n->ex_next;
		mntgroups *gt = &n->ex_groups;
		for (size_t k = 0; k < e->nclients; k++) {
			struct groupnode *g = calloc(1, sizeof(*g));
			if (!g || !(g->gr_name = strdup(e->clients[k].spec))) {
				free(g);
				return;
			}
			*gt = g;
			gt = &g->gr_next;
		}
	}
}

static size_t list_reply_size(const void *a)
{
	(void)a;
	return 64 * 1024;
}

#define MPROC(num, nm, fn, argt, rest, rsize, st)                                                  \
	[num] = { .name = nm, .xdr_args = XDRPROC(xdr_##argt), .xdr_res = XDRPROC(xdr_##rest), \
		  .args_size = sizeof(argt), .res_size = sizeof(rest), .handler = fn,              \
		  .reply_size = rsize, .stat_idx = STATS_MNT_BASE + num, .res_status = st }

#define ROW_NULL                                                                                   \
	[0] = { .name = "MNT_NULL", .xdr_args = XDRPROC(xdr_void), .xdr_res = XDRPROC(xdr_void), \
		.handler = mnt_null, .stat_idx = STATS_MNT_BASE }
#define ROW_DUMP                                                                                   \
	[2] = { .name = "MNT_DUMP", .xdr_args = XDRPROC(xdr_void),                                  \
		.xdr_res = XDRPROC(xdr_mountlist), .res_size = sizeof(mountlist),                   \
		.handler = mnt_dump, .reply_size = list_reply_size, .stat_idx = STATS_MNT_BASE + 2 }
#define ROW_UMNT                                                                                   \
	[3] = { .name = "UMNT", .xdr_args = XDRPROC(xdr_dirpath), .xdr_res = XDRPROC(xdr_void),   \
		.args_size = sizeof(dirpath), .handler = mnt_umnt, .stat_idx = STATS_MNT_BASE + 3 }
#define ROW_UMNTALL                                                                                \
	[4] = { .name = "UMNTALL", .xdr_args = XDRPROC(xdr_void), .xdr_res = XDRPROC(xdr_void),   \
		.handler = mnt_umntall, .stat_idx = STATS_MNT_BASE + 4 }
#define ROW_EXPORT                                                                                 \
	[5] = { .name = "MNT_EXPORT", .xdr_args = XDRPROC(xdr_void),                                \
		.xdr_res = XDRPROC(xdr_mntexports), .res_size = sizeof(mntexports),                 \
		.handler = mnt_export, .reply_size = list_reply_size, .stat_idx = STATS_MNT_BASE + 5 }

const struct rpc_proc mount3_procs[] = {
	ROW_NULL,
	MPROC(1, "MNT", mnt_mnt, dirpath, mountres3, NULL, true),
	ROW_DUMP,
	ROW_UMNT,
	ROW_UMNTALL,
	ROW_EXPORT,
};
const unsigned mount3_nprocs = sizeof(mount3_procs) / sizeof(mount3_procs[0]);

const struct rpc_proc mount1_procs[] = {
	ROW_NULL,
	MPROC(1, "MNT", mnt1_mnt, dirpath, fhstatus1, NULL, true),
	ROW_DUMP,
	ROW_UMNT,
	ROW_UMNTALL,
	ROW_EXPORT,
};
const unsigned mount1_nprocs = sizeof(mount1_procs) / sizeof(mount1_procs[0]);
