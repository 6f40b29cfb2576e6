"""`probing backtrace --native` beside austinp's `--where` (austin's native
variant: every thread's native and Python frames, once), on the same
running training loop (examples/train.py), alternating, median of N each.

austinp stops the process with ptrace for its dump; the agent signals each
thread for the instant of its unwind.  Debian 13 (trixie) packages
austinp: run this there (`scripts/sysroot trixie python3
tests/bench/native_dump.py`, PROBING_BUILD=/src/build-trixie).

Usage: PROBING_BUILD=build python3 tests/bench/native_dump.py [--runs 9]
Prints a Markdown table (paste into docs/benchmarks.md).
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")


def timed(argv):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        raise SystemExit("%s failed: %s" % (argv[0], r.stdout[-500:]))
    return ms, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    austinp = shutil.which("austinp")
    env = dict(os.environ, PROBING="1", OMP_NUM_THREADS="1",
               PYTHONUSERBASE=os.path.join(BUILD, "userbase"))
    target = subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "train.py")],
                              env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while subprocess.run([CLI, "-t", str(target.pid), "--no-pager", "backtrace"],
                             capture_output=True, text=True).stdout.find("train_step") < 0:
            if time.time() > deadline:
                raise SystemExit("the training loop did not start")
            time.sleep(0.5)
        ours, theirs = [], []
        for i in range(a.runs):
            order = [("ours", [CLI, "-t", str(target.pid), "--no-pager",
                               "backtrace", "--native"])]
            if austinp:
                order.append(("theirs", [austinp, "-w", str(target.pid)]))
            if i % 2:
                order.reverse()
            for who, argv in order:
                ms, out = timed(argv)
                (ours if who == "ours" else theirs).append(ms)
        print("Machine: %s, %d cores, Python %s; %s" % (
            platform.machine(), os.cpu_count(), platform.python_version(),
            time.strftime("%Y-%m-%d")))
        print()
        print("| measure (examples/train.py running, median of %d) | value |" % a.runs)
        print("|---|---|")
        print("| probing backtrace --native (CLI, every thread) | %.1f ms |"
              % statistics.median(ours))
        if theirs:
            print("| austinp -w (every thread, the process stopped by ptrace) | %.1f ms |"
                  % statistics.median(theirs))
        else:
            print("| austinp | not on this machine |")
    finally:
        target.kill()
        target.wait()


if __name__ == "__main__":
    main()
