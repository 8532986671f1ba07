"""Does AceMAD's premise hold on this run (`premise`: the agent whose peer prediction scores best knows more than one
picked at random; the weights follow the score, so without it no gain comes from WHO scores well), and where does
its gain come from (`split`)? From stored p, scores and the truth only: any AceMAD run, any backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import pandas as pd

from acemad_utils.data.sim_params import SimParams
from acemad_utils.protocol.config import METHOD_NAMES, NAIVE_AGENT, WEIGHTINGS
from acemad_utils.report import rescoring as A
from acemad_utils.report.readable import P_COLUMN, pvalue
from acemad_utils.report.stats import bootstrap_ci, interval
from acemad_utils.report.tables import AVERAGE, accuracy_long, question_frame, versus_best
from acemad_utils.report.words import listed

ROUND_COLUMNS = "method question_id round top_right share_right right_score wrong_score rank_corr".split()
#: Questions with both right and wrong agents a verdict needs: the lift is 0 on every other question, and a
#: percentile bootstrap over fewer clusters than this covers far less than its nominal 95%.
MIN_SPLIT = 10
PREMISE_COLUMNS = ["method", "round", "n", "top_agent", "random_agent", "lift", "lift_lo", "lift_hi", "n_split",
                   "rank_corr", "rank_corr_lo", "rank_corr_hi", "parse_failure", "verdict"]  # fmt: skip


def _scored(records: Sequence[dict]) -> list[dict]:
    ok = lambda r: r.get("status", "ok") == "ok" and r.get("rounds") and r["rounds"][0][0].get("score") is not None
    return [r for r in records if ok(r)]


def question_rounds(records: Sequence[dict]) -> pd.DataFrame:
    """Per scored record x round, over the parsed agents: is the top scorer right (ties share it), the share of right
    agents, their and the wrong agents' mean score, and the within-question Spearman correlation of score and
    correctness (pooled, easy questions would correlate them with no premise)."""
    rows = []
    for rec in (r for r in _scored(records) if r.get("answer") is not None):
        truth = rec["labels"].index(rec["answer"])
        for t, entries in enumerate(rec["rounds"], start=1):
            kept = [e for e in entries if e.get("score") is not None and not e.get("parse_failure") and e.get("p")]
            if not kept:
                continue
            s = np.array([float(e["score"]) for e in kept])
            # one argmax for the round (per agent it was most of question_rounds); every p has the record's K options
            ok = (np.array([e["p"] for e in kept], dtype=float).argmax(axis=1) == truth).astype(float)
            top, n, right = s == s.max(), len(ok), int(ok.sum())  # shares of 0/1 counts: exact as np.mean's
            split = 0 < right < n
            rho = float(np.corrcoef(_ranks(s), ok)[0, 1]) if split and np.ptp(s) > 0 else np.nan  # ties: mean
            rows.append((rec.get("method"), rec["question_id"], t, int(ok[top].sum()) / int(top.sum()), right / n,
                         float(s[ok == 1].mean()) if right else np.nan,
                         float(s[ok == 0].mean()) if right < n else np.nan, rho))  # fmt: skip
    return pd.DataFrame(rows, columns=ROUND_COLUMNS)


def _ranks(x: np.ndarray) -> np.ndarray:
    """pandas' Series.rank(): 1-based, ties get their mean rank (exact half-integers); a Series per round was most
    of question_rounds' time (notebooks 03, 05 and 09: ~10^4 rounds each)."""
    return (x[:, None] > x).sum(axis=1) + ((x[:, None] == x).sum(axis=1) + 1) / 2  # below it, and half its ties


def parse_failures(records: Sequence[dict]) -> pd.DataFrame:
    """Per method and round: the share of commitments whose p or q did not parse (after the repair call)."""
    rows = [
        (r.get("method"), t, bool(e.get("parse_failure") or e.get("q_parse_failure")))
        for r in _scored(records)
        for t, entries in enumerate(r["rounds"], start=1)
        for e in entries
    ]
    df = pd.DataFrame(rows, columns=["method", "round", "failed"])
    return df.groupby(["method", "round"], as_index=False, sort=False)["failed"].mean()


