"""Torch module tracing: python.torch_trace, watched variables, sampling,
switching on and off at run time.  /usr/bin/python3 only (it has torch)."""
import json
import time

import pytest

from conftest import SYSTEM_PYTHON, probing, wait_for

pytestmark = pytest.mark.skipif(
    __import__("subprocess").run([SYSTEM_PYTHON, "-c", "import torch"],
                                 capture_output=True).returncode != 0,
    reason="/usr/bin/python3 has no torch")

# A model with nested names (encoder.layers.0.self_attn, a Sequential
# inside), a residual connection, and a loss module.  The loop waits for
# the agent's hooks, runs STEPS steps, prints DONE and idles.
MODEL = """\
import os, sys, time
import torch
from torch import nn

torch.manual_seed(0)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = nn.Linear(8, 8)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        return x + self.ff(self.self_attn(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for block in self.encoder.layers:
            x = block(x)
        return self.head(x)

def hooked():
    return type(nn.Module.__dict__["__call__"]).__name__ == "ModuleCall"

def train(steps):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    lossf = nn.MSELoss()
    for step in range(steps):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        opt.zero_grad()
        out = model(x)
        loss = lossf(out, y)
        acc1 = float((out - y).abs().mean())
        loss.backward()
        opt.step()
        print("STEP", step, loss.item(), acc1, flush=True)
        time.sleep(STEP_SLEEP)

STEP_SLEEP = float(os.environ.get("STEP_SLEEP", "0"))
print("READY", flush=True)
if os.environ.get("WAIT_HOOKS"):
    while not hooked():
        time.sleep(0.01)
train(int(os.environ.get("STEPS", "8")))
print("DONE", flush=True)
while True:
    time.sleep(0.05)
"""

MODULES = ["Net", "MSELoss", "head"] + [
    "encoder.layers.%d%s" % (i, s) for i in (0, 1)
    for s in ("", ".self_attn", ".ff", ".ff.0", ".ff.1", ".ff.2")]


def query(t, sql):
    r = probing("query", "-f", "json", sql, target=t.pid)
    assert r.rc == 0, r
    return r.json()


def status(t):
    return query(t, "SELECT value FROM probing.config "
                    "WHERE name = 'torch.status'")[0]["value"]


def start(spawn, steps=8, spec="on,step_rate=1", extra=None):
    """The model's loop with the agent and spec.  The tests check what
    tracing records in each step, so by default every step is traced
    (step_rate=1); test_auto_step_rate checks the default, auto."""
    env = {"STEPS": str(steps), "WAIT_HOOKS": "1"}
    if spec:
        env["PROBING_TORCH_PROFILING"] = spec
    env.update(extra or {})
    t = spawn(SYSTEM_PYTHON, MODEL, env=env)
    t.wait_line("READY", timeout=60)
    t.wait_agent()
    return t


def rows_settled(t, sql):
    """The rows of sql once they stop changing (the recorder drains every
    100 ms)."""
    last = None
    deadline = time.time() + 20
    while time.time() < deadline:
        rows = query(t, sql)
        if rows == last:
            return rows
        last = rows
        time.sleep(0.3)
    return last


