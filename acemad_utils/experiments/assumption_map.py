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
from acemad_utils.data.transcripts import load_run, run_dir
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
ACEMAD = DebateConfig(method="acemad", rounds=3).label
UNIFORM = "Standard MAD (uniform weights, AceMAD's debate)"
#: A map row's gains: (target, baselines; None: the best MAD). gain_uniform = gain_shuffled + gain_dispersion.
GAINS = {
    "uniform": (ACEMAD, [UNIFORM]),
    "shuffled": (ACEMAD, [SHUFFLED]),
    "dispersion": (SHUFFLED, [UNIFORM]),
    "mad": (ACEMAD, None),
}
#: The map runs whose records the notebook shows (the knowledge gap and premise at these links, the fitted
#: baselines) are written like any run; every other point is debated in memory by the same engine with the same
#: seeded draws (writing ~10^5 records was most of the map's time). run_point writes any of them: same row.
EVIDENCE_LINKS = (1.0, 0.0)
SHOWN = {f"map_{R.params_slug({'knowledge_link': x})}" for x in EVIDENCE_LINKS} | {"map_baselines_default"}


def base_params(S: Setup) -> SimParams:
    """The profile's synthetic population's parameters (fitted or original), which the map's points override."""
    if not isinstance(S.population, SimPopulation):
        raise ValueError("the assumption map varies the synthetic population: run it with BACKEND='sim'")
    return S.population.params


def population(S: Setup, params: dict, texts: bool = True) -> SimPopulation:
    return SimPopulation(replace(base_params(S), **params), seed=S.seed, texts=texts)


def map_questions(S: Setup, params: dict, n_max: Optional[int], benchmarks: Optional[Sequence[str]] = None):
    """The first n_max items of each benchmark's challenging subset, judged by the population of `params` (its
    SUBSET_PARAMS only; none: the profile's own subsets, notebook 01's)."""
    base = _subset_params(R.overrides(params))
    benches = list(benchmarks or S.benchmarks)
    if not base:
        return [q for b in benches for q in S.subset(b, n_max)]
    name = f"{subsets.SYNTHETIC_SLUG}-map-{R.params_slug(base)}"
    slug, pop, cap, out = subsets.model_slug(name, synthetic=True), population(S, base), S.per_run(n_max), []
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


#: records of the runs read in this process, by folder, configs and questions: the notebook reads each once
_HELD: dict[tuple, tuple[dict, list[dict]]] = {}


def run_with_meta(S: Setup, run: R.Run, progress: bool = True) -> tuple[dict, list[dict]]:
    """(meta, records) of one map run on the challenging subsets of its own population, written on first use."""
    params, name = run.params or {}, f"{S.profile}/{run.name}"
    qs = map_questions(S, params, run.cap, run.benchmarks)
    key = (str(run_dir(name, create=False)), *(c.hash for c in run.configs), *(q.id for q in qs))
    if key not in _HELD or not Path(key[0]).exists():  # a folder deleted since is written again
        extra = {"source": S.source, "model": S.model, "backend": S.backend, "map_params": params}
        pop = population(S, params)
        _HELD[key] = run_and_load(
            name, qs, run.configs, pop, workers=S.workers, profile=S.profile, progress=progress, extra_meta=extra
        )
    return _HELD[key]


def run_point(S: Setup, run: R.Run) -> list[dict]:
    return run_with_meta(S, run)[1]


def _scored(qs: Sequence[Question], pop, cfg: DebateConfig) -> tuple[list, np.ndarray]:
    """cfg debated on qs as arrays (protocol.debate's Debates) and whether each answer is right, in question order."""
    batches, correct = debate(qs, pop, cfg, [0] * len(qs)), np.empty(len(qs))
    for b in batches:
        correct[b.index] = b.correct()
    return batches, correct


