"""probing backtrace / python.backtrace against real targets."""
import json
import subprocess

from conftest import CLI, probing

# A target whose main thread waits inside outer() -> inner(), and a worker
# thread named "loader" inside load_batches().  READY is printed once both
# are in place.  Line numbers below are those of this text.
NESTED = """\
import threading, time

def inner(depth_marker):
    hidden = {"k": [1, 2, 3]}
    while True:
        time.sleep(0.01)          # line 6

def outer():
    answer = 42
    inner("deep")                 # line 10

def load_batches(ev):
    batch = "b" * 3
    ev.wait()                     # line 14

ev = threading.Event()
t = threading.Thread(target=load_batches, args=(ev,), name="loader", daemon=True)
t.start()
print("READY", flush=True)
outer()
"""


def start(spawn, python):
    t = spawn(python, NESTED)
    t.wait_line("READY")
    t.wait_agent()
    return t


def test_backtrace_json_names_funcs_lines_and_threads(spawn, python):
    t = start(spawn, python)
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    body = r.json()
    assert body["gil"]["acquired"] is True
    threads = {th["name"]: th for th in body["threads"]}
    assert "MainThread" in threads and "loader" in threads
    main = threads["MainThread"]
    assert main["isMain"] is True
    frames = [(f["func"], f["line"]) for f in main["frames"]]
    # innermost first
    assert frames[0] == ("inner", 6)
    assert frames[1] == ("outer", 10)
    assert frames[2][0] == "<module>"
    assert main["frames"][0]["file"] == t.script
    loader = [(f["func"], f["line"]) for f in threads["loader"]["frames"]]
    assert ("load_batches", 14) in loader
    assert threads["loader"]["daemon"] is True
    assert t.alive()


