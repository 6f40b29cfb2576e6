"""Finding (issue 27, item 17): a local whose __repr__ raises
KeyboardInterrupt of its own made `backtrace --locals` mark every later
local "<interrupted>", as if the agent's own deadline had passed.  Only
the agent's deadline stops the reprs; a repr's own exception is that
local's "<repr failed: ...>"."""
from conftest import probing

PROGRAM = """
import time

class Rude:
    def __repr__(self):
        raise KeyboardInterrupt("mine")

def hold():
    first = 1
    rude = Rude()
    after = [2, 3]
    last = "end"
    print("ready", flush=True)
    while True:
        time.sleep(0.01)

hold()
"""


def test_a_repr_raising_keyboardinterrupt_fails_alone(python, spawn):
    t = spawn(python, PROGRAM)
    t.wait_agent()
    t.wait_line("ready")
    r = probing("backtrace", "--locals", target=t.pid)
    assert r.rc == 0, r
    assert "<interrupted>" not in r.out, r.out
    assert "rude = <repr failed: KeyboardInterrupt" in r.out, r.out
    assert "after = [2, 3]" in r.out and "last = 'end'" in r.out, r.out
    assert t.alive()
