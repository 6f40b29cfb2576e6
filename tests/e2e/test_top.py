"""probing top (issue 31): the functions where a busy target spends its
time, refreshing in place in a real terminal (tmux: keys sent, the screen
read back), a table per interval on a pipe, one with --once; its numbers
against a known 70/30 workload; --gil against a thread that runs without
the GIL; the terminal given back on q and on Ctrl-C; the profile it
started stopped on the way out, and ending by itself when top is
killed."""
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from conftest import CLI, PYTHONS, probing, wait_for

# hot_a does 7 parts of the work, hot_b 3, in one thread.
WORK = """\
import threading
def hot_a():
    x = 0
    for i in range(7000):
        x += i * i
    return x

def hot_b():
    x = 0
    for i in range(3000):
        x += i * i
    return x

def loop():
    while True:
        hot_a()
        hot_b()

print("READY", flush=True)
loop()
"""

# A thread hashing (C, the GIL released) beside one running Python. The
# hashing thread is on a CPU while it hashes; between two hashes it waits
# for the GIL, up to the switch interval, off the CPU. 32 MiB a hash (16 ms
# at 2 GB/s, SHA extensions) against a 1 ms interval keeps it hashing most
# of its time on any machine (4 MiB against 5 ms gave it 8% on CI's).
GIL = """\
import hashlib, sys, threading
sys.setswitchinterval(0.001)
data = b"x" * (1 << 25)

def hasher():
    while True:
        hashlib.sha256(data).digest()

def spinner():
    x = 0
    while True:
        x += 1

threading.Thread(target=hasher, name="hasher", daemon=True).start()
print("READY", flush=True)
spinner()
"""


@pytest.fixture
def one_python():
    """The terminal's behaviour is the CLI's, whichever Python the target
    runs: one Python (the suite's time)."""
    return PYTHONS[0]


def start(spawn, python, code):
    t = spawn(python, code)
    t.wait_line("READY")
    t.wait_agent()
    return t


def profiling(pid):
    r = probing("perf", "-f", "json", target=pid)
    assert r.rc == 0, r
    return "running" if r.json()["running"] else "stopped"


def rows_of(r):
    assert r.rc == 0, r
    return {row["function"]: row for row in r.json()}


def test_numbers_of_a_known_70_30_workload(spawn, python):
    t = start(spawn, python, WORK)
    rows = rows_of(probing("top", "--once", "-d", "3s", "-f", "json",
                           target=t.pid))
    a, b = float(rows["hot_a"]["%own"]), float(rows["hot_b"]["%own"])
    # The two loops' shares of the thread's time (calls and the loop
    # around them cost a little): 70/30 within a few points.
    assert 62 <= a <= 80 and 20 <= b <= 38 and a + b >= 95, rows
    assert float(rows["loop"]["%total"]) >= 99, rows
    # Times are samples at the rate: at most the 3 s of one busy thread
    # (the sampler skips the ticks it is late for, on a loaded machine).
    total = float(rows["loop"]["total time"].rstrip("s"))
    assert 1.0 <= total <= 3.6, rows
    # The profile top started is stopped.
    assert profiling(t.pid) == "stopped"


def test_a_table_per_interval_on_a_pipe(spawn, one_python):
    t = start(spawn, one_python, WORK)
    r = probing("top", "-i", "500ms", "-d", "2s", target=t.pid)
    assert r.rc == 0, r
    heads = [l for l in r.out.splitlines() if l.startswith("# ")]
    assert 3 <= len(heads) <= 6, r.out
    assert all(" samples (100 Hz, on CPU)" in h for h in heads), heads
    tables = [b for b in r.out.split("\n\n") if b.strip()]
    last = tables[-1].splitlines()
    assert last[1].split("\t")[:2] == ["%OWN", "%TOTAL"], last
    assert last[2].split("\t")[4] == "hot_a", last
    assert profiling(t.pid) == "stopped"


def test_gil_counts_only_the_thread_holding_it(spawn, python):
    t = start(spawn, python, GIL)
    every = rows_of(probing("top", "--once", "-d", "2s", "-f", "json",
                            target=t.pid))
    def share(rows, name):
        return float(rows[name]["%total"]) if name in rows else 0.0
    # Two threads on a CPU each: about half of the samples each.
    assert share(every, "hasher") >= 25 and share(every, "spinner") >= 25, \
        every
    held = rows_of(probing("top", "--once", "-d", "2s", "--gil", "-f",
                           "json", target=t.pid))
    # The hashing thread runs in C without the GIL, and holds it only
    # between two hashes: (nearly) gone with --gil.
    assert share(held, "spinner") >= 80 and share(held, "hasher") <= 10, held


