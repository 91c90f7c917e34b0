// The web page at `GET /` (docs/serving.md "The page"): paste text or features, see the labels with their
// probabilities and the input features that explain them (POST /explain), and watch the live metrics
// (GET /metrics, parsed here). One self-contained HTML document, no build step and nothing fetched from
// elsewhere; it asks for the token when the server wants one (kept in the tab's sessionStorage).

export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sublinear serve</title>
<style>
  :root { --fg: #1d2329; --muted: #66717d; --line: #dde3e8; --accent: #2563eb; --pos: #15803d; --neg: #b91c1c; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: #f6f8fa; }
  header { padding: 12px 20px; background: #fff; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 17px; margin: 0; }
  header .model { color: var(--muted); }
  main { display: grid; grid-template-columns: minmax(0, 2fr) minmax(260px, 1fr); gap: 16px; padding: 16px 20px; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; }
  h2 { font-size: 14px; margin: 0 0 10px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
  textarea { width: 100%; min-height: 110px; font: 13px ui-monospace, Menlo, Consolas, monospace; padding: 8px; border: 1px solid var(--line); border-radius: 6px; }
  .controls { display: flex; gap: 14px; align-items: center; margin: 10px 0; flex-wrap: wrap; }
  .controls label { color: var(--muted); }
  input[type=number] { width: 70px; padding: 3px 5px; }
  button { background: var(--accent); color: #fff; border: 0; border-radius: 6px; padding: 7px 16px; font-weight: 600; cursor: pointer; }
  button:disabled { opacity: .6; cursor: default; }
  table { width: 100%; border-collapse: collapse; }
  th, td { text-align: left; padding: 6px 6px; border-top: 1px solid var(--line); vertical-align: top; }
  th { color: var(--muted); font-weight: 600; border-top: 0; }
  .bar { position: relative; height: 16px; min-width: 120px; background: #eef2f6; border-radius: 3px; }
  .bar span { position: absolute; inset: 0 auto 0 0; background: var(--accent); border-radius: 3px; }
  .bar em { position: relative; padding-left: 6px; font-style: normal; font-size: 12px; }
  .chip { display: inline-block; margin: 1px 3px 2px 0; padding: 0 6px; border-radius: 10px; font-size: 12px; background: #eef2f6; }
  .chip.pos { background: #dcfce7; color: var(--pos); }
  .chip.neg { background: #fee2e2; color: var(--neg); }
  .metrics div { display: flex; justify-content: space-between; padding: 4px 0; border-top: 1px solid var(--line); }
  .metrics div:first-child { border-top: 0; }
  .metrics b { font-variant-numeric: tabular-nums; }
  .error { color: var(--neg); margin: 8px 0; white-space: pre-wrap; }
  .muted { color: var(--muted); }
  #token-box { display: none; gap: 8px; align-items: center; }
  @media (max-width: 800px) { main { grid-template-columns: 1fr; } }
</style>
</head>
<body>
<header>
  <h1>sublinear serve</h1>
  <span class="model" id="model">loading the model…</span>
  <span id="token-box"><label for="token">token</label><input id="token" type="password" size="24"><button id="token-save" type="button">use</button></span>
</header>
<main>
  <div>
    <section>
      <h2 id="input-title">Input</h2>
      <textarea id="input" spellcheck="false"></textarea>
      <div class="controls">
        <label>labels <input id="k" type="number" min="1" max="100" value="5"></label>
        <label><input id="use-threshold" type="checkbox"> probability at least <input id="threshold" type="number" min="0.01" max="1" step="0.01" value="0.5"></label>
        <label>features per label <input id="top" type="number" min="1" max="100" value="5"></label>
        <button id="predict" type="button">Predict and explain</button>
      </div>
      <div class="error" id="error"></div>
    </section>
    <section style="margin-top:16px">
      <h2>Labels</h2>
      <table id="results"><thead><tr><th>label</th><th>probability</th><th>score</th><th>why (input features by contribution)</th></tr></thead><tbody></tbody></table>
      <p class="muted" id="note"></p>
    </section>
  </div>
  <section>
    <h2>Live metrics</h2>
    <div class="metrics" id="metrics"><div><span>waiting for /metrics</span></div></div>
  </section>
</main>
<script>
(() => {
  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem('sublinear-token') || '';
  let info = null;
  const headers = () => (token ? { authorization: 'Bearer ' + token } : {});
  async function call(path, init) {
    const res = await fetch(path, { ...init, headers: { ...(init && init.headers), ...headers() } });
    if (res.status === 401) {
      $('token-box').style.display = 'flex';
      throw new Error('this server needs a token: enter it above');
    }
    return res;
  }
  $('token-save').onclick = () => {
    token = $('token').value.trim();
    sessionStorage.setItem('sublinear-token', token);
    $('token-box').style.display = 'none';
    loadModel();
  };
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
  async function loadModel() {
    try {
      info = await (await call('/model')).json();
      const parts = [info.labels + ' labels', info.inputDim + ' features', info.text ? 'text model' : 'numeric features'];
      if (info.calibration) parts.push('calibrated probabilities (threshold ' + info.calibration.threshold.toFixed(2) + ')');
      if (info.learn) parts.push('learning on');
      $('model').textContent = (info.name || 'model') + ': ' + parts.join(', ');
      $('input-title').textContent = info.text ? 'Text' : 'Features ({"feature id": value, ...})';
      if (!$('input').value) $('input').value = info.text ? '' : '{"0": 1}';
      if (info.calibration) $('threshold').value = info.calibration.threshold.toFixed(2);
      else { $('use-threshold').disabled = true; $('threshold').disabled = true; }
    } catch (e) {
      $('model').textContent = String(e.message || e);
    }
  }
  $('predict').onclick = async () => {
    $('error').textContent = '';
    const body = { k: Number($('k').value), top: Number($('top').value) };
    if (info && info.text) body.text = $('input').value;
    else {
      try { body.features = JSON.parse($('input').value || '{}'); } catch (e) { $('error').textContent = 'the features are not JSON: ' + e.message; return; }
    }
    if ($('use-threshold').checked) body.threshold = Number($('threshold').value);
    $('predict').disabled = true;
    try {
      const res = await call('/explain', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const r = await res.json();
      if (!res.ok) throw new Error(r.error || res.statusText);
      render(r);
    } catch (e) {
      $('error').textContent = String(e.message || e);
    } finally {
      $('predict').disabled = false;
    }
  };
  function render(r) {
    const rows = r.labels.map((l, i) => {
      const name = r.names ? r.names[i] : l;
      const p = r.probabilities ? r.probabilities[i] : null;
      const ex = r.explanations[i];
      const chips = ex.features.map((f) => '<span class="chip ' + (f.contribution >= 0 ? 'pos' : 'neg') + '" title="contribution ' + f.contribution.toFixed(4) + '">' +
        esc(f.token != null ? f.token : '#' + f.feature) + ' ' + (f.contribution >= 0 ? '+' : '') + f.contribution.toFixed(2) + '</span>').join('');
      const bar = p == null ? '<span class="muted">n/a</span>' : '<div class="bar"><span style="width:' + (100 * p).toFixed(1) + '%"></span><em>' + (100 * p).toFixed(1) + '%</em></div>';
      return '<tr class="label-row"><td>' + esc(name) + '</td><td>' + bar + '</td><td>' + r.scores[i].toFixed(4) + '</td><td>' + chips + '</td></tr>';
    });
    $('results').querySelector('tbody').innerHTML = rows.join('') || '<tr><td colspan="4" class="muted">no label reaches the threshold</td></tr>';
    $('note').textContent = 'Contributions split each label\\'s score (its logit) over the input: ' + (r.decomposition || '');
  }
  // Metrics: the Prometheus text format, read line by line.
  let last = null;
  function parse(text) {
    const m = new Map();
    for (const line of text.split('\\n')) {
      if (!line || line[0] === '#') continue;
      const sp = line.lastIndexOf(' ');
      m.set(line.slice(0, sp), Number(line.slice(sp + 1)));
    }
    return m;
  }
  const sum = (m, prefix) => { let t = 0; for (const [k, v] of m) if (k.startsWith(prefix)) t += v; return t; };
  function quantile(m, q) {
    const buckets = new Map();
    for (const [k, v] of m) {
      const mm = /^sublinear_http_request_duration_seconds_bucket\\{.*le="([^"]+)"\\}$/.exec(k);
      if (mm) buckets.set(mm[1], (buckets.get(mm[1]) || 0) + v);
    }
    const les = [...buckets.keys()].sort((a, b) => (a === '+Inf' ? 1 : b === '+Inf' ? -1 : Number(a) - Number(b)));
    const total = buckets.get('+Inf') || 0;
    if (!total) return null;
    for (const le of les) if (buckets.get(le) >= q * total) return le === '+Inf' ? Infinity : Number(le);
    return null;
  }
  async function poll() {
    try {
      const text = await (await call('/metrics')).text();
      const m = parse(text);
      const now = performance.now();
      const requests = sum(m, 'sublinear_http_requests_total');
      const rate = last ? ((requests - last.requests) * 1000) / (now - last.t) : 0;
      last = { requests, t: now };
      const ms = (s) => (s == null ? '-' : s === Infinity ? '> 10 s' : '≤ ' + (s * 1000).toFixed(s < 0.01 ? 1 : 0) + ' ms');
      const rows = [
        ['ready', m.get('sublinear_ready') ? 'yes' : 'no'],
        ['requests', requests.toFixed(0)],
        ['requests/s', rate.toFixed(1)],
        ['latency p50', ms(quantile(m, 0.5))],
        ['latency p99', ms(quantile(m, 0.99))],
        ['points predicted', (m.get('sublinear_predicted_points_total') || 0).toFixed(0)],
        ['queued points', (m.get('sublinear_queue_points') || 0).toFixed(0)],
        ['batches in flight', (m.get('sublinear_batches_in_flight') || 0).toFixed(0)],
        ['examples learned', (m.get('sublinear_learned_examples_total') || 0).toFixed(0)],
        ['labels', (m.get('sublinear_model_labels') || 0).toFixed(0)],
        ['errors (4xx, 5xx)', [...m].filter(([k]) => /sublinear_http_requests_total\\{.*code="[45]/.test(k)).reduce((t, [, v]) => t + v, 0).toFixed(0)],
      ];
      $('metrics').innerHTML = rows.map(([k, v]) => '<div class="metric"><span>' + k + '</span><b data-metric="' + k + '">' + v + '</b></div>').join('');
    } catch (e) {
      $('metrics').innerHTML = '<div><span class="error">' + esc(e.message || e) + '</span></div>';
    }
  }
  loadModel();
  poll();
  setInterval(poll, 2000);
})();
</script>
</body>
</html>
`;
