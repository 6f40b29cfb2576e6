"""Remote access: the token TCP clients present, and read-only mode
(docs/security.md).

Every test gives the target and the CLI their own XDG_RUNTIME_DIR and HOME
(under tmp_path), so the user's real token file is never read or written.
Listeners are on 0.0.0.0 (an address other than loopback: the rule is about
the listen address); clients connect through the machine's own
non-loopback address when it has one, and through 127.0.0.1.
"""
import json
import os
import socket
import stat
import subprocess
import time

import pytest

from conftest import CLI, site_for, SYSTEM_PYTHON, probing, wait_for, free_port, tcp_listening

TOKEN = "s3cret-token-0123456789abcdef"

IDLE = """\
import time
x = 41
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def own_address():
    """A non-loopback IPv4 address of this machine, or 127.0.0.1."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True,
                             text=True, timeout=10).stdout.split()
    except OSError:
        out = []
    for a in out:
        if "." in a and not a.startswith("127."):
            return a
    return "127.0.0.1"


HOSTS = sorted({own_address(), "127.0.0.1"})


def start(spawn, python, env, code=IDLE, agent="env"):
    t = spawn(python, code, agent=agent, env=env)
    t.wait_line("READY")
    t.wait_agent()
    return t


# ---- a raw DAP client ---------------------------------------------------

def frame(obj):
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Raw:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=20)
        self.buf = b""

    def send(self, obj):
        self.s.sendall(frame(obj))

    def read(self):
        """The next message, or None when the agent closed."""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        n = int(head.split(b":")[1])
        while len(rest) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            rest += chunk
        self.buf = rest[n:]
        return json.loads(rest[:n])

    def response(self, seq):
        while True:
            m = self.read()
            if m is None or (m["type"] == "response" and m["request_seq"] == seq):
                return m

    def request(self, seq, command, **args):
        self.send({"seq": seq, "type": "request", "command": command,
                   "arguments": args})
        return self.response(seq)

    def closed(self):
        """True when the agent closed the connection (EOF)."""
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def refused(resp, text):
    assert resp is not None, "no answer before the connection closed"
    assert resp["success"] is False, resp
    assert resp["body"]["error"]["id"] == 401, resp
    assert text in resp["message"], resp


# ---- listening ------------------------------------------------------------

