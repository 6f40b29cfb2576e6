"""python.comm_collective and `probing cluster hang` on real torchrun jobs.

Jobs of examples/collectives.py (gloo, 4 ranks on CPU, from python3-torch):
a healthy one whose rows must match the calls the script made, and jobs
that hang in the three ways the script knows — a rank calling another
collective (mismatch), a rank that never reaches the all_reduce (late),
a rank that died (die) — each diagnosed by `cluster hang`.  A process of
its own (world size 1) checks that the wrappers are transparent and that
DDP keeps a hook the program registers.
"""
import json
import os
import textwrap

import pytest

import test_cluster as tc
from conftest import ROOT, SYSTEM_PYTHON, probing, wait_for

SCRIPT = os.path.join(ROOT, "examples", "collectives.py")
ROUNDS = 3
CALLS_PER_ROUND = 7  # all_reduce, broadcast, all_gather, isend, irecv,
#                      all_reduce (async), barrier
FAULT_ROUND = 2

pytestmark = tc.needs_torch


def start(tmp, *args):
    job = tc.Job(str(tmp), *args, script=SCRIPT)
    job.wait_ranks()
    return job


def rows(pid, sql):
    r = probing("query", "-f", "json", sql, target=pid)
    assert r.rc == 0, r
    return r.json()


def hang_verdict(job, kind, waiting, seq):
    """cluster hang once the job is stuck the way `kind` says, with
    `waiting` ranks in call `seq`: until the last of them has entered it,
    the verdict says (rightly) that one has not reached it yet; and on a
    slow machine (ASan) the ranks can be seen a step earlier, `waiting` of
    them in an earlier call while the last one still computes."""
    last = {}

    def stuck():
        r = probing("cluster", "hang", "-f", "json", target=job.pids[0])
        last["r"] = r
        if not r.out.strip().startswith("{"):
            return False
        d = r.json()
        running = [x["last"][0]["seq"] for x in d["ranks"] if x["last"] and
                   x["last"][0]["state"] == "running"]
        return d["kind"] == kind and running == [seq] * waiting
    wait_for(stuck, 60, lambda: "cluster hang says %s with %d waiting in "
             "#%d: %s" % (kind, waiting, seq, last.get("r")))
    return last["r"]


def test_healthy_job_rows_match_the_calls(tmp_path):
    job = start(tmp_path, "--rounds", str(ROUNDS))
    try:
        wait_for(lambda: job.text().count("rounds done") == 4, 60,
                 "every rank done")
        # torch's own numbers: the same on every rank for the same call
        # (p2p calls have none), one more per collective.
        numbers = [[(g["op"], g["pg_seq"]) for g in rows(
            pid, "SELECT op, pg_seq FROM python.comm_collective ORDER BY id")]
            for pid in job.pids.values()]
        assert all(n == numbers[0] for n in numbers), numbers
        coll = [s for op, s in numbers[0] if op not in ("isend", "irecv")]
        assert all(s is not None for s in coll), numbers[0]
        assert coll == list(range(coll[0], coll[0] + len(coll))), coll
        assert all(s is None for op, s in numbers[0]
                   if op in ("isend", "irecv")), numbers[0]
        for rank, pid in job.pids.items():
            got = rows(pid, "SELECT rank, pg, pg_ranks, op, seq, shape, "
                       "dtype, bytes, async, peer, state, duration, error "
                       "FROM python.comm_collective ORDER BY id")
            assert len(got) == ROUNDS * CALLS_PER_ROUND, got
            assert [g["seq"] for g in got] == \
                list(range(1, ROUNDS * CALLS_PER_ROUND + 1))
            for g in got:
                assert g["rank"] == rank and g["pg"] == "0", g
                assert g["pg_ranks"] == "0,1,2,3", g
                assert g["state"] == "done" and g["error"] is None, g
                assert g["duration"] is not None and g["duration"] >= 0, g
            one = got[:CALLS_PER_ROUND]
            assert [g["op"] for g in one] == [
                "all_reduce", "broadcast", "all_gather", "isend", "irecv",
                "all_reduce", "barrier"]
            # 16x8 float32: 512 bytes; isend/irecv 4 int64; async 3 floats.
            assert [(g["shape"], g["dtype"], g["bytes"]) for g in one[:5]] \
                == [("[16, 8]", "float32", 512)] * 3 + \
                   [("[4]", "int64", 32)] * 2
            assert (one[5]["shape"], one[5]["bytes"], one[5]["async"]) == \
                ("[3]", 12, 1)
            assert one[6]["bytes"] is None and one[6]["async"] == 0
            assert one[1]["peer"] == 0  # broadcast's src
            assert one[3]["peer"] == (rank + 1) % 4  # isend to the right
            assert one[4]["peer"] == (rank - 1) % 4  # irecv from the left
            assert [g["async"] for g in one[3:5]] == [1, 1]
        # The original's name.
        m = rows(job.pids[1], "SELECT src_rank, dst_rank, bytes, latency "
                 "FROM python.comm_metrics WHERE op = 'irecv' LIMIT 1")
        assert m[0]["src_rank"] == 0 and m[0]["dst_rank"] == 1, m
        # Nothing waits: not a communication hang.
        r = probing("cluster", "hang", "-f", "json", target=job.pids[0])
        assert r.rc == 0, r
        assert r.json()["kind"] == "none", r
        assert r.json()["verdict"].startswith(
            "no rank waits in a collective"), r
    finally:
        job.stop()


