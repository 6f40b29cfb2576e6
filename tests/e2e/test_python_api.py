"""The Python API (issue 31): probing.connect(pid | "host:port") speaking
the CLI's requests to another process's agent, and probing.query(sql) on
the process's own agent, each run by the Python under test (a script of
its own, the package from the build's user base)."""
import json
import os
import subprocess
import textwrap

from conftest import USERBASE, free_port, tcp_listening

TARGET = """\
import threading, time
def busy_worker():
    while True:
        sum(range(1000))
threading.Thread(target=busy_worker, name="busy", daemon=True).start()
answer = 42
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""

TOKEN = "a-token-of-the-test-0123456789"


def client(python, code, timeout=120):
    """Runs code (with `import probing, json` before it) under python;
    returns what it printed as JSON on its last line."""
    env = dict(os.environ, PYTHONUSERBASE=USERBASE)
    env.pop("PROBING", None)
    if os.environ.get("PROBING_TARGET_PRELOAD"):
        # The ASan build's agent: its runtime first, as in the targets.
        env["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
    r = subprocess.run([python, "-c", "import json, probing\n" +
                        textwrap.dedent(code)],
                       capture_output=True, text=True, env=env,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_connect_by_pid(spawn, python):
    t = spawn(python, TARGET)
    t.wait_line("READY")
    t.wait_agent()
    got = client(python, """
        with probing.connect(%d) as a:
            threads = a.backtrace()
            rows = a.query("SELECT name FROM python.threads ORDER BY name")
            value = a.eval("answer * 2")
            a.eval("print('said', answer)")
            printed = a.last_output
            folded = a.flamegraph(seconds=1)
            try:
                a.query("SELECT nonsense FROM nowhere")
                err = None
            except probing.ProbingError as e:
                err = str(e)
            pid = a.info["pid"]
        print(json.dumps({"threads": threads, "rows": rows,
                          "columns": rows.columns, "value": value,
                          "printed": printed, "folded": folded,
                          "err": err, "pid": pid}))
        """ % t.pid)
    assert got["pid"] == t.pid
    names = {th["name"] for th in got["threads"]}
    assert {"MainThread", "busy"} <= names, names
    busy = [th for th in got["threads"] if th["name"] == "busy"][0]
    assert busy["frames"][0]["func"].endswith("busy_worker"), busy["frames"][:2]
    assert got["columns"] == ["name"] and {"name": "busy"} in got["rows"], got["rows"]
    assert got["value"] == "84" and "said 42" in got["printed"], got
    assert any("busy_worker" in line for line in got["folded"].splitlines()), \
        got["folded"][:2000]
    assert got["err"] and "nowhere" in got["err"], got["err"]
    # The sampler the flamegraph started is stopped.
    again = client(python, """
        with probing.connect(%d) as a:
            print(json.dumps(a.request("probing/profile", {"action": "status"})))
        """ % t.pid)
    assert not again["running"], again


def test_query_in_the_process(spawn, python):
    """probing.query on the process's own agent, from its main thread:
    rows (a DataFrame where pandas is importable), the live tables
    included (their reads take the GIL the caller gave up while
    waiting)."""
    t = spawn(python, """\
        import json, probing, threading, time
        threading.Thread(target=time.sleep, args=(60,), name="napper",
                         daemon=True).start()
        r = probing.query("SELECT name FROM python.threads ORDER BY name")
        try:
            import pandas
            names, kind = list(r["name"]), "frame"
        except ImportError:
            names, kind = [x["name"] for x in r], "rows"
        n = probing.query("SELECT count(*) AS n FROM python.backtrace")
        n = int(n["n"][0]) if kind == "frame" else n[0]["n"]
        print("RESULT", json.dumps({"names": names, "kind": kind, "n": n}),
              flush=True)
        time.sleep(60)
        """, agent="init")
    t.wait_line("RESULT")
    line = [l for l in t.output().splitlines() if l.startswith("RESULT")][0]
    got = json.loads(line.split(" ", 1)[1])
    assert "MainThread" in got["names"] and "napper" in got["names"], got
    assert got["n"] >= 2, got


def test_tcp_with_a_token_and_errors(spawn, python):
    port = free_port()
    t = spawn(python, TARGET, env={"PROBING_TOKEN": TOKEN,
                                   "PROBING_LISTEN": "127.0.0.1:%d" % port})
    t.wait_line("READY")
    t.wait_agent()
    tcp_listening(port)
    got = client(python, """
        out = {}
        with probing.connect("127.0.0.1:%d", token=%r) as a:
            out["n"] = len(a.query("SELECT 1 AS one"))
        for target, token in (("127.0.0.1:%d", "wrong-token-0123456789"),
                              (999999999, None), ("nohost", None)):
            try:
                probing.connect(target, token=token).close()
                out[str(target)] = None
            except (probing.ProbingError, ValueError) as e:
                out[str(target)] = "%%s: %%s" %% (type(e).__name__, e)
        print(json.dumps(out))
        """ % (port, TOKEN, port))
    assert got["n"] == 1, got
    assert "wrong token" in got["127.0.0.1:%d" % port], got
    assert got["999999999"].startswith("ProbingError: no Probing agent at 999999999"), got
    assert got["nohost"].startswith("ValueError: a target is a pid or HOST:PORT"), got
