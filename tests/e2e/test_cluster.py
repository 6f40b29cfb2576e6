"""probing cluster: every rank of a job at once.

The torchrun tests run a real torch.distributed job (gloo, 4 ranks, from
python3-torch) of examples/ddp_train.py in which rank 2 hangs in
load_batch() while the others wait for it in loss.backward(); discovery
goes through the job's own rendezvous store.  The others use plain
Python processes listening on TCP and `cluster add` / node files.
"""
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import (ROOT, SANITIZED_TARGETS, SYSTEM_PYTHON, USERBASE,
                      agent_listening, free_port, probing, wait_for)

sys.path.insert(0, os.path.join(ROOT, "tests", "profile"))
import formats  # noqa: E402
# What this torch needs and shows (libuv, the backward's frames).
from torchenv import backward_top, lacks_libuv, torch_env  # noqa: E402,F401

TORCHRUN = "/usr/bin/torchrun"
EXAMPLE = os.path.join(ROOT, "examples", "ddp_train.py")
HOST = socket.gethostname()
PARTIAL = 13


def have_torch():
    return os.path.exists(TORCHRUN) and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import torch.distributed"],
        capture_output=True).returncode == 0


needs_torch = pytest.mark.skipif(not have_torch(),
                                 reason="needs torchrun and python3-torch")

