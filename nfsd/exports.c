/*
 * exports.c -- exports(5) parser and client matcher (the syntax is documented in exports.h).
 *
 * Design: a small lexer turns the text into logical lines of tokens (continuations joined,
 * comments dropped, quotes removed, each token remembering its physical line so messages
 * point at the right place); the parser then reads each line as path, optional `-opts`
 * block, client specs.  Options are parsed into a `struct optstate` that keeps
 * root_squash and all_squash as two flags, as knfsd does, so that `all_squash` wins over
 * `no_root_squash` whatever their order; it is folded into the public enum at the end.
 * Every client spec is stored as a list of networks (an address is a full-length prefix,
 * a host name the list of its addresses), so matching is one loop.
 */
#include "nfsd/exports.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define EXPORTS_MAX_FILE (16u << 20) /* an exports file larger than this is a mistake */

struct token {
	char *s;
	unsigned line;
	bool quoted;
};

struct line {
	struct token *t;
	size_t n, cap;
};

struct parser {
	const char *name;
	const char *p;          /* lexer position */
	unsigned line;          /* physical line at p */
	char *err;
	size_t errlen;
	struct exports *ex;
	size_t excap;
};

struct optstate {
	bool rw, root_squash, all_squash, secure, presto, async, fsid_set;
	uint32_t anonuid, anongid, fsid;
};

/* exports_error -- format "NAME:LINE: message" into the caller's buffer; returns -EINVAL. */
static int __attribute__((format(printf, 3, 4)))
exports_error(struct parser *ps, unsigned line, const char *fmt, ...)
{
	if (ps->err && ps->errlen > 0) {
		int n = snprintf(ps->err, ps->errlen, "%s:%u: ", ps->name, line);
		if (n >= 0 && (size_t)n < ps->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

/* exports_nomem -- record an allocation failure; returns -ENOMEM. */
static int exports_nomem(struct parser *ps)
{
	if (ps->err && ps->errlen > 0)
		snprintf(ps->err, ps->errlen, "%s:%u: out of memory", ps->name, ps->line);
	return -ENOMEM;
}

/* ---- lexer ------------------------------------------------------------------------ */

static void exports_line_clear(struct line *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->t[i].s);
	l->n = 0;
}

static void exports_line_free(struct line *l)
{
	exports_line_clear(l);
	free(l->t);
	l->t = NULL;
	l->cap = 0;
}

/* exports_line_push -- append token S (taking ownership) to L; returns 0 or -ENOMEM. */
static int exports_line_push(struct line *l, char *s, unsigned line, bool quoted)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct token *t = realloc(l->t, cap * sizeof(*t));
		if (!t) {
			free(s);
			return -ENOMEM;
		}
		l->t = t;
		l->cap = cap;
	}
	l->t[l->n++] = (struct token){ .s = s, .line = line, .quoted = quoted };
	return 0;
}

struct buf {
	char *s;
	size_t n, cap;
};

static int exports_buf_putc(struct buf *b, char c)
{
	if (b->n + 1 >= b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		char *s = realloc(b->s, cap);
		if (!s)
			return -ENOMEM;
		b->s = s;
		b->cap = cap;
	}
	b->s[b->n++] = c;
	b->s[b->n] = '\0';
	return 0;
}

/*
 * exports_lex_line -- read the next logical line holding at least one token into L.
 * Returns 1 if a line was read, 0 at the end of the text, -EINVAL / -ENOMEM on error.
 */
