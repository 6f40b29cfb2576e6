"""Finding (issue 27, item 17): `eval 'import signal;
signal.raise_signal(2)'` was silently swallowed: the code runs on an
agent thread that blocks every signal, where raise() left the signal
pending for good.  A signal the evaluated code raises is the program's,
as if it had raised it: its handler runs (here the default SIGINT handler,
KeyboardInterrupt in the main thread; and a handler of its own)."""
from conftest import probing, wait_for

PROGRAM = """
import signal, time
usr1 = []
signal.signal(signal.SIGUSR1, lambda *a: usr1.append(1))
# Python's own SIGINT handler, whatever the test runner's shell left
# (a background job inherits SIGINT ignored, and then Python keeps that).
signal.signal(signal.SIGINT, signal.default_int_handler)
print("ready", flush=True)
try:
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    print("interrupted", flush=True)
while True:
    time.sleep(0.01)
"""


def test_a_signal_raised_by_eval_reaches_the_program(python, spawn):
    t = spawn(python, PROGRAM)
    t.wait_agent()
    t.wait_line("ready")
    r = probing("eval", "import signal; signal.raise_signal(signal.SIGUSR1)", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: probing("eval", "len(usr1)", target=t.pid).out.strip() == "1", 10,
             "the program's SIGUSR1 handler")
    r = probing("eval", "import signal; signal.raise_signal(signal.SIGINT)", target=t.pid)
    assert r.rc == 0, r
    t.wait_line("interrupted", timeout=10)
    # Nothing of it is left pending on the agent's threads.
    r = probing("eval", "import signal; sorted(signal.sigpending())", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "[]", r
    assert t.alive()
