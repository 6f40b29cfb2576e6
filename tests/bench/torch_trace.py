"""Overhead of torch module tracing, side by side with torch.profiler.

The loop is examples/train.py's train() (a two-layer MLP, batch --batch,
64 by default, SGD),
timed inside the process over --steps steps after a warm-up, in these
variants, run alternating (the order rotates every round, so drift on a
shared machine does not favour one) --runs times each:

  baseline    no agent
  agent       the agent loaded, tracing off
  full        PROBING_TORCH_PROFILING=on,step_rate=1: every module, every step,
              forward and backward, plus the optimizer step
  sampled     PROBING_TORCH_PROFILING=on,step_rate=10: one step in ten
  auto        PROBING_TORCH_PROFILING=on: the default, step_rate=auto (one
              step in the power of two that keeps tracing near 0.5%)
  profiler    no agent; the loop inside torch.profiler.profile(
              activities=[ProfilerActivity.CPU], with_modules=True)
              (its post-processing at exit is not timed)

The figure is the training thread's CPU time (time.thread_time): on a
shared machine wall time swings between identical runs, the CPU time of
the thread much less, and a tracer that costs the training thread shows
there.  Wall time is printed too.  The agent's own threads (the recorder
that writes the rows into SQLite) run beside it; their CPU time is the
"agent CPU" column (process CPU minus the training thread's).  "ratio"
is the median over the baseline's median; "paired" the median of each
round's variant / baseline (drift cancels); "best" min over min (the run
least disturbed by other work on the machine).

--instructions: the same variants, once each under valgrind's callgrind,
counting the instructions the training thread executes in the timed loop
(counters zeroed when it starts and dumped when it ends, through
callgrind_control).  Deterministic where time is not: a machine shared
with other jobs changes times by tens of percent, instructions by a
fraction of one.  Slow (a few minutes per variant, mostly `import torch`).

--cache-sim (with --instructions): callgrind simulates the caches too
and the table has the misses a step, first-level instruction (I1mr) and
data (D1mr, D1mw) and last-level, and how many more than the first
variant's: time the instruction count does not show.

Usage: PROBING_BUILD=build python3 tests/bench/torch_trace.py [--runs 7]
       [--steps 4000] [--batch 64] [--instructions [--cache-sim]]
Prints a Markdown table (docs/benchmarks.md has the last one).
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
PY = "/usr/bin/python3"

DRIVER = r"""
import inspect, os, sys, time
sys.path.insert(0, %(examples)r)
import torch
torch.set_num_threads(1)
import train
variant, steps = sys.argv[1], int(sys.argv[2])
batch = int(os.environ.get("BENCH_BATCH", "64"))
if variant in ("full", "sampled", "auto"):
    # The agent installs its hooks shortly after torch is imported.
    deadline = time.time() + 10
    while inspect.isfunction(torch.optim.Optimizer._optimizer_step_code) \
            and not getattr(sys.modules["torch.optim.optimizer"],
                            "_global_optimizer_post_hooks", None):
        if time.time() > deadline:
            sys.exit("tracing did not start")
        time.sleep(0.01)
train.train(50, batch, 0)                 # warm-up
if len(sys.argv) > 3:                     # --instructions: sync with the bench
    print("GO", flush=True)
    while not os.path.exists(sys.argv[3] + ".go"):
        time.sleep(0.01)
ctx = None
if variant == "profiler":
    from torch.profiler import profile, ProfilerActivity
    ctx = profile(activities=[ProfilerActivity.CPU], with_modules=True)
    ctx.__enter__()
w0, t0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
train.train(steps, batch, 0)
w1, t1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
if ctx is not None:
    ctx.__exit__(None, None, None)
print("ELAPSED", t1 - t0, w1 - w0, (p1 - p0) - (t1 - t0), flush=True)
if len(sys.argv) > 3:
    while not os.path.exists(sys.argv[3] + ".end"):
        time.sleep(0.01)