static int exports_lex_line(struct parser *ps, struct line *l)
{
	struct buf b = { 0 };
	bool in_tok = false, in_quote = false, quoted = false;
	int depth = 0;
	unsigned tok_line = 0, quote_line = 0, paren_line = 0;
	int rc;

	exports_line_clear(l);
	for (;;) {
		char c = *ps->p;

		/* backslash-newline: removed, the logical line goes on */
		if (c == '\\' && ps->p[1] == '\n') {
			ps->p += 2;
			ps->line++;
			continue;
		}
		if (c == '\\' && ps->p[1] == '\r' && ps->p[2] == '\n') {
			ps->p += 3;
			ps->line++;
			continue;
		}
		if (c == '#' && !in_quote) {
			while (*ps->p && *ps->p != '\n')
				ps->p++;
			continue;
		}
		bool eol = c == '\0' || c == '\n';
		if (eol && in_quote) {
			rc = exports_error(ps, quote_line, "missing closing '\"'");
			goto out;
		}
		if (eol && depth > 0) {
			rc = exports_error(ps, paren_line, "missing ')'");
			goto out;
		}
		bool space = c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
		if ((eol || (space && !in_quote && depth == 0)) && in_tok) {
			rc = exports_line_push(l, b.s, tok_line, quoted);
			b = (struct buf){ 0 };
			if (rc < 0)
				goto nomem;
			in_tok = quoted = false;
		}
		if (eol) {
			if (c == '\0' && l->n == 0) {
				rc = 0;
				goto out;
			}
			if (c == '\n') {
				ps->p++;
				ps->line++;
			}
			if (l->n > 0) {
				rc = 1;
				goto out;
			}
			continue;
		}
		ps->p++;
		if (space && !in_quote && depth == 0)
			continue;
		if (!in_tok) {
			in_tok = true;
			tok_line = ps->line;
			b.s = strdup(""); /* a token may stay empty: "" */
			b.cap = b.s ? 1 : 0;
			if (!b.s)
				goto nomem;
		}
		if (c == '"') {
			in_quote = !in_quote;
			quoted = true;
			quote_line = ps->line;
			continue;
		}
		if (!in_quote && c == '(') {
			if (depth > 0) {
				rc = exports_error(ps, ps->line, "nested '('");
				goto out;
			}
			depth++;
			paren_line = ps->line;
		} else if (!in_quote && c == ')') {
			if (depth == 0) {
				rc = exports_error(ps, ps->line, "')' without '('");
				goto out;
			}
			depth--;
		}
		if ((rc = exports_buf_putc(&b, c)) < 0)
			goto nomem;
	}
nomem:
	rc = exports_nomem(ps);
out:
	free(b.s);
	return rc;
}

/* ---- paths ------------------------------------------------------------------------ */

/*
 * exports_normalise -- write the lexical normal form of absolute path IN to OUT (PATH_MAX).
 * Returns 0, -EINVAL (not absolute, or a ".." component) or -ENAMETOOLONG.
 */
static int exports_normalise(const char *in, char *out)
{
	size_t n = 0;

	if (in[0] != '/')
		return -EINVAL;
	for (const char *p = in; *p;) {
		while (*p == '/')
			p++;
		const char *end = strchrnul(p, '/');
		size_t len = (size_t)(end - p);
		if (len == 0 || (len == 1 && p[0] == '.')) {
			p = end;
			continue;
		}
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (n + 1 + len + 1 > PATH_MAX)
			return -ENAMETOOLONG;
		out[n++] = '/';
		memcpy(out + n, p, len);
		n += len;
		p = end;
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return 0;
}

/* exports_fnv1a -- 32-bit FNV-1a of S, never 0 (0 means "no export"). */
static uint32_t exports_fnv1a(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 16777619u;
	}
	return h ? h : 1;
}

/* ---- options ---------------------------------------------------------------------- */

static const struct optstate exports_defaults = {
	.rw = false, .root_squash = true, .all_squash = false, .secure = true,
	.presto = true, .async = false, .fsid_set = false,
	.anonuid = EXPORTS_ANON_DEFAULT, .anongid = EXPORTS_ANON_DEFAULT, .fsid = 0,
};

