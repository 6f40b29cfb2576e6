'use strict';
// Helpers for the debugger's DAP tests: an event log that does not miss
// events sent before a test starts waiting (DebugClient.waitForEvent only
// sees later ones), and the attach sequence VS Code runs.

const { withTimeout } = require('./target');

const EVENTS = ['initialized', 'stopped', 'continued', 'output', 'breakpoint',
	'thread', 'terminated', 'exited'];

class EventLog {
	constructor(dc) {
		this.events = [];
		this.waiters = [];
		for (const type of EVENTS) dc.on(type, (e) => this.push(e));
	}

	push(e) {
		for (const w of this.waiters) {
			if (!w.done && w.type === e.event && w.pred(e)) {
				w.done = true;
				w.resolve(e);
				return;
			}
		}
		this.events.push(e);
	}

	// The first event of type matching pred, already received or to come.
	next(type, pred = () => true, ms = 20000) {
		const i = this.events.findIndex((e) => e.event === type && pred(e));
		if (i >= 0) return Promise.resolve(this.events.splice(i, 1)[0]);
		const p = new Promise((resolve) => {
			this.waiters.push({ type, pred, resolve, done: false });
		});
		return withTimeout(p, ms, `event '${type}'`);
	}

	// Forgets every event received so far (of type, or all).
	clear(type) {
		this.events = type ? this.events.filter((e) => e.event !== type) : [];
	}

	// Events of type received so far, without consuming them.
	seen(type) {
		return this.events.filter((e) => e.event === type);
	}
}

// What VS Code sends on attach: initialize, attach, then (after
// `initialized`) breakpoints and configurationDone.  bps: { path: [line or
// {line, condition, hitCondition, logMessage}] }.  Returns
// { log, caps, breakpoints: { path: [...] } }.  args: attach's arguments.
async function attach(dc, { bps = {}, functions = null, exceptions = [], args = {} } = {}) {
	const log = new EventLog(dc);
	const init = await dc.initializeRequest({
		clientID: 'vscode', adapterID: 'probing', pathFormat: 'path',
		linesStartAt1: true, columnsStartAt1: true, supportsVariableType: true,
		supportsVariablePaging: true,
	});
	await dc.attachRequest(args);
	await log.next('initialized');
	const breakpoints = {};
	for (const [path, list] of Object.entries(bps)) {
		const specs = list.map((x) => (typeof x === 'number' ? { line: x } : x));
		const r = await dc.setBreakpointsRequest({ source: { path }, breakpoints: specs });
		breakpoints[path] = r.body.breakpoints;
	}
	if (functions) await dc.setFunctionBreakpointsRequest({ breakpoints: functions.map((name) => ({ name })) });
	await dc.setExceptionBreakpointsRequest({ filters: exceptions });
	await dc.configurationDoneRequest();
	return { log, caps: init.body, breakpoints };
}

// The top frame of a stopped thread.
async function topFrame(dc, threadId) {
	const st = await dc.stackTraceRequest({ threadId, levels: 1 });
	return st.body.stackFrames[0];
}

// name -> variable of a variables reference.
async function vars(dc, ref, extra = {}) {
	const r = await dc.variablesRequest({ variablesReference: ref, ...extra });
	return new Map(r.body.variables.map((v) => [v.name, v]));
}

// The Locals of the top frame of threadId.
async function locals(dc, threadId) {
	const f = await topFrame(dc, threadId);
	const sc = await dc.scopesRequest({ frameId: f.id });
	return vars(dc, sc.body.scopes[0].variablesReference);
}

module.exports = { EventLog, attach, topFrame, vars, locals };
