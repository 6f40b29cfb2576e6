"""The agent answers every bad input with an error, never a crash or hang."""
import json
import socket
import time

from conftest import probing

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def connect(pid):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0probing-%d" % pid)
    s.settimeout(10)
    return s


def frame(obj_or_text):
    body = obj_or_text if isinstance(obj_or_text, bytes) else json.dumps(obj_or_text).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_msg(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = int(head.split(b":")[1])
    while len(rest) < n:
        chunk = s.recv(65536)
        if not chunk:
            return None
        rest += chunk
    return json.loads(rest[:n])


def start(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    return t


def test_error_responses_keep_the_connection(spawn, python):
    t = start(spawn, python)
    s = connect(t.pid)
    cases = [
        ({"seq": 1, "type": "request", "command": "no/such"}, "unknown request"),
        ({"seq": 2, "type": "request", "command": "probing/query"}, "'sql' is required"),
        ({"seq": 3, "type": "request", "command": "probing/query", "arguments": {"sql": 5}}, "must be a string"),
        ({"seq": 4, "type": "request", "command": "probing/backtrace", "arguments": {"locals": "yes"}}, "must be a bool"),
        ({"seq": 5, "type": "request", "command": "evaluate", "arguments": {"expression": ["x"]}}, "must be a string"),
        ({"seq": 6, "type": "request", "command": "stackTrace", "arguments": {}}, "threadId"),
        ({"seq": 7, "type": "request", "command": "probing/config", "arguments": {"set": 3}}, "must be an object"),
        ({"seq": 8, "type": "request", "command": "evaluate", "arguments": 7}, ""),
    ]
    for msg, text in cases:
        s.sendall(frame(msg))
        r = read_msg(s)
        assert r["type"] == "response" and r["success"] is False, (msg, r)
        assert r["request_seq"] == msg["seq"]
        assert text in r["message"], (msg, r)
    # bad JSON inside a good frame: an error reply, same connection
    s.sendall(frame(b"{not json"))
    r = read_msg(s)
    assert r["success"] is False
    s.sendall(frame({"seq": 9, "type": "request", "command": "initialize"}))
    r = read_msg(s)
    assert r["success"] is True and r["request_seq"] == 9
    assert r["body"]["probing"]["pid"] == t.pid
    assert r["body"]["supportsCancelRequest"] is True
    s.close()
    assert t.alive()


def test_unrecoverable_frames_close_the_connection(spawn, python):
    t = start(spawn, python)
    bad = [
        b"Content-Length: banana\r\n\r\n{}",
        b"X-Header: 1\r\n\r\n{}",
        b"Content-Length: 99999999999\r\n\r\n",
        b"A" * 5000,
        b"Content-Length: 10\r\n\r\n" + b"[" * 10,
    ]
    for data in bad:
        s = connect(t.pid)
        s.sendall(data)
        # either an error reply then close, or a close
        got = []
        try:
            while True:
                m = read_msg(s)
                if m is None:
                    break
                got.append(m)
        except (ConnectionResetError, socket.timeout):
            pass
        assert all(m.get("success") is False for m in got), (data[:40], got)
        s.close()
    depth = b"[" * 100000 + b"]" * 100000
    s = connect(t.pid)
    s.sendall(frame(depth))
    r = read_msg(s)
    assert r is None or r["success"] is False
    s.close()
    assert t.alive()
    assert probing("eval", "1", target=t.pid).rc == 0


def test_garbage_storm(spawn, python):
    import random
    rnd = random.Random(4)
    t = start(spawn, python)
    for i in range(200):
        s = connect(t.pid)
        n = rnd.randint(1, 3000)
        data = bytes(rnd.getrandbits(8) for _ in range(n))
        if i % 2:
            data = frame(data)
        try:
            s.sendall(data)
        except OSError:
            pass
        s.close()
    assert t.alive()
    assert probing("eval", "1", target=t.pid).rc == 0


def test_client_that_never_reads(spawn, python):
    t = start(spawn, python)
    s = connect(t.pid)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    req = frame({"seq": 1, "type": "request", "command": "probing/query",
                 "arguments": {"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 10000) SELECT x, printf('%0500d', x) FROM c"}})
    for _ in range(30):
        try:
            s.sendall(req)
        except OSError:
            break
    time.sleep(2)
    # the agent keeps serving others
    r = probing("eval", "2+2", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "4", r
    s.close()
    assert t.alive()
