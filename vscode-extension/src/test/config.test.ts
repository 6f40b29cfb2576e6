// Configuration resolution, under plain node (node --test out/test/).
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { adapterArgs, exitMeaning, initialConfiguration, injectArgs, resolveAttach, targetArg, toolEnv } from '../config';

const ok = (cfg: Record<string, unknown>, cli = 'probing') => {
	const r = resolveAttach(cfg, cli);
	if ('error' in r) throw new Error(r.error);
	return r.resolved;
};
const err = (cfg: Record<string, unknown>) => {
	const r = resolveAttach(cfg, 'probing');
	assert.ok('error' in r, JSON.stringify(r));
	return (r as { error: string }).error;
};

test('a process id, as a number or a string', () => {
	assert.deepEqual(ok({ type: 'probing', request: 'attach', processId: 1234 }),
		{ target: { kind: 'process', pid: 1234 }, cli: 'probing', inject: true, timeout: 10000 });
	assert.deepEqual(ok({ request: 'attach', processId: ' 42 ' }).target, { kind: 'process', pid: 42 });
});

test('host and port', () => {
	assert.deepEqual(ok({ request: 'attach', port: 9922 }).target, { kind: 'tcp', host: '127.0.0.1', port: 9922 });
	assert.deepEqual(ok({ request: 'attach', host: 'localhost', port: 1 }).target, { kind: 'tcp', host: 'localhost', port: 1 });
	assert.equal(ok({ request: 'attach', host: 'h', port: 2, inject: true }).inject, false, 'no injection over TCP');
});

test('tool path, inject and timeout', () => {
	const r = ok({ request: 'attach', processId: 7, probingPath: '/opt/probing/bin/probing', inject: false, timeout: 500 }, 'x');
	assert.deepEqual([r.cli, r.inject, r.timeout], ['/opt/probing/bin/probing', false, 500]);
	assert.equal(ok({ processId: 7 }, '/usr/local/bin/probing').cli, '/usr/local/bin/probing', 'the setting');
	assert.equal(ok({ processId: 7 }, '').cli, 'probing');
});

test('errors say what is wrong', () => {
	assert.match(err({ request: 'launch', processId: 1 }), /attaches to running processes/);
	assert.match(err({ request: 'attach' }), /Say what to attach to/);
	assert.match(err({ processId: 1, port: 2 }), /either "processId" or "host"\/"port"/);
	assert.match(err({ processId: '${command:pickProcess}' }), /not resolved/);
	assert.match(err({ processId: 'python' }), /must be a process id/);
	assert.match(err({ processId: 0 }), /is not a process id/);
	assert.match(err({ processId: -5 }), /is not a process id/);
	assert.match(err({ port: 70000 }), /TCP port/);
	assert.match(err({ port: '9922' }), /TCP port/);
	assert.match(err({ host: 'h' }), /needs a "port"/);
	assert.match(err({ host: '', port: 3 }), /host name/);
	assert.match(err({ processId: 1, timeout: 0 }), /timeout/);
	assert.match(err({ processId: 1, inject: 'yes' }), /inject/);
	assert.match(err({ processId: 1, probingPath: '' }), /probingPath/);
	assert.match(err({ processId: 1, job: 'yes' }), /"job" must be true or false/);
	assert.match(err({ processId: 1, job: true, stopAll: 'all' }), /"stopAll" must be true or false/);
});

test('a whole job: the pid of any rank or of torchrun, or a rank on TCP', () => {
	assert.deepEqual(ok({ request: 'attach', processId: 4242, job: true }).target, { kind: 'process', pid: 4242 });
	assert.deepEqual(ok({ request: 'attach', host: 'node7', port: 9922, job: true }).target,
		{ kind: 'tcp', host: 'node7', port: 9922 });
});

test('what the adapter runs', () => {
	assert.deepEqual(adapterArgs(ok({ processId: 99, timeout: 3000 })), ['-t', '99', '--timeout', '3000', 'dap']);
	assert.deepEqual(injectArgs(99, 3000), ['-t', '99', '--timeout', '3000', 'inject']);
	assert.equal(targetArg({ kind: 'tcp', host: '::1', port: 5 }), '[::1]:5');
	assert.equal(targetArg({ kind: 'tcp', host: '127.0.0.1', port: 5 }), '127.0.0.1:5');
});

test('a token goes to the tool through its environment', () => {
	const t = 's3cret-token-0123456789';
	const r = ok({ host: '10.0.0.7', port: 9922, token: t });
	assert.equal(r.token, t);
	assert.deepEqual(toolEnv(r), { PROBING_TOKEN: t });
	assert.ok(!adapterArgs(r).includes(t), 'never on the command line');
	assert.deepEqual(adapterArgs(r), ['-t', '10.0.0.7:9922', '--timeout', '10000', 'dap']);
	assert.equal(ok({ processId: 5, token: t }).token, t);
	// None given: the tool finds its own (PROBING_TOKEN, the token file).
	assert.equal(toolEnv(ok({ port: 9922 })), undefined);
	assert.equal(toolEnv(ok({ port: 9922, token: '' })), undefined);
	assert.equal(toolEnv(undefined), undefined);
	assert.match(err({ port: 9922, token: 'short' }), /"token"/);
	assert.match(err({ port: 9922, token: 'has a space 0123456789' }), /"token"/);
	assert.match(err({ port: 9922, token: 1234567890123456 }), /"token"/);
	assert.match(exitMeaning(12), /refused the token/);
});

test('the initial configuration picks a process', () => {
	assert.deepEqual(initialConfiguration(), {
		type: 'probing', request: 'attach', name: 'Attach to a Python process (Probing)',
		processId: '${command:pickProcess}',
	});
});
