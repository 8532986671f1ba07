"""A debate as a self-contained HTML fragment (inline CSS and SVG, no JavaScript, no network).

    from acemad_utils.report.viewer_html import debate_html, show
    html = debate_html(record, meta)      # root div.acemad-debate, one td.acemad-cell per agent and round
    show(record, meta)                    # the same as an IPython HTML object (inline in Jupyter)

The run page's JS (`viewer_page._JS`) mirrors this markup and these classes, so a notebook and the page
show the same thing; `fixed` rounds like JavaScript's toFixed for that reason.
"""

from __future__ import annotations

import html
from decimal import ROUND_HALF_UP, Decimal
from typing import Optional

from acemad_utils.protocol.schema import SYNTHETIC_LABEL
from acemad_utils.report.viewer_model import view

LEGEND = (
    "Bars: an agent's belief p and its prediction q of its peers' beliefs over the options; green = the "
    "correct option. ✓/✗ = the answer is / is not the correct one. Click an argument to unfold it."
)

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
.acemad-debate .ad-bars{display:flex;gap:10px;margin:3px 0}
.acemad-debate .ad-bars figure{margin:0}
.acemad-debate .ad-bars figcaption{font-size:10px;color:#57606a}
.acemad-debate .ad-sw{font-size:11px;color:#333}
.acemad-debate .ad-w{display:inline-block;height:6px;background:#6f42c1;vertical-align:middle;margin-left:4px}
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
    """x with `digits` decimals, rounded like JavaScript's toFixed (exact binary value, ties away from zero),
    so the page's JS renderer prints the same digits as this one."""
    return str(Decimal(float(x) + 0.0).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))  # -0.0 -> 0.0


def _mark(label, answer) -> str:
    if label is None:
        return '<span class="ad-bad">none</span>'
    cls, sym = ("ad-ok", "✓") if label == answer else ("ad-bad", "✗")
    return f'<span class="{cls}">{esc(label)} {sym}</span>'


def _bars(dist, labels, answer, title) -> str:
    """A tiny SVG bar chart of one distribution over the options; the correct option's bar is green."""
    bw, gap, h = 11, 3, 28
    bold = ' font-weight="bold"'
    width = len(labels) * (bw + gap)
    out = [f'<svg width="{width}" height="{h + 11}" role="img" aria-label="{esc(title)}">']
    for k, (lab, x) in enumerate(zip(labels, dist)):
        bh = max(1.0, float(x) * h)
        fill = "#2da44e" if lab == answer else "#8c959f"
        out.append(
            f'<rect x="{k * (bw + gap)}" y="{h - bh:.1f}" width="{bw}" height="{bh:.1f}" fill="{fill}">'
            f"<title>{esc(title)} {esc(lab)}: {fixed(x, 2)}</title></rect>"
            f'<text x="{k * (bw + gap) + bw / 2}" y="{h + 10}" font-size="9" text-anchor="middle"'
            f"{bold if lab == answer else ''}>{esc(lab)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _cell_html(c: dict, v: dict, cls: str, t: int) -> str:
    labels, answer = v["labels"], v["answer"]
    head = f'<div class="ad-who">{esc(c["who"])}</div>'
    stance = (
        '<span class="ad-badge">parse failure</span>'
        if c["pf"]
        else f'<span class="ad-stance">{_mark(c["stance"], answer)}</span>'
    )
    bars = f"<figure>{_bars(c['p'], labels, answer, 'p')}<figcaption>p: belief</figcaption></figure>"
    if c["q"] is not None:
        bars += f"<figure>{_bars(c['q'], labels, answer, 'q')}<figcaption>q: peers</figcaption></figure>"
    sw = ""
    if c["score"] is not None:
        sw = (
            f'<div class="ad-sw">score {fixed(c["score"], 3)} · weight {fixed(c["weight"], 3)}'
            f'<span class="ad-w" style="width:{max(1, round(c["weight"] * 60))}px"></span></div>'
        )
    msg = c["msg"]
    if len(msg) <= 60:  # short enough to show whole; longer arguments fold behind their first words
        text = f'<div class="ad-short">{esc(msg) or "(no argument)"}</div>'
    else:
        text = f'<details><summary>{esc(msg[:57])}…</summary><div class="ad-msg">{esc(msg)}</div></details>'
    return (
        f'<td class="{cls}{" ad-pf" if c["pf"] else ""}" data-round="{t}" data-agent="{esc(c["agent"])}">'
        f'{head}{stance}<div class="ad-bars">{bars}</div>{sw}{text}</td>'
    )


def _head_html(v: dict) -> str:
    syn = " ad-syn" if v["source"] == SYNTHETIC_LABEL else ""
    c = v["correct"]
    if isinstance(c, float) and not isinstance(c, bool):
        outcome = f"runs correct: <b>{c:.0%}</b>"
    else:
        outcome = f"final answer {_mark(v['final'], v['answer'])}"
    return (
        f'<div class="ad-head"><span class="ad-src{syn}">{esc(v["source"])}</span> '
        f"<b>{esc(v['method'])}</b> · {esc(v['qid'])} ({esc(v['benchmark'])}, repeat {esc(v['repeat'])}) · "
        f'correct answer <span class="ad-ok acemad-answer">{esc(v["answer"])}</span> · {outcome}</div>'
    )


def debate_html(record: dict, meta: Optional[dict] = None) -> str:
    """One record as a self-contained HTML fragment: root `div.acemad-debate` with data-agents / data-rounds;
    one `td.acemad-cell` per agent and round."""
    v = view(record, meta)
    n = len(v["rounds"][0]["cells"]) if v["rounds"] else 0
    root = (
        f'<div class="acemad-debate" data-agents="{n}" data-rounds="{len(v["rounds"])}" '
        f'data-method="{esc(v["method"])}" data-question="{esc(v["qid"])}"><style>{CSS}</style>{_head_html(v)}'
    )
    if v["status"] != "ok":
        return root + f'<div class="ad-err">status {esc(v["status"])}: {esc(v["error"])}</div></div>'
    unit = v["unit"]
    has_mod = any(r["moderator"] for r in v["rounds"])
    head = "".join(f"<th>{unit} {i + 1}</th>" for i in range(n))
    head += "<th>moderator</th>" if has_mod else ""
    head += "<th>plurality</th>" + ("" if unit == "run" else f"<th>{esc(v['weighted_name'])}</th>")
    rows = []
    for r in v["rounds"]:
        cells = "".join(_cell_html(c, v, "acemad-cell", r["t"]) for c in r["cells"])
        if has_mod:
            cells += _cell_html(r["moderator"], v, "ad-mod", r["t"]) if r["moderator"] else "<td></td>"
        cells += f'<td class="ad-plur">{_mark(r["plurality"], v["answer"])}</td>'
        if unit != "run":
            cells += f'<td class="ad-weighted">{_mark(r["weighted"], v["answer"])}</td>'
        rows.append(f"<tr><th>{'runs' if unit == 'run' else 'round ' + str(r['t'])}</th>{cells}</tr>")
    legend = f'<div class="ad-legend">{esc(LEGEND)}</div>'
    return root + f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>{legend}</div>"


def show(record: dict, meta: Optional[dict] = None):
    """The debate view for Jupyter: an IPython.display.HTML (rendered inline when it is a cell's value)."""
    from IPython.display import HTML

    return HTML(debate_html(record, meta))
