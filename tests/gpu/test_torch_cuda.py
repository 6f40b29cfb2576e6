"""Torch module tracing on CUDA (issue 34): python.torch_trace's GPU time
(duration the GPU's, cpu_duration the CPU's, clock), the CUDA memory
figures of a row against torch's own, a training step that the tracing
never synchronizes, and torch.compile (eager and inductor backends) with
tracing on from the start, switched on after compiling, and off.

Every test prints what it saw (the device run's log is the record) and
lists all its failed checks at the end, not only the first.
"""
import json
import time

import pytest

from conftest import probing

# The GPU-time program: a model whose Spin module is dominated by GPU work
# (torch.cuda._sleep, a spin kernel of CYCLES clock cycles), a Head on
# CUDA and a CPU-only module in the same process.  Each step also reads
# torch's memory figures right after the model's forward returns (the
# root's row reads them when its call ends: nothing allocates between),
# and the step NOSYNC_STEP queues a long spin (LONG cycles) first and
# measures how long the CPU side of the step takes and whether the GPU
# is still busy when it returns.  REF and REF_LONG: the same spins timed
# with torch's own CUDA events.
GPU_TIME = """
import json, os, time, torch
from torch import nn
torch.manual_seed(0)
CYCLES = 20 * 10**6
LONG = 20 * CYCLES
STEPS, NOSYNC_STEP = 8, 5

def timed_spin(cycles):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    torch.cuda._sleep(cycles)
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / 1e3

class Spin(nn.Module):
    def forward(self, x):
        torch.cuda._sleep(CYCLES)
        return x * 2

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.spin = Spin()
        self.head = nn.Linear(512, 512)
    def forward(self, x):
        return self.head(self.spin(x))

class CpuOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 64)
    def forward(self, x):
        return self.lin(x)

def hooked():
    return type(nn.Module.__dict__["__call__"]).__name__ == "ModuleCall"

net = Net().cuda()
cpu_mod = CpuOnly()
opt = torch.optim.SGD(net.parameters(), lr=1e-3)
x = torch.randn(256, 512, device="cuda")
y = torch.randn(256, 512, device="cuda")
xc = torch.randn(8, 64)
timed_spin(CYCLES)  # warm-up
ref, ref_long = timed_spin(CYCLES), timed_spin(LONG)
print("REF", json.dumps({"spin": ref, "long": ref_long}), flush=True)
while not hooked():
    time.sleep(0.01)
for step in range(STEPS):
    if step == NOSYNC_STEP:
        torch.cuda._sleep(LONG)
    t0 = time.perf_counter()
    opt.zero_grad()
    out = net(x)
    mem = {"allocated": torch.cuda.memory_allocated(),
           "max_allocated": torch.cuda.max_memory_allocated(),
           "cached": torch.cuda.memory_reserved(),
           "max_cached": torch.cuda.max_memory_reserved()}
    loss = nn.functional.mse_loss(out, y)
    loss.backward()
    cpu_mod(xc).sum().backward()
    opt.step()
    cpu_s = time.perf_counter() - t0
    busy = not torch.cuda.current_stream().query()
    print("STEP", json.dumps({"step": step, "cpu_s": cpu_s, "gpu_busy": busy,
                              "mem": mem, "loss": loss.item()}), flush=True)
# More steps: a step's GPU-timed rows leave the pending list when a later
# step begins after the GPU ran them.
for step in range(STEPS, STEPS + 4):
    opt.zero_grad()
    nn.functional.mse_loss(net(x), y).backward()
    opt.step()
    torch.cuda.synchronize()
print("DONE", flush=True)
while True:
    time.sleep(0.1)
"""


def query(t, sql):
    r = probing("query", "-f", "json", sql, target=t.pid)
    assert r.rc == 0, r
    return r.json()


def settled(t, sql, timeout=30):
    """sql's rows once they stop changing (the recorder drains every
    100 ms)."""
    last = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = query(t, sql)
        if rows and rows == last:
            return rows
        last = rows
        time.sleep(0.5)
    return last or []


def lines(t, tag):
    return [json.loads(l[len(tag) + 1:]) for l in t.output().splitlines()
            if l.startswith(tag + " ")]


