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

``PROBING=1 python app.py`` does the same at start-up (through the
``probing.pth`` file installed next to this package), with the settings
taken from the environment (``PROBING_PORT``, ``PROBING_<SETTING>``);
``PROBING=2`` also starts it in every Python process ``app.py`` starts
(``PROBING=2 torchrun ...``).
"""

import importlib.machinery
import importlib.util
import os

__all__ = ["init", "address", "__version__"]


def _load():
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    name = "libprobing-cp%d%d.so" % sys.version_info[:2]
    path = os.environ.get("PROBING_LIBRARY") or os.path.join(here, name)
    if not os.path.exists(path):
        import glob
        have = sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(here, "libprobing-cp*.so")))
        raise ImportError(
            "Probing has no agent for CPython %d.%d here (%s not found; "
            "this package has %s)" % (sys.version_info[:2] + (path, ", ".join(have) or "none")))
    loader = importlib.machinery.ExtensionFileLoader("probing._probing", path)
    spec = importlib.util.spec_from_file_location(
        "probing._probing", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_native = _load()
__version__ = _native.__version__


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
    named = {_setting_name(k): v for k, v in settings.items()}
    return _native.init(listen, named, timeout, token)


def address():
    """The agent's addresses, comma-separated, or None."""
    return _native.address()


def _setting_name(key):
    # query_max_rows -> query.max_rows: the first '_' is the section dot.
    head, sep, tail = key.partition("_")
    return head + "." + tail if sep else key


# PROBING's values: this process only, or this process and the Python
# processes it starts (a torchrun launcher and its ranks).
_THIS_ONLY = ("1", "on", "true", "yes")
_NESTED = ("2", "nested")


def _autostart():
    """Called by probing.pth when PROBING is set at interpreter start.

    PROBING=1 starts the agent in this process only: PROBING is taken out
    of the environment, so a Python child (a subprocess, a test's helper)
    runs exactly as it would without Probing.  PROBING=2 (or "nested")
    leaves it there: every Python process started from this one gets an
    agent too, as the ranks of a torchrun job need.  PROBE, the original
    Probing's name, is read when PROBING is not set.
    """
    name = "PROBING" if os.environ.get("PROBING") else "PROBE"
    value = os.environ.get(name, "").lower()
    if value in ("", "0", "off", "false", "no"):
        return
    if value not in _THIS_ONLY + _NESTED:
        import sys
        print("[probing] not started: %s=%s (use 1 for this process, "
              "2 for it and its children)" % (name, os.environ[name]),
              file=sys.stderr)
        return
    if value in _THIS_ONLY:
        del os.environ[name]
    try:
        init()
    except Exception as exc:  # never stop the program because of us
        import sys
        print("[probing] not started: %s" % exc, file=sys.stderr)
