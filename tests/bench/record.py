"""Cost of the recording on disk, with every recorder on.

The loop is examples/train.py's train() (a two-layer MLP, batch --batch, SGD),
timed inside the process over --steps steps after a warm-up, in three
variants run alternating (the order rotates every round) --runs times
each:

  baseline  no agent
  memory    the agent with every recorder on: the sampler at 100 Hz
            (started with `probing perf --start --hz 100` during the
            warm-up), torch tracing (PROBING_TORCH_PROFILING=on), the
            memory series (memory.interval_ms=1000) — kept in memory only
            (PROBING_DATA_DIR=off)
  disk      the same, recorded to disk (PROBING_DATA_DIR=<a fresh
            directory>, the default data.flush_ms=1000)

Figures: the training thread's CPU time (time.thread_time; wall time is
printed too), "ratio" = median / baseline's median, "paired" = median of
each round's variant / the same round's baseline, and for disk against
memory the same paired ratio ("disk/memory").  "agent CPU" is the process's
CPU minus the training thread's (the sampler, the recorder, the recording
thread).  "bytes/hour" is what a disk run's recording grew by from 2.5 s
after the sampler started (the files made) to the process's exit, over
that time, times 3600.

--batch makes each step bigger (64 by default: ~170 µs a step, a loop
where tracing every step shows; 16384: a few ms a step, nearer a real
model's): the recorders' cost is per step and per second, the step's
work is not.

Usage: PROBING_BUILD=build python3 tests/bench/record.py [--runs 7]
       [--steps 40000] [--batch 64]
Prints a Markdown table (docs/benchmarks.md has the last one).
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
PY = "/usr/bin/python3"

DRIVER = r"""
import os, sys, time
sys.path.insert(0, %(examples)r)
import torch
torch.set_num_threads(1)
import train
steps, go, batch = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
train.train(50, batch, 0)                 # warm-up
print("READY", flush=True)
while not os.path.exists(go):             # the sampler is started
    time.sleep(0.01)
train.train(50, batch, 0)
w0, t0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
train.train(steps, batch, 0)
w1, t1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
print("ELAPSED", t1 - t0, w1 - w0, (p1 - p0) - (t1 - t0), flush=True)
"""

VARIANTS = ("baseline", "memory", "disk")


def dir_bytes(d):
    total = 0
    for base, _, files in os.walk(d):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(base, f))
            except OSError:
                pass
    return total


def run(variant, steps, batch):
    tmp = tempfile.mkdtemp(prefix="probing-bench-record.")
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("PROBING"):
            del e[k]
    e["PYTHONUSERBASE"] = os.path.join(BUILD, "userbase")
    if variant != "baseline":
        e.update({"PROBING": "1", "PROBING_TORCH_PROFILING": "on",
                  "PROBING_MEMORY_INTERVAL_MS": "1000",
                  "PROBING_DATA_DIR": os.path.join(tmp, "data")
                  if variant == "disk" else "off"})
    go = os.path.join(tmp, "go")
    code = DRIVER % {"examples": os.path.join(ROOT, "examples")}
    p = subprocess.Popen([PY, "-c", code, str(steps), go, str(batch)], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    seen = []
    for line in p.stdout:  # train() prints its loss now and then
        if line.startswith("READY"):
            break
        seen.append(line)
    else:
        sys.exit("%s: no READY: %s %s" % (variant, "".join(seen)[-500:],
                                          p.stderr.read()[-2000:]))
    if variant != "baseline":
        r = subprocess.run([CLI, "-t", str(p.pid), "perf", "--start", "--hz",
                            "100"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("%s: perf --start: %s" % (variant, r.stderr))
    data = os.path.join(tmp, "data")
    time.sleep(2.5)  # the first flushes: the files made, their base size
    size0, t0 = dir_bytes(data), time.time()
    open(go, "w").close()
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit("%s run failed:\n%s" % (variant, err[-3000:]))
    grown = dir_bytes(data) - size0
    took = time.time() - t0
    line = [l for l in out.splitlines() if l.startswith("ELAPSED")][0]
    cpu, wall, other = (float(x) for x in line.split()[1:])
    shutil.rmtree(tmp, True)
    return cpu, wall, other, grown / took * 3600 if variant == "disk" else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=40000)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    res = {n: [] for n in VARIANTS}
    for i in range(args.runs):
        order = VARIANTS[i % 3:] + VARIANTS[:i % 3]
        for n in order:
            res[n].append(run(n, args.steps, args.batch))
        print("round %d/%d done" % (i + 1, args.runs), file=sys.stderr)
    base = statistics.median(r[0] for r in res["baseline"])
    base_wall = statistics.median(r[1] for r in res["baseline"])
    print("Host: %s, %d CPUs, Python %s, torch (system) on /usr/bin/python3"
          % (platform.machine(), os.cpu_count(), platform.python_version()))
    print("Loop: examples/train.py train(), batch %d, %d steps, %d runs "
          "each, alternating\n" % (args.batch, args.steps, args.runs))
    print("| variant | thread CPU median (s) | ratio | paired | wall median (s) "
          "| wall ratio | agent CPU (s) | bytes/hour |")
    print("|---|---|---|---|---|---|---|---|")
    for n in VARIANTS:
        cpu = [r[0] for r in res[n]]
        paired = statistics.median(c / b[0] for c, b in zip(cpu, res["baseline"]))
        m = statistics.median(cpu)
        bph = statistics.median(r[3] for r in res[n]) if n == "disk" else 0
        print("| %s | %.3f | %.3fx | %.3fx | %.3f | %.3fx | %.3f | %s |"
              % (n, m, m / base, paired, statistics.median(r[1] for r in res[n]),
                 statistics.median(r[1] for r in res[n]) / base_wall,
                 statistics.median(r[2] for r in res[n]),
                 "%.1f MB" % (bph / 1e6) if bph else "-"))
    dm = statistics.median(d[0] / m[0] for d, m in zip(res["disk"], res["memory"]))
    dmw = statistics.median(d[1] / m[1] for d, m in zip(res["disk"], res["memory"]))
    print("\ndisk/memory, paired: thread CPU %.3fx, wall %.3fx" % (dm, dmw))


if __name__ == "__main__":
    main()
