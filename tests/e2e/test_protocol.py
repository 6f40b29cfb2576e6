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


def test_strings_are_taken_whole_or_refused(spawn, python):
    """A string holding U+0000 is refused, never cut short (an expression
    `1\\u0000+1` ran as `1`, only the first statement of SQL with a NUL
    ran); text that is not UTF-8 is refused; and what the agent sends is
    UTF-8 even when what it echoes was not."""
    t = start(spawn, python)
    s = connect(t.pid)
    cases = [
        {"command": "evaluate", "arguments": {"expression": "1\u0000+1"}},
        {"command": "probing/query",
         "arguments": {"sql": "select 1\u0000; select 2"}},
        {"command": "probing/config",
         "arguments": {"set": {"query.max_rows": "5\u0000000"}}},
    ]
    for i, c in enumerate(cases):
        s.sendall(frame(dict(c, seq=i + 1, type="request")))
        r = read_msg(s)
        assert r is not None and r["success"] is False, (c, r)
        assert "U+0000" in r["message"], r
    raw = (b'{"seq":9,"type":"request","command":"evaluate",'
           b'"arguments":{"expression":"\'\xff\'"}}')
    s.sendall(frame(raw))
    r = read_msg(s)  # json.loads: the reply is UTF-8
    assert r["success"] is False and "not valid UTF-8" in r["message"], r
    # The session goes on.
    s.sendall(frame({"seq": 10, "type": "request", "command": "evaluate",
                     "arguments": {"expression": "1+1"}}))
    r = read_msg(s)
    assert r["success"] and r["body"]["result"] == "2", r
    s.close()
    # The right token with a NUL and more after it is not the token (it
    # was taken for it).
    token = "s3cret-token-0123456789abcdef"
    with socket.socket() as f:
        f.bind(("127.0.0.1", 0))
        port = f.getsockname()[1]
    t2 = spawn(python, IDLE, env={"PROBING_TOKEN": token,
                                  "PROBING_PORT": str(port)})
    t2.wait_line("READY")
    t2.wait_agent()
    for token_sent, ok in ((token + "\u0000zzz", False), (token, True)):
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(frame({"seq": 1, "type": "request", "command": "initialize",
                         "arguments": {"probingToken": token_sent}}))
        r = read_msg(c)
        assert r is not None and r["success"] is ok, (token_sent, r)
        c.close()
    assert t.alive() and t2.alive()


def test_http_at_the_port_is_told_what_it_is(spawn, python):
    """A browser or curl at the agent's TCP port gets one line of plain
    HTTP that says this is a DAP port; the program's streams get nothing
    (broken streams of any client are not logged there either)."""
    import urllib.error
    import urllib.request
    with socket.socket() as f:
        f.bind(("127.0.0.1", 0))
        port = f.getsockname()[1]
    t = spawn(python, IDLE, env={"PROBING_PORT": str(port)})
    t.wait_line("READY")
    t.wait_agent()
    for method in ("GET", "HEAD", "POST"):
        req = urllib.request.Request("http://127.0.0.1:%d/" % port, method=method,
                                     data=b"x=1" if method == "POST" else None)
        try:
            urllib.request.urlopen(req, timeout=10)
            assert False, "no error status"
        except urllib.error.HTTPError as e:
            assert e.code == 400, e
            assert e.headers["Content-Type"].startswith("text/plain")
            text = e.read().decode()
            if method != "HEAD":
                assert "Debug Adapter Protocol, not HTTP" in text, text
                assert "probing -t HOST:PORT" in text, text
    # Not HTTP, not DAP: closed, and not said in the program's stderr.
    for data in (b"garbage\r\n\r\n", b"X-Header: 1\r\n\r\n{}"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(data)
            assert read_msg(c) is None
    # The port still serves DAP.
    r = probing("eval", "6*7", target="127.0.0.1:%d" % port)
    assert r.rc == 0 and r.out.strip() == "42", r
    time.sleep(0.3)
    assert t.output() == "READY\n", t.output()
    assert t.alive()