"""

BATCH = 64  # main() sets it from --batch

VARIANTS = {
    "baseline": {},
    "agent": {"PROBING": "1"},
    "full": {"PROBING": "1", "PROBING_TORCH_PROFILING": "on,step_rate=1"},
    "sampled": {"PROBING": "1", "PROBING_TORCH_PROFILING": "on,step_rate=10"},
    "auto": {"PROBING": "1", "PROBING_TORCH_PROFILING": "on"},
    "profiler": {},
}


def environment(variant):
    """The environment of a run of variant: ours without the agent's
    switches, then the batch and the variant's settings."""
    e = dict(os.environ)
    for k in ("PROBING", "PROBING_TORCH_PROFILING"):
        e.pop(k, None)
    e["PYTHONUSERBASE"] = os.path.join(BUILD, "userbase")
    e["BENCH_BATCH"] = str(BATCH)
    e.update(VARIANTS[variant])
    return e


def run(variant, steps):
    e = environment(variant)
    code = DRIVER % {"examples": os.path.join(ROOT, "examples")}
    cp = subprocess.run([PY, "-c", code, variant, str(steps)], env=e,
                        capture_output=True, text=True)
    if cp.returncode != 0:
        sys.exit("%s run failed:\n%s" % (variant, cp.stderr[-3000:]))
    out = cp.stdout
    line = [l for l in out.splitlines() if l.startswith("ELAPSED")][0]
    cpu, wall, other = (float(x) for x in line.split()[1:])
    return cpu, wall, other


CACHE_SIM = False  # main() sets it from --cache-sim


def run_counted(variant, steps, tmp, all_threads=False, name=None,
                before_zero=None, after_dump=None, events=None):
    """Instructions of the training thread in the timed loop, under
    callgrind; with all_threads, those of every thread of the process in
    that time (the agent's own threads included).  name: of the files in
    tmp (default: the variant's).  before_zero(pid) runs just before the
    counters are zeroed, after_dump(pid) just after they are dumped: what
    they do is not counted.  events: a dict that gets every event's total
    (with --cache-sim: Ir, I1mr, D1mr, ...)."""
    e = environment(variant)
    code = DRIVER % {"examples": os.path.join(ROOT, "examples")}
    # The ELAPSED line comes before the dump: when a GIL thread takes the
    # GIL, its instructions count in its own thread, not the training one.
    name = name or variant
    base = os.path.join(tmp, name)
    code = code.replace('print("ELAPSED"', 'print("ELAPSED_"')
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--separate-threads=yes"]
        + (["--cache-sim=yes"] if CACHE_SIM else []) +
        ["--callgrind-out-file=" + base + ".cg", PY, "-c", code, variant,
         str(steps), base], env=e, stdout=subprocess.PIPE,
        stderr=open(base + ".err", "w"), text=True)
    zeroed = False
    for line in proc.stdout:
        if line.startswith("GO"):
            if before_zero:
                before_zero(proc.pid)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)],
                           capture_output=True, check=True)
            zeroed = True
            open(base + ".go", "w").close()
        elif line.startswith("ELAPSED_") and zeroed:
            subprocess.run(["callgrind_control", "-d", str(proc.pid)],
                           capture_output=True, check=True)
            if after_dump:
                after_dump(proc.pid)
            open(base + ".end", "w").close()
    proc.wait()
    # The dump after the zeroing: "<variant>.cg.1-TT", one file per thread
    # (01: the training thread).
    dumps = sorted(f for f in os.listdir(tmp)
                   if f.startswith(name + ".cg.1-")
                   and (all_threads or f.endswith("-01")))
    if not dumps:
        with open(base + ".err", errors="replace") as f:
            err = f.read()[-3000:]
        sys.exit("%s: no callgrind dump (exit status %s); valgrind said:\n%s"
                 % (name, proc.returncode, err))
    total = 0
    for d in dumps:
        names = ["Ir"]
        with open(os.path.join(tmp, d)) as f:
            for line in f:
                if line.startswith("events:"):
                    names = line.split()[1:]
                if line.startswith("summary:") or line.startswith("totals:"):
                    total += int(line.split()[1])
                    if events is not None:
                        for e, v in zip(names, line.split()[1:]):
                            events[e] = events.get(e, 0) + int(v)
                    break
            else:
                sys.exit("%s: no totals in %s" % (name, d))
    return total


