"""Finding (issue 27, item 15): a script whose name is not UTF-8
(caf\\xe9.py, latin-1) turned the GIL-free stack reader off on every
inject, 3.9 to 3.13: its start-up self check compared the name as
decoded text, which such a name is not, and said the layout was "not the
one the agent was built for" — the sampler, the hang watchdog and crash
stacks went with it.  Names are compared as bytes now."""
import os
import pytest

from conftest import probing, wait_for

PROGRAM = b"""
import time

def spin():
    while True:
        time.sleep(0.01)

print("ready", flush=True)
spin()
"""


@pytest.mark.parametrize("way", ["env", "inject"])
def test_a_latin1_script_name_keeps_the_gil_free_reader(python, spawn, tmp_path, way):
    # The program under a name that is latin-1 bytes on disk, run as
    # __main__ the way `python caf\xe9.py` runs it.
    script = os.path.join(os.fsencode(str(tmp_path)), b"caf\xe9.py")
    with open(script, "wb") as f:
        f.write(PROGRAM)
    t = spawn(python, "import os, runpy\n"
              "runpy.run_path(os.fsdecode(%r), run_name='__main__')\n" % script,
              agent="env" if way == "env" else None)
    t.wait_line("ready")
    if way == "inject":
        r = probing("inject", target=t.pid, timeout=120)
        assert r.rc == 0, r
    t.wait_agent()

    def reader():
        r = probing("config", "-f", "json", target=t.pid)
        assert r.rc == 0, r
        return dict((c["name"], c["value"]) for c in r.json()).get("agent.stack_reader", "")
    wait_for(lambda: reader() != "", 30, "the reader's self check")
    assert reader() == "ok", reader()
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and "caf" in r.out and "spin" in r.out, r
    assert t.alive()
