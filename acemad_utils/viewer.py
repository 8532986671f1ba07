"""Read a debate: one transcript record as rounds x agents, and one static HTML page per run.

    from acemad_utils import viewer as V
    V.show(record)                                   # inline in Jupyter (an IPython HTML object)
    html = V.debate_html(record, meta)               # the same view as a self-contained HTML fragment
    ex = V.pick_examples(records, "AceMAD (T=3)")    # {"overturned": [...], "not_overturned": [...]}
    V.write_run_page("default/main")                 # -> outputs/viewer/default/main.html
    python -m acemad_utils.viewer default/main       # the same from a shell

Each agent cell shows its argument (folded), its belief p and peer prediction q as small bars (the correct
option's bar is green), and for AceMAD its round score and its weight after that round. Each round row ends
with the plurality answer (one vote per agent whose commitment parsed) and the weighted answer: AceMAD's
sum_i w_i^k p_i with the weights after that round (k = the method's weight_exponent, so the last round's is the
method's decision), or the mean belief of the parsing agents for the other debates. Single Agent records
show their independent runs as the "agents" of one round; Centralized MAD adds the moderator's summary.

Everything is inline HTML/CSS/SVG: no JavaScript library, no font, no network. The run page embeds one
compact view per record as JSON and renders the clicked one with the few lines of vanilla JS below, which
mirror `debate_html` (same markup, same classes) so a notebook and the page show the same thing.
"""
from __future__ import annotations

import html
import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Optional

import numpy as np

from . import beliefs as B
from .paths import atomic_write, outputs

SYNTHETIC = "SYNTHETIC population (no LLM)"


# ----------------------------------------------------------------------------- the view model
def source_of(record: dict, meta: Optional[dict] = None) -> str:
    """Where the record comes from: SYNTHETIC for the simulated population, else the model's name."""
    if meta is not None:
        pop = meta.get("population") or {}
        if pop.get("synthetic", meta.get("synthetic")):
            return SYNTHETIC
        return f"model: {meta.get('model') or pop.get('model') or 'unknown'}"
    if record.get("synthetic"):
        return SYNTHETIC
    models = {e.get("model") for r in record.get("rounds") or [record.get("runs") or []] for e in r} - {None}
    return f"model: {', '.join(sorted(models))}" if models else "model: (not recorded; pass the run's meta)"


def _method_params(record: dict, meta: Optional[dict]) -> dict:
    return ((meta or {}).get("methods") or {}).get(record.get("method"), {})


def _cell(e: dict, labels: list) -> dict:
    p = np.asarray(e["p"], dtype=float)
    pf = bool(e.get("parse_failure"))
    return {
        "agent": e.get("agent"),
        "who": " · ".join(str(x) for x in (e.get("persona"), e.get("model"), f"T={e.get('temperature')}")
                          if x not in (None, "")),
        "stance": None if pf else labels[int(p.argmax())],
        "p": [round(float(x), 4) for x in p],
        "q": None if e.get("q") is None else [round(float(x), 4) for x in e["q"]],
        "score": None if e.get("score") is None else round(float(e["score"]), 4),
        "weight": None if e.get("weight") is None else round(float(e["weight"]), 4),
        "pf": pf,
        "msg": str(e.get("message") or ""),
    }


def _round_answers(entries: list, labels: list, keys: np.ndarray, acemad: bool, exponent: float):
    """(plurality label, weighted label) of one round; None where no agent's commitment parsed."""
    P = np.stack([np.asarray(e["p"], dtype=float) for e in entries])
    valid = np.array([not e.get("parse_failure") for e in entries])
    plur = int(B.plurality(B.votes(P, valid), len(labels), keys))
    if not valid.any():
        return None, None
    if acemad:  # the weights after this round, as the final decision uses them after the last round
        w = np.array([e.get("weight", 0.0) for e in entries], dtype=float)
    else:  # uniform weights over the agents whose commitment parsed (the engine's mean_belief aggregator)
        w, exponent = np.ones(len(entries)), 1.0
    weighted = int(B.weighted_decision(P, w, valid, exponent, keys)[0])
    return (labels[plur] if plur >= 0 else None), labels[weighted]


