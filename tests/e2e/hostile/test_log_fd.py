"""Issue 27, item 5: the agent's log lines land in the program's file.

The program closes descriptors 1 and 2 and opens two files of its own,
which get those numbers (a daemon does this; so does any program that
reuses the lowest free number).  A setting that makes the agent warn
(`config data.dir=/proc/nope`: the recording cannot be made) wrote
"[probing PID] not recording to disk: ..." into the file at descriptor 2.

The agent's stderr is the file descriptor 2 held when the agent started
(agent/core/log.h), written only while descriptor 2 still holds it: never
into the program's files.  And no copy of it is kept: a review found that
a copy held a daemon's stderr pipe open, so its caller never saw the end.
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
    # Before the fix the warning was in the program's file at descriptor
    # 2 by now.  The agent's stderr was closed by the program: the line
    # is dropped (no copy of descriptor 2 is kept: it would hold a
    # daemon's caller's pipe open, test_stderr_copy_not_kept below).
    (tmp_path / "done").write_text("")
    for name in ("data-1", "data-2"):
        text = (tmp_path / name).read_bytes()
        assert b"[probing" not in text, (name, text[:2000])
    assert (tmp_path / "data-2").read_bytes() == b"program data\n"
    assert (tmp_path / "data-1").read_bytes() == b""
    for line in t.output().splitlines():
        assert bad not in line or line.startswith("[probing %d]" % t.pid), line


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


DAEMON = """\
import os, time
print("READY", flush=True)
# As a daemon does (gunicorn's daemonize): the standard streams to
# /dev/null, the caller's pipe let go.
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
os.close(null)
while True:
    time.sleep(0.05)
"""


def test_stderr_copy_not_kept(python, tmp_path):
    """A caller reading the daemon's stderr to its end (capture_output,
    $(...)) gets the end once the daemon let it go, agent or not."""
    import subprocess
    from conftest import USERBASE, agent_listening
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    env = dict(os.environ, PROBING="1", PYTHONUSERBASE=USERBASE)
    if os.environ.get("PROBING_TARGET_PRELOAD"):  # the ASan build's runtime
        env["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
    p = subprocess.Popen([python, str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=str(tmp_path))
    try:
        assert p.stdout.readline() == b"READY\n"
        wait_for(lambda: agent_listening(p.pid), what="the agent")
        # Both pipes end while the daemon lives on.
        assert p.stdout.read() == b""
        assert p.stderr.read() == b""
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()
