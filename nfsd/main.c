/*
 * main.c -- presto-nfsd: start-up, signals, shut-down.
 *
 *   presto-nfsd [-c CONF] [--exports FILE] [--state-dir DIR] [--bind ADDR]...
 *               [--nfs-port N] [--mount-port N] [--no-rpcbind] [--threads N]
 *               [--foreground] [--debug]
 *
 * Once serving it prints "presto-nfsd: ready nfs=PORT mount=PORT" and writes
 * "nfs=PORT mount=PORT" to STATE_DIR/ports. SIGHUP reloads the exports file
 * (a bad file keeps the old exports); SIGTERM and SIGINT stop accepting,
 * finish the calls in flight and exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nfsd/conf.h"
#include "nfsd/control.h"
#include "nfsd/export_table.h"
#include "nfsd/fdcache.h"
#include "nfsd/fh.h"
#include "nfsd/log.h"
#include "nfsd/nfsd.h"
#include "nfsd/presto.h"
#include "nfsd/rpc.h"
#include "nfsd/rpcb.h"

static struct nfsd_conf conf;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: presto-nfsd [-c CONF] [--exports FILE] [--state-dir DIR] [--bind ADDR]...\n"
		"                   [--nfs-port N] [--mount-port N] [--no-rpcbind] [--threads N]\n"
		"                   [--foreground] [--debug] [--nvram PATH] [--nvram-size SIZE]\n"
		"                   [--replay=auto|always|force] [--no-destage] [--control PATH]\n"
		"                   [--max-connections N] [--idle-timeout SECS]\n"
		"                   [--record-timeout SECS] [--reply-memory SIZE]\n"
		"                   [--request-memory SIZE]\n"
		"\n"
		"  -c, --config FILE   read settings from FILE (see etc/presto.conf)\n"
		"  --exports FILE      exports in knfsd exports(5) syntax\n"
		"  --state-dir DIR     handle key, ports file (created 0700)\n"
		"  --bind ADDR         numeric IPv4 or IPv6 address to listen on; repeat or\n"
		"                      separate with commas for several\n"
		"  --nfs-port N        NFS port (0: ephemeral)\n"
		"  --mount-port N      MOUNT port (0: ephemeral)\n"
		"  --no-rpcbind        do not register with rpcbind\n"
		"  --threads N         worker threads\n"
		"  --max-connections N connections at most (0: from the descriptor limit);\n"
		"                      over it, the idle one quiet for longest is closed\n"
		"  --idle-timeout SECS close a connection idle this long (0: never)\n"
		"  --record-timeout SECS  close one stalled in the middle of a record\n"
		"                      this long (0: never)\n"
		"  --reply-memory SIZE replies queued, all connections (512M, at least 8M;\n"
		"                      0: no bound): over it, a connection holding 4 MiB\n"
		"                      or more that takes none of them is closed\n"
		"  --request-memory SIZE  calls in flight, all connections (256M, at least\n"
		"                      8M; 0: no bound): over it, no connection is read\n"
		"                      until they are down to half of it; records in\n"
		"                      progress apart: over it, the oldest one's\n"
		"                      connection is closed\n"
		"  -F, --foreground    stay in the foreground, log to stderr\n"
		"  --debug             verbose logging\n"
		"  --nvram PATH        the NVRAM log (formatted at first use): presto on for\n"
		"                      exports without nopresto; a file on DAX pmem, /dev/shm\n"
		"                      (battery-backed RAM emulation) or disk\n"
		"  --nvram-size SIZE   size when formatting (e.g. 64M)\n"
		"  --replay=auto|always|force  replay live records only after a reboot (auto)\n"
		"                      or always (as after a power cut); force: always, and\n"
		"                      discard records that cannot be replayed\n"
		"  --no-destage        hold the destager (records stay until the log fills)\n"
		"  --control PATH      control socket (default STATE_DIR/control.sock)\n");
}

/* reload_exports -- parse the exports file again and install it; a bad file
 * keeps the exports in force. Used by SIGHUP and the control socket. */
