'use strict';
// `probing web` in a real browser: Debian's chromium driven by
// playwright-core, against live processes — examples/train.py (torch),
// examples/hang.py with the hang watchdog on, a process that crashed (its
// report), and a 2-rank torchrun job of examples/ddp_train.py with rank 1
// stuck.  Each page loads and shows the right names and values; the SQL
// console runs a query and shows an error for bad SQL; the flamegraph zooms
// on a click.  Screenshots go to PROBING_WEB_ARTIFACTS (default
// BUILD/web-artifacts).

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const cp = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');
const { ROOT, BUILD, PROBING, startTarget, startJob, sleep } = require('../../lib/procs');

const ARTIFACTS = process.env.PROBING_WEB_ARTIFACTS || path.join(BUILD, 'web-artifacts');
// Steps of 20 ms and more, each timed by the program itself from the end of
// one optimizer step to the end of the next (as the agent times them).
const STEPS = `import time, torch
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
worst_ms = 0.0   # the longest step
pair_ms = 0.0    # the longest two steps in a row
print("READY", flush=True)
last, prev = time.perf_counter(), 0.0
while True:
    time.sleep(0.02)
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    now = time.perf_counter()
    ms = (now - last) * 1000
    worst_ms, pair_ms = max(worst_ms, ms), max(pair_ms, prev + ms)
    last, prev = now, ms
`;
const CRASH = 'import ctypes, time\nprint("ready", flush=True)\ntime.sleep(2)\nctypes.string_at(0)\n';

// GET or POST url with headers: {status, body}.
function request(url, { method = 'GET', headers = {} } = {}) {
	return new Promise((resolve, reject) => {
		const r = http.request(url, { method, headers }, (res) => {
			let body = '';
			res.on('data', (d) => { body += d; });
			res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
		});
		r.on('error', reject);
		r.end();
	});
}

