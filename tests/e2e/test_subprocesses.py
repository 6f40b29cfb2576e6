"""flamegraph --subprocesses (issue 31): the target and its Python
children (a multiprocessing pool, forked as DataLoader workers are)
recorded at once, each sample under a frame naming its process; forked
children get an agent with --inject (theirs stopped at the fork), those
left out are named; what it refuses, said."""
import os

from conftest import probing
from test_profile import formats

POOL = """\
import multiprocessing as mp, os, time

def child_work(n):
    while True:
        sum(range(1000))

def parent_work():
    while True:
        sum(range(1000))

if __name__ == "__main__":
    mp.set_start_method("fork")
    pool = mp.Pool(2)
    pool.map_async(child_work, range(2))
    print("READY", flush=True)
    parent_work()
"""


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return sorted(int(x) for x in f.read().split())


def by_process(path):
    """{root frame: {leaf functions}} of a folded file."""
    out = {}
    for frames, n in formats.parse_folded(path.read_text()):
        out.setdefault(frames[0], set()).add(frames[-1].split(" (")[0])
    return out


def test_children_forked_get_an_agent_with_inject(spawn, python, tmp_path):
    t = spawn(python, POOL)
    t.wait_line("READY")
    t.wait_agent()
    kids = children(t.pid)
    assert len(kids) == 2, kids
    # Without --inject: the forked workers have no agent (it stopped at
    # the fork), named on stderr; the target's own samples only.
    out = tmp_path / "alone.folded"
    r = probing("flamegraph", "--subprocesses", "-d", "1s", "-o", str(out),
                target=t.pid)
    assert r.rc == 0, r
    assert "2 Python child processes without an agent left out (%d, %d): " \
        "--inject gives them one" % tuple(kids) in r.err, r
    roots = by_process(out)
    assert list(roots) == ["process %d (%s)" % (t.pid, comm(t.pid))], roots
    # With it: every process, each under its own frame, doing its work.
    out = tmp_path / "all.folded"
    r = probing("flamegraph", "--subprocesses", "--inject", "-d", "1500ms",
                "-o", str(out), target=t.pid)
    assert r.rc == 0, r
    assert "left out" not in r.err, r
    roots = by_process(out)
    assert set(roots) == {"process %d (%s)" % (p, comm(p))
                          for p in [t.pid] + kids}, roots
    assert "parent_work" in roots["process %d (%s)" % (t.pid, comm(t.pid))]
    for k in kids:
        assert "child_work" in roots["process %d (%s)" % (k, comm(k))], roots
    # The table: the merged hottest functions of all three.
    r = probing("flamegraph", "--subprocesses", "-d", "1s", "-f", "json",
                target=t.pid)
    assert r.rc == 0, r
    top = {row["function"]: float(row["self%"]) for row in r.json()}
    assert top.get("child_work", 0) > top.get("parent_work", 0) > 10, top


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def test_refusals(spawn, python):
    r = probing("flamegraph", "--inject", "-d", "1s", target="1")
    assert r.rc == 2 and "--inject goes with --subprocesses" in r.err, r
    r = probing("flamegraph", "--subprocesses", "-d", "1s", target="127.0.0.1:1")
    assert r.rc == 2 and "--subprocesses needs a pid on this machine" in r.err, r
    r = probing("flamegraph", "--subprocesses", "--native", "-d", "1s", target="1")
    assert r.rc == 2 and "not with --recorded, --native" in r.err, r
    t = spawn(python, "import time\nprint('READY', flush=True)\ntime.sleep(60)\n",
              agent=None)
    t.wait_line("READY")
    r = probing("flamegraph", "--subprocesses", "-d", "1s", target=t.pid)
    assert r.rc == 4 and "process %d has no agent" % t.pid in r.err, r


def test_top_of_the_process_and_its_children(spawn, python):
    """top --subprocesses: the children's samples added in, a row per
    process; forked children given an agent with --inject."""
    t = spawn(python, POOL)
    t.wait_line("READY")
    t.wait_agent()
    kids = children(t.pid)
    r = probing("top", "--subprocesses", "--inject", "--once", "-d", "1500ms",
                "-f", "json", target=t.pid)
    assert r.rc == 0, r
    rows = {row["function"]: row for row in r.json()}
    procs = {f: float(row["%total"]) for f, row in rows.items()
             if f.startswith("process ")}
    assert set(procs) == {"process %d" % p for p in [t.pid] + kids}, rows
    assert abs(sum(procs.values()) - 100) < 0.5, procs
    # Three busy processes: a third each, within a loaded machine's spread.
    assert all(10 < v < 60 for v in procs.values()), procs
    assert float(rows["child_work"]["%own"]) > float(rows["parent_work"]["%own"]) > 10, rows
    # Plain mode (not a terminal): a table per interval, the same rows.
    r = probing("top", "--subprocesses", "-i", "500ms", "-d", "1200ms",
                "-f", "csv", target=t.pid)
    assert r.rc == 0 and r.out.count("# ") >= 2 and "child_work" in r.out, r
    r = probing("top", "--inject", "--once", target=t.pid)
    assert r.rc == 2 and "--inject goes with --subprocesses" in r.err, r
