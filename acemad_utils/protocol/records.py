"""A debate's transcript record: what is stored of a turn, how numbers are rounded, and the record's one line.

    from acemad_utils.protocol.records import base_record, entries, to_line
    rec = base_record(q, cfg, population, repeat=0)      # the fields every record carries
    rec["rounds"] = [entries(steps, specs, range(len(steps)))]
    to_line(rec)                                          # its line in transcripts.jsonl (no newline)

Both debate engines build their records here: protocol.debate (one question, any Agent) and protocol.vectorized
(a batch of debates as arrays), so a record has one schema whichever engine made it. The record's layout:

    schema, question_id, benchmark, method (the config's label), method_kind, config_hash, repeat, synthetic,
    labels, answer, status ("ok" | "failed"), final {answer, correct, oracle_any_agent_correct, tie}, usage,
    rounds: [[entry per agent] per round]        (majority, the MADs, AceMAD)
    runs: [entry + answer, correct per run]        (single)
    decisions: {rule: {answer, correct, tie}}      (baseline MADs), moderator: [entry + round]  (centralized)
    entry: agent, persona, temperature, thinking, model, message, p, q, parse_failure [, usage] [, score, weight]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Optional

import msgspec
import numpy as np

from acemad_utils.protocol.schema import AgentSpec, Population, Question, Step, add_usage, zero_usage

SCHEMA_VERSION = 1

# Significant digits of the beliefs, scores and weights a record stores. Why not all 17: they are most of a
# record's bytes and no table needs them. Tables print 4 decimals; a stored value differs from the computed one
# by < 5e-11 relative (a stored distribution still sums to 1 within 1e-9), and the default profile's tables
# are byte-identical either way (bench/README.md).
STORED_DIGITS = 10


def stored(x) -> list:
    """Values rounded to STORED_DIGITS significant digits (vectorized), as a JSON-able list of floats.
    An exact tie stays an exact tie; 0 stays 0. A value that is not a finite number is an error: a record's
    line (to_line) has no way to write it, and no belief, score or weight of the protocol is one."""
    a = np.asarray(x, dtype=float)
    if not np.isfinite(a).all():
        raise ValueError(f"a stored belief, score or weight is not a finite number: {a.tolist()!r}")
    mag = np.floor(np.log10(np.abs(np.where(a == 0, 1.0, a))))
    ok = (mag > -280) & (mag < 15)  # beyond: kept whole (the scale would not be an exact power of ten)
    scale = 10.0 ** np.where(ok, STORED_DIGITS - 1 - mag, 0)
    # an integer-valued double divided by an exact power of ten is the double nearest the short decimal
    return np.where(ok, np.round(a * scale) / scale, a).tolist()


def entry_head(spec: AgentSpec, agent: int) -> dict:
    """The fields of an entry that name its agent (the same for each of the agent's turns)."""
    return {
        "agent": agent,
        "persona": spec.persona,
        "temperature": spec.temperature,
        "thinking": spec.thinking,
        "model": spec.model,
    }


def entry(spec: AgentSpec, agent: int, message: str, p: list, q: Optional[list], **extra) -> dict:
    """One agent's turn as stored (`extra`: parse_failure=True, usage=..., only when they apply)."""
    e: dict = {**entry_head(spec, agent), "message": message, "p": p, "q": q}
    e["parse_failure"] = bool(extra.get("parse_failure", False))
    if extra.get("usage"):
        e["usage"] = dict(extra["usage"])
    return e


def entries(steps: Sequence[Step], specs: Sequence[AgentSpec], agents: Iterable[int]) -> list[dict]:
    """The stored entries of steps that share a question (so a length of p): beliefs rounded in one call."""
    ps = stored(np.stack([s.p for s in steps]))
    qs_given = [s.q for s in steps]
    if all(q is not None for q in qs_given):
        qs = stored(np.stack([q for q in qs_given if q is not None]))
    else:
        qs = [None if q is None else stored(q) for q in qs_given]
    return [
        # a turn that made no call (synthetic agents) stores no usage block
        entry(spec, a, s.message, p, q, parse_failure=s.parse_failure, usage=any(s.usage.values()) and s.usage)
        for s, a, spec, p, q in zip(steps, agents, specs, ps, qs)
    ]


def answer_label(q: Question, idx: int) -> Optional[str]:
    """The label of option `idx`; None for no answer (-1)."""
    return None if idx < 0 else q.labels[idx]


def decision(q: Question, ans: int, tied) -> dict:
    return {"answer": answer_label(q, ans), "correct": q.correct(ans), "tie": bool(tied)}


def base_record(q: Question, cfg, population: Population, repeat: int) -> dict:
    """The fields every record carries (cfg: a DebateConfig)."""
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


def usage_sum(steps: Iterable[Step]) -> dict:
    tot = zero_usage()
    for s in steps:
        add_usage(tot, s.usage)
    return tot


_ENCODER = msgspec.json.Encoder(order="sorted")


def to_line(rec: dict) -> str:
    """A record's one line (no newline): JSON with sorted keys, written by msgspec (a synthetic run writes
    10^5 records; json.dumps took 4.7 s of notebook 06, issue 34). The same objects as json.dumps's line when
    read back (data.transcripts.parse_line); only the spacing and a float's spelling (0.00001 for 1e-05) differ.
    A string msgspec cannot write (a lone surrogate in a model's reply) is written by json.dumps."""
    try:
        return _ENCODER.encode(rec).decode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(rec, ensure_ascii=False, sort_keys=True)