/* exports_u32 -- parse a decimal uint32 (digits only); returns 0 or -EINVAL. */
static int exports_u32(const char *s, uint32_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

static const char *const exports_ignored[] = {
	"no_subtree_check", "subtree_check", "wdelay", "no_wdelay",
	"hide", "nohide", "crossmnt", "nocrossmnt",
};

/* exports_flag -- apply a value-less option NAME to S; returns 1 if known, else 0. */
static int exports_flag(struct optstate *s, const char *name)
{
	static const struct {
		const char *name;
		size_t off;
		bool value;
	} flags[] = {
		{ "rw", offsetof(struct optstate, rw), true },
		{ "ro", offsetof(struct optstate, rw), false },
		{ "root_squash", offsetof(struct optstate, root_squash), true },
		{ "no_root_squash", offsetof(struct optstate, root_squash), false },
		{ "all_squash", offsetof(struct optstate, all_squash), true },
		{ "no_all_squash", offsetof(struct optstate, all_squash), false },
		{ "secure", offsetof(struct optstate, secure), true },
		{ "insecure", offsetof(struct optstate, secure), false },
		{ "sync", offsetof(struct optstate, async), false },
		{ "async", offsetof(struct optstate, async), true },
		{ "presto", offsetof(struct optstate, presto), true },
		{ "nopresto", offsetof(struct optstate, presto), false },
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (strcmp(name, flags[i].name) == 0) {
			*(bool *)((char *)s + flags[i].off) = flags[i].value;
			return 1;
		}
	}
	for (size_t i = 0; i < sizeof(exports_ignored) / sizeof(exports_ignored[0]); i++)
		if (strcmp(name, exports_ignored[i]) == 0)
			return 1;
	return 0;
}

/* exports_option -- apply one option word OPT (trimmed) to S; returns 0 or -EINVAL. */
static int exports_option(struct parser *ps, unsigned line, char *opt, struct optstate *s)
{
	char *eq = strchr(opt, '=');
	uint32_t v;

	if (!eq) {
		if (exports_flag(s, opt))
			return 0;
		if (!strcmp(opt, "anonuid") || !strcmp(opt, "anongid") || !strcmp(opt, "fsid") ||
		    !strcmp(opt, "sec"))
			return exports_error(ps, line, "option '%s' needs a value (%s=...)", opt, opt);
		return exports_error(ps, line, "unknown option '%s'", opt);
	}
	*eq = '\0';
	const char *val = eq + 1;
	if (!strcmp(opt, "anonuid") || !strcmp(opt, "anongid")) {
		if (exports_u32(val, &v) < 0)
			return exports_error(ps, line, "%s=%s: expected a decimal number 0..4294967295",
					     opt, val);
		*(opt[4] == 'u' ? &s->anonuid : &s->anongid) = v;
		return 0;
	}
	if (!strcmp(opt, "fsid")) {
		if (!strcmp(val, "root") || (exports_u32(val, &v) == 0 && v == 0))
			return exports_error(ps, line, "fsid=%s: the NFSv4 pseudo-root is not supported "
					     "(presto-nfsd serves NFSv3; use fsid=N with N >= 1)", val);
		if (exports_u32(val, &v) < 0)
			return exports_error(ps, line, "fsid=%s: expected a decimal number 1..4294967295 "
					     "(UUIDs are not supported)", val);
		s->fsid_set = true;
		s->fsid = v;
		return 0;
	}
	if (!strcmp(opt, "sec")) {
		if (strcmp(val, "sys") != 0)
			return exports_error(ps, line, "sec=%s: only sec=sys is supported", val);
		return 0;
	}
	if (exports_flag(&(struct optstate){ 0 }, opt))
		return exports_error(ps, line, "option '%s' takes no value", opt);
	return exports_error(ps, line, "unknown option '%s'", opt);
}

/* exports_options -- apply comma-separated LIST (modified in place) to S. */
static int exports_options(struct parser *ps, unsigned line, char *list, struct optstate *s)
{
	char *save = NULL;
	int rc;

	for (char *o = strtok_r(list, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*o))
			o++;
		char *end = o + strlen(o);
		while (end > o && isspace((unsigned char)end[-1]))
			*--end = '\0';
		if (!*o)
			continue; /* "host()" or "rw,,ro": nothing to apply */
		if ((rc = exports_option(ps, line, o, s)) < 0)
			return rc;
	}
	return 0;
}

