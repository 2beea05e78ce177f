/*
 * crash_nfs.c -- crash tests of presto-nfsd through a real NFSv3 client
 * (libnfs raw API), issue 4.
 *
 *   crash_nfs [--mode scenarios,kill,fulllog|powercut] [--presto auto|on|off|mixed]
 *             [--kills N] [--time-limit SEC] [--workers N] [--seed S]
 *             [--replay auto|always|mixed] [--minimize SEC] [--script S] [--reboot]
 *             [--export DIR --loopdev DEV --image FILE --copy FILE]  (powercut)
 *
 * kill      Several clients (one TCP connection each, one operation in flight
 *           each, each in its own subtree /wN) run a mixed workload: create,
 *           write of pattern data, rename (also over an existing name and onto
 *           a hard link of itself), link, symlink, remove, mkdir, rmdir,
 *           setattr of size, mode, times or owner (as root). Odd clients
 *           call as a non-root uid (see default_cred). The server is SIGKILLed at random
 *           moments (some during its start-up, i.e. during replay), restarted
 *           on the same ports (half of the restarts with --replay=always when
 *           presto is on; a third, chosen by the seed, after a fake reboot:
 *           see fake_reboot), and the tree is checked.
 * powercut  The export is an ext4 image on a loop device (tests/crash/
 *           test-powercut.sh sets it up) and the destager is held. At a random
 *           moment of each cycle (before the first operation, or in the
 *           middle) the filesystem is frozen, the image copied, and thawed;
 *           later the server is killed, the copy written back (everything after
 *           it is lost but the log), and the server restarted with
 *           --replay=always after a fake reboot (a power cut is a reboot).
 * scenarios Fixed short op sequences (rename chains, links moved and removed,
 *           rename over, names reused, directories moved with their files),
 *           each in its own subtree; SIGKILL; --replay=always twice. The
 *           set runs twice, the first restart in the same boot, then after
 *           a fake reboot (--script S: S alone; --reboot: after a fake
 *           reboot). The random modes find bugs, these pin them down.
 * fulllog   A small log, writers only: the log fills, the server answers
 *           NFS3ERR_JUKEBOX and the clients retry; kill, restart, check.
 *
 * --presto mixed: the server runs with the log (as --presto on) and also
 * listens on ::1; the exports line gives 127.0.0.1 presto and ::1 nopresto.
 * Each client holds a connection over each address and sends each op over
 * one of them, switching now and then (a quarter of the ops, in runs; odd
 * clients start over ::1): presto-on calls (mostly inline on the event loop
 * thread, answered from the log) and presto-off calls (on worker threads,
 * logged as "through" records and flushed before the reply) change the same
 * subtrees side by side, and a replay applies both kinds in LSN order. Every
 * check is as with --presto on; besides, WRITEs over ::1 must carry another
 * verifier than those over 127.0.0.1 (else the nopresto line did not take),
 * and both addresses must have had ops acknowledged. All modes take it:
 * kill, fulllog (presto-off writers wait for room in the log too), powercut
 * (the copy loses flushed presto-off changes as well; their records bring
 * them back) and scenarios (five more scripts switching with "A 4|6").
 * Histories mark ops sent over ::1 "[::1, nopresto]"; scripts have "A 6"
 * (over ::1 from here on) and "A 4" steps, and a minimized command says
 * --presto mixed.
 *
 * The model. The test keeps, per client subtree, the objects (type, mode,
 * owner, content, symlink target, mtime/atime when set explicitly) and the names,
 * and changes it ONLY when a reply says NFS3_OK. The operation that is in
 * flight when the server dies is a "maybe": after the restart the subtree
 * must equal either the model or the model with that operation applied
 * (the test adopts whichever it finds). An error reply where the model
 * predicts success is a failure. What is checked after every restart:
 *   - the export directory, walked on the host (lstat, readlink, read with
 *     O_NOATIME): names, types, modes, owners, sizes, contents, link counts, which
 *     names are hard links of one another, known mtimes/atimes;
 *   - every handle the client got (CREATE, MKDIR, SYMLINK, LOOKUP, MNT) of an
 *     object that still exists: GETATTR (type, mode, owner, size, nlink), READ of the
 *     whole content, READLINK, READDIR of directories; handles of objects an
 *     acknowledged operation removed must not reach any object;
 *   - the MNT root handle is the same as the first one.
 * Presto off (no --nvram): every acknowledged operation is on disk anyway,
 * so the checks must pass too; in powercut mode the copy is then taken after
 * the kill (there is no log to bring back what a copy would lose).
 *
 * An unanswered WRITE may also have left part of its data: a prefix (a
 * SIGKILL stops the kernel between pages), or, within its range only, any
 * mix of old and new bytes (replay rewrote an earlier write over it); the
 * client still holds that data and sends it again. Nothing else is excused:
 * an unanswered SETATTR of the size is there or not, whole.
 *
 * Output: one line per mode, "crash-kill: N passed, N failed" etc.
 * (tests/run.sh sums them). A failure prints what was expected and what was
 * found per name, the client's last ops on that object or name (with the
 * kills and restarts between), and the tail of the server's log. After a
 * kill-mode failure the failing client's ops, replayed alone on a fresh
 * server, are shortened (ddmin, --minimize SEC) to a "--mode scenarios
 * --script '...'" command that still fails. Everything is bounded:
 * --time-limit per mode, --minimize, a watchdog, 10 s per RPC, 20 s per
 * start. See tests/crash/README.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sched.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>

#define CR_MOUNT_PROG 100005
#define CR_NFS_PROG 100003
#define CR_FH_MAX 128
#define CR_NAME_MAX 24
#define CR_TARGET_MAX 120
#define CR_FILE_MAX (160 * 1024)
#define CR_WRITE_MAX (32 * 1024)
#define CR_HANDLES 4
#define CR_WORKERS_MAX 32
#define CR_RPC_TIMEOUT_MS 10000
#define CR_READY_TIMEOUT_MS 20000	/* start-up, recovery included */
#define CR_DEAD_MAX 256
#define CR_ENTRIES_MAX 48		/* names per client subtree */
#define CR_DIRS_MAX 8			/* directories per client subtree, its root included */

/* ---------------------------------------------------------------- config */

static struct {
	const char *bin;		/* directory of presto-nfsd */
	int presto;			/* 1: --nvram given to the server */
	int mixed;			/* --presto mixed: also ::1, a nopresto client line */
	char modes[64];
	int workers;
	int kills;			/* kill mode: at least this many kills */
	int time_limit;			/* seconds per mode */
	uint64_t seed;
	const char *export_dir;		/* powercut: the mounted loop filesystem */
	const char *loopdev;
	const char *image;
	const char *copy;
	const char *nvram_size;
	int cycles;			/* powercut / fulllog cycles */
	int replay;			/* kill: 0 auto, 1 always, 2 mixed (half and half) */
	int minimize;			/* seconds to shorten a failing client's script */
	const char *script;		/* scenarios: run this one instead */
	int verbose;
	int reboot;			/* scenarios, minimizing: the checked restart is after a fake reboot */
} cfg = {
	.workers = 4, .kills = 40, .time_limit = 150, .nvram_size = "64M", .cycles = 0, .replay = 2, .minimize = 90,
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* splitmix64: reproducible from --seed */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned rnd(unsigned n)
{
	return n ? (unsigned)(rng() % n) : 0;
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* pattern -- the data a WRITE with this seed puts at absolute offset off:
 * a function of both, so a misplaced or stale block is recognised */
static void pattern(unsigned char *buf, uint32_t seed, uint64_t off, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++) {
		uint64_t p = off + i;

		buf[i] = (unsigned char)(mix64(((uint64_t)seed << 32) ^ (p >> 3)) >> (8 * (p & 7)));
	}
}

static uint32_t crc32_buf(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & -(c & 1));
	}
	return ~c;
}

/* --------------------------------------------------------------- failures */