def premise(records: Sequence[dict], seed: int = 0, *, rounds: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """Every AceMAD method's premise check per round and over all ("all": each question's rounds averaged, so the CI
    resamples independent questions): top / random agent accuracy (%), their lift (points, CI), n_split (questions
    with right and wrong agents), rank_corr (CI), parse_failure, verdict (a key of VERDICTS).
    `rounds`: the records' question_rounds, when the caller holds them."""
    qr = question_rounds(records) if rounds is None else rounds
    fails = parse_failures(records)
    rows = []
    for method in fails["method"].unique():
        g = qr[qr["method"] == method]
        g = g.assign(lift=100 * (g["top_right"] - g["share_right"]), split=(g["share_right"] % 1) > 0)
        per_question = g.groupby("question_id", sort=False).agg(
            dict.fromkeys(["top_right", "share_right", "lift", "rank_corr"], "mean") | {"split": "max"}
        )
        f = fails[fails["method"] == method]
        for rnd, part in [*g.groupby("round"), ("all", per_question)]:
            lift, lo, hi = (float(x) for x in bootstrap_ci(part["lift"].to_numpy(), seed=seed))  # noise-free 0s
            rho, rlo, rhi = bootstrap_ci(part["rank_corr"].to_numpy(), seed=seed)
            pf = f["failed"].mean() if rnd == "all" else f.loc[f["round"] == rnd, "failed"].mean()
            rows.append(
                [method, rnd, len(part), 100 * part["top_right"].mean(), 100 * part["share_right"].mean(), lift, lo, hi]
                + [int(part["split"].sum()), rho, rlo, rhi, float(pf)]
            )
    out = pd.DataFrame(rows, columns=PREMISE_COLUMNS[:-1])
    return out.assign(verdict=[_verdict(r) for r in out.itertuples()])


VERDICTS = {
    "holds": "holds",
    "fails": "fails: the top scorer knows less than a random agent",
    "not shown": "is not shown (its CI contains 0)",
    "unseen": "cannot be seen: on no question were some agents right and some wrong",
    "unmeasured": "cannot be measured: no question with a gold answer has a parsed commitment",
    "not judged": f"is not judged at this n (fewer than {MIN_SPLIT} questions with both right and wrong agents)",
}
#: What each verdict means for a gain of AceMAD (appended to its premise sentence)
_SO = dict.fromkeys(["fails", "unseen"], " So no gain of AceMAD here can come from who scores well.") | {
    "not shown": " So this run does not show that a gain of AceMAD could come from who scores well.",
    "not judged": " So this run cannot say whether a gain of AceMAD could come from who scores well.",
}


def _verdict(r) -> str:
    if not r.n:
        return "unmeasured"
    if not r.n_split and r.n >= MIN_SPLIT:
        return "unseen"
    # only a split question can lift: a bootstrap over one or a few of them is a point, not a CI to act on
    if r.n_split < MIN_SPLIT:
        return "not judged"
    return "holds" if r.lift_lo > 0 else "fails" if r.lift_hi < 0 else "not shown"


def premise_sentence(
    table: pd.DataFrame, synthetic: bool, split_table: Optional[pd.DataFrame] = None, *,
    population: Optional[Mapping] = None,
) -> str:  # fmt: skip
    """The "What we see" of a `premise` table; with a `split` table also AceMAD against the same calls spent on
    sampling and, on the synthetic population, what in it decides that."""
    if table.empty:
        return "No AceMAD run with peer-prediction scores here: no premise check."
    parts = []
    for method, g in table.groupby("method", sort=False):
        r = g[g["round"].astype(str) == "all"].iloc[0]
        rounds = ", ".join(f"round {x.round}: {x.lift:+.1f}" for x in g[g["round"].astype(str) != "all"].itertuples())
        v = _verdict(r)
        if not r.n:
            parts.append(
                f"{method}: the premise {VERDICTS[v]} ({100 * r.parse_failure:.1f}% of commitments did not parse)."
            )
            continue
        text = (
            f"{method}: the premise (the agent whose peer prediction scores best knows more than a random agent) "
            f"{VERDICTS[v]}. The top-scoring agent's own answer is right {r.top_agent:.1f}% of the time against "
            f"{r.random_agent:.1f}% for an agent picked at random, a lift of {r.lift:+.1f} points "
            f"{interval(r.lift_lo, r.lift_hi, '+.1f')} over all rounds ({rounds}); n = {r.n} question"
            f"{'' if r.n == 1 else 's'}, {r.n_split} of them with both right and wrong agents. "
            + (
                f"Within a question, score and correctness correlate at {r.rank_corr:+.2f} "
                f"{interval(r.rank_corr_lo, r.rank_corr_hi, '+.2f')} (Spearman); "
                if pd.notna(r.rank_corr)
                else "Score and correctness have no correlation within a question to show (none split the agents); "
            )
            + f"{100 * r.parse_failure:.1f}% of commitments did not parse."
        )
        if r.n_split and pd.notna(r.rank_corr) and np.sign(r.lift) * np.sign(r.rank_corr) < 0:  # 0 has no sign
            text += (
                " The two disagree in sign: the correlation counts every agent, also those right without knowing why "
                "the others err (a forecast of agreement with oneself scores low when the others are wrong), while "
                "the lift follows the top scorer, the agent AceMAD's weights favour."
            )
        parts.append(text + _SO.get(v, ""))
    lead = (
        "On the synthetic population this is the population's assumption seen from the data (its knowledge_link sets "
        "how far peer-prediction skill goes with knowing the truth), not evidence about any model. "
        if synthetic
        else ""
    )
    if split_table is None:
        return lead + " ".join(parts)
    rows = split_table[split_table["control"].astype(str).str.startswith(METHOD_NAMES["self_consistency"])]
    more = [
        f"AceMAD vs the same number of calls spent on sampling: {r.method} {r.accuracy + r.difference:.1f}% against "
        f"{r.control} {r.accuracy:.1f}% (our call-matched baseline, not the paper's: the naive agent sampled "
        f"once per AceMAD turn, the same calls per question; on a model AceMAD's prompts also carry the debate, so "
        f"it sends several times the tokens), a difference of {r.difference:+.1f} points "
        f"{interval(r.difference_lo, r.difference_hi, '+.1f')}, {pvalue(r.p_value)}, n = {r.n}."
        for r in rows.itertuples()
    ]
    pop = dict(population or {})
    sp = SimParams(**pop["params"]) if pop.get("synthetic") and pop.get("params") else None
    if len(rows) and sp is not None:  # what decides the sampling row, beside it
        tau = NAIVE_AGENT.temperature
        e, ci, cp = sp.explore(tau), sp.crowd_insight, sp.copy(tau)
        cut = min(1.0, 0.5 / (1 - ci)) if ci < 1 else 1.0
        more.append(
            f"On the synthetic population what decides it is how independent the naive agent's samples are. At its "
            f"temperature {tau:g}, each sample copies the first sample's state with probability {cp:.2f} (from "
            f"crowd_copy = {sp.crowd_copy:g}: near-copies). Otherwise it guesses with probability {e:.2f}; if not, "
            f"it sees through the trap with probability crowd_insight = {ci:g}; if not, it falls for the item's trap "
            f"with the item's propensity pi (else it answers right), and every sample of the item shares that pi "
            f"(Beta-distributed over items, mean trap_mean = {sp.trap_mean:g}, concentration trap_concentration = "
            f"{sp.trap_concentration:g}). So more samples converge on the truth only on items with pi < {cut:.2f}, "
            f"and on the trap elsewhere: errors shared through pi (and copies) do not average out, whatever the number "
            f"of samples."
        )
    return lead + " ".join(parts + more + _controls_sentence(split_table, sp))


def _controls_sentence(split_table: pd.DataFrame, params: Optional[SimParams] = None) -> list[str]:
    """Each AceMAD method against the controls re-decided from its own commitments, grouped by what the paired
    difference shows: ahead, behind (a control that beats the protocol on its own commitments says the weights are
    not what earns the gain), or not distinguishable at this n. Ahead or behind takes both the interval and the paired
    test (p < 0.05): at a pilot's n the percentile interval can exclude 0 where the exact test does not. On the
    synthetic population, Self-belief only ahead names the population's assumption that lets it be."""
    out = []
    sign = lambda r: 0 if not r.p_value < 0.05 else 1 if r.difference_lo > 0 else -1 if r.difference_hi < 0 else 0
    for method, g in split_table.groupby("method", sort=False):
        g = g[g["control"].isin([UNIFORM, SELF_BELIEF, SHUFFLED, SURPRISINGLY_POPULAR, ROUND0])]
        said: dict[str, list[str]] = {"ahead of": [], "behind": [], "not distinguishable from": []}
        for r in g.itertuples():
            side = {1: "ahead of", -1: "behind", 0: "not distinguishable from"}[sign(r)]
            said[side].append(f"{r.control} ({r.difference:+.1f} {interval(r.difference_lo, r.difference_hi, '+.1f')})")
        parts = [f"{side} {listed(x)}" for side, x in said.items() if x]
        if parts:
            out.append(f"Re-decided from {method}'s own commitments (no call), {method} is {'; '.join(parts)}.")
        if params is not None and any(r.control == SELF_BELIEF and sign(r) < 0 for r in g.itertuples()):
            out.append(
                f"{SELF_BELIEF} ahead of {method} rests on this population's stubborn truth-holders: an agent that "
                f"sees through the trap barely moves toward the beliefs it reads (insight_susceptibility = "
                f"{params.insight_susceptibility:g} against the crowd's {params.crowd_susceptibility:g}), so its own "
                "confidence can single it out (notebook 08's 'decided by' column says which assumptions turn this)."
            )
    return out


def shown(frame: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """A premise or split table for display: numbers to `digits` decimals, p-values whole (rounded, the permutation
    floor 1e-4 would show as a p of 0)."""
    return frame.round({c: digits for c in frame.columns if not P_COLUMN.search(str(c))})


# ----------------------------------------------------------------------------- the gain split
UNIFORM, SELF_BELIEF = "Uniform weights (AceMAD's debate)", "Self-belief only"
SHUFFLED = A.SHUFFLED
SURPRISINGLY_POPULAR = A.AGGREGATORS[3]
ROUND0 = "Round-0 majority (AceMAD's first answers)"
SPLIT_COLUMNS = ["method", "control", "accuracy", "accuracy_lo", "accuracy_hi", "difference", "difference_lo",
                 "difference_hi", "p_value", "n"]  # fmt: skip


def _settings(method: str, meta: Optional[dict], seed: int = 0) -> dict:
    """`method`'s eta, weight exponent, weighting and seed in the run (meta.json), else the paper's and `seed`."""
    cfg = ((meta or {}).get("methods") or {}).get(method) or {}
    defaults = {"eta": A.ETA, "weight_exponent": A.WEIGHT_EXPONENT, "seed": seed}
    return {k: cfg.get(k, v) for k, v in defaults.items()} | {
        "weighting": cfg.get("weighting") or next((w for w in WEIGHTINGS[1:] if w in method), WEIGHTINGS[0])
    }


def acemad_methods(records: Sequence[dict], meta: Optional[dict] = None) -> list[str]:
    """The AceMAD methods of `records` weighted by peer prediction (not its ablations), in order."""
    kinds = {r["method"]: r.get("method_kind") for r in _scored(records)}
    return [m for m, k in kinds.items() if k == "acemad" and _settings(m, meta)["weighting"] == WEIGHTINGS[0]]


def control_records(records: Sequence[dict], method: str, seed: int = 0, meta: Optional[dict] = None) -> list[dict]:
    """`method`'s debates re-decided by each control of the split (ROUND0: the plurality of the first answers)."""
    recs = [r for r in _scored(records) if r["method"] == method]
    cfg = _settings(method, meta, seed)
    eta, k, seed = cfg["eta"], cfg["weight_exponent"], cfg["seed"]
    arr = A.stack(recs, seed)
    out = A.reweighted_records(recs, {UNIFORM: "uniform", SELF_BELIEF: "self_belief"}, eta, k, seed=seed, stacked=arr)
    out += A.shuffled_records(recs, eta, k, seed=seed, stacked=arr)
    out += [r for r in A.rescored_records(recs, eta, seed) if r["method"] == SURPRISINGLY_POPULAR]
    return out + A.minimal(recs, ROUND0, A.initial_plurality(arr), arr.truth, np.asarray(arr.valid[:, 0].any(-1)))


def split(
    records: Sequence[dict], seed: int = 0, *, meta: Optional[dict] = None, others: Sequence[str] = ()
) -> pd.DataFrame:
    """AceMAD's gain split: each peer-prediction AceMAD method's accuracy, each control's (control_records) and each
    of `others`' (e.g. the call-matched baseline), and AceMAD minus each (points, CI, paired p)."""
    rows = []
    for m in acemad_methods(records, meta):
        ctrl = control_records(records, m, seed, meta)
        names = list(dict.fromkeys(r["method"] for r in ctrl)) + [o for o in others if o != m]
        own = [r for r in records if r["method"] in (m, *others) and r.get("status", "ok") == "ok"]  # failed: no n
        frame = question_frame([*own, *ctrl])
        long = accuracy_long(None, frame=frame, seed=seed)
        if long.empty:  # no question with a gold answer: nothing to score or split
            continue
        acc = long[long["benchmark"] == AVERAGE].set_index("method")
        # one benchmark: its own paired test (exact McNemar on 0/1 outcomes); several: the stratified Average's
        several = frame["benchmark"].nunique() > 1
        for c in [c for c in [m, *names] if c in acc.index]:
            row = [m, c, *acc.loc[c, ["accuracy", "ci_lo", "ci_hi"]], *[np.nan] * 4, int(acc.loc[c, "n"])]
            if c != m:
                t = versus_best(None, [m], [c], frame=frame, seed=seed, average=several, per_benchmark=not several)
                if not len(t):  # no question both answered (the other's records failed): no difference to show
                    continue
                d = t.iloc[0]
                row[5:] = [d.gain, d.gain_lo, d.gain_hi, d.p_value, int(d.n_paired)]
            rows.append(row)
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def table_rows(records: Sequence[dict], meta: Optional[dict] = None, seed: int = 0) -> pd.DataFrame:
    """The premise check and the gain split as rows of an accuracy table's Average column (api.Results.table)."""
    rows = []
    for r in premise(records, seed).query("round == 'all'").itertuples():
        corr = f"{r.rank_corr:+.2f}" if pd.notna(r.rank_corr) else "-"  # no question split the agents
        cell = f"{r.lift:+.1f} {interval(r.lift_lo, r.lift_hi, '+.1f')}, rank corr {corr}, " if r.n else ""
        rows.append({"method": f"Premise: {r.method}'s top scorer minus a random agent (points; premise {r.verdict})",
                     AVERAGE: cell + f"unparsed {100 * r.parse_failure:.1f}%, n={r.n}"})  # fmt: skip
    table = split(records, seed, meta=meta)
    for r in table[table["control"] != table["method"]].itertuples():
        rows.append({"method": f"{r.control} (re-decided from {r.method}'s commitments, no call)",
                     AVERAGE: f"{r.accuracy:.1f} {interval(r.accuracy_lo, r.accuracy_hi)}"})  # fmt: skip
        cell = f"{r.difference:+.1f} {interval(r.difference_lo, r.difference_hi, '+.1f')}, {pvalue(r.p_value)}, n={r.n}"
        rows.append({"method": f"{r.method} minus {r.control} (paired)", AVERAGE: cell})
    return pd.DataFrame(rows, columns=["method", AVERAGE])
