// admind_browser.mjs -- the console in headless Chromium (Debian's
// /usr/bin/chromium driven by playwright-core; no browser is downloaded).
//
// Run by test-admind-browser.sh, which starts presto-nfsd, a libnfs load and
// presto-admind, and passes:
//   ADMIND_URL    http://127.0.0.1:PORT/
//   ADMIND_TOKEN  the admin token
//   EXPORT_PATH   an export with acceleration on
//   SHOT          where to save the screenshot
//   WEB_DIR       web/ (where playwright-core is installed)
// Prints "ok N - ..." / "not ok N - ..." lines (TAP), which the script counts.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.WEB_DIR, 'package.json'));
const { chromium } = require('playwright-core');

const url = process.env.ADMIND_URL;
const token = process.env.ADMIND_TOKEN;
const exportPath = process.env.EXPORT_PATH;
let passed = 0, failed = 0, n = 0;

function check(ok, what, detail = '') {
  n++;
  if (ok) passed++; else failed++;
  console.log(`${ok ? 'ok' : 'not ok'} ${n} - ${what}${detail ? ': ' + detail : ''}`);
  return ok;
}

async function step(what, fn) {
  try {
    const detail = await fn();
    check(true, what, typeof detail === 'string' ? detail : '');
  } catch (e) {
    check(false, what, String(e && e.message ? e.message.split('\n')[0] : e));
  }
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--disable-dev-shm-usage'],
  timeout: 20000,
});
const watchdog = setTimeout(() => {
  console.log('not ok - the browser test ran out of time (45 s)');
  console.log(`# ${passed} ok, ${failed + 1} not ok`);
  browser.close().finally(() => process.exit(1));
}, 45000);