def test_late_rank(tmp_path):
    job = start(tmp_path, "--fault", "late", "--fault-round",
                str(FAULT_ROUND))
    try:
        seq = FAULT_ROUND * CALLS_PER_ROUND + 1
        r = hang_verdict(job, "behind", 3, seq)
        v = r.json()["verdict"]
        assert v.startswith("ranks 0-2 wait in all_reduce #%d on group 0 "
                            "(for " % seq), v
        assert "; rank 3 has not reached it (it is in load_batch " \
               "(collectives.py:" in v, v
        # In flight, queried while the rank's thread is blocked in C.
        got = rows(job.pids[1], "SELECT op, seq, state, waited, duration "
                   "FROM python.comm_collective WHERE state = 'running'")
        assert len(got) == 1, got
        assert got[0]["op"] == "all_reduce" and got[0]["seq"] == seq
        assert got[0]["waited"] > 0 and got[0]["duration"] is None
        # Across ranks in one statement: the global schema.
        got = rows(job.pids[3], "SELECT _rank, _host, op, seq FROM "
                   "global.python.comm_collective WHERE state = 'running' "
                   "ORDER BY _rank")
        assert got == [{"_rank": r, "_host": tc.HOST, "op": "all_reduce",
                        "seq": seq} for r in range(3)], got
        got = rows(job.pids[0], "SELECT g.seq - l.seq AS behind FROM "
                   "global.python.comm_collective g JOIN "
                   "global.python.comm_collective l ON l._rank = 3 AND "
                   "l.id = (SELECT max(id) FROM global.python.comm_collective "
                   "WHERE _rank = 3) WHERE g.state = 'running' LIMIT 1")
        assert got == [{"behind": 1}], got
        # The text form: the verdict, the table, the stacks with the
        # native wait.
        r = probing("cluster", "hang", target=job.pids[2])
        assert r.rc == 0, r
        assert r.out.startswith("verdict: ranks 0-2 wait in all_reduce"), r
        assert "stacks (main threads):" in r.out
        assert "rank 3 (1 of 4): load_batch" in r.out, r
        waiters = r.out.split("ranks 0-2 (3 of 4): all_reduce")[1]
        assert "native (innermost first):" in waiters, r
        assert "c10d::" in waiters or "gloo::" in waiters, r
    finally:
        job.stop()


