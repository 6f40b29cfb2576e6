'use strict';
// The debugger over DAP, as VS Code drives it: attach, breakpoints (lines,
// conditions, hit counts, logpoints, files not loaded yet, functions,
// exceptions), pause/continue/step, scopes/variables/setVariable, evaluate
// in frames, completions, exceptionInfo, and every way a session ends.
// One target per Python; each test attaches, and detaches at its end, so
// each also checks that the previous one left nothing behind.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { PYTHONS, spawnTarget, request, failed, succeeded, sleep } = require('../lib/target');
const { attach, topFrame, vars, locals } = require('../lib/debug');

const SCRIPT = `\
import os, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
state = {"i": 0, "imported": False, "raise": False, "died": False}


class Box:
    def __init__(self, v):
        self.v = v
        self.tag = "box"


def compute(i):
    total = i * 2  # @compute
    items = list(range(i % 5 + 1))
    box = Box(total)

    return total + len(items)  # @return


def maybe_raise(i):
    if state["raise"]:
        try:
            raise ValueError("bad value %d" % i)  # @raise
        except ValueError:
            pass


def spin(ev):
    n = 0
    while not ev.is_set():
        n += 1  # @spin
        time.sleep(0.005)


def die():
    secret = 41
    return secret // 0  # @die


ev = threading.Event()
threading.Thread(target=spin, args=(ev,), name="spinner", daemon=True).start()
big = list(range(100000))
table = {"k%d" % i: i for i in range(300)}
print("ready", flush=True)
while True:
    here = os.listdir(".")  # no exceptions raised here, unlike os.path.exists
    state["i"] += 1
    v = compute(state["i"])  # @call
    maybe_raise(state["i"])
    if "import_now" in here and not state["imported"]:
        import lazymod
        state["imported"] = True
    if state["imported"]:
        lazymod.f(state["i"])
    if "die_now" in here and not state["died"]:
        state["died"] = True
        threading.Thread(target=die, name="dier").start()
    if state["i"] % 100 == 0:
        print("tick", state["i"], flush=True)
    time.sleep(0.002)
`;

const LAZY = `\
def f(i):
    doubled = i * 2
    return doubled  # @lazy
`;

// Counts main-loop iterations seen by the target, read through evaluate on
// a fresh client (any session may evaluate).
async function iterations(target) {
	const dc = await target.client();
	const r = await dc.evaluateRequest({ expression: 'state["i"]', context: 'repl' });
	dc.stopAdapter();
	return Number(r.body.result);
}

// The loop advances: polled, with a deadline that is only a hang guard
// (how far it gets in a given time depends on the machine's load).
async function keepsRunning(target, ms = 30000) {
	const a = await iterations(target);
	const deadline = Date.now() + ms;
	let b = a;
	while (b <= a && Date.now() < deadline) {
		await sleep(50);
		b = await iterations(target);
	}
	assert.ok(b > a, `the target runs on (${a} -> ${b} iterations in ${ms} ms)`);
}

