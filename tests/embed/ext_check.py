"""Loads _bridge (ext_bridge.c) into this interpreter and checks it against
sys._current_frames().  CTest runs it with every CPython 3.11 it knows of.
"""
import sys
import threading
import time

import _bridge

release = threading.Event()


def parked(n):
    local_n = n
    release.wait()


# A long function (its location table spans several reads, with long
# line jumps) with a non-ASCII name, in a file whose name needs UCS-4.
LONG_SRC = ("def deep_\u00e9\u4e2d(ev):\n" + "    x = 1\n" * 400 + "\n" * 150
            + "    ev.wait()\n")
LONG_FILE = "/tmp/f\u00fcn-\u4e2d-\U0001f600.py"
long_ns = {}
exec(compile(LONG_SRC, LONG_FILE, "exec"), long_ns)


# A generator's frame (owned by the generator) in a file whose name holds
# a lone surrogate (an undecodable byte): shown backslash-escaped.
GEN_SRC = "def gen_wait(ev):\n    yield 1\n    ev.wait()\n    yield 2\n"
exec(compile(GEN_SRC, "/tmp/bad-\udcff.py", "exec"), long_ns)


def parked_gen():
    g = long_ns["gen_wait"](release)
    next(g)
    next(g)


# A class body whose namespace is a mapping with a Python __setitem__:
# its locals are read after the stacks, when Python code may run.
class Ns(dict):
    def __setitem__(self, k, v):
        super().__setitem__(k, v)


class Meta(type):
    @classmethod
    def __prepare__(mcls, name, bases):
        return Ns()


def parked_class():
    class Body(metaclass=Meta):
        inside = 5
        release.wait()


def parked_long():
    long_ns["deep_\u00e9\u4e2d"](release)


def busy():
    def rec(k):
        return 0 if k == 0 else rec(k - 1) + 1
    while not release.is_set():
        rec(20)


def stack_of(frame):
    out = []
    while frame is not None:
        code = frame.f_code
        out.append((code.co_qualname, code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return out


def check_stacks(workers):
    current = sys._current_frames()
    ids = {t.ident: t for t in workers}
    main = threading.main_thread()
    for gil in (True, False):
        snap = _bridge.take(gil, gil)
        by_id = {t["thread_id"]: t for t in snap}
        assert set(by_id) == set(current), (gil, set(by_id), set(current))
        for ident, t in by_id.items():
            frames = [f[:3] for f in t["frames"]]
            if ident in ids:
                want = [(f, fn.encode("utf-8", "backslashreplace").decode(),
                         n) for f, fn, n in stack_of(current[ident])]
                assert frames == want, (gil, frames, want)
                assert t["native_id"] == ids[ident].native_id
                assert t["state"] == "sleeping", t
                if gil:
                    assert t["name"] == ids[ident].name
                    assert t["daemon"] == ids[ident].daemon
                if gil and t["name"] == "cls":
                    body = t["frames"][2]
                    assert body[0] == "parked_class.<locals>.Body", body
                    assert body[3]["inside"] == ("int", "5"), body
                if gil and t["name"] not in ("long", "gen", "cls"):
                    assert t["frames"][2][3]["local_n"] == ("int", "7"), t
            else:
                assert ident == main.ident
                assert t["is_main"] == 1 and t["native_id"] == main.native_id
                assert frames[0][:2] == ("check_stacks", __file__), frames
                assert t["holds_gil"] == gil
    cut = _bridge.take(False, False, 2)
    assert all(len(t["frames"]) <= 2 for t in cut)
    assert _bridge.holder() == (0, 0), _bridge.holder()
    assert _bridge.holder_held() == (main.ident, main.native_id)


def check_churn():
    for i in range(300):
        _bridge.take(False, False)
        if i % 10 == 0:
            _bridge.take(True, True)


def check_eval():
    r = _bridge.eval("1 + 1")
    assert r["ok"] == 1 and r["value"] == "2" and r["type"] == "int", r
    r = _bridge.eval("for i in range(2):\n    print(i)\n")
    assert r["ok"] == 1 and r["output"] == "0\n1\n", r
    r = _bridge.eval("import sys\nsys.exit(4)")
    assert r["ok"] == 0 and "SystemExit: 4" in r["error"], r
    assert sys.stdout is sys.__stdout__


def main():
    workers = [threading.Thread(target=parked, args=(7,), name="p%d" % i,
                                daemon=i == 1) for i in range(3)]
    workers.append(threading.Thread(target=parked_long, name="long"))
    workers.append(threading.Thread(target=parked_gen, name="gen"))
    workers.append(threading.Thread(target=parked_class, name="cls"))
    for t in workers:
        t.start()
    while len(release._cond._waiters) < 6:
        time.sleep(0.005)
    time.sleep(0.2)
    check_stacks(workers)
    long_frames = [t for t in _bridge.take(False, False)
                   if t["name"] and t["thread_id"] == workers[3].ident]
    assert long_frames[0]["frames"][2][:3] == (
        "deep_\u00e9\u4e2d", LONG_FILE, 552), long_frames
    gen_frames = [t for t in _bridge.take(False, False)
                  if t["thread_id"] == workers[4].ident][0]["frames"]
    assert gen_frames[2][:3] == ("gen_wait", "/tmp/bad-\\udcff.py", 3)
    assert gen_frames[3][0] == "parked_gen"
    release.set()
    for t in workers:
        t.join()
    release.clear()
    busy_threads = [threading.Thread(target=busy) for i in range(3)]
    for t in busy_threads:
        t.start()
    check_churn()
    release.set()
    for t in busy_threads:
        t.join()
    check_eval()
    print("ext_check ok:", sys.version.split()[0], sys.executable)


main()
