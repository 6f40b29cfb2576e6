"""The sampling profiler: accuracy, thread states, output formats read by
the tools people use, native stacks, a soak of signals, the CLI's errors.

Workloads spend known shares of their CPU time in known functions; the
profiler must find those shares (within 5 points), mark idle threads
idle and show GIL waits.  Outputs are checked by independent readers
(tests/profile/formats.py): a folded-stack parser, the Trace Event
schema, speedscope's own importer and schema.
"""
import json
import os
import signal
import sys
import time

import pytest

from conftest import probing, qualified

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "profile"))
import formats  # noqa: E402

SPLIT = """\
import threading, time

def hot_a():
    x = 0
    for i in range(2000):
        x += i * i
    return x

def hot_b():
    x = 0
    for i in range(2000):
        x ^= i
    return x

def spin(fn, seconds):
    # CPU seconds of this thread, not wall ones: on a busy machine a phase
    # timed by the wall clock runs on past its end while the thread waits
    # for a CPU, the short phase relatively longer than the long one.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        fn()

def work():
    while True:
        spin(hot_a, 0.07)   # 70% of the time
        spin(hot_b, 0.03)   # 30%

def sleeper():
    while True:
        time.sleep(0.5)

threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
print("READY", flush=True)
work()
"""

CONTENTION = """\
import os, queue, select, socket, threading

def burn():
    while True:
        x = 0
        for i in range(10000):
            x += i

# Threads blocked for good, each in another kind of wait: a lock and a
# queue (futex waits, like the GIL's, on other addresses), a socket, a
# select().  They are idle, never waiting for the GIL.
lock = threading.Lock()
lock.acquire()
q = queue.Queue()
a, b = socket.socketpair()
rd, wr = os.pipe()
blocked = {"on-lock": lock.acquire, "on-queue": q.get,
           "on-socket": lambda: a.recv(1),
           "on-select": lambda: select.select([rd], [], [])}
for name, fn in blocked.items():
    threading.Thread(target=fn, name=name, daemon=True).start()
ts = [threading.Thread(target=burn, name="burner-%d" % i, daemon=True) for i in (1, 2)]
for t in ts:
    t.start()
print("READY", flush=True)
for t in ts:
    t.join()
"""


def start(spawn, python, code, **kw):
    t = spawn(python, code, **kw)
    t.wait_line("READY")
    t.wait_agent()
    return t


def sql(t, q):
    r = probing("query", "-f", "json", q, target=t.pid)
    assert r.rc == 0, r
    return r.json()


def leaf_counts(stacks):
    counts = {}
    for frames, n in stacks:
        name = frames[-1].split(" (")[0]
        counts[name] = counts.get(name, 0) + n
    return counts


