"""Finding (issue 27, item 4): `backtrace --locals` (allowed in read-only
mode) and DAP `variables` built a container's whole repr before cutting
it: a 512 MiB bytearray local stalled every thread for 13.8 s and took
the program from 0.5 to 4.7 GB; a 50M-item list 4.3 s and +480 MB.  The
work is bounded now, not only the text: what is not shown is not built."""
from conftest import probing, wait_for
from test_debug import Bridge

PROGRAM = """
import time

def hold():
    blob = bytearray(512 << 20)
    items = [0] * 50_000_000
    nested = {"blob": blob, "items": [items, (1, 2)]}
    print("ready", flush=True)
    while True:
        time.sleep(0.01)  # @hold

hold()
"""


def peak_kb(pid):
    """The target's peak resident memory so far (VmHWM), in kB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_locals_of_huge_containers_cost_what_they_show(python, spawn):
    t = spawn(python, PROGRAM)
    t.wait_agent()
    t.wait_line("ready", timeout=60)
    before = peak_kb(t.pid)
    r = probing("backtrace", "--locals", target=t.pid, timeout=120)
    assert r.rc == 0, r
    text = r.out
    assert "blob = bytearray(b'\\x00\\x00" in text, text
    assert "items = [0, 0, 0, " in text, text
    assert "nested = {'blob': bytearray(b'\\x00" in text, text
    # What was shown is short; what was built to show it was too.
    assert max(len(line) for line in text.splitlines()) < 1000, text
    grown = peak_kb(t.pid) - before
    assert grown < 64 * 1024, "peak memory grew by %d kB" % grown

    # The debugger's variables: the same values, the same bound.
    d = Bridge.attached(t.pid)
    try:
        d.event("initialized")
        d.request("configurationDone")
        d.request("pause", {"threadId": t.pid})
        ev = d.event("stopped")
        frames = d.request("stackTrace", {"threadId": ev["body"]["threadId"]})["body"]["stackFrames"]
        hold = [f for f in frames if f["name"].endswith("hold")][0]
        scopes = d.request("scopes", {"frameId": hold["id"]})["body"]["scopes"]
        vs = d.request("variables", {"variablesReference": scopes[0]["variablesReference"]})
        values = {v["name"]: v["value"] for v in vs["body"]["variables"]}
        assert values["blob"].startswith("bytearray(b'\\x00"), values
        assert values["items"].startswith("[0, 0, "), values
        assert all(len(v) <= 1024 for v in values.values()), values
        d.request("disconnect", {})
    finally:
        d.close()
    grown = peak_kb(t.pid) - before
    assert grown < 64 * 1024, "peak memory grew by %d kB" % grown
    assert t.alive()
