"""Cost of the recording on disk, with every recorder on, and of each recorder.

The loop is examples/train.py's train() (a two-layer MLP, batch --batch, SGD),
timed inside the process over --steps steps after a warm-up, in the
variants of --variants, run alternating (the order rotates every round)
--runs times each:

  baseline  no agent
  memory    the agent with every recorder on: the sampler at 100 Hz
            (started with `probing perf --start --hz 100` during the
            warm-up), torch tracing (PROBING_TORCH_PROFILING=on: its
            default step_rate=auto, one step in two at 5.5 ms), the
            memory series (memory.interval_ms=1000) — kept in memory only
            (PROBING_DATA_DIR=off)
  disk      the same, recorded to disk (PROBING_DATA_DIR=<a fresh
            directory>, the default data.flush_ms=1000)
  idle      the agent with no recorder (memory.interval_ms=0), memory only
  sampler   idle + the sampler at 100 Hz
  tracing   idle + torch tracing (on: step_rate=auto)
  series    idle + the memory series every second

Figures: the training thread's CPU time (time.thread_time; wall time is
printed too), "ratio" = median / baseline's median, "paired" = median of
each round's variant / the same round's baseline, and for disk against
memory the same paired ratio ("disk/memory").  "agent CPU" is the process's
CPU minus the training thread's (the sampler, the recorder, the recording
thread).  "faults/step": the training thread's minor page faults per step.
"bytes/hour" is what a disk run's recording grew by from 2.5 s after the
sampler started (the files made) to the process's exit, over that time,
times 3600.

--malloc steady runs every variant (the baseline too) with glibc's heap
neither trimmed nor mmapped for big blocks (GLIBC_TUNABLES
trim_threshold=256M, mmap_threshold=32M).  With glibc's defaults, a loop
whose tensors are a megabyte gives its heap top back to the kernel or not
depending on where the heap's other blocks happen to lie, run by run:
identical runs differ by 0 to 100 000 page faults (up to 5% of their CPU
time), which buries a 1% effect.  Steady, the loop faults a few hundred
times in all.

--toggle measures every recorder's cost inside one process instead: the
agent starts idle (memory.interval_ms=0, no tracing, no sampler), and
the process runs --blocks blocks of --steps steps with the recorders
switched off, on, on, off, and so on (the sampler by `probing perf
--start --hz 100` / `--stop`, tracing and the memory series by `probing
config torch.profiling=on memory.interval_ms=1000` and back, the rate and
the torch.profiling value set by --hz and --torch-profiling; each switch
waits until torch.status says it took), timing each block's training
thread CPU; a quad's ratio is its two "on" blocks over its two "off"
ones (a linear drift cancels).  Once with the recording in memory only,
once on disk.  Two processes of the same program differ by more than the
1% looked for (the allocator's lottery above, where the libraries land);
blocks of one process a second apart do not.  --recorders switches only
some (the others stay off); --recorders none switches nothing, the
blocks labelled on and off all the same: the method's own spread, a
control.  --recording picks memory only or disk or both; RECORD_BLOCKS=1
prints each block to stderr (on, CPU seconds, involuntary and voluntary
context switches, page faults).  The 95% interval of the median of quads
is a bootstrap's over whole processes (2000 resamples of the processes,
each with all its quads): two processes of one program differ by more
than quads of one process do, so resampling quads alone made the
interval too narrow.  The processes of memory only and disk alternate.

--batch makes each step bigger (64 by default: ~170 µs a step, a loop
where tracing every step shows; 4096: ~5.5 ms a step, nearer a real
model's): the recorders' cost is per step and per second, the step's
work is not.

Usage: PROBING_BUILD=build python3 tests/bench/record.py [--runs 7]
       [--steps 40000] [--batch 64] [--variants baseline,memory,disk]
       [--malloc default|steady]
       PROBING_BUILD=build python3 tests/bench/record.py --toggle [--runs 3]
       [--blocks 40] [--steps 200] [--batch 4096]
Prints a Markdown table (docs/benchmarks.md has the last ones).
"""
import argparse
import os
import platform
import random
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
import os, resource, sys, time
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
f0 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
w0, t0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
train.train(steps, batch, 0)
w1, t1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
f1 = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
print("ELAPSED", t1 - t0, w1 - w0, (p1 - p0) - (t1 - t0), f1 - f0, flush=True)
"""

ALL_ON = {"PROBING": "1", "PROBING_TORCH_PROFILING": "on",
          "PROBING_MEMORY_INTERVAL_MS": "1000"}
IDLE = {"PROBING": "1", "PROBING_MEMORY_INTERVAL_MS": "0",
        "PROBING_DATA_DIR": "off"}
# --toggle: one process, the recorders switched on and off between blocks
# of steps (off on on off, repeated: a linear drift cancels in each four).
TOGGLE_DRIVER = r"""
import os, resource, subprocess, sys, time
sys.path.insert(0, %(examples)r)
import torch
torch.set_num_threads(1)
import train
cli, steps, batch, blocks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4])
which = sys.argv[5].split(",")            # sampler, tracing, series
hz = sys.argv[6]                          # the sampler's rate
profiling = sys.argv[7]                   # torch.profiling when on
pid = str(os.getpid())


