"""The premise check and the gain split: pure functions of stored records (no model call)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from acemad_utils import api
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.command import main
from acemad_utils.cost import estimate as C
from acemad_utils.data.benchmarks import load_demo
from acemad_utils.data.sim_params import SimParams
from acemad_utils.protocol.config import NAIVE_AGENT, DebateConfig
from acemad_utils.protocol.debate import run_batch, run_question
from acemad_utils.report import premise as PR
from tests.conftest import acemad_record
from tests.fake_openai import FakeOpenAI, PremiseAgents


def _record(i, scores, right, failed=()):
    return acemad_record(scores, right, failed=failed, question_id=f"q{i}", benchmark="demo", method="AceMAD (T=1)",
                         method_kind="acemad", final={"answer": "A", "correct": True})  # fmt: skip


RIGHT = [True, True, False, False, False]


def _run(top_is_right: bool, n=30):
    """n questions where the two right agents score best (or worst), plus a few where everyone agrees."""
    scores = [0.9, 0.8, 0.3, 0.2, 0.1] if top_is_right else [0.1, 0.2, 0.9, 0.8, 0.7]
    return [_record(i, scores, RIGHT) for i in range(n)] + [_record(n + i, [0.5] * 5, [True] * 5) for i in range(5)]


def test_the_check_tells_a_premise_that_holds_from_one_that_fails():
    good, bad = PR.premise(_run(True)), PR.premise(_run(False))
    g, b = good.iloc[-1], bad.iloc[-1]
    assert g["round"] == "all" and g.n == 35 and g.n_split == 30
    # the top scorer is always right on 30 of 35 questions, a random agent 2 of 5 there
    assert g.lift == pytest.approx(100 * 30 / 35 * (1 - 2 / 5)) and g.lift_lo > 0
    assert b.lift == pytest.approx(100 * 30 / 35 * (0 - 2 / 5)) and b.lift_hi < 0
    assert g.rank_corr > 0 > b.rank_corr
    assert (g.verdict, b.verdict) == ("holds", "fails") and list(good.columns) == PR.PREMISE_COLUMNS
    assert " holds." in PR.premise_sentence(good, synthetic=False)
    text = PR.premise_sentence(bad, synthetic=False)
    assert "fails" in text and "no gain of AceMAD here can come from who scores well" in text
    assert "population's assumption" in PR.premise_sentence(good, synthetic=True)
    assert "population's assumption" not in PR.premise_sentence(good, synthetic=False)


def test_a_few_questions_that_split_the_agents_are_not_judged_however_one_sided():
    """A bootstrap over one question is a point: [-40, -40] must not read as "fails" (nor a few as "holds")."""
    for top_is_right in (True, False):
        few = PR.premise(_run(top_is_right, n=PR.MIN_SPLIT - 1)).iloc[-1]
        assert few.n_split == PR.MIN_SPLIT - 1 and few.verdict == "not judged"
        assert (few.lift_lo > 0) if top_is_right else (few.lift_hi < 0)  # one-sided, and still not judged
    text = PR.premise_sentence(PR.premise(_run(False, n=1)), synthetic=False)
    assert f"is not judged at this n (fewer than {PR.MIN_SPLIT} questions" in text and "fails" not in text
    assert "cannot say whether a gain of AceMAD could come from who scores well" in text
    enough = PR.premise(_run(False, n=PR.MIN_SPLIT)).iloc[-1]
    assert enough.verdict == "fails"
    agree = [_record(i, [0.5] * 5, [True] * 5) for i in range(PR.MIN_SPLIT)]  # every agent right every time
    assert PR.premise(agree).iloc[-1].verdict == "unseen" and PR.premise(agree[:3]).iloc[-1].verdict == "not judged"
    one = PR.premise_sentence(PR.premise(agree[:1]), synthetic=False)  # no split: no correlation, no "+nan"
    assert "n = 1 question, 0 of them" in one and "nan" not in one.lower() and "no correlation" in one


def test_a_top_scorer_exactly_as_right_as_a_random_agent_is_a_lift_of_zero_with_no_sign():
    # lifts -80, +60 and +20 per question: their float mean, -1e-15, is no sign (nor a "-0.0")
    recs = [_record(0, [0.9, 0.1, 0.1, 0.1, 0.1], [False, True, True, True, True]),
            _record(1, [0.9, 0.1, 0.1, 0.1, 0.1], [True, True, False, False, False]),
            _record(2, [0.9, 0.9, 0.9, 0.9, 0.1], [True, True, True, True, False])]  # fmt: skip
    table = PR.premise(recs)
    row = table.iloc[-1]
    assert row["round"] == "all" and row.lift == 0 and row.rank_corr > 0
    text = PR.premise_sentence(table, synthetic=False)
    assert "a lift of +0.0 points" in text and "disagree in sign" not in text


def test_agents_tied_at_the_top_share_it_and_failed_commitments_are_counted_not_scored():
    rec = _record(0, [0.9, 0.9, 0.95, 0.1, 0.1], RIGHT, failed=(2,))  # the failed agent's score is not looked at
    row = PR.premise([rec]).iloc[0]
    assert row.top_agent == pytest.approx(100.0) and row.random_agent == pytest.approx(50.0)
    assert row.parse_failure == pytest.approx(1 / 5)
    tied = PR.premise([_record(0, [0.9, 0.2, 0.9, 0.1, 0.1], RIGHT)]).iloc[0]
    assert tied.top_agent == pytest.approx(50.0)


def test_no_scores_or_no_parsed_commitment_says_so_instead_of_a_number():
    rec = dict(_record(0, [0.5] * 5, RIGHT))
    rec["rounds"] = [[dict(e, score=None) for e in rec["rounds"][0]]]  # a baseline MAD: no scores
    table = PR.premise([rec])
    assert table.empty and "no premise check" in PR.premise_sentence(table, synthetic=False)
    table = PR.premise([_record(i, [0.5] * 5, RIGHT, failed=range(5)) for i in range(3)])
    assert len(table) == 1 and table.iloc[0].n == 0 and table.iloc[0].parse_failure == 1.0
    assert "cannot be measured" in PR.premise_sentence(table, synthetic=False)


@pytest.fixture(scope="module")
def synthetic_records():
    items = make_items(40, k=4, seed=2)
    pop = SimPopulation(seed=1)
    cfgs = [DebateConfig(method=m) for m in ("acemad", "majority", "self_consistency")]
    cfgs.insert(1, DebateConfig(method="acemad", weighting="uniform"))
    return [run_question(q, pop, c) for q in items for c in cfgs]


def test_the_split_pairs_acemad_with_each_control_on_its_own_commitments(synthetic_records):
    recs = synthetic_records
    table = PR.split(recs, others=["Majority Voting"])
    assert set(table["method"]) == {"AceMAD (T=3)"}  # an ablation run is a control, not a target
    controls = [PR.UNIFORM, PR.SELF_BELIEF, PR.SHUFFLED, PR.SURPRISINGLY_POPULAR, PR.ROUND0]
    assert list(table["control"]) == ["AceMAD (T=3)", *controls, "Majority Voting"]
    ace = [r["final"]["correct"] for r in recs if r["method"] == "AceMAD (T=3)"]
    top = table.iloc[0]
    assert top.accuracy == pytest.approx(100 * np.mean(ace)) and np.isnan(top.difference)
    rest = table.iloc[1:]
    np.testing.assert_allclose(rest["difference"], top.accuracy - rest["accuracy"], atol=1e-9)
    assert ((rest["p_value"] > 0) & (rest["p_value"] <= 1)).all() and (rest["n"] == 40).all()
    assert (rest["difference_lo"] <= rest["difference"]).all() and (rest["difference"] <= rest["difference_hi"]).all()
    # uniform weights on AceMAD's debate decide as the uniform-weighting run does (the same commitments)
    uni = [r["final"]["correct"] for r in recs if r["method"] == "AceMAD (T=3, uniform)"]
    assert rest.iloc[0].accuracy == pytest.approx(100 * np.mean(uni))
    # the round-0 majority is the plurality of the first answers
    ace = [r for r in recs if r["method"] == "AceMAD (T=3)"]
    round0 = [r for r in PR.control_records(recs, "AceMAD (T=3)") if r["method"] == PR.ROUND0]
    for rec, g in zip(ace, round0, strict=True):
        votes = [int(np.argmax(e["p"])) for e in rec["rounds"][0]]
        counts = np.bincount(votes, minlength=len(rec["labels"]))
        if (counts == counts.max()).sum() == 1:  # no tie: the plurality is unambiguous
            assert g["final"]["answer"] == rec["labels"][int(counts.argmax())]


def test_self_consistency_samples_the_naive_agent_once_per_acemad_turn():
    cfg = DebateConfig(method="self_consistency", n_agents=4, rounds=2)
    assert cfg.samples == 8 and cfg.specs() == [NAIVE_AGENT] * 8 and cfg.label == "Self-consistency (8 samples)"
    assert DebateConfig(method="self_consistency").samples == 15  # AceMAD's turns at N = 5, T = 3: 30 calls
    with pytest.raises(ValueError, match="roster"):
        DebateConfig(method="self_consistency", roster="acemad")
    q = make_items(1, k=4, seed=3)[0]
    rec = run_question(q, SimPopulation(seed=1), cfg)
    assert len(rec["rounds"]) == 1 and len(rec["rounds"][0]) == 8
    votes = np.bincount([int(np.argmax(e["p"])) for e in rec["rounds"][0]], minlength=4)
    assert votes[rec["labels"].index(rec["final"]["answer"])] == votes.max()  # the plurality
    assert run_batch([q], SimPopulation(seed=1), cfg, [0])[0]["method"] == cfg.label


def test_the_sampling_sentence_names_what_decides_self_consistency_on_the_synthetic_population(synthetic_records):
    recs, sc = synthetic_records, DebateConfig(method="self_consistency").label
    table, premise, population = PR.split(recs, others=[sc]), PR.premise(recs), SimPopulation(seed=1).describe()
    assert list(table["control"])[-1] == sc
    text = PR.premise_sentence(premise, True, table, population=population)
    # near-copies (crowd_copy) make the samples less independent
    assert all(
        w in text for w in ("number of calls spent on sampling", "trap_concentration", "not the paper's", "crowd_copy")
    )
    no_sampling = PR.premise_sentence(premise, True, PR.split(recs), population=population)
    assert "Re-decided from" in no_sampling and "trap_concentration" not in no_sampling  # nothing sampled to explain
    real = PR.premise_sentence(premise, False, table, population={"synthetic": False})
    assert "the same number of calls spent on sampling" in real and "trap_concentration" not in real


def test_the_sentence_says_which_controls_on_the_same_commitments_beat_the_protocol():
    """A control re-decided from AceMAD's own commitments that is ahead of AceMAD is said to be (the weights do not
    earn that part), next to those AceMAD is ahead of and those it cannot be told from; a p at the permutation
    floor reads as such, never as a p of 0. Ahead or behind takes the paired test too: an interval that excludes 0
    at p = 0.09 (a pilot's n) cannot be told apart."""
    row = lambda c, d, lo, hi: ["AceMAD (T=3)", c, 40.0, 38.0, 42.0, d, lo, hi, 1 / 10001, 300]
    split = pd.DataFrame(
        [row("AceMAD (T=3)", *[np.nan] * 3), row(PR.UNIFORM, 9.6, 8.1, 11.0), row(PR.SELF_BELIEF, -4.7, -6.1, -3.3),
         row(PR.SHUFFLED, 0.4, -1.0, 1.8), row(PR.ROUND0, -29.2, -54.2, -4.2)], columns=PR.SPLIT_COLUMNS,
    )  # fmt: skip
    [said] = PR._controls_sentence(split)
    assert f"ahead of {PR.UNIFORM} (+9.6 [+8.1, +11.0])" in said and f"behind {PR.SELF_BELIEF} (-4.7" in said
    assert f"not distinguishable from {PR.SHUFFLED}" in said and f"and {PR.ROUND0} (-29.2 [-54.2, -4.2])" in said
    split.loc[4, "p_value"] = 0.092
    [said] = PR._controls_sentence(split)
    assert f"not distinguishable from {PR.SHUFFLED} (+0.4 [-1.0, +1.8]) and {PR.ROUND0} (-29.2" in said
    assert PR.shown(split)["p_value"].iloc[1] == 1 / 10001 and PR.shown(split)["difference"].iloc[1] == 9.6
    # on the synthetic population, Self-belief only ahead names the assumption that lets it be
    params = SimParams(**SimPopulation(seed=1).describe()["params"])
    _, why = PR._controls_sentence(split, params)
    assert f"insight_susceptibility = {params.insight_susceptibility:g}" in why and "'decided by'" in why
    assert len(PR._controls_sentence(split.drop(index=2), params)) == 1  # not behind it: nothing to explain


# ----------------------------------------------------------------------------- against an endpoint
QUESTIONS = [
    {"question": f"Scripted question {i}?", "options": ["truth", "trap", "other"], "answer": "A", "id": f"s{i}"}
    for i in range(24)
]


@pytest.fixture
def premise_endpoint(request, monkeypatch, tmp_path):
    """A fake endpoint whose AceMAD agents carry the premise (param True) or not (False)."""
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI(PremiseAgents(holds=request.param)) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-premise")
        monkeypatch.delenv("MODEL", raising=False)
        yield srv, request.param


def test_a_question_without_a_gold_answer_is_scored_by_no_control(synthetic_records):
    """Every control of the split, the shuffled-score one (a share of draws) too, leaves it unscored as AceMAD does."""
    ace = [r for r in synthetic_records if r["method"] == "AceMAD (T=3)"]
    hidden = {ace[0]["question_id"]}
    ungraded = lambda r: dict(r, answer=None, final=dict(r["final"], correct=None))
    recs = [ungraded(r) if r["question_id"] in hidden else r for r in ace]
    for r in PR.control_records(recs, "AceMAD (T=3)"):
        assert (r["final"]["correct"] is None) == (r["question_id"] in hidden), r
    table = PR.split(recs)
    assert (table["n"] == len(ace) - 1).all(), table[["control", "n"]]


@pytest.mark.parametrize("premise_endpoint", [True, False], indirect=True, ids=["holds", "fails"])
def test_the_api_tells_agents_with_the_premise_from_agents_without(premise_endpoint):
    srv, holds = premise_endpoint
    res = api.run(QUESTIONS, ["acemad", "self_consistency"], model="fake-model", base_url=srv.url)
    row = res.premise().iloc[-1]
    assert row["round"] == "all" and row.n == len(QUESTIONS) and row.parse_failure == 0
    assert (row.lift_lo > 0) if holds else (row.lift_hi < 0), row
    assert (row.rank_corr > 0) == holds and row.verdict == ("holds" if holds else "fails")
    text = res.table().to_string()
    assert ("(points; premise holds)" in text) == holds and ("(points; premise fails)" in text) != holds
    for control in (PR.UNIFORM, PR.SELF_BELIEF, PR.SHUFFLED, PR.SURPRISINGLY_POPULAR, PR.ROUND0):
        assert f"AceMAD (T=3) minus {control} (paired)" in text
    assert "AceMAD (T=3) minus Self-consistency (15 samples) (paired)" in text
    # the compute-matched baseline made AceMAD's calls per question: 15 samples, argue + commit each
    sc = [r for r in res if r.method.startswith("Self-consistency")]
    assert all(r.record["usage"]["calls"] == 30 for r in sc)
    assert all(r.record["usage"]["calls"] == 30 for r in res if r.method.startswith("AceMAD"))


@pytest.mark.parametrize("premise_endpoint", [False], indirect=True)
def test_the_command_prints_the_premise_and_the_split_under_its_table(premise_endpoint, capsys, tmp_path):
    src = tmp_path / "q.jsonl"
    src.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS[:12]), encoding="utf-8")
    args = ["run", str(src), "--model", "fake-model", "--base-url", premise_endpoint[0].url]
    assert main([*args, "--methods", "acemad,majority,self_consistency"]) == 0
    out = capsys.readouterr().out
    assert "the premise (the agent whose peer prediction scores best knows more than a random agent) fails" in out
    assert "no gain of AceMAD here can come from who scores well" in out
    assert "AceMAD vs the same number of calls spent on sampling" in out and "Round-0 majority" in out


def test_the_estimate_prices_self_consistency_at_acemads_calls_per_question():
    qs, P_ = load_demo()[:2], {"SEED": 0, "BACKEND": "openai", "MODEL": "gpt-4o-mini", "CALLS": "two"}
    calls = lambda method: C.replay([DebateConfig(method=method)], qs, P_)["agent_calls"]
    assert calls("self_consistency") == calls("acemad") == 30 and calls("majority") == 10
