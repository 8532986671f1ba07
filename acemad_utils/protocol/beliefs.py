"""Pure protocol math: beliefs, peer-prediction scores, multiplicative weights, aggregators.

No I/O, no randomness except explicit tie-break keys. Every function is vectorized: arrays have
shape (..., N, K) for beliefs (any leading batch/round axes, N agents, K options) and (..., N) for
per-agent scores and weights. Questions with fewer options than K are padded with zeros, which
every function here treats as "no mass" (a padded option can never win).

    import numpy as np
    from acemad_utils.protocol import beliefs as B
    P = np.array([[.8, .2], [.8, .2], [.2, .8]])          # self beliefs, 3 agents x 2 options
    Q = np.array([[.8, .2], [.8, .2], [.6, .4]])          # peer predictions
    S = B.peer_scores(Q, P)                               # Brier: 1 - ||q_i - mean_{j!=i} p_j||^2
    W = B.mwu_weights(S[None])[-1]               # weights after one round
    B.weighted_scores(P, W, exponent=2)                   # sum_i w_i^2 p_i(y)

Conventions (defined here once, documented in the README):
- normalize: NaN/inf and negative entries count as zero mass; a row is divided by its sum; an all-zero
  row becomes uniform over its valid options and is flagged degenerate.
- scores with N = 1 are 0 (no peers, no information).
- ties in an argmax are broken by explicit keys (see `tiebreak_keys`) so that a rerun and a re-scoring
  give the same answer.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from acemad_utils.protocol.config import ETA, SCORING_RULES, WEIGHT_EXPONENT, WEIGHTINGS

LOG_EPS = 1e-6  # floor for log score / BTS: a zero forecast of a realized answer costs log(1e-6) ~ -13.8


# ----------------------------------------------------------------------------- beliefs
def normalize(x, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Turn raw non-negative weights into distributions over the last axis.

    Returns (p, degenerate) where `degenerate` (shape x.shape[:-1]) marks rows that had no usable mass
    and were replaced by the uniform distribution over valid options. `mask` (bool, broadcastable to x)
    marks valid options; masked-out entries are forced to 0.
    """
    x = np.asarray(x, dtype=float)
    x = np.where(np.isfinite(x) & (x > 0), x, 0.0)
    if mask is None:
        mask = np.ones(x.shape, dtype=bool)
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), x.shape)
    x = np.where(mask, x, 0.0)
    top = x.max(axis=-1, keepdims=True)
    x = x / np.where(top > 0, top, 1.0)  # scale first: 1e308 + 1e308 would overflow the sum
    total = x.sum(axis=-1, keepdims=True)
    degenerate = total[..., 0] <= 0
    n_valid = mask.sum(axis=-1, keepdims=True)
    uniform = np.where(mask, 1.0 / np.maximum(n_valid, 1), 0.0)
    p = np.where(total > 0, x / np.where(total > 0, total, 1.0), uniform)
    return p, degenerate


def from_mapping(d: Optional[Mapping[str, float]], labels: Sequence[str]) -> tuple[np.ndarray, dict]:
    """Map {label: prob} onto `labels` order. Missing labels get 0, unknown labels are dropped (reported).

    Returns (normalized vector, report) with report keys: missing, unknown, degenerate, raw_sum.
    """
    d = dict(d or {})
    raw = np.array([_as_float(d.get(k)) for k in labels], dtype=float)
    unknown = sorted(str(k) for k in d if k not in labels)
    missing = [k for k in labels if k not in d]
    p, deg = normalize(raw)
    raw_sum = float(np.nansum(np.where(np.isfinite(raw), raw, 0.0)))
    return p, {"missing": missing, "unknown": unknown, "degenerate": bool(deg), "raw_sum": raw_sum}


def _as_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


# ----------------------------------------------------------------------------- scores
def peer_mean(P, valid=None) -> np.ndarray:
    """Realized average belief of each agent's peers: X_{-i} = (sum_j p_j - p_i) / (N - 1). Shape like P.

    With `valid` (bool, shape P.shape[:-1]) only valid peers count; rows with no valid peer are NaN.
    """
    P = np.asarray(P, dtype=float)
    if valid is None:
        valid = np.ones(P.shape[:-1], dtype=bool)
    v = np.asarray(valid, dtype=float)[..., None]
    total = (v * P).sum(axis=-2, keepdims=True) - v * P
    count = v.sum(axis=-2, keepdims=True) - v
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)


