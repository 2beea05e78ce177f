#!/usr/bin/env python3
"""test_presto_cli.py -- the `presto` command and the control socket against a
running presto-nfsd (issue 5).

Starts a real presto-nfsd (an NVRAM log file, three exports: presto,
nopresto, read-only), makes NFS traffic with libnfs' nfs-cp, then drives
every option of bin/presto and checks its exit status, its output fields and
its --json answers (parsed with the json module, never grepped), and talks
to the control socket directly for what the command never sends: malformed,
over-long and pipelined requests, stuck clients, too many clients.

Prints one line per check and a closing "presto-cli: N passed, N failed"
(tests/run.sh counts it). Needs root (presto-nfsd does).
"""
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

TOP = os.environ.get("PRESTO_TOP") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("PRESTO_BIN") or os.path.join(TOP, "bin")
NFSD = os.path.join(BIN, "presto-nfsd")
PRESTO = os.path.join(BIN, "presto")

passed = 0
failed = 0
skipped = []


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   %s" % name)
    else:
        failed += 1
        print("FAIL %s%s" % (name, (": " + detail) if detail else ""))
    sys.stdout.flush()
    return cond


class Server:
    """A presto-nfsd of ours: started in a private directory, stopped at exit."""

    def __init__(self, top):
        self.dir = top
        self.state = os.path.join(top, "state")
        self.sock = os.path.join(self.state, "control.sock")
        self.exports_file = os.path.join(top, "exports")
        self.proc = None
        self.nfs_port = self.mount_port = None

    def export(self, name):
        return os.path.join(self.dir, name)

    def write_exports(self, extra=""):
        for d in ("fast", "slow", "ro", "late"):
            os.makedirs(self.export(d), exist_ok=True)
        with open(self.exports_file, "w") as f:
            f.write("%s 127.0.0.1(rw,insecure,no_root_squash)\n" % self.export("fast"))
            f.write("%s 127.0.0.1(rw,insecure,no_root_squash,nopresto)\n" % self.export("slow"))
            f.write("%s *(ro,insecure)\n" % self.export("ro"))
            f.write(extra)

    def start(self):
        self.log = open(os.path.join(self.dir, "nfsd.log"), "ab")
        self.proc = subprocess.Popen(
            [NFSD, "--exports", self.exports_file, "--state-dir", self.state,
             "--bind", "127.0.0.1", "--nfs-port", "0", "--mount-port", "0",
             "--no-rpcbind", "--foreground", "--no-destage",
             "--nvram", os.path.join(self.dir, "nvram"), "--nvram-size", "16M"],
            stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("presto-nfsd: ready"):
            raise RuntimeError("presto-nfsd did not start: %r (see %s/nfsd.log)" % (line, self.dir))
        words = dict(w.split("=") for w in line.split()[2:])
        self.nfs_port, self.mount_port = int(words["nfs"]), int(words["mount"])

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def url(self, export, path):
        return "nfs://127.0.0.1%s/%s?nfsport=%d&mountport=%d&version=3" % (
            self.export(export), path, self.nfs_port, self.mount_port)


def presto(srv, *args, sock=None, user=None, timeout=60):
    """Run bin/presto; returns (rc, stdout, stderr)."""
    argv = [PRESTO, "-s", sock or srv.sock] + list(args)
    pre = None
    if user is not None:
        def pre():
            os.setgid(user)
            os.setuid(user)
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                       preexec_fn=pre)
    return p.returncode, p.stdout, p.stderr


def presto_json(srv, *args):
    """Run bin/presto --json; returns (rc, [answers])."""
    rc, out, err = presto(srv, "--json", *args)
    answers = []
    for line in out.splitlines():
        answers.append(json.loads(line))
    return rc, answers, err


