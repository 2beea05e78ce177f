#!/bin/sh
# bench-cthon.sh -- `make bench`: the Connectathon table and Prestoserve's
# experiments, presto on against presto off, async, NFS-Ganesha and the local
# filesystem.
#
# It starts every column's server (COLUMNS below) on a fresh export
# directory of its own, then runs tests/cthon/cthon in its timed mode (-t)
# against each column in turn, REPEAT times for the basic suite and ROUNDS
# times for the experiments, with a `sync` before every run; then stops
# them all. Alternating the columns spreads a slow moment of this shared
# machine (or a disk made slow by someone else's fsyncs) over every column
# instead of one. What is measured:
#   - the Connectathon basic tests 1-9 with their default parameters (the
#     rows Create .. Statfs of HP's MemFS white paper, figure 4), seconds,
#     each row the median of the REPEAT runs;
#   - Prestoserve's tar experiment: extract a tree of 2,000 files
#     (/usr/include's first two levels, padded with generated files of the
#     same shape) and rm -rf it, seconds;
#   - a Postmark-style transaction mix, transactions per second.
# The "local" column runs the same operations through the POSIX API on a
# filesystem like the servers' (each column's export is a fresh ext4 image
# of its own on the same disk: tests/bench/lib.sh, bench_export_fs).
#
# Output: a Markdown table on stdout (seconds per row, with the ratio
# presto off / presto on) and the Prestoserve experiments below it; one JSON
# file under $PRESTO_RESULTS with every run. A benchmark, not a test: times
# are not asserted; the target lines say whether issue 7's targets were met.
# The exit status is 1 only when a column could not be measured or one of
# cthon's checks failed during the timed run.
#
# Isolation as tests/bench/bench-nfsd.sh: everything runs in a private
# network and mount namespace (`unshare --net --mount`) with its own rpcbind
# for Ganesha; PRESTO_BENCH_NETNS=0 runs in the host's namespaces.
#
# Knobs (environment):
#   PRESTO_CTHON_REPEAT   runs of the basic suite on every column; each
#                         row shows the median (5: a row lasts a fraction
#                         of a second with the default parameters, and this
#                         machine is shared)
#   PRESTO_CTHON_ROUNDS   runs of the experiments on every column, the
#                         median shown (1: "measured in one run")
#   PRESTO_CTHON_COLUMNS  the columns, see COLUMNS
#   PRESTO_CTHON_WHAT     what cthon runs: basic,tar,postmark (all)
#   PRESTO_CTHON_CLIENT   nfs3 (one procedure per operation on cached
#                         handles, as a kernel client; every stat reaches
#                         the server), nfs3-ac (the same with a kernel
#                         client's 3 s attribute and negative-name cache) or
#                         libnfs (libnfs's sync API, which walks every path
#                         from the root)
#   PRESTO_CTHON_SPIN     microseconds the nfs3 clients poll without
#                         sleeping after a call (cthon -p, an integer,
#                         0-1000000; 100; 0: they sleep at once; libnfs's
#                         client ignores it). A client asleep when its reply
#                         comes pays the wake-up of this VM's halted vCPU,
#                         12-18 us on some calls and not others (see
#                         bench-nfsd.sh, PRESTO_BENCH_SPIN), which set rows
#                         of one call at a time such as Setattr (presto on
#                         0.078-0.085 s sleeping, 0.025-0.027 polling).
#                         Until presto-nfsd's event loop yielded between
#                         its own polls, the client and the loop put on one
#                         CPU took turns of a whole polling window (every
#                         call about 120 us: Create 0.027-0.044 s instead of
#                         0.005 in most runs with all five columns)
#   PRESTO_BENCH_DIR      where the exports go ($PRESTO_TOP/var, a disk
#                         filesystem; never /dev/shm); each export is a
#                         fresh ext4 in an image file there, loop-mounted
#   PRESTO_BENCH_FS       image (the default) or dir (plain directories)
set -u

