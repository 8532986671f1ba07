"""Notebook 09's assumption map and the controls beside Table 2: registry, computation, figures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from acemad_utils.agents.sim import SimParams
from acemad_utils.data.sim_params import CALIBRATION_GRID
from acemad_utils.data.transcripts import run_dir
from acemad_utils.experiments import assumption_map as AM
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import SKEPTIC, DebateConfig
from acemad_utils.report import tables as TB
from tests.conftest import acemad_record


def test_the_map_runs_each_distinct_population_once_and_only_with_the_synthetic_population():
    names = [r.name for r in R.runs("09_assumption_map", {"BACKEND": "sim"})]
    assert len(names) == len(set(names)) and R.runs("09_assumption_map", {"BACKEND": "openai"}) == []
    for _, p in R.map_points(R.MAP_AXES):  # every point has its AceMAD run and its baselines' run
        o = R.overrides(p)
        assert {f"map_{R.params_slug(o)}", f"map_baselines_{R.params_slug(R.subset_params(o))}"} <= set(names)
    # the baselines depend only on the population's answers: once per trap_concentration and crowd_copy, the
    # population's own values being the one default point
    traps, copies = ({*R.MAP_AXES[k], getattr(SimParams(), k)} for k in ("trap_concentration", "crowd_copy"))
    assert sum(n.startswith("map_baselines_") for n in names) == len(traps) + len(copies) - 1
    assert R.params_slug({"knowledge_link": 1.0, "insight": SimParams().insight}) == "default"
    cal = [p for a, p in R.map_points(R.MAP_AXES) if a == CALIBRATION_GRID]  # the inverse question's second plane
    assert len(cal) == len(R.MAP_AXES["knowledge_link"]) * len(R.MAP_AXES["crowd_calibration"])
    with pytest.raises(ValueError, match="knowledge_link"):
        R.overrides({"knowledge_link": 2.0})


def test_controls_have_acemads_agents_and_the_skeptic_answers_alone():
    ctrl = R.controls(seed=0)
    assert [c.method for c in ctrl] == ["decentralized", "single", "majority"]
    assert ctrl[1].specs()[0] == SKEPTIC and ctrl[1].label == R.SKEPTIC_ALONE and ctrl[1].single_runs == 5
    assert ctrl[2].specs() == DebateConfig(method="acemad").specs()
    assert R.main_results([3], 2.0)["control"] == ctrl and R.ablation()["controls"] == ctrl[1:]


def test_a_map_point_at_another_eta_fills_the_same_columns(smoke_outputs):
    """--set ETA=4 labels AceMAD 'AceMAD (T=3, eta=4)'; the map's columns are roles, so its row is still built."""
    S = Setup(profile="default", benchmarks=["bbh"], n_items=30, workers=1)
    small = {"knowledge_link": (1.0,), "insight": (SimParams().insight,), "trap_concentration": (), "crowd_copy": ()}
    run = next(r for r in R.assumption_map({**small, "crowd_calibration": ()}, eta=4.0) if r.name == "map_default")
    run.cap = 6
    assert run["acemad"][0].label == "AceMAD (T=3, eta=4)"
    _, cols, _ = AM.correct(S, run, "acemad", 4.0)
    assert {AM.ACEMAD, AM.UNIFORM, AM.SHUFFLED} <= set(cols)


