// The whole job in a real VS Code (issue 32): "job": true on torchrun's pid
// opens a session per rank under the job's; Probing: Pause the Whole Job
// pauses both; F9 on the training loop's line and Probing: Continue the
// Whole Job stop the job again (a rank at the breakpoint, the other with
// it: stop-all); each rank's Variables show its own tensor and rank; the
// whole job continued runs; Disconnect on the job's session ends every
// rank's and leaves the job training.
// Then Probing: Why Is the Job Stuck? on a job with a rank stuck: the
// verdict, the odd rank's stack first, a frame's link opening its line.
// Photographed into PROBING_EDITOR_ARTIFACTS/job (default
// BUILD/editor-artifacts/job).
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const cp = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Editor, ROOT, BUILD, sleep } = require('../lib/editor');

const PYTHON = '/usr/bin/python3';
const TORCHRUN = '/usr/bin/torchrun';
const CLI = path.join(BUILD, 'cli', 'probing');
const VSIX = path.join(ROOT, 'vscode-extension', 'probing.vsix');
const ARTIFACTS = path.join(path.resolve(process.env.PROBING_EDITOR_ARTIFACTS ||
	path.join(BUILD, 'editor-artifacts')), 'job');
const EXAMPLE = fs.readFileSync(path.join(ROOT, 'examples', 'ddp_train.py'), 'utf8');
const LINE = EXAMPLE.split('\n').findIndex((l) => l.includes('loss = nn.functional.mse_loss')) + 1;
const STUCK_LINE = EXAMPLE.split('\n').findIndex((l) => l.includes('time.sleep(0.05)')) + 1;

function haveTorch() {
	return fs.existsSync(TORCHRUN) &&
		cp.spawnSync(PYTHON, ['-c', 'import torch.distributed'], { stdio: 'ignore' }).status === 0;
}

// What a torchrun job needs from this torch (tests/e2e/torchenv.py).
function torchEnv(dir) {
	const code = 'import json, sys; sys.path.insert(0, sys.argv[1]); import torchenv; ' +
		'print(json.dumps(torchenv.torch_env(sys.argv[2])))';
	const r = cp.spawnSync(PYTHON, ['-c', code, path.join(ROOT, 'tests', 'e2e'), dir], { encoding: 'utf8' });
	if (r.status !== 0) throw new Error('torchenv: ' + r.stderr);
	return JSON.parse(r.stdout);
}

// A 2-rank gloo job of the folder's ddp_train.py, every process with an
// agent (PROBING=2); its ranks' pids once each printed its own.
class Job {
	constructor(folder, name, args) {
		this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `probing-editor-${name}-`));
		this.out = path.join(this.dir, 'job.out');
		const port = 29000 + Math.floor(Math.random() * 1000);
		this.proc = cp.spawn(TORCHRUN, ['--redirects', '1', '--tee', '1', '--log_dir', path.join(this.dir, 'logs'),
			'--monitor_interval', '120', '--master_port', String(port), '--nproc_per_node', '2',
			path.join(folder, 'ddp_train.py'), ...args], {
			cwd: this.dir, detached: true, stdio: ['ignore', fs.openSync(this.out, 'w'), 'ignore'],
			env: { ...process.env, PROBING: '2', PYTHONUSERBASE: path.join(BUILD, 'userbase'),
				PYTHONUNBUFFERED: '1', OMP_NUM_THREADS: '1', ...torchEnv(this.dir) },
		});
		this.pids = {};
	}

	text() {
		return fs.existsSync(this.out) ? fs.readFileSync(this.out, 'utf8') : '';
	}

	steps() {
		return (this.text().match(/step \d+:/g) || []).length;
	}

	// Every rank started and registered in the job's cluster.nodes.
	async started(training = true) {
		const until = Date.now() + 240000;
		for (;;) {
			for (const m of this.text().matchAll(/rank (\d+) of \d+: pid (\d+)/g)) this.pids[m[1]] = Number(m[2]);
			if (Object.keys(this.pids).length === 2 && (!training || /step 0:/.test(this.text()))) break;
			if (Date.now() > until) throw new Error('the job did not start:\n' + this.text());
			await sleep(200);
		}
		for (;;) {
			const r = cp.spawnSync(CLI, ['-t', String(this.pids[0]), 'query', '-f', 'json',
				"SELECT count(*) AS n FROM cluster.nodes WHERE role = 'rank'"], { encoding: 'utf8' });
			if (r.status === 0 && JSON.parse(r.stdout)[0].n === 2) return;
			if (Date.now() > until) throw new Error('ranks not registered: ' + r.stderr);
			await sleep(500);
		}
	}

	async trainsOn() {
		const before = this.steps();
		for (let i = 0; i < 600 && this.steps() <= before; i++) await sleep(100);
		assert.ok(this.steps() > before, `the job does not train:\n${this.text().slice(-2000)}`);
	}

	stop() {
		for (const pid of [...Object.values(this.pids), this.proc.pid]) {
			try { process.kill(pid, 'SIGKILL'); } catch (e) { /* gone */ }
		}
		fs.rmSync(this.dir, { recursive: true, force: true });
	}
}

