#!/bin/sh
# test-presto-cli.sh -- the presto command and the control socket against a
# running presto-nfsd (issue 5); the checks are in test_presto_cli.py (JSON
# answers are parsed, not grepped). Needs root, python3 and libnfs' nfs-cp.
top=${PRESTO_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
exec python3 "$top/tests/admin/test_presto_cli.py"
