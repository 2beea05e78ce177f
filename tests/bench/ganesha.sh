#!/bin/sh
# ganesha.sh -- start and stop an NFS-Ganesha of our own, for the benchmark.
#
#   ganesha.sh start WORKDIR EXPORTDIR NFS_PORT MNT_PORT
#   ganesha.sh stop WORKDIR
#
# start writes WORKDIR/ganesha.conf (VFS FSAL, one NFSv3-only export of
# EXPORTDIR at the same path, TCP, no_root_squash, bound to 127.0.0.1 on the
# given fixed ports), keeps its log, pid file and NFSv4 recovery directory
# under WORKDIR, starts ganesha.nfsd in the foreground in the background and
# waits until its NFS and MOUNT services answer a NULL call. Exit status 0
# when it serves, 1 otherwise (the log's tail goes to stderr).
#
# Ganesha 4.3 will not start without a portmapper: when no rpcbind answers on
# 127.0.0.1, start registers with one it starts itself (`rpcbind -f -w`) and
# stop ends that one; an rpcbind that was already there is never touched.
# stop kills only the processes whose pids start recorded in WORKDIR.
#
# Two Ganeshas on one machine may fight over rpcbind registrations; the
# benchmark avoids that by running in a private network namespace (see
# bench-nfsd.sh).
set -u

GANESHA=${GANESHA:-/usr/bin/ganesha.nfsd}

usage() {
	echo "usage: $0 start WORKDIR EXPORTDIR NFS_PORT MNT_PORT | stop WORKDIR" >&2
	exit 2
}

# answers PORT PROG VERS -- true when PROG/VERS answers NULL on TCP PORT
answers() {
	rpcinfo -n "$1" -t 127.0.0.1 "$2" "$3" >/dev/null 2>&1
}

# kill_pidfile FILE -- TERM the process recorded in FILE, wait, then KILL it
kill_pidfile() {
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	rm -f "$1"
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	i=0
	while [ $i -lt 50 ] && kill -0 "$pid" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$pid" 2>/dev/null
	return 0
}

start() {
	work=$1 export=$2 nfs_port=$3 mnt_port=$4
	[ -x "$GANESHA" ] || { echo "ganesha.sh: $GANESHA not installed" >&2; return 1; }
	mkdir -p "$work/recovery" "$export" || return 1
	work=$(cd "$work" && pwd)

	if ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; then
		mkdir -p /run/rpcbind
		rpcbind -f -w >/dev/null 2>&1 &
		echo $! >"$work/rpcbind.pid"
		i=0
		while [ $i -lt 50 ] && ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; do
			sleep 0.1
			i=$((i + 1))
		done
	fi

	# NLM and RQUOTA are off so that only the two given ports are used.
	cat >"$work/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	Bind_addr = 127.0.0.1;
	NFS_Port = $nfs_port;
	MNT_Port = $mnt_port;
	Protocols = 3;
	Enable_NLM = false;
	Enable_RQUOTA = false;
}
NFSV4 {
	RecoveryRoot = "$work/recovery";
	Graceless = true;
}
EXPORT {
	Export_Id = 1;
	Path = "$export";
	Pseudo = "$export";
	Protocols = 3;
	Transports = TCP;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	FSAL {
		Name = VFS;
	}
}
LOG {
	Default_Log_Level = EVENT;
}
EOF
	"$GANESHA" -F -f "$work/ganesha.conf" -L "$work/ganesha.log" \
	    -p "$work/ganesha.nfsd.pid" -N NIV_EVENT >"$work/ganesha.out" 2>&1 &
	echo $! >"$work/ganesha.pid"
	pid=$!

	i=0
	while [ $i -lt 150 ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "ganesha.sh: ganesha.nfsd exited during start-up" >&2
			tail -n 20 "$work/ganesha.log" "$work/ganesha.out" >&2 2>/dev/null
			stop "$work"
			return 1
		fi
		if answers "$nfs_port" 100003 3 && answers "$mnt_port" 100005 3; then
			return 0
		fi
		sleep 0.2
		i=$((i + 1))
	done
	echo "ganesha.sh: ganesha.nfsd does not answer on ports $nfs_port/$mnt_port" >&2
	tail -n 20 "$work/ganesha.log" >&2 2>/dev/null
	stop "$work"
	return 1
}

stop() {
	work=$1
	kill_pidfile "$work/ganesha.pid"
	kill_pidfile "$work/rpcbind.pid"
}

case "${1:-}" in
start) [ $# -eq 5 ] || usage; start "$2" "$3" "$4" "$5" ;;
stop) [ $# -eq 2 ] || usage; stop "$2" ;;
*) usage ;;
esac
