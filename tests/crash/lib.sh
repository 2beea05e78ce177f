# lib.sh -- sourced by the crash suite's scripts (tests/crash/test-*.sh):
# where the tree and the programs are, and the checks every script makes.
# Sets top, PRESTO_BIN and PRESTO_TESTBIN (exported: crash_nfs and the
# scripts a script runs read them) and prog (crash_nfs).
top=$(cd "$(dirname "$0")/../.." && pwd)
: "${PRESTO_BIN:=$top/bin}"
: "${PRESTO_TESTBIN:=$top/build/default/tests}"
export PRESTO_BIN PRESTO_TESTBIN
prog=$PRESTO_TESTBIN/crash/crash_nfs

# crash_need_root NAME WHY -- skip (exit 0) unless run as root
crash_need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "$1: skipped (needs root$2)"
		exit 0
	fi
}

# crash_need_built NAME PROGRAM... -- a failure (exit 1) when one is missing
crash_need_built() {
	_cn=$1
	shift
	for _cp in "$@"; do
		if [ ! -x "$_cp" ]; then
			echo "$_cn: $_cp not built"
			echo "0 passed, 1 failed"
			exit 1
		fi
	done
}

# crash_need_cmds NAME COMMAND... -- skip (exit 0) when one is not installed
crash_need_cmds() {
	_cn=$1
	shift
	for _cp in "$@"; do
		if ! command -v "$_cp" >/dev/null 2>&1; then
			echo "$_cn: skipped ($_cp not installed)"
			exit 0
		fi
	done
}
