// Resolution of "probing" attach configurations: what launch.json says,
// checked and turned into how to reach the agent.  No vscode import, so
// the unit tests run under plain node.

export type Target =
	| { kind: 'process'; pid: number }
	| { kind: 'tcp'; host: string; port: number };

export interface Resolved {
	target: Target;
	cli: string;      // the probing command line tool
	inject: boolean;  // inject an agent into a process that has none
	timeout: number;  // ms to wait for the agent
	token?: string;   // the agent's token (docs/security.md); absent: the
	                  // tool's own (PROBING_TOKEN, else the token file)
}

export type Resolution = { resolved: Resolved } | { error: string };

export const DEFAULT_TIMEOUT = 10000;
export const PICK_PROCESS = '${command:pickProcess}';

// The configuration VS Code starts with when there is no launch.json.
export function initialConfiguration(): Record<string, unknown> {
	return {
		type: 'probing',
		request: 'attach',
		name: 'Attach to a Python process (Probing)',
		processId: PICK_PROCESS,
	};
}

function isInt(v: unknown): v is number {
	return typeof v === 'number' && Number.isInteger(v);
}

// A token as the agent takes it: 16 to 128 printable ASCII characters,
// no spaces (dap/dap_token.h).
export function tokenError(v: unknown): string | null {
	if (typeof v !== 'string' || !/^[\x21-\x7e]{16,128}$/.test(v)) {
		return '"token" must be the agent\'s token: 16 to 128 printable characters without spaces.';
	}
	return null;
}

// Checks cfg (variables already substituted) and resolves it.  cliDefault
// is the probing.cliPath setting.
export function resolveAttach(cfg: Record<string, unknown>, cliDefault: string): Resolution {
	if (cfg.request !== undefined && cfg.request !== 'attach') {
		return { error: `Probing attaches to running processes: use "request": "attach", not "${String(cfg.request)}".` };
	}
	const hasPid = cfg.processId !== undefined && cfg.processId !== null && cfg.processId !== '';
	const hasPort = cfg.port !== undefined && cfg.port !== null;
	if (hasPid && hasPort) {
		return { error: 'Give either "processId" or "host"/"port", not both.' };
	}
	let timeout = DEFAULT_TIMEOUT;
	if (cfg.timeout !== undefined) {
		if (!isInt(cfg.timeout) || cfg.timeout <= 0) {
			return { error: '"timeout" must be a positive number of milliseconds.' };
		}
		timeout = cfg.timeout;
	}
	let cli = cliDefault || 'probing';
	if (cfg.probingPath !== undefined) {
		if (typeof cfg.probingPath !== 'string' || cfg.probingPath === '') {
			return { error: '"probingPath" must be the path of the probing tool.' };
		}
		cli = cfg.probingPath;
	}
	// "job": the whole job of the process (`probing dap` answers the
	// attach with a child session per rank); the flag travels in the
	// attach request, read there.
	if (cfg.job !== undefined && typeof cfg.job !== 'boolean') {
		return { error: '"job" must be true or false.' };
	}
	if (cfg.stopAll !== undefined && typeof cfg.stopAll !== 'boolean') {
		return { error: '"stopAll" must be true or false.' };
	}
	let inject = true;
	if (cfg.inject !== undefined) {
		if (typeof cfg.inject !== 'boolean') return { error: '"inject" must be true or false.' };
		inject = cfg.inject;
	}
	const extra: { token?: string } = {};
	if (cfg.token !== undefined && cfg.token !== null && cfg.token !== '') {
		const e = tokenError(cfg.token);
		if (e) return { error: e };
		extra.token = cfg.token as string;
	}
	if (hasPid) {
		let pid: number;
		if (isInt(cfg.processId)) {
			pid = cfg.processId;
		} else if (typeof cfg.processId === 'string' && /^\s*\d+\s*$/.test(cfg.processId)) {
			pid = Number(cfg.processId);
		} else if (typeof cfg.processId === 'string' && cfg.processId.includes('${')) {
			return { error: `"processId" was not resolved (${cfg.processId}): no process was picked.` };
		} else {
			return { error: `"processId" must be a process id, not ${JSON.stringify(cfg.processId)}.` };
		}
		if (pid <= 0 || pid > 0x7fffffff) return { error: `"processId" ${pid} is not a process id.` };
		return { resolved: { target: { kind: 'process', pid }, cli, inject, timeout, ...extra } };
	}
	if (hasPort) {
		if (!isInt(cfg.port) || cfg.port < 1 || cfg.port > 65535) {
			return { error: '"port" must be a TCP port number (1-65535).' };
		}
		let host = '127.0.0.1';
		if (cfg.host !== undefined) {
			if (typeof cfg.host !== 'string' || cfg.host.trim() === '') {
				return { error: '"host" must be a host name or address.' };
			}
			host = cfg.host.trim();
		}
		return { resolved: { target: { kind: 'tcp', host, port: cfg.port }, cli, inject: false, timeout, ...extra } };
	}
	if (cfg.host !== undefined) return { error: '"host" needs a "port".' };
	return { error: 'Say what to attach to: "processId" (a pid, or "${command:pickProcess}"), or "host" and "port".' };
}

// The -t argument of the probing tool for a target.
export function targetArg(t: Target): string {
	if (t.kind === 'process') return String(t.pid);
	return t.host.includes(':') && !t.host.startsWith('[') ? `[${t.host}]:${t.port}` : `${t.host}:${t.port}`;
}

// The debug adapter every target runs: the CLI's stdio bridge.  Over TCP
// it puts the token into VS Code's initialize request (VS Code's own
// arguments cannot carry it): the configuration's, else the tool finds
// its own (PROBING_TOKEN, the token file).
export function adapterArgs(r: Resolved): string[] {
	return ['-t', targetArg(r.target), '--timeout', String(r.timeout), 'dap'];
}

// The environment added for the probing tool: the token goes there, not
// on its command line, where other users could read it (/proc).
export function toolEnv(r: Resolved | undefined): Record<string, string> | undefined {
	return r && r.token ? { PROBING_TOKEN: r.token } : undefined;
}

export function injectArgs(pid: number, timeout: number): string[] {
	return ['-t', String(pid), '--timeout', String(timeout), 'inject'];
}

// What the CLI's exit codes mean (docs/cli.md), for error messages.
export function exitMeaning(code: number | null): string {
	switch (code) {
	case 3: return 'no such process';
	case 4: return 'the process has no Probing agent';
	case 5: return 'the agent is not answering';
	case 6: return 'connection refused';
	case 8: return 'not allowed to ptrace the process';
	case 9: return 'not a CPython version this install supports (3.9 to 3.15), or Python is not ready';
	case 10: return 'the agent library is missing, or dlopen failed in the process';
	case 11: return 'the injection failed';
	case 12: return 'the agent refused the token (set "token" in the configuration, or PROBING_TOKEN)';
	default: return `exit code ${code}`;
	}
}
