#!/bin/sh
# run.sh -- run every test of presto-nfs and print one closing line
# "N passed, N failed".
#
# Test executables live under $PRESTO_TESTBIN/<suite>/ (built by make); test
# scripts are tests/<suite>/test-*.sh. Each prints cmocka's summary lines
# ("[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)") or a plain
# "N passed, N failed" line; a program that dies without a summary counts as
# one failure. TESTS="unit integration" limits the suites run.
#
# rpcbind is started here when none runs (and stopped at the end); an rpcbind
# that was already running is left alone.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
: "${PRESTO_BIN:=$top/bin}"
: "${PRESTO_TESTBIN:=$top/build/default/tests}"
export PRESTO_BIN PRESTO_TESTBIN PRESTO_TOP="$top"
suites=${TESTS:-"unit integration admin cthon crash kernel"}
logdir=${PRESTO_TESTLOG:-$top/build/test-logs}
mkdir -p "$logdir"

started_rpcbind=""
if ! pgrep -x rpcbind >/dev/null 2>&1; then
	mkdir -p /run/rpcbind
	rpcbind -f -w >/dev/null 2>&1 &
	started_rpcbind=$!
	i=0
	while [ $i -lt 50 ] && ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; do
		sleep 0.1; i=$((i + 1))
	done
fi
cleanup() {
	[ -n "$started_rpcbind" ] && kill "$started_rpcbind" 2>/dev/null
	started_rpcbind=""
}
trap cleanup EXIT INT TERM

passed=0
failed=0
failed_names=""

# count LOG NAME RC -- add the summary of one test program's output
count() {
	log=$1 name=$2 rc=$3
	p=$(sed -n -e 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' \
	    -e 's/^\([A-Za-z_-]*: \)\{0,1\}\([0-9][0-9]*\) passed, [0-9][0-9]* failed.*/\2/p' "$log" |
	    awk '{s += $1} END {print s + 0}')
	f=$(sed -n -e 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' \
	    -e 's/^\([A-Za-z_-]*: \)\{0,1\}[0-9][0-9]* passed, \([0-9][0-9]*\) failed.*/\2/p' "$log" |
	    awk '{s += $1} END {print s + 0}')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "  $name exited with status $rc without reporting a failure: counted as one" >&2
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -gt 0 ] && failed_names="$failed_names $name"
	echo "== $name: $p passed, $f failed (log: $log)"
}

for suite in $suites; do
	for t in "$PRESTO_TESTBIN/$suite"/*; do
		[ -f "$t" ] && [ -x "$t" ] || continue
		name="$suite/$(basename "$t")"
		log="$logdir/$suite-$(basename "$t").log"
		echo "-- $name"
		( cd "$top" && timeout "${PRESTO_TEST_TIMEOUT:-600}" "$t" ) >"$log" 2>&1
		count "$log" "$name" $?
		[ -n "${VERBOSE:-}" ] && cat "$log"
	done
	for t in "$top/tests/$suite"/test-*.sh; do
		[ -f "$t" ] || continue
		name="$suite/$(basename "$t" .sh)"
		log="$logdir/$suite-$(basename "$t" .sh).log"
		echo "-- $name"
		( cd "$top" && timeout "${PRESTO_TEST_TIMEOUT:-600}" sh "$t" ) >"$log" 2>&1
		count "$log" "$name" $?
		[ -n "${VERBOSE:-}" ] && cat "$log"
	done
done

if [ -n "$failed_names" ]; then
	echo "failed:$failed_names"
	for n in $failed_names; do
		l="$logdir/$(echo "$n" | tr / -).log"
		echo "---- tail of $l"
		tail -n 40 "$l"
	done
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