def test_mismatched_collectives(tmp_path):
    job = start(tmp_path, "--fault", "mismatch", "--fault-round",
                str(FAULT_ROUND))
    try:
        seq = FAULT_ROUND * CALLS_PER_ROUND + 1
        r = hang_verdict(job, "mismatch", 4, seq)
        assert r.json()["verdict"] == (
            "rank 3 is in broadcast #%d on group 0 while ranks 0-2 are in "
            "all_reduce #%d: mismatched collectives" % (seq, seq)), r
        got = rows(job.pids[3], "SELECT op, state FROM "
                   "python.comm_collective WHERE seq = %d" % seq)
        assert got == [{"op": "broadcast", "state": "running"}], got
    finally:
        job.stop()


def test_dead_rank(tmp_path):
    # Rank 3 dies once every rank is registered (a rank that died before
    # its agent registered would not be in the node list at all).
    go = os.path.join(str(tmp_path), "die-now")
    job = start(tmp_path, "--fault", "die", "--fault-round",
                str(FAULT_ROUND), "--fault-when", go)
    try:
        open(go, "w").close()
        seq = FAULT_ROUND * CALLS_PER_ROUND + 1
        last = {}

        def diagnosed():
            r = probing("cluster", "hang", "-f", "json",
                        target=job.pids[0])
            last["r"] = r
            if not r.out.strip().startswith("{"):
                return False
            d = r.json()
            return "rank 3 did not answer" in d["verdict"] and \
                d["kind"] in ("missing", "failed")
        wait_for(diagnosed, 60, "rank 3 missing: %s" % last.get("r"))
        r = last["r"]
        assert r.rc == tc.PARTIAL, r
        assert "rank 3" in r.err, r
        # A global query says rank 3 is missing, and exits 13.
        r = probing("query", "SELECT DISTINCT _rank FROM "
                    "global.python.comm_collective ORDER BY _rank",
                    target=job.pids[1])
        assert r.rc == tc.PARTIAL, r
        assert r.out.split() == ["_rank", "0", "1", "2"], r
        assert "note: global.python.comm_collective: rank 3 (" in r.err, r
        assert "did not answer" in r.err, r
        # Gloo sees the connection close: survivors' all_reduce failed
        # (or still waits, for a rank whose peer is not the dead one).
        for rank in range(3):
            got = rows(job.pids[rank], "SELECT state, error FROM "
                       "python.comm_collective WHERE seq = %d" % seq)
            assert len(got) == 1 and got[0]["state"] in ("failed",
                                                         "running"), got
            if got[0]["state"] == "failed":
                assert "RuntimeError" in got[0]["error"], got
    finally:
        job.stop()


def test_ddp_allreduces_and_the_verdict(tmp_path):
    """examples/ddp_train.py: DDP's bucketed all-reduces are rows (through
    Probing's comm hook); rank 2 stuck in load_batch is found."""
    job = tc.Job(str(tmp_path), "--hang-rank", "2", "--hang-step", "3")
    try:
        job.wait_ranks()
        r = hang_verdict(job, "behind", 3, 4)
        v = r.json()["verdict"]
        assert v.startswith("ranks 0-1,3 wait in all_reduce #4 on group 0"
                            ) or v.startswith("ranks 0,1,3 wait in "
                                              "all_reduce #4"), v
        assert "rank 2 has not reached it (it is in load_batch " \
               "(ddp_train.py:" in v, v
        got = rows(job.pids[0], "SELECT op, seq, shape, dtype, bytes, "
                   "async, state FROM python.comm_collective ORDER BY id")
        # One bucket per step (8449 parameters), steps 0-2 done, 3 waits.
        assert [g["seq"] for g in got] == [1, 2, 3, 4], got
        for g in got:
            assert (g["op"], g["shape"], g["dtype"], g["bytes"],
                    g["async"]) == ("all_reduce", "[8449]", "float32",
                                    8449 * 4, 1), g
        assert [g["state"] for g in got] == ["done"] * 3 + ["running"]
        # comm.status is refreshed once a second.
        wait_for(lambda: "DDP all-reduces recorded, 4 calls recorded" in
                 probing("config", "comm.status", target=job.pids[1]).out,
                 10, "comm.status of rank 1")
    finally:
        job.stop()