top=${PRESTO_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
: "${PRESTO_BIN:=$top/bin}"
: "${PRESTO_TESTBIN:=$top/build/default/tests}"
: "${PRESTO_RESULTS:=$top/bench/results}"
export PRESTO_TOP="$top" PRESTO_BIN PRESTO_TESTBIN PRESTO_RESULTS

# Columns, one a line: label|kind|export options|daemon flags.
# kind: presto (presto-nfsd; @SHM@ in the flags is a directory of this run
# under /dev/shm), ganesha (tests/bench/ganesha.sh) or local (POSIX calls).
COLUMNS=${PRESTO_CTHON_COLUMNS:-"presto-on|presto|rw,insecure,no_root_squash|--nvram @SHM@/nvlog --nvram-size 256M
presto-off|presto|rw,insecure,no_root_squash|
async|presto|rw,insecure,no_root_squash,async|
ganesha|ganesha||
local|local||"}
ROUNDS=${PRESTO_CTHON_ROUNDS:-1}
WHAT=${PRESTO_CTHON_WHAT:-basic,tar,postmark}
REPEAT=${PRESTO_CTHON_REPEAT:-5}
CLIENT=${PRESTO_CTHON_CLIENT:-nfs3}
SPIN=${PRESTO_CTHON_SPIN:-100}
# Ganesha's fixed ports: 20090-20099 belong to this benchmark.
GANESHA_NFS_PORT=20090
GANESHA_MNT_PORT=20091

. "$top/tests/bench/lib.sh"

if [ "${PRESTO_BENCH_INNER:-}" != 1 ]; then
	if [ ! -x /usr/bin/ganesha.nfsd ]; then
		PRESTO_EXTRA_PKGS="nfs-ganesha nfs-ganesha-vfs" sh "$top/appliance/deps.sh" ||
		    echo "bench-cthon: Ganesha could not be installed; its column will fail" >&2
	fi
	cthon=${CTHON:-$PRESTO_TESTBIN/cthon/cthon}
	if [ ! -x "$cthon" ]; then
		make -C "$top" --no-print-directory "${cthon#"$top"/}" >/dev/null || {
			echo "bench-cthon: cannot build $cthon" >&2
			exit 1
		}
	fi
	export CTHON="$cthon" PRESTO_BENCH_INNER=1
	bench_netns bench-cthon "$@"
fi
bench_netns_setup

bench_dir=${PRESTO_BENCH_DIR:-$top/var}
mkdir -p "$bench_dir" "$PRESTO_RESULTS"
work=$(mktemp -d "$bench_dir/bench-cthon.XXXXXX") || exit 1
case "$(stat -f -c %T "$work")" in
tmpfs | ramfs)
	echo "bench-cthon: $work is on $(stat -f -c %T "$work"): the exports must be on a disk" >&2
	rm -rf "$work"
	exit 1
	;;
esac
raw="$work/results.jsonl"
: >"$raw"
shm=""
running="$work/running"	# label|kind|cthon target|pid or Ganesha work dir
: >"$running"

trap bench_cleanup EXIT
trap 'exit 130' INT TERM

# fail_record LABEL ERROR -- a column (or one of its runs) not measured
fail_record() {
	python3 -c 'import json,sys; print(json.dumps({"label": sys.argv[1], "error": sys.argv[2]}))' \
	    "$1" "$2" >>"$raw"
}

# 1. Every column's server, each on an export directory of its own. They
# idle while another column is measured; the runs alternate between them
# (below) so that a slow moment of this shared machine, or a disk made slow
# by someone else's fsyncs, spreads over every column instead of landing on
# one.
while IFS='|' read -r label kind opts flags; do
	[ -n "$label" ] || continue
	d="$work/$label"
	mkdir -p "$d"
	bench_export_fs "$d" "$work/mounts"
	start_error="" target="" handle=""
	case "$kind" in
	presto)
		if bench_start_presto "$d" "$opts" "$flags"; then
			target="-c $CLIENT -p $SPIN -n $nfs_port -m $mount_port -e $d/export"
			handle=$bench_pid
		fi
		;;
	ganesha)
		mkdir -p "$d/export"
		chmod 0777 "$d/export"
		if sh "$top/tests/bench/ganesha.sh" start "$d/ganesha" "$d/export" \
		    "$GANESHA_NFS_PORT" "$GANESHA_MNT_PORT" </dev/null 2>"$d/ganesha.err"; then
			handle="$d/ganesha"
			target="-c $CLIENT -p $SPIN -n $GANESHA_NFS_PORT -m $GANESHA_MNT_PORT -e $d/export"
		else
			start_error="ganesha did not start: $(tail -n 3 "$d/ganesha.err" | tr '\n' ' ')"
		fi
		;;
	local)
		mkdir -p "$d/export"
		target="-l $d/export"
		handle=-
		;;
	*)
		start_error="unknown kind $kind"
		;;
	esac
	if [ -z "$target" ]; then
		echo "bench-cthon: $label: $start_error" >&2
		fail_record "$label" "$start_error"
		continue
	fi
	printf '%s|%s|%s|%s\n' "$label" "$kind" "$target" "$handle" >>"$running"
