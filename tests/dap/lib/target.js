'use strict';
// Helpers for the DAP client tests: real Python targets with the real agent
// (PROBING=1 through the .pth hook), found on a TCP port, and DebugClients
// from @vscode/debugadapter-testsupport connected to them.

const cp = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { DebugClient } = require('@vscode/debugadapter-testsupport');

const BUILD = path.resolve(process.env.PROBING_BUILD ||
	path.join(__dirname, '..', '..', '..', 'build'));
const USERBASE = path.join(BUILD, 'userbase');
const SYSTEM_PYTHON = '/usr/bin/python3';

function realpath(p) {
	try { return fs.realpathSync(p); } catch (e) { return null; }
}

// [version "3.X", real executable] of a Python, or null where it does not run.
function versionOf(exe) {
	const r = cp.spawnSync(exe, ['-c',
		"import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"],
		{ encoding: 'utf8', timeout: 30000 });
	if (r.status !== 0 || !r.stdout) return null;
	const f = r.stdout.trim().split(/\s+/);
	return f.length === 2 ? f : null;
}

// /usr/bin/python3's version ("3.11" on Debian 12, "3.13" on Debian 13):
// the names that follow from it (site-packages, libprobing-cpXY.so) too.
const SYSTEM_VERSION = (versionOf(SYSTEM_PYTHON) || ['3.11'])[0];

// The second Python: another build of SYSTEM_VERSION (pyenv's, with a
// shared libpython), found as python3 or python3.X on PATH or under
// ~/.pyenv/versions.  [exe, null], or [null, why] when the machine has none.
function pyenvPython() {
	const v = SYSTEM_VERSION;
	const cands = [];
	for (const name of ['python3', 'python' + v]) {
		const r = cp.spawnSync('sh', ['-c', 'command -v "$1"', 'sh', name], { encoding: 'utf8' });
		if (r.status === 0 && r.stdout.trim()) cands.push(r.stdout.trim());
	}
	for (const base of [path.join(os.homedir(), '.pyenv', 'versions'), '/root/.pyenv/versions']) {
		let names = [];
		try { names = fs.readdirSync(base).filter((n) => n.startsWith(v + '.')).sort(); } catch (e) { /* none */ }
		for (const n of names) cands.push(path.join(base, n, 'bin', 'python' + v));
	}
	const system = realpath(SYSTEM_PYTHON);
	for (const c of cands) {
		if (!fs.existsSync(c) || realpath(c) === system) continue;
		const got = versionOf(c);
		if (got && got[0] === v && realpath(got[1]) !== system) return [got[1], null];
	}
	return [null, `no second build of Python ${v} on this machine (looked for python3 ` +
		`and python${v} on PATH and ~/.pyenv/versions/${v}.*/bin/python${v})`];
}

// The build's other CPythons (BUILD/pythons.txt: "TAG VERSION EXE" a
// line, agent/pythons.cmake): every version but SYSTEM_VERSION, which
// the two above are.
function otherVersions() {
	let lines = [];
	try {
		lines = fs.readFileSync(path.join(BUILD, 'pythons.txt'), 'utf8').split('\n');
	} catch (e) { /* an old build: none */ }
	return lines.map((l) => l.trim().split(/\s+/))
		.filter((f) => f.length === 3 && f[1] !== SYSTEM_VERSION)
		.map(([, version, exe]) => ({ label: version, version, exe }));
}