for (const py of PYTHONS) {
	describe(`debugger (${py.label} Python)`, { skip: py.skip }, () => {
		let target;
		let lazyPath;
		const clients = [];

		async function client() {
			const dc = await target.client();
			clients.push(dc);
			return dc;
		}

		before(async () => {
			target = await spawnTarget(py.exe, SCRIPT, { ready: 'ready' });
			lazyPath = path.join(target.dir, 'lazymod.py');
			fs.writeFileSync(lazyPath, LAZY);
		});

		after(async () => {
			if (target) await target.stop();
		});

		afterEach(async () => {
			// However a test ended, its sessions end (a dropped
			// connection resumes the target and removes everything).
			for (const dc of clients.splice(0)) {
				try { dc.stopAdapter(); } catch (e) { /* closed */ }
			}
			await sleep(50);
		});

		it('attach flow, capabilities, a breakpoint hit, threads and stack', async () => {
			const dc = await client();
			const line = target.line('# @compute');
			const { log, caps, breakpoints } = await attach(dc, { bps: { [target.script]: [line] } });
			for (const c of ['supportsConfigurationDoneRequest', 'supportsConditionalBreakpoints',
				'supportsHitConditionalBreakpoints', 'supportsLogPoints', 'supportsFunctionBreakpoints',
				'supportsSetVariable', 'supportsEvaluateForHovers', 'supportsCompletionsRequest',
				'supportsExceptionInfoRequest']) {
				assert.equal(caps[c], true, c);
			}
			assert.deepEqual(caps.exceptionBreakpointFilters.map((f) => f.filter), ['raised', 'uncaught']);
			assert.equal(caps.supportsStepBack, false);
			assert.equal(breakpoints[target.script][0].verified, true);
			assert.equal(breakpoints[target.script][0].line, line);

			const stop = await log.next('stopped');
			assert.equal(stop.body.reason, 'breakpoint');
			assert.equal(stop.body.threadId, target.pid);
			assert.equal(stop.body.allThreadsStopped, true);
			assert.deepEqual(stop.body.hitBreakpointIds, [breakpoints[target.script][0].id]);

			const st = await dc.stackTraceRequest({ threadId: target.pid });
			assert.deepEqual(st.body.stackFrames.map((f) => [f.name, f.line]),
				[['compute', line], ['<module>', target.line('# @call')]]);
			assert.equal(st.body.stackFrames[0].source.path, target.script);
			assert.equal(st.body.totalFrames, 2);
			const page = await dc.stackTraceRequest({ threadId: target.pid, startFrame: 1, levels: 1 });
			assert.equal(page.body.stackFrames[0].id, st.body.stackFrames[1].id, 'frame ids are stable while paused');

			// The other thread stops at its next line (all-stop).
			let threads;
			for (const deadline = Date.now() + 30000; Date.now() < deadline;) {
				threads = (await dc.threadsRequest()).body.threads;
				if (!threads.some((t) => / \((running|in C)\)$/.test(t.name))) break;
				await sleep(20);
			}
			const names = threads.map((t) => t.name).sort();
			assert.deepEqual(names, ['MainThread', 'spinner']);
			const spinner = threads.find((t) => t.name === 'spinner');
			const sf = await topFrame(dc, spinner.id);
			assert.equal(sf.name, 'spin');

			// Continue: the same breakpoint again, one iteration later.
			// (The spinner, if it was held in C when listed, said its
			// late stop with a `stopped` of its own.)
			const i1 = Number((await locals(dc, target.pid)).get('i').value);
			const again = log.next('stopped', (e) => e.body.reason === 'breakpoint');
			const c = await dc.continueRequest({ threadId: target.pid });
			assert.equal(c.body.allThreadsContinued, true);
			await again;
			const i2 = Number((await locals(dc, target.pid)).get('i').value);
			assert.equal(i2, i1 + 1);
			await dc.disconnectRequest({});
			await keepsRunning(target);
		});

		it('breakpoint lines: moved to code, unverified with reasons', async () => {
			const dc = await client();
			const blank = target.line('# @return') - 1;
			const { breakpoints } = await attach(dc, {
				bps: {
					[target.script]: [blank, 100000, { line: target.line('# @compute'), condition: 'i ==' }],
					[path.join(target.dir, 'missing.py')]: [3],
				},
			});
			const [moved, past, bad] = breakpoints[target.script];
			assert.equal(moved.verified, true);
			assert.equal(moved.line, target.line('# @return'), 'a blank line moves to the next line with code');
			assert.equal(past.verified, false);
			assert.match(past.message, /no code at or after line 100000/);
			assert.equal(bad.verified, false);
			assert.match(bad.message, /condition/);
			const missing = breakpoints[path.join(target.dir, 'missing.py')][0];
			assert.equal(missing.verified, false);
			assert.match(missing.message, /cannot read .*missing\.py/);
			failed(assert, await request(dc, 'setBreakpoints', { source: { path: 'relative.py' }, breakpoints: [] }),
				'a relative path');
			failed(assert, await request(dc, 'setBreakpoints', { source: {}, breakpoints: [] }), 'no path');
			failed(assert, await request(dc, 'setBreakpoints', { source: { path: target.script }, breakpoints: [{}] }),
				'a breakpoint without a line');
			await dc.disconnectRequest({});
		});

		it('conditions, hit counts and logpoints', async () => {
			const dc = await client();
			const line = target.line('# @compute');
			const ret = target.line('# @return');
			const logpoint = { line: ret, logMessage: 'total={total} items={len(items)} {{literal}}' };
			const { log } = await attach(dc, {
				bps: { [target.script]: [{ line, condition: 'i % 7 == 3' }, logpoint] },
			});
			const stop = await log.next('stopped');
			assert.equal(stop.body.reason, 'breakpoint');
			const i = Number((await locals(dc, target.pid)).get('i').value);
			assert.equal(i % 7, 3, 'stopped where the condition holds');

			// A hit count: the third hit from now (plain N means ==N).
			log.clear('stopped');
			await dc.setBreakpointsRequest({ source: { path: target.script }, breakpoints: [{ line, hitCondition: '3' }, logpoint] });
			const next = log.next('stopped');
			await dc.continueRequest({ threadId: target.pid });
			assert.equal((await next).body.reason, 'breakpoint');
			const j = Number((await locals(dc, target.pid)).get('i').value);
			assert.equal(j, i + 3, 'stopped on the third hit');
			// The logpoint ran in the iterations between, without stopping.
			const out = await log.next('output', (e) => e.body.category === 'console');
			assert.match(out.body.output, /^total=\d+ items=\d \{literal\}\n$/);
			assert.equal(out.body.source.path, target.script);
			assert.equal(out.body.line, ret);
			const bad = await dc.setBreakpointsRequest({ source: { path: target.script }, breakpoints: [{ line, hitCondition: 'often' }] });
			assert.equal(bad.body.breakpoints[0].verified, false);
			assert.match(bad.body.breakpoints[0].message, /hit condition/);
			// A condition that raises stops, and says why.
			log.clear();
			await dc.setBreakpointsRequest({ source: { path: target.script }, breakpoints: [{ line, condition: 'undefined_xyz > 1' }] });
			const raised = log.next('stopped');
			await dc.continueRequest({ threadId: target.pid });
			assert.deepEqual([(await raised).body.reason, (await raised).body.threadId], ['breakpoint', target.pid]);
			const why = await log.next('output', (e) => e.body.category === 'stderr');
			assert.match(why.body.output, /NameError/);
			await dc.disconnectRequest({});
		});

		it('a breakpoint in a module not imported yet takes effect when it runs', async () => {
			const dc = await client();
			const line = LAZY.split('\n').findIndex((l) => l.includes('# @lazy')) + 1;
			const { log, breakpoints } = await attach(dc, { bps: { [lazyPath]: [line] } });
			const bp = breakpoints[lazyPath][0];
			assert.equal(bp.verified, false);
			assert.match(bp.message, /not loaded yet/);
			fs.writeFileSync(path.join(target.dir, 'import_now'), '');
			const changed = await log.next('breakpoint');
			assert.equal(changed.body.reason, 'changed');
			assert.equal(changed.body.breakpoint.id, bp.id);
			assert.equal(changed.body.breakpoint.verified, true);
			const stop = await log.next('stopped');
			assert.equal(stop.body.reason, 'breakpoint');
			const f = await topFrame(dc, target.pid);
			assert.deepEqual([f.name, f.source.path, f.line], ['f', lazyPath, line]);
			// Now loaded: a new session sees it verified at once.
			await dc.disconnectRequest({});
			const dc2 = await client();
			const again = await attach(dc2, { bps: { [lazyPath]: [line] } });
			assert.equal(again.breakpoints[lazyPath][0].verified, true);
			await again.log.next('stopped');
			await dc2.disconnectRequest({});
		});

		it('function breakpoints', async () => {
			const dc = await client();
			const { log } = await attach(dc, { functions: ['compute'] });
			const stop = await log.next('stopped');
			assert.equal(stop.body.reason, 'function breakpoint');
			const f = await topFrame(dc, target.pid);
			assert.equal(f.name, 'compute');
			const r = await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'not a name()' }] });
			assert.equal(r.body.breakpoints[0].verified, false);
			await dc.disconnectRequest({});
		});

		it('stepping: next, stepIn, stepOut', async () => {
			const dc = await client();
			const call = target.line('# @call');
			const { log } = await attach(dc, { bps: { [target.script]: [call] } });
			await log.next('stopped');
			const step = async (req, want) => {
				const s = log.next('stopped');
				await dc[req]({ threadId: target.pid });
				const ev = await s;
				assert.equal(ev.body.reason, 'step');
				const f = await topFrame(dc, target.pid);
				assert.deepEqual([f.name, f.line], want, req);
			};
			// Breakpoints out of the way: only the steps stop.
			await dc.setBreakpointsRequest({ source: { path: target.script }, breakpoints: [] });
			await step('stepInRequest', ['compute', target.line('# @compute')]);
			await step('nextRequest', ['compute', target.line('# @compute') + 1]);
			await step('stepOutRequest', ['<module>', call + 1]);
			await step('nextRequest', ['<module>', call + 2]);
			failed(assert, await request(dc, 'next', { threadId: 999999999 }), 'next on a thread that is not paused');
			await dc.disconnectRequest({});
			await keepsRunning(target);
		});

		it('pause stops every thread; continue resumes them', async () => {
			const dc = await client();
			const { log } = await attach(dc);
			await sleep(100);
			assert.equal(log.seen('stopped').length, 0, 'nothing stops without a reason');
			await dc.pauseRequest({ threadId: target.pid });
			const stop = await log.next('stopped');
			assert.equal(stop.body.reason, 'pause');
			assert.equal(stop.body.allThreadsStopped, true);
			const a = Number((await dc.evaluateRequest({ expression: 'state["i"]', context: 'repl' })).body.result);
			await sleep(200);
			const b = Number((await dc.evaluateRequest({ expression: 'state["i"]', context: 'repl' })).body.result);
			assert.equal(a, b, 'paused: the loop does not advance');
			await dc.continueRequest({ threadId: target.pid });
			await keepsRunning(target);
			await dc.disconnectRequest({});
		});

		it('scopes, variables with paging, setVariable, evaluate in a frame, completions', async () => {
			const dc = await client();
			const { log } = await attach(dc, { bps: { [target.script]: [target.line('# @return')] } });
			await log.next('stopped');
			const f = await topFrame(dc, target.pid);
			const sc = (await dc.scopesRequest({ frameId: f.id })).body.scopes;
			assert.deepEqual(sc.map((s) => s.name), ['Locals', 'Globals']);
			const loc = await vars(dc, sc[0].variablesReference);
			assert.deepEqual([...loc.keys()], ['i', 'total', 'items', 'box']);
			assert.equal(loc.get('total').type, 'int');
			assert.equal(loc.get('total').evaluateName, 'total');
			const items = loc.get('items');
			assert.ok(items.variablesReference > 0 && items.indexedVariables >= 1, JSON.stringify(items));
			const box = await vars(dc, loc.get('box').variablesReference);
			assert.equal(box.get('tag').value, "'box'");
			assert.equal(box.get('tag').evaluateName, 'box.tag');

			const glob = await vars(dc, sc[1].variablesReference);
			const big = glob.get('big');
			assert.equal(big.indexedVariables, 100000);
			const pageOf = await vars(dc, big.variablesReference, { filter: 'indexed', start: 50000, count: 3 });
			assert.deepEqual([...pageOf.entries()].map(([k, v]) => [k, v.value, v.evaluateName]),
				[['50000', '50000', 'big[50000]'], ['50001', '50001', 'big[50001]'], ['50002', '50002', 'big[50002]']]);
			const table = await vars(dc, glob.get('table').variablesReference, { filter: 'indexed', start: 10, count: 2 });
			assert.deepEqual([...table.keys()], ["'k10'", "'k11'"]);
			assert.equal(table.get("'k10'").evaluateName, "table['k10']");
			assert.equal(glob.has('__builtins__'), false, 'dunder names hidden in globals');

			// setVariable writes into the frame.
			const set = await dc.setVariableRequest({ variablesReference: sc[0].variablesReference, name: 'total', value: '1000 + 1' });
			assert.equal(set.body.value, '1001');
			let r = await dc.evaluateRequest({ expression: 'total', frameId: f.id, context: 'watch' });
			assert.equal(r.body.result, '1001');
			await dc.setVariableRequest({ variablesReference: loc.get('box').variablesReference, name: 'tag', value: '"changed"' });
			r = await dc.evaluateRequest({ expression: 'box.tag', frameId: f.id, context: 'hover' });
			assert.equal(r.body.result, "'changed'");
			failed(assert, await request(dc, 'setVariable', { variablesReference: sc[0].variablesReference, name: 'total', value: '1/0' }),
				'a value that raises');

			// evaluate: statements in the console change the frame.
			r = await dc.evaluateRequest({ expression: 'total = 7\ntotal * 2', frameId: f.id, context: 'repl' });
			assert.equal(r.body.result, '14');
			assert.equal((await locals(dc, target.pid)).get('total').value, '7');
			failed(assert, await request(dc, 'evaluate', { expression: 'x = 1', frameId: f.id, context: 'watch' }),
				'a statement as a watch');
			r = await dc.evaluateRequest({ expression: 'items', frameId: f.id, context: 'watch' });
			assert.ok(r.body.variablesReference > 0, 'a container result can be expanded');
			const stale = await request(dc, 'evaluate', { expression: '1', frameId: 12345 });
			failed(assert, stale, 'a frame id that is not a paused frame');

			// Completions in the frame's namespace.
			const comp = await dc.completionsRequest({ text: 'ite', column: 4, frameId: f.id });
			assert.ok(comp.body.targets.some((t) => t.label === 'items'), JSON.stringify(comp.body.targets));
			const dot = await dc.completionsRequest({ text: 'x = items.app', column: 14, frameId: f.id });
			assert.deepEqual(dot.body.targets.map((t) => [t.label, t.text, t.start, t.length]),
				[['append', 'items.append', 4, 9]]);

			// After a resume, old references are refused.
			const s2 = log.next('stopped');
			await dc.continueRequest({ threadId: target.pid });
			await s2;
			failed(assert, await request(dc, 'variables', { variablesReference: sc[0].variablesReference }), 'a stale reference');
			await dc.disconnectRequest({});
		});

		it('exception breakpoints: raised, uncaught, exceptionInfo', async () => {
			const dc = await client();
			const { log } = await attach(dc, { exceptions: ['raised'] });
			const ev = await dc.evaluateRequest({ expression: 'state.update({"raise": True})', context: 'repl' });
			succeeded(assert, ev, 'turn raising on');
			const stop = await log.next('stopped');
			assert.equal(stop.body.reason, 'exception');
			assert.match(stop.body.text, /ValueError: bad value/);
			const f = await topFrame(dc, target.pid);
			assert.deepEqual([f.name, f.line], ['maybe_raise', target.line('# @raise')]);
			const info = await dc.exceptionInfoRequest({ threadId: target.pid });
			assert.equal(info.body.exceptionId, 'ValueError');
			assert.equal(info.body.breakMode, 'always');
			assert.match(info.body.details.stackTrace, /raise ValueError/);
			await dc.evaluateRequest({ expression: 'state.update({"raise": False})', context: 'repl' });

			// Uncaught: a thread that dies stops in its frames.
			await dc.setExceptionBreakpointsRequest({ filters: ['uncaught'] });
			log.clear();
			await dc.continueRequest({ threadId: target.pid });
			fs.writeFileSync(path.join(target.dir, 'die_now'), '');
			const died = await log.next('stopped', (e) => e.body.reason === 'exception');
			assert.notEqual(died.body.threadId, target.pid);
			const df = await topFrame(dc, died.body.threadId);
			assert.deepEqual([df.name, df.line], ['die', target.line('# @die')]);
			const dl = await locals(dc, died.body.threadId);
			assert.equal(dl.get('secret').value, '41');
			const di = await dc.exceptionInfoRequest({ threadId: died.body.threadId });
			assert.equal(di.body.exceptionId, 'ZeroDivisionError');
			assert.equal(di.body.breakMode, 'unhandled');
			failed(assert, await request(dc, 'setExceptionBreakpoints', { filters: ['sometimes'] }), 'an unknown filter');
			await dc.disconnectRequest({});
			await target.waitLine('ZeroDivisionError', 30000);
		});

		it('one debugger at a time; other sessions keep working', async () => {
			const dc = await client();
			const { log } = await attach(dc, { bps: { [target.script]: [target.line('# @compute')] } });
			await log.next('stopped');
			const other = await client();
			await other.initializeRequest({ adapterID: 'probing' });
			const r = await request(other, 'attach', {});
			failed(assert, r, 'a second attach');
			assert.match(r.message, /another debugger is attached/);
			failed(assert, await request(other, 'continue', { threadId: target.pid }), 'continue from a non-debugger');
			failed(assert, await request(other, 'setBreakpoints', { source: { path: target.script }, breakpoints: [] }),
				'setBreakpoints from a non-debugger');
			// Looking is allowed.
			const bt = await other.customRequest('probing/backtrace', {});
			assert.ok(bt.body.threads.length >= 2);
			const ev = await other.evaluateRequest({ expression: 'state["i"] > 0', context: 'repl' });
			assert.equal(ev.body.result, 'True');
			const st = await other.stackTraceRequest({ threadId: target.pid });
			assert.equal(st.body.stackFrames[0].name, 'compute');
			other.stopAdapter();
			await dc.disconnectRequest({});
		});

		it('a dropped connection while paused resumes the target and removes everything', async () => {
			const dc = await client();
			const { log } = await attach(dc, { bps: { [target.script]: [target.line('# @compute')] }, exceptions: ['raised'] });
			await log.next('stopped');
			dc._socket.destroy();
			await keepsRunning(target);
			// Nothing left: a new session without breakpoints sees no stop.
			const dc2 = await client();
			const s2 = await attach(dc2);
			await sleep(300);
			assert.equal(s2.log.seen('stopped').length, 0, JSON.stringify(s2.log.seen('stopped')));
			const tr = await dc2.evaluateRequest({ expression: '[sys.gettrace(), threading.current_thread().name]', context: 'repl' });
			assert.match(tr.body.result, /^\[None, /);
			await dc2.disconnectRequest({});
		});

		it('redirectOutput: the target\'s stdout as output events, removed on detach', async () => {
			// Is sys.stdout's write ours?  (Asked from another session; the
			// evaluation's own sys.stdout is not the target's.)
			const wrapped = async () => {
				const other = await target.client();
				const r = await other.evaluateRequest({ expression: "'write' in vars(sys.__stdout__)", context: 'repl' });
				other.stopAdapter();
				return r.body.result;
			};
			const dc = await client();
			const { log } = await attach(dc, { args: { redirectOutput: true } });
			const out = await log.next('output', (e) => e.body.category === 'stdout' && /tick \d+/.test(e.body.output));
			assert.match(out.body.output, /tick \d+\n/);
			assert.equal(await wrapped(), 'True');
			await dc.disconnectRequest({});
			for (const deadline = Date.now() + 30000; Date.now() < deadline;) {
				if (await wrapped() === 'False') break;
				await sleep(50);
			}
			assert.equal(await wrapped(), 'False', 'no wrapper left after the detach');
			// The target's own output goes on.
			const n = (target.out.match(/tick/g) || []).length;
			await target.waitFor(() => (target.out.match(/tick/g) || []).length > n, 'more ticks');
		});

		it('bad requests get error replies', async () => {
			const dc = await client();
			await attach(dc);
			failed(assert, await request(dc, 'scopes', {}), 'scopes without frameId');
			failed(assert, await request(dc, 'scopes', { frameId: 5 }), 'scopes of a running frame');
			failed(assert, await request(dc, 'variables', { variablesReference: 0 }), 'variables of 0');
			failed(assert, await request(dc, 'variables', { variablesReference: 'x' }), 'variables of a string');
			failed(assert, await request(dc, 'setFunctionBreakpoints', {}), 'no breakpoints');
			failed(assert, await request(dc, 'exceptionInfo', { threadId: target.pid }), 'exceptionInfo while running');
			failed(assert, await request(dc, 'stepIn', {}), 'stepIn without a thread');
			failed(assert, await request(dc, 'attach', { redirectOutput: 'yes' }), 'redirectOutput not a boolean');
			succeeded(assert, await request(dc, 'continue', {}), 'continue while running');
			await dc.disconnectRequest({});
			await keepsRunning(target);
		});
	});
}