done <<COLUMNS_END
$COLUMNS
COLUMNS_END

# run_all PHASE N WHAT -- N times, every column in turn: cthon -w WHAT
run_all() {
	phase=$1 n=$2 what=$3
	k=1
	while [ "$k" -le "$n" ]; do
		while IFS='|' read -r label kind target handle; do
			if [ "$kind" = presto ] && ! kill -0 "$handle" 2>/dev/null; then
				continue
			fi
			o="$work/$label/cthon.$phase.$k"
			# every run starts from a quiet disk
			sync
			echo "bench-cthon: $phase $k/$n: $label" >&2
			# shellcheck disable=SC2086
			timeout 900 "$CTHON" -t $target -L "$label" -w "$what" </dev/null \
			    >"$o.json" 2>"$o.err"
			if [ -s "$o.json" ]; then
				python3 -c 'import json,sys
r = json.loads(open(sys.argv[1]).read())
r["phase"], r["run"] = sys.argv[2], int(sys.argv[3])
print(json.dumps(r))' "$o.json" "$phase" "$k" >>"$raw" ||
				    fail_record "$label" "$phase run $k: cthon printed no JSON"
			else
				fail_record "$label" "$phase run $k: cthon failed: $(tail -n 3 "$o.err" | tr '\n' ' ')"
			fi
			if grep -q '^FAIL' "$o.err"; then
				echo "bench-cthon: $label: checks failed:" >&2
				grep '^FAIL' "$o.err" >&2
			fi
		done <"$running"
		k=$((k + 1))
	done
}

# 2. The basic suite REPEAT times, then the experiments ROUNDS times, every
# column in turn each time.
case ",$WHAT," in
*,basic,*) run_all basic "$REPEAT" basic ;;
esac
exps=$(printf '%s' "$WHAT" | tr ',' '\n' | grep -v '^basic$' | paste -sd, -)
[ -z "$exps" ] || run_all experiments "$ROUNDS" "$exps"

# 3. A presto-nfsd that died during the run fails its column.
while IFS='|' read -r label kind target handle; do
	if [ "$kind" = presto ] && ! kill -0 "$handle" 2>/dev/null; then
		fail_record "$label" "presto-nfsd died during the run: $(tail -n 3 "$work/$label/presto-nfsd.log" | tr '\n' ' ')"
	fi
done <"$running"
bench_stop_all "$running"

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$PRESTO_RESULTS/cthon-$stamp.json"
python3 - "$raw" "$out" "$stamp" "$COLUMNS" "$ROUNDS" "$REPEAT" "$CLIENT" "$SPIN" <<'PY'
import json, os, platform, statistics, sys

