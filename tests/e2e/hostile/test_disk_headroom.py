"""Issue 27, item 6: the recording fills the program's disk.

The recording directory is on a small file system (a 64 KiB tmpfs here,
a nearly full disk in life).  The agent recorded until nothing was free,
stopped with a warning, and kept its files: the program's own 40 KiB
write then failed with ENOSPC.

The recording leaves headroom (data.min_free_mb / data.min_free_pct,
whichever is more), looked at before every flush and enforced on every
write that grows a file; when it is reached, or a flush fails because
the disk is full, the recording stops, says so once, and removes its
files: the program's write succeeds.  Both ways are tried: with the
default headroom, and with none (min_free 0 and 0: the flush fails on
the full disk and the files are given back).

Needs root (mount); skipped with the reason otherwise.  The tmpfs is
unmounted when the test ends.
"""
import os
import subprocess

import pytest

from conftest import probing, wait_for

PROGRAM = """\
import os, sys, time
mnt = sys.argv[1]
print("READY", flush=True)
total = 0
while not os.path.exists("go"):
    total += sum(range(2000))   # something to sample
    time.sleep(0.005)
try:
    with open(os.path.join(mnt, "program.bin"), "wb") as f:
        f.write(b"x" * 40960)
        f.flush()
        os.fsync(f.fileno())
    print("WROTE ok", flush=True)
except OSError as e:
    print("WROTE errno", e.errno, flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.fixture
def small_fs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                        str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: " + r.stderr.strip())
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def status(pid):
    r = probing("config", target=pid)
    assert r.rc == 0, r
    for line in r.out.splitlines():
        parts = line.split("\t")
        if parts[0] == "data.status":
            return parts[1]
    raise AssertionError(r.out)


@pytest.mark.parametrize("headroom", ["default", "none"])
def test_recording_gives_the_disk_back(spawn, python, tmp_path, small_fs,
                                       headroom):
    env = {"PROBING_DATA_DIR": str(small_fs), "PROBING_DATA_FLUSH_MS": "100",
           "PROBING_MEMORY_INTERVAL_MS": "10"}
    if headroom == "none":
        env.update(PROBING_DATA_MIN_FREE_MB="0", PROBING_DATA_MIN_FREE_PCT="0")
    t = spawn(python, PROGRAM, env=env, args=(str(small_fs),))
    t.wait_line("READY")
    t.wait_agent()
    r = probing("perf", "--start", "--hz", "1000", target=t.pid)
    assert r.rc == 0, r
    # The recording stops: the headroom reached, or the disk full.
    wait_for(lambda: "memory only" in status(t.pid), 60,
             lambda: "the recording to stop: " + status(t.pid))
    # The program's own write fits.
    (tmp_path / "go").write_text("")
    t.wait_line("WROTE")
    out = t.output()
    assert "WROTE ok" in out, out
    left = [os.path.join(d, f) for d, _, fs in os.walk(small_fs) for f in fs]
    assert left == [os.path.join(str(small_fs), "program.bin")], left
    st = status(t.pid)
    assert "full" in st and "files removed" in st, st
    assert out.count("recording to %s" % small_fs) == 1, out
    # The store goes on in memory.
    r = probing("query", "SELECT count(*) > 0 FROM process.memory",
                target=t.pid)
    assert r.rc == 0 and r.out.split()[-1] == "1", r
    assert t.alive()
