"""Saving artefacts labelled with their source, byte-stable: tables as CSV + Markdown (fixed float precision),
figures as PNG + PDF (no timestamp in their metadata)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from acemad_utils.data.paths import outputs
from acemad_utils.protocol.schema import SYNTHETIC_LABEL
from acemad_utils.report.readable import MISSING

if TYPE_CHECKING:
    from IPython.display import Image
    from matplotlib.figure import Figure

PNG_DPI = 130  # the saved PNG's resolution
INLINE_DPI = 100  # matplotlib's figure.dpi, at which the inline backend showed a figure


def save_table(
    df: pd.DataFrame, name: str, synthetic: bool, source: str = "", *, display: pd.DataFrame | None = None,
    companions: dict | None = None, title: str | None = None, folder: str = "tables",
) -> Path:  # fmt: skip
    """outputs/<folder>/<name>.csv and .md (its source, `display` or `df`, then each companion table)."""
    d = outputs(folder) if folder else outputs()  # "": the claims ledger, outputs/claims.md beside tables/
    label = source or (SYNTHETIC_LABEL if synthetic else "real model")  # the notebook's figures.source_label
    if synthetic and "SYNTHETIC" not in label:  # a synthetic table says so, whatever source it was given
        label = SYNTHETIC_LABEL
    with_source(df, label).to_csv(d / f"{name}.csv", index=False, float_format="%.4f")
    parts = [f"# {title}\n"] if title else []
    parts += [f"<!-- source: {label} -->\n**Source: {label}.**\n", _markdown(df if display is None else display, ".4f")]
    for heading, table in (companions or {}).items():
        parts += [f"\n**{heading}**\n", _markdown(table, ".2f")]
    (d / f"{name}.md").write_text("\n".join(parts) + "\n", encoding="utf-8")
    return d / f"{name}.csv"


def with_source(df: pd.DataFrame, label: str) -> pd.DataFrame:
    """`df` with the source as its first column, as every CSV is saved: a file opened alone still says whether its
    numbers come from a model."""
    if "source" in df.columns:
        raise ValueError("a table's column may not be named 'source' (the CSV's first column says it)")
    return df.assign(source=label)[["source", *df.columns]]


def _markdown(df: pd.DataFrame, floatfmt: str) -> str:
    """A Markdown table whose missing numbers read as in a shown table: tabulate prints a float NaN as "nan" (its
    missingval is for None only), so such a cell is rewritten in place, every other cell as tabulate wrote it."""
    text = df.to_markdown(index=False, floatfmt=floatfmt)
    return re.sub(r"(?<=\|)( *)nan( *)(?=\|)", lambda m: f"{m[1]} {MISSING} {m[2]}", text)


def save_figure(fig: Figure, name: str) -> Image:
    """outputs/figures/<name>.png and .pdf; returns that PNG for the notebook to show, the figure closed. Showing the
    saved bytes instead of the figure spares the inline backend a third render (~a third of a figure's CPU) and shows
    exactly the file written, at the inline backend's size (its 100 dpi: NOTEBOOK_WIDTH_IN holds)."""
    import matplotlib.pyplot as plt  # loaded already where a figure was drawn
    from IPython.display import Image
    from matplotlib import rcParams
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    d = outputs("figures")
    # Laid out once, at the PNG's dpi (tight_layout ran already; a layout engine runs here), then no engine: one tight
    # box for both formats, as savefig("tight") finds the PNG's (its pre-draw changes nothing the box reads once a
    # figure is laid out), so the PNG is the same bytes, the PDF is cropped as the PNG (within a point of its own box)
    # and no save lays the figure out or pre-draws it again (~0.1 CPU s a figure; ~0.3 s a constrained one).
    dpi, fig.dpi = fig.dpi, PNG_DPI
    if not isinstance(fig.get_layout_engine(), (type(None), PlaceHolderLayoutEngine)):
        fig.draw_without_rendering()
    fig.set_layout_engine(None)  # None, not "none": a placeholder engine would make savefig draw once more
    box = fig.get_tightbbox().padded(rcParams["savefig.pad_inches"])
    fig.dpi = dpi
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches=box, metadata={"Software": None})
    png = buf.getvalue()
    (d / f"{name}.png").write_bytes(png)
    meta = {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}
    fig.savefig(d / f"{name}.pdf", bbox_inches=box, metadata=meta)
    plt.close(fig)
    width_px = int.from_bytes(png[16:20], "big")  # the PNG header's IHDR width
    return Image(data=png, format="png", width=round(width_px * INLINE_DPI / PNG_DPI))
