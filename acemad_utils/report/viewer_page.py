"""One static, self-contained HTML page per run: every record's view embedded as JSON, drawn by inline JS.

    from acemad_utils.report.viewer_page import write_run_page
    write_run_page("default/main")      # -> outputs/viewer/default/main.html

No server, no JavaScript library, no font, no network. `_JS` mirrors `viewer_html.debate_html` (same
markup, same classes) on the compact view of `viewer_model.view`; the list on the left filters by method,
benchmark, outcome and question id.
"""

from __future__ import annotations

import json
from pathlib import Path

from acemad_utils.agents.sim import SYNTHETIC_LABEL
from acemad_utils.data.paths import atomic_write, outputs
from acemad_utils.data.transcripts import load_run
from acemad_utils.report.viewer_html import CSS, LEGEND, esc
from acemad_utils.report.viewer_model import is_correct, view

_JS = r"""
(function(){
const D = JSON.parse(document.getElementById('acemad-data').textContent);
const esc = s => String(s == null ? '' : s).replace(/[&<>"']/g,
  c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#x27;'}[c]));
const mark = (l, a) => l == null ? '<span class="ad-bad">none</span>' :
  '<span class="' + (l === a ? 'ad-ok' : 'ad-bad') + '">' + esc(l) + (l === a ? ' ✓' : ' ✗') + '</span>';
function bars(d, labels, a, title){
  const bw = 11, gap = 3, h = 28;
  let s = '<svg width="' + labels.length * (bw + gap) + '" height="' + (h + 11) + '" role="img" aria-label="' +
    esc(title) + '">';
  labels.forEach((lab, k) => {
    const bh = Math.max(1, d[k] * h), x = k * (bw + gap);
    s += '<rect x="' + x + '" y="' + (h - bh).toFixed(1) + '" width="' + bw + '" height="' + bh.toFixed(1) +
      '" fill="' + (lab === a ? '#2da44e' : '#8c959f') + '"><title>' + esc(title) + ' ' + esc(lab) + ': ' +
      d[k].toFixed(2) + '</title></rect>' +
      '<text x="' + (x + bw / 2) + '" y="' + (h + 10) + '" font-size="9" text-anchor="middle"' +
      (lab === a ? ' font-weight="bold"' : '') + '>' + esc(lab) + '</text>';
  });
  return s + '</svg>';
}
function cell(c, v, cls, t){
  let b = '<figure>' + bars(c.p, v.labels, v.answer, 'p') + '<figcaption>p: belief</figcaption></figure>';
  if (c.q) b += '<figure>' + bars(c.q, v.labels, v.answer, 'q') + '<figcaption>q: peers</figcaption></figure>';
  const sw = c.score == null ? '' :
    '<div class="ad-sw">score ' + c.score.toFixed(3) + ' · weight ' + c.weight.toFixed(3) +
    '<span class="ad-w" style="width:' + Math.max(1, Math.round(c.weight * 60)) + 'px"></span></div>';
  const text = c.msg.length <= 60 ? '<div class="ad-short">' + (esc(c.msg) || '(no argument)') + '</div>' :
    '<details><summary>' + esc(c.msg.slice(0, 57)) + '…</summary><div class="ad-msg">' + esc(c.msg) +
    '</div></details>';
  return '<td class="' + cls + (c.pf ? ' ad-pf' : '') + '" data-round="' + t + '" data-agent="' + esc(c.agent) + '">' +
    '<div class="ad-who">' + esc(c.who) + '</div>' +
    (c.pf ? '<span class="ad-badge">parse failure</span>'
          : '<span class="ad-stance">' + mark(c.stance, v.answer) + '</span>') +
    '<div class="ad-bars">' + b + '</div>' + sw +
    text + '</td>';
}
function debate(v){
  const n = v.rounds.length ? v.rounds[0].cells.length : 0;
  const c = v.correct;
  const outcome = (typeof c === 'number') ? 'runs correct: <b>' + Math.round(c * 100) + '%</b>'
                                            : 'final answer ' + mark(v.final, v.answer);
  let s = '<div class="acemad-debate" data-agents="' + n + '" data-rounds="' + v.rounds.length +
    '" data-method="' + esc(v.method) + '" data-question="' + esc(v.qid) + '">' +
    '<div class="ad-head"><span class="ad-src' + (v.source === D.synthetic_label ? ' ad-syn' : '') + '">' +
    esc(v.source) + '</span> <b>' + esc(v.method) + '</b> · ' + esc(v.qid) + ' (' + esc(v.benchmark) +
    ', repeat ' + esc(v.repeat) +
    ') · correct answer <span class="ad-ok acemad-answer">' + esc(v.answer) + '</span> · ' + outcome + '</div>';
  if (v.status !== 'ok')
    return s + '<div class="ad-err">status ' + esc(v.status) + ': ' + esc(v.error) + '</div></div>';
  const run = v.unit === 'run', mod = v.rounds.some(r => r.moderator);
  let head = '';
  for (let i = 0; i < n; i++) head += '<th>' + v.unit + ' ' + (i + 1) + '</th>';
  if (mod) head += '<th>moderator</th>';
  head += '<th>plurality</th>' + (run ? '' : '<th>' + esc(v.weighted_name) + '</th>');
  s += '<table><tr><th></th>' + head + '</tr>';
  v.rounds.forEach(r => {
    let cells = r.cells.map(c => cell(c, v, 'acemad-cell', r.t)).join('');
    if (mod) cells += r.moderator ? cell(r.moderator, v, 'ad-mod', r.t) : '<td></td>';
    cells += '<td class="ad-plur">' + mark(r.plurality, v.answer) + '</td>';
    if (!run) cells += '<td class="ad-weighted">' + mark(r.weighted, v.answer) + '</td>';
    s += '<tr><th>' + (run ? 'runs' : 'round ' + r.t) + '</th>' + cells + '</tr>';
  });
  return s + '</table><div class="ad-legend">' + esc(D.legend) + '</div></div>';
}
const methodSel = document.getElementById('f-method'), outSel = document.getElementById('f-outcome'),
      benchSel = document.getElementById('f-bench'), q = document.getElementById('f-q'),
      list = document.getElementById('list'), count = document.getElementById('count'),
      pane = document.getElementById('debate');
D.methods.forEach(m => methodSel.add(new Option(m, m)));
D.benchmarks.forEach(b => benchSel.add(new Option(b, b)));
function open(i){
  pane.innerHTML = debate(D.views[i]);
  list.querySelectorAll('tr.sel').forEach(tr => tr.classList.remove('sel'));
  const tr = list.querySelector('tr[data-i="' + i + '"]'); if (tr) tr.classList.add('sel');
}
function render(){
  const m = methodSel.value, o = outSel.value, b = benchSel.value, s = q.value.trim().toLowerCase();
  let rows = [], k = 0;
  D.views.forEach((v, i) => {
    if (m && v.method !== m) return;
    if (b && v.benchmark !== b) return;
    if (o && (o === 'correct') !== D.ok[i]) return;
    if (s && v.qid.toLowerCase().indexOf(s) < 0) return;
    k++;
    rows.push('<tr class="q-row" data-i="' + i + '"><td>' + esc(v.qid) + '</td><td>' + esc(v.method) + '</td><td>' +
      (v.status !== 'ok' ? '<span class="ad-bad">' + esc(v.status) + '</span>'
                         : (D.ok[i] ? '<span class="ad-ok">✓</span>' : '<span class="ad-bad">✗</span>')) +
      '</td></tr>');
  });
  list.innerHTML = '<table><tr><th>question</th><th>method</th><th>right?</th></tr>' + rows.join('') + '</table>';
  count.textContent = k + ' of ' + D.views.length + ' records';
}
list.addEventListener('click', e => { const tr = e.target.closest('tr.q-row'); if (tr) open(+tr.dataset.i); });
[methodSel, outSel, benchSel].forEach(el => el.addEventListener('change', render));
q.addEventListener('input', render);
render();
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{css}
body{{font:13px/1.35 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:12px;color:#1f2328}}
h1{{font-size:18px;margin:0 0 4px}} .banner{{display:inline-block;padding:2px 8px;border-radius:4px;font-weight:700;
background:{banner_bg};border:1px solid {banner_border}}}
.filters{{margin:8px 0}} .filters label{{margin-right:10px}}
.wrap{{display:flex;gap:12px;align-items:flex-start}}
#list{{flex:0 0 430px;max-height:85vh;overflow:auto;border:1px solid #d0d7de}}
#list table{{border-collapse:collapse;width:100%}}
#list td,#list th{{padding:2px 6px;border-bottom:1px solid #eaeef2;text-align:left;font-size:12px}}
#list tr.q-row{{cursor:pointer}} #list tr.q-row:hover{{background:#f3f6fa}} #list tr.sel{{background:#ddf4ff}}
#debate{{flex:1;overflow:auto}}
</style></head><body>
<h1>Debates of run <code>{experiment}</code></h1>
<div><span class="banner">{source}</span> · {n} records · {nq} questions · methods: {methods}</div>
<div class="filters">
<label>method <select id="f-method"><option value="">all</option></select></label>
<label>benchmark <select id="f-bench"><option value="">all</option></select></label>
<label>outcome <select id="f-outcome"><option value="">all</option><option value="correct">correct</option>
<option value="wrong">wrong</option></select></label>
<label>question <input id="f-q" placeholder="id contains…" size="18"></label>
<span id="count"></span></div>
<div class="wrap"><div id="list"></div>
<div id="debate"><p>Click a question on the left to open its debate.</p></div></div>
<script type="application/json" id="acemad-data">{data}</script>
<script>{js}</script>
</body></html>
"""


