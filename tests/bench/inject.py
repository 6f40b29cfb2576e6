"""Injection: time from "attach to this running process" to the first DAP
reply, Probing against debugpy, on the same kind of target.

The target: Debian's /usr/bin/python3 sleeping in a loop of
time.sleep(0.5), printing how long each sleep lasted.

  probing   `probing -t PID inject` (exec, checks, ptrace, dlopen in the
            target, the agent's start, its `initialize` reply, one
            `probing/config`): the command's wall time.  Its own report
            gives the parts (thread stopped, dlopen, agent answered).
  debugpy   `python3 -m debugpy --listen 127.0.0.1:PORT --pid PID` (gdb
            injects debugpy's server), then a DAP client connects to PORT
            and sends `initialize`: from the command's start to that reply.

After each run the target is watched for 1.5 s: alive, no traceback or
errno in its output, and how much longer than 0.5 s its longest sleep
took (a stopped or disturbed thread shows there).  A fresh target per run.

Usage: PROBING_BUILD=build python3 tests/bench/inject.py [--runs 20]
       [--debugpy-runs 20]
Prints a Markdown table (for docs/benchmarks.md, section "Injection").
"""
import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
PY = "/usr/bin/python3"

TARGET = """\
import time
print("READY", flush=True)
while True:
    t0 = time.monotonic()
    time.sleep(0.5)
    print("TICK %.4f" % (time.monotonic() - t0), flush=True)
"""


class Target:
    """A target running `code` (TARGET: this benchmark's) under python,
    started once it printed READY and `settle` seconds more (0.2: well
    inside a sleep).  tests/bench/attach.py's targets are these too."""

    def __init__(self, tmp, i, python=PY, code=TARGET, settle=0.2):
        self.script = os.path.join(tmp, "t%d.py" % i)
        self.out = os.path.join(tmp, "t%d.out" % i)
        with open(self.script, "w") as f:
            f.write(code)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("PROBING", None)
        with open(self.out, "w") as f:
            self.p = subprocess.Popen([python, self.script], stdout=f,
                                      stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 30
        while "READY" not in self.text():
            if time.time() > deadline or self.p.poll() is not None:
                raise RuntimeError("target did not start: " + self.text())
            time.sleep(0.01)
        time.sleep(settle)

    def text(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def watch(self, seconds=1.5):
        """(alive, clean output, worst extra sleep in ms)."""
        time.sleep(seconds)
        alive = self.p.poll() is None
        text = self.text()
        clean = not re.search(r"Traceback|Errno|Error", text)
        ticks = [float(x) for x in re.findall(r"TICK ([\d.]+)", text)]
        extra = max(ticks) - 0.5 if ticks else float("nan")
        return alive, clean, extra * 1000

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def dap_initialize(port, deadline):
    """Connects (retrying) and sends initialize; True on a response."""
    while time.perf_counter() < deadline:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            time.sleep(0.02)
            continue
        try:
            body = json.dumps({"seq": 1, "type": "request", "command": "initialize",
                               "arguments": {"clientID": "bench", "adapterID": "python"}})
            s.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
            s.settimeout(max(0.1, deadline - time.perf_counter()))
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return False
                data += chunk
                if b'"command": "initialize"' in data or b'"command":"initialize"' in data:
                    return b'"type": "response"' in data or b'"type":"response"' in data
        except OSError:
            return False
        finally:
            s.close()
    return False


def run_probing(tmp, i):
    t = Target(tmp, i)
    try:
        t0 = time.perf_counter()
        r = subprocess.run([CLI, "-t", str(t.p.pid), "inject"], capture_output=True,
                           text=True, timeout=60)
        ms = (time.perf_counter() - t0) * 1000
        ok = r.returncode == 0
        parts = {}
        m = re.search(r"stopped ([\d.]+) ms", r.stdout)
        if m:
            parts["stopped"] = float(m.group(1))
        m = re.search(r"dlopen took ([\d.]+) ms; the agent answered ([\d.]+) ms", r.stdout)
        if m:
            parts["dlopen"] = float(m.group(1))
            parts["answered"] = float(m.group(2))
        alive, clean, extra = t.watch()
        return ok, ms, alive and clean, extra, parts, r.stderr.strip()
    finally:
        t.stop()


def run_debugpy(tmp, i):
    t = Target(tmp, 1000 + i)
    port = free_port()
    try:
        t0 = time.perf_counter()
        try:
            subprocess.run([PY, "-m", "debugpy", "--listen", "127.0.0.1:%d" % port,
                            "--pid", str(t.p.pid)], capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            pass
        ok = dap_initialize(port, t0 + 60)
        ms = (time.perf_counter() - t0) * 1000
        alive, clean, extra = t.watch()
        return ok, ms, alive and clean, extra, {}, "" if ok else t.text()[-300:]
    finally:
        t.stop()


def summary(name, results):
    oks = [r for r in results if r[0]]
    survived = sum(1 for r in results if r[2])
    times = [r[1] for r in oks]
    extra = [r[3] for r in results if r[3] == r[3]]
    med = statistics.median(times) if times else float("nan")
    row = "| %s | %s | %d/%d | %d/%d | %.0f ms |" % (
        name, "%.1f ms" % med if times else "—", len(oks), len(results),
        survived, len(results), max(extra) if extra else float("nan"))
    return row, med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--debugpy-runs", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        probing = [run_probing(tmp, i) for i in range(a.runs)]
        debugpy = [run_debugpy(tmp, i) for i in range(a.debugpy_runs)]
    rows = []
    prow, pmed = summary("probing inject", probing)
    drow, dmed = summary("debugpy --listen --pid", debugpy)
    print("%s, %s, Python %s, %d cores\n" % (time.strftime("%Y-%m-%d"), platform.machine(),
                                          platform.python_version(), os.cpu_count()))
    print("| tool | time to first DAP reply (median) | succeeded | target fine after | "
          "longest extra sleep |")
    print("|---|---|---|---|---|")
    print(prow)
    print(drow)
    parts = [r[4] for r in probing if r[0] and r[4]]
    if parts:
        print("\nprobing, medians of the parts: thread stopped %.2f ms, dlopen %.1f ms, "
              "agent answered %.1f ms after the command started" % (
                  statistics.median(p["stopped"] for p in parts),
                  statistics.median(p["dlopen"] for p in parts),
                  statistics.median(p["answered"] for p in parts)))
    if pmed == pmed and dmed == dmed:
        print("\nprobing is %.0fx faster" % (dmed / pmed))
    fails = [r[5] for r in probing + debugpy if not r[0] and r[5]]
    for f in fails[:3]:
        print("\nfailure: " + f.replace("\n", " ")[:300])


if __name__ == "__main__":
    main()
