"""The hang watchdog (hang.timeout): a main thread stuck on a lock for
longer than the timeout is recorded once, with every thread's Python and
native stacks, in process.hangs and a report file; when it moves again
the hang gets its end.  Read back with the real `probing hangs` and
`probing report`.
"""
import glob
import json
import textwrap
import time

from conftest import probing, wait_for, qualified, version_of

STUCK = """
import os, threading, time
lock = threading.Lock()
assert lock.acquire(blocking=False)
def busy():
    while True:
        time.sleep(0.02)
def releaser():
    while not os.path.exists("release"):
        time.sleep(0.02)
    lock.release()
threading.Thread(target=busy, name="busy", daemon=True).start()
threading.Thread(target=releaser, name="releaser", daemon=True).start()
def stuck():
    print("STUCK", flush=True)
    lock.acquire()
    print("MOVED", flush=True)
time.sleep(1.0)  # the watchdog sees this stack first, then the change
stuck()
n = 0
while not os.path.exists("finish"):
    n += 1
    time.sleep(0.001 if n % 2 else 0.002)
print("DONE", flush=True)
"""


def line_of(code, text):
    lines = textwrap.dedent(code).splitlines()
    return [i + 1 for i, l in enumerate(lines) if l.strip() == text][0]


def hangs(pid):
    r = probing("hangs", "-f", "json", target=pid)
    assert r.rc == 0, r
    return r.json()


def stuck_rows(pid):
    return [h for h in hangs(pid) if h["func"] == "stuck"]


def test_main_thread_stuck_on_a_lock(spawn, python, tmp_path):
    t = spawn(python, STUCK, env={"PROBING_HANG_TIMEOUT": "2s"})
    t.wait_line("STUCK")
    t.wait_agent()
    wait_for(lambda: stuck_rows(t.pid), 60, "the hang to be recorded")
    # Several periods later, still one record for this hang.
    time.sleep(1.0)
    rows = stuck_rows(t.pid)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["resumed"] is None
    assert row["native_id"] == str(t.pid)
    assert row["file"] == t.script
    assert row["lineno"] == str(line_of(STUCK, "lock.acquire()"))
    assert float(row["seconds"]) >= 2.0
    assert float(row["detected"]) - float(row["started"]) >= 2.0
    # ts, the recorded tables' one time column: when it was seen.
    r = probing("query", "SELECT ts = detected FROM process.hangs WHERE "
                "func = 'stuck'", target=t.pid)
    assert r.rc == 0 and r.out.split()[-1] == "1", r
    # Seen to change from the sleep: its start is known.
    assert row["started_known"] == "1", row
    # "Stuck for" keeps counting while it is stuck (it stayed at the
    # detection's figure).
    before = float(row["seconds"])
    time.sleep(1.5)
    after = float(stuck_rows(t.pid)[0]["seconds"])
    assert after >= before + 1.0, (before, after)
    r = probing("hangs", target=t.pid)
    assert r.rc == 0 and "<=" not in r.out and ">=" not in r.out, r
    path = row["path"]
    assert path.startswith(str(tmp_path / ("probing-hang-%d-" % t.pid)))
    # Its stacks, through the agent and from the file: the same report.
    r = probing("hangs", "-f", "json", row["id"], target=t.pid)
    assert r.rc == 0, r
    rep = r.json()
    f = probing("report", "-f", "json", path)
    assert f.rc == 0, f
    assert f.json()["threads"] == rep["threads"]
    assert rep["complete"] and rep["header"]["kind"] == "hang"
    main = rep["threads"][0]
    assert main["tid"] == t.pid and main["flags"] == ["stuck", "main"]
    assert main["name"] == "MainThread"
    assert [fr["func"] for fr in main["python"]] == ["stuck", "<module>"]
    assert main["python"][0]["line"] == line_of(STUCK, "lock.acquire()")
    funcs = [fr.get("func", "") for fr in main["native"]]
    # The lock's wait.  From 3.13 a lock is a PyMutex that waits in the
    # parking lot, and an optimised build (Debian's, LTO) inlines
    # PyThread_acquire_lock_timed into the lock's static method.
    waits = ("PyThread_acquire_lock_timed+",)
    if version_of(python) >= (3, 13):
        waits += ("_PyMutex_LockTimed+", "_PyParkingLot_Park+",
                  "_PySemaphore_Wait+")
    assert any(fn.startswith(waits) for fn in funcs), " ".join(funcs)
    others = {th["python"][0]["func"]: th for th in rep["threads"][1:]}
    assert set(others) == {"busy", "releaser"}
    for th in others.values():
        assert th["native"], th
        assert any(fn.get("func", "").startswith("_PyEval_EvalFrameDefault+")
                   for fn in th["native"]), th
    text = probing("report", path)
    assert text.rc == 0 and text.out.startswith("Hang: "), text
    assert "(stuck, main)" in text.out and "        lock.acquire()" in text.out
    assert "hang: the main thread has been stuck" in t.output()
    # It moves again: the hang ends, in the table and in the file.
    (tmp_path / "release").write_text("")
    t.wait_line("MOVED")
    wait_for(lambda: stuck_rows(t.pid)[0]["resumed"] is not None, 60,
             "the end of the hang")
    row = stuck_rows(t.pid)[0]
    assert float(row["resumed"]) > float(row["detected"])
    wait_for(lambda: "resumed: " in open(path).read(), 30, "resumed: line")
    r = probing("hangs", target=t.pid)
    assert r.rc == 0 and "moved on" in r.out, r
    # One hang's text: its whole length as the list has it, then the
    # report written when it was seen (its own, shorter, figure).
    r = probing("hangs", row["id"], target=t.pid)
    assert r.rc == 0, r
    assert r.out.splitlines()[0] == (
        "hang %s: stuck for %.1f s in all, then it moved on; its report, "
        "written when the watchdog saw it:" % (row["id"], float(row["seconds"]))), r.out
    assert "has not changed for " in r.out, r.out
    (tmp_path / "finish").write_text("")
    assert t.proc.wait(timeout=60) == 0
    assert "DONE" in t.output()


