"""The assumption map's numbers, figures and words (notebook 09), and a measure any run can be given.

    from acemad_utils.report import assumptions as RA
    row = RA.map_row("grid", SimParams(knowledge_link=0.0), records, "AceMAD (T=3)", "Standard MAD ...", mads)
    fig = RA.heatmap(table, source)          # gain over knowledge_link x insight, losing cells marked
    fig = RA.sweeps(table, source)           # gain against trap_concentration and crowd_calibration
    print(RA.story(table, source))           # "What we see", from the numbers
    RA.knowledge_gap(records)                # do agents who answer right predict their peers better?

knowledge_gap needs only each agent's belief p, its peer-prediction score and the truth: it is what a real model's
run (LLM profiles) would have to show for the synthetic map's high-knowledge_link region to describe it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from acemad_utils.data.sim_params import CALIBRATION_GRID, MAP_SWEEPS, TRUTH_HOLDER_PERSONAS, SimParams
from acemad_utils.report import premise
from acemad_utils.report.rescoring import N_SHUFFLES, SHUFFLED
from acemad_utils.report.stats import bootstrap_ci
from acemad_utils.report.tables import AVERAGE, accuracy_long, paper_table, question_frame, versus_best

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: a kernel that draws none never loads it
    from matplotlib.figure import Figure

AXIS_PARAMS = ("knowledge_link", "insight", "trap_concentration", "crowd_calibration", "crowd_copy")
#: The truth-holder alone is implausible above this accuracy (%): the challenging subsets keep the items on which
#: the same model scored below 40% in 5 runs, and the Skeptic is a persona of that model.
PLAUSIBLE_ALONE = 40.0
MAP_COLUMNS = [
    "axis",
    *AXIS_PARAMS,
    "insight_calibration",
    "calibration_by",
    "truth_holder_alone",
    "acemad",
    "uniform",
    "best_mad",
    "best_mad_accuracy",
    "gain_uniform",
    "gain_uniform_lo",
    "gain_uniform_hi",
    "p_uniform",
    "shuffled",
    "gain_shuffled",
    "gain_shuffled_lo",
    "gain_shuffled_hi",
    "p_shuffled",
    "gain_dispersion",
    "gain_dispersion_lo",
    "gain_dispersion_hi",
    "p_dispersion",
    "gain_mad",
    "gain_mad_lo",
    "gain_mad_hi",
    "p_mad",
    "n",
    "agent_accuracy",
]
GAP_COLUMNS = [
    "run",
    "round",
    "n_questions",
    "score_right",
    "score_wrong",
    "gap",
    "gap_lo",
    "gap_hi",
    "lift",
    "lift_lo",
    "lift_hi",
]


def _average(tests: pd.DataFrame) -> pd.Series:
    row = tests[tests["benchmark"] == AVERAGE]
    if row.empty:
        raise ValueError(f"no paired comparison on the average: {tests.attrs.get('note', 'no shared questions')}")
    return row.iloc[0]


def agent_accuracy(records: Sequence[dict]) -> float:
    """Mean over questions of the share of agents whose own final-round answer (argmax p) is right, in %: what a
    decision would score that follows one agent picked without regard to the truth."""
    shares = []
    for rec in records:
        if rec.get("status") != "ok" or not rec.get("rounds"):
            continue
        truth = rec["labels"].index(rec["answer"])
        last = [e["p"] for e in rec["rounds"][-1] if e.get("p") and not e.get("parse_failure")]
        if last:  # plain Python, not numpy: ~10^4 short lists per map point (np.argmax's per-call cost was most of it)
            shares.append(sum(max(range(len(p)), key=p.__getitem__) == truth for p in last) / len(last))
    return 100 * float(np.mean(shares)) if shares else float("nan")


def truth_holder_alone(records: Sequence[dict]) -> float:
    """The truth-holders' (TRUTH_HOLDER_PERSONAS) round-1 accuracy in %: their own answer before reading anyone,
    i.e. what the Skeptic answering alone scores (the same agent and draw as Single Agent's one round)."""
    hits = [
        max(range(len(e["p"])), key=e["p"].__getitem__) == rec["labels"].index(rec["answer"])
        for rec in records
        if rec.get("status") == "ok" and rec.get("rounds")
        for e in rec["rounds"][0]
        if e.get("persona") in TRUTH_HOLDER_PERSONAS and e.get("p") and not e.get("parse_failure")
    ]
    return 100 * float(np.mean(hits)) if hits else float("nan")


def map_row(
    axis: str,
    params: SimParams,
    records: Sequence[dict],
    acemad: str,
    uniform: str,
    mads: Sequence[str],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """One map point: its parameters, the average accuracies (%) and AceMAD's paired gains on the average (points,
    95% CI resampling questions within each benchmark, sign-flip p) over uniform weights, over shuffled scores
    (rescoring.SHUFFLED: the part carried by WHO scores well) and over the best MAD, and the shuffled control's gain
    over uniform weights ("dispersion": what any unequal weights give). gain_uniform = gain_shuffled +
    gain_dispersion (paired means on the same questions)."""
    # One frame for the five tables below (building it was most of their cost), and only what the row reads: the
    # average accuracies (no CI) and the Average rows of the paired tests (no per-benchmark test)
    f = question_frame(records)
    long = accuracy_long(None, methods=[acemad, uniform, SHUFFLED, *mads], frame=f, ci=False)
    avg = long[long["benchmark"] == AVERAGE].set_index("method")["accuracy"]
    u, s, d, m = (
        _average(versus_best(None, [t], b, n_boot=n_boot, seed=seed, frame=f, per_benchmark=False))
        for t, b in ((acemad, [uniform]), (acemad, [SHUFFLED]), (SHUFFLED, [uniform]), (acemad, list(mads)))
    )
    return {
        "axis": axis,
        **{k: getattr(params, k) for k in (*AXIS_PARAMS, "insight_calibration", "calibration_by")},
        "truth_holder_alone": truth_holder_alone([r for r in records if r.get("method") == acemad]),
        "acemad": avg[acemad],
        "uniform": avg[uniform],
        "best_mad": m.best_baseline,
        "best_mad_accuracy": avg[m.best_baseline],
        "gain_uniform": u.gain,
        "gain_uniform_lo": u.gain_lo,
        "gain_uniform_hi": u.gain_hi,
        "p_uniform": u.p_value,
        "shuffled": avg[SHUFFLED],
        **{f"gain_shuffled{k}": s[f"gain{k}"] for k in ("", "_lo", "_hi")},
        "p_shuffled": s.p_value,
        **{f"gain_dispersion{k}": d[f"gain{k}"] for k in ("", "_lo", "_hi")},
        "p_dispersion": d.p_value,
        "gain_mad": m.gain,
        "gain_mad_lo": m.gain_lo,
        "gain_mad_hi": m.gain_hi,
        "p_mad": m.p_value,
        "n": int(u.n_paired),
        "agent_accuracy": agent_accuracy([r for r in records if r.get("method") == acemad]),
    }


def display(table: pd.DataFrame) -> pd.DataFrame:
    """The map table for reading: the point, accuracies and each gain as 'gain [lo, hi]'."""
    if table.empty:
        return pd.DataFrame({"note": [table.attrs.get("note", "no map point")]})
    out = table[["axis", *AXIS_PARAMS, "n"]].copy()
    out["AceMAD %"] = table["acemad"].round(1)
    out["uniform %"] = table["uniform"].round(1)
    out["shuffled %"] = table["shuffled"].round(1)
    for key, name in (
        ("uniform", "gain over uniform"),
        ("shuffled", "gain over shuffled"),
        ("dispersion", "shuffled over uniform"),
        ("mad", "gain over best MAD"),
    ):
        g = table[[f"gain_{key}", f"gain_{key}_lo", f"gain_{key}_hi"]]
        out[name] = [f"{a:+.1f} [{lo:+.1f}, {hi:+.1f}]" for a, lo, hi in g.itertuples(index=False)]
    return out


# ----------------------------------------------------------------------------- figures
def _cell_marks(ax, cells: pd.DataFrame, rows: list, cols: list, key: str) -> None:
    """Annotate every cell with its gain; hatch the cells where AceMAD loses (the whole CI below 0) and grey the
    text where the CI contains 0 (no difference at this n)."""
    from matplotlib.patches import Rectangle

    for i, ins in enumerate(rows):
        for j, link in enumerate(cols):
            r = cells.loc[(ins, link)]
            lose, null = r[f"gain_{key}_hi"] < 0, r[f"gain_{key}_lo"] <= 0 <= r[f"gain_{key}_hi"]
            box = None
            if lose:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="k", lw=1.5))
                box = {"facecolor": "white", "edgecolor": "none", "pad": 1}
            color = "0.45" if null else "k"
            ax.text(j, i, f"{r[f'gain_{key}']:+.1f}", ha="center", va="center", fontsize=8, color=color, bbox=box)


