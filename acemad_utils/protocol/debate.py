"""Algorithm 1 of the paper (acemad_paper.tex l.563-585) and its baselines on one page: the math, the round loop, the
records. One engine: D debates advance round by round as arrays (D, N agents, K options); run_question is a batch of
one. Decisions are pure functions of the stored p and q, so report.rescoring re-decides a record without a model call.
Methods (Appendix "Baselines", l.636-645): single (`single_runs` runs, l.210; `correct` is their mean); majority
(plurality of N first answers, l.645) and self_consistency (N x T naive samples, arXiv 2502.08788); decentralized
(full mesh), sparse (ring), centralized (a moderator's star), decided by the debaters' mean final belief (l.617);
acemad: full mesh + private commitments (p, q) scored and weighted each round.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from acemad_utils.protocol import records as R
from acemad_utils.protocol.config import ETA, SCORING_RULES, WEIGHT_EXPONENT, WEIGHTINGS, DebateConfig
from acemad_utils.protocol.schema import Commits, Message, Population, Question, add_usage, zero_usage

LOG_EPS = 1e-6  # floor of the log score: a zero forecast of a realized answer costs log(1e-6) ~ -13.8
VOTES = ("majority", "self_consistency")  # decided by the plurality of independent first answers (no debate)
#: How a peer prediction that did not parse is scored (stored beside the count; docs/faults.md).
FAILED_FORECAST_RULE = "the worst score of its round (its weight cannot rise)"


# ----------------------------------------------------------------------------- Algorithm 1: the score (l.577-578)
# Arrays are (..., N, K) for beliefs and (..., N) for per-agent scores and weights; any leading axes (debate, round).
def peer_mean(P, valid=None) -> np.ndarray:
    """l.577: mean_{j != i} p_j over the (valid) peers; NaN: none."""
    P = np.asarray(P, dtype=float)
    v = np.ones(P.shape[:-1]) if valid is None else np.asarray(valid, dtype=float)
    total = (v[..., None] * P).sum(axis=-2, keepdims=True) - v[..., None] * P
    count = v.sum(axis=-1)[..., None, None] - v[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)


def score_forecast(Q, X, rule: str = "brier") -> np.ndarray:
    """l.578: S = 1 - ||q - x||^2 (brier); our proper ablations: log sum_k x_k log q_k, spherical x.q / ||q||."""
    Q, X = np.asarray(Q, dtype=float), np.asarray(X, dtype=float)
    if rule == "brier":
        return 1.0 - np.sum((Q - X) ** 2, axis=-1)
    if rule == "log":
        return np.sum(X * np.log(np.maximum(Q, LOG_EPS)), axis=-1)
    if rule == "spherical":
        norm = np.sqrt(np.sum(Q**2, axis=-1))
        return np.sum(X * Q, axis=-1) / np.where(norm > 0, norm, 1.0)
    raise ValueError(f"scoring_rule must be one of {SCORING_RULES}, got {rule!r}")


def peer_scores(Q, P, rule: str = "brier", valid=None, *, forecast_valid=None) -> np.ndarray:
    """S_i = score(q_i, mean_{j != i} p_j), 0 without a peer. A belief or forecast that did not parse gets its row's
    worst score, so its weight cannot rise (failing never pays); an invalid belief leaves its peers' means."""
    X = peer_mean(P, valid)
    S = np.where(np.isnan(X).any(axis=-1), 0.0, score_forecast(Q, np.nan_to_num(X), rule))
    scored = np.ones(S.shape, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
    if forecast_valid is not None:
        scored = scored & np.asarray(forecast_valid, dtype=bool)
    worst = np.where(scored, S, np.inf).min(axis=-1, keepdims=True)
    return np.where(scored, S, np.where(np.isfinite(worst), worst, 0.0))


def round_scores(P, Q=None, weighting="peer_prediction", rule="brier", *, valid=None, forecast_valid=None):
    """Per-agent scores of the protocol or the paper's ablations: 'self_belief' (max_y p_i(y)), 'uniform' (0)."""
    P = np.asarray(P, dtype=float)
    if weighting == "peer_prediction":
        if Q is None:
            raise ValueError("weighting='peer_prediction' needs peer predictions q")
        return peer_scores(Q, P, rule, valid, forecast_valid=forecast_valid)
    if weighting == "self_belief":
        S = P.max(axis=-1)
        return S if valid is None else np.where(np.asarray(valid, dtype=bool), S, 0.0)
    if weighting == "uniform":
        return np.zeros(P.shape[:-1])
    raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


# ----------------------------------------------------------------------------- the weights (l.568, l.579-581)
def mwu_weights(S, eta: float = ETA) -> np.ndarray:
    """W (..., T, N) after each round: w_i = 1 (l.568), w_i <- w_i exp(eta S_i) (l.579), normalised (l.581), as a
    softmax of eta * cumulative score (no overflow at any eta * T; a t-round debate's weights are a prefix)."""
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    logw = eta * np.cumsum(np.asarray(S, dtype=float), axis=-2)
    w = np.exp(logw - logw.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def acemad_weights(P, Q=None, valid=None, eta: float = ETA, *, rule="brier", weighting="peer_prediction",
                   forecast_valid=None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Algorithm 1's scores S and weights W, both (..., T, N), for commitments P, Q (..., T, N, K)."""
    S = round_scores(P, Q, weighting, rule, valid=valid, forecast_valid=forecast_valid)
    return S, mwu_weights(S, eta)


# ----------------------------------------------------------------------------- the decision (l.583)
def weighted_scores(P, w, exponent: float = WEIGHT_EXPONENT) -> np.ndarray:
    """sum_i w_i^k p_i(y) (..., K); the paper decides with k = 2."""
    if exponent < 0:
        raise ValueError(f"weight_exponent must be >= 0, got {exponent}")
    return np.einsum("...n,...nk->...k", np.asarray(w, dtype=float) ** exponent, np.asarray(P, dtype=float))


def tiebreak_keys(seed: int, ids: Sequence[str], k: int) -> np.ndarray:
    """Keys in [0, 1) (len(ids), k) from (seed, question id) only: the engine and a re-scoring break a tie alike."""
    return np.stack([_tiebreak_row(seed, qid, k) for qid in ids]) if len(ids) else np.empty((0, k))


@functools.lru_cache(maxsize=1 << 16)  # a seeded generator per question is most of a decision's time
def _tiebreak_row(seed: int, qid: str, k: int) -> np.ndarray:
    h = hashlib.sha256(f"{seed}|{qid}".encode()).digest()
    row = np.random.default_rng(int.from_bytes(h[:8], "little")).random(k)
    row.flags.writeable = False
    return row


def argmax_tiebreak(scores, keys=None, tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """(argmax, tied) over the last axis: a tie (within tol) goes to the largest key (no keys: the first)."""
    scores = np.asarray(scores, dtype=float)
    is_max = scores >= scores.max(axis=-1, keepdims=True) - tol
    tied = is_max.sum(axis=-1) > 1
    if keys is None:
        return scores.argmax(axis=-1), tied
    keys = np.broadcast_to(np.asarray(keys, dtype=float), scores.shape)
    return np.where(is_max, keys, -1.0).argmax(axis=-1), tied


def weighted_decision(P, w, valid, exponent: float = WEIGHT_EXPONENT, *, keys=None, option_mask=None):
    """l.583: (answer, tied) = argmax_y sum_i (w_i [valid_i])^k p_i(y); -1 when none parsed; `option_mask` marks real
    options. With w = 1, k = 1 it is the baseline MADs' mean belief."""
    valid = np.asarray(valid, dtype=bool)
    agg = weighted_scores(P, np.asarray(w, dtype=float) * valid, exponent)
    ans, tied = argmax_tiebreak(agg if option_mask is None else np.where(option_mask, agg, -np.inf), keys)
    return np.where(valid.any(axis=-1), ans, -1), tied


# ----------------------------------------------------------------------------- the baselines' votes
def votes(P, valid=None) -> np.ndarray:
    """Each agent's answer (argmax of its belief); -1 where `valid` is False."""
    v = np.asarray(P, dtype=float).argmax(axis=-1)
    return v if valid is None else np.where(np.asarray(valid, dtype=bool), v, -1)


def vote_shares(v, k: int) -> np.ndarray:
    """Share of the non-abstaining agents per option (..., k); all-abstain rows are zero."""
    counts = (np.asarray(v)[..., None] == np.arange(k)).sum(axis=-2).astype(float)
    n = counts.sum(axis=-1, keepdims=True)
    return counts / np.where(n > 0, n, 1.0)


def plurality(v, k: int, keys=None) -> np.ndarray:
    """Plurality of the answers `v` (-1 abstains), ties by keys; -1 when everyone abstained."""
    shares = vote_shares(v, k)
    return np.where(shares.sum(axis=-1) > 0, argmax_tiebreak(shares, keys)[0], -1)


# ----------------------------------------------------------------------------- topology
def visibility(n: int, sparse: bool) -> np.ndarray:
    """V (N, N): V[i, j] when agent i reads agent j's last stance: a full mesh or Sparse MAD's ring; never itself."""
    gap = np.subtract.outer(np.arange(n), np.arange(n)) % n
    return (gap != 0) & (not sparse or (gap == 1) | (gap == n - 1))


def visible(history: Sequence[Sequence[Message]], agent: int, neighbours: set, policy: str):
    """The messages `agent` reads from `neighbours`: all rounds ('full', the paper), the last ('last_round') or its
    peers' last ('peers_last')."""
    rounds = history if policy == "full" else history[-1:]
    skip = agent if policy == "peers_last" else None
    return tuple(m for msgs in rounds for m in msgs if m.agent in neighbours and m.agent != skip)


# ----------------------------------------------------------------------------- the round loop (l.569-581)
def run_question(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    return run_batch([q], population, cfg, [repeat])[0]


def run_batch(questions: Sequence[Question], population: Population, cfg: DebateConfig, repeats) -> list[dict]:
    """The records of cfg on (questions[d], repeats[d]) for every d, in that order."""
    by_index = {d: rec for b in debate(questions, population, cfg, repeats) for d, rec in zip(b.index, b.records())}
    return [by_index[d] for d in range(len(questions))]


def debate(questions: Sequence[Question], population: Population, cfg: DebateConfig, repeats) -> list[Debates]:
    """cfg on (questions[d], repeats[d]) as arrays, one Debates per option count (`index`: its positions)."""
    if len(questions) != len(repeats):
        raise ValueError(f"debate: {len(questions)} questions but {len(repeats)} repeats; need one per question")
    by_k: dict[int, list[int]] = {}
    for d, q in enumerate(questions):
        by_k.setdefault(len(q.options), []).append(d)
    run = _single if cfg.method == "single" else _debate
    return [run(idx, [questions[d] for d in idx], population, cfg, [repeats[d] for d in idx]) for idx in by_k.values()]


def _debate(index, questions, population, cfg: DebateConfig, repeats) -> Debates:
    """Every method but the single agent: T synchronous rounds (one for a vote) over the method's topology."""
    specs, D, K = cfg.specs(), len(questions), len(questions[0].options)
    n, star, acemad = len(specs), cfg.method == "centralized", cfg.method == "acemad"
    draws = [r + cfg.repeat_offset for r in repeats]
    agents = population.batch_agents(specs, questions, draws, "debater")
    mod = population.batch_agents([], questions, draws, "moderator") if star else None
    V, seen = visibility(n, cfg.method == "sparse"), np.full((D, n, K), np.nan)  # seen: the mean stance read
    near = {i: {i, -1} if star else {i, *np.flatnonzero(V[i]).tolist()} for i in range(n)}  # whose messages i reads
    rounds: list[Commits] = []
    mods: list[Commits] = []

    def said(d: int, s: int) -> list[Message]:  # round s's messages of debate d, the moderator's last
        out = [Message(j, s, x) for j, x in enumerate(rounds[s - 1].texts[d])]
        return out + [Message(-1, s, mods[s - 1].texts[d][0])] if s <= len(mods) else out

    def earlier(d: int, t: int) -> list[list[Message]]:  # debate d's messages before round t, oldest first
        return [said(d, s) for s in range(1, t)]

    mod_policy = "full" if cfg.history == "full" else "last_round"  # the moderator also reads its own summaries
    T = 1 if cfg.method in VOTES else cfg.rounds
    for t in range(1, T + 1):
        # l.571-575: each agent argues from the history it may read, then privately commits p (and, AceMAD, q).
        # A synthetic agent reads only `seen`, the mean stance.
        c = agents.act(t, seen, lambda d, i, t=t: visible(earlier(d, t), i, near[i], cfg.history), acemad)
        rounds.append(c)
        if mod is not None:  # a star: the moderator reads this round's arguments and broadcasts a summary
            m = mod.act(t, c.P.mean(axis=1, keepdims=True),
                        lambda d, _, t=t: visible(earlier(d, t), -1, {-1}, mod_policy) + tuple(said(d, t)),
                        False)  # fmt: skip
            mods.append(m)
            seen = np.broadcast_to(m.P, (D, n, K))
        elif t < T:  # the mean of the stances each agent reads through V (NaN: none)
            with np.errstate(invalid="ignore", divide="ignore"):
                seen = (V[None, :, :, None] * c.P[:, None]).sum(axis=2) / V.sum(axis=1)[None, :, None]
    P, ok, q_ok, texts, usage = _stack(rounds, D, n)
    Q = np.stack([c.Q for c in rounds], axis=1) if acemad else None  # type: ignore[misc]
    keys, truth = tiebreak_keys(cfg.seed, [q.id for q in questions], K), _truth(questions)
    out = _decisions(P, Q, ok, q_ok, cfg, keys)
    out["held"] = (votes(P, ok) == truth[:, None, None]).any(axis=(1, 2))
    if mod is not None:  # Centralized MAD: the moderator's final summary decides `moderator` (l.643 when configured so)
        Pm, mok, _, mtexts, musage = _stack(mods, D, 1)
        top, tied = argmax_tiebreak(Pm[:, -1, 0], keys)
        out["decisions"]["moderator"] = (np.where(mok[:, -1, 0], top, -1), tied)
        out["held"] |= (votes(Pm, mok) == truth[:, None, None]).any(axis=(1, 2))
        out["mod"] = Debates(
            [], questions, cfg, population, repeats, mod.specs, Pm, None, mok, None, mtexts, musage, {}
        )
    return Debates(index, questions, cfg, population, repeats, specs, P, Q, ok, q_ok, texts, usage, **out)


def _stack(rounds: Sequence[Commits], D: int, n: int):
    """P (D, T, N, K), ok and q_ok (D, T, N), texts [D][T][N], usage [D][T][N] or None, from per-round Commits."""
    P = np.stack([c.P for c in rounds], axis=1)
    ok = np.stack([np.ones((D, n), bool) if c.ok is None else c.ok for c in rounds], axis=1)
    q_ok = np.stack([np.ones((D, n), bool) if c.q_ok is None else c.q_ok for c in rounds], axis=1)
    texts = [[c.texts[d] for c in rounds] for d in range(D)]
    usage = None if rounds[0].usage is None else [[c.usage[d] for c in rounds] for d in range(D)]  # type: ignore
    return P, ok, q_ok, texts, usage


def _single(index, questions, population, cfg: DebateConfig, repeats) -> Debates:
    """single_runs independent one-agent runs per debate (its arrays' T axis), each its own draw."""
    spec, runs, D, K = cfg.specs()[0], cfg.single_runs, len(questions), len(questions[0].options)
    draws = [cfg.repeat_offset + rep * runs + r for rep in repeats for r in range(runs)]
    qs = [q for q in questions for _ in range(runs)]
    c = population.batch_agents([spec], qs, draws, "solo").act(
        1, np.full((len(qs), 1, K), np.nan), lambda *_: (), False
    )
    P, ok, _, texts, usage = _stack([c], len(qs), 1)
    regroup = lambda x: [[x[d * runs + r][0] for r in range(runs)] for d in range(D)]  # [D * runs][1] -> [D][runs]
    P, ok = P.reshape(D, runs, 1, K), ok.reshape(D, runs, 1)
    ans = np.where(ok[..., 0], P[:, :, 0].argmax(axis=-1), -1)
    held = (ans == _truth(questions)[:, None]).any(axis=1)
    usage = None if usage is None else regroup(usage)
    return Debates(index, questions, cfg, population, repeats, [spec], P, None, ok, None, regroup(texts), usage,
                   {"runs": (ans, np.zeros(ans.shape, bool))}, held=held)  # fmt: skip


def _decisions(P, Q, ok, q_ok, cfg: DebateConfig, keys) -> dict:
    """{"decisions": {rule: (answer, tied)}} and, AceMAD, its "S"cores and "W"eights (D, T, N)."""
    K, t = P.shape[-1], 0 if cfg.method in VOTES else -1  # a vote decides by the first answers (l.645)
    if cfg.method == "acemad":  # l.577-583; a q that did not parse scores the round's worst (peer_scores)
        Qs = np.where(np.isnan(Q), 1.0 / K, Q)
        S, W = acemad_weights(P, Qs, ok, cfg.eta, rule=cfg.scoring_rule, weighting=cfg.weighting, forecast_valid=q_ok)
        return {"S": S, "W": W, "decisions": {"acemad": weighted_decision(P[:, -1], W[:, -1], ok[:, -1],
                                                                          cfg.weight_exponent, keys=keys)}}  # fmt: skip
    shares = vote_shares(votes(P[:, t], ok[:, t]), K)
    rules = {"majority": shares} if t == 0 else {"mean_belief": weighted_scores(P[:, t], ok[:, t] * 1.0, 1.0),
                                                 "plurality": shares}  # fmt: skip
    decided = {r: argmax_tiebreak(a, keys) for r, a in rules.items()}
    return {"decisions": {r: (np.where(ok[:, t].any(axis=-1), a, -1), tied) for r, (a, tied) in decided.items()}}


def _truth(questions) -> np.ndarray:
    """Gold answer indices; -1 (matches no vote) for a question without one."""
    return np.array([-1 if q.answer is None else q.answer_index for q in questions])


# ----------------------------------------------------------------------------- the records
@dataclass
class Debates:
    """D debates of one config as arrays: P, Q (D, T, N, K) (Q: AceMAD only; single: T = runs), ok, q_ok, S, W
    (D, T, N), texts and usage [D][T][N], decisions {rule: (answer, tied)}, held (D,): some agent was right."""

    index: list
    questions: list
    cfg: DebateConfig
    population: Population
    repeats: list
    specs: list
    P: np.ndarray
    Q: Optional[np.ndarray]
    ok: np.ndarray
    q_ok: Optional[np.ndarray]
    texts: list
    usage: Optional[list]
    decisions: dict
    S: Optional[np.ndarray] = None
    W: Optional[np.ndarray] = None
    held: Optional[np.ndarray] = None
    mod: Optional[Debates] = None  # Centralized MAD's moderator

    @property
    def rule(self) -> str:
        """The decision that is the final answer: the method's own, or a baseline MAD's configured aggregator."""
        if self.cfg.method in ("single", *VOTES, "acemad"):
            return next(iter(self.decisions))
        return self.cfg.mad_aggregator if self.cfg.mad_aggregator in self.decisions else "mean_belief"

    def correct(self) -> np.ndarray:
        """(D,): 1.0 / 0.0 whether the final answer is right (single: the share of its runs); NaN: no gold answer."""
        truth, ans = _truth(self.questions), self.decisions[self.rule][0]
        right = (ans == truth[:, None]).mean(axis=-1) if ans.ndim == 2 else (ans == truth).astype(float)
        return np.where(truth < 0, np.nan, right)

    def entries(self, agents, **scored) -> list:
        return R.entries(self.specs, agents, self.texts, self.P, self.Q, self.ok, self.q_ok, self.usage, **scored)

    def records(self) -> list[dict]:
        """The records a run writes (protocol.records' layout), in the order of `questions`."""
        kept = self.entries(range(self.P.shape[2]), S=self.S, W=self.W)
        mods = None if self.mod is None else self.mod.entries([-1])
        rule, method = self.rule, self.cfg.method
        correct, held = self.correct().tolist(), self.held.tolist()  # type: ignore[union-attr]
        failed = (~self.q_ok).sum(axis=(1, 2)).tolist() if method == "acemad" and self.q_ok is not None else None
        decided = {r: (a.tolist(), t.tolist()) for r, (a, t) in self.decisions.items()}
        recs = []
        for d, q in enumerate(self.questions):
            rec = R.base_record(q, self.cfg, self.population, self.repeats[d])
            rec["usage"] = zero_usage() if self.usage is None else _usage_sum(self.usage[d])
            oracle = None if q.answer is None else held[d]
            if method == "single":  # the single agent's score is a mean over runs, not one answer
                rec["runs"] = [dict(r[0], answer=R.answer_label(q, a), correct=q.correct(a)) for r, a in
                               zip(kept[d], decided["runs"][0][d])]  # fmt: skip
                rec["final"] = {"answer": None, "correct": None if q.answer is None else correct[d],
                                "oracle_any_agent_correct": oracle, "tie": False}  # fmt: skip
            else:
                by_rule = {r: R.decision(q, a[d], t[d]) for r, (a, t) in decided.items()}
                if method not in (*VOTES, "acemad"):  # a baseline MAD keeps every rule
                    rec["decisions"] = by_rule
                rec["rounds"] = kept[d]
                if failed and failed[d]:  # only when it happened
                    rec["unparsed_forecasts"] = {"count": failed[d], "scored_as": FAILED_FORECAST_RULE}
                rec["final"] = dict(by_rule[rule], oracle_any_agent_correct=oracle)
            if mods is not None:
                rec["moderator"] = [dict(r[0], round=t + 1) for t, r in enumerate(mods[d])]
                add_usage(rec["usage"], _usage_sum(None if self.mod.usage is None else self.mod.usage[d]))  # type: ignore
            recs.append(rec)
        return recs


def _usage_sum(turns) -> dict:
    return functools.reduce(add_usage, [u for r in turns or [] for u in r], zero_usage())
