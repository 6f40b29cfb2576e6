const { DebugClient } = require('@vscode/debugadapter-testsupport');
const { attach } = require('./lib/debug');
(async () => {
  const mk = (t) => { const dc = new DebugClient('/work/main/build/cli/probing', 'dap', 'probing', { env: { ...process.env, PROBING_TARGET: String(t) } }, true); dc.reverse = []; const d = dc.dispatch.bind(dc); dc.dispatch = (b) => { const m = JSON.parse(b); if (m.type === 'request') dc.reverse.push(m); else d(b); }; return dc; };
  const parent = mk(process.argv[2]); await parent.start();
  await parent.initializeRequest({ adapterID: 'probing', supportsStartDebuggingRequest: true });
  await parent.attachRequest({ job: true });
  await new Promise((r) => setTimeout(r, 1000));
  const kids = [];
  for (const m of parent.reverse) {
    const cfg = m.arguments.configuration;
    const kid = mk(cfg.processId); await kid.start();
    kid._adapterProcess.on('exit', (c, s) => console.log('KID EXIT', cfg.rank, c, s));
    kid.on('output', (e) => console.log('KID OUT', cfg.rank, e.body.output.trim()));
    kid.on('terminated', (e) => console.log('KID TERMINATED', cfg.rank));
    const { log, breakpoints } = await attach(kid, { bps: { '/work/main/examples/ddp_train.py': [{ line: 61, condition: 'step == ' + process.argv[3] }] }, args: cfg });
    console.log('bps', cfg.rank, JSON.stringify(breakpoints));
    kids.push({ kid, log });
  }
  for (const k of kids) { const ev = await k.log.next('stopped', () => true, 60000); console.log('stopped', JSON.stringify(ev.body)); }
  process.exit(0);
})().catch((e) => { console.error('ERR', e.message); process.exit(1); });
