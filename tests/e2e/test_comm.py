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
import re
import subprocess
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


def start(tmp, *args, env=None):
    job = tc.Job(str(tmp), *args, script=SCRIPT, env=env)
    try:
        job.wait_ranks()
    except BaseException:
        job.stop()   # (a job that did not come up is not left running)
        raise
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
    # The script notes torch's own number of each call (the default
    # group's sequence number): pg_seq must be it.  Collectives take one
    # each; point-to-point calls none on torch 1.13, one each on 2.x.
    seqs = tmp_path / "seqs"
    seqs.mkdir()
    job = start(tmp_path, "--rounds", str(ROUNDS), "--torch-seq", str(seqs))
    try:
        wait_for(lambda: job.text().count("rounds done") == 4, 60,
                 "every rank done")
        torch_says = {rank: [tuple(x) for x in json.loads(
            (seqs / ("rank-%d.json" % rank)).read_text())]
            for rank in job.pids}
        numbers = {rank: [(g["op"], g["pg_seq"]) for g in rows(
            pid, "SELECT op, pg_seq FROM python.comm_collective ORDER BY id")]
            for rank, pid in job.pids.items()}
        # The same on every rank for the same call.
        assert all(n == numbers[0] for n in numbers.values()), numbers
        assert [op for op, _ in torch_says[0]] == \
            [op for op, _ in numbers[0]], (torch_says[0], numbers[0])
        assert all(s is not None for op, s in torch_says[0]
                   if op not in ("isend", "irecv")), torch_says[0]
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
        # torch's own numbers, p2p calls included (last: the rest of the
        # rows are checked whatever they are).
        for rank in job.pids:
            assert numbers[rank] == torch_says[rank], (rank, [
                (i, got, want) for i, (got, want) in
                enumerate(zip(numbers[rank], torch_says[rank]))
                if got != want][:6])
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


def test_rank_that_skipped_into_a_cpp_collective_is_ahead(tmp_path):
    """Issue 28: rank 3 skips the all_reduce and goes on into DDP's
    broadcast of its model, made in C++: nothing records it, so by the
    records rank 3 is behind; torch's own count of the calls started on
    the group (python.comm_groups) says it is ahead, and where."""
    fr = has_flight_recorder()
    job = start(tmp_path, "--fault", "skip", "--fault-round",
                str(FAULT_ROUND),
                env={"TORCH_FR_BUFFER_SIZE": "1000"} if fr else None)
    try:
        seq = FAULT_ROUND * CALLS_PER_ROUND + 1
        r = hang_verdict(job, "ahead", 3, seq)
        d = r.json()
        v = d["verdict"]
        waiters = [x for x in d["ranks"] if x["rank"] != 3]
        torch_seq = waiters[0]["last"][0]["pg_seq"]
        assert v.startswith("ranks 0-2 wait in all_reduce #%d on group 0 "
                            "(for " % seq), v
        assert ("; rank 3 skipped it and went on: torch has started call "
                "%d on group 0 there (the waiters' call is its %d)"
                % (torch_seq, torch_seq)) in v, v
        assert (", after barrier #%d, through no call of "
                "torch.distributed's Python API" % (seq - 1)) in v, v
        assert "(it is in one_round (collectives.py:" in v, v
        # Where torch has a Flight Recorder (2.x builds that have it), the
        # call rank 3 is in, by torch's name.
        m = re.search(r"\(the waiters' call is its \d+\), which torch's "
                      r"Flight Recorder names (\w+), after", v)
        assert bool(m) == fr, (fr, v)
        if fr:
            # The newest entry of rank 3's recorder: the call it is in,
            # not completed.
            got = rows(job.pids[3], "SELECT op, backend, state FROM "
                       "python.comm_flight_recorder WHERE pg = '0' "
                       "ORDER BY record_id DESC LIMIT 1")
            assert got[0]["op"] == m.group(1), got
            assert got[0]["backend"] == "gloo", got
            assert got[0]["state"] != "completed", got
            # Rank 0's collectives, as recorded from Python, are the
            # recorder's, numbered 1, 2, ... (gloo's recorder keeps no
            # point-to-point calls; torch's group sequence counts them).
            got = rows(job.pids[0], "SELECT seq, op FROM "
                       "python.comm_flight_recorder WHERE pg = '0' "
                       "ORDER BY record_id")
            mine = rows(job.pids[0], "SELECT op FROM "
                        "python.comm_collective WHERE pg = '0' AND op "
                        "NOT IN ('isend', 'irecv') ORDER BY id")
            assert [x["seq"] for x in got] == list(range(1, len(got) + 1))
            assert len(got) == len(mine), (got, mine)
        got = rows(job.pids[3], "SELECT pg, pg_ranks, torch_last_seq FROM "
                   "python.comm_groups")
        assert got == [{"pg": "0", "pg_ranks": "0,1,2,3",
                        "torch_last_seq": torch_seq}], got
        got = rows(job.pids[0], "SELECT torch_last_seq FROM "
                   "python.comm_groups")
        assert got == [{"torch_last_seq": torch_seq}], got
    finally:
        job.stop()


