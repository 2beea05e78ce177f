/*
 * export_table.h -- the exports in force: the parsed exports file plus, per
 * export, an open O_PATH descriptor of its root (the mount_fd of
 * open_by_handle_at) and the root's handle.
 *
 * A table is immutable once installed. SIGHUP parses the file anew and
 * installs a new table; calls in flight keep the table they started with
 * (reference counted), so a reload never drops a connection or a call.
 */
#ifndef PRESTO_EXPORT_TABLE_H
#define PRESTO_EXPORT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nfsd/exports.h"
#include "nfsd/fh.h"

struct xexport {
	const struct export *e;
	int root_fd;			/* O_RDONLY | O_DIRECTORY: the mount_fd */
	dev_t dev;
	ino_t ino;
	int mount_id;
	struct fh root_fh;
	uint64_t maxfilesize;		/* the filesystem's largest file size */
	bool names_by_fd;		/* atomic: entry_of (nfs3.c) skips the
					 * by-name way (not this layout) */
};

struct xtab {
	int refs;			/* atomic */
	struct exports *exp;
	struct xexport *v;
	size_t n;
};

/* xtab_load -- parse the exports file at path and open every export's root.
 * Returns 0, or -errno with a message in err (file:line for syntax). */
int xtab_load(const char *path, struct xtab **out, char *err, size_t errlen);
/* xtab_install -- make x the table in force (takes the caller's reference). */
void xtab_install(struct xtab *x);
/* xtab_get -- a reference to the table in force (never NULL after the
 * first install). */
struct xtab *xtab_get(void);
void xtab_put(struct xtab *x);
const struct xexport *xtab_by_id(const struct xtab *x, uint32_t id);
const struct xexport *xtab_by_path(const struct xtab *x, const char *path);
/* xexport_writable -- whether some client of xe may write (rw). */
bool xexport_writable(const struct xexport *xe);

#endif
