"""A target holding the GIL in a long C call, and evals stuck in C: the
agent still answers, and names the real cause when it cannot."""
import os
import signal
import subprocess
import time

from conftest import CLI, probing, wait_for

HOG = """\
import time
def crunch():
    print("HOGGING", flush=True)
    return sum(range(3 * 10**9))     # line 4: C loop, GIL held throughout
time.sleep(0.5)
crunch()
"""


def test_backtrace_without_gil_and_eval_names_holder(spawn, python):
    t = spawn(python, HOG)
    t.wait_agent()
    t.wait_line("HOGGING")
    time.sleep(0.3)
    began = time.time()
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    body = r.json()
    assert body["gil"]["acquired"] is False
    main = [th for th in body["threads"] if th["nativeId"] == t.pid][0]
    assert main["name"] == "MainThread" and main["isMain"]
    assert [(f["func"], f["line"]) for f in main["frames"][:2]] == [("crunch", 4), ("<module>", 6)]
    assert body["gil"]["holderNativeId"] == t.pid
    assert time.time() - began < 10
    r = probing("eval", "1", target=t.pid)
    assert r.rc == 1
    assert "GIL" in r.err and str(t.pid) in r.err
    r = probing("query", "-f", "json",
                "SELECT func, lineno FROM python.backtrace WHERE depth = 0", target=t.pid)
    assert r.rc == 0, r
    assert {"func": "crunch", "lineno": 4} in r.json()
    assert t.alive()


STUCK = """\
import signal, threading, time
ev = threading.Event()
signal.signal(signal.SIGUSR1, lambda *_: ev.set())
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""

STUCK_EVAL = "import __main__; __main__.ev.wait()"
GIL_THREADS, GIL_THREADS_MAX = 3, 8  # agent/python/pygil.h
WORKER_THREADS = 4  # agent/server/worker.h: requests handled at once


def threads_of(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def stuck_evals(pid, n):
    """n evals blocked in C (Event.wait), as many at once as the agent
    handles; each is interrupted after 100 ms, does not stop, and is given
    up 2 s later."""
    while n > 0:
        procs = [subprocess.Popen([CLI, "-t", str(pid), "eval", "--timeout",
                                   "100", STUCK_EVAL], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for _ in range(min(n, WORKER_THREADS))]
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 1 and "did not stop when interrupted" \
                in err, (p.returncode, out, err)
        n -= len(procs)


def test_evals_stuck_in_c_never_starve_the_agent(spawn, python):
    """Evals blocked in C keep their GIL thread for good; later requests
    get a new one (the pool grows to PYGIL_THREADS_MAX), and past that
    they are told the real cause: earlier requests still running, not a
    GIL held by the main thread.  When the stuck calls end, the extra
    threads leave."""
    t = spawn(python, STUCK)
    t.wait_agent()
    t.wait_line("READY")
    r = probing("eval", "1", target=t.pid)
    assert r.rc == 0, r
    base = threads_of(t.pid)
    stuck_evals(t.pid, GIL_THREADS)
    for _ in range(3):
        r = probing("eval", "6 * 7", target=t.pid)
        assert r.rc == 0 and r.out.strip() == "42", r
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0, r
    stuck_evals(t.pid, GIL_THREADS_MAX - GIL_THREADS)
    r = probing("eval", "6 * 7", target=t.pid)
    assert r.rc == 1, r
    assert "no Python thread of the agent is free: %d earlier requests " \
        "are still running" % GIL_THREADS_MAX in r.err, r
    assert "GIL is held" not in r.err, r
    # What needs no Python thread still works.
    r = probing("query", "SELECT count(*) AS n FROM python.threads",
                target=t.pid)
    assert r.rc == 0, r
    # The stuck calls end: the agent is whole again, its extra threads go.
    os.kill(t.pid, signal.SIGUSR1)
    wait_for(lambda: probing("eval", "6 * 7", target=t.pid).rc == 0, 30,
             "a free Python thread")
    wait_for(lambda: threads_of(t.pid) <= base, 30,
             "the extra threads to leave (%d, was %d)"
             % (threads_of(t.pid), base))
    assert t.alive()
