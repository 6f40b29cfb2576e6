"""`probing -t PID inject` through PEP 768 (CPython 3.14+): the main thread
runs Probing's loader at a safe point, no thread is stopped; ptrace when
remote debugging is off in the target or the main thread reaches no safe
point in time (docs/injection.md, "Two ways in").

The targets print what they observe (how long each sleep lasted, the names
in their namespace, exceptions); the tests read it back.  A target's
Python is one of the build's (the `python` fixture): the PEP 768 tests run
for 3.14 and later where the build has an agent for it, the others for
every version.
"""
import fcntl
import glob
import os
import re
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import (CLI, Target, agent_lib, agent_listening, probing, version_of,
                      wait_for)


def needs_pep768(python):
    if version_of(python) < (3, 14):
        pytest.skip("PEP 768 is CPython 3.14's")
    if not os.path.exists(agent_lib(python)):
        pytest.skip("no agent for CPython %d.%d in this build" % version_of(python))


def inject(pid, *args, timeout=60, env=None):
    return probing("inject", *args, target=pid, timeout=timeout, env=env)


def mapped_agents(pid):
    with open("/proc/%d/maps" % pid, errors="surrogateescape") as f:
        return {l.split()[-1] for l in f if "libprobing" in l}


def started_at(pid):
    """When process pid started, in seconds since the epoch (to 10 ms)."""
    with open("/proc/%d/stat" % pid) as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        btime = next(int(l.split()[1]) for l in f if l.startswith("btime "))
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def leftovers(pid):
    """Loader and report files of ours left in the target's /tmp by an
    injection into it (not those a process that had its pid before it
    left: the pids of a long suite come round again)."""
    since = started_at(pid) - 1.5   # btime is to the second
    out = []
    for f in glob.glob("/proc/%d/root/tmp/probing-%d-*" % (pid, pid)):
        try:
            if os.stat(f).st_mtime >= since:
                out.append(f)
        except FileNotFoundError:
            pass
    return out


def no_trouble(t):
    out = t.output()
    for bad in ("Traceback", "Errno", "Error", "debugger script"):
        assert bad not in out, out
    return out


def ticks(t):
    return [float(x) for x in re.findall(r"TICK ([\d.]+)", t.output())]


# A main thread that sleeps in a loop: it reaches a safe point between two
# sleeps.  It prints each sleep's length and the names of its namespace.
SLEEPER = """\
import os, time
print("READY", flush=True)
while True:
    t0 = time.monotonic()
    time.sleep(0.1)
    print("TICK %.4f" % (time.monotonic() - t0), flush=True)
    if os.path.exists(os.path.join(os.path.dirname(__file__), "names")):
        print("NAMES", sorted(k for k in globals() if not k.startswith("__")),
              flush=True)
        os.unlink(os.path.join(os.path.dirname(__file__), "names"))
"""


def test_sleeping_main_thread(spawn, python, tmp_path):
    needs_pep768(python)
    t = spawn(python, SLEEPER, agent=None)
    t.wait_line("READY")
    time.sleep(0.3)
    r = inject(t.pid)
    assert r.rc == 0, r
    assert r.out.startswith("injected %s into process %d" % (agent_lib(python), t.pid)), r
    assert "through PEP 768" in r.out.splitlines()[0], r
    m = re.search(r"the main thread \((\d+)\) took the request at a safe point "
                  r"([\d.]+) ms after it was made and ran the loader for ([\d.]+) ms", r.out)
    assert m and int(m.group(1)) == t.pid, r
    assert float(m.group(2)) < 1000, r     # one sleep is 100 ms
    assert "no thread was stopped" in r.out, r
    assert "PEP 768" not in r.err, r      # no fallback note
    assert "agent: @probing-%d" % t.pid in r.out, r
    assert agent_listening(t.pid)
    assert mapped_agents(t.pid) == {agent_lib(python)}
    assert not leftovers(t.pid)
    b = probing("backtrace", "-f", "json", target=t.pid)
    assert b.rc == 0, b
    main = [th for th in b.json()["threads"] if th["nativeId"] == t.pid][0]
    assert [f["func"] for f in main["frames"]] == ["<module>"], main
    # The loader bound no name where it ran; the sleeps were whole.
    n = len(ticks(t))
    (tmp_path / "names").write_text("")
    t.wait_line("NAMES")
    assert "NAMES ['os', 't0', 'time']" in t.output(), t.output()
    wait_for(lambda: len(ticks(t)) >= n + 3, 30, "more ticks")
    # One sleep's tick holds the loader's run (it ran between that sleep's
    # end and the clock's read): no tick is longer than a loaded machine's
    # sleep and that.
    loader = float(m.group(3)) / 1000
    assert all(0.099 < x < 0.6 + loader for x in ticks(t)), (ticks(t), loader)
    no_trouble(t)


