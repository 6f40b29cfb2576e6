"""Issue 27, item 5: the agent's log lines land in the program's file.

The program closes descriptors 1 and 2 and opens two files of its own,
which get those numbers (a daemon does this; so does any program that
reuses the lowest free number).  A setting that makes the agent warn
(`config data.dir=/proc/nope`: the recording cannot be made) wrote
"[probing PID] not recording to disk: ..." into the file at descriptor 2.

The agent's stderr is the file descriptor 2 held when the agent started
(agent/core/log.h): the warning goes there (the target's output file
here), never into the program's files.
"""
import os

from conftest import probing, wait_for

PROGRAM = """\
import os, time
print("READY", flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
os.close(1)
os.close(2)
a = os.open("data-1", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
b = os.open("data-2", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
assert (a, b) == (1, 2), (a, b)
os.write(b, b"program data\\n")
open("reopened", "w").write("%d %d" % (a, b))
while not os.path.exists("done"):
    time.sleep(0.05)
"""


def setting(pid, name):
    r = probing("config", target=pid)
    assert r.rc == 0, r
    for line in r.out.splitlines():
        parts = line.split("\t")
        if parts[0] == name:
            return parts[1]
    raise AssertionError("no setting %s in %r" % (name, r.out))


def test_log_lines_never_land_in_the_programs_files(spawn, python, tmp_path):
    t = spawn(python, PROGRAM)
    t.wait_line("READY")
    t.wait_agent()
    (tmp_path / "go").write_text("")
    wait_for(lambda: (tmp_path / "reopened").exists(), what="the program's files")
    bad = "/proc/nope-%d" % t.pid
    r = probing("config", "data.dir=" + bad, target=t.pid)
    assert r.rc == 0, r
    # The recording thread tried, failed and warned.
    wait_for(lambda: bad in setting(t.pid, "data.status"),
             what="the recording thread to try " + bad)
    # Said somewhere: on the agent's stderr (or, before the fix, in the
    # program's file at descriptor 2).
    data2 = tmp_path / "data-2"
    wait_for(lambda: bad in t.output() or bad.encode() in data2.read_bytes(),
             what=lambda: "the warning: " + t.output()[-2000:])
    (tmp_path / "done").write_text("")
    for name in ("data-1", "data-2"):
        text = (tmp_path / name).read_bytes()
        assert b"[probing" not in text, (name, text[:2000])
    assert (tmp_path / "data-2").read_bytes() == b"program data\n"
    assert (tmp_path / "data-1").read_bytes() == b""
    line = [l for l in t.output().splitlines() if bad in l][0]
    assert line.startswith("[probing %d]" % t.pid), line


def test_injected_agent_does_not_take_a_data_file_for_stderr(spawn, python,
                                                             tmp_path):
    """The program closed 1 and 2 and opened its data files there before
    the agent came in (inject): descriptor 2 is a file open for reading
    and writing, which no shell or launcher opens as a log.  The agent
    has no stderr then; its warning is dropped, the data untouched."""
    t = spawn(python, PROGRAM, agent=None)
    t.wait_line("READY")
    (tmp_path / "go").write_text("")
    wait_for(lambda: (tmp_path / "reopened").exists(), what="the program's files")
    r = probing("inject", target=t.pid, timeout=120)
    assert r.rc == 0, r
    bad = "/proc/nope-%d" % t.pid
    r = probing("config", "data.dir=" + bad, target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: bad in setting(t.pid, "data.status"),
             what="the recording thread to try " + bad)
    # The warning is written before the status is set (record.c).
    (tmp_path / "done").write_text("")
    assert (tmp_path / "data-2").read_bytes() == b"program data\n"
    assert (tmp_path / "data-1").read_bytes() == b""
