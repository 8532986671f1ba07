"""Saving artefacts labelled with their source, byte-stable: tables as CSV + Markdown (fixed float precision),
figures as PNG + PDF (no timestamp in their metadata)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from acemad_utils.data.paths import outputs
from acemad_utils.protocol.schema import SYNTHETIC_LABEL

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def save_table(
    df: pd.DataFrame, name: str, synthetic: bool, source: str = "", *, display: pd.DataFrame | None = None,
    companions: dict | None = None, title: str | None = None, folder: str = "tables",
) -> Path:  # fmt: skip
    """outputs/<folder>/<name>.csv and .md (its source, `display` or `df`, then each companion table)."""
    d = outputs(folder) if folder else outputs()  # "": the claims ledger, outputs/claims.md beside tables/
    df.to_csv(d / f"{name}.csv", index=False, float_format="%.4f")
    label = SYNTHETIC_LABEL if synthetic else (source or "real model")
    parts = [
        f"<!-- source: {label} -->\n**Source: {label}.**\n",
        (df if display is None else display).to_markdown(index=False, floatfmt=".4f"),
    ]
    if title:
        parts.insert(0, f"# {title}\n")
    for heading, table in (companions or {}).items():
        parts += [f"\n**{heading}**\n", table.to_markdown(index=False, floatfmt=".2f")]
    (d / f"{name}.md").write_text("\n".join(parts) + "\n", encoding="utf-8")
    return d / f"{name}.csv"


def save_figure(fig: Figure, name: str) -> Figure:
    """outputs/figures/<name>.png and .pdf; the figure returned and closed, so a cell ending with this shows it once."""
    d = outputs("figures")
    fig.savefig(d / f"{name}.png", dpi=130, bbox_inches="tight", metadata={"Software": None})
    meta = {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}
    fig.savefig(d / f"{name}.pdf", bbox_inches="tight", metadata=meta)
    import matplotlib.pyplot as plt  # loaded already where a figure was drawn

    plt.close(fig)
    return fig
