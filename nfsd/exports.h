/*
 * exports.h -- the exports file of presto-nfsd: parser and client matcher.
 *
 * The syntax is that of Linux knfsd, exports(5):
 *
 *     # comment (a '#' outside double quotes starts a comment up to the end of the line)
 *     /srv/presto/export   127.0.0.1(rw,insecure,no_root_squash) ::1(rw)
 *     "/srv/with space"    10.0.0.0/8(ro) *(ro,all_squash)
 *     /srv/other  -rw,async  host1 host2(ro)   <- knfsd "default options" block
 *     /srv/long   192.168.1.0/255.255.255.0(rw) \
 *                 fd00::/8(rw)                 <- backslash-newline continues a line
 *
 * One export per (logical) line: the path, then whitespace-separated client specs, each
 * `client(opt,opt,...)` or a bare `client` (default options).  A token starting with '-'
 * right after the path is a default-options block: it applies to every client of the line,
 * and a client's own options are applied on top of it (the last word wins, as in knfsd, so
 * `-rw host(ro)` exports read-only to host).  Whitespace inside the parentheses is allowed.
 *
 * Paths: absolute; a path with spaces is written in double quotes; the stored path is
 * normalised lexically ("//", "/./" and a trailing '/' removed); a ".." component is an
 * error (symbolic links are NOT resolved).  The path must exist and be a directory when
 * the file is parsed, or the parse fails (the server refuses to start).
 *
 * Clients, tried in line order by exports_match() (the first that matches wins):
 *   *                       anyone
 *   1.2.3.4  fd00::1        one address (an IPv4-mapped ::ffff:1.2.3.4 is stored as IPv4)
 *   10.0.0.0/8  fd00::/8    a network (host bits are ignored: 10.1.2.3/8 == 10.0.0.0/8)
 *   10.0.0.0/255.0.0.0      a network, netmask form (IPv4, contiguous masks only)
 *   name                    a host name, resolved ONCE at parse time with getaddrinfo()
 *                           (without AI_ADDRCONFIG, so "localhost" gives 127.0.0.1 and ::1
 *                           where /etc/hosts says so); every address is kept.  A name that
 *                           does not resolve is an error.  A DNS change needs a re-parse.
 *   Not supported (error):  wildcard names (*.example.com), @netgroups, gss/krb5...
 *
 * Options (the default first):
 *   ro | rw                          read-only (default, as knfsd) or read-write
 *   root_squash | no_root_squash     uid/gid 0 mapped to anonuid/anongid (default) or not
 *   no_all_squash | all_squash       every uid/gid mapped to anonuid/anongid; wins over
 *                                    no_root_squash whatever the order (as knfsd)
 *   anonuid=N, anongid=N             decimal, default 65534
 *   secure | insecure                client source port must be < 1024 (default) or any
 *   sync | async                     reply to writes after they are stable (default) or not
 *   presto | nopresto                use the NVRAM write cache (default) or bypass it
 *   fsid=N                           decimal 1..4294967295: the export's id (see below)
 * Accepted and ignored (they have no meaning for presto-nfsd):
 *   no_subtree_check, subtree_check, wdelay, no_wdelay, hide, nohide, crossmnt,
 *   nocrossmnt, sec=sys (the only flavour served; any other sec= is an error).
 * Any other option is an error naming it.  Conflicting options: the last one wins.
 *
 * fsid: fsid=0 and fsid=root (the NFSv4 pseudo-root of knfsd) are REJECTED: presto-nfsd
 * serves NFSv3 only and 0 is never a valid export id.  fsid=UUID is rejected too.  fsid
 * may be given on any client of a line (it is per export, not per client); every client of
 * the line that gives it must give the same value.  export.id is fsid if given, else the
 * 32-bit FNV-1a hash of the normalised path (0 replaced by 1): stable across restarts as
 * long as the path does not change.  Two exports with the same id (a duplicate fsid, or a
 * hash collision, which the message asks to solve with fsid=) is an error.
 *
 * Other errors: a duplicate path, a line with a path but no client (knfsd would export to
 * the world with a warning; we refuse: write `*` if that is meant), options with no client
 * name (`host (rw)` with a space: in knfsd that exports rw to everyone), text after ')'.
 * Every error message is "FILE:LINE: what is wrong", FILE being the name given for messages.
 * An empty file (or one with comments only) is valid and gives zero exports.
 */
