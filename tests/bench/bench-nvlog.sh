#!/bin/sh
# bench-nvlog.sh -- `make bench`: the NVRAM log's append+persist latency
# (128 B, 4 KiB, 64 KiB; 1 and 8 threads) on /dev/shm with and without
# PMEM_IS_PMEM_FORCE=1 and on a disk file, beside pwrite+fdatasync of the same
# sizes on the same disk, in one run of `presto-log bench`.
# PRESTO_BENCH_DISK names the disk directory (default /var/tmp).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
: "${PRESTO_BIN:=$top/bin}"
: "${PRESTO_RESULTS:=$top/bench/results}"
disk=${PRESTO_BENCH_DISK:-/var/tmp}
mkdir -p "$PRESTO_RESULTS"
exec "$PRESTO_BIN/presto-log" bench "$disk" --json "$PRESTO_RESULTS/nvlog.json"
