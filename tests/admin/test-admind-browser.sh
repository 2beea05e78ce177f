#!/bin/sh
# test-admind-browser.sh -- the console in a real browser (issue 6): headless
# Debian chromium, driven by playwright-core (admind_browser.mjs), loads the
# console of a presto-admind that samples a live presto-nfsd under a libnfs
# load; it checks that the charts of every range show data, switches
# acceleration off and on for the export, presses flush and saves a
# screenshot ($PRESTO_TESTLOG/admind-console.png).
#
# Installs Debian's chromium (appliance/deps.sh) and web/node_modules
# (npm ci) when missing. Everything it starts (presto-nfsd, presto-admind,
# the load, node and its chromium, in their own process groups) is stopped
# and its temporary files removed on any exit. About 20 s.
set -u
top=${PRESTO_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${PRESTO_BIN:-$top/bin}
O=${O:-build/default}
logdir=${PRESTO_TESTLOG:-$top/build/test-logs}
shot="$logdir/admind-console.png"
passed=0
failed=0
pids=""

ok() { passed=$((passed + 1)); echo "ok - $*"; }
nok() { failed=$((failed + 1)); echo "not ok - $*"; }
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
}

tmp=$(mktemp -d /tmp/presto-admind-browser-XXXXXX)
nvram=/dev/shm/presto-admind-browser-$$
cleanup() {
	for p in $pids; do
		kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
	done
	sleep 0.3
	for p in $pids; do
		kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$tmp"
	rm -f "$nvram"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# ---- what the test needs ----
if [ ! -x /usr/bin/chromium ]; then
	echo "installing Debian's chromium"
	PRESTO_EXTRA_PKGS="chromium" sh "$top/appliance/deps.sh" >"$tmp/deps.log" 2>&1 ||
		{ tail -5 "$tmp/deps.log"; }
fi
[ -x /usr/bin/chromium ] && ok "chromium is installed" || { nok "chromium is not installed"; finish; }
if [ ! -f "$top/web/node_modules/playwright-core/package.json" ]; then
	(cd "$top/web" && npm ci --no-audit --no-fund --loglevel=error) >"$tmp/npm.log" 2>&1 ||
		tail -5 "$tmp/npm.log"
fi
[ -f "$top/web/node_modules/playwright-core/package.json" ] && ok "playwright-core is installed" ||
	{ nok "playwright-core is missing (npm ci in web/)"; finish; }
for f in "$bin/presto-nfsd" "$bin/presto-admind"; do
	[ -x "$f" ] || { nok "$f is not built (make)"; finish; }
done

# ---- presto-nfsd, presto-admind, a load ----
mkdir -p "$tmp/export" "$tmp/state" "$logdir"
chmod 0700 "$tmp/state"
echo "$tmp/export 127.0.0.1(rw,insecure,no_root_squash)" >"$tmp/exports"

# start_bg LOG CMD... -- run CMD in its own process group (setsid without
# job control keeps the pid), remember it
start_bg() {
	log=$1
	shift
	setsid "$@" >"$log" 2>&1 &
	pids="$pids $!"
	last=$!
}

# wait_line FILE REGEX SECONDS -- wait until FILE has a line matching REGEX
wait_line() {
	i=0
	while [ $i -lt $(($3 * 10)) ]; do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

start_bg "$tmp/nfsd.log" env PMEM_IS_PMEM_FORCE=1 "$bin/presto-nfsd" --exports "$tmp/exports" \
	--state-dir "$tmp/state" --bind 127.0.0.1 --nfs-port 0 --mount-port 0 --no-rpcbind \
	--foreground --nvram "$nvram" --nvram-size 64M
nfsd_pid=$last
if ! wait_line "$tmp/nfsd.log" "ready nfs=" 15; then
	nok "presto-nfsd did not start"; cat "$tmp/nfsd.log"; finish
fi
nfs=$(sed -n 's/.*ready nfs=\([0-9]*\) mount=\([0-9]*\).*/\1/p' "$tmp/nfsd.log")
mnt=$(sed -n 's/.*ready nfs=\([0-9]*\) mount=\([0-9]*\).*/\2/p' "$tmp/nfsd.log")
ok "presto-nfsd ready (nfs $nfs, mount $mnt)"

start_bg "$tmp/admind.log" "$bin/presto-admind" --control "$tmp/state/control.sock" \
	--db "$tmp/admind.db" --token-file "$tmp/admin.token" --listen 127.0.0.1:0
admind_pid=$last
if ! wait_line "$tmp/admind.log" "ready http://" 10; then
	nok "presto-admind did not start"; cat "$tmp/admind.log"; finish
fi
url=$(sed -n 's|.*ready \(http://[0-9.:]*/\).*|\1|p' "$tmp/admind.log")
ok "presto-admind ready at $url"
# the console's files, from the folder the build made (compiled-in default)
if python3 -c 'import sys, urllib.request as u; [u.urlopen(sys.argv[1] + f, timeout=5).read() for f in ("", "uPlot.iife.min.js", "console.js")]' "$url" 2>"$tmp/get.log"; then
	ok "the console and its chart library are served"
else
	nok "the console's files are not served (make builds $O/web)"; cat "$tmp/get.log"; finish
fi

loadgen="$top/$O/bench/loadgen"
if [ -x "$loadgen" ]; then
	start_bg "$tmp/load.log" "$loadgen" -H 127.0.0.1 -n "$nfs" -m "$mnt" -e "$tmp/export" \
		-c 2 -d 4 -t 40 -o write,create,getattr
else
	# no loadgen built: nfs-cp from libnfs-utils, in a loop
	head -c 1048576 /dev/urandom >"$tmp/blob"
	start_bg "$tmp/load.log" sh -c "i=0; while :; do i=\$((i+1)); nfs-cp '$tmp/blob' \
		'nfs://127.0.0.1$tmp/export/f\$((i % 8))?nfsport=$nfs&mountport=$mnt&version=3' || exit 1; done"
fi
sleep 4		# a few seconds of history under load

# ---- the browser ----
start_bg "$tmp/browser.log" env ADMIND_URL="$url" ADMIND_TOKEN="$(cat "$tmp/admin.token")" \
	EXPORT_PATH="$tmp/export" SHOT="$shot" WEB_DIR="$top/web" NFSD_PID="$nfsd_pid" \
	timeout 55 node "$top/tests/admin/admind_browser.mjs"
node_pid=$last
wait "$node_pid"
rc=$?
cat "$tmp/browser.log"
b_ok=$(grep -c '^ok ' "$tmp/browser.log")
b_nok=$(grep -c '^not ok' "$tmp/browser.log")
passed=$((passed + b_ok))
failed=$((failed + b_nok))
if [ "$rc" -ne 0 ] && [ "$b_nok" -eq 0 ]; then
	nok "the browser test exited with status $rc"
fi
[ -s "$shot" ] && ok "screenshot $shot" || nok "no screenshot at $shot"

# the daemons lived through it
kill -0 "$admind_pid" 2>/dev/null && ok "presto-admind still running" ||
	{ nok "presto-admind died"; tail -20 "$tmp/admind.log"; }
if grep -q "error\|failed" "$tmp/load.log" && ! grep -q '"errors":0' "$tmp/load.log"; then
	echo "(load: $(tail -2 "$tmp/load.log"))"
fi
finish
