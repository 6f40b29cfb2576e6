"""probing web at the HTTP level (tests/web drives the page in chromium):
the token and its cookie, the Host check, POST's header, the routes'
answers and errors, what it serves and what it refuses, and its end on
SIGTERM."""
import http.client
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import CLI, probing, wait_for


class Web:
    def __init__(self, *args, after=(), env=None):
        e = dict(os.environ)
        e.pop("PROBING_TARGET", None)
        e.update(env or {})
        self.proc = subprocess.Popen([CLI, *args, "web", *after],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env=e)
        line = self.proc.stdout.readline()
        m = re.match(r"probing web: http://([^/]+)/\?token=(\w+)", line)
        assert m, (line, self.proc.stderr.read() if not line else "")
        self.hostport, self.token = m.group(1), m.group(2)
        self.host, self.port = self.hostport.rsplit(":", 1)

    def get(self, path, headers=None, method="GET", cookie=True):
        h = dict(headers or {})
        if cookie:
            h.setdefault("Cookie", "probing_web_%s=%s" % (self.port, self.token))
        c = http.client.HTTPConnection(self.host, int(self.port), timeout=60)
        c.request(method, path, headers=h)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, dict(r.getheaders()), body

    def post(self, path, headers=None):
        """A POST as the page makes it: the cookie and the header."""
        h = dict(headers or {})
        h.setdefault("X-Probing-Token", self.token)
        return self.get(path, headers=h, method="POST")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=30)
        return self.proc.returncode


@pytest.fixture
def web():
    w = Web()
    yield w
    w.stop()


def test_the_token(web):
    assert web.host == "127.0.0.1"
    assert len(web.token) == 64
    for path in ("/", "/app.js", "/api/agents", "/api/session"):
        st, _, body = web.get(path, cookie=False)
        assert st == 401, (path, st, body)
    st, h, _ = web.get("/api/agents", cookie=False,
                       headers={"Cookie": "probing_web_%s=%s" % (web.port, "0" * 64)})
    assert st == 401
    st, h, _ = web.get("/?token=" + web.token, cookie=False)
    assert st == 303 and h["Location"] == "/"
    assert h["Set-Cookie"] == ("probing_web_%s=%s; Path=/; HttpOnly; "
                               "SameSite=Strict" % (web.port, web.token))
    st, h, _ = web.get("/?token=%s&target=1234" % web.token, cookie=False)
    assert h["Location"] == "/#agent/1234"
    st, h, _ = web.get("/?token=%s&target=1%%0d%%0aX:1" % web.token,
                       cookie=False)
    assert h["Location"] == "/", h
    st, _, body = web.get("/api/agents", cookie=False,
                          headers={"X-Probing-Token": web.token})
    assert st == 200 and isinstance(json.loads(body), list)


def test_the_host_must_be_loopback(web):
    for host in ("evil.example:%s" % web.port, "evil.example",
                 "localhost.evil.example:80", "127.0.0.1.nip.io", ""):
        st, _, body = web.get("/api/agents", headers={"Host": host})
        assert st == 403 and "Host" in body, (host, st, body)
    # Loopback by any name and on any port (a forwarded one).
    for host in ("localhost:%s" % web.port, "127.0.0.1:9000", "localhost",
                 "LOCALHOST:1", "[::1]:8080", "[::1]"):
        st, _, body = web.get("/api/agents", headers={"Host": host})
        assert st == 200, (host, st, body)


def test_assets_and_headers(web):
    st, h, body = web.get("/")
    assert st == 200 and h["Content-Type"] == "text/html; charset=utf-8"
    assert '<script src="/app.js" defer></script>' in body
    assert "script-src 'self'" in h["Content-Security-Policy"]
    assert h["Cache-Control"] == "no-store"
    assert h["X-Content-Type-Options"] == "nosniff"
    st, h, body = web.get("/app.js")
    assert st == 200 and h["Content-Type"].startswith("text/javascript")
    assert "function route()" in body
    assert "http://" not in body and "https://" not in body  # no CDN
    st, h, _ = web.get("/app.css")
    assert st == 200 and h["Content-Type"].startswith("text/css")
    st, _, body = web.get("/nothing")
    assert st == 404 and json.loads(body)["error"] == "no such page"
    st, _, _ = web.get("/", method="DELETE")
    assert st == 405