// Tensors, modules and arrays in the variables view (torch is on the
// system Python only).
const TORCH_SCRIPT = `\
import time
import numpy as np
import torch

torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def step(model, x):
    y = model(x)  # @step
    return y


model = Net()
x = torch.randn(8, 64)
x[0, 0] = float("nan")
x[1, 1] = float("inf")
arr = np.arange(1000, dtype=np.float32).reshape(100, 10)
w = torch.ones(3, requires_grad=True)
loss = (w * 2).sum()          # 0-d, not a leaf: .grad would warn
lr = torch.tensor(0.25)
print("ready", flush=True)
while True:
    step(model, x)
    time.sleep(0.01)
`;

describe('debugger: tensors, modules, arrays (system Python, torch)', () => {
	let target;

	before(async () => {
		target = await spawnTarget(PYTHONS[0].exe, TORCH_SCRIPT, { ready: 'ready' });
	});

	after(async () => {
		if (target) await target.stop();
	});

	it('a tensor, its statistics and values; a module; an array', async () => {
		const dc = await target.client();
		const { log } = await attach(dc, { bps: { [target.script]: [target.line('# @step')] } });
		await log.next('stopped');
		const loc = await locals(dc, target.pid);
		const x = loc.get('x');
		assert.equal(x.value, 'Tensor(shape=[8, 64], dtype=float32, device=cpu)');
		assert.equal(x.type, 'Tensor');
		const xs = await vars(dc, x.variablesReference);
		assert.deepEqual([...xs.keys()], ['shape', 'dtype', 'device', 'requires_grad', 'grad', 'is_leaf',
			'numel', '[statistics]', '[values]']);
		assert.equal(xs.get('shape').value, '[8, 64]');
		assert.equal(xs.get('dtype').value, 'float32');
		assert.equal(xs.get('device').value, 'cpu');
		assert.equal(xs.get('requires_grad').value, 'False');
		assert.equal(xs.get('grad').value, 'None');
		assert.equal(xs.get('numel').value, '512');
		assert.equal(xs.get('shape').evaluateName, 'x.shape');
		const stats = await vars(dc, xs.get('[statistics]').variablesReference);
		assert.equal(stats.get('count').value, "'512'");
		assert.equal(stats.get('nan').value, '1');
		assert.equal(stats.get('inf').value, '1');
		for (const k of ['min', 'max', 'mean', 'std']) assert.ok(stats.has(k), k);
		const values = xs.get('[values]');
		assert.equal(values.indexedVariables, 8);
		const rows = await vars(dc, values.variablesReference, { filter: 'indexed', start: 2, count: 2 });
		assert.deepEqual([...rows.keys()], ['2', '3']);
		assert.equal(rows.get('2').value, 'Tensor(shape=[64], dtype=float32, device=cpu)');
		assert.equal(rows.get('2').evaluateName, 'x[2]');
		const row = await vars(dc, rows.get('2').variablesReference);
		const cells = await vars(dc, row.get('[values]').variablesReference, { filter: 'indexed', start: 0, count: 3 });
		assert.equal(cells.size, 3);
		assert.match(cells.get('0').value, /^-?\d+\.\d+/);

		const model = loc.get('model');
		assert.equal(model.value, 'Net(parameters=2,344, size=9.2 KiB)');
		const ms = await vars(dc, model.variablesReference);
		assert.deepEqual([...ms.keys()], ['[parameters]', 'training', 'fc1', 'fc2']);
		assert.equal(ms.get('[parameters]').value, '2,344 (9.2 KiB)');
		const fc1 = await vars(dc, ms.get('fc1').variablesReference);
		assert.equal(fc1.get('weight').value, 'Parameter(shape=[32, 64], dtype=float32, device=cpu)');
		assert.equal(fc1.get('weight').evaluateName, 'model.fc1.weight');

		const f = await topFrame(dc, target.pid);
		const sc = (await dc.scopesRequest({ frameId: f.id })).body.scopes;
		const glob = await vars(dc, sc[1].variablesReference);
		const arr = glob.get('arr');
		assert.equal(arr.value, 'ndarray(shape=[100, 10], dtype=float32)');
		const as = await vars(dc, arr.variablesReference);
		const ast = await vars(dc, as.get('[statistics]').variablesReference);
		assert.equal(ast.get('min').value, '0.0');
		assert.equal(ast.get('max').value, '999.0');
		assert.equal(as.get('[values]').indexedVariables, 100);

		// A 0-d tensor shows its value; a non-leaf one its grad_fn, and
		// nothing reads its .grad (torch would warn into the program's
		// stderr).
		const lr = glob.get('lr');
		assert.equal(lr.value, 'Tensor(shape=[], dtype=float32, device=cpu, value=0.25)');
		const lrs = await vars(dc, lr.variablesReference);
		assert.equal(lrs.get('value').value, '0.25');
		assert.equal(lrs.get('value').evaluateName, 'lr.item()');
		assert.ok(!lrs.has('[values]'));
		const loss = glob.get('loss');
		assert.equal(loss.value, 'Tensor(shape=[], dtype=float32, device=cpu, value=6.0)');
		const ls = await vars(dc, loss.variablesReference);
		assert.ok(!ls.has('grad'), [...ls.keys()].join());
		assert.equal(ls.get('grad_fn').value, 'SumBackward0');
		assert.equal(ls.get('is_leaf').value, 'False');
		const wv = await vars(dc, glob.get('w').variablesReference);
		assert.equal(wv.get('grad').value, 'None');
		assert.ok(!/UserWarning/.test(target.out), target.out);

		// A watch on a tensor can be expanded the same way.
		const w = await dc.evaluateRequest({ expression: 'x * 2', frameId: f.id, context: 'watch' });
		assert.equal(w.body.result, 'Tensor(shape=[8, 64], dtype=float32, device=cpu)');
		assert.ok(w.body.variablesReference > 0);
		await dc.disconnectRequest({});
		dc.stopAdapter();
	});
});

