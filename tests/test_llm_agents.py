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
from acemad_utils.protocol.commit import argument_of, commit_schema, parse_commit
from acemad_utils.protocol.config import ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS, NAIVE_AGENT
from acemad_utils.protocol.prompts import ARGUMENT_PLACEHOLDER, PERSONAS, argue_prompt, commit_prompt, json_shape
from acemad_utils.protocol.schema import AgentSpec, Message, Question, Turn

try:
    from tests.fake_openai import FakeOpenAI, Reply
except ImportError:
    from fake_openai import FakeOpenAI, Reply

Q = Question("q1", "demo", "What color is the sky on a clear day?", {"A": "Green", "B": "Blue", "C": "Red"}, "B")
AB = ("A", "B", "C")
KEY = "sk-test-agents-SECRET"


def turn(**kw):
    return Turn(**{"question": Q, "agent": 0, "round": 1, "history": ()} | kw)


# ----------------------------------------------------------------------------- prompts
def test_argue_prompt_follows_the_paper():
    hist = (Message(2, 1, "It is B."), Message(0, 1, "I said A."), Message(-1, 1, "Summary: B."))
    text = argue_prompt(turn(round=2, history=hist))
    assert text.startswith("Question: What color is the sky on a clear day?\n\nOptions:\nA. Green\nB. Blue\nC. Red")
    assert (
        "Conversation History:\nAgent 3 (round 1): It is B.\n\nAgent 1 (round 1, you): I said A.\n\n"
        "Moderator (round 1): Summary: B." in text
    )
    assert "Please provide a concise argument for what you believe is the correct answer." in text
    assert "Do NOT output JSON here. Just natural language debate." in text
    assert "(none yet)" in argue_prompt(turn())
    assert "step by step" in argue_prompt(turn(), thinking="slow")
    assert "Conversation History" not in argue_prompt(turn(role="solo"))
    assert "moderator" in argue_prompt(turn(role="moderator", agent=-1)).lower()


def test_commit_prompt_shape_has_labels_but_no_numbers():
    text = commit_prompt(turn(), "B, obviously.")
    assert "Your argument this round:\nB, obviously." in text
    assert "Peer_Prediction" in text and "AVERAGE" in text
    assert json_shape(AB, True) in text
    shape = json_shape(AB, True)
    assert '"C": <probability>' in shape and not any(ch.isdigit() for ch in shape)
    solo = commit_prompt(turn(want_peer_prediction=False), "B")
    assert "peer_prediction" not in solo and "Peer_Prediction" not in solo
    assert "peer_prediction" not in commit_prompt(turn(role="moderator", agent=-1), "B")
    s = commit_schema(AB, True)
    assert s["required"] == ["self_prob", "peer_prediction"] and s["properties"]["self_prob"]["required"] == list(AB)


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
]  # fmt: skip


@pytest.mark.parametrize("text,p,q", CASES)
def test_parse_commit_tolerates_common_mistakes(text, p, q):
    gp, gq, rep = parse_commit(text, AB, want_q=True, options=Q.options)
    assert rep["ok"]
    np.testing.assert_allclose(gp, p, atol=1e-9)
    if q is None:
        assert gq is None and rep["q_ok"] is False
    else:
        np.testing.assert_allclose(gq, q, atol=1e-9)


@pytest.mark.parametrize(
    "text", ["", "I think B.", '{"self_prob": {"X": 1}}', '{"self_prob": {"A": 0, "B": 0}}', "{{{"]
)
def test_parse_commit_garbage(text):
    p, q, rep = parse_commit(text, AB, want_q=True)
    assert p is None and not rep["ok"]


def test_parse_commit_reports_extra_and_missing_labels():
    p, q, rep = parse_commit('{"self_prob": {"A": 1, "Z": 2}}', AB, want_q=False)
    assert rep["unknown"] == ["Z"] and rep["missing"] == ["B", "C"] and q is None


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
        a0 = LLMAgent(AgentSpec("Skeptic", temperature=0.6), client)
        a1 = LLMAgent(AgentSpec("Skeptic", temperature=0.6), client)
        step = a0.act(turn())
        a1.act(turn(agent=1))
        assert step.message == "The sky is blue: B." and not step.parse_failure
        np.testing.assert_allclose(step.p, [0.1, 0.8, 0.1])
        np.testing.assert_allclose(step.q, [0.5, 0.4, 0.1])
        assert step.usage == dict(calls=2, network_calls=2, cache_hits=0, prompt_tokens=20, completion_tokens=10)
        argue, commit = srv.requests[0], srv.requests[1]
        assert argue["messages"][0] == {"role": "system", "content": PERSONAS["Skeptic"]}
        assert argue["temperature"] == 0.6 and "response_format" in commit
        assert "Your argument this round:\nThe sky is blue: B." in commit["messages"][1]["content"]
        # same prompt, different agent: different per-call seeds so the samples are independent
        assert argue["messages"] == srv.requests[2]["messages"] and argue["seed"] != srv.requests[2]["seed"]