def test_every_module_forward_backward_and_steps(spawn):
    t = start(spawn, steps=8)
    t.wait_line("DONE", timeout=60)
    rows = rows_settled(t, "SELECT step, seq, module, stage, duration, "
                           "cpu_duration, clock, "
                           "allocated, time_offset, rank, ts "
                           "FROM python.torch_trace ORDER BY step, seq")
    assert rows, "no rows"
    # A CPU model: every duration is the CPU's.
    assert all(r["clock"] == "cpu" and r["cpu_duration"] == r["duration"]
               for r in rows), [r for r in rows if r["clock"] != "cpu"][:3]
    # ts: Unix seconds of the stage's start: within a step, ts minus the
    # offset from the step's start is that start, the same for each row.
    now = time.time()
    assert all(now - 300 < r["ts"] <= now for r in rows), rows[:3]
    for step in {r["step"] for r in rows}:
        starts = [r["ts"] - r["time_offset"] for r in rows if r["step"] == step]
        assert max(starts) - min(starts) < 0.05, (step, starts)
    steps = sorted({r["step"] for r in rows})
    assert steps == list(range(8))
    for step in steps:
        mine = [r for r in rows if r["step"] == step]
        fwd = {r["module"] for r in mine if r["stage"] == "forward"}
        bwd = {r["module"] for r in mine if r["stage"] == "backward"}
        assert fwd == set(MODULES), (step, fwd)
        # Every module the loss depends on has a backward row.
        assert bwd == set(MODULES), (step, bwd)
        step_rows = [r for r in mine if r["stage"] == "step"]
        assert [r["module"] for r in step_rows] == ["SGD"]
        # seq numbers the stages of a step in the order they started.
        assert sorted(r["seq"] for r in mine) == list(range(len(mine)))
        assert all(r["duration"] >= 0 and r["time_offset"] >= 0
                   and r["allocated"] == 0 and r["rank"] == 0 for r in mine)
        by = {(r["module"], r["stage"]): r for r in mine}
        # Order: the root's forward starts first; backward runs from the
        # head down, after every forward; the optimizer step comes last.
        assert by[("Net", "forward")]["seq"] == 0
        first_bwd = min(r["seq"] for r in mine if r["stage"] == "backward")
        assert first_bwd > max(r["seq"] for r in mine if r["stage"] == "forward")
        assert by[("head", "backward")]["seq"] < \
            by[("encoder.layers.1.ff", "backward")]["seq"] < \
            by[("encoder.layers.0.self_attn", "backward")]["seq"]
        assert step_rows[0]["seq"] == len(mine) - 1
        # A parent's forward encloses its children's.
        p, c = by[("encoder.layers.0.ff", "forward")], by[("encoder.layers.0.ff.1", "forward")]
        assert p["time_offset"] <= c["time_offset"]
        assert p["time_offset"] + p["duration"] >= c["time_offset"] + c["duration"]
    st = status(t)
    assert st.startswith("on: step 8") and "0 GPU times lost" in st, st


def test_watched_variables_several(spawn):
    t = start(spawn, steps=6, spec="on,step_rate=1,exprs=loss@train;acc1@train")
    t.wait_line("DONE", timeout=60)
    printed = {}
    for line in t.output().splitlines():
        if line.startswith("STEP "):
            _, step, loss, acc1 = line.split()
            printed[int(step)] = (float(loss), float(acc1))
    rows = rows_settled(t, "SELECT step, func, name, value FROM python.variables "
                           "ORDER BY step, name")
    got = {(r["step"], r["name"]): r["value"] for r in rows}
    assert {r["func"] for r in rows} == {"train"}
    for step in range(6):
        # Read when the optimizer steps: this step's loss and acc1.
        assert got[(step, "loss")] == pytest.approx(printed[step][0], rel=1e-5)
        assert got[(step, "acc1")] == pytest.approx(printed[step][1], rel=1e-5)
    r = probing("config", "-f", "json", target=t.pid)
    settings = {s["name"]: s["value"] for s in r.json()}
    assert settings["torch.watch"] == "loss@train;acc1@train"
    assert settings["torch.profiling"] == "on"


def test_sampling_steps_and_modules(spawn):
    t = start(spawn, steps=12, spec="on,step_rate=4,module_rate=3")
    t.wait_line("DONE", timeout=60)
    rows = rows_settled(t, "SELECT step, module, stage FROM python.torch_trace")
    assert sorted({r["step"] for r in rows}) == [0, 4, 8]
    per_step = {}
    for r in rows:
        if r["stage"] == "forward":
            per_step.setdefault(r["step"], set()).add(r["module"])
    # One module in three per traced step (counting the containers that
    # are never called), a different third each time: together, every
    # module, each once.
    for s, mods in per_step.items():
        assert 0 < len(mods) < len(MODULES) // 2, (s, mods)
    assert sorted(sum((sorted(m) for m in per_step.values()), [])) == sorted(MODULES)
    # Every traced step still ends in an optimizer step row.
    assert sorted(r["step"] for r in rows if r["stage"] == "step") == [0, 4, 8]


