"""`probing -t PID inject`: real Python processes in every state a target
can be in; after each injection the agent answers, a backtrace works, and
the target's own output shows it went on exactly as it would have.

The targets print what they observe (how long a sleep lasted, what a read
returned, exceptions); the tests read it back.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import (BUILD, CLI, SANITIZED_TARGETS, SYSTEM_PYTHON,
                      agent_lib, agent_listening, probing, version_of, wait_for)


@pytest.fixture(autouse=True)
def ptrace_way(monkeypatch):
    """The ptrace way, on every Python: from 3.14 `inject` goes through
    PEP 768 unless told otherwise, which test_inject_pep768.py tests."""
    monkeypatch.setenv("PROBING_INJECT_VIA", "ptrace")


def target_env(**extra):
    """The environment for a target started here (not through spawn())."""
    e = dict(os.environ, **extra)
    e.pop("PROBING", None)
    if os.environ.get("PROBING_TARGET_PRELOAD"):
        # ASan build: the sanitizer runtimes must come first.
        e["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
    return e


def inject(pid, *args, timeout=60, env=None):
    return probing("inject", *args, target=pid, timeout=timeout, env=env)


def injected_ok(t, *args):
    r = inject(t.pid, *args)
    assert r.rc == 0, r
    assert "agent: @probing-%d" % t.pid in r.out, r
    assert agent_listening(t.pid)
    return r


def backtrace(pid):
    r = probing("backtrace", "-f", "json", target=pid)
    assert r.rc == 0, r
    return r.json()


def main_frames(body, pid):
    main = [th for th in body["threads"] if th["nativeId"] == pid][0]
    return [f["func"] for f in main["frames"]]


def no_trouble(t):
    """Nothing in the target's output that an injection could cause."""
    out = t.output()
    for bad in ("Traceback", "Errno", "EINTR", "Interrupted", "Error"):
        assert bad not in out, out
    return out


def has_module(python, name):
    return subprocess.run([python, "-c", "import " + name],
                          capture_output=True).returncode == 0


# ---- sleeping in a system call ----------------------------------------

SLEEP = """\
import time
print("READY", flush=True)
t0 = time.monotonic()
time.sleep(1.2)
print("SLEPT %.3f" % (time.monotonic() - t0), flush=True)
time.sleep(600)
"""


def test_sleeping_in_time_sleep(spawn, python):
    t = spawn(python, SLEEP, agent=None)
    t.wait_line("READY")
    time.sleep(0.3)
    r = injected_ok(t)
    # time.sleep() waits in clock_nanosleep() from 3.11, in select() before.
    call = "clock_nanosleep" if version_of(python) >= (3, 11) else "select"
    assert call in r.out and "restarted" in r.out, r
    assert main_frames(backtrace(t.pid), t.pid) == ["<module>"]
    t.wait_line("SLEPT")
    slept = float(re.search(r"SLEPT ([\d.]+)", t.output()).group(1))
    assert 1.199 <= slept < 2.7, t.output()  # the whole sleep, once
    no_trouble(t)
    assert t.alive()


SELECT = """\
import os, select, time
r, w = os.pipe()
print("READY", flush=True)
t0 = time.monotonic()
res = select.select([r], [], [], 1.2)
print("SELECT %r %.3f" % (res, time.monotonic() - t0), flush=True)
time.sleep(600)
"""


def test_sleeping_in_select(spawn, python):
    t = spawn(python, SELECT, agent=None)
    t.wait_line("READY")
    time.sleep(0.3)
    injected_ok(t)
    t.wait_line("SELECT")
    m = re.search(r"SELECT \(\[\], \[\], \[\]\) ([\d.]+)", t.output())
    assert m, t.output()
    assert 1.199 <= float(m.group(1)) < 2.7, t.output()
    no_trouble(t)


READ = """\
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("READY", flush=True)
data = os.read(fd, 100)
print("READ %r" % data, flush=True)
import time; time.sleep(600)
"""


