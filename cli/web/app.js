// probing web: the page.  Every view asks `probing web` for one route
// (/api/...), each answered by a command of the CLI; nothing here talks to
// an agent, and nothing is fetched from anywhere else.
'use strict';

const S = { target: null, tab: 'stacks', token: null, timer: null, frame: null, native: false, reading: false };

// ---- small helpers --------------------------------------------------------

function el(tag, attrs, ...kids) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) {
		if (k === 'on') for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
		else if (k === 'class') e.className = v;
		else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
	}
	for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
	return e;
}

// Replaces node's children with kids (arrays flattened, null and
// undefined left out).
function put(node, ...kids) {
	node.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined));
	return node;
}

function show(...nodes) { return put(document.getElementById('main'), ...nodes); }

async function api(path, params = {}, post = false) {
	const q = new URLSearchParams();
	for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.set(k, v);
	const opts = { method: post ? 'POST' : 'GET', credentials: 'same-origin', headers: {} };
	if (post) {
		if (!S.token) S.token = (await (await fetch('/api/session', { credentials: 'same-origin' })).json()).token;
		opts.headers['X-Probing-Token'] = S.token;
	}
	const r = await fetch(path + (q.toString() ? '?' + q : ''), opts);
	const text = await r.text();
	if (!r.ok) {
		let msg = text;
		try { msg = JSON.parse(text).error; } catch (e) { /* not JSON */ }
		throw new Error(msg.replace(/^probing: /, ''));
	}
	return JSON.parse(text);
}

function table(rows, cols, opts = {}) {
	cols = cols || (rows.length ? Object.keys(rows[0]) : []);
	return el('table', { class: opts.class, id: opts.id },
		el('tr', {}, cols.map((c) => el('th', {}, c))),
		rows.map((r) => el('tr', { class: opts.rowClass ? opts.rowClass(r) : null,
			on: opts.click ? { click: () => opts.click(r) } : {} },
		cols.map((c) => {
			const v = r[c];
			const num = typeof v === 'number' || (typeof v === 'string' && /^-?[\d.]+$/.test(v));
			return el('td', { class: num ? 'num' : null }, v === null || v === undefined ? '' : v);
		}))));
}

// Each GPU as NVML last saw it (probing memory's "gpu"), or the one line
// that says why there is none; nothing from an agent that does not send it.
function gpuView(g) {
	if (!g) return null;
	const devs = g.devices || [];
	if (!devs.length) return [el('h2', {}, 'GPU'), el('p', { class: 'muted', id: 'gpu-why' }, g.message || 'GPU: no device')];
	const f = (v, d, unit) => (v === null || v === undefined ? '-' : v.toFixed(d) + unit);
	const rows = devs.map((d) => ({
		device: d.index, name: d.name, util: f(d.gpuUtil, 0, '%'), mem_util: f(d.memUtil, 0, '%'),
		used: f(d.memoryUsed, 0, ' MiB'), total: f(d.memoryTotal, 0, ' MiB'),
		this_process: f(d.processMemory, 0, ' MiB'), power: f(d.power, 0, ' W'),
		temp: f(d.temperature, 0, ' C'), sm_clock: f(d.smClock, 0, ' MHz'), mem_clock: f(d.memClock, 0, ' MHz'),
		throttle: d.throttle === null || d.throttle === undefined ? '-' : (d.throttle || 'none'),
		xid: d.xidCount === null || d.xidCount === undefined ? '-' : (d.xidCount ? `${d.xidCount} (last ${d.lastXid})` : '0'),
	}));
	return [el('h2', {}, 'GPU (NVML; gpu.utilization over time)'), el('div', { id: 'gpu' }, table(rows))];
}

function error(e) { return el('p', { class: 'error' }, String(e.message || e)); }

function base(file) { return (file || '?').split('/').pop(); }