def traced_steps(t):
    rows = rows_settled(t, "SELECT step, module, stage FROM python.torch_trace")
    by_step = {}
    for r in rows:
        by_step.setdefault(r["step"], set()).add((r["module"], r["stage"]))
    return by_step


def test_auto_step_rate(spawn):
    # The default, step_rate=auto: short steps (about a millisecond, some
    # 30 rows each) are traced one in a power of two that grows, at most
    # fourfold a traced step, until the rows' estimated cost is about 0.5%
    # of the steps' time (one in 32 here); every traced step is traced
    # whole.  Step 0 began when tracing did, not at an optimizer step: its
    # length says nothing, step 1 is the first measured.
    t = start(spawn, steps=300, spec="on")
    t.wait_line("DONE", timeout=120)
    by_step = traced_steps(t)
    steps = sorted(by_step)
    assert steps[:2] == [0, 1], steps
    # After a traced step a the rate is a power of two r and the next traced
    # step b the next multiple of r: b - a <= r, and r divides b.  However
    # long some steps took (a loaded machine), that holds.
    for a, b in zip(steps[1:], steps[2:]):
        assert (b & -b) >= b - a, (a, b, steps)
    # Most steps here are short: far fewer than all are traced (at a
    # sustained 9 ms a step, nine times the usual, it would be one in 4).
    assert len(steps) <= 300 // 4, steps
    for s in steps:
        got = by_step[s]
        assert {(m, "forward") for m in MODULES} <= got, (s, got)
        assert {(m, "backward") for m in ("Net", "head")} <= got, (s, got)
        assert ("SGD", "step") in got, (s, got)
    st = status(t)
    n = int(st.split("one step in ")[1].split()[0])
    assert n & (n - 1) == 0 and "traced (auto)" in st, st
    # Long steps (50 ms): the rows cost far less than 0.5% of them, so
    # every step is traced.
    t2 = start(spawn, steps=10, spec="on", extra={"STEP_SLEEP": "0.05"})
    t2.wait_line("DONE", timeout=60)
    assert sorted(traced_steps(t2)) == list(range(10))
    wait_for(lambda: "one step in 1 traced (auto)" in status(t2), 10,
             "the status of long steps")
    # Settings: auto and N; anything else is refused, saying what it takes.
    r = probing("config", "torch.step_rate=3", target=t2.pid)
    assert r.rc == 0, r
    wait_for(lambda: "one step in 3 traced," in status(t2), 10, "rate 3")
    for bad in ("0", "-2", "automatic", "1.5", "1000001"):
        r = probing("config", "torch.step_rate=" + bad, target=t2.pid)
        assert r.rc != 0 and "neither auto nor a whole number" in r.err, (bad, r)
    r = probing("config", "torch.step_rate=auto", target=t2.pid)
    assert r.rc == 0, r


