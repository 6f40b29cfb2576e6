"""The sampling profiler's overhead on the torch training loop, counted in
instructions (deterministic) rather than time (this machine's noise is
several percent; docs/benchmarks.md).

Under valgrind a program runs some 50 times slower while the sampler
still ticks by the clock, so the instructions of a run sampled at N Hz
are not those of N Hz at full speed.  Instead this counts what one tick
costs and scales it to the real rate:

1. native speed: seconds per training step of examples/train.py's
   train() loop with the agent (median of a few runs, no valgrind);
2. under callgrind, every thread of the process during STEPS steps of the
   loop (tests/bench/torch_trace.py's driver: counters zeroed when the
   loop starts, dumped when it ends), with the profiler off, then on at
   --vg-hz (Python stacks), then on at --vg-hz with native stacks; the
   sampler's tick counter is read just before the zeroing and just after
   the dump, so no request to the agent is counted;
3. instructions per tick = (sampled - off) / ticks, which includes what a
   tick costs the training thread (the signal handler's unwinding with
   native stacks) and the sampler's and recorder's threads;
4. overhead at R Hz = 1 + R * per-tick / (instructions per second of the
   loop at native speed = instructions per step / seconds per step).

What instructions do not show: cache and scheduling effects (the
sampler's wake-ups on a shared core).  docs/benchmarks.md gives both.

Usage: PROBING_BUILD=build python3 tests/bench/profile_instructions.py
       [--steps 300] [--vg-hz 50] [--step-us US]      (about ten minutes)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_trace  # noqa: E402  (the driver and its environment)

CLI = os.path.join(torch_trace.BUILD, "cli", "probing")


def seconds_per_step(steps, runs):
    """Wall seconds per step of the loop at full speed, with the agent."""
    per = []
    for _ in range(runs):
        cpu, wall, other = torch_trace.run("agent", steps)
        per.append(wall / steps)
    return statistics.median(per)


def perf(pid, *args):
    cp = subprocess.run([CLI, "-t", str(pid), "--timeout", "60000", "perf"] +
                        list(args) + ["-f", "json"], capture_output=True, text=True)
    if cp.returncode != 0:
        sys.exit("probing perf %s: %s" % (" ".join(args), cp.stderr))
    return json.loads(cp.stdout)


def counted(steps, tmp, name, hz=0, native=False):
    """(instructions of every thread during the loop, sampler ticks in it):
    the profiler is started, and its ticks read, outside the counted
    window."""
    ticks = [0, 0]

    def start(pid):
        perf(pid, "--cc" if native else "--start", "--hz", str(hz))
        ticks[0] = perf(pid)["ticks"]

    def end(pid):
        ticks[1] = perf(pid)["ticks"]

    total = torch_trace.run_counted("agent", steps, tmp, all_threads=True,
                                    name=name,
                                    before_zero=start if hz else None,
                                    after_dump=end if hz else None)
    return total, ticks[1] - ticks[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--vg-hz", type=int, default=50,
                    help="sampling rate under valgrind (ticks to divide by)")
    ap.add_argument("--timed-runs", type=int, default=5)
    ap.add_argument("--step-us", type=float, default=0,
                    help="microseconds a step at full speed, measured before on "
                    "a quiet machine (instead of timing it now: a loaded "
                    "machine makes steps slower and the ratios larger)")
    a = ap.parse_args()
    sec = a.step_us / 1e6 if a.step_us > 0 else seconds_per_step(3000, a.timed_runs)
    tmp = tempfile.mkdtemp(prefix="profile_cg.")
    off, _ = counted(a.steps, tmp, "off")
    py, py_ticks = counted(a.steps, tmp, "python", a.vg_hz)
    nat, nat_ticks = counted(a.steps, tmp, "native", a.vg_hz, native=True)
    per_step = off / a.steps
    per_second = per_step / sec
    print("train() at full speed: %.1f us a step; %.0f instructions a step "
          "(every thread, callgrind, %d steps)\n" % (sec * 1e6, per_step, a.steps))
    print("| mode | ticks counted | instructions a tick | 100 Hz | 1 kHz |")
    print("|---|---|---|---|---|")
    for name, total, ticks in (("Python stacks", py, py_ticks),
                               ("native stacks", nat, nat_ticks)):
        if ticks <= 0:
            sys.exit("%s: no ticks counted" % name)
        tick = (total - off) / ticks
        print("| %s | %d | %.0f | %.4f | %.4f |" % (
            name, ticks, tick, 1 + 100 * tick / per_second,
            1 + 1000 * tick / per_second))


if __name__ == "__main__":
    main()
