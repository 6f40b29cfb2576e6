"""probing config: read and change the agent's settings."""
import time

from conftest import probing, wait_for

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def test_list_set_and_reject(spawn, python):
    t = spawn(python, IDLE, env={"PROBING_QUERY_MAX_ROWS": "77"})
    t.wait_line("READY")
    t.wait_agent()
    r = probing("config", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    settings = {s["name"]: s["value"] for s in r.json()}
    assert settings["query.max_rows"] == "77"          # from the environment
    assert settings["agent.pid"] == str(t.pid)
    r = probing("config", "query.max_rows=5", "python.repr_max=64", target=t.pid)
    assert r.rc == 0, r
    assert "query.max_rows" in r.out and "5" in r.out
    r = probing("query", "-f", "json",
                "SELECT value FROM probing.config WHERE name = 'python.repr_max'", target=t.pid)
    assert r.json() == [{"value": "64"}]
    # all or nothing: a bad value changes nothing
    r = probing("config", "query.max_rows=9", "query.timeout_ms=banana", target=t.pid)
    assert r.rc == 1, r
    assert "banana" in r.err
    r = probing("query", "-f", "json",
                "SELECT value FROM probing.config WHERE name = 'query.max_rows'", target=t.pid)
    assert r.json() == [{"value": "5"}]
    r = probing("config", "no.such=1", target=t.pid)
    assert r.rc == 1 and "unknown setting" in r.err
    r = probing("config", "agent.pid=1", target=t.pid)
    assert r.rc == 1 and "read-only" in r.err


def setting(pid, name):
    r = probing("config", "-f", "json", name, target=pid)
    assert r.rc == 0, r
    return {s["name"]: s["value"] for s in r.json()}[name]


def test_for_a_while(spawn, python):
    """--for D: the agent puts the values from before back after D,
    unless they were changed meanwhile (then the new ones stay)."""
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    before = setting(t.pid, "query.max_rows")
    r = probing("config", "--for", "1s", "query.max_rows=123",
                "python.repr_max=99", target=t.pid)
    assert r.rc == 0, r
    assert setting(t.pid, "query.max_rows") == "123"
    # Changed again for good meanwhile: that one stays.
    assert probing("config", "python.repr_max=77", target=t.pid).rc == 0
    wait_for(lambda: setting(t.pid, "query.max_rows") == before, 10,
             "query.max_rows back to %s" % before)
    time.sleep(0.5)
    assert setting(t.pid, "python.repr_max") == "77"
    r = probing("config", "--for", "1s", target=t.pid)
    assert r.rc == 2 and "give the KEY=VALUE settings" in r.err, r
    r = probing("config", "--for", "1s", "server.listen=127.0.0.1:9",
                target=t.pid)
    assert r.rc == 1 and "never for a while" in r.err, r
