"""The debugger's cost where breakpoints are not, side by side with debugpy.

A CPU-bound pure-Python workload (recursive calls, loops, method calls,
dict updates: tests/bench/debug_workload.py) is timed in rounds inside its
process (CPU time of the main thread, median of the rounds) in these
situations, each in a fresh process, repeated with the order rotating:

  plain        python3 work.py, no agent, no debugger
  probing      PROBING=1; a DAP client attaches and sets one breakpoint in
               a file the script never runs (not even imports); then the
               same with the breakpoint in a module the script imports but
               whose function with the breakpoint it never calls; then the
               client disconnects and the rounds after that show the idle
               cost after disconnect
               and, last, a breakpoint on a line of the hot loop that never
               runs (loops() in the workload: the case debuggers find
               hardest, since the function with it runs all the time)
  debugpy      python3 -m debugpy --listen; the same client, the same
               breakpoints (--no-debugpy where the Python has none:
               Debian's python3-debugpy is for /usr/bin/python3)

Ratios are against plain: of the median rounds, paired (each repeat's
situation against that repeat's plain process, median over repeats: the
machine's drift between processes mostly cancels), and of the best rounds
(the best is what the code costs when the shared machine leaves it
alone; the median includes the machine's noise).  The client is the same small DAP client for
both debuggers (initialize, attach, setBreakpoints, configurationDone).

--instructions: each situation once under valgrind's callgrind, counting
the instructions the main thread executes per round (deterministic where
CPU time is not: other jobs on a shared machine change times by tens of
percent, instructions by a fraction of one).

Usage: PROBING_BUILD=build /usr/bin/python3 tests/bench/debug_overhead.py
       [--repeats 3] [--rounds 7] [--python /usr/bin/python3] [--instructions]
Prints a Markdown table (paste into docs/benchmarks.md).
"""
import argparse
import itertools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
HERE = os.path.dirname(os.path.abspath(__file__))
COUNT = {"dir": None, "n": 0}  # --instructions: callgrind's output

HELPERS = '''
def never_called(x):
    y = x + 1
    return y * 2   # the breakpoint
'''

OTHER = '''
def elsewhere():
    return 42   # the breakpoint in a file never run
'''


