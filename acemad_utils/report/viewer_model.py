"""The view of one debate record: rounds x agents as plain JSON-able data, and examples picked by rule.

    from acemad_utils.report.viewer_model import view, pick_examples
    v = view(record, meta)          # {"qid", "method", "labels", "rounds": [{"cells": [...], ...}], ...}
    ex = pick_examples(records, "AceMAD (T=3)")    # {"overturned": [...], "not_overturned": [...]}

`viewer_html` draws this view (in a notebook and on the run page). Each round row carries the plurality answer
and the weighted answer (AceMAD's sum_i w_i^k p_i with the weights after that round, through
`beliefs.weighted_decision`; the mean belief of the parsing agents for the other debates).
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from acemad_utils.data.transcripts import QUESTIONS, read_questions, run_dir
from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import WEIGHT_EXPONENT
from acemad_utils.protocol.schema import SYNTHETIC_LABEL


# ----------------------------------------------------------------------------- the view model
def source_of(record: dict, meta: Optional[dict] = None) -> str:
    """Where the record comes from: SYNTHETIC_LABEL for the simulated population, else the model's name."""
    if meta is not None:
        pop = meta.get("population") or {}
        if pop.get("synthetic", meta.get("synthetic")):
            return SYNTHETIC_LABEL
        return f"model: {meta.get('model') or pop.get('model') or 'unknown'}"
    if record.get("synthetic"):
        return SYNTHETIC_LABEL
    models = {e.get("model") for r in record.get("rounds") or [record.get("runs") or []] for e in r} - {None}
    return f"model: {', '.join(sorted(models))}" if models else "model: (not recorded; pass the run's meta)"


def _method_params(record: dict, meta: Optional[dict]) -> dict:
    return ((meta or {}).get("methods") or {}).get(record.get("method"), {})


@functools.lru_cache(maxsize=1024)
def _who(persona, model, temperature) -> str:
    return " · ".join(str(x) for x in (persona, model, f"T={temperature}") if x not in (None, ""))


def _r4(xs) -> list:
    return [round(float(x), 4) for x in xs]


def _cell(e: dict, labels: list) -> dict:
    # plain Python, not numpy: a run's page draws ~10^5 cells of 2-10 numbers each, where numpy's per-call
    # overhead is most of the work
    p = e["p"]
    pf = bool(e.get("parse_failure"))
    return {
        "agent": e.get("agent"),
        "who": _who(e.get("persona"), e.get("model"), e.get("temperature")),
        "stance": None if pf else labels[max(range(len(p)), key=p.__getitem__)],  # the first maximum (argmax)
        "p": _r4(p),
        "q": None if e.get("q") is None else _r4(e["q"]),
        "score": None if e.get("score") is None else round(float(e["score"]), 4),
        "weight": None if e.get("weight") is None else round(float(e["weight"]), 4),
        "pf": pf,
        "msg": str(e.get("message") or ""),
    }


def _round_answers(rounds: list, labels: list, keys: np.ndarray, acemad: bool, *, exponent: float) -> list:
    """(plurality label, weighted label) of every round; None where no agent's commitment parsed. All rounds in
    one call of the engine's functions (rounds x agents x options) when they have the same agents."""
    if not rounds:
        return []
    if len({len(r) for r in rounds}) > 1:  # agents differ between rounds: one round at a time
        return [a for r in rounds for a in _round_answers([r], labels, keys, acemad, exponent=exponent)]
    P = np.array([[e["p"] for e in r] for r in rounds], dtype=float)
    valid = np.array([[not e.get("parse_failure") for e in r] for r in rounds], dtype=bool)
    plur = B.plurality(B.votes(P, valid), len(labels), keys)
    if acemad:  # the weights after each round, as the final decision uses them after the last round
        w = np.array([[e.get("weight", 0.0) for e in r] for r in rounds], dtype=float)
    else:  # uniform weights over the agents whose commitment parsed (the engine's mean_belief aggregator)
        w, exponent = np.ones(valid.shape), 1.0
    weighted = B.weighted_decision(P, w, valid, exponent, keys=keys)[0]
    any_valid = np.asarray(valid.any(axis=-1)).tolist()
    return [
        (labels[int(pl)] if pl >= 0 else None, labels[int(wd)] if ok else None)
        for pl, wd, ok in zip(plur, weighted, any_valid)
    ]


@functools.lru_cache(maxsize=8)
def _questions(experiment: str, mtime_ns: int) -> dict:
    return read_questions(run_dir(experiment, create=False))


def question_of(record: dict, meta: Optional[dict] = None) -> Optional[dict]:
    """The record's question text and options: from the record when it carries them (a record built from a
    Question by hand), else from its run's questions.json (meta["experiment"]); None when neither has them."""
    if isinstance(record.get("question"), dict):
        return record["question"]
    experiment = (meta or {}).get("experiment")
    if not experiment:
        return None
    try:
        path = run_dir(experiment, create=False) / QUESTIONS
        found = _questions(experiment, path.stat().st_mtime_ns) if path.exists() else {}
    except ValueError:  # not a run name (a hand-made meta): no side file to read
        return None
    return found.get(record["question_id"])


