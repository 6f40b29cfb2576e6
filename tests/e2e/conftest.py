"""Fixtures for the end-to-end tests: real Python processes with the real
agent, driven through the real `probing` CLI.

PROBING_BUILD names the build directory (default: build/ at the top).
Every test that takes `python` runs once per Python: /usr/bin/python3
(3.11, static libpython), pyenv's 3.11 (shared libpython), and every
other CPython version the build has an agent for (BUILD/pythons.txt:
3.9, 3.10, 3.12, 3.13 here).  PROBING_E2E_VERSIONS=3.11,3.12 keeps
those versions only.
"""
import atexit
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")
USERBASE = os.path.join(BUILD, "userbase")
SITE = os.path.join(USERBASE, "lib", "python3.11", "site-packages")  # /usr/bin/python3's

SYSTEM_PYTHON = "/usr/bin/python3"

# Every agent the tests start records to disk (data.dir): into this
# session's own directory, not the user's ~/.local/state/probing.  Tests of
# the recording itself give a directory of their own.
if "PROBING_DATA_DIR" not in os.environ:
    DATA_DIR = tempfile.mkdtemp(prefix="probing-e2e-data-")
    os.environ["PROBING_DATA_DIR"] = DATA_DIR
    atexit.register(shutil.rmtree, DATA_DIR, True)

# Every agent that listens on TCP has a token, which it keeps in the
# user's token file: $XDG_RUNTIME_DIR/probing/token when that names a
# directory, else ~/.probing/token (docs/security.md), and the CLI reads it
# from there.  This session's own runtime directory (0700), for every
# target and CLI it starts, so that no test reads or writes the user's.
# Always a new one: an XDG_RUNTIME_DIR already set is the user's session's
# (/run/user/UID).  HOME stays (pyenv, torch's caches): the token goes to
# the first place, and tests that want the second (XDG_RUNTIME_DIR="")
# give a HOME of their own with it (test_auth.py's `dirs`).
RUNTIME_DIR = tempfile.mkdtemp(prefix="probing-e2e-run-")
os.environ["XDG_RUNTIME_DIR"] = RUNTIME_DIR
atexit.register(shutil.rmtree, RUNTIME_DIR, True)

# The ASan build's runtime is preloaded into targets.  GCC 12's libasan
# does not hold its allocator's lock across fork(): a forked child of a
# multi-threaded target may find it taken by a thread it does not have,
# and any malloc there waits forever (Probing or not).  Tests of a forked
# child's own agent cannot run under it.
SANITIZED_TARGETS = bool(os.environ.get("PROBING_TARGET_PRELOAD"))