ONE_PROCESS = textwrap.dedent("""
    import inspect, os, sys, tempfile
    import torch, torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    from torch.nn.parallel import DistributedDataParallel as DDP

    def agent_ready():
        for _ in range(200):
            if type(dist.all_reduce).__name__ == "CommWrapper":
                return
            import time; time.sleep(0.05)
        sys.exit("the wrappers never came")

    agent_ready()
    f = tempfile.NamedTemporaryFile(delete=False).name
    dist.init_process_group("gloo", init_method="file://" + f, rank=0,
                            world_size=1)
    out = {}
    # As the originals: names, signatures, __wrapped__, equality.
    out["name"] = dist.all_reduce.__name__
    out["sig"] = str(inspect.signature(dist.all_reduce)) == \\
        str(inspect.signature(c10d.all_reduce))
    out["wrapped"] = dist.all_reduce.__wrapped__ is c10d.all_reduce
    out["eq"] = dist.isend == c10d.isend and \\
        hash(dist.isend) == hash(c10d.isend)
    dist.P2POp(dist.isend, torch.ones(1), 0)   # checks `op in [isend, ...]`
    # The same exception as without the wrapper.
    try:
        dist.all_reduce("not a tensor")
    except Exception as e:
        out["exc"] = type(e).__name__ + ": " + str(e)
    try:
        c10d.all_reduce("not a tensor")
    except Exception as e:
        out["exc_orig"] = type(e).__name__ + ": " + str(e)
    # DDP takes the program's own hook, and its builtin one.
    calls = []
    def hook(state, bucket):
        calls.append(bucket.buffer().numel())
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    m = DDP(torch.nn.Linear(4, 2))
    m.register_comm_hook(None, hook)
    for _ in range(3):
        m(torch.ones(3, 4)).sum().backward()
    out["hook_calls"] = len(calls)
    m2 = DDP(torch.nn.Linear(4, 2))
    m2._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    m2(torch.ones(3, 4)).sum().backward()
    w = torch.nn.Linear(4, 2)
    w.load_state_dict(m2.module.state_dict())
    w(torch.ones(3, 4)).sum().backward()
    out["same_grad"] = torch.equal(w.weight.grad, m2.module.weight.grad)
    # Nothing of Probing's on the model: it pickles as it did.
    import pickle
    out["attrs"] = sorted(k for k in vars(m) if "probing" in k)
    out["pickles"] = type(pickle.loads(pickle.dumps(m2.module))).__name__
    print("RESULT " + __import__("json").dumps(out), flush=True)
    import time
    time.sleep(600)
""")


def test_wrappers_are_transparent_and_ddp_keeps_program_hooks(spawn):
    t = spawn(SYSTEM_PYTHON, ONE_PROCESS)
    t.wait_line("RESULT", timeout=120)
    line = [x for x in t.output().splitlines() if x.startswith("RESULT ")]
    out = json.loads(line[0][7:])
    assert out["name"] == "all_reduce" and out["sig"], out
    assert out["wrapped"] and out["eq"], out
    assert out["exc"] == out["exc_orig"], out
    assert out["hook_calls"] == 3, out
    assert out["same_grad"], out
    assert out["attrs"] == [] and out["pickles"] == "Linear", out
    got = rows(t.pid, "SELECT op, count(*) AS n FROM "
               "python.comm_collective GROUP BY op ORDER BY op")
    # The failed call, the program's hook's 3 and the builtin's 1.
    assert got == [{"op": "all_reduce", "n": 5}], got
    failed = rows(t.pid, "SELECT error FROM python.comm_collective "
                  "WHERE state = 'failed'")
    assert len(failed) == 1 and failed[0]["error"], failed
    # Off: the originals are back.
    r = probing("config", "comm.record=off", target=t.pid)
    assert r.rc == 0, r

    def restored():
        r = probing("eval", "type(__import__('torch.distributed')"
                    ".distributed.all_reduce).__name__", target=t.pid)
        return r.rc == 0 and "function" in r.out
    wait_for(restored, 10, "the original all_reduce back")
