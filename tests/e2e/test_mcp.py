"""probing mcp at the protocol's edges, with raw JSON-RPC lines on its
stdin (tests/mcp drives it with the MCP SDK's own client): version
negotiation, the errors JSON-RPC defines, notifications, a bad line in
the middle of a session, stdout carrying nothing but protocol, and the
token handed down to the commands answering the tools."""
import json
import subprocess

from conftest import CLI, probing, wait_for, free_port


def session(lines, args=(), env=None, timeout=120):
    """Runs `probing [args] mcp` on lines; returns (replies by id, every
    reply in order, the process)."""
    import os
    e = dict(os.environ)
    e.pop("PROBING_TARGET", None)
    e.update(env or {})
    text = "".join((l if isinstance(l, str) else json.dumps(l)) + "\n"
                   for l in lines)
    cp = subprocess.run([CLI, *args, "mcp"], input=text, capture_output=True,
                        text=True, timeout=timeout, env=e)
    replies = [json.loads(l) for l in cp.stdout.splitlines()]
    return {r.get("id"): r for r in replies}, replies, cp


def init(version="2025-11-25", id=0):
    return {"jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}


def req(id, method, params=None):
    m = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        m["params"] = params
    return m


def test_versions_negotiated():
    for asked, got in (("2025-11-25", "2025-11-25"),
                       ("2025-06-18", "2025-06-18"),
                       ("2024-11-05", "2024-11-05"),
                       ("2099-01-01", "2025-11-25")):
        by_id, _, cp = session([init(asked)])
        assert cp.returncode == 0, cp.stderr
        r = by_id[0]["result"]
        assert r["protocolVersion"] == got, r
        assert r["serverInfo"]["name"] == "probing"
        assert set(r["capabilities"]) == {"tools", "resources"}


def test_json_rpc_errors_and_the_session_goes_on():
    by_id, replies, cp = session([
        req(1, "tools/list"),                       # before initialize
        init(id=2),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "{not json",                                # parse error
        "",                                         # empty lines: skipped
        json.dumps([req(3, "ping")]),               # batches: not in MCP
        req(4, "prompts/list"),                     # not offered
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        req(5, "tools/call", {"name": "nope", "arguments": {}}),
        req(6, "tools/call", {"arguments": {}}),
        req(7, "resources/read", {"uri": "file:///etc/passwd"}),
        req(8, "resources/read", {"uri": "http://example.com/x"}),
        {"jsonrpc": "2.0", "id": {"an": "object"}, "method": "ping"},
        req("s", "ping"),
        req(9, "resources/templates/list"),
        req(10, "tools/call", {"name": "query", "arguments": {
            "target": "1", "sql": "SELECT 1", "extra": 2}}),
    ])
    assert cp.returncode == 0, cp.stderr
    assert by_id[1]["error"]["code"] == -32600
    assert "initialize" in by_id[1]["error"]["message"]
    nulls = [r for r in replies if r["id"] is None]
    assert [r["error"]["code"] for r in nulls] == [-32700, -32600, -32600]
    assert by_id[4]["error"]["code"] == -32601
    assert by_id[5]["error"]["code"] == -32602
    assert by_id[6]["error"]["code"] == -32602
    assert by_id[7]["error"]["code"] == -32002
    assert by_id[8]["error"]["code"] == -32002
    assert by_id["s"]["result"] == {}
    assert by_id[9]["result"] == {"resourceTemplates": []}
    r = by_id[10]["result"]
    assert r["isError"] is True
    assert r["content"][0]["text"] == "query takes no argument 'extra'"
    # Notifications get no reply: one reply per request and bad line.
    assert len(replies) == 13, replies


def test_tools_on_a_live_process(spawn, python):
    t = spawn(python, """
        import time
        def serve_forever():
            while True:
                time.sleep(0.05)
        print("ready", flush=True)
        serve_forever()
    """).wait_agent()
    t.wait_line("ready")
    by_id, replies, cp = session([
        init(),
        req(1, "tools/call", {"name": "backtrace",
                              "arguments": {"target": str(t.pid)}}),
        req(2, "tools/call", {"name": "query", "arguments": {
            "target": str(t.pid),
            "sql": "SELECT func FROM python.backtrace WHERE depth = 0 "
                   "AND thread_name = 'MainThread'"}}),
        req(3, "tools/call", {"name": "list_agents"}),
        req(4, "tools/call", {"name": "backtrace", "arguments": None}),
    ])
    assert cp.returncode == 0, cp.stderr
    bt = by_id[1]["result"]
    assert bt["isError"] is False, bt
    assert "serve_forever (" in bt["content"][0]["text"]
    rows = json.loads(by_id[2]["result"]["content"][0]["text"])
    assert rows == [{"func": "serve_forever"}], rows
    agents = json.loads(by_id[3]["result"]["content"][0]["text"])
    assert str(t.pid) in [a["pid"] for a in agents], agents
    missing = by_id[4]["result"]
    assert missing["isError"] is True
    assert "needs 'target'" in missing["content"][0]["text"]


def test_the_token_reaches_the_commands(spawn, python):
    token = "mcp-test-token-0123456789abcdef"
    port = free_port()
    t = spawn(python, """
        import time
        while True:
            time.sleep(0.05)
    """, env={"PROBING_PORT": str(port), "PROBING_TOKEN": token})
    t.wait_agent()
    call = req(1, "tools/call", {"name": "query", "arguments": {
        "target": "127.0.0.1:%d" % port, "sql": "SELECT 41 + 1 AS n"}})
    env = {"PROBING_TOKEN": "", "XDG_RUNTIME_DIR": "/nonexistent",
           "HOME": "/nonexistent"}
    by_id, _, cp = session([init(), call], args=("--token", token), env=env)
    assert cp.returncode == 0, cp.stderr
    r = by_id[1]["result"]
    assert r["isError"] is False, r
    assert json.loads(r["content"][0]["text"]) == [{"n": 42}]
    # Without it the agent refuses, and the tool says so.
    by_id, _, cp = session([init(), call], env=env)
    r = by_id[1]["result"]
    assert r["isError"] is True
    assert "token" in r["content"][0]["text"]


def test_usage():
    r = probing("mcp", "extra")
    assert r.rc == 2, r
    r = probing("mcp", "--frobnicate")
    assert r.rc == 2 and "--frobnicate" in r.err, r
    r = probing("help", "mcp")
    assert r.rc == 0 and "--allow-eval" in r.out, r
    r = probing("mcp", input="")
    assert r.rc == 0 and r.out == "", r


def test_a_client_gone_ends_it_cleanly():
    """stdout closed by the client: the next reply fails with EPIPE, and
    the server says so and exits 1 (not killed by SIGPIPE)."""
    import os
    r, w = os.pipe()
    p = subprocess.Popen([CLI, "mcp"], stdin=subprocess.PIPE, stdout=w,
                         stderr=subprocess.PIPE, text=True)
    os.close(w)
    os.close(r)  # nobody reads the replies
    p.stdin.write(json.dumps(init()) + "\n")
    p.stdin.flush()
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1, (p.returncode, err)
    assert "the client went away" in err
