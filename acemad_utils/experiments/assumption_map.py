"""Notebook 09's assumption map (AceMAD's gain as the synthetic population's assumptions move) and notebook 08's
ledger grid; knowledge_gap reads only stored p and scores: what a real model's run would have to show."""

from __future__ import annotations

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
from acemad_utils.protocol.config import ETA, DebateConfig, at_paper_eta
from acemad_utils.protocol.debate import Debates, debate
from acemad_utils.protocol.schema import Question
from acemad_utils.report import claims, premise
from acemad_utils.report import rescoring as A
from acemad_utils.report.rescoring import SHUFFLED
from acemad_utils.report.stats import bootstrap_ci
from acemad_utils.report.tables import _average_gain, paper_table

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: a kernel that draws none never loads it
    from matplotlib.figure import Figure

AXIS_PARAMS = tuple(R.MAP_PARAMS.values())
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
# notebook 05's name for this decision: its Standard MAD is a separate run without q, not this re-decision
UNIFORM = "Uniform weights (AceMAD's debate)"
#: A map row's gains: (target, baselines; None: the best MAD). gain_uniform = gain_shuffled + gain_dispersion.
GAINS = dict(
    uniform=(ACEMAD, [UNIFORM]), shuffled=(ACEMAD, [SHUFFLED]), dispersion=(SHUFFLED, [UNIFORM]), mad=(ACEMAD, None)
)
#: The links whose AceMAD runs are written: the knowledge gap and premise read their records; every other
#: table comes from the engine's arrays (writing ~10^5 records was most of the map's time).
EVIDENCE_LINKS = (1.0, 0.0)


def base_params(S: Setup) -> SimParams:
    if not isinstance(S.population, SimPopulation):
        raise ValueError("the assumption map varies the synthetic population: run it with BACKEND='sim'")
    return S.population.params


def population(S: Setup, params: dict, texts: bool = True) -> SimPopulation:
    return SimPopulation(replace(base_params(S), **params), seed=S.seed, texts=texts)


def map_questions(S: Setup, params: dict, n_max: Optional[int], benchmarks: Optional[Sequence[str]] = None):
    """The first n_max items of each challenging subset, judged by `params`' SUBSET_PARAMS (none: notebook 01's)."""
    base = R.subset_params(R.overrides(params))
    benches = list(benchmarks or S.benchmarks)
    if not base:
        return [q for b in benches for q in S.subset(b, n_max)]
    name = f"{subsets.SYNTHETIC_SLUG}-map-{R.params_slug(base)}"
    slug = subsets.model_slug(name, synthetic=True) + S.variant  # another item pool (--set SEED=1): its own
    pop, cap, out = population(S, base), S.per_run(n_max), []
    for b in benches:
        try:
            qs = S.load_subset(b, slug, pop)
        except FileNotFoundError:  # not built yet, or by another population: decided in memory (its records are
            # a function of the population and items, cheaper to debate again than to write and read back)
            subsets.build_subset(S.bench_name(b), S.questions(b), population(S, base, texts=False), name,
                                 seed=S.seed, progress=False, variant=S.variant, write_run=False)  # fmt: skip
            qs = S.load_subset(b, slug, pop)
        out += qs[:cap] if cap else qs
    return out


def run_with_meta(S: Setup, run: R.Run, progress: bool = True) -> tuple[dict, list[dict]]:
    """(meta, records) of one map run on the challenging subsets of its own population, written on first use."""
    params, name = run.params or {}, f"{S.profile}/{run.name}"
    qs = map_questions(S, params, run.cap, run.benchmarks)
    extra = {"source": S.source, "model": S.model, "backend": S.backend, "map_params": params}
    pop = population(S, params)
    return run_and_load(
        name, qs, run.configs, pop, workers=S.workers, profile=S.profile, progress=progress, extra_meta=extra
    )


def _debated(qs: Sequence[Question], pop, cfg: DebateConfig, held: dict) -> tuple[list, np.ndarray]:
    """cfg debated on qs as arrays, once per (config, questions) in `held`, and whether each answer is right."""
    key = (cfg.hash, *(q.id for q in qs))
    batches = held[key] = held.get(key) or debate(qs, pop, cfg, [0] * len(qs))
    right = np.empty(len(qs))
    for b in batches:
        right[b.index] = b.correct()
    return batches, right