def has_flight_recorder():
    """Does this torch keep a Flight Recorder (torch >= 2.5 builds that
    have one: `_dump_fr_trace_json`, or `_dump_nccl_trace_json`)?"""
    r = subprocess.run([SYSTEM_PYTHON, "-c", "import torch._C._distributed_c10d as c; "
                        "print(hasattr(c, '_dump_fr_trace_json') or "
                        "hasattr(c, '_dump_nccl_trace_json'))"],
                       capture_output=True, text=True, timeout=120)
    return r.stdout.strip() == "True"


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
        for _ in range(1200):   # 60 s: the agent installs them when it
            #                     sees torch.distributed (a loaded machine)
            if type(dist.isend).__name__ == "CommWrapper":
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
    # torch.compile traces dist.all_reduce as it does the original's:
    # into a functional collective, the whole function one graph (it
    # broke the graph at the wrapper, and fullgraph=True failed).
    out["compiled"] = "no torch.compile"
    out["has_compile"] = hasattr(torch, "compile") and hasattr(torch, "compiler")
    if out["has_compile"]:
        def f(x):
            y = x * 2
            dist.all_reduce(y)
            return y + 1
        try:
            got = torch.compile(f, fullgraph=True, backend="eager")(torch.ones(3))
            out["compiled"] = got.tolist()
        except Exception as e:
            out["compiled"] = type(e).__name__ + ": " + str(e).splitlines()[0]
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
    assert out["compiled"] == ([3.0, 3.0, 3.0] if out["has_compile"]
                               else "no torch.compile"), out
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
        r = probing("eval", "import torch.distributed as d, "
                    "torch.distributed.distributed_c10d as c; "
                    "d.all_reduce is c.all_reduce and d.isend is c.isend",
                    target=t.pid)
        return r.rc == 0 and r.out.strip() == "True"
    wait_for(restored, 10, "the original all_reduce back")


DDP_AT_ONCE = textwrap.dedent("""
    import sys, tempfile, time
    # The agent's watch for torch's modules first on sys.meta_path (it
    # sets it when it starts waiting for torch.distributed).
    for _ in range(1200):
        if any(type(f).__name__ == "Watch" for f in sys.meta_path):
            break
        time.sleep(0.05)
    else:
        sys.exit("no watch of the agent's on sys.meta_path")
    # Past the agent's first 10 s, when it looks only once a second (a
    # rank whose start was slow): a look is less likely to come between
    # the import and the model than when it looks every 100 ms.
    time.sleep(10.5)
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    f = tempfile.NamedTemporaryFile(delete=False).name
    dist.init_process_group("gloo", init_method="file://" + f, rank=0,
                            world_size=1)
    m = DDP(torch.nn.Linear(4, 2))   # at once: no look of the agent's between
    for _ in range(3):
        m(torch.ones(3, 4)).sum().backward()
    # Installed with torch's import over: torch.compile traces the wrapped
    # all_reduce as the original, one graph (its shim needs
    # torch.compiler, which comes late in torch's import).
    compiled = "no torch.compile"
    if hasattr(torch, "compile") and hasattr(torch, "compiler"):
        def f(x):
            y = x * 2
            dist.all_reduce(y)
            return y + 1
        try:
            compiled = torch.compile(f, fullgraph=True,
                                     backend="eager")(torch.ones(3)).tolist()
        except Exception as e:
            compiled = type(e).__name__ + ": " + str(e).splitlines()[0]
    print("COMPILED", compiled, flush=True)
    print("READY", [type(f).__name__ for f in sys.meta_path], flush=True)
    time.sleep(600)
""")


