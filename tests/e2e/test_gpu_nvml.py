"""gpu.utilization where there is no usable NVML: the table is there and
empty, the original's gpu_metrics answers as a view, and `probing memory`
says why in one line — with no driver library at all, and with a file
named libnvidia-ml.so.1 that is not NVML (an empty file; a copy of libm),
which the agent must refuse without crashing.  The figures themselves are
tested on a GPU (tests/gpu/test_nvml.py)."""
import ctypes.util
import json
import os
import shutil

import pytest

from conftest import probing, wait_for

IDLE = """\
import time
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""


def _no_nvml_here():
    # A machine with NVIDIA's driver would give rows: these tests are
    # about the machines without one.
    return ctypes.util.find_library("nvidia-ml") is not None


pytestmark = pytest.mark.skipif(
    _no_nvml_here(), reason="this machine has libnvidia-ml: see tests/gpu/test_nvml.py")


def memory_json(pid):
    r = probing("memory", "-f", "json", "--top", "1", target=pid)
    assert r.rc == 0, r
    return json.loads(r.out)


def gpu_message(pid):
    """The agent's why line, once the recorder thread has looked."""
    seen = {}

    def looked():
        g = memory_json(pid).get("gpu")
        seen["gpu"] = g
        return g is not None and g.get("message") not in (None, "GPU: not sampled yet")

    wait_for(looked, timeout=30, what="the GPU's why line")
    print("gpu:", seen["gpu"])
    return seen["gpu"]


def count_rows(pid, table):
    r = probing("query", "-f", "json", "SELECT count(*) AS n FROM " + table, target=pid)
    assert r.rc == 0, r
    rows = json.loads(r.out)
    print(table, rows)
    return rows[0]["n"] if isinstance(rows[0], dict) else rows[0][0]


def check_target(t, why_part):
    t.wait_line("READY")
    t.wait_agent()
    g = gpu_message(t.pid)
    assert g["devices"] == [], g
    assert g["message"].startswith("GPU: ") and why_part in g["message"], g
    assert "\n" not in g["message"], g
    # The table and the view are there, and empty.
    assert count_rows(t.pid, "gpu.utilization") == 0
    assert count_rows(t.pid, "gpu_metrics") == 0
    r = probing("query", "-f", "json",
                "SELECT name, kind FROM probing.tables WHERE schema = 'gpu' ORDER BY name",
                target=t.pid)
    assert r.rc == 0, r
    names = json.loads(r.out)
    print("catalog:", names)
    assert [list(x.values()) if isinstance(x, dict) else x for x in names] == [
        ["gpu_metrics", "view"], ["utilization", "recorded"]], names
    # `probing memory` (table) says why in one line, next to the process.
    r = probing("memory", "--top", "1", target=t.pid)
    print(r.out)
    assert r.rc == 0, r
    lines = [ln for ln in r.out.splitlines() if ln.startswith("GPU")]
    assert lines == [g["message"]], (lines, r.out)
    # The settings are there, and switching off says so.
    r = probing("config", target=t.pid)
    assert r.rc == 0 and "gpu.interval_ms" in r.out and "gpu.max_rows" in r.out, r
    r = probing("config", "gpu.interval_ms=0", target=t.pid)
    assert r.rc == 0, r
    wait_for(lambda: "gpu.interval_ms is 0" in (memory_json(t.pid)["gpu"].get("message") or ""),
             timeout=30, what="the off line")
    assert t.alive(), t.output()
    return g


def test_no_driver_library(spawn, python):
    # LD_LIBRARY_PATH empty: only the system's paths, which have no NVML.
    t = spawn(python, IDLE, env={"LD_LIBRARY_PATH": ""})
    g = check_target(t, "libnvidia-ml.so.1 not found")
    assert g["message"] == "GPU: no NVIDIA driver library (libnvidia-ml.so.1 not found)", g


def test_empty_file_is_refused(spawn, python, tmp_path):
    d = tmp_path / "nvml-empty"
    d.mkdir()
    (d / "libnvidia-ml.so.1").write_bytes(b"")
    t = spawn(python, IDLE, env={"LD_LIBRARY_PATH": str(d)})
    g = check_target(t, "could not be loaded")
    assert "libnvidia-ml.so.1" in g["message"], g


def test_other_library_is_refused(spawn, python, tmp_path):
    # A real shared library under NVML's name: it loads, and has none of
    # NVML's symbols.
    libm = None
    for cand in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                 "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"):
        if os.path.exists(cand):
            libm = cand
            break
    if libm is None:
        pytest.skip("no libm.so.6 found to copy")
    d = tmp_path / "nvml-libm"
    d.mkdir()
    shutil.copy(libm, d / "libnvidia-ml.so.1")
    t = spawn(python, IDLE, env={"LD_LIBRARY_PATH": str(d)})
    g = check_target(t, "is not NVML (no nvmlInit_v2)")
    assert g["message"] == "GPU: libnvidia-ml.so.1 is not NVML (no nvmlInit_v2)", g

