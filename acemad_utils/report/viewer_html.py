"""A debate as a self-contained HTML fragment that needs no script, no SVG and no style element.

    from acemad_utils.report.viewer_html import debate_html, show
    html = debate_html(record, meta)      # root div.acemad-debate, one td.acemad-cell per agent and round
    show(record, meta)                    # the same as an IPython HTML object (inline in Jupyter)

Why plain HTML: a notebook is read untrusted (JupyterLab straight after a clone), through a code host's renderer
and through nbconvert's sanitizer, and each strips <style>, <svg> and scripts. So the fragment uses only tags all
three keep (div, span, b, i, pre, table, tr, td, ul, li; class, id, data-*) and draws the bars as text: one
line per option in a <pre>, block characters in 1/8 steps and the number, the correct option's line bold and
starred. The run page (viewer.write_run_page) embeds these same fragments (`fold=True`) with its CSS.
"""

from __future__ import annotations

import html
import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Optional

from acemad_utils.protocol.schema import SYNTHETIC_LABEL
from acemad_utils.report.viewer_model import view

LEGEND = (
    "Bars: an agent's belief p and its prediction q of its peers' beliefs, one line per option (a full bar is "
    "probability 1); the correct option's line is bold and starred (*). ✓/✗ after an answer: it is / is not the "
    "correct one."
)
BAR_WIDTH = 3  # characters of a full bar (probability 1); eighth blocks give 24 steps. Narrow, so five agents fit
# side by side at notebook width without the <pre> wrapping
SHORT = 60  # an argument this long or shorter is shown whole; a longer one is cut (notebook) or folded (page)
CLIP = 200  # how much of a long argument the notebook shows (the run page has it whole)
_EIGHTHS = " ▏▎▍▌▋▊▉"

# The run page's style (in the page's head, viewer.write_run_page); the notebook fragment needs none.
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


def esc(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def fixed(x: float, digits: int) -> str:
    """x with `digits` decimals, ties away from zero on the exact binary value (as printed since the first pages)."""
    return str(Decimal(float(x) + 0.0).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))  # -0.0 -> 0.0


def _mark(label, answer) -> str:
    if label is None:
        return '<span class="ad-bad">none</span>'
    if answer is None:  # no gold answer: the label, neither right nor wrong
        return f"<span>{esc(label)}</span>"
    cls, sym = ("ad-ok", "✓") if label == answer else ("ad-bad", "✗")
    return f'<span class="{cls}">{esc(label)} {sym}</span>'


