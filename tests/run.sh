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
# The programs expected are the build's TEST_PROGS, relative to the test
# directory ("unit/test_fh crash/crash_nfs ..."): make test-only passes them
# in PRESTO_TESTPROGS; without it they are asked from make (`make -s
# test-progs`). Each of a suite's expected programs that is not there (or not
# executable) counts as one failure, named; an executable under
# $PRESTO_TESTBIN/<suite>/ that is not expected (left by an older build) is
# not run. Only when neither list can be had are the executables found run,
# with a warning that missing ones go unnoticed.
#
# rpcbind is started here when none runs (and stopped at the end); an rpcbind
# that was already running is left alone.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
: "${PRESTO_BIN:=$top/bin}"
: "${PRESTO_TESTBIN:=$top/build/default/tests}"
export PRESTO_BIN PRESTO_TESTBIN PRESTO_TOP="$top"
if [ -z "${PRESTO_TESTPROGS+set}" ]; then
	PRESTO_TESTPROGS=$(make -s --no-print-directory -C "$top" test-progs 2>/dev/null) || unset PRESTO_TESTPROGS
fi
if [ -z "${PRESTO_TESTPROGS+set}" ] || [ -z "$PRESTO_TESTPROGS" ]; then
	echo "run.sh: warning: no list of expected test programs (PRESTO_TESTPROGS, make test-progs):" \
	     "running the executables found; a missing one goes unnoticed" >&2
	unset PRESTO_TESTPROGS
fi
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
missing_names=""

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

# programs SUITE -- the suite's test programs to run, one path a line: the
# expected ones (the build's list), else the executables found
programs() {
	unset IFS	# a subshell: the caller splits the output at newlines
	if [ -n "${PRESTO_TESTPROGS+set}" ]; then
		for p in $PRESTO_TESTPROGS; do
			case $p in
			"$1"/*) echo "$PRESTO_TESTBIN/$p" ;;
			esac
		done | sort -u
		for t in "$PRESTO_TESTBIN/$1"/*; do
			[ -f "$t" ] && [ -x "$t" ] || continue
			case " $PRESTO_TESTPROGS " in
			*" $1/$(basename "$t") "*) ;;
			*) echo "  $1/$(basename "$t"): not one of the build's test programs: not run" >&2 ;;
			esac
		done
	else
		for t in "$PRESTO_TESTBIN/$1"/*; do
			[ -f "$t" ] && [ -x "$t" ] && echo "$t"
		done
	fi
}

nl='
'
for suite in $suites; do
	IFS=$nl
	for t in $(programs "$suite"); do
		unset IFS
		name="$suite/$(basename "$t")"
		if [ ! -f "$t" ] || [ ! -x "$t" ]; then
			log="$logdir/$suite-$(basename "$t").log"
			echo "-- $name"
			echo "$name: $t is missing (not built?): counted as one failure" | tee "$log" >&2
			failed=$((failed + 1))
			failed_names="$failed_names $name"
			missing_names="$missing_names $name"
			echo "== $name: 0 passed, 1 failed (missing)"
			continue
		fi
		log="$logdir/$suite-$(basename "$t").log"
		echo "-- $name"
		( cd "$top" && timeout "${PRESTO_TEST_TIMEOUT:-600}" "$t" ) >"$log" 2>&1
		count "$log" "$name" $?
		[ -n "${VERBOSE:-}" ] && cat "$log"
	done
	unset IFS
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
	[ -n "$missing_names" ] && echo "missing (expected, not built):$missing_names"
	for n in $failed_names; do
		l="$logdir/$(echo "$n" | tr / -).log"
		echo "---- tail of $l"
		tail -n 40 "$l"
	done
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
