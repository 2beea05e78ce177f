/*
 * rpcb.h -- registration of presto-nfsd's programs with the local rpcbind
 * (libtirpc rpcb_set/rpcb_unset): NFS 100003 v3 and MOUNT 100005 v1, v3, on
 * the tcp or tcp6 transport of each listener.
 */
#ifndef PRESTO_RPCB_H
#define PRESTO_RPCB_H

#include "nfsd/rpc.h"

/* rpcb_register -- register prog/vers at the address of l. Returns 0 or
 * -errno (rpcbind not running: -ECONNREFUSED). */
int rpcb_register(unsigned long prog, unsigned long vers, const struct rpc_listen *l);
/* rpcb_unregister_all -- undo every registration made. */
void rpcb_unregister_all(void);

#endif
