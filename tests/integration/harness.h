/*
 * harness.h -- integration-test harness: run a real NFSv3 server on loopback
 * and talk to it with libnfs (sync and raw/async APIs) or with hand-made RPC
 * records over a raw TCP socket.
 *
 * The server is presto-nfsd ($PRESTO_BIN/presto-nfsd, default /work/main/bin
 * relative to the repository: ./bin) unless PRESTO_IT_SERVER=ganesha, which
 * runs NFS-Ganesha (VFS FSAL) on ports 20060-20067 instead, so that the
 * protocol-generic tests can be checked against an independent server.
 * Tests that check a presto-only promise call it_presto_only() first.
 *
 * Each server runs in a fresh temporary directory (export/, state/, its log)
 * that it_server_stop() removes. Servers still running at exit (a failed
 * assertion, the watchdog) are killed by an atexit handler; the child also
 * dies with its parent (PR_SET_PDEATHSIG).
 */
#ifndef TESTS_INTEGRATION_HARNESS_H
#define TESTS_INTEGRATION_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>

#define IT_TIMEOUT_MS 10000		/* one RPC, one server start */
#define IT_FH_MAX 128			/* room for over-long forged handles */
#define IT_BUF_MAX (256 * 1024)

#define MOUNT_PROG 100005
#define IT_NFS_PROG 100003

/* IT_RPCBIND in it_server_startv() flags: let the server register with rpcbind */
#define IT_RPCBIND 1
/* IT_IPV6: presto-nfsd also listens on ::1 (--bind ::1) */
#define IT_IPV6 2

struct it_server {
	pid_t pid;
	int ganesha;
	int nfs_port;
	int mount_port;
	int out_fd;			/* read end of the server's stdout */
	int exit_status;		/* wait status after it_server_stop */
	int flags;			/* it_server_startv flags */
	int extra_stdout;		/* more than the ready line was printed */
	char dir[128];			/* temporary directory */
	char export[192];		/* first exported directory */
	char exports_file[192];
	char log[192];
};

struct it_export {
	const char *sub;		/* directory under it_server.dir */
	const char *clients;		/* "127.0.0.1(rw,insecure) ::1(ro)" */
};

struct it_fh {
	uint32_t len;
	unsigned char data[IT_FH_MAX];
};

struct it_dirent {
	uint64_t fileid;
	uint64_t cookie;
	char name[512];
	int has_attr;
	fattr3 attr;
	int has_fh;
	struct it_fh fh;
};

/* it_res -- the parts of any NFSv3 reply that tests look at, copied out of
 * libnfs's decode buffer (which is freed when the callback returns) */
struct it_res {
	int rpc_status;			/* RPC_STATUS_*; the others are valid on SUCCESS */
	char rpc_error[256];
	int status;			/* nfsstat3 (mountstat3 for it_mnt) */
	int has_fh;			/* LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD */
	struct it_fh fh;
	int has_attr;			/* object attributes (GETATTR: always) */
	fattr3 attr;
	int has_dir_attr;		/* LOOKUP dir_attributes, READDIR* dir_attributes */
	fattr3 dir_attr;
	int has_before, has_after;	/* wcc_data (RENAME: fromdir; LINK: linkdir) */
	wcc_attr before;
	fattr3 after;
	int has_before2, has_after2;	/* RENAME todir_wcc */
	wcc_attr before2;
	fattr3 after2;
	uint32_t access;
	uint32_t count;
	int eof;
	int committed;
	char verf[8];			/* WRITE/COMMIT verifier, READDIR* cookieverf */
	char *data;			/* READ data / READLINK path (malloc, NUL-terminated) */
	size_t data_len;
	FSSTAT3resok fsstat;
	FSINFO3resok fsinfo;
	PATHCONF3resok pathconf;
	struct it_dirent *ents;		/* READDIR / READDIRPLUS (malloc) */
	size_t nents;
};

/* it_nvram -- presto-nfsd runs with --nvram (presto on for the exports
 * without nopresto): set by PRESTO_IT_NVRAM=1 or by the *_nvram builds of
 * the programs; default off. The log is a file of the test's directory,
 * treated as persistent memory (PMEM_IS_PMEM_FORCE=1); IT_NVRAM_MSYNC
 * instead leaves it the msync kind (a file on the disk, made durable with
 * msync) */
