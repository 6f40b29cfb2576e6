"""The program's own rows (issue 31): @probing.table, probing.span() and
probing.step() write into the schema `app`, read back with SQL in the
process (probing.query), from outside (the CLI), and from the recording
once the process is gone; an append never waits, a flood is dropped and
counted, bad rows and names are refused with what to do."""
import json

from conftest import probing, wait_for
from test_python_api import client
from test_record import rec_env, run_dirs


def test_table_spans_steps_read_back_in_the_process(python):
    out = client(python, """\
        import time
        from typing import Optional

        @probing.table
        class TrainStats:
            \"\"\"Per-batch figures of the loop.\"\"\"
            step: int
            loss: float
            tokens: int
            note: Optional[str] = None
            blob: bytes = b""

        for i in range(1, 4):
            probing.step()
            with probing.span("forward"):
                with probing.span("inner"):
                    time.sleep(0.005)
            TrainStats.append(step=i, loss=1.0 / i, tokens=1000 * i,
                              note=None if i == 2 else "b%d" % i,
                              blob=b"\\x00\\xff")
        with probing.step():
            with probing.span("last"):
                pass
        @probing.span("decorated")
        def f(n):
            return f(n - 1) if n else 0
        f(2)
        def q(sql):
            r = probing.query(sql)   # a DataFrame where pandas is
            if hasattr(r, "to_dict"):
                r = r.astype(object).where(r.notna(), None).to_dict("records")
            return [dict(x) for x in r]
        rows = q("SELECT step, loss, tokens, note, hex(blob) AS blob, "
                 "typeof(loss) AS tl, ts > 1e9 AS stamped FROM app.train_stats")
        spans = q("SELECT name, depth, step, duration >= 0 AS ok, "
                  "end_ts >= ts AS ordered, native_id > 0 AS tid "
                  "FROM app.spans ORDER BY rowid")
        steps = q("SELECT step, duration >= 0 AS ok FROM app.steps ORDER BY step")
        tables = q("SELECT name, kind, doc FROM probing.tables "
                   "WHERE schema = 'app' ORDER BY name")
        cols = q("SELECT name, type FROM pragma_table_info('train_stats', 'app')")
        errors = []
        for bad in (lambda: TrainStats.append(step="x", loss=1.0, tokens=1),
                    lambda: TrainStats.append(step=2 ** 70, loss=1.0, tokens=1)):
            try:
                bad()
            except (TypeError, OverflowError) as e:
                errors.append("%s: %s" % (type(e).__name__, e))
        for name, cls_cols in (("train_stats", {"a": int}), ("spans", {"a": int}),
                               ("no-dash", {"a": int})):
            try:
                probing.table(type("X", (), {"__annotations__": cls_cols}), name=name)
            except ValueError as e:
                errors.append("ValueError: %s" % e)
        try:
            probing.query("INSERT INTO app.train_stats(step) VALUES (1)")
        except probing.ProbingError as e:
            errors.append("ProbingError: %s" % e)
        print(json.dumps({"rows": rows, "spans": spans, "steps": steps,
                          "tables": tables, "cols": cols, "errors": errors,
                          "stats": probing.app.stats()}, default=str))
        """)
    assert out["rows"] == [
        {"step": 1, "loss": 1.0, "tokens": 1000, "note": "b1", "blob": "00FF",
         "tl": "real", "stamped": 1},
        {"step": 2, "loss": 0.5, "tokens": 2000, "note": None, "blob": "00FF",
         "tl": "real", "stamped": 1},
        {"step": 3, "loss": 1 / 3, "tokens": 3000, "note": "b3", "blob": "00FF",
         "tl": "real", "stamped": 1}], out
    assert out["cols"] == [{"name": "step", "type": "INTEGER"},
                           {"name": "loss", "type": "REAL"},
                           {"name": "tokens", "type": "INTEGER"},
                           {"name": "note", "type": "TEXT"},
                           {"name": "blob", "type": "BLOB"},
                           {"name": "ts", "type": "REAL"}], out
    # Inner spans end first; depth is the spans open around; the step
    # each was in; the decorator nests on recursion.
    expect = []
    for i in range(1, 4):
        expect += [("inner", 1, i), ("forward", 0, i)]
    expect += [("last", 0, 4), ("decorated", 2, None), ("decorated", 1, None),
               ("decorated", 0, None)]
    assert [(s["name"], s["depth"], s["step"]) for s in out["spans"]] == expect, out
    assert all(s["ok"] == s["ordered"] == s["tid"] == 1 for s in out["spans"]), out
    # probing.step() ended steps 1-3 as the next began; the with block 4.
    assert out["steps"] == [{"step": n, "ok": 1} for n in (1, 2, 3, 4)], out
    assert [(t["name"], t["kind"]) for t in out["tables"]] == [
        ("spans", "recorded"), ("steps", "recorded"), ("train_stats", "recorded")]
    assert out["tables"][2]["doc"] == "Per-batch figures of the loop.", out
    errs = out["errors"]
    assert errs[0] == "TypeError: app.train_stats, column 1: a str where the column takes an int", errs
    assert errs[1].startswith("OverflowError"), errs
    assert "app.train_stats is defined already, with other columns" in errs[2], errs
    assert "not a name for a table of app" in errs[3] and "spans or steps" in errs[3], errs
    assert "not a name for a table of app" in errs[4], errs
    assert errs[5].startswith("ProbingError:") and "read-only" in errs[5], errs
    st = out["stats"]
    assert st["appended"] == 3 + 10 + 4 and st["written"] == st["appended"], st
    assert st["dropped"] == st["errors"] == st["cut"] == 0, st


