/**
 * The runs page `tron serve` serves at `/runs`, beside the live board: the repository's runs
 * as charts — landed blocks per day, lead time and where it went, cost per landed block by
 * role and by model, the first-try gate pass rate, the most frequent failing facts and
 * escalations — and the latest runs as a list. Like the board it is one page with its
 * script inline, a client of the API only (`/api/v1/charts`, `/api/v1/runs`), taking the
 * token as the board does (the URL's fragment, then sessionStorage). It draws its SVG
 * itself: a few rectangles and a ring need no chart library, and nothing is fetched from
 * anywhere but this server.
 */

const STYLE = `
  :root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --bg: #f6f8fa; --accent: #0969da; --ok: #1a7f37; --warn: #9a6700; --bad: #cf222e; }
  * { box-sizing: border-box; }
  html, body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Arial, sans-serif; color: var(--fg); background: #fff; }
  header { display: flex; gap: 16px; align-items: baseline; padding: 10px 16px; border-bottom: 1px solid var(--line); background: var(--bg); flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0; }
  header nav a { color: var(--accent); text-decoration: none; }
  header nav a[aria-current] { color: var(--fg); font-weight: 600; }
  header .item { color: var(--muted); }
  header label { margin-left: auto; color: var(--muted); }
  #problem { display: none; padding: 10px 16px; background: #ffebe9; color: var(--bad); border-bottom: 1px solid var(--line); }
  main { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; padding: 12px 16px 16px; }
  section { border: 1px solid var(--line); border-radius: 6px; display: flex; flex-direction: column; }
  section.wide { grid-column: 1 / -1; }
  section h2 { font-size: 13px; margin: 0; padding: 6px 10px; border-bottom: 1px solid var(--line); background: var(--bg); display: flex; justify-content: space-between; gap: 8px; }
  section h2 .sum { color: var(--muted); font-weight: normal; }
  .chart { padding: 8px 10px; }
  .chart svg { display: block; overflow: visible; }
  .chart .empty { color: var(--muted); padding: 16px 0; }
  .figures { display: flex; gap: 24px; padding: 8px 10px 0; }
  .figure b { display: block; font-size: 20px; }
  .figure span { color: var(--muted); }
  .legend { display: flex; flex-wrap: wrap; gap: 10px; padding: 4px 10px 8px; color: var(--muted); font-size: 12px; }
  .legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; vertical-align: -1px; }
  table { border-collapse: collapse; width: 100%; font-size: 12px; }
  th, td { text-align: left; padding: 3px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
  th { color: var(--muted); font-weight: normal; }
  td.n { text-align: right; font-variant-numeric: tabular-nums; }
  svg text { font: 11px system-ui, -apple-system, "Segoe UI", Arial, sans-serif; fill: var(--muted); }
  svg text.v { fill: var(--fg); }
`;

