#!/bin/sh
# test-kernel.sh -- the real Linux kernel NFS client against our server
# (issue 8).
#
# Builds (or reuses) a qemu guest: a Debian kernel + busybox-static initramfs
# (build-guest.sh, cached in tests/kernel/build/), starts the server on
# 127.0.0.1 with an export of a fresh temp folder, boots the guest under qemu,
# and lets the guest mount the export with the kernel's NFSv3 client
# (10.0.2.2 in the guest is 127.0.0.1 here), run workload.sh, and power off.
# Every check is made in the guest; this script only counts its verdicts and
# ends with one line "kernel: N passed, N failed".
#
# Environment:
#   PRESTO_KERNEL_SERVER  presto (default): $PRESTO_BIN/presto-nfsd
#                         ganesha: NFS-Ganesha's VFS FSAL, a reference server
#   PRESTO_KERNEL_MODE    basic (default) | restart: also SIGKILL and restart
#                         the server under the guest's hard mount and check the
#                         files written before the kill (for presto on; later)
#   PRESTO_KERNEL_PRESTO  off (default) | on: presto-nfsd with an NVRAM log
#                         (--nvram TMP/nvram.log --nvram-size 64M), kept
#                         across the restart of PRESTO_KERNEL_MODE=restart
#   PRESTO_KERNEL_NFSD_ARGS  more presto-nfsd arguments (e.g. --replay=always
#                         --no-destage)
#   PRESTO_KERNEL_TIMEOUT bound on the whole test in seconds (default 240): a
#                         hung server fails the test, it does not hang CI
#   PRESTO_KERNEL_ACCEL   qemu accelerator: tcg (software emulation, default)
#                         or kvm (where nested KVM really works)
#   PRESTO_KERNEL_BUILD   build folder (default tests/kernel/build)
#   PRESTO_KERNEL_KEEP=1  keep the temp folder (export, logs) afterwards
#   PRESTO_KERNEL_GANESHA_PORT  first of four ports for Ganesha (default 20040)
#   PRESTO_BIN            where presto-nfsd is (default <top>/bin)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${PRESTO_BIN:=$top/bin}"
server=${PRESTO_KERNEL_SERVER:-presto}
mode=${PRESTO_KERNEL_MODE:-basic}
presto=${PRESTO_KERNEL_PRESTO:-off}
limit=${PRESTO_KERNEL_TIMEOUT:-240}
accel=${PRESTO_KERNEL_ACCEL:-tcg}
gport=${PRESTO_KERNEL_GANESHA_PORT:-20040}
t_start=$(date +%s)
deadline=$((t_start + limit))

say() { echo "kernel: $*"; }
# fail REASON: the test could not run to the guest's verdict
fail() {
	say "FAIL: $*"
	say "0 passed, 1 failed"
	exit 1
}
left() { echo $((deadline - $(date +%s))); }

case "$server" in presto | ganesha) ;; *) fail "PRESTO_KERNEL_SERVER=$server: want presto or ganesha" ;; esac
case "$mode" in basic | restart) ;; *) fail "PRESTO_KERNEL_MODE=$mode: want basic or restart" ;; esac
case "$presto" in on | off) ;; *) fail "PRESTO_KERNEL_PRESTO=$presto: want on or off" ;; esac

tmp=""
server_pid=""
qemu_pid=""
rpcbind_pid=""
# stop_qemu: qemu_pid is timeout's; qemu writes its own pid to qemu.pid
stop_qemu() {
	if [ -n "$tmp" ] && [ -s "$tmp/qemu.pid" ]; then
		p=$(cat "$tmp/qemu.pid")
		# only while that pid is still our qemu (its command line has $tmp)
		grep -q "$tmp" "/proc/$p/cmdline" 2>/dev/null && kill -9 "$p" 2>/dev/null
	fi
	[ -n "$qemu_pid" ] && kill -9 "$qemu_pid" 2>/dev/null
}
cleanup() {
	stop_qemu
	if [ -n "$server_pid" ]; then
		kill -TERM "$server_pid" 2>/dev/null
		i=0
		while kill -0 "$server_pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		kill -9 "$server_pid" 2>/dev/null
	fi
	[ -n "$rpcbind_pid" ] && kill "$rpcbind_pid" 2>/dev/null
	qemu_pid="" server_pid="" rpcbind_pid=""
	if [ -n "$tmp" ] && [ -z "${PRESTO_KERNEL_KEEP:-}" ]; then
		rm -rf "$tmp"
	elif [ -n "$tmp" ]; then
		echo "kernel: kept $tmp"
	fi
	tmp=""
}
trap cleanup EXIT
trap 'cleanup; exit 1' INT TERM HUP

