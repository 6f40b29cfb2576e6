"""probing cluster beyond loopback: ranks on other hosts, with the job's
token shared through the rendezvous store.

test_torchrun_token_beyond_loopback: one torchrun job on this machine,
its ranks made to listen on the machine's own address (cluster.listen_host
route, MASTER_ADDR that address): every rank adopts one token from the
store before it listens, a wrong token is refused, the right one reaches
every rank.

test_torchrun_two_hosts_netns: two "hosts" made of network namespaces (iproute2:
`ip netns`, veth pairs on a bridge), torchrun on each with --nnodes 2 and
2 ranks, nothing set but PROBING=2: the ranks see a job across hosts,
listen on their namespace's address and share the token; the CLI on host
A (its token file) and in the root namespace (PROBING_TOKEN) reach all 4.
"""
import json
import os
import shutil
import socket
import stat
import subprocess

import pytest

from conftest import CLI, SYSTEM_PYTHON, probing, wait_for
from test_cluster import Job, lacks_libuv, needs_torch

AUTH = 12
NET = "10.213.77."  # the test's own subnet between the namespaces


def own_address():
    """A non-loopback IPv4 address of this machine, or None."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope",
                              "global", "up"], capture_output=True,
                             text=True).stdout
    except FileNotFoundError:
        return None
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            return parts[parts.index("inet") + 1].split("/")[0]
    return None


def private_dirs(tmp, name):
    """XDG_RUNTIME_DIR and HOME of their own (the token file lives there),
    so that the test neither reads nor replaces the user's."""
    run = os.path.join(tmp, name + "-run")
    home = os.path.join(tmp, name + "-home")
    for d in (run, home):
        os.makedirs(d, mode=0o700, exist_ok=True)
        os.chmod(d, 0o700)
    return {"XDG_RUNTIME_DIR": run, "HOME": home}


def token_of(dirs):
    path = os.path.join(dirs["XDG_RUNTIME_DIR"], "probing", "token")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as f:
        return f.read().strip()


