"""The claims ledger: data/claims.yaml's claims decided on runs {name: (meta, records)} (rules: docs/statistics.md)."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import asdict
from pathlib import Path
from statistics import NormalDist
from typing import Optional

import numpy as np
import pandas as pd
import yaml

from acemad_utils.data.sim_params import SYNTHETIC_SLUG, SimParams
from acemad_utils.data.transcripts import Lean
from acemad_utils.protocol.config import ETA, SKEPTIC, DebateConfig, at_paper_eta
from acemad_utils.report import power as PW
from acemad_utils.report import rescoring as A
from acemad_utils.report import tables as TB
from acemad_utils.report.stats import (
    adjust_pvalues,
    bootstrap_ci,
    exact_if_constant,
    interval,
    resample_indices,
    snapped,
)
from acemad_utils.report.words import listed

CLAIMS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "claims.yaml").read_text(encoding="utf-8"))
HOLDS, FAILS, INCONCLUSIVE, NOT_RUN = "holds", "fails", "inconclusive at this n", "not run"  # internal outcomes
NULL = "no effect of the claimed size"  # neither holds nor fails, and the CI stops short of the claimed effect
NOT_COMPARABLE, ANOTHER_MODEL = "not comparable", "not comparable: another model"
UNDERPOWERED = "underpowered"  # "underpowered (n = k of the ~N needed)"
SUPPORTED, NOT_SUPPORTED = "supported", "not supported"  # a real-model profile's words
HOLDS_SIM, FAILS_SIM = "holds in the simulation", "fails in the simulation"  # a synthetic profile's words
NULL_SIM = f"{NULL} in the simulation"
WORDS = {False: {HOLDS: SUPPORTED, FAILS: NOT_SUPPORTED}, True: {HOLDS: HOLDS_SIM, FAILS: FAILS_SIM, NULL: NULL_SIM}}
VERDICTS = (SUPPORTED, NOT_SUPPORTED, HOLDS_SIM, FAILS_SIM, NULL_SIM, NULL, INCONCLUSIVE, UNDERPOWERED, ANOTHER_MODEL,
            NOT_COMPARABLE, NOT_RUN)  # fmt: skip
POWER, ALPHA = 0.8, 0.05  # a real-model verdict needs the n that gives the claim this power at Holm's first step
Z95 = NormalDist().inv_cdf(0.975)  # a 95% CI's half-width in standard errors
MIN_EFFECT = 5.0  # points: the effect a claim without a printed number (a figure's) is powered for
FLAT_MARGIN = 2.0  # points: "flat" / "plateaus" holds when the paired change's CI stays below this
PAPER_MODEL = "GPT-4o-mini"  # the model of Tables 1-2 (its block), 3, 6, Figures 2, 4, 5 and the introduction
COLUMNS = ["claim", "paper line", "paper", "paper (recomputed)", "ours [95% CI]", "n", "p", "p (Holm)", "verdict",
           "note"]  # fmt: skip
#: What a row rests on when the grid names no assumption that moves it (the ledger's summary lists them).
WHOLE = "it rests on the population's assumptions as a whole (the summary names them)"
DECIDED_BY = "decided by"  # the assumption-grid column (deciding): which assumptions flip the row, or why none can
MAD_LABELS = ("Decentralized MAD", "Centralized MAD", "Sparse MAD")
PRONOUNCED = ("BBH", "ARC-C")
DIFFERENT_LLMS = "AceMAD (Different LLMs)"  # notebook 04's row that needs a second model (registry.heterogeneity)
NOT_MADE, NO_SECOND = "run not made in this profile", "SECOND_MODEL is empty (one endpoint only)"
FIGURE4 = "Figure 4 prints no numbers"
RunData = tuple[dict, list]
_paper = functools.lru_cache(maxsize=None)(TB.paper_table)  # read-only here: a ledger reads each table many times


def gain_verdict(lo: float, hi: float, p_adjusted: float = 0.0) -> str:
    """Holds or fails only past the Holm correction: a refutation is a claim too, held to the bar of a confirmation.
    A claimed loss is the gain of the reverse comparison: gain_verdict(-hi, -lo, p)."""
    significant = p_adjusted < ALPHA
    return HOLDS if lo > 0 and significant else FAILS if hi <= 0 and significant else INCONCLUSIVE


def value_verdict(value: float, lo: float, hi: float, null: Optional[float] = None) -> str:
    """A claimed value from our CI: held (and the null excluded), not held, or both held (no CI: inconclusive)."""
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    return FAILS if not lo <= value <= hi else INCONCLUSIVE if null is not None and lo <= null <= hi else HOLDS


def flat_verdict(lo: float, hi: float) -> str:
    """ "No rise" (flat, plateau, "or even degradation", l.223): a decline is consistent, a rise fails it."""
    return HOLDS if hi < FLAT_MARGIN else FAILS if lo > 0 else INCONCLUSIVE


def no_drop_verdict(lo: float, hi: float) -> str:
    """ "Still rising at N=10": N=10 minus the best smaller N; below 0 the curve peaked earlier."""
    return FAILS if hi < 0 else HOLDS if lo > -FLAT_MARGIN else INCONCLUSIVE


def row(claim, line, paper, ours="", n=0, verdict=NOT_RUN, note="", *, kind="judged", p=math.nan, ci=(), psi=math.nan,
        model=PAPER_MODEL, recomputed="", again=math.nan) -> dict:  # fmt: skip
    """One row; kind gain/loss: decided in finalize from `ci`; psi: the discordance (or discordance's arguments)."""
    claimed = float(paper) if isinstance(paper, (int, float)) else math.nan
    paper = paper if isinstance(paper, str) else f"{paper:+.2f}" if paper is not None else "-"
    out = dict(zip(COLUMNS, (claim, line, paper, recomputed, ours, n, p, math.nan, verdict, note)))
    # the effect a verdict is held to: the smaller of the printed number and what the paper's own cells give (`again`)
    effect = again if again == again and claimed == claimed and abs(again) < abs(claimed) else claimed
    return {**out, "_kind": kind, "_ci": ci, "_claimed": effect, "_psi": psi, "_model": model}


def _ci(x: float, lo: float, hi: float, signed: bool = True) -> str:
    spec = "+.1f" if signed else ".1f"
    return f"{x:{spec}} {interval(lo, hi, spec)}"


def bench_key(benchmark: str) -> str:
    """The paper's column for one of our benchmarks ('synthetic-arc_challenge' -> 'ARC-C')."""
    return benchmark if benchmark == TB.AVERAGE else TB.BENCH_LABELS.get(benchmark.removeprefix("synthetic-"), "")


def paper_gain(paper, target: str, baselines: Sequence[str], column: str, *, recomputed: bool = False):
    """The printed cell of `target` minus the best of `baselines` (None if absent); recomputed: the Average of cells."""
    col = f"Average ({'recomputed' if recomputed else 'printed'})" if column == TB.AVERAGE else column
    cells = dict(zip(paper["method"], paper[col])) if col in paper else {}
    if column == TB.AVERAGE and recomputed:  # from the cells, not the shown Average (rounded to 2 places)
        cells = dict(zip(paper["method"], paper[_columns(paper)].mean(axis=1)))
    if target not in cells or not any(b in cells for b in baselines):
        return None
    return float(cells[target] - max(cells[b] for b in baselines if b in cells))


def _columns(paper: pd.DataFrame) -> list[str]:
    return [c for c in paper.columns if c not in ("method", "model") and not c.startswith("Average")]


def against_itself(paper: pd.DataFrame, target: str, baselines: Sequence[str], columns: Sequence[str] = (), *,
                   every_cell: bool = True) -> str:  # fmt: skip
    """A note naming the paper's own cells where `target` does not beat the best of `baselines`: a contradiction
    of a claim made for every cell ("consistently"), only a remark beside a claim about the whole table."""
    gains = {c: paper_gain(paper, target, baselines, c) for c in _columns(paper) if not columns or c in columns}
    bad = ", ".join(f"{c} {g:+.2f}" for c, g in gains.items() if g is not None and g <= 0)
    if not bad:
        return ""
    if every_cell:
        return f"THE PAPER'S OWN CELLS CONTRADICT IT: {target} minus the best of them {bad}"
    return f"the paper's own cells are not above them everywhere ({target} minus the best {bad}; a claim not per cell)"


def gain_rows(claim, line, records, target, baselines, *, paper=None, paper_target="", paper_baselines=(),
              per_benchmark=False, columns=(), kind="gain", every_cell=None, seed=0) -> list[dict]:  # fmt: skip
    """target's paired gain over the best of `baselines` (Average; per benchmark: `columns`) and the paper's;
    every_cell: None, no note on the paper's own cells; else against_itself's note beside the Average."""
    tests = TB.versus_best(records, [target], list(baselines), per_benchmark=per_benchmark, seed=seed)
    pt, pb, out = paper_target or target, paper_baselines or baselines, []
    for t in tests.to_dict("records"):
        col, avg = bench_key(t["benchmark"]), t["benchmark"] == TB.AVERAGE
        if columns and col not in columns:
            continue
        theirs = None if paper is None else paper_gain(paper, pt, pb, col)
        again = paper_gain(paper, pt, pb, col, recomputed=True) if paper is not None and avg else None
        notes = [f"vs {t['best_baseline']}"]
        if theirs is not None and theirs <= 0 and kind == "gain":
            notes.append("THE PAPER'S OWN CELLS show no gain here")
        if every_cell is not None and paper is not None and avg:
            notes.append(against_itself(paper, pt, pb, columns, every_cell=every_cell))
        r = row(claim if avg else f"{claim}: {TB.bench_label(t['benchmark'])}", line, theirs,
                _ci(t["gain"], t["gain_lo"], t["gain_hi"]), t["n_paired"], note="; ".join(n for n in notes if n),
                kind=kind, p=float(t["p_value"]), ci=(t["gain_lo"], t["gain_hi"]),
                psi=(records, target, t["best_baseline"], "" if avg else t["benchmark"]),
                recomputed="" if again is None or theirs is None or abs(again - theirs) < 0.005
                else f"{again:+.2f} (from its cells)", again=math.nan if again is None else again)  # fmt: skip
        out.append({**r, "_col": col})
    return out or [row(claim, line, None, note=f"{target} or {list(baselines)} not in the run")]


def _paired(cells: dict, a: str, b: str, bm: str) -> tuple[np.ndarray, np.ndarray]:
    """a's and b's correctness on bm's questions both answered (a failed record: no pair), in question order."""
    x, y = cells.get((a, bm), {}), cells.get((b, bm), {})
    qs = [q for q in sorted(x.keys() & y.keys()) if x[q] == x[q] and y[q] == y[q]]
    return np.array([x[q] for q in qs]), np.array([y[q] for q in qs])


def discordance(records: list, a: str, b: str, benchmark: str = "") -> float:
    """The share of questions on which a and b differ in correctness: the paired test's noise (a real model's power)."""
    cells = _by_question(records)
    pairs = (_paired(cells, a, b, bm) for bm in {bm for _, bm in cells if not benchmark or bm == benchmark})
    differ = [d for x, y in pairs for d in x != y]
    return float(np.mean(differ)) if differ else math.nan


def relative_gain(records: list, target: str, base: str, n_boot: int = 2000, seed: int = 0) -> Optional[tuple]:
    """(target's Average over base's minus 1 in %, CI lo, hi, n paired), resampling questions within benchmarks."""
    cells = _by_question(records)  # benchmark, then question order, as a pivot has them
    ab = [pair for bm in sorted({bm for _, bm in cells}) if len((pair := _paired(cells, target, base, bm))[0])]
    if not ab:
        return None
    idx = resample_indices(seed, n_boot, tuple(len(a) for a, _ in ab))  # per benchmark, in order
    with np.errstate(divide="ignore", invalid="ignore"):
        boots = 100 * (np.mean([a[i].mean(1) for (a, _), i in zip(ab, idx)], 0)
                       / np.mean([b[i].mean(1) for (_, b), i in zip(ab, idx)], 0) - 1)  # fmt: skip
        point = 100 * (np.mean([a.mean() for a, _ in ab]) / np.mean([b.mean() for _, b in ab]) - 1)
    boots = np.where(np.isnan(boots), np.inf, boots)  # 0/0 resamples: no finite ratio
    # order statistics, not interpolation: a bound next to an inf (0/0) resample is never mixed with it
    lo, hi = snapped(np.quantile(boots, 0.025, method="lower")), snapped(np.quantile(boots, 0.975, method="higher"))
    return float(point), float(lo), float(hi), sum(len(a) for a, _ in ab)


def _labels(meta: dict, method: str) -> list[str]:
    return [lab for _, lab in sorted((c.get("n_agents", 0), lab) for lab, c in meta["methods"].items()
                                     if c["method"] == method)]  # fmt: skip


def _value_row(claim, line, claimed, stat, n, note, *, signed=True, model=PAPER_MODEL) -> dict:
    (x, lo, hi), paper = stat, f"{claimed:+.2f}" if signed else f"{claimed:.2f}"
    verdict, ours = value_verdict(claimed, lo, hi, null=0.0 if signed else None), _ci(x, lo, hi, signed=signed)
    return row(claim, line, paper, ours, n, verdict, note, kind="value", model=model, ci=(lo, hi))


def _accuracy(records: list, label: str, seed: int) -> Optional[tuple]:
    if not any(r["method"] == label for r in records):
        return None
    a = TB.accuracy_long(records, methods=[label], seed=seed)
    a = a[a.benchmark == TB.AVERAGE]
    return None if a.empty else (*(float(a[c].iloc[0]) for c in ("accuracy", "ci_lo", "ci_hi")), int(a.n.iloc[0]))


def _average_gain(records: list, a: str, b: Sequence[str], seed: int) -> Optional[dict]:
    t = TB.versus_best(records, [a], list(b), per_benchmark=False, seed=seed)
    return None if t.empty else t.iloc[0].to_dict()


def paper_baselines(meta: dict, target: str) -> list[str]:
    """The paper's baselines in a run: the homogeneous rosters of its baseline agent, not the controls."""
    agent = meta["methods"][target].get("baseline_agent")
    return [lab for lab, c in meta["methods"].items()
            if c["method"] != "acemad" and not c.get("roster") and c.get("baseline_agent") == agent]  # fmt: skip


def _by_question(recs: list) -> dict:
    """{(method, benchmark): {question: correct}} as question_frame has it: repeats averaged, a failed record NaN.
    Inside ledger() once per list: a ledger reads a run's records for several claims."""

    def cells() -> dict:
        out: dict = {}
        for r in recs:
            if (ok := r.get("status", "ok") == "ok") and r["final"]["correct"] is None:
                continue  # no gold answer: never scored
            q = out.setdefault((r["method"], r["benchmark"]), {}).setdefault(r["question_id"], [])
            q.append(float(r["final"]["correct"]) if ok else math.nan)
        mean = lambda v: sum(x) / len(x) if (x := [y for y in v if y == y]) else math.nan  # pandas' skipna
        return {k: {q: v[0] if len(v) == 1 else mean(v) for q, v in c.items()} for k, c in out.items()}

    return TB.reused(("by_question", id(recs)), recs, cells)


def pronounced_row(claim: str, line: str, recs: list, target: str, baselines: Sequence[str], paper=None,
                   seed: int = 0) -> dict:  # fmt: skip
    """ "Most pronounced on BBH and ARC-C": the mean paired gain there minus elsewhere (bootstrap within benchmarks)."""
    tests = TB.versus_best(recs, [target], list(baselines), average=False, seed=seed)
    cells, diffs = _by_question(recs), []
    for t in tests.to_dict("records"):
        x, y = _paired(cells, target, t["best_baseline"], t["benchmark"])
        diffs.append((bench_key(t["benchmark"]) in PRONOUNCED, x - y))
    theirs = None
    if paper is not None:
        gains = {c: paper_gain(paper, target, baselines, c) for c in _columns(paper)}
        top, rest = ([g for c, g in gains.items() if (c in PRONOUNCED) == k and g is not None] for k in (True, False))
        theirs = float(np.mean(top) - np.mean(rest)) if top and rest else None
    if not any(top for top, _ in diffs) or all(top for top, _ in diffs):
        return row(claim, line, theirs, note="BBH or ARC-C and another benchmark not both run")
    kept, rng = [(top, d) for top, d in diffs if len(d)], np.random.default_rng(seed)
    ns = [len(d) for _, d in kept]  # one draw per question, benchmark after benchmark, 2000 times: the stream's order
    draws = np.split(rng.integers(0, np.repeat(ns, ns), (2000, sum(ns))), np.cumsum(ns)[:-1], axis=1)
    means = np.array([d[idx].mean(1) for (_, d), idx in zip(kept, draws)])  # benchmark x draw
    on = np.array([t for t, _ in kept], dtype=bool)  # BBH or ARC-C
    boots = means[on].mean(0) - means[~on].mean(0)
    point = np.mean([d.mean() for t, d in diffs if t]) - np.mean([d.mean() for t, d in diffs if not t])
    lo, hi = (100 * float(q) for q in snapped(np.quantile(boots, [0.025, 0.975])))
    note = "mean gain on BBH and ARC-C minus the mean on the other benchmarks, points"
    verdict, n = gain_verdict(lo, hi), int(sum(len(d) for _, d in diffs))
    # the bootstrap's two-sided p (never 0: one draw beyond 0 is assumed), so the row joins the ledger's Holm family
    # and finalize judges it as every gain (Holm p, and no effect of the claimed size where its CI excludes it)
    p = min(1.0, 2 * (1 + min(int((boots <= 0).sum()), int((boots >= 0).sum()))) / (len(boots) + 1))
    return row(claim, line, theirs, _ci(100 * point, lo, hi), n, verdict, note, kind="gain", p=p, ci=(lo, hi))


def _judged_row(claim: str, line: str, test: dict, verdict, note: str, records: list) -> dict:
    """A figure's row from a paired test; verdict(lo, hi) judges it here (None: finalize does, from its CI)."""
    lo, hi, psi = test["gain_lo"], test["gain_hi"], (records, test["method"], test["best_baseline"])
    return row(claim, line, "(figure)", _ci(test["gain"], lo, hi), int(test["n_paired"]),
               verdict(lo, hi) if verdict else NOT_RUN, note, p=float(test["p_value"]), psi=psi)  # fmt: skip


def _curve(run: RunData, method: str, n_max: int) -> tuple[list, list, dict]:
    """`method`'s labels up to n_max agents, their N and Average accuracies (accuracy_long's points, no pandas)."""
    labels = _labels(run[0], method)
    ns = [run[0]["methods"][lab]["n_agents"] for lab in labels]
    upto, cells, avg = [lab for lab, n in zip(labels, ns) if n <= n_max], _by_question(run[1]), {}
    order = dict.fromkeys(b for _, b in cells)  # the benchmarks as they first appear, as accuracy_long takes them
    for m in upto:
        if means := [np.mean(v) for b in order if (v := [x for x in cells.get((m, b), {}).values() if x == x])]:
            avg[m] = 100 * float(np.mean(means))
    return upto, ns[: len(upto)], avg


# ----------------------------------------------------------------------------- each test of data/claims.yaml
def _trend(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    """Figure 2 (l.229, l.223) and 5 (l.522): the largest N up to n_max against the smallest (voting: "flat")."""
    method, line = e["method"], e["line"]
    upto, ns, avg = _curve(run, method, e["n_max"])
    g = _average_gain(run[1], upto[-1], upto[:1], ctx["seed"]) if len(upto) > 1 else None
    if g is None:
        return [row(claim, line, "(figure)", note="fewer than two N in this profile")]
    monotone = bool(np.all(np.diff([avg.get(lab, np.nan) for lab in upto]) >= 0))
    by_n = ", ".join(f"N={n}: {avg[lab]:.1f}" for lab, n in zip(upto, ns))
    flat, note = method == "majority", f"Average by N: {by_n}; {'monotone' if monotone else 'not monotone'}"
    cap = method == "decentralized" and not monotone  # not monotone: a rise of the ends alone is no "monotonically"
    # the last N against the curve's peak
    drop = _average_gain(run[1], upto[-1], upto[:-1], ctx["seed"]) if cap else None
    if drop is not None and drop["gain_hi"] < 0:  # a significant fall after the peak: "monotonically" fails
        note += f"; N={ns[-1]} minus the peak ({drop['best_baseline']}): the curve falls after it"
        g, cap = drop, False
    r = _judged_row(f"{claim} (N={ns[0]} to N={ns[-1]})", line, g, flat_verdict if flat else None, note, run[1])
    return [{**r, "_kind": "judged" if flat else "gain", "_ci": (g["gain_lo"], g["gain_hi"]), "_cap": cap}]


def _still_rising(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    upto, ns, avg = _curve(run, "acemad", 10)
    g = _average_gain(run[1], upto[-1], upto[:-1], ctx["seed"]) if len(upto) > 1 else None
    if g is None or ns[-1] != 10:
        return [row(claim, e["line"], "(figure)", note="N=10 not run in this profile")]
    peak = max(upto, key=lambda lab: avg[lab])
    note = f"N=10 minus the best smaller N ({g['best_baseline']}); the curve peaks at N={ns[upto.index(peak)]} "
    return [_judged_row(claim, e["line"], g, no_drop_verdict, note + f"({avg[peak]:.1f}%)", run[1])]


def _plateau(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    ns = {lab: run[0]["methods"][lab]["n_agents"] for lab in _labels(run[0], "acemad")}
    at10, beyond = [lab for lab, n in ns.items() if n == 10], [lab for lab, n in ns.items() if n > 10]
    if not at10 or not beyond:
        return [row(claim, e["line"], "(figure)", note="N=10 and N>10 not both run in this profile")]
    tests = TB.versus_best(run[1], beyond, at10, per_benchmark=False, seed=ctx["seed"])
    t = tests.sort_values("gain").iloc[-1].to_dict()  # the best N beyond 10
    note = f"best N>10 ({t['method']}) minus N=10; plateau = CI below +{FLAT_MARGIN:g} points (a decline is consistent)"
    return [_judged_row(claim, e["line"], t, flat_verdict, note, run[1])]


def _table(e: dict, run: Optional[RunData], claim: str, ctx: dict) -> list[dict]:
    """Tables 1, 3, 4, 5, 6 and Table 2's Qwen block: each target's gain over the best of the baselines."""
    table, model = e["paper"] if isinstance(e["paper"], list) else (e["paper"], None)
    paper, kind, columns = _paper(table, model=model), e.get("kind", "gain"), e.get("columns", ())
    base = [m for m in MAD_LABELS if m in set(paper["method"])] if e.get("baselines") == "MADs" else e.get("baselines")
    targets = [tuple(t) if isinstance(t, list) else t for t in e["targets"]]
    if e["test"] == "table1":  # our labels carry N
        targets = [(ctx["at_n"].get(k, p), p, ["Majority Voting"]) for k, p in e["targets"].items()]
        run, base = ctx["t1"], [ctx["at_n"].get(e["baseline"], "Majority Voting")]
    elif e["targets"] == "variants":
        targets = [lab for lab in (run[0]["methods"] if run else []) if lab.startswith("AceMAD")]
        targets = targets or ["AceMAD (Different Persona)"]
    out, every_cell = [], bool(e.get("every_cell"))  # the claim is made for each cell ("consistently"), or overall
    for t in targets:
        label, theirs = (t[0], {"paper_target": t[1], "paper_baselines": t[2]}) if isinstance(t, tuple) else (t, {})
        if run is None:
            mine = theirs.get("paper_baselines", base or [])
            against = against_itself(paper, theirs.get("paper_target", label), mine, columns, every_cell=every_cell)
            note = "; ".join(n for n in (NOT_MADE, kind == "gain" and against) if n)
            out.append(row(f"{claim}: {label}", e["line"], None, note=note))
        else:
            out += gain_rows(f"{claim}: {label}", e["line"], run[1], label, base, paper=paper, kind=kind,
                             per_benchmark=e.get("per_benchmark", False), columns=columns, seed=ctx["seed"],
                             every_cell=every_cell if kind == "gain" else None, **theirs)  # fmt: skip
    if e["targets"] == "variants" and run and DIFFERENT_LLMS not in targets:  # SECOND_MODEL empty: one endpoint
        out.append(row(f"{claim}: {DIFFERENT_LLMS}", e["line"], None, note=f"skipped: {NO_SECOND}"))
    if e.get("own_block"):  # Qwen's block: T=2 above T=3, against "T=3 emerges as the optimal" (l.459)
        avg = paper.set_index("method")["Average (printed)"]
        better = [f"{m} {avg[m]:.2f}" for m in avg.index if m.startswith("AceMAD (T=") and avg[m] > avg["AceMAD (T=3)"]]
        for r in out if better else []:
            r["note"] += f"; THE PAPER'S OWN BLOCK has T=3 ({avg['AceMAD (T=3)']:.2f}) below {', '.join(better)}"
    return out


def _accuracy_row(e: dict, claim: str, recs: list, label: str, seed: int, model: str = PAPER_MODEL,
                  missing: str = NOT_MADE):  # fmt: skip
    if (acc := _accuracy(recs, label, seed)) is None:  # e.g. every call failed: the row says so rather than vanish
        return row(claim, e["line"], f"{e['value']:.2f}", note=missing)
    return _value_row(claim, e["line"], e["value"], acc[:3], acc[3], "accuracy in %", signed=False, model=model)


def _table1_value(e: dict, run: None, claim: str, ctx: dict) -> list[dict]:
    return [_accuracy_row(e, claim, ctx["t1"][1] if ctx["t1"] else [], ctx["at_n"].get(e["method"], ""), ctx["seed"])]


def _main(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    (meta, recs), t3, line = run, "AceMAD (T=3)", e["line"]
    paper, test = _paper("table2_main_results", model="GPT-4o-mini"), e["test"]
    if t3 not in meta["methods"]:
        return [row(claim, line, None, note="T=3 not in this profile's ROUNDS")]
    base, cells = paper_baselines(meta, t3), paper.set_index("method")
    if test == "beats_every":
        out = gain_rows(claim, line, recs, t3, base, paper=paper, per_benchmark=True, seed=ctx["seed"])
        theirs = {r["_col"]: float(r["paper"]) for r in out if r["paper"] not in ("-", "")}
        nonpos = [f"{c} {g:+.2f}" for c, g in theirs.items() if g <= 0]
        every = "all > 0" if theirs and not nonpos else f"not all > 0 ({', '.join(nonpos)})" if nonpos else "-"
        every_row = row(e["every"], line, every, n=out[-1]["n"], note="the conjunction of the rows above", kind="all")
        return out + [{**every_row, "_of": [r["claim"] for r in out]}]
    if test == "pronounced":
        return [pronounced_row(claim, line, recs, t3, base, paper, seed=ctx["seed"])]
    if test == "accuracy":  # e["value"]: Table 2's printed Average
        r = _accuracy_row(e, claim, recs, t3, ctx["seed"], missing=f"no answered {t3} question")
        return [{**r, "paper (recomputed)": f"{cells['Average (recomputed)'][t3]:.2f} (the mean of its cells)"}]
    dec = e.get("baseline", "")
    if test == "relative":  # "+74% over Decentralized MAD"; undefined (inconclusive) when it scores 0
        printed, again = (
            100 * (cells[c][t3] / cells[c][dec] - 1) for c in ("Average (printed)", "Average (recomputed)")
        )
        if (rel := relative_gain(recs, t3, dec, seed=ctx["seed"])) is None:
            return [row(claim, line, f"{printed:+.1f}%", note=f"no question that both {t3} and {dec} answered")]
        finite = bool(np.isfinite(rel[0]))
        ours = _ci(*rel[:3]) + "%" if finite else f"undefined ({dec} at 0%)"
        verdict = value_verdict(printed, rel[1], rel[2], null=0.0) if finite else INCONCLUSIVE
        note = "ratio of Averages minus 1; paired bootstrap within benchmarks"
        return [row(claim, line, f"{printed:+.1f}%", ours, rel[3], verdict, note, kind="value", ci=rel[1:3],
                    recomputed=f"{again:+.1f}% (from its cells)")]  # fmt: skip
    if test == "standard_mad":  # l.111's "standard MAD" is Decentralized MAD (l.209); +20.31 is neither gain
        if dec not in meta["methods"]:
            return [row(claim, line, f"{e['value']:+.2f}", note=f"no {dec} run")]
        # None: e.g. every Decentralized MAD call of a real run failed
        if (g := _average_gain(recs, t3, [dec], ctx["seed"])) is None:
            return [row(claim, line, f"{e['value']:+.2f}", note=f"no question that both {t3} and {dec} answered")]
        printed, again = (paper_gain(paper, t3, [dec], TB.AVERAGE, recomputed=c) for c in (False, True))
        note = f"vs {dec}, which l.209 calls standard MAD; +20.31 = 49.92 - 29.61 (Sparse, the best MAD)"
        r = _value_row(claim, line, e["value"], (g["gain"], g["gain_lo"], g["gain_hi"]), int(g["n_paired"]), note)
        return [{**r, "paper (recomputed)": f"{printed:+.2f} (printed averages), {again:+.2f} (its cells)"}]
    others = [lab for lab in _labels(meta, "acemad") if lab != t3]
    against = {"other T": others, "T=5": [lab for lab in others if meta["methods"][lab].get("rounds") == 5]}
    base = against[e["baselines"]] if isinstance(e["baselines"], str) else e["baselines"]
    if not base:  # e.g. --set ROUNDS=[3]
        return [row(claim, line, None, note=f"no AceMAD run at {e['baselines']} in this profile's ROUNDS")]
    columns = e.get("columns", ())
    return gain_rows(
        claim, line, recs, t3, base, paper=paper, per_benchmark=bool(columns), columns=columns, seed=ctx["seed"]
    )


def _ablation(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    """Figure 4 (l.511), l.111, l.83, l.109: notebook 05's debates re-decided without peer prediction."""
    if "ablation" not in ctx:
        meta, recs = run
        [label] = [lab for lab, c in meta["methods"].items() if c["method"] == "acemad"]
        full, ace = meta["methods"][label], [r for r in recs if r["method"] == label]
        arr = A.stack(ace, ctx["seed"])  # once: the re-weighting and the recovery test read the same arrays
        re = A.reweighted_records(ace, A.ABLATIONS, eta=full["eta"], exponent=full["weight_exponent"], seed=ctx["seed"],
                                  stacked=arr)  # fmt: skip
        ctx["ablation"] = ace, arr, re
    (ace, arr, re), names, test, line = ctx["ablation"], list(A.ABLATIONS), e["test"], e["line"]
    if test == "recovery":  # on the questions whose round-1 plurality is wrong: full protocol over uniform weights
        wrong = {q for q, w in zip(arr.question_ids, A.initial_plurality(arr) != arr.truth) if w}
        sub = [r for r in re if r["question_id"] in wrong]
        acc = _accuracy([r for r in sub if r["method"] == names[0]], names[0], ctx["seed"])
        if acc is None:
            return [row(claim, line, "(no number)", note="no question with a wrong initial majority")]
        out = gain_rows(claim, line, sub, names[0], [names[2]], seed=ctx["seed"])
        note = f"recovers {acc[0]:.1f}% [{acc[1]:.1f}, {acc[2]:.1f}] of {acc[3]} wrong-majority questions"
        limit = "(l.109's convergence is a limit over rounds: Theorem 3's drift per round at small eta, l.311-313)"
        return [{**r, "note": f"{note} {limit}; {r['note']}"} for r in out]
    if test == "collapse":  # Self-belief only minus Full, in points
        g = _average_gain(re, names[1], [names[0]], ctx["seed"])
        note = "Self-belief only minus Full, in points (the paper does not say points or relative)"
        stat = (g["gain"], g["gain_lo"], g["gain_hi"]) if g else ()
        out = [_value_row(claim, line, e["value"], stat, int(g["n_paired"]), note) if g else row(claim, line, "-14.6")]
    elif test == "ablation_pronounced":
        out = [pronounced_row(claim, line, re, names[0], names[1:2], seed=ctx["seed"])]
    else:
        against = names[1:] if e["against"] == "both" else names[1:2]
        out = gain_rows(
            claim, line, re, names[0], against, per_benchmark=e.get("per_benchmark", False), seed=ctx["seed"]
        )
    return _noted(out, FIGURE4)


def _standard_agents(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    methods = run[0]["methods"]
    ctrl = [lab for lab, c in methods.items() if c.get("roster") == "acemad" and c["method"] == "decentralized"]
    ace3 = [lab for lab, c in methods.items() if c["method"] == "acemad" and c["rounds"] == 3]
    rows = gain_rows(claim, e["line"], run[1], ace3[0], ctrl, seed=ctx["seed"]) if ctrl and ace3 else []
    return _noted(rows, FIGURE4)


def _smaller(e: dict, llama: Optional[RunData], claim: str, ctx: dict) -> list[dict]:
    """l.1069: Llama's gain of AceMAD over the best MAD on Table 5's benchmarks minus GPT-4o-mini's (normal CI)."""
    line, main = e["line"], ctx["runs"].get("main")
    paper5, paper2 = _paper("table5_llama8b"), _paper("table2_main_results", model="GPT-4o-mini")
    cols = _columns(paper5)
    # the printed cells measured as ours is (_average_gain): the mean over Table 5's benchmarks, over the MAD best there
    means = [p.set_index("method")[cols].astype(float).mean(axis=1) for p in (paper5, paper2)]
    mine = [m["AceMAD (T=3)"] - max(m[b] for b in MAD_LABELS if b in m.index) for m in means]
    theirs = float(mine[0] - mine[1])
    if llama is None or main is None:
        return [row(claim, line, theirs, note="the Llama run or the main run not made in this profile")]
    gains = []
    for _, recs in (llama, main):
        keep = [r for r in recs if bench_key(r["benchmark"]) in cols]
        mads = [m for m in MAD_LABELS if any(r["method"] == m for r in keep)]
        if (g := _average_gain(keep, "AceMAD (T=3)", mads, ctx["seed"])) is None:
            return [row(claim, line, theirs, note="no paired gain on Table 5's benchmarks")]
        gains.append(g)
    d = gains[0]["gain"] - gains[1]["gain"]
    se = math.hypot(*((g["gain_hi"] - g["gain_lo"]) / 3.92 for g in gains))
    lo, hi = d - 1.96 * se, d + 1.96 * se
    verdict = gain_verdict(-hi, -lo)  # a loss
    ref = "the synthetic default population" if main[0].get("synthetic") else main[0].get("model") or "the main run"
    note = f"Llama's gain {gains[0]['gain']:+.1f} minus {ref}'s {gains[1]['gain']:+.1f} on {', '.join(cols)}"
    p = math.erfc(abs(d) / se / math.sqrt(2)) if se > 0 else math.nan  # the normal CI's two-sided p: Holm judges it
    out = row(claim, line, theirs, _ci(d, lo, hi), int(gains[0]["n_paired"]), verdict, note, kind="loss", p=p,
              ci=(lo, hi))  # fmt: skip
    return [{**out, "_vs": main[0].get("model") or ""}]  # the paper's gap is GPT-4o-mini's: on that model only


def _arc_voting(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    arc = [r for r in run[1] if bench_key(r["benchmark"]) == "ARC-C"]
    return [_accuracy_row(e, claim, arc, "Majority Voting", ctx["seed"], e["model"])]


def _no_penalty(e: dict, run: RunData, claim: str, ctx: dict) -> list[dict]:
    """l.1114: of the questions whose round-1 plurality is right, the share AceMAD ends wrong on."""
    methods, line = run[0]["methods"], e["line"]
    ace = [r for r in run[1] if methods.get(r["method"], {}).get("method") == "acemad" and "rounds" in r
           and r.get("status") == "ok"]  # fmt: skip
    if not ace:
        return [row(claim, line, "(no number)", note="no AceMAD debate with its rounds in the run")]
    arr = A.stack(ace, ctx["seed"])
    ended_wrong = np.array([not r["final"]["correct"] for r in ace])  # the run's own decision, at its eta and T
    lost = ended_wrong[A.initial_plurality(arr) == arr.truth].astype(float) * 100
    if not len(lost):
        return [row(claim, line, "(no number)", note="no question with a right initial majority")]
    m, lo, hi = (float(x) for x in bootstrap_ci(lost, seed=ctx["seed"]))
    lo, hi = (100 * x for x in exact_if_constant([lost / 100], lo / 100, hi / 100))  # none lost: not "[0.0, 0.0]"
    note = f"share of {len(lost)} right-majority questions AceMAD ends wrong on, %; holds below {FLAT_MARGIN:g}"
    return [row(claim, line, "(no number)", _ci(m, lo, hi, signed=False), len(lost), flat_verdict(lo, hi), note,
                ci=(lo, hi))]  # fmt: skip


TESTS = {
    "trend": _trend,
    "still_rising": _still_rising,
    "plateau": _plateau,
    "table": _table,
    "table1": _table,
    "table1_value": _table1_value,
    **dict.fromkeys(("beats_every", "pronounced", "accuracy", "relative", "standard_mad", "main_gain"), _main),
    **dict.fromkeys(("ablation", "collapse", "ablation_pronounced", "recovery"), _ablation),
    "standard_agents": _standard_agents,
    "smaller": _smaller,
    "arc_voting": _arc_voting,
    "no_penalty": _no_penalty,
}
VALUES = ("table1_value", "accuracy", "relative", "standard_mad", "collapse", "arc_voting")  # exact-value tests
ALWAYS = ("table", "table1", "table1_value", "smaller")  # tests that write their own row without their run
NOT_RUN_PAPER = {  # the paper's number in the row of a claim whose run is missing (others: None)
    **dict.fromkeys(("trend", "still_rising", "plateau"), "(figure)"),
    **dict.fromkeys(("recovery", "no_penalty"), "(no number)"),
    "arc_voting": "75.00",
}


def _entry_run(runs: dict, e: dict) -> Optional[RunData]:
    """e["run"]: a name or a list, the first found; "other_<table>": notebook 07's run of that table, any model."""
    names = e.get("run") or []
    wanted = [names] if isinstance(names, str) else names
    return next((v for x in wanted for k, v in runs.items()
                 if k == x or (x[:6] == k[:6] == "other_" and k.endswith(x[6:]))), None)  # fmt: skip


def _at_n(run: RunData, n: int) -> tuple[int, RunData]:
    meta, recs = run
    ns = sorted({c["n_agents"] for c in meta["methods"].values()})
    n = n if n in ns else ns[-1]
    keep = {lab for lab, c in meta["methods"].items() if c["n_agents"] == n}
    return n, ({**meta, "methods": {k: v for k, v in meta["methods"].items() if k in keep}},
               [r for r in recs if r["method"] in keep])  # fmt: skip


def _chosen(meta: dict) -> Optional[str]:
    """A synthetic stand-in's (notebook 07) parameters that differ from the default population's (None: no stand-in)."""
    pop = meta.get("population") or {}
    if not pop.get("synthetic") or ":" not in str(pop.get("model", "")):
        return None
    default = asdict(SimParams())
    return ", ".join(f"{k}={v:g}" for k, v in (pop.get("params") or {}).items() if default.get(k, v) != v)


def standin_note(meta: dict) -> str:
    """The note on each row of a stand-in's run: its chosen parameters decide the row ("": not a stand-in)."""
    if (chosen := _chosen(meta)) is None:
        return ""
    if not chosen:
        return f"synthetic stand-in {meta['population']['model'].split(':', 1)[1]} (default parameters, its own traps)"
    return f"STAND-IN parameters chosen from the paper's wording decide this row: {chosen}"


def _noted(rows: list[dict], text: str, first: bool = False) -> list[dict]:
    for r in rows if text else []:
        r["note"] = "; ".join(x for x in ((text, r["note"]) if first else (r["note"], text)) if x)
    return rows


def _claim_rows(runs: dict, seed: int, values: bool = True) -> list[dict]:
    t1 = runs.get("baselines")
    n, t1_at_n = _at_n(t1, 5) if t1 else (5, None)
    at_n = {c["method"]: lab for lab, c in (t1_at_n[0]["methods"] if t1_at_n else {}).items()}  # labels carry N
    ctx, rows = {"t1": t1_at_n, "at_n": at_n, "seed": seed, "runs": runs}, []
    for e in CLAIMS:
        claim, run = e["claim"].format(n=n), _entry_run(runs, e)
        if not values and e["test"] in VALUES:  # an exact value: never compared on the synthetic population
            rows.append(row(claim, e["line"], None))
        elif run is None and e["test"] not in ALWAYS:
            rows.append(row(claim, e["line"], NOT_RUN_PAPER.get(e["test"]), note=NOT_MADE))
        else:
            rows += (new := TESTS[e["test"]](e, run, claim, ctx))  # type: ignore[operator]
            ran = (run[0].get("model") or "") if run is not None else ""
            for r in new:  # the model whose runs measured the row (exact values: the same model only)
                r["_ran"] = ran
            _noted([r for r in new if r["ours [95% CI]"]], run[0].get("eta_note", "") if run else "")  # measured rows
            _noted(new, standin_note(run[0]) if run else "", first=True)  # a stand-in's parameters first
    if "full_datasets" in runs:  # notebook 07 ran: a table without its run was left out of OTHER_MODELS
        for r in rows:
            if "not made in this profile" in r["note"] and r["claim"].startswith(("Table 2 (", "Table 4", "Table 5")):
                r["note"] = "skipped: OTHER_MODELS names no model for this table (e.g. one endpoint only); " + r["note"]
    return rows


# ----------------------------------------------------------------------------- verdicts
def _decide(r: dict) -> str:
    """A gain / loss row's outcome from its CI and adjusted p, NULL where the CI excludes the claimed effect; a figure's
    row that its CI alone fails (judged) is inconclusive when its test does not pass the Holm correction."""
    if r["_kind"] == "judged" and r["verdict"] == FAILS and r["p (Holm)"] >= ALPHA:  # NaN: no test, the CI decides
        return INCONCLUSIVE
    if r["_kind"] not in ("gain", "loss") or not r["_ci"]:
        return r["verdict"]
    (lo, hi), claimed, loss = r["_ci"], r["_claimed"], r["_kind"] == "loss"
    v = gain_verdict(-hi, -lo, r["p (Holm)"]) if loss else gain_verdict(lo, hi, r["p (Holm)"])
    v = INCONCLUSIVE if v == HOLDS and r.get("_cap") else v  # _cap: a gain row only (_trend's)
    beyond = (claimed < 0 and lo > claimed) if loss else (claimed > 0 and hi < claimed)  # the claimed size excluded
    return NULL if v == INCONCLUSIVE and beyond else v


def needed(r: dict, m: int) -> int:
    """A row's questions for 80% power at Holm's first step over m tests (MIN_EFFECT where no effect is printed,
    FLAT_MARGIN for "flat"; an exact value: MIN_EFFECT away at discordance 0.25, the largest an accuracy has), and
    where the row's own CI shows more noise than that (a stratified Average, a ratio, a difference of gains), the n
    its noise needs."""
    alpha = ALPHA / max(m, 1)  # Holm's first step: a claim's n is planned for the strictest level it must pass
    c, value = r["_claimed"], r["_kind"] == "value"
    effect = (MIN_EFFECT if value else FLAT_MARGIN if r["_kind"] == "judged" else abs(c) if c == c and c else
              MIN_EFFECT) / 100  # fmt: skip
    psi = 0.25 if value else discordance(*r["_psi"]) if isinstance(r["_psi"], tuple) else r["_psi"]
    least = PW.n_needed(effect, min(max(psi if psi == psi else 0.0, effect), 1.0), alpha, POWER)  # least noise
    # the row's own CI's noise too: an Average is stratified (unequal benchmarks need more than one pooled test), a
    # ratio or a difference of gains has no paired discordance; the larger need decides
    if r["_ci"] and r["n"] and all(np.isfinite(r["_ci"])):
        se = (r["_ci"][1] - r["_ci"][0]) / 100 / (2 * Z95)  # per the row's n, in shares; 0 at a handful of questions
        z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(POWER)
        return max(least, math.ceil(r["n"] * (se * z / effect) ** 2))
    return least


def same_model(model: str, paper: str) -> bool:
    """Whether `model` is the paper's: its name with a provider prefix or a snapshot tag (openai/gpt-4o-mini,
    gpt-4o-mini-2024-07-18, Qwen/Qwen3-235B-A22B-Instruct-2507), not a fine-tune (ft:...) or a variant
    (gpt-4o-mini-search-preview, DeepSeek-V3.1-Base)."""
    name = re.sub(r"-(\d{4}-\d{2}-\d{2}|\d{4})$", "", model.rsplit("/", 1)[-1].strip()).lower()
    key = lambda x: "".join(ch for ch in x.lower() if ch.isalnum())
    return bool(model) and key(name) == key(paper)


def _real_model(r: dict, m: int, model: str) -> str:
    v = r["verdict"]
    if v == NOT_RUN or (r["_kind"] == "judged" and not r["_ci"] and r["p"] != r["p"]):
        return v
    # the row's own run's model, not the main run's (a comparison with the paper's model: the model it is made on)
    model = r.get("_vs") or r.get("_ran") or model
    if (r["_kind"] == "value" or r.get("_vs")) and not same_model(model, r["_model"]):
        return ANOTHER_MODEL
    need = needed(r, m)
    return f"{UNDERPOWERED} (n = {r['n']} of the ~{need:,} needed)" if r["n"] < need else v


def finalize(rows: list[dict], synthetic: bool, model: str = "") -> pd.DataFrame:
    """Holm across the rows' tests, each outcome, a real model's power and same-model gates, the profile's words."""
    adjusted = adjust_pvalues([r["p"] for r in rows])
    m = int(np.isfinite(adjusted).sum())
    for r, a in zip(rows, adjusted):
        r["p (Holm)"], r["verdict"] = a, _decide({**r, "p (Holm)": a})
        if r["verdict"] in (INCONCLUSIVE, NULL) and r["p"] < ALPHA <= a:
            _noted([r], f"p < {ALPHA:g} before the Holm correction only")
        if not synthetic and r["_kind"] != "all":
            r["verdict"] = _real_model(r, m, model)
    outcome = {r["claim"]: r["verdict"] for r in rows}
    for r in (r for r in rows if r["_kind"] == "all"):
        parts = {outcome[c] for c in r["_of"]}
        low = sorted(p for p in parts if p.startswith(UNDERPOWERED))
        r["verdict"] = (HOLDS if parts == {HOLDS} else FAILS if FAILS in parts else low[0] if low
                        else NULL if NULL in parts else INCONCLUSIVE)  # fmt: skip
    for r in rows:  # a simulation's accuracy is no measurement of the paper's models: NOT_COMPARABLE
        if (v := r["verdict"]) != NOT_RUN and not v.startswith((UNDERPOWERED, ANOTHER_MODEL)):
            r["verdict"] = NOT_COMPARABLE if synthetic and r["_kind"] == "value" else WORDS[synthetic].get(v, v)
    return pd.DataFrame(rows, columns=COLUMNS)


def ledger(runs: dict, seed: int = 0, values: bool = True) -> pd.DataFrame:
    """Every claim's row from the runs of notebooks 02-07 ({experiment name: (meta, records)}); values=False: the
    exact-value rows not run (the assumption grid, whose synthetic verdicts never compare exact values)."""
    with TB.frames_reused():  # the claims table the same runs' records again and again, never changing them
        return finalize(_claim_rows(at_paper_labels(runs), seed, values), *source(runs))


def at_paper_labels(runs: dict) -> dict:
    """Runs whose AceMAD debated at another eta (--set ETA) under the paper's labels, so that each claim finds its
    run; such a run's meta carries the note ("eta_note") its measured rows then get."""
    out = {}
    for name, (meta, recs) in runs.items():
        if etas := sorted({c.get("eta", ETA) for c in meta["methods"].values() if c["method"] == "acemad"} - {ETA}):
            new = {lab: at_paper_eta(lab) for lab in meta["methods"]}  # Table 3's named configs (DebateConfig._named)
            # never two configs on one label
            new = {k: v for k, v in new.items() if k != v and v not in meta["methods"]}
            note = f"AceMAD at eta={', '.join(f'{e:g}' for e in etas)}, not the paper's {ETA:g} (l.595)"
            meta = {**meta, "methods": {new.get(k, k): c for k, c in meta["methods"].items()}, "eta_note": note}
            recs = [{**r, "method": new[r["method"]]} if r["method"] in new else r for r in recs]
        out[name] = (meta, recs)
    return out


def reads(run: str, config: dict) -> bool:
    """Whether the ledger reads a config's records (the assumption grid debates only those): not scaling's voting,
    not Table 1's smaller N of Centralized and Sparse MAD, not the controls (a roster, the Skeptic alone) of 03, 05."""
    method, roster = config["method"], config.get("roster")
    return {
        "scaling": method == "acemad",
        "baselines": method in ("majority", "decentralized") or config["n_agents"] == 5,
        "main": not roster and (config.get("baseline_agent") or {}).get("persona") != SKEPTIC.persona,
        "ablation": method == "acemad" or (roster == "acemad" and method == "decentralized"),
    }.get(run, True)


def _whole(name: str, meta: dict, record: dict) -> bool:  # name: "<profile>/<experiment>", as load_run gets it
    config = meta["methods"].get(record.get("method"), {})
    return name.rsplit("/", 1)[-1] in ("ablation", "full_datasets") and config.get("method") == "acemad"


#: A record as the ledger keeps it (load_run's `keep`): rounds only for 05's and 07's AceMAD (whole: 2.17 GB), the
#: others' scalars and `final`, read without building their rounds.
lean = Lean(_whole)


BASE_POINT = "the profile's population"  # the grid's reference point: no assumption moved, the grid's n


def _entry(claim: str) -> dict:
    """The data file's entry of a ledger row ({} if none)."""
    return next((e for e in CLAIMS if claim.startswith(e["claim"].split("{")[0])), {})


def by_construction(claim: str, params: dict, shares: dict, fitted: bool = False) -> str:
    """Why a structural choice pins a row (its entry's `pinned`: by crowd_insight, `always`, `rows` by the claim's
    words; `fitted` when the fitted population was fitted to the row's own numbers); shares: {N: Skeptics in AceMAD's
    roster}."""
    pinned = _entry(claim).get("pinned") or {}
    text = pinned.get("crowd_insight" if params.get("crowd_insight") else "none", pinned.get("always", ""))
    steps = ", ".join(f"N={n}: {k}" for n, k in sorted(shares.items()))
    text = (
        "" if "{steps}" in text and not shares else text.format(crowd_insight=params.get("crowd_insight"), steps=steps)
    )
    rows = [t.format(slow_escape=params.get("slow_escape", SimParams.slow_escape)) for k, t in
            pinned.get("rows", {}).items() if k in claim]  # fmt: skip
    parts = [pinned["fitted"] if fitted and "fitted" in pinned else "", *rows, text]
    return "; ".join(t for t in parts if t)


def fitted_population(runs: dict) -> bool:
    """Whether the runs' population is the one fitted to the paper's baselines (not POPULATION=original, a stand-in
    or a real model)."""
    pop = main_meta(runs).get("population") or {}
    return bool(pop.get("synthetic")) and pop.get("model") == SYNTHETIC_SLUG


def deciding(ledger: pd.DataFrame, grid: dict, runs: dict) -> pd.DataFrame:
    """The ledger with DECIDED_BY: what pins a row by construction, or the grid points ({name: ledger}) flipping it."""
    verdicts = {name: g.set_index("claim").verdict.map(category) for name, g in grid.items()}
    # what a row measured at each point: a verdict that moves while these stay is moved by Holm's correction alone
    measured = {name: g.set_index("claim")[["ours [95% CI]", "n", "p"]].astype(str) for name, g in grid.items()}
    scaling = runs["scaling"][0]["methods"].values() if "scaling" in runs else ()
    ns = sorted({c["n_agents"] for c in scaling if c["method"] == "acemad"})  # shares: {N: truth-holders}
    shares = {n: sum(s.persona == SKEPTIC.persona for s in DebateConfig(n_agents=n).specs()) for n in ns}
    params, fitted, out = population_params(runs), fitted_population(runs), []
    for r in ledger.to_dict("records"):
        why = by_construction(r["claim"], params, shares, fitted)
        if (e := _entry(r["claim"])) and (run := _entry_run(runs, e)) and _chosen(run[0]) is not None and not why:
            out.append(_standin_deciding(e, run, params))
            continue
        if r["verdict"] in (NOT_RUN, NOT_COMPARABLE):
            out.append(why or ("an exact value: compared on a real model only" if r["verdict"] != NOT_RUN else ""))
            continue
        seen = {n: v[r["claim"]] for n, v in verdicts.items() if r["claim"] in v.index and v[r["claim"]] != NOT_RUN}
        base = measured[BASE_POINT].loc[r["claim"]].tolist() if BASE_POINT in seen else None
        holm = {n for n in seen if measured[n].loc[r["claim"]].tolist() == base and seen[n] != seen[BASE_POINT]}
        where = _where(seen, holm) if BASE_POINT in seen else f"not recomputed over the grid; {WHOLE}"
        if BASE_POINT in seen and seen[BASE_POINT] != category(r["verdict"]):  # the grid's smaller n reads otherwise
            n = pd.to_numeric(grid[BASE_POINT].set_index("claim").n.get(r["claim"]), errors="coerce")
            at = f"at the grid's n{f' ({n:.0f})' if pd.notna(n) else ''} the profile's point reads {seen[BASE_POINT]}"
            where = (
                f"{at}, and so does every point: the grid does not show which assumption decides this row; {WHOLE}"
                if len(set(seen.values())) == 1
                else f"{at}, not this row's verdict; {where}"
            )
        text = f"{why}; over the grid: {where}" if why else where
        if "(synthetic items)" in r["claim"]:
            text += "; the synthetic benchmarks differ only in their option count K"
        out.append(text)
    return ledger.assign(**{DECIDED_BY: out})


def _standin_deciding(e: dict, run: RunData, params: dict) -> str:
    """What decides a row of a synthetic stand-in (notebook 07): the parameters chosen from the paper's wording, if
    any (a comparison with GPT-4o-mini's gain, test `smaller`, follows from them), and the default population's."""
    chosen = _chosen(run[0])  # what standin_note gave its rows
    rest = f"the default population's assumptions (knowledge_link = {params.get('knowledge_link', 1):g} first)"
    if not chosen:
        return f"a stand-in with the default parameters and its own traps (notebook 07): {rest}; not varied"
    if e["test"] == "smaller":
        return (
            f"by construction: the stand-in's parameters were chosen from the paper's wording to make it the model the "
            f"paper describes ({chosen}; notebook 07), so how its gain compares follows from that choice; not varied"
        )
    return f"the stand-in's parameters chosen from the paper's wording ({chosen}; notebook 07) and {rest}; not varied"


def _where(seen: dict, holm: Collection[str] = ()) -> str:
    """Where the verdict differs from the profile's point; `holm`: points where only Holm's correction moved it
    (the row's own numbers are the same there: another row's p changed the family, not this row's assumption)."""
    base = seen[BASE_POINT]  # each other verdict, in the order the points first read it, and where
    flipped = {name: x for name, x in seen.items() if name not in holm}
    groups = {v: [name for name, x in flipped.items() if x == v] for v in dict.fromkeys(flipped.values()) if v != base}
    moved = (f"; {' and '.join(f'{seen[n]} where {n}' for n in sorted(holm))} only through Holm's correction (this "
             "row's numbers are the same there; other rows' p-values changed)") if holm else ""  # fmt: skip
    if not groups:
        return f"{base} at every point of the grid ({len(seen) - 1} assumptions moved one at a time){moved}"
    rest = len(seen) - 1 - sum(map(len, groups.values())) - len(holm)
    flips = "; ".join(f"{v} where {listed(names)}" for v, names in groups.items())
    return f"{flips}; {base} elsewhere ({BASE_POINT}" + (f" and {rest} more)" if rest else ")") + moved


def category(verdict: str) -> str:
    return next((v for v in VERDICTS if verdict == v or verdict.startswith(v + " (")), verdict)


def main_meta(runs: dict) -> dict:
    return runs["main"][0] if "main" in runs else next((m for m, _ in runs.values()), {})


def population_params(runs: dict) -> dict:
    return (main_meta(runs).get("population") or {}).get("params") or {}


def smoke_test(runs: dict) -> bool:
    return any(m.get("backend") == "local" for m, _ in runs.values())


def source(runs: dict) -> tuple[bool, str]:
    """(synthetic?, model) of the runs; no runs (all failed) are not synthetic: labelled NO_RUNS, never SYNTHETIC."""
    return any(m.get("synthetic") for m, _ in runs.values()), main_meta(runs).get("model") or ""