describe('probing web in chromium', () => {
	let dir, train, hang, crashed, job, server, url, base, token, browser, page;

	const shot = (name) => page.screenshot({ path: path.join(ARTIFACTS, name + '.png'), fullPage: true });
	// The page afresh at hash, once its view has come.
	const open = async (hash) => {
		await page.goto(`${base}/?load=${Date.now()}#${hash}`);
		await page.waitForFunction(() => !/^Loading/.test(document.querySelector('#main').textContent));
	};
	// A selector, or a failure that says what the page showed instead.
	const waitFor = async (sel, timeout = 60000) => {
		try {
			return await page.waitForSelector(sel, { timeout });
		} catch (e) {
			throw new Error(`${sel} did not come; the page shows: ${await page.textContent('#main')}`);
		}
	};
	const cells = (sel) => page.$$eval(sel + ' td', (tds) => tds.map((t) => t.textContent));

	before(async () => {
		fs.mkdirSync(ARTIFACTS, { recursive: true });
		dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-web-'));
		train = await startTarget(dir, path.join(ROOT, 'examples', 'train.py'));
		hang = await startTarget(dir, path.join(ROOT, 'examples', 'hang.py'),
			{ env: { PROBING_HANG_TIMEOUT: '1s', PROBING_CRASH_PATH: dir } });
		crashed = await startTarget(dir, CRASH, { ready: 'ready', env: { PROBING_CRASH: '1', PROBING_CRASH_PATH: dir } });
		await crashed.done;
		job = await startJob(dir, 2, ['--hang-rank', '1', '--hang-step', '3']);
		server = cp.spawn(PROBING, ['web'], { env: { ...process.env, PROBING_DATA_DIR: path.join(dir, 'data') },
			stdio: ['ignore', 'pipe', 'pipe'] });
		url = await new Promise((resolve, reject) => {
			let out = '';
			server.stdout.on('data', (d) => {
				out += d;
				const m = out.match(/probing web: (http:\/\/\S+)/);
				if (m) resolve(m[1]);
			});
			server.on('exit', (code) => reject(new Error('probing web exited ' + code + ': ' + out)));
		});
		base = url.split('/?')[0];
		token = url.split('token=')[1];
		browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
			args: ['--no-sandbox', '--disable-gpu'] });
		page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
		page.setDefaultTimeout(60000);
		await page.goto(url); // the token becomes the cookie
	});

	after(async () => {
		if (browser) await browser.close();
		if (server) server.kill('SIGTERM');
		for (const p of [train, hang, crashed, job && job.proc]) if (p) await p.stop();
		if (dir) fs.rmSync(dir, { recursive: true, force: true });
	});

	it('the token: without it nothing, with it a cookie; Host must be the server', async () => {
		assert.equal((await request(base + '/api/agents')).status, 401);
		assert.equal((await request(base + '/')).status, 401);
		const r = await request(url);
		assert.equal(r.status, 303);
		assert.match(r.headers['set-cookie'][0], /HttpOnly; SameSite=Strict/);
		const port = new URL(base).port;
		const evil = await request(base + '/api/agents', { headers: { Host: 'evil.example:' + port, 'X-Probing-Token': token } });
		assert.equal(evil.status, 403);
		assert.match(r.headers['set-cookie'][0], new RegExp(`^probing_web_${port}=`)); // one per server
		const post = await request(base + `/api/profile/start?target=${train.pid}`,
			{ method: 'POST', headers: { Cookie: `probing_web_${port}=` + token } });
		assert.equal(post.status, 403, post.body); // a cookie alone does not start the sampler
	});

	it('a page on another port of this machine cannot use the session (issue 27)', async () => {
		// Same site as the server (127.0.0.1, any port): the browser sends
		// the SameSite=Strict cookie along; the server refuses anyway.
		const q = `${base}/api/query?target=${train.pid}&sql=SELECT%2041%2B1%20AS%20n`;
		const evil = http.createServer((req, res) => {
			res.setHeader('Content-Type', 'text/html');
			res.end(`<a id="go" href="${base}/api/agents">agents</a><a id="q" href="${q}">query</a>`);
		});
		await new Promise((resolve) => evil.listen(0, '127.0.0.1', resolve));
		try {
			const there = `http://127.0.0.1:${evil.address().port}/`;
			for (const id of ['#go', '#q']) {
				await page.goto(there);
				const [resp] = await Promise.all([page.waitForNavigation(), page.click(id)]);
				assert.equal(resp.status(), 403, await resp.text());
				assert.match(await resp.text(), /another page/);
			}
		} finally {
			evil.close();
		}
	});

	it('the agents, the recordings and the crash report', async () => {
		await open('');
		// The agent's tabs are not on this page (nav's display: flex
		// showed them, hidden, doing nothing).
		assert.equal(await page.isVisible('#tabs'), false);
		const text = await page.textContent('#main');
		for (const pid of [train.pid, hang.pid, job.pids[0], job.pids[1]]) assert.match(text, new RegExp(`\\b${pid}\\b`));
		assert.match(text, /signal 11/);
		await shot('agents');
		await page.click(`text=/probing-crash-${crashed.pid}-/`);
		await waitFor('.thread');
		const rep = await page.textContent('#main');
		assert.match(rep, /crash: /);
		assert.match(rep, /string_at/);
		await shot('crash-report');
	});

	it('stacks: every thread, refreshing; a frame\'s locals on click', async () => {
		await open(`agent/${hang.pid}`);
		await waitFor('.frame[data-func="consumer"]');
		const text = await page.textContent('#main');
		assert.match(text, /"MainThread" \(main/);
		assert.match(text, /consumer \(.*hang\.py:\d+\)/);
		const before = await page.textContent('#main > p.muted');
		await page.waitForFunction((b) => document.querySelector('#main > p.muted')?.textContent !== b, before, { timeout: 10000 });
		await page.click('.frame[data-func="consumer"]');
		await waitFor('.locals table');
		const loc = await cells('.locals');
		assert.equal(loc[loc.indexOf('q') + 1], 'Queue', loc.join('|'));
		await shot('stacks');
	});

	it('stacks with native frames: C frames around the Python ones, locals still on click', async () => {
		await open(`agent/${hang.pid}`);
		await waitFor('.frame[data-func="consumer"]');
		await page.check('#native');
		await waitFor('.frame.native');
		// The consumer thread waits in C (a lock): native frames inside
		// it, the Python frame, and the interpreter's frames under it.
		const rows = await page.$$eval('.thread', (ts) => ts.map((t) => [...t.querySelectorAll('.frame')].map((f) =>
			(f.classList.contains('native') ? 'N ' : 'P ') + f.textContent)));
		const consumer = rows.find((r) => r.some((x) => /^P #\d+ +consumer \(/.test(x)));
		assert.ok(consumer, JSON.stringify(rows).slice(0, 2000));
		// Innermost the C frames of the wait, then Python's (the queue's
		// and consumer), then the interpreter's under them.
		const first = consumer.findIndex((x) => x.startsWith('P '));
		const at = consumer.findIndex((x) => /^P #\d+ +consumer \(/.test(x));
		assert.ok(first > 0 && consumer.slice(0, first).every((x) => x.startsWith('N ')), consumer.join('|'));
		assert.ok(consumer.slice(at + 1).some((x) => x.startsWith('N ')), consumer.join('|'));
		// The checkbox holds across the refresh; a Python frame's locals
		// are still its own.
		const before = await page.textContent('#main > p.muted');
		await page.waitForFunction((b) => document.querySelector('#main > p.muted')?.textContent !== b, before, { timeout: 10000 });
		assert.equal(await page.isChecked('#native'), true);
		await page.click('.frame[data-func="consumer"]');
		await waitFor('.locals table');
		const loc = await cells('.locals');
		assert.equal(loc[loc.indexOf('q') + 1], 'Queue', loc.join('|'));
		await page.uncheck('#native');
		await page.waitForFunction(() => !document.querySelector('.frame.native'));
	});

	it('SQL: a query, its rows beside the catalog; bad SQL shows the error', async () => {
		await open(`agent/${train.pid}/sql`);
		await waitFor('.catalog h2');
		assert.match(await page.textContent('.catalog'), /python\.backtrace/);
		await page.fill('#sql', "SELECT func, lineno FROM python.backtrace WHERE thread_name = 'MainThread' ORDER BY depth DESC LIMIT 3");
		await page.click('#run');
		await waitFor('#sql-out table');
		const rows = await page.$$eval('#sql-out tr', (trs) => trs.map((t) => t.textContent));
		assert.equal(rows[1].startsWith('<module>'), true, rows.join('|'));
		assert.equal(rows[2].startsWith('main'), true, rows.join('|'));
		await shot('sql');
		await page.fill('#sql', 'SELEC 1');
		await page.click('#run');
		await page.waitForSelector('#sql-out .error');
		assert.match(await page.textContent('#sql-out'), /syntax error/);
		await page.click('.catalog div:has-text("process.memory")');
		await page.waitForSelector('#sql-out table');
		assert.match(await page.inputValue('#sql'), /SELECT \* FROM process\.memory LIMIT 100/);
	});

	it('flamegraph: recorded, and it zooms on a click; start and stop sampling', async () => {
		await open(`agent/${train.pid}/flame`);
		await page.click('#record5');
		const svg = page.frameLocator('iframe.flame');
		const frame = svg.locator('g.f[data-n^="train_step"]').first();
		await frame.waitFor({ timeout: 60000 });
		assert.match(await svg.locator('#unzoom').getAttribute('class'), /hide/);
		await frame.click();
		assert.equal(await svg.locator('#unzoom').getAttribute('class'), 'btn');
		assert.equal(Number(await frame.locator('rect').getAttribute('width')), 1180);
		await shot('flamegraph');
		await page.click('#start');
		await page.waitForFunction(() => /sampling since/.test(document.querySelector('.toolbar').textContent));
		await sleep(1500);
		await page.click('#stop');
		await page.waitForFunction(() => /stopped after/.test(document.querySelector('.toolbar').textContent));
		await page.frameLocator('iframe.flame').locator('g.f[data-n^="train"]').first().waitFor({ timeout: 60000 });
	});

	it('flamegraph by asyncio task: a root per task, the task\'s own frames under it', async () => {
		const busy = await startTarget(dir, path.join(ROOT, 'examples', 'asyncio_server.py'),
			{ args: ['--busy'], ready: 'READY' });
		try {
			await open(`agent/${busy.pid}/flame`);
			await page.check('#tasks');
			await page.click('#record5');
			const svg = page.frameLocator('iframe.flame');
			await svg.locator('g.f[data-n="task render"]').first().waitFor({ timeout: 60000 });
			await svg.locator('g.f[data-n="task score"]').first().waitFor({ timeout: 60000 });
			// Under the task, its coroutine (not the loop's frames).
			const kids = await svg.locator('g.f').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-n')));
			assert.ok(kids.some((n) => /^render \(/.test(n)), kids.join('|'));
			await shot('flamegraph-tasks');
			await page.uncheck('#tasks');
		} finally {
			await busy.stop();
		}
	});

	it('memory: the figures, RSS over time, the types', async () => {
		await open(`agent/${train.pid}/memory`);
		assert.match(await page.textContent('#rss'), /^RSS [\d.]+ MiB, peak [\d.]+ MiB, \d+ threads$/);
		assert.ok(Number(await page.getAttribute('canvas.chart', 'data-points')) >= 2);
		const c = await cells('#main');
		assert.ok(c.includes('dict'), c.join('|'));
		assert.ok(c.includes('torch.float32'), c.join('|'));
		// Bytes in a unit, not a raw count ("452338").
		const bytes = async (id) => page.$$eval(`#${id} tr`, (trs) => {
			const col = [...trs[0].children].findIndex((th) => th.textContent === 'bytes');
			return trs.slice(1).map((tr) => tr.children[col].textContent);
		});
		for (const id of ['py-types', 'tensors']) {
			const b = await bytes(id);
			assert.ok(b.length && b.every((x) => /^(\d+ B|\d+\.\d (KiB|MiB|GiB))$/.test(x)), id + ': ' + b.join('|'));
		}
		// No NVIDIA driver here (CI): the page says why there is no GPU
		// table (tests/gpu checks the table on a GPU).
		assert.match(await page.textContent('#gpu-why'), /^GPU: (no NVIDIA driver library|NVML)/);
		await shot('memory');
	});

	it('torch: module times, and step time over time', async () => {
		await open(`agent/${train.pid}/torch`);
		await page.click('#trace');
		await waitFor('#main table');
		const rows = await page.$$eval('#main table tr', (trs) => trs.map((t) => [...t.children].map((c) => c.textContent).join(' ')));
		assert.ok(rows.some((r) => r.startsWith('MLP forward ')), rows.join('|'));
		assert.ok(rows.some((r) => r.startsWith('SGD step ')), rows.join('|'));
		await shot('torch');
	});

	it('torch: no step of the chart spans time tracing was off', async () => {
		// A loop that times its own steps (20 ms of sleep and a little
		// work each); tracing on, off for 5 s, on again.  Each step
		// the chart shows took no longer than the program's slowest
		// (a step was the gap to the next traced one: 500 ms across the
		// time off).
		const steps = await startTarget(dir, STEPS, { ready: 'READY' });
		try {
			const config = (v) => cp.execFileSync(PROBING, ['-t', String(steps.pid), 'config', 'torch.profiling=' + v]);
			config('on');
			await sleep(2000);
			config('off');
			await sleep(5000);
			config('on');
			await sleep(2000);
			const rows = await page.evaluate(async (t) => (await fetch(`/api/series?target=${t}&what=steps`)).json(), steps.pid);
			const [worst, pair] = cp.execFileSync(PROBING, ['-t', String(steps.pid), 'eval', 'worst_ms, pair_ms'])
				.toString().replace(/[()\s]/g, '').split(',').map(Number);
			const ms = rows.map((r) => r.ms).filter((v) => typeof v === 'number');
			assert.ok(ms.length >= 20, JSON.stringify(rows.slice(0, 5)));
			assert.ok(worst >= 20, String(worst));
			// The agent's hook runs inside opt.step(), the program's
			// clock after it: a delay between the two moves time from
			// one step to the next as the agent sees them, never more
			// than the two steps in a row the program timed hold.
			const over = rows.filter((r) => r.ms > pair + 1);
			assert.deepEqual(over, [], `the program's slowest step ${worst} ms, two in a row ${pair} ms`);
			await open(`agent/${steps.pid}/torch`);
			assert.ok(Number(await page.getAttribute('canvas.chart', 'data-points')) >= 20);
		} finally {
			await steps.stop();
		}
	});

	it('hangs: the watchdog\'s hang and its stacks', async () => {
		await open(`agent/${hang.pid}/hangs`);
		await waitFor('#main table');
		// Times as dates, not Unix seconds ("1795719205.3963215").
		const c = await cells('#hang-list');
		assert.ok(!c.some((x) => /\d{9,}\.\d/.test(x)), c.join('|'));
		assert.ok(c.some((x) => /^(>= )?\d+\.\d s$/.test(x)), c.join('|'));
		await page.click('#main table tr:nth-child(2)');
		await waitFor('.thread');
		assert.match(await page.textContent('#main'), /Thread \d+ "MainThread" \(stuck, main\)/);
		await shot('hangs');
	});

	it('diagnose: the hang playbook\'s verdict', async () => {
		await open(`agent/${hang.pid}/diagnose`);
		await page.click('button[data-playbook="hang"]');
		await page.waitForSelector('#diagnosis .verdict', { timeout: 60000 });
		assert.match(await page.textContent('#diagnosis .verdict'), /^the main thread is stuck in main \(hang\.py:\d+\)/);
		await shot('diagnose');
	});

	it('cluster: the ranks, the odd stack out, and the verdict', async () => {
		let verdict = '';
		for (let i = 0; i < 60 && !/rank 1 has not reached it/.test(verdict); i++) {
			await open(`agent/${job.pids[0]}/cluster`);
			verdict = await page.textContent('#main');
			await sleep(500);
		}
		assert.match(await page.textContent('#cluster-verdict'), /rank 1 has not reached it \(it is in load_batch \(ddp_train\.py:\d+\)/);
		assert.match(await page.textContent('#main'), /load_batch/);
		await shot('cluster');
	});
});