def view(record: dict, meta: Optional[dict] = None) -> dict:
    """The compact, JSON-able view of one record that both renderers (Python and the page's JS) draw."""
    for key in ("question_id", "method", "labels", "answer", "final"):
        if key not in record:
            raise ValueError(f"not a transcript record: missing {key!r} (keys: {sorted(record)})")
    labels = list(record["labels"])
    params = _method_params(record, meta)
    kind = record.get("method_kind") or params.get("method")
    keys = B.tiebreak_keys(int(params.get("seed", 0)), [record["question_id"]], len(labels))[0]
    final = record["final"]
    v = {
        "qid": record["question_id"], "benchmark": record.get("benchmark", ""), "method": record["method"],
        "kind": kind, "repeat": record.get("repeat", 0), "labels": labels, "answer": record["answer"],
        "status": record.get("status", "ok"), "error": record.get("error", ""),
        "final": final.get("answer"), "correct": final.get("correct"), "source": source_of(record, meta),
        "unit": "agent", "rounds": [],
    }
    if v["status"] != "ok":
        return v
    if kind == "single" or "runs" in record:
        v["unit"] = "run"
        raw = [record.get("runs") or []]
    else:
        raw = record.get("rounds") or []
    mods = {m.get("round"): m for m in record.get("moderator") or []}
    for t, entries in enumerate(raw, start=1):
        plur, weighted = _round_answers(entries, labels, keys, kind == "acemad", float(params.get("weight_exponent", 2.0)))
        v["rounds"].append({
            "t": t, "cells": [_cell(e, labels) for e in entries], "plurality": plur,
            "weighted": None if v["unit"] == "run" else weighted,
            "moderator": _cell(mods[t], labels) if t in mods else None,
        })
    # Name the weighted column by what decides: AceMAD's weights, or a mean belief that may not be the decision.
    if kind == "acemad":
        v["weighted_name"] = "weighted (AceMAD weights)"
    elif kind == "centralized":
        v["weighted_name"] = "mean belief (the moderator decides)"
    elif kind == "majority" or params.get("mad_aggregator") == "plurality":
        v["weighted_name"] = "mean belief (plurality decides)"
    else:
        v["weighted_name"] = "mean belief"
    return v


def is_correct(v: dict) -> bool:
    """A record's outcome for the page's filter; a Single Agent record (a mean over runs) counts as
    correct when more than half of its runs are."""
    c = v.get("correct")
    return bool(c > 0.5) if isinstance(c, float) and not isinstance(c, bool) else bool(c)


# ----------------------------------------------------------------------------- rendering (Python)
CSS = """
.acemad-debate{font:13px/1.35 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#1f2328;margin:6px 0 14px}
.acemad-debate .ad-head{margin:0 0 6px}
.acemad-debate .ad-src{display:inline-block;padding:1px 6px;border-radius:3px;background:#eef1f4;font-size:11px;font-weight:600}
.acemad-debate .ad-src.ad-syn{background:#fff3cd;color:#7a5b00;border:1px solid #e0c36a}
.acemad-debate table{border-collapse:collapse;table-layout:fixed}
.acemad-debate th,.acemad-debate td{border:1px solid #d0d7de!important;padding:4px 6px!important;vertical-align:top!important;
  text-align:left!important;line-height:1.3!important}
.acemad-debate tr,.acemad-debate tr:hover{background:#fff!important}
.acemad-debate th{background:#f6f8fa;font-weight:600;font-size:12px}
.acemad-debate td.acemad-cell,.acemad-debate td.ad-mod{width:150px}
.acemad-debate td.ad-mod{background:#f5f3ff}
.acemad-debate td.ad-pf{background:#fff0f0;border:2px dashed #cf222e}
.acemad-debate .ad-who{font-size:11px;color:#57606a}
.acemad-debate .ad-stance{font-weight:700}
.acemad-debate .ad-ok{color:#1a7f37;font-weight:700}
.acemad-debate .ad-bad{color:#cf222e;font-weight:700}
.acemad-debate .ad-badge{display:inline-block;background:#cf222e;color:#fff;border-radius:3px;padding:0 4px;font-size:11px}
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


def _esc(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _fixed(x: float, digits: int) -> str:
    """x with `digits` decimals, rounded like JavaScript's toFixed (exact binary value, ties away from zero),
    so the page's JS renderer prints the same digits as this one."""
    return str(Decimal(float(x) + 0.0).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))  # -0.0 -> 0.0


def _mark(label, answer) -> str:
    if label is None:
        return '<span class="ad-bad">none</span>'
    cls, sym = ("ad-ok", "✓") if label == answer else ("ad-bad", "✗")
    return f'<span class="{cls}">{_esc(label)} {sym}</span>'