def test_ddp_made_right_after_the_import_is_recorded(spawn):
    """The recorder installs as `import torch` ends, in the program's
    thread: a DDP model made on the line after it gets its hook (a look now
    and then missed it, and the model was never recorded: seen in a
    torchrun job whose rank was quick), and torch.compile still traces the
    wrapped all_reduce in one graph.  The watch leaves sys.meta_path once
    the install is made."""
    t = spawn(SYSTEM_PYTHON, DDP_AT_ONCE)
    t.wait_line("READY", timeout=180)
    compiled = [x for x in t.output().splitlines() if x.startswith("COMPILED")]
    assert compiled[0] in ("COMPILED [3.0, 3.0, 3.0]",
                           "COMPILED no torch.compile"), t.output()[-2000:]
    got = rows(t.pid, "SELECT op, count(*) AS n FROM "
               "python.comm_collective GROUP BY op ORDER BY op")
    # DDP's 3 bucket all-reduces (and init_process_group's barrier, where
    # this torch makes one).
    assert {"op": "all_reduce", "n": 3} in got, got
    wait_for(lambda: "DDP all-reduces recorded" in
             probing("config", "comm.status", target=t.pid).out, 10,
             "comm.status saying so")
    r = probing("eval", "import sys; [type(f).__name__ for f in sys.meta_path]",
                target=t.pid)
    assert r.rc == 0 and "Watch" not in r.out, r


FUNCOL = textwrap.dedent("""
    import json, os, sys, tempfile, time
    import torch, torch.distributed as dist
    try:
        import torch.distributed._functional_collectives as funcol
    except ImportError:
        print("RESULT " + json.dumps({"funcol": None}), flush=True)
        time.sleep(600)

    def wait_until(what, ok):
        for _ in range(1200):   # 60 s: the agent looks once a second
            if ok():
                return
            time.sleep(0.05)
        sys.exit("never: " + what)

    def shimmed(f):
        return getattr(getattr(f, "__code__", None), "co_filename",
                       "") == "<probing>"

    wait_until("the functional collectives wrapped",
               lambda: shimmed(funcol.all_reduce))
    f = tempfile.NamedTemporaryFile(delete=False).name
    dist.init_process_group("gloo", init_method="file://" + f, rank=0,
                            world_size=1)
    W = dist.group.WORLD
    out = {"funcol": True}
    out["face"] = [funcol.all_reduce.__name__,
                   funcol.all_reduce.__wrapped__.__module__]
    out["all_reduce"] = (funcol.all_reduce(torch.ones(3), "sum", W) + 1).tolist()
    a, b = funcol.all_reduce_coalesced([torch.ones(3), torch.ones(2)], "sum", W)
    out["coalesced"] = [(a * 2).tolist(), (b * 2).tolist()]
    g = funcol.all_gather_tensor(torch.ones(2, 2), 0, W)
    out["gather"] = list(g.wait().shape)
    out["scatter"] = funcol.reduce_scatter_tensor(torch.ones(4), "sum", 0,
                                                  W).sum().item()
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (1,))
    out["mesh"] = funcol.all_reduce(torch.ones(6), "sum", mesh).sum().item()
    # DTensor's form: (mesh, dimension).
    out["mesh_dim"] = funcol.all_reduce(torch.ones(9), "sum",
                                        (mesh, 0)).sum().item()
    # Waited for through a view (DTensor unpads a shard so).
    x = funcol.all_reduce(torch.ones(8), "sum", W)
    out["view"] = (x.narrow(0, 0, 4) + 1).tolist()
    del x
    # One fed the other's result before it was waited for.
    out["chained"] = funcol.all_reduce(funcol.all_reduce(torch.ones(2), "sum", W),
                                       "sum", W).tolist()
    # Compiled: one graph as without the agent, the call not recorded
    # (it runs inside the graph, never as Python).
    def step(x):
        return funcol.all_reduce(x * 2, "sum", W) + 1
    try:
        got = torch.compile(step, fullgraph=True, backend="eager")(torch.ones(2))
        out["compiled"] = got.tolist()
    except Exception as e:
        out["compiled"] = type(e).__name__ + ": " + str(e).splitlines()[0]
    # Started, not waited for yet; and one never waited for.
    pending = funcol.all_reduce(torch.ones(5), "sum", W)
    dropped = funcol.all_reduce(torch.ones(7), "sum", W)
    print("RESULT " + json.dumps(out), flush=True)
    wait_until("go", lambda: os.path.exists("go"))
    print("WAITED", (pending + 0).sum().item(), flush=True)
    time.sleep(600)
""")


