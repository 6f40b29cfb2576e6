"""Errors a person understands, with distinct exit codes."""
import socket

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
