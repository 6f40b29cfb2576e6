"""Issue 27, item 8: stuck evaluates starved the agent.

Four DAP `evaluate` requests with `timeoutMs: 0` (no interrupt) blocked
in C took all four workers: `probing query "select 1"` got no answer,
nor did backtraces or config.  ~60 clients that sent an evaluate and
went away kept their sessions (each waited for its answer behind the
stuck ones), until the agent refused new sessions: the owner's own
`probing config` too.  And a `cancel` of a stuck evaluate was never
answered.

Now requests that run code in the target hold at most two workers (one a
session); one more waits a moment for a place, then is refused with a
message that names the evaluates holding the places and says what to
do.  A client gone altogether loses its session at once; a cancelled
evaluate blocked in C is answered ("did not stop when cancelled").
"""
import json
import os
import socket
import time

from conftest import probing, wait_for

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""

# Blocked in C: no KeyboardInterrupt reaches it before it returns.
BLOCKED = "import time; time.sleep(3600)"


class Session:
    """A DAP client on the agent's unix socket.  Its reads wait at most
    `guard` seconds: a guard against a hang, not a measure."""

    def __init__(self, pid, guard=60):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(guard)
        self.s.connect("\0probing-%d" % pid)
        self.seq = 0
        self.buf = b""
        self.pending = []

    def send(self, command, args=None):
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request",
                           "command": command,
                           "arguments": args or {}}).encode()
        self.s.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return self.seq

    def _more(self):
        chunk = self.s.recv(65536)
        if not chunk:
            raise EOFError("the agent closed the session")
        self.buf += chunk

    def read(self):
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        n = int(head.split(b":")[1])
        self.buf = rest
        while len(self.buf) < n:
            self._more()
        msg, self.buf = self.buf[:n], self.buf[n:]
        return json.loads(msg)

    def answer(self, seq):
        def mine(m):
            return m.get("type") == "response" and m["request_seq"] == seq
        for i, m in enumerate(self.pending):
            if mine(m):
                return self.pending.pop(i)
        while True:
            m = self.read()
            if mine(m):
                return m
            self.pending.append(m)

    def request(self, command, args=None):
        return self.answer(self.send(command, args))

    def close(self):
        self.s.close()


def start(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    return t


def stuck_evaluate(pid):
    s = Session(pid)
    assert s.request("initialize", {"adapterID": "test"})["success"]
    s.send("evaluate", {"expression": BLOCKED, "timeoutMs": 0})
    return s


def test_stuck_evaluates_leave_the_read_only_paths(spawn, python):
    t = start(spawn, python)
    stuck = [stuck_evaluate(t.pid) for _ in range(4)]

    # The read-only paths answer.
    r = probing("query", "select 1", target=t.pid)
    assert r.rc == 0 and r.out.split()[-1] == "1", r
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and "MainThread" in r.out, r
    r = probing("config", target=t.pid)
    assert r.rc == 0 and "agent.pid" in r.out, r

    # One more evaluate is answered: refused, naming what holds the
    # places and what to do.
    s = Session(t.pid)
    assert s.request("initialize", {"adapterID": "test"})["success"]
    r = s.request("evaluate", {"expression": "1 + 1"})
    assert not r["success"], r
    assert BLOCKED in r["message"], r
    assert "at most" in r["message"] and "cancel" in r["message"], r
    s.close()
    for x in stuck:
        x.close()
    assert t.alive()


def test_a_cancelled_stuck_evaluate_is_answered(spawn, python, tmp_path):
    t = start(spawn, python)
    marker = str(tmp_path / "running")
    s = Session(t.pid)
    assert s.request("initialize", {"adapterID": "test"})["success"]
    seq = s.send("evaluate", {
        "expression": "import os, time; os.close(os.open(%r, os.O_CREAT)); "
                      "time.sleep(3600)" % marker,
        "timeoutMs": 0})
    # Cancelled once it runs, blocked in C.
    wait_for(lambda: os.path.exists(marker), what="the evaluate to run")
    c = s.send("cancel", {"requestId": seq})
    r = s.answer(seq)
    assert not r["success"] and "did not stop" in r["message"], r
    assert s.answer(c)["success"]
    # The stuck code costs its own place only: the next evaluate runs.
    r = s.request("evaluate", {"expression": "1 + 1"})
    assert r["success"] and r["body"]["result"] == "2", r
    s.close()


def test_abandoned_evaluates_give_their_sessions_back(spawn, python):
    t = start(spawn, python)
    stuck = [stuck_evaluate(t.pid) for _ in range(4)]
    # More clients than the agent has sessions for (64 on the unix
    # socket), each sending an evaluate and going away; before, each kept
    # its session.  A refused connection is retried, a bounded number
    # of times.
    refused = 0
    for _ in range(80):
        for attempt in range(50):
            try:
                s = Session(t.pid, guard=30)
                assert s.request("initialize", {"adapterID": "t"})["success"]
                break
            except (ConnectionError, EOFError):
                refused += 1
                time.sleep(0.1)
        else:
            raise AssertionError("no session after %d refusals" % refused)
        s.send("evaluate", {"expression": BLOCKED, "timeoutMs": 0})
        s.close()
    r = probing("config", target=t.pid)
    assert r.rc == 0 and "agent.pid" in r.out, r
    r = probing("query", "select 1", target=t.pid)
    assert r.rc == 0, r
    for x in stuck:
        x.close()
    assert t.alive()
