'use strict';
// The token in initialize, from a DAP client (@vscode/debugadapter-testsupport):
// an agent with PROBING_TOKEN asks every TCP client for it, on loopback too
// (arguments.probingToken); a missing or wrong one gets error 401 and the
// connection closed.  docs/security.md; the unix socket, which needs none,
// is tested in tests/e2e/test_auth.py (Node cannot reach its exact-length
// abstract name).

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { SYSTEM_PYTHON, spawnTarget, request, failed, succeeded, withTimeout } = require('../lib/target');

const TOKEN = 'dap-client-token-0123456789';
const SCRIPT = `\
import time
counter = 41
print("ready", flush=True)
while True:
    time.sleep(0.02)
`;

// Resolves when the agent closed the client's connection.
function closed(dc) {
	return new Promise((resolve) => {
		if (dc._socket.destroyed || dc._socket.readableEnded) resolve();
		dc._socket.once('close', resolve);
		dc._socket.once('end', resolve);
	});
}

describe('the token in initialize', () => {
	let target;

	before(async () => {
		target = await spawnTarget(SYSTEM_PYTHON, SCRIPT, { ready: 'ready', env: { PROBING_TOKEN: TOKEN } });
	});

	after(async () => {
		if (target) await target.stop();
	});

	it('the right token opens the session', async () => {
		const dc = await target.client();
		const init = succeeded(assert, await request(dc, 'initialize',
			{ adapterID: 'probing', clientID: 'testsupport', probingToken: TOKEN }), 'initialize');
		assert.equal(init.body.probing.pid, target.pid);
		const ev = succeeded(assert, await request(dc, 'evaluate', { expression: 'counter + 1' }), 'evaluate');
		assert.equal(ev.body.result, '42');
	});

	for (const [what, args] of [
		['no token', { adapterID: 'probing' }],
		['a wrong token', { adapterID: 'probing', probingToken: TOKEN + 'x' }],
	]) {
		it(`${what}: error 401, then the connection closes`, async () => {
			const dc = await target.client();
			const gone = closed(dc);
			const r = failed(assert, await request(dc, 'initialize', args), 'initialize');
			assert.equal(r.body.error.id, 401);
			assert.match(r.message, what === 'no token' ? /needs a token/ : /wrong token/);
			await withTimeout(gone, 10000, 'the agent closing the connection');
		});
	}

	it('a request before initialize is refused', async () => {
		const dc = await target.client();
		const gone = closed(dc);
		const r = failed(assert, await request(dc, 'threads', {}), 'threads');
		assert.equal(r.body.error.id, 401);
		assert.match(r.message, /first request must be initialize/);
		await withTimeout(gone, 10000, 'the agent closing the connection');
		assert.ok(target.alive());
	});
});
