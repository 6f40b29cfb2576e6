"""Checks of Probing's profile files, independent of Probing's code.

    parse_folded(text) -> [(frames, count)]    flamegraph.pl's collapsed
        stacks: frames from the root separated by ';', then a space and an
        integer count; anything else is an error.
    check_chrome(doc) -> {tid: [events]}        the Trace Event schema
        (trace_event.schema.json, with jsonschema) and what Perfetto needs
        of complete events: on each thread they nest (one ends before a
        sibling starts, a child lies inside its parent); of async events:
        each begun ("b") once and ended ("e") once, not before it began
        (per process, category and id).
    speedscope(path) -> dict | None            speedscope's own importer
        (validate.mjs; None when node or the npm package is missing) and
        speedscope's file format schema for speedscope files.
    trace_view(path, png=None) -> dict | None  the trace viewer that was
        chrome://tracing (view_trace.mjs: Catapult's, from the Perfetto UI
        build on npm, in Debian's chromium) opening the file with its Load
        button: what it shows, its import warnings; None when node, the
        npm packages or chromium are missing.
    check_svg(text) -> root                    well-formed XML, an <svg>
        with frames that each carry a title, a rect and a text.
    svg_script(path, regex) -> dict | None      the SVG's own script run in
        a DOM (svg_check.mjs, jsdom): zoom on click, keyboard search,
        reset; None when node or jsdom is missing.
"""
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
_LINE = re.compile(r"^(.+) ([0-9]+)$")


def parse_folded(text):
    stacks = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError("folded line %d is not 'stack count': %r" % (n, line[:200]))
        frames = m.group(1).split(";")
        if any(f == "" for f in frames):
            raise ValueError("folded line %d has an empty frame" % n)
        stacks.append((frames, int(m.group(2))))
    return stacks


def check_chrome(doc):
    import jsonschema
    with open(os.path.join(HERE, "trace_event.schema.json")) as f:
        jsonschema.validate(doc, json.load(f))
    by_tid = {}
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X":
            by_tid.setdefault((ev["pid"], ev["tid"]), []).append(ev)
    begun = {}
    for ev in doc["traceEvents"]:
        if ev["ph"] not in ("b", "e"):
            continue
        ident = ev["id2"].get("local", ev["id2"].get("global")) \
            if "id2" in ev else ev["id"]
        key = (ev["pid"], ev["cat"], str(ident))
        if ev["ph"] == "b":
            assert key not in begun, "async event begun twice: %r" % ev
            begun[key] = ev["ts"]
        else:
            assert key in begun, "async event ended, never begun: %r" % ev
            assert ev["ts"] >= begun.pop(key), "async event ends before it begins: %r" % ev
    assert not begun, "async events begun, never ended: %r" % list(begun)
    eps = 1e-3  # microseconds, the precision written
    for key, evs in by_tid.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ = []
        for e in evs:
            while open_ and open_[-1]["ts"] + open_[-1]["dur"] <= e["ts"] + eps:
                open_.pop()
            if open_:
                p = open_[-1]
                assert e["ts"] + e["dur"] <= p["ts"] + p["dur"] + eps, \
                    "events overlap on %r: %r and %r" % (key, p, e)
            open_.append(e)
    return by_tid


def speedscope(path):
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(HERE, "node_modules", "speedscope")):
        return None
    if path.endswith(".speedscope.json"):
        import jsonschema
        schema = os.path.join(HERE, "node_modules", "speedscope", "dist", "release",
                              "file-format-schema.json")
        with open(schema) as f, open(path) as g:
            jsonschema.validate(json.load(g), json.load(f))
    cp = subprocess.run([node, os.path.join(HERE, "validate.mjs"), path],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, "speedscope rejected %s: %s" % (path, cp.stderr[-2000:])
    return json.loads(cp.stdout)


def trace_view(path, png=None):
    node = shutil.which("node")
    if not node or not os.path.exists("/usr/bin/chromium") or not os.path.isdir(
            os.path.join(HERE, "node_modules", "@pinpoint-apm", "perfetto-ui")):
        return None
    cmd = [node, os.path.join(HERE, "view_trace.mjs"), path]
    if png:
        cmd += ["--png", png]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert cp.returncode == 0, "the trace viewer failed on %s: %s %s" % (
        path, cp.stderr[-2000:], cp.stdout[-2000:])
    return json.loads(cp.stdout)


def check_svg(text):
    root = ET.fromstring(text.encode())
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == ns + "svg", root.tag
    frames = root.find(".//%sg[@id='frames']" % ns)
    assert frames is not None, "no frames group"
    for g in frames.findall(ns + "g"):
        assert g.find(ns + "title") is not None and g.find(ns + "rect") is not None \
            and g.find(ns + "text") is not None, ET.tostring(g)[:300]
        for a in ("data-x", "data-w", "data-d", "data-n"):
            assert a in g.attrib, a
    return root


def svg_script(path, regex):
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(HERE, "node_modules", "jsdom")):
        return None
    cp = subprocess.run([node, os.path.join(HERE, "svg_check.mjs"), path, regex],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, "the SVG's script failed: %s" % cp.stderr[-2000:]
    return json.loads(cp.stdout)