/* SIGHUP (a thread of its own) and the control socket (its worker) may
 * reload at once: one at a time, so that the marks follow the table in
 * force; none once the server stops */
static pthread_mutex_t reload_lock = PTHREAD_MUTEX_INITIALIZER;
static bool reloads_stopped;

static int reload_exports(char *err, size_t errlen)
{
	struct xtab *x;

	pthread_mutex_lock(&reload_lock);
	if (reloads_stopped) {
		pthread_mutex_unlock(&reload_lock);
		snprintf(err, errlen, "the server is stopping");
		return -ECANCELED;
	}
	int rc = xtab_load(conf.exports, &x, err, errlen);
	if (rc < 0) {
		pthread_mutex_unlock(&reload_lock);
		log_warnx("reload of %s refused, keeping the exports in force: %s", conf.exports, err);
		return rc;
	}
	/* marks first: an export whose root takes none must not be served
	 * with presto on for a moment */
	if ((rc = presto_marks_update(x, false)) < 0) {
		errno = -rc;
		log_warn("%s/export-marks", conf.state_dir);
	}
	size_t n = x->n;
	/* the log may hold records of a dropped export: its filesystem stays
	 * synced until they are covered. Retired before the new table is
	 * installed: a sync that already sees the new table sees the old one
	 * among the retired too */
	presto_retire(xtab_get(), x);
	xtab_install(x);
	presto_switches_prune(x);	/* a dropped export's switch goes with it */
	pthread_mutex_unlock(&reload_lock);
	/* cached descriptors of exports that went away close as soon as no
	 * call uses them */
	fdcache_clear();
	log_info("reloaded %s: %zu export(s)", conf.exports, n);
	return 0;
}

/* reload_thread -- SIGHUP's reload, off the event loop: loading a table
 * resolves client host names (DNS may take seconds) and opens every root */
static void *reload_thread(void *arg)
{
	char err[512];

	(void)arg;
	reload_exports(err, sizeof(err));
	return NULL;
}

static int on_signal(int signo)
{
	if (signo == SIGHUP) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, reload_thread, NULL) != 0) {
			char err[512];
			reload_exports(err, sizeof(err));	/* no thread: here, then */
		}
		pthread_attr_destroy(&a);
		return 0;
	}
	log_info("signal %d: stopping", signo);
	return 1;
}

/* state_lock -- one server per state directory: take STATE_DIR/lock's
 * flock for the life of the process (the descriptor is never closed; it
 * survives daemon()'s fork) and write our pid in it. A second server is
 * refused here, before it opens the NVRAM log or touches any state file.
 * Returns the descriptor, or -1 after a message. */
static int state_lock(const char *dir)
{
	char path[4200], pid[32] = "?";
	int fd;

	snprintf(path, sizeof(path), "%s/lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		log_warn("%s", path);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK) {
			ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
			pid[n > 0 ? n : 0] = '\0';
			pid[strcspn(pid, "\n")] = '\0';
			log_warnx("state directory %s is in use by another presto-nfsd (pid %s): "
				  "refusing to start", dir, pid[0] ? pid : "?");
		} else {
			log_warn("lock %s", path);
		}
		close(fd);
		return -1;
	}
	return fd;
}

static void state_lock_pid(int fd)
{
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());

	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_warn("writing the pid in the state directory's lock");
}