#define IT_NVRAM_MSYNC 2
extern int it_nvram;
/* --nvram-size when it_nvram (default "64M"), and more presto-nfsd
 * arguments (NULL-terminated, at most 7) for the next starts */
extern const char *it_nvram_size;
extern const char *it_presto_extra[8];

/* it_init -- arm a watchdog of SECONDS (kills the servers, exits 1) and the
 * exit-time cleanup; call first in main(). A program compiled with
 * -DIT_NVRAM_DEFAULT=1 (the *_nvram builds) runs presto on. */
void it_init_mode(unsigned seconds, int nvram);
#ifndef IT_NVRAM_DEFAULT
#define IT_NVRAM_DEFAULT 0
#endif
static inline void it_init(unsigned seconds)
{
	it_init_mode(seconds, IT_NVRAM_DEFAULT);
}
/* it_is_ganesha -- true when PRESTO_IT_SERVER=ganesha */
int it_is_ganesha(void);
/* it_presto_only -- skip the current cmocka test under Ganesha */
#define it_presto_only()                                                 \
	do {                                                             \
		if (it_is_ganesha()) {                                   \
			print_message("presto-only test: skipped\n"); \
			skip();                                          \
		}                                                        \
	} while (0)

/* it_server_start -- start a server exporting s->export (== s->dir/export)
 * to CLIENTS; 0 when it answers, -1 otherwise (its log is printed) */
int it_server_start(struct it_server *s, const char *clients);
/* it_server_startv -- same with N exports; flags: IT_RPCBIND */
int it_server_startv(struct it_server *s, const struct it_export *ex, int n, int flags);
/* it_server_stop -- SIGTERM, wait (SIGKILL after 10 s), remove the temp dir;
 * 0 when the server exited with status 0 on SIGTERM, -1 otherwise */
int it_server_stop(struct it_server *s);
/* it_server_restart -- stop with SIG (SIGTERM: must exit 0; SIGKILL: a
 * crash) and start again on the same directory, exports and state (new
 * ports for presto); 0 or -1 */
int it_server_restart(struct it_server *s, int sig);
/* it_server_restart_after -- the same, calling BETWEEN (when not NULL) once
 * the server is down: to change the backing tree as a power cut would */
int it_server_restart_after(struct it_server *s, int sig, void (*between)(struct it_server *s));
/* it_server_restart_killed -- start again a presto-nfsd that something
 * else killed (a debugger): it must be dead by SIGKILL within 10 s; 0 or
 * -1 */
int it_server_restart_killed(struct it_server *s);
/* it_server_reload -- rewrite the exports file and send SIGHUP (presto) */
int it_server_reload(struct it_server *s, const struct it_export *ex, int n);
/* it_server_running -- the server process has not exited */
int it_server_running(struct it_server *s);
/* it_path -- s->export + "/" + rel into a static rotating buffer */
const char *it_path(const struct it_server *s, const char *rel);

/* libnfs high-level (sync) API: a context mounted on PATH (NULL: s->export)
 * with uid/gid (-1: keep libnfs's default, our own ids); NULL on failure
 * with the error in *err when err != NULL (-errno) */
struct nfs_context *it_nfs_mount(struct it_server *s, const char *path, int uid, int gid, int *err);
void it_nfs_close(struct nfs_context *nfs);

/* libnfs raw API: an rpc_context connected to s's NFS (prog 100003 v3) or
 * MOUNT (100005 v3) port; NULL on failure */
struct rpc_context *it_rpc_connect(struct it_server *s, int prog, int vers);
struct rpc_context *it_rpc_connect_to(struct it_server *s, const char *host, int prog, int vers);
void it_rpc_close(struct rpc_context *rpc);
/* it_mnt -- MOUNT3 MNT of PATH on a raw context; returns the mountstat3,
 * -1 on an RPC failure; fh filled on MNT3_OK */
int it_mnt(struct rpc_context *mnt, const char *path, struct it_fh *fh);
/* it_root_fh -- MNT of s->export through a fresh MOUNT connection */
int it_root_fh(struct it_server *s, struct it_fh *fh);

/* it_nfs3 -- send NFSv3 procedure PROC with ARGS (libnfs's PROC3args), wait
 * for the reply (IT_TIMEOUT_MS), copy it to *res; returns res->status
 * (nfsstat3) or -1 when the RPC itself failed (res->rpc_error). res is reset
 * (and freed) first: initialise it with it_res_init() once. */