class Checks:
    """Collects failed checks; each is printed as it is made."""

    def __init__(self):
        self.failed = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failed.append(what)

    def done(self):
        assert not self.failed, "failed checks:\n" + "\n".join(self.failed)


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    """The GPU-time program, traced from the start (every step), run to
    its end; shared by the tests below (each checks its own part)."""
    import conftest
    import os
    import subprocess
    import textwrap
    d = tmp_path_factory.mktemp("gpu_time")
    script = d / "target.py"
    script.write_text(textwrap.dedent(GPU_TIME))
    e = dict(os.environ, PROBING="1", PYTHONUNBUFFERED="1",
             PROBING_TORCH_PROFILING="on,step_rate=1")
    out = d / "target.out"
    proc = subprocess.Popen([conftest.GPU_PYTHON, str(script)],
                            stdout=open(out, "w"), stderr=subprocess.STDOUT,
                            env=e, cwd=str(d))
    proc.args_out = str(out)
    t = conftest.Target(proc, str(script))
    try:
        t.wait_line("DONE", timeout=240)
        t.wait_agent()
        rows = settled(t, "SELECT step, seq, module, stage, duration, "
                          "cpu_duration, clock, allocated, max_allocated, "
                          "cached, max_cached FROM python.torch_trace "
                          "ORDER BY step, seq")
        status = query(t, "SELECT value FROM probing.config "
                          "WHERE name = 'torch.status'")[0]["value"]
        print("torch.status:", status)
        yield t, rows, status
    finally:
        t.stop()


def test_gpu_time_of_a_cuda_module(gpu_run):
    t, rows, status = gpu_run
    ref = lines(t, "REF")[0]
    print("torch's events: spin %.4f s, long spin %.4f s" % (ref["spin"], ref["long"]))
    c = Checks()
    by = {}
    for r in rows:
        by.setdefault((r["module"], r["stage"]), []).append(r)
    print("modules:", sorted(by))
    spins = [r for r in by.get(("spin", "forward"), []) if 2 <= r["step"] < 8]
    for r in spins:
        print("spin forward step %d: duration %.5f s, cpu_duration %.6f s, "
              "clock %s" % (r["step"], r["duration"], r["cpu_duration"], r["clock"]))
    c(len(spins) == 6, "spin has a forward row in each of steps 2-7: %d" % len(spins))
    for r in spins:
        c(r["clock"] == "cuda", "step %d: spin's clock is cuda: %s" % (r["step"], r["clock"]))
        c(0.5 * ref["spin"] < r["duration"] < 2.0 * ref["spin"],
          "step %d: spin's duration %.5f within 0.5-2x torch's %.5f"
          % (r["step"], r["duration"], ref["spin"]))
        c(r["duration"] > 5 * r["cpu_duration"],
          "step %d: GPU duration %.5f > 5x the CPU's %.6f"
          % (r["step"], r["duration"], r["cpu_duration"]))
    nets = [r for r in by.get(("Net", "forward"), []) if 2 <= r["step"] < 8]
    c(nets and all(r["clock"] == "cuda" and r["duration"] >= 0.5 * ref["spin"]
                   for r in nets),
      "Net's forward rows are GPU-timed and enclose the spin: %s"
      % [(r["clock"], round(r["duration"], 5)) for r in nets])
    cpu = by.get(("CpuOnly", "forward"), []) + by.get(("lin", "forward"), [])
    c(cpu and all(r["clock"] == "cpu" and r["duration"] == r["cpu_duration"]
                  for r in cpu),
      "the CPU-only module keeps the CPU's clock: %s"
      % sorted({r["clock"] for r in cpu}))
    bwd = [r for r in rows if r["stage"] != "forward"]
    c(bwd and all(r["clock"] == "cpu" for r in bwd),
      "backward and step rows are CPU time: %s" % sorted({r["clock"] for r in bwd}))
    c(" 0 GPU times lost" in status, "no GPU time lost: " + status)
    c.done()


def test_memory_figures_match_torch(gpu_run):
    t, rows, status = gpu_run
    c = Checks()
    mine = {r["step"]: r for r in rows
            if r["module"] == "Net" and r["stage"] == "forward"}
    for s in lines(t, "STEP"):
        r = mine.get(s["step"])
        if r is None:
            c(False, "step %d: no Net forward row" % s["step"])
            continue
        for k in ("allocated", "max_allocated", "cached", "max_cached"):
            theirs = s["mem"][k] / 2**20
            c(abs(r[k] - theirs) <= 1.0,
              "step %d %s: row %.2f MB, torch %.2f MB" % (s["step"], k, r[k], theirs))
    c.done()


def test_tracing_never_synchronizes_the_step(gpu_run):
    t, rows, status = gpu_run
    ref = lines(t, "REF")[0]
    steps = {s["step"]: s for s in lines(t, "STEP")}
    s = steps[5]
    print("step 5: CPU side %.4f s, GPU still busy when it returned: %s; "
          "the queued spin takes %.4f s on the GPU"
          % (s["cpu_s"], s["gpu_busy"], ref["long"]))
    c = Checks()
    c(s["gpu_busy"], "the GPU was still busy when the traced step returned")
    c(s["cpu_s"] < 0.5 * ref["long"],
      "the step's CPU side (%.4f s) took less than half the queued GPU work "
      "(%.4f s)" % (s["cpu_s"], ref["long"]))
    c.done()


