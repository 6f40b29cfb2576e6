"""python.comm_collective's shape of a list of tensors (issue 28): a
coalesced all_reduce of shapes [3] and [2] was shown as `2 x [3]` (the
count and the first shape).  Tensors alike keep the short form; others
are each shown, cut with "..." where the column ends.  One process
(gloo, world size 1) of the system Python's torch."""
import textwrap

from conftest import SYSTEM_PYTHON, probing, wait_for
from test_cluster import needs_torch

PROGRAM = textwrap.dedent("""
    import os, sys, tempfile, time, warnings
    import torch, torch.distributed as dist
    warnings.simplefilter("ignore")
    for _ in range(400):
        if type(dist.isend).__name__ == "CommWrapper":  # all_reduce: a shim on torch 2.x
            break
        time.sleep(0.05)
    else:
        sys.exit("the wrappers never came")
    f = tempfile.NamedTemporaryFile(delete=False).name
    dist.init_process_group("gloo", init_method="file://" + f, rank=0,
                            world_size=1)
    dist.all_reduce_coalesced([torch.ones(3), torch.ones(2)])
    dist.all_reduce_coalesced([torch.ones(4, 2), torch.ones(4, 2)])
    dist.all_reduce_coalesced([torch.ones(1000 + i) for i in range(20)])
    print("DONE", flush=True)
    while True:
        time.sleep(0.05)
""")


@needs_torch
def test_coalesced_calls_show_each_shape(spawn):
    t = spawn(SYSTEM_PYTHON, PROGRAM)
    t.wait_line("DONE", timeout=120)
    t.wait_agent()

    def rows():
        r = probing("query", "-f", "json", "SELECT shape, bytes FROM "
                    "python.comm_collective WHERE op = "
                    "'all_reduce_coalesced' ORDER BY id", target=t.pid)
        assert r.rc == 0, r
        return r.json()
    wait_for(lambda: len(rows()) == 3, 30, lambda: "3 rows: %s" % rows())
    got = rows()
    assert got[0] == {"shape": "[3], [2]", "bytes": 20}, got
    assert got[1] == {"shape": "2 x [4, 2]", "bytes": 64}, got
    long = got[2]["shape"]
    assert long.startswith("[1000], [1001], ") and long.endswith(", ..."), got
    assert len(long) < 48, long
    assert got[2]["bytes"] == 4 * sum(1000 + i for i in range(20)), got
