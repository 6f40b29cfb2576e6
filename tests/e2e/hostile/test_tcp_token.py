"""Issue 27, item 13: tokenless loopback TCP.

Root ran `probing -t PID debug --pause --address 127.0.0.1:P` (or
`inject --listen 127.0.0.1:P`) on its own process; another local user
(here: nobody, through setpriv) then ran `probing -t 127.0.0.1:P eval ...`
and got in: the agent asked a TCP client for a token only when it
happened to have one, and loopback is reachable by every local user.

Now every TCP listener, loopback too, has a token (the user's own, or the
token file made 0600 for it), the command that opened it prints where the
token is, and root's CLI finds it by itself.  The one way without is the
target's user saying so: PROBING_TOKEN=none, loopback only.

Runs as root only (it needs another user); every test gives the target
and root's CLI their own XDG_RUNTIME_DIR and HOME, so no real token file
is read or written.

PROBING_TOKEN=none is the target's user's word, and exported in a shell it
reaches the CLI run from there too: the CLI takes it (and `--token none`)
to mean "send no token", not even the token file's (it used to stop with
a usage error, exit 2).  A rank of a job across hosts with it says that
none is for loopback only (it used to say "PROBING_TOKEN is set but is not
a token").
"""
import os
import shutil
import subprocess

import pytest

from conftest import CLI, SYSTEM_PYTHON, probing, wait_for, free_port, tcp_listening

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root: another local user (nobody) is "
                              "run through setpriv"),
    pytest.mark.skipif(shutil.which("setpriv") is None,
                       reason="needs setpriv (util-linux) to run as nobody"),
]

NOBODY = 65534

IDLE = """\
import time
secret = "root-only-41"
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def as_nobody(*args, target):
    """The real CLI run by another local user: nobody, with no groups,
    no token of its own and nothing of root's in its environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": "/nonexistent", "XDG_RUNTIME_DIR": ""}
    cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
           "--clear-groups", CLI, "-t", target] + list(args)
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                        env=env, cwd="/")
    return cp


def token_line(out):
    lines = [l for l in out.splitlines() if l.startswith("token: ")]
    assert lines, out
    return lines[0]


def test_debug_pause_address_keeps_other_users_out(spawn, python, dirs):
    port = free_port()
    t = spawn(python, IDLE, env=dirs)
    t.wait_line("READY")
    t.wait_agent()
    r = probing("debug", "--pause", "--address", "127.0.0.1:%d" % port,
                "--wait", "60", target=t.pid, env=dirs, timeout=120)
    assert r.rc == 0, r
    said = r.out
    r = probing("debug", "--resume", target=t.pid, env=dirs)
    assert r.rc == 0, r
    tcp_listening(port)

    other = as_nobody("eval", "secret", target="127.0.0.1:%d" % port)
    assert other.returncode == 12, (other.returncode, other.stdout, other.stderr)
    assert "needs a token" in other.stderr, other.stderr
    assert "root-only-41" not in other.stdout
    # The command said where the token is, and it is there, root's only.
    path = os.path.join(dirs["XDG_RUNTIME_DIR"], "probing", "token")
    assert token_line(said).startswith("token: %s " % path), said
    assert (os.stat(path).st_mode & 0o077) == 0
    # Root's CLI finds the token file by itself.
    r = probing("eval", "secret", target="127.0.0.1:%d" % port, env=dirs)
    assert r.rc == 0 and "root-only-41" in r.out, r
    assert t.alive()


def test_inject_listen_keeps_other_users_out(spawn, dirs):
    port = free_port()
    t = spawn(SYSTEM_PYTHON, IDLE, agent=None, env=dirs)
    t.wait_line("READY")
    r = probing("inject", "--listen", "127.0.0.1:%d" % port, target=t.pid,
                env=dirs, timeout=120)
    assert r.rc == 0, r
    said = r.out
    tcp_listening(port)
    other = as_nobody("eval", "secret", target="127.0.0.1:%d" % port)
    assert other.returncode == 12, (other.returncode, other.stdout, other.stderr)
    assert "root-only-41" not in other.stdout
    path = os.path.join(dirs["XDG_RUNTIME_DIR"], "probing", "token")
    assert token_line(said).startswith("token: %s " % path), said
    r = probing("eval", "secret", target="127.0.0.1:%d" % port, env=dirs)
    assert r.rc == 0 and "root-only-41" in r.out, r
    # The setting shows where the token comes from, never the token.
    r = probing("config", target=t.pid, env=dirs)
    assert r.rc == 0 and "server.token\t%s" % path in r.out, r


