"""Every method of the paper, written once against the `Agent` interface.

    from acemad_utils.protocol.config import DebateConfig
    from acemad_utils.protocol.debate import run_question
    from acemad_utils.agents.sim import SimPopulation, make_items
    q = make_items(1, seed=0)[0]
    rec = run_question(q, SimPopulation(), DebateConfig(method="acemad"))
    rec["final"]      # {'answer': 'C', 'correct': True, 'oracle_any_agent_correct': True, 'tie': False}

A protocol only moves agent states: it decides who sees which messages (topology + history policy),
has the population run every agent of a round (`Population.act_all`: agents/pool.py's threads for an LLM
population), and stores what they said. Scoring, weights and the final decision are the pure functions of
`beliefs`, applied to the stored p and q, so any record can be re-scored later with another rule without
calling a model.

Methods (paper Appendix "Baselines"; all MADs at T rounds; line numbers of acemad_paper.tex):
- single:        one agent, `single_runs` independent runs (l.210), each with its own repeat index and so its
                 own cache scope and sample; the record's `correct` is their mean accuracy.
- majority:      N independent agents answer once; plurality of their initial answers (l.617, l.645).
- decentralized: full mesh (Du et al.): every agent sees every agent's earlier arguments.
- sparse:        ring: agent i sees itself and agents i-1, i+1 (with N <= 3 that is everyone: a full mesh).
- centralized:   star: agents see their own arguments and the moderator's summaries; the moderator reads
                 all arguments each round and broadcasts a summary. Decided like every MAD, by the mean final
                 belief of the debaters (l.617); the moderator's final answer (l.643) is the
                 mad_aggregator="moderator" option. Both are stored in the record's `decisions`.
- acemad:        full mesh + private commitments (p, q), per-round scores and multiplicative weights;
                 answer argmax_y sum_i w_i^k p_i(y) (Algorithm 1).
Baseline MAD records carry `decisions`: {rule: {answer, correct, tie}} for every rule of
config.MAD_AGGREGATORS that applies, so a re-score can switch rules without a model call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.schema import Message, Population, Question, Step, Turn, add_usage, zero_usage

SCHEMA_VERSION = 1


# ----------------------------------------------------------------------------- helpers
def visible(
    history: Sequence[Sequence[Message]], agent: int, neighbours: Optional[set], policy: str
) -> tuple[Message, ...]:
    """Messages `agent` may see: from agents in `neighbours` (None = everyone), filtered by history policy."""
    if not history:
        return ()
    rounds = history if policy == "full" else history[-1:]
    out = []
    for msgs in rounds:
        for m in msgs:
            if neighbours is not None and m.agent not in neighbours:
                continue
            if policy == "peers_last" and m.agent == agent:
                continue
            out.append(m)
    return tuple(out)


def ring(i: int, n: int) -> set:
    """Sparse MAD's neighbourhood: the agent itself and its two ring neighbours."""
    return {i, (i - 1) % n, (i + 1) % n}


def _usage_sum(steps) -> dict:
    tot = zero_usage()
    for s in steps:
        add_usage(tot, s.usage)
    return tot


# Significant digits of the beliefs, scores and weights a record stores. Why not all 17: they are most of a
# record's bytes and no table needs them. Tables print 4 decimals; a stored value differs from the computed one
# by < 5e-11 relative (a stored distribution still sums to 1 within 1e-9), and the default profile's tables
# are byte-identical either way (bench/README.md).
STORED_DIGITS = 10


def stored(x) -> list:
    """Values rounded to STORED_DIGITS significant digits (vectorized), as a JSON-able list of floats.
    An exact tie stays an exact tie; 0 stays 0."""
    a = np.asarray(x, dtype=float)
    mag = np.floor(np.log10(np.abs(np.where(a == 0, 1.0, a))))  # nan, inf: no warning, not ok below
    ok = (mag > -280) & (mag < 15)  # beyond: kept whole (the scale would not be an exact power of ten)
    scale = 10.0 ** np.where(ok, STORED_DIGITS - 1 - mag, 0)
    # an integer-valued double divided by an exact power of ten is the double nearest the short decimal, so
    # json writes the short form; nan and inf are kept as they are (json writes NaN, Infinity)
    return np.where(ok, np.round(a * scale) / scale, a).tolist()


def _entry(step: Step, agent: int, spec, p: list, q: Optional[list]) -> dict:
    e = {
        "agent": agent,
        "persona": spec.persona,
        "temperature": spec.temperature,
        "thinking": spec.thinking,
        "model": spec.model,
        "message": step.message,
        "p": p,
        "q": q,
        "parse_failure": bool(step.parse_failure),
    }
    if any(step.usage.values()):  # a turn that made no call (synthetic agents) stores no usage block
        e["usage"] = dict(step.usage)
    return e


