"""Notebook 09's assumption map and the controls beside Table 2: registry, computation, figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from acemad_utils.agents.sim import SimParams
from acemad_utils.data.sim_params import CALIBRATION_GRID
from acemad_utils.data.transcripts import run_dir
from acemad_utils.experiments import assumption_map as AM
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import SKEPTIC, DebateConfig
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
    # only the runs the notebook shows are written; any other point's transcript, written on request, gives its row
    run = next(r for r in runs if r.name == "map_trap_concentration1")
    assert run.name not in AM.SHOWN and not run_dir(f"default/{run.name}", create=False).exists()
    assert all(run_dir(f"default/{name}", create=False).exists() for name in AM.SHOWN)
    (frame, arr), (frame_disk, arr_disk) = (AM._debated(S, run, "acemad", written=w) for w in (False, True))
    assert run_dir(f"default/{run.name}", create=False).exists()
    for field in ("P", "Q", "valid", "forecast_valid", "option_mask", "truth", "keys", "personas", "question_ids"):
        np.testing.assert_array_equal(getattr(arr, field), getattr(arr_disk, field))  # the arrays records give
    memory, disk = (AM.point_outcomes(f, a, seed=S.seed) for f, a in ((frame, arr), (frame_disk, arr_disk)))
    pd.testing.assert_frame_equal(memory[0], disk[0])
    assert memory[1:] == disk[1:]
    base = next(r for r in runs if r.name == "map_baselines_trap_concentration1")
    pd.testing.assert_frame_equal(*(AM._debated(S, base, "baselines", written=w)[0] for w in (False, True)))
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
    assert AM.heatmap(table, "x") is not None and AM.sweeps(table, "x") is not None
    # the truth-holder alone is its round-1 answer in AceMAD's own run: a share of its questions, in %
    assert ((table["truth_holder_alone"] >= 0) & (table["truth_holder_alone"] <= 100)).all()
    # the inverse question: a point reaches the paper's claim exactly where its CI's upper end does
    acemad, claimed, best = AM.paper_claim()
    printed = TB.paper_table("table2_main_results", "GPT-4o-mini").set_index("method")["Average (printed)"]
    assert acemad == printed["AceMAD (T=3)"] and acemad - claimed == pytest.approx(printed[best])
    assert printed[best] == max(printed[m] for m in ("Decentralized MAD", "Centralized MAD", "Sparse MAD"))
    assert list(AM.reaches(table, claimed)) == list(table["gain_mad_hi"] >= claimed)
    low = table["gain_mad_hi"].min()  # a claim the lowest point cannot reach, and one every point reaches
    assert not AM.reaches(table, low + 1e-6).all() and AM.reaches(table, low).all()
    assert AM.inverse_map(table, claimed, "x") is not None
    # the fitted population's baselines from the map's own baseline run, beside the paper's cells
    cells = AM.baseline_fit(S, runs)
    assert set(cells["table"]) == {"Table 1", "Table 2"} and cells["simulated"].notna().all()
    np.testing.assert_allclose(cells["residual"], cells["simulated"] - cells["paper"])


def _record(scores, right):
    """A one-round AceMAD record: agents with these scores, right (answer A) or wrong (answer B)."""
    entries = [
        {"agent": i, "p": [0.9, 0.1, 0, 0] if ok else [0.1, 0.9, 0, 0], "score": s, "parse_failure": False}
        for i, (s, ok) in enumerate(zip(scores, right))
    ]
    return {"question_id": "q", "status": "ok", "labels": list("ABCD"), "answer": "A", "rounds": [entries]}


SPLIT = [True, True, False, False, False]


@pytest.mark.parametrize(
    "scores, right, gap, lift",
    [
        ([0.9, 0.8, 0.2, 0.3, 0.1], SPLIT, 0.85 - 0.2, 1 - 2 / 5),  # the right agents score higher
        ([0.1, 0.2, 0.9, 0.8, 0.7], SPLIT, 0.15 - 0.8, 0 - 2 / 5),  # the wrong ones do
        ([0.5] * 5, [True] * 5, None, None),  # everyone right tells nothing: left out
    ],
)
def test_knowledge_gap_sees_whether_right_agents_score_higher(scores, right, gap, lift):
    row = AM.knowledge_gap([_record(scores, right)], label="x").iloc[-1]
    if gap is None:
        assert row.n_questions == 0
    else:
        assert row["round"] == "all" and row.gap == pytest.approx(gap) and row.lift == pytest.approx(lift)


def test_a_real_model_profile_gets_no_map_and_says_why(tmp_outputs):
    table = AM.run_map(None, [], R.MAP_AXES)  # type: ignore[arg-type]  # no run: the Setup is never used
    assert table.empty and "real model" in table.attrs["note"]
    assert AM.heatmap(table, "model: m") is not None and AM.sweeps(table, "model: m") is not None
    S = Setup(profile="nothing-here", benchmarks=["bbh"], n_items=10)
    gaps = AM.evidence(S, [])
    assert gaps.iloc[0].n_questions == 0 and "no notebook 03 run" in gaps.iloc[0].run
