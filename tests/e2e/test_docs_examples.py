"""Every example of README.md and docs/ runs as written (issue 30), against
the programs of examples/.

Each `$ probing ...` line of a fenced block in docs/*.md, and each
`probing -t <pid> ...` line of README.md's first block, is run through a
shell in a directory where `python3` is the Python under test, against
the program its page is about: the pid (`-t 4242`, `<pid>`), a crash
report's name, a free port are the only words put in its place (and the
node files cluster.md shows with `cat`, written with the job's
addresses).
CASES says, for each example, which program, and the exit code its page
shows (0 unless the page shows an error).  An example with no case fails:
a page that gains one gains its case here.  The few that cannot run here
say why (another host, another user)."""
import glob
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (CLI, PYTHONS, ROOT, USERBASE, agent_listening,
                      free_port, probing, wait_for)

EXAMPLES_DIR = os.path.join(ROOT, "examples")


def has_torch(python):
    return subprocess.run([python, "-c", "import torch"],
                          capture_output=True).returncode == 0


# ---- the examples ----------------------------------------------------------

def doc_examples(path):
    """[(line, command)] of a page: `$ probing ...` (and `$ echo ... |
    probing ...`) lines of its fenced blocks, continued while a quote is
    open or the line ends in a backslash."""
    out, block, lines, i = [], False, open(path).read().split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            block = not block
        elif block and re.match(r"\$ (probing|echo .*\| *probing)", line):
            cmd, j = line[2:], i + 1
            while (cmd.endswith("\\") or cmd.count('"') % 2 or
                   cmd.count("'") % 2) and j < len(lines):
                cmd += "\n" + lines[j]
                j += 1
            out.append((i + 1, cmd))
            i = j
            continue
        i += 1
    return out


def readme_examples():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = text.split("```", 2)[1]
    return [(None, l.strip()) for l in block.split("\n")
            if l.startswith("probing ")]


def key(cmd):
    """An example without its comment (a # after a space, outside quotes)
    and with its spaces evened out."""
    cmd = cmd.replace("\\\n", " ")  # a shell's line continuation
    quote = None
    for i, ch in enumerate(cmd):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i and cmd[i - 1].isspace():
            cmd = cmd[:i]
            break
    return " ".join(cmd.split())


TWO_HOSTS = ("a job on two hosts (network namespaces): "
             "test_cluster_remote.py runs these commands")

# Which program each example is about ("train": examples/train.py, and so
# on; "none": no target), its exit code, and what it needs.  rc is the page's.
class Case:
    def __init__(self, program="train", rc=0, stdin=None, then=None,
                 skip=None, shell=None, nodes=None):
        self.program, self.rc, self.stdin = program, rc, stdin
        self.then, self.skip, self.shell = then, skip, shell
        self.nodes = nodes  # "dead": the job's ranks, the last one dead;
        # "ranked": the first two, with their ranks (cluster.md's files)


