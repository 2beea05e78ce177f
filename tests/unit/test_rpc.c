/*
 * test_rpc.c -- nfsd/rpc.h, the parts that need no client: rpc_listen_addr
 * (numeric IPv4 and IPv6, bracketed IPv6, names and everything else refused,
 * the port range), and rpc_add_listener's ephemeral port written back.
 * The transport itself (records, replies, throttling) is driven by the
 * integration tests with a real client.
 */
#include "nfsd/rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

/* expect_v4 -- ADDR parses to the IPv4 address WANT (dotted) and PORT. */
static void expect_v4(const char *addr, unsigned port, const char *want)
{
	struct rpc_listen l;
	struct in_addr a;

	if (rpc_listen_addr(addr, port, &l) != 0)
		fail_msg("\"%s\" port %u refused", addr, port);
	const struct sockaddr_in *s = (const struct sockaddr_in *)&l.addr;
	assert_int_equal(s->sin_family, AF_INET);
	assert_int_equal(l.addrlen, sizeof(struct sockaddr_in));
	assert_int_equal(ntohs(s->sin_port), port);
	assert_int_equal(inet_pton(AF_INET, want, &a), 1);
	assert_memory_equal(&s->sin_addr, &a, sizeof(a));
	/* nothing but the sockaddr_in is set */
	static const uint8_t zero[sizeof(l.addr)];
	assert_memory_equal((uint8_t *)&l.addr + sizeof(*s), zero, sizeof(l.addr) - sizeof(*s));
	assert_memory_equal(s->sin_zero, zero, sizeof(s->sin_zero));
}

static void expect_v6(const char *addr, unsigned port, const char *want)
{
	struct rpc_listen l;
	struct in6_addr a;

	if (rpc_listen_addr(addr, port, &l) != 0)
		fail_msg("\"%s\" port %u refused", addr, port);
	const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&l.addr;
	assert_int_equal(s->sin6_family, AF_INET6);
	assert_int_equal(l.addrlen, sizeof(struct sockaddr_in6));
	assert_int_equal(ntohs(s->sin6_port), port);
	assert_int_equal(inet_pton(AF_INET6, want, &a), 1);
	assert_memory_equal(&s->sin6_addr, &a, sizeof(a));
	assert_int_equal(s->sin6_flowinfo, 0);
	assert_int_equal(s->sin6_scope_id, 0);
}

static void expect_refused(const char *addr, unsigned port)
{
	struct rpc_listen l;
	static const uint8_t zero[sizeof(l)];

	memset(&l, 0xa5, sizeof(l));
	if (rpc_listen_addr(addr, port, &l) != -EINVAL)
		fail_msg("\"%s\" port %u was accepted", addr, port);
	/* a refused address leaves nothing half-filled behind */
	assert_memory_equal(&l, zero, sizeof(l));
}

static void test_ipv4(void **state)
{
	(void)state;

	expect_v4("127.0.0.1", 2049, "127.0.0.1");
	expect_v4("0.0.0.0", 20048, "0.0.0.0");
	expect_v4("255.255.255.255", 1, "255.255.255.255");
	expect_v4("10.1.2.3", 65535, "10.1.2.3");
	expect_v4("192.168.0.1", 0, "192.168.0.1");
}

