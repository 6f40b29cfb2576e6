"""probing diagnose: each playbook against an example with a known fault
(examples/hang.py, leak.py, slow_data.py, a torchrun job of ddp_train.py
with a rank stuck), and against one without it (examples/train.py)."""
import json
import os
import time

import pytest

from conftest import ROOT, SANITIZED_TARGETS, SYSTEM_PYTHON, probing, \
    wait_for
import test_cluster as tc

needs_torch = tc.needs_torch


def example(name):
    return open(os.path.join(ROOT, "examples", name)).read()


def start(spawn, name, *args, env=None):
    t = spawn(SYSTEM_PYTHON, example(name), args=args, env=env)
    t.wait_agent()
    return t


def diagnose(t, *args, timeout=120):
    r = probing("diagnose", *args, target=t.pid, timeout=timeout)
    assert r.rc == 0, r
    return r


def test_hang_in_one_process(spawn):
    t = start(spawn, "hang.py", env={"PROBING_HANG_TIMEOUT": "1s"})
    wait_for(lambda: probing("query", "SELECT id FROM process.hangs",
                             target=t.pid).out.strip() != "id", 30,
             "the watchdog's hang")
    r = diagnose(t, "hang", "-d", "1s")
    verdict = r.out.splitlines()[0]
    assert verdict.startswith("verdict: the main thread is stuck in main "
                              "(target0.py:"), r
    assert "waiting in Thread._wait_for_tstate_lock (threading.py:" \
        in verdict, r
    assert "thread consumer: sleeping in consumer (target0.py:" in r.out, r
    assert "the hang watchdog has seen it stuck for" in r.out, r
    assert "probing -t %d backtrace --locals" % t.pid in r.out, r
    j = json.loads(probing("diagnose", "hang", "-d", "1s", "-f", "json",
                           target=t.pid).out)
    assert j["playbook"] == "hang" and j["target"] == str(t.pid)
    assert j["verdict"].split(" for ")[0] == \
        verdict[len("verdict: "):].split(" for ")[0], j
    assert any(e.startswith("thread consumer:") for e in j["evidence"]), j


@needs_torch
def test_a_training_loop_is_not_stuck_and_has_no_dataloader(spawn):
    t = start(spawn, "train.py")
    r = diagnose(t, "hang")
    assert r.out.startswith("verdict: not stuck: the main thread moved "
                            "within 2.0 s"), r
    r = diagnose(t, "dataloader", "-d", "2s")
    assert r.out.startswith("verdict: no DataLoader on the main thread's "
                            "stack in 2.0 s"), r
    r = diagnose(t, "slow", "-d", "2s")
    assert r.out.startswith("verdict: the main thread runs "), r
    assert "under train_step (target0.py:" in r.out or \
        "under MLP.forward (target0.py:" in r.out, r
    assert "torch module MLP forward:" in r.out, r


@needs_torch
def test_leak(spawn):
    t = start(spawn, "leak.py", "--sleep", "0.05")
    # A series long enough that its later half is past the start-up.
    wait_for(lambda: len(probing("query", "SELECT ts FROM process.memory",
                                 target=t.pid).out.splitlines()) > 14, 60,
             "14 s of process.memory")
    r = diagnose(t, "leak", "-d", "3s")
    verdict = r.out.splitlines()[0]
    assert verdict.startswith("verdict: memory grows: RSS +"), r
    assert "tensors held by history (+" in verdict, r
    assert "MB in tensors no name holds" in verdict, r
    assert "holder LIKE 'history%'" in r.out, r


@needs_torch
@pytest.mark.skipif(SANITIZED_TARGETS, reason="under ASan freed memory "
                    "waits in the quarantine (256 MB): RSS grows until it "
                    "is full, and the playbook rightly says so")
def test_leak_not_seen(spawn):
    t = start(spawn, "train.py", "--sleep", "0.01")
    # The training loop's own series: from when it first ran a step.
    wait_for(lambda: probing("query", "SELECT count(*) AS n FROM "
                             "python.backtrace WHERE func = 'train_step'",
                             target=t.pid).out.split()[-1] != "0", 60,
             "the training loop")
    began = time.time()
    wait_for(lambda: len(probing(
        "query", "SELECT ts FROM process.memory WHERE ts > %f" % began,
        target=t.pid).out.splitlines()) > 14, 60,
        "14 s of process.memory in the loop")
    r = diagnose(t, "leak", "-d", "2s")
    assert r.out.startswith("verdict: no leak seen: RSS "), r


@needs_torch
@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_and_slow(spawn, workers):
    t = start(spawn, "slow_data.py", "--workers", str(workers))
    # Past the imports: the training loop has asked its DataLoader.
    wait_for(lambda: probing(
        "query", "SELECT count(*) AS n FROM python.backtrace WHERE file "
        "LIKE '%torch/utils/data/%'", target=t.pid).out.split()[-1] != "0",
        60, "the DataLoader on the main thread's stack")
    r = diagnose(t, "dataloader", "-d", "3s")
    verdict = r.out.splitlines()[0]
    if workers:
        assert verdict.startswith("verdict: the training loop waits for "
                                  "data "), r
        assert "DataLoader workers do not keep up" in verdict, r
    else:
        assert verdict.startswith("verdict: the training loop spends "), r
        assert "loading data on the main thread (num_workers=0), in " \
            "augment" in verdict, r
        r = diagnose(t, "slow", "-d", "3s")
        assert "of it under augment" in r.out.splitlines()[0], r


@needs_torch
def test_hang_in_a_job_names_the_rank(tmp_path):
    job = tc.Job(str(tmp_path), "--hang-rank", "1", "--hang-step", "3",
                 nproc=2)
    try:
        job.wait_ranks()
        def verdict():
            r = probing("diagnose", "hang", target=job.pids[0], timeout=120)
            return r.out.splitlines()[0] if r.rc == 0 else r.err
        wait_for(lambda: "rank 1 has not reached it" in verdict(), 60,
                 "the cluster's verdict")
        r = probing("diagnose", "hang", target=job.pids[0])
        assert r.out.startswith("verdict: rank 0 waits in all_reduce #4 on "
                                "group 0 (for "), r
        assert "rank 1 has not reached it (it is in load_batch " \
            "(ddp_train.py:" in r.out, r
        assert "rank 1: last collective all_reduce #3 done; main thread " \
            "in load_batch (ddp_train.py:" in r.out, r
        assert "probing -t %d cluster backtrace" % job.pids[0] in r.out, r
    finally:
        job.stop()


def test_errors(spawn, python):
    r = probing("diagnose", "everything", target=os.getpid())
    assert r.rc == 2 and "no playbook 'everything'" in r.err, r
    r = probing("diagnose", target=os.getpid())
    assert r.rc == 2 and "which playbook" in r.err, r
    r = probing("diagnose", "hang", "-f", "csv", target=os.getpid())
    assert r.rc == 2, r
    r = probing("diagnose", "hang", "-d", "1h", target=os.getpid())
    assert r.rc == 2 and "at most 10m" in r.err, r
    t = spawn(python, "import time\nwhile True: time.sleep(1)\n",
              agent=None)
    wait_for(lambda: os.path.exists("/proc/%d" % t.pid), 5, "the target")
    r = probing("diagnose", "hang", target=t.pid)
    assert r.rc == 4 and "has no Probing agent" in r.err, r
    assert r.err.startswith("probing: process %d" % t.pid), r