def test_busy_main_thread(spawn, python):
    """A main thread running Python all the time takes the request at once."""
    needs_pep768(python)
    t = spawn(python, """\
        print("READY", flush=True)
        while True:
            sum(range(100))
        """, agent=None)
    t.wait_line("READY")
    r = inject(t.pid)
    assert r.rc == 0 and "through PEP 768" in r.out, r
    taken = float(re.search(r"safe point ([\d.]+) ms after", r.out).group(1))
    assert taken < 500, r
    assert agent_listening(t.pid)
    no_trouble(t)


# The main thread blocked in C (a lock) for a while, then sleeping in a
# loop.  Its lock is released by a timer thread after `hold` seconds.
BLOCKED = """\
import threading, time, sys
hold = float(sys.argv[1])
lock = threading.Lock()
lock.acquire()
threading.Timer(hold, lock.release).start()
print("READY", flush=True)
lock.acquire()
print("RELEASED", flush=True)
while True:
    time.sleep(0.05)
    print("TICK", flush=True)
"""


def test_blocked_main_thread_falls_back_to_ptrace(spawn, python):
    needs_pep768(python)
    t = spawn(python, BLOCKED, agent=None, args=("3",))
    t.wait_line("READY")
    time.sleep(0.2)
    r = inject(t.pid, "--safe-point-wait", "300")
    assert r.rc == 0, r
    assert re.search(r"PEP 768: the main thread of process %d \(thread %d\) reached "
                     r"no safe point in 0\.3 s: .*state S.*using ptrace instead"
                     % (t.pid, t.pid), r.err), r
    assert "with ptrace" in r.out.splitlines()[0], r
    assert "was stopped" in r.out, r
    assert agent_listening(t.pid)
    assert not leftovers(t.pid)
    # Released later, the main thread does not run the withdrawn loader.
    t.wait_line("RELEASED")
    wait_for(lambda: t.output().count("TICK") >= 5, 30, "ticks")
    assert len(mapped_agents(t.pid)) == 1
    no_trouble(t)


def test_target_exiting_meanwhile_leaves_no_files(spawn, python):
    """The target exits while its request waits: the loader and report go
    from its /tmp all the same (not by /proc/PID/root, gone with it; a
    later process given its pid would find them)."""
    needs_pep768(python)
    t = spawn(python, """\
        import os, threading, time
        lock = threading.Lock()
        lock.acquire()
        threading.Timer(1.0, os._exit, (0,)).start()
        print("READY", flush=True)
        lock.acquire()
        """, agent=None)
    t.wait_line("READY")
    before = set(glob.glob("/tmp/probing-%d-*" % t.pid))
    r = inject(t.pid, "--via", "pep768", "--safe-point-wait", "5000")
    assert r.rc != 0 and "process %d exited" % t.pid in r.err, r
    assert set(glob.glob("/tmp/probing-%d-*" % t.pid)) == before


def test_via_pep768_only_does_not_fall_back(spawn, python):
    needs_pep768(python)
    t = spawn(python, BLOCKED, agent=None, args=("2",))
    t.wait_line("READY")
    r = inject(t.pid, "--via", "pep768", "--safe-point-wait", "300")
    assert r.rc == 11, r
    assert "reached no safe point" in r.err and "--via ptrace" in r.err, r
    assert not mapped_agents(t.pid) and not leftovers(t.pid)
    t.wait_line("RELEASED")
    wait_for(lambda: t.output().count("TICK") >= 5, 30, "ticks")
    assert not mapped_agents(t.pid), "the withdrawn request ran"
    no_trouble(t)


