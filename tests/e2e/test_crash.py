"""The crash handler (crash.enabled): real processes that die by a null
dereference through ctypes, by abort(), by fatal signals in a thread a C
extension started, and by an uncaught exception.  Each is checked for a
complete and correct report (read back with the real `probing report`),
for the exit status it would have had without us, and for chaining: to
faulthandler (enabled before or after us) and to a C handler installed
before us, which must get the fault's own siginfo.
"""
import glob
import os
import resource
import shutil
import signal
import subprocess
import textwrap

import pytest

from conftest import site_for, USERBASE, probing, wait_for

CC = shutil.which("cc") or shutil.which("gcc")

CRASHER_C = r"""
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

volatile int zero = 0, one = 1;

__attribute__((noinline)) void crasher_fault(int how)
{
	if (how == 0)
		*(volatile int *)16 = 1;
	else {
		volatile int x = one / zero;
		(void)x;
	}
	zero++; /* no tail call */
}

static void *crasher_main(void *arg)
{
	usleep(200000);
	crasher_fault((int)(long)arg);
	return NULL;
}

void crasher_start(int how)
{
	pthread_t t;
	pthread_create(&t, NULL, crasher_main, (void *)(long)how);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	char msg[64] = "C HANDLER si_addr=0x";
	unsigned long a = (unsigned long)si->si_addr;
	char hex[17];
	int n = 0;
	(void)sig, (void)uc;
	do hex[n++] = "0123456789abcdef"[a & 15]; while (a >>= 4);
	for (int i = 0; i < n; i++) msg[20 + i] = hex[n - 1 - i];
	msg[20 + n] = '\n';
	write(2, msg, 21 + n);
	_exit(42);
}

void crasher_install_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
}
"""


def asan_env(tmp_path):
    """Under the ASan run the sanitizer's own SEGV/FPE/BUS handlers would
    end the process first (exit 1, a sanitizer report): these tests are
    about ours, so the sanitizer leaves those signals alone."""
    if not os.environ.get("PROBING_TARGET_PRELOAD"):
        return {}
    return {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
            ":handle_segv=0:handle_sigbus=0:handle_sigfpe=0:log_path=" +
            str(tmp_path / "sanitizer")}


def crash_env(tmp_path, **extra):
    e = {"PROBING_CRASH": "1"}
    e.update(asan_env(tmp_path))
    e.update(extra)
    return e


def wait_exit(t, timeout=120):
    return t.proc.wait(timeout=timeout)


def reports(tmp_path, pid, kind="crash"):
    return glob.glob(str(tmp_path / ("probing-%s-%d-*.txt" % (kind, pid))))


def read_report(path):
    r = probing("report", "-f", "json", path)
    assert r.rc == 0, r
    return r.json()


def the_report(tmp_path, pid, kind="crash"):
    found = reports(tmp_path, pid, kind)
    assert len(found) == 1, found
    rep = read_report(found[0])
    assert rep["version"] == 1 and rep["complete"], rep
    assert rep["header"]["pid"] == str(pid)
    return found[0], rep


def line_of(code, text):
    """The 1-based line of code (as spawn writes it) that is text, once
    stripped."""
    lines = textwrap.dedent(code).splitlines()
    return [i + 1 for i, l in enumerate(lines) if l.strip() == text][0]


def py_funcs(thread):
    return [f["func"] for f in thread["python"]]


def native_funcs(thread):
    return [f.get("func", "") for f in thread.get("native", [])]


def crasher_lib(tmp_path):
    if not CC:
        pytest.skip("no C compiler")
    src = tmp_path / "crasher.c"
    src.write_text(CRASHER_C)
    lib = tmp_path / "libcrasher.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src),
                    "-lpthread"], check=True)
    return str(lib)


SEGV = """
import ctypes, threading, time
def sleeper():
    while True:
        time.sleep(0.05)
threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
def crash():
    ctypes.string_at(0)
def outer():
    crash()
time.sleep(0.3)
outer()
"""


