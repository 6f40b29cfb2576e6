'use strict';
// Helpers for the Node tests of the CLI's doors (tests/mcp, tests/web): real
// Python processes with the real agent (PROBING=1 through the build's .pth
// hook) and a torchrun job.  No dependencies: each suite brings its own.

const cp = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const ROOT = path.resolve(__dirname, '..', '..');
const BUILD = path.resolve(process.env.PROBING_BUILD || path.join(ROOT, 'build'));
const PROBING = path.join(BUILD, 'cli', 'probing');
const USERBASE = path.join(BUILD, 'userbase');
const PYTHON = '/usr/bin/python3';
const TORCHRUN = '/usr/bin/torchrun';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The agent of pid listens on @probing-<pid> (/proc/net/unix).
function agentUp(pid) {
	return fs.readFileSync('/proc/net/unix', 'utf8').includes('@probing-' + pid + '\n');
}

const live = new Set();
process.on('exit', () => {
	for (const p of live) {
		try { process.kill(-p.pid, 'SIGKILL'); } catch (e) { /* gone */ }
	}
});

// The environment of a target: the agent from the build, recording into
// dataDir.
function targetEnv(dataDir, more = {}) {
	const e = { ...process.env };
	for (const k of ['PROBING_TARGET', 'PROBING_PORT', 'PROBING_LISTEN']) delete e[k];
	Object.assign(e, {
		PYTHONUSERBASE: USERBASE, PYTHONUNBUFFERED: '1', PROBING: '1',
		PROBING_DATA_DIR: dataDir,
	});
	if (process.env.PROBING_TARGET_PRELOAD) e.LD_PRELOAD = process.env.PROBING_TARGET_PRELOAD;
	return Object.assign(e, more);
}

class Proc {
	constructor(args, env, cwd) {
		this.out = '';
		this.exited = null;
		this.proc = cp.spawn(args[0], args.slice(1), {
			cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
		});
		this.pid = this.proc.pid;
		live.add(this);
		this.proc.stdout.on('data', (d) => { this.out += d; });
		this.proc.stderr.on('data', (d) => { this.out += d; });
		this.done = new Promise((resolve) => this.proc.on('exit', (code, signal) => {
			this.exited = { code, signal };
			live.delete(this);
			resolve(this.exited);
		}));
	}

	async waitFor(pred, what, ms = 60000) {
		const deadline = Date.now() + ms;
		while (!pred()) {
			if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output:\n${this.out}`);
			await sleep(50);
		}
	}

	async stop() {
		if (!this.exited) {
			try { process.kill(-this.pid, 'SIGKILL'); } catch (e) { /* gone */ }
			await this.done;
		}
	}
}

// python on script (a path, or code written to dir) with the agent; resolves
// once the agent listens and the script printed ready (when given).
async function startTarget(dir, script, { args = [], env = {}, ready = null, agent = true } = {}) {
	let file = script;
	if (!fs.existsSync(script)) {
		file = path.join(dir, 'target-' + Math.random().toString(36).slice(2) + '.py');
		fs.writeFileSync(file, script);
	}
	const p = new Proc([PYTHON, file, ...args], targetEnv(path.join(dir, 'data'), env), dir);
	if (agent) await p.waitFor(() => p.exited || agentUp(p.pid), `the agent of ${p.pid}`);
	if (ready) await p.waitFor(() => p.exited || p.out.includes(ready), JSON.stringify(ready));
	if (p.exited) throw new Error(`target exited ${JSON.stringify(p.exited)}:\n${p.out}`);
	return p;
}

// A torchrun job of examples/ddp_train.py (PROBING=2: every rank has an
// agent); resolves with {proc, pids: {rank: pid}}.
async function startJob(dir, nproc, jobArgs) {
	const port = await new Promise((resolve) => {
		const s = net.createServer().listen(0, '127.0.0.1', () => {
			const p = s.address().port;
			s.close(() => resolve(p));
		});
	});
	const env = targetEnv(path.join(dir, 'data'), { PROBING: '2' });
	const p = new Proc([TORCHRUN, '--redirects', '1', '--tee', '1',
		'--log_dir', path.join(dir, 'logs'), '--monitor_interval', '120',
		'--master_port', String(port), '--nproc_per_node', String(nproc),
		path.join(ROOT, 'examples', 'ddp_train.py'), ...jobArgs], env, dir);
	const pids = {};
	await p.waitFor(() => {
		for (const m of p.out.matchAll(/rank (\d+) of \d+: pid (\d+)/g)) pids[m[1]] = Number(m[2]);
		return p.exited || Object.keys(pids).length === nproc;
	}, `${nproc} ranks`, 240000);
	if (p.exited) throw new Error(`torchrun exited:\n${p.out}`);
	return { proc: p, pids };
}

module.exports = { ROOT, BUILD, PROBING, PYTHON, TORCHRUN, sleep, agentUp, startTarget, startJob, Proc, targetEnv };
