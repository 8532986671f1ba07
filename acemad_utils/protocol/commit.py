"""A commitment: the JSON schema asked for, and the tolerant parser of model replies (parse_commit never raises)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from acemad_utils.protocol.beliefs import normalize
from acemad_utils.protocol.prompts import ARGUMENT_PLACEHOLDER


def commit_schema(labels: Sequence[str], want_q: bool, argument: bool = False) -> dict:
    obj = lambda props: {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    dist = obj({k: {"type": "number"} for k in labels})
    text = {"argument": {"type": "string"}} if argument else {}
    return obj({**text, "self_prob": dist, **({"peer_prediction": dist} if want_q else {})})


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_LABEL = re.compile(r"^\(?\s*(?:option|answer|choice)?\s*\(?([A-Za-z0-9]{1,2})\s*[).:]?\s*$", re.I)
# The keys a model writes for p and q, compared without case, spaces or punctuation ("Self_Prob" -> "selfprob").
_P_KEYS = "selfprob selfprobability selfprobabilities selfbelief self probabilities probs belief beliefs p".split()
_Q_KEYS = "peerprediction peerpredictions peerprob peerprobs peer peers peerbelief othersprediction q".split()


def objects(text: str) -> list[str]:
    """Balanced {...} substrings (outermost first), code fences first."""
    out = []
    for src in _FENCE.findall(text) + [text]:
        depth, start = 0, None
        for i, ch in enumerate(src):
            if ch == "{":
                if depth == 0:
                    start = i
                depth += 1
            elif ch == "}" and depth:
                depth -= 1
                if depth == 0:
                    out.append(src[start : i + 1])
        if depth and start is not None:  # cut off by max_tokens: close the braces and read what is there
            out.append(src[start:].rstrip().rstrip(",:") + "}" * depth)
    return out


def _loads(s: str) -> tuple[Any, list[str]]:
    """json.loads, then repairs: trailing commas, percentages, bare keys, Python literals; garbage: (None, [])."""
    try:
        return json.loads(s), []
    except (ValueError, RecursionError):
        pass
    fixed = re.sub(r",\s*([}\]])", r"\1", s)
    fixed = re.sub(r"(-?\d+(?:\.\d+)?)\s*%", r"\1", fixed)
    fixed = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z_0-9]*)\s*:", r'\1"\2":', fixed)  # bare keys
    try:
        return json.loads(fixed), ["json_repair"]
    except (ValueError, RecursionError):
        pass
    try:
        literal = fixed.replace("true", "True").replace("false", "False").replace("null", "None")
        return ast.literal_eval(literal), ["python_literal"]
    except Exception:  # literal_eval raises many types on garbage (TypeError, SyntaxError, ...)
        return None, []


def _norm_key(k: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(k).lower())


_NONFINITE_WORD = re.compile(r"\s*[+-]?(inf|infinity|nan)\s*", re.IGNORECASE)


def _num(v: Any) -> Optional[float]:
    """A number from a JSON value ({"probability": x} followed 8 levels); None when there is none ("high": zero mass).
    A stated non-finite number (Infinity, NaN, 1e999, an int too large) comes back non-finite: a parse failure, never
    zero mass, since {"A": Infinity, "B": 0.1} once became p = [0, 1] without a flag."""
    for _ in range(8):
        if not (isinstance(v, Mapping) and v):
            break
        v = next(iter(v.values()))
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:  # json gives Python ints of any size
            return float("inf")
    if isinstance(v, str):
        if _NONFINITE_WORD.fullmatch(v[:40]):
            return float("inf")
        m = re.search(r"-?\d+(?:\.\d+)?", v[:200])  # "60%" -> 60: renormalizing puts percentages on scale
        return float(m.group()) if m else None  # a long digit string is inf, never an error
    return None


def _label_of(k: Any, labels: Sequence[str], options: Optional[Mapping[str, str]]) -> Optional[str]:
    s = str(k).strip()
    if s in labels:
        return s
    m = _LABEL.match(s) if len(s) <= 40 else None  # a label is short; long keys only match option texts
    for lab in labels:
        if m and lab.lower() == m.group(1).lower():
            return lab
    if options:  # the option text instead of its label
        low = s.lower().rstrip(".")
        for lab, txt in options.items():
            t = str(txt).strip().lower().rstrip(".")
            if low and (low == t or (len(low) > 3 and t.startswith(low))):
                return lab
    return None


def _dist(obj: Any, labels: Sequence[str], options) -> tuple[Optional[np.ndarray], dict]:
    if isinstance(obj, (list, tuple)) and len(obj) == len(labels):  # positional list of numbers
        obj = dict(zip(labels, obj))
    if not isinstance(obj, Mapping) or not obj:
        return None, {}
    mapped: dict[str, float] = {}
    unknown = []
    for k, v in obj.items():
        lab = _label_of(k, labels, options)
        if lab is None:
            unknown.append(str(k))
        elif (x := _num(v)) is not None and not np.isfinite(x):
            return None, {}
        elif x is not None:
            mapped[lab] = mapped.get(lab, 0.0) + max(x, 0.0)
    raw = np.array([mapped.get(k, 0.0) for k in labels])
    p, degenerate = normalize(raw)
    if degenerate:  # no label with a positive number
        return None, {}
    # values like 60/40: renormalizing already reads them as percentages
    return p, {"missing": [k for k in labels if k not in mapped], "unknown": unknown, "percent": raw.sum() > 1.5}


def _find(d: Mapping, keys: Sequence[str]) -> Any:
    by_norm = {_norm_key(k): v for k, v in d.items()}
    return next((by_norm[k] for k in keys if k in by_norm), None)


def parse_commit(text: str, labels: Sequence[str], want_q: bool, options: Optional[Mapping[str, str]] = None, *,
                 argument: bool = False) -> tuple[Optional[np.ndarray], Optional[np.ndarray], dict]:  # fmt: skip
    """(p, q, report) from a reply's {"self_prob": {...}, "peer_prediction": {...}}; p None: no usable belief, q None:
    not wanted or not found (report["q_ok"]); argument=True also reads report["argument"]. Tolerated: code fences,
    prose, single quotes, trailing commas, percentages, missing or extra labels, lower case, "Option A", an option's
    text for its label, a bare {"A": ..} map."""
    labels = tuple(labels)
    try:
        with np.errstate(all="ignore"):  # 1e308 + 1e308 is inf (zero mass), not a warning per reply
            return _parse_commit(text, labels, want_q, options, argument=argument)
    except Exception as e:  # a parser bug must cost one commitment (flagged), never the run
        report = {"ok": False, "fixes": [], "error": f"parser error {type(e).__name__}: {e}"[:200]}
        return None, None, dict(report, argument="") if argument else report


def _parse_commit(text: str, labels: tuple, want_q: bool, options, *, argument: bool = False) -> tuple:
    report: dict = {"ok": False, "fixes": []}
    text = "" if text is None else str(text)
    objs = [o for o in (_loads(s) for s in objects(text)) if isinstance(o[0], Mapping)]
    if argument:
        report["argument"] = _argument(obj for obj, _ in objs)
    for obj, fixes in objs:
        praw = _find(obj, _P_KEYS)
        if praw is None and any(_label_of(k, labels, options) for k in obj):
            praw = obj  # the model answered with the bare distribution
        p, prep = _dist(praw, labels, options)
        if p is None:
            continue
        q, qrep = None, dict[str, object]()
        for other, _ in ([(obj, 0)] + objs) if want_q else ():  # p and q may come as two separate objects
            q, qrep = _dist(_find(other, _Q_KEYS), labels, options)
            if q is not None:
                break
        percent = ["percent"] if prep.get("percent") or qrep.get("percent") else []
        report.update(ok=True, fixes=fixes + percent, q_ok=q is not None or not want_q, missing=prep["missing"],
                      unknown=prep["unknown"])  # fmt: skip
        return p, q, report
    report["error"] = "no JSON object with a usable self_prob"
    return None, None, report


def _argument(objs) -> str:
    for obj in objs:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if _norm_key(k) in ("argument", "arguments", "reasoning") and isinstance(v, str):
                    # Small models copy the shape's placeholder: that is no argument at all.
                    return "" if v.strip().strip("<>").lower() == ARGUMENT_PLACEHOLDER.strip("<>") else v.strip()
    return ""


def argument_of(text: str) -> str:
    """The "argument" string of a single-call reply ('' when there is none)."""
    return _argument(_loads(s)[0] for s in objects(text))
