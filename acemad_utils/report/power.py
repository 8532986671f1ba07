"""How many questions a paired comparison needs, before anyone pays (docs/statistics.md, "Power").

Only the discordant cells decide a paired test: effect d = p10 - p01, discordance psi = p10 + p01. McNemar's normal
approximation (Connor 1987), two-sided at alpha: n = (z_{1-alpha/2} sqrt(psi) + z_power sqrt(psi - d^2))^2 / d^2.
The paper prints accuracies, never psi; they bound it (|d| <= psi <= min(p_a + p_b, 2 - p_a - p_b)). Independent
errors give a conservative psi (methods sharing a model err together); a pilot measures it (`observed`).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

_Z = NormalDist()


def _check(effect: float, discordance: float) -> None:
    if not 0 < abs(effect) <= discordance <= 1:
        raise ValueError(f"need 0 < |effect| <= discordance <= 1 (fractions, not points); got effect={effect}, "
                         f"discordance={discordance}")  # fmt: skip


def n_needed(effect: float, discordance: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Questions a two-sided paired test at `alpha` needs to detect `effect` with probability `power`."""
    _check(effect, discordance)
    za, zb = _Z.inv_cdf(1 - alpha / 2), _Z.inv_cdf(power)
    root = za * math.sqrt(discordance) + zb * math.sqrt(discordance - effect**2)
    return math.ceil(root**2 / effect**2)


def power_at(n: int, effect: float, discordance: float, alpha: float = 0.05) -> float:
    """Probability that a two-sided paired test at `alpha` on `n` questions detects `effect` (0 for n = 0)."""
    _check(effect, discordance)
    if n <= 0:
        return 0.0
    za = _Z.inv_cdf(1 - alpha / 2)
    spread = math.sqrt(discordance - effect**2)
    if spread == 0:  # every discordant pair goes one way: detected as soon as the test can reject at all
        return 1.0
    return _Z.cdf((abs(effect) * math.sqrt(n) - za * math.sqrt(discordance)) / spread)


def holm_alpha(m: int, alpha: float = 0.05, step: int = 1) -> float:
    """The level Holm's step-down applies at `step` (1 = the smallest p) of `m` comparisons: alpha / (m - step + 1)
    (a claim's n is planned at the first step, alpha / m: the worst case it must survive)."""
    if not 1 <= step <= m:
        raise ValueError(f"step must be in 1..m; got step={step}, m={m}")
    return alpha / (m - step + 1)


def discordance_bounds(p_a: float, p_b: float) -> tuple[float, float]:
    """The range of the discordance two accuracies allow: (|p_a - p_b|, min(p_a + p_b, 2 - p_a - p_b))."""
    return abs(p_a - p_b), min(p_a + p_b, 2 - p_a - p_b)


def discordance_at(p_a: float, p_b: float, rho: float) -> float:
    """The discordance of two accuracies whose per-question correctness correlates by `rho` (phi coefficient, e.g.
    a pilot's `correlation`): p_a + p_b - 2 P(both right), clipped to `discordance_bounds`."""
    both = p_a * p_b + rho * math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    lo, hi = discordance_bounds(p_a, p_b)
    return min(max(p_a + p_b - 2 * both, lo), hi)


def power_strata(ns, effects, discordances, alpha: float = 0.05) -> float:
    """Power of the two-sided test of an Average gain (the mean over B benchmarks of paired gains, as the ledger
    tests it; SE sqrt(sum_b v_b / n_b) / B, so small benchmarks weigh most)."""
    ns, d, psi = (np.asarray(x, dtype=float) for x in (ns, effects, discordances))
    if np.any(ns <= 0):
        return 0.0
    return _stratified_power(float(np.mean(d)), *_spreads(1 / ns, d, psi), alpha)


def n_strata(shares, effects, discordances, alpha: float = 0.05, power: float = 0.8) -> int:
    """Questions in all (split across benchmarks in proportion to `shares`) an Average gain needs (power_strata)."""
    w, d, psi = (np.asarray(x, dtype=float) for x in (shares, effects, discordances))
    d_mean = float(np.mean(d))
    if d_mean == 0:
        raise ValueError("an Average effect of 0 has no power: a claimed difference is needed")
    s0, s1 = _spreads(np.sum(w) / w, d, psi)  # SEs at one question in all
    za, zb = _Z.inv_cdf(1 - alpha / 2), _Z.inv_cdf(power)
    return math.ceil(((za * s0 + zb * s1) / abs(d_mean)) ** 2)


def _spreads(inv_n, d, psi) -> tuple[float, float]:
    """SEs of the stratified mean gain under no effect (McNemar's: discordance only) and under the effect."""
    if np.any(np.abs(d) > psi) or np.any(psi > 1) or not np.any(psi > 0):
        raise ValueError(f"need |effect| <= discordance <= 1 per benchmark; got {list(d)}, {list(psi)}")
    return float(np.sqrt(np.sum(psi * inv_n))) / len(d), float(np.sqrt(np.sum((psi - d**2) * inv_n))) / len(d)


def _stratified_power(d_mean: float, s0: float, s1: float, alpha: float) -> float:
    if d_mean == 0:
        raise ValueError("an Average effect of 0 has no power: a claimed difference is needed")
    za = _Z.inv_cdf(1 - alpha / 2)
    return 1.0 if s1 == 0 else _Z.cdf((abs(d_mean) - za * s0) / s1)


def correlation(a, b) -> float:
    """The phi coefficient of two methods' 0/1 correctness on the same questions (0 when either is constant)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    sa, sb = a.std(), b.std()
    return 0.0 if sa == 0 or sb == 0 else float(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb))


def observed(a, b) -> tuple[float, float]:
    """(effect, discordance) of two methods' 0/1 correctness on the same questions (e.g. a pilot's records)."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"need two equally long, non-empty correctness vectors; got {a.shape} and {b.shape}")
    p10, p01 = float(np.mean(a & ~b)), float(np.mean(~a & b))
    return p10 - p01, p10 + p01
