"""The program's descriptors are the program's: the agent keeps its own out
of the way (high numbers, close-on-exec), never reads, writes or closes a
number the program closed and reused, does not spin when its descriptors
are gone, and listens again."""
import os
import time

from conftest import probing, wait_for

# Closes every descriptor above 2 (as daemonizing code does), then opens a
# file of its own at every number the agent had, writes to it, and after a
# while reports the offsets, the contents and the CPU it used meanwhile.
CLOSER = """\
import os, resource, sys, time
print("READY", flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
before = []
for n in os.listdir("/proc/self/fd"):
    try:
        os.fstat(int(n))
        before.append(int(n))
    except OSError:  # listdir's own, closed by now
        pass
print("AGENT_FDS", [fd for fd in sorted(before) if fd > 2], flush=True)
os.closerange(3, %(upto)d)
mine = {}
for fd in before:
    if fd > 2:
        f = os.open("mine-%%d" %% fd, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        if f != fd:
            os.dup2(f, fd)
            os.close(f)
        os.write(fd, b"program data %%d\\n" %% fd)
        mine[fd] = os.lseek(fd, 0, os.SEEK_CUR)
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.monotonic()
print("CLOSED", flush=True)
while not os.path.exists("done"):
    time.sleep(0.05)
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
bad = [fd for fd, off in mine.items()
       if os.lseek(fd, 0, os.SEEK_CUR) != off
       or open("mine-%%d" %% fd, "rb").read() != b"program data %%d\\n" %% fd]
print("RESULT cpu=%%.2f wall=%%.2f bad=%%r" %% (cpu, time.monotonic() - t0, bad),
      flush=True)
while True:
    time.sleep(0.05)
"""


def high_fds(pid):
    """The target's descriptors at 512 and above (the agent's)."""
    out = set()
    for n in os.listdir("/proc/%d/fd" % pid):
        if int(n) >= 512:
            out.add(int(n))
    return out


def run_closer(spawn, python, tmp_path, upto):
    t = spawn(python, CLOSER % {"upto": upto})
    t.wait_line("READY")
    t.wait_agent()
    before = high_fds(t.pid)
    # Something for every descriptor the agent has: a session open.
    r = probing("eval", "1 + 1", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "2", r
    # The session's descriptor closed by the agent before the program
    # closes everything: a close of the agent's own in the instant its
    # number changes hands (between the agent's check and its close(2))
    # is the one case fdown.h leaves, and a test that started the
    # program's reopening as the session ended met it (once, in CI).
    wait_for(lambda: high_fds(t.pid) <= before, 10,
             "the agent's session closed")
    (tmp_path / "go").write_text("")
    t.wait_line("CLOSED")
    return t


def result(t, tmp_path):
    (tmp_path / "done").write_text("")
    t.wait_line("RESULT")
    line = [l for l in t.output().splitlines() if l.startswith("RESULT")][0]
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    return float(fields["cpu"]), float(fields["wall"]), fields["bad"]


def test_agent_descriptors_out_of_the_programs_way(spawn, python, tmp_path):
    """High numbers, close-on-exec: closerange(3, 256) does not reach them
    and a child started with close_fds=False inherits none."""
    t = spawn(python, """\
import fcntl, os, subprocess, time
print("READY", flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
def cloexec(fd):
    try:
        return bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)
    except OSError:  # listdir's own, closed by now
        return None
fds = [(fd, cloexec(fd)) for fd in
       sorted(int(n) for n in os.listdir("/proc/self/fd") if int(n) > 2)]
print("FDS", [(fd, c) for fd, c in fds if c is not None], flush=True)
out = subprocess.run(["sh", "-c", "ls /proc/$$/fd"], close_fds=False,
                     env={}, capture_output=True, text=True).stdout.split()
print("CHILD", sorted(int(n) for n in out), flush=True)
while True:
    time.sleep(0.05)
""")
    t.wait_line("READY")
    t.wait_agent()
    r = probing("eval", "1 + 1", target=t.pid)
    assert r.rc == 0, r
    (tmp_path / "go").write_text("")
    t.wait_line("CHILD")
    out = t.output()
    fds = eval(out.split("FDS ", 1)[1].splitlines()[0])
    # The agent's listener, wake-up pipes and this session at least.
    agent = [fd for fd, _ in fds if fd >= 512]
    assert len(agent) >= 5, fds
    assert all(cloexec for fd, cloexec in fds if fd >= 512), fds
    child = eval(out.split("CHILD ", 1)[1].splitlines()[0])
    assert not [fd for fd in child if fd >= 512], child


def test_closerange_low_leaves_agent_alone(spawn, python, tmp_path):
    t = run_closer(spawn, python, tmp_path, 256)
    r = probing("eval", "2 + 2", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "4", r
    cpu, wall, bad = result(t, tmp_path)
    assert bad == "[]", t.output()


def test_closerange_all_agent_rebuilds_quietly(spawn, python, tmp_path):
    """Every descriptor closed and its number reused by the program's own
    file: the agent writes nothing there, reads nothing, does not spin,
    prints at most a line, and is reachable again within seconds."""
    t = run_closer(spawn, python, tmp_path, 65536)
    # Reachable again: listener bound anew, worker wake-up rebuilt.
    def answers():
        r = probing("eval", "3 + 3", target=t.pid, timeout=10)
        return r.rc == 0 and r.out.strip() == "6"
    wait_for(answers, timeout=20, what="the agent to listen again")
    r = probing("backtrace", target=t.pid)
    assert r.rc == 0 and "<module>" in r.out, r
    # Time for the agent's checks to run several times.
    time.sleep(3)
    cpu, wall, bad = result(t, tmp_path)
    assert bad == "[]", t.output()
    # Spinning was 100% of a core; an idle agent uses a few ms a second.
    assert cpu < 0.3 * wall, (cpu, wall, t.output()[-2000:])
    noise = [l for l in t.output().splitlines()
             if "libev" in l or "probing" in l.lower()]
    assert len(noise) <= 3 and not any("libev" in l for l in noise), noise
    assert t.alive()


CHILD_FDS = """\
import os, subprocess, sys, time
print("READY", flush=True)
while not os.path.exists("go"):
    time.sleep(0.02)
code = ("import os, time; time.sleep(1.0); "
        "print(os.environ.get('PROBING'), sorted(int(n) for n in "
        "os.listdir('/proc/self/fd')))")
print("CHILD", subprocess.run([sys.executable, "-c", code],
                              capture_output=True, text=True).stdout.strip(),
      flush=True)
while True:
    time.sleep(0.05)
"""


def test_probing_1_is_this_process_only(spawn, python, tmp_path):
    """PROBING=1: the program's Python children run exactly as without
    Probing (no agent, none of its descriptors: CPython's own
    test_subprocess counts a child's descriptors); PROBING=2 is inherited
    (torchrun's ranks)."""
    for value, inherited in (("1", False), ("2", True)):
        t = spawn(python, CHILD_FDS, env={"PROBING": value})
        t.wait_line("READY")
        t.wait_agent()
        (tmp_path / "go").write_text("")
        t.wait_line("CHILD")
        line = [l for l in t.output().splitlines() if l.startswith("CHILD")][0]
        env, fds = line.split(" ", 2)[1:]
        high = [fd for fd in eval(fds) if fd >= 512]
        if inherited:
            assert env == value and len(high) >= 3, line
        else:
            assert env == "None" and high == [], line
        (tmp_path / "go").unlink()
        t.stop()