def _bars(dist, labels, answer, title) -> str:
    """A tiny SVG bar chart of one distribution over the options; the correct option's bar is green."""
    bw, gap, h = 11, 3, 28
    bold = ' font-weight="bold"'
    width = len(labels) * (bw + gap)
    out = [f'<svg width="{width}" height="{h + 11}" role="img" aria-label="{_esc(title)}">']
    for k, (lab, x) in enumerate(zip(labels, dist)):
        bh = max(1.0, float(x) * h)
        fill = "#2da44e" if lab == answer else "#8c959f"
        out.append(f'<rect x="{k * (bw + gap)}" y="{h - bh:.1f}" width="{bw}" height="{bh:.1f}" fill="{fill}">'
                   f'<title>{_esc(title)} {_esc(lab)}: {_fixed(x, 2)}</title></rect>'
                   f'<text x="{k * (bw + gap) + bw / 2}" y="{h + 10}" font-size="9" text-anchor="middle"'
                   f'{bold if lab == answer else ""}>{_esc(lab)}</text>')
    out.append("</svg>")
    return "".join(out)


def _cell_html(c: dict, v: dict, cls: str, t: int) -> str:
    labels, answer = v["labels"], v["answer"]
    head = f'<div class="ad-who">{_esc(c["who"])}</div>'
    stance = '<span class="ad-badge">parse failure</span>' if c["pf"] else \
        f'<span class="ad-stance">{_mark(c["stance"], answer)}</span>'
    bars = f'<figure>{_bars(c["p"], labels, answer, "p")}<figcaption>p: belief</figcaption></figure>'
    if c["q"] is not None:
        bars += f'<figure>{_bars(c["q"], labels, answer, "q")}<figcaption>q: peers</figcaption></figure>'
    sw = ""
    if c["score"] is not None:
        sw = (f'<div class="ad-sw">score {_fixed(c["score"], 3)} · weight {_fixed(c["weight"], 3)}'
              f'<span class="ad-w" style="width:{max(1, round(c["weight"] * 60))}px"></span></div>')
    msg = c["msg"]
    if len(msg) <= 60:  # short enough to show whole; longer arguments fold behind their first words
        text = f'<div class="ad-short">{_esc(msg) or "(no argument)"}</div>'
    else:
        text = f'<details><summary>{_esc(msg[:57])}…</summary><div class="ad-msg">{_esc(msg)}</div></details>'
    return (f'<td class="{cls}{" ad-pf" if c["pf"] else ""}" data-round="{t}" data-agent="{_esc(c["agent"])}">'
            f'{head}{stance}<div class="ad-bars">{bars}</div>{sw}{text}</td>')


def _head_html(v: dict) -> str:
    syn = " ad-syn" if v["source"] == SYNTHETIC else ""
    c = v["correct"]
    if isinstance(c, float) and not isinstance(c, bool):
        outcome = f'runs correct: <b>{c:.0%}</b>'
    else:
        outcome = f'final answer {_mark(v["final"], v["answer"])}'
    return (f'<div class="ad-head"><span class="ad-src{syn}">{_esc(v["source"])}</span> '
            f'<b>{_esc(v["method"])}</b> · {_esc(v["qid"])} ({_esc(v["benchmark"])}, repeat {_esc(v["repeat"])}) · '
            f'correct answer <span class="ad-ok acemad-answer">{_esc(v["answer"])}</span> · {outcome}</div>')


def debate_html(record: dict, meta: Optional[dict] = None) -> str:
    """One record as a self-contained HTML fragment: root `div.acemad-debate` with data-agents / data-rounds;
    one `td.acemad-cell` per agent and round."""
    v = view(record, meta)
    n = len(v["rounds"][0]["cells"]) if v["rounds"] else 0
    root = (f'<div class="acemad-debate" data-agents="{n}" data-rounds="{len(v["rounds"])}" '
            f'data-method="{_esc(v["method"])}" data-question="{_esc(v["qid"])}"><style>{CSS}</style>{_head_html(v)}')
    if v["status"] != "ok":
        return root + f'<div class="ad-err">status {_esc(v["status"])}: {_esc(v["error"])}</div></div>'
    unit = v["unit"]
    has_mod = any(r["moderator"] for r in v["rounds"])
    head = "".join(f'<th>{unit} {i + 1}</th>' for i in range(n))
    head += "<th>moderator</th>" if has_mod else ""
    head += "<th>plurality</th>" + ("" if unit == "run" else f'<th>{_esc(v["weighted_name"])}</th>')
    rows = []
    for r in v["rounds"]:
        cells = "".join(_cell_html(c, v, "acemad-cell", r["t"]) for c in r["cells"])
        if has_mod:
            cells += _cell_html(r["moderator"], v, "ad-mod", r["t"]) if r["moderator"] else "<td></td>"
        cells += f'<td class="ad-plur">{_mark(r["plurality"], v["answer"])}</td>'
        if unit != "run":
            cells += f'<td class="ad-weighted">{_mark(r["weighted"], v["answer"])}</td>'
        rows.append(f'<tr><th>{"runs" if unit == "run" else "round " + str(r["t"])}</th>{cells}</tr>')
    legend = f'<div class="ad-legend">{_esc(_LEGEND)}</div>'
    return root + f'<table><tr><th></th>{head}</tr>{"".join(rows)}</table>{legend}</div>'


