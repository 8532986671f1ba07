"""Notebook 00's Monte Carlo checks of the paper's theory: run_all writes outputs/runs/<profile>/theory_*, and
every panel is computed from those transcripts (the records run_all holds, or load_run's in a new process)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.data.paths import smoke
from acemad_utils.data.transcripts import load_run, run_dir
from acemad_utils.experiments.params import PHASE_ETA, PHASE_T_MAX  # noqa: F401 (the phase grid's, read as theory.*)
from acemad_utils.experiments.runner import run_and_load
from acemad_utils.protocol.config import ETA, N_AGENTS, ROUNDS, DebateConfig
from acemad_utils.report import rescoring as A
from acemad_utils.report.stats import bootstrap_ci

SYNTH = "synthetic population"
PHASE_N = (3, 5, 7, 9)
PHASE_CAL = (0.0, 0.25, 0.5, 0.75, 1.0)
SMOKE_ITEMS = 40  # items per run in smoke mode (ACEMAD_SMOKE: nbval, CI)


@functools.lru_cache(maxsize=1)
def _held() -> dict[Path, list[dict]]:
    """The records run_all saved in this process, by run folder (a memo: notebook.fresh_kernel clears it)."""
    return {}


def _records(profile: str, what: str) -> list[dict]:
    name = f"{profile}/theory_{what}"
    held = _held().get(d := run_dir(name, create=False))
    return held if held and d.exists() else load_run(name)[1]


def run_all(
    n_items: int = 400, seed: int = 0, rounds: int = 6, progress: bool = True, *, profile: str = "default"
) -> None:
    """Run every simulation the theory notebook needs (resumable). Smoke mode caps n_items at SMOKE_ITEMS."""
    _held().clear()
    items = make_items(min(n_items, SMOKE_ITEMS) if smoke() else n_items, k=4, seed=seed)
    mad = DebateConfig(method="decentralized", rounds=rounds, seed=seed, roster="acemad")  # crowd + truth-holders
    ace = DebateConfig(method="acemad", rounds=rounds, seed=seed)
    phase = [DebateConfig(method="acemad", n_agents=n, rounds=PHASE_T_MAX, seed=seed) for n in PHASE_N]
    # (a) symmetric linear updating (Proposition 1) beside the default; (b, c) AceMAD, re-scored for every eta;
    # (d) one run per crowd calibration, one config per N (eta and T re-scored)
    for what, cfgs, params in [
        ("martingale_symmetric", [mad], SimParams(insight_susceptibility=SimParams().crowd_susceptibility)),
        ("martingale_default", [mad], SimParams()),
        ("acemad", [ace], SimParams()),
        *((f"phase_cal{c:.2f}", phase, SimParams(crowd_calibration=c)) for c in PHASE_CAL),
    ]:
        name = f"{profile}/theory_{what}"
        _held()[run_dir(name, create=False)] = run_and_load(
            name, items, cfgs, SimPopulation(params, seed), progress=progress
        )[1]


def _ci(values: np.ndarray, seed: int, /, **cols) -> dict:
    """cols with the mean of `values` and its 95% bootstrap CI (arrays for the columns of a 2-D array)."""
    return dict(zip(("mean", "lo", "hi"), bootstrap_ci(values, seed=seed))) | cols


def _bands(ax, curves, legend: Optional[float] = None, zero: bool = False, **labels) -> None:
    """A line with its CI band per (series, frame with x, mean, lo, hi); `zero`: a grey zero line, drawn after the
    curves and before the axis settings (that order fixes the symlog panel's margins)."""
    for name, df in curves:
        line = ax.plot(df["x"], df["mean"], marker="o", label=name)[0]
        ax.fill_between(df["x"], df["lo"], df["hi"], alpha=0.2, color=line.get_color())
    if zero:
        ax.axhline(0, color="grey", lw=0.8)
    ax.set(**labels)
    ax.legend(fontsize=legend)


def martingale(profile: str = "default", seed: int = 0):
    """(a) Proposition 1: with symmetric linear updating the mean belief in the truth stays flat (the paired change
    from round 1 per question: its CI tells flat from drifting, the level varies between items)."""
    frames = []
    for name, label in (
        ("martingale_symmetric", "symmetric updating (Prop. 1)"),
        ("martingale_default", "stubborn agents with insight (default)"),
    ):
        bt = A.belief_in_truth(A.stack(_records(profile, name), seed))
        rounds = list(range(1, bt.shape[1] + 1))
        frames.append(pd.DataFrame(_ci(bt - bt[:, :1], seed, x=rounds, series=label, level=bt.mean(axis=0))))
    import matplotlib.pyplot as plt  # here: experiments.params imports this module, and no kernel needs pyplot

    fig, ax = plt.subplots(figsize=(6, 4))
    ylabel = r"change in mean belief in the truth $\bar p^{(t)}(y^*) - \bar p^{(1)}(y^*)$"
    title = f"(a) Decentralized MAD: a martingale? [{SYNTH}]"
    _bands(ax, [(f["series"][0], f) for f in frames], zero=True, xlabel="round t", ylabel=ylabel, title=title)
    return fig, pd.concat(frames, ignore_index=True)[["x", "mean", "lo", "hi", "series", "level"]]


def score_separation(profile: str = "default", seed: int = 0):
    """(b) Score separation: Brier scores by persona (Skeptic or crowd) and by whether the agent's current answer is
    right, averaged per question first (one debate's agents are not independent); n_agents (agent-rounds) lets a mean
    over groups weight by size. Groups are named by persona, not "truth-holder": a persona only changes how likely the
    insight state is (which the transcripts do not record), so a Skeptic is not a truth-holder by definition."""
    df = A.agent_scores(_records(profile, "acemad"))
    role = np.where(df["persona"] == "Skeptic", "Skeptic", "crowd")
    df["group"] = [f"{r} ({'holds truth' if h else 'wrong'})" for r, h in zip(role, df["holds_truth"])]
    table = pd.DataFrame(
        {"group": g, "round": t}
        | _ci(per_q := sub.groupby("question_id")["score"].mean().to_numpy(), seed)
        | {"n_questions": len(per_q), "n_agents": len(sub)}
        for (g, t), sub in df.groupby(["group", "round"])
    )
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    curves = [(g, sub.rename(columns={"round": "x"})) for g, sub in table.groupby("group")]
    ylabel = "Brier peer-prediction score $S_i$"
    _bands(ax, curves, 8, xlabel="round t", ylabel=ylabel, title=f"(b) Score separation [{SYNTH}]")
    return fig, table


def eta_grid(eta: float) -> tuple[float, ...]:
    """PHASE_ETA with `eta` added (sorted): any valid ETA has its own column in panel (d)."""
    if not (np.isfinite(eta) and eta >= 0):
        raise ValueError(f"ETA={eta!r} must be a finite number >= 0")
    return tuple(sorted({*PHASE_ETA, float(eta)}))


SUBSETS = ("all items", "Skeptic right in round 1")


def _subsets(arr) -> tuple:
    """SUBSETS' masks; the second: a Skeptic holds the truth in round 1 (the theorem's setting only as far as the
    persona makes a Skeptic likelier to have insight: the population's insight against crowd_insight)."""
    th = np.array([p == "Skeptic" for p in arr.personas])
    return np.ones(len(arr.truth), bool), (arr.P[:, 0, th].argmax(-1) == arr.truth[:, None]).any(-1)


def drift_split(arr, eta: float = ETA, seed: int = 0) -> pd.DataFrame:
    """Panel (c)'s drift p_w^(T) - p_w^(0) per subset: with uniform weights (eta = 0: stubbornness and the items'
    selection), what the weights add (paired per question) and the total at eta; CIs from one joint bootstrap."""
    pw0, pwe = A.weighted_truth(arr, eta=0.0), A.weighted_truth(arr, eta=eta)
    d0, de = pw0[:, -1] - pw0[:, 0], pwe[:, -1] - pwe[:, 0]
    parts = ["uniform weights (eta = 0): stubbornness and conditioning", f"weights (eta = {eta:g} minus eta = 0)"]
    parts.append(f"total (eta = {eta:g})")
    return pd.concat(
        pd.DataFrame(_ci(np.stack([d0[m], (de - d0)[m], de[m]], axis=1), seed, subset=s, part=parts)).assign(
            n_questions=int(m.sum())
        )[["subset", "part", "mean", "lo", "hi", "n_questions"]]
        for s, m in zip(SUBSETS, _subsets(arr))
    ).reset_index(drop=True)


def submartingale(etas: Sequence[float] = PHASE_ETA, profile: str = "default", *, eta: float = ETA, seed: int = 0):
    """(c) Submartingale: the weighted belief in the truth at eta = 0 and `eta`, the drift against eta, and
    drift_split. Returns (figure, drift by eta and subset, the split at `eta`)."""
    arr = A.stack(_records(profile, "acemad"), seed)
    masks, lines, drift = _subsets(arr), [], []
    for e in sorted({*etas, 0.0, float(eta)}):
        pw = A.weighted_truth(arr, eta=e)
        if e in (0.0, float(eta)):
            lines.append(
                (f"eta={e:g}" + (" (uniform)" if e == 0 else ""), _ci(pw[masks[1]], seed, x=range(pw.shape[1])))
            )
        for subset, m in zip(SUBSETS, masks):
            drift.append({"eta": e, "subset": subset} | _ci(pw[m, -1] - pw[m, 0], seed, n_questions=int(m.sum())))
    drift, split = pd.DataFrame(drift), drift_split(arr, eta, seed)
    import matplotlib.pyplot as plt  # here, not at the top: a kernel that draws no figure never loads matplotlib

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    title = "weighted belief in the truth\n(items where a Skeptic is right in round 1)"
    _bands(axes[0], lines, 8, xlabel="round t (0 = uniform weights)", ylabel=r"$p_w^{(t)}(y^*)$", title=title)
    ylabel = r"drift $p_w^{(T)}(y^*) - p_w^{(0)}(y^*)$"
    curves = [(s, sub.rename(columns={"eta": "x"})) for s, sub in drift.groupby("subset")]
    _bands(axes[1], curves, 8, zero=True, xscale="symlog", xlabel=r"$\eta$", ylabel=ylabel, title="drift vs eta")
    parts = list(dict.fromkeys(split["part"]))
    x = np.arange(len(parts))
    for k, (s, sub) in enumerate(split.groupby("subset", sort=False)):
        sub = sub.set_index("part").loc[parts]
        err = np.abs(sub[["lo", "hi"]].to_numpy().T - sub["mean"].to_numpy())
        axes[2].bar(x + (k - 0.5) * 0.38, sub["mean"], 0.38, yerr=err, capsize=3, label=s)
    axes[2].axhline(0, color="grey", lw=0.8)
    axes[2].set_xticks(x, [p.split(":")[0].replace(" (", "\n(") for p in parts], fontsize=7)
    axes[2].set(ylabel="drift (95% CI)", title="where the drift comes from")
    axes[2].legend(fontsize=8)
    fig.suptitle(f"(c) Drift of the weighted belief in the truth: uniform weights beside eta = {eta:g} [{SYNTH}]")
    fig.tight_layout()
    return fig, drift, split


def phase_table(etas: Sequence[float] = PHASE_ETA, profile: str = "default", seed: int = 0) -> pd.DataFrame:
    """(d) P(AceMAD's answer is right | the initial plurality is wrong) over (crowd calibration, N, T, eta)."""
    grid = list(itertools.product(range(1, PHASE_T_MAX + 1), range(len(etas))))
    parts = []
    for cal in PHASE_CAL:
        recs = _records(profile, f"phase_cal{cal:.2f}")
        for n in PHASE_N:
            arr = A.stack([r for r in recs if len(r["rounds"][0]) == n], seed)
            wrong = A.initial_plurality(arr) != arr.truth
            right = A.decisions(arr, eta=list(etas)) == arr.truth[:, None]  # (eta, B, T): every eta and T at once
            # One bootstrap for every (T, eta) column: the same resampled questions as one call per column.
            m, lo, hi = bootstrap_ci(
                np.stack([right[e, wrong, t - 1] for t, e in grid], axis=1).astype(float), seed=seed
            )
            T, eta = zip(*((t, etas[e]) for t, e in grid))
            cols = dict(crowd_calibration=cal, N=n, T=T, eta=eta, p_flip=m, lo=lo, hi=hi)
            parts.append(pd.DataFrame(cols | {"n_wrong_majority": int(wrong.sum())}))
    return pd.concat(parts, ignore_index=True)


def phase_diagram(table: pd.DataFrame, eta: float = ETA, rounds: int = ROUNDS):
    """Heatmaps: (left) eta x crowd calibration at the paper's N, T=rounds; (right) N x T at calibration 0, eta."""
    import matplotlib.pyplot as plt  # here: a kernel that draws no figure never loads matplotlib

    # 11 in wide with 8.5-pt cell numbers: legible once shrunk to notebook width (tests/test_figures.py)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), layout="constrained")  # keeps each y label off its neighbour
    at_n = table[table.N == N_AGENTS]  # the paper's N
    views = (
        (at_n[at_n["T"] == rounds], "crowd_calibration", "eta", f"N={N_AGENTS}, T={rounds}"),
        (at_n[at_n.eta == eta], "crowd_calibration", "T", f"N={N_AGENTS}, eta={eta:g}"),
        (table[(table.crowd_calibration == 0.0) & (table.eta == eta)], "N", "T", f"false-consensus crowd, eta={eta:g}"),
    )
    for ax, (sub, rows, cols, title) in zip(axes, views):
        grid = sub.pivot_table(index=rows, columns=cols, values="p_flip")
        top = max(0.5, float(table.p_flip.max()))
        im = ax.imshow(grid.to_numpy(), origin="lower", aspect="auto", vmin=0, vmax=top, cmap="viridis")
        ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns])
        ax.set_yticks(range(grid.shape[0]), [f"{r:g}" for r in grid.index])
        ax.set(xlabel=cols, ylabel=rows.replace("_", " "), title=title)
        for (i, j), v in np.ndenumerate(grid.to_numpy()):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8.5, color="white" if v < 0.3 else "black")
    fig.colorbar(im, ax=axes, shrink=0.8, label="P(AceMAD flips a wrong majority)")
    fig.suptitle(f"(d) Where peer prediction can and cannot flip a wrong majority [{SYNTH}]")
    return fig


def assumptions(params: Optional[SimParams] = None) -> str:
    """The population assumptions panels (b)-(d) rest on (the default population's), for the SUMMARY line."""
    p = params or SimParams()
    twin = f"crowd_copy={p.crowd_copy:g} (a Generalist shares a twin's state)"
    copies = twin if p.crowd_copy else "independent Generalists"
    return (
        f"knowledge_link={p.knowledge_link:g} (only agents with insight predict the crowd), insight={p.insight:g}, "
        f"crowd_insight={p.crowd_insight:g}, stubborn truth-holders (insight_susceptibility="
        f"{p.insight_susceptibility:g} vs the crowd's {p.crowd_susceptibility:g}), {copies}, "
        f"trap_mean={p.trap_mean:g}, K=4"
    )