const [PYENV_PYTHON, NO_PYENV] = pyenvPython();
// [{label, exe}]: exe null means "skip, with reason".
const PYTHONS = [
	{ label: 'system', version: SYSTEM_VERSION, exe: SYSTEM_PYTHON },
	{ label: 'pyenv', version: SYSTEM_VERSION, exe: PYENV_PYTHON,
	  skip: PYENV_PYTHON ? false : NO_PYENV },
	...otherVersions(),
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// promise, or a rejection naming what did not happen within ms.
function withTimeout(promise, ms, what) {
	let timer;
	const t = new Promise((_, reject) => {
		timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
	});
	return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

// Polls cond() every `every` ms until it holds, or rejects naming what did
// not happen within ms.  The polling ends either way (a loop raced against
// withTimeout would poll on after the rejection and keep node's event loop,
// and so the test file, alive for good).
async function waitUntil(cond, ms, what, every = 50) {
	const deadline = Date.now() + ms;
	while (!cond()) {
		if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what}`);
		await sleep(every);
	}
}

function freePort() {
	return new Promise((resolve, reject) => {
		const srv = net.createServer();
		srv.unref();
		srv.on('error', reject);
		srv.listen(0, '127.0.0.1', () => {
			const { port } = srv.address();
			srv.close(() => resolve(port));
		});
	});
}

// Is something accepting TCP connections on 127.0.0.1:port?  Reads
// /proc/net/tcp instead of connecting, so the agent sees no stray session.
function listening(port) {
	const hex = ':' + port.toString(16).toUpperCase().padStart(4, '0');
	const text = fs.readFileSync('/proc/net/tcp', 'utf8');
	return text.split('\n').some((l) => {
		const f = l.trim().split(/\s+/);
		// local_address 0100007F:PORT, state 0A = LISTEN
		return f.length > 3 && f[1].endsWith(hex) && f[3] === '0A';
	});
}

// Fails at once, not after a timeout, when PROBING_BUILD has no agent.
function checkBuild() {
	const lib = path.join(USERBASE, 'lib');
	let found = false;
	try {
		found = fs.readdirSync(lib).some((d) =>
			fs.existsSync(path.join(lib, d, 'site-packages', 'probing.pth')) &&
			fs.readdirSync(path.join(lib, d, 'site-packages', 'probing')).some((f) => /^libprobing-cp[0-9]+\.so$/.test(f)));
	} catch (e) { /* no such dir */ }
	if (!found) {
		throw new Error(`no agent build in ${BUILD}: expected ${lib}/python3.*/site-packages/` +
			'{probing.pth,probing/libprobing-cpXY.so}; build it or set PROBING_BUILD');
	}
}

const live = new Set();
// Whatever happens, no target outlives the test process.
process.on('exit', () => {
	for (const t of live) {
		try { process.kill(t.pid, 'SIGKILL'); } catch (e) { /* gone */ }
	}
});

class Target {
	constructor(proc, script, port, dir) {
		this.proc = proc;
		this.pid = proc.pid;
		this.script = script;
		this.port = port;
		this.dir = dir;
		this.out = '';
		this.exited = null;
		this.clients = [];
		proc.stdout.on('data', (d) => { this.out += d.toString(); });
		proc.stderr.on('data', (d) => { this.out += d.toString(); });
		this.exitPromise = new Promise((resolve) => {
			proc.on('exit', (code, signal) => {
				this.exited = { code, signal };
				live.delete(this);
				resolve();
			});
		});
	}

	alive() { return this.exited === null; }

	// Waits until pred() is true; fails early if the target died.
	async waitFor(pred, what, timeoutMs = 30000) {
		const deadline = Date.now() + timeoutMs;
		while (Date.now() < deadline) {
			if (!this.alive()) {
				throw new Error(`target ${this.pid} exited (${JSON.stringify(this.exited)}) ` +
					`while waiting for ${what}:\n${this.out}`);
			}
			if (pred()) return;
			await sleep(25);
		}
		throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; output:\n${this.out}`);
	}

	waitLine(text, timeoutMs) {
		return this.waitFor(() => this.out.includes(text), JSON.stringify(text), timeoutMs);
	}

	// The value printed by the script as "key=value".
	printed(key) {
		const m = this.out.match(new RegExp('^' + key + '=(.*)$', 'm'));
		return m ? m[1] : undefined;
	}

	// 1-based line of the script line that contains marker.
	line(marker) {
		const lines = fs.readFileSync(this.script, 'utf8').split('\n');
		const i = lines.findIndex((l) => l.includes(marker));
		if (i < 0) throw new Error('marker not in script: ' + marker);
		return i + 1;
	}

	// A DebugClient connected to the agent's TCP port (as VS Code does with
	// debugServer); closed by stop().
	async client() {
		const dc = new DebugClient('unused', 'unused', 'probing');
		dc.defaultTimeout = 20000;
		await dc.start(this.port);
		dc._socket.on('error', () => { /* reported through timeouts */ });
		this.clients.push(dc);
		return dc;
	}

	// The same over the agent's abstract unix socket @probing-<pid>.
	async unixClient() {
		const dc = new DebugClient('unused', 'unused', 'probing');
		dc.defaultTimeout = 20000;
		const sock = net.createConnection({ path: '\0probing-' + this.pid });
		await new Promise((resolve, reject) => {
			sock.once('connect', resolve);
			sock.once('error', reject);
		});
		sock.on('error', () => { /* reported through timeouts */ });
		dc._socket = sock;      // so stop() ends it, as for a TCP client
		dc.connect(sock, sock);
		this.clients.push(dc);
		return dc;
	}

	async stop() {
		for (const dc of this.clients) {
			try { dc.stopAdapter(); } catch (e) { /* closed */ }
		}
		this.clients = [];
		if (this.alive()) {
			try { process.kill(this.pid, 'SIGKILL'); } catch (e) { /* gone */ }
			let timer;
			await Promise.race([this.exitPromise,
				new Promise((r) => { timer = setTimeout(r, 10000); })]);
			clearTimeout(timer);
		}
		fs.rmSync(this.dir, { recursive: true, force: true });
	}
}