#ifndef PRESTO_NFSD_EXPORTS_H
#define PRESTO_NFSD_EXPORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EXPORTS_ANON_DEFAULT 65534u

enum export_squash {
	EXPORT_ROOT_SQUASH, /* default */
	EXPORT_NO_ROOT_SQUASH,
	EXPORT_ALL_SQUASH,
};

struct export_opts {
	bool rw;                 /* default false (ro), as knfsd */
	enum export_squash squash;
	uint32_t anonuid, anongid; /* default 65534 */
	bool secure;             /* default true: client source port must be < 1024 */
	bool presto;             /* default true; `nopresto` / `presto` */
	bool async;              /* `sync` (default) / `async` */
	bool fsid_set;           /* this client's options (or the line's defaults) gave fsid= */
	uint32_t fsid;
};

enum export_client_kind {
	EXPORT_CLIENT_ANYONE,   /* '*' */
	EXPORT_CLIENT_ADDRESS,  /* one IPv4 or IPv6 address */
	EXPORT_CLIENT_NETWORK,  /* CIDR or netmask */
	EXPORT_CLIENT_HOSTNAME, /* a name, resolved at parse time to nets[] (full prefixes) */
};

/* One address or network: addr holds 4 (AF_INET) or 16 (AF_INET6) bytes, host bits zero. */
struct export_net {
	sa_family_t family;
	uint8_t prefix;          /* 0..32 or 0..128; 32/128 for a single address */
	uint8_t addr[16];
};

struct export_client {
	char *spec;              /* as written, without the options: "10.0.0.0/8", "localhost" */
	enum export_client_kind kind;
	struct export_net *nets; /* empty for EXPORT_CLIENT_ANYONE */
	size_t nnets;
	struct export_opts opts;
};

struct export {
	char *path;              /* absolute, normalised, no trailing slash ("/" alone is "/") */
	uint32_t id;             /* fsid= if given, else FNV-1a of path; never 0 */
	struct export_client *clients;
	size_t nclients;
	unsigned line;           /* line of the exports file, for messages */
};

struct exports {
	struct export *v;
	size_t n;
};

/*
 * exports_parse_file -- read and parse the exports file PATH into *OUT.
 * Returns 0, -EINVAL on a syntax/semantic error, -ENOMEM, or the -errno of reading the
 * file; on error *OUT is NULL and ERR (if ERRLEN > 0) holds "FILE:LINE: message".
 */
int exports_parse_file(const char *path, struct exports **out, char *err, size_t errlen);

/*
 * exports_parse_string -- parse TEXT as an exports file; NAME is used in messages.
 * Returns as exports_parse_file().
 */
int exports_parse_string(const char *text, const char *name_for_messages,
			 struct exports **out, char *err, size_t errlen);

/* exports_free -- free what a parse returned; NULL is fine. */
void exports_free(struct exports *e);

/*
 * exports_match -- the first client spec of E, in line order, that SA (AF_INET or AF_INET6;
 * the port is not looked at) belongs to.  An IPv4-mapped IPv6 address (::ffff:a.b.c.d)
 * matches IPv4 specs.  Returns NULL if none matches (or SA is NULL / another family).
 */
const struct export_client *exports_match(const struct export *e, const struct sockaddr *sa);

/*
 * exports_port_ok -- whether the source port of SA is acceptable under O:
 * always if !O->secure, else only a port < 1024.
 */
bool exports_port_ok(const struct export_opts *o, const struct sockaddr *sa);

/*
 * exports_find_path -- the export whose path is PATH (normalised before comparing, so
 * "/srv/x/" finds "/srv/x"); NULL if none.  Only exact export roots are found.
 */
const struct export *exports_find_path(const struct exports *e, const char *path);

/* exports_find_id -- the export whose id is ID; NULL if none. */
const struct export *exports_find_id(const struct exports *e, uint32_t id);

/*
 * exports_format_opts -- write O as exportfs -v would, e.g.
 * "rw,root_squash,secure,presto,sync,anonuid=65534,anongid=65534" (",fsid=N" if set).
 * Returns the length written (without the NUL), or -ENOSPC if it does not fit in LEN
 * (BUF then holds a truncated, NUL-terminated string when LEN > 0).
 */
int exports_format_opts(const struct export_opts *o, char *buf, size_t len);

#endif
