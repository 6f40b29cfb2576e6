"""Fixtures for the GPU tests: the e2e suite's fixtures (real processes,
the real CLI) for a Python that has torch with CUDA and a device.

They run on a machine with an NVIDIA GPU (tests/gpu/run, which the
device runs use) and skip elsewhere, each with its reason.  The Python is
PROBING_GPU_PYTHON, else the `python3` first on PATH; the agent comes
from the build (PROBING_BUILD) installed into that Python's
site-packages (tests/gpu/run does it with scripts/install), so both
`PROBING=1` and `import probing` work there as they would for a user.
"""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "e2e_conftest", os.path.join(HERE, "..", "e2e", "conftest.py"))
e2e = importlib.util.module_from_spec(_spec)
sys.modules["e2e_conftest"] = e2e
_spec.loader.exec_module(e2e)

probing = e2e.probing
wait_for = e2e.wait_for
agent_listening = e2e.agent_listening
free_port = e2e.free_port
Target = e2e.Target
CLI = e2e.CLI
BUILD = e2e.BUILD

GPU_PYTHON = os.environ.get("PROBING_GPU_PYTHON") or shutil.which("python3")
if GPU_PYTHON:
    GPU_PYTHON = os.path.abspath(GPU_PYTHON)


def _probe():
    """(reason to skip or None, facts) for GPU_PYTHON."""
    if not GPU_PYTHON:
        return "no python3 on PATH", {}
    code = ("import json, sys, torch\n"
            "ok = torch.cuda.is_available()\n"
            "try:\n    import probing; agent = None\n"
            "except Exception as e:\n    agent = repr(e)\n"
            "print(json.dumps({'torch': torch.__version__, 'cuda': ok, "
            "'device': torch.cuda.get_device_name(0) if ok else None, "
            "'agent': agent, 'version': '%d.%d' % sys.version_info[:2]}))")
    try:
        cp = subprocess.run([GPU_PYTHON, "-c", code], capture_output=True,
                            text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "%s: %s" % (GPU_PYTHON, e), {}
    if cp.returncode != 0:
        last = (cp.stderr.strip().splitlines() or ["?"])[-1]
        return "%s cannot import torch: %s" % (GPU_PYTHON, last), {}
    import json
    facts = json.loads(cp.stdout.strip().splitlines()[-1])
    if not facts["cuda"]:
        return "torch %s of %s sees no CUDA device" % (facts["torch"],
                                                       GPU_PYTHON), facts
    if facts["agent"]:
        return ("the agent is not installed into %s (tests/gpu/run installs "
                "it): %s" % (GPU_PYTHON, facts["agent"])), facts
    return None, facts


SKIP, FACTS = _probe()


def pytest_report_header(config):
    return "gpu: %s %s" % (GPU_PYTHON, SKIP or FACTS)


def pytest_collection_modifyitems(config, items):
    if SKIP:
        mark = pytest.mark.skip(reason="no GPU here: " + SKIP)
        for item in items:
            item.add_marker(mark)


@pytest.fixture
def spawn(tmp_path):
    """spawn(code, agent="env"|"init"|None, env={}) -> Target: the e2e
    suite's spawn for GPU_PYTHON (the agent installed in its
    site-packages: the build's user site and PYTHONPATH it also sets are
    not needed there)."""
    targets = []
    run = e2e.spawner(tmp_path, targets)
    yield lambda code, **kw: run(GPU_PYTHON, code, **kw)
    for t in targets:
        t.stop()