def test_off_by_default_and_the_setting(spawn, python):
    t = spawn(python, "import time; time.sleep(60)\n")
    t.wait_agent()
    r = probing("config", "-f", "json", target=t.pid)
    settings = {s["name"]: s["value"] for s in r.json()}
    assert settings["hang.timeout"] == "off"
    time.sleep(1.5)
    r = probing("hangs", target=t.pid)
    assert r.rc == 0 and "no hangs" in r.out, r
    assert hangs(t.pid) == []
    r = probing("config", "hang.timeout=2m", target=t.pid)
    assert r.rc == 0 and "120s" in r.out, r
    r = probing("config", "hang.timeout=1500ms", target=t.pid)
    assert r.rc == 0 and "1500ms" in r.out, r
    r = probing("config", "hang.timeout=soon", target=t.pid)
    assert r.rc == 1 and "not a duration" in r.err, r
    r = probing("config", "hang.timeout=0", target=t.pid)
    assert r.rc == 0 and "off" in r.out, r
    r = probing("hangs", "7", target=t.pid)
    assert r.rc == 1 and "no hang 7" in r.err, r
    assert t.alive()


def test_switched_on_at_run_time(spawn, python, tmp_path):
    """Set through `probing config` on a process that is already stuck."""
    code = """
    import threading
    print("STUCK", flush=True)
    threading.Event().wait()
    """
    t = spawn(python, code)
    t.wait_line("STUCK")
    t.wait_agent()
    r = probing("config", "hang.timeout=1s", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: hangs(t.pid), 60, "the hang to be recorded")
    # Stuck before the watchdog looked: it began then or earlier, and
    # has lasted at least this long; said so, not taken for the start.
    row = hangs(t.pid)[0]
    assert row["started_known"] == "0", row
    r = probing("hangs", target=t.pid)
    assert r.rc == 0, r
    line = r.out.splitlines()[1]
    assert "\t<= " in line and "\t>= " in line, r.out
    r = probing("hangs", "--report", target=t.pid)
    assert r.rc == 0 and "(stuck, main)" in r.out, r
    assert "stuck since at or before " in r.out, r.out
    assert "has not changed for at least " in r.out, r.out
    assert qualified(python, "Event.wait") in r.out
    assert glob.glob(str(tmp_path / ("probing-hang-%d-*.txt" % t.pid)))
    assert t.alive()
