#!/usr/bin/env python3
"""test_admind_api.py -- presto-admind's HTTP API against a live presto-nfsd
(issue 6). Every answer is parsed (JSON, or the Prometheus text format), not
grepped. Covers: status codes and JSON errors, the token and origin rules,
the Host check, bounds (oversized and malformed requests, path traversal),
the actions (flush, acceleration off/on by path and by id, reset), /metrics,
the history in the SQLite file (WAL, schema version, rows), a restart of
presto-nfsd (a gap, then sampling again) and of presto-admind (history kept),
and, in a network namespace of its own, a non-loopback bind where every
request needs the token.

Run by test-admind-api.sh; needs $PRESTO_BIN/presto-nfsd and presto-admind.
Prints "ok - ..." / "not ok - ..." and a last line "N passed, N failed".
"""
import base64
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

TOP = os.environ.get("PRESTO_TOP") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("PRESTO_BIN") or os.path.join(TOP, "bin")
O = os.environ.get("O", "build/default")
LOADGEN = os.path.join(TOP, O, "bench", "loadgen")

passed = failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - %s" % what)
    else:
        failed += 1
        print("not ok - %s%s" % (what, ": " + str(detail)[:400] if detail != "" else ""))
    sys.stdout.flush()
    return cond


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, log, env=None):
        f = open(log, "w")
        p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)

    def stop_all(self):
        for p in self.procs:
            self.stop(p)


def wait_line(path, regex, seconds):
    end = time.time() + seconds
    while time.time() < end:
        try:
            with open(path) as f:
                m = re.search(regex, f.read())
                if m:
                    return m
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    return None


class Client:
    def __init__(self, port, host="127.0.0.1"):
        self.port, self.host = port, host

    def req(self, method, path, body=None, headers=None, raw_body=None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        h = dict(headers or {})
        data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else None)
        try:
            c.request(method, path, body=data, headers=h)
        except (BrokenPipeError, ConnectionResetError):
            pass    # the server answered (e.g. 413) before taking the whole body
        try:
            r = c.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError):
            c.close()
            return 0, None, None, b""     # no answer at all: a failure for every check

        text = r.read()
        c.close()
        ctype = r.getheader("Content-Type") or ""
        doc = None
        if ctype.startswith("application/json"):
            try:
                doc = json.loads(text)
            except ValueError:
                doc = "NOT JSON: %r" % text[:200]
        return r.status, doc, r, text


def is_json_error(status, doc, want):
    return status == want and isinstance(doc, dict) and isinstance(doc.get("error"), str) and doc.get("status") == want


def main():
    for b in ("presto-nfsd", "presto-admind"):
        if not os.access(os.path.join(BIN, b), os.X_OK):
            check(False, "%s is built (make)" % b)
            return
    tmp = tempfile.mkdtemp(prefix="presto-admind-api-")
    nvram = "/dev/shm/presto-admind-api-%d" % os.getpid()
    procs = Procs()
    try:
        run(tmp, nvram, procs)
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            os.unlink(nvram)
        except FileNotFoundError:
            pass


def start_nfsd(procs, tmp, nvram):
    log = os.path.join(tmp, "nfsd.log")
    env = dict(os.environ, PMEM_IS_PMEM_FORCE="1")
    p = procs.start([os.path.join(BIN, "presto-nfsd"), "--exports", os.path.join(tmp, "exports"),
                     "--state-dir", os.path.join(tmp, "state"), "--bind", "127.0.0.1",
                     "--nfs-port", "0", "--mount-port", "0", "--no-rpcbind", "--foreground",
                     "--nvram", nvram, "--nvram-size", "64M"], log, env)
    m = wait_line(log, r"ready nfs=(\d+) mount=(\d+)", 15)
    return p, m


def start_admind(procs, tmp, listen="127.0.0.1:0", extra=(), log_name="admind.log"):
    log = os.path.join(tmp, log_name)
    if os.path.exists(log):
        os.unlink(log)
    p = procs.start([os.path.join(BIN, "presto-admind"), "--control", os.path.join(tmp, "state", "control.sock"),
                     "--db", os.path.join(tmp, "admind.db"), "--token-file", os.path.join(tmp, "admin.token"),
                     "--listen", listen] + list(extra), log)
    m = wait_line(log, r"ready http://[0-9.]+:(\d+)/", 10)
    return p, (int(m.group(1)) if m else None)


def nulls(port, n):
    """n NFSv3 NULL calls (RFC 5531 records, AUTH_NONE), pipelined, replies read"""
    with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as so:
        body = b"".join(
            (0x80000028).to_bytes(4, "big") + b"".join(x.to_bytes(4, "big") for x in
                                                         (0x5000 + i, 0, 2, 100003, 3, 0, 0, 0, 0, 0))
            for i in range(n))
        so.sendall(body)
        need, got = 28 * n, 0   # a NULL reply: mark, xid, REPLY, accepted, verifier, SUCCESS
        while got < need:
            b = so.recv(65536)
            if not b:
                raise OSError("presto-nfsd closed the connection after %d of %d bytes" % (got, need))
            got += len(b)


