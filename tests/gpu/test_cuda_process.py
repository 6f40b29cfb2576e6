"""Probing on a CUDA process (issue 34, item 3): injecting into a running
CUDA training loop, a backtrace while a thread holds the GIL in a CUDA
call, native sampling with the CUDA and cuBLAS frames named, a crash
report of a CUDA process, python.comm_collective with the NCCL backend,
the hang watchdog on a stuck synchronize.  (torch.compile with inductor
on CUDA and tracing on: test_torch_cuda.py.)

Each test prints what it saw: the device run's log is the record
(docs/gpu.md).
"""
import json
import os
import re
import signal
import time

from conftest import free_port, probing, wait_for

TRAIN = """
import os, time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
y = torch.randn(256, 1024, device="cuda")
def train_step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss
step = 0
while not os.path.exists("stop"):
    loss = train_step()
    step += 1
    if step % 100 == 0:
        print("STEP", step, float(loss), flush=True)
print("DONE", step, flush=True)
"""


def last_step(t):
    steps = [int(l.split()[1]) for l in t.output().splitlines()
             if l.startswith("STEP ")]
    return steps[-1] if steps else 0


def main_frames(r, pid):
    body = r.json()
    main = [th for th in body["threads"] if th["nativeId"] == pid]
    assert main, body
    return body, [f["func"] for f in main[0]["frames"]]


def test_inject_into_a_running_cuda_training_loop(spawn, tmp_path):
    t = spawn(TRAIN, agent=None)
    t.wait_line("STEP 100", timeout=120)
    r = probing("inject", target=t.pid, timeout=120)
    print("inject:", r)
    assert r.rc == 0, r
    t.wait_agent()
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    body, funcs = main_frames(r, t.pid)
    print("main thread:", funcs, "gil:", body["gil"])
    assert funcs[-1] == "<module>", funcs
    # Training goes on, with the agent in.
    at = last_step(t)
    wait_for(lambda: last_step(t) >= at + 300, 120, "300 more steps")
    (tmp_path / "stop").write_text("")
    assert t.proc.wait(timeout=120) == 0, t.output()
    assert "DONE" in t.output()


# The GIL held in a CUDA call: torch releases it around its own waits, a
# C extension calling the driver need not.  ctypes.PyDLL keeps the GIL
# through the call: cuCtxSynchronize waits for the queued spin kernel
# (torch.cuda._sleep) with the GIL held, for many seconds.
GIL_IN_CUDA = """
import ctypes, os, threading, time, torch
x = torch.ones(1, device="cuda")
torch.cuda.synchronize()
cuda = ctypes.PyDLL("libcuda.so.1")
def ticker():
    while True:
        time.sleep(0.02)
threading.Thread(target=ticker, name="ticker", daemon=True).start()
def wait_for_gpu(cycles):
    torch.cuda._sleep(cycles)
    print("BLOCKING", flush=True)
    rc = cuda.cuCtxSynchronize()
    print("SYNCED", rc, flush=True)
while not os.path.exists("stop"):
    wait_for_gpu(40 * 10**9)
"""


def test_backtrace_while_the_gil_is_held_in_a_cuda_call(spawn, tmp_path):
    t = spawn(GIL_IN_CUDA)
    t.wait_agent(timeout=120)
    t.wait_line("BLOCKING", timeout=120)
    time.sleep(1.0)
    began = time.time()
    r = probing("backtrace", "-f", "json", target=t.pid)
    took = time.time() - began
    print("backtrace took %.1fs: %r" % (took, r))
    assert r.rc == 0, r
    body, funcs = main_frames(r, t.pid)
    print("main thread:", funcs, "gil:", body["gil"])
    assert "SYNCED" not in t.output(), "the GPU finished too soon to test"
    assert body["gil"]["acquired"] is False, body["gil"]
    assert body["gil"]["holderNativeId"] == t.pid, body["gil"]
    assert funcs[:2] == ["wait_for_gpu", "<module>"], funcs
    # Without the GIL the threads have their kernel names: the ticker
    # is found by its stack.
    others = [[f["func"] for f in th["frames"]] for th in body["threads"]
              if th["nativeId"] != t.pid]
    assert any(fs and fs[0] == "ticker" for fs in others), others
    # The words a person reads say who holds it.
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and str(t.pid) in r.err, r
    assert t.alive()


MATMUL = """
import os, torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
def matmul_loop():
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    return c
print("READY", flush=True)
while not os.path.exists("stop"):
    matmul_loop()
"""

CUDA_NAME = re.compile(r"^(cu[A-Z]\w*|cublas\w*|cudart\w*|at::cuda::|"
                       r"c10::cuda::|at::native::\w*cuda|"
                       r"at::native::\w*(gemm|cublas))")


def test_native_sampling_names_cuda_and_cublas_frames(spawn, tmp_path):
    t = spawn(MATMUL)
    t.wait_agent(timeout=120)
    t.wait_line("READY", timeout=120)
    out = tmp_path / "cuda.folded"
    r = probing("flamegraph", "--native", "-d", "5s", "-o", out, target=t.pid,
                timeout=120)
    print("flamegraph:", r)
    assert r.rc == 0, r
    stacks = [l.rsplit(" ", 1)[0].split(";")
              for l in out.read_text().splitlines() if l.strip()]
    frames = {f for s in stacks for f in s}
    cuda = sorted(f for f in frames if "cu" in f.lower())
    print("%d stacks; frames naming CUDA: %s" % (len(stacks), cuda[:60]))
    named = [f for f in frames if CUDA_NAME.search(f)]
    assert named, "no CUDA or cuBLAS function named among %d frames" % len(frames)
    # The Python frames are spliced in above them.
    assert any(f.startswith("matmul_loop ") for s in stacks for f in s), \
        stacks[:5]
    assert t.alive()


