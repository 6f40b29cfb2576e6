"""A program thread that takes the GIL from the agent's own start-up call,
and keeps it in C, left the agent listening but never answering.

Once listening, the agent made two calls with the GIL (its exit hook, the
check of its GIL-free stack reader) before it served its first request,
and waited for them with no limit.  A call of Python that lets the GIL go
(here the program's own atexit.register or os.register_at_fork, which
the hooks call) let the program's thread take it and keep it (a regex
that never ends): every client then got "agent not answering (no reply to initialize)" for the
life of the process (seen once in CI on 3.15: a busy thread took the GIL
from the check's Python at the wrong moment).

Now those calls run on a thread of their own, waited for half a second,
each given up after a while: the agent serves without them, and stacks
come without the GIL.
"""
from conftest import probing

PROGRAM = """\
import atexit, glob, os, re, threading, time

go = threading.Event()

def trip():
    # Only from a thread of the agent's (3.14+'s PEP 768 loader registers
    # the exit hook from the main thread, as it loads the agent), and
    # once the injector's loader is over (it reports and removes its
    # files), so that the injection itself is seen through.
    if threading.current_thread() is threading.main_thread():
        return
    while glob.glob("/tmp/probing-%d-*" % os.getpid()):
        time.sleep(0.01)
    go.set()
    time.sleep(0.2)          # the GIL let go: the hog takes it

def patched(real):
    def call(*args, **kwargs):
        trip()
        return real(*args, **kwargs)
    return call

# What the agent's start-up call calls: its exit hook, and on 3.12+ its
# warning at fork.
atexit.register = patched(atexit.register)
os.register_at_fork = patched(os.register_at_fork)

def hog():
    go.wait()
    print("HOG", flush=True)
    re.match(r"(a+)+b", "a" * 64)   # the GIL, in C, for ever

threading.Thread(target=hog, name="hog", daemon=True).start()
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""


def test_agent_answers_when_its_startup_call_loses_the_gil(spawn, python):
    t = spawn(python, PROGRAM, agent=None)
    t.wait_line("READY")
    r = probing("inject", target=t.pid, timeout=120)
    assert r.rc == 0, r
    t.wait_line("HOG")
    # The GIL is the hog's for good: the stacks come without it.
    r = probing("backtrace", target=t.pid, timeout=60)
    assert r.rc == 0, r
    assert "hog" in r.out, r.out
    assert "GIL" in r.err, r.err
    # And so does what needs no Python at all.
    r = probing("config", "agent.stack_reader", target=t.pid, timeout=60)
    assert r.rc == 0, r