def instructions(names, steps):
    import tempfile
    tmp = tempfile.mkdtemp(prefix="torch_trace_cg.")
    counts, events = {}, {}
    for n in names:
        events[n] = {}
        counts[n] = run_counted(n, steps, tmp, events=events[n])
        print("%s done" % n, file=sys.stderr)
    base = counts[names[0]]
    print("Instructions of the training thread, %d steps of batch %d, "
          "under callgrind%s\n" % (steps, BATCH,
                                   " (cache simulation)" if CACHE_SIM else ""))
    if not CACHE_SIM:
        print("| variant | instructions per step | ratio |")
        print("|---|---|---|")
        for n in names:
            print("| %s | %.0f | %.4fx |" % (n, counts[n] / steps,
                                            counts[n] / base))
        return
    # Misses a step, and how many more than the first variant's.
    cols = ("I1mr", "D1mr", "D1mw", "ILmr", "DLmr")
    print("| variant | instructions per step | ratio | " +
          " | ".join("%s per step (+)" % c for c in cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for n in names:
        e, b = events[n], events[names[0]]
        print("| %s | %.0f | %.4fx | " % (n, counts[n] / steps,
                                         counts[n] / base) +
              " | ".join("%.0f (%+.0f)" % (e.get(c, 0) / steps,
                                           (e.get(c, 0) - b.get(c, 0)) / steps)
                         for c in cols) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under callgrind instead")
    ap.add_argument("--cache-sim", action="store_true",
                    help="with --instructions: simulate the caches too "
                    "(misses a step; slower)")
    ap.add_argument("--batch", type=int, default=64,
                    help="the loop's batch (64: ~170 µs a step; 4096: "
                    "~5.5 ms)")
    args = ap.parse_args()
    global BATCH, CACHE_SIM
    BATCH = args.batch
    CACHE_SIM = args.cache_sim
    names = args.variants.split(",")
    if args.instructions:
        instructions(names, args.steps)
        return
    res = {n: [] for n in names}
    for i in range(args.runs):
        order = names[i % len(names):] + names[:i % len(names)]
        for n in order:
            res[n].append(run(n, args.steps))
        print("round %d/%d done" % (i + 1, args.runs), file=sys.stderr)
    base = statistics.median(r[0] for r in res[names[0]])
    base_wall = statistics.median(r[1] for r in res[names[0]])
    print("Host: %s, %d CPUs, Python %s, torch (system) on /usr/bin/python3"
          % (platform.machine(), os.cpu_count(), platform.python_version()))
    print("Loop: examples/train.py train(), batch %d, %d steps, %d runs each, "
          "alternating\n" % (BATCH, args.steps, args.runs))
    base_min = min(r[0] for r in res[names[0]])
    print("| variant | thread CPU median (s) | ratio | paired | best | "
          "wall median (s) | wall ratio | agent CPU (s) | us/step added |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        cpu = [r[0] for r in res[n]]
        wall = [r[1] for r in res[n]]
        other = [r[2] for r in res[n]]
        paired = statistics.median(c / b[0] for c, b in zip(cpu, res[names[0]]))
        m = statistics.median(cpu)
        print("| %s | %.3f | %.3fx | %.3fx | %.3fx | %.3f | %.3fx | %.3f | %.1f |"
              % (n, m, m / base, paired, min(cpu) / base_min,
                 statistics.median(wall), statistics.median(wall) / base_wall,
                 statistics.median(other), (m - base) / args.steps * 1e6))


if __name__ == "__main__":
    main()
