#!/bin/sh
# test-powercut-interrupted.sh -- test-powercut.sh stopped by SIGTERM (as
# run.sh's timeout or a ^C stops it) at a few moments of its run must leave
# nothing behind: no mount (the image's, the shared bind mount of its
# directory), no loop device on its image, no directory. The server it
# killed can hold the loop device a moment after crash_nfs is gone; the
# cleanup must not give up on the bind mount then.
#
# Needs what test-powercut.sh needs (root, losetup, mkfs.ext4, fsfreeze).
set -u
. "$(dirname "$0")/lib.sh"
crash_need_root test-powercut-interrupted ""
for c in losetup mkfs.ext4 fsfreeze mount umount timeout; do
	if ! command -v $c >/dev/null 2>&1; then
		echo "test-powercut-interrupted: skipped ($c not installed)"
		exit 0
	fi
done

log=$(mktemp /tmp/presto-pc-interrupted-XXXXXX)
trap 'rm -f "$log"' EXIT
failed=0
for t in 3.5 4.5 5 5.5 6.5; do
	timeout -s TERM "$t" sh "$top/tests/crash/test-powercut.sh" --cycles 20 >"$log" 2>&1
	tmp=$(sed -n 's/^test-powercut: \(.*\)\/export.img on .*/\1/p' "$log")
	if [ -z "$tmp" ]; then
		if grep -q "^test-powercut: skipped" "$log"; then
			echo "test-powercut-interrupted: skipped (test-powercut.sh was)"
			exit 0
		fi
		echo "interrupted after $t s before its set-up was done (no leftover to check)"
		continue
	fi
	left=""
	grep -q " $tmp[ /]" /proc/self/mountinfo && left="$left mount"
	losetup -a 2>/dev/null | grep -q "($tmp/" && left="$left loop-device"
	[ -e "$tmp" ] && left="$left directory"
	if [ -n "$left" ]; then
		echo "FAIL: test-powercut.sh stopped after $t s left behind:$left ($tmp)"
		grep " $tmp[ /]" /proc/self/mountinfo
		failed=$((failed + 1))
		# undo it here, so that the next round and other runs are not
		# affected (the loop device lets go by itself within seconds)
		i=0
		while [ $i -lt 100 ] && grep -q " $tmp[ /]" /proc/self/mountinfo; do
			umount "$tmp" 2>/dev/null || sleep 0.1
			i=$((i + 1))
		done
		rm -rf "$tmp"
	else
		echo "stopped after $t s: nothing left behind"
	fi
done
if [ $failed -eq 0 ]; then
	echo "test-powercut-interrupted: 1 passed, 0 failed"
	exit 0
fi
echo "test-powercut-interrupted: 0 passed, 1 failed"
exit 1
