/*
 * log.h -- presto-nfsd's diagnostics: stderr in the foreground, syslog
 * otherwise. log_warn() appends strerror(errno) like OpenBSD's log_warn();
 * log_warnx() does not.
 */
#ifndef PRESTO_LOG_H
#define PRESTO_LOG_H

#include <stdbool.h>

void log_init(const char *ident, bool foreground, bool debug);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* log_ratelimited -- true when a hot-path message of this kind may be logged
 * now (at most one per second per call site's token). */
bool log_ratelimited(long *token);

#endif
