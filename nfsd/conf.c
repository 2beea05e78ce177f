/*
 * conf.c -- presto.conf parsing (see conf.h).
 */
#include "nfsd/conf.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void conf_defaults(struct nfsd_conf *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->exports, sizeof(c->exports), "/etc/presto/exports");
	snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/presto");
	snprintf(c->bind[0], sizeof(c->bind[0]), "0.0.0.0");
	snprintf(c->bind[1], sizeof(c->bind[1]), "::");
	c->nbind = 2;
	c->nfs_port = 2049;
	c->mount_port = 20048;
	c->rpcbind = true;
	c->threads = 16;
	c->idle_timeout = 360;
	c->record_timeout = 30;
	c->reply_memory = 512ull << 20;
	c->request_memory = 256ull << 20;
	c->nvram_size = 64ull << 20;
	c->destage = true;
	c->destage_age_ms = 5000;
	c->high_water_pct = 50;
	c->full_wait_ms = 2000;
}

/* parse_size -- "64M", "1G", "4096", "512k". */
static int parse_size(const char *v, unsigned long long *out)
{
	char *end;
	unsigned long long n;

	unsigned shift = 0;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v || v[0] == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (n > ((1ull << 40) >> shift))
		return -EINVAL;		/* before shifting: no wrap-around */
	n <<= shift;
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end || n < (8ull << 20) || n > (1ull << 40))
		return -EINVAL;
	*out = n;
	return 0;
}

/* parse_bound -- a memory bound: "0" (none), else a size (parse_size) */
static int parse_bound(const char *v, unsigned long long *out)
{
	if (strcmp(v, "0") == 0) {
		*out = 0;
		return 0;
	}
	return parse_size(v, out);
}

static int parse_uint(const char *v, unsigned max, unsigned *out)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || n > max || v[0] == '-')
		return -EINVAL;
	*out = (unsigned)n;
	return 0;
}

static int parse_bool(const char *v, bool *out)
{
	if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "1"))
		*out = true;
	else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "0"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

/* numeric_addr -- an IPv4 or IPv6 address in numbers ("[::1]" too): bind
 * addresses are never resolved by name. */
static bool numeric_addr(const char *a)
{
	unsigned char buf[16];
	char tmp[64];
	size_t n = strlen(a);

	if (n >= 2 && a[0] == '[' && a[n - 1] == ']' && n - 2 < sizeof(tmp)) {
		memcpy(tmp, a + 1, n - 2);
		tmp[n - 2] = '\0';
		return inet_pton(AF_INET6, tmp, buf) == 1;
	}
	return inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1;
}

static int set_str(char *dst, size_t len, const char *v)
{
	if (strlen(v) >= len)
		return -ENAMETOOLONG;
	snprintf(dst, len, "%s", v);
	return 0;
}

int conf_set(struct nfsd_conf *c, const char *key, const char *v, char *err, size_t errlen)
{
	int rc;

	if (!strcmp(key, "exports"))
		rc = set_str(c->exports, sizeof(c->exports), v);
	else if (!strcmp(key, "state_dir"))
		rc = set_str(c->state_dir, sizeof(c->state_dir), v);
	else if (!strcmp(key, "bind")) {
		/* a comma-separated list of numeric addresses */
		char tmp[CONF_MAX_BIND * 64], *save = NULL, *tok;
		if (set_str(tmp, sizeof(tmp), v) < 0) {
			rc = -EINVAL;
			goto out;
		}
		c->nbind = 0;
		rc = 0;
		for (tok = strtok_r(tmp, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
			if (c->nbind == CONF_MAX_BIND || strlen(tok) >= sizeof(c->bind[0]) ||
			    !numeric_addr(tok)) {
				rc = -EINVAL;
				break;
			}
			snprintf(c->bind[c->nbind++], sizeof(c->bind[0]), "%s", tok);
		}
		if (c->nbind == 0)
			rc = -EINVAL;
	} else if (!strcmp(key, "nfs_port"))
		rc = parse_uint(v, 65535, &c->nfs_port);
	else if (!strcmp(key, "mount_port"))
		rc = parse_uint(v, 65535, &c->mount_port);
	else if (!strcmp(key, "rpcbind"))
		rc = parse_bool(v, &c->rpcbind);
	else if (!strcmp(key, "threads")) {
		rc = parse_uint(v, 256, &c->threads);
		if (rc == 0 && c->threads == 0)
			rc = -EINVAL;
	} else if (!strcmp(key, "max_connections"))
		rc = parse_uint(v, 16777216, &c->max_connections);
	else if (!strcmp(key, "reply_memory"))
		rc = parse_bound(v, &c->reply_memory);
	else if (!strcmp(key, "request_memory"))
		rc = parse_bound(v, &c->request_memory);
	else if (!strcmp(key, "idle_timeout"))
		rc = parse_uint(v, 86400, &c->idle_timeout);
	else if (!strcmp(key, "record_timeout"))
		rc = parse_uint(v, 86400, &c->record_timeout);
	else if (!strcmp(key, "foreground"))
		rc = parse_bool(v, &c->foreground);
	else if (!strcmp(key, "debug"))
		rc = parse_bool(v, &c->debug);
	else if (!strcmp(key, "nvram"))
		rc = set_str(c->nvram, sizeof(c->nvram), v);
	else if (!strcmp(key, "nvram_size"))
		rc = parse_size(v, &c->nvram_size);
	else if (!strcmp(key, "replay")) {
		rc = 0;
		c->replay_force = false;
		if (!strcmp(v, "always"))
			c->replay_always = true;
		else if (!strcmp(v, "auto"))
			c->replay_always = false;
		else if (!strcmp(v, "force"))
			c->replay_always = c->replay_force = true;
		else
			rc = -EINVAL;
	} else if (!strcmp(key, "destage"))
		rc = parse_bool(v, &c->destage);
	else if (!strcmp(key, "destage_age_ms")) {
		/* 0 would be taken for "not set" further on: refused */
		rc = parse_uint(v, 3600000, &c->destage_age_ms);
		if (rc == 0 && c->destage_age_ms == 0)
			rc = -EINVAL;
	}
	else if (!strcmp(key, "high_water_pct")) {
		rc = parse_uint(v, 95, &c->high_water_pct);
		if (rc == 0 && c->high_water_pct < 5)
			rc = -EINVAL;
	} else if (!strcmp(key, "full_wait_ms")) {
		rc = parse_uint(v, 600000, &c->full_wait_ms);
		if (rc == 0 && c->full_wait_ms == 0)
			rc = -EINVAL;
	}
	else if (!strcmp(key, "control"))
		rc = set_str(c->control, sizeof(c->control), v);
	else {
		snprintf(err, errlen, "unknown key \"%s\"", key);
		return -ENOENT;
	}
out:
	if (rc < 0)
		snprintf(err, errlen, "bad value \"%s\" for %s", v, key);
	return rc;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int conf_load(struct nfsd_conf *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char *line = NULL, msg[512];
	size_t cap = 0;
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		char *h = strchr(line, '#');
		if (h)
			*h = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%u: expected \"key = value\"", path, lineno);
			rc = -EINVAL;
			break;
		}
		*eq = '\0';
		char *k = trim(s), *v = trim(eq + 1);
		if ((rc = conf_set(c, k, v, msg, sizeof(msg))) < 0) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
			rc = -EINVAL;
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}
