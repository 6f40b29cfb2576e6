"""The debugger through the real CLI: `probing debug` (state, --dump,
--pause for an editor, --resume) and the `probing dap` bridge an editor
launches, including the bridge killed while the target is paused."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import CLI, wait_for

LOOP = """
import threading, time
i = 0

def tick():
    global i
    i += 1  # @tick

def side():
    while True:
        time.sleep(0.01)

threading.Thread(target=side, name="side", daemon=True).start()
# Blocked in C for good: a pause never stops it.
threading.Thread(target=threading.Event().wait, name="blocked", daemon=True).start()
print("ready", flush=True)
while True:
    tick()
    time.sleep(0.005)
"""


def line_of(t, marker):
    with open(t.script) as f:
        for n, text in enumerate(f, 1):
            if marker in text:
                return n
    raise AssertionError(marker)


def counter(cli, t):
    r = cli("eval", "i", target=t.pid)
    assert r.rc == 0, r
    return int(r.out.strip())


def runs(cli, t):
    a = counter(cli, t)
    time.sleep(0.3)
    return counter(cli, t) > a


def status(cli, t):
    r = cli("debug", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    return r.json()


def start(spawn, python):
    t = spawn(python, LOOP)
    t.wait_agent()
    t.wait_line("ready")
    return t


def thread_ids(cli, t):
    """name -> native id of the target's Python threads."""
    r = cli("query", "-f", "json", "SELECT name, native_id FROM python.threads", target=t.pid)
    assert r.rc == 0, r
    return {row["name"]: row["native_id"] for row in r.json()}


def pause_report(out):
    """The lines of `debug --pause` about threads: id -> line."""
    lines = {}
    for line in out.splitlines():
        if line.startswith(("Paused:", "Held:", "Running:")):
            lines[int(line.split()[2])] = line
    return lines


def wait_paused(cli, t, tid):
    wait_for(lambda: tid in status(cli, t)["pausedThreads"], 60, "thread %d to pause" % tid)


