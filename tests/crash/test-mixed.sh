#!/bin/sh
# test-mixed.sh -- crash_nfs with presto-on and presto-off clients side by
# side (--presto mixed): the export's 127.0.0.1 client line has presto on,
# its ::1 line says nopresto; every client holds a connection over each and
# switches between them now and then, so the log holds records of both kinds
# (presto off: "through" records, flushed before the reply) for the same
# objects. The mixed scenarios, then SIGKILL at random moments (30 kills,
# about 15 s here; --time-limit bounds it), checked as strictly as with
# --presto on. Extra arguments go to crash_nfs (e.g. --seed S, --kills N).
set -u
. "$(dirname "$0")/lib.sh"
crash_need_built test-mixed "$prog"
exec "$prog" --mode scenarios,kill --presto mixed --kills 30 --time-limit 60 "$@"
