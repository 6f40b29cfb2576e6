# Threads parked in known shapes for test_walk_raw.c: a 60-deep recursion,
# a generator, a coroutine driven by hand, and the main thread calling
# into _walk (which compares pyframes_walk_raw with pyframes_walk).
import threading
import time

import _walk

ready = threading.Barrier(4)
release = threading.Event()


def deep(n):
    if n == 0:
        ready.wait()
        release.wait()
        return 0
    return deep(n - 1) + 1


def gen():
    ready.wait()
    release.wait()
    yield 1


def in_generator():
    for _ in gen():
        pass


async def coro():
    ready.wait()
    release.wait()


def in_coroutine():
    c = coro()
    try:
        c.send(None)
    except StopIteration:
        pass


threads = [threading.Thread(target=deep, args=(60,), name="deep"),
           threading.Thread(target=in_generator, name="gen"),
           threading.Thread(target=in_coroutine, name="coro")]
for t in threads:
    t.start()
ready.wait()
while len(release._cond._waiters) < 3:
    time.sleep(0.005)
time.sleep(0.1)
_walk.compare()
release.set()
for t in threads:
    t.join()