static struct export_opts exports_fold(const struct optstate *s)
{
	return (struct export_opts){
		.rw = s->rw,
		.squash = s->all_squash ? EXPORT_ALL_SQUASH :
			  s->root_squash ? EXPORT_ROOT_SQUASH : EXPORT_NO_ROOT_SQUASH,
		.anonuid = s->anonuid,
		.anongid = s->anongid,
		.secure = s->secure,
		.presto = s->presto,
		.async = s->async,
		.fsid_set = s->fsid_set,
		.fsid = s->fsid,
	};
}

/* ---- client specs ----------------------------------------------------------------- */

/* exports_net_mask -- zero the host bits of N. */
static void exports_net_mask(struct export_net *n)
{
	size_t bytes = n->family == AF_INET ? 4 : 16;
	for (size_t i = 0; i < bytes; i++) {
		unsigned bit = (unsigned)i * 8;
		if (bit >= n->prefix)
			n->addr[i] = 0;
		else if (bit + 8 > n->prefix)
			n->addr[i] &= (uint8_t)(0xff00u >> (n->prefix - bit));
	}
}

static const uint8_t exports_v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* exports_net_unmap -- store an IPv4-mapped IPv6 network as the IPv4 network it is. */
static void exports_net_unmap(struct export_net *n)
{
	if (n->family == AF_INET6 && n->prefix >= 96 &&
	    memcmp(n->addr, exports_v4mapped, 12) == 0) {
		memmove(n->addr, n->addr + 12, 4);
		memset(n->addr + 4, 0, 12);
		n->family = AF_INET;
		n->prefix = (uint8_t)(n->prefix - 96);
	}
}

/* exports_addr -- parse a literal address S into N (full prefix); returns 0 or -EINVAL. */
static int exports_addr(const char *s, struct export_net *n)
{
	memset(n, 0, sizeof(*n));
	if (inet_pton(AF_INET, s, n->addr) == 1) {
		n->family = AF_INET;
		n->prefix = 32;
		return 0;
	}
	if (inet_pton(AF_INET6, s, n->addr) == 1) {
		n->family = AF_INET6;
		n->prefix = 128;
		return 0;
	}
	return -EINVAL;
}

/* exports_client_net -- parse "addr/prefix" or "a.b.c.d/m.m.m.m" into C. */
static int exports_client_net(struct parser *ps, unsigned line, char *name,
			      struct export_client *c)
{
	char *slash = strchr(name, '/');
	struct export_net n, mask;
	uint32_t prefix;

	*slash = '\0';
	int rc = exports_addr(name, &n);
	*slash = '/';
	if (rc < 0)
		return exports_error(ps, line, "'%s': '%.*s' is not an IPv4 or IPv6 address", name,
				     (int)(slash - name), name);
	const char *p = slash + 1;
	if (exports_u32(p, &prefix) == 0) {
		if (prefix > n.prefix)
			return exports_error(ps, line, "'%s': prefix length %s is larger than %u",
					     name, p, n.prefix);
		n.prefix = (uint8_t)prefix;
	} else if (n.family == AF_INET && exports_addr(p, &mask) == 0 && mask.family == AF_INET) {
		uint32_t m = ((uint32_t)mask.addr[0] << 24) | ((uint32_t)mask.addr[1] << 16) |
			     ((uint32_t)mask.addr[2] << 8) | mask.addr[3];
		/* contiguous: ~m is of the form 0...01...1, i.e. ~m & (~m + 1) == 0 */
		if ((~m & (~m + 1u)) != 0)
			return exports_error(ps, line, "'%s': netmask %s is not contiguous", name, p);
		n.prefix = (uint8_t)__builtin_popcount(m);
	} else {
		return exports_error(ps, line, "'%s': '%s' is not a prefix length%s", name, p,
				     n.family == AF_INET ? " or a netmask" : "");
	}
	exports_net_mask(&n);
	exports_net_unmap(&n);
	c->kind = EXPORT_CLIENT_NETWORK;
	c->nets = malloc(sizeof(*c->nets));
	if (!c->nets)
		return exports_nomem(ps);
	c->nets[0] = n;
	c->nnets = 1;
	return 0;
}

