#!/bin/sh
# test-kernel-presto.sh -- issue 8's presto-on part: the same guest workload
# with an NVRAM log, then presto-nfsd is SIGKILLed and restarted (replaying
# its log onto the export, destager held so the log holds everything) while
# the guest keeps its hard mount, and the guest checks every file it wrote
# before the kill. See test-kernel.sh for the machinery.
PRESTO_KERNEL_PRESTO=on PRESTO_KERNEL_MODE=restart \
PRESTO_KERNEL_NFSD_ARGS="${PRESTO_KERNEL_NFSD_ARGS:---replay=always --no-destage}" \
	exec sh "$(dirname "$0")/test-kernel.sh"
