"""commit.parse_commit: any string in (unicode, JSON-ish garbage, huge numbers, NaN / Infinity, deep nesting) gives
a valid distribution or a flagged failure out, never an exception that would stop a run; and the agent around it:
whatever a model replies, a commitment is a valid belief, and a failed one is uniform and flagged."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acemad_utils.agents.client import Completion
from acemad_utils.agents.llm_agent import LLMAgent
from acemad_utils.protocol.commit import parse_commit
from acemad_utils.protocol.schema import AgentSpec, Question, Turn

LABELS = ("A", "B", "C", "D")
OPTIONS = {"A": "Paris", "B": "London", "C": "Rome", "D": "Madrid"}
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(result, want_q: bool, k: int = len(LABELS)) -> None:
    p, q, report = result
    assert isinstance(report, dict) and isinstance(report.get("ok"), bool)
    if p is None:
        assert report["ok"] is False and q is None
        return
    assert report["ok"] is True
    for v in (p,) + ((q,) if q is not None else ()):
        assert isinstance(v, np.ndarray) and v.shape == (k,)
        assert np.all(np.isfinite(v)) and np.all(v >= 0) and abs(v.sum() - 1.0) < 1e-9
    if not want_q:
        assert q is None


# ----------------------------------------------------------------------------- strategies
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0, 1, -1, 1e308, -1e308, 5e-324, 10**20, 2**1024]),
)
keys = st.one_of(
    st.sampled_from(LABELS + ("a", "Option B", "(C)", "D.", "Z", "E", "AA", "Paris", "london", "", " ", "1")),
    st.sampled_from(("self_prob", "peer_prediction", "Self Prob", "probabilities", "p", "q", "peer", "answer")),
    st.text(max_size=12),
)
leaves = st.one_of(numbers, st.text(max_size=10), st.booleans(), st.none(), st.sampled_from(["60%", "1e999", "½", "٣"]))
json_values = st.recursive(
    leaves,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(keys, children, max_size=6)),
    max_leaves=25,
)


@st.composite
def jsonish(draw) -> str:
    """JSON-like text: a serialized value (NaN/Infinity literals allowed), then mangled the ways models do."""
    obj = draw(json_values)
    if draw(st.booleans()):
        obj = {"self_prob": obj, "peer_prediction": draw(json_values)}
    s = json.dumps(obj, ensure_ascii=draw(st.booleans()), allow_nan=True)
    mangles = {
        "none": lambda: s,
        "truncate": lambda: s[: draw(st.integers(0, len(s)))],
        "fence": lambda: f"```json\n{s}\n```",
        "prose": lambda: draw(st.text(max_size=20)) + s + draw(st.text(max_size=20)),
        "quotes": lambda: s.replace('"', "'"),
        "comma": lambda: s.replace("}", ",}").replace("]", ",]"),
        "percent": lambda: s.replace(",", "%,"),
        "double": lambda: s + "\n" + s,
    }
    return mangles[draw(st.sampled_from(sorted(mangles)))]()


@st.composite
def good_commit(draw):
    vals = st.lists(st.floats(min_value=0, max_value=1e6), min_size=4, max_size=4)
    return dict(zip(LABELS, draw(vals.filter(lambda v: sum(v) > 1e-6))))


ADVERSARIAL = [
    "",
    "{",
    "}" * 1000 + "{" * 1000,
    "{" * 100_000,
    '{"self_prob": ' + "[" * 50_000 + "]" * 50_000 + "}",
    '{"self_prob": {"A": ' + "{" * 5000 + "}" * 5000 + "}}",
    '{"self_prob": {"A": 1' + "0" * 400 + ', "B": 1}}',
    '{"self_prob": {"A": 1' + "0" * 5000 + "}}",
    '{"self_prob": {"A": 1e999, "B": -1e999, "C": NaN, "D": Infinity}}',
    '{"self_prob": {"A": -Infinity, "B": 0.5}}',
    "{'self_prob': {'A': 10**400, 'B': 1}}",
    '{"self_prob": {"A": "9' * 3 + '"}}',
    '{"self_prob": {"' + "(" * 3000 + " " * 3000 + 'x": 1}}',
    '{"self_prob": {"A": {"p": {"p": {"p": {"p": {"p": {"p": {"p": {"p": {"p": {"p": 0.5}}}}}}}}}}}}',
    '{"self_prob": {"\u0410": 1, "B": 0}}',  # Cyrillic A
    '{"self_prob": {"A": "\u0663", "B": "\u00bd"}}',  # Arabic-Indic three, one half
    '{"self_prob": {"A": true, "B": false, "C": null}}',
    '{"self_prob": [0.1, 0.2, 0.3, 0.4], "peer_prediction": [1e400, 0, 0, 0]}',
    '{"self_prob": {"A": 0, "B": 0, "C": 0, "D": 0}}',
    '```json\n{"self_prob": {"A": 1}}```' * 2000,
    "\x00\ud800\udfff" * 10,
    '{"a": 1}' * 20_000,
]


# ----------------------------------------------------------------------------- properties
@SETTINGS
@given(text=st.one_of(st.text(max_size=300), jsonish()), want_q=st.booleans())
@example(text='{"self_prob": {"A": 1' + "0" * 400 + "}}", want_q=False)
@example(text='{"x": ' + "[" * 3000 + "]" * 3000 + "}", want_q=True)
def test_any_text(text, want_q):
    check(parse_commit(text, LABELS, want_q, OPTIONS), want_q)


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
@pytest.mark.parametrize("want_q", [False, True])
def test_adversarial_strings(text, want_q):
    check(parse_commit(text, LABELS, want_q, OPTIONS), want_q)


@pytest.mark.parametrize(
    "text",
    [
        '{"self_prob": {"A": Infinity, "B": 0.1}}',  # once p = [0, 1], the stated answer flipped
        '{"self_prob": {"A": 1' + "0" * 400 + ', "B": 1}}',
        '{"self_prob": {"A": 0.2, "B": NaN}}',
        '{"self_prob": {"A": 1e999, "B": 0.5}}',
        '{"self_prob": {"A": "Infinity", "B": 0.5}}',
        '{"self_prob": {"A": -Infinity, "B": 0.5}}',
    ],
)
def test_a_non_finite_belief_is_a_parse_failure(text):
    p, _, rep = parse_commit(text, LABELS, False)
    assert p is None and rep["ok"] is False  # a flagged failure, not a made-up belief


def test_a_non_finite_forecast_is_a_forecast_failure():
    p, q, rep = parse_commit('{"self_prob": {"A": 0.7, "B": 0.3}, "peer_prediction": {"A": Infinity}}', LABELS, True)
    assert p is not None and q is None and rep["q_ok"] is False


def test_missing_labels_get_zero_and_unknown_keys_and_non_numbers_are_dropped_and_reported():
    p, _, rep = parse_commit('{"self_prob": {"A": 1, "C": 3, "Z": 5, "Y": 2, "B": "x"}}', LABELS, False)
    assert p.tolist() == [0.25, 0, 0.75, 0] and rep["missing"] == ["B", "D"] and rep["unknown"] == ["Z", "Y"]
    for text in ('{"self_prob": {"Z": 1}}', '{"self_prob": {"A": 0, "B": "x"}}', '{"self_prob": {}}'):
        assert parse_commit(text, LABELS, False)[0] is None  # no usable mass: a failure, never a uniform belief


@SETTINGS
@given(p=good_commit(), q=good_commit(), style=st.sampled_from(["plain", "fence", "prose", "percent"]))
def test_well_formed_commitments_round_trip(p, q, style):
    s = json.dumps({"self_prob": p, "peer_prediction": q})
    if style == "fence":
        s = f"Sure.\n```json\n{s}\n```"
    elif style == "prose":
        s = f"My answer: {s} -- hope that helps"
    elif style == "percent":
        s = json.dumps({"self_prob": {k: f"{v}%" for k, v in p.items()}, "peer_prediction": q})
    gp, gq, rep = parse_commit(s, LABELS, True, OPTIONS)
    check((gp, gq, rep), True)
    want_p = np.array([p[k] for k in LABELS]) / sum(p.values())
    want_q = np.array([q[k] for k in LABELS]) / sum(q.values())
    if style != "percent":  # "1e-05%" style strings lose their exponent: the value is still a distribution
        np.testing.assert_allclose(gp, want_p, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gq, want_q, rtol=1e-6, atol=1e-9)


# ----------------------------------------------------------------------------- the agent around the parser
def scripted(*texts):
    """A client replying with `texts` in turn (commit, then repair), then with nothing."""
    left = list(texts)
    return SimpleNamespace(generate=lambda *a, **kw: Completion(left.pop(0) if left else "", None, network_calls=1))


Q = Question("q", "props", "Capital of France?", OPTIONS, "A")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.one_of(st.text(max_size=200), jsonish()),
    second=st.one_of(st.text(max_size=200), jsonish()),
    role=st.sampled_from(["debater", "solo", "moderator"]),
)
def test_agent_commitment_is_always_a_valid_belief(first, second, role):
    agent = LLMAgent(AgentSpec(), scripted(first, second), seed=0)
    turn = Turn(Q, 0 if role != "moderator" else -1, 1, (), role=role, want_peer_prediction=True)
    step = agent.commit(turn, "argument")
    want_q = role == "debater"
    check((step.p, step.q, {"ok": True}), want_q)
    if step.parse_failure:  # uniform and flagged, counted in the usage that reaches the transcript
        assert step.p.tolist() == [0.25] * 4 and step.usage["parse_failures"] == 1 and step.usage["repairs"] == 1
    else:
        assert "parse_failures" not in step.usage