def test_pause_for_an_editor_then_resume(python, spawn, cli):
    t = start(spawn, python)
    ids = thread_ids(cli, t)
    r = cli("debug", "--pause", "--wait", "60", target=t.pid)
    assert r.rc == 0, r
    # Every thread is reported, paused or held in C (where).  The main
    # thread and "side" run Python between short sleeps: they stop within
    # moments, but on a loaded machine maybe not within the CLI's wait for
    # the stop, and then they are honestly reported held (or running).
    report = pause_report(r.out)
    assert sorted(report) == sorted(ids.values()), r.out
    for name in ("MainThread", "side"):
        line = report[ids[name]]
        assert line.startswith(("Running:", "Held:")) or (
            t.script in line and '"%s"' % name in line), r.out
    # "blocked" waits in C for good: held where it waits, in threading.
    line = report[ids["blocked"]]
    assert line.startswith('Held:    thread %d "blocked" at ' % ids["blocked"]), r.out
    assert "threading.py:" in line, r.out
    assert line.endswith(", in C: it stops when it returns to Python"), r.out
    config = json.loads(r.out[r.out.index("{"):r.out.index("}") + 1])
    assert config == {"type": "probing", "request": "attach",
                      "name": "Attach to process %d" % t.pid, "processId": t.pid}
    wait_paused(cli, t, t.pid)
    st = status(cli, t)
    assert st["held"] is True and st["attached"] is False
    assert ids["blocked"] not in st["pausedThreads"]
    assert not runs(cli, t), "held paused after the CLI left"
    r = cli("debug", "--resume", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "resumed", r
    wait_for(lambda: runs(cli, t), 30, "the loop to run again")
    st = status(cli, t)
    assert st["held"] is False and st["pausedThreads"] == [] and st["hook"] is False


def test_pause_of_a_target_in_c_holds_it(python, spawn, cli, tmp_path):
    """No thread reaches a Python line: the pause is a stop all the same,
    the thread held where it waits (the CLI says where); it stops for good
    when it comes back to Python."""
    go = tmp_path / "go"
    os.mkfifo(go)
    t = spawn(python, """
import time
print("ready", flush=True)
open(%r).read()  # blocked in C until the test writes
i = 0
while True:
    i += 1
    time.sleep(0.005)
""" % str(go))
    t.wait_agent()
    t.wait_line("ready")
    r = cli("debug", "--pause", "--wait", "120", target=t.pid)
    assert r.rc == 0, r
    assert "Paused in C: no thread is at a Python line." in r.out, r.out
    assert pause_report(r.out) == {
        t.pid: 'Held:    thread %d "MainThread" at %s:%d (<module>), in C: it stops '
               'when it returns to Python' % (t.pid, t.script, 4)}, r.out
    st = status(cli, t)
    assert st["held"] is True and st["pausedThreads"] == [], st
    with open(go, "w") as f:
        f.write("x")
    wait_paused(cli, t, t.pid)  # at `i = 0`, its next line
    r = cli("debug", "--resume", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: cli("eval", "i", target=t.pid).out.strip() not in ("", "0"), 30, "the loop to run")


def test_held_stop_resumes_by_itself(python, spawn, cli):
    t = start(spawn, python)
    r = cli("debug", "--pause", "--wait", "1", target=t.pid)
    assert r.rc == 0, r
    # Whether the stop is still held when the next command runs depends on
    # the machine's load; that it ends by itself does not.
    wait_for(lambda: runs(cli, t), 30, "the held stop to time out")
    st = status(cli, t)
    assert st["attached"] is False and st["held"] is False and st["pausedThreads"] == []


def test_pause_with_address_prints_host_and_port(python, spawn, cli):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t = start(spawn, python)
    r = cli("debug", "--pause", "--address", "127.0.0.1:%d" % port, "--wait", "60", target=t.pid)
    assert r.rc == 0, r
    config = json.loads(r.out[r.out.index("{"):r.out.index("}") + 1])
    assert config["host"] == "127.0.0.1" and config["port"] == port, r.out
    # An editor attaching by host/port takes the stop over.
    d = Bridge(["127.0.0.1:%d" % port])
    d.request("initialize", {"adapterID": "probing"})
    d.request("attach", {})
    d.request("configurationDone")
    ev = d.event("stopped")
    assert ev["body"]["reason"] == "pause", ev
    d.request("continue", {})
    wait_for(lambda: runs(cli, t), 10, "the loop to run again")
    d.close()


def test_dump_shows_locals(python, spawn, cli):
    t = start(spawn, python)
    r = cli("debug", "--dump", target=t.pid)
    assert r.rc == 0, r
    assert "MainThread" in r.out and "i = " in r.out, r.out


def test_usage_errors(python, spawn, cli):
    t = start(spawn, python)
    assert cli("debug", "--pause", "--resume", target=t.pid).rc == 2
    assert cli("debug", "--wait", "5", target=t.pid).rc == 2
    assert cli("debug", "--pause", "--wait", "0", target=t.pid).rc == 2


class Bridge:
    """An editor's view: `probing -t TARGET dap` on pipes."""

    def __init__(self, target_args):
        self.p = subprocess.Popen([CLI, "-t"] + target_args + ["dap"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.seq = 0
        self.pending = []

    @classmethod
    def attached(cls, pid, **attach):
        """A bridge to pid, initialized and attached (attach's arguments:
        redirectOutput=True, ...)."""
        d = cls([str(pid)])
        d.request("initialize", {"adapterID": "probing"})
        d.request("attach", attach)
        return d

    def send(self, command, args=None):
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": command,
                           "arguments": args or {}}).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.p.stdin.flush()
        return self.seq

    def read(self):
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            c = self.p.stdout.read(1)
            if not c:
                raise AssertionError("bridge closed: " + self.p.stderr.read().decode())
            head += c
        n = int(head.split(b":")[1])
        return json.loads(self.p.stdout.read(n))

    def wait(self, pred):
        for i, m in enumerate(self.pending):
            if pred(m):
                return self.pending.pop(i)
        while True:
            m = self.read()
            if pred(m):
                return m
            self.pending.append(m)

    def request(self, command, args=None):
        seq = self.send(command, args)
        r = self.wait(lambda m: m["type"] == "response" and m["request_seq"] == seq)
        assert r["success"], r
        return r

    def event(self, name):
        return self.wait(lambda m: m["type"] == "event" and m["event"] == name)

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=10)