def test_switch_on_and_off_at_run_time_leaves_nothing(spawn):
    # Started without tracing: nothing is hooked.
    t = start(spawn, steps=100000, spec=None,
              extra={"WAIT_HOOKS": ""})
    t.wait_line("STEP 5", timeout=60)
    probe = ("import torch, torch.nn.modules.module as m\n"
             "F = torch.autograd.function.Function\n"
             "print(len(m._global_forward_pre_hooks), len(m._global_forward_hooks),"
             " len(m._global_backward_hooks),"
             " type(torch.nn.Module.__dict__['__call__']).__name__,"
             " type(torch.optim.Optimizer.__dict__['_optimizer_step_code']).__name__,"
             " '_register_hook' in F.__dict__)")
    r = probing("eval", probe, target=t.pid)
    assert r.rc == 0, r
    clean = r.out.strip()
    assert clean == "0 0 0 function function False", clean
    assert status(t) == "off"
    r = probing("config", "torch.profiling=on", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: status(t).startswith("on"), 10, "tracing on")
    wait_for(lambda: query(t, "SELECT count(DISTINCT step) AS n FROM "
                              "python.torch_trace")[0]["n"] >= 3, 20, "rows")
    r = probing("config", "torch.profiling=off", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: status(t) == "off", 10, "tracing off")
    r = probing("eval", probe, target=t.pid)
    assert r.out.strip() == clean, r.out
    # No new rows after it went off (the last ones drained).
    time.sleep(0.3)
    n = query(t, "SELECT count(*) AS n FROM python.torch_trace")[0]["n"]
    time.sleep(0.5)
    assert query(t, "SELECT count(*) AS n FROM python.torch_trace")[0]["n"] == n
    assert t.alive()
    # And on again: steps go on counting from where they were.
    last = query(t, "SELECT max(step) AS s FROM python.torch_trace")[0]["s"]
    probing("config", "torch.profiling=on", target=t.pid)
    wait_for(lambda: query(t, "SELECT max(step) AS s FROM "
                              "python.torch_trace")[0]["s"] > last + 1, 20, "more rows")


def test_waits_for_torch_import_and_reports_status(spawn):
    code = ("import time, os\n"
            "print('READY', flush=True)\n"
            "while not os.path.exists('go'):\n"
            "    time.sleep(0.02)\n"
            "import torch\n"
            "print('IMPORTED', flush=True)\n"
            "while True:\n"
            "    time.sleep(0.05)\n")
    t = spawn(SYSTEM_PYTHON, code, env={"PROBING_TORCH_PROFILING": "on"})
    t.wait_line("READY")
    t.wait_agent()
    wait_for(lambda: status(t) == "waiting for torch to be imported", 10,
             "waiting status")
    import os
    open(os.path.join(os.path.dirname(t.script), "go"), "w").close()
    t.wait_line("IMPORTED", timeout=60)
    wait_for(lambda: status(t).startswith("on"), 10, "hooks installed")
    # Settings are checked whole: a bad option changes nothing.
    r = probing("config", "torch.profiling=on,exprs=nope", target=t.pid)
    assert r.rc == 1 and "VARIABLE@FUNCTION" in r.err, r
    r = probing("config", "torch.profiling=on,bogus=1", target=t.pid)
    assert r.rc == 1 and "unknown option 'bogus'" in r.err, r
    r = probing("config", "torch.profiling=on,exprs=a@f,b@g,step_rate=2",
                target=t.pid)
    assert r.rc == 0, r
    r = probing("config", "-f", "json", target=t.pid)
    s = {x["name"]: x["value"] for x in r.json()}
    assert s["torch.watch"] == "a@f;b@g" and s["torch.step_rate"] == "2"


