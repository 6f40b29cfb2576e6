"""Fixtures for the end-to-end tests: real Python processes with the real
agent, driven through the real `probing` CLI.

PROBING_BUILD names the build directory (default: build/ at the top).
Every test that takes `python` runs once per Python: /usr/bin/python3
(whatever version it is: 3.11 with a static libpython on Debian 12, 3.13
on Debian 13), a second build of that same version ("pyenv": python3 on
PATH or under ~/.pyenv, shared libpython; skipped, with the reason, where
the machine has none), and every other CPython version the build has an
agent for (BUILD/pythons.txt).  PROBING_E2E_VERSIONS=3.11,3.12 keeps
those versions only.  The modules of ONCE_MODULES run on one Python only,
and those of TWIN_MODULES on the second build too (below).
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

SYSTEM_PYTHON = "/usr/bin/python3"


def _version(exe):
    """("3.X", the real executable) of a Python, or None where it does not run."""
    try:
        out = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"],
            capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 2:
        return None
    return parts[0], parts[1]


# /usr/bin/python3's version ("3.11", "3.13"): everything named after it
# (site-packages, libprobing-cpXY.so) follows from it.
SYSTEM_VERSION = (_version(SYSTEM_PYTHON) or ("3.11", SYSTEM_PYTHON))[0]
SITE = os.path.join(USERBASE, "lib", "python" + SYSTEM_VERSION, "site-packages")

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
    """(executable, None) of another build of SYSTEM_VERSION than
    /usr/bin/python3 (pyenv's, with a shared libpython), found as python3
    or python3.X on PATH or under ~/.pyenv/versions; (None, why) where the
    machine has none."""
    v = SYSTEM_VERSION
    cands = [c for c in (shutil.which("python3"), shutil.which("python" + v)) if c]
    for home in (os.path.expanduser("~"), "/root"):
        cands += sorted(glob.glob(os.path.join(home, ".pyenv", "versions", v + ".*",
                                               "bin", "python" + v)))
    system = os.path.realpath(SYSTEM_PYTHON)
    for c in cands:
        if os.path.realpath(c) == system:
            continue
        got = _version(c)
        if got and got[0] == v and os.path.realpath(got[1]) != system:
            return got[1], None
    return None, ("no second build of Python %s on this machine (looked for python3 "
                  "and python%s on PATH and ~/.pyenv/versions/%s.*/bin/python%s)"
                  % (v, v, v, v))


PYENV_PYTHON, NO_PYENV = _pyenv_python()


def _other_versions():
    """{executable: "3.X"} of the build's CPythons other than SYSTEM_VERSION."""
    out = {}
    try:
        with open(os.path.join(BUILD, "pythons.txt")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[1] != SYSTEM_VERSION:
                    out[parts[2]] = parts[1]
    except OSError:
        pass
    return out


# {executable: version}, and the test id of each.
VERSIONS = {SYSTEM_PYTHON: SYSTEM_VERSION}
IDS = {SYSTEM_PYTHON: "system"}
if PYENV_PYTHON:
    VERSIONS[PYENV_PYTHON] = SYSTEM_VERSION
    IDS[PYENV_PYTHON] = "pyenv"
for _exe, _v in _other_versions().items():
    VERSIONS[_exe] = _v
    IDS[_exe] = _v
_only = os.environ.get("PROBING_E2E_VERSIONS")
PYTHONS = [p for p in VERSIONS
           if not _only or VERSIONS[p] in _only.split(",")]


def version_of(python):
    """(major, minor) of one of PYTHONS."""
    return tuple(int(x) for x in VERSIONS.get(python, SYSTEM_VERSION).split("."))


def agent_lib(python):
    """The build's agent for python's version: BUILD/agent/libprobing-cpXY.so."""
    return os.path.join(BUILD, "agent", "libprobing-cp%d%d.so" % version_of(python))


def qualified(python, name):
    """The name CPython shows for function name ("Thread.run") in python:
    qualified from 3.11 (co_qualname), the last part before it."""
    return name if version_of(python) >= (3, 11) else name.rsplit(".", 1)[-1]


def has_symtab(path):
    """Does the ELF file at path keep its full symbol table (.symtab), so
    that static functions have names in native stacks?  Debian strips its
    interpreters (/usr/bin/python3.X: exported names only, the rest in
    its -dbgsym package); pyenv's builds keep theirs."""
    import struct
    try:
        with open(path, "rb") as f:
            ident = f.read(64)
            if ident[:4] != b"\x7fELF" or ident[4] != 2:     # 64-bit only
                return False
            end = "<" if ident[5] == 1 else ">"
            shoff, = struct.unpack(end + "Q", ident[40:48])
            shentsize, shnum = struct.unpack(end + "HH", ident[58:62])
            f.seek(shoff)
            table = f.read(shentsize * shnum)
    except OSError:
        return False
    return any(struct.unpack(end + "I", table[i + 4:i + 8])[0] == 2   # SHT_SYMTAB
               for i in range(0, len(table), shentsize))


def frame_object(frame):
    """The file a native frame of a report is in ("/usr/bin/python3.13"
    of "/usr/bin/python3.13+0x55cf2c")."""
    return frame.get("object", "").rsplit("+", 1)[0]


def site_for(python):
    """The build's site-packages directory for python's version."""
    return os.path.join(USERBASE, "lib", "python%d.%d" % version_of(python),
                        "site-packages")


# The second build of the system's version (pyenv's: a shared libpython
# with its full symbol table, site directories of its own, no Debian
# patches) differs from Debian's in how the agent gets in, finds the
# interpreter and names native frames, not in what the agent does once
# running: it runs the modules where that shows, the others once per
# version (CI's time).  PROBING_E2E_TWIN=all runs every module on it,
# PROBING_E2E_TWIN=none none (CI's ASan pass: the same agent).
TWIN_MODULES = {"test_backtrace", "test_crash", "test_eval", "test_gil",
                "test_hang", "test_inject", "test_install", "test_lifecycle",
                "test_profile", "test_unwind_pipe"}


def _twin_runs(module):
    twin = os.environ.get("PROBING_E2E_TWIN")
    return twin == "all" or twin != "none" and \
        module.__name__.rsplit(".", 1)[-1] in TWIN_MODULES


# What these modules test is the agent's own C (its server, SQL, recorder,
# the CLI's commands and terminal) once it runs, the same on every version:
# they run on one Python of the system (its python3: 3.11 here, 3.14 in
# sid) and the other modules on every one (CI's time).  The hostile suite
# runs on every version.  PROBING_E2E_EVERY=all runs every module on every
# version; PROBING_E2E_ONCE=skip skips their tests that take a Python
# (CI's trixie stage: those run here and in sid).
ONCE_MODULES = {"test_auth", "test_cluster", "test_completion", "test_config",
                "test_diagnose", "test_errors", "test_exporter",
                "test_gpu_nvml", "test_mcp", "test_original_words",
                "test_protocol", "test_python_app", "test_record",
                "test_repl_tty", "test_subprocesses", "test_target_fds",
                "test_top", "test_web"}


def _once(module):
    return os.environ.get("PROBING_E2E_EVERY") != "all" and \
        module.__name__.rsplit(".", 1)[-1] in ONCE_MODULES


def pytest_generate_tests(metafunc):
    if "python" in metafunc.fixturenames:
        if _once(metafunc.module):
            # The system's python3, or the first version asked for.
            one = SYSTEM_PYTHON if SYSTEM_PYTHON in PYTHONS else \
                next(iter(PYTHONS), None)
            marks = [pytest.mark.skip(reason="run on the other systems' "
                                             "python3 (PROBING_E2E_ONCE=skip)")] \
                if os.environ.get("PROBING_E2E_ONCE") == "skip" else []
            metafunc.parametrize("python", [pytest.param(p, id=IDS[p], marks=marks)
                                            for p in PYTHONS if p == one])
            return
        twin = _twin_runs(metafunc.module)
        params = [pytest.param(p, id=IDS[p]) for p in PYTHONS
                  if twin or p != PYENV_PYTHON]
        if twin and not PYENV_PYTHON and \
                (not _only or SYSTEM_VERSION in _only.split(",")):
            # The second build is missing: said, not silently left out.
            params.insert(1, pytest.param(None, id="pyenv",
                                          marks=pytest.mark.skip(reason=NO_PYENV)))
        metafunc.parametrize("python", params)


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
                raise AssertionError(self.exit_text())
            return agent_listening(self.pid)
        wait_for(up, timeout, "the agent of pid %d" % self.pid)
        return self

    def wait_line(self, text, timeout=30.0):
        """Waits until the target printed a line containing text."""
        path = self.proc.args_out
        def seen():
            if self.proc.poll() is not None:
                raise AssertionError(self.exit_text())
            with open(path, errors="replace") as f:
                return text in f.read()
        wait_for(seen, timeout, repr(text))

    def output(self):
        with open(self.proc.args_out, errors="replace") as f:
            return f.read()

    def exit_text(self):
        """Why the target is gone, the cause on the first line (a test
        summary shows only that one): its exit status or signal and its
        last line; then its whole output."""
        rc = self.proc.returncode
        how = ("killed by %s" % signal.Signals(-rc).name if rc < 0
               else "exit status %d" % rc)
        out = self.output()
        last = out.strip().splitlines()[-1:] or ["(no output)"]
        return "target exited early (%s), its last line: %s\n%s" % (
            how, last[0][:300], out)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        # Its descendants first, while they are still its: a killed
        # program's multiprocessing forkserver (3.14's default) and the
        # DataLoader workers it forked outlive it otherwise.
        for pid in descendants(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def descendants(pid, depth=0):
    """pid's child processes, theirs, and so on (a few levels)."""
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for k in kids:
            out.append(k)
            if depth < 4:
                out += descendants(k, depth + 1)
    return out


def spawner(tmp_path, targets):
    """The spawn fixture's function, starting its targets in tmp_path and
    listing them in targets (tests/gpu's fixture uses it too)."""
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

    return _spawn


@pytest.fixture
def spawn(tmp_path):
    """spawn(python, code, agent="env"|"init"|None, env={}) -> Target

    agent="env": PROBING=1 through the installed-like .pth (PYTHONUSERBASE);
    agent="init": the code is preceded by `import probing; probing.init()`;
    agent=None: no agent (for injection and error tests).
    """
    targets = []
    yield spawner(tmp_path, targets)
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