class Client:
    """A minimal DAP client over TCP (the same for both debuggers)."""

    TIMEOUT = 60  # seconds; longer under callgrind

    def __init__(self, port, timeout=None):
        timeout = timeout or self.TIMEOUT
        deadline = time.time() + timeout
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        self.sock.settimeout(None)
        self.seq = itertools.count(1)
        self.buf = b""
        self.cond = threading.Condition()
        self.msgs = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            try:
                d = self.sock.recv(65536)
            except OSError:
                return
            if not d:
                return
            self.buf += d
            while b"\r\n\r\n" in self.buf:
                head, rest = self.buf.split(b"\r\n\r\n", 1)
                n = int(head.split(b":")[1])
                if len(rest) < n:
                    break
                with self.cond:
                    self.msgs.append(json.loads(rest[:n]))
                    self.cond.notify_all()
                self.buf = rest[n:]

    def send(self, command, args=None):
        seq = next(self.seq)
        body = json.dumps({"seq": seq, "type": "request", "command": command,
                           "arguments": args or {}}).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return seq

    def wait(self, pred, timeout=None):
        timeout = timeout or self.TIMEOUT
        with self.cond:
            ok = self.cond.wait_for(lambda: any(pred(m) for m in self.msgs), timeout)
            if not ok:
                raise RuntimeError("no answer: %r" % self.msgs[-5:])
            m = next(m for m in self.msgs if pred(m))
            self.msgs.remove(m)
            return m

    def request(self, command, args=None, timeout=None):
        seq = self.send(command, args)
        r = self.wait(lambda m: m.get("type") == "response" and m.get("request_seq") == seq, timeout)
        if not r.get("success"):
            raise RuntimeError("%s failed: %s" % (command, r.get("message")))
        return r

    def attach_with_breakpoint(self, path, line):
        self.request("initialize", {"adapterID": "bench", "linesStartAt1": True,
                                    "columnsStartAt1": True, "pathFormat": "path"})
        aseq = self.send("attach", {"justMyCode": False})
        self.wait(lambda m: m.get("type") == "event" and m.get("event") == "initialized")
        self.set_breakpoint(path, line)
        self.request("configurationDone")
        self.wait(lambda m: m.get("type") == "response" and m.get("request_seq") == aseq)

    def set_breakpoint(self, path, line):
        r = self.request("setBreakpoints", {"source": {"path": path},
                                            "breakpoints": [{"line": line}]})
        return r["body"]["breakpoints"][0]

    def close(self):
        try:
            self.request("disconnect", {}, timeout=10)
        except Exception:
            pass
        self.sock.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Target:
    """A workload process; under callgrind when COUNT["dir"] is set (then
    rounds() gives instructions per round of the main thread, once)."""

    def __init__(self, argv, env, cwd):
        self.cg = None
        if COUNT["dir"]:
            COUNT["n"] += 1
            self.cg = os.path.join(COUNT["dir"], "t%d.cg" % COUNT["n"])
            self.dumps = 0
            argv = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    "--callgrind-out-file=" + self.cg] + argv
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.expect("ready")

    def expect(self, word):
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("target ended before %r" % word)
            if line.startswith(word):
                return line

    def rounds(self, n):
        if self.cg:
            subprocess.run(["callgrind_control", "-z", str(self.p.pid)],
                           capture_output=True, check=True)
        self.p.stdin.write("%d\n" % n)
        self.p.stdin.flush()
        line = self.expect("TIMES")
        if not self.cg:
            return [float(x) for x in line.split()[1:]]
        subprocess.run(["callgrind_control", "-d", str(self.p.pid)],
                       capture_output=True, check=True)
        self.dumps += 1
        # The dump's file of the main thread (thread 01).
        with open("%s.%d-01" % (self.cg, self.dumps)) as f:
            for text in f:
                if text.startswith(("summary:", "totals:")):
                    return [int(text.split()[1]) / n]
        raise RuntimeError("no totals in the callgrind dump")

    def stop(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:
            self.p.kill()
            self.p.wait()


def hot_line():
    """The never-executed line inside loops() of the workload."""
    with open(os.path.join(HERE, "debug_workload.py")) as f:
        for n, text in enumerate(f, 1):
            if "(HOT_LINE)" in text:
                return n
    raise RuntimeError("no HOT_LINE in debug_workload.py")


def setup(dirname):
    shutil.copy(os.path.join(HERE, "debug_workload.py"), os.path.join(dirname, "work.py"))
    with open(os.path.join(dirname, "helpers.py"), "w") as f:
        f.write(HELPERS)
    with open(os.path.join(dirname, "other.py"), "w") as f:
        f.write(OTHER)
    return (os.path.join(dirname, "work.py"), os.path.join(dirname, "helpers.py"),
            os.path.join(dirname, "other.py"))


def env(extra):
    e = dict(os.environ)
    for k in ("PROBING", "PROBING_PORT", "PROBING_LISTEN"):
        e.pop(k, None)
    e["PYTHONUSERBASE"] = os.path.join(BUILD, "userbase")
    e["PYTHONUNBUFFERED"] = "1"
    # One string hash for every process: the workload's dicts then probe
    # the same way in each (otherwise ~2% of instructions vary by seed).
    e["PYTHONHASHSEED"] = "0"
    e.update(extra)
    return e


def run_plain(py, d, rounds):
    work, _, _ = setup(d)
    t = Target([py, work], env({}), d)
    r = {"plain": t.rounds(rounds)}
    t.stop()
    return r


def run_probing(py, d, rounds):
    work, helpers, other = setup(d)
    port = free_port()
    # Loopback without a token (PROBING_TOKEN=none): debugpy's client
    # sends none either.
    t = Target([py, work], env({"PROBING": "1", "PROBING_PORT": str(port),
                                "PROBING_TOKEN": "none"}), d)
    r = {"probing idle (attached never)": t.rounds(rounds)}
    c = Client(port)
    c.attach_with_breakpoint(other, 3)
    r["probing, breakpoint in a file never run"] = t.rounds(rounds)
    c.request("setBreakpoints", {"source": {"path": other}, "breakpoints": []})
    c.set_breakpoint(helpers, 4)
    r["probing, breakpoint in an imported function never called"] = t.rounds(rounds)
    c.request("setBreakpoints", {"source": {"path": helpers}, "breakpoints": []})
    c.set_breakpoint(work, hot_line())
    r["probing, breakpoint on a never-run line of the hot loop"] = t.rounds(rounds)
    c.close()
    time.sleep(10 if COUNT["dir"] else 0.5)  # the cleanup after detach
    r["probing, after disconnect"] = t.rounds(rounds)
    t.stop()
    return r


def run_debugpy(py, d, rounds):
    work, helpers, other = setup(d)
    port = free_port()
    t = Target([py, "-m", "debugpy", "--listen", "127.0.0.1:%d" % port, work], env({}), d)
    c = Client(port)
    c.attach_with_breakpoint(other, 3)
    r = {"debugpy, breakpoint in a file never run": t.rounds(rounds)}
    c.request("setBreakpoints", {"source": {"path": other}, "breakpoints": []})
    c.set_breakpoint(helpers, 4)
    r["debugpy, breakpoint in an imported function never called"] = t.rounds(rounds)
    c.request("setBreakpoints", {"source": {"path": helpers}, "breakpoints": []})
    c.set_breakpoint(work, hot_line())
    r["debugpy, breakpoint on a never-run line of the hot loop"] = t.rounds(rounds)
    c.close()
    t.stop()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--no-debugpy", action="store_true")
    ap.add_argument("--instructions", action="store_true",
                    help="count the main thread's instructions per round under "
                         "callgrind instead of timing (once per situation)")
    a = ap.parse_args()
    if a.instructions:
        COUNT["dir"] = tempfile.mkdtemp(prefix="debug_overhead_cg.")
        a.repeats = 1
        Client.TIMEOUT = 600
    runs = [run_plain, run_probing] + ([] if a.no_debugpy else [run_debugpy])
    samples = {}
    per_repeat = []  # {situation: median of its rounds} for each repeat
    version = subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    load0 = os.getloadavg()[0]
    for rep in range(a.repeats):
        order = runs[rep % len(runs):] + runs[:rep % len(runs)]
        medians = {}
        for fn in order:
            with tempfile.TemporaryDirectory() as d:
                for k, v in fn(a.python, d, a.rounds).items():
                    samples.setdefault(k, []).extend(v)
                    medians[k] = statistics.median(v)
        per_repeat.append(medians)
    load1 = os.getloadavg()[0]
    if a.instructions:
        base = samples["plain"][0]
        print("Instructions of the main thread per round under callgrind, %s, %s, "
              "Python %s, %d rounds:\n" % (time.strftime("%Y-%m-%d"), platform.machine(),
                                            version, a.rounds))
        print("| situation | instructions per round | vs plain |")
        print("|---|---|---|")
        for k, v in samples.items():
            print("| %s | %.4g | %.3fx |" % (k, v[0], v[0] / base))
        return
    base = statistics.median(samples["plain"])
    best = min(samples["plain"])
    print("Result, %s, %s, %d cores, Python %s, load average %.1f before, %.1f after:\n" % (
        time.strftime("%Y-%m-%d"), platform.machine(), os.cpu_count(),
        version, load0, load1))
    print("| situation | CPU s per round, median of %d | vs plain | paired, median of %d |"
          " best round | vs plain |" % (a.repeats * a.rounds, a.repeats))
    print("|---|---|---|---|---|---|")
    for k, v in samples.items():
        m = statistics.median(v)
        # Each repeat's situation against the plain process of the same
        # repeat (run next to it): the machine's drift mostly cancels.
        paired = statistics.median(r[k] / r["plain"] for r in per_repeat)
        print("| %s | %.4f | %.2fx | %.2fx | %.4f | %.2fx |"
              % (k, m, m / base, paired, min(v), min(v) / best))


if __name__ == "__main__":
    main()
