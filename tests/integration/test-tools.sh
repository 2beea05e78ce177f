#!/bin/sh
# test-tools.sh -- presto-nfsd with the real tools: rpcbind registration seen
# by rpcinfo, the export list by showmount, and a 5 MiB file that nfs-cp,
# nfs-cat and nfs-ls (libnfs-utils) round-trip byte for byte.
#
# The server runs WITHOUT --no-rpcbind (it registers NFS 100003 v3 and MOUNT
# 100005 v1+v3 on ephemeral ports), so this must be the only such test
# running at a time. rpcbind is started when none runs, and stopped at the end
# only if started here. PRESTO_IT_SERVER=ganesha runs NFS-Ganesha instead
# (ports 20068/20069).
#
# Ends with "N passed, N failed" (tests/run.sh reads it).
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
: "${PRESTO_BIN:=$top/bin}"
server=${PRESTO_IT_SERVER:-presto}
passed=0
failed=0
pid=""
started_rpcbind=""
dir=$(mktemp -d /tmp/presto-it-tools.XXXXXX) || exit 1
chmod 755 "$dir"
export_dir=$dir/export
mkdir -p "$export_dir" "$dir/state"
chmod 777 "$export_dir"

ok() { passed=$((passed + 1)); echo "PASS: $1"; }
ko() { failed=$((failed + 1)); echo "FAIL: $1"; }

cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -9 "$pid" 2>/dev/null
		pid=""
	fi
	[ -n "$started_rpcbind" ] && kill "$started_rpcbind" 2>/dev/null
	started_rpcbind=""
	[ -z "${PRESTO_IT_KEEP:-}" ] && rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ------------------------------------------------------------ rpcbind
if ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; then
	if ! pgrep -x rpcbind >/dev/null 2>&1; then
		mkdir -p /run/rpcbind
		rpcbind -f -w >/dev/null 2>&1 &
		started_rpcbind=$!
	fi
	i=0
	while [ $i -lt 50 ] && ! rpcinfo -p 127.0.0.1 >/dev/null 2>&1; do
		sleep 0.1; i=$((i + 1))
	done
fi
if rpcinfo -p 127.0.0.1 >/dev/null 2>&1; then ok "rpcbind answers"; else ko "rpcbind answers"; fi

# ------------------------------------------------------------ server
if [ "$server" = ganesha ]; then
	nfs_port=20068
	mount_port=20069
	cat >"$dir/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	NFS_Port = $nfs_port;
	MNT_Port = $mount_port;
	Bind_addr = 127.0.0.1;
	NFS_Protocols = 3;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
}
NFSv4 { Graceless = true; RecoveryBackend = fs; RecoveryRoot = $dir/state; }
EXPORT {
	Export_Id = 1; Path = $export_dir; Pseudo = $export_dir; Protocols = 3;
	Transports = TCP; Access_Type = None; SecType = sys;
	FSAL { Name = VFS; }
	CLIENT { Clients = 127.0.0.1; Access_Type = RW; Squash = no_root_squash; }
}
EOF
	(cd "$dir" && exec ganesha.nfsd -F -f "$dir/ganesha.conf" -L "$dir/server.log" -p "$dir/pid") &
	pid=$!
	i=0
	while [ $i -lt 200 ] && ! rpcinfo -t 127.0.0.1 -n $mount_port 100005 3 >/dev/null 2>&1; do
		sleep 0.1; i=$((i + 1))
	done
	ready="presto-nfsd: ready nfs=$nfs_port mount=$mount_port"
else
	echo "$export_dir 127.0.0.1(rw,insecure,no_root_squash)" >"$dir/exports"
	"$PRESTO_BIN/presto-nfsd" --exports "$dir/exports" --state-dir "$dir/state" \
		--bind 127.0.0.1 --nfs-port 0 --mount-port 0 --foreground \
		>"$dir/stdout" 2>"$dir/server.log" &
	pid=$!
	i=0
	ready=""
	while [ $i -lt 100 ]; do
		# a whole first line (wc -l counts its newline)
		if [ "$(wc -l <"$dir/stdout" 2>/dev/null)" -ge 1 ] 2>/dev/null; then
			ready=$(head -n 1 "$dir/stdout")
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1; i=$((i + 1))
	done
