"""Attaching to a running CPython 3.14+: the PEP 768 way against the ptrace
way of `probing -t PID inject`, and debugpy's attach, on the same kind of
target (docs/benchmarks.md, "Attach").

The target (a fresh one per run): its main thread sleeps 5 ms at a time and
notes how late each sleep ends; a worker thread runs Python all the time
and notes the longest gap between two of its iterations.  Every 50 ms the
main thread prints both maxima of that window ("W time late gap").  A
thread that is stopped, or a GIL held for long, shows there: ptrace stops
the main thread and runs dlopen on it (late); the PEP 768 loader runs in
the main thread with the GIL, so the worker waits as well (gap).

  pep768   `probing -t PID inject --via pep768`: the command's wall time
           to the agent's first DAP reply (it waits for `initialize`),
           and the parts it reports (request taken, loader's run).
  ptrace   `probing -t PID inject --via ptrace`: the same, and how long
           it says the thread was stopped.
  debugpy  `python3 -m debugpy --listen 127.0.0.1:PORT --pid PID`, then a
           DAP client connects to PORT and sends `initialize`: from the
           command's start to that reply.

For each run: the largest "late" and "gap" from 0.1 s before the attach
began to 0.3 s after it ended, minus the largest of the second before it
(the target's own noise on this machine); medians and maxima over the runs.

Usage (in the sid root: scripts/sysroot sid ...):
  PROBING_BUILD=build-sid python3 tests/bench/attach.py [--runs 20]
      [--debugpy-runs 10] [--python /usr/bin/python3]
Prints a Markdown table.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inject  # noqa: E402
from inject import dap_initialize, free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")

TARGET = """\
import threading, time
gap = 0.0
def worker():
    global gap
    last = time.perf_counter()
    while True:
        sum(range(50))
        now = time.perf_counter()
        if now - last > gap:
            gap = now - last
        last = now
threading.Thread(target=worker, daemon=True).start()
print("READY", flush=True)
late, window = 0.0, time.perf_counter()
while True:
    t0 = time.perf_counter()
    time.sleep(0.005)
    late = max(late, time.perf_counter() - t0 - 0.005)
    if time.perf_counter() - window >= 0.05:
        print("W %.6f %.3f %.3f" % (time.time(), late * 1000, gap * 1000), flush=True)
        late, gap, window = 0.0, 0.0, time.perf_counter()
"""


class Target(inject.Target):
    def __init__(self, python, tmp, i):
        # A second of windows before the attach.
        super().__init__(tmp, i, python=python, code=TARGET, settle=1.2)

    def disturbance(self, t0, t1):
        """(extra late ms, extra gap ms, alive and clean) around [t0, t1]."""
        time.sleep(0.5)
        text = self.text()
        wins = [tuple(map(float, m)) for m in
                re.findall(r"^W ([\d.]+) ([\d.]+) ([\d.]+)$", text, re.M)]
        before = [w for w in wins if t0 - 1.0 <= w[0] < t0 - 0.1]
        during = [w for w in wins if t0 - 0.1 <= w[0] <= t1 + 0.3]
        if not before or not during:
            return float("nan"), float("nan"), False
        late = max(w[1] for w in during) - max(w[1] for w in before)
        gap = max(w[2] for w in during) - max(w[2] for w in before)
        clean = self.p.poll() is None and not re.search(r"Traceback|Error", text)
        return max(late, 0.0), max(gap, 0.0), clean


def run_probing(python, tmp, i, via):
    t = Target(python, tmp, i)
    try:
        t0 = time.time()
        p0 = time.perf_counter()
        r = subprocess.run([CLI, "-t", str(t.p.pid), "inject", "--via", via],
                           capture_output=True, text=True, timeout=60)
        ms = (time.perf_counter() - p0) * 1000
        t1 = time.time()
        parts = {}
        for key, pat in (("stopped", r"was stopped ([\d.]+) ms"),
                         ("taken", r"safe point ([\d.]+) ms after"),
                         ("run", r"ran the loader for ([\d.]+) ms"),
                         ("answered", r"the agent answered ([\d.]+) ms")):
            m = re.search(pat, r.stdout)
            if m:
                parts[key] = float(m.group(1))
        late, gap, clean = t.disturbance(t0, t1)
        way_ok = ("through PEP 768" if via == "pep768" else "with ptrace") in r.stdout
        return dict(ok=r.returncode == 0 and way_ok, ms=ms, late=late, gap=gap,
                    clean=clean, parts=parts, why=(r.stderr or r.stdout).strip())
    finally:
        t.stop()


def run_debugpy(python, tmp, i):
    t = Target(python, tmp, 1000 + i)
    port = free_port()
    try:
        t0 = time.time()
        p0 = time.perf_counter()
        try:
            r = subprocess.run([python, "-m", "debugpy", "--listen",
                                "127.0.0.1:%d" % port, "--pid", str(t.p.pid)],
                               capture_output=True, text=True, timeout=60)
            why = (r.stderr or r.stdout).strip()
        except subprocess.TimeoutExpired:
            why = "debugpy --pid timed out"
        ok = dap_initialize(port, p0 + 60)
        ms = (time.perf_counter() - p0) * 1000
        t1 = time.time()
        late, gap, clean = t.disturbance(t0, t1)
        return dict(ok=ok, ms=ms, late=late, gap=gap, clean=clean, parts={},
                    why=why if not ok else "")
    finally:
        t.stop()


def med_max(values):
    values = [v for v in values if v == v]
    if not values:
        return "—"
    return "%.1f / %.1f ms" % (statistics.median(values), max(values))


def row(name, results, part):
    oks = [r for r in results if r["ok"]]
    parts = [r["parts"][part] for r in oks if part and part in r["parts"]]
    return "| %s | %s | %s | %s | %s | %d/%d | %d/%d |" % (
        name,
        "%.1f ms" % statistics.median(r["ms"] for r in oks) if oks else "—",
        "%.2f ms (%s)" % (statistics.median(parts), part) if parts else "—",
        med_max([r["late"] for r in oks]),
        med_max([r["gap"] for r in oks]),
        len(oks), len(results),
        sum(1 for r in results if r["clean"]), len(results))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--debugpy-runs", type=int, default=10)
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    version = subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        pep = [run_probing(a.python, tmp, i, "pep768") for i in range(a.runs)]
        ptr = [run_probing(a.python, tmp, 100 + i, "ptrace") for i in range(a.runs)]
        dbg = [run_debugpy(a.python, tmp, i) for i in range(a.debugpy_runs)]
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    print("%s, %s (%s), %d cores, load %.1f, CPython %s\n" % (
        time.strftime("%Y-%m-%d"), platform.machine(), cpu, os.cpu_count(),
        os.getloadavg()[0], version))
    print("| way | first DAP reply (median) | thread stopped / loader's GIL hold "
          "(median) | main thread delayed (median / max) | worker stalled "
          "(median / max) | succeeded | target fine |")
    print("|---|---|---|---|---|---|---|")
    print(row("probing inject, PEP 768", pep, "run"))
    print(row("probing inject, ptrace", ptr, "stopped"))
    print(row("debugpy --listen --pid", dbg, None))
    taken = [r["parts"]["taken"] for r in pep if r["ok"] and "taken" in r["parts"]]
    if taken:
        print("\nPEP 768: the main thread took the request %.1f ms (median) after "
              "it was made (it sleeps 5 ms at a time)" % statistics.median(taken))
    for r in (pep + ptr + dbg):
        if not r["ok"] and r["why"]:
            print("\nfailure: " + r["why"].replace("\n", " ")[:300])
            break


if __name__ == "__main__":
    main()
