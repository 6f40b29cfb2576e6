"""Soak: `probing inject` into many fresh processes, across the states of
test_inject.py (sleeping, select, read, busy, holding the GIL, threads,
forking, malloc traffic) and both Pythons, a few at a time; every fifth injector is
SIGKILLed at a random moment first.  Zero target deaths, zero wrong
outputs, zero hangs.

Bounded: PROBING_SOAK_N processes (default 200; 40 under the ASan pass,
where every target carries the sanitizer runtime), 4 at a time — about a
minute on two cores.
"""
import os
import random
import re
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import CLI, PYTHONS, USERBASE

ASAN = bool(os.environ.get("PROBING_TARGET_PRELOAD"))
N = int(os.environ.get("PROBING_SOAK_N", "40" if ASAN else "200"))
WORKERS = 4
HANG_S = 30  # a CLI call longer than this is a hang

# Each program prints READY, then after the injection (which happens
# while it sleeps / spins / ...) prints OK only if what it observed is
# exactly what it would have been without us.
STATES = {
    "sleep": """\
import time
print("READY", flush=True)
t0 = time.monotonic(); time.sleep(0.8); d = time.monotonic() - t0
print("OK" if 0.799 <= d < 2.5 else "BAD slept %.3f" % d, flush=True)
time.sleep(60)
""",
    "select": """\
import os, select, time
r, w = os.pipe()
print("READY", flush=True)
t0 = time.monotonic(); res = select.select([r], [], [], 0.8); d = time.monotonic() - t0
print("OK" if res == ([], [], []) and 0.799 <= d < 2.5 else "BAD %r %.3f" % (res, d), flush=True)
time.sleep(60)
""",
    "read": """\
import os, threading, time
r, w = os.pipe()
threading.Timer(0.8, lambda: os.write(w, b"payload")).start()
print("READY", flush=True)
data = os.read(r, 100)
print("OK" if data == b"payload" else "BAD %r" % data, flush=True)
time.sleep(60)
""",
    "busy": """\
x = 0
ref = 0
for i in range(300000):
    ref = (ref * 31 + 7) % 1000003
print("READY", flush=True)
for rep in range(6):
    x = 0
    for i in range(300000):
        x = (x * 31 + 7) % 1000003
    if x != ref:
        print("BAD", x, ref, flush=True)
        break
else:
    print("OK", flush=True)
import time; time.sleep(60)
""",
    "gil": """\
ref = sum(range(2 * 10**7))
print("READY", flush=True)
ok = all(sum(range(2 * 10**7)) == ref for _ in range(5))
print("OK" if ok else "BAD", flush=True)
import time; time.sleep(60)
""",
    "threads": """\
import threading, time
counts = [0] * 30
def work(i):
    while True:
        counts[i] += 1
        time.sleep(0.005)
for i in range(30):
    threading.Thread(target=work, args=(i,), daemon=True).start()
print("READY", flush=True)
time.sleep(0.8)
# Every thread must go on.  A thread stuck for good stays stuck; one that
# merely lost the GIL race on a loaded machine moves within a second.
snap = list(counts); time.sleep(1.0)
stalled = [i for i in range(30) if counts[i] == snap[i]]
print("OK" if not stalled else "BAD stalled %r of %r" % (stalled, counts), flush=True)
time.sleep(60)
""",
    "fork": """\
import subprocess, time
print("READY", flush=True)
t0 = time.monotonic()
ok = True
while time.monotonic() - t0 < 1.0:
    ok = ok and subprocess.run(["true"]).returncode == 0
print("OK" if ok else "BAD", flush=True)
time.sleep(60)
""",
    "malloc": """\
import threading, time
bad = []
def churn(seed):
    for k in range(10**9):
        big = [bytes([seed]) * (500 + (k % 40) * 500) for _ in range(100)]
        lst = list(range(5000 + k % 500))
        if sum(lst) != (len(lst) - 1) * len(lst) // 2 or big[-1][0] != seed:
            bad.append(k)
for s in range(3):
    threading.Thread(target=churn, args=(s,), daemon=True).start()
print("READY", flush=True)
time.sleep(1.0)
print("OK" if not bad else "BAD", flush=True)
time.sleep(60)
""",
}