APPENDER = """\
import os, sys, time, probing

@probing.table(name="batches")
class Batch:
    n: int
    label: str

for n in range(int(sys.argv[1])):
    Batch.append(n=n, label="x" * (n % 7))
    with probing.span("work"):
        pass
print("APPENDED", flush=True)
if sys.argv[2] == "wait":
    while True:
        time.sleep(0.05)
"""


def test_rows_seen_from_outside_and_in_the_recording(spawn, python, tmp_path):
    data = tmp_path / "data"
    t = spawn(python, APPENDER, args=("500", "exit"), env=rec_env(data))
    assert t.proc.wait(timeout=60) == 0 and "APPENDED" in t.output(), t.output()
    env = {"PROBING_DATA_DIR": str(data)}
    # The process is gone: its recording holds every row, the last ones
    # appended just before it exited too.
    r = probing("query", "-f", "json",
                "SELECT count(*) AS n, max(n) AS last, sum(length(label)) AS chars "
                "FROM app.batches", target=t.pid, env=env)
    assert r.rc == 0, r
    assert json.loads(r.out) == [{"n": 500, "last": 499,
                                  "chars": sum(n % 7 for n in range(500))}], r
    r = probing("query", "SELECT count(*) FROM app.spans WHERE name = 'work'",
                target=t.pid, env=env)
    assert r.rc == 0 and r.out.split()[-1] == "500", r
    assert len(run_dirs(data)) == 1


def test_rows_of_a_running_program_from_the_cli(spawn, python):
    t = spawn(python, APPENDER, args=("50", "wait"))
    t.wait_line("APPENDED")

    def seen():
        r = probing("query", "-f", "json", "SELECT count(*) AS n FROM app.batches",
                    target=t.pid)
        return r.rc == 0 and json.loads(r.out)[0]["n"] == 50
    wait_for(seen, 30, "the rows from the CLI")
    r = probing("query", "SELECT name, kind FROM probing.tables WHERE schema = 'app'",
                target=t.pid)
    assert r.rc == 0 and "batches" in r.out and "recorded" in r.out, r


def test_markers_alone_are_written_as_they_come(python):
    """A program that only sets markers: the agent's recorder thread
    writes them every 100 ms, no query asking: 3,000 spans over three
    seconds or more never fill the 2,048-row queue."""
    out = client(python, """\
        import time
        probing.init()          # the agent up and idle before the first
        time.sleep(0.3)
        for n in range(3000):
            with probing.span("tick"):
                pass
            time.sleep(0.001)
        st = probing.app.stats()
        print(json.dumps(st))
        """)
    assert out["appended"] == 3000 and out["dropped"] == 0, out
    assert out["written"] >= 3000 - 2048, out