def test_perf_torch_cli(spawn):
    t = start(spawn, steps=1000000, spec=None, extra={"WAIT_HOOKS": ""})
    t.wait_line("STEP 3", timeout=60)
    r = probing("perf", "--torch", "--duration", "1s", "-f", "json",
                target=t.pid)
    assert r.rc == 0, r
    rows = r.json()
    got = {(row[0], row[1]) for row in rows}
    assert ("encoder.layers.0.self_attn", "forward") in got
    assert ("head", "backward") in got and ("SGD", "step") in got
    # Which clock each duration is: the CPU's here (no CUDA).
    assert {row[2] for row in rows} == {"cpu"}, rows
    calls = {(row[0], row[1]): row[3] for row in rows}
    # The window may cut one step in two.
    assert abs(calls[("Net", "forward")] - calls[("SGD", "step")]) <= 1
    assert calls[("SGD", "step")] > 5
    # It was off before, so it is off again.
    assert status(t) == "off"
    r = probing("perf", "--torch", "--duration", "500ms", target=t.pid)
    assert r.rc == 0 and "MODULE" in r.out and "TOTAL_MS" in r.out, r
    # On, with options, until --stop.
    r = probing("perf", "--torch", "--step-rate", "2", "--watch", "loss@train",
                target=t.pid)
    assert r.rc == 0, r
    assert "torch.step_rate\t2" in r.out and "torch.watch\tloss@train" in r.out
    # The status after the change, not before it (it said off).
    assert "torch.status\ton: step " in r.out, r
    wait_for(lambda: status(t).startswith("on"), 10, "on")
    wait_for(lambda: query(t, "SELECT count(*) AS n FROM python.variables")[0]["n"] > 2,
             10, "watched loss")
    steps = {r["step"] % 2 for r in query(t, "SELECT step FROM python.variables")}
    assert steps == {0}
    r = probing("perf", "--torch", "--step-rate", "auto", target=t.pid)
    assert r.rc == 0 and "torch.step_rate\tauto" in r.out, r
    r = probing("perf", "--torch", "--step-rate", "often", target=t.pid)
    assert r.rc == 2 and "auto or a positive number" in r.err, r
    r = probing("perf", "--torch", "--stop", target=t.pid)
    assert r.rc == 0 and "torch.profiling\toff" in r.out, r
    assert "torch.status\toff" in r.out, r
    r = probing("perf", "--torch", "--stop", "--duration", "5ms", target=t.pid)
    assert r.rc == 2


def test_two_threads_running_modules(spawn):
    """An inference thread runs another model while the main thread
    trains: each thread's calls pair up, names stay right."""
    code = MODEL.replace('print("READY", flush=True)', '''
import threading
class Other(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    def forward(self, x):
        return self.body(x)
def serve():
    other = Other()
    with torch.no_grad():
        while True:
            for _ in range(20):
                other(torch.randn(2, 8))
            time.sleep(0.0005)
threading.Thread(target=serve, daemon=True).start()
print("READY", flush=True)''')
    t = spawn(SYSTEM_PYTHON, code, env={"STEPS": "40", "WAIT_HOOKS": "1",
                                        "PROBING_TORCH_PROFILING": "on,step_rate=1"})
    t.wait_line("READY", timeout=60)
    t.wait_agent()
    t.wait_line("DONE", timeout=60)
    # From step 2: tracing may have been switched on in the middle of a
    # forward of the inference thread, whose modules are then named as
    # roots until a call of their real root names them.
    rows = rows_settled(t, "SELECT step, module, stage FROM python.torch_trace "
                           "WHERE step BETWEEN 2 AND 39")
    names = {r["module"] for r in rows}
    assert names == set(MODULES) | {"Other", "body", "body.0", "body.1", "SGD"}, names
    for step in range(2, 40):
        fwd = [r["module"] for r in rows
               if r["step"] == step and r["stage"] == "forward"
               and r["module"] in MODULES]
        assert sorted(fwd) == sorted(MODULES), (step, fwd)


