"""The recording on disk (data.dir): recorded tables copied to one SQLite
file per schema in a directory per process, read here as a reader would
(Python's sqlite3) — after SIGKILL, after a crash, on a full disk, on a
directory that cannot be written — and the retention of other runs.
"""
import glob
import json
import os
import re
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import CLI, SYSTEM_PYTHON, USERBASE, agent_listening, probing, wait_for

WORK = """
import os, time
print("pid", os.getpid(), flush=True)
x = 0
while True:
    for i in range(20000):
        x += i
    time.sleep(0.005)
"""


def sanitized(env, tmp_path):
    """env for a target started here (not through spawn) under the ASan
    run: the sanitizer runtime first, its reports into files that
    no_sanitizer_reports() checks."""
    pre = os.environ.get("PROBING_TARGET_PRELOAD")
    if pre:
        env["LD_PRELOAD"] = pre
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            env[k] = os.environ.get(k, "") + ":log_path=" + str(tmp_path / "sanitizer")
    return env


def no_sanitizer_reports(tmp_path):
    reports = glob.glob(str(tmp_path / "sanitizer*"))
    assert not reports, "".join(open(r).read()[-3000:] for r in reports)


def rec_env(data, **extra):
    e = {"PROBING_DATA_DIR": str(data), "PROBING_DATA_FLUSH_MS": "200",
         "PROBING_MEMORY_INTERVAL_MS": "100"}
    e.update(extra)
    return e


def run_dirs(data):
    return sorted(os.path.dirname(p) for p in glob.glob(str(data / "*" / "run.json")))


