// The "probing" debug type and the Probing commands.
import * as cp from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { adapterArgs, exitMeaning, initialConfiguration, injectArgs, Resolved, resolveAttach, targetArg, toolEnv } from './config';
import { StdioDap } from './dap';
import { agentPids, listPythonProcesses, pickerItems } from './procs';
import { flameArgs, flameChoices, flamePage } from './flamegraph';
import { renderTable } from './table';
import { frameLinks } from './links';

function cliSetting(): string {
	return vscode.workspace.getConfiguration('probing').get<string>('cliPath') || 'probing';
}

function hasAgent(pid: number): boolean {
	try {
		return agentPids(fs.readFileSync('/proc/net/unix', 'utf8')).has(pid);
	} catch (e) {
		return false;
	}
}

function run(cli: string, args: string[], timeoutMs: number, env?: Record<string, string>):
	Promise<{ code: number | null; out: string; err: string }> {
	const opts = { timeout: timeoutMs, maxBuffer: 64 << 20, env: env ? { ...process.env, ...env } : undefined };
	return new Promise((resolve) => {
		cp.execFile(cli, args, opts, (error, stdout, stderr) => {
			const code = error ? (typeof (error as any).code === 'number' ? (error as any).code : null) : 0;
			resolve({ code, out: stdout.toString(), err: stderr.toString() || (error && code === null ? error.message : '') });
		});
	});
}

async function pickProcess(onlyAgents = false): Promise<string | undefined> {
	const procs = listPythonProcesses().filter((p) => !onlyAgents || p.agent);
	if (!procs.length) {
		vscode.window.showErrorMessage(onlyAgents ? 'Probing: no Python process with the agent is running.'
			: 'Probing: no Python process is running.');
		return undefined;
	}
	const pick = await vscode.window.showQuickPick(pickerItems(procs),
		{ placeHolder: 'The Python process to attach to (pid, command)', matchOnDescription: true });
	return pick ? String(pick.pid) : undefined;
}

class ConfigurationProvider implements vscode.DebugConfigurationProvider {
	resolveDebugConfiguration(_folder: vscode.WorkspaceFolder | undefined, cfg: vscode.DebugConfiguration) {
		// F5 without a launch.json: attach to a picked process.
		if (!cfg.type && !cfg.request && !cfg.name) return initialConfiguration() as vscode.DebugConfiguration;
		return cfg;
	}

	resolveDebugConfigurationWithSubstitutedVariables(_folder: vscode.WorkspaceFolder | undefined,
		cfg: vscode.DebugConfiguration) {
		const r = resolveAttach(cfg, cliSetting());
		if ('error' in r) {
			vscode.window.showErrorMessage(`Probing: ${r.error}`);
			return undefined; // abort the launch
		}
		// A job's stop-all: the configuration's, else the setting's.
		if (cfg.job === true && cfg.stopAll === undefined) {
			cfg.stopAll = vscode.workspace.getConfiguration('probing').get<string>('jobStop') !== 'rank';
		}
		// asyncio's tasks in the Call Stack: the configuration's, else the
		// setting's.
		if (cfg.asyncioTasks === undefined) {
			cfg.asyncioTasks = vscode.workspace.getConfiguration('probing').get<boolean>('asyncioTasks') === true;
		}
		cfg.__probing = r.resolved;
		return cfg;
	}
}

class AdapterFactory implements vscode.DebugAdapterDescriptorFactory {
	async createDebugAdapterDescriptor(session: vscode.DebugSession): Promise<vscode.DebugAdapterDescriptor> {
		let r: Resolved | undefined = session.configuration.__probing;
		if (!r) {
			const again = resolveAttach(session.configuration, cliSetting());
			if ('error' in again) throw new Error(`Probing: ${again.error}`);
			r = again.resolved;
		}
		// Over TCP too through the CLI's bridge, which adds the token.
		if (r.target.kind === 'tcp') return new vscode.DebugAdapterExecutable(r.cli, adapterArgs(r), { env: toolEnv(r) });
		const pid = r.target.pid;
		if (!hasAgent(pid)) {
			if (!fs.existsSync(`/proc/${pid}`)) throw new Error(`Probing: there is no process ${pid}.`);
			if (!r.inject) {
				throw new Error(`Probing: process ${pid} has no agent. Start it with PROBING=1, or set "inject": true.`);
			}
			const res = await vscode.window.withProgress(
				{ location: vscode.ProgressLocation.Notification, title: `Probing: injecting the agent into ${pid}` },
				() => run(r!.cli, injectArgs(pid, r!.timeout), r!.timeout + 30000));
			if (res.code !== 0) {
				throw new Error(`Probing: cannot inject the agent into ${pid} (${exitMeaning(res.code)}): ${res.err.trim()}`);
			}
		}
		return new vscode.DebugAdapterExecutable(r.cli, adapterArgs(r), { env: toolEnv(r) });
	}
}

