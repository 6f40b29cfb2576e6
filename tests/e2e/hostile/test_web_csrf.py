"""Issue 27, item 11: the web page was open to CSRF through GET.

`probing web` took its cookie (SameSite=Strict) as the whole proof that a
request came from its own page.  But SameSite compares sites, and every
port of 127.0.0.1 is one site: a page served by anything else on the
machine (http://127.0.0.1:8000) could make the browser send GET
/api/query?sql=... with the cookie, and GET acted — a query that built a
gigabyte in the target, sampling, torch tracing, the playbooks.  The
cookie had one name for every port, too.

Here the "browser" is a plain HTTP client sending what a browser sends
for such a page's request: the cookie, and `Origin:
http://127.0.0.1:8000` or `Sec-Fetch-Site: same-site`.  The hostile
program is the target whose memory the forged query would grow.  Now:
every route refuses another page's request (403), whatever acts is POST
only (and POST needs the X-Probing-Token header, as before), and the
cookie is named for the server's port.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import urllib.parse

import pytest

from conftest import CLI

TARGET = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""

# What a forged query would make the target build: bounded here (a few
# MB), the point is whether it runs at all.
MARK = "csrf-ran-%d" % os.getpid()
SQL = "SELECT '%s' AS mark, length(zeroblob(4000000)) AS n" % MARK


class Web:
    def __init__(self):
        e = dict(os.environ)
        e.pop("PROBING_TARGET", None)
        self.proc = subprocess.Popen([CLI, "web"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=e)
        line = self.proc.stdout.readline()
        m = re.match(r"probing web: http://([^/]+)/\?token=(\w+)", line)
        assert m, line
        self.hostport, self.token = m.group(1), m.group(2)
        self.host, self.port = self.hostport.rsplit(":", 1)

    def login(self):
        """What the browser does with the printed address: the cookie."""
        st, h, _ = self.request("/?token=" + self.token, {})
        assert st == 303, (st, h)
        return h["Set-Cookie"].split(";")[0]

    def request(self, path, headers, method="GET"):
        c = http.client.HTTPConnection(self.host, int(self.port), timeout=120)
        c.request(method, path, headers=headers)
        r = c.getresponse()
        body = r.read().decode(errors="replace")
        c.close()
        return r.status, dict(r.getheaders()), body

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


@pytest.fixture
def web():
    w = Web()
    yield w
    w.stop()


def test_another_local_page_cannot_act(web, spawn, python):
    t = spawn(python, TARGET)
    t.wait_line("READY")
    t.wait_agent()
    cookie = web.login()
    # Named for this server's port.
    assert cookie.startswith("probing_web_%s=" % web.port), cookie
    q = "/api/query?" + urllib.parse.urlencode({"target": t.pid, "sql": SQL})
    forged = (
        {"Cookie": cookie, "Origin": "http://127.0.0.1:8000"},
        {"Cookie": cookie, "Sec-Fetch-Site": "same-site"},
        {"Cookie": cookie, "Sec-Fetch-Site": "cross-site"},
        {"Cookie": cookie, "Origin": "null"},
    )
    for headers in forged:
        for method in ("GET", "POST"):
            st, _, body = web.request(q, headers, method)
            assert st == 403, (headers, method, st, body)
            assert MARK not in body, body
        # Reads are refused to such a page as well.
        st, _, body = web.request("/api/agents", headers)
        assert st == 403, (headers, st, body)
    # GET never acts, even for the page itself (no Origin, same-origin).
    for headers in ({"Cookie": cookie},
                    {"Cookie": cookie, "Sec-Fetch-Site": "same-origin"}):
        st, _, body = web.request(q, headers)
        assert st == 405 and MARK not in body, (st, body)
    svg = "/api/flamegraph.svg?target=%d&duration=200ms" % t.pid
    st, _, body = web.request(svg, {"Cookie": cookie})
    assert st == 404 and "<svg" not in body, (st, body)
    # The page's own POST, with the header, does.
    own = {"Cookie": cookie, "Sec-Fetch-Site": "same-origin",
           "Origin": "http://" + web.hostport, "X-Probing-Token": web.token}
    st, _, body = web.request(q, own, "POST")
    assert st == 200 and MARK in body, (st, body)
    st, _, body = web.request(svg, own, "POST")
    assert st == 200, (st, body)
    url = json.loads(body)["url"]
    st, h, body = web.request(url, {"Cookie": cookie,
                                    "Sec-Fetch-Site": "same-origin"})
    assert st == 200 and "<svg" in body, (st, body[:300])
    # A cookie named for another port is not this server's.
    other = "probing_web_%d=%s" % (int(web.port) + 1, web.token)
    st, _, _ = web.request("/api/agents", {"Cookie": other})
    assert st == 401, st
    assert t.alive()
