// The "Probing: Flamegraph" command's pure parts: what to record, the CLI
// arguments for it, and the webview page around the agent's SVG (which
// brings its own script: zoom on click, search with Ctrl-F).
import { escapeHtml } from './table';

export interface FlameChoice {
	label: string;
	detail: string;
	args: string[];
	seconds: number; // how long recording takes (0: nothing to record)
}

export const flameChoices: FlameChoice[] = [
	{ label: 'Record 10 seconds', detail: 'Python stacks of every thread, time on CPU', args: ['-d', '10s'], seconds: 10 },
	{ label: 'Record 30 seconds', detail: 'Python stacks of every thread, time on CPU', args: ['-d', '30s'], seconds: 30 },
	{ label: 'Record 10 seconds with C/C++ frames', detail: 'native stacks too, Python frames spliced in', args: ['-d', '10s', '--native'], seconds: 10 },
	{ label: 'Record 10 seconds, waiting included', detail: 'idle and GIL-waiting time too, marked', args: ['-d', '10s', '--idle'], seconds: 10 },
	{ label: 'The last 60 seconds already recorded', detail: 'the samples of a running `probing perf`', args: ['--recorded', '-d', '60s'], seconds: 0 },
];

export function flameArgs(target: string, choice: FlameChoice, out: string): string[] {
	return ['-t', target, 'flamegraph', ...choice.args, '--as', 'svg', '-o', out];
}

export function flamePage(svg: string, title: string): string {
	// The SVG goes inline (its script runs; the XML prolog has no place in
	// HTML); the page's policy allows inline scripts and styles only.
	const body = svg.replace(/^\s*<\?xml[^>]*\?>\s*/, '');
	return `<!DOCTYPE html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline';">
<title>${escapeHtml(title)}</title>
<style>body { margin: 0; background: #f8f8f4; } svg { width: 100%; height: auto; display: block; }</style>
</head><body>
${body}
</body></html>`;
}
