"""Issue 27, item 12: the MCP door served any path that looked like a report.

The `report` tool and `resources/read file://...` took any path whose base
name looked like a report (`<reports>/../../planted/probing-crash-1-2.txt`),
and showing a report prints the source line of every Python frame it
names.  So a report planted by another user, naming root's own files as
frames, made root's MCP return lines of those files (/etc/shadow in the
finding).

Now a door serves only reports its user's recordings (or live agents'
hangs) name, or the user's own reports beside them; and a report shows
source lines only of Python files (*.py) that the report's writer could
read.  The hostile program here is a real crash whose report is then
copied by another user (nobody, when the test runs as root) into a place
of theirs, with its frames pointed at root-only files.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import CLI, probing

CRASH = """\
def explode():
    raise ValueError("the hostile program's end")  # CRASH-LINE
print("READY", flush=True)
explode()
"""

NOBODY = 65534


def mcp(lines, env):
    e = dict(os.environ)
    e.pop("PROBING_TARGET", None)
    e.update(env)
    text = "".join(json.dumps(l) + "\n" for l in lines)
    cp = subprocess.run([CLI, "mcp"], input=text, capture_output=True,
                        text=True, timeout=300, env=e)
    assert cp.returncode == 0, cp.stderr
    return {r.get("id"): r for r in map(json.loads, cp.stdout.splitlines())}


def init():
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "hostile", "version": "0"}}}


def call(id, name, **args):
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}


def read(id, uri):
    return {"jsonrpc": "2.0", "id": id, "method": "resources/read",
            "params": {"uri": uri}}


def text_of(reply):
    if "error" in reply:
        return reply["error"]["message"]
    res = reply["result"]
    parts = res.get("content") or res.get("contents") or []
    return "\n".join(p.get("text", "") for p in parts)


@pytest.fixture
def scene(spawn, python, tmp_path):
    """A real crash report (listed by the recordings), root-only secrets,
    and a planted copy of the report naming them."""
    reports = tmp_path / "reports"
    data = tmp_path / "data"
    reports.mkdir()
    env = {"PROBING_CRASH": "1", "PROBING_CRASH_PATH": str(reports),
           "PROBING_DATA_DIR": str(data)}
    t = spawn(python, CRASH, env=env)
    t.proc.wait(timeout=60)
    real = [p for p in os.listdir(reports) if p.startswith("probing-crash-")]
    assert len(real) == 1, (os.listdir(reports), t.output())
    report = str(reports / real[0])

    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    py = secrets / "keys.py"
    py.write_text("ROOT_ONLY = 'root-only-py-line'\n")
    txt = secrets / "shadow"
    txt.write_text("root-only-text-line\n")
    for p in (py, txt):
        os.chmod(p, 0o600)

    # The planted copy: every frame's file is now a secret, line 1.
    text = open(report).read()
    frames = re.findall(r'File "([^"]+)", line (\d+)', text)
    assert frames, text
    planted_text = text
    for i, (f, n) in enumerate(frames):
        planted_text = planted_text.replace(
            'File "%s", line %s' % (f, n),
            'File "%s", line 1' % (py if i % 2 == 0 else txt), 1)
    planted_dir = tmp_path / "planted"
    planted_dir.mkdir()
    planted = planted_dir / "probing-crash-1-20000101T000000Z.txt"
    planted.write_text(planted_text)
    beside = reports / "probing-crash-2-20000101T000000Z.txt"
    beside.write_text(planted_text)
    if os.geteuid() == 0:
        for p in (planted_dir, planted, beside):
            os.chown(p, NOBODY, NOBODY)
    return {"env": {"PROBING_DATA_DIR": str(data)}, "report": report,
            "planted": str(planted), "beside": str(beside),
            "traversal": str(reports) + "/../planted/" + planted.name,
            "tmp": str(tmp_path)}


def no_secret(text):
    assert "root-only-py-line" not in text, text
    assert "root-only-text-line" not in text, text


def test_door_serves_only_listed_reports(scene):
    paths = [scene["planted"], scene["traversal"]]
    if os.geteuid() == 0:
        paths.append(scene["beside"])     # nobody's, in the report directory
    lines = [init(), call(1, "report", file=scene["report"])]
    for i, p in enumerate(paths):
        lines.append(call(10 + i, "report", file=p))
        lines.append(read(20 + i, "file://" + p))
    by_id = mcp(lines, scene["env"])
    # The real report is served, with its own source line.
    ok = by_id[1]["result"]
    assert ok["isError"] is False, ok
    assert "CRASH-LINE" in text_of(by_id[1]), text_of(by_id[1])
    for i, p in enumerate(paths):
        tool, res = by_id[10 + i], by_id[20 + i]
        assert tool["result"]["isError"] is True, (p, tool)
        assert "not a report this door serves" in text_of(tool), (p, tool)
        assert "error" in res, (p, res)
        no_secret(text_of(tool))
        no_secret(text_of(res))


def test_report_shows_only_python_its_writer_could_read(scene):
    """`probing report` itself (which the doors run): a report another
    user wrote shows no line of a file that user cannot read, and no
    report shows a line of a file that is not Python source."""
    r = probing("report", scene["planted"])
    assert r.rc == 0, r
    if os.geteuid() == 0:      # the planted report is nobody's
        no_secret(r.out)
    assert "root-only-text-line" not in r.out, r.out
    # A report of our own still shows its Python source.
    r = probing("report", scene["report"])
    assert r.rc == 0 and "CRASH-LINE" in r.out, r
