#!/bin/sh
# run.sh -- `make bench`: run every tests/bench/bench-*.sh in turn.
# Benchmarks measure and print tables; they assert nothing about time.
# Results go to bench/results/*.json (not committed).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
: "${PRESTO_BIN:=$top/bin}"
: "${PRESTO_TESTBIN:=$top/build/default/tests}"
export PRESTO_BIN PRESTO_TESTBIN PRESTO_TOP="$top"
export PRESTO_RESULTS="$top/bench/results"
mkdir -p "$PRESTO_RESULTS"
rc=0
for b in "$top"/tests/bench/bench-*.sh; do
	[ -f "$b" ] || continue
	echo "## $(basename "$b" .sh)"
	sh "$b" || { echo "$(basename "$b"): failed (status $?)"; rc=1; }
	echo
done
exit $rc
