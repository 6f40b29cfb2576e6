"""Attaching a DAP client to a whole torchrun job (docs/benchmarks.md,
"The whole job in one editor"): how long until every rank has its session,
and how many connections each rank's agent holds meanwhile.

A gloo job of examples/ddp_train.py (--step-sleep 0.05) with --ranks ranks
under torchrun, every process with an agent (PROBING=2).  Each run does
what VS Code does on "job": true, through the real `probing dap`:

  parent   `probing -t LAUNCHER dap`: initialize, attach {"job": true};
           the time until the last rank's startDebugging request came.
  ranks    for each configuration, at once, `probing -t PID dap`:
           initialize, attach (the configuration), configurationDone,
           threads; the time until the last rank answered threads
           (from the parent's start: what the editor shows).
  conns    the connections each rank's agent holds while every session
           is open (its accepted sockets in /proc/net/unix): the most of
           any rank, and of the rank the parent asks.

Usage: PROBING_BUILD=build python3 tests/bench/job_attach.py [--ranks 8]
       [--runs 5] [--python /usr/bin/python3]
Prints a Markdown table.
"""
import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
EXAMPLE = os.path.join(ROOT, "examples", "ddp_train.py")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import torchenv  # noqa: E402


class Dap:
    """`probing -t TARGET dap` spoken to over its stdio."""

    def __init__(self, target):
        self.p = subprocess.Popen([CLI, "-t", str(target), "dap"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buf = b""
        self.seq = 0

    def send(self, command, arguments=None):
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": command,
                           "arguments": arguments or {}}).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.p.stdin.flush()
        return self.seq

    def read(self, deadline):
        while True:
            head, sep, rest = self.buf.partition(b"\r\n\r\n")
            if sep:
                n = int(head.split(b":")[1])
                if len(rest) >= n:
                    self.buf = rest[n:]
                    return json.loads(rest[:n])
            if time.monotonic() > deadline:
                raise TimeoutError("no message from probing dap")
            chunk = os.read(self.p.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError("probing dap closed")
            self.buf += chunk

    def until(self, pred, deadline):
        while True:
            m = self.read(deadline)
            if pred(m):
                return m

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def connections(pid):
    """Accepted sockets of the agent of pid (its name on each of them)."""
    name = "@probing-%d" % pid
    with open("/proc/net/unix") as f:
        rows = [l.split() for l in f]
    # State 03: connected (the listener is 01).
    return sum(1 for r in rows if len(r) >= 8 and r[-1] == name and r[5] == "03")


def start_job(python, ranks, tmp):
    out = os.path.join(tmp, "job.out")
    env = dict(os.environ, PROBING="2", PYTHONUSERBASE=os.path.join(BUILD, "userbase"),
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", **torchenv.torch_env(tmp))
    torchrun = [python, "-m", "torch.distributed.run"]
    p = subprocess.Popen(torchrun + [
        "--redirects", "1", "--tee", "1", "--log_dir", os.path.join(tmp, "logs"),
        "--master_port", str(29000 + random.randrange(1000)),
        "--nproc_per_node", str(ranks), "--monitor_interval", "120",
        EXAMPLE, "--step-sleep", "0.05"], cwd=tmp, env=env,
        stdout=open(out, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    pids = {}
    deadline = time.time() + 600
    while len(pids) < ranks or "step 0:" not in open(out).read():
        # (torchrun's --tee puts "[default0]:" before each line)
        for m in re.finditer(r"rank (\d+) of \d+: pid (\d+)", open(out).read()):
            pids[int(m.group(1))] = int(m.group(2))
        if time.time() > deadline or p.poll() is not None:
            os.killpg(p.pid, 9)
            raise SystemExit("the job did not start:\n" + open(out).read()[-3000:])
        time.sleep(0.5)
    while True:
        r = subprocess.run([CLI, "-t", str(pids[0]), "query", "-f", "json",
                            "SELECT count(*) AS n FROM cluster.nodes WHERE role = 'rank'"],
                           capture_output=True, text=True)
        if r.returncode == 0 and json.loads(r.stdout)[0]["n"] == ranks:
            return p, pids
        if time.time() > deadline:
            os.killpg(p.pid, 9)
            raise SystemExit("ranks not registered: " + r.stderr)
        time.sleep(0.5)


def attach_rank(cfg, deadline, done):
    d = Dap(cfg["processId"])
    d.send("initialize", {"adapterID": "probing", "clientID": "bench"})
    d.send("attach", cfg)
    d.until(lambda m: m.get("event") == "initialized", deadline)
    d.send("configurationDone")
    seq = d.send("threads")
    d.until(lambda m: m.get("type") == "response" and m.get("request_seq") == seq, deadline)
    done.append((time.monotonic(), d))


def one_run(launcher, ranks, pids):
    t0 = time.monotonic()
    deadline = t0 + 60
    parent = Dap(launcher)
    parent.send("initialize", {"adapterID": "probing", "supportsStartDebuggingRequest": True})
    parent.send("attach", {"job": True})
    cfgs = []
    while len(cfgs) < ranks:
        m = parent.read(deadline)
        if m.get("type") == "request" and m.get("command") == "startDebugging":
            cfgs.append(m["arguments"]["configuration"])
    t_sd = time.monotonic() - t0
    done = []
    threads = [threading.Thread(target=attach_rank, args=(c, deadline, done)) for c in cfgs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(done) != ranks:
        raise SystemExit("only %d of %d ranks attached" % (len(done), ranks))
    t_all = max(t for t, _ in done) - t0
    conns = {r: connections(pid) for r, pid in pids.items()}
    for _, d in done:
        d.send("disconnect")
        d.close()
    parent.close()
    return t_sd, t_all, max(conns.values()), conns[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        job, pids = start_job(a.python, a.ranks, tmp)
        try:
            runs = [one_run(job.pid, a.ranks, pids) for _ in range(a.runs)]
            alive = job.poll() is None and all(
                os.path.exists("/proc/%d" % p) for p in pids.values())
        finally:
            os.killpg(job.pid, 9)
    sd = [r[0] * 1000 for r in runs]
    at = [r[1] * 1000 for r in runs]
    print("%d ranks (torchrun, gloo, examples/ddp_train.py --step-sleep 0.05), "
          "%d runs, %s, %d cores; the job alive after: %s\n"
          % (a.ranks, a.runs, platform.python_version(), os.cpu_count(), alive))
    print("| | median | max |")
    print("|---|---|---|")
    print("| every rank's startDebugging (ms) | %.0f | %.0f |" % (statistics.median(sd), max(sd)))
    print("| every rank attached, threads answered (ms) | %.0f | %.0f |"
          % (statistics.median(at), max(at)))
    print("| connections to a rank's agent, most of any rank | %d | %d |"
          % (statistics.median([r[2] for r in runs]), max(r[2] for r in runs)))
    print("| connections to the rank the parent asks (rank 0) | %d | %d |"
          % (statistics.median([r[3] for r in runs]), max(r[3] for r in runs)))
    if not alive:
        sys.exit("the job did not survive")


if __name__ == "__main__":
    main()
