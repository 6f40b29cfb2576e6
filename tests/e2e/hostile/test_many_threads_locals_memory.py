"""Finding (issue 27, item 17): `backtrace --locals` of 2,000 threads left
the program at 293 MB resident (from 45 MB), for good: the memory the walk
freed stayed in the agent threads' malloc arenas (each thread has its
own).  It is given back now (common/memtrim.h: after large work, at most
once every 2 s, and each worker's arena top as its reply is sent: that
malloc_trim() leaves, +113 MB before).  What stays, about 12 MB, is not
free malloc memory (the interpreter's own allocator keeps arenas that
hold one live object)."""
import pytest

from conftest import SANITIZED_TARGETS, probing, wait_for

PROGRAM = """
import threading, time
ev = threading.Event()

def work(i):
    numbers = list(range(50)); text = "x" * 300; box = {"i": i}
    ev.wait()

for i in range(2000):
    threading.Thread(target=work, args=(i,), daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

MB = 1024  # /proc counts kB


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(SANITIZED_TARGETS, reason="ASan's quarantine holds freed memory by design")
def test_locals_of_many_threads_give_their_memory_back(python, spawn):
    t = spawn(python, PROGRAM)
    t.wait_agent()
    t.wait_line("ready", timeout=60)
    r = probing("query", "select count(*) from python.threads", target=t.pid)
    assert r.rc == 0, r
    base = rss(t.pid)
    for _ in range(4):
        r = probing("backtrace", "--locals", target=t.pid, timeout=120)
        assert r.rc == 0 and r.out.count("numbers = [0, 1, 2") == 2000, r.err
    # Before: +266 MB after four, for good (arenas of the workers and GIL
    # threads each at the walk's peak); +113 MB with malloc_trim() only
    # (the workers' arena tops).  Now: 6 to 14 MB on 3.9 to 3.13.
    wait_for(lambda: rss(t.pid) - base < 48 * MB, 20,
             lambda: "RSS grew by %d kB" % (rss(t.pid) - base))
    assert t.alive()
