"""Issue 27, item 14: terminal escape injection.

A program names a function, its file and a thread with terminal control
sequences (ESC ] 0 ; ... BEL sets the terminal's title; ESC [ 2 J clears
the screen; a string that ends in OSC 52 can even write the clipboard).
`backtrace`, `debug --dump`, `debug --pause` and `diagnose hang` wrote
those names to the terminal as they were: the program drove the
terminal of whoever looked at it.  Locals were already escaped.  So did
the agent's messages that quote the program: the exception and the value
of `eval` (a function of the program raising with its own text, a
__repr__ of its own), and errors (an SQL error quoting a thread's name).

Every text the CLI shows from the target now has its control characters
written as escapes (\\x1b, \\x07): no ESC, BEL or other C0/C1 control
byte reaches the output raw, and the escaped name is there to be read.
"""
import re
import sys

import pytest

from conftest import probing, wait_for

# ESC ] 0 ; TITLE BEL: sets the window title.  ESC [ 2 J: clears the
# screen.  CSI in its 8-bit form (U+009B): a C1 control.
BAD = "Q\x1b]0;QUAL\x07name\x1b[2J\u009b31m"

HOSTILE = r'''
import sys, threading, time
BAD = %r
src = "def work():\n    while True:\n        time.sleep(0.01)\n"
ns = {"time": time}
exec(compile(src, BAD + ".py", "exec"), ns)
kw = {"co_name": BAD}
if sys.version_info >= (3, 11):
    kw["co_qualname"] = BAD
ns["work"].__code__ = ns["work"].__code__.replace(**kw)
threading.Thread(target=ns["work"], name=BAD, daemon=True).start()
globals()[BAD] = BAD          # a local of the module's frame, name and value
def explode():
    raise ValueError(BAD)     # an exception's text is the program's
class Shown:
    def __repr__(self):
        return BAD            # and so is a repr
shown = Shown()
print("READY", flush=True)
while True:
    time.sleep(0.01)
''' % BAD

# What must never reach the output raw: C0 controls but newline and tab
# (the CLI's own), DEL, and C1 controls.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f]")
ESCAPED = "Q\\x1b]0;QUAL\\x07name\\x1b[2J\\u009b31m"


def clean(r, what):
    for stream in (r.out, r.err):
        m = RAW.search(stream)
        assert m is None, "%s wrote %r raw: %r" % (what, m.group(), stream[:3000])


@pytest.fixture
def target(spawn, python):
    t = spawn(python, HOSTILE)
    t.wait_line("READY")
    t.wait_agent()
    return t


def test_backtrace_escapes_names(target):
    for args in (("backtrace",), ("backtrace", "--locals"), ("debug", "--dump")):
        r = probing(*args, target=target.pid)
        assert r.rc == 0, (args, r)
        clean(r, " ".join(args))
        # The names are shown, escaped: thread, function, file.
        assert r.out.count(ESCAPED) >= 3, (args, r.out)
    assert target.alive()


def test_debug_pause_escapes_names(target):
    r = probing("debug", "--pause", "--wait", "30", target=target.pid,
                timeout=120)
    try:
        assert r.rc == 0, r
        clean(r, "debug --pause")
        assert ESCAPED in r.out, r.out
    finally:
        probing("debug", "--resume", target=target.pid)


def test_diagnose_escapes_names(target):
    r = probing("diagnose", "hang", "-d", "1", target=target.pid, timeout=120)
    clean(r, "diagnose hang")
    assert ESCAPED in r.out or ESCAPED in r.err, r


def test_eval_escapes_exception_and_value(target):
    r = probing("eval", "explode()", target=target.pid)
    assert r.rc == 1, r
    clean(r, "eval explode()")
    assert "ValueError: " + ESCAPED in r.err, r.err
    # The traceback keeps its lines.
    assert "Traceback (most recent call last):\n" in r.err, r.err
    r = probing("eval", "shown", target=target.pid)
    assert r.rc == 0, r
    clean(r, "eval shown")
    assert r.out == ESCAPED + "\n", r.out
    assert target.alive()


def test_error_message_escapes_the_targets_text(target):
    """An agent's error that quotes the program's text (SQLite names the
    bad JSON path, here a thread's name) goes through the CLI's one
    error path."""
    r = probing("query", "SELECT json_extract('{}', name) FROM "
                "python.threads WHERE name LIKE 'Q%'", target=target.pid)
    assert r.rc != 0, r
    clean(r, "query")
    assert "QUAL\\x07name" in r.err, r.err
    assert target.alive()


STUCK = HOSTILE.replace("print(\"READY\", flush=True)\nwhile True:\n    time.sleep(0.01)\n",
                        "print(\"READY\", flush=True)\nns[\"work\"]()\n")


def test_hang_report_escapes_names(spawn, python):
    """The watchdog's report of the main thread stuck in the function with
    the hostile name: `hangs` and `hangs --report` escape it."""
    assert STUCK != HOSTILE
    t = spawn(python, STUCK, env={"PROBING_HANG_TIMEOUT": "1s"})
    t.wait_line("READY")
    t.wait_agent()
    wait_for(lambda: probing("hangs", "-f", "json", target=t.pid).out.strip()
             not in ("", "[]"), 60, "a hang recorded")
    for args in (("hangs",), ("hangs", "--report")):
        r = probing(*args, target=t.pid)
        assert r.rc == 0, (args, r)
        clean(r, " ".join(args))
        assert ESCAPED in r.out, (args, r.out)
