"""Errors a person understands, with distinct exit codes."""
import os
import socket
import subprocess

from conftest import probing


def test_no_such_process():
    r = probing("backtrace", target=4194999)
    assert r.rc == 3, r
    assert "no such process" in r.err.lower()


def test_connection_refused_tcp():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = probing("backtrace", target="127.0.0.1:%d" % port)
    assert r.rc == 6, r
    assert "refused" in r.err.lower()


def test_agent_not_answering():
    # a listener that accepts and never answers
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    r = probing("--timeout", "500", "backtrace", target="127.0.0.1:%d" % port)
    s.close()
    assert r.rc == 5, r
    assert "not answering" in r.err.lower() or "timed out" in r.err.lower()


def test_usage_errors():
    r = probing("backtrace")
    assert r.rc == 2 and "-t" in r.err
    r = probing("frobnicate", target=1)
    assert r.rc == 2
    r = probing("--help")
    assert r.rc == 0
    for cmd in ["list", "backtrace", "eval", "query", "repl", "config", "dap"]:
        assert cmd in r.out
        h = probing(cmd, "--help")
        assert h.rc == 0 and cmd in h.out, (cmd, h)


def test_target_from_environment():
    r = probing("backtrace", env={"PROBING_TARGET": "4194999"})
    assert r.rc == 3, r


def test_a_pid_that_is_not_python_says_so(tmp_path):
    """Not "has no Probing agent ... inject" (which then says "not
    CPython"): what the pid is."""
    p = subprocess.Popen(["sleep", "60"])
    try:
        r = probing("backtrace", target=p.pid)
        assert r.rc == 4 and "is not a Python process" in r.err, r
        assert "inject" not in r.err, r
    finally:
        p.kill()
        p.wait()


def test_a_thread_id_names_its_process(spawn, python):
    t = spawn(python, """\
import threading, time
ev = threading.Event()
threading.Thread(target=ev.wait, name="waiter").start()
print("READY", flush=True)
time.sleep(60)
""", agent=None)
    t.wait_line("READY")
    tids = [int(x) for x in os.listdir("/proc/%d/task" % t.pid)
            if int(x) != t.pid]
    assert tids, t.pid
    r = probing("backtrace", target=tids[0])
    assert r.rc == 2, r
    assert "%d is a thread of process %d" % (tids[0], t.pid) in r.err, r
    assert "probing -t %d" % t.pid in r.err, r
    # The process itself: Python, no agent.
    r = probing("backtrace", target=t.pid)
    assert r.rc == 4 and "has no Probing agent" in r.err, r


def test_no_target_is_said_by_every_command_that_needs_one():
    """With no -t (and no PROBING_TARGET) a command that needs a target
    says so, with the command that lists them (diagnose said "missing
    value for option '-t'")."""
    env = {"PROBING_TARGET": ""}
    for words in (["backtrace"], ["diagnose", "hang"], ["query", "SELECT 1"],
                  ["memory"]):
        r = probing(*words, env=env)
        assert r.rc == 2 and "no target: give -t PID" in r.err and \
            "probing list" in r.err, (words, r)