def test_a_flood_neither_blocks_nor_grows(python):
    """Appends as fast as the program can: none waits for the agent (a
    full queue drops and counts), each table keeps at most app.max_rows;
    a long value is cut at a character boundary."""
    out = client(python, """\
        probing.init(app_max_rows=1000)

        def q(sql):
            r = probing.query(sql)
            if hasattr(r, "to_dict"):
                r = r.astype(object).where(r.notna(), None).to_dict("records")
            return [dict(x) for x in r]

        @probing.table
        class Long:
            text: str

        Long.append(text="é" * 3000)          # 6000 bytes of UTF-8
        long = q("SELECT text FROM app.long")[0]["text"]

        @probing.table
        class Flood:
            n: int

        for n in range(200000):
            Flood.append(n=n)
        rows = q("SELECT count(*) AS n, max(n) AS last FROM app.flood")
        print(json.dumps({"long": long, "rows": rows, "stats": probing.app.stats()}))
        """)
    st = out["stats"]
    assert st["appended"] + st["dropped"] == 200001, st
    assert st["written"] == st["appended"] and st["errors"] == 0, st
    # Whole characters, a row's worth (2 KiB) at most.
    assert set(out["long"]) == {"é"} and 900 <= len(out["long"]) < 1024, len(out["long"])
    assert st["cut"] == 1, st
    row = out["rows"][0]
    assert 0 < row["n"] <= 1000 and row["last"] <= 199999, out


MARKED = """\
import time, probing
print("READY", flush=True)
while True:
    with probing.step():
        with probing.span("load"):
            time.sleep(0.01)
        with probing.span("compute"):
            sum(range(20000))
"""


def test_markers_on_the_timeline(spawn, python, tmp_path):
    """probing trace: each step a span holding its load and compute spans,
    on the thread that ran them."""
    from test_trace import inside, read
    t = spawn(python, MARKED)
    t.wait_line("READY")
    t.wait_agent()
    out = tmp_path / "marks.json"
    r = probing("trace", "-d", "2s", "--no-samples", "-o", str(out), target=t.pid)
    assert r.rc == 0, r
    doc = read(out)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    steps = [e for e in spans if e.get("cat") == "app.step"]
    marks = [e for e in spans if e.get("cat") == "app"]
    assert len(steps) >= 10 and all(e["name"].startswith("step ") for e in steps), steps
    assert {e["tid"] for e in steps + marks} == {t.pid}, spans[:5]
    whole = [s for s in steps if s["args"]["ms"] >= 10]
    assert whole, steps
    for s in whole[1:-1]:
        inner = sorted(e["name"] for e in marks if inside(s, e))
        assert inner == ["compute", "load"], (s, inner)
        assert all(e["args"]["step"] == s["args"]["step"]
                   for e in marks if inside(s, e)), s


def test_threads_append_at_once(python):
    """Eight threads appending and nesting spans at once: every row is
    whole (the GIL makes them the queue's one producer at a time), each
    thread's spans nest in that thread, and nothing is lost that is not
    counted."""
    out = client(python, """\
        import sys, threading
        sys.setswitchinterval(1e-5)          # switch threads as often as can be

        @probing.table
        class Row:
            worker: int
            n: int
            text: str

        def work(w):
            for n in range(500):
                with probing.span("outer %d" % w):
                    with probing.span("inner %d" % w):
                        Row.append(worker=w, n=n, text="w%d-%d" % (w, n) * 3)

        ts = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        def q(sql):
            r = probing.query(sql)
            if hasattr(r, "to_dict"):
                r = r.astype(object).where(r.notna(), None).to_dict("records")
            return [dict(x) for x in r]
        bad = q("SELECT count(*) AS n FROM app.row WHERE text != "
                "printf('w%d-%dw%d-%dw%d-%d', worker, n, worker, n, worker, n)")
        spans = q("SELECT name, depth, count(DISTINCT native_id) AS threads, count(*) AS n "
                  "FROM app.spans GROUP BY name, depth ORDER BY name")
        print(json.dumps({"bad": bad, "spans": spans, "stats": probing.app.stats()}))
        """)
    st = out["stats"]
    assert st["appended"] + st["dropped"] == 8 * 500 * 3, st
    assert st["written"] == st["appended"] and st["errors"] == 0, st
    assert out["bad"] == [{"n": 0}], out
    for s in out["spans"]:
        assert s["depth"] == (0 if s["name"].startswith("outer") else 1), s
        assert s["threads"] == 1, s