# torch.compile of a user module, one backend: the losses of STEPS steps
# from the same start (bit for bit, as float.hex), the graph breaks
# dynamo counted, whether the agent's wrapper was installed.  PHASES
# says what to run: "on" (tracing on from the start: waits for the
# wrapper first), or "off,on-after,off-again" (compiled and run with
# tracing off, then waits for the test to switch it on, runs again on
# the same compiled module, then off again).
COMPILE = """
import json, os, sys, time, traceback, torch
from torch import nn
BACKEND = os.environ["BACKEND"]
PHASES = os.environ["PHASES"].split(",")
STEPS = 3

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(256, 512)
        self.fc2 = nn.Linear(512, 256)
    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(256, 16)
    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)

def hooked():
    return type(nn.Module.__dict__["__call__"]).__name__ == "ModuleCall"

def graph_breaks():
    try:
        from torch._dynamo.utils import counters
        return sum(counters["graph_break"].values())
    except Exception:
        return -1

def wait(on):
    while hooked() != on:
        time.sleep(0.01)

if PHASES[0] == "on":
    wait(True)
g = torch.Generator().manual_seed(1)
x = torch.randn(64, 256, generator=g).cuda()
y = torch.randn(64, 16, generator=g).cuda()
torch.manual_seed(0)
model = Net().cuda()
init = {k: v.clone() for k, v in model.state_dict().items()}
compiled = torch.compile(model, backend=BACKEND)

def run(phase):
    model.load_state_dict(init)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gb = graph_breaks()
    out = {"phase": phase, "hooked": hooked()}
    try:
        losses = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(compiled(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out["losses"] = [l.hex() for l in losses]
    except Exception as e:
        out["error"] = "".join(traceback.format_exception_only(type(e), e))[-2000:]
    out["graph_breaks"] = graph_breaks() - gb
    print("PHASE", json.dumps(out), flush=True)

for phase in PHASES:
    if phase == "on-after":
        print("SWITCH on", flush=True)
        wait(True)
    if phase == "off-again":
        print("SWITCH off", flush=True)
        wait(False)
    run(phase)
print("DONE", flush=True)
while True:
    time.sleep(0.1)
"""


def compile_case(spawn, backend, timeout):
    c = Checks()
    a = spawn(COMPILE, env={"BACKEND": backend, "PHASES": "on",
                            "PROBING_TORCH_PROFILING": "on,step_rate=1"})
    b = spawn(COMPILE, env={"BACKEND": backend,
                            "PHASES": "off,on-after,off-again"})
    b.wait_agent(timeout=120)
    b.wait_line("SWITCH on", timeout=timeout)
    r = probing("config", "torch.profiling=on,step_rate=1", target=b.pid)
    print("switch on:", r)
    b.wait_line("SWITCH off", timeout=timeout)
    rows_b = settled(b, "SELECT count(*) AS n, group_concat(DISTINCT clock) "
                        "AS clocks FROM python.torch_trace")
    r = probing("config", "torch.profiling=off", target=b.pid)
    print("switch off:", r)
    b.wait_line("DONE", timeout=timeout)
    a.wait_line("DONE", timeout=timeout)
    a.wait_agent()
    rows_a = settled(a, "SELECT module, stage, clock, count(*) AS n "
                        "FROM python.torch_trace GROUP BY module, stage, clock")
    phases = {p["phase"]: p for p in lines(a, "PHASE") + lines(b, "PHASE")}
    for name in ("on", "off", "on-after", "off-again"):
        print("%s %s: %s" % (backend, name, phases.get(name)))
    print("rows, traced from the start:", rows_a)
    print("rows, switched on after compiling:", rows_b)
    off = phases.get("off", {})
    if "error" in off:
        pytest.skip("torch.compile(backend=%r) fails here without tracing "
                    "too: %s" % (backend, off["error"]))
    for name in ("on", "on-after", "off-again"):
        p = phases.get(name, {})
        c("error" not in p and "losses" in p,
          "%s: ran (%s)" % (name, p.get("error", "").strip()[-300:]))
        c(p.get("losses") == off.get("losses"),
          "%s: losses bit-identical to off's: %s vs %s"
          % (name, p.get("losses"), off.get("losses")))
        c(p.get("graph_breaks") == off.get("graph_breaks"),
          "%s: graph breaks %s, off's %s" % (name, p.get("graph_breaks"),
                                              off.get("graph_breaks")))
    c(phases.get("on", {}).get("hooked") and phases.get("on-after", {}).get("hooked")
      and not off.get("hooked") and not phases.get("off-again", {}).get("hooked"),
      "the wrapper was installed exactly in the phases traced")
    c(sum(r["n"] for r in rows_a if r["stage"] == "forward") > 0,
      "traced from the start: forward rows")
    c(any(r["clock"] == "cuda" for r in rows_a),
      "traced from the start: GPU-timed rows")
    c(rows_b and rows_b[0]["n"] > 0, "switched on after compiling: rows")
    c.done()


def test_torch_compile_eager_backend(spawn):
    compile_case(spawn, "eager", timeout=180)


def test_torch_compile_inductor(spawn):
    compile_case(spawn, "inductor", timeout=280)