def _no_map(fig: Figure, axes, table: pd.DataFrame) -> Figure:
    """Panels that say why there is no map (a real-model profile) instead of empty axes."""
    for ax in axes:
        ax.text(0.5, 0.5, table.attrs.get("note", "no map point"), ha="center", wrap=True)
        ax.axis("off")
    return fig


HEAT_PANELS = (
    ("uniform", "over uniform weights (Standard MAD)"),
    ("shuffled", "over shuffled scores (who scores well)"),
    ("mad", "over the best MAD"),
)


def heatmap(table: pd.DataFrame, source: str) -> Figure:
    """Three panels over the knowledge_link x insight grid, one colour scale: AceMAD's gain over uniform weights, over
    the same weights given to shuffled agents (the part carried by who scores well; the difference between the
    first two panels is what any unequal weights give) and over the best MAD baseline (points, average over
    benchmarks). Hatched: AceMAD loses (95% CI below 0); grey number: CI contains 0."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    g = table[table["axis"] == "grid"]
    # 11 inches: shrunk to the notebook's ~10 (figures.NOTEBOOK_WIDTH_IN), the cells' numbers stay above 7 pt
    fig, axes = plt.subplots(1, len(HEAT_PANELS), figsize=(11, 4.2), layout="constrained")
    if g.empty:
        return _no_map(fig, axes, table)
    lim = max(1.0, float(np.nanmax(np.abs(g[[f"gain_{k}" for k, _ in HEAT_PANELS]].to_numpy()))))
    cells = g.set_index(["insight", "knowledge_link"])
    rows, cols = sorted(g["insight"].unique()), sorted(g["knowledge_link"].unique())
    for ax, (key, title) in zip(axes, HEAT_PANELS):
        vals = np.array([[cells.loc[(i, lk), f"gain_{key}"] for lk in cols] for i in rows])
        im = ax.imshow(vals, origin="lower", cmap="RdBu", norm=TwoSlopeNorm(0.0, -lim, lim), aspect="auto")
        _cell_marks(ax, cells, rows, cols, key)
        ax.set_xticks(range(len(cols)), [f"{x:g}" for x in cols])
        ax.set_yticks(range(len(rows)), [f"{x:g}" for x in rows])
        ax.set_xlabel("knowledge_link\n(0: skill unrelated to knowing the truth)")
        if ax is axes[0]:
            ax.set_ylabel("insight\n(P a Skeptic sees through the trap)")
        ax.set_title(f"AceMAD's gain\n{title}", fontsize=10)
    fig.colorbar(im, ax=axes, label="points", fraction=0.02)
    fig.suptitle(f"Assumption map: where AceMAD gains (hatched: loses) [{source}]", fontsize=10)
    return fig


def sweeps(table: pd.DataFrame, source: str) -> Figure:
    """AceMAD's gain (points, 95% CI) over uniform weights and over the best MAD baseline against each of
    MAP_SWEEPS: trap_concentration (log x; smaller = more correlated crowd errors), crowd_calibration and crowd_copy
    (near-copies), other axes at the profile's population."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(MAP_SWEEPS), figsize=(5.5 * len(MAP_SWEEPS), 3.8))
    if table.empty:
        return _no_map(fig, axes, table)
    for ax, axis in zip(axes, MAP_SWEEPS):
        s = table[table["axis"] == axis].sort_values(axis)
        for key, name, dx in (
            ("uniform", "over uniform weights", 0.97),
            ("shuffled", "over shuffled scores", 1.0),
            ("mad", "over the best MAD", 1.03),
        ):
            x = s[axis] * dx if axis == "trap_concentration" else s[axis] + (dx - 1)
            err = np.vstack([s[f"gain_{key}"] - s[f"gain_{key}_lo"], s[f"gain_{key}_hi"] - s[f"gain_{key}"]])
            ax.errorbar(x, s[f"gain_{key}"], yerr=err, marker="o", capsize=3, label=f"AceMAD's gain {name}")
        ax.axhline(0, color="k", lw=0.8)
        if axis == "trap_concentration":
            ax.set_xscale("log")
        ax.set_xlabel(axis + (" (smaller: more correlated errors)" if axis == "trap_concentration" else ""))
        ax.set_ylabel("gain (points)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Assumption map, one axis at a time [{source}]", fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- the measure a real model needs
def knowledge_gap(records: Sequence[dict], *, label: str, seed: int = 0) -> pd.DataFrame:
    """Two measures of whether the peer-prediction score finds the agents who are right, per round and over all
    rounds, on the questions where some agents are right and some wrong, with bootstrap 95% CIs over questions:
    - gap: mean score S = 1 - ||q_i - mean_{j != i} p_j||^2 of agents whose answer (argmax p) is right minus that of
      agents whose answer is wrong (> 0: the agents who are right model their peers better);
    - lift: whether the top-scoring agent is right minus the share of right agents (> 0: the score points at a
      right agent more often than picking an agent at random; what the weights exploit; agents tied at the top
      share it). premise.premise's lift is this lift over every question (0 where all agree), in points.
    Only stored p and scores are used (premise.question_rounds): it applies to any AceMAD run (a real model's too)."""
    qr = premise.question_rounds(records)
    df = qr[(qr["share_right"] > 0) & (qr["share_right"] < 1)]
    if df.empty:
        return pd.DataFrame([[label, "all", 0, *[np.nan] * (len(GAP_COLUMNS) - 3)]], columns=GAP_COLUMNS)
    df = df.rename(columns={"question_id": "question", "right_score": "right", "wrong_score": "wrong"})
    df = df.assign(gap=df["right"] - df["wrong"], lift=df["top_right"] - df["share_right"])
    # "all": one value per question (its rounds averaged), so the interval resamples independent questions
    per_question = df.groupby("question", sort=False)[["right", "wrong", "gap", "lift"]].mean()
    rows = []
    for rnd, g in [*df.groupby("round"), ("all", per_question)]:
        gap, gap_lo, gap_hi = bootstrap_ci(g["gap"].to_numpy(), seed=seed)
        lift, lift_lo, lift_hi = bootstrap_ci(g["lift"].to_numpy(), seed=seed)
        rows.append(
            [label, rnd, len(g), g["right"].mean(), g["wrong"].mean(), gap, gap_lo, gap_hi, lift, lift_lo, lift_hi]
        )
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


# ----------------------------------------------------------------------------- "What we see"
def _gain(r: pd.Series, key: str) -> str:
    return f"{r[f'gain_{key}']:+.1f} points [{r[f'gain_{key}_lo']:+.1f}, {r[f'gain_{key}_hi']:+.1f}]"


def _verdict(r: pd.Series, key: str) -> str:
    if r[f"gain_{key}_lo"] > 0:
        return "a gain"
    return "a loss" if r[f"gain_{key}_hi"] < 0 else "no difference within its CI"


def _point(table: pd.DataFrame, axis: str, **values) -> pd.Series | None:
    sel = table[table["axis"] == axis]
    for k, v in values.items():
        sel = sel[np.isclose(sel[k], v)]
    return sel.iloc[0] if len(sel) else None


_CAL = SimParams().crowd_calibration  # the same in every named population (data.sim_params.POPULATIONS)


def _defaults(table: pd.DataFrame) -> tuple[pd.Series | None, pd.Series | None]:
    """The map points at knowledge_link 1 and 0 with every other parameter at the profile's population (the
    knowledge_link x crowd_calibration plane at the default crowd_calibration: its insight is the population's)."""
    on, off = (_point(table, CALIBRATION_GRID, knowledge_link=x, crowd_calibration=_CAL) for x in (1.0, 0.0))
    return on, off


def _residual_sentence(table: pd.DataFrame, on: pd.Series, off: pd.Series) -> str:
    """Why a gain remains at knowledge_link 0, from the numbers: only said when they support it."""
    size = "though it shrinks" if off.gain_uniform < on.gain_uniform else "and it does not shrink"
    text = f"So the gain does not vanish at link 0 in this simulation, {size}."
    if off.agent_accuracy > off.uniform:
        text += (
            f" Why: on these items the uniform decision ({off.uniform:.1f}%) is worse than a typical agent's own "
            f"final answer (agents right {off.agent_accuracy:.1f}% of the time on average: correlated errors, on "
            f"items chosen where the naive agent fails), so any weights that differ between agents, for whatever "
            f"reason, move the decision toward a single agent's answer and gain a little (the shuffled-score "
            f"control below measures this part)."
        )
    else:
        text += " The simulation does not isolate why."
    none = next((r for _, r in table.iterrows() if r["axis"].startswith("no skilled predictor")), None)
    if none is not None:
        text += " With no skilled predictor at all (every agent predicts false consensus) the gain is "
        text += f"{_gain(none, 'uniform')}."
    return text


def _link_sentences(table: pd.DataFrame) -> list[str]:
    on, off = _defaults(table)
    if on is None or off is None:
        return ["The map has no knowledge_link = 1 and 0 pair at the defaults."]
    out = [
        f"At the defaults (knowledge_link 1: only agents who see through the trap predict the crowd) AceMAD gains "
        f"{_gain(on, 'uniform')} over the same debate with uniform weights (Standard MAD) and {_gain(on, 'mad')} "
        f"over the best MAD baseline ({on.best_mad}); n = {on.n} questions per point.",
        f"With the link switched off (knowledge_link 0: peer-prediction skill as common, but unrelated to knowing "
        f"the truth) the gain over uniform weights is {_gain(off, 'uniform')}: {_verdict(off, 'uniform')}.",
    ]
    if off["gain_uniform_lo"] > 0:
        out.append(_residual_sentence(table, on, off))
    return out + _decomposition_sentences(table, on, off)


def _decomposition_sentences(table: pd.DataFrame, on: pd.Series, off: pd.Series) -> list[str]:
    """The gain over uniform weights split in two, at link 1 and link 0: over shuffled scores (the same weights given
    to agents picked without regard to what they know: the part carried by who scores well) and shuffled over
    uniform (what any unequal weights give on these items)."""
    out = [
        f"The shuffled-score control splits it: the same debate decided with AceMAD's own weights given to randomly "
        f"permuted agents ({_shuffle_note()}) averages {on.shuffled:.1f}% at the defaults, so of the "
        f"{on.gain_uniform:+.1f} points over uniform weights, {_gain(on, 'shuffled')} are carried by WHO scores "
        f"well (the paper's mechanism) and {_gain(on, 'dispersion')} by the weights' dispersion alone (shuffled "
        f"over uniform).",
        f"At knowledge_link 0 AceMAD's gain over shuffled scores is {_gain(off, 'shuffled')}: "
        f"{_verdict(off, 'shuffled')}, while shuffled over uniform is {_gain(off, 'dispersion')}.",
    ]
    none = next((r for _, r in table.iterrows() if r["axis"].startswith("no skilled predictor")), None)
    if none is not None:
        out.append(f"With no skilled predictor at all it is {_gain(none, 'shuffled')} over shuffled scores.")
    if off["gain_shuffled_lo"] <= 0 <= off["gain_shuffled_hi"]:
        out.append(
            "So without the link the scores no longer say who is right: what remains over uniform weights at link 0 "
            "is the dispersion of the weights, which any unequal weights would give on these items."
        )
    elif off["gain_shuffled_lo"] > 0:
        out.append("So even without the link the scores still carry some information about who is right here.")
    return out


def _shuffle_note() -> str:
    """How the shuffled control is drawn, in words (rescoring.shuffled_records)."""
    return f"one permutation per question for all rounds, {N_SHUFFLES} draws averaged"


def _region_sentence(table: pd.DataFrame) -> str:
    g = table[table["axis"] == "grid"]
    parts = []
    for key, name in (
        ("uniform", "uniform weights"),
        ("shuffled", "shuffled scores"),
        ("mad", "the best MAD baseline"),
    ):
        lose = g[g[f"gain_{key}_hi"] < 0]
        win = g[g[f"gain_{key}_lo"] > 0]
        where = "; ".join(f"link {r.knowledge_link:g}, insight {r.insight:g}" for r in lose.itertuples())
        parts.append(
            f"against {name} AceMAD gains at {len(win)} of {len(g)} points, cannot be told apart at "
            f"{len(g) - len(win) - len(lose)} and loses (hatched) at {len(lose)}" + (f" ({where})" if where else "")
        )
    grows = all(
        (s.sort_values("knowledge_link")["gain_uniform"].diff().dropna() > 0).all() for _, s in g.groupby("insight")
    )
    trend = " At every insight the gain over uniform weights grows with the link." if grows and len(g) else ""
    return "On the knowledge_link x insight grid, " + "; ".join(parts) + "." + trend


def _sweep_sentence(table: pd.DataFrame, axis: str) -> str:
    s = table[table["axis"] == axis].sort_values(axis)
    if s.empty:
        return ""
    parts = ", ".join(
        f"{getattr(r, axis):g}: {r.gain_uniform:+.1f} ({_verdict(pd.Series(r._asdict()), 'uniform')})"
        for r in s.itertuples()
    )
    first, last = s.iloc[0], s.iloc[-1]
    way = "rises" if last.gain_uniform > first.gain_uniform else "falls"
    return (
        f"Against {axis}, the gain over uniform weights is {parts}: it {way} from {first.gain_uniform:+.1f} at "
        f"{first[axis]:g} to {last.gain_uniform:+.1f} at {last[axis]:g}."
    )


def story(table: pd.DataFrame, source: str) -> str:
    """Notebook 09's "What we see": where the effect needs the assumption, and what a real model must show."""
    if table.empty:
        return (
            f"[{source}] No map here: {table.attrs.get('note', 'no point was run')}. The map is a property of the "
            "synthetic population (the default profile); the measure below is what this model's own run shows."
        )
    text = [*_link_sentences(table), _region_sentence(table)]
    text += [_sweep_sentence(table, a) for a in MAP_SWEEPS]
    persona = next((r for _, r in table.iterrows() if r["axis"].startswith("calibration by persona")), None)
    if persona is not None:
        text.append(f"With calibration assigned by persona (the earlier rule) the gain is {_gain(persona, 'uniform')}.")
    on, off = _defaults(table)
    if on is not None and on.gain_uniform > 0:
        share = on.gain_shuffled / on.gain_uniform
        how = (
            f"{share:.0%} of the protocol's advantage over uniform weights at the defaults (its gain over shuffled) is"
        )
    else:
        how = "the protocol's advantage is"
    text.append(
        f"So in this simulation {how} a consequence of the knowledge_link assumption (and of a crowd that predicts "
        "false consensus), not of the protocol alone. For it to hold with a real model, "
        "that model's AceMAD runs must show that, on questions where its agents disagree, the agent with the best "
        "peer-prediction score is right more often than an agent picked at random (the lift measured below, > 0 with "
        "its CI), i.e. that the agents who predict their peers best are the ones who know the truth, and a crowd "
        "whose peer predictions stay near its own belief."
    )
    return f"[{source}] " + " ".join(t for t in text if t)


def summary(table: pd.DataFrame, source: str) -> str:
    """Notebook 09's SUMMARY line: AceMAD's gain over uniform weights and over shuffled scores at each knowledge_link
    at the population's defaults (the knowledge_link x crowd_calibration plane at crowd_calibration 0)."""
    d = table[(table["axis"] == CALIBRATION_GRID) & np.isclose(table["crowd_calibration"].astype(float), _CAL)]
    d = d.sort_values("knowledge_link")

    def gains(key: str) -> str:
        rows = d.itertuples()
        return ", ".join(f"{r.knowledge_link:g}: {_gain(pd.Series(r._asdict()), key)}" for r in rows) or "no map"

    return (
        f"SUMMARY: [{source}] AceMAD's gain by knowledge_link over uniform weights: {gains('uniform')}; "
        f"over shuffled scores: {gains('shuffled')}"
    )


def _sign(lo: float, hi: float, yes: str, no: str) -> str:
    return yes if lo > 0 else no if hi < 0 else "neither (the CI contains 0)"


def gap_sentence(gaps: pd.DataFrame) -> str:
    """One clause per run of a `knowledge_gap` table, over all rounds: the score gap and the top scorer's lift."""
    parts = []
    for r in gaps[gaps["round"].astype(str) == "all"].itertuples():
        if not r.n_questions:
            parts.append(f"{r.run}: no question with both a right and a wrong agent")
            continue
        parts.append(
            f"{r.run}: agents who answer right predict their peers "
            f"{_sign(r.gap_lo, r.gap_hi, 'better', 'worse')} than agents who answer wrong (score gap {r.gap:+.3f} "
            f"[{r.gap_lo:+.3f}, {r.gap_hi:+.3f}]) and the top-scoring agent is right "
            f"{_sign(r.lift_lo, r.lift_hi, 'more', 'less')} often than a random agent (lift {r.lift:+.3f} "
            f"[{r.lift_lo:+.3f}, {r.lift_hi:+.3f}]), {r.n_questions} questions"
        )
    return (
        "On the questions where some agents are right and some wrong: " + "; ".join(parts) + ". The score gap "
        "averages over every right agent, including those right without knowing why the crowd errs (false "
        "consensus makes them score low when the crowd is wrong); the lift is what AceMAD's weights use."
    )


# ----------------------------------------------------------------------------- the inverse question
#: Published evidence on the map's unpinned axes: (reference, knowledge_link, crowd_calibration, one sentence).
#: A point of None: the study bears on the baselines the population is fitted to, not on this plane.
EVIDENCE = (
    (
        "arXiv 2603.06612 (Consensus is Not Verification)",
        0.0,
        1.0,
        "models predict what other models will say better than what is true, their errors are strongly correlated "
        "and confidence weighting does not help: peer-prediction skill that does not follow knowing the truth, in "
        "a crowd that models its peers (the low knowledge_link, high crowd_calibration corner)",
    ),
    (
        "surprisingly popular (Prelec et al. 2017)",
        1.0,
        0.0,
        "the informed minority predicts the majority's answer while the majority expects agreement: the paper's "
        "own assumption (knowledge_link 1, crowd_calibration 0), shown with human respondents, not with LLM agents",
    ),
    (
        "arXiv 2311.07692",
        1.0,
        0.0,
        "cited on the supporting side (aggregation that rewards predicting others' answers); placed at the "
        "paper's corner as the issue that cites it does, not re-measured here",
    ),
    (
        "arXiv 2508.17536 (Choi et al., Debate or Vote)",
        None,
        None,
        "majority voting explains most of multi-agent debate's gains: against the +8 to +10 points of MAD over "
        "Majority Voting that the paper prints and the fitted population reproduces, not a point on this plane",
    ),
    (
        "arXiv 2502.08788",
        None,
        None,
        "debate often loses to self-consistency at matched compute: it questions the baselines' ordering the fit "
        "reproduces, not a point on this plane",
    ),
)
INVERSE_PANELS = (
    ("grid", "insight", "the Skeptic's insight"),
    (CALIBRATION_GRID, "crowd_calibration", "crowd_calibration"),
)


def reaches(table: pd.DataFrame, claimed: float) -> pd.Series:
    """Where a map point reproduces the paper's claimed gain over the best MAD: its 95% CI reaches it."""
    return table["gain_mad_hi"] >= claimed


def inverse_map(table: pd.DataFrame, claimed: float, source: str) -> Figure:
    """The inverse question: which values of the unpinned assumptions reproduce the paper's claimed gain over the
    best MAD (`claimed`, points)? Two planes over knowledge_link: the Skeptic's insight (rows labelled with the
    Skeptic's own accuracy alone; a row above PLAUSIBLE_ALONE is marked implausible) and crowd_calibration (the
    published evidence of EVIDENCE placed on it). Colour: AceMAD's gain over the best MAD; outlined cells: the
    95% CI reaches the claimed gain."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(1, 2, figsize=(14, 5), layout="constrained")
    sub = table[table["axis"].isin([a for a, _, _ in INVERSE_PANELS])]
    if sub.empty:
        return _no_map(fig, axes, table)
    lim = max(1.0, claimed, float(np.nanmax(np.abs(sub["gain_mad"].to_numpy()))))
    im = None
    for ax, (axis, col, name) in zip(axes, INVERSE_PANELS):
        g = table[table["axis"] == axis]
        cells = g.set_index([col, "knowledge_link"])
        rows, cols = sorted(g[col].unique()), sorted(g["knowledge_link"].unique())
        vals = np.array([[cells.loc[(r, lk), "gain_mad"] for lk in cols] for r in rows])
        im = ax.imshow(vals, origin="lower", cmap="RdBu", norm=TwoSlopeNorm(0.0, -lim, lim), aspect="auto")
        for i, r in enumerate(rows):
            for j, lk in enumerate(cols):
                c = cells.loc[(r, lk)]
                if c["gain_mad_hi"] >= claimed:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="gold", lw=3))
                ax.text(j, i, f"{c['gain_mad']:+.1f}", ha="center", va="center", fontsize=8)
        labels = [f"{r:g}" for r in rows]
        if col == "insight":  # the Skeptic alone, measured in each row's runs: plausibility of the row
            alone = [float(g[np.isclose(g["insight"], r)]["truth_holder_alone"].mean()) for r in rows]
            labels = [f"{r:g}\nalone {a:.0f}%" + (" (!)" if a > PLAUSIBLE_ALONE else "") for r, a in zip(rows, alone)]
        else:  # the evidence: a star in the cell's corner (its number stays readable), one label per place
            spots: dict[tuple, list[str]] = {}
            for ref, link, cal, _ in EVIDENCE:
                if link is not None:
                    spots.setdefault((link, cal), []).append(ref.split(" (")[0])
            for (link, cal), refs in spots.items():
                x, y = np.interp(link, cols, range(len(cols))), np.interp(cal, rows, range(len(rows)))
                x, y = x + (0.3 if x < len(cols) / 2 else -0.3), y + (0.3 if y < len(rows) / 2 else -0.3)
                ax.plot(x, y, marker="*", ms=14, color="k")
                right = x < len(cols) / 2
                ax.annotate(
                    "\n".join(refs),
                    (x, y),
                    textcoords="offset points",
                    xytext=(8 if right else -8, 0),
                    ha="left" if right else "right",
                    va="center",
                    fontsize=7,
                    bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1},
                )
        ax.set_xticks(range(len(cols)), [f"{x:g}" for x in cols])
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.set_xlabel("knowledge_link (0: peer-prediction skill unrelated to knowing the truth)")
        ax.set_ylabel(name)
        d = g.iloc[0]
        held = "crowd_calibration" if col == "insight" else "insight"
        ax.set_title(f"AceMAD's gain over the best MAD ({held} {d[held]:g})", fontsize=10)
    if im is not None:
        fig.colorbar(im, ax=axes, label="points", fraction=0.02)
    fig.suptitle(
        f"Which assumptions reproduce the paper's claimed {claimed:+.1f} points over the best MAD (gold: the 95% CI "
        f"reaches it)? [{source}]",
        fontsize=10,
    )
    return fig


def inverse_story(table: pd.DataFrame, claimed: float, paper_acemad: float, source: str) -> str:
    """The "What we see" under the inverse figure, from the table: how many points reach the claim, where, whether
    any of them has a plausible truth-holder, and where the published evidence lies."""
    if table.empty:
        return f"[{source}] No map here: {table.attrs.get('note', 'no point was run')}."
    out = []
    for axis, col, name in INVERSE_PANELS:
        g = table[table["axis"] == axis]
        hit = g[reaches(g, claimed)]
        where = "; ".join(f"link {r.knowledge_link:g}, {col} {getattr(r, col):g}" for r in hit.itertuples())
        best = g.loc[g["gain_mad"].idxmax()] if len(g) else None
        out.append(
            f"On the knowledge_link x {name} plane {len(hit)} of {len(g)} points reach the paper's claimed "
            f"{claimed:+.1f} points over the best MAD (AceMAD {paper_acemad:.2f}% printed)"
            + (f" ({where})" if where else "")
            + (
                f"; the largest gain is {_gain(best, 'mad')} at link {best.knowledge_link:g}, {col} {best[col]:g}"
                if best is not None
                else ""
            )
            + "."
        )
        if col == "insight" and len(hit):
            ok = hit[hit["truth_holder_alone"] <= PLAUSIBLE_ALONE]
            out.append(
                f"Of those, {len(ok)} have a Skeptic that scores at most {PLAUSIBLE_ALONE:.0f}% alone (a persona of a "
                f"model that scored below 40% on these items); the others need a Skeptic that alone scores up to "
                f"{hit['truth_holder_alone'].max():.1f}%."
            )
    cal = table[table["axis"] == CALIBRATION_GRID]
    for ref, link, c, sentence in EVIDENCE:
        if link is None:
            out.append(f"{ref}: {sentence}.")
            continue
        pt = _point(cal, CALIBRATION_GRID, knowledge_link=link, crowd_calibration=c)
        there = f" There AceMAD's gain over the best MAD is {_gain(pt, 'mad')}." if pt is not None else ""
        out.append(f"{ref} (link {link:g}, crowd_calibration {c:g}): {sentence}.{there}")
    return f"[{source}] " + " ".join(out)


def paper_claim(model: str = "GPT-4o-mini") -> tuple[float, float, str]:
    """(AceMAD (T=3)'s printed average, its gain over the best printed MAD baseline, that baseline) from Table 2
    (data/paper): the gain notebook 09's inverse figure looks for (the paper's "20.31% over standard MAD", l.111)."""
    t = paper_table("table2_main_results", model).set_index("method")["Average (printed)"]
    mads = t[["Decentralized MAD", "Centralized MAD", "Sparse MAD"]]
    return float(t["AceMAD (T=3)"]), float(t["AceMAD (T=3)"] - mads.max()), str(mads.idxmax())


def fit_story(cells: pd.DataFrame, source: str) -> str:
    """The "What we see" under the fitted baselines' table (experiments.fit.cells on this run): how far this run's
    baselines sit from the paper's cells the fit aimed at, the MAD - Majority Voting gaps, Table 1's levels."""
    if cells.empty:
        return f"[{source}] {cells.attrs.get('note', 'no baseline run')}."
    f = cells[cells["fitted"]]
    worst = f.loc[f["residual"].abs().idxmax()]
    gaps = cells[cells["cell"].str.contains(" - ")]
    levels = cells[(cells["table"] == "Table 1") & ~cells["fitted"]]
    return (
        f"[{source}] This run's baselines sit {f['residual'].abs().mean():.1f} points from the {len(f)} printed cells "
        f"the fit aimed at, on average (largest: {worst.table}'s {worst.cell}, {worst.simulated:.1f} against "
        f"{worst.paper:.2f} printed, {worst.residual:+.1f}). MAD minus Majority Voting here: "
        + ", ".join(f"{r.cell.split(' - ')[0]} {r.simulated:+.1f} (printed {r.paper:+.1f})" for r in gaps.itertuples())
        + f". Table 1's levels, shown but not fitted, are {levels['residual'].min():+.1f} to "
        f"{levels['residual'].max():+.1f} points off: the paper prints "
        + " and ".join(f"{v:.2f}" for v in cells[cells["cell"] == "Majority Voting"]["paper"])
        + " for the same Majority Voting in its two tables, so no one population matches both."
    )
