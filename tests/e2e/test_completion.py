"""Bash completion (cli/probing.bash) in a real bash, against the real CLI
and a real agent: commands with aliases, each command's options from its
help, targets from `probing list`, formats, setting names from the
agent."""
import os
import subprocess

from conftest import BUILD, ROOT

SCRIPT = os.path.join(ROOT, "cli", "probing.bash")


def complete(*words):
    """COMPREPLY for the command line words + the word being completed
    (the last, possibly "")."""
    env = dict(os.environ, PATH=os.path.join(BUILD, "cli") + ":" + os.environ["PATH"])
    line = " ".join("'%s'" % w for w in words)
    r = subprocess.run(["bash", "-c", 'source "$1"; COMP_WORDS=(%s); COMP_CWORD=%d; '
                        '_probing; printf "%%s\\n" "${COMPREPLY[@]}"' % (line, len(words) - 1),
                        "sh", SCRIPT], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r
    return sorted(w for w in r.stdout.split("\n") if w)


IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def test_commands_options_and_formats():
    assert complete("probing", "ba") == ["backtrace"]
    assert complete("probing", "per") == ["perf", "performance"]
    assert "dbg" in complete("probing", "d") and "debug" in complete("probing", "d")
    assert complete("probing", "help", "fl") == ["flamegraph"]
    assert complete("probing", "-f", "") == ["csv", "json", "table"]
    assert complete("probing", "--p") == ["--pid"]
    opts = complete("probing", "123", "perf", "--")
    assert {"--cc", "--native", "--duration", "--hz", "--stop", "--torch"} <= set(opts), opts
    assert "--recorded" not in opts, opts       # in an example, not an option
    assert complete("probing", "debug", "--pa") == ["--pause"]
    assert complete("probing", "inject", "--pp") == ["--pprof"]
    assert complete("probing", "cluster", "at") == ["attach"]
    assert complete("probing", "flamegraph", "--as", "s") == ["speedscope", "svg"]


def test_targets_and_settings_from_the_agent(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    assert str(t.pid) in complete("probing", "-t", "")
    assert str(t.pid) in complete("probing", "--pid", str(t.pid)[:-1])
    keys = complete("probing", "-t", str(t.pid), "config", "query.")
    assert keys == ["query.max_rows=", "query.timeout_ms="], keys
    keys = complete("probing", str(t.pid), "inject", "-D", "hang.t")
    assert keys == ["hang.timeout="], keys