def test_switched_on_in_the_middle_of_a_forward(spawn, tmp_path):
    """Tracing switched on while the model's forward runs: the block
    called next has no traced module around it, but is named from the
    model that is running it (encoder.layers.1.self_attn), not as a root
    of its own (Block, self_attn) for the rest of the session."""
    code = MODEL.replace('''        for block in self.encoder.layers:
            x = block(x)''', '''        for i, block in enumerate(self.encoder.layers):
            x = block(x)
            if i == 0 and not os.path.exists("go"):
                print("IN_FORWARD", flush=True)
                while not os.path.exists("go"):
                    time.sleep(0.01)''')
    t = spawn(SYSTEM_PYTHON, code, env={"STEPS": "4"})
    t.wait_line("IN_FORWARD", timeout=60)
    t.wait_agent()
    r = probing("config", "torch.profiling=on", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: probing("eval", "hooked()", target=t.pid).out.strip()
             == "True", 30, "the hooks")
    (tmp_path / "go").write_text("")
    t.wait_line("DONE", timeout=60)
    rows = rows_settled(t, "SELECT DISTINCT module FROM python.torch_trace")
    names = {r["module"] for r in rows}
    assert "encoder.layers.1.self_attn" in names, names
    assert names <= set(MODULES) | {"SGD"}, names - set(MODULES)


# What a program can see of Module.__call__, printed as one JSON line:
# with tracing on (Module.__call__ wrapped) it must see what it sees
# without.  A module overriding __call__ that calls super()'s, keyword
# arguments, a forward that raises, inspect.signature, a bound
# __call__'s repr, torch.fx.symbolic_trace (which patches
# Module.__call__ itself while it traces).
TRANSPARENT = """\
import inspect, json, os, time, traceback
import torch
import torch.fx
from torch import nn

torch.manual_seed(0)

class Boom(nn.Module):
    def forward(self, x):
        raise ValueError("boom %d" % x.shape[0])

class KW(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x=None, scale=1.0):
        return self.lin(x) * scale

class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.kw = KW()
    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs) + 1
    def forward(self, x):
        return self.kw(x=x, scale=2.0)

def wrapped():
    return type(nn.Module.__dict__["__call__"]).__name__ == "ModuleCall"

if os.environ.get("WAIT_HOOKS"):
    while not wrapped():
        time.sleep(0.01)
facts = [str(inspect.signature(Outer())), str(inspect.signature(nn.Linear(2, 2)))]
m = Outer()
facts.append(repr(m.kw.lin.__call__).split(" of ")[0])
x = torch.randn(3, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(4):
    opt.zero_grad()
    loss = m(x).pow(2).mean()
    loss.backward()
    opt.step()
    facts.append("%.6f" % loss.item())
try:
    Boom()(torch.zeros(5))
except ValueError as e:
    tb = traceback.extract_tb(e.__traceback__)
    facts.append("%r %d %s" % (e, len(tb), tb[-1].name))
gm = torch.fx.symbolic_trace(KW())
facts.append(gm.code.strip())
facts.append(str(gm(torch.ones(1, 4)).shape))
# torch.compile (torch 2) reads a function's attributes off
# Module.__call__ and a bound __call__ (the wrapper shows torch's), and
# dynamo inlines what inspect.getattr_static finds as _torchdynamo_inline.
call = nn.Module.__dict__["__call__"]
func = inspect.unwrap(call)
bound = m.kw.lin.__call__
facts.append([bound.__code__ is func.__code__, call.__code__ is func.__code__,
              call.__defaults__ == func.__defaults__,
              call.__kwdefaults__ == func.__kwdefaults__,
              call.__globals__ is func.__globals__,
              call.__module__, call.__doc__ == func.__doc__,
              call.__annotations__ == func.__annotations__,
              inspect.getattr_static(call, "_torchdynamo_inline", call) is func])
# A module run with FakeTensors (torch's compile-time tracing) is passed
# straight through: no row for FakeOnly.
class FakeOnly(nn.Module):
    def forward(self, x):
        return x * 2
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode() as mode:
    fx = mode.from_tensor(torch.ones(2, 3))
    facts.append(str(FakeOnly()(fx).shape))
print("FACTS", json.dumps(facts), flush=True)
print("WRAPPED", wrapped(), flush=True)
while True:
    time.sleep(0.05)
"""


