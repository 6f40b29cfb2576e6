'use strict';
// `probing mcp` driven by a real MCP client: @modelcontextprotocol/sdk's
// Client spawns it over stdio (as an assistant's host does), lists its
// tools and resources and calls each tool against live Python processes:
// examples/train.py (torch), examples/hang.py (the hang watchdog on), a
// process that crashed (its recording and report), and a 2-rank torchrun
// job of examples/ddp_train.py with rank 1 stuck in load_batch.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { ROOT, startTarget, startJob, sleep } = require('../../lib/procs');
const { mcpClient, call } = require('../lib/client');

const CRASH = `\
import ctypes, time
print("ready", flush=True)
time.sleep(2)  # past the recording's first flush (1 s)
ctypes.string_at(0)
`;

const TOOLS = ['list_agents', 'list_recordings', 'backtrace', 'query', 'describe_tables',
	'memory', 'flamegraph', 'torch_module_times', 'hangs', 'cluster_backtrace',
	'cluster_hang', 'diagnose', 'report'];

describe('probing mcp with an MCP client', () => {
	let dir, train, hang, crashed, job, client, evalClient;

	before(async () => {
		dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-mcp-'));
		train = await startTarget(dir, path.join(ROOT, 'examples', 'train.py'));
		hang = await startTarget(dir, path.join(ROOT, 'examples', 'hang.py'),
			{ env: { PROBING_HANG_TIMEOUT: '1s', PROBING_CRASH_PATH: dir } });
		crashed = await startTarget(dir, CRASH, { ready: 'ready', env: { PROBING_CRASH: '1', PROBING_CRASH_PATH: dir } });
		await crashed.done;
		job = await startJob(dir, 2, ['--hang-rank', '1', '--hang-step', '3']);
		const env = { PROBING_DATA_DIR: path.join(dir, 'data') };
		client = await mcpClient([], env);
		evalClient = await mcpClient(['--allow-eval'], env);
	});

	after(async () => {
		for (const c of [client, evalClient]) if (c) await c.close();
		for (const p of [train, hang, crashed, job && job.proc]) if (p) await p.stop();
		if (dir) fs.rmSync(dir, { recursive: true, force: true });
	});

	it('initialize: the server, its version and instructions', () => {
		const info = client.getServerVersion();
		assert.equal(info.name, 'probing');
		assert.match(client.getInstructions(), /list_agents/);
		assert.ok(client.getServerCapabilities().tools);
		assert.ok(client.getServerCapabilities().resources);
	});

	it('tools/list: every tool described, with its schema; eval only when allowed', async () => {
		const { tools } = await client.listTools();
		assert.deepEqual(tools.map((t) => t.name), TOOLS);
		for (const t of tools) {
			assert.ok(t.description.length > 80, t.name);
			assert.equal(t.inputSchema.type, 'object');
			if (t.name !== 'list_agents' && t.name !== 'list_recordings' && t.name !== 'report') {
				assert.deepEqual(t.inputSchema.required.slice(0, 1), ['target'], t.name);
			}
		}
		const all = (await evalClient.listTools()).tools.map((t) => t.name);
		assert.deepEqual(all, [...TOOLS, 'eval']);
		await assert.rejects(client.callTool({ name: 'eval', arguments: { target: String(train.pid), code: '1' } }),
			/allow-eval/);
	});

	it('list_agents and list_recordings', async () => {
		const agents = await call(client, 'list_agents');
		assert.equal(agents.isError, false);
		for (const p of [train, hang, job.pids[0], job.pids[1]]) {
			assert.match(agents.text, new RegExp(`\\b${p.pid || p}\\b`));
		}
		const runs = JSON.parse((await call(client, 'list_recordings')).text);
		const run = runs.find((r) => r.pid === String(crashed.pid));
		assert.ok(run, JSON.stringify(runs));
		assert.match(run.how, /signal 11/);
		assert.match(run.report, /probing-crash-\d+-.*\.txt$/);
	});

	it('backtrace, with and without locals, with native frames', async () => {
		const bt = await call(client, 'backtrace', { target: String(train.pid) });
		assert.equal(bt.isError, false, bt.text);
		assert.match(bt.text, /Thread \d+ "MainThread" \(main/);
		assert.match(bt.text, /train \(.*examples\/train\.py:\d+\)/);
		const loc = await call(client, 'backtrace', { target: String(hang.pid), locals: true });
		assert.match(loc.text, /consumer/);
		assert.match(loc.text, /q = <queue\.Queue object/);
		// native: the consumer's wait in C, above its Python frames.
		const nat = await call(client, 'backtrace', { target: String(hang.pid), native: true, locals: true });
		assert.equal(nat.isError, false, nat.text);
		const consumer = nat.text.split('"consumer"')[1].split('\n\n')[0].split('\n');
		const py = consumer.findIndex((l) => /\.py:\d+\)/.test(l));
		assert.ok(py > 1 && consumer.slice(1, py).every((l) => /^  #\d+ +.* \([^:]*\)$/.test(l)), consumer.join('\n'));
		assert.match(nat.text, /q = <queue\.Queue object/);
	});

	it('backtrace with tasks: an asyncio deadlock named', async () => {
		const srv = await startTarget(dir, path.join(ROOT, 'examples', 'asyncio_server.py'),
			{ args: ['--deadlock'], ready: 'READY' });
		try {
			const { tools } = await client.listTools();
			const bt = tools.find((t) => t.name === 'backtrace');
			assert.equal(bt.inputSchema.properties.tasks.type, 'boolean');
			let r;
			for (let i = 0; i < 50; i++) { // ping and pong awaiting each other
				r = await call(client, 'backtrace', { target: String(srv.pid), tasks: true });
				if (/deadlock: (ping|pong) awaits/.test(r.text)) break;
				await sleep(200);
			}
			assert.equal(r.isError, false, r.text);
			assert.match(r.text, /asyncio tasks of its event loop \(9\):/);
			assert.match(r.text, /worker-0 \(worker\) pending, awaits asyncio Queue\.get/);
			assert.match(r.text, /deadlock: (ping|pong) awaits (pong|ping) awaits \1 \(a cycle of awaits/);
		} finally {
			await srv.stop();
		}
	});

	it('flamegraph with tasks: an asyncio program\'s tasks as rows', async () => {
		const srv = await startTarget(dir, path.join(ROOT, 'examples', 'asyncio_server.py'),
			{ args: ['--busy'], ready: 'READY' });
		try {
			const { tools } = await client.listTools();
			const fg = tools.find((t) => t.name === 'flamegraph');
			assert.equal(fg.inputSchema.properties.tasks.type, 'boolean');
			const r = await call(client, 'flamegraph', { target: String(srv.pid), duration: '2s', tasks: true });
			assert.equal(r.isError, false, r.text);
			const rows = JSON.parse(r.text);
			const names = rows.map((x) => x.function);
			assert.ok(names.includes('task render') && names.includes('task score'), r.text);
		} finally {
			await srv.stop();
		}
	});

	it('query and describe_tables; bad SQL and bad arguments are tool errors', async () => {
		const t = String(train.pid);
		const rows = JSON.parse((await call(client, 'query', {
			target: t, sql: "SELECT func FROM python.backtrace WHERE thread_name = 'MainThread' ORDER BY depth DESC LIMIT 2",
		})).text);
		assert.deepEqual(rows.map((r) => r.func), ['<module>', 'main']);
		const bad = await call(client, 'query', { target: t, sql: 'SELEC 1' });
		assert.equal(bad.isError, true);
		assert.match(bad.text, /syntax error/);
		const tables = JSON.parse((await call(client, 'describe_tables', { target: t })).text);
		assert.ok(tables.some((r) => r.name === 'process.memory' && r.kind === 'recorded'), JSON.stringify(tables));
		const cols = JSON.parse((await call(client, 'describe_tables', { target: t, table: 'python.backtrace' })).text);
		assert.ok(cols.some((c) => c.name === 'func' && c.type === 'TEXT'), JSON.stringify(cols));
		const inj = await call(client, 'describe_tables', { target: t, table: "x'); DROP" });
		assert.equal(inj.isError, true);
		assert.match(inj.text, /schema\.name/);
		const missing = await call(client, 'query', { sql: 'SELECT 1' });
		assert.equal(missing.isError, true);
		assert.match(missing.text, /needs 'target'/);
		const typed = await call(client, 'backtrace', { target: t, locals: 'yes' });
		assert.equal(typed.isError, true);
		assert.match(typed.text, /'locals' is a boolean/);
		const gone = await call(client, 'backtrace', { target: '999999999' });
		assert.equal(gone.isError, true);
		assert.match(gone.text, /no such process|not a pid|no process/i);
	});

	it('memory, flamegraph and torch_module_times of the training process', async () => {
		const t = String(train.pid);
		const mem = await call(client, 'memory', { target: t });
		assert.equal(mem.isError, false, mem.text);
		assert.match(mem.text, /rss [\d.]+ MiB/);
		assert.match(mem.text, /Top types by count/);
		const fg = await call(client, 'flamegraph', { target: t, duration: '1s', top: 10 });
		assert.equal(fg.isError, false, fg.text);
		const top = JSON.parse(fg.text);
		assert.ok(top.length > 0 && top.length <= 10, fg.text);
		assert.ok(top.some((r) => r.where.endsWith('examples/train.py')), fg.text);
		assert.ok(top.every((r) => Number(r['self%']) <= Number(r['total%'])), fg.text);
		const torch = await call(client, 'torch_module_times', { target: t, duration: '1s' });
		assert.equal(torch.isError, false, torch.text);
		assert.match(torch.text, /^MLP\tforward\tcpu\t\d+\t/m);
		assert.match(torch.text, /^SGD\tstep\tcpu\t\d+\t/m);
		const long = await call(client, 'flamegraph', { target: t, duration: '10m' });
		assert.equal(long.isError, true);
		assert.match(long.text, /at most 2m/);
	});

	it('hangs: the watchdog\'s hang, listed and shown; and as a resource', async () => {
		const t = String(hang.pid);
		let list;
		for (let i = 0; i < 100; i++) {
			list = await call(client, 'hangs', { target: t });
			if (/^1\t/m.test(list.text)) break;
			await sleep(100);
		}
		assert.match(list.text, /^1\t.*\tstuck\t.*probing-hang-\d+-.*\.txt$/m);
		const one = await call(client, 'hangs', { target: t, id: 1 });
		assert.equal(one.isError, false, one.text);
		assert.match(one.text, /"MainThread" \(stuck, main\)/);
		assert.match(one.text, /main \(.*hang\.py:\d+\)/);
		const { resources } = await client.listResources();
		const r = resources.find((x) => x.uri === `probing://hang/${t}/1`);
		assert.ok(r, JSON.stringify(resources));
		assert.match(r.title, /stuck in/);
		const read = await client.readResource({ uri: r.uri });
		assert.match(read.contents[0].text, /"MainThread" \(stuck, main\)/);
	});

	it('report: the crashed process\'s report, as a tool and as a resource', async () => {
		const { resources } = await client.listResources();
		const r = resources.find((x) => x.uri.startsWith('file://') && x.uri.includes(`probing-crash-${crashed.pid}-`));
		assert.ok(r, JSON.stringify(resources));
		assert.match(r.title, /signal 11/);
		const read = await client.readResource({ uri: r.uri });
		assert.match(read.contents[0].text, /SIGSEGV/);
		assert.match(read.contents[0].text, /string_at/);
		const tool = await call(client, 'report', { file: r.uri.slice('file://'.length) });
		assert.equal(tool.text, read.contents[0].text);
		await assert.rejects(client.readResource({ uri: 'file:///etc/passwd' }), /not found/i);
		await assert.rejects(client.readResource({ uri: 'probing://hang/1/x' }), /not found/i);
	});

	it('a recording: the crashed process queried after it is gone', async () => {
		const q = await call(client, 'query', {
			target: String(crashed.pid), sql: 'SELECT count(*) AS n FROM process.memory',
		});
		assert.equal(q.isError, false, q.text);
		assert.ok(JSON.parse(q.text)[0].n >= 1, q.text);
		assert.match(q.text, /"n":\s*\d+/);
	});

	it('cluster_backtrace and cluster_hang on the torchrun job', async () => {
		const t = String(job.pids[0]);
		let hang;
		for (let i = 0; i < 60; i++) {
			hang = await call(client, 'cluster_hang', { target: t });
			if (/rank 1 has not reached it/.test(hang.text)) break;
			await sleep(500);
		}
		assert.match(hang.text, /rank 0 waits? in all_reduce #4/);
		assert.match(hang.text, /rank 1 has not reached it \(it is in load_batch \(ddp_train\.py:\d+\)/);
		const bt = await call(client, 'cluster_backtrace', { target: t });
		assert.equal(bt.isError, false, bt.text);
		assert.match(bt.text, /load_batch/);
		assert.match(bt.text, /rank 0/);
		const single = await call(client, 'cluster_hang', { target: String(train.pid) });
		assert.equal(single.isError, true);
		assert.match(single.text, /not in a torch\.distributed job/);
	});

	it('diagnose: the playbooks\' verdicts on the hung process and the job', async () => {
		const h = await call(client, 'diagnose', { target: String(hang.pid), playbook: 'hang', duration: '1s' });
		assert.equal(h.isError, false, h.text);
		assert.match(h.text, /^verdict: the main thread is stuck in main \(hang\.py:\d+\) for \d+ s/, h.text);
		assert.match(h.text, /thread consumer: .*consumer \(hang\.py:\d+\)/);
		const j = await call(client, 'diagnose', { target: String(job.pids[1]), playbook: 'hang' });
		assert.match(j.text, /^verdict: rank 0 waits? in all_reduce #4 .*rank 1 has not reached it \(it is in load_batch/, j.text);
		const bad = await call(client, 'diagnose', { target: String(hang.pid), playbook: 'everything' });
		assert.equal(bad.isError, true);
		assert.match(bad.text, /not one of the choices/);
	});

	it('eval with --allow-eval; refused by an agent in read-only mode', async () => {
		const ok = await call(evalClient, 'eval', { target: String(train.pid), code: 'sum(p.numel() for p in model.parameters()) if "model" in dir() else 6 * 7' });
		assert.equal(ok.isError, false, ok.text);
		assert.match(ok.text, /^\d+\n?$/);
		const ro = await startTarget(dir, 'import time\nprint("ready", flush=True)\nwhile True: time.sleep(0.1)\n',
			{ ready: 'ready', env: { PROBING_READONLY: '1' } });
		try {
			const no = await call(evalClient, 'eval', { target: String(ro.pid), code: '1 + 1' });
			assert.equal(no.isError, true, no.text);
			assert.match(no.text, /read-only/);
		} finally {
			await ro.stop();
		}
	});
});
