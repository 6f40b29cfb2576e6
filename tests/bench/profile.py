"""Benchmarks of the sampling profiler, side by side in one run.

1. Overhead on two workloads, each timed inside the target by the CPU time
   of the working thread (time.thread_time): on a shared machine wall time
   of identical runs swings by 2x, the thread's CPU time much less, and a
   profiler that took cycles from the thread (signals, its handler, cache
   and memory traffic of the stack reads) would still show.
     train: examples/train.py's train() loop (torch, one intra-op thread)
     pure:  a CPU-bound pure-Python function, 20 frames deep
   Modes: the agent loaded with the profiler off (the baseline), sampling
   at 100 Hz, at 1 kHz, and at 100 Hz with native stacks.  Runs rotate
   through the modes (so drift favours none), median of N per mode;
   ratio = mode / baseline.  Also the sampler thread's own CPU time (from
   /proc, clock-tick resolution) as a share of the timed section: that
   cost is paid on another core.
2. Cost of one sample of a 50-frame stack: a thread 50 Python frames deep
   spinning at the bottom, sampled at 100 Hz and at 1 kHz; the sampler's
   own measure (probing perf: microseconds per thread sample), median of
   runs.

Usage: PROBING_BUILD=build python3 tests/bench/profile.py [--runs 7]
Prints a Markdown table (docs/benchmarks.md records it).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
PY = "/usr/bin/python3"

TRAIN = """
import sys, time
sys.path.insert(0, %(examples)r)
import torch
torch.set_num_threads(1)
import train
steps = int(sys.argv[1])
train.train(50, 64, 0)                      # warm-up
print("READY", flush=True)
sys.stdin.readline()                        # the profiler is set up
t0, w0 = time.thread_time(), time.perf_counter()
train.train(steps, 64, 0)
print("ELAPSED", time.thread_time() - t0, time.perf_counter() - w0, flush=True)
sys.stdin.readline()                        # until the harness is done
"""

PURE = """
import sys, time

def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def nest(d, n):
    return leaf(n) if d == 0 else nest(d - 1, n)

reps = int(sys.argv[1])
for _ in range(200):
    nest(18, 200)                           # warm-up
print("READY", flush=True)
sys.stdin.readline()
t0, w0 = time.thread_time(), time.perf_counter()
for _ in range(reps):
    nest(18, 200)
print("ELAPSED", time.thread_time() - t0, time.perf_counter() - w0, flush=True)
sys.stdin.readline()                        # until the harness is done
"""

DEEP = """
import sys

def deep(n):
    if n == 0:
        print("READY", flush=True)
        while True:
            sum(range(100))
    return deep(n - 1)

deep(48)        # <module> + 49 deep() frames = 50
"""

MODES = [("off", None), ("100 Hz", ["--start", "--hz", "100"]),
         ("1 kHz", ["--start", "--hz", "1000"]),
         ("100 Hz native", ["--cc", "--hz", "100"])]


def env():
    e = dict(os.environ)
    e["PYTHONUSERBASE"] = os.path.join(BUILD, "userbase")
    e["PROBING"] = "1"
    e["PYTHONUNBUFFERED"] = "1"
    return e


def cli(pid, *args):
    return subprocess.run([CLI, "-t", str(pid), *args], capture_output=True,
                          text=True, check=True).stdout


def wait_agent(pid):
    name = "@probing-%d" % pid
    deadline = time.time() + 60
    while time.time() < deadline:
        with open("/proc/net/unix") as f:
            if any(line.split()[-1] == name for line in f if len(line.split()) >= 8):
                return
        time.sleep(0.05)
    raise SystemExit("no agent in pid %d" % pid)


def read_until(p, prefix):
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("the target ended early")
        if line.startswith(prefix):
            return line


def sampler_cpu(pid):
    """CPU seconds of the agent's sampler thread so far (0 when none)."""
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if f.read().strip() != "probing-sample":
                    continue
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            continue
    return 0.0


