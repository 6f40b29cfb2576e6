'use strict';
// asyncio's tasks in the Call Stack (docs/asyncio.md): with attach's
// asyncioTasks (the extension's probing.asyncioTasks setting) a stop lists,
// after the thread running an event loop, one entry per task of that loop;
// stackTrace on an entry gives the task's coroutine frames, whose scopes,
// variables and evaluate work like a paused thread's.  Without the
// setting, threads are threads.  On every Python of the build.

const { describe, it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { PYTHONS, spawnTarget, request, failed } = require('../lib/target');
const { attach, vars } = require('../lib/debug');

const SCRIPT = `\
import asyncio


async def worker(queue, wid):
    seen = 0
    while True:
        job = await queue.get()
        seen += 1


async def ticker(queue):
    n = 0
    while True:
        n += 1
        await queue.put(n)
        await asyncio.sleep(0.02)  # @tick


async def main():
    q = asyncio.Queue()
    ws = [asyncio.create_task(worker(q, i), name="worker-%d" % i) for i in range(2)]
    t = asyncio.create_task(ticker(q), name="ticker")
    print("ready", flush=True)
    await asyncio.gather(t, *ws)


asyncio.run(main())
`;

for (const py of PYTHONS) {
	describe(`asyncio tasks in the call stack (${py.label} Python)`, { skip: py.skip }, () => {
		let target;
		const clients = [];

		async function client() {
			const dc = await target.client();
			clients.push(dc);
			return dc;
		}

		before(async () => {
			target = await spawnTarget(py.exe, SCRIPT, { ready: 'ready' });
		});

		after(async () => {
			if (target) await target.stop();
		});

		afterEach(async () => {
			for (const dc of clients.splice(0)) {
				try { dc.stopAdapter(); } catch (e) { /* closed */ }
			}
		});

		async function stopAtTick(dc, args) {
			const line = target.line('# @tick');
			const { log } = await attach(dc, { bps: { [target.script]: [line] }, args });
			const stop = await log.next('stopped');
			return { log, stop };
		}

		it('lists each task after its loop thread, with its frames and variables', async () => {
			const dc = await client();
			const { log, stop } = await stopAtTick(dc, { asyncioTasks: true });
			const threads = (await dc.threadsRequest()).body.threads;
			const main = threads.findIndex((t) => t.id === stop.body.threadId);
			assert.ok(main >= 0, JSON.stringify(threads));
			const entries = threads.slice(main + 1).filter((t) => t.name.startsWith('task '));
			const names = entries.map((t) => t.name);
			assert.ok(names.some((n) => /^task worker-0 \(worker\): awaits asyncio Queue\.get$/.test(n)), names.join('\n'));
			assert.ok(names.some((n) => /^task ticker \(ticker\)/.test(n)), names.join('\n'));
			assert.ok(names.some((n) => /^task Task-\d+ \(main\): awaits gather of 3 /.test(n)), names.join('\n'));
			assert.equal(entries.length, 4, names.join('\n'));
			// The entries follow their loop's thread, before any other.
			assert.ok(threads.slice(main + 1, main + 1 + entries.length).every((t) => t.name.startsWith('task ')));

			const w0 = entries.find((t) => t.name.startsWith('task worker-0 '));
			const st = await dc.stackTraceRequest({ threadId: w0.id });
			const frames = st.body.stackFrames;
			const own = frames[frames.length - 1];
			assert.equal(own.name, 'worker');
			assert.equal(own.source.path, target.script);
			assert.ok(frames.length >= 2 && /queues\.py$/.test(frames[0].source.path), JSON.stringify(frames));
			const sc = await dc.scopesRequest({ frameId: own.id });
			const locals = await vars(dc, sc.body.scopes[0].variablesReference);
			assert.equal(locals.get('wid').value, '0');
			assert.ok(locals.has('queue') && locals.has('seen'), [...locals.keys()].join(','));
			const ev = await dc.evaluateRequest({ expression: 'wid + 40', frameId: own.id, context: 'watch' });
			assert.equal(ev.body.result, '40');

			// A task is no thread: stepping one says what to do.
			const step = await request(dc, 'next', { threadId: w0.id });
			failed(assert, step, 'next on a task entry');
			assert.match(step.message, /asyncio task is no thread: step the thread that runs its event loop/);

			// Resumed: the entries of that stop are gone.
			await dc.continueRequest({ threadId: stop.body.threadId });
			const again = await log.next('stopped');
			const old = await request(dc, 'stackTrace', { threadId: w0.id + 1000 });
			failed(assert, old, 'stackTrace on an entry that is not there');
			const sc2 = await request(dc, 'scopes', { frameId: own.id });
			failed(assert, sc2, 'scopes on a frame of the last stop');
			assert.ok(again.body.threadId);
			await dc.setBreakpointsRequest({ source: { path: target.script }, breakpoints: [] });
			await dc.continueRequest({ threadId: again.body.threadId });
			await dc.disconnectRequest({});
		});

		it('without the setting, threads are only threads', async () => {
			const dc = await client();
			const { stop } = await stopAtTick(dc, {});
			const threads = (await dc.threadsRequest()).body.threads;
			assert.ok(threads.every((t) => !t.name.startsWith('task ')), JSON.stringify(threads));
			assert.ok(threads.some((t) => t.id === stop.body.threadId));
			await dc.setBreakpointsRequest({ source: { path: target.script }, breakpoints: [] });
			await dc.continueRequest({ threadId: stop.body.threadId });
			await dc.disconnectRequest({});
		});
	});
}
