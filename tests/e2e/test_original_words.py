"""The original Probing's words, as its README and docs use them: each is
accepted, or answered with the exact command to use here — never a bare
"unknown"."""
import json

from conftest import free_port, probing, wait_for

IDLE = """\
import time
def idle():
    while True:
        time.sleep(0.01)
print("READY", flush=True)
idle()
"""


def run(*args, env=None):
    """probing with exactly these arguments (no -t added)."""
    return probing(*args, env=env)


def main_funcs(out, pid):
    body = json.loads(out)
    main = [th for th in body["threads"] if th["nativeId"] == pid][0]
    return [f["func"] for f in main["frames"]]


def test_the_target_first_and_pid_options(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    pid = str(t.pid)
    # `probing <pid> backtrace`, with global options before and after.
    for argv in ([pid, "backtrace", "-f", "json"],
                 [pid, "-f", "json", "backtrace"],
                 ["--timeout", "9000", pid, "bt", "-f", "json"],
                 ["-p", pid, "backtrace", "-f", "json"],
                 ["--pid", pid, "dump", "-f", "json"]):
        r = run(*argv)
        assert r.rc == 0, (argv, r)
        assert main_funcs(r.out, t.pid)[0] == "idle", (argv, r)
    r = run(pid, "eval", "6*7")
    assert r.rc == 0 and r.out.strip() == "42", r
    # The endpoint form for TCP and for a socket name.
    r = run("@probing-%s" % pid, "eval", "1+1")
    assert r.rc == 0 and r.out.strip() == "2", r
    # The original's command names.
    r = run(pid, "dbg")
    assert r.rc == 0 and r.out == run(pid, "debug").out, r
    r = run(pid, "d")
    assert r.rc == 0 and r.out == run(pid, "debug").out, r
    for name in ("p", "performance"):
        r = run(pid, name)
        assert r.rc == 0 and "state\tnever started" in r.out, (name, r)
    # Two different targets are a usage error, never a silent choice.
    r = run("-t", pid, "1", "backtrace")
    assert r.rc == 2 and "two targets" in r.err, r
    r = run("--pid", "host:1", "backtrace")
    assert r.rc == 2 and "--pid takes a process id" in r.err, r
    # The environment's target gives way to the one on the command line.
    r = run(pid, "eval", "3", env={"PROBING_TARGET": "4194999"})
    assert r.rc == 0 and r.out.strip() == "3", r


def test_help_and_unknown_words_say_what_to_use():
    r = run("help", "performance")
    assert r.rc == 0 and r.out.startswith("usage: probing [-t TARGET] perf"), r
    assert "(also named: p performance)" in r.out, r
    r = run("help", "dbg")
    assert r.rc == 0 and "usage: probing [-t TARGET] debug" in r.out, r
    r = run("--help")
    assert "probing TARGET COMMAND" in r.out and "-p, --pid PID" in r.out, r
    r = run("pause")
    assert r.rc == 2 and "'probing -t TARGET debug --pause'" in r.err, r
    r = run("catch")
    assert r.rc == 2 and "crash.enabled=on" in r.err, r
    r = run("backtrac")
    assert r.rc == 2 and "did you mean 'backtrace'?" in r.err, r
    r = run("frobnicate")
    assert r.rc == 2 and "probing --help" in r.err and "did you mean" not in r.err, r
    # An endpoint first, then a word that is no command.
    r = run("4194999", "frobnicate")
    assert r.rc == 2 and "unknown command 'frobnicate'" in r.err, r


def test_cluster_attach_lists_the_nodes(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    a = run(str(t.pid), "cluster", "attach", "-f", "json")
    b = run(str(t.pid), "cluster", "nodes", "-f", "json")
    assert a.rc == b.rc, (a, b)
    assert a.out == b.out or json.loads(a.out)[0].keys() == json.loads(b.out)[0].keys(), (a, b)


def test_probe_env_is_probing(spawn, python):
    t = spawn(python, IDLE + "", agent=None, env={"PROBE": "1"})
    t.wait_line("READY")
    t.wait_agent()
    r = run(str(t.pid), "eval", "import os; repr(os.environ.get('PROBE'))")
    # PROBE=1 is this process only, as PROBING=1 is.
    assert r.rc == 0 and r.out.strip() == "'None'", r


def test_probing_port_alone_starts_a_listening_agent(spawn, python):
    """The original's `PROBING_PORT=8080 python x.py`: an agent listening
    on 127.0.0.1:8080, this process only; nothing listening is answered
    with what makes an agent listen."""
    port = free_port()
    r = run("127.0.0.1:%d" % port, "eval", "1")
    assert r.rc == 6 and "nothing listens at 127.0.0.1:%d" % port in r.err \
        and "PROBING_PORT=N" in r.err, r
    t = spawn(python, IDLE, agent=None, env={"PROBING_PORT": str(port)})
    t.wait_line("READY")
    t.wait_agent()
    r = run("127.0.0.1:%d" % port, "eval", "6*7")
    assert r.rc == 0 and r.out.strip() == "42", r
    # A Python child of it runs without an agent (nor takes the port).
    r = run(str(t.pid), "eval", "import os, subprocess, sys; "
            "subprocess.run([sys.executable, '-c', 'import sys; "
            "print(\"probing._probing\" in sys.modules)'], "
            "capture_output=True, text=True).stdout.strip()")
    assert r.rc == 0 and r.out.strip() == "'False'", r


def test_inject_with_the_originals_options(spawn, python, tmp_path):
    t = spawn(python, IDLE, agent=None)
    t.wait_line("READY")
    script = tmp_path / "hello.py"
    script.write_text("import sys\nhello_from_script = 40 + 2\n"
                      "print('in', sys.argv[:0], hello_from_script)\n")
    r = run(str(t.pid), "inject", "-P", "-b", "-e", str(script))
    assert r.rc == 0, r
    assert "agent: @probing-%d" % t.pid in r.out, r
    assert "sampler: started" in r.out, r
    # The script ran in the process, its output shown as eval shows it.
    assert "in [] 42" in r.out, r
    r = run(str(t.pid), "eval", "hello_from_script")
    assert r.rc == 0 and r.out.strip() == "42", r
    r = run(str(t.pid), "perf", "-f", "json")
    assert r.rc == 0 and json.loads(r.out)["running"] is True, r
    r = run(str(t.pid), "inject", "-e", str(tmp_path / "missing.py"))
    assert r.rc == 2 and "cannot read" in r.err, r


def settings_of(pid):
    r = run(str(pid), "config", "-f", "json")
    assert r.rc == 0, r
    return {s["name"]: s["value"] for s in json.loads(r.out)}


def test_the_originals_settings_map_to_ours(spawn, python):
    t = spawn(python, IDLE, env={"PROBING_SAMPLE_RATE": "0.1",
                                 "PROBING_MAX_MEMORY": "256MiB"})
    t.wait_line("READY")
    t.wait_agent()
    s = settings_of(t.pid)
    assert s["torch.step_rate"] == "10", s
    assert s["profile.retention_bytes"] == str(256 << 20) and s["torch.max_mb"] == "256", s
    pid = str(t.pid)
    r = run(pid, "config", "probing.sample_rate=0.05", "probing.max_memory=1GB")
    assert r.rc == 0, r
    # What they set is shown, as setting ours shows ours.
    assert "torch.step_rate\t20" in r.out and "torch.max_mb\t954" in r.out \
        and "retention.max_mb\t954" in r.out, r
    s = settings_of(t.pid)
    assert s["torch.step_rate"] == "20", s
    assert s["profile.retention_bytes"] == "1000000000" and s["torch.max_mb"] == "954", s
    assert s["retention.max_mb"] == "954", s
    # Bad values say what the name means here; all or nothing.
    r = run(pid, "config", "probing.sample_rate=0.5", "probing.max_memory=lots")
    assert r.rc == 1 and "is not a size" in r.err, r
    assert settings_of(t.pid)["torch.step_rate"] == "20"
    r = run(pid, "config", "probing.sample_rate=5")
    assert r.rc == 1 and "torch.step_rate" in r.err, r
    # A near miss gets the name it meant.
    r = run(pid, "config", "query.max_row=5")
    assert r.rc == 1 and "did you mean 'query.max_rows'?" in r.err, r
    r = run(pid, "config", "bogus=5")
    assert r.rc == 1 and "unknown setting 'bogus'" in r.err and "did you mean" not in r.err, r
    assert t.output() == "READY\n", t.output()


def test_unknown_probing_variables_are_said_once(spawn, python):
    t = spawn(python, IDLE, env={"PROBING_RETENTION_DAYS": "3",
                                 "PROBING_QUERY_MAX_ROW": "5",
                                 "PROBING_FROBNICATE": "1"})
    t.wait_line("READY")
    t.wait_agent()
    out = t.output()
    lines = [l for l in out.splitlines() if l.startswith("[probing")]
    assert len(lines) == 2, out
    assert "PROBING_QUERY_MAX_ROW is not a Probing setting (ignored); " \
        "did you mean PROBING_QUERY_MAX_ROWS?" in out, out
    assert "PROBING_FROBNICATE is not a Probing setting" in out and \
        "did you mean" not in [l for l in lines if "FROBNICATE" in l][0], out
    # The original's PROBING_RETENTION_DAYS is a setting's own name.
    assert "RETENTION_DAYS" not in out, out
    assert settings_of(t.pid)["retention.days"] == "3"


def test_sql_says_it_is_sqlite_and_hints_the_fix(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    pid = str(t.pid)

    def query(sql):
        return run(pid, "query", "-f", "json", sql)

    # The original's README, verbatim.
    r = query("SELECT * FROM memory_usage WHERE timestamp > now() - interval '5 min'")
    assert r.rc == 7 and "(SQLite's SQL)" in r.err, r
    assert "hint: SQLite has no INTERVAL" in r.err and "ago('5 min')" in r.err \
        and "now() - 300" in r.err, r
    r = query("SELECT * FROM memory_usage")
    assert r.rc == 7 and "process.memory" in r.err and "probing.tables" in r.err, r
    r = query("SELECT * FROM proces.memroy")
    assert r.rc == 7 and "did you mean process.memory?" in r.err, r
    r = query("SELECT hour(ts) FROM process.memory")
    assert r.rc == 7 and "strftime('%H', ts, 'unixepoch')" in r.err, r
    r = query("SELECT timestamp FROM process.memory")
    assert r.rc == 7 and "time column is ts" in r.err, r
    r = query("SELEC 1")
    assert r.rc == 7 and "syntax error (SQLite's SQL)" in r.err and "hint" not in r.err, r
    # Other dialects' words, and other tools' column names.
    r = query("SHOW TABLES")
    assert r.rc == 7 and "SQLite has no SHOW" in r.err and \
        "FROM probing.tables" in r.err, r
    r = query("SELECT * FROM information_schema.df_settings")
    assert r.rc == 7 and "here: probing.config" in r.err, r
    r = query("SELECT latency_ms FROM python.comm_metrics")
    assert r.rc == 7 and "the column is latency (of python.comm_metrics), " \
        "in seconds: latency * 1000 for milliseconds" in r.err, r
    r = query("SELECT durration FROM python.torch_trace")
    assert r.rc == 7 and "did you mean duration" in r.err, r
    # now() and ago(): seconds since the epoch, windows that read.
    r = query("SELECT abs(now() - strftime('%s', 'now')) < 2 AS a, "
              "round(now() - ago('5 min')) AS b, round(now() - ago(90)) AS c, "
              "round(now() - ago('1500ms'), 1) AS d")
    assert r.rc == 0 and json.loads(r.out) == [{"a": 1, "b": 300, "c": 90, "d": 1.5}], r
    r = query("SELECT ago('soon')")
    assert r.rc == 7 and "ago(D): D is a duration" in r.err, r
    wait_for(lambda: json.loads(query(
        "SELECT count(*) AS n FROM process.memory WHERE ts > ago('1m')").out)[0]["n"] > 0,
        30, "a memory row")
    # An empty table whose recorder is off says why, on stderr.
    r = query("SELECT * FROM python.torch_trace")
    assert r.rc == 0 and json.loads(r.out) == [], r
    assert "note: python.torch_trace is empty: torch tracing is off" in r.err, r
    r = query("SELECT * FROM profile.samples")
    assert r.rc == 0 and "the sampler never ran" in r.err, r
    r = query("SELECT * FROM process.hangs")
    assert r.rc == 0 and "hang.timeout=300s" in r.err, r
    r = query("SELECT * FROM python.backtrace WHERE 0")
    assert r.rc == 0 and r.err == "", r


def test_one_vocabulary_durations_flags_format(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    pid = str(t.pid)
    # Durations take units everywhere; a bare number that meant
    # milliseconds before is refused with both readings.
    r = run(pid, "perf", "--start", "--duration", "5000")
    assert r.rc == 2 and "5000ms or 5000s" in r.err, r
    r = run(pid, "perf", "--native", "--duration", "1.5s", "-f", "json")
    assert r.rc == 0, r
    st = json.loads(r.out)
    assert st["running"] is True and st["native"] is True and st["durationMs"] == 1500, st
    assert run(pid, "perf", "--stop").rc == 0
    r = run(pid, "perf", "-d", "2m", "--start", "-f", "json")
    assert r.rc == 0 and json.loads(r.out)["durationMs"] == 120000, r
    assert run(pid, "perf", "--stop").rc == 0
    r = run(pid, "perf", "--start", "--duration", "soon")
    assert r.rc == 2 and "a duration like 10s, 500ms" in r.err, r
    r = run(pid, "--timeout", "2s", "eval", "--timeout", "1.5s", "1+1")
    assert r.rc == 0 and r.out.strip() == "2", r
    r = run(pid, "eval", "--timeout", "banana", "1")
    assert r.rc == 2 and "a duration like" in r.err, r
    r = run(pid, "memory", "--budget", "200ms", "-f", "json")
    assert r.rc == 0, r
    r = run("--timeout", "0.5ms", pid, "eval", "1")
    assert r.rc == 2 and "--timeout must be a duration" in r.err, r
    # The global -f: honoured by commands that print tables, refused by
    # the others.
    r = run("-f", "json", pid, "config")
    assert r.rc == 0 and isinstance(json.loads(r.out), list), r
    for cmd in (["eval", "1"], ["inject"], ["repl"], ["dap"]):
        r = run("-f", "json", pid, *cmd)
        assert r.rc == 2 and "prints no table: -f does not apply" in r.err, (cmd, r)
    # One meaning per short option: -d is a duration, -p the pid.
    r = run(pid, "debug", "-d")
    assert r.rc == 2, r
    r = run(pid, "debug", "-p")
    assert r.rc == 2, r
    assert t.alive()


def test_the_originals_short_options(spawn, python):
    """`inject -P -c -l ADDR` and `-p PID d -p -a ADDR`, as the original's
    users type them: -l and -p mean one thing each here (the locals, the
    pid), so each is answered with the exact command, which works."""
    t = spawn(python, IDLE, agent=None)
    t.wait_line("READY")
    pid = str(t.pid)
    port = free_port()
    r = run(pid, "inject", "-P", "-c", "-l", "127.0.0.1:%d" % port)
    here = "probing -t %s inject -P -c --listen 127.0.0.1:%d" % (pid, port)
    assert r.rc == 2 and r.err.rstrip().endswith(here), r
    r = run(*here.split()[1:])
    assert r.rc == 0, r
    assert "agent: @probing-%s,127.0.0.1:%d" % (pid, port) in r.out, r
    assert "sampler: started" in r.out, r
    port = free_port()
    r = run("-p", pid, "d", "-p", "-a", "127.0.0.1:%d" % port, "-w", "30s")
    here = "probing -t %s debug --pause -a 127.0.0.1:%d -w 30s" % (pid, port)
    assert r.rc == 2 and r.err.rstrip().endswith(here), r
    r = run(*here.split()[1:])
    assert r.rc == 0 and r.out.startswith("Paused:") and \
        '"port": %d' % port in r.out, r
    r = run("-p", pid, "d", "--resume")
    assert r.rc == 0 and "resumed" in r.out, r
    # Bundled, attached, and words a shell must see quoted.
    r = run(pid, "debug", "-pr")
    assert r.rc == 2 and r.err.rstrip().endswith(
        "probing -t %s debug --pause --resume" % pid), r
    r = run(pid, "inject", "-l127.0.0.1:9", "-e", "my file.py")
    assert r.rc == 2 and r.err.rstrip().endswith(
        "probing -t %s inject --listen 127.0.0.1:9 -e 'my file.py'" % pid), r
    assert t.alive()
