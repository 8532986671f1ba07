"""Notebook 00's helpers (experiments/theory.py): the phase eta grid and bootstrap, panel (c)'s drift split."""

from __future__ import annotations

import numpy as np
import pytest

from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.experiments import theory
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_batch
from acemad_utils.report import rescoring as A
from acemad_utils.report.stats import bootstrap_ci, resample_indices


@pytest.mark.parametrize("eta", [0.0, 2.0, 3.0, 100.0, -1.0, np.nan, np.inf])
def test_any_valid_eta_gets_its_own_phase_column_and_an_invalid_one_is_refused_by_name(eta):
    if not (np.isfinite(eta) and eta >= 0):
        with pytest.raises(ValueError, match="ETA"):
            theory.eta_grid(eta)
        return
    grid = theory.eta_grid(eta)
    assert eta in grid and set(theory.PHASE_ETA) <= set(grid) and list(grid) == sorted(grid)


def test_the_drift_split_adds_up_and_is_zero_for_the_weights_at_eta_zero():
    recs = run_batch(make_items(120, seed=3), SimPopulation(SimParams(), seed=0), DebateConfig(rounds=4), [0] * 120)
    arr = A.stack(recs)
    split = theory.drift_split(arr, eta=2.0)
    assert set(split.subset) == set(theory.SUBSETS) and len(split) == 6
    for _, sub in split.groupby("subset"):
        uniform, weights, total = sub["mean"].to_numpy()
        assert total == pytest.approx(uniform + weights) and (sub.lo <= sub["mean"]).all()
    at_zero = theory.drift_split(arr, eta=0.0)
    assert np.allclose(at_zero[at_zero.part.str.startswith("weights")][["mean", "lo", "hi"]], 0.0)


@pytest.mark.parametrize("x", [np.eye(7)[np.arange(300) % 7][:, :5], np.arange(600.0).reshape(300, 2) / 7])
def test_the_phase_tables_bootstrap_is_the_quantile_of_resampled_row_means(x):
    (idx,) = resample_indices(0, 2000, (len(x),))  # 0/1 outcomes are counted, fractions resampled: the same bits
    np.testing.assert_array_equal(bootstrap_ci(x)[1:], np.quantile(x[idx].mean(axis=1), [0.025, 0.975], axis=0))
