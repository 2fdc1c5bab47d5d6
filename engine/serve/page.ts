/**
 * The dashboard `tron serve` serves at `/`: one page, no CDN, no build step — its script
 * is inline and the only other file it loads is the bpmn-js viewer the server vendors
 * from node_modules (as workflow/ does). It is a client of the API and nothing else: the
 * token comes from the URL's fragment (kept in sessionStorage, never a cookie, and taken
 * off the address bar), every request carries it as a bearer header, and the live stream
 * is `/api/v1/events` read with fetch (EventSource cannot send a header), resumed after a
 * dropped connection from the last seq it saw.
 *
 * What it shows: blocks in columns by phase; a block's turns, timeline, cost and its
 * worker's live output; parked blocks with an answer form; the run's spend against its
 * budget; the workflow diagram with the run's counts per flow.
 */

const STYLE = `
  :root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --bg: #f6f8fa; --accent: #0969da; --ok: #1a7f37; --warn: #9a6700; --bad: #cf222e; }
  * { box-sizing: border-box; }
  html, body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Arial, sans-serif; color: var(--fg); background: #fff; }
  header { display: flex; gap: 16px; align-items: baseline; padding: 10px 16px; border-bottom: 1px solid var(--line); background: var(--bg); flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0; }
  header .item { color: var(--muted); }
  header nav a { color: var(--accent); text-decoration: none; }
  header nav a[aria-current] { color: var(--fg); font-weight: 600; }
  header .item b { color: var(--fg); }
  #conn { margin-left: auto; }
  #conn.live::before { content: "●"; color: var(--ok); margin-right: 4px; }
  #conn.down::before { content: "●"; color: var(--bad); margin-right: 4px; }
  #problem { display: none; padding: 10px 16px; background: #ffebe9; color: var(--bad); border-bottom: 1px solid var(--line); }
  #board { display: grid; grid-auto-flow: column; grid-auto-columns: minmax(150px, 1fr); gap: 8px; padding: 12px 16px; overflow-x: auto; }
  .column { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; min-height: 120px; display: flex; flex-direction: column; }
  .column h2 { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; margin: 0; padding: 6px 8px; border-bottom: 1px solid var(--line); display: flex; justify-content: space-between; }
  .column h2 .n { color: var(--muted); }
  .cards { padding: 6px; display: flex; flex-direction: column; gap: 6px; }
  .card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; cursor: pointer; overflow-wrap: anywhere; }
  .card.selected { outline: 2px solid var(--accent); }
  .card .id { font-weight: 600; }
  .card .title { color: var(--muted); }
  .card .meta { color: var(--muted); font-size: 12px; display: flex; gap: 8px; flex-wrap: wrap; }
  .card.parked { border-color: var(--warn); }
  .card.landed .id::after { content: " ✓"; color: var(--ok); }
  .card .why { font-size: 12px; margin-top: 4px; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 16em; overflow-y: auto; }
  .card form { margin-top: 6px; display: flex; flex-direction: column; gap: 4px; }
  .card form textarea { font: inherit; min-height: 36px; resize: vertical; width: 100%; }
  .card form .row select { flex: 1; min-width: 0; }
  .card form .row { display: flex; gap: 4px; }
  .card form select, .card form button { font: inherit; }
  .card form .said { font-size: 12px; color: var(--muted); }
  main { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 12px; padding: 0 16px 16px; }
  section { border: 1px solid var(--line); border-radius: 6px; min-height: 200px; display: flex; flex-direction: column; }
  section h2 { font-size: 13px; margin: 0; padding: 6px 10px; border-bottom: 1px solid var(--line); background: var(--bg); }
  #canvas { height: 340px; position: relative; }
  #detail { padding: 8px 10px; overflow: auto; max-height: 520px; }
  #detail .hint { color: var(--muted); }
  #detail table { border-collapse: collapse; width: 100%; font-size: 12px; }
  #detail td { padding: 1px 6px 1px 0; vertical-align: top; }
  #detail td.t { color: var(--muted); white-space: nowrap; }
  #detail td.ty { white-space: nowrap; font-family: ui-monospace, monospace; }
  #detail h3 { font-size: 12px; margin: 10px 0 4px; }
  #output { background: #0d1117; color: #e6edf3; font: 12px/1.35 ui-monospace, monospace; padding: 6px 8px; max-height: 220px; overflow: auto; white-space: pre-wrap; margin: 0; border-radius: 4px; }
  .tron-count { display: inline-block; min-width: 14px; padding: 1px 6px; border-radius: 10px; background: #188038; color: #fff; font: bold 12px/15px Arial, sans-serif; text-align: center; box-shadow: 0 0 0 2px #fff; }
  .tron-taken .djs-visual > path { stroke: #188038 !important; stroke-width: 3px !important; }
`;