def bar(x: float, width: int = BAR_WIDTH) -> str:
    """x in [0, 1] as `width` characters of block glyphs in eighth steps, padded with spaces."""
    n = max(0, min(width * 8, math.floor(float(x) * width * 8 + 0.5)))  # half up
    return ("█" * (n // 8) + _EIGHTHS[n % 8].strip()).ljust(width)


def num(x: float) -> str:
    """A probability in three characters: '.07', '.80', '1.0' (so five agents' bars fit side by side)."""
    text = fixed(x, 2)
    return "1.0" if text == "1.00" else text[1:]


def _bars(p, q, labels, answer) -> str:
    """One line per option: the label, p's bar and number, and q's (when the agent predicted its peers)."""
    # Every line as wide as the others and none ending in a space: renderers that right-align table cells
    # (JupyterLab, nbconvert) then keep the columns; "p" and "q" stand over the last digit of their numbers. The
    # mark is ASCII: a check mark from a fallback font is wider than a monospace cell and shifts its line.
    width = max(len(str(lab)) for lab in labels)
    lines = [" " * (width + BAR_WIDTH + 5) + "p" + (" " * (BAR_WIDTH + 4) + "q" if q is not None else "")]
    for k, lab in enumerate(labels):
        line = f"{'*' if lab == answer else ' '}{esc(str(lab).ljust(width))} {bar(p[k])} {num(p[k])}"
        if q is not None:
            line += f" {bar(q[k])} {num(q[k])}"
        lines.append(f"<b>{line}</b>" if lab == answer else line)
    # No-break spaces: JupyterLab wraps a <pre> (white-space: pre-wrap), so in a 1,000-px notebook the table shrank
    # each agent's cell and broke its q onto a second line; unbreakable, a bar line keeps its cell wide enough and
    # the arguments wrap instead.
    return '<pre class="ad-bars">' + "\n".join(lines).replace(" ", "\u00a0") + "</pre>"


def _argument(msg: str, fold: bool) -> str:
    if len(msg) <= SHORT:
        return f'<div class="ad-short">{esc(msg) or "(no argument)"}</div>'
    if fold:
        return f'<details><summary>{esc(msg[: SHORT - 3])}…</summary><div class="ad-msg">{esc(msg)}</div></details>'
    cut = msg if len(msg) <= CLIP else msg[: CLIP - 1] + "…"
    return f'<div class="ad-msg">{esc(cut)}</div>'


def _cell_html(c: dict, v: dict, cls: str, t: int, fold: bool) -> str:
    labels, answer = v["labels"], v["answer"]
    stance = (
        '<span class="ad-badge">parse failure</span>'
        if c["pf"]
        else f'<span class="ad-stance">{_mark(c["stance"], answer)}</span>'
    )
    sw = ""
    if c["score"] is not None:
        w = fixed(c["weight"], 3)
        sw = f'<div class="ad-sw">score {fixed(c["score"], 3)} · weight {w} {bar(c["weight"]).rstrip()}</div>'
    return (
        f'<td class="{cls}{" ad-pf" if c["pf"] else ""}" data-round="{t}" data-agent="{esc(c["agent"])}">'
        f'<div class="ad-who">{esc(c["who"])}</div>{stance}{_bars(c["p"], c["q"], labels, answer)}{sw}'
        f"{_argument(c['msg'], fold)}</td>"
    )


def _head_html(v: dict) -> str:
    syn = " ad-syn" if v["source"] == SYNTHETIC_LABEL else ""
    c = v["correct"]
    if isinstance(c, float) and not isinstance(c, bool):
        outcome = f"runs correct: <b>{c:.0%}</b>"
    else:
        outcome = f"final answer {_mark(v['final'], v['answer'])}"
    return (
        f'<div class="ad-head"><b class="ad-src{syn}">[{esc(v["source"])}]</b> '
        f"<b>{esc(v['method'])}</b> · {esc(v['qid'])} ({esc(v['benchmark'])}, repeat {esc(v['repeat'])}) · "
        + (
            "no gold answer"
            if v["answer"] is None
            else f'correct answer <b class="ad-ok acemad-answer">{esc(v["answer"])}</b>'
        )
        + f" · {outcome}</div>"
    )


def _question_html(v: dict) -> str:
    """The question and its options above the debate, escaped; a synthetic item says its text is generated."""
    q = v.get("question")
    if not q:
        return '<div class="ad-question"><i>(the question text is not recorded in this run)</i></div>'
    kind = "<i>Synthetic item (generated text, not a benchmark question):</i> " if q.get("synthetic") else ""
    opts = "".join(
        f"<li><b>{esc(lab)}.</b> {esc(text)}{' ✓' if lab == v['answer'] else ''}</li>" for lab, text in q["options"]
    )
    return f'<div class="ad-question">{kind}<b>Q:</b> {esc(q["text"])}<ul>{opts}</ul></div>'


def debate_html(record: dict, meta: Optional[dict] = None, *, fold: bool = False) -> str:
    """One record as a self-contained HTML fragment: root `div.acemad-debate` with data-agents / data-rounds;
    one `td.acemad-cell` per agent and round. `fold`: long arguments in <details> (the run page's markup; a
    notebook shows the first CLIP characters instead, as sanitizers drop <details>)."""
    return view_html(view(record, meta), fold=fold)


def view_html(v: dict, *, fold: bool = False) -> str:
    """debate_html of a record's view (viewer_model.view)."""
    n = len(v["rounds"][0]["cells"]) if v["rounds"] else 0
    root = (
        f'<div class="acemad-debate" data-agents="{n}" data-rounds="{len(v["rounds"])}" '
        f'data-method="{esc(v["method"])}" data-question="{esc(v["qid"])}">{_head_html(v)}{_question_html(v)}'
    )
    if v["status"] != "ok":
        return root + f'<div class="ad-err">status {esc(v["status"])}: {esc(v["error"])}</div></div>'
    unit = v["unit"]
    has_mod = any(r["moderator"] for r in v["rounds"])
    head = "".join(f"<td><b>{unit} {i + 1}</b></td>" for i in range(n))
    head += "<td><b>moderator</b></td>" if has_mod else ""
    head += "<td><b>plurality</b></td>" + ("" if unit == "run" else f"<td><b>{esc(v['weighted_name'])}</b></td>")
    rows = []
    for r in v["rounds"]:
        cells = "".join(_cell_html(c, v, "acemad-cell", r["t"], fold) for c in r["cells"])
        if has_mod:
            cells += _cell_html(r["moderator"], v, "ad-mod", r["t"], fold) if r["moderator"] else "<td></td>"
        cells += f'<td class="ad-plur">{_mark(r["plurality"], v["answer"])}</td>'
        if unit != "run":
            cells += f'<td class="ad-weighted">{_mark(r["weighted"], v["answer"])}</td>'
        rows.append(f"<tr><td><b>{'runs' if unit == 'run' else 'round ' + str(r['t'])}</b></td>{cells}</tr>")
    legend = f'<div class="ad-legend">{esc(LEGEND)}</div>'
    return root + f"<table><tr><td></td>{head}</tr>{''.join(rows)}</table>{legend}</div>"


def show(record: dict, meta: Optional[dict] = None):
    """The debate view for Jupyter: an IPython.display.HTML (rendered inline when it is a cell's value)."""
    from IPython.display import HTML

    return HTML(debate_html(record, meta))  # the notebook's markup (no <details>: sanitizers drop it)
