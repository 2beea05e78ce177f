#!/bin/sh
# test-powercut-beside-kill.sh -- the power-cut test while another crash_nfs
# runs beside it in kill mode, as when two test runs share a machine.
#
# kill mode starts servers "after a fake reboot" in a mount namespace of
# their own (enter_boot), made while the power-cut image is mounted. Such a
# namespace must not keep that filesystem alive after test-powercut's
# umount: the copy is then written under a live filesystem (dd onto the
# loop device), and the next mount finds that filesystem, not the copy
# (ext4: "Spotted dirty metadata buffer", inodes "doubly allocated", xattr
# blocks with invalid headers; the replay then fails with EUCLEAN).
#
# Needs what test-powercut.sh needs (root, losetup, mkfs.ext4, fsfreeze).
# Extra arguments go to test-powercut.sh (e.g. --seed S).
set -u
. "$(dirname "$0")/lib.sh"
crash_need_root test-powercut-beside-kill ""
crash_need_built test-powercut-beside-kill "$prog"

log=$(mktemp /tmp/presto-beside-kill-XXXXXX)
"$prog" --mode kill --kills 1000 --time-limit 120 --replay mixed --seed 4242 >"$log" 2>&1 &
kpid=$!
cleanup() {
	kill "$kpid" 2>/dev/null
	wait "$kpid" 2>/dev/null
	rm -f "$log"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

sleep 2	# the kill run's first fake reboots
out=$(sh "$top/tests/crash/test-powercut.sh" --cycles 4 "$@" 2>&1)
rc=$?
echo "$out" | grep -v "^presto-nfsd: replay of LSN"
if [ $rc -eq 0 ] && echo "$out" | grep -q "^test-powercut: skipped"; then
	echo "test-powercut-beside-kill: skipped (test-powercut.sh was)"
	exit 0
fi
if [ $rc -eq 0 ] && echo "$out" | grep -q "crash-powercut: 1 passed, 0 failed"; then
	echo "test-powercut-beside-kill: 1 passed, 0 failed"
	exit 0
fi
echo "test-powercut-beside-kill: 0 passed, 1 failed"
exit 1
