"""Issue 27, item 3: the sampler kept one descriptor per thread for the
life of the process, and below 512 once the numbers above were full.

- A program with 2,000 threads that set its own RLIMIT_NOFILE to 1024:
  a 2 s `flamegraph` opened /proc/self/task/TID/syscall for each thread,
  at 512 and above while there was room, then at the program's own low
  numbers, and kept them all (1,013 files): the program's os.open()
  failed with EMFILE during the flamegraph and after it.
- A program that set RLIMIT_NOFILE to 12: a CLI session took one of the
  numbers 3-11 for as long as it lasted.

Now the per-thread files are open only while a run lasts, and only at
512 or above short of the limit's last 64 (fdown_open_take_high; the
threads without one have their state guessed, and the command says so);
a session that cannot have such a number is refused, with a warning in
the agent's log (fdown_take_high).
"""
import json
import os
import socket
import subprocess

from conftest import CLI, probing, wait_for

THREADS = 2000

MANY = """\
import errno, os, resource, threading, time
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
threading.stack_size(64 * 1024)
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(%d)]
for t in threads:
    t.start()
print("THREADS", len(threads), flush=True)
# The program's own files, opened and closed all along: none may fail.
failed = opened = 0
while not os.path.exists("done"):
    try:
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(16)]
        opened += 1
        for fd in fds:
            os.close(fd)
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
        failed += 1
    time.sleep(0.005)
print("OPENS", opened, "EMFILE", failed, flush=True)
stop.set()
for t in threads:
    t.join()
while True:
    time.sleep(0.05)
""" % THREADS


def task_files(pid):
    """The program's descriptors that are /proc task files (the
    sampler's)."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            path = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if "/task/" in path:
            out.append((int(fd), path))
    return out


def test_2000_threads_under_ulimit_1024(spawn, python, tmp_path):
    t = spawn(python, MANY)
    t.wait_line("THREADS %d" % THREADS, timeout=120)
    t.wait_agent()
    r = probing("flamegraph", "-d", "2s", "-o", str(tmp_path / "fg.folded"),
                target=t.pid, timeout=300)
    assert r.rc == 0, r
    # Every per-thread file is closed when the run ends.
    left = task_files(t.pid)
    (tmp_path / "done").write_text("")
    t.wait_line("EMFILE")
    assert left == [], "%d task files left open: %r" % (len(left), left[:5])
    line = [l for l in t.output().splitlines() if l.startswith("OPENS")][0]
    assert line.split()[-1] == "0", line
    # Those it could not open without taking the program's numbers are
    # said.
    assert "guessed from their CPU time" in r.err, r.err


SCARCE = """\
import errno, os, resource, time
resource.setrlimit(resource.RLIMIT_NOFILE, (12, 12))

def room():
    fds = []
    try:
        while True:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
    for fd in fds:
        os.close(fd)
    return len(fds)

def most_room():
    # The agent's own reads (of /proc/self/status, say) hold a number for
    # an instant: the most of five counts is what stays taken.
    counts = []
    for _ in range(5):
        counts.append(room())
        time.sleep(0.02)
    return max(counts)

print("ROOM", most_room(), flush=True)
while not os.path.exists("check"):
    time.sleep(0.01)
print("NOW", most_room(), flush=True)
while True:
    time.sleep(0.05)
"""


def frame(obj):
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_session_under_rlimit_12_takes_no_number_of_the_programs(
        spawn, python, tmp_path):
    """The program's limit is 12 (set after the agent started): a session
    that connects is refused rather than given a number below 12; while
    it would be connected the program can still open as many files as
    before."""
    t = spawn(python, SCARCE)
    t.wait_line("ROOM")
    t.wait_agent()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    try:
        s.connect("\0probing-%d" % t.pid)
        # Before the fix: an answer, the session holding a low number.
        # After: the connection closed.
        try:
            s.sendall(frame({"seq": 1, "type": "request",
                             "command": "probing/config"}))
            answer = s.recv(65536)
        except (BrokenPipeError, ConnectionResetError):
            answer = b""
        (tmp_path / "check").write_text("")
        t.wait_line("NOW")
    finally:
        s.close()
    out = t.output()
    room = [l.split()[1] for l in out.splitlines() if l[:4] in ("ROOM", "NOW ")]
    assert room[0] == room[1], (room, answer[:200])
    assert answer == b"", answer[:200]
    wait_for(lambda: "refused a client" in t.output(),
             what=lambda: "the warning: " + t.output()[-2000:])
    assert "RLIMIT_NOFILE 12" in t.output(), t.output()[-2000:]