def test_wrapped_module_call_is_transparent(spawn):
    def facts(env):
        t = spawn(SYSTEM_PYTHON, TRANSPARENT, env=env)
        t.wait_line("WRAPPED", timeout=60)
        out = t.output()
        line = [l for l in out.splitlines() if l.startswith("FACTS ")][0]
        return t, json.loads(line[6:]), "WRAPPED True" in out

    t_on, on, wrapped_on = facts({"PROBING_TORCH_PROFILING": "on,step_rate=1",
                                  "WAIT_HOOKS": "1"})
    t_off, off, wrapped_off = facts({})
    assert on == off
    assert "boom 5" in on[-5] and on[-5].endswith(" forward"), on
    # torch.fx put our wrapper back after tracing; off, nothing wraps.
    assert wrapped_on and not wrapped_off
    t_on.wait_agent()
    rows = rows_settled(t_on, "SELECT DISTINCT module, stage "
                              "FROM python.torch_trace")
    got = {(r["module"], r["stage"]) for r in rows}
    for name in ("Outer", "kw", "kw.lin"):
        assert (name, "forward") in got and (name, "backward") in got, got
    # A call that raised has no row, nor one run with FakeTensors.
    assert not any(r["module"] in ("Boom", "FakeOnly") for r in rows), rows
    assert on[-2][:5] == [True] * 5 and on[-2][6:] == [True] * 3, on[-2]
    assert on[-2][5] == "torch.nn.modules.module", on[-2]


# GPU time (torch_hooks.h) driven through torch's CUDA API faked on this
# CPU-only torch: the events, streams, memory statistics and capture flag
# the agent calls, as torch 1.x/2.x name them, on a tensor subclass that
# says it is on cuda:0.  The fake "GPU" runs everything recorded when the
# program says so (FakeEventBase.done) and then reports 123 ms for every
# call.  What the real GPU does is tests/gpu/test_torch_cuda.py's.
FAKE_CUDA = """\
import json, os, time, torch
from torch import nn
torch.manual_seed(0)

class FakeStream:
    pass

class FakeEventBase:
    done = False
    records = 0
    def __init__(self, enable_timing=False, **kw):
        self.timing, self.t = enable_timing, None
    def record(self, stream):
        assert isinstance(stream, FakeStream) and self.timing
        FakeEventBase.records += 1
        self.t = time.monotonic()
    def query(self):
        return FakeEventBase.done
    def elapsed_time(self, end):
        assert FakeEventBase.done and self.t is not None and end.t is not None
        return 123.0

class FakeEvent(FakeEventBase):
    pass

capturing = [False]
MB = 2 ** 20
torch._C._CudaEventBase = FakeEventBase
torch.cuda.Event = FakeEvent
torch._C._cuda_getCurrentStream = lambda dev: (7, dev, 1)
torch.cuda.current_stream = lambda dev=None: FakeStream()
torch._C._cuda_isCurrentStreamCapturing = lambda: capturing[0]
torch._C._cuda_memoryStats = lambda dev: {
    "allocated_bytes": {"all": {"current": 5 * MB, "peak": 6 * MB}},
    "reserved_bytes": {"all": {"current": 7 * MB, "peak": 8 * MB}}}
torch._C._cuda_getDevice = lambda: 0
torch.cuda.is_initialized = lambda: True

class CudaLike(torch.Tensor):
    @property
    def is_cuda(self):
        return True
    def get_device(self):
        return 0

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
    def forward(self, x):
        return self.lin(x).relu()

class CpuOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)
    def forward(self, x):
        return self.fc(x)

def hooked():
    return type(nn.Module.__dict__["__call__"]).__name__ == "ModuleCall"

def wait_file(name):
    print("WAIT", name, flush=True)
    while not os.path.exists(name):
        time.sleep(0.01)

net, cpu = Net(), CpuOnly()
opt = torch.optim.SGD(list(net.parameters()) + list(cpu.parameters()), lr=0.01)
x = torch.randn(4, 8).as_subclass(CudaLike)
xc = torch.randn(4, 8)
print("READY", flush=True)
while not hooked():
    time.sleep(0.01)

def step(i):
    opt.zero_grad()
    (net(x).sum() + cpu(xc).sum()).backward()
    opt.step()
    print("STEP", i, flush=True)

for i in range(3):
    step(i)
wait_file("go1")             # steps 0-2: the GPU has not run them yet
FakeEventBase.done = True
for i in range(3, 5):
    step(i)
wait_file("go2")             # their rows are out, and steps 3-4's
capturing[0] = True
before = FakeEventBase.records
step(5)                      # captured into a CUDA graph
print("RECORDED", FakeEventBase.records - before, flush=True)
capturing[0] = False
FakeEventBase.done = False
step(6)                      # pending when tracing goes off
wait_file("go3")
while hooked():
    time.sleep(0.01)
print("OFF", flush=True)
while True:
    time.sleep(0.05)
"""