def probing(*args):
    out = subprocess.run([cli, "-t", pid] + list(args), check=True,
                         capture_output=True, text=True).stdout
    return out


def recorders(on):
    if "sampler" in which:
        probing("perf", "--start", "--hz", hz) if on else \
            probing("perf", "--stop")
    if "series" in which:
        probing("config", "memory.interval_ms=%%d" %% (1000 if on else 0))
    if "tracing" not in which:
        return
    probing("config", "torch.profiling=" + (profiling if on else "off"))
    deadline = time.time() + 10     # the recorder thread applies it
    while ("\ton: " in probing("config", "torch.status")) != on:
        if time.time() > deadline:
            sys.exit("torch.status did not follow torch.profiling")
        time.sleep(0.05)


train.train(50, batch, 0)                 # warm-up
state = False
for i in range(blocks):
    on = i %% 4 in (1, 2)
    if on != state:
        recorders(on)
        state = on
    train.train(10, batch, 0)
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    t0 = time.thread_time()
    train.train(steps, batch, 0)
    t1 = time.thread_time()
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    print("BLOCK", int(on), t1 - t0, r1.ru_nivcsw - r0.ru_nivcsw,
          r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_minflt - r0.ru_minflt, flush=True)
"""

# name: (environment, sampler started, recorded to disk)
VARIANTS = {
    "baseline": ({}, False, False),
    "memory": (dict(ALL_ON, PROBING_DATA_DIR="off"), True, False),
    "disk": (ALL_ON, True, True),
    "idle": (IDLE, False, False),
    "sampler": (IDLE, True, False),
    "tracing": (dict(IDLE, PROBING_TORCH_PROFILING="on"), False, False),
    "series": (dict(IDLE, PROBING_MEMORY_INTERVAL_MS="1000"), False, False),
}
STEADY_MALLOC = ("glibc.malloc.trim_threshold=268435456:"
                 "glibc.malloc.mmap_threshold=33554432")


def dir_bytes(d):
    total = 0
    for base, _, files in os.walk(d):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(base, f))
            except OSError:
                pass
    return total


def environment(env, on_disk, malloc):
    """A fresh directory and the environment of a run: ours without any
    PROBING* or GLIBC_TUNABLES, then env, the malloc mode, the data dir."""
    tmp = tempfile.mkdtemp(prefix="probing-bench-record.")
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("PROBING"):
            del e[k]
    e["PYTHONUSERBASE"] = os.path.join(BUILD, "userbase")
    e.pop("GLIBC_TUNABLES", None)
    if malloc == "steady":
        e["GLIBC_TUNABLES"] = STEADY_MALLOC
    e.update(env)
    if on_disk:
        e["PROBING_DATA_DIR"] = os.path.join(tmp, "data")
    return tmp, e


def run(variant, steps, batch, malloc):
    env, sampled, on_disk = VARIANTS[variant]
    tmp, e = environment(env, on_disk, malloc)
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
    if sampled:
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
    cpu, wall, other, faults = (float(x) for x in line.split()[1:])
    shutil.rmtree(tmp, True)
    return cpu, wall, other, grown / took * 3600 if on_disk else 0, faults


def run_toggled(on_disk, steps, batch, blocks, malloc, which, hz, profiling):
    """Thread CPU seconds of each block, as (on, seconds) pairs."""
    tmp, e = environment(IDLE, on_disk, malloc)
    code = TOGGLE_DRIVER % {"examples": os.path.join(ROOT, "examples")}
    cp = subprocess.run([PY, "-c", code, CLI, str(steps), str(batch),
                         str(blocks), which, str(hz), profiling], env=e,
                        capture_output=True, text=True)
    shutil.rmtree(tmp, True)
    if cp.returncode != 0:
        sys.exit("toggled run failed:\n%s" % cp.stderr[-3000:])
    if os.environ.get("RECORD_BLOCKS"):
        sys.stderr.write("".join(l + "\n" for l in cp.stdout.splitlines()
                                 if l.startswith("BLOCK")))
    return [(l.split()[1] == "1", float(l.split()[2]))
            for l in cp.stdout.splitlines() if l.startswith("BLOCK")]


def median_interval(groups, rounds=2000):
    """A 95% interval of the median of the quads of groups (one list of
    quads a process): the 2.5th and 97.5th percentiles of the medians of
    resamples of whole processes (a cluster bootstrap: quads of one
    process are not independent, two processes differ by more than two
    quads of one; seeded, so the same blocks give the same interval)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(
        [q for g in rng.choices(groups, k=len(groups)) for q in g])
        for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def toggled(args):
    print("Host: %s, %d CPUs, Python %s, torch (system) on /usr/bin/python3"
          % (platform.machine(), os.cpu_count(), platform.python_version()))
    print("Loop: examples/train.py train(), batch %d, blocks of %d steps, "
          "%d blocks a process, %d processes each; malloc %s; switched: %s "
          "(sampler at %d Hz, torch.profiling=%s)\n"
          % (args.batch, args.steps, args.blocks, args.runs, args.malloc,
             args.recorders, args.hz, args.torch_profiling))
    modes = {"both": (False, True), "memory": (False,),
             "disk": (True,)}[args.recording]
    groups = {m: [] for m in modes}
    on_all = {m: [] for m in modes}
    off_all = {m: [] for m in modes}
    # The modes' processes alternate: drift over the run touches each.
    for i in range(args.runs):
        for on_disk in modes:
            blocks = run_toggled(on_disk, args.steps, args.batch, args.blocks,
                                 args.malloc, args.recorders, args.hz,
                                 args.torch_profiling)
            quads = []
            for q in range(0, len(blocks) - 3, 4):
                on = sum(t for o, t in blocks[q:q + 4] if o)
                off = sum(t for o, t in blocks[q:q + 4] if not o)
                quads.append(on / off)
            groups[on_disk].append(quads)
            on_all[on_disk] += [t for o, t in blocks if o]
            off_all[on_disk] += [t for o, t in blocks if not o]
            print("%s process %d/%d done" % ("disk" if on_disk else "memory",
                                             i + 1, args.runs),
                  file=sys.stderr)
    print("| recording | quads | on/off, median of quads | 95% interval "
          "(processes resampled) | on/off, all blocks | quads above 1.01x "
          "| each process's median |")
    print("|---|---|---|---|---|---|---|")
    for on_disk in modes:
        quads = [q for g in groups[on_disk] for q in g]
        lo, hi = median_interval(groups[on_disk])
        print("| %s | %d | %.4fx | %.4f-%.4f | %.4fx | %d | %s |"
              % ("disk" if on_disk else "memory only", len(quads),
                 statistics.median(quads), lo, hi,
                 statistics.median(on_all[on_disk]) /
                 statistics.median(off_all[on_disk]),
                 sum(1 for q in quads if q > 1.01),
                 " ".join("%.3f" % statistics.median(g)
                          for g in groups[on_disk])))


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Details: the top of tests/bench/record.py and "
        "docs/benchmarks.md.")
    ap.add_argument("--runs", type=int, default=7,
                    help="processes per variant (with --toggle: per "
                    "recording)")
    ap.add_argument("--steps", type=int, default=40000,
                    help="steps timed per process (with --toggle: per block)")
    ap.add_argument("--batch", type=int, default=64,
                    help="the loop's batch (64: ~170 µs a step; 4096: "
                    "~5.5 ms)")
    ap.add_argument("--variants", default="baseline,memory,disk",
                    help="comma-separated, the first one the reference "
                    "(of: %s)" % ", ".join(VARIANTS))
    ap.add_argument("--malloc", choices=("default", "steady"),
                    default="default",
                    help="steady: glibc's heap neither trimmed nor mmapped "
                    "in every variant (see above)")
    ap.add_argument("--toggle", action="store_true",
                    help="in one process, every recorder on and off by "
                    "turns, blocks of --steps steps")
    ap.add_argument("--blocks", type=int, default=40,
                    help="with --toggle: blocks a process (a multiple of 4)")
    ap.add_argument("--recorders", default="sampler,tracing,series",
                    help="with --toggle: those switched (of sampler, "
                    "tracing, series; none: nothing is, the blocks are "
                    "labelled on and off all the same, a control)")
    ap.add_argument("--hz", type=int, default=100,
                    help="with --toggle: the sampler's rate (100)")
    ap.add_argument("--torch-profiling", default="on",
                    help="with --toggle: torch.profiling when tracing is "
                    "switched on (on, whose step_rate is auto; e.g. "
                    "on,step_rate=1 for every step)")
    ap.add_argument("--recording", choices=("both", "memory", "disk"),
                    default="both",
                    help="with --toggle: memory only, on disk, or both")
    args = ap.parse_args()
    if args.toggle:
        which = set(args.recorders.split(","))
        bad = which - {"sampler", "tracing", "series"}
        if (bad and which != {"none"}) or args.blocks % 4:
            ap.error("--recorders: of sampler, tracing, series (or none); "
                     "--blocks: a multiple of 4")
        toggled(args)
        return
    names = args.variants.split(",")
    for n in names:
        if n not in VARIANTS:
            ap.error("no variant %r (there are: %s)" % (n, ", ".join(VARIANTS)))
    res = {n: [] for n in names}
    for i in range(args.runs):
        order = names[i % len(names):] + names[:i % len(names)]
        for n in order:
            res[n].append(run(n, args.steps, args.batch, args.malloc))
        print("round %d/%d done" % (i + 1, args.runs), file=sys.stderr)
    ref = res[names[0]]
    base = statistics.median(r[0] for r in ref)
    base_wall = statistics.median(r[1] for r in ref)
    print("Host: %s, %d CPUs, Python %s, torch (system) on /usr/bin/python3"
          % (platform.machine(), os.cpu_count(), platform.python_version()))
    print("Loop: examples/train.py train(), batch %d, %d steps, %d runs "
          "each, alternating; malloc %s\n"
          % (args.batch, args.steps, args.runs, args.malloc))
    print("| variant | thread CPU median (s) | ratio | paired | wall median (s) "
          "| wall ratio | agent CPU (s) | faults/step | bytes/hour |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        cpu = [r[0] for r in res[n]]
        paired = statistics.median(c / b[0] for c, b in zip(cpu, ref))
        m = statistics.median(cpu)
        bph = statistics.median(r[3] for r in res[n]) if VARIANTS[n][2] else 0
        print("| %s | %.3f | %.3fx | %.3fx | %.3f | %.3fx | %.3f | %.1f | %s |"
              % (n, m, m / base, paired, statistics.median(r[1] for r in res[n]),
                 statistics.median(r[1] for r in res[n]) / base_wall,
                 statistics.median(r[2] for r in res[n]),
                 statistics.median(r[4] for r in res[n]) / args.steps,
                 "%.1f MB" % (bph / 1e6) if bph else "-"))
    if "disk" in res and "memory" in res:
        dm = statistics.median(d[0] / m[0]
                               for d, m in zip(res["disk"], res["memory"]))
        dmw = statistics.median(d[1] / m[1]
                                for d, m in zip(res["disk"], res["memory"]))
        print("\ndisk/memory, paired: thread CPU %.3fx, wall %.3fx" % (dm, dmw))


if __name__ == "__main__":
    main()