const CLIENT = `
(function () {
  'use strict';
  var m = /[#&]token=([^&]+)/.exec(location.hash);
  var token = m ? decodeURIComponent(m[1]) : sessionStorage.getItem('tron-token');
  if (m) { sessionStorage.setItem('tron-token', token); history.replaceState(null, '', location.pathname + location.search); }
  var $ = function (id) { return document.getElementById(id); };
  var NS = 'http://www.w3.org/2000/svg';
  var PHASE_COLORS = { pending: '#8c959f', build: '#0969da', review: '#8250df', merge: '#bf8700', wrap: '#1a7f37', parked: '#cf222e' };
  var OTHER = ['#1b7c83', '#953800', '#6639ba', '#57606a'];
  function problem(text) { var p = $('problem'); p.textContent = text; p.style.display = text ? 'block' : 'none'; }
  if (!token) { problem('No token: open the URL tron serve printed (it ends in #token=…).'); return; }
  function api(path) {
    return fetch(path, { headers: { Authorization: 'Bearer ' + token } }).then(function (r) {
      if (r.status === 401) { problem('The token was refused: open the URL tron serve printed.'); throw new Error('401'); }
      return r.json().then(function (j) { if (!r.ok) throw new Error((j.error && j.error.message) || r.status); return j; });
    });
  }
  function node(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = text; if (cls) e.className = cls; return e; }
  function dur(ms) {
    if (ms === null || ms === undefined) return '–';
    var s = ms / 1000;
    if (s < 1) return Math.round(ms) + 'ms';
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + Math.floor(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h' + Math.floor((s % 3600) / 60) + 'm';
    return (s / 86400).toFixed(1) + 'd';
  }
  function money(x) { return '$' + (x || 0).toFixed(x >= 10 ? 2 : 4); }
  /** Drawn at the box's own width, so a label reads 11px in a narrow box and a wide one alike. */
  function widthOf(box) { return Math.max(280, box.clientWidth - 20); }
  function svgOf(W, H) { return node('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img' }); }
  function empty(box, text) { box.textContent = ''; box.appendChild(el('div', text, 'empty')); }

  /** Vertical bars, one per entry: each rect carries its key and value. */
  function columns(box, data, label) {
    box.textContent = '';
    var W = widthOf(box), H = 160, top = 14, bottom = 20, max = 0;
    data.forEach(function (d) { if (d.value > max) max = d.value; });
    var svg = svgOf(W, H + top + bottom);
    var step = W / data.length, every = Math.ceil(data.length / 10);
    svg.appendChild(node('line', { x1: 0, x2: W, y1: top + H, y2: top + H, stroke: '#d0d7de' }));
    data.forEach(function (d, i) {
      var h = max === 0 ? 0 : (d.value / max) * H;
      var r = node('rect', { class: 'bar', x: i * step + step * 0.15, width: step * 0.7, y: top + H - h, height: h, fill: '#1a7f37', 'data-key': d.key, 'data-value': d.value });
      r.appendChild(node('title', {}, d.key + ': ' + d.value + ' ' + label));
      svg.appendChild(r);
      if (d.value > 0) svg.appendChild(node('text', { class: 'v', x: i * step + step / 2, y: top + H - h - 3, 'text-anchor': 'middle' }, String(d.value)));
      if (i % every === 0 || i === data.length - 1) svg.appendChild(node('text', { x: i * step + step / 2, y: top + H + 14, 'text-anchor': 'middle' }, d.key.slice(5)));
    });
    box.appendChild(svg);
  }

  /** Horizontal bars, longest first as given, each labelled with its text. */
  function rows(box, data, text, color) {
    if (data.length === 0) return empty(box, 'none in this window');
    box.textContent = '';
    var W = widthOf(box), row = 22, labelW = 120, max = 0;
    data.forEach(function (d) { if (d.value > max) max = d.value; });
    var svg = svgOf(W, data.length * row);
    data.forEach(function (d, i) {
      var w = max === 0 ? 0 : (d.value / max) * (W - labelW - 110);
      svg.appendChild(node('text', { x: labelW - 6, y: i * row + 15, 'text-anchor': 'end' }, d.key));
      var r = node('rect', { class: 'bar', x: labelW, y: i * row + 4, width: w, height: row - 8, rx: 2, fill: color, 'data-key': d.key, 'data-value': d.value });
      r.appendChild(node('title', {}, d.key + ': ' + (d.title || text(d))));
      svg.appendChild(r);
      svg.appendChild(node('text', { class: 'v', x: labelW + w + 6, y: i * row + 15 }, text(d)));
    });
    box.appendChild(svg);
  }

  /** One bar split by phase, widths in proportion to the time spent in each. */
  function stacked(box, legend, phases) {
    legend.textContent = '';
    if (phases.length === 0) return empty(box, 'no block landed in this window');
    box.textContent = '';
    var W = widthOf(box), total = 0, x = 0;
    phases.forEach(function (p) { total += p.value; });
    var svg = svgOf(W, 28);
    phases.forEach(function (p, i) {
      var w = total === 0 ? 0 : (p.value / total) * W;
      var color = PHASE_COLORS[p.key] || OTHER[i % OTHER.length];
      var r = node('rect', { class: 'segment', x: x, y: 2, width: w, height: 24, fill: color, 'data-key': p.key, 'data-value': p.value });
      r.appendChild(node('title', {}, p.key + ': ' + dur(p.value)));
      svg.appendChild(r);
      x += w;
      var item = el('span', (p.key === 'pending' ? 'waiting for a slot' : p.key === 'merge' ? 'merge wait' : p.key === 'parked' ? 'waiting for the operator' : p.key) + ' ' + dur(p.value));
      var sw = el('i'); sw.style.background = color; item.prepend(sw);
      legend.appendChild(item);
    });
    box.appendChild(svg);
  }

  /** The first-try gate pass rate as a ring. */
  function ring(box, gate) {
    if (gate.rate === null) return empty(box, 'no truth gate in this window');
    box.textContent = '';
    var R = 46, C = 2 * Math.PI * R;
    var svg = svgOf(320, 120);
    svg.appendChild(node('circle', { cx: 60, cy: 60, r: R, fill: 'none', stroke: '#ffebe9', 'stroke-width': 16 }));
    svg.appendChild(node('circle', { id: 'gate-arc', cx: 60, cy: 60, r: R, fill: 'none', stroke: '#1a7f37', 'stroke-width': 16, 'stroke-dasharray': gate.rate * C + ' ' + C, transform: 'rotate(-90 60 60)', 'data-value': gate.rate }));
    svg.appendChild(node('text', { id: 'gate-rate', class: 'v', x: 60, y: 66, 'text-anchor': 'middle', style: 'font-size:20px;font-weight:600' }, Math.round(gate.rate * 100) + '%'));
    svg.appendChild(node('text', { x: 130, y: 52 }, gate.firstTry + ' of ' + gate.blocks + ' blocks passed'));
    svg.appendChild(node('text', { x: 130, y: 70 }, 'their first truth gate'));
    box.appendChild(svg);
  }

  var days = Number(new URLSearchParams(location.search).get('days')) || 30;
  var select = $('days');
  select.value = String(days);
  select.onchange = function () { days = Number(select.value); history.replaceState(null, '', location.pathname + '?days=' + days); load(); };

  function load() {
    window.tronCharts = undefined;
    api('/api/v1/charts?days=' + days).then(function (c) {
      $('window').textContent = c.from + ' – ' + c.to;
      $('landed-sum').textContent = c.cost.landed + ' landed';
      columns($('landed'), c.landedPerDay.map(function (d) { return { key: d.day, value: d.landed }; }), 'landed');
      $('median').textContent = dur(c.lead.median);
      $('p90').textContent = dur(c.lead.p90);
      $('lead-sum').textContent = c.lead.blocks + ' blocks';
      stacked($('lead'), $('lead-legend'), c.lead.phases);
      $('cost-sum').textContent = money(c.cost.usd) + ' spent' + (c.cost.unpricedTokens ? ', ' + c.cost.unpricedTokens + ' tokens unpriced' : '');
      var perBlock = function (d) { return money(d.value) + ' a block'; };
      var detail = function (list) { return list.map(function (d) { return { key: d.key, value: d.value, title: money(d.value) + ' per landed block: ' + money(d.usd) + ' and ' + d.tokens + ' tokens over ' + c.cost.landed + ' landed' }; }); };
      if (c.cost.landed === 0) { empty($('by-role'), 'no block landed in this window'); empty($('by-model'), 'no block landed in this window'); }
      else { rows($('by-role'), detail(c.cost.byRole), perBlock, '#0969da'); rows($('by-model'), detail(c.cost.byModel), perBlock, '#8250df'); }
      ring($('gate'), c.gate);
      var times = function (d) { return d.value + (d.value === 1 ? ' time' : ' times'); };
      rows($('failures'), c.failures, times, '#cf222e');
      rows($('escalations'), c.escalations, times, '#bf8700');
      problem('');
      window.tronCharts = c;
    }).catch(function (err) { if (err.message !== '401') problem('Could not read the charts: ' + err.message); });
    api('/api/v1/runs?limit=20').then(function (p) {
      var body = $('runs');
      body.textContent = '';
      p.runs.forEach(function (r) {
        var tr = el('tr');
        [r.run, r.started ? new Date(r.started).toISOString().replace('T', ' ').slice(0, 19) : '–', r.exit === null ? 'under way / killed' : 'exit ' + r.exit].forEach(function (t) { tr.appendChild(el('td', t)); });
        [r.landed, r.parked, r.abandoned, money(r.usd), dur(r.wall)].forEach(function (t) { tr.appendChild(el('td', String(t), 'n')); });
        body.appendChild(tr);
      });
    }).catch(function () {});
  }
  load();
  setInterval(load, 30000);
})();
`;

