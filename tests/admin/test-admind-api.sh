#!/bin/sh
# test-admind-api.sh -- presto-admind's HTTP API against a live presto-nfsd
# (issue 6); the checks are in test_admind_api.py (answers are parsed: JSON
# and the Prometheus text format). The history's own rules (rollups,
# retention, migration) are tested by test_admind_db against a real SQLite
# file. Needs python3; the non-loopback part needs root (unshare -n).
top=${PRESTO_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
exec python3 "$top/tests/admin/test_admind_api.py"
