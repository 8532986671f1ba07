"""The claims ledger: every quantitative claim of the paper, one row each, with the paper's number, ours with
its 95% CI, the paired test's p (raw and Holm-adjusted) and a verdict. Pure: runs (meta, records) in, a
DataFrame out; notebook 08 reads and writes.

    from acemad_utils.report import claims as C
    ledger = C.ledger({"main": (meta, records), "baselines": ..., ...})   # the runs of notebooks 02-07
    print(C.summary(ledger, runs, source=SRC))                              # counts + the assumption they rest on

Verdicts (docs/statistics.md). A claim that one method beats another is tested by the paired gain on the same
questions (the Average: the mean over benchmarks of the per-benchmark gains, resampled within each benchmark):
it holds when its CI lies above 0 AND its Holm-adjusted p (across every test of the ledger) is below ALPHA,
fails when the CI lies at or below 0, and is `inconclusive at this n` otherwise. "Flat" / "plateaus" (no rise,
a decline allowed) holds when the change's CI stays below FLAT_MARGIN points. A claim of an exact value
(49.92%, 74%, +20.31) is judged against our CI only on a real-model profile; on a synthetic one it is `not
comparable`: a simulation's accuracy is not a measurement of the paper's models. A claim whose run is missing
gets `not run`.

The words say what a verdict is about: on a synthetic profile "holds in the simulation" / "fails in the
simulation" (a statement about the population of agents/sim.py and the assumption it builds in, named by
`assumption`); only a real-model profile says "supported" / "not supported". Rows decided by a synthetic
stand-in whose parameters were chosen from the paper's wording (notebook 07) say so in their note.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Optional, Union

import numpy as np
import pandas as pd
import yaml

from acemad_utils.data.sim_params import SimParams
from acemad_utils.protocol.config import SKEPTIC, DebateConfig
from acemad_utils.report import power as PW
from acemad_utils.report import rescoring as A
from acemad_utils.report import tables as TB
from acemad_utils.report.figures import NO_RUNS
from acemad_utils.report.stats import adjust_pvalues, bootstrap_ci

HOLDS, FAILS, INCONCLUSIVE, NOT_RUN = "holds", "fails", "inconclusive at this n", "not run"  # internal outcomes
NULL = "no effect of the claimed size"  # the CI excludes the claimed effect (and 0 is in it or below it)
NOT_COMPARABLE = "not comparable"
ANOTHER_MODEL = "not comparable: another model"  # an exact value of the paper's model, measured on another model
UNDERPOWERED = "underpowered"  # a real model with fewer questions than 80% power needs: "underpowered (n = k of ~N)"
SUPPORTED, NOT_SUPPORTED = "supported", "not supported"  # a real-model profile's words
HOLDS_SIM, FAILS_SIM = "holds in the simulation", "fails in the simulation"  # a synthetic profile's words
NULL_SIM = f"{NULL} in the simulation"
VERDICTS = (
    SUPPORTED,
    NOT_SUPPORTED,
    HOLDS_SIM,
    FAILS_SIM,
    NULL_SIM,
    NULL,
    INCONCLUSIVE,
    UNDERPOWERED,
    ANOTHER_MODEL,
    NOT_COMPARABLE,
    NOT_RUN,
)
POWER = 0.8  # a real-model verdict needs the n that gives the claim this power at the Holm first-step level
MIN_EFFECT = 5.0  # points: the effect a claim without a printed number (a figure's) is powered for
PAPER_MODEL = "GPT-4o-mini"  # the model of Tables 1-2 (its block), 3, 6, Figures 2, 4, 5 and the introduction
ALPHA = 0.05
ADJUSTMENT = "holm"  # the ledger's multiple-comparison policy (stats.adjust_pvalues; docs/statistics.md)
POLICY = (
    "Holm's step-down adjustment across every paired test of the ledger (family-wise error 5%); a claimed gain "
    "holds only when its CI excludes 0 and its Holm-adjusted p < 0.05"
)
COLUMNS = [
    "claim",
    "paper line",
    "paper",
    "paper (recomputed)",
    "ours [95% CI]",
    "n",
    "p",
    "p (Holm)",
    "verdict",
    "note",
]
DECIDED_BY = "decided by"  # the assumption-grid column (deciding): which assumptions flip the row, or why none can
RunData = tuple[dict, list]
Target = Union[str, tuple]  # a label, or (our label, the paper's label, the paper's baselines)


def gain_verdict(lo: float, hi: float, p_adjusted: float = 0.0) -> str:
    """A claimed gain from its CI and adjusted p: above 0 and significant, at or below 0, or neither."""
    return HOLDS if lo > 0 and p_adjusted < ALPHA else FAILS if hi <= 0 else INCONCLUSIVE


def loss_verdict(lo: float, hi: float, p_adjusted: float = 0.0) -> str:
    """A claimed loss (DeepSeek's TruthfulQA, l.1023): below 0 and significant, at or above 0, or neither."""
    return HOLDS if hi < 0 and p_adjusted < ALPHA else FAILS if lo >= 0 else INCONCLUSIVE


def value_verdict(value: float, lo: float, hi: float, null: Optional[float] = None) -> str:
    """A claimed value from our CI: held (and the null excluded), not held, or both held."""
    if not lo <= value <= hi:
        return FAILS
    return INCONCLUSIVE if null is not None and lo <= null <= hi else HOLDS


def row(
    claim: str,
    line: str,
    paper,
    ours: str = "",
    n: int = 0,
    verdict: str = NOT_RUN,
    note: str = "",
    *,
    kind: str = "judged",
    p: float = math.nan,
    ci: tuple = (),
    psi: float = math.nan,
    model: str = PAPER_MODEL,
    recomputed: str = "",
) -> dict:
    """One ledger row. kind: "gain" / "loss" (verdict from `ci` and the adjusted `p`, set by `finalize`),
    "value" (an exact-value claim: `not comparable` on a synthetic profile), "judged" (verdict given).
    psi: the observed share of discordant pairs (a real model's power); model: the paper's model of the claim;
    recomputed: the paper's number recomputed from its own cells where that differs from the printed one."""
    claimed = float(paper) if isinstance(paper, (int, float)) else math.nan
    paper = paper if isinstance(paper, str) else f"{paper:+.2f}" if paper is not None else "-"
    out = dict(zip(COLUMNS, (claim, line, paper, recomputed, ours, n, p, math.nan, verdict, note)))
    out.update(_kind=kind, _ci=ci, _claimed=claimed, _psi=psi, _model=model)
    return out


def _ci(x: float, lo: float, hi: float, signed: bool = True) -> str:
    f = "{:+.1f}" if signed else "{:.1f}"
    return f"{f.format(x)} [{f.format(lo)}, {f.format(hi)}]"


def bench_key(benchmark: str) -> str:
    """The paper's column for one of our benchmarks ('synthetic-arc_challenge' -> 'ARC-C')."""
    return benchmark if benchmark == TB.AVERAGE else TB.BENCH_LABELS.get(benchmark.removeprefix("synthetic-"), "")


def paper_gain(
    paper: pd.DataFrame, target: str, baselines: Sequence[str], column: str, *, recomputed: bool = False
) -> Optional[float]:
    """The printed cell of `target` minus the best printed cell of `baselines` in `column` (None if absent); the
    Average from the printed averages, or (recomputed) from the means of the printed cells."""
    col = f"Average ({'recomputed' if recomputed else 'printed'})" if column == TB.AVERAGE else column
    cells = paper.set_index("method")[col] if col in paper else None
    if cells is None or target not in cells or not any(b in cells for b in baselines):
        return None
    return float(cells[target] - max(cells[b] for b in baselines if b in cells))


def against_itself(paper: pd.DataFrame, target: str, baselines: Sequence[str], columns: Sequence[str] = ()) -> str:
    """The paper's own per-benchmark cells where `target` does not beat the best of `baselines` (a claim of a
    consistent gain contradicted by the table it cites), as a note; "" when every printed gain is positive."""
    cols = [c for c in paper.columns if c not in ("method", "model") and not c.startswith("Average")]
    gains = {c: paper_gain(paper, target, baselines, c) for c in cols if not columns or c in columns}
    bad = [f"{c} {g:+.2f}" for c, g in gains.items() if g is not None and g <= 0]
    return f"THE PAPER'S OWN CELLS CONTRADICT IT: {target} minus the best of them {', '.join(bad)}" if bad else ""


def _recomputed(paper: Optional[pd.DataFrame], target: str, baselines: Sequence[str], col: str) -> str:
    """The Average gain from the paper's cells when it differs from the one from its printed averages."""
    if paper is None or col != TB.AVERAGE or "Average (recomputed)" not in paper:
        return ""
    printed = paper_gain(paper, target, baselines, col)
    cells = paper_gain(paper, target, baselines, col, recomputed=True)
    return "" if cells is None or printed is None or abs(cells - printed) < 0.005 else f"{cells:+.2f} (from its cells)"


def gain_rows(
    claim: str,
    line: str,
    records: list,
    target: str,
    baselines: Sequence[str],
    *,
    paper: Optional[pd.DataFrame] = None,
    paper_target: str = "",
    paper_baselines: Sequence[str] = (),
    per_benchmark: bool = False,
    columns: Sequence[str] = (),
    kind: str = "gain",
    consistently: bool = False,
) -> list[dict]:
    """One row per benchmark (with per_benchmark; only the paper's `columns` if given) and one for the Average:
    target's paired gain over the best of `baselines` there, with the paired test's raw p (the ledger adjusts
    it). The paper's gain uses paper_target / paper_baselines (default: the same labels); its Average recomputed
    from its cells stands beside it; `consistently` (a claim of a gain on every benchmark): the Average row's note
    names the paper's own cells that contradict it."""
    tests = TB.versus_best(records, [target], list(baselines))
    if not per_benchmark:
        tests = tests[tests.benchmark == TB.AVERAGE]
    best = dict(zip(tests.benchmark, tests.best_baseline))
    psi = discordance(records, target, best.get(TB.AVERAGE, ""))
    out = []
    for t in tests.to_dict("records"):
        col = bench_key(t["benchmark"])
        if columns and col not in columns:
            continue
        pt, pb = paper_target or target, paper_baselines or baselines
        theirs = None if paper is None else paper_gain(paper, pt, pb, col)
        name = claim if t["benchmark"] == TB.AVERAGE else f"{claim}: {TB.bench_label(t['benchmark'])}"
        notes = [f"vs {t['best_baseline']}"]
        if theirs is not None and theirs <= 0 and kind == "gain":
            notes.append("THE PAPER'S OWN CELLS show no gain here")
        if consistently and paper is not None and t["benchmark"] == TB.AVERAGE:
            notes.append(against_itself(paper, pt, pb, columns))
        r = row(
            name,
            line,
            theirs,
            _ci(t["gain"], t["gain_lo"], t["gain_hi"]),
            t["n_paired"],
            note="; ".join(n for n in notes if n),
            kind=kind,
            p=float(t["p_value"]),
            ci=(t["gain_lo"], t["gain_hi"]),
            psi=psi
            if t["benchmark"] == TB.AVERAGE
            else discordance(records, target, t["best_baseline"], t["benchmark"]),
            recomputed=_recomputed(paper, pt, pb, col),
        )
        out.append({**r, "_col": col})
    return out or [row(claim, line, None, note=f"{target} or {list(baselines)} not in the run")]


def discordance(records: list, a: str, b: str, benchmark: str = "") -> float:
    """The share of questions (of `benchmark`, else all) on which a and b differ in correctness: the noise of the
    paired test, which a real model's power (n_needed) is computed from. NaN without paired questions."""
    recs = [r for r in records if r["method"] in (a, b) and (not benchmark or r["benchmark"] == benchmark)]
    if not recs:
        return math.nan
    f = TB.question_frame(recs).pivot_table("correct", ["benchmark", "question_id"], "method").dropna()
    return float((f[a] != f[b]).mean()) if a in f and b in f and len(f) else math.nan


def relative_gain(records: list, target: str, base: str, n_boot: int = 2000, seed: int = 0) -> Optional[tuple]:
    """(relative improvement of target's Average over base's, in %, CI lo, hi, n paired): the ratio of the
    means of benchmark means minus 1, bootstrapped by resampling questions within each benchmark (paired)."""
    df = pd.DataFrame(
        [
            (r["benchmark"], r["question_id"], r["method"], float(r["final"]["correct"]))
            for r in records
            if r["final"]["correct"] is not None  # a question without a gold answer is not scored
        ]
    )
    df.columns = ["benchmark", "question_id", "method", "correct"]
    piv = df[df.method.isin([target, base])].pivot_table("correct", ["benchmark", "question_id"], "method").dropna()
    if target not in piv or base not in piv or piv.empty:
        return None
    rng = np.random.default_rng(seed)
    a_b, b_b, a_p, b_p = [], [], [], []
    for _, g in piv.groupby(level=0):
        a, b = g[target].to_numpy(), g[base].to_numpy()
        idx = rng.integers(0, len(a), (n_boot, len(a)))
        a_b.append(a[idx].mean(1))
        b_b.append(b[idx].mean(1))
        a_p.append(a.mean())
        b_p.append(b.mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        boots = 100 * (np.mean(a_b, 0) / np.mean(b_b, 0) - 1)
        point = 100 * (np.mean(a_p) / np.mean(b_p) - 1)
    boots = np.where(np.isnan(boots), np.inf, boots)  # 0/0 resamples: no finite ratio
    lo, hi = np.quantile(boots, 0.025, method="lower"), np.quantile(boots, 0.975, method="higher")  # infs: no mixing
    return float(point), float(lo), float(hi), len(piv)


def _labels(meta: dict, method: str, **fields) -> list[str]:
    """Labels of a run's configs of one method kind (and fields), in order of n_agents."""
    ms = [(c.get("n_agents", 0), lab) for lab, c in meta["methods"].items() if c["method"] == method]
    ms = [(n, lab) for n, lab in ms if all(meta["methods"][lab].get(k) == v for k, v in fields.items())]
    return [lab for _, lab in sorted(ms)]


def _average(records: list, labels: Sequence[str]) -> pd.Series:
    long = TB.accuracy_long(records, methods=list(labels))
    return long[long.benchmark == TB.AVERAGE].set_index("method")["accuracy"]


FLAT_MARGIN = 2.0  # points: "flat" / "plateaus" holds when the paired change's CI stays below this
MAD_LABELS = ("Decentralized MAD", "Centralized MAD", "Sparse MAD")


def flat_verdict(lo: float, hi: float) -> str:
    """ "No rise" (flat, plateau, "or even degradation", l.223 / l.522): a CI below FLAT_MARGIN holds it
    (a decline is consistent), a rise (CI above 0 reaching the margin) fails it, else inconclusive."""
    return HOLDS if hi < FLAT_MARGIN else FAILS if lo > 0 else INCONCLUSIVE


def no_drop_verdict(lo: float, hi: float) -> str:
    """ "Still rising at N=10": N=10 minus the best smaller N. Below 0 fails (the curve peaked earlier and
    fell); a CI above -FLAT_MARGIN holds; else inconclusive."""
    return FAILS if hi < 0 else HOLDS if lo > -FLAT_MARGIN else INCONCLUSIVE


def _value_row(
    claim: str,
    line: str,
    claimed: float,
    stat: tuple,
    n: int,
    note: str,
    *,
    signed: bool = True,
    model: str = PAPER_MODEL,
) -> dict:
    """An exact-value claim of the paper's `model`: `stat` = (ours, lo, hi); judged only on a real-model profile
    running that model (see finalize)."""
    x, lo, hi = stat
    paper = f"{claimed:+.2f}" if signed else f"{claimed:.2f}"
    verdict = value_verdict(claimed, lo, hi, null=0.0 if signed else None)
    return row(claim, line, paper, _ci(x, lo, hi, signed=signed), n, verdict, note, kind="value", model=model)


def _accuracy(records: list, label: str) -> Optional[tuple]:
    """(Average accuracy %, CI lo, hi, n) of one method, None when it is not in the records."""
    if not any(r["method"] == label for r in records):
        return None
    long = TB.accuracy_long(records, methods=[label])
    a = long[long.benchmark == TB.AVERAGE]
    return (
        None
        if a.empty
        else (float(a.accuracy.iloc[0]), float(a.ci_lo.iloc[0]), float(a.ci_hi.iloc[0]), int(a.n.iloc[0]))
    )


def _every_row(per_bench: list[dict], claim: str, line: str) -> dict:
    """The conjunction of per-benchmark gain rows (decided in finalize), with the paper's own cells: "all > 0"
    only when every printed gain is (Table 2's T=3 MMLU-Pro gain is +0.00)."""
    theirs = {r["_col"]: float(r["paper"]) for r in per_bench if r["paper"] not in ("-", "")}
    nonpos = [f"{c} {g:+.2f}" for c, g in theirs.items() if g <= 0]
    paper = "all > 0" if theirs and not nonpos else f"not all > 0 ({', '.join(nonpos)})" if nonpos else "-"
    out = row(claim, line, paper, n=per_bench[-1]["n"] if per_bench else 0, note="the conjunction of the rows above")
    return {**out, "_kind": "all", "_of": [r["claim"] for r in per_bench]}


def paper_baselines(meta: dict, target: str) -> list[str]:
    """The paper's baselines in a run: not AceMAD, their own homogeneous roster of the run's baseline agent. The
    controls beside them (AceMAD's roster under another method, its Skeptic answering alone: notebook 03) are not
    the paper's baselines and are no part of "beats every baseline"."""
    agent = meta["methods"][target].get("baseline_agent")
    return [
        lab
        for lab, c in meta["methods"].items()
        if c["method"] != "acemad" and not c.get("roster") and c.get("baseline_agent") == agent
    ]


def pronounced_row(claim: str, line: str, recs: list, target: str, baselines: Sequence[str], paper=None) -> dict:
    """ "Most pronounced on BBH and ARC-C" (l.459, l.511): the mean of target's paired gains over the best baseline
    on BBH and ARC-C minus their mean on the other benchmarks, CI from resampling questions within benchmarks;
    holds when the CI lies above 0, fails at or below 0."""
    tests = TB.versus_best(recs, [target], list(baselines), average=False)
    key = {b: bench_key(b) for b in tests.benchmark}
    df = TB.question_frame([r for r in recs if r["method"] == target or r["method"] in set(tests.best_baseline)])
    diffs = []
    for t in tests.to_dict("records"):
        piv = df[df.benchmark == t["benchmark"]].pivot(index="question_id", columns="method", values="correct")
        d = (piv[target] - piv[t["best_baseline"]]).dropna().to_numpy(float)
        diffs.append((key[t["benchmark"]] in PRONOUNCED, d))
    theirs = _pronounced_paper(paper, target, baselines)
    if not any(top for top, _ in diffs) or all(top for top, _ in diffs):
        return row(claim, line, theirs, note="BBH or ARC-C and another benchmark not both run")
    rng, boots = np.random.default_rng(0), []
    for _ in range(2000):
        m = [(top, d[rng.integers(0, len(d), len(d))].mean()) for top, d in diffs if len(d)]
        boots.append(np.mean([x for t, x in m if t]) - np.mean([x for t, x in m if not t]))
    point = np.mean([d.mean() for t, d in diffs if t]) - np.mean([d.mean() for t, d in diffs if not t])
    lo, hi = (100 * float(q) for q in np.quantile(boots, [0.025, 0.975]))
    verdict = HOLDS if lo > 0 else FAILS if hi <= 0 else INCONCLUSIVE
    n = int(sum(len(d) for _, d in diffs))
    note = "mean gain on BBH and ARC-C minus the mean on the other benchmarks, points"
    return row(claim, line, theirs, _ci(100 * point, lo, hi), n, verdict, note, ci=(lo, hi))


PRONOUNCED = ("BBH", "ARC-C")


def _pronounced_paper(paper: Optional[pd.DataFrame], target: str, baselines: Sequence[str]) -> Optional[float]:
    if paper is None:
        return None
    cols = [c for c in paper.columns if c not in ("method", "model") and not c.startswith("Average")]
    gains = {c: paper_gain(paper, target, baselines, c) for c in cols}
    top = [g for c, g in gains.items() if c in PRONOUNCED and g is not None]
    rest = [g for c, g in gains.items() if c not in PRONOUNCED and g is not None]
    return float(np.mean(top) - np.mean(rest)) if top and rest else None


def _standard_mad_row(recs: list, t3: str, meta: dict, paper: pd.DataFrame) -> list[dict]:
    """l.111: "+20.31 over standard MAD". The paper calls Decentralized MAD "standard MAD" (l.209, l.511): its
    printed averages give 49.92 - 28.62 = +21.30 and its cells 43.25 - 28.62 = +14.63; +20.31 matches neither
    (it is 49.92 - 29.61, the best MAD, Sparse). Judged against Decentralized MAD."""
    claim, dec = "AceMAD (T=3) is +20.31 points over standard MAD (Decentralized MAD, l.209)", "Decentralized MAD"
    if dec not in meta["methods"]:
        return [row(claim, "l.111", "+20.31", note="no Decentralized MAD run")]
    t = TB.versus_best(recs, [t3], [dec])
    t = t[t.benchmark == TB.AVERAGE]
    printed, cells = (paper_gain(paper, t3, [dec], TB.AVERAGE, recomputed=c) for c in (False, True))
    r = t.iloc[0]
    note = (
        "vs Decentralized MAD, which l.209 and l.511 call standard MAD; +20.31 = 49.92 - 29.61 (Sparse, the best MAD)"
    )
    out = _value_row(claim, "l.111", 20.31, (r.gain, r.gain_lo, r.gain_hi), int(r.n_paired), note)
    return [{**out, "paper (recomputed)": f"{printed:+.2f} (printed averages), {cells:+.2f} (its cells)"}]


def _relative_row(recs: list, t3: str, paper: pd.DataFrame, line: str) -> list[dict]:
    """The "+74% over Decentralized MAD" row; undefined (inconclusive) when Decentralized MAD scores 0."""
    rel = relative_gain(recs, t3, "Decentralized MAD")
    if rel is None:
        return []
    p = paper.set_index("method")["Average (printed)"]
    claimed = 100 * (p[t3] / p["Decentralized MAD"] - 1)
    finite = bool(np.isfinite(rel[0]))
    ours = _ci(*rel[:3]) + "%" if finite else "undefined (Decentralized MAD at 0%)"
    verdict = value_verdict(claimed, rel[1], rel[2], null=0.0) if finite else INCONCLUSIVE
    note = "ratio of Averages minus 1; paired bootstrap within benchmarks"
    claim = "74% relative improvement over Decentralized MAD"
    cells = paper.set_index("method")["Average (recomputed)"]
    again = f"{100 * (cells[t3] / cells['Decentralized MAD'] - 1):+.1f}% (from its cells)"
    return [row(claim, line, f"{claimed:+.1f}%", ours, rel[3], verdict, note, kind="value", recomputed=again)]


def recovery_rows(ace: list, re: list, full: str, uniform: str) -> list[dict]:
    """l.83 ("recovers sparse truth signals even when initial majorities are incorrect") and l.109 ("guaranteeing
    convergence to truth from minority positions"): on the questions whose round-1 plurality is wrong, the full
    protocol's paired gain over uniform weights on the same debates, and its recovery rate (a guarantee would
    be ~100%)."""
    claim, line = "AceMAD recovers the truth when the initial majority is wrong (vs uniform weights)", "l.83, l.109"
    arr = A.stack(ace)
    wrong = {q for q, w in zip(arr.question_ids, A.initial_plurality(arr) != arr.truth) if w}
    sub = [r for r in re if r["question_id"] in wrong]
    acc = _accuracy([r for r in sub if r["method"] == full], full)
    if acc is None:
        return [row(claim, line, "(no number)", note="no question with a wrong initial majority")]
    out = gain_rows(claim, line, sub, full, [uniform])
    note = f"recovers {acc[0]:.1f}% [{acc[1]:.1f}, {acc[2]:.1f}] of {acc[3]} wrong-majority questions"
    for r in out:
        r["note"] = f"{note} (l.109's guarantee would be ~100%); {r['note']}"
    return out


def no_penalty_row(full: Optional[RunData], seed: int = 0) -> dict:
    """l.1114: on the full test sets AceMAD "does not penalize correct majorities": of the questions whose round-1
    plurality is right, the share AceMAD (T=3) ends wrong on (percent, CI over questions). Holds below FLAT_MARGIN."""
    claim, line = "No penalty on correct majorities (full test sets)", "l.1114, Table 6"
    if full is None:
        return row(claim, line, "(no number)", note="run not made in this profile")
    methods = full[0]["methods"]
    ace = [
        r
        for r in full[1]
        if methods.get(r["method"], {}).get("method") == "acemad" and "rounds" in r and r.get("status") == "ok"
    ]
    if not ace:
        return row(claim, line, "(no number)", note="no AceMAD debate with its rounds in the run")
    arr = A.stack(ace)
    right = A.initial_plurality(arr) == arr.truth
    ended_wrong = np.array([not r["final"]["correct"] for r in ace])  # the run's own decision, at its eta and T
    lost = ended_wrong[right].astype(float) * 100
    if not len(lost):
        return row(claim, line, "(no number)", note="no question with a right initial majority")
    m, lo, hi = (float(x) for x in bootstrap_ci(lost, seed=seed))
    note = f"share of {len(lost)} right-majority questions AceMAD ends wrong on, %; holds below {FLAT_MARGIN:g}"
    return row(
        claim, line, "(no number)", _ci(m, lo, hi, signed=False), len(lost), flat_verdict(lo, hi), note, ci=(lo, hi)
    )


def _collapse_row(re: list, full: str, self_only: str) -> list[dict]:
    t = TB.versus_best(re, [self_only], [full])
    t = t[t.benchmark == TB.AVERAGE]
    claim = "Without peer prediction (Self-belief only) performance collapses by 14.6%"
    if t.empty:
        return [row(claim, "l.111", "-14.6")]
    r = t.iloc[0]
    note = "Self-belief only minus Full, in points (the paper does not say points or relative)"
    return [_value_row(claim, "l.111", -14.6, (r.gain, r.gain_lo, r.gain_hi), int(r.n_paired), note)]


def table_claims(
    run: Optional[RunData],
    paper: pd.DataFrame,
    *,
    claim: str,
    line: str,
    targets: Sequence[Target],
    baselines,
    per_benchmark: bool = False,
    columns: Sequence[str] = (),
    kind: str = "gain",
) -> list[dict]:
    """Each target's gain over the best of `baselines` (Tables 1, 3, 4, 5, 6 and Table 2's Qwen block): on the
    Average, and per benchmark (the paper's `columns` only, if given) with per_benchmark."""
    out = []
    for t in targets:  # a label, or (our label, the paper's label, the paper's baselines)
        theirs: dict = dict(paper_target=t[1], paper_baselines=t[2]) if isinstance(t, tuple) else {}
        label = t[0] if isinstance(t, tuple) else t
        if run is None:
            against = against_itself(
                paper, t[1] if isinstance(t, tuple) else label, t[2] if isinstance(t, tuple) else baselines, columns
            )
            note = "; ".join(n for n in ("run not made in this profile", kind == "gain" and against) if n)
            out.append(row(f"{claim}: {label}", line, None, note=note))
        else:
            out += gain_rows(
                f"{claim}: {label}",
                line,
                run[1],
                label,
                baselines,
                paper=paper,
                per_benchmark=per_benchmark,
                columns=columns,
                kind=kind,
                consistently=kind == "gain",
                **theirs,
            )
    return out


def _pair_gain(records: list, a: str, b: Sequence[str]):
    t = TB.versus_best(records, [a], list(b))
    t = t[t.benchmark == TB.AVERAGE]
    return None if t.empty else t.iloc[0].to_dict()


def _curve(run: RunData, method: str, n_max: int) -> tuple[list, list, pd.Series]:
    labels = _labels(run[0], method)
    ns = [run[0]["methods"][lab]["n_agents"] for lab in labels]
    upto = [lab for lab, n in zip(labels, ns) if n <= n_max]
    return upto, ns[: len(upto)], _average(run[1], upto) if upto else pd.Series(dtype=float)


STILL_RISING = "AceMAD's curve still rises at N=10 (no earlier peak)"


def _trend_rows(run: RunData, method: str, claim: str, line: str, n_max: int) -> list[dict]:
    upto, ns, avg = _curve(run, method, n_max)
    g = _pair_gain(run[1], upto[-1], upto[:1]) if len(upto) > 1 else None
    if g is None:
        return [row(claim, line, "(figure)", note="fewer than two N in this profile")]
    monotone = bool(np.all(np.diff(avg.reindex(upto).to_numpy()) >= 0))
    by_n = ", ".join(f"N={n}: {avg[lab]:.1f}" for lab, n in zip(upto, ns))
    r = row(
        f"{claim} (N={ns[0]} to N={ns[-1]})",
        line,
        "(figure)",
        _ci(g["gain"], g["gain_lo"], g["gain_hi"]),
        int(g["n_paired"]),
        flat_verdict(g["gain_lo"], g["gain_hi"]) if method == "majority" else NOT_RUN,
        f"Average by N: {by_n}; {'monotone' if monotone else 'not monotone'}",
        kind="judged" if method == "majority" else "gain",
        p=float(g["p_value"]),
        ci=(g["gain_lo"], g["gain_hi"]),
        psi=discordance(run[1], upto[-1], upto[0]),
    )
    return [{**r, "_cap": method == "decentralized" and not monotone}]  # "monotonically": the points in order too


def _still_rising(run: RunData, claim: str, line: str) -> dict:
    """The rest of "improves up to N=10": N=10 against the best smaller N (where the curve peaks)."""
    upto, ns, avg = _curve(run, "acemad", 10)
    if len(upto) < 2:
        return row(claim, line, "(figure)", note="fewer than two N in this profile")
    peak = max(upto, key=lambda lab: avg[lab])
    peak_n = ns[upto.index(peak)]
    g = _pair_gain(run[1], upto[-1], upto[:-1])
    if g is None or ns[-1] != 10:
        return row(claim, line, "(figure)", note="N=10 not run in this profile")
    note = f"N=10 minus the best smaller N ({g['best_baseline']}); the curve peaks at N={peak_n} ({avg[peak]:.1f}%)"
    return _judged_row(claim, line, g, no_drop_verdict, note, run[1])


def _judged_row(claim: str, line: str, test: dict, verdict, note: str, records: list) -> dict:
    """A figure claim judged by `verdict(lo, hi)` of one paired test (a versus_best row as a dict)."""
    ours = _ci(test["gain"], test["gain_lo"], test["gain_hi"])
    judged = verdict(test["gain_lo"], test["gain_hi"])
    psi = discordance(records, test["method"], test["best_baseline"])
    return row(claim, line, "(figure)", ours, int(test["n_paired"]), judged, note, p=float(test["p_value"]), psi=psi)


def _plateau(scaling: RunData, claim: str, line: str) -> dict:
    labels = _labels(scaling[0], "acemad")
    ns = {lab: scaling[0]["methods"][lab]["n_agents"] for lab in labels}
    at10 = [lab for lab in labels if ns[lab] == 10]
    beyond = [lab for lab in labels if ns[lab] > 10]
    if not at10 or not beyond:
        return row(claim, line, "(figure)", note="N=10 and N>10 not both run in this profile")
    tests = TB.versus_best(scaling[1], beyond, at10)
    t = tests[tests.benchmark == TB.AVERAGE].sort_values("gain").iloc[-1].to_dict()  # the best N beyond 10
    note = f"best N>10 ({t['method']}) minus N=10; plateau = CI below +{FLAT_MARGIN:g} points (a decline is consistent)"
    return _judged_row(claim, line, t, flat_verdict, note, scaling[1])


def _at_n(run: RunData, n: int) -> tuple[int, RunData]:
    """(N, the configs of a run at N): N = n, or the largest N run when n was not."""
    meta, recs = run
    ns = sorted({c["n_agents"] for c in meta["methods"].values()})
    n = n if n in ns else ns[-1]
    keep = {lab for lab, c in meta["methods"].items() if c["n_agents"] == n}
    methods = {k: v for k, v in meta["methods"].items() if k in keep}
    return n, ({**meta, "methods": methods}, [r for r in recs if r["method"] in keep])


def standin_note(meta: dict) -> str:
    """For a run of a synthetic stand-in for another model (notebook 07): which of its parameters differ from
    the default population's, i.e. were chosen from the paper's wording (experiments/setup.py SIM_STANDINS)."""
    pop = meta.get("population") or {}
    model = str(pop.get("model", ""))
    if not pop.get("synthetic") or ":" not in model:
        return ""
    default = asdict(SimParams())
    changed = [f"{k}={v:g}" for k, v in (pop.get("params") or {}).items() if default.get(k, v) != v]
    if not changed:
        return f"synthetic stand-in {model.split(':', 1)[1]} (default parameters, its own traps)"
    return f"STAND-IN parameters chosen from the paper's wording decide this row: {', '.join(changed)}"


def _smaller_row(llama: Optional[RunData], main: Optional[RunData]) -> dict:
    """l.1069: Llama-3.1-8B's gains "less pronounced" than GPT-4o-mini's: AceMAD (T=3) over the best MAD on Table
    5's benchmarks, the Llama run's gain minus the main run's (two samples: CI from the two CIs, normal)."""
    claim, line = "Table 5 (Llama-3.1-8B): gains smaller than GPT-4o-mini's", "l.1069, Table 5"
    paper5, paper2 = TB.paper_table("table5_llama8b"), TB.paper_table("table2_main_results", model="GPT-4o-mini")
    cols = [c for c in paper5.columns if c != "method" and not c.startswith("Average")]
    mine = [float(np.mean([paper_gain(p, "AceMAD (T=3)", MAD_LABELS, c) for c in cols])) for p in (paper5, paper2)]
    theirs = mine[0] - mine[1]  # the printed cells' gain over the best MAD per benchmark, averaged
    if llama is None or main is None:
        return row(claim, line, theirs, note="the Llama run or the main run not made in this profile")
    gains = []
    for _, recs in (llama, main):
        keep = [r for r in recs if bench_key(r["benchmark"]) in cols]
        t = TB.versus_best(keep, ["AceMAD (T=3)"], [m for m in MAD_LABELS if any(r["method"] == m for r in keep)])
        t = t[t.benchmark == TB.AVERAGE]
        if t.empty:
            return row(claim, line, theirs, note="no paired gain on Table 5's benchmarks")
        gains.append(t.iloc[0])
    d = gains[0].gain - gains[1].gain
    se = math.hypot(*((g.gain_hi - g.gain_lo) / 3.92 for g in gains))
    lo, hi = d - 1.96 * se, d + 1.96 * se
    verdict = HOLDS if hi < 0 else FAILS if lo >= 0 else INCONCLUSIVE
    note = f"Llama's gain {gains[0].gain:+.1f} minus GPT-4o-mini's {gains[1].gain:+.1f} on {', '.join(cols)}"
    return row(claim, line, theirs, _ci(d, lo, hi), int(gains[0].n_paired), verdict, note, ci=(lo, hi))


def _other_run(runs: dict, table: str) -> Optional[RunData]:
    return next((v for k, v in runs.items() if k.startswith("other_") and k.endswith(table)), None)


def _flag(rows: list[dict], run: Optional[RunData]) -> list[dict]:
    flag = standin_note(run[0]) if run is not None else ""
    for r in rows if flag else []:
        r["note"] = f"{flag}; {r['note']}" if r["note"] else flag
    return rows


def _decide(r: dict) -> str:
    """A row's outcome once the adjusted p is known (gain / loss rows); others keep theirs. A CI that excludes
    the paper's claimed effect without showing the claimed direction is a precise null (NULL), not inconclusive."""
    if r["_kind"] not in ("gain", "loss") or not r["_ci"]:
        return r["verdict"]
    lo, hi = r["_ci"]
    claimed = r["_claimed"]
    if r["_kind"] == "loss":
        v = loss_verdict(lo, hi, r["p (Holm)"])
        return NULL if v == INCONCLUSIVE and claimed < 0 and lo > claimed else v
    v = gain_verdict(lo, hi, r["p (Holm)"])
    v = INCONCLUSIVE if v == HOLDS and r.get("_cap") else v
    return NULL if v == INCONCLUSIVE and claimed > 0 and hi < claimed else v


def needed(r: dict, m: int) -> int:
    """The questions a row's verdict needs on a real model: 80% power at Holm's first-step level over the ledger's
    m tests, for the paper's claimed effect (MIN_EFFECT where it prints none; FLAT_MARGIN for "flat") at the
    observed discordance (at least the effect: all discordant pairs one way); an exact value: to tell it from one
    MIN_EFFECT points away (discordance 0.25, a proportion's largest variance)."""
    alpha = PW.holm_alpha(max(m, 1), ALPHA)
    if r["_kind"] == "value":
        return PW.n_needed(MIN_EFFECT / 100, 0.25, alpha, POWER)
    claimed = r["_claimed"]
    flat = r["_kind"] == "judged"
    effect = FLAT_MARGIN / 100 if flat else abs(claimed) / 100 if claimed == claimed and claimed else MIN_EFFECT / 100
    psi = r["_psi"] if r["_psi"] == r["_psi"] else 0.0
    return PW.n_needed(effect, min(max(psi, effect), 1.0), alpha, POWER)


def same_model(ours: str, paper: str) -> bool:
    """Is the profile's model the paper's (its name in ours, case and punctuation aside: gpt-4o-mini-2024-07-18)?"""
    key = lambda x: "".join(ch for ch in x.lower() if ch.isalnum())  # noqa: E731
    return bool(ours) and key(paper) in key(ours)


def _real_model(r: dict, m: int, model: str) -> str:
    """A real model's outcome: an exact value of another model is not comparable; a verdict from fewer questions
    than 80% power needs is underpowered (no supported / not supported from a handful of questions)."""
    v = r["verdict"]
    if v == NOT_RUN or (r["_kind"] == "judged" and not r["_ci"] and r["p"] != r["p"]):
        return v
    if r["_kind"] == "value" and not same_model(model, r["_model"]):
        return ANOTHER_MODEL
    need = needed(r, m)
    return f"{UNDERPOWERED} (n = {r['n']} of the ~{need:,} needed)" if r["n"] < need else v


def _word(verdict: str, kind: str, synthetic: bool) -> str:
    if verdict == NOT_RUN or verdict.startswith((UNDERPOWERED, ANOTHER_MODEL)):
        return verdict
    if synthetic and kind == "value":
        return NOT_COMPARABLE  # a simulation's accuracy is no measurement of the paper's models
    words = (
        {HOLDS: HOLDS_SIM, FAILS: FAILS_SIM, NULL: NULL_SIM} if synthetic else {HOLDS: SUPPORTED, FAILS: NOT_SUPPORTED}
    )
    return words.get(verdict, verdict)


def finalize(rows: list[dict], synthetic: bool, model: str = "") -> pd.DataFrame:
    """The ledger: Holm across every row's paired test, each row's outcome from its CI and adjusted p, on a real
    model (`model`) the power and same-model gates, the conjunction rows from their parts, then the profile's
    words (synthetic: "... in the simulation")."""
    adjusted = adjust_pvalues(np.array([r["p"] for r in rows], dtype=float), ADJUSTMENT)
    m = int(np.isfinite(adjusted).sum())
    for r, a in zip(rows, adjusted):
        r["p (Holm)"] = a
        r["verdict"] = _decide(r)
        if r["verdict"] == INCONCLUSIVE and r["p"] < ALPHA <= a:
            r["note"] = (r["note"] + "; " if r["note"] else "") + f"p < {ALPHA:g} before the Holm correction only"
        if not synthetic and r["_kind"] != "all":
            r["verdict"] = _real_model(r, m, model)
    outcome = {r["claim"]: r["verdict"] for r in rows}
    for r in rows:
        if r["_kind"] == "all":
            parts = {outcome[c] for c in r["_of"]}
            low = sorted(p for p in parts if p.startswith(UNDERPOWERED))
            r["verdict"] = (
                HOLDS
                if parts == {HOLDS}
                else FAILS
                if FAILS in parts
                else low[0]
                if low
                else NULL
                if NULL in parts
                else INCONCLUSIVE
            )
    for r in rows:
        r["verdict"] = _word(r["verdict"], r["_kind"], synthetic)
    return pd.DataFrame(rows, columns=COLUMNS)


def _rows(e: dict, runs: dict, ctx: dict) -> list[dict]:
    """One claim's rows (an entry of data/claims.yaml): its test on its run, or one `not run` row."""
    claim, line = e["claim"].format(n=ctx["n"]), e["line"]
    names = e.get("run") or []
    run = next((r for r in (_run(runs, n) for n in ([names] if isinstance(names, str) else names)) if r), None)
    if e["test"] in ("table", "table1"):
        return _table(e, run if e["test"] == "table" else ctx["t1"], claim, ctx)
    if e["test"] == "table1_value":
        acc = _accuracy(ctx["t1"][1], ctx["at_n"][e["method"]]) if ctx["t1"] and e["method"] in ctx["at_n"] else None
        if acc is None:
            return [row(claim, line, f"{e['value']:.2f}", note=NOT_MADE)]
        return [_value_row(claim, line, e["value"], acc[:3], acc[3], "accuracy in %", signed=False)]
    if e["test"] == "smaller":
        return _flag([_smaller_row(_run(runs, names[0]), runs.get("main"))], _run(runs, names[0]))
    if run is None:
        return [row(claim, line, *NOT_RUN_ROW.get(e["test"], (None, NOT_MADE)))]
    return TESTS[e["test"]](e, run, claim, ctx)


NOT_MADE = "run not made in this profile"
NOT_RUN_ROW = {  # (the paper's number, the note) of a claim whose run is missing
    "trend": ("(figure)", NOT_MADE),
    "still_rising": ("(figure)", NOT_MADE),
    "plateau": ("(figure)", ""),
    "accuracy": ("49.92", ""),
    "standard_mad": ("+20.31", ""),
    "collapse": ("-14.6", ""),
    "recovery": ("(no number)", "notebook 05's run not made in this profile"),
    "arc_voting": ("75.00", NOT_MADE),
    "no_penalty": ("(no number)", NOT_MADE),
    "beats_every": (None, ""),
    "pronounced": (None, ""),
}


def _run(runs: dict, name: str) -> Optional[RunData]:
    """A run by experiment name; other_<table>: notebook 07's run of that printed table, whichever its model."""
    if name.startswith("other_"):
        return next((v for k, v in runs.items() if k.startswith("other_") and k.endswith(name[6:])), None)
    return runs.get(name)


def _table(e: dict, run: Optional[RunData], claim: str, ctx: dict) -> list[dict]:
    """Tables 1, 3, 4, 5, 6 and Table 2's Qwen block: each target's gain over the best of the baselines."""
    table, model = e["paper"] if isinstance(e["paper"], list) else (e["paper"], None)
    paper = TB.paper_table(table, model=model)
    base = [m for m in MAD_LABELS if m in set(paper["method"])] if e.get("baselines") == "MADs" else e.get("baselines")
    targets = e["targets"]
    if e["test"] == "table1":  # labels carry N
        targets = [(ctx["at_n"].get(k, p), p, ["Majority Voting"]) for k, p in targets.items()]
        base = [ctx["at_n"].get(e["baseline"], "Majority Voting")]
    elif targets == "variants":
        variants = [lab for lab in (run[0]["methods"] if run else []) if lab.startswith("AceMAD")]
        targets = variants or ["AceMAD (Different Persona)"]
    kind, columns = e.get("kind", "gain"), e.get("columns", ())
    out = table_claims(run, paper, claim=claim, line=e["line"], targets=[tuple(t) if isinstance(t, list) else t
                       for t in targets], baselines=base, per_benchmark=e.get("per_benchmark", False),
                       columns=columns, kind=kind)  # fmt: skip
    if e["targets"] == "variants" and run and DIFFERENT_LLMS not in targets:  # SECOND_MODEL empty: one endpoint
        note = "skipped: SECOND_MODEL is empty (one endpoint only)"
        out.append(row(f"{claim}: {DIFFERENT_LLMS}", e["line"], None, note=note))
    if e.get("own_block"):  # Qwen's block: T=2 above T=3, against "T=3 emerges as the optimal" (l.459)
        avg = paper.set_index("method")["Average (printed)"]
        better = [f"{m} {avg[m]:.2f}" for m in avg.index if m.startswith("AceMAD (T=") and avg[m] > avg["AceMAD (T=3)"]]
        for r in out if better else []:
            r["note"] += f"; THE PAPER'S OWN BLOCK has T=3 ({avg['AceMAD (T=3)']:.2f}) below {', '.join(better)}"
    return _flag(out, run) if str(e.get("run", "")).startswith("other_") else out


def _main(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    """Table 2's GPT-4o-mini claims on notebook 03's run, against the paper's printed block."""
    meta, recs = run
    t3, line, paper = "AceMAD (T=3)", e["line"], TB.paper_table("table2_main_results", model="GPT-4o-mini")
    if t3 not in meta["methods"]:
        return [row(claim, line, None, note="T=3 not in this profile's ROUNDS")]
    base, test = paper_baselines(meta, t3), e["test"]
    if test == "beats_every":
        out = gain_rows(claim, line, recs, t3, base, paper=paper, per_benchmark=True)
        return out + [_every_row(out, e["every"], line)]
    if test == "pronounced":
        return [pronounced_row(claim, line, recs, t3, base, paper)]
    if test == "accuracy":
        acc = _accuracy(recs, t3)
        if acc is None:
            return []
        cells = paper.set_index("method")
        r = _value_row(
            claim, line, float(cells["Average (printed)"][t3]), acc[:3], acc[3], "accuracy in %", signed=False
        )
        return [{**r, "paper (recomputed)": f"{cells['Average (recomputed)'][t3]:.2f} (the mean of its cells)"}]
    if test == "relative":
        return _relative_row(recs, t3, paper, line)
    if test == "standard_mad":
        return _standard_mad_row(recs, t3, meta, paper)
    others = [lab for lab in _labels(meta, "acemad") if lab != t3]
    against = {"other T": others, "T=5": [lab for lab in others if meta["methods"][lab].get("rounds") == 5]}
    columns = e.get("columns", ())
    return gain_rows(claim, line, recs, t3, against[e["baselines"]] if isinstance(e["baselines"], str) else e["baselines"], paper=paper,
                     per_benchmark=bool(columns), columns=columns)  # fmt: skip


def _ablation(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    """Figure 4 (l.511) and l.111 on notebook 05's run: the full protocol re-decided without peer prediction."""
    if "ablation" not in ctx:
        meta, recs = run
        [label] = [lab for lab, c in meta["methods"].items() if c["method"] == "acemad"]
        full, ace = meta["methods"][label], [r for r in recs if r["method"] == label]
        eta, k = full["eta"], full["weight_exponent"]
        ctx["ablation"] = ace, A.reweighted_records(ace, A.ABLATIONS, eta=eta, exponent=k, seed=ctx["seed"])
    ace, re = ctx["ablation"]
    names, test, line = list(A.ABLATIONS), e["test"], e["line"]
    if test == "recovery":
        return recovery_rows(ace, re, names[0], names[2])
    if test == "collapse":
        out = _collapse_row(re, names[0], names[1])
    elif test == "ablation_pronounced":
        out = [pronounced_row(claim, line, re, names[0], names[1:2])]
    else:
        per = e.get("per_benchmark", False)
        out = gain_rows(
            claim, line, re, names[0], names[1:] if e["against"] == "both" else names[1:2], per_benchmark=per
        )
    return _figure4(out)


def _standard_agents(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    """Full protocol against Standard MAD as the paper's bar means it: Decentralized MAD with AceMAD's agents."""
    methods = run[0]["methods"]
    ctrl = [lab for lab, c in methods.items() if c.get("roster") == "acemad" and c["method"] == "decentralized"]
    ace3 = [lab for lab, c in methods.items() if c["method"] == "acemad" and c["rounds"] == 3]
    return _figure4(gain_rows(claim, e["line"], run[1], ace3[0], ctrl) if ctrl and ace3 else [])


def _figure4(rows: list[dict]) -> list[dict]:
    for r in rows:
        r["note"] = (r["note"] + "; " if r["note"] else "") + "Figure 4 prints no numbers"
    return rows


def _arc_voting(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    mv = _accuracy(run[1], "Majority Voting")
    arc = [r for r in run[1] if bench_key(r["benchmark"]) == "ARC-C"]
    acc = _accuracy(arc, "Majority Voting") if arc and mv else None
    if acc is None:
        return _flag([row(claim, e["line"], f"{e['value']:.2f}", note=NOT_MADE)], run)
    out = _value_row(claim, e["line"], e["value"], acc[:3], acc[3], "accuracy in %", signed=False, model=e["model"])
    return _flag([out], run)


TESTS = {
    "trend": lambda e, run, claim, ctx: _trend_rows(run, e["method"], claim, e["line"], e["n_max"]),
    "still_rising": lambda e, run, claim, ctx: [_still_rising(run, claim, e["line"])],
    "plateau": lambda e, run, claim, ctx: [_plateau(run, claim, e["line"])],
    **dict.fromkeys(("beats_every", "pronounced", "accuracy", "relative", "standard_mad", "main_gain"), _main),
    **dict.fromkeys(("ablation", "collapse", "ablation_pronounced", "recovery"), _ablation),
    "standard_agents": _standard_agents,
    "arc_voting": _arc_voting,
    "no_penalty": lambda e, run, claim, ctx: [no_penalty_row(run)],
}
CLAIMS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "claims.yaml").read_text(encoding="utf-8"))


def _claim_rows(runs: dict, seed: int) -> list[dict]:
    t1 = runs.get("baselines")
    n, t1_at_n = _at_n(t1, 5) if t1 else (5, None)
    at_n = {c["method"]: lab for lab, c in (t1_at_n[0]["methods"] if t1_at_n else {}).items()}  # labels carry N
    ctx, rows = {"n": n, "t1": t1_at_n, "at_n": at_n, "seed": seed}, []
    for e in CLAIMS:
        rows += _rows(e, runs, ctx)
    if "full_datasets" in runs:  # notebook 07 ran: a table without its run was left out of OTHER_MODELS
        for r in rows:
            if "not made in this profile" in r["note"] and r["claim"].startswith(("Table 2 (", "Table 4", "Table 5")):
                r["note"] = "skipped: OTHER_MODELS names no model for this table (e.g. one endpoint only); " + r["note"]
    return rows


def ledger(runs: dict, seed: int = 0) -> pd.DataFrame:
    """Every claim's row, from the runs of notebooks 02-07 ({experiment name: (meta, records)}; a missing run
    gives `not run` rows). The verdict words follow the runs: synthetic ones speak of the simulation."""
    with TB.frames_reused():  # the claims below table the same runs' records again and again, never changing them
        rows = _claim_rows(runs, seed)
    synthetic, model = source(runs)
    return finalize(rows, synthetic, model)


DIFFERENT_LLMS = "AceMAD (Different LLMs)"  # notebook 04's row that needs a second model (registry.heterogeneity)


def lean(name: str, meta: dict, record: dict) -> dict:  # name: "<profile>/<experiment>", as load_run gets it
    """What the ledger keeps of a record as it is read (transcripts.load_run's `keep`): its scalars and its
    final answer, not the per-round transcript that is most of its size, except for the ablation run's AceMAD
    debates, which ablation_claims re-weights from their rounds, and the full test sets' (no_penalty_row reads their
    round 1). Reading every record whole took 2.17 GB."""
    config = meta["methods"].get(record.get("method"), {})
    if name.rsplit("/", 1)[-1] in ("ablation", "full_datasets") and config.get("method") == "acemad":
        return record
    return {k: v for k, v in record.items() if k == "final" or not isinstance(v, (list, dict))}


def title(synthetic: bool, source: str, *, smoke: bool = False) -> str:
    """The ledger's title; `smoke` (smoke_test(runs): the local model) says it is no evidence."""
    if source == NO_RUNS:
        return f"Claims ledger [{source}]: no run of this profile was found (failed or not made): all claims not run"
    if smoke:
        return f"Claims ledger [{source}]: a smoke test of the pipeline on a few questions, not evidence"
    if synthetic:
        return (
            f"Claims ledger [{source}]: the verdicts describe the synthetic population on generated items "
            "('... in the simulation'), not the paper's models"
        )
    return f"Claims ledger [{source}]: the paper's claims tested on this model"


BASE_POINT = "the profile's population"  # the grid's reference point: no assumption moved, the grid's n


def by_construction(claim: str, params: dict, shares: dict) -> str:
    """Why a structural choice of the synthetic population or items pins a row (empty when none does). `shares`:
    {N: the truth-holders AceMAD's roster has at N}."""
    if claim.startswith(("Table 1", "Decentralized MAD improves monotonically")) and not params.get("crowd_insight"):
        return (
            "by construction: the baselines' agents share one persona with crowd_insight = 0 (none sees through the "
            "trap) and update symmetrically (one susceptibility, Eq. 1), so a debate keeps the mean belief and "
            "decides as Majority Voting does (Proposition 1)"
        )
    if claim.startswith("Table 1"):
        return (
            f"with crowd_insight = 0 (the original population) MAD would equal Majority Voting by construction (one "
            f"persona, symmetric updating); here Generalists see through the trap with P = {params['crowd_insight']:g}"
            if params.get("crowd_insight")
            else ""
        )
    if claim.startswith("Majority Voting stays flat"):
        return (
            "by construction: the challenging subsets keep the items the naive agent fails in most of its 5 runs "
            "(a strong shared trap), on which more votes converge on the trap"
        )
    if claim.startswith(("AceMAD improves from N=1", STILL_RISING, "AceMAD plateaus")) and shares:
        steps = ", ".join(f"N={n}: {k}" for n, k in sorted(shares.items()))
        return (
            "by construction: the curve steps with the rounding of the truth-holders' 20% share "
            f"(Skeptics by N: {steps}); it rises where a Skeptic is added and is flat between"
        )
    if claim.startswith("Table 4 (DeepSeek-V3.1): AceMAD slightly below"):
        return (
            "by construction: the stand-in's TruthfulQA items differ from its other benchmarks only in their option "
            "count (K = 5); nothing in the population makes TruthfulQA an exception"
        )
    return ""


def truth_holders(runs: dict) -> dict:
    """{N: Skeptics in AceMAD's roster at N} over the N of the scaling run (notebook 06), {} without it."""
    meta = runs["scaling"][0] if "scaling" in runs else {"methods": {}}
    ns = sorted({c["n_agents"] for c in meta["methods"].values() if c["method"] == "acemad"})
    return {n: sum(s.persona == SKEPTIC.persona for s in DebateConfig(method="acemad", n_agents=n).specs()) for n in ns}


def deciding(ledger: pd.DataFrame, grid: dict, runs: dict) -> pd.DataFrame:
    """The ledger with a DECIDED_BY column: for each row of a synthetic profile, "by construction: <why>" where a
    structural choice pins it, and over the assumption grid ({point name: that point's ledger}, BASE_POINT the
    profile's population at the grid's n) which points make it hold and which make it fail ("holds in the
    simulation where ...; fails in the simulation where ..."), or that no point moved it. Per-benchmark rows say
    that the synthetic benchmarks differ only in K; stand-in rows are not varied."""
    verdicts = {name: g.set_index("claim").verdict.map(category) for name, g in grid.items()}
    params, shares, out = _params(runs), truth_holders(runs), []
    for r in ledger.to_dict("records"):
        why = by_construction(r["claim"], params, shares)
        if "stand-in" in r["note"].lower() and not why:
            out.append("a stand-in's parameters chosen from the paper's wording (notebook 07); not varied")
            continue
        if r["verdict"] in (NOT_RUN, NOT_COMPARABLE):
            out.append(why or ("an exact value: compared on a real model only" if r["verdict"] != NOT_RUN else ""))
            continue
        seen = {n: v[r["claim"]] for n, v in verdicts.items() if r["claim"] in v.index and v[r["claim"]] != NOT_RUN}
        where = _where(seen) if BASE_POINT in seen else "not recomputed over the grid"
        text = f"{why}; over the grid: {where}" if why else where
        if "(synthetic items)" in r["claim"]:
            text += "; the synthetic benchmarks differ only in their option count K"
        out.append(text)
    return ledger.assign(**{DECIDED_BY: out})


def _where(seen: dict) -> str:
    """ "fails in the simulation where A, B; inconclusive at this n where C; holds in the simulation elsewhere (the
    profile's population and k more)": the points whose verdict differs from the profile's, by verdict."""
    base, groups = seen[BASE_POINT], dict[str, list]()
    for name, v in seen.items():
        if v != base:
            groups.setdefault(v, []).append(name)
    if not groups:
        return f"{base} at every point of the grid ({len(seen) - 1} assumptions moved one at a time)"
    rest = len(seen) - 1 - sum(map(len, groups.values()))
    flips = "; ".join(f"{v} where {', '.join(names)}" for v, names in groups.items())
    return f"{flips}; {base} elsewhere ({BASE_POINT}" + (f" and {rest} more)" if rest else ")")


def category(verdict: str) -> str:
    """The verdict's word without its numbers ("underpowered (n = 8 of the ~90 needed)" -> "underpowered")."""
    return next((v for v in VERDICTS if verdict == v or verdict.startswith(v + " (")), verdict)


def counts(ledger: pd.DataFrame) -> dict:
    """{verdict: rows} in a fixed order, the verdicts that occur (for the notebook's summary line)."""
    cats = ledger.verdict.map(category)
    n = {v: int((cats == v).sum()) for v in VERDICTS}
    return {v: k for v, k in n.items() if k}


def _link(params: dict) -> str:
    """The population's link between knowing the truth and predicting the crowd, in words."""
    if "knowledge_link" not in params:  # the persona model of earlier runs
        sk, cr = params.get("skeptic_calibration", "?"), params.get("crowd_calibration", "?")
        return f"peer-prediction skill assigned by persona (every Skeptic calibration {sk}, everyone else {cr})"
    if params.get("calibration_by") == "persona":
        cal = params.get("insight_calibration")
        return f"calibration_by='persona' (every Skeptic calibration {cal}, whatever it knows on the item)"
    link = float(params["knowledge_link"])
    what = (
        "only agents that see through the trap predict the crowd"
        if link == 1
        else "peer-prediction skill unrelated to knowing the truth"
        if link == 0
        else f"peer-prediction skill follows knowing the truth with probability {link:g}"
    )
    return (
        f"knowledge_link={link:g} ({what}; insight_calibration={params.get('insight_calibration')}, "
        f"crowd_calibration={params.get('crowd_calibration')})"
    )


def _params(runs: dict) -> dict:
    metas = [m for m, _ in runs.values()]
    meta = runs["main"][0] if "main" in runs else (metas[0] if metas else {})
    return (meta.get("population") or {}).get("params") or {}


def assumption(runs: dict) -> str:
    """The population assumption a synthetic ledger's holding verdicts rest on most (read from the main run's
    meta, else any run's): the link between knowing the truth and predicting the crowd."""
    return _link(_params(runs))


#: The population's assumptions no printed number fixes, beside knowledge_link (registry.LEDGER_GRID varies them)
NAMED = {
    "insight": "P(the Skeptic sees through the trap)",
    "crowd_insight": "the same for a Generalist",
    "insight_susceptibility": "the truth-holder's susceptibility",
    "crowd_susceptibility": "the crowd's",
    "trap_mean": "the shared trap's pull",
    "crowd_copy": "P that a Generalist copies its roster twin's state, times 1 - temperature",
}


def assumptions(runs: dict) -> str:
    """Every assumption of the population a synthetic ledger's verdicts rest on, with its value in this run."""
    params = _params(runs)
    named = [f"{k}={params[k]:g} ({what})" for k, what in NAMED.items() if isinstance(params.get(k), (int, float))]
    copies = "" if "crowd_copy" in params else "; the Generalists drawn as independent agents"
    return f"{_link(params)}; {', '.join(named)}{copies}; K options fixed per benchmark"


def smoke_test(runs: dict) -> bool:
    """A run of the local model (llama.cpp, a 135M model on a few demo questions): the pipeline, not evidence."""
    return any(m.get("backend") == "local" for m, _ in runs.values())


def summary(ledger: pd.DataFrame, runs: dict, label: str) -> str:
    """The notebook's SUMMARY line: counts (stand-in rows apart), the correction, and what the verdicts rest on:
    (synthetic) every assumption of the population and the grid's flips, (real model) the power rule."""
    tests = int(ledger["p"].notna().sum())
    standin = ledger.note.str.contains("stand-in", case=False) & (ledger.verdict != NOT_RUN)
    said = ", ".join(f"{n} {v}" for v, n in counts(ledger[~standin]).items())
    line = f"SUMMARY: [{label}] {len(ledger)} claims: {said} (Holm across {tests} paired tests)."
    if standin.any():
        apart = ", ".join(f"{n} {v}" for v, n in counts(ledger[standin]).items())
        n = int(standin.sum())
        line += (
            f" Apart: {n} rows of notebook 07's synthetic stand-ins ({apart}): they test the code path, not the models."
        )
    if runs and not source(runs)[0]:
        rule = (
            f" A gain is supported or not only with the questions that give it {POWER:.0%} power at the Holm "
            "first-step level; an exact value only on the paper's own model."
        )
        if smoke_test(runs):
            return line + rule + " This local-model ledger is a smoke test of the pipeline, not evidence."
        return line + rule
    if not runs:
        return line
    if DECIDED_BY in ledger:
        flips = ledger[DECIDED_BY].str.contains(" elsewhere (", regex=False)
        built = ledger[DECIDED_BY].str.startswith("by construction")
        line += (
            f" Over the assumption grid (each assumption moved one at a time) {int(flips.sum())} rows change verdict "
            f"(their '{DECIDED_BY}' names where) and {int(built.sum())} are pinned by construction."
        )
    return (
        f"{line} Every synthetic verdict rests on the population's assumptions: {assumptions(runs)}; "
        "none of it is evidence for the paper: that needs a real-model profile (BACKEND openai or local)."
    )


def source(runs: dict) -> tuple[bool, str]:
    """(synthetic?, model) of the runs, for figures.source_label: synthetic when any run is; the main run's model.
    No runs (a real-model profile whose run failed) are neither: (False, ""), labelled NO_RUNS, never SYNTHETIC."""
    metas = [m for m, _ in runs.values()]
    main = runs["main"][0] if "main" in runs else (metas[0] if metas else {})
    return any(m.get("synthetic") for m in metas), main.get("model") or ""