def test_bridge_killed_while_paused_resumes_the_target(python, spawn, cli):
    t = start(spawn, python)
    d = Bridge.attached(t.pid)
    d.event("initialized")
    r = d.request("setBreakpoints", {"source": {"path": t.script},
                                     "breakpoints": [{"line": line_of(t, "# @tick")}]})
    assert r["body"]["breakpoints"][0]["verified"] is True
    d.request("setExceptionBreakpoints", {"filters": ["raised", "uncaught"]})
    d.request("configurationDone")
    ev = d.event("stopped")
    assert ev["body"]["reason"] == "breakpoint"
    st = status(cli, t)
    assert st["attached"] and st["hook"] and t.pid in st["pausedThreads"]
    assert sorted(st["exceptionFilters"]) == ["raised", "uncaught"]
    # The editor dies without a word.
    d.p.send_signal(signal.SIGKILL)
    d.p.wait(timeout=10)
    wait_for(lambda: runs(cli, t), 10, "the target to run again")
    st = status(cli, t)
    assert st == {"attached": False, "held": False, "stopped": False, "hook": False,
                  "pausedThreads": [], "heldThreads": [], "exceptionFilters": []}, st
    # threading's default hook is _thread's (threading.__excepthook__ from
    # 3.10 is the same object).
    r = cli("eval", "import sys, threading, _thread; [sys.gettrace(), sys.excepthook is sys.__excepthook__,"
            " threading.excepthook is _thread._excepthook]", target=t.pid)
    assert r.out.strip() == "[None, True, True]", r
    assert t.alive()


def test_clean_disconnect_and_second_debugger(python, spawn, cli):
    t = start(spawn, python)
    d = Bridge.attached(t.pid)
    d.request("pause", {"threadId": t.pid})
    d.event("stopped")
    # A second debugger is refused; the CLI still answers.
    r = cli("debug", "--pause", target=t.pid)
    assert r.rc == 1 and "another debugger is attached" in r.err, r
    assert cli("backtrace", target=t.pid).rc == 0
    d.request("disconnect", {})
    d.close()
    wait_for(lambda: runs(cli, t), 10, "the target to run again")
    assert status(cli, t)["attached"] is False


def test_no_hook_until_a_breakpoint_file_is_loaded(python, spawn, cli, tmp_path):
    """A breakpoint in a file the target has not loaded costs nothing: no
    frame-evaluation hook until the file's code is about to run."""
    t = start(spawn, python)
    other = tmp_path / "elsewhere.py"
    other.write_text("def f():\n    return 42\n")
    d = Bridge.attached(t.pid)
    r = d.request("setBreakpoints", {"source": {"path": str(other)}, "breakpoints": [{"line": 2}]})
    bp = r["body"]["breakpoints"][0]
    assert bp["verified"] is False and "not loaded yet" in bp["message"], bp
    d.request("configurationDone")
    assert status(cli, t)["hook"] is False
    # Loading it (an import runs its code object) installs the hook and
    # verifies the breakpoint; calling the function stops there.
    cli("eval", "import sys; sys.path.insert(0, %r); import elsewhere" % str(tmp_path), target=t.pid)
    ev = d.event("breakpoint")
    assert ev["body"]["breakpoint"]["verified"] is True
    assert status(cli, t)["hook"] is True
    d.request("setBreakpoints", {"source": {"path": str(other)}, "breakpoints": []})
    assert status(cli, t)["hook"] is False
    d.close()