def test_null_dereference_through_ctypes(spawn, python, tmp_path):
    t = spawn(python, SEGV, env=crash_env(tmp_path))
    assert wait_exit(t) == -signal.SIGSEGV
    path, rep = the_report(tmp_path, t.pid)
    h = rep["header"]
    assert h["kind"] == "crash" and h["signal"] == "11"
    assert h["reason"] == "SIGSEGV (SEGV_MAPERR) at address 0x0"
    assert h["thread"] == str(t.pid)
    assert t.script in h["cmdline"]
    first = rep["threads"][0]
    assert first["tid"] == t.pid and first["flags"] == ["crashed", "main"]
    assert py_funcs(first) == ["string_at", "crash", "outer", "<module>"]
    frames = first["python"]
    assert frames[1]["file"] == t.script
    assert frames[1]["line"] == line_of(SEGV, "ctypes.string_at(0)")
    assert frames[3]["line"] == line_of(SEGV, "outer()")
    # The native stack, from the faulting instruction out through libffi
    # and ctypes to the interpreter.
    nat = first["native"]
    assert nat and nat[0]["index"] == 0
    objects = " ".join(f.get("object", "") for f in nat)
    assert "_ctypes" in objects and "libffi" in objects
    assert any(f.startswith("ffi_call+") for f in native_funcs(first))
    assert any(f.startswith("_PyEval_EvalFrameDefault+")
               for f in native_funcs(first))
    # Every other thread's Python stack.
    others = rep["threads"][1:]
    assert [py_funcs(th)[0] for th in others] == ["sleeper"]
    assert "native" not in others[0]
    # The same on stderr, and where the file is.
    out = t.output()
    assert "probing-report: 1" in out
    assert "probing: crash report written to %s" % path in out
    # For a person: the crashed thread first, with its source lines.
    r = probing("report", path)
    assert r.rc == 0, r
    assert r.out.startswith("Crash: SIGSEGV (SEGV_MAPERR) at address 0x0\n")
    assert r.out.index("(crashed, main)") < r.out.index("sleeper (")
    assert "        ctypes.string_at(0)\n" in r.out
    assert "ffi_call+" in r.out


ABORT = """
import os, time
def give_up():
    os.abort()
time.sleep(0.2)
give_up()
"""


def test_abort(spawn, python, tmp_path):
    t = spawn(python, ABORT, env=crash_env(tmp_path))
    assert wait_exit(t) == -signal.SIGABRT
    _, rep = the_report(tmp_path, t.pid)
    h = rep["header"]
    assert h["signal"] == "6"
    assert h["reason"] == "SIGABRT (SI_TKILL) raised by the process itself"
    first = rep["threads"][0]
    assert first["flags"] == ["crashed", "main"]
    assert py_funcs(first) == ["give_up", "<module>"]
    assert first["python"][0]["line"] == line_of(ABORT, "os.abort()")
    assert any(f.startswith("abort+") for f in native_funcs(first))


@pytest.mark.parametrize("how,sig,reason", [
    (0, signal.SIGSEGV, "SIGSEGV (SEGV_MAPERR) at address 0x10"),
    (1, signal.SIGFPE, "SIGFPE (FPE_INTDIV) at address 0x"),
], ids=["segv", "fpe"])
def test_fatal_signal_in_a_c_extension_thread(spawn, python, tmp_path, how,
                                              sig, reason):
    lib = crasher_lib(tmp_path)
    code = """
    import ctypes, time
    lib = ctypes.CDLL(%r)
    lib.crasher_start(%d)
    def wait():
        time.sleep(30)
    wait()
    """ % (lib, how)
    t = spawn(python, code, env=crash_env(tmp_path))
    assert wait_exit(t) == -sig
    _, rep = the_report(tmp_path, t.pid)
    assert rep["header"]["reason"].startswith(reason)
    first = rep["threads"][0]
    # A thread the C code started: no Python thread state, no ident.
    assert first["tid"] != t.pid and first["flags"] == ["crashed"]
    assert first["ident"] == "0x0" and first["python"] == []
    assert first["pythonNotes"] == ["a thread without a Python thread state"]
    funcs = native_funcs(first)
    assert funcs[0].startswith("crasher_fault+"), funcs
    assert funcs[1].startswith("crasher_main+"), funcs
    assert "libcrasher.so" in first["native"][0]["object"]
    # The main thread, where it waits.
    main = [th for th in rep["threads"] if th["tid"] == t.pid]
    assert len(main) == 1 and main[0]["flags"] == ["main"]
    assert py_funcs(main[0]) == ["wait", "<module>"]


EXC = """
import threading, time
def worker():
    time.sleep(60)
threading.Thread(target=worker, daemon=True).start()
def divide(x):
    return 1 / x
def compute():
    divide(0)
time.sleep(0.2)
compute()
"""


