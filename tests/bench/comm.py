"""What recording torch.distributed calls costs (python.comm_collective).

Three kinds of process, side by side in one run, interleaved round by
round (each a fresh /usr/bin/python3 with torch 1.13, gloo, world size 1
through a file store):

  none     no agent
  off      the agent, comm.record=off (nothing wrapped, DDP untouched)
  on       the agent, recording (the default): wrapped functions, DDP's
           all-reduces through Probing's communication hook; on torch
           2.x also a functional all_reduce and its wait_tensor against
           their originals, paired in one process

Each process times, with its own clock, after a warm-up:
  call     CALLS calls of dist.all_reduce on a 1-element tensor (the
           cheapest collective: the wrapper's cost is the whole difference)
  ddp      STEPS training steps of examples/ddp_train.py's model (DDP,
           batch 32, forward + backward + SGD step; one gradient bucket)

Printed: the medians per kind, the cost per call in microseconds (on -
none; and, less noisy, the wrapper against its original `__wrapped__`
in blocks of calls alternating in one process), and the DDP step ratios on/none and off/none, as a Markdown table
for docs/benchmarks.md.  World size 1 is the conservative case: the
all-reduce itself costs least, so the hook's share of a step is largest.

Then the DDP example as it runs: torchrun with --ranks ranks (gloo over
loopback) of the same model and steps, each kind a job of its own, the
step time of rank 0 (median over rounds).

Usage: PROBING_BUILD=build python3 tests/bench/comm.py [--rounds 7]
       [--ranks 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
USERBASE = os.path.join(BUILD, "userbase")
PY = "/usr/bin/python3"

WORKLOAD = """
import json, os, sys, tempfile, time
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
calls, steps, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if kind == "on" and calls:  # the wrappers come within the agent's first ticks
    for _ in range(400):
        if type(dist.isend).__name__ == "CommWrapper":  # all_reduce: a shim on torch 2.x
            break
        time.sleep(0.01)
    else:
        sys.exit("not recording")
if "RANK" in os.environ:   # under torchrun
    dist.init_process_group("gloo")
else:
    f = tempfile.NamedTemporaryFile(delete=False).name
    dist.init_process_group("gloo", init_method="file://" + f, rank=0,
                            world_size=1)
torch.set_num_threads(1)
t = torch.ones(1)
for _ in range(1000 if calls else 0):
    dist.all_reduce(t)
t0 = time.perf_counter()
for _ in range(calls):
    dist.all_reduce(t)
