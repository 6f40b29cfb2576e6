"""The ways in, starting twice, exit, fork, TCP."""
import os
import subprocess
import time

import pytest

from conftest import (CLI, USERBASE, site_for, agent_listening, probing,
                      wait_for, free_port, tcp_listening)

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


def test_probing_set_but_no_agent_says_why(spawn, python, tmp_path):
    """PROBING=1 where this Python has no probing package (a Python the
    install did not cover): not "start it with PROBING=1", which was done,
    but why there is none and what fixes it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    t = spawn(python, IDLE, agent=None,
              env={"PROBING": "1", "PYTHONUSERBASE": str(empty)})
    t.wait_line("READY")
    time.sleep(1)
    if agent_listening(t.pid):
        pytest.skip("this Python has a probing package of its own")
    r = probing("backtrace", target=t.pid)
    assert r.rc == 4, r
    assert "has PROBING=1 in its environment but no Probing agent: its " \
        "Python (" in r.err and "has no probing package" in r.err, r
    assert "make install" in r.err and "inject" in r.err, r
    # Where the package is there but the agent did not start (PROBING
    # has a value it does not take): said too, and where the reason is.
    t2 = spawn(python, IDLE, agent=None, env={"PROBING": "maybe"})
    t2.wait_line("READY")
    assert "[probing] not started: PROBING=maybe" in t2.output()
    r = probing("backtrace", target=t2.pid)
    assert r.rc == 4 and "has PROBING=maybe in its environment" in r.err \
        and "it did not start" in r.err, r
    # The package on PYTHONPATH alone: found, but no .pth starts it.
    t3 = spawn(python, IDLE, agent=None,
               env={"PROBING": "1", "PYTHONUSERBASE": str(empty),
                    "PYTHONPATH": site_for(python)})
    t3.wait_line("READY")
    r = probing("backtrace", target=t3.pid)
    assert r.rc == 4 and "finds a probing package but no probing.pth" \
        in r.err and "scripts/install BUILD PREFIX" in r.err, r


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


# Workers forked from the program (its agent's threads are not in them),
# and started the platform's default way: fork up to 3.13, forkserver
# from 3.14 (the main module imported again in a fresh interpreter, hence
# the guard).
@pytest.mark.parametrize("context", ["fork", None])
def test_torch_dataloader_workers(spawn, context):
    t = spawn("/usr/bin/python3", """\
import torch
from torch.utils.data import DataLoader, TensorDataset
if __name__ == "__main__":
    ds = TensorDataset(torch.arange(64.0).reshape(32, 2))
    total = 0.0
    for epoch in range(2):
        for (batch,) in DataLoader(ds, batch_size=4, num_workers=2,
                                   multiprocessing_context=%r):
            total += float(batch.sum())
    print("TOTAL", total, flush=True)
""" % context)
    assert t.proc.wait(timeout=180) == 0, t.output()
    assert "TOTAL 4032.0" in t.output()


def test_localhost_listens_where_ipv4_clients_reach_it(python, tmp_path):
    """PROBING_LISTEN=localhost:P where localhost is ::1 first, then
    127.0.0.1 (Debian 13's glibc answers so): the agent listened on [::1]
    only and 127.0.0.1:P was refused.  Where this machine answers
    127.0.0.1 first (Debian 12), the target runs in a mount namespace of
    its own with an /etc/hosts that lists ::1 first (root only)."""
    order = "import socket; print([a[4][0] for a in socket.getaddrinfo('localhost', 1, type=socket.SOCK_STREAM)])"
    here = subprocess.run([python, "-c", order], capture_output=True, text=True, timeout=60)
    port = free_port()
    script = tmp_path / "idle.py"
    script.write_text("import socket, time\n"
                      "print('ORDER', [a[4][0] for a in socket.getaddrinfo("
                      "'localhost', 1, type=socket.SOCK_STREAM)], flush=True)\n"
                      "while True:\n    time.sleep(0.05)\n")
    if here.stdout.strip() == "['::1', '127.0.0.1']":
        cmd = [python, str(script)]
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root: a mount namespace with its own /etc/hosts")
        hosts = tmp_path / "hosts"
        hosts.write_text("::1 localhost ip6-localhost\n127.0.0.1 localhost\n")
        # Private propagation, so that the bind stays in the namespace.
        # In a chroot whose / is no mount point unshare cannot set it.
        ns = ["unshare", "--mount", "--propagation", "private"]
        tried = subprocess.run(ns + ["true"], capture_output=True, text=True, timeout=60)
        if tried.returncode != 0:
            pytest.skip("localhost is %s here and no private mount namespace: %s"
                        % (here.stdout.strip(), tried.stderr.strip()))
        cmd = ns + ["sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"',
                    str(hosts), python, str(script)]
    e = dict(os.environ, PROBING="1", PYTHONUSERBASE=USERBASE,
             PYTHONUNBUFFERED="1", PROBING_TOKEN="none",
             PROBING_LISTEN="localhost:%d" % port)
    if os.environ.get("PROBING_TARGET_PRELOAD"):  # the ASan build
        e["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
    out = open(tmp_path / "out", "w")
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=e)
    try:
        wait_for(lambda: "ORDER" in (tmp_path / "out").read_text() or p.poll() is not None,
                 60, "the target")
        assert p.poll() is None, (tmp_path / "out").read_text()
        text = (tmp_path / "out").read_text()
        assert "['::1', '127.0.0.1']" in text, text  # the order that broke
        tcp_listening(port)     # 127.0.0.1:P accepts
        r = probing("eval", "1 + 1", target="127.0.0.1:%d" % port)
        assert r.rc == 0 and r.out.strip() == "2", r
    finally:
        p.kill()
        p.wait(timeout=30)