def show(record: dict, meta: Optional[dict] = None):
    """The debate view for Jupyter: an IPython.display.HTML (rendered inline when it is a cell's value)."""
    from IPython.display import HTML

    return HTML(debate_html(record, meta))


# ----------------------------------------------------------------------------- examples by rule
def round1_plurality(record: dict, seed: int = 0) -> Optional[str]:
    """The plurality of the round-1 answers (Majority Voting with the same agents), ties broken as the engine
    does; None when no round-1 commitment parsed."""
    labels = list(record["labels"])
    keys = B.tiebreak_keys(seed, [record["question_id"]], len(labels))[0]
    return _round_answers(record["rounds"][0], labels, keys, False, 1.0)[0]


def pick_examples(records: list[dict], target_label: str, n: int = 1, seed: int = 0) -> dict[str, list[dict]]:
    """Debates of method `target_label` picked by rule, never by hand.

    Among its records with status "ok", sorted by (question_id, repeat):
      "overturned":     the round-1 plurality answer was wrong (or none parsed) and the final answer is right;
      "not_overturned": the round-1 plurality answer was wrong (or none parsed) and the final answer is wrong.
    The first n of each (an empty list when none qualifies). `seed` is the run's seed (it breaks vote ties).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    mine = [r for r in records if r.get("method") == target_label]
    if not mine:
        methods = sorted({r.get("method") for r in records})
        raise ValueError(f"no record of method {target_label!r}; methods present: {methods}")
    out: dict[str, list[dict]] = {"overturned": [], "not_overturned": []}
    for r in sorted(mine, key=lambda r: (r["question_id"], r.get("repeat", 0))):
        if r.get("status", "ok") != "ok" or not r.get("rounds"):
            continue
        if round1_plurality(r, seed) == r["answer"]:
            continue
        kind = "overturned" if r["final"]["correct"] is True else "not_overturned"
        if len(out[kind]) < n:
            out[kind].append(r)
    return out


# ----------------------------------------------------------------------------- the run page
_JS = r"""
(function(){
const D = JSON.parse(document.getElementById('acemad-data').textContent);
const esc = s => String(s == null ? '' : s).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#x27;'}[c]));
const mark = (l, a) => l == null ? '<span class="ad-bad">none</span>' :
  '<span class="' + (l === a ? 'ad-ok' : 'ad-bad') + '">' + esc(l) + (l === a ? ' ✓' : ' ✗') + '</span>';
function bars(d, labels, a, title){
  const bw = 11, gap = 3, h = 28;
  let s = '<svg width="' + labels.length * (bw + gap) + '" height="' + (h + 11) + '" role="img" aria-label="' + esc(title) + '">';
  labels.forEach((lab, k) => {
    const bh = Math.max(1, d[k] * h), x = k * (bw + gap);
    s += '<rect x="' + x + '" y="' + (h - bh).toFixed(1) + '" width="' + bw + '" height="' + bh.toFixed(1) + '" fill="' +
      (lab === a ? '#2da44e' : '#8c959f') + '"><title>' + esc(title) + ' ' + esc(lab) + ': ' + d[k].toFixed(2) + '</title></rect>' +
      '<text x="' + (x + bw / 2) + '" y="' + (h + 10) + '" font-size="9" text-anchor="middle"' + (lab === a ? ' font-weight="bold"' : '') + '>' + esc(lab) + '</text>';
  });
  return s + '</svg>';
}
function cell(c, v, cls, t){
  let b = '<figure>' + bars(c.p, v.labels, v.answer, 'p') + '<figcaption>p: belief</figcaption></figure>';
  if (c.q) b += '<figure>' + bars(c.q, v.labels, v.answer, 'q') + '<figcaption>q: peers</figcaption></figure>';
  const sw = c.score == null ? '' : '<div class="ad-sw">score ' + c.score.toFixed(3) + ' · weight ' + c.weight.toFixed(3) +
    '<span class="ad-w" style="width:' + Math.max(1, Math.round(c.weight * 60)) + 'px"></span></div>';
  const text = c.msg.length <= 60 ? '<div class="ad-short">' + (esc(c.msg) || '(no argument)') + '</div>' :
    '<details><summary>' + esc(c.msg.slice(0, 57)) + '…</summary><div class="ad-msg">' + esc(c.msg) + '</div></details>';
  return '<td class="' + cls + (c.pf ? ' ad-pf' : '') + '" data-round="' + t + '" data-agent="' + esc(c.agent) + '">' +
    '<div class="ad-who">' + esc(c.who) + '</div>' +
    (c.pf ? '<span class="ad-badge">parse failure</span>' : '<span class="ad-stance">' + mark(c.stance, v.answer) + '</span>') +
    '<div class="ad-bars">' + b + '</div>' + sw +
    text + '</td>';
}
function debate(v){
  const n = v.rounds.length ? v.rounds[0].cells.length : 0;
  const c = v.correct;
  const outcome = (typeof c === 'number') ? 'runs correct: <b>' + Math.round(c * 100) + '%</b>' : 'final answer ' + mark(v.final, v.answer);
  let s = '<div class="acemad-debate" data-agents="' + n + '" data-rounds="' + v.rounds.length + '" data-method="' + esc(v.method) +
    '" data-question="' + esc(v.qid) + '"><div class="ad-head"><span class="ad-src' + (v.source === D.synthetic_label ? ' ad-syn' : '') + '">' +
    esc(v.source) + '</span> <b>' + esc(v.method) + '</b> · ' + esc(v.qid) + ' (' + esc(v.benchmark) + ', repeat ' + esc(v.repeat) +
    ') · correct answer <span class="ad-ok acemad-answer">' + esc(v.answer) + '</span> · ' + outcome + '</div>';
  if (v.status !== 'ok') return s + '<div class="ad-err">status ' + esc(v.status) + ': ' + esc(v.error) + '</div></div>';
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
      list = document.getElementById('list'), count = document.getElementById('count'), pane = document.getElementById('debate');
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
      (v.status !== 'ok' ? '<span class="ad-bad">' + esc(v.status) + '</span>' : (D.ok[i] ? '<span class="ad-ok">✓</span>' : '<span class="ad-bad">✗</span>')) + '</td></tr>');
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
#list table{{border-collapse:collapse;width:100%}} #list td,#list th{{padding:2px 6px;border-bottom:1px solid #eaeef2;text-align:left;font-size:12px}}
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
<div class="wrap"><div id="list"></div><div id="debate"><p>Click a question on the left to open its debate.</p></div></div>
<script type="application/json" id="acemad-data">{data}</script>
<script>{js}</script>
</body></html>
"""

_LEGEND = ("Bars: an agent's belief p and its prediction q of its peers' beliefs over the options; green = the "
           "correct option. ✓/✗ = the answer is / is not the correct one. Click an argument to unfold it.")


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
    from .runner import load_run

    meta, records = load_run(experiment)
    if not records:
        raise ValueError(f"run {experiment!r} has no transcript records for the methods in its meta.json")
    order = {m: i for i, m in enumerate(meta.get("methods", {}))}
    records = sorted(records, key=lambda r: (order.get(r["method"], len(order)), r["question_id"], r.get("repeat", 0)))
    views = [view(r, meta) for r in records]
    source = views[0]["source"]
    synthetic = source == SYNTHETIC
    data = {"views": views, "ok": [is_correct(v) for v in views], "methods": list(dict.fromkeys(v["method"] for v in views)),
            "benchmarks": sorted({v["benchmark"] for v in views}), "synthetic_label": SYNTHETIC, "legend": _LEGEND}
    # "</" inside a JSON string would end the <script> element early (an argument may quote HTML).
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    page = _PAGE.format(
        title=_esc(f"acemad debates: {experiment}"), css=CSS, experiment=_esc(experiment), source=_esc(source),
        banner_bg="#fff3cd" if synthetic else "#ddf4ff", banner_border="#e0c36a" if synthetic else "#54aeff",
        n=len(views), nq=len({v["qid"] for v in views}), methods=_esc(", ".join(data["methods"])), data=blob, js=_JS)
    path = page_path(experiment)
    atomic_write(path, page)
    return path


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m acemad_utils.viewer <experiment>   (e.g. default/main)")
    print(write_run_page(sys.argv[1]))