def test_gpu_time_through_torchs_cuda_api(spawn, tmp_path):
    t = spawn(SYSTEM_PYTHON, FAKE_CUDA)
    t.wait_line("READY", timeout=60)
    t.wait_agent()
    r = probing("config", "torch.profiling=on,step_rate=1", target=t.pid)
    assert r.rc == 0, r
    t.wait_line("WAIT go1", timeout=60)
    sql = ("SELECT step, module, stage, duration, cpu_duration, clock, "
           "allocated, max_allocated, cached, max_cached "
           "FROM python.torch_trace WHERE stage = 'forward' ORDER BY step, seq")
    rows = rows_settled(t, sql)
    # Not run yet on the "GPU": the CUDA modules' rows wait; the CPU
    # module's are there, on the CPU's clock.
    assert {r["module"] for r in rows} == {"CpuOnly", "fc"}, rows
    assert all(r["clock"] == "cpu" for r in rows), rows
    (tmp_path / "go1").write_text("")
    t.wait_line("WAIT go2", timeout=60)
    rows = rows_settled(t, sql)
    gpu = [r for r in rows if r["module"] in ("Net", "lin")]
    # Out when a later step or traced call began after the GPU ran them
    # (step 4's: the CPU module's call after them).
    assert sorted({r["step"] for r in gpu}) == [0, 1, 2, 3, 4], gpu
    for r in gpu:
        assert r["clock"] == "cuda" and r["duration"] == 0.123, r
        assert 0 < r["cpu_duration"] < 0.123, r
        # The memory figures of the call's device, from the raw stats.
        assert (r["allocated"], r["max_allocated"], r["cached"],
                r["max_cached"]) == (5, 6, 7, 8), r
    assert all(r["clock"] == "cpu" for r in rows
               if r["module"] not in ("Net", "lin")), rows
    bwd = rows_settled(t, "SELECT DISTINCT clock FROM python.torch_trace "
                          "WHERE stage != 'forward'")
    assert [r["clock"] for r in bwd] == ["cpu"], bwd
    (tmp_path / "go2").write_text("")
    t.wait_line("WAIT go3", timeout=60)
    # While the stream was being captured nothing was recorded.
    assert "RECORDED 0" in t.output(), t.output()[-2000:]
    r = probing("config", "torch.profiling=off", target=t.pid)
    assert r.rc == 0, r
    (tmp_path / "go3").write_text("")
    t.wait_line("OFF", timeout=60)
    rows = rows_settled(t, sql)
    late = [r for r in rows if r["module"] in ("Net", "lin") and r["step"] >= 5]
    # Step 5 (captured) on the CPU's clock; step 6, still pending when
    # tracing went off, written with the CPU's time rather than lost.
    assert sorted((r["step"], r["module"]) for r in late) == \
        [(5, "Net"), (5, "lin"), (6, "Net"), (6, "lin")], late
    assert all(r["clock"] == "cpu" and r["duration"] == r["cpu_duration"]
               for r in late), late
    assert t.alive()