CHATTY = """
import logging, os, sys, time
log = logging.getLogger("chatty")
log.addHandler(logging.StreamHandler())  # holds sys.stderr from now on
n = 0
print("ready", flush=True)
while True:
    n += 1
    print("line", n, flush=True)
    log.warning("warn %d", n)
    if os.path.exists("flood"):
        os.unlink("flood")
        for _ in range(100):
            sys.stdout.write("x" * 1000000)
        sys.stdout.write("done\\n")
        sys.stdout.flush()
    time.sleep(0.02)
"""


def residue(cli, t):
    # (sys.stdout is the evaluation's own while it runs.)
    r = cli("eval", "[('write' in vars(s)) for s in (sys.__stdout__, sys.__stderr__)]",
            target=t.pid)
    assert r.rc == 0, r
    return r.out.strip()


def test_redirect_output_forwards_and_leaves_no_residue(python, spawn, cli):
    t = spawn(python, CHATTY)
    t.wait_agent()
    t.wait_line("ready")
    # Without redirectOutput nothing is wrapped.
    d = Bridge.attached(t.pid)
    assert residue(cli, t) == "[False, False]"
    d.request("disconnect", {})
    d.close()
    d = Bridge.attached(t.pid, redirectOutput=True)
    d.request("configurationDone")
    out = d.wait(lambda m: m.get("event") == "output" and m["body"]["category"] == "stdout")
    first = int(out["body"]["output"].split("line ")[1].split()[0])
    err = d.wait(lambda m: m.get("event") == "output" and m["body"]["category"] == "stderr")
    assert "warn " in err["body"]["output"], err
    # The output still goes where it went (the target's file), after the
    # attach as before.
    wait_for(lambda: "line %d\n" % (first + 1) in t.output(), 30, "the target's own output")
    assert residue(cli, t) == "[True, True]"
    d.request("disconnect", {})
    d.close()
    wait_for(lambda: residue(cli, t) == "[False, False]", 30, "the wrappers to go")
    n = t.output().count("\n")
    wait_for(lambda: t.output().count("\n") > n + 2, 30, "the target to go on printing")


FLOOD = """
import os, sys, time
print("ready", flush=True)
while not os.path.exists("flood"):
    time.sleep(0.01)
for _ in range(100):
    sys.stdout.write("x" * 1000000)
sys.stdout.write("done\\n")
sys.stdout.flush()
while True:
    time.sleep(1)
"""


def test_redirect_output_is_bounded(python, spawn, cli, tmp_path):
    """100 MB printed: at most about DBGOUTPUT_RATE (1 MiB/s) forwarded,
    the rest counted in console notes; every byte accounted for."""
    t = spawn(python, FLOOD)
    t.wait_agent()
    t.wait_line("ready")
    d = Bridge.attached(t.pid, redirectOutput=True)
    d.request("configurationDone")
    start = time.time()
    (tmp_path / "flood").write_text("")
    total = 100000000 + len("done\n")
    forwarded = dropped = 0
    while forwarded + dropped < total:
        body = d.wait(lambda m: m.get("event") == "output")["body"]
        if body["category"] == "stdout":
            forwarded += len(body["output"].encode())
        elif "bytes of stdout not shown" in body["output"]:
            dropped += int(body["output"].split("probing: ")[1].split()[0])
        assert time.time() - start < 300, "hang guard"
    elapsed = time.time() - start
    assert forwarded + dropped == total
    # The budget: a burst of 1 MiB, then 1 MiB/s (a bound that only grows
    # with the machine's slowness).
    assert forwarded <= (1 << 20) * (elapsed + 1), (forwarded, elapsed)
    assert dropped > 0
    wait_for(lambda: "done" in t.output(), 60, "the target's own output")
    assert t.output().count("x") == 100000000, "the target's own output is whole"
    d.request("disconnect", {})
    d.close()


HOT = """
import os, time
print("ready", flush=True)
while not os.path.exists("go"):
    time.sleep(0.01)
for i in range(30000):
    x = i  # @hot
print("done", flush=True)
while True:
    time.sleep(1)
"""
LOG_RATE = 200  # agent/debugger/dbgevents.h: logpoint messages a second