raw, out, stamp, columns, rounds, repeat, client, spin_us = sys.argv[1:9]
runs = [json.loads(l) for l in open(raw) if l.strip()]
cols = [c.split("|") for c in columns.splitlines() if c.strip()]
labels = [c[0] for c in cols]
doc = {
    "bench": "cthon",
    "date": stamp,
    "machine": {"hostname": platform.node(), "nproc": os.cpu_count(),
                "kernel": platform.release()},
    "rounds": int(rounds),
    "repeat": int(repeat),
    "client": client, "client_spin_us": float(spin_us),
    "columns": [{"label": c[0], "kind": c[1], "export_options": c[2],
                 "flags": c[3] if len(c) > 3 else ""} for c in cols],
    "runs": runs,
}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")

ok = {l: [r for r in runs if r.get("label") == l and "error" not in r] for l in labels}

def med(values):
    values = [v for v in values if v is not None and v >= 0]
    return statistics.median(values) if values else None

def row(label, key):
    return med([r["rows"].get(key) for r in ok[label] if r.get("rows")])

def total(label):
    vals = [row(label, key) for _, key in rows]
    return None if any(v is None for v in vals) else sum(vals)

def tar(label, key):
    return med([r["tar"][key] for r in ok[label] if r.get("tar", {}).get("ok")])

def pm(label):
    return med([r["postmark"]["tx_per_s"] for r in ok[label] if r.get("postmark", {}).get("ok")])

names = {"presto-on": "presto on", "presto-off": "presto off", "async": "async (unsafe)",
         "ganesha": "NFS-Ganesha", "local": "local fs"}
rows = [("Create", "create"), ("Remove", "remove"), ("Lookup", "lookup"),
        ("Setattr", "setattr"), ("Write", "write"), ("Read", "read"),
        ("Readdir", "readdir"), ("Link/rename", "link_rename"),
        ("Symlink", "symlink"), ("Statfs", "statfs")]
have_ratio = "presto-on" in labels and "presto-off" in labels

def cell(v, fmt="%.3f"):
    return "failed" if v is None else fmt % v

def ratio(off, on):
    if off is None or on is None or on <= 0:
        return "-"
    return "%.1fx" % (off / on)

print("Connectathon basic tests (default parameters), seconds, lower is better;"
      " NFS client: %s (polling %s us after a call before it sleeps); each row"
      " the median of %s runs of the suite, the columns taking turns" %
      (client, spin_us, repeat))
print()
head = ["test"] + ["%s (s)" % names.get(l, l) for l in labels]
if have_ratio:
    head.append("presto off / on")