fi
nfs_port=$(echo "$ready" | sed -n 's/^presto-nfsd: ready nfs=\([0-9]*\) mount=\([0-9]*\)$/\1/p')
mount_port=$(echo "$ready" | sed -n 's/^presto-nfsd: ready nfs=\([0-9]*\) mount=\([0-9]*\)$/\2/p')
if [ -n "$nfs_port" ] && [ -n "$mount_port" ] && kill -0 "$pid" 2>/dev/null; then
	ok "server ready: nfs=$nfs_port mount=$mount_port"
else
	ko "server ready (first stdout line: \"$ready\")"
	echo "---- server log"; tail -n 30 "$dir/server.log" 2>/dev/null
	echo "$passed passed, $failed failed"
	exit 1
fi
q="nfsport=$nfs_port&mountport=$mount_port"
url="nfs://127.0.0.1$export_dir"

# ------------------------------------------------------------ rpcinfo
out=$(timeout 20 rpcinfo -p 127.0.0.1 2>&1)
echo "$out"
# has PROG VERS PORT -- the rpcinfo -p table lists PROG VERS tcp PORT
has() { echo "$out" | awk -v p="$1" -v v="$2" -v port="$3" \
	'$1 == p && $2 == v && $3 == "tcp" && $4 == port { f = 1 } END { exit !f }'; }
if has 100003 3 "$nfs_port"; then ok "rpcinfo -p lists NFS 100003 v3 tcp $nfs_port"
else ko "rpcinfo -p lists NFS 100003 v3 tcp $nfs_port"; fi
if has 100005 3 "$mount_port"; then ok "rpcinfo -p lists MOUNT 100005 v3 tcp $mount_port"
else ko "rpcinfo -p lists MOUNT 100005 v3 tcp $mount_port"; fi
if has 100005 1 "$mount_port"; then ok "rpcinfo -p lists MOUNT 100005 v1 tcp $mount_port"
else ko "rpcinfo -p lists MOUNT 100005 v1 tcp $mount_port"; fi
if timeout 20 rpcinfo -t 127.0.0.1 -n "$nfs_port" 100003 3 2>&1 | grep -q "ready and waiting"; then
	ok "rpcinfo -t: NFS v3 answers NULL"
else ko "rpcinfo -t: NFS v3 answers NULL"; fi
if timeout 20 rpcinfo -t 127.0.0.1 -n "$mount_port" 100005 3 2>&1 | grep -q "ready and waiting"; then
	ok "rpcinfo -t: MOUNT v3 answers NULL"
else ko "rpcinfo -t: MOUNT v3 answers NULL"; fi
if timeout 20 rpcinfo -t 127.0.0.1 -n "$nfs_port" 100003 2 2>&1 | grep -q "ready and waiting"; then
	ko "rpcinfo -t: NFS v2 is not served"
else ok "rpcinfo -t: NFS v2 is not served"; fi

# ------------------------------------------------------------ showmount
out=$(timeout 20 showmount -e 127.0.0.1 2>&1)
echo "$out"
if echo "$out" | grep -q "^$export_dir "; then ok "showmount -e lists $export_dir"
else ko "showmount -e lists $export_dir"; fi
if echo "$out" | grep "^$export_dir " | grep -q "127.0.0.1\|everyone\|\*"; then
	ok "showmount -e names the client"
else ko "showmount -e names the client"; fi

# ------------------------------------------------------------ libnfs tools
head -c 5242880 /dev/urandom >"$dir/src.bin"
echo hello >"$export_dir/hello.txt"
mkdir "$export_dir/sub"

out=$(timeout 30 nfs-ls "$url?$q" 2>&1)
echo "$out"
if echo "$out" | grep -q "hello.txt" && echo "$out" | grep -q "sub"; then ok "nfs-ls lists the export"
else ko "nfs-ls lists the export"; fi

if timeout 60 nfs-cp "$dir/src.bin" "$url/copy.bin?$q" && cmp "$dir/src.bin" "$export_dir/copy.bin"; then
	ok "nfs-cp local -> server: 5 MiB byte for byte"
else ko "nfs-cp local -> server: 5 MiB byte for byte"; fi

if timeout 60 nfs-cp "$url/copy.bin?$q" "$dir/back.bin" && cmp "$dir/src.bin" "$dir/back.bin"; then
	ok "nfs-cp server -> local: 5 MiB byte for byte"