def test_routes(web, spawn, python):
    t = spawn(python, """
        import time
        def wait_here():
            while True:
                time.sleep(0.05)
        print("ready", flush=True)
        wait_here()
    """).wait_agent()
    t.wait_line("ready")
    st, _, body = web.get("/api/agents")
    assert str(t.pid) in [a["pid"] for a in json.loads(body)]
    st, _, body = web.post("/api/backtrace?target=%d" % t.pid)
    assert st == 200, body
    main = [th for th in json.loads(body)["threads"] if th["isMain"]][0]
    assert main["frames"][0]["func"] == "wait_here"
    st, _, body = web.post("/api/query?target=%d&sql=SELECT%%2041%%2B1%%20AS%%20n"
                           % t.pid)
    assert st == 200 and json.loads(body) == [{"n": 42}], body
    st, _, body = web.post("/api/query?target=%d&sql=SELEC" % t.pid)
    assert st == 422, body
    err = json.loads(body)
    assert err["exit"] == 7 and "syntax error" in err["error"], err
    st, _, body = web.post("/api/query?target=%d" % t.pid)
    assert st == 400 and "needs 'sql'" in json.loads(body)["error"], body
    st, _, body = web.get("/api/tables?target=%d" % t.pid)
    names = [r["name"] for r in json.loads(body)]
    assert "python.backtrace" in names and "process.memory" in names
    st, _, body = web.get("/api/series?target=%d&what=cpu" % t.pid)
    assert st == 400 and "not one of the choices" in body, body
    st, _, body = web.get("/api/report?file=/etc/passwd")
    assert st == 400 and "only report files" in body, body
    st, _, body = web.post("/api/backtrace?target=999999999")
    assert st == 422 and json.loads(body)["exit"] == 3, body
    st, h, body = web.post("/api/flamegraph.svg?target=%d&duration=500ms&idle=1"
                           % t.pid)
    assert st == 200, body
    st, h, body = web.get(json.loads(body)["url"])
    assert st == 200 and h["Content-Type"] == "image/svg+xml", body[:300]
    assert "wait_here" in body
    assert "script-src 'unsafe-inline'" in h["Content-Security-Policy"]


def test_post_needs_the_header(web, spawn, python):
    t = spawn(python, "import time\nwhile True: time.sleep(0.05)\n")
    t.wait_agent()
    path = "/api/profile/start?target=%d" % t.pid
    st, _, body = web.get(path, method="POST")       # the cookie alone
    assert st == 403 and "X-Probing-Token" in body, body
    st, _, body = web.get(path)                       # GET
    assert st == 405, body
    st, _, body = web.get(path, method="POST",
                          headers={"X-Probing-Token": web.token})
    assert st == 200 and json.loads(body)["running"] is True, body
    st, _, body = web.get("/api/profile/stop?target=%d" % t.pid,
                          method="POST",
                          headers={"X-Probing-Token": web.token})
    assert st == 200 and json.loads(body)["running"] is False, body
    st, _, body = web.get("/api/session")
    assert json.loads(body) == {"token": web.token}


def test_listen_and_end():
    w = Web("--timeout", "3000")
    assert w.stop() == 0
    r = probing("web", "--listen", "nonsense")
    assert r.rc == 1 and "give HOST:PORT" in r.err, r
    w = Web()
    try:
        r = probing("web", "--listen", w.hostport, timeout=10)
        assert r.rc == 1 and "cannot listen on" in r.err, r
    finally:
        w.stop()
    r = probing("web", "--web-token", "short")
    assert r.rc == 2, r
    # -l means locals (backtrace), never listen: web's is -a.
    r = probing("web", "-l", "127.0.0.1:0")
    assert r.rc == 2 and "-a HOST:PORT" in r.err, r
    w = Web(after=("-a", "127.0.0.1:0"))
    h = "127.0.0.1:" + w.port
    st, _, _ = w.get("/?token=" + w.token, cookie=False,
                     headers={"Host": h})
    assert st == 303
    w.stop()


def test_commands_start_with_no_signal_blocked(web, spawn, python):
    """The server blocks SIGINT and SIGTERM for itself; a route's command
    starts as one typed in a shell would (nothing blocked or ignored)."""
    import threading
    t = spawn(python, "import time\nwhile True: time.sleep(0.05)\n")
    t.wait_agent()
    got = {}
    th = threading.Thread(target=lambda: got.update(r=web.post(
        "/api/flamegraph.svg?target=%d&duration=3s" % t.pid)))
    th.start()
    kids = []

    def child():
        out = subprocess.run(["pgrep", "-P", str(web.proc.pid)],
                             capture_output=True, text=True).stdout.split()
        kids[:] = out
        return bool(out)
    wait_for(child, 10, "the route's command")
    status = open("/proc/%s/status" % kids[0]).read()
    fields = dict(l.split(":\t", 1) for l in status.splitlines() if ":\t" in l)
    assert int(fields["SigBlk"], 16) == 0, fields["SigBlk"]
    assert int(fields["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1)) == 0
    th.join(60)
    assert got["r"][0] == 200