print("| " + " | ".join(head) + " |")
print("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
for title, key in rows + [("total", None)]:
    vals = [total(l) if key is None else row(l, key) for l in labels]
    cells = [title if key else "**total**"] + [cell(v) for v in vals]
    if have_ratio:
        cells.append(ratio(vals[labels.index("presto-off")], vals[labels.index("presto-on")]))
    print("| " + " | ".join(cells) + " |")
print()

r0 = next((r for l in labels for r in ok[l] if r.get("tar")), None)
r1 = next((r for l in labels for r in ok[l] if r.get("postmark")), None)
print("Prestoserve's experiments through libnfs")
print()
head = ["experiment"] + [names.get(l, l) for l in labels]
if have_ratio:
    head += ["presto speed-up", "less time with presto"]
print("| " + " | ".join(head) + " |")
print("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
exps = []
if r0:
    exps += [("tar x, %d files %d dirs %.1f MB (s)" % (r0["tar"]["files"], r0["tar"]["dirs"],
                                                    r0["tar"]["bytes"] / 1e6), "extract_s"),
             ("rm -rf of that tree (s)", "remove_s")]
for title, key in exps:
    vals = [tar(l, key) for l in labels]
    cells = [title] + [cell(v) for v in vals]
    if have_ratio:
        off, on = vals[labels.index("presto-off")], vals[labels.index("presto-on")]
        cells.append(ratio(off, on))
        cells.append("-" if off is None or on is None or off <= 0 else "%.0f%%" % (100 * (1 - on / off)))
    print("| " + " | ".join(cells) + " |")
if r1:
    p = r1["postmark"]
    vals = [pm(l) for l in labels]
    cells = ["Postmark, %d files, %d transactions (tx/s, higher is better)" %
             (p["files"], p["transactions"])] + [cell(v, "%.0f") for v in vals]
    if have_ratio:
        off, on = vals[labels.index("presto-off")], vals[labels.index("presto-on")]
        ok_ = off is not None and on is not None and off > 0 and on > 0
        cells.append("%.1fx" % (on / off) if ok_ else "-")
        cells.append("%.0f%%" % (100 * (1 - off / on)) if ok_ else "-")
    print("| " + " | ".join(cells) + " |")
print()

# issue 7's targets: information, not assertions. Each ratio is taken
# within one run of the suite (the columns take turns, so presto on's and
# presto off's runs of a round are adjacent), then the median over the runs:
# the machine's speed drifts between runs more than a row's ratio.
def by_run(label, phase):
    return {r["run"]: r for r in ok[label] if r.get("phase") == phase}

def paired(a, b, phase, get):
    ra, rb = by_run(a, phase), by_run(b, phase)
    v = []
    for k in sorted(set(ra) & set(rb)):
        x, y = get(ra[k]), get(rb[k])
        if x is not None and y is not None and x > 0 and y > 0:
            v.append(x / y)
    return v

def basic_get(key):
    return lambda r: (r.get("rows") or {}).get(key)

def tar_get(key):
    return lambda r: r["tar"][key] if r.get("tar", {}).get("ok") else None

def target(name, v, want):
    if not v:
        print("target %s: not measured" % name)
        return
    x = statistics.median(v)
    print("target %s presto on %.1fx faster than off (runs: %s; want >= %gx): %s" %
          (name, x, ", ".join("%.1f" % y for y in v), want, "met" if x >= want else "NOT met"))

if have_ratio:
    for title, key in (("Create", "create"), ("Remove", "remove"), ("Link/rename", "link_rename")):
        target(title + ":", paired("presto-off", "presto-on", "basic", basic_get(key)), 5)
    for title, key, want in (("tar x:", "extract_s", 3), ("rm -rf:", "remove_s", 5)):
        target(title, paired("presto-off", "presto-on", "experiments", tar_get(key)), want)
if "presto-on" in labels and "ganesha" in labels:
    behind = []
    for title, key in rows:
        v = paired("ganesha", "presto-on", "basic", basic_get(key))
        if not v or statistics.median(v) <= 1.0:
            behind.append("%s (%s)" % (title, ", ".join("%.2f" % y for y in v) or "-"))
    print("target every row ahead of Ganesha (Ganesha's time / presto on's, median of the runs):"
          " %s" % ("met" if not behind else "NOT met (behind, tied or unmeasured: %s)" %
                   "; ".join(behind)))
for l in labels:
    for r in runs:
        if r.get("label") == l and "error" in r:
            print("%s: failed: %s" % (l, r["error"]))
        elif r.get("label") == l and r.get("failed"):
            print("%s: %d check(s) failed: %s" % (l, r["failed"], r.get("failures", "")))
print("experiments: %s; client and servers share this %d-core machine; every export"
      " on a fresh ext4 of its own on the disk (PRESTO_BENCH_FS=dir: directories)." % ("median of %s rounds" % rounds if int(rounds) > 1 else "one round",
                                 os.cpu_count()))
print("results: %s" % out)
PY
rc=$?
[ $rc -eq 0 ] || exit 1
grep -q '"error"' "$raw" && exit 1
grep -q '"failed": *[1-9]' "$raw" && exit 1
exit 0
