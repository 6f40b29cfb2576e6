"""A Probing agent from Python: the DAP requests the ``probing`` command
makes, from a script or a notebook (docs/python-api.md).

    import probing
    with probing.connect(4242) as agent:           # a pid: its unix socket
        for t in agent.backtrace():
            print(t["name"], [f["func"] for f in t["frames"]])
        rows = agent.query("SELECT rss FROM process.memory")
    probing.connect("10.0.0.7:9922", token="...")  # an agent on TCP

    probing.query("SELECT count(*) AS n FROM python.threads")  # this process

Only the standard library; a connection is one socket, used by one
thread at a time (a lock keeps requests apart).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any, Dict, List, Optional, Union

__all__ = ["Agent", "ProbingError", "connect", "query"]

_MESSAGE_MAX = 16 << 20  # the agent's cap on a message (dap_msg.h)


class ProbingError(Exception):
    """A request the agent refused or could not do: its message, and the
    DAP error id where it gave one (``.id``)."""

    def __init__(self, message: str, id: Optional[int] = None) -> None:
        super().__init__(message)
        self.id = id


class Rows(list):
    """A query's rows: a list of dicts, with ``.columns`` (names, in
    order) and ``.truncated`` (more rows than asked for)."""

    columns = ()
    truncated = False

    def frame(self) -> Any:
        """The rows as a pandas DataFrame (pandas must be importable)."""
        import pandas
        return pandas.DataFrame(list(self), columns=list(self.columns))


def _address(target):
    """(family, address) of an agent: a pid (int or digits), or HOST:PORT
    ("[::1]:9922" for IPv6)."""
    text = str(target)
    if text.isdigit():
        return socket.AF_UNIX, "\0probing-%d" % int(text)
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError("a target is a pid or HOST:PORT, not %r" % (target,))
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return (socket.AF_INET6 if ":" in host else socket.AF_INET), (host, int(port))


class Agent:
    """A connection to one agent.  ``request()`` sends any DAP request;
    the methods are the CLI's commands' requests.  Close it (or use it
    as a context manager) when done: the agent serves 64 at once."""

    def __init__(self, target: Union[int, str], token: Optional[str] = None,
                 timeout: float = 10.0) -> None:
        family, addr = _address(target)
        self.timeout = timeout
        self._seq = 0
        self._buf = b""
        self._lock = threading.Lock()
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(addr)
        except OSError as e:
            self._sock.close()
            raise ProbingError("no Probing agent at %s: %s (is it running, "
                               "with an agent? `probing list`)" % (target, e))
        args = {"clientID": "probing-python", "adapterID": "probing"}
        token = token or os.environ.get("PROBING_TOKEN")
        if token and family != socket.AF_UNIX:
            args["probingToken"] = token
        self.info = self.request("initialize", args).get("probing", {})

    # ---- the protocol ------------------------------------------------

    def _send(self, msg):
        data = json.dumps(msg).encode()
        try:
            self._sock.sendall(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        except OSError as e:
            raise ProbingError("the agent closed the connection (%s)" % e)

    def _recv(self, deadline):
        while True:
            head, sep, rest = self._buf.partition(b"\r\n\r\n")
            if sep:
                length = None
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length is None or length > _MESSAGE_MAX:
                    raise ProbingError("the agent sent a bad message header")
                if len(rest) >= length:
                    self._buf = rest[length:]
                    return json.loads(rest[:length])
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProbingError("no answer within %.0f s" % self.timeout)
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(1 << 20)
            except socket.timeout:
                raise ProbingError("no answer within %.0f s" % self.timeout)
            except OSError as e:
                raise ProbingError("the agent closed the connection (%s)" % e)
            if not chunk:
                raise ProbingError("the agent closed the connection")
            self._buf += chunk

    def request(self, command: str, arguments: Optional[Dict[str, Any]] = None,
                timeout: Optional[float] = None) -> Dict[str, Any]:
        """Sends command with arguments; returns the response's body, or
        raises ProbingError with the agent's message."""
        with self._lock:
            self._seq += 1
            seq = self._seq
            self._send({"seq": seq, "type": "request", "command": command,
                        "arguments": arguments or {}})
            deadline = time.monotonic() + (timeout or self.timeout)
            while True:
                msg = self._recv(deadline)
                if msg.get("type") == "response" and msg.get("request_seq") == seq:
                    break
        body = msg.get("body") or {}
        if not msg.get("success"):
            err = body.get("error") or {}
            raise ProbingError(msg.get("message") or err.get("format") or
                               "%s failed" % command, err.get("id"))
        return body

    def close(self) -> None:
        try:
            self.request("disconnect", timeout=2)
        except (ProbingError, OSError):
            pass
        self._sock.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- what the CLI asks for ----------------------------------------

    def backtrace(self, locals: bool = False,
                  native: bool = False) -> List[Dict[str, Any]]:
        """Every thread's stack, innermost frame first (``probing
        backtrace``): [{name, nativeId, frames: [{func, file, line,
        ...}]}], with ``mixedFrames`` when native."""
        args = {"locals": bool(locals)}
        if native:
            args["native"] = True
        return self.request("probing/backtrace", args,
                            timeout=max(self.timeout, 30))["threads"]

    def query(self, sql: str, max_rows: Optional[int] = None,
              timeout_ms: Optional[int] = None) -> Rows:
        """SQL over the agent's tables (``probing query``): Rows, a list
        of dicts with ``.columns``; ``.frame()`` makes a DataFrame."""
        args = {"sql": sql}
        if max_rows is not None:
            args["maxRows"] = int(max_rows)
        if timeout_ms is not None:
            args["timeoutMs"] = int(timeout_ms)
        body = self.request("probing/query", args,
                            timeout=max(self.timeout, (timeout_ms or 0) / 1e3 + 5))
        rows = Rows(dict(zip([c["name"] for c in body["columns"]], r))
                    for r in body["rows"])
        rows.columns = tuple(c["name"] for c in body["columns"])
        rows.truncated = bool(body.get("truncated"))
        return rows

    def eval(self, code: str, timeout_ms: Optional[int] = None) -> Optional[str]:
        """Runs code in the target's __main__ (``probing eval``): the
        value's repr, or None for a statement; what it printed goes to
        ``.last_output``.  The agent's read-only mode refuses it."""
        args = {"expression": code, "context": "repl"}
        if timeout_ms is not None:
            args["timeoutMs"] = int(timeout_ms)
        body = self.request("evaluate", args,
                            timeout=max(self.timeout, (timeout_ms or 0) / 1e3 + 5))
        self.last_output = body.get("output", "")
        return body.get("result") or None

    def flamegraph(self, seconds: float = 10.0, hz: Optional[int] = None,
                   format: str = "folded", tasks: bool = False) -> str:
        """Samples every thread for a while and returns the profile
        (``probing flamegraph``): folded stacks, or "svg", "speedscope",
        "chrome".  A profiler already running is used and left so.
        tasks: in an asyncio program, each sample that ran a task under a
        root frame "task NAME" (``flamegraph --tasks``)."""
        st = self.request("probing/profile", {"action": "status"})
        started = not st.get("running")
        if started:
            args = {"action": "start", "durationMs": int(seconds * 1000)}
            if hz:
                args["hz"] = int(hz)
            since = self.request("probing/profile", args).get("startedAt")
        else:
            since = st.get("now")
        time.sleep(seconds)
        until = None
        if started:
            until = self.request("probing/profile", {"action": "stop"}).get("stoppedAt")
        args = {"format": format, "since": since}
        if until:
            args["until"] = until
        if tasks:
            args["tasks"] = True
        return self.request("probing/flamegraph", args,
                            timeout=max(self.timeout, 120))["data"]


def connect(target: Union[int, str], token: Optional[str] = None,
            timeout: float = 10.0) -> Agent:
    """An Agent: target is a pid (this machine's agent of that process) or
    "HOST:PORT" (an agent listening on TCP; token= or PROBING_TOKEN when it
    asks for one)."""
    return Agent(target, token=token, timeout=timeout)


_self = None
_self_lock = threading.Lock()


def query(sql: str, max_rows: Optional[int] = None) -> Any:
    """SQL over this process's own agent: a pandas DataFrame when pandas
    is importable, else Rows (a list of dicts with ``.columns``).  Not
    from the agent's own threads; takes no lock the program holds."""
    global _self
    with _self_lock:
        if _self is not None and _self.info.get("pid") != os.getpid():
            _self._sock.close()  # a forked child: the parent's socket
            _self = None
        if _self is None:
            _self = connect(os.getpid())
        rows = _self.query(sql, max_rows=max_rows)
    try:
        return rows.frame()
    except ImportError:
        return rows