def timed_run(code, arg, mode):
    """CPU seconds of the working thread, and the sampler's CPU as a share
    of the timed section's wall time."""
    p = subprocess.Popen([PY, "-c", code, str(arg)], env=env(), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        read_until(p, "READY")
        wait_agent(p.pid)
        if mode:
            cli(p.pid, "perf", *mode)
        c0 = sampler_cpu(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        line = read_until(p, "ELAPSED").split()
        c1 = sampler_cpu(p.pid)
        return float(line[1]), (c1 - c0) / float(line[2])
    finally:
        p.kill()
        p.wait()


def overhead(code, arg, runs):
    times = {m: [] for m, _ in MODES}
    own = {m: [] for m, _ in MODES}
    for i in range(runs):
        order = MODES[i % len(MODES):] + MODES[:i % len(MODES)]
        for name, mode in order:
            t, cpu = timed_run(code, arg, mode)
            times[name].append(t)
            own[name].append(cpu)
    return ({m: statistics.median(v) for m, v in times.items()},
            {m: statistics.median(v) for m, v in own.items()})


def sample_cost(runs):
    p = subprocess.Popen([PY, "-c", DEEP], env=env(), text=True,
                         stdout=subprocess.PIPE)
    try:
        read_until(p, "READY")
        wait_agent(p.pid)
        res = {}
        for hz in (100, 1000):
            us = []
            for _ in range(runs):
                cli(p.pid, "perf", "--start", "--hz", str(hz), "--duration", "2000")
                time.sleep(2.3)
                st = json.loads(cli(p.pid, "perf", "-f", "json"))
                assert st["running"] is False, st
                us.append(st["sampleUs"])
            res[hz] = statistics.median(us)
        rows = json.loads(cli(p.pid, "query", "-f", "json",
                              "WITH RECURSIVE up(id) AS (SELECT stack_id FROM profile.samples "
                              "WHERE rowid = (SELECT max(rowid) FROM profile.samples) UNION ALL "
                              "SELECT parent_id FROM profile.stacks s JOIN up ON s.stack_id = up.id "
                              "WHERE parent_id != 0) SELECT count(*) AS n FROM up"))
        return res, rows[0]["n"]
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=3000, help="train() steps per run")
    ap.add_argument("--reps", type=int, default=150000, help="pure-Python calls per run")
    a = ap.parse_args()
    train_code = TRAIN % {"examples": os.path.join(ROOT, "examples")}
    work = [("train", "examples/train.py train(), %d steps" % a.steps,
             overhead(train_code, a.steps, a.runs)),
            ("pure", "pure Python, 20 frames deep, %d calls" % a.reps,
             overhead(PURE, a.reps, a.runs))]
    cost, depth = sample_cost(max(3, a.runs // 2))
    print("Machine: %s, %d cores, Python %s; %s; %d runs per mode" % (
        platform.machine(), os.cpu_count(), platform.python_version(),
        time.strftime("%Y-%m-%d"), a.runs))
    print()
    print("| workload (CPU s of the working thread, median) | off | 100 Hz | 1 kHz | 100 Hz native |")
    print("|---|---|---|---|---|")
    for _, label, (t, own) in work:
        print("| %s | %.3f s | %.3f s | %.3f s | %.3f s |" % (
            label, t["off"], t["100 Hz"], t["1 kHz"], t["100 Hz native"]))
        print("| ratio to off (goal: <= 1.01 at 100 Hz, <= 1.05 at 1 kHz) | 1 | %.4f | %.4f | %.4f |" % (
            t["100 Hz"] / t["off"], t["1 kHz"] / t["off"], t["100 Hz native"] / t["off"]))
        print("| the sampler thread's CPU, share of one core (another core) | - | %.1f%% | %.1f%% | %.1f%% |" % (
            own["100 Hz"] * 100, own["1 kHz"] * 100, own["100 Hz native"] * 100))
    print()
    print("| cost of one sample of a %d-frame stack (median) | 100 Hz | 1 kHz |" % depth)
    print("|---|---|---|")
    print("| probing perf: microseconds per thread sample | %.1f us | %.1f us |" % (cost[100], cost[1000]))


if __name__ == "__main__":
    main()
