/*
 * harness.c -- see harness.h.
 *
 * Why raw libnfs calls are wrapped in it_nfs3(): libnfs decodes a reply into
 * a buffer it frees when the callback returns, so the callback copies the
 * fields tests look at into a flat struct it_res. Why a hand-made RPC
 * encoder as well: libnfs (rightly) refuses to send malformed records,
 * over-long handles, unknown auth flavours or calls from a chosen source
 * address, and the server's answers to those are what the security tests
 * are about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IT_MAX_SERVERS 8

static struct it_server *it_servers[IT_MAX_SERVERS];

int it_nvram;
const char *it_nvram_size = "64M";
const char *it_presto_extra[8];
static int it_ganesha_round;

static long long it_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int it_is_ganesha(void)
{
	const char *e = getenv("PRESTO_IT_SERVER");

	return e && strcmp(e, "ganesha") == 0;
}

static void it_register(struct it_server *s)
{
	for (int i = 0; i < IT_MAX_SERVERS; i++)
		if (!it_servers[i]) {
			it_servers[i] = s;
			return;
		}
}

static void it_unregister(struct it_server *s)
{
	for (int i = 0; i < IT_MAX_SERVERS; i++)
		if (it_servers[i] == s)
			it_servers[i] = NULL;
}

/* it_watchdog -- SIGALRM: only async-signal-safe calls (kill, fork, execv) */
static void it_watchdog(int sig)
{
	static const char msg[] = "integration: watchdog expired, killing the server(s)\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing to do */
	}
	for (int i = 0; i < IT_MAX_SERVERS; i++) {
		struct it_server *s = it_servers[i];

		if (!s)
			continue;
		if (s->pid > 0)
			kill(s->pid, SIGKILL);
		if (s->dir[0] && fork() == 0) {
			char *argv[] = { "rm", "-rf", s->dir, NULL };

			execv("/bin/rm", argv);
			_exit(127);
		}
	}
	_exit(1);
}

static pid_t it_rpcbind_pid;

static void it_atexit(void)
{
	for (int i = 0; i < IT_MAX_SERVERS; i++)
		if (it_servers[i])
			it_server_stop(it_servers[i]);
	if (it_rpcbind_pid > 0) {
		kill(it_rpcbind_pid, SIGTERM);
		waitpid(it_rpcbind_pid, NULL, 0);
		it_rpcbind_pid = 0;
	}
}

void it_init_mode(unsigned seconds, int nvram)
{
	it_nvram = nvram;
	if (getenv("PRESTO_IT_NVRAM"))
		it_nvram = atoi(getenv("PRESTO_IT_NVRAM"));
	/* IT_FILTER=pattern: only the tests whose names match (cmocka's * and
	 * ? wildcards), to run one test while working on it */
	if (getenv("IT_FILTER"))
		cmocka_set_test_filter(getenv("IT_FILTER"));
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, it_watchdog);
	atexit(it_atexit);
	alarm(seconds);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

const char *it_path(const struct it_server *s, const char *rel)
{
	static char bufs[8][512];
	static int next;
	char *p = bufs[next++ % 8];

	snprintf(p, sizeof(bufs[0]), "%s/%s", s->export, rel);
	return p;
}

static int it_write_exports(struct it_server *s, const struct it_export *ex, int n)
{
	FILE *f = fopen(s->exports_file, "w");

	if (!f)
		return -1;
	for (int i = 0; i < n; i++)
		fprintf(f, strchr(ex[i].sub, ' ') ? "\"%s/%s\" %s\n" : "%s/%s %s\n", s->dir, ex[i].sub,
			ex[i].clients);
	return fclose(f);
}

/* it_ganesha_client -- one "host(opts)" of an exports(5) line as a Ganesha
 * CLIENT block (only the options the tests use) */
static void it_ganesha_client(FILE *f, const char *spec, size_t len, int *privileged)
{
	char buf[256], *opts, *o, *save = NULL;
	const char *access = "RW", *squash = "root_squash";
	long anonuid = 65534, anongid = 65534;
	int insecure = 0;

	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	memcpy(buf, spec, len);
	buf[len] = '\0';
	opts = strchr(buf, '(');
	if (opts) {
		*opts++ = '\0';
		opts[strcspn(opts, ")")] = '\0';
		for (o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
			if (!strcmp(o, "ro"))
				access = "RO";
			else if (!strcmp(o, "rw"))
				access = "RW";
			else if (!strcmp(o, "no_root_squash"))
				squash = "no_root_squash";
			else if (!strcmp(o, "all_squash"))
				squash = "all_squash";
			else if (!strcmp(o, "insecure"))
				insecure = 1;
			else if (!strncmp(o, "anonuid=", 8))
				anonuid = strtol(o + 8, NULL, 10);
			else if (!strncmp(o, "anongid=", 8))
				anongid = strtol(o + 8, NULL, 10);
		}
	}
	if (!insecure)
		*privileged = 1;
	fprintf(f, "\tCLIENT {\n\t\tClients = %s;\n\t\tAccess_Type = %s;\n"
		   "\t\tSquash = %s;\n\t\tAnonymous_Uid = %ld;\n\t\tAnonymous_Gid = %ld;\n\t}\n",
		buf, access, squash, anonuid, anongid);
}

static int it_write_ganesha_conf(struct it_server *s, const struct it_export *ex, int n,
				 const char *conf)
{
	FILE *f = fopen(conf, "w");

	if (!f)
		return -1;
	fprintf(f,
		"NFS_CORE_PARAM {\n\tNFS_Port = %d;\n\tMNT_Port = %d;\n\tNLM_Port = %d;\n"
		"\tRquota_Port = %d;\n\tBind_addr = 127.0.0.1;\n\tNFS_Protocols = 3;\n"
		"\tEnable_NLM = false;\n\tEnable_RQUOTA = false;\n\tEnable_UDP = false;\n%s\n}\n"
		"NFSv4 {\n\tGraceless = true;\n\tRecoveryBackend = fs;\n\tRecoveryRoot = %s/state;\n}\n"
		"LOG {\n\tDefault_Log_Level = EVENT;\n}\n",
		s->nfs_port, s->mount_port, s->nfs_port + 2, s->nfs_port + 3,
		/* PRESTO_IT_GANESHA_CORE: more NFS_CORE_PARAM lines, e.g. to check
		 * that a test fails on a server without a DRC */
		getenv("PRESTO_IT_GANESHA_CORE") ? getenv("PRESTO_IT_GANESHA_CORE") : "", s->dir);
	for (int i = 0; i < n; i++) {
		const char *p = ex[i].clients;
		int privileged = 0;
		char *body = NULL;
		size_t blen = 0;
		FILE *b = open_memstream(&body, &blen);

		while (*p) {
			size_t l;

			p += strspn(p, " \t");
			l = strcspn(p, " \t");
			if (l)
				it_ganesha_client(b, p, l, &privileged);
			p += l;
		}
		fclose(b);
		fprintf(f,
			"EXPORT {\n\tExport_Id = %d;\n\tPath = \"%s/%s\";\n\tPseudo = \"%s/%s\";\n"
			"\tProtocols = 3;\n\tTransports = TCP;\n\tAccess_Type = None;\n"
			"\tSquash = root_squash;\n\tSecType = sys;\n\tPrivilegedPort = %s;\n"
			"\tFSAL { Name = VFS; }\n%s}\n",
			i + 1, s->dir, ex[i].sub, s->dir, ex[i].sub, privileged ? "true" : "false",
			body ? body : "");
		free(body);
	}
	return fclose(f);
}

static void it_print_log(const struct it_server *s, int lines)
{
	char cmd[512];

	fprintf(stderr, "---- last %d lines of %s\n", lines, s->log);
	snprintf(cmd, sizeof(cmd), "tail -n %d '%s' >&2", lines, s->log);
	if (system(cmd) < 0)
		fprintf(stderr, "(tail failed)\n");
	fprintf(stderr, "----\n");
}