def diagnose(pid, inject_out):
    """What to look at when a target went wrong: the injection's report,
    each thread's kernel state, and the Python stacks."""
    lines = ["inject said: " + inject_out.strip().replace("\n", " | ")]
    try:
        for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid)):
            base = "/proc/%d/task/%d/" % (pid, tid)
            try:
                state = open(base + "stat").read().rsplit(")", 1)[1].split()[0]
                wchan = open(base + "wchan").read()
                sysc = open(base + "syscall").read().split()[:2]
            except OSError as e:
                state, wchan, sysc = "?", str(e), []
            lines.append("  tid %d %s %s %s" % (tid, state, wchan, " ".join(sysc)))
    except OSError:
        pass
    try:
        r = subprocess.run([CLI, "-t", str(pid), "backtrace"], capture_output=True,
                           text=True, timeout=HANG_S)
        lines.append(r.stdout[-3000:])
    except subprocess.TimeoutExpired:
        lines.append("backtrace hung")
    return "\n".join(lines)


def run_one(i, rnd, tmp):
    """One fresh target: returns None, or a string saying what went wrong."""
    state = list(STATES)[i % len(STATES)]
    python = PYTHONS[(i // len(STATES)) % len(PYTHONS)]
    script = os.path.join(tmp, "t%d.py" % i)
    out = os.path.join(tmp, "t%d.out" % i)
    with open(script, "w") as f:
        f.write(STATES[state])
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONUSERBASE=USERBASE)
    env.pop("PROBING", None)
    if ASAN:
        env["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
    what = "%s/%s #%d" % (state, os.path.basename(python), i)
    with open(out, "w") as f:
        p = subprocess.Popen([python, script], stdout=f, stderr=subprocess.STDOUT, env=env)
    text = lambda: open(out, errors="replace").read()
    try:
        deadline = time.time() + 60
        while "READY" not in text():
            if p.poll() is not None:
                return "%s: died before READY: %s" % (what, text()[-300:])
            if time.time() > deadline:
                return "%s: never READY" % what
            time.sleep(0.01)
        time.sleep(rnd.uniform(0.05, 0.3))
        if i % 5 == 4:
            # SIGKILL the injector at a random moment, then inject again.
            k = subprocess.Popen([CLI, "-t", str(p.pid), "inject"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rnd.uniform(0, 0.015))
            k.send_signal(signal.SIGKILL)
            k.wait(timeout=HANG_S)
            if p.poll() is not None:
                return "%s: died when the injector was killed: %s" % (what, text()[-300:])
        try:
            r = subprocess.run([CLI, "-t", str(p.pid), "inject"], capture_output=True,
                               text=True, timeout=HANG_S)
        except subprocess.TimeoutExpired:
            return "%s: inject hung" % what
        if r.returncode != 0:
            return "%s: inject rc=%d: %s" % (what, r.returncode, r.stderr.strip())
        inject_out = r.stdout
        try:
            r = subprocess.run([CLI, "-t", str(p.pid), "backtrace"], capture_output=True,
                               text=True, timeout=HANG_S)
        except subprocess.TimeoutExpired:
            return "%s: backtrace hung" % what
        if r.returncode != 0 or "MainThread" not in r.stdout:
            return "%s: backtrace rc=%d: %s" % (what, r.returncode, r.stderr.strip())
        deadline = time.time() + 60
        while not re.search(r"^(OK|BAD.*)$", text(), re.M):
            if p.poll() is not None:
                return "%s: target died: %s" % (what, text()[-500:])
            if time.time() > deadline:
                return "%s: no verdict: %s" % (what, text()[-300:])
            time.sleep(0.02)
        if "BAD" in text() or "Traceback" in text():
            return "%s: wrong output: %s\n%s" % (what, text()[-500:],
                                                 diagnose(p.pid, inject_out))
        if p.poll() is not None:
            return "%s: target died: %s" % (what, text()[-500:])
        return None
    finally:
        p.kill()
        p.wait()


def test_soak_many_fresh_processes():
    rnd = random.Random(20261122)
    seeds = [rnd.randrange(1 << 30) for _ in range(N)]
    began = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(lambda i: run_one(i, random.Random(seeds[i]), tmp),
                                    range(N)))
    failures = [r for r in results if r]
    print("soak: %d processes in %.0f s, %d failures" % (N, time.time() - began,
                                                        len(failures)))
    assert not failures, "\n".join(failures[:20])
