"""Benchmarks of the sampling profiler, side by side in one run.

1. Overhead on two workloads, timed inside the target by the CPU time of
   the working thread (time.thread_time): a profiler that took cycles from
   the thread (signals, its handler, cache and memory traffic of the stack
   reads) shows there, while wall time on a shared machine mostly shows
   the other jobs.
     train: examples/train.py's train() loop (torch, one intra-op thread)
     pure:  a CPU-bound pure-Python function, 20 frames deep
   Modes: the profiler off, sampling at 100 Hz, at 1 kHz, at 100 Hz
   with native stacks, and `probing top` watching (100 Hz, the last
   second's window read back every second: give chunks of a second or
   more, --steps 10000 --calls 400000, for its refreshes to fall in them).  One process per workload runs rounds; a round runs
   one chunk of the workload per mode, in a shuffled order, switching the
   profiler through the agent's socket between chunks.  The overhead of a
   mode is the median over the rounds of its chunk's CPU time divided by
   the same round's chunk without the profiler: chunks seconds apart see
   the same machine, processes minutes apart do not.  Also the sampler
   thread's own CPU time (from /proc, clock-tick resolution) as a share of
   the chunk's wall time: a cost paid on another core.
2. Cost of one sample of a 50-frame stack: a thread 50 Python frames deep
   spinning at the bottom, sampled at 100 Hz and at 1 kHz; the sampler's
   own measure (probing perf: microseconds per thread sample), median of
   runs.

Usage: PROBING_BUILD=build python3 tests/bench/profile.py [--rounds 15]
       [--python PYTHON]   (any CPython the build has an agent for; the
                            train workload only where torch imports)
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

# The driver, inside the target: rounds of chunks of the workload, one
# chunk per mode in a shuffled order each round, the profiler switched
# through the agent's own socket between chunks.  Comparing chunks of the
# same round cancels the machine's drift (other jobs come and go), which
# separate processes run minutes apart cannot.
DRIVER = """
import json, os, random, socket, sys, time

def tasks():
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%%s/comm" %% tid) as f:
                if f.read().strip() == "probing-sample":
                    with open("/proc/self/task/%%s/stat" %% tid) as g:
                        v = g.read().rsplit(")", 1)[1].split()
                    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return 0.0

class Agent:
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX)
        for _ in range(200):
            try:
                self.s.connect("\\0probing-%%d" %% os.getpid())
                break
            except OSError:
                time.sleep(0.05)
        self.seq = 0
    def req(self, cmd, args):
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": cmd,
                           "arguments": args}).encode()
        self.s.sendall(b"Content-Length: %%d\\r\\n\\r\\n" %% len(body) + body)
        buf = b""
        while True:
            while b"\\r\\n\\r\\n" not in buf:
                buf += self.s.recv(65536)
            head, _, rest = buf.partition(b"\\r\\n\\r\\n")
            n = int(head.split(b":")[1])
            while len(rest) < n:
                rest += self.s.recv(65536)
            msg, buf = json.loads(rest[:n]), rest[n:]
            if msg.get("request_seq") == self.seq:
                assert msg["success"], msg
                return msg["body"]

%(setup)s

rounds, chunk = int(sys.argv[1]), int(sys.argv[2])
modes = {"off": None, "100 Hz": {"hz": 100}, "1 kHz": {"hz": 1000},
         "100 Hz native": {"hz": 100, "native": True},
         "top": "top", "exporter 1 s": "exporter"}
agent = Agent()

def top_start():
    # probing top on a pipe, as it runs by default: the sampler at
    # 100 Hz plus the last second's window read back every second.
    # Running once its profile runs.
    import subprocess
    p = subprocess.Popen([os.environ["PROBING_CLI"], "-t", str(os.getpid()),
                          "top"], stdout=subprocess.DEVNULL)
    while not agent.req("probing/profile", {"action": "status"})["running"]:
        time.sleep(0.01)
    return p

def top_stop(p):
    import signal
    p.send_signal(signal.SIGINT)
    p.wait()

def exporter_start():
    # probing exporter for this process, scraped every second (15 times
    # Prometheus's default interval) by a thread of a process of its own.
    import socket, subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = subprocess.Popen([os.environ["PROBING_CLI"], "-t", str(os.getpid()),
                          "exporter", "--listen", "127.0.0.1:%%d" %% port],
                         stdout=subprocess.PIPE)
    e.stdout.readline()
    scraper = subprocess.Popen([sys.executable, "-c",
        "import time, urllib.request\\n"
        "while True:\\n"
        "    urllib.request.urlopen('http://127.0.0.1:%%d/metrics').read()\\n"
        "    print('scraped', flush=True)\\n"
        "    time.sleep(1)\\n" %% port], stdout=subprocess.PIPE)
    scraper.stdout.readline()  # its start is not the exporter's cost
    return (e, scraper)

def exporter_stop(ps):
    for p in ps[::-1]:
        p.terminate()
        p.wait()
