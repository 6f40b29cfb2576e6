"""Findings (2026-11-27, a hostile review of issue 33's listing):

1. The listing's answer was a list; pytasks.c lets the GIL go between
   slices of it, and a program thread that found it through
   gc.get_objects() and cleared it made the agent read freed memory: the
   target died of SIGSEGV.  The answer is a tuple now, which nothing can
   change.
2. A Task subclass's overrides (get_coro, get_name, done, cancelled) ran on
   the agent's threads — program code where the listing promised none; a
   task whose get_coro() gave None (no frames) made the whole listing
   "garbled".  asyncio's own methods are called unbound now, and a task
   without frames counts.  (On 3.14 and later CPython's all_tasks(loop),
   the only way to its task lists, calls each task's done() itself.)

Here: a program with such tasks: the table and the tree list every task
with asyncio's names, and the overrides never run off the main thread;
then a thread of it clears every large list it finds through the GC
while listings run: they answer or fail, and the program lives."""
import os
import re
import time

from conftest import probing, version_of, wait_for

PROGRAM = """\
import asyncio, gc, os, sys, threading, time
keep = []

calls = []
class Sneaky(asyncio.Task):
    def get_coro(self):
        calls.append(("get_coro", threading.current_thread().name))
        return None
    def get_name(self):
        calls.append(("get_name", threading.current_thread().name))
        return "sneaky"
    def done(self):
        calls.append(("done", threading.current_thread().name))
        return super().done()

def hunter():
    while not os.path.exists("hunt"):
        time.sleep(0.05)
    print("HUNTING", flush=True)
    while True:
        for o in gc.get_objects():
            if type(o) is list and len(o) > 3000 and o is not keep:
                o.clear()
        time.sleep(0.001)

async def idle():
    await asyncio.sleep(3600)

async def report():
    while True:
        await asyncio.sleep(0.1)
        off = sorted(set(m for m, c in calls if c != "MainThread"))
        print("OFF-MAIN %r" % off, flush=True)

async def main():
    loop = asyncio.get_running_loop()
    keep.extend(asyncio.ensure_future(idle()) for _ in range(4000))
    sneaky = [Sneaky(idle(), loop=loop, name="s%d" % i) for i in range(20)]
    threading.Thread(target=hunter, daemon=True, name="hunter").start()
    print("READY", flush=True)
    await report()

asyncio.run(main())
"""


def test_hostile_tasks_and_a_list_clearing_thread(spawn, python, tmp_path):
    t = spawn(python, PROGRAM)
    t.wait_line("READY")
    t.wait_agent()
    r = probing("query", "SELECT count(*) AS n FROM python.tasks", "-f", "json",
                target=t.pid)
    # 4000 idle, 20 of the subclass, main (report is awaited by it)
    assert r.rc == 0 and r.json() == [{"n": 4021}], r
    r = probing("backtrace", "--tasks", target=t.pid)
    assert r.rc == 0 and "asyncio tasks of its event loop (4021):" in r.out, r.err
    # The subclass's tasks, by asyncio's own get_name and get_coro.
    assert re.search(r"─ s7 \(idle\) pending, awaits asyncio sleep", r.out), r.out[-2000:]
    n = len(t.output())
    wait_for(lambda: len(t.output()) > n, 30, "a report after the listings")
    time.sleep(0.3)
    reports = re.findall(r"^OFF-MAIN (.*)$", t.output(), re.M)
    # CPython 3.14's all_tasks(loop), the only way to its tasks, asks each
    # task's done() itself.
    allowed = "['done']" if version_of(python) >= (3, 14) else "[]"
    assert reports and reports[-1] in ("[]", allowed), reports[-3:]
    # Now the hunter: listings may fail; the program must live.
    open(os.path.join(str(tmp_path), "hunt"), "w").close()
    t.wait_line("HUNTING")
    for _ in range(10):
        probing("query", "SELECT count(*) FROM python.tasks", target=t.pid)
        probing("backtrace", "--tasks", target=t.pid)
    assert t.proc.poll() is None, t.output()[-500:]
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and "MainThread" in r.out, r
