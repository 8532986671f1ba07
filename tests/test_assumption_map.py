"""Notebook 09's assumption map and the controls: registry, computation, words."""

from __future__ import annotations

import numpy as np
import pytest

from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.data.sim_params import CALIBRATION_GRID, ORIGINAL
from acemad_utils.experiments import assumptions as AM
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import SKEPTIC, DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.report import assumptions as RA
from acemad_utils.report import narrative as N
from acemad_utils.report import rescoring as A
from acemad_utils.report import tables as TB

SMALL = {
    "knowledge_link": (0.0, 1.0),
    "insight": (0.5,),
    "trap_concentration": (1.0, 4.0),
    "crowd_calibration": (0.0,),
    "crowd_copy": (SimParams().crowd_copy,),
}


def test_the_map_runs_each_distinct_population_once_and_only_with_the_synthetic_population():
    runs = R.runs("09_assumption_map", {"BACKEND": "sim"})
    names = [r.name for r in runs]
    assert len(names) == len(set(names))
    for _, p in R.map_points(R.MAP_AXES):  # every point has its AceMAD run and its baselines' run
        o = R.overrides(p)
        assert f"map_{R.params_slug(o)}" in names
        assert f"map_baselines_{R.params_slug({k: v for k, v in o.items() if k in R.SUBSET_PARAMS})}" in names
    # the baselines depend only on the population's answers: the default and each non-default trap_concentration
    base = [r for r in runs if r.name.startswith("map_baselines_")]
    # the population's own trap_concentration and crowd_copy are the default point: shared, not run twice
    traps, copies = ({*R.MAP_AXES[k], getattr(SimParams(), k)} for k in ("trap_concentration", "crowd_copy"))
    assert len(base) == len(traps) + len(copies) - 1
    assert all(c.method in R.MAD_METHODS for r in base for c in r["baselines"])
    assert all([c.method for c in r["voting"]] == ["single", "majority"] for r in base)  # beside the fit's cells
    assert R.params_slug({"knowledge_link": 1.0, "insight": SimParams().insight}) == "default"
    # the inverse question's second plane: every knowledge_link x crowd_calibration pair is a point
    cal = [p for a, p in R.map_points(R.MAP_AXES) if a == CALIBRATION_GRID]
    assert len(cal) == len(R.MAP_AXES["knowledge_link"]) * len(R.MAP_AXES["crowd_calibration"])
    assert R.runs("09_assumption_map", {"BACKEND": "openai"}) == []
    with pytest.raises(ValueError, match="knowledge_link"):
        R.overrides({"knowledge_link": 2.0})


def test_controls_have_acemads_agents_and_the_skeptic_answers_alone():
    ctrl = R.controls(seed=0)
    assert [c.method for c in ctrl] == ["decentralized", "single", "majority"]
    assert ctrl[1].specs()[0] == SKEPTIC and ctrl[1].label == R.SKEPTIC_ALONE and ctrl[1].single_runs == 5
    assert ctrl[2].specs() == DebateConfig(method="acemad").specs()
    assert R.main_results([3], 2.0)["control"] == ctrl
    assert R.ablation()["controls"] == ctrl[1:]


@pytest.fixture
def small_setup(smoke_outputs):
    S = Setup(profile="default", benchmarks=["arc_challenge", "bbh"], n_items=60, workers=1)
    yield S
    S.close()


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_the_map_measures_gains_on_each_populations_own_subsets(small_setup):
    S = small_setup
    runs = R.assumption_map(SMALL)
    for r in runs:
        r.cap = 12
    table = AM.run_map(S, runs, SMALL, n_boot=200)
    axes = ["grid", "grid", CALIBRATION_GRID, CALIBRATION_GRID, "trap_concentration", "trap_concentration"]
    axes += ["crowd_calibration", "crowd_copy", *R.MAP_REFERENCES]
    assert list(table["axis"]) == axes
    # the gain over uniform weights is AceMAD's average minus the uniform one (the same questions on both sides)
    np.testing.assert_allclose(table["gain_uniform"], table["acemad"] - table["uniform"], atol=1e-9)
    assert (table["gain_uniform_lo"] <= table["gain_uniform"]).all() and (table["n"] > 0).all()
    # the shuffled-score control splits that gain: over shuffled (who scores well) + shuffled over uniform
    np.testing.assert_allclose(table["gain_shuffled"], table["acemad"] - table["shuffled"], atol=1e-9)
    np.testing.assert_allclose(table["gain_uniform"], table["gain_shuffled"] + table["gain_dispersion"], atol=1e-9)
    # trap_concentration 1 judges "challenging" with its own population: its own subsets, not the default's
    default_qs = {q.id for q in AM.map_questions(S, {}, 12)}
    other_qs = {q.id for q in AM.map_questions(S, {"trap_concentration": 1.0}, 12)}
    assert default_qs != other_qs
    text = RA.story(table, "SYNTHETIC population (no LLM)")
    assert "knowledge_link 0" in text and "uniform weights" in text and "over shuffled scores" in text
    assert RA.heatmap(table, "x") is not None and RA.sweeps(table, "x") is not None
    # the truth-holder alone is its round-1 answer in AceMAD's own run: a share of its questions, in %
    assert ((table["truth_holder_alone"] >= 0) & (table["truth_holder_alone"] <= 100)).all()
    # the inverse question: a point reaches the paper's claim exactly where its CI's upper end does
    acemad, claimed, best = RA.paper_claim()
    printed = TB.paper_table("table2_main_results", "GPT-4o-mini").set_index("method")["Average (printed)"]
    assert acemad == printed["AceMAD (T=3)"] and acemad - claimed == pytest.approx(printed[best])
    assert printed[best] == max(printed[m] for m in ("Decentralized MAD", "Centralized MAD", "Sparse MAD"))
    assert list(RA.reaches(table, claimed)) == list(table["gain_mad_hi"] >= claimed)
    low = table["gain_mad_hi"].min()  # a claim the lowest point cannot reach, and one every point reaches
    assert not RA.reaches(table, low + 1e-6).all() and RA.reaches(table, low).all()
    text = RA.inverse_story(table, claimed, acemad, "x")
    assert f"{claimed:+.1f} points" in text and "2603.06612" in text and "2508.17536" in text
    assert RA.inverse_map(table, claimed, "x") is not None
    # the fitted population's baselines from the map's own baseline run, beside the paper's cells
    cells = AM.baseline_fit(S, runs)
    assert set(cells["table"]) == {"Table 1", "Table 2"} and cells["simulated"].notna().all()
    np.testing.assert_allclose(cells["residual"], cells["simulated"] - cells["paper"])
    assert "printed" in RA.fit_story(cells, "x")