else ko "nfs-cp server -> local: 5 MiB byte for byte"; fi

if timeout 60 nfs-cat "$url/copy.bin?$q" >"$dir/cat.bin" && cmp "$dir/src.bin" "$dir/cat.bin"; then
	ok "nfs-cat: 5 MiB byte for byte"
else ko "nfs-cat: 5 MiB byte for byte"; fi

if timeout 60 nfs-cp "$url/copy.bin?$q" "$url/sub/copy2.bin?$q" && cmp "$dir/src.bin" "$export_dir/sub/copy2.bin"; then
	ok "nfs-cp server -> server: 5 MiB byte for byte"
else ko "nfs-cp server -> server: 5 MiB byte for byte"; fi

out=$(timeout 30 nfs-ls "$url?$q" 2>&1)
if echo "$out" | grep "copy.bin" | grep -q " 5242880 "; then ok "nfs-ls shows the 5 MiB size"
else ko "nfs-ls shows the 5 MiB size: $(echo "$out" | grep copy.bin)"; fi

# through the portmapper, as a client without explicit ports does
if [ "$(timeout 30 nfs-cat "$url/hello.txt" 2>&1)" = hello ]; then
	ok "nfs-cat through rpcbind (no explicit ports)"
else ko "nfs-cat through rpcbind (no explicit ports)"; fi

# ------------------------------------------------------------ shutdown
kill "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$pid" 2>/dev/null; then
	ko "SIGTERM stops the server within 10 s"
else
	wait "$pid"
	rc=$?
	pid=""
	if [ "$server" = ganesha ] || [ $rc -eq 0 ]; then ok "SIGTERM: exit status 0"
	else ko "SIGTERM: exit status 0 (got $rc)"; fi
	if [ "$server" != ganesha ]; then
		if [ "$(wc -l <"$dir/stdout")" -eq 1 ]; then ok "stdout held exactly the ready line"
		else ko "stdout held exactly the ready line: $(head -c 300 "$dir/stdout")"; fi
	fi
	out=$(timeout 20 rpcinfo -p 127.0.0.1 2>&1)
	if has 100003 3 "$nfs_port" || has 100005 3 "$mount_port"; then
		ko "unregistered from rpcbind at exit"
	else ok "unregistered from rpcbind at exit"; fi
fi

# ------------------------------------------------------------ -c spellings
# every spelling getopt takes loads the file (a bad value refuses to start)
if [ "$server" != ganesha ]; then
	printf 'threads = notanumber\n' >"$dir/bad.conf"
	for spelling in "-c $dir/bad.conf" "-c$dir/bad.conf" "--config $dir/bad.conf" \
	    "--config=$dir/bad.conf" "--conf=$dir/bad.conf"; do
		# shellcheck disable=SC2086 # the spelling is split on purpose
		msg=$(timeout 10 "$PRESTO_BIN/presto-nfsd" $spelling --state-dir "$dir/state-c" \
			--exports "$dir/exports" --bind 127.0.0.1 --nfs-port 0 --mount-port 0 \
			--no-rpcbind --foreground 2>&1 >/dev/null)
		rc=$?
		if [ $rc -eq 1 ] && echo "$msg" | grep -q "bad.conf"; then
			ok "config file read with $spelling"
		else ko "config file read with $spelling (status $rc: $msg)"; fi
	done
fi

# ------------------------------------------------------------ a log too small
# formatted by presto-log below what a 1 MiB WRITE's record needs: refused
# with the reason (such a WRITE was applied, then not logged)
if [ "$server" != ganesha ]; then
	"$PRESTO_BIN/presto-log" format "$dir/small.nvram" 2M >/dev/null 2>&1
	msg=$(timeout 20 "$PRESTO_BIN/presto-nfsd" --state-dir "$dir/state-s" \
		--exports "$dir/exports" --bind 127.0.0.1 --nfs-port 0 --mount-port 0 \
		--no-rpcbind --foreground --nvram "$dir/small.nvram" 2>&1 >/dev/null)
	rc=$?
	if [ $rc -ne 0 ] && echo "$msg" | grep -q "too small"; then
		ok "a 2 MiB log is refused: too small for a 1 MiB WRITE"
	else ko "a 2 MiB log is refused (status $rc: $msg)"; fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