def failed_mnts(port, n):
    """n MOUNT v3 MNT calls of a path that is not exported (AUTH_UNIX, one
    connection, one call at a time); the mountstat3 of each reply"""
    path = b"/no/such/export"
    xdr_path = len(path).to_bytes(4, "big") + path + b"\0" * (-len(path) % 4)
    name = b"admind-test"
    cred = b"".join(x.to_bytes(4, "big") for x in (0, len(name))) + name + b"\0" * (-len(name) % 4) \
        + b"".join(x.to_bytes(4, "big") for x in (0, 0, 0))     # uid, gid, no gids
    out = []
    with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as so:
        f = so.makefile("rb")
        for i in range(n):
            body = b"".join(x.to_bytes(4, "big") for x in (0x6000 + i, 0, 2, 100005, 3, 1, 1, len(cred))) \
                + cred + (0).to_bytes(4, "big") * 2 + xdr_path
            so.sendall((0x80000000 | len(body)).to_bytes(4, "big") + body)
            mark = int.from_bytes(f.read(4), "big")
            rep = f.read(mark & 0x7fffffff)
            # xid, REPLY, MSG_ACCEPTED, verifier (flavor, length 0), SUCCESS, mountstat3
            words = [int.from_bytes(rep[j:j + 4], "big") for j in range(0, 28, 4)]
            if words[1:3] != [1, 0] or words[5] != 0:
                raise OSError("MNT call %d not accepted: %r" % (i, words))
            out.append(words[6])
    return out


HEADER_TIMEOUT = 10     # seconds for a request's headers and body (admind_http.c)


def slowloris(port, token=None):
    """32 connections (the per-IP limit) trickle header lines, one every 2 s
    (well within the 30 s idle timeout), and never end them: they fill the
    limit for a while, then each is closed by the server within
    HEADER_TIMEOUT s, and the console answers again. With a token, the
    headers of an authorised POST go out whole and its announced body
    trickles instead, a byte every 2 s."""
    what = "bodies" if token else "headers"
    # The connections of an earlier test may still count against the limit
    # for a moment after the server closed them (presto-admind answers
    # again as soon as one slot is free), and a connection over the limit
    # is accepted and closed at once: so the 32 are only counted on once
    # none of them was cut within 0.5 s; else they are closed and the
    # set-up is tried again (at most 10 times, a second apart).
    for _ in range(10):
        socks = []
        for i in range(32):
            sk = socket.create_connection(("127.0.0.1", port), timeout=10)
            if token:
                sk.sendall(b"POST /api/flush HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 4000\r\n\r\n" % token.encode())
            else:
                sk.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(sk)
        t0 = time.time()
        time.sleep(0.5)
        cut = select.select(socks, [], [], 0)[0]
        if not cut:
            break
        for sk in socks:
            sk.close()
        time.sleep(1)
    check(not cut, "32 slow connections (%s) are all let in" % what,
          "%d of 32 cut at once, 10 times" % len(cut))
    closed = {}
    held = Client(port).req("GET", "/api/status")[0]
    last = 0.0
    while len(closed) < len(socks) and time.time() - t0 < HEADER_TIMEOUT + 6:
        now = time.time()
        trickle = now - last >= 2
        if trickle:
            last = now
        for i, sk in enumerate(socks):
            if i in closed:
                continue
            try:
                r, _, _ = select.select([sk], [], [], 0)
                if r and not sk.recv(4096):
                    closed[i] = now - t0
                elif trickle:
                    sk.sendall(b" " if token else b"X-Slow-%d: x\r\n" % i)
            except OSError:
                closed[i] = now - t0
        time.sleep(0.1)
    after = wait_for(lambda: Client(port).req("GET", "/api/status")[0] == 200, 3)
    for sk in socks:
        sk.close()
    check(held != 200, "32 slow connections (%s) fill the per-IP limit (the 33rd is refused)" % what, held)
    check(len(closed) == len(socks) and max(closed.values()) <= HEADER_TIMEOUT + 3,
          "connections whose %s trickle in are closed within %d s" % (what, HEADER_TIMEOUT),
          "%d of %d closed, last at %.1f s" % (len(closed), len(socks), max(closed.values(), default=0)))
    check(after, "the console answers again once the slow connections (%s) are closed" % what)


def wait_for(fn, seconds):
    end = time.time() + seconds
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    return fn()


