"""Issue 27, item 7 (its first two parts): read-only mode still let a
session slow and change the target.

- A single LIKE over a 1 MB string ran 29 s through a 5 s
  query.timeout_ms: SQLite's progress handler runs between instructions,
  and one like() (or instr(), replace(), trim()) call on long strings is
  one instruction.  Those functions are now bounded (sql/sqlfuncs.h):
  linear, or checked against the query's deadline.  Here the statements
  would run for minutes unbounded; with the fix each answers (a result,
  or "query stopped after N ms"), one at a time or four at once, and
  the agent answers the next query.
- `config crash.path=DIR`, `data.dir=DIR` (and every setting that makes
  the agent write or delete files, or send signals to the program's
  threads: profile.native_idle, hang.*, crash.*, retention.*,
  data.min_free_*) were allowed in read-only mode: the agent then
  wrote files as the target's user wherever the session said.  They are
  refused now (error id 403, "read-only mode: ..."), and nothing is
  written there.
"""
import subprocess

from conftest import CLI, probing

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""

# Each of these is one SQLite instruction that took minutes to hours
# before (n * m character comparisons, n and m in the millions).
SLOW = [
    # like(): 4 MB of 'a' against a 49,999-character pattern.
    "SELECT printf('%.*c', 4000000, 'a') LIKE "
    "('%' || printf('%.*c', 49997, 'a') || 'b')",
    "SELECT printf('%.*c', 4000000, 'a') GLOB "
    "('*' || printf('%.*c', 49997, 'a') || 'b')",
    # instr() and replace(): an 8 MB haystack, a 4 MB needle.
    "SELECT instr(printf('%.*c', 8000000, 'a'), "
    "printf('%.*c', 4000000, 'a') || 'b')",
    "SELECT length(replace(printf('%.*c', 8000000, 'a'), "
    "printf('%.*c', 4000000, 'a') || 'b', 'x'))",
    # trim() with a 4 MB set of characters.
    "SELECT length(trim(printf('%.*c', 4000000, 'a') || 'b', "
    "printf('%.*c', 4000000, 'c') || 'a'))",
]
# What each answers when it runs to its end.
ANSWERS = ["0", "0", "0", "8000000", "1"]


def start_readonly(spawn, python, env=None):
    t = spawn(python, IDLE, env=dict({"PROBING_READONLY": "1"}, **(env or {})))
    t.wait_line("READY")
    t.wait_agent()
    return t


def answered(r, expected):
    """The query ended on its own terms: its result, or the time cap."""
    if r.rc == 0:
        return r.out.split()[-1] == expected
    return r.rc == 7 and "query stopped after 1000 ms" in r.err


def test_time_cap_holds_for_every_statement(spawn, python):
    t = start_readonly(spawn, python)
    r = probing("config", "query.timeout_ms=1000", target=t.pid)
    assert r.rc == 0, r
    for sql, expected in zip(SLOW, ANSWERS):
        r = probing("query", sql, target=t.pid, timeout=120)
        assert answered(r, expected), (sql, r)
    # Four at once: each ends, and the agent answers the next query.
    procs = [subprocess.Popen([CLI, "-t", str(t.pid), "query", sql],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for sql in SLOW[:2] * 2]
    for p, expected in zip(procs, ANSWERS[:2] * 2):
        out, err = p.communicate(timeout=120)

        class R:
            pass
        r = R()
        r.rc, r.out, r.err = p.returncode, out, err
        assert answered(r, expected), (p.returncode, out, err)
    r = probing("query", "SELECT 1 + 1", target=t.pid)
    assert r.rc == 0 and r.out.split()[-1] == "2", r
    assert t.alive()


def test_bounded_functions_answer_as_sqlite(spawn, python):
    """The replacements give SQLite's answers (NULLs, ESCAPE, classes,
    case, characters beyond ASCII, blobs)."""
    t = start_readonly(spawn, python)
    cases = [
        ("'abc' LIKE 'A_C'", "1"), ("'abc' LIKE 'a%'", "1"),
        ("'abc' LIKE '%b'", "0"), ("'a%c' LIKE 'a!%c' ESCAPE '!'", "1"),
        ("'abc' LIKE 'a!%c' ESCAPE '!'", "0"), ("'éa' LIKE '_a'", "1"),
        ("'É' LIKE 'é'", "0"), ("NULL LIKE 'a'", ""),
        ("'abc' GLOB 'a[a-c]?'", "1"), ("'abc' GLOB 'A*'", "0"),
        ("'a]' GLOB 'a[]]'", "1"), ("'ab' GLOB 'a[^b]'", "0"),
        ("'abc' GLOB 'a[bc'", "0"),
        ("instr('héllo', 'l')", "3"), ("instr('abc', '')", "1"),
        ("instr(x'010203', x'03')", "3"), ("instr('abc', NULL)", ""),
        ("replace('aaaa', 'aa', 'b')", "bb"), ("replace('abc', '', 'x')", "abc"),
        ("trim('xxhixx', 'x')", "hi"), ("ltrim('éék', 'é')", "k"),
        ("rtrim('abcc', 'cb')", "a"),
    ]
    sql = "SELECT " + ", ".join("quote(%s)" % c for c, _ in cases)
    r = probing("query", "-f", "json", sql, target=t.pid)
    assert r.rc == 0, r
    row = list(r.json()[0].values())
    for (expr, want), got in zip(cases, row):
        want = "NULL" if want == "" else (want if want.isdigit() else "'%s'" % want)
        assert str(got) == want, (expr, got, want)
    r = probing("query", "SELECT 'a' LIKE 'a' ESCAPE 'xy'", target=t.pid)
    assert r.rc == 7 and "ESCAPE expression must be a single character" in r.err, r


def test_readonly_refuses_settings_that_write_or_signal(spawn, python,
                                                        tmp_path):
    t = start_readonly(spawn, python)
    planted = tmp_path / "planted"  # a directory the target may write in
    planted.mkdir()
    refused = ["crash.path=%s" % planted, "data.dir=%s" % planted,
               "crash.enabled=on", "hang.timeout=1s", "hang.native=off",
               "profile.native_idle=on", "retention.days=0",
               "retention.max_mb=1", "data.min_free_mb=0",
               "data.min_free_pct=0"]
    before = probing("config", target=t.pid)
    assert before.rc == 0, before
    for kv in refused:
        r = probing("config", kv, target=t.pid)
        assert r.rc != 0 and "read-only mode" in r.err, (kv, r)
    # All or nothing: a looking setting with a refused one is refused.
    r = probing("config", "query.max_rows=500", "data.dir=" + str(planted),
                target=t.pid)
    assert r.rc != 0 and "read-only mode" in r.err, r
    after = probing("config", target=t.pid)
    strip = lambda out: [l for l in out.splitlines()
                         if not l.startswith(("data.status", "agent.",
                                              "torch.status", "comm.status",
                                              "cluster.status"))]
    assert strip(after.out) == strip(before.out)
    assert list(planted.iterdir()) == []
    # Looking settings still change.
    r = probing("config", "query.max_rows=500", target=t.pid)
    assert r.rc == 0, r
    assert t.alive()