/** The whole page. Pure: the same text every time. */
export function renderRunsPage(): string {
  return `<!DOCTYPE html>
<!-- The tron runs page, served by \`tron serve\` (engine/serve/runs-page.ts). It reads only /api/v1/. -->
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tron · runs</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>tron</h1>
<nav><a href="/">Board</a> | <a href="/runs" aria-current="page">Runs</a></nav>
<span class="item" id="window">…</span>
<label>last <select id="days"><option value="7">7 days</option><option value="30">30 days</option><option value="90">90 days</option><option value="366">year</option></select></label>
</header>
<div id="problem"></div>
<main>
<section class="wide"><h2>Landed blocks per day <span class="sum" id="landed-sum"></span></h2><div class="chart" id="landed"></div></section>
<section><h2>Lead time, ready to landed <span class="sum" id="lead-sum"></span></h2>
<div class="figures"><div class="figure"><b id="median">–</b><span>median</span></div><div class="figure"><b id="p90">–</b><span>p90</span></div></div>
<div class="chart" id="lead"></div><div class="legend" id="lead-legend"></div></section>
<section><h2>First-try gate pass rate</h2><div class="chart" id="gate"></div></section>
<section><h2>Cost per landed block, by role <span class="sum" id="cost-sum"></span></h2><div class="chart" id="by-role"></div></section>
<section><h2>Cost per landed block, by model</h2><div class="chart" id="by-model"></div></section>
<section><h2>Most frequent failing facts</h2><div class="chart" id="failures"></div></section>
<section><h2>Escalations</h2><div class="chart" id="escalations"></div></section>
<section class="wide"><h2>Latest runs</h2><table><thead><tr><th>run</th><th>started (UTC)</th><th>ended</th><th>landed</th><th>parked</th><th>abandoned</th><th>spend</th><th>wall</th></tr></thead><tbody id="runs"></tbody></table></section>
</main>
<script>${CLIENT}</script>
</body>
</html>
`;
}
