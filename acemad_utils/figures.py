"""Paper-style figures from the long accuracy tables of `tables.accuracy_long` (95% CI bands/bars).

    from acemad_utils import figures as F
    fig = F.lines_by_benchmark(long, x="N", hue="family", title="Figure 5 ...")   # one panel per benchmark
    fig = F.bars_by_benchmark(long, hue="method", title="Figure 4 ...")

Every figure's title says where its numbers come from (the synthetic population or the model's name).
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless (papermill, CI)
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .tables import AVERAGE, bench_label


def source_label(synthetic: bool, model: str) -> str:
    """'SYNTHETIC population (no LLM)', with the stand-in's name for a named synthetic model (notebook 07),
    or 'model: <name>' for an LLM."""
    stand_in = "synthetic-population-"
    if synthetic and model.startswith(stand_in):
        return f"SYNTHETIC stand-in for {model[len(stand_in):]} (no LLM)"
    return "SYNTHETIC population (no LLM)" if synthetic else f"model: {model}"


def _panels(n: int, width: float = 3.2, height: float = 2.8):
    cols = min(n, 4)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, sharey=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat


def lines_by_benchmark(long: pd.DataFrame, x: str, hue: str, title: str, xlabel: str | None = None,
                       note: str | None = None) -> plt.Figure:
    """Accuracy vs `x` with a 95% CI band, one line per `hue`, one panel per benchmark (+ Average).
    `note` is printed under the panels (e.g. where two curves coincide by construction)."""
    benches = list(dict.fromkeys(long["benchmark"]))
    fig, axes = _panels(len(benches))
    for ax, b in zip(axes, benches):
        sub = long[long.benchmark == b]
        for h, g in sub.groupby(hue, sort=False):
            g = g.sort_values(x)
            line = ax.plot(g[x], g["accuracy"], marker="o", label=h)[0]
            ax.fill_between(g[x], g["ci_lo"], g["ci_hi"], alpha=0.15, color=line.get_color())
        ax.set_title(bench_label(b) if b != AVERAGE else "Average over benchmarks", fontsize=10)
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel("accuracy (%)")
        ax.set_xticks(sorted(sub[x].unique()))
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    if note:
        fig.subplots_adjust(bottom=fig.subplotpars.bottom + 0.06)
        fig.text(0.5, 0.01, note, ha="center", va="bottom", fontsize=8, style="italic", wrap=True)
    return fig


def bars_by_benchmark(long: pd.DataFrame, hue: str, title: str) -> plt.Figure:
    """Grouped bars: benchmarks on the x axis, one bar per `hue`, 95% CI whiskers."""
    benches = list(dict.fromkeys(long["benchmark"]))
    hues = list(dict.fromkeys(long[hue]))
    width = 0.8 / len(hues)
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(benches) * len(hues) / 2), 4))
    for i, h in enumerate(hues):
        g = long[long[hue] == h].set_index("benchmark").reindex(benches)
        xs = np.arange(len(benches)) + (i - (len(hues) - 1) / 2) * width
        err = np.vstack([g["accuracy"] - g["ci_lo"], g["ci_hi"] - g["accuracy"]])
        ax.bar(xs, g["accuracy"], width, yerr=err, capsize=2, label=h)
    ax.set_xticks(range(len(benches)), [bench_label(b) for b in benches], rotation=20)
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return fig