CASES = {
    # README.md's first block (its <pid>: examples/train.py)
    "probing -t <pid> backtrace": Case(),
    "probing -t <pid> backtrace --native": Case(),
    "probing -t <pid> top": Case(shell="timeout --preserve-status -s INT 3 {cmd}"),
    "probing -t <pid> eval 'import gc; len(gc.get_objects())'": Case(),
    "probing -t <pid> query \"SELECT func, file, lineno FROM python.backtrace ORDER BY depth\"": Case(),
    "probing -t <pid> repl": Case(stdin="print(6 * 7)\n"),
    "probing -t <pid> perf --torch --duration 5s": Case(),
    "probing -t <pid> memory": Case(),
    "probing -t <pid> flamegraph -o profile.svg --duration 10s": Case(),
    "probing -t <pid> trace -o run.json": Case(),
    "probing exporter": Case(shell="timeout --preserve-status -s TERM 2 {cmd}"),
    "probing -t <pid> inject": Case(),
    "probing -t <pid> debug --pause": Case(then=["debug", "--resume"]),
    "probing -t <pid> config crash.enabled=on hang.timeout=5m": Case(),
    "probing -t <pid> hangs": Case("hang"),
    "probing report probing-crash-4242-20250102T030405Z.txt": Case("crash"),
    "probing list": Case("none"),
    # docs/cli.md
    "probing -t 99999 backtrace": Case("gone", rc=3),
    "probing -t 4242 backtrace": Case("noagent", rc=4),
    "probing -t 4250 backtrace": Case("thread", rc=2),
    "probing -t 4300 backtrace": Case("nopackage", rc=4),
    "probing -t 812 backtrace": Case("notpython", rc=4),
    "probing list | cut -f1": Case("none"),
    "probing runs": Case("none"),
    "probing -t 6140 query \"SELECT max(rss) FROM process.memory\"": Case("ended"),
    "probing -t 4242 bt --locals": Case(),
    "probing -t 4242 bt --native": Case(),
    "probing -t 4242 top --once -d 3s -n 3": Case(),
    "probing -t 4242 trace -d 5s -o run.json": Case(),
    "probing -t 4242 eval --timeout 300 'while True: pass'": Case(rc=1),
    "probing -t 4242 eval --frame train 'model.training'": Case(),
    "probing -t 4242 eval 'import torch; print(torch.cuda.memory_allocated())'": Case(),
    "probing -t 4242 eval - < snippet.py": Case(),
    "probing -t 4242 query 'SELECT func, file, lineno FROM python.backtrace ORDER BY depth LIMIT 5'": Case(),
    "probing -t 4242 query -f csv 'SELECT * FROM python.threads' > threads.csv": Case(),
    "probing -t 4242 query 'SELEC 1'": Case(rc=7),
    "probing -t 4242 flamegraph -d 5s": Case(),
    "probing -t 4242 flamegraph --subprocesses --inject -d 2s -o all.folded": Case("workers"),
    "probing -t 4242 flamegraph -d 10s --hz 1000 -o train.svg": Case(),
    "probing -t 4242 flamegraph": Case("ended"),
    "probing -t 4242 perf --torch --duration 2s": Case(),
    "probing -t 4242 memory --top 3": Case(),
    "echo 'print(1)' | probing -t 4242 repl": Case(),
    "probing -t 4242 repl < fix_lr.py": Case(),
    "probing -t 4242 config query.max_rows=5000": Case(),
    "probing -t 4242 config comm.status": Case(),
    "probing -t 11571 hangs": Case("hang"),
    "probing report probing-crash-12661-20261122T074512Z.txt": Case("crash"),
    "probing -t 4242 inject --listen 127.0.0.1:9922": Case("noagent"),
    "probing -t 4242 inject": Case("noagent"),
    "probing launch -- python3 examples/train.py --sleep 0.005 &": Case(
        "none", shell="{cmd} sleep 8; probing -t $! backtrace; rc=$?; "
        "kill $!; exit $rc"),
    "probing -t $! backtrace": Case("none", skip="run with the launch "
                                    "above it, in one shell"),
    "probing -t 4242 debug --pause": Case(then=["debug", "--resume"]),
    "probing -t 17102 diagnose hang": Case("hang"),
    "probing -p 4242 d -p -a 127.0.0.1:9922": Case(rc=2),
    # docs/forensics.md
    "probing -t 11571 config hang.timeout=5s": Case("hang"),
    "probing -t 11571 hangs 1": Case("hang"),
    # docs/torch.md
    "probing -t 6023 perf --torch --duration 2s": Case(),
    "probing -t 6023 config torch.profiling=on,exprs=loss@train_step,step_rate=10": Case(),
    "probing -t 6023 query \"SELECT step, seq, module, stage, round(duration * 1e6) AS us, round(time_offset * 1e3, 3) AS offset_ms FROM python.torch_trace WHERE step = (SELECT max(step) FROM python.torch_trace) ORDER BY seq\"": Case(),
    "probing -t 6023 query \"SELECT step, func, name, round(value, 4) AS value FROM python.variables ORDER BY step DESC LIMIT 4\"": Case(),
    "probing -t 4062 query \"SELECT time(ts, 'unixepoch') AS time, round(rss) AS rss_mb, round(peak) AS peak_mb, py_blocks FROM process.memory ORDER BY ts DESC LIMIT 6\"": Case("leak"),
    "probing -t 4062 memory --top 5": Case("leak"),
    "probing -t 4062 memory --top 5 | tail -3": Case("leak"),
    "probing -t 4062 query \"SELECT grad_fn, shape, count(*) AS n, sum(bytes) AS bytes FROM python.tensors GROUP BY grad_fn, shape ORDER BY n DESC LIMIT 6\"": Case("leak"),
    "probing -t 4062 query \"SELECT holder, grad_fn, requires_grad FROM python.tensors WHERE grad_fn = 'MseLossBackward0' ORDER BY id LIMIT 3\"": Case("leak"),
    "probing -t 4062 eval \"len(history), history[0]\"": Case("leak"),
    "probing -t 5497 query \"SELECT name, daemon, holds_gil, state, depth FROM python.threads\"": Case("hang"),
    "probing -t 5497 backtrace": Case("hang"),
    "probing -t 5497 backtrace --locals": Case("hang"),
    # docs/injection.md
    "probing -t 4243 inject": Case("noagent"),
    "probing -t 20511 inject": Case("forked", skip="needs a forked child "
                                    "whose agent stopped: test_inject.py "
                                    "runs it"),
    # docs/diagnose.md
    "probing -t 20789 diagnose leak --history 10s": Case("leak"),
    "probing -t 22591 diagnose dataloader": Case("slow"),
    "probing -t 22657 diagnose slow": Case("slow"),
    # docs/asyncio.md (examples/asyncio_server.py)
    "probing -t 5151 backtrace --tasks": Case("asyncio"),
    "probing -t 5152 backtrace --tasks": Case("asyncio_deadlock"),
    "probing -t 5151 query \"SELECT name, state, awaits, round(waited_s, 1) AS waited_s FROM python.tasks ORDER BY name\"": Case("asyncio"),
    "probing -t 5151 query \"SELECT t.name, w.name AS awaited_by FROM python.tasks t, json_each(t.awaited_by) j JOIN python.tasks w ON w.task_id = j.value WHERE t.name LIKE 'worker%'\"": Case("asyncio"),
    "probing -t 5151 diagnose hang": Case("asyncio"),
    "probing -t 5153 diagnose hang": Case("asyncio_block"),
    "probing -t 5152 diagnose hang": Case("asyncio_deadlock"),
    "probing -t 5154 flamegraph -d 3s --tasks": Case("asyncio_busy"),
    "probing -t 5154 top --tasks --once -d 3s -n 6": Case("asyncio_busy"),
    "probing -t 5154 query \"SELECT f.func AS task, count(*) AS samples FROM profile.samples s JOIN profile.frames f ON f.frame_id = s.task_frame_id GROUP BY task ORDER BY samples DESC\"": Case("asyncio_busy"),
    # docs/security.md
    "probing -t 10.0.0.7:9922 backtrace": Case(
        "none", skip="another host's agent: test_auth.py runs the token "
        "errors on loopback"),
    # docs/cluster.md (examples/ddp_train.py under torchrun, rank 2 stuck)
    "probing -t 29588 cluster nodes": Case("job"),
    "probing -t 29588 cluster backtrace": Case("job"),
    "probing -t 29575 cluster query \"SELECT func, lineno FROM python.backtrace WHERE depth=0\"": Case("job"),
    "probing -t 29575 cluster query \"SELECT func FROM python.backtrace\" --merge \"SELECT func, count(*) AS n, group_concat(DISTINCT rank) AS ranks FROM result GROUP BY func ORDER BY n\"": Case("job"),
    "probing -t 29575 cluster flamegraph 2s --idle --per-rank | cut -c1-110": Case("job"),
    "probing -t 29575 cluster flamegraph 10s --idle --per-rank -o job.svg": Case("job"),
    "probing -t 22040 cluster hang": Case("job"),
    "probing -t 22040 query \"SELECT _rank, op, seq, shape, state, round(waited, 1) AS waited FROM global.python.comm_collective WHERE state = 'running' ORDER BY _rank\"": Case("job"),
    "probing -t 22040 query \"SELECT _rank, max(seq) AS last_seq, count(*) AS calls, round(avg(duration) * 1000, 2) AS avg_ms FROM global.python.comm_collective GROUP BY _rank\"": Case("job"),
    "probing -t 22040 cluster nodes": Case("job"),
    "probing cluster --nodes nodes query \"SELECT count(*) AS n FROM python.threads\"": Case("job", rc=13, nodes="dead"),
    "probing cluster --nodes nodes backtrace": Case("job", nodes="ranked"),
    "probing -t 20458 cluster nodes": Case("none", skip=TWO_HOSTS),
    "probing -t 20458 config | grep -E '^(cluster.status|server.token)'": Case("none", skip=TWO_HOSTS),
    "probing -t 20458 cluster backtrace": Case("none", skip=TWO_HOSTS),
    "probing -t 10.213.78.2:33045 cluster nodes": Case("none", rc=8, skip=TWO_HOSTS),
    "probing -t 10.213.78.2:33045 cluster query \"SELECT func, lineno FROM python.backtrace WHERE depth=0 AND thread_name='MainThread'\"": Case("none", skip=TWO_HOSTS),
}

