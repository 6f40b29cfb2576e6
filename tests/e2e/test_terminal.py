"""A terminal that fits (issue 30 item 4): on an 80-column terminal the
commands' tables are 80 columns wide at most (they were 89 to 216), the
first column whole; piped, the same commands print every column whole."""
import fcntl
import os
import pty
import select
import shutil
import struct
import termios
import time
import unicodedata

import pytest

from conftest import CLI, PYTHONS, probing


@pytest.fixture
def one_python():
    """One Python: what is checked here is the CLI's terminal, the same
    whichever Python the target runs (the suite's time)."""
    return PYTHONS[0]

STUCK = """\
import threading
print("READY", flush=True)
threading.Event().wait()
"""


def on_terminal(argv, cols=80, rows=50, timeout=60, env=None):
    """Runs argv on a pseudo-terminal of cols x rows (no pager unless env
    names one); its output."""
    pid, fd = start_on_terminal(argv, cols, rows,
                                env or {"PROBING_PAGER": ""})
    out, deadline = b"", time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif os.waitpid(pid, os.WNOHANG)[0]:
            pid = 0
            break
    if pid:
        os.waitpid(pid, 0)
    return out.decode(errors="replace").replace("\r\n", "\n")


def start_on_terminal(argv, cols, rows, env):
    pid, fd = pty.fork()
    if pid == 0:
        e = {k: v for k, v in os.environ.items()
             if k not in ("PAGER", "PROBING_PAGER", "LESS")}
        e.update(env, TERM="xterm")
        os.execve(argv[0], argv, e)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def width(line):
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in line)


def test_tables_fit_80_columns(spawn, one_python):
    t = spawn(one_python, STUCK)
    t.wait_line("READY")
    t.wait_agent()
    # A hang for `hangs` to list.
    assert probing("config", "hang.timeout=1s", target=t.pid).rc == 0
    deadline = time.time() + 30
    while "stuck" not in probing("hangs", target=t.pid).out:
        assert time.time() < deadline, probing("hangs", target=t.pid)
        time.sleep(0.2)
    for words in (["config"], ["list"], ["runs"], ["hangs"], ["memory"],
                  ["flamegraph", "--idle", "-d", "1s"]):
        argv = [CLI, "-t", str(t.pid), *words] if words[0] not in (
            "list", "runs") else [CLI, *words]
        out = on_terminal(argv)
        # What the terminal shows of each line: past its last \r (a
        # progress line on stderr rewrites itself), no escapes.
        shown = [l.rsplit("\r", 1)[-1].replace("\x1b[K", "")
                 for l in out.split("\n")]
        lines = [l for l in shown if "│" in l or "┌" in l]
        assert lines, (words, out)
        assert max(width(l) for l in lines) <= 80, (words, out)
        if words == ["config"]:
            assert "│ agent.pid " in out, out  # the key column, whole
    # Piped: every column, nothing cut.
    r = probing("config", target=t.pid)
    assert r.rc == 0 and "…" not in r.out, r
    assert max(len(l) for l in r.out.splitlines()) > 80, r.out


def children_named(pid, name):
    """pid's descendants named name (the pager runs under sh -c)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        return []
    out = []
    for k in kids:
        try:
            with open("/proc/%d/comm" % k) as f:
                if f.read().strip() == name:
                    out.append(k)
        except OSError:
            pass
        out += children_named(k, name)
    return out


def test_long_output_goes_through_less(spawn, one_python):
    """On a terminal, `config` (longer than its 10 rows) goes through less
    (LESS=FRX, as git sets it), which waits for q; --no-pager, PAGER=cat
    and a pipe print it directly."""
    if not shutil.which("less"):
        pytest.skip("no less here (Debian's less package)")
    t = spawn(one_python, STUCK)
    t.wait_line("READY")
    t.wait_agent()
    argv = [CLI, "-t", str(t.pid), "config"]
    pid, fd = start_on_terminal(argv, 100, 10, {})
    try:
        out, deadline = b"", time.time() + 30
        while b"agent.version" not in out or not children_named(pid, "less"):
            assert time.time() < deadline, (out, children_named(pid, "less"))
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                out += os.read(fd, 65536)
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # less waits
        os.write(fd, b"q")
        deadline = time.time() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.time() < deadline, "probing did not end after q"
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    os.read(fd, 65536)
                except OSError:
                    pass
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    # A pager that is not there: printed directly, not lost with it.
    for words, env in ((["--no-pager", *argv[1:]], {}),
                       (argv[1:], {"PAGER": "cat"}),
                       (argv[1:], {"PAGER": "no-such-pager --opt"})):
        out = on_terminal([CLI, *words], 100, 10, env=env or {"X": "1"})
        assert "server.listen" in out, out  # all of it, no pager


def test_backtrace_in_colour_on_a_terminal(spawn, one_python):
    """On a terminal the program's own frames are bold, the libraries'
    dim; NO_COLOR (https://no-color.org) and a pipe get none."""
    t = spawn(one_python, STUCK)
    t.wait_line("READY")
    t.wait_agent()
    argv = [CLI, "-t", str(t.pid), "backtrace"]
    out = on_terminal(argv)
    main = out[out.index('"MainThread"'):]
    assert "\x1b[1m#" in main and "target" in main.split("\x1b[1m#")[1] \
        .split("\n")[0], out  # <module> of the test's script: its own
    lib = [l for l in main.split("\n") if "threading.py" in l]
    assert lib and all("\x1b[2m#" in l for l in lib), out
    out = on_terminal(argv, env={"PROBING_PAGER": "", "NO_COLOR": "1"})
    assert "\x1b[" not in out and "threading.py" in out, out
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and "\x1b" not in r.out, r


def test_diagnose_shows_progress_on_a_terminal(spawn, one_python):
    """diagnose's seconds of looking are not silent on a terminal: a
    progress line on stderr says what it does and for how long, and is
    erased before the verdict; piped, stderr gets none."""
    t = spawn(one_python, STUCK)
    t.wait_line("READY")
    t.wait_agent()
    out = on_terminal([CLI, "-t", str(t.pid), "diagnose", "hang"])
    assert "\rprobing: diagnose hang: watching the main thread for 2.0 s, " \
        in out, out
    assert "\r\x1b[K" in out and "verdict: the main thread has not moved" in \
        out.rsplit("\r\x1b[K", 1)[1], out
    r = probing("diagnose", "hang", target=t.pid)
    assert r.rc == 0 and "diagnose hang:" not in r.err, r