class Tmux:
    """A real terminal: tmux on a socket of its own, one window."""

    def __init__(self, argv, cols=100, rows=24):
        self.sock = "probing-top-%s" % uuid.uuid4().hex[:8]
        cmd = " ".join(argv) + "; echo EXITED rc=$?; stty -a; sleep 60"
        # bash: a shell that goes on after its child handled Ctrl-C
        # (dash, as sh, dies of it).
        subprocess.run(["tmux", "-L", self.sock, "new-session", "-d", "-x",
                        str(cols), "-y", str(rows), "bash", "-c", cmd],
                       check=True)

    def screen(self):
        return subprocess.run(["tmux", "-L", self.sock, "capture-pane",
                               "-p", "-J", "-S", "-100"],
                              capture_output=True, text=True).stdout

    def keys(self, *keys):
        subprocess.run(["tmux", "-L", self.sock, "send-keys", "-t", "0",
                        *keys], check=True)

    def wait(self, text, timeout=30):
        wait_for(lambda: text in self.screen(), timeout,
                 lambda: "%r on the screen:\n%s" % (text, self.screen()))

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"],
                       capture_output=True)


@pytest.fixture
def tmux():
    if not shutil.which("tmux"):
        pytest.skip("needs tmux (scripts/install-deps installs it)")
    made = []

    def make(argv, **kw):
        made.append(Tmux(argv, **kw))
        return made[-1]
    yield make
    for m in made:
        m.close()


def test_live_in_a_terminal_keys_and_the_terminal_given_back(spawn,
                                                             one_python,
                                                             tmux):
    t = start(spawn, one_python, WORK)
    term = tmux([CLI, "-t", str(t.pid), "top"])
    term.wait("hot_a")
    screen = term.screen()
    assert screen.startswith("probing top: pid %d" % t.pid), screen
    assert "sorted by %own" in screen, screen
    lines = screen.splitlines()
    first = [l for l in lines if "hot_" in l][0]
    assert "hot_a" in first, screen       # sorted by %own: hot_a first
    # Refreshes: the seconds in all go up.
    def in_all():
        m = re.search(r"\(([\d.]+) s in all\)", term.screen())
        return float(m.group(1)) if m else 0.0
    wait_for(lambda: in_all() >= 2.0, 30, lambda: term.screen())
    term.keys("2")
    term.wait("sorted by %total")
    term.keys("q")
    term.wait("EXITED rc=0")
    screen = term.screen()
    # The alternate screen left: top's table is gone; the terminal's
    # modes are back (echo, canonical input).
    assert "hot_a" not in screen, screen
    assert " icanon " in screen and " echo " in screen, screen
    wait_for(lambda: profiling(t.pid) == "stopped", 10, "the profile to stop")
    assert t.alive()


def test_ctrl_c_gives_the_terminal_back(spawn, one_python, tmux):
    t = start(spawn, one_python, WORK)
    term = tmux([CLI, "-t", str(t.pid), "top", "--native"])
    term.wait("hot_a")
    term.keys("C-c")
    term.wait("EXITED rc=0")
    screen = term.screen()
    assert "hot_a" not in screen and " icanon " in screen, screen
    wait_for(lambda: profiling(t.pid) == "stopped", 10, "the profile to stop")


def test_killed_top_leaves_a_run_that_ends_by_itself(spawn, one_python):
    t = start(spawn, one_python, WORK)
    top = subprocess.Popen([CLI, "-t", str(t.pid), "top"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: profiling(t.pid) == "running", 10, "top's profile")
        time.sleep(1.5)
    finally:
        top.send_signal(signal.SIGKILL)
        top.wait()
    assert profiling(t.pid) == "running"
    # Its lease is 10 s past its last refresh.
    wait_for(lambda: profiling(t.pid) == "stopped", 20,
             "the profile to end by itself")
    assert t.alive()


def test_a_running_profile_is_read_and_left_running(spawn, one_python):
    t = start(spawn, one_python, WORK)
    assert probing("perf", "--cc", target=t.pid).rc == 0
    rows = rows_of(probing("top", "--once", "-d", "1s", "-f", "json",
                           target=t.pid))
    assert "hot_a" in rows, rows
    assert profiling(t.pid) == "running"
    assert probing("perf", "--stop", target=t.pid).rc == 0


def test_usage_errors(spawn, one_python):
    t = start(spawn, one_python, WORK)
    for args, says in ((["--sort", "name"], "--sort is own, total"),
                       (["--interval", "10ms"], "--interval must be"),
                       (["--thread", "x"], "--thread takes"),
                       (["--hz", "0"], "--hz must be")):
        r = probing("top", *args, target=t.pid)
        assert r.rc == 2 and says in r.err, r
    assert profiling(t.pid) == "stopped"
