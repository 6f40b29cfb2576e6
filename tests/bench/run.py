"""Benchmarks of the foundation, side by side in one run.

1. Idle overhead: the example training loop (examples/train.py's train())
   timed inside the process, without the agent and with it (PROBING=1),
   runs alternating, median of N each.  Ratio = with / without.  The time
   is the training thread's CPU time (time.thread_time): on a shared
   machine wall time swings by 2x between identical runs, CPU time of the
   thread much less; an agent that stole cycles from the training thread
   (signals, GIL traffic, cache) would still show.
2. Latency: `probing -t PID backtrace` (the whole CLI: exec, connect,
   initialize, request, print), the same with --native (every thread
   signalled for its C frames) and a `python.backtrace` query, all against
   the training loop while it runs; plus the bare DAP round trip of each
   request over an open socket.  Median of 20.

Usage: PROBING_BUILD=build python3 tests/bench/run.py [--runs 7] [--steps 4000]
Prints a Markdown table (paste into docs/benchmarks.md).
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
PY = "/usr/bin/python3"

DRIVER = """
import sys, time
sys.path.insert(0, %(examples)r)
import torch
torch.set_num_threads(1)
import train
steps = int(sys.argv[1])
train.train(50, 64, 0)               # warm-up
t0 = time.thread_time()
train.train(steps, 64, 0)
print("ELAPSED", time.thread_time() - t0, flush=True)
"""


def env_for(agent):
    e = dict(os.environ)
    e.pop("PROBING", None)
    e["PYTHONUSERBASE"] = os.path.join(BUILD, "userbase")
    if agent:
        e["PROBING"] = "1"
    return e


def timed_run(agent, steps):
    code = DRIVER % {"examples": os.path.join(ROOT, "examples")}
    out = subprocess.run([PY, "-c", code, str(steps)], env=env_for(agent),
                         capture_output=True, text=True, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith("ELAPSED")][0]
    return float(line.split()[1])


def idle_overhead(runs, steps):
    """Medians of each side, and the median of the ratios of each pair of
    back-to-back runs (pairs share the machine's mood of the moment)."""
    without, with_, ratios = [], [], []
    for i in range(runs):
        # alternate which goes first, so drift does not favour one side
        order = (False, True) if i % 2 == 0 else (True, False)
        pair = {}
        for agent in order:
            pair[agent] = timed_run(agent, steps)
        without.append(pair[False])
        with_.append(pair[True])
        ratios.append(pair[True] / pair[False])
    return statistics.median(without), statistics.median(with_), statistics.median(ratios)


def dap_request(sock, seq, command, args):
    body = json.dumps({"seq": seq, "type": "request", "command": command,
                       "arguments": args}).encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = int(head.split(b":")[1])
    while len(rest) < n:
        rest += sock.recv(65536)
    msg = json.loads(rest[:n])
    assert msg["success"], msg
    return msg


def latency(n):
    code = "import sys; sys.path.insert(0, %r); import train; train.train(0, 64, 0.001)" % os.path.join(ROOT, "examples")
    target = subprocess.Popen([PY, "-c", code], env=env_for(True),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            r = subprocess.run([CLI, "-t", str(target.pid), "query",
                                "SELECT count(*) FROM python.backtrace WHERE func = 'train_step'"],
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip().endswith("1"):
                break
            if time.time() > deadline:
                raise SystemExit("target did not come up: " + r.stderr)
            time.sleep(0.1)
        res = {}
        for name, argv in [
            ("probing backtrace (CLI)", ["backtrace"]),
            ("probing backtrace --native (CLI)", ["backtrace", "--native"]),
            ("probing query python.backtrace (CLI)",
             ["query", "SELECT func, file, lineno FROM python.backtrace ORDER BY depth"]),
        ]:
            samples = []
            for _ in range(n):
                t0 = time.perf_counter()
                subprocess.run([CLI, "-t", str(target.pid), *argv], check=True,
                               stdout=subprocess.DEVNULL)
                samples.append((time.perf_counter() - t0) * 1000)
            res[name] = statistics.median(samples)
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0probing-%d" % target.pid)
        dap_request(s, 1, "initialize", {})
        for name, cmd, args in [
            ("probing/backtrace request (DAP round trip)", "probing/backtrace", {}),
            ("probing/backtrace {native: true} (DAP round trip)",
             "probing/backtrace", {"native": True}),
            ("python.backtrace query (DAP round trip)", "probing/query",
             {"sql": "SELECT func, file, lineno FROM python.backtrace ORDER BY depth"}),
        ]:
            samples = []
            for i in range(n):
                t0 = time.perf_counter()
                dap_request(s, i + 2, cmd, args)
                samples.append((time.perf_counter() - t0) * 1000)
            res[name] = statistics.median(samples)
        s.close()
        return res
    finally:
        target.kill()
        target.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--latency-samples", type=int, default=20)
    ap.add_argument("--instructions", type=int, default=0, metavar="STEPS",
                    help="also count, under callgrind, the instructions of "
                    "every thread of the process during STEPS training steps, "
                    "without and with the agent (deterministic; minutes)")
    a = ap.parse_args()
    counted = idle_instructions(a.instructions) if a.instructions else None
    base, agent, pair_ratio = idle_overhead(a.runs, a.steps)
    lat = latency(a.latency_samples)
    print("Machine: %s, %d cores, Python %s; %s" % (
        platform.machine(), os.cpu_count(), platform.python_version(),
        time.strftime("%Y-%m-%d")))
    print()
    print("| measure | value | goal |")
    print("|---|---|---|")
    print("| training loop, %d steps, without agent (CPU s of the thread, median of %d) | %.3f s | |" % (a.steps, a.runs, base))
    print("| same, with agent (PROBING=1) | %.3f s | |" % agent)
    print("| idle overhead: ratio of the medians (with / without) | %.4f | <= 1.005 |" % (agent / base))
    print("| idle overhead: median of the paired ratios | %.4f | <= 1.005 |" % pair_ratio)
    for k, v in lat.items():
        print("| %s, median of %d | %.2f ms | < 10 ms |" % (k, a.latency_samples, v))
    if counted:
        b, g = counted
        print("| instructions of all threads per step, without agent (%d steps, callgrind) | %.0f | |" % (a.instructions, b / a.instructions))
        print("| same, with agent | %.0f | |" % (g / a.instructions))
        print("| idle overhead in instructions (with / without) | %.5f | <= 1.005 |" % (g / b))


def idle_instructions(steps):
    """Instructions every thread of the process executes during the
    training loop, without and with the agent, counted by callgrind
    (torch_trace.py's driver: counters zeroed when the loop starts, dumped
    when it ends).  Deterministic to a few parts in a million."""
    import tempfile
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_trace
    tmp = tempfile.mkdtemp(prefix="idle_cg.")
    return (torch_trace.run_counted("baseline", steps, tmp, all_threads=True),
            torch_trace.run_counted("agent", steps, tmp, all_threads=True))


if __name__ == "__main__":
    main()