class Ctl:
    """A raw connection to the control socket."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        for _ in range(100):     # EAGAIN: the listen backlog is full for a moment
            try:
                self.s.connect(path)
                break
            except BlockingIOError:
                time.sleep(0.05)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def recv_line(self):
        while b"\n" not in self.buf:
            try:
                d = self.s.recv(65536)
            except ConnectionResetError:    # closed with our bytes unread
                return None
            if not d:
                return None
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, obj):
        self.send((json.dumps(obj) + "\n").encode())
        return self.recv_line()

    def close(self):
        self.s.close()


def by_path(answer, srv, name):
    for e in answer.get("exports", []):
        if e["path"] == srv.export(name):
            return e
    return None


def nfs_traffic(srv, n=4):
    """Write a few files through NFS (libnfs' nfs-cp); returns whether it worked."""
    src = os.path.join(srv.dir, "payload")
    with open(src, "wb") as f:
        f.write(os.urandom(300000))
    runs = [("fast", "f%d" % i) for i in range(n)] + [("slow", "g")]
    for export, name in runs:
        p = subprocess.run(["nfs-cp", src, srv.url(export, name)],
                           capture_output=True, text=True, timeout=60)
        if not check("nfs-cp to %s/%s" % (export, name), p.returncode == 0,
                     (p.stdout + p.stderr).strip()):
            return False
    return True


def right_edges(lines):
    return {len(l.rstrip()) for l in lines}


def test_help_and_usage(srv):
    rc, out, err = presto(srv, "--help")
    check("--help exits 0 and shows every option",
          rc == 0 and all(o in out for o in ("-p", "-l", "-R", "-F", "-u", "-d", "-w", "--json", "-s")),
          "rc=%d" % rc)
    rc, out, err = presto(srv, "-u", "-d")
    check("-u with -d is a usage error", rc not in (0, 1, 2) and "-u" in err, "rc=%d %s" % (rc, err))
    rc, out, err = presto(srv, "-w", "x")
    check("-w x is a usage error", rc not in (0, 1, 2) and "-w" in err, "rc=%d %s" % (rc, err))
    rc, out, err = presto(srv, "-w", "4294967296", timeout=10)
    check("-w 4294967296 (past sleep's unsigned int) is a usage error",
          rc not in (0, 1, 2) and "-w" in err, "rc=%d %s" % (rc, err))
    rc, out, err = presto(srv, "/some/export")
    check("an export without -u/-d is a usage error", rc not in (0, 1, 2), "rc=%d" % rc)
    man = os.path.join(TOP, "docs", "presto.8")
    check("docs/presto.8 exists and documents every option",
          os.path.exists(man) and all(o in open(man).read() for o in
                                      ("\\-p", "\\-l", "\\-R", "\\-F", "\\-u", "\\-d", "\\-w", "json")))


def test_socket(srv):
    st = os.lstat(srv.sock)
    check("control socket is a socket, mode 0600, owned by root",
          stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0,
          oct(st.st_mode))


def test_status(srv, traffic):
    rc, out, err = presto(srv)
    check("presto: exit 0", rc == 0, err)
    for field in ("state", "NVRAM", "kind", "size", "occupancy", "dirty", "oldest record",
                  "statistics interval", "write-log efficiency", "exports"):
        check("presto: shows %s" % field, any(l.startswith(field) or l.startswith("  " + field)
                                              for l in out.splitlines()), out)
    check("presto: state UP", "UP" in out.splitlines()[0], out.splitlines()[0] if out else "")
    check("presto: lists every export with on/off",
          all(srv.export(e) in out for e in ("fast", "slow", "ro")) and " on" in out and " off" in out)

    rc, ans, err = presto_json(srv)
    check("presto --json: exit 0, one answer", rc == 0 and len(ans) == 1, err)
    st = ans[0]
    check("status: v 1, ok, cmd", st.get("v") == 1 and st.get("ok") is True and st.get("cmd") == "status")
    check("status: state UP", st["state"] == "UP", st["state"])
    check("status: NVRAM kind is pmem, emulated or msync",
          st["nvram"]["kind"] in ("pmem", "emulated", "msync"), str(st["nvram"]))
    check("status: NVRAM size 16 MiB", st["nvram"]["size"] == 16 << 20, str(st["nvram"]))
    check("status: NVRAM path", st["nvram"]["path"] == os.path.join(srv.dir, "nvram"))
    check("status: occupancy within 0..100", 0 <= st["occupancy_pct"] <= 100)
    check("status: area within the device", 0 < st["area_bytes"] <= st["nvram"]["size"])
    if traffic:
        check("status: dirty bytes after writes (destager held)", st["dirty_bytes"] > 0,
              str(st["dirty_bytes"]))
        check("status: oldest record has an age", st["oldest_age_ms"] > 0)
        check("status: efficiency in 0..100",
              isinstance(st["efficiency_pct"], (int, float)) and 0 < st["efficiency_pct"] <= 100,
              str(st["efficiency_pct"]))
        check("status: logged <= modifying calls", 0 < st["logged_calls"] <= st["modifying_calls"] + 0,
              "%s/%s" % (st["logged_calls"], st["modifying_calls"]))
    check("status: held destager reported", st["held"] is True)
    check("status: interval and uptime", st["interval_s"] >= 0 and st["uptime_s"] >= st["interval_s"])
    fast, slow, ro = (by_path(st, srv, n) for n in ("fast", "slow", "ro"))
    check("status: presto export on", fast and fast["presto"] is True and fast["presto_option"] is True,
          str(fast))
    check("status: nopresto export off", slow and slow["presto"] is False and slow["presto_option"] is False,
          str(slow))
    check("status: read-only export flagged", ro and ro["read_only"] is True and ro["presto"] is False,
          str(ro))


def test_stats(srv, traffic):
    rc, out, err = presto(srv, "-p")
    check("presto -p: exit 0", rc == 0, err)
    lines = out.splitlines()
    for field in ("statistics interval", "uptime", "procedure", "appends", "bytes appended",
                  "persists", "records per persist", "full-log waits", "runs", "bytes destaged",
                  "checkpoint time", "COMMITs avoided", "replayed", "handle redirects",
                  "calls in flight hold", "records in progress hold", "closed for their records"):
        check("presto -p: shows %s" % field, any(field in l for l in lines))
    table = []
    try:
        i = next(k for k, l in enumerate(lines) if l.startswith("procedure"))
        j = next(k for k, l in enumerate(lines) if l.startswith("total"))
        table = lines[i:j]
        check("presto -p: procedure columns line up", len(right_edges(table)) == 1 and len(table) > 1,
              str(right_edges(table)))
        if traffic:
            check("presto -p: WRITE row", any(l.split()[0] == "WRITE" for l in table))
    except StopIteration:
        check("presto -p: procedure table", False, out)
    kv = [l for l in lines if l.startswith("  ") and not l.strip().startswith(("procedure",))]
    numeric = [l for l in kv if l.rstrip()[-1].isdigit() or l.rstrip().endswith((" ms", " no", "yes"))]
    # the numbers of the key/value rows end in one column (ms values in another)
    plain = [l for l in numeric if l.rstrip()[-1].isdigit() and ")" not in l]
    check("presto -p: key/value figures line up", len(right_edges(plain)) == 1, str(right_edges(plain)))

    rc, ans, err = presto_json(srv, "-p")
    check("presto -p --json: exit 0, one answer", rc == 0 and len(ans) == 1, err)
    st = ans[0]
    check("stats: ok, cmd", st["ok"] is True and st["cmd"] == "stats")
    procs = {p["name"]: p for p in st["procs"]}
    check("stats: 28 procedures", len(st["procs"]) == 28 and "GETATTR" in procs and "MNT" in procs)
    check("stats: p50 <= p99 everywhere", all(p["p50_us"] <= p["p99_us"] for p in st["procs"]))
    # time in the NVRAM log: part of the calls' own time, for those answered from it
    check("stats: log_count <= count, log time within the calls' time everywhere",
          all(p["log_count"] <= p["count"] and
              p["log_mean_us"] * p["log_count"] <= p["mean_us"] * p["count"] * 1.001 + 0.01
              for p in st["procs"]),
          str([(p["name"], p["count"], p["mean_us"], p["log_count"], p["log_mean_us"])
               for p in st["procs"] if p["count"]]))
    check("stats: reads never logged", all(procs[n]["log_count"] == 0
                                           for n in ("NULL", "GETATTR", "LOOKUP", "READ")))
    lg, ds, rec = st["log"], st["destage"], st["recovery"]
    for k in ("appends", "append_bytes", "persists", "records_per_persist", "full_waits",
              "persist_errors", "fallbacks", "jukebox", "batch_hist"):
        check("stats: log.%s" % k, k in lg)
    for k in ("runs", "bytes", "last_ms", "mean_ms", "total_ms", "errors"):
        check("stats: destage.%s" % k, k in ds)
    for k in ("replayed", "records", "bytes", "ms", "redirects", "errors"):
        check("stats: recovery.%s" % k, k in rec)
    check("stats: commits_avoided, drc, uptime", "commits_avoided" in st and "hits" in st["drc"]
          and st["uptime_s"] >= 0)
    if traffic:
        check("stats: WRITE counted with latency", procs["WRITE"]["count"] > 0 and
              procs["WRITE"]["p99_us"] > 0)
        # the writes to the nopresto export went to disk instead
        w = procs["WRITE"]
        check("stats: WRITEs to the presto export answered from the log, with their time in it",
              0 < w["log_count"] < w["count"] and w["log_mean_us"] > 0, str(w))
        check("presto -p: logged WRITEs shown",
              any(l.split()[0] == "WRITE" and l.split()[6] == str(w["log_count"])
                  for l in table if l.split()), str(table))
        check("stats: appends and persists", lg["appends"] > 0 and lg["persists"] > 0 and
              lg["append_bytes"] > 0)
        check("stats: records per persist = appends / persists",
              abs(lg["records_per_persist"] - lg["appends"] / lg["persists"]) < 0.01)
        check("stats: COMMITs avoided counted", st["commits_avoided"] > 0, str(st["commits_avoided"]))


def test_list(srv):
    rc, out, err = presto(srv, "-l")
    check("presto -l: exit 0", rc == 0, err)
    check("presto -l: exports with clients and options",
          srv.export("fast") in out and "127.0.0.1(rw," in out and "*(ro," in out, out)
    # the export lines say why acceleration is off, as presto(8) says
    heads = {l.split("\t")[0]: l for l in out.splitlines() if l and not l.startswith("\t")}
    check("presto -l: the nopresto export is off because of nopresto",
          "presto=off" in heads.get(srv.export("slow"), "") and
          "nopresto" in heads.get(srv.export("slow"), "").split("presto=off", 1)[-1], str(heads))
    check("presto -l: the read-only export is off because it is read-only, not nopresto",
          "presto=off" in heads.get(srv.export("ro"), "") and "read-only" in heads.get(srv.export("ro"), "")
          and "nopresto" not in heads.get(srv.export("ro"), ""), str(heads))
    rc, ans, err = presto_json(srv, "-l")
    check("presto -l --json: exit 0", rc == 0 and len(ans) == 1, err)
    slow = by_path(ans[0], srv, "slow")
    check("exports: clients with options",
          slow and slow["clients"][0]["client"] == "127.0.0.1" and
          "nopresto" in slow["clients"][0]["options"].split(","), str(slow))
    check("exports: ids", all(isinstance(e["id"], int) and e["id"] > 0 for e in ans[0]["exports"]))


def test_flush(srv, traffic):
    t0 = time.time()
    rc, out, err = presto(srv, "-F")
    check("presto -F: exit 0", rc == 0, err)
    check("presto -F: says it is durable", "durable" in out, out)
    rc, ans, err = presto_json(srv)
    check("after -F: no dirty bytes", rc == 0 and ans[0]["dirty_bytes"] == 0, str(ans[0]["dirty_bytes"]))
    rc, ans, err = presto_json(srv, "-p")
    if traffic:
        check("after -F: a destage run with bytes", ans[0]["destage"]["runs"] >= 1 and
              ans[0]["destage"]["bytes"] > 0, str(ans[0]["destage"]))
    rc, ans, err = presto_json(srv, "-F")
    check("presto -F --json: ok with the time taken", rc == 0 and ans[0]["ok"] and ans[0]["ms"] >= 0)


def test_enable_disable(srv):
    rc, out, err = presto(srv, "-d", srv.export("fast"))
    check("presto -d EXPORT: exit 0", rc == 0, err)
    check("presto -d EXPORT: says off", "%s: presto off" % srv.export("fast") in out, out)
    rc, ans, err = presto_json(srv)
    check("after -d: export off", by_path(ans[0], srv, "fast")["presto"] is False)
    rc, out, err = presto(srv, "-u", srv.export("fast") + "/")
    check("presto -u EXPORT/ (trailing slash): exit 0", rc == 0, err)
    rc, ans, err = presto_json(srv)
    check("after -u: export on", by_path(ans[0], srv, "fast")["presto"] is True)

    # -u for all: the exports left off are named with their real reason
    rc, out, err = presto(srv, "-u")
    lines = {l.split(": ", 1)[0]: l for l in out.splitlines()}
    check("presto -u (all): the nopresto export is off (nopresto)",
          rc == 0 and "off" in lines.get(srv.export("slow"), "") and
          "nopresto" in lines.get(srv.export("slow"), ""), out)
    check("presto -u (all): the read-only export is off (read-only), not nopresto",
          rc == 0 and "read-only" in lines.get(srv.export("ro"), "") and
          "nopresto" not in lines.get(srv.export("ro"), ""), out)
    rc, ans, err = presto_json(srv, "-d")
    check("presto -d (all) --json: ok", rc == 0 and ans[0]["ok"] is True, err)
    check("after -d (all): every export off", all(not e["presto"] for e in ans[0]["exports"]))
    rc, ans, err = presto_json(srv, "-u")
    check("presto -u (all) --json: ok", rc == 0 and ans[0]["ok"] is True, err)
    check("after -u (all): presto export on, nopresto and read-only off",
          by_path(ans[0], srv, "fast")["presto"] and not by_path(ans[0], srv, "slow")["presto"]
          and not by_path(ans[0], srv, "ro")["presto"])

    bogus = os.path.join(srv.dir, "no-such-export")
    for opt in ("-u", "-d"):
        rc, out, err = presto(srv, opt, bogus)
        check("presto %s UNKNOWN: exit 1 naming it" % opt, rc == 1 and bogus in err,
              "rc=%d %s" % (rc, err))
        rc, ans, err = presto_json(srv, opt, bogus)
        check("presto %s UNKNOWN --json: ok false, error names it" % opt,
              rc == 1 and ans[0]["ok"] is False and bogus in ans[0]["error"])
    # the server's message quotes the name: its escape sequences (clear the
    # screen, retitle the window; C1 CSI) are printed escaped, not acted on
    evil = os.path.join(srv.dir, "no\x1b[2J\x1b]0;pwned\x07-such\u009b31m\\x")
    rc, out, err = presto(srv, "-d", evil)
    check("presto -d UNKNOWN-WITH-ESCAPES: exit 1, the name escaped",
          rc == 1 and "\x1b" not in err and "\x07" not in err and "\u009b" not in err and
          "no\\x1b[2J\\x1b]0;pwned\\x07-such\\u009b31m\\\\x" in err, "rc=%d %r" % (rc, err))
    rc, out, err = presto(srv, "--json", "-d", evil)
    check("presto --json -d UNKNOWN-WITH-ESCAPES: ASCII, the error names it",
          rc == 1 and out.isascii() and "\\u009b31m" in out.lower() and
          evil in json.loads(out.splitlines()[0])["error"], "rc=%d %r" % (rc, out))
    # a refused request changes nothing, even when other names were fine
    rc, out, err = presto(srv, "-d", srv.export("fast"), bogus)
    rc2, ans, _ = presto_json(srv)
    check("presto -d GOOD UNKNOWN: exit 1, GOOD left on",
          rc == 1 and by_path(ans[0], srv, "fast")["presto"] is True)
    rc, out, err = presto(srv, "-u", srv.export("slow"))
    check("presto -u NOPRESTO-EXPORT: exit 1 saying nopresto", rc == 1 and "nopresto" in err, err)
    # a name that is not UTF-8 cannot go into the JSON request: refused, and
    # never dropped (an empty list would mean every export)
    rc, out, err = presto(srv, "-d", srv.export("fast") + os.fsdecode(b"\xff"))
    rc2, ans, _ = presto_json(srv)
    check("presto -d NOT-UTF-8: usage error (64), nothing switched off",
          rc == 64 and "UTF-8" in err and by_path(ans[0], srv, "fast")["presto"] is True,
          "rc=%d %s" % (rc, err))


def test_reset(srv, traffic):
    rc, ans, err = presto_json(srv, "-p")
    before = ans[0]
    time.sleep(1.1)
    rc, out, err = presto(srv, "-R")
    check("presto -R: exit 0", rc == 0 and "reset" in out, err)
    rc, ans, err = presto_json(srv, "-p")
    st = ans[0]
    check("after -R: procedure counters zero", all(p["count"] == 0 for p in st["procs"]),
          str([(p["name"], p["count"]) for p in st["procs"] if p["count"]]))
    check("after -R: log counters zero", st["log"]["appends"] == 0 and st["log"]["persists"] == 0)
    check("after -R: procedures' log time zero",
          all(p["log_count"] == 0 and p["log_mean_us"] == 0 for p in st["procs"]))
    check("after -R: interval restarted, uptime not",
          st["interval_s"] < before["interval_s"] + 1 and st["uptime_s"] >= before["uptime_s"]
          and st["interval_s"] <= st["uptime_s"])
    rc, ans, err = presto_json(srv)
    check("after -R: efficiency undefined (no calls)", ans[0]["efficiency_pct"] is None)
    rc, out, err = presto(srv)
    check("after -R: presto shows '-' for efficiency", "write-log efficiency   -" in out, out)


def test_watch(srv):
    t0 = time.time()
    rc, ans, err = presto_json(srv, "-w", "1", "3")
    dt = time.time() - t0
    check("presto -w 1 3 --json: three answers, about 2 s", rc == 0 and len(ans) == 3 and 1.8 < dt < 10,
          "rc=%d n=%d dt=%.1f" % (rc, len(ans), dt))
    rc, out, err = presto(srv, "-p", "-w", "1", "2")
    check("presto -p -w 1 2: two timestamped reports",
          rc == 0 and out.count("--- ") == 2 and out.count("procedure") == 2, out[:200])
    rc, ans, err = presto_json(srv, "-u", "-w", "1", "2")
    check("presto -u -w 1 2: COUNT is a count, not an export name (enable, then two reports)",
          rc == 0 and len(ans) == 3 and ans[0]["cmd"] == "enable" and all(a["ok"] for a in ans),
          "rc=%d %s" % (rc, err))


def test_watch_across_restart(srv):
    # each report on a new connection: the server drops clients idle for
    # 15 minutes, and a watch goes on across a restart of the server
    w = subprocess.Popen([PRESTO, "-s", srv.sock, "--json", "-w", "3", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    srv.stop()
    srv.start()
    out, err = w.communicate(timeout=30)
    check("presto -w 3 2 goes on across a restart of presto-nfsd",
          w.returncode == 0 and out.count('"cmd":"status"') == 2, "rc=%d %s" % (w.returncode, err))
    # a restart that takes longer than the interval: the reports due while
    # the server is away say so, and the watch goes on once it is back
    w = subprocess.Popen([PRESTO, "-s", srv.sock, "--json", "-w", "1", "6"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    srv.stop()
    time.sleep(2.2)
    srv.start()
    out, err = w.communicate(timeout=30)
    n = out.count('"cmd":"status"')
    check("presto -w 1 6 goes on across a restart longer than its interval",
          w.returncode == 0 and 3 <= n < 6 and "cannot reach" in err,
          "rc=%d, %d reports, %s" % (w.returncode, n, err.strip()))


def test_unreachable(srv):
    missing = os.path.join(srv.dir, "nowhere.sock")
    rc, out, err = presto(srv, sock=missing)
    check("no socket: exit 2 naming the path, not running", rc == 2 and missing in err and "not running" in err,
          "rc=%d %s" % (rc, err))
    rc, out, err = presto(srv, "-p", "--json", sock=missing)
    check("no socket --json -p: exit 2", rc == 2 and out == "")
    stale = os.path.join(srv.dir, "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()
    rc, out, err = presto(srv, sock=stale)
    check("stale socket: exit 2, not running", rc == 2 and stale in err and "not running" in err,
          "rc=%d %s" % (rc, err))
    rc, out, err = presto(srv, user=65534)
    check("as nobody: exit 2, permission denied", rc == 2 and srv.sock in err and "permission denied" in err,
          "rc=%d %s" % (rc, err))


def test_protocol(srv):
    c = Ctl(srv.sock)
    a = c.call({"v": 1, "cmd": "ping", "id": 7})
    check("ping: protocol 1, id echoed", a["ok"] and a["protocol"] == 1 and a["id"] == 7, str(a))
    c.send(b"this is not json\n")
    a = c.recv_line()
    check("bad JSON: error object", a["ok"] is False and "bad request" in a["error"] and a["v"] == 1, str(a))
    c.send(b"[1,2]\n")
    a = c.recv_line()
    check("not an object: error", a["ok"] is False and "object" in a["error"], str(a))
    a = c.call({"v": 1, "cmd": "frobnicate"})
    check("unknown command: error naming it", a["ok"] is False and "frobnicate" in a["error"], str(a))
    # messages quote names cut to a length in bytes: never half a character
    a = c.call({"v": 1, "cmd": "a" + "\u00e9" * 100})
    check("unknown command of 100 'é': error said", a["ok"] is False and
          "unknown command" in a.get("error", ""), str(a)[:200])
    a = c.call({"cmd": "enable", "exports": ["/" + "\u00e9" * 700]})
    check("unknown export of 700 'é': error said", a["ok"] is False and
          "unknown export" in a.get("error", ""), str(a)[:200])
    a = c.call({"v": 2, "cmd": "status"})
    check("protocol version 2: refused", a["ok"] is False and "version" in a["error"], str(a))
    a = c.call({"cmd": "enable", "exports": "notalist"})
    check("enable with a bad argument: error", a["ok"] is False, str(a))
    a = c.call({"v": 1, "cmd": "status"})
    check("connection usable after errors", a["ok"] is True and a["cmd"] == "status")
    # pipelined: several requests in one write, answers in order (slow ones included)
    c.send(b'{"cmd":"ping","id":1}\n{"cmd":"flush","id":2}\n\n{"cmd":"stats","id":3}\n'
           b'{"cmd":"exports","id":4}\n')
    ids = [c.recv_line()["id"] for _ in range(4)]
    check("pipelined requests answered in order", ids == [1, 2, 3, 4], str(ids))
    # hold: release the destager, see it in status, hold it again
    a = c.call({"cmd": "hold", "hold": False})
    check("hold false: released", a["ok"] is True and a["held"] is False, str(a))
    st = c.call({"cmd": "status"})
    check("status after release: held false", st["held"] is False, str(st.get("held")))
    a = c.call({"cmd": "hold", "hold": True})
    check("hold true: held", a["ok"] is True and a["held"] is True, str(a))
    st = c.call({"cmd": "status"})
    check("status after hold: held true", st["held"] is True, str(st.get("held")))
    a = c.call({"cmd": "hold", "hold": "yes"})
    check("hold with a non-boolean: error", a["ok"] is False and "hold" in a["error"], str(a))
    c.close()

    # a request without its newline, then a half-close: still answered
    c = Ctl(srv.sock)
    c.send(b'{"cmd":"ping","id":"last"}')
    c.s.shutdown(socket.SHUT_WR)
    a = c.recv_line()
    check("last line without newline answered at EOF", a and a["id"] == "last", str(a))
    c.close()

    # a request written whole, then the connection closed at once without
    # reading the answer (echo ... | nc -U): it is carried out all the same,
    # not dropped or not depending on whether the close came first
    done = 0
    for i in range(20):
        want = i % 2 == 1          # release, hold, release, ... (held at start)
        c = Ctl(srv.sock)
        c.send(json.dumps({"cmd": "hold", "hold": want}).encode() + b"\n")
        c.close()
        ok = False
        for _ in range(50):
            c = Ctl(srv.sock)
            st = c.call({"cmd": "status"})
            c.close()
            if st["held"] is want:
                ok = True
                break
            time.sleep(0.02)
        done += ok
    c = Ctl(srv.sock)
    c.call({"cmd": "hold", "hold": True})
    c.close()
    check("a request followed at once by a close is carried out (20 of 20)", done == 20, "%d of 20" % done)

    # over-long line: an error, then the connection is closed
    c = Ctl(srv.sock)
    try:
        c.send(b"{" + b" " * (70 * 1024))
    except OSError:
        pass
    a = c.recv_line()
    check("line over 64 KiB: error", a and a["ok"] is False and "longer" in a["error"], str(a))
    check("line over 64 KiB: connection closed", c.recv_line() is None)
    c.close()

    # a client that keeps requests coming while it reads every answer: its
    # answers never all drain at once, and the server's buffer must reuse
    # what was sent (it was closed at 4 MiB of answers, some 800 of these)
    c = Ctl(srv.sock)
    n, req = 3000, b'{"cmd":"stats"}\n'
    out, sent, got, deadline = req * n, 0, 0, time.time() + 60
    c.s.setblocking(False)
    while got < n and time.time() < deadline:
        r, w, _ = select.select([c.s], [c.s] if sent < len(out) else [], [], 1)
        if w:
            sent += c.s.send(out[sent:sent + 65536])
        if r:
            d = c.s.recv(1 << 20)
            if not d:
                break
            got += d.count(b"\n")
    check("3000 pipelined stats read as they come: all answered", got == n, "%d of %d" % (got, n))
    c.close()


def test_stuck_clients(srv, traffic):
    # one client sends half a request and stalls; another floods requests
    # and never reads its answers; neither may stall the others or NFS
    half = Ctl(srv.sock)
    half.send(b'{"cmd":"sta')
    flood = Ctl(srv.sock)
    flood.s.setblocking(False)
    sent = 0
    try:
        for _ in range(20000):
            flood.s.send(b'{"cmd":"stats"}\n')
            sent += 1
    except BlockingIOError:
        pass
    t0 = time.time()
    rc, out, err = presto(srv, "-p", timeout=20)
    dt = time.time() - t0
    check("stuck and flooding clients do not stall presto -p", rc == 0 and dt < 3, "rc=%d dt=%.1f" % (rc, dt))
    if traffic:
        t0 = time.time()
        p = subprocess.run(["nfs-ls", srv.url("fast", "")], capture_output=True, text=True, timeout=30)
        check("NFS still served meanwhile", p.returncode == 0 and "f0" in p.stdout and time.time() - t0 < 5,
              p.stderr)
    half.close()
    flood.close()

    # too many clients: the one over the bound is told so and closed
    conns = []
    refused = None
    for _ in range(40):
        c = Ctl(srv.sock)
        conns.append(c)
    for c in conns:
        c.s.settimeout(0.5)
        try:
            d = c.s.recv(4096)
            if d:
                refused = json.loads(d.split(b"\n")[0])
                break
        except socket.timeout:
            pass
    check("connection over the bound refused with a reason",
          refused is not None and refused["ok"] is False and refused.get("refused") is True
          and "too many" in refused["error"], str(refused))
    for c in conns:
        c.close()
    time.sleep(0.3)
    rc, out, err = presto(srv)
    check("served again once the connections are closed", rc == 0, err)


def test_reload(srv):
    srv.write_exports("%s 127.0.0.1(rw,insecure)\n" % srv.export("late"))
    c = Ctl(srv.sock)
    a = c.call({"v": 1, "cmd": "reload"})
    if a["ok"] is False and "cannot reload" in a["error"]:
        skipped.append("reload (the server was built without control_set_reload)")
        print("SKIP reload: %s" % a["error"])
        c.close()
        return
    check("reload: ok with the new export count", a["ok"] is True and a["exports"] == 4, str(a))
    rc, ans, err = presto_json(srv, "-l")
    check("reload: new export listed", by_path(ans[0], srv, "late") is not None)
    # a bad file is refused and the exports in force stay
    with open(srv.exports_file, "a") as f:
        f.write("/no/such/dir 127.0.0.1(rw)\n")
    a = c.call({"v": 1, "cmd": "reload"})
    check("reload of a bad file: error, old exports kept", a["ok"] is False and a["error"], str(a))
    rc, ans, err = presto_json(srv, "-l")
    check("reload of a bad file: still 4 exports", len(ans[0]["exports"]) == 4)
    c.close()
    srv.write_exports()


def main():
    if os.geteuid() != 0:
        print("presto-cli: presto-nfsd needs root; 0 passed, 1 failed")
        return 1
    for exe in (NFSD, PRESTO):
        if not os.access(exe, os.X_OK):
            print("presto-cli: %s is missing (make first); 0 passed, 1 failed" % exe)
            return 1
    top = tempfile.mkdtemp(prefix="presto-cli.")
    os.chmod(top, 0o755)    # nobody must reach the socket's directory for the EACCES check
    srv = Server(top)
    signal.signal(signal.SIGALRM, lambda *_: (srv.stop(signal.SIGKILL), os._exit(1)))
    signal.alarm(300)
    try:
        srv.write_exports()
        srv.start()
        os.chmod(srv.state, 0o755)
        test_socket(srv)
        test_help_and_usage(srv)
        traffic = shutil.which("nfs-cp") is not None and nfs_traffic(srv)
        if not traffic:
            skipped.append("NFS traffic (nfs-cp missing or failing)")
        test_status(srv, traffic)
        test_stats(srv, traffic)
        test_list(srv)
        test_watch(srv)
        test_protocol(srv)
        test_stuck_clients(srv, traffic)
        test_flush(srv, traffic)
        test_enable_disable(srv)
        test_reset(srv, traffic)
        test_unreachable(srv)
        test_reload(srv)
        test_watch_across_restart(srv)

        # SIGKILL leaves the socket behind: the next start replaces it
        srv.stop(signal.SIGKILL)
        check("socket left behind by SIGKILL", os.path.exists(srv.sock))
        srv.start()
        rc, out, err = presto(srv)
        check("restart over a stale socket: presto works", rc == 0, err)
        rc = srv.stop()
        check("SIGTERM: exit 0 and socket removed", rc == 0 and not os.path.exists(srv.sock),
              "rc=%s exists=%s" % (rc, os.path.exists(srv.sock)))
    except Exception as e:  # report, count, clean up
        import traceback
        traceback.print_exc()
        check("test run completed", False, repr(e))
    finally:
        srv.stop(signal.SIGKILL)
        if failed == 0:
            shutil.rmtree(top, ignore_errors=True)
        else:
            print("kept %s for inspection" % top)
    for s in skipped:
        print("skipped: %s" % s)
    print("presto-cli: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