class Job:
    """A torchrun job of examples/ddp_train.py, killed at the end.

    env: more environment; prefix: a command torchrun runs under (ip
    netns exec NS); nnodes/node_rank/master_addr/master_port: one node of
    a job across hosts (torchrun is then run once per host)."""

    def __init__(self, tmp, *args, env=None, prefix=(), nproc=4, nnodes=1,
                 node_rank=0, master_addr=None, master_port=None,
                 name="job", script=EXAMPLE):
        self.out = os.path.join(tmp, name + ".out")
        self.sanitizer = os.path.join(tmp, name + "-sanitizer")
        self.master_port = master_port or free_port()
        self.world = nproc * nnodes
        e = dict(os.environ, PROBING="2", PYTHONUSERBASE=USERBASE,
                 PYTHONUNBUFFERED="1")
        e.pop("PROBING_PORT", None)
        e.pop("PROBING_LISTEN", None)
        e.update(torch_env(tmp))
        e.update(env or {})
        if os.environ.get("PROBING_TARGET_PRELOAD"):
            # The ASan build: the runtime preloaded into torchrun and its
            # ranks; reports go to files named after the job.
            log = self.sanitizer
            e["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
            e["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + \
                ":detect_leaks=0:log_path=" + log
            e["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "") + \
                ":log_path=" + log
        # --redirects/--tee: torch 1.13's default "0" does not parse on
        # Python 3.11 (IntFlag iteration skips 0), so torchrun fails
        # without them.  --monitor_interval: the rank-killed test needs
        # the survivors for a while after a rank dies.
        cmd = [*prefix, TORCHRUN, "--redirects", "1", "--tee", "1",
               "--log_dir", os.path.join(tmp, name + "-logs"),
               "--monitor_interval", "120",
               "--master_port", str(self.master_port),
               "--nproc_per_node", str(nproc)]
        if nnodes > 1:
            cmd += ["--nnodes", str(nnodes), "--node_rank", str(node_rank)]
        if master_addr:
            cmd += ["--master_addr", master_addr]
        cmd += [script, *args]
        self.proc = subprocess.Popen(cmd, stdout=open(self.out, "w"),
                                     stderr=subprocess.STDOUT, env=e,
                                     cwd=tmp, start_new_session=True)
        self.pids = {}
        # {pid: start time} of every process of the job seen so far:
        # torchrun 2.x starts each rank in a session of its own, out of
        # reach of torchrun's process group, so stop() kills each.
        self.procs = {}

    def text(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def ranks_started(self):
        """{rank: pid} of the ranks that printed theirs."""
        if self.proc.poll() is not None:
            raise AssertionError("torchrun exited:\n" + self.text())
        for line in self.text().splitlines():
            if " of %d: pid " % self.world in line:
                rank = int(line.split("rank ")[1].split()[0])
                self.pids[rank] = int(line.rsplit(" ", 1)[1])
        self._remember()
        return self.pids

    def wait_ranks(self, timeout=240):
        wait_for(lambda: len(self.ranks_started()) == self.world, timeout,
                 "%d ranks" % self.world)
        # Every rank registered and seen by rank 0.
        def registered():
            r = probing("query", "SELECT count(*) AS n FROM cluster.nodes "
                        "WHERE role = 'rank'",
                        target=self.pids[0], env={"PROBING_TIMEOUT": "5000"})
            return r.rc == 0 and r.out.split()[-1] == str(self.world)
        wait_for(registered, 120, "%d ranks in cluster.nodes" % self.world)
        return self

    def _remember(self):
        """Adds torchrun, the ranks and their children (DataLoader
        workers) to self.procs; returns the live ones, {pid: start}."""
        live = {}
        todo = [self.proc.pid, *self.pids.values(), *self.procs]
        while todo:
            pid = todo.pop()
            start = _started(pid)
            if pid in live or start is None or \
                    self.procs.get(pid, start) != start:
                continue  # seen, gone, or another process by now
            self.procs[pid] = live[pid] = start
            todo += _children(pid)
        return live

    def stop(self):
        """Kills every process of the job, each by pid (and the group
        each leads), and checks that none is left."""
        for _ in range(20):
            live = self._remember()
            if not live:
                break
            for pid, start in live.items():
                for kill in (os.kill, os.killpg):
                    try:
                        kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            time.sleep(0.05)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=60)

        def left():
            return {p: s for p, s in self.procs.items()
                    if _started(p) == s}
        wait_for(lambda: not left(), 30, lambda: "the job's processes to "
                 "end: %s left" % sorted(left()))
        reports = glob.glob(self.sanitizer + "*")
        assert not reports, "sanitizer reports:\n" + "\n".join(
            open(r, errors="replace").read()[:4000] for r in reports)


def _started(pid):
    """pid's start time (clock ticks since boot), or None when no such
    process runs (gone, or a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _children(pid):
    kids = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return kids


@pytest.fixture(scope="module")
def hung_job(tmp_path_factory):
    if not have_torch():
        pytest.skip("needs torchrun and python3-torch")
    # Each rank has a DataLoader worker: a forked child that inherits
    # RANK (test_torchrun_loader_worker_is_not_the_rank).
    job = Job(str(tmp_path_factory.mktemp("hung")), "--hang-rank", "2",
              "--step-sleep", "0.01", "--loader-workers", "1")
    try:
        job.wait_ranks()
        # Ranks 0, 1, 3 reach backward() of the step rank 2 never joins.
        top = backward_top()

        def stuck():
            r = probing("cluster", "backtrace", "-f", "json",
                        target=job.pids[0])
            if r.rc != 0:
                return False
            groups = r.json()
            return len(groups) == 2 and groups[0]["ranks"] == [2] and \
                groups[1]["frames"][0]["func"] == top
        wait_for(stuck, 120, "rank 2 stuck, the others in " + top)
        yield job
    finally:
        job.stop()


@needs_torch
def test_torchrun_discovery(hung_job):
    r = probing("cluster", "nodes", "-f", "json", target=hung_job.pids[3])
    assert r.rc == 0, r
    nodes = [n for n in r.json() if n["role"] == "rank"]
    assert [int(n["rank"]) for n in nodes] == [0, 1, 2, 3]
    for n in nodes:
        assert int(n["pid"]) == hung_job.pids[int(n["rank"])]
        assert int(n["local_rank"]) == int(n["rank"])
        assert n["host"] == HOST
        assert n["addr"].startswith("127.0.0.1:")
        assert n["status"] == "up" and n["last_seen"]
    r = probing("config", target=hung_job.pids[2])
    assert "rank 2 of 4: registered in the store" in r.out, r


@needs_torch
def test_torchrun_loader_workers_listed_under_their_rank(hung_job):
    """Each rank's DataLoader worker follows it in cluster.nodes as a
    worker (pid its own, rank its rank's, no address), on every rank's
    list; the fan-out commands never ask it."""
    def workers():
        return {rank: children(pid) for rank, pid in hung_job.pids.items()}
    # Each rank's worker is up before its first batch; the forkserver's
    # children list (3.14) may lag a moment behind.
    wait_for(lambda: all(workers().values()), 30,
             lambda: "a worker under every rank: %s\n%s" % (
                 workers(), tree(hung_job.proc.pid)))
    want = [(rank, kids[0]) for rank, kids in sorted(workers().items())]
    last = {}

    def listed():
        r = probing("cluster", "nodes", "-f", "json",
                    target=hung_job.pids[1])
        last["r"] = r
        got = [(int(n["rank"]), int(n["pid"])) for n in r.json()
               if n["role"] == "worker"] if r.rc == 0 else None
        return got == want
    wait_for(listed, 30, "workers listed: %s" % last.get("r"))
    rows = last["r"].json()
    for n in rows:
        if n["role"] == "worker":
            assert n["addr"] is None and n["status"] is None, n
    # Workers right after their rank.
    assert [n["role"] for n in rows] == ["rank", "worker"] * 4, rows
    r = probing("cluster", "query", "SELECT 1 AS one", "-f", "json",
                target=hung_job.pids[0])
    assert r.rc == 0 and len(r.json()) == 4, r


def tree(pid, depth=0):
    """pid and its descendants with their command lines, one a line (for
    a failure's message)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmd = "(gone)"
    out = "%s%d %s\n" % ("  " * depth, pid, cmd[:160])
    for c in _children(pid):
        out += tree(c, depth + 1)
    return out


def children(pid):
    """pid's DataLoader workers: its children, or where multiprocessing
    starts them through a forkserver (the default from 3.14), the
    forkserver's; its resource tracker is none."""
    kids = _children  # of every thread: a forkserver started by any


    def cmdline(p):
        with open("/proc/%d/cmdline" % p, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    out = []
    for c in kids(pid):
        cmd = cmdline(c)
        if "multiprocessing.forkserver" in cmd:
            out += kids(c)
        elif "multiprocessing.resource_tracker" not in cmd:
            out.append(c)
    return sorted(out)


@needs_torch
def test_torchrun_loader_worker_is_not_the_rank(hung_job):
    """Rank 2's DataLoader worker, given an agent, knows it is a child of
    rank 2 and stays out of the store: the job's node list keeps the
    rank, and `cluster backtrace` still shows the rank stuck in
    load_batch (it showed the worker when the worker registered as rank
    2)."""
    rank = hung_job.pids[2]
    worker, = children(rank)
    r = probing("inject", target=worker)
    assert r.rc == 0, r
    r = probing("config", "-f", "json", target=worker)
    assert r.rc == 0, r
    status = {s["name"]: s["value"] for s in r.json()}["cluster.status"]
    assert status.startswith("a child of rank 2 (pid %d), not the rank"
                             % rank), status
    # Every rank reads the store again within CLUSTER_REFRESH_MS (2 s).
    time.sleep(2.5)
    r = probing("cluster", "nodes", "-f", "json", target=hung_job.pids[0])
    assert r.rc == 0, r
    assert {int(n["rank"]): int(n["pid"]) for n in r.json()
            if n["role"] == "rank"} == hung_job.pids
    r = probing("cluster", "backtrace", target=hung_job.pids[0])
    assert r.rc == 0 and r.out.startswith("rank 2 (1 of 4): load_batch"), r


@needs_torch
def test_torchrun_launcher_leads_to_its_ranks(hung_job):
    """Under PROBING=2 torchrun has an agent too, in no job: `list` shows
    its ranks under it, and the cluster commands and diagnose given the
    launcher's pid ask the job through its first rank (issue 30: `cluster
    hang` said "not in a torch.distributed job", `diagnose hang` judged
    torchrun's own loop)."""
    launcher = hung_job.proc.pid
    r = probing("list", "-f", "json")
    assert r.rc == 0, r
    rows = [x for x in r.json() if int(x["pid"]) in
            {launcher, *hung_job.pids.values()}]
    assert [int(x["pid"]) for x in rows] == \
        [launcher] + [hung_job.pids[k] for k in range(4)], rows
    assert rows[0]["job"] == "torchrun of ranks 0-3", rows
    for k in range(4):
        assert rows[1 + k]["job"] == "rank %d of 4 (parent %d)" % (
            k, launcher), rows
    # Each rank's listed children come right after it.
    everything = [int(x["pid"]) for x in r.json()]
    for x in r.json():
        if x["job"].startswith("child of rank "):
            rank = int(x["job"].split()[3])
            at = everything.index(int(x["pid"]))
            assert at > everything.index(hung_job.pids[rank]), r.out
    note = "%d is torchrun's launcher (ranks 0-3): asking rank 0 (pid %d)" \
        % (launcher, hung_job.pids[0])
    r = probing("cluster", "backtrace", target=launcher)
    assert r.rc == 0 and r.out.startswith("rank 2 (1 of 4): load_batch"), r
    assert note in r.err, r
    r = probing("diagnose", "hang", target=launcher, timeout=120)
    assert r.rc == 0 and note in r.err, r
    assert "rank 2" in r.out.splitlines()[0], r


@needs_torch
def test_torchrun_any_rank_knows_all(hung_job):
    lists = []
    for rank in range(4):
        r = probing("query", "SELECT rank, pid, addr FROM cluster.nodes "
                    "WHERE role = 'rank' ORDER BY rank", "-f", "json",
                    target=hung_job.pids[rank])
        assert r.rc == 0, r
        lists.append(r.json())
    assert all(l == lists[0] for l in lists) and len(lists[0]) == 4, lists


@needs_torch
def test_torchrun_query(hung_job):
    r = probing("cluster", "query", "SELECT func FROM python.backtrace "
                "WHERE depth = 0 AND thread_name = 'MainThread'", "-f", "json",
                target=hung_job.pids[1])
    assert r.rc == 0, r
    rows = r.json()
    assert sorted(int(x["rank"]) for x in rows) == [0, 1, 2, 3]
    assert all(x["host"] == HOST for x in rows)
    funcs = {int(x["rank"]): x["func"] for x in rows}
    assert funcs[2] == "load_batch"
    assert funcs[0] == funcs[1] == funcs[3] == backward_top()


@needs_torch
def test_torchrun_query_merge(hung_job):
    r = probing("cluster", "query", "SELECT func FROM python.backtrace "
                "WHERE thread_name = 'MainThread'", "--merge",
                "SELECT func, count(*) AS n, group_concat(rank) AS ranks "
                "FROM result GROUP BY func ORDER BY func", "-f", "json",
                target=hung_job.pids[0])
    assert r.rc == 0, r
    rows = {x["func"]: x for x in r.json()}
    assert rows["load_batch"]["n"] == "1" and rows["load_batch"]["ranks"] == "2"
    assert rows["backward"]["n"] == "3"
    assert sorted(rows["backward"]["ranks"].split(",")) == ["0", "1", "3"]
    assert rows["train"]["n"] == "4"


@needs_torch
def test_torchrun_backtrace_names_the_odd_rank(hung_job):
    r = probing("cluster", "backtrace", target=hung_job.pids[0])
    assert r.rc == 0, r
    blocks = r.out.strip().split("\n\n")
    assert len(blocks) == 2, r.out
    assert blocks[0].startswith("rank 2 (1 of 4): load_batch"), r.out
    assert "load_batch (" in blocks[0] and "ddp_train.py" in blocks[0]
    assert blocks[1].startswith("ranks 0-1,3 (3 of 4): %s"
                                % backward_top()), r.out
    assert "Tensor.backward" in blocks[1]


@needs_torch
def test_torchrun_flamegraph(hung_job, tmp_path):
    svg = tmp_path / "job.svg"
    r = probing("cluster", "flamegraph", "1s", "--idle", "--per-rank",
                "-o", str(svg), target=hung_job.pids[0])
    assert r.rc == 0, r
    text = svg.read_text()
    assert text.startswith("<?xml") and "</svg>" in text
    assert "rank 2" in text and "load_batch" in text
    r = probing("cluster", "flamegraph", "1s", "--idle", "--per-rank",
                target=hung_job.pids[0])
    assert r.rc == 0, r
    stacks = [l.rsplit(" ", 1) for l in r.out.splitlines()]
    assert all(int(n) > 0 for _, n in stacks)
    assert {s.split(";")[0] for s, _ in stacks} == \
        {"rank 0", "rank 1", "rank 2", "rank 3"}
    assert any(s.startswith("rank 2;") and "load_batch" in s
               for s, _ in stacks)
    assert not any(s.startswith("rank 0;") and "load_batch" in s
                   for s, _ in stacks)


@needs_torch
def test_torchrun_flamegraph_formats(hung_job, tmp_path):
    """speedscope (per rank: a profile each; merged: one) and a Chrome
    trace (a process per rank), read by tests/profile's checkers."""
    pids = hung_job.pids
    out = tmp_path / "job.speedscope.json"
    r = probing("cluster", "flamegraph", "1s", "--idle", "--per-rank",
                "-o", str(out), target=pids[0])
    assert r.rc == 0, r
    doc = json.loads(out.read_text())
    assert [p["name"] for p in doc["profiles"]] == \
        ["rank 0", "rank 1", "rank 2", "rank 3"]
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert "rank 2" not in names  # a profile each, not a root frame
    hang = names.index("load_batch")
    for rank, prof in enumerate(doc["profiles"]):
        assert prof["type"] == "sampled" and prof["endValue"] > 0
        has = any(hang in stack for stack in prof["samples"])
        assert has == (rank == 2), (rank, has)
    read = formats.speedscope(str(out))
    if read is not None:
        assert read["importer"] == "Importing as speedscope json file", read
    # Merged, to stdout: one profile.
    r = probing("cluster", "flamegraph", "1s", "--idle", "--as",
                "speedscope", target=pids[1])
    assert r.rc == 0, r
    doc = json.loads(r.out)
    assert [p["name"] for p in doc["profiles"]] == ["all ranks"]
    assert "load_batch" in [f["name"] for f in doc["shared"]["frames"]]
    # Chrome: every rank a process, on one clock.
    out = tmp_path / "job.json"
    r = probing("cluster", "flamegraph", "1s", "--idle", "-o", str(out),
                target=pids[0])
    assert r.rc == 0, r
    # Said, as flamegraph -o says it.
    assert "probing: wrote %s (chrome, %d of %d ranks' traces)" % (
        out, len(pids), len(pids)) in r.err, r
    doc = json.loads(out.read_text())
    by_thread = formats.check_chrome(doc)
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(procs) == sorted(pids.values()), procs
    for rank, pid in pids.items():
        assert procs[pid] == "rank %d on %s" % (rank, HOST)
    order = {e["pid"]: e["args"]["sort_index"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_sort_index"}
    assert order == {pid: rank for rank, pid in pids.items()}
    hung = {pid for (pid, tid), evs in by_thread.items()
            if any(e["name"].startswith("load_batch ") for e in evs)}
    assert hung == {pids[2]}, hung
    # The recordings overlap in time: one clock for all.
    spans = [(min(e["ts"] for e in evs), max(e["ts"] + e["dur"] for e in evs))
             for evs in by_thread.values()]
    assert max(a for a, _ in spans) < min(b for _, b in spans), spans
    r = probing("cluster", "flamegraph", "1s", "-o", str(tmp_path / "x.png"),
                target=pids[0])
    assert r.rc == 2 and "cannot tell the format" in r.err, r


@needs_torch
def test_torchrun_rank_killed_mid_query(tmp_path):
    """A rank dies while the query runs: it is named, the rest answer."""
    job = Job(str(tmp_path), "--steps", "3", "--linger", "600")
    try:
        job.wait_ranks()
        wait_for(lambda: job.text().count("done, lingering") == 4, 120,
                 "the ranks to finish training")
        slow = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                "FROM c WHERE x < 3000000) SELECT count(*) AS n FROM c")
        cmd = subprocess.Popen(
            [os.path.join(os.environ.get("PROBING_BUILD",
                                         os.path.join(ROOT, "build")),
                          "cli", "probing"),
             "-t", str(job.pids[0]), "cluster", "query", slow, "-f", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        os.kill(job.pids[3], signal.SIGKILL)
        out, err = cmd.communicate(timeout=120)
        assert cmd.returncode == PARTIAL, (out, err)
        rows = json.loads(out)
        assert sorted(int(x["rank"]) for x in rows) == [0, 1, 2]
        assert all(x["n"] == "3000000" for x in rows)
        assert "rank 3 (127.0.0.1:" in err and "3 of 4 nodes answered" in err
        r = probing("cluster", "nodes", "-f", "json", target=job.pids[1])
        assert r.rc == 0, r
        status = {int(n["rank"]): n["status"] for n in r.json()}
        assert status == {0: "up", 1: "up", 2: "up", 3: "unreachable"}
    finally:
        job.stop()


# ---- without torch: nodes added by hand ------------------------------------

WORKER = """
import sys, time
def wait():
    while True:
        time.sleep(0.05)
def odd():
    wait()
print("ready", flush=True)
odd() if sys.argv[1] == "odd" else wait()
"""


@pytest.fixture
def nodes_of(tmp_path):
    """nodes_of(python, roles) -> [(Target-like, "127.0.0.1:PORT")]: one
    process per role ("wait" or "odd"), all running the same script (as
    the ranks of a job do), each agent listening on TCP."""
    procs = []
    script = tmp_path / "worker.py"
    script.write_text(WORKER)

    def start(python, roles):
        out = []
        for i, role in enumerate(roles):
            port = free_port()
            e = dict(os.environ, PROBING="2", PYTHONUSERBASE=USERBASE,
                     PROBING_LISTEN="127.0.0.1:%d" % port)
            if os.environ.get("PROBING_TARGET_PRELOAD"):
                log = str(tmp_path / "sanitizer")
                e["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
                e["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + \
                    ":log_path=" + log
                e["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "") + \
                    ":log_path=" + log
            p = subprocess.Popen([python, str(script), role],
                                 stdout=subprocess.PIPE, text=True, env=e,
                                 cwd=str(tmp_path))
            procs.append(p)
            assert p.stdout.readline().strip() == "ready"
            wait_for(lambda: agent_listening(p.pid), 30, "the agent")
            out.append((p, "127.0.0.1:%d" % port))
        return out

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)
    reports = list(tmp_path.glob("sanitizer*"))
    assert not reports, "sanitizer reports:\n" + "\n".join(
        r.read_text(errors="replace")[:4000] for r in reports)


def test_cluster_add_query_backtrace(nodes_of, python):
    nodes = nodes_of(python, ["wait", "wait", "odd", "wait"])
    head = nodes[0][0]
    r = probing("cluster", "add", *["%s=%d" % (a, i) for i, (_, a)
                                    in enumerate(nodes)], target=head.pid)
    assert r.rc == 0, r
    r = probing("cluster", "nodes", "-f", "json", target=head.pid)
    assert r.rc == 0, r
    assert [(int(n["rank"]), n["addr"], n["status"]) for n in r.json()] == \
        [(i, a, "up") for i, (_, a) in enumerate(nodes)]
    r = probing("cluster", "query", "SELECT value FROM probing.config "
                "WHERE name = 'agent.pid'", "-f", "json", target=head.pid)
    assert r.rc == 0, r
    assert {int(x["rank"]): int(x["value"]) for x in r.json()} == \
        {i: p.pid for i, (p, _) in enumerate(nodes)}
    r = probing("cluster", "backtrace", target=head.pid)
    assert r.rc == 0, r
    assert r.out.startswith("rank 2 (1 of 4): wait"), r.out
    assert "  #1  odd (" in r.out.split("\n\n")[0]
    assert "\n\nranks 0-1,3 (3 of 4): wait\n" in r.out
    # A bad SQL is the same error on every node: said once, as the SQL
    # error it is, not as nodes that did not answer.
    r = probing("cluster", "query", "SELECT * FROM memory_usage",
                target=head.pid)
    assert r.rc == 7, r
    assert r.err.count("no such table: memory_usage") == 1, r
    assert "query failed on all 4 nodes" in r.err and "process.memory" in r.err, r
    assert "nodes answered" not in r.err, r


def test_cluster_dead_node_reported(nodes_of, python):
    nodes = nodes_of(python, ["wait", "wait", "wait"])
    head = nodes[0][0]
    r = probing("cluster", "add", *[a for _, a in nodes], target=head.pid)
    assert r.rc == 0, r
    nodes[1][0].kill()
    nodes[1][0].wait()
    r = probing("cluster", "query", "SELECT 1 AS one", "-f", "json",
                target=head.pid)
    assert r.rc == PARTIAL, r
    assert sorted(int(x["rank"]) for x in r.json()) == [0, 2]
    assert "rank 1 (%s): connection refused" % nodes[1][1] in r.err
    assert "2 of 3 nodes answered; the result is partial" in r.err
    r = probing("cluster", "nodes", "-f", "json", target=head.pid)
    assert [n["status"] for n in r.json()] == ["up", "unreachable", "up"]
    r = probing("cluster", "backtrace", target=head.pid)
    assert r.rc == PARTIAL and r.out.startswith("ranks 0,2 (2 of 2): wait"), r


def test_cluster_node_files(nodes_of, spawn, python, tmp_path):
    nodes = nodes_of(python, ["wait", "odd"])
    path = tmp_path / "nodes"
    path.write_text("# two ranks\n%s 7\n\n%s\n" % (nodes[0][1], nodes[1][1]))
    # The CLI reads it: no agent asked for the list.
    r = probing("cluster", "--nodes", str(path), "query",
                "SELECT count(*) AS n FROM python.threads", "--merge",
                "SELECT group_concat(rank) AS ranks FROM result", "-f", "json")
    assert r.rc == 0, r
    assert r.json() == [{"ranks": "7,8"}]
    # An agent reads it at start.
    t = spawn(python, "import time\nwhile True: time.sleep(1)\n",
              env={"PROBING_NODES": str(path)})
    t.wait_agent()
    r = probing("query", "SELECT rank, addr FROM cluster.nodes ORDER BY rank",
                "-f", "json", target=t.pid)
    assert r.json() == [{"rank": 7, "addr": nodes[0][1]},
                        {"rank": 8, "addr": nodes[1][1]}]


def test_cluster_errors(nodes_of, python, tmp_path):
    nodes = nodes_of(python, ["wait"])
    head = nodes[0][0]
    r = probing("cluster", "nodes", target=head.pid)
    assert r.rc == 0 and r.out.strip() == \
        "rank\trole\tlocal_rank\thost\tpid\taddr\tstatus\tlast_seen", r
    r = probing("cluster", "query", "SELECT 1", target=head.pid)
    assert r.rc == 1 and "knows no nodes" in r.err and "cluster add" in r.err
    r = probing("cluster", "add", "not-an-address", target=head.pid)
    assert r.rc == 1, r
    r = probing("cluster", "add", nodes[0][1], target=head.pid)
    assert r.rc == 0, r
    r = probing("cluster", "query", "SELEC nonsense", target=head.pid)
    assert r.rc == 7 and "syntax error" in r.err, r
    r = probing("cluster", "query", "SELECT 1 AS x", "--merge", "SELEC",
                target=head.pid)
    assert r.rc == 7 and "--merge" in r.err, r
    r = probing("cluster", "frobnicate", target=head.pid)
    assert r.rc == 2, r
    bad = tmp_path / "bad"
    bad.write_text("127.0.0.1:1 2 3\n")
    r = probing("cluster", "--nodes", str(bad), "backtrace")
    assert r.rc == 2 and "bad:1" in r.err, r


FAMILY = """
import os, subprocess, sys, time
# Every process of the family ends when the first one (the test's target)
# is gone: none outlives the test.
top = int(os.environ.setdefault("FAMILY_TOP", str(os.getpid())))
def idle():
    while True:
        time.sleep(0.05)
        try:
            os.kill(top, 0)
        except ProcessLookupError:
            os._exit(0)
how = sys.argv[1]
if how == "leaf":
    idle()
if how == "fork":        # a DataLoader worker (fork)
    kid = os.fork()
    if kid == 0:
        idle()
elif how == "exec":      # a worker started with the same Python (spawn)
    kid = subprocess.Popen([sys.executable, __file__, "leaf"]).pid
elif how == "shell":     # a launcher, the job's environment given to a
    job = dict(os.environ, **dict(a.split("=") for a in sys.argv[2:]))
    kid = subprocess.Popen(  # shell script that runs Python (no exec)
        ["/bin/sh", "-c", '"$0" "$1" fork; :', sys.executable, __file__],
        env=job).pid
elif how == "init":      # a rank that set its job environment itself,
    import signal        # then started the agent, then forked (when
    os.environ.update(a.split("=") for a in sys.argv[2:])  # told to)
    import probing
    probing.init()
    signal.signal(signal.SIGUSR1, lambda *_: None)
    print("ready", flush=True)
    signal.pause()
    kid = os.fork()
    if kid == 0:
        idle()
os.write(1, b"proc %d kid %d\\n" % (os.getpid(), kid))  # one write: two
idle()                                              # Pythons print here
"""


def job_env():
    return {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}


def family(spawn, python, how, env=None, args=(), procs=1):
    """Starts FAMILY: its pid, and {pid: kid} of the Pythons that
    printed theirs."""
    t = spawn(python, FAMILY, agent=None, env=env, args=(how, *args))
    if how == "init":
        t.wait_line("ready", 60)
        rank_status_is(t.pid, "rank 1: waiting for the process to import torch")
        os.kill(t.pid, signal.SIGUSR1)
    def printed():
        return t.output().count("proc ") >= procs
    wait_for(printed, 60, "the processes to start")
    kids = {}
    for line in t.output().splitlines():
        if line.startswith("proc "):
            _, pid, _, kid = line.split()
            kids[int(pid)] = int(kid)
    return t.pid, kids


def cluster_status(pid):
    """The agent of pid (injected if need be): its cluster.status."""
    last = {}

    def injected():
        # A child exec'd a moment ago may not have initialized Python yet
        # (exit code 9, "try again in a moment").
        last["r"] = r = probing("inject", target=pid)
        assert r.rc in (0, 9), r
        return r.rc == 0
    wait_for(injected, 30, lambda: "inject: %r" % last["r"])
    r = probing("config", "-f", "json", target=pid)
    assert r.rc == 0, r
    return {s["name"]: s["value"] for s in r.json()}["cluster.status"]


def rank_status_is(pid, prefix):
    """A rank's registration thread says where it is at its first look
    (before it: "registering in the store at ...")."""
    wait_for(lambda: cluster_status(pid).startswith(prefix), 10,
             "cluster.status to start with %r" % prefix)


def test_cluster_child_of_a_rank_is_not_the_rank(spawn, python):
    """A DataLoader worker (forked, or the same Python started again)
    inherits RANK and the rest, but is never registered as the rank: it
    would replace the rank in the store, and `cluster backtrace` would
    show the worker instead of the rank."""
    rank_says = "rank 1: waiting for the process to import torch"
    for how in ("fork", "exec"):
        rank, kids = family(spawn, python, how, env=job_env())
        kid = kids[rank]
        assert cluster_status(kid) == (
            "a child of rank 1 (pid %d), not the rank: not registered "
            "(the rank's own agent answers for it)" % rank)
        rank_status_is(rank, rank_says)
    # A launcher gives the job's environment to a shell script, which
    # starts Python: that Python is the rank (its parent is no Python of
    # the job), and its forked worker is its child.
    job = job_env()
    launcher, kids = family(spawn, python, "shell", procs=2,
                            args=["%s=%s" % kv for kv in job.items()])
    rank, = [p for p in kids if p != launcher]
    rank_status_is(rank, rank_says)
    assert cluster_status(kids[rank]).startswith(
        "a child of rank 1 (pid %d), not the rank" % rank)
    if SANITIZED_TARGETS:
        return  # a forked child's agent: not under libasan (conftest.py)
    # A rank that put RANK into os.environ itself (its starting
    # environment has none) and had the agent when it forked: the child
    # knows from the fork.  Its agent is the parent's library, restarted
    # by `probing inject`, not a second copy.
    rank, kids = family(spawn, python, "init",
                        args=["%s=%s" % kv for kv in job_env().items()])
    assert cluster_status(kids[rank]).startswith(
        "a child of rank 1 (pid %d), not the rank" % rank)
    with open("/proc/%d/maps" % kids[rank]) as f:
        agents = {l.split()[-1] for l in f if "libprobing" in l}
    assert len(agents) == 1, agents


LAUNCHER = """\
import os, subprocess, sys, time
# A launcher as a scheduler starts it (torchrun --node_rank=$RANK): a RANK
# of its own (its node's), and ranks 2 and 3 of the job as its children,
# each of which starts a child of its own (a DataLoader worker's place).
# Each ends when its parent does (nothing left behind for other tests).
LIVE = "import os, time\\np = os.getppid()\\nwhile os.getppid() == p: time.sleep(0.2)\\n"
RANK_CODE = (
    "import os, subprocess, sys, time\\n"
    "subprocess.Popen([sys.executable, '-c', %r])\\n"
    # one write: the two ranks share the launcher's stdout, unbuffered
    "os.write(1, ('rank %%s %%d\\\\n' %% (os.environ['RANK'], os.getpid()))"
    ".encode())\\n" % LIVE
    + LIVE)
kids = [subprocess.Popen([sys.executable, "-c", RANK_CODE],
                         env=dict(os.environ, RANK=str(r),
                                  LOCAL_RANK=str(r - 2), WORLD_SIZE="4"))
        for r in (2, 3)]
print("READY", flush=True)
time.sleep(600)
"""


def test_launcher_with_a_rank_of_its_own(spawn, python):
    """A launcher with RANK in its environment (a scheduler's node rank)
    is still the launcher of its children's ranks, and what a rank starts
    (the same RANK) is the rank's child (review: it was called rank 1 and
    its ranks its children).  PROBING=2: every process has an agent."""
    t = spawn(python, LAUNCHER, agent=None,
              env={"PROBING": "2", "RANK": "1", "WORLD_SIZE": "2"})
    t.wait_line("READY")
    def ranks():
        return {int(l.split()[1]): int(l.split()[2])
                for l in t.output().splitlines()
                if re.match(r"rank \d+ \d+$", l)}
    wait_for(lambda: len(ranks()) == 2, 60, lambda: "the two ranks: %r"
             % t.output())
    ranks = ranks()

    def listed():
        r = probing("list", "-f", "json")
        return {int(x["pid"]): x["job"] for x in r.json()} \
            if r.rc == 0 else {}
    def kids_in(jobs):
        # (what other tests left: the hung job's, not ours)
        return [p for p, j in jobs.items() if j.startswith("child of rank") and
                any(j.endswith("(parent %d)" % q) for q in ranks.values())]
    # Each rank's child starts after its rank: listed a moment later.
    wait_for(lambda: all(p in listed() for p in [t.pid, *ranks.values()]) and
             len(kids_in(listed())) >= 2, 60, lambda: "every agent listed: %r"
             % listed())
    jobs = listed()
    assert jobs[t.pid] == "torchrun of ranks 2-3", jobs
    for r, pid in ranks.items():
        assert jobs[pid] == "rank %d of 4 (parent %d)" % (r, t.pid), jobs
    kids = kids_in(jobs)
    assert len(kids) == 2 and all(
        jobs[k] in ("child of rank 2 (parent %d)" % ranks[2],
                    "child of rank 3 (parent %d)" % ranks[3])
        for k in kids), jobs
