// The extension's own DAP client through the real `probing dap` bridge,
// against a real target — when PROBING_BUILD names a build (test-all sets
// it); skipped otherwise.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as cp from 'child_process';
import * as fs from 'fs';
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