def correct(S: Setup, run: R.Run, group: str, eta: float = ETA, written: Optional[bool] = None):
    """(the questions, {label: whether each answer of `run`'s `group` is right, in question order; NaN: no record or
    no gold answer}, for "acemad" also the same debates re-decided with uniform weights and with shuffled scores and
    (the truth-holders' round-1 accuracy: the Skeptic alone, agents' own final accuracy), %): from the transcript if
    `written` (default: the run is SHOWN), else debated in memory as arrays (no record is built)."""
    qs = map_questions(S, run.params or {}, run.cap, run.benchmarks)
    pos = {q.id: i for i, q in enumerate(qs)}
    if run.name in SHOWN if written is None else written:
        recs = [r for r in run_point(S, run) if r["method"] in run.labels(group) and r.get("status") == "ok"]
        cols = {c: np.full(len(qs), np.nan) for c in run.labels(group)}
        for r in recs:
            cols[r["method"]][pos[r["question_id"]]] = (
                np.nan if r["final"]["correct"] is None else r["final"]["correct"]
            )
        arr = A.stack(recs, S.seed) if group == "acemad" else None
    else:
        pop, cols, arr = population(S, run.params or {}, texts=False), {}, None
        for c in run[group]:
            batches, cols[c.label] = _scored(qs, pop, c)
            arr = A.stack_debates(batches, S.seed) if group == "acemad" else None
    if arr is None:
        return qs, cols, None
    answered, at = arr.valid[:, -1].any(-1), [pos[i] for i in arr.question_ids]
    uniform = answered & (A.rescore(arr, eta=eta, weighting="uniform") == arr.truth)
    shuffled = np.where(answered, (A.shuffled_decisions(arr, eta, seed=S.seed) == arr.truth).mean(axis=0), 0.0)
    for label, x in ((UNIFORM, np.where(arr.truth < 0, np.nan, uniform)), (SHUFFLED, shuffled)):
        cols[label] = np.full(len(qs), np.nan)
        cols[label][at] = x
    held = np.isin(arr.personas, TRUTH_HOLDER_PERSONAS)[None, :] & arr.valid[:, 0]
    alone = 100 * float((arr.P[:, 0].argmax(-1) == arr.truth[:, None])[held].mean()) if held.any() else np.nan
    right, valid = (arr.P[:, -1].argmax(-1) == arr.truth[:, None]) & arr.valid[:, -1], arr.valid[:, -1].sum(-1)
    agents = 100 * float(np.mean(right.sum(-1)[valid > 0] / valid[valid > 0])) if valid.any() else np.nan
    return qs, cols, (alone, agents)


def map_row(qs: Sequence[Question], cols: dict, mads: Sequence[str], *, n_boot: int, seed: int) -> dict:
    """The average accuracies (%: each benchmark's mean, then their mean) and the paired GAINS on the average
    (points, 95% CI within benchmarks, sign-flip p; tables.versus_best's) of one map point's correctness columns."""
    ids, benches = np.array([q.id for q in qs]), np.array([q.benchmark for q in qs])
    groups = [np.flatnonzero(benches == b) for b in dict.fromkeys(benches.tolist())]
    avg = {
        m: 100 * float(np.mean([x[~np.isnan(x)].mean() for x in (c[g] for g in groups) if (~np.isnan(x)).any()]))
        for m, c in cols.items()
    }
    piv, names, table = {}, np.array(list(cols), dtype=object), np.column_stack(list(cols.values()))
    for g in groups:  # tables.versus_best's pivot of each benchmark: questions sorted by id, methods with an answer
        x = table[g[np.argsort(ids[g], kind="stable")]]
        rows, keep = ~np.isnan(x).all(1), ~np.isnan(x).all(0)
        piv[benches[g[0]]] = pd.DataFrame(x[rows][:, keep], columns=names[keep])
    row = {"acemad": avg[ACEMAD], "uniform": avg[UNIFORM], "shuffled": avg[SHUFFLED]}
    for key, (t, base) in GAINS.items():
        gain = _average_gain(piv, t, list(piv), base or mads, n_boot=n_boot, seed=seed)
        if gain is None:
            raise ValueError(f"no question shared by {t} and {base or list(mads)}: no paired comparison")
        row |= {f"gain_{key}{x}": gain[f"gain{x}"] for x in ("", "_lo", "_hi")}
        row |= {f"p_{key}": gain["p_value"], "n": row.get("n", int(gain["n_paired"]))}
    return row | {"best_mad": gain["best_baseline"], "best_mad_accuracy": avg[gain["best_baseline"]]}  # "mad" is last


