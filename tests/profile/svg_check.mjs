// Exercises the script of a Probing SVG flamegraph in a DOM (jsdom), the
// way a browser or a VS Code webview runs it, and prints what happened as
// JSON:
//   {"frames", "total", "zoom": {...}, "search": {...}, "reset": {...}}
// Zoom: a click on a frame makes it span the width (1180 user units
// between the margins), shows its ancestors greyed and hides what is
// beside it.  Search: Ctrl-F, typing, Enter highlights the frames whose
// label matches and says which share of the samples they hold.
//
//   node svg_check.mjs FILE.svg REGEX
import fs from 'node:fs';
import { JSDOM } from 'jsdom';

const [file, query] = process.argv.slice(2);
const svg = fs.readFileSync(file, 'utf8').replace(/^\s*<\?xml[^>]*\?>\s*/, '');
const dom = new JSDOM(`<!DOCTYPE html><html><body>${svg}</body></html>`, { runScripts: 'outside-only' });
const { window } = dom;
const doc = window.document;
// jsdom runs no script inside an <svg>: run it as the page would.
const script = doc.querySelector('script').textContent;
window.eval(script);
window.init();

const frames = [...doc.getElementById('frames').getElementsByTagName('g')];
const root = doc.getElementById('fg-root');
const total = Number(root.getAttribute('data-total'));
const num = (g, a) => Number(g.getAttribute(a));
const rect = (g) => g.getElementsByTagName('rect')[0];
const width = (g) => Number(rect(g).getAttribute('width'));
const shown = (g) => g.style.display !== 'none';
const key = (k, opts = {}) => window.dispatchEvent(new window.KeyboardEvent('keydown', { key: k, ...opts }));

// Zoom into the widest frame two levels up, if any, else the deepest.
const target = frames.filter((g) => num(g, 'data-d') >= 2 && num(g, 'data-w') < total)
  .sort((a, b) => num(b, 'data-w') - num(a, 'data-w'))[0] || frames[frames.length - 1];
target.dispatchEvent(new window.MouseEvent('click', { bubbles: true }));
const tx = num(target, 'data-x'), tw = num(target, 'data-w'), td = num(target, 'data-d');
const zoom = {
  label: target.getAttribute('data-n'),
  width: width(target),
  ancestorsGrey: frames.filter((g) => num(g, 'data-d') < td && shown(g))
    .every((g) => g.getAttribute('class').includes('parent') && width(g) > 1179),
  outsideHidden: frames.filter((g) => num(g, 'data-x') + num(g, 'data-w') <= tx || num(g, 'data-x') >= tx + tw)
    .every((g) => !shown(g)),
  unzoomShown: doc.getElementById('unzoom').getAttribute('class') === 'btn',
};

// Search by keyboard, as a webview without prompt() allows.
key('f', { ctrlKey: true });
for (const ch of query) key(ch);
key('Enter');
const re = new RegExp(query);
const search = {
  matched: doc.getElementById('matched').textContent,
  highlighted: frames.filter((g) => rect(g).getAttribute('fill') === 'rgb(230,0,230)').length,
  expected: frames.filter((g) => re.test(g.getAttribute('data-n'))).length,
};

key('Escape');
const reset = {
  allShown: frames.every((g) => shown(g) || num(g, 'data-w') * 1180 / total < 0.1),
  rootWidth: Math.max(...frames.filter((g) => num(g, 'data-d') === 1).map(width)),
  unhighlighted: frames.every((g) => rect(g).getAttribute('fill') === rect(g).getAttribute('data-c')),
};
console.log(JSON.stringify({ frames: frames.length, total, zoom, search, reset }));
