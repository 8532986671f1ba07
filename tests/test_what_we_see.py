"""The "What we see" sentences are f-strings in the notebooks; each is run here on a table it did not write, and its
numbers must be that table's."""

import ast
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.data.sim_params import ORIGINAL
from acemad_utils.experiments import assumption_map as AM
from acemad_utils.experiments import registry as R
from acemad_utils.experiments import theory
from acemad_utils.protocol import config
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.report import readable as RD
from acemad_utils.report import rescoring, stats, words
from acemad_utils.report import tables as TB
from tests.conftest import acemad_record

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SYN = "SYNTHETIC population (no LLM)"
POP = {"synthetic": True, "params": {"knowledge_link": 1.0, "calibration_by": "knowledge"}}


def say(notebook: str, cell_id: str, **names) -> str:
    """Run one sentence cell of a notebook with `names` as its inputs (SEED the default profile's); the Markdown it
    shows, as text."""
    nb = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    [source] = ["".join(c["source"]) for c in nb["cells"] if c["id"] == cell_id]
    shown: list = []
    ns = {"words": words, "tables": TB, "config": config, "theory": theory, "rescoring": rescoring, "SEED": 0, **names}
    ns["display"] = lambda *xs: shown.extend(xs)
    tree = ast.parse(source)
    if isinstance(tree.body[-1], ast.Expr):  # the cell's value, as Jupyter shows it
        tree.body[-1] = ast.Assign([ast.Name("_", ast.Store())], tree.body[-1].value, lineno=0)
    exec(compile(ast.fix_missing_locations(tree), cell_id, "exec"), ns)
    return " ".join(x.data for x in [*shown, ns.get("_")] if x is not None and hasattr(x, "data"))


def _tests(rows):
    cols = ["method", "benchmark", "best_baseline", "gain", "p_value"]
    t = pd.DataFrame(rows, columns=cols)
    return t.assign(gain_lo=t.gain - 3, gain_hi=t.gain + 3)


def test_pvalues_read_plainly_and_the_permutation_floor_is_the_tests_own():
    assert RD.pvalue(0.0312) == "p = 0.031" and RD.pvalue(2.098677e-07) == "p = 2.1e-07"
    assert RD.pvalue(0.0012) == "p = 0.0012" and RD.pvalue(RD.PERMUTATION_FLOOR) == "p < 1e-4"
    for f in (TB.paired_test, stats.sign_flip_p):
        assert inspect.signature(f).parameters["n_perm"].default == RD.PERMUTATIONS, f.__name__
    assert TB.paired_test([1.0] * 40, [0.5] * 40) == RD.PERMUTATION_FLOOR  # no sign flip reaches it
    shown = RD.tests_table(_tests([("T", "Average", "M", 12.0, RD.PERMUTATION_FLOOR)]).assign(n_paired=[12.0]))
    assert list(shown["gain (points)"]) == ["+12.0"] and list(shown["p_value"]) == ["< 1e-4"]


def test_a_list_reads_as_a_sentence():
    assert [words.listed(x) for x in ([], ["A"], ["A", "B"], ["A", "B", "C"])] == ["", "A", "A and B", "A, B and C"]


def test_holms_p_from_a_floored_p_reads_as_the_bound_it_is():
    """m times the permutation floor is not a measured p: table cells and sentences say '<='."""
    floor = RD.PERMUTATION_FLOOR
    t = _tests([("A", "Average", "V", 9.0, floor), ("B", "Average", "V", 4.0, 0.004)])
    t = t.assign(p_holm=[10 * floor, 0.008])
    text = words.gains(t, "claim")
    assert "p < 1e-4, Holm p <= 1.0e-03" in text and "p = 0.004, Holm p = 0.008" in text
    long = pd.DataFrame([(m, "Average", 50.0, 45.0, 55.0, 100) for m in ("V", "A", "B")],
                        columns=["method", "benchmark", "accuracy", "ci_lo", "ci_hi", "n"])  # fmt: skip
    cells = list(TB.wide(long, t)["Average"])
    assert "Holm p <= 1.0e-03)" in cells[1] and "Holm p = 0.008)" in cells[2]


