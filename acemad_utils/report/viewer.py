"""Read a debate: `show(record, meta)` (rounds x agents as plain HTML: untrusted notebooks strip script, SVG and style),
`pick_examples`, and a run's page on request (`python -m acemad_utils.report.viewer default/main`), whose script
filters the rows and inflates a method's base64 zlib JSON block of fragments when first opened."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import zlib
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


def source_of(record: dict, meta: Optional[dict] = None) -> str:
    """SYNTHETIC_LABEL for the simulated population, else 'model: <name>' (the run's, else the record's agents')."""
    pop = (meta or {}).get("population") or {}
    if pop.get("synthetic", (meta or record).get("synthetic")):
        return SYNTHETIC_LABEL
    models = {e.get("model") for r in record.get("rounds") or [record.get("runs") or []] for e in r} - {None}
    return f"model: {(meta or {}).get('model') or pop.get('model') or ', '.join(sorted(models)) or 'unknown'}"


def _round_answers(rounds: list, labels: list, keys: np.ndarray, acemad: bool, *, exponent: float) -> list:
    """(plurality label, weighted label) of every round, None where no commitment parsed."""
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


def esc(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def bar(x: float, width: int = BAR_WIDTH) -> str:
    """x in [0, 1] as `width` characters of block glyphs in eighth steps, padded with spaces."""
    n = max(0, min(width * 8, math.floor(float(x) * width * 8 + 0.5)))
    return ("█" * (n // 8) + _EIGHTHS[n % 8].strip()).ljust(width)


def _mark(label, answer) -> str:
    if label is None:
        return '<span class="ad-bad">none</span>'
    if answer is None:  # no gold answer: neither right nor wrong
        return f"<span>{esc(label)}</span>"
    cls, sym = ("ad-ok", "✓") if label == answer else ("ad-bad", "✗")
    return f'<span class="{cls}">{esc(label)} {sym}</span>'


def _r4(x: float) -> float:
    return round(float(x), 4) + 0.0  # the stored precision; + 0.0 prints -0.0 as 0.0


def _num(x: float) -> str:
    text = f"{x:.2f}"  # '.07', '.80', '1.0': three characters, so five agents' bars fit side by side
    return "1.0" if text == "1.00" else text[1:]


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
    p, q, pf = [_r4(x) for x in e["p"]], e.get("q"), bool(e.get("parse_failure"))
    q = None if q is None else [_r4(x) for x in q]
    top = _mark(labels[max(range(len(p)), key=e["p"].__getitem__)], answer)  # the first maximum (argmax)
    stance = '<span class="ad-badge">parse failure</span>' if pf else f'<span class="ad-stance">{top}</span>'
    who = " · ".join(str(x) for x in (e.get("persona"), e.get("model"), f"T={e.get('temperature')}") if x)
    sw = ""
    if e.get("score") is not None:
        score, w = _r4(e["score"]), _r4(e["weight"])
        sw = f'<div class="ad-sw">score {score:.3f} · weight {w:.3f} {bar(w).rstrip()}</div>'
    return (
        f'<td class="{cls}{" ad-pf" if pf else ""}" data-round="{t}" data-agent="{esc(e.get("agent"))}">'
        f'<div class="ad-who">{esc(who)}</div>{stance}'
        f"{_bars(p, q, labels, answer)}{sw}{_argument(str(e.get('message') or ''), fold)}</td>"
    )


def debate_html(record: dict, meta: Optional[dict] = None, *, fold: bool = False) -> str:
    """One record as a fragment; `fold`: long arguments in <details> (the page), else their first CLIP characters."""
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
    source, q = source_of(record, meta), record.get("question")
    if "question" not in record and (meta or {}).get("experiment"):  # else its run's questions.json
        q = read_questions(run_dir(meta["experiment"], create=False)).get(record["question_id"])  # type: ignore[index]
    if isinstance(c, float):  # a Single Agent record: the share of its runs that were right
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
        opts = "".join(f"<li><b>{esc(k)}.</b> {esc(v)}{' ✓' if k == answer else ''}</li>" for k, v in q["options"])
        out += f'<div class="ad-question">{syn}<b>Q:</b> {esc(q["text"])}<ul>{opts}</ul></div>'
    if not ok:
        return out + f'<div class="ad-err">status {esc(record["status"])}: {esc(record.get("error", ""))}</div></div>'
    # Name the weighted column by what decides: AceMAD's weights, or a mean belief that may not be the decision.
    plurality = kind in ("majority", "self_consistency") or params.get("mad_aggregator") == "plurality"
    name = {"acemad": "weighted (AceMAD weights)", "centralized": "mean belief (the moderator decides)"}.get(
        kind, "mean belief (plurality decides)" if plurality else "mean belief"
    )
    mods = {m.get("round"): m for m in record.get("moderator") or []}
    keys = B.tiebreak_keys(int(params.get("seed", 0)), [record["question_id"]], len(labels))[0]
    exponent = float(params.get("weight_exponent", WEIGHT_EXPONENT))
    head = "".join(f"<td><b>{unit} {i + 1}</b></td>" for i in range(n))
    head += ("<td><b>moderator</b></td>" if mods else "") + "<td><b>plurality</b></td>"
    head += "" if unit == "run" else f"<td><b>{esc(name)}</b></td>"
    rows, answers = [], _round_answers(raw, labels, keys, kind == "acemad", exponent=exponent)
    for t, (entries, (plur, weighted)) in enumerate(zip(raw, answers), 1):
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


# The page's style (the notebook fragment needs none) and script.
CSS = """
body{font:13px/1.35 system-ui,sans-serif;margin:12px;color:#1f2328}
.banner,.ad-src{padding:1px 6px;border-radius:3px;background:#ddf4ff;font-weight:600}
.ad-syn{background:#fff3cd;border:1px solid #e0c36a}
.wrap{display:flex;gap:12px;align-items:flex-start;margin-top:8px}
#list{flex:0 0 430px;max-height:85vh;overflow:auto;border:1px solid #d0d7de}
#list td,#list th{padding:2px 6px;border-bottom:1px solid #eaeef2;text-align:left;font-size:12px;cursor:pointer}
#list tr.sel{background:#ddf4ff}
table{border-collapse:collapse}
.acemad-debate td{border:1px solid #d0d7de;padding:4px 6px;vertical-align:top;width:150px}
td.ad-mod{background:#f5f3ff}
td.ad-pf{background:#fff0f0;border:2px dashed #cf222e}
.ad-who,.ad-legend{font-size:11px;color:#57606a}
.ad-ok,pre.ad-bars b{color:#1a7f37;font-weight:700}
.ad-bad{color:#cf222e;font-weight:700}
pre.ad-bars{font:11px/1.2 ui-monospace,monospace;margin:3px 0}
.ad-short,.ad-msg,.ad-err{font-size:12px;white-space:pre-wrap;max-height:16em;overflow:auto}
.ad-question,.ad-short,.ad-msg,.ad-err,summary,#list td{overflow-wrap:anywhere}
#list tr:focus{outline:2px solid #0969da}
"""
_JS = r"""
const $ = id => document.getElementById(id), pane = $('debate'), rows = [...document.querySelectorAll('tr[data-k]')];
const parts = {};
function part(m){
  if (!parts[m]) {
    const bytes = Uint8Array.from(atob($('acemad-part-' + m).textContent.trim()), c => c.charCodeAt(0));
    parts[m] = new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'))).json();
  }
  return parts[m];
}
let opened = 0;
$('list').addEventListener('click', e => open(e.target.closest('tr[data-k]')));
// Enter or Space opens the focused row; the arrows open the next or previous row shown
$('list').addEventListener('keydown', e => {
  const tr = e.target.closest('tr[data-k]'), shown = rows.filter(r => !r.hidden);
  if (!tr) return;
  const step = {ArrowDown: 1, ArrowUp: -1}[e.key];
  if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); open(tr); }
  else if (step) {
    const next = shown[shown.indexOf(tr) + step];
    if (next) { e.preventDefault(); next.focus(); open(next); }
  }
});
function open(tr){
  const ticket = ++opened;
  if (tr) part(tr.dataset.m).then(html => {
    if (ticket !== opened) return;  // another row was clicked meanwhile
    pane.innerHTML = html[tr.dataset.k];
    rows.forEach(r => r.classList.toggle('sel', r === tr));
  }, err => { pane.textContent = 'cannot read this method\'s debates: ' + err; });
}
function filter(){  // a record without a gold answer is neither correct nor wrong
  const [m, b, o, s] = ['f-method', 'f-bench', 'f-outcome', 'f-q'].map(id => $(id).value.trim().toLowerCase());
  rows.forEach(tr => {
    const d = tr.dataset;
    tr.hidden = (m && d.m !== m) || (b && d.b !== b) || (o && d.o !== o) ||
      !tr.cells[0].textContent.toLowerCase().includes(s);
  });
  $('count').textContent = rows.filter(tr => !tr.hidden).length + ' of ' + rows.length + ' records';
}
document.querySelectorAll('select, input').forEach(el => el.addEventListener('input', filter));
filter();
"""


def page_path(experiment: str) -> Path:
    """outputs/viewer/<experiment>.html, a "/" making subfolders as under outputs/runs/."""
    parts = Path(experiment).parts
    if not parts or Path(experiment).is_absolute() or any(p in ("..", ".") for p in parts):
        raise ValueError(f"experiment must be a relative run name like 'default/main', got {experiment!r}")
    return outputs("viewer", *parts[:-1]) / f"{parts[-1]}.html"


def page_link(experiment: str):
    """The command that writes a run's page and a link to it (not built: the output stays machine-free)."""
    from IPython.display import Markdown

    rel = page_path(experiment).resolve().relative_to(root()).as_posix()
    return Markdown(
        f"Every debate of this run: `.venv/bin/python -m acemad_utils.report.viewer {experiment}` writes "
        f"[{rel}](../{rel}) (not built by `make reproduce`: the link works once the command ran; a self-contained "
        "page: open it in a browser; JupyterLab shows it without its script until you click *Trust HTML*)."
    )


_CODE = [Path(__file__), Path(B.__file__)]  # what draws a page: a change rebuilds every page


def write_run_page(experiment: str, *, loaded: Optional[tuple[dict, list[dict]]] = None) -> Path:
    """The page of outputs/runs/<experiment>/ (`loaded`: its (meta, records)), rebuilt only when its sources changed."""
    d, h = run_dir(experiment, create=False), hashlib.sha256()
    if loaded is None and not (d / "meta.json").is_file():
        raise FileNotFoundError(f"no run {experiment!r}: {d} holds no meta.json (a run's name is <profile>/<notebook's "
                                "run>, e.g. default/main, once make reproduce has made it)")  # fmt: skip
    path = page_path(experiment)
    for src in [d / "meta.json", d / QUESTIONS, *transcript_files(d / TRANSCRIPTS), *_CODE]:  # what the page shows
        if src.exists():
            h.update(src.name.encode() + b"\0" + src.read_bytes())
    stamp = h.hexdigest()
    if path.is_file():
        with path.open("rb") as f:  # the stamp is in the page's head
            if f'<meta name="acemad-stamp" content="{stamp}">'.encode() in f.read(4096):
                return path
    meta, records = loaded if loaded is not None else load_run(experiment)
    if not records:
        raise ValueError(f"run {experiment!r} has no transcript records for the methods in its meta.json")
    order = {m: i for i, m in enumerate(meta.get("methods", {}))}
    records = sorted(records, key=lambda r: (order.get(r["method"], len(order)), r["question_id"], r.get("repeat", 0)))
    methods = list(dict.fromkeys(r["method"] for r in records))
    benchmarks = sorted({r.get("benchmark", "") for r in records})
    questions = read_questions(d)
    parts: list[list[str]] = [[] for _ in methods]
    rows = []
    for r in records:
        m, c, status = methods.index(r["method"]), r["final"].get("correct"), r.get("status", "ok")
        parts[m].append(debate_html({"question": questions.get(r["question_id"]), **r}, meta, fold=True))
        k = len(parts[m]) - 1
        o = "" if c is None else str(int(c > 0.5))  # a Single Agent record (a mean over runs): over half right
        right = {"": "<td>–", "1": '<td class="ad-ok">✓', "0": '<td class="ad-bad">✗'}[o]
        right = right if status == "ok" else f'<td class="ad-bad">{esc(status)}'
        rows.append(
            f'<tr tabindex="0" data-m="{m}" data-b="{benchmarks.index(r.get("benchmark", ""))}" data-o="{o}" '
            f'data-k="{k}">'
            f"<td>{esc(r['question_id'])}<td>{esc(r['method'])}{right}"  # end tags are optional: 10^4 rows
        )
    source, n, nq = source_of(records[0], meta), len(records), len({r["question_id"] for r in records})
    syn = " ad-syn" if source == SYNTHETIC_LABEL else ""
    options = [
        "".join(f'<option value="{i}">{esc(x)}</option>' for i, x in enumerate(xs)) for xs in (methods, benchmarks)
    ]
    blocks = "\n".join(
        f'<script type="application/octet-stream" id="acemad-part-{m}">'
        f"{base64.b64encode(zlib.compress(json.dumps(fs, ensure_ascii=False).encode(), 6)).decode()}</script>"
        for m, fs in enumerate(parts)
    )
    listed = "\n".join(rows)
    fractional = sorted({r["method"] for r in records if r["final"].get("correct") not in (None, True, False, 0, 1)})
    shares = (f'<p class="ad-legend">{esc(", ".join(fractional))}: a record is the share of its runs that were right; '
              "✓ and the outcome filter's <i>correct</i> mean more than half were, while the accuracy table counts the "
              "share itself</p>") if fractional else ""  # fmt: skip
    atomic_write(
        path,
        f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(f"acemad debates: {experiment}")}</title>
<meta name="acemad-stamp" content="{stamp}">
<style>{CSS}</style></head><body>
<h1>Debates of run <code>{esc(experiment)}</code></h1>
<span class="banner{syn}">{esc(source)}</span> · {n} records · {nq} questions · methods: {esc(", ".join(methods))}
<p><label>method <select id="f-method"><option value="">all</option>{options[0]}</select></label>
<label>benchmark <select id="f-bench"><option value="">all</option>{options[1]}</select></label>
<label>outcome <select id="f-outcome"><option value="">all</option><option value="1">correct</option>
<option value="0">wrong</option></select></label> <label>question <input id="f-q" placeholder="id contains…"></label>
<span id="count"></span></p>
{shares}<div class="wrap"><div id="list"><table><tr><th>question</th><th>method</th><th>right?</th></tr>
{listed}</table></div><div id="debate"><p>Click a question on the left to open its debate.</p></div></div>
{blocks}
<script>{_JS}</script>
</body></html>
""",
    )
    return path


if __name__ == "__main__":
    import sys

    usage = "usage: python -m acemad_utils.report.viewer <run>   (e.g. default/main): write the run's debate page"
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(usage)
    try:
        print(write_run_page(sys.argv[1]))
    except (FileNotFoundError, ValueError) as e:  # a run not made, a bad name, a damaged file: one line
        sys.exit(f"error: {e}")
