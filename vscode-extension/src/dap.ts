// A small DAP client over `probing -t TARGET dap` (the CLI's stdio
// bridge), for the extension's own requests (SQL, ...).  No vscode import.
import * as cp from 'child_process';

export interface DapResponse {
	success: boolean;
	message?: string;
	body?: any;
}

export class StdioDap {
	private buf = Buffer.alloc(0);
	private seq = 1;
	private pending = new Map<number, (r: DapResponse) => void>();
	private proc: cp.ChildProcess;
	private stderr = '';
	private ended: string | null = null;

	// env: added to this process's environment (PROBING_TOKEN).
	constructor(cli: string, target: string, timeoutMs: number, env?: Record<string, string>) {
		this.proc = cp.spawn(cli, ['-t', target, '--timeout', String(timeoutMs), 'dap'],
			{ stdio: ['pipe', 'pipe', 'pipe'], env: env ? { ...process.env, ...env } : undefined });
		this.proc.stdout!.on('data', (d: Buffer) => this.feed(d));
		this.proc.stderr!.on('data', (d: Buffer) => { this.stderr += d.toString(); });
		this.proc.on('error', (e) => this.end(`cannot run ${cli}: ${e.message}`));
		// The tool exited (it could not connect, or the agent refused):
		// writing to it fails, and the exit says why.
		this.proc.stdin!.on('error', () => { /* the 'exit' handler ends it */ });
		this.proc.on('exit', (code) => this.end(this.stderr.trim() || `probing dap exited (${code})`));
	}

	private end(why: string) {
		if (this.ended) return;
		this.ended = why;
		for (const [, resolve] of this.pending) resolve({ success: false, message: why });
		this.pending.clear();
	}

	private feed(d: Buffer) {
		this.buf = Buffer.concat([this.buf, d]);
		for (;;) {
			const i = this.buf.indexOf('\r\n\r\n');
			if (i < 0) return;
			const m = /Content-Length:\s*(\d+)/i.exec(this.buf.subarray(0, i).toString());
			if (!m) { this.end('bad frame from probing dap'); return; }
			const n = Number(m[1]);
			if (this.buf.length < i + 4 + n) return;
			const msg = JSON.parse(this.buf.subarray(i + 4, i + 4 + n).toString());
			this.buf = this.buf.subarray(i + 4 + n);
			if (msg.type === 'response') {
				const r = this.pending.get(msg.request_seq);
				this.pending.delete(msg.request_seq);
				if (r) r(msg);
			}
		}
	}

	request(command: string, args: unknown, timeoutMs = 30000): Promise<DapResponse> {
		if (this.ended) return Promise.resolve({ success: false, message: this.ended });
		const seq = this.seq++;
		const body = Buffer.from(JSON.stringify({ seq, type: 'request', command, arguments: args }));
		return new Promise((resolve) => {
			const timer = setTimeout(() => {
				this.pending.delete(seq);
				resolve({ success: false, message: `no answer to ${command} within ${timeoutMs} ms` });
			}, timeoutMs);
			this.pending.set(seq, (r) => { clearTimeout(timer); resolve(r); });
			this.proc.stdin!.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]));
		});
	}

	close() {
		try { this.proc.stdin!.end(); } catch (e) { /* gone */ }
		setTimeout(() => { try { this.proc.kill(); } catch (e) { /* gone */ } }, 2000).unref();
	}
}