@pytest.mark.timeout(120)  # the session dropped: no more events
def test_logpoint_on_a_hot_line_is_rate_limited_not_dropped(python, spawn,
                                                            tmp_path):
    """30,000 hits of a logpoint: about DBGEVENTS_LOG_RATE a second are
    sent, the rest are counted in console notes (every hit accounted
    for), and the session stays (it used to be dropped, silently, when its
    64 MiB output queue filled)."""
    t = spawn(python, HOT)
    t.wait_agent()
    t.wait_line("ready")
    d = Bridge.attached(t.pid)
    d.event("initialized")
    r = d.request("setBreakpoints", {
        "source": {"path": t.script},
        "breakpoints": [{"line": line_of(t, "# @hot"),
                         "logMessage": "hit {i} " + "y" * 3000}]})
    assert r["body"]["breakpoints"][0]["verified"] is True
    d.request("configurationDone")
    start = time.time()
    (tmp_path / "go").write_text("")
    total = 30000
    sent = dropped = 0
    seen = set()
    while sent + dropped < total:
        body = d.wait(lambda m: m.get("event") == "output")["body"]
        text = body["output"]
        if text.startswith("hit "):
            sent += 1
            seen.add(int(text.split()[1]))
        elif "logpoint messages dropped" in text or \
                "logpoint message dropped" in text:
            dropped += int(text.split("probing: ")[1].split()[0])
        assert time.time() - start < 300, "hang guard"
    elapsed = time.time() - start
    assert sent + dropped == total and len(seen) == sent
    assert sent <= LOG_RATE * (elapsed + 1), (sent, elapsed)
    assert dropped > 0
    wait_for(lambda: "done" in t.output(), 60, "the target")
    # The session is whole.
    r = d.request("threads")
    assert r["body"]["threads"], r
    d.request("disconnect", {})
    d.close()


GIL_IN_C_MAIN = """
i = 0
print("ready", flush=True)
while True:
    i += 1
    total = sum(range(3 * 10**7))  # C, GIL held throughout
"""

# The GIL holder is another thread; the main thread waits in C without
# the GIL (a pending call would never run): the debugger's tick arms it.
GIL_IN_C_WORKER = """
import threading
i = 0

def work():
    global i
    while True:
        i += 1
        total = sum(range(3 * 10**7))  # C, GIL held throughout

t = threading.Thread(target=work, name="gil_hog")
t.start()
print("ready", flush=True)
t.join()
"""


@pytest.mark.parametrize("script", [GIL_IN_C_MAIN, GIL_IN_C_WORKER], ids=["main", "worker"])
def test_pause_while_a_thread_holds_the_gil_in_c(python, spawn, cli, script):
    """A thread spends its time in C calls that hold the GIL (much longer
    than python.gil_timeout_ms, set low): the pause is still taken, armed
    when the GIL comes, and the thread stops when it returns to Python."""
    t = spawn(python, script, env={"PROBING_PYTHON_GIL_TIMEOUT_MS": "10"})
    t.wait_agent()
    t.wait_line("ready")
    d = Bridge.attached(t.pid)
    d.request("configurationDone")
    d.request("pause", {"threadId": t.pid})
    ev = d.event("stopped")
    assert ev["body"]["reason"] == "pause", ev
    # (In the second script the main thread may stop first, or the stop
    # be of threads held in C, the main thread in its join(): the hog's
    # name is read once it lets the GIL go.)
    if script is GIL_IN_C_MAIN:
        busy = t.pid
    else:
        wait_for(lambda: "gil_hog" in thread_ids(cli, t), 60, "the hog's name")
        busy = thread_ids(cli, t)["gil_hog"]
    wait_paused(cli, t, busy)
    d.request("continue", {})
    d.request("disconnect", {})
    d.close()
    wait_for(lambda: status(cli, t)["hook"] is False, 60, "the hook to go")


