"""Native stacks took two of the program's descriptors for good, and could
write into its files.

libunwind checks that memory is readable by write()ing a byte of it to a
pipe of its own, made at the lowest free numbers (3 and 4) when native
stacks were first taken (`flamegraph --native`; on 3.14, when the agent
started) and kept for the life of the process.  The program lost two
numbers of its RLIMIT_NOFILE (sid's run of test_sampler_fds counted them
going).  Worse, a program that closes every descriptor (os.closerange, as
daemonizing code does) and opens files of its own at those numbers had
libunwind read from them and close them at its next unwind.

The program here, busy hashing: its descriptors after a native flamegraph (none of the
agent's may be below 512); then it closes every descriptor above 2 and
opens files of its own until they fill the numbers up to the highest it
had (libunwind's old pipe's among them), and a
second native flamegraph must work without reading, writing or closing any
of them.
"""
import os
import sys

from conftest import probing, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "profile"))
import formats  # noqa: E402

PROGRAM = """\
import hashlib, os, time

def busy_until(name):
    # In C (a hash) rather than asleep: a native stack is taken only of
    # a thread on a CPU.
    data = b"x" * 65536
    while not os.path.exists(name):
        hashlib.sha256(data).digest()

def listing():
    out = {}
    for n in os.listdir("/proc/self/fd"):
        try:
            out[int(n)] = os.readlink("/proc/self/fd/" + n)
        except OSError:  # listdir's own, closed by now
            pass
    return out

def fds():
    # Open in four looks 150 ms apart, on the same file: the agent's own
    # reads of /proc hold a number for an instant (one may be caught in
    # a look, or in two on a loaded machine), libunwind's pipe stays.
    looks = []
    for _ in range(4):
        looks.append(listing())
        time.sleep(0.15)
    return {fd: what for fd, what in looks[0].items()
            if all(l.get(fd) == what for l in looks[1:])}

print("READY", flush=True)
busy_until("go")
before = fds()
print("FDS", before, flush=True)
before = sorted(before)
os.closerange(3, 65536)
mine = {}
# Files at every number up to the highest it had.  A number the agent
# holds for an instant (rebuilding what closerange took from it) is left
# to it: a dup2() onto it would be the one race fdown.h leaves open.
while len(mine) < max(before) - 1:
    f = os.open("new", os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    os.rename("new", "mine-%d" % f)
    os.write(f, b"program data %d\\n" % f)
    # At the start: a byte read from it would move the offset.
    mine[f] = os.lseek(f, 0, os.SEEK_SET)
print("CLOSED", flush=True)
busy_until("done")
bad = []
for fd, off in mine.items():
    try:
        if (os.lseek(fd, 0, os.SEEK_CUR) != off
                or open("mine-%d" % fd, "rb").read()
                != b"program data %d\\n" % fd):
            bad.append(fd)
    except OSError as e:
        bad.append((fd, e.strerror))
print("RESULT", bad, flush=True)
while True:
    time.sleep(0.05)
"""


def native_flamegraph(t, out):
    """A native flamegraph of the busy program: its stacks must go on below
    Python's frames into the interpreter's C ones, down to main."""
    r = probing("flamegraph", "--native", "-d", "1s", "-o", out,
                target=t.pid, timeout=60)
    assert r.rc == 0, r
    stacks = formats.parse_folded(out.read_text())
    native = [fr for fr, _ in stacks
              if any("main" in f.lower() for f in fr)]
    assert native, stacks[:5]


def test_native_stacks_take_no_number_of_the_programs(spawn, python,
                                                      tmp_path):
    t = spawn(python, PROGRAM)
    t.wait_line("READY")
    t.wait_agent()
    native_flamegraph(t, tmp_path / "first.folded")
    (tmp_path / "go").write_text("")
    t.wait_line("FDS")
    line = [l for l in t.output().splitlines() if l.startswith("FDS")][0]
    before = eval(line.split(" ", 1)[1])
    assert {fd: what for fd, what in before.items() if 2 < fd < 512} == {}, \
        line
    t.wait_line("CLOSED")

    def answers():
        r = probing("eval", "1 + 1", target=t.pid, timeout=10)
        return r.rc == 0 and r.out.strip() == "2"
    wait_for(answers, timeout=20, what="the agent to listen again")
    native_flamegraph(t, tmp_path / "second.folded")
    (tmp_path / "done").write_text("")
    t.wait_line("RESULT")
    line = [l for l in t.output().splitlines() if l.startswith("RESULT")][0]
    assert line == "RESULT []", t.output()[-3000:]
    assert t.alive()
