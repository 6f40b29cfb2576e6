"""Cluster fan-out: `probing cluster query` and `cluster backtrace` over
many agents on this machine (simulated ranks), latency per command.

Each simulated rank is Debian's /usr/bin/python3 with the agent (PROBING=1)
listening on its own TCP port, its main thread in a small call chain that
sleeps (rank 7 in another one, so backtrace has an odd one out).  The
memory recorder is off (PROBING_MEMORY_INTERVAL_MS=0): hundreds of them
waking every second would be the machine's noise, not the fan-out's.

Measured, each the wall time of the CLI (exec to exit), ROUNDS times:
  query      cluster --nodes FILE query "SELECT func ... python.backtrace"
             (every rank's live stack table, rows tagged with rank, host)
  merge      the same with --merge "SELECT func, count(*) ... GROUP BY"
  backtrace  cluster --nodes FILE backtrace (grouped stacks)
  via -t     cluster query with the node list asked of one agent (-t, its
             cluster.nodes filled by `cluster add`) instead of a file
  global     query ... FROM global.python.backtrace through that agent
             (it asks every rank itself), plain and grouped
Medians and the spread (min, max) are printed as a Markdown table for
docs/benchmarks.md.  On this machine 2 cores run all N ranks and the CLI.

With --token every rank has a token (PROBING_TOKEN, as the ranks of a job
across hosts have the job's) and every connection presents it: the cost
of checking it.

Usage: PROBING_BUILD=build python3 tests/bench/cluster.py [--nodes 256]
       [--rounds 11] [--token]
"""
import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
USERBASE = os.path.join(BUILD, "userbase")
PY = "/usr/bin/python3"

RANK = """\
import sys, time
def collective():
    while True:
        time.sleep(0.2)
def load_batch():
    collective()
def step():
    load_batch() if sys.argv[1] == "odd" else collective()
print("READY", flush=True)
step()
"""


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def timed(args):
    t0 = time.perf_counter()
    cp = subprocess.run([CLI] + args, capture_output=True, text=True,
                        timeout=120)
    ms = (time.perf_counter() - t0) * 1e3
    if cp.returncode != 0:
        sys.exit("probing %s: rc %d\n%s" % (" ".join(args), cp.returncode,
                                            cp.stderr[-2000:]))
    return ms, cp.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--token", action="store_true",
                    help="every rank has a token; the CLI presents it")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="probing-cluster-bench-")
    script = os.path.join(tmp, "rank.py")
    with open(script, "w") as f:
        f.write(RANK)
    env = dict(os.environ, PROBING="1", PYTHONUSERBASE=USERBASE,
               PROBING_MEMORY_INTERVAL_MS="0")
    env.pop("PROBING_PORT", None)
    env.pop("PROBING_TOKEN", None)
    os.environ.pop("PROBING_TOKEN", None)
    if a.token:
        # The ranks' and the CLI's (timed() passes os.environ on).
        env["PROBING_TOKEN"] = os.environ["PROBING_TOKEN"] = \
            os.urandom(32).hex()
    ports = free_ports(a.nodes)
    procs = []
    t0 = time.time()
    try:
        for i, port in enumerate(ports):
            e = dict(env, PROBING_LISTEN="127.0.0.1:%d" % port)
            procs.append(subprocess.Popen(
                [PY, script, "odd" if i == 7 else "even"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                env=e, cwd=tmp))
        for p in procs:
            if p.stdout.readline().strip() != "READY":
                sys.exit("a rank did not start")
        nodes = os.path.join(tmp, "nodes")
        with open(nodes, "w") as f:
            for i, port in enumerate(ports):
                f.write("127.0.0.1:%d %d\n" % (port, i))
        # Wait until every agent answers on TCP.
        while True:
            cp = subprocess.run([CLI, "cluster", "--nodes", nodes, "query",
                                 "SELECT 1 AS one"], capture_output=True)
            if cp.returncode == 0:
                break
            if time.time() - t0 > 600:
                sys.exit("the agents did not come up")
            time.sleep(1)
        print("%d ranks up in %.0f s" % (a.nodes, time.time() - t0),
              file=sys.stderr)
        head = str(procs[0].pid)
        subprocess.run([CLI, "-t", head, "cluster", "add"] +
                       ["127.0.0.1:%d=%d" % (p, i) for i, p in enumerate(ports)],
                       check=True, capture_output=True)
        sql = "SELECT func FROM python.backtrace WHERE depth <= 2"
        cases = [
            ("query", ["cluster", "--nodes", nodes, "query", sql]),
            ("query --merge", ["cluster", "--nodes", nodes, "query", sql,
                               "--merge", "SELECT func, count(*) AS n "
                               "FROM result GROUP BY func"]),
            ("backtrace", ["cluster", "--nodes", nodes, "backtrace"]),
            ("query, nodes via -t", ["-t", head, "cluster", "query", sql]),
            # The same rows through one agent: the global schema.
            ("global query via -t", ["-t", head, "query", "SELECT _rank, "
                                     "func FROM global.python.backtrace "
                                     "WHERE depth <= 2"]),
            ("global, grouped", ["-t", head, "query", "SELECT func, "
                                 "count(*) AS n FROM global.python.backtrace"
                                 " WHERE depth <= 2 GROUP BY func"]),
        ]
        times = {name: [] for name, _ in cases}
        for r in range(a.rounds):
            for name, args in cases:
                ms, out = timed(args)
                times[name].append(ms)
                if name == "backtrace" and r == 0:
                    first = out.splitlines()[0]
                    assert first.startswith("rank 7 (1 of %d)" % a.nodes), first
                if name == "query" and r == 0:
                    rows = out.strip().splitlines()[1:]
                    assert len({l.split("\t")[0] for l in rows}) == a.nodes
        print("\n%d agents on %s (%d cores), %d rounds%s; wall time of "
              "the CLI, ms:\n" % (a.nodes, platform.node(), os.cpu_count(),
                                  a.rounds, ", with a token" if a.token
                                  else ""))
        print("| command | median | min | max |")
        print("|---|---|---|---|")
        for name, _ in cases:
            v = times[name]
            print("| %s%s | %.0f | %.0f | %.0f |" % (
                "" if name.startswith("global") else "cluster ", name,
                statistics.median(v), min(v), max(v)))
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


if __name__ == "__main__":
    main()