OTHER_TOOL = """
import os, sys, threading, time
mon = sys.monitoring
lines = [0]

def count(code, line):
    lines[0] += 1          # another tool's LINE events: coverage-like

def setup(ids):
    for i in ids:
        mon.use_tool_id(i, "other-%d" % i)
    mon.register_callback(ids[0], mon.events.LINE, count)
    mon.set_events(ids[0], mon.events.LINE)

def work(n):
    t = 0
    for i in range(n):
        t += i          # @line
    return t

setup([int(x) for x in os.environ["TAKE_IDS"].split(",")])
print("READY", flush=True)
while True:
    work(10)
    time.sleep(0.01)
"""


def _monitoring(python):
    from conftest import version_of
    if version_of(python) < (3, 12):
        pytest.skip("sys.monitoring is 3.12's")


def test_monitoring_coexists_with_another_tool(python, spawn, cli):
    """3.12 on: the debugger takes a free tool id and leaves another
    tool's (its id, events, callbacks) as they are."""
    _monitoring(python)
    t = spawn(python, OTHER_TOOL, env={"TAKE_IDS": "0"})
    t.wait_line("READY")
    t.wait_agent()
    line = line_of(t, "# @line")
    d = Bridge.attached(t.pid)
    d.request("setBreakpoints", {"source": {"path": t.script},
                                 "breakpoints": [{"line": line}]})
    d.request("configurationDone")
    ev = d.event("stopped")
    assert ev["body"]["reason"] == "breakpoint", ev
    st = d.request("stackTrace", {"threadId": ev["body"]["threadId"]})
    assert st["body"]["stackFrames"][0]["line"] == line
    # Probing is some other id; the other tool keeps 0.
    r = cli("eval", "import sys; [sys.monitoring.get_tool(i) for i in range(6)]", target=t.pid)
    tools = eval(r.out.strip())
    assert tools[0] == "other-0" and "probing" in tools, tools
    # A breakpoint that never stops keeps the debugger's events on while
    # the program runs: the other tool's line events go on all the same.
    d.request("setBreakpoints", {"source": {"path": t.script},
                                 "breakpoints": [{"line": line, "condition": "False"}]})
    d.request("continue", {"threadId": ev["body"]["threadId"]})
    before = int(cli("eval", "lines[0]", target=t.pid).out)
    wait_for(lambda: int(cli("eval", "lines[0]", target=t.pid).out) > before + 10, 10,
             "the other tool's line events")
    assert "probing" in cli("eval", "[sys.monitoring.get_tool(i) for i in range(6)]",
                            target=t.pid).out
    d.request("disconnect", {})
    d.close()
    # After detach the id is free again; the other tool is untouched.
    wait_for(lambda: "probing" not in cli("eval", "import sys; [sys.monitoring.get_tool(i) "
                                          "for i in range(6)]", target=t.pid).out,
             10, "the tool id given back")
    r = cli("eval", "sys.monitoring.get_tool(0)", target=t.pid)
    assert r.out.strip() == "'other-0'", r


def test_monitoring_without_a_free_tool_id_says_so(python, spawn, cli):
    """Every tool id taken: the client is told why breakpoints cannot
    work, nothing of the other tools is touched, the target runs on."""
    _monitoring(python)
    t = spawn(python, OTHER_TOOL, env={"TAKE_IDS": "0,1,2,3,4,5"})
    t.wait_line("READY")
    t.wait_agent()
    d = Bridge.attached(t.pid)
    d.request("setBreakpoints", {"source": {"path": t.script},
                                 "breakpoints": [{"line": line_of(t, "# @line")}]})
    d.request("configurationDone")
    out = d.wait(lambda m: m["type"] == "event" and m["event"] == "output"
                 and "tool id" in m["body"]["output"])
    text = out["body"]["output"]
    assert "no free tool id" in text and "other-0" in text and "other-5" in text, text
    r = cli("eval", "import sys; [sys.monitoring.get_tool(i) for i in range(6)]", target=t.pid)
    assert eval(r.out.strip()) == ["other-%d" % i for i in range(6)], r
    d.request("disconnect", {})
    d.close()
    assert t.alive()
