"""The "What we see" sentences follow the numbers they are given (they are never written by hand)."""

import pandas as pd

from acemad_utils.report import narrative as N
from acemad_utils.report import readable as RD
from acemad_utils.report import stats
from acemad_utils.report import tables as TB


def _long(rows):
    return pd.DataFrame(
        [{"method": m, "benchmark": b, "n": 10, "accuracy": a, "ci_lo": a - w, "ci_hi": a + w} for m, b, a, w in rows]
    )


def test_versus_counts_significant_wins_and_losses():
    long = _long([("T", "Average", 40, 5), ("T", "x", 40, 5), ("T", "y", 40, 5)])
    tests = pd.DataFrame(
        [
            {
                "method": "T",
                "benchmark": "x",
                "best_baseline": "M",
                "gain": 10,
                "gain_lo": 2,
                "gain_hi": 18,
                "p_value": 0.01,
            },
            {
                "method": "T",
                "benchmark": "y",
                "best_baseline": "M",
                "gain": -5,
                "gain_lo": -9,
                "gain_hi": -1,
                "p_value": 0.04,
            },
            {
                "method": "T",
                "benchmark": "Average",
                "best_baseline": "M",
                "gain": 2.5,
                "gain_lo": -1,
                "gain_hi": 6,
                "p_value": 0.3,
            },
        ]
    )
    text = N.versus(long, tests, "T", "SYNTHETIC")
    assert "significantly better in 1 of 2 columns and significantly worse in 1" in text
    assert (
        "Against the best MAD baseline on the average (M) the paired gain is +2.5 points [-1.0, +6.0], p = 0.3 (not"
        in text
    )
    floor = N.versus(long, tests.assign(p_value=RD.PERMUTATION_FLOOR), "T", "SYNTHETIC")
    assert "p < 1e-4 (significant)" in floor and "0.0001" not in floor
    assert "U has no result here" in N.versus(long, tests, "U", "SYNTHETIC")


def test_shares_points_at_the_largest_truth_holder_share():
    assert "largest at N = 3" in N.shares([2, 3, 5], [0, 1, 1])
    assert "largest at N = 10" in N.shares([3, 10], [1, 4])


def _tests(rows):
    return pd.DataFrame(
        [
            {
                "method": m,
                "benchmark": b,
                "best_baseline": base,
                "gain": g,
                "gain_lo": g - 3,
                "gain_hi": g + 3,
                "p_value": p,
            }
            for m, b, base, g, p in rows
        ]
    )


def test_subsets_says_systematic_only_when_the_share_beats_chance():
    t = pd.DataFrame(
        {
            "benchmark": ["a", "b"],
            "items_in": [100, 100],
            "kept": [40, 60],
            "mean_acc_kept": [0.1, 0.2],
            "misconception_share": [0.9, 0.8],
            "uniform_reference": [0.5, 0.5],
        }
    ).set_index("benchmark")
    text = N.subsets(t, "SYNTHETIC population")
    assert "100 items (50%)" in text and "40% to 60%" in text and "16% of its runs" in text
    assert "84% of the time, against 50%" in text and "systematic misconceptions, as" in text and "synthetic" in text
    flat = t.assign(misconception_share=[0.52, 0.5])
    assert "does not show systematic" in N.subsets(flat, "model: m")
    assert "no challenging subset" in N.subsets(t.assign(kept=[0, 0]), "model: m")
    assert "subsets. On the kept" in N.subsets(t.iloc[:1], "model: m")  # one benchmark: no range


def test_gains_counts_significant_targets_and_sets_the_claim_beside_them():
    tests = _tests(
        [
            ("A", "Average", "V", 5.0, 0.01),
            ("B", "Average", "V", 1.0, 0.3),
            ("C", "Average", "V", -4, 0.02),
            ("A", "x", "V", 9.0, 0.001),
        ]
    )
    text = N.gains(tests, "SYNTHETIC", claim="the paper reports all three ahead")
    assert "A +5.0 points [+2.0, +8.0] over V (p = 0.01)" in text
    assert (
        "1 of 3 is significantly better (p < 0.05) and 1 significantly worse; the paper reports all three ahead."
        in text
    )
    assert "No paired comparison" in N.gains(tests.iloc[0:0], "x")


def _curve(fam, pts, bench="Average"):
    return [
        {"family": fam, "benchmark": bench, "n_agents": n, "accuracy": a, "ci_lo": a - 1, "ci_hi": a + 1}
        for n, a in pts
    ]


