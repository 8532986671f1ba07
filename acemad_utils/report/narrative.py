"""The "What we see" paragraph each notebook ends with, written from the computed numbers (never by hand).

    from acemad_utils.report import narrative as N
    display(N.md(N.versus(long, tests, target="AceMAD (T=3)", source=SRC)))   # one paragraph, as Markdown
    N.assumption(meta["population"])     # the one sentence naming what a synthetic result rests on

Each function takes the tables the notebook just computed (`tables.accuracy_long` and `tables.versus_best`
frames, or the theory tables) and returns plain sentences. Why here and not in the notebooks: the wording
must follow the numbers under every profile (synthetic, a 135M local model, the paper's endpoint), so the
comparisons (above/below, inside/outside the interval) are computed, and a cell stays a single call.
`md` wraps a paragraph as IPython Markdown, so Lab and a code host reflow it instead of showing printed text.

On a synthetic profile every paragraph ends with `caveat(source, population=...)`: what kind of evidence it is,
and (`assumption`) the one assumption of the population the result rests on, read from the run's population
description (`meta["population"]`, `Setup.population.describe()`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pandas as pd

from acemad_utils.data.sim_params import SimParams
from acemad_utils.protocol.config import N_AGENTS, NAIVE_AGENT, SKEPTIC
from acemad_utils.report import readable as RD
from acemad_utils.report.tables import AVERAGE, bench_label, versus_best


def _avg(long: pd.DataFrame) -> pd.DataFrame:
    return long[long["benchmark"] == AVERAGE].set_index("method")


def _cell(row) -> str:
    return f"{row.accuracy:.1f}% [{row.ci_lo:.1f}, {row.ci_hi:.1f}]"


def _sig(p: float, alpha: float = 0.05) -> str:
    return "significant" if p < alpha else "not significant"


def _n(long: pd.DataFrame) -> int:
    return int(long[long["benchmark"] == AVERAGE]["n"].max()) if len(long) else 0


def md(text: str):
    """A paragraph as IPython Markdown (rendered and reflowed by Lab, nbconvert and a code host's renderer)."""
    from IPython.display import Markdown

    return Markdown(text)


def _synthetic(source: str) -> bool:
    return "SYNTHETIC" in source.upper()


#: What a result without peer prediction rests on: the naive agent alone (notebook 01's subsets) and the homogeneous
#: baselines (notebook 02), whose runs no knowledge_link enters
SUBSET_USES = ("trap_mean", "trap_concentration", "explore_base", "explore_per_temp")
BASELINE_USES = (
    "trap_mean",
    "trap_concentration",
    "crowd_insight",
    "crowd_copy",
    "crowd_susceptibility",
    "confidence_per_temp",
)
#: ... and what an AceMAD result rests on beside the link (the claims ledger's grid varies them: registry.LEDGER_GRID)
WEIGHTED_USES = (
    "insight",
    "crowd_insight",
    "crowd_copy",
    "insight_susceptibility",
    "crowd_susceptibility",
    "crowd_calibration",
    "trap_mean",
)


def assumption(population: Optional[Mapping] = None, *, short: bool = False, uses: Sequence[str] = ()) -> str:
    """The one sentence saying which assumption a synthetic result rests on, from the population's description
    (`describe()`: its `params` hold `knowledge_link` and `calibration_by`, see docs/population.md). `short`:
    a bracketed clause for a one-line SUMMARY. An empty string for a real model (no assumed population).
    `uses`: the parameters a run without peer prediction rests on (SUBSET_USES, BASELINE_USES), named instead."""
    if population is None:
        return (
            "[rests on the population's assumptions; see its description]"
            if short
            else "This synthetic result rests on the population's assumption about which agents predict the "
            "crowd's beliefs well (the run's population description names it)."
        )
    pop = dict(population)
    if not pop.get("synthetic", False):
        return ""
    params = pop.get("params") or {}
    if uses:
        pairs = [(k, params[k]) for k in uses if isinstance(params.get(k), (int, float))]
        named = ", ".join(f"{k} = {v:g}" for k, v in pairs)
        return (
            f"[rests on {', '.join(f'{k}={v:g}' for k, v in pairs)}]"
            if short
            else f"This synthetic result rests on the population's {named}; no agent here predicts its peers, so "
            "knowledge_link plays no part."
        )
    link, by = params.get("knowledge_link"), params.get("calibration_by")
    if short:
        if link is None and by is None:
            return "[rests on the population's assumed peer-prediction skill; its description names no link]"
        rest = [f"{k}={params[k]:g}" for k in WEIGHTED_USES if isinstance(params.get(k), (int, float))]
        copies = [] if "crowd_copy" in params else ["independent Generalists"]  # before near-copies existed
        return f"[rests on knowledge_link={link}, calibration_by={by}, {', '.join([*rest, *copies])}]"
    if by == "persona":
        return (
            'This synthetic result rests on persona-assigned skill (calibration_by = "persona"): every Skeptic '
            "predicts the crowd well whatever it believes on the item, so the weights reward a label, not knowledge."
        )
    if link is None:
        return (
            "This synthetic result rests on the population's assumption about who predicts the crowd's beliefs "
            "well; this run's population description names no knowledge_link (the population predates that "
            "parameter), so which agents hold that skill is not recorded here."
        )
    link = float(link)
    if link == 0:
        return (
            "This synthetic result rests on knowledge_link = 0: peer-prediction skill is unrelated to knowing the "
            "truth, so nothing here comes from the paper's Asymmetric Cognitive Potential."
        )
    strength = (
        "only agents that see through an item's trap"
        if link == 1
        else f"with strength {link:g}, agents that see through an item's trap"
    )
    return (
        f"This synthetic result rests on the paper's assumption, built into the population (knowledge_link = "
        f"{link:g}): {strength} predict the crowd's beliefs well, while the rest assume everyone thinks as they do; "
        f"a real model has to show that link before the result says anything about it."
    )


def caveat(source: str, *, population: Optional[Mapping] = None, uses: Sequence[str] = ()) -> str:
    """What kind of evidence the numbers are: the synthetic population (and the assumption it rests on, from
    `population`, the run's population description; `uses` as in assumption), or a named model on n questions."""
    if _synthetic(source):
        return (
            "These are numbers of the synthetic population: they show what the mechanism does when the "
            "population's assumptions hold, not what any LLM does. " + assumption(population, uses=uses)
        )
    return f"These numbers come from {source}; with intervals this wide, read them as evidence about this model only."


def versus(
    long: pd.DataFrame,
    tests: pd.DataFrame,
    target: str,
    source: str,
    *,
    against: str = "best MAD baseline",
    population: Optional[Mapping] = None,
) -> str:
    """How `target` does against the baseline it was tested against (tables.versus_best), per column; `against`
    names what `tests` compared with (the notebooks test against the best MAD baseline, as the paper does: Single
    Agent can be higher)."""
    avg = _avg(long)
    cav = caveat(source, population=population)
    if target not in avg.index:
        return f"{target} has no result here. {cav}"
    t = tests[tests["method"] == target] if len(tests) else tests
    if t is None or t.empty:
        return f"{target}: {_cell(avg.loc[target])} on average; no paired comparison was possible. {cav}"
    per = t[t["benchmark"] != AVERAGE]
    wins = per[(per["gain"] > 0) & (per["p_value"] < 0.05)]
    losses = per[(per["gain"] < 0) & (per["p_value"] < 0.05)]
    text = f"{target} averages {_cell(avg.loc[target])}."
    av = t[t["benchmark"] == AVERAGE]
    if len(av):
        a = av.iloc[0]
        text += (
            f" Against the {against} on the average ({a.best_baseline}) the paired gain is {a.gain:+.1f} points "
            f"[{a.gain_lo:+.1f}, {a.gain_hi:+.1f}], {RD.pvalue(a.p_value)} ({_sig(a.p_value)})."
        )
    text += (
        f" Per benchmark it is significantly better in {len(wins)} of {len(per)} columns and significantly worse "
        f"in {len(losses)}."
    )
    return text + " " + cav


def shares(n_values: Sequence[int], truth_holders: Sequence[int]) -> str:
    """Why a curve over N is not a pure group-size effect: the truth-holder share moves with rounding."""
    parts = [f"{k} of {n} ({k / n:.0%})" for n, k in zip(n_values, truth_holders)]
    best = max(range(len(n_values)), key=lambda i: truth_holders[i] / n_values[i])
    return (
        f"Truth-holders per N: {', '.join(parts)}. The share is largest at N = {n_values[best]}, so where the "
        f"truth-holders drive accuracy (as in the synthetic population) a curve over N peaks there."
    )


def theory(
    tab_a: pd.DataFrame,
    tab_b: pd.DataFrame,
    tab_c: pd.DataFrame,
    tab_d: pd.DataFrame,
    *,
    eta: float,
    rounds: int,
    split: Optional[pd.DataFrame] = None,
) -> str:
    """00_theory's four checks, from their tables: (a) what is true by construction, (b) the round-1 scores
    weighted by agent count and the lowest group, (c) the drift at the notebook's eta (the paper's 2 by default)
    and the part the weights add (`split`: theory.drift_split), (d) the recovery rate against l.109's guarantee."""
    last = tab_a[tab_a["x"] == tab_a["x"].max()]
    sym = last[last["series"].str.startswith("symmetric")].iloc[0]
    flat = sym.lo <= 0 <= sym.hi
    verdict = "flat within its interval" if flat else "not flat: the simulator's symmetric update is broken"
    a = (
        f"(a) With symmetric updating the mean belief in the truth changes by {sym['mean']:+.3f} "
        f"[{sym.lo:+.3f}, {sym.hi:+.3f}] over the debate: {verdict}. That is true by construction (a symmetric "
        "linear update with mean-preserving noise cannot drift), so panel (a) checks the simulator's update, "
        "not Proposition 1's premise that real debaters update so."
    )
    r1 = tab_b[tab_b["round"] == tab_b["round"].min()].set_index("group")
    w = r1["n_agents"] if "n_agents" in r1 else pd.Series(1.0, index=r1.index)

    def weighted(prefix: str) -> float:
        g = [x for x in r1.index if x.startswith(prefix)]
        return float((r1.loc[g, "mean"] * w[g]).sum() / w[g].sum())

    th, cr = weighted("truth-holder"), weighted("crowd")
    low = r1["mean"].idxmin()
    b = (
        f"(b) In round 1 truth-holders score {th:.2f} on average (weighted by agent count) against the crowd's "
        f"{cr:.2f} ({'separated' if th > cr else 'not separated'}); the lowest group is {low} at "
        f"{r1.loc[low, 'mean']:.2f}"
        + (
            ": being right is not what the score rewards (a crowd agent right without insight predicts a false "
            "consensus)."
            if low == "crowd (holds truth)"
            else "."
        )
    )
    cond = tab_c[tab_c["subset"] == SUBSETS_HOLDER].set_index("eta")
    c = (
        f"(c) Where a truth-holder starts right, the weighted belief in the truth drifts by "
        f"{cond.loc[0.0, 'mean']:+.3f} with uniform weights (eta = 0) and {cond.loc[eta, 'mean']:+.3f} at eta = {eta:g}"
    )
    if split is not None:
        part = split[(split["subset"] == SUBSETS_HOLDER) & split["part"].str.startswith("weights")].iloc[0]
        c += f"; the weights add {part['mean']:+.3f} [{part.lo:+.3f}, {part.hi:+.3f}] of it"
    c += f" (at the largest eta simulated, {cond.index.max():g}, {cond.iloc[-1]['mean']:+.3f})."
    at_n = tab_d[tab_d["N"] == N_AGENTS]  # the paper's N
    at = at_n[(at_n["T"] == rounds) & (at_n["eta"] == eta)].set_index("crowd_calibration")["p_flip"]
    d = (
        f"(d) At N = 5, T = {rounds}, eta = {eta:g}, AceMAD flips {at.iloc[0]:.0%} of wrong majorities against a "
        f"false-consensus crowd and {at.iloc[-1]:.0%} against a calibrated one: the mechanism needs the crowd to "
        f"mispredict its peers, and even where the population is built for it, the drift recovers "
        f'{at.iloc[0]:.0%} of wrong majorities in {rounds} rounds, not the "convergence to truth from minority '
        'positions" that l.109 calls guaranteed.'
    )
    return " ".join([a, b, c, d]) + " " + caveat("SYNTHETIC")


SUBSETS_HOLDER = "truth-holder right in round 1"  # theory.SUBSETS[1] (report/ does not import experiments/)


# ----------------------------------------------------------------------------- notebooks 01-07
def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def subsets(
    table: pd.DataFrame,
    source: str,
    runs: int = 5,
    threshold: float = 0.4,
    *,
    population: Optional[Mapping] = None,
) -> str:
    """01: how many items the recipe keeps, how hard they are, and whether the failures are systematic
    (wrong answers concentrated on one distractor per item, against the share expected by chance)."""
    t = table.reset_index() if "benchmark" not in table.columns else table
    total, kept = int(t["items_in"].sum()), int(t["kept"].sum())
    if total == 0 or kept == 0:
        return (
            f"The naive agent answered {total} items {runs} times each and no item fell below "
            f"{threshold:.0%} accuracy, so there is no challenging subset to read. "
            + caveat(source, population=population)
        )
    k = t[t["kept"] > 0]
    pct = 100.0 * t["kept"] / t["items_in"].where(t["items_in"] > 0)
    acc = (k["mean_acc_kept"] * k["kept"]).sum() / k["kept"].sum()
    share = (k["misconception_share"] * k["kept"]).sum() / k["kept"].sum()
    ref = (k["uniform_reference"] * k["kept"]).sum() / k["kept"].sum()
    verdict = (
        "so the failures are concentrated on one distractor per item (systematic misconceptions, as the "
        "paper's manual check reports)"
        if share > ref + 0.05
        else "so they are no more concentrated than chance makes them: this check does not show systematic "
        "misconceptions"
    )

    spread = (
        ""
        if len(t) < 2
        else f" ({pct.min():.0f}% of every benchmark's items)"
        if round(pct.min()) == round(pct.max())
        else f" ({pct.min():.0f}% to {pct.max():.0f}% of a benchmark's items)"
    )

    text = (
        f"The naive agent (the plain assistant, no persona, T = {NAIVE_AGENT.temperature:g}) answered each of "
        f"{total} items {runs} times; {kept} items "
        f"({kept / total:.0%}) were right in fewer than {threshold:.0%} of the runs and form the challenging subsets"
        f"{spread}. On the kept items it is right in "
        f"{_pct(acc)} of its runs. Its wrong answers land on the item's most common distractor {_pct(share)} of the "
        f"time, against {_pct(ref)} if they fell at random, {verdict}."
    )
    return text + " " + caveat(source, population=population)


def gains(tests: pd.DataFrame, source: str, claim: str = "", *, population: Optional[Mapping] = None) -> str:
    """Each target's paired gain on the Average column over the baseline it was tested against, and how many
    are significantly better; `claim` (what the paper reports) is set beside the count."""
    av = tests[tests["benchmark"] == AVERAGE] if len(tests) else tests
    if av is None or av.empty:
        return f"No paired comparison was possible here. {caveat(source, population=population)}"
    parts = [
        f"{r['method']} {r['gain']:+.1f} points [{r['gain_lo']:+.1f}, {r['gain_hi']:+.1f}] over {r['best_baseline']} "
        f"({RD.pvalue(r['p_value'])})"
        for r in av.to_dict("records")
    ]
    better = int(((av["gain"] > 0) & (av["p_value"] < 0.05)).sum())
    worse = int(((av["gain"] < 0) & (av["p_value"] < 0.05)).sum())
    text = (
        f"Paired gains on the average: {'; '.join(parts)}. {better} of {len(av)} "
        f"{'is' if better == 1 or len(av) == 1 else 'are'} significantly better (p < 0.05) "
        f"and {worse} significantly worse"
    )
    text += f"; {claim}." if claim else "."
    return text + " " + caveat(source, population=population)


def _peak(g: pd.DataFrame, x: str):
    g = g.sort_values(x)
    best = g.iloc[int(g["accuracy"].to_numpy().argmax())]  # the first maximum, as idxmax
    diffs = g["accuracy"].diff().dropna()
    shape = (
        "has a single point"
        if diffs.empty
        else "is flat"
        if (diffs == 0).all()
        else "rises with every step"
        if (diffs > 0).all()
        else "falls with every step"
        if (diffs < 0).all()
        else "is not monotone"
    )
    return best, shape, g


def curve(
    long: pd.DataFrame,
    x: str,
    hue: str,
    source: str,
    *,
    truth_holders: Optional[dict] = None,
    population: Optional[Mapping] = None,
) -> str:
    """A curve over N (Figures 2 and 5): where each family peaks on the Average and whether it is monotone; with
    `truth_holders` ({family: {N: k}}, figures.truth_holders) it says whether the truth-holder share can explain
    the peak (it cannot when a family has no truth-holder at any N)."""
    avg = long[long["benchmark"] == AVERAGE]
    if avg.empty:
        return f"No curve could be computed. {caveat(source, population=population)}"
    sentences = []
    for fam, g in avg.groupby(hue, sort=False):
        best, shape, g = _peak(g, x)
        lo, hi = g.iloc[0], g.iloc[-1]
        ends = f"{lo.accuracy:.1f}% at N = {lo[x]:g} to {hi.accuracy:.1f}% at N = {hi[x]:g}"
        sentences.append(
            f"{fam} has a single point, {lo.accuracy:.1f}% at N = {lo[x]:g}"
            if shape == "has a single point"
            else f"{fam} is flat at {lo.accuracy:.1f}% from N = {lo[x]:g} to N = {hi[x]:g}"
            if shape == "is flat"
            else f"{fam} peaks at N = {best[x]:g} ({best.accuracy:.1f}%; {ends})"
            if shape == "is not monotone"
            else f"{fam} {shape}, from {ends}"
        )
    text = "On the average over the benchmarks, " + "; ".join(sentences) + "."
    if truth_holders is not None:
        none = [f for f in dict.fromkeys(avg[hue]) if not any((truth_holders.get(f) or {}).values())]
        some = [f for f in dict.fromkeys(avg[hue]) if f not in none]
        if none:
            text += (
                f" {', '.join(none)} {'has' if len(none) == 1 else 'have'} no truth-holder at any N (the "
                f"homogeneous roster: N copies of one agent), so {'its' if len(none) == 1 else 'their'} shape is "
                f"not a truth-holder effect."
            )
        for f in some:
            text += _share_effect(avg[avg[hue] == f], x, f, truth_holders[f])
    return text + " " + caveat(source, population=population)


def _share_effect(fam: pd.DataFrame, x: str, f: str, holders: dict) -> str:
    """Family f's truth-holder share by N ({N: k}) against where its Average accuracy peaks, and how accuracy moves
    among the N that have the same share."""
    ns = sorted(holders)
    best, shape, _ = _peak(fam, x)
    text = f" {f}: " + shares(ns, [holders[n] for n in ns])
    top = max(ns, key=lambda n: holders[n] / n)
    if shape in ("is flat", "has a single point"):
        text += f" Its accuracy {shape}, so it cannot show a share effect here."
    else:
        text += f" Its accuracy peaks at N = {best[x]:g}, " + (
            "where the share peaks." if best[x] == top else f"not where the share peaks (N = {top})."
        )
    acc = fam.set_index(x)["accuracy"]
    by_share: dict = {}
    for n in ns:
        if holders[n] and n in acc.index:
            by_share.setdefault(round(holders[n] / n, 6), []).append(n)
    same: list = max(by_share.values(), key=len, default=[])
    if len(same) < 2:
        return text
    k = holders[same[0]] / same[0]
    trend = (
        "falls"
        if all(acc[a] > acc[b] for a, b in zip(same, same[1:]))
        else "rises"
        if all(acc[a] < acc[b] for a, b in zip(same, same[1:]))
        else "moves"
    )
    return text + (
        f" At the same share ({k:.0%}: N = {', '.join(map(str, same))}) its accuracy {trend} with N "
        f"({', '.join(f'{acc[n]:.1f}%' for n in same)}), so the share alone does not set the level."
    )


def same_curve(long: pd.DataFrame, a: str, b: str, x: str, *, upto: int, hue: str = "family") -> str:
    """Two families that must coincide for x <= upto (Sparse = Decentralized MAD for N <= 3): checked, not assumed."""
    avg = long[(long["benchmark"] == AVERAGE) & (long[x] <= upto)]
    pa, pb = (avg[avg[hue] == f].set_index(x)["accuracy"] for f in (a, b))
    common = pa.index.intersection(pb.index)
    if not len(common):
        return f"{a} and {b} share no N <= {upto} here."
    gap = float((pa[common] - pb[common]).abs().max())
    return (
        f"For N <= {upto} a ring is a full mesh, so {a} is {b}: their averages differ by at most {gap:.1f} points "
        f"there ({'identical, as they must be' if gap < 1e-9 else 'NOT identical: a bug to look at'})."
    )


def aggregators(
    long: pd.DataFrame, tests: pd.DataFrame, reference: str, source: str, *, population: Optional[Mapping] = None
) -> str:
    """03 (table2b): other aggregators re-deciding the same commitments, against the paper's rule `reference`,
    with the paired tests of tables.versus_best(records, others, [reference])."""
    avg = _avg(long)
    if reference not in avg.index:
        return f"The reference rule {reference} has no result here. {caveat(source, population=population)}"
    text = f"On the same commitments the paper's rule ({reference}) decides {_cell(avg.loc[reference])} correctly."
    av = tests[tests["benchmark"] == AVERAGE] if len(tests) else tests
    if av is None or av.empty:
        return text + " No paired comparison was possible. " + caveat(source, population=population)
    av = av.sort_values("gain", ascending=False)
    text += (
        " Paired against it: "
        + "; ".join(
            f"{r.method} {avg.loc[r.method].accuracy:.1f}% ({r.gain:+.1f} points [{r.gain_lo:+.1f}, {r.gain_hi:+.1f}], "
            f"{RD.pvalue(r.p_value)})"
            for r in av.itertuples()
        )
        + "."
    )
    beat = list(av[(av["gain"] > 0) & (av["p_value"] < 0.05)]["method"])
    if not beat:
        text += f" No aggregator beats {reference} significantly."
    elif "SYNTHETIC" in source.upper():
        text += (
            f" {' and '.join(beat)} beat{'s' if len(beat) == 1 else ''} the paper's rule here, but this is a "
            f"property of the synthetic population, which is built to meet the assumption these rules read "
            f"(a crowd that mispredicts its peers while truth-holders predict it); the paper does not test "
            f"them, and only a real model can say whether the ordering holds."
        )
    else:
        text += f" {' and '.join(beat)} beat{'s' if len(beat) == 1 else ''} the paper's rule with {source}."
    return text + " " + caveat(source, population=population)


def rounds(long: pd.DataFrame, labels: Sequence[str], paper_best: str = "", *, records=None, seed: int = 0) -> str:
    """03: AceMAD over its number of rounds T, on the Average (the paper reports T = 3 as the best). Whether the
    highest T is the best is decided by paired tests on the same questions (tables.versus_best of every other T
    against it, with `records`), not by whether confidence intervals overlap."""
    avg = _avg(long)
    got = [m for m in labels if m in avg.index]
    if not got:
        return "No AceMAD run has a result here."
    best = max(got, key=lambda m: avg.loc[m].accuracy)
    level = [m for m in got if avg.loc[m].accuracy == avg.loc[best].accuracy]
    text = "Over the rounds: " + ", ".join(f"{m} {_cell(avg.loc[m])}" for m in got)
    text += f"; {' and '.join(level)} tie for the highest" if len(level) > 1 else f"; the highest is {best}"
    others = [m for m in got if m != best]
    if others and len(level) == 1:
        if records is None:
            text += " (no paired test between the T's was run, so this does not establish a best T)"
        else:
            text += _best_t(versus_best(records, others, [best], seed=seed), best, others)
    if paper_best:
        text += f" (the paper reports {paper_best} as the best)"
    return text + "."


def _best_t(tests: pd.DataFrame, best: str, others: Sequence[str]) -> str:
    """The best-T clause from the paired tests of every other T against `best` (Average rows)."""
    rows = {r["method"]: r for r in tests[tests["benchmark"] == AVERAGE].to_dict("records")} if len(tests) else {}
    if not rows:
        return "; no paired test was possible, so this does not establish a best T"
    got = [m for m in others if m in rows]
    beaten = [m for m in got if float(rows[m]["gain"]) < 0 and float(rows[m]["p_value"]) < 0.05]
    level = [m for m in got if m not in beaten]
    paired = "; ".join(
        f"{m} {float(rows[m]['gain']):+.1f} points [{float(rows[m]['gain_lo']):+.1f}, "
        f"{float(rows[m]['gain_hi']):+.1f}], {RD.pvalue(float(rows[m]['p_value']))}"
        for m in got
    )
    verdict = (
        f"so {best} is the best T here"
        if not level
        else f"so the paired tests do not separate {best} from {' and '.join(level)}: no single best T is established"
    )
    return f"; paired on the same questions against it: {paired}, {verdict}"


def control(long: pd.DataFrame, target: str, same_agents: str, homogeneous: str) -> str:
    """03: split AceMAD's lead into the agents (same protocol, AceMAD roster) and the protocol (same agents)."""
    avg = _avg(long)
    if not all(m in avg.index for m in (target, same_agents, homogeneous)):
        return "The control rows are missing here."
    a, c, h = (avg.loc[m].accuracy for m in (target, same_agents, homogeneous))
    return (
        f"Of {target}'s {a - h:+.1f} points over {homogeneous}, {c - h:+.1f} come with the agents alone "
        f"({same_agents}: {c:.1f}%) and {a - c:+.1f} with the protocol on those same agents (commitments, "
        f"peer-prediction weights)."
    )


# What each control of issue 29 item 3 is (registry.controls: every one has AceMAD's own agents) and what AceMAD
# being ahead of it / behind it shows.
_CONTROL_MEANING = {
    "decentralized": (
        "the same agents debating without commitments or weights",
        "AceMAD's protocol adds to a debate of the same agents",
        "AceMAD's protocol does worse than a plain debate of the same agents",
    ),
    "single": (
        "the best single agent of AceMAD's roster answering alone, mean of 5 runs",
        "the debate adds to what its truth-holder knows alone",
        "the debate loses what its truth-holder knows alone: the crowd outweighs it even with the weights",
    ),
    "majority": (
        "the same agents voting without any debate",
        "debating and weighting add to a vote of the same agents",
        "a plain vote of the same agents does better than debating and weighting",
    ),
}


def controls(long: pd.DataFrame, records: Sequence[dict], target: str, configs: Sequence) -> str:
    """03 and 05: one sentence per control config (AceMAD's agents without AceMAD's protocol), with `target`'s
    paired gain over it on the average (tables.versus_best, 95% CI) and what that shows."""
    avg = _avg(long)
    out = []
    for c in configs:
        if c.label not in avg.index or target not in avg.index:
            out.append(f"{c.label}: no result here.")
            continue
        what, ahead, behind = _CONTROL_MEANING.get(c.method, ("a control", "AceMAD is ahead", "AceMAD is behind"))
        t = versus_best(records, [target], [c.label])
        t = t[t["benchmark"] == AVERAGE]
        if t.empty:
            out.append(f"{c.label} ({what}) averages {_cell(avg.loc[c.label])}; no paired comparison was possible.")
            continue
        r = t.iloc[0]
        if r.gain_lo <= 0 <= r.gain_hi:
            verdict, shows = "not distinguishable from it at this n", "this control cannot tell"
        else:
            verdict, shows = ("ahead of it", ahead) if r.gain > 0 else ("behind it", behind)
        out.append(
            f"{c.label} ({what}) averages {_cell(avg.loc[c.label])}; {target} is {verdict}, {r.gain:+.1f} points "
            f"[{r.gain_lo:+.1f}, {r.gain_hi:+.1f}], {RD.pvalue(r.p_value)}: {shows}."
        )
    return " ".join(out)


def _paired(records: Sequence[dict], target: str, baseline: str) -> str:
    t = versus_best(records, [target], [baseline])
    t = t[t["benchmark"] == AVERAGE]
    if t.empty:
        return "no paired comparison"
    r = t.iloc[0]
    return f"{r.gain:+.1f} points [{r.gain_lo:+.1f}, {r.gain_hi:+.1f}], {RD.pvalue(r.p_value)}"


def shuffled(long: pd.DataFrame, records: Sequence[dict], target: str, uniform: str, control: str) -> str:
    """05 (and 09's words): the shuffled-score control in one sentence, splitting `target`'s gain over uniform weights
    into the part carried by who scores well (over `control`) and what any unequal weights give (`control` over
    `uniform`), both paired on the average."""
    avg = _avg(long)
    if control not in avg.index:
        return f"{control}: no result here."
    return (
        f"{control} (AceMAD's own weights given to randomly permuted agents of the same debate) averages "
        f"{_cell(avg.loc[control])}. {target}'s paired gain over it, {_paired(records, target, control)}, is the part "
        f"of its gain carried by WHO scores well; the control's own gain over {uniform}, "
        f"{_paired(records, control, uniform)}, is the part any unequal weights give on these items."
    )


def _variant_rule(spec, params) -> str:
    """Why one truth-holder variant can or cannot be found by the score, from the population's rules."""
    p = params.p_insight(spec)
    share = (1 - params.explore(spec.temperature)) * p
    who = f"{spec.persona} at {spec.temperature:g}" + (", slow thinking" if spec.thinking == "slow" else "")
    who += f", on {spec.model}" if spec.model else ""
    text = f"its truth-holder ({who}) sees through the trap with P_insight = {p:.2f}, i.e. on {share:.0%} of items"
    if spec.model:
        text += "; it draws its own model's trap (its errors are not the crowd's)"
    if p == 0:
        return text + (
            ", so it never gets peer-prediction skill (knowledge_link ties that skill to the insight state): the "
            "score cannot single it out, and whatever it changes comes from its different answers and the weights' "
            "dispersion, not from the paper's mechanism"
        )
    if spec != SKEPTIC:
        text += f" (the Skeptic's: {params.p_insight(SKEPTIC):.2f})"
    return text + (
        f"; only then does it predict the crowd and gain weight (the "
        f"knowledge_link = {params.knowledge_link:g} assumption), so the fewer items on which it sees through the "
        "trap, the smaller the gain"
    )


def variant_rules(tests: pd.DataFrame, configs: Sequence, population) -> str:
    """04: why each heterogeneity variant gains or not in the simulation, from the population's rules (the fifth
    agent's P_insight and the knowledge_link assumption), beside its paired gain on the average. A real model: no
    rule to cite, so one sentence that says so."""
    params = getattr(population, "params", None)  # a synthetic population's SimParams (report/ imports no agents/)
    if not getattr(population, "synthetic", False) or not isinstance(params, SimParams):
        return "With a real model the variants differ in whatever the model does; no population rule explains them."
    avg = tests[tests["benchmark"] == AVERAGE].set_index("method")
    out = [
        "In the simulation a variant changes only how likely its truth-holder is to be in the insight state; under "
        f"calibration_by = {params.calibration_by!r} that state, not the persona, gives peer-prediction "
        "skill."
    ]
    for c in configs:
        if c.method != "acemad":
            continue
        gain = (
            f"{avg.loc[c.label].gain:+.1f} points [{avg.loc[c.label].gain_lo:+.1f}, {avg.loc[c.label].gain_hi:+.1f}]"
            if c.label in avg.index
            else "no paired gain"
        )
        out.append(
            f"{c.label} ({gain} over {avg.iloc[0].best_baseline if len(avg) else 'the baseline'}): "
            f"{_variant_rule(c.truth_holder, params)}."
        )
    return " ".join(out)


def join(source: str, *texts: str, population: Optional[Mapping] = None, uses: Sequence[str] = ()) -> str:
    """Several of the sentences above as one paragraph, with the caveat (and, on a synthetic profile, the
    assumption the result rests on, from `population`; `uses` as in assumption) said once, at the end."""
    plain, full = caveat(source), caveat(source, population=population, uses=uses)
    body = " ".join(t.replace(full, "").replace(plain, "").strip() for t in texts if t)
    return body + " " + full


def leaders(long: pd.DataFrame, methods: Sequence[str]) -> str:
    """Which of `methods` is highest in each benchmark column (04: the paper's task-specific sensitivity)."""
    sub = long[long["method"].isin(methods) & (long["benchmark"] != AVERAGE)]
    if sub.empty:
        return "No benchmark column has a result here."
    top = sub.loc[sub.groupby("benchmark", sort=False)["accuracy"].idxmax()]

    if top["method"].nunique() == 1 and len(top) > 1:
        return f"{top['method'].iloc[0]} is the highest of them in every benchmark column."
    return (
        "Highest per benchmark: "
        + "; ".join(
            f"{bench_label(r.benchmark.removeprefix('synthetic-'))}: {r.method} {r.accuracy:.1f}%"
            for r in top.itertuples()
        )
        + "."
    )


def full_sets(tests: pd.DataFrame, source: str, claim: str = "", *, population: Optional[Mapping] = None) -> str:
    """07 (Table 6): the gains on the full test sets, with what those sets are: mixed-difficulty items for a real
    model; for the synthetic population every item, full set or subset, is built with a shared trap distractor,
    so the full sets differ from the subsets only by skipping the naive agent's filter."""
    what = (
        "In the synthetic population every full-set item carries a trap distractor too (the full sets only skip "
        "the naive agent's filter), so this is not the paper's mixed-difficulty regime."
        if _synthetic(source)
        else "The full test sets mix easy items with items that carry a shared misconception."
    )
    return f"Table 6, full test sets: {what} " + gains(tests, source, claim, population=population)


def models(results: Sequence[tuple], target: str) -> str:
    """07: `target`'s paired gain on the Average over the best MAD baseline, one clause per (name, tests, source)."""
    parts = []
    for name, tests, src in results:
        t = tests[(tests["method"] == target) & (tests["benchmark"] == AVERAGE)] if len(tests) else tests
        if t is None or t.empty:
            parts.append(f"{name} [{src}]: no paired comparison")
            continue
        r = t.iloc[0]
        parts.append(
            f"{name} [{src}]: {r.gain:+.1f} points [{r.gain_lo:+.1f}, {r.gain_hi:+.1f}] over {r.best_baseline} "
            f"({RD.pvalue(r.p_value)}, {_sig(r.p_value)})"
        )
    if not parts:
        return "No other model was run."
    text = f"{target} against the best MAD baseline, on the average: " + "; ".join(parts) + "."
    if any("SYNTHETIC" in src.upper() for _, _, src in results):
        text += (
            " A synthetic stand-in carries a model's name but not its behaviour (its parameters come from the "
            "paper's words, never its numbers): these rows test the code path, not the model."
        )
    return text