static int it_port_open(int port)
{
	int fd = it_tcp_connect(NULL, 0, port);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* it_null_ok -- a NULL call on a fresh connection gets MSG_ACCEPTED SUCCESS */
static int it_null_ok(int port, uint32_t prog, uint32_t vers)
{
	static struct it_buf call, reply;
	struct it_reply rep;

	it_buf_reset(&call);
	it_put_call(&call, 0x4e554c4c, 2, prog, vers, 0, IT_AUTH_NONE, 0, 0);
	if (it_raw_call(port, NULL, 0, &call, &reply, &rep) < 0)
		return 0;
	return rep.reply_stat == 0 && rep.accept_stat == 0;
}

static int it_launch_ganesha(struct it_server *s)
{
	char conf[256], pidf[256];
	long long deadline;

	snprintf(conf, sizeof(conf), "%s/ganesha.conf", s->dir);
	snprintf(pidf, sizeof(pidf), "%s/ganesha.pid", s->dir);
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (chdir(s->dir) < 0)
			_exit(127);
		execlp("ganesha.nfsd", "ganesha.nfsd", "-F", "-f", conf, "-L", s->log, "-p", pidf,
		       (char *)NULL);
		_exit(127);
	}
	deadline = it_now_ms() + 20000;
	while (it_now_ms() < deadline) {
		if (!it_server_running(s))
			return -1;
		if (it_port_open(s->nfs_port) && it_port_open(s->mount_port) &&
		    it_null_ok(s->nfs_port, IT_NFS_PROG, 3) && it_null_ok(s->mount_port, MOUNT_PROG, 3))
			return 0;
		usleep(100 * 1000);
	}
	return -1;
}

/* it_ensure_rpcbind -- Ganesha needs rpcbind: start one when none runs
 * (stopped at exit); an rpcbind that was running is left alone */
