"""Saving artefacts: every table as CSV + Markdown, every figure as PNG + PDF, labelled with its source.

    from acemad_utils.report.save import save_table, save_figure
    save_table(df, "theory_phase", synthetic=True)      # outputs/tables/theory_phase.{csv,md}
    save_figure(fig, "theory_a_martingale")             # outputs/figures/theory_a_martingale.{png,pdf}; returns fig

Outputs are byte-stable for identical inputs: floats are written with fixed precision and the PDF/PNG
metadata carry no timestamp. A notebook cell that ends with `save_figure(...)` shows its figure once (the
returned Figure is the cell's value), whatever the matplotlib backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from acemad_utils.data.paths import outputs
from acemad_utils.protocol.schema import SYNTHETIC_LABEL

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def save_table(
    df: pd.DataFrame,
    name: str,
    synthetic: bool,
    source: str = "",
    *,
    floatfmt: str = ".4f",
    display: pd.DataFrame | None = None,
    companions: dict | None = None,
    title: str | None = None,
    folder: str = "tables",
) -> Path:
    """Write outputs/<folder>/<name>.csv (the long, machine-readable table) and <name>.md (folder "" = outputs/).

    The Markdown says where the numbers come from, shows `display` (a reader-friendly view, default `df`)
    and then each companion table under its title (e.g. the paper's printed numbers); `title` heads the Markdown.
    """
    d = outputs(folder) if folder else outputs()  # the claims ledger: outputs/claims.md, beside tables/
    df.to_csv(d / f"{name}.csv", index=False, float_format=f"%{floatfmt}")
    label = SYNTHETIC_LABEL if synthetic else (source or "real model")
    parts = [
        f"<!-- source: {label} -->\n**Source: {label}.**\n",
        (df if display is None else display).to_markdown(index=False, floatfmt=floatfmt),
    ]
    if title:
        parts.insert(0, f"# {title}\n")
    for heading, table in (companions or {}).items():
        parts += [f"\n**{heading}**\n", table.to_markdown(index=False, floatfmt=".2f")]
    (d / f"{name}.md").write_text("\n".join(parts) + "\n", encoding="utf-8")
    return d / f"{name}.csv"


def save_figure(fig: Figure, name: str) -> Figure:
    """Write outputs/figures/<name>.png and .pdf, then return the figure, so that a cell ending with this call
    shows it inline as its value. It is closed in pyplot first: the inline backend would otherwise show it a
    second time at the end of the cell, and a script drawing many figures would keep them all in memory."""
    d = outputs("figures")
    fig.savefig(d / f"{name}.png", dpi=130, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(
        d / f"{name}.pdf",
        bbox_inches="tight",
        metadata={"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    )
    import matplotlib.pyplot as plt  # where a figure was drawn, so loaded already (figures.py: why not at top)

    plt.close(fig)
    return fig
