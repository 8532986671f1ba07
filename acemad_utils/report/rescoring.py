"""Re-scoring stored commitments with another rule, eta, T, exponent or aggregator by the engine's own functions, never
a model call. Truncating to `rounds` is exact for agents that do not know T in advance (the paper's prompts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import ETA, WEIGHT_EXPONENT
from acemad_utils.protocol.debate import Debates
from acemad_utils.protocol.records import rounded


@dataclass
class Stacked:
    """Commitments of B debates with the same N and T, padded to K options."""

    P: np.ndarray  # (B, T, N, K)
    Q: np.ndarray  # (B, T, N, K); uniform where absent
    valid: np.ndarray  # (B, T, N) commitment parsed
    option_mask: np.ndarray  # (B, K) real options
    truth: np.ndarray  # (B,)
    keys: np.ndarray  # (B, K) tie-break keys of the run
    personas: list  # per agent (from the first record)
    question_ids: list
    forecast_valid: np.ndarray  # (B, T, N): False where q did not parse (entry "q_parse_failure")
    benchmarks: list


def stack(records: list[dict], seed: int = 0) -> Stacked:
    recs = [r for r in records if r.get("status") == "ok" and "rounds" in r]
    if not recs:
        failed = [r for r in records if r.get("status") == "failed"]
        if failed:  # e.g. an endpoint answering with no choices: say what failed, not only that nothing is left
            first = " ".join(str(failed[0].get("error", "")).split())[:300]
            raise ValueError(
                f"no completed debate records to stack: all {len(failed)} of {len(records)} records failed (first "
                f"error: {first}); fix what it names and rerun (failed records are retried, answered calls cached)"
            )
        raise ValueError("no completed debate records to stack")
    shapes = {(len(r["rounds"]), len(r["rounds"][0])) for r in recs}
    if len(shapes) > 1:
        raise ValueError(f"records mix debate shapes (T, N) {sorted(shapes)}; stack one method at a time")
    k = max(len(r["labels"]) for r in recs)
    b, (t, n) = len(recs), shapes.pop()
    P, Q = np.zeros((b, t, n, k)), np.zeros((b, t, n, k))
    valid, forecast_valid, mask = np.zeros((b, t, n), bool), np.ones((b, t, n), bool), np.zeros((b, k), bool)
    for i, r in enumerate(recs):
        kk, es = len(r["labels"]), [e for rnd in r["rounds"] for e in rnd]
        mask[i, :kk] = True
        P[i, ..., :kk] = np.reshape([e["p"] for e in es], (t, n, kk))
        Q[i, ..., :kk] = np.reshape([[1.0 / kk] * kk if e.get("q") is None else e["q"] for e in es], (t, n, kk))
        valid[i] = np.reshape([not e["parse_failure"] for e in es], (t, n))
        forecast_valid[i] = np.reshape([not e.get("q_parse_failure", False) for e in es], (t, n))
    # -1: no gold answer (its re-scored records have correct None, see minimal)
    truth = np.array([-1 if r["answer"] is None else r["labels"].index(r["answer"]) for r in recs])
    ids = [r["question_id"] for r in recs]
    keys = np.where(mask, B.tiebreak_keys(seed, ids, k), -1.0)
    personas = [e["persona"] for e in recs[0]["rounds"][0]]
    return Stacked(P, Q, valid, mask, truth, keys, personas, ids, forecast_valid, [r["benchmark"] for r in recs])


def stack_debates(batches: Sequence[Debates], seed: int = 0) -> Stacked:
    """stack() of the records `batches` (of one config) would write, from their arrays: no record is built."""
    k = max(b.P.shape[-1] for b in batches)
    order = np.argsort(np.concatenate([b.index for b in batches]))

    def cat(part) -> np.ndarray:  # each batch's array padded to k options, in question order
        return np.concatenate([part(b) for b in batches])[order]

    def pad(x: np.ndarray) -> np.ndarray:
        return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, k - x.shape[-1])])

    def forecasts(b: Debates) -> np.ndarray:  # a forecast not given (a NaN row) stacks as uniform
        kk, Q = b.P.shape[-1], np.full(b.P.shape, np.nan) if b.Q is None else b.Q
        return pad(np.where(np.isnan(Q).any(axis=-1, keepdims=True), 1.0 / kk, rounded(np.nan_to_num(Q))))

    qs = [q for b in batches for q in b.questions]
    qs, ids = [qs[i] for i in order], [qs[i].id for i in order]
    mask = cat(lambda b: np.broadcast_to(np.arange(k) < b.P.shape[-1], (len(b.index), k)))
    truth = np.array([-1 if q.answer is None else q.answer_index for q in qs])
    return Stacked(cat(lambda b: pad(rounded(b.P))), cat(forecasts), cat(lambda b: b.ok), mask, truth,
                   np.where(mask, B.tiebreak_keys(seed, ids, k), -1.0), [s.persona for s in batches[0].specs], ids,
                   cat(lambda b: b.q_ok), [q.benchmark for q in qs])  # fmt: skip


def weights(arr: Stacked, eta: float = ETA, rule: str = "brier", weighting: str = "peer_prediction") -> np.ndarray:
    fv = arr.forecast_valid
    return B.acemad_weights(arr.P, arr.Q, arr.valid, eta, rule=rule, weighting=weighting, forecast_valid=fv)[1]


def decisions(arr: Stacked, eta: float | Sequence[float] = ETA, exponent: float = WEIGHT_EXPONENT) -> np.ndarray:
    """AceMAD's answer after every round, (B, T) (-1: nobody parsed); a sequence of eta: (len(eta), B, T)."""
    S = B.round_scores(arr.P, arr.Q, valid=arr.valid, forecast_valid=arr.forecast_valid)
    out = [_decide(arr, B.mwu_weights(S, e), exponent, slice(None)) for e in np.atleast_1d(eta)]
    return out[0] if np.ndim(eta) == 0 else np.stack(out)


