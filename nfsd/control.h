/*
 * control.h -- presto-nfsd's control socket: a Unix domain socket (mode
 * 0600) speaking one JSON object per line, the one interface of the
 * `presto` command and of presto-admind (status, statistics, reset,
 * per-export enable/disable, flush, export list, reload). It runs on a thread
 * of its own, so a slow or stuck control client never stalls NFS service.
 */
#ifndef PRESTO_CONTROL_H
#define PRESTO_CONTROL_H

#include <stddef.h>

/* control_start -- listen on path (replacing a stale socket) and serve
 * requests on a thread of its own. Returns 0 or -errno. */
int control_start(const char *path);
/* control_stop -- stop serving and remove the socket (if it is still ours).
 * A flush or reload under way is finished first. */
void control_stop(void);
/* control_set_reload -- the function the "reload" request calls: reload the
 * exports file and install it, returning 0, or -errno with the reason in err
 * (the exports in force then stay). Without one, "reload" is refused. Call
 * before control_start. */
void control_set_reload(int (*fn)(char *err, size_t errlen));

#endif
