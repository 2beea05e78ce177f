/*
 * admind_ctl.c -- presto-admind's client of the control socket.
 *
 * Protocol v1 (nfsd/control.c, presto(8)): one JSON object per line each
 * way, answers in request order. Every wait is bounded by a deadline on a
 * non-blocking socket: a presto-nfsd that stops answering costs presto-admind
 * one timeout, never a hung thread. An answer is at most ADMIND_CTL_MAX bytes.
 */
#include "admin/admind.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ADMIND_CTL_MAX (16 * 1024 * 1024)

struct admind_ctl {
	int fd;
	char *buf;
	size_t len, cap;
};

static int64_t ctl_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int admind_ctl_open(const char *path, struct admind_ctl **out, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct admind_ctl *c;
	int rc;

	*out = NULL;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "control socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		/* a local stream socket connects at once or not at all */
		snprintf(err, errlen, "cannot reach presto-nfsd at %s: %s", path, strerror(-rc));
		admind_ctl_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

void admind_ctl_close(struct admind_ctl *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c);
}

static int ctl_cancelled;	/* atomic: admind_ctl_cancel */
static int ctl_calls;		/* atomic: admind_ctl_call in progress */

void admind_ctl_cancel(void)
{
	__atomic_store_n(&ctl_cancelled, 1, __ATOMIC_RELEASE);
	/* the calls in progress see it within a poll slice; give their HTTP
	 * requests the time to be answered (503) before the server stops */
	for (int i = 0; i < 40 && __atomic_load_n(&ctl_calls, __ATOMIC_ACQUIRE) > 0; i++)
		usleep(50 * 1000);
	usleep(100 * 1000);
}

/* ctl_wait -- poll fd for events until deadline; 0, or -ETIMEDOUT, -ECANCELED
 * (the daemon is stopping: a flush may take minutes) or -errno */
static int ctl_wait(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - ctl_ms();
		struct pollfd p = { .fd = fd, .events = events };
		int n;

		if (__atomic_load_n(&ctl_cancelled, __ATOMIC_ACQUIRE))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left > 200 ? 200 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int ctl_call(struct admind_ctl *c, json_t *req, int timeout_ms, json_t **answer,
		    char *err, size_t errlen);

int admind_ctl_call(struct admind_ctl *c, json_t *req, int timeout_ms, json_t **answer,
		    char *err, size_t errlen)
{
	__atomic_add_fetch(&ctl_calls, 1, __ATOMIC_ACQ_REL);
	int rc = ctl_call(c, req, timeout_ms, answer, err, errlen);
	__atomic_sub_fetch(&ctl_calls, 1, __ATOMIC_ACQ_REL);
	return rc;
}

static int ctl_call(struct admind_ctl *c, json_t *req, int timeout_ms, json_t **answer,
		    char *err, size_t errlen)
{
	int64_t deadline = ctl_ms() + timeout_ms;
	char *line, *nl;
	size_t off = 0, len;
	json_error_t je;
	int rc;

	*answer = NULL;
	json_object_set_new(req, "v", json_integer(1));
	line = json_dumps(req, JSON_COMPACT);
	if (!line) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	len = strlen(line);
	line[len++] = '\n';	/* json_dumps' NUL becomes the newline */
	while (off < len) {
		ssize_t w = send(c->fd, line + off, len - off, MSG_NOSIGNAL);

		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN && (rc = ctl_wait(c->fd, POLLOUT, deadline)) == 0)
			continue;
		rc = w < 0 && errno != EAGAIN ? -errno : -ETIMEDOUT;
		free(line);
		snprintf(err, errlen, "sending to presto-nfsd: %s", strerror(-rc));
		return rc;
	}
	free(line);

	for (;;) {
		ssize_t r;

		nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl)
			break;
		if (c->len == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 65536;
			char *b;

			if (cap > ADMIND_CTL_MAX) {
				snprintf(err, errlen, "answer of presto-nfsd longer than %d bytes",
					 ADMIND_CTL_MAX);
				return -EMSGSIZE;
			}
			b = realloc(c->buf, cap);
			if (!b) {
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			c->buf = b;
			c->cap = cap;
		}
		r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (r > 0) {
			c->len += (size_t)r;
			continue;
		}
		if (r == 0) {
			snprintf(err, errlen, "presto-nfsd closed the control connection");
			return -ECONNRESET;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			rc = -errno;
			snprintf(err, errlen, "reading from presto-nfsd: %s", strerror(-rc));
			return rc;
		}
		rc = ctl_wait(c->fd, POLLIN, deadline);
		if (rc == -ECANCELED) {
			snprintf(err, errlen, "presto-admind is stopping; presto-nfsd goes on with "
				 "the request");
			return rc;
		}
		if (rc < 0) {
			snprintf(err, errlen, "no answer from presto-nfsd in %d ms: %s", timeout_ms,
				 strerror(-rc));
			return rc;
		}
	}
	*nl = '\0';
	*answer = json_loads(c->buf, JSON_REJECT_DUPLICATES, &je);
	len = (size_t)(nl + 1 - c->buf);
	memmove(c->buf, nl + 1, c->len - len);
	c->len -= len;
	if (!*answer || !json_is_object(*answer)) {
		json_decref(*answer);
		*answer = NULL;
		snprintf(err, errlen, "presto-nfsd answered something that is not a JSON object");
		return -EPROTO;
	}
	return 0;
}

int admind_ctl_once(const char *path, const char *cmd, json_t *exports, int timeout_ms,
		    json_t **answer, char *err, size_t errlen)
{
	struct admind_ctl *c;
	json_t *req;
	int rc;

	*answer = NULL;
	rc = admind_ctl_open(path, &c, err, errlen);
	if (rc < 0)
		return rc;
	req = json_pack("{ss}", "cmd", cmd);
	if (exports)
		json_object_set(req, "exports", exports);
	rc = admind_ctl_call(c, req, timeout_ms, answer, err, errlen);
	json_decref(req);
	admind_ctl_close(c);
	return rc;
}
