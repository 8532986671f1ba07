"""The "What we see" sentences follow the numbers they are given (they are never written by hand)."""
import pandas as pd

from acemad_utils import narrative as N


def _long(rows):
    return pd.DataFrame([{"method": m, "benchmark": b, "n": 10, "accuracy": a, "ci_lo": a - w, "ci_hi": a + w}
                         for m, b, a, w in rows])


def test_ranking_names_the_leader_and_flags_overlapping_intervals():
    long = _long([("A", "Average", 40, 5), ("B", "Average", 20, 5)])
    assert N.ranking(long, "SYNTHETIC population").startswith("On average over the benchmarks (n = 10 questions per method), A leads")
    assert "overlap" not in N.ranking(long, "x")
    swapped = _long([("A", "Average", 20, 5), ("B", "Average", 22, 5)])
    text = N.ranking(swapped, "model m")
    assert "B leads" in text and "overlap" in text and "synthetic" not in text


def test_versus_counts_significant_wins_and_losses():
    long = _long([("T", "Average", 40, 5), ("T", "x", 40, 5), ("T", "y", 40, 5)])
    tests = pd.DataFrame([
        {"method": "T", "benchmark": "x", "best_baseline": "M", "gain": 10, "gain_lo": 2, "gain_hi": 18, "p_value": 0.01},
        {"method": "T", "benchmark": "y", "best_baseline": "M", "gain": -5, "gain_lo": -9, "gain_hi": -1, "p_value": 0.04},
        {"method": "T", "benchmark": "Average", "best_baseline": "M", "gain": 2.5, "gain_lo": -1, "gain_hi": 6, "p_value": 0.3},
    ])
    text = N.versus(long, tests, "T", "SYNTHETIC")
    assert "significantly better in 1 of 2 columns and significantly worse in 1" in text
    assert "(M) the paired gain is +2.5 points [-1.0, +6.0], p = 0.3 (not significant)" in text
    assert "U has no result here" in N.versus(long, tests, "U", "SYNTHETIC")


def test_shares_points_at_the_largest_truth_holder_share():
    assert "largest at N = 3" in N.shares([2, 3, 5], [0, 1, 1])
    assert "largest at N = 10" in N.shares([3, 10], [1, 4])