def run_map(S: Setup, runs: Sequence[R.Run], axes: dict, *, eta: float = 2.0, n_boot: int = 1000) -> pd.DataFrame:
    """One row per map point (registry.map_points): its parameters, the average accuracies and map_row's gains.
    Without runs (a real-model profile) an empty frame whose attrs["note"] says why."""
    if not runs:
        out = pd.DataFrame(columns=MAP_COLUMNS)
        out.attrs["note"] = "the assumption map varies the synthetic population; this profile runs a real model"
        return out
    by_name = {r.name: r for r in runs}
    mads = [c.label for c in next(r for r in runs if r.name.startswith("map_baselines_"))["baselines"]]
    points: dict[str, dict] = {}  # a point on several axes (the default) is debated and tabulated once
    baselines: dict[str, dict] = {}
    rows = []
    for axis, params in tqdm(R.map_points(axes), desc="assumption map", disable=not progress_bars()):
        p = R.overrides(params)
        name, base = f"map_{R.params_slug(p)}", f"map_baselines_{R.params_slug(_subset_params(p))}"
        if name not in points:
            if base not in baselines:
                baselines[base] = correct(S, by_name[base], "baselines")[1]
            qs, cols, (alone, agents) = correct(S, by_name[name], "acemad", eta)
            row = map_row(qs, cols | baselines[base], mads, n_boot=n_boot, seed=S.seed)
            points[name] = row | {"truth_holder_alone": alone, "agent_accuracy": agents}
        full = replace(base_params(S), **params)
        shown = {k: getattr(full, k) for k in (*AXIS_PARAMS, "insight_calibration", "calibration_by")}
        rows.append({"axis": axis, **shown, **points[name]})
    return pd.DataFrame(rows, columns=MAP_COLUMNS)


def _subset_params(p: dict) -> dict:
    return {k: v for k, v in p.items() if k in R.SUBSET_PARAMS}


def display(table: pd.DataFrame) -> pd.DataFrame:
    """The map table for reading: the point, accuracies and each gain as 'gain [lo, hi]'."""
    if table.empty:
        return pd.DataFrame({"note": [table.attrs.get("note", "no map point")]})
    out = table[["axis", *AXIS_PARAMS, "n"]].copy()
    for key in ("acemad", "uniform", "shuffled"):
        out[f"{'AceMAD' if key == 'acemad' else key} %"] = table[key].round(1)
    names = ("gain over uniform", "gain over shuffled", "shuffled over uniform", "gain over best MAD")
    for key, name in zip(GAINS, names):
        g = table[[f"gain_{key}", f"gain_{key}_lo", f"gain_{key}_hi"]]
        out[name] = [f"{a:+.1f} [{lo:+.1f}, {hi:+.1f}]" for a, lo, hi in g.itertuples(index=False)]
    return out


# ----------------------------------------------------------------------------- figures
def _no_map(fig: Figure, axes, table: pd.DataFrame) -> Figure:
    """Panels that say why there is no map (a real-model profile) instead of empty axes."""
    for ax in axes:
        ax.text(0.5, 0.5, table.attrs.get("note", "no map point"), ha="center", wrap=True)
        ax.axis("off")
    return fig


def _cells(ax, g: pd.DataFrame, row: str, key: str, lim: float, mark) -> tuple:
    """A heatmap of gain_`key` over `row` (y) x knowledge_link (x), each cell's number on it; mark(cell) gives the
    cell's outline (Rectangle keywords or None), its number's colour and box. Returns (image, rows, columns)."""
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    cells = g.set_index([row, "knowledge_link"])
    rows, cols = sorted(g[row].unique()), sorted(g["knowledge_link"].unique())
    vals = np.array([[cells.loc[(r, lk), f"gain_{key}"] for lk in cols] for r in rows])
    im = ax.imshow(vals, origin="lower", cmap="RdBu", norm=TwoSlopeNorm(0.0, -lim, lim), aspect="auto")
    for i, r in enumerate(rows):
        for j, lk in enumerate(cols):
            c = cells.loc[(r, lk)]
            edge, color, box = mark(c)
            if edge:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, **edge))
            ax.text(j, i, f"{c[f'gain_{key}']:+.1f}", ha="center", va="center", fontsize=8, color=color, bbox=box)
    ax.set_xticks(range(len(cols)), [f"{x:g}" for x in cols])
    return im, rows, cols