CRASH = """
import ctypes, time, torch
x = torch.randn(1024, 1024, device="cuda")
y = (x @ x).sum().item()
print("CUDA UP", y, flush=True)
def crash():
    ctypes.string_at(0)
time.sleep(0.3)
crash()
"""


def test_crash_report_of_a_cuda_process(spawn, tmp_path):
    t = spawn(CRASH, env={"PROBING_CRASH": "1"})  # reports in its cwd
    assert t.proc.wait(timeout=180) == -signal.SIGSEGV, t.output()
    paths = sorted(tmp_path.glob("probing-crash-%d-*.txt" % t.pid))
    print("output:", t.output()[-2000:], "reports:", paths)
    assert len(paths) == 1, (paths, t.output())
    r = probing("report", "-f", "json", paths[0])
    assert r.rc == 0, r
    rep = r.json()
    first = rep["threads"][0]
    print("crashed thread:", [f["func"] for f in first["python"]],
          "threads:", len(rep["threads"]))
    assert rep["header"]["signal"] == "11"
    assert [f["func"] for f in first["python"]][-2:] == ["crash", "<module>"]
    assert first["native"], first
    # The CUDA process's other threads (torch's and the driver's) are in
    # the report without stopping it from being written.
    text = probing("report", paths[0])
    assert text.rc == 0 and text.out.startswith("Crash: SIGSEGV"), text


NCCL = """
import os, sys, time, torch, torch.distributed as dist
def agent_ready():
    for _ in range(400):
        if type(dist.isend).__name__ == "CommWrapper":  # all_reduce: a shim on torch 2.x
            return
        time.sleep(0.05)
    sys.exit("the wrappers never came")
agent_ready()
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d",
                        rank=0, world_size=1)
t = torch.ones(1 << 20, device="cuda")
for i in range(3):
    dist.all_reduce(t)
a, b = torch.ones(3, device="cuda"), torch.ones(2, device="cuda")
dist.all_gather_into_tensor(torch.empty(3, device="cuda"), a)
dist.broadcast(b, 0)
w = dist.all_reduce(t, async_op=True)
w.wait()
dist.barrier()
torch.cuda.synchronize()
print("CALLS DONE", float(t[0]), flush=True)
while not os.path.exists("stop"):
    time.sleep(0.05)
dist.destroy_process_group()
"""


def test_comm_collective_with_nccl(spawn, tmp_path):
    t = spawn(NCCL % free_port())
    t.wait_line("CALLS DONE", timeout=240)
    t.wait_agent()

    def rows():
        r = probing("query", "-f", "json", "SELECT op, state, seq, pg_seq, "
                    "shape FROM python.comm_collective ORDER BY id",
                    target=t.pid)
        assert r.rc == 0, r
        return r.json()
    wait_for(lambda: len(rows()) >= 7, 60, lambda: "7 rows: %s" % rows())
    got = rows()
    print(json.dumps(got, indent=1))
    ops = [r["op"] for r in got]
    assert ops.count("all_reduce") == 4, ops
    assert "broadcast" in ops and "barrier" in ops, ops
    assert any(op.startswith("all_gather") for op in ops), ops
    # The coalesced-free calls carry their own shapes.
    assert got[0]["shape"] == "[1048576]", got
    assert all(r["state"] == "done" for r in got
               if r["op"] != "barrier"), got
    (tmp_path / "stop").write_text("")
    assert t.proc.wait(timeout=120) == 0, t.output()


STUCK_SYNC = """
import os, time, torch
x = torch.ones(1, device="cuda")
torch.cuda.synchronize()
def stuck_on_the_gpu():
    torch.cuda._sleep(40 * 10**9)   # many seconds of GPU spinning
    print("STUCK", flush=True)
    torch.cuda.synchronize()
    print("MOVED", flush=True)
time.sleep(1.0)
stuck_on_the_gpu()
while not os.path.exists("stop"):
    time.sleep(0.05)
"""


def test_hang_watchdog_on_a_stuck_synchronize(spawn, tmp_path):
    t = spawn(STUCK_SYNC, env={"PROBING_HANG_TIMEOUT": "2s"})
    t.wait_line("STUCK", timeout=120)
    t.wait_agent()

    def stuck():
        r = probing("hangs", "-f", "json", target=t.pid)
        assert r.rc == 0, r
        # Stuck in torch's synchronize (a Python function) under ours.
        return [h for h in r.json() if h["func"] == "synchronize"]
    wait_for(stuck, 60, "the hang in synchronize to be recorded")
    row = stuck()[0]
    print("hang:", row)
    assert "MOVED" not in t.output(), "the GPU finished too soon to test"
    r = probing("hangs", "-f", "json", row["id"], target=t.pid)
    assert r.rc == 0, r
    main = r.json()["threads"][0]
    funcs = [f.get("func", "") for f in main["native"]]
    print("native:", funcs[:30])
    assert [f["func"] for f in main["python"]][:2] == \
        ["synchronize", "stuck_on_the_gpu"], main["python"]
    # Where the wait is: in the CUDA libraries under torch's synchronize.
    assert any("cuda" in f.lower() for f in funcs), funcs
