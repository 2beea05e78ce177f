/*
 * rpcb.c -- rpcbind registration (see rpcb.h).
 */
#include "nfsd/rpcb.h"

#include <errno.h>
#include <netconfig.h>
#include <rpc/rpc.h>
#include <string.h>

struct reg {
	unsigned long prog, vers;
	int family;
};

static struct reg regs[16];
static unsigned nregs;

int rpcb_register(unsigned long prog, unsigned long vers, const struct rpc_listen *l)
{
	const char *netid = l->addr.ss_family == AF_INET6 ? "tcp6" : "tcp";
	struct netconfig *nc = getnetconfigent(netid);
	struct netbuf nb;
	bool_t ok;

	if (!nc)
		return -ENOENT;
	nb.buf = (void *)&l->addr;
	nb.len = nb.maxlen = l->addrlen;
	/* a stale registration of a previous instance would make rpcb_set
	 * fail: replace it */
	rpcb_unset(prog, vers, nc);
	ok = rpcb_set(prog, vers, nc, &nb);
	freenetconfigent(nc);
	if (!ok)
		return -ECONNREFUSED;
	if (nregs < sizeof(regs) / sizeof(regs[0]))
		regs[nregs++] = (struct reg){ prog, vers, l->addr.ss_family };
	return 0;
}

void rpcb_unregister_all(void)
{
	for (unsigned i = 0; i < nregs; i++) {
		struct netconfig *nc = getnetconfigent(regs[i].family == AF_INET6 ? "tcp6" : "tcp");
		if (nc) {
			rpcb_unset(regs[i].prog, regs[i].vers, nc);
			freenetconfigent(nc);
		}
	}
	nregs = 0;
}