call_s = (time.perf_counter() - t0) / max(calls, 1)
# The wrapper against its own original in this process, block by block.
paired = None
if kind == "on" and calls:
    orig, diffs = dist.all_reduce.__wrapped__, []
    for _ in range(40):
        a = time.perf_counter()
        for _ in range(500):
            dist.all_reduce(t)
        b = time.perf_counter()
        for _ in range(500):
            orig(t)
        c = time.perf_counter()
        diffs.append(((b - a) - (c - b)) / 500)
    paired = sorted(diffs)[len(diffs) // 2]
# torch 2.x: a functional all_reduce and the wait for its result, the
# recorded pair against the originals (its wrappers come within a second
# of the module's import).
funcol_paired = None
try:
    import torch.distributed._functional_collectives as fc
except ImportError:
    fc = None
if kind == "on" and calls and fc:
    def shimmed():
        return getattr(fc.all_reduce, "__code__", None) and \
            fc.all_reduce.__code__.co_filename == "<probing>"
    for _ in range(500):
        if shimmed():
            break
        time.sleep(0.01)
    else:
        sys.exit("functional collectives not recording")
    W = dist.group.WORLD
    fa, fw = fc.all_reduce, fc.wait_tensor
    oa, ow = fa.__wrapped__, fw.__wrapped__
    diffs = []
    for _ in range(40):
        a = time.perf_counter()
        for _ in range(500):
            fw(fa(t, "sum", W).elem)
        b = time.perf_counter()
        for _ in range(500):
            ow(oa(t, "sum", W).elem)
        c = time.perf_counter()
        diffs.append(((b - a) - (c - b)) / 500)
    funcol_paired = sorted(diffs)[len(diffs) // 2]
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(32, 64)
y = x.sum(dim=1, keepdim=True)
def step():
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
for _ in range(200):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
step_s = (time.perf_counter() - t0) / steps
if dist.get_rank() == 0:
    print(json.dumps({"call": call_s, "step": step_s, "paired": paired,
                      "funcol_paired": funcol_paired}), flush=True)
dist.barrier()
"""


def run(kind, calls, steps, ranks=0):
    env = dict(os.environ, PYTHONUSERBASE=USERBASE, OMP_NUM_THREADS="1")
    for k in list(env):
        if k.startswith("PROBING"):
            del env[k]
    if kind != "none":
        env["PROBING"] = "2" if ranks else "1"
    if kind == "off":
        env["PROBING_COMM_RECORD"] = "off"
    cmd = [PY, "-c", WORKLOAD]
    if ranks:
        script = os.path.join(tempfile.gettempdir(), "probing-comm-bench.py")
        with open(script, "w") as f:
            f.write(WORKLOAD)
        # --redirects/--tee: torch 1.13's torchrun needs them on 3.11
        # ("0" does not parse); rank 0's lines come back "[default0]:".
        logs = tempfile.mkdtemp(prefix="probing-bench-")
        # A torch without libuv (Debian's 2.6) needs USE_LIBUV=0 and
        # the e2e tests' sitecustomize (tests/e2e/torchenv.py says why).
        sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
        from torchenv import torch_env
        env.update(torch_env(logs))
        cmd = ["/usr/bin/torchrun", "--redirects", "1", "--tee", "1",
               "--log_dir", logs,
               "--nproc_per_node", str(ranks), "--master_port", "29577",
               script]
    out = subprocess.run(cmd + [str(calls), str(steps), kind], env=env,
                         capture_output=True, text=True, check=True,
                         cwd=tempfile.gettempdir())
    lines = [x[x.index("{"):] for x in out.stdout.splitlines() if "{" in x]
    return json.loads(lines[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--ranks", type=int, default=4)
    a = p.parse_args()
    kinds = ["none", "off", "on"]
    got = {k: [] for k in kinds}
    for r in range(a.rounds):
        for k in kinds if r % 2 == 0 else reversed(kinds):
            got[k].append(run(k, a.calls, a.steps))
        print("round %d/%d" % (r + 1, a.rounds), file=sys.stderr)
    med = {k: {m: statistics.median(x[m] for x in got[k])
               for m in ("call", "step")} for k in kinds}
    print("| kind | all_reduce call (us) | DDP step (ms) | step / none |")
    print("|---|---|---|---|")
    for k in kinds:
        print("| %s | %.2f | %.3f | %.4f |" % (
            k, med[k]["call"] * 1e6, med[k]["step"] * 1e3,
            med[k]["step"] / med["none"]["step"]))
    print()
    print("cost per recorded call: %.2f us (on - none), %.2f us (on - off)"
          % ((med["on"]["call"] - med["none"]["call"]) * 1e6,
             (med["on"]["call"] - med["off"]["call"]) * 1e6))
    print("the wrapper against its original, paired in one process: "
          "%.2f us a call (median of %d rounds, each the median of 40 "
          "blocks of 500 calls)"
          % (statistics.median(x["paired"] for x in got["on"]) * 1e6,
             a.rounds))
    fp = [x["funcol_paired"] for x in got["on"] if x.get("funcol_paired")]
    if fp:
        print("a functional all_reduce and its wait_tensor, recorded against "
              "the originals, paired in one process: %.2f us a call (median "
              "of %d rounds, each the median of 40 blocks of 500)"
              % (statistics.median(fp) * 1e6, len(fp)))
    print("DDP step: on/none %.4f, off/none %.4f (median of %d rounds)"
          % (med["on"]["step"] / med["none"]["step"],
             med["off"]["step"] / med["none"]["step"], a.rounds))
    job = {k: [] for k in kinds}
    for r in range(a.rounds):
        for k in kinds if r % 2 == 0 else reversed(kinds):
            job[k].append(run(k, 0, a.steps, a.ranks)["step"])
        print("torchrun round %d/%d" % (r + 1, a.rounds), file=sys.stderr)
    jm = {k: statistics.median(job[k]) for k in kinds}
    print()
    print("| torchrun, %d ranks | DDP step (ms) | step / none |" % a.ranks)
    print("|---|---|---|")
    for k in kinds:
        print("| %s | %.3f | %.4f |" % (k, jm[k] * 1e3, jm[k] / jm["none"]))


if __name__ == "__main__":
    main()
