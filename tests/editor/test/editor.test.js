// The extension in a real VS Code (code-server 4.139.1 = VS Code 1.139.1),
// used the way a person uses it: open the training script, F9 on a line,
// start "Attach" from launch.json, read the Call Stack and Variables views,
// evaluate in the Debug Console, step over, continue, run the Probing
// commands from the palette, disconnect — against a target with the agent,
// one without (injected), and one on host:port.  A missing view or a wrong
// value fails the test; each step is photographed (PROBING_EDITOR_ARTIFACTS,
// default BUILD/editor-artifacts).
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const cp = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Editor, ROOT, BUILD, freePort, sleep } = require('../lib/editor');

const PYTHON = '/usr/bin/python3'; // torch is Debian's
const CLI = path.join(BUILD, 'cli', 'probing');
const VSIX = path.join(ROOT, 'vscode-extension', 'probing.vsix');
const ARTIFACTS = path.resolve(process.env.PROBING_EDITOR_ARTIFACTS || path.join(BUILD, 'editor-artifacts'));

const TRAIN = `\
import time
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def work(model, x):
    # Most of the program's CPU time: the flamegraph's frames.
    for _ in range(40):
        model(x)


def train_step(model, x, step):
    y = model(x)  # @break
    loss = y.pow(2).mean()
    work(model, x)
    return float(loss)


model = Net()
x = torch.randn(8, 64)
lr = torch.tensor(0.25)
step = 0
print("READY", flush=True)
while True:
    train_step(model, x, step)
    step += 1
    if step % 10 == 0:
        print("STEP", step, flush=True)
    time.sleep(0.01)
`;
const BREAK_LINE = TRAIN.split('\n').findIndex((l) => l.includes('# @break')) + 1;

class Target {
	constructor(dir, env) {
		this.out = '';
		this.proc = cp.spawn(PYTHON, [path.join(dir, 'train.py')], {
			cwd: dir, env: { ...process.env, PYTHONUSERBASE: path.join(BUILD, 'userbase'), PYTHONUNBUFFERED: '1', ...env },
		});
		this.proc.stdout.on('data', (d) => { this.out += d; });
		this.proc.stderr.on('data', (d) => { this.out += d; });
		this.pid = this.proc.pid;
	}

	async ready() {
		for (let i = 0; i < 600 && !this.out.includes('READY'); i++) await sleep(100);
		assert.ok(this.out.includes('READY'), this.out);
	}

	lastStep() {
		const m = [...this.out.matchAll(/STEP (\d+)/g)];
		return m.length ? Number(m[m.length - 1][1]) : 0;
	}

	// Trains on: the step count grows.
	async runsOn() {
		const before = this.lastStep();
		for (let i = 0; i < 100 && this.lastStep() <= before; i++) await sleep(100);
		assert.ok(this.lastStep() > before, `the target did not go on:\n${this.out.slice(-2000)}`);
		assert.equal(this.proc.exitCode, null);
	}

	stop() {
		this.proc.kill('SIGKILL');
	}
}

function agentListening(pid) {
	return fs.readFileSync('/proc/net/unix', 'utf8').includes(`@probing-${pid}`);
}

async function waitAgent(pid) {
	for (let i = 0; i < 300 && !agentListening(pid); i++) await sleep(100);
	assert.ok(agentListening(pid), `no agent in ${pid}`);
}

// The Locals scope of the Variables view, expanded (a click on it when
// VS Code left it collapsed, as a person would).
async function locals(ed, what) {
	await ed.waitView('.debug-variables', (r) => r.includes('Locals'), `the scopes (${what})`);
	if (!(await ed.viewText('.debug-variables')).some((t) => /^x =/.test(t))) {
		const row = ed.page.locator('.debug-variables .monaco-list-row', { hasText: /^Locals$/ }).first();
		if ((await row.getAttribute('aria-expanded')) !== 'true') await row.click();
	}
	return ed.waitView('.debug-variables', (r) => r.some((t) => /^x =/.test(t)), `the locals (${what})`);
}