def _decide(arr: Stacked, W: np.ndarray, exponent: float, t) -> np.ndarray:
    """The weighted decision at round(s) `t` (an index or a slice of the T axis) of weights W (B, T, N)."""
    keys, mask = (arr.keys, arr.option_mask) if isinstance(t, int) else (arr.keys[:, None], arr.option_mask[:, None])
    return B.weighted_decision(arr.P[:, t], W[:, t], arr.valid[:, t], exponent, keys=keys, option_mask=mask)[0]


def rescore(
    arr: Stacked, eta: float = ETA, rounds: int | None = None, exponent: float = WEIGHT_EXPONENT, *,
    rule: str = "brier", weighting: str = "peer_prediction",
) -> np.ndarray:  # fmt: skip
    """AceMAD's final answers (B,) for another eta / T / exponent / rule / weighting (-1: nobody parsed)."""
    t = (rounds or arr.P.shape[1]) - 1
    return _decide(arr, weights(arr, eta, rule, weighting), exponent, t)


def initial_plurality(arr: Stacked) -> np.ndarray:
    """What Majority Voting would say with the same agents."""
    return B.plurality(B.votes(arr.P[:, 0], arr.valid[:, 0]), arr.P.shape[-1], arr.keys)


def belief_in_truth(arr: Stacked) -> np.ndarray:
    """Mean over agents of p_i^(t)(y*), (B, T): the quantity of the martingale proposition."""
    return _p_truth(arr).mean(axis=-1)


def _p_truth(arr: Stacked) -> np.ndarray:
    if (arr.truth < 0).any():  # -1 would index the last option
        raise ValueError(
            f"{int((arr.truth < 0).sum())} question(s) have no gold answer: belief in the truth is undefined"
        )
    return np.take_along_axis(arr.P, arr.truth[:, None, None, None], axis=-1)[..., 0]


def weighted_truth(arr: Stacked, eta: float = ETA) -> np.ndarray:
    """p_w^(t)(y*), (B, T + 1), the submartingale theorem's process: uniform weights on round 1, then the weights
    after round t on round t's beliefs."""
    pt, w = _p_truth(arr), weights(arr, eta)
    series = (w * pt).sum(-1) / w.sum(-1)
    return np.concatenate([pt[:, :1].mean(-1), series], axis=1)