def _loses(c, key: str) -> tuple:
    """Hatched where AceMAD loses (the whole CI below 0), a grey number where the CI contains 0."""
    lose, null = c[f"gain_{key}_hi"] < 0, c[f"gain_{key}_lo"] <= 0 <= c[f"gain_{key}_hi"]
    edge = {"hatch": "///", "edgecolor": "k", "lw": 1.5} if lose else None
    return edge, "0.45" if null else "k", {"facecolor": "white", "edgecolor": "none", "pad": 1} if lose else None


HEAT_PANELS = (
    ("uniform", "over uniform weights (Standard MAD)"),
    ("shuffled", "over shuffled scores (who scores well)"),
    ("mad", "over the best MAD"),
)


def heatmap(table: pd.DataFrame, source: str) -> Figure:
    """HEAT_PANELS over the knowledge_link x insight grid on one colour scale (the first two panels' difference is
    what any unequal weights give). Hatched: AceMAD loses (95% CI below 0); grey number: CI contains 0."""
    import matplotlib.pyplot as plt

    g = table[table["axis"] == "grid"]
    # 11 inches: shrunk to the notebook's ~10 (figures.NOTEBOOK_WIDTH_IN), the cells' numbers stay above 7 pt
    fig, axes = plt.subplots(1, len(HEAT_PANELS), figsize=(11, 4.2), layout="constrained")
    if g.empty:
        return _no_map(fig, axes, table)
    lim = max(1.0, float(np.nanmax(np.abs(g[[f"gain_{k}" for k, _ in HEAT_PANELS]].to_numpy()))))
    for ax, (key, title) in zip(axes, HEAT_PANELS):
        im, rows, _ = _cells(ax, g, "insight", key, lim, lambda c, key=key: _loses(c, key))
        ax.set_yticks(range(len(rows)), [f"{x:g}" for x in rows])
        ax.set_xlabel("knowledge_link\n(0: skill unrelated to knowing the truth)")
        if ax is axes[0]:
            ax.set_ylabel("insight\n(P a Skeptic sees through the trap)")
        ax.set_title(f"AceMAD's gain\n{title}", fontsize=10)
    fig.colorbar(im, ax=axes, label="points", fraction=0.02)
    fig.suptitle(f"Assumption map: where AceMAD gains (hatched: loses) [{source}]", fontsize=10)
    return fig


def sweeps(table: pd.DataFrame, source: str) -> Figure:
    """AceMAD's gains (points, 95% CI) against each of MAP_SWEEPS (trap_concentration on a log x: smaller = more
    correlated crowd errors), the other axes at the profile's population."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(MAP_SWEEPS), figsize=(5.5 * len(MAP_SWEEPS), 3.8))
    if table.empty:
        return _no_map(fig, axes, table)
    for ax, axis in zip(axes, MAP_SWEEPS):
        s, log = table[table["axis"] == axis].sort_values(axis), axis == "trap_concentration"
        for key, dx in (("uniform", 0.97), ("shuffled", 1.0), ("mad", 1.03)):
            x = s[axis] * dx if log else s[axis] + (dx - 1)
            err = np.vstack([s[f"gain_{key}"] - s[f"gain_{key}_lo"], s[f"gain_{key}_hi"] - s[f"gain_{key}"]])
            label = f"AceMAD's gain {dict(HEAT_PANELS)[key].split(' (')[0]}"
            ax.errorbar(x, s[f"gain_{key}"], yerr=err, marker="o", capsize=3, label=label)
        ax.axhline(0, color="k", lw=0.8)
        ax.set(xscale="log" if log else "linear", ylabel="gain (points)")
        ax.set_xlabel(axis + (" (smaller: more correlated errors)" if log else ""))
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Assumption map, one axis at a time [{source}]", fontsize=10)
    fig.tight_layout()
    return fig


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
    """Which values of the unpinned assumptions reproduce the paper's claimed gain over the best MAD (`claimed`)?
    INVERSE_PANELS over knowledge_link: insight rows labelled with the Skeptic's accuracy alone (above
    PLAUSIBLE_ALONE: "(!)"), crowd_calibration with EVIDENCE placed on it. Gold: the 95% CI reaches the claim."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(14, 5), layout="constrained")
    sub = table[table["axis"].isin([a for a, _, _ in INVERSE_PANELS])]
    if sub.empty:
        return _no_map(fig, axes, table)
    lim = max(1.0, claimed, float(np.nanmax(np.abs(sub["gain_mad"].to_numpy()))))
    gold = lambda c: ({"edgecolor": "gold", "lw": 3} if c["gain_mad_hi"] >= claimed else None, "k", None)  # noqa: E731
    for ax, (axis, col, name) in zip(axes, INVERSE_PANELS):
        g = table[table["axis"] == axis]
        im, rows, cols = _cells(ax, g, col, "mad", lim, gold)
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
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.set(xlabel="knowledge_link (0: peer-prediction skill unrelated to knowing the truth)", ylabel=name)
        held = "crowd_calibration" if col == "insight" else "insight"
        ax.set_title(f"AceMAD's gain over the best MAD ({held} {g.iloc[0][held]:g})", fontsize=10)
    fig.colorbar(im, ax=axes, label="points", fraction=0.02)
    fig.suptitle(
        f"Which assumptions reproduce the paper's claimed {claimed:+.1f} points over the best MAD (gold: the "
        f"95% CI reaches it)? [{source}]",
        fontsize=10,
    )
    return fig


