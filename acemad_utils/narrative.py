"""The "What we see" paragraph each notebook ends with, written from the computed numbers (never by hand).

    from acemad_utils import narrative as N
    print(N.versus(long, tests, target="AceMAD (T=3)", source=SRC))   # one paragraph, true for every profile

Each function takes the tables the notebook just computed (`tables.accuracy_long` and `tables.versus_best`
frames, or the theory tables) and returns plain sentences. Why here and not in the notebooks: the wording
must follow the numbers under every profile (synthetic, a 135M local model, the paper's endpoint), so the
comparisons (above/below, inside/outside the interval) are computed, and a cell stays a single call.
"""
from __future__ import annotations

from typing import Optional, Sequence

import pandas as pd

AVERAGE = "Average"


def _avg(long: pd.DataFrame) -> pd.DataFrame:
    return long[long["benchmark"] == AVERAGE].set_index("method")


def _cell(row) -> str:
    return f"{row.accuracy:.1f}% [{row.ci_lo:.1f}, {row.ci_hi:.1f}]"


def _sig(p: float, alpha: float = 0.05) -> str:
    return "significant" if p < alpha else "not significant"


def _n(long: pd.DataFrame) -> int:
    return int(long[long["benchmark"] == AVERAGE]["n"].max()) if len(long) else 0


def caveat(source: str) -> str:
    """What kind of evidence the numbers are: the synthetic population, or a named model on n questions."""
    if "SYNTHETIC" in source.upper():
        return ("These are numbers of the synthetic population: they show what the mechanism does when the "
                "paper's assumptions hold, not what any LLM does.")
    return f"These numbers come from {source}; with intervals this wide, read them as evidence about this model only."


def ranking(long: pd.DataFrame, source: str, methods: Optional[Sequence[str]] = None) -> str:
    """'X leads with a% [lo, hi]; then Y b%, ...' over the Average column, with a note where intervals overlap."""
    avg = _avg(long)
    if methods is not None:
        avg = avg.loc[[m for m in methods if m in avg.index]]
    if avg.empty:
        return f"No method produced a result here. {caveat(source)}"
    order = avg.sort_values("accuracy", ascending=False)
    top, rest = order.iloc[0], order.iloc[1:]
    text = f"On average over the benchmarks (n = {_n(long)} questions per method), {top.name} leads with {_cell(top)}"
    if len(rest):
        text += "; then " + ", ".join(f"{m} {r.accuracy:.1f}%" for m, r in rest.iterrows())
        second = rest.iloc[0]
        if second.ci_hi >= top.ci_lo:
            text += f". The intervals of {top.name} and {second.name} overlap, so their order is not established here"
    return text + ". " + caveat(source)


def versus(long: pd.DataFrame, tests: pd.DataFrame, target: str, source: str) -> str:
    """How `target` does against the baseline it was tested against (tables.versus_best), per column."""
    avg = _avg(long)
    if target not in avg.index:
        return f"{target} has no result here. {caveat(source)}"
    t = tests[tests["method"] == target] if len(tests) else tests
    if t is None or t.empty:
        return f"{target}: {_cell(avg.loc[target])} on average; no paired comparison was possible. {caveat(source)}"
    per = t[t["benchmark"] != AVERAGE]
    wins = per[(per["gain"] > 0) & (per["p_value"] < 0.05)]
    losses = per[(per["gain"] < 0) & (per["p_value"] < 0.05)]
    text = f"{target} averages {_cell(avg.loc[target])}."
    av = t[t["benchmark"] == AVERAGE]
    if len(av):
        a = av.iloc[0]
        text += (f" Against the best baseline on the average ({a.best_baseline}) the paired gain is {a.gain:+.1f} points "
                 f"[{a.gain_lo:+.1f}, {a.gain_hi:+.1f}], p = {a.p_value:.2g} ({_sig(a.p_value)}).")
    text += (f" Per benchmark it is significantly better in {len(wins)} of {len(per)} columns and significantly worse "
             f"in {len(losses)}.")
    return text + " " + caveat(source)


def shares(n_values: Sequence[int], truth_holders: Sequence[int]) -> str:
    """Why a curve over N is not a pure group-size effect: the truth-holder share moves with rounding."""
    parts = [f"{k} of {n} ({k / n:.0%})" for n, k in zip(n_values, truth_holders)]
    best = max(range(len(n_values)), key=lambda i: truth_holders[i] / n_values[i])
    return (f"Truth-holders per N: {', '.join(parts)}. The share is largest at N = {n_values[best]}, so where the "
            f"truth-holders drive accuracy (as in the synthetic population) a curve over N peaks there.")


def theory(tab_a: pd.DataFrame, tab_b: pd.DataFrame, tab_c: pd.DataFrame, tab_d: pd.DataFrame,
           eta: float, rounds: int) -> str:
    """00_theory's four checks in four sentences, from their tables."""
    last = tab_a[tab_a["x"] == tab_a["x"].max()]
    sym = last[last["series"].str.startswith("symmetric")].iloc[0]
    flat = sym.lo <= 0 <= sym.hi
    a = (f"(a) With symmetric updating the mean belief in the truth changes by {sym['mean']:+.3f} "
         f"[{sym.lo:+.3f}, {sym.hi:+.3f}] over the debate: {'flat within its interval, as Proposition 1 says' if flat else 'not flat: the martingale check fails here'}.")
    r1 = tab_b[tab_b["round"] == tab_b["round"].min()].set_index("group")["mean"]
    th = r1[[g for g in r1.index if g.startswith("truth-holder")]].mean()
    cr = r1[[g for g in r1.index if g.startswith("crowd")]].mean()
    b = f"(b) In round 1 truth-holders score {th:.2f} on average against the crowd's {cr:.2f} ({'separated' if th > cr else 'not separated'})."
    cond = tab_c[tab_c["subset"] == "truth-holder right in round 1"].set_index("eta")
    lo_eta, hi_eta = cond.index.min(), cond.index.max()
    c = (f"(c) Where a truth-holder starts right, the weighted belief in the truth drifts by {cond.loc[lo_eta, 'mean']:+.3f} "
         f"at eta = {lo_eta:g} and {cond.loc[hi_eta, 'mean']:+.3f} at eta = {hi_eta:g}.")
    at = tab_d[(tab_d["N"] == 5) & (tab_d["T"] == rounds) & (tab_d["eta"] == eta)].set_index("crowd_calibration")["p_flip"]
    d = (f"(d) At N = 5, T = {rounds}, eta = {eta:g}, AceMAD flips {at.iloc[0]:.0%} of wrong majorities against a "
         f"false-consensus crowd and {at.iloc[-1]:.0%} against a calibrated one: the mechanism needs the crowd to "
         f"mispredict its peers.")
    return " ".join([a, b, c, d]) + " " + caveat("SYNTHETIC")