static void it_ensure_rpcbind(void)
{
	if (it_rpcbind_pid > 0 || system("rpcinfo -p 127.0.0.1 >/dev/null 2>&1") == 0 ||
	    system("pgrep -x rpcbind >/dev/null 2>&1") == 0)
		return;
	mkdir("/run/rpcbind", 0755);
	it_rpcbind_pid = fork();
	if (it_rpcbind_pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execlp("rpcbind", "rpcbind", "-f", "-w", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 50 && system("rpcinfo -p 127.0.0.1 >/dev/null 2>&1") != 0; i++)
		usleep(100 * 1000);
}

static int it_start_ganesha(struct it_server *s, const struct it_export *ex, int n)
{
	char conf[256];

	it_ensure_rpcbind();
	/* two port sets alternate so that a new server never waits for the old one */
	s->nfs_port = 20060 + 4 * (it_ganesha_round++ % 2);
	s->mount_port = s->nfs_port + 1;
	snprintf(conf, sizeof(conf), "%s/ganesha.conf", s->dir);
	if (it_write_ganesha_conf(s, ex, n, conf) < 0)
		return -1;
	return it_launch_ganesha(s);
}

static int it_start_presto(struct it_server *s, int flags)
{
	const char *bin = getenv("PRESTO_BIN");
	char exe[512], state[256], line[512];
	size_t used = 0;
	int out[2], logfd;
	long long deadline;

	snprintf(exe, sizeof(exe), "%s/presto-nfsd", bin && *bin ? bin : "bin");
	snprintf(state, sizeof(state), "%s/state", s->dir);
	if (pipe2(out, O_CLOEXEC) < 0)
		return -1;
	logfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return -1;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		char nvram[256];
		const char *argv[32];
		int n = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(out[1], 1);
		dup2(logfd, 2);
		argv[n++] = exe;
		argv[n++] = "--exports";
		argv[n++] = s->exports_file;
		argv[n++] = "--state-dir";
		argv[n++] = state;
		argv[n++] = "--bind";
		argv[n++] = "127.0.0.1";
		argv[n++] = "--nfs-port";
		argv[n++] = "0";
		argv[n++] = "--mount-port";
		argv[n++] = "0";
		if (flags & IT_IPV6) {
			argv[n++] = "--bind";
			argv[n++] = "::1";
		}
		if (!(flags & IT_RPCBIND))
			argv[n++] = "--no-rpcbind";
		if (it_nvram) {
			/* presto on: the NVRAM log in the temp dir, treated as
			 * persistent memory as `make run` treats /dev/shm (so
			 * changes run on the event loop thread, as in the
			 * product; the crash tests cover the msync kind too) */
			if (it_nvram == IT_NVRAM_MSYNC)
				unsetenv("PMEM_IS_PMEM_FORCE");
			else
				setenv("PMEM_IS_PMEM_FORCE", "1", 1);
			snprintf(nvram, sizeof(nvram), "%s/nvram.log", s->dir);
			argv[n++] = "--nvram";
			argv[n++] = nvram;
			argv[n++] = "--nvram-size";
			argv[n++] = it_nvram_size;
		}
		for (int i = 0; it_presto_extra[i] && n < 22; i++)
			argv[n++] = it_presto_extra[i];
		argv[n++] = "--foreground";
		argv[n] = NULL;
		execv(exe, (char *const *)argv);
		dprintf(2, "exec %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(logfd);
	s->out_fd = out[0];
	deadline = it_now_ms() + IT_TIMEOUT_MS;
	while (it_now_ms() < deadline) {
		struct pollfd p = { .fd = s->out_fd, .events = POLLIN };
		ssize_t r;
		char *nl;

		if (poll(&p, 1, 100) <= 0)
			continue;
		r = read(s->out_fd, line + used, sizeof(line) - 1 - used);
		if (r <= 0)
			break;
		used += (size_t)r;
		line[used] = '\0';
		nl = strchr(line, '\n');
		if (!nl) {
			if (used == sizeof(line) - 1)
				break;
			continue;
		}
		*nl = '\0';
		if (sscanf(line, "presto-nfsd: ready nfs=%d mount=%d", &s->nfs_port, &s->mount_port) == 2 &&
		    s->nfs_port > 0 && s->mount_port > 0) {
			if (nl + 1 < line + used) {
				fprintf(stderr, "integration: presto-nfsd wrote more than its ready line on "
						"stdout: \"%s\"\n", nl + 1);
				s->extra_stdout = 1;
			}
			return 0;
		}
		fprintf(stderr, "integration: unexpected first stdout line from presto-nfsd: \"%s\"\n",
			line);
		return -1;
	}
	fprintf(stderr, "integration: presto-nfsd printed no ready line (it exited, or %d ms passed)\n", IT_TIMEOUT_MS);
	return -1;
}

int it_server_startv(struct it_server *s, const struct it_export *ex, int n, int flags)
{
	char sub[256];
	int rc;

	memset(s, 0, sizeof(*s));
	s->pid = -1;
	s->out_fd = -1;
	s->ganesha = it_is_ganesha();
	snprintf(s->dir, sizeof(s->dir), "/tmp/presto-it-XXXXXX");
	if (!mkdtemp(s->dir)) {
		s->dir[0] = '\0';
		return -1;
	}
	/* the tests create files as other users (squash, uid 1000) */
	chmod(s->dir, 0755);
	snprintf(s->export, sizeof(s->export), "%s/%s", s->dir, ex[0].sub);
	snprintf(s->exports_file, sizeof(s->exports_file), "%s/exports", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	snprintf(sub, sizeof(sub), "%s/state", s->dir);
	mkdir(sub, 0700);
	for (int i = 0; i < n; i++) {
		snprintf(sub, sizeof(sub), "%s/%s", s->dir, ex[i].sub);
		if (mkdir(sub, 0777) < 0 && errno != EEXIST)
			return -1;
		chmod(sub, 0777);
	}
	if (it_write_exports(s, ex, n) < 0)
		return -1;
	it_register(s);
	s->flags = flags;
	rc = s->ganesha ? it_start_ganesha(s, ex, n) : it_start_presto(s, flags);
	if (rc < 0) {
		fprintf(stderr, "integration: the server did not start\n");
		it_print_log(s, 40);
		it_server_stop(s);
	}
	return rc;
}

int it_server_start(struct it_server *s, const char *clients)
{
	struct it_export ex = { "export", clients };

	return it_server_startv(s, &ex, 1, 0);
}

int it_server_running(struct it_server *s)
{
	int st;

	if (s->pid <= 0)
		return 0;
	if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
		s->exit_status = st;
		s->pid = -1;
		fprintf(stderr, "integration: the server exited early (status 0x%x)\n", st);
		it_print_log(s, 40);
		return 0;
	}
	return 1;
}

int it_server_reload(struct it_server *s, const struct it_export *ex, int n)
{
	if (it_write_exports(s, ex, n) < 0 || s->pid <= 0)
		return -1;
	if (s->ganesha)
		return -1;
	return kill(s->pid, SIGHUP);
}

/* it_server_halt -- SIG, wait for the exit (SIGKILL after 10 s); the temp
 * dir stays; 0 when the exit was clean (SIGTERM: status 0) */
static int it_server_halt(struct it_server *s, int sig)
{
	int rc = 0, st = 0;

	/* a server that died before we asked is a failure (it says so) */
	if (s->pid > 0 && !it_server_running(s))
		rc = -1;
	if (s->pid > 0) {
		long long deadline = it_now_ms() + 10000;
		pid_t w = 0;

		kill(s->pid, sig);
		while (it_now_ms() < deadline && (w = waitpid(s->pid, &st, WNOHANG)) == 0)
			usleep(20 * 1000);
		if (w != s->pid) {
			fprintf(stderr, "integration: the server ignored SIGTERM for 10 s: SIGKILL\n");
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &st, 0);
			rc = -1;
		} else if (sig == SIGTERM && !s->ganesha && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			/* Ganesha's exit status on SIGTERM is not our business */
			fprintf(stderr, "integration: the server's status after SIGTERM is 0x%x, not exit 0\n",
				st);
			rc = -1;
		}
		s->exit_status = st;
		s->pid = -1;
		if (rc < 0 || getenv("PRESTO_IT_VERBOSE"))
			it_print_log(s, 40);
	}
	if (s->out_fd >= 0) {
		/* the ready line is the only thing presto-nfsd writes on stdout */
		char extra[256];
		ssize_t n;

		fcntl(s->out_fd, F_SETFL, O_NONBLOCK);
		n = read(s->out_fd, extra, sizeof(extra) - 1);
		if (s->extra_stdout)
			rc = -1;
		if (n > 0) {
			extra[n] = '\0';
			fprintf(stderr, "integration: presto-nfsd wrote more than its ready line on stdout: \"%s\"\n",
				extra);
			rc = -1;
		}
		close(s->out_fd);
		s->out_fd = -1;
	}
	return rc;
}

int it_server_restart_killed(struct it_server *s)
{
	long long deadline = it_now_ms() + 10000;
	pid_t w = 0;
	int st = 0;

	if (s->pid <= 0 || s->ganesha)
		return -1;
	while (it_now_ms() < deadline && (w = waitpid(s->pid, &st, WNOHANG)) == 0)
		usleep(20 * 1000);
	if (w != s->pid || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		fprintf(stderr, "integration: the server was to be killed (SIGKILL): %s 0x%x\n",
			w == s->pid ? "status" : "still running,", st);
		return -1;
	}
	s->exit_status = st;
	s->pid = -1;
	return it_server_restart_after(s, SIGKILL, NULL);	/* nothing left to kill */
}

int it_server_restart(struct it_server *s, int sig)
{
	return it_server_restart_after(s, sig, NULL);
}

int it_server_restart_after(struct it_server *s, int sig, void (*between)(struct it_server *s))
{
	int rc = it_server_halt(s, sig);

	if (between)
		between(s);

	if (s->ganesha) {
		usleep(500 * 1000);	/* Ganesha rebinds the same ports */
		if (it_launch_ganesha(s) < 0)
			rc = -1;
	} else if (it_start_presto(s, s->flags) < 0) {
		rc = -1;
	}
	if (rc < 0)
		it_print_log(s, 40);
	return rc;
}

int it_server_stop(struct it_server *s)
{
	int rc = it_server_halt(s, SIGTERM);

	if (s->dir[0] && !getenv("PRESTO_IT_KEEP"))
		it_rm_rf(s->dir);
	s->dir[0] = '\0';
	it_unregister(s);
	return rc;
}

/* ---------------------------------------------------------------- libnfs */

struct nfs_context *it_nfs_mount(struct it_server *s, const char *path, int uid, int gid, int *err)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *url;
	char u[512];
	int rc;

	if (err)
		*err = -ENOMEM;
	if (!nfs)
		return NULL;
	snprintf(u, sizeof(u), "nfs://127.0.0.1%s?nfsport=%d&mountport=%d", path ? path : s->export,
		 s->nfs_port, s->mount_port);
	url = nfs_parse_url_dir(nfs, u);
	if (!url) {
		fprintf(stderr, "integration: nfs_parse_url_dir(%s): %s\n", u, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_set_timeout(nfs, IT_TIMEOUT_MS);
	nfs_set_autoreconnect(nfs, 0);
	if (uid >= 0)
		nfs_set_uid(nfs, uid);
	if (gid >= 0)
		nfs_set_gid(nfs, gid);
	rc = nfs_mount(nfs, url->server, url->path);
	nfs_destroy_url(url);
	if (rc < 0) {
		if (err)
			*err = rc;
		else
			fprintf(stderr, "integration: nfs_mount(%s): %s\n", u, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	if (err)
		*err = 0;
	return nfs;
}

void it_nfs_close(struct nfs_context *nfs)
{
	if (nfs)
		nfs_destroy_context(nfs);
}

struct it_conn {
	int done;
	int status;
};

static void it_connect_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct it_conn *c = priv;

	(void)rpc;
	c->status = status;
	if (status != RPC_STATUS_SUCCESS)
		fprintf(stderr, "integration: connect: %s\n", data ? (char *)data : "?");
	c->done = 1;
}

int it_wait(struct rpc_context *rpc, const int *done, int timeout_ms)
{
	long long deadline = it_now_ms() + timeout_ms;

	while (!*done) {
		struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
		long long left = deadline - it_now_ms();
		int r;

		if (left <= 0)
			return -1;
		r = poll(&p, 1, left > 100 ? 100 : (int)left);
		if (r < 0 && errno != EINTR)
			return -1;
		if (rpc_service(rpc, r > 0 ? p.revents : 0) < 0) {
			if (*done)
				break;
			return -1;
		}
	}
	return 0;
}

int it_wait_all(struct rpc_context *const *rpc, int n, const int *pending, int timeout_ms)
{
	long long deadline = it_now_ms() + timeout_ms;
	struct pollfd p[IT_WAIT_MAX];

	if (n > IT_WAIT_MAX)
		return -1;
	while (*pending > 0) {
		if (it_now_ms() >= deadline)
			return -1;
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = rpc_get_fd(rpc[i]), .events = rpc_which_events(rpc[i]) };
		if (poll(p, (nfds_t)n, 100) < 0 && errno != EINTR)
			return -1;
		for (int i = 0; i < n; i++)
			if (rpc_service(rpc[i], p[i].revents) < 0)
				return -2 - i;
	}
	return 0;
}

int it_nfs_wait(struct nfs_context *nfs, const int *done, int timeout_ms)
{
	long long deadline = it_now_ms() + timeout_ms;

	while (!*done) {
		struct pollfd p = { .fd = nfs_get_fd(nfs), .events = nfs_which_events(nfs) };
		long long left = deadline - it_now_ms();
		int r;

		if (left <= 0)
			return -1;
		r = poll(&p, 1, left > 100 ? 100 : (int)left);
		if (r < 0 && errno != EINTR)
			return -1;
		if (nfs_service(nfs, r > 0 ? p.revents : 0) < 0) {
			if (*done)
				break;
			return -1;
		}
	}
	return 0;
}

struct rpc_context *it_rpc_connect(struct it_server *s, int prog, int vers)
{
	return it_rpc_connect_to(s, "127.0.0.1", prog, vers);
}

struct rpc_context *it_rpc_connect_to(struct it_server *s, const char *host, int prog, int vers)
{
	struct rpc_context *rpc = rpc_init_context();
	struct it_conn c = { 0, 0 };
	int port = prog == MOUNT_PROG ? s->mount_port : s->nfs_port;

	if (!rpc)
		return NULL;
	if (rpc_connect_port_async(rpc, host, port, prog, vers, it_connect_cb, &c) < 0 ||
	    it_wait(rpc, &c.done, IT_TIMEOUT_MS) < 0 || c.status != RPC_STATUS_SUCCESS) {
		fprintf(stderr, "integration: cannot connect to program %d on port %d: %s\n", prog, port,
			rpc_get_error(rpc));
		rpc_destroy_context(rpc);
		return NULL;
	}
	return rpc;
}

void it_rpc_close(struct rpc_context *rpc)
{
	if (rpc)
		rpc_destroy_context(rpc);
}

nfs_fh3 it_fh3(const struct it_fh *fh)
{
	nfs_fh3 f;

	f.data.data_len = fh->len;
	f.data.data_val = (char *)fh->data;
	return f;
}

void it_fh_from(struct it_fh *dst, const nfs_fh3 *src)
{
	dst->len = src->data.data_len > IT_FH_MAX ? IT_FH_MAX : src->data.data_len;
	memcpy(dst->data, src->data.data_val, dst->len);
}

struct it_call {
	int done;
	int proc;
	struct it_res *res;
	struct it_fh *fh;		/* it_mnt */
	int abandoned;			/* timed out: the callback frees it */
};

int it_call_timeout_ms = IT_TIMEOUT_MS;

static void it_error_cb(struct it_res *res, int status, void *data)
{
	res->rpc_status = status;
	snprintf(res->rpc_error, sizeof(res->rpc_error), "%s",
		 status == RPC_STATUS_ERROR && data ? (char *)data :
		 status == RPC_STATUS_TIMEOUT ? "timeout" : "cancelled");
}

static void it_mnt_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct it_call *c = priv;
	mountres3 *m = data;

	(void)rpc;
	c->done = 1;
	if (status != RPC_STATUS_SUCCESS) {
		it_error_cb(c->res, status, data);
		return;
	}
	c->res->rpc_status = 0;
	c->res->status = m->fhs_status;
	if (m->fhs_status == MNT3_OK) {
		fhandle3 *f = &m->mountres3_u.mountinfo.fhandle;

		c->fh->len = f->fhandle3_len > IT_FH_MAX ? IT_FH_MAX : f->fhandle3_len;
		memcpy(c->fh->data, f->fhandle3_val, c->fh->len);
	}
}

int it_mnt(struct rpc_context *mnt, const char *path, struct it_fh *fh)
{
	struct it_res res;
	struct it_call c = { 0, 0, &res, fh, 0 };

	memset(&res, 0, sizeof(res));
	if (rpc_mount3_mnt_async(mnt, it_mnt_cb, (char *)path, &c) < 0 ||
	    it_wait(mnt, &c.done, IT_TIMEOUT_MS) < 0 || res.rpc_status != 0) {
		fprintf(stderr, "integration: MNT %s: %s\n", path, res.rpc_error);
		return -1;
	}
	return res.status;
}

int it_root_fh(struct it_server *s, struct it_fh *fh)
{
	struct rpc_context *m = it_rpc_connect(s, MOUNT_PROG, 3);
	int rc;

	if (!m)
		return -1;
	rc = it_mnt(m, s->export, fh);
	it_rpc_close(m);
	return rc;
}

void it_res_init(struct it_res *res)
{
	memset(res, 0, sizeof(*res));
}

void it_res_free(struct it_res *res)
{
	free(res->data);
	free(res->ents);
	memset(res, 0, sizeof(*res));
}

static void it_copy_post(int *has, fattr3 *dst, const post_op_attr *a)
{
	*has = a->attributes_follow;
	if (*has)
		*dst = a->post_op_attr_u.attributes;
}

static void it_copy_wcc(struct it_res *r, int second, const wcc_data *w)
{
	if (!second) {
		r->has_before = w->before.attributes_follow;
		if (r->has_before)
			r->before = w->before.pre_op_attr_u.attributes;
		it_copy_post(&r->has_after, &r->after, &w->after);
	} else {
		r->has_before2 = w->before.attributes_follow;
		if (r->has_before2)
			r->before2 = w->before.pre_op_attr_u.attributes;
		it_copy_post(&r->has_after2, &r->after2, &w->after);
	}
}

static void it_copy_pfh(struct it_res *r, const post_op_fh3 *p)
{
	r->has_fh = p->handle_follows;
	if (r->has_fh)
		it_fh_from(&r->fh, &p->post_op_fh3_u.handle);
}

static void it_copy_data(struct it_res *r, const char *p, size_t len)
{
	r->data = malloc(len + 1);
	if (!r->data)
		return;
	if (len)
		memcpy(r->data, p, len);
	r->data[len] = '\0';
	r->data_len = len;
}

static struct it_dirent *it_add_ent(struct it_res *r)
{
	struct it_dirent *n;

	if ((r->nents & (r->nents + 1)) == 0 || r->nents == 0) {
		size_t cap = r->nents ? (r->nents + 1) * 2 : 16;

		n = realloc(r->ents, cap * sizeof(*n));
		if (!n)
			return NULL;
		r->ents = n;
	}
	n = &r->ents[r->nents++];
	memset(n, 0, sizeof(*n));
	return n;
}

/* it_copy_created -- CREATE, MKDIR, SYMLINK and MKNOD answer alike: the new
 * object's handle and attributes and the directory's wcc, or only the wcc. */
static void it_copy_created(struct it_res *r, int status, post_op_fh3 *obj, post_op_attr *attr,
			    wcc_data *ok_wcc, wcc_data *fail_wcc)
{
	if (status == NFS3_OK) {
		it_copy_pfh(r, obj);
		it_copy_post(&r->has_attr, &r->attr, attr);
		it_copy_wcc(r, 0, ok_wcc);
	} else {
		it_copy_wcc(r, 0, fail_wcc);
	}
}

/* it_copy_result -- the one place that knows each PROC3res layout */
static void it_copy_result(struct it_res *r, int proc, void *data)
{
	if (proc == NFS3_NULL || !data) {
		r->status = 0;
		return;
	}
	r->status = *(int *)data;	/* every PROC3res starts with nfsstat3 */
	switch (proc) {
	case NFS3_GETATTR: {
		GETATTR3res *x = data;

		if (x->status == NFS3_OK) {
			r->has_attr = 1;
			r->attr = x->GETATTR3res_u.resok.obj_attributes;
		}
		break;
	}
	case NFS3_SETATTR: {
		SETATTR3res *x = data;

		it_copy_wcc(r, 0, x->status == NFS3_OK ? &x->SETATTR3res_u.resok.obj_wcc :
							 &x->SETATTR3res_u.resfail.obj_wcc);
		break;
	}
	case NFS3_LOOKUP: {
		LOOKUP3res *x = data;

		if (x->status == NFS3_OK) {
			LOOKUP3resok *ok = &x->LOOKUP3res_u.resok;

			r->has_fh = 1;
			it_fh_from(&r->fh, &ok->object);
			it_copy_post(&r->has_attr, &r->attr, &ok->obj_attributes);
			it_copy_post(&r->has_dir_attr, &r->dir_attr, &ok->dir_attributes);
		} else {
			it_copy_post(&r->has_dir_attr, &r->dir_attr,
				     &x->LOOKUP3res_u.resfail.dir_attributes);
		}
		break;
	}
	case NFS3_ACCESS: {
		ACCESS3res *x = data;

		if (x->status == NFS3_OK) {
			r->access = x->ACCESS3res_u.resok.access;
			it_copy_post(&r->has_attr, &r->attr, &x->ACCESS3res_u.resok.obj_attributes);
		} else {
			it_copy_post(&r->has_attr, &r->attr, &x->ACCESS3res_u.resfail.obj_attributes);
		}
		break;
	}
	case NFS3_READLINK: {
		READLINK3res *x = data;

		if (x->status == NFS3_OK) {
			const char *p = x->READLINK3res_u.resok.data;

			it_copy_data(r, p ? p : "", p ? strlen(p) : 0);
			it_copy_post(&r->has_attr, &r->attr,
				     &x->READLINK3res_u.resok.symlink_attributes);
		}
		break;
	}
	case NFS3_READ: {
		READ3res *x = data;

		if (x->status == NFS3_OK) {
			READ3resok *ok = &x->READ3res_u.resok;

			r->count = ok->count;
			r->eof = ok->eof;
			it_copy_data(r, ok->data.data_val, ok->data.data_len);
			it_copy_post(&r->has_attr, &r->attr, &ok->file_attributes);
		} else {
			it_copy_post(&r->has_attr, &r->attr, &x->READ3res_u.resfail.file_attributes);
		}
		break;
	}
	case NFS3_WRITE: {
		WRITE3res *x = data;

		if (x->status == NFS3_OK) {
			WRITE3resok *ok = &x->WRITE3res_u.resok;

			r->count = ok->count;
			r->committed = ok->committed;
			memcpy(r->verf, ok->verf, 8);
			it_copy_wcc(r, 0, &ok->file_wcc);
		} else {
			it_copy_wcc(r, 0, &x->WRITE3res_u.resfail.file_wcc);
		}
		break;
	}
	case NFS3_CREATE: {
		CREATE3res *x = data;

		it_copy_created(r, x->status, &x->CREATE3res_u.resok.obj,
				&x->CREATE3res_u.resok.obj_attributes, &x->CREATE3res_u.resok.dir_wcc,
				&x->CREATE3res_u.resfail.dir_wcc);
		break;
	}
	case NFS3_MKDIR: {
		MKDIR3res *x = data;

		it_copy_created(r, x->status, &x->MKDIR3res_u.resok.obj,
				&x->MKDIR3res_u.resok.obj_attributes, &x->MKDIR3res_u.resok.dir_wcc,
				&x->MKDIR3res_u.resfail.dir_wcc);
		break;
	}
	case NFS3_SYMLINK: {
		SYMLINK3res *x = data;

		it_copy_created(r, x->status, &x->SYMLINK3res_u.resok.obj,
				&x->SYMLINK3res_u.resok.obj_attributes, &x->SYMLINK3res_u.resok.dir_wcc,
				&x->SYMLINK3res_u.resfail.dir_wcc);
		break;
	}
	case NFS3_MKNOD: {
		MKNOD3res *x = data;

		it_copy_created(r, x->status, &x->MKNOD3res_u.resok.obj,
				&x->MKNOD3res_u.resok.obj_attributes, &x->MKNOD3res_u.resok.dir_wcc,
				&x->MKNOD3res_u.resfail.dir_wcc);
		break;
	}
	case NFS3_REMOVE: {
		REMOVE3res *x = data;

		it_copy_wcc(r, 0, x->status == NFS3_OK ? &x->REMOVE3res_u.resok.dir_wcc :
							 &x->REMOVE3res_u.resfail.dir_wcc);
		break;
	}
	case NFS3_RMDIR: {
		RMDIR3res *x = data;

		it_copy_wcc(r, 0, x->status == NFS3_OK ? &x->RMDIR3res_u.resok.dir_wcc :
							 &x->RMDIR3res_u.resfail.dir_wcc);
		break;
	}
	case NFS3_RENAME: {
		RENAME3res *x = data;

		if (x->status == NFS3_OK) {
			it_copy_wcc(r, 0, &x->RENAME3res_u.resok.fromdir_wcc);
			it_copy_wcc(r, 1, &x->RENAME3res_u.resok.todir_wcc);
		} else {
			it_copy_wcc(r, 0, &x->RENAME3res_u.resfail.fromdir_wcc);
			it_copy_wcc(r, 1, &x->RENAME3res_u.resfail.todir_wcc);
		}
		break;
	}
	case NFS3_LINK: {
		LINK3res *x = data;

		if (x->status == NFS3_OK) {
			it_copy_post(&r->has_attr, &r->attr, &x->LINK3res_u.resok.file_attributes);
			it_copy_wcc(r, 0, &x->LINK3res_u.resok.linkdir_wcc);
		} else {
			it_copy_post(&r->has_attr, &r->attr, &x->LINK3res_u.resfail.file_attributes);
			it_copy_wcc(r, 0, &x->LINK3res_u.resfail.linkdir_wcc);
		}
		break;
	}
	case NFS3_READDIR: {
		READDIR3res *x = data;

		if (x->status == NFS3_OK) {
			READDIR3resok *ok = &x->READDIR3res_u.resok;

			it_copy_post(&r->has_dir_attr, &r->dir_attr, &ok->dir_attributes);
			memcpy(r->verf, ok->cookieverf, 8);
			r->eof = ok->reply.eof;
			/* libnfs 4.0 decodes list entries at unaligned addresses:
			 * copy each one out before reading its fields */
			for (entry3 *p = ok->reply.entries, e; p; p = e.nextentry) {
				struct it_dirent *d = it_add_ent(r);

				if (!d)
					break;
				memcpy(&e, p, sizeof(e));
				d->fileid = e.fileid;
				d->cookie = e.cookie;
				snprintf(d->name, sizeof(d->name), "%s", e.name ? e.name : "");
			}
		} else {
			it_copy_post(&r->has_dir_attr, &r->dir_attr,
				     &x->READDIR3res_u.resfail.dir_attributes);
		}
		break;
	}
	case NFS3_READDIRPLUS: {
		READDIRPLUS3res *x = data;

		if (x->status == NFS3_OK) {
			READDIRPLUS3resok *ok = &x->READDIRPLUS3res_u.resok;

			it_copy_post(&r->has_dir_attr, &r->dir_attr, &ok->dir_attributes);
			memcpy(r->verf, ok->cookieverf, 8);
			r->eof = ok->reply.eof;
			for (entryplus3 *p = ok->reply.entries, e; p; p = e.nextentry) {
				struct it_dirent *d = it_add_ent(r);

				if (!d)
					break;
				memcpy(&e, p, sizeof(e));
				d->fileid = e.fileid;
				d->cookie = e.cookie;
				snprintf(d->name, sizeof(d->name), "%s", e.name ? e.name : "");
				it_copy_post(&d->has_attr, &d->attr, &e.name_attributes);
				d->has_fh = e.name_handle.handle_follows;
				if (d->has_fh)
					it_fh_from(&d->fh, &e.name_handle.post_op_fh3_u.handle);
			}
		} else {
			it_copy_post(&r->has_dir_attr, &r->dir_attr,
				     &x->READDIRPLUS3res_u.resfail.dir_attributes);
		}
		break;
	}
	case NFS3_FSSTAT: {
		FSSTAT3res *x = data;

		if (x->status == NFS3_OK) {
			r->fsstat = x->FSSTAT3res_u.resok;
			it_copy_post(&r->has_attr, &r->attr, &x->FSSTAT3res_u.resok.obj_attributes);
		}
		break;
	}
	case NFS3_FSINFO: {
		FSINFO3res *x = data;

		if (x->status == NFS3_OK) {
			r->fsinfo = x->FSINFO3res_u.resok;
			it_copy_post(&r->has_attr, &r->attr, &x->FSINFO3res_u.resok.obj_attributes);
		}
		break;
	}
	case NFS3_PATHCONF: {
		PATHCONF3res *x = data;

		if (x->status == NFS3_OK) {
			r->pathconf = x->PATHCONF3res_u.resok;
			it_copy_post(&r->has_attr, &r->attr, &x->PATHCONF3res_u.resok.obj_attributes);
		}
		break;
	}
	case NFS3_COMMIT: {
		COMMIT3res *x = data;

		if (x->status == NFS3_OK) {
			memcpy(r->verf, x->COMMIT3res_u.resok.verf, 8);
			it_copy_wcc(r, 0, &x->COMMIT3res_u.resok.file_wcc);
		} else {
			it_copy_wcc(r, 0, &x->COMMIT3res_u.resfail.file_wcc);
		}
		break;
	}
	}
}

static void it_nfs3_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct it_call *c = priv;

	(void)rpc;
	if (c->abandoned) {		/* it_nfs3 gave up waiting: nobody reads it */
		free(c);
		return;
	}
	c->done = 1;
	if (status != RPC_STATUS_SUCCESS) {
		it_error_cb(c->res, status, data);
		return;
	}
	c->res->rpc_status = 0;
	if (c->proc == NFS3_NULL || data)
		it_copy_result(c->res, c->proc, data);
}

