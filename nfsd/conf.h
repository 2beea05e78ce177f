/*
 * conf.h -- presto-nfsd's configuration: etc/presto.conf ("key = value"
 * lines, '#' comments), then the command line on top of it.
 */
#ifndef PRESTO_CONF_H
#define PRESTO_CONF_H

#include <stdbool.h>
#include <stddef.h>

#define CONF_MAX_BIND 4

struct nfsd_conf {
	char exports[4096];
	char state_dir[4096];
	char bind[CONF_MAX_BIND][64];	/* numeric addresses */
	unsigned nbind;
	unsigned nfs_port;
	unsigned mount_port;
	bool rpcbind;
	unsigned threads;
	unsigned max_connections;	/* 0: from the descriptor limit */
	unsigned long long reply_memory;	/* bytes of replies queued, all
						 * connections (0: no bound) */
	unsigned long long request_memory;	/* bytes of calls in flight, all
						 * connections (0: no bound) */
	unsigned idle_timeout;		/* seconds; 0: never */
	unsigned record_timeout;	/* seconds; 0: never */
	bool foreground;
	bool debug;
	/* Presto */
	char nvram[4096];		/* "" : no log, every export presto off */
	unsigned long long nvram_size;
	bool replay_always;
	bool replay_force;		/* replay = force */
	bool destage;			/* false: hold the destager */
	unsigned destage_age_ms;
	unsigned high_water_pct;
	unsigned full_wait_ms;
	char control[4096];		/* "" : STATE_DIR/control.sock */
};

/* conf_defaults -- the built-in defaults (documented in etc/presto.conf). */
void conf_defaults(struct nfsd_conf *c);
/* conf_load -- read path into c. Returns 0 or -errno; err gets FILE:LINE:
 * message for a syntax error or an unknown key. */
int conf_load(struct nfsd_conf *c, const char *path, char *err, size_t errlen);
/* conf_set -- set one key from text (also used for command-line flags). */
int conf_set(struct nfsd_conf *c, const char *key, const char *value, char *err, size_t errlen);

#endif
