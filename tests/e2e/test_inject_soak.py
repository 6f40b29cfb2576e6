"""Soak: `probing inject` into many fresh processes, across the states of
test_inject.py (sleeping, select, read, busy, holding the GIL, threads,
forking, malloc traffic) and both Pythons, a few at a time; every fifth injector is
SIGKILLed at a random moment first.  Zero target deaths, zero wrong
outputs, zero hangs.  What a very busy machine does without us is not a
failure: a clean refusal (exit 11, "nothing was changed") is tried again,
and a worker thread that waited over 1 s for the CPU or the GIL is given
20 s more to move (tests/bench/inject_stall.py); both are printed as notes.

Bounded: PROBING_SOAK_N processes (default 200; 40 under the ASan pass,
where every target carries the sanitizer runtime), 4 at a time — about a
minute on two cores.
"""
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import CLI, PYTHONS, USERBASE

ASAN = bool(os.environ.get("PROBING_TARGET_PRELOAD"))
N = int(os.environ.get("PROBING_SOAK_N", "40" if ASAN else "200"))
WORKERS = 4
HANG_S = 60  # a CLI call longer than this is a hang
INJECT_TIMEOUT_MS = 15000  # inject's own --timeout: an agent slow to answer
                           # on an overloaded machine is not a failure
REFUSED_MAX = 3  # clean refusals (exit 11, nothing changed) tried again
notes = []  # what went slowly but right: printed, not failed

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
N = 30
counts = [0] * N
tids = [0] * N
def work(i):
    tids[i] = threading.get_native_id()
    while True:
        counts[i] += 1
        time.sleep(0.005)
def task(tid):
    # The thread's kernel state: run state, wait channel, system call,
    # signals blocked/pending, tracer.
    b = "/proc/self/task/%d/" % tid
    try:
        st = open(b + "stat").read().rsplit(")", 1)[1].split()[0]
        wchan = open(b + "wchan").read() or "-"
        sysc = (open(b + "syscall").read().split() or ["?"])[0]
        f = dict(l.split(":", 1) for l in open(b + "status").read().splitlines() if ":" in l)
        return "tid %d %s %s syscall %s SigBlk %s SigPnd %s ShdPnd %s TracerPid %s" % (
            tid, st, wchan, sysc, f["SigBlk"].strip(), f["SigPnd"].strip(),
            f["ShdPnd"].strip(), f["TracerPid"].strip())
    except (OSError, KeyError) as e:
        return "tid %d: %s" % (tid, e)
for i in range(N):
    threading.Thread(target=work, args=(i,), daemon=True).start()
print("READY", flush=True)
time.sleep(0.8)
# Every thread must go on.  On an overloaded machine a thread can wait for
# the CPU or the GIL for seconds with no injection at all (runnable, or in
# the GIL's futex; tests/bench/inject_stall.py), so one that did not move
# in 1 s gets 20 s more.  A thread stuck for good (a system call that never
# returns, left ptrace-stopped, a signal blocked) does not move: BAD, with
# its kernel state.
snap = list(counts); time.sleep(1.0)
late = [i for i in range(N) if counts[i] == snap[i]]
seen = [task(tids[i]) for i in late]  # starved: R (no CPU) or futex (GIL)
t0 = time.monotonic()
while time.monotonic() - t0 < 20 and any(counts[i] == snap[i] for i in late):
    time.sleep(0.05)
stuck = [i for i in late if counts[i] == snap[i]]
if late:
    print("NOTE threads %r did not move in 1 s (%s), all but %r moved within %.1f s more"
          % (late, "; ".join(seen), stuck, time.monotonic() - t0), flush=True)
print("OK" if not stuck else "BAD stuck %r of %r: %s" % (
    stuck, counts, "; ".join(task(tids[i]) for i in stuck)), flush=True)
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


def task_state(pid, tid):
    """One thread's kernel state, as /proc shows it: run state (t: stopped
    by a tracer), wait channel, system call, signals blocked and pending,
    tracer."""
    base = "/proc/%d/task/%d/" % (pid, tid)
    try:
        state = open(base + "stat").read().rsplit(")", 1)[1].split()[0]
        wchan = open(base + "wchan").read() or "-"
        sysc = " ".join(open(base + "syscall").read().split()[:2])
        f = dict(l.split(":", 1) for l in open(base + "status").read().splitlines()
                 if ":" in l)
        return "tid %d %s %s syscall %s SigBlk %s SigPnd %s ShdPnd %s TracerPid %s" % (
            tid, state, wchan, sysc, f["SigBlk"].strip(), f["SigPnd"].strip(),
            f["ShdPnd"].strip(), f["TracerPid"].strip())
    except (OSError, KeyError) as e:
        return "tid %d: %s" % (tid, e)


