"""Issue 27, item 7 (its third part): `profile.native_idle=on` with
`flamegraph --native` made the program's poll() fail with EINTR 499 times
in 5 s.

The sampler signalled every idle thread for its native stack; a signal
cuts a blocked poll(), select(), epoll_wait() or sleep short whatever
SA_RESTART says, and C code (here libc's poll() called through ctypes,
which does not retry as Python's own select does) sees EINTR.  Now only
threads seen running are signalled; with native_idle an idle thread's
native leaf is the system call it waits in, read from /proc, and no
signal is sent (agent/profiler/sampler.h).

In read-only mode `nativeIdle: true` in probing/profile went round the
refusal of the profile.native_idle setting; it is refused the same way.
"""
import json
import socket

from conftest import probing, wait_for

POLLER = """\
import ctypes, ctypes.util, os, threading, time
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                   use_errno=True)
counts = {"calls": 0, "eintr": 0}

def poller():
    while not os.path.exists("done"):
        r = libc.poll(None, 0, 100)
        counts["calls"] += 1
        if r < 0 and ctypes.get_errno() == 4:
            counts["eintr"] += 1

th = threading.Thread(target=poller, name="poller")
th.start()
print("READY", flush=True)
th.join()
print("POLL", counts["calls"], "EINTR", counts["eintr"], flush=True)
while True:
    time.sleep(0.05)
"""


def test_native_idle_does_not_interrupt_poll(spawn, python, tmp_path):
    t = spawn(python, POLLER)
    t.wait_line("READY")
    t.wait_agent()
    r = probing("config", "profile.native_idle=on", target=t.pid)
    assert r.rc == 0, r
    out = tmp_path / "fg.folded"
    r = probing("flamegraph", "--native", "--idle", "--hz", "1000", "-d",
                "3s", "-o", str(out), target=t.pid, timeout=120)
    assert r.rc == 0, r
    (tmp_path / "done").write_text("")
    t.wait_line("EINTR")
    line = [l for l in t.output().splitlines() if l.startswith("POLL")][0]
    calls, eintr = int(line.split()[1]), int(line.split()[3])
    assert calls > 0, line
    assert eintr == 0, line
    # The idle thread's samples end in the call it waits in (then the
    # "(idle)" of --idle).
    folded = out.read_text()
    poller = [l for l in folded.splitlines() if "poller" in l]
    assert any("poll];(idle)" in l and "[system call: " in l
               for l in poller), folded[-3000:]


def frame(obj):
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_msg(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        assert chunk, buf
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = int(head.split(b":")[1])
    while len(rest) < n:
        chunk = s.recv(65536)
        assert chunk, rest
        rest += chunk
    return json.loads(rest[:n])


IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""


def test_readonly_refuses_native_idle_in_the_request(spawn, python):
    t = spawn(python, IDLE, env={"PROBING_READONLY": "1"})
    t.wait_line("READY")
    t.wait_agent()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect("\0probing-%d" % t.pid)
    try:
        s.sendall(frame({"seq": 1, "type": "request",
                         "command": "probing/profile",
                         "arguments": {"action": "start", "native": True,
                                       "nativeIdle": True, "hz": 100}}))
        m = read_msg(s)
    finally:
        s.close()
    assert m["success"] is False, m
    assert "read-only" in m.get("message", "") + json.dumps(m), m
    r = probing("perf", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    assert json.loads(r.out)["running"] is False, r.out
    # Without it the same start is allowed (native stacks of running
    # threads only).
    r = probing("perf", "--native", target=t.pid)
    assert r.rc == 0, r