def record_samples(t, want, hz=200, limit=60, native=False):
    """Samples at hz until `want` samples are taken (a machine so busy that
    the sampler rarely gets a CPU takes longer), at most `limit` s.
    Returns the profiler's status once stopped."""
    r = probing("perf", "--cc" if native else "--start", "--hz", hz, target=t.pid)
    assert r.rc == 0, r
    deadline = time.time() + limit
    while time.time() < deadline:
        time.sleep(1)
        r = probing("perf", "-f", "json", target=t.pid)
        assert r.rc == 0, r
        if r.json()["samples"] >= want:
            break
    r = probing("perf", "--stop", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    return r.json()


# Every export of one test reads the same samples: the profiler is stopped,
# and the window reaches back past the test's start however long a busy
# machine makes it take (a 120 s window slid by, and the shares compared
# between two exports moved by a few points).
WINDOW = "3600s"


def test_known_shares_idle_threads_and_formats(spawn, python, tmp_path):
    t = start(spawn, python, SPLIT)
    folded = tmp_path / "profile.folded"
    # 70/30 of the working thread's CPU time, within 5 points: the CPU
    # time under each of work()'s two calls (the phase, loop included),
    # each sample weighing what its thread used since the one before.
    lines = SPLIT.splitlines()
    line_a = 1 + next(i for i, l in enumerate(lines) if "spin(hot_a" in l)
    line_b = 1 + next(i for i, l in enumerate(lines) if "spin(hot_b" in l)
    # Two threads: 1600 samples are about 800 of the worker.  Until the
    # work had a second of CPU in the profile (more rounds under load).
    for _ in range(4):
        record_samples(t, 1600)
        r = probing("flamegraph", "--recorded", "-d", WINDOW, "--lines", "--cpu",
                    "-o", folded, target=t.pid)
        assert r.rc == 0, r
        assert "wrote" in r.err
        stacks = formats.parse_folded(folded.read_text())
        phase = {}
        for frames, n in stacks:
            for f in frames:
                if f.startswith("work ("):
                    ln = int(f.rsplit(":", 1)[1].rstrip(")"))
                    phase[ln] = phase.get(ln, 0) + n
        if phase.get(line_a, 0) + phase.get(line_b, 0) >= 1000000:
            break
    a, b = phase.get(line_a, 0), phase.get(line_b, 0)
    assert a + b >= 1000000, phase      # a second of CPU, in microseconds
    share = a / (a + b)
    assert abs(share - 0.70) <= 0.05, (share, phase)
    leaves = leaf_counts(stacks)
    assert leaves.get("hot_a", 0) > leaves.get("hot_b", 0) > 0, leaves
    # Counted in samples (wall-clock time on CPU) it is 70/30 as well when
    # the machine is not too busy; here only roughly.
    r = probing("flamegraph", "--recorded", "-d", WINDOW, "--lines", "-o",
                tmp_path / "samples.folded", target=t.pid)
    assert r.rc == 0, r
    counts = {}
    under = {"hot_a": 0, "hot_b": 0}  # samples with the function on the stack
    for frames, n in formats.parse_folded((tmp_path / "samples.folded").read_text()):
        for f in frames:
            if f.startswith("work ("):
                ln = int(f.rsplit(":", 1)[1].rstrip(")"))
                counts[ln] = counts.get(ln, 0) + n
        for name in under:
            if any(f.startswith(name + " (") for f in frames):
                under[name] += n
    ca, cb = counts.get(line_a, 0), counts.get(line_b, 0)
    assert ca + cb >= 500 and 0.55 <= ca / (ca + cb) <= 0.85, counts
    # Every stack of the work goes through it.
    assert all(any(f.startswith("work (") for f in fr) for fr, _ in stacks
               if fr[-1].split(" (")[0] in ("hot_a", "hot_b"))

    # The sleeper is idle, the worker runs.
    rows = sql(t, "SELECT th.name AS name, s.state AS state, count(*) AS n "
                  "FROM profile.samples s JOIN profile.threads th USING (thread_id) "
                  "GROUP BY 1, 2")
    by = {}
    for row in rows:
        by.setdefault(row["name"], {})[row["state"]] = row["n"]
    assert "sleeper" in by and "MainThread" in by, by
    sl = by["sleeper"]
    # Asleep, or waking up and waiting for the GIL the worker holds.
    assert sl.get("idle", 0) >= 0.8 * sum(sl.values()), by
    assert sl.get("running", 0) <= 0.1 * sum(sl.values()), by
    mt = by["MainThread"]
    assert mt.get("running", 0) >= 0.90 * sum(mt.values()), by

    # The same samples in the other formats, each read by its own reader.
    n = ca + cb
    for name in ("p.svg", "p.speedscope.json", "p.json", "p2.folded"):
        out = tmp_path / name
        r = probing("flamegraph", "--recorded", "-d", WINDOW, "--idle", "-o", out,
                    target=t.pid)
        assert r.rc == 0, r
        text = out.read_text()
        if name.endswith(".svg"):
            root = formats.check_svg(text)
            total = int(root.attrib["data-total"])
            assert total >= n
            assert "hot_a" in text and "(idle)" in text
            got = formats.svg_script(str(out), "^hot_a ")
            if got is not None:
                z, sr, rs = got["zoom"], got["search"], got["reset"]
                assert z["width"] == 1180 and z["ancestorsGrey"] and z["outsideHidden"], got
                assert sr["highlighted"] == sr["expected"] >= 1, got
                share = float(sr["matched"].split()[1].rstrip("%"))
                assert 0 < share < 100, got
                assert rs["unhighlighted"] and rs["allShown"], got
        elif name.endswith(".speedscope.json"):
            doc = json.loads(text)
            names = {p["name"].split(" (")[0] for p in doc["profiles"]}
            assert {"MainThread", "sleeper"} <= names, names
            got = formats.speedscope(str(out))
            if got is not None:
                assert got["importer"] == "Importing as speedscope json file", got
                main = [p for p in got["profiles"] if p["name"].startswith("MainThread")][0]
                fa = main["frames"]["hot_a"]["total"]
                fb = main["frames"]["hot_b"]["total"]
                # What speedscope read is what the samples say: the same
                # samples (the profiler is stopped), under the same
                # functions.  (Not the phases' shares: a sample of spin()
                # between two calls counts for its phase, not for hot_a
                # or hot_b, and that part varies from run to run.)
                ua, ub = under["hot_a"], under["hot_b"]
                assert ua and ub, under
                assert abs(fa / (fa + fb) - ua / (ua + ub)) <= 0.01, (
                    main["frames"], under)
        elif name.endswith(".json"):
            by_tid = formats.check_chrome(json.loads(text))
            assert len(by_tid) >= 2
            got = formats.speedscope(str(out))
            if got is not None:
                assert "Trace Event" in got["importer"] or "Chrome" in got["importer"], got
        else:
            idle = formats.parse_folded(text)
            assert sum(c for _, c in idle) >= n
            assert any(fr[-1] == "(idle)" and fr[0].startswith(qualified(python, "Thread._bootstrap"))
                       for fr, _ in idle), idle[:5]
            got = formats.speedscope(str(out))
            if got is not None:
                assert got["importer"] == "Importing as collapsed stack format", got
                assert got["profiles"][0]["weight"] == sum(c for _, c in idle)


def test_gil_waits_are_visible(spawn, python, tmp_path):
    t = start(spawn, python, CONTENTION)
    # Seven threads: 2400 samples are about 340 of each.
    record_samples(t, 2400)
    r = probing("flamegraph", "--recorded", "-d", WINDOW, "--idle", "-o",
                tmp_path / "c.folded", target=t.pid)
    assert r.rc == 0, r
    rows = sql(t, "SELECT th.name AS name, s.state AS state, s.gil AS gil, count(*) AS n "
                  "FROM profile.samples s JOIN profile.threads th USING (thread_id) "
                  "WHERE th.name LIKE 'burner-%' GROUP BY 1, 2, 3")
    by = {}
    for row in rows:
        d = by.setdefault(row["name"], {"running": 0, "gil_wait": 0, "idle": 0, "gil": 0})
        d[row["state"]] += row["n"]
        if row["state"] == "running":
            d["gil"] += row["n"] * row["gil"]
    assert set(by) == {"burner-1", "burner-2"}, rows
    for name, d in by.items():
        total = d["running"] + d["gil_wait"] + d["idle"]
        # Two CPU-bound threads take turns holding the GIL: both run,
        # both wait for it.
        assert d["running"] >= 0.2 * total, (name, d)
        assert d["gil_wait"] >= 0.1 * total, (name, d)
        # Each holds the GIL a good share of the time (a thread woken to
        # take it runs a moment before it has it: not all running samples
        # hold it).
        assert d["gil"] >= 0.3 * total, (name, d)
    # Blocked threads are idle, whatever they wait on.
    rows = sql(t, "SELECT th.name AS name, s.state AS state, count(*) AS n "
                  "FROM profile.samples s JOIN profile.threads th USING (thread_id) "
                  "WHERE th.name LIKE 'on-%' GROUP BY 1, 2")
    by = {}
    for row in rows:
        by.setdefault(row["name"], {"running": 0, "gil_wait": 0, "idle": 0})[row["state"]] += row["n"]
    assert set(by) == {"on-lock", "on-queue", "on-socket", "on-select"}, rows
    for name, d in by.items():
        total = sum(d.values())
        assert total >= 50 and d["idle"] >= 0.95 * total and d["gil_wait"] == 0, (name, d)
    # One holder at a time.
    rows = sql(t, "SELECT max(n) AS most FROM (SELECT ts, sum(gil) AS n "
                  "FROM profile.samples GROUP BY ts)")
    assert rows[0]["most"] == 1, rows
    text = (tmp_path / "c.folded").read_text()
    assert "(waiting for the GIL)" in text


NATIVE_TORCH = """\
import torch
torch.set_num_threads(1)
a = torch.randn(192, 192)
b = torch.randn(192, 192)

def matmul_loop():
    for _ in range(20):
        a @ b

print("READY", flush=True)
while True:
    matmul_loop()
"""

NATIVE_PLAIN = """\
import zlib
data = bytes(range(256)) * 4096

def squeeze():
    for _ in range(5):
        zlib.compress(data, 6)

print("READY", flush=True)
while True:
    squeeze()
"""


def has_torch(python):
    import subprocess
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def test_native_stacks_merge_python_frames(spawn, python, tmp_path):
    torch = has_torch(python)
    t = start(spawn, python, NATIVE_TORCH if torch else NATIVE_PLAIN)
    r = probing("perf", "--cc", "--hz", "200", target=t.pid)
    assert r.rc == 0, r
    assert "Python and native" in r.out
    time.sleep(3)
    out = tmp_path / "n.folded"
    r = probing("flamegraph", "--recorded", "-d", "60s", "-o", out, target=t.pid)
    assert r.rc == 0, r
    r = probing("perf", "--stop", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    st = r.json()
    assert st["running"] is False and st["nativeSamples"] > 0, st
    stacks = formats.parse_folded(out.read_text())
    py_fn = "matmul_loop" if torch else "squeeze"
    # The interpreter's own binary ("(python3.11)", "(python3.13)") where
    # libpython is linked in.
    exe = "(%s)" % os.path.basename(os.path.realpath(python))

    def merged(frames):
        # The interpreter's C frames, the Python function, then the C code
        # it calls: one stack.
        names = [f.split(" (")[0] for f in frames]
        if py_fn not in names:
            return False
        i = names.index(py_fn)
        below = any(f.endswith(exe) or "libpython" in f for f in frames[:i])
        above = frames[i + 1:]
        if torch:
            return below and any(f.startswith("at::") for f in above) and \
                any("sgemm" in f or "gemm" in f for f in above)
        return below and any("libz" in f or "deflate" in f or f.startswith("compress")
                             for f in above)

    hits = sum(n for fr, n in stacks if merged(fr))
    total = sum(n for _, n in stacks)
    assert hits >= 0.3 * total, [";".join(fr) for fr, _ in stacks[:3]]
    # The eval loop's own frame is replaced by the Python frames it runs.
    assert not any("_PyEval_EvalFrameDefault" in f for fr, _ in stacks for f in fr)
    r = probing("query", "-f", "json",
                "SELECT count(*) AS n FROM profile.frames WHERE kind = 'native' "
                "AND addr IS NOT NULL", target=t.pid)
    assert r.rc == 0 and r.json()[0]["n"] > 0, r


SOAK = """\
import hashlib, os, signal, sys, threading, time, zlib

got = [0]
def on_prof(sig, frame):
    got[0] += 1
    # One write per line: a handler may run between print()'s pieces.
    os.write(1, b"SIGPROF %d\\n" % got[0])
signal.signal(signal.SIGPROF, on_prof)

def py_loop():
    while True:
        sum(i * i for i in range(1000))

def c_calls():
    data = os.urandom(1 << 16)
    while True:
        hashlib.sha256(data).digest()
        zlib.compress(data, 1)
        sorted(range(2000), key=lambda x: -x)

def sleeper():
    while True:
        time.sleep(0.003)

def churn():
    while True:
        t = threading.Thread(target=lambda: sum(range(5000)))
        t.start()
        t.join()

for fn in (py_loop, py_loop, c_calls, c_calls, sleeper, churn):
    threading.Thread(target=fn, daemon=True).start()
os.write(1, b"READY\\n")
while True:
    time.sleep(0.01)
"""


def test_soak_native_sampling_with_foreign_signals(spawn, python):
    """1 kHz native sampling of busy, sleeping and short-lived threads while
    the target has its own SIGPROF handler and receives SIGPROF from
    outside: the target survives, and its handler gets exactly the
    signals that were not the profiler's."""
    t = start(spawn, python, SOAK)
    r = probing("perf", "--cc", "--hz", "1000", target=t.pid)
    assert r.rc == 0, r
    sent = 0
    deadline = time.time() + 4
    while time.time() < deadline:
        os.kill(t.pid, signal.SIGPROF)
        sent += 1
        # One at a time: the next once this one was handled (signals of
        # one kind pending together would merge into one).
        t.wait_line("SIGPROF %d\n" % sent, timeout=30)
    r = probing("perf", "--stop", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    st = r.json()
    assert st["nativeSamples"] > 500, st
    time.sleep(0.3)
    assert t.alive(), t.output()[-2000:]
    out = t.output()
    lines = [l for l in out.splitlines() if l.startswith("SIGPROF")]
    # The profiler's own signals (thousands) never reach the handler.
    assert len(lines) == sent and sent >= 10, (sent, lines[-3:], out[:300])
    # Still serving, and still sampling without native stacks.
    r = probing("flamegraph", "-d", "1s", "-o", "/dev/null", "--as", "folded", target=t.pid)
    assert r.rc == 0, r


def test_tables_retention_and_status(spawn, python):
    t = start(spawn, python, SPLIT)
    names = {(r["schema"], r["name"]) for r in
             sql(t, "SELECT schema, name FROM probing.tables WHERE schema = 'profile'")}
    assert {("profile", "samples"), ("profile", "stacks"), ("profile", "frames"),
            ("profile", "threads")} <= names
    r = probing("perf", "-f", "json", target=t.pid)
    assert r.rc == 0 and r.json()["running"] is False and r.json()["startedAt"] is None, r
    r = probing("config", "profile.retention_rows=1000", target=t.pid)
    assert r.rc == 0, r
    r = probing("perf", "--start", "--hz", "1000", "--duration", "4s", target=t.pid)
    assert r.rc == 0, r
    # It stops by itself; 8000 samples if every tick came in time, a few
    # thousand on a busy machine: past the bound of 1000 either way.
    deadline = time.time() + 60
    while True:
        time.sleep(0.5)
        r = probing("perf", "-f", "json", target=t.pid)
        st = r.json()
        if not st["running"] or time.time() > deadline:
            break
    assert st["running"] is False and st["samples"] > 1200, st
    assert st["sampleUs"] > 0
    n = sql(t, "SELECT count(*) AS n FROM profile.samples")[0]["n"]
    assert 500 <= n <= 1000, n
    assert st["deleted"] > 0, st
    # Stacks rebuild with SQL: every sample's stack walks up to the root.
    rows = sql(t, "WITH RECURSIVE up(id, depth) AS ("
                  " SELECT stack_id, 0 FROM profile.samples WHERE rowid = "
                  "  (SELECT max(rowid) FROM profile.samples)"
                  " UNION ALL SELECT s.parent_id, depth + 1 FROM profile.stacks s"
                  "  JOIN up ON s.stack_id = up.id WHERE s.parent_id != 0) "
                  "SELECT f.func AS func FROM up JOIN profile.stacks s ON s.stack_id = up.id "
                  "JOIN profile.frames f USING (frame_id) ORDER BY depth")
    funcs = [r["func"] for r in rows]
    assert funcs[-1] == "<module>" and "work" in funcs, funcs


def test_cli_errors(spawn, python, tmp_path):
    t = start(spawn, python, SPLIT)
    r = probing("flamegraph", "-o", tmp_path / "x.png", target=t.pid)
    assert r.rc == 2 and ".svg" in r.err, r
    r = probing("flamegraph", "--hz", "0", target=t.pid)
    assert r.rc == 2, r
    r = probing("flamegraph", "-d", "ten", target=t.pid)
    assert r.rc == 2, r
    r = probing("perf", "--stop", target=t.pid)
    assert r.rc == 0 and "never started" in r.out, r
    r = probing("perf", "--start", "--hz", "50", target=t.pid)
    assert r.rc == 0, r
    r = probing("perf", "--cc", target=t.pid)
    assert r.rc == 1 and "already running" in r.err, r
    r = probing("perf", "--stop", target=t.pid)
    assert r.rc == 0 and "stopped" in r.out, r


def python_frame(f):
    """A Python frame of a --lines folded stack: "func (file:line)"."""
    return f.endswith(")") and f.rsplit(" (", 1)[-1].rstrip(")").rsplit(":", 1)[-1].isdigit()


def native_split(t, tmp_path, line_a, line_b):
    """The recorded profile's CPU time per line of work() (microseconds),
    and the CPU of samples with native frames and of all, for the samples
    in hot_a/hot_b; checks each such stack is whole and in order."""
    folded = tmp_path / "n.folded"
    r = probing("flamegraph", "--recorded", "-d", "120s", "--lines", "--cpu", "-o",
                folded, target=t.pid)
    assert r.rc == 0, r
    stacks = formats.parse_folded(folded.read_text())
    phase, native, total = {}, 0, 0
    for frames, n in stacks:
        py = [f.split(" (")[0] for f in frames if python_frame(f)]
        if py[-1:] not in (["hot_a"], ["hot_b"]) and py[-2:-1] not in (["hot_a"], ["hot_b"]):
            continue
        # The whole Python stack, root to leaf, nothing doubled or lost
        # where the leaf was joined (a sample may end in spin's own line).
        assert py[:3] == ["<module>", "work", "spin"] and len(py) <= 4, frames
        assert not any("_PyEval_EvalFrameDefault" in f for f in frames), frames
        total += n
        if not python_frame(frames[0]):
            native += n
            # The interpreter's C frames lead to <module>.
            assert any("Py_RunMain" in f or "PyEval_EvalCode" in f for f in frames), frames
        for f in frames:
            if f.startswith("work ("):
                ln = int(f.rsplit(":", 1)[1].rstrip(")"))
                phase[ln] = phase.get(ln, 0) + n
    return phase, native, total


def test_native_stacks_keep_shares_and_whole_python_stacks(spawn, python, tmp_path):
    """Native sampling of a pure-Python workload: each sample's Python part
    is the whole Python stack of the instant its thread was unwound (the
    handler's innermost frames joined to the sampler's walk), in order,
    under the native frames that run it; the 70/30 split of CPU time holds
    as it does without native stacks; and the sampler took every running
    thread's capture from the ring without waiting for each."""
    t = start(spawn, python, SPLIT)
    lines = SPLIT.splitlines()
    line_a = 1 + next(i for i, l in enumerate(lines) if "spin(hot_a" in l)
    line_b = 1 + next(i for i, l in enumerate(lines) if "spin(hot_b" in l)
    # Three windows of at least a second of the work's CPU each (on a
    # loaded machine a window takes more samples), the median of their
    # splits.  Each sample gives its thread's CPU since the one before to
    # the phase it is in then: unbiased, but a sampler held up for longer
    # than a phase (30 ms) gives all its thread's CPU meanwhile to one
    # phase, most often the long one: one window of a loaded machine came
    # to 0.7505, the others of the same run to 0.70 and 0.71.
    splits, base, native, total = [], {}, 0, 0
    for _ in range(16):
        st = record_samples(t, 600, native=True)
        # Most samples that wanted native frames got them (a capture comes
        # late when its thread waits for a CPU: its sample waits with it).
        assert st["nativeSamples"] >= 120, st
        assert st["nativeSamples"] >= 2 * st["nativeFailed"], st
        assert st["nativeCaptured"] <= st["nativeRequested"] and st["nativeDropped"] == 0, st
        # The recorded profile holds every window so far: this one is
        # what it gained since the last ended.
        phase, native, total = native_split(t, tmp_path, line_a, line_b)
        a = phase.get(line_a, 0) - base.get(line_a, 0)
        b = phase.get(line_b, 0) - base.get(line_b, 0)
        if a + b >= 1000000:               # a second of CPU, in µs
            splits.append(a / (a + b))
            base = phase
        if len(splits) == 3:
            break
    assert len(splits) == 3, (splits, phase)
    assert native >= 0.5 * total, (native, total)
    median = sorted(splits)[1]
    assert abs(median - 0.70) <= 0.05, splits


IDLE_NATIVE = """\
import queue, threading, time

def sleeper():
    # time.sleep is retried on EINTR with the time left (PEP 475): a
    # signal must never make it return early.
    while True:
        t0 = time.monotonic()
        time.sleep(0.02)
        if time.monotonic() - t0 < 0.0199:
            print("SHORT SLEEP", flush=True)

q = queue.Queue()

def work():
    x = 0
    while True:
        for i in range(1000):
            x += i

threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
threading.Thread(target=q.get, name="waiter", daemon=True).start()
print("READY", flush=True)
work()
"""


def root_kinds(t, since):
    """Per thread name and state: how many samples since `since` have a
    native root frame (their stack goes down into C) and how many a
    Python one."""
    rows = sql(t, "WITH RECURSIVE up(sid, id) AS (SELECT DISTINCT stack_id, stack_id "
                  "FROM profile.samples WHERE ts >= %r UNION ALL SELECT up.sid, k.parent_id "
                  "FROM up JOIN profile.stacks k ON k.stack_id = up.id WHERE k.parent_id != 0) "
                  "SELECT up.sid AS sid, f.kind AS kind, f.func AS func FROM up "
                  "JOIN profile.stacks k ON k.stack_id = up.id JOIN profile.frames f "
                  "USING (frame_id) WHERE k.parent_id = 0" % since)
    root = {r["sid"]: r["kind"] for r in rows}
    rows = sql(t, "SELECT th.name AS name, s.state AS state, s.stack_id AS sid, "
                  "count(*) AS n FROM profile.samples s JOIN profile.threads th "
                  "USING (thread_id) WHERE s.ts >= %r GROUP BY 1, 2, 3" % since)
    by = {}
    for r in rows:
        d = by.setdefault((r["name"], r["state"]), {"native": 0, "python": 0})
        d[root[r["sid"]]] += r["n"]
    return by


def leaf_funcs(t, since, name):
    """The innermost frame of each sample of thread `name` since `since`:
    {(kind, func): count}."""
    rows = sql(t, "SELECT f.kind AS kind, f.func AS func, count(*) AS n "
                  "FROM profile.samples s JOIN profile.threads th USING (thread_id) "
                  "JOIN profile.stacks k ON k.stack_id = s.stack_id "
                  "JOIN profile.frames f ON f.frame_id = k.frame_id "
                  "WHERE s.ts >= %r AND th.name = '%s' GROUP BY 1, 2" % (since, name))
    return {(r["kind"], r["func"]): r["n"] for r in rows}


def test_native_idle_threads(spawn, python):
    """Idle threads get Python-only samples; with profile.native_idle on
    their innermost frame is the system call they wait in, read from /proc:
    they are never signalled (issue 27 item 7: a signal cut poll() and
    sleeps short), so time.sleep never returns early and a queue's get
    keeps waiting."""
    t = start(spawn, python, IDLE_NATIVE)
    st = record_samples(t, 600, native=True)
    by = root_kinds(t, st["startedAt"])
    for name in ("sleeper", "waiter"):
        d = by.get((name, "idle"))
        assert d and d["python"] >= 50 and d["native"] == 0, by
    assert by[("MainThread", "running")]["native"] > 0, by

    r = probing("config", "profile.native_idle=on", target=t.pid)
    assert r.rc == 0, r
    st = record_samples(t, 600, native=True)
    by = root_kinds(t, st["startedAt"])
    for name in ("sleeper", "waiter"):
        d = by.get((name, "idle"))
        assert d and d["python"] >= 50 and d["native"] == 0, by
        leaves = leaf_funcs(t, st["startedAt"], name)
        calls = sum(n for (kind, func), n in leaves.items()
                    if kind == "native" and func.startswith("[system call"))
        assert calls >= 20, leaves
    assert "SHORT SLEEP" not in t.output()
    assert t.alive()
    # The waiter is still waiting: its get() was not interrupted.
    rows = sql(t, "SELECT name FROM python.threads WHERE name = 'waiter'")
    assert rows, rows


SLEEP_LOOP = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def test_native_flamegraph_counts_sleep_as_idle(spawn, python, tmp_path):
    """`flamegraph --native` of a loop that sleeps: its samples are idle
    ones, as without --native (issue 30: 100% of its "samples on CPU"
    were in clock_nanosleep).  Only --idle shows the sleep."""
    t = start(spawn, python, SLEEP_LOOP)
    counts = {}
    for idle in (False, True):
        out = tmp_path / ("s%d.folded" % idle)
        r = probing("flamegraph", "--native", "-d", "2s", "-o", out,
                    *(["--idle"] if idle else []), target=t.pid)
        assert r.rc == 0, r
        stacks = formats.parse_folded(out.read_text())
        counts[idle] = sum(n for _, n in stacks)
        if not idle:
            on_cpu = r.err
            # Samples whose leaf is the sleep's system call.
            sleeping = sum(n for fr, n in stacks
                           if "nanosleep" in fr[-1] or "select" in fr[-1])
    # 2 s at 100 Hz: nearly all of them asleep.
    assert counts[True] >= 100, counts
    assert counts[False] <= 0.2 * counts[True], (counts, on_cpu)
    assert sleeping <= 0.1 * counts[True], (sleeping, counts)
