"""The ways in, starting twice, exit, fork, TCP."""
import os
import subprocess

from conftest import CLI, site_for, agent_listening, probing, wait_for, free_port

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def test_env_door_pth(spawn, python):
    t = spawn(python, IDLE, agent="env")
    t.wait_line("READY")
    t.wait_agent()
    r = probing("eval", "import probing; probing.address()", target=t.pid)
    assert r.rc == 0, r
    assert "@probing-%d" % t.pid in r.out


def test_no_agent_without_probing_env(spawn, python):
    t = spawn(python, IDLE, agent=None)
    t.wait_line("READY")
    assert not agent_listening(t.pid)
    r = probing("backtrace", target=t.pid)
    assert r.rc == 4, r
    assert "has no Probing agent" in r.err and "inject" in r.err


def test_init_door_with_tcp_and_twice_is_noop(spawn, python):
    port = free_port()
    t = spawn(python, """\
import probing, time
a = probing.init(listen="127.0.0.1:%d")
b = probing.init(listen="127.0.0.1:%d")
c = probing.init()
print("ADDR", a, b == a, c == a, flush=True)
print("READY", flush=True)
while True:
    time.sleep(0.01)
""" % (port, port), agent=None, env={"PYTHONPATH": site_for(python)})
    t.wait_line("READY")
    assert "ADDR @probing-%d,127.0.0.1:%d True True" % (t.pid, port) in t.output()
    r = probing("eval", "1 + 1", target="127.0.0.1:%d" % port)
    assert r.rc == 0, r
    assert r.out.strip() == "2"


def test_probing_port_env(spawn, python):
    port = free_port()
    t = spawn(python, IDLE, env={"PROBING_PORT": str(port)})
    t.wait_line("READY")
    t.wait_agent()
    wait_for(lambda: probing("eval", "3", target="127.0.0.1:%d" % port).rc == 0,
             10, "TCP listener")


def test_non_loopback_listen_refused(spawn, python):
    # Without a usable token (here PROBING_TOKEN is not one); the token
    # cases are in test_auth.py.
    t = spawn(python, """\
import probing
try:
    probing.init(listen="0.0.0.0:%d")
except OSError as e:
    print("REFUSED", e, flush=True)
""" % free_port(), agent=None, env={"PYTHONPATH": site_for(python), "PROBING_TOKEN": "short"})
    assert t.proc.wait(timeout=60) == 0
    assert "REFUSED" in t.output() and "loopback" in t.output()


def test_clean_exit_with_agent(spawn, python):
    t = spawn(python, """\
import threading, time
def work():
    time.sleep(0.2)
threads = [threading.Thread(target=work) for _ in range(4)]
for th in threads: th.start()
for th in threads: th.join()
print("BYE", flush=True)
""")
    assert t.proc.wait(timeout=60) == 0
    out = t.output()
    assert "BYE" in out
    assert "Fatal" not in out and "Segmentation" not in out


def test_exit_while_a_client_is_connected(spawn, python):
    t = spawn(python, """\
import time, sys
print("READY", flush=True)
time.sleep(1.5)
sys.exit(5)
""")
    t.wait_line("READY")
    t.wait_agent()
    # a repl session open while the target exits
    p = subprocess.Popen([CLI, "-t", str(t.pid), "repl"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert t.proc.wait(timeout=60) == 5
    p.kill()
    p.wait()


def test_fork_child_unharmed_and_can_start_its_own(spawn, python):
    t = spawn(python, """\
import os, sys, time
import probing
print("READY", flush=True)
time.sleep(0.5)
pid = os.fork()
if pid == 0:
    # the parent's agent is not ours: no socket of ours yet
    addr = probing.init()
    print("CHILD", os.getpid(), addr, flush=True)
    time.sleep(3)
    os._exit(7)
_, status = os.waitpid(pid, 0)
print("CHILD-EXIT", os.waitstatus_to_exitcode(status), flush=True)
while True:
    time.sleep(0.01)
""")
    t.wait_line("CHILD ")
    line = [l for l in t.output().splitlines() if l.startswith("CHILD ")][0]
    child = int(line.split()[1])
    assert "@probing-%d" % child in line
    # the child answers on its own socket
    r = probing("eval", "import os; os.getpid()", target=child)
    assert r.rc == 0, r
    assert r.out.strip() == str(child)
    t.wait_line("CHILD-EXIT 7", timeout=30)
    # and the parent's agent still works
    r = probing("eval", "import os; os.getpid()", target=t.pid)
    assert r.out.strip() == str(t.pid)


def test_torch_dataloader_workers(spawn):
    t = spawn("/usr/bin/python3", """\
import torch
from torch.utils.data import DataLoader, TensorDataset
ds = TensorDataset(torch.arange(64.0).reshape(32, 2))
total = 0.0
for epoch in range(2):
    for (batch,) in DataLoader(ds, batch_size=4, num_workers=2):
        total += float(batch.sum())
print("TOTAL", total, flush=True)
""")
    assert t.proc.wait(timeout=180) == 0, t.output()
    assert "TOTAL 4032.0" in t.output()
