"""asyncio's tasks (docs/asyncio.md): python.tasks, `backtrace --tasks` and
`diagnose hang` against examples/asyncio_server.py — a line server on
asyncio streams, a queue with workers, a lock held across an await and a
request waiting for it, idle tasks, and on request a deadlock of two tasks
or a coroutine blocking its loop — on every Python of the build.

asyncio's own functions are named with their class on every version
(co_qualname from 3.11; before, from asyncio's classes), the program's as
the interpreter names them."""
import json
import os
import re

import pytest

from conftest import ROOT, probing, wait_for
from test_python_api import client

EXAMPLE = open(os.path.join(ROOT, "examples", "asyncio_server.py")).read()


def start(spawn, python, *args):
    t = spawn(python, EXAMPLE, args=args)
    t.wait_line("READY")
    t.wait_agent()
    return t


def rows(t, sql):
    r = probing("query", "-f", "json", sql, target=t.pid)
    assert r.rc == 0, r
    return r.json()


def by_name(tasks):
    return {x["name"]: x for x in tasks}


def test_tasks_table(spawn, python):
    t = start(spawn, python, "--idle", "20")
    got = rows(t, "SELECT * FROM python.tasks")
    tasks = by_name(got)
    assert len(got) == 20 + 7, sorted(tasks)   # idle, 3 workers, cache, client, main, handler
    main_thread = rows(t, "SELECT thread_id FROM python.threads WHERE is_main")[0]["thread_id"]
    assert {x["thread_id"] for x in got} == {main_thread}
    assert all(x["state"] == "pending" for x in got), got
    assert tasks["worker-1"]["awaits"] == "asyncio Queue.get"
    assert tasks["worker-1"]["coro"] == "worker"
    assert tasks["idle-7"]["awaits"] == "asyncio Event.wait"
    assert tasks["cache-refresh"]["awaits"] == "asyncio Event.wait"
    assert tasks["client"]["awaits"] == "asyncio StreamReader.readline"
    # The request's handler (a task asyncio's server made) waits for the
    # lock the cache holds across its await.
    handler = [x for x in got if x["coro"] == "handle"]
    assert len(handler) == 1 and handler[0]["awaits"] == "asyncio Lock.acquire", got
    # Its chain, innermost first: asyncio's frames, then the program's.
    stack = handler[0]["stack"].splitlines()
    assert stack[0].startswith("Lock.acquire ("), stack
    assert re.match(r"handle \(.*target0\.py:\d+\)$", stack[-1]), stack
    assert handler[0]["func"] == "Lock.acquire"
    assert re.match(r"refresh_cache \(.*target0\.py:\d+\)$",
                    tasks["cache-refresh"]["stack"].splitlines()[-1])
    # The awaits graph: main awaits the gather of the others.
    main = [x for x in got if x["coro"] == "main"][0]
    assert main["awaits"].startswith("gather of %d (" % (20 + 3 + 2)), main
    awaited = set(json.loads(main["awaits_tasks"]))
    assert awaited == {tasks[n]["task_id"] for n in
                       ["worker-0", "worker-1", "worker-2", "cache-refresh", "client"] +
                       ["idle-%d" % i for i in range(20)]}
    assert json.loads(tasks["worker-0"]["awaited_by"]) == [main["task_id"]]
    assert json.loads(handler[0]["awaited_by"]) == []
    # Seen waiting: a later look says for longer.
    wait_for(lambda: rows(t, "SELECT waited_s FROM python.tasks WHERE name = 'worker-0'")
             [0]["waited_s"] >= 0.5, 10, "worker-0 seen waiting")