agent.req("initialize", {})
run(chunk)                                      # warm-up
res = []
for r in range(rounds):
    order = list(modes)
    random.shuffle(order)
    for m in order:
        top = exp = None
        if modes[m] == "top":
            top = top_start()
        elif modes[m] == "exporter":
            exp = exporter_start()
        elif modes[m]:
            agent.req("probing/profile", dict(action="start", **modes[m]))
        t0, w0 = time.thread_time(), time.perf_counter()
        run(chunk)
        t, w = time.thread_time() - t0, time.perf_counter() - w0
        own = tasks() / w if modes[m] and not exp else 0.0
        if top:
            top_stop(top)
        elif exp:
            exporter_stop(exp)
        elif modes[m]:
            agent.req("probing/profile", {"action": "stop"})
        res.append({"round": r, "mode": m, "cpu": t, "sampler": own})
print("RESULT", json.dumps(res), flush=True)
"""

TRAIN_SETUP = """
sys.path.insert(0, %(examples)r)
import torch
torch.set_num_threads(1)
import train
run = lambda n: train.train(n, 64, 0)
"""

PURE_SETUP = """
def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def nest(d, n):
    return leaf(n) if d == 0 else nest(d - 1, n)

def run(n):
    for _ in range(n):
        nest(18, 200)
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

def env():
    e = dict(os.environ)
    e["PYTHONUSERBASE"] = os.path.join(BUILD, "userbase")
    e["PROBING"] = "1"
    e["PYTHONUNBUFFERED"] = "1"
    e["PROBING_CLI"] = CLI  # the top mode runs it
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


def overhead(setup, rounds, chunk):
    """Per mode: the median CPU time of a chunk, the median over rounds of
    the chunk's ratio to the round's chunk without the profiler, and the
    sampler thread's CPU as a share of the chunk's wall time."""
    code = DRIVER % {"setup": setup}
    p = subprocess.Popen([PY, "-c", code, str(rounds), str(chunk)], env=env(),
                         text=True, stdout=subprocess.PIPE)
    try:
        res = json.loads(read_until(p, "RESULT").split(" ", 1)[1])
    finally:
        p.kill()
        p.wait()
    by = {}
    for r in res:
        by.setdefault(r["mode"], {})[r["round"]] = r
    out = {}
    for m, rs in by.items():
        out[m] = {
            "cpu": statistics.median(x["cpu"] for x in rs.values()),
            "ratio": statistics.median(x["cpu"] / by["off"][k]["cpu"] for k, x in rs.items()),
            "sampler": statistics.median(x["sampler"] for x in rs.values()),
        }
    return out


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
                cli(p.pid, "perf", "--start", "--hz", str(hz), "--duration", "2s")
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
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=600, help="train() steps per chunk")
    ap.add_argument("--calls", type=int, default=30000, help="pure-Python calls per chunk")
    ap.add_argument("--runs", type=int, default=5, help="runs of the 50-frame cost")
    ap.add_argument("--python", default=PY, help="the target Python (default %(default)s)")
    ap.add_argument("--cost-only", action="store_true",
                    help="only the cost of one sample of a 50-frame stack")
    a = ap.parse_args()
    globals()["PY"] = a.python
    version = subprocess.run([PY, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    has_torch = subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0
    train_setup = TRAIN_SETUP % {"examples": os.path.join(ROOT, "examples")}
    work = []
    if has_torch and not a.cost_only:
        work.append(("examples/train.py train(), %d steps a chunk" % a.steps,
                     overhead(train_setup, a.rounds, a.steps)))
    if not a.cost_only:
        work.append(("pure Python, 20 frames deep, %d calls a chunk" % a.calls,
                     overhead(PURE_SETUP, a.rounds, a.calls)))
    cost, depth = sample_cost(a.runs)
    print("Machine: %s, %d cores, Python %s%s; %s; %d rounds" % (
        platform.machine(), os.cpu_count(), version,
        "" if has_torch else " (no torch: the pure workload only)",
        time.strftime("%Y-%m-%d"), a.rounds))
    print()
    modes = ["off", "100 Hz", "1 kHz", "100 Hz native", "top", "exporter 1 s"]
    if work:
        print("| workload | " + " | ".join(modes) + " |")
        print("|---" * (len(modes) + 1) + "|")
    for label, o in work:
        print("| %s: CPU s of the working thread per chunk (median) | %s |" % (
            label, " | ".join("%.3f s" % o[m]["cpu"] for m in modes)))
        print("| ratio to off, median of the rounds' ratios (goal: <= 1.01 at 100 Hz, for top and the exporter, <= 1.05 at 1 kHz) | %s |" % (
            " | ".join("%.4f" % o[m]["ratio"] for m in modes)))
        print("| the sampler thread's CPU, share of one core (on another core) | - | %s |" % (
            " | ".join("%.1f%%" % (100 * o[m]["sampler"]) for m in modes[1:])))
    print()
    print("| cost of one sample of a %d-frame stack (median of %d runs) | 100 Hz | 1 kHz |" % (depth, a.runs))
    print("|---|---|---|")
    print("| probing perf: microseconds per thread sample | %.1f us | %.1f us |" % (cost[100], cost[1000]))


if __name__ == "__main__":
    main()