def store_get(host, port, key):
    """A key of the job's store, read by torch itself."""
    # use_libuv=False where this torch lacks libuv but asks for it by
    # default (test_cluster.lacks_libuv); torch 1.13 has no such argument.
    nolibuv = ", use_libuv=False" if lacks_libuv() else ""
    code = ("import datetime, sys, torch.distributed as d\n"
            "s = d.TCPStore(sys.argv[1], int(sys.argv[2]), is_master=False,"
            " timeout=datetime.timedelta(seconds=20)%s)\n"
            "print(s.get(sys.argv[3]).decode())\n" % nolibuv)
    r = subprocess.run([SYSTEM_PYTHON, "-c", code, host, str(port), key],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@needs_torch
def test_torchrun_token_beyond_loopback(tmp_path):
    ip = own_address()
    if ip is None:
        pytest.skip("this machine has no address other than loopback")
    dirs = private_dirs(str(tmp_path), "host")
    job = Job(str(tmp_path), "--steps", "3", "--linger", "600",
              master_addr=ip,
              env=dict(dirs, PROBING_CLUSTER_LISTEN_HOST="route"))
    try:
        job.wait_ranks()
        r = probing("cluster", "nodes", "-f", "json", target=job.pids[0],
                    env=dirs)
        assert r.rc == 0, r
        nodes = [n for n in r.json() if n["role"] == "rank"]
        addrs = [n["addr"] for n in nodes]
        assert all(a.startswith(ip + ":") for a in addrs), addrs
        assert len(set(addrs)) == 4
        assert all(n["status"] == "up" for n in nodes), nodes
        # One token for the job: in the store, adopted by every rank,
        # written to the token file (0600) for the CLI.
        token = token_of(dirs)
        assert store_get(ip, job.master_port, "probing/none/token") == token
        for rank in range(4):
            r = probing("config", target=job.pids[rank], env=dirs)
            assert "registered in the store" in r.out, r
            assert "with the job's token" in r.out, r
            assert os.path.join(dirs["XDG_RUNTIME_DIR"], "probing",
                                "token") in r.out, r
        # A rank refuses a wrong token, and none.
        wrong = "0" * 64
        r = probing("-t", addrs[2], "query", "SELECT 1 AS one",
                    env=dict(dirs, PROBING_TOKEN=wrong))
        assert r.rc == AUTH and "refused the token" in r.err, r
        r = probing("-t", addrs[2], "query", "SELECT 1 AS one",
                    env=private_dirs(str(tmp_path), "stranger"))
        assert r.rc == AUTH and "needs a token" in r.err, r
        r = probing("cluster", "query", "SELECT 1 AS one",
                    target=job.pids[0], env=dict(dirs, PROBING_TOKEN=wrong))
        assert r.rc == AUTH, r
        assert r.err.count("refused the token") == 4, r
        assert "0 of 4 nodes answered" in r.err
        # The right one, from the token file: every rank answers.
        r = probing("cluster", "query", "SELECT value AS pid FROM "
                    "probing.config WHERE name = 'agent.pid'", "-f", "json",
                    target=job.pids[3], env=dirs)
        assert r.rc == 0, r
        assert {int(x["rank"]): int(x["pid"]) for x in r.json()} == job.pids
        # Once every rank lingers (torch 2.x's first steps import sympy
        # and more for a while), all four are in one place.
        wait_for(lambda: job.text().count("done, lingering") == 4, 120,
                 "the ranks to finish training")
        r = probing("cluster", "backtrace", target=job.pids[1],
                    env=dict(dirs, PROBING_TOKEN=token))
        assert r.rc == 0 and r.out.startswith("ranks 0-3 (4 of 4)"), r
    finally:
        job.stop()


# ---- two hosts on one machine: network namespaces --------------------------

def netns_unavailable():
    """Why namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "no ip(8) (Debian's iproute2)"
    if shutil.which("nsenter") is None:
        return "no nsenter(1) (util-linux)"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    name = "probing-check-%d" % os.getpid()
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return "'ip netns add' is not permitted here: " + r.stderr.strip()
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    r = subprocess.run(["ip", "link", "add", "pbrcheck%d" % (os.getpid() %
                        10000), "type", "bridge"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return "cannot make a bridge: " + r.stderr.strip()
    subprocess.run(["ip", "link", "del", "pbrcheck%d" % (os.getpid() %
                    10000)], capture_output=True)
    return None


def inside_ns(ns):
    """A command prefix that runs a command in network namespace ns.
    nsenter rather than `ip netns exec` or `ip -n`: those also make a
    mount namespace and `mount --make-rslave /`, which fails where / is
    not a mount point (a chroot, as scripts/sysroot's); only the network
    is wanted here."""
    return ("nsenter", "--net=/run/netns/" + ns)


def sh(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, (cmd, r.stderr)


@pytest.fixture
def two_hosts():
    """Namespaces A (NET.1) and B (NET.2) on a bridge that has NET.254 in
    the root namespace; yields their names."""
    why = netns_unavailable()
    if why:
        pytest.skip(why)
    tag = "%d" % (os.getpid() % 100000)
    hosts = ["probing-a-" + tag, "probing-b-" + tag]
    br = "pbr" + tag
    try:
        sh("ip", "link", "add", br, "type", "bridge")
        sh("ip", "addr", "add", NET + "254/24", "dev", br)
        sh("ip", "link", "set", br, "up")
        for i, ns in enumerate(hosts):
            outside, inside = "pv%s%s" % ("ab"[i], tag), "pi%s%s" % ("ab"[i],
                                                                     tag)
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", outside, "type", "veth", "peer", "name",
               inside)
            sh("ip", "link", "set", inside, "netns", ns)
            sh(*inside_ns(ns), "ip", "link", "set", inside, "name", "eth0")
            sh(*inside_ns(ns), "ip", "addr", "add", NET + "%d/24" % (i + 1),
               "dev", "eth0")
            sh(*inside_ns(ns), "ip", "link", "set", "eth0", "up")
            sh(*inside_ns(ns), "ip", "link", "set", "lo", "up")
            sh("ip", "link", "set", outside, "master", br)
            sh("ip", "link", "set", outside, "up")
        yield hosts
    finally:
        for ns in hosts:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", br], capture_output=True)


def in_ns(ns, *args, target=None, env=None, timeout=60):
    """The CLI run inside namespace ns."""
    cmd = [*inside_ns(ns), CLI]
    if target is not None:
        cmd += ["-t", str(target)]
    e = dict(os.environ)
    e.pop("PROBING_TARGET", None)
    e.update(env or {})
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True,
                       text=True, env=e, timeout=timeout)
    r.rc, r.out, r.err = r.returncode, r.stdout, r.stderr
    r.json = lambda: json.loads(r.stdout)
    return r


@needs_torch
def test_torchrun_two_hosts_netns(two_hosts, tmp_path):
    tmp = str(tmp_path)
    dirs = [private_dirs(tmp, "a"), private_dirs(tmp, "b")]
    port = 29400 + os.getpid() % 500
    jobs = []
    try:
        for i, ns in enumerate(two_hosts):
            jobs.append(Job(tmp, "--steps", "3", "--linger", "600",
                            prefix=inside_ns(ns), nproc=2,
                            nnodes=2, node_rank=i, master_addr=NET + "1",
                            master_port=port, name="host%d" % i,
                            env=dict(dirs[i], GLOO_SOCKET_IFNAME="eth0")))
        pids = {}
        wait_for(lambda: len({**jobs[0].ranks_started(),
                              **jobs[1].ranks_started()}) == 4, 300,
                 "4 ranks on 2 hosts")
        pids = {**jobs[0].pids, **jobs[1].pids}
        host_a = two_hosts[0]

        def registered():
            r = in_ns(host_a, "query", "SELECT count(*) AS n FROM "
                      "cluster.nodes WHERE role = 'rank'", target=pids[0],
                      env=dirs[0])
            return r.rc == 0 and r.out.split()[-1] == "4"
        wait_for(registered, 120, "4 ranks in cluster.nodes")
        # Each rank listens on its host's address, found by itself.
        r = in_ns(host_a, "cluster", "nodes", "-f", "json", target=pids[0],
                  env=dirs[0])
        assert r.rc == 0, r.stderr
        nodes = {int(n["rank"]): n for n in r.json() if n["role"] == "rank"}
        for rank in range(4):
            host = NET + ("1" if rank in jobs[0].pids else "2")
            assert nodes[rank]["addr"].startswith(host + ":"), nodes
            assert int(nodes[rank]["pid"]) == pids[rank]
            assert nodes[rank]["status"] == "up", nodes
        # One token on both hosts, through the store.
        token = token_of(dirs[0])
        assert token_of(dirs[1]) == token
        # From host A: its token file.
        r = in_ns(host_a, "cluster", "query", "SELECT value AS pid FROM "
                  "probing.config WHERE name = 'agent.pid'", "-f", "json",
                  target=pids[0], env=dirs[0])
        assert r.rc == 0, r.stderr
        assert {int(x["rank"]): int(x["pid"]) for x in r.json()} == pids
        # From the root namespace, through any rank's address, once
        # every rank lingers (test_torchrun_token_beyond_loopback).
        wait_for(lambda: sum(j.text().count("done, lingering")
                             for j in jobs) == 4, 120,
                 "the ranks to finish training")
        stranger = private_dirs(tmp, "root")
        r = probing("cluster", "backtrace", target=nodes[3]["addr"],
                    env=dict(stranger, PROBING_TOKEN=token))
        assert r.rc == 0 and r.out.startswith("ranks 0-3 (4 of 4)"), r
        r = probing("cluster", "nodes", target=nodes[3]["addr"], env=stranger)
        assert r.rc == AUTH and "needs a token" in r.err, r
        r = probing("-t", nodes[1]["addr"], "query", "SELECT 1",
                    env=dict(stranger, PROBING_TOKEN="x" * 64))
        assert r.rc == AUTH and "refused the token" in r.err, r
    finally:
        for j in jobs:
            j.stop()
