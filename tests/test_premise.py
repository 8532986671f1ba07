"""The premise check and the gain split: pure functions of stored records (no model call)."""

from __future__ import annotations

import numpy as np
import pytest

from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.report import premise as PR


def _record(i, scores, right, failed=()):
    """A one-round AceMAD record: agents with these scores, right (answer A) or wrong (answer B)."""
    entries = [
        {
            "agent": a,
            "p": [0.9, 0.1, 0, 0] if ok else [0.1, 0.9, 0, 0],
            "score": s,
            "parse_failure": a in failed,
        }
        for a, (s, ok) in enumerate(zip(scores, right))
    ]
    return {
        "question_id": f"q{i}",
        "benchmark": "demo",
        "method": "AceMAD (T=1)",
        "method_kind": "acemad",
        "status": "ok",
        "labels": list("ABCD"),
        "answer": "A",
        "rounds": [entries],
        "final": {"answer": "A", "correct": True},
    }


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
    assert " holds." in PR.premise_sentence(good, synthetic=False)
    text = PR.premise_sentence(bad, synthetic=False)
    assert "fails" in text and "no gain of AceMAD here can come from who scores well" in text
    assert "population's assumption" in PR.premise_sentence(good, synthetic=True)
    assert "population's assumption" not in PR.premise_sentence(good, synthetic=False)


def test_agents_tied_at_the_top_share_it_and_failed_commitments_are_counted_not_scored():
    rec = _record(0, [0.9, 0.9, 0.95, 0.1, 0.1], RIGHT, failed=(2,))  # the failed agent's score is not looked at
    row = PR.premise([rec]).iloc[0]
    assert row.top_agent == pytest.approx(100.0) and row.random_agent == pytest.approx(50.0)
    assert row.parse_failure == pytest.approx(1 / 5)
    tied = PR.premise([_record(0, [0.9, 0.2, 0.9, 0.1, 0.1], RIGHT)]).iloc[0]
    assert tied.top_agent == pytest.approx(50.0)


def test_no_acemad_run_means_no_check_and_a_sentence_that_says_so():
    rec = dict(_record(0, [0.5] * 5, RIGHT))
    rec["rounds"] = [[dict(e, score=None) for e in rec["rounds"][0]]]  # a baseline MAD: no scores
    table = PR.premise([rec])
    assert table.empty and "no premise check" in PR.premise_sentence(table, synthetic=False)


@pytest.fixture(scope="module")
def synthetic_records():
    items = make_items(40, k=4, seed=2)
    pop = SimPopulation(seed=1)
    cfgs = [DebateConfig(method="acemad"), DebateConfig(method="acemad", weighting="uniform")]
    cfgs.append(DebateConfig(method="majority"))
    return [run_question(q, pop, c) for q in items for c in cfgs]


def test_the_split_pairs_acemad_with_each_control_on_its_own_commitments(synthetic_records):
    recs = synthetic_records
    table = PR.split(recs, others=["Majority Voting"])
    assert set(table["method"]) == {"AceMAD (T=3)"}  # an ablation run is a control, not a target
    controls = list(table["control"])
    assert controls == [
        "AceMAD (T=3)",
        PR.UNIFORM,
        PR.SELF_BELIEF,
        PR.SHUFFLED,
        PR.SURPRISINGLY_POPULAR,
        PR.ROUND0,
        "Majority Voting",
    ]
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


def test_the_round0_majority_is_the_plurality_of_the_first_answers(synthetic_records):
    recs = [r for r in synthetic_records if r["method"] == "AceMAD (T=3)"]
    got = PR.round0_records(recs)
    for rec, g in zip(recs, got):
        votes = [int(np.argmax(e["p"])) for e in rec["rounds"][0]]
        counts = np.bincount(votes, minlength=len(rec["labels"]))
        if (counts == counts.max()).sum() == 1:  # no tie: the plurality is unambiguous
            assert g["final"]["answer"] == rec["labels"][int(counts.argmax())]
