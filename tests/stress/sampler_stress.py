#!/usr/bin/python3
"""The sampler and the debugger under load, in many processes: zero
sanitizer reports, zero deaths.

    tests/stress/sampler_stress.py BUILD [--procs 50] [--parallel 3]

Each process is /usr/bin/python3 with the agent from BUILD (PROBING=1):
as soon as the agent answers, `probing perf --cc --hz 1000` starts the
native sampler, which then signals and unwinds every thread a thousand
times a second while the process imports torch (hundreds of libraries
mapped, code objects made and freed) and trains a small model on several
threads; every other process is also paused by the debugger and resumed
in the middle of training.  The process must print its result and exit 0.

With an ASan build (BUILD/CMakeCache.txt has PROBING_SANITIZE=ON) the
sanitizer runtimes are preloaded into every target and any report fails
the run; `make test` runs it that way (scripts/test-all).
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"

TARGET = """\
import os, sys, threading, time
print("START", flush=True)
import torch
from torch import nn
torch.set_num_threads(2)
print("IMPORTED", flush=True)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def side():
    for _ in range(200):
        torch.randn(64, 64) @ torch.randn(64, 64)
helper = threading.Thread(target=side, name="side")
helper.start()
# With FLAG: after step 100, trains on until the debugger is done with it.
flag, step, until = os.environ.get("FLAG"), 0, time.time() + 120
while step < 300 or (flag and not os.path.exists(flag) and
                     time.time() < until):
    x = torch.randn(16, 32)
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 100:
        print("TRAINING", flush=True)
    step += 1
helper.join()
print("DONE", float(loss) >= 0, flush=True)
"""


def sanitized(build):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return "PROBING_SANITIZE:BOOL=ON" in f.read()
    except OSError:
        return False


def runtime(name):
    return subprocess.run(["gcc", "-print-file-name=" + name],
                          capture_output=True, text=True).stdout.strip()


def agent_listening(pid):
    name = "@probing-%d" % pid
    with open("/proc/net/unix") as f:
        return any(line.split()[-1] == name for line in f
                   if len(line.split()) >= 8)


class Target:
    def __init__(self, i, build, tmp, script, asan):
        self.i = i
        self.cli = os.path.join(build, "cli", "probing")
        self.out_path = os.path.join(tmp, "target%d.out" % i)
        self.log = os.path.join(tmp, "sanitizer%d" % i)
        env = dict(os.environ, PROBING="1", PYTHONUNBUFFERED="1",
                   PYTHONUSERBASE=os.path.join(build, "userbase"))
        self.flag = os.path.join(tmp, "debugged%d" % i)
        if i % 2:
            env["FLAG"] = self.flag
        if asan:
            env["LD_PRELOAD"] = "%s:%s" % (runtime("libasan.so"),
                                           runtime("libubsan.so"))
            env["ASAN_OPTIONS"] = ("detect_leaks=0:abort_on_error=0:"
                                   "halt_on_error=1:log_path=" + self.log)
            env["UBSAN_OPTIONS"] = ("print_stacktrace=1:halt_on_error=1:"
                                    "log_path=" + self.log)
        self.proc = subprocess.Popen([PYTHON, script],
                                     stdout=open(self.out_path, "w"),
                                     stderr=subprocess.STDOUT, env=env,
                                     cwd=tmp)
        self.stage = "start"
        self.early = self.paused = False
        self.started = time.time()
        self.problem = None

    def output(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def probing(self, *args):
        return subprocess.run([self.cli, "-t", str(self.proc.pid), *args],
                              capture_output=True, text=True, timeout=120)

    def step(self):
        """Moves on when it can; returns True once finished."""
        if self.proc.poll() is not None:
            return True
        if self.stage == "start" and agent_listening(self.proc.pid):
            self.early = "IMPORTED" not in self.output()
            r = self.probing("perf", "--cc", "--hz", "1000")
            if r.returncode != 0 and self.proc.poll() is None:
                self.problem = "perf --cc: %s" % r.stderr.strip()
            self.stage = "sampling"
        elif self.stage == "sampling" and self.i % 2 and \
                "TRAINING" in self.output():
            # The debugger in the middle of training, while sampled.
            r = self.probing("debug", "--pause", "--wait", "10")
            if r.returncode != 0 and self.proc.poll() is None:
                self.problem = "debug --pause: %s" % r.stderr.strip()
            r = self.probing("debug", "--resume")
            if r.returncode != 0 and self.proc.poll() is None:
                self.problem = "debug --resume: %s" % r.stderr.strip()
            self.stage = "resumed"
            self.paused = r.returncode == 0
            open(self.flag, "w").close()
        if time.time() - self.started > 600:
            self.problem = "did not finish in 600 s (stage %s)\n%s" % (
                self.stage, self.stacks())
            self.proc.kill()
        return False

    def stacks(self):
        """What a process that hangs is doing: its Python stacks (the
        agent, when it answers) and every thread's native stack (gdb,
        when the machine has it)."""
        parts = []
        try:
            r = self.probing("backtrace")
            parts.append("probing backtrace (rc %d):\n%s%s"
                         % (r.returncode, r.stdout, r.stderr))
        except subprocess.TimeoutExpired:
            parts.append("probing backtrace: no answer in 120 s")
        if shutil.which("gdb"):
            r = subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch",
                                "-ex", "thread apply all bt 40"],
                               capture_output=True, text=True, timeout=120)
            parts.append("gdb:\n" + r.stdout[-12000:])
        return "\n".join(parts)

    def verdict(self):
        rc = self.proc.wait()
        out = self.output()
        reports = glob.glob(self.log + "*")
        if reports:
            return "sanitizer report:\n" + "\n".join(
                open(r, errors="replace").read()[:6000] for r in reports)
        if rc != 0:
            return "exit status %d:\n%s%s" % (
                rc, out[-4000:], "\n" + self.problem if self.problem else "")
        if "DONE True" not in out:
            return "no result:\n" + out[-4000:]
        return self.problem


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--procs", type=int, default=50)
    ap.add_argument("--parallel", type=int, default=3)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    asan = sanitized(build)
    if subprocess.run([PYTHON, "-c", "import torch"],
                      capture_output=True).returncode != 0:
        print("sampler_stress: SKIPPED: %s has no torch" % PYTHON)
        return 0
    tmp = tempfile.mkdtemp(prefix="probing-stress-")
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TARGET)
    began = time.time()
    running, failures, done = [], [], 0
    early = paused = 0
    started = 0
    while done < a.procs:
        while started < a.procs and len(running) < a.parallel:
            running.append(Target(started, build, tmp, script, asan))
            started += 1
        for t in list(running):
            if t.step():
                running.remove(t)
                done += 1
                early += t.early
                paused += t.paused
                why = t.verdict()
                if why:
                    failures.append((t.i, t.proc.pid, why))
        time.sleep(0.02)
    print("sampler_stress: %d processes (%s build), perf --cc --hz 1000 "
          "from before torch's import in %d, debugger pause/resume while "
          "training in %d: %d failed, %.0f s"
          % (a.procs, "ASan+UBSan" if asan else "plain", early, paused,
             len(failures), time.time() - began))
    for i, pid, why in failures:
        print("--- process %d (pid %d): %s" % (i, pid, why))
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