/* exports_client_host -- resolve host name NAME into C (every address, deduplicated). */
static int exports_client_host(struct parser *ps, unsigned line, const char *name,
			       struct export_client *c)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	size_t cap = 0;
	int rc;

	/* no AI_ADDRCONFIG: "localhost" must give ::1 even on a host without IPv6 routes */
	rc = getaddrinfo(name, NULL, &hints, &res);
	if (rc != 0)
		return exports_error(ps, line, "host name '%s' does not resolve: %s", name,
				     rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
	c->kind = EXPORT_CLIENT_HOSTNAME;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		struct export_net n = { 0 };
		if (ai->ai_family == AF_INET) {
			n.family = AF_INET;
			n.prefix = 32;
			memcpy(n.addr, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
		} else if (ai->ai_family == AF_INET6) {
			n.family = AF_INET6;
			n.prefix = 128;
			memcpy(n.addr, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, 16);
			exports_net_unmap(&n);
		} else {
			continue;
		}
		bool dup = false;
		for (size_t i = 0; i < c->nnets && !dup; i++)
			dup = memcmp(&c->nets[i], &n, sizeof(n)) == 0;
		if (dup)
			continue;
		if (c->nnets == cap) {
			size_t ncap = cap ? 2 * cap : 4;
			struct export_net *v = realloc(c->nets, ncap * sizeof(*v));
			if (!v) {
				freeaddrinfo(res);
				return exports_nomem(ps);
			}
			c->nets = v;
			cap = ncap;
		}
		c->nets[c->nnets++] = n;
	}
	freeaddrinfo(res);
	if (c->nnets == 0)
		return exports_error(ps, line, "host name '%s' has no IPv4 or IPv6 address", name);
	return 0;
}

/* exports_client_name -- classify and parse client name NAME into C. */
static int exports_client_name(struct parser *ps, unsigned line, char *name,
			       struct export_client *c)
{
	struct export_net n;

	if (strcmp(name, "*") == 0) {
		c->kind = EXPORT_CLIENT_ANYONE;
		return 0;
	}
	if (name[0] == '@')
		return exports_error(ps, line, "'%s': netgroups are not supported", name);
	if (strncmp(name, "gss/", 4) == 0)
		return exports_error(ps, line, "'%s': gss clients are not supported", name);
	if (strpbrk(name, "*?["))
		return exports_error(ps, line, "'%s': wildcard host names are not supported "
				     "(use an address, a network or '*')", name);
	if (strchr(name, '/'))
		return exports_client_net(ps, line, name, c);
	if (exports_addr(name, &n) == 0) {
		exports_net_unmap(&n);
		c->kind = EXPORT_CLIENT_ADDRESS;
		c->nets = malloc(sizeof(*c->nets));
		if (!c->nets)
			return exports_nomem(ps);
		c->nets[0] = n;
		c->nnets = 1;
		return 0;
	}
	/* not an address: a host name.  Refuse what getaddrinfo would read as a short
	 * numeric form ("10.1") or what only looks like a broken address */
	if (strspn(name, "0123456789.") == strlen(name))
		return exports_error(ps, line, "'%s' is not a valid IPv4 address", name);
	if (strchr(name, ':'))
		return exports_error(ps, line, "'%s' is not a valid IPv6 address", name);
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '_')
			return exports_error(ps, line, "'%s' is not a valid host name", name);
	return exports_client_host(ps, line, name, c);
}

static void exports_client_free(struct export_client *c)
{
	free(c->spec);
	free(c->nets);
}