def test_backtrace_tree_and_deadlock(spawn, python):
    t = start(spawn, python, "--deadlock")
    r = probing("backtrace", "--tasks", target=t.pid)
    assert r.rc == 0, r
    lines = r.out.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith("Thread ")]
    assert "asyncio tasks of its event loop (9):" in r.out, r.out
    # The tree under the main thread: main, then the tasks it awaits.
    main = [l for l in lines if re.match(r"  \S+ Task-1 \(main\) pending, awaits gather of 7 ", l)]
    assert main, r.out
    worker = [i for i, l in enumerate(lines) if "worker-2 (worker) pending, awaits asyncio Queue.get" in l]
    assert worker and lines[worker[0]].startswith("     "), r.out
    assert re.match(r"\s+│?\s+#0\s+Queue\.get \(.*queues.py:\d+\)",
                    lines[worker[0] + 1]), lines[worker[0] + 1]
    assert re.search(r"#1\s+worker \(.*target0\.py:\d+\)", lines[worker[0] + 2]), lines[worker[0] + 2]
    # ping and pong are in main's gather: the cycle is named where the
    # tree comes back to the first of them.
    ping = [i for i, l in enumerate(lines) if "ping (ping) pending, awaits task pong" in l]
    assert ping, r.out
    assert re.match(r"\s+│?\s+#0\s+ping \(.*target0\.py:\d+\)", lines[ping[0] + 1])
    assert "pong (pong) pending, awaits task ping" in lines[ping[0] + 2], r.out
    assert "└─ deadlock: ping awaits pong awaits ping (a cycle of awaits: none of them " \
           "can end)" in lines[ping[0] + 4], r.out
    assert len(head) >= 1 and "MainThread" in lines[head[0]]
    # JSON: the agent's reply as it is.
    j = json.loads(probing("backtrace", "--tasks", "-f", "json", target=t.pid).out)
    tasks = by_name(j["tasks"])
    assert tasks["ping"]["awaitsTasks"] == [tasks["pong"]["id"]]
    assert sorted(tasks["pong"]["awaitedBy"]) == sorted([tasks["ping"]["id"], tasks["Task-1"]["id"]])
    assert tasks["ping"]["awaits"] == "task pong"


def test_no_asyncio_says_why(spawn, python):
    t = spawn(python, """\
        import time
        print("READY", flush=True)
        while True:
            time.sleep(0.1)
        """)
    t.wait_line("READY")
    t.wait_agent()
    r = probing("backtrace", "--tasks", target=t.pid)
    assert r.rc == 0 and "asyncio tasks" not in r.out, r
    assert "no asyncio tasks shown: asyncio is not imported" in r.err, r
    assert rows(t, "SELECT count(*) AS n FROM python.tasks") == [{"n": 0}]


def test_diagnose_deadlock(spawn, python):
    t = start(spawn, python, "--deadlock")
    r = probing("diagnose", "hang", "-d", "1s", target=t.pid, timeout=120)
    assert r.rc == 0, r
    verdict = r.out.splitlines()[0]
    assert re.match(r"verdict: asyncio deadlock: (ping|pong) \(in \1 \(target0\.py:\d+\)\) awaits "
                    r"(ping|pong) \(in \2 \(target0\.py:\d+\)\) awaits \1 .*\(a cycle of awaits",
                    verdict), r.out
    assert "asyncio: 3 tasks wait for asyncio Queue.get (worker-0, worker-1, worker-2)" in r.out, r.out
    assert "probing -t %d backtrace --tasks" % t.pid in r.out


def test_diagnose_blocked_loop(spawn, python):
    t = start(spawn, python, "--block")
    wait_for(lambda: re.search(r"#0\s+blocker ", probing("backtrace", target=t.pid).out),
             30, "the loop blocked")
    r = probing("diagnose", "hang", "-d", "1s", target=t.pid, timeout=120)
    assert r.rc == 0, r
    assert re.match(r"verdict: the event loop is blocked: task blocker \(in blocker "
                    r"\(target0\.py:\d+\)\) has run for at least 1\.0 s without giving "
                    r"control back", r.out), r.out


def test_diagnose_waiting_chain(spawn, python):
    t = start(spawn, python, "--idle", "5")
    r = probing("diagnose", "hang", "-d", "1s", target=t.pid, timeout=120)
    assert r.rc == 0, r
    # Every task waits: the chain is main's, down to one that waits on
    # no task, and what that one waits for.
    assert re.match(r"verdict: no asyncio task moved in [\d.]+ s.*: Task-1 \(in main "
                    r"\(target0\.py:\d+\)\) awaits \S+ \(in \w+ \(target0\.py:\d+\)\), "
                    r"which waits for asyncio ", r.out), r.out
    assert "asyncio: 6 tasks wait for asyncio Event.wait" in r.out, r.out
    assert re.search(r"asyncio: 1 task waits for asyncio Lock\.acquire \(Task-\d+\)", r.out), r.out