def _entries(steps: Sequence[Step], specs: Sequence, agents: Sequence[int]) -> list[dict]:
    """The stored entries of steps that share a question (so a length of p): beliefs rounded in one call."""
    ps = stored(np.stack([s.p for s in steps]))
    qs_given = [s.q for s in steps]
    if all(q is not None for q in qs_given):
        qs = stored(np.stack([q for q in qs_given if q is not None]))
    else:
        qs = [None if q is None else stored(q) for q in qs_given]
    return [_entry(s, a, spec, p, q) for s, a, spec, p, q in zip(steps, agents, specs, ps, qs)]


def _label(q: Question, idx: int) -> Optional[str]:
    return None if idx < 0 else q.labels[idx]


def _keys(q: Question, cfg: DebateConfig) -> np.ndarray:
    return B.tiebreak_keys(cfg.seed, [q.id], len(q.options))[0]


def base_record(q: Question, cfg: DebateConfig, population: Population, repeat: int) -> dict:
    return {
        "schema": SCHEMA_VERSION,
        "question_id": q.id,
        "benchmark": q.benchmark,
        "method": cfg.label,
        "method_kind": cfg.method,
        "config_hash": cfg.hash,
        "repeat": repeat,
        "synthetic": bool(population.synthetic),
        "labels": list(q.labels),
        "answer": q.answer,
        "status": "ok",
    }


