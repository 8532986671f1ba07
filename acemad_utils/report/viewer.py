"""Read a debate: one transcript record as rounds x agents in HTML, examples picked by rule, one static page per run.

    V.show(record, meta)                     # inline in Jupyter; V.debate_html(record, meta) the same as a fragment
    V.pick_examples(records, "AceMAD (T=3)") # {"overturned": [...], "not_overturned": [...]}
    python -m acemad_utils.report.viewer default/main    # -> outputs/viewer/default/main.html (V.write_run_page)

Each agent cell shows its belief p and peer prediction q as text bars (the correct option's line bold and starred),
its answer, for AceMAD its score and weight after that round, and its argument; each round row ends with the
plurality answer and the weighted one (AceMAD's sum_i w_i^k p_i, else the parsing agents' mean belief), through the
engine's own functions. Plain HTML, no script, SVG or style: a notebook is read untrusted (JupyterLab after a clone,
a code host, nbconvert's sanitizer) and each strips those. The run page embeds the same fragments (long arguments
folded in <details>); its few lines of JS only list, filter and show them. So that no reply text can break out, the
list is JSON with <, >, &, U+2028, U+2029 escaped, and each method's fragments one base64 block of zlib-compressed
JSON, inflated by the browser's DecompressionStream when first opened.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import math
import zlib
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Optional

import numpy as np

from acemad_utils.data.paths import atomic_write, outputs, root
from acemad_utils.data.transcripts import QUESTIONS, TRANSCRIPTS, load_run, read_questions, run_dir, transcript_files
from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import WEIGHT_EXPONENT
from acemad_utils.protocol.schema import SYNTHETIC_LABEL

LEGEND = (
    "Bars: an agent's belief p and its prediction q of its peers' beliefs, one line per option (a full bar is "
    "probability 1); the correct option's line is bold and starred (*). ✓/✗ after an answer: it is / is not the "
    "correct one."
)
BAR_WIDTH = 3  # characters of a full bar; narrow, so five agents fit side by side at notebook width
SHORT = 60  # an argument this long or shorter is shown whole; a longer one is cut (notebook) or folded (page)
CLIP = 200  # how much of a long argument the notebook shows (sanitizers drop <details>; the page has it whole)
_EIGHTHS = " ▏▎▍▌▋▊▉"

# The run page's style (the notebook fragment needs none).
CSS = """
.acemad-debate{font:13px/1.35 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#1f2328;margin:6px 0 14px}
.acemad-debate .ad-head{margin:0 0 6px}
.acemad-debate .ad-src{display:inline-block;padding:1px 6px;border-radius:3px;background:#eef1f4;font-size:11px;
  font-weight:600}
.acemad-debate .ad-src.ad-syn{background:#fff3cd;color:#7a5b00;border:1px solid #e0c36a}
.acemad-debate table{border-collapse:collapse;table-layout:fixed}
.acemad-debate th,.acemad-debate td{border:1px solid #d0d7de!important;padding:4px 6px!important;
  vertical-align:top!important;text-align:left!important;line-height:1.3!important}
.acemad-debate tr,.acemad-debate tr:hover{background:#fff!important}
.acemad-debate th{background:#f6f8fa;font-weight:600;font-size:12px}
.acemad-debate td.acemad-cell,.acemad-debate td.ad-mod{width:150px}
.acemad-debate td.ad-mod{background:#f5f3ff}
.acemad-debate td.ad-pf{background:#fff0f0;border:2px dashed #cf222e}
.acemad-debate .ad-who{font-size:11px;color:#57606a}
.acemad-debate .ad-stance{font-weight:700}
.acemad-debate .ad-ok{color:#1a7f37;font-weight:700}
.acemad-debate .ad-bad{color:#cf222e;font-weight:700}
.acemad-debate .ad-badge{display:inline-block;background:#cf222e;color:#fff;border-radius:3px;padding:0 4px;
  font-size:11px}
.acemad-debate pre.ad-bars{font:11px/1.2 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;margin:3px 0;
  background:none;padding:0}
.acemad-debate pre.ad-bars b{color:#1a7f37}
.acemad-debate .ad-question{margin:0 0 6px;max-width:70em}
.acemad-debate .ad-question ul{margin:2px 0;padding-left:1.4em}
.acemad-debate .ad-sw{font-size:11px;color:#333}
.acemad-debate details{font-size:12px;margin-top:3px}
.acemad-debate summary{cursor:pointer;color:#0550ae}
.acemad-debate .ad-short{font-size:12px;margin-top:3px;white-space:pre-wrap}
.acemad-debate .ad-msg{white-space:pre-wrap;max-height:16em;overflow:auto;background:#f6f8fa;padding:3px}
.acemad-debate .ad-err{background:#fff0f0;border:1px solid #cf222e;padding:6px;white-space:pre-wrap}
.acemad-debate .ad-legend{font-size:11px;color:#57606a;margin-top:4px}
"""


# ----------------------------------------------------------------------------- the view of a record
def source_of(record: dict, meta: Optional[dict] = None) -> str:
    """SYNTHETIC_LABEL for the simulated population, else 'model: <name>'."""
    if meta is not None:
        pop = meta.get("population") or {}
        if pop.get("synthetic", meta.get("synthetic")):
            return SYNTHETIC_LABEL
        return f"model: {meta.get('model') or pop.get('model') or 'unknown'}"
    if record.get("synthetic"):
        return SYNTHETIC_LABEL
    models = {e.get("model") for r in record.get("rounds") or [record.get("runs") or []] for e in r} - {None}
    return f"model: {', '.join(sorted(models))}" if models else "model: (not recorded; pass the run's meta)"


@functools.lru_cache(maxsize=1024)
def _who(persona, model, temperature) -> str:
    return " · ".join(str(x) for x in (persona, model, f"T={temperature}") if x not in (None, ""))


def _r4(xs) -> list:
    return [round(float(x), 4) for x in xs]


def _round_answers(rounds: list, labels: list, keys: np.ndarray, acemad: bool, *, exponent: float) -> list:
    """(plurality label, weighted label) of every round, None where no commitment parsed; one engine call for all
    rounds when they have the same agents."""
    if not rounds:
        return []
    if len({len(r) for r in rounds}) > 1:
        return [a for r in rounds for a in _round_answers([r], labels, keys, acemad, exponent=exponent)]
    P = np.array([[e["p"] for e in r] for r in rounds], dtype=float)
    valid = np.array([[not e.get("parse_failure") for e in r] for r in rounds], dtype=bool)
    plur = B.plurality(B.votes(P, valid), len(labels), keys)
    if acemad:  # the weights after each round, as the final decision uses them after the last round
        w = np.array([[e.get("weight", 0.0) for e in r] for r in rounds], dtype=float)
    else:  # uniform weights over the parsing agents (the engine's mean_belief aggregator)
        w, exponent = np.ones(valid.shape), 1.0
    weighted = B.weighted_decision(P, w, valid, exponent, keys=keys)[0]
    return [
        (labels[int(pl)] if pl >= 0 else None, labels[int(wd)] if ok else None)
        for pl, wd, ok in zip(plur, weighted, np.asarray(valid.any(axis=-1)).tolist())
    ]


@functools.lru_cache(maxsize=8)
def _questions(experiment: str, mtime_ns: int) -> dict:
    return read_questions(run_dir(experiment, create=False))


def _question_of(record: dict, meta: Optional[dict]) -> Optional[dict]:
    """The question's text and options: the record's own, else its run's questions.json (meta["experiment"])."""
    if isinstance(record.get("question"), dict):
        return record["question"]
    experiment = (meta or {}).get("experiment")
    if not experiment:
        return None
    try:
        path = run_dir(experiment, create=False) / QUESTIONS
        found = _questions(experiment, path.stat().st_mtime_ns) if path.exists() else {}
    except ValueError:  # not a run name (a hand-made meta): no side file to read
        return None
    return found.get(record["question_id"])


def is_correct(record: dict) -> Optional[bool]:
    """The page's outcome filter: a Single Agent record (a mean over runs) is correct when over half its runs are;
    None without a gold answer."""
    c = record["final"].get("correct")
    if c is None:
        return None
    return bool(c > 0.5) if isinstance(c, float) and not isinstance(c, bool) else bool(c)


# ----------------------------------------------------------------------------- the HTML fragment
def esc(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def fixed(x: float, digits: int) -> str:
    """x with `digits` decimals, ties away from zero on the exact binary value (as the page's JS prints)."""
    return str(Decimal(float(x) + 0.0).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))  # -0.0 -> 0.0


def bar(x: float, width: int = BAR_WIDTH) -> str:
    """x in [0, 1] as `width` characters of block glyphs in eighth steps, padded with spaces."""
    n = max(0, min(width * 8, math.floor(float(x) * width * 8 + 0.5)))
    return ("█" * (n // 8) + _EIGHTHS[n % 8].strip()).ljust(width)


def _num(x: float) -> str:
    text = fixed(x, 2)  # '.07', '.80', '1.0': three characters, so five agents' bars fit side by side
    return "1.0" if text == "1.00" else text[1:]


def _mark(label, answer) -> str:
    if label is None:
        return '<span class="ad-bad">none</span>'
    if answer is None:  # no gold answer: neither right nor wrong
        return f"<span>{esc(label)}</span>"
    cls, sym = ("ad-ok", "✓") if label == answer else ("ad-bad", "✗")
    return f'<span class="{cls}">{esc(label)} {sym}</span>'


def _bars(p, q, labels, answer) -> str:
    # Every line as wide as the others and none ending in a space: renderers that right-align table cells
    # (JupyterLab, nbconvert) then keep the columns; "p" and "q" stand over the last digit of their numbers. The
    # mark is ASCII: a check mark from a fallback font is wider than a monospace cell and shifts its line.
    width = max(len(str(lab)) for lab in labels)
    lines = [" " * (width + BAR_WIDTH + 5) + "p" + (" " * (BAR_WIDTH + 4) + "q" if q is not None else "")]
    for k, lab in enumerate(labels):
        line = f"{'*' if lab == answer else ' '}{esc(str(lab).ljust(width))} {bar(p[k])} {_num(p[k])}"
        if q is not None:
            line += f" {bar(q[k])} {_num(q[k])}"
        lines.append(f"<b>{line}</b>" if lab == answer else line)
    # No-break spaces: JupyterLab wraps a <pre>, which broke q onto a second line in a narrow cell.
    return '<pre class="ad-bars">' + "\n".join(lines).replace(" ", "\u00a0") + "</pre>"


def _argument(msg: str, fold: bool) -> str:
    if len(msg) <= SHORT:
        return f'<div class="ad-short">{esc(msg) or "(no argument)"}</div>'
    if fold:
        return f'<details><summary>{esc(msg[: SHORT - 3])}…</summary><div class="ad-msg">{esc(msg)}</div></details>'
    return f'<div class="ad-msg">{esc(msg if len(msg) <= CLIP else msg[: CLIP - 1] + "…")}</div>'


def _cell_html(e: dict, labels: list, answer, cls: str, t: int, fold: bool) -> str:
    # plain Python, not numpy: a run's page draws ~10^5 cells, where numpy's per-call overhead is most of the work
    p, q, pf = _r4(e["p"]), None if e.get("q") is None else _r4(e["q"]), bool(e.get("parse_failure"))
    stance = labels[max(range(len(p)), key=e["p"].__getitem__)]  # the first maximum (argmax)
    stance = (
        '<span class="ad-badge">parse failure</span>'
        if pf
        else f'<span class="ad-stance">{_mark(stance, answer)}</span>'
    )
    sw = ""
    if e.get("score") is not None:
        score, w = round(float(e["score"]), 4), round(float(e["weight"]), 4)
        sw = f'<div class="ad-sw">score {fixed(score, 3)} · weight {fixed(w, 3)} {bar(w).rstrip()}</div>'
    return (
        f'<td class="{cls}{" ad-pf" if pf else ""}" data-round="{t}" data-agent="{esc(e.get("agent"))}">'
        f'<div class="ad-who">{esc(_who(e.get("persona"), e.get("model"), e.get("temperature")))}</div>{stance}'
        f"{_bars(p, q, labels, answer)}{sw}{_argument(str(e.get('message') or ''), fold)}</td>"
    )


def debate_html(record: dict, meta: Optional[dict] = None, *, fold: bool = False) -> str:
    """One record as a fragment (root div.acemad-debate, one td.acemad-cell per agent and round); `fold`: long
    arguments in <details> (the page's markup), else their first CLIP characters (the notebook's)."""
    for key in ("question_id", "method", "labels", "answer", "final"):
        if key not in record:
            raise ValueError(f"not a transcript record: missing {key!r} (keys: {sorted(record)})")
    labels, answer, c = list(record["labels"]), record["answer"], record["final"].get("correct")
    params = ((meta or {}).get("methods") or {}).get(record.get("method"), {})
    kind = record.get("method_kind") or params.get("method")
    ok = record.get("status", "ok") == "ok"
    unit, raw = ("run", [record.get("runs") or []]) if kind == "single" or "runs" in record else ("agent", None)
    raw = (raw or record.get("rounds") or []) if ok else []
    n = len(raw[0]) if raw else 0
    source, q = source_of(record, meta), _question_of(record, meta)
    if isinstance(c, float) and not isinstance(c, bool):
        outcome = f"runs correct: <b>{c:.0%}</b>"
    else:
        outcome = f"final answer {_mark(record['final'].get('answer'), answer)}"
    gold = "no gold answer" if answer is None else f'correct answer <b class="ad-ok acemad-answer">{esc(answer)}</b>'
    out = (
        f'<div class="acemad-debate" data-agents="{n}" data-rounds="{len(raw)}" data-method="{esc(record["method"])}" '
        f'data-question="{esc(record["question_id"])}"><div class="ad-head"><b class="ad-src'
        f'{" ad-syn" if source == SYNTHETIC_LABEL else ""}">[{esc(source)}]</b> <b>{esc(record["method"])}</b> · '
        f"{esc(record['question_id'])} ({esc(record.get('benchmark', ''))}, repeat {esc(record.get('repeat', 0))}) · "
        f"{gold} · {outcome}</div>"
    )
    if not q:
        out += '<div class="ad-question"><i>(the question text is not recorded in this run)</i></div>'
    else:
        syn = "<i>Synthetic item (generated text, not a benchmark question):</i> " if q.get("synthetic") else ""
        opts = "".join(
            f"<li><b>{esc(k)}.</b> {esc(text)}{' ✓' if k == answer else ''}</li>" for k, text in q["options"]
        )
        out += f'<div class="ad-question">{syn}<b>Q:</b> {esc(q["text"])}<ul>{opts}</ul></div>'
    if not ok:
        return (
            out + f'<div class="ad-err">status {esc(record.get("status"))}: {esc(record.get("error", ""))}</div></div>'
        )
    # Name the weighted column by what decides: AceMAD's weights, or a mean belief that may not be the decision.
    if kind in ("acemad", "centralized"):
        name = "weighted (AceMAD weights)" if kind == "acemad" else "mean belief (the moderator decides)"
    elif kind in ("majority", "self_consistency") or params.get("mad_aggregator") == "plurality":
        name = "mean belief (plurality decides)"
    else:
        name = "mean belief"
    mods = {m.get("round"): m for m in record.get("moderator") or []}
    keys = B.tiebreak_keys(int(params.get("seed", 0)), [record["question_id"]], len(labels))[0]
    exponent = float(params.get("weight_exponent", WEIGHT_EXPONENT))
    head = "".join(f"<td><b>{unit} {i + 1}</b></td>" for i in range(n)) + ("<td><b>moderator</b></td>" if mods else "")
    head += "<td><b>plurality</b></td>" + ("" if unit == "run" else f"<td><b>{esc(name)}</b></td>")
    rows = []
    for t, (entries, (plur, weighted)) in enumerate(
        zip(raw, _round_answers(raw, labels, keys, kind == "acemad", exponent=exponent)), 1
    ):
        cells = "".join(_cell_html(e, labels, answer, "acemad-cell", t, fold) for e in entries)
        if mods:
            cells += _cell_html(mods[t], labels, answer, "ad-mod", t, fold) if t in mods else "<td></td>"
        cells += f'<td class="ad-plur">{_mark(plur, answer)}</td>'
        if unit != "run":
            cells += f'<td class="ad-weighted">{_mark(weighted, answer)}</td>'
        rows.append(f"<tr><td><b>{'runs' if unit == 'run' else f'round {t}'}</b></td>{cells}</tr>")
    legend = f'<div class="ad-legend">{esc(LEGEND)}</div>'
    return out + f"<table><tr><td></td>{head}</tr>{''.join(rows)}</table>{legend}</div>"


def show(record: dict, meta: Optional[dict] = None):
    """debate_html as an IPython HTML object (inline in Jupyter)."""
    from IPython.display import HTML

    return HTML(debate_html(record, meta))


def pick_examples(records: list[dict], target_label: str, n: int = 1, seed: int = 0) -> dict[str, list[dict]]:
    """The first n (by question id, repeat) of `target_label`'s ok debates whose round-1 plurality was wrong (or none
    parsed) and whose final answer is right ("overturned") or wrong ("not_overturned"); `seed` breaks vote ties."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    mine = [r for r in records if r.get("method") == target_label]
    if not mine:
        methods = sorted({str(r.get("method")) for r in records})
        raise ValueError(f"no record of method {target_label!r}; methods present: {methods}")
    out: dict[str, list[dict]] = {"overturned": [], "not_overturned": []}
    for r in sorted(mine, key=lambda r: (r["question_id"], r.get("repeat", 0))):
        if r.get("status", "ok") != "ok" or not r.get("rounds"):
            continue
        keys = B.tiebreak_keys(seed, [r["question_id"]], len(r["labels"]))[0]
        if _round_answers(r["rounds"][:1], list(r["labels"]), keys, False, exponent=1.0)[0][0] == r["answer"]:
            continue
        kind = "overturned" if r["final"]["correct"] is True else "not_overturned"
        if len(out[kind]) < n:
            out[kind].append(r)
    return out


# ----------------------------------------------------------------------------- the run page
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


def _json(data) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def page_path(experiment: str) -> Path:
    """outputs/viewer/<experiment>.html; a "/" in the name makes subfolders, as under outputs/runs/."""
    parts = Path(experiment).parts
    if not parts or Path(experiment).is_absolute() or any(p in ("..", ".") for p in parts):
        raise ValueError(f"experiment must be a relative run name like 'default/main', got {experiment!r}")
    return outputs("viewer", *parts[:-1]) / f"{parts[-1]}.html"


def page_link(experiment: str):
    """For a notebook: the command that writes a run's page and the page as a link relative to notebooks/ (the page
    is not built here, so the notebook's output does not depend on this machine)."""
    from IPython.display import Markdown

    rel = page_path(experiment).resolve().relative_to(root()).as_posix()
    return Markdown(
        f"Every debate of this run: `python -m acemad_utils.report.viewer {experiment}` writes [{rel}](../{rel}) "
        "(a self-contained page: open it in a browser; JupyterLab shows it without its script until you click "
        "*Trust HTML*)."
    )


_CODE = [Path(__file__), Path(B.__file__)]  # what draws a page: a change rebuilds every page


def page_stamp(experiment: str) -> str:
    """The sha256 of everything a run's page is made from (meta.json, questions, transcripts, the viewer's code)."""
    d = run_dir(experiment)
    h = hashlib.sha256()
    for f in [d / "meta.json", d / QUESTIONS, *transcript_files(d / TRANSCRIPTS), *_CODE]:
        if f.exists():
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def write_run_page(experiment: str, *, loaded: Optional[tuple[dict, list[dict]]] = None) -> Path:
    """The page of outputs/runs/<experiment>/, rebuilt only when its stamp changed; `loaded`: the run's
    (meta, records) when the caller holds them (load_run's result)."""
    path, stamp = page_path(experiment), page_stamp(experiment)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            if f'<meta name="acemad-stamp" content="{stamp}">' in f.read(4096):
                return path
    except OSError:
        pass
    meta, records = loaded if loaded is not None else load_run(experiment)
    if not records:
        raise ValueError(f"run {experiment!r} has no transcript records for the methods in its meta.json")
    order = {m: i for i, m in enumerate(meta.get("methods", {}))}
    records = sorted(records, key=lambda r: (order.get(r["method"], len(order)), r["question_id"], r.get("repeat", 0)))
    methods = list(dict.fromkeys(r["method"] for r in records))
    benchmarks = sorted({r.get("benchmark", "") for r in records})
    by_method: list[list[str]] = [[] for _ in methods]
    rows = []
    for r in records:
        m = methods.index(r["method"])
        by_method[m].append(debate_html(r, meta, fold=True))
        b = benchmarks.index(r.get("benchmark", ""))
        rows.append([r["question_id"], m, b, r.get("status", "ok"), is_correct(r), len(by_method[m]) - 1])
    data = _json({"rows": rows, "methods": methods, "benchmarks": benchmarks}).decode("utf-8").translate(_UNSAFE)
    parts = "\n".join(
        f'<script type="application/octet-stream" id="acemad-part-{m}">'
        f"{base64.b64encode(zlib.compress(_json(fs), 6)).decode('ascii')}</script>"
        for m, fs in enumerate(by_method)
    )
    source = source_of(records[0], meta)
    synthetic = source == SYNTHETIC_LABEL
    page = _PAGE.format(
        title=esc(f"acemad debates: {experiment}"),
        stamp=stamp,
        css=CSS,
        experiment=esc(experiment),
        source=esc(source),
        banner_bg="#fff3cd" if synthetic else "#ddf4ff",
        banner_border="#e0c36a" if synthetic else "#54aeff",
        n=len(records),
        nq=len({r["question_id"] for r in records}),
        methods=esc(", ".join(methods)),
        data=data,
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
