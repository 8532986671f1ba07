"""Counter-based random draws for batches: every draw a pure function of its key and its counters.

Why not a numpy Generator per batch: its draws would depend on which debates share the batch; one per debate costs
~20 us to seed. A debate's key hashes (seed, question id, repeat, role) once (blake2b); every uniform is
splitmix64's finalizer folded over (key, counters...) in wrapping uint64 arithmetic (it passes BigCrush as a
generator of consecutive counters). Gamma variates: Marsaglia-Tsang (boost U^(1/a) for a < 1), in log space.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


def debate_keys(seed: int, qids: Sequence[str], repeats: Sequence[int], role: str) -> np.ndarray:
    """One uint64 key per debate from (seed, question id, repeat, role) (read-only)."""
    return _keys(seed, tuple(qids), tuple(repeats), role)


@functools.lru_cache(maxsize=64)  # every method of a run (and of a map point) debates the same questions
def _keys(seed: int, qids: tuple, repeats: tuple, role: str) -> np.ndarray:
    h = (hashlib.blake2b(f"{seed}|{q}|{r}|{role}".encode(), digest_size=8).digest() for q, r in zip(qids, repeats))
    return np.frombuffer(b"".join(h), dtype="<u8")  # read-only: the cached keys are shared


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def bits(key, *counters) -> np.ndarray:
    """uint64 hashes of key (array) and counters (ints or integer arrays), broadcast together."""
    z = np.atleast_1d(np.asarray(key, dtype=np.uint64))
    for c in counters:  # 1-d at least: numpy warns of a scalar's wrap-around, never of an array's
        z = _mix(z ^ (np.atleast_1d(np.asarray(c, dtype=np.uint64)) * _GOLDEN + _GOLDEN))
    return z


def _unit(z: np.ndarray) -> np.ndarray:  # the top 53 bits as a uniform in (0, 1)
    return ((z >> _S11).astype(np.float64) + 0.5) * 2.0**-53


def uniforms(key, *counters) -> np.ndarray:
    """Uniforms in the open interval (0, 1) (53 bits), one per broadcast element of key and counters."""
    return _unit(bits(key, *counters))


#: The counter of log_gamma's boost uniform (attempts use 4 * attempt + 0, 1, 2, far below it).
_BOOST = 2**62


def log_gamma(alpha: np.ndarray, key, *counters) -> np.ndarray:
    """log of Gamma(alpha, 1) variates, shape alpha.shape (key and counters broadcast to it; the last axis
    numbers the variates). In log space because a < 1 gives values below the smallest double (a Dirichlet
    normalizes them: dirichlet)."""
    a = np.asarray(alpha, dtype=float)
    base = np.broadcast_to(bits(key, *counters, np.arange(a.shape[-1])), a.shape).ravel()
    boost = a.ravel() < 1.0
    d = np.where(boost, a.ravel() + 1.0, a.ravel()) - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty(base.shape)
    idx = np.arange(base.size)
    attempt = 0
    while idx.size:  # each attempt is accepted with prob > 0.95 (d >= 2/3): a few passes over a shrinking set
        b, dd = base[idx], d[idx]
        u0, u1 = uniforms(b, 4 * attempt), uniforms(b, 4 * attempt + 1)
        x = np.sqrt(-2.0 * np.log(u0)) * np.cos(2.0 * np.pi * u1)  # Box-Muller
        v = (1.0 + c[idx] * x) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            logv = np.log(v)
            ok = (v > 0) & (np.log(uniforms(b, 4 * attempt + 2)) < 0.5 * x * x + dd - dd * v + dd * logv)
        out[idx[ok]] = np.log(dd[ok]) + logv[ok]
        idx = idx[~ok]
        attempt += 1
    # Gamma(a) = Gamma(a + 1) * U^(1/a) for a < 1
    out = np.where(boost, out + np.log(uniforms(base, _BOOST)) / np.where(boost, a.ravel(), 1.0), out)
    return out.reshape(a.shape)


def dirichlet(alpha: np.ndarray, key, *counters) -> np.ndarray:
    """Dirichlet(alpha) rows over the last axis (normalized Gamma variates)."""
    lg = log_gamma(alpha, key, *counters)
    g = np.exp(lg - lg.max(axis=-1, keepdims=True))
    return g / g.sum(axis=-1, keepdims=True)