def start_inject(pid, *args):
    """The real CLI injecting, left running: (Popen, its stderr lines)."""
    e = dict(os.environ)
    e.pop("PROBING_TARGET", None)
    return subprocess.Popen([CLI, "-t", str(pid), "inject"] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=e)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_wait_withdraws_and_leaves_no_files(spawn, python, sig):
    """Ctrl-C (or a TERM) while the request waits for a safe point: the
    request is withdrawn and its files go; the main thread, released
    later, loads nothing."""
    needs_pep768(python)
    t = spawn(python, BLOCKED, agent=None, args=("2",))
    t.wait_line("READY")
    p = start_inject(t.pid, "--via", "pep768", "--safe-point-wait", "20000")
    wait_for(lambda: leftovers(t.pid), 10, "the loader in the target's /tmp")
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, (out, err)
    assert "interrupted; process %d's request was withdrawn" % t.pid in err, err
    assert not leftovers(t.pid)
    t.wait_line("RELEASED")
    wait_for(lambda: t.output().count("TICK") >= 5, 30, "ticks")
    assert not mapped_agents(t.pid), "the withdrawn request ran"
    no_trouble(t)


def test_killed_injector_leaves_no_files(spawn, python):
    """The injector SIGKILLed while its request waits: the main thread,
    released, runs the loader, which loads the agent and removes its own
    files (a later process given this pid would find them)."""
    needs_pep768(python)
    t = spawn(python, BLOCKED, agent=None, args=("2",))
    t.wait_line("READY")
    p = start_inject(t.pid, "--via", "pep768", "--safe-point-wait", "20000")
    wait_for(lambda: leftovers(t.pid), 10, "the loader in the target's /tmp")
    p.kill()
    p.communicate(timeout=30)
    t.wait_line("RELEASED")
    wait_for(lambda: agent_listening(t.pid), 30, "the agent, loaded later")
    wait_for(lambda: not leftovers(t.pid), 10, "the loader's files gone")
    assert mapped_agents(t.pid) == {agent_lib(python)}
    no_trouble(t)


def test_orphans_are_swept_and_live_ones_kept(spawn, python):
    """Files an injector that died left (no lock on the report; a loader
    without its report) go at the next injection into that pid; a live
    injector's (locked) stay."""
    needs_pep768(python)
    t = spawn(python, """\
        import time
        print("READY", flush=True)
        while True:
            time.sleep(0.05)
        """, agent=None)
    t.wait_line("READY")
    tmp = "/proc/%d/root/tmp/probing-%d-" % (t.pid, t.pid)
    old = time.time() - 60   # files younger than 5 s are left alone
    for stem in ("0123456789abcdef", "fedcba9876543210", "00000000000000aa"):
        for ext in ("py", "out"):
            if stem.endswith("aa") and ext == "out":
                continue   # a loader whose report is gone: an orphan too
            with open(tmp + stem + "." + ext, "w") as f:
                f.write("# an orphan\n")
            os.utime(tmp + stem + "." + ext, (old, old))
    live = open(tmp + "fedcba9876543210.out")
    try:
        fcntl.flock(live, fcntl.LOCK_EX)
        r = inject(t.pid)
        assert r.rc == 0 and "through PEP 768" in r.out, r
        assert sorted(os.path.basename(f) for f in glob.glob(tmp + "*")) == [
            "probing-%d-fedcba9876543210.%s" % (t.pid, e) for e in ("out", "py")]
    finally:
        live.close()
        for ext in ("py", "out"):
            os.unlink(tmp + "fedcba9876543210." + ext)
    no_trouble(t)


def start_with_options(python, code, tmp_path, options):
    """A target started as `python OPTIONS script` (spawn() puts its
    arguments after the script)."""
    script = tmp_path / "xtarget.py"
    script.write_text(code)
    out = open(tmp_path / "xtarget.out", "w")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PROBING", None)
    p = subprocess.Popen([python, *options, str(script)], stdout=out,
                         stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path))
    p.args_out = out.name
    return Target(p, str(script))