// The program's own code: not Python's, not torch's, not an installed package's.
function own(file) {
	return !!file && file[0] !== '<' && !/\/torch\/|\/lib\/python|site-packages\/|dist-packages\//.test(file);
}

function fmtTime(ts) { return new Date(ts * 1000).toLocaleTimeString(); }

// A moment (Unix seconds, a number or its text) as a local date and time.
function fmtWhen(ts) {
	const t = Number(ts);
	if (ts === null || ts === undefined || ts === '' || !Number.isFinite(t)) return '';
	const d = new Date(t * 1000);
	return d.toLocaleDateString() + ' ' + d.toLocaleTimeString();
}

// A byte count in the unit that reads best: 512 B, 25.3 KiB, 1.8 MiB.
function fmtBytes(n) {
	const v = Number(n);
	if (n === null || n === undefined || !Number.isFinite(v)) return '';
	const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
	let i = 0, x = v;
	while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
	return i ? x.toFixed(1) + ' ' + units[i] : v + ' B';
}

// A line chart of rows' y over ts on a canvas: the axes' ends labelled.
function chart(rows, y, unit) {
	const c = el('canvas', { class: 'chart', 'data-points': rows.length });
	requestAnimationFrame(() => {
		const w = c.width = c.clientWidth, h = c.height = c.clientHeight;
		const g = c.getContext('2d');
		const pts = rows.filter((r) => typeof r[y] === 'number');
		g.font = '12px sans-serif';
		g.fillStyle = '#6b7385';
		if (pts.length < 2) { g.fillText('not enough points yet', 10, 20); return; }
		// A gap in the series (nothing recorded for a while: tracing was
		// off) is a gap in the line, not a line drawn across it.
		const steps = pts.slice(1).map((p, i) => p.ts - pts[i].ts).sort((a, b) => a - b);
		const gap = Math.max(10 * steps[steps.length >> 1], 1);
		const x0 = pts[0].ts, x1 = pts[pts.length - 1].ts;
		let lo = Math.min(...pts.map((p) => p[y])), hi = Math.max(...pts.map((p) => p[y]));
		if (hi === lo) { hi += 1; lo = Math.max(0, lo - 1); }
		const L = 60, R = 10, T = 10, B = 22;
		const px = (t) => L + (t - x0) / (x1 - x0 || 1) * (w - L - R);
		const py = (v) => T + (1 - (v - lo) / (hi - lo)) * (h - T - B);
		g.strokeStyle = '#d8dce4';
		g.strokeRect(L, T, w - L - R, h - T - B);
		g.fillText(hi.toFixed(1) + ' ' + unit, 2, T + 10);
		g.fillText(lo.toFixed(1) + ' ' + unit, 2, h - B);
		g.fillText(fmtTime(x0), L, h - 6);
		g.fillText(fmtTime(x1), w - R - 60, h - 6);
		g.strokeStyle = '#2457c5';
		g.lineWidth = 1.5;
		g.beginPath();
		pts.forEach((p, i) => (i && p.ts - pts[i - 1].ts <= gap ? g.lineTo : g.moveTo).call(g, px(p.ts), py(p[y])));
		g.stroke();
	});
	return c;
}

// ---- the agents -------------------------------------------------------------

async function home() {
	document.getElementById('tabs').hidden = true;
	document.getElementById('where').textContent = 'agents on this machine';
	const m = show(el('p', { class: 'muted' }, 'Loading…'));
	try {
		const [agents, runs] = await Promise.all([api('/api/agents'),
			api('/api/runs').catch(() => [])]);
		const crashed = runs.filter((r) => r.report);
		put(m, 
			el('h2', {}, 'Agents'),
			agents.length ? table(agents, ['pid', 'command', 'address'],
				{ click: (r) => { location.hash = 'agent/' + r.pid; } })
				: el('p', { class: 'muted' }, 'No agent is running (start one with PROBING=1, or probing -t PID inject).'),
			el('h2', {}, 'Recordings'),
			runs.length ? table(runs.slice(-50).reverse(), ['run', 'pid', 'rank', 'started', 'ended', 'how', 'command'],
				{ click: (r) => { location.hash = 'agent/' + r.run; } })
				: el('p', { class: 'muted' }, 'No recordings.'),
			el('h2', {}, 'Crash reports'),
			crashed.length ? table(crashed, ['pid', 'how', 'report'],
				{ click: (r) => { location.hash = 'report/' + encodeURIComponent(r.report); } })
				: el('p', { class: 'muted' }, 'None.'));
	} catch (e) { put(m, error(e)); }
}