def page_path(experiment: str) -> Path:
    """outputs/viewer/<experiment>.html; a "/" in the name makes subfolders, like outputs/runs/<experiment>/."""
    parts = Path(experiment).parts
    if not parts or Path(experiment).is_absolute() or any(p in ("..", ".") for p in parts):
        raise ValueError(f"experiment must be a relative run name like 'default/main', got {experiment!r}")
    return outputs("viewer", *parts[:-1]) / f"{parts[-1]}.html"


def write_run_page(experiment: str) -> Path:
    """One static, self-contained HTML page listing every question x method of outputs/runs/<experiment>/,
    with filters (method, benchmark, correct/wrong, question id); a click opens that record's debate.
    No server and no network: the views are embedded as JSON and drawn by inline vanilla JS."""

    meta, records = load_run(experiment)
    if not records:
        raise ValueError(f"run {experiment!r} has no transcript records for the methods in its meta.json")
    order = {m: i for i, m in enumerate(meta.get("methods", {}))}
    records = sorted(records, key=lambda r: (order.get(r["method"], len(order)), r["question_id"], r.get("repeat", 0)))
    views = [view(r, meta) for r in records]
    source = views[0]["source"]
    synthetic = source == SYNTHETIC_LABEL
    data = {
        "views": views,
        "ok": [is_correct(v) for v in views],
        "methods": list(dict.fromkeys(v["method"] for v in views)),
        "benchmarks": sorted({v["benchmark"] for v in views}),
        "synthetic_label": SYNTHETIC_LABEL,
        "legend": LEGEND,
    }
    # "</" inside a JSON string would end the <script> element early (an argument may quote HTML).
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    page = _PAGE.format(
        title=esc(f"acemad debates: {experiment}"),
        css=CSS,
        experiment=esc(experiment),
        source=esc(source),
        banner_bg="#fff3cd" if synthetic else "#ddf4ff",
        banner_border="#e0c36a" if synthetic else "#54aeff",
        n=len(views),
        nq=len({v["qid"] for v in views}),
        methods=esc(", ".join(dict.fromkeys(v["method"] for v in views))),
        data=blob,
        js=_JS,
    )
    path = page_path(experiment)
    atomic_write(path, page)
    return path