@pytest.mark.parametrize("how", ["env", "xoption"])
def test_remote_debugging_off_falls_back(spawn, python, tmp_path, how):
    needs_pep768(python)
    if how == "env":
        t = spawn(python, SLEEPER, agent=None, env={"PYTHON_DISABLE_REMOTE_DEBUG": "1"})
        said = "PYTHON_DISABLE_REMOTE_DEBUG is set in its environment"
    else:
        # CPython's option is spelled with hyphens (its documentation
        # says underscores, which it ignores).
        t = start_with_options(python, SLEEPER, tmp_path,
                               ["-X", "disable-remote-debug"])
        said = "it runs with -X disable-remote-debug"
    try:
        t.wait_line("READY")
        r = inject(t.pid)
        assert r.rc == 0, r
        assert ("PEP 768: remote debugging is off in process %d: %s; using ptrace "
                "instead" % (t.pid, said)) in r.err, r
        assert "with ptrace" in r.out.splitlines()[0], r
        assert agent_listening(t.pid)
        r = inject(t.pid, "--via", "pep768")    # reused: nothing to load
        assert r.rc == 0 and "already has a Probing agent" in r.out, r
        no_trouble(t)
    finally:
        t.stop()


def test_off_and_pep768_only_is_refused(spawn, python):
    needs_pep768(python)
    t = spawn(python, SLEEPER, agent=None, env={"PYTHON_DISABLE_REMOTE_DEBUG": "1"})
    t.wait_line("READY")
    r = inject(t.pid, "--via", "pep768")
    assert r.rc == 11 and "remote debugging is off" in r.err, r
    assert not mapped_agents(t.pid) and not leftovers(t.pid)


def test_via_ptrace(spawn, python):
    needs_pep768(python)
    t = spawn(python, SLEEPER, agent=None)
    t.wait_line("READY")
    r = inject(t.pid, env={"PROBING_INJECT_VIA": "ptrace"})
    assert r.rc == 0 and "with ptrace" in r.out.splitlines()[0], r
    assert "PEP 768" not in r.err, r
    no_trouble(t)


def test_before_314_goes_ptrace_without_a_word(spawn, python):
    if version_of(python) >= (3, 14):
        pytest.skip("3.14+ goes the PEP 768 way")
    t = spawn(python, SLEEPER, agent=None)
    t.wait_line("READY")
    r = inject(t.pid)
    assert r.rc == 0 and "with ptrace" in r.out.splitlines()[0], r
    assert "PEP 768" not in r.err, r
    r2 = inject(t.pid, "--via", "pep768")
    assert r2.rc == 0 and "already has a Probing agent" in r2.out, r2


def test_before_314_pep768_only_is_refused(spawn, python):
    if version_of(python) >= (3, 14):
        pytest.skip("3.14+ has PEP 768")
    t = spawn(python, SLEEPER, agent=None)
    t.wait_line("READY")
    r = inject(t.pid, "--via", "pep768")
    assert r.rc == 9, r
    assert "CPython %d.%d has no remote debugging interface" % version_of(python) in r.err, r
    assert not mapped_agents(t.pid)


def test_audit_hook_refusing_is_not_overridden(spawn, python):
    """A program whose audit hook refuses remote debugger scripts: the
    loader never runs, and inject says so rather than going around the
    program's policy with ptrace."""
    needs_pep768(python)
    t = spawn(python, textwrap.dedent("""\
        import sys
        def hook(event, args):
            if "remote_debugger_script" in event:
                raise RuntimeError("no remote scripts here")
        sys.addaudithook(hook)
        """) + SLEEPER, agent=None)
    t.wait_line("READY")
    r = inject(t.pid, env={"PROBING_TIMEOUT": "2000"})
    assert r.rc == 11, r
    assert "took the request" in r.err and "audit hook" in r.err, r
    assert not mapped_agents(t.pid) and not leftovers(t.pid)
    assert t.alive()


