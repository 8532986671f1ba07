"""LLM agents: prompts, commit parsing, repair/fallback, population wiring (fake server, no network)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from acemad_utils.agents.client import LLMClient
from acemad_utils.agents.llm_agent import LLMAgent, LLMPopulation
from acemad_utils.experiments import profiles
from acemad_utils.experiments.runner import identity as _identity
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.commit import argument_of, parse_commit
from acemad_utils.protocol.config import ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS, NAIVE_AGENT, DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.protocol.prompts import ARGUMENT_PLACEHOLDER, PERSONAS
from acemad_utils.protocol.schema import AgentSpec, Question, Turn
from tests.fake_openai import FakeOpenAI, Reply

Q = Question("q1", "demo", "What color is the sky on a clear day?", {"A": "Green", "B": "Blue", "C": "Red"}, "B")
AB = ("A", "B", "C")
KEY = "sk-test-agents-SECRET"


def turn(**kw):
    return Turn(**{"question": Q, "agent": 0, "round": 1, "history": ()} | kw)


# ----------------------------------------------------------------------------- parsing
CASES = [  # (reply, p, q); q None: no peer prediction read
    ('{"self_prob": {"A": 0.1, "B": 0.8, "C": 0.1}, "peer_prediction": {"A": 0.6, "B": 0.3, "C": 0.1}}',
     [0.1, 0.8, 0.1], [0.6, 0.3, 0.1]),
    ('Here you go:\n```json\n{"self_prob": {"A": 0.2, "B": 0.8, "C": 0}, "peer_prediction": {"A": 1, "B": 0, "C": 0}}'
     "\n```\nHope it helps", [0.2, 0.8, 0], [1, 0, 0]),
    ("My belief is {'self_prob': {'a': 0.5, 'b': 0.5, 'c': 0.0,}, "
     "'peer_prediction': {'A': 0.5, 'B': 0.5, 'C': 0,},} ok", [0.5, 0.5, 0], [0.5, 0.5, 0]),
    ('{"self_prob": {"A": "20%", "B": "70%", "C": "10%"}, "peer_prediction": {"A": 50, "B": 30, "C": 20}}',
     [0.2, 0.7, 0.1], [0.5, 0.3, 0.2]),
    ('{"self_prob": {"B": 0.9, "D": 0.5}, "peer_prediction": {"A": 0.5, "B": 0.5}}', [0, 1, 0], [0.5, 0.5, 0]),
    ('{"Self Prob": {"Option A": 0.25, "(B)": 0.75}, "peer": {"Blue": 0.4, "Green": 0.6}}', [0.25, 0.75, 0],
     [0.6, 0.4, 0]),
    ('{"A": 0.3, "B": 0.7}', [0.3, 0.7, 0], None),
    ('{"self_prob": {"A": 0, "B": 1, "C": 0}}\nand\n{"peer_prediction": {"A": 1, "B": 0, "C": 0}}', [0, 1, 0],
     [1, 0, 0]),
    ('{"self_prob": {"A": 0.5, "B": 0.5, "C": 0}, "peer_prediction": {"A": 0.9', [0.5, 0.5, 0], [1, 0, 0]),  # cut off
    *[(bad, None, None) for bad in ("", "I think B.", '{"self_prob": {"X": 1}}', '{"self_prob": {"A": 0}}', "{{{")],
]  # fmt: skip


@pytest.mark.parametrize("text,p,q", CASES)
def test_parse_commit_tolerates_common_mistakes_and_refuses_garbage(text, p, q):
    gp, gq, rep = parse_commit(text, AB, want_q=True, options=Q.options)
    assert rep["ok"] is (p is not None)
    if p is not None:
        np.testing.assert_allclose(gp, p, atol=1e-9)
    if q is None:
        assert gq is None and rep.get("q_ok") is not True
    else:
        np.testing.assert_allclose(gq, q, atol=1e-9)


# ----------------------------------------------------------------------------- agent
GOOD = json.dumps({"self_prob": {"A": 0.1, "B": 0.8, "C": 0.1}, "peer_prediction": {"A": 0.5, "B": 0.4, "C": 0.1}})


def by_kind(commit_replies):
    """Arguments for free-text calls; the next scripted reply for structured (commit/repair) calls."""
    it = iter(commit_replies)

    def script(body, n):
        return Reply("The sky is blue: B.") if "response_format" not in body else Reply(next(it))

    return script


def test_agent_act_two_calls_usage_and_seeds():
    with FakeOpenAI(by_kind([GOOD, GOOD])) as srv:
        client = LLMClient("fake", srv.url, KEY)
        a0, a1 = (LLMAgent(AgentSpec("Skeptic", temperature=0.6), client) for _ in range(2))
        step = a0.act(turn())
        a1.act(turn(agent=1))
        assert step.message == "The sky is blue: B." and not step.parse_failure
        np.testing.assert_allclose(step.p, [0.1, 0.8, 0.1])
        np.testing.assert_allclose(step.q, [0.5, 0.4, 0.1])
        assert step.usage == dict(calls=2, network_calls=2, cache_hits=0, prompt_tokens=20, completion_tokens=10)
        argue, commit = srv.requests[0], srv.requests[1]
        assert argue["messages"][0] == {"role": "system", "content": PERSONAS["Skeptic"]}
        assert argue["temperature"] == 0.6 and "response_format" not in argue
        schema = commit["response_format"]["json_schema"]["schema"]
        assert schema["required"] == ["self_prob", "peer_prediction"]
        assert schema["properties"]["self_prob"]["required"] == list(AB)
        assert "Your argument this round:\nThe sky is blue: B." in commit["messages"][1]["content"]
        # same prompt, different agent: different per-call seeds so the samples are independent
        assert argue["messages"] == srv.requests[2]["messages"] and argue["seed"] != srv.requests[2]["seed"]


ONLY_P = '{"self_prob": {"A": 0, "B": 1, "C": 0}}'
THIRD = [1 / 3] * 3


@pytest.mark.parametrize("first, second, failure, p, q, flag", [
    ("no idea, sorry", GOOD, False, [0.1, 0.8, 0.1], [0.5, 0.4, 0.1], "repaired"),
    ("garbage", "still garbage", True, THIRD, THIRD, "repair_raw"),  # uniform, flagged: never an answer
    (ONLY_P, ONLY_P, False, [0, 1, 0], THIRD, "q_parse_failure"),  # the belief stands; the forecast is uniform
])  # fmt: skip
def test_an_unread_commitment_is_repaired_once_else_uniform_and_flagged(first, second, failure, p, q, flag):
    with FakeOpenAI(by_kind([first, second])) as srv:
        step = LLMAgent(AgentSpec(), LLMClient("fake", srv.url, KEY)).act(turn())
        assert srv.count == 3 and srv.requests[-1]["messages"][-2] == {"role": "assistant", "content": first}
    assert step.parse_failure is failure and step.info[flag] and len(json.dumps(step.info)) < 1000
    assert (step.usage["repairs"], step.usage.get("parse_failures", 0)) == (1, int(failure))
    np.testing.assert_allclose(step.p, p)
    np.testing.assert_allclose(step.q, q)


def test_moderator_and_solo_commit_only_self_prob():
    with FakeOpenAI(by_kind([ONLY_P] * 2)) as srv:
        agent = LLMAgent(AgentSpec(), LLMClient("fake", srv.url, KEY))
        for t in (turn(role="moderator", agent=-1), turn(role="solo")):
            step = agent.act(t)
            assert step.q is None and not step.parse_failure
        schemas = [b["response_format"]["json_schema"]["schema"] for b in srv.requests if "response_format" in b]
        assert all(list(s["properties"]) == ["self_prob"] for s in schemas)


# ----------------------------------------------------------------------------- population
def test_population_one_client_per_endpoint_and_per_agent_models(tmp_path):
    with FakeOpenAI(by_kind([GOOD] * 10)) as a, FakeOpenAI(by_kind([GOOD] * 10)) as b:
        pop = LLMPopulation(model="base-model", base_url=a.url, api_key=KEY, cache=str(tmp_path / "c.sqlite"))
        specs = [AgentSpec(), AgentSpec("Skeptic", 0.6, "slow"), AgentSpec(model="other-model", base_url=b.url)]
        identity = _identity(pop.describe())
        agents = pop.agents(specs, Q)
        assert len(agents) == 3 and all(ag.concurrent for ag in agents)
        assert agents[0].client is agents[1].client and agents[2].client is not agents[0].client
        for i, ag in enumerate(agents):
            ag.act(turn(agent=i))
        assert a.count == 4 and b.count == 2 and b.requests[0]["model"] == "other-model"
        assert "step by step" in a.requests[2]["messages"][1]["content"]
        mod = pop.moderator(Q)
        assert mod.spec == NAIVE_AGENT  # the baselines' plain assistant, like every other baseline agent
        d = json.dumps(pop.describe())
        assert KEY not in d and a.url not in d and b.url not in d and "http" not in d
        # The population describes what it was built with; "other-model" is the method's (its roster, in
        # meta.json per method). Recording models as agents use them changed the run identity mid-process, so
        # re-running the same experiment in that process was refused as "a different population".
        assert pop.describe()["models"] == ["base-model"] and pop.synthetic is False
        assert _identity(pop.describe()) == identity
        u = pop.usage()
        assert (u["calls"], u["network_calls"], u["cache_hits"]) == (6, 6, 0)
        # warm rerun: zero requests, same steps
        for i, ag in enumerate(pop.agents(specs, Q)):
            ag.act(turn(agent=i))
        assert a.count == 4 and b.count == 2 and pop.usage()["cache_hits"] == 6


def test_single_call_mode_makes_one_call_per_agent_round():
    # One structured reply carries the argument and the commitment: N*T calls instead of 2*N*T.
    reply = json.dumps({"argument": "B is right because of physics.", "self_prob": {"A": 0.2, "B": 0.8},
                        "peer_prediction": {"A": 0.6, "B": 0.4}})  # fmt: skip
    q = Question("t/single", "test", "Which?", {"A": "a", "B": "b"}, "B")
    with FakeOpenAI(default=reply) as srv:
        pop = LLMPopulation(model="m", base_url=srv.url, api_key="sk-fake", calls="single")
        rec = run_question(q, pop, DebateConfig(method="acemad", n_agents=3, rounds=2))
    assert srv.count == 3 * 2
    e = rec["rounds"][1][0]
    assert e["message"] == "B is right because of physics." and e["p"] == [0.2, 0.8] and e["q"] == [0.6, 0.4]
    assert rec["final"]["answer"] == "B" and not any(x["parse_failure"] for r in rec["rounds"] for x in r)


def test_single_call_placeholder_argument_counts_as_missing():
    assert argument_of(f'{{"argument": "{ARGUMENT_PLACEHOLDER}", "self_prob": {{"A": 1}}}}') == ""
    assert argument_of('{"argument": "Because B.", "self_prob": {"A": 1}}') == "Because B."


def test_the_argue_cap_is_a_parameter_that_reaches_the_request(tmp_path):
    assert Setup.from_params({"ARGUE_MAX_TOKENS": 123}).max_tokens == (123, COMMIT_MAX_TOKENS)
    assert Setup.from_params({}).max_tokens == (ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS)
    with pytest.raises(SystemExit, match="ARGUE_MAX_TOKENS"):
        profiles.load_profile("default", {"ARGUE_MAX_TOKENS": 0})
    with FakeOpenAI(by_kind([GOOD] * 2)) as srv:
        pop = LLMPopulation(model="m", base_url=srv.url, api_key=KEY, max_tokens=(123, COMMIT_MAX_TOKENS))
        pop.agents([AgentSpec()], Q)[0].act(turn())
        assert [r.get("max_tokens") for r in srv.requests if "messages" in r] == [123, COMMIT_MAX_TOKENS]
