"""Read a debate: one transcript record as rounds x agents, and one static HTML page per run.

    from acemad_utils.report import viewer as V
    V.show(record)                                   # inline in Jupyter (an IPython HTML object)
    html = V.debate_html(record, meta)               # the same view as a self-contained HTML fragment
    ex = V.pick_examples(records, "AceMAD (T=3)")    # {"overturned": [...], "not_overturned": [...]}
    V.write_run_page("default/main")                 # -> outputs/viewer/default/main.html
    V.page_link("default/main")                      # for a notebook: the command and the page as a link
    python -m acemad_utils.report.viewer default/main       # the same from a shell

Above the debate: the question and its options (escaped; a synthetic item says its text is generated). Each
agent cell shows its belief p and peer prediction q as text bars, one line per option (the correct option's line
bold and starred), its answer, for AceMAD its round score and weight after that round, and its argument. Each
round row ends with the plurality answer and the weighted answer (AceMAD's sum_i w_i^k p_i with the weights
after that round, else the parsing agents' mean belief). Single Agent records show their runs as the "agents"
of one round; Centralized MAD adds the moderator's summary. Parts: `viewer_model` (the view of a record,
examples by rule), `viewer_html` (the fragment: plain HTML that reads the same trusted or not), and here the
run page, built on request (seconds per run; notebooks only link to it).

The page has no server, library or network: its few lines of JS only list, filter (method, benchmark, outcome,
question id) and show the fragments `debate_html(..., fold=True)` drew, so the notebook and the page are one
renderer. So that no reply text can break out and a large run stays small, the list is one
`<script type="application/json">` block with `<`, `>`, `&`, U+2028, U+2029 as JSON \\u escapes (`embed_json`);
each method's fragments are one block of base64 of zlib-compressed JSON, inflated by the browser's
DecompressionStream when a record of that method is first opened.
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
from acemad_utils.report.viewer_html import CSS, debate_html, esc, show, view_html  # noqa: F401  (one import)
from acemad_utils.report.viewer_model import is_correct, pick_examples, round1_plurality, source_of, view  # noqa: F401

_JS = r"""
(function(){
const D = JSON.parse(document.getElementById('acemad-data').textContent), parts = {};
function part(m){  // a method's debates, inflated on first use
  if (!parts[m]) {
    const b64 = document.getElementById('acemad-part-' + m).textContent.trim();
    const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
    parts[m] = new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'))).json();
  }
  return parts[m];
}
const ESC = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#x27;'};
const esc = s => String(s == null ? '' : s).replace(/[&<>"']/g, c => ESC[c]);
const $ = id => document.getElementById(id), list = $('list'), pane = $('debate');
const sel = {m: $('f-method'), b: $('f-bench'), o: $('f-outcome'), q: $('f-q')};
D.methods.forEach(m => sel.m.add(new Option(m, m)));
D.benchmarks.forEach(b => sel.b.add(new Option(b, b)));
let opened = 0;
function open(i){
  const r = D.rows[i], ticket = ++opened;  // [qid, method index, benchmark index, status, ok, index in its part]
  part(r[1]).then(html => {
    if (ticket !== opened) return;  // another row was clicked meanwhile
    pane.innerHTML = html[r[5]];
    list.querySelectorAll('tr.sel').forEach(tr => tr.classList.remove('sel'));
    const tr = list.querySelector('tr[data-i="' + i + '"]'); if (tr) tr.classList.add('sel');
  }, err => { pane.textContent = 'cannot read this method\'s debates: ' + err; });
}
function render(){
  const m = sel.m.value, b = sel.b.value, o = sel.o.value, s = sel.q.value.trim().toLowerCase(), rows = [];
  D.rows.forEach((r, i) => {
    if ((m && D.methods[r[1]] !== m) || (b && D.benchmarks[r[2]] !== b)) return;
    if (o && (r[4] === null || (o === 'correct') !== r[4])) return;  // no gold answer: neither correct nor wrong
    if (s && r[0].toLowerCase().indexOf(s) < 0) return;
    const ok = r[3] !== 'ok' ? '<span class="ad-bad">' + esc(r[3]) + '</span>' : r[4] === null ? '–' :
      r[4] ? '<span class="ad-ok">✓</span>' : '<span class="ad-bad">✗</span>';
    rows.push('<tr class="q-row" data-i="' + i + '"><td>' + esc(r[0]) + '</td><td>' + esc(D.methods[r[1]]) +
      '</td><td>' + ok + '</td></tr>');
  });
  list.innerHTML = '<table><tr><th>question</th><th>method</th><th>right?</th></tr>' + rows.join('') + '</table>';
  $('count').textContent = rows.length + ' of ' + D.rows.length + ' records';
}
list.addEventListener('click', e => { const tr = e.target.closest('tr.q-row'); if (tr) open(+tr.dataset.i); });
[sel.m, sel.o, sel.b].forEach(el => el.addEventListener('change', render));
sel.q.addEventListener('input', render);
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
_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def embed_json(data) -> str:
    """JSON for a <script type="application/json"> block: JSON.parse gives `data` back, and no text inside
    (`</script>`, `<!--`, `<script`, `]]>`, U+2028) can end the block or change how the HTML around it parses."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).translate(_UNSAFE)


def pack(fragments: list[str]) -> str:
    """A method's fragments as base64 of zlib-compressed JSON (what DecompressionStream('deflate') reads)."""
    raw = json.dumps(fragments, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def unpack(blob: str) -> list[str]:
    """pack inverted (what the page does in the browser): for tests and for reading a page back."""
    return json.loads(zlib.decompress(base64.b64decode(blob)).decode("utf-8"))


def page_path(experiment: str) -> Path:
    """outputs/viewer/<experiment>.html; a "/" in the name makes subfolders, like outputs/runs/<experiment>/."""
    parts = Path(experiment).parts
    if not parts or Path(experiment).is_absolute() or any(p in ("..", ".") for p in parts):
        raise ValueError(f"experiment must be a relative run name like 'default/main', got {experiment!r}")
    return outputs("viewer", *parts[:-1]) / f"{parts[-1]}.html"


def page_link(experiment: str):
    """For a notebook: the command that writes a run's page and the page as a Markdown link relative to
    notebooks/. The page is not built here (seconds per run, and most readers never open it); the text is the
    same whether or not the page exists, so the notebook's output does not depend on this machine."""
    from IPython.display import Markdown

    rel = page_path(experiment).resolve().relative_to(root()).as_posix()
    return Markdown(
        f"Every debate of this run: `python -m acemad_utils.report.viewer {experiment}` writes [{rel}](../{rel}) "
        "(a self-contained page: open it in a browser; JupyterLab shows it without its script until you click "
        "*Trust HTML*)."
    )


# What a page is drawn by: a change to any of these files rebuilds every page (see page_stamp).
_CODE = [Path(m.__file__) for m in (viewer_html, viewer_model, beliefs) if m.__file__] + [Path(__file__)]


def page_stamp(experiment: str) -> str:
    """The sha256 of everything a run's page is made from (meta.json, questions, transcripts, the viewer's code),
    written into the page: a page whose stamp matches is up to date and is not rebuilt."""
    d = run_dir(experiment)
    h = hashlib.sha256()
    for f in [d / "meta.json", d / QUESTIONS, *transcript_files(d / TRANSCRIPTS), *_CODE]:
        if f.exists():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _stamp_of(path: Path) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return None
    start = head.find('<meta name="acemad-stamp" content="')
    return head[start:].split('"')[3] if start >= 0 else None


def write_run_page(experiment: str, *, loaded: Optional[tuple[dict, list[dict]]] = None) -> Path:
    """The page of outputs/runs/<experiment>/ (rebuilt only when its stamp changed); `loaded`: the run's
    (meta, records) when the caller holds them already (load_run's result)."""
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
    methods = list(dict.fromkeys(v["method"] for v in views))
    benchmarks = sorted({v["benchmark"] for v in views})
    by_method: list[list[str]] = [[] for _ in methods]
    rows = []
    for v in views:
        m = methods.index(v["method"])
        rows.append([v["qid"], m, benchmarks.index(v["benchmark"]), v["status"], is_correct(v), len(by_method[m])])
        by_method[m].append(view_html(v, fold=True))
    data = {"rows": rows, "methods": methods, "benchmarks": benchmarks}
    parts = "\n".join(
        f'<script type="application/octet-stream" id="acemad-part-{m}">{pack(fs)}</script>'
        for m, fs in enumerate(by_method)
    )
    synthetic = source == SYNTHETIC_LABEL
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


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m acemad_utils.report.viewer <experiment>   (e.g. default/main)")
    print(write_run_page(sys.argv[1]))