def test_uncaught_exception(spawn, python, tmp_path):
    t = spawn(python, EXC, env=crash_env(tmp_path))
    assert wait_exit(t) == 1
    path, rep = the_report(tmp_path, t.pid)
    h = rep["header"]
    assert h["kind"] == "exception"
    assert h["reason"] == "uncaught ZeroDivisionError: division by zero"
    assert h["exception"] == "ZeroDivisionError"
    first = rep["threads"][0]
    assert first["tid"] == t.pid and first["flags"] == ["exception", "main"]
    assert first["pythonLabel"] == "traceback, most recent call first"
    assert py_funcs(first) == ["divide", "compute", "<module>"]
    assert first["python"][0]["line"] == line_of(EXC, "return 1 / x")
    assert [py_funcs(th)[0] for th in rep["threads"][1:]] == ["worker"]
    out = t.output()
    # Python's own traceback is still printed, and only a line of ours.
    assert "ZeroDivisionError: division by zero" in out
    assert "Traceback (most recent call last)" in out
    assert "probing: exception report written to %s" % path in out
    assert "probing-report" not in out
    r = probing("report", path)
    assert r.rc == 0 and r.out.startswith(
        "Exception: uncaught ZeroDivisionError: division by zero"), r


def test_no_report_for_handled_exceptions_exit_or_normal_end(spawn, python,
                                                             tmp_path):
    code = """
    import sys, time
    try:
        1 / 0
    except ZeroDivisionError:
        pass
    time.sleep(0.2)
    sys.exit(3)
    """
    t = spawn(python, code, env=crash_env(tmp_path))
    assert wait_exit(t) == 3
    t2 = spawn(python, "import time; time.sleep(0.2)\n",
               env=crash_env(tmp_path))
    assert wait_exit(t2) == 0
    assert not glob.glob(str(tmp_path / "probing-crash-*"))
    assert "probing" not in t.output() + t2.output()


def test_chains_to_faulthandler_enabled_before(spawn, python, tmp_path):
    t = spawn(python, SEGV, env=crash_env(tmp_path, PYTHONFAULTHANDLER="1"))
    assert wait_exit(t) == -signal.SIGSEGV
    _, rep = the_report(tmp_path, t.pid)
    assert rep["header"]["reason"] == "SIGSEGV (SEGV_MAPERR) at address 0x0"
    out = t.output()
    # Ours first (installed last), then faulthandler's.
    assert out.index("probing-report: 1") < \
        out.index("Fatal Python error: Segmentation fault")


def test_chains_from_faulthandler_enabled_after(spawn, python, tmp_path):
    code = "import faulthandler; faulthandler.enable()\n" + SEGV
    t = spawn(python, code, env=crash_env(tmp_path))
    assert wait_exit(t) == -signal.SIGSEGV
    _, rep = the_report(tmp_path, t.pid)
    # faulthandler ran first and raised the signal again for us.
    assert rep["header"]["reason"].startswith("SIGSEGV (SI_TKILL)")
    assert py_funcs(rep["threads"][0])[:2] == ["string_at", "crash"]
    out = t.output()
    assert out.index("Fatal Python error: Segmentation fault") < \
        out.index("probing-report: 1")


# faulthandler's alternate stack (SIGSTKSZ * 2 from the heap) replaced by
# one of the same size with a guard page below: a handler that runs past
# it faults there instead of writing over the heap unseen.
SMALL_ALTSTACK = """
import ctypes, faulthandler
faulthandler.enable()
libc = ctypes.CDLL(None, use_errno=True)
class stack_t(ctypes.Structure):
    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int),
                ("ss_size", ctypes.c_size_t)]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
PAGE, SIZE = 4096, %d
m = libc.mmap(None, SIZE + PAGE, 3, 0x22, -1, 0)
assert libc.mprotect(ctypes.c_void_p(m), PAGE, 0) == 0
assert libc.sigaltstack(ctypes.byref(stack_t(m + PAGE, 0, SIZE)), None) == 0
"""


@pytest.mark.parametrize("size", [16384, 12288])
def test_report_fits_on_a_small_foreign_altstack(spawn, python, tmp_path,
                                                  size):
    """faulthandler (enabled after the agent) runs first on its small
    stack and raises the signal again for us there: the report must not
    assume that stack is big enough (AVX-512 signal frames take 3 KiB
    each of it; ASan saw the old handler write past faulthandler's)."""
    t = spawn(python, SMALL_ALTSTACK % size + SEGV, env=crash_env(tmp_path))
    assert wait_exit(t) == -signal.SIGSEGV
    _, rep = the_report(tmp_path, t.pid)
    assert py_funcs(rep["threads"][0])[:2] == ["string_at", "crash"]
    assert rep["threads"][0].get("native"), rep["threads"][0]
    out = t.output()
    assert out.index("Fatal Python error: Segmentation fault") < \
        out.index("probing-report: 1")


