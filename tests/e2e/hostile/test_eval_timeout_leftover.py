"""Finding (issue 27, item 1): one timed-out eval broke the debugger for
the life of the process.  `eval --timeout 200 'time.sleep(2.5)'` is blocked
in C when its deadline comes, so the KeyboardInterrupt meant to stop it
lands later; it stayed pending and hit later requests: `variables` and
`evaluate` at every later stop hung and failed with "cannot list the
children: KeyboardInterrupt".  An interrupt must end with the request it
was meant for: never in a later request, never in the program."""
import time

from conftest import probing, wait_for
from test_debug import Bridge, line_of

PROGRAM = """
import time
caught = []
i = 0

def tick(n):
    global i
    data = {"n": n, "items": list(range(3))}
    i += 1  # @tick
    return data

print("ready", flush=True)
while True:
    try:
        tick(i)
        time.sleep(0.005)
    except KeyboardInterrupt:  # must never come from the agent
        caught.append(time.time())
"""


def test_timed_out_eval_leaves_no_interrupt_behind(python, spawn):
    t = spawn(python, PROGRAM)
    t.wait_agent()
    t.wait_line("ready")
    # Blocked in C past its deadline: the interrupt comes after the reply.
    r = probing("eval", "--timeout", "200", "import time; time.sleep(2.5); 'slept'",
                target=t.pid, timeout=30)
    assert r.rc != 0, r
    # Past the sleep: the eval's code has returned (and run its next
    # line, where the interrupt was due) by now.
    time.sleep(3)
    for _ in range(3):
        r = probing("eval", "1 + 1", target=t.pid)
        assert r.rc == 0 and r.out.strip() == "2", r
    # A debug session afterwards: variables and evaluate at a stop.
    d = Bridge.attached(t.pid)
    try:
        d.event("initialized")
        d.request("setBreakpoints", {"source": {"path": t.script},
                                     "breakpoints": [{"line": line_of(t, "# @tick")}]})
        d.request("configurationDone")
        ev = d.event("stopped")
        tid = ev["body"]["threadId"]
        frames = d.request("stackTrace", {"threadId": tid})["body"]["stackFrames"]
        assert frames[0]["name"].endswith("tick"), frames[0]
        scopes = d.request("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
        t0 = time.monotonic()
        vs = d.request("variables", {"variablesReference": scopes[0]["variablesReference"]})
        names = {v["name"]: v for v in vs["body"]["variables"]}
        assert "data" in names and "n" in names, names
        data = names["data"]
        assert data["variablesReference"] > 0, data
        kids = d.request("variables", {"variablesReference": data["variablesReference"]})
        assert {v["name"] for v in kids["body"]["variables"]} >= {"'n'", "'items'"}, kids
        ev = d.request("evaluate", {"expression": "data['items']", "frameId": frames[0]["id"],
                                    "context": "repl"})
        assert ev["body"]["result"] == "[0, 1, 2]", ev
        assert time.monotonic() - t0 < 20
        d.request("disconnect", {})
    finally:
        d.close()
    # The program never saw a KeyboardInterrupt of ours.
    r = probing("eval", "len(caught)", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "0", (r, t.output()[-2000:])
    assert t.alive()
