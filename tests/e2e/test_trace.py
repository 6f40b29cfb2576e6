"""probing trace (issue 31): a timeline of what the agent records, as one
Chrome Trace Event file, checked against the format (tests/profile's
schema and nesting checks, async pairs) and for what it shows: the torch
stages of examples/train.py in a span per step on the thread that ran
them, samples as instant events on their threads' tracks, memory as a
counter; torch tracing and the sampler put back as they were; a
recording's whole run; `cluster trace` of a 2-rank torchrun job, a
process per rank with its collectives (group, seq, bytes)."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import CLI, ROOT, SANITIZED_TARGETS, SYSTEM_PYTHON, probing, \
    wait_for
import test_cluster as tc

sys.path.insert(0, os.path.join(ROOT, "tests", "profile"))
import formats  # noqa: E402

needs_torch = tc.needs_torch


def events(doc, ph, cat=None):
    return [e for e in doc["traceEvents"]
            if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


def thread_names(doc):
    return {(e["pid"], e["tid"]): e["args"]["name"]
            for e in events(doc, "M") if e["name"] == "thread_name"}


def inside(outer, inner):
    return outer["pid"] == inner["pid"] and outer["tid"] == inner["tid"] and \
        outer["ts"] <= inner["ts"] + 1e-3 and \
        inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3


def read(path):
    doc = json.loads(path.read_text())
    formats.check_chrome(doc)
    return doc


def settings(pid):
    r = probing("config", "-f", "json", target=pid)
    assert r.rc == 0, r
    return {s["name"]: s["value"] for s in r.json()}


# Two threads of plain Python: the main one computing, one named worker
# sleeping in a loop.
THREADS = """\
import threading, time
def worker():
    while True:
        time.sleep(0.01)
def compute():
    x = 0
    for i in range(20000):
        x += i * i
    return x
threading.Thread(target=worker, name="sleeper", daemon=True).start()
print("READY", flush=True)
while True:
    compute()
