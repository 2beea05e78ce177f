/*
 * vfs.c -- identity, attributes and errno mapping (see vfs.h).
 */
#include "nfsd/vfs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

bool vfs_caller_uid(const struct call_cred *cr, const struct export_opts *o, uid_t *uid)
{
	uid_t u = cr->uid;

	if (o->squash == EXPORT_ALL_SQUASH || cr->flavor == AUTH_NONE ||
	    (u == 0 && o->squash == EXPORT_ROOT_SQUASH))
		u = o->anonuid;
	*uid = u;
	return u == 0;
}

/* The identity this thread's filesystem calls run with now: switching costs
 * three system calls, so a call from the same user as the previous one on
 * this thread (and root going back to root) costs none. */
static __thread struct {
	bool valid;
	uid_t uid;
	gid_t gid;
	size_t ng;
	gid_t groups[NFSD_MAX_GIDS];
} cur;

static bool cur_is(uid_t uid, gid_t gid, size_t ng, const gid_t *groups)
{
	return cur.valid && cur.uid == uid && cur.gid == gid && cur.ng == ng &&
	       (ng == 0 || memcmp(cur.groups, groups, ng * sizeof(gid_t)) == 0);
}

int vfs_become(const struct call_cred *cr, const struct export_opts *o)
{
	uid_t uid = cr->uid;
	gid_t gid = cr->gid;
	gid_t groups[NFSD_MAX_GIDS];
	size_t ng = cr->ngids;

	for (size_t i = 0; i < ng; i++)
		groups[i] = cr->gids[i];
	if (o->squash == EXPORT_ALL_SQUASH || cr->flavor == AUTH_NONE) {
		uid = o->anonuid;
		gid = o->anongid;
		ng = 0;
	} else if (o->squash == EXPORT_ROOT_SQUASH) {
		if (uid == 0)
			uid = o->anonuid;
		if (gid == 0)
			gid = o->anongid;
		/* knfsd squashes group 0 among the supplementary groups too */
		for (size_t i = 0; i < ng; i++)
			if (groups[i] == 0)
				groups[i] = o->anongid;
	}
	if (cur_is(uid, gid, ng, groups))
		return 0;
	/* from root: groups first, while still privileged; then gid, then uid
	 * (dropping fsuid 0 drops the filesystem capabilities of this thread) */
	if (!cur_is(0, 0, 0, NULL))
		vfs_become_root();
	cur.valid = false;
	if (syscall(SYS_setgroups, ng, groups) < 0)
		return -errno;
	setfsgid(gid);
	setfsuid(uid);
	if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid)
		return -EPERM;
	cur.valid = true;
	cur.uid = uid;
	cur.gid = gid;
	cur.ng = ng;
	memcpy(cur.groups, groups, ng * sizeof(gid_t));
	return 0;
}

void vfs_become_root(void)
{
	if (cur_is(0, 0, 0, NULL))
		return;
	setfsuid(0);
	setfsgid(0);
	syscall(SYS_setgroups, 0, NULL);
	cur.valid = true;
	cur.uid = 0;
	cur.gid = 0;
	cur.ng = 0;
}

