"""Where the paper's shared transcription is looked for, and the statistics every table rests on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acemad_utils.data import paths as P
from acemad_utils.report import tables as TB
from acemad_utils.report.stats import bootstrap_ci, resample_indices, resampled_means, sign_flip_p, sign_flip_sums


def test_shared_dir_defaults_beside_the_repo_and_a_relative_variable_resolves_from_the_root(monkeypatch, tmp_path):
    monkeypatch.delenv("ACEMAD_PAPER_DIR", raising=False)
    assert P.shared_paper_dir() == P.ROOT.parent / "shared" / "paper" / "tables"
    monkeypatch.chdir(tmp_path)  # data/paper does not exist from here...
    monkeypatch.setenv("ACEMAD_PAPER_DIR", "data/paper")  # ...but does from the repo root
    assert P.shared_paper_dir() == P.ROOT / "data/paper"


def _reference_sign_flip(d, w=None, *, n_perm=10000, seed=0):
    """The sign-flip test on the whole sign matrix, one product."""
    flips = np.random.default_rng(seed).choice((-1.0, 1.0), size=(n_perm, len(d)))
    null, obs = (np.abs((flips * d).mean(1)), abs(d.mean())) if w is None else (np.abs(flips @ (w * d)), abs(w @ d))
    return float((1 + np.sum(null >= obs - 1e-12)) / (n_perm + 1))


@pytest.mark.parametrize("n", [3, 13, 600, 1201])
@pytest.mark.parametrize("seed", [0, 7])
def test_sign_flip_p_gives_the_p_value_of_the_whole_sign_matrix(n, seed):
    g = np.random.default_rng(n + seed)
    binary = g.integers(-1, 2, n).astype(float)  # paired right/wrong differences: many exact ties with the observed
    w = np.where(np.arange(n) < n // 3, 1 / (3 * n), 1 / n)  # stratified weights, as versus_best's Average uses
    fractional = g.random(n) - 0.45  # the Single Agent's mean over 5 runs minus another method
    for d in (binary, fractional):
        assert sign_flip_p(d, seed=seed) == _reference_sign_flip(d, seed=seed)
        assert sign_flip_p(d, w=w, seed=seed) == _reference_sign_flip(d, w, seed=seed)
    assert sign_flip_p(np.zeros(n), seed=seed) == 1.0


def test_bootstraps_resample_as_a_fresh_generator_per_call_would():
    g = np.random.default_rng(3)
    groups = [g.integers(0, 2, n).astype(float) for n in (40, 57, 13)]
    for x in groups:  # the reference: the draw bootstrap_ci made before its indices were cached
        boots = x[np.random.default_rng(5).integers(0, len(x), size=(300, len(x)))].mean(1)
        assert bootstrap_ci(x, n_boot=300, seed=5)[1:] == tuple(np.quantile(boots, [0.025, 0.975]))
    rng = np.random.default_rng(5)  # the stratified Average: one generator, the groups in order
    boots = np.mean([x[rng.integers(0, len(x), (300, len(x)))].mean(1) for x in groups], axis=0)
    assert TB._stratified_average(groups, 300, 5)[1:] == tuple(np.quantile(boots, [0.025, 0.975]))


def test_bootstrap_means_and_sign_flip_sums_are_computed_once_per_set_of_values():
    """A notebook's tables bootstrap and test the same outcomes more than once: the second time is the first's
    result (read-only, so no caller can change what the next one reads); other values are computed anew."""
    g = np.random.default_rng(4)
    x, f = g.integers(0, 2, 50).astype(float), g.random(31)
    first = resampled_means([x, f], 3, 200)
    idx = resample_indices(3, 200, (50, 31))
    assert np.array_equal(first[0], x[idx[0]].mean(1)) and np.array_equal(first[1], f[idx[1]].mean(1))
    again = resampled_means([x.copy(), np.repeat(f, 2)[::2]], 3, 200)  # other arrays (one strided), the same values
    assert all(a is b for a, b in zip(first, again)) and not any(a.flags.writeable for a in first)
    x[0] = 1 - x[0]  # the caller changes its array after the call: the next call sees the new values
    assert np.array_equal(resampled_means([x, f], 3, 200)[0], x[idx[0]].mean(1))
    assert not np.array_equal(resampled_means([x, f], 3, 200)[0], first[0])
    null = sign_flip_sums(f - 0.5)
    assert sign_flip_sums(np.array(f) - 0.5) is null and not null.flags.writeable
    assert sign_flip_sums(f - 0.4) is not null


_cells = st.lists(
    st.tuples(
        st.sampled_from(["q10", "q2", "Q1", "q-1", "é", "q1"]),
        st.sampled_from(["acemad", "Majority", "b", "Z"]),
        st.sampled_from([0.0, 1.0, 0.4, float("nan")]),
    ),
    max_size=20,
    unique_by=lambda c: c[:2],
)


@settings(max_examples=200, deadline=None)
@given(_cells)
def test_a_benchmarks_pivot_has_pandas_rows_columns_and_values(cells):
    part = pd.DataFrame(cells, columns=["question_id", "method", "correct"])
    methods, x = TB.pivot(part)
    expected = part.pivot(index="question_id", columns="method", values="correct")
    assert methods == list(expected.columns)
    assert np.array_equal(x, expected.to_numpy(dtype=float), equal_nan=True) and x.shape == expected.shape
    if cells:  # a question answered twice by one method is no question_frame
        with pytest.raises(ValueError, match="duplicates"):
            TB.pivot(pd.concat([part, part.iloc[:1]]))


def test_a_paired_gain_whose_bound_is_zero_up_to_float_noise_has_a_bound_of_zero():
    """A control scored as a share (shuffled scores: right in k of 20 shuffles) gives fractional differences; a 95%
    bound that is exactly 0 came out as -1e-17, so a control p = 0.09 could not tell apart read as "behind"."""
    acemad = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    shares = [0.9, 0.4, 0.7, 0.45, 0.55, 0.25, 0.15, 0.65]
    d = np.array(acemad) - np.array(shares)
    assert np.quantile(resampled_means([d], 0, 2000)[0], 0.975) < 0  # the noise the bound carried
    frame = pd.DataFrame({"question_id": [f"q{i}" for i in range(8)] * 2, "benchmark": "demo",
                          "method": ["AceMAD"] * 8 + ["Shuffled"] * 8, "correct": acemad + shares})  # fmt: skip
    row = TB.versus_best(None, ["AceMAD"], ["Shuffled"], frame=frame, seed=0).iloc[-1]
    assert row.gain < 0 and row.gain_lo < 0 and str(row.gain_hi) == "0.0"
    _, lo, hi = bootstrap_ci(d)
    assert lo < 0 and str(hi) == "0.0"  # the same for a single column's interval (0.0, never -0.0)
