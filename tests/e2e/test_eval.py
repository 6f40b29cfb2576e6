"""probing eval / repl: code runs in __main__ of the live target."""
import os
import re
import shlex
import time

from conftest import ROOT, probing

IDLE = """\
import time
counter = 41
def tick():
    global counter
    while True:
        time.sleep(0.01)
print("READY", flush=True)
tick()
"""


def start(spawn, python):
    t = spawn(python, IDLE)
    t.wait_line("READY")
    t.wait_agent()
    return t


def test_expression_returns_repr(spawn, python):
    t = start(spawn, python)
    r = probing("eval", "counter + 1", target=t.pid)
    assert r.rc == 0, r
    assert r.out.strip() == "42"
    r = probing("eval", "{'a': [1, 2]}", target=t.pid)
    assert r.out.strip() == "{'a': [1, 2]}"


def test_statements_print_and_change_state(spawn, python):
    t = start(spawn, python)
    r = probing("eval", "counter = 100\nfor i in range(3):\n    print('line', i)", target=t.pid)
    assert r.rc == 0, r
    assert r.out.splitlines() == ["line 0", "line 1", "line 2"]
    assert probing("eval", "counter", target=t.pid).out.strip() == "100"


def test_exception_comes_back_as_traceback(spawn, python):
    t = start(spawn, python)
    r = probing("eval", "1/0", target=t.pid)
    assert r.rc == 1, r
    assert "ZeroDivisionError" in r.err
    assert "Traceback" in r.err
    assert t.alive()


def test_system_exit_and_keyboard_interrupt_do_not_stop_target(spawn, python):
    t = start(spawn, python)
    for code in ["raise SystemExit(3)", "import sys; sys.exit(0)", "exit()",
                 "raise KeyboardInterrupt"]:
        r = probing("eval", code, target=t.pid)
        assert r.rc == 1, (code, r)
        assert "eval timeout" not in r.err, r  # it raised, not us
        time.sleep(0.1)
        assert t.alive(), code
    assert probing("eval", "counter", target=t.pid).out.strip() == "41"


def test_infinite_loop_is_interrupted(spawn, python):
    t = start(spawn, python)
    began = time.time()
    r = probing("--timeout", "20000", "eval", "--timeout", "1000", "while True: pass", target=t.pid)
    assert r.rc == 1, r
    # Said as what it is, not a bare KeyboardInterrupt.
    assert r.err.startswith("stopped after 1000 ms: the eval timeout "
                            "(--timeout, timeoutMs) passed\n"), r
    assert r.err.rstrip().endswith("KeyboardInterrupt"), r
    assert time.time() - began < 15
    assert t.alive()
    # and the target still works normally afterwards
    assert probing("eval", "counter", target=t.pid).out.strip() == "41"


def test_code_blocked_in_c_is_reported_by_the_agent(spawn, python):
    """time.sleep cannot be interrupted: the agent answers 2 s after the
    timeout that the code goes on running (exit 1), before the CLI gives
    up on it (exit 5 would say the agent is not answering)."""
    t = start(spawn, python)
    r = probing("eval", "--timeout", "200", "import time; time.sleep(3)",
                target=t.pid)
    assert r.rc == 1, r
    assert "the code did not stop when interrupted after 200 ms (blocked " \
        "in C?); it goes on running in the target" in r.err, r
    assert probing("eval", "counter", target=t.pid).out.strip() == "41"


def test_readme_eval_examples_work(spawn, python):
    """Every `eval` line of the README runs as it is written."""
    t = start(spawn, python)
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = [l.split("#")[0].strip() for l in f
                 if l.startswith("probing -t <pid> eval ")]
    assert lines
    for line in lines:
        args = shlex.split(line)[4:]  # probing -t <pid> eval ...
        r = probing("eval", *args, target=t.pid)
        assert r.rc == 0, (line, r)


def test_syntax_error(spawn, python):
    t = start(spawn, python)
    r = probing("eval", "def (:", target=t.pid)
    assert r.rc == 1
    assert "SyntaxError" in r.err


def test_code_from_stdin(spawn, python):
    t = start(spawn, python)
    r = probing("eval", "-", target=t.pid, input="x = 6\nprint(x * 7)\n")
    assert r.rc == 0, r
    assert r.out.strip() == "42"


def test_repl_with_piped_stdin(spawn, python):
    t = start(spawn, python)
    script = "x = 2\nfor i in range(2):\n    print('i', i * x)\n\nx * 21\n"
    r = probing("repl", target=t.pid, input=script)
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert "i 0" in lines and "i 2" in lines and "42" in lines


def test_none_is_not_echoed(spawn, python):
    t = start(spawn, python)
    r = probing("eval", "print('only this')", target=t.pid)
    assert r.rc == 0 and r.out == "only this\n", r
    r = probing("eval", "None", target=t.pid)
    assert r.rc == 0 and r.out == "", r