int it_nfs3(struct rpc_context *rpc, int proc, void *args, struct it_res *res)
{
	struct it_call *cp = calloc(1, sizeof(*cp));
	int rc = -1;

	if (!cp)
		return -1;
	cp->proc = proc;
	cp->res = res;

	/* args may point into *res (a handle from the previous reply): queue
	 * (libnfs encodes at once) before res is reset */
	switch (proc) {
	case NFS3_NULL: rc = rpc_nfs3_null_async(rpc, it_nfs3_cb, cp); break;
	case NFS3_GETATTR: rc = rpc_nfs3_getattr_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_SETATTR: rc = rpc_nfs3_setattr_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_LOOKUP: rc = rpc_nfs3_lookup_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_ACCESS: rc = rpc_nfs3_access_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_READLINK: rc = rpc_nfs3_readlink_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_READ: rc = rpc_nfs3_read_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_WRITE: rc = rpc_nfs3_write_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_CREATE: rc = rpc_nfs3_create_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_MKDIR: rc = rpc_nfs3_mkdir_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_SYMLINK: rc = rpc_nfs3_symlink_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_MKNOD: rc = rpc_nfs3_mknod_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_REMOVE: rc = rpc_nfs3_remove_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_RMDIR: rc = rpc_nfs3_rmdir_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_RENAME: rc = rpc_nfs3_rename_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_LINK: rc = rpc_nfs3_link_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_READDIR: rc = rpc_nfs3_readdir_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_READDIRPLUS: rc = rpc_nfs3_readdirplus_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_FSSTAT: rc = rpc_nfs3_fsstat_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_FSINFO: rc = rpc_nfs3_fsinfo_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_PATHCONF: rc = rpc_nfs3_pathconf_async(rpc, it_nfs3_cb, args, cp); break;
	case NFS3_COMMIT: rc = rpc_nfs3_commit_async(rpc, it_nfs3_cb, args, cp); break;
	default: rc = -1; break;
	}
	it_res_free(res);
	res->status = -1;
	if (rc < 0) {
		res->rpc_status = RPC_STATUS_ERROR;
		snprintf(res->rpc_error, sizeof(res->rpc_error), "cannot queue: %s", rpc_get_error(rpc));
		free(cp);
		return -1;
	}
	if (it_wait(rpc, &cp->done, it_call_timeout_ms) < 0 && !cp->done) {
		res->rpc_status = RPC_STATUS_TIMEOUT;
		snprintf(res->rpc_error, sizeof(res->rpc_error), "no reply (waited up to %d ms): %s",
			 it_call_timeout_ms, rpc_get_error(rpc));
		fprintf(stderr, "integration: NFSv3 procedure %d: %s\n", proc, res->rpc_error);
		/* a late reply must not write into *res: the callback frees cp */
		cp->abandoned = 1;
		return -1;
	}
	free(cp);
	if (res->rpc_status != 0)
		return -1;
	return res->status;
}