def score_forecast(Q, X, rule: str = "brier") -> np.ndarray:
    """Score forecasts Q of realized distributions X (both (..., K)). Higher is better for every rule.

    brier:     1 - ||q - x||^2                 (the paper's rule; in [-1, 1], 1 when q == x)
    log:       sum_k x_k log q_k               (expected log score; <= 0, q floored at LOG_EPS)
    spherical: sum_k x_k q_k / ||q||           (expected spherical score; in [0, 1])
    All three are proper: in expectation over X they are maximized by q = E[X].
    """
    Q = np.asarray(Q, dtype=float)
    X = np.asarray(X, dtype=float)
    if rule == "brier":
        return 1.0 - np.sum((Q - X) ** 2, axis=-1)
    if rule == "log":
        return np.sum(X * np.log(np.maximum(Q, LOG_EPS)), axis=-1)
    if rule == "spherical":
        norm = np.sqrt(np.sum(Q**2, axis=-1))
        return np.sum(X * Q, axis=-1) / np.where(norm > 0, norm, 1.0)
    raise ValueError(f"scoring_rule must be one of {SCORING_RULES}, got {rule!r}")


def peer_scores(Q, P, rule: str = "brier", valid=None, *, forecast_valid=None) -> np.ndarray:
    """S_i = score(q_i, mean_{j != i} p_j) for every agent; shape P.shape[:-1].

    Agents with no (valid) peer score 0. With `valid`, an invalid agent (e.g. a commitment that could not
    be parsed) is left out of its peers' averages and gets the worst valid score of its row: it can
    never gain influence by failing. `forecast_valid` marks peer predictions q that parsed: an agent whose
    belief parsed but whose forecast did not (after the repair call) still counts in its peers' averages, and
    its own score is the worst score of the row among agents whose belief and forecast both parsed (the
    "worst forecast of the round" rule, docs/faults.md). With the lowest score of its row its weight after
    normalization cannot rise: w_i e^(eta S_i) / sum_j w_j e^(eta S_j) <= w_i when S_i <= S_j for every j.
    """
    P = np.asarray(P, dtype=float)
    X = peer_mean(P, valid)
    S = np.where(np.isnan(X).any(axis=-1), 0.0, score_forecast(Q, np.nan_to_num(X), rule))
    if valid is None and forecast_valid is None:
        return S
    scored = np.ones(S.shape, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
    if forecast_valid is not None:
        scored = scored & np.asarray(forecast_valid, dtype=bool)
    worst = np.where(scored, S, np.inf).min(axis=-1, keepdims=True)
    worst = np.where(np.isfinite(worst), worst, 0.0)
    return np.where(scored, S, worst)


def self_belief_scores(P) -> np.ndarray:
    """The 'self-belief only' ablation: an agent's score is its confidence in its own answer, max_y p_i(y)."""
    return np.asarray(P, dtype=float).max(axis=-1)


def round_scores(
    P, Q=None, weighting: str = "peer_prediction", rule: str = "brier", *, valid=None, forecast_valid=None
) -> np.ndarray:
    """Per-agent scores for the chosen weighting (the paper's full protocol and its two ablations);
    `forecast_valid`: see peer_scores."""
    P = np.asarray(P, dtype=float)
    if weighting == "peer_prediction":
        if Q is None:
            raise ValueError("weighting='peer_prediction' needs peer predictions q")
        return peer_scores(Q, P, rule, valid, forecast_valid=forecast_valid)
    if weighting == "self_belief":
        S = self_belief_scores(P)
        return S if valid is None else np.where(np.asarray(valid, dtype=bool), S, 0.0)
    if weighting == "uniform":
        return np.zeros(P.shape[:-1])
    raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


# ----------------------------------------------------------------------------- weights
def mwu_weights(S, eta: float = ETA) -> np.ndarray:
    """Multiplicative weights (Algorithm 1) for scores S of shape (..., T, N).

    Returns W of the same shape: W[..., t, :] are the normalized weights after round t+1, starting from
    uniform weights. w_i <- w_i * exp(eta * S_i) then normalize, computed in log space (a softmax of the
    cumulative score) so that large eta * T cannot overflow.
    """
    S = np.asarray(S, dtype=float)
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    logw = eta * np.cumsum(S, axis=-2)
    logw = logw - logw.max(axis=-1, keepdims=True)
    w = np.exp(logw)
    return w / w.sum(axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- aggregators
def tiebreak_keys(seed: int, ids: Sequence[str], k: int) -> np.ndarray:
    """Deterministic tie-break keys in [0, 1), shape (len(ids), k), from (seed, question id).

    Keys depend only on the seed and the id, never on batch order, so the engine and any later
    re-scoring break a tie the same way.
    """
    out = np.empty((len(ids), k))
    for r, qid in enumerate(ids):
        out[r] = _tiebreak_row(seed, qid, k)
    return out


# A seeded generator per question is most of the keys' time, and a notebook asks for the same questions' keys again
# and again (notebook 09 re-decides 37 runs over the same few question sets): each row is drawn once per process.
@functools.lru_cache(maxsize=1 << 16)
def _tiebreak_row(seed: int, qid: str, k: int) -> np.ndarray:
    h = hashlib.sha256(f"{seed}|{qid}".encode()).digest()
    row = np.random.default_rng(int.from_bytes(h[:8], "little")).random(k)
    row.flags.writeable = False
    return row


def agent_permutations(seed: int, ids: Sequence[str], movable, n_perm: int, *, salt: str = "shuffle") -> np.ndarray:
    """Deterministic permutations of the agent axis, shape (n_perm, len(ids), N), from (seed, question id, salt).

    perm[s, b, i] is the agent whose scores agent i receives in draw s of question b. `movable` (B, N) bool marks the
    agents that take part; the others keep their own index (e.g. an agent whose commitment failed). Like the
    tie-break keys, a question's permutations depend only on the seed, its id and the salt, never on batch order."""
    movable = np.asarray(movable, dtype=bool)
    out = np.broadcast_to(np.arange(movable.shape[-1]), (n_perm, *movable.shape)).copy()
    for b, qid in enumerate(ids):
        idx = np.flatnonzero(movable[b])
        out[:, b, idx] = idx[_permutation_ranks(seed, qid, salt, n_perm, len(idx))]
    return out


@functools.lru_cache(maxsize=1 << 15)
def _permutation_ranks(seed: int, qid: str, salt: str, n_perm: int, n: int) -> np.ndarray:
    """agent_permutations' draw for one question, (n_perm, n) positions among its n movable agents: drawn once per
    process, as the tie-break keys are (notebook 09 shuffles the same questions' agents at 37 map points)."""
    h = hashlib.sha256(f"{seed}|{qid}|{salt}".encode()).digest()
    ranks = np.argsort(np.random.default_rng(int.from_bytes(h[:8], "little")).random((n_perm, n)), axis=-1)
    ranks.flags.writeable = False
    return ranks


def argmax_tiebreak(scores, keys=None, tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """argmax over the last axis; exact ties (within tol) go to the tied option with the largest key.

    Returns (index, tied) where `tied` marks rows that had more than one maximum. Without keys, the first
    maximum wins (numpy's rule).
    """
    scores = np.asarray(scores, dtype=float)
    top = scores.max(axis=-1, keepdims=True)
    is_max = scores >= top - tol
    tied = is_max.sum(axis=-1) > 1
    if keys is None:
        return scores.argmax(axis=-1), tied
    keys = np.broadcast_to(np.asarray(keys, dtype=float), scores.shape)
    return np.where(is_max, keys, -1.0).argmax(axis=-1), tied


def weighted_scores(P, w, exponent: float = WEIGHT_EXPONENT) -> np.ndarray:
    """sum_i w_i^k p_i(y), shape P.shape[:-2] + (K,). The paper's final decision uses k = 2."""
    if exponent < 0:
        raise ValueError(f"weight_exponent must be >= 0, got {exponent}")
    w = np.asarray(w, dtype=float) ** exponent
    return np.einsum("...n,...nk->...k", w, np.asarray(P, dtype=float))


# ----------------------------------------------------------------------------- AceMAD's decision
def acemad_weights(
    P,
    Q=None,
    valid=None,
    eta: float = ETA,
    *,
    rule: str = "brier",
    weighting: str = "peer_prediction",
    forecast_valid=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1's per-round scores S and weights W, both (..., T, N), for commitments P, Q of (..., T, N, K).

    W[..., t-1, :] are the weights after round t and depend on rounds 1..t only: the weights of a t-round debate
    are a slice of a longer debate's, so re-scoring at T = t slices W instead of recomputing it."""
    S = round_scores(P, Q, weighting, rule, valid=valid, forecast_valid=forecast_valid)
    return S, mwu_weights(S, eta)


def weighted_decision(
    P, w, valid, exponent: float = WEIGHT_EXPONENT, *, keys=None, option_mask=None
) -> tuple[np.ndarray, np.ndarray]:
    """The decision of a round: argmax_y sum_i (w_i [valid_i])^exponent p_i(y), shape P.shape[:-2].

    P (..., N, K), w and valid (..., N): an agent whose commitment did not parse carries no belief, and a round
    where no commitment parsed has no answer (-1). Ties go to the largest key; `option_mask` (..., K) marks real
    options (padded ones never win). Returns (answer, tied). With w the MWU weights after the last round this is
    AceMAD's final answer (the engine and every re-scoring call it); with w = 1 and exponent 1 it is the mean
    belief of the agents that parsed."""
    valid = np.asarray(valid, dtype=bool)
    agg = weighted_scores(P, np.asarray(w, dtype=float) * valid, exponent)
    if option_mask is not None:
        agg = np.where(option_mask, agg, -np.inf)
    ans, tied = argmax_tiebreak(agg, keys)
    return np.where(valid.any(axis=-1), ans, -1), tied


def votes(P, valid=None) -> np.ndarray:
    """Each agent's answer (argmax of its belief); -1 where `valid` is False (e.g. a parse failure)."""
    P = np.asarray(P, dtype=float)
    v = P.argmax(axis=-1)
    if valid is not None:
        v = np.where(np.asarray(valid, dtype=bool), v, -1)
    return v


def vote_shares(v, k: int) -> np.ndarray:
    """Share of non-abstaining agents per option, shape v.shape[:-1] + (k,). All-abstain rows are all zero."""
    v = np.asarray(v)
    onehot = (v[..., None] == np.arange(k)).astype(float)
    counts = onehot.sum(axis=-2)
    n = counts.sum(axis=-1, keepdims=True)
    return counts / np.where(n > 0, n, 1.0)


def plurality(v, k: int, keys=None) -> np.ndarray:
    """Plurality vote over agents' answers `v` (-1 abstains); ties broken by keys. All-abstain -> -1."""
    shares = vote_shares(v, k)
    ans, _ = argmax_tiebreak(shares, keys)
    return np.where(shares.sum(axis=-1) > 0, ans, -1)


def _answering_mean(Q, v) -> np.ndarray:
    """Mean peer prediction over agents that answered (v >= 0); abstainers are left out of both sides."""
    w = (np.asarray(v) >= 0).astype(float)[..., None]
    n = w.sum(axis=-2)
    return (w * Q).sum(axis=-2) / np.where(n > 0, n, 1.0)


def surprisingly_popular(v, Q, keys=None, option_mask=None) -> np.ndarray:
    """Surprisingly Popular (Prelec et al. 2017): the answer whose actual vote share most exceeds
    its predicted share (mean peer prediction of the agents who answered). Q: (..., N, K).

    `option_mask` marks real options (default: options that got a vote or any predicted mass), so a
    zero-padded option can never win. Nobody answered -> -1.
    """
    Q = np.asarray(Q, dtype=float)
    k = Q.shape[-1]
    shares = vote_shares(v, k)
    if option_mask is None:
        option_mask = (shares > 0) | (Q.sum(axis=-2) > 0)
    gap = np.where(option_mask, shares - _answering_mean(Q, v), -np.inf)
    ans, _ = argmax_tiebreak(np.where(np.isfinite(gap), gap, -1e300), keys)
    return np.where(shares.sum(axis=-1) > 0, ans, -1)


def bts_scores(v, Q, alpha: float = 1.0) -> np.ndarray:
    """Bayesian Truth Serum scores (Prelec 2004) for every agent, shape v.shape.

    score_i = log(xbar_{a_i} / ybar_{a_i}) + alpha * sum_k xbar_k log(q_ik / xbar_k)
    with xbar the actual answer shares and ybar the geometric mean of the answering agents' predictions.
    Abstaining agents (v = -1) score NaN and do not enter xbar or ybar. Predictions are floored at LOG_EPS.
    """
    v = np.asarray(v)
    Q = np.maximum(np.asarray(Q, dtype=float), LOG_EPS)
    k = Q.shape[-1]
    xbar = vote_shares(v, k)  # (..., K)
    log_xbar = np.log(np.where(xbar > 0, xbar, 1.0))  # 0 where nobody chose k (those terms are dropped)
    info_k = np.where(xbar > 0, log_xbar - _answering_mean(np.log(Q), v), 0.0)  # log(xbar_k / ybar_k)
    pred = alpha * np.sum(xbar[..., None, :] * (np.log(Q) - log_xbar[..., None, :]), axis=-1)
    info = np.take_along_axis(info_k, np.where(v >= 0, v, 0), axis=-1)  # (..., N): info score of own answer
    return np.where(v >= 0, info + pred, np.nan)


def bts_answer(v, Q, alpha: float = 1.0, keys=None) -> np.ndarray:
    """The answer whose endorsers have the highest mean BTS score (-1 if nobody answered)."""
    v = np.asarray(v)
    k = np.asarray(Q).shape[-1]
    s = bts_scores(v, Q, alpha)
    onehot = (v[..., None] == np.arange(k)).astype(float)  # (..., N, K)
    tot = np.einsum("...n,...nk->...k", np.nan_to_num(s), onehot)
    cnt = onehot.sum(axis=-2)
    mean = np.where(cnt > 0, tot / np.where(cnt > 0, cnt, 1.0), -np.inf)
    ans, _ = argmax_tiebreak(np.where(np.isfinite(mean), mean, -1e300), keys)
    return np.where(cnt.sum(axis=-1) > 0, ans, -1)