# ----------------------------------------------------------------------------- methods
def run_single(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    spec = cfg.specs()[0]
    runs_steps = []
    for r in range(cfg.single_runs):
        # Each run has its own repeat index, hence its own cache scope and sampling seed: 5 independent samples.
        draw = cfg.repeat_offset + repeat * cfg.single_runs + r
        agent = population.agents([spec], q, repeat=draw)[0]
        turn = Turn(q, 0, 1, (), role="solo", want_peer_prediction=False, repeat=draw, n_agents=1)
        runs_steps.append(agent.act(turn))
    runs = []
    for s, e in zip(runs_steps, _entries(runs_steps, [spec] * len(runs_steps), [0] * len(runs_steps))):
        ans = -1 if s.parse_failure else int(np.argmax(s.p))
        e["answer"] = _label(q, ans)
        e["correct"] = ans == q.answer_index
        runs.append(e)
    rec = base_record(q, cfg, population, repeat)
    rec["runs"] = runs
    correct = [r["correct"] for r in runs]
    rec["final"] = {
        "answer": None,  # the single agent's score is a mean over runs, not one answer
        "correct": float(np.mean(correct)),
        "oracle_any_agent_correct": bool(any(correct)),
        "tie": False,
    }
    rec["usage"] = _usage_sum(runs_steps)
    return rec


def run_majority(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    specs = cfg.specs()
    draw = repeat + cfg.repeat_offset
    agents = population.agents(specs, q, draw)
    turns = [
        Turn(q, i, 1, (), want_peer_prediction=False, repeat=draw, n_agents=len(agents)) for i in range(len(agents))
    ]
    steps = population.act_all(agents, turns)
    P = np.stack([s.p for s in steps])
    valid = np.array([not s.parse_failure for s in steps])
    v = B.votes(P, valid)
    keys = _keys(q, cfg)
    ans = int(B.plurality(v, len(q.options), keys))
    tied = bool(B.argmax_tiebreak(B.vote_shares(v, len(q.options)), keys)[1])
    rec = base_record(q, cfg, population, repeat)
    rec["rounds"] = [_entries(steps, specs, range(len(steps)))]
    rec["final"] = {
        "answer": _label(q, ans),
        "correct": ans == q.answer_index,
        "oracle_any_agent_correct": bool((v == q.answer_index).any()),
        "tie": tied,
    }
    rec["usage"] = _usage_sum(steps)
    return rec


def run_debate(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    """Decentralized, Sparse and AceMAD: T synchronous rounds over a fixed topology."""
    specs = cfg.specs()
    n = len(specs)
    draw = repeat + cfg.repeat_offset
    agents = population.agents(specs, q, draw)
    acemad = cfg.method == "acemad"
    history: list[list[Message]] = []
    steps_by_round: list[list[Step]] = []
    for t in range(1, cfg.rounds + 1):
        turns = [
            Turn(
                q,
                i,
                t,
                visible(history, i, ring(i, n) if cfg.method == "sparse" else None, cfg.history),
                want_peer_prediction=acemad,
                repeat=draw,
                n_agents=n,
            )
            for i in range(n)
        ]
        steps = population.act_all(agents, turns)
        history.append([Message(i, t, s.message, s.info.get("stance")) for i, s in enumerate(steps)])
        steps_by_round.append(steps)
    return _finish_debate(q, population, cfg, repeat, specs=specs, steps_by_round=steps_by_round)


def run_centralized(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    specs = cfg.specs()
    n = len(specs)
    draw = repeat + cfg.repeat_offset
    agents = population.agents(specs, q, draw)
    moderator = population.moderator(q, draw)
    history: list[list[Message]] = []
    steps_by_round, mod_steps = [], []
    for t in range(1, cfg.rounds + 1):
        turns = [
            Turn(
                q, i, t, visible(history, i, {i, -1}, cfg.history), want_peer_prediction=False, repeat=draw, n_agents=n
            )
            for i in range(n)
        ]
        steps = population.act_all(agents, turns)
        msgs = [Message(i, t, s.message, s.info.get("stance")) for i, s in enumerate(steps)]
        # The moderator reads this round's arguments (and its own earlier summaries) and broadcasts a summary.
        mod_view = visible(history, -1, {-1}, "full" if cfg.history == "full" else "last_round") + tuple(msgs)
        mstep = moderator.act(
            Turn(q, -1, t, mod_view, role="moderator", want_peer_prediction=False, repeat=draw, n_agents=n)
        )
        history.append(msgs + [Message(-1, t, mstep.message, mstep.info.get("stance"))])
        steps_by_round.append(steps)
        mod_steps.append(mstep)
    rec = _finish_debate(q, population, cfg, repeat, specs=specs, steps_by_round=steps_by_round)
    last = mod_steps[-1]
    top, tied = B.argmax_tiebreak(last.p, _keys(q, cfg))
    ans = -1 if last.parse_failure else int(top)
    mod_right = any(not s.parse_failure and int(np.argmax(s.p)) == q.answer_index for s in mod_steps)
    mods = _entries(mod_steps, [moderator.spec] * len(mod_steps), [-1] * len(mod_steps))
    rec["moderator"] = [dict(e, round=t + 1) for t, e in enumerate(mods)]
    rec["decisions"]["moderator"] = _decision(q, ans, tied)
    rec["final"] = dict(
        rec["decisions"][cfg.mad_aggregator],
        oracle_any_agent_correct=rec["final"]["oracle_any_agent_correct"] or mod_right,
    )
    rec["usage"] = _usage_sum([s for r in steps_by_round for s in r] + mod_steps)
    return rec


def _finish_debate(q, population, cfg, repeat, *, specs, steps_by_round) -> dict:
    """Score, weight and decide from the stored commitments (pure math; shared with re-scoring)."""
    P = np.stack([[s.p for s in r] for r in steps_by_round])  # (T, N, K)
    valid = np.array([[not s.parse_failure for s in r] for r in steps_by_round])  # (T, N)
    keys = _keys(q, cfg)
    rec = base_record(q, cfg, population, repeat)
    n, flat = len(specs), [s for r in steps_by_round for s in r]
    kept = _entries(flat, list(specs) * len(steps_by_round), list(range(n)) * len(steps_by_round))  # one rounding
    rounds = [kept[t * n : (t + 1) * n] for t in range(len(steps_by_round))]
    if cfg.method == "acemad":
        Qp = np.stack(
            [[s.q if s.q is not None else np.full_like(s.p, 1.0 / len(s.p)) for s in r] for r in steps_by_round]
        )
        S, W = B.acemad_weights(P, Qp, valid, cfg.eta, rule=cfg.scoring_rule, weighting=cfg.weighting)
        # a failed final commitment carries no belief into the decision; nobody parsed: no answer (-1)
        ans, tied = B.weighted_decision(P[-1], W[-1], valid[-1], cfg.weight_exponent, keys=keys)
        decision = _decision(q, int(ans), tied)
        S_kept, W_kept = stored(S), stored(W)
        for t, r in enumerate(rounds):
            for i, e in enumerate(r):
                e["score"], e["weight"] = S_kept[t][i], W_kept[t][i]
    else:  # a baseline MAD: every rule is stored, the configured one is final (a moderator is added later)
        rec["decisions"] = {}
        aggs = {  # uniform weights: argmax of the mean final belief of agents whose commitment parsed
            "mean_belief": B.weighted_scores(P[-1], valid[-1].astype(float), 1.0),
            "plurality": B.vote_shares(B.votes(P[-1], valid[-1]), len(q.options)),
        }
        for rule, a in aggs.items():
            top, tie = B.argmax_tiebreak(a, keys)
            rec["decisions"][rule] = _decision(q, int(top) if valid[-1].any() else -1, tie)
        decision = rec["decisions"].get(cfg.mad_aggregator, rec["decisions"]["mean_belief"])
    held = (B.votes(P, valid) == q.answer_index).any()
    rec["rounds"] = rounds
    rec["final"] = dict(decision, oracle_any_agent_correct=bool(held))
    rec["usage"] = _usage_sum([s for r in steps_by_round for s in r])
    return rec


def _decision(q: Question, ans: int, tied) -> dict:
    return {"answer": _label(q, ans), "correct": ans == q.answer_index, "tie": bool(tied)}


RUNNERS = {
    "single": run_single,
    "majority": run_majority,
    "decentralized": run_debate,
    "sparse": run_debate,
    "acemad": run_debate,
    "centralized": run_centralized,
}


def run_question(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    """Run one method on one question; returns the transcript record (JSON-able dict)."""
    return RUNNERS[cfg.method](q, population, cfg, repeat)
