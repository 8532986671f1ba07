"""Counter-based draws: each a pure function of its key and counters (a Generator per batch would depend on which
debates share it; one per debate costs ~20 us to seed). A debate's key hashes (seed, question id, repeat, role)
(blake2b); a uniform is splitmix64's finalizer folded over (key, counters...) in uint64 (BigCrush-clean on
consecutive counters). Gamma variates: Marsaglia-Tsang (boost U^(1/a) for a < 1), in log space."""

from __future__ import annotations

import functools
import hashlib

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


@functools.lru_cache(maxsize=64)  # every method of a run (and of a map point) debates the same questions
def debate_keys(seed: int, qids: tuple[str, ...], repeats: tuple[int, ...], role: str) -> np.ndarray:
    """One uint64 key per debate from (seed, question id, repeat, role) (read-only)."""
    h = (hashlib.blake2b(f"{seed}|{q}|{r}|{role}".encode(), digest_size=8).digest() for q, r in zip(qids, repeats))
    return np.frombuffer(b"".join(h), dtype="<u8")  # read-only: the cached keys are shared


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, in place on a fresh array (a chain of temporaries took 5x as long)."""
    t = z >> _S30
    z ^= t
    z *= _M1
    np.right_shift(z, _S27, out=t)
    z ^= t
    z *= _M2
    np.right_shift(z, _S31, out=t)
    z ^= t
    return z


def bits(key, *counters) -> np.ndarray:
    """uint64 hashes of key (array) and counters (ints or integer arrays), broadcast together."""
    z = np.atleast_1d(np.asarray(key, dtype=np.uint64))
    for c in counters:  # at least 1-d: numpy warns of a scalar's wrap-around, never an array's
        z = _mix(z ^ (np.atleast_1d(np.asarray(c, np.uint64)) * _GOLDEN + _GOLDEN))
    return z


def uniforms(key, *counters) -> np.ndarray:
    """Uniforms in the open interval (0, 1) (53 bits), one per broadcast element of key and counters."""
    return ((bits(key, *counters) >> _S11).astype(np.float64) + 0.5) * 2.0**-53  # the top 53 bits


#: The counter of log_gamma's boost uniform (attempts use 4 * attempt + 0, 1, 2, far below it).
_BOOST = 2**62


def log_gamma(alpha: np.ndarray, key, *counters) -> np.ndarray:
    """log Gamma(alpha, 1) variates of alpha's shape (its last axis numbers them); in log space, as a < 1 gives
    values below the smallest double."""
    shape = np.shape(alpha)
    base = np.broadcast_to(bits(key, *counters, np.arange(shape[-1])), shape).ravel()
    a = np.asarray(alpha, dtype=float).ravel()
    boost = a < 1.0
    d = np.where(boost, a + 1.0, a) - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out, idx, attempt = np.empty(base.shape), None, 0
    while idx is None or idx.size:  # each attempt is accepted with prob > 0.95 (d >= 2/3): a first pass over all,
        b, dd, cc = (base, d, c) if idx is None else (base[idx], d[idx], c[idx])  # then a few over the rejected
        u0, u1 = uniforms(b, 4 * attempt), uniforms(b, 4 * attempt + 1)
        x = np.sqrt(-2.0 * np.log(u0)) * np.cos(2.0 * np.pi * u1)  # Box-Muller
        v = (1.0 + cc * x) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            logv = np.log(v)
            ok = (v > 0) & (np.log(uniforms(b, 4 * attempt + 2)) < 0.5 * x * x + dd - dd * v + dd * logv)
        if idx is None:
            out[ok], idx = np.log(dd[ok]) + logv[ok], np.flatnonzero(~ok)
        else:
            out[idx[ok]], idx = np.log(dd[ok]) + logv[ok], idx[~ok]
        attempt += 1
    # Gamma(a) = Gamma(a + 1) * U^(1/a) for a < 1
    out[boost] += np.log(uniforms(base[boost], _BOOST)) / a[boost]
    return out.reshape(shape)


def dirichlet(alpha: np.ndarray, key, *counters) -> np.ndarray:
    """Dirichlet(alpha) rows over the last axis (normalized Gamma variates)."""
    lg = log_gamma(alpha, key, *counters)
    g = np.exp(lg - lg.max(axis=-1, keepdims=True))
    return g / g.sum(axis=-1, keepdims=True)
