"""A free-threaded CPython (3.13t: the only one Debian's sources give here,
built by scripts/freethreaded): the agent never turns its GIL back on
behind the program's back, injecting is refused with the reason (an agent
for the GIL build loaded there killed it), and with the GIL accepted
(PROBING_FREE_THREADED=gil) every view works.  Runs where the build has a
free-threaded Python (pythons.txt: a version ending in "t"); `make
test-freethreaded` makes one and runs this."""
import time

import pytest

from conftest import VERSIONS, probing, wait_for

FT = [exe for exe, v in VERSIONS.items() if v.endswith("t")]
pytestmark = pytest.mark.skipif(
    not FT, reason="no free-threaded CPython in this build "
    "(make test-freethreaded)")

SPIN = """\
import sys, threading, time
def spin():
    x = 0
    while True:
        x += 1
        if x % 200000 == 0:
            time.sleep(0.001)
for i in range(3):
    threading.Thread(target=spin, daemon=True, name="spin%d" % i).start()
print("READY gil=%s" % sys._is_gil_enabled(), flush=True)
while True:
    time.sleep(0.1)
"""


def gil_line(t):
    return [x for x in t.output().splitlines() if x.startswith("READY")][0]


def test_probing_1_says_why_and_leaves_the_gil_off(spawn):
    t = spawn(FT[0], SPIN)
    t.wait_line("READY")
    assert gil_line(t) == "READY gil=False", t.output()
    assert "[probing] not started: this is a free-threaded CPython" in \
        t.output() and "PROBING_FREE_THREADED=gil" in t.output(), t.output()
    assert "has been enabled" not in t.output(), t.output()
    time.sleep(1)
    r = probing("backtrace", target=t.pid)
    assert r.rc != 0, r
    assert t.alive()


def test_inject_is_refused_and_the_program_lives(spawn):
    t = spawn(FT[0], SPIN, agent=None)
    t.wait_line("READY")
    r = probing("inject", target=t.pid)
    assert r.rc != 0 and "runs a free-threaded CPython 3." in r.err and \
        "injecting is refused" in r.err, r
    time.sleep(0.5)
    assert t.alive(), t.output()
    r = probing("backtrace", target=t.pid)
    assert r.rc != 0 and "no Probing agent" in r.err, r


def test_with_the_gil_accepted_every_view_works(spawn):
    t = spawn(FT[0], SPIN, env={"PROBING_FREE_THREADED": "gil"})
    t.wait_line("READY")
    t.wait_agent()
    # The GIL is on: what the setting says it accepts.
    assert gil_line(t) == "READY gil=True", t.output()
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    names = sorted(th["name"] for th in r.json()["threads"])
    assert names == ["MainThread", "spin0", "spin1", "spin2"], names
    spin = [th for th in r.json()["threads"] if th["name"] == "spin0"][0]
    assert spin["frames"][0]["func"] == "spin", spin
    assert probing("eval", "6*7", target=t.pid).out.strip() == "42"
    r = probing("config", "-f", "json", target=t.pid)
    reader = [x for x in r.json() if x["name"] == "agent.stack_reader"]
    assert reader and reader[0]["value"] == "ok", reader
    r = probing("query", "SELECT count(*) AS n FROM python.threads",
                "-f", "json", target=t.pid)
    assert r.rc == 0 and r.json()[0]["n"] >= 4, r
    r = probing("flamegraph", "-d", "2", target=t.pid)
    assert r.rc == 0 and "spin (" in r.out, r
    assert t.alive()


BREAK = """\
import sys, threading, time
def spin(n):
    x = 0
    while True:
        x += n  # @line
        time.sleep(0.001)
for i in range(3):
    threading.Thread(target=spin, args=(i + 1,), daemon=True,
                     name="spin%d" % i).start()
print("READY gil=%s" % sys._is_gil_enabled(), flush=True)
while True:
    time.sleep(0.1)
"""


def test_with_the_gil_accepted_the_debugger_works(spawn):
    """An editor's session (`probing dap`, as VS Code runs it): a
    breakpoint in code three threads run at once stops one of them, its
    frame and locals are shown, stepping moves it a line, and after
    disconnect every thread runs again, the GIL still on."""
    from test_debug import Bridge, line_of
    t = spawn(FT[0], BREAK, env={"PROBING_FREE_THREADED": "gil"})
    t.wait_line("READY")
    t.wait_agent()
    assert gil_line(t) == "READY gil=True", t.output()
    line = line_of(t, "# @line")
    d = Bridge.attached(t.pid)
    r = d.request("setBreakpoints", {"source": {"path": t.script},
                                     "breakpoints": [{"line": line}]})
    assert r["body"]["breakpoints"][0]["verified"] is True, r
    d.request("configurationDone")
    ev = d.event("stopped")
    assert ev["body"]["reason"] == "breakpoint", ev
    tid = ev["body"]["threadId"]
    st = d.request("stackTrace", {"threadId": tid})
    top = st["body"]["stackFrames"][0]
    assert top["name"].endswith("spin") and top["line"] == line, top
    scopes = d.request("scopes", {"frameId": top["id"]})["body"]["scopes"]
    local = d.request("variables", {
        "variablesReference": scopes[0]["variablesReference"]})
    names = {v["name"]: v["value"] for v in local["body"]["variables"]}
    assert "x" in names and names["n"] in ("1", "2", "3"), names
    # No breakpoint any more; a step goes to the next line.
    d.request("setBreakpoints", {"source": {"path": t.script},
                                 "breakpoints": []})
    d.request("next", {"threadId": tid})
    ev = d.event("stopped")
    assert ev["body"]["reason"] == "step", ev
    st = d.request("stackTrace", {"threadId": ev["body"]["threadId"]})
    assert st["body"]["stackFrames"][0]["line"] == line + 1, st
    d.request("disconnect", {})
    d.close()
    r = probing("debug", "-f", "json", target=t.pid)
    wait_for(lambda: probing("debug", "-f", "json",
                             target=t.pid).json()["pausedThreads"] == [],
             10, "every thread to run again")
    r = probing("eval", "sys._is_gil_enabled()", target=t.pid)
    assert r.out.strip() == "True", r
    assert t.alive()
