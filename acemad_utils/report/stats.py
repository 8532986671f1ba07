"""Uncertainty for every number we print: bootstrap CIs over questions and paired tests.

from acemad_utils.report.stats import bootstrap_ci, mcnemar_exact
mean, lo, hi = bootstrap_ci([1, 0, 1, 1], seed=0)     # 95% percentile interval of the mean
p = mcnemar_exact(a_correct, b_correct)                # paired: same questions, two methods
"""

from __future__ import annotations

import math

import numpy as np


def bootstrap_ci(x, n_boot: int = 2000, seed: int = 0, level: float = 0.95, *, axis: int = 0):
    """Mean of x along `axis` with a percentile bootstrap CI (resampling rows = questions).

    Returns (mean, lo, hi), arrays when x has more than one column. NaN rows are dropped per column
    only when x is 1-D. With fewer than 2 rows the interval is (mean, mean).
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[~np.isnan(x)]
    x = np.moveaxis(x, axis, 0)
    n = x.shape[0]
    if n == 0:
        nan = np.full(x.shape[1:], np.nan)
        return (float(nan) if nan.ndim == 0 else nan,) * 3
    mean = x.mean(axis=0)
    if n < 2:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    boots = x[idx].mean(axis=1)
    a = (1 - level) / 2
    lo, hi = np.quantile(boots, [a, 1 - a], axis=0)
    return mean, lo, hi


def mcnemar_exact(a, b) -> float:
    """Two-sided exact McNemar test for paired binary outcomes (same questions). 1.0 if no discordant pair."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    n01 = int(np.sum(a & ~b))
    n10 = int(np.sum(~a & b))
    n = n01 + n10
    if n == 0:
        return 1.0
    k = min(n01, n10)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return float(min(1.0, 2 * tail))


def paired_bootstrap_diff(a, b, n_boot: int = 2000, seed: int = 0, *, level: float = 0.95):
    """Mean of a - b over paired questions with a bootstrap CI: (diff, lo, hi)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return bootstrap_ci(d, n_boot=n_boot, seed=seed, level=level)


ADJUSTMENTS = ("holm", "bh")


def adjust_pvalues(p, method: str = "holm") -> np.ndarray:
    """Multiple-comparison adjusted p-values, same order as `p` (NaN stays NaN and is not counted).

    "holm": Holm's step-down (family-wise error rate; valid under any dependence between the tests, which
    the ledger's tests have: they share questions and baselines). "bh": Benjamini-Hochberg (false discovery
    rate). A test is significant after adjustment when its adjusted p is below the level (0.05)."""
    if method not in ADJUSTMENTS:
        raise ValueError(f"method={method!r} is not a p-value adjustment; choose one of {ADJUSTMENTS}")
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    order = np.argsort(p[ok], kind="stable")
    sorted_p = p[ok][order]
    if method == "holm":
        adj = np.maximum.accumulate((m - np.arange(m)) * sorted_p)
    else:
        adj = np.minimum.accumulate((m / np.arange(1, m + 1) * sorted_p)[::-1])[::-1]
    vals = np.empty(m)
    vals[order] = np.minimum(adj, 1.0)
    out[ok] = vals
    return out
