"""Every method of protocol.debate over a batch of debates of ONE config, advanced round by round as arrays.

    from acemad_utils.protocol.vectorized import run_batch
    recs = run_batch(questions, population, cfg, repeats)     # one record per (questions[d], repeats[d])

The per-question engine (protocol.debate.run_question) calls one Agent per turn; this one asks a *batched*
population (`population.batched` is True) for the commitments of a whole round of D debates at once, arrays of
shape (D debates, N agents, K options), and stores the records that run_question would store: the same schema,
built by the same functions (debate.debate_records, single_records, add_moderators; records.entry), so the scores,
weights and decisions are Algorithm 1's one implementation (protocol.beliefs) over a leading batch axis.

What a batched population implements (agents.sim_vector is the synthetic one):
    population.batch_agents(specs, questions, repeats) -> agents   (all questions with K options; agents.specs)
    population.batch_moderator(questions, repeats) -> agents        (Centralized MAD's moderator: N = 1)
    agents.act(t, seen, want_q) -> (P, Q)    round t's commitments, P and Q (D, N, K); Q None unless want_q
    agents.messages(P) -> [[str] * N] * D   the argument texts of a round
`seen` (D, N, K) is what each agent read: the mean stance (committed belief) of the peers its topology shows it in
the previous round (the moderator: this round's debaters), NaN where it saw none (round 1). That is all a
synthetic agent reads of the history (agents.sim), whatever the history policy; an LLM agent reads the text and
is not batched. A batched population makes no model call: records carry zero usage and no parse failure.

Topologies (debate.py): decentralized and AceMAD a full mesh, sparse a ring (debate.ring), centralized a star
whose moderator reads the debaters' round and every debater reads the moderator's previous summary.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from acemad_utils.protocol import records as R
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import add_moderators, debate_records, ring, single_draw, single_records
from acemad_utils.protocol.schema import AgentSpec, Population, Question, zero_usage


def run_batch(
    questions: Sequence[Question], population: Population, cfg: DebateConfig, repeats: Sequence[int]
) -> list[dict]:
    """The records of cfg on (questions[d], repeats[d]) for every d, in that order. Questions may have different
    option counts: each count is one batch of arrays."""
    if len(questions) != len(repeats):
        raise ValueError(f"run_batch: {len(questions)} questions but {len(repeats)} repeats; need one per question")
    if not getattr(population, "batched", False):
        raise TypeError(f"run_batch: population {population.name!r} is not batched (no batch_agents); use run_question")
    out: list[dict] = [{}] * len(questions)
    by_k: dict[int, list[int]] = {}
    for d, q in enumerate(questions):
        by_k.setdefault(len(q.options), []).append(d)
    run = _METHODS[cfg.method]
    for idx in by_k.values():
        for d, rec in zip(idx, run([questions[d] for d in idx], population, cfg, [repeats[d] for d in idx])):
            out[d] = rec
    return out


def _entries(specs: Sequence[AgentSpec], agents: Sequence[int], texts, P, Q) -> list[list[list[dict]]]:
    """Stored entries (records.entry) per debate, per round, per agent, from texts [D][T][N] and P, Q (D, T, N, K)
    (Q may be None): beliefs rounded in one call (records.stored)."""
    heads = [{**R.entry_head(spec, a), "parse_failure": False} for spec, a in zip(specs, agents)]
    ps = R.stored(P)
    qs = R.stored(Q) if Q is not None else [[[None] * len(heads)] * len(ps[0])] * len(ps)
    return [
        [
            [{**h, "message": m, "p": p, "q": q} for h, m, p, q in zip(heads, texts_t, ps_t, qs_t)]
            for texts_t, ps_t, qs_t in zip(texts_d, ps_d, qs_d)
        ]
        for texts_d, ps_d, qs_d in zip(texts, ps, qs)
    ]


def _zero_usages(n: int) -> list[dict]:
    return [zero_usage() for _ in range(n)]


def _single(questions, population, cfg: DebateConfig, repeats) -> list[dict]:
    """Single Agent: single_runs independent one-agent runs per record, each with its own draw index."""
    spec, runs = cfg.specs()[0], cfg.single_runs
    draws = [single_draw(cfg, rep, r) for rep in repeats for r in range(runs)]
    qs = [q for q in questions for _ in range(runs)]
    agents = population.batch_agents([spec], qs, draws)
    P, _ = agents.act(1, _nothing_seen(len(qs), 1, _k(questions)), False)
    texts = agents.messages(P)
    D, K = len(questions), P.shape[-1]
    P = P.reshape(D, runs, K)
    flat = _entries(
        [spec], [0], [[[texts[d * runs + r][0]] for r in range(runs)] for d in range(D)], P[..., None, :], None
    )
    kept = [[e for rnd in per for e in rnd] for per in flat]  # per record: its runs
    valid = np.ones((D, runs), dtype=bool)
    return single_records(questions, cfg, population, repeats, kept, P, valid, _zero_usages(D))


def _k(questions) -> int:
    return len(questions[0].options)


def _nothing_seen(d: int, n: int, k: int) -> np.ndarray:
    return np.full((d, n, k), np.nan)


def _majority(questions, population, cfg: DebateConfig, repeats) -> list[dict]:
    specs = cfg.specs()
    agents = population.batch_agents(specs, questions, [r + cfg.repeat_offset for r in repeats])
    P, _ = agents.act(1, _nothing_seen(len(questions), len(specs), _k(questions)), False)
    texts = [[m] for m in agents.messages(P)]
    kept = _entries(specs, range(len(specs)), texts, P[:, None], None)
    valid = np.ones(P.shape[:2], dtype=bool)[:, None]
    return debate_records(questions, cfg, population, repeats, kept, P[:, None], None, valid, _zero_usages(len(P)))


def visibility(cfg: DebateConfig) -> np.ndarray:
    """V (N, N): V[i, j] when agent i reads agent j's previous stance (never itself: a synthetic agent moves
    toward its peers). Full mesh, or the ring of sparse MAD (debate.ring)."""
    n = cfg.n_agents
    if cfg.method == "sparse":
        V = np.array([[j in ring(i, n) for j in range(n)] for i in range(n)])
    else:
        V = np.ones((n, n), dtype=bool)
    return V & ~np.eye(n, dtype=bool)


def _seen(V: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Mean of the stances prev (D, N, K) each agent reads through V; NaN rows for an agent that reads none.
    A masked sum over peers in agent order: the sum the per-agent path takes over its visible messages."""
    count = V.sum(axis=1)
    total = (V[None, :, :, None] * prev[:, None, :, :]).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count[None, :, None] > 0, total / count[None, :, None], np.nan)