def test_the_caveat_names_the_populations_assumption_and_a_real_model_gets_none():
    assert "knowledge_link = 1" in words.caveat(SYN, POP) and "only agents that see through" in words.assumption(POP)
    off = {"synthetic": True, "params": {"knowledge_link": 0.0, "calibration_by": "knowledge"}}
    assert "unrelated to knowing the truth" in words.assumption(off)
    persona = {"synthetic": True, "params": {"knowledge_link": 1.0, "calibration_by": "persona"}}
    assert 'calibration_by = "persona"' in words.assumption(persona)
    assert "names no knowledge_link" in words.assumption({"synthetic": True, "params": {"skeptic_calibration": 0.9}})
    assert words.assumption({"synthetic": False}) == "" and "rests on" in words.assumption(None)
    full = {"synthetic": True, "params": {**POP["params"], "insight": 0.5, "insight_susceptibility": 0.1}}
    assert words.assumption(full, short=True) == (
        "[rests on knowledge_link=1.0, calibration_by=knowledge, insight=0.5, insight_susceptibility=0.1, "
        "independent Generalists]"
    )
    base = {"synthetic": True, "params": {**POP["params"], "trap_mean": 0.7, "crowd_insight": 0.0}}
    said = words.caveat(SYN, base, uses=words.BASELINE_USES)
    assert "trap_mean = 0.7 (how strongly an item's shared trap pulls" in said and "crowd_insight = 0 (P that" in said
    assert "knowledge_link plays no part" in said and "what its agents do" in said
    assert "knowledge_link" not in words.caveat("model: m", POP)


def test_gains_counts_significant_targets_and_sets_the_claim_beside_them():
    t = _tests([("A", "Average", "V", 5.0, 0.01), ("B", "Average", "V", 1.0, 0.3), ("C", "Average", "V", -4, 0.02)])
    text = words.gains(pd.concat([t, _tests([("A", "x", "V", 9.0, 0.001)])]), "the paper reports all three ahead")
    assert "A over V +5.0 points [+2.0, +8.0], p = 0.01" in text
    assert "1 of 3 is significantly better (Holm p < 0.05) and 1 significantly worse; the paper reports all" in text
    assert "No paired comparison" in words.gains(t.iloc[0:0], "x")


def test_a_gain_is_significant_as_its_table_judges_it_by_holms_p():
    """A raw p below 0.05 whose Holm-adjusted p (the table's family) is not: the sentence neither counts it nor
    hides the adjusted p."""
    t = _tests([("A", "Average", "V", 5.0, 0.032), ("B", "Average", "V", 9.0, 0.001)]).assign(p_holm=[0.095, 0.004])
    text = words.gains(t, "claim")
    assert "A over V +5.0 points [+2.0, +8.0], p = 0.032, Holm p = 0.095" in text
    assert "1 of 2 is significantly better (Holm p < 0.05)" in text
    assert [words.significant(r) for r in t.itertuples()] == [False, True]


