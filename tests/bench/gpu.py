"""Overhead of the agent on a GPU training loop, side by side with
torch.profiler (issue 34, item 4; docs/gpu.md has the last run).

The loop: a transformers GPT-2 made from its config (random weights,
nothing downloaded: --layers, 768 wide, 12 heads), batch --batch of
--seq tokens, AdamW, bf16 autocast, on cuda:0.  Each run is a fresh
process: --warmup steps, then --steps timed (wall time, the GPU
synchronized at both ends: a GPU-bound loop's time is the GPU's).  The
variants, alternating (the order rotates every round) --runs times each:

  baseline    no agent
  idle        the agent loaded (PROBING=1), nothing switched on
  auto        PROBING_TORCH_PROFILING=on: module tracing at the default
              step_rate=auto, CUDA events around traced modules
  sampling    the agent's sampler at 100 Hz (`probing perf --start --hz
              100`, started after the warm-up)
  profiler    no agent; the timed steps inside torch.profiler.profile(
              activities=[CPU, CUDA]) (its post-processing not timed)
and, asked for with --variants:
  full        every module traced every step (step_rate=1)
  austin      no agent; the process under austin sampling at 100 Hz (-i
              10000 µs, its samples to /dev/null): the sampler's peer
--compile BACKEND: the model through torch.compile (the compilation is in
the warm-up).  Without a GPU it runs on the CPU (issue 28's torch 2.x
benchmark, in scripts/sysroot trixie: docs/benchmarks.md).

"ratio" is the variant's median over the baseline's; "paired" the median
of each round's variant / baseline (drift cancels).

--inprocess: one process with the agent, the timed steps in blocks of
--steps, with tracing and the sampler off, `auto` tracing, and the
sampler at 100 Hz, switched through the CLI between blocks (3 untimed
steps after each switch), alternating, --runs rounds: the process-to-
process spread of a launch-bound loop (docs/gpu.md) cancels; the agent
being loaded at all is the other mode's question.

Usage: PROBING_BUILD=build python3 tests/bench/gpu.py [--runs 3]
       [--steps 60] [--warmup 15] [--layers 12] [--batch 8] [--seq 512]
       [--inprocess]
Needs torch and the agent installed into this Python (tests/gpu/run does
it) or the build's user site; on CUDA when there is a device, with
transformers' GPT-2 when it is there, else torch's own Transformer layers
(a CPU run is a check of the benchmark, not a figure for docs/gpu.md).
Prints a Markdown table.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("PROBING_BUILD", os.path.join(ROOT, "build")))
CLI = os.path.join(BUILD, "cli", "probing")

DRIVER = r"""
import os, sys, time
import torch
variant, layers, batch, seq, warmup, steps, sync = sys.argv[1:8]
layers, batch, seq, warmup, steps = map(int, (layers, batch, seq, warmup, steps))
torch.manual_seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
VOCAB = int(os.environ.get("BENCH_VOCAB", "32000"))
try:
    import transformers
    cfg = transformers.GPT2Config(n_layer=layers, n_embd=768, n_head=12,
                                  n_positions=seq, vocab_size=VOCAB)
    model = transformers.GPT2LMHeadModel(cfg).to(dev)
    def loss_of(ids):
        return model(input_ids=ids, labels=ids).loss
except ImportError:  # a machine without transformers: torch's own layers
    from torch import nn
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 768)
            layer = nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True)
            self.body = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(768, VOCAB)
        def forward(self, ids):
            return self.head(self.body(self.emb(ids)))
    model = LM().to(dev)
    def loss_of(ids):
        out = model(ids)
        return nn.functional.cross_entropy(out.flatten(0, 1), ids.flatten())
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
if os.environ.get("BENCH_COMPILE"):       # --compile BACKEND
    model = torch.compile(model, backend=os.environ["BENCH_COMPILE"])
ids = torch.randint(0, VOCAB, (batch, seq), device=dev)
def sync_dev():
    if dev == "cuda":
        torch.cuda.synchronize()
def step():
    with torch.autocast(dev, dtype=torch.bfloat16):
        loss = loss_of(ids)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss
for _ in range(warmup):
    step()
sync_dev()
print("WARM", flush=True)
if variant == "inprocess":
    # Blocks of `steps` steps, each after a few untimed ones, in the mode
    # the bench set (it reads READY, switches, then creates the file).
    k = 0
    while True:
        k += 1
        print("READY %d" % k, flush=True)
        go = "%s-%d" % (sync, k)
        while not os.path.exists(go):
            time.sleep(0.005)
        if open(go).read() == "end":
            break
        for _ in range(3):
            step()
        sync_dev()
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = step()
        sync_dev()
        print("BLOCK %d %r %r" % (k, (time.perf_counter() - t0) / steps,
                                  float(loss)), flush=True)
    sys.exit(0)
