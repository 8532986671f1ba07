"""Failing never earns weight: a peer prediction q that did not parse (after the repair call) is
scored as the worst forecast of its round, so its agent's weight cannot rise, on every backend (the debate
engine reads the Step's flag whatever made it; the LLM agent sets it, tests/test_llm_agents.py)."""

from __future__ import annotations

import numpy as np

from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import FAILED_FORECAST_RULE, run_question
from acemad_utils.protocol.schema import Agent, AgentSpec, Population, Question, Step, Turn
from acemad_utils.report import rescoring as A

Q4 = Question("t/1", "test", "?", {"A": "a", "B": "b", "C": "c", "D": "d"}, "B")
# Every agent parsed its belief; agents 0-3 forecast their peers badly (all mass on A), agent 4's
# forecast did not parse and was replaced by a uniform one, which happens to be close to the peers' mean belief.
P_ROW = np.array([0.3, 0.3, 0.2, 0.2])
BAD_Q = np.array([1.0, 0.0, 0.0, 0.0])
UNIFORM = np.full(4, 0.25)


class _Forecaster(Agent):
    def __init__(self, failed_q: bool):
        self.failed_q, self.spec = failed_q, AgentSpec()

    def act(self, turn: Turn) -> Step:
        info = {"q_parse_failure": True} if self.failed_q else {}
        return Step(message="m", p=P_ROW.copy(), q=(UNIFORM if self.failed_q else BAD_Q).copy(), info=info)


class _Pop(Population):
    def __init__(self, failing=4):
        self.failing = failing

    def agents(self, specs, question, repeat=0):
        return [_Forecaster(i == self.failing) for i in range(len(specs))]


def test_a_uniform_stand_in_scored_like_a_forecast_would_make_the_failed_agent_heaviest():
    P = np.broadcast_to(P_ROW, (3, 5, 4))
    Q = np.stack([np.stack([BAD_Q] * 4 + [UNIFORM])] * 3)
    _, W = B.acemad_weights(P, Q, np.ones((3, 5), bool))
    assert W[-1].argmax() == 4 and W[-1][4] > W[-1][:4].max()


def test_an_unparsed_forecast_never_raises_its_agents_weight():
    rec = run_question(Q4, _Pop(), DebateConfig(method="acemad", n_agents=5, rounds=3))
    weights = np.array([[e["weight"] for e in rnd] for rnd in rec["rounds"]])  # (T, N) after each round
    scores = np.array([[e["score"] for e in rnd] for rnd in rec["rounds"]])
    before = 1.0 / 5
    for t in range(3):
        assert weights[t, 4] <= before + 1e-9  # never rises ...
        assert weights[t, 4] <= weights[t, :4].min() + 1e-9  # ... and never beats an agent that forecast
        assert scores[t, 4] == scores[t, :4].min()  # scored as the round's worst forecast
        before = weights[t, 4]
    assert all(rnd[4].get("q_parse_failure") for rnd in rec["rounds"])
    assert not any(e.get("q_parse_failure") for rnd in rec["rounds"] for e in rnd[:4])
    assert rec["unparsed_forecasts"] == {"count": 3, "scored_as": FAILED_FORECAST_RULE}
    # re-scoring the stored record gives the engine's weights (same rule, read from the entries)
    rescored = A.weights(A.stack([rec]))[0]
    np.testing.assert_allclose(rescored, weights, atol=1e-6)
    clean = run_question(Q4, _Pop(failing=None), DebateConfig(method="acemad", n_agents=5, rounds=2))
    assert "unparsed_forecasts" not in clean and not any("q_parse_failure" in e for r in clean["rounds"] for e in r)
