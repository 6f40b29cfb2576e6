"""Issue 27, item 2: the native sampler's signal killed the program.

The sampler asked each running thread for its C stack with a signal,
SIGPROF, whose default action ends the process ("Profiling timer
expired", exit 155 / -SIGPROF).  Any of ours that outlived the moment it
was meant for killed the program:

- the program set SIGPROF to SIG_DFL while `flamegraph --native` ran:
  the next tick killed it;
- a thread that blocked every signal kept one of ours pending; when the
  program later set SIG_DFL and unblocked it, it died;
- a thread calling os.execv() while it was sampled at 2 kHz carried a
  pending SIGPROF into the new image, which has no handler (4 runs in 12).

The signal is SIGURG now (its default is to ignore it; a pending one at
SIG_DFL, or in a new image, does nothing), what is still pending when
sampling stops is discarded, and when the program installs its own action
for SIGURG the sampler steps aside (Python stacks only) and the
flamegraph command says so (agent/profiler/native.h).
"""
import json
import os
import subprocess

from conftest import CLI, probing, wait_for

BUSY = """\
import os, signal, sys, threading, time

def spin(flag):
    x = 0
    while not os.path.exists(flag):
        x += 1

print("READY", flush=True)
"""


def status(pid):
    r = probing("perf", "-f", "json", target=pid)
    assert r.rc == 0, r
    return json.loads(r.out)


def profile_running(pid):
    return status(pid)["running"]


def start_native(pid, hz):
    r = probing("perf", "--native", "--hz", hz, target=pid)
    assert r.rc == 0, r
    wait_for(lambda: profile_running(pid), what="the profiler to run")


def test_program_sets_sigprof_to_default_while_sampled(spawn, python,
                                                       tmp_path):
    t = spawn(python, BUSY + """\
while not os.path.exists("go"):
    time.sleep(0.01)
# The program's own use of SIGPROF: back to its default action.
signal.signal(signal.SIGPROF, signal.SIG_DFL)
threading.Thread(target=spin, args=("done",)).start()
end = time.monotonic() + 1.5
while time.monotonic() < end:
    pass
print("SURVIVED", flush=True)
spin("done")
""")
    t.wait_line("READY")
    t.wait_agent()
    start_native(t.pid, 1000)
    (tmp_path / "go").write_text("")
    t.wait_line("SURVIVED")
    r = probing("perf", "--stop", target=t.pid)
    assert r.rc == 0, r
    (tmp_path / "done").write_text("")
    assert t.alive(), t.output()


# SIG_DFL set from the main thread, not the blocked one (Python sets
# handlers from the main thread only).
BLOCKED_THEN_DEFAULT = BUSY + """\
def blocked():
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    open("blocking", "w").close()
    spin("stopped")
    pending = signal.sigpending()
    print("PENDING", sorted(int(s) for s in pending), flush=True)
    while not os.path.exists("defaults"):
        time.sleep(0.01)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signal.valid_signals())
    print("ALIVE", flush=True)

th = threading.Thread(target=blocked)
th.start()
while not os.path.exists("stopped"):
    time.sleep(0.01)
signal.signal(signal.SIGPROF, signal.SIG_DFL)
signal.signal(signal.SIGURG, signal.SIG_DFL)
open("defaults", "w").close()
th.join()
while True:
    time.sleep(0.05)
"""


def test_blocked_thread_unblocks_at_default_actions(spawn, python, tmp_path):
    """The program's own order: sampling stops, it sets SIGPROF and SIGURG
    to SIG_DFL, then the thread unblocks every signal."""
    t = spawn(python, BLOCKED_THEN_DEFAULT)
    t.wait_line("READY")
    t.wait_agent()
    wait_for(lambda: (tmp_path / "blocking").exists(), what="the thread")
    start_native(t.pid, 1000)

    wait_for(lambda: status(t.pid)["nativeRequested"] > 0,
             what="a native request")
    r = probing("perf", "--stop", target=t.pid)
    assert r.rc == 0, r
    (tmp_path / "stopped").write_text("")
    wait_for(lambda: "ALIVE" in t.output() or not t.alive(),
             what="the thread to unblock")
    assert t.alive(), "the program died: rc %s\n%s" % (t.proc.returncode,
                                                        t.output())
    pending = [l for l in t.output().splitlines() if l.startswith("PENDING")]
    assert pending == ["PENDING []"], t.output()


def test_program_takes_sigurg_over_and_the_sampler_steps_aside(
        spawn, python, tmp_path):
    """The program installs its own SIGURG handler while `flamegraph
    --native` runs: native stacks stop, Python ones go on, the command
    says so, and the program lives."""
    t = spawn(python, BUSY + """\
got = []
threading.Thread(target=spin, args=("done",)).start()
while not os.path.exists("go"):
    time.sleep(0.01)
signal.signal(signal.SIGURG, lambda s, f: got.append(s))
print("TAKEN", flush=True)
spin("done")
""")
    t.wait_line("READY")
    t.wait_agent()
    out = tmp_path / "fg.folded"
    fg = subprocess.Popen([CLI, "-t", str(t.pid), "flamegraph", "--native",
                           "--hz", "500", "-d", "3s", "-o", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    try:
        wait_for(lambda: profile_running(t.pid), what="the profiler to run")
        (tmp_path / "go").write_text("")
        t.wait_line("TAKEN")
        so, se = fg.communicate(timeout=120)
    finally:
        if fg.poll() is None:
            fg.kill()
            fg.wait()
    assert fg.returncode == 0, (so, se)
    assert "native stacks stopped" in se and "SIGURG" in se, se
    assert status(t.pid)["nativeStopped"] is True
    assert t.alive(), t.output()
    (tmp_path / "done").write_text("")


# The new image's arguments are long (1.4 MB): execve() copies them on the
# CPU before it ends the other threads, the sampler's among them; a
# signal sent meanwhile is pending in the new image.
EXEC = BUSY + """\
while not os.path.exists("go"):
    pass
end = time.monotonic() + 0.3
while time.monotonic() < end:
    pass
env = {k: v for k, v in os.environ.items() if k != "PROBING"}
args = ["x" * 100000] * 14
os.execve(sys.executable,
          [sys.executable, "-c", "print('NEW IMAGE OK')"] + args, env)
"""

EXEC_RUNS = 12


def test_exec_while_sampled_at_2khz(spawn, python, tmp_path):
    """os.execve() from a thread sampled at 2 kHz: the new image must not
    inherit a pending signal that kills it.  Before the fix 4 runs in 12
    died of SIGPROF; each run here is a new program."""
    died = []
    for i in range(EXEC_RUNS):
        go = tmp_path / "go"
        if go.exists():
            go.unlink()
        t = spawn(python, EXEC)
        t.wait_line("READY")
        t.wait_agent()
        start_native(t.pid, 2000)
        go.write_text("")
        try:
            rc = t.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        if rc != 0 or "NEW IMAGE OK" not in t.output():
            died.append((i, rc, t.output()[-500:]))
    assert not died, "%d of %d runs died: %r" % (len(died), EXEC_RUNS, died)