static int fails_total;		/* failures of the current mode */
static int quiet;		/* minimizing: failures are counted here, not shown */
static int trial_failed;

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...)
{
	va_list ap;

	if (quiet) {
		trial_failed++;
		return;
	}
	fails_total++;
	printf("FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void info(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	printf("crash_nfs: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void hist_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void script_mark_restart(int replay_always);

/* ------------------------------------------------------------------ server */

struct server {
	pid_t pid;
	int nfs_port, mount_port;
	char dir[200];			/* temporary directory: state/, logs, export/ */
	char export[256];
	char exports_file[256];
	char state[256];
	char nvram[256];
	char log[256];
	int starts;
	int no_destage;
	char conf[256];			/* -c FILE, or "" */
	int owns_export;		/* export/ lives in dir (kill, fulllog) */
	char boot_file[256];		/* fake boot id of the starts from now on ("": the real one) */
	int rebooted;			/* a fake reboot since the last check */
};

static struct server srv;
static int frozen;			/* powercut: export frozen right now */
static char verf_of[2][NFS3_WRITEVERFSIZE]; /* --presto mixed: WRITE verifier per address ... */
static int verf_known[2];		/* ... since the last server start */

static void server_log_tail(int lines)
{
	char cmd[512];

	if (quiet)
		return;
	printf("---- last %d lines of the server log %s\n", lines, srv.log);
	fflush(stdout);
	snprintf(cmd, sizeof(cmd), "tail -n %d '%s'", lines, srv.log);
	if (system(cmd) < 0)
		printf("(tail failed)\n");
	printf("----\n");
	fflush(stdout);
}

static void server_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void server_logf(const char *fmt, ...)
{
	FILE *f = fopen(srv.log, "a");
	va_list ap;

	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* server_stacks -- where a hung server is (gdb, if installed) */
static void server_stacks(void)
{
	char cmd[256];

	fflush(stdout);
	snprintf(cmd, sizeof(cmd),
		 "timeout 20 gdb -q -batch -p %d -ex 'thread apply all bt 12' 2>/dev/null | grep -E '^(#|Thread)' | head -80",
		 (int)srv.pid);
	if (system(cmd) < 0)
		printf("(gdb failed)\n");
	fflush(stdout);
}

/* Fake reboots. presto-nfsd tells a restart after a reboot (replay,
 * trusting no file stamp: the page cache may have lost data) from one in the
 * same boot (the page cache survived) by /proc/sys/kernel/random/boot_id
 * against the one its log recorded. A server start "after a reboot" runs in
 * a mount namespace of its own where a file holding a new random id is
 * bind-mounted over boot_id; the files are as the kill or the power cut left
 * them, one of the states a reboot may find. Every later start (until the
 * next fake reboot) sees that same id: the simulated machine stays in the
 * boot it rebooted into. */
static int reboot_ok = -1;		/* -1 not probed, 0 impossible here, 1 works */
static char reboot_why[400];
static int reboot_pending_mark;	/* the next restart written into scripts is a reboot */
static long fake_reboots;		/* of the current mode */

/* unescape_mountinfo -- a mount point as /proc/self/mountinfo writes it
 * (octal escapes for space, tab, newline, backslash), in place */
static void unescape_mountinfo(char *p)
{
	char *o = p;

	for (; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
		    p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* path_under -- whether path is mp or lies below it */
static int path_under(const char *path, const char *mp)
{
	size_t n = strlen(mp);

	return path[0] && !strncmp(path, mp, n) && (path[n] == '/' || path[n] == '\0');
}

/* detach_loop_mounts -- in a private mount namespace just made: let go of
 * every filesystem on a loop device but those the server needs (its
 * binary, its state directory and log, its export, the working directory).
 * The namespace's copies of the others would keep them alive after their
 * owner unmounts them: a power-cut test (ours or another run's) that then
 * writes an image copy to the device would write under a live filesystem
 * and corrupt it. Called before the mounts change: the paths are resolved
 * first. */
static void detach_loop_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], mp[4096], src[4096];
	char bin[512], need[6][PATH_MAX];
	const char *want[6] = { srv.export, srv.dir, srv.nvram, srv.conf, bin, "." };
	int nneed = 0;

	snprintf(bin, sizeof(bin), "%s/presto-nfsd", cfg.bin);
	for (int i = 0; i < 6; i++)
		if (want[i][0] && realpath(want[i], need[nneed]))
			nneed++;
	while (f && fgets(line, sizeof(line), f)) {
		char *dash = strstr(line, " - ");
		int keep = 0;

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(dash + 3, "%*s %4095s", src) != 1 || strncmp(src, "/dev/loop", 9))
			continue;
		unescape_mountinfo(mp);
		/* not a filesystem the server needs, nor one they lie on (a
		 * root on a loop device) */
		keep = !strcmp(mp, "/") || path_under(srv.export, mp);
		for (int i = 0; i < nneed && !keep; i++)
			keep = path_under(need[i], mp);
		if (!keep)
			umount2(mp, MNT_DETACH);	/* a failure leaves it as it was */
	}
	if (f)
		fclose(f);
}

/* enter_boot -- in a child before exec: a private mount namespace whose
 * boot_id is the contents of file. Returns 0 or -errno (what failed in
 * reboot_why). */
static int enter_boot(const char *file)
{
	if (unshare(CLONE_NEWNS) < 0) {
		snprintf(reboot_why, sizeof(reboot_why), "unshare(CLONE_NEWNS): %s", strerror(errno));
		return -errno;
	}
	/* slave, not private: a filesystem unmounted outside under a shared
	 * mount (test-powercut.sh's image, before its copy is written back)
	 * goes from here too, rather than stay alive under the copy; the
	 * bind mount below still stays in here */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
		snprintf(reboot_why, sizeof(reboot_why), "making / a slave: %s", strerror(errno));
		return -errno;
	}
	detach_loop_mounts();
	if (mount(file, "/proc/sys/kernel/random/boot_id", NULL, MS_BIND, NULL) < 0) {
		snprintf(reboot_why, sizeof(reboot_why), "bind mount over boot_id: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* write_boot_id -- a new random id into srv.boot_file (written aside and
 * renamed: a bind mount of the old one keeps the old inode) */
static int write_boot_id(char *id, size_t cap)
{
	char tmp[300];
	FILE *f = fopen("/proc/sys/kernel/random/uuid", "re");
	int ok;

	id[0] = '\0';
	if (f) {
		if (!fgets(id, (int)cap, f))
			id[0] = '\0';
		fclose(f);
	}
	id[strcspn(id, "\n")] = '\0';
	if (strlen(id) != 36) {
		snprintf(reboot_why, sizeof(reboot_why), "no uuid from /proc/sys/kernel/random/uuid");
		return -1;
	}
	snprintf(srv.boot_file, sizeof(srv.boot_file), "%s/boot_id", srv.dir);
	snprintf(tmp, sizeof(tmp), "%s.new", srv.boot_file);
	f = fopen(tmp, "w");
	if (!f) {
		snprintf(reboot_why, sizeof(reboot_why), "%s: %s", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "%s\n", id);
	ok = fclose(f) == 0 && rename(tmp, srv.boot_file) == 0;
	if (!ok) {
		snprintf(reboot_why, sizeof(reboot_why), "%s: %s", srv.boot_file, strerror(errno));
		return -1;
	}
	return 0;
}

/* reboot_probe -- whether a child can see a fake boot id here (root, a
 * kernel that lets it unshare its mount namespace); once per run */
static int reboot_probe(void)
{
	char id[64], seen[400] = "";
	int pfd[2], status;
	pid_t p;

	if (reboot_ok >= 0)
		return reboot_ok;
	reboot_ok = 0;
	if (write_boot_id(id, sizeof(id)) < 0 || pipe(pfd) < 0)
		goto out;
	p = fork();
	if (p == 0) {
		FILE *f;

		close(pfd[0]);
		if (enter_boot(srv.boot_file) < 0) {
			if (write(pfd[1], reboot_why, strlen(reboot_why)) < 0) {
				/* the parent sees nothing */
			}
			_exit(1);
		}
		f = fopen("/proc/sys/kernel/random/boot_id", "re");
		if (f && fgets(seen, sizeof(seen), f) && write(pfd[1], seen, strlen(seen)) < 0) {
			/* the parent sees nothing */
		}
		_exit(0);
	}
	close(pfd[1]);
	if (p > 0) {
		ssize_t n = read(pfd[0], seen, sizeof(seen) - 1);

		seen[n > 0 ? n : 0] = '\0';
		waitpid(p, &status, 0);
		seen[strcspn(seen, "\n")] = '\0';
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strcmp(seen, id))
			reboot_ok = 1;
		else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			snprintf(reboot_why, sizeof(reboot_why), "the child saw boot id '%.40s', not '%.40s'", seen, id);
		else
			snprintf(reboot_why, sizeof(reboot_why), "%s", seen[0] ? seen : "the probe failed");
	}
	close(pfd[0]);
out:
	unlink(srv.boot_file);
	srv.boot_file[0] = '\0';
	if (!reboot_ok)
		info("fake reboots are not possible here (%s): every restart stays in the same boot", reboot_why);
	return reboot_ok;
}

/* fake_reboot -- the next start (and those after it) see a new boot id */
static void fake_reboot(void)
{
	char id[64];

	if (!reboot_probe())
		return;
	if (write_boot_id(id, sizeof(id)) < 0) {
		failf("fake reboot: %s", reboot_why);
		srv.boot_file[0] = '\0';
		return;
	}
	fake_reboots++;
	srv.rebooted = 1;
	reboot_pending_mark = 1;
	hist_add("- B: fake reboot (boot id %s)", id);
	server_logf("=== crash_nfs: fake reboot: the next starts see boot id %s\n", id);
	if (cfg.verbose)
		info("fake reboot %ld: boot id %s", fake_reboots, id);
}

/* server_start -- fork/exec presto-nfsd; with wait_ready, wait (10 s) for its
 * "ready" line and learn the ports. Returns 0, or -1 (reported). */
static int server_start(int replay_always, int wait_ready)
{
	char nfsp[16], mntp[16], *argv[32];
	int argc = 0, fd;
	off_t start_off;
	struct stat st;
	char bin[512];

	snprintf(bin, sizeof(bin), "%s/presto-nfsd", cfg.bin);
	snprintf(nfsp, sizeof(nfsp), "%d", srv.nfs_port);
	snprintf(mntp, sizeof(mntp), "%d", srv.mount_port);
	argv[argc++] = bin;
	if (srv.conf[0]) {
		argv[argc++] = "-c";
		argv[argc++] = srv.conf;
	}
	argv[argc++] = "--exports";
	argv[argc++] = srv.exports_file;
	argv[argc++] = "--state-dir";
	argv[argc++] = srv.state;
	argv[argc++] = "--bind";
	argv[argc++] = "127.0.0.1";
	if (cfg.mixed) {
		argv[argc++] = "--bind";
		argv[argc++] = "::1";
	}
	argv[argc++] = "--nfs-port";
	argv[argc++] = nfsp;
	argv[argc++] = "--mount-port";
	argv[argc++] = mntp;
	argv[argc++] = "--no-rpcbind";
	argv[argc++] = "--foreground";
	if (cfg.presto) {
		argv[argc++] = "--nvram";
		argv[argc++] = srv.nvram;
		argv[argc++] = "--nvram-size";
		argv[argc++] = (char *)cfg.nvram_size;
		if (replay_always)
			argv[argc++] = "--replay=always";
		if (srv.no_destage)
			argv[argc++] = "--no-destage";
	}
	argv[argc] = NULL;

	srv.starts++;
	verf_known[0] = verf_known[1] = 0;	/* a new verifier per start */
	/* The log on /dev/shm is persistent memory for presto-nfsd only with
	 * PMEM_IS_PMEM_FORCE=1 (as `make run` sets it): then changes run on
	 * its event loop thread. Without it every persist is an msync and
	 * changes run on the workers. Starts alternate between the two, so
	 * the kills hit both paths, and a log written by one is recovered by
	 * the other. */
	int pmem_force = cfg.presto && srv.starts % 2 == 1;
	hist_add("- S: server start %d%s%s%s%s", srv.starts, cfg.presto && replay_always ? " --replay=always" : "",
		 pmem_force ? " (log as pmem)" : "", srv.boot_file[0] ? " (fake boot id)" : "",
		 wait_ready ? "" : " (killed during start-up)");
	if (wait_ready && srv.starts > 1)
		script_mark_restart(cfg.presto && replay_always);
	server_logf("=== crash_nfs: start %d%s:", srv.starts, srv.boot_file[0] ? " (fake boot id)" : "");
	for (int i = 0; i < argc; i++)
		server_logf(" %s", argv[i]);
	server_logf("\n");
	start_off = stat(srv.log, &st) == 0 ? st.st_size : 0;
	fflush(stdout);
	srv.pid = fork();
	if (srv.pid < 0) {
		failf("fork: %s", strerror(errno));
		return -1;
	}
	if (srv.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = open(srv.log, O_WRONLY | O_APPEND | O_CREAT, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0)
			dup2(fd, 0);
		if (pmem_force)
			setenv("PMEM_IS_PMEM_FORCE", "1", 1);
		else
			unsetenv("PMEM_IS_PMEM_FORCE");
		if (srv.boot_file[0] && enter_boot(srv.boot_file) < 0) {
			fprintf(stderr, "crash_nfs: fake boot id for start %d: %s\n", srv.starts, reboot_why);
			_exit(126);
		}
		execv(bin, argv);
		fprintf(stderr, "crash_nfs: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	if (!wait_ready)
		return 0;

	long long deadline = now_ms() + CR_READY_TIMEOUT_MS, slow = now_ms() + 3000;

	while (now_ms() < deadline) {
		char buf[8192];

		if (slow && now_ms() > slow && !quiet) {
			/* not a failure (yet): show where a slow start spends its time */
			info("server start %d not ready after 3 s; its threads now:", srv.starts);
			server_stacks();
			slow = 0;
		}
		ssize_t n;
		int status;

		fd = open(srv.log, O_RDONLY);
		if (fd >= 0) {
			n = pread(fd, buf, sizeof(buf) - 1, start_off);
			close(fd);
			if (n > 0) {
				char *p;

				buf[n] = '\0';
				p = strstr(buf, "presto-nfsd: ready nfs=");
				if (p && strchr(p, '\n')) {
					int a, b;

					if (sscanf(p, "presto-nfsd: ready nfs=%d mount=%d", &a, &b) == 2) {
						if (srv.nfs_port && (a != srv.nfs_port || b != srv.mount_port))
							failf("server came up on ports %d/%d, asked for %d/%d", a, b,
							      srv.nfs_port, srv.mount_port);
						srv.nfs_port = a;
						srv.mount_port = b;
						return 0;
					}
				}
			}
		}
		if (waitpid(srv.pid, &status, WNOHANG) == srv.pid) {
			srv.pid = 0;
			failf("server start %d exited before it was ready (status 0x%x)", srv.starts, status);
			server_log_tail(40);
			return -1;
		}
		usleep(5000);
	}
	failf("server start %d not ready within %d ms; its threads:", srv.starts, CR_READY_TIMEOUT_MS);
	server_stacks();
	server_log_tail(40);
	kill(srv.pid, SIGKILL);
	waitpid(srv.pid, NULL, 0);
	srv.pid = 0;
	return -1;
}

/* server_kill -- SIGKILL and reap; a server that had already died by itself
 * is a failure */
static void server_kill(void)
{
	int status;

	if (srv.pid <= 0)
		return;
	if (waitpid(srv.pid, &status, WNOHANG) == srv.pid) {
		failf("the server had died by itself (status 0x%x) before the kill", status);
		server_log_tail(40);
		srv.pid = 0;
		return;
	}
	kill(srv.pid, SIGKILL);
	waitpid(srv.pid, &status, 0);
	srv.pid = 0;
	hist_add("- K: SIGKILL");
	server_logf("=== crash_nfs: SIGKILL\n");
}

/* server_stop -- SIGTERM: the server flushes and exits 0 (10 s) */
static int server_stop(void)
{
	long long deadline = now_ms() + CR_RPC_TIMEOUT_MS;
	int status;

	if (srv.pid <= 0)
		return 0;
	kill(srv.pid, SIGTERM);
	hist_add("- K: SIGTERM");
	while (now_ms() < deadline) {
		if (waitpid(srv.pid, &status, WNOHANG) == srv.pid) {
			srv.pid = 0;
			server_logf("=== crash_nfs: stopped by SIGTERM (status 0x%x)\n", status);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				failf("SIGTERM: the server exited with status 0x%x, not 0", status);
				server_log_tail(30);
				return -1;
			}
			return 0;
		}
		usleep(5000);
	}
	failf("SIGTERM: the server did not exit within %d ms", CR_RPC_TIMEOUT_MS);
	server_log_tail(30);
	kill(srv.pid, SIGKILL);
	waitpid(srv.pid, NULL, 0);
	srv.pid = 0;
	return -1;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void thaw(void)
{
	char cmd[512];

	if (!frozen)
		return;
	snprintf(cmd, sizeof(cmd), "fsfreeze -u '%s'", cfg.export_dir);
	if (system(cmd) != 0)
		printf("crash_nfs: %s failed\n", cmd);
	frozen = 0;
}

static void cleanup(void)
{
	thaw();
	if (srv.pid > 0) {
		kill(srv.pid, SIGKILL);
		waitpid(srv.pid, NULL, 0);
		srv.pid = 0;
	}
	if (srv.nvram[0])
		unlink(srv.nvram);
	if (srv.dir[0] && !getenv("CRASH_KEEP"))
		nftw(srv.dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	srv.dir[0] = '\0';
}

/* emergency -- SIGALRM (the watchdog), SIGTERM, SIGINT: kill the server,
 * thaw, remove the run's files; only async-signal-safe calls (kill, fork,
 * execv, waitpid, unlink, write) */
static void emergency(int sig)
{
	static const char alarm_msg[] = "crash_nfs: watchdog expired\n0 passed, 1 failed\n";
	static const char term_msg[] = "crash_nfs: stopped by a signal\n0 passed, 1 failed\n";
	pid_t p = -1;

	if (sig == SIGALRM) {
		if (write(1, alarm_msg, sizeof(alarm_msg) - 1) < 0) {
			/* nothing to do */
		}
	} else if (write(1, term_msg, sizeof(term_msg) - 1) < 0) {
		/* nothing to do */
	}
	if (srv.pid > 0)
		kill(srv.pid, SIGKILL);
	if (frozen && (p = fork()) == 0) {
		execlp("fsfreeze", "fsfreeze", "-u", cfg.export_dir, (char *)NULL);
		_exit(127);
	} else if (frozen && p > 0)
		waitpid(p, NULL, 0);
	if (srv.nvram[0])
		unlink(srv.nvram);
	if (srv.dir[0] && !getenv("CRASH_KEEP") && (p = fork()) == 0) {
		char *argv[] = { "rm", "-rf", srv.dir, NULL };

		execv("/bin/rm", argv);
		_exit(127);
	} else if (srv.dir[0] && p > 0)
		waitpid(p, NULL, 0);
	_exit(1);
}

static int port_free(int port)
{
	struct sockaddr_in a;
	struct sockaddr_in6 a6;
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	if (!ok || !cfg.mixed)
		return ok;
	/* --presto mixed: the server listens on ::1 too */
	fd = socket(AF_INET6, SOCK_STREAM, 0);
	memset(&a6, 0, sizeof(a6));
	a6.sin6_family = AF_INET6;
	a6.sin6_port = htons(port);
	a6.sin6_addr = in6addr_loopback;
	ok = fd >= 0 && bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* pick_ports -- a fixed pair from 20070-20089 for the whole run, so that
 * clients reconnect to the restarted server. Not ephemeral ports: other
 * tests' servers (port 0) and our own client sockets could take one while
 * the server is down. A lock file per pair keeps two crash_nfs apart. */
static int port_lock_fd = -1;

static int pick_ports(void)
{
	for (int k = 0; k < 10; k++) {
		int p = 20070 + 2 * k, fd;
		char lock[64];

		snprintf(lock, sizeof(lock), "/tmp/presto-crash-ports-%d.lock", p);
		fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0 || !port_free(p) || !port_free(p + 1)) {
			close(fd);
			continue;
		}
		port_lock_fd = fd;
		srv.nfs_port = p;
		srv.mount_port = p + 1;
		return 0;
	}
	failf("no free port pair in 20070-20089");
	return -1;
}

/* server_setup -- a fresh temporary directory, exports file, log path */
static int server_setup(const char *tag)
{
	FILE *f;

	memset(&srv, 0, sizeof(srv));
	snprintf(srv.dir, sizeof(srv.dir), "/tmp/presto-crash-%s-XXXXXX", tag);
	if (!mkdtemp(srv.dir)) {
		failf("mkdtemp: %s", strerror(errno));
		srv.dir[0] = '\0';
		return -1;
	}
	if (cfg.export_dir && !strcmp(tag, "powercut")) {
		snprintf(srv.export, sizeof(srv.export), "%s", cfg.export_dir);
	} else {
		snprintf(srv.export, sizeof(srv.export), "%s/export", srv.dir);
		srv.owns_export = 1;
		if (mkdir(srv.export, 0755) < 0) {
			failf("mkdir %s: %s", srv.export, strerror(errno));
			return -1;
		}
	}
	snprintf(srv.state, sizeof(srv.state), "%s/state", srv.dir);
	snprintf(srv.log, sizeof(srv.log), "%s/server.log", srv.dir);
	snprintf(srv.exports_file, sizeof(srv.exports_file), "%s/exports", srv.dir);
	snprintf(srv.nvram, sizeof(srv.nvram), "/dev/shm/presto-crash-%s-%d.nvram", tag, (int)getpid());
	unlink(srv.nvram);
	f = fopen(srv.exports_file, "w");
	if (!f)
		return -1;
	if (cfg.mixed)
		fprintf(f, "%s 127.0.0.1(rw,insecure,no_root_squash) ::1(rw,insecure,no_root_squash,nopresto)\n",
			srv.export);
	else
		fprintf(f, "%s 127.0.0.1(rw,insecure,no_root_squash)\n", srv.export);
	fclose(f);
	if (port_lock_fd >= 0) {
		close(port_lock_fd);
		port_lock_fd = -1;
	}
	return pick_ports();
}

/* -------------------------------------------------------------------- rpc */

struct fh {
	uint32_t len;
	unsigned char d[CR_FH_MAX];
};

enum proc {
	P_NONE, P_MNT, P_GETATTR, P_SETATTR, P_LOOKUP, P_READLINK, P_READ, P_WRITE, P_CREATE,
	P_MKDIR, P_SYMLINK, P_REMOVE, P_RMDIR, P_RENAME, P_LINK, P_READDIR,
};

/* res -- what a reply says, copied out of libnfs's buffer (freed when the
 * callback returns) */
struct res {
	int done;
	enum proc proc;
	int rpc_status;
	char err[160];
	int status;			/* nfsstat3, mountstat3 for MNT */
	int has_fh;
	struct fh fh;
	int has_attr;
	fattr3 attr;
	uint32_t count, committed;
	char wverf[NFS3_WRITEVERFSIZE];	/* WRITE */
	int eof;
	unsigned char *data;		/* READ, READLINK (NUL-terminated) */
	size_t dlen;
	char (*names)[CR_NAME_MAX + 8];	/* READDIR */
	int nnames;
	uint64_t cookie;
	char verf[NFS3_COOKIEVERFSIZE];
};

static void res_reset(struct res *r, enum proc p)
{
	free(r->data);
	free(r->names);
	memset(r, 0, sizeof(*r));
	r->proc = p;
}

static void copy_post_fh(struct res *r, const post_op_fh3 *p)
{
	r->has_fh = p->handle_follows;
	if (r->has_fh) {
		r->fh.len = p->post_op_fh3_u.handle.data.data_len;
		if (r->fh.len > CR_FH_MAX)
			r->fh.len = CR_FH_MAX;
		memcpy(r->fh.d, p->post_op_fh3_u.handle.data.data_val, r->fh.len);
	}
}

static void copy_post_attr(struct res *r, const post_op_attr *a)
{
	r->has_attr = a->attributes_follow;
	if (r->has_attr)
		r->attr = a->post_op_attr_u.attributes;
}

static void res_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct res *r = priv;

	(void)rpc;
	r->done = 1;
	r->rpc_status = status;
	if (status != RPC_STATUS_SUCCESS) {
		snprintf(r->err, sizeof(r->err), "%s",
			 status == RPC_STATUS_ERROR && data ? (char *)data :
			 status == RPC_STATUS_TIMEOUT ? "timeout" : "cancelled");
		return;
	}
	switch (r->proc) {
	case P_MNT: {
		mountres3 *m = data;

		r->status = m->fhs_status;
		if (m->fhs_status == MNT3_OK) {
			fhandle3 *f = &m->mountres3_u.mountinfo.fhandle;

			r->has_fh = 1;
			r->fh.len = f->fhandle3_len > CR_FH_MAX ? CR_FH_MAX : f->fhandle3_len;
			memcpy(r->fh.d, f->fhandle3_val, r->fh.len);
		}
		break;
	}
	case P_GETATTR: {
		GETATTR3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			r->has_attr = 1;
			r->attr = x->GETATTR3res_u.resok.obj_attributes;
		}
		break;
	}
	case P_SETATTR:
		r->status = ((SETATTR3res *)data)->status;
		break;
	case P_LOOKUP: {
		LOOKUP3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			nfs_fh3 *f = &x->LOOKUP3res_u.resok.object;

			r->has_fh = 1;
			r->fh.len = f->data.data_len > CR_FH_MAX ? CR_FH_MAX : f->data.data_len;
			memcpy(r->fh.d, f->data.data_val, r->fh.len);
			copy_post_attr(r, &x->LOOKUP3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_READLINK: {
		READLINK3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			const char *t = x->READLINK3res_u.resok.data;

			r->dlen = strlen(t);
			r->data = malloc(r->dlen + 1);
			memcpy(r->data, t, r->dlen + 1);
		}
		break;
	}
	case P_READ: {
		READ3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			READ3resok *ok = &x->READ3res_u.resok;

			r->count = ok->count;
			r->eof = ok->eof;
			r->dlen = ok->data.data_len;
			r->data = malloc(r->dlen + 1);
			if (r->dlen)
				memcpy(r->data, ok->data.data_val, r->dlen);
			copy_post_attr(r, &ok->file_attributes);
		}
		break;
	}
	case P_WRITE: {
		WRITE3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			r->count = x->WRITE3res_u.resok.count;
			r->committed = x->WRITE3res_u.resok.committed;
			memcpy(r->wverf, x->WRITE3res_u.resok.verf, sizeof(r->wverf));
		}
		break;
	}
	case P_CREATE: {
		CREATE3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			copy_post_fh(r, &x->CREATE3res_u.resok.obj);
			copy_post_attr(r, &x->CREATE3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_MKDIR: {
		MKDIR3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			copy_post_fh(r, &x->MKDIR3res_u.resok.obj);
			copy_post_attr(r, &x->MKDIR3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_SYMLINK: {
		SYMLINK3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			copy_post_fh(r, &x->SYMLINK3res_u.resok.obj);
			copy_post_attr(r, &x->SYMLINK3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_REMOVE:
		r->status = ((REMOVE3res *)data)->status;
		break;
	case P_RMDIR:
		r->status = ((RMDIR3res *)data)->status;
		break;
	case P_RENAME:
		r->status = ((RENAME3res *)data)->status;
		break;
	case P_LINK:
		r->status = ((LINK3res *)data)->status;
		break;
	case P_READDIR: {
		READDIR3res *x = data;

		r->status = x->status;
		if (x->status == NFS3_OK) {
			READDIR3resok *ok = &x->READDIR3res_u.resok;
			const void *p;
			entry3 e;
			int n = 0;

			/* libnfs leaves list entries unaligned: copy each out */
			for (p = ok->reply.entries; p; p = e.nextentry) {
				memcpy(&e, p, sizeof(e));
				n++;
			}
			r->names = calloc(n + 1, sizeof(*r->names));
			for (p = ok->reply.entries; p; p = e.nextentry) {
				memcpy(&e, p, sizeof(e));
				snprintf(r->names[r->nnames++], sizeof(r->names[0]), "%s", e.name);
				r->cookie = e.cookie;
			}
			r->eof = ok->reply.eof;
			memcpy(r->verf, ok->cookieverf, sizeof(r->verf));
		}
		break;
	}
	case P_NONE:
		break;
	}
}

/* rpc_wait -- service one context until *done or the deadline; -1 on a dead
 * connection or timeout */
static int rpc_wait(struct rpc_context *rpc, const int *done, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;

	while (!*done) {
		struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
		long long left = deadline - now_ms();
		int r;

		if (left <= 0)
			return -1;
		r = poll(&p, 1, left > 100 ? 100 : (int)left);
		if (r < 0 && errno != EINTR)
			return -1;
		if (rpc_service(rpc, r > 0 ? p.revents : 0) < 0)
			return *done ? 0 : -1;
	}
	return 0;
}

static void conn_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct res *r = priv;

	(void)rpc;
	(void)data;
	r->rpc_status = status;
	r->done = 1;
}

/* The addresses a client connects from and to: 127.0.0.1, whose client line
 * has presto on, and, with --presto mixed, ::1, whose line says nopresto
 * (the server logs those calls as well, flushes them and replies after) */
static const char *const via_addr[2] = { "127.0.0.1", "::1" };

static struct rpc_context *rpc_open_via(int via, int port, int prog)
{
	struct rpc_context *rpc = rpc_init_context();
	struct res r;

	memset(&r, 0, sizeof(r));
	if (!rpc)
		return NULL;
	if (rpc_connect_port_async(rpc, via_addr[via], port, prog, 3, conn_cb, &r) < 0 ||
	    rpc_wait(rpc, &r.done, CR_RPC_TIMEOUT_MS) < 0 || r.rpc_status != RPC_STATUS_SUCCESS) {
		char cmd[128];

		failf("cannot connect to program %d on %s port %d: %s; sockets on that port:", prog,
		      via_addr[via], port, rpc_get_error(rpc));
		fflush(stdout);
		snprintf(cmd, sizeof(cmd), "ss -tanp | grep ':%d '", port);
		if (system(cmd) < 0)
			printf("(ss failed)\n");
		rpc_destroy_context(rpc);
		return NULL;
	}
	return rpc;
}

static struct rpc_context *rpc_open(int port, int prog)
{
	return rpc_open_via(0, port, prog);
}

static nfs_fh3 fh3(const struct fh *f)
{
	nfs_fh3 x;

	x.data.data_len = f->len;
	x.data.data_val = (char *)f->d;
	return x;
}

static int fh_eq(const struct fh *a, const struct fh *b)
{
	return a->len == b->len && !memcmp(a->d, b->d, a->len);
}

static const char *fh_hex(const struct fh *f)
{
	static char buf[4][2 * CR_FH_MAX + 1];
	static int k;
	char *b = buf[k++ & 3];

	for (uint32_t i = 0; i < f->len; i++)
		sprintf(b + 2 * i, "%02x", f->d[i]);
	b[2 * f->len] = '\0';
	return b;
}

/* ------------------------------------------------------------ credentials */

/* Clients' credentials (AUTH_UNIX): even clients are root, odd ones uid
 * 2000+N, gid 3000+N, groups {3000+N, 3999}, each owning its subtree (the
 * checker, root, chowns /wN after making it). A script sets its client's
 * with "U UID GID". Files a client creates are its own: every mode the
 * workload sets leaves the owner rwx on directories and rw on files, and a
 * SETATTR of the owner (sent as root) keeps a non-root client's files its
 * own, so the model's ops stay allowed. */
#define CR_GROUP_SHARED 3999u

struct cred {
	uint32_t uid, gid;
};

static struct cred wcred[CR_WORKERS_MAX];

static struct cred default_cred(int w)
{
	struct cred c = { 0, 0 };

	if (w % 2) {
		c.uid = 2000 + w;
		c.gid = 3000 + w;
	}
	return c;
}

/* set_auth -- calls queued on rpc from now on carry these credentials */
static void set_auth(struct rpc_context *rpc, struct cred c)
{
	uint32_t groups[2] = { c.gid, CR_GROUP_SHARED };
	struct AUTH *a = libnfs_authunix_create("crash_nfs", c.uid, c.gid, c.uid ? 2 : 0, c.uid ? groups : NULL);

	if (a)
		rpc_set_auth(rpc, a);
}

/* ------------------------------------------------------------------ model */

enum { T_REG = NF3REG, T_DIR = NF3DIR, T_LNK = NF3LNK };

struct obj {
	int type;
	int alive;
	int worker;
	uint32_t mode;
	int mode_unknown;		/* created by a "maybe" op: mode may be the umask's */
	uint32_t uid, gid;		/* owner */
	int owner_unknown;		/* the export root */
	int bad;			/* a held handle failed its check */
	unsigned char *data;		/* T_REG */
	uint32_t size;
	char target[CR_TARGET_MAX + 1];	/* T_LNK */
	int mtime_known, atime_known;
	nfstime3 mtime, atime;
	struct fh fh[CR_HANDLES];
	int nfh;
	uint64_t fileid;		/* from the reply that created it */
	int fileid_known;
};

struct dent {
	int parent;			/* obj id of the directory */
	int obj;
	char name[CR_NAME_MAX];
};

struct model {
	struct obj *o;
	int no, co;
	struct dent *d;
	int nd, cd;
	int root;			/* obj id of the export root */
	int wroot[CR_WORKERS_MAX];	/* obj id of each client's subtree */
	struct fh dead[CR_DEAD_MAX];	/* handles of objects an acknowledged op removed */
	int dead_obj[CR_DEAD_MAX];	/* ... and whose they were */
	int ndead;
};

static struct model M;
static int powercut_mode;		/* objects may be made anew by replay: a LOOKUP's
					 * fileid differing from a held handle's is counted,
					 * not a failure */

static int model_new_obj(struct model *m, int type, int worker, uint32_t mode)
{
	struct obj *o;

	if (m->no == m->co) {
		m->co = m->co ? 2 * m->co : 64;
		m->o = realloc(m->o, m->co * sizeof(*m->o));
	}
	o = &m->o[m->no];
	memset(o, 0, sizeof(*o));
	o->type = type;
	o->alive = 1;
	o->worker = worker;
	o->mode = mode;
	return m->no++;
}

static int model_lookup(const struct model *m, int dir, const char *name)
{
	for (int i = 0; i < m->nd; i++)
		if (m->d[i].parent == dir && !strcmp(m->d[i].name, name))
			return i;
	return -1;
}

static void model_add_dent(struct model *m, int dir, const char *name, int obj)
{
	if (m->nd == m->cd) {
		m->cd = m->cd ? 2 * m->cd : 64;
		m->d = realloc(m->d, m->cd * sizeof(*m->d));
	}
	m->d[m->nd].parent = dir;
	m->d[m->nd].obj = obj;
	snprintf(m->d[m->nd].name, CR_NAME_MAX, "%s", name);
	m->nd++;
}

static int model_nlink(const struct model *m, int obj)
{
	int n = 0;

	for (int i = 0; i < m->nd; i++)
		if (m->d[i].obj == obj)
			n++;
	return n;
}

static void model_add_fh(struct obj *o, const struct fh *f)
{
	for (int i = 0; i < o->nfh; i++)
		if (fh_eq(&o->fh[i], f))
			return;
	if (o->nfh < CR_HANDLES)
		o->fh[o->nfh++] = *f;
	else
		o->fh[CR_HANDLES - 1] = *f;	/* keep the first ones, rotate the last */
}

/* model_unlink -- drop entry i; an object without names dies and its
 * handles become "dead" handles */
static void model_unlink(struct model *m, int i)
{
	int obj = m->d[i].obj;

	m->d[i] = m->d[--m->nd];
	if (m->o[obj].type == T_DIR || model_nlink(m, obj) == 0) {
		struct obj *o = &m->o[obj];

		o->alive = 0;
		for (int k = 0; k < o->nfh; k++) {
			if (m->ndead == CR_DEAD_MAX) {
				memmove(m->dead, m->dead + 1, (CR_DEAD_MAX - 1) * sizeof(m->dead[0]));
				memmove(m->dead_obj, m->dead_obj + 1, (CR_DEAD_MAX - 1) * sizeof(m->dead_obj[0]));
				m->ndead--;
			}
			m->dead_obj[m->ndead] = obj;
			m->dead[m->ndead++] = o->fh[k];
		}
		free(o->data);
		o->data = NULL;
	}
}

static void model_free(struct model *m)
{
	for (int i = 0; i < m->no; i++)
		free(m->o[i].data);
	free(m->o);
	free(m->d);
	memset(m, 0, sizeof(*m));
}

static void model_clone(struct model *dst, const struct model *src)
{
	*dst = *src;
	dst->o = malloc(src->co * sizeof(*dst->o));
	memcpy(dst->o, src->o, src->no * sizeof(*dst->o));
	for (int i = 0; i < src->no; i++)
		if (src->o[i].data) {
			dst->o[i].data = malloc(CR_FILE_MAX);
			memcpy(dst->o[i].data, src->o[i].data, CR_FILE_MAX);
		}
	dst->d = malloc(src->cd * sizeof(*dst->d));
	memcpy(dst->d, src->d, src->nd * sizeof(*dst->d));
}

/* model_path -- "w0/d3/f1" of an object's first name ("?/..." when it has
 * none) */
static const char *model_path(const struct model *m, int obj)
{
	static char bufs[4][512];
	static int k;
	char *b = bufs[k++ & 3];
	const char *part[64];
	int n = 0;
	size_t len = 0;

	while (obj != m->root && n < 64) {
		int i;

		for (i = 0; i < m->nd; i++)
			if (m->d[i].obj == obj)
				break;
		if (i == m->nd) {
			part[n++] = "?";
			break;
		}
		part[n++] = m->d[i].name;
		obj = m->d[i].parent;
	}
	b[0] = '\0';
	while (n-- > 0) {
		size_t l = strlen(part[n]);

		if (len + l + 2 > sizeof(bufs[0]))
			break;
		if (len)
			b[len++] = '/';
		memcpy(b + len, part[n], l);
		len += l;
		b[len] = '\0';
	}
	return b;
}

/* -------------------------------------------------------------- operations */

enum opkind {
	OP_CREATE, OP_WRITE, OP_SETSIZE, OP_SETMODE, OP_SETTIMES, OP_RENAME, OP_LINK, OP_SYMLINK,
	OP_REMOVE, OP_MKDIR, OP_RMDIR, OP_SETOWNER, OP_NKINDS,
};

static const char *op_name[] = {
	"create", "write", "setattr-size", "setattr-mode", "setattr-times", "rename", "link",
	"symlink", "remove", "mkdir", "rmdir", "setattr-owner",
};

struct op {
	enum opkind kind;
	int worker;
	int dir;			/* obj id: directory of name */
	char name[CR_NAME_MAX];
	int dir2;			/* RENAME target directory, LINK: target directory */
	char name2[CR_NAME_MAX];
	int obj;			/* WRITE, SETATTR, LINK source */
	uint64_t off;
	uint32_t len, seed;
	uint32_t mode;
	uint32_t size;
	int server_time;		/* SETTIMES: SET_TO_SERVER_TIME */
	int set_uid, set_gid;		/* SETOWNER (always sent as root) */
	uint32_t uid, gid;
	nfstime3 atime, mtime;
	char target[CR_TARGET_MAX + 1];
	int seq;			/* this client's op number */
	int via;			/* sent over via_addr[via] (1: ::1, presto off) */
};


/* owner_strs -- a SETOWNER's uid and gid as text, "-" for one not set */
static void owner_strs(const struct op *op, char u[16], char g[16])
{
	strcpy(u, "-");
	strcpy(g, "-");
	if (op->set_uid)
		snprintf(u, 16, "%u", op->uid);
	if (op->set_gid)
		snprintf(g, 16, "%u", op->gid);
}
static const char *op_desc(const struct model *m, const struct op *op)
{
	static char b[2][768];
	static int k;
	char *s = b[k++ & 1];
	const char *dp = model_path(m, op->dir);

	switch (op->kind) {
	case OP_CREATE:
	case OP_MKDIR:
		snprintf(s, 768, "w%d#%d %s %s/%s mode %04o", op->worker, op->seq, op_name[op->kind], dp,
			 op->name, op->mode);
		break;
	case OP_SYMLINK:
		snprintf(s, 768, "w%d#%d symlink %s/%s -> %s", op->worker, op->seq, dp, op->name,
			 op->target);
		break;
	case OP_REMOVE:
	case OP_RMDIR:
		snprintf(s, 768, "w%d#%d %s %s/%s", op->worker, op->seq, op_name[op->kind], dp, op->name);
		break;
	case OP_RENAME:
		snprintf(s, 768, "w%d#%d rename %s/%s -> %s/%s", op->worker, op->seq, dp, op->name,
			 model_path(m, op->dir2), op->name2);
		break;
	case OP_LINK:
		snprintf(s, 768, "w%d#%d link %s -> %s/%s", op->worker, op->seq, model_path(m, op->obj),
			 model_path(m, op->dir2), op->name2);
		break;
	case OP_WRITE:
		snprintf(s, 768, "w%d#%d write %s off %" PRIu64 " len %u seed %u", op->worker, op->seq,
			 model_path(m, op->obj), op->off, op->len, op->seed);
		break;
	case OP_SETSIZE:
		snprintf(s, 768, "w%d#%d setattr %s size %u", op->worker, op->seq, model_path(m, op->obj),
			 op->size);
		break;
	case OP_SETMODE:
		snprintf(s, 768, "w%d#%d setattr %s mode %04o", op->worker, op->seq,
			 model_path(m, op->obj), op->mode);
		break;
	case OP_SETOWNER: {
		char u[16], g[16];

		owner_strs(op, u, g);
		snprintf(s, 768, "w%d#%d setattr %s owner %s:%s (as root)", op->worker, op->seq,
			 model_path(m, op->obj), u, g);
		break;
	}
	case OP_SETTIMES:
		if (op->server_time)
			snprintf(s, 768, "w%d#%d setattr %s times=server", op->worker, op->seq,
				 model_path(m, op->obj));
		else
			snprintf(s, 768, "w%d#%d setattr %s atime %u.%09u mtime %u.%09u", op->worker,
				 op->seq, model_path(m, op->obj), op->atime.seconds, op->atime.nseconds,
				 op->mtime.seconds, op->mtime.nseconds);
		break;
	default:
		snprintf(s, 768, "?");
	}
	if (cfg.mixed && op->via)
		snprintf(s + strlen(s), 768 - strlen(s), " [::1, nopresto]");
	return s;
}

static void dir_changed(struct model *m, int dir)
{
	m->o[dir].mtime_known = 0;
}

/* model_apply -- the effect of a successful op; fh and attr are the new
 * object's handle and attributes from the reply (or NULL). maybe: the outcome is guessed, not
 * acknowledged (modes of created objects are then not compared: a killed
 * create may stop between creat and chmod). */
static void model_apply(struct model *m, const struct op *op, const struct fh *fh,
			const fattr3 *attr, uint32_t count, int maybe)
{
	struct obj *o;
	int i, obj;

	switch (op->kind) {
	case OP_CREATE:
	case OP_MKDIR:
	case OP_SYMLINK:
		obj = model_new_obj(m, op->kind == OP_CREATE ? T_REG : op->kind == OP_MKDIR ? T_DIR : T_LNK,
				    op->worker, op->mode);
		o = &m->o[obj];
		o->mode_unknown = maybe;
		o->uid = wcred[op->worker].uid;		/* created as the client */
		o->gid = wcred[op->worker].gid;
		if (o->type == T_REG)
			o->data = calloc(1, CR_FILE_MAX);
		if (o->type == T_LNK)
			snprintf(o->target, sizeof(o->target), "%s", op->target);
		if (fh)
			model_add_fh(o, fh);
		if (attr) {
			/* the fileid the client saw, which a held handle must
			 * keep (a replay that made the object anew would
			 * redirect the handle to another inode) */
			o->fileid = attr->fileid;
			o->fileid_known = 1;
		}
		model_add_dent(m, op->dir, op->name, obj);
		dir_changed(m, op->dir);
		break;
	case OP_WRITE:
		o = &m->o[op->obj];
		if (count > op->len)
			count = op->len;
		pattern(o->data + op->off, op->seed, op->off, count);
		if (op->off + count > o->size)
			o->size = op->off + count;
		o->mtime_known = 0;
		break;
	case OP_SETSIZE:
		o = &m->o[op->obj];
		if (op->size < o->size)
			memset(o->data + op->size, 0, o->size - op->size);
		o->size = op->size;
		o->mtime_known = 0;
		break;
	case OP_SETMODE:
		m->o[op->obj].mode = op->mode;
		m->o[op->obj].mode_unknown = 0;
		break;
	case OP_SETOWNER:
		if (op->set_uid)
			m->o[op->obj].uid = op->uid;
		if (op->set_gid)
			m->o[op->obj].gid = op->gid;
		break;
	case OP_SETTIMES:
		o = &m->o[op->obj];
		o->mtime_known = o->atime_known = !op->server_time;
		o->mtime = op->mtime;
		o->atime = op->atime;
		break;
	case OP_RENAME: {
		int src = model_lookup(m, op->dir, op->name);
		int dst = model_lookup(m, op->dir2, op->name2);

		if (src < 0)
			break;
		obj = m->d[src].obj;
		if (dst >= 0 && m->d[dst].obj == obj)
			break;		/* two links of one file: POSIX says do nothing */
		if (dst >= 0) {
			model_unlink(m, dst);
			src = model_lookup(m, op->dir, op->name);
		}
		m->d[src].parent = op->dir2;
		snprintf(m->d[src].name, CR_NAME_MAX, "%s", op->name2);
		dir_changed(m, op->dir);
		dir_changed(m, op->dir2);
		if (m->o[obj].type == T_DIR)
			m->o[obj].mtime_known = 0;
		break;
	}
	case OP_LINK:
		model_add_dent(m, op->dir2, op->name2, op->obj);
		dir_changed(m, op->dir2);
		break;
	case OP_REMOVE:
	case OP_RMDIR:
		i = model_lookup(m, op->dir, op->name);
		if (i >= 0)
			model_unlink(m, i);
		dir_changed(m, op->dir);
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------ choosing an op */

struct wstat {
	int dirs[CR_DIRS_MAX * 2];
	int ndirs;
	int ents[CR_ENTRIES_MAX * 2];	/* dent indexes in this subtree */
	int nents;
};

static int in_subtree(const struct model *m, int obj, int top)
{
	int guard = 0;

	while (guard++ < 64) {
		int i;

		if (obj == top)
			return 1;
		if (obj == m->root)
			return 0;
		for (i = 0; i < m->nd; i++)
			if (m->d[i].obj == obj && m->o[obj].type == T_DIR)
				break;
		if (i == m->nd)
			return 0;
		obj = m->d[i].parent;
	}
	return 0;
}

static void worker_stat(const struct model *m, int w, struct wstat *s)
{
	s->ndirs = 0;
	s->nents = 0;
	s->dirs[s->ndirs++] = m->wroot[w];
	for (int i = 0; i < m->nd; i++) {
		const struct obj *o = &m->o[m->d[i].obj];

		if (o->worker != w || m->d[i].obj == m->wroot[w])
			continue;
		if (s->nents < (int)(sizeof(s->ents) / sizeof(s->ents[0])))
			s->ents[s->nents++] = i;
		if (o->type == T_DIR && s->ndirs < (int)(sizeof(s->dirs) / sizeof(s->dirs[0])))
			s->dirs[s->ndirs++] = m->d[i].obj;
	}
}

static void fresh_name(const struct model *m, int dir, const char *prefix, char *out)
{
	for (int t = 0; t < 20; t++) {
		snprintf(out, CR_NAME_MAX, "%s%u", prefix, rnd(24));
		if (model_lookup(m, dir, out) < 0)
			return;
	}
	for (unsigned k = 100;; k++) {
		snprintf(out, CR_NAME_MAX, "%s%u", prefix, k);
		if (model_lookup(m, dir, out) < 0)
			return;
	}
}

static const uint32_t file_modes[] = { 0644, 0600, 0755, 0640, 0664, 0700, 0604, 0750 };
static const uint32_t dir_modes[] = { 0755, 0700, 0775, 0750 };

/* choose_op -- an operation that the model says must succeed; -1 if none
 * (retry) */
static int choose_op(const struct model *m, int w, int writers_only, struct op *op)
{
	struct wstat s;
	int files[CR_ENTRIES_MAX * 2], nfiles = 0, empty_dirs[CR_DIRS_MAX * 2], nempty = 0;
	unsigned r;

	worker_stat(m, w, &s);
	for (int k = 0; k < s.nents; k++) {
		int obj = m->d[s.ents[k]].obj;

		if (m->o[obj].type == T_REG)
			files[nfiles++] = obj;
	}
	for (int k = 1; k < s.ndirs; k++) {
		int empty = 1;

		for (int i = 0; i < m->nd; i++)
			if (m->d[i].parent == s.dirs[k])
				empty = 0;
		if (empty)
			empty_dirs[nempty++] = s.dirs[k];
	}
	memset(op, 0, sizeof(*op));
	op->worker = w;
	r = rnd(100);
	if (writers_only) {
		if (nfiles < 6 || r < 3)
			op->kind = nfiles < 12 ? OP_CREATE : OP_SETSIZE;
		else
			op->kind = OP_WRITE;
	} else if (r < 13)
		op->kind = OP_CREATE;
	else if (r < 35)
		op->kind = OP_WRITE;
	else if (r < 40)
		op->kind = OP_SETSIZE;
	else if (r < 44)
		op->kind = OP_SETMODE;
	else if (r < 48)
		op->kind = OP_SETTIMES;
	else if (r < 51)
		op->kind = OP_SETOWNER;
	else if (r < 62)
		op->kind = OP_RENAME;
	else if (r < 68)
		op->kind = OP_LINK;
	else if (r < 74)
		op->kind = OP_SYMLINK;
	else if (r < 86)
		op->kind = OP_REMOVE;
	else if (r < 93)
		op->kind = OP_MKDIR;
	else
		op->kind = OP_RMDIR;

	if (s.nents >= CR_ENTRIES_MAX &&
	    (op->kind == OP_CREATE || op->kind == OP_LINK || op->kind == OP_SYMLINK || op->kind == OP_MKDIR))
		op->kind = OP_REMOVE;

	switch (op->kind) {
	case OP_CREATE:
		op->dir = s.dirs[rnd(s.ndirs)];
		fresh_name(m, op->dir, "f", op->name);
		op->mode = file_modes[rnd(8)];
		return 0;
	case OP_MKDIR:
		if (s.ndirs >= CR_DIRS_MAX)
			return -1;
		op->dir = s.dirs[rnd(s.ndirs)];
		fresh_name(m, op->dir, "d", op->name);
		op->mode = dir_modes[rnd(4)];
		return 0;
	case OP_SYMLINK: {
		static const char *targets[] = { "f1", "../f2", "/etc/passwd", "d0/f3", "no such target",
						 "." };

		op->dir = s.dirs[rnd(s.ndirs)];
		fresh_name(m, op->dir, "s", op->name);
		snprintf(op->target, sizeof(op->target), "%s.%u", targets[rnd(6)], rnd(1000));
		op->mode = 0777;
		return 0;
	}
	case OP_WRITE: {
		struct obj *o;

		if (!nfiles)
			return -1;
		op->obj = files[rnd(nfiles)];
		o = &m->o[op->obj];
		op->off = rnd(100) < 50 ? o->size : rnd(o->size + 4096);
		op->len = 1 + rnd(rnd(4) ? CR_WRITE_MAX : 600);
		if (writers_only)
			op->len = CR_WRITE_MAX - rnd(4096);
		if (op->off + op->len > CR_FILE_MAX) {
			op->off = rnd(CR_FILE_MAX / 2);
			if (op->off + op->len > CR_FILE_MAX)
				op->len = CR_FILE_MAX - op->off;
		}
		op->seed = (uint32_t)rng();
		return 0;
	}
	case OP_SETSIZE:
		if (!nfiles)
			return -1;
		op->obj = files[rnd(nfiles)];
		op->size = rnd(3) == 0 ? 0 : rnd(m->o[op->obj].size + 8192);
		if (op->size > CR_FILE_MAX)
			op->size = CR_FILE_MAX;
		return 0;
	case OP_SETMODE:
		if (s.nents == 0)
			return -1;
		op->obj = m->d[s.ents[rnd(s.nents)]].obj;
		if (m->o[op->obj].type == T_LNK)
			return -1;
		op->mode = m->o[op->obj].type == T_DIR ? dir_modes[rnd(4)] : file_modes[rnd(8)];
		return 0;
	case OP_SETOWNER: {
		static const uint32_t uids[] = { 0, 1001, 2002, 65534 }, gids[] = { 0, 1001, CR_GROUP_SHARED, 65534 };
		unsigned k = rnd(3);

		if (s.nents == 0)
			return -1;
		op->obj = m->d[s.ents[rnd(s.nents)]].obj;	/* symlinks too */
		if (wcred[w].uid == 0) {
			/* root's subtree: any owner (root may do anything there) */
			op->set_uid = k != 1;
			op->set_gid = k != 0;
			op->uid = uids[rnd(4)];
			op->gid = gids[rnd(4)];
		} else {
			/* a client's own subtree: its files stay its own */
			op->set_uid = k == 0;
			op->uid = wcred[w].uid;
			op->set_gid = 1;
			op->gid = rnd(2) ? gids[rnd(4)] : wcred[w].gid;
		}
		return 0;
	}
	case OP_SETTIMES:
		if (s.nents == 0)
			return -1;
		op->obj = m->d[s.ents[rnd(s.nents)]].obj;
		if (m->o[op->obj].type == T_LNK)
			return -1;
		op->server_time = rnd(5) == 0;
		op->atime.seconds = 1000000000 + rnd(600000000);
		op->atime.nseconds = rnd(1000000000);
		op->mtime.seconds = 1000000000 + rnd(600000000);
		op->mtime.nseconds = rnd(1000000000);
		return 0;
	case OP_RENAME: {
		int i, obj;

		if (s.nents == 0)
			return -1;
		i = s.ents[rnd(s.nents)];
		obj = m->d[i].obj;
		op->dir = m->d[i].parent;
		snprintf(op->name, CR_NAME_MAX, "%s", m->d[i].name);
		op->dir2 = s.dirs[rnd(s.ndirs)];
		if (m->o[obj].type == T_DIR) {
			if (in_subtree(m, op->dir2, obj))
				return -1;
			fresh_name(m, op->dir2, "d", op->name2);
			return 0;
		}
		op->obj = obj;
		if (rnd(3) == 0) {
			/* over an existing non-directory of the target directory (maybe a
			 * hard link of the source itself) */
			for (int t = 0; t < 8; t++) {
				int j = s.ents[rnd(s.nents)];

				if (m->d[j].parent == op->dir2 && m->o[m->d[j].obj].type != T_DIR && j != i) {
					snprintf(op->name2, CR_NAME_MAX, "%s", m->d[j].name);
					return 0;
				}
			}
		}
		fresh_name(m, op->dir2, m->o[obj].type == T_LNK ? "s" : "f", op->name2);
		return 0;
	}
	case OP_LINK:
		if (!nfiles)
			return -1;
		op->obj = files[rnd(nfiles)];
		op->dir2 = s.dirs[rnd(s.ndirs)];
		fresh_name(m, op->dir2, "l", op->name2);
		return 0;
	case OP_REMOVE: {
		int cand[CR_ENTRIES_MAX * 2], n = 0, i;

		for (int k = 0; k < s.nents; k++)
			if (m->o[m->d[s.ents[k]].obj].type != T_DIR)
				cand[n++] = s.ents[k];
		if (!n)
			return -1;
		i = cand[rnd(n)];
		op->dir = m->d[i].parent;
		snprintf(op->name, CR_NAME_MAX, "%s", m->d[i].name);
		return 0;
	}
	case OP_RMDIR: {
		int d, i;

		if (!nempty)
			return -1;
		d = empty_dirs[rnd(nempty)];
		for (i = 0; i < m->nd; i++)
			if (m->d[i].obj == d)
				break;
		op->dir = m->d[i].parent;
		snprintf(op->name, CR_NAME_MAX, "%s", m->d[i].name);
		return 0;
	}
	default:
		return -1;
	}
}

/* ---------------------------------------------------------- sending ops */

static void sattr_none(sattr3 *a)
{
	memset(a, 0, sizeof(*a));
	a->atime.set_it = DONT_CHANGE;
	a->mtime.set_it = DONT_CHANGE;
}

/* op_send -- queue the op's RPC on rpc; the reply lands in r. The handles
 * used are the first held handle of each object. */
static int op_send(struct rpc_context *rpc, const struct model *m, const struct op *op,
		   unsigned char *wbuf, struct res *r)
{
	const struct obj *dir = &m->o[op->dir], *dir2 = &m->o[op->dir2], *obj = &m->o[op->obj];

	switch (op->kind) {
	case OP_CREATE: {
		CREATE3args a;

		memset(&a, 0, sizeof(a));
		a.where.dir = fh3(&dir->fh[0]);
		a.where.name = (char *)op->name;
		a.how.mode = GUARDED;
		sattr_none(&a.how.createhow3_u.obj_attributes);
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = op->mode;
		res_reset(r, P_CREATE);
		return rpc_nfs3_create_async(rpc, res_cb, &a, r);
	}
	case OP_MKDIR: {
		MKDIR3args a;

		memset(&a, 0, sizeof(a));
		a.where.dir = fh3(&dir->fh[0]);
		a.where.name = (char *)op->name;
		sattr_none(&a.attributes);
		a.attributes.mode.set_it = 1;
		a.attributes.mode.set_mode3_u.mode = op->mode;
		res_reset(r, P_MKDIR);
		return rpc_nfs3_mkdir_async(rpc, res_cb, &a, r);
	}
	case OP_SYMLINK: {
		SYMLINK3args a;

		memset(&a, 0, sizeof(a));
		a.where.dir = fh3(&dir->fh[0]);
		a.where.name = (char *)op->name;
		sattr_none(&a.symlink.symlink_attributes);
		a.symlink.symlink_data = (char *)op->target;
		res_reset(r, P_SYMLINK);
		return rpc_nfs3_symlink_async(rpc, res_cb, &a, r);
	}
	case OP_WRITE: {
		WRITE3args a;

		memset(&a, 0, sizeof(a));
		a.file = fh3(&obj->fh[0]);
		a.offset = op->off;
		a.count = op->len;
		a.stable = FILE_SYNC;
		pattern(wbuf, op->seed, op->off, op->len);
		a.data.data_len = op->len;
		a.data.data_val = (char *)wbuf;
		res_reset(r, P_WRITE);
		return rpc_nfs3_write_async(rpc, res_cb, &a, r);
	}
	case OP_SETOWNER: {
		SETATTR3args a;
		int rc;

		memset(&a, 0, sizeof(a));
		a.object = fh3(&obj->fh[0]);
		sattr_none(&a.new_attributes);
		a.new_attributes.uid.set_it = op->set_uid;
		a.new_attributes.uid.set_uid3_u.uid = op->uid;
		a.new_attributes.gid.set_it = op->set_gid;
		a.new_attributes.gid.set_gid3_u.gid = op->gid;
		res_reset(r, P_SETATTR);
		/* as root, whoever the client is: the credentials are encoded
		 * into the call when it is queued */
		if (wcred[op->worker].uid)
			set_auth(rpc, (struct cred){ 0, 0 });
		rc = rpc_nfs3_setattr_async(rpc, res_cb, &a, r);
		if (wcred[op->worker].uid)
			set_auth(rpc, wcred[op->worker]);
		return rc;
	}
	case OP_SETSIZE:
	case OP_SETMODE:
	case OP_SETTIMES: {
		SETATTR3args a;

		memset(&a, 0, sizeof(a));
		a.object = fh3(&obj->fh[0]);
		sattr_none(&a.new_attributes);
		if (op->kind == OP_SETSIZE) {
			a.new_attributes.size.set_it = 1;
			a.new_attributes.size.set_size3_u.size = op->size;
		} else if (op->kind == OP_SETMODE) {
			a.new_attributes.mode.set_it = 1;
			a.new_attributes.mode.set_mode3_u.mode = op->mode;
		} else if (op->server_time) {
			a.new_attributes.atime.set_it = SET_TO_SERVER_TIME;
			a.new_attributes.mtime.set_it = SET_TO_SERVER_TIME;
		} else {
			a.new_attributes.atime.set_it = SET_TO_CLIENT_TIME;
			a.new_attributes.atime.set_atime_u.atime = op->atime;
			a.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
			a.new_attributes.mtime.set_mtime_u.mtime = op->mtime;
		}
		res_reset(r, P_SETATTR);
		return rpc_nfs3_setattr_async(rpc, res_cb, &a, r);
	}
	case OP_RENAME: {
		RENAME3args a;

		a.from.dir = fh3(&dir->fh[0]);
		a.from.name = (char *)op->name;
		a.to.dir = fh3(&dir2->fh[0]);
		a.to.name = (char *)op->name2;
		res_reset(r, P_RENAME);
		return rpc_nfs3_rename_async(rpc, res_cb, &a, r);
	}
	case OP_LINK: {
		LINK3args a;

		a.file = fh3(&obj->fh[0]);
		a.link.dir = fh3(&dir2->fh[0]);
		a.link.name = (char *)op->name2;
		res_reset(r, P_LINK);
		return rpc_nfs3_link_async(rpc, res_cb, &a, r);
	}
	case OP_REMOVE:
	case OP_RMDIR: {
		REMOVE3args a;

		a.object.dir = fh3(&dir->fh[0]);
		a.object.name = (char *)op->name;
		if (op->kind == OP_REMOVE) {
			res_reset(r, P_REMOVE);
			return rpc_nfs3_remove_async(rpc, res_cb, &a, r);
		}
		res_reset(r, P_RMDIR);
		return rpc_nfs3_rmdir_async(rpc, res_cb, (RMDIR3args *)&a, r);
	}
	default:
		return -1;
	}
}

/* op_needs_handles -- every object the op addresses has a handle */
static int op_has_handles(const struct model *m, const struct op *op)
{
	switch (op->kind) {
	case OP_CREATE:
	case OP_MKDIR:
	case OP_SYMLINK:
	case OP_REMOVE:
	case OP_RMDIR:
		return m->o[op->dir].nfh > 0;
	case OP_RENAME:
		return m->o[op->dir].nfh > 0 && m->o[op->dir2].nfh > 0;
	case OP_LINK:
		return m->o[op->obj].nfh > 0 && m->o[op->dir2].nfh > 0;
	default:
		return m->o[op->obj].nfh > 0;
	}
}

/* ---------------------------------------------------------------- history */

/* Every acknowledged op (as described before it applied), every kill and
 * restart: what a failure report quotes for the names that differ. */
static char (*hist)[200];
struct hkey {
	int obj;			/* object the op worked on, -1 */
	int dir[2];			/* (directory, name) pairs it changed, -1 */
	char name[2][CR_NAME_MAX];
};
static struct hkey *hkeys;
static int nhist, chist;

static void hist_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void hist_add(const char *fmt, ...)
{
	va_list ap;

	if (nhist == chist) {
		chist = chist ? 2 * chist : 4096;
		hist = realloc(hist, chist * sizeof(*hist));
		hkeys = realloc(hkeys, chist * sizeof(*hkeys));
	}
	memset(&hkeys[nhist], 0, sizeof(hkeys[0]));
	hkeys[nhist].obj = hkeys[nhist].dir[0] = hkeys[nhist].dir[1] = -1;
	va_start(ap, fmt);
	vsnprintf(hist[nhist++], sizeof(hist[0]), fmt, ap);
	va_end(ap);
}

/* hist_add_op -- an op, described and keyed before the model applies it */
static void hist_add_op(const struct op *op, const char *suffix)
{
	struct hkey *k;
	int i;

	hist_add("%s%s", op_desc(&M, op), suffix);
	k = &hkeys[nhist - 1];
	switch (op->kind) {
	case OP_CREATE:
	case OP_MKDIR:
	case OP_SYMLINK:
		k->obj = suffix[0] ? -1 : M.no;	/* the id model_apply gives it */
		k->dir[0] = op->dir;
		snprintf(k->name[0], CR_NAME_MAX, "%s", op->name);
		break;
	case OP_RENAME:
	case OP_REMOVE:
	case OP_RMDIR:
		i = model_lookup(&M, op->dir, op->name);
		k->obj = i >= 0 ? M.d[i].obj : -1;
		k->dir[0] = op->dir;
		snprintf(k->name[0], CR_NAME_MAX, "%s", op->name);
		if (op->kind == OP_RENAME) {
			k->dir[1] = op->dir2;
			snprintf(k->name[1], CR_NAME_MAX, "%s", op->name2);
		}
		break;
	case OP_LINK:
		k->obj = op->obj;
		k->dir[0] = op->dir2;
		snprintf(k->name[0], CR_NAME_MAX, "%s", op->name2);
		break;
	default:
		k->obj = op->obj;
	}
}

/* model_resolve -- obj id of a path "w1/d2/f3" in the model, or -1 */
static int model_resolve(const struct model *m, const char *path)
{
	char buf[320], *save = NULL;
	int cur = m->root;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		int i = model_lookup(m, cur, t);

		if (i < 0)
			return -1;
		cur = m->d[i].obj;
	}
	return cur;
}

/* hist_match -- does description p name path (as a whole token)? */
static int hist_match(const char *p, const char *path)
{
	size_t l = strlen(path);

	for (const char *q = strstr(p, path); q; q = strstr(q + 1, path)) {
		char before = q == p ? ' ' : q[-1], after = q[l];

		if ((before == '/' || before == ' ') && (after == '\0' || after == ' ' || after == '/'))
			return 1;
	}
	return 0;
}

/* hist_print -- the last ops of client w on PATH: on the object the model
 * has there, or on the name in its directory (by object ids, so renamed
 * directories do not hide them); failing that, ops whose text names it */
static void hist_print(int w, const char *path)
{
	if (quiet)
		return;

	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char parent[320], wtag[16];
	int idx[10], n = 0, obj, dir;

	snprintf(parent, sizeof(parent), "%.*s", (int)(base - path - 1 > 0 ? base - path - 1 : 0), path);
	obj = model_resolve(&M, path);
	dir = model_resolve(&M, parent);
	snprintf(wtag, sizeof(wtag), "w%d#", w);
	for (int i = nhist - 1; i >= 0 && n < 10; i--) {
		const struct hkey *k = &hkeys[i];

		if (strncmp(hist[i], wtag, strlen(wtag)))
			continue;
		if ((obj >= 0 && k->obj == obj) ||
		    (dir >= 0 && ((k->dir[0] == dir && !strcmp(k->name[0], base)) ||
				  (k->dir[1] == dir && !strcmp(k->name[1], base)))))
			idx[n++] = i;
	}
	for (int i = nhist - 1; i >= 0 && n == 0; i--)
		if (!strncmp(hist[i], wtag, strlen(wtag)) && hist_match(hist[i], path))
			idx[n++] = i;
	printf("  last ops on '%s' (client#op description with the paths of then, oldest first; '-' lines: kills, starts, copies):\n",
	       path);
	for (int k = n - 1; k >= 0; k--) {
		int from = k == n - 1 ? idx[k] : idx[k + 1] + 1;

		for (int i = from; i < idx[k]; i++)
			if (hist[i][0] == '-')
				printf("      %s\n", hist[i]);
		printf("    %s\n", hist[idx[k]]);
	}
	for (int i = n ? idx[0] + 1 : nhist; i < nhist; i++)
		if (hist[i][0] == '-')
			printf("      %s\n", hist[i]);
}

/* ------------------------------------------------------ op scripts */

/* Every client's acknowledged ops as a script in sc_step's language, with
 * "R" at each restart: what --minimize replays to find a short sequence
 * that still breaks. */
struct script {
	char **step;
	int n, cap;
};

static struct script wscript[CR_WORKERS_MAX];
static int recording = 1;

static void script_add(struct script *sc, const char *step)
{
	if (sc->n == sc->cap) {
		sc->cap = sc->cap ? 2 * sc->cap : 256;
		sc->step = realloc(sc->step, sc->cap * sizeof(*sc->step));
	}
	sc->step[sc->n++] = strdup(step);
}

static void script_free(struct script *sc)
{
	for (int i = 0; i < sc->n; i++)
		free(sc->step[i]);
	free(sc->step);
	memset(sc, 0, sizeof(*sc));
}

static void script_copy(struct script *dst, const struct script *src)
{
	memset(dst, 0, sizeof(*dst));
	for (int i = 0; i < src->n; i++)
		script_add(dst, src->step[i]);
}

/* A restart is written into a client's script only before its next op
 * ("R always": kill, restart with --replay=always; "R auto": kill, plain
 * restart; either followed by " reboot": the restart is after a fake reboot,
 * also when the fake reboot was at a start killed during its start-up), so
 * that a script never ends with one. */
static const char *pending_restart[CR_WORKERS_MAX];
static int wscript_via[CR_WORKERS_MAX];	/* a script's ops go over via_addr[this] ("A 4|6") */

static void script_mark_restart(int replay_always)
{
	for (int w = 0; recording && w < CR_WORKERS_MAX; w++)
		if (wscript[w].n) {
			/* restarts without an op of w between them are one "R" */
			int reboot = reboot_pending_mark || (pending_restart[w] && strstr(pending_restart[w], "reboot"));

			pending_restart[w] = replay_always ? reboot ? "R always reboot" : "R always"
					     : reboot ? "R auto reboot" : "R auto";
		}
	reboot_pending_mark = 0;
}

/* rel_path -- an object's path below its client's subtree ("d2/f3") */
static const char *rel_path(int obj)
{
	const char *p = model_path(&M, obj), *slash = strchr(p, '/');

	return slash ? slash + 1 : "";
}

static const char *rel_name(int dir, const char *name)
{
	static char b[2][320];
	static int k;
	char *s = b[k++ & 1];
	const char *d = rel_path(dir);

	snprintf(s, 320, "%s%s%s", d, d[0] ? "/" : "", name);
	return s;
}

/* op_step -- the op as a script step, paths as of now (before it applies) */
static void op_step(const struct op *op, char *out, size_t cap)
{
	switch (op->kind) {
	case OP_CREATE:
		snprintf(out, cap, "c %s %o", rel_name(op->dir, op->name), op->mode);
		break;
	case OP_MKDIR:
		snprintf(out, cap, "m %s %o", rel_name(op->dir, op->name), op->mode);
		break;
	case OP_SYMLINK:
		snprintf(out, cap, "s %s", rel_name(op->dir, op->name));
		break;
	case OP_REMOVE:
		snprintf(out, cap, "u %s", rel_name(op->dir, op->name));
		break;
	case OP_RMDIR:
		snprintf(out, cap, "x %s", rel_name(op->dir, op->name));
		break;
	case OP_WRITE:
		snprintf(out, cap, "w %s %" PRIu64 " %u %u", rel_path(op->obj), op->off, op->len, op->seed);
		break;
	case OP_SETSIZE:
		snprintf(out, cap, "t %s %u", rel_path(op->obj), op->size);
		break;
	case OP_SETMODE:
		snprintf(out, cap, "p %s %o", rel_path(op->obj), op->mode);
		break;
	case OP_SETOWNER: {
		char u[16], g[16];

		owner_strs(op, u, g);
		snprintf(out, cap, "o %s %s %s", rel_path(op->obj), u, g);
		break;
	}
	case OP_SETTIMES:
		if (op->server_time)
			snprintf(out, cap, "T %s server", rel_path(op->obj));
		else
			snprintf(out, cap, "T %s %u %u %u %u", rel_path(op->obj), op->atime.seconds,
				 op->atime.nseconds, op->mtime.seconds, op->mtime.nseconds);
		break;
	case OP_RENAME:
		snprintf(out, cap, "r %s %s", rel_name(op->dir, op->name), rel_name(op->dir2, op->name2));
		break;
	case OP_LINK:
		snprintf(out, cap, "l %s %s", rel_path(op->obj), rel_name(op->dir2, op->name2));
		break;
	default:
		out[0] = '\0';
	}
}

/* hist_print_obj -- the last ops of client w on object obj */
static void hist_print_obj(int w, int obj)
{
	char wtag[16];
	int idx[10], n = 0;

	if (quiet)
		return;
	snprintf(wtag, sizeof(wtag), "w%d#", w);
	for (int i = nhist - 1; i >= 0 && n < 10; i--)
		if (!strncmp(hist[i], wtag, strlen(wtag)) && hkeys[i].obj == obj)
			idx[n++] = i;
	printf("  last ops on that object (oldest first):\n");
	for (int k = n - 1; k >= 0; k--)
		printf("    %s\n", hist[idx[k]]);
	for (int i = n ? idx[0] + 1 : nhist; i < nhist; i++)
		if (hist[i][0] == '-')
			printf("      %s\n", hist[i]);
}

/* ---------------------------------------------------------------- workers */

struct worker {
	int id;
	int enabled;			/* cleared at the first failure of this subtree */
	struct rpc_context *rpc;	/* the connection its ops go over now */
	struct rpc_context *alt;	/* --presto mixed: the one over the other address */
	int via;			/* rpc's address: via_addr[via] */
	int inflight;
	struct op op;
	struct res res;
	long long retry_at;		/* JUKEBOX: resend at */
	int maybe;			/* op was in flight when the server died */
	struct op maybe_op;
	int seq;
	unsigned char *wbuf;
	long acked, jukebox;
};

static struct worker W[CR_WORKERS_MAX];

static struct stats {
	long acked, maybes, maybe_applied, kills, startup_kills, replays_always, jukebox, handles,
		dead_handles, cycles, stops, fileid_changed, partial_writes;
	long by_via[2];			/* acknowledged ops over 127.0.0.1, over ::1 */
	long long ready_ms_max, ready_ms_sum, check_ms_max, check_ms_sum;
	long readies, checks;
	long by_kind[OP_NKINDS];
} ST;

/* Powercut: the log must still hold everything since the copy when the
 * server is killed. A full log destages (even with --no-destage) and trims,
 * and a copy older than that destage is no longer a state a power cut could
 * leave. So each cycle writes at most this many bytes (about, with 512 for
 * each op's record) and then stops (if wbudget_on). */
static long long wbudget;
static int wbudget_on;

static void workers_close(void)
{
	for (int i = 0; i < cfg.workers; i++) {
		if (W[i].rpc) {
			rpc_destroy_context(W[i].rpc);
			W[i].rpc = NULL;
		}
		if (W[i].alt) {
			rpc_destroy_context(W[i].alt);
			W[i].alt = NULL;
		}
	}
}

/* workers_open -- one connection per client (--presto mixed: two, one over
 * each address; its ops go over W[i].via's) */
static int workers_open(void)
{
	for (int i = 0; i < cfg.workers; i++) {
		if (!cfg.mixed)
			W[i].via = 0;
		W[i].rpc = rpc_open_via(W[i].via, srv.nfs_port, CR_NFS_PROG);
		if (!W[i].rpc)
			return -1;
		set_auth(W[i].rpc, wcred[i]);
		if (cfg.mixed) {
			W[i].alt = rpc_open_via(!W[i].via, srv.nfs_port, CR_NFS_PROG);
			if (!W[i].alt)
				return -1;
			set_auth(W[i].alt, wcred[i]);
		}
		W[i].inflight = 0;
		W[i].retry_at = 0;
	}
	return 0;
}

/* worker_use -- w's next ops go over via_addr[via] (--presto mixed; never
 * with an op in flight) */
static void worker_use(struct worker *w, int via)
{
	struct rpc_context *t;

	if (!cfg.mixed || w->via == via || w->inflight)
		return;
	t = w->rpc;
	w->rpc = w->alt;
	w->alt = t;
	w->via = via;
}

/* verf_check -- the verifiers of the WRITEs of the current server start,
 * per address: the one over ::1 (presto off) must differ from the one over
 * 127.0.0.1 (the server flips a bit of it), or the nopresto line did not
 * take and the mixed mode would test presto on alone */
static void verf_check(const struct op *op, const struct res *r)
{
	int v = op->via;

	if (!cfg.mixed)
		return;
	if (verf_known[v] && memcmp(verf_of[v], r->wverf, NFS3_WRITEVERFSIZE))
		failf("%s: WRITE verifier changed within one server start over %s", op_desc(&M, op), via_addr[v]);
	memcpy(verf_of[v], r->wverf, NFS3_WRITEVERFSIZE);
	verf_known[v] = 1;
	if (verf_known[!v] && !memcmp(verf_of[0], verf_of[1], NFS3_WRITEVERFSIZE)) {
		verf_known[!v] = 0;	/* once per start */
		failf("%s: WRITEs over 127.0.0.1 and over ::1 got the same verifier: is ::1 not presto off?",
		      op_desc(&M, op));
	}
}

static void worker_disable(struct worker *w, const char *why)
{
	if (w->enabled)
		info("client w%d disabled for the rest of the run: %s", w->id, why);
	w->enabled = 0;
}

/* worker_reply -- a reply came back for w's op */
static void worker_reply(struct worker *w)
{
	struct res *r = &w->res;
	struct op *op = &w->op;

	if (r->rpc_status != RPC_STATUS_SUCCESS) {
		/* the caller checks whether the server was killed; if not, the
		 * connection died on its own */
		failf("%s: RPC failed while the server was not being killed: %s", op_desc(&M, op), r->err);
		server_log_tail(30);
		w->inflight = 0;
		w->maybe = 1;
		w->maybe_op = *op;
		worker_disable(w, "RPC failure");
		return;
	}
	if (r->status == NFS3ERR_JUKEBOX) {
		w->jukebox++;
		ST.jukebox++;
		w->retry_at = now_ms() + 10 + rnd(40);
		w->inflight = 0;
		return;
	}
	w->inflight = 0;
	w->retry_at = 0;
	if (r->status != NFS3_OK) {
		failf("%s: the server answered %s (%d); the model says it must succeed", op_desc(&M, op),
		      nfsstat3_to_str(r->status), r->status);
		server_log_tail(20);
		w->maybe = 1;
		w->maybe_op = *op;
		worker_disable(w, "unexpected error reply");
		return;
	}
	if (op->kind == OP_WRITE && (r->committed != FILE_SYNC || r->count == 0 || r->count > op->len)) {
		failf("%s: WRITE reply count %u committed %u (asked FILE_SYNC)", op_desc(&M, op), r->count,
		      r->committed);
		if (r->count == 0 || r->count > op->len) {
			worker_disable(w, "bad WRITE reply");
			return;
		}
	}
	if (op->kind == OP_WRITE)
		verf_check(op, r);
	if (wbudget_on)
		wbudget -= (op->kind == OP_WRITE ? op->len : 0) + 512;
	hist_add_op(op, "");
	if (recording) {
		char step[400];

		op_step(op, step, sizeof(step));
		if (!wscript[w->id].n && wcred[w->id].uid) {
			char u[64];

			snprintf(u, sizeof(u), "U %u %u", wcred[w->id].uid, wcred[w->id].gid);
			script_add(&wscript[w->id], u);
		}
		if (pending_restart[w->id])
			script_add(&wscript[w->id], pending_restart[w->id]);
		pending_restart[w->id] = NULL;
		if (op->via != wscript_via[w->id]) {
			script_add(&wscript[w->id], op->via ? "A 6" : "A 4");
			wscript_via[w->id] = op->via;
		}
		script_add(&wscript[w->id], step);
	}
	model_apply(&M, op, r->has_fh ? &r->fh : NULL, r->has_attr ? &r->attr : NULL,
		    op->kind == OP_WRITE ? r->count : 0, 0);
	w->acked++;
	ST.acked++;
	ST.by_via[op->via]++;
	ST.by_kind[op->kind]++;
}

/* worker_next -- choose and send the next op (or resend a JUKEBOXed one) */
static void worker_next(struct worker *w, int writers_only)
{
	if (!w->enabled || w->inflight || !w->rpc)
		return;
	if (w->retry_at) {
		if (now_ms() < w->retry_at)
			return;
	} else {
		int t;

		for (t = 0; t < 20; t++)
			if (choose_op(&M, w->id, writers_only, &w->op) == 0 && op_has_handles(&M, &w->op))
				break;
		if (t == 20)
			return;
		w->op.seq = ++w->seq;
		/* --presto mixed: now and then (a quarter of the ops, drawn
		 * apart from rnd() so that a seed's ops stay what they were)
		 * the client goes over to its other connection, so that a
		 * subtree gets presto-on and presto-off changes alike, in runs */
		if (cfg.mixed && mix64(cfg.seed ^ (0xadd7ULL << 40) ^ ((uint64_t)w->id << 32) ^ (uint64_t)w->seq) % 4 == 0)
			worker_use(w, !w->via);
		w->op.via = w->via;
	}
	if (op_send(w->rpc, &M, &w->op, w->wbuf, &w->res) < 0) {
		failf("%s: libnfs could not queue the call: %s", op_desc(&M, &w->op), rpc_get_error(w->rpc));
		worker_disable(w, "queue failure");
		return;
	}
	w->inflight = 1;
}

/* run_workload -- until deadline_ms; at hook_ms (if >0) call hook once.
 * Returns when the deadline passes; in-flight ops are left in flight. */
static void run_workload(long long deadline_ms, long long hook_ms, void (*hook)(void), int writers_only)
{
	struct pollfd pfd[CR_WORKERS_MAX];

	while (now_ms() < deadline_ms) {
		int n = 0, idx[CR_WORKERS_MAX], active = 0;

		if (wbudget_on && wbudget <= 0)
			break;		/* the cycle's bytes are written */

		if (hook && hook_ms && now_ms() >= hook_ms) {
			hook();
			hook = NULL;
		}
		for (int i = 0; i < cfg.workers; i++) {
			worker_next(&W[i], writers_only);
			if (!W[i].rpc)
				continue;
			if (W[i].enabled)
				active++;
			pfd[n].fd = rpc_get_fd(W[i].rpc);
			pfd[n].events = rpc_which_events(W[i].rpc);
			pfd[n].revents = 0;
			idx[n++] = i;
		}
		if (!active)
			break;
		if (poll(pfd, n, 2) < 0 && errno != EINTR)
			return;
		for (int k = 0; k < n; k++) {
			struct worker *w = &W[idx[k]];

			if (rpc_service(w->rpc, pfd[k].revents) < 0 && !w->res.done) {
				/* connection lost with the op unanswered */
				if (w->inflight) {
					w->res.done = 1;
					w->res.rpc_status = RPC_STATUS_ERROR;
					snprintf(w->res.err, sizeof(w->res.err), "%s", rpc_get_error(w->rpc));
				}
			}
			if (w->inflight && w->res.done)
				worker_reply(w);
		}
	}
	if (hook)
		hook();		/* its moment fell after the last reply */
}

/* workers_crashed -- the server is dead: every op in flight is a "maybe" */
static void workers_crashed(void)
{
	for (int i = 0; i < cfg.workers; i++) {
		struct worker *w = &W[i];

		if (w->inflight || w->retry_at) {
			hist_add_op(&w->op, " (in flight, no reply)");
			w->maybe = 1;
			w->maybe_op = w->op;
			ST.maybes++;
		}
		w->inflight = 0;
		w->retry_at = 0;
	}
	workers_close();
}

/* ------------------------------------------------------------ checking */

struct lent {
	char path[320];
	int type;
	uint32_t mode;
	int mode_any;
	uint32_t size;
	int nlink;
	uint64_t key;			/* obj id / inode: which names share a file */
	char group[320];		/* first path of the same key */
	uint32_t crc;
	const unsigned char *data;	/* expected side only */
	unsigned char *own;		/* actual side: read from the file */
	char target[CR_TARGET_MAX + 1];
	int mtime_known, atime_known;
	nfstime3 mtime, atime;
	uint32_t uid, gid;
	int owner_any;
};

struct listing {
	struct lent *e;
	int n, cap;
};

static struct lent *listing_add(struct listing *l)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->e = realloc(l->e, l->cap * sizeof(*l->e));
	}
	memset(&l->e[l->n], 0, sizeof(l->e[0]));
	return &l->e[l->n++];
}

static void listing_free(struct listing *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->e[i].own);
	free(l->e);
	memset(l, 0, sizeof(*l));
}

static int lent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lent *)a)->path, ((const struct lent *)b)->path);
}

static void listing_finish(struct listing *l)
{
	if (l->n)
		qsort(l->e, l->n, sizeof(l->e[0]), lent_cmp);
	for (int i = 0; i < l->n; i++) {
		if (l->e[i].type != T_REG)
			continue;
		for (int j = 0; j <= i; j++)
			if (l->e[j].type == T_REG && l->e[j].key == l->e[i].key) {
				snprintf(l->e[i].group, sizeof(l->e[i].group), "%s", l->e[j].path);
				break;
			}
	}
}

static void model_listing_dir(const struct model *m, int dir, const char *prefix, struct listing *l,
			      int depth)
{
	if (depth > 32)
		return;
	for (int i = 0; i < m->nd; i++) {
		const struct obj *o;
		struct lent *e;

		if (m->d[i].parent != dir)
			continue;
		o = &m->o[m->d[i].obj];
		e = listing_add(l);
		snprintf(e->path, sizeof(e->path), "%s/%s", prefix, m->d[i].name);
		e->type = o->type;
		e->mode = o->mode & 07777;
		e->mode_any = o->mode_unknown || o->type == T_LNK;
		e->uid = o->uid;
		e->gid = o->gid;
		e->owner_any = o->owner_unknown;
		e->key = m->d[i].obj;
		if (o->type == T_REG) {
			e->size = o->size;
			e->nlink = model_nlink(m, m->d[i].obj);
			e->data = o->data;
			e->crc = crc32_buf(o->data, o->size);
		}
		if (o->type == T_LNK) {
			snprintf(e->target, sizeof(e->target), "%s", o->target);
			e->size = strlen(o->target);
		}
		e->mtime_known = o->mtime_known;
		e->mtime = o->mtime;
		e->atime_known = o->atime_known && o->type == T_REG;
		e->atime = o->atime;
		if (o->type == T_DIR) {
			char p[320];

			snprintf(p, sizeof(p), "%s", e->path);
			model_listing_dir(m, m->d[i].obj, p, l, depth + 1);
		}
	}
}

static void model_listing(const struct model *m, int w, struct listing *l)
{
	char p[16];

	snprintf(p, sizeof(p), "w%d", w);
	model_listing_dir(m, m->wroot[w], p, l, 0);
	listing_finish(l);
}

/* host_listing -- the export as the host sees it (no NFS involved) */
static int host_listing_dir(const char *root, const char *rel, struct listing *l, int depth)
{
	char full[600];
	DIR *d;
	struct dirent *de;

	snprintf(full, sizeof(full), "%s/%s", root, rel);
	d = opendir(full);
	if (!d) {
		failf("host: opendir %s: %s", full, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		struct stat st;
		struct lent *e;
		char p[600];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s/%s", root, rel, de->d_name);
		if (lstat(p, &st) < 0)
			continue;
		e = listing_add(l);
		if (strlen(rel) + strlen(de->d_name) + 2 > sizeof(e->path))
			continue;
		snprintf(e->path, sizeof(e->path), "%.60s/%.255s", rel, de->d_name);
		e->type = S_ISREG(st.st_mode) ? T_REG : S_ISDIR(st.st_mode) ? T_DIR : S_ISLNK(st.st_mode) ? T_LNK : 99;
		e->mode = st.st_mode & 07777;
		e->uid = st.st_uid;
		e->gid = st.st_gid;
		e->key = st.st_ino;
		e->mtime_known = e->atime_known = 1;
		e->mtime.seconds = st.st_mtim.tv_sec;
		e->mtime.nseconds = st.st_mtim.tv_nsec;
		e->atime.seconds = st.st_atim.tv_sec;
		e->atime.nseconds = st.st_atim.tv_nsec;
		if (e->type == T_REG) {
			int fd = open(p, O_RDONLY | O_NOATIME);

			e->size = st.st_size;
			e->nlink = st.st_nlink;
			e->own = calloc(1, st.st_size + 1);
			if (fd >= 0) {
				ssize_t got = pread(fd, e->own, st.st_size, 0);

				if (got != st.st_size)
					e->size = got < 0 ? 0 : got;
				close(fd);
			}
			e->data = e->own;
			e->crc = crc32_buf(e->own, e->size);
		}
		if (e->type == T_LNK) {
			ssize_t n = readlink(p, e->target, CR_TARGET_MAX);

			e->target[n > 0 ? n : 0] = '\0';
			e->size = st.st_size;
		}
		if (e->type == T_DIR && depth < 32) {
			char r2[320];

			snprintf(r2, sizeof(r2), "%s", e->path);
			host_listing_dir(root, r2, l, depth + 1);
		}
	}
	closedir(d);
	return 0;
}

static int host_listing(int w, struct listing *l)
{
	char rel[16];
	int rc;

	snprintf(rel, sizeof(rel), "w%d", w);
	rc = host_listing_dir(srv.export, rel, l, 0);
	listing_finish(l);
	return rc;
}

static const char *type_name(int t)
{
	return t == T_REG ? "file" : t == T_DIR ? "dir" : t == T_LNK ? "symlink" : "other";
}

static const char *lent_desc(const struct lent *e)
{
	static char b[2][700];
	static int k;
	char *s = b[k++ & 1];

	if (!e)
		return "(absent)";
	if (e->type == T_REG)
		snprintf(s, 700, "file mode %04o owner %u:%u size %u nlink %d crc %08x same-file-as %s", e->mode,
			 e->uid, e->gid, e->size, e->nlink, e->crc, e->group);
	else if (e->type == T_LNK)
		snprintf(s, 700, "symlink owner %u:%u -> '%s'", e->uid, e->gid, e->target);
	else
		snprintf(s, 700, "%s mode %04o owner %u:%u", type_name(e->type), e->mode, e->uid, e->gid);
	return s;
}

static char diff_paths[8][320];
static int ndiff_paths;

static void diff_path(const char *p)
{
	for (int i = 0; i < ndiff_paths; i++)
		if (!strcmp(diff_paths[i], p))
			return;
	if (ndiff_paths < 8)
		snprintf(diff_paths[ndiff_paths++], sizeof(diff_paths[0]), "%s", p);
}

/* listing_diff -- 0 if actual matches expected; else a description of the
 * first difference(s) in msg */
static int listing_diff(const struct listing *ex, const struct listing *ac, char *msg, size_t cap)
{
	int i = 0, j = 0, ndiff = 0;
	size_t len = 0;

	msg[0] = '\0';
#define CR_ADD(...) \
	do { \
		if (len < cap) \
			len += snprintf(msg + len, cap - len, __VA_ARGS__); \
	} while (0)
	while (i < ex->n || j < ac->n) {
		const struct lent *e = i < ex->n ? &ex->e[i] : NULL;
		const struct lent *a = j < ac->n ? &ac->e[j] : NULL;
		int c = !e ? 1 : !a ? -1 : strcmp(e->path, a->path);

		if (c < 0) {
			diff_path(e->path);
			CR_ADD("\n    %s: expected %s, found nothing", e->path, lent_desc(e));
			ndiff++;
			i++;
			continue;
		}
		if (c > 0) {
			diff_path(a->path);
			CR_ADD("\n    %s: expected nothing, found %s", a->path, lent_desc(a));
			ndiff++;
			j++;
			continue;
		}
		i++;
		j++;
		if (e->type != a->type || (!e->mode_any && e->type != T_LNK && e->mode != a->mode) ||
		    (!e->owner_any && (e->uid != a->uid || e->gid != a->gid)) ||
		    (e->type == T_REG && (e->size != a->size || e->nlink != a->nlink || e->crc != a->crc ||
					  strcmp(e->group, a->group))) ||
		    (e->type == T_LNK && strcmp(e->target, a->target))) {
			diff_path(e->path);
			CR_ADD("\n    %s: expected %s, found %s", e->path, lent_desc(e), lent_desc(a));
			if (e->type == T_REG && a->type == T_REG && e->crc != a->crc) {
				uint32_t k, n = e->size < a->size ? e->size : a->size;

				for (k = 0; k < n && e->data[k] == a->data[k]; k++)
					;
				CR_ADD(" (first differing byte at offset %u of %u/%u)", k, e->size, a->size);
			}
			ndiff++;
			continue;
		}
		if (e->mtime_known && (e->mtime.seconds != a->mtime.seconds || e->mtime.nseconds != a->mtime.nseconds)) {
			diff_path(e->path);
			CR_ADD("\n    %s: expected mtime %u.%09u, found %u.%09u", e->path, e->mtime.seconds,
			       e->mtime.nseconds, a->mtime.seconds, a->mtime.nseconds);
			ndiff++;
		}
		if (e->atime_known && (e->atime.seconds != a->atime.seconds || e->atime.nseconds != a->atime.nseconds)) {
			diff_path(e->path);
			CR_ADD("\n    %s: expected atime %u.%09u, found %u.%09u", e->path, e->atime.seconds,
			       e->atime.nseconds, a->atime.seconds, a->atime.nseconds);
			ndiff++;
		}
	}
#undef CR_ADD
	return ndiff;
}

/* ---------------------------------------------------- sync calls (checker) */

static struct rpc_context *chk;		/* the checker's own connection */

static int sync_wait(struct res *r, const char *what)
{
	if (rpc_wait(chk, &r->done, CR_RPC_TIMEOUT_MS) < 0 || r->rpc_status != RPC_STATUS_SUCCESS) {
		failf("checker: %s: RPC failed: %s", what, r->done ? r->err : "timeout");
		return -1;
	}
	return 0;
}

static int do_getattr(const struct fh *f, struct res *r)
{
	GETATTR3args a;

	a.object = fh3(f);
	res_reset(r, P_GETATTR);
	if (rpc_nfs3_getattr_async(chk, res_cb, &a, r) < 0)
		return -1;
	return sync_wait(r, "GETATTR");
}

static int do_lookup(const struct fh *dir, const char *name, struct res *r)
{
	LOOKUP3args a;

	a.what.dir = fh3(dir);
	a.what.name = (char *)name;
	res_reset(r, P_LOOKUP);
	if (rpc_nfs3_lookup_async(chk, res_cb, &a, r) < 0)
		return -1;
	return sync_wait(r, "LOOKUP");
}

static int do_mnt(struct fh *root)
{
	struct rpc_context *m = rpc_open(srv.mount_port, CR_MOUNT_PROG);
	struct res r;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	if (!m)
		return -1;
	res_reset(&r, P_MNT);
	if (rpc_mount3_mnt_async(m, res_cb, srv.export, &r) < 0 || rpc_wait(m, &r.done, CR_RPC_TIMEOUT_MS) < 0 ||
	    r.rpc_status != RPC_STATUS_SUCCESS)
		failf("MNT %s: RPC failed: %s", srv.export, r.err);
	else if (r.status != MNT3_OK)
		failf("MNT %s: status %d", srv.export, r.status);
	else {
		*root = r.fh;
		rc = 0;
	}
	rpc_destroy_context(m);
	res_reset(&r, P_NONE);
	return rc;
}

/* check_handle -- one held handle of a live object, through NFS */
static int check_handle(const struct model *m, int id, const struct fh *f, const char *path)
{
	const struct obj *o = &m->o[id];
	struct res r;
	int bad = 0;

	memset(&r, 0, sizeof(r));
	ST.handles++;
	if (do_getattr(f, &r) < 0)
		return -1;
	if (r.status != NFS3_OK) {
		failf("held handle %s of %s (%s) : GETATTR answered %s", fh_hex(f), path, type_name(o->type),
		      nfsstat3_to_str(r.status));
		res_reset(&r, P_NONE);
		return -1;
	}
	if ((int)r.attr.type != o->type || (o->type != T_LNK && !o->mode_unknown && (r.attr.mode & 07777) != o->mode) ||
	    (!o->owner_unknown && (r.attr.uid != o->uid || r.attr.gid != o->gid)) ||
	    (o->type == T_REG && (r.attr.size != o->size || (int)r.attr.nlink != model_nlink(m, id)))) {
		failf("held handle %s of %s: GETATTR type %d mode %04o owner %u:%u size %" PRIu64
		      " nlink %u; expected %s mode %04o owner %u:%u size %u nlink %d",
		      fh_hex(f), path, r.attr.type, r.attr.mode & 07777, r.attr.uid, r.attr.gid, (uint64_t)r.attr.size,
		      r.attr.nlink, type_name(o->type), o->mode, o->uid, o->gid, o->size,
		      o->type == T_REG ? model_nlink(m, id) : 0);
		bad = 1;
	}
	if (o->fileid_known && r.attr.fileid != o->fileid) {
		ST.fileid_changed++;
		/* without a power cut no object is made anew */
		if (!powercut_mode) {
			failf("held handle %s of %s: GETATTR fileid %" PRIu64 ", its creation answered fileid %" PRIu64,
			      fh_hex(f), path, (uint64_t)r.attr.fileid, o->fileid);
			bad = 1;
		}
	}
	if (o->type == T_REG && !bad) {
		for (uint32_t off = 0; off < o->size || off == 0;) {
			READ3args a;
			uint32_t want = o->size - off > 32768 ? 32768 : o->size - off;

			a.file = fh3(f);
			a.offset = off;
			a.count = want ? want : 1;
			res_reset(&r, P_READ);
			if (rpc_nfs3_read_async(chk, res_cb, &a, &r) < 0 || sync_wait(&r, "READ") < 0) {
				bad = 1;
				break;
			}
			if (r.status != NFS3_OK || r.dlen != want || memcmp(r.data, o->data + off, want)) {
				failf("held handle %s of %s: READ at %u answered %s with %zu bytes%s; expected %u bytes crc %08x",
				      fh_hex(f), path, off, nfsstat3_to_str(r.status), r.dlen,
				      r.status == NFS3_OK && r.dlen == want ? " that differ" : "", want,
				      crc32_buf(o->data + off, want));
				bad = 1;
				break;
			}
			if (!want)
				break;
			off += want;
		}
	}
	if (o->type == T_LNK) {
		READLINK3args a;

		a.symlink = fh3(f);
		res_reset(&r, P_READLINK);
		if (rpc_nfs3_readlink_async(chk, res_cb, &a, &r) < 0 || sync_wait(&r, "READLINK") < 0)
			bad = 1;
		else if (r.status != NFS3_OK || strcmp((char *)r.data, o->target)) {
			failf("held handle %s of %s: READLINK answered %s '%s', expected '%s'", fh_hex(f), path,
			      nfsstat3_to_str(r.status), r.data ? (char *)r.data : "", o->target);
			bad = 1;
		}
	}
	if (o->type == T_DIR) {
		/* names through READDIR == the model's names */
		READDIR3args a;
		int seen = 0, expected = 0, missing = 0;
		char extra[300] = "";

		memset(&a, 0, sizeof(a));
		a.dir = fh3(f);
		a.count = 65536;
		for (int i = 0; i < m->nd; i++)
			if (m->d[i].parent == id)
				expected++;
		for (int round = 0; round < 64; round++) {
			res_reset(&r, P_READDIR);
			if (rpc_nfs3_readdir_async(chk, res_cb, &a, &r) < 0 || sync_wait(&r, "READDIR") < 0) {
				bad = 1;
				break;
			}
			if (r.status != NFS3_OK) {
				failf("held handle %s of %s: READDIR answered %s", fh_hex(f), path,
				      nfsstat3_to_str(r.status));
				bad = 1;
				break;
			}
			for (int k = 0; k < r.nnames; k++) {
				if (!strcmp(r.names[k], ".") || !strcmp(r.names[k], ".."))
					continue;
				if (model_lookup(m, id, r.names[k]) >= 0)
					seen++;
				else if (id == m->root)
					continue;	/* not ours: lost+found, other files */
				else if (strlen(extra) < 200)
					snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), " %s", r.names[k]);
			}
			if (r.eof)
				break;
			a.cookie = r.cookie;
			memcpy(a.cookieverf, r.verf, sizeof(a.cookieverf));
		}
		missing = expected - seen;
		if (!bad && (missing || extra[0])) {
			failf("held handle %s of directory %s: READDIR misses %d of %d names; unexpected:%s",
			      fh_hex(f), path, missing, expected, extra[0] ? extra : " none");
			bad = 1;
		}
	}
	res_reset(&r, P_NONE);
	return bad ? -1 : 0;
}

/* write_prefix -- how many bytes of an unanswered WRITE the host's file
 * holds: the longest prefix of its data found at its offset */
static uint32_t write_prefix(const struct listing *ac, int w, const struct op *op)
{
	char path[320];
	unsigned char *want;
	uint32_t k = 0;

	(void)w;
	snprintf(path, sizeof(path), "%s", model_path(&M, op->obj));
	for (int i = 0; i < ac->n; i++) {
		const struct lent *a = &ac->e[i];

		if (strcmp(a->path, path) || a->type != T_REG || a->size <= op->off)
			continue;
		want = malloc(op->len);
		pattern(want, op->seed, op->off, op->len);
		while (k < op->len && op->off + k < a->size && a->data[op->off + k] == want[k])
			k++;
		free(want);
		break;
	}
	return k;
}

/* write_mixed -- an unanswered WRITE may end up with each of its bytes old
 * or new (torn by the kill, and replay rewriting earlier writes over it; the
 * client still holds that data and sends it again). If the host's file is
 * such a mix, and unchanged outside the op's range, give alt that content.
 * Returns 0 when it is, -1 when not. */
static int write_mixed(const struct listing *ac, const struct op *op, struct model *alt)
{
	const struct obj *o = &M.o[op->obj];
	uint64_t end = op->off + op->len, max = end > o->size ? end : o->size;
	unsigned char *want;
	char path[320];
	int rc = -1;

	snprintf(path, sizeof(path), "%s", model_path(&M, op->obj));
	for (int i = 0; i < ac->n; i++) {
		const struct lent *a = &ac->e[i];

		if (strcmp(a->path, path) || a->type != T_REG)
			continue;
		if (a->size < o->size || a->size > max)
			return -1;
		want = malloc(op->len);
		pattern(want, op->seed, op->off, op->len);
		rc = 0;
		for (uint64_t k = 0; k < a->size && rc == 0; k++) {
			unsigned char old = k < o->size ? o->data[k] : 0;

			if (a->data[k] != old && !(k >= op->off && k < end && a->data[k] == want[k - op->off]))
				rc = -1;
		}
		free(want);
		if (rc == 0) {
			memcpy(alt->o[op->obj].data, a->data, a->size);
			alt->o[op->obj].size = a->size;
			alt->o[op->obj].mtime_known = 0;
		}
		break;
	}
	return rc;
}

static void minimize(const struct script *sc, int seconds);
static struct script min_script;	/* first failing client's script */
static int min_saved;
static int min_reboot;			/* its failure showed after a fake reboot */

static void min_save(int w)
{
	if (min_saved || quiet || !recording)
		return;
	script_copy(&min_script, &wscript[w]);
	min_saved = 1;
	min_reboot = srv.rebooted;
}

/* check_all -- after a restart: resolve the maybes against the host's view,
 * then check every held handle through NFS, then fetch handles for objects
 * that have none (and fresh ones by LOOKUP). */
static void check_all(const char *when)
{
	struct fh root;
	struct res r;
	int bad_handles = 0, mismatch = 0;

	memset(&r, 0, sizeof(r));
	for (int w = 0; w < cfg.workers; w++) {
		struct listing ex = { 0 }, ac = { 0 };
		char msg_a[4096], msg_b[4096], scratch[2048];
		struct worker *wk = &W[w];

		if (!wk->enabled) {
			wk->maybe = 0;
			continue;
		}
		model_listing(&M, w, &ex);
		host_listing(w, &ac);
		ndiff_paths = 0;
		if (listing_diff(&ex, &ac, msg_a, sizeof(msg_a)) == 0) {
			if (wk->maybe && cfg.verbose)
				info("%s: %s was not applied", when, op_desc(&M, &wk->maybe_op));
		} else if (wk->maybe) {
			struct model alt;
			struct listing ex2 = { 0 };

			const struct op *mop = &wk->maybe_op;
			uint32_t count = mop->len;
			int ok = 0;

			/* a killed WRITE may leave a prefix of its data (the kernel stops
			 * between pages on a fatal signal; a server may write in pieces):
			 * besides all and nothing, try the prefix the file shows */
			uint32_t cand[4] = { mop->len, 0, 0, 0 };
			int ncand = mop->kind == OP_WRITE ? 4 : 1, mixed = 0;

			if (mop->kind == OP_WRITE)
				cand[2] = write_prefix(&ac, w, mop);
			for (int c = 0; c < ncand; c++) {
				count = cand[c];
				if (c == 2 && (count == 0 || count == mop->len))
					continue;
				model_clone(&alt, &M);
				if (c == 3 && write_mixed(&ac, mop, &alt) < 0) {
					model_free(&alt);
					break;
				}
				if (c != 3)
					model_apply(&alt, mop, NULL, NULL, count, 1);
				mixed = c == 3;
				model_listing(&alt, w, &ex2);
				ok = listing_diff(&ex2, &ac, c == 0 ? msg_b : scratch,
						  c == 0 ? sizeof(msg_b) : sizeof(scratch)) == 0;
				if (ok)
					break;
				model_free(&alt);
				listing_free(&ex2);
			}
			if (!ok)
				model_clone(&alt, &M);	/* freed below */
			if (ok && mixed) {
				ST.partial_writes++;
				info("%s: %s (no reply) left some bytes of its range old and some new", when,
				     op_desc(&M, mop));
				/* the model takes the mix the host shows (the
				 * checks of held handles below compare with it) */
				model_free(&M);
				M = alt;
			} else if (ok) {
				if (cfg.verbose || count != mop->len)
					info("%s: %s was applied%s", when, op_desc(&M, mop),
					     count != mop->len ? " partly" : "");
				if (count != mop->len) {
					ST.partial_writes++;
					info("%s: only its first %u of %u bytes are there", when, count, mop->len);
				}
				ST.maybe_applied++;
				model_free(&M);
				M = alt;
			} else {
				failf("%s: subtree w%d matches neither the acknowledged operations nor them plus the one in flight (%s)\n  without it:%s\n  with it:%s",
				      when, w, op_desc(&M, &wk->maybe_op), msg_a, msg_b);
				model_free(&alt);
				for (int k = 0; k < ndiff_paths; k++)
					hist_print(w, diff_paths[k]);
				min_save(w);
				worker_disable(wk, "tree mismatch");
				mismatch++;
			}
			listing_free(&ex2);
		} else {
			failf("%s: subtree w%d differs from the acknowledged operations (none was in flight):%s", when, w,
			      msg_a);
			for (int k = 0; k < ndiff_paths; k++)
				hist_print(w, diff_paths[k]);
			min_save(w);
			worker_disable(wk, "tree mismatch");
			mismatch++;
		}
		wk->maybe = 0;
		listing_free(&ex);
		listing_free(&ac);
	}

	if (mismatch)
		server_log_tail(16);

	/* the root handle */
	if (do_mnt(&root) == 0 && M.o[M.root].nfh && !fh_eq(&root, &M.o[M.root].fh[0]))
		failf("%s: MNT root handle changed from %s to %s", when, fh_hex(&M.o[M.root].fh[0]),
		      fh_hex(&root));

	/* every held handle of a live object */
	for (int id = 0; id < M.no; id++) {
		struct obj *o = &M.o[id];

		if (!o->alive || (o->worker >= 0 && !W[o->worker].enabled))
			continue;
		for (int k = 0; k < o->nfh; k++)
			if (check_handle(&M, id, &o->fh[k], model_path(&M, id)) < 0) {
				o->bad = 1;
				if (++bad_handles > 20)
					goto handles_done;
			}
	}
handles_done:
	if (bad_handles)
		server_log_tail(20);
	for (int id = 0; id < M.no; id++)
		if (M.o[id].bad && M.o[id].worker >= 0)
			worker_disable(&W[M.o[id].worker], "bad handle");
	/* the READs above may have moved atimes */
	for (int id = 0; id < M.no; id++)
		if (M.o[id].type == T_REG)
			M.o[id].atime_known = 0;

	/* handles of removed objects must not reach any object */
	for (int k = 0; k < M.ndead; k++) {
		ST.dead_handles++;
		if (do_getattr(&M.dead[k], &r) == 0 && r.status == NFS3_OK) {
			int obj = M.dead_obj[k];

			if (M.o[obj].worker >= 0 && !W[M.o[obj].worker].enabled)
				continue;	/* its subtree failed already */
			failf("%s: handle %s of a removed %s still works: GETATTR OK, fileid %" PRIu64 " type %d size %" PRIu64
			      " nlink %u; names with that inode now:",
			      when, fh_hex(&M.dead[k]), type_name(M.o[obj].type), (uint64_t)r.attr.fileid, r.attr.type,
			      (uint64_t)r.attr.size, r.attr.nlink);
			if (!quiet) {
				char cmd[512];

				fflush(stdout);
				snprintf(cmd, sizeof(cmd), "find '%s' -xdev -inum %" PRIu64 " | sed 's/^/    /'", srv.export,
					 (uint64_t)r.attr.fileid);
				if (system(cmd) < 0)
					printf("(find failed)\n");
				hist_print_obj(M.o[obj].worker, obj);
			}
			if (M.o[obj].worker >= 0)
				worker_disable(&W[M.o[obj].worker], "removed object reachable");
		}
	}

	/* LOOKUP every name: objects created by an applied "maybe" get a handle;
	 * a different handle for a known object is kept as well; its fileid must
	 * be the held handle's (outside powercut mode) */
	for (int i = 0; i < M.nd; i++) {
		struct dent *d = &M.d[i];
		struct obj *o = &M.o[d->obj];

		if (o->worker >= 0 && !W[o->worker].enabled)
			continue;
		if (!M.o[d->parent].nfh)
			continue;
		if (do_lookup(&M.o[d->parent].fh[0], d->name, &r) < 0)
			break;
		if (r.status != NFS3_OK) {
			failf("%s: LOOKUP %s answered %s", when, model_path(&M, d->obj), nfsstat3_to_str(r.status));
			worker_disable(&W[o->worker], "LOOKUP failure");
			continue;
		}
		if (o->nfh && r.has_attr) {
			struct res g;

			memset(&g, 0, sizeof(g));
			if (do_getattr(&o->fh[0], &g) == 0 && g.status == NFS3_OK && g.attr.fileid != r.attr.fileid) {
				ST.fileid_changed++;
				/* without a power cut no object is made anew: the name
				 * and the handle held for its object are one file */
				if (!powercut_mode) {
					failf("%s: LOOKUP %s gave fileid %" PRIu64 " (handle %s), its held handle %s has fileid %" PRIu64,
					      when, model_path(&M, d->obj), (uint64_t)r.attr.fileid, fh_hex(&r.fh),
					      fh_hex(&o->fh[0]), (uint64_t)g.attr.fileid);
					if (o->worker >= 0) {
						hist_print_obj(o->worker, d->obj);
						worker_disable(&W[o->worker], "LOOKUP and held handle disagree");
					}
				}
			}
			res_reset(&g, P_NONE);
		}
		model_add_fh(o, &r.fh);
	}
	res_reset(&r, P_NONE);
	srv.rebooted = 0;
}

/* ----------------------------------------------------------- test cycles */

/* connect_all -- checker, root handle, clients */
static int connect_all(void)
{
	chk = rpc_open(srv.nfs_port, CR_NFS_PROG);
	if (!chk)
		return -1;
	return workers_open();
}

static void disconnect_all(void)
{
	workers_close();
	if (chk) {
		rpc_destroy_context(chk);
		chk = NULL;
	}
}

/* crash_kill -- SIGKILL the server in the middle of the workload: the
 * workers' calls in flight are unacknowledged, their connections gone */
static void crash_kill(void)
{
	server_kill();
	ST.kills++;
	workers_crashed();
	disconnect_all();
}

/* give_subtree -- client w gets credentials c and its subtree (the
 * checker's SETATTR of /wN's owner, as root: acknowledged, so part of the
 * model). Returns 0 or -1. */
static int give_subtree(int w, struct cred c)
{
	struct obj *o = &M.o[M.wroot[w]];
	SETATTR3args a;
	struct res r;
	int rc = -1;

	wcred[w] = c;
	if (W[w].rpc)
		set_auth(W[w].rpc, c);
	if (W[w].alt)
		set_auth(W[w].alt, c);
	if (o->uid == c.uid && o->gid == c.gid)
		return 0;
	memset(&r, 0, sizeof(r));
	memset(&a, 0, sizeof(a));
	a.object = fh3(&o->fh[0]);
	sattr_none(&a.new_attributes);
	a.new_attributes.uid.set_it = 1;
	a.new_attributes.uid.set_uid3_u.uid = c.uid;
	a.new_attributes.gid.set_it = 1;
	a.new_attributes.gid.set_gid3_u.gid = c.gid;
	res_reset(&r, P_SETATTR);
	if (rpc_nfs3_setattr_async(chk, res_cb, &a, &r) < 0 || sync_wait(&r, "SETATTR owner") < 0)
		goto out;
	if (r.status != NFS3_OK) {
		failf("SETATTR of w%d's owner to %u:%u: %s", w, c.uid, c.gid, nfsstat3_to_str(r.status));
		goto out;
	}
	o->uid = c.uid;
	o->gid = c.gid;
	rc = 0;
out:
	res_reset(&r, P_NONE);
	return rc;
}

/* setup_tree -- the model's root and one subtree per client, made through
 * NFS (acknowledged, so part of the model) */
static int setup_tree(void)
{
	struct fh root;
	struct res r;

	memset(&r, 0, sizeof(r));
	model_free(&M);
	if (do_mnt(&root) < 0)
		return -1;
	M.root = model_new_obj(&M, T_DIR, -1, 0755);
	M.o[M.root].mode_unknown = 1;
	M.o[M.root].owner_unknown = 1;
	model_add_fh(&M.o[M.root], &root);
	for (int w = 0; w < cfg.workers; w++) {
		MKDIR3args a;
		char name[16];

		snprintf(name, sizeof(name), "w%d", w);
		memset(&a, 0, sizeof(a));
		a.where.dir = fh3(&root);
		a.where.name = name;
		sattr_none(&a.attributes);
		a.attributes.mode.set_it = 1;
		a.attributes.mode.set_mode3_u.mode = 0755;
		res_reset(&r, P_MKDIR);
		if (rpc_nfs3_mkdir_async(chk, res_cb, &a, &r) < 0 || sync_wait(&r, "MKDIR") < 0)
			return -1;
		if (r.status != NFS3_OK) {
			failf("MKDIR /%s: %s", name, nfsstat3_to_str(r.status));
			return -1;
		}
		M.wroot[w] = model_new_obj(&M, T_DIR, w, 0755);
		model_add_dent(&M, M.root, name, M.wroot[w]);
		if (r.has_fh)
			model_add_fh(&M.o[M.wroot[w]], &r.fh);
		else {
			res_reset(&r, P_NONE);
			if (do_lookup(&root, name, &r) < 0 || r.status != NFS3_OK)
				return -1;
			model_add_fh(&M.o[M.wroot[w]], &r.fh);
		}
		M.o[M.wroot[w]].worker = w;
	}
	res_reset(&r, P_NONE);
	for (int w = 0; w < cfg.workers; w++) {
		struct rpc_context *keep = W[w].rpc, *keep_alt = W[w].alt;
		int keep_via = W[w].via;

		free(W[w].wbuf);
		res_reset(&W[w].res, P_NONE);
		memset(&W[w], 0, sizeof(W[w]));
		W[w].rpc = keep;
		W[w].alt = keep_alt;
		W[w].via = keep_via;
		/* every client starts over 127.0.0.1, as scripts do (spread_via) */
		worker_use(&W[w], 0);
		W[w].id = w;
		W[w].enabled = 1;
		W[w].wbuf = malloc(CR_WRITE_MAX);
		/* made by root; odd clients get theirs */
		wcred[w] = (struct cred){ 0, 0 };
		if (give_subtree(w, default_cred(w)) < 0)
			return -1;
	}
	return 0;
}

static int any_enabled(void)
{
	for (int w = 0; w < cfg.workers; w++)
		if (W[w].enabled)
			return 1;
	return 0;
}

/* spread_via -- --presto mixed, the random modes: odd clients start over
 * ::1 (presto off), even ones over 127.0.0.1; each switches now and then
 * (worker_next) */
static void spread_via(void)
{
	for (int w = 0; w < cfg.workers; w++)
		worker_use(&W[w], w % 2);
}

/* mixed_covered -- --presto mixed: both kinds of client had ops
 * acknowledged */
static void mixed_covered(const char *mode)
{
	if (!cfg.mixed)
		return;
	info("%s: %ld ops acknowledged over 127.0.0.1 (presto on), %ld over ::1 (nopresto)", mode, ST.by_via[0],
	     ST.by_via[1]);
	if (any_enabled() && (ST.by_via[0] == 0 || ST.by_via[1] == 0))
		failf("%s: --presto mixed, but no op was acknowledged over %s", mode, via_addr[ST.by_via[0] != 0]);
}

/* restart_and_check -- start (replay policy chosen by the caller), connect,
 * check */
static int restart_and_check(int replay_always, const char *when)
{
	if (replay_always)
		ST.replays_always++;
	long long t0 = now_ms(), t1;

	if (server_start(replay_always, 1) < 0)
		return -1;
	t1 = now_ms();
	ST.readies++;
	ST.ready_ms_sum += t1 - t0;
	if (t1 - t0 > ST.ready_ms_max)
		ST.ready_ms_max = t1 - t0;
	if (connect_all() < 0)
		return -1;
	check_all(when);
	ST.checks++;
	ST.check_ms_sum += now_ms() - t1;
	if (now_ms() - t1 > ST.check_ms_max)
		ST.check_ms_max = now_ms() - t1;
	if (cfg.verbose)
		info("%s: ready after %lld ms, checked in %lld ms", when, t1 - t0, now_ms() - t1);
	return 0;
}

static void print_stats(const char *mode, long long t0)
{
	char kinds[512] = "";

	for (int k = 0; k < OP_NKINDS; k++)
		snprintf(kinds + strlen(kinds), sizeof(kinds) - strlen(kinds), " %s=%ld", op_name[k], ST.by_kind[k]);
	info("%s: %.1f s, %ld cycles, %ld kills (%ld during start-up), %ld clean stops, %ld restarts with --replay=always, %ld fake reboots",
	     mode, (now_ms() - t0) / 1000.0, ST.cycles, ST.kills, ST.startup_kills, ST.stops, ST.replays_always,
	     fake_reboots);
	info("%s: %ld acknowledged ops (%s), %ld in flight at a kill (%ld found applied, %ld of them writes applied in part), %ld JUKEBOX replies",
	     mode, ST.acked, kinds + 1, ST.maybes, ST.maybe_applied, ST.partial_writes, ST.jukebox);
	info("%s: %ld held-handle checks, %ld removed-object handle checks, %ld fileid changes (a held handle's against "
	     "its creation's, or a LOOKUP's against the held handle's)",
	     mode, ST.handles, ST.dead_handles, ST.fileid_changed);
	if (ST.readies && ST.checks)
		info("%s: restart to ready: mean %lld ms, max %lld ms; check: mean %lld ms, max %lld ms", mode,
		     ST.ready_ms_sum / ST.readies, ST.ready_ms_max, ST.check_ms_sum / ST.checks, ST.check_ms_max);
}

/* mode_kill -- SIGKILL at random moments, >= cfg.kills times */
static int mode_kill(void)
{
	long long t0 = now_ms(), end = t0 + cfg.time_limit * 1000LL;
	char when[64];

	memset(&ST, 0, sizeof(ST));
	fake_reboots = 0;
	if (server_setup("kill") < 0 || server_start(0, 1) < 0 || connect_all() < 0 || setup_tree() < 0)
		return -1;
	spread_via();
	while (ST.kills < cfg.kills && now_ms() < end && any_enabled()) {
		long long dur;
		unsigned r = rnd(100);
		int replay_always = cfg.presto && (cfg.replay == 2 ? (int)rnd(2) : cfg.replay);
		/* a third of the restarts after a fake reboot; drawn apart from
		 * rnd() so that a seed's workload stays what it was */
		int reboot = mix64(cfg.seed ^ (0x5eb007ULL << 32) ^ (uint64_t)ST.cycles) % 3 == 0;

		ST.cycles++;
		dur = r < 15 ? rnd(30) : r < 85 ? 30 + rnd(500) : 500 + rnd(1500);
		run_workload(now_ms() + dur, 0, NULL, 0);
		if (ST.cycles % 13 == 0) {
			/* a clean stop now and then: SIGTERM flushes and exits 0 */
			disconnect_all();
			workers_crashed();
			server_stop();
			ST.stops++;
		} else {
			crash_kill();
		}
		if (reboot)
			fake_reboot();
		if (rnd(100) < 12 && ST.kills < cfg.kills) {
			/* kill it again during its start-up (recovery, replay); after
			 * a fake reboot, the restart below is in that same boot */
			if (server_start(replay_always, 0) == 0) {
				usleep(1000 * rnd(60));
				server_kill();
				ST.kills++;
				ST.startup_kills++;
			}
		}
		snprintf(when, sizeof(when), "after kill %ld%s", ST.kills, srv.rebooted ? " and a fake reboot" : "");
		if (restart_and_check(replay_always, when) < 0)
			break;
	}
	/* the end: a clean stop, one more start with replay, a last check */
	disconnect_all();
	workers_crashed();
	server_stop();
	restart_and_check(cfg.presto, "after the final clean stop");
	disconnect_all();
	server_stop();
	print_stats("kill", t0);
	mixed_covered("kill");
	if (!any_enabled())
		info("kill: stopped after %ld kills: every client's subtree had failed", ST.kills);
	else if (ST.kills < 30 && ST.kills < cfg.kills)
		failf("only %ld kills within %d s (at least 30 wanted); a restart took %lld ms on average, %lld at most",
		      ST.kills, cfg.time_limit, ST.readies ? ST.ready_ms_sum / ST.readies : 0, ST.ready_ms_max);
	if (ST.acked < 100)
		failf("only %ld acknowledged operations", ST.acked);
	cleanup();
	if (min_saved && cfg.minimize > 0)
		minimize(&min_script, cfg.minimize);
	script_free(&min_script);
	min_saved = 0;
	return 0;
}

/* ---------------------------------------------------------- power cut */

/* size_bytes -- "64M", "1G", "512k", "4096" */
static long long size_bytes(const char *v)
{
	char *end;
	long long n = strtoll(v, &end, 10);

	switch (*end) {
	case 'k': case 'K': return n << 10;
	case 'm': case 'M': return n << 20;
	case 'g': case 'G': return n << 30;
	default: return n;
	}
}

static int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_cmd(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(stdout);
	rc = system(cmd);
	if (rc != 0)
		failf("command failed (status %d): %s", rc, cmd);
	return rc == 0 ? 0 : -1;
}

static long snapshots, snap_mid;

/* snapshot -- freeze the filesystem, copy the image, thaw: what a power cut
 * at this moment would leave on disk */
static void snapshot(void)
{
	long long t = now_ms();

	if (run_cmd("fsfreeze -f '%s'", cfg.export_dir) < 0)
		return;
	frozen = 1;
	run_cmd("cp --sparse=always '%s' '%s'", cfg.image, cfg.copy);
	thaw();
	hist_add("- C: image copied (what a power cut now would leave)");
	snapshots++;
	if (cfg.verbose)
		info("snapshot took %lld ms", now_ms() - t);
}

/* bdev_released -- wait (60 s) until no filesystem holds the loop device:
 * a mounted block device refuses O_EXCL. Until then a copy written to it
 * goes under a live filesystem, and a mount reuses that filesystem's
 * superblock, whose metadata is written back over the copy (ext4: "JBD2:
 * Spotted dirty metadata buffer", doubly allocated inodes, invalid xattr
 * blocks; the replay then fails). Two things can hold it after the umount:
 *   - the mount namespace of our own server after a fake reboot: once it is
 *     reaped the kernel drops that namespace's mounts later (delayed_mntput);
 *   - a server of another run started after a fake reboot copied every
 *     mount (see enter_boot, detach_loop_mounts); it lives for a cycle of
 *     its run. */
static int bdev_released(void)
{
	long long end = now_ms() + 60000;

	for (;;) {
		int fd = open(cfg.loopdev, O_RDONLY | O_EXCL | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (errno != EBUSY || now_ms() > end) {
			failf("%s still in use after its umount (%s): a mount namespace still holds "
			      "the filesystem; the copy is not written under it",
			      cfg.loopdev, strerror(errno));
			return -1;
		}
		usleep(10 * 1000);
	}
}

static int restore_copy(void)
{
	if (run_cmd("umount '%s'", cfg.export_dir) < 0 || bdev_released() < 0)
		return -1;
	if (run_cmd("dd if='%s' of='%s' bs=1M conv=fsync status=none", cfg.copy, cfg.loopdev) < 0)
		return -1;
	return run_cmd("mount '%s' '%s'", cfg.loopdev, cfg.export_dir);
}

static int mode_powercut(void)
{
	long long t0 = now_ms(), end = t0 + cfg.time_limit * 1000LL;
	int cycles = cfg.cycles ? cfg.cycles : 8;
	int early = getenv("CRASH_POWERCUT_EARLY") != NULL;
	char when[96];

	memset(&ST, 0, sizeof(ST));
	fake_reboots = 0;
	if (!cfg.export_dir || !cfg.loopdev || !cfg.image || !cfg.copy) {
		failf("powercut needs --export, --loopdev, --image and --copy (see test-powercut.sh)");
		return -1;
	}
	if (server_setup("powercut") < 0)
		return -1;
	srv.no_destage = 1;
	if (server_start(0, 1) < 0 || connect_all() < 0 || setup_tree() < 0)
		return -1;
	spread_via();
	for (int c = 0; c < cycles && now_ms() < end && any_enabled(); c++) {
		long long start = now_ms(), dur = 300 + rnd(1200), snap_at = 0;
		int before = rnd(3) == 0;

		ST.cycles++;
		wbudget_on = cfg.presto;
		wbudget = size_bytes(cfg.nvram_size) * 2 / 5;
		if (!cfg.presto && !early) {
			/* no log: a copy taken before the kill would lose acknowledged
			 * work; take it at the kill instead (CRASH_POWERCUT_EARLY=1 does
			 * not: a check that the test sees the loss) */
			run_workload(start + dur, 0, NULL, 0);
		} else if (before) {
			snapshot();
			run_workload(now_ms() + dur, 0, NULL, 0);
		} else {
			snap_at = start + 20 + rnd(dur - 40);
			snap_mid++;
			run_workload(start + dur, snap_at, snapshot, 0);
		}
		crash_kill();
		if (!cfg.presto && !early)
			snapshot();
		if (restore_copy() < 0)
			break;
		/* a power cut is a reboot: the server finds a new boot id */
		fake_reboot();
		snprintf(when, sizeof(when), "power cut %d (copy taken %s)", c + 1,
			 !cfg.presto && !early ? "at the kill" : before ? "before the first op" : "mid-workload");
		if (restart_and_check(1, when) < 0)
			break;
	}
	wbudget_on = 0;
	disconnect_all();
	server_stop();
	print_stats("powercut", t0);
	mixed_covered("powercut");
	info("powercut: %ld copies (%ld mid-workload)", snapshots, snap_mid);
	if (!any_enabled())
		info("powercut: stopped after %ld cycles: every client's subtree had failed", ST.cycles);
	else if (ST.cycles < 3)
		failf("only %ld power-cut cycles", ST.cycles);
	cleanup();
	return 0;
}

/* ---------------------------------------------------------- full log */

/* presto_stats -- the log's own account of waiting for room (presto -p) */
static void presto_stats(void)
{
	char cmd[768];

	fflush(stdout);
	snprintf(cmd, sizeof(cmd),
		 "'%s/presto' -s '%s/control.sock' -p 2>&1 | grep -i -E 'full|jukebox|wait' | sed 's/^/crash_nfs: fulllog: presto -p: /'",
		 cfg.bin, srv.state);
	if (system(cmd) < 0)
		printf("(presto -p failed)\n");
	fflush(stdout);
}

static int mode_fulllog(void)
{
	long long t0 = now_ms(), end = t0 + cfg.time_limit * 1000LL;
	int cycles = cfg.cycles ? cfg.cycles : 4;
	const char *size = cfg.nvram_size;
	char when[64];
	FILE *f;

	memset(&ST, 0, sizeof(ST));
	fake_reboots = 0;
	if (!cfg.presto) {
		info("fulllog: skipped (presto off: the server has no log)");
		return 1;
	}
	if (!strcmp(size, "64M"))
		cfg.nvram_size = "8M";	/* the smallest size presto-nfsd takes */
	if (server_setup("fulllog") < 0)
		return -1;
	/* a short wait for room before JUKEBOX, so that a full log shows */
	snprintf(srv.conf, sizeof(srv.conf), "%s/presto.conf", srv.dir);
	f = fopen(srv.conf, "w");
	if (!f)
		return -1;
	fprintf(f, "full_wait_ms = 20\n");
	fclose(f);
	if (server_start(0, 1) < 0 || connect_all() < 0 || setup_tree() < 0)
		return -1;
	spread_via();
	for (int c = 0; c < cycles && now_ms() < end && any_enabled(); c++) {
		ST.cycles++;
		/* odd cycles hold the destager: only a full log releases it */
		if (srv.no_destage != (c & 1)) {
			disconnect_all();
			workers_crashed();
			server_stop();
			srv.no_destage = c & 1;
			snprintf(when, sizeof(when), "fulllog: restart with%s --no-destage", srv.no_destage ? "" : "out");
			if (restart_and_check(1, when) < 0)
				break;
		}
		run_workload(now_ms() + 4000, 0, NULL, 1);
		presto_stats();
		crash_kill();
		snprintf(when, sizeof(when), "fulllog: after kill %d", c + 1);
		if (restart_and_check(rnd(2), when) < 0)
			break;
	}
	disconnect_all();
	server_stop();
	print_stats("fulllog", t0);
	mixed_covered("fulllog");
	if (ST.jukebox == 0)
		info("fulllog: note: no JUKEBOX reply; the log (%s) never stayed full", cfg.nvram_size);
	cfg.nvram_size = size;
	cleanup();
	return 0;
}

/* --------------------------------------------------------- scenarios */

/* sc_op -- run one op of client w to its reply (the model follows) */
static int sc_op(int w, struct op *op)
{
	struct worker *wk = &W[w];

	op->worker = w;
	op->seq = ++wk->seq;
	op->via = wk->via;
	wk->op = *op;
	if (op_send(wk->rpc, &M, &wk->op, wk->wbuf, &wk->res) < 0)
		return -1;
	wk->inflight = 1;
	if (rpc_wait(wk->rpc, &wk->res.done, CR_RPC_TIMEOUT_MS) < 0 && !wk->res.done) {
		failf("scenario: %s: no reply", op_desc(&M, op));
		return -1;
	}
	worker_reply(wk);
	return wk->enabled ? 0 : -1;
}

static int sc_obj(int w, const char *rel)
{
	char path[128];

	snprintf(path, sizeof(path), "w%d/%s", w, rel);
	return model_resolve(&M, path);
}

/* sc_valid -- would the op succeed, by the model? (minimizing drops ops,
 * so later ones may no longer make sense: they are skipped) */
static int sc_valid(int w, const struct op *op)
{
	int i, j;

	switch (op->kind) {
	case OP_CREATE:
	case OP_MKDIR:
	case OP_SYMLINK:
		return M.o[op->dir].type == T_DIR && model_lookup(&M, op->dir, op->name) < 0;
	case OP_REMOVE:
	case OP_RMDIR:
		i = model_lookup(&M, op->dir, op->name);
		if (i < 0 || (M.o[M.d[i].obj].type == T_DIR) != (op->kind == OP_RMDIR))
			return 0;
		for (j = 0; op->kind == OP_RMDIR && j < M.nd; j++)
			if (M.d[j].parent == M.d[i].obj)
				return 0;
		return 1;
	case OP_WRITE:
	case OP_SETSIZE:
		return op->obj != M.wroot[w] && M.o[op->obj].type == T_REG;
	case OP_SETMODE:
	case OP_SETTIMES:
		return op->obj != M.wroot[w] && M.o[op->obj].type != T_LNK;
	case OP_SETOWNER:
		return op->obj != M.wroot[w];
	case OP_LINK:
		return M.o[op->obj].type == T_REG && M.o[op->dir2].type == T_DIR &&
		       model_lookup(&M, op->dir2, op->name2) < 0;
	case OP_RENAME:
		i = model_lookup(&M, op->dir, op->name);
		j = model_lookup(&M, op->dir2, op->name2);
		if (i < 0 || M.o[op->dir2].type != T_DIR)
			return 0;
		if (M.o[M.d[i].obj].type == T_DIR)
			return j < 0 && !in_subtree(&M, op->dir2, M.d[i].obj);
		return j < 0 || M.o[M.d[j].obj].type != T_DIR;
	default:
		return 0;
	}
}

/* sc_step -- one step of a script, paths relative to w's subtree:
 *   c a [MODE]   create        m D [MODE]  mkdir      s a      symlink
 *   w a [OFF LEN SEED]  write  t a SIZE   truncate    p a MODE chmod
 *   T a [AS ANS MS MNS|server] utimes      r a b    rename
 *   l a b  link                u a   remove           x D      rmdir
 *   o a UID|- GID|-  chown (as root)      U UID GID  the client's credentials
 * Returns 0 (done, or skipped when lenient and invalid), -1 on failure. */
static int sc_step(int w, const char *step, int lenient)
{
	char k = 0, a[320] = "", b[320] = "", c[64] = "", d[64] = "", e[64] = "", *slash;
	struct op op;
	int n, valid;

	n = sscanf(step, " %c %319s %319s %63s %63s %63s", &k, a, b, c, d, e);
	if (n < 2)
		return 0;
	memset(&op, 0, sizeof(op));
	op.dir2 = M.wroot[w];
	slash = strrchr(a, '/');
	op.dir = slash ? (*slash = '\0', sc_obj(w, a)) : M.wroot[w];
	snprintf(op.name, CR_NAME_MAX, "%.*s", CR_NAME_MAX - 1, slash ? slash + 1 : a);
	if (slash)
		*slash = '/';
	switch (k) {
	case 'c':
	case 'm':
		op.kind = k == 'c' ? OP_CREATE : OP_MKDIR;
		op.mode = n > 2 ? strtoul(b, NULL, 8) : k == 'c' ? 0644 : 0755;
		break;
	case 's':
		op.kind = OP_SYMLINK;
		snprintf(op.target, sizeof(op.target), "target-of-%s", op.name);
		break;
	case 'u': op.kind = OP_REMOVE; break;
	case 'x': op.kind = OP_RMDIR; break;
	case 'w':
		op.kind = OP_WRITE;
		op.obj = sc_obj(w, a);
		if (n >= 5) {
			op.off = strtoull(b, NULL, 10);
			op.len = strtoul(c, NULL, 10);
			op.seed = strtoul(d, NULL, 10);
		} else {
			op.off = op.obj >= 0 ? M.o[op.obj].size : 0;
			op.len = 20000;
			op.seed = (uint32_t)rng();
		}
		if (op.off + op.len > CR_FILE_MAX)
			return lenient ? 0 : -1;
		break;
	case 't': op.kind = OP_SETSIZE; op.obj = sc_obj(w, a); op.size = atoi(b); break;
	case 'p':
		op.kind = OP_SETMODE;
		op.obj = sc_obj(w, a);
		op.mode = strtoul(b, NULL, 8);
		break;
	case 'o':
		op.kind = OP_SETOWNER;
		op.obj = sc_obj(w, a);
		op.set_uid = n > 2 && strcmp(b, "-");
		op.uid = strtoul(b, NULL, 10);
		op.set_gid = n > 3 && strcmp(c, "-");
		op.gid = strtoul(c, NULL, 10);
		if (!op.set_uid && !op.set_gid)
			return lenient ? 0 : -1;
		break;
	case 'A':
		/* --presto mixed: this client's calls go over 127.0.0.1 ("A 4",
		 * presto on) or ::1 ("A 6", nopresto) from now on */
		if (!cfg.mixed) {
			failf("scenario w%d: step '%s' needs --presto mixed", w, step);
			return -1;
		}
		worker_use(&W[w], !strcmp(a, "6") || !strcmp(a, "::1"));
		return 0;
	case 'U':
		/* this client's credentials from now on, its subtree its own */
		return give_subtree(w, (struct cred){ strtoul(a, NULL, 10), n > 2 ? strtoul(b, NULL, 10) : 0 });
	case 'T':
		op.kind = OP_SETTIMES;
		op.obj = sc_obj(w, a);
		if (n >= 3 && !strcmp(b, "server")) {
			op.server_time = 1;
		} else if (n >= 6) {
			op.atime.seconds = strtoul(b, NULL, 10);
			op.atime.nseconds = strtoul(c, NULL, 10);
			op.mtime.seconds = strtoul(d, NULL, 10);
			op.mtime.nseconds = strtoul(e, NULL, 10);
		} else {
			op.atime.seconds = 1100000000;
			op.atime.nseconds = 123456789;
			op.mtime.seconds = 1200000000;
			op.mtime.nseconds = 987654321;
		}
		break;
	case 'r':
	case 'l': {
		char *s2 = strrchr(b, '/');

		op.kind = k == 'r' ? OP_RENAME : OP_LINK;
		op.obj = sc_obj(w, a);
		op.dir2 = s2 ? (*s2 = '\0', sc_obj(w, b)) : M.wroot[w];
		snprintf(op.name2, CR_NAME_MAX, "%.*s", CR_NAME_MAX - 1, s2 ? s2 + 1 : b);
		break;
	}
	default:
		return 0;
	}
	valid = op.dir >= 0 && op.dir2 >= 0 && op.obj >= 0 && sc_valid(w, &op) && op_has_handles(&M, &op);
	if (!valid) {
		if (lenient)
			return 0;
		failf("scenario w%d: step '%s' could not run", w, step);
		return -1;
	}
	return sc_op(w, &op);
}

/* sc_restart -- a script's "R always|auto [reboot]": kill, (fake reboot,)
 * restart with or without --replay=always. Returns 0 or -1. */
static int sc_restart(const char *step, int w)
{
	disconnect_all();
	server_kill();
	workers_crashed();
	W[w].maybe = 0;
	if (strstr(step, "reboot"))
		fake_reboot();
	if (server_start(cfg.presto && !strncmp(step, "R always", 8), 1) < 0 || connect_all() < 0)
		return -1;
	return 0;
}

/* sc_run -- a ';'-separated script (see sc_step) in w's subtree */
static void sc_run(int w, const char *script)
{
	char *buf = strdup(script), *save = NULL;

	for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
		while (*t == ' ' || *t == '\n')
			t++;
		if (t[0] == 'R') {
			/* a restart inside a script: kill, restart as written */
			if (sc_restart(t, w) < 0)
				break;
			continue;
		}
		if (sc_step(w, t, 0) < 0)
			break;
	}
	free(buf);
}

/* ---------------------------------------------------------- minimizing */

/* min_trial -- run steps (with "R": clean restart) on a fresh server,
 * SIGKILL, (with cfg.reboot: a fake reboot,) restart with --replay=always,
 * check. Returns 1 if any check
 * failed (the failure reproduced), 0 if all passed, -1 if the trial could
 * not run. */
static int min_trial(const struct script *sc, const char *const *keep, int nkeep)
{
	int rc = 0;

	(void)sc;
	trial_failed = 0;
	nhist = 0;		/* each trial's report quotes only its own ops */
	if (server_setup("min") < 0 || server_start(0, 1) < 0 || connect_all() < 0 || setup_tree() < 0) {
		rc = -1;
		goto out;
	}
	for (int i = 0; i < nkeep && !trial_failed; i++) {
		if (keep[i][0] == 'R') {
			if (sc_restart(keep[i], 0) < 0) {
				rc = -1;
				goto out;
			}
			continue;
		}
		if (sc_step(0, keep[i], 1) < 0)
			break;
	}
	disconnect_all();
	server_kill();
	workers_crashed();
	W[0].maybe = 0;
	if (cfg.reboot)
		fake_reboot();
	if (server_start(1, 1) == 0 && connect_all() == 0)
		check_all(cfg.reboot ? "minimized (after a fake reboot)" : "minimized");
	rc = trial_failed > 0;
out:
	disconnect_all();
	if (srv.pid > 0)
		server_kill();
	cleanup();
	return rc;
}

/* minimize -- ddmin (Zeller) over a failing client's script, bounded in
 * time; prints the shortest failing script found and runs it once more,
 * loudly */
static void minimize(const struct script *sc, int seconds)
{
	long long end = now_ms() + seconds * 1000LL;
	const char **cur = malloc(sc->n * sizeof(*cur)), **tmp = malloc(sc->n * sizeof(*tmp));
	int ncur = sc->n, gran = 2, trials = 0, saved_workers = cfg.workers, saved_presto = cfg.presto;
	struct stats saved_st = ST;
	int saved_fails = fails_total, saved_reboot = cfg.reboot;

	cfg.reboot = min_reboot;
	for (int i = 0; i < sc->n; i++)
		cur[i] = sc->step[i];
	recording = 0;
	cfg.workers = 1;
	quiet = 1;
	info("minimize: %d steps; first, does the whole script fail again on a fresh server?", ncur);
	quiet = 1;
	if (min_trial(sc, cur, ncur) != 1) {
		quiet = 0;
		char path[64];
		FILE *f;

		snprintf(path, sizeof(path), "/tmp/crash_nfs-script-%d.txt", (int)getpid());
		f = fopen(path, "w");
		for (int i = 0; f && i < sc->n; i++)
			fprintf(f, "%s;\n", sc->step[i]);
		if (f)
			fclose(f);
		info("minimize: the script alone (%d steps, in %s) does not reproduce the failure (it may need the op in flight, other clients or timing)",
		     sc->n, path);
		goto out;
	}
	while (ncur >= 2 && now_ms() < end) {
		int chunk = (ncur + gran - 1) / gran, reduced = 0;

		for (int start = 0; start < ncur && now_ms() < end; start += chunk) {
			int n = 0, len = start + chunk > ncur ? ncur - start : chunk;

			/* complement: drop [start, start+len) */
			for (int i = 0; i < ncur; i++)
				if (i < start || i >= start + len)
					tmp[n++] = cur[i];
			trials++;
			if (n && min_trial(sc, tmp, n) == 1) {
				memcpy(cur, tmp, n * sizeof(*cur));
				ncur = n;
				gran = gran > 2 ? gran - 1 : 2;
				reduced = 1;
				break;
			}
		}
		if (!reduced) {
			if (gran >= ncur)
				break;
			gran = gran * 2 > ncur ? ncur : gran * 2;
		}
	}
	quiet = 0;
	info("minimize: %d trials; %d step(s) still fail%s:", trials, ncur, now_ms() >= end ? " (time ran out)" : "");
	printf("  crash_nfs --mode scenarios%s%s --script '", cfg.mixed ? " --presto mixed" : "",
	       cfg.reboot ? " --reboot" : "");
	for (int i = 0; i < ncur; i++)
		printf("%s%s", i ? "; " : "", cur[i]);
	printf("'\n");
	info("minimize: the failing script once more, with its report:");
	min_trial(sc, cur, ncur);
out:
	quiet = 0;
	free(cur);
	free(tmp);
	cfg.workers = saved_workers;
	cfg.presto = saved_presto;
	cfg.reboot = saved_reboot;
	ST = saved_st;
	fails_total = saved_fails;
	recording = 1;
}

/* mode_scenarios -- fixed op sequences, each in its own subtree, then
 * SIGKILL and --replay=always (replay onto a tree that has everything) and,
 * with --presto off, a plain restart: regression cases for replay. The set
 * runs twice: that restart in the same boot, then after a fake reboot. */
static int mode_scenarios(void)
{
	static const char *scripts[] = {
		"c a; w a; r a b; r b c",			/* rename chain */
		"c a; w a; l a b; u a",				/* link, remove the first name */
		"c a; c b; w a; w b; r a b",			/* rename over an existing file */
		"m D; c D/f; w D/f; r D E; r E F",		/* directory rename chain */
		"c a; w a; u a; c a; w a",			/* same name, new file */
		"c a; w a; l a b; r a b",			/* rename onto a link of itself: no-op */
		"c a; w a; t a 100; w a; l a b; r b c; u a",	/* truncate, link, move, remove */
		"m D; m D/E; c D/E/f; r D/E/f g; x D/E; x D",	/* empty and remove directories */
		"c a; l a b; r b c",				/* move a second link */
		"c a; s x; r x y; u y; c x",			/* symlink moved, removed, name reused */
		"c a; w a; m D; r a D/a; r D E; u E/a",		/* file moved with its directory */
		"c a; w a; t a 0; w a; t a 5000",		/* truncates between writes */
		"c a; w a; r a b; c a; w a",			/* moved away, new file at the old name */
		"m D; c D/f; r D/f g; x D",			/* directory emptied by a move, removed */
		"m D; r D E; c E/f; w E/f",			/* create in a renamed directory */
		"m D; c a; l a D/b; r D E; u a",		/* link into a directory, then move it */
		"c a; c b; l b c; r a c",			/* rename over one of two links */
		"c a; w a; p a 0600; T a; p a 0755",		/* chmod, utimes, chmod */
		"c x; r x a; u a; c a; l a b",			/* name reused after a move and a remove */
		"m D; m E; c f; p D 0700; l f D/l; r D/l E/g",	/* a directory's SETATTR, then a link
								 * moved out of it (after a reboot, its
								 * replay lowered D's stamp: 81680c5) */
		"c a; w a; o a 1001 3999; s l; o l 65534 65534; m D; o D 2002 -; c D/f",	/* owners (root's subtree) */
		"c a; w a; o a - 3999; l a b; o b - 65534; m D; o D - 0; c D/f",	/* groups (uid 2021's subtree) */
	};
	/* --presto mixed: the same objects changed over 127.0.0.1 (presto on)
	 * and ::1 (nopresto, logged as "through" records and flushed) in turn */
	static const char *mixed_scripts[] = {
		"c a; w a; A 6; t a 100; w a; A 4; w a; t a 5000",	/* writes and truncates */
		"c a; w a; A 6; r a b; A 4; c a; w a; A 6; u b",	/* moved, name reused, removed */
		"A 6; c a; w a; A 4; l a b; A 6; u a; A 4; r b c",	/* links across the two */
		"m D; A 6; c D/f; w D/f; A 4; r D E; A 6; u E/f; A 4; x E",	/* directory emptied */
		"c a; A 6; p a 0600; T a; A 4; p a 0755; A 6; o a - 3999",	/* attributes */
	};
	const char *all[CR_WORKERS_MAX];
	int nfixed = (int)(sizeof(scripts) / sizeof(scripts[0]));
	int nmixed = cfg.mixed ? (int)(sizeof(mixed_scripts) / sizeof(mixed_scripts[0])) : 0;
	int n = cfg.script ? 1 : nfixed + nmixed, saved_workers;
	long long t0 = now_ms();

	if (n > CR_WORKERS_MAX) {
		failf("%d scenarios, at most CR_WORKERS_MAX (%d)", n, CR_WORKERS_MAX);
		return -1;
	}
	for (int i = 0; i < n; i++)
		all[i] = cfg.script ? cfg.script : i < nfixed ? scripts[i] : mixed_scripts[i - nfixed];

	memset(&ST, 0, sizeof(ST));
	fake_reboots = 0;
	saved_workers = cfg.workers;
	cfg.workers = n;
	/* the set twice: restarted in the same boot, then after a fake reboot
	 * (--script: once, after a fake reboot with --reboot) */
	for (int pass = cfg.script ? 1 : 0; pass < 2; pass++) {
		int reboot = cfg.script ? cfg.reboot : pass;

		if (server_setup("scen") < 0 || server_start(0, 1) < 0 || connect_all() < 0 || setup_tree() < 0) {
			cfg.workers = saved_workers;
			return -1;
		}
		for (int w = 0; w < n; w++)
			sc_run(w, all[w]);
		crash_kill();
		if (reboot)
			fake_reboot();
		restart_and_check(cfg.presto, reboot ? "scenarios: after SIGKILL and a fake reboot" : "scenarios: after SIGKILL");
		for (int w = 0; w < n; w++)
			if (!W[w].enabled) {
				char u[64] = "";

				if (wcred[w].uid)
					snprintf(u, sizeof(u), "U %u %u; ", wcred[w].uid, wcred[w].gid);
				printf("  (scenario w%d%s was: %s%s)\n", w,
				       reboot ? ", restarted after a fake reboot," : "", u, all[w]);
			}
		disconnect_all();
		server_kill();
		workers_crashed();
		if (cfg.presto) {
			/* the same log replayed a second time */
			restart_and_check(1, "scenarios: after a second --replay=always");
			disconnect_all();
		}
		server_stop();
		cleanup();
	}
	print_stats("scenarios", t0);
	cfg.workers = saved_workers;
	return 0;
}

/* ------------------------------------------------------------------- main */

static int detect_presto(void)
{
	char cmd[600], buf[8192];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd), "'%s/presto-nfsd' --help 2>&1", cfg.bin);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, p);
	pclose(p);
	buf[n] = '\0';
	return strstr(buf, "--nvram") != NULL;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: crash_nfs [--mode scenarios,kill,fulllog,powercut] [--presto auto|on|off|mixed] [--kills N]\n"
		"                 [--time-limit SEC] [--workers N] [--seed S] [--cycles N]\n"
		"                 [--nvram-size SIZE] [--replay auto|always|mixed] [--verbose]\n"
		"                 [--minimize SEC] [--script 'STEP; STEP...'] [--reboot]\n"
		"                 [--export DIR --loopdev DEV --image FILE --copy FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *presto = getenv("CRASH_PRESTO") ? getenv("CRASH_PRESTO") : "auto";
	char *tok, *save = NULL;
	int total_pass = 0, total_fail = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(cfg.modes, sizeof(cfg.modes), "scenarios,kill,fulllog");
	cfg.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	if (getenv("CRASH_SEED"))
		cfg.seed = strtoull(getenv("CRASH_SEED"), NULL, 0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--verbose")) {
			cfg.verbose = 1;
			continue;
		}
		if (!strcmp(a, "--reboot")) {
			cfg.reboot = 1;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--mode"))
			snprintf(cfg.modes, sizeof(cfg.modes), "%s", v);
		else if (!strcmp(a, "--presto"))
			presto = v;
		else if (!strcmp(a, "--kills"))
			cfg.kills = atoi(v);
		else if (!strcmp(a, "--time-limit"))
			cfg.time_limit = atoi(v);
		else if (!strcmp(a, "--workers"))
			cfg.workers = atoi(v);
		else if (!strcmp(a, "--seed"))
			cfg.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--replay"))
			cfg.replay = !strcmp(v, "always") ? 1 : !strcmp(v, "auto") ? 0 : 2;
		else if (!strcmp(a, "--minimize"))
			cfg.minimize = atoi(v);
		else if (!strcmp(a, "--script"))
			cfg.script = v;
		else if (!strcmp(a, "--cycles"))
			cfg.cycles = atoi(v);
		else if (!strcmp(a, "--nvram-size"))
			cfg.nvram_size = v;
		else if (!strcmp(a, "--export"))
			cfg.export_dir = v;
		else if (!strcmp(a, "--loopdev"))
			cfg.loopdev = v;
		else if (!strcmp(a, "--image"))
			cfg.image = v;
		else if (!strcmp(a, "--copy"))
			cfg.copy = v;
		else
			usage();
	}
	if (cfg.workers < 1 || cfg.workers > CR_WORKERS_MAX)
		usage();
	cfg.bin = getenv("PRESTO_BIN") ? getenv("PRESTO_BIN") : "bin";
	cfg.mixed = !strcmp(presto, "mixed");
	cfg.presto = !strcmp(presto, "on") || cfg.mixed ? 1 : !strcmp(presto, "off") ? 0 : detect_presto();
	rng_state = cfg.seed;
	info("seed %" PRIu64 " (CRASH_SEED=%" PRIu64 " repeats the choices), presto %s, server %s/presto-nfsd",
	     cfg.seed, cfg.seed,
	     cfg.mixed ? "mixed (127.0.0.1 presto on, ::1 nopresto)" : cfg.presto ? "on" : "off", cfg.bin);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, emergency);
	signal(SIGTERM, emergency);
	signal(SIGINT, emergency);
	atexit(cleanup);

	for (tok = strtok_r(cfg.modes, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int rc;

		fails_total = 0;
		powercut_mode = !strcmp(tok, "powercut");
		alarm(cfg.time_limit + cfg.minimize + 150);
		if (!strcmp(tok, "kill"))
			rc = mode_kill();
		else if (!strcmp(tok, "powercut"))
			rc = mode_powercut();
		else if (!strcmp(tok, "fulllog"))
			rc = mode_fulllog();
		else if (!strcmp(tok, "scenarios"))
			rc = mode_scenarios();
		else
			usage();
		alarm(0);
		disconnect_all();
		cleanup();
		if (rc > 0)
			continue;	/* skipped */
		if (rc < 0 && !fails_total)
			failf("%s: set-up failed", tok);
		printf("crash-%s: %d passed, %d failed\n", tok, fails_total ? 0 : 1, fails_total ? 1 : 0);
		if (fails_total)
			info("%s: %d failure(s) above; seed %" PRIu64, tok, fails_total, cfg.seed);
		total_pass += !fails_total;
		total_fail += !!fails_total;
	}
	model_free(&M);
	return total_fail ? 1 : 0;
}