int it_getattr(struct rpc_context *rpc, const struct it_fh *fh, struct it_res *r)
{
	GETATTR3args a = { .object = it_fh3(fh) };

	return it_nfs3(rpc, NFS3_GETATTR, &a, r);
}

int it_lookup(struct rpc_context *rpc, const struct it_fh *dir, const char *name, struct it_res *r)
{
	LOOKUP3args a = { .what = { .dir = it_fh3(dir), .name = (char *)name } };

	return it_nfs3(rpc, NFS3_LOOKUP, &a, r);
}

int it_create(struct rpc_context *rpc, const struct it_fh *dir, const char *name, int how, int mode,
	      const char *verf, struct it_res *r)
{
	CREATE3args a;

	memset(&a, 0, sizeof(a));
	a.where.dir = it_fh3(dir);
	a.where.name = (char *)name;
	a.how.mode = how;
	if (how == EXCLUSIVE) {
		memcpy(a.how.createhow3_u.verf, verf, 8);
	} else if (mode >= 0) {
		a.how.createhow3_u.obj_attributes.mode.set_it = 1;
		a.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = mode;
	}
	return it_nfs3(rpc, NFS3_CREATE, &a, r);
}

int it_mkdir(struct rpc_context *rpc, const struct it_fh *dir, const char *name, int mode, struct it_res *r)
{
	MKDIR3args a;

	memset(&a, 0, sizeof(a));
	a.where.dir = it_fh3(dir);
	a.where.name = (char *)name;
	if (mode >= 0) {
		a.attributes.mode.set_it = 1;
		a.attributes.mode.set_mode3_u.mode = mode;
	}
	return it_nfs3(rpc, NFS3_MKDIR, &a, r);
}

