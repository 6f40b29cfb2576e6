"""Issue 27, item 17 (last clause): `config` showed server.listen as asked.

A program started with PROBING_LISTEN=0.0.0.0:P and no usable token (or a
port another process already holds): the agent refused to listen there
and said so on the program's stderr, but `probing config` went on showing
`server.listen 0.0.0.0:P`, as if it listened.  The setting now shows only
an address the agent listens on: empty here, with the reason in the
program's stderr, and in `config` too: server.listen_error names the
address refused and why, until server.listen is set again.
"""
import socket

import pytest

from conftest import probing, free_port

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""

TOKEN = "s3cret-token-0123456789abcdef"


def setting(out, name):
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == name:
            return f[1]
    raise AssertionError("no %s in:\n%s" % (name, out))


def test_refused_for_want_of_a_token(spawn, python, dirs):
    port = free_port()
    env = dict(dirs, PROBING_TOKEN="short", PROBING_LISTEN="0.0.0.0:%d" % port)
    t = spawn(python, IDLE, env=env)
    t.wait_line("READY")
    t.wait_agent()
    # Why is said where the program's user sees it.
    t.wait_line("not listening on 0.0.0.0:%d" % port)
    r = probing("config", target=t.pid, env=dirs)
    assert r.rc == 0, r
    assert setting(r.out, "server.listen") == "", r.out
    assert setting(r.out, "agent.address") == "@probing-%d" % t.pid, r.out
    why = setting(r.out, "server.listen_error")
    assert why.startswith("0.0.0.0:%d: refusing to listen" % port), r.out
    assert "without a token" in why and "PROBING_TOKEN" in why, why


def test_refused_for_a_port_taken(spawn, python, dirs):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        env = dict(dirs, PROBING_TOKEN=TOKEN,
                   PROBING_LISTEN="127.0.0.1:%d" % port)
        t = spawn(python, IDLE, env=env)
        t.wait_line("READY")
        t.wait_agent()
        t.wait_line("not listening on 127.0.0.1:%d" % port)
        r = probing("config", target=t.pid, env=dirs)
        assert r.rc == 0, r
        assert setting(r.out, "server.listen") == "", r.out
        why = setting(r.out, "server.listen_error")
        assert why.startswith("127.0.0.1:%d: " % port), r.out
        assert "in use" in why, why
        # A later move to a free address is listened on and shown, and
        # the old refusal is gone.
        port2 = free_port()
        r = probing("config", "server.listen=127.0.0.1:%d" % port2,
                    target=t.pid, env=dirs)
        assert r.rc == 0, r
        r = probing("config", target=t.pid, env=dirs)
        assert setting(r.out, "server.listen") == "127.0.0.1:%d" % port2, r.out
        assert setting(r.out, "server.listen_error") == "", r.out
        # A failed move keeps the listener it had, and shows it.
        r = probing("config", "server.listen=127.0.0.1:%d" % port,
                    target=t.pid, env=dirs)
        assert r.rc != 0, r
        r = probing("config", target=t.pid, env=dirs)
        assert setting(r.out, "server.listen") == "127.0.0.1:%d" % port2, r.out
        # Listened on as shown: no error row (the client that asked had
        # the reason in its reply).
        assert setting(r.out, "server.listen_error") == "", r.out
        r = probing("eval", "1 + 1", target="127.0.0.1:%d" % port2,
                    env=dict(dirs, PROBING_TOKEN=TOKEN))
        assert r.rc == 0 and r.out.strip() == "2", r
    finally:
        holder.close()