def _record(scores, right, k=4):
    """A one-round AceMAD record: agents with these scores, right (answer A) or wrong (answer B)."""
    entries = [
        {"agent": i, "p": [0.9, 0.1, 0, 0] if ok else [0.1, 0.9, 0, 0], "score": s, "parse_failure": False}
        for i, (s, ok) in enumerate(zip(scores, right))
    ]
    return {
        "question_id": f"q{len(scores)}{sum(right)}",
        "status": "ok",
        "labels": list("ABCD")[:k],
        "answer": "A",
        "rounds": [entries],
    }


def test_knowledge_gap_sees_whether_right_agents_score_higher():
    good = [_record([0.9, 0.8, 0.2, 0.3, 0.1], [True, True, False, False, False])]
    g = RA.knowledge_gap(good, label="good")
    row = g[g["round"].astype(str) == "all"].iloc[0]
    assert row.gap == pytest.approx(0.85 - 0.2) and row.lift == pytest.approx(1 - 2 / 5)
    bad = [_record([0.1, 0.2, 0.9, 0.8, 0.7], [True, True, False, False, False])]
    row = RA.knowledge_gap(bad, label="bad").iloc[-1]
    assert row.gap < 0 and row.lift == pytest.approx(0 - 2 / 5)
    assert "worse" in RA.gap_sentence(RA.knowledge_gap(bad, label="bad"))
    # a question where everyone is right tells nothing: left out
    assert RA.knowledge_gap([_record([0.5] * 5, [True] * 5)], label="none").iloc[0].n_questions == 0


def test_the_controls_sentence_names_each_control_and_its_gain():
    items = make_items(80, k=4, seed=2)  # 80: at 40 the single-agent control cannot tell on this population's draws
    pop = SimPopulation(SimParams(**ORIGINAL), seed=1)  # a Skeptic with insight 0.5: a control that can tell
    target = DebateConfig(method="acemad")
    cfgs = R.controls()
    recs = [run_question(q, pop, c) for q in items for c in [target, *cfgs]]
    long = TB.accuracy_long(recs)
    text = N.controls(long, recs, target.label, cfgs)
    for c in cfgs:
        assert c.label in text
    assert text.count("points") == 3 and "truth-holder knows alone" in text
    assert "no result here" in N.controls(long, recs, "not a method", cfgs[:1])


def test_a_real_model_profile_gets_no_map_and_a_notebook_that_says_why(tmp_outputs):
    table = AM.run_map(None, [], R.MAP_AXES)  # type: ignore[arg-type]  # no run: the Setup is never used
    assert table.empty and "real model" in RA.story(table, "model: m")
    assert RA.heatmap(table, "model: m") is not None and RA.sweeps(table, "model: m") is not None
    S = Setup(profile="nothing-here", benchmarks=["bbh"], n_items=10)
    gaps = AM.evidence(S, [])
    assert gaps.iloc[0].n_questions == 0 and "no notebook 03 run" in gaps.iloc[0].run


def test_notebook_04_says_from_the_rules_why_each_variant_gains_or_not():
    X = R.heterogeneity("synthetic-model-b", "", 0)
    pop = SimPopulation(SimParams(**ORIGINAL), seed=1)  # crowd_insight 0: the Different LLMs' Generalist never sees
    recs = [run_question(q, pop, c) for q in make_items(30, k=4, seed=2) for c in X.configs]
    labels = [c.label for c in X.configs]
    text = N.variant_rules(TB.versus_best(recs, labels[1:], labels[:1]), X.configs, pop)
    for label in labels[1:]:
        assert label in text
    assert "P_insight = 0.15" in text and "P_insight = 0.00" in text and "knowledge_link" in text
    assert "never gets peer-prediction skill" in text  # the other model's Generalist: crowd_insight = 0
    assert "no population rule" in N.variant_rules(TB.versus_best(recs, labels[1:], labels[:1]), X.configs, None)


def test_the_shuffled_sentence_splits_the_gain_over_uniform_weights():
    pop = SimPopulation(seed=1)
    ace = [run_question(q, pop, DebateConfig(method="acemad")) for q in make_items(60, k=4, seed=2)]
    recs = A.reweighted_records(ace, {"Full": "peer_prediction", "Uniform": "uniform"}) + A.shuffled_records(ace)
    long = TB.accuracy_long(recs)
    text = N.shuffled(long, recs, "Full", "Uniform", A.SHUFFLED)
    assert text.startswith(A.SHUFFLED) and text.count("points [") == 2 and "WHO scores well" in text
    assert "no result here" in N.shuffled(long, recs, "Full", "Uniform", "absent")
