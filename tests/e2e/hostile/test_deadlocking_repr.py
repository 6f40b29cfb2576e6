"""Issue 27, item 9: a repr that deadlocks.

A local whose __repr__ takes a threading.Lock that the main thread holds
for good: each `probing backtrace --locals` left one of the agent's GIL
threads blocked in that repr for good (no interrupt reaches a thread
blocked on a lock).  Eight at once took all eight; from then on `eval`
and `memory` failed ("no Python thread of the agent is free").

Now reprs of the program's objects hold at most a few of those threads
at once: later backtraces are taken without locals and say why (naming
the reprs that did not end), and evaluate, memory and backtraces go on
working.
"""
import json
import subprocess

from conftest import CLI, probing

PROGRAM = """\
import threading, time

lock = threading.Lock()

class Stuck:
    def __repr__(self):
        with lock:
            return "never"

def main():
    s = Stuck()
    lock.acquire()          # held for good
    print("READY", flush=True)
    while True:
        time.sleep(0.05)

main()
"""


def test_deadlocking_repr_costs_only_its_own_calls(spawn, python):
    t = spawn(python, PROGRAM)
    t.wait_line("READY")
    t.wait_agent()
    procs = [subprocess.Popen([CLI, "-t", str(t.pid), "backtrace", "--locals"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for _ in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "MainThread" in out, (out, err)

    # What runs the program's code of the client's choosing still runs.
    r = probing("eval", "6 * 7", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "42", r
    # The heap walk still has its thread (its figures are there).
    r = probing("memory", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    assert r.json()["python"] is not None, r.json().get("message")
    # Backtraces: the stacks with the GIL; locals left out, saying why.
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and "MainThread" in r.out and "warning" not in r.err, r
    r = probing("backtrace", "--locals", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    body = r.json()
    assert body["gil"]["acquired"], body
    assert "repr" in body.get("localsError", ""), body
    assert "have not ended" in body["localsError"], body
    # And the table says so too, never a silent backtrace without locals.
    r = probing("backtrace", "--locals", target=t.pid)
    assert r.rc == 0 and "MainThread" in r.out, r
    assert "warning: no locals:" in r.err and "have not ended" in r.err, r
    assert t.alive()
