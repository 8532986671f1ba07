"""A transcript record: what is stored of a turn, how numbers are rounded, the record's line. Its layout:

schema, question_id, benchmark, method (the config's label), method_kind, config_hash, repeat, synthetic,
labels, answer, status ("ok" | "failed"), final {answer, correct, oracle_any_agent_correct, tie}, usage,
rounds: [[entry per agent] per round]        (majority, the MADs, AceMAD)
runs: [entry + answer, correct per run]        (single)
decisions: {rule: {answer, correct, tie}}      (baseline MADs), moderator: [entry + round]  (centralized)
entry: agent, persona, temperature, thinking, model, message, p, q, parse_failure [, usage] [, score, weight]
"""

from __future__ import annotations

import json
from typing import Optional

import msgspec
import numpy as np

from acemad_utils.protocol.schema import Population, Question

SCHEMA_VERSION = 1

# Significant digits a record stores of beliefs, scores and weights. Why not all 17: they are most of a record's
# bytes; tables print 4 decimals and are byte-identical either way (bench/README.md).
STORED_DIGITS = 10


def rounded(x) -> np.ndarray:
    """The values a record stores, rounded to STORED_DIGITS significant digits (a tie stays a tie; non-finite: an
    error): what a reader of the record gets back."""
    a = np.asarray(x, dtype=float)
    if not np.isfinite(a).all():
        raise ValueError(f"a stored belief, score or weight is not a finite number: {a.tolist()!r}")
    mag = np.floor(np.log10(np.abs(np.where(a == 0, 1.0, a))))
    ok = (mag > -280) & (mag < 15)  # beyond: kept whole (the scale would not be an exact power of ten)
    scale = 10.0 ** np.where(ok, STORED_DIGITS - 1 - mag, 0)
    # an integer-valued double divided by an exact power of ten is the double nearest the short decimal
    return np.where(ok, np.round(a * scale) / scale, a)


def entries(specs, agents, texts, P, Q, ok, q_ok, usage, S=None, W=None) -> list:
    """The stored entries [D][T][N]: texts and usage [D][T][N], P and Q (D, T, N, K) (Q None; a NaN row: no
    forecast), ok and q_ok (D, T, N), AceMAD's scores S and weights W (D, T, N); a turn that made no call
    (synthetic agents) stores no usage block."""
    heads = [{"agent": a, "persona": s.persona, "temperature": s.temperature, "thinking": s.thinking,
              "model": s.model} for s, a in zip(specs, agents)]  # fmt: skip
    D, T, N = P.shape[:3]
    ps, fail = rounded(P).tolist(), (~np.asarray(ok, bool)).tolist()
    if Q is None:
        qs = [[[None] * N] * T] * D
    else:  # a forecast not given (a NaN row) is stored as None
        qs = rounded(np.nan_to_num(Q)).tolist()
        for d, t, i in zip(*np.nonzero(np.isnan(Q).any(axis=-1))):
            qs[d][t][i] = None
    if S is None:  # two spelled-out comprehensions: twice as fast as a generic dict(zip(...)) per entry
        out = [[[{**h, "message": m, "p": p, "q": q, "parse_failure": f} for h, m, p, q, f in zip(heads, *row)]
                for row in zip(*cols)] for cols in zip(texts, ps, qs, fail)]  # fmt: skip
    else:
        out = [[[{**h, "message": m, "p": p, "q": q, "parse_failure": f, "score": s, "weight": w}
                 for h, m, p, q, f, s, w in zip(heads, *row)] for row in zip(*cols)]
               for cols in zip(texts, ps, qs, fail, rounded(S).tolist(), rounded(W).tolist())]  # fmt: skip
    if q_ok is not None and not np.all(q_ok):  # only when it happened
        for d, t, i in zip(*np.nonzero(~np.asarray(q_ok, bool))):
            out[d][t][i]["q_parse_failure"] = True
    for d, t, i in [] if usage is None else np.ndindex(D, T, N):
        if any(usage[d][t][i].values()):
            out[d][t][i]["usage"] = dict(usage[d][t][i])
    return out


def answer_label(q: Question, idx: int) -> Optional[str]:
    return None if idx < 0 else q.labels[idx]


def decision(q: Question, ans: int, tied) -> dict:
    return {"answer": answer_label(q, ans), "correct": q.correct(ans), "tie": bool(tied)}


def base_record(q: Question, cfg, population: Population, repeat: int) -> dict:
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


_ENCODER = msgspec.json.Encoder(order="sorted")


def to_line(rec: dict) -> bytes:
    """A record's line as the UTF-8 bytes a transcript holds: sorted-key JSON by msgspec (json.dumps took 4.7 s of
    notebook 06), or by json.dumps for what msgspec cannot write (a lone surrogate in a model's reply). Bytes, as the
    runner keeps and writes them (a str line was decoded once and encoded twice, ~670 MB in a default profile)."""
    try:
        return _ENCODER.encode(rec)
    except UnicodeEncodeError:
        return json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8")
