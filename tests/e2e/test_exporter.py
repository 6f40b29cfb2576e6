"""probing exporter (issue 31): every local agent's figures at GET
/metrics in Prometheus's text format, read here as text and by a real
Prometheus (Debian's prometheus, started on loopback by the test) that
scrapes it, its PromQL answers checked for a 2-rank torchrun job."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import CLI, SANITIZED_TARGETS, free_port, tcp_listening, wait_for
import test_cluster as tc

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""

# A sample line: name{labels} value
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Exporter:
    def __init__(self, *args):
        self.port = free_port()
        self.proc = subprocess.Popen([CLI, *args, "exporter", "--listen",
                                      "127.0.0.1:%d" % self.port],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.said = self.proc.stdout.readline()
        tcp_listening(self.port)

    def get(self, path="/metrics"):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                    timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def parse(text):
    """{name: {"type", "help", "samples": [(labels, value)]}}; every line
    is a comment of the two kinds or a sample, each family's comments
    once, before its samples."""
    fams = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in fams, "HELP twice: %s" % name
            fams[name] = {"help": line.split(" ", 3)[3], "samples": []}
        elif line.startswith("# TYPE "):
            _, _, name, typ = line.split()
            assert typ in ("gauge", "counter"), line
            fams[name]["type"] = typ
        else:
            m = LINE.match(line)
            assert m, "not a sample line: %r" % line
            assert m.group(1) in fams, "a sample before its HELP: %r" % line
            labels = dict(LABEL.findall(m.group(3) or ""))
            fams[m.group(1)]["samples"].append((labels, float(m.group(4))))
    return fams


def value(fams, name, **labels):
    vals = [v for l, v in fams[name]["samples"]
            if all(l.get(k) == str(x) for k, x in labels.items())]
    return vals[0] if len(vals) == 1 else None


def test_the_text_of_a_process(spawn, python):
    t = spawn(python, IDLE, env={"PROBING_MEMORY_INTERVAL_MS": "200"})
    t.wait_line("READY")
    t.wait_agent()
    x = Exporter()
    try:
        assert "http://127.0.0.1:%d/metrics" % x.port in x.said, x.said
        wait_for(lambda: value(parse(x.get()[2]), "probing_resident_memory_bytes",
                               pid=t.pid), 30, "RSS of the target")
        status, ctype, text = x.get()
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), ctype
        fams = parse(text)
        assert value(fams, "probing_up", pid=t.pid) == 1
        assert value(fams, "probing_resident_memory_bytes", pid=t.pid) > 1e6
        assert value(fams, "probing_python_blocks", pid=t.pid) > 0
        assert value(fams, "probing_sampler_running", pid=t.pid) == 0
        assert value(fams, "probing_hangs_total", pid=t.pid) == 0
        assert fams["probing_hangs_total"]["type"] == "counter"
        # No torch here: the step families are there, without a sample.
        assert value(fams, "probing_step_seconds", pid=t.pid) is None
        assert fams["probing_exporter_scrape_seconds"]["samples"][0][1] > 0
        # The page names its one route; others are 404.
        assert "/metrics" in x.get("/")[2]
        with pytest.raises(urllib.error.HTTPError) as e:
            x.get("/nothing")
        assert e.value.code == 404
        # A process that is gone is simply not listed any more.
        t.stop()
        wait_for(lambda: value(parse(x.get()[2]), "probing_up", pid=t.pid) is None,
                 30, "the target gone from the list")
    finally:
        assert x.stop() == 0


def test_one_target_and_usage(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    x = Exporter("-t", str(t.pid))
    try:
        fams = parse(x.get()[2])
        assert [l for l, _ in fams["probing_up"]["samples"]] == [{"pid": str(t.pid)}]
    finally:
        x.stop()
    r = subprocess.run([CLI, "exporter", "--listen", "nowhere"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "give HOST:PORT" in r.stderr, r


class Prometheus:
    """Debian's Prometheus on loopback, scraping the exporter every
    second into a database in tmp."""

    def __init__(self, tmp, target):
        self.port = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: probing\n"
                    "    static_configs:\n      - targets: ['%s']\n" % target)
        self.log = open(os.path.join(tmp, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + cfg,
             "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % self.port],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=tmp)
        wait_for(self.ready, 60, "Prometheus ready")

    def api(self, path, **params):
        url = "http://127.0.0.1:%d%s" % (self.port, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    def ready(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port,
                                        timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, promql):
        """{(labels without __name__, job and instance): value}."""
        r = self.api("/api/v1/query", query=promql)
        assert r["status"] == "success", r
        return {tuple(sorted((k, v) for k, v in s["metric"].items()
                             if k not in ("__name__", "job", "instance"))):
                float(s["value"][1]) for s in r["data"]["result"]}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


@tc.needs_torch
@pytest.mark.skipif(not os.path.exists(PROMETHEUS),
                    reason="needs Prometheus (scripts/install-deps installs "
                           "Debian's prometheus)")
@pytest.mark.skipif(SANITIZED_TARGETS, reason="the job's timing under ASan")
def test_prometheus_scrapes_a_torchrun_job(tmp_path):
    job = tc.Job(str(tmp_path), "--step-sleep", "0.02", nproc=2,
                 env={"PROBING_TORCH_PROFILING": "on"})
    x = prom = None
    try:
        job.wait_ranks()
        x = Exporter()
        prom = Prometheus(str(tmp_path), "127.0.0.1:%d" % x.port)
        pids = {rank: str(pid) for rank, pid in job.pids.items()}

        def by_rank(promql):
            got = prom.query(promql)
            return {dict(k).get("rank"): v for k, v in got.items()
                    if dict(k).get("pid") in pids.values()}

        # Every rank's step time, as Prometheus stored it.
        wait_for(lambda: len(by_rank("probing_step_seconds")) == 2, 90,
                 "both ranks' step time in Prometheus")
        # The scrape itself is healthy (the text parsed, nothing dropped).
        targets = prom.api("/api/v1/targets")["data"]["activeTargets"]
        assert [(t["health"], t["lastError"]) for t in targets] == [("up", "")], targets
        for rank, pid in pids.items():
            labels = prom.query('probing_up{pid="%s"}' % pid)
            (key, up), = labels.items()
            assert up == 1 and dict(key)["rank"] == str(rank) and \
                dict(key)["local_rank"] == str(rank) and dict(key)["run_id"], labels
        # A step of ddp_train.py sleeps 20 ms: its time is more, not much.
        steps = by_rank("probing_step_seconds")
        assert all(0.02 <= s < 2 for s in steps.values()), steps
        assert all(r > 0 for r in by_rank("probing_steps_per_second").values())
        stages = prom.query("probing_stage_seconds")
        assert {dict(k)["stage"] for k in stages} >= {"forward", "backward", "optimizer"}, stages
        # DDP's gradient all-reduces: latency, calls and bytes per op.
        wait_for(lambda: len(by_rank('probing_collective_latency_seconds{op="all_reduce"}')) == 2,
                 30, "all_reduce latency of both ranks")
        assert all(b > 0 for b in by_rank(
            'probing_collective_bytes_per_second{op="all_reduce"}').values())
        # A counter Prometheus can take a rate of.
        wait_for(lambda: len(by_rank("rate(probing_collectives_total[5s]) > 0")) == 2,
                 30, "a rate of the collectives counter")
        assert all(m > 1e6 for m in by_rank("probing_resident_memory_bytes").values())
    finally:
        if prom:
            prom.stop()
        if x:
            x.stop()
        job.stop()