def correct(S: Setup, run: R.Run, group: str, eta: float = ETA):
    """(the questions, {label: whether each answer of `run`'s `group` is right, in question order; NaN: no gold
    answer}, for "acemad" also the same debates re-decided with uniform weights and with shuffled scores and (the
    truth-holders' round-1 accuracy: the Skeptic alone, agents' own final accuracy), %), debated as arrays."""
    qs = map_questions(S, run.params or {}, run.cap, run.benchmarks)
    pop, cols, batches = population(S, run.params or {}, texts=False), {}, list[Debates]()
    for c in run[group]:  # labelled as at the paper's eta: the map's columns are roles, whatever ETA the run has
        batches, cols[at_paper_eta(c.label)] = _debated(qs, pop, c, {})
    if group != "acemad":
        return qs, cols, None
    arr, pos = A.stack_debates(batches, S.seed), {q.id: i for i, q in enumerate(qs)}
    answered, at = arr.valid[:, -1].any(-1), [pos[i] for i in arr.question_ids]
    uniform = answered & (A.rescore(arr, eta=eta, weighting="uniform") == arr.truth)
    shuffled = np.where(answered, (A.shuffled_decisions(arr, eta, seed=S.seed) == arr.truth).mean(axis=0), 0.0)
    for label, x in ((UNIFORM, uniform), (SHUFFLED, shuffled)):  # no gold answer: not scored (a share says 0 there)
        cols[label] = np.full(len(qs), np.nan)
        cols[label][at] = np.where(arr.truth < 0, np.nan, x)
    held = np.isin(arr.personas, TRUTH_HOLDER_PERSONAS)[None, :] & arr.valid[:, 0]
    alone = 100 * float((arr.P[:, 0].argmax(-1) == arr.truth[:, None])[held].mean()) if held.any() else np.nan
    right, valid = (arr.P[:, -1].argmax(-1) == arr.truth[:, None]) & arr.valid[:, -1], arr.valid[:, -1].sum(-1)
    agents = 100 * float(np.mean(right.sum(-1)[valid > 0] / valid[valid > 0])) if valid.any() else np.nan
    return qs, cols, (alone, agents)


def _averages(qs: Sequence[Question], cols: dict) -> dict[str, float]:
    """Each column's accuracy on the average (%): the mean of each benchmark's (tables.accuracy_long's)."""
    benches = np.array([q.benchmark for q in qs])
    groups = [np.flatnonzero(benches == b) for b in dict.fromkeys(benches.tolist())]
    mean = lambda c: np.mean([x[~np.isnan(x)].mean() for x in (c[g] for g in groups) if (~np.isnan(x)).any()])
    return {m: 100 * float(mean(c)) for m, c in cols.items()}


def map_row(qs: Sequence[Question], cols: dict, mads: Sequence[str], *, n_boot: int, seed: int) -> dict:
    """The average accuracies (%: the mean of each benchmark's) and the paired GAINS on the average (tables')."""
    ids, benches, avg = np.array([q.id for q in qs]), np.array([q.benchmark for q in qs]), _averages(qs, cols)
    groups = [np.flatnonzero(benches == b) for b in dict.fromkeys(benches.tolist())]
    piv, names, table = {}, np.array(list(cols), dtype=object), np.column_stack(list(cols.values()))
    for g in groups:  # tables.versus_best's pivot of each benchmark: questions sorted by id, methods with an answer
        x = table[g[np.argsort(ids[g], kind="stable")]]
        rows, keep = ~np.isnan(x).all(1), ~np.isnan(x).all(0)
        piv[benches[g[0]]] = names[keep].tolist(), x[rows][:, keep]
    row = {"acemad": avg[ACEMAD], "uniform": avg[UNIFORM], "shuffled": avg[SHUFFLED]}
    for key, (t, base) in GAINS.items():
        gain = _average_gain(piv, t, list(piv), base or mads, n_boot=n_boot, seed=seed)
        if gain is None:
            raise ValueError(f"no question shared by {t} and {base or list(mads)}: no paired comparison")
        row |= {f"gain_{key}{x}": gain[f"gain{x}"] for x in ("", "_lo", "_hi")}
        row |= {f"p_{key}": gain["p_value"], "n": row.get("n", int(gain["n_paired"]))}
    return row | {"best_mad": gain["best_baseline"], "best_mad_accuracy": avg[gain["best_baseline"]]}  # "mad" is last


