"""Tensors that hold no memory are not counted as memory (issue 28): a
process using torch.compile makes FakeTensors by the thousand (shapes on
a device, no data); with meta tensors and subclasses that wrap others
they made `probing memory` show 395 MiB against ~3 MB real.  Here a meta
tensor and a FakeTensor of 400 MB each beside a real 4 MB one, on the
system Python's torch (1.13 or 2.x)."""
import pytest

from conftest import SYSTEM_PYTHON, probing
from test_cluster import needs_torch

PROGRAM = """
import time, torch
try:
    from torch._subclasses.fake_tensor import FakeTensorMode
except ImportError:        # a torch without it: the meta tensor only
    FakeTensorMode = None
real = torch.ones(1024, 1024)                          # 4 MiB
meta = torch.empty(10240, 10240, device="meta")        # 400 MiB, no data
fake = None
if FakeTensorMode is not None:
    with FakeTensorMode():
        fake = torch.empty(10240, 10240)               # 400 MiB, no data
print("ready", type(fake).__name__, flush=True)
while True:
    time.sleep(0.05)
"""


@needs_torch
def test_meta_and_fake_tensors_are_not_memory(spawn):
    t = spawn(SYSTEM_PYTHON, PROGRAM)
    t.wait_agent(timeout=60)
    t.wait_line("ready", timeout=60)
    r = probing("memory", "-f", "json", target=t.pid, timeout=120)
    assert r.rc == 0, r
    kinds = r.json()["torch"]["tensors"]
    total = sum(k["bytes"] for k in kinds)
    # The real tensor, and nothing of the 800 MB that is not there.
    assert 4 << 20 <= total < 8 << 20, kinds
    assert "meta" not in {k["device"] for k in kinds}, kinds
    r = probing("query", "-f", "json", "SELECT device, bytes, shape FROM "
                "python.tensors WHERE shape = '[10240, 10240]'", target=t.pid)
    assert r.rc == 0, r
    rows = r.json()
    want = 2 if "FakeTensor" in t.output() else 1
    assert len(rows) == want and all(x["bytes"] == 0 for x in rows), rows
