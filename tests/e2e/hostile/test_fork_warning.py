"""Finding (issue 27, item 16): on 3.12 and 3.13 every os.fork() of a
program with the agent printed "DeprecationWarning: This process is
multi-threaded", which it does not print without it: CPython counts the
process's threads, ours included.  The program's output is the program's:
it warns when its own threads are more than one, as it would without us,
and only then; and its other warnings show as often as without us (a
change of the warnings filters around each fork would show its "once"
warnings again)."""
import os
import sys

import pytest

from conftest import SANITIZED_TARGETS, probing, version_of

PROGRAM = """
import os, sys, threading, time, warnings
own_thread = %(own_thread)r

def mine():
    warnings.warn("mine", UserWarning)  # shown once: the default action

mine()
print("ready", flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
if own_thread:
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    mine()
print("forked", flush=True)
if own_thread:
    stop.set()
while True:
    time.sleep(0.05)
"""


@pytest.mark.skipif(SANITIZED_TARGETS, reason="GCC 12's libasan may leave its allocator's "
                    "lock taken in a forked child of a multi-threaded target (conftest.py)")
@pytest.mark.parametrize("way", ["env", "inject"])
@pytest.mark.parametrize("own_thread", [False, True], ids=["alone", "own-thread"])
def test_fork_warns_as_without_the_agent(python, spawn, tmp_path, way, own_thread):
    t = spawn(python, PROGRAM % {"own_thread": own_thread},
              agent="env" if way == "env" else None)
    t.wait_line("ready")
    if way == "inject":
        r = probing("inject", target=t.pid, timeout=120)
        assert r.rc == 0, r
    t.wait_agent()
    # Something for every kind of agent thread to be up.
    assert probing("backtrace", target=t.pid).rc == 0
    assert probing("query", "select 1", target=t.pid).rc == 0
    (tmp_path / "go").write_text("")
    t.wait_line("forked")
    out = t.output()
    warns = version_of(python) >= (3, 12) and own_thread
    assert ("multi-threaded" in out) == warns, out
    # The filters did not change around the forks: the program's own
    # warning, shown once, is not shown again.
    assert out.count("UserWarning: mine") == 1, out
    assert t.alive()
