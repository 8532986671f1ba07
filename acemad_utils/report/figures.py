"""Paper-style figures from `tables.accuracy_long` (95% CI bands/bars), every title naming its source; legible at
notebook width (tests/test_figures.py: no text under MIN_PT once shrunk to NOTEBOOK_WIDTH_IN, JupyterLab's ~1,000 px).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from acemad_utils.data.sim_params import population_named, stand_in
from acemad_utils.protocol.schema import SYNTHETIC_LABEL
from acemad_utils.report.tables import AVERAGE, bench_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NO_RUNS = "no runs found"  # the source of an artefact made from no run (a failed run): neither synthetic nor a model
NOTEBOOK_WIDTH_IN = 10.0  # inches of figure shown at 1:1 in the notebook's output area
MIN_PT = 7.0  # the smallest text, in points as shown, a reader can read without zooming


def source_label(synthetic: bool, model: str) -> str:
    if not synthetic and not model:
        return NO_RUNS
    if synthetic and (of := stand_in(model)):  # notebook 07's stand-ins; another POPULATION is the population
        return f"SYNTHETIC stand-in for {of} (no LLM)"
    if synthetic and (pop := population_named(model)):  # POPULATION=original: its figures and tables say so
        return f"SYNTHETIC population '{pop}' (no LLM)"
    return SYNTHETIC_LABEL if synthetic else f"model: {model}"


def truth_holders(configs) -> dict:
    """{family: {N: truth-holders in its roster}} (AceMAD's split rounds 20% of N; a homogeneous roster has none)."""
    out: dict = {}
    for c in configs:
        n = c.n_truth_holders if c.roster_kind == "acemad" else sum(s == c.truth_holder for s in c.specs())
        out.setdefault(c.family, {})[c.n_agents] = int(n)
    return out


def lines_by_benchmark(
    long: pd.DataFrame, x: str, hue: str, title: str, *, xlabel: str | None = None, note: str | None = None,
    truth_holders: dict | None = None,
) -> Figure:  # fmt: skip
    """Accuracy vs `x` with a 95% CI band, one line per `hue`, one panel per benchmark (+ Average); `note` under
    the panels; `truth_holders` ({hue: {N: k}}) labels points "k/N" (a hue with none: "(no truth-holder)")."""
    import matplotlib.pyplot as plt  # here: pyplot costs a kernel ~0.5 s, paid only by notebooks that draw

    benches = list(dict.fromkeys(long["benchmark"]))
    cols = min(len(benches), 4)
    rows = int(np.ceil(len(benches) / cols))
    fig, grid = plt.subplots(rows, cols, figsize=(2.5 * cols, 2.4 * rows), squeeze=False, sharey=False)
    axes = grid.flat
    for ax in axes[len(benches) :]:
        ax.set_visible(False)
    th = truth_holders or {}
    labelled = any(any(c.values()) for c in th.values())
    # k/N labels at N = 1, 2, 3 overlap on a linear axis: with labels the x values are evenly spaced, ticks say N
    pos = {v: i if labelled else v for i, v in enumerate(sorted(long[x].unique()))}
    for ax, b in zip(axes, benches):
        sub = long[long.benchmark == b]
        for h, g in sub.groupby(hue, sort=False):
            g = g.sort_values(x)
            counts, gx = th.get(h) or {}, g[x].map(pos)
            label = f"{h} (no truth-holder)" if h in th and not any(counts.values()) else h
            line = ax.plot(gx, g["accuracy"], marker="o", label=label)[0]
            ax.fill_between(gx, g["ci_lo"], g["ci_hi"], alpha=0.15, color=line.get_color())
            for i, (xv, acc) in enumerate(zip(g[x], g["accuracy"]) if any(counts.values()) else ()):
                if (k := counts.get(int(xv))) is not None:  # "k/N", alternately above and below: neighbours never touch
                    ax.annotate(f"{k}/{int(xv)}", (pos[xv], acc), textcoords="offset points", ha="center", fontsize=7.5,
                                xytext=(0, 6 if i % 2 == 0 else -12), color=line.get_color(), fontweight="bold",
                                bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.7))  # fmt: skip
        ax.set_title(bench_label(b) if b != AVERAGE else "Average over benchmarks", fontsize=10)
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel("accuracy (%)")
        ax.set_xticks([pos[v] for v in sorted(sub[x].unique())], [f"{v:g}" for v in sorted(sub[x].unique())])
    spare = [ax for ax in fig.axes if not ax.get_visible()]
    if spare:  # an empty panel slot holds the legend, so it covers no curve
        spare[0].set_visible(True)
        spare[0].axis("off")
        spare[0].legend(*axes[0].get_legend_handles_labels(), loc="center", fontsize=8)
    else:
        axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    if labelled:
        key = f"k/N at a point: k truth-holders among its N agents; {xlabel or x} evenly spaced."
        note = f"{note} {key}" if note else key
    if note:
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + 0.06)
        fig.text(0.5, 0.01, note, ha="center", va="bottom", fontsize=8, style="italic", wrap=True)
    return fig


def bars_by_benchmark(long: pd.DataFrame, hue: str, title: str) -> Figure:
    import matplotlib.pyplot as plt  # here, as in lines_by_benchmark: only notebooks that draw pay for pyplot

    benches = list(dict.fromkeys(long["benchmark"]))
    hues = list(dict.fromkeys(long[hue]))
    width = 0.8 / len(hues)
    # at most 8 in of bars (+ the legend beside them): wider would be shrunk below legible at notebook width
    fig, ax = plt.subplots(figsize=(min(8.0, max(6.0, 0.3 * len(benches) * len(hues))), 4))
    for i, h in enumerate(hues):
        g = long[long[hue] == h].set_index("benchmark").reindex(benches)
        xs = np.arange(len(benches)) + (i - (len(hues) - 1) / 2) * width
        err = np.vstack([g["accuracy"] - g["ci_lo"], g["ci_hi"] - g["accuracy"]])
        ax.bar(xs, g["accuracy"], width, yerr=err, capsize=2, label=h)
    ax.set_xticks(range(len(benches)), [bench_label(b) for b in benches], rotation=30, ha="right")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)  # never on a whisker
    ax.set_title(title)
    fig.tight_layout()
    return fig
