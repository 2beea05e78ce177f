# lib.sh -- what the benchmarks share (sourced by bench-nfsd.sh and
# bench-cthon.sh): the private network namespace, starting and stopping a
# presto-nfsd of their own.

# bench_netns NAME ARGS... -- re-run the calling script ($0) inside a private
# network and mount namespace (unless PRESTO_BENCH_NETNS=0 or it cannot be
# made), so that its rpcbind and Ganesha collide with nobody else's; there,
# bench_netns_setup brings lo up.
bench_netns() {
	name=$1
	shift
	[ "${PRESTO_BENCH_NETNS:-1}" = 1 ] || return 0
	if unshare --net --mount true 2>/dev/null; then
		export PRESTO_BENCH_IN_NETNS=1
		exec unshare --net --mount sh "$0" "$@"
	fi
	echo "$name: cannot unshare the network namespace; running in the host's" >&2
}

# bench_netns_setup -- in the namespace: lo up, a second loopback address
# (glibc's AI_ADDRCONFIG, which Ganesha uses for Bind_addr, ignores 127.0.0.1
# alone), a private /run for rpcbind.
bench_netns_setup() {
	[ "${PRESTO_BENCH_IN_NETNS:-}" = 1 ] || return 0
	ip link set lo up || exit 1
	ip addr add 127.0.0.2/8 dev lo 2>/dev/null
	mount -t tmpfs -o mode=0755 tmpfs /run || exit 1
}

# bench_start_presto DIR OPTS FLAGS -- start presto-nfsd exporting DIR/export
# with export options OPTS and the daemon flags FLAGS, in which @DIR@ stands
# for DIR and @SHM@ for a directory of this run under /dev/shm (made in $shm,
# which the caller removes). Sets bench_pid, nfs_port, mount_port; returns 1
# with start_error set.
bench_start_presto() {
	d=$1 opts=$2 flags=$3
	mkdir -p "$d/export" "$d/state"
	chmod 0777 "$d/export"
	printf '%s 127.0.0.1(%s)\n' "$d/export" "$opts" >"$d/exports"
	case "$flags" in
	*@SHM@*)
		[ -n "$shm" ] || shm=$(mktemp -d /dev/shm/presto-bench.XXXXXX) || {
			start_error="cannot make a directory in /dev/shm"
			return 1
		}
		mkdir -p "$shm/$(basename "$d")"
		;;
	esac
	flags=$(printf '%s' "$flags" | sed -e "s|@DIR@|$d|g" -e "s|@SHM@|$shm/$(basename "$d")|g")
	if [ ! -x "$PRESTO_BIN/presto-nfsd" ]; then
		start_error="$PRESTO_BIN/presto-nfsd not built"
		return 1
	fi
	# /dev/shm stands in for battery-backed RAM: libpmem treats it as pmem
	# shellcheck disable=SC2086
	PMEM_IS_PMEM_FORCE=1 "$PRESTO_BIN/presto-nfsd" --exports "$d/exports" \
	    --state-dir "$d/state" --bind 127.0.0.1 --nfs-port 0 --mount-port 0 \
	    --no-rpcbind --foreground $flags </dev/null >"$d/presto-nfsd.log" 2>&1 &
	bench_pid=$!
	i=0
	while [ $i -lt 300 ]; do
		line=$(grep -m1 '^presto-nfsd: ready ' "$d/presto-nfsd.log" 2>/dev/null)
		if [ -n "$line" ]; then
			nfs_port=$(printf '%s\n' "$line" | sed -n 's/.* nfs=\([0-9]*\).*/\1/p')
			mount_port=$(printf '%s\n' "$line" | sed -n 's/.* mount=\([0-9]*\).*/\1/p')
			[ -n "$nfs_port" ] && [ -n "$mount_port" ] && return 0
			start_error="cannot parse: $line"
			kill -KILL "$bench_pid" 2>/dev/null
			return 1
		fi
		if ! kill -0 "$bench_pid" 2>/dev/null; then
			wait "$bench_pid"
			start_error="presto-nfsd exited (status $?): $(tail -n 3 "$d/presto-nfsd.log" | tr '\n' ' ')"
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	start_error="presto-nfsd not ready after 30 s: $(tail -n 3 "$d/presto-nfsd.log" | tr '\n' ' ')"
	kill -KILL "$bench_pid" 2>/dev/null
	return 1
}

# bench_stop_pid PID -- SIGTERM (presto-nfsd flushes its log), then SIGKILL
# after 10 s.
bench_stop_pid() {
	kill -TERM "$1" 2>/dev/null
	i=0
	while [ $i -lt 100 ] && kill -0 "$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$1" 2>/dev/null
}

# bench_export_fs DIR MOUNTS -- make DIR/export the root of a filesystem of
# its own: a fresh ext4 (with its journal) in the image file DIR/export.img
# on the disk, loop-mounted, recorded in the file MOUNTS for
# bench_umount_all. Every server then starts from the same state. On a
# shared filesystem the servers' create+remove rates depended on who ran
# before: ext4 without a journal (this machine's root filesystem) skips, when
# it allocates an inode, every inode of the group freed in the last 60 s (6
# min while its table block is dirty), and scans them to do so.
# PRESTO_BENCH_FS=dir keeps plain directories of the benchmark's filesystem;
# PRESTO_BENCH_FS_SIZE sizes the images (4G, sparse).
bench_export_fs() {
	_fs_dir=$1
	_fs_mounts=$2
	mkdir -p "$_fs_dir/export"
	[ "${PRESTO_BENCH_FS:-image}" = image ] || return 0
	_fs_img="$_fs_dir/export.img"
	if truncate -s "${PRESTO_BENCH_FS_SIZE:-4G}" "$_fs_img" &&
	    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$_fs_img" >/dev/null 2>&1 &&
	    mount -o loop "$_fs_img" "$_fs_dir/export"; then
		printf '%s\n' "$_fs_dir/export" >>"$_fs_mounts"
		rmdir "$_fs_dir/export/lost+found" 2>/dev/null
		chmod 0777 "$_fs_dir/export"
		return 0
	fi
	echo "bench: cannot make an ext4 image for $_fs_dir/export; it is a plain directory" >&2
	rm -f "$_fs_img"
	return 0
}

# bench_umount_all MOUNTS -- unmount what bench_export_fs mounted (the loop
# devices go with them).
bench_umount_all() {
	[ -f "$1" ] || return 0
	while read -r _m; do
		umount "$_m" 2>/dev/null || umount -l "$_m" 2>/dev/null
	done <"$1"
	: >"$1"
}

# bench_stop_all RUNNING -- stop every server listed in the file RUNNING
# (lines label|kind|...|handle, kind presto with a pid or ganesha with its
# work directory last), and only those.
bench_stop_all() {
	[ -f "$1" ] || return 0
	while IFS= read -r _line; do
		_kind=$(printf '%s\n' "$_line" | cut -d'|' -f2)
		_handle=${_line##*|}
		case "$_kind" in
		presto)
			bench_stop_pid "$_handle"
			;;
		ganesha)
			sh "$top/tests/bench/ganesha.sh" stop "$_handle"
			;;
		esac
	done <"$1"
	: >"$1"
}

# bench_cleanup -- the benchmarks' exit trap: stop their servers ($running),
# unmount their exports, remove $work and the /dev/shm directory ($shm).
# shellcheck disable=SC2317 # called by the trap
bench_cleanup() {
	bench_stop_all "$running"
	bench_umount_all "$work/mounts"
	rm -rf "$work"
	[ -z "$shm" ] || rm -rf "$shm"
}