def run_map(S: Setup, runs: Sequence[R.Run], axes: dict, *, eta: float = 2.0, n_boot: int = 1000) -> pd.DataFrame:
    """One row per map point (registry.map_points); no runs (a real model): an empty frame, its note says why."""
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
        name, base = f"map_{R.params_slug(p)}", f"map_baselines_{R.params_slug(R.subset_params(p))}"
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
    for ax in axes:
        ax.text(0.5, 0.5, table.attrs.get("note", "no map point"), ha="center", wrap=True)
        ax.axis("off")
    return fig


def _cells(ax, g: pd.DataFrame, row: str, key: str, lim: float, mark) -> tuple:
    """gain_`key` over `row` x knowledge_link, numbered; mark(cell): (outline keywords or None, colour, box)."""
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
    ("uniform", "over uniform weights (its own debate)"),
    ("shuffled", "over shuffled scores (who scores well)"),
    ("mad", "over the best MAD"),
)


def heatmap(table: pd.DataFrame, source: str) -> Figure:
    """HEAT_PANELS over the knowledge_link x insight grid on one colour scale (hatched: AceMAD loses)."""
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
    """AceMAD's gains (points, 95% CI) against each of MAP_SWEEPS, the other axes at the profile's population."""
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
_EVIDENCE = pd.read_csv(Path(__file__).parents[1] / "data" / "map_evidence.csv").astype(object)
EVIDENCE: tuple[tuple, ...] = tuple(_EVIDENCE.where(_EVIDENCE.notna(), None).itertuples(index=False, name=None))
INVERSE_PANELS = (
    ("grid", "insight", "the Skeptic's insight"),
    (CALIBRATION_GRID, "crowd_calibration", "crowd_calibration"),
)


def reaches(table: pd.DataFrame, claimed: float) -> pd.Series:
    """Where a map point reproduces the paper's claimed gain over the best MAD: its 95% CI reaches it."""
    return table["gain_mad_hi"] >= claimed