def _debate(questions, population, cfg: DebateConfig, repeats) -> list[dict]:
    """Decentralized, Sparse and AceMAD: T synchronous rounds over a fixed topology."""
    specs = cfg.specs()
    D, N, K = len(questions), len(specs), _k(questions)
    agents = population.batch_agents(specs, questions, [r + cfg.repeat_offset for r in repeats])
    acemad, V = cfg.method == "acemad", visibility(cfg)
    Ps, Qs, texts = [], [], []
    seen = _nothing_seen(D, N, K)
    for t in range(1, cfg.rounds + 1):
        P, Q = agents.act(t, seen, acemad)
        Ps.append(P)
        Qs.append(Q)
        texts.append(agents.messages(P))
        seen = _seen(V, P)
    P = np.stack(Ps, axis=1)
    Q = np.stack(Qs, axis=1) if acemad else None
    kept = _entries(specs, range(N), [[texts[t][d] for t in range(cfg.rounds)] for d in range(D)], P, Q)
    valid = np.ones(P.shape[:3], dtype=bool)
    return debate_records(questions, cfg, population, repeats, kept, P, Q, valid, _zero_usages(D))


def _centralized(questions, population, cfg: DebateConfig, repeats) -> list[dict]:
    """A star: the moderator reads the debaters' round and broadcasts a summary each debater reads next round."""
    specs = cfg.specs()
    D, N, K = len(questions), len(specs), _k(questions)
    draws = [r + cfg.repeat_offset for r in repeats]
    agents = population.batch_agents(specs, questions, draws)
    moderator = population.batch_moderator(questions, draws)
    Ps, Pms, texts, mtexts = [], [], [], []
    seen = _nothing_seen(D, N, K)
    for t in range(1, cfg.rounds + 1):
        P, _ = agents.act(t, seen, False)
        Pm, _ = moderator.act(t, P.mean(axis=1, keepdims=True), False)
        Ps.append(P)
        Pms.append(Pm)
        texts.append(agents.messages(P))
        mtexts.append(moderator.messages(Pm))
        seen = np.broadcast_to(Pm, (D, N, K))
    P, Pm = np.stack(Ps, axis=1), np.stack(Pms, axis=1)  # (D, T, N, K), (D, T, 1, K)
    kept = _entries(specs, range(N), [[texts[t][d] for t in range(cfg.rounds)] for d in range(D)], P, None)
    mods = _entries(moderator.specs, [-1], [[mtexts[t][d] for t in range(cfg.rounds)] for d in range(D)], Pm, None)
    valid = np.ones(P.shape[:3], dtype=bool)
    recs = debate_records(questions, cfg, population, repeats, kept, P, None, valid, _zero_usages(D))
    add_moderators(recs, questions, cfg, [[m[0] for m in per] for per in mods], Pm[:, :, 0], valid[:, :, 0])
    return recs


_METHODS = {
    "single": _single,
    "majority": _majority,
    "self_consistency": _majority,
    "decentralized": _debate,
    "sparse": _debate,
    "acemad": _debate,
    "centralized": _centralized,
}
