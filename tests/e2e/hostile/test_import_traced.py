"""A debugger stepping over an import stopped in the agent's code.

While the agent waits for torch to be imported it keeps a finder first on
sys.meta_path (agent/python/pyafter.h).  It was Python: every import the
program made ran a frame of the agent's, which the program's tracers saw.
CPython's own test_bdb (test_skip: Bdb(skip=['importlib*', ...]) steps
over an import) failed with the agent on 3.9, its debugger stopped in
module probing_after.  Now the finder is C: no frame of it is traced.

The program traces its imports as a debugger does (sys.settrace) with the
agent's finder in place, and bdb steps over an import skipping importlib's
modules, as that test does.  And 3.14's test_bdb filters sys.meta_path by
each finder's __module__, which an instance of a C type lacks unless its
type gives it one (an AttributeError with the agent, seen in CI).
"""
from conftest import probing

PROGRAM = """\
import bdb, os, sys, tempfile, time

for _ in range(1200):
    if any(type(f).__name__ == "Watch" for f in sys.meta_path):
        break
    time.sleep(0.05)
else:
    sys.exit("no finder of the agent's on sys.meta_path")

d = tempfile.mkdtemp()
for name in ("fresh_one", "fresh_two"):
    with open(os.path.join(d, name + ".py"), "w") as f:
        f.write("def main():\\n    lno = 3\\n")
sys.path.insert(0, d)

seen = set()
def tracer(frame, event, arg):
    seen.add(frame.f_globals.get("__name__"))
    return tracer
sys.settrace(tracer)
import fresh_one
sys.settrace(None)
print("MODULES", sorted(str(m) for m in seen), flush=True)
# What CPython 3.14's test_bdb does to sys.meta_path: every finder has a
# __module__, as a Python class's instances have.
kept = [f for f in sys.meta_path
        if f.__module__.startswith(("_frozen_importlib", "probing"))]
print("FINDERS", [(type(f).__name__, f.__module__) for f in kept
                  if type(f).__name__ == "Watch"], flush=True)

stops = []
class Stepper(bdb.Bdb):
    def user_line(self, frame):
        stops.append((frame.f_globals.get("__name__"), frame.f_lineno))
        if len(stops) < 2:
            self.set_step()
        else:
            self.set_quit()
    def user_call(self, frame, args):
        stops.append((frame.f_globals.get("__name__"), "call"))
        self.set_quit()

def stepped():
    import fresh_two
    fresh_two.main()

Stepper(skip=("importlib*", "zipimport", "encodings.*", "_distutils_hack",
              "fresh_two")).runcall(stepped)
print("STOPS", stops, flush=True)
print("READY", flush=True)
time.sleep(600)
"""


def test_a_traced_import_runs_no_code_of_the_agents(spawn, python):
    t = spawn(python, PROGRAM)
    t.wait_line("READY", timeout=90)
    out = t.output()
    modules = [x for x in out.splitlines() if x.startswith("MODULES")][0]
    # The importer's frames and the module's own: nothing of ours.
    assert "probing" not in modules, modules
    assert "fresh_one" in modules, modules
    finders = [x for x in out.splitlines() if x.startswith("FINDERS")][0]
    assert finders == "FINDERS [('Watch', 'probing')]", finders
    stops = [x for x in out.splitlines() if x.startswith("STOPS")][0]
    # bdb stopped at the import's line and stepped over it (importlib
    # and the module skipped) without a stop in the agent's code (a
    # finder of the Python's own, such as setuptools' .pth one, may
    # stop it: not ours).
    assert stops.startswith("STOPS [('__main__', ") and \
        "probing" not in stops, stops
    # The finder is the agent's, still waiting (no torch here).
    r = probing("eval", "import sys; [type(f).__name__ for f in sys.meta_path]",
                target=t.pid)
    assert r.rc == 0 and "'Watch'" in r.out, r
