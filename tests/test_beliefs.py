"""Tests for acemad_utils.protocol.beliefs: the protocol math of AceMAD (Algorithm 1 and the baselines).

Every expected number below is computed by hand in the comments (arithmetic shown) from the paper's
formulas, never by calling the function under test a second time:

    X_{-i} = (1/(N-1)) sum_{j != i} p_j                       (peer mean)
    S_i    = 1 - ||q_i - X_{-i}||_2^2                          (Brier peer-prediction score)
    w_i   <- w_i * exp(eta * S_i), then normalize               (multiplicative weights, eta = 2.0)
    answer = argmax_y sum_i (w_i^(T))^2 p_i^(T)(y)             (squared-weight decision)

Run from the repository root:  python -m pytest tests/test_beliefs.py -q
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from acemad_utils.protocol import beliefs as B

approx = pytest.approx
PROPERTY = settings(deadline=None, max_examples=200)


# ============================================================================ strategies
@st.composite
def simplex(draw, k: int, hi: int = 20):
    """A point of the K-simplex with rational entries c_k / sum(c): every nonzero entry is >= 1/(hi*k)."""
    c = draw(st.lists(st.integers(0, hi), min_size=k, max_size=k).filter(lambda c: sum(c) > 0))
    c = np.asarray(c, dtype=float)
    return c / c.sum()


# Reference forms of single steps (the package computes them vectorized over rounds: acemad_weights,
# weighted_decision); the tests check the two agree.
def mwu_step(w, s, eta: float = 2.0) -> np.ndarray:
    """One update of Algorithm 1: w * exp(eta * s), normalized over agents (last axis)."""
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    w = np.asarray(w, dtype=float)
    logw = np.log(np.maximum(w, np.finfo(float).tiny)) + eta * np.asarray(s, dtype=float)
    logw = logw - logw.max(axis=-1, keepdims=True)
    out = np.exp(logw)
    return out / out.sum(axis=-1, keepdims=True)


def weighted_answer(P, w, exponent: float = 2.0, keys=None) -> np.ndarray:
    """argmax_y sum_i w_i^exponent p_i(y)."""
    return B.argmax_tiebreak(B.weighted_scores(P, w, exponent), keys)[0]


@st.composite
def belief_array(draw, n: int, k: int):
    return np.stack([draw(simplex(k)) for _ in range(n)])


@st.composite
def finite_distribution(draw):
    """A finite distribution over realized peer means: M support points X_m (on the simplex) with
    probabilities pw_m, plus an arbitrary forecast q. Exact expectations are weighted sums."""
    k = draw(st.integers(2, 6))
    m = draw(st.integers(1, 5))
    X = np.stack([draw(simplex(k)) for _ in range(m)])
    c = np.asarray(draw(st.lists(st.integers(1, 10), min_size=m, max_size=m)), dtype=float)
    pw = c / c.sum()
    q = draw(simplex(k))
    return X, pw, q


def expected_score(q, X, pw, rule):
    """E_X[S(q, X)] as an exact weighted sum over the support points."""
    return float(np.dot(pw, B.score_forecast(np.broadcast_to(q, X.shape), X, rule)))


def rng_beliefs(rng, shape):
    """Random strictly positive beliefs on the simplex (last axis)."""
    x = rng.gamma(1.0, size=shape) + 1e-3
    return x / x.sum(axis=-1, keepdims=True)


# ============================================================================ normalize / from_mapping
class TestNormalize:
    def test_negative_entries_count_as_zero_mass(self):
        # [-1, 2, 1]: -1 -> 0; total = 3 -> [0, 2/3, 1/3]
        p, deg = B.normalize([-1.0, 2.0, 1.0])
        assert p == approx([0.0, 2 / 3, 1 / 3], abs=1e-15)
        assert not bool(deg)

    def test_nan_counts_as_zero_mass(self):
        # [nan, 1, 3]: nan -> 0; total = 4 -> [0, .25, .75]
        p, deg = B.normalize([np.nan, 1.0, 3.0])
        assert p == approx([0.0, 0.25, 0.75], abs=1e-15)
        assert not bool(deg)

    def test_inf_counts_as_zero_mass(self):
        # +inf and -inf both count as zero mass: [inf, 1, 1] -> [0, .5, .5]; [-inf, 2] -> [0, 1]
        p, deg = B.normalize([np.inf, 1.0, 1.0])
        assert p == approx([0.0, 0.5, 0.5], abs=1e-15)
        assert not bool(deg)
        p, deg = B.normalize([-np.inf, 2.0])
        assert p == approx([0.0, 1.0], abs=1e-15)
        assert not bool(deg)

    def test_rows_not_summing_to_one_are_rescaled(self):
        # [2, 6] / 8 = [.25, .75];  [.1, .1] / .2 = [.5, .5];  [3] / 3 = [1]
        p, deg = B.normalize([[2.0, 6.0], [0.1, 0.1]])
        assert p == approx(np.array([[0.25, 0.75], [0.5, 0.5]]), abs=1e-15)
        assert deg.tolist() == [False, False]
        p, _ = B.normalize([3.0])
        assert p.tolist() == [1.0]

    def test_all_zero_row_becomes_uniform_and_is_flagged(self):
        # Row 0 valid; row 1 all zero; row 2 only unusable mass (neg, nan, inf, -inf) -> uniform 1/4.
        x = np.array([[1.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0], [-1.0, np.nan, np.inf, -np.inf]])
        p, deg = B.normalize(x)
        assert p[0] == approx([0.25, 0.25, 0.5, 0.0], abs=1e-15)
        assert p[1] == approx([0.25] * 4, abs=1e-15)
        assert p[2] == approx([0.25] * 4, abs=1e-15)
        assert deg.shape == (3,)
        assert deg.tolist() == [False, True, True]

    def test_mask_zeroes_padding_and_renormalizes(self):
        # Options 2, 3 are padding (mask False). Their raw mass (0.5 and 9) is dropped:
        # [.2, .3] / .5 = [.4, .6]
        p, deg = B.normalize([0.2, 0.3, 0.5, 9.0], mask=[True, True, False, False])
        assert p == approx([0.4, 0.6, 0.0, 0.0], abs=1e-15)
        assert not bool(deg)

    def test_mask_degenerate_row_uniform_over_valid_options_only(self):
        # No usable mass among the 3 valid options -> 1/3 each, padding stays 0. Mass only on a padded
        # option does not count either.
        p, deg = B.normalize([[0.0, 0.0, 0.0, 0.0], [0.0, -2.0, np.nan, 5.0]], mask=[True, True, True, False])
        assert p == approx(np.array([[1 / 3, 1 / 3, 1 / 3, 0.0]] * 2), abs=1e-15)
        assert deg.tolist() == [True, True]

    def test_per_row_mask(self):
        # Row-specific masks (a batch of questions with 2 and 3 real options padded to K = 3).
        x = np.array([[1.0, 3.0, 7.0], [1.0, 1.0, 2.0]])
        mask = np.array([[True, True, False], [True, True, True]])
        p, deg = B.normalize(x, mask=mask)
        assert p == approx(np.array([[0.25, 0.75, 0.0], [0.25, 0.25, 0.5]]), abs=1e-15)
        assert deg.tolist() == [False, False]

    def test_huge_finite_entries_still_give_a_distribution(self):
        # Two finite entries of 1e308: the row has usable mass, each entry is half of it -> [.5, .5].
        # (A naive x / x.sum() overflows: 1e308 + 1e308 = inf, and 1e308 / inf = 0.)
        p, deg = B.normalize([1e308, 1e308])
        assert p == approx([0.5, 0.5], abs=1e-15)
        assert not bool(deg)

    @pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
    @PROPERTY
    @given(
        x=st.integers(1, 4).flatmap(
            lambda n: st.integers(1, 8).flatmap(
                lambda k: st.lists(
                    st.lists(
                        st.one_of(
                            st.floats(-1e300, 1e300, allow_nan=False),
                            st.sampled_from([np.nan, np.inf, -np.inf, 0.0]),
                        ),
                        min_size=k,
                        max_size=k,
                    ),
                    min_size=n,
                    max_size=n,
                )
            )
        )
    )
    def test_output_is_always_a_distribution(self, x):
        x = np.asarray(x, dtype=float)
        p, deg = B.normalize(x)
        usable = np.isfinite(x) & (x > 0)
        assert np.all(np.isfinite(p)) and np.all(p >= 0)
        assert p.sum(axis=-1) == approx(np.ones(x.shape[0]), abs=1e-12)
        assert deg.tolist() == (~usable.any(axis=-1)).tolist()
        for row_p, row_u, d in zip(p, usable, deg):
            if not d:
                assert np.all(row_p[~row_u] == 0.0)


class TestFromMapping:
    def test_exact_mapping_in_label_order(self):
        p, rep = B.from_mapping({"C": 0.2, "A": 0.5, "B": 0.3}, ["A", "B", "C"])
        assert p == approx([0.5, 0.3, 0.2], abs=1e-15)
        assert rep == {"missing": [], "unknown": [], "degenerate": False, "raw_sum": approx(1.0)}

    def test_missing_labels_get_zero_and_are_reported(self):
        # {A: 1, C: 3} over A,B,C,D -> [1, 0, 3, 0] / 4
        p, rep = B.from_mapping({"A": 1, "C": 3}, ["A", "B", "C", "D"])
        assert p == approx([0.25, 0.0, 0.75, 0.0], abs=1e-15)
        assert rep["missing"] == ["B", "D"]
        assert rep["unknown"] == []
        assert rep["degenerate"] is False
        assert rep["raw_sum"] == approx(4.0)

    def test_extra_labels_are_dropped_and_reported_sorted(self):
        # Z and Y are not options: dropped; A, B renormalized [1, 1] / 2; raw_sum counts only known labels.
        p, rep = B.from_mapping({"A": 1.0, "Z": 5.0, "B": 1.0, "Y": 2.0}, ["A", "B"])
        assert p == approx([0.5, 0.5], abs=1e-15)
        assert rep["unknown"] == ["Y", "Z"]
        assert rep["missing"] == []
        assert rep["raw_sum"] == approx(2.0)

    def test_only_unknown_or_empty_is_degenerate_uniform(self):
        for d in ({"Z": 1.0}, {}, None):
            p, rep = B.from_mapping(d, ["A", "B", "C"])
            assert p == approx([1 / 3] * 3, abs=1e-15)
            assert rep["degenerate"] is True
            assert rep["missing"] == ["A", "B", "C"]

    def test_non_numeric_values_are_zero_mass(self):
        # "x" cannot be parsed -> NaN -> 0; "0.75" parses; None -> 0.  -> [0, .75, 0] / .75
        p, rep = B.from_mapping({"A": "x", "B": "0.75", "C": None}, ["A", "B", "C"])
        assert p == approx([0.0, 1.0, 0.0], abs=1e-15)
        assert rep["degenerate"] is False
        assert rep["raw_sum"] == approx(0.75)
        assert rep["missing"] == []


# ============================================================================ scores (hand-computed)
# Shared 3-agent, 2-option example.
#   p_1 = (.8, .2), p_2 = (.6, .4), p_3 = (.2, .8);   sum_j p_j = (1.6, 1.4)
#   q_1 = (.5, .5), q_2 = (.7, .3), q_3 = (.6, .4)
#   X_{-1} = ((1.6-.8)/2, (1.4-.2)/2) = (.4, .6)
#   X_{-2} = ((1.6-.6)/2, (1.4-.4)/2) = (.5, .5)
#   X_{-3} = ((1.6-.2)/2, (1.4-.8)/2) = (.7, .3)
P3 = np.array([[0.8, 0.2], [0.6, 0.4], [0.2, 0.8]])
Q3 = np.array([[0.5, 0.5], [0.7, 0.3], [0.6, 0.4]])
X3 = np.array([[0.4, 0.6], [0.5, 0.5], [0.7, 0.3]])


class TestScoresByHand:
    def test_peer_mean(self):
        assert B.peer_mean(P3) == approx(X3, abs=1e-15)

    def test_peer_mean_single_agent_has_no_peers(self):
        assert np.all(np.isnan(B.peer_mean(np.array([[0.3, 0.7]]))))

    def test_brier(self):
        # S_1 = 1 - ((.5-.4)^2 + (.5-.6)^2) = 1 - (.01 + .01) = .98
        # S_2 = 1 - ((.7-.5)^2 + (.3-.5)^2) = 1 - (.04 + .04) = .92
        # S_3 = 1 - ((.6-.7)^2 + (.4-.3)^2) = 1 - (.01 + .01) = .98
        assert B.peer_scores(Q3, P3, "brier") == approx([0.98, 0.92, 0.98], abs=1e-12)
        assert B.peer_scores(Q3, P3) == approx([0.98, 0.92, 0.98], abs=1e-12)  # brier is the default

    def test_brier_extremes(self):
        # q == x -> 1;  q = (1,0), x = (0,1) -> 1 - (1 + 1) = -1
        assert B.score_forecast([0.3, 0.7], [0.3, 0.7], "brier") == approx(1.0)
        assert B.score_forecast([1.0, 0.0], [0.0, 1.0], "brier") == approx(-1.0)

    def test_log(self):
        # S_1 = .4 ln .5 + .6 ln .5 = ln .5                          = -0.6931471805599453
        # S_2 = .5 ln .7 + .5 ln .3 = .5(-0.3566749 - 1.2039728)     = -0.7803238741323343
        # S_3 = .7 ln .6 + .3 ln .4 = .7(-0.5108256) + .3(-0.9162907) = -0.6324651561984400
        expected = [-0.6931471805599453, -0.7803238741323343, -0.63246515619844]
        assert B.peer_scores(Q3, P3, "log") == approx(expected, abs=1e-12)

    def test_log_zero_forecast_is_floored(self):
        # q = (1, 0), x = (.5, .5): .5 ln 1 + .5 ln(1e-6) = .5 * (-13.815510557964274) = -6.907755278982137
        assert B.score_forecast([1.0, 0.0], [0.5, 0.5], "log") == approx(-6.907755278982137, abs=1e-12)
        # A zero forecast where nothing was realized costs nothing: 1 * ln 1 + 0 * ln(1e-6) = 0
        assert B.score_forecast([1.0, 0.0], [1.0, 0.0], "log") == approx(0.0, abs=1e-15)

    def test_spherical(self):
        # ||q_1|| = sqrt(.25+.25) = sqrt(.5) = .7071068;  x.q = .4*.5 + .6*.5 = .5     -> .5/.7071068 = .7071068
        # ||q_2|| = sqrt(.49+.09) = sqrt(.58) = .7615773;  x.q = .5*.7 + .5*.3 = .5    -> .5/.7615773 = .6565322
        # ||q_3|| = sqrt(.36+.16) = sqrt(.52) = .7211103;  x.q = .7*.6 + .3*.4 = .54   -> .54/.7211103 = .7488453
        expected = [0.7071067811865475, 0.6565321642986128, 0.7488452649040593]
        assert B.peer_scores(Q3, P3, "spherical") == approx(expected, abs=1e-12)

    def test_single_agent_scores_zero(self):
        for rule in B.SCORING_RULES:
            assert B.peer_scores(np.array([[0.9, 0.1]]), np.array([[0.2, 0.8]]), rule).tolist() == [0.0]

    def test_peer_scores_with_invalid_agent(self):
        # Add an invalid 4th agent p_4 = (.5,.5), q_4 = (.3,.7). It is left out of everyone's peer mean,
        # so agents 1-3 see exactly X3 above and score (.98, .92, .98); agent 4 gets the worst valid
        # score of the row, min(.98, .92, .98) = .92.
        P = np.vstack([P3, [0.5, 0.5]])
        Q = np.vstack([Q3, [0.3, 0.7]])
        valid = np.array([True, True, True, False])
        assert B.peer_mean(P, valid)[:3] == approx(X3, abs=1e-15)
        assert B.peer_scores(Q, P, "brier", valid) == approx([0.98, 0.92, 0.98, 0.92], abs=1e-12)
        # Without the mask the 4th agent counts: sum p = (2.1, 1.9), X_{-1} = (1.3/3, 1.7/3);
        # S_1 = 1 - 2 * (.5 - 1.3/3)^2 = 1 - 2 * (1/15)^2 = 1 - 2/225 = 0.9911111
        assert B.peer_scores(Q, P, "brier")[0] == approx(1 - 2 / 225, abs=1e-12)

    def test_self_belief_and_round_scores(self):
        # self-belief = max_y p_i(y): (.8, .6, .8)
        assert B.self_belief_scores(P3) == approx([0.8, 0.6, 0.8])
        assert B.round_scores(P3, Q3, "self_belief") == approx([0.8, 0.6, 0.8])
        assert B.round_scores(P3, weighting="self_belief", valid=[True, False, True]) == approx([0.8, 0.0, 0.8])
        assert B.round_scores(P3, Q3, "peer_prediction", "brier") == approx([0.98, 0.92, 0.98], abs=1e-12)
        assert B.round_scores(P3, Q3, "uniform").tolist() == [0.0, 0.0, 0.0]


# ============================================================================ weights (hand-computed)
class TestWeightsByHand:
    def test_mwu_one_and_two_rounds(self):
        # Round 1 S = (.98, .92, .98), eta = 2: w ∝ (e^1.96, e^1.84, e^1.96) ∝ (1, e^-.12, 1)
        #   e^-.12 = 0.8869204367171575 ; Z = 2.8869204367171575
        #   w = (1/Z, e^-.12/Z, 1/Z) = (0.3463899, 0.3072203, 0.3463899)
        # Round 2 S = (0, 1, 0): cumulative (1.96, 3.84, 1.96) -> ∝ (1, e^1.88, 1); e^1.88 = 6.553504862191148
        #   Z = 8.553504862191148; w = (1/Z, e^1.88/Z, 1/Z) = (0.1169111, 0.7661777, 0.1169111)
        S = np.array([[0.98, 0.92, 0.98], [0.0, 1.0, 0.0]])
        W = B.mwu_weights(S, eta=2.0)
        e1 = math.exp(-0.12)
        assert W[0] == approx([1 / (2 + e1), e1 / (2 + e1), 1 / (2 + e1)], rel=1e-12)
        assert W[0] == approx([0.34638987, 0.30722026, 0.34638987], abs=1e-8)
        e2 = math.exp(1.88)
        assert W[1] == approx([1 / (2 + e2), e2 / (2 + e2), 1 / (2 + e2)], rel=1e-12)
        assert W[1] == approx([0.11691114, 0.76617772, 0.11691114], abs=1e-8)

    def test_mwu_step_by_hand(self):
        # w = (.5, .25, .25), s = (0, ln 2 / 2, 0), eta = 2 -> w * (1, 2, 1) = (.5, .5, .25) / 1.25
        #   = (.4, .4, .2)
        out = mwu_step([0.5, 0.25, 0.25], [0.0, math.log(2) / 2, 0.0], eta=2.0)
        assert out == approx([0.4, 0.4, 0.2], abs=1e-15)

    def test_eta_zero_keeps_uniform(self):
        S = np.array([[5.0, -3.0, 0.1], [1.0, 2.0, 3.0]])
        assert B.mwu_weights(S, eta=0.0) == approx(np.full((2, 3), 1 / 3), abs=1e-15)

    def test_huge_eta_times_T_does_not_overflow(self):
        # eta = 50, T = 10_000 rounds: cumulative log-weights reach ~ 50 * 10_000 = 5e5, far past exp's
        # overflow at ~709. Agent 1 always scores 1, agents 0 and 2 score .5 and .9: agent 1 takes all weight.
        T = 10_000
        S = np.tile([0.5, 1.0, 0.9], (T, 1))
        W = B.mwu_weights(S, eta=50.0)
        assert np.all(np.isfinite(W))
        assert W[-1] == approx([0.0, 1.0, 0.0], abs=1e-300)
        # After round 1 the gap is 50 * .1 = 5 between agents 1 and 2: w_2 / w_1 = e^-5 exactly.
        assert W[0, 2] / W[0, 1] == approx(math.exp(-5.0), rel=1e-12)
        # An exact tie at the top stays an exact split however large eta * T.
        W = B.mwu_weights(np.tile([1.0, 1.0, -1.0], (T, 1)), eta=50.0)
        assert W[-1] == approx([0.5, 0.5, 0.0], abs=1e-300)


# ============================================================================ the paper's worked example
class TestPaperWorkedExample:
    """N = 5, K = 2, option 0 = the misconception, option 1 = the truth.

    Crowd (agents 0-3): p = (.9, .1), predicting q = p (false consensus: "everyone agrees with me").
    Truth-holder (agent 4): p = (.2, .8), predicting q = (.9, .1) (knows the crowd will be wrong).

    sum_j p_j = 4 * (.9, .1) + (.2, .8) = (3.8, 1.2)
    X_{-crowd} = ((3.8 - .9)/4, (1.2 - .1)/4) = (2.9/4, 1.1/4) = (.725, .275)
    X_{-truth} = ((3.8 - .2)/4, (1.2 - .8)/4) = (3.6/4, .4/4)   = (.9, .1)

    S_crowd = 1 - ((.9 - .725)^2 + (.1 - .275)^2) = 1 - (.030625 + .030625) = .93875
    S_truth = 1 - ((.9 - .9)^2 + (.1 - .1)^2)     = 1

    MWU with the same scores every round, eta = 2: w_i^(T) ∝ exp(2 T S_i). Dividing by the crowd's factor,
    w_crowd ∝ 1, w_truth ∝ r_T = exp(2 T (1 - .93875)) = exp(.1225 T), Z = 4 + r_T.

      T = 1: r = e^.1225 = 1.130319120074011;  w_crowd = 1/5.130319 = .1949196, w_truth = .2203214
      T = 3: r = e^.3675 = 1.444119798529550;  w_crowd = 1/5.444120 = .1836844, w_truth = .2652623

    Decision at T = 3 with squared weights: w_c^2 = .0337400, w_t^2 = .0703641
      y = 0: 4 * .0337400 * .9 + .0703641 * .2 = .1214640 + .0140728 = .1355367
      y = 1: 4 * .0337400 * .1 + .0703641 * .8 = .0134960 + .0562913 = .0697873   -> answer 0 (crowd)

    When does the truth-holder win? With exponent 2: 4 w_c^2 (.9 - .1) < w_t^2 (.8 - .2)
      <=> r^2 > 3.2 / .6 = 16/3 <=> .1225 T > ln(16/3)/2 = .8369882 <=> T > 6.8326  -> first at T = 7.
    With exponent 1: r > 16/3 <=> .1225 T > ln(16/3) = 1.6739764 <=> T > 13.665       -> first at T = 14.
    (Squaring the weights halves the number of rounds the truth-holder needs.)
    """

    P = np.array([[0.9, 0.1]] * 4 + [[0.2, 0.8]])
    Q = np.array([[0.9, 0.1]] * 5)

    def test_peer_means_and_scores(self):
        X = B.peer_mean(self.P)
        assert X[:4] == approx(np.array([[0.725, 0.275]] * 4), abs=1e-15)
        assert X[4] == approx([0.9, 0.1], abs=1e-15)
        S = B.peer_scores(self.Q, self.P)
        assert S == approx([0.93875] * 4 + [1.0], abs=1e-12)

    def test_weights_after_1_and_3_rounds(self):
        S = B.peer_scores(self.Q, self.P)
        W = B.mwu_weights(np.tile(S, (3, 1)), eta=2.0)
        assert W.shape == (3, 5)
        assert W[0] == approx([0.19491964858232322] * 4 + [0.22032140567070704], rel=1e-10)
        assert W[2] == approx([0.18368442227705914] * 4 + [0.26526231089176344], rel=1e-10)

    def test_default_eta_is_the_papers_2(self):
        # No eta given: the paper's eta = 2.0, so the same hand values as above.
        S = B.peer_scores(self.Q, self.P)
        W = B.mwu_weights(np.tile(S, (3, 1)))
        assert W[0] == approx([0.19491964858232322] * 4 + [0.22032140567070704], rel=1e-10)
        assert W[2] == approx([0.18368442227705914] * 4 + [0.26526231089176344], rel=1e-10)
        assert mwu_step(np.full(5, 0.2), S) == approx([0.19491964858232322] * 4 + [0.22032140567070704], rel=1e-10)

    def test_final_answer_after_3_rounds(self):
        W = B.mwu_weights(np.tile(B.peer_scores(self.Q, self.P), (3, 1)), eta=2.0)[-1]
        assert B.weighted_scores(self.P, W, exponent=2) == approx([0.13553669987005285, 0.06978726165861365], rel=1e-10)
        assert int(weighted_answer(self.P, W, exponent=2)) == 0
        # exponent 1 at T = 3: y0 = 4 * .1836844 * .9 + .2652623 * .2 = .7143164, y1 = .2856836
        assert B.weighted_scores(self.P, W, exponent=1) == approx([0.7143163823757656, 0.28568361762423444], rel=1e-10)

    @pytest.mark.parametrize(
        "T, exponent, expected",
        [(6, 2, 0), (7, 2, 1), (13, 1, 0), (14, 1, 1)],
    )
    def test_rounds_until_truth_wins(self, T, exponent, expected):
        # Thresholds from the docstring: exponent 2 flips at T = 7, exponent 1 at T = 14.
        W = B.mwu_weights(np.tile(B.peer_scores(self.Q, self.P), (T, 1)), eta=2.0)[-1]
        assert int(weighted_answer(self.P, W, exponent=exponent)) == expected

    def test_t7_weighted_scores(self):
        # T = 7: r = e^.8575 = 2.357260170698478, w_c = 1/6.357260 = .1573005, w_t = .3707981
        #   y0 = 4 * .1573005^2 * .9 + .3707981^2 * .2 = .0890795 + .0274981 = .1165746
        #   y1 = 4 * .1573005^2 * .1 + .3707981^2 * .8 = .0098977 + .1099926 = .1198904
        W = B.mwu_weights(np.tile(B.peer_scores(self.Q, self.P), (7, 1)), eta=2.0)[-1]
        assert W == approx([0.15730046799235042] * 4 + [0.3707981280305984], rel=1e-10)
        assert B.weighted_scores(self.P, W, 2) == approx([0.11657462438040406, 0.11989037629304183], rel=1e-10)


# ============================================================================ aggregators (hand-computed)
class TestWeightedByHand:
    # P: agent 0 sure of A, agent 1 leans B (.1, .9), agent 2 sure of B; w = (.45, .30, .25)
    P = np.array([[1.0, 0.0], [0.1, 0.9], [0.0, 1.0]])
    w = np.array([0.45, 0.30, 0.25])

    def test_exponent_1(self):
        # y0 = .45*1 + .30*.1 + .25*0 = .48 ;  y1 = .45*0 + .30*.9 + .25*1 = .52   -> B (1)
        assert B.weighted_scores(self.P, self.w, exponent=1) == approx([0.48, 0.52], abs=1e-15)
        assert int(weighted_answer(self.P, self.w, exponent=1)) == 1

    def test_exponent_2(self):
        # w^2 = (.2025, .09, .0625)
        # y0 = .2025 + .09*.1 = .2115 ;  y1 = .09*.9 + .0625 = .081 + .0625 = .1435   -> A (0)
        assert B.weighted_scores(self.P, self.w, exponent=2) == approx([0.2115, 0.1435], abs=1e-15)
        assert int(weighted_answer(self.P, self.w, exponent=2)) == 0
        assert int(weighted_answer(self.P, self.w)) == 0  # the paper's exponent 2 is the default

    def test_exponent_0_ignores_weights(self):
        # w^0 = 1: y0 = 1 + .1 + 0 = 1.1 ; y1 = 0 + .9 + 1 = 1.9 -> B
        assert B.weighted_scores(self.P, self.w, exponent=0) == approx([1.1, 1.9], abs=1e-15)

    def test_three_options(self):
        # P rows (.7,.2,.1), (.1,.6,.3), (.2,.3,.5); w = (.5,.3,.2)
        # exponent 1: y0 = .35+.03+.04 = .42, y1 = .10+.18+.06 = .34, y2 = .05+.09+.10 = .24
        # exponent 2: w^2 = (.25,.09,.04): y0 = .175+.009+.008 = .192, y1 = .05+.054+.012 = .116,
        #             y2 = .025+.027+.02 = .072
        P = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5]])
        w = np.array([0.5, 0.3, 0.2])
        assert B.weighted_scores(P, w, 1) == approx([0.42, 0.34, 0.24], abs=1e-15)
        assert B.weighted_scores(P, w, 2) == approx([0.192, 0.116, 0.072], abs=1e-15)

    def test_weighted_tie_uses_keys(self):
        # Two agents with equal weight, opposite one-hot beliefs: y = (.25, .25, 0) with exponent 2.
        P = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        w = np.array([0.5, 0.5])
        assert int(weighted_answer(P, w, 2, keys=[0.1, 0.7, 0.9])) == 1  # 2 has the top key but is not tied
        assert int(weighted_answer(P, w, 2, keys=[0.8, 0.7, 0.9])) == 0
        assert int(weighted_answer(P, w, 2)) == 0  # no keys: first maximum


class TestVotesAndPlurality:
    def test_votes_with_invalid(self):
        P = np.array([[0.1, 0.9], [0.7, 0.3], [0.2, 0.8]])
        assert B.votes(P).tolist() == [1, 0, 1]
        assert B.votes(P, valid=[True, False, True]).tolist() == [1, -1, 1]

    def test_plurality_with_abstentions(self):
        # v = (2, 0, 2, 1, -1, 0, 2), K = 4: counts (2, 1, 3, 0) over 6 voters (the -1 abstains)
        #   shares = (2/6, 1/6, 3/6, 0) -> answer 2
        v = np.array([2, 0, 2, 1, -1, 0, 2])
        assert B.vote_shares(v, 4) == approx([1 / 3, 1 / 6, 1 / 2, 0.0], abs=1e-15)
        assert int(B.plurality(v, 4)) == 2

    def test_abstentions_can_decide(self):
        # v = (0, 0, -1, -1, -1, 1): 0 wins 2-1; the three abstentions are not votes for anything.
        assert int(B.plurality(np.array([0, 0, -1, -1, -1, 1]), 2)) == 0
        assert B.vote_shares(np.array([0, 0, -1, -1, -1, 1]), 2) == approx([2 / 3, 1 / 3], abs=1e-15)

    def test_all_abstain(self):
        assert B.vote_shares(np.array([-1, -1, -1]), 3).tolist() == [0.0, 0.0, 0.0]
        assert int(B.plurality(np.array([-1, -1, -1]), 3)) == -1
        assert int(B.plurality(np.array([-1, -1, -1]), 3, keys=[0.3, 0.9, 0.5])) == -1

    def test_tie_broken_by_keys(self):
        # v = (0, 1, -1, 1, 0): shares (.5, .5, 0), a tie between 0 and 1.
        v = np.array([0, 1, -1, 1, 0])
        assert int(B.plurality(v, 3, keys=[0.2, 0.7, 0.9])) == 1  # largest key among the tied {0, 1}
        assert int(B.plurality(v, 3, keys=[0.8, 0.7, 0.9])) == 0
        assert int(B.plurality(v, 3)) == 0  # no keys: first maximum
        idx, tied = B.argmax_tiebreak(B.vote_shares(v, 3), [0.2, 0.7, 0.9])
        assert int(idx) == 1 and bool(tied)
        idx, tied = B.argmax_tiebreak([0.1, 0.5, 0.4], [0.9, 0.1, 0.8])
        assert int(idx) == 1 and not bool(tied)

    def test_tie_tolerance(self):
        # A gap of 1e-9 is a real difference (not a tie): the larger score wins whatever the keys.
        idx, tied = B.argmax_tiebreak([0.5 - 1e-9, 0.5], [0.9, 0.1])
        assert int(idx) == 1 and not bool(tied)
        # Floating-point noise (0.1 + 0.2 vs 0.3 differ by 5.6e-17) is a tie: the keys decide.
        idx, tied = B.argmax_tiebreak([0.1 + 0.2, 0.3, 0.0], [0.1, 0.9, 0.95])
        assert int(idx) == 1 and bool(tied)
        idx, tied = B.argmax_tiebreak([0.1 + 0.2, 0.3, 0.0], [0.9, 0.1, 0.95])
        assert int(idx) == 0 and bool(tied)

    def test_seeded_tie_break_is_stable(self):
        # Keys depend only on (seed, question id): the same question gets the same keys and the same
        # answer whatever batch it is scored in and in whatever order.
        ids = ["q1", "q2", "q3", "q4"]
        keys = B.tiebreak_keys(7, ids, 3)
        assert keys.shape == (4, 3)
        assert np.all((keys >= 0) & (keys < 1))
        np.testing.assert_array_equal(B.tiebreak_keys(7, ids, 3), keys)  # rerun
        rev = B.tiebreak_keys(7, ids[::-1], 3)
        np.testing.assert_array_equal(rev, keys[::-1])  # batch order
        np.testing.assert_array_equal(B.tiebreak_keys(7, ["q3"], 3)[0], keys[2])  # alone
        assert not np.array_equal(B.tiebreak_keys(8, ids, 3), keys)  # the seed matters
        assert not np.array_equal(keys[0], keys[1])  # the id matters

        # Every question is a 2-2 tie between options 0 and 1 (one abstention).
        v = np.array([[0, 1, 0, 1, -1]] * 4)
        ans = B.plurality(v, 3, keys=keys)
        # By hand: the tied option with the larger key wins.
        assert ans.tolist() == [0 if k[0] > k[1] else 1 for k in keys]
        ans_rev = B.plurality(v, 3, keys=rev)
        assert ans_rev.tolist() == ans.tolist()[::-1]

    def test_seeded_tie_break_is_not_always_first(self):
        # Over 64 seeds a 0/1 tie must go both ways (a fixed winner would fail w.p. 1 - 2^-63).
        v = np.array([0, 1])
        winners = {int(B.plurality(v, 2, keys=B.tiebreak_keys(s, ["q"], 2)[0])) for s in range(64)}
        assert winners == {0, 1}


class TestSurprisinglyPopular:
    def test_philadelphia(self):
        # "Is Philadelphia the capital of Pennsylvania?" 0 = yes (the misconception), 1 = no.
        # v = (0, 0, 0, 1, 1) -> shares (.6, .4).
        # Q: yes-voters predict (.9, .1), no-voters predict (.6, .4): mean = ((3*.9 + 2*.6)/5, ...) = (.78, .22)
        # gap = (.6 - .78, .4 - .22) = (-.18, +.18) -> 1 ("no") is surprisingly popular; plurality says 0.
        v = np.array([0, 0, 0, 1, 1])
        Q = np.array([[0.9, 0.1]] * 3 + [[0.6, 0.4]] * 2)
        assert int(B.surprisingly_popular(v, Q)) == 1
        assert int(B.plurality(v, 2)) == 0

    def test_three_options(self):
        # v = (0, 1, 1, 2): shares (.25, .5, .25)
        # Q mean = ((.2+.1+.1+.2)/4, (.6+.7+.6+.5)/4, (.2+.2+.3+.3)/4) = (.15, .6, .25)
        # gap = (.10, -.10, 0) -> 0
        v = np.array([0, 1, 1, 2])
        Q = np.array([[0.2, 0.6, 0.2], [0.1, 0.7, 0.2], [0.1, 0.6, 0.3], [0.2, 0.5, 0.3]])
        assert int(B.surprisingly_popular(v, Q)) == 0

    def test_tie_uses_keys(self):
        # v = (0, 1), Q rows both (.5, .5): gap = (0, 0) -> tie decided by keys.
        v = np.array([0, 1])
        Q = np.array([[0.5, 0.5], [0.5, 0.5]])
        assert int(B.surprisingly_popular(v, Q, keys=[0.1, 0.9])) == 1
        assert int(B.surprisingly_popular(v, Q, keys=[0.9, 0.1])) == 0

    def test_padded_option_never_wins_on_a_tie(self):
        # A 2-option question padded to K = 3. v = (0, 1), Q rows (.5, .5, 0):
        # gap = (.5 - .5, .5 - .5, 0 - 0) = (0, 0, 0). The padded option 2 has gap 0 too, but the module
        # contract says a padded option can never win; the answer must be 0 or 1 whatever the keys.
        v = np.array([0, 1])
        Q = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])
        keys = np.array([0.1, 0.2, 0.9])  # the padded option has the largest key
        assert int(B.surprisingly_popular(v, Q, keys=keys)) in (0, 1)

    def test_padded_option_never_wins_when_all_abstain(self):
        # Everybody abstains on a 2-option question padded to K = 3: shares (0, 0, 0),
        # Q mean (.6, .4, 0) -> gap (-.6, -.4, 0). Returning the padded option 2 is never valid;
        # the only acceptable answers are a real option or -1 ("no answer", as plurality and bts_answer).
        v = np.array([-1, -1])
        Q = np.array([[0.6, 0.4, 0.0], [0.6, 0.4, 0.0]])
        assert int(B.surprisingly_popular(v, Q)) in (-1, 0, 1)


class TestBTS:
    # 4 agents, 2 options. v = (0, 0, 0, 1); q_1 = (.8,.2), q_2 = (.7,.3), q_3 = (.9,.1), q_4 = (.5,.5)
    # xbar = (3/4, 1/4)
    # ybar_0 = (.8*.7*.9*.5)^(1/4) = .252^(1/4) = .7085168;  ln = -1.3783262/4 = -0.3445815
    # ybar_1 = (.2*.3*.1*.5)^(1/4) = .003^(1/4) = .2340347;  ln = -5.8091430/4 = -1.4522857
    # info_0 = ln(.75 / .7085168) = -0.2876821 + 0.3445815 = 0.0568995
    # info_1 = ln(.25 / .2340347) = -1.3862944 + 1.4522857 = 0.0659914
    # pred_i = .75 ln(q_i0 / .75) + .25 ln(q_i1 / .25):
    #   pred_1 = .75 ln(1.0666667) + .25 ln(.8)  = .0484041 - .0557861 = -0.0073820
    #   pred_2 = .75 ln(.9333333)  + .25 ln(1.2) = -.0517444 + .0455804 = -0.0061643
    #   pred_3 = .75 ln(1.2)       + .25 ln(.4)  = .1367413 - .2290727 = -0.0923315
    #   pred_4 = .75 ln(.6666667)  + .25 ln(2)   = -.3040988 + .1732868 = -0.1308120
    # score = info_{a_i} + pred_i:
    #   (0.0495175, 0.0507352, -0.0354320, -0.0648206)
    v = np.array([0, 0, 0, 1])
    Q = np.array([[0.8, 0.2], [0.7, 0.3], [0.9, 0.1], [0.5, 0.5]])
    expected = [0.04951747844052352, 0.050735210999172546, -0.035432039957175226, -0.06482064948252067]

    def test_scores(self):
        assert B.bts_scores(self.v, self.Q) == approx(self.expected, abs=1e-12)

    def test_alpha(self):
        # alpha = .5: agent 1 = .0568995 + .5 * (-.0073820) = .0532085
        #             agent 4 = .0659914 + .5 * (-.1308120) = .0005854
        s = B.bts_scores(self.v, self.Q, alpha=0.5)
        assert s[0] == approx(0.05320847692821054, abs=1e-12)
        assert s[3] == approx(0.000585368488047841, abs=1e-12)

    def test_answer_majority(self):
        # mean over endorsers: option 0 = (.0495175 + .0507352 - .0354320)/3 = .0216069 ; option 1 = -.0648206
        assert int(B.bts_answer(self.v, self.Q)) == 0

    def test_answer_minority_philadelphia(self):
        # v = (0,0,0,1,1), yes-voters predict (.9,.1), no-voters (.6,.4); xbar = (.6, .4)
        # ybar_0 = (.9^3 * .6^2)^(1/5) = .2624400^(1/5) = .7652547
        # ybar_1 = (.1^3 * .4^2)^(1/5) = .00016^(1/5)   = .1741101
        # info_0 = ln(.6/.7652547) = -0.2432791 ; info_1 = ln(.4/.1741101) = 0.8317766
        # pred_yes = .6 ln(.9/.6) + .4 ln(.1/.4) = .2432791 - .5545177 = -0.3112387
        # pred_no  = .6 ln(.6/.6) + .4 ln(.4/.4) = 0
        # yes-voters: -.2432791 - .3112387 = -0.5545177 ; no-voters: 0.8317766  -> answer 1 (the minority)
        v = np.array([0, 0, 0, 1, 1])
        Q = np.array([[0.9, 0.1]] * 3 + [[0.6, 0.4]] * 2)
        s = B.bts_scores(v, Q)
        assert s == approx([-0.5545177444479563] * 3 + [0.8317766166719344] * 2, abs=1e-12)
        assert int(B.bts_answer(v, Q)) == 1

    def test_answer_uses_mean_not_sum(self):
        # K = 3, v = (0, 0, 1, 2): xbar = (.5, .25, .25)
        # q_1 = (.5,.4,.1), q_2 = (.4,.1,.5), q_3 = (.4,.3,.3), q_4 = (.2,.1,.7)
        # ln ybar_0 = (ln .5 + ln .4 + ln .4 + ln .2)/4 = (-.6931472 - .9162907 - .9162907 - 1.6094379)/4 = -1.0337916
        # ln ybar_1 = (ln .4 + ln .1 + ln .3 + ln .1)/4 = (-.9162907 - 2.3025851 - 1.2039728 - 2.3025851)/4 = -1.6813584
        # ln ybar_2 = (ln .1 + ln .5 + ln .3 + ln .7)/4 = (-2.3025851 - .6931472 - 1.2039728 - .3566749)/4 = -1.1390950
        # info = (ln .5 + 1.0337916, ln .25 + 1.6813584, ln .25 + 1.1390950) = (.3406445, .2950641, -.2471994)
        # pred_i = .5 ln(q_i0/.5) + .25 ln(q_i1/.25) + .25 ln(q_i2/.25):
        #   pred_1 = 0 + .25 ln 1.6 + .25 ln .4             = .1175009 - .2290727          = -.1115718
        #   pred_2 = .5 ln .8 + .25 ln .4 + .25 ln 2         = -.1115718 - .2290727 + .1732868 = -.1673577
        #   pred_3 = .5 ln .8 + .25 ln 1.2 + .25 ln 1.2      = -.1115718 + .0911608          = -.0204110
        #   pred_4 = .5 ln .4 + .25 ln .4 + .25 ln 2.8       = -.4581454 - .2290727 + .2574068 = -.4298132
        # scores = (.2290727, .1732868, .2746531, -.6770126)
        # endorsers' mean: option 0 = (.2290727 + .1732868)/2 = .2011797, option 1 = .2746531, option 2 = -.6770126
        #   -> answer 1 (a sum would say option 0: .4023595 > .2746531)
        v = np.array([0, 0, 1, 2])
        Q = np.array([[0.5, 0.4, 0.1], [0.4, 0.1, 0.5], [0.4, 0.3, 0.3], [0.2, 0.1, 0.7]])
        expected = [0.22907268296853867, 0.1732867951399862, 0.27465307216702733, -0.6770125502755524]
        assert B.bts_scores(v, Q) == approx(expected, abs=1e-12)
        assert int(B.bts_answer(v, Q)) == 1

    @pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
    @PROPERTY
    @given(
        dims=st.tuples(st.integers(2, 7), st.integers(2, 5)),
        data=st.data(),
    )
    def test_bts_is_zero_sum(self, dims, data):
        # Prelec (2004): with alpha = 1 the BTS scores of all respondents sum to zero:
        #   sum_r info_r = n sum_k xbar_k (ln xbar_k - ln ybar_k),
        #   sum_r pred_r = sum_k xbar_k (sum_r ln q_rk - n ln xbar_k) = n sum_k xbar_k (ln ybar_k - ln xbar_k).
        N, K = dims
        v = np.asarray(data.draw(st.lists(st.integers(0, K - 1), min_size=N, max_size=N)))
        Q = data.draw(belief_array(N, K))
        s = B.bts_scores(v, Q, alpha=1.0)
        assert np.all(np.isfinite(s))
        assert float(s.sum()) == approx(0.0, abs=1e-9)

    def test_abstainers_score_nan_and_all_abstain(self):
        s = B.bts_scores(np.array([0, -1, 1, 0]), np.array([[0.6, 0.4]] * 4))
        assert np.isnan(s[1]) and np.all(np.isfinite(s[[0, 2, 3]]))
        assert np.all(np.isnan(B.bts_scores(np.array([-1, -1]), np.array([[0.5, 0.5]] * 2))))
        assert int(B.bts_answer(np.array([-1, -1]), np.array([[0.5, 0.5]] * 2))) == -1

    def test_answer_tie_uses_keys(self):
        # Symmetric: v = (0, 1), q_1 = (.5,.5) = q_2. xbar = (.5,.5), ybar = (.5,.5): info = 0, pred = 0
        # -> both options have mean score 0: a tie.
        v = np.array([0, 1])
        Q = np.array([[0.5, 0.5], [0.5, 0.5]])
        assert B.bts_scores(v, Q) == approx([0.0, 0.0], abs=1e-15)
        assert int(B.bts_answer(v, Q, keys=[0.2, 0.6])) == 1
        assert int(B.bts_answer(v, Q, keys=[0.6, 0.2])) == 0


# ============================================================================ error cases
class TestErrors:
    @pytest.mark.parametrize("n", [1, 3])
    def test_unknown_scoring_rule(self, n):
        P = np.full((n, 2), 0.5)
        with pytest.raises(ValueError) as e:
            B.peer_scores(P, P, rule="breir")
        for name in ("brier", "log", "spherical", "breir"):
            assert name in str(e.value)
        with pytest.raises(ValueError, match="brier"):
            B.score_forecast([0.5, 0.5], [0.5, 0.5], rule="quadratic")
        with pytest.raises(ValueError, match="spherical"):
            B.round_scores(P, P, "peer_prediction", rule="Brier")

    def test_unknown_weighting(self):
        P = np.full((3, 2), 0.5)
        with pytest.raises(ValueError) as e:
            B.round_scores(P, P, weighting="majority")
        for name in ("peer_prediction", "self_belief", "uniform", "majority"):
            assert name in str(e.value)

    def test_peer_prediction_needs_q(self):
        with pytest.raises(ValueError, match="peer"):
            B.round_scores(np.full((3, 2), 0.5), None, weighting="peer_prediction")

    @pytest.mark.parametrize("eta", [-1e-9, -0.5, -2.0])
    def test_negative_eta_mwu_weights(self, eta):
        with pytest.raises(ValueError, match="eta"):
            B.mwu_weights(np.zeros((2, 3)), eta=eta)

    @pytest.mark.parametrize("eta", [-1e-9, -0.5, -2.0])
    def test_negative_eta_mwu_step(self, eta):
        # mwu_step is Algorithm 1's update too: a negative rate would reward bad forecasters.
        with pytest.raises(ValueError, match="eta"):
            mwu_step(np.full(3, 1 / 3), np.array([1.0, 0.0, 0.5]), eta=eta)

    @pytest.mark.parametrize("exponent", [-1e-9, -1.0, -2.0])
    def test_negative_exponent(self, exponent):
        P = np.array([[1.0, 0.0], [0.0, 1.0]])
        w = np.array([0.5, 0.5])
        with pytest.raises(ValueError, match="exponent"):
            B.weighted_scores(P, w, exponent=exponent)
        with pytest.raises(ValueError, match="exponent"):
            weighted_answer(P, w, exponent=exponent)


# ============================================================================ properties
class TestProperness:
    """(a) E[S(mu, X)] >= E[S(q, X)] for mu = E[X], with equality only at q = mu (exact expectations)."""

    @pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
    @PROPERTY
    @given(finite_distribution())
    def test_brier_decomposition_lemma(self, d):
        X, pw, q = d
        mu = pw @ X
        # Lemma: E||q - X||^2 = E||X - mu||^2 + ||q - mu||^2, i.e. E[S(q)] = 1 - Var - ||q - mu||^2
        var = float(sum(pw_m * np.sum((x - mu) ** 2) for pw_m, x in zip(pw, X)))
        dist2 = float(np.sum((q - mu) ** 2))
        assert expected_score(q, X, pw, "brier") == approx(1 - var - dist2, abs=1e-12)
        gap = expected_score(mu, X, pw, "brier") - expected_score(q, X, pw, "brier")
        assert gap == approx(dist2, abs=1e-12)
        assert gap >= -1e-12
        if dist2 > 1e-10:
            assert gap > 0

    @pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
    @PROPERTY
    @given(finite_distribution())
    def test_log_is_proper(self, d):
        X, pw, q = d
        mu = pw @ X
        gap = expected_score(mu, X, pw, "log") - expected_score(q, X, pw, "log")
        assert gap >= -1e-12
        support = mu > 0
        if np.all(q[support] > 0):
            # No floor involved (entries are 0 or >= 1/120 >> LOG_EPS): gap = KL(mu || q) >= 1/2 ||mu - q||_1^2
            kl = float(sum(m * math.log(m / qq) for m, qq in zip(mu[support], q[support])))
            assert gap == approx(kl, abs=1e-12)
            assert gap >= 0.5 * float(np.abs(mu - q).sum()) ** 2 - 1e-12
        else:
            # q rules out an outcome that happens with probability >= 1/(41*120) ~ 2e-4 (support entries
            # >= 1/120, mixture weights >= 1/41): the LOG_EPS floor costs ~ mu_k ln(mu_k / 1e-6) > 0.
            assert gap > 0
        if float(np.abs(q - mu).sum()) > 1e-6:
            assert gap > 0

    @pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
    @PROPERTY
    @given(finite_distribution())
    def test_spherical_is_proper(self, d):
        X, pw, q = d
        mu = pw @ X
        gap = expected_score(mu, X, pw, "spherical") - expected_score(q, X, pw, "spherical")
        # E[S(q)] = mu.q / ||q||, so gap = ||mu|| - mu.q/||q|| >= 0 by Cauchy-Schwarz, 0 iff q ∝ mu iff q = mu.
        closed = float(np.linalg.norm(mu) - mu @ q / np.linalg.norm(q))
        assert gap == approx(closed, abs=1e-12)
        assert gap >= -1e-12
        if np.linalg.norm(q - mu) > 1e-4:
            assert gap > 0


class TestMWUProperties:
    """(b) rows are distributions for any finite scores and eta in [0, 50]; equals iterating mwu_step."""

    @PROPERTY
    @given(
        shape=st.tuples(st.integers(1, 12), st.integers(1, 7)),
        data=st.data(),
        eta=st.floats(0, 50),
    )
    def test_rows_are_distributions(self, shape, data, eta):
        T, N = shape
        S = data.draw(hnp.arrays(np.float64, (T, N), elements=st.floats(-1e6, 1e6)))
        W = B.mwu_weights(S, eta)
        assert W.shape == (T, N)
        assert np.all(np.isfinite(W))
        assert np.all(W >= 0)
        assert W.sum(axis=-1) == approx(np.ones(T), abs=1e-12)
        # Order-preserving: a strictly higher cumulative score never gets a strictly smaller weight,
        # and the best cumulative score always has the largest weight.
        C = np.cumsum(S, axis=0)
        higher = C[:, :, None] > C[:, None, :]
        assert np.all(~higher | (W[:, :, None] >= W[:, None, :]))
        assert np.all(W[np.arange(T), C.argmax(axis=1)] == W.max(axis=1))

    @PROPERTY
    @given(
        shape=st.tuples(st.integers(1, 6), st.integers(1, 7)),
        data=st.data(),
        eta=st.floats(0, 50),
    )
    def test_equals_iterated_mwu_step(self, shape, data, eta):
        # Scores in [-1, 1] and T <= 6: the weight ratio stays below e^(2 * 50 * 6) = e^600, so no weight
        # underflows below the smallest normal float (mwu_step works on linear weights, floored at `tiny`).
        T, N = shape
        S = data.draw(hnp.arrays(np.float64, (T, N), elements=st.floats(-1, 1)))
        W = B.mwu_weights(S, eta)
        w = np.full(N, 1.0 / N)
        for t in range(T):
            w = mwu_step(w, S[t], eta)
            np.testing.assert_allclose(w, W[t], rtol=1e-9, atol=0)

    @PROPERTY
    @given(
        shape=st.tuples(st.integers(1, 5), st.integers(1, 5)),
        data=st.data(),
        eta=st.floats(0, 5),
    )
    def test_matches_direct_formula(self, shape, data, eta):
        # Small eta * |S|: compute w_i^(t) = exp(eta * sum_{s<=t} S_i^(s)) / Z directly in float.
        T, N = shape
        S = data.draw(hnp.arrays(np.float64, (T, N), elements=st.floats(-1, 1)))
        W = B.mwu_weights(S, eta)
        for t in range(T):
            raw = [math.exp(eta * sum(S[s, i] for s in range(t + 1))) for i in range(N)]
            z = sum(raw)
            np.testing.assert_allclose(W[t], [r / z for r in raw], rtol=1e-12)


class TestUniformIsMajority:
    """(c) weighting='uniform' -> scores 0 -> uniform weights; plurality = the most common answer."""

    @pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
    @PROPERTY
    @given(
        dims=st.tuples(st.integers(1, 4), st.integers(1, 7), st.integers(2, 5)),
        data=st.data(),
        eta=st.floats(0, 50),
    )
    def test_uniform_weighting_is_plurality(self, dims, data, eta):
        T, N, K = dims
        P = np.stack([data.draw(belief_array(N, K)) for _ in range(T)])  # (T, N, K)
        S = B.round_scores(P, weighting="uniform")
        assert S.shape == (T, N) and np.all(S == 0)
        W = B.mwu_weights(S, eta)
        np.testing.assert_allclose(W, np.full((T, N), 1.0 / N), rtol=1e-15)
        v = B.votes(P[-1])
        onehot = (v[:, None] == np.arange(K)).astype(float)
        keys = np.asarray(data.draw(st.lists(st.floats(0, 0.999), min_size=K, max_size=K)))
        # Uniform weights on one-hot votes (any exponent) is plurality, ties included (same keys).
        for e in (1.0, 2.0):
            assert int(weighted_answer(onehot, W[-1], e, keys)) == int(B.plurality(v, K, keys))

    @PROPERTY
    @given(
        v=st.integers(2, 5).flatmap(
            lambda k: st.tuples(st.just(k), st.lists(st.integers(-1, k - 1), min_size=1, max_size=15))
        ),
        data=st.data(),
    )
    def test_plurality_matches_counter(self, v, data):
        K, votes = v
        counts = Counter(x for x in votes if x >= 0)
        arr = np.asarray(votes)
        keys = np.asarray(
            data.draw(st.lists(st.floats(0, 0.999, allow_subnormal=False), min_size=K, max_size=K, unique=True))
        )
        if not counts:
            assert int(B.plurality(arr, K)) == -1
            assert int(B.plurality(arr, K, keys)) == -1
            return
        top = max(counts.values())
        tied = sorted(a for a, c in counts.items() if c == top)
        # With keys: the tied answer with the largest key. Without keys: the smallest tied index.
        assert int(B.plurality(arr, K, keys)) == max(tied, key=lambda a: keys[a])
        assert int(B.plurality(arr, K)) == tied[0]
        if len(tied) == 1:
            assert int(B.plurality(arr, K)) == counts.most_common(1)[0][0]


class TestPeerMeanLoop:
    """(d) peer_mean matches a naive loop (with and without a validity mask)."""

    @PROPERTY
    @given(
        dims=st.tuples(st.integers(2, 7), st.integers(1, 5)),
        data=st.data(),
    )
    def test_naive_loop(self, dims, data):
        N, K = dims
        P = data.draw(hnp.arrays(np.float64, (N, K), elements=st.floats(-10, 10)))
        valid = np.asarray(data.draw(st.lists(st.booleans(), min_size=N, max_size=N)))
        got = B.peer_mean(P)
        got_v = B.peer_mean(P, valid)
        for i in range(N):
            acc = [0.0] * K
            for j in range(N):
                if j != i:
                    for k in range(K):
                        acc[k] += P[j, k]
            np.testing.assert_allclose(got[i], [a / (N - 1) for a in acc], rtol=1e-12, atol=1e-12)
            peers = [j for j in range(N) if j != i and valid[j]]
            if peers:
                exp = [sum(P[j, k] for j in peers) / len(peers) for k in range(K)]
                np.testing.assert_allclose(got_v[i], exp, rtol=1e-12, atol=1e-12)
            else:
                assert np.all(np.isnan(got_v[i]))


class TestPaddingInvariance:
    """(e) zero-padding the options changes no score and no answer."""

    @pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
    @PROPERTY
    @given(
        dims=st.tuples(st.integers(1, 6), st.integers(2, 5), st.integers(1, 3)),
        data=st.data(),
        eta=st.floats(0, 10),
    )
    def test_scores_and_answers(self, dims, data, eta):
        N, K, extra = dims
        T = 2
        P = np.stack([data.draw(belief_array(N, K)) for _ in range(T)])
        Q = np.stack([data.draw(belief_array(N, K)) for _ in range(T)])
        valid = np.asarray(data.draw(st.lists(st.booleans(), min_size=N, max_size=N)))
        keys = np.asarray(data.draw(st.lists(st.floats(0, 0.999), min_size=K + extra, max_size=K + extra)))
        Pp = np.concatenate([P, np.zeros((T, N, extra))], axis=-1)
        Qp = np.concatenate([Q, np.zeros((T, N, extra))], axis=-1)

        for rule in B.SCORING_RULES:
            np.testing.assert_allclose(B.peer_scores(Qp, Pp, rule), B.peer_scores(Q, P, rule), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(
                B.peer_scores(Qp, Pp, rule, valid), B.peer_scores(Q, P, rule, valid), rtol=1e-12, atol=1e-12
            )
        np.testing.assert_allclose(B.self_belief_scores(Pp), B.self_belief_scores(P))

        W = B.mwu_weights(B.peer_scores(Q, P), eta)[-1]
        Wp = B.mwu_weights(B.peer_scores(Qp, Pp), eta)[-1]
        np.testing.assert_allclose(Wp, W, rtol=1e-12)
        for e in (1.0, 2.0):
            a = int(weighted_answer(P[-1], W, e, keys[:K]))
            ap = int(weighted_answer(Pp[-1], Wp, e, keys))
            assert ap == a and ap < K

        v = B.votes(P[-1], valid)
        vp = B.votes(Pp[-1], valid)
        assert vp.tolist() == v.tolist()
        assert int(B.plurality(vp, K + extra, keys)) == int(B.plurality(v, K, keys[:K]))
        s, sp = B.bts_scores(v, Q[-1]), B.bts_scores(vp, Qp[-1])
        np.testing.assert_allclose(sp, s, rtol=1e-12, atol=1e-12)  # NaN == NaN for abstainers
        assert int(B.bts_answer(vp, Qp[-1], keys=keys)) == int(B.bts_answer(v, Q[-1], keys=keys[:K]))
        # surprisingly_popular: see TestSurprisinglyPopular.test_padded_option_* (explicit cases).


# ============================================================================ vectorization
class TestVectorization:
    """A batch (B, T, N, K) gives the same results as looping over questions (and rounds)."""

    Bq, T, N, K = 7, 3, 5, 4

    def setup_method(self):
        rng = np.random.default_rng(20240601)
        self.P = rng_beliefs(rng, (self.Bq, self.T, self.N, self.K))
        self.Q = rng_beliefs(rng, (self.Bq, self.T, self.N, self.K))
        self.valid = rng.random((self.Bq, self.T, self.N)) > 0.2
        self.keys = B.tiebreak_keys(3, [f"q{b}" for b in range(self.Bq)], self.K)
        # Force an exact 4-way vote tie in question 0's last round: one-hot beliefs on 0, 1, 2, 3 and an
        # invalid 5th agent.
        self.P[0, -1] = np.vstack([np.eye(4), np.full(4, 0.25)])
        self.valid[0, -1] = [True, True, True, True, False]

    @pytest.mark.parametrize("rule", B.SCORING_RULES)
    def test_scores_weights_answers(self, rule):
        S = B.peer_scores(self.Q, self.P, rule)
        Sv = B.peer_scores(self.Q, self.P, rule, self.valid)
        assert S.shape == (self.Bq, self.T, self.N)
        W = B.mwu_weights(S, 2.0)
        assert W.shape == (self.Bq, self.T, self.N)
        ans = weighted_answer(self.P[:, -1], W[:, -1], 2.0, self.keys)
        assert ans.shape == (self.Bq,)
        for b in range(self.Bq):
            Sb = np.stack([B.peer_scores(self.Q[b, t], self.P[b, t], rule) for t in range(self.T)])
            np.testing.assert_allclose(S[b], Sb, rtol=1e-13, atol=1e-15)
            Svb = np.stack([B.peer_scores(self.Q[b, t], self.P[b, t], rule, self.valid[b, t]) for t in range(self.T)])
            np.testing.assert_allclose(Sv[b], Svb, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(W[b], B.mwu_weights(Sb, 2.0), rtol=1e-13)
            assert int(ans[b]) == int(weighted_answer(self.P[b, -1], W[b, -1], 2.0, self.keys[b]))
        X = B.peer_mean(self.P)
        for b in range(self.Bq):
            for t in range(self.T):
                np.testing.assert_allclose(X[b, t], B.peer_mean(self.P[b, t]), rtol=1e-13)

    def test_round_scores_all_weightings(self):
        for weighting in B.WEIGHTINGS:
            S = B.round_scores(self.P, self.Q, weighting, "brier", valid=self.valid)
            for b in range(self.Bq):
                for t in range(self.T):
                    exp = B.round_scores(self.P[b, t], self.Q[b, t], weighting, "brier", valid=self.valid[b, t])
                    np.testing.assert_allclose(S[b, t], exp, rtol=1e-13, atol=1e-15)

    def test_vote_aggregators(self):
        P, Q, valid = self.P[:, -1], self.Q[:, -1], self.valid[:, -1]
        v = B.votes(P, valid)
        assert v.shape == (self.Bq, self.N)
        plu = B.plurality(v, self.K, self.keys)
        sp = B.surprisingly_popular(v, Q, self.keys)
        bs = B.bts_scores(v, Q)
        ba = B.bts_answer(v, Q, keys=self.keys)
        ws = B.weighted_scores(P, np.full((self.Bq, self.N), 1 / self.N), 1.0)
        for b in range(self.Bq):
            vb = B.votes(P[b], valid[b])
            assert v[b].tolist() == vb.tolist()
            assert int(plu[b]) == int(B.plurality(vb, self.K, self.keys[b]))
            assert int(sp[b]) == int(B.surprisingly_popular(vb, Q[b], self.keys[b]))
            np.testing.assert_allclose(bs[b], B.bts_scores(vb, Q[b]), rtol=1e-13)
            assert int(ba[b]) == int(B.bts_answer(vb, Q[b], keys=self.keys[b]))
            np.testing.assert_allclose(ws[b], B.weighted_scores(P[b], np.full(self.N, 1 / self.N), 1.0), rtol=1e-13)

    def test_normalize_batch(self):
        rng = np.random.default_rng(1)
        x = rng.normal(size=(self.Bq, self.N, self.K))
        x[0, 0] = -1.0  # a degenerate row
        p, deg = B.normalize(x)
        assert deg.shape == (self.Bq, self.N)
        for b in range(self.Bq):
            for i in range(self.N):
                pb, db = B.normalize(x[b, i])
                np.testing.assert_allclose(p[b, i], pb, rtol=1e-15)
                assert bool(deg[b, i]) == bool(db)
        assert bool(deg[0, 0])


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 7), st.integers(2, 5), st.integers(0, 2**32 - 1))
def test_bts_zero_sum_holds_with_abstainers(n, k, seed):
    # Prelec's BTS with alpha=1 sums to zero over the respondents; abstainers (-1) are not respondents,
    # so they must enter neither the answer shares nor the geometric mean of predictions.
    rng = np.random.default_rng(seed)
    v = rng.integers(-1, k, size=n)
    v[0] = max(v[0], 0)  # at least one respondent
    Q = rng.dirichlet(np.ones(k), size=n)
    s = B.bts_scores(v, Q, alpha=1.0)
    assert np.isnan(s[v < 0]).all()
    assert np.nansum(s) == pytest.approx(0.0, abs=1e-9)
