#!/usr/bin/env python3
"""How long does listing an asyncio program's tasks stop its event loop?
(issue 33: listing 10,000 tasks stops the loop 50 ms at most.)  And what
does the profiler's attribution of samples to tasks cost it?

The target runs --tasks idle tasks and a ticker task that sleeps 1 ms at a
time and keeps the longest gap between two of its ticks (a gap past 1 ms
is the loop not running it).  For each run the bench resets that gap,
does one thing, and reads the gap back, over its stdin:

  idle        nothing (the loop's own jitter, the baseline)
  table       probing -t PID query "SELECT count(*) FROM python.tasks"
  tree        probing -t PID backtrace --tasks
  asyncio-ps  python -m asyncio ps PID (CPython 3.14+'s own tool, reading
              the process from outside; the peer, where the Python has it)
  sample      probing -t PID flamegraph -d WINDOW (2s), profile.tasks off
  sample-tasks  the same with profile.tasks on and --tasks (the tasks
              listed with the GIL when the run starts and once a second)

and prints, per mode, the median and the worst of the longest gaps, the
median time the command took, and the ticks the loop ran per second
meanwhile (its throughput: 1 ms sleeps, so about 900 at most).

  python3 tests/bench/asyncio_tasks.py --python python3 --tasks 10000 --runs 15
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TARGET = r"""
import asyncio, sys, time

async def idle(ev):
    await ev.wait()

async def main(n):
    ev = asyncio.Event()
    tasks = [asyncio.create_task(idle(ev), name="idle-%d" % i) for i in range(n)]
    loop = asyncio.get_running_loop()
    gap = [0.0]
    ticks = [0, time.perf_counter()]

    async def ticker():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gap[0] = max(gap[0], now - last)
            ticks[0] += 1
            last = now

    def command():
        line = sys.stdin.readline().strip()
        if line == "mark":
            gap[0] = 0.0
            ticks[0], ticks[1] = 0, time.perf_counter()
            print("marked", flush=True)
        elif line == "gap":
            rate = ticks[0] / (time.perf_counter() - ticks[1])
            print("gap %.6f %.1f" % (gap[0], rate), flush=True)
        elif not line:
            loop.stop()

    tick = asyncio.create_task(ticker(), name="ticker")
    loop.add_reader(sys.stdin.fileno(), command)
    print("READY", flush=True)
    await asyncio.gather(*tasks, tick)

asyncio.run(main(int(sys.argv[1])))
"""


def ask(p, what):
    p.stdin.write(what + "\n")
    p.stdin.flush()
    return p.stdout.readline().split()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="python3")
    ap.add_argument("--build", default=os.environ.get("PROBING_BUILD",
                                                     os.path.join(ROOT, "build")))
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--window", type=float, default=2.0,
                    help="seconds of idle and of each sample run")
    a = ap.parse_args()
    cli = os.path.join(a.build, "cli", "probing")
    env = dict(os.environ, PROBING="1",
               PYTHONUSERBASE=os.path.join(a.build, "userbase"))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(TARGET)
    p = subprocess.Popen([a.python, f.name, str(a.tasks)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "READY"
        for _ in range(100):     # the agent up
            if subprocess.run([cli, "-t", str(p.pid), "query", "SELECT 1"],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        version = subprocess.run([a.python, "-c", "import sys; print(sys.version_info >= (3, 14))"],
                                 capture_output=True, text=True).stdout.strip() == "True"
        modes = {
            "idle": None,
            "table": [cli, "-t", str(p.pid), "query", "SELECT count(*) FROM python.tasks"],
            "tree": [cli, "-t", str(p.pid), "backtrace", "--tasks"],
        }
        if version:
            modes["asyncio-ps"] = [a.python, "-m", "asyncio", "ps", str(p.pid)]
        fg = [cli, "-t", str(p.pid), "flamegraph", "-d", "%gs" % a.window, "--as", "folded",
              "-o", os.devnull]
        modes["sample"] = fg
        modes["sample-tasks"] = fg + ["--tasks"]
        setting = {"sample": "profile.tasks=off", "sample-tasks": "profile.tasks=on"}
        gaps = {m: [] for m in modes}
        took = {m: [] for m in modes}
        rates = {m: [] for m in modes}
        for _ in range(a.runs):
            for m, cmd in modes.items():   # side by side, in turn
                if m in setting:
                    subprocess.run([cli, "-t", str(p.pid), "config", setting[m]],
                                   capture_output=True, check=True)
                ask(p, "mark")
                t0 = time.perf_counter()
                if cmd is None:
                    time.sleep(a.window)
                else:
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    if r.returncode != 0:
                        sys.exit("%s failed: %s" % (m, r.stderr[-500:]))
                took[m].append(time.perf_counter() - t0)
                time.sleep(0.02)   # the last ticks after it
                g = ask(p, "gap")
                gaps[m].append(float(g[1]))
                rates[m].append(float(g[2]))
        print("%d idle tasks, %s, %d runs each (the loop's longest gap between "
              "1 ms ticks while it ran; its ticks a second)" % (a.tasks, a.python, a.runs))
        print("%-13s %12s %12s %12s %12s" % ("mode", "gap median", "gap worst",
                                             "took median", "ticks/s"))
        for m in modes:
            print("%-13s %9.1f ms %9.1f ms %9.0f ms %12.0f" % (
                m, statistics.median(gaps[m]) * 1e3, max(gaps[m]) * 1e3,
                statistics.median(took[m]) * 1e3, statistics.median(rates[m])))
    finally:
        p.kill()
        p.wait()
        os.unlink(f.name)


if __name__ == "__main__":
    main()