while not os.path.exists(sync):
    time.sleep(0.01)
ctx = None
if variant == "profiler":
    from torch.profiler import profile, ProfilerActivity
    ctx = profile(activities=[ProfilerActivity.CPU] +
                  ([ProfilerActivity.CUDA] if dev == "cuda" else []))
    ctx.__enter__()
sync_dev()
t0 = time.perf_counter()
for _ in range(steps):
    loss = step()
sync_dev()
t1 = time.perf_counter()
if ctx is not None:
    ctx.__exit__(None, None, None)
print("ELAPSED", (t1 - t0) / steps, float(loss), flush=True)
"""

VARIANTS = {
    "baseline": {},
    "idle": {"PROBING": "1"},
    "full": {"PROBING": "1", "PROBING_TORCH_PROFILING": "on,step_rate=1"},
    "auto": {"PROBING": "1", "PROBING_TORCH_PROFILING": "on"},
    "sampling": {"PROBING": "1"},
    "austin": {},
    "profiler": {},
}
DEFAULT_VARIANTS = "baseline,idle,auto,sampling,profiler"


def run(variant, a, tmp):
    e = dict(os.environ)
    for k in ("PROBING", "PROBING_TORCH_PROFILING"):
        e.pop(k, None)
    e.update(VARIANTS[variant])
    e["PYTHONUNBUFFERED"] = "1"
    userbase = os.path.join(BUILD, "userbase")
    if os.path.isdir(userbase):  # a build tree (the GPU run installs it)
        e["PYTHONUSERBASE"] = userbase
    sync = os.path.join(tmp, "go-%s-%f" % (variant, time.time()))
    cmd = [sys.executable, "-c", DRIVER, variant, str(a.layers),
           str(a.batch), str(a.seq), str(a.warmup), str(a.steps), sync]
    if variant == "austin":  # the peer, at the sampler's rate
        cmd = ["austin", "-i", "10000", "-o", os.devnull] + cmd
    e["BENCH_COMPILE"] = a.compile
    e["BENCH_VOCAB"] = str(a.vocab)
    # austin 3.7 sometimes does not recognise the process it started as
    # Python ("not a Python process") and quits: started again, 3 times.
    for attempt in range(3 if variant == "austin" else 1):
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=e)
        line = p.stdout.readline()
        if line.startswith("WARM"):
            break
        p.kill()
        why = p.stderr.read()[-3000:]
        p.wait()
    else:
        sys.exit("%s: no warm-up: %s %s" % (variant, line, why))
    if variant == "sampling":
        cp = subprocess.run([CLI, "-t", str(p.pid), "perf", "--start", "--hz",
                             "100"], capture_output=True, text=True, timeout=60)
        if cp.returncode != 0:
            p.kill()
            sys.exit("sampling: perf --start failed: %s" % cp.stderr)
    open(sync, "w").close()
    out, err = p.communicate(timeout=600)
    if p.returncode != 0:
        sys.exit("%s run failed (%d):\n%s" % (variant, p.returncode, err[-3000:]))
    line = [l for l in out.splitlines() if l.startswith("ELAPSED")][0]
    return float(line.split()[1]), float(line.split()[2])


MODES = ("off", "auto", "sampling")


def cli(pid, *args):
    cp = subprocess.run([CLI, "-t", str(pid), *args], capture_output=True,
                        text=True, timeout=60)
    if cp.returncode != 0:
        sys.exit("probing %s: %s" % (" ".join(args), cp.stderr))
    return cp.stdout


def torch_status(pid):
    out = cli(pid, "-f", "json", "config", "torch.status")
    return json.dumps(json.loads(out))


def set_mode(pid, mode):
    """Tracing and the sampler as mode says, once the agent says so."""
    cli(pid, "config", "torch.profiling=%s" % ("on" if mode == "auto" else "off"))
    if mode == "sampling":
        cli(pid, "perf", "--start", "--hz", "100")
    else:
        cli(pid, "perf", "--stop")
    want = "on" if mode == "auto" else "off"
    deadline = time.time() + 10
    while time.time() < deadline:
        st = torch_status(pid)
        if ('"%s' % want) in st:
            return
        time.sleep(0.05)
    sys.exit("torch.status never became %s: %s" % (want, st))


def run_inprocess(a, tmp):
    """One process with the agent: blocks of a.steps steps in each mode,
    alternating (the order rotates every round), a.runs rounds."""
    e = dict(os.environ)
    e.pop("PROBING_TORCH_PROFILING", None)
    e.update({"PROBING": "1", "PYTHONUNBUFFERED": "1",
              "BENCH_COMPILE": a.compile, "BENCH_VOCAB": str(a.vocab)})
    userbase = os.path.join(BUILD, "userbase")
    if os.path.isdir(userbase):  # a build tree (the GPU run installs it)
        e["PYTHONUSERBASE"] = userbase
    sync = os.path.join(tmp, "block")
    p = subprocess.Popen([sys.executable, "-c", DRIVER, "inprocess",
                          str(a.layers), str(a.batch), str(a.seq),
                          str(a.warmup), str(a.steps), sync],
                         stdout=subprocess.PIPE, text=True, env=e)
    times = {m: [] for m in MODES}
    losses = set()

    def expect(word):
        line = p.stdout.readline()
        if not line.startswith(word):
            p.kill()
            sys.exit("in-process run: %r instead of %s" % (line, word))
        return line.split()

    expect("WARM")
    for r in range(a.runs):
        for m in MODES[r % 3:] + MODES[:r % 3]:
            k = expect("READY")[1]
            set_mode(p.pid, m)
            open("%s-%s" % (sync, k), "w").write("go")
            _, _, t, loss = expect("BLOCK")
            times[m].append(float(t))
            losses.add(float(loss))
            print("# round %d %-9s %.2f ms/step" % (r + 1, m, float(t) * 1e3),
                  file=sys.stderr, flush=True)
    k = expect("READY")[1]
    open("%s-%s" % (sync, k), "w").write("end")
    p.wait(timeout=120)
    return times


def device_name(torch):
    return (torch.cuda.get_device_name(0) if torch.cuda.is_available()
            else "CPU " + platform.machine())


def print_table(first, each, names, times, base):
    """The Markdown table of times {name: [seconds per step, ...]}: each
    name's median, and its ratio and paired ratio to base's (where base
    was measured)."""
    b = times.get(base)
    bmed = statistics.median(b) if b else None
    print("| %s | ms/step (median) | ratio | paired | %s (ms) |" % (first, each))
    print("|---|---|---|---|---|")
    for v in names:
        med = statistics.median(times[v])
        ratio = "%.3fx" % (med / bmed) if bmed else "-"
        paired = ("%.3fx" % statistics.median(
            x / y for x, y in zip(times[v], b)) if b else "-")
        print("| %s | %.2f | %s | %s | %s |" % (
            v, med * 1e3, ratio, paired,
            " ".join("%.2f" % (x * 1e3) for x in times[v])))


def print_inprocess(a, times):
    import torch
    dev = device_name(torch)
    print("In one process with the agent: blocks of %d steps (after 3 "
          "untimed) with tracing and the sampler off, `auto` tracing, the "
          "sampler at 100 Hz, alternating, %d rounds; %s, torch %s, "
          "CPython %s" % (a.steps, a.runs, dev, torch.__version__,
                          platform.python_version()))
    print()
    print_table("mode", "blocks", MODES, times, "off")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--variants", default=DEFAULT_VARIANTS,
                    help="of %s (default %s)" % (",".join(VARIANTS),
                                                 DEFAULT_VARIANTS))
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--compile", default="", metavar="BACKEND",
                    help="torch.compile the model (inductor, eager)")
    ap.add_argument("--inprocess", action="store_true",
                    help="one process, modes alternating in blocks")
    a = ap.parse_args()
    if a.inprocess:
        with tempfile.TemporaryDirectory() as tmp:
            print_inprocess(a, run_inprocess(a, tmp))
        return
    names = a.variants.split(",")
    times = {v: [] for v in names}
    losses = {v: set() for v in names}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.runs):
            order = names[r % len(names):] + names[:r % len(names)]
            for v in order:
                t, loss = run(v, a, tmp)
                times[v].append(t)
                losses[v].add(loss)
                print("# round %d %-9s %.2f ms/step  loss %.6f" %
                      (r + 1, v, t * 1e3, loss), file=sys.stderr, flush=True)
    import torch
    dev = device_name(torch)
    import importlib.util
    model = ("GPT-2 (transformers)" if importlib.util.find_spec("transformers")
             else "torch's TransformerEncoder LM")
    print("%s, %d layers x 768, vocabulary %d, batch %d x %d tokens, bf16 autocast, AdamW%s; "
          "%d timed steps after %d, %d runs each; %s, torch %s, CPython %s" %
          (model, a.layers, a.vocab, a.batch, a.seq,
           ", torch.compile(backend=%r)" % a.compile if a.compile else "",
           a.steps, a.warmup, a.runs, dev, torch.__version__,
           platform.python_version()))
    print()
    print_table("variant", "runs", names, times, "baseline")
    print()
    print("losses of the last step, per variant (identical models and data): "
          + "; ".join("%s %s" % (v, sorted(losses[v])) for v in names))


if __name__ == "__main__":
    main()