def paper_claim(model: str = "GPT-4o-mini") -> tuple[float, float, str]:
    """(AceMAD (T=3)'s printed average, its gain over the best printed MAD baseline, that baseline) from Table 2: the
    gain notebook 09's inverse figure looks for (the paper's "20.31% over standard MAD", l.111)."""
    t = paper_table("table2_main_results", model).set_index("method")["Average (printed)"]
    mads = t[["Decentralized MAD", "Centralized MAD", "Sparse MAD"]]
    return float(t["AceMAD (T=3)"]), float(t["AceMAD (T=3)"] - mads.max()), str(mads.idxmax())


# ----------------------------------------------------------------------------- the measure a real model needs
def knowledge_gap(records: Sequence[dict], *, label: str, seed: int = 0, rounds=None) -> pd.DataFrame:
    """Per round and over all rounds, on the questions where some agents are right and some wrong (bootstrap 95% CIs
    over questions): gap, the mean score S of agents whose answer is right minus that of the wrong ones, and lift,
    whether the top scorer is right minus the share of right agents (premise.premise's lift there). Only stored p
    and scores are used: it applies to any AceMAD run, a real model's too. `rounds`: their question_rounds, if held."""
    qr = premise.question_rounds(records) if rounds is None else rounds
    df = qr[(qr["share_right"] > 0) & (qr["share_right"] < 1)]
    if df.empty:
        return pd.DataFrame([[label, "all", 0, *[np.nan] * (len(GAP_COLUMNS) - 3)]], columns=GAP_COLUMNS)
    df = df.rename(columns={"question_id": "question", "right_score": "right", "wrong_score": "wrong"})
    df = df.assign(gap=df["right"] - df["wrong"], lift=df["top_right"] - df["share_right"])
    # "all": one value per question (its rounds averaged), so the interval resamples independent questions
    per_question = df.groupby("question", sort=False)[["right", "wrong", "gap", "lift"]].mean()
    rows = []
    for rnd, g in [*df.groupby("round"), ("all", per_question)]:
        cis = [bootstrap_ci(g[k].to_numpy(), seed=seed) for k in ("gap", "lift")]
        rows.append([label, rnd, len(g), g["right"].mean(), g["wrong"].mean(), *cis[0], *cis[1]])
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


def evidence_records(S: Setup, runs: Sequence[R.Run], links: Sequence[float] = EVIDENCE_LINKS) -> dict[str, list[dict]]:
    """The AceMAD (T = 3) records the premise is measured on, by label: the map runs at each knowledge_link of
    `links`; a real model: this profile's notebook 03 run, if it exists (else a label saying so, with no record)."""
    if runs:
        by_name, out = {r.name: r for r in runs}, {}
        for link in links:
            if (name := f"map_{R.params_slug({'knowledge_link': link})}") in by_name:
                out[f"synthetic, knowledge_link = {link:g}"] = [
                    r for r in run_point(S, by_name[name]) if r["method"] == ACEMAD
                ]
        return out or {"none": []}
    try:
        _, records = load_run(f"{S.profile}/main")
    except FileNotFoundError:
        return {f"{S.model}: no notebook 03 run of profile {S.profile} yet": []}
    return {S.model: [r for r in records if r["method"] == ACEMAD]}