// The main thread ending on an exception, and thread events.
const ENDING_SCRIPT = `\
import os, time


def fail(n):
    ratio = n / 0  # @fail
    return ratio


print("ready", flush=True)
while "fail_now" not in os.listdir("."):
    time.sleep(0.01)
fail(3)
`;

for (const py of PYTHONS) {
	describe(`debugger: uncaught in the main thread, thread events (${py.label} Python)`, { skip: py.skip }, () => {
		let target;

		before(async () => {
			target = await spawnTarget(py.exe, ENDING_SCRIPT, { ready: 'ready' });
		});

		after(async () => {
			if (target) await target.stop();
		});

		it('thread events; the program stops before it ends on an exception, then ends', async () => {
			const dc = await target.client();
			const { log } = await attach(dc, { exceptions: ['uncaught'] });
			// Threads are polled (twice a second): the new one lives until
			// the test has seen it start, however slow the machine is.
			await dc.evaluateRequest({
				expression: 'import threading; gate = threading.Event(); threading.Thread(target=gate.wait, name="napper").start()',
				context: 'repl',
			});
			const started = await log.next('thread', (e) => e.body.reason === 'started');
			await dc.evaluateRequest({ expression: 'gate.set()', context: 'repl' });
			const exited = await log.next('thread', (e) => e.body.reason === 'exited');
			assert.equal(exited.body.threadId, started.body.threadId);

			fs.writeFileSync(path.join(target.dir, 'fail_now'), '');
			const stop = await log.next('stopped');
			assert.equal(stop.body.reason, 'exception');
			assert.equal(stop.body.threadId, target.pid);
			const st = await dc.stackTraceRequest({ threadId: target.pid });
			assert.deepEqual(st.body.stackFrames.map((f) => [f.name, f.line]),
				[['fail', target.line('# @fail')], ['<module>', target.line('fail(3)')]]);
			assert.equal((await locals(dc, target.pid)).get('n').value, '3');
			const info = await dc.exceptionInfoRequest({ threadId: target.pid });
			assert.deepEqual([info.body.exceptionId, info.body.breakMode], ['ZeroDivisionError', 'unhandled']);
			assert.equal(target.alive(), true, 'held until the debugger lets go');
			await dc.continueRequest({ threadId: target.pid });
			await target.exitPromise;
			assert.match(target.out, /ZeroDivisionError: division by zero/);
			assert.equal(target.exited.code, 1);
			dc.stopAdapter();
		});
	});
}