def test_nonloopback_listen_needs_a_usable_token(spawn, dirs, tmp_path):
    """No token can be had (the token file is readable by others, or
    PROBING_TOKEN is not a token): init(listen=...) is refused with the
    reason, on 0.0.0.0 and on loopback alike (every local user reaches
    loopback), PROBING_LISTEN is not opened; with the file fixed, loopback
    listens and the CLI reads the token by itself."""
    pdir = os.path.join(dirs["XDG_RUNTIME_DIR"], "probing")
    os.mkdir(pdir, 0o700)
    path = os.path.join(pdir, "token")
    with open(path, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(path, 0o644)
    port = free_port()
    code = """\
import probing
for addr in ("0.0.0.0:%d", "127.0.0.1:%d"):
    try:
        probing.init(listen=addr)
        print("LISTENING", addr)
    except OSError as e:
        print("REFUSED", e)
""" % (port, port) + IDLE
    t = start(spawn, SYSTEM_PYTHON, dirs, code, agent="init")
    out = t.output()
    assert "LISTENING" not in out, out
    assert "refusing to listen on 0.0.0.0" in out, out
    assert "refusing to listen on 127.0.0.1" in out, out
    assert "mode is 644" in out and "chmod 600 it" in out, out
    os.chmod(path, 0o600)
    r = probing("config", "server.listen=127.0.0.1:%d" % port, target=t.pid,
                env=dirs)
    assert r.rc == 0, r
    r = probing("eval", "x + 1", target="127.0.0.1:%d" % port, env=dirs)
    assert r.rc == 0 and r.out.strip() == "42", r

    # PROBING_TOKEN that is no token: no listener, no other token made.
    os.chmod(path, 0o600)
    port2 = free_port()
    env = dict(dirs, PROBING_TOKEN="short", PROBING_LISTEN="0.0.0.0:%d" % port2)
    t2 = start(spawn, SYSTEM_PYTHON, env)
    out = t2.output()
    assert "not listening on 0.0.0.0:%d" % port2 in out, out
    assert "PROBING_TOKEN: a token is 16 to 128 characters" in out, out
    r = probing("backtrace", target="127.0.0.1:%d" % port2, env=dirs)
    assert r.rc == 6, r
    r = probing("config", target=t2.pid, env=dirs)
    assert r.rc == 0 and "server.token\t\t" in r.out, r


def test_inject_listen_nonloopback(spawn, dirs):
    """inject --listen 0.0.0.0:P: refused while the token file is refused;
    with a usable one it listens and prints where the token is."""
    env = dict(dirs, XDG_RUNTIME_DIR="")   # the home place, for both
    t = spawn(SYSTEM_PYTHON, IDLE, agent=None, env=env)
    t.wait_line("READY")
    pdir = os.path.join(dirs["HOME"], ".probing")
    os.mkdir(pdir, 0o700)
    path = os.path.join(pdir, "token")
    with open(path, "w") as f:
        f.write(TOKEN)
    os.chmod(path, 0o640)
    port = free_port()
    r = probing("inject", "--listen", "0.0.0.0:%d" % port, target=t.pid,
                env=env, timeout=120)
    assert r.rc == 1, r
    assert "refusing to listen on 0.0.0.0" in r.err, r
    assert "mode is 640" in r.err, r

    os.chmod(path, 0o600)
    r = probing("inject", "--listen", "0.0.0.0:%d" % port, target=t.pid,
                env=env, timeout=120)
    assert r.rc == 0, r
    assert "token: %s" % path in r.out, r
    for host in HOSTS:
        r = probing("eval", "x + 1", target="%s:%d" % (host, port), env=env)
        assert r.rc == 0 and r.out.strip() == "42", (host, r)


# ---- the token -----------------------------------------------------------

def test_token_right_wrong_missing(spawn, python, dirs):
    port = free_port()
    env = dict(dirs, PROBING_TOKEN=TOKEN, PROBING_LISTEN="0.0.0.0:%d" % port)
    t = start(spawn, python, env)
    tcp_listening(port)
    # The user's own token is not written anywhere.
    assert not os.listdir(dirs["XDG_RUNTIME_DIR"])
    for host in HOSTS:
        target = "%s:%d" % (host, port)
        r = probing("--token", TOKEN, "eval", "x + 1", target=target, env=dirs)
        assert r.rc == 0 and r.out.strip() == "42", r
        r = probing("eval", "x + 1", target=target,
                    env=dict(dirs, PROBING_TOKEN=TOKEN))
        assert r.rc == 0 and r.out.strip() == "42", r
        r = probing("--token", TOKEN[:-1] + "X", "eval", "x", target=target,
                    env=dirs)
        assert r.rc == 12, r
        assert "refused the token" in r.err and "wrong token" in r.err, r
        r = probing("eval", "x", target=target, env=dirs)
        assert r.rc == 12, r
        assert "needs a token" in r.err and "--token" in r.err, r
    # The unix socket needs none: the kernel checks the peer's uid.
    r = probing("eval", "x + 1", target=t.pid, env=dirs)
    assert r.rc == 0 and r.out.strip() == "42", r
    r = probing("config", target=t.pid, env=dirs)
    assert "server.token\tPROBING_TOKEN" in r.out, r
    # A malformed token is a usage error, before any connection.
    r = probing("--token", "short", "eval", "x", target="127.0.0.1:%d" % port)
    assert r.rc == 2 and "--token: a token is 16 to 128" in r.err, r


def test_raw_dap_client(spawn, python, dirs):
    port = free_port()
    env = dict(dirs, PROBING_TOKEN=TOKEN, PROBING_LISTEN="0.0.0.0:%d" % port)
    t = start(spawn, python, env)
    tcp_listening(port)
    host = HOSTS[0]

    # No token: an error reply, then the connection closes.
    c = Raw(host, port)
    refused(c.request(1, "initialize", adapterID="raw"), "needs a token")
    assert c.closed()
    c.close()
    # A wrong one, and one of the wrong type.
    for bad in (TOKEN + "x", TOKEN[:-1], "", 12345, None):
        c = Raw(host, port)
        resp = c.request(1, "initialize", adapterID="raw", probingToken=bad)
        refused(resp, "wrong token" if isinstance(bad, str) else "none was given")
        assert c.closed()
        c.close()
    # Requests before initialize: refused, closed; what follows is unread.
    for first in ("threads", "evaluate", "probing/query", "disconnect"):
        c = Raw(host, port)
        c.s.sendall(frame({"seq": 1, "type": "request", "command": first,
                           "arguments": {"expression": "x", "sql": "SELECT 1",
                                         "probingToken": TOKEN}})
                    + frame({"seq": 2, "type": "request", "command": "initialize",
                             "arguments": {"probingToken": TOKEN}}))
        refused(c.response(1), "the first request must be initialize")
        assert c.closed()
        c.close()
    # Not even JSON, or an event: refused, closed.
    for junk in (b"{nope", {"seq": 1, "type": "event", "event": "x"}):
        c = Raw(host, port)
        c.send(junk)
        resp = c.read()
        assert resp is not None and resp["success"] is False, resp
        assert resp["body"]["error"]["id"] == 401, resp
        assert c.closed()
        c.close()
    # A body past the cap before the token: closed without a reply.
    c = Raw(host, port)
    try:
        c.s.sendall(b"Content-Length: 100000\r\n\r\n" + b" " * 100000)
        assert c.read() is None
    except (ConnectionResetError, BrokenPipeError):
        pass
    c.close()

    # The right token: everything works on that connection.
    c = Raw(host, port)
    resp = c.request(1, "initialize", adapterID="raw", probingToken=TOKEN)
    assert resp["success"], resp
    assert resp["body"]["probing"]["pid"] == t.pid
    resp = c.request(2, "evaluate", expression="x + 1")
    assert resp["success"] and resp["body"]["result"] == "42", resp
    resp = c.request(3, "probing/query", sql="SELECT 1 AS one")
    assert resp["success"] and resp["body"]["rows"] == [[1]], resp
    c.close()
    # attach as the first request carries the token as well.
    c = Raw("127.0.0.1", port)
    resp = c.request(1, "attach", probingToken=TOKEN)
    assert resp["success"], resp
    resp = c.request(2, "disconnect")
    assert resp["success"], resp
    c.close()
    assert t.alive()


def test_loopback_without_token_only_when_chosen(spawn, dirs):
    """PROBING_TOKEN=none (the user's explicit choice): loopback TCP asks
    for no token; a token sent anyway is ignored; no token file is made;
    beyond loopback is still refused."""
    port = free_port()
    t = start(spawn, SYSTEM_PYTHON, dict(dirs, PROBING_PORT=str(port),
                                         PROBING_TOKEN="none"))
    tcp_listening(port)
    c = Raw("127.0.0.1", port)
    resp = c.request(1, "threads")
    assert resp["success"], resp
    c.close()
    r = probing("--token", TOKEN, "eval", "x + 1",
                target="127.0.0.1:%d" % port, env=dirs)
    assert r.rc == 0 and r.out.strip() == "42", r
    assert not os.listdir(dirs["XDG_RUNTIME_DIR"])
    r = probing("config", "server.listen=0.0.0.0:%d" % free_port(),
                target=t.pid, env=dirs)
    assert r.rc == 1 and "refusing to listen on 0.0.0.0" in r.err, r
    assert "PROBING_TOKEN=none" in r.err, r
    assert t.alive()


def test_generated_token_file(spawn, python, dirs):
    """No PROBING_TOKEN: listening on 0.0.0.0 makes a token, stored 0600 in
    $XDG_RUNTIME_DIR/probing/token (directory 0700), which the CLI uses by
    itself, and which a second agent of the same user reuses.  Loopback
    TCP of that agent asks for it too."""
    port, port2 = free_port(), free_port()
    env = dict(dirs, PROBING_LISTEN="0.0.0.0:%d" % port)
    t = start(spawn, python, env)
    tcp_listening(port)
    pdir = os.path.join(dirs["XDG_RUNTIME_DIR"], "probing")
    path = os.path.join(pdir, "token")
    assert stat.S_IMODE(os.stat(pdir).st_mode) == 0o700
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    token = open(path).read().strip()
    assert len(token) == 64 and int(token, 16) >= 0
    for host in HOSTS:
        r = probing("eval", "x + 1", target="%s:%d" % (host, port), env=dirs)
        assert r.rc == 0 and r.out.strip() == "42", r
        r = probing("--token", token, "eval", "x + 1",
                    target="%s:%d" % (host, port), env=dict(dirs, HOME="/nonexistent",
                                                            XDG_RUNTIME_DIR=""))
        assert r.rc == 0 and r.out.strip() == "42", r
    r = probing("config", target=t.pid, env=dirs)
    assert "server.token\t%s" % path in r.out, r
    # A loopback listener added now wants the token as well.
    r = probing("config", "server.listen=127.0.0.1:%d" % port2, target=t.pid,
                env=dirs)
    assert r.rc == 0, r
    c = Raw("127.0.0.1", port2)
    refused(c.request(1, "initialize"), "needs a token")
    c.close()
    r = probing("eval", "x", target="127.0.0.1:%d" % port2, env=dirs)
    assert r.rc == 0, r
    # Another agent of ours reuses the file.
    port3 = free_port()
    start(spawn, python, dict(dirs, PROBING_LISTEN="0.0.0.0:%d" % port3))
    tcp_listening(port3)
    assert open(path).read().strip() == token
    r = probing("--token", token, "eval", "x + 1",
                target="127.0.0.1:%d" % port3, env=dirs)
    assert r.rc == 0 and r.out.strip() == "42", r


def test_generated_token_in_home(spawn, dirs):
    """Without XDG_RUNTIME_DIR the token goes to ~/.probing/token."""
    port = free_port()
    env = dict(dirs, XDG_RUNTIME_DIR="", PROBING_LISTEN="0.0.0.0:%d" % port)
    start(spawn, SYSTEM_PYTHON, env)
    tcp_listening(port)
    pdir = os.path.join(dirs["HOME"], ".probing")
    assert stat.S_IMODE(os.stat(pdir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(pdir, "token")).st_mode) == 0o600
    r = probing("eval", "x + 1", target="127.0.0.1:%d" % port,
                env=dict(dirs, XDG_RUNTIME_DIR=""))
    assert r.rc == 0 and r.out.strip() == "42", r
    # A client whose token file is readable by others does not use it.
    os.chmod(os.path.join(pdir, "token"), 0o644)
    r = probing("eval", "x", target="127.0.0.1:%d" % port,
                env=dict(dirs, XDG_RUNTIME_DIR=""))
    assert r.rc == 12 and "mode is 644" in r.err, r


def test_dap_bridge_adds_the_token(spawn, dirs):
    """`probing dap` (what VS Code runs) puts the token into the editor's
    own initialize."""
    port = free_port()
    env = dict(dirs, PROBING_TOKEN=TOKEN, PROBING_LISTEN="0.0.0.0:%d" % port)
    start(spawn, SYSTEM_PYTHON, env)
    tcp_listening(port)
    msgs = (frame({"seq": 1, "type": "request", "command": "initialize",
                   "arguments": {"adapterID": "editor"}})
            + frame({"seq": 2, "type": "request", "command": "evaluate",
                     "arguments": {"expression": "x + 1"}})
            + frame({"seq": 3, "type": "request", "command": "disconnect"}))
    for env2, ok in ((dict(dirs, PROBING_TOKEN=TOKEN), True), (dirs, False)):
        r = subprocess.run([CLI, "-t", "%s:%d" % (HOSTS[0], port), "dap"],
                           input=msgs, capture_output=True, timeout=60,
                           env=dict(os.environ, **env2))
        out = r.stdout.decode()
        if ok:
            assert '"result":"42"' in out, (r, out)
        else:
            assert '"success":false' in out and "needs a token" in out, out
            assert '"result":"42"' not in out, out


# ---- read-only mode --------------------------------------------------------

READONLY_CODE = """\
import threading, time
x = 41
def work():
    y = 1
    while True:
        time.sleep(0.01)
threading.Thread(target=work, name="worker", daemon=True).start()
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def test_readonly_refuses_code_not_looking(spawn, python, dirs):
    port = free_port()
    env = dict(dirs, PROBING_READONLY="1", PROBING_TOKEN=TOKEN,
               PROBING_LISTEN="0.0.0.0:%d" % port)
    t = start(spawn, python, env, READONLY_CODE)
    tcp_listening(port)
    r = probing("eval", "x + 1", target=t.pid, env=dirs)
    assert r.rc == 1 and "read-only mode" in r.err, r
    r = probing("debug", "--pause", target=t.pid, env=dirs)
    assert r.rc != 0 and "read-only mode" in r.err, r
    # Looking works.
    r = probing("backtrace", "--locals", "-f", "json", target=t.pid, env=dirs)
    assert r.rc == 0, r
    funcs = [f["func"] for th in r.json()["threads"] for f in th["frames"]]
    assert "work" in funcs, funcs
    r = probing("query", "SELECT count(*) AS n FROM python.threads",
                target="127.0.0.1:%d" % port, env=dict(dirs, PROBING_TOKEN=TOKEN))
    assert r.rc == 0, r
    r = probing("config", "query.max_rows=500", target=t.pid, env=dirs)
    assert r.rc == 0, r
    # Off cannot be had at run time; watched variables cannot be set.
    for kv in ("server.readonly=off", "torch.watch=loss@train",
               "torch.profiling=on,exprs=loss@train"):
        r = probing("config", kv, target=t.pid, env=dirs)
        assert r.rc == 1 and "read-only mode" in r.err, (kv, r)
    r = probing("config", target=t.pid, env=dirs)
    assert "server.readonly\ton" in r.out and "torch.watch\t\t" in r.out, r

    c = Raw("127.0.0.1", port)
    assert c.request(1, "initialize", probingToken=TOKEN)["success"]
    seq = 2
    for command, args in (("evaluate", {"expression": "x", "context": "hover"}),
                          ("evaluate", {"expression": "x", "context": "watch"}),
                          ("setVariable", {"variablesReference": 1, "name": "x",
                                           "value": "0"}),
                          ("completions", {"text": "x.", "column": 3}),
                          ("attach", {}), ("setBreakpoints",
                                           {"source": {"path": t.script},
                                            "breakpoints": [{"line": 5}]}),
                          ("pause", {}), ("next", {"threadId": t.pid}),
                          ("probing/debug", {"action": "pause"})):
        resp = c.request(seq, command, **args)
        assert resp["success"] is False, (command, resp)
        assert resp["body"]["error"]["id"] == 403, (command, resp)
        assert "read-only mode" in resp["message"], (command, resp)
        seq += 1
    for command, args in (("threads", {}), ("probing/backtrace", {}),
                          ("stackTrace", {"threadId": t.pid}),
                          ("probing/debug", {"action": "status"}),
                          ("probing/memory", {"top": 3}),
                          ("probing/profile", {"action": "status"})):
        resp = c.request(seq, command, **args)
        assert resp["success"], (command, resp)
        seq += 1
    c.close()
    r = probing("eval", "x", target=t.pid, env=dirs)
    assert r.rc == 1, r
    assert t.alive()


def test_readonly_switched_on_at_run_time(spawn, dirs):
    t = start(spawn, SYSTEM_PYTHON, dirs)
    r = probing("eval", "x + 1", target=t.pid, env=dirs)
    assert r.rc == 0 and r.out.strip() == "42", r
    r = probing("config", "server.readonly=on", target=t.pid, env=dirs)
    assert r.rc == 0, r
    r = probing("eval", "x + 1", target=t.pid, env=dirs)
    assert r.rc == 1 and "read-only mode" in r.err, r
    r = probing("config", "server.readonly=off", target=t.pid, env=dirs)
    assert r.rc == 1, r
    r = probing("backtrace", target=t.pid, env=dirs)
    assert r.rc == 0, r
    # probing.init() cannot switch it off either.
    code = """\
import probing
probing.init()     # the agent has read the environment
try:
    probing.init(server_readonly=False)
    print("OFF")
except ValueError as e:
    print("REFUSED", e)
""" + IDLE
    t2 = start(spawn, SYSTEM_PYTHON, dict(dirs, PROBING_READONLY="1"), code)
    out = t2.output()
    assert "REFUSED" in out and "cannot be switched off" in out, out


SQUATTER = """\
import socket, sys, time
pid = int(sys.argv[1])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0probing-%d" % pid)
s.listen(4)
s.settimeout(0.2)
print("BOUND", flush=True)
got = b""
while True:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.settimeout(2)
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
            print("GOT", len(got), flush=True)
    except socket.timeout:
        pass
    c.close()
"""


def test_squatted_socket_gets_nothing(spawn, python, tmp_path):
    """Another process binds @probing-<pid> first: the CLI checks who
    listens (SO_PEERCRED) and sends it no code and no token; the target's
    agent says its name is taken."""
    t = spawn(python, """\
import os, time
print("READY", flush=True)
while not os.path.exists("start"):
    time.sleep(0.02)
import probing
try:
    probing.init(timeout=2)
except Exception as e:
    print("INIT FAILED:", e, flush=True)
while True:
    time.sleep(0.05)
""", agent=None, env={"PYTHONPATH": site_for(python)})
    t.wait_line("READY")
    sq = spawn(python, SQUATTER, agent=None, args=(str(t.pid),))
    sq.wait_line("BOUND")
    for args in (("eval", "1 + 1"), ("query", "SELECT 1"),
                 ("--token", "a" * 20, "backtrace")):
        r = probing(*args, target=t.pid, env={"PROBING_TOKEN": "b" * 20})
        assert r.rc == 14, (args, r)
        assert "held by process %d" % sq.pid in r.err and \
            "nothing sent" in r.err, r
    r = probing("inject", target=t.pid)
    assert r.rc == 14 and "nothing sent" in r.err, r
    (tmp_path / "start").write_text("")
    t.wait_line("INIT FAILED")
    assert "another process holds that name" in t.output(), t.output()
    assert "GOT" not in sq.output(), sq.output()


# ---- how many at once -----------------------------------------------------

PENDING_MAX = 8  # agent/server/server.h: TCP sessions that owe the token


def idle_connections(port, n):
    """n TCP connections that send nothing."""
    return [socket.create_connection(("127.0.0.1", port), timeout=20)
            for _ in range(n)]


def test_tokenless_flood_never_locks_anyone_out(spawn, python, dirs):
    """70 connections that never give the token: they have their own small
    quota (the oldest is closed for a newer one), so the owner on the unix
    socket and a client with the token on TCP are still served."""
    port = free_port()
    t = start(spawn, python, dict(dirs, PROBING_PORT=str(port),
                                  PROBING_TOKEN=TOKEN))
    tcp_listening(port)
    flood = idle_connections(port, 70)
    r = probing("eval", "x + 1", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "42", r
    r = probing("--token", TOKEN, "eval", "x + 1",
                target="127.0.0.1:%d" % port, env=dirs)
    assert r.rc == 0 and r.out.strip() == "42", r
    # All but the newest few of the flood were closed for newer ones.
    open_ = 0
    for s in flood:
        s.settimeout(0.2)
        try:
            open_ += s.recv(1) != b""
        except socket.timeout:
            open_ += 1
        except ConnectionResetError:
            pass
        s.close()
    assert open_ <= PENDING_MAX, open_
    assert t.alive()


def test_max_clients_is_what_it_says_and_the_owner_is_always_served(
        spawn, python, dirs):
    """server.max_clients caps TCP clients (64 idle ones locked the owner
    out of the unix socket as well, and the setting did nothing)."""
    port = free_port()
    t = start(spawn, python, dict(dirs, PROBING_PORT=str(port)))
    tcp_listening(port)
    r = probing("config", "server.max_clients=3", target=t.pid)
    assert r.rc == 0, r
    held = idle_connections(port, 3)
    time.sleep(0.3)  # accepted by the agent's loop
    extra = Raw("127.0.0.1", port)
    assert extra.closed(), "a 4th TCP client was served"
    r = probing("eval", "x + 1", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "42", r
    for s in held:
        s.close()
    time.sleep(0.3)
    r = probing("eval", "x + 1", target="127.0.0.1:%d" % port, env=dirs)
    assert r.rc == 0 and r.out.strip() == "42", r
    # The default, 64: 70 idle TCP clients and the owner still gets in.
    r = probing("config", "server.max_clients=64", target=t.pid)
    assert r.rc == 0, r
    held = idle_connections(port, 70)
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0, r
    for s in held:
        s.close()
    assert t.alive()


def test_server_listen_names_one_address(spawn, python, dirs):
    """Setting server.listen again moves the listener; setting it empty
    stops listening on TCP (it used to add a listener each time, up to 8,
    and never close one)."""
    t = start(spawn, python, dirs)
    one, two = free_port(), free_port()
    r = probing("config", "server.listen=127.0.0.1:%d" % one, target=t.pid)
    assert r.rc == 0, r
    tcp_listening(one)
    r = probing("config", "server.listen=127.0.0.1:%d" % two, target=t.pid)
    assert r.rc == 0, r
    tcp_listening(two)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", one), timeout=5)
    r = probing("config", "-f", "json", target=t.pid)
    settings = {s["name"]: s["value"] for s in r.json()}
    assert settings["server.listen"] == "127.0.0.1:%d" % two
    assert settings["agent.address"] == \
        "@probing-%d,127.0.0.1:%d" % (t.pid, two), settings
    r = probing("config", "server.listen=", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: probing("eval", "1", target="127.0.0.1:%d" % two,
                             env=dirs).rc == 6, 10, "port %d closed" % two)
    r = probing("config", "-f", "json", target=t.pid)
    settings = {s["name"]: s["value"] for s in r.json()}
    assert settings["server.listen"] == ""
    assert settings["agent.address"] == "@probing-%d" % t.pid, settings
    r = probing("eval", "x + 1", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "42", r


def test_server_listen_from_the_environment_can_be_moved(spawn, python, dirs):
    """The address PROBING_LISTEN gave is the setting's: clearing the
    setting closes it, setting another moves it."""
    port, other = free_port(), free_port()
    t = start(spawn, python, dict(dirs, PROBING_LISTEN="localhost:%d" % port))
    tcp_listening(port)
    r = probing("config", "server.listen=127.0.0.1:%d" % other, target=t.pid)
    assert r.rc == 0, r
    tcp_listening(other)
    wait_for(lambda: probing("eval", "1", target="127.0.0.1:%d" % port,
                             env=dirs).rc == 6, 10, "port %d closed" % port)
    r = probing("config", "server.listen=", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: probing("eval", "1", target="127.0.0.1:%d" % other,
                             env=dirs).rc == 6, 10, "port %d closed" % other)
