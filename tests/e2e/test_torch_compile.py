"""torch.compile with module tracing (issue 28), on the system Python's
torch where it has torch.compile (2.x; torch 1.13 has none: skipped with
that reason).  The backend is "eager": dynamo captures the graphs as
inductor would, without a C++ compiler's minutes.

- With tracing on, compiling worked no more: `torch._dynamo.optimize is
  called on a non function object` (Module.__call__ was a C descriptor
  without __code__); the program died.
- A traced compiled model showed one row named `OptimizedModule`: the
  user's class, marked compiled, is its name now, and the modules that
  run inside the graph, with no rows of their own, are said to be so by
  that mark (docs/torch.md, torch.compile).
"""
import json

import pytest

from conftest import SYSTEM_PYTHON, probing, wait_for
from test_cluster import needs_torch

PROGRAM = """
import json, os, time, torch
from torch import nn
torch.manual_seed(0)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
    def forward(self, x):
        return torch.relu(self.lin(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Block()
        self.head = nn.Linear(16, 1)
    def forward(self, x):
        return self.head(self.encoder(x))

def hooked():
    return type(nn.Module.__dict__["__call__"]).__name__ == "ModuleCall"

while not hooked():
    time.sleep(0.01)
net = Net()
compiled = torch.compile(net, backend="eager")
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 1)
losses = []
for step in range(6):
    opt.zero_grad()
    loss = nn.functional.mse_loss(compiled(x), y)
    loss.backward()
    opt.step()
    losses.append(float(loss).hex())
print("LOSSES", json.dumps(losses), flush=True)
while True:
    time.sleep(0.05)
"""

REFERENCE = PROGRAM.replace("while not hooked():\n    time.sleep(0.01)\n", "")


def has_compile():
    import subprocess
    cp = subprocess.run([SYSTEM_PYTHON, "-c", "import torch; "
                         "print(hasattr(torch, 'compile'))"],
                        capture_output=True, text=True, timeout=120)
    return cp.stdout.strip() == "True"


def losses(t):
    t.wait_line("LOSSES", timeout=300)
    line = [l for l in t.output().splitlines() if l.startswith("LOSSES ")]
    return json.loads(line[0][7:])


@needs_torch
def test_compiled_model_traced_under_its_own_name(spawn):
    if not has_compile():
        pytest.skip("this torch has no torch.compile (torch 1.x)")
    ref = spawn(SYSTEM_PYTHON, REFERENCE, agent=None)
    t = spawn(SYSTEM_PYTHON, PROGRAM,
              env={"PROBING_TORCH_PROFILING": "on,step_rate=1"})
    got = losses(t)
    # It compiles and runs, and computes what it computes without us.
    assert got == losses(ref), (got, t.output()[-3000:])

    def modules():
        r = probing("query", "-f", "json", "SELECT DISTINCT module, stage "
                    "FROM python.torch_trace", target=t.pid)
        assert r.rc == 0, r
        return {(m["module"], m["stage"]) for m in r.json()}
    wait_for(lambda: ("Net [compiled]", "forward") in modules(), 30,
             lambda: "a row of the compiled Net: %s" % sorted(modules()))
    names = {m for m, _ in modules()}
    assert not any("OptimizedModule" in n or "_orig_mod" in n
                   for n in names), names


DEBUGGEE = """
import os, time, torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x):
        y = self.lin(x)          # @compiled
        return torch.relu(y)

def eager_step(x):
    return x * 2                 # @eager

net = Net()
compiled = torch.compile(net, backend="eager")
x = torch.randn(2, 4)
compiled(x)
print("COMPILED", flush=True)
while True:
    compiled(x)
    eager_step(x)
    if os.path.exists("eager"):
        net(x)                   # the same forward, run as Python
    time.sleep(0.01)
"""


def line_of(marker):
    lines = DEBUGGEE.splitlines()
    return [i + 1 for i, l in enumerate(lines) if l.endswith(marker)][0]


@needs_torch
def test_breakpoint_in_compiled_code_says_why(spawn, tmp_path):
    """A breakpoint in a forward that runs compiled was reported verified
    and never stopped: verified false now, with why and what to do; it
    still stops where the same code runs as Python."""
    if not has_compile():
        pytest.skip("this torch has no torch.compile (torch 1.x)")
    from test_debug import Bridge
    t = spawn(SYSTEM_PYTHON, DEBUGGEE)
    t.wait_agent(timeout=60)
    t.wait_line("COMPILED", timeout=300)
    d = Bridge.attached(t.pid)
    try:
        d.event("initialized")
        r = d.request("setBreakpoints", {
            "source": {"path": t.script},
            "breakpoints": [{"line": line_of("# @compiled")},
                            {"line": line_of("# @eager")}]})
        compiled, eager = r["body"]["breakpoints"]
        assert compiled["verified"] is False, compiled
        assert "torch.compile" in compiled["message"], compiled
        assert "Net.forward" in compiled["message"], compiled
        assert "TORCHDYNAMO_DISABLE" in compiled["message"], compiled
        assert eager["verified"] is True, eager
        d.request("configurationDone")
        ev = d.event("stopped")
        st = d.request("stackTrace", {"threadId": ev["body"]["threadId"]})
        top = st["body"]["stackFrames"][0]
        assert top["line"] == line_of("# @eager"), top
        # Only the eager breakpoint stops while the model runs compiled.
        d.request("setBreakpoints", {
            "source": {"path": t.script},
            "breakpoints": [{"line": line_of("# @compiled")}]})
        (tmp_path / "eager").write_text("")
        d.request("continue", {"threadId": ev["body"]["threadId"]})
        ev = d.event("stopped")
        st = d.request("stackTrace", {"threadId": ev["body"]["threadId"]})
        top = st["body"]["stackFrames"][0]
        # Net.forward run as Python (net(x), not compiled): a real stop.
        assert top["line"] == line_of("# @compiled"), top
        assert top["name"].endswith("forward"), top
        d.request("disconnect", {})
    finally:
        d.close()
    assert t.alive()