# --- the guest --------------------------------------------------------------
say "building the guest (cached in ${PRESTO_KERNEL_BUILD:-tests/kernel/build})"
build=$(timeout -k 5 $((limit / 2)) sh "$here/build-guest.sh" | tail -1)
[ -n "$build" ] && [ -s "$build/kernel/vmlinuz" ] && [ -s "$build/initrd.img" ] ||
	fail "guest build failed (see the build-guest lines above)"
say "guest kernel: $(cat "$build/kernel/VERSION")"

tmp=$(mktemp -d /tmp/presto-kernel.XXXXXX) || fail "mktemp"
export_dir=$tmp/export
mkdir -p "$export_dir" "$tmp/state"
chmod 0777 "$export_dir"
console=$tmp/console.log
slog=$tmp/server.log

# --- the server ---------------------------------------------------------------
nfsport="" mntport=""

# wait_port PORT SECONDS: until something listens on 127.0.0.1:PORT (TCP)
wait_port() {
	i=0
	while [ $i -lt $(($2 * 10)) ]; do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

start_presto() { # [NFSPORT MNTPORT]: start presto-nfsd, set nfsport/mntport
	bin=$PRESTO_BIN/presto-nfsd
	[ -x "$bin" ] || fail "no $bin (build it with make, or set PRESTO_BIN)"
	echo "$export_dir 127.0.0.1(rw,insecure,no_root_squash)" >"$tmp/exports"
	: >"$tmp/presto.out"
	nvram=""
	[ "$presto" = on ] && nvram="--nvram $tmp/nvram.log --nvram-size 64M"
	# shellcheck disable=SC2086 # word splitting of the optional arguments
	"$bin" --exports "$tmp/exports" --state-dir "$tmp/state" --bind 127.0.0.1 \
		--nfs-port "${1:-0}" --mount-port "${2:-0}" --no-rpcbind --foreground \
		$nvram ${PRESTO_KERNEL_NFSD_ARGS:-} >"$tmp/presto.out" 2>>"$slog" &
	server_pid=$!
	i=0
	while [ $i -lt 200 ]; do
		line=$(grep -m1 '^presto-nfsd: ready ' "$tmp/presto.out" 2>/dev/null)
		[ -n "$line" ] && break
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	cat "$tmp/presto.out" >>"$slog"
	[ -n "$line" ] || { show_server_log; fail "presto-nfsd printed no ready line in 20 s"; }
	nfsport=$(echo "$line" | sed -n 's/.* nfs=\([0-9][0-9]*\).*/\1/p')
	mntport=$(echo "$line" | sed -n 's/.* mount=\([0-9][0-9]*\).*/\1/p')
	[ -n "$nfsport" ] && [ -n "$mntport" ] || fail "cannot read ports from '$line'"
}

start_ganesha() { # start NFS-Ganesha on fixed ports $gport..$gport+3
	command -v ganesha.nfsd >/dev/null ||
		PRESTO_EXTRA_PKGS="nfs-ganesha nfs-ganesha-vfs" sh "$top/appliance/deps.sh" ||
		fail "cannot install nfs-ganesha"
	if ! pgrep -x rpcbind >/dev/null 2>&1; then
		# Ganesha 4.3 registers with rpcbind; start one only if none runs
		mkdir -p /run/rpcbind
		rpcbind -f -w >/dev/null 2>&1 &
		rpcbind_pid=$!
		sleep 0.5
	fi
	nfsport=$gport mntport=$((gport + 1))
	mkdir -p "$tmp/ganesha-recov"
	cat >"$tmp/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	NFS_Port = $nfsport;
	MNT_Port = $mntport;
	NLM_Port = $((gport + 2));
	Rquota_Port = $((gport + 3));
	Bind_addr = 127.0.0.1;
	NFS_Protocols = 3;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
}
NFSv4 {
	Graceless = true;
	RecoveryBackend = fs;
	RecoveryRoot = $tmp/ganesha-recov;
}
EXPORT {
	Export_Id = 1;
	Path = $export_dir;
	Pseudo = $export_dir;
	Protocols = 3;
	Transports = TCP;
	Access_Type = RW;
	Squash = no_root_squash;
	SecType = sys;
	FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
EOF
	if [ -z "${1:-}" ] && ss -Hltn "sport = :$nfsport" 2>/dev/null | grep -q .; then
		fail "port $nfsport is in use (another Ganesha? set PRESTO_KERNEL_GANESHA_PORT)"
	fi
	ganesha.nfsd -F -f "$tmp/ganesha.conf" -L "$slog" -p "$tmp/ganesha.pid" -N NIV_EVENT &
	server_pid=$!
	wait_port "$nfsport" 20 && wait_port "$mntport" 5 ||
		{ show_server_log; fail "Ganesha is not listening on $nfsport/$mntport after 20 s"; }
}

show_server_log() {
	[ -s "$slog" ] || return 0
	say "---- server log (last 30 lines)"
	tail -n 30 "$slog" | sed 's/^/#   /'
}

start_server() { # [NFSPORT MNTPORT] (a restart reuses the ports)
	case "$server" in
	presto) start_presto "$@" ;;
	ganesha) start_ganesha "$@" ;;
	esac
}

