"""How many questions a paired comparison needs, before anyone pays (docs/statistics.md, "Power").

Only the discordant cells decide a paired test: effect d = p10 - p01, discordance psi = p10 + p01. McNemar's normal
approximation (Connor 1987), two-sided at alpha: n = (z_{1-alpha/2} sqrt(psi) + z_power sqrt(psi - d^2))^2 / d^2.
The paper prints accuracies, never psi; they bound it (|d| <= psi <= min(p_a + p_b, 2 - p_a - p_b)).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

_Z = NormalDist()


def _spreads(inv_n, d, psi) -> tuple[float, float]:
    """SEs of the mean paired gain over benchmarks (weights inv_n) under no effect and under the effect d."""
    d, psi = np.atleast_1d(np.asarray(d, dtype=float)), np.atleast_1d(np.asarray(psi, dtype=float))
    if not (np.all(np.abs(d) <= psi) and np.all(psi <= 1) and np.any(psi > 0) and np.mean(d) != 0):
        raise ValueError(f"need 0 < |effect| <= discordance <= 1 (fractions, not points); got effect={d.tolist()}, "
                         f"discordance={psi.tolist()}")  # fmt: skip
    return float(np.sqrt(np.sum(psi * inv_n))) / len(d), float(np.sqrt(np.sum((psi - d**2) * inv_n))) / len(d)


def power_strata(ns, effects, discordances, alpha: float = 0.05) -> float:
    """Power of the two-sided test of an Average gain (the mean over benchmarks of paired gains, as the ledger tests
    it; SE sqrt(sum_b v_b / n_b) / B, so small benchmarks weigh most); 0 when a benchmark has no question."""
    ns = np.atleast_1d(np.asarray(ns, dtype=float))
    s0, s1 = _spreads(1 / np.maximum(ns, 1e-300), effects, discordances)
    if np.any(ns <= 0):
        return 0.0
    return 1.0 if s1 == 0 else _Z.cdf((abs(float(np.mean(effects))) - _Z.inv_cdf(1 - alpha / 2) * s0) / s1)


def n_strata(shares, effects, discordances, alpha: float = 0.05, power: float = 0.8) -> int:
    """Questions in all (split across benchmarks in proportion to `shares`) an Average gain needs (power_strata)."""
    w = np.atleast_1d(np.asarray(shares, dtype=float))
    s0, s1 = _spreads(np.sum(w) / w, effects, discordances)  # SEs at one question in all
    root = _Z.inv_cdf(1 - alpha / 2) * s0 + _Z.inv_cdf(power) * s1
    return math.ceil((root / abs(float(np.mean(effects)))) ** 2)


def n_needed(effect: float, discordance: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Questions a two-sided paired test at `alpha` needs to detect `effect` with probability `power`."""
    return n_strata([1.0], [effect], [discordance], alpha, power)


def power_at(n: int, effect: float, discordance: float, alpha: float = 0.05) -> float:
    """Probability that a two-sided paired test at `alpha` on `n` questions detects `effect` (0 for n = 0)."""
    return power_strata([n], [effect], [discordance], alpha)


def discordance_bounds(p_a: float, p_b: float) -> tuple[float, float]:
    """The range of the discordance two accuracies allow: (|p_a - p_b|, min(p_a + p_b, 2 - p_a - p_b))."""
    return abs(p_a - p_b), min(p_a + p_b, 2 - p_a - p_b)


def discordance_at(p_a: float, p_b: float, rho: float) -> float:
    """The discordance of two accuracies whose per-question correctness correlates by `rho` (phi coefficient, e.g.
    a pilot's `correlation`): p_a + p_b - 2 P(both right), clipped to `discordance_bounds`."""
    both = p_a * p_b + rho * math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    lo, hi = discordance_bounds(p_a, p_b)
    return min(max(p_a + p_b - 2 * both, lo), hi)


def correlation(a, b) -> float:
    """The phi coefficient of two methods' 0/1 correctness on the same questions (NaN when either is constant: right
    on every question or on none, it has no correlation to measure)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    sa, sb = a.std(), b.std()
    return math.nan if sa == 0 or sb == 0 else float(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb))


def observed(a, b) -> tuple[float, float]:
    """(effect, discordance) of two methods' 0/1 correctness on the same questions (e.g. a pilot's records)."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"need two equally long, non-empty correctness vectors; got {a.shape} and {b.shape}")
    p10, p01 = float(np.mean(a & ~b)), float(np.mean(~a & b))
    return p10 - p01, p10 + p01
