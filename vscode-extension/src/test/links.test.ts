import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { frameLinks } from '../links';

test('frames of a verdict: each absolute path and line, at its place', () => {
	const text = 'verdict: rank 1 has not reached it (it is in load_batch (ddp_train.py:40))\n' +
		'  #0  load_batch (/work/main/examples/ddp_train.py:40)\n' +
		'  #1  Tensor.backward (/usr/lib/python3/dist-packages/torch/_tensor.py:488)\n' +
		'  #2  <module> (<string>:1)\n';
	const links = frameLinks(text);
	assert.deepEqual(links.map((l) => [l.path, l.line]), [
		['/work/main/examples/ddp_train.py', 40],
		['/usr/lib/python3/dist-packages/torch/_tensor.py', 488],
	]);
	assert.equal(text.slice(links[0].start, links[0].end), '/work/main/examples/ddp_train.py:40');
});

test('a bound on the links of a huge text', () => {
	assert.equal(frameLinks('f (/a.py:1)\n'.repeat(50), 10).length, 10);
});