int it_remove(struct rpc_context *rpc, const struct it_fh *dir, const char *name, struct it_res *r)
{
	REMOVE3args a = { .object = { .dir = it_fh3(dir), .name = (char *)name } };

	return it_nfs3(rpc, NFS3_REMOVE, &a, r);
}

int it_rmdir(struct rpc_context *rpc, const struct it_fh *dir, const char *name, struct it_res *r)
{
	RMDIR3args a = { .object = { .dir = it_fh3(dir), .name = (char *)name } };

	return it_nfs3(rpc, NFS3_RMDIR, &a, r);
}

WRITE3args it_write3(const struct it_fh *fh, uint64_t off, const void *buf, uint32_t len,
		     int stable)
{
	WRITE3args a;

	memset(&a, 0, sizeof(a));
	a.file = it_fh3(fh);
	a.offset = off;
	a.count = len;
	a.stable = stable;
	a.data.data_len = len;
	a.data.data_val = (char *)buf;
	return a;
}

int it_write(struct rpc_context *rpc, const struct it_fh *fh, uint64_t off, const void *buf,
	     uint32_t len, int stable, struct it_res *r)
{
	WRITE3args a = it_write3(fh, off, buf, len, stable);

	return it_nfs3(rpc, NFS3_WRITE, &a, r);
}

int it_read(struct rpc_context *rpc, const struct it_fh *fh, uint64_t off, uint32_t count, struct it_res *r)
{
	READ3args a = { .file = it_fh3(fh), .offset = off, .count = count };

	return it_nfs3(rpc, NFS3_READ, &a, r);
}