def test_chains_to_a_c_handler_with_the_faults_siginfo(spawn, python,
                                                       tmp_path):
    lib = crasher_lib(tmp_path)
    code = """
    import ctypes, time
    lib = ctypes.CDLL(%r)
    lib.crasher_install_handler()
    import probing
    probing.init(crash_enabled=True)
    lib.crasher_start(0)
    time.sleep(30)
    """ % lib
    env = {"PYTHONPATH": site_for(python)}
    env.update(asan_env(tmp_path))
    t = spawn(python, code, agent=None, env=env)
    assert wait_exit(t) == 42
    _, rep = the_report(tmp_path, t.pid)
    assert rep["header"]["reason"] == "SIGSEGV (SEGV_MAPERR) at address 0x10"
    out = t.output()
    assert "C HANDLER si_addr=0x10\n" in out
    assert out.index("end: complete") < out.index("C HANDLER")


def test_core_dump_still_written(tmp_path):
    """With core dumps allowed, the process still dumps core: the signal
    is re-raised with its default action."""
    if os.environ.get("PROBING_TARGET_PRELOAD"):
        pytest.skip("ASan turns core dumps off in the process "
                    "(disable_coredump, for its shadow memory)")
    pattern = open("/proc/sys/kernel/core_pattern").read().strip()
    if pattern.startswith("|"):
        pytest.skip("core dumps go to a helper: %s" % pattern)
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    if hard != resource.RLIM_INFINITY and hard < (1 << 30):
        pytest.skip("core size limit too low")
    script = tmp_path / "segv.py"
    script.write_text("import ctypes, time\ntime.sleep(0.2)\n"
                      "ctypes.string_at(0)\n")
    env = dict(os.environ, PYTHONUSERBASE=USERBASE, PROBING="1",
               PROBING_CRASH="1")

    def allow_core():
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))

    p = subprocess.Popen(["/usr/bin/python3", str(script)], cwd=str(tmp_path),
                         env=env, preexec_fn=allow_core,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status = os.waitpid(p.pid, 0)
    p.returncode = 0  # reaped here
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV
    assert reports(tmp_path, p.pid)
    assert os.WCOREDUMP(status)
    for core in glob.glob(str(tmp_path / "core*")):
        os.remove(core)


def test_off_restores_the_previous_handler(spawn, python, tmp_path):
    code = """
    import ctypes, os, time
    while not os.path.exists("go"):
        time.sleep(0.02)
    ctypes.string_at(0)
    """
    t = spawn(python, code, env=crash_env(tmp_path))
    t.wait_agent()
    r = probing("config", "crash.enabled=off", target=t.pid)
    assert r.rc == 0 and "off" in r.out, r
    (tmp_path / "go").write_text("")
    assert wait_exit(t) == -signal.SIGSEGV
    assert not reports(tmp_path, t.pid)
    assert "probing-report" not in t.output()


def test_inject_crash_and_report_directory(spawn, python, tmp_path):
    outdir = tmp_path / "reports"
    outdir.mkdir()
    code = """
    import ctypes, os, time
    print("READY", flush=True)
    while not os.path.exists("go"):
        time.sleep(0.02)
    def late():
        ctypes.string_at(0)
    late()
    """
    env = asan_env(tmp_path)
    t = spawn(python, code, agent=None, env=env)
    t.wait_line("READY")
    r = probing("inject", "--crash", "-D", "crash.path=%s" % outdir,
                target=t.pid, timeout=120)
    assert r.rc == 0, r
    r = probing("config", "-f", "json", target=t.pid)
    settings = {s["name"]: s["value"] for s in r.json()}
    assert settings["crash.enabled"] == "on"
    assert settings["crash.path"] == str(outdir)
    (tmp_path / "go").write_text("")
    assert wait_exit(t) == -signal.SIGSEGV
    found = glob.glob(str(outdir / ("probing-crash-%d-*.txt" % t.pid)))
    assert len(found) == 1, os.listdir(str(tmp_path))
    rep = read_report(found[0])
    assert py_funcs(rep["threads"][0])[:2] == ["string_at", "late"]


def test_bad_report_directory_refused(spawn, python, tmp_path):
    t = spawn(python, "import time; time.sleep(60)\n")
    t.wait_agent()
    r = probing("config", "crash.path=%s" % (tmp_path / "nope"), target=t.pid)
    assert r.rc == 1 and "not a directory" in r.err, r


def test_report_command_errors(tmp_path):
    r = probing("report", str(tmp_path / "missing.txt"))
    assert r.rc == 1 and "No such file" in r.err, r
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\n")
    r = probing("report", str(bad))
    assert r.rc == 1 and "not a Probing report" in r.err, r
    r = probing("report")
    assert r.rc == 2, r
