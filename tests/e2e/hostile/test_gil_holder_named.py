"""Issue 27, item 4 (its last clause): "GIL held by thread N" named the
agent's own thread.

While one backtrace's repr of a local held the GIL (a slow or blocked
__repr__ runs on one of the agent's GIL threads), another backtrace could
not take the GIL and said "the GIL is held by thread N": N was the
agent's probing-gil thread, one the program does not have (and
backtraces never show).  `eval` said the same in other words.

Now only a thread of the program is named as the holder; when the
agent's own call holds the GIL, the reply says so and what that call
runs.  Here the repr blocks in read(2) through ctypes.PyDLL (which keeps
the GIL) until the test writes to a FIFO.
"""
import os
import re
import subprocess

from conftest import CLI, probing

PROGRAM = """\
import ctypes, os, sys, time

libc = ctypes.PyDLL(None)        # PyDLL: the GIL stays held in calls
fd = os.open(sys.argv[1], os.O_RDWR)

class Slow:
    def __repr__(self):
        print("IN REPR", flush=True)
        buf = ctypes.create_string_buffer(1)
        libc.read(fd, buf, 1)    # blocks, holding the GIL
        return "slow"

def main():
    s = Slow()
    print("READY", flush=True)
    while True:
        time.sleep(0.05)

main()
"""


def comm(pid, tid):
    try:
        with open("/proc/%d/task/%d/comm" % (pid, tid)) as f:
            return f.read().strip()
    except OSError:
        return ""


def test_gil_holder_is_the_programs_thread_or_said_to_be_ours(spawn, python,
                                                              tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    t = spawn(python, PROGRAM, args=(fifo,))
    t.wait_line("READY")
    t.wait_agent()
    first = subprocess.Popen([CLI, "-t", str(t.pid), "backtrace", "--locals"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        t.wait_line("IN REPR")
        # The CLI's warning names no thread of the agent.
        r = probing("backtrace", target=t.pid)
        assert r.rc == 0, r
        for tid in re.findall(r"held by thread (\d+)", r.err):
            assert not comm(t.pid, int(tid)).startswith("probing"), r.err
        assert "held by the agent's own call (" in r.err, r.err
        # The reply says whose call holds it, and what that call runs.
        r = probing("backtrace", "-f", "json", target=t.pid)
        assert r.rc == 0, r
        gil = r.json()["gil"]
        assert not gil["acquired"], gil
        assert gil["holderIsAgent"] and gil["holder"] is None, gil
        assert "repr" in gil["holderCall"], gil
        assert "agent's own call" in gil["message"], gil
        # So does eval's refusal.
        r = probing("eval", "1", target=t.pid)
        assert r.rc != 0 and "agent's own call" in r.err, r
        assert "repr" in r.err, r
    finally:
        with open(fifo, "w") as f:
            f.write("x")
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and "MainThread" in out, (out, err)
    assert t.alive()