def run(tmp, nvram, procs):
    exp = os.path.join(tmp, "export")
    slow = os.path.join(tmp, "nopresto")
    os.makedirs(exp)
    os.makedirs(slow)
    os.makedirs(os.path.join(tmp, "state"), mode=0o700)
    with open(os.path.join(tmp, "exports"), "w") as f:
        f.write("%s 127.0.0.1(rw,insecure,no_root_squash)\n" % exp)
        f.write("%s 127.0.0.1(rw,insecure,no_root_squash,nopresto)\n" % slow)

    nfsd, m = start_nfsd(procs, tmp, nvram)
    if not check(m is not None, "presto-nfsd starts"):
        return
    nfs_port, mnt_port = m.group(1), m.group(2)
    admind, port = start_admind(procs, tmp)
    if not check(port is not None, "presto-admind starts and prints its address",
                 open(os.path.join(tmp, "admind.log")).read()):
        return
    cl = Client(port)

    # ---- the token file ----
    tpath = os.path.join(tmp, "admin.token")
    st = os.stat(tpath)
    token = open(tpath).read().strip()
    check(stat.S_IMODE(st.st_mode) == 0o600 and re.fullmatch(r"[0-9a-f]{64}", token),
          "the admin token is created 0600 with 256 random bits", oct(st.st_mode))
    auth = {"Authorization": "Bearer " + token}

    # ---- a load, so that rates are not zero ----
    if os.access(LOADGEN, os.X_OK):
        load = procs.start([LOADGEN, "-H", "127.0.0.1", "-n", nfs_port, "-m", mnt_port, "-e", exp,
                            "-c", "2", "-d", "4", "-t", "6", "-o", "write,create,getattr"],
                           os.path.join(tmp, "load.log"))
        time.sleep(3)
    else:
        blob = os.path.join(tmp, "blob")
        with open(blob, "wb") as f:
            f.write(os.urandom(1 << 20))
        for i in range(20):
            subprocess.run(["nfs-cp", blob, "nfs://127.0.0.1%s/f%d?nfsport=%s&mountport=%s&version=3"
                            % (exp, i, nfs_port, mnt_port)], check=False, capture_output=True)
        load = None
    time.sleep(1.5)

    # ---- reads ----
    s, doc, r, _ = cl.req("GET", "/api/status")
    check(s == 200 and doc["reachable"] is True and doc["nfsd"]["state"] == "UP"
          and doc["admind"]["samples"] > 0 and isinstance(doc["alarms"], list),
          "GET /api/status: 200, presto-nfsd UP, samples taken", doc)
    check(r.getheader("Cache-Control") == "no-store" and r.getheader("X-Content-Type-Options") == "nosniff",
          "API answers are not cached and not sniffed")
    check(r.getheader("Access-Control-Allow-Origin") is None, "no CORS header")
    wait_for(lambda: cl.req("GET", "/api/stats")[1]["rates"].get("ops", 0) > 0, 5)
    s, doc, _, _ = cl.req("GET", "/api/stats")
    check(s == 200 and len(doc["stats"]["procs"]) == 28 and doc["rates"].get("ops", 0) > 0
          and "log" in doc["stats"] and "destage" in doc["stats"],
          "GET /api/stats: 28 procedures, per-second rates under load",
          doc and (doc["stats"]["uptime_s"], sum(p["count"] for p in doc["stats"]["procs"]), doc["rates"].get("ops")))
    s, doc, _, _ = cl.req("GET", "/api/exports")
    ex = {e["path"]: e for e in (doc or {}).get("exports", [])}
    check(s == 200 and ex.get(exp, {}).get("presto") is True and ex.get(slow, {}).get("presto") is False,
          "GET /api/exports: acceleration on for one, off (nopresto) for the other", doc)
    s, doc, _, _ = cl.req("GET", "/api/metrics")
    check(s == 200 and {"up", "ops", "log.occupancy_pct", "ops.WRITE"} <= set(doc["metrics"]),
          "GET /api/metrics lists the stored metrics", doc)
    s, doc, _, _ = cl.req("GET", "/api/series?metric=up,ops,ops.WRITE,lat_us,log.occupancy_pct&from=-30&step=1")
    ok = s == 200 and doc["source"] == "raw" and len(doc["t"]) == 30 and all(len(v) == 30 for v in doc["series"].values())
    check(ok and any(v and v > 0 for v in doc["series"]["ops"]) and any(v == 1 for v in doc["series"]["up"]),
          "GET /api/series: 30 one-second points, operations recorded", doc)
    s, doc, _, _ = cl.req("GET", "/api/series?metric=ops.MKNOD,no_such_metric&from=-10&step=1")
    v = (doc or {}).get("series", {})
    check(s == 200 and any(x == 0 for x in v.get("ops.MKNOD", [])) and v.get("no_such_metric")
          and all(x is None for x in v["no_such_metric"]),
          "a rate that stayed zero reads 0, a name never stored (a typo) reads null", v)
    s, doc, _, _ = cl.req("GET", "/api/series?metric=ops&from=-86400&step=60")
    check(s == 200 and doc["source"] == "rollup" and doc["step"] == 60 and len(doc["t"]) in (1440, 1441),
          "a day at one point a minute comes from the rollups", doc and {k: doc[k] for k in ("source", "step")})

    if load:
        load.wait(30)

    # ---- percentiles of each second, not of the statistics interval ----
    if load is not None:
        load.wait()
        slowp = procs.start([LOADGEN, "-H", "127.0.0.1", "-n", nfs_port, "-m", mnt_port, "-e", slow,
                             "-c", "2", "-d", "4", "-t", "3", "-o", "write"], os.path.join(tmp, "slow.log"))
        slowp.wait()
        t_fast = int(time.time()) + 1
        fastp = procs.start([LOADGEN, "-H", "127.0.0.1", "-n", nfs_port, "-m", mnt_port, "-e", exp,
                             "-c", "2", "-d", "4", "-t", "4", "-o", "write"], os.path.join(tmp, "fast.log"))
        fastp.wait()
        time.sleep(1.5)
        s, doc, _, _ = cl.req("GET", "/api/series?metric=p99_us.WRITE&from=%d&to=%d&step=1"
                              % (t_fast - 4, t_fast + 4))
        v = (doc or {}).get("series", {}).get("p99_us.WRITE", [])
        slow99 = sorted(x for x in v[:3] if x is not None)
        fast99 = [x for x in v[-4:] if x is not None]
        # nopresto WRITEs fsync (about a millisecond), logged ones do not:
        # a second of logged WRITEs has a lower p99 than the fsync'ed ones
        # before it, which the interval's p99 (over both) would not show
        check(slow99 and fast99 and min(fast99) < slow99[len(slow99) // 2] / 2,
              "p99_us.WRITE is of each second: low again once the slow WRITEs stop", v)

    # ---- bad requests: 4xx with a JSON error ----
    for path, want, what in [
        ("/api/series", 400, "series without metric"),
        ("/api/series?metric=ops&from=abc", 400, "series with a malformed from"),
        ("/api/series?metric=ops&from=100&to=50", 400, "series with from after to"),
        ("/api/series?metric=ops&step=0", 400, "series with step 0"),
        ("/api/series?metric=ops&step=-5", 400, "series with a negative step"),
        ("/api/series?metric=ops&from=-86000&step=1", 400, "series of 86000 points"),
        ("/api/series?metric=ops;DROP%20TABLE%20sample", 400, "series with a bad metric name"),
        ("/api/series?metric=" + ",".join("m%d" % i for i in range(33)), 400, "series of 33 metrics"),
        ("/api/series?metric=" + ",".join("m%d" % i for i in range(32)) + "&from=-20000&step=1", 400,
         "32 series of 20,000 points (640,000 in all)"),
        ("/api/series?metric=" + "x" * 70, 400, "series with a 70-character name"),
        ("/api/nothing", 404, "unknown API"),
        ("/nothing.html", 404, "unknown page"),
        ("/../../etc/passwd", 404, "path traversal"),
        ("/%2e%2e/%2e%2e/etc/passwd", 404, "escaped path traversal"),
        ("/.hidden.js", 404, "dot file"),
        ("/%FF", 404, "a page name that is not UTF-8"),
        ("/api/%FF%FE", 404, "an API name that is not UTF-8"),
    ]:
        s, doc, _, _ = cl.req("GET", path)
        check(is_json_error(s, doc, want), "%s: %d with a JSON error" % (what, want), (s, doc))
    s, doc, r, _ = cl.req("GET", "/api/flush")
    check(is_json_error(s, doc, 405) and "POST" in (r.getheader("Allow") or ""), "GET /api/flush: 405, Allow: POST")
    s, doc, r, _ = cl.req("POST", "/api/status", headers=auth)
    check(is_json_error(s, doc, 405), "POST /api/status: 405")
    s, doc, _, _ = cl.req("DELETE", "/api/exports", headers=auth)
    check(is_json_error(s, doc, 405), "DELETE /api/exports: 405")

    # ---- token and origin ----
    s, doc, r, _ = cl.req("POST", "/api/flush")
    check(is_json_error(s, doc, 401) and (r.getheader("WWW-Authenticate") or "").startswith("Bearer"),
          "POST without the token: 401, WWW-Authenticate", (s, doc))
    s, doc, _, _ = cl.req("POST", "/api/flush", headers={"Authorization": "Bearer " + "0" * 64})
    check(is_json_error(s, doc, 401), "POST with a wrong token: 401")
    s, doc, _, _ = cl.req("POST", "/api/flush", headers={"Authorization": "Bearer " + token[:-1]})
    check(is_json_error(s, doc, 401), "POST with a truncated token: 401")
    s, doc, _, _ = cl.req("POST", "/api/flush", headers={"Authorization": "Basic " + base64.b64encode(b"admin:nope").decode()})
    check(is_json_error(s, doc, 401), "POST with a wrong Basic password: 401")
    s, doc, _, _ = cl.req("POST", "/api/flush", headers={"Authorization": "Basic !!!notbase64"})
    check(is_json_error(s, doc, 401), "POST with malformed Basic credentials: 401")
    s, doc, _, _ = cl.req("POST", "/api/flush", headers=dict(auth, Origin="http://evil.example"))
    check(is_json_error(s, doc, 403), "POST from another origin, even with the token: 403")
    s, doc, _, _ = cl.req("POST", "/api/flush", headers=dict(auth, Origin="null"))
    check(is_json_error(s, doc, 403), "POST from an opaque origin: 403")
    s, doc, _, _ = cl.req("POST", "/api/flush", headers=dict(auth, **{"Sec-Fetch-Site": "cross-site"}))
    check(is_json_error(s, doc, 403), "POST marked Sec-Fetch-Site: cross-site: 403")
    s, doc, _, _ = cl.req("POST", "/api/flush", headers={"Origin": "http://evil.example"})
    check(s == 403, "POST from another origin without the token: refused")
    s, doc, _, _ = cl.req("GET", "/api/status", headers={"Host": "evil.example:%d" % port})
    check(is_json_error(s, doc, 421), "a request for another host name (DNS rebinding): 421")
    s, doc, _, _ = cl.req("GET", "/api/status", headers={"Host": "localhost:%d" % port})
    check(s == 200, "Host: localhost is served")

    # ---- /metrics ----
    s, _, r, text = cl.req("GET", "/metrics")
    text = text.decode()
    types, samples, bad = {}, {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
        elif line.startswith("#"):
            continue
        else:
            mm = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)', line)
            if not mm:
                bad.append(line)
                continue
            float(mm.group(3))
            samples[mm.group(1) + (mm.group(2) or "")] = float(mm.group(3))
    check(s == 200 and r.getheader("Content-Type", "").startswith("text/plain; version=0.0.4") and not bad,
          "GET /metrics parses as the Prometheus text format", bad[:3])
    check(types.get("presto_nfs_requests_total") == "counter" and samples.get('presto_nfs_requests_total{proc="WRITE"}', 0) > 0,
          "presto_nfs_requests_total{proc} is a counter with the WRITE calls")
    check(types.get("presto_nfs_request_duration_seconds") == "histogram"
          and 'presto_nfs_request_duration_seconds_bucket{proc="WRITE",le="+Inf"}' in samples
          and 'presto_nfs_request_duration_seconds_bucket{proc="WRITE",le="0.001"}' in samples,
          "latency is a histogram in seconds (_bucket with le, +Inf)")
    wb = sorted((float(k.split('le="')[1].split('"')[0]), v) for k, v in samples.items()
                if k.startswith('presto_nfs_request_duration_seconds_bucket{proc="WRITE",'))
    check("latency buckets are cumulative, +Inf equals _count",
          all(wb[i][1] <= wb[i + 1][1] for i in range(len(wb) - 1))
          and wb and wb[-1][1] == samples.get('presto_nfs_request_duration_seconds_count{proc="WRITE"}'),
          str(wb[-3:]))
    check(types.get("presto_nfs_logged_requests_total") == "counter"
          and types.get("presto_nfs_log_seconds_total") == "counter"
          and 0 < samples.get('presto_nfs_logged_requests_total{proc="WRITE"}', 0)
          <= samples.get('presto_nfs_requests_total{proc="WRITE"}', 0)
          and 0 < samples.get('presto_nfs_log_seconds_total{proc="WRITE"}', 0)
          <= samples.get('presto_nfs_request_duration_seconds_sum{proc="WRITE"}', 0) * 1.001
          and samples.get('presto_nfs_logged_requests_total{proc="GETATTR"}', 1) == 0,
          "WRITEs answered from the log, and their time in it within their service time",
          {k: v for k, v in samples.items() if "log" in k and "WRITE" in k})
    buckets = [(k, v) for k, v in samples.items() if k.startswith("presto_log_records_per_persist_bucket")]
    vals = [v for _, v in buckets]
    check(types.get("presto_log_records_per_persist") == "histogram" and len(buckets) == 12
          and vals == sorted(vals) and samples.get('presto_log_records_per_persist_bucket{le="+Inf"}') == samples.get("presto_log_records_per_persist_count"),
          "records per persist is a cumulative histogram with +Inf = _count", buckets[:3])
    check(all(n in types for n in ("presto_up", "presto_log_occupancy_ratio", "presto_log_oldest_record_age_seconds",
                                   "presto_destage_bytes_total", "presto_commits_avoided_total", "presto_export_acceleration"))
          and all(n.endswith("_total") for n, t in types.items() if t == "counter"),
          "gauges and counters with the conventional names and units")

    # ---- actions ----
    s, doc, _, _ = cl.req("POST", "/api/flush", headers=dict(auth, Origin="http://127.0.0.1:%d" % port))
    check(s == 200 and doc.get("ok") is True and isinstance(doc.get("ms"), (int, float)),
          "POST /api/flush with the token from the console's origin: 200", doc)
    s, doc, _, _ = cl.req("POST", "/api/flush",
                          headers={"Authorization": "Basic " + base64.b64encode(("x:" + token).encode()).decode()})
    check(s == 200 and doc.get("ok") is True, "POST /api/flush with the token as Basic password: 200", doc)
    # the status is the sampler's (at most a second old)
    ok = wait_for(lambda: cl.req("GET", "/api/status")[1]["nfsd"]["occupancy_pct"] < 5, 4)
    check(ok, "the log is (nearly) empty after the flush", cl.req("GET", "/api/status")[1]["nfsd"])

    epath = "/api/exports/%s/presto" % urllib.parse.quote(exp, safe="")
    s, doc, _, _ = cl.req("POST", epath, {"presto": False}, auth)
    got = {e["path"]: e["presto"] for e in (doc or {}).get("exports", [])}
    check(s == 200 and got.get(exp) is False, "POST .../presto {presto:false}: acceleration off", doc)
    s, doc, _, _ = cl.req("GET", "/api/exports")
    check({e["path"]: e["presto"] for e in doc["exports"]}[exp] is False, "presto-nfsd reports it off")
    eid = {e["path"]: e["id"] for e in doc["exports"]}[exp]
    s, doc, _, _ = cl.req("POST", "/api/exports/%d/presto" % eid, {"presto": "on"}, auth)
    got = {e["path"]: e["presto"] for e in (doc or {}).get("exports", [])}
    check(s == 200 and got.get(exp) is True, "POST /api/exports/ID/presto {presto:\"on\"}: on again", doc)
    s, doc, _, _ = cl.req("POST", "/api/exports/%s/presto" % urllib.parse.quote(slow, safe=""), {"presto": True}, auth)
    check(is_json_error(s, doc, 409), "enabling a nopresto export: 409 with presto-nfsd's reason", doc)
    s, doc, _, _ = cl.req("POST", "/api/exports/%2Fno%2Fsuch/presto", {"presto": True}, auth)
    check(is_json_error(s, doc, 404), "an unknown export: 404", doc)
    s, doc, _, _ = cl.req("POST", "/api/exports/12345/presto", {"presto": True}, auth)
    check(is_json_error(s, doc, 404), "an unknown export id: 404", doc)
    s, doc, _, _ = cl.req("POST", "/api/exports/not-a-path/presto", {"presto": True}, auth)
    check(is_json_error(s, doc, 400), "an export named neither by path nor by id: 400", doc)
    s, doc, _, _ = cl.req("POST", "/api/exports/%2F%FF/presto", {"presto": False}, auth)
    check(is_json_error(s, doc, 400), "an export name that is not UTF-8: 400", doc)
    s, doc, _, _ = cl.req("GET", "/api/exports")
    check({e["path"]: e["presto"] for e in doc["exports"]}[exp] is True,
          "... and no export was switched (a name that failed to encode meant 'all')", doc)
    for body, what in [(b"", "no body"), (b"{", "malformed JSON"), (b'{"presto": 3}', "presto: 3"),
                       (b'{"presto": "maybe"}', "presto: maybe"), (b"[]", "an array"),
                       (b'{"presto":true,"presto":false}', "a duplicate key")]:
        s, doc, _, _ = cl.req("POST", epath, headers=auth, raw_body=body)
        check(is_json_error(s, doc, 400), "acceleration with %s: 400" % what, (s, doc))

    s, doc, _, _ = cl.req("GET", "/api/stats")
    before = sum(p["count"] for p in doc["stats"]["procs"])
    s, doc, _, _ = cl.req("POST", "/api/stats/reset", headers=auth)
    check(s == 200 and doc.get("ok") is True, "POST /api/stats/reset: 200", doc)
    time.sleep(1.2)
    s, doc, _, _ = cl.req("GET", "/api/stats")
    after = sum(p["count"] for p in doc["stats"]["procs"])
    check(after < before, "the counters start again after a reset (%d -> %d)" % (before, after))

    # A counter that climbs past its old value before the sampler looks
    # again hides a reset unless presto-nfsd says it reset: then every
    # count of the next sample is new. NULL calls, sent here and nowhere
    # else, so their count is known.
    nulls(nfs_port, 3000)
    time.sleep(2.5)             # the sampler's baseline holds the 3000
    t0 = int(time.time())
    s, doc, _, _ = cl.req("POST", "/api/stats/reset", headers=auth)
    nulls(nfs_port, 6000)       # within the same second, as a rule
    time.sleep(2.5)
    s, doc, _, _ = cl.req("GET", "/api/series?metric=ops.NULL&from=%d&to=%d&step=1" % (t0, int(time.time())))
    got = sum(v for v in (doc or {}).get("series", {}).get("ops.NULL", []) if v)
    check(s == 200 and 4500 <= got <= 7500,
          "the NULLs after a reset are counted whole, not less the 3000 before it (%.0f of 6000)" % got, doc)

    # ---- the error rate counts the calls the ops rate counts ----
    # "ops" is the NFS calls (MOUNT's are only in ops.MNT...): failed MNT
    # calls, and nothing else, in a quiet while must not make "errors"
    # exceed "ops" (an error rate above 100%).
    time.sleep(1.5)
    t0 = int(time.time())
    st = failed_mnts(mnt_port, 50)
    time.sleep(2.5)
    s, doc, _, _ = cl.req("GET", "/api/series?metric=ops,errors,ops.MNT&from=%d&to=%d&step=1"
                          % (t0, int(time.time())))
    ser = (doc or {}).get("series", {})
    mnt = sum(v for v in ser.get("ops.MNT", []) if v)
    bad = [(o, e) for o, e in zip(ser.get("ops", []), ser.get("errors", []))
           if e is not None and e > (o or 0) + 1e-9]
    check(s == 200 and all(x != 0 for x in st) and 40 <= mnt <= 60 and not bad,
          "failed MNT calls (%.0f) do not raise errors above ops" % mnt,
          (st[:3], bad, ser.get("errors")))

    # ---- oversized and malformed requests ----
    s, doc, _, _ = cl.req("POST", epath, headers=auth, raw_body=b"x" * 100000)
    check(is_json_error(s, doc, 413), "a 100 kB body: 413", (s, doc))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest("POST", epath)
    c.putheader("Authorization", "Bearer " + token)
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    try:
        for _ in range(20):
            c.send(b"400\r\n" + b"y" * 1024 + b"\r\n")
        c.send(b"0\r\n\r\n")
        st = c.getresponse().status
    except OSError as e:
        st = e
    check(st == 413, "a chunked 20 kB body without length: 413", st)
    c.close()
    for raw, what in [(b"GARBAGE\r\n\r\n", "a request line of garbage"),
                      (b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n", "a 200 kB header"),
                      (b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "a 100 kB URL"),
                      (b"\x00\xff\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" * 50, "binary (a TLS hello)"),
                      (b"POST /api/flush HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n", "a negative length")]:
        sk = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            sk.sendall(raw)
            sk.shutdown(socket.SHUT_WR)
            answer = sk.recv(4096)
        except OSError:     # reset or closed by the server before all was sent
            try:
                answer = sk.recv(4096)
            except OSError:
                answer = b""
        sk.close()
        m = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
        check(not answer or (m and 400 <= int(m.group(1)) < 500), "%s: a 4xx or a closed connection" % what, answer[:80])
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(10)]
    for sk in socks:
        sk.sendall(b"GET /api/status HTTP/1.1\r\nHo")    # half a request, then nothing
    s, doc, _, _ = cl.req("GET", "/api/status")
    check(s == 200, "ten half-sent requests do not stop the others")
    for sk in socks:
        sk.close()
    check(admind.poll() is None, "presto-admind is still running after the bad requests")

    # ---- slow clients do not keep their connections ----
    # A request's headers must be in within HEADER_TIMEOUT s of the
    # connection (or of its last answer), however slowly they trickle: else
    # a client sending a header line now and then, within the idle timeout,
    # would hold its per-IP share of the connections (32) for ever.
    slowloris(port)
    # ... and so must its body: an authorised POST whose body trickles in
    # would hold its connection as long (4000 bytes at one per 2 s)
    wait_for(lambda: cl.req("GET", "/api/status")[0] == 200, 5)
    slowloris(port, token)
    # a POST refused for its token is answered on its headers, without
    # waiting for (or reading) the body it announces
    wait_for(lambda: cl.req("GET", "/api/status")[0] == 200, 5)
    sk = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.time()
    sk.sendall(b"POST /api/flush HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n")
    try:
        answer = sk.recv(4096)
    except OSError as e:
        answer = repr(e).encode()
    sk.close()
    check(answer.startswith(b"HTTP/1.1 401") and time.time() - t0 < 3,
          "a POST without the token is refused on its headers, before its body (%.1f s)" % (time.time() - t0),
          answer[:60])

    # ---- the SQLite file ----
    dbp = os.path.join(tmp, "admind.db")
    db = sqlite3.connect("file:%s?mode=ro" % dbp, uri=True)
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    ver = db.execute("PRAGMA user_version").fetchone()[0]
    nraw = db.execute("SELECT count(*) FROM sample").fetchone()[0]
    db.close()
    check(mode == "wal" and ver == 2 and nraw > 20, "the history is an SQLite file in WAL mode, schema 2, with samples",
          (mode, ver, nraw))

    # ---- presto-nfsd goes away and comes back: a gap ----
    procs.stop(nfsd)
    time.sleep(0.5)
    t_down = int(time.time())
    ok = wait_for(lambda: cl.req("GET", "/api/status")[1]["reachable"] is False, 5)
    s, doc, _, _ = cl.req("GET", "/api/status")
    check(ok and any(a["level"] == "critical" for a in doc["alarms"]),
          "presto-nfsd stopped: status says unreachable, with a critical alarm", doc)
    s, doc, _, _ = cl.req("GET", "/api/stats")
    check(is_json_error(s, doc, 503), "GET /api/stats while presto-nfsd is down: 503", (s, doc))
    s, doc, _, _ = cl.req("POST", "/api/flush", headers=auth)
    check(is_json_error(s, doc, 502), "POST /api/flush while presto-nfsd is down: 502", (s, doc))
    s, _, _, text = cl.req("GET", "/metrics")
    lines = [l for l in text.decode().splitlines() if l and not l.startswith("#")]
    check(s == 200 and "presto_up 0" in lines and len(lines) <= 3,
          "/metrics while presto-nfsd is down: presto_up 0, no made-up zeros", lines[:8])
    time.sleep(2.5)
    nfsd, m = start_nfsd(procs, tmp, nvram)
    check(m is not None, "presto-nfsd restarts")
    ok = wait_for(lambda: cl.req("GET", "/api/status")[1]["reachable"] is True, 8)
    check(ok, "presto-admind samples the new presto-nfsd")
    time.sleep(1.5)
    s, doc, _, _ = cl.req("GET", "/api/series?metric=up&from=%d&to=%d&step=1" % (t_down - 3, int(time.time())))
    up = doc["series"]["up"]
    # up, then a gap of nulls, then up again
    first_gap = next((i for i, v in enumerate(up) if v is None), None)
    check(first_gap is not None and up[0] == 1 and up[-1] == 1 and first_gap > 0,
          "the time presto-nfsd was down is a gap in the history", up)

    # ---- presto-admind restarts: the history stays ----
    db = sqlite3.connect("file:%s?mode=ro" % dbp, uri=True)
    before = db.execute("SELECT min(ts), count(*) FROM sample").fetchone()
    db.close()
    # stopped while a flush waits for a presto-nfsd that does not answer
    # (a flush of a full log may take minutes): it stops at once, the
    # request answered 503
    os.kill(nfsd.pid, signal.SIGSTOP)
    flush_answer = []
    flusher = threading.Thread(target=lambda: flush_answer.append(
        cl.req("POST", "/api/flush", headers=auth)[:2]))
    flusher.start()
    time.sleep(1)
    t0 = time.time()
    os.killpg(admind.pid, signal.SIGTERM)
    try:
        admind.wait(8)
    except subprocess.TimeoutExpired:
        pass
    stopped = admind.poll() is not None
    os.kill(nfsd.pid, signal.SIGCONT)
    flusher.join(10)
    check(stopped and time.time() - t0 < 5, "presto-admind stops within 5 s while a flush waits",
          "%.1f s" % (time.time() - t0))
    check(flush_answer and is_json_error(flush_answer[0][0], flush_answer[0][1], 503),
          "the waiting flush is answered 503", flush_answer)
    check(admind.returncode == 0, "presto-admind stops cleanly on SIGTERM", admind.returncode)
    admind, port = start_admind(procs, tmp, log_name="admind2.log")
    cl = Client(port)
    check(port is not None and open(tpath).read().strip() == token, "presto-admind restarts with the same token")
    time.sleep(1.5)
    s, doc, _, _ = cl.req("GET", "/api/status")
    s2, doc2, _, _ = cl.req("GET", "/api/series?metric=up&from=%d&step=1" % before[0])
    check(doc["admind"]["raw_rows"] > before[1] and doc2["series"]["up"][0] == 1,
          "the history from before the restart is kept", (before, doc["admind"]["raw_rows"]))

    # ---- refusals at start ----
    os.chmod(tpath, 0o644)
    p = procs.start([os.path.join(BIN, "presto-admind"), "--control", "/nonexistent.sock", "--db", os.path.join(tmp, "x.db"),
                     "--token-file", tpath, "--listen", "127.0.0.1:0"], os.path.join(tmp, "refuse.log"))
    check(p.wait(10) != 0 and "0600" in open(os.path.join(tmp, "refuse.log")).read(),
          "a token file others may read is refused")
    os.chmod(tpath, 0o600)
    for args, what in [(["--listen", "localhost:8080"], "a listen address that is a name"),
                       (["--listen", "127.0.0.1"], "a listen address without a port"),
                       (["--raw-retention", "10s"], "a raw retention under two minutes"),
                       (["--bogus"], "an unknown option")]:
        p = procs.start([os.path.join(BIN, "presto-admind"), "--control", "/nonexistent.sock",
                         "--db", os.path.join(tmp, "x.db"), "--token-file", tpath] + args,
                        os.path.join(tmp, "refuse.log"))
        check(p.wait(10) != 0, "%s is refused at start" % what)

    # ---- off loopback: every request needs the token (own network namespace) ----
    nonloopback(tmp, token)


NETNS_CHECK = r"""
import base64, http.client, json, re, subprocess, sys, time, os
ip = subprocess.run(["ip", "addr", "add", "10.99.0.1/24", "dev", "lo"], capture_output=True)
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
args = json.loads(sys.argv[1])
log = args["log"]
p = subprocess.Popen(args["cmd"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
res = {}
try:
    port = None
    for _ in range(100):
        m = re.search(r"ready http://[0-9.]+:(\d+)/", open(log).read())
        if m:
            port = int(m.group(1)); break
        time.sleep(0.1)
    def get(path, headers={}):
        c = http.client.HTTPConnection("10.99.0.1", port, timeout=10)
        c.request("GET", path, headers=headers)
        r = c.getresponse(); body = r.read(); c.close()
        return r.status, r.getheader("WWW-Authenticate") or ""
    res["open"] = get("/api/status")
    res["page"] = get("/")
    res["bearer"] = get("/api/status", {"Authorization": "Bearer " + args["token"]})
    res["basic"] = get("/", {"Authorization": "Basic " + base64.b64encode(("admin:" + args["token"]).encode()).decode()})
    res["wrong"] = get("/metrics", {"Authorization": "Bearer nope"})
    # refused, a connection is not kept open for the next try
    import socket
    sk = socket.create_connection(("10.99.0.1", port), timeout=5)
    t = time.time()
    sk.sendall(b"GET /api/status HTTP/1.1\r\nHost: 10.99.0.1\r\n\r\n")
    data = b""
    try:
        while True:
            b = sk.recv(4096)
            if not b:
                break
            data += b
        res["close"] = [data[:12].decode("latin-1"), round(time.time() - t, 1)]
    except OSError:
        res["close"] = [data[:12].decode("latin-1"), None]
    sk.close()
finally:
    p.terminate(); p.wait(5)
print(json.dumps(res))
"""


def nonloopback(tmp, token):
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        print("# skipped: the non-loopback bind needs root, unshare and ip")
        return
    cmd = [os.path.join(BIN, "presto-admind"), "--control", os.path.join(tmp, "state", "control.sock"),
           "--db", os.path.join(tmp, "admind-netns.db"), "--token-file", os.path.join(tmp, "admin.token"),
           "--listen", "10.99.0.1:0"]
    arg = json.dumps({"cmd": cmd, "token": token, "log": os.path.join(tmp, "netns.log")})
    r = subprocess.run(["unshare", "-n", sys.executable, "-c", NETNS_CHECK, arg], capture_output=True, text=True, timeout=30)
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        check(False, "the non-loopback check ran (unshare -n)", r.stderr[-300:])
        return
    check(res["open"][0] == 401 and res["open"][1].startswith("Basic"),
          "bound off loopback, a read without the token: 401 asking for Basic", res["open"])
    check(res["page"][0] == 401, "bound off loopback, even the page needs the token", res["page"])
    check(res["bearer"][0] == 200 and res["basic"][0] == 200,
          "bound off loopback, the token as bearer or Basic password is let in", res)
    check(res["wrong"][0] == 401, "bound off loopback, a wrong token: 401", res["wrong"])
    check(res["close"][0] == "HTTP/1.1 401" and res["close"][1] is not None and res["close"][1] < 3,
          "bound off loopback, the connection of a request without the token is closed after the 401",
          res["close"])


if __name__ == "__main__":
    t0 = time.time()
    try:
        main()
    except Exception as e:  # a crash of the test is a failure, with its cause
        import traceback
        traceback.print_exc()
        check(False, "the API test ran to its end", repr(e))
    print("# %.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
