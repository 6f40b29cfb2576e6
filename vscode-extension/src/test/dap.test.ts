// The extension's own DAP client through the real `probing dap` bridge,
// against a real target — when PROBING_BUILD names a build (test-all sets
// it); skipped otherwise.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as cp from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { StdioDap } from '../dap';
import { agentPids } from '../procs';

const BUILD = process.env.PROBING_BUILD;
const skip = BUILD && fs.existsSync(path.join(BUILD, 'cli', 'probing')) ? false
	: 'PROBING_BUILD does not name a build with cli/probing';

test('SQL over probing dap, as "Probing: Run SQL Query" does', { skip }, async () => {
	const cli = path.join(BUILD!, 'cli', 'probing');
	const py = cp.spawn('/usr/bin/python3', ['-c', 'import time\nwhile True: time.sleep(0.05)'], {
		env: { ...process.env, PROBING: '1', PYTHONUSERBASE: path.join(BUILD!, 'userbase') },
		stdio: 'ignore',
	});
	try {
		const deadline = Date.now() + 30000;
		while (!agentPids(fs.readFileSync('/proc/net/unix', 'utf8')).has(py.pid!)) {
			assert.ok(Date.now() < deadline, 'the agent did not start');
			await new Promise((r) => setTimeout(r, 50));
		}
		const dap = new StdioDap(cli, String(py.pid), 10000);
		const init = await dap.request('initialize', { adapterID: 'probing-vscode' });
		assert.equal(init.success, true, init.message);
		const r = await dap.request('probing/query', { sql: "SELECT name FROM python.threads" });
		assert.equal(r.success, true, r.message);
		assert.deepEqual(r.body.columns.map((c: { name: string }) => c.name), ['name']);
		assert.deepEqual(r.body.rows, [['MainThread']]);
		const bad = await dap.request('probing/query', { sql: 'SELEC nonsense' });
		assert.equal(bad.success, false);
		dap.close();
		const gone = new StdioDap(cli, '999999999', 1000);
		const g = await gone.request('initialize', {});
		assert.equal(g.success, false);
		assert.match(g.message!, /no such process|999999999/);
	} finally {
		py.kill('SIGKILL');
	}
});

// An agent on 0.0.0.0 with a token: the bridge adds the token given in
// its environment (what the extension passes from launch.json) to the
// initialize request; without it the agent refuses.
test('a token over TCP, through the environment of probing dap', { skip }, async () => {
	const cli = path.join(BUILD!, 'cli', 'probing');
	const token = 'vscode-test-token-0123456789';
	const port = 20000 + (process.pid % 20000);
	const dirs = fs.mkdtempSync('/tmp/probing-vscode-token-');
	// A private runtime dir and home: no token file of the user is used.
	const env = { ...process.env, XDG_RUNTIME_DIR: dirs, HOME: dirs };
	const py = cp.spawn('/usr/bin/python3', ['-c', 'import time\nwhile True: time.sleep(0.05)'], {
		env: { ...env, PROBING: '1', PYTHONUSERBASE: path.join(BUILD!, 'userbase'),
			PROBING_TOKEN: token, PROBING_LISTEN: `0.0.0.0:${port}` },
		stdio: 'ignore',
	});
	const saved = { ...process.env };
	try {
		Object.assign(process.env, { XDG_RUNTIME_DIR: dirs, HOME: dirs });
		delete process.env.PROBING_TOKEN;
		const deadline = Date.now() + 30000;
		while (!await new Promise<boolean>((resolve) => {
			const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
			s.on('error', () => resolve(false));
		})) {
			assert.ok(Date.now() < deadline, 'the agent did not listen');
			await new Promise((r) => setTimeout(r, 100));
		}
		const dap = new StdioDap(cli, `127.0.0.1:${port}`, 10000, { PROBING_TOKEN: token });
		assert.equal((await dap.request('initialize', { adapterID: 'probing-vscode' })).success, true);
		const r = await dap.request('evaluate', { expression: '6 * 7' });
		assert.equal(r.success, true, r.message);
		assert.equal(r.body.result, '42');
		dap.close();
		const none = new StdioDap(cli, `127.0.0.1:${port}`, 10000);
		const refused = await none.request('initialize', { adapterID: 'probing-vscode' });
		assert.equal(refused.success, false);
		assert.match(refused.message!, /needs a token/);
		none.close();
	} finally {
		process.env = saved;
		py.kill('SIGKILL');
		fs.rmSync(dirs, { recursive: true, force: true });
	}
});