PAGES = ["README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs",
                                                              "*.md")))
OTHER_SUITES = {}


def all_examples():
    out = []
    for page in PAGES:
        if page in OTHER_SUITES:
            continue
        ex = readme_examples() if page == "README.md" else \
            doc_examples(os.path.join(ROOT, page))
        out += [(page, line, cmd) for line, cmd in ex]
    return out


def test_every_example_has_a_case():
    missing = [(p, l, c) for p, l, c in all_examples() if key(c) not in CASES]
    assert not missing, "examples with no case in CASES:\n" + "\n".join(
        "%s:%s: %s" % m for m in missing)


# ---- the programs ----------------------------------------------------------

class Programs:
    """The programs of examples/ with their agents, started when first
    asked for, stopped at the end."""

    def __init__(self, python, tmp):
        self.python, self.tmp, self.procs, self.pids = python, tmp, [], {}
        self.bin = os.path.join(tmp, "bin")
        os.makedirs(self.bin)
        # `python3` of the pages is the Python under test; `probing` the
        # build's.
        os.symlink(python, os.path.join(self.bin, "python3"))
        os.symlink(CLI, os.path.join(self.bin, "probing"))
        os.symlink(EXAMPLES_DIR, os.path.join(tmp, "examples"))
        for name in ("train.py", "hang.py", "leak.py", "slow_data.py"):
            os.symlink(os.path.join(EXAMPLES_DIR, name),
                       os.path.join(tmp, name))
        with open(os.path.join(tmp, "snippet.py"), "w") as f:
            f.write("import threading\nprint(threading.active_count())\n")
        with open(os.path.join(tmp, "fix_lr.py"), "w") as f:
            f.write("import gc, torch\n"
                    "for o in gc.get_objects():\n"
                    "    if isinstance(o, torch.optim.Optimizer):\n"
                    "        for g in o.param_groups:\n"
                    "            g['lr'] = g['lr'] / 10\n"
                    "        print('lr', o.param_groups[0]['lr'])\n")
        self.env = dict(os.environ, PYTHONUSERBASE=USERBASE,
                        PATH=self.bin + ":" + os.environ.get("PATH", ""),
                        PROBING_DATA_DIR=os.path.join(tmp, "data"),
                        PROBING_CRASH_PATH=tmp, PROBING_PAGER="")
        self.env.pop("PROBING", None)

    def start(self, args, env=None, agent=True):
        e = dict(self.env, **(env or {}))
        if agent:
            e["PROBING"] = "1"
        p = subprocess.Popen([self.python, *args], cwd=self.tmp, env=e,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs.append(p)
        if agent:
            wait_for(lambda: p.poll() is not None or agent_listening(p.pid),
                     60, "the agent of %s" % args)
            assert p.poll() is None, "%s exited %s" % (args, p.returncode)
        return p

    def pid(self, program):
        if program not in self.pids:
            self.pids[program] = getattr(self, "_" + program)()
        return self.pids[program]

    def _train(self):
        p = self.start(["train.py", "--sleep", "0.005"])
        # Its loop has begun (train_step on the stack).
        wait_for(lambda: "train_step" in probing(
            "backtrace", target=p.pid).out, 60, "train_step")
        return p.pid

    def _noagent(self):
        p = self.start(["train.py", "--sleep", "0.005"], agent=False)
        time.sleep(3)
        return p.pid

    def _thread(self):
        pid = self.pid("train")
        return int(next(t for t in os.listdir("/proc/%d/task" % pid)
                        if int(t) != pid))

    def _nopackage(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty, exist_ok=True)
        p = self.start(["-c", "import time; time.sleep(600)"],
                       env={"PROBING": "1", "PYTHONUSERBASE": empty},
                       agent=False)
        time.sleep(1)
        return p.pid

    def _notpython(self):
        p = subprocess.Popen(["sleep", "600"], start_new_session=True)
        self.procs.append(p)
        return p.pid

    def _gone(self):
        return 99999 if not os.path.exists("/proc/99999") else 4194303

    def _hang(self):
        p = self.start(["hang.py"], env={"PROBING_HANG_TIMEOUT": "1s"})
        wait_for(lambda: "stuck" in probing("hangs", target=p.pid).out, 60,
                 "the hang recorded")
        return p.pid

    def _leak(self):
        p = self.start(["leak.py", "--sleep", "0.05"])
        time.sleep(12)  # diagnose leak --history 10s needs 10 s of it
        return p.pid

    def _slow(self):
        p = self.start(["slow_data.py"])
        time.sleep(3)
        return p.pid

    def _workers(self):
        # Two DataLoader workers, forked: their agent stopped at the fork.
        p = self.start(["slow_data.py", "--workers", "2",
                        "--persistent-workers"])
        wait_for(lambda: len(open("/proc/%d/task/%d/children" % (p.pid, p.pid))
                             .read().split()) >= 2, 60, "the loader's workers")
        time.sleep(2)
        return p.pid

    def _asyncio(self):
        p = self.start(["examples/asyncio_server.py", "--idle", "3"])
        wait_for(lambda: "worker-2" in probing("backtrace", "--tasks",
                                               target=p.pid).out, 60, "the tasks")
        return p.pid

    def _asyncio_deadlock(self):
        p = self.start(["examples/asyncio_server.py", "--deadlock"])
        wait_for(lambda: "awaits task ping" in probing(
            "backtrace", "--tasks", target=p.pid).out, 60, "the deadlock")
        return p.pid

    def _asyncio_busy(self):
        p = self.start(["examples/asyncio_server.py", "--busy"])
        wait_for(lambda: "render" in probing("backtrace", "--tasks",
                                             target=p.pid).out, 60, "the tasks")
        return p.pid

    def _asyncio_block(self):
        p = self.start(["examples/asyncio_server.py", "--block"])
        wait_for(lambda: re.search(r"#0\s+blocker ", probing(
            "backtrace", target=p.pid).out), 60, "the loop blocked")
        return p.pid

    def _ended(self):
        p = self.start(["train.py", "--sleep", "0.005"])
        time.sleep(4)  # samples and memory figures recorded
        probing("perf", "--start", target=p.pid)
        time.sleep(2)
        os.kill(p.pid, signal.SIGTERM)
        p.wait(30)
        return p.pid

    def _job(self):
        from test_cluster import Job
        self.job = Job(self.tmp, "--hang-rank", "2", "--step-sleep", "0.01",
                       "--loader-workers", "1")
        self.job.wait_ranks()
        pid = self.job.pids[0]

        def stuck():  # rank 2 in load_batch, the others waiting for it
            r = probing("cluster", "hang", "-f", "json", target=pid)
            return r.rc == 0 and "rank 2 has not reached it" in r.out
        wait_for(stuck, 120, "the job stuck on rank 2")
        return pid

    def nodes_file(self, kind):
        """cluster.md's node files, of this job's ranks: "dead" all four,
        the last one's address one where nothing listens; "ranked" the
        first two, each with its rank."""
        r = probing("query", "SELECT rank, addr FROM cluster.nodes WHERE "
                    "role = 'rank' ORDER BY rank", "-f", "json",
                    target=self.job.pids[0])
        addrs = [x["addr"] for x in r.json()]
        if kind == "dead":
            addrs[-1] = "127.0.0.1:%d" % free_port()
            text = "\n".join(addrs)
        else:
            text = "\n".join("%s %d" % (a, i) for i, a in
                             enumerate(addrs[:2]))
        with open(os.path.join(self.tmp, "nodes"), "w") as f:
            f.write(text + "\n")

    def _crash(self):
        p = self.start(["-c", "import ctypes, time; time.sleep(1); "
                        "ctypes.string_at(0)"], env={"PROBING_CRASH": "1"})
        p.wait(60)
        self.report = os.path.basename(glob.glob(os.path.join(
            self.tmp, "probing-crash-%d-*.txt" % p.pid))[0])
        return p.pid

    def stop(self):
        if getattr(self, "job", None):
            self.job.stop()
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()


def as_run(cmd, programs, case):
    """The example's command with the target's pid (or report) in place of
    the page's."""
    if case.program in ("none",):
        return cmd
    pid = programs.pid(case.program)
    cmd = cmd.replace("<pid>", str(pid))
    cmd = re.sub(r"(-[tp] )\d+", lambda m: m.group(1) + str(pid), cmd)
    if case.program == "crash":
        cmd = re.sub(r"probing-crash-\S+\.txt", programs.report, cmd)
    if "127.0.0.1:9922" in cmd:  # a port free now, not one in use
        cmd = cmd.replace("127.0.0.1:9922", "127.0.0.1:%d" % free_port())
    return cmd


def with_torch():
    """The first Python under test that has torch (the pages' python3:
    the examples train with torch), or None.  One is enough: the
    commands are the same on every Python, which the other tests cover."""
    return next((p for p in PYTHONS if has_torch(p)), None)


@pytest.mark.parametrize("page", [p for p in PAGES
                                  if p not in OTHER_SUITES])
def test_examples_run_as_written(page, tmp_path):
    if os.environ.get("PROBING_TARGET_PRELOAD"):
        pytest.skip("the sanitized build's run: the commands are the "
                    "other tests'; the examples run with the plain build")
    python = with_torch()
    if python is None:
        pytest.skip("the examples train with torch; no Python under test "
                    "has it")
    # (one with no case: test_every_example_has_a_case says so)
    examples = [(l, c) for p, l, c in all_examples() if p == page
                and key(c) in CASES and not CASES[key(c)].skip]
    if not examples:
        pytest.skip("no examples on %s that run here (CASES says why)"
                    % page)
    programs = Programs(python, str(tmp_path))
    failed = []
    try:
        for line, cmd in examples:
            case = CASES[key(cmd)]
            run = as_run(key(cmd), programs, case)
            if case.nodes:
                programs.nodes_file(case.nodes)
            if case.shell:
                run = case.shell.format(cmd=run)
            r = subprocess.run(["bash", "-c", run], cwd=str(tmp_path),
                               env=programs.env, input=case.stdin or "",
                               capture_output=True, text=True, timeout=120)
            if r.returncode != case.rc:
                failed.append("%s:%s: %s\n  ran: %s\n  exit %d (the page "
                              "shows %d)\n  stdout: %s\n  stderr: %s" % (
                                  page, line, cmd, run, r.returncode,
                                  case.rc, r.stdout[-600:], r.stderr[-600:]))
            if case.then:
                probing(*case.then, target=programs.pid(case.program))
    finally:
        programs.stop()
    assert not failed, "\n".join(failed)