"""


def test_samples_and_memory_of_plain_python(spawn, python, tmp_path):
    t = spawn(python, THREADS, env={"PROBING_MEMORY_INTERVAL_MS": "200"})
    t.wait_line("READY")
    t.wait_agent()
    out = tmp_path / "run.json"
    r = probing("trace", "-d", "2s", "-o", out, target=t.pid)
    assert r.rc == 0, r
    assert "wrote %s (" % out in r.err and "samples" in r.err, r
    doc = read(out)
    assert doc["otherData"]["startTime"] > 0
    names = thread_names(doc)
    assert names[(t.pid, t.pid)].startswith("MainThread"), names
    sleeper = [k for k, v in names.items() if v.startswith("sleeper")]
    assert len(sleeper) == 1, names
    samples = events(doc, "i", "sample")
    main = [s for s in samples if s["tid"] == t.pid]
    # 2 s at 100 Hz, a loaded machine skipping some.
    assert len(main) >= 50, len(main)
    assert sum(1 for s in main if s["name"].startswith("compute ")) >= \
        len(main) // 2, main[:5]
    assert all(s["s"] == "t" and s["args"]["state"] in
               ("running", "idle", "gil_wait") for s in samples)
    # The stack where it changed: a sample without one has its
    # predecessor's (the sleeper's are mostly alike).
    assert main[0]["args"]["stack"].split(";")[-1] == main[0]["name"]
    assert all(s["args"]["stack"].split(";")[-1] == s["name"]
               for s in main if "stack" in s["args"])
    stacks = [s for s in samples if s["tid"] == sleeper[0][1]]
    assert 0 < sum("stack" in s["args"] for s in stacks) < len(stacks), stacks[:3]
    # The sleeper's samples (idle ones included) on its own track.
    assert any(s["tid"] == sleeper[0][1] for s in samples)
    mem = events(doc, "C")
    assert len(mem) >= 5 and all(m["args"]["rss"] > 0 for m in mem), mem
    # No torch here, so no spans; the profile trace started is stopped.
    assert not events(doc, "X")
    r = probing("perf", "-f", "json", target=t.pid)
    assert r.rc == 0 and not r.json()["running"], r


def test_a_past_window_switches_nothing_on(spawn, python, tmp_path):
    """--recorded: the last DURATION of what the agent holds, the
    sampler and tracing left as they are."""
    t = spawn(python, THREADS, env={"PROBING_MEMORY_INTERVAL_MS": "200"})
    t.wait_line("READY")
    t.wait_agent()
    assert probing("perf", "--start", target=t.pid).rc == 0
    time.sleep(2)
    assert probing("perf", "--stop", target=t.pid).rc == 0
    out = tmp_path / "past.json"
    r = probing("trace", "--recorded", "-d", "5s", "-o", out, target=t.pid)
    assert r.rc == 0, r
    doc = read(out)
    assert len([s for s in events(doc, "i", "sample") if s["tid"] == t.pid]) >= 50
    assert len(events(doc, "C")) >= 5
    assert settings(t.pid)["torch.profiling"] == "off"
    r = probing("perf", "-f", "json", target=t.pid)
    assert r.rc == 0 and not r.json()["running"], r


def test_usage():
    r = probing("trace", "--step-rate", "x", "-o", "/dev/null", target=1)
    assert r.rc == 2 and "--step-rate must be auto or a positive number" in r.err, r
    r = probing("trace", "-d", "soon", "-o", "/dev/null", target=1)
    assert r.rc == 2 and "soon" in r.err, r
    r = probing("trace", "--help")
    assert r.rc == 0 and "Chrome trace" in r.out and "--step-rate" in r.out, r


@needs_torch
def test_torch_steps_on_the_thread_that_ran_them(spawn, tmp_path):
    t = spawn(SYSTEM_PYTHON, open(os.path.join(ROOT, "examples", "train.py")).read(),
              env={"OMP_NUM_THREADS": "1"})
    t.wait_agent()
    # Training, not still importing torch (2.5 s of torch 2.14 in sid,
    # much of it in dlopen with the GIL held: no step, no memory row).
    t.wait_line("step ", timeout=120)
    before = settings(t.pid)
    assert before["torch.profiling"] == "off"
    out = tmp_path / "train.json"
    r = probing("trace", "-d", "3s", "-o", out, target=t.pid, timeout=120)
    assert r.rc == 0, r
    doc = read(out)
    spans = events(doc, "X")
    steps = [s for s in spans if s["cat"] == "step"]
    torch = [s for s in spans if s["cat"] == "torch"]
    assert steps and torch, r.err
    # Every stage of a traced step inside that step's span, on the same
    # track (CPU: the backward runs on the main thread too).
    by_step = {s["args"]["step"]: s for s in steps}
    for s in torch:
        assert s["tid"] == t.pid, s
        assert inside(by_step[s["args"]["step"]], s), (s, by_step[s["args"]["step"]])
    stages = {(s["args"]["module"], s["args"]["stage"]) for s in torch}
    assert {("MLP", "forward"), ("MLP", "backward"), ("encoder", "forward"),
            ("SGD", "step")} <= stages, stages
    # The model's children inside its forward (in each step whose forward
    # began within the window: the first step's may have begun before it).
    whole = {s["args"]["step"] for s in torch
             if s["args"]["module"] == "MLP" and s["args"]["stage"] == "forward"}
    assert whole, stages
    for one in whole:
        fwd = [s for s in torch if s["args"]["step"] == one and s["args"]["stage"] == "forward"]
        mlp = [s for s in fwd if s["args"]["module"] == "MLP"][0]
        assert all(inside(mlp, s) for s in fwd), fwd
    assert any(s["name"].startswith("train_step ") for s in events(doc, "i", "sample"))
    # The viewer that was chrome://tracing takes it whole: no event
    # dropped, the process, its thread and the counter shown.
    seen = formats.trace_view(str(out))
    if seen is not None:
        assert not seen["warnings"], seen["warnings"]
        (proc,) = seen["processes"]
        assert proc["label"] == "%s (pid %d)" % (os.path.basename(t.script), t.pid), proc
        main = [th for th in proc["threads"] if th["tid"] == t.pid][0]
        assert main["name"].startswith("MainThread") and \
            main["slices"] >= len(torch) + len(steps), (main, len(torch))
        assert "memory (MB) [rss]" in proc["counters"], proc
        assert any("MainThread (thread %d)" % t.pid in x for x in seen["shown"]), seen["shown"]
    # Tracing and the sampler are as they were.
    after = settings(t.pid)
    assert after["torch.profiling"] == "off" and \
        after["torch.step_rate"] == before["torch.step_rate"], after
    r = probing("perf", "-f", "json", target=t.pid)
    assert r.rc == 0 and not r.json()["running"], r


def test_a_recording_whole_run(spawn, python, tmp_path):
    data = tmp_path / "data"
    code = """
import time
def spin(seconds):
    t0 = time.time()
    while time.time() - t0 < seconds:
        sum(range(2000))