FORKS = """\
import os, sys, time
here = os.path.dirname(__file__)
print("READY", flush=True)
while not os.path.exists(os.path.join(here, "fork")):
    time.sleep(0.05)
kid = os.fork()
if kid == 0:
    while True:
        time.sleep(0.05)
os.write(1, b"KID %d\\n" % kid)
while True:
    time.sleep(0.5)
"""


def test_forked_child_gets_its_agent_restarted(spawn, python, tmp_path):
    """A forked child of a process with the agent keeps the library, not
    the agent: the loader calls the mapped library's restart function."""
    needs_pep768(python)
    t = spawn(python, FORKS, agent=None)
    t.wait_line("READY")
    r = inject(t.pid)
    assert r.rc == 0 and "through PEP 768" in r.out, r
    (tmp_path / "fork").write_text("")
    t.wait_line("KID")
    kid = int(t.output().split("KID ")[1].split()[0])
    try:
        r = inject(kid)
        assert r.rc == 0, r
        assert r.out.startswith("restarted the agent in process %d" % kid), r
        assert "through PEP 768" in r.out.splitlines()[0], r
        assert "agent: @probing-%d" % kid in r.out, r
        assert len(mapped_agents(kid)) == 1
        assert agent_listening(t.pid)
    finally:
        os.kill(kid, signal.SIGKILL)


# The last six fields of _Py_DebugOffsets are debugger_support's:
# eval_breaker, remote_debugger_support, remote_debugging_enabled,
# debugger_pending_call, debugger_script_path, debugger_script_path_size.
# sizeof(_Py_DebugOffsets) per version (inject/remote_layout.c computes it
# from the headers; here it is only for the test's own writes, which check
# it against the known script path size first).
DEBUG_OFFSETS_SIZE = {(3, 14): 760, (3, 15): 888}

CORRUPTS = """\
import ctypes, sys
rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
ds = rt + {size} - 48
field = lambda i: ctypes.c_uint64.from_address(ds + 8 * i)
assert ctypes.string_at(rt, 8) == b"xdebugpy" and field(5).value == 512
field({index}).value = {value}
"""


@pytest.mark.parametrize("index,value,said", [
    (5, 1 << 40, "do not hold together"),        # script path size
    (3, 1 << 30, "do not hold together"),        # pending call's offset
    (4, (1 << 64) - 8, "do not hold together"),  # script path's offset
    (2, 1 << 40, "do not hold together"),        # remote_debug's offset
])
def test_hostile_debug_offsets_are_not_trusted(spawn, python, index, value, said):
    """A target whose _Py_DebugOffsets do not hold together (its own
    memory: it may write what it likes there) gets no write from the PEP
    768 way; inject says so and goes the ptrace way."""
    needs_pep768(python)
    size = DEBUG_OFFSETS_SIZE.get(version_of(python))
    if not size:
        pytest.skip("the test knows no _Py_DebugOffsets size for this version")
    t = spawn(python, CORRUPTS.format(size=size, index=index, value=value)
              + SLEEPER, agent=None)
    t.wait_line("READY")
    r = inject(t.pid)
    assert r.rc == 0, r
    assert said in r.err and "using ptrace instead" in r.err, r
    assert "with ptrace" in r.out.splitlines()[0], r
    assert not leftovers(t.pid)
    no_trouble(t)


def test_odd_library_path(spawn, python, tmp_path):
    """The loader names the library as a bytes literal: quotes,
    backslashes, spaces and bytes that are no UTF-8 go through as they are."""
    needs_pep768(python)
    odd = tmp_path / "it's a \\ \"dir\" \xe9t\xe9"
    odd.mkdir()
    lib = os.path.join(os.fsencode(str(odd)), b"libprobing\xff.so")
    with open(agent_lib(python), "rb") as src, open(lib, "wb") as dst:
        dst.write(src.read())
    t = spawn(python, SLEEPER, agent=None)
    t.wait_line("READY")
    r = subprocess.run([CLI, "-t", str(t.pid), "inject", "--library", lib],
                       capture_output=True, timeout=60)   # bytes: lib is no UTF-8
    assert r.returncode == 0 and b"through PEP 768" in r.stdout, r
    assert r.stdout.startswith(b"injected " + lib), r
    assert len(mapped_agents(t.pid)) == 1
    no_trouble(t)