def test_a_question_without_a_gold_answer_is_scored_by_no_map_column(smoke_outputs, monkeypatch):
    """AceMAD, uniform weights and shuffled scores all leave a question without a gold answer out (NaN): the
    shuffled-score column (a share of draws) once counted it wrong."""
    S = Setup(profile="default", benchmarks=["bbh"], n_items=30, workers=1)
    small = {"knowledge_link": (1.0,), "insight": (SimParams().insight,), "trap_concentration": (), "crowd_copy": ()}
    run = next(r for r in R.assumption_map({**small, "crowd_calibration": ()}) if r.name == "map_default")
    run.cap = 6
    graded = AM.map_questions
    monkeypatch.setattr(
        AM, "map_questions", lambda *a: [dataclasses.replace(graded(*a)[0], answer=None)] + graded(*a)[1:]
    )
    _, cols, _ = AM.correct(S, run, "acemad")
    for label in (AM.ACEMAD, AM.UNIFORM, AM.SHUFFLED):
        assert np.isnan(cols[label][0]) and not np.isnan(cols[label][1:]).any(), (label, cols[label])


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_the_map_measures_gains_on_each_populations_own_subsets(smoke_outputs):
    S = Setup(profile="default", benchmarks=["arc_challenge", "bbh"], n_items=60, workers=1)
    small = {"knowledge_link": (0.0, 1.0), "insight": (0.5,), "trap_concentration": (1.0, 4.0)}
    small |= {"crowd_calibration": (0.0,), "crowd_copy": (SimParams().crowd_copy,)}
    runs = R.assumption_map(small)
    for r in runs:
        r.cap = 12
    table = AM.run_map(S, runs, small, n_boot=200)
    # no map point is written; a written transcript of any point (run_with_meta) holds the same answers
    run, base = (next(r for r in runs if r.name == f"map{x}_trap_concentration1") for x in ("", "_baselines"))
    assert not any(run_dir(f"default/{r.name}", create=False).exists() for r in runs)
    for r, group in ((run, "acemad"), (base, "baselines")):
        qs, memory, _ = AM.correct(S, r, group)
        at = {(rec["method"], rec["question_id"]): rec["final"]["correct"] for rec in AM.run_with_meta(S, r)[1]}
        for label in r.labels(group):
            np.testing.assert_array_equal(memory[label], [at[label, q.id] for q in qs])
    axes = ["grid", "grid", CALIBRATION_GRID, CALIBRATION_GRID, "trap_concentration", "trap_concentration"]
    assert list(table["axis"]) == [*axes, "crowd_calibration", "crowd_copy", *R.MAP_REFERENCES]
    # every gain is the difference of its averages (the same questions on both sides), and the shuffled-score
    # control splits the gain over uniform weights: over shuffled (who scores well) + shuffled over uniform
    for key, b in (("uniform", "uniform"), ("shuffled", "shuffled"), ("mad", "best_mad_accuracy")):
        np.testing.assert_allclose(table[f"gain_{key}"], table["acemad"] - table[b], atol=1e-9)
    np.testing.assert_allclose(table["gain_uniform"], table["gain_shuffled"] + table["gain_dispersion"], atol=1e-9)
    assert (table["gain_uniform_lo"] <= table["gain_uniform"]).all() and (table["n"] > 0).all()
    assert table["truth_holder_alone"].between(0, 100).all()
    # trap_concentration 1 judges "challenging" with its own population: its own subsets, not the default's
    assert {q.id for q in AM.map_questions(S, {}, 12)} != {q.id for q in AM.map_questions(S, run.params, 12)}
    # the inverse question: a point reaches the paper's claim exactly where its CI's upper end does
    acemad, claimed, best = AM.paper_claim()
    printed = TB.paper_table("table2_main_results", "GPT-4o-mini").set_index("method")["Average (printed)"]
    assert acemad == printed["AceMAD (T=3)"] and acemad - claimed == pytest.approx(printed[best])
    assert printed[best] == max(printed[m] for m in ("Decentralized MAD", "Centralized MAD", "Sparse MAD"))
    low = table["gain_mad_hi"].min()  # a claim the lowest point cannot reach, and one every point reaches
    assert not AM.reaches(table, low + 1e-6).all() and AM.reaches(table, low).all()
    for fig in (AM.heatmap(table, "x"), AM.sweeps(table, "x"), AM.inverse_map(table, claimed, "x")):
        assert fig.axes
    cells = AM.baseline_fit(S, runs)  # the fitted population's baselines from the map's own run, beside the paper
    assert set(cells["table"]) == {"Table 1", "Table 2"} and cells["simulated"].notna().all()
    np.testing.assert_allclose(cells["residual"], cells["simulated"] - cells["paper"])
    S.close()


@pytest.mark.parametrize(
    "scores, right, gap, lift",
    [
        ([0.9, 0.8, 0.2, 0.3, 0.1], [1, 1, 0, 0, 0], 0.85 - 0.2, 1 - 2 / 5),  # the right agents score higher
        ([0.1, 0.2, 0.9, 0.8, 0.7], [1, 1, 0, 0, 0], 0.15 - 0.8, 0 - 2 / 5),  # the wrong ones do
        ([0.5] * 5, [1] * 5, np.nan, np.nan),  # everyone right tells nothing: left out
    ],
)
def test_knowledge_gap_sees_whether_right_agents_score_higher(scores, right, gap, lift):
    row = AM.knowledge_gap([acemad_record(scores, right)], label="x").iloc[-1]
    assert row["round"] == "all" and row.n_questions == (gap == gap)
    np.testing.assert_allclose([row.gap, row.lift], [gap, lift])


def test_a_real_model_profile_gets_no_map_and_says_why(tmp_outputs):
    table = AM.run_map(None, [], R.MAP_AXES)  # type: ignore[arg-type]  # no run: the Setup is never used
    assert table.empty and "real model" in table.attrs["note"]
    assert AM.heatmap(table, "model: m").axes and AM.sweeps(table, "model: m").axes
    gaps = AM.evidence(Setup(profile="nothing-here", benchmarks=["bbh"], n_items=10), [])
    assert gaps.iloc[0].n_questions == 0 and "no notebook 03 run" in gaps.iloc[0].run
    cells = AM.baseline_fit(None, [])  # type: ignore[arg-type]
    assert cells.empty and "real model" in cells.attrs["note"]