def disk(run, schema, sql):
    """Rows of sql on one file of the recording, opened read-only."""
    db = sqlite3.connect("file:%s/%s.db?mode=ro" % (run, schema), uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def disk_tables(run, schema):
    if not os.path.exists("%s/%s.db" % (run, schema)):
        return []
    return [r[0] for r in disk(run, schema,
                               "SELECT name FROM sqlite_master WHERE type = 'table'")]


def test_sigkill_mid_run_leaves_what_was_recorded(spawn, python, tmp_path):
    data = tmp_path / "data"
    t = spawn(python, WORK, env=rec_env(data))
    t.wait_agent()
    r = probing("perf", "--start", "--hz", "200", target=t.pid)
    assert r.rc == 0, r
    # Samples and memory rows reach the disk while it runs.
    def recorded():
        runs = run_dirs(data)
        return (len(runs) == 1 and "samples" in disk_tables(runs[0], "profile")
                and disk(runs[0], "profile", "SELECT count(*) FROM samples")[0][0] > 20
                and disk(runs[0], "process", "SELECT count(*) FROM memory")[0][0] > 5)
    wait_for(recorded, 30, "samples and memory rows on disk")
    time.sleep(1.0)
    killed_at = time.time()
    t.proc.send_signal(signal.SIGKILL)
    t.proc.wait()
    run = run_dirs(data)[0]
    meta = json.load(open(run + "/run.json"))
    assert meta["pid"] == t.pid and os.path.basename(run).split("-")[-2] == str(t.pid)
    assert "python" in meta["command"] and abs(meta["start"] - killed_at) < 120
    assert not os.path.exists(run + "/end.json")  # SIGKILL: no word
    # Up to the kill: the last rows are at most a flush and a sample old.
    last_mem = disk(run, "process", "SELECT max(ts) FROM memory")[0][0]
    last_sample = disk(run, "profile", "SELECT max(ts) FROM samples")[0][0]
    assert killed_at - last_mem < 1.5, (killed_at, last_mem)
    assert killed_at - last_sample < 2.5, (killed_at, last_sample)
    # The samples' stacks and frames came along: the program's own
    # function is in them.
    funcs = disk(run, "profile",
                 "SELECT DISTINCT f.func FROM samples s JOIN stacks k "
                 "ON k.stack_id = s.stack_id JOIN frames f ON f.frame_id = k.frame_id")
    assert ("<module>",) in funcs, funcs
    # Live tables are not in a recording.
    assert "backtrace" not in disk_tables(run, "python")


def test_end_says_how_the_process_ended(spawn, python, tmp_path):
    data = tmp_path / "data"
    t = spawn(python, "import sys, time; time.sleep(0.5); sys.exit(3)\n",
              env=rec_env(data))
    assert t.proc.wait(timeout=60) == 3
    run = run_dirs(data)[0]
    end = json.load(open(run + "/end.json"))
    assert end["how"] == "exit" and end["code"] == 3
    assert abs(end["end"] - time.time()) < 60


def test_crash_report_names_its_recording(spawn, python, tmp_path):
    data = tmp_path / "data"
    code = "import ctypes, time\ntime.sleep(0.6)\nctypes.string_at(0)\n"
    from test_crash import asan_env
    t = spawn(python, code, env=rec_env(data, PROBING_CRASH="1", **asan_env(tmp_path)))
    assert t.proc.wait(timeout=60) == -signal.SIGSEGV
    run = run_dirs(data)[0]
    report = glob.glob(str(tmp_path / ("probing-crash-%d-*.txt" % t.pid)))
    assert len(report) == 1
    assert ("recording: %s\n" % run) in open(report[0]).read()
    end = json.load(open(run + "/end.json"))
    assert end == {"end": end["end"], "how": "signal", "signal": 11,
                   "report": report[0]}
    # What was recorded before the crash is there.
    assert disk(run, "process", "SELECT count(*) FROM memory")[0][0] >= 2


def test_unwritable_directory_is_memory_only(spawn, python, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    t = spawn(python, WORK, env=rec_env(blocker / "data"))
    t.wait_agent()
    r = probing("config", "data.status", target=t.pid)
    assert r.rc == 0 and "memory only" in r.out, r
    # The store goes on: memory rows are queryable.
    wait_for(lambda: probing("query", "SELECT count(*) FROM process.memory",
                             target=t.pid).out.split()[-1] not in ("0", ""),
             20, "memory rows")
    out = t.output()
    assert out.count("not recording to disk") == 1, out
    assert t.proc.poll() is None


def test_full_disk_stops_recording_and_the_program_goes_on(spawn, python,
                                                           tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs",
                        str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): " + r.stderr.strip())
    try:
        code = """
import os, time
print("pid", os.getpid(), flush=True)
total = 0
for k in range(400):
    total += sum(range(5000))
    time.sleep(0.01)
print("OK", total == 400 * sum(range(5000)), flush=True)
time.sleep(60)
"""
        t = spawn(python, code, env=rec_env(mnt, PROBING_MEMORY_INTERVAL_MS="10"))
        t.wait_agent()
        probing("perf", "--start", "--hz", "1000", target=t.pid)
        t.wait_line("OK", 60)
        wait_for(lambda: "memory only" in probing("config", "data.status",
                                                  target=t.pid).out,
                 60, "the recording to stop on the full disk")
        out = t.output()
        assert "OK True" in out
        assert out.count("stopped: database or disk is full") == 1, out
        assert t.proc.poll() is None
        r = probing("query", "SELECT count(*) > 0 FROM process.memory", target=t.pid)
        assert r.rc == 0 and r.out.split()[-1] == "1", r
        t.proc.kill()
        t.proc.wait()
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def fake_run(root, name, mtime, size, extra=None):
    d = root / name
    d.mkdir(parents=True)
    (d / "run.json").write_text("{}")
    with open(d / "profile.db", "wb") as f:
        f.write(b"\0" * size)
    if extra:
        (d / extra).write_text("keep me")
    for p in d.iterdir():
        os.utime(p, (mtime, mtime))
    return d


def test_retention_removes_ended_runs_by_age_then_size(spawn, python, tmp_path):
    data = tmp_path / "data"
    now = time.time()
    dead = 4194000  # above pid_max's default: no such process
    old = fake_run(data, "vm-%d-20200101T000000" % dead, now - 30 * 86400, 1000)
    a = fake_run(data, "vm-%d-20260101T000000" % (dead + 1), now - 3600, 700 << 10)
    b = fake_run(data / "job-x", "vm-%d-20260101T000001" % (dead + 2),
                 now - 1800, 700 << 10)
    odd = fake_run(data, "vm-%d-20200101T000002" % (dead + 3), now - 40 * 86400,
                   10, extra="notes.txt")
    t = spawn(python, WORK, env=rec_env(data, PROBING_RETENTION_MAX_MB="1"))
    t.wait_agent()
    # Older than retention.days (7): gone.  Then over 1 MB: the oldest
    # ended run goes (a), the newer stays (b).  A file that is not a
    # recording's is never deleted.
    wait_for(lambda: not old.exists() and not a.exists(), 30, "pruning")
    assert b.exists() and (b / "profile.db").exists()
    assert (odd / "notes.txt").exists() and not (odd / "run.json").exists()
    runs = run_dirs(data)
    assert any(str(t.pid) in os.path.basename(r) for r in runs)


def test_cli_reads_the_recording_of_a_process_that_ended(spawn, python, tmp_path):
    data = tmp_path / "data"
    code = """
import os, time
print("pid", os.getpid(), flush=True)
def spin(seconds):
    t0 = time.time()
    while time.time() - t0 < seconds:
        sum(range(2000))
spin(2.5)
"""
    t = spawn(python, code, env=rec_env(data))
    t.wait_agent()
    assert probing("perf", "--start", target=t.pid).rc == 0
    assert t.proc.wait(timeout=60) == 0
    env = {"PROBING_DATA_DIR": str(data)}
    # -t PID of a process that has ended: its recording, said on stderr.
    r = probing("query", "-f", "json",
                "SELECT count(*) AS n, max(ts) > ago('1m') AS recent FROM process.memory",
                target=t.pid, env=env)
    assert r.rc == 0, r
    row = json.loads(r.out)[0]
    assert row["n"] >= 5 and row["recent"] == 1, row
    run = run_dirs(data)[0]
    assert ("process %d (" % t.pid) in r.err and "(exit 0): reading its recording %s" % run in r.err, r
    # The profiler's tables join as they do live: spin() is in the samples.
    r = probing("query", "SELECT count(*) FROM profile.samples s JOIN profile.stacks k "
                "ON k.stack_id = s.stack_id JOIN profile.frames f "
                "ON f.frame_id = k.frame_id WHERE f.func = 'spin'",
                target=os.path.basename(run), env=env)
    assert r.rc == 0 and int(r.out.split()[-1]) > 10, r
    # A live table is not in a recording: said, with the way out.
    r = probing("query", "SELECT * FROM python.backtrace", target=run, env=env)
    assert r.rc == 7 and "python.backtrace is a live table" in r.err, r
    # Nor is writing.
    r = probing("query", "DELETE FROM process.memory", target=run, env=env)
    assert r.rc == 7, r
    # A command that needs the process says so, naming the recording.
    r = probing("backtrace", target=t.pid, env=env)
    assert r.rc == 3 and "needs a running process" in r.err and run in r.err, r
    # flamegraph: the samples it recorded, the whole run (spin() is
    # where it ran), or an SVG of its last second.
    r = probing("flamegraph", "-f", "json", target=t.pid, env=env)
    assert r.rc == 0, r
    top = json.loads(r.out)
    assert top and top[0]["function"] == "spin" and float(top[0]["total%"]) > 50, top
    svg = tmp_path / "last.svg"
    r = probing("flamegraph", "-d", "1s", "-o", str(svg), target=t.pid, env=env)
    assert r.rc == 0 and svg.read_text().startswith("<?xml") and "spin" in svg.read_text(), r
    # What the line counts is said (the progress line counted all).
    assert "samples on CPU; --idle adds" in r.err, r
    # On a terminal: "over" is the run's length, not the Unix time.
    from test_repl_tty import Tty
    tty = Tty([CLI, "-t", str(t.pid), "flamegraph"], dict(os.environ, **env))
    seen = tty.expect("Hz;", timeout=30)
    over = float(re.search(r"samples on CPU over ([0-9.]+) s", seen).group(1))
    assert 0 < over < 600, seen
    tty.wait()
    # hangs of a run whose watchdog was off: none, as a live agent says.
    r = probing("hangs", target=t.pid, env=env)
    assert r.rc == 0 and "(no hangs; hang.timeout enables the watchdog)" in \
        r.out, r
    # memory: the last figures recorded, said to be that.
    r = probing("memory", target=t.pid, env=env)
    assert r.rc == 0 and "rss" in r.out and "the last figures recorded" in r.err, r
    # probing runs lists it, with how it ended.
    r = probing("runs", "-f", "json", env=env)
    assert r.rc == 0, r
    runs = json.loads(r.out)
    mine = [x for x in runs if x["pid"] == str(t.pid)]
    assert len(mine) == 1 and mine[0]["how"] == "exit 0" and mine[0]["dir"] == run, runs
    # Filters: its pid, the newest, a window that holds it, one that
    # does not.
    def runs_of(*args):
        r = probing("runs", "-f", "json", *args, env=env)
        assert r.rc == 0, r
        return [x["pid"] for x in json.loads(r.out)]
    assert runs_of("--pid", str(t.pid)) == [str(t.pid)]
    assert runs_of("--pid", "1") == []
    assert runs_of("--last", "1") == [runs[-1]["pid"]]
    assert str(t.pid) in runs_of("--since", "1h")
    time.sleep(1.5)
    assert str(t.pid) not in runs_of("--since", "1s")
    r = probing("runs", "--last", "0", env=env)
    assert r.rc == 2, r


def test_a_killed_process_reads_as_ended_how_unknown(spawn, python, tmp_path):
    data = tmp_path / "data"
    t = spawn(python, WORK, env=rec_env(data))
    t.wait_agent()
    wait_for(lambda: run_dirs(data) and "memory" in disk_tables(run_dirs(data)[0], "process"),
             30, "the first flush")
    t.proc.kill()
    t.proc.wait()
    env = {"PROBING_DATA_DIR": str(data)}
    r = probing("query", "SELECT count(*) FROM process.memory", target=t.pid, env=env)
    assert r.rc == 0 and int(r.out.split()[-1]) >= 1, r
    assert "how is not known" in r.err, r
    r = probing("runs", env=env)
    assert r.rc == 0 and "unknown" in r.out, r
    # Piped: the columns docs/cli.md shows (the directory and the report
    # are -f json's and csv's).
    assert r.out.splitlines()[0].split("\t") == [
        "RUN", "PID", "RANK", "JOB", "STARTED", "ENDED", "HOW", "MB",
        "COMMAND"], r.out


def test_collectives_are_recorded(spawn, tmp_path):
    """python.comm_collective (a ring in C, live) reaches the recording
    through its feed: every call, as it ended."""
    data = tmp_path / "data"
    code = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="file://%s", rank=0, world_size=1)
t0 = time.time()
while not hasattr(dist.all_reduce, "__wrapped__") and time.time() - t0 < 30:
    time.sleep(0.05)  # the agent wraps the functions on its next tick
t = torch.ones(8)
for i in range(20):
    dist.all_reduce(t)
dist.broadcast(t, 0)
time.sleep(0.5)
print("DONE", flush=True)
""" % (tmp_path / "rdv")
    t = spawn(SYSTEM_PYTHON, code, env=rec_env(data))
    assert t.proc.wait(timeout=120) == 0, t.output()
    r = probing("query", "-f", "json",
                "SELECT op, state, count(*) AS n, min(duration) >= 0 AS timed "
                "FROM python.comm_collective GROUP BY op, state ORDER BY op",
                target=t.pid, env={"PROBING_DATA_DIR": str(data)})
    assert r.rc == 0, r
    assert json.loads(r.out) == [
        {"op": "all_reduce", "state": "done", "n": 20, "timed": 1},
        {"op": "broadcast", "state": "done", "n": 1, "timed": 1}], r.out
    # The view of the live agent is not there; its table is.
    r = probing("query", "SELECT kind FROM probing.tables WHERE schema = 'python' "
                "AND name = 'comm_collective'", target=t.pid,
                env={"PROBING_DATA_DIR": str(data)})
    assert r.rc == 0 and r.out.split()[-1] == "recorded", r


def test_two_processes_with_one_pid_are_kept_apart(python, tmp_path):
    """The same pid twice (made so through /proc/sys/kernel/ns_last_pid,
    as root): two recordings, the live process is the agent's, the ended
    one's recording is still its own."""
    data = tmp_path / "data"
    env = sanitized(dict(os.environ, PYTHONUSERBASE=USERBASE, PROBING="1",
                         **rec_env(data)), tmp_path)
    env.pop("PROBING_TARGET", None)
    script = tmp_path / "t.py"
    script.write_text("import sys, time\nprint('up', flush=True)\n"
                      "time.sleep(float(sys.argv[1]))\n")

    bare = dict(env)
    del bare["PROBING"]

    def start(seconds, agent=True):
        return subprocess.Popen([python, str(script), str(seconds)],
                                env=env if agent else bare,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    first = start(1.2)
    pid = first.pid
    assert first.wait(timeout=60) == 0
    second = None
    try:
        for _ in range(200):
            try:
                with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                    f.write(str(pid - 1))
            except OSError as e:
                pytest.skip("cannot set the next pid here (needs root): %s" % e)
            p = start(60, agent=False)
            if p.pid == pid:
                second = p
                break
            p.kill()
            p.wait()
        if second is None:
            pytest.skip("pid %d was taken by other processes 200 times" % pid)
        cli_env = {"PROBING_DATA_DIR": str(data)}
        # The pid is another process's now, one without an agent: the
        # earlier one's recording is pointed at.
        a = run_dirs(data)[0]
        r = probing("query", "SELECT 1", target=pid, env=cli_env)
        assert r.rc == 4 and "has no Probing agent" in r.err, r
        assert ("an earlier process %d left a recording: probing -t %s"
                % (pid, os.path.basename(a))) in r.err, r
        assert second.stdout.readline().strip() == b"up"  # Python is up
        r = probing("inject", target=pid, env=cli_env)
        assert r.rc == 0, r
        wait_for(lambda: agent_listening(pid), 30, "the second agent")
        wait_for(lambda: len(run_dirs(data)) == 2, 30, "the second recording")
        a, b = run_dirs(data)  # by name: the earlier start first
        assert os.path.basename(a).split("-")[-2] == os.path.basename(b).split("-")[-2] == str(pid)
        assert json.load(open(a + "/end.json"))["how"] == "exit"
        # The pid runs: it is the live agent, not a recording.
        r = probing("query", "SELECT count(*) > 0 FROM python.backtrace", target=pid,
                    env=cli_env)
        assert r.rc == 0 and r.out.split()[-1] == "1" and "recording" not in r.err, r
        # The live process's own recording is its agent's to answer for.
        r = probing("query", "SELECT 1", target=os.path.basename(b), env=cli_env)
        assert r.rc == 1 and "still runs: ask its agent" in r.err, r
        # The first process's recording is read as its own.
        r = probing("query", "SELECT count(*) FROM process.memory",
                    target=os.path.basename(a), env=cli_env)
        assert r.rc == 0 and a in r.err and "exit 0" in r.err, r
        r = probing("runs", "-f", "json", env=cli_env)
        hows = sorted(x["how"] for x in json.loads(r.out) if x["pid"] == str(pid))
        assert hows == ["exit 0", "running"], r.out
        second.kill()
        second.wait()
        # Both gone: the pid means the newest.
        r = probing("query", "SELECT 1", target=pid, env=cli_env)
        assert r.rc == 0 and b in r.err, r
    finally:
        if second is not None and second.poll() is None:
            second.kill()
            second.wait()
    no_sanitizer_reports(tmp_path)


def test_cluster_query_on_a_job_that_ended(tmp_path):
    """A torchrun job's ranks record under the job's directory; once the
    job has ended, `cluster query` reads their recordings as it would ask
    their agents."""
    import test_cluster as tc
    if not tc.have_torch():
        pytest.skip("needs torchrun and python3-torch")
    data = tmp_path / "data"
    e = dict(os.environ, PROBING="2", PYTHONUSERBASE=USERBASE,
             PYTHONUNBUFFERED="1", PROBING_DATA_DIR=str(data))
    for k in ("PROBING_PORT", "PROBING_LISTEN", "PROBING_TARGET"):
        e.pop(k, None)
    e.update(tc.torch_env(tmp_path))  # where torch lacks libuv
    e = sanitized(e, tmp_path)
    # --redirects/--tee: torch 1.13's torchrun needs them on 3.11
    # (test_cluster.Job says why); its default monitor interval (5 s)
    # sees the ranks end.
    cp = subprocess.run([tc.TORCHRUN, "--redirects", "1", "--tee", "1",
                         "--log_dir", str(tmp_path / "logs"), "--master_port",
                         str(tc.free_port()), "--nproc_per_node", "2",
                         os.path.join(os.path.dirname(tc.EXAMPLE), "collectives.py"),
                         "--rounds", "3", "--linger", "1"],
                        env=e, cwd=str(tmp_path), capture_output=True, text=True,
                        timeout=180)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    jobs = [p for p in os.listdir(data) if p.startswith("job-")]
    assert len(jobs) == 1, os.listdir(data)
    ranks = run_dirs(data / jobs[0])
    assert len(ranks) == 2
    env = {"PROBING_DATA_DIR": str(data)}
    r = probing("cluster", "query", "-f", "json",
                "SELECT op, count(*) AS n FROM python.comm_collective "
                "WHERE state = 'done' GROUP BY op ORDER BY op",
                target=jobs[0], env=env)
    assert r.rc == 0, r
    rows = json.loads(r.out)
    assert sorted({x["rank"] for x in rows}) == ["0", "1"], rows
    per_rank = {x["op"]: x["n"] for x in rows if x["rank"] == "1"}
    assert per_rank["all_reduce"] == "6" and per_rank["broadcast"] == "3", rows
    assert "reading the recordings of 2 ranks of %s" % jobs[0] in r.err, r
    # global.<schema>.<table> in one query: every rank's rows, read from
    # the recordings of the rank's job.
    r = probing("query", "-f", "json",
                "SELECT _rank, count(*) AS n FROM global.python.comm_collective "
                "WHERE op = 'all_reduce' GROUP BY _rank ORDER BY _rank",
                target=os.path.basename(ranks[0]), env=env)
    assert r.rc == 0, r
    assert json.loads(r.out) == [{"_rank": 0, "n": 6}, {"_rank": 1, "n": 6}], r.out
    r = probing("query", "SELECT * FROM global.python.nosuch",
                target=os.path.basename(ranks[0]), env=env)
    assert r.rc == 7 and "no rank's recording has it" in r.err, r
    # A rank's pid names its job too.
    pid = json.load(open(ranks[0] + "/run.json"))["pid"]
    r = probing("cluster", "query", "SELECT count(*) FROM process.memory",
                target=pid, env=env)
    assert r.rc == 0 and "2 ranks" in r.err, r
    no_sanitizer_reports(tmp_path)


def test_a_program_reusing_our_descriptors_never_gets_our_pages(spawn, python,
                                                              tmp_path):
    """A daemon-style program closes every descriptor again and again and
    puts its own file at every low number and at those ours live at (512
    and up) while the recording flushes: not a byte of ours lands in its file — a flush whose
    file changed hands fails and the recording stops, the program goes on
    (the files go through owned descriptors: sql/recvfs.c)."""
    data = tmp_path / "data"
    target = tmp_path / "theirs"
    code = """
import os, time
print("pid", os.getpid(), flush=True)
t0 = time.time()
while time.time() - t0 < 4:
    os.closerange(3, 4096)
    fd = os.open(%r, os.O_RDWR | os.O_CREAT, 0o600)
    for n in list(range(fd + 1, 64)) + list(range(512, 600)):
        try:
            os.dup2(fd, n)
        except OSError:  # EBUSY: another thread is opening that number
            pass
    time.sleep(0.01)
    os.closerange(3, 4096)
print("DONE", os.path.getsize(%r), flush=True)
time.sleep(60)
""" % (str(target), str(target))
    t = spawn(python, code, env=rec_env(data, PROBING_MEMORY_INTERVAL_MS="20",
                                        PROBING_DATA_FLUSH_MS="100"))
    t.wait_line("DONE", 60)
    assert "DONE 0" in t.output(), t.output()
    assert target.stat().st_size == 0
    assert t.proc.poll() is None
