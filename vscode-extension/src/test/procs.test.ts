import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { agentPids, isPython, label, LABEL_MAX, listPythonProcesses, pickerItems } from '../procs';
import { escapeHtml, formatMs, renderTable } from '../table';

test('agents from /proc/net/unix: listening sockets only', () => {
	const text = [
		'Num       RefCount Protocol Flags    Type St Inode Path',
		'0000000000000000: 00000002 00000000 00010000 0001 01 123 @probing-4242',
		'0000000000000000: 00000003 00000000 00000000 0001 03 124 @probing-4242',
		'0000000000000000: 00000002 00000000 00010000 0001 01 125 @probing-17',
		'0000000000000000: 00000002 00000000 00010000 0001 01 126 @probing-x',
		'0000000000000000: 00000002 00000000 00010000 0001 01 127 /run/other.sock',
	].join('\n');
	assert.deepEqual([...agentPids(text)].sort(), [17, 4242]);
});

test('which processes are Python', () => {
	assert.equal(isPython('/usr/bin/python3.11', ['python3', 'x.py']), true);
	assert.equal(isPython('', ['/root/.pyenv/versions/3.11.7/bin/python3.11', 'x.py']), true);
	assert.equal(isPython('/usr/bin/node', ['node', 'python.js']), false);
	assert.equal(label(['/usr/bin/python3', 'train.py', '--lr', '3']), 'python3 train.py --lr 3');
});

test('listing a fake /proc', () => {
	const root = fs.mkdtempSync(path.join(os.tmpdir(), 'proc-'));
	const mk = (pid: number, argv: string[]) => {
		fs.mkdirSync(path.join(root, String(pid)));
		fs.writeFileSync(path.join(root, String(pid), 'cmdline'), argv.join('\0') + '\0');
	};
	mk(10, ['/usr/bin/python3', 'a.py']);
	mk(11, ['/bin/bash']);
	mk(12, ['python3.11', '-m', 'mod']);
	fs.mkdirSync(path.join(root, 'net'));
	fs.writeFileSync(path.join(root, 'net', 'unix'),
		'Num RefCount Protocol Flags Type St Inode Path\n0: 00000002 00000000 00010000 0001 01 1 @probing-12\n');
	assert.deepEqual(listPythonProcesses(root).map((p) => [p.pid, p.agent]), [[10, false], [12, true]]);
	fs.rmSync(root, { recursive: true, force: true });
});

test('query results as an HTML table, escaped', () => {
	assert.equal(escapeHtml('<a href="x">&\'</a>'), '&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;');
	const html = renderTable('SELECT 1', { columns: [{ name: 'a<b', type: 'TEXT' }, { name: 'n' }],
		rows: [['<script>', 3], [null, 4.5]], truncated: true, elapsedMs: 2 });
	assert.ok(html.includes('<th title="TEXT">a&lt;b</th>'));
	assert.ok(html.includes('<td>&lt;script&gt;</td><td class="num">3</td>'));
	assert.ok(html.includes('<td class="null">NULL</td>'));
	assert.ok(html.includes('2 rows (truncated), 2 ms'));
	assert.ok(!html.includes('<script>'));
});

test('the picker: agents first, the pid leading a bounded label', () => {
	const long = ['/usr/bin/python3', '-m', 'torch.distributed.run', '--nproc-per-node', '8', '--rdzv-endpoint',
		'host:29500', 'train.py', '--config', 'a/very/long/path/to/config.yaml', '--lr', '3e-4'];
	const items = pickerItems([
		{ pid: 30, argv: ['/usr/bin/python3', 'b.py'], agent: false },
		{ pid: 200, argv: long, agent: true },
		{ pid: 7, argv: ['python3', 'a.py'], agent: false },
		{ pid: 100, argv: ['python3', 'c.py'], agent: true },
	]);
	assert.deepEqual(items.map((i) => i.pid), [100, 200, 7, 30]);
	assert.equal(items[0].label, '100  python3 c.py');
	assert.equal(items[0].description, 'agent running');
	assert.equal(items[2].description, 'no agent yet: it will be injected');
	assert.ok(items[1].label.startsWith('200  python3 -m torch.distributed.run'));
	assert.equal(items[1].label.length, '200  '.length + LABEL_MAX);
	assert.ok(items[1].label.endsWith('…'));
});

test('elapsed time in the SQL view: a few digits', () => {
	assert.equal(formatMs(13.721805000212044), '13.7 ms');
	assert.equal(formatMs(0.2134), '0.213 ms');
	assert.equal(formatMs(2), '2 ms');
	assert.equal(formatMs(1204.6), '1,205 ms');
	assert.ok(renderTable('SELECT 1', { columns: [{ name: 'x' }], rows: [[1]], elapsedMs: 13.721805000212044 })
		.includes('1 row, 13.7 ms'));
});
