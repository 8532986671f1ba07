"""One static, self-contained HTML page per run: every record's view embedded, drawn by inline JS.

    from acemad_utils.report.viewer_page import write_run_page
    write_run_page("default/main")      # -> outputs/viewer/default/main.html

No server, no JavaScript library, no font, no network. `_JS` mirrors `viewer_html.debate_html(..., fold=True)` (same
markup, same classes) on the compact view of `viewer_model.view`; the list on the left filters by method,
benchmark, outcome and question id.

How the data is embedded, so that no text of a reply can break out of it and a large run stays small:
- the list (question id, method, benchmark, status, right/wrong per record) is one `<script
  type="application/json">` block read by JSON.parse, with every `<`, `>`, `&`, U+2028 and U+2029 written
  as a JSON \\u escape (`embed_json`): no `</script>`, `<!--` or `<script` can appear inside it, whatever a
  question id or method name holds;
- the debates themselves (arguments, beliefs) are one block per method: the views' JSON, zlib-compressed
  and base64-encoded (`[A-Za-z0-9+/=]` only), inflated by the browser's DecompressionStream when a record of
  that method is first opened. A run of 16,200 debates is then a 7 MB page instead of 56 MB, and the page
  draws its list without parsing any debate.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from pathlib import Path
from typing import Optional

from acemad_utils.data.paths import atomic_write, outputs, root
from acemad_utils.data.transcripts import QUESTIONS, TRANSCRIPTS, load_run, run_dir, transcript_files
from acemad_utils.protocol import beliefs
from acemad_utils.protocol.schema import SYNTHETIC_LABEL
from acemad_utils.report import viewer_html, viewer_model
from acemad_utils.report.viewer_html import CSS, LEGEND, esc
from acemad_utils.report.viewer_model import is_correct, view

_JS = r"""
(function(){
const D = JSON.parse(document.getElementById('acemad-data').textContent);
const parts = {};  // method index -> Promise of its views (inflated on first use)
function part(m){
  if (!parts[m]) {
    const b64 = document.getElementById('acemad-part-' + m).textContent.trim();
    const bytes = Uint8Array.from(atob(b64), ch => ch.charCodeAt(0));
    const text = new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'))).text();
    parts[m] = text.then(t => JSON.parse(t));
  }
  return parts[m];
}
const ESC = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#x27;'};
const esc = s => String(s == null ? '' : s).replace(/[&<>"']/g, c => ESC[c]);
const mark = (l, a) => l == null ? '<span class="ad-bad">none</span>' : a == null ? '<span>' + esc(l) + '</span>' :
  '<span class="' + (l === a ? 'ad-ok' : 'ad-bad') + '">' + esc(l) + (l === a ? ' ✓' : ' ✗') + '</span>';
const W = D.bar_width, EIGHTHS = ' ▏▎▍▌▋▊▉';
function bar(x){  // viewer_html.bar: eighth blocks, padded to W characters
  const n = Math.max(0, Math.min(W * 8, Math.round(x * W * 8)));
  return ('█'.repeat(Math.floor(n / 8)) + EIGHTHS[n % 8].trim()).padEnd(W);
}
function fixed(x, d){ return x.toFixed(d); }
function num(x){ const s = x.toFixed(2); return s === '1.00' ? '1.0' : s.slice(1); }  // viewer_html.num
function bars(p, q, labels, a){
  const L = Math.max(...labels.map(l => String(l).length));  // viewer_html._bars: same widths, no trailing space
  const lines = [' '.repeat(L + W + 5) + 'p' + (q ? ' '.repeat(W + 4) + 'q' : '')];
  labels.forEach((lab, k) => {
    let line = (lab === a ? '*' : ' ') + esc(String(lab).padEnd(L)) + ' ' + bar(p[k]) + ' ' + num(p[k]);
    if (q) line += ' ' + bar(q[k]) + ' ' + num(q[k]);
    lines.push(lab === a ? '<b>' + line + '</b>' : line);
  });
  return '<pre class="ad-bars">' + lines.join('\n').replace(/ /g, '\u00a0') + '</pre>';  // no-break, as _bars
}
function argument(msg){
  if (msg.length <= D.short) return '<div class="ad-short">' + (esc(msg) || '(no argument)') + '</div>';
  return '<details><summary>' + esc(msg.slice(0, D.short - 3)) + '…</summary><div class="ad-msg">' + esc(msg) +
    '</div></details>';
}
function cell(c, v, cls, t){
  const cq = c.q === 'p' ? c.p : c.q;  // pack_views: a q equal to p is stored as 'p'
  const sw = c.score == null ? '' :
    '<div class="ad-sw">score ' + fixed(c.score, 3) + ' · weight ' + fixed(c.weight, 3) + ' ' +
    bar(c.weight).trimEnd() + '</div>';
  return '<td class="' + cls + (c.pf ? ' ad-pf' : '') + '" data-round="' + t + '" data-agent="' + esc(c.agent) + '">' +
    '<div class="ad-who">' + esc(c.who) + '</div>' +
    (c.pf ? '<span class="ad-badge">parse failure</span>'
          : '<span class="ad-stance">' + mark(c.stance, v.answer) + '</span>') +
    bars(c.p, cq, v.labels, v.answer) + sw + argument(c.msg) + '</td>';
}
function question(v){
  const q = v.question;
  if (!q) return '<div class="ad-question"><i>(the question text is not recorded in this run)</i></div>';
  const kind = q.synthetic ? '<i>Synthetic item (generated text, not a benchmark question):</i> ' : '';
  const opts = q.options.map(o => '<li><b>' + esc(o[0]) + '.</b> ' + esc(o[1]) + (o[0] === v.answer ? ' ✓' : '') +
    '</li>').join('');
  return '<div class="ad-question">' + kind + '<b>Q:</b> ' + esc(q.text) + '<ul>' + opts + '</ul></div>';
}
function debate(v){
  const n = v.rounds.length ? v.rounds[0].cells.length : 0;
  const c = v.correct;
  const outcome = (typeof c === 'number') ? 'runs correct: <b>' + Math.round(c * 100) + '%</b>'
                                            : 'final answer ' + mark(v.final, v.answer);
  let s = '<div class="acemad-debate" data-agents="' + n + '" data-rounds="' + v.rounds.length +
    '" data-method="' + esc(v.method) + '" data-question="' + esc(v.qid) + '">' +
    '<div class="ad-head"><b class="ad-src' + (v.source === D.synthetic_label ? ' ad-syn' : '') + '">[' +
    esc(v.source) + ']</b> <b>' + esc(v.method) + '</b> · ' + esc(v.qid) + ' (' + esc(v.benchmark) +
    ', repeat ' + esc(v.repeat) +
    ') · ' + (v.answer == null ? 'no gold answer' : 'correct answer <b class="ad-ok acemad-answer">' + esc(v.answer) +
    '</b>') + ' · ' + outcome + '</div>' +
    question(v);
  if (v.status !== 'ok')
    return s + '<div class="ad-err">status ' + esc(v.status) + ': ' + esc(v.error) + '</div></div>';
  const run = v.unit === 'run', mod = v.rounds.some(r => r.moderator);
  let head = '';
  for (let i = 0; i < n; i++) head += '<td><b>' + v.unit + ' ' + (i + 1) + '</b></td>';
  if (mod) head += '<td><b>moderator</b></td>';
  head += '<td><b>plurality</b></td>' + (run ? '' : '<td><b>' + esc(v.weighted_name) + '</b></td>');
  s += '<table><tr><td></td>' + head + '</tr>';
  v.rounds.forEach(r => {
    let cells = r.cells.map(c => cell(c, v, 'acemad-cell', r.t)).join('');
    if (mod) cells += r.moderator ? cell(r.moderator, v, 'ad-mod', r.t) : '<td></td>';
    cells += '<td class="ad-plur">' + mark(r.plurality, v.answer) + '</td>';
    if (!run) cells += '<td class="ad-weighted">' + mark(r.weighted, v.answer) + '</td>';
    s += '<tr><td><b>' + (run ? 'runs' : 'round ' + r.t) + '</b></td>' + cells + '</tr>';
  });
  return s + '</table><div class="ad-legend">' + esc(D.legend) + '</div></div>';
}
const methodSel = document.getElementById('f-method'), outSel = document.getElementById('f-outcome'),
      benchSel = document.getElementById('f-bench'), q = document.getElementById('f-q'),
      list = document.getElementById('list'), count = document.getElementById('count'),
      pane = document.getElementById('debate');
D.methods.forEach(m => methodSel.add(new Option(m, m)));
D.benchmarks.forEach(b => benchSel.add(new Option(b, b)));
let opened = 0;
function open(i){
  const r = D.rows[i], ticket = ++opened;  // [qid, method index, benchmark index, status, ok, index in its part]
  part(r[1]).then(views => {
    if (ticket !== opened) return;  // another row was clicked meanwhile
    pane.innerHTML = debate(views[r[5]]);
    list.querySelectorAll('tr.sel').forEach(tr => tr.classList.remove('sel'));
    const tr = list.querySelector('tr[data-i="' + i + '"]'); if (tr) tr.classList.add('sel');
  }, err => { pane.textContent = 'cannot read this method\'s debates: ' + err; });
}
function render(){
  const m = methodSel.value, o = outSel.value, b = benchSel.value, s = q.value.trim().toLowerCase();
  let rows = [], k = 0;
  D.rows.forEach((r, i) => {
    if (m && D.methods[r[1]] !== m) return;
    if (b && D.benchmarks[r[2]] !== b) return;
    if (o && (r[4] === null || (o === 'correct') !== r[4])) return;  // no gold answer: neither correct nor wrong
    if (s && r[0].toLowerCase().indexOf(s) < 0) return;
    k++;
    rows.push('<tr class="q-row" data-i="' + i + '"><td>' + esc(r[0]) + '</td><td>' + esc(D.methods[r[1]]) +
      '</td><td>' +
      (r[3] !== 'ok' ? '<span class="ad-bad">' + esc(r[3]) + '</span>' :
        (r[4] === null ? '–' : r[4] ? '<span class="ad-ok">✓</span>' : '<span class="ad-bad">✗</span>')) +
      '</td></tr>');
  });
  list.innerHTML = '<table><tr><th>question</th><th>method</th><th>right?</th></tr>' + rows.join('') + '</table>';
  count.textContent = k + ' of ' + D.rows.length + ' records';
}
list.addEventListener('click', e => { const tr = e.target.closest('tr.q-row'); if (tr) open(+tr.dataset.i); });
[methodSel, outSel, benchSel].forEach(el => el.addEventListener('change', render));
q.addEventListener('input', render);
render();
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="acemad-stamp" content="{stamp}">
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
{parts}
<script>{js}</script>
</body></html>
"""


# Characters that could end or alter the <script> element holding JSON, or end a JS line in old engines.
_UNSAFE: dict[str, str | int | None] = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def embed_json(data) -> str:
    """JSON for a <script type="application/json"> block: JSON.parse gives `data` back, and no text inside
    (`</script>`, `<!--`, `<script`, `]]>`, U+2028) can end the block or change how the HTML around it parses."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.translate(str.maketrans(_UNSAFE))


def _q_as_p(views: list) -> list:
    """Views whose cells write a q equal to their p as "p" (a false-consensus agent predicts its own belief:
    half of an AceMAD page's numbers); the page's JS reads it back as p."""
    out = []
    for v in views:
        rounds = []
        for r in v["rounds"]:
            cells = [dict(c, q="p") if c["q"] is not None and c["q"] == c["p"] else c for c in r["cells"]]
            rounds.append(dict(r, cells=cells))
        out.append(dict(v, rounds=rounds))
    return out


def pack_views(views: list) -> str:
    """A method's views as base64 of zlib-compressed JSON (what the page's DecompressionStream('deflate')
    reads): only [A-Za-z0-9+/=], so nothing in a reply can end its <script> block."""
    raw = json.dumps(_q_as_p(views), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def unpack_views(blob: str) -> list:
    """pack_views inverted (what the page does in the browser): for tests and for reading a page back."""
    views = json.loads(zlib.decompress(base64.b64decode(blob)).decode("utf-8"))
    for v in views:
        for r in v["rounds"]:
            for c in r["cells"]:
                c["q"] = c["p"] if c["q"] == "p" else c["q"]
    return views


def page_path(experiment: str) -> Path:
    """outputs/viewer/<experiment>.html; a "/" in the name makes subfolders, like outputs/runs/<experiment>/."""
    parts = Path(experiment).parts
    if not parts or Path(experiment).is_absolute() or any(p in ("..", ".") for p in parts):
        raise ValueError(f"experiment must be a relative run name like 'default/main', got {experiment!r}")
    return outputs("viewer", *parts[:-1]) / f"{parts[-1]}.html"


def page_link(path: Path):
    """A run page's path as a Markdown link relative to notebooks/ (where the committed notebooks live, and
    JupyterLab's `make lab` opens the repository root), so a reader clicks it instead of copying a path; the text
    shows the path from the repository root, never this machine's."""
    from IPython.display import Markdown

    rel = Path(path).resolve().relative_to(root()).as_posix()
    return Markdown(
        f"Every debate of this run: [{rel}](../{rel}) (a self-contained page: open it in a browser; JupyterLab "
        f"shows it without its script until you click *Trust HTML* in its toolbar)."
    )


# What a page is drawn by: a change to any of these files rebuilds every page (see page_stamp).
_CODE = [Path(m.__file__) for m in (viewer_html, viewer_model, beliefs) if m.__file__] + [Path(__file__)]


def page_stamp(experiment: str) -> str:
    """The sha256 of everything a run's page is made from: the run's meta.json and transcript files, and the
    viewer's code. Written into the page; a page whose stamp matches is up to date and is not rebuilt."""
    d = run_dir(experiment)
    h = hashlib.sha256()
    for f in [d / "meta.json", d / QUESTIONS, *transcript_files(d / TRANSCRIPTS), *_CODE]:
        if f.exists():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _stamp_of(path: Path) -> Optional[str]:
    """The stamp written in an existing page's head, if any."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return None
    start = head.find('<meta name="acemad-stamp" content="')
    return head[start:].split('"')[3] if start >= 0 else None


def write_run_page(experiment: str, *, loaded: Optional[tuple[dict, list[dict]]] = None) -> Path:
    """One static, self-contained HTML page listing every question x method of outputs/runs/<experiment>/,
    with filters (method, benchmark, correct/wrong, question id); a click opens that record's debate.
    No server and no network: the views are embedded as JSON and drawn by inline vanilla JS.

    Why the stamp: drawing a large run's page takes seconds (a view per record, compression), and a rerun with
    everything on disk would redraw the same bytes; a page is rebuilt only when its run or the viewer's code
    changed. `loaded`: the run's (meta, records) when the caller has read them already (load_run's result)."""
    path = page_path(experiment)
    stamp = page_stamp(experiment)
    if path.exists() and _stamp_of(path) == stamp:
        return path
    meta, records = loaded if loaded is not None else load_run(experiment)
    if not records:
        raise ValueError(f"run {experiment!r} has no transcript records for the methods in its meta.json")
    order = {m: i for i, m in enumerate(meta.get("methods", {}))}
    records = sorted(records, key=lambda r: (order.get(r["method"], len(order)), r["question_id"], r.get("repeat", 0)))
    views = [view(r, meta) for r in records]
    source = views[0]["source"]
    synthetic = source == SYNTHETIC_LABEL
    methods = list(dict.fromkeys(v["method"] for v in views))
    benchmarks = sorted({v["benchmark"] for v in views})
    by_method: list[list] = [[] for _ in methods]
    rows = []
    for v in views:
        m = methods.index(v["method"])
        rows.append([v["qid"], m, benchmarks.index(v["benchmark"]), v["status"], is_correct(v), len(by_method[m])])
        by_method[m].append(v)
    data = {
        "rows": rows,
        "methods": methods,
        "benchmarks": benchmarks,
        "synthetic_label": SYNTHETIC_LABEL,
        "legend": LEGEND,
        "bar_width": viewer_html.BAR_WIDTH,
        "short": viewer_html.SHORT,
    }
    parts = "\n".join(
        f'<script type="application/octet-stream" id="acemad-part-{m}">{pack_views(vs)}</script>'
        for m, vs in enumerate(by_method)
    )
    page = _PAGE.format(
        title=esc(f"acemad debates: {experiment}"),
        stamp=stamp,
        css=CSS,
        experiment=esc(experiment),
        source=esc(source),
        banner_bg="#fff3cd" if synthetic else "#ddf4ff",
        banner_border="#e0c36a" if synthetic else "#54aeff",
        n=len(views),
        nq=len({v["qid"] for v in views}),
        methods=esc(", ".join(methods)),
        data=embed_json(data),
        parts=parts,
        js=_JS,
    )
    atomic_write(path, page)
    return path