static void test_ipv6(void **state)
{
	(void)state;

	expect_v6("::", 2049, "::");
	expect_v6("::1", 2049, "::1");
	expect_v6("fe80::1", 20048, "fe80::1");
	expect_v6("2001:db8::dead:beef", 0, "2001:db8::dead:beef");
	expect_v6("2001:0db8:0000:0000:0000:0000:0000:0001", 2049, "2001:db8::1");
	expect_v6("FD00::A", 2049, "fd00::a");
	expect_v6("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", 65535,
		  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	/* a v4-mapped address is an IPv6 listener, not an IPv4 one */
	expect_v6("::ffff:127.0.0.1", 2049, "::ffff:127.0.0.1");
}

static void test_ipv6_bracketed(void **state)
{
	(void)state;

	expect_v6("[::1]", 2049, "::1");
	expect_v6("[::]", 0, "::");
	expect_v6("[2001:db8::1]", 20048, "2001:db8::1");
	expect_v6("[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]", 1,
		  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	/* unbalanced, doubled or empty brackets */
	expect_refused("[::1", 2049);
	expect_refused("::1]", 2049);
	expect_refused("[[::1]]", 2049);
	expect_refused("[]", 2049);
	expect_refused("[", 2049);
	expect_refused("]", 2049);
	/* a port in the text is not ours to parse */
	expect_refused("[::1]:2049", 2049);
}

static void test_names_refused(void **state)
{
	(void)state;

	/* no name resolution, ever (presto.conf: "Never resolved by name") */
	expect_refused("localhost", 2049);
	expect_refused("[localhost]", 2049);
	expect_refused("ip6-localhost", 2049);
	expect_refused("example.com", 2049);
	expect_refused("*", 2049);
	expect_refused("any", 2049);
}

static void test_malformed_refused(void **state)
{
	static const char *bad[] = {
		"", " ", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-4", "01.2.3.4", "0x7f.0.0.1",
		"127.1", "127.0.0.1:2049", " 127.0.0.1", "127.0.0.1 ", "127.0.0.1,::1",
		"10.0.0.0/8", "::1::", "1:2:3:4:5:6:7:8:9", "12345::", "fe80::1%lo", "fe80::1%1",
		":::", "::g",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused(bad[i], 2049);

	/* long text: bracketed, and not */
	char big[300];
	memset(big, ':', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_refused(big, 2049);
	big[0] = '[';
	big[sizeof(big) - 2] = ']';
	expect_refused(big, 2049);
	/* 64 characters inside brackets: one more than the copy holds (ASan
	 * would see an overrun) */
	char b64[67];
	b64[0] = '[';
	memcpy(b64 + 1, "0000:0000:0000:0000:0000:0000:0000:0001", 39);
	memset(b64 + 40, ' ', 25);
	b64[65] = ']';
	b64[66] = '\0';
	expect_refused(b64, 2049);
}

static void test_port_range(void **state)
{
	(void)state;

	expect_v4("127.0.0.1", 0, "127.0.0.1");
	expect_v4("127.0.0.1", 65535, "127.0.0.1");
	expect_v6("::1", 65535, "::1");
	expect_refused("127.0.0.1", 65536);
	expect_refused("::1", 65536);
	expect_refused("[::1]", 70000);
	expect_refused("127.0.0.1", UINT_MAX);
	expect_refused("127.0.0.1", 1u << 16 | 2049);	/* not truncated to 2049 */
}

/* ---- rpc_add_listener ---- */

static void dispatch_none(struct rpc_req *req)
{
	rpc_drop(req);
}

static void connect_to(const struct rpc_listen *l)
{
	int s = socket(l->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	if (connect(s, (const struct sockaddr *)&l->addr, l->addrlen) != 0)
		fail_msg("connect: %s", strerror(errno));
	close(s);
}

static void test_listener_ephemeral_port(void **state)
{
	struct rpc_listen l4, l6, dup;
	(void)state;

	assert_int_equal(rpc_init(1, dispatch_none, NULL), 0);
	assert_int_equal(rpc_listen_addr("127.0.0.1", 0, &l4), 0);
	assert_int_equal(rpc_add_listener(&l4), 0);
	unsigned p4 = ntohs(((struct sockaddr_in *)&l4.addr)->sin_port);
	assert_true(p4 > 0);
	connect_to(&l4);

	/* the same port again: refused (EADDRINUSE), nothing added */
	assert_int_equal(rpc_listen_addr("127.0.0.1", p4, &dup), 0);
	assert_int_equal(rpc_add_listener(&dup), -EADDRINUSE);

	/* IPv6 on the same port number (v6only: no clash with the IPv4
	 * listener), when this namespace has ::1 */
	assert_int_equal(rpc_listen_addr("::1", p4, &l6), 0);
	int rc = rpc_add_listener(&l6);
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT)
		return;
	assert_int_equal(rc, 0);
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&l6.addr)->sin6_port), p4);
	connect_to(&l6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_ipv6_bracketed),
		cmocka_unit_test(test_names_refused),
		cmocka_unit_test(test_malformed_refused),
		cmocka_unit_test(test_port_range),
		cmocka_unit_test(test_listener_ephemeral_port),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
