"""Finding (2026-11-27, CI's sid stage): a short program that imports
probing — a client of another agent, a script that ends at once — died
of SIGSEGV at exit on CPython 3.14, after printing all it had to print.
Importing probing starts the agent, whose thread registered the exit hook
only once it had the GIL; a program holding the GIL until it ended never
let it, so the agent's threads were still running when the interpreter
was deleted.  The hook is registered at the import now, and the exit
waits for an agent still starting before it stops it.

Here: programs that import probing and hold the GIL until they end (a
loop in Python, no sleep, no I/O), many times: each ends with status 0
and says nothing on stderr."""
import os
import subprocess

from conftest import USERBASE

PROGRAM = "import probing\nx = 0\nfor i in range(%d):\n    x += i\n"


def test_a_program_that_imports_probing_and_ends_at_once(python):
    env = dict(os.environ, PYTHONUSERBASE=USERBASE)
    env.pop("PROBING", None)
    if os.environ.get("PROBING_TARGET_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["PROBING_TARGET_PRELOAD"]
    # From no loop to one of some tens of milliseconds: the exit lands
    # at every point of the agent's start.
    for n in [0, 1000, 30000, 300000, 1000000] * 6:
        r = subprocess.run([python, "-c", PROGRAM % n], capture_output=True,
                           text=True, env=env, timeout=60)
        assert r.returncode == 0 and not r.stderr, (n, r.returncode, r.stderr)
