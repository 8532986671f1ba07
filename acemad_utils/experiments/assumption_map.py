"""Notebook 09's assumption map: AceMAD's (T = 3) gain as a function of the synthetic population's assumptions.

Each point is one AceMAD run with some SimParams changed (registry.assumption_map), re-decided with uniform weights
("Standard MAD") and with shuffled scores, beside the MAD baselines on the same questions; a point that moves what
the baselines' naive agent answers (registry.SUBSET_PARAMS) gets the challenging subsets of its own population.
knowledge_gap needs only stored p, scores and the truth: what a real model's run would have to show.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from acemad_utils.agents.sim import SimPopulation
from acemad_utils.data.paths import progress_bars
from acemad_utils.data.sim_params import CALIBRATION_GRID, MAP_SWEEPS, TRUTH_HOLDER_PERSONAS, SimParams
from acemad_utils.data.transcripts import load_run
from acemad_utils.experiments import fit, subsets
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.runner import run_and_load
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import ETA, DebateConfig
from acemad_utils.protocol.debate import debate, run_batch
from acemad_utils.protocol.schema import Question
from acemad_utils.report import claims, premise
from acemad_utils.report import rescoring as A
from acemad_utils.report.rescoring import SHUFFLED
from acemad_utils.report.stats import bootstrap_ci
from acemad_utils.report.tables import AVERAGE, _average_gain, accuracy_long, paper_table

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: a kernel that draws none never loads it
    from matplotlib.figure import Figure

AXIS_PARAMS = ("knowledge_link", "insight", "trap_concentration", "crowd_calibration", "crowd_copy")
#: The truth-holder alone is implausible above this accuracy (%): the challenging subsets keep the items on which
#: the same model scored below 40% in 5 runs, and the Skeptic is a persona of that model.
PLAUSIBLE_ALONE = 40.0
MAP_COLUMNS = [
    "axis",
    *AXIS_PARAMS,
    *"""insight_calibration calibration_by truth_holder_alone acemad uniform best_mad
    best_mad_accuracy gain_uniform gain_uniform_lo gain_uniform_hi p_uniform shuffled gain_shuffled gain_shuffled_lo
    gain_shuffled_hi p_shuffled gain_dispersion gain_dispersion_lo gain_dispersion_hi p_dispersion gain_mad gain_mad_lo
    gain_mad_hi p_mad n agent_accuracy""".split(),
]
GAP_COLUMNS = "run round n_questions score_right score_wrong gap gap_lo gap_hi lift lift_lo lift_hi".split()


def _no_pair(target: str, baselines: Sequence[str]) -> dict:
    raise ValueError(f"no paired comparison on the average of {target} and {list(baselines)}: no shared questions")


def agent_accuracy(arr: A.Stacked) -> float:
    """Mean over questions of the share of agents whose own final-round answer (argmax p) is right, in %: what a
    decision would score that follows one agent picked without regard to the truth."""
    right, valid = (arr.P[:, -1].argmax(-1) == arr.truth[:, None]) & arr.valid[:, -1], arr.valid[:, -1].sum(-1)
    return 100 * float(np.mean(right.sum(-1)[valid > 0] / valid[valid > 0])) if valid.any() else float("nan")


def truth_holder_alone(arr: A.Stacked) -> float:
    """The truth-holders' (TRUTH_HOLDER_PERSONAS) round-1 accuracy in %: their own answer before reading anyone,
    i.e. what the Skeptic answering alone scores (the same agent and draw as Single Agent's one round)."""
    held = np.isin(arr.personas, TRUTH_HOLDER_PERSONAS)[None, :] & arr.valid[:, 0]
    hits = arr.P[:, 0].argmax(-1) == arr.truth[:, None]
    return 100 * float(hits[held].mean()) if held.any() else float("nan")


def map_row(axis: str, params: SimParams, frame: pd.DataFrame, mads: Sequence[str], *, n_boot: int, seed: int) -> dict:
    """One map point from its question frame: its parameters, the average accuracies (%) and AceMAD's paired gains
    on the average (points, 95% CI within benchmarks, sign-flip p) over uniform weights, over shuffled scores (the
    part carried by WHO scores well), over the best MAD, and shuffled over uniform ("dispersion": what any unequal
    weights give); gain_uniform = gain_shuffled + gain_dispersion."""
    # the frame as integer codes once: the Average accuracies as tables.accuracy_long's (each benchmark's mean over
    # the frame's rows, then their mean) and each benchmark pivoted as DataFrame.pivot's (questions sorted)
    acemad, uniform = ACEMAD, UNIFORM
    (bc, benches), (mc, methods) = pd.factorize(frame["benchmark"]), pd.factorize(frame["method"])
    qc, y = pd.factorize(frame["question_id"], sort=True)[0], frame["correct"].to_numpy(float)
    cells = [[y[(mc == i) & (bc == j) & ~np.isnan(y)] for j in range(len(benches))] for i in range(len(methods))]
    avg = {m: 100 * float(np.mean([g.mean() for g in gs if len(g)])) for m, gs in zip(methods, cells)}
    piv = {}
    for j, b in enumerate(benches):
        rows = bc == j
        q, ms = np.unique(qc[rows], return_inverse=True)[1], np.unique(mc[rows])
        x = np.full((q.max() + 1, len(methods)), np.nan)
        x[q, mc[rows]] = y[rows]
        piv[str(b)] = pd.DataFrame(x[:, ms], columns=methods[ms])
    u, s, d, m = (
        _average_gain(piv, t, list(piv), b, n_boot=n_boot, seed=seed) or _no_pair(t, b)
        for t, b in ((acemad, [uniform]), (acemad, [SHUFFLED]), (SHUFFLED, [uniform]), (acemad, list(mads)))
    )
    return {
        "axis": axis,
        **{k: getattr(params, k) for k in (*AXIS_PARAMS, "insight_calibration", "calibration_by")},
        "acemad": avg[acemad],
        "uniform": avg[uniform],
        "best_mad": m["best_baseline"],
        "best_mad_accuracy": avg[m["best_baseline"]],
        **{
            f"gain_{k}{x}": t[f"gain{x}"]
            for k, t in (("uniform", u), ("shuffled", s), ("dispersion", d), ("mad", m))
            for x in ("", "_lo", "_hi")
        },
        **{f"p_{k}": t["p_value"] for k, t in (("uniform", u), ("shuffled", s), ("dispersion", d), ("mad", m))},
        "shuffled": avg[SHUFFLED],
        "n": int(u["n_paired"]),
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


# ----------------------------------------------------------------------------- the inverse question
#: Published evidence on the map's unpinned axes: (reference, knowledge_link, crowd_calibration, one sentence).
#: A point of None: the study bears on the baselines the population is fitted to, not on this plane.
with open(Path(__file__).parents[1] / "data" / "map_evidence.csv", encoding="utf-8") as _f:
    EVIDENCE: tuple[tuple[str, Optional[float], Optional[float], str], ...] = tuple(
        (
            r["reference"],
            *(float(r[k]) if r[k] else None for k in ("knowledge_link", "crowd_calibration")),
            r["sentence"],
        )  # type: ignore[misc]
        for r in csv.DictReader(_f)
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


def paper_claim(model: str = "GPT-4o-mini") -> tuple[float, float, str]:
    """(AceMAD (T=3)'s printed average, its gain over the best printed MAD baseline, that baseline) from Table 2
    (data/paper): the gain notebook 09's inverse figure looks for (the paper's "20.31% over standard MAD", l.111)."""
    t = paper_table("table2_main_results", model).set_index("method")["Average (printed)"]
    mads = t[["Decentralized MAD", "Centralized MAD", "Sparse MAD"]]
    return float(t["AceMAD (T=3)"]), float(t["AceMAD (T=3)"] - mads.max()), str(mads.idxmax())


ACEMAD = DebateConfig(method="acemad", rounds=3).label
UNIFORM = "Standard MAD (uniform weights, AceMAD's debate)"


def base_params(S: Setup) -> SimParams:
    """The profile's synthetic population's parameters (fitted or original), which the map's points override."""
    if not isinstance(S.population, SimPopulation):
        raise ValueError("the assumption map varies the synthetic population: run it with BACKEND='sim'")
    return S.population.params


def population(S: Setup, params: dict, texts: bool = True) -> SimPopulation:
    """The synthetic population of one map point (the profile's seed); batched: the runner answers it as arrays."""
    return SimPopulation(replace(base_params(S), **params), seed=S.seed, texts=texts)


def _base(overrides: dict) -> dict:
    """A point's overrides that change what the baselines' naive agent answers (registry.SUBSET_PARAMS)."""
    return {k: v for k, v in overrides.items() if k in R.SUBSET_PARAMS}


def map_questions(
    S: Setup, params: dict, n_max: Optional[int], benchmarks: Optional[Sequence[str]] = None
) -> list[Question]:
    """The first n_max items of every benchmark's (of `benchmarks`, default the profile's) challenging subset,
    judged by the population of `params` (its SUBSET_PARAMS only; none: the profile's own subsets, notebook 01's)."""
    base = _base(R.overrides(params))
    benches = list(benchmarks or S.benchmarks)
    if not base:
        return [q for b in benches for q in S.subset(b, n_max)]
    name = f"{subsets.SYNTHETIC_SLUG}-map-{R.params_slug(base)}"
    slug = subsets.model_slug(name, synthetic=True)
    pop, cap, out = population(S, base), S.per_run(n_max), []
    for b in benches:
        try:
            qs = S.load_subset(b, slug, pop)
        except FileNotFoundError:
            subsets.build_subset(
                S.bench_name(b), S.questions(b), pop, name, seed=S.seed, progress=False, workers=S.workers
            )
            qs = S.load_subset(b, slug, pop)
        out += qs[:cap] if cap else qs
    return out


def run_point(S: Setup, run: R.Run) -> list[dict]:
    """The records of one map run, written on first use and read back afterwards: what the notebook shows."""
    return run_with_meta(S, run)[1]


def run_with_meta(S: Setup, run: R.Run, progress: bool = True) -> tuple[dict, list[dict]]:
    """(meta, records) of one map run, on the challenging subsets of its own population."""
    params = run.params or {}
    return run_and_load(
        f"{S.profile}/{run.name}",
        map_questions(S, params, run.cap, run.benchmarks),
        run.configs,
        population(S, params),
        workers=S.workers,
        profile=S.profile,
        progress=progress,
        extra_meta={"source": S.source, "model": S.model, "backend": S.backend, "map_params": params},
    )


#: The map runs whose records the notebook shows (the knowledge gap and premise at these links, the fitted
#: baselines): written like any run. Every other point is debated by the same engine with the same seeded draws
#: in memory only (writing and re-reading ~10^5 records was most of the map's time); run_point writes any of them,
#: and the map row computed from its transcript is the same (tests/test_assumption_map.py).
EVIDENCE_LINKS = (1.0, 0.0)
SHOWN = {f"map_{R.params_slug({'knowledge_link': x})}" for x in EVIDENCE_LINKS} | {"map_baselines_default"}


def _debated(S: Setup, run: R.Run, group: str, written: Optional[bool] = None):
    """(the question frame of `run`'s configs in `group`, for "acemad" also its commitments as rescoring.Stacked):
    from its transcript if `written` (default: SHOWN), else debated in memory as arrays (no record is built)."""
    if run.name in SHOWN if written is None else written:
        recs = [r for r in run_point(S, run) if r["method"] in run.labels(group) and r.get("status") == "ok"]
        right = np.array([np.nan if r["final"]["correct"] is None else r["final"]["correct"] for r in recs], float)
        ids, benches = [r["question_id"] for r in recs], [r["benchmark"] for r in recs]
        frame = _frame([r["method"] for r in recs], benches, ids, right)
        return frame, A.stack(recs, S.seed) if group == "acemad" else None
    qs, pop = map_questions(S, run.params or {}, run.cap, run.benchmarks), population(S, run.params or {}, texts=False)
    frames, arr = [], None
    for c in run[group]:
        batches, correct = _scored(qs, pop, c)
        frames.append(_frame([c.label] * len(qs), [q.benchmark for q in qs], [q.id for q in qs], correct))
        arr = A.stack_debates(batches, S.seed) if group == "acemad" else None
    return pd.concat(frames, ignore_index=True), arr


def _scored(qs: Sequence[Question], pop, cfg: DebateConfig) -> tuple[list, np.ndarray]:
    """cfg debated on qs as arrays (protocol.debate's Debates) and whether each answer is right, in question order."""
    batches, correct = debate(qs, pop, cfg, [0] * len(qs)), np.empty(len(qs))
    for b in batches:
        correct[b.index] = b.correct()
    return batches, correct


def _frame(methods: Sequence[str], benchmarks: Sequence[str], ids: Sequence[str], correct) -> pd.DataFrame:
    """tables.question_frame's columns, one row per question with a gold answer (correct not NaN), built in one
    pass: the map's frame holds ~10^4 rows per point."""
    keep = ~np.isnan(correct)
    pick = (lambda xs: [x for x, k in zip(xs, keep) if k]) if not keep.all() else list
    return pd.DataFrame(
        {
            "method": pick(methods),
            "benchmark": pick(benchmarks),
            "question_id": pick(ids),
            "correct": correct[keep],
            **dict.fromkeys(("failed", "unparsed", "commitments"), 0),
        }
    )


def point_outcomes(frame: pd.DataFrame, arr: A.Stacked, *, eta: float = 2.0, seed: int = 0):
    """(the question frame of a map run's AceMAD debates and of the same debates re-decided with uniform weights and
    with shuffled scores (rescoring.SHUFFLED); truth_holder_alone; agent_accuracy)."""
    answered, n, benches = arr.valid[:, -1].any(-1), len(arr.truth), arr.benchmarks or []
    uniform = answered & (A.rescore(arr, eta=eta, weighting="uniform") == arr.truth)
    shuffled = np.where(answered, (A.shuffled_decisions(arr, eta, seed=seed) == arr.truth).mean(axis=0), 0.0)
    frames = [
        frame,
        _frame([UNIFORM] * n, benches, arr.question_ids, np.where(arr.truth < 0, np.nan, uniform)),
        _frame([SHUFFLED] * n, benches, arr.question_ids, shuffled),
    ]
    return pd.concat(frames, ignore_index=True), truth_holder_alone(arr), agent_accuracy(arr)


def run_map(S: Setup, runs: Sequence[R.Run], axes: dict, *, eta: float = 2.0, n_boot: int = 1000) -> pd.DataFrame:
    """One row per map point (registry.map_points): its parameters, AceMAD's and the baselines' average accuracy,
    and AceMAD's paired gain (points, 95% CI, p) over uniform weights, over shuffled scores and over the best MAD
    baseline, and the shuffled control's gain over uniform weights, with n.
    Without runs (a real-model profile) an empty frame whose attrs["note"] says why."""
    if not runs:
        out = pd.DataFrame(columns=MAP_COLUMNS)
        out.attrs["note"] = "the assumption map varies the synthetic population; this profile runs a real model"
        return out
    by_name = {r.name: r for r in runs}
    mads = [c.label for c in next(r for r in runs if r.name.startswith("map_baselines_"))["baselines"]]
    points, baselines, rows = {}, {}, []
    for axis, params in tqdm(R.map_points(axes), desc="assumption map", disable=not progress_bars()):
        p = R.overrides(params)
        name, base = f"map_{R.params_slug(p)}", f"map_baselines_{R.params_slug(_base(p))}"
        if name not in points:  # a point on several axes (the default) is debated once
            points[name] = point_outcomes(*_debated(S, by_name[name], "acemad"), eta=eta, seed=S.seed)
        if base not in baselines:
            baselines[base] = _debated(S, by_name[base], "baselines")[0]
        frame, alone, agents = points[name]
        f = pd.concat([frame, baselines[base]], ignore_index=True)
        row = map_row(axis, replace(base_params(S), **params), f, mads, n_boot=n_boot, seed=S.seed)
        rows.append({**row, "truth_holder_alone": alone, "agent_accuracy": agents})
    return pd.DataFrame(rows, columns=MAP_COLUMNS)


def evidence_records(S: Setup, runs: Sequence[R.Run], links: Sequence[float] = EVIDENCE_LINKS) -> dict[str, list[dict]]:
    """The AceMAD (T = 3) records the premise is measured on, by label. Synthetic profile: the map runs at each
    knowledge_link of `links` (the defaults otherwise); a real model: this profile's notebook 03 run, if it exists
    (else its label says there is none, with no record)."""
    if runs:
        by_name = {r.name: r for r in runs}
        out = {}
        for link in links:
            name = f"map_{R.params_slug({'knowledge_link': link})}"
            if name in by_name:
                recs = [r for r in run_point(S, by_name[name]) if r["method"] == ACEMAD]
                out[f"synthetic, knowledge_link = {link:g}"] = recs
        return out or {"none": []}
    try:
        _, records = load_run(f"{S.profile}/main")
    except FileNotFoundError:
        return {f"{S.model}: no notebook 03 run of profile {S.profile} yet": []}
    return {S.model: [r for r in records if r["method"] == ACEMAD]}


def evidence(
    S: Setup, runs: Sequence[R.Run], links: Sequence[float] = EVIDENCE_LINKS, *, records: Optional[dict] = None
) -> pd.DataFrame:
    """What a real model would have to show, measured from stored p and q: per round, the peer-prediction score of
    agents whose answer is right minus that of agents whose answer is wrong (knowledge_gap above), on
    evidence_records (`records`: the caller's, already read)."""
    held = evidence_records(S, runs, links) if records is None else records
    parts = [knowledge_gap(recs, label=k, seed=S.seed) for k, recs in held.items()]
    return pd.concat(parts, ignore_index=True)


def ledger_runs(S: Setup, point: R.LedgerPoint, n_max: int, eta: float = ETA) -> dict[str, tuple[dict, list[dict]]]:
    """{experiment name: (meta, records)} of notebooks 02-06 (their default parameters) with the population of one
    assumption point, on the first n_max items of each benchmark's challenging subset: what claims.ledger reads.
    Debated in memory by the same engine with the same seeded draws (notebook 08 shows no grid run's records);
    run_with_meta writes any of them, and the ledger from its transcript is the same (tests/test_claims.py)."""
    out = {}
    for run in R.ledger_runs(point, S.seed, n_max, S.benchmarks, eta):
        params, name = run.params or {}, run.name.split("__", 1)[1]
        qs, pop = map_questions(S, params, run.cap, run.benchmarks), population(S, params, texts=False)
        methods = dict(sorted((c.label, c.to_dict()) for c in run.configs))  # meta.json's order (sorted keys)
        meta = {"synthetic": True, "population": pop.describe(), "methods": methods}
        read = [c for c in run.configs if claims.reads(name, methods[c.label])]  # only what the ledger reads
        out[name] = (meta, [r for c in read for r in _ledger_records(name, qs, pop, c)])
    return out


def _ledger_records(run: str, qs: Sequence[Question], pop, cfg: DebateConfig) -> list[dict]:
    """cfg's records on qs as claims.ledger reads them, in question order: whole for the ablation's AceMAD (the
    ledger re-weights its rounds), else only question_id, benchmark, method, status and final.correct, from the
    debates' arrays."""
    if run == "ablation" and cfg.method == "acemad":
        return run_batch(qs, pop, cfg, [0] * len(qs))
    right = _scored(qs, pop, cfg)[1].tolist()
    return [{"question_id": q.id, "benchmark": q.benchmark, "method": cfg.label, "status": "ok",
             "final": {"correct": None if c != c else c}} for q, c in zip(qs, right)]  # fmt: skip


def ledger_grid(S: Setup, n_max: int = 50, seed: int = 0, eta: float = ETA) -> dict[str, pd.DataFrame]:
    """{point name: the claims ledger recomputed with the population of that point} over registry.LEDGER_GRID
    (the points this population can express; report.claims.deciding names what flips each row).
    Without the synthetic population (a real-model profile) an empty dict: there is no population to vary."""
    if not isinstance(S.population, SimPopulation):
        return {}
    points = [R.LedgerPoint(claims.BASE_POINT, "no assumption moved", {}), *R.ledger_points(S.benchmarks)]
    return {p.name: claims.ledger(ledger_runs(S, p, n_max, eta), seed=seed, values=False) for p in points}


def grid_points(S: Setup) -> pd.DataFrame:
    """The ledger grid's points as notebook 08 shows them: name, meaning, overrides, and whether this population
    and these benchmarks can express it (a point that cannot is not varied, and the table says so)."""
    kept = {p.name for p in R.ledger_points(S.benchmarks)}
    return pd.DataFrame(
        [
            {
                "point": p.name,
                "what it assumes": p.means,
                "changed": ", ".join([*(f"{k}={v:g}" for k, v in p.params.items()), *(p.benchmarks or ())]),
                "varied": "yes" if p.name in kept else "no: this population or profile cannot express it",
            }
            for p in R.LEDGER_GRID
        ]
    )


def baseline_fit(S: Setup, runs: Sequence[R.Run]) -> pd.DataFrame:
    """The profile population's five baselines, measured on this notebook's own run (map_baselines_default: the
    challenging subsets at N_MAX), beside the paper's printed cells with residuals (fit.cells). Without runs (a
    real-model profile) an empty frame whose attrs["note"] says why."""
    run = next((r for r in runs if r.name == "map_baselines_default"), None)
    if run is None:
        out = pd.DataFrame(columns=fit.CELL_COLUMNS)
        out.attrs["note"] = "the fit compares the synthetic population's baselines; this profile runs a real model"
        return out
    recs = run_point(S, run)
    long = accuracy_long(recs, ci=False)
    avg = long[long["benchmark"] == AVERAGE].set_index("method")["accuracy"]
    return fit.cells(base_params(S), simulated={str(m): float(v) for m, v in avg.items()})
