"""The agent's watch for `import torch` against programs that import in
unusual ways (a review of the watch's C, agent/python/pyafter.c).

While the agent waits for torch it keeps a finder first on sys.meta_path,
and its recorder looks into sys.modules now and then.  Each program here
imports a package named torch of its own (a few lines in a temporary
directory: no real torch needed) and broke something before the fix:

- lazy: importlib.util.LazyLoader's torch was imported by the agent's
  look, on the agent's thread (the look read the lazy module's
  __spec__), where its import could be interrupted, and the program's
  torch then had no attributes; and on 3.13+, where a lazy module is
  still lazy while its code runs, the recorder's install as that code
  ended found no torch.Tensor (torch 2.x itself cannot be imported
  lazily on 3.13+: its __init__'s delattr recurses in _LazyModule);
- meta_path: a sys.meta_path whose iteration replaces sys.meta_path
  freed the list the agent still read as it took its finder off: the
  program died (SIGSEGV);
- unraisable: a finder whose find_spec attribute raised reached the
  program's sys.unraisablehook on 3.13+ (PyObject_HasAttrString);
- keyword: the covered exec_module refused module= (a loader's own
  takes it).
"""
import pytest

from conftest import probing

COMMON = """\
import importlib, importlib.util, os, sys, tempfile, threading, time

def watched():
    for _ in range(1200):
        if any(type(f).__name__ == "Watch" for f in sys.meta_path):
            return
        time.sleep(0.05)
    sys.exit("no finder of the agent's on sys.meta_path")

d = tempfile.mkdtemp()
os.mkdir(os.path.join(d, "torch"))
with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
    f.write("import threading\\n"
            "print('TORCH RUNS in', threading.current_thread().name,"
            " flush=True)\\n"
            "Tensor = 'a tensor'\\n")
sys.path.insert(0, d)
watched()

def lazy_torch():
    # importlib.util.LazyLoader's recipe: torch's code runs at its first
    # use.
    spec = importlib.util.find_spec("torch")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    torch = importlib.util.module_from_spec(spec)
    sys.modules["torch"] = torch
    spec.loader.exec_module(torch)
    return torch
"""

# A torch.distributed of the fake torch's, enough for the recorder to wrap
# its all_reduce (as it does torch's own).
DIST = """\
with open(os.path.join(d, "torch", "__init__.py"), "a") as f:
    f.write("class Tensor:\\n    pass\\n"
            "from . import distributed\\n")
os.mkdir(os.path.join(d, "torch", "distributed"))
with open(os.path.join(d, "torch", "distributed", "__init__.py"), "w") as f:
    f.write("from . import distributed_c10d\\n"
            "from .distributed_c10d import all_reduce\\n")
with open(os.path.join(d, "torch", "distributed", "distributed_c10d.py"),
          "w") as f:
    f.write("def all_reduce(tensor, op=None, group=None, async_op=False):\\n"
            "    return None\\n")
"""

LAZY_DIST = COMMON + DIST + """\
torch = lazy_torch()
time.sleep(1)
torch.Tensor                 # its first use: torch's code runs now
# (Not an import of torch.distributed first: a lazy parent run by the
# import of its submodule imports that submodule twice, CPython's own.)
import torch.distributed as dist
print("WRAPPED", dist.all_reduce is not dist.distributed_c10d.all_reduce,
      flush=True)
print("READY", flush=True)
time.sleep(600)
"""

LAZY = COMMON + """\
torch = lazy_torch()
# The agent's recorder looks every 100 ms while it waits: 3 s of looks.
time.sleep(3)
print("USED", torch.Tensor, flush=True)
print("READY", flush=True)
time.sleep(600)
"""

META_PATH = COMMON + """\
class Path:
    # An iterable sys.meta_path whose iteration puts a new one in place
    # (so the old one's last reference goes).
    def __init__(self, finders):
        self.finders = finders
    def __iter__(self):
        sys.meta_path = Path(list(self.finders))
        return iter(self.finders)
    def __len__(self):
        return len(self.finders)

sys.meta_path = Path(list(sys.meta_path))
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""

UNRAISABLE = COMMON + """\
raised = []
sys.unraisablehook = lambda u: raised.append(repr(u.exc_value))

class Odd:
    # A finder whose find_spec cannot be read once (then it finds
    # nothing, as a finder may).
    tries = 0
    def __getattribute__(self, name):
        if name == "find_spec" and Odd.tries == 0:
            Odd.tries += 1
            raise RuntimeError("not now")
        return object.__getattribute__(self, name)
    def find_spec(self, name, path=None, target=None):
        return None
    def find_module(self, name, path=None):
        return None

# Right after the agent's finder: it reads Odd's find_spec first.
names = [type(f).__name__ for f in sys.meta_path]
sys.meta_path.insert(names.index("Watch") + 1, Odd())
import torch
print("IMPORTED", torch.Tensor, flush=True)
print("UNRAISABLE", raised, flush=True)
print("READY", flush=True)
time.sleep(600)
"""

KEYWORD = COMMON + """\
spec = importlib.util.find_spec("torch")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module=m)
print("KEYWORD", type(spec.loader.__dict__.get("exec_module")).__name__,
      m.Tensor, flush=True)
print("READY", flush=True)
time.sleep(600)
"""


def lines(t, prefix):
    return [x for x in t.output().splitlines() if x.startswith(prefix)]


def test_a_lazy_torch_is_imported_by_the_program_not_the_agent(spawn,
                                                               python):
    t = spawn(python, LAZY)
    t.wait_line("READY", timeout=90)
    assert lines(t, "TORCH RUNS") == ["TORCH RUNS in MainThread"], t.output()
    assert lines(t, "USED") == ["USED a tensor"], t.output()


def test_a_lazy_torch_is_recorded_from_its_first_use(spawn, python):
    # The recorder installs as the lazy torch's code ends (on 3.13+ it is
    # still a lazy module then): on the program's next line its
    # all_reduce is the recorder's.
    t = spawn(python, LAZY_DIST)
    t.wait_line("READY", timeout=90)
    assert lines(t, "TORCH RUNS") == ["TORCH RUNS in MainThread"], t.output()
    assert lines(t, "WRAPPED") == ["WRAPPED True"], t.output()


def test_a_meta_path_replaced_as_it_is_read_survives_the_unwatch(spawn,
                                                                 python):
    t = spawn(python, META_PATH)
    t.wait_line("READY", timeout=90)
    # Recording off: the agent takes its finder off sys.meta_path.
    r = probing("config", "comm.record=off", target=t.pid)
    assert r.rc == 0, r
    r = probing("eval", "[type(f).__name__ for f in "
                "getattr(sys.meta_path, 'finders', sys.meta_path)]",
                target=t.pid)
    assert r.rc == 0 and "Watch" not in r.out, (r, t.output())
    assert t.proc.poll() is None, t.exit_text()


def test_a_finder_that_raises_reaches_no_unraisable_hook(spawn, python):
    t = spawn(python, UNRAISABLE)
    t.wait_line("READY", timeout=90)
    assert lines(t, "IMPORTED") == ["IMPORTED a tensor"], t.output()
    assert lines(t, "UNRAISABLE") == ["UNRAISABLE []"], t.output()


@pytest.mark.parametrize("prog", [KEYWORD], ids=["module="])
def test_the_covered_exec_module_takes_a_keyword(spawn, python, prog):
    t = spawn(python, prog)
    t.wait_line("READY", timeout=90)
    # Covered (the agent's), run with module=, then its own again.
    assert lines(t, "KEYWORD") == ["KEYWORD NoneType a tensor"], t.output()
