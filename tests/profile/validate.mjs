// Reads a profile file the way speedscope does, with speedscope's own
// importer (the npm package's bundle, loaded in a sandbox without a page),
// and prints what it understood as JSON:
//   {"importer": "Importing as ...", "profiles": [{"name", "unit",
//    "weight", "frames": {name: {"self", "total"}}}]}
// Exit status 1 when speedscope cannot import the file.
//
//   node validate.mjs FILE
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'node_modules', 'speedscope', 'dist', 'release');
const bundle = fs.readdirSync(dist).find(f => /^speedscope-.*\.js$/.test(f));
let src = fs.readFileSync(path.join(dist, bundle), 'utf8');

// The bundle is the whole app: keep its modules, drop the page.  Its
// importer module is reached through the promise the app awaits before
// importing ("(await X).importProfileGroupFromText(...)").
const m = src.match(/\(await ([\w$]+)\)\.importProfileGroupFromText\(/);
const cut = src.lastIndexOf('console.log(`speedscope v');
if (!m || cut < 0) {
  console.error('validate.mjs: this speedscope bundle has an unknown shape');
  process.exit(2);
}
src = src.slice(0, cut) + `globalThis.__importer=${m[1]};})();`;

// Whatever the app touches at load time (window, document, ...) is a
// harmless stub.
function stub() {
  const f = function () {};
  const p = new Proxy(f, {
    get: (t, k) => (k === Symbol.toPrimitive ? () => '' : k === 'then' ? undefined : p),
    apply: () => p,
    construct: () => p,
    set: () => true,
  });
  return p;
}
const said = [];
const ctx = {
  console: { log: (...a) => said.push(a.join(' ')), warn() {}, error: (...a) => said.push(a.join(' ')) },
  setTimeout, clearTimeout, TextDecoder, TextEncoder, URL, Promise,
  Uint8Array, ArrayBuffer, DataView, Math, JSON,
  window: stub(), document: stub(), navigator: stub(), localStorage: stub(), location: stub(),
};
ctx.self = ctx;
ctx.globalThis = ctx;
vm.createContext(ctx);
vm.runInContext(src, ctx);
const importer = await ctx.__importer;

const file = process.argv[2];
const group = await importer.importProfileGroupFromText(path.basename(file),
  fs.readFileSync(file, 'utf8'));
if (!group || !group.profiles.length) {
  console.error('speedscope could not import ' + file + ': ' + said.join('; '));
  process.exit(1);
}
const out = { importer: said.find(s => s.startsWith('Importing as')) || '', profiles: [] };
for (const p of group.profiles) {
  const frames = {};
  p.forEachFrame(f => {
    const e = frames[f.name] || (frames[f.name] = { self: 0, total: 0 });
    e.self += f.getSelfWeight();
    e.total += f.getTotalWeight();
  });
  out.profiles.push({ name: p.getName(), unit: p.getWeightUnit(), weight: p.getTotalWeight(), frames });
}
console.log(JSON.stringify(out));