def view(record: dict, meta: Optional[dict] = None) -> dict:
    """The compact, JSON-able view of one record that viewer_html draws."""
    for key in ("question_id", "method", "labels", "answer", "final"):
        if key not in record:
            raise ValueError(f"not a transcript record: missing {key!r} (keys: {sorted(record)})")
    labels = list(record["labels"])
    params = _method_params(record, meta)
    kind = record.get("method_kind") or params.get("method")
    keys = B.tiebreak_keys(int(params.get("seed", 0)), [record["question_id"]], len(labels))[0]
    final = record["final"]
    v = {
        "qid": record["question_id"],
        "benchmark": record.get("benchmark", ""),
        "method": record["method"],
        "kind": kind,
        "repeat": record.get("repeat", 0),
        "labels": labels,
        "answer": record["answer"],
        "status": record.get("status", "ok"),
        "error": record.get("error", ""),
        "final": final.get("answer"),
        "correct": final.get("correct"),
        "source": source_of(record, meta),
        "question": question_of(record, meta),
        "unit": "agent",
        "rounds": [],
    }
    if v["status"] != "ok":
        return v
    if kind == "single" or "runs" in record:
        v["unit"] = "run"
        raw = [record.get("runs") or []]
    else:
        raw = record.get("rounds") or []
    mods = {m.get("round"): m for m in record.get("moderator") or []}
    exponent = float(params.get("weight_exponent", WEIGHT_EXPONENT))
    answers = _round_answers(raw, labels, keys, kind == "acemad", exponent=exponent)
    for t, (entries, (plur, weighted)) in enumerate(zip(raw, answers), start=1):
        v["rounds"].append(
            {
                "t": t,
                "cells": [_cell(e, labels) for e in entries],
                "plurality": plur,
                "weighted": None if v["unit"] == "run" else weighted,
                "moderator": _cell(mods[t], labels) if t in mods else None,
            }
        )
    # Name the weighted column by what decides: AceMAD's weights, or a mean belief that may not be the decision.
    if kind == "acemad":
        v["weighted_name"] = "weighted (AceMAD weights)"
    elif kind == "centralized":
        v["weighted_name"] = "mean belief (the moderator decides)"
    elif kind in ("majority", "self_consistency") or params.get("mad_aggregator") == "plurality":
        v["weighted_name"] = "mean belief (plurality decides)"
    else:
        v["weighted_name"] = "mean belief"
    return v


def is_correct(v: dict) -> Optional[bool]:
    """A record's outcome for the page's filter; a Single Agent record (a mean over runs) counts as
    correct when more than half of its runs are; None for a question without a gold answer (neither)."""
    c = v.get("correct")
    if c is None:
        return None
    return bool(c > 0.5) if isinstance(c, float) and not isinstance(c, bool) else bool(c)


# ----------------------------------------------------------------------------- examples by rule
def round1_plurality(record: dict, seed: int = 0) -> Optional[str]:
    """The plurality of the round-1 answers (Majority Voting with the same agents), ties broken as the engine
    does; None when no round-1 commitment parsed."""
    labels = list(record["labels"])
    keys = B.tiebreak_keys(seed, [record["question_id"]], len(labels))[0]
    return _round_answers(record["rounds"][:1], labels, keys, False, exponent=1.0)[0][0]


def pick_examples(records: list[dict], target_label: str, n: int = 1, seed: int = 0) -> dict[str, list[dict]]:
    """Debates of method `target_label` picked by rule, never by hand.

    Among its records with status "ok", sorted by (question_id, repeat):
      "overturned":     the round-1 plurality answer was wrong (or none parsed) and the final answer is right;
      "not_overturned": the round-1 plurality answer was wrong (or none parsed) and the final answer is wrong.
    The first n of each (an empty list when none qualifies). `seed` is the run's seed (it breaks vote ties).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    mine = [r for r in records if r.get("method") == target_label]
    if not mine:
        methods = sorted({str(r.get("method")) for r in records})
        raise ValueError(f"no record of method {target_label!r}; methods present: {methods}")
    out: dict[str, list[dict]] = {"overturned": [], "not_overturned": []}
    for r in sorted(mine, key=lambda r: (r["question_id"], r.get("repeat", 0))):
        if r.get("status", "ok") != "ok" or not r.get("rounds"):
            continue
        if round1_plurality(r, seed) == r["answer"]:
            continue
        kind = "overturned" if r["final"]["correct"] is True else "not_overturned"
        if len(out[kind]) < n:
            out[kind].append(r)
    return out