int it_nfs3(struct rpc_context *rpc, int proc, void *args, struct it_res *res);
void it_res_init(struct it_res *res);
/* how long it_nfs3 waits for one reply (default IT_TIMEOUT_MS) */
extern int it_call_timeout_ms;
void it_res_free(struct it_res *res);
/* it_wait -- run rpc's event loop until *done is set or timeout; 0 / -1 */
int it_wait(struct rpc_context *rpc, const int *done, int timeout_ms);
/* it_wait_all -- run the event loops of n (at most IT_WAIT_MAX) contexts
 * until *pending drops to 0: 0, -1 on timeout, -2 - i when context i
 * failed (rpc_get_error says why) */
#define IT_WAIT_MAX 64
int it_wait_all(struct rpc_context *const *rpc, int n, const int *pending, int timeout_ms);
/* it_nfs_wait -- the same for a high-level nfs_context */
int it_nfs_wait(struct nfs_context *nfs, const int *done, int timeout_ms);

/* nfs_fh3 view of an it_fh (borrows fh) */
nfs_fh3 it_fh3(const struct it_fh *fh);
void it_fh_from(struct it_fh *dst, const nfs_fh3 *src);

/* Convenience wrappers over it_nfs3; each returns the nfsstat3 (or -1) */
int it_getattr(struct rpc_context *rpc, const struct it_fh *fh, struct it_res *r);
int it_lookup(struct rpc_context *rpc, const struct it_fh *dir, const char *name, struct it_res *r);
int it_create(struct rpc_context *rpc, const struct it_fh *dir, const char *name,
	      int how, int mode, const char *verf, struct it_res *r);
int it_mkdir(struct rpc_context *rpc, const struct it_fh *dir, const char *name, int mode, struct it_res *r);
int it_remove(struct rpc_context *rpc, const struct it_fh *dir, const char *name, struct it_res *r);
int it_rmdir(struct rpc_context *rpc, const struct it_fh *dir, const char *name, struct it_res *r);
int it_write(struct rpc_context *rpc, const struct it_fh *fh, uint64_t off, const void *buf,
	     uint32_t len, int stable, struct it_res *r);
/* it_write3 -- the arguments of a WRITE of len bytes of buf at off (borrowed:
 * buf and fh's handle must outlive the call) */
WRITE3args it_write3(const struct it_fh *fh, uint64_t off, const void *buf, uint32_t len,
		     int stable);
int it_read(struct rpc_context *rpc, const struct it_fh *fh, uint64_t off, uint32_t count, struct it_res *r);
int it_symlink(struct rpc_context *rpc, const struct it_fh *dir, const char *name,
	       const char *target, struct it_res *r);
int it_rename(struct rpc_context *rpc, const struct it_fh *fdir, const char *from,
	      const struct it_fh *tdir, const char *to, struct it_res *r);
int it_link(struct rpc_context *rpc, const struct it_fh *fh, const struct it_fh *dir,
	    const char *name, struct it_res *r);
int it_setattr_mode(struct rpc_context *rpc, const struct it_fh *fh, int mode, struct it_res *r);
/* it_readdir_all -- READDIR (plus=0) or READDIRPLUS (plus=1) from cookie 0
 * to eof with COUNT-byte replies; entries accumulated into r->ents; returns
 * the last status; *calls gets the number of round trips when not NULL */
int it_readdir_all(struct rpc_context *rpc, const struct it_fh *dir, int plus,
		   uint32_t count, struct it_res *r, int *calls);

/* --- raw RPC over TCP, for what libnfs will not send --- */
struct it_buf {
	unsigned char b[IT_BUF_MAX];
	size_t len;			/* bytes written / received */
	size_t pos;			/* read cursor */
	int bad;			/* a read ran past len */
};

struct it_reply {
	uint32_t xid;
	uint32_t mtype;			/* 1 = REPLY */
	uint32_t reply_stat;		/* 0 MSG_ACCEPTED, 1 MSG_DENIED */
	uint32_t accept_stat;		/* SUCCESS 0, PROG_UNAVAIL 1, PROG_MISMATCH 2,
					   PROC_UNAVAIL 3, GARBAGE_ARGS 4, SYSTEM_ERR 5 */
	uint32_t reject_stat;		/* RPC_MISMATCH 0, AUTH_ERROR 1 */
	uint32_t auth_stat;
	uint32_t low, high;		/* *_MISMATCH ranges */
};