def diagnose(pid, inject_out):
    """What to look at when a target went wrong: the injection's report,
    each thread's kernel state, the Python stacks, and (with gdb) the
    native ones."""
    lines = ["inject said: " + inject_out.strip().replace("\n", " | ")]
    try:
        for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid)):
            lines.append("  " + task_state(pid, tid))
    except OSError:
        pass
    try:
        r = subprocess.run([CLI, "-t", str(pid), "backtrace"], capture_output=True,
                           text=True, timeout=HANG_S)
        lines.append(r.stdout[-3000:])
    except subprocess.TimeoutExpired:
        lines.append("backtrace hung")
    if shutil.which("gdb"):
        try:
            r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx",
                                "-ex", "thread apply all bt 12"],
                               capture_output=True, text=True, timeout=2 * HANG_S)
            lines.append("gdb: " + r.stdout[-6000:])
        except subprocess.TimeoutExpired:
            lines.append("gdb hung")
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
    began = time.time()
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
        for attempt in range(REFUSED_MAX + 1):
            try:
                r = subprocess.run([CLI, "-t", str(p.pid), "--timeout", str(INJECT_TIMEOUT_MS),
                                    "inject"], capture_output=True, text=True, timeout=HANG_S)
            except subprocess.TimeoutExpired:
                return "%s: inject hung" % what
            # Exit 11 "... nothing was changed, try again": no thread
            # stopped at a safe point in time (the CLI has already tried
            # three times).  A documented, harmless refusal on a very busy
            # machine, not a failure: the target must go on unharmed (its
            # verdict below) and a later try must succeed.
            if r.returncode != 11 or "nothing was changed" not in r.stderr:
                break
            notes.append("%s: inject refused, tried again: %s" % (what, r.stderr.strip()))
            time.sleep(0.5)
        if r.returncode != 0:
            time.sleep(0.5)
            return "%s: inject rc=%d: %s\ntarget %s: %s" % (
                what, r.returncode, r.stderr.strip(),
                "alive" if p.poll() is None else "exited %s" % p.returncode,
                text()[-1500:])
        inject_out = r.stdout
        try:
            r = subprocess.run([CLI, "-t", str(p.pid), "backtrace"], capture_output=True,
                               text=True, timeout=HANG_S)
        except subprocess.TimeoutExpired:
            return "%s: backtrace hung" % what
        if r.returncode != 0 or "MainThread" not in r.stdout:
            time.sleep(0.5)
            return "%s: backtrace rc=%d: %s\ntarget %s: %s" % (
                what, r.returncode, r.stderr.strip(),
                "alive" if p.poll() is None else "exited %s" % p.returncode,
                text()[-1500:])
        deadline = time.time() + 60
        while not re.search(r"^(OK|BAD.*)$", text(), re.M):
            if p.poll() is not None:
                return "%s: target died: %s" % (what, text()[-500:])
            if time.time() > deadline:
                return "%s: no verdict: %s" % (what, text()[-300:])
            time.sleep(0.02)
        note = re.search(r"^NOTE (.*)$", text(), re.M)
        if note:
            notes.append("%s: %s" % (what, note.group(1)))
        if "BAD" in text() or "Traceback" in text():
            return "%s: wrong output: %s\n%s" % (what, text()[-500:],
                                                 diagnose(p.pid, inject_out))
        if p.poll() is not None:
            return "%s: target died: %s" % (what, text()[-500:])
        # The loader's files leave the target's /tmp once it ran, also
        # for an injector killed while it waited.  One killed in the
        # instant between writing them and asking leaves them: a note.
        left = [f for ext in ("py", "out") for f in glob.glob(
            "/proc/%d/root/tmp/probing-%d-*.%s" % (p.pid, p.pid, ext))]
        left = [f for f in left if os.path.getmtime(f) >= began - 1]
        if left and i % 5 != 4:
            return "%s: the loader's files left in its /tmp: %s" % (what, left)
        if left:
            notes.append("%s: the killed injector left %s" % (what, left))
        return None
    finally:
        p.kill()
        p.wait()


def test_soak_many_fresh_processes():
    rnd = random.Random(20261122)
    seeds = [rnd.randrange(1 << 30) for _ in range(N)]
    notes.clear()
    began = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(lambda i: run_one(i, random.Random(seeds[i]), tmp),
                                    range(N)))
    failures = [r for r in results if r]
    print("soak: %d processes in %.0f s, %d failures, load average %s" % (
        N, time.time() - began, len(failures), open("/proc/loadavg").read().split()[0]))
    for n in notes:
        print("  note: " + n)
    assert not failures, "\n".join(failures[:20])
