import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from acemad_utils.cost.items import PAPER_SUBSETS
from acemad_utils.cost.power import CLAIMS, cells, plan
from acemad_utils.experiments.profiles import notebook_params
from acemad_utils.report import power


def test_n_needed_is_the_smallest_n_reaching_the_power():
    for effect, psi in [(0.05, 0.42), (0.10, 0.2), (-0.03, 0.1), (0.2, 0.25)]:
        n = power.n_needed(effect, psi)
        assert power.power_at(n, effect, psi) >= 0.8 > power.power_at(n - 1, effect, psi)


def test_more_discordance_or_a_stricter_level_needs_more_questions():
    assert power.n_needed(0.05, 0.2) < power.n_needed(0.05, 0.42)
    assert power.n_needed(0.05, 0.2) < power.n_needed(0.05, 0.2, alpha=0.05 / 10)
    assert power.n_needed(0.05, 0.2, power=0.9) > power.n_needed(0.05, 0.2)


def test_power_matches_a_simulated_mcnemar_test():
    """The formula against the test it plans for: paired outcomes drawn with the given cells, tested by McNemar's
    normal approximation; the rejection rate at n_needed is the planned 80%."""
    effect, psi = 0.06, 0.3
    n = power.n_needed(effect, psi)
    p10, p01 = (psi + effect) / 2, (psi - effect) / 2
    rng = np.random.default_rng(0)
    cells = rng.multinomial(n, [p10, p01, 1 - psi], size=4000)
    b, c = cells[:, 0], cells[:, 1]
    z = np.abs(b - c) / np.sqrt(np.maximum(b + c, 1))
    rate = float(np.mean(z > NormalDist().inv_cdf(0.975)))
    assert abs(rate - 0.8) < 0.03, rate


def test_discordance_from_margins_from_a_correlation_and_from_records():
    lo, hi = power.discordance_bounds(0.325, 0.275)
    assert lo == pytest.approx(0.05) and hi == pytest.approx(0.6)
    assert lo < power.discordance_at(0.325, 0.275, 0.0) < hi
    assert power.discordance_at(0.3, 0.3, 0.0) == pytest.approx(0.3 * 0.7 + 0.7 * 0.3)  # independent errors
    assert power.discordance_at(0.3, 0.3, 1.0) == pytest.approx(0.0)
    assert power.discordance_at(0.4, 0.2, 0.5) < power.discordance_at(0.4, 0.2, 0.0)
    a = np.array([1, 1, 0, 0, 1, 0, 1, 1], bool)
    b = np.array([1, 0, 1, 0, 0, 0, 1, 1], bool)
    assert power.observed(a, b) == pytest.approx((1 / 8, 3 / 8))
    assert power.correlation(a, a) == pytest.approx(1.0) and power.correlation(a, ~a) == pytest.approx(-1.0)


def test_impossible_cells_are_refused():
    for effect, psi in [(0.0, 0.3), (0.3, 0.2), (0.05, 1.2)]:
        with pytest.raises(ValueError):
            power.n_needed(effect, psi)
    assert power.power_at(0, 0.05, 0.3) == 0.0
    assert math.isclose(power.power_at(10**7, 0.05, 0.3), 1.0)


def test_an_average_over_unequal_benchmarks_needs_more_than_pooling():
    """The same gain everywhere: the stratified mean weighs a 100-question benchmark as much as a 900 one, so its
    power is below that of one pooled test on the 1,000 questions, and n_strata reaches the target power; over a
    single benchmark it is the paired test."""
    assert power.power_strata([400], [0.05], [0.3]) == pytest.approx(power.power_at(400, 0.05, 0.3))
    assert power.n_strata([1.0], [0.05], [0.3]) == power.n_needed(0.05, 0.3)
    ns, d, psi = [100, 900], [0.05, 0.05], [0.3, 0.3]
    assert power.power_strata(ns, d, psi) < power.power_at(1000, 0.05, 0.3)
    n = power.n_strata(ns, d, psi)
    assert power.power_strata([n * 0.1, n * 0.9], d, psi) == pytest.approx(0.8, abs=0.002)


# ----------------------------------------------------------------------------- a profile's plan (make estimate)
def _plan(profile="paper", rho=None, **overrides):
    return plan(notebook_params(profile, overrides)[1], rho=rho).set_index("claim")


MAIN = "AceMAD (T=3) over Sparse MAD, Average"


def test_the_paper_profile_detects_its_main_gain_but_not_every_claim(full_outputs):
    t = _plan()
    assert t.loc[MAIN, "planned n"] == 1905 and t.loc[MAIN, "power (Holm)"] > 0.99
    assert _plan(rho=0.5).loc[MAIN, "n, alpha 0.05"] < t.loc[MAIN, "n, alpha 0.05"]  # an observed correlation
    tqa = t.loc["AceMAD (T=3) over Centralized MAD, TruthfulQA"]
    assert tqa["power (Holm)"] < 0.05 and "exceeds the 223 questions" in tqa["note"]
    holm = [c for c in t.columns if c.startswith("n, Holm")][0]
    sized = t.dropna(subset=[holm])
    assert (sized[holm] > sized["n, alpha 0.05"]).all() and len(sized) == len(t) - 1  # MMLU-Pro: a printed tie
    # what README says of the paper's own design: not its T comparisons, nor most per-benchmark gains
    assert (t[t["family"] == "T comparison"]["power (Holm)"] < 0.8).all()
    per_benchmark = t[t["family"] == "per-benchmark gain"]["power (Holm)"]
    assert (per_benchmark >= 0.8).sum() < len(per_benchmark) / 2


def test_fewer_questions_cost_power_and_an_unrun_comparison_has_none(full_outputs):
    t = _plan(N_MAX=20)
    assert t.loc[MAIN, "planned n"] == 120 and t.loc[MAIN, "power (Holm)"] < 0.8
    local = _plan("local")
    t5 = local.loc["AceMAD (T=3) over AceMAD (T=5), Average"]
    assert t5["planned n"] == 0 and t5["power (Holm)"] == 0


def test_the_main_gains_range_of_n_over_the_discordance_bounds_is_the_one_docs_quote():
    """docs/statistics.md quotes 75 / 254 / 425 questions for the main gain at psi's lower bound, independence and
    upper bound (the paper's subset sizes)."""
    _, benches, pa, pb = cells(CLAIMS[0])
    d = [x - y for x, y in zip(pa, pb)]
    shares = [PAPER_SUBSETS[b] for b in benches]
    lower = [max(abs(x), 1e-12) for x in d]  # MMLU-Pro's printed tie: no discordance needed there
    indep = [power.discordance_at(x, y, 0.0) for x, y in zip(pa, pb)]
    upper = [power.discordance_bounds(x, y)[1] for x, y in zip(pa, pb)]
    assert [power.n_strata(shares, d, p) for p in (lower, indep, upper)] == [75, 254, 425]
    text = (Path(__file__).resolve().parents[1] / "docs" / "statistics.md").read_text()
    assert "span 75 questions" in text and "to 425" in text and "254 at independence" in text