// The sessions that have ended: VS Code may still give one as the active
// session for a moment after (CI: Why Is the Job Stuck? asked the job
// whose sessions had all ended), and the commands must not take it as
// their target.
const ended = new Set<string>();

// The active probing session, unless it has ended.
function activeSession(): vscode.DebugSession | undefined {
	const s = vscode.debug.activeDebugSession;
	return s && s.type === 'probing' && !ended.has(s.id) ? s : undefined;
}

// The probing session being debugged, if any.
function activeResolved(): Resolved | undefined {
	const s = activeSession();
	return s ? s.configuration.__probing : undefined;
}

// The target of the commands: the probing session being debugged, else a
// picked process with an agent.
async function commandTarget(): Promise<string | undefined> {
	const r = activeResolved();
	if (r) return targetArg(r.target);
	return pickProcess(true);
}

async function runQuery(context: vscode.ExtensionContext) {
	const target = await commandTarget();
	if (!target) return;
	const last = context.globalState.get<string>('probing.lastQuery') || 'SELECT * FROM python.backtrace';
	const sql = await vscode.window.showInputBox({ prompt: `SQL to run in ${target}`, value: last });
	if (!sql) return;
	await context.globalState.update('probing.lastQuery', sql);
	const dap = new StdioDap(cliSetting(), target, 10000, toolEnv(activeResolved()));
	try {
		const init = await dap.request('initialize', { adapterID: 'probing-vscode' });
		if (!init.success) throw new Error(init.message);
		const r = await dap.request('probing/query', { sql, maxRows: 10000 }, 60000);
		if (!r.success) throw new Error(r.message);
		const panel = vscode.window.createWebviewPanel('probingQuery', `Probing: ${sql.slice(0, 40)}`,
			vscode.ViewColumn.Active, { enableScripts: false });
		panel.webview.html = renderTable(sql, r.body);
	} catch (e) {
		vscode.window.showErrorMessage(`Probing: the query failed: ${(e as Error).message}`);
	} finally {
		dap.close();
	}
}

async function backtrace() {
	const target = await commandTarget();
	if (!target) return;
	const res = await run(cliSetting(), ['-t', target, 'backtrace', '--locals'], 30000, toolEnv(activeResolved()));
	if (res.code !== 0) {
		vscode.window.showErrorMessage(`Probing: backtrace failed (${exitMeaning(res.code)}): ${res.err.trim()}`);
		return;
	}
	// A read-only document of its own (no "save changes?" on close), one
	// per backtrace taken.
	await showText(`backtrace-${target.replace(/[^\w.@:-]/g, '_')}.txt`, res.out);
}

// The verdict of `probing cluster hang` on the job in focus (or a picked
// process): who waits for whom, then each group of ranks' stacks, the odd
// rank first; every frame's source line a link.
async function whyStuck() {
	const job = jobSession();
	const r: Resolved | undefined = job ? job.configuration.__probing : activeResolved();
	const target = r ? targetArg(r.target) : await pickProcess(true);
	if (!target) return;
	const res = await vscode.window.withProgress(
		{ location: vscode.ProgressLocation.Notification, title: `Probing: asking every rank of ${target}'s job` },
		() => run(cliSetting(), ['-t', target, 'cluster', 'hang'], 120000, toolEnv(r)));
	if (res.code !== 0 && !res.out) {
		vscode.window.showErrorMessage(`Probing: cluster hang failed (${exitMeaning(res.code)}): ${res.err.trim()}`);
		return;
	}
	// Ranks that did not answer (exit 13) are named on stderr: kept.
	const text = res.out + (res.err.trim() ? `\n${res.err.trim()}\n` : '');
	await showText(`why-stuck-${target.replace(/[^\w.@:-]/g, '_')}.txt`, text);
}

async function showText(name: string, text: string) {
	const uri = vscode.Uri.from({ scheme: BT_SCHEME, path: name, query: String(++btSeq) });
	btDocs.set(uri.toString(), text);
	const doc = await vscode.workspace.openTextDocument(uri);
	await vscode.window.showTextDocument(doc, { preview: true });
}

// A frame's "(/path/file.py:LINE)" in a backtrace or a verdict: a link
// to that line.
class FrameLinks implements vscode.DocumentLinkProvider {
	provideDocumentLinks(doc: vscode.TextDocument): vscode.DocumentLink[] {
		const links: vscode.DocumentLink[] = [];
		for (const l of frameLinks(doc.getText())) {
			const range = new vscode.Range(doc.positionAt(l.start), doc.positionAt(l.end));
			const link = new vscode.DocumentLink(range, vscode.Uri.file(l.path).with({ fragment: `L${l.line}` }));
			link.tooltip = `Open ${l.path} at line ${l.line}`;
			links.push(link);
		}
		return links;
	}
}

