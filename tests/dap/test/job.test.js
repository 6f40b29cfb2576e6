'use strict';
// The whole job in one DAP client (issue 32): `probing dap` given any rank
// of a torchrun job (or torchrun's launcher) and an attach with "job":
// true is the job's parent session, and asks the client for a child
// session per rank (startDebugging, as VS Code's JavaScript debugger does
// for child processes).  Each child is `probing -t PID dap` on the
// configuration it was given: a breakpoint stops every rank, each rank's
// variables are its own, continue and disconnect leave the job training.
// The ranks' sessions meet at the parent's (its "jobHub"): a stop on one
// rank pauses the others, and the parent's pause, continue and disconnect
// act on all.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const cp = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { DebugClient } = require('@vscode/debugadapter-testsupport');
const { BUILD, USERBASE, SYSTEM_PYTHON, spawnTarget, sleep, waitUntil } = require('../lib/target');
const { attach, topFrame, EventLog } = require('../lib/debug');

const CLI = path.join(BUILD, 'cli', 'probing');
const TORCHRUN = '/usr/bin/torchrun';
const EXAMPLE = path.resolve(__dirname, '..', '..', '..', 'examples', 'ddp_train.py');
const RANKS = 4;

function haveTorch() {
	return fs.existsSync(TORCHRUN) &&
		cp.spawnSync(SYSTEM_PYTHON, ['-c', 'import torch.distributed'], { stdio: 'ignore' }).status === 0;
}

// What a torchrun job needs from this torch (tests/e2e/torchenv.py: a
// torch without libuv, as Debian 13's, gets USE_LIBUV=0 and its shim).
function torchEnv(dir) {
	const code = 'import json, sys; sys.path.insert(0, sys.argv[1]); import torchenv; ' +
		'print(json.dumps(torchenv.torch_env(sys.argv[2])))';
	const r = cp.spawnSync(SYSTEM_PYTHON, ['-c', code, path.resolve(__dirname, '..', '..', 'e2e'), dir],
		{ encoding: 'utf8' });
	if (r.status !== 0) throw new Error('torchenv: ' + r.stderr);
	return JSON.parse(r.stdout);
}

// A DebugClient on `probing dap` for target, which records the reverse
// requests it gets (DebugClient itself drops them).
async function bridge(target) {
	const dc = new DebugClient(CLI, 'dap', 'probing', {
		env: { ...process.env, PROBING_TARGET: String(target) },
	});
	dc.defaultTimeout = 30000;
	dc.reverse = [];
	const dispatch = dc.dispatch.bind(dc);
	dc.dispatch = (body) => {
		const m = JSON.parse(body);
		if (m.type === 'request') dc.reverse.push(m);
		else dispatch(body);
	};
	await dc.start();
	return dc;
}

