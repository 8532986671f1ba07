"""Every method of the paper, written once against the `Agent` interface.

    from acemad_utils.protocol.config import DebateConfig
    from acemad_utils.protocol.debate import run_question
    from acemad_utils.agents.sim import SimPopulation, make_items
    q = make_items(1, seed=0)[0]
    rec = run_question(q, SimPopulation(), DebateConfig(method="acemad"))
    rec["final"]      # {'answer': ..., 'correct': ..., 'tie': ..., 'oracle_any_agent_correct': ...}

A protocol only moves agent states: it decides who sees which messages (topology + history policy),
has the population run every agent of a round (`Population.act_all`: agents/pool.py's threads for an LLM
population), and stores what they said. Scoring, weights and the final decision are the pure functions of
`beliefs`, applied to the stored p and q, so any record can be re-scored later with another rule without
calling a model.

Methods (paper Appendix "Baselines"; all MADs at T rounds; line numbers of acemad_paper.tex):
- single:        one agent, `single_runs` independent runs (l.210), each with its own repeat index and so its
                 own cache scope and sample; the record's `correct` is their mean accuracy.
- majority:      N independent agents answer once; plurality of their initial answers (l.617, l.645).
- self_consistency: the same with N x T samples of the naive agent (config.DebateConfig.samples): AceMAD's
                 calls per question spent on independent samples (ours, not the paper's).
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

import functools
from collections.abc import Sequence
from typing import Optional

import numpy as np

from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol import records as R
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.schema import Message, Population, Question, Step, Turn, add_usage


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


#: Methods decided by the plurality of independent first answers (one round, no debate).
VOTES = ("majority", "self_consistency")

#: How a peer prediction that did not parse is scored (stored in the record beside the count; docs/faults.md).
FAILED_FORECAST_RULE = "the worst score of its round (its weight cannot rise)"


# ----------------------------------------------------------------------------- methods
def _keys(q: Question, cfg: DebateConfig) -> np.ndarray:
    return _tiebreak_keys(cfg.seed, q.id, len(q.options))


# Every method of a run breaks ties on a question with the same keys (a seeded generator each: most of a batch's
# decision time); kept for the ~10^4 questions of a profile.
@functools.lru_cache(maxsize=1 << 16)
def _tiebreak_keys(seed: int, qid: str, k: int) -> np.ndarray:
    keys = B.tiebreak_keys(seed, [qid], k)
    keys.flags.writeable = False
    return keys


def run_single(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    spec = cfg.specs()[0]
    steps = []
    for r in range(cfg.single_runs):
        # Each run has its own repeat index, hence its own cache scope and sampling seed: 5 independent samples.
        draw = single_draw(cfg, repeat, r)
        agent = population.agents([spec], q, repeat=draw)[0]
        turn = Turn(q, 0, 1, (), role="solo", want_peer_prediction=False, repeat=draw, n_agents=1)
        steps.append(agent.act(turn))
    kept = R.entries(steps, [spec] * len(steps), [0] * len(steps))
    P, valid = np.stack([s.p for s in steps]), np.array([not s.parse_failure for s in steps])
    return single_records([q], cfg, population, [repeat], [kept], P[None], valid[None], [R.usage_sum(steps)])[0]


def single_draw(cfg: DebateConfig, repeat: int, run: int) -> int:
    """The repeat index the Single Agent's run `run` of record `repeat` is built and called with."""
    return cfg.repeat_offset + repeat * cfg.single_runs + run


