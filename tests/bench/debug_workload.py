"""A CPU-bound pure-Python workload for tests/bench/debug_overhead.py.

Reads a number N from stdin, runs N rounds of work() and prints
"TIMES t1 ... tN" (CPU seconds of the main thread per round); repeats
until stdin closes.  Imports helpers (next to it) without calling the
function there, so a breakpoint in it is in a loaded file that never runs.
"""
import sys
import time

import helpers  # noqa: F401  (loaded, never called)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def add(self, other):
        return Point(self.x + other.x, self.y + other.y)


def loops(n):
    t = 0
    for i in range(n):
        t += i * i % 7
        if t < 0:
            t = 0  # never executed: the hot loop's breakpoint (HOT_LINE)
    return t


def objects(n):
    p = Point(0, 0)
    for i in range(n):
        p = p.add(Point(i, 1))
    return p.x


def strings(n):
    d = {}
    for i in range(n):
        k = str(i % 1000)
        d[k] = d.get(k, 0) + 1
    return len(d)


def work():
    fib(22)
    loops(400000)
    objects(100000)
    strings(120000)


def main():
    for _ in range(3):
        work()  # warm up: the specialising interpreter settles
    print("ready", flush=True)
    for line in sys.stdin:
        times = []
        for _ in range(int(line)):
            t = time.thread_time()
            work()
            times.append(time.thread_time() - t)
        print("TIMES " + " ".join("%.6f" % x for x in times), flush=True)


if __name__ == "__main__":
    main()