/*
 * exports_client -- parse client token T ("name" or "name(opts)") with the line's
 * DEFAULTS into C (zeroed by the caller).  Returns 0, -EINVAL or -ENOMEM.
 */
static int exports_client(struct parser *ps, const struct token *t,
			  const struct optstate *defaults, struct export_client *c)
{
	struct optstate s = *defaults;
	char *open = strchr(t->s, '(');
	int rc;

	if (open == t->s)
		return exports_error(ps, t->line, "options '%s' without a client name (a space "
				     "before '('? write '*%s' to mean everyone)", t->s, t->s);
	if (open) {
		char *close = strchr(open, ')');
		/* the lexer guarantees one ')' after each '(' on the line */
		if (!close)
			return exports_error(ps, t->line, "missing ')'");
		if (close[1] != '\0')
			return exports_error(ps, t->line, "'%s': unexpected text after ')'", t->s);
		c->spec = strndup(t->s, (size_t)(open - t->s));
		*close = '\0';
	} else {
		c->spec = strdup(t->s);
	}
	if (!c->spec)
		return exports_nomem(ps);
	if (!c->spec[0])
		return exports_error(ps, t->line, "empty client name");
	if ((rc = exports_client_name(ps, t->line, c->spec, c)) < 0)
		return rc;
	if (open && (rc = exports_options(ps, t->line, open + 1, &s)) < 0)
		return rc;
	c->opts = exports_fold(&s);
	return 0;
}

/* ---- lines ------------------------------------------------------------------------ */

static void exports_export_free(struct export *x)
{
	for (size_t i = 0; i < x->nclients; i++)
		exports_client_free(&x->clients[i]);
	free(x->clients);
	free(x->path);
}