def test_ten_thousand_idle_tasks(spawn, python):
    """All of them listed; the table, the tree and the verdict's counts."""
    t = start(spawn, python, "--idle", "10000")
    assert rows(t, "SELECT count(*) AS n FROM python.tasks") == [{"n": 10007}]
    r = probing("diagnose", "hang", "-d", "1s", target=t.pid, timeout=120)
    assert r.rc == 0, r
    assert "asyncio: 10007 tasks, 10007 of them did not move" in r.out, r.out
    assert "asyncio: 10001 tasks wait for asyncio Event.wait" in r.out, r.out


def folded_roots(out):
    """{root frame: samples} of folded stacks, and the stacks."""
    roots, stacks = {}, []
    for line in out.splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        roots[frames[0]] = roots.get(frames[0], 0) + int(n)
        stacks.append(frames)
    return roots, stacks


def test_samples_by_task(spawn, python):
    """Two tasks share the loop's CPU 3:1, an await between each of their
    steps: the samples name the task they ran (profile.samples), and
    `flamegraph --tasks` roots them at "task NAME" with the task's own
    frames under it; `top --tasks` has a row per task."""
    t = start(spawn, python, "--busy")
    r = probing("flamegraph", "-d", "3s", "--tasks", target=t.pid)
    assert r.rc == 0, r
    roots, stacks = folded_roots(r.out)
    render, score = roots.get("task render", 0), roots.get("task score", 0)
    assert render >= 30 and score >= 10, roots
    assert 1.8 < render / score < 5.0, roots
    # Under the task, its coroutine's frames only: not the loop's.
    for frames in stacks:
        if frames[0] in ("task render", "task score"):
            coro = frames[0].split()[1]
            assert frames[1].startswith(coro + " ("), frames
            assert not any("_run_once" in f for f in frames), frames
    # What ran outside any task keeps the thread's whole stack (the
    # loop's own work; a stack torn by the running thread may start
    # anywhere): the tasks' are most of the samples.
    assert render + score >= 0.7 * sum(roots.values()), roots
    # The same samples without --tasks: the loop's frames, no task root.
    r = probing("flamegraph", "--recorded", "-d", "3s", target=t.pid)
    plain, _ = folded_roots(r.out)
    assert not [k for k in plain if k.startswith("task ")], plain
    # In SQL: the task's frame (kind task) and its coroutine's node.
    got = rows(t, "SELECT f.func AS task, count(*) AS n, min(c.func) AS coro, "
                  "max(c.func) AS coro2 FROM profile.samples s "
                  "JOIN profile.frames f ON f.frame_id = s.task_frame_id "
                  "JOIN profile.stacks k ON k.stack_id = s.task_stack_id "
                  "JOIN profile.frames c ON c.frame_id = k.frame_id "
                  "WHERE f.kind = 'task' GROUP BY task")
    named = {x["task"]: x for x in got}
    assert {"render", "score"} <= set(named), got
    for name in ("render", "score"):
        assert named[name]["coro"] == named[name]["coro2"] == name, got
    # top: a row per task, its share across its awaits.
    r = probing("top", "--tasks", "--once", "-d", "2s", "-f", "json",
                target=t.pid, timeout=60)
    assert r.rc == 0, r
    top = {x["function"]: x for x in r.json()}
    assert "task render" in top and "task score" in top, sorted(top)
    # The Python API's flamegraph(tasks=True).
    got = client(python, """
        with probing.connect(%d) as a:
            print(json.dumps(a.flamegraph(seconds=1, tasks=True)))
        """ % t.pid)
    assert "task render;render (" in got, got[:2000]


def test_samples_by_task_off(spawn, python):
    """profile.tasks off: no task listed, none named; --tasks says so."""
    t = start(spawn, python, "--busy")
    assert probing("config", "profile.tasks=off", target=t.pid).rc == 0
    r = probing("flamegraph", "-d", "1s", "--tasks", target=t.pid)
    assert r.rc == 0, r
    roots, _ = folded_roots(r.out)
    assert not [k for k in roots if k.startswith("task ")], roots
    assert "no sample ran an asyncio task" in r.err, r