int it_symlink(struct rpc_context *rpc, const struct it_fh *dir, const char *name, const char *target,
	       struct it_res *r)
{
	SYMLINK3args a;

	memset(&a, 0, sizeof(a));
	a.where.dir = it_fh3(dir);
	a.where.name = (char *)name;
	a.symlink.symlink_data = (char *)target;
	return it_nfs3(rpc, NFS3_SYMLINK, &a, r);
}

int it_rename(struct rpc_context *rpc, const struct it_fh *fdir, const char *from,
	      const struct it_fh *tdir, const char *to, struct it_res *r)
{
	RENAME3args a = { .from = { .dir = it_fh3(fdir), .name = (char *)from },
			  .to = { .dir = it_fh3(tdir), .name = (char *)to } };

	return it_nfs3(rpc, NFS3_RENAME, &a, r);
}

int it_link(struct rpc_context *rpc, const struct it_fh *fh, const struct it_fh *dir, const char *name,
	    struct it_res *r)
{
	LINK3args a = { .file = it_fh3(fh), .link = { .dir = it_fh3(dir), .name = (char *)name } };

	return it_nfs3(rpc, NFS3_LINK, &a, r);
}

int it_setattr_mode(struct rpc_context *rpc, const struct it_fh *fh, int mode, struct it_res *r)
{
	SETATTR3args a;

	memset(&a, 0, sizeof(a));
	a.object = it_fh3(fh);
	a.new_attributes.mode.set_it = 1;
	a.new_attributes.mode.set_mode3_u.mode = mode;
	return it_nfs3(rpc, NFS3_SETATTR, &a, r);
}

int it_readdir_all(struct rpc_context *rpc, const struct it_fh *dir, int plus, uint32_t count,
		   struct it_res *r, int *calls)
{
	struct it_dirent *all = NULL;
	size_t nall = 0;
	uint64_t cookie = 0;
	char verf[8] = { 0 };
	int n = 0, st;

	for (;;) {
		if (plus) {
			READDIRPLUS3args a = { .dir = it_fh3(dir), .cookie = cookie,
					       .dircount = count, .maxcount = count * 4 };

			memcpy(a.cookieverf, verf, 8);
			st = it_nfs3(rpc, NFS3_READDIRPLUS, &a, r);
		} else {
			READDIR3args a = { .dir = it_fh3(dir), .cookie = cookie, .count = count };

			memcpy(a.cookieverf, verf, 8);
			st = it_nfs3(rpc, NFS3_READDIR, &a, r);
		}
		n++;
		if (st != NFS3_OK)
			break;
		if (r->nents) {
			struct it_dirent *m = realloc(all, (nall + r->nents) * sizeof(*m));

			if (!m) {
				st = -1;
				break;
			}
			all = m;
			memcpy(all + nall, r->ents, r->nents * sizeof(*m));
			nall += r->nents;
			cookie = r->ents[r->nents - 1].cookie;
		}
		memcpy(verf, r->verf, 8);
		if (r->eof)
			break;
		if (!r->nents || n > 100000) {	/* no progress: a server bug */
			fprintf(stderr, "integration: READDIR%s returned no entry and no eof\n",
				plus ? "PLUS" : "");
			st = -2;
			break;
		}
	}
	free(r->ents);
	r->ents = all;
	r->nents = nall;
	if (calls)
		*calls = n;
	return st;
}

/* ---------------------------------------------------------------- raw RPC */

void it_buf_reset(struct it_buf *b)
{
	b->len = 0;
	b->pos = 0;
	b->bad = 0;
}

void it_put32(struct it_buf *b, uint32_t v)
{
	if (b->len + 4 > sizeof(b->b)) {
		b->bad = 1;
		return;
	}
	b->b[b->len++] = v >> 24;
	b->b[b->len++] = v >> 16;
	b->b[b->len++] = v >> 8;
	b->b[b->len++] = v;
}

void it_put64(struct it_buf *b, uint64_t v)
{
	it_put32(b, (uint32_t)(v >> 32));
	it_put32(b, (uint32_t)v);
}

void it_put_opaque(struct it_buf *b, const void *p, uint32_t len)
{
	uint32_t pad = (4 - (len & 3)) & 3;

	it_put32(b, len);
	if (b->len + len + pad > sizeof(b->b)) {
		b->bad = 1;
		return;
	}
	memcpy(b->b + b->len, p, len);
	b->len += len;
	memset(b->b + b->len, 0, pad);
	b->len += pad;
}

void it_put_string(struct it_buf *b, const char *s)
{
	it_put_opaque(b, s, (uint32_t)strlen(s));
}

void it_put_fh(struct it_buf *b, const struct it_fh *fh)
{
	it_put_opaque(b, fh->data, fh->len);
}

uint32_t it_get32(struct it_buf *b)
{
	uint32_t v;

	if (b->pos + 4 > b->len) {
		b->bad = 1;
		b->pos = b->len;
		return 0;
	}
	v = (uint32_t)b->b[b->pos] << 24 | (uint32_t)b->b[b->pos + 1] << 16 |
	    (uint32_t)b->b[b->pos + 2] << 8 | b->b[b->pos + 3];
	b->pos += 4;
	return v;
}

uint64_t it_get64(struct it_buf *b)
{
	uint64_t hi = it_get32(b);

	return hi << 32 | it_get32(b);
}

void it_put_call(struct it_buf *b, uint32_t xid, uint32_t rpcvers, uint32_t prog, uint32_t vers,
		 uint32_t proc, uint32_t flavor, uint32_t uid, uint32_t gid)
{
	it_put32(b, xid);
	it_put32(b, 0);			/* CALL */
	it_put32(b, rpcvers);
	it_put32(b, prog);
	it_put32(b, vers);
	it_put32(b, proc);
	if (flavor == IT_AUTH_SYS) {
		struct it_buf *body = calloc(1, sizeof(*body));

		if (!body) {
			b->bad = 1;
			return;
		}
		it_put32(body, 0x12345678);	/* stamp */
		it_put_string(body, "it");
		it_put32(body, uid);
		it_put32(body, gid);
		it_put32(body, 0);		/* no supplementary groups */
		it_put32(b, IT_AUTH_SYS);
		it_put_opaque(b, body->b, (uint32_t)body->len);
		free(body);
	} else {
		it_put32(b, flavor);
		it_put32(b, 0);
	}
	it_put32(b, IT_AUTH_NONE);		/* verifier */
	it_put32(b, 0);
}

int it_tcp_connect(const char *src, int src_port, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (src || src_port) {
		struct sockaddr_in l = { .sin_family = AF_INET, .sin_port = htons(src_port) };

		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		inet_pton(AF_INET, src ? src : "127.0.0.1", &l.sin_addr);
		if (bind(fd, (struct sockaddr *)&l, sizeof(l)) < 0) {
			close(fd);
			return -1;
		}
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int it_send_all(int fd, const void *p, size_t len)
{
	const unsigned char *c = p;

	while (len) {
		ssize_t w = send(fd, c, len, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		len -= (size_t)w;
	}
	return 0;
}

int it_control(const struct it_server *s, const char *req, char *buf, size_t cap)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t got = 0;
	int fd, k, e;

	k = snprintf(sa.sun_path, sizeof(sa.sun_path), "%.80s/state/control.sock", s->dir);
	if (k <= 0 || (size_t)k >= sizeof(sa.sun_path) || cap < 2) {
		errno = EINVAL;
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    it_send_all(fd, req, strlen(req)) < 0)
		goto fail;
	while (got < cap - 1 && !memchr(buf, '\n', got)) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, IT_TIMEOUT_MS) != 1) {
			errno = ETIMEDOUT;
			goto fail;
		}
		ssize_t n = read(fd, buf + got, cap - 1 - got);
		if (n <= 0) {
			if (n == 0)
				errno = EPIPE;
			goto fail;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return 0;
fail:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

int it_send_record(int fd, const struct it_buf *b)
{
	unsigned char rm[4];
	uint32_t v = 0x80000000u | (uint32_t)b->len;

	rm[0] = v >> 24;
	rm[1] = v >> 16;
	rm[2] = v >> 8;
	rm[3] = v;
	if (it_send_all(fd, rm, 4) < 0)
		return -1;
	return it_send_all(fd, b->b, b->len);
}

/* it_recv_n -- exactly n bytes; 1 ok, 0 closed, -1 timeout/error */
static int it_recv_n(int fd, void *p, size_t n, long long deadline)
{
	unsigned char *c = p;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long long left = deadline - it_now_ms();
		ssize_t r;

		if (left <= 0)
			return -1;
		if (poll(&pf, 1, (int)left) <= 0)
			continue;
		r = recv(fd, c, n, 0);
		if (r == 0)
			return 0;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? 0 : -1;
		}
		c += r;
		n -= (size_t)r;
	}
	return 1;
}

