'use strict';
// DAP client tests: @vscode/debugadapter-testsupport's DebugClient against
// the real agent inside a real Python process, for each Python on the
// machine (/usr/bin/python3, another build of its version, pyenv's, when
// present, and the build's other versions).

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const { PYTHONS, spawnTarget, request, failed, succeeded, sleep, withTimeout } = require('../lib/target');

// The target: a named thread "worker" blocked in worker_wait(), the main
// thread looping in inner() <- outer() <- <module>.  Markers locate lines.
const SCRIPT = `\
import sys, threading, time

def worker_wait(ev):
    ids["worker"] = threading.get_native_id()
    started.set()
    ev.wait()  # @worker_wait

def inner(n):
    total = n * 2
    while True:
        time.sleep(0.02)  # @inner

def outer():
    inner(3)  # @outer

counter = 42
ids = {"main": threading.get_native_id()}
started = threading.Event()
ev = threading.Event()
t = threading.Thread(target=worker_wait, args=(ev,), name="worker", daemon=True)
t.start()
started.wait()
sys.stdout.write("main_native=%d\\nworker_native=%d\\nready\\n" % (ids["main"], ids["worker"]))
sys.stdout.flush()
outer()  # @module
`;

// The names CPython gives functions: qualified from 3.11 (co_qualname),
// plain before it.
function qualified(py, names) {
	const [major, minor] = py.version.split('.').map(Number);
	return major > 3 || minor >= 11 ? names : names.map((n) => n.split('.').pop());
}

