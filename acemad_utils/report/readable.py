"""Numbers as a reader reads them, the same in tables, sentences and SUMMARY lines: 'p = 0.031', 'p = 2.1e-07',
'p < 1e-4' at the permutation floor."""

from __future__ import annotations

import math
import re

import pandas as pd

#: The permutation tests' n_perm: their smallest p is 1 / (PERMUTATIONS + 1), shown "p < 1e-4".
PERMUTATIONS = 10_000
PERMUTATION_FLOOR = 1.0 / (PERMUTATIONS + 1)


def pvalue_text(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    if math.isclose(p := float(p), PERMUTATION_FLOOR, rel_tol=1e-9):
        return f"< {1 / PERMUTATIONS:.0e}".replace("e-0", "e-")
    return f"{p:.1e}" if p < 1e-3 else f"{p:.2g}"


def pvalue(p: float) -> str:
    text = pvalue_text(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def holm_pvalue(p_holm: float, p_raw: float) -> str:
    """Holm's adjusted p as text. From a raw p at the permutation floor it is m times that floor, an upper bound like
    the floor itself: 'p <= 1.0e-03', never 'p = 1.0e-03' (which reads as a measured value)."""
    text = pvalue(p_holm)
    floored = p_raw == p_raw and math.isclose(float(p_raw), PERMUTATION_FLOOR, rel_tol=1e-9)
    return text.replace("p = ", "p <= ") if floored else text


def tests_table(tests: pd.DataFrame) -> pd.DataFrame:
    """tables.versus_best's frame for display (the frame and its CSV keep full precision)."""
    out = tests.copy()
    for col in ("gain", "gain_lo", "gain_hi"):
        if col in out:
            out[col] = [MISSING if math.isnan(float(x)) else f"{float(x):+.1f}" for x in out[col]]  # no CI: n = 1
    for col in [c for c in out.columns if c.startswith("p_")]:
        out[col] = [pvalue_text(x) for x in out[col]]
    if "n_paired" in out:
        out["n_paired"] = out["n_paired"].astype(int)
    return out.rename(columns={"gain": "gain (points)", "gain_lo": "CI low", "gain_hi": "CI high"})


#: A column of p-values by its name ('p', 'p (Holm)', 'p_holm', 'p-value'): shown as pvalue_text, never 9.999000e-05.
P_COLUMN = re.compile(r"^p(\b|_)|\bp-value", re.I)
MISSING = "–"  # a missing number in a shown table (pandas would print NaN)


def html(df: pd.DataFrame) -> str:
    """A shown table's HTML: every text and row whole (pandas cuts both with '...'), p-values as pvalue_text, a
    missing number as MISSING."""
    shown = df.copy()
    for col in [c for c in df.columns if isinstance(c, str) and P_COLUMN.search(c)]:
        if pd.api.types.is_numeric_dtype(df[col]):
            shown[col] = [pvalue_text(x) for x in df[col]]
    with pd.option_context("display.max_colwidth", None):
        return shown.to_html(notebook=True, na_rep=MISSING, max_rows=None, max_cols=None, show_dimensions=False)