def test_curve_finds_the_peak_and_whether_the_share_explains_it():
    long = pd.DataFrame(_curve("AceMAD", [(2, 10), (3, 30), (5, 20)]) + _curve("Voting", [(2, 15), (3, 12), (5, 9)]))
    th = {"AceMAD": {2: 0, 3: 1, 5: 1}, "Voting": {2: 0, 3: 0, 5: 0}}
    text = N.curve(long, "n_agents", "family", "SYNTHETIC", truth_holders=th)
    assert "AceMAD peaks at N = 3 (30.0%; 10.0% at N = 2 to 20.0% at N = 5)" in text
    assert "Voting falls with every step, from 15.0% at N = 2 to 9.0% at N = 5" in text
    assert "Voting has no truth-holder at any N" in text
    assert "1 of 3 (33%)" in text and "peaks at N = 3, where the share peaks." in text
    assert "At the same share" not in text  # no two N share a share here
    flat = pd.DataFrame(_curve("V", [(1, 0), (3, 0)]) + _curve("C", [(3, 0)]))
    text = N.curve(flat, "n_agents", "family", "x")
    assert "V is flat at 0.0% from N = 1 to N = 3" in text and "C has a single point, 0.0% at N = 3" in text
    flat_th = N.curve(flat, "n_agents", "family", "x", truth_holders={"V": {1: 0, 3: 1}})
    assert "Its accuracy is flat, so it cannot show a share effect here." in flat_th and "peaks at N" not in flat_th
    ten = pd.DataFrame(_curve("AceMAD", [(3, 30), (5, 25), (10, 15), (15, 12)]))
    th10 = {"AceMAD": {3: 1, 5: 1, 10: 2, 15: 3}}
    assert "At the same share (20%: N = 5, 10, 15) its accuracy falls with N (25.0%, 15.0%, 12.0%)" in N.curve(
        ten, "n_agents", "family", "x", truth_holders=th10
    )
    moved = pd.DataFrame(_curve("AceMAD", [(2, 10), (3, 20), (5, 30)]))
    assert "not where the share peaks (N = 3)" in N.curve(moved, "n_agents", "family", "x", truth_holders=th)


def test_same_curve_reports_a_gap_as_a_bug():
    long = pd.DataFrame(_curve("S", [(2, 10), (3, 12), (5, 9)]) + _curve("D", [(2, 10), (3, 12), (5, 14)]))
    assert "identical, as they must be" in N.same_curve(long, "S", "D", "n_agents", upto=3)
    long.loc[1, "accuracy"] = 13
    assert "differ by at most 1.0 points there (NOT identical" in N.same_curve(long, "S", "D", "n_agents", upto=3)


def test_aggregators_call_a_synthetic_win_a_property_of_the_population():
    long = _long(
        [("ref", "Average", 26, 2), ("SP", "Average", 49, 2), ("BTS", "Average", 53, 2), ("k1", "Average", 19, 2)]
    )
    tests = _tests(
        [("SP", "Average", "ref", 23, 0.001), ("BTS", "Average", "ref", 27, 0.001), ("k1", "Average", "ref", -7, 0.01)]
    )
    text = N.aggregators(long, tests, "ref", "SYNTHETIC population")
    assert text.index("BTS 53.0%") < text.index("SP 49.0%") < text.index("k1 19.0%")
    assert "BTS and SP beat the paper's rule here, but this is a property of the synthetic population" in text
    real = N.aggregators(long, tests, "ref", "model: m")
    assert "property of the synthetic" not in real and "with model: m" in real
    assert "No aggregator beats ref" in N.aggregators(long, tests.assign(p_value=0.5), "ref", "model: m")


def test_rounds_and_control():
    long = _long(
        [
            ("T2", "Average", 20, 2),
            ("T3", "Average", 30, 2),
            ("T5", "Average", 29, 2),
            ("D", "Average", 10, 1),
            ("Dc", "Average", 15, 1),
        ]
    )
    text = N.rounds(long, ["T2", "T3", "T5"], paper_best="T3")
    assert "the highest is T3 (no paired test between the T's was run" in text and "overlap" not in text
    assert "Of T3's +20.0 points over D, +5.0 come with the agents alone" in N.control(long, "T3", "Dc", "D")
    zero = _long([("T2", "Average", 0, 0), ("T3", "Average", 0, 0)])
    assert "T2 and T3 tie for the highest." in N.rounds(zero, ["T2", "T3"])


def test_join_says_the_caveat_once():
    part = "A leads. " + N.caveat("SYNTHETIC")
    text = N.join("SYNTHETIC", part, part)
    assert text.count(N.caveat("SYNTHETIC")) == 1 and text.endswith(N.caveat("SYNTHETIC"))