// ---- a report (crash or hang) -------------------------------------------------

function reportView(rep) {
	const h = rep.header || {};
	return [
		el('p', { class: 'verdict' }, `${h.kind}: ${h.reason || h.signal || ''}`),
		el('p', { class: 'muted' }, `process ${h.pid} (${h.cmdline || ''}) at ${h.time || ''}`),
		(rep.threads || []).map((t) => el('div', { class: 'thread' },
			el('div', {}, `Thread ${t.tid} "${t.name || ''}" (${(t.flags || []).join(', ')})`),
			(t.python || []).map((f) => el('div', { class: 'frame' + (own(f.file) ? ' own' : '') },
				`${f.func} (${f.file}:${f.line})`)),
			(t.native || []).slice(0, 20).map((f) => el('div', { class: 'frame muted' },
				`${f.func} ${f.object || ''}`)))),
	];
}

async function report(file) {
	document.getElementById('tabs').hidden = true;
	document.getElementById('where').textContent = base(file);
	const m = show(el('p', { class: 'muted' }, 'Loading…'));
	try { put(m, ...reportView(await api('/api/report', { file })).flat(Infinity)); } catch (e) { put(m, error(e)); }
}

// ---- one agent's views ----------------------------------------------------------

function threadView(t, withLocals) {
	const frames = t.frames || [];
	// With native frames: mixedFrames, the C/C++ frames with the Python
	// ones where the interpreter runs them; a Python frame's locals are
	// those of the same frame in frames (found by position, checked by
	// name and line).
	const mixed = S.native && t.mixedFrames && t.mixedFrames.length ? t.mixedFrames : null;
	let k = 0;
	const rows = (mixed || frames).map((f, i) => {
		if (mixed && f.kind === 'native')
			return el('div', { class: 'frame native muted' },
				`#${i}  ${f.func || '??'} (${f.object}${f.func ? '' : '+0x' + f.offset.toString(16)})`);
		const p = mixed ? frames[k++] : f;
		const same = p && p.func === f.func && p.line === f.line ? p : null;
		const open = withLocals && S.frame && S.frame.tid === t.nativeId && S.frame.i === i;
		return [
			el('div', { class: 'frame' + (own(f.file) ? ' own' : ''), 'data-func': f.func,
				on: { click: () => { S.frame = S.frame && S.frame.tid === t.nativeId && S.frame.i === i ? null : { tid: t.nativeId, i }; views.stacks(true); } } },
			`#${i}  ${f.func} (${f.file}:${f.line})`),
			open
				? el('div', { class: 'locals' }, same && same.locals && same.locals.length
					? table(same.locals, ['name', 'type', 'value']) : el('span', { class: 'muted' }, 'no locals'))
				: null,
		];
	});
	return el('div', { class: 'thread' },
		el('div', {}, `Thread ${t.nativeId} "${t.name}" (${[t.isMain ? 'main' : null, t.state].filter(Boolean).join(', ')})`),
		S.native && t.nativeError ? el('div', { class: 'muted' }, `no native frames: ${t.nativeError}`) : null,
		rows,
		mixed && t.mixedExact === false
			? el('div', { class: 'muted' }, 'the thread ran while its stacks were read: its Python frames may sit at the wrong native ones')
			: null);
}

