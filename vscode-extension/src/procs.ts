// The Python processes on this machine and which have an agent, read from
// /proc (no vscode import: unit-tested under node).
import * as fs from 'fs';
import * as path from 'path';

export interface ProcInfo {
	pid: number;
	argv: string[];
	agent: boolean;
}

// Pids with an agent: "@probing-<pid>" listening in /proc/net/unix.
export function agentPids(procNetUnix: string): Set<number> {
	const out = new Set<number>();
	for (const line of procNetUnix.split('\n')) {
		const f = line.trim().split(/\s+/);
		const name = f[f.length - 1];
		const m = /^@probing-(\d+)$/.exec(name || '');
		// Flags 00010000 (__SO_ACCEPTCON): the listening socket only.
		if (m && f.length >= 8 && (parseInt(f[3], 16) & 0x10000)) out.add(Number(m[1]));
	}
	return out;
}

export function isPython(exe: string, argv: string[]): boolean {
	const base = (s: string) => path.basename(s || '');
	const py = /^python(3(\.\d+)?)?$/;
	return py.test(base(exe)) || py.test(base(argv[0] || ''));
}

// "train.py --lr 3" from ["/usr/bin/python3", "train.py", "--lr", "3"].
export function label(argv: string[]): string {
	const rest = argv.slice(1).join(' ');
	return rest ? `${path.basename(argv[0])} ${rest}` : argv[0] || '?';
}

// The process picker's entries: agents first (the ones to attach to), then
// by pid; the pid leads the label, so a long command line cannot hide it.
export interface PickItem {
	label: string;
	description: string;
	pid: number;
}

export const LABEL_MAX = 80;

export function pickerItems(procs: ProcInfo[]): PickItem[] {
	return [...procs].sort((a, b) => Number(b.agent) - Number(a.agent) || a.pid - b.pid).map((p) => {
		const text = label(p.argv);
		return {
			label: `${p.pid}  ${text.length > LABEL_MAX ? text.slice(0, LABEL_MAX - 1) + '…' : text}`,
			description: p.agent ? 'agent running' : 'no agent yet: it will be injected',
			pid: p.pid,
		};
	});
}

export function listPythonProcesses(proc = '/proc'): ProcInfo[] {
	let unix = '';
	try { unix = fs.readFileSync(path.join(proc, 'net', 'unix'), 'utf8'); } catch (e) { /* none */ }
	const agents = agentPids(unix);
	const out: ProcInfo[] = [];
	for (const d of fs.readdirSync(proc)) {
		if (!/^\d+$/.test(d)) continue;
		const pid = Number(d);
		if (pid === process.pid) continue;
		let argv: string[] = [];
		let exe = '';
		try {
			argv = fs.readFileSync(path.join(proc, d, 'cmdline'), 'utf8').split('\0').filter((s) => s !== '');
		} catch (e) { continue; }
		try { exe = fs.readlinkSync(path.join(proc, d, 'exe')); } catch (e) { /* another user's */ }
		if (argv.length && isPython(exe, argv)) out.push({ pid, argv, agent: agents.has(pid) });
	}
	return out.sort((a, b) => a.pid - b.pid);
}