def test_no_token_only_when_the_user_says_so(spawn, python, dirs):
    """PROBING_TOKEN=none: the target's user opens loopback to every local
    user, knowingly; an address beyond loopback stays refused."""
    port = free_port()
    env = dict(dirs, PROBING_TOKEN="none", PROBING_PORT=str(port))
    t = spawn(python, IDLE, env=env)
    t.wait_line("READY")
    t.wait_agent()
    tcp_listening(port)
    other = as_nobody("eval", "secret", target="127.0.0.1:%d" % port)
    assert other.returncode == 0, (other.returncode, other.stdout, other.stderr)
    assert "root-only-41" in other.stdout
    assert not os.listdir(dirs["XDG_RUNTIME_DIR"])   # no token file made
    r = probing("config", target=t.pid, env=dirs)
    assert r.rc == 0 and "server.token\tnone" in r.out, r
    r = probing("config", "server.listen=0.0.0.0:%d" % free_port(),
                target=t.pid, env=dirs)
    assert r.rc != 0 and "refusing to listen on 0.0.0.0" in r.err, r
    # The same word in the CLI's environment (one shell for both): no
    # token sent, and the agent that wants none lets it in.
    r = probing("eval", "secret", target="127.0.0.1:%d" % port,
                env=dict(dirs, PROBING_TOKEN="none"))
    assert r.rc == 0 and "root-only-41" in r.out, r


def test_cli_token_none_sends_none(spawn, python, dirs):
    """`PROBING_TOKEN=none` (or `--token none`) in the CLI: no token at
    all, not even the token file's, so an agent that has one says it
    needs one (exit 12), never a usage error."""
    port = free_port()
    t = spawn(python, IDLE, env=dict(dirs, PROBING_PORT=str(port)))
    t.wait_line("READY")
    t.wait_agent()
    tcp_listening(port)
    addr = "127.0.0.1:%d" % port
    r = probing("eval", "secret", target=addr, env=dirs)   # the file's
    assert r.rc == 0 and "root-only-41" in r.out, r
    r = probing("eval", "secret", target=addr,
                env=dict(dirs, PROBING_TOKEN="none"))
    assert r.rc == 12, r
    assert "needs a token" in r.err and "none sent" in r.err, r
    assert "root-only-41" not in r.out
    r = probing("--token", "none", "eval", "secret", target=addr, env=dirs)
    assert r.rc == 12 and "none sent" in r.err, r
    # The unix socket needs no token: none is no obstacle there.
    r = probing("eval", "secret", target=t.pid,
                env=dict(dirs, PROBING_TOKEN="none"))
    assert r.rc == 0 and "root-only-41" in r.out, r


def test_cluster_rank_across_hosts_says_none_is_loopback_only(tmp_path,
                                                             dirs):
    """A rank of a job that listens beyond loopback (cluster.listen_host
    route, MASTER_ADDR this machine's own address) with PROBING_TOKEN=none
    stays on its unix socket and says why in cluster.status."""
    from test_cluster import Job, have_torch
    from test_cluster_remote import own_address
    if not have_torch():
        pytest.skip("needs torchrun and python3-torch")
    ip = own_address()
    if ip is None:
        pytest.skip("this machine has no address other than loopback")
    job = Job(str(tmp_path), "--steps", "3", "--linger", "600", nproc=1,
              master_addr=ip,
              env=dict(dirs, PROBING_TOKEN="none",
                       PROBING_CLUSTER_LISTEN_HOST="route"))
    try:
        wait_for(lambda: len(job.ranks_started()) == 1, 240, "rank 0")
        pid = job.pids[0]
        status = {}

        def told():
            r = probing("config", target=pid, env=dirs)
            for line in r.out.splitlines():
                if line.startswith("cluster.status\t"):
                    status["text"] = line.split("\t")[1]
            return "not listening on" in status.get("text", "")
        wait_for(told, 120, lambda: "cluster.status: %r" % status)
        assert "loopback only" in status["text"], status
        assert "is not a token" not in status["text"], status
        assert not os.listdir(dirs["XDG_RUNTIME_DIR"])   # no token file
    finally:
        job.stop()
