"""A target holding the GIL in a long C call, and evals stuck in C: the
agent still answers, and names the real cause when it cannot."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import CLI, probing, site_for, wait_for

HOG = """\
import time
def crunch():
    print("HOGGING", flush=True)
    return sum(range(3 * 10**9))     # line 4: C loop, GIL held throughout
time.sleep(0.5)
crunch()
"""


def test_backtrace_without_gil_and_eval_names_holder(spawn, python):
    t = spawn(python, HOG)
    t.wait_agent()
    t.wait_line("HOGGING")
    time.sleep(0.3)
    began = time.time()
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    body = r.json()
    assert body["gil"]["acquired"] is False
    main = [th for th in body["threads"] if th["nativeId"] == t.pid][0]
    assert main["name"] == "MainThread" and main["isMain"]
    assert [(f["func"], f["line"]) for f in main["frames"][:2]] == [("crunch", 4), ("<module>", 6)]
    assert body["gil"]["holderNativeId"] == t.pid
    assert time.time() - began < 10
    r = probing("eval", "1", target=t.pid)
    assert r.rc == 1
    assert "GIL" in r.err and str(t.pid) in r.err
    r = probing("query", "-f", "json",
                "SELECT func, lineno FROM python.backtrace WHERE depth = 0", target=t.pid)
    assert r.rc == 0, r
    assert {"func": "crunch", "lineno": 4} in r.json()
    assert t.alive()


STUCK = """\
import signal, threading, time
ev = threading.Event()
signal.signal(signal.SIGUSR1, lambda *_: ev.set())
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""

STUCK_EVAL = "import __main__; __main__.ev.wait()"
GIL_THREADS = 3  # agent/python/pygil.h: PYGIL_THREADS
CODE_PLACES = 2  # pygil.h PYGIL_CODE_MAX: GIL threads evals may hold
CODE_WORKERS = 2  # server_request.h SERVER_CODE_MAX: workers they may hold


