"""What the torch of SYSTEM_PYTHON needs and shows, asked of torch itself
(once a process): whether torchrun jobs need USE_LIBUV=0 and a
sitecustomize (torch_env), and the innermost Python function of a thread
in loss.backward() (backward_top).  No side effects on import: the
benchmarks use it too."""
import os
import subprocess
import textwrap

SYSTEM_PYTHON = "/usr/bin/python3"

_TORCH_FACTS = {}


def _torch_fact(name, code):
    """What SYSTEM_PYTHON's torch prints for code (once a session)."""
    if name not in _TORCH_FACTS:
        cp = subprocess.run([SYSTEM_PYTHON, "-c", code], capture_output=True,
                            text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr[-2000:]
        _TORCH_FACTS[name] = cp.stdout.strip()
    return _TORCH_FACTS[name]


def lacks_libuv():
    """Is SYSTEM_PYTHON's torch built without libuv while its TCPStore
    asks for it by default?  Debian's torch 2.6: "use_libuv was requested
    but PyTorch was build without libuv support".  torch 1.13 has no
    libuv store at all and never asks."""
    said = _torch_fact("libuv", textwrap.dedent("""\
        import datetime, torch.distributed as d
        try:
            d.TCPStore("127.0.0.1", 0, 1, True,
                       timeout=datetime.timedelta(seconds=30))
            print("ok")
        except RuntimeError as e:
            print("nolibuv" if "libuv" in str(e) else "error: %s" % e)
        """))
    assert said in ("ok", "nolibuv"), said
    return said == "nolibuv"


# On a torch that lacks libuv, USE_LIBUV=0 is not enough for torchrun:
# init_process_group's env:// store follows it only where a rank hosts
# the store, and torchrun 2.6 makes every TCPStore of its own rendezvous
# (static_tcp_rendezvous, c10d_rendezvous_backend) and the ranks' client
# of it (rendezvous._create_c10d_store with the agent's store), and the
# c10d rendezvous its store server (DynamicRendezvousHandler.
# _create_tcp_store_server), with torch's default, use_libuv=True: the job
# fails before a rank starts.
# This sitecustomize, on the job's PYTHONPATH only, makes those modules'
# TCPStore follow USE_LIBUV; torch's files are untouched, /usr/bin/torchrun
# and the ranks run as they do for a user.  The sitecustomize it hides
# (Debian's) runs after it.
NOLIBUV_SITE = """\
import os, sys
if os.environ.get("USE_LIBUV") == "0":
    import importlib
    try:
        import torch.distributed as dist
        # By name: torch.distributed.rendezvous is also a function.
        mods = [importlib.import_module("torch.distributed." + m) for m in (
            "rendezvous", "elastic.rendezvous.static_tcp_rendezvous",
            "elastic.rendezvous.c10d_rendezvous_backend")]
    except ImportError:
        mods = []
    def TCPStore(*args, **kwargs):
        kwargs.setdefault("use_libuv", False)
        return dist.TCPStore(*args, **kwargs)
    for m in mods:
        m.TCPStore = TCPStore
    # The c10d rendezvous (an elastic job's) makes its store server
    # through dist.TCPStore in a method of its own.
    if mods:
        _dr = importlib.import_module(
            "torch.distributed.elastic.rendezvous.dynamic_rendezvous")
        _h = getattr(_dr, "DynamicRendezvousHandler", None)
        if _h is not None and hasattr(_h, "_create_tcp_store_server"):
            def _server(self, master_addr, master_port):
                return TCPStore(host_name=master_addr, port=master_port,
                                is_master=True, multi_tenant=True)
            _h._create_tcp_store_server = _server
_here = os.path.dirname(os.path.abspath(__file__))
for _d in sys.path:
    _f = os.path.join(_d, "sitecustomize.py")
    if _d and os.path.abspath(_d) != _here and os.path.exists(_f):
        with open(_f) as _src:
            exec(compile(_src.read(), _f, "exec"))
        break
"""


def torch_env(tmp):
    """Environment a torchrun job needs from this torch: on one that
    lacks libuv, USE_LIBUV=0 and NOLIBUV_SITE (written under tmp) first
    on PYTHONPATH; else nothing."""
    if not lacks_libuv():
        return {}
    site = os.path.join(str(tmp), "nolibuv-site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write(NOLIBUV_SITE)
    path = [site] + [p for p in os.environ.get("PYTHONPATH", "").split(":")
                     if p]
    return {"USE_LIBUV": "0", "PYTHONPATH": ":".join(path)}


def backward_top():
    """The innermost Python function of a thread blocked in
    loss.backward(): torch.autograd.backward runs the engine itself on
    torch 1.x, through torch.autograd.graph._engine_run_backward on
    2.x."""
    return _torch_fact("backward", "import torch.autograd.graph as g; "
                       "print('_engine_run_backward' if hasattr(g, "
                       "'_engine_run_backward') else 'backward')")
