import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { flameArgs, flameChoices, flamePage } from '../flamegraph';

test('flamegraph command: CLI arguments of each choice', () => {
	for (const c of flameChoices) {
		const a = flameArgs('4242', c, '/tmp/f.svg');
		assert.deepEqual(a.slice(0, 3), ['-t', '4242', 'flamegraph']);
		assert.deepEqual(a.slice(-4), ['--as', 'svg', '-o', '/tmp/f.svg']);
		assert.ok(a.includes('-d'));
	}
	assert.ok(flameArgs('@x', flameChoices[2], 'o.svg').includes('--native'));
	assert.equal(flameChoices.filter((c) => c.seconds === 0).length, 1);
});

test('flamegraph page: the SVG inline, without its XML prolog, scripts allowed', () => {
	const svg = '<?xml version="1.0" standalone="no"?>\n<svg id="fg-root" xmlns="http://www.w3.org/2000/svg"><script><![CDATA[init()]]></script></svg>\n';
	const html = flamePage(svg, 'train.py <pid 1>');
	assert.ok(html.startsWith('<!DOCTYPE html>'));
	assert.ok(!html.includes('<?xml'));
	assert.ok(html.includes('<svg id="fg-root"'));
	assert.ok(html.includes("script-src 'unsafe-inline'"));
	assert.ok(html.includes('<title>train.py &lt;pid 1&gt;</title>'));
});