/* exports_check_dir -- the export path must exist and be a directory. */
static int exports_check_dir(struct parser *ps, unsigned line, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return exports_error(ps, line, "export path %s does not exist or cannot be "
				     "reached (%s); create it or remove the line", path,
				     strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return exports_error(ps, line, "export path %s is not a directory", path);
	return 0;
}

/* exports_parse_line -- turn logical line L into an export appended to ps->ex. */
static int exports_parse_line(struct parser *ps, struct line *l)
{
	struct export x = { 0 };
	struct optstate defaults = exports_defaults;
	const struct token *pt = &l->t[0];
	char norm[PATH_MAX];
	size_t first = 1;
	int rc;

	x.line = pt->line;
	if (pt->s[0] != '/')
		return exports_error(ps, pt->line, "export path '%s' is not absolute", pt->s);
	rc = exports_normalise(pt->s, norm);
	if (rc == -ENAMETOOLONG)
		return exports_error(ps, pt->line, "export path is too long");
	if (rc < 0)
		return exports_error(ps, pt->line, "export path '%s' contains '..'", pt->s);
	/* the control socket, presto and the console name exports in JSON,
	 * whose strings are UTF-8: such a path could not be named there */
	json_t *u = json_string(norm);
	if (!u)
		return exports_error(ps, pt->line, "export path is not valid UTF-8");
	json_decref(u);
	for (size_t i = 0; i < ps->ex->n; i++)
		if (strcmp(ps->ex->v[i].path, norm) == 0)
			return exports_error(ps, pt->line, "duplicate export of %s (first at line %u)",
					     norm, ps->ex->v[i].line);
	if (l->n > 1 && l->t[1].s[0] == '-' && !l->t[1].quoted) {
		char *list = l->t[1].s + 1;
		if (!*list)
			return exports_error(ps, l->t[1].line, "empty default options '-'");
		if ((rc = exports_options(ps, l->t[1].line, list, &defaults)) < 0)
			return rc;
		first = 2;
	}
	if (first >= l->n)
		return exports_error(ps, pt->line, "no client for %s (write '*' to export it to "
				     "everyone)", norm);
	for (size_t i = first; i < l->n; i++)
		if (l->t[i].s[0] == '-' && !l->t[i].quoted)
			return exports_error(ps, l->t[i].line, "default options '%s' must come "
					     "right after the path", l->t[i].s);
	if ((rc = exports_check_dir(ps, pt->line, norm)) < 0)
		return rc;

	x.path = strdup(norm);
	x.clients = calloc(l->n - first, sizeof(*x.clients));
	if (!x.path || !x.clients) {
		rc = exports_nomem(ps);
		goto fail;
	}
	unsigned fsid_line = 0;
	for (size_t i = first; i < l->n; i++) {
		struct export_client *c = &x.clients[x.nclients++];
		if ((rc = exports_client(ps, &l->t[i], &defaults, c)) < 0)
			goto fail;
		if (!c->opts.fsid_set)
			continue;
		if (fsid_line && c->opts.fsid != x.id) {
			rc = exports_error(ps, l->t[i].line, "fsid=%u conflicts with fsid=%u given "
					   "for %s on line %u", c->opts.fsid, x.id, norm, fsid_line);
			goto fail;
		}
		x.id = c->opts.fsid;
		fsid_line = l->t[i].line;
	}
	if (!fsid_line)
		x.id = exports_fnv1a(norm);
	for (size_t i = 0; i < ps->ex->n; i++) {
		const struct export *o = &ps->ex->v[i];
		if (o->id != x.id)
			continue;
		if (fsid_line)
			rc = exports_error(ps, fsid_line, "fsid=%u of %s is already the id of %s "
					   "(line %u)", x.id, norm, o->path, o->line);
		else
			rc = exports_error(ps, pt->line, "the id derived from %s collides with the "
					   "id of %s (line %u); give one of them fsid=N", norm,
					   o->path, o->line);
		goto fail;
	}
	if (ps->ex->n == ps->excap) {
		size_t cap = ps->excap ? 2 * ps->excap : 8;
		struct export *v = realloc(ps->ex->v, cap * sizeof(*v));
		if (!v) {
			rc = exports_nomem(ps);
			goto fail;
		}
		ps->ex->v = v;
		ps->excap = cap;
	}
	ps->ex->v[ps->ex->n++] = x;
	return 0;
fail:
	exports_export_free(&x);
	return rc;
}

/* ---- public ----------------------------------------------------------------------- */

void exports_free(struct exports *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		exports_export_free(&e->v[i]);
	free(e->v);
	free(e);
}

int exports_parse_string(const char *text, const char *name_for_messages,
			 struct exports **out, char *err, size_t errlen)
{
	struct parser ps = {
		.name = name_for_messages ? name_for_messages : "exports",
		.p = text ? text : "",
		.line = 1,
		.err = err,
		.errlen = errlen,
	};
	struct line l = { 0 };
	int rc;

	*out = NULL;
	if (err && errlen > 0)
		err[0] = '\0';
	ps.ex = calloc(1, sizeof(*ps.ex));
	if (!ps.ex)
		return exports_nomem(&ps);
	while ((rc = exports_lex_line(&ps, &l)) > 0)
		if ((rc = exports_parse_line(&ps, &l)) < 0)
			break;
	exports_line_free(&l);
	if (rc < 0) {
		exports_free(ps.ex);
		return rc;
	}
	*out = ps.ex;
	return 0;
}

int exports_parse_file(const char *path, struct exports **out, char *err, size_t errlen)
{
	char *text = NULL;
	size_t n = 0, cap = 0;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (err && errlen > 0)
			snprintf(err, errlen, "%s: cannot open: %s", path, strerror(-rc));
		return rc;
	}
	for (;;) {
		if (cap - n < 4096 + 1) {
			cap = cap ? 2 * cap : 8192;
			char *t = realloc(text, cap);
			if (!t) {
				rc = -ENOMEM;
				if (err && errlen > 0)
					snprintf(err, errlen, "%s: out of memory", path);
				goto out;
			}
			text = t;
		}
		ssize_t r = read(fd, text + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			if (err && errlen > 0)
				snprintf(err, errlen, "%s: read: %s", path, strerror(-rc));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > EXPORTS_MAX_FILE) {
			rc = -EFBIG;
			if (err && errlen > 0)
				snprintf(err, errlen, "%s: larger than %u bytes", path, EXPORTS_MAX_FILE);
			goto out;
		}
	}
	text[n] = '\0';
	const char *nul = memchr(text, '\0', n);
	if (nul) {
		unsigned line = 1;
		for (const char *p = text; p < nul; p++)
			line += *p == '\n';
		rc = -EINVAL;
		if (err && errlen > 0)
			snprintf(err, errlen, "%s:%u: NUL byte in the file", path, line);
		goto out;
	}
	rc = exports_parse_string(text, path, out, err, errlen);
out:
	free(text);
	close(fd);
	return rc;
}