def test_theory_weights_groups_by_agent_count_and_sets_the_recovery_rate_against_l109():
    groups = ["Skeptic (holds truth)", "crowd (holds truth)", "Skeptic (wrong)", "crowd (wrong)"]
    phase = pd.DataFrame(
        [(c, e, t) for c in (0.0, 1.0) for e in (0.0, 2.0) for t in (1, 2, 3)],
        columns=["crowd_calibration", "eta", "T"],
    ).assign(N=5, p_flip=0.0, lo=0.0, hi=0.0)
    fc = (phase.crowd_calibration == 0) & (phase.eta == 2)  # a false-consensus crowd at eta = 2: T = 1, 2, 3
    phase.loc[fc, ["p_flip", "lo", "hi"]] = [[0.03, 0.01, 0.05], [0.06, 0.04, 0.08], [0.09, 0.06, 0.12]]
    phase.loc[(phase.crowd_calibration == 0) & (phase.eta == 0) & (phase["T"] == 3), "p_flip"] = 0.04
    split = pd.DataFrame(
        {"subset": [theory.SUBSETS[0], theory.SUBSETS[0], theory.SUBSETS[1]], "part": ["uniform", "weights", "weights"]}
    ).assign(mean=[0.08, 0.03, 0.01], lo=[0.07, 0.02, 0.0], hi=[0.09, 0.04, 0.02])
    text = say(
        "00_theory",
        "b0e1c496",
        tab_a=pd.DataFrame(
            {"x": 6, "series": ["symmetric updating", "stubborn (default)"], "mean": [-0.0003, 0.08]}
        ).assign(lo=[-0.01, 0.07], hi=[0.01, 0.09]),
        # round 1 weighted: right (27 + 5) / 40 = 0.80, wrong (4 + 54) / 100 = 0.58; unweighted 0.70 and 0.50
        tab_b=pd.DataFrame(
            {
                "group": groups * 2,
                "round": [1] * 4 + [2] * 4,
                "n_agents": [30, 10, 10, 90] * 2,
                "mean": [0.9, 0.5, 0.4, 0.6, 0.95, 0.95, 0.9, 0.9],
            }
        ),
        tab_c=pd.DataFrame({"eta": [0.0, 2.0, 16.0], "subset": theory.SUBSETS[1], "mean": [0.04, 0.05, 0.1]}),
        tab_c_split=split,
        tab_d=phase,
        ETA_PHASE=2.0,
        T_PHASE=3,
    )
    assert "changes by +0.000 [-0.010, +0.010]" in text and "-0.000" not in text
    assert "larger than what the weights add" in text and "already flip 4% of wrong majorities" in text
    assert "right score 0.80" in text and "against 0.58 for wrong ones (higher as point estimates" in text
    assert "Skeptics hold the truth 75% of the time, crowd agents 10%" in text
    assert "neither persona scores higher at both answers; a wrong crowd agent scores at least as well" in text
    assert "the lowest Skeptic (wrong)'s, 0.40" in text and "+0.22 in round 1 and +0.05 in round 2, smaller" in text
    assert "+0.050 at eta = 2" in text and "the weights add +0.010" in text and "9% of wrong majorities" in text
    assert "3%, 6%, 9% for T = 1 to 3, rising with every round" in text and "more rounds keep flipping" in text


def test_subsets_says_systematic_only_when_the_share_beats_chance():
    t = pd.DataFrame(
        {"items_in": [100, 100], "kept": [40, 60], "mean_acc_kept": [0.1, 0.2], "misconception_share": [0.9, 0.8]}
    ).assign(uniform_reference=0.5)
    setup = SimpleNamespace(population=SimPopulation(seed=0), synthetic=True)
    subsets = lambda table, src: say("01_subset_construction", "68c4881a", table=table, setup=setup, SRC=src)
    text = subsets(t, SYN)
    assert "100 items (50%)" in text and "40% to 60%" in text and "16% of its runs" in text
    assert "84% of the time, against 50%" in text and "systematic misconceptions, as" in text
    assert "by construction here: every synthetic item is generated with one shared trap" in text  # not a finding
    setup.synthetic = False  # a real model's concentration is what the paper's manual check reports
    assert "by construction" not in subsets(t, "model: m")
    setup.synthetic = True
    assert "does not show" in subsets(t.assign(misconception_share=0.52), "model: m")
    assert "no challenging subset" in subsets(t.assign(kept=0), "model: m")


@pytest.fixture(scope="module")
def debates():
    """AceMAD and its controls on 40 items of the original population (a Skeptic that can tell)."""
    pop = SimPopulation(SimParams(**ORIGINAL), seed=1)
    target, cfgs = DebateConfig(method="acemad"), R.controls()
    return target.label, cfgs, [run_question(q, pop, c) for q in make_items(40, k=4, seed=2) for c in [target, *cfgs]]