static int write_ports(const char *dir, unsigned nfs, unsigned mnt)
{
	char path[4200], tmp[4200];
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "%s/ports", dir);
	snprintf(tmp, sizeof(tmp), "%s/ports.tmp", dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		int e = -errno;
		if (fd >= 0)
			close(fd);
		return e;
	}
	fprintf(f, "nfs=%u mount=%u\n", nfs, mnt);
	if (fclose(f) != 0 || rename(tmp, path) < 0)
		return -errno;
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_EXPORTS = 256, O_STATE, O_BIND, O_NFSPORT, O_MNTPORT, O_NORPCB, O_THREADS, O_DEBUG,
	       O_NVRAM, O_NVSIZE, O_REPLAY, O_NODESTAGE, O_CONTROL, O_IDLE, O_RECTIMEO, O_REPLYMEM,
	       O_MAXCONN, O_REQMEM };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "exports", required_argument, NULL, O_EXPORTS },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "bind", required_argument, NULL, O_BIND },
		{ "nfs-port", required_argument, NULL, O_NFSPORT },
		{ "mount-port", required_argument, NULL, O_MNTPORT },
		{ "no-rpcbind", no_argument, NULL, O_NORPCB },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "foreground", no_argument, NULL, 'F' },
		{ "debug", no_argument, NULL, O_DEBUG },
		{ "nvram", required_argument, NULL, O_NVRAM },
		{ "nvram-size", required_argument, NULL, O_NVSIZE },
		{ "replay", required_argument, NULL, O_REPLAY },
		{ "no-destage", no_argument, NULL, O_NODESTAGE },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "max-connections", required_argument, NULL, O_MAXCONN },
		{ "idle-timeout", required_argument, NULL, O_IDLE },
		{ "record-timeout", required_argument, NULL, O_RECTIMEO },
		{ "reply-memory", required_argument, NULL, O_REPLYMEM },
		{ "request-memory", required_argument, NULL, O_REQMEM },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[1024], binds[CONF_MAX_BIND * 64] = "";
	int c, rc;

	/* Every call mallocs and frees its buffers (a READ's data, a reply).
	 * With glibc's defaults a free that leaves more than 128 KiB at the top
	 * of the heap gives it back, and the next calls fault the pages in
	 * again: READ 4x16 ran at half of its speed in such phases (loop time
	 * 17-28 us per call against 8-11; perf: page faults, munmap, sysmalloc).
	 * Keep up to 32 MiB free at the top instead, and serve blocks up to
	 * 4 MiB (an NFSD_MAX_IO buffer and its reply) from the heap, not from a
	 * mapping of their own per call. */
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);

	conf_defaults(&conf);
	/* the config file first, so that flags override it wherever they are:
	 * a first pass of getopt for -c alone, in every spelling it takes
	 * (-c F, -cF, --config F, --config=F, --conf F); the second pass
	 * reports what is wrong with the rest */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "c:Fh", opts, NULL)) != -1) {
		if (c == 'c' && conf_load(&conf, optarg, err, sizeof(err)) < 0) {
			fprintf(stderr, "presto-nfsd: %s\n", err);
			return 1;
		}
	}
	opterr = 1;
	optind = 0;	/* glibc: start over */
	while ((c = getopt_long(argc, argv, "c:Fh", opts, NULL)) != -1) {
		const char *key = NULL, *val = optarg;
		switch (c) {
		case 'c':
			continue;
		case O_EXPORTS:
			key = "exports";
			break;
		case O_STATE:
			key = "state_dir";
			break;
		case O_BIND:
			/* --bind may repeat: collect, then set once */
			if (strlen(binds) + strlen(optarg) + 2 > sizeof(binds)) {
				fprintf(stderr, "presto-nfsd: too many --bind addresses\n");
				return 1;
			}
			if (binds[0])
				strcat(binds, ",");
			strcat(binds, optarg);
			continue;
		case O_NFSPORT:
			key = "nfs_port";
			break;
		case O_MNTPORT:
			key = "mount_port";
			break;
		case O_NORPCB:
			key = "rpcbind";
			val = "no";
			break;
		case O_THREADS:
			key = "threads";
			break;
		case 'F':
			key = "foreground";
			val = "yes";
			break;
		case O_DEBUG:
			key = "debug";
			val = "yes";
			break;
		case O_NVRAM:
			key = "nvram";
			break;
		case O_NVSIZE:
			key = "nvram_size";
			break;
		case O_REPLAY:
			key = "replay";
			break;
		case O_NODESTAGE:
			key = "destage";
			val = "no";
			break;
		case O_CONTROL:
			key = "control";
			break;
		case O_MAXCONN:
			key = "max_connections";
			break;
		case O_IDLE:
			key = "idle_timeout";
			break;
		case O_RECTIMEO:
			key = "record_timeout";
			break;
		case O_REPLYMEM:
			key = "reply_memory";
			break;
		case O_REQMEM:
			key = "request_memory";
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
		if (conf_set(&conf, key, val, err, sizeof(err)) < 0) {
			fprintf(stderr, "presto-nfsd: %s\n", err);
			return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 1;
	}
	if (binds[0] && conf_set(&conf, "bind", binds, err, sizeof(err)) < 0) {
		fprintf(stderr, "presto-nfsd: %s\n", err);
		return 1;
	}

	log_init("presto-nfsd", conf.foreground, conf.debug);
	/* modes come from the clients, exactly: no umask of ours applies */
	umask(0);
	if (geteuid() != 0) {
		/* open_by_handle_at and per-thread identities need root */
		log_warnx("must run as root");
		return 1;
	}
	if (mkdir(conf.state_dir, 0700) < 0 && errno != EEXIST) {
		log_warn("state directory %s", conf.state_dir);
		return 1;
	}
	int lock_fd = state_lock(conf.state_dir);
	if (lock_fd < 0)
		return 1;
	state_lock_pid(lock_fd);
	if ((rc = fh_init(conf.state_dir)) < 0) {
		errno = -rc;
		log_warn("file handle key in %s", conf.state_dir);
		return 1;
	}

	/* a write past RLIMIT_FSIZE fails with EFBIG (NFS3ERR_FBIG) instead
	 * of killing the server; the exports' size probe relies on it too */
	signal(SIGXFSZ, SIG_IGN);

	struct xtab *xt;
	if ((rc = xtab_load(conf.exports, &xt, err, sizeof(err))) < 0) {
		log_warnx("%s", err);
		return 1;
	}
	xtab_install(xt);

	/* listeners: NFS and MOUNT on every bind address; an ephemeral port
	 * chosen on the first address is reused on the others */
	struct rpc_listen nfs_l[CONF_MAX_BIND], mnt_l[CONF_MAX_BIND];
	unsigned nfs_port = conf.nfs_port, mnt_port = conf.mount_port;
	for (unsigned i = 0; i < conf.nbind; i++) {
		if (rpc_listen_addr(conf.bind[i], nfs_port, &nfs_l[i]) < 0 ||
		    rpc_listen_addr(conf.bind[i], mnt_port, &mnt_l[i]) < 0) {
			log_warnx("bind address \"%s\" is not a numeric IPv4 or IPv6 address", conf.bind[i]);
			return 1;
		}
	}
	/* Recovery comes before any listener: no client is answered until
	 * the log has been replayed (or synced) and trimmed. */
	struct presto_conf pc = {
		.nvram = conf.nvram[0] ? conf.nvram : NULL,
		.nvram_size = conf.nvram_size,
		.replay = conf.replay_force ? PRESTO_REPLAY_FORCE
			  : conf.replay_always ? PRESTO_REPLAY_ALWAYS : PRESTO_REPLAY_AUTO,
		.no_destage = !conf.destage,
		.destage_age_ms = conf.destage_age_ms,
		.high_water_pct = conf.high_water_pct,
		.full_wait_ms = conf.full_wait_ms,
		.state_dir = conf.state_dir,
	};
	if (!conf.foreground) {
		if (daemon(1, 1) < 0) {
			log_warn("daemon");
			return 1;
		}
		state_lock_pid(lock_fd);	/* the child's */
	}
	/* Signals go to the event loop's signalfd only: block them before the
	 * first thread (the destager) starts, so that every thread inherits
	 * the mask (rpc_init blocks the same set again). */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	if ((rc = presto_open(&pc, xt)) < 0)
		return 1;
	/* descriptors by handle (up to three per entry: O_PATH, read, write),
	 * sized well under the descriptor limit */
	struct rlimit rl;
	unsigned cache = 4096, max_conns = conf.max_connections;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		if (rl.rlim_cur < 3 * cache + 1024)
			cache = rl.rlim_cur > 1536 ? (unsigned)(rl.rlim_cur - 1024) / 3 : 0;
		/* connections: what the cache leaves but 256 (the log, the
		 * exports' roots, listeners, control socket, files of calls
		 * that miss the cache) */
		if (!max_conns) {
			rlim_t room = rl.rlim_cur > 3ull * cache + 256 + 16 ? rl.rlim_cur - 3ull * cache - 256 : 16;
			max_conns = room > 16777216 ? 16777216 : (unsigned)room;
		}
	}
	fdcache_init(cache);
	if ((rc = rpc_init(conf.threads, dispatch, dispatch_inline_ok)) < 0) {
		errno = -rc;
		log_warn("RPC transport");
		return 1;
	}
	rpc_set_limits(&(struct rpc_limits){
		.max_conns = max_conns,
		.idle_timeout_s = conf.idle_timeout,
		.record_timeout_s = conf.record_timeout,
		.reply_memory = conf.reply_memory > SIZE_MAX ? SIZE_MAX : (size_t)conf.reply_memory,
		.request_memory = conf.request_memory > SIZE_MAX ? SIZE_MAX : (size_t)conf.request_memory,
	});
	for (unsigned i = 0; i < conf.nbind; i++) {
		if (i > 0) {
			rpc_listen_addr(conf.bind[i], nfs_port, &nfs_l[i]);
			rpc_listen_addr(conf.bind[i], mnt_port, &mnt_l[i]);
		}
		if ((rc = rpc_add_listener(&nfs_l[i])) < 0 || (rc = rpc_add_listener(&mnt_l[i])) < 0) {
			errno = -rc;
			log_warn("listen on %s (nfs port %u, mount port %u)", conf.bind[i], nfs_port, mnt_port);
			return 1;
		}
		nfs_port = ntohs(((struct sockaddr_in *)&nfs_l[i].addr)->sin_port);
		mnt_port = ntohs(((struct sockaddr_in *)&mnt_l[i].addr)->sin_port);
	}
	if (conf.rpcbind) {
		for (unsigned i = 0; i < conf.nbind; i++) {
			if (rpcb_register(100003, 3, &nfs_l[i]) < 0 ||
			    rpcb_register(100005, 1, &mnt_l[i]) < 0 ||
			    rpcb_register(100005, 3, &mnt_l[i]) < 0) {
				log_warnx("could not register with rpcbind on %s (is it running?); "
					  "clients must give port=%u,mountport=%u",
					  conf.bind[i], nfs_port, mnt_port);
				break;
			}
		}
	}
	char ctl[4200];
	if (conf.control[0])
		snprintf(ctl, sizeof(ctl), "%s", conf.control);
	else
		snprintf(ctl, sizeof(ctl), "%s/control.sock", conf.state_dir);
	control_set_reload(reload_exports);
	if ((rc = control_start(ctl)) < 0) {
		errno = -rc;
		log_warn("control socket %s", ctl);
		return 1;
	}
	if ((rc = write_ports(conf.state_dir, nfs_port, mnt_port)) < 0) {
		errno = -rc;
		log_warn("writing %s/ports", conf.state_dir);
	}
	printf("presto-nfsd: ready nfs=%u mount=%u\n", nfs_port, mnt_port);
	fflush(stdout);
	log_info("serving %zu export(s) from %s on port %u (mount %u)", xt->n, conf.exports,
		 nfs_port, mnt_port);

	rpc_set_batch_end(presto_stamps_flush);
	rpc_run(on_signal, 10000);

	pthread_mutex_lock(&reload_lock);	/* waits for a reload under way */
	reloads_stopped = true;
	pthread_mutex_unlock(&reload_lock);
	control_stop();
	rpcb_unregister_all();
	rpc_shutdown();
	presto_close();
	fdcache_clear();
	fdcache_stop_reaper();
	xtab_install(NULL);
	log_info("stopped");
	return 0;
}
