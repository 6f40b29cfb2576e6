"""Finding (2026-11-27, issue 33's benchmark): listing an asyncio server's
10,000 tasks stopped its event loop for 36 ms.  The listing made 10,000
rows as tuples and lists — objects the cyclic garbage collector tracks,
alive long enough to be promoted — and set off a full collection of the
program's heap in the middle of it: 47 ms with every thread stopped.  The
listing's answer is one flat list of strings and numbers now.

Here: a program with 10,000 idle tasks counts, through gc.callbacks, the
full collections that start; listing its tasks three ways (the table, the
tree, the hang playbook) sets off none.  (The program itself allocates
nothing meanwhile: it is idle.)"""
import re

from conftest import probing, wait_for

PROGRAM = """\
import asyncio, gc, sys

full = [0]
def watch(phase, info):
    if phase == "start" and info["generation"] == 2:
        full[0] += 1
gc.callbacks.append(watch)

async def idle(ev):
    await ev.wait()

async def report():
    while True:
        await asyncio.sleep(0.1)
        print("FULL %d" % full[0], flush=True)

async def main():
    ev = asyncio.Event()
    tasks = [asyncio.create_task(idle(ev)) for _ in range(10000)]
    gc.collect()
    full[0] = 0
    print("READY", flush=True)
    await asyncio.gather(report(), *tasks)

asyncio.run(main())
"""


def full_collections(t):
    counts = re.findall(r"^FULL (\d+)$", t.output(), re.M)
    return int(counts[-1]) if counts else None


def test_listing_ten_thousand_tasks_sets_off_no_full_collection(spawn, python):
    t = spawn(python, PROGRAM)
    t.wait_line("READY")
    t.wait_agent()
    wait_for(lambda: full_collections(t) is not None, 30, "the first count")
    before = full_collections(t)
    r = probing("query", "SELECT count(*) AS n FROM python.tasks", "-f", "json",
                target=t.pid)
    assert r.rc == 0 and r.json() == [{"n": 10002}], r
    r = probing("backtrace", "--tasks", target=t.pid)
    assert r.rc == 0 and "asyncio tasks of its event loop (10002):" in r.out, r.err
    r = probing("diagnose", "hang", "-d", "1s", target=t.pid, timeout=120)
    assert r.rc == 0 and "asyncio: 10002 tasks" in r.out, r
    n = len(t.output())
    wait_for(lambda: len(t.output()) > n and full_collections(t) is not None,
             30, "a count after the listings")
    assert full_collections(t) == before, t.output()[-300:]