/* exports_net_match -- whether the 4 or 16 bytes A of FAMILY lie in network N. */
static bool exports_net_match(const struct export_net *n, sa_family_t family, const uint8_t *a)
{
	if (n->family != family)
		return false;
	unsigned full = n->prefix / 8, rest = n->prefix % 8;
	if (memcmp(n->addr, a, full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t m = (uint8_t)(0xff00u >> rest);
	return (a[full] & m) == n->addr[full];
}

const struct export_client *exports_match(const struct export *e, const struct sockaddr *sa)
{
	uint8_t a[16];
	sa_family_t family;

	if (!e || !sa)
		return NULL;
	if (sa->sa_family == AF_INET) {
		family = AF_INET;
		memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		if (memcmp(b, exports_v4mapped, 12) == 0) {
			family = AF_INET;
			memcpy(a, b + 12, 4);
		} else {
			family = AF_INET6;
			memcpy(a, b, 16);
		}
	} else {
		return NULL;
	}
	for (size_t i = 0; i < e->nclients; i++) {
		const struct export_client *c = &e->clients[i];
		if (c->kind == EXPORT_CLIENT_ANYONE)
			return c;
		for (size_t j = 0; j < c->nnets; j++)
			if (exports_net_match(&c->nets[j], family, a))
				return c;
	}
	return NULL;
}

bool exports_port_ok(const struct export_opts *o, const struct sockaddr *sa)
{
	unsigned port;

	if (!o->secure)
		return true;
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	else if (sa->sa_family == AF_INET6)
		port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	else
		return false;
	return port < 1024;
}

const struct export *exports_find_path(const struct exports *e, const char *path)
{
	char norm[PATH_MAX];

	if (!e || !path || exports_normalise(path, norm) < 0)
		return NULL;
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].path, norm) == 0)
			return &e->v[i];
	return NULL;
}

const struct export *exports_find_id(const struct exports *e, uint32_t id)
{
	if (!e || id == 0)
		return NULL;
	for (size_t i = 0; i < e->n; i++)
		if (e->v[i].id == id)
			return &e->v[i];
	return NULL;
}

int exports_format_opts(const struct export_opts *o, char *buf, size_t len)
{
	static const char *const squash[] = {
		[EXPORT_ROOT_SQUASH] = "root_squash",
		[EXPORT_NO_ROOT_SQUASH] = "no_root_squash",
		[EXPORT_ALL_SQUASH] = "all_squash",
	};
	char fsid[24] = "";
	int n;

	if (o->fsid_set)
		snprintf(fsid, sizeof(fsid), ",fsid=%u", o->fsid);
	n = snprintf(buf, len, "%s,%s,%s,%s,%s,anonuid=%u,anongid=%u%s",
		     o->rw ? "rw" : "ro",
		     (unsigned)o->squash < 3 ? squash[o->squash] : "?",
		     o->secure ? "secure" : "insecure",
		     o->presto ? "presto" : "nopresto",
		     o->async ? "async" : "sync",
		     o->anonuid, o->anongid, fsid);
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	return n;
}