// Threads late for an all-stop: when a continue comes while another thread
// is between seeing the pause wanted and stopping, that thread must go on
// instead of starting a new stop of its own (a `stopped` with reason
// "pause" nobody asked for).  Busy threads on short sleeps make the window
// wide; every stop after a continue must be the breakpoint's.
const LATE_SCRIPT = `\
import threading, time


def busy():
    n = 0
    while True:
        n += 1
        time.sleep(0.0002)


def hit(i):
    return i + 1  # @hit


for k in range(6):
    threading.Thread(target=busy, name="busy%d" % k, daemon=True).start()
print("ready", flush=True)
i = 0
while True:
    i = hit(i)
    time.sleep(0.001)
`;

for (const py of PYTHONS) {
	describe(`debugger: a continue cancels the stops it overtook (${py.label} Python)`, { skip: py.skip }, () => {
		let target;

		before(async () => {
			target = await spawnTarget(py.exe, LATE_SCRIPT, { ready: 'ready' });
		});

		after(async () => {
			if (target) await target.stop();
		});

		it('every stop after a continue is the breakpoint, in the main thread', async () => {
			const dc = await target.client();
			const line = target.line('# @hit');
			const { log } = await attach(dc, { bps: { [target.script]: [line] } });
			let stop = await log.next('stopped');
			for (let k = 0; k < 60; k++) {
				assert.deepEqual([stop.body.reason, stop.body.threadId], ['breakpoint', target.pid],
					`stop ${k}: ${JSON.stringify(stop.body)}`);
				const next = log.next('stopped');
				await dc.continueRequest({ threadId: target.pid });
				stop = await next;
			}
			await dc.disconnectRequest({});
			dc.stopAdapter();
		});
	});
}