CHATTY = """\
import sys, threading, time
def chat(name, tag):
    n = 0
    while True:
        stream = getattr(sys, name)  # looked up each time, as print does
        stream.write("%s %d\\n" % (tag, n))
        stream.flush()
        n += 1
        time.sleep(0.002)
threading.Thread(target=chat, args=("stdout", "OUT"), daemon=True).start()
threading.Thread(target=chat, args=("stderr", "ERR"), daemon=True).start()
print("READY", flush=True)
while True:
    time.sleep(0.01)
"""


def test_eval_captures_only_its_own_output(spawn, python):
    """While an evaluation runs, the program's own threads keep printing to
    their stdout and stderr: not one of their lines goes into the reply or
    goes missing from the program's log (they all went into the eval's
    reply before)."""
    t = spawn(python, CHATTY)
    t.wait_line("READY")
    t.wait_agent()
    r = probing("eval", "import sys, time\n"
                "print('mine'); time.sleep(1.5)\n"
                "print('mine too', file=sys.stderr)", target=t.pid)
    assert r.rc == 0, r
    assert r.out.split() == ["mine", "mine", "too"], r
    time.sleep(0.2)
    out = t.output()
    for tag in ("OUT", "ERR"):
        # stdout and stderr share one file: lines may interleave.
        seen = [int(n) for n in re.findall(tag + r" (\d+)\n", out)]
        # Every line, in order, none lost, through the 1.5 s evaluation.
        assert seen == list(range(len(seen))) and len(seen) > 200, \
            (tag, len(seen), [s for i, s in enumerate(seen) if s != i][:5])
    assert "mine" not in t.output()


FRAMES = """\
import os, threading, time
class Model:
    training = True
def worker(n):
    depth = n * 2
    while True:
        time.sleep(0.05)
class Tracked:
    def __del__(self):
        print("FREED", flush=True)
def holder():
    obj = Tracked()
    while not os.path.exists("go"):
        time.sleep(0.02)
    del obj              # the last reference: FREED now, not later
    while True:
        time.sleep(0.05)
def main():
    model = Model()
    lr = 0.1
    t = threading.Thread(target=worker, args=(21,), daemon=True, name="w")
    t.start()
    h = threading.Thread(target=holder, daemon=True, name="h")
    h.start()
    print("READY", t.native_id, h.native_id, flush=True)
    while True:
        time.sleep(0.05)
main()
"""


def test_eval_in_a_frame_of_a_running_thread(spawn, python, tmp_path):
    """`eval 'model.training'` where model is a local (examples/train.py's
    is train()'s): --frame by number or function, --thread by id."""
    t = spawn(python, FRAMES)
    t.wait_line("READY")
    t.wait_agent()
    worker, held = (int(x) for x in t.output().split("READY ")[1].split()[:2])
    r = probing("eval", "model", target=t.pid)
    assert r.rc == 1 and "NameError" in r.err, r
    r = probing("eval", "--frame", "main", "model.training, lr", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "(True, 0.1)", r
    r = probing("eval", "--frame", "0", "lr * 10", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "1.0", r
    r = probing("eval", "--thread", str(worker), "--frame", "worker",
                "depth", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "42", r
    r = probing("eval", "--thread", str(worker), "n + 1", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "22", r
    # A copy of the locals: the running frame is not changed.
    r = probing("eval", "--frame", "main", "lr = 5; print(lr)", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "5", r
    r = probing("eval", "--frame", "main", "lr", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "0.1", r
    r = probing("eval", "--frame", "main", "fresh = 1", target=t.pid)
    assert r.rc == 0, r
    r = probing("eval", "--frame", "main", "fresh", target=t.pid)
    assert r.rc == 1 and "NameError" in r.err, r
    # Nothing of the frame's is kept: its object goes when it lets go.
    r = probing("eval", "--thread", str(held), "--frame", "holder",
                "type(obj).__name__", target=t.pid)
    assert r.rc == 0 and r.out.strip() == "'Tracked'", r
    (tmp_path / "go").write_text("")
    t.wait_line("FREED", timeout=10)
    # What is not there, said.
    r = probing("eval", "--frame", "7", "lr", target=t.pid)
    assert r.rc == 1 and "has 2 frames now: #0 to #1" in r.err, r
    r = probing("eval", "--frame", "nosuch", "lr", target=t.pid)
    assert r.rc == 1 and "no frame of nosuch on thread %d's stack" % t.pid \
        in r.err, r
    r = probing("eval", "--thread", "1", "lr", target=t.pid)
    assert r.rc == 1 and "no Python thread 1" in r.err, r
    r = probing("eval", "--frame", "-2", "lr", target=t.pid)
    assert r.rc == 2, r
    assert t.alive()