// A rank's session row in the Call Stack view ("rank N (HOST:PID)", with
// its one thread's state: VS Code shows a session of one thread as one
// row, "Paused On Breakpoint").
function rankRow(rows, n) {
	return rows.find((t) => t.startsWith(`rank ${n} (`)) || '';
}

// The frames under rank n's row (up to the next rank's).
function framesOf(rows, n) {
	const i = rows.findIndex((t) => t.startsWith(`rank ${n} (`));
	if (i < 0) return [];
	const rest = rows.slice(i + 1);
	const end = rest.findIndex((t) => /^rank \d+ \(/.test(t));
	return end < 0 ? rest : rest.slice(0, end);
}

// A rank's `train` frame clicked (its session expanded first, as a person
// would): the Variables view shows its locals.
async function ranksLocals(ed, rank) {
	let rows = await ed.viewText('.debug-call-stack');
	if (!framesOf(rows, rank).some((t) => /^train ddp_train\.py/.test(t))) {
		// On its twistie: the row's middle holds, under the pointer, the
		// session's Continue and Step buttons.
		await ed.page.locator('.debug-call-stack .monaco-list-row', { hasText: `rank ${rank} (` }).first()
			.click({ position: { x: 25, y: 10 } });
		rows = await ed.waitView('.debug-call-stack',
			(r) => framesOf(r, rank).some((t) => /^train ddp_train\.py/.test(t)), `rank ${rank}'s frames`);
	}
	const at = rows.findIndex((t) => t.startsWith(`rank ${rank} (`));
	const frame = rows.findIndex((t, i) => i > at && /^train ddp_train\.py/.test(t));
	assert.ok(at >= 0 && frame > at, `no train frame of rank ${rank}:\n${rows.join('\n')}`);
	await ed.page.locator('.debug-call-stack .monaco-list-row').nth(frame).click();
	await ed.waitView('.debug-variables', (r) => r.includes('Locals'), `rank ${rank}'s scopes`);
	const shown = await ed.viewText('.debug-variables');
	if (!shown.some((t) => /^x =/.test(t))) {
		const row = ed.page.locator('.debug-variables .monaco-list-row', { hasText: /^Locals$/ }).first();
		if ((await row.getAttribute('aria-expanded')) !== 'true') await row.click();
	}
	return ed.waitView('.debug-variables',
		(r) => r.some((t) => t === `rank = ${rank}`) && r.some((t) => /^x =/.test(t)), `rank ${rank}'s locals`);
}

test('a torchrun job in VS Code: a session per rank, stop-all, each rank\'s tensor, the whole job continued; why the job is stuck',
	{ timeout: 900000, skip: !haveTorch() && 'no torchrun here' }, async () => {
		assert.ok(fs.existsSync(VSIX), `no ${VSIX}: scripts/build-extension makes it`);
		const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-editor-job-'));
		fs.writeFileSync(path.join(folder, 'ddp_train.py'), EXAMPLE);
		const job = new Job(folder, 'job', ['--step-sleep', '0.01']);
		let stuck, ed;
		try {
			await job.started();
			fs.mkdirSync(path.join(folder, '.vscode'));
			fs.writeFileSync(path.join(folder, '.vscode', 'launch.json'), JSON.stringify({
				version: '0.2.0',
				configurations: [{ type: 'probing', request: 'attach', name: 'Attach to the job',
					processId: job.proc.pid, job: true }],
			}, null, 2));
			ed = await Editor.start({
				folder, vsix: VSIX, artifacts: ARTIFACTS,
			});
			// The job's session, a session per rank under it, running.
			await ed.command('Debug: Select and Start Debugging');
			await ed.pick('Attach to the job');
			const host = os.hostname();
			let rows = await ed.waitView('.debug-call-stack', (r) => [0, 1].every((n) =>
				rankRow(r, n).startsWith(`rank ${n} (${host}:${job.pids[n]})`) && /Running/i.test(rankRow(r, n))),
			'a running session per rank', 120000);
			assert.ok(rows.some((t) => t.startsWith('Attach to the job')), rows.join('\n'));
			await ed.photo('job-attached');

			// The whole job paused, then a breakpoint by F9 (so both ranks
			// have it before either can reach it: a rank that stops holds
			// the other in its next collective, in C, where neither a
			// breakpoint nor a pause lands), the whole job continued: one
			// rank stops at the breakpoint, the other with it (stop-all).
			await ed.command('Probing: Pause the Whole Job');
			await ed.waitView('.debug-call-stack', (r) => [0, 1].every((n) => /Paused/i.test(rankRow(r, n))),
				'both ranks paused by the job\'s pause', 60000);
			await ed.open('ddp_train.py');
			await ed.breakpoint(LINE, true);
			await sleep(1000); // the breakpoint sent to both sessions
			await ed.command('Probing: Continue the Whole Job');
			rows = await ed.waitView('.debug-call-stack', (r) =>
				[0, 1].some((n) => /Paused On Breakpoint/i.test(rankRow(r, n))) &&
				[0, 1].every((n) => /Paused/i.test(rankRow(r, n))),
			'a rank at the breakpoint, both stopped', 120000);
			await ed.photo('job-stopped');

			// Each rank's own variables: its rank and its batch.
			for (const n of [0, 1]) {
				const vars = await ranksLocals(ed, n);
				assert.match(vars.find((t) => /^x =/.test(t)), /Tensor\(shape=\[32, 64\], dtype=float32, device=cpu\)/,
					vars.join('\n'));
				await ed.photo(`rank-${n}-variables`);
			}

			// The breakpoint off, the whole job continued: both run.
			await ed.open('ddp_train.py');
			await ed.breakpoint(LINE, false);
			await ed.command('Probing: Continue the Whole Job');
			await ed.waitView('.debug-call-stack', (r) => !r.some((t) => /Paused/i.test(t)), 'both ranks running', 30000);
			await job.trainsOn();
			await ed.photo('job-continued');

			// Disconnect on the job's session (selected in the Call Stack,
			// on its name: the row's middle holds its buttons) ends every
			// rank's session too; the job trains on.
			await ed.page.locator('.debug-call-stack .monaco-list-row', { hasText: 'Attach to the job' }).first()
				.click({ position: { x: 60, y: 10 } });
			await ed.key('Shift+F5');
			await ed.waitView('.debug-call-stack', (r) => !r.some((t) => /^rank \d+ \(/.test(t)),
				'the sessions to end', 30000);
			// The job's own session too (it ends after its ranks'): until
			// then the editor's commands still take it as their target
			// (CI: Why Is the Job Stuck? asked the job that had ended).
			await ed.waitView('.debug-call-stack', (r) => r.length === 0, 'the job\'s session to end', 30000);
			await ed.page.locator('.debug-toolbar').waitFor({ state: 'hidden', timeout: 30000 });
			await job.trainsOn();
			await ed.photo('job-disconnected');
			job.stop();

			// A job with rank 1 stuck reading its data, rank 0 waiting
			// for it in the all-reduce: the verdict, rank 1's stack first.
			stuck = new Job(folder, 'stuck', ['--hang-rank', '1', '--hang-step', '3']);
			await stuck.started(false);
			await ed.command('Probing: Why Is the Job Stuck?');
			await ed.pick(`${stuck.pids[0]} `, { filter: true });
			await ed.page.locator(`.tab[aria-label^="why-stuck-${stuck.pids[0]}.txt"]`).first()
				.waitFor({ timeout: 60000 });
			await sleep(500);
			const text = await ed.editorText();
			assert.match(text, /verdict: rank 0 waits in all_reduce/, text);
			assert.match(text, /rank 1 has not reached it/, text);
			const first = text.search(/load_batch \(\/.*ddp_train\.py:\d+\)/);
			const other = text.search(/backward \(/);
			assert.ok(first >= 0 && (other < 0 || first < other), `rank 1's stack first:\n${text}`);
			await ed.photo('why-stuck');
			// The frame's link opens its line.
			// (The link's own span: Monaco splits a line's text around the
			// link it underlines.)
			const link = ed.page.locator('.view-line span',
				{ hasText: new RegExp(`^/\\S*/ddp_train\\.py:${STUCK_LINE}$`) }).first();
			// (Clicked again while the line is not shown: under load the
			// link can be underlined before its target is resolved.)
			const source = ed.page.locator('.statusbar-item', { hasText: new RegExp(`Ln ${STUCK_LINE},`) }).first();
			for (let attempt = 0; ; attempt++) {
				await link.click({ modifiers: ['Control'] });
				try {
					await ed.page.locator('.tab.active[aria-label^="ddp_train.py"]').first().waitFor({ timeout: 10000 });
					await source.waitFor({ timeout: 10000 });
					break;
				} catch (e) {
					if (attempt === 2) throw e;
					await ed.page.locator('.tab[aria-label^="why-stuck-"]').first().click();
					await sleep(500);
				}
			}
			await ed.photo('why-stuck-source');
		} finally {
			if (ed) await ed.stop();
			job.stop();
			if (stuck) stuck.stop();
			fs.rmSync(folder, { recursive: true, force: true });
		}
	});
