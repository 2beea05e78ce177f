#!/bin/sh
# test-loopbin.sh -- kill mode with fake reboots while presto-nfsd lies on a
# filesystem of a loop device (a checkout or build directory on a mounted
# image, as on some CI machines). A fake reboot's mount namespace
# (crash_nfs enter_boot) lets go of other runs' loop-device filesystems
# (detach_loop_mounts), but never of one the server needs: its binary, its
# state directory, its export. Else the start after the fake reboot cannot
# exec the server ("No such file or directory") and every later start fails.
#
# Needs root, losetup, mkfs.ext4. Everything (mount, loop device, files) is
# undone on exit. Extra arguments go to crash_nfs (e.g. --seed S).
set -u
. "$(dirname "$0")/lib.sh"
crash_need_root test-loopbin " for losetup and mount"
crash_need_cmds test-loopbin losetup mkfs.ext4 mount umount
crash_need_built test-loopbin "$prog" "$PRESTO_BIN/presto-nfsd"

tmp=$(mktemp -d /tmp/presto-loopbin-XXXXXX)
mnt=$tmp/mnt
dev=""
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		umount "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
	dev=""
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

mkdir -p "$mnt"
truncate -s 32M "$tmp/bin.img"
if ! mkfs.ext4 -q -F "$tmp/bin.img" || ! dev=$(losetup -f --show "$tmp/bin.img") ||
   ! mount "$dev" "$mnt" || ! mkdir "$mnt/bin" || ! cp "$PRESTO_BIN/presto-nfsd" "$mnt/bin/"; then
	echo "test-loopbin: could not set up the server's binary on a loop device"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "test-loopbin: $mnt/bin/presto-nfsd on $dev"

# --replay mixed: a third of the restarts come after a fake reboot
PRESTO_BIN=$mnt/bin "$prog" --mode kill --kills 8 --time-limit 60 --replay mixed --seed 7 "$@"