def test_the_controls_sentence_gives_each_controls_paired_gain(debates):
    ace, cfgs, recs = debates
    long = TB.accuracy_long(recs)
    text = say("03_main_results", "d5fad2bf", long=long, records=recs, ace3=ace, experiment={"control": cfgs})
    starts = sorted(text.index(f"{c.label}, ") for c in cfgs) + [len(text)]
    for c in cfgs:
        r = TB.versus_best(recs, [ace], [c.label]).query("benchmark == 'Average'").iloc[0]
        at = text.index(f"{c.label}, ")
        said = text[at : starts[starts.index(at) + 1]]  # this control's sentence
        assert words.gain(r) in said
        if r.gain_lo <= 0 <= r.gain_hi:
            assert "not distinguishable from it at this n" in said and "this control cannot tell" in said
        else:
            assert ("ahead of it" if r.gain > 0 else "behind it") in said


def test_notebook_04_says_from_the_rules_why_each_variant_gains_or_not():
    X = R.heterogeneity("synthetic-model-b", "", 0)
    pop = SimPopulation(SimParams(**ORIGINAL), seed=1)  # crowd_insight 0: the Different LLMs' Generalist never sees
    recs = [run_question(q, pop, c) for q in make_items(30, k=4, seed=2) for c in X.configs]
    labels = [c.label for c in X.configs]
    inputs = dict(tests=TB.versus_best(recs, labels[1:], labels[:1]), long=TB.accuracy_long(recs), labels=labels)
    inputs.update(experiment=X, meta={"population": pop.describe()}, SRC=SYN)
    Setup = SimpleNamespace(population=pop, synthetic=True)
    text = say("04_heterogeneity", "272748b1", setup=Setup, **inputs)
    assert all(label in text for label in labels[1:]) and "P_insight = 0.15" in text and "P_insight = 0.00" in text
    assert "never gets peer-prediction skill" in text  # the other model's Generalist: crowd_insight = 0
    Setup.synthetic = False
    assert "no population rule" in say("04_heterogeneity", "272748b1", setup=Setup, **inputs)


def test_the_shuffled_sentence_splits_the_gain_over_uniform_weights():
    pop = SimPopulation(seed=1)
    ace = [run_question(q, pop, DebateConfig(method="acemad")) for q in make_items(60, k=4, seed=2)]
    bars = list(rescoring.ABLATIONS)
    recs = rescoring.reweighted_records(ace, rescoring.ABLATIONS) + rescoring.shuffled_records(ace)
    names = [*bars, rescoring.SHUFFLED]
    text = say("05_ablation", "ba9cb7e1", long=TB.accuracy_long(recs), recs=recs, ctrl=[], names=names,
               bars=[*bars, rescoring.STANDARD_MAD], experiment={"controls": []})  # fmt: skip
    whom = TB.versus_best(recs, [bars[0]], [rescoring.SHUFFLED]).query("benchmark == 'Average'").iloc[0]
    assert text.strip().startswith(rescoring.SHUFFLED) and words.gain(whom) in text and "WHO scores well" in text


def test_a_real_model_gets_no_map_and_the_measured_gap_in_words():
    right = [True, True, False, False, False]
    two = [
        acemad_record([0.1, 0.2, 0.9, 0.8, 0.7], right, "AB"),
        acemad_record([0.3, 0.2, 0.6, 0.9, 0.8], right, "AB", question_id="r"),
    ]
    table = AM.run_map(None, [], R.MAP_AXES)  # type: ignore[arg-type]  # no run: the Setup is never used
    shown = lambda gaps: say(
        "09_assumption_map", "25ce5b8f", table=table, gaps=gaps, setup=None, SRC="model: m", assumption_map=AM
    )
    gaps = AM.knowledge_gap(two, label="m")
    text, row = shown(gaps), gaps.iloc[-1]
    assert "No map here" in text and "real model" in text and "predict their peers worse" in text
    assert f"score gap {row.gap:+.3f} [{row.gap_lo:+.3f}, {row.gap_hi:+.3f}]" in text and row.gap_lo < row.gap_hi < 0
    text = shown(AM.knowledge_gap(two[:1], label="m"))  # one question: no interval, so no side is taken
    assert "too few to say whether agents who answer right predict their peers better" in text and "worse" not in text