// A pause when every thread is in C: the main thread and a worker wait on
// an Event (a lock, in C) as a rank waits in a collective for a rank at a
// breakpoint.  No thread reaches a Python line, yet the pause is a stop
// (within a second or so): each thread held where it is, its stack and
// variables readable, evaluate running in its frames.  The event set from
// the console lets both come back to Python, where each stops for good
// (and says so); continue lets the program go on.
const HELD_SCRIPT = `\
import threading, time, weakref

go = threading.Event()
state = {"i": 0}
refs = []


class Payload:
    pass


def waiter():
    mine = "waiter's own"
    payload = Payload()
    refs.append(weakref.ref(payload))
    go.wait()  # @wait
    return mine


def main():
    count = 41
    t = threading.Thread(target=waiter, name="waiter")
    t.start()
    print("ready", flush=True)
    go.wait()  # @main
    count += 1
    t.join()
    while True:
        state["i"] += 1
        time.sleep(0.002)


main()
`;

for (const py of PYTHONS) {
	describe(`debugger: a pause with every thread in C (${py.label} Python)`, { skip: py.skip }, () => {
		let target;

		before(async () => {
			target = await spawnTarget(py.exe, HELD_SCRIPT, { ready: 'ready' });
		});

		after(async () => {
			if (target) await target.stop();
		});

		it('held threads: the stop, their stacks and variables; back in Python they stop; continue', async () => {
			const dc = await target.client();
			const { log } = await attach(dc);
			await dc.pauseRequest({ threadId: target.pid });
			const stop = await log.next('stopped', () => true, 10000);
			assert.deepEqual([stop.body.reason, stop.body.threadId, stop.body.allThreadsStopped,
				stop.body.description], ['pause', target.pid, true, 'Paused in C']);
			const names = (await dc.threadsRequest()).body.threads.map((t) => t.name).sort();
			assert.deepEqual(names, ['MainThread (in C)', 'waiter (in C)']);

			// The main thread, held in go.wait(): its frames where it waits.
			const st = (await dc.stackTraceRequest({ threadId: target.pid })).body.stackFrames;
			const main = st.find((f) => f.name === 'main');
			assert.equal(main.line, target.line('# @main'), JSON.stringify(st));
			const sc = (await dc.scopesRequest({ frameId: main.id })).body.scopes;
			assert.equal((await vars(dc, sc[0].variablesReference)).get('count').value, '41');
			const r = await dc.evaluateRequest({ expression: 'count + 1', frameId: main.id, context: 'watch' });
			assert.equal(r.body.result, '42');

			// The worker, held too.
			const waiter = (await dc.threadsRequest()).body.threads.find((t) => t.name.startsWith('waiter'));
			const wst = (await dc.stackTraceRequest({ threadId: waiter.id })).body.stackFrames;
			const wf = wst.find((f) => f.name === 'waiter');
			assert.equal(wf.line, target.line('# @wait'), JSON.stringify(wst));
			const m = await dc.evaluateRequest({ expression: 'mine', frameId: wf.id, context: 'watch' });
			assert.equal(m.body.result, "\"waiter's own\"");
			// No step from a call in C: it says why.
			await assert.rejects(dc.nextRequest({ threadId: waiter.id }), /is in C, held where it waits/);

			// Both back in Python: each stops at its next line, and says so.
			const late = [log.next('stopped', (e) => e.body.threadId === target.pid, 10000),
				log.next('stopped', (e) => e.body.threadId === waiter.id, 10000)];
			await dc.evaluateRequest({ expression: 'go.set()', frameId: main.id, context: 'repl' });
			for (const e of await Promise.all(late)) assert.equal(e.body.reason, 'pause');
			const now = (await dc.threadsRequest()).body.threads.map((t) => t.name).sort();
			assert.deepEqual(now, ['MainThread', 'waiter']);

			await dc.continueRequest({ threadId: target.pid });
			const iter = async () => Number((await dc.evaluateRequest({ expression: 'state["i"]', context: 'repl' })).body.result);
			const a = await iter();
			for (const deadline = Date.now() + 30000; Date.now() < deadline && await iter() <= a;) await sleep(50);
			assert.ok(await iter() > a, 'the program runs on after continue');
			// The frames the stop held are let go of: the waiter's local
			// goes with its frame.
			const gone = async () => (await dc.evaluateRequest({ expression: 'refs[0]() is None', context: 'repl' })).body.result;
			for (const deadline = Date.now() + 10000; Date.now() < deadline && await gone() !== 'True';) await sleep(50);
			assert.equal(await gone(), 'True', 'the held frames let go of after continue');
			await dc.disconnectRequest({});
			dc.stopAdapter();
		});
	});
}
