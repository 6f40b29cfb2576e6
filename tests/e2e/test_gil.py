"""A target holding the GIL in a long C call: the agent still answers."""
import time

from conftest import probing

HOG = """\
import time
def crunch():
    print("HOGGING", flush=True)
    return sum(range(3 * 10**9))     # line 4: C loop, GIL held throughout
time.sleep(0.5)
crunch()
"""


def test_backtrace_without_gil_and_eval_names_holder(spawn, python):
    t = spawn(python, HOG)
    t.wait_agent()
    t.wait_line("HOGGING")
    time.sleep(0.3)
    began = time.time()
    r = probing("backtrace", "-f", "json", target=t.pid)
    assert r.rc == 0, r
    body = r.json()
    assert body["gil"]["acquired"] is False
    main = [th for th in body["threads"] if th["nativeId"] == t.pid][0]
    assert main["name"] == "MainThread" and main["isMain"]
    assert [(f["func"], f["line"]) for f in main["frames"][:2]] == [("crunch", 4), ("<module>", 6)]
    assert body["gil"]["holderNativeId"] == t.pid
    assert time.time() - began < 10
    r = probing("eval", "1", target=t.pid)
    assert r.rc == 1
    assert "GIL" in r.err and str(t.pid) in r.err
    r = probing("query", "-f", "json",
                "SELECT func, lineno FROM python.backtrace WHERE depth = 0", target=t.pid)
    assert r.rc == 0, r
    assert {"func": "crunch", "lineno": 4} in r.json()
    assert t.alive()