def test_functional_collectives_are_recorded(spawn, tmp_path):
    """torch 2.x's functional collectives (DTensor, FSDP2, tensor
    parallelism call them): each eager call a row, running until its
    result is first used, its group resolved from a ProcessGroup or a
    DeviceMesh; a compiled call stays one graph and is not recorded."""
    t = spawn(SYSTEM_PYTHON, FUNCOL)
    t.wait_line("RESULT", timeout=180)
    line = [x for x in t.output().splitlines() if x.startswith("RESULT ")]
    out = json.loads(line[0][7:])
    if out["funcol"] is None:
        pytest.skip("this torch has no functional collectives")
    assert out["face"] == ["all_reduce",
                           "torch.distributed._functional_collectives"], out
    assert out["all_reduce"] == [2.0] * 3, out
    assert out["coalesced"] == [[2.0] * 3, [2.0] * 2], out
    assert out["gather"] == [2, 2] and out["scatter"] == 4.0, out
    assert out["mesh"] == 6.0 and out["mesh_dim"] == 9.0, out
    assert out["view"] == [2.0] * 4 and out["chained"] == [1.0, 1.0], out
    assert out["compiled"] == [3.0, 3.0], out
    sql = ("SELECT op, pg, seq, pg_seq, shape, dtype, bytes, async, state "
           "FROM python.comm_collective WHERE op LIKE 'funcol.%' ORDER BY id")
    got = rows(t.pid, sql)
    assert [(g["op"], g["shape"], g["state"]) for g in got] == [
        ("funcol.all_reduce", "[3]", "done"),
        ("funcol.all_reduce_coalesced", "[3], [2]", "done"),
        ("funcol.all_gather_tensor", "[2, 2]", "done"),
        ("funcol.reduce_scatter_tensor", "[4]", "done"),
        ("funcol.all_reduce", "[6]", "done"),
        ("funcol.all_reduce", "[9]", "done"),
        ("funcol.all_reduce", "[8]", "done"),
        ("funcol.all_reduce", "[2]", "done"),
        ("funcol.all_reduce", "[2]", "done"),
        ("funcol.all_reduce", "[5]", "running"),
        ("funcol.all_reduce", "[7]", "running"),
    ], got
    assert all(g["async"] == 1 and g["dtype"] == "float32" for g in got), got
    assert got[1]["bytes"] == 20 and got[9]["bytes"] == 20, got
    # Named and numbered as torch numbers them: the default group's
    # calls take its next numbers; the mesh's all_reduce is on the mesh's
    # group (the default one where the mesh is the whole world); the
    # compiled call took a number too, unrecorded.
    mesh = {4, 5}
    assert all(g["pg"] == "0" for i, g in enumerate(got) if i not in mesh), got
    first = got[0]["pg_seq"]
    assert first and [g["pg_seq"] for g in got[:4]] == list(
        range(first, first + 4)), got
    assert all(got[i]["pg"] is not None and got[i]["pg_seq"] for i in mesh), got
    assert got[5]["pg"] == got[4]["pg"] and \
        got[5]["pg_seq"] == got[4]["pg_seq"] + 1, got
    on_world = 2 if got[4]["pg"] == "0" else 0
    assert got[6]["pg_seq"] == got[3]["pg_seq"] + 1 + on_world, got
    assert [g["pg_seq"] for g in got[6:9]] == list(
        range(got[6]["pg_seq"], got[6]["pg_seq"] + 3)), got
    # The compiled call took a number too, unrecorded.
    assert got[9]["pg_seq"] == got[8]["pg_seq"] + 2, got
    (tmp_path / "go").write_text("")
    t.wait_line("WAITED")
    wait_for(lambda: rows(t.pid, sql)[-2]["state"] == "done", 10,
             "the waited call done")
    # Recording off: the call never waited for ends, unobserved.
    assert probing("config", "comm.record=off", target=t.pid).rc == 0
    last = "SELECT state, duration, error FROM python.comm_collective " \
        "WHERE op LIKE 'funcol.%' ORDER BY id DESC LIMIT 1"
    wait_for(lambda: rows(t.pid, last)[0]["state"] == "done", 10,
             "the dropped call ended")
    got = rows(t.pid, last)[0]
    assert got["duration"] is None and "not observed" in got["error"], got
