"""Finding (issue 27, item 17): under a tight address-space limit
(RLIMIT_AS) the debugger's `variables` answered with nameless `{}`
entries: each field added to a variable's JSON could fail to allocate
and was not checked, so a half-built variable went out as if whole.

The allocation that fails under a limit is whichever comes when the heap
is full; here it is chosen, every one in turn.  tests/e2e/hostile/
failmalloc.c, preloaded into the target, fails the n-th allocation made
by libcjson's code (the replies' JSON) from the moment the test arms it
(through files: failmalloc's own thread reads them while the debugger
holds every Python thread); the test sweeps n over every allocation of a `variables` reply.  Each
answer is whole or an error that says "out of memory" (a reply that
cannot be built at all may come as a bare error, never as a broken
success), the session goes on, and the program runs on.
"""
import json
import os
import threading

import pytest

from conftest import BUILD, SANITIZED_TARGETS
from test_debug import Bridge

SHIM = os.path.join(BUILD, "tests", "libfailmalloc.so")

PROGRAM = """
import time

def hold():
    alpha = "a" * 40
    beta = [1, 2, 3]
    gamma = {"k": (1.5, None)}
    delta = 12345
    epsilon = b"bytes"
    print("ready", flush=True)
    while True:
        time.sleep(0.01)  # @hold

hold()
"""

EXPECTED = {"alpha": repr("a" * 40), "beta": "[1, 2, 3]",
            "gamma": "{'k': (1.5, None)}", "delta": "12345",
            "epsilon": "b'bytes'"}


class Guarded(Bridge):
    """The DAP bridge, with every wait bounded: a reply that never comes
    fails the test instead of hanging it."""

    def answer(self, command, args, timeout=30):
        seq = self.send(command, args)
        timer = threading.Timer(timeout, self.p.kill)
        timer.start()
        try:
            return self.wait(lambda m: m["type"] == "response" and
                             m["request_seq"] == seq)
        finally:
            timer.cancel()


def check_whole(variables):
    """Every variable of hold() with its name, value, type and reference."""
    got = {}
    for v in variables:
        assert set(v) >= {"name", "value", "variablesReference"}, v
        got[v["name"]] = v["value"]
    for name, value in EXPECTED.items():
        assert got.get(name) == value, (name, got)


@pytest.mark.skipif(SANITIZED_TARGETS, reason="the sanitizer's allocator "
                    "replaces malloc itself: no second interposer")
def test_variables_whole_or_an_error_whichever_allocation_fails(python, spawn,
                                                                tmp_path):
    assert os.path.exists(SHIM), "the build has no %s" % SHIM
    t = spawn(python, PROGRAM, env={"LD_PRELOAD": SHIM,
                                    "FAILMALLOC_DIR": str(tmp_path)})
    t.wait_agent()
    t.wait_line("ready", timeout=60)
    d = Guarded.attached(t.pid)
    try:
        d.event("initialized")
        line = PROGRAM.splitlines().index("        time.sleep(0.01)  # @hold") + 1
        d.request("setBreakpoints", {"source": {"path": t.script},
                                     "breakpoints": [{"line": line}]})
        d.request("configurationDone")
        ev = d.event("stopped")   # the main thread only: the armer runs on
        frames = d.request("stackTrace", {"threadId": ev["body"]["threadId"]})
        hold = [f for f in frames["body"]["stackFrames"]
                if f["name"].endswith("hold")][0]
        scopes = d.request("scopes", {"frameId": hold["id"]})["body"]["scopes"]
        ref = scopes[0]["variablesReference"]
        check_whole(d.request("variables", {"variablesReference": ref})
                    ["body"]["variables"])

        failures = whole = 0
        n = 0

        def arm(k):
            """The k-th allocation by libcjson from now fails; returns
            how many failmalloc failed before."""
            nonlocal n
            n += 1
            (tmp_path / ("arm-%d" % n)).write_text("libcjson %d\n" % k)
            done = tmp_path / ("armed-%d" % n)
            for _ in range(2000):
                if done.exists():
                    break
                threading.Event().wait(0.005)
            rc, before = map(int, done.read_text().split())
            assert rc == 0, "failmalloc found no libcjson in the target"
            return before

        for k in range(1, 121):
            arm(k)
            r = d.answer("variables", {"variablesReference": ref})
            if r["success"]:
                check_whole(r["body"]["variables"])
                whole += 1
            else:
                msg = r.get("message", "") + json.dumps(r.get("body", {}))
                assert "out of memory" in msg, r
                failures += 1
            # Whatever happened, the next clean request is whole.
            armed_failed = arm(10**12)
            check_whole(d.request("variables", {"variablesReference": ref})
                        ["body"]["variables"])
        print("requests: %d whole, %d failed; allocations failed: %d" %
              (whole, failures, armed_failed))
        # The sweep reached past the reply's last allocation (whole again)
        # after failing some of its allocations (errors said so).
        assert failures >= 10, (whole, failures)
        assert whole >= 1, (whole, failures)
        d.request("disconnect", {})
    finally:
        d.close()
    assert t.alive()