def agent_scores(records: list[dict]) -> pd.DataFrame:
    rows = [
        {"question_id": r["question_id"], "method": r["method"], "round": t, "agent": e["agent"],
         "persona": e["persona"], "holds_truth": int(np.argmax(e["p"])) == r["labels"].index(r["answer"]),
         "score": e["score"], "weight": e["weight"]}
        for r in records
        if r.get("status") == "ok" and r["answer"] is not None  # no gold answer: nobody "held the truth"
        for t, rnd in enumerate(r.get("rounds", []), 1)
        for e in rnd
        if e.get("score") is not None
    ]  # fmt: skip
    return pd.DataFrame(rows)


AGGREGATORS = ("weighted (k=2, paper)", "weighted (k=1)", "plurality of final answers", "surprisingly popular",
               "Bayesian Truth Serum")  # fmt: skip


def minimal(recs: list[dict], method: str, answers, truth, answered, correct=None) -> list:
    """Records for `tables.accuracy_long` of `method`'s answers (label indexes; `correct`: given shares instead); a
    question without a gold answer is not scored (None), whatever `correct` says."""
    out = []
    for i, (r, a, ok) in enumerate(zip(recs, answers, answered)):
        c: Optional[float | bool] = None  # no gold answer: never counted wrong (a shuffled share says 0 there)
        if truth[i] >= 0:
            c = bool(ok and a == truth[i]) if correct is None else float(correct[i]) if ok else 0.0
        final = {"answer": r["labels"][a] if ok else None, "correct": c}
        out.append({"question_id": r["question_id"], "benchmark": r["benchmark"], "method": method, "status": "ok",
                    "final": final})  # fmt: skip
    return out


def rescored_records(records: list[dict], eta: float = ETA, seed: int = 0) -> list[dict]:
    """AceMAD transcripts re-decided by every aggregator of AGGREGATORS (final-round p and q)."""
    recs, arr, answered = _stacked(records, seed)
    P, Qp, valid = arr.P[:, -1], arr.Q[:, -1], arr.valid[:, -1]
    v = B.votes(P, valid)
    W = weights(arr, eta)
    answers = {
        AGGREGATORS[0]: _decide(arr, W, WEIGHT_EXPONENT, -1),
        AGGREGATORS[1]: _decide(arr, W, 1.0, -1),
        AGGREGATORS[2]: B.plurality(v, P.shape[-1], arr.keys),
        AGGREGATORS[3]: B.surprisingly_popular(v, Qp, arr.keys, arr.option_mask),
        AGGREGATORS[4]: B.bts_answer(v, Qp, keys=arr.keys),
    }
    return [x for name, ans in answers.items() for x in minimal(recs, name, ans, arr.truth, answered)]


# Figure 4's rows (display name -> weighting): all three re-decide one AceMAD run (notebook 05). "Uniform weights"
# is the standard MAD rule on AceMAD's debate (q asked, then ignored); the paper's bar is Standard MAD (l.511),
# which is STANDARD_MAD: Decentralized MAD with AceMAD's agents, never asked for q (a run of its own).
ABLATIONS = {
    "Full protocol": "peer_prediction",
    "Self-belief only": "self_belief",
    "Uniform weights (AceMAD's debate)": "uniform",
}
STANDARD_MAD = "Standard MAD (AceMAD's agents, no q)"


def figure4_records(
    ace: list[dict], standard: list[dict], *, eta: float = ETA, exponent: float = WEIGHT_EXPONENT, seed: int = 0
) -> list[dict]:
    out = reweighted_records(ace, ABLATIONS, eta=eta, exponent=exponent, seed=seed)
    return out + [dict(r, method=STANDARD_MAD) for r in standard if r.get("status") == "ok"]