const views = {
	async stacks(withLocals) {
		const bt = await api('/api/backtrace', { target: S.target, locals: withLocals && S.frame ? 1 : undefined,
			native: S.native ? 1 : undefined }, true);
		const threads = bt.threads || [];
		threads.sort((a, b) => (b.isMain ? 1 : 0) - (a.isMain ? 1 : 0));
		const box = el('input', { type: 'checkbox', id: 'native',
			on: { change: () => { S.native = box.checked; S.frame = null; views.stacks(true); } } });
		box.checked = S.native;
		return [el('p', { class: 'muted' }, `${threads.length} threads, read at ${new Date().toLocaleTimeString()}; refreshes every 2 s; click a frame for its locals; `,
			el('label', {}, box, ' native frames')),
			threads.map((t) => threadView(t, withLocals))];
	},

	async sql() {
		const box = el('textarea', { id: 'sql' }, "SELECT thread_name, depth, func, file, lineno\nFROM python.backtrace ORDER BY thread_name, depth");
		const out = el('div', { id: 'sql-out' });
		const run = async () => {
			put(out, el('p', { class: 'muted' }, 'Running…'));
			try {
				const rows = await api('/api/query', { target: S.target, sql: box.value }, true);
				put(out, el('p', { class: 'muted' }, `${rows.length} rows`), table(rows));
			} catch (e) { put(out, error(e)); }
		};
		const cat = el('div', { class: 'catalog' }, el('p', { class: 'muted' }, 'Loading the tables…'));
		api('/api/tables', { target: S.target }).then((tables) => put(cat, el('h2', {}, 'Tables'),
			tables.map((t) => el('div', { on: { click: () => { box.value = `SELECT * FROM ${t.name} LIMIT 100`; run(); } } },
				`${t.name} `, el('span', { class: 'muted' }, t.kind), el('small', {}, t.columns || ''))))).catch((e) => put(cat, error(e)));
		return [el('div', { class: 'sql' },
			el('div', {}, box, el('div', { class: 'toolbar' }, el('button', { id: 'run', on: { click: run } }, 'Run'),
				el('span', { class: 'muted' }, 'SQLite; now() and ago(\'5m\') for times; one statement')), out),
			cat)];
	},

	async flame() {
		const frame = el('div', { id: 'flame' });
		const native = el('input', { type: 'checkbox', id: 'native' });
		const idle = el('input', { type: 'checkbox', id: 'idle' });
		const tasks = el('input', { type: 'checkbox', id: 'tasks' });
		const state = el('span', { class: 'muted' });
		let started = null;
		const load = async (params) => {
			put(frame, el('p', { class: 'muted' }, 'Sampling…'));
			const q = { target: S.target, ...params };
			if (native.checked) q.native = 1;
			if (idle.checked) q.idle = 1;
			if (tasks.checked) q.tasks = 1;
			// Sampling acts on the target: a POST, whose answer the
			// server keeps; the SVG is the project's own, with its own
			// script: in a frame, which reads that answer.
			let made;
			try { made = await api('/api/flamegraph.svg', q, true); } catch (e) { put(frame, error(e)); return; }
			const note = frame.firstChild;
			const f = el('iframe', { class: 'flame', src: made.url, title: 'flamegraph' });
			f.addEventListener('load', () => note.remove(), { once: true });
			frame.append(f);
		};
		const start = async () => {
			try {
				await api('/api/profile/start', { target: S.target, native: native.checked ? 1 : undefined }, true);
				started = Date.now();
				state.textContent = 'sampling since ' + new Date(started).toLocaleTimeString();
			} catch (e) { put(state, error(e)); }
		};
		const stop = async () => {
			try {
				await api('/api/profile/stop', { target: S.target }, true);
				const ms = started ? Date.now() - started : 10000;
				state.textContent = `stopped after ${(ms / 1000).toFixed(1)} s`;
				load({ recorded: 1, duration: Math.max(ms, 100) + 'ms' });
			} catch (e) { put(state, error(e)); }
		};
		return [el('div', { class: 'toolbar' },
			el('button', { id: 'record5', on: { click: () => load({ duration: '5s' }) } }, 'Record 5 s'),
			el('button', { id: 'start', on: { click: start } }, 'Start sampling'),
			el('button', { id: 'stop', on: { click: stop } }, 'Stop and show'),
			el('label', {}, native, ' native frames '), el('label', {}, idle, ' waiting threads '),
			el('label', {}, tasks, ' by asyncio task '), state),
		el('p', { class: 'muted' }, 'Click a frame to zoom in; Ctrl-F searches.'), frame];
	},

	async memory() {
		const [m, series] = await Promise.all([api('/api/memory', { target: S.target }),
			api('/api/series', { target: S.target, what: 'memory' }).catch(() => [])]);
		const p = m.process || {}, py = m.python || {}, t = m.torch || {};
		return [el('p', { class: 'verdict', id: 'rss' }, `RSS ${p.rss?.toFixed(1)} MiB, peak ${p.peak?.toFixed(1)} MiB, ${p.threads} threads`),
			el('h2', {}, 'RSS over the last hour (process.memory)'), chart(series, 'rss', 'MB'),
			el('h2', {}, `Python objects: ${py.objects} tracked, ${((py.bytes || 0) / 1048576).toFixed(1)} MiB`),
			table((py.byCount || []).slice(0, 15).map((r) => ({ ...r, bytes: fmtBytes(r.bytes) })), ['type', 'count', 'bytes'], { id: 'py-types' }),
			el('h2', {}, 'Tensors'),
			(t.tensors || []).length ? table(t.tensors.map((r) => ({ ...r, bytes: fmtBytes(r.bytes) })), null, { id: 'tensors' })
				: el('p', { class: 'muted' }, t.error || 'none (or torch not imported)'),
			gpuView(m.gpu)];
	},

	async torch() {
		const out = el('div', {});
		const trace = async () => {
			put(out, el('p', { class: 'muted' }, 'Tracing for 3 s…'));
			try { put(out, table(await api('/api/torch', { target: S.target, duration: '3s' }, true))); } catch (e) { put(out, error(e)); }
		};
		const steps = await api('/api/series', { target: S.target, what: 'steps' }).catch(() => []);
		return [el('div', { class: 'toolbar' }, el('button', { id: 'trace', on: { click: trace } }, 'Trace modules for 3 s'),
			el('span', { class: 'muted' }, 'time per module and stage (python.torch_trace); tracing goes off again unless it was on')), out,
		el('h2', {}, 'Step time over the last hour (traced steps)'), chart(steps, 'ms', 'ms')];
	},

	async hangs() {
		const list = await api('/api/hangs', { target: S.target });
		const detail = el('div', {});
		if (!list.length) return [el('p', { class: 'muted' }, 'No hangs recorded (the watchdog is on with hang.timeout).')];
		// As `probing hangs` shows them: a hang the watchdog found in
		// place began then or before (<=) and lasted at least that (>=).
		const rows = list.map((r) => {
			const known = r.started_known !== '0';
			return { id: r.id, started: (known ? '' : '<= ') + fmtWhen(r.started),
				'stuck for': (known ? '' : '>= ') + Number(r.seconds).toFixed(1) + ' s',
				state: r.resumed ? 'moved on at ' + fmtWhen(r.resumed) : 'stuck', thread: r.native_id,
				where: r.func ? `${r.func} (${r.file}:${r.lineno})` : '(no Python frame)', report: r.path || '' };
		});
		return [table(rows, null, { id: 'hang-list', click: async (r) => {
			try { put(detail, ...reportView(await api('/api/hangs', { target: S.target, id: r.id })).flat(Infinity)); } catch (e) { put(detail, error(e)); }
		} }), detail];
	},

	async diagnose() {
		const out = el('div', { id: 'diagnosis' });
		const run = async (playbook) => {
			put(out, el('p', { class: 'muted' }, `Running the ${playbook} playbook…`));
			try {
				const d = await api('/api/diagnose', { target: S.target, playbook }, true);
				put(out, el('p', { class: 'verdict' }, d.verdict),
					el('ul', {}, d.evidence.map((x) => el('li', {}, x))),
					d.next.length ? el('pre', {}, d.next.join('\n')) : null);
			} catch (e) { put(out, error(e)); }
		};
		return [el('div', { class: 'toolbar' }, ['hang', 'leak', 'slow', 'dataloader'].map((p) =>
			el('button', { 'data-playbook': p, on: { click: () => run(p) } }, p))), out];
	},

	async cluster() {
		const [hang, bt] = await Promise.all([api('/api/cluster/hang', { target: S.target }),
			api('/api/cluster/backtrace', { target: S.target }).catch((e) => ({ error: e }))]);
		const ranks = (hang.ranks || []).map((r) => ({
			rank: r.rank, answered: r.answered ? 'yes' : 'no: ' + (r.why || ''),
			'last collective': r.last && r.last[0] ? `${r.last[0].op} #${r.last[0].seq}` : '',
			state: r.last && r.last[0] ? r.last[0].state : '', 'main thread': r.where || '' }));
		const groups = Array.isArray(bt) ? bt : [];
		const world = groups.reduce((n, g) => n + g.ranks.length, 0);
		return [el('p', { class: 'verdict', id: 'cluster-verdict' }, hang.verdict),
			table(ranks, null, { rowClass: (r) => r.state !== 'running' ? 'odd' : null }),
			el('h2', {}, 'Stacks, grouped (the odd one out first)'),
			bt.error ? error(bt.error) : groups.map((g) => el('div', { class: 'thread' },
				el('div', {}, `rank${g.ranks.length > 1 ? 's' : ''} ${g.ranks.join(', ')} (${g.ranks.length} of ${world})`),
				(g.frames || []).map((f) => el('div', { class: 'frame' + (own(f.file) ? ' own' : '') }, `${f.func} (${f.file}:${f.line})`))))];
	},
};