try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
  page.on('request', (r) => {
    if (!r.url().startsWith(url)) problems.push('request off the server: ' + r.url());
  });

  await step('the console loads and shows presto-nfsd UP', async () => {
    await page.goto(url + '#token=' + token, { waitUntil: 'load' });
    await page.waitForFunction(() => document.getElementById('state').textContent === 'UP',
      null, { timeout: 8000 });
    if (page.url().includes('token=')) throw new Error('the token stays in the address bar');
  });

  await step('tiles show occupancy, operations and latency', async () => {
    await page.waitForFunction(() => parseFloat(document.getElementById('ops').textContent) > 0,
      null, { timeout: 8000 });
    const t = await page.evaluate(() => ({
      occ: document.getElementById('occ').textContent,
      ops: document.getElementById('ops').textContent,
      lat: document.getElementById('lat').textContent,
      rpp: document.getElementById('rpp').textContent,
    }));
    if (!/%/.test(t.occ) || t.lat === '–') throw new Error(JSON.stringify(t));
    return JSON.stringify(t);
  });

  const charts = ['ops', 'latency', 'occupancy', 'rpp', 'destage', 'checkpoint', 'avoided'];
  for (const range of ['1h', '24h', '30d', '5m']) {
    await step(`charts over ${range} show data from the history`, async () => {
      await page.click(`#ranges button[data-range="${range}"]`);
      await page.waitForFunction(([ids, r]) => ids.every((id) => {
        const el = document.querySelector(`[data-chart="${id}"]`);
        return el && el.dataset.range === r && Number(el.dataset.points) > 0;
      }), [charts, range], { timeout: 10000 });
      const nonzero = await page.evaluate(() =>
        window.presto.charts.ops.plot.data[1].filter((v) => v > 0).length);
      if (!(nonzero > 0)) throw new Error('operations per second is all zero or empty');
      const pts = await page.evaluate((ids) => ids.map((id) =>
        id + '=' + document.querySelector(`[data-chart="${id}"]`).dataset.points), charts);
      return pts.join(' ');
    });
  }

  const row = `tr[data-export="${exportPath}"]`;
  async function exportsNow() {
    return page.evaluate(async () => (await (await fetch('api/exports')).json()).exports);
  }
  await step('the switch turns acceleration off for the export', async () => {
    if (!(await page.isChecked(`${row} input[type=checkbox]`))) throw new Error('not on at start');
    await page.click(`${row} label.switch`);
    await page.waitForFunction(() => /acceleration off/.test(document.getElementById('message').textContent),
      null, { timeout: 15000 });
    const mine = (await exportsNow()).find((e) => e.path === exportPath);
    if (!mine || mine.presto !== false) throw new Error('presto-nfsd still has it on');
  });
  await step('the switch turns acceleration on again', async () => {
    await page.waitForFunction((r) => !document.querySelector(`${r} input`).checked, row, { timeout: 5000 });
    await page.click(`${row} label.switch`);
    await page.waitForFunction(() => /acceleration on/.test(document.getElementById('message').textContent),
      null, { timeout: 15000 });
    const ex = await exportsNow();
    if (!ex.every((e) => e.presto || !e.presto_option)) throw new Error(JSON.stringify(ex));
  });
  await step('flush destages the log', async () => {
    await page.click(`${row} button[data-testid="flush"]`);
    await page.waitForFunction(() => /flushed in/.test(document.getElementById('message').textContent),
      null, { timeout: 20000 });
    return await page.textContent('#message');
  });

  await step('a series flat up to float noise draws (uPlot#1084)', async () => {
    const before = problems.length;
    await page.evaluate(async () => {
      const t = Math.floor(Date.now() / 1000);
      const plot = window.presto.charts.rpp.plot;
      plot.setData([[t - 2, t - 1], [1.0000002, 0.9999998]]);
      await new Promise((r) => setTimeout(r, 300));
    });
    if (problems.length > before) throw new Error(problems.slice(before).join('; '));
  });

  await step('the tiles clear while presto-nfsd does not answer', async () => {
    const pid = Number(process.env.NFSD_PID);
    process.kill(pid, 'SIGSTOP');
    try {
      await page.waitForFunction(() => document.getElementById('state').textContent === 'UNREACHABLE',
        null, { timeout: 15000 });
      await page.waitForTimeout(1200);
      const t = await page.evaluate(() => ['occ', 'age', 'ops', 'lat', 'rpp', 'destage', 'avoided'].map(
        (id) => document.getElementById(id).textContent));
      if (t.some((v) => v !== '–')) throw new Error('stale figures: ' + JSON.stringify(t));
      /* nor the last counters of the procedures, nor switches and flush
       * buttons that can only fail */
      const rows = await page.evaluate(() => document.getElementById('procs').tBodies[0].rows.length);
      if (rows !== 0) throw new Error(`the procedure table keeps ${rows} stale rows`);
      const live = await page.evaluate(() => [...document.querySelectorAll(
        '#exports input, #exports button')].filter((e) => !e.disabled).length);
      if (live !== 0) throw new Error(`${live} export controls stay enabled`);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await page.waitForFunction(() => document.getElementById('state').textContent === 'UP',
      null, { timeout: 15000 });
    /* and they come back with presto-nfsd */
    await page.waitForFunction((r) => {
      const cb = document.querySelector(`${r} input`);
      return cb && !cb.disabled && document.getElementById('procs').tBodies[0].rows.length > 0;
    }, row, { timeout: 8000 });
  });

  await step('a malformed token in the address does not stop the console', async () => {
    const before = problems.length;
    await page.goto('about:blank');	// else only the fragment changes: no new load
    await page.waitForTimeout(300);
    problems.length = before;		// the requests that leaving the page cut short
    await page.goto(url + '#token=%E0%A4%A', { waitUntil: 'load' });
    await page.waitForFunction(() => document.getElementById('state').textContent === 'UP',
      null, { timeout: 8000 });
    if (!/malformed/.test(await page.textContent('#message'))) throw new Error('no word of it');
    const kept = await page.evaluate(() => localStorage.getItem('presto-admind-token'));
    if (kept !== token) throw new Error('the saved token was replaced');
  });

  await step('screenshot saved', async () => {
    await page.waitForTimeout(1200);	// one more live update
    await page.screenshot({ path: process.env.SHOT, fullPage: true });
    return process.env.SHOT;
  });
  check(problems.length === 0, 'no page errors, no request failed or left the server',
    problems.slice(0, 3).join('; '));
} catch (e) {
  check(false, 'browser session', e.message);
} finally {
  clearTimeout(watchdog);
  await browser.close();
}
console.log(`# ${passed} ok, ${failed} not ok`);
process.exit(failed ? 1 : 0);
