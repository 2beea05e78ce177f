#!/bin/sh
# test-powercut.sh -- issue 4's power-cut test: the export is an ext4 image on
# a loop device; crash_nfs --mode powercut freezes it (fsfreeze), copies the
# image and thaws it at a random moment of each cycle, later kills the server,
# writes the copy back and restarts it with --replay=always, then checks the
# tree and every held handle against the acknowledged operations.
#
# Needs root, losetup, mkfs.ext4, fsfreeze. Without them it says so and
# reports nothing. Everything (freeze, mount, loop device, files) is undone on
# exit, also on failure or a signal. Extra arguments go to crash_nfs
# (e.g. --presto off, --cycles 12, --seed S).
set -u
. "$(dirname "$0")/lib.sh"
crash_need_root test-powercut " for losetup, mount and fsfreeze"
crash_need_cmds test-powercut losetup mkfs.ext4 fsfreeze mount umount
crash_need_built test-powercut "$prog"

tmp=$(mktemp -d /tmp/presto-powercut-XXXXXX)
img=$tmp/export.img
copy=$tmp/copy.img
mnt=$tmp/mnt
dev=""
shared=""

cleanup() {
	fsfreeze -u "$mnt" 2>/dev/null
	if mountpoint -q "$mnt" 2>/dev/null; then
		umount "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
	dev=""
	if [ -n "$shared" ]; then
		# a server crash_nfs killed just now (stopped by a signal) can
		# hold the loop device, and the device the image in $tmp, for a
		# moment: wait for it, then let go of the mount lazily rather
		# than leave it
		i=0
		while ! umount "$tmp" 2>/dev/null; do
			i=$((i + 1))
			if [ $i -ge 100 ]; then
				umount -l "$tmp"
				break
			fi
			sleep 0.1
		done
	fi
	shared=""
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

mkdir -p "$mnt"
# $tmp a shared mount of its own, the image mounted under it: the mount
# namespaces of fake reboots (crash_nfs enter_boot, here or in a crash_nfs
# beside this test) are slaves of it, so the umount before a copy is written
# back reaches their copies too. A copy there that stayed would keep this
# filesystem alive, and the copy would be written under it.
if ! mount --bind "$tmp" "$tmp"; then
	echo "test-powercut: could not bind-mount $tmp"
	echo "0 passed, 1 failed"
	exit 1
fi
shared=1	# from here on the cleanup unmounts it
if ! mount --make-shared "$tmp"; then
	echo "test-powercut: could not make $tmp a shared mount"
	echo "0 passed, 1 failed"
	exit 1
fi
truncate -s 128M "$img"
if ! mkfs.ext4 -q -F "$img" || ! dev=$(losetup -f --show "$img") || ! mount "$dev" "$mnt"; then
	echo "test-powercut: could not set up an ext4 image on a loop device"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "test-powercut: $img on $dev mounted at $mnt"

"$prog" --mode powercut --export "$mnt" --loopdev "$dev" --image "$img" --copy "$copy" "$@"
