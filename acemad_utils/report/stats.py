"""Uncertainty for every number we print: bootstrap CIs over questions and paired tests."""

from __future__ import annotations

import functools
import math

import numpy as np


@functools.lru_cache(maxsize=16)
def resample_indices(seed: int, n_boot: int, sizes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Bootstrap row indices, one read-only int32 (n_boot, size) array per group from default_rng(seed); cached: a
    notebook bootstraps many columns with one seed and the same sizes."""
    rng = np.random.default_rng(seed)
    out = tuple(rng.integers(0, size, size=(n_boot, size)).astype(np.int32) for size in sizes)
    for idx in out:
        idx.flags.writeable = False
    return out


@functools.lru_cache(maxsize=16)
def _resample_counts(seed: int, n_boot: int, sizes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """How often each row is drawn in each resample of resample_indices, (n_boot, size) float32 per group."""
    draws = zip(resample_indices(seed, n_boot, sizes), sizes)
    return tuple(np.bincount((np.arange(n_boot)[:, None] * n + i).ravel(), minlength=n_boot * n).reshape(n_boot, n)
                 .astype(np.float32) for i, n in draws)  # fmt: skip


def _content(a) -> tuple:
    """An array as a hashable key of its values (dtype, shape, bytes): equal keys, equal arrays."""
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()  # C order whatever a's layout


def _array(key: tuple) -> np.ndarray:  # _content's inverse (read-only: it shares the key's bytes)
    dtype, shape, data = key
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def resampled_means(groups, seed: int, n_boot: int) -> list[np.ndarray]:
    """Each group's bootstrap means over its rows (questions), drawn by resample_indices(seed, n_boot, sizes)
    (read-only arrays: they are memoized by the groups' values, as a notebook's tables bootstrap the same outcomes
    more than once)."""
    return list(_resampled_means(tuple(_content(g) for g in groups), seed, n_boot))


@functools.lru_cache(maxsize=256)
def _resampled_means(keys: tuple, seed: int, n_boot: int) -> tuple[np.ndarray, ...]:
    """Whole numbers below 2^24 in all (0/1 outcomes) sum exactly in float32 in any order, so counts @ x gives the
    bits of x[idx].mean(1) without the (n_boot, n) gather."""
    groups = [_array(k) for k in keys]
    sizes = tuple(len(g) for g in groups)
    idx, out = resample_indices(seed, n_boot, sizes), []
    for k, (g, n) in enumerate(zip(groups, sizes)):
        if np.isfinite(g).all() and np.array_equal(g, np.round(g)) and np.abs(g).max() * n < 2**24:
            counts = _resample_counts(seed, n_boot, sizes)[k]  # einsum, not BLAS: its threads cost more CPU than this
            out.append(np.einsum("bn,n...->b...", counts, g.astype(np.float32)).astype(float) / n)
        else:
            out.append(g[idx[k]].mean(axis=1))
    for x in out:
        x.flags.writeable = False
    return tuple(out)


def snapped(x):
    """x with values within 1e-9 of 0 made 0.0 (others untouched; a scalar stays one): a mean or CI bound that is 0
    but for the last bits of a sum of fractions (-1e-17) must not read as a sign (a control "behind", a claim that
    "fails", a gain printed "-0.0")."""
    x = np.asarray(x, dtype=float)
    return np.where(np.abs(x) < 1e-9, 0.0, x)[()]


def bootstrap_ci(x, n_boot: int = 2000, seed: int = 0):
    """(mean, lo, hi) with a 95% percentile bootstrap CI over rows (questions); arrays for several columns. NaN rows
    are dropped only when x is 1-D; fewer than 2 rows give NaN bounds (one question has nothing to resample: a
    zero-width interval would read as certainty; `interval` prints them as NO_INTERVAL)."""
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)] if x.ndim == 1 else x
    n = x.shape[0]
    nans = np.full(x.shape[1:], np.nan)
    nan = float(nans) if nans.ndim == 0 else nans
    if n < 2:
        return (x.mean(axis=0) if n else nan), nan, nan
    mean = snapped(x.mean(axis=0))
    a = (1 - 0.95) / 2  # 0.025000000000000022: the bits of every printed CI
    lo, hi = snapped(np.quantile(resampled_means([x], seed, n_boot)[0], [a, 1 - a], axis=0))
    return mean, lo, hi


def exact_if_constant(groups, lo: float, hi: float) -> tuple[float, float]:
    """(lo, hi), unless every group's 0/1 outcomes are all the same: the percentile bootstrap has zero width there
    ("100.0 [100.0, 100.0]" after ten right answers) though a rate seen on ten questions is far from certain. Each
    such group then gets its exact (Clopper-Pearson) 95% bounds, 0.025^(1/n) from the far edge, and an average of
    groups the mean of theirs. One question (no interval) and any group with both outcomes keep the bootstrap's."""
    groups = [np.asarray(g, dtype=float) for g in groups]
    if not groups or not all(len(g) >= 2 and np.isin(g, (0.0, 1.0)).all() and (g == g[0]).all() for g in groups):
        return lo, hi
    edges = [0.025 ** (1 / len(g)) for g in groups]
    bounds = [(e, 1.0) if g[0] == 1 else (0.0, 1 - e) for g, e in zip(groups, edges)]
    return float(np.mean([b[0] for b in bounds])), float(np.mean([b[1] for b in bounds]))


#: A statistic over one question (a cell, the premise's questions that split the agents) or an average over
#: benchmarks of which one has a single question (tables._stratified_average): nothing, or too little, to resample.
NO_INTERVAL = "[no interval: a benchmark or sample of one question]"


def interval(lo, hi, spec: str = ".1f") -> str:
    """'[lo, hi]' in the format `spec`, or NO_INTERVAL where a bound is NaN."""
    return NO_INTERVAL if np.isnan(lo) or np.isnan(hi) else f"[{lo:{spec}}, {hi:{spec}}]"


SIGN_BLOCK = 500  # rows of a sign matrix expanded at a time: a float block of 500 x n, not n_perm x n


@functools.lru_cache(maxsize=8)
def _packed_signs(n_perm: int, n: int, seed: int) -> np.ndarray:
    """default_rng(seed)'s (n_perm, n) random signs packed 8 to a byte (bit 1 = +1); cached: a table shares them."""
    rng = np.random.default_rng(seed)
    packed = np.empty((n_perm, (n + 7) // 8), dtype=np.uint8)
    for i in range(0, n_perm, SIGN_BLOCK):
        rows = min(SIGN_BLOCK, n_perm - i)
        packed[i : i + rows] = np.packbits(rng.integers(0, 2, size=(rows, n), dtype=np.int64).astype(bool), axis=1)
    packed.flags.writeable = False
    return packed


_BYTE_SIGNS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float) * 2.0 - 1.0  # (256, 8)


def sign_flip_sums(v, *, n_perm: int = 10000, seed: int = 0) -> np.ndarray:
    """|sum_i s_i v_i| for every row s of _packed_signs, as sums of n/8 table entries T[k, byte] (v's signed sums
    over 8 columns for each of the 256 bytes), never expanding the signs."""
    return _sign_flip_sums(_content(np.asarray(v, dtype=float)), n_perm, seed)


@functools.lru_cache(maxsize=32)  # a notebook's tables test the same differences more than once (80 KB each)
def _sign_flip_sums(key: tuple, n_perm: int, seed: int) -> np.ndarray:
    v = _array(key)
    n = len(v)
    packed = _packed_signs(n_perm, n, seed)
    k = packed.shape[1]
    table = (np.pad(v, (0, 8 * k - n)).reshape(k, 8) @ _BYTE_SIGNS.T).ravel()  # (k * 256,): T[k, byte]
    offsets = 256 * np.arange(k, dtype=np.int32)  # int32 indices and np.take: 10-20% faster than intp and [ ]
    out = np.empty(n_perm)
    for i in range(0, n_perm, SIGN_BLOCK):
        out[i : i + SIGN_BLOCK] = np.take(table, packed[i : i + SIGN_BLOCK] + offsets).sum(1)
    out = np.abs(out)
    out.flags.writeable = False
    return out


def sign_flip_p(d, *, w=None, n_perm: int = 10000, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p-value of paired differences d: of their mean, or of sum_i w_i d_i.
    1.0 when every difference is 0."""
    d = np.asarray(d, dtype=float)
    if not d.any():
        return 1.0
    if w is None:
        null, obs = sign_flip_sums(d, n_perm=n_perm, seed=seed) / len(d), abs(d.mean())
    else:
        null, obs = sign_flip_sums(np.asarray(w, dtype=float) * d, n_perm=n_perm, seed=seed), abs(np.dot(w, d))
    return float((1 + np.sum(null >= obs - 1e-12)) / (n_perm + 1))


def mcnemar_exact(a, b) -> float:
    """Two-sided exact McNemar test for paired binary outcomes (same questions). 1.0 if no discordant pair."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    n01, n10 = int(np.sum(a & ~b)), int(np.sum(~a & b))
    n = n01 + n10
    return 1.0 if n == 0 else float(min(1.0, 2 * sum(math.comb(n, i) for i in range(min(n01, n10) + 1)) / 2**n))


def adjust_pvalues(p) -> np.ndarray:
    """Holm's step-down adjusted p-values in the order of `p` (family-wise, valid under any dependence, which tests
    sharing questions have); NaN stays NaN and is not counted."""
    p = np.asarray(p, dtype=float)
    out, ok = np.full(p.shape, np.nan), ~np.isnan(p)
    m = int(ok.sum())
    order = np.argsort(p[ok], kind="stable")
    vals = np.empty(m)
    vals[order] = np.minimum(np.maximum.accumulate((m - np.arange(m)) * p[ok][order]), 1.0)
    out[ok] = vals
    return out
