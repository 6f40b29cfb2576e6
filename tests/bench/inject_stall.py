#!/usr/bin/env python3
"""Does injection ever leave a thread stuck, or is a "stalled" worker
thread just starved on an overloaded machine?  (issue 3: the soak's
"threads" state twice reported `BAD stalled`.)

Runs the soak's "threads" target (30 threads, each `counts[i] += 1;
time.sleep(0.005)`) many times under artificial CPU load, in one of three
modes, and counts the threads that did not advance in the 1 s window:

  none     no agent, nothing done to the process
  inject   `probing -t PID inject` then `probing -t PID backtrace` while the
           main thread sleeps, as the soak does
  launch   started with PROBING=1 (the agent without ptrace), backtrace
  idle     started with PROBING=1, nothing asked of the agent

Each target also measures every thread's longest gap between two
iterations in the window (the tail of that distribution is what a rare
stall is made of), and when a thread stalls it reads that thread's
/proc/self/task/TID state at once and then waits up to 20 s more: a
starved thread moves again, a stuck one does not.

  python3 tests/bench/inject_stall.py --mode none --runs 200 --busy 8
  python3 tests/bench/inject_stall.py --mode inject --runs 200 --busy 8

Load: --busy N busy loops (`while 1: pass`) for the whole run, plus
--parallel targets at a time (default 4, as the soak); --nice gives the
targets a lower priority than the busy loops.  Bounded: each run takes
about 2-3 s; keep N x runs sensible on a shared 2-core machine.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
USERBASE = os.path.join(BUILD, "userbase")

TARGET = r"""
import os, sys, threading, time
N = 30
WINDOW = float(sys.argv[1])
counts = [0] * N
last = [0.0] * N
gap = [0.0] * N
tids = [0] * N
def work(i):
    tids[i] = threading.get_native_id()
    while True:
        counts[i] += 1
        now = time.monotonic()
        if now - last[i] > gap[i]:
            gap[i] = now - last[i]
        last[i] = now
        time.sleep(0.005)
for i in range(N):
    threading.Thread(target=work, args=(i,), daemon=True).start()
print("READY", flush=True)
time.sleep(0.8)
snap = list(counts)
t0 = time.monotonic()
for i in range(N):
    gap[i] = 0.0
    last[i] = t0
time.sleep(WINDOW)
t1 = time.monotonic()
stalled = [i for i in range(N) if counts[i] == snap[i]]
gaps = [max(gap[i], t1 - last[i]) for i in range(N)]
def proc(tid):
    b = "/proc/self/task/%d/" % tid
    try:
        st = open(b + "stat").read().rsplit(")", 1)[1].split()[0]
        wchan = open(b + "wchan").read()
        sysc = open(b + "syscall").read().split()[:1]
        status = dict(l.split(":", 1) for l in open(b + "status").read().splitlines() if ":" in l)
        keep = {k: status[k].strip() for k in ("SigBlk", "SigPnd", "ShdPnd", "TracerPid")}
        return "%s %s syscall=%s %s" % (st, wchan, sysc[0] if sysc else "?", keep)
    except OSError as e:
        return str(e)
info = {i: proc(tids[i]) for i in stalled}
after = {}
if stalled:
    t2 = time.monotonic()
    left = set(stalled)
    while left and time.monotonic() - t2 < 20:
        for i in list(left):
            if counts[i] != snap[i]:
                after[i] = round(time.monotonic() - t1, 3)
                left.discard(i)
        time.sleep(0.01)
print("RESULT " + repr({"stalled": stalled, "info": info, "moved_after": after,
                         "stuck": sorted(set(stalled) - set(after)),
                         "maxgap": round(max(gaps), 4), "gaps": [round(g, 4) for g in gaps],
                         "min_count": min(counts[i] - snap[i] for i in range(N)),
                         "window": round(t1 - t0, 3)}), flush=True)
time.sleep(60)
"""


def run_one(i, args, tmp, rnd):
    script = os.path.join(tmp, "t.py")
    out = os.path.join(tmp, "t%d.out" % i)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONUSERBASE=USERBASE)
    env.pop("PROBING", None)
    if args.mode in ("launch", "idle"):
        env["PROBING"] = "1"
    cmd = [args.python, script, str(args.window)]
    if args.nice:
        cmd = ["nice", "-n", str(args.nice)] + cmd
    rec = {"i": i, "mode": args.mode}
    with open(out, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    text = lambda: open(out, errors="replace").read()
    try:
        deadline = time.time() + 60
        while "READY" not in text():
            if p.poll() is not None or time.time() > deadline:
                rec["error"] = "no READY: " + text()[-300:]
                return rec
            time.sleep(0.01)
        time.sleep(rnd.uniform(0.05, 0.3))
        if args.mode == "inject":
            r = subprocess.run([CLI, "-t", str(p.pid), "inject"], capture_output=True,
                               text=True, timeout=60)
            rec["inject_rc"] = r.returncode
            rec["inject"] = (r.stdout + r.stderr).strip().replace("\n", " | ")
        if args.mode in ("inject", "launch"):
            r = subprocess.run([CLI, "-t", str(p.pid), "backtrace"], capture_output=True,
                               text=True, timeout=60)
            rec["backtrace_rc"] = r.returncode
        deadline = time.time() + 90
        while True:
            m = re.search(r"^RESULT (.*)$", text(), re.M)
            if m:
                import ast
                rec.update(ast.literal_eval(m.group(1)))
                return rec
            if p.poll() is not None or time.time() > deadline:
                rec["error"] = "no RESULT: " + text()[-500:]
                return rec
            time.sleep(0.05)
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("none", "inject", "launch", "idle"), default="none")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--busy", type=int, default=8, help="busy loops for the whole run")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--nice", type=int, default=0, help="nice level of the targets")
    ap.add_argument("--window", type=float, default=1.0)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="append one JSON line per run to this file")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    seeds = [rnd.randrange(1 << 30) for _ in range(args.runs)]
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"])
            for _ in range(args.busy)]
    began = time.time()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "t.py"), "w") as f:
                f.write(TARGET)
            with ThreadPoolExecutor(args.parallel) as pool:
                recs = list(pool.map(lambda i: run_one(i, args, tmp, random.Random(seeds[i])),
                                     range(args.runs)))
    finally:
        for b in busy:
            b.kill()
            b.wait()
    if args.json:
        with open(args.json, "a") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
    ok = [r for r in recs if "error" not in r]
    stalled = [r for r in ok if r["stalled"]]
    stuck = [r for r in ok if r["stuck"]]
    gaps = sorted(r["maxgap"] for r in ok)
    print("mode=%s runs=%d busy=%d parallel=%d nice=%d python=%s: %.0f s, load %s" % (
        args.mode, args.runs, args.busy, args.parallel, args.nice, args.python,
        time.time() - began, open("/proc/loadavg").read().split()[:3]))
    print("  errors %d; runs with a stalled thread %d (threads %d); stuck after 20 s more %d"
          % (len(recs) - len(ok), len(stalled), sum(len(r["stalled"]) for r in stalled),
             len(stuck)))
    if gaps:
        q = lambda p: gaps[min(len(gaps) - 1, int(p * len(gaps)))]
        print("  longest gap per run (s): median %.3f p90 %.3f p99 %.3f max %.3f" % (
            statistics.median(gaps), q(0.9), q(0.99), gaps[-1]))
    for r in recs:
        if "error" in r or r.get("stalled") or (args.mode == "inject" and r.get("inject_rc")):
            print("  #%d %s" % (r["i"], {k: v for k, v in r.items() if k != "gaps"}))


if __name__ == "__main__":
    main()
