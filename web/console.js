/*
 * console.js -- the presto-admind console.
 *
 * Polls /api/status and /api/stats every second for the tiles, the alarms
 * and the exports; draws the history from /api/series with uPlot (served
 * from the same folder: nothing comes from the internet). Changes (the
 * acceleration switch, flush) are POSTs with the admin token as a bearer
 * header; the token comes from the field in the header or from a
 * "#token=..." fragment (never sent to the server, removed from the address
 * bar), and is kept in this browser's localStorage.
 */
'use strict';

const TOKEN_KEY = 'presto-admind-token';
const RANGES = {
  '5m': { from: -300, step: 1, every: 1000 },
  '1h': { from: -3600, step: 10, every: 5000 },
  '24h': { from: -86400, step: 60, every: 30000 },
  '30d': { from: -30 * 86400, step: 1800, every: 60000 },
};
const COLORS = ['#2b6cb0', '#c05621', '#2f855a', '#6b46c1', '#b83280', '#2c7a7b', '#975a16', '#4a5568', '#e53e3e'];

const $ = (id) => document.getElementById(id);
const state = { range: '5m', procs: [], charts: {}, busy: false, exportsKey: '' };
window.presto = state;	/* for the browser test */

/* ---- formatting ---- */

function fmtNum(v, digits = 1) {
  if (v == null || !isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(digits) + 'G';
  if (a >= 1e6) return (v / 1e6).toFixed(digits) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(digits) + 'k';
  if (a >= 100) return v.toFixed(0);
  return v.toFixed(a >= 10 ? 1 : 2);
}
function fmtBytes(v) {
  if (v == null || !isFinite(v)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return v.toFixed(v >= 100 || i === 0 ? 0 : 1) + ' ' + u[i];
}
function fmtUs(v) {
  if (v == null || !isFinite(v)) return '–';
  if (v === 0) return '0';
  if (v >= 1e6) return (v / 1e6).toFixed(2) + ' s';
  if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + ' ms';
  return v.toFixed(v >= 100 ? 0 : 1) + ' µs';
}
function fmtMs(v) { return v == null ? '–' : fmtUs(v * 1000); }
function fmtRate(v) { return v == null ? '–' : fmtBytes(v) + '/s'; }

/* ---- requests ---- */

function token() { return localStorage.getItem(TOKEN_KEY) || ''; }

async function getJSON(url) {
  const r = await fetch(url, { cache: 'no-store' });
  const body = await r.json().catch(() => ({ error: 'not JSON' }));
  if (!r.ok) throw Object.assign(new Error(body.error || r.statusText), { status: r.status });
  return body;
}

async function post(url, body) {
  const headers = { 'Content-Type': 'application/json' };
  if (token()) headers.Authorization = 'Bearer ' + token();
  const r = await fetch(url, { method: 'POST', headers, body: body ? JSON.stringify(body) : undefined });
  const res = await r.json().catch(() => ({ error: 'not JSON' }));
  if (!r.ok) {
    if (r.status === 401) {
      $('token').focus();
      throw new Error('the admin token is needed: paste it in the field at the top (' + (res.error || '') + ')');
    }
    throw new Error(res.error || r.statusText);
  }
  return res;
}

function say(text, error = false) {
  const m = $('message');
  m.textContent = text;
  m.className = error ? 'error' : '';
}

/* ---- tiles, alarms, exports ---- */

function renderStatus(st) {
  const nfsd = st.nfsd;
  const s = $('state');
  const label = st.reachable && nfsd ? nfsd.state : 'UNREACHABLE';
  s.textContent = label;
  s.className = 'badge ' + label;
  $('updated').textContent = 'sampled ' + new Date(st.ts * 1000).toLocaleTimeString() +
    ' · ' + st.admind.samples + ' samples';

  const al = $('alarms');
  al.replaceChildren(...st.alarms.map((a) => {
    const li = document.createElement('li');
    li.className = a.level;
    li.textContent = a.text;
    return li;
  }));

  if (!st.reachable || !nfsd) {
    /* nothing is known while presto-nfsd does not answer: no stale figures,
     * no stale procedure counts, and no switch or flush button that can
     * only fail (they are drawn again when it answers) */
    for (const id of ['occ', 'age', 'ops', 'lat', 'rpp', 'destage', 'avoided']) $(id).textContent = '–';
    $('occ-bar').style.width = '0';
    for (const id of ['occ-detail', 'lat-proc', 'destage-detail', 'avoided-detail']) $(id).textContent = '';
    $('procs').tBodies[0].replaceChildren();
    if (!state.busy) {
      for (const el of document.querySelectorAll('#exports input, #exports button')) el.disabled = true;
      state.exportsKey = '';
    }
    return;
  }
  const occ = nfsd.occupancy_pct || 0;
  $('occ').textContent = occ.toFixed(occ < 10 ? 2 : 1) + ' %';
  const bar = $('occ-bar');
  bar.style.width = Math.min(100, occ) + '%';
  bar.style.background = occ >= 90 ? 'var(--bad)' : occ >= 75 ? 'var(--warn)' : 'var(--ok)';
  $('occ-detail').textContent = fmtBytes(nfsd.dirty_bytes) + ' of ' + fmtBytes(nfsd.area_bytes) +
    ' · ' + (nfsd.nvram ? (nfsd.nvram.kind || '') + ' ' + (nfsd.nvram.path || '') : '');
  $('age').textContent = fmtMs(nfsd.oldest_age_ms);
  renderExports(nfsd.exports || []);
}

function renderExports(list) {
  const key = JSON.stringify(list);
  if (key === state.exportsKey || state.busy) return;
  state.exportsKey = key;
  const tb = $('exports').tBodies[0];
  tb.replaceChildren(...list.map((x) => {
    const tr = document.createElement('tr');
    tr.dataset.export = x.path;
    const name = document.createElement('td');
    name.textContent = x.path + (x.read_only ? ' (read-only)' : '');
    const sw = document.createElement('td');
    const lab = document.createElement('label');
    lab.className = 'switch';
    lab.title = !x.presto_option ? 'nopresto in the exports file'
      : x.no_mark ? "its root refuses the log's extended attribute: written through"
      : 'acceleration (presto) on or off';
    const cb = document.createElement('input');
    cb.type = 'checkbox';
    cb.checked = x.presto;
    cb.disabled = !x.presto_option || x.read_only || x.no_mark === true;
    cb.dataset.testid = 'presto-switch';
    cb.setAttribute('aria-label', 'acceleration for ' + x.path);
    cb.addEventListener('change', () => setPresto(x.path, cb));
    lab.append(cb, document.createElement('span'));
    const txt = document.createElement('span');
    txt.className = 'muted';
    txt.textContent = x.presto ? ' on' : ' off';
    sw.append(lab, txt);
    const fl = document.createElement('td');
    const b = document.createElement('button');
    b.textContent = 'flush';
    b.title = 'destage the whole NVRAM log now';
    b.dataset.testid = 'flush';
    b.addEventListener('click', () => flush(b));
    fl.append(b);
    const id = document.createElement('td');
    id.className = 'muted';
    id.textContent = x.id;
    tr.append(name, sw, fl, id);
    return tr;
  }));
}

async function setPresto(path, cb) {
  const on = cb.checked;
  state.busy = true;
  cb.disabled = true;
  say((on ? 'enabling' : 'disabling') + ' acceleration for ' + path + (on ? '' : ' (flushing first)') + ' …');
  try {
    const res = await post('api/exports/' + encodeURIComponent(path) + '/presto', { presto: on });
    const x = (res.exports || []).find((e) => e.path === path);
    say('acceleration ' + (x && x.presto ? 'on' : 'off') + ' for ' + path);
  } catch (e) {
    cb.checked = !on;
    say(e.message, true);
  } finally {
    state.busy = false;
    state.exportsKey = '';
    cb.disabled = false;
    refresh();
  }
}

async function flush(b) {
  b.disabled = true;
  say('flushing the log …');
  try {
    const res = await post('api/flush');
    say('flushed in ' + fmtMs(res.ms));
  } catch (e) {
    say(e.message, true);
  } finally {
    b.disabled = false;
  }
}

function renderStats(s) {
  const rates = s.rates || {};
  const procs = (s.stats.procs || []).filter((p) => !/^U?MNT/.test(p.name));
  $('ops').textContent = fmtNum(rates.ops);
  let busiest = null;
  for (const p of procs) {
    const r = rates['ops.' + p.name] || 0;
    if (r > 0 && (!busiest || r > (rates['ops.' + busiest.name] || 0))) busiest = p;
  }
  if (!busiest) busiest = procs.filter((p) => p.count > 0).sort((a, b) => b.count - a.count)[0];
  $('lat-proc').textContent = busiest ? busiest.name : '';
  $('lat').textContent = busiest ? fmtUs(busiest.p50_us) + ' / ' + fmtUs(busiest.p99_us) : '–';
  const lg = s.stats.log || {};
  $('rpp').textContent = rates['log.persists'] > 0
    ? fmtNum(rates['log.appends'] / rates['log.persists']) : fmtNum(lg.records_per_persist);
  const ds = s.stats.destage || {};
  $('destage').textContent = fmtBytes(rates['destage.bytes'] || 0) + '/s';
  $('destage-detail').textContent = 'last checkpoint ' + fmtMs(ds.last_ms) + ' · ' + ds.runs + ' runs';
  $('avoided').textContent = Number(s.stats.commits_avoided || 0).toLocaleString('en');
  $('avoided-detail').textContent = fmtNum(rates.commits_avoided || 0) + ' per second now';

  const tb = $('procs').tBodies[0];
  tb.replaceChildren(...s.stats.procs.filter((p) => p.count > 0).map((p) => {
    const tr = document.createElement('tr');
    for (const v of [p.name, fmtNum(rates['ops.' + p.name] || 0), p.count, p.errors,
      fmtUs(p.mean_us), fmtUs(p.p50_us), fmtUs(p.p99_us)]) {
      const td = document.createElement('td');
      td.textContent = v;
      tr.append(td);
    }
    return tr;
  }));

  /* the ops chart shows the procedures that have been called */
  const used = procs.filter((p) => p.count > 0).sort((a, b) => b.count - a.count).slice(0, 6).map((p) => p.name);
  if (used.join() !== state.procs.join()) {
    state.procs = used;
    buildCharts();
  }
}

/* ---- charts ---- */

function chartDefs() {
  return [
    { id: 'ops', title: 'operations per second', metrics: ['ops', ...state.procs.map((p) => 'ops.' + p)],
      labels: ['all', ...state.procs], fmt: fmtNum },
    { id: 'latency', title: 'latency of each second (µs): mean, and p99 of the busiest', metrics: ['lat_us', ...state.procs.slice(0, 3).map((p) => 'p99_us.' + p)],
      labels: ['mean, all', ...state.procs.slice(0, 3).map((p) => 'p99 ' + p)], fmt: fmtUs },
    { id: 'occupancy', title: 'NVRAM occupancy (%)', metrics: ['log.occupancy_pct'], labels: ['occupancy %'], fmt: fmtNum },
    { id: 'rpp', title: 'records per persist', metrics: ['log.records_per_persist'], labels: ['records/persist'],
      fmt: (v) => (v == null ? '–' : v < 10 ? String(+v.toFixed(3)) : fmtNum(v)) },
    { id: 'destage', title: 'destage rate and log append rate', metrics: ['destage.bytes', 'log.append_bytes'],
      labels: ['destaged', 'logged'], fmt: fmtRate },
    { id: 'checkpoint', title: 'checkpoint time and oldest record (ms)', metrics: ['destage.ms', 'log.oldest_age_ms'],
      labels: ['destage run', 'oldest record age'], fmt: fmtMs },
    { id: 'avoided', title: 'COMMITs avoided per second', metrics: ['commits_avoided'], labels: ['COMMITs avoided/s'], fmt: fmtNum },
  ];
}

/* yRange -- the y scale of every chart. uPlot's tick loop never ends on a
 * range that is flat up to float noise (records per persist of 1.0000002
 * and 0.9999998 threw "Invalid array length": leeoniya/uPlot#1084, where
 * such a range is the caller's to handle), so it is widened here as uPlot
 * widens an exactly flat one; other ranges get uPlot's default padding. */
function yRange(u, min, max) {
  if (min == null || max == null || !isFinite(min) || !isFinite(max)) return [0, 1];
  const mag = Math.max(Math.abs(min), Math.abs(max));
  if (max - min <= mag * 1e-6) {
    const pad = mag > 0 ? mag * 0.1 : 1;
    return [min >= 0 ? Math.max(0, min - pad) : min - pad, max + pad];
  }
  return uPlot.rangeNum(min, max, 0.1, true);
}

function buildCharts() {
  const box = $('charts');
  for (const c of Object.values(state.charts)) if (c.plot) c.plot.destroy();
  state.charts = {};
  box.replaceChildren();
  if (typeof uPlot === 'undefined') {
    box.textContent = 'the chart library (uPlot) did not load';
    return;
  }
  for (const d of chartDefs()) {
    const el = document.createElement('div');
    el.className = 'chart';
    el.dataset.chart = d.id;
    el.dataset.points = '0';
    box.append(el);
    const width = Math.max(300, el.clientWidth - 12);
    const opts = {
      title: d.title, width, height: 200,
      scales: { x: { time: true }, y: { range: yRange } },
      series: [{}, ...d.labels.map((l, i) => ({
        label: l, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false,
        value: (u, v) => (v == null ? '–' : d.fmt(v)),
      }))],
      axes: [{}, { values: (u, vals) => vals.map((v) => d.fmt(v)), size: 78 }],
      legend: { live: true },
    };
    const data = [[], ...d.labels.map(() => [])];
    state.charts[d.id] = { def: d, el, plot: new uPlot(opts, data, el) };
  }
  loadSeries(true);
}

async function loadSeries(force) {
  const range = state.range;
  const r = RANGES[range];
  const now = Date.now();
  if (!force && state.lastLoad && now - state.lastLoad < r.every) return;
  state.lastLoad = now;
  await Promise.all(Object.values(state.charts).map(async (c) => {
    try {
      const q = 'api/series?metric=' + encodeURIComponent(c.def.metrics.join(',')) +
        '&from=' + r.from + '&step=' + r.step;
      const s = await getJSON(q);
      if (range !== state.range) return;	/* a newer range was asked for */
      const data = [s.t, ...c.def.metrics.map((m) => s.series[m] || s.t.map(() => null))];
      c.plot.setData(data);
      const points = data.slice(1).reduce((n, col) => n + col.filter((v) => v != null).length, 0);
      c.el.dataset.points = String(points);
      c.el.dataset.source = s.source;
      c.el.dataset.range = range;
    } catch (e) {
      c.el.dataset.error = e.message;
    }
  }));
}

function resizeCharts() {
  for (const c of Object.values(state.charts))
    c.plot.setSize({ width: Math.max(300, c.el.clientWidth - 12), height: 200 });
}

/* ---- the loop ---- */

async function refresh() {
  try {
    const st = await getJSON('api/status');
    renderStatus(st);
    if (st.reachable) renderStats(await getJSON('api/stats'));
  } catch (e) {
    const s = $('state');
    s.textContent = 'NO ADMIND';
    s.className = 'badge ERROR';
  }
  loadSeries(false);
}

function init() {
  const m = /[#&]token=([^&]+)/.exec(location.hash);
  if (m) {
    try {
      localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    } catch (e) {
      say('the token in the address is malformed: paste it below', true);
    }
    history.replaceState(null, '', location.pathname + location.search);
  }
  $('token').value = token();
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    localStorage.setItem(TOKEN_KEY, $('token').value.trim());
    say('token saved in this browser');
  });
  for (const b of document.querySelectorAll('#ranges button')) {
    b.addEventListener('click', () => {
      state.range = b.dataset.range;
      for (const o of document.querySelectorAll('#ranges button')) o.classList.toggle('on', o === b);
      loadSeries(true);
    });
  }
  window.addEventListener('resize', resizeCharts);
  buildCharts();
  refresh();
  setInterval(refresh, 1000);
}

document.addEventListener('DOMContentLoaded', init);