// Starts python on code (written to a fresh script) with the agent on a
// free TCP port; resolves once the port listens.
async function spawnTarget(python, code, { ready = null, env = {} } = {}) {
	checkBuild();
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-dap-'));
	const script = path.join(dir, 'target.py');
	fs.writeFileSync(script, code);
	const port = await freePort();
	const e = { ...process.env };
	delete e.PROBING_TARGET;
	delete e.PROBING_LISTEN;
	Object.assign(e, {
		PYTHONUSERBASE: USERBASE,
		PYTHONUNBUFFERED: '1',
		PROBING: '1',
		PROBING_PORT: String(port),
		// A TCP listener asks for the token, loopback too, unless the
		// user says otherwise: these tests speak DAP as an editor with a
		// debugServer port does, without one (auth.test.js gives one).
		PROBING_TOKEN: 'none',
	});
	if (process.env.PROBING_TARGET_PRELOAD) e.LD_PRELOAD = process.env.PROBING_TARGET_PRELOAD;
	Object.assign(e, env);
	const proc = cp.spawn(python, [script], { cwd: dir, env: e, stdio: ['ignore', 'pipe', 'pipe'] });
	const t = new Target(proc, script, port, dir);
	live.add(t);
	try {
		await t.waitFor(() => listening(port), `the agent of pid ${t.pid} on port ${port}`);
		if (ready) await t.waitLine(ready);
	} catch (err) {
		await t.stop();
		throw err;
	}
	return t;
}

// Sends a request and resolves with the whole response, success or not
// (DebugClient.send keeps only the message of a failure).  The seq it was
// sent with is in response.request_seq; onSent(seq) is called right after
// sending.  Rejects only when no response comes within timeoutMs.
function request(dc, command, args, { timeoutMs = 20000, onSent } = {}) {
	return new Promise((resolve, reject) => {
		const seq = dc.sequence;
		const timer = setTimeout(() => {
			dc.pendingRequests.delete(seq);
			reject(new Error(`no response to '${command}' (seq ${seq}) within ${timeoutMs} ms`));
		}, timeoutMs);
		dc.doSend(command, args, (resp) => {
			clearTimeout(timer);
			resolve(resp);
		});
		if (onSent) onSent(seq);
	});
}

// Fails unless resp is a failure; returns it.
function failed(assert, resp, what) {
	assert.strictEqual(resp.success, false, `${what}: expected a failure, got ${JSON.stringify(resp)}`);
	assert.strictEqual(typeof resp.message, 'string', `${what}: a failure carries a message`);
	assert.ok(resp.message.length > 0, `${what}: the message is not empty`);
	return resp;
}

function succeeded(assert, resp, what) {
	assert.strictEqual(resp.success, true, `${what}: ${resp.message} ${JSON.stringify(resp.body)}`);
	return resp;
}

module.exports = {
	BUILD, USERBASE, PYTHONS, SYSTEM_PYTHON, SYSTEM_VERSION, PYENV_PYTHON,
	spawnTarget, request, failed, succeeded, sleep, withTimeout, waitUntil, listening,
};
