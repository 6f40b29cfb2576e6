"""Probing: look inside this Python process while it runs.

Importing this package loads the agent (libprobing-cpXY.so, the one built
for this Python's version), which starts
serving the Debug Adapter Protocol on the abstract unix socket
``@probing-<pid>``.  Then, from a shell::

    probing -t <pid> backtrace
    probing -t <pid> query "SELECT func, lineno FROM python.backtrace"

``init()`` waits until the agent serves and can listen on TCP as well::

    import probing
    probing.init(listen="127.0.0.1:9922")

An address other than loopback needs a token, which clients present
(``probing --token``, ``PROBING_TOKEN``, or the token file the agent
writes; see docs/security.md)::

    probing.init(listen="0.0.0.0:9922", token=os.environ["MY_TOKEN"])

From Python, the requests the ``probing`` command makes, to this
process's agent or another's (docs/python-api.md)::

    probing.query("SELECT rss FROM process.memory")   # a DataFrame
    with probing.connect(4242) as agent:
        agent.backtrace(); agent.query(sql); agent.eval(code)

and the program's own rows, in the schema ``app`` (probing/app.py)::

    @probing.table
    class Batch:
        step: int
        loss: float
    Batch.append(step=1, loss=0.25)          # a row of app.batch
    with probing.span("load"): ...           # a row of app.spans
    probing.step()                           # a row of app.steps

``PROBING=1 python app.py`` does the same at start-up (through the
``probing.pth`` file installed next to this package), with the settings
taken from the environment (``PROBING_PORT``, ``PROBING_<SETTING>``);
``PROBING=2`` also starts it in every Python process ``app.py`` starts
(``PROBING=2 torchrun ...``).

On a free-threaded CPython (3.13t) running without the GIL the agent is
not loaded: loading it would turn the GIL back on for the whole process
(it is not made to run without it yet).  ``PROBING_FREE_THREADED=gil``
loads it anyway, the GIL then on; ``init()`` says why otherwise.
"""

import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["init", "address", "connect", "query", "Agent", "ProbingError",
           "table", "span", "step", "__version__"]

# A free-threaded build ("t" in its ABI flags, as in python3.13t).
_FREE_THREADED = "t" in getattr(sys, "abiflags", "")


def _refusal():
    """Why the agent is not loaded here, or None."""
    gil_off = _FREE_THREADED and not getattr(sys, "_is_gil_enabled",
                                             lambda: True)()
    if not gil_off or \
            os.environ.get("PROBING_FREE_THREADED", "").lower() == "gil":
        return None
    return ("this is a free-threaded CPython (%d.%dt) running without the "
            "GIL, and loading the agent would turn the GIL back on for "
            "the whole process (it is not made to run without it yet); "
            "set PROBING_FREE_THREADED=gil to start it anyway, with the "
            "GIL on" % sys.version_info[:2])


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    name = "libprobing-cp%d%d%s.so" % (sys.version_info[:2] +
                                       ("t" if _FREE_THREADED else "",))
    path = os.environ.get("PROBING_LIBRARY") or os.path.join(here, name)
    if not os.path.exists(path):
        import glob
        have = sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(here, "libprobing-cp*.so")))
        raise ImportError(
            "Probing has no agent for CPython %d.%d%s here (%s not found; "
            "this package has %s)" % (sys.version_info[:2] + (
                "t" if _FREE_THREADED else "", path,
                ", ".join(have) or "none")))
    loader = importlib.machinery.ExtensionFileLoader("probing._probing", path)
    spec = importlib.util.spec_from_file_location(
        "probing._probing", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_REFUSED = _refusal()
_native = None if _REFUSED else _load()
__version__ = _native.__version__ if _native else None

# Agents from Python: this process's (query) or any other's (connect).
from .client import Agent, ProbingError, connect, query  # noqa: E402
# The program's own tables and markers (app.<name>, app.spans, app.steps).
from .app import span, step, table  # noqa: E402


def init(listen=None, timeout=5.0, token=None, **settings):
    """Start the agent (a no-op when it already runs) and wait for it.

    listen: also serve on this TCP address, e.g. "127.0.0.1:9922".  An
        address other than loopback ("0.0.0.0:9922") needs a token: token=,
        PROBING_TOKEN, or one generated into the per-user token file
        ($XDG_RUNTIME_DIR/probing/token or ~/.probing/token).
    token: the token TCP clients must present (16 to 128 printable
        characters); replaces PROBING_TOKEN.
    settings: agent settings, with '_' for '.', e.g.
        ``init(query_max_rows=100)`` sets ``query.max_rows``; see
        ``probing -t PID config`` for the list.

    Returns the addresses the agent listens on (comma-separated), or None
    when another copy of the agent already serves this process.
    """
    if _native is None:
        raise RuntimeError(_REFUSED)
    named = {_setting_name(k): v for k, v in settings.items()}
    return _native.init(listen, named, timeout, token)


def address():
    """The agent's addresses, comma-separated, or None."""
    return _native.address() if _native else None


def _setting_name(key):
    # query_max_rows -> query.max_rows: the first '_' is the section dot.
    head, sep, tail = key.partition("_")
    return head + "." + tail if sep else key


# PROBING's values: this process only, or this process and the Python
# processes it starts (a torchrun launcher and its ranks).
_THIS_ONLY = ("1", "on", "true", "yes")
_NESTED = ("2", "nested")


def _autostart():
    """Called by probing.pth when PROBING (or PROBING_PORT) is set at
    interpreter start.

    PROBING=1 starts the agent in this process only: PROBING is taken out
    of the environment, so a Python child (a subprocess, a test's helper)
    runs exactly as it would without Probing.  PROBING=2 (or "nested")
    leaves it there: every Python process started from this one gets an
    agent too, as the ranks of a torchrun job need.  PROBE, the original
    Probing's name, is read when PROBING is not set; PROBING_PORT=N
    alone, the original's way, is PROBING=1 listening on 127.0.0.1:N.
    """
    name = "PROBING" if os.environ.get("PROBING") else "PROBE"
    value = os.environ.get(name, "").lower()
    if not value and os.environ.get("PROBING_PORT"):
        # The original's PROBING_PORT=N alone: an agent listening on
        # 127.0.0.1:N, in this process only.
        value = "1"
    if value in ("", "0", "off", "false", "no"):
        return
    if value not in _THIS_ONLY + _NESTED:
        import sys
        print("[probing] not started: %s=%s (use 1 for this process, "
              "2 for it and its children)" % (name, os.environ[name]),
              file=sys.stderr)
        return
    if value in _THIS_ONLY:
        # Both names: a child must not find the other one set.
        os.environ.pop("PROBING", None)
        os.environ.pop("PROBE", None)
    try:
        init()
    except Exception as exc:  # never stop the program because of us
        import sys
        print("[probing] not started: %s" % exc, file=sys.stderr)
    if value in _THIS_ONLY:
        # Read by the agent by now; a Python child must not start one
        # (and take the same port) because it is still there.
        os.environ.pop("PROBING_PORT", None)