def test_leaders_names_the_top_method_per_column():
    long = _long(
        [
            ("A", "medqa", 30, 2),
            ("B", "medqa", 40, 2),
            ("A", "bbh", 50, 2),
            ("B", "bbh", 20, 2),
            ("A", "Average", 40, 1),
            ("B", "Average", 30, 1),
        ]
    )
    text = N.leaders(long, ["A", "B"])
    assert "MedQA: B 40.0%" in text and "BBH: A 50.0%" in text and "Average" not in text
    assert N.leaders(long[long.method == "A"], ["A", "B"]) == "A is the highest of them in every benchmark column."


def test_models_one_clause_per_model_and_a_stand_in_warning():
    t = _tests([("T", "Average", "M", 4.0, 0.01), ("T", "x", "M", 9.0, 0.01)])
    text = N.models([("table4", t, "SYNTHETIC stand-in for D (no LLM)"), ("table5", t.iloc[0:0], "model: L")], "T")
    assert "table4 [SYNTHETIC stand-in for D (no LLM)]: +4.0 points [+1.0, +7.0] over M (p = 0.01, significant)" in text
    assert "table5 [model: L]: no paired comparison" in text and "test the code path" in text
    assert "stand-in" not in N.models([("t", t, "model: L")], "T")


def test_gains_agrees_in_number():
    one = _tests([("A", "Average", "V", 1.0, 0.5)])
    assert "0 of 1 is significantly better" in N.gains(one, "x")
    three = _tests([(m, "Average", "V", 1.0, 0.5) for m in "ABC"])
    assert "0 of 3 are significantly better" in N.gains(three, "x")


def _records(correct_by_method: dict, n: int = 200) -> list:
    """Records of one benchmark: method m is right on the question ids in correct_by_method[m]."""
    return [
        {"question_id": f"q{i:03d}", "benchmark": "b", "method": m, "final": {"correct": i in right}}
        for m, right in correct_by_method.items()
        for i in range(n)
    ]


def test_best_t_is_decided_by_the_paired_test_not_by_interval_overlap():
    # T3 60% and T5 55% (n = 200): the intervals overlap widely, but T5 is right only where T3 is (10 discordant
    # pairs, all one way), so the paired test separates them; T2 (20%) is far below
    recs = _records({"T2": range(40), "T3": range(120), "T5": range(110)})
    long = TB.accuracy_long(recs)
    avg = long[long.benchmark == TB.AVERAGE].set_index("method")
    assert avg.loc["T5", "ci_hi"] > avg.loc["T3", "ci_lo"]  # the intervals overlap: the old rule said "no best T"
    text = N.rounds(long, ["T2", "T3", "T5"], records=recs)
    assert "the highest is T3; paired on the same questions against it:" in text
    assert "so T3 is the best T here" in text, text
    # T5 right on 116 of T3's 120 and on 2 others: 6 discordant pairs, split 4/2: not separated
    recs2 = _records({"T2": range(40), "T3": range(120), "T5": [*range(116), 150, 151]})
    text2 = N.rounds(TB.accuracy_long(recs2), ["T2", "T3", "T5"], records=recs2)
    assert "do not separate T3 from T5: no single best T is established" in text2, text2


def test_pvalues_read_plainly_and_the_permutation_floor_is_a_bound():
    assert RD.pvalue(0.0312) == "p = 0.031" and RD.pvalue(0.5) == "p = 0.5"
    assert RD.pvalue(2.098677e-07) == "p = 2.1e-07" and RD.pvalue(0.0004) == "p = 4.0e-04"
    assert RD.pvalue(0.0012) == "p = 0.0012"  # scientific only below 1e-3
    assert RD.pvalue(RD.PERMUTATION_FLOOR) == "p < 1e-4"


def test_the_floor_is_the_permutation_tests_own():
    import inspect

    for f in (TB.paired_test, stats.sign_flip_p):
        assert inspect.signature(f).parameters["n_perm"].default == RD.PERMUTATIONS, f.__name__
    # the smallest p the sign-flip test can return is the floor RD names
    d = [1.0] * 40  # every difference the same sign: no flip reaches it
    assert TB.paired_test(d, [0.5] * 40) == RD.PERMUTATION_FLOOR


def test_tests_table_is_readable():
    t = _tests([("T", "Average", "M", 12.0, RD.PERMUTATION_FLOOR), ("T", "x", "M", -1.25, 2.098677e-07)])
    shown = RD.tests_table(t.assign(n_paired=[12.0, 3.0]))
    assert list(shown["gain (points)"]) == ["+12.0", "-1.2"] and list(shown["p_value"]) == ["< 1e-4", "2.1e-07"]
    assert str(shown["n_paired"].dtype).startswith("int")