spin(2.0)
"""
    env = {"PROBING_DATA_DIR": str(data), "PROBING_DATA_FLUSH_MS": "200",
           "PROBING_MEMORY_INTERVAL_MS": "100"}
    t = spawn(python, code, env=env)
    t.wait_agent()
    assert probing("perf", "--start", target=t.pid).rc == 0
    assert t.proc.wait(timeout=60) == 0
    out = tmp_path / "run.json"
    r = probing("trace", "-o", out, target=t.pid, env={"PROBING_DATA_DIR": str(data)})
    assert r.rc == 0, r
    assert "reading its recording" in r.err, r
    doc = read(out)
    spin = [s for s in events(doc, "i", "sample") if s["name"].startswith("spin ")]
    assert len(spin) >= 50, len(spin)
    assert len(events(doc, "C")) >= 10
    # Its last second only.
    r = probing("trace", "-d", "1s", "-o", out, target=t.pid,
                env={"PROBING_DATA_DIR": str(data)})
    assert r.rc == 0, r
    last = read(out)
    assert 0 < len(events(last, "i", "sample")) < len(events(doc, "i", "sample"))


@needs_torch
def test_cluster_trace_of_a_torchrun_job(tmp_path):
    job = tc.Job(str(tmp_path), "--step-sleep", "0.02", nproc=2)
    try:
        job.wait_ranks()
        out = tmp_path / "job.json"
        r = probing("cluster", "trace", "3s", "-o", out, target=job.pids[0],
                    timeout=180)
        assert r.rc == 0, r
        assert "2 of 2 ranks' traces" in r.err, r
        doc = read(out)
        procs = {e["pid"]: e["args"]["name"] for e in events(doc, "M")
                 if e["name"] == "process_name"}
        assert sorted(procs.values()) == ["rank 0 on %s" % tc.HOST,
                                          "rank 1 on %s" % tc.HOST], procs
        # Each rank's DDP gradient all-reduces: asynchronous, with their
        # group, sequence number and bytes.
        for pid, name in procs.items():
            comm = [e for e in events(doc, "b", "collective") if e["pid"] == pid]
            assert comm, (name, r.err)
            a = comm[0]["args"]
            assert comm[0]["name"] == "all_reduce" and a["pg"] == "0" and \
                a["seq"] >= 1 and a["bytes"] > 0, comm[0]
            steps = [e for e in events(doc, "X", "step") if e["pid"] == pid]
            assert steps, name
            # On the calling thread's own track (its kernel id, named).
            named = thread_names(doc)
            assert all((e["pid"], e["tid"]) in named for e in comm), \
                (comm[0], named)
        # One clock: the ranks' steps overlap in time (they wait for each
        # other every step).
        spans = {pid: [(e["ts"], e["ts"] + e["dur"]) for e in events(doc, "X", "step")
                       if e["pid"] == pid] for pid in procs}
        a, b = list(spans.values())
        assert max(x for x, _ in a) > min(x for x, _ in b) and \
            max(x for x, _ in b) > min(x for x, _ in a), spans
        seen = formats.trace_view(str(out))
        if seen is not None:
            assert not seen["warnings"], seen["warnings"]
            labels = sorted(p["label"].split(" on ")[0] for p in seen["processes"])
            assert labels == ["rank 0", "rank 1"], seen["processes"]
            # The all-reduces as async slices on each rank.
            assert all("all_reduce" in p["async"] for p in seen["processes"]), \
                seen["processes"]
        # Every rank's tracing put back.
        for pid in job.pids.values():
            assert settings(pid)["torch.profiling"] == "off"
    finally:
        job.stop()


@pytest.mark.skipif(SANITIZED_TARGETS, reason="the lease's code runs under "
                    "ASan in test_config's test_for_a_while, in 1 s, not 11")
def test_tracing_comes_back_off_when_trace_is_killed(spawn):
    """torch tracing is leased for the window: a trace killed (SIGKILL:
    no handler runs) leaves it on only until the lease's end (the window
    and 10 s), when the agent puts it back."""
    t = spawn(SYSTEM_PYTHON, THREADS)
    t.wait_line("READY")
    t.wait_agent()
    cli = subprocess.Popen([CLI, "-t", str(t.pid), "trace", "-d", "1s",
                            "--no-samples", "--step-rate", "1", "-o",
                            os.devnull], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: settings(t.pid)["torch.profiling"] == "on", 30,
                 "tracing on")
        cli.kill()
    finally:
        cli.wait()
    assert settings(t.pid)["torch.step_rate"] == "1"
    wait_for(lambda: settings(t.pid)["torch.profiling"] == "off", 60,
             "tracing put back by the agent")
    assert settings(t.pid)["torch.step_rate"] == "auto"
