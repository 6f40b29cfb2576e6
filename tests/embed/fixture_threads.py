# Threads parked at known lines for test_pystack.c.  Lines marked
# "# LINE <name>" are looked up by the test; keep the markers on the calls.
import sys
import threading
import time

import _probe

started = threading.Barrier(4)
release = threading.Event()


class Boom:
    def __repr__(self):
        raise ValueError("boom")


def leaf_alpha(n):
    greeting = "hello"
    count = n * 2
    started.wait()
    release.wait()  # LINE alpha


def worker_alpha():
    leaf_alpha(21)  # LINE alpha_caller


def worker_beta():
    bad = Boom()
    huge = "y" * 100000
    started.wait()
    release.wait()  # LINE beta


class Gamma:
    def run(self):
        items = [1, 2, 3]
        started.wait()
        release.wait()  # LINE gamma


threads = [
    threading.Thread(target=worker_alpha, name="alpha"),
    threading.Thread(target=worker_beta, name="beta", daemon=True),
    threading.Thread(target=Gamma().run, name="gamma"),
]
for t in threads:
    t.start()
started.wait()
# Every worker is inside release.wait() once it queued its waiter; give it
# a moment more to block in the lock, so its stack stops moving.
while len(release._cond._waiters) < 3:
    time.sleep(0.005)
time.sleep(0.2)
idents = {t.name: (t.ident, t.native_id) for t in threads}
idents["MainThread"] = (threading.main_thread().ident,
                        threading.main_thread().native_id)


def main_probe():
    marker = 42
    _probe.take_gil()  # LINE main_gil
    _probe.take_nogil()  # LINE main_nogil
    _probe.spin_and_walk()  # LINE main_spin
    _probe.take_from_agent_thread()  # LINE main_agent
    _probe.take_nogil_pipe()  # LINE main_pipe


main_probe()  # LINE main_call
release.set()
for t in threads:
    t.join()