def run_majority(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    specs = cfg.specs()
    draw = repeat + cfg.repeat_offset
    agents = population.agents(specs, q, draw)
    turns = [
        Turn(q, i, 1, (), want_peer_prediction=False, repeat=draw, n_agents=len(agents)) for i in range(len(agents))
    ]
    steps = population.act_all(agents, turns)
    P, valid = np.stack([s.p for s in steps])[None, None], np.array([[not s.parse_failure for s in steps]])[None]
    kept = [[R.entries(steps, specs, range(len(steps)))]]
    return debate_records([q], cfg, population, [repeat], kept, P, None, valid, [R.usage_sum(steps)])[0]


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
    mods = R.entries(mod_steps, [moderator.spec] * len(mod_steps), [-1] * len(mod_steps))
    Pm = np.stack([s.p for s in mod_steps])[None]
    valid = np.array([[not s.parse_failure for s in mod_steps]])
    add_moderators([rec], [q], cfg, [mods], Pm, valid)
    add_usage(rec["usage"], R.usage_sum(mod_steps))
    return rec


def _finish_debate(q, population, cfg, repeat, *, specs, steps_by_round) -> dict:
    P = np.stack([[s.p for s in r] for r in steps_by_round])  # (T, N, K)
    valid = np.array([[not s.parse_failure for s in r] for r in steps_by_round])  # (T, N)
    Qp = None
    if cfg.method == "acemad":  # a q that did not parse is uniform (its agent is invalid: it cannot gain weight)
        Qp = np.stack(
            [[s.q if s.q is not None else np.full_like(s.p, 1.0 / len(s.p)) for s in r] for r in steps_by_round]
        )
    # a forecast that did not parse (after the repair call) scores the round's worst forecast: never a weight gain
    fv = np.array([[not s.info.get("q_parse_failure") for s in r] for r in steps_by_round])
    n, flat = len(specs), [s for r in steps_by_round for s in r]
    kept = R.entries(flat, list(specs) * len(steps_by_round), list(range(n)) * len(steps_by_round))  # one rounding
    rounds = [kept[t * n : (t + 1) * n] for t in range(len(steps_by_round))]
    Qb = None if Qp is None else Qp[None]
    usage = [R.usage_sum(flat)]
    return debate_records([q], cfg, population, [repeat], [rounds], P[None], Qb, valid[None], usage, fv[None])[0]


# ----------------------------------------------------------------------------- decisions and records, batched
# Every function below takes a batch of debates of one config (leading axis: debate), so the per-question methods
# above (a batch of one) and protocol.vectorized (a batch of thousands) score, weight, decide and store alike.
def debate_outcome(P, Qp, valid, cfg: DebateConfig, keys, forecast_valid=None) -> dict:
    """Scores, weights and decisions of debates of commitments P, Qp (D, T, N, K) and valid (D, T, N), tie-break
    keys (D, K): AceMAD's {"scores", "weights", "decisions": {"acemad": (answer, tied)}} (Algorithm 1), a
    baseline's {"decisions": {rule: (answer, tied)}} for every rule of its uniform weights (a record keeps all).
    `forecast_valid` (D, T, N): False where a peer prediction did not parse (beliefs.peer_scores: the round's
    worst score). Pure math on the stored commitments, shared with re-scoring."""
    last, ok = P[:, -1], valid[:, -1]
    if cfg.method == "acemad":
        S, W = B.acemad_weights(
            P, Qp, valid, cfg.eta, rule=cfg.scoring_rule, weighting=cfg.weighting, forecast_valid=forecast_valid
        )
        # a failed final commitment carries no belief into the decision; nobody parsed: no answer (-1)
        ans, tied = B.weighted_decision(last, W[:, -1], ok, cfg.weight_exponent, keys=keys)
        return {"scores": S, "weights": W, "decisions": {"acemad": (ans, tied)}}
    aggs = {  # uniform weights: argmax of the mean final belief of agents whose commitment parsed
        "mean_belief": B.weighted_scores(last, ok.astype(float), 1.0),
        "plurality": B.vote_shares(B.votes(last, ok), P.shape[-1]),
    }
    decisions = {}
    for rule, a in aggs.items():
        top, tie = B.argmax_tiebreak(a, keys)
        decisions[rule] = (np.where(ok.any(axis=-1), top, -1), tie)
    return {"decisions": decisions}


def debate_records(questions, cfg, population, repeats, rounds, P, Qp, valid, usages, forecast_valid=None) -> list:
    """The records of debates (majority: one round) of `questions` x `repeats` (one per debate), from their
    stored entries `rounds` (per debate: per round: per agent) and commitments P, Qp (D, T, N, K), valid (D, T, N);
    forecast_valid (D, T, N) or None (every peer prediction parsed)."""
    keys = np.concatenate([_keys(q, cfg) for q in questions])
    held = (B.votes(P, valid) == _truth(questions)[:, None, None]).any(axis=(1, 2))
    if cfg.method in VOTES:  # a plurality of the initial answers (no debate)
        v = B.votes(P[:, 0], valid[:, 0])
        out = {
            "decisions": {
                "majority": (
                    B.plurality(v, P.shape[-1], keys),
                    B.argmax_tiebreak(B.vote_shares(v, P.shape[-1]), keys)[1],
                )
            }
        }
    else:
        out = debate_outcome(P, Qp, valid, cfg, keys, forecast_valid)
    S_kept = R.stored(out["scores"]) if "scores" in out else None
    W_kept = R.stored(out["weights"]) if "weights" in out else None
    recs = []
    for d, q in enumerate(questions):
        rec = R.base_record(q, cfg, population, repeats[d])
        decided = {rule: R.decision(q, int(a[d]), t[d]) for rule, (a, t) in out["decisions"].items()}
        if cfg.method in (*VOTES, "acemad"):
            final = next(iter(decided.values()))
        else:  # a baseline MAD: every rule is stored, the configured one is final (a moderator is added later)
            rec["decisions"] = decided
            final = decided.get(cfg.mad_aggregator, decided["mean_belief"])
        if S_kept is not None and W_kept is not None:
            for t, r in enumerate(rounds[d]):
                for i, e in enumerate(r):
                    e["score"], e["weight"] = S_kept[d][t][i], W_kept[d][t][i]
        rec["rounds"] = rounds[d]
        failed = 0 if forecast_valid is None or cfg.method != "acemad" else int((~forecast_valid[d]).sum())
        if failed:  # only when it happened: a synthetic run's records stay as they were
            rec["unparsed_forecasts"] = {"count": failed, "scored_as": FAILED_FORECAST_RULE}
        rec["final"] = dict(final, oracle_any_agent_correct=None if q.answer is None else bool(held[d]))
        rec["usage"] = usages[d]
        recs.append(rec)
    return recs


def add_moderators(recs, questions, cfg, mods, Pm, valid) -> None:
    """Centralized MAD: each record gets its moderator's entries `mods` (per round), its decision `moderator`
    (its final summary's answer) and, if the config says so, that as the final answer. Pm (D, T, K), valid (D, T)."""
    keys = np.concatenate([_keys(q, cfg) for q in questions])
    top, tied = B.argmax_tiebreak(Pm[:, -1], keys)
    ans = np.where(valid[:, -1], top, -1)
    right = (B.votes(Pm, valid) == _truth(questions)[:, None]).any(axis=1)
    for d, (rec, q) in enumerate(zip(recs, questions)):
        rec["moderator"] = [dict(e, round=t + 1) for t, e in enumerate(mods[d])]
        rec["decisions"]["moderator"] = R.decision(q, int(ans[d]), tied[d])
        held = rec["final"]["oracle_any_agent_correct"]  # None without a gold answer
        held = None if held is None else held or bool(right[d])
        rec["final"] = dict(rec["decisions"][cfg.mad_aggregator], oracle_any_agent_correct=held)


def _truth(questions) -> np.ndarray:
    """Gold answer indices; -1 (matches no vote) for a question without a gold answer."""
    return np.array([-1 if q.answer is None else q.answer_index for q in questions])


def single_records(questions, cfg, population, repeats, runs, P, valid, usages) -> list[dict]:
    """Single Agent records: per debate its `runs` entries (stored) and commitments P (D, R, K), valid (D, R).
    The record's `correct` is the mean accuracy of its runs (the single agent has no one answer)."""
    ans = np.where(valid, P.argmax(axis=-1), -1)
    recs = []
    for d, q in enumerate(questions):
        correct = []
        for e, a in zip(runs[d], ans[d]):
            e["answer"] = R.answer_label(q, int(a))
            e["correct"] = q.correct(int(a))
            correct.append(e["correct"])
        rec = R.base_record(q, cfg, population, repeats[d])
        rec["runs"] = runs[d]
        unlabelled = q.answer is None
        rec["final"] = {
            "answer": None,  # the single agent's score is a mean over runs, not one answer
            "correct": None if unlabelled else float(np.mean(correct)),
            "oracle_any_agent_correct": None if unlabelled else any(correct),
            "tie": False,
        }
        rec["usage"] = usages[d]
        recs.append(rec)
    return recs


RUNNERS = {
    "single": run_single,
    "majority": run_majority,
    "self_consistency": run_majority,
    "decentralized": run_debate,
    "sparse": run_debate,
    "acemad": run_debate,
    "centralized": run_centralized,
}


def run_question(q: Question, population: Population, cfg: DebateConfig, repeat: int = 0) -> dict:
    """Run one method on one question; returns the transcript record (JSON-able dict)."""
    return RUNNERS[cfg.method](q, population, cfg, repeat)