def _pyenv_python():
    """The shared-libpython 3.11 under pyenv, if the machine has it."""
    cands = []
    which = shutil.which("python3")
    if which and os.path.realpath(which) != os.path.realpath(SYSTEM_PYTHON):
        cands.append(which)
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11*/bin/python3.11")))
    cands += sorted(glob.glob("/root/.pyenv/versions/3.11*/bin/python3.11"))
    for c in cands:
        try:
            out = subprocess.run([c, "-c", "import sys, sysconfig; print(sys.version_info[:2] == (3, 11), sys.executable)"],
                                 capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        ok, exe = (out.stdout.split() + ["", ""])[:2]
        if ok == "True" and os.path.realpath(exe) != os.path.realpath(SYSTEM_PYTHON):
            return exe
    return None


PYENV_PYTHON = _pyenv_python()


def _other_versions():
    """{executable: "3.X"} of the build's CPythons other than 3.11."""
    out = {}
    try:
        with open(os.path.join(BUILD, "pythons.txt")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[1] != "3.11":
                    out[parts[2]] = parts[1]
    except OSError:
        pass
    return out


# {executable: version}, and the test id of each.
VERSIONS = {SYSTEM_PYTHON: "3.11"}
IDS = {SYSTEM_PYTHON: "system"}
if PYENV_PYTHON:
    VERSIONS[PYENV_PYTHON] = "3.11"
    IDS[PYENV_PYTHON] = "pyenv"
for _exe, _v in _other_versions().items():
    VERSIONS[_exe] = _v
    IDS[_exe] = _v
_only = os.environ.get("PROBING_E2E_VERSIONS")
PYTHONS = [p for p in VERSIONS
           if not _only or VERSIONS[p] in _only.split(",")]


def version_of(python):
    """(major, minor) of one of PYTHONS."""
    return tuple(int(x) for x in VERSIONS.get(python, "3.11").split("."))


def qualified(python, name):
    """The name CPython shows for function name ("Thread.run") in python:
    qualified from 3.11 (co_qualname), the last part before it."""
    return name if version_of(python) >= (3, 11) else name.rsplit(".", 1)[-1]


def site_for(python):
    """The build's site-packages directory for python's version."""
    return os.path.join(USERBASE, "lib", "python%d.%d" % version_of(python),
                        "site-packages")


def pytest_generate_tests(metafunc):
    if "python" in metafunc.fixturenames:
        metafunc.parametrize("python", PYTHONS, ids=[IDS[p] for p in PYTHONS])


def agent_listening(pid):
    """Is @probing-<pid> in the kernel's list of unix sockets?"""
    name = "@probing-%d" % pid
    with open("/proc/net/unix") as f:
        return any(line.split()[-1] == name for line in f if len(line.split()) >= 8)


def wait_for(pred, timeout=30.0, what="condition"):
    """Polls pred until true; `what` (a string, or a function giving one
    when the wait fails) names it in the failure."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " +
                         (what() if callable(what) else what))


def free_port():
    """A TCP port on 127.0.0.1 free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_listening(port):
    """Waits until something accepts TCP connections on 127.0.0.1:port."""
    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    wait_for(up, 30, "port %d" % port)


@pytest.fixture
def dirs(tmp_path):
    """A private XDG_RUNTIME_DIR and HOME: env for the target and the CLI
    (the token file lives there)."""
    xdg = tmp_path / "xdg"
    home = tmp_path / "home"
    xdg.mkdir(mode=0o700)
    home.mkdir(mode=0o700)
    return {"XDG_RUNTIME_DIR": str(xdg), "HOME": str(home)}


class Target:
    """A Python process started for a test, stopped when the test ends."""

    def __init__(self, proc, script):
        self.proc = proc
        self.pid = proc.pid
        self.script = script
        self._out = None

    def wait_agent(self, timeout=30.0):
        def up():
            if self.proc.poll() is not None:
                raise AssertionError("target exited early:\n" + self.output())
            return agent_listening(self.pid)
        wait_for(up, timeout, "the agent of pid %d" % self.pid)
        return self

    def wait_line(self, text, timeout=30.0):
        """Waits until the target printed a line containing text."""
        path = self.proc.args_out
        def seen():
            if self.proc.poll() is not None:
                raise AssertionError("target exited early:\n" + self.output())
            with open(path, errors="replace") as f:
                return text in f.read()
        wait_for(seen, timeout, repr(text))

    def output(self):
        with open(self.proc.args_out, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def spawn(tmp_path):
    """spawn(python, code, agent="env"|"init"|None, env={}) -> Target

    agent="env": PROBING=1 through the installed-like .pth (PYTHONUSERBASE);
    agent="init": the code is preceded by `import probing; probing.init()`;
    agent=None: no agent (for injection and error tests).
    """
    targets = []

    def _spawn(python, code, agent="env", env=None, args=()):
        script = tmp_path / ("target%d.py" % len(targets))
        body = textwrap.dedent(code)
        if agent == "init":
            body = "import probing; probing.init()\n" + body
        script.write_text(body)
        e = dict(os.environ)
        e.pop("PROBING", None)
        e["PYTHONUSERBASE"] = USERBASE
        e["PYTHONUNBUFFERED"] = "1"
        if agent == "env":
            e["PROBING"] = "1"
        if agent == "init":
            e["PYTHONPATH"] = site_for(python)
        if os.environ.get("PROBING_TARGET_PRELOAD"):
            # ASan build: the sanitizer runtimes must come first, and
            # their reports go to files the fixture checks at the end.
            e["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
            log = str(tmp_path / "sanitizer")
            e["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":log_path=" + log
            e["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "") + ":log_path=" + log
        e.update(env or {})
        out = tmp_path / ("target%d.out" % len(targets))
        f = open(out, "w")
        proc = subprocess.Popen([python, str(script), *args], stdout=f,
                                stderr=subprocess.STDOUT, env=e, cwd=str(tmp_path))
        proc.args_out = str(out)
        t = Target(proc, str(script))
        targets.append(t)
        return t

    yield _spawn
    for t in targets:
        t.stop()
    reports = glob.glob(str(tmp_path / "sanitizer*"))
    assert not reports, "sanitizer reports:\n" + "\n".join(
        open(r, errors="replace").read()[:4000] for r in reports)


class Result:
    def __init__(self, cp):
        self.rc = cp.returncode
        self.out = cp.stdout
        self.err = cp.stderr

    def json(self):
        return json.loads(self.out)

    def __repr__(self):
        return "<rc=%d out=%r err=%r>" % (self.rc, self.out[-2000:], self.err[-2000:])


def probing(*args, target=None, input=None, timeout=60, env=None):
    """Runs the real CLI; returns Result(rc, out, err)."""
    cmd = [CLI]
    if target is not None:
        cmd += ["-t", str(target)]
    cmd += [str(a) for a in args]
    e = dict(os.environ)
    e.pop("PROBING_TARGET", None)
    e.update(env or {})
    cp = subprocess.run(cmd, capture_output=True, text=True, input=input,
                        timeout=timeout, env=e)
    return Result(cp)


@pytest.fixture
def cli():
    return probing
