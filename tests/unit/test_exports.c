/*
 * test_exports.c -- one test per rule of the exports(5) parser and matcher (nfsd/exports.h).
 *
 * Export paths must exist, so the tests run against a scratch tree made by the group
 * setup: $D/a, $D/b, $D/with space, $D/file (a regular file).  Test texts write "$D" for
 * its root; parse() substitutes it.
 */
#include "nfsd/exports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char root[64];
static char err[512];

static int setup_tree(void **state)
{
	char p[256];
	(void)state;
	snprintf(root, sizeof(root), "/tmp/presto-exports-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(p, sizeof(p), "%s/a", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/b", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/with space", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/file", root);
	int fd = open(p, O_CREAT | O_WRONLY, 0644);
	if (fd >= 0)
		close(fd);
	return 0;
}

static int teardown_tree(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* subst -- TEXT with every "$D" replaced by the scratch root (caller frees). */
static char *subst(const char *text)
{
	size_t n = strlen(text) * 2 + 64 * 16 + 1, o = 0;
	char *s = malloc(n);
	assert_non_null(s);
	for (const char *p = text; *p; p++) {
		if (p[0] == '$' && p[1] == 'D') {
			size_t l = strlen(root);
			if (o + l + 1 >= n) {
				n = 2 * n + l;
				s = realloc(s, n);
				assert_non_null(s);
			}
			memcpy(s + o, root, l);
			o += l;
			p++;
			continue;
		}
		if (o + 2 >= n) {
			n *= 2;
			s = realloc(s, n);
			assert_non_null(s);
		}
		s[o++] = *p;
	}
	s[o] = '\0';
	return s;
}

static int parse(const char *text, struct exports **out)
{
	char *t = subst(text);
	err[0] = '\0';
	int rc = exports_parse_string(t, "exports", out, err, sizeof(err));
	free(t);
	return rc;
}

/* parse_ok -- parse TEXT, which must succeed. */
static struct exports *parse_ok(const char *text)
{
	struct exports *e = NULL;
	int rc = parse(text, &e);
	if (rc != 0)
		print_error("unexpected error: %s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(e);
	return e;
}

/* expect_error -- parsing TEXT fails with -EINVAL and a message that starts with PREFIX
 * (after $D substitution) and contains every NEEDLE. */
static void expect_error(const char *text, const char *prefix, ...)
{
	struct exports *e = (struct exports *)1;
	int rc = parse(text, &e);
	assert_int_equal(rc, -EINVAL);
	assert_null(e);
	char *want = subst(prefix);
	if (strncmp(err, want, strlen(want)) != 0)
		print_error("message '%s' does not start with '%s'\n", err, want);
	assert_true(strncmp(err, want, strlen(want)) == 0);
	free(want);
	va_list ap;
	va_start(ap, prefix);
	for (const char *needle; (needle = va_arg(ap, const char *));) {
		char *w = subst(needle);
		if (!strstr(err, w))
			print_error("message '%s' lacks '%s'\n", err, w);
		assert_non_null(strstr(err, w));
		free(w);
	}
	va_end(ap);
}

static struct sockaddr_storage v4(const char *a, unsigned port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s = (struct sockaddr_in *)&ss;
	s->sin_family = AF_INET;
	s->sin_port = htons((uint16_t)port);
	assert_int_equal(inet_pton(AF_INET, a, &s->sin_addr), 1);
	return ss;
}

static struct sockaddr_storage v6(const char *a, unsigned port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
	s->sin6_family = AF_INET6;
	s->sin6_port = htons((uint16_t)port);
	assert_int_equal(inet_pton(AF_INET6, a, &s->sin6_addr), 1);
	return ss;
}

/* match -- the spec of the client of export 0 of E matching address A, or NULL. */
static const char *match(const struct exports *e, const char *a)
{
	struct sockaddr_storage ss = strchr(a, ':') ? v6(a, 700) : v4(a, 700);
	const struct export_client *c = exports_match(&e->v[0], (struct sockaddr *)&ss);
	return c ? c->spec : NULL;
}

/* opts_of -- the options of the single client of the single export of TEXT. */
static struct export_opts opts_of(const char *text)
{
	struct exports *e = parse_ok(text);
	assert_int_equal(e->n, 1);
	assert_int_equal(e->v[0].nclients, 1);
	struct export_opts o = e->v[0].clients[0].opts;
	exports_free(e);
	return o;
}

/* assert_opts_equal -- field by field: the struct has padding */
static void assert_opts_equal(const struct export_opts *a, const struct export_opts *b)
{
	assert_int_equal(a->rw, b->rw);
	assert_int_equal(a->squash, b->squash);
	assert_int_equal(a->anonuid, b->anonuid);
	assert_int_equal(a->anongid, b->anongid);
	assert_int_equal(a->secure, b->secure);
	assert_int_equal(a->presto, b->presto);
	assert_int_equal(a->async, b->async);
	assert_int_equal(a->fsid_set, b->fsid_set);
	assert_int_equal(a->fsid, b->fsid);
}

/* ---- defaults and options ------------------------------------------------------ */

static void test_defaults(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a 10.0.0.1\n");
	assert_int_equal(e->n, 1);
	const struct export *x = &e->v[0];
	assert_int_equal(x->nclients, 1);
	assert_int_equal(x->line, 1);
	const struct export_opts *o = &x->clients[0].opts;
	assert_false(o->rw);
	assert_int_equal(o->squash, EXPORT_ROOT_SQUASH);
	assert_int_equal(o->anonuid, 65534);
	assert_int_equal(o->anongid, 65534);
	assert_true(o->secure);
	assert_true(o->presto);
	assert_false(o->async);
	assert_false(o->fsid_set);
	assert_string_equal(x->clients[0].spec, "10.0.0.1");
	assert_int_equal(x->clients[0].kind, EXPORT_CLIENT_ADDRESS);
	/* bare client and empty parentheses give the same defaults */
	struct export_opts o2 = opts_of("$D/a 10.0.0.1()");
	assert_opts_equal(o, &o2);
	exports_free(e);
}

static void test_opt_rw_ro(void **state)
{
	(void)state;
	assert_true(opts_of("$D/a *(rw)").rw);
	assert_false(opts_of("$D/a *(ro)").rw);
	assert_false(opts_of("$D/a *(rw,ro)").rw); /* last wins */
	assert_true(opts_of("$D/a *(ro,rw)").rw);
}

static void test_opt_squash(void **state)
{
	(void)state;
	assert_int_equal(opts_of("$D/a *(root_squash)").squash, EXPORT_ROOT_SQUASH);
	assert_int_equal(opts_of("$D/a *(no_root_squash)").squash, EXPORT_NO_ROOT_SQUASH);
	assert_int_equal(opts_of("$D/a *(all_squash)").squash, EXPORT_ALL_SQUASH);
	assert_int_equal(opts_of("$D/a *(all_squash,no_all_squash)").squash, EXPORT_ROOT_SQUASH);
	assert_int_equal(opts_of("$D/a *(no_root_squash,all_squash,no_all_squash)").squash,
			 EXPORT_NO_ROOT_SQUASH);
}

static void test_opt_all_squash_wins_over_no_root_squash(void **state)
{
	(void)state;
	assert_int_equal(opts_of("$D/a *(all_squash,no_root_squash)").squash, EXPORT_ALL_SQUASH);
	assert_int_equal(opts_of("$D/a *(no_root_squash,all_squash)").squash, EXPORT_ALL_SQUASH);
}

static void test_opt_anonuid_anongid(void **state)
{
	(void)state;
	struct export_opts o = opts_of("$D/a *(anonuid=1000,anongid=0)");
	assert_int_equal(o.anonuid, 1000);
	assert_int_equal(o.anongid, 0);
	o = opts_of("$D/a *(anonuid=4294967295)");
	assert_int_equal(o.anonuid, 4294967295u);
	assert_int_equal(o.anongid, 65534);
}

static void test_opt_secure_insecure(void **state)
{
	(void)state;
	assert_true(opts_of("$D/a *(secure)").secure);
	assert_false(opts_of("$D/a *(insecure)").secure);
}

static void test_opt_sync_async(void **state)
{
	(void)state;
	assert_false(opts_of("$D/a *(sync)").async);
	assert_true(opts_of("$D/a *(async)").async);
}

static void test_opt_presto_nopresto(void **state)
{
	(void)state;
	assert_true(opts_of("$D/a *(presto)").presto);
	assert_false(opts_of("$D/a *(nopresto)").presto);
	assert_true(opts_of("$D/a *(nopresto,presto)").presto);
}

static void test_opt_fsid(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a *(fsid=42)");
	assert_int_equal(e->v[0].id, 42);
	assert_true(e->v[0].clients[0].opts.fsid_set);
	assert_int_equal(e->v[0].clients[0].opts.fsid, 42);
	exports_free(e);
	/* fsid on one client of the line sets the export's id */
	e = parse_ok("$D/a 10.0.0.1 10.0.0.2(fsid=7) 10.0.0.3(fsid=7)");
	assert_int_equal(e->v[0].id, 7);
	assert_false(e->v[0].clients[0].opts.fsid_set);
	exports_free(e);
}

static void test_opt_ignored(void **state)
{
	(void)state;
	struct export_opts o = opts_of("$D/a *(no_subtree_check,subtree_check,wdelay,no_wdelay,"
				       "hide,nohide,crossmnt,nocrossmnt,sec=sys)");
	struct export_opts d = opts_of("$D/a *");
	assert_opts_equal(&o, &d);
}

static void test_opt_whitespace_in_parentheses(void **state)
{
	(void)state;
	struct export_opts o = opts_of("$D/a 10.0.0.1( rw , async,\tinsecure )");
	assert_true(o.rw);
	assert_true(o.async);
	assert_false(o.secure);
}

static void test_default_options_block(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a -rw,async 10.0.0.1 10.0.0.2(ro) 10.0.0.3(insecure)");
	const struct export *x = &e->v[0];
	assert_int_equal(x->nclients, 3);
	assert_true(x->clients[0].opts.rw);
	assert_true(x->clients[0].opts.async);
	assert_false(x->clients[1].opts.rw); /* own options override the block */
	assert_true(x->clients[1].opts.async);
	assert_true(x->clients[2].opts.rw);
	assert_false(x->clients[2].opts.secure);
	assert_true(x->clients[0].opts.secure);
	exports_free(e);
}

/* ---- syntax -------------------------------------------------------------------- */

static void test_comments_and_blank_lines(void **state)
{
	(void)state;
	struct exports *e = parse_ok("# a comment\n"
				     "\n"
				     "   \t\n"
				     "$D/a 10.0.0.1(rw) # trailing comment 10.0.0.2\n"
				     "  # indented comment\n"
				     "$D/b *#comment right after a client\n");
	assert_int_equal(e->n, 2);
	assert_int_equal(e->v[0].nclients, 1);
	assert_int_equal(e->v[0].line, 4);
	assert_int_equal(e->v[1].line, 6);
	assert_int_equal(e->v[1].nclients, 1);
	assert_string_equal(e->v[1].clients[0].spec, "*");
	exports_free(e);
}

static void test_empty_file(void **state)
{
	(void)state;
	struct exports *e = parse_ok("");
	assert_int_equal(e->n, 0);
	exports_free(e);
	e = parse_ok("# nothing exported\n\n");
	assert_int_equal(e->n, 0);
	exports_free(e);
}

static void test_continuation_lines(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a 10.0.0.1(rw) \\\n"
				     "     10.0.0.2(ro) \\\r\n"
				     "     10.0.0.3\n"
				     "$D/b *\n");
	assert_int_equal(e->n, 2);
	assert_int_equal(e->v[0].nclients, 3);
	assert_string_equal(e->v[0].clients[2].spec, "10.0.0.3");
	assert_int_equal(e->v[1].line, 4);
	exports_free(e);
	/* a backslash at the end of a comment does not continue the line */
	e = parse_ok("# comment \\\n$D/a *\n");
	assert_int_equal(e->n, 1);
	exports_free(e);
}

static void test_quoted_paths(void **state)
{
	(void)state;
	struct exports *e = parse_ok("\"$D/with space\" 10.0.0.1(rw)\n$D/\"a\" *\n");
	assert_int_equal(e->n, 2);
	char want[128];
	snprintf(want, sizeof(want), "%s/with space", root);
	assert_string_equal(e->v[0].path, want);
	snprintf(want, sizeof(want), "%s/a", root);
	assert_string_equal(e->v[1].path, want);
	exports_free(e);
	/* '#' inside quotes is part of the path, not a comment */
	expect_error("\"$D/b#c\" *", "exports:1: ", "$D/b#c does not exist", NULL);
}

static void test_path_normalised(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D//a/./ *\n/ *\n");
	char want[128];
	snprintf(want, sizeof(want), "%s/a", root);
	assert_string_equal(e->v[0].path, want);
	assert_string_equal(e->v[1].path, "/");
	exports_free(e);
}

static void test_id_derived_from_path(void **state)
{
	(void)state;
	struct exports *e1 = parse_ok("$D/a *\n$D/b *\n");
	struct exports *e2 = parse_ok("$D/b 10.0.0.1\n$D/a/ 10.0.0.2(rw)\n");
	assert_int_not_equal(e1->v[0].id, 0);
	assert_int_not_equal(e1->v[0].id, e1->v[1].id);
	/* stable: depends on the path only */
	assert_int_equal(e1->v[0].id, e2->v[1].id);
	assert_int_equal(e1->v[1].id, e2->v[0].id);
	/* FNV-1a of "/" */
	struct exports *e3 = parse_ok("/ *");
	uint32_t h = 2166136261u;
	h ^= '/';
	h *= 16777619u;
	assert_int_equal(e3->v[0].id, h);
	exports_free(e1);
	exports_free(e2);
	exports_free(e3);
}

/* ---- matching ------------------------------------------------------------------ */

static void test_match_ipv4(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a 10.0.0.1(rw) 10.0.0.2");
	assert_string_equal(match(e, "10.0.0.1"), "10.0.0.1");
	assert_string_equal(match(e, "10.0.0.2"), "10.0.0.2");
	assert_null(match(e, "10.0.0.3"));
	assert_null(match(e, "::1"));
	exports_free(e);
}

static void test_match_ipv6(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a ::1 fd00::1:2");
	assert_string_equal(match(e, "::1"), "::1");
	assert_string_equal(match(e, "fd00:0::1:2"), "fd00::1:2");
	assert_null(match(e, "fd00::1:3"));
	assert_null(match(e, "127.0.0.1"));
	assert_int_equal(e->v[0].clients[0].kind, EXPORT_CLIENT_ADDRESS);
	exports_free(e);
}

static void test_match_cidr_ipv4(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a 192.168.1.0/24 10.0.0.0/8 172.16.0.0/12 0.0.0.0/0(ro)");
	assert_int_equal(e->v[0].clients[0].kind, EXPORT_CLIENT_NETWORK);
	assert_string_equal(match(e, "192.168.1.77"), "192.168.1.0/24");
	assert_string_equal(match(e, "10.255.0.1"), "10.0.0.0/8");
	assert_string_equal(match(e, "172.31.255.255"), "172.16.0.0/12");
	assert_string_equal(match(e, "172.32.0.1"), "0.0.0.0/0");
	assert_null(match(e, "fd00::1"));
	exports_free(e);
	/* host bits in the spec are ignored */
	e = parse_ok("$D/a 10.1.2.3/8");
	assert_string_equal(match(e, "10.9.9.9"), "10.1.2.3/8");
	exports_free(e);
}

static void test_match_cidr_ipv6(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a fd00:1::/33 2001:db8::/32");
	assert_string_equal(match(e, "fd00:1:7fff::1"), "fd00:1::/33");
	assert_null(match(e, "fd00:1:8000::1"));
	assert_string_equal(match(e, "2001:db8:ffff::9"), "2001:db8::/32");
	assert_null(match(e, "2001:db9::1"));
	assert_null(match(e, "10.0.0.1"));
	exports_free(e);
}

static void test_match_netmask(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a 192.168.1.0/255.255.255.0 10.0.0.0/255.254.0.0");
	assert_string_equal(match(e, "192.168.1.200"), "192.168.1.0/255.255.255.0");
	assert_null(match(e, "192.168.2.1"));
	assert_string_equal(match(e, "10.1.2.3"), "10.0.0.0/255.254.0.0");
	assert_null(match(e, "10.2.0.1"));
	assert_int_equal(e->v[0].clients[1].nets[0].prefix, 15);
	exports_free(e);
}

static void test_match_wildcard(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a *(ro)");
	assert_int_equal(e->v[0].clients[0].kind, EXPORT_CLIENT_ANYONE);
	assert_string_equal(match(e, "1.2.3.4"), "*");
	assert_string_equal(match(e, "2001:db8::1"), "*");
	assert_string_equal(match(e, "::ffff:1.2.3.4"), "*");
	exports_free(e);
}

static void test_match_hostname_localhost(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a localhost(rw)");
	const struct export_client *c = &e->v[0].clients[0];
	assert_int_equal(c->kind, EXPORT_CLIENT_HOSTNAME);
	assert_string_equal(c->spec, "localhost");
	assert_true(c->nnets >= 1);
	assert_string_equal(match(e, "127.0.0.1"), "localhost");
	assert_string_equal(match(e, "::ffff:127.0.0.1"), "localhost");
	assert_null(match(e, "10.0.0.1"));
	/* ::1 matches exactly when the resolver says localhost is ::1 too */
	bool has_v6 = false;
	for (size_t i = 0; i < c->nnets; i++)
		has_v6 |= c->nets[i].family == AF_INET6;
	if (has_v6)
		assert_string_equal(match(e, "::1"), "localhost");
	else
		assert_null(match(e, "::1"));
	exports_free(e);
}

static void test_match_mapped_client_matches_ipv4_spec(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a 10.0.0.1 192.168.0.0/16");
	assert_string_equal(match(e, "::ffff:10.0.0.1"), "10.0.0.1");
	assert_string_equal(match(e, "::ffff:192.168.4.5"), "192.168.0.0/16");
	assert_null(match(e, "::ffff:10.0.0.2"));
	exports_free(e);
}

static void test_match_mapped_spec_matches_ipv4_client(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a ::ffff:10.0.0.1 ::ffff:192.168.0.0/112");
	assert_int_equal(e->v[0].clients[0].nets[0].family, AF_INET);
	assert_string_equal(match(e, "10.0.0.1"), "::ffff:10.0.0.1");
	assert_string_equal(match(e, "192.168.3.3"), "::ffff:192.168.0.0/112");
	assert_string_equal(match(e, "::ffff:10.0.0.1"), "::ffff:10.0.0.1");
	exports_free(e);
}

static void test_match_first_in_line_order(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a 10.0.0.0/8(ro) 10.0.0.1(rw) *(rw,insecure)");
	const struct export_client *c;
	struct sockaddr_storage ss = v4("10.0.0.1", 800);
	c = exports_match(&e->v[0], (struct sockaddr *)&ss);
	assert_non_null(c);
	assert_ptr_equal(c, &e->v[0].clients[0]);
	assert_false(c->opts.rw);
	assert_string_equal(match(e, "11.0.0.1"), "*");
	exports_free(e);
	e = parse_ok("$D/a 10.0.0.1(rw) 10.0.0.0/8(ro)");
	assert_string_equal(match(e, "10.0.0.1"), "10.0.0.1");
	assert_string_equal(match(e, "10.0.0.2"), "10.0.0.0/8");
	exports_free(e);
}

static void test_match_other_family(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a *");
	struct sockaddr sa = { .sa_family = AF_UNIX };
	assert_null(exports_match(&e->v[0], &sa));
	assert_null(exports_match(&e->v[0], NULL));
	exports_free(e);
}

static void test_port_ok(void **state)
{
	(void)state;
	struct export_opts sec = opts_of("$D/a *"), ins = opts_of("$D/a *(insecure)");
	struct sockaddr_storage lo = v4("10.0.0.1", 1023), hi = v4("10.0.0.1", 1024);
	struct sockaddr_storage lo6 = v6("::1", 800), hi6 = v6("::1", 40000);
	assert_true(exports_port_ok(&sec, (struct sockaddr *)&lo));
	assert_false(exports_port_ok(&sec, (struct sockaddr *)&hi));
	assert_true(exports_port_ok(&sec, (struct sockaddr *)&lo6));
	assert_false(exports_port_ok(&sec, (struct sockaddr *)&hi6));
	assert_true(exports_port_ok(&ins, (struct sockaddr *)&hi));
	assert_true(exports_port_ok(&ins, (struct sockaddr *)&hi6));
}

/* ---- lookups and formatting ---------------------------------------------------- */

static void test_find_path_and_id(void **state)
{
	(void)state;
	struct exports *e = parse_ok("$D/a *\n$D/b *(fsid=9)\n");
	char p[128];
	snprintf(p, sizeof(p), "%s/a", root);
	assert_ptr_equal(exports_find_path(e, p), &e->v[0]);
	snprintf(p, sizeof(p), "%s//b/", root);
	assert_ptr_equal(exports_find_path(e, p), &e->v[1]);
	snprintf(p, sizeof(p), "%s", root);
	assert_null(exports_find_path(e, p));
	assert_null(exports_find_path(e, "relative"));
	assert_ptr_equal(exports_find_id(e, 9), &e->v[1]);
	assert_ptr_equal(exports_find_id(e, e->v[0].id), &e->v[0]);
	assert_null(exports_find_id(e, 0));
	assert_null(exports_find_id(NULL, 9));
	exports_free(e);
}

static void test_format_opts(void **state)
{
	(void)state;
	char buf[256];
	struct export_opts o = opts_of("$D/a *");
	int n = exports_format_opts(&o, buf, sizeof(buf));
	assert_int_equal(n, (int)strlen(buf));
	assert_string_equal(buf, "ro,root_squash,secure,presto,sync,anonuid=65534,anongid=65534");
	o = opts_of("$D/a *(rw,no_root_squash,insecure,nopresto,async,anonuid=1,anongid=2,fsid=3)");
	exports_format_opts(&o, buf, sizeof(buf));
	assert_string_equal(buf, "rw,no_root_squash,insecure,nopresto,async,anonuid=1,anongid=2,"
			    "fsid=3");
	o = opts_of("$D/a *(all_squash)");
	exports_format_opts(&o, buf, sizeof(buf));
	assert_string_equal(buf, "ro,all_squash,secure,presto,sync,anonuid=65534,anongid=65534");
	assert_int_equal(exports_format_opts(&o, buf, 10), -ENOSPC);
	assert_int_equal(strlen(buf), 9);
}

static void test_free_null(void **state)
{
	(void)state;
	exports_free(NULL);
}

/* ---- errors: every message names file:line ------------------------------------- */

static void test_err_unknown_option(void **state)
{
	(void)state;
	expect_error("# c\n$D/a 10.0.0.1(rw,bogus_opt)", "exports:2: ", "unknown option 'bogus_opt'",
		     NULL);
	expect_error("$D/a -rw,frob 10.0.0.1", "exports:1: ", "unknown option 'frob'", NULL);
	expect_error("$D/a *(mp=/x)", "exports:1: ", "unknown option 'mp'", NULL);
}

static void test_err_option_value(void **state)
{
	(void)state;
	expect_error("$D/a *(rw=10.0.0.1)", "exports:1: ", "option 'rw' takes no value", NULL);
	expect_error("$D/a *(anonuid)", "exports:1: ", "'anonuid' needs a value", NULL);
	expect_error("$D/a *(anongid=)", "exports:1: ", "anongid=", "decimal", NULL);
	expect_error("$D/a *(anonuid=-2)", "exports:1: ", "anonuid=-2", NULL);
	expect_error("$D/a *(anonuid=4294967296)", "exports:1: ", "anonuid=4294967296", NULL);
	expect_error("$D/a *(fsid=12ab)", "exports:1: ", "fsid=12ab", NULL);
}

static void test_err_fsid_zero_and_root(void **state)
{
	(void)state;
	expect_error("$D/a *(fsid=0)", "exports:1: ", "fsid=0", "NFSv4 pseudo-root", NULL);
	expect_error("$D/a *(fsid=root)", "exports:1: ", "fsid=root", NULL);
	expect_error("$D/a *(fsid=6ba7b810-9dad-11d1-80b4-00c04fd430c8)", "exports:1: ",
		     "UUIDs are not supported", NULL);
}

static void test_err_sec(void **state)
{
	(void)state;
	expect_error("$D/a *(sec=krb5)", "exports:1: ", "sec=krb5", "only sec=sys", NULL);
}

static void test_err_relative_path(void **state)
{
	(void)state;
	expect_error("\n\nsrv/x *", "exports:3: ", "'srv/x' is not absolute", NULL);
	expect_error("-rw *", "exports:1: ", "'-rw' is not absolute", NULL);
}

static void test_err_dotdot_path(void **state)
{
	(void)state;
	expect_error("$D/a/../b *", "exports:1: ", "contains '..'", NULL);
	expect_error("$D/caf\xe9 *", "exports:1: ", "not valid UTF-8", NULL);
}

static void test_err_duplicate_path(void **state)
{
	(void)state;
	expect_error("$D/a *\n$D/b *\n$D/a/ 10.0.0.1\n", "exports:3: ", "duplicate export of $D/a",
		     "line 1", NULL);
}

static void test_err_duplicate_fsid(void **state)
{
	(void)state;
	expect_error("$D/a *(fsid=5)\n$D/b *(fsid=5)\n", "exports:2: ", "fsid=5",
		     "$D/a (line 1)", NULL);
}

static void test_err_conflicting_fsid_in_line(void **state)
{
	(void)state;
	expect_error("$D/a 10.0.0.1(fsid=5) \\\n  10.0.0.2(fsid=6)\n", "exports:2: ",
		     "fsid=6 conflicts with fsid=5", NULL);
}

static void test_err_path_does_not_exist(void **state)
{
	(void)state;
	expect_error("$D/a *\n$D/nonexistent *\n", "exports:2: ",
		     "export path $D/nonexistent does not exist", "No such file", NULL);
}

static void test_err_path_not_a_directory(void **state)
{
	(void)state;
	expect_error("$D/file *\n", "exports:1: ", "$D/file is not a directory", NULL);
}

static void test_err_no_client(void **state)
{
	(void)state;
	expect_error("$D/a\n", "exports:1: ", "no client for $D/a", NULL);
	expect_error("$D/a -rw # only defaults\n", "exports:1: ", "no client", NULL);
}

static void test_err_options_without_client(void **state)
{
	(void)state;
	expect_error("$D/a 10.0.0.1 (rw)\n", "exports:1: ", "options '(rw)' without a client name",
		     NULL);
}

static void test_err_text_after_parenthesis(void **state)
{
	(void)state;
	expect_error("$D/a 10.0.0.1(rw)x\n", "exports:1: ", "unexpected text after ')'", NULL);
	/* a continuation joins: no space, so the next client sticks to ')' */
	expect_error("$D/a 10.0.0.1(rw)\\\n10.0.0.2\n", "exports:1: ", "unexpected text", NULL);
}

static void test_err_missing_parenthesis(void **state)
{
	(void)state;
	expect_error("$D/a *\n$D/b 10.0.0.1(rw,sync\n", "exports:2: ", "missing ')'", NULL);
	expect_error("$D/a 10.0.0.1(rw(x))\n", "exports:1: ", "nested '('", NULL);
	expect_error("$D/a 10.0.0.1)\n", "exports:1: ", "')' without '('", NULL);
}

static void test_err_unterminated_quote(void **state)
{
	(void)state;
	expect_error("\n\"$D/with space *\n", "exports:2: ", "missing closing '\"'", NULL);
}

static void test_err_default_block_not_after_path(void **state)
{
	(void)state;
	expect_error("$D/a 10.0.0.1 -rw\n", "exports:1: ", "'-rw' must come right after the path",
		     NULL);
}

static void test_err_bad_network(void **state)
{
	(void)state;
	expect_error("$D/a 10.0.0.0/33", "exports:1: ", "'10.0.0.0/33'", "larger than 32", NULL);
	expect_error("$D/a fd00::/129", "exports:1: ", "larger than 128", NULL);
	expect_error("$D/a 10.0.0.0/x", "exports:1: ", "'x' is not a prefix length or a netmask",
		     NULL);
	expect_error("$D/a 10.0.0/8", "exports:1: ", "'10.0.0' is not an IPv4 or IPv6 address",
		     NULL);
	expect_error("$D/a fd00::/255.0.0.0", "exports:1: ", "is not a prefix length", NULL);
}

static void test_err_noncontiguous_netmask(void **state)
{
	(void)state;
	expect_error("$D/a 10.0.0.0/255.0.255.0", "exports:1: ", "netmask 255.0.255.0 is not "
		     "contiguous", NULL);
}

static void test_err_bad_address(void **state)
{
	(void)state;
	expect_error("$D/a 10.1", "exports:1: ", "'10.1' is not a valid IPv4 address", NULL);
	expect_error("$D/a 300.1.1.1", "exports:1: ", "'300.1.1.1' is not a valid IPv4", NULL);
	expect_error("$D/a fe80::1%eth0", "exports:1: ", "not a valid IPv6 address", NULL);
	expect_error("$D/a host!name", "exports:1: ", "'host!name' is not a valid host name", NULL);
}

static void test_err_unresolvable_host(void **state)
{
	(void)state;
	expect_error("\n$D/a 10.0.0.1 no-such-host.invalid(rw)\n", "exports:2: ",
		     "host name 'no-such-host.invalid' does not resolve", NULL);
}

static void test_err_unsupported_client_kinds(void **state)
{
	(void)state;
	expect_error("$D/a @trusted", "exports:1: ", "netgroups are not supported", NULL);
	expect_error("$D/a *.example.com", "exports:1: ", "wildcard host names are not supported",
		     NULL);
	expect_error("$D/a gss/krb5", "exports:1: ", "gss clients are not supported", NULL);
}

static void test_err_line_number_after_continuation(void **state)
{
	(void)state;
	/* the message names the physical line of the offending token */
	expect_error("$D/a 10.0.0.1 \\\n   10.0.0.2 \\\n   10.0.0.3(nope)\n", "exports:3: ",
		     "unknown option 'nope'", NULL);
}

static void test_err_name_for_messages(void **state)
{
	(void)state;
	struct exports *e = NULL;
	char *t = subst("$D/a *(zzz)");
	assert_int_equal(exports_parse_string(t, "/etc/presto/exports", &e, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "/etc/presto/exports:1: unknown option 'zzz'");
	/* a short or absent error buffer is fine */
	char small[8];
	assert_int_equal(exports_parse_string(t, "x", &e, small, sizeof(small)), -EINVAL);
	assert_int_equal(strlen(small), 7);
	assert_int_equal(exports_parse_string(t, "x", &e, NULL, 0), -EINVAL);
	free(t);
}

/* ---- files --------------------------------------------------------------------- */

static void test_parse_file(void **state)
{
	(void)state;
	char path[128];
	struct exports *e = NULL;
	snprintf(path, sizeof(path), "%s/exports", root);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "# test\n%s/a 127.0.0.1(rw,insecure,no_root_squash)\n%s/b *(bad)\n", root, root);
	fclose(f);
	assert_int_equal(exports_parse_file(path, &e, err, sizeof(err)), -EINVAL);
	char want[256];
	snprintf(want, sizeof(want), "%s:3: unknown option 'bad'", path);
	assert_string_equal(err, want);
	f = fopen(path, "w");
	fprintf(f, "# test\n%s/a 127.0.0.1(rw,insecure,no_root_squash)\n", root);
	fclose(f);
	assert_int_equal(exports_parse_file(path, &e, err, sizeof(err)), 0);
	assert_int_equal(e->n, 1);
	assert_true(e->v[0].clients[0].opts.rw);
	exports_free(e);
	unlink(path);
}

static void test_parse_file_missing(void **state)
{
	(void)state;
	struct exports *e = (struct exports *)1;
	assert_int_equal(exports_parse_file("/nonexistent/exports", &e, err, sizeof(err)), -ENOENT);
	assert_null(e);
	assert_non_null(strstr(err, "/nonexistent/exports: cannot open"));
}

static void test_parse_file_nul_byte(void **state)
{
	(void)state;
	char path[128];
	struct exports *e = NULL;
	snprintf(path, sizeof(path), "%s/exports-nul", root);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fwrite("# x\n/ *\0\n", 1, 9, f);
	fclose(f);
	assert_int_equal(exports_parse_file(path, &e, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: NUL byte"));
	unlink(path);
}

/* the shipped example must be valid: only the absence of its directory may stop it here */
static void test_example_file(void **state)
{
	(void)state;
	struct exports *e = NULL;
	int rc = exports_parse_file("etc/exports", &e, err, sizeof(err));
	if (rc == -ENOENT && access("etc/exports", F_OK) != 0)
		skip(); /* not run from the top of the tree */
	if (rc == 0) {
		assert_non_null(exports_find_path(e, "/srv/presto/export"));
		exports_free(e);
		return;
	}
	if (rc != -EINVAL || !strstr(err, "/srv/presto/export does not exist"))
		print_error("etc/exports: %s\n", err);
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(err, "/srv/presto/export does not exist"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_opt_rw_ro),
		cmocka_unit_test(test_opt_squash),
		cmocka_unit_test(test_opt_all_squash_wins_over_no_root_squash),
		cmocka_unit_test(test_opt_anonuid_anongid),
		cmocka_unit_test(test_opt_secure_insecure),
		cmocka_unit_test(test_opt_sync_async),
		cmocka_unit_test(test_opt_presto_nopresto),
		cmocka_unit_test(test_opt_fsid),
		cmocka_unit_test(test_opt_ignored),
		cmocka_unit_test(test_opt_whitespace_in_parentheses),
		cmocka_unit_test(test_default_options_block),
		cmocka_unit_test(test_comments_and_blank_lines),
		cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_continuation_lines),
		cmocka_unit_test(test_quoted_paths),
		cmocka_unit_test(test_path_normalised),
		cmocka_unit_test(test_id_derived_from_path),
		cmocka_unit_test(test_match_ipv4),
		cmocka_unit_test(test_match_ipv6),
		cmocka_unit_test(test_match_cidr_ipv4),
		cmocka_unit_test(test_match_cidr_ipv6),
		cmocka_unit_test(test_match_netmask),
		cmocka_unit_test(test_match_wildcard),
		cmocka_unit_test(test_match_hostname_localhost),
		cmocka_unit_test(test_match_mapped_client_matches_ipv4_spec),
		cmocka_unit_test(test_match_mapped_spec_matches_ipv4_client),
		cmocka_unit_test(test_match_first_in_line_order),
		cmocka_unit_test(test_match_other_family),
		cmocka_unit_test(test_port_ok),
		cmocka_unit_test(test_find_path_and_id),
		cmocka_unit_test(test_format_opts),
		cmocka_unit_test(test_free_null),
		cmocka_unit_test(test_err_unknown_option),
		cmocka_unit_test(test_err_option_value),
		cmocka_unit_test(test_err_fsid_zero_and_root),
		cmocka_unit_test(test_err_sec),
		cmocka_unit_test(test_err_relative_path),
		cmocka_unit_test(test_err_dotdot_path),
		cmocka_unit_test(test_err_duplicate_path),
		cmocka_unit_test(test_err_duplicate_fsid),
		cmocka_unit_test(test_err_conflicting_fsid_in_line),
		cmocka_unit_test(test_err_path_does_not_exist),
		cmocka_unit_test(test_err_path_not_a_directory),
		cmocka_unit_test(test_err_no_client),
		cmocka_unit_test(test_err_options_without_client),
		cmocka_unit_test(test_err_text_after_parenthesis),
		cmocka_unit_test(test_err_missing_parenthesis),
		cmocka_unit_test(test_err_unterminated_quote),
		cmocka_unit_test(test_err_default_block_not_after_path),
		cmocka_unit_test(test_err_bad_network),
		cmocka_unit_test(test_err_noncontiguous_netmask),
		cmocka_unit_test(test_err_bad_address),
		cmocka_unit_test(test_err_unresolvable_host),
		cmocka_unit_test(test_err_unsupported_client_kinds),
		cmocka_unit_test(test_err_line_number_after_continuation),
		cmocka_unit_test(test_err_name_for_messages),
		cmocka_unit_test(test_parse_file),
		cmocka_unit_test(test_parse_file_missing),
		cmocka_unit_test(test_parse_file_nul_byte),
		cmocka_unit_test(test_example_file),
	};
	return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