def inverse_map(table: pd.DataFrame, claimed: float, source: str) -> Figure:
    """Which unpinned assumptions reproduce the paper's claimed gain over the best MAD (gold: the CI reaches it)?
    Insight rows carry the Skeptic's accuracy alone ("(!)": above PLAUSIBLE_ALONE); EVIDENCE sits on the other."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(14, 5), layout="constrained")
    sub = table[table["axis"].isin([a for a, _, _ in INVERSE_PANELS])]
    if sub.empty:
        return _no_map(fig, axes, table)
    lim = max(1.0, claimed, float(np.nanmax(np.abs(sub["gain_mad"].to_numpy()))))
    gold = lambda c: ({"edgecolor": "gold", "lw": 3} if c["gain_mad_hi"] >= claimed else None, "k", None)
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
                side = {"xytext": (8, 0), "ha": "left"} if x < len(cols) / 2 else {"xytext": (-8, 0), "ha": "right"}
                box = {"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1}
                ax.annotate(
                    "\n".join(refs), (x, y), textcoords="offset points", va="center", fontsize=7, bbox=box, **side
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
    """(AceMAD (T=3)'s printed average, its gain over the best printed MAD, that MAD): Table 2's Average (l.377), the
    introduction's '20.31% over standard MAD' (l.111)."""
    t = paper_table("table2_main_results", model).set_index("method")["Average (printed)"]
    mads = t[["Decentralized MAD", "Centralized MAD", "Sparse MAD"]]
    return float(t["AceMAD (T=3)"]), float(t["AceMAD (T=3)"] - mads.max()), str(mads.idxmax())


# ----------------------------------------------------------------------------- the measure a real model needs
def knowledge_gap(records: Sequence[dict], *, label: str, seed: int = 0, rounds=None) -> pd.DataFrame:
    """Per round and over all, where some agents are right and some wrong (95% CIs over questions): gap, the right
    agents' mean score S minus the wrong ones', and lift, P(the top scorer is right) minus the share right.
    `rounds`: the records' premise.question_rounds, if held."""
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


def evidence_records(S: Setup, runs: Sequence[R.Run]) -> dict[str, list[dict]]:
    """The AceMAD (T = 3) records by label: the map runs at EVIDENCE_LINKS; a real model: its notebook 03 run."""
    if runs:
        by_name, out = {r.name: r for r in runs}, {}
        for link in EVIDENCE_LINKS:
            if (name := f"map_{R.params_slug({'knowledge_link': link})}") in by_name:
                out[f"synthetic, knowledge_link = {link:g}"] = [
                    r for r in run_with_meta(S, by_name[name])[1] if at_paper_eta(r["method"]) == ACEMAD
                ]
        return out or {"none": []}
    try:
        _, records = load_run(f"{S.profile}/main")
    except FileNotFoundError:
        return {f"{S.model}: no notebook 03 run of profile {S.profile} yet": []}
    return {S.model: [r for r in records if at_paper_eta(r["method"]) == ACEMAD]}


def evidence(S: Setup, runs: Sequence[R.Run], *, records=None, rounds=None) -> pd.DataFrame:
    """knowledge_gap of evidence_records' runs (or the caller's `records`, with their question_rounds by label)."""
    held = evidence_records(S, runs) if records is None else records
    part = lambda k: None if rounds is None else rounds[rounds["method"] == k]
    gaps = [knowledge_gap(recs, label=k, seed=S.seed, rounds=part(k)) for k, recs in held.items()]
    return pd.concat(gaps, ignore_index=True)


def baseline_fit(S: Setup, runs: Sequence[R.Run]) -> pd.DataFrame:
    """fit.cells of the population's baselines (map_baselines_default, in memory); a real model: empty, says why."""
    run = next((r for r in runs if r.name == "map_baselines_default"), None)
    if run is None:
        out = pd.DataFrame(columns=fit.CELL_COLUMNS)
        out.attrs["note"] = "the fit compares the synthetic population's baselines; this profile runs a real model"
        return out
    done = [correct(S, run, group) for group in run.groups]
    return fit.cells(base_params(S), simulated=_averages(done[0][0], {k: v for _, c, _ in done for k, v in c.items()}))


# ----------------------------------------------------------------------------- notebook 08's ledger grid
def ledger_runs(S: Setup, point: R.LedgerPoint, n_max: int, eta: float = ETA) -> dict[str, tuple[dict, list[dict]]]:
    """{experiment: (meta, records)} of notebooks 02-06 at one grid point, n_max per subset: what claims.ledger reads,
    debated in memory as run_with_meta's written runs would be (a config two notebooks share, once)."""
    out, held = {}, dict[tuple, list[Debates]]()
    for run in R.ledger_runs(point, S.seed, n_max, S.benchmarks, eta):
        params, name = run.params or {}, run.name.split("__", 1)[1]
        qs, pop = map_questions(S, params, run.cap, run.benchmarks), population(S, params, texts=False)
        methods = dict(sorted((c.label, c.to_dict()) for c in run.configs))  # meta.json's order (sorted keys)
        recs: list[dict] = []
        for c in (c for c in run.configs if claims.reads(name, methods[c.label])):  # only what the ledger reads
            batches, right = _debated(qs, pop, c, held)
            if name == "ablation" and c.method == "acemad":  # whole records: the ledger re-weights its rounds
                whole = {d: r for b in batches for d, r in zip(b.index, replace(b, cfg=c).records())}
                recs += [whole[d] for d in range(len(qs))]
                continue
            keys = {"method": c.label, "status": "ok"}
            recs += [dict(keys, question_id=q.id, benchmark=q.benchmark, final={"correct": None if x != x else x})
                     for q, x in zip(qs, right.tolist())]  # fmt: skip
        out[name] = ({"synthetic": True, "population": pop.describe(), "methods": methods}, recs)
    return out


def ledger_grid(S: Setup, n_max: int = 50, seed: int = 0, eta: float = ETA) -> dict[str, pd.DataFrame]:
    """{point name: the claims ledger at that point} over registry.LEDGER_GRID; a real model: {} (nothing to vary)."""
    if not isinstance(S.population, SimPopulation):
        return {}
    points = [R.LedgerPoint(claims.BASE_POINT, "no assumption moved", {}), *R.ledger_points(S.benchmarks)]
    return {p.name: claims.ledger(ledger_runs(S, p, n_max, eta), seed=seed, values=False) for p in points}


def grid_points(S: Setup) -> pd.DataFrame:
    """The ledger grid's points as notebook 08 shows them, and whether this profile can express each."""
    kept, no = {p.name for p in R.ledger_points(S.benchmarks)}, "no: this population or profile cannot express it"
    changed = lambda p: ", ".join([*(f"{k}={v:g}" for k, v in p.params.items()), *(p.benchmarks or ())])
    rows = [[p.name, p.means, changed(p), "yes" if p.name in kept else no] for p in R.LEDGER_GRID]
    return pd.DataFrame(rows, columns=["point", "what it assumes", "changed", "varied"])