// The backtraces shown, by document: read-only text.
const BT_SCHEME = 'probing-backtrace';
const btDocs = new Map<string, string>();
let btSeq = 0;

class BacktraceDocuments implements vscode.TextDocumentContentProvider {
	provideTextDocumentContent(uri: vscode.Uri): string {
		return btDocs.get(uri.toString()) ?? '';
	}
}

// Records the target (or takes what is recorded), then shows the agent's
// interactive SVG in a webview.  Cancelling stops the recording early, as
// Ctrl-C does, and shows what was recorded.
async function flamegraph() {
	const target = await commandTarget();
	if (!target) return;
	const choice = await vscode.window.showQuickPick(flameChoices, { placeHolder: `Flamegraph of ${target}` });
	if (!choice) return;
	const out = path.join(os.tmpdir(), `probing-flamegraph-${process.pid}-${Date.now()}.svg`);
	const res = await vscode.window.withProgress({
		location: vscode.ProgressLocation.Notification,
		title: `Probing: ${choice.seconds ? `recording ${target} for ${choice.seconds} s` : `reading what ${target} recorded`}`,
		cancellable: true,
	}, (_progress, token) => new Promise<{ code: number | null; err: string }>((resolve) => {
		const env = toolEnv(activeResolved());
		const child = cp.execFile(cliSetting(), flameArgs(target, choice, out),
			{ timeout: (choice.seconds + 120) * 1000, env: env ? { ...process.env, ...env } : undefined },
			(error, _stdout, stderr) => {
				const code = error ? (typeof (error as any).code === 'number' ? (error as any).code : null) : 0;
				resolve({ code, err: stderr.toString() || (error && code === null ? error.message : '') });
			});
		token.onCancellationRequested(() => child.kill('SIGINT'));
	}));
	try {
		if (res.code !== 0) {
			vscode.window.showErrorMessage(`Probing: flamegraph failed (${exitMeaning(res.code)}): ${res.err.trim()}`);
			return;
		}
		const svg = fs.readFileSync(out, 'utf8');
		const title = `Flamegraph: ${target}`;
		const panel = vscode.window.createWebviewPanel('probingFlamegraph', title, vscode.ViewColumn.Active,
			{ enableScripts: true });
		panel.webview.html = flamePage(svg, title);
	} catch (e) {
		vscode.window.showErrorMessage(`Probing: cannot show the flamegraph: ${(e as Error).message}`);
	} finally {
		fs.rmSync(out, { force: true });
	}
}

// The job's session of the session in focus (itself, or its parent).
function jobSession(): vscode.DebugSession | undefined {
	let s = activeSession();
	while (s && s.type === 'probing' && s.configuration.job !== true) s = s.parentSession;
	return s && s.type === 'probing' && !ended.has(s.id) ? s : undefined;
}

// Pause or continue every rank: the job's session does it (probing dap).
async function wholeJob(command: 'pause' | 'continue') {
	const s = jobSession();
	if (!s) {
		vscode.window.showErrorMessage('Probing: no job is being debugged (attach with "job": true).');
		return;
	}
	try {
		await s.customRequest(command, { threadId: 0 });
	} catch (e) {
		vscode.window.showErrorMessage(`Probing: cannot ${command} the job: ${(e as Error).message}`);
	}
}

export function activate(context: vscode.ExtensionContext) {
	context.subscriptions.push(
		vscode.debug.registerDebugConfigurationProvider('probing', new ConfigurationProvider()),
		vscode.debug.registerDebugAdapterDescriptorFactory('probing', new AdapterFactory()),
		vscode.commands.registerCommand('probing.pickProcess', () => pickProcess(false)),
		vscode.commands.registerCommand('probing.runQuery', () => runQuery(context)),
		vscode.commands.registerCommand('probing.backtrace', backtrace),
		vscode.workspace.registerTextDocumentContentProvider(BT_SCHEME, new BacktraceDocuments()),
		vscode.workspace.onDidCloseTextDocument((d) => btDocs.delete(d.uri.toString())),
		vscode.commands.registerCommand('probing.flamegraph', flamegraph),
		vscode.commands.registerCommand('probing.pauseJob', () => wholeJob('pause')),
		vscode.commands.registerCommand('probing.continueJob', () => wholeJob('continue')),
		vscode.commands.registerCommand('probing.whyStuck', whyStuck),
		vscode.languages.registerDocumentLinkProvider({ scheme: BT_SCHEME }, new FrameLinks()),
		vscode.debug.onDidTerminateDebugSession((s) => ended.add(s.id)),
	);
}

export function deactivate() { /* nothing held */ }
