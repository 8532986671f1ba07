"""The protocol math (protocol.debate's Algorithm 1, protocol.beliefs' re-scoring rules). Every expected number is
computed by hand in the comments from the paper's formulas, never by calling the function under test again:

    X_{-i} = (1/(N-1)) sum_{j != i} p_j        S_i = 1 - ||q_i - X_{-i}||^2 (Brier)
    w_i <- w_i exp(eta S_i), normalised          answer = argmax_y sum_i (w_i^T)^2 p_i^T(y)
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
from acemad_utils.protocol.config import SCORING_RULES, WEIGHTINGS

approx = pytest.approx
PROPERTY = settings(deadline=None, max_examples=200)
SLOW = pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)


@st.composite
def simplex(draw, k: int, hi: int = 20):
    """A point of the K-simplex with rational entries c_k / sum(c): every nonzero entry is >= 1/(hi*k)."""
    c = np.asarray(draw(st.lists(st.integers(0, hi), min_size=k, max_size=k).filter(lambda c: sum(c) > 0)), float)
    return c / c.sum()


@st.composite
def belief_array(draw, n: int, k: int):
    return np.stack([draw(simplex(k)) for _ in range(n)])


@st.composite
def finite_distribution(draw):
    """M support points X_m of realized peer means with probabilities pw_m, and a forecast q."""
    k, m = draw(st.integers(2, 6)), draw(st.integers(1, 5))
    X = draw(belief_array(m, k))
    c = np.asarray(draw(st.lists(st.integers(1, 10), min_size=m, max_size=m)), float)
    return X, c / c.sum(), draw(simplex(k))


def mwu_step(w, s, eta: float = 2.0) -> np.ndarray:
    """One update of Algorithm 1 on linear weights (the package computes all rounds at once, in log space)."""
    out = np.asarray(w, float) * np.exp(eta * np.asarray(s, float))
    return out / out.sum(axis=-1, keepdims=True)


def answer(P, w, exponent: float = 2.0, keys=None) -> int:
    return int(B.argmax_tiebreak(B.weighted_scores(P, w, exponent), keys)[0])


def expected_score(q, X, pw, rule):
    return float(np.dot(pw, B.score_forecast(np.broadcast_to(q, X.shape), X, rule)))


# ============================================================================ normalize
@pytest.mark.parametrize(
    "x, p, deg",
    [
        ([-1.0, 2.0, 1.0], [0, 2 / 3, 1 / 3], False),  # negative -> 0; [0, 2, 1] / 3
        ([np.nan, 1.0, 3.0], [0, 0.25, 0.75], False),  # NaN -> 0
        ([np.inf, 1.0, 1.0], [0, 0.5, 0.5], False),  # inf -> 0
        ([-np.inf, 2.0], [0, 1], False),
        ([2.0, 6.0], [0.25, 0.75], False),  # rescaled: [2, 6] / 8
        ([1e308, 1e308], [0.5, 0.5], False),  # a naive sum overflows to inf
        ([0.0, 0.0, 0.0, 0.0], [0.25] * 4, True),  # no usable mass: uniform, flagged
        ([-1.0, np.nan, np.inf, -np.inf], [0.25] * 4, True),
    ],
)
def test_normalize(x, p, deg):
    got, d = B.normalize(x)
    assert got == approx(p, abs=1e-15) and bool(d) == deg


@SLOW
@PROPERTY
@given(
    x=hnp.arrays(
        float,
        st.tuples(st.integers(1, 4), st.integers(1, 8)),
        elements=st.one_of(st.floats(-1e300, 1e300), st.sampled_from([np.nan, np.inf, -np.inf, 0.0])),
    )
)
def test_normalize_always_gives_a_distribution(x):
    p, deg = B.normalize(x)
    usable = np.isfinite(x) & (x > 0)
    assert np.all(np.isfinite(p)) and np.all(p >= 0) and p.sum(axis=-1) == approx(np.ones(len(x)), abs=1e-12)
    assert deg.tolist() == (~usable.any(axis=-1)).tolist()
    assert all(np.all(r[~u] == 0.0) for r, u, d in zip(p, usable, deg) if not d)


# ============================================================================ scores by hand
# p = (.8,.2), (.6,.4), (.2,.8): sum (1.6, 1.4);  q = (.5,.5), (.7,.3), (.6,.4)
# X_{-1} = (.8/2, 1.2/2) = (.4,.6);  X_{-2} = (1/2, 1/2) = (.5,.5);  X_{-3} = (1.4/2, .6/2) = (.7,.3)
P3 = np.array([[0.8, 0.2], [0.6, 0.4], [0.2, 0.8]])
Q3 = np.array([[0.5, 0.5], [0.7, 0.3], [0.6, 0.4]])
X3 = np.array([[0.4, 0.6], [0.5, 0.5], [0.7, 0.3]])


def test_scores_by_hand():
    assert B.peer_mean(P3) == approx(X3, abs=1e-15) and np.isnan(B.peer_mean(np.array([[0.3, 0.7]]))).all()
    # brier: 1 - (.01 + .01) = .98;  1 - (.04 + .04) = .92;  1 - (.01 + .01) = .98 (the default rule)
    assert B.peer_scores(Q3, P3) == approx([0.98, 0.92, 0.98], abs=1e-12)
    assert B.score_forecast([0.3, 0.7], [0.3, 0.7]) == approx(1.0) and B.score_forecast([1, 0], [0, 1]) == approx(-1)
    # log: ln .5;  .5 ln .7 + .5 ln .3;  .7 ln .6 + .3 ln .4
    assert B.peer_scores(Q3, P3, "log") == approx([-0.6931471805599453, -0.7803238741323343, -0.63246515619844])
    # a zero forecast is floored at 1e-6: .5 ln 1 + .5 ln 1e-6; nothing realized there costs nothing
    assert B.score_forecast([1.0, 0.0], [0.5, 0.5], "log") == approx(-6.907755278982137)
    assert B.score_forecast([1.0, 0.0], [1.0, 0.0], "log") == approx(0.0, abs=1e-15)
    # spherical: .5/sqrt(.5);  .5/sqrt(.58);  .54/sqrt(.52)
    assert B.peer_scores(Q3, P3, "spherical") == approx([0.7071067811865475, 0.6565321642986128, 0.7488452649040593])
    for rule in SCORING_RULES:  # an agent with no peers scores 0
        assert B.peer_scores(np.array([[0.9, 0.1]]), np.array([[0.2, 0.8]]), rule).tolist() == [0.0]
    assert B.round_scores(P3, Q3, "self_belief") == approx([0.8, 0.6, 0.8])  # the ablations: max_y p_i(y) ...
    assert B.round_scores(P3, weighting="self_belief", valid=[True, False, True]) == approx([0.8, 0.0, 0.8])
    assert B.round_scores(P3, Q3, "uniform").tolist() == [0.0, 0.0, 0.0]  # ... and 0


def test_an_invalid_agent_is_left_out_and_scores_the_worst_of_its_round():
    # A 4th, invalid agent p = (.5,.5): the others still see X3 and score (.98, .92, .98); it gets min = .92.
    P, Q, valid = np.vstack([P3, [0.5, 0.5]]), np.vstack([Q3, [0.3, 0.7]]), np.array([True, True, True, False])
    assert B.peer_mean(P, valid)[:3] == approx(X3, abs=1e-15)
    assert B.peer_scores(Q, P, "brier", valid) == approx([0.98, 0.92, 0.98, 0.92], abs=1e-12)
    # counted: X_{-1} = (1.3/3, 1.7/3), S_1 = 1 - 2 (.5 - 1.3/3)^2 = 1 - 2/225
    assert B.peer_scores(Q, P)[0] == approx(1 - 2 / 225, abs=1e-12)
    # a forecast that did not parse (belief valid): counts in its peers' means, scores the row's worst
    fv = np.array([True, False, True, True])
    S = B.peer_scores(Q, P, forecast_valid=fv)
    assert S[1] == approx(min(S[[0, 2, 3]])) and S[[0, 2, 3]] == approx(B.peer_scores(Q, P)[[0, 2, 3]])


# ============================================================================ weights by hand
def test_huge_eta_times_rounds_does_not_overflow():
    # eta = 50, T = 10^4: log-weights reach 5e5, far past exp's overflow at ~709.
    W = B.mwu_weights(np.tile([0.5, 1.0, 0.9], (10_000, 1)), eta=50.0)
    assert np.all(np.isfinite(W)) and W[-1] == approx([0.0, 1.0, 0.0], abs=1e-300)
    assert W[0, 2] / W[0, 1] == approx(math.exp(-5.0), rel=1e-12)  # a gap of 50 * .1 after round 1
    assert B.mwu_weights(np.tile([1.0, 1.0, -1.0], (10_000, 1)), eta=50.0)[-1] == approx([0.5, 0.5, 0.0])
    assert B.mwu_weights(np.array([[5.0, -3.0, 0.1], [1.0, 2.0, 3.0]]), eta=0.0) == approx(np.full((2, 3), 1 / 3))


class TestPaperWorkedExample:
    """N = 5, K = 2, option 0 the misconception. Crowd (0-3): p = (.9,.1), q = p (false consensus); truth-holder
    (4): p = (.2,.8), q = (.9,.1). Sum p = (3.8, 1.2): X_crowd = (2.9/4, 1.1/4) = (.725,.275), X_truth = (.9,.1).
    S_crowd = 1 - 2 * .175^2 = .93875, S_truth = 1. With these scores every round, w_truth/w_crowd = e^(.1225 T):
    T = 1: w = (.1949196 x4, .2203214); T = 3: (.1836844 x4, .2652623).
    T = 3, k = 2: y0 = 4 * .0337400 * .9 + .0703641 * .2 = .1355367 > y1 = .0697873 -> the crowd's answer.
    The truth-holder wins when r^k > 3.2/.6 = 16/3: k = 2 from T = 7 (T > 6.83), k = 1 from T = 14 (T > 13.67)."""

    P = np.array([[0.9, 0.1]] * 4 + [[0.2, 0.8]])
    Q = np.array([[0.9, 0.1]] * 5)

    def weights(self, T, **kw):
        return B.mwu_weights(np.tile(B.peer_scores(self.Q, self.P), (T, 1)), **kw)

    def test_scores_weights_and_decision(self):
        assert B.peer_mean(self.P) == approx(np.array([[0.725, 0.275]] * 4 + [[0.9, 0.1]]))
        assert B.peer_scores(self.Q, self.P) == approx([0.93875] * 4 + [1.0], abs=1e-12)
        W = self.weights(3)  # no eta given: the paper's 2
        assert W[0] == approx([0.19491964858232322] * 4 + [0.22032140567070704], rel=1e-10)
        assert W[2] == approx([0.18368442227705914] * 4 + [0.26526231089176344], rel=1e-10)
        assert mwu_step(np.full(5, 0.2), B.peer_scores(self.Q, self.P)) == approx(W[0], rel=1e-10)
        assert B.weighted_scores(self.P, W[-1], 2) == approx([0.13553669987005285, 0.06978726165861365], rel=1e-10)
        assert answer(self.P, W[-1]) == 0  # exponent 2 is the default
        # k = 1: y0 = 4 * .1836844 * .9 + .2652623 * .2
        assert B.weighted_scores(self.P, W[-1], 1) == approx([0.7143163823757656, 0.28568361762423444], rel=1e-10)
        # T = 7: w = (.1573005 x4, .3707981); y = (.1165746, .1198904)
        W7 = self.weights(7, eta=2.0)[-1]
        assert W7 == approx([0.15730046799235042] * 4 + [0.3707981280305984], rel=1e-10)
        assert B.weighted_scores(self.P, W7, 2) == approx([0.11657462438040406, 0.11989037629304183], rel=1e-10)

    @pytest.mark.parametrize("T, exponent, expected", [(6, 2, 0), (7, 2, 1), (13, 1, 0), (14, 1, 1)])
    def test_rounds_until_the_truth_wins(self, T, exponent, expected):
        assert answer(self.P, self.weights(T, eta=2.0)[-1], exponent) == expected


# ============================================================================ decisions and votes by hand
def test_weighted_decision_by_hand():
    # w = (.45, .30, .25), P = (1,0), (.1,.9), (0,1). k = 1: (.48, .52) -> B; k = 2: w^2 = (.2025, .09, .0625):
    # (.2115, .1435) -> A; k = 0: (1.1, 1.9)
    P, w = np.array([[1.0, 0.0], [0.1, 0.9], [0.0, 1.0]]), np.array([0.45, 0.30, 0.25])
    assert B.weighted_scores(P, w, 1) == approx([0.48, 0.52]) and answer(P, w, 1) == 1
    assert B.weighted_scores(P, w, 2) == approx([0.2115, 0.1435]) and answer(P, w) == 0
    assert B.weighted_scores(P, w, 0) == approx([1.1, 1.9])
    # three options, w = (.5,.3,.2): k = 1 -> (.42, .34, .24); k = 2, w^2 = (.25,.09,.04) -> (.192, .116, .072)
    P, w = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5]]), np.array([0.5, 0.3, 0.2])
    assert B.weighted_scores(P, w, 1) == approx([0.42, 0.34, 0.24])
    assert B.weighted_scores(P, w, 2) == approx([0.192, 0.116, 0.072])
    # a tie (.25, .25, 0) goes to the tied option with the larger key; no keys: the first
    P, w = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), np.array([0.5, 0.5])
    assert answer(P, w, 2, [0.1, 0.7, 0.9]) == 1 and answer(P, w, 2, [0.8, 0.7, 0.9]) == 0 and answer(P, w) == 0
    # an invalid agent carries no belief; nobody valid: no answer; a padded option never wins
    ans, _ = B.weighted_decision(np.array([[0.9, 0.1], [0.0, 1.0]]), [0.5, 0.5], [False, True])
    assert int(ans) == 1 and int(B.weighted_decision(P, w, [False, False])[0]) == -1
    assert int(B.weighted_decision(P, w, [True, True], keys=[0, 0, 1], option_mask=[True, True, False])[0]) == 0


def test_votes_plurality_and_ties():
    P = np.array([[0.1, 0.9], [0.7, 0.3], [0.2, 0.8]])
    assert B.votes(P).tolist() == [1, 0, 1] and B.votes(P, valid=[True, False, True]).tolist() == [1, -1, 1]
    v = np.array([2, 0, 2, 1, -1, 0, 2])  # counts (2, 1, 3, 0) over 6 voters: the -1 abstains
    assert B.vote_shares(v, 4) == approx([1 / 3, 1 / 6, 1 / 2, 0.0]) and int(B.plurality(v, 4)) == 2
    assert B.vote_shares(np.array([-1, -1, -1]), 3).tolist() == [0.0] * 3  # plurality: test_plurality_matches_...
    idx, tied = B.argmax_tiebreak([0.1, 0.5, 0.4], [0.9, 0.1, 0.8])
    assert int(idx) == 1 and not bool(tied)
    idx, tied = B.argmax_tiebreak([0.5 - 1e-9, 0.5], [0.9, 0.1])  # 1e-9 is a real difference
    assert int(idx) == 1 and not bool(tied)
    idx, tied = B.argmax_tiebreak([0.1 + 0.2, 0.3, 0.0], [0.1, 0.9, 0.95])  # 5.6e-17 of float noise is a tie
    assert int(idx) == 1 and bool(tied)


def test_tie_break_keys_depend_on_seed_and_question_only():
    ids = ["q1", "q2", "q3", "q4"]
    keys = B.tiebreak_keys(7, ids, 3)
    assert keys.shape == (4, 3) and np.all((keys >= 0) & (keys < 1))
    np.testing.assert_array_equal(B.tiebreak_keys(7, ids[::-1], 3), keys[::-1])  # batch order
    np.testing.assert_array_equal(B.tiebreak_keys(7, ["q3"], 3)[0], keys[2])  # alone
    assert not np.array_equal(B.tiebreak_keys(8, ids, 3), keys) and not np.array_equal(keys[0], keys[1])
    ans = B.plurality(np.array([[0, 1, 0, 1, -1]] * 4), 3, keys=keys)  # 2-2 ties: the larger key wins
    assert ans.tolist() == [0 if k[0] > k[1] else 1 for k in keys]
    # over 64 seeds a 0/1 tie goes both ways (a fixed winner would fail w.p. 1 - 2^-63)
    assert {int(B.plurality(np.array([0, 1]), 2, keys=B.tiebreak_keys(s, ["q"], 2)[0])) for s in range(64)} == {0, 1}


# ============================================================================ re-scoring rules (protocol.beliefs)
def test_surprisingly_popular():
    # Philadelphia: v = (0,0,0,1,1), shares (.6,.4); mean prediction (.78,.22): gap (-.18, +.18) -> 1
    v, Q = np.array([0, 0, 0, 1, 1]), np.array([[0.9, 0.1]] * 3 + [[0.6, 0.4]] * 2)
    assert int(B.surprisingly_popular(v, Q)) == 1 and int(B.plurality(v, 2)) == 0
    # v = (0,1,1,2): shares (.25,.5,.25), mean Q (.15,.6,.25): gap (.1, -.1, 0) -> 0
    Q = np.array([[0.2, 0.6, 0.2], [0.1, 0.7, 0.2], [0.1, 0.6, 0.3], [0.2, 0.5, 0.3]])
    assert int(B.surprisingly_popular(np.array([0, 1, 1, 2]), Q)) == 0
    v, Q = np.array([0, 1]), np.array([[0.5, 0.5]] * 2)  # gap (0, 0): keys decide
    assert int(B.surprisingly_popular(v, Q, keys=[0.1, 0.9])) == 1
    assert int(B.surprisingly_popular(v, Q, [0.9, 0.1])) == 0
    # a padded option never wins, on a tie or when everyone abstains
    assert int(B.surprisingly_popular(v, np.array([[0.5, 0.5, 0.0]] * 2), keys=[0.1, 0.2, 0.9])) in (0, 1)
    assert int(B.surprisingly_popular(np.array([-1, -1]), np.array([[0.6, 0.4, 0.0]] * 2))) in (-1, 0, 1)


class TestBTS:
    # v = (0,0,0,1), q = (.8,.2), (.7,.3), (.9,.1), (.5,.5); xbar = (.75,.25)
    # ln ybar = (ln .252 / 4, ln .003 / 4) = (-.3445815, -1.4522857); info = (.0568995, .0659914)
    # pred_i = .75 ln(q_i0/.75) + .25 ln(q_i1/.25) = (-.0073820, -.0061643, -.0923315, -.1308120)
    v = np.array([0, 0, 0, 1])
    Q = np.array([[0.8, 0.2], [0.7, 0.3], [0.9, 0.1], [0.5, 0.5]])

    def test_scores_and_answers(self):
        expected = [0.04951747844052352, 0.050735210999172546, -0.035432039957175226, -0.06482064948252067]
        assert B.bts_scores(self.v, self.Q) == approx(expected, abs=1e-12)
        assert int(B.bts_answer(self.v, self.Q)) == 0
        # Philadelphia: yes-voters -.2432791 - .3112387, no-voters .8317766 + 0 -> the minority's answer
        v, Q = np.array([0, 0, 0, 1, 1]), np.array([[0.9, 0.1]] * 3 + [[0.6, 0.4]] * 2)
        assert B.bts_scores(v, Q) == approx([-0.5545177444479563] * 3 + [0.8317766166719344] * 2, abs=1e-12)
        assert int(B.bts_answer(v, Q)) == 1
        # the answer is the endorsers' MEAN score: option 0 (.2290727 + .1732868)/2 < option 1 .2746531 < its sum
        v, Q = np.array([0, 0, 1, 2]), np.array([[0.5, 0.4, 0.1], [0.4, 0.1, 0.5], [0.4, 0.3, 0.3], [0.2, 0.1, 0.7]])
        expected = [0.22907268296853867, 0.1732867951399862, 0.27465307216702733, -0.6770125502755524]
        assert B.bts_scores(v, Q) == approx(expected, abs=1e-12) and int(B.bts_answer(v, Q)) == 1

    def test_abstainers_and_ties(self):
        s = B.bts_scores(np.array([0, -1, 1, 0]), np.array([[0.6, 0.4]] * 4))
        assert np.isnan(s[1]) and np.all(np.isfinite(s[[0, 2, 3]]))
        assert np.all(np.isnan(B.bts_scores(np.array([-1, -1]), np.array([[0.5, 0.5]] * 2))))
        assert int(B.bts_answer(np.array([-1, -1]), np.array([[0.5, 0.5]] * 2))) == -1
        v, Q = np.array([0, 1]), np.array([[0.5, 0.5]] * 2)  # every score 0: keys decide
        assert B.bts_scores(v, Q) == approx([0.0, 0.0], abs=1e-15)
        assert int(B.bts_answer(v, Q, keys=[0.2, 0.6])) == 1 and int(B.bts_answer(v, Q, keys=[0.6, 0.2])) == 0

    @PROPERTY
    @given(st.integers(3, 7), st.integers(2, 5), st.integers(0, 2**32 - 1))
    def test_bts_is_zero_sum_over_respondents(self, n, k, seed):
        # Prelec (2004): with alpha = 1 the respondents' scores sum to 0; abstainers are no respondents.
        rng = np.random.default_rng(seed)
        v = rng.integers(-1, k, size=n)
        v[0] = max(v[0], 0)
        s = B.bts_scores(v, rng.dirichlet(np.ones(k), size=n))
        assert np.isnan(s[v < 0]).all() and np.nansum(s) == approx(0.0, abs=1e-9)


def test_agent_permutations_permute_the_movable_agents_only():
    movable = np.array([[True, True, False, True, True]] * 3)
    perm = B.agent_permutations(0, ["a", "b", "c"], movable, 50)
    assert perm.shape == (50, 3, 5) and (perm[..., 2] == 2).all()
    assert (np.sort(perm, axis=-1) == np.arange(5)).all() and len({tuple(p) for p in perm[:, 0]}) > 1
    np.testing.assert_array_equal(B.agent_permutations(0, ["c", "a"], movable[:2], 50), perm[:, [2, 0]])


# ============================================================================ errors
@pytest.mark.parametrize(
    "call",
    [
        lambda P: B.peer_scores(P, P, rule="breir"),
        lambda P: B.round_scores(P, P, weighting="majority"),
        lambda P: B.round_scores(P, None, weighting="peer_prediction"),  # no q to score
        lambda P: B.mwu_weights(np.zeros((2, 3)), eta=-1e-9),
        lambda P: B.weighted_scores(P, np.full(3, 1 / 3), exponent=-1e-9),
    ],
)
def test_a_bad_rule_weighting_eta_or_exponent_is_refused(call):
    with pytest.raises(ValueError):
        call(np.full((3, 2), 0.5))


# ============================================================================ properties
@SLOW
@PROPERTY
@given(finite_distribution(), st.sampled_from(SCORING_RULES))
def test_every_scoring_rule_is_proper(d, rule):
    """E[S(mu, X)] >= E[S(q, X)] for mu = E[X], strictly where q is away from mu (exact expectations)."""
    X, pw, q = d
    mu = pw @ X
    gap = expected_score(mu, X, pw, rule) - expected_score(q, X, pw, rule)
    assert gap >= -1e-12
    if rule == "brier":  # E||q - X||^2 = E||X - mu||^2 + ||q - mu||^2
        var = float(sum(w * np.sum((x - mu) ** 2) for w, x in zip(pw, X)))
        assert expected_score(q, X, pw, rule) == approx(1 - var - float(np.sum((q - mu) ** 2)), abs=1e-12)
    elif rule == "log" and np.all(q[mu > 0] > 0):  # no floor involved: the gap is KL(mu || q)
        s = mu > 0
        assert gap == approx(float(np.sum(mu[s] * np.log(mu[s] / q[s]))), abs=1e-12)
    elif rule == "spherical":  # ||mu|| - mu.q/||q|| >= 0 by Cauchy-Schwarz
        assert gap == approx(float(np.linalg.norm(mu) - mu @ q / np.linalg.norm(q)), abs=1e-12)
    if float(np.abs(q - mu).sum()) > 1e-4:
        assert gap > 0


@PROPERTY
@given(shape=st.tuples(st.integers(1, 6), st.integers(1, 7)), data=st.data(), eta=st.floats(0, 50))
def test_mwu_rows_are_ordered_distributions_equal_to_the_iterated_update(shape, data, eta):
    T, N = shape
    huge = B.mwu_weights(data.draw(hnp.arrays(np.float64, (T, N), elements=st.floats(-1e6, 1e6))), eta)
    assert np.all(np.isfinite(huge)) and huge.sum(axis=-1) == approx(np.ones(T), abs=1e-12)
    S = data.draw(hnp.arrays(np.float64, (T, N), elements=st.floats(-1, 1)))
    W = B.mwu_weights(S, eta)
    assert np.all(np.isfinite(W)) and np.all(W >= 0) and W.sum(axis=-1) == approx(np.ones(T), abs=1e-12)
    C = np.cumsum(S, axis=0)  # a strictly higher cumulative score never gets a smaller weight
    assert np.all(~(C[:, :, None] > C[:, None, :]) | (W[:, :, None] >= W[:, None, :]))
    w = np.full(N, 1.0 / N)  # |S| <= 1, T <= 6: linear weights stay above the smallest float
    for t in range(T):
        w = mwu_step(w, S[t], eta)
        np.testing.assert_allclose(w, W[t], rtol=1e-9, atol=0)


@SLOW
@PROPERTY
@given(dims=st.tuples(st.integers(1, 4), st.integers(1, 7), st.integers(2, 5)), data=st.data(), eta=st.floats(0, 50))
def test_uniform_weighting_is_plurality(dims, data, eta):
    T, N, K = dims
    P = np.stack([data.draw(belief_array(N, K)) for _ in range(T)])
    S = B.round_scores(P, weighting="uniform")
    W = B.mwu_weights(S, eta)
    assert np.all(S == 0) and W == approx(np.full((T, N), 1.0 / N), rel=1e-15)
    v = B.votes(P[-1])
    keys = np.asarray(data.draw(st.lists(st.floats(0, 0.999), min_size=K, max_size=K)))
    for e in (1.0, 2.0):  # uniform weights on one-hot votes is plurality, ties included
        assert answer((v[:, None] == np.arange(K)).astype(float), W[-1], e, keys) == int(B.plurality(v, K, keys))


@PROPERTY
@given(
    v=st.integers(2, 5).flatmap(
        lambda k: st.tuples(st.just(k), st.lists(st.integers(-1, k - 1), min_size=1, max_size=15))
    ),
    data=st.data(),
)
def test_plurality_matches_a_counter(v, data):
    K, votes = v
    counts, arr = Counter(x for x in votes if x >= 0), np.asarray(votes)
    keys = np.asarray(
        data.draw(st.lists(st.floats(0, 0.999, allow_subnormal=False), min_size=K, max_size=K, unique=True))
    )
    if not counts:
        assert int(B.plurality(arr, K)) == int(B.plurality(arr, K, keys)) == -1
        return
    tied = sorted(a for a, c in counts.items() if c == max(counts.values()))
    assert int(B.plurality(arr, K, keys)) == max(tied, key=lambda a: keys[a]) and int(B.plurality(arr, K)) == tied[0]


@SLOW
@PROPERTY
@given(dims=st.tuples(st.integers(1, 6), st.integers(2, 5), st.integers(1, 3)), data=st.data(), eta=st.floats(0, 10))
def test_zero_padded_options_change_no_score_and_no_answer(dims, data, eta):
    N, K, extra = dims
    P, Q = (np.stack([data.draw(belief_array(N, K)) for _ in range(2)]) for _ in range(2))
    valid = np.asarray(data.draw(st.lists(st.booleans(), min_size=N, max_size=N)))
    keys = np.asarray(data.draw(st.lists(st.floats(0, 0.999), min_size=K + extra, max_size=K + extra)))
    Pp, Qp = (np.concatenate([x, np.zeros((2, N, extra))], axis=-1) for x in (P, Q))
    for rule in SCORING_RULES:
        np.testing.assert_allclose(B.peer_scores(Qp, Pp, rule, valid), B.peer_scores(Q, P, rule, valid), atol=1e-12)
    np.testing.assert_allclose(B.round_scores(Pp, weighting="self_belief"), B.round_scores(P, weighting="self_belief"))
    W, Wp = B.mwu_weights(B.peer_scores(Q, P), eta)[-1], B.mwu_weights(B.peer_scores(Qp, Pp), eta)[-1]
    np.testing.assert_allclose(Wp, W, rtol=1e-12)
    for e in (1.0, 2.0):
        assert answer(Pp[-1], Wp, e, keys) == answer(P[-1], W, e, keys[:K]) < K
    v, vp = B.votes(P[-1], valid), B.votes(Pp[-1], valid)
    assert vp.tolist() == v.tolist() and int(B.plurality(vp, K + extra, keys)) == int(B.plurality(v, K, keys[:K]))
    np.testing.assert_allclose(B.bts_scores(vp, Qp[-1]), B.bts_scores(v, Q[-1]), atol=1e-12)
    assert int(B.bts_answer(vp, Qp[-1], keys=keys)) == int(B.bts_answer(v, Q[-1], keys=keys[:K]))


@pytest.mark.parametrize("rule", SCORING_RULES)
def test_a_batch_of_questions_and_rounds_equals_a_loop_over_them(rule):
    rng = np.random.default_rng(20240601)
    P, Q = (rng.dirichlet(np.ones(4), size=(7, 3, 5)) for _ in range(2))
    valid = rng.random((7, 3, 5)) > 0.2
    P[0, -1], valid[0, -1] = np.vstack([np.eye(4), np.full(4, 0.25)]), [True] * 4 + [False]  # an exact 4-way tie
    keys = B.tiebreak_keys(3, [f"q{b}" for b in range(7)], 4)
    S, Sv, W = B.peer_scores(Q, P, rule), B.peer_scores(Q, P, rule, valid), B.mwu_weights(B.peer_scores(Q, P, rule))
    for b, t in np.ndindex(7, 3):
        np.testing.assert_allclose(S[b, t], B.peer_scores(Q[b, t], P[b, t], rule), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(Sv[b, t], B.peer_scores(Q[b, t], P[b, t], rule, valid[b, t]), rtol=1e-13, atol=1e-15)
        for weighting in WEIGHTINGS:
            got = B.round_scores(P, Q, weighting, rule, valid=valid)[b, t]
            np.testing.assert_allclose(got, B.round_scores(P[b, t], Q[b, t], weighting, rule, valid=valid[b, t]))
    v, last = B.votes(P[:, -1], valid[:, -1]), B.weighted_decision(P[:, -1], W[:, -1], valid[:, -1], keys=keys)[0]
    sp, ba = B.surprisingly_popular(v, Q[:, -1], keys), B.bts_answer(v, Q[:, -1], keys=keys)
    for b in range(7):
        np.testing.assert_allclose(W[b], B.mwu_weights(S[b]), rtol=1e-13)
        assert int(last[b]) == int(B.weighted_decision(P[b, -1], W[b, -1], valid[b, -1], keys=keys[b])[0])
        assert int(B.plurality(v, 4, keys)[b]) == int(B.plurality(v[b], 4, keys[b]))
        assert int(sp[b]) == int(B.surprisingly_popular(v[b], Q[b, -1], keys[b]))
        assert int(ba[b]) == int(B.bts_answer(v[b], Q[b, -1], keys=keys[b]))