for (const py of PYTHONS) {
	describe(`DAP client against the agent (${py.label} Python)`, { skip: py.skip }, () => {
		let target;
		let dc;

		before(async () => {
			target = await spawnTarget(py.exe, SCRIPT, { ready: 'ready' });
			dc = await target.client();
			// "ready" comes just before outer() is called: wait until the
			// main thread is in its loop, so every test sees the same stack.
			const want = target.line('# @inner');
			const deadline = Date.now() + 10000;
			for (;;) {
				const r = await request(dc, 'stackTrace', { threadId: target.pid, levels: 1 });
				if (r.success && r.body.stackFrames[0]?.line === want) break;
				if (Date.now() > deadline) throw new Error('main thread never reached inner(): ' + JSON.stringify(r));
				await sleep(20);
			}
		});

		after(async () => {
			if (target) await target.stop();
		});

		it('initialize: capabilities and the target pid', async () => {
			// What VS Code sends.
			const resp = await dc.initializeRequest({
				clientID: 'vscode', clientName: 'Visual Studio Code', adapterID: 'probing',
				pathFormat: 'path', linesStartAt1: true, columnsStartAt1: true,
				supportsVariableType: true, supportsVariablePaging: true,
				supportsRunInTerminalRequest: true, locale: 'en',
				supportsProgressReporting: true, supportsInvalidatedEvent: true,
				supportsMemoryReferences: true, supportsArgsCanBeInterpretedByShell: true,
				supportsStartDebuggingRequest: true,
			});
			assert.equal(resp.success, true);
			assert.equal(resp.command, 'initialize');
			const body = resp.body;
			assert.equal(body.supportsCancelRequest, true);
			assert.equal(body.probing.pid, target.pid);
			assert.equal(typeof body.probing.version, 'string');
			assert.ok(body.probing.python.startsWith(py.version + '.'), body.probing.python);
			assert.equal(fs.realpathSync(body.probing.executable), fs.realpathSync(py.exe));
		});

		it('threads: MainThread and worker, with kernel ids', async () => {
			const resp = await dc.threadsRequest();
			const threads = resp.body.threads;
			const byName = new Map(threads.map((t) => [t.name, t]));
			assert.ok(byName.has('MainThread'), JSON.stringify(threads));
			assert.ok(byName.has('worker'), JSON.stringify(threads));
			assert.equal(byName.get('MainThread').id, Number(target.printed('main_native')));
			assert.equal(byName.get('MainThread').id, target.pid, 'main thread kernel id is the pid');
			assert.equal(byName.get('worker').id, Number(target.printed('worker_native')));
			for (const t of threads) {
				assert.ok(Number.isInteger(t.id) && t.id > 0, JSON.stringify(t));
				assert.ok(fs.existsSync(`/proc/${target.pid}/task/${t.id}`),
					`thread id ${t.id} is a kernel task of ${target.pid}`);
			}
		});

		it('stackTrace: the main thread, innermost first, with paging', async () => {
			const want = [
				['inner', target.line('# @inner')],
				['outer', target.line('# @outer')],
				['<module>', target.line('# @module')],
			];
			const resp = await dc.stackTraceRequest({ threadId: target.pid });
			const { stackFrames, totalFrames } = resp.body;
			assert.equal(totalFrames, 3, JSON.stringify(stackFrames));
			assert.deepEqual(stackFrames.map((f) => [f.name, f.line]), want);
			for (const f of stackFrames) {
				assert.equal(f.source.path, target.script);
				assert.equal(f.source.name, 'target.py');
				assert.ok(Number.isFinite(f.id));
			}
			assert.equal(new Set(stackFrames.map((f) => f.id)).size, 3, 'frame ids are distinct');

			const page = await dc.stackTraceRequest({ threadId: target.pid, startFrame: 1, levels: 1 });
			assert.deepEqual(page.body.stackFrames.map((f) => [f.name, f.line]), [want[1]]);
			assert.equal(page.body.totalFrames, 3);
			assert.equal(page.body.stackFrames[0].id, stackFrames[1].id, 'same frame, same id');

			const rest = await dc.stackTraceRequest({ threadId: target.pid, startFrame: 2, levels: 10 });
			assert.deepEqual(rest.body.stackFrames.map((f) => [f.name, f.line]), [want[2]]);
			const past = await dc.stackTraceRequest({ threadId: target.pid, startFrame: 5 });
			assert.deepEqual(past.body.stackFrames, []);
			assert.equal(past.body.totalFrames, 3);

			// The worker thread, blocked in ev.wait() (threading's frames above it).
			const wid = Number(target.printed('worker_native'));
			const w = await dc.stackTraceRequest({ threadId: wid });
			const names = w.body.stackFrames.map((f) => f.name);
			const i = names.indexOf('worker_wait');
			assert.ok(i > 0, JSON.stringify(names));
			assert.equal(w.body.stackFrames[i].line, target.line('# @worker_wait'));
			// Qualified names from 3.11 (co_qualname); plain names before.
			assert.deepEqual(names.slice(0, i), qualified(py, ['Condition.wait', 'Event.wait']),
				'qualified names, innermost first');
			assert.match(w.body.stackFrames[0].source.path, /threading\.py$/);

			const bad = await request(dc, 'stackTrace', { threadId: 999999999 });
			failed(assert, bad, 'stackTrace of an unknown thread');
			assert.match(bad.message, /999999999/);
			failed(assert, await request(dc, 'stackTrace', {}), 'stackTrace without threadId');
			failed(assert, await request(dc, 'stackTrace', { threadId: 'main' }), 'stackTrace with a string threadId');
			failed(assert, await request(dc, 'stackTrace', { threadId: target.pid, startFrame: -1 }),
				'stackTrace with startFrame -1');
		});

		it('evaluate: value, printed output, exceptions', async () => {
			let r = await dc.evaluateRequest({ expression: 'counter + 1', context: 'repl' });
			assert.equal(r.body.result, '43');
			assert.equal(r.body.type, 'int');
			assert.equal(r.body.variablesReference, 0);
			assert.equal(r.body.output, '');

			r = await dc.evaluateRequest({ expression: 'import os\nprint("pid", os.getpid())\nx_dap = 7\nx_dap * 6', context: 'repl' });
			assert.equal(r.body.output, `pid ${target.pid}\n`);
			assert.equal(r.body.result, '42');
			r = await dc.evaluateRequest({ expression: 'x_dap', context: 'repl' });
			assert.equal(r.body.result, '7', 'runs in __main__, state kept');
			r = await dc.evaluateRequest({ expression: 't.name', context: 'repl' });
			assert.equal(r.body.result, "'worker'");

			const e = await request(dc, 'evaluate', { expression: 'print("before")\n1/0', context: 'repl' });
			failed(assert, e, 'evaluate raising');
			assert.match(e.message, /Traceback \(most recent call last\)/);
			assert.match(e.message, /ZeroDivisionError: division by zero/);
			assert.equal(e.body.output, 'before\n');
			assert.ok(e.body.error && typeof e.body.error.format === 'string', JSON.stringify(e.body));
			// The rejection DebugClient gives carries the traceback too.
			await assert.rejects(dc.evaluateRequest({ expression: 'undefined_name_xyz', context: 'repl' }),
				/NameError: name 'undefined_name_xyz' is not defined/);
			// SystemExit does not stop the target.
			failed(assert, await request(dc, 'evaluate', { expression: 'raise SystemExit(3)', context: 'repl' }), 'SystemExit');
			assert.equal(target.alive(), true);
			failed(assert, await request(dc, 'evaluate', { context: 'repl' }), 'evaluate without expression');
		});

		it('cancel interrupts a running evaluate', async () => {
			let seq;
			const started = Date.now();
			const pending = request(dc, 'evaluate', { expression: 'while True: pass', context: 'repl' },
				{ onSent: (s) => { seq = s; }, timeoutMs: 15000 });
			await sleep(500);
			const c = await dc.customRequest('cancel', { requestId: seq });
			assert.equal(c.success, true);
			const r = await pending;
			failed(assert, r, 'the cancelled evaluate');
			assert.match(r.message, /KeyboardInterrupt/);
			assert.equal(r.body.interrupted, true);
			assert.ok(Date.now() - started < 10000, 'interrupted promptly');
			// Still alive and answering, on this connection too.
			const after = await dc.evaluateRequest({ expression: 'counter', context: 'repl' });
			assert.equal(after.body.result, '42');
			assert.equal(target.alive(), true);
			// Cancelling something that is over is not an error.
			assert.equal((await dc.customRequest('cancel', { requestId: seq })).success, true);
		});

		it('evaluate: timeoutMs interrupts runaway code', async () => {
			const r = await request(dc, 'evaluate', { expression: 'while True: pass', context: 'repl', timeoutMs: 300 });
			failed(assert, r, 'evaluate past its timeout');
			assert.match(r.message, /KeyboardInterrupt/);
			assert.equal((await dc.evaluateRequest({ expression: '1+1' })).body.result, '2');
		});

		it('probing/backtrace with locals', async () => {
			const r = await dc.customRequest('probing/backtrace', { locals: true });
			const { threads, gil } = r.body;
			assert.equal(gil.acquired, true);
			const main = threads.find((t) => t.name === 'MainThread');
			const worker = threads.find((t) => t.name === 'worker');
			assert.ok(main && worker, JSON.stringify(threads.map((t) => t.name)));
			assert.equal(main.isMain, true);
			assert.equal(main.nativeId, target.pid);
			assert.equal(worker.isMain, false);
			assert.equal(worker.daemon, true);
			assert.equal(worker.nativeId, Number(target.printed('worker_native')));
			assert.deepEqual(main.frames.map((f) => [f.func, f.line]), [
				['inner', target.line('# @inner')],
				['outer', target.line('# @outer')],
				['<module>', target.line('# @module')],
			]);
			assert.equal(main.frames[0].file, target.script);
			const loc = new Map(main.frames[0].locals.map((v) => [v.name, v]));
			assert.deepEqual(loc.get('n'), { name: 'n', type: 'int', value: '3' });
			assert.deepEqual(loc.get('total'), { name: 'total', type: 'int', value: '6' });
			const wf = worker.frames.find((f) => f.func === 'worker_wait');
			assert.ok(wf.locals.some((v) => v.name === 'ev' && v.type === 'Event'), JSON.stringify(wf.locals));

			// Only one thread, by its Python ident; no locals by default.
			const only = await dc.customRequest('probing/backtrace', { threads: [main.threadId] });
			assert.deepEqual(only.body.threads.map((t) => t.name), ['MainThread']);
			assert.equal(only.body.threads[0].frames[0].locals, undefined);
			failed(assert, await request(dc, 'probing/backtrace', { threads: 'all' }), 'threads not an array');
		});

		it('probing/query: live backtrace table, bad SQL', async () => {
			const r = await dc.customRequest('probing/query',
				{ sql: 'SELECT func, lineno FROM python.backtrace WHERE depth = 0' });
			assert.deepEqual(r.body.columns.map((c) => c.name), ['func', 'lineno']);
			const rows = new Set(r.body.rows.map((row) => JSON.stringify(row)));
			assert.ok(rows.has(JSON.stringify(['inner', target.line('# @inner')])), JSON.stringify(r.body.rows));
			const wait = qualified(py, ['Condition.wait'])[0];
			assert.ok(r.body.rows.some((x) => x[0] === wait && Number.isInteger(x[1])), JSON.stringify(r.body.rows));
			assert.equal(r.body.rows.length, 2, 'one innermost frame per thread');
			assert.equal(r.body.truncated, false);
			assert.equal(typeof r.body.elapsedMs, 'number');

			const m = await dc.customRequest('probing/query', {
				sql: "SELECT thread_name, func, lineno FROM python.backtrace WHERE thread_name = 'MainThread' ORDER BY depth" });
			assert.deepEqual(m.body.rows, [
				['MainThread', 'inner', target.line('# @inner')],
				['MainThread', 'outer', target.line('# @outer')],
				['MainThread', '<module>', target.line('# @module')],
			]);

			const t = await dc.customRequest('probing/query', {
				sql: "SELECT native_id FROM python.threads WHERE name = 'worker'" });
			assert.deepEqual(t.body.rows, [[Number(target.printed('worker_native'))]]);

			const lim = await dc.customRequest('probing/query', {
				sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 100) SELECT x FROM c',
				maxRows: 5 });
			assert.deepEqual(lim.body.rows, [[1], [2], [3], [4], [5]]);
			assert.equal(lim.body.truncated, true);

			const bad = await request(dc, 'probing/query', { sql: 'SELEC 1' });
			failed(assert, bad, 'bad SQL');
			assert.match(bad.message, /near "SELEC": syntax error/);
			const nt = await request(dc, 'probing/query', { sql: 'SELECT * FROM no_such_table' });
			failed(assert, nt, 'unknown table');
			assert.match(nt.message, /no such table: no_such_table/);
			failed(assert, await request(dc, 'probing/query', {}), 'query without sql');
		});

		it('an unknown command fails, it is not ignored', async () => {
			const r = await request(dc, 'probing/nope', { x: 1 }, { timeoutMs: 5000 });
			failed(assert, r, 'probing/nope');
			assert.match(r.message, /probing\/nope/);
			assert.equal(r.command, 'probing/nope');
			await assert.rejects(dc.customRequest('probing/nope'), /probing\/nope/);
		});

		it('probing/config: set, read back, reject invalid', async () => {
			const get = async () => new Map((await dc.customRequest('probing/config', {}))
				.body.settings.map((s) => [s.name, s.value]));
			const before = await get();
			assert.equal(before.get('query.max_rows'), '10000');
			assert.equal(before.get('agent.pid'), String(target.pid));

			const set = await dc.customRequest('probing/config', { set: { 'query.max_rows': 3 } });
			assert.equal(set.body.settings.find((s) => s.name === 'query.max_rows').value, '3');
			assert.equal((await get()).get('query.max_rows'), '3');
			// ...and queries obey it.
			const q = await dc.customRequest('probing/query', {
				sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 10) SELECT x FROM c' });
			assert.deepEqual(q.body.rows, [[1], [2], [3]]);
			assert.equal(q.body.truncated, true);

			// Strings are accepted too.
			await dc.customRequest('probing/config', { set: { 'query.max_rows': '7' } });
			assert.equal((await get()).get('query.max_rows'), '7');

			for (const [bad, re] of [
				[{ 'query.max_rows': 0 }, /out of range/],
				[{ 'query.max_rows': 'lots' }, /not an integer/],
				[{ 'query.max_rows': [1] }, /string, number or boolean/],
				[{ 'no.such.setting': 1 }, /unknown setting/],
				[{ 'agent.pid': 1 }, /read-only/],
			]) {
				const r = await request(dc, 'probing/config', { set: bad });
				failed(assert, r, 'config ' + JSON.stringify(bad));
				assert.match(r.message, re);
			}
			// All or nothing: a valid value next to an invalid one is not applied.
			failed(assert, await request(dc, 'probing/config',
				{ set: { 'query.max_rows': 5, 'query.timeout_ms': -1 } }), 'mixed set');
			assert.equal((await get()).get('query.max_rows'), '7');

			await dc.customRequest('probing/config', { set: { 'query.max_rows': 10000 } });
			assert.equal((await get()).get('query.max_rows'), '10000');
		});

		it('the abstract unix socket @probing-<pid> speaks the same protocol', async (t) => {
			const listed = fs.readFileSync('/proc/net/unix', 'utf8').split('\n')
				.some((l) => l.trim().split(/\s+/).pop() === `@probing-${target.pid}`);
			assert.ok(listed, `@probing-${target.pid} is in /proc/net/unix`);
			let u;
			try {
				u = await target.unixClient();
			} catch (err) {
				if (err.code !== 'ECONNREFUSED') throw err;
				// Node (20.x at least) pads an abstract name to the whole
				// sun_path (108 bytes), so it cannot reach an exact-length
				// name such as the agent's; TCP is the way from Node.
				t.skip(`node ${process.version} cannot connect to abstract unix sockets ` +
					'bound with an exact-length name (it pads the name to 108 bytes)');
				return;
			}
			const init = await u.initializeRequest();
			assert.equal(init.body.probing.pid, target.pid);
			const st = await u.stackTraceRequest({ threadId: target.pid, levels: 1 });
			assert.deepEqual(st.body.stackFrames.map((f) => [f.name, f.line]), [['inner', target.line('# @inner')]]);
			failed(assert, await request(u, 'probing/nope'), 'unknown command over the unix socket');
			await u.stop();
		});

		it('two clients at once; one disconnecting leaves the other working', async () => {
			const a = await target.client();
			const b = await target.client();
			const [ia, ib] = await Promise.all([a.initializeRequest(), b.initializeRequest()]);
			assert.equal(ia.body.probing.pid, target.pid);
			assert.equal(ib.body.probing.pid, target.pid);

			// Interleaved requests on both, answered on the right connection.
			const [ea, eb, ta, tb] = await Promise.all([
				a.evaluateRequest({ expression: '"a" * 3', context: 'repl' }),
				b.evaluateRequest({ expression: '"b" * 2', context: 'repl' }),
				a.threadsRequest(),
				b.stackTraceRequest({ threadId: target.pid }),
			]);
			assert.equal(ea.body.result, "'aaa'");
			assert.equal(eb.body.result, "'bb'");
			assert.ok(ta.body.threads.some((t) => t.name === 'worker'));
			assert.equal(tb.body.stackFrames[0].name, 'inner');

			// A long evaluate on b is not cancelled by a's cancel of the same seq.
			let seqB;
			const slow = request(b, 'evaluate', { expression: 'import time as _t\n_t.sleep(1.0)\n"done"', context: 'repl' },
				{ onSent: (s) => { seqB = s; } });
			await sleep(100);
			await a.customRequest('cancel', { requestId: seqB });
			const sr = await slow;
			succeeded(assert, sr, 'b\'s evaluate, cancelled by another client\'s seq');
			assert.equal(sr.body.result, "'done'");

			const closed = new Promise((resolve) => a._socket.once('close', resolve));
			const d = await a.disconnectRequest();
			assert.equal(d.success, true);
			await withTimeout(closed, 5000, 'the agent closing the connection after disconnect');

			const eb2 = await b.evaluateRequest({ expression: 'counter', context: 'repl' });
			assert.equal(eb2.body.result, '42');
			const q = await b.customRequest('probing/query', { sql: 'SELECT count(*) FROM python.threads' });
			assert.ok(q.body.rows[0][0] >= 2);
			// The first client, never disconnected, still works too.
			assert.equal((await dc.threadsRequest()).success, true);
			assert.equal(target.alive(), true);
			await b.stop();
			assert.equal((await dc.evaluateRequest({ expression: '2**10' })).body.result, '1024');
		});
	});
}