async function agent(target, tab) {
	S.target = target;
	S.tab = tab || 'stacks';
	document.getElementById('where').textContent = 'agent ' + target;
	const nav = document.getElementById('tabs');
	nav.hidden = false;
	for (const a of nav.querySelectorAll('a')) {
		a.className = a.dataset.tab === S.tab ? 'on' : '';
		a.href = `#agent/${encodeURIComponent(target)}/${a.dataset.tab}`;
	}
	const m = show(el('p', { class: 'muted' }, 'Loading…'));
	try { put(m, ...[await views[S.tab]()].flat(Infinity)); } catch (e) { put(m, error(e)); }
	if (S.tab === 'stacks') {
		S.timer = setInterval(async () => {
			if (S.frame) return; // a frame's locals are open: hold still
			// One read at a time: with native frames one may take longer
			// than the interval, and they would pile up on the agent.
			if (S.reading) return;
			S.reading = true;
			try { put(document.getElementById('main'), ...[await views.stacks()].flat(Infinity)); } catch (e) { /* next time */ }
			S.reading = false;
		}, 2000);
	}
}

views.stacks = ((f) => async (withLocals) => {
	if (withLocals === true) {
		try { put(document.getElementById('main'), ...[await f(true)].flat(Infinity)); } catch (e) { put(document.getElementById('main'), error(e)); }
		return [];
	}
	return f(false);
})(views.stacks);

function route() {
	clearInterval(S.timer);
	S.frame = null;
	const h = decodeURIComponent(location.hash.slice(1));
	const m = h.match(/^agent\/([^/]+)(?:\/(\w+))?$/);
	if (m && views[m[2] || 'stacks']) return agent(m[1], m[2]);
	const r = h.match(/^report\/(.+)$/);
	if (r) return report(r[1]);
	return home();
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', route);