def test_repair_then_success():
    with FakeOpenAI(by_kind(["no idea, sorry", GOOD])) as srv:
        client = LLMClient("fake", srv.url, KEY)
        step = LLMAgent(AgentSpec(), client).act(turn())
        assert not step.parse_failure and step.info["repaired"] and step.usage["calls"] == 3
        np.testing.assert_allclose(step.p, [0.1, 0.8, 0.1])
        repair = srv.requests[-1]["messages"]
        assert repair[-2] == {"role": "assistant", "content": "no idea, sorry"}
        assert "JSON object only" in repair[-1]["content"]


def test_unreadable_commit_is_uniform_and_flagged():
    with FakeOpenAI(by_kind(["garbage", "still garbage"])) as srv:
        client = LLMClient("fake", srv.url, KEY)
        step = LLMAgent(AgentSpec(), client).act(turn())
        assert step.parse_failure and srv.count == 3
        np.testing.assert_allclose(step.p, [1 / 3] * 3)
        np.testing.assert_allclose(step.q, [1 / 3] * 3)
        assert len(json.dumps(step.info)) < 1000


def test_missing_peer_prediction_is_repaired_or_uniform_but_not_a_failure():
    only_p = '{"self_prob": {"A": 0, "B": 1, "C": 0}}'
    with FakeOpenAI(by_kind([only_p, only_p])) as srv:
        step = LLMAgent(AgentSpec(), LLMClient("fake", srv.url, KEY)).act(turn())
        assert not step.parse_failure and step.info["q_parse_failure"]
        np.testing.assert_allclose(step.p, [0, 1, 0])
        np.testing.assert_allclose(step.q, [1 / 3] * 3)


def test_moderator_and_solo_commit_only_self_prob():
    with FakeOpenAI(by_kind(['{"self_prob": {"A": 0, "B": 1, "C": 0}}'] * 2)) as srv:
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
    from acemad_utils.protocol.config import DebateConfig
    from acemad_utils.protocol.debate import run_question

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


def test_single_call_reply_is_parsed_once(monkeypatch):
    # The argument comes from the same parse as the commitment: one scan of the reply for JSON objects.
    from acemad_utils.agents import llm_agent as agents
    from acemad_utils.protocol import commit

    calls, parses = [], []
    real, real_parse = commit.objects, agents.parse_commit
    monkeypatch.setattr(commit, "objects", lambda text: calls.append(text) or real(text))
    # and one call of the parser itself (a second reading of the reply, by any route, would be a second call)
    monkeypatch.setattr(agents, "parse_commit", lambda *a, **k: parses.append(a[0]) or real_parse(*a, **k))
    reply = json.dumps({"argument": "Blue, by Rayleigh scattering.", **json.loads(GOOD)})
    with FakeOpenAI(default=reply) as srv:
        agent = LLMAgent(AgentSpec("Skeptic"), LLMClient("fake", srv.url, KEY), calls="single")
        step = agent.act(turn())
    assert step.message == "Blue, by Rayleigh scattering." and not step.parse_failure
    assert len(calls) == 1 and parses == [reply]


def test_the_argue_cap_is_a_parameter_that_reaches_the_request(tmp_path):
    assert Setup.from_params({"ARGUE_MAX_TOKENS": 123}).max_tokens == (123, COMMIT_MAX_TOKENS)
    assert Setup.from_params({}).max_tokens == (ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS)
    with pytest.raises(SystemExit, match="ARGUE_MAX_TOKENS"):
        profiles.load_profile("default", {"ARGUE_MAX_TOKENS": 0})
    with FakeOpenAI(by_kind([GOOD] * 2)) as srv:
        pop = LLMPopulation(model="m", base_url=srv.url, api_key=KEY, max_tokens=(123, COMMIT_MAX_TOKENS))
        pop.agents([AgentSpec()], Q)[0].act(turn())
        assert [r.get("max_tokens") for r in srv.requests if "messages" in r] == [123, COMMIT_MAX_TOKENS]
