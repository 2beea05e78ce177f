/*
 * log.c -- diagnostics for presto-nfsd (see log.h).
 */
#include "nfsd/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

static bool log_fg = true;
static bool log_dbg;
static const char *log_ident = "presto-nfsd";

void log_init(const char *ident, bool foreground, bool debug)
{
	log_ident = ident;
	log_fg = foreground;
	log_dbg = debug;
	if (!foreground)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

static void log_v(int prio, const char *err, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_fg) {
		if (err)
			fprintf(stderr, "%s: %s: %s\n", log_ident, msg, err);
		else
			fprintf(stderr, "%s: %s\n", log_ident, msg);
	} else {
		if (err)
			syslog(prio, "%s: %s", msg, err);
		else
			syslog(prio, "%s", msg);
	}
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_v(LOG_INFO, NULL, fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_dbg)
		return;
	va_start(ap, fmt);
	log_v(LOG_DEBUG, NULL, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	char eb[128];
	const char *e;
	va_list ap;
	int saved = errno;

	e = strerror_r(saved, eb, sizeof(eb));
	va_start(ap, fmt);
	log_v(LOG_WARNING, e, fmt, ap);
	va_end(ap);
	errno = saved;
}

void log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_v(LOG_WARNING, NULL, fmt, ap);
	va_end(ap);
}

bool log_ratelimited(long *token)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (__atomic_load_n(token, __ATOMIC_RELAXED) == ts.tv_sec)
		return false;
	__atomic_store_n(token, ts.tv_sec, __ATOMIC_RELAXED);
	return true;
}
