"""Normalising a reply's numbers into a belief, and the re-scoring rules beyond Algorithm 1 (Surprisingly Popular,
Bayesian Truth Serum, shuffled scores); Algorithm 1's names (protocol.debate) are re-exported for report/. Arrays are
(..., N, K) per belief and (..., N) per agent; NaN, inf, negative and padded entries have zero mass."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

import numpy as np

from acemad_utils.protocol import debate
from acemad_utils.protocol.debate import LOG_EPS, argmax_tiebreak, vote_shares


def __getattr__(name: str):  # Algorithm 1's names (peer_scores, mwu_weights, ...) live in protocol.debate
    return getattr(debate, name)


def normalize(x) -> tuple[np.ndarray, np.ndarray]:
    """(p, degenerate): the rows of x as distributions; a row without mass is uniform and degenerate."""
    x = np.asarray(x, dtype=float)
    x = np.where(np.isfinite(x) & (x > 0), x, 0.0)
    top = x.max(axis=-1, keepdims=True)
    x = x / np.where(top > 0, top, 1.0)  # scale first: 1e308 + 1e308 would overflow the sum
    total = x.sum(axis=-1, keepdims=True)
    p = np.where(total > 0, x / np.where(total > 0, total, 1.0), 1.0 / max(x.shape[-1], 1))
    return p, total[..., 0] <= 0


def agent_permutations(seed: int, ids: Sequence[str], movable, n_perm: int, *, salt: str = "shuffle") -> np.ndarray:
    """(n_perm, len(ids), N): perm[s, b, i] is the agent whose scores agent i gets in draw s of question b, from
    (seed, question id, salt) only, never batch order; agents not `movable` (B, N) keep their own index."""
    movable = np.asarray(movable, dtype=bool)
    out = np.broadcast_to(np.arange(movable.shape[-1]), (n_perm, *movable.shape)).copy()
    for row in np.unique(movable, axis=0):  # the questions whose same agents move, in one assignment
        b, idx = np.flatnonzero((movable == row).all(axis=-1)), np.flatnonzero(row)
        ranks = np.stack([_permutation_ranks(seed, ids[i], salt, n_perm, len(idx)) for i in b.tolist()], axis=1)
        out[:, b[:, None], idx] = idx[ranks]
    return out


@functools.lru_cache(maxsize=1 << 15)
def _permutation_ranks(seed: int, qid: str, salt: str, n_perm: int, n: int) -> np.ndarray:
    """One question's draw, once per process (notebook 09 shuffles the same questions at 37 map points)."""
    h = hashlib.sha256(f"{seed}|{qid}|{salt}".encode()).digest()
    ranks = np.argsort(np.random.default_rng(int.from_bytes(h[:8], "little")).random((n_perm, n)), axis=-1)
    ranks.flags.writeable = False
    return ranks


def _answering_mean(Q, v) -> np.ndarray:
    """Mean peer prediction over agents that answered (v >= 0); abstainers are left out of both sides."""
    w = (np.asarray(v) >= 0).astype(float)[..., None]
    n = w.sum(axis=-2)
    return (w * Q).sum(axis=-2) / np.where(n > 0, n, 1.0)


def surprisingly_popular(v, Q, keys=None, option_mask=None) -> np.ndarray:
    """Surprisingly Popular (Prelec et al. 2017): the answer whose vote share most exceeds its mean predicted share
    among the agents who answered (-1: nobody did); `option_mask` (default: voted or predicted) marks real options."""
    Q = np.asarray(Q, dtype=float)
    k = Q.shape[-1]
    shares = vote_shares(v, k)
    if option_mask is None:
        option_mask = (shares > 0) | (Q.sum(axis=-2) > 0)
    gap = np.where(option_mask, shares - _answering_mean(Q, v), -np.inf)
    ans, _ = argmax_tiebreak(np.where(np.isfinite(gap), gap, -1e300), keys)
    return np.where(shares.sum(axis=-1) > 0, ans, -1)


def bts_scores(v, Q) -> np.ndarray:
    """Bayesian Truth Serum (Prelec 2004, alpha = 1): log(xbar_a / ybar_a) + sum_k xbar_k log(q_ik / xbar_k), xbar the
    answer shares, ybar the geometric mean prediction of those who answered; an abstainer (v = -1) scores NaN."""
    v = np.asarray(v)
    Q = np.maximum(np.asarray(Q, dtype=float), LOG_EPS)
    k = Q.shape[-1]
    xbar = vote_shares(v, k)  # (..., K)
    log_xbar = np.log(np.where(xbar > 0, xbar, 1.0))  # 0 where nobody chose k (those terms are dropped)
    info_k = np.where(xbar > 0, log_xbar - _answering_mean(np.log(Q), v), 0.0)  # log(xbar_k / ybar_k)
    pred = np.sum(xbar[..., None, :] * (np.log(Q) - log_xbar[..., None, :]), axis=-1)
    info = np.take_along_axis(info_k, np.where(v >= 0, v, 0), axis=-1)  # (..., N): info score of own answer
    return np.where(v >= 0, info + pred, np.nan)


def bts_answer(v, Q, keys=None) -> np.ndarray:
    """The answer whose endorsers have the highest mean BTS score (-1 if nobody answered)."""
    v = np.asarray(v)
    k = np.asarray(Q).shape[-1]
    s = bts_scores(v, Q)
    onehot = (v[..., None] == np.arange(k)).astype(float)  # (..., N, K)
    tot = np.einsum("...n,...nk->...k", np.nan_to_num(s), onehot)
    cnt = onehot.sum(axis=-2)
    mean = np.where(cnt > 0, tot / np.where(cnt > 0, cnt, 1.0), -np.inf)
    ans, _ = argmax_tiebreak(np.where(np.isfinite(mean), mean, -1e300), keys)
    return np.where(cnt.sum(axis=-1) > 0, ans, -1)