// Paused at the breakpoint: the Call Stack view's top frame.
async function stoppedAtBreak(ed, what) {
	await ed.assertNothingEdited();
	// At the breakpoint's line (not a stop shown before); the top frame
	// comes first, VS Code fetches the rest a moment later.
	const at = new RegExp(`^train_step train\\.py\\s*${BREAK_LINE}:`);
	return ed.waitView('.debug-call-stack',
		(r) => r.some((t) => at.test(t)) && r.some((t) => /<module>/.test(t)),
		`the stop at the breakpoint (${what})`);
}

async function disconnect(ed, target) {
	await ed.key('Shift+F5'); // Debug: Disconnect (an attach session)
	await ed.waitView('.debug-call-stack', (r) => !r.some((t) => /train_step/.test(t)), 'the session to end', 30000);
	await target.runsOn();
}

test('attach, stop, inspect, step, continue, commands, disconnect — in VS Code', { timeout: 900000 }, async () => {
	assert.ok(fs.existsSync(VSIX), `no ${VSIX}: scripts/build-extension makes it`);
	assert.ok(fs.existsSync(CLI), `no ${CLI}: build first`);
	const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-editor-ws-'));
	fs.writeFileSync(path.join(folder, 'train.py'), TRAIN);
	const port = await freePort();
	const withAgent = new Target(folder, { PROBING: '1' });
	const withoutAgent = new Target(folder, {});
	const overTcp = new Target(folder, { PROBING: '1', PROBING_PORT: String(port) });
	const targets = [withAgent, withoutAgent, overTcp];
	fs.mkdirSync(path.join(folder, '.vscode'));
	fs.writeFileSync(path.join(folder, '.vscode', 'launch.json'), JSON.stringify({
		version: '0.2.0',
		configurations: [
			{ type: 'probing', request: 'attach', name: 'Attach to the agent', processId: withAgent.pid },
			{ type: 'probing', request: 'attach', name: 'Attach and inject', processId: withoutAgent.pid },
			{ type: 'probing', request: 'attach', name: 'Attach over TCP', host: '127.0.0.1', port },
		],
	}, null, 2));
	let ed;
	try {
		await Promise.all(targets.map((t) => t.ready()));
		await waitAgent(withAgent.pid);
		await waitAgent(overTcp.pid);
		assert.ok(!agentListening(withoutAgent.pid));
		ed = await Editor.start({
			folder, vsix: VSIX, artifacts: ARTIFACTS,
		});
		await ed.photo('workbench');

		// A breakpoint by F9 in the .py file (the extension declares Python
		// breakpoints: without that VS Code refuses them).
		await ed.open('train.py');
		await ed.breakpoint(BREAK_LINE, true);
		await ed.photo('breakpoint-set');

		// 1. A process with the agent, by process id.
		await ed.command('Debug: Select and Start Debugging');
		await ed.pick('Attach to the agent');
		let stack = await stoppedAtBreak(ed, 'agent');
		assert.ok(stack.some((t) => /<module>/.test(t)), stack.join('\n'));
		await ed.photo('stopped-call-stack');

		// Variables: a tensor's shape and dtype, a module's submodules.
		let vars = await locals(ed, 'agent');
		const xRow = vars.find((t) => /^x =/.test(t));
		assert.match(xRow, /Tensor\(shape=\[8, 64\], dtype=float32, device=cpu\)/, vars.join('\n'));
		const modelRow = vars.find((t) => /^model =/.test(t));
		assert.match(modelRow, /Net\(parameters=2,344, size=9\.2 KiB\)/, vars.join('\n'));
		await ed.page.locator('.debug-variables .monaco-list-row', { hasText: /^model =/ }).first().click();
		await ed.key('ArrowRight');
		vars = await ed.waitView('.debug-variables', (r) => r.some((t) => /^fc1 =/.test(t)), 'the submodules');
		assert.ok(vars.some((t) => /^fc1 = Linear\(parameters=2,080/.test(t)), vars.join('\n'));
		assert.ok(vars.some((t) => /^fc2 = Linear\(parameters=264/.test(t)), vars.join('\n'));
		await ed.photo('variables-tensor-module');

		// The Debug Console evaluates in the stopped frame.
		await ed.key('Control+Shift+Y'); // the Debug Console
		await ed.page.locator('.repl-input-wrapper').click();
		await ed.page.keyboard.type('x.shape[1] * 2 + step * 0');
		await ed.key('Enter');
		await ed.waitView('.repl', (r) => r.some((t) => t === '128'), 'the Debug Console result');
		await ed.photo('debug-console');

		// Step over: the next line of train_step; y is there, a non-leaf
		// tensor whose grad_fn shows (and whose .grad is never read).
		await ed.key('F10');
		stack = await ed.waitView('.debug-call-stack',
			(r) => r.some((t) => new RegExp(`train_step.*train\\.py\\s*${BREAK_LINE + 1}:`).test(t)), 'the step over');
		vars = await ed.waitView('.debug-variables', (r) => r.some((t) => /^y =/.test(t)), 'y after the step');
		assert.match(vars.find((t) => /^y =/.test(t)), /Tensor\(shape=\[8, 8\], dtype=float32/);
		await ed.photo('stepped-over');

		// Continue: the loop comes back to the breakpoint.
		await ed.key('F5');
		await stoppedAtBreak(ed, 'after continue');

		// The Probing commands, on the session's process.
		await ed.command('Probing: Backtrace');
		await ed.page.locator(`.tab[aria-label^="backtrace-${withAgent.pid}.txt"]`).first().waitFor({ timeout: 30000 });
		await sleep(500);
		const bt = await ed.editorText();
		assert.match(bt, /MainThread/, bt);
		assert.match(bt, /train_step \(.*train\.py:\d+\)/, bt);
		await ed.photo('backtrace');

		await ed.command('Probing: Run SQL Query');
		const sqlInput = ed.page.locator('.quick-input-widget input');
		await sqlInput.waitFor({ state: 'visible' });
		await sqlInput.fill("SELECT func, lineno FROM python.backtrace WHERE func = 'train_step'");
		await ed.key('Enter');
		const table = await ed.waitFrameText((t) => /func\s+lineno/.test(t) && /train_step/.test(t), 'the SQL view');
		assert.match(table, new RegExp(`train_step\\s+${BREAK_LINE}`), table);
		assert.match(table, /1 row, [\d.,]+ ms/, table);
		assert.doesNotMatch(table, /\d\.\d{5,} ms/, table);
		await ed.photo('sql-view');

		// A flamegraph needs the program running: breakpoint off, continue.
		await ed.open('train.py');
		await ed.breakpoint(BREAK_LINE, false);
		await ed.key('F5');
		await ed.waitView('.debug-call-stack', (r) => !r.some((t) => /Paused/i.test(t)), 'running again', 30000);
		await ed.command('Probing: Flamegraph');
		await ed.pick('Record 10 seconds');
		// The agent's SVG in a webview: the training loop's frames (work()
		// takes most of its CPU time).
		const svg = await ed.waitFrameText((t) => /samples at 100 Hz/.test(t), 'the flamegraph', 90000);
		assert.match(svg, /train\.py \(pid \d+\): \d+ samples at 100 Hz/, svg.slice(0, 2000));
		for (const f of ['<module>', 'train_step', 'work', 'Net.forward'])
			assert.ok(svg.includes(f), `${f} not in the flamegraph:\n${svg.slice(0, 3000)}`);
		await ed.photo('flamegraph');

		await disconnect(ed, withAgent);
		await ed.photo('disconnected');

		// 2. A process without the agent: injected, then the same stop.
		await ed.open('train.py');
		await ed.breakpoint(BREAK_LINE, true);
		await ed.command('Debug: Select and Start Debugging');
		await ed.pick('Attach and inject');
		await stoppedAtBreak(ed, 'injected');
		assert.ok(agentListening(withoutAgent.pid));
		vars = await locals(ed, 'injected');
		await ed.photo('injected-stopped');
		await disconnect(ed, withoutAgent);

		// 3. By host and port.
		await ed.command('Debug: Select and Start Debugging');
		await ed.pick('Attach over TCP');
		await stoppedAtBreak(ed, 'tcp');
		await ed.photo('tcp-stopped');
		await disconnect(ed, overTcp);
		await ed.photo('done');
		// Nothing the editor showed made torch warn into the programs.
		for (const t of targets) assert.doesNotMatch(t.out, /UserWarning|Traceback/, t.out.slice(-2000));
	} finally {
		if (ed) await ed.stop();
		for (const t of targets) t.stop();
		fs.rmSync(folder, { recursive: true, force: true });
	}
});