describe('the whole job in one client (a torchrun job of 4 ranks)', { skip: !haveTorch() && 'no torchrun here' }, () => {
	let dir, job, pids = {}, out;

	before(async () => {
		dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-job-'));
		out = path.join(dir, 'job.out');
		const port = 29000 + Math.floor(Math.random() * 1000);
		job = cp.spawn(TORCHRUN, ['--redirects', '1', '--tee', '1', '--log_dir', path.join(dir, 'logs'),
			// An elastic job: a rank that dies restarts them all (the
			// last test), seen within a second.  The c10d rendezvous, its
			// store not shared with the ranks: since torch 2.5 a shared
			// one (and the static rendezvous, whose store is always the
			// ranks') keeps the last attempt's keys, and the ranks started
			// again connect to the dead ranks' ports (pytorch/pytorch
			// #135712; seen with torch 2.14).
			'--max_restarts', '1', '--monitor_interval', '1',
			'--rdzv_backend', 'c10d', '--rdzv_endpoint', `127.0.0.1:${port}`,
			'--nproc_per_node', String(RANKS), EXAMPLE, '--step-sleep', '0.05'], {
			cwd: dir, detached: true, stdio: ['ignore', fs.openSync(out, 'w'), 'ignore'],
			env: { ...process.env, PROBING: '2', PYTHONUSERBASE: USERBASE, PYTHONUNBUFFERED: '1',
				OMP_NUM_THREADS: '1', TORCH_DISABLE_SHARE_RDZV_TCP_STORE: '1', ...torchEnv(dir) },
		});
		const deadline = Date.now() + 240000;
		for (;;) {
			const text = fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : '';
			for (const m of text.matchAll(/rank (\d+) of \d+: pid (\d+)/g)) pids[m[1]] = Number(m[2]);
			if (Object.keys(pids).length === RANKS && /step 0:/.test(text)) break;
			if (Date.now() > deadline) throw new Error('the job did not start:\n' + text);
			await sleep(200);
		}
		// Every rank registered in cluster.nodes.
		for (;;) {
			const r = cp.spawnSync(CLI, ['-t', String(pids[0]), 'query', '-f', 'json',
				"SELECT count(*) AS n FROM cluster.nodes WHERE role = 'rank'"], { encoding: 'utf8' });
			if (r.status === 0 && JSON.parse(r.stdout)[0].n === RANKS) break;
			if (Date.now() > deadline) throw new Error('ranks not registered: ' + r.stderr);
			await sleep(500);
		}
	});

	// The job's attach on parent, and a startDebugging per rank.
	async function attachJob(parent, args = {}) {
		await parent.initializeRequest({ adapterID: 'probing', supportsStartDebuggingRequest: true });
		await parent.attachRequest({ job: true, ...args });
		await waitUntil(() => parent.reverse.length >= RANKS, 10000, 'a startDebugging per rank');
	}

	// The job prints a step line again.
	async function trainingAgain() {
		const steps = () => (fs.readFileSync(out, 'utf8').match(/step \d+:/g) || []).length;
		const before = steps();
		await waitUntil(() => steps() > before, 60000, 'the job training again', 200);
	}

	after(async () => {
		// torchrun first (it would start ranks again), then every rank the
		// job ever printed (those started again too: in a root they are
		// sessions of their own, which torchrun's end leaves running).
		try { if (job) process.kill(job.pid, 'SIGKILL'); } catch (e) { /* gone */ }
		const text = out && fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : '';
		const printed = [...text.matchAll(/rank \d+ of \d+: pid (\d+)/g)].map((m) => Number(m[1]));
		for (const pid of printed) {
			try { process.kill(pid, 'SIGKILL'); } catch (e) { /* gone */ }
		}
		if (dir) fs.rmSync(dir, { recursive: true, force: true });
	});

	it('the launcher\'s pid: a child session per rank, the parent without threads', { timeout: 300000 }, async () => {
		const parent = await bridge(job.pid);
		try {
			const init = await parent.initializeRequest({ adapterID: 'probing', supportsStartDebuggingRequest: true });
			assert.ok(init.success);
			const r = await parent.attachRequest({ job: true });
			assert.ok(r.success, r.message);
			await waitUntil(() => parent.reverse.length >= RANKS, 10000, 'a startDebugging per rank');
			const cfgs = parent.reverse.map((m) => {
				assert.equal(m.command, 'startDebugging');
				assert.equal(m.arguments.request, 'attach');
				return m.arguments.configuration;
			}).sort((a, b) => a.rank - b.rank);
			assert.deepEqual(cfgs.map((c) => [c.rank, c.processId, c.type, c.request]),
				[...Array(RANKS).keys()].map((n) => [n, pids[n], 'probing', 'attach']));
			assert.match(cfgs[1].name, new RegExp(`^rank 1 \\(${os.hostname()}:${pids[1]}\\)$`));
			const th = await parent.threadsRequest();
			assert.deepEqual(th.body.threads, []);
			const bp = await parent.setBreakpointsRequest({ source: { path: EXAMPLE }, breakpoints: [{ line: 61 }] });
			assert.equal(bp.body.breakpoints.length, 1);
			assert.equal(bp.body.breakpoints[0].verified, false);
			await assert.rejects(parent.evaluateRequest({ expression: '1' }), /ask a rank's session/);
			await parent.disconnectRequest({});
		} finally {
			await parent.stop();
		}
	});

	it('a breakpoint stops every rank; each rank\'s variables; continue and disconnect leave it training', { timeout: 300000 }, async () => {
		const parent = await bridge(pids[1]);
		const kids = [];
		try {
			// Every rank to its own breakpoint: no stop-all (a pause could
			// land on a rank before the line).
			await attachJob(parent, { stopAll: false });
			const line = 1 + fs.readFileSync(EXAMPLE, 'utf8').split('\n')
				.findIndex((l) => l.includes('loss = nn.functional.mse_loss'));
			// A step still to come, so that every rank has the breakpoint
			// before either reaches it: a rank stopped holds the others
			// in their next all-reduce, in C, where no breakpoint is.
			const steps = fs.readFileSync(out, 'utf8').match(/step (\d+):/g);
			const at = Number(steps[steps.length - 1].split(' ')[1].slice(0, -1)) + 300;
			const bp = { line, condition: `step == ${at}` };
			for (const m of parent.reverse) {
				const cfg = m.arguments.configuration;
				const dc = await bridge(cfg.processId);
				const { log, breakpoints } = await attach(dc, { bps: { [EXAMPLE]: [bp] }, args: cfg });
				assert.equal(breakpoints[EXAMPLE][0].verified, true);
				kids.push({ dc, log, cfg });
			}
			for (const k of kids) {
				const ev = await k.log.next('stopped', (e) => e.body.reason === 'breakpoint', 120000);
				const f = await topFrame(k.dc, ev.body.threadId);
				assert.equal(f.line, line);
				const r = await k.dc.evaluateRequest({ expression: 'rank', frameId: f.id, context: 'watch' });
				assert.equal(r.body.result, String(k.cfg.rank));
				const s = await k.dc.evaluateRequest({ expression: 'step', frameId: f.id, context: 'watch' });
				assert.equal(s.body.result, String(at));
				k.thread = ev.body.threadId;
			}
			// Breakpoints cleared, each rank continued, sessions closed.
			for (const k of kids) {
				await k.dc.setBreakpointsRequest({ source: { path: EXAMPLE }, breakpoints: [] });
				await k.dc.continueRequest({ threadId: k.thread });
				await k.dc.disconnectRequest({});
			}
			await trainingAgain();
			await parent.disconnectRequest({});
		} finally {
			// A rank's bridge ends with its disconnect: no stop() (whose
			// own disconnect would wait for an answer that cannot come).
			for (const k of kids) k.dc.stopAdapter();
			await parent.stop();
		}
	});

	it('stop-all: a breakpoint on rank 0 pauses the others; the job\'s continue, pause and disconnect act on all', { timeout: 300000 }, async () => {
		const parent = await bridge(pids[0]);
		const plog = new EventLog(parent);
		const kids = [];
		try {
			await attachJob(parent);
			await plog.next('output', (e) => /a stop on one rank pauses the others/.test(e.body.output));
			// Rank 0 stops before its step's forward: the others go on
			// into the step's all-reduce, in C, where they wait for it
			// (as ranks do when one stops at a breakpoint): each is
			// held there, or stops in Python if the pause is quicker.
			const line = 1 + fs.readFileSync(EXAMPLE, 'utf8').split('\n')
				.findIndex((l) => l.includes('loss = nn.functional.mse_loss'));
			const steps = fs.readFileSync(out, 'utf8').match(/step (\d+):/g);
			const at = Number(steps[steps.length - 1].split(' ')[1].slice(0, -1)) + 300;
			const bp = { line, condition: `step == ${at} and rank == 0` };
			for (const m of parent.reverse) {
				const cfg = m.arguments.configuration;
				assert.match(cfg.jobHub, /^@probing-job-\d+-\d+$/);
				const dc = await bridge(cfg.processId);
				const { log } = await attach(dc, { bps: { [EXAMPLE]: [bp] }, args: cfg });
				kids.push({ dc, log, cfg });
			}
			const r0 = kids.find((k) => k.cfg.rank === 0);
			const ev0 = await r0.log.next('stopped', (e) => e.body.reason === 'breakpoint', 120000);
			const stops = [[r0, ev0]];
			for (const k of kids.filter((x) => x !== r0))
				stops.push([k, await k.log.next('stopped', (e) => e.body.reason === 'pause', 30000)]);
			const said = await plog.next('output', (e) => /^probing: rank 0 stopped/.test(e.body.output));
			assert.match(said.body.output,
				new RegExp(`^probing: rank 0 stopped \\(breakpoint\\): pausing the ${RANKS - 1} other ranks `));
			// Each rank answers for itself.
			for (const [k, ev] of stops) {
				const f = await topFrame(k.dc, ev.body.threadId);
				const r = await k.dc.evaluateRequest({ frameId: f.id, context: 'watch',
					expression: "__import__('torch.distributed').distributed.get_rank()" });
				assert.equal(r.body.result, String(k.cfg.rank));
			}
			// The job's continue: every rank's session hears `continued`.
			for (const k of kids) await k.dc.setBreakpointsRequest({ source: { path: EXAMPLE }, breakpoints: [] });
			const c = await parent.continueRequest({ threadId: 0 });
			assert.equal(c.body.allThreadsContinued, true);
			for (const k of kids) await k.log.next('continued', () => true, 10000);
			await trainingAgain();
			// The job's pause stops both; its continue lets both go.
			await parent.pauseRequest({ threadId: 0 });
			for (const k of kids) await k.log.next('stopped', (e) => e.body.reason === 'pause', 30000);
			await parent.continueRequest({ threadId: 0 });
			for (const k of kids) await k.log.next('continued', () => true, 10000);
			// The job's disconnect ends every rank's session; the job
			// trains on.
			await parent.disconnectRequest({});
			for (const k of kids) await k.log.next('terminated', () => true, 10000);
			await trainingAgain();
		} finally {
			for (const k of kids) k.dc.stopAdapter();
			await parent.stop();
		}
	});

	it('an elastic restart: the rank that died ends its session, saying so; the ranks started again join', { timeout: 300000 }, async () => {
		const parent = await bridge(job.pid); // the launcher: its ranks change
		let dc1;
		try {
			await attachJob(parent);
			const first = parent.reverse.map((m) => m.arguments.configuration);
			const cfg1 = first.find((c) => c.rank === 1);
			dc1 = await bridge(cfg1.processId);
			const { log } = await attach(dc1, { args: cfg1 });
			process.kill(pids[1], 'SIGKILL');
			const said = await log.next('output', (e) => /closed the connection/.test(e.body.output), 30000);
			assert.match(said.body.output, new RegExp(`the agent of ${pids[1]} closed the connection`));
			await log.next('terminated', () => true, 10000);
			// torchrun starts every rank again (new pids): a session each.
			await waitUntil(() => parent.reverse.length >= 2 * RANKS, 240000,
				'a startDebugging per rank started again', 200);
			const again = parent.reverse.slice(RANKS).map((m) => m.arguments.configuration);
			assert.deepEqual(again.map((c) => c.rank).sort(), [...Array(RANKS).keys()]);
			for (const c of again) assert.ok(!first.some((f) => f.processId === c.processId), c);
			await parent.disconnectRequest({});
		} finally {
			if (dc1) dc1.stopAdapter();
			await parent.stop();
		}
	});

	it('a process that is not in a job: the attach is refused, saying so', { timeout: 300000 }, async () => {
		const t = await spawnTarget(SYSTEM_PYTHON, 'import time\nprint("ready", flush=True)\ntime.sleep(600)\n',
			{ ready: 'ready' });
		const parent = await bridge(t.pid);
		try {
			await parent.initializeRequest({ adapterID: 'probing' });
			await assert.rejects(parent.attachRequest({ job: true }),
				/no rank of a job there .*attach without "job" to debug this process alone/);
		} finally {
			await parent.stop();
			await t.stop();
		}
	});
});