def evidence(S: Setup, runs: Sequence[R.Run], links=EVIDENCE_LINKS, *, records=None, rounds=None) -> pd.DataFrame:
    """knowledge_gap of each run of evidence_records (`records`: the caller's, already read; `rounds`: their
    premise.question_rounds with each label as the method, which premise.premise of the same records reuses)."""
    held = evidence_records(S, runs, links) if records is None else records
    part = lambda k: None if rounds is None else rounds[rounds["method"] == k]  # noqa: E731
    gaps = [knowledge_gap(recs, label=k, seed=S.seed, rounds=part(k)) for k, recs in held.items()]
    return pd.concat(gaps, ignore_index=True)


def baseline_fit(S: Setup, runs: Sequence[R.Run]) -> pd.DataFrame:
    """The profile population's five baselines on this notebook's own run (map_baselines_default) beside the paper's
    printed cells with residuals (fit.cells). Without runs (a real model) an empty frame whose note says why."""
    run = next((r for r in runs if r.name == "map_baselines_default"), None)
    if run is None:
        out = pd.DataFrame(columns=fit.CELL_COLUMNS)
        out.attrs["note"] = "the fit compares the synthetic population's baselines; this profile runs a real model"
        return out
    long = accuracy_long(run_point(S, run), ci=False)
    avg = long[long["benchmark"] == AVERAGE].set_index("method")["accuracy"]
    return fit.cells(base_params(S), simulated={str(m): float(v) for m, v in avg.items()})


# ----------------------------------------------------------------------------- notebook 08's ledger grid
def ledger_runs(S: Setup, point: R.LedgerPoint, n_max: int, eta: float = ETA) -> dict[str, tuple[dict, list[dict]]]:
    """{experiment: (meta, records)} of notebooks 02-06 (default parameters) with the population of one assumption
    point, on the first n_max items of each challenging subset: what claims.ledger reads. Debated in memory by the
    same engine and seeded draws; run_with_meta writes any of them, and the ledger from it is the same."""
    out = {}
    for run in R.ledger_runs(point, S.seed, n_max, S.benchmarks, eta):
        params, name = run.params or {}, run.name.split("__", 1)[1]
        qs, pop = map_questions(S, params, run.cap, run.benchmarks), population(S, params, texts=False)
        methods = dict(sorted((c.label, c.to_dict()) for c in run.configs))  # meta.json's order (sorted keys)
        recs = []
        for c in (c for c in run.configs if claims.reads(name, methods[c.label])):  # only what the ledger reads
            if name == "ablation" and c.method == "acemad":  # whole records: the ledger re-weights its rounds
                recs += run_batch(qs, pop, c, [0] * len(qs))
                continue
            recs += [
                {
                    "question_id": q.id,
                    "benchmark": q.benchmark,
                    "method": c.label,
                    "status": "ok",
                    "final": {"correct": None if x != x else x},
                }
                for q, x in zip(qs, _scored(qs, pop, c)[1].tolist())
            ]
        out[name] = ({"synthetic": True, "population": pop.describe(), "methods": methods}, recs)
    return out


def ledger_grid(S: Setup, n_max: int = 50, seed: int = 0, eta: float = ETA) -> dict[str, pd.DataFrame]:
    """{point name: the claims ledger with that point's population} over registry.LEDGER_GRID (the points this
    population can express); a real-model profile: an empty dict (there is no population to vary)."""
    if not isinstance(S.population, SimPopulation):
        return {}
    points = [R.LedgerPoint(claims.BASE_POINT, "no assumption moved", {}), *R.ledger_points(S.benchmarks)]
    return {p.name: claims.ledger(ledger_runs(S, p, n_max, eta), seed=seed, values=False) for p in points}


def grid_points(S: Setup) -> pd.DataFrame:
    """The ledger grid's points as notebook 08 shows them: name, meaning, overrides, and whether this population
    and these benchmarks can express it (one that cannot is not varied, and the table says so)."""
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