nfsstat3 vfs_nfserr(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return NFS3_OK;
	case EPERM:
		return NFS3ERR_PERM;
	case ENOENT:
		return NFS3ERR_NOENT;
	case ENXIO:
		return NFS3ERR_NXIO;
	case EACCES:
		return NFS3ERR_ACCES;
	case EEXIST:
		return NFS3ERR_EXIST;
	case EXDEV:
		return NFS3ERR_XDEV;
	case ENODEV:
		return NFS3ERR_NODEV;
	case ENOTDIR:
		return NFS3ERR_NOTDIR;
	case EISDIR:
		return NFS3ERR_ISDIR;
	case EINVAL:
		return NFS3ERR_INVAL;
	case EFBIG:
		return NFS3ERR_FBIG;
	case ENOSPC:
		return NFS3ERR_NOSPC;
	case EROFS:
		return NFS3ERR_ROFS;
	case EMLINK:
		return NFS3ERR_MLINK;
	case ENAMETOOLONG:
		return NFS3ERR_NAMETOOLONG;
	case ENOTEMPTY:
		return NFS3ERR_NOTEMPTY;
	case EDQUOT:
		return NFS3ERR_DQUOT;
	case ESTALE:
		return NFS3ERR_STALE;
	case EBADMSG:
		return NFS3ERR_BADHANDLE;
	case EOPNOTSUPP:
		return NFS3ERR_NOTSUPP;
	case ELOOP:
		/* a symlink met where a directory was expected: knfsd says NOTDIR */
		return NFS3ERR_NOTDIR;
	case EAGAIN:
	case ETIMEDOUT:
		return NFS3ERR_JUKEBOX;
	case ENOMEM:
		return NFS3ERR_SERVERFAULT;
	default:
		return NFS3ERR_IO;
	}
}

static ftype3 ftype_of(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return NF3REG;
	case S_IFDIR:
		return NF3DIR;
	case S_IFBLK:
		return NF3BLK;
	case S_IFCHR:
		return NF3CHR;
	case S_IFLNK:
		return NF3LNK;
	case S_IFSOCK:
		return NF3SOCK;
	default:
		return NF3FIFO;
	}
}

void vfs_fattr(const struct stat *st, uint64_t fsid, fattr3 *a)
{
	a->type = ftype_of(st->st_mode);
	a->mode = st->st_mode & 07777;
	a->nlink = (uint32)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->size = (uint64)st->st_size;
	a->used = (uint64)st->st_blocks * 512;
	a->rdev.specdata1 = major(st->st_rdev);
	a->rdev.specdata2 = minor(st->st_rdev);
	a->fsid = fsid;
	a->fileid = st->st_ino;
	a->atime.seconds = (uint32)st->st_atim.tv_sec;
	a->atime.nseconds = (uint32)st->st_atim.tv_nsec;
	a->mtime.seconds = (uint32)st->st_mtim.tv_sec;
	a->mtime.nseconds = (uint32)st->st_mtim.tv_nsec;
	a->ctime.seconds = (uint32)st->st_ctim.tv_sec;
	a->ctime.nseconds = (uint32)st->st_ctim.tv_nsec;
}

void vfs_post_op(post_op_attr *pa, const struct stat *st, uint64_t fsid)
{
	pa->attributes_follow = TRUE;
	vfs_fattr(st, fsid, &pa->post_op_attr_u.attributes);
}

void vfs_post_op_fd(post_op_attr *pa, int fd, uint64_t fsid)
{
	struct stat st;

	if (fd >= 0 && fstat(fd, &st) == 0)
		vfs_post_op(pa, &st, fsid);
	else
		pa->attributes_follow = FALSE;
}

void vfs_pre_op(pre_op_attr *pa, const struct stat *st)
{
	if (!st) {
		pa->attributes_follow = FALSE;
		return;
	}
	pa->attributes_follow = TRUE;
	pa->pre_op_attr_u.attributes.size = (uint64)st->st_size;
	pa->pre_op_attr_u.attributes.mtime.seconds = (uint32)st->st_mtim.tv_sec;
	pa->pre_op_attr_u.attributes.mtime.nseconds = (uint32)st->st_mtim.tv_nsec;
	pa->pre_op_attr_u.attributes.ctime.seconds = (uint32)st->st_ctim.tv_sec;
	pa->pre_op_attr_u.attributes.ctime.nseconds = (uint32)st->st_ctim.tv_nsec;
}

void vfs_wcc(wcc_data *w, const struct stat *before, int fd, uint64_t fsid)
{
	vfs_pre_op(&w->before, before);
	vfs_post_op_fd(&w->after, fd, fsid);
}

void vfs_proc_path(int fd, char buf[32])
{
	snprintf(buf, 32, "/proc/self/fd/%d", fd);
}