def _stacked(records: list[dict], seed: int, stacked: Optional[Stacked] = None) -> tuple[list, Stacked, np.ndarray]:
    """The ok records, their Stacked (`stacked`: the caller's own, notebook 09 re-decides each map run twice), and
    whether anyone parsed in the last round (nobody: no answer, whatever the aggregator says)."""
    recs = [r for r in records if r.get("status") == "ok"]
    if stacked is not None and stacked.question_ids != [r["question_id"] for r in recs]:
        raise ValueError("stacked= holds other questions than these records: pass stack(records, seed)")
    arr = stack(recs, seed) if stacked is None else stacked
    return recs, arr, np.asarray(arr.valid[:, -1].any(-1))


def reweighted_records(
    records: list[dict], weightings: dict, eta: float = ETA, exponent: float = WEIGHT_EXPONENT, *, seed: int = 0,
    stacked: Optional[Stacked] = None,
) -> list[dict]:  # fmt: skip
    """AceMAD transcripts re-decided with other weightings {display name: weighting} ("uniform": l.617's rule)."""
    recs, arr, answered = _stacked(records, seed, stacked)
    ans = {name: rescore(arr, eta=eta, exponent=exponent, weighting=w) for name, w in weightings.items()}
    return [x for name, a in ans.items() for x in minimal(recs, name, a, arr.truth, answered)]


# The shuffled-score control: AceMAD's own weights given to agents picked without regard to what they know.
SHUFFLED = "Shuffled scores (AceMAD's debate)"
N_SHUFFLES = 20


def shuffled_decisions(
    arr: Stacked, eta: float = 2.0, exponent: float = 2.0, *, n_perm: int = N_SHUFFLES, seed: int = 0
) -> np.ndarray:
    """AceMAD's final answers (n_perm, B) with each question's scores permuted among its agents, one draw for every
    round; an agent whose p or q failed in any round keeps its (worst) scores, as AceMAD's own weights score it."""
    fv = arr.forecast_valid
    S = B.round_scores(arr.P, arr.Q, "peer_prediction", "brier", valid=arr.valid, forecast_valid=fv)  # (B, T, N)
    movable = (arr.valid if fv is None else arr.valid & fv).all(axis=1)
    drawn = B.agent_permutations(seed, arr.question_ids, movable, n_perm, salt="shuffle")
    # Only the last round's weights decide, and the same draw every round moves each agent's cumulative score whole:
    # mwu_weights of the permuted total (one round of it) are the same numbers as its last round of the permuted
    # rounds, each total summed in the same order, without T draws' arrays (most of notebook 09's shuffled control)
    total = np.cumsum(np.asarray(S, dtype=float), axis=-2)[:, -1:]  # (B, 1, N)
    shape = (n_perm, *total.shape)
    W = B.mwu_weights(np.take_along_axis(np.broadcast_to(total, shape), drawn[:, :, None, :], axis=-1), eta)
    return B.weighted_decision(
        arr.P[:, -1], W[:, :, -1], arr.valid[:, -1], exponent, keys=arr.keys, option_mask=arr.option_mask
    )[0]


def shuffled_records(
    records: list[dict], eta: float = 2.0, exponent: float = 2.0, *, seed: int = 0, stacked: Optional[Stacked] = None
) -> list[dict]:
    """`shuffled_decisions` as records: `correct` the share of draws deciding right, `answer` the most frequent."""
    recs, arr, answered = _stacked(records, seed, stacked)
    ans = shuffled_decisions(arr, eta, exponent, seed=seed)
    right = (ans == arr.truth).mean(axis=0)
    modal = [np.bincount(a[a >= 0], minlength=1).argmax() if (a >= 0).any() else -1 for a in ans.T]
    return minimal(recs, SHUFFLED, modal, arr.truth, answered, right)


def redecided(records: list[dict], rule: str, name: Optional[str] = None) -> list[dict]:
    """Baseline MAD records decided by another stored rule ("mean_belief", "plurality", "moderator")."""
    out = [r for r in records if r.get("status") == "ok"]
    for r in out:
        if rule not in r.get("decisions", {}):
            raise ValueError(f"record {r['question_id']!r} ({r['method']}) stores no decision {rule!r}; "
                             f"it has {sorted(r.get('decisions', {}))}")  # fmt: skip
    return [dict(r, final=dict(r["final"], **r["decisions"][rule]), method=name or r["method"]) for r in out]