const CLIENT = `
(function () {
  'use strict';
  var m = /[#&]token=([^&]+)/.exec(location.hash);
  var token = m ? decodeURIComponent(m[1]) : sessionStorage.getItem('tron-token');
  if (m) { sessionStorage.setItem('tron-token', token); history.replaceState(null, '', location.pathname); }
  var $ = function (id) { return document.getElementById(id); };
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = text; if (cls) e.className = cls; return e; }
  function problem(text) { var p = $('problem'); p.textContent = text; p.style.display = text ? 'block' : 'none'; }
  if (!token) { problem('No token: open the URL tron serve printed (it ends in #token=…).'); return; }
  function api(path, opts) {
    opts = opts || {};
    var headers = { Authorization: 'Bearer ' + token };
    if (opts.body) headers['content-type'] = 'application/json';
    return fetch(path, { method: opts.method || 'GET', headers: headers, body: opts.body, signal: opts.signal }).then(function (r) {
      if (r.status === 401) { problem('The token was refused: open the URL tron serve printed.'); throw new Error('401'); }
      if (opts.raw) return r;
      return r.json().then(function (j) { if (!r.ok) throw new Error((j.error && j.error.message) || r.status); return j; });
    });
  }
  function money(x) { return '$' + (x || 0).toFixed(x >= 10 ? 2 : 4); }
  function age(ms) { var s = Math.floor(ms / 1000); return s < 60 ? s + 's' : s < 3600 ? Math.floor(s / 60) + 'm' + (s % 60) + 's' : Math.floor(s / 3600) + 'h' + Math.floor((s % 3600) / 60) + 'm'; }
  function clock(ts) { var d = new Date(ts); return d.toTimeString().slice(0, 8); }

  var state = null, selected = null, lastSeq = 0, forms = {};
  window.tron = { seqs: [], gaps: 0, resyncs: 0, state: function () { return state; } };

  // ---- the board ----
  function answerForm(b) {
    var f = forms[b.block];
    if (f) return f;
    f = el('form');
    f.setAttribute('data-answer', b.block);
    var row = el('div', null, 'row');
    var word = el('select');
    [['RETRY', 'guidance'], ['ABANDON', 'reason']].forEach(function (w) { var o = el('option', w[0]); o.value = w[0]; word.appendChild(o); });
    var text = el('textarea');
    text.placeholder = 'guidance for the builder';
    word.onchange = function () { text.placeholder = word.value === 'RETRY' ? 'guidance for the builder' : 'why it is given up'; };
    var go = el('button', 'Answer');
    go.type = 'submit';
    var said = el('div', '', 'said');
    row.appendChild(word); row.appendChild(go);
    f.appendChild(text); f.appendChild(row); f.appendChild(said);
    f.onclick = function (e) { e.stopPropagation(); };
    f.onsubmit = function (e) {
      e.preventDefault();
      var payload = {}; payload[word.value === 'RETRY' ? 'guidance' : 'reason'] = text.value || (word.value === 'RETRY' ? 'try again' : 'given up');
      go.disabled = true;
      api('/api/v1/blocks/' + encodeURIComponent(b.block) + '/answer', { method: 'POST', body: JSON.stringify({ reply: '>>' + word.value + ' ' + JSON.stringify(payload) }) })
        .then(function (r) { said.textContent = 'sent (' + r.file + '); ' + (r.engine === 'running' ? 'the engine reads it now' : 'no engine is running: the next \`tron start\` reads it'); })
        .catch(function (err) { said.textContent = 'refused: ' + err.message; go.disabled = false; });
    };
    forms[b.block] = f;
    return f;
  }
  function card(b) {
    var c = el('div', null, 'card ' + b.phase + (b.block === selected ? ' selected' : ''));
    c.setAttribute('data-block', b.block);
    c.appendChild(el('div', b.block, 'id'));
    c.appendChild(el('div', b.title, 'title'));
    var meta = el('div', null, 'meta');
    meta.appendChild(el('span', 'attempt ' + b.attempt));
    if (b.waiting !== 'nothing') meta.appendChild(el('span', 'waits: ' + b.waiting));
    meta.appendChild(el('span', age(b.age)));
    if (b.cost.usd > 0 || b.cost.tokens > 0) meta.appendChild(el('span', money(b.cost.usd)));
    c.appendChild(meta);
    if (b.reason) c.appendChild(el('div', b.reason, 'why'));
    if (b.phase === 'parked') {
      if (b.answer) c.appendChild(el('div', 'answered: ' + b.answer.line, 'why'));
      else c.appendChild(answerForm(b));
    } else delete forms[b.block];
    c.onclick = function () { select(b.block); };
    return c;
  }
  function renderBoard() {
    var board = $('board');
    board.textContent = '';
    $('run').textContent = state.run || '(none yet)';
    $('engine').textContent = state.engine || '-';
    var budget = state.budgets.runUsd;
    $('spend').textContent = money(state.spend.usd) + (budget ? ' of ' + money(budget) : '') + ' · ' + state.spend.tokens + ' tokens';
    state.phases.forEach(function (phase) {
      var col = el('div', null, 'column');
      col.setAttribute('data-phase', phase);
      var blocks = state.blocks.filter(function (b) { return b.phase === phase; });
      var h = el('h2', phase); h.appendChild(el('span', String(blocks.length), 'n'));
      col.appendChild(h);
      var cards = el('div', null, 'cards');
      blocks.forEach(function (b) { cards.appendChild(card(b)); });
      col.appendChild(cards);
      board.appendChild(col);
    });
    document.body.setAttribute('data-seq', String(state.seq));
  }
  var loading = false, again = false;
  function refresh() {
    if (loading) { again = true; return; }
    loading = true;
    api('/api/v1/state').then(function (s) { state = s; renderBoard(); problem(''); })
      .catch(function (err) { if (err.message !== '401') problem('Could not read the state: ' + err.message); })
      .then(function () { loading = false; if (again) { again = false; setTimeout(refresh, 50); } });
  }

  // ---- one block ----
  var outputCtl = null, shownTurn = '', shownOut = null;
  function select(id) {
    selected = id;
    shownTurn = '';
    shownOut = null;
    if (state) renderBoard();
    loadDetail();
  }
  function loadDetail() {
    if (!selected) return;
    var id = selected;
    api('/api/v1/blocks/' + encodeURIComponent(id)).then(function (d) {
      if (selected !== id) return;
      var box = $('detail');
      box.textContent = '';
      var b = d.block;
      box.appendChild(el('h3', b.block + ' — ' + b.title));
      box.appendChild(el('div', b.phase + ', attempt ' + b.attempt + ', waits on ' + b.waiting + ' · ' + money(b.cost.usd) + ' · ' + b.cost.tokens + ' tokens'));
      var last = d.turns[d.turns.length - 1];
      // A block carried over from an earlier run shows its turns there, and says which run.
      var then = last && last.run !== d.run ? ', run ' + last.run : '';
      box.appendChild(el('h3', last ? 'Output of ' + last.role + ' ' + last.kind + ' turn ' + last.turn + then + (last.ended ? '' : ' (live)') : 'No turn yet'));
      // The turn's output is one element, kept while the same turn is shown: a redraw of the
      // detail (any event does one) moves it into the new box, still being written to.
      var key = last ? last.run + '/' + last.session + '#' + last.turn : '';
      if (!shownOut || key !== shownTurn) { shownOut = el('pre'); shownOut.id = 'output'; }
      box.appendChild(shownOut);
      if (last && key !== shownTurn) { shownTurn = key; follow(id, last, shownOut); }
      box.appendChild(el('h3', 'Timeline'));
      var table = el('table');
      d.timeline.slice(-200).forEach(function (e) {
        var tr = el('tr');
        tr.appendChild(el('td', clock(e.ts), 't'));
        tr.appendChild(el('td', e.type, 'ty'));
        tr.appendChild(el('td', summary(e)));
        table.appendChild(tr);
      });
      box.appendChild(table);
    }).catch(function () {});
  }
  function summary(e) {
    switch (e.type) {
      case 'block.phase': return e.from + ' → ' + e.to + ' (' + e.on + ')';
      case 'block.dispatched': return e.role + ' ' + e.kind + ' turn ' + e.turn;
      case 'reply.accepted': return e.word;
      case 'facts.observed': return e.commits + ' commit(s) at ' + e.head.slice(0, 10) + (e.tests ? ', tests exit ' + e.tests.exit : '');
      case 'gate.failed': case 'gate.passed': return (e.sha || '').slice(0, 10) + ' ' + (e.facts || []).map(function (f) { return (f.ok ? '✓ ' : '✗ ') + f.name; }).join(' ');
      case 'usage.recorded': return e.model + ': ' + (e.input_tokens + e.cached_tokens + e.output_tokens) + ' tokens' + (e.cost_usd !== undefined ? ', ' + money(e.cost_usd) : '');
      case 'block.parked': case 'block.abandoned': return e.reason;
      case 'operator.answered': return e.word + (e.by ? ' by ' + e.by : '');
      case 'escalation.raised': return e.trouble + ' → ' + e.handler;
      default: return '';
    }
  }
  function follow(id, turn, out) {
    if (outputCtl) outputCtl.abort();
    var ctl = outputCtl = new AbortController();
    out.textContent = '';
    api('/api/v1/blocks/' + encodeURIComponent(id) + '/logs?run=' + encodeURIComponent(turn.run) + '&session=' + encodeURIComponent(turn.session) + '&turn=' + turn.turn, { raw: true, signal: ctl.signal }).then(function (r) {
      var reader = r.body.getReader(), dec = new TextDecoder();
      function more() { return reader.read().then(function (x) { if (x.done) return; out.textContent += dec.decode(x.value, { stream: true }); out.scrollTop = out.scrollHeight; return more(); }); }
      return more();
    }).catch(function () {});
  }

  // ---- the diagram ----
  var viewer = null, flowsDue = 0, flowsTimer = null;
  function loadDiagram() {
    if (typeof BpmnJS === 'undefined') return;
    api('/api/v1/workflow').then(function (w) {
      viewer = new BpmnJS({ container: '#canvas' });
      return viewer.importXML(w.xml).then(function () { viewer.get('canvas').zoom('fit-viewport', 'auto'); flows(); });
    }).catch(function (err) { $('canvas').textContent = 'The diagram could not be shown: ' + err.message; });
  }
  function flows() {
    if (!viewer) return;
    api('/api/v1/flows').then(function (run) {
      var overlays = viewer.get('overlays'), registry = viewer.get('elementRegistry'), canvas = viewer.get('canvas');
      overlays.remove({ type: 'tron-count' });
      Object.keys(run.edges).forEach(function (id) {
        var c = registry.get(id);
        if (!c || /_gate$/.test(id)) return;
        canvas.addMarker(id, 'tron-taken');
        var best = null;
        for (var i = 1; i < c.waypoints.length; i++) {
          var a = c.waypoints[i - 1], z = c.waypoints[i], len = Math.abs(z.x - a.x) + Math.abs(z.y - a.y);
          if (!best || len > best.len) best = { len: len, x: (a.x + z.x) / 2, y: (a.y + z.y) / 2 };
        }
        var b = el('span', String(run.edges[id].blocks.length), 'tron-count');
        b.title = run.edges[id].blocks.join(', ');
        b.setAttribute('data-edge-id', id);
        overlays.add(id, 'tron-count', { position: { left: best.x - c.x - 10, top: best.y - c.y - 9 }, html: b });
      });
    }).catch(function () {});
  }
  function flowsSoon() {
    var now = Date.now();
    if (flowsTimer) return;
    flowsTimer = setTimeout(function () { flowsTimer = null; flowsDue = Date.now(); flows(); }, Math.max(0, 1000 - (now - flowsDue)));
  }

  // ---- the live stream ----
  var soon = null;
  function changed(e) {
    if (!soon) soon = setTimeout(function () { soon = null; refresh(); if (selected) loadDetail(); }, 100);
    if (e && /^(block\\.phase|escalation\\.raised|block\\.parked|block\\.abandoned|reply\\.accepted)$/.test(e.type)) flowsSoon();
  }
  function message(text) {
    var id = null, event = 'message', data = [];
    text.split('\\n').forEach(function (line) {
      if (line.indexOf('id: ') === 0) id = line.slice(4);
      else if (line.indexOf('event: ') === 0) event = line.slice(7);
      else if (line.indexOf('data: ') === 0) data.push(line.slice(6));
    });
    if (data.length === 0) return;
    if (event === 'run') { lastSeq = 0; window.tron.seqs = []; forms = {}; refresh(); flowsSoon(); return 'restart'; }
    if (event === 'gap') { window.tron.resyncs++; changed(); return; }
    var e = JSON.parse(data.join('\\n'));
    if (lastSeq && e.seq !== lastSeq + 1) window.tron.gaps++;
    lastSeq = Number(id || e.seq);
    window.tron.seqs.push(e.seq);
    changed(e);
  }
  function stream() {
    var conn = $('conn');
    var headers = { Authorization: 'Bearer ' + token };
    if (lastSeq) headers['Last-Event-ID'] = String(lastSeq);
    fetch('/api/v1/events', { headers: headers }).then(function (r) {
      if (!r.ok) throw new Error(String(r.status));
      conn.className = 'live'; conn.textContent = 'live';
      var reader = r.body.getReader(), dec = new TextDecoder(), buf = '';
      function more() {
        return reader.read().then(function (x) {
          if (x.done) throw new Error('the stream ended');
          buf += dec.decode(x.value, { stream: true });
          var i;
          while ((i = buf.indexOf('\\n\\n')) >= 0) {
            var text = buf.slice(0, i); buf = buf.slice(i + 2);
            if (message(text) === 'restart') { reader.cancel(); throw new Error('a new run'); }
          }
          return more();
        });
      }
      return more();
    }).catch(function () {
      conn.className = 'down'; conn.textContent = 'reconnecting';
      setTimeout(stream, 1000);
    });
  }
  refresh();
  loadDiagram();
  stream();
  setInterval(function () { if (state) refresh(); }, 5000);
})();
`;

/** The whole page. Pure: the same text every time. */
export function renderDashboard(): string {
  return `<!DOCTYPE html>
<!-- The tron dashboard, served by \`tron serve\` (engine/serve/page.ts). It reads only /api/v1/. -->
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tron</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/diagram-js.css">
<link rel="stylesheet" href="/assets/bpmn-js.css">
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>tron</h1>
<nav><a href="/" aria-current="page">Board</a> | <a href="/runs">Runs</a></nav>
<span class="item">run <b id="run">…</b></span>
<span class="item">engine <b id="engine">…</b></span>
<span class="item">spend <b id="spend">…</b></span>
<span id="conn" class="down">connecting</span>
</header>
<div id="problem"></div>
<div id="board"></div>
<main>
<section><h2>Block</h2><div id="detail"><p class="hint">Click a block for its turns, timeline, cost and its worker's live output.</p></div></section>
<section><h2>Workflow</h2><div id="canvas"></div></section>
</main>
<script src="/assets/bpmn-viewer.js"></script>
<script>${CLIENT}</script>
</body>
</html>
`;
}