#define IT_AUTH_NONE 0
#define IT_AUTH_SYS 1

void it_buf_reset(struct it_buf *b);
void it_put32(struct it_buf *b, uint32_t v);
void it_put64(struct it_buf *b, uint64_t v);
void it_put_opaque(struct it_buf *b, const void *p, uint32_t len);	/* len + data + pad */
void it_put_string(struct it_buf *b, const char *s);
void it_put_fh(struct it_buf *b, const struct it_fh *fh);
uint32_t it_get32(struct it_buf *b);
uint64_t it_get64(struct it_buf *b);
/* it_put_call -- RPC call header; flavor IT_AUTH_SYS (uid/gid used) or
 * IT_AUTH_NONE or any number (an empty body of that flavor) */
void it_put_call(struct it_buf *b, uint32_t xid, uint32_t rpcvers, uint32_t prog,
		 uint32_t vers, uint32_t proc, uint32_t flavor, uint32_t uid, uint32_t gid);
/* it_tcp_connect -- TCP to 127.0.0.1:port from SRC (NULL: any) port SRC_PORT
 * (0: any); fd or -1 */
int it_tcp_connect(const char *src, int src_port, int port);
/* it_send_record -- one record, one last fragment */
int it_send_record(int fd, const struct it_buf *b);
int it_send_all(int fd, const void *p, size_t len);
/* it_control -- one request line on s's control socket; its reply line
 * into buf (NUL-terminated, at most cap - 1 bytes). 0, or -1 (errno) when it
 * cannot be sent or no whole line comes within IT_TIMEOUT_MS */
int it_control(const struct it_server *s, const char *req, char *buf, size_t cap);
/* it_recv_record -- one whole record into b (b->pos = 0); returns its length,
 * 0 when the peer closed, -1 on timeout or error */
ssize_t it_recv_record(int fd, struct it_buf *b, int timeout_ms);
/* it_wait_closed -- 1 when the peer closes (or resets) within timeout_ms,
 * 0 when it is still open (replies are read and discarded) */
int it_wait_closed(int fd, int timeout_ms);
/* it_parse_reply -- RPC reply header; b->pos is left at the result body;
 * 0 or -1 (malformed) */
int it_parse_reply(struct it_buf *b, struct it_reply *r);
/* it_raw_call -- connect (from SRC/SRC_PORT), send CALL, read one reply into
 * REPLY and parse it; 0, or -1 (no reply: *closed says if the peer closed) */
int it_raw_call(int port, const char *src, int src_port, const struct it_buf *call,
		struct it_buf *reply, struct it_reply *rep);
/* it_raw_status -- it_raw_call, then the first word of the result: the
 * nfsstat3/mountstat3 (>= 0), -100 - accept_stat when the call was accepted
 * but not SUCCESS, -200 - reject_stat (0 RPC_MISMATCH, 1 AUTH_ERROR: the
 * auth_stat is in *auth_stat when not NULL) when denied, -1 with no reply */
int it_raw_status(int port, const char *src, int src_port, const struct it_buf *call,
		  struct it_buf *reply, uint32_t *auth_stat);
/* it_raw_mnt -- MOUNT3 MNT of PATH from SRC/SRC_PORT; as it_raw_status,
 * fh filled on MNT3_OK */
int it_raw_mnt(struct it_server *s, const char *src, int src_port, const char *path, struct it_fh *fh);
/* it_raw_getattr -- NFSv3 GETATTR of FH from SRC/SRC_PORT; as it_raw_status */
int it_raw_getattr(struct it_server *s, const char *src, int src_port, const struct it_fh *fh);
/* it_server_alive -- a fresh connection gets NULL on NFS and MOUNT, and a
 * libnfs mount + stat of the root; 1 or 0 (the reason on stderr) */
int it_server_alive(struct it_server *s);

/* Local helpers */
int it_write_file(const char *path, const void *buf, size_t len, int mode);
char *it_read_file(const char *path, size_t *len);
int it_rm_rf(const char *path);
void it_fill(void *buf, size_t len, uint32_t seed);	/* deterministic bytes */

#endif