POP = {"synthetic": True, "params": {"knowledge_link": 1.0, "calibration_by": "knowledge"}}


def test_assumption_names_the_link_and_never_crashes():
    assert "knowledge_link = 1" in N.assumption(POP) and "only agents that see through" in N.assumption(POP)
    off = {"synthetic": True, "params": {"knowledge_link": 0.0, "calibration_by": "knowledge"}}
    assert "unrelated to knowing the truth" in N.assumption(off)
    half = {"synthetic": True, "params": {"knowledge_link": 0.5, "calibration_by": "knowledge"}}
    assert "with strength 0.5" in N.assumption(half)
    persona = {"synthetic": True, "params": {"knowledge_link": 1.0, "calibration_by": "persona"}}
    assert 'calibration_by = "persona"' in N.assumption(persona)
    old = {"synthetic": True, "params": {"skeptic_calibration": 0.9}}  # before the population helper's branch
    assert "names no knowledge_link" in N.assumption(old)
    assert N.assumption({"synthetic": False, "model": "m"}) == ""
    full = {"synthetic": True, "params": {**POP["params"], "insight": 0.5, "insight_susceptibility": 0.1}}
    assert N.assumption(full, short=True) == (
        "[rests on knowledge_link=1.0, calibration_by=knowledge, insight=0.5, insight_susceptibility=0.1, "
        "independent Generalists]"
    )
    baselines = {"synthetic": True, "params": {**POP["params"], "trap_mean": 0.7, "crowd_insight": 0.0}}
    said = N.join("SYNTHETIC", "x", population=baselines, uses=N.BASELINE_USES)
    assert "trap_mean = 0.7, crowd_insight = 0" in said and "knowledge_link plays no part" in said
    assert "rests on" in N.assumption(None)


def test_every_synthetic_paragraph_says_its_assumption_and_a_real_one_does_not():
    t = _tests([("T", "Average", "M", 4.0, 0.01)])
    long = _long([("T", "Average", 40, 5)])
    syn = [
        N.versus(long, t, "T", "SYNTHETIC", population=POP),
        N.gains(t, "SYNTHETIC", population=POP),
        N.full_sets(t, "SYNTHETIC", population=POP),
        N.join("SYNTHETIC", N.gains(t, "SYNTHETIC"), population=POP),
    ]
    for text in syn:
        assert text.count("knowledge_link = 1") == 1, text
    real = N.gains(t, "model: m", population={"synthetic": False})
    assert "knowledge_link" not in real and "rests on" not in real


def test_full_sets_wording_follows_the_population():
    t = _tests([("T", "Average", "M", 4.0, 0.01)])
    syn = N.full_sets(t, "SYNTHETIC population (no LLM)", population=POP)
    assert "every full-set item carries a trap" in syn and "no correlated misconception" not in syn
    assert "mix easy items" in N.full_sets(t, "model: m")


def test_theory_weights_groups_by_agent_count_and_sets_the_recovery_rate_against_l109():
    tab_a = pd.DataFrame(
        {"x": [6], "series": ["symmetric updating (Prop. 1)"], "mean": [0.0], "lo": [-0.01], "hi": [0.01]}
    )
    groups = ["truth-holder (holds truth)", "truth-holder (wrong)", "crowd (holds truth)", "crowd (wrong)"]
    tab_b = pd.DataFrame(
        {"group": groups, "round": 1, "mean": [0.9, 0.5, 0.4, 0.6], "n_agents": [30, 10, 10, 90]}
    )  # weighted: truth-holders (27 + 5) / 40 = 0.80, crowd (4 + 54) / 100 = 0.58; unweighted 0.70 and 0.50
    holder = "truth-holder right in round 1"
    tab_c = pd.DataFrame({"eta": [0.0, 2.0, 16.0], "subset": holder, "mean": [0.04, 0.05, 0.1]})
    tab_d = pd.DataFrame({"N": 5, "T": 3, "eta": 2.0, "crowd_calibration": [0.0, 1.0], "p_flip": [0.09, 0.0]})
    text = N.theory(tab_a, tab_b, tab_c, tab_d, eta=2.0, rounds=3)
    assert "truth-holders score 0.80" in text and "crowd's 0.58" in text and "crowd (holds truth) at 0.40" in text
    assert "by construction" in text and "+0.050 at eta = 2" in text and "l.109" in text and "9%" in text
