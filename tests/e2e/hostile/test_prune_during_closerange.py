"""The agent's walk of the recordings closed one of the program's files.

Once a minute (and a second after it starts) the agent's recording thread
walks the data directory to drop old recordings (docs/recording.md,
retention).  It read the directory with opendir(), at the lowest free
number, for as long as the walk lasted — long, with thousands of
recordings on a niced thread — and closed it with closedir().  A program
that closes every descriptor meanwhile (os.closerange, as daemonizing
code does) and opens files of its own had one of them closed under it by
the agent's closedir(): EBADF on its next read (CI: `test_unwind_pipe`
saw fd 3 closed, with a data directory of the whole suite's runs).

The program here closes every descriptor and opens four files, over and
over, for four seconds from its start (the first walk comes a second after
the agent's start), with 3,000 old recordings to walk; every file it
opened must still be its own when it looks again.
"""
import os

from conftest import wait_for

PROGRAM = """\
import os, time
end = time.time() + 4.0
bad, rounds = [], 0
print("READY", flush=True)
while time.time() < end:
    os.closerange(3, 65536)
    mine = {}
    for k in range(4):
        fd = os.open("mine-%d" % k, os.O_RDWR | os.O_CREAT, 0o600)
        mine[fd] = os.fstat(fd).st_ino
    time.sleep(0.002)
    for fd, ino in mine.items():
        try:
            if os.fstat(fd).st_ino != ino:
                bad.append((fd, "another file"))
        except OSError as e:
            bad.append((fd, e.strerror))
    rounds += 1
print("RESULT", rounds, bad[:8], flush=True)
while True:
    time.sleep(0.05)
"""


def test_the_recordings_walk_leaves_the_programs_files_alone(spawn, python,
                                                            tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # Recordings of processes that are gone (pid 1 started long after
    # 2026-01-01): each is looked at, none is old enough to remove.
    for i in range(3000):
        run = data / ("old%04d-1-20260101T000000" % i)
        run.mkdir()
        (run / "run.json").write_text("{}\n")
    t = spawn(python, PROGRAM, env={"PROBING_DATA_DIR": str(data)})
    t.wait_line("READY")
    t.wait_line("RESULT", timeout=60)
    line = [l for l in t.output().splitlines() if l.startswith("RESULT")][0]
    rounds, bad = line.split(" ", 2)[1:]
    assert int(rounds) > 50 and bad == "[]", t.output()[-3000:]
    # The agent was recording there (so it walked it), and still answers.
    wait_for(lambda: any("-%d-" % t.pid in n for n in os.listdir(data)), 30,
             "the agent's recording")
    t.wait_agent()
    assert t.alive()