def test_blocked_in_read(spawn, python, tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    t = spawn(python, READ, agent=None, args=(fifo,))
    w = os.open(fifo, os.O_WRONLY)  # meets the target's open
    try:
        t.wait_line("READY")
        time.sleep(0.3)
        r = injected_ok(t)
        assert "read" in r.out, r
        body = backtrace(t.pid)
        assert "<module>" in main_frames(body, t.pid)
        time.sleep(0.3)
        assert "READ b" not in t.output()  # still waiting for data
        os.write(w, b"hello\n")
        t.wait_line("READ b")
        assert "READ b'hello\\n'" in t.output(), t.output()
        no_trouble(t)
    finally:
        os.close(w)


# ---- busy ---------------------------------------------------------------

BUSY = """\
import time
def spin():
    x = 0
    n = 0
    while True:
        x = (x * 31 + 7) % 1000003
        n += 1
        if n % 2000000 == 0:
            print("TICK", n, x, flush=True)
print("READY", flush=True)
spin()
"""


def expected_x(n):
    x = 0
    for _ in range(n):
        x = (x * 31 + 7) % 1000003
    return x


def test_busy_python_loop(spawn, python):
    t = spawn(python, BUSY, agent=None)
    t.wait_line("TICK")
    r = injected_ok(t)
    assert "spin" in main_frames(backtrace(t.pid), t.pid)
    before = t.output().count("TICK")
    wait_for(lambda: t.output().count("TICK") >= before + 2, 60, "more ticks")
    # Every value printed is the one the loop must produce: no register
    # of the thread was changed.
    ticks = re.findall(r"TICK (\d+) (\d+)", t.output())
    first_n, first_x = int(ticks[0][0]), int(ticks[0][1])
    assert first_x == expected_x(first_n)
    step = 2000000
    x = first_x
    for n, v in ticks[1:4]:
        for _ in range(step):
            x = (x * 31 + 7) % 1000003
        assert int(v) == x
    no_trouble(t)


NUMPY = """\
import numpy as np
a = np.arange(160 * 160, dtype=np.float64).reshape(160, 160) / 1e5
b = np.eye(160) * 0.5 + 0.25
ref = float((a @ b).sum())
print("READY %r" % ref, flush=True)
n = 0
while True:
    s = float((a @ b).sum())          # BLAS, without the GIL
    if s != ref:
        print("WRONG", s, ref, flush=True)
    n += 1
    if n % 50 == 0:
        print("ITER", n, flush=True)
"""


def test_busy_in_numpy_without_gil(spawn, python):
    if not has_module(python, "numpy"):
        pytest.skip("no numpy for this Python")
    t = spawn(python, NUMPY, agent=None, env={"OMP_NUM_THREADS": "2",
                                              "OPENBLAS_NUM_THREADS": "2"})
    t.wait_line("ITER")
    injected_ok(t)
    backtrace(t.pid)
    before = t.output().count("ITER")
    wait_for(lambda: t.output().count("ITER") >= before + 3, 60, "more iterations")
    assert "WRONG" not in t.output()
    no_trouble(t)


TORCH = """\
import torch
torch.manual_seed(0)
a = torch.randn(200, 200, dtype=torch.float64)
ref = float((a @ a).sum())
print("READY", flush=True)
n = 0
while True:
    s = float((a @ a).sum())
    if s != ref:
        print("WRONG", s, ref, flush=True)
    n += 1
    if n % 100 == 0:
        print("ITER", n, flush=True)
"""


def test_busy_in_torch(spawn):
    if not has_module(SYSTEM_PYTHON, "torch"):
        pytest.skip("no torch")
    t = spawn(SYSTEM_PYTHON, TORCH, agent=None)
    t.wait_line("ITER", timeout=120)
    injected_ok(t)
    backtrace(t.pid)
    before = t.output().count("ITER")
    wait_for(lambda: t.output().count("ITER") >= before + 3, 60, "more iterations")
    assert "WRONG" not in t.output()
    no_trouble(t)


HOG = """\
import time
def crunch():
    print("HOGGING", flush=True)
    return sum(range(3 * 10**9))     # line 4: C loop, GIL held throughout
time.sleep(0.2)
crunch()
"""


def test_holding_the_gil_in_c(spawn, python):
    t = spawn(python, HOG, agent=None)
    t.wait_line("HOGGING")
    time.sleep(0.3)
    began = time.time()
    injected_ok(t)
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    body = r.json()
    assert body["gil"]["acquired"] is False
    assert body["gil"]["holderNativeId"] == t.pid
    assert main_frames(body, t.pid)[:2] == ["crunch", "<module>"]
    r = probing("eval", "1", target=t.pid)
    assert r.rc == 1 and "GIL" in r.err and str(t.pid) in r.err, r
    assert time.time() - began < 15
    assert t.alive()


# ---- many threads, allocation traffic ------------------------------------

THREADS = """\
import threading, time
N = 100
counts = [0] * N
def work(i):
    while True:
        counts[i] += 1
        time.sleep(0.01)
for i in range(N):
    threading.Thread(target=work, args=(i,), daemon=True).start()
print("READY", flush=True)
while True:
    time.sleep(0.5)
    snap = list(counts)
    time.sleep(0.5)
    stuck = [i for i in range(N) if counts[i] == snap[i]]
    print("ALIVE %d STUCK %d" % (threading.active_count(), len(stuck)), flush=True)
"""


def test_hundred_threads(spawn, python):
    t = spawn(python, THREADS, agent=None)
    t.wait_line("ALIVE")
    injected_ok(t)
    body = backtrace(t.pid)
    assert len(body["threads"]) >= 101
    n = t.output().count("ALIVE")
    wait_for(lambda: t.output().count("ALIVE") >= n + 2, 30, "reports")
    last = re.findall(r"ALIVE (\d+) STUCK (\d+)", t.output())[-1]
    assert last == ("101", "0"), t.output()[-500:]
    no_trouble(t)


MALLOC = """\
import threading, time
errors = []
def churn(seed):
    k = 0
    while True:
        big = [bytes([seed]) * (1000 + (k % 50) * 1000) for _ in range(200)]
        lst = list(range(20000 + k % 1000))
        if sum(lst) != (len(lst) - 1) * len(lst) // 2 or big[-1][0] != seed:
            errors.append(k)
        del big, lst
        k += 1
for s in range(4):
    threading.Thread(target=churn, args=(s,), daemon=True).start()
print("READY", flush=True)
while True:
    junk = [bytearray(4096) for _ in range(500)]
    del junk
    time.sleep(0.001)
    if errors:
        print("CORRUPT", errors[:5], flush=True)
        errors.clear()
"""


def test_malloc_traffic(spawn, python):
    t = spawn(python, MALLOC, agent=None)
    t.wait_line("READY")
    time.sleep(0.5)
    injected_ok(t)
    backtrace(t.pid)
    time.sleep(1.0)
    assert t.alive()
    assert "CORRUPT" not in t.output()
    no_trouble(t)


FORKS = """\
import subprocess, sys, time
print("READY", flush=True)
n = 0
while True:
    r = subprocess.run(["true"])
    if r.returncode != 0:
        print("BAD", r.returncode, flush=True)
    n += 1
    if n % 50 == 0:
        print("FORKS", n, flush=True)
"""


def test_forking_in_a_loop(spawn, python):
    """The main thread forks all the time (subprocess: vfork + exec):
    a thread stopped inside fork's clone holds every malloc lock and is
    never used; the forks go on."""
    t = spawn(python, FORKS, agent=None)
    t.wait_line("FORKS")
    injected_ok(t)
    backtrace(t.pid)
    n = t.output().count("FORKS")
    wait_for(lambda: t.output().count("FORKS") >= n + 2, 60, "more forks")
    assert "BAD" not in t.output()
    no_trouble(t)


# ---- an agent already there ---------------------------------------------

def test_already_injected_is_reused(spawn, python):
    t = spawn(python, SLEEP, agent=None)
    t.wait_line("READY")
    injected_ok(t)
    r = inject(t.pid)
    assert r.rc == 0, r
    assert "already has a Probing agent" in r.out and "nothing injected" in r.out
    with open("/proc/%d/maps" % t.pid) as f:
        libs = {l.split()[-1] for l in f if "libprobing" in l}
    assert len(libs) == 1, libs
    backtrace(t.pid)


def test_started_with_probing_env_is_reused(spawn, python):
    t = spawn(python, SLEEP, agent="env")
    t.wait_agent()
    r = inject(t.pid, "-D", "query.max_rows=77")
    assert r.rc == 0, r
    assert "reusing" in r.out
    r = probing("config", "-f", "json", target=t.pid)
    assert r.rc == 0
    assert {"name": "query.max_rows", "value": 77} in [
        {"name": s["name"], "value": s["value"]} for s in r.json()] or "77" in r.out


FORKED = """\
import os, time
parent = os.getpid()
kid = os.fork()
if kid == 0:
    i = 0
    while os.getppid() == parent:
        os.write(1, b"CHILD %d\\n" % i)
        time.sleep(0.05)
        i += 1
    os._exit(0)
os.write(1, b"KID %d\\n" % kid)  # one write: print() under -u
time.sleep(600)                  # writes "KID", " ", pid apart
"""


@pytest.mark.skipif(SANITIZED_TARGETS, reason="libasan's allocator is not "
                    "fork-safe in a threaded process (conftest.py)")
@pytest.mark.parametrize("agent", ["env", "init"])
def test_forked_child_gets_its_agent_restarted(spawn, python, agent):
    """A forked child keeps the parent's agent library mapped, not its
    agent: inject starts that library's agent again (never a second copy
    of the library, which would run two agents in one process, nor a wait
    for an agent that cannot come)."""
    t = spawn(python, FORKED, agent=agent)
    t.wait_line("KID")
    kid = int(t.output().split("KID ")[1].split()[0])
    t.wait_agent()
    r = inject(kid)
    assert r.rc == 0, r
    assert r.out.startswith("restarted the agent in process %d" % kid), r
    assert "agent: @probing-%d" % kid in r.out, r
    frames = main_frames(backtrace(kid), kid)
    assert frames[0] == "<module>", frames
    with open("/proc/%d/maps" % kid) as f:
        libs = {l.split()[-1] for l in f if "libprobing" in l}
    assert len(libs) == 1, libs
    # Once running, it is reused like any other.
    r = inject(kid)
    assert r.rc == 0 and "already has a Probing agent" in r.out, r
    # The child went on printing through it all; the parent's agent
    # still answers.
    n = t.output().count("CHILD")
    wait_for(lambda: t.output().count("CHILD") >= n + 3, 30, "the child")
    backtrace(t.pid)
    no_trouble(t)
    os.kill(kid, signal.SIGKILL)


def test_listen_and_settings(spawn, python):
    t = spawn(python, SLEEP, agent=None)
    t.wait_line("READY")
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = inject(t.pid, "--listen", "127.0.0.1:%d" % port, "-D", "query.max_rows=123")
    assert r.rc == 0, r
    assert "127.0.0.1:%d" % port in r.out, r
    r = probing("config", target="127.0.0.1:%d" % port)
    assert r.rc == 0, r
    assert re.search(r"query\.max_rows\s+123", r.out), r.out


# ---- the injector killed at each step -------------------------------------

STEPS = ["check", "attach", "write", "enter", "detach"]


@pytest.mark.parametrize("step", STEPS)
def test_injector_killed_at_step(spawn, python, step):
    t = spawn(python, SLEEP, agent=None)
    t.wait_line("READY")
    env = dict(os.environ, PROBING_INJECT_TEST_DELAY_US="150000")
    p = subprocess.Popen([CLI, "-t", str(t.pid), "inject"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if "inject step " + step in line:
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL, seen
    t.wait_line("SLEPT")
    slept = float(re.search(r"SLEPT ([\d.]+)", t.output()).group(1))
    assert 1.199 <= slept < 3.5, t.output()
    no_trouble(t)
    assert t.alive()
    if step in ("enter", "detach"):
        # The thread was already sent into the trampoline: it loads the
        # agent by itself.
        t.wait_agent(timeout=15)
        backtrace(t.pid)
    else:
        assert not agent_listening(t.pid)
        injected_ok(t)  # and a new injection works
        backtrace(t.pid)


def test_injector_killed_at_random_moments(spawn, python):
    t = spawn(python, """\
import time
print("READY", flush=True)
n = 0
while True:
    t0 = time.monotonic()
    time.sleep(0.05)
    d = time.monotonic() - t0
    if d < 0.0499:
        print("SHORT %.4f" % d, flush=True)
    n += 1
    if n % 20 == 0:
        print("TICK", n, flush=True)
""", agent=None)
    t.wait_line("READY")
    import random
    rnd = random.Random(1234)
    for i in range(12):
        p = subprocess.Popen([CLI, "-t", str(t.pid), "inject"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0, 0.012))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        assert t.alive()
        if agent_listening(t.pid):
            break
    n = t.output().count("TICK")
    wait_for(lambda: t.output().count("TICK") >= n + 2, 30, "ticks")
    assert "SHORT" not in t.output(), t.output()
    no_trouble(t)
    r = inject(t.pid)
    assert r.rc == 0, r
    backtrace(t.pid)


# ---- errors ---------------------------------------------------------------

def test_no_such_process():
    r = inject(99999999)
    assert r.rc == 3, r
    assert "no such process" in r.err


def test_not_a_pid():
    r = probing("inject", target="127.0.0.1:9")
    assert r.rc == 2, r


def test_not_cpython(tmp_path):
    p = subprocess.Popen(["sleep", "100"])
    try:
        time.sleep(0.2)
        r = inject(p.pid)
        assert r.rc == 9, r
        assert "not CPython" in r.err, r
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


EMBED = r"""
#include <Python.h>
#include <stdio.h>
#include <unistd.h>
int main(void)
{
	printf("READY\n");
	fflush(stdout);
	sleep(30); /* CPython linked in, not initialized */
	Py_Initialize();
	return 0;
}
"""


def test_python_not_initialized(tmp_path):
    """A program that embeds CPython but has not called Py_Initialize."""
    cfg = "/usr/bin/python3-config"
    if not shutil.which("gcc") or not os.path.exists(cfg):
        pytest.skip("needs gcc and python3-dev")
    flags = subprocess.run([cfg, "--cflags", "--embed", "--ldflags"], capture_output=True,
                           text=True).stdout.split()
    src = tmp_path / "embed.c"
    src.write_text(EMBED)
    exe = tmp_path / "embed"
    cc = subprocess.run(["gcc", str(src), "-o", str(exe)] + flags, capture_output=True,
                        text=True)
    if cc.returncode != 0:
        pytest.skip("cannot build an embedding program: " + cc.stderr[-300:])
    p = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, text=True, env=target_env())
    try:
        assert p.stdout.readline().strip() == "READY"
        r = inject(p.pid)
        assert r.rc == 9, r
        assert "not initialized yet" in r.err, r
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


def test_bogus_library_reports_dlerror(spawn, python, tmp_path):
    t = spawn(python, SLEEP, agent=None)
    t.wait_line("READY")
    bogus = tmp_path / "libbogus.so"
    bogus.write_text("this is not an ELF file\n" * 100)
    r = inject(t.pid, "--library", str(bogus))
    assert r.rc == 10, r
    assert "dlopen" in r.err and ("ELF" in r.err or "too short" in r.err or "invalid" in r.err), r
    t.wait_line("SLEPT")
    slept = float(re.search(r"SLEPT ([\d.]+)", t.output()).group(1))
    assert 1.199 <= slept < 2.7
    no_trouble(t)
    injected_ok(t)  # the real one still goes in afterwards


def test_missing_library(spawn):
    r = inject(os.getpid(), "--library", "/nonexistent/libprobing.so")
    assert r.rc == 10, r
    assert "not found" in r.err


def _nobody():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    try:
        import pwd
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


def test_permission_denied(spawn, tmp_path):
    nobody = _nobody()
    if not nobody:
        pytest.skip("needs root and setpriv to run the CLI as nobody")
    t = spawn(SYSTEM_PYTHON, SLEEP, agent=None)
    t.wait_line("READY")
    import pathlib, tempfile
    d = pathlib.Path(tempfile.mkdtemp(prefix="probing-perm-"))  # 0700 parents
    os.chmod(d, 0o755)                                          # would hide it
    request_cleanup = lambda: shutil.rmtree(d, ignore_errors=True)
    cli = d / "probing"
    shutil.copy(CLI, cli)
    lib = d / "libprobing.so"
    shutil.copy(agent_lib(SYSTEM_PYTHON), lib)
    os.chmod(cli, 0o755)
    os.chmod(lib, 0o755)
    try:
        r = subprocess.run(["setpriv", "--reuid=%d" % nobody.pw_uid,
                            "--regid=%d" % nobody.pw_gid, "--clear-groups",
                            str(cli), "-t", str(t.pid), "inject", "--library", str(lib)],
                           capture_output=True, text=True, timeout=60)
    finally:
        request_cleanup()
    assert r.returncode == 8, (r.returncode, r.stdout, r.stderr)
    assert "not allowed" in r.stderr and "uid 0" in r.stderr, r.stderr
    assert "CAP_SYS_PTRACE" in r.stderr
    t.wait_line("SLEPT")
    no_trouble(t)


def test_other_mount_namespace(spawn, python, tmp_path):
    """The target cannot see the library's path: it is copied in."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare")
    hide = os.path.dirname(agent_lib(python))
    script = tmp_path / "ns.py"
    script.write_text(SLEEP)
    out = tmp_path / "ns.out"
    with open(out, "w") as f:
        p = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs none "$1" && exec "$2" "$3"', "sh", hide,
             python, str(script)],
            stdout=f, stderr=subprocess.STDOUT, env=target_env(PYTHONUNBUFFERED="1"))
    try:
        wait_for(lambda: "READY" in out.read_text() or p.poll() is not None, 30, "READY")
        if p.poll() is not None:
            pytest.skip("unshare failed: " + out.read_text())
        assert not os.path.exists("/proc/%d/root%s" % (p.pid, agent_lib(python)))
        r = inject(p.pid)
        assert r.rc == 0, r
        assert "copied" in r.out, r
        assert backtrace(p.pid)["threads"]
        wait_for(lambda: "SLEPT" in out.read_text(), 30, "SLEPT")
        assert "Traceback" not in out.read_text()
        left = [f for f in os.listdir("/proc/%d/root/tmp" % p.pid)
                if re.match(r"probing-\d+-[0-9a-f]+\.so$", f)]
        assert not left, left
    finally:
        p.kill()
        p.wait()


# ---- launch and list --------------------------------------------------------

def test_launch_starts_the_agent(tmp_path, python):
    script = tmp_path / "app.py"
    script.write_text("import time\nprint('UP', flush=True)\ntime.sleep(600)\n")
    env = target_env()
    env.pop("PYTHONUSERBASE", None)
    p = subprocess.Popen([CLI, "launch", "-D", "query.max_rows=9", "--",
                          python, str(script)], stdout=subprocess.PIPE,
                         env=env, text=True)
    try:
        assert p.stdout.readline().strip() == "UP"
        wait_for(lambda: agent_listening(p.pid), 30, "agent")
        r = probing("config", target=p.pid)
        assert re.search(r"query\.max_rows\s+9", r.out), r
        # The agent of the launched Python's version, its reader checked.
        assert re.search(r"agent\.python\s+%d\.%d\s" % version_of(python), r.out), r
        assert re.search(r"agent\.stack_reader\s+ok\s", r.out), r
    finally:
        p.kill()
        p.wait()


def test_launch_missing_program():
    r = probing("launch", "--", "/nonexistent/python")
    assert r.rc == 127, r
    r = probing("launch")
    assert r.rc == 2, r


def test_list_shows_injected_agents(spawn, python):
    t = spawn(python, SLEEP, agent=None)
    t.wait_line("READY")
    injected_ok(t)
    r = probing("list", "-f", "json")
    assert r.rc == 0
    assert t.pid in [row["pid"] if isinstance(row["pid"], int) else int(row["pid"])
                     for row in r.json()], r.out


def _old_pythons():
    """{"3.8": executable, ...}: CPythons older than 3.9 on this machine
    (pyenv's)."""
    out = {}
    for c in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[5678].*/bin/python3"))):
        if os.access(c, os.X_OK):
            out[c.split("/versions/")[1][:3]] = c
    return out


@pytest.mark.parametrize("version,says", [("3.8", "older than 3.9"), ("3.6", "older than 3.7")])
def test_inject_refuses_an_unsupported_version_and_names_those_it_has(spawn, version, says):
    old = _old_pythons().get(version)
    if not old:
        pytest.skip("no CPython %s on this machine" % version)
    t = spawn(old, SLEEP, agent=None)
    t.wait_line("READY")
    r = inject(t.pid)
    assert r.rc == 9, r
    with open(os.path.join(BUILD, "pythons.txt")) as f:
        have = ", ".join(line.split()[1] for line in f if line.strip())
    assert says in r.err and ("supports " + have) in r.err, r
    t.wait_line("SLEPT")
    assert t.alive()


def test_version_and_help_name_the_versions():
    with open(os.path.join(BUILD, "pythons.txt")) as f:
        have = ", ".join(line.split()[1] for line in f if line.strip())
    r = probing("--version")
    assert r.rc == 0 and ("agents for CPython " + have) in r.out, r
    r = probing("--help")
    assert r.rc == 0 and ("CPython " + have + " in this install") in r.out, r