label=ganesha
[ "$server" = presto ] && label="presto-nfsd, presto $presto"
start_server
say "server $label (pid $server_pid) on 127.0.0.1: nfs=$nfsport mount=$mntport, export $export_dir"

# --- restart hook (presto on; issue 8's later part) -------------------------
# Called when the guest prints "PRESTO-KERNEL: restart-now": it has fsynced
# its files and keeps the hard mount. SIGKILL the server, start it again on
# the same ports and state, and tell the guest through a marker file.
restart_server() {
	say "guest asks for a restart: SIGKILL server pid $server_pid"
	kill -9 "$server_pid" 2>/dev/null
	wait "$server_pid" 2>/dev/null
	server_pid=""
	sleep 1
	start_server "$nfsport" "$mntport"
	say "server restarted (pid $server_pid)"
	: >"$export_dir/.presto-restarted"
}

# --- qemu -------------------------------------------------------------------
# Software emulation by default: KVM inside this kind of (virtual) machine
# initialises and then hangs the guest's early boot.
accel_args="-accel $accel"
qlimit=$(($(left) - 5))
[ "$qlimit" -gt 20 ] || fail "no time left for the guest (PRESTO_KERNEL_TIMEOUT=$limit)"
append="console=ttyS0 quiet panic=-1 nfsport=$nfsport mntport=$mntport export=$export_dir mode=$mode"
say "booting the guest (accel $accel, bound ${qlimit} s)"
timeout -k 5 "$qlimit" qemu-system-x86_64 $accel_args -m 1024 -nographic -no-reboot \
	-pidfile "$tmp/qemu.pid" \
	-kernel "$build/kernel/vmlinuz" -initrd "$build/initrd.img" -append "$append" \
	-netdev user,id=n0,ipv6=off -device virtio-net-pci,netdev=n0 \
	</dev/null >"$console" 2>&1 &
qemu_pid=$!

restarted=""
server_died=""
while kill -0 "$qemu_pid" 2>/dev/null; do
	if [ "$mode" = restart ] && [ -z "$restarted" ] &&
	   grep -q 'PRESTO-KERNEL: restart-now' "$console" 2>/dev/null; then
		restarted=1
		restart_server
	fi
	if [ -n "$server_pid" ] && ! kill -0 "$server_pid" 2>/dev/null; then
		# the guest would wait on its hard mount until the bound: stop now
		server_died=1
		wait "$server_pid"
		say "FAIL: the server exited (status $?) while the guest was running"
		server_pid=""
		sleep 2
		stop_qemu
		break
	fi
	sleep 0.5
done
wait "$qemu_pid" 2>/dev/null
qrc=$?
stop_qemu
qemu_pid=""
elapsed=$(($(date +%s) - t_start))

# --- verdict ----------------------------------------------------------------
say "---- guest console"
# without the terminal escapes of the firmware and of busybox
tr -d '\r' <"$console" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc/\n/g' |
	grep -v -e '^\s*$' | sed 's/^/  /'
say "---- end of guest console"
mkdir -p "$build"
tr -d '\r' <"$console" >"$build/last-console.log" 2>/dev/null

result=$(tr -d '\r' <"$console" | sed -n 's/^PRESTO-KERNEL-RESULT passed=\([0-9]*\) failed=\([0-9]*\)$/\1 \2/p' | tail -1)
passed=0 failed=0
if [ -n "$result" ]; then
	passed=${result% *}
	failed=${result#* }
else
	# count what the guest reported before it stopped, plus one failure
	passed=$(tr -d '\r' <"$console" | grep -c '^ok ')
	failed=$(($(tr -d '\r' <"$console" | grep -c '^not ok ') + 1))
	if [ -n "$server_died" ]; then
		say "FAIL: no verdict from the guest: the server died"
	elif [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
		say "FAIL: no verdict from the guest within ${qlimit} s (hung server or guest); last check started after:"
		tr -d '\r' <"$console" | grep -e '^ok ' -e '^not ok ' | tail -1 | sed 's/^/  /'
	else
		say "FAIL: no verdict from the guest (qemu status $qrc)"
	fi
	show_server_log
fi
[ "$failed" -gt 0 ] && [ -n "$result" ] && show_server_log
say "server $label, mode $mode, accel $accel: ${elapsed} s"
say "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
