"""probing query: SQL over the agent's tables, output formats, errors."""
from conftest import probing

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def start(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    return t


def test_any_sqlite_query(spawn, python):
    t = start(spawn, python)
    r = probing("query", "-f", "json",
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) "
                "SELECT sum(x) AS s, group_concat(x) AS g FROM c", target=t.pid)
    assert r.rc == 0, r
    assert r.json() == [{"s": 15, "g": "1,2,3,4,5"}]


def test_catalog_lists_tables(spawn, python):
    t = start(spawn, python)
    r = probing("query", "-f", "json",
                "SELECT schema, name, kind FROM probing.tables ORDER BY schema, name",
                target=t.pid)
    assert r.rc == 0, r
    names = {(row["schema"], row["name"]) for row in r.json()}
    assert {("python", "backtrace"), ("python", "threads"), ("probing", "config")} <= names


def test_csv_and_plain_output(spawn, python):
    t = start(spawn, python)
    r = probing("query", "-f", "csv", "SELECT 1 AS a, 'x,y' AS b", target=t.pid)
    assert r.rc == 0, r
    assert r.out.splitlines() == ["a,b", '1,"x,y"']
    r = probing("query", "SELECT 1 AS a, 'z' AS b", target=t.pid)
    assert r.rc == 0, r
    # piped: plain rows, tab-separated, with a header
    assert r.out.splitlines()[-1].split("\t") == ["1", "z"]


def test_bad_sql_gives_sqlite_message(spawn, python):
    t = start(spawn, python)
    r = probing("query", "SELEC 1", target=t.pid)
    assert r.rc == 7, r
    assert "syntax error" in r.err
    r = probing("query", "SELECT nope FROM python.backtrace", target=t.pid)
    assert r.rc == 7, r
    assert "no such column: nope" in r.err


def test_row_cap_and_time_cap(spawn, python):
    t = start(spawn, python)
    r = probing("query", "-f", "json", "--max-rows", "3",
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100) SELECT x FROM c",
                target=t.pid)
    assert r.rc == 0, r
    assert [row["x"] for row in r.json()] == [1, 2, 3]
    probing("config", "query.timeout_ms=300", target=t.pid)
    r = probing("query",
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
                target=t.pid)
    assert r.rc != 0
    assert "300 ms" in r.err
    assert t.alive()


def test_concurrent_clients(spawn, python):
    import concurrent.futures
    t = start(spawn, python)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(probing, "query", "-f", "json",
                          "SELECT count(*) AS n FROM python.backtrace", target=t.pid)
                for _ in range(16)]
        results = [f.result() for f in futs]
    for r in results:
        assert r.rc == 0, r
        assert r.json()[0]["n"] >= 1


def test_sql_cannot_reach_raw_pointers(spawn, python):
    """fts3_tokenizer() took a raw function pointer: one query leaked an
    address, two killed the target (a general protection fault in
    libsqlite3).  Both refused now, with a reason, and the target lives."""
    t = start(spawn, python)
    attempts = [
        ("SELECT hex(fts3_tokenizer('simple')) AS p", "fts3_tokenizer"),
        ("SELECT fts3_tokenizer('evil', x'4141414141414141')", "fts3_tokenizer"),
        ("CREATE VIRTUAL TABLE e USING fts3(x, tokenize=evil)", "virtual tables"),
        ("CREATE VIRTUAL TABLE e USING fts3(x)", "virtual tables"),
        ("SELECT load_extension('/tmp/x.so')", "load_extension"),
    ]
    for sql, why in attempts:
        r = probing("query", sql, target=t.pid)
        assert r.rc == 7 and "not authorized" in r.err and why in r.err, (sql, r)
        assert t.alive(), (sql, t.output())
    r = probing("query", "-f", "json", "SELECT 1 + 1 AS two", target=t.pid)
    assert r.rc == 0 and r.json() == [{"two": 2}], r


def test_readonly_session_creates_no_tables(spawn, python):
    t = spawn(python, IDLE, env={"PROBING_READONLY": "1"})
    t.wait_line("READY")
    t.wait_agent()
    for sql in ("CREATE TABLE scratch(a)", "CREATE TEMP TABLE s AS SELECT 1",
                "CREATE VIEW v AS SELECT 1"):
        r = probing("query", sql, target=t.pid)
        assert r.rc == 7 and "read-only mode" in r.err, (sql, r)
    r = probing("query", "-f", "json",
                "SELECT count(*) AS n FROM sqlite_schema", target=t.pid)
    assert r.rc == 0 and r.json() == [{"n": 0}], r


def test_global_schema_outside_a_job_is_this_process(spawn, python):
    """global.<schema>.<table> without a node list: this process's rows,
    tagged with its host (no rank); the temporary table is gone after."""
    import socket
    t = start(spawn, python)
    r = probing("query", "-f", "json",
                "SELECT _rank, _host, count(*) AS n FROM "
                "GLOBAL.python.backtrace WHERE func = '<module>' "
                "AND 'global.x.y' = 'global.x.y'", target=t.pid)
    assert r.rc == 0, r
    assert r.json() == [{"_rank": None, "_host": socket.gethostname(),
                         "n": 1}], r
    r = probing("query", "-f", "json", "SELECT count(*) AS n FROM "
                "temp.sqlite_master", target=t.pid)
    assert r.json() == [{"n": 0}], r
    r = probing("query", "SELECT * FROM global.python.nope", target=t.pid)
    assert r.rc == 7 and "global.python.nope: no such table" in r.err, r
    # Only the columns the query names are asked for (a live table
    # computes what is read: locals are reprs): the temp table has them.
    r = probing("query", "-f", "json", "SELECT count(*) AS n, max(lineno) "
                "> 0 AS ok FROM global.python.backtrace", target=t.pid)
    assert r.rc == 0 and r.json()[0]["ok"] == 1, r
    r = probing("query", "-f", "json", "SELECT locals FROM "
                "global.python.backtrace WHERE func = '<module>'",
                target=t.pid)
    assert r.rc == 0 and len(r.json()) == 1, r
    r = probing("query", "SELECT locals FROM global.python.backtrace g "
                "WHERE g.depth = 0 AND g.nope = 1", target=t.pid)
    assert r.rc == 7 and "no such column: g.nope" in r.err, r
