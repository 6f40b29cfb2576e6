"""probing memory, process.memory and python.tensors; the leak and hang
examples found the way docs/torch.md shows."""
import json
import os
import subprocess
import time

import pytest

from conftest import ROOT, SYSTEM_PYTHON, probing, wait_for, qualified

HAS_TORCH = subprocess.run([SYSTEM_PYTHON, "-c", "import torch"],
                           capture_output=True).returncode == 0
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="no torch")

LEAKY = """\
import time
class Leaky:
    def __init__(self, i):
        self.payload = "x" * 100 + str(i)
kept = []
print("READY", flush=True)
while True:
    kept.extend(Leaky(i) for i in range(200))
    if len(kept) >= 5000:
        print("FULL", flush=True)
        while True:
            time.sleep(0.05)
    time.sleep(0.01)
"""


def query(t, sql):
    r = probing("query", "-f", "json", sql, target=t.pid)
    assert r.rc == 0, r
    return r.json()


def test_memory_shows_process_and_types(spawn, python):
    t = spawn(python, LEAKY, env={"PROBING_MEMORY_INTERVAL_MS": "100"})
    t.wait_line("READY")
    t.wait_agent()
    t.wait_line("FULL", timeout=30)
    r = probing("memory", "-f", "json", "--top", "1000", target=t.pid)
    assert r.rc == 0, r
    b = r.json()
    assert b["gil"] is True
    p = b["process"]
    assert 0 < p["rss"] <= p["peak"] and p["vms"] >= p["rss"] and p["threads"] >= 2
    py = b["python"]
    assert py["complete"] is True and py["objects"] > 1000
    counts = {e["type"]: e["count"] for e in py["byCount"]}
    assert counts["__main__.Leaky"] == 5000
    # Their payload strings are not tracked by the collector, but counted
    # through the objects that refer to them.
    assert counts["str"] >= 5000
    sizes = {e["type"]: e["bytes"] for e in py["bySize"]}
    assert sizes["str"] >= 5000 * 100
    # Without torch imported there is no torch section.
    assert b["torch"] is None
    # The table form, as a person reads it.
    r = probing("memory", "--top", "3", target=t.pid)
    assert r.rc == 0, r
    for word in ("Process", "rss", "Top types by count", "Top types by size"):
        assert word in r.out, r.out
    r = probing("memory", "-f", "csv", target=t.pid)
    assert r.rc == 2 and "json" in r.err
    r = probing("memory", "--top", "0", target=t.pid)
    assert r.rc == 2
    # process.memory: recorded every 100 ms here.
    wait_for(lambda: query(t, "SELECT count(*) AS n FROM process.memory")[0]["n"] >= 3,
             10, "process.memory rows")
    rows = query(t, "SELECT ts, rss, vms, shared, peak, threads, py_blocks "
                    "FROM process.memory ORDER BY ts")
    assert all(r["rss"] > 0 and r["peak"] >= r["rss"] for r in rows)
    assert rows[-1]["ts"] > rows[0]["ts"] and rows[-1]["py_blocks"] > 0
    r = probing("query", "-f", "json",
                "SELECT kind FROM probing.tables WHERE schema = 'process' "
                "AND name = 'memory'", target=t.pid)
    assert r.json() == [{"kind": "recorded"}]


def test_memory_when_the_gil_does_not_come(spawn, python):
    # A thread holding the GIL in C (a long regex on a huge string is one
    # call): the process figures come back, the Python ones are missing.
    code = ("import re, time, threading\n"
            "print('READY', flush=True)\n"
            "def spin():\n"
            "    re.match(r'(a+)+b', 'a' * 32)\n"
            "threading.Thread(target=spin, daemon=True).start()\n"
            "while True:\n"
            "    time.sleep(0.05)\n")
    t = spawn(python, code, env={"PROBING_PYTHON_GIL_TIMEOUT_MS": "200"})
    t.wait_line("READY")
    t.wait_agent()
    time.sleep(0.3)
    r = probing("memory", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    b = r.json()
    assert b["process"]["rss"] > 0
    assert b["gil"] is False and b["python"] is None
    assert "GIL" in b["message"]
    r = probing("memory", target=t.pid)
    assert r.rc == 0 and "rss" in r.out and "GIL" in r.err, r


@needs_torch
def test_torch_leak_example_found(spawn):
    """examples/leak.py: process.memory grows, the tensors pile up and
    python.tensors says who holds them (docs/torch.md, 'A leak')."""
    code = open(os.path.join(ROOT, "examples", "leak.py")).read()
    # One intra-op thread: torch 2.x's one a core wait for each other
    # where the cores are busy, and the steps slow to a crawl.
    t = spawn(SYSTEM_PYTHON, code, env={"PROBING_MEMORY_INTERVAL_MS": "200",
                                        "OMP_NUM_THREADS": "1"},
              args=("--sleep", "0.01"))
    t.wait_agent(timeout=60)
    t.wait_line("step 100", timeout=60)

    def tensors():
        r = probing("memory", "-f", "json", "--top", "1000", target=t.pid)
        assert r.rc == 0, r
        b = r.json()
        counts = {e["type"]: e["count"] for e in b["python"]["byCount"]}
        return counts.get("torch.Tensor", 0), b["torch"]["tensors"]

    n1, kinds = tensors()
    assert [k["device"] for k in kinds] == ["cpu"]
    # The leaking type, tensors, piles up, and RSS grows (MB), at
    # whatever pace this machine runs the steps.
    wait_for(lambda: tensors()[0] > n1 + 50, 60,
             lambda: "50 more tensors than %d: %d" % (n1, tensors()[0]))

    def rss():
        return [r["rss"] for r in query(t, "SELECT rss FROM process.memory ORDER BY ts")]
    wait_for(lambda: len(rss()) >= 5 and rss()[-1] > rss()[2] + 20, 60,
             lambda: "RSS to grow by 20 MB: %r" % rss())
    held = query(t, "SELECT holder, grad_fn, requires_grad, shape "
                    "FROM python.tensors WHERE holder LIKE 'history[%'")
    assert len(held) > 100
    assert {h["grad_fn"] for h in held} == {"MseLossBackward0"}
    assert all(h["requires_grad"] == 1 and h["shape"] == "[]" for h in held)
    # The model's parameters are named from its variable.
    names = {r["holder"] for r in query(
        t, "SELECT holder FROM python.tensors WHERE holder LIKE 'model.%'")}
    assert {"model.encoder.0.weight", "model.head.bias",
            "model.encoder.0.weight.grad"} <= names, names


def test_hang_example_found(spawn, python):
    """examples/hang.py: the consumer waits in queue.get, the main thread
    in join (docs/torch.md, 'A hang')."""
    code = open(os.path.join(ROOT, "examples", "hang.py")).read()
    t = spawn(python, code)
    t.wait_line("waiting for the workers")
    t.wait_agent()
    time.sleep(0.5)
    rows = query(t, "SELECT thread_name, depth, func FROM python.backtrace "
                    "ORDER BY thread_name, depth")
    stacks = {}
    for r in rows:
        stacks.setdefault(r["thread_name"], []).append(r["func"])
    assert "producer" not in stacks            # it returned
    q = lambda name: qualified(python, name)
    assert stacks["consumer"][:3] == [q("Condition.wait"), q("Queue.get"), "consumer"]
    assert q("Thread.join") in stacks["MainThread"] and "main" in stacks["MainThread"]
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and q("Queue.get") in r.out and q("Thread.join") in r.out, r