ssize_t it_recv_record(int fd, struct it_buf *b, int timeout_ms)
{
	long long deadline = it_now_ms() + timeout_ms;

	it_buf_reset(b);
	for (;;) {
		unsigned char rm[4];
		uint32_t v, len;
		int r = it_recv_n(fd, rm, 4, deadline);

		if (r <= 0)
			return r;
		v = (uint32_t)rm[0] << 24 | (uint32_t)rm[1] << 16 | (uint32_t)rm[2] << 8 | rm[3];
		len = v & 0x7fffffffu;
		if (b->len + len > sizeof(b->b))
			return -1;
		r = it_recv_n(fd, b->b + b->len, len, deadline);
		if (r <= 0)
			return r;
		b->len += len;
		if (v & 0x80000000u)
			return (ssize_t)b->len;
	}
}

int it_wait_closed(int fd, int timeout_ms)
{
	long long deadline = it_now_ms() + timeout_ms;
	unsigned char junk[4096];

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long long left = deadline - it_now_ms();
		ssize_t r;

		if (left <= 0)
			return 0;
		if (poll(&pf, 1, (int)left) <= 0)
			continue;
		r = recv(fd, junk, sizeof(junk), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return 1;
		if (r < 0 && errno != EINTR && errno != EAGAIN)
			return 1;
	}
}

int it_parse_reply(struct it_buf *b, struct it_reply *r)
{
	memset(r, 0, sizeof(*r));
	b->pos = 0;
	b->bad = 0;
	r->xid = it_get32(b);
	r->mtype = it_get32(b);
	r->reply_stat = it_get32(b);
	if (r->reply_stat == 0) {
		uint32_t vlen;

		(void)it_get32(b);		/* verifier flavor */
		vlen = it_get32(b);
		if (vlen > 400)
			return -1;
		b->pos += (vlen + 3) & ~3u;
		r->accept_stat = it_get32(b);
		if (r->accept_stat == 2) {
			r->low = it_get32(b);
			r->high = it_get32(b);
		}
	} else {
		r->reject_stat = it_get32(b);
		if (r->reject_stat == 0) {
			r->low = it_get32(b);
			r->high = it_get32(b);
		} else {
			r->auth_stat = it_get32(b);
		}
	}
	return b->bad || r->mtype != 1 ? -1 : 0;
}

int it_raw_call(int port, const char *src, int src_port, const struct it_buf *call, struct it_buf *reply,
		struct it_reply *rep)
{
	int fd = it_tcp_connect(src, src_port, port);
	ssize_t n;

	if (fd < 0)
		return -1;
	if (it_send_record(fd, call) < 0) {
		close(fd);
		return -1;
	}
	n = it_recv_record(fd, reply, IT_TIMEOUT_MS);
	close(fd);
	if (n <= 0)
		return -1;
	return it_parse_reply(reply, rep);
}

int it_raw_status(int port, const char *src, int src_port, const struct it_buf *call,
		  struct it_buf *reply, uint32_t *auth_stat)
{
	struct it_reply rep;

	if (it_raw_call(port, src, src_port, call, reply, &rep) < 0)
		return -1;
	if (auth_stat)
		*auth_stat = rep.auth_stat;
	if (rep.reply_stat != 0)
		return -200 - (int)rep.reject_stat;
	if (rep.accept_stat != 0)
		return -100 - (int)rep.accept_stat;
	return (int)it_get32(reply);
}

int it_raw_mnt(struct it_server *s, const char *src, int src_port, const char *path, struct it_fh *fh)
{
	struct it_buf *call = calloc(1, sizeof(*call)), *reply = calloc(1, sizeof(*reply));
	int st = -1;

	if (!call || !reply)
		goto out;
	it_put_call(call, 0x4d4e5400 + (uint32_t)(rand() & 0xff), 2, MOUNT_PROG, 3, 1, IT_AUTH_SYS, 0, 0);
	it_put_string(call, path);
	st = it_raw_status(s->mount_port, src, src_port, call, reply, NULL);
	if (st == 0) {
		uint32_t len = it_get32(reply);

		if (len > IT_FH_MAX || reply->pos + len > reply->len) {
			st = -1;
			goto out;
		}
		fh->len = len;
		memcpy(fh->data, reply->b + reply->pos, len);
	}
out:
	free(call);
	free(reply);
	return st;
}

int it_raw_getattr(struct it_server *s, const char *src, int src_port, const struct it_fh *fh)
{
	struct it_buf *call = calloc(1, sizeof(*call)), *reply = calloc(1, sizeof(*reply));
	int st = -1;

	if (call && reply) {
		it_put_call(call, 0x47455400 + (uint32_t)(rand() & 0xff), 2, IT_NFS_PROG, 3, NFS3_GETATTR,
			    IT_AUTH_SYS, 0, 0);
		it_put_fh(call, fh);
		st = it_raw_status(s->nfs_port, src, src_port, call, reply, NULL);
	}
	free(call);
	free(reply);
	return st;
}

int it_server_alive(struct it_server *s)
{
	struct nfs_context *nfs;
	struct nfs_stat_64 st;

	if (!it_server_running(s)) {
		fprintf(stderr, "integration: the server is gone\n");
		return 0;
	}
	if (!it_null_ok(s->nfs_port, IT_NFS_PROG, 3)) {
		fprintf(stderr, "integration: NFS NULL on a fresh connection failed\n");
		return 0;
	}
	if (!it_null_ok(s->mount_port, MOUNT_PROG, 3)) {
		fprintf(stderr, "integration: MOUNT NULL on a fresh connection failed\n");
		return 0;
	}
	nfs = it_nfs_mount(s, NULL, -1, -1, NULL);
	if (!nfs)
		return 0;
	if (nfs_stat64(nfs, "/", &st) < 0) {
		fprintf(stderr, "integration: stat of the root failed: %s\n", nfs_get_error(nfs));
		it_nfs_close(nfs);
		return 0;
	}
	it_nfs_close(nfs);
	return 1;
}

/* ---------------------------------------------------------------- local */

int it_write_file(const char *path, const void *buf, size_t len, int mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0)
		return -1;
	if (len && write(fd, buf, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	fchmod(fd, mode);
	return close(fd);
}

char *it_read_file(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *p;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !(p = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return NULL;
	}
	*len = 0;
	while (*len < (size_t)st.st_size) {
		ssize_t r = read(fd, p + *len, (size_t)st.st_size - *len);

		if (r <= 0)
			break;
		*len += (size_t)r;
	}
	p[*len] = '\0';
	close(fd);
	return p;
}

static int it_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(p);
	return 0;
}

int it_rm_rf(const char *path)
{
	return nftw(path, it_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void it_fill(void *buf, size_t len, uint32_t seed)
{
	unsigned char *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}