def test_backtrace_locals(spawn, python):
    t = start(spawn, python)
    r = probing("backtrace", "--locals", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    main = [th for th in r.json()["threads"] if th["isMain"]][0]
    inner = main["frames"][0]
    locals_ = {v["name"]: v for v in inner["locals"]}
    assert locals_["depth_marker"]["value"] == "'deep'"
    assert locals_["hidden"]["value"] == "{'k': [1, 2, 3]}"
    assert locals_["hidden"]["type"] == "dict"
    outer = {v["name"]: v["value"] for v in main["frames"][1]["locals"]}
    assert outer["answer"] == "42"


def test_backtrace_text_output(spawn, python):
    t = start(spawn, python)
    r = probing("bt", target=t.pid)
    assert r.rc == 0, r
    assert "MainThread" in r.out and "loader" in r.out
    assert "inner" in r.out and "%s:6" % t.script in r.out
    assert "outer" in r.out and "%s:10" % t.script in r.out


def test_python_backtrace_table(spawn, python):
    t = start(spawn, python)
    r = probing("query", "-f", "json",
                "SELECT func, file, lineno FROM python.backtrace "
                "WHERE thread_name = 'MainThread' ORDER BY depth LIMIT 2",
                target=t.pid)
    assert r.rc == 0, r
    rows = r.json()
    assert rows == [
        {"func": "inner", "file": t.script, "lineno": 6},
        {"func": "outer", "file": t.script, "lineno": 10},
    ]


def test_python_threads_table(spawn, python):
    t = start(spawn, python)
    r = probing("query", "-f", "json",
                "SELECT name, daemon, is_main FROM python.threads ORDER BY name",
                target=t.pid)
    assert r.rc == 0, r
    rows = r.json()
    assert {"name": "MainThread", "daemon": 0, "is_main": 1} in rows
    assert {"name": "loader", "daemon": 1, "is_main": 0} in rows
    # the agent's own threads are not the target's
    assert len(rows) == 2


def test_locals_repr_that_raises_or_is_huge(spawn, python):
    t = spawn(python, """\
import time
class Bad:
    def __repr__(self):
        raise ValueError("nope")
def f():
    bad = Bad()
    big = "x" * 100000
    print("READY", flush=True)
    while True:
        time.sleep(0.01)
f()
""")
    t.wait_line("READY")
    t.wait_agent()
    r = probing("backtrace", "--locals", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    main = [th for th in r.json()["threads"] if th["isMain"]][0]
    loc = {v["name"]: v["value"] for v in main["frames"][0]["locals"]}
    assert "repr failed" in loc["bad"] and "ValueError" in loc["bad"]
    assert len(loc["big"]) <= 210
    assert t.alive()


def test_stack_trace_of_thread_via_dap(spawn, python):
    """The standard threads + stackTrace requests, through the `dap` bridge."""
    t = start(spawn, python)
    msgs = [
        {"seq": 1, "type": "request", "command": "initialize", "arguments": {"adapterID": "probing"}},
        {"seq": 2, "type": "request", "command": "threads"},
    ]
    rc, out = dap_bridge(t.pid, msgs)
    assert rc == 0, out
    replies = _parse(out)
    threads = [m for m in replies if m.get("command") == "threads"][0]
    assert threads["success"]
    names = {th["name"] for th in threads["body"]["threads"]}
    assert {"MainThread", "loader"} <= names
    main_id = [th["id"] for th in threads["body"]["threads"] if th["name"] == "MainThread"][0]
    msgs = [
        {"seq": 1, "type": "request", "command": "stackTrace", "arguments": {"threadId": main_id, "levels": 2}},
    ]
    rc, out = dap_bridge(t.pid, msgs)
    st = [m for m in _parse(out) if m.get("command") == "stackTrace"][0]
    assert st["success"], st
    frames = st["body"]["stackFrames"]
    assert [(f["name"], f["line"]) for f in frames] == [("inner", 6), ("outer", 10)]
    assert st["body"]["totalFrames"] >= 3


def dap_bridge(pid, msgs):
    """Pipes framed requests through `probing -t PID dap`; bytes out."""
    cp = subprocess.run([CLI, "-t", str(pid), "dap"], input=_frames(msgs).encode(),
                        capture_output=True, timeout=30)
    return cp.returncode, cp.stdout.decode()


def _frames(msgs):
    out = ""
    for m in msgs:
        body = json.dumps(m)
        out += "Content-Length: %d\r\n\r\n%s" % (len(body.encode()), body)
    return out


def _parse(text):
    msgs = []
    data = text.encode()
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        n = int(head.split(b":")[1])
        msgs.append(json.loads(rest[:n]))
        data = rest[n:]
    return msgs


def test_locals_repr_that_hangs_does_not_hang_the_reply(spawn, python):
    import time as _time
    t = spawn(python, """\
import time
class Spin:
    def __repr__(self):
        while True:
            pass
class Nap:
    def __repr__(self):
        time.sleep(30)
        return "nap"
def f():
    spin = Spin()
    plain = 7
    print("READY", flush=True)
    while True:
        time.sleep(0.01)
def g():
    nap = Nap()
    f()
g()
""")
    t.wait_line("READY")
    t.wait_agent()
    began = _time.time()
    r = probing("backtrace", "--locals", "-f", "json", target=t.pid)
    took = _time.time() - began
    assert r.rc == 0, r
    assert took < 9, took
    main = [th for th in r.json()["threads"] if th["isMain"]][0]
    assert [f["func"] for f in main["frames"][:3]] == ["f", "g", "<module>"]
    assert t.alive()
    # afterwards the agent still answers promptly
    r = probing("eval", "1 + 1", target=t.pid)
    assert r.out.strip() == "2", r


MULTILINE = """\
import time
class M:
    def __repr__(self):
        return "M(\\n  a=1,\\n  b=2\\n)"
def wait():
    multi = M()
    text = "one\\ntwo\\tthree"
    print("READY", flush=True)
    while True:
        time.sleep(0.05)
wait()
"""


def test_backtrace_text_keeps_a_reprs_lines_off_a_terminal(spawn, python):
    """Piped or in an editor's document, a repr of several lines (a module,
    a tensor) is printed as lines under its first one, not with literal
    \\n; a str's repr has its escapes as Python writes them."""
    t = spawn(python, MULTILINE)
    t.wait_line("READY")
    t.wait_agent()
    r = probing("backtrace", "--locals", target=t.pid)
    assert r.rc == 0, r
    assert ("        multi = M(\n"
            "                  a=1,\n"
            "                  b=2\n"
            "                )\n") in r.out, r.out
    assert "        text = 'one\\ntwo\\tthree'\n" in r.out, r.out


def test_native_frames_of_every_thread_or_the_main_one(spawn, python):
    """probing/backtrace {native}: true gives every thread's native stack,
    "main" the main thread's only (the others are not signalled); the
    frames are named (the sleeping system call in libc)."""
    t = start(spawn, python)

    def backtrace(native):
        rc, out = dap_bridge(t.pid, [
            {"seq": 1, "type": "request", "command": "initialize",
             "arguments": {"adapterID": "probing"}},
            {"seq": 2, "type": "request", "command": "probing/backtrace",
             "arguments": {"native": native}}])
        assert rc == 0, out
        return [m for m in _parse(out)
                if m.get("command") == "probing/backtrace"][0]

    every = backtrace(True)
    assert every["success"], every
    threads = every["body"]["threads"]
    assert len(threads) >= 2
    for th in threads:
        frames = th.get("nativeFrames")
        assert frames, th
        assert all({"func", "object", "offset"} <= set(f) for f in frames)
    main = [th for th in threads if th["isMain"]][0]
    assert any("sleep" in f["func"] or "select" in f["func"]
               for f in main["nativeFrames"][:4]), main["nativeFrames"][:6]
    only = backtrace("main")
    assert only["success"], only
    assert [bool(th.get("nativeFrames")) for th in only["body"]["threads"]] \
        == [th["isMain"] for th in only["body"]["threads"]], only
    bad = backtrace("all")
    assert not bad["success"] and "'native' must be" in bad["message"], bad
    assert t.alive()


# C threads that call into Python (ctypes callbacks: PyGILState_Ensure in a
# thread Python did not start) make their thread states without the GIL;
# on 3.11 a walk of the thread states could meet one listed before its
# initialisation ended (its C frame still NULL) and crash the process.
GIL_ENSURE = """\
import ctypes, threading, time
libc = ctypes.CDLL(None)
CB = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

@CB
def body(arg):
    return None

create = libc.pthread_create
create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, CB,
                   ctypes.c_void_p]
join = libc.pthread_join
join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
made = [0]

def spawner():
    while True:
        ts = [ctypes.c_ulong() for _ in range(8)]
        for t in ts:
            create(ctypes.byref(t), None, body, None)
        for t in ts:
            join(t.value, None)
        made[0] += 8

for _ in range(2):
    threading.Thread(target=spawner, name="spawner", daemon=True).start()
print("READY", flush=True)
while True:
    time.sleep(0.5)
    print("MADE", made[0], flush=True)
"""


def test_backtraces_while_c_threads_make_thread_states(spawn, python):
    # Unfixed, 3.11 died within 400 backtraces in every try (rc -11).
    t = spawn(python, GIL_ENSURE)
    t.wait_line("READY")
    t.wait_agent()
    t.wait_line("MADE")
    for i in range(400):
        r = probing("backtrace", "-f", "json", target=t.pid)
        assert r.rc == 0, (i, r, t.output()[-500:])
        assert json.loads(r.out)["threads"], (i, r.out[:500])
    assert t.alive(), t.output()[-500:]
    made = [int(l.split()[1]) for l in t.output().splitlines()
            if l.startswith("MADE")]
    assert made and made[-1] > 100, made


# The main thread asleep in C (time.sleep) inside key(), which sorted()
# (C) calls from caller(): Python, C, Python, C on one stack.  A thread
# that blocks the native signal (SIGURG) cannot be asked for its native
# stack.
MIXED = """\
import os, signal, threading, time

def key(v):
    if v == 3:
        time.sleep(3600)
    return v

def caller():
    return sorted(range(5), key=key)

def deaf():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG})
    while True:
        time.sleep(0.05)

threading.Thread(target=deaf, name="deaf", daemon=True).start()
print("READY", flush=True)
caller()
"""


def mixed_of(r, name):
    th = [t for t in r.json()["threads"] if t["name"] == name][0]
    return th, th.get("mixedFrames", [])


def test_native_backtrace_merges_python_frames_where_they_run(spawn,
                                                              python):
    """`backtrace --native`: every thread's C frames with its Python
    frames where the interpreter runs them, innermost first (py-spy's
    dump --native): the sleep's system call in libc, then key(), then
    sorted()'s C frames, then caller() and <module>, then the
    interpreter's main; with --locals, key's v; a thread that blocks the
    signal keeps its Python frames and says why it has no native ones."""
    t = spawn(python, MIXED)
    t.wait_line("READY")
    t.wait_agent()
    r = probing("backtrace", "--native", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    main, mixed = mixed_of(r, "MainThread")
    assert main["mixedExact"] is True, main
    kinds = [f["kind"] for f in mixed]
    py = [(i, f["func"]) for i, f in enumerate(mixed) if f["kind"] == "python"]
    assert [f for _, f in py] == ["key", "caller", "<module>"], py
    (k, _), (c, _), (m, _) = py
    # Innermost: the C library's sleep (select() before 3.11; newer
    # libcs wrap the system call in functions of their own, unnamed),
    # no Python frame before key.
    assert any("sleep" in f["func"] or "select" in f["func"]
               for f in mixed[:k]), mixed[:k + 1]
    # sorted() runs key from C: native frames between key and caller;
    # and the interpreter's own below <module>.
    assert "native" in kinds[k + 1:c], mixed[k:c + 1]
    assert kinds[-1] == "native" and m < len(mixed) - 1, mixed[m:]
    line = [f["line"] for f in mixed if f["func"] == "key"][0]
    assert line == 5, mixed
    # The text: the same order, one frame a line, locals under key.
    r = probing("backtrace", "--native", "--locals", target=t.pid)
    assert r.rc == 0, r
    block = r.out.split('"MainThread"', 1)[1].split("\n\n")[0]
    lines = block.splitlines()[1:]
    at = {name: next(i for i, l in enumerate(lines)
                     if (" %s (" % name) in l and ".py:" in l)
          for name in ("key", "caller", "<module>")}
    assert at["key"] < at["caller"] < at["<module>"], block
    assert "        v = 3" in lines[at["key"] + 1], block
    assert any("sleep" in l or "select" in l for l in lines[:at["key"]]), \
        block
    # The deaf thread: its Python frames, and why no native ones.
    deaf = r.out.split('"deaf"', 1)[1].split("\n\n")[0]
    assert "(no native frames: the thread did not answer (it blocks " \
        "signals))" in deaf, deaf
    assert " deaf (" in deaf, deaf
    # debug --dump --native is the same view.
    r = probing("debug", "--dump", "--native", target=t.pid)
    assert r.rc == 0 and "        v = 3" in r.out and " key (" in r.out, r
    assert t.alive()
