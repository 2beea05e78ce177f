#!/bin/sh
# guest-init.sh -- /init of the kernel-client test guest (tests/kernel).
#
# Runs as PID 1 from the initramfs built by build-guest.sh: mounts /proc, /sys,
# /dev and /tmp, loads the virtio-net and NFSv3 modules in modules.load order,
# brings up eth0 as 10.0.2.15/24 (qemu's user network; the host is 10.0.2.2),
# runs /bin/workload.sh, and powers the machine off. Parameters come from the
# kernel command line:
#   nfsport=P mntport=M   the server's NFS and MOUNT ports (TCP) on the host
#   export=/path          the export to mount
#   mode=M                the workload mode (see workload.sh), default "basic"
#   mountopts=a,b         extra mount options (comma separated)
# Every line the host must read starts with "PRESTO-KERNEL".
export PATH=/bin:/sbin
export TZ=UTC0 HOME=/root

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o size=512m,mode=1777 tmpfs /tmp

nfsport="" mntport="" export="" mode=basic mountopts=""
for w in $(cat /proc/cmdline); do
	case "$w" in
	nfsport=*) nfsport=${w#*=} ;;
	mntport=*) mntport=${w#*=} ;;
	export=*) export=${w#*=} ;;
	mode=*) mode=${w#*=} ;;
	mountopts=*) mountopts=${w#*=} ;;
	esac
done

echo "PRESTO-KERNEL: guest up, kernel $(uname -r), $(($(cut -d' ' -f1 /proc/uptime | cut -d. -f1))) s after boot"

bad=""
while read -r m; do
	[ -n "$m" ] || continue
	if ! out=$(insmod "/lib/modules/$m" 2>&1); then
		echo "PRESTO-KERNEL: insmod $m failed: $out"
		bad=1
	fi
done </lib/modules/modules.load

ip link set lo up
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up || bad=1

if [ -n "$bad" ] || [ -z "$nfsport" ] || [ -z "$mntport" ] || [ -z "$export" ]; then
	echo "PRESTO-KERNEL: guest set-up failed (nfsport=$nfsport mntport=$mntport export=$export)"
	ip addr 2>&1
	echo "PRESTO-KERNEL-RESULT passed=0 failed=1"
else
	NFSPORT=$nfsport MNTPORT=$mntport EXPORT=$export MODE=$mode MOUNTOPTS=$mountopts \
		sh /bin/workload.sh
fi

sync
echo "PRESTO-KERNEL: powering off"
poweroff -f
sleep 5
reboot -f   # qemu runs with -no-reboot: this ends it too
