/*
 * vfs.h -- presto-nfsd's layer over the backing filesystem: per-thread
 * identity, attribute conversion and the one errno -> nfsstat3 mapping.
 */
#ifndef PRESTO_VFS_H
#define PRESTO_VFS_H

#include <stdbool.h>
#include <sys/stat.h>

#include "nfs3_prot.h"
#include "nfsd/exports.h"
#include "nfsd/nfsd.h"

/* vfs_become -- run this thread's filesystem calls as the caller, after the
 * export's squashing (root_squash, all_squash, anonuid/anongid): fsuid,
 * fsgid and supplementary groups, per thread (raw syscalls: glibc's
 * setgroups would change every thread). Returns 0 or -errno. */
int vfs_become(const struct call_cred *cr, const struct export_opts *o);
/* vfs_become_root -- back to uid 0 with no supplementary groups. */
void vfs_become_root(void);
/* vfs_caller_uid -- the uid the caller acts as after squashing (in *uid);
 * returns whether that is root. */
bool vfs_caller_uid(const struct call_cred *cr, const struct export_opts *o, uid_t *uid);

/* vfs_nfserr -- the nfsstat3 for an errno value (positive or negative).
 * The only place where errno becomes an NFS status. */
nfsstat3 vfs_nfserr(int err);

/* vfs_fattr -- fattr3 of st in the export whose fsid is fsid. */
void vfs_fattr(const struct stat *st, uint64_t fsid, fattr3 *a);
void vfs_post_op(post_op_attr *pa, const struct stat *st, uint64_t fsid);
/* vfs_post_op_fd -- post-op attributes fetched from fd (none on error). */
void vfs_post_op_fd(post_op_attr *pa, int fd, uint64_t fsid);
void vfs_pre_op(pre_op_attr *pa, const struct stat *st);
/* vfs_wcc -- wcc_data from the pre-op stat (may be NULL) and fd now. */
void vfs_wcc(wcc_data *w, const struct stat *before, int fd, uint64_t fsid);

/* vfs_proc_path -- "/proc/self/fd/N": reopening an O_PATH descriptor
 * through it checks the caller's permission on the inode. */
void vfs_proc_path(int fd, char buf[32]);

#endif