def threads_of(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def stuck_evals(pid, n):
    """n evals blocked in C (Event.wait), as many at once as the agent
    runs; each is interrupted after 100 ms, does not stop, and is given
    up 2 s later."""
    while n > 0:
        procs = [subprocess.Popen([CLI, "-t", str(pid), "eval", "--timeout",
                                   "100", STUCK_EVAL], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for _ in range(min(n, CODE_WORKERS))]
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 1 and "did not stop when interrupted" \
                in err, (p.returncode, out, err)
        n -= len(procs)


def test_evals_stuck_in_c_never_starve_the_agent(spawn, python):
    """Evals blocked in C keep their GIL thread until they return, but
    they hold at most CODE_PLACES of the agent's Python threads: past
    that, evals are told the real cause (earlier evaluates still running,
    named; not a GIL held by the main thread), and the agent's own work
    (backtraces, memory, queries) goes on.  When the stuck calls end, the
    places come back and the extra threads leave."""
    t = spawn(python, STUCK)
    t.wait_agent()
    t.wait_line("READY")
    r = probing("eval", "1", target=t.pid)
    assert r.rc == 0, r
    base = threads_of(t.pid)
    stuck_evals(t.pid, CODE_PLACES)
    r = probing("eval", "6 * 7", target=t.pid)
    assert r.rc == 1, r
    assert "%d calls that run code of a client's choosing (evaluate) have " \
        "not ended" % CODE_PLACES in r.err, r
    assert STUCK_EVAL in r.err, r
    assert "GIL is held" not in r.err, r
    # The agent's own work has its threads.
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and "warning" not in r.err, r
    r = probing("memory", "-f", "json", target=t.pid)
    assert r.rc == 0 and r.json()["python"] is not None, r
    # What needs no Python thread still works.
    r = probing("query", "SELECT count(*) AS n FROM python.threads",
                target=t.pid)
    assert r.rc == 0, r
    # The stuck calls end: the agent is whole again, its extra threads go.
    os.kill(t.pid, signal.SIGUSR1)
    wait_for(lambda: probing("eval", "6 * 7", target=t.pid).rc == 0, 30,
             "a free Python thread")
    wait_for(lambda: threads_of(t.pid) <= base, 30,
             "the extra threads to leave (%d, was %d)"
             % (threads_of(t.pid), base))
    assert t.alive()


# The agent started after the layout was changed; then a thread that
# holds the GIL in C when told ("go"), read without it.
STARTED_THEN_HOG = """\
import probing; probing.init()
def crunch():
    print("HOGGING", flush=True)
    return sum(range(3 * 10**9))     # C loop, GIL held throughout
def wait():
    while True:
        if open(__file__ + ".go").read() == "go":
            crunch()
        time.sleep(0.05)
open(__file__ + ".go", "w").write("")
print("READY", flush=True)
wait()
"""


# 3.13 publishes the offsets debuggers need (_PyRuntime.debug_offsets);
# the agent compares those it uses with its own at start-up.  Moving one
# (thread_state.next: where it lies in the struct, by version, below)
# makes this interpreter
# look like one whose layout differs from the agent's headers: the
# check must turn GIL-free reading off and say why everywhere it is
# needed, while everything that reads with the GIL goes on working.
SKEWED = """\
import ctypes, time
rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
assert ctypes.string_at(rt, 8) == b"xdebugpy"
nxt = ctypes.c_uint64.from_address(rt + NEXT_AT)
nxt.value += 8
""" + STARTED_THEN_HOG


# offsetof(_Py_DebugOffsets, thread_state.next), from each version's
# internal/pycore_debug_offsets.h (pycore_runtime.h in 3.13).
NEXT_AT = {(3, 13): 168, (3, 14): 192, (3, 15): 192}


def test_a_layout_mismatch_turns_the_reader_off_and_says_so(spawn, python,
                                                            tmp_path):
    from conftest import version_of
    if version_of(python) < (3, 13):
        pytest.skip("_PyRuntime.debug_offsets is 3.13's")
    if version_of(python) not in NEXT_AT:
        pytest.skip("where thread_state.next lies in %d.%d's "
                    "_Py_DebugOffsets: not known to this test"
                    % version_of(python))
    from test_crash import crash_env, the_report, wait_exit
    env = crash_env(tmp_path, PYTHONPATH=site_for(python))
    t = spawn(python, SKEWED.replace("NEXT_AT", str(NEXT_AT[version_of(python)])),
              agent=None, env=env)
    t.wait_line("READY")
    t.wait_agent()
    # Read where it says (the reader follows a published layout), the
    # list is not one: off, with the move named.
    why = "thread_state.next at"
    wait_for(lambda: why in probing("config", target=t.pid).out, 30, "the check")
    r = probing("config", target=t.pid)
    assert re.search(r"agent\.stack_reader\s+reading stacks without the GIL is off", r.out), r
    # With the GIL: as ever.
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0 and r.json()["gil"]["acquired"] is True, r
    main = [th for th in r.json()["threads"] if th["nativeId"] == t.pid][0]
    assert main["frames"][0]["func"] == "wait", main
    assert probing("eval", "6*7", target=t.pid).out.strip() == "42"
    # The sampler needs the reader: it says why it cannot start.
    r = probing("perf", "--start", target=t.pid)
    assert r.rc != 0 and why in r.err, r
    # Without the GIL: the reason, not a wrong stack.
    open(t.script + ".go", "w").write("go")
    t.wait_line("HOGGING")
    time.sleep(0.3)
    r = probing("backtrace", target=t.pid)
    assert r.rc != 0 and why in r.err, r
    # The hang watchdog needs it too.
    r = probing("config", "hang.timeout=30s", target=t.pid)
    assert r.rc != 0 and why in r.err, r
    assert t.alive()
    # A crash report has the native stack, and says why no Python one.
    os.kill(t.pid, signal.SIGSEGV)
    assert wait_exit(t) == -signal.SIGSEGV
    path, rep = the_report(tmp_path, t.pid)
    first = rep["threads"][0]
    assert first["tid"] == t.pid and "crashed" in first["flags"], first
    assert first["python"] == [] and why in " ".join(first["pythonNotes"]), first
    # builtin_sum is static: named only where the interpreter kept its
    # symbol table (not Debian's stripped /usr/bin/python3.X); there, the
    # interpreter's exported functions under it.
    from conftest import frame_object, has_symtab
    native = first["native"]
    shown = " ".join(f.get("func", "") + "@" + f.get("object", "") for f in native)
    evals = [f for f in native if f.get("func", "").startswith("PyEval_EvalCode+")]
    assert evals, shown
    if has_symtab(frame_object(evals[0])):
        assert any(f.get("func", "").startswith("builtin_sum+") for f in native), shown
    else:
        assert any(f.get("func", "").startswith("_PyEval_EvalFrameDefault+")
                   for f in native), shown


# A published offset that differs from the headers, both ways.
# Followed and right: runtime_state.interpreters_head said to be where
# _PyRuntime.interpreters.main is (the next word; with one interpreter
# the two hold the same pointer, found by value in _PyRuntime as
# PyInterpreterState_Main() gives it, and its offset by value in
# _Py_DebugOffsets): the reader lists threads through the moved place
# from start-up on, the check agrees, stacks are read without the GIL.
# Followed and wrong: code_object.qualname said to be where co_name is
# (their triple filename, name, qualname found by value): the reader
# reads a method's frame by its name where the C API has its qualified
# name — the check runs inside a method of its own — and turns the
# reader off, naming both.
LAYOUT = """\
import ctypes, sys, time
rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
assert ctypes.string_at(rt, 8) == b"xdebugpy"
d = ctypes.cast(rt, ctypes.POINTER(ctypes.c_uint64))
def one(found, what):
    assert len(found) == 1, (what, found)
    return found[0]
if sys.argv[1] == "interpreters_head":
    ctypes.pythonapi.PyInterpreterState_Main.restype = ctypes.c_void_p
    main = ctypes.pythonapi.PyInterpreterState_Main()
    head = 8 * one([i for i in range(4096) if d[i] == main == d[i + 1]],
                   "head and main in _PyRuntime")
    i = one([i for i in range(2, 64) if d[i] == head], "its offset")
    d[i] = head + 8
else:
    class Some:
        def method(self):
            pass
    co = Some.method.__code__
    words = ctypes.cast(id(co), ctypes.POINTER(ctypes.c_uint64))
    def offset(obj):
        return 8 * [words[i] for i in range(48)].index(id(obj))
    triple = (offset(co.co_filename), offset(co.co_name),
              offset(co.co_qualname))
    i = one([i for i in range(1, 400) if (d[i], d[i + 1], d[i + 2]) == triple],
            "filename, name, qualname")
    d[i + 2] = triple[1]
""" + STARTED_THEN_HOG


def reader_state(pid):
    r = probing("config", "-f", "json", target=pid)
    return [x for x in r.json() if x["name"] == "agent.stack_reader"][0]["value"]


def layout_moved(spawn, python, field):
    """A target whose published layout moves field (LAYOUT), its agent
    up."""
    from conftest import version_of
    if version_of(python) < (3, 13):
        pytest.skip("_PyRuntime.debug_offsets is 3.13's")
    t = spawn(python, LAYOUT, agent=None, args=[field],
              env={"PYTHONPATH": site_for(python)})
    t.wait_line("READY")
    t.wait_agent()
    return t


def test_a_published_layout_that_differs_is_followed(spawn, python):
    t = layout_moved(spawn, python, "interpreters_head")
    wait_for(lambda: reader_state(t.pid).startswith("ok"), 30, "the check")
    state = reader_state(t.pid)
    assert state.startswith("ok: read at this interpreter's own layout") and \
        "runtime_state.interpreters_head at" in state, state
    open(t.script + ".go", "w").write("go")
    t.wait_line("HOGGING")
    time.sleep(0.3)
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0 and r.json()["gil"]["acquired"] is False, r
    main = [th for th in r.json()["threads"] if th["nativeId"] == t.pid][0]
    assert [f["func"] for f in main["frames"][:3]] == \
        ["crunch", "wait", "<module>"], main
    assert t.alive()


def test_a_published_layout_that_is_wrong_is_caught(spawn, python):
    t = layout_moved(spawn, python, "qualname")
    wait_for(lambda: "off" in reader_state(t.pid), 30, "the check")
    state = reader_state(t.pid)
    assert state.startswith("reading stacks without the GIL is off") and \
        "read at the places it publishes: code_object.qualname at" in \
        state, state
    # The whole reason, in the log (a setting's value is cut).
    wait_for(lambda: "read as run (" in t.output(), 10, "the log line")
    line = [x for x in t.output().splitlines() if "read as run (" in x][0]
    assert "ProbingSelfCheck.run (<probing self check>:3) read as run " \
        "(<probing self check>:3)" in line, line
    r = probing("perf", "--start", target=t.pid)
    assert r.rc != 0 and "code_object.qualname at" in r.err, r
    assert t.alive()
