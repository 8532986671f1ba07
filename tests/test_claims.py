"""The claims ledger (data/claims.yaml, report/claims.py): verdict rules, paired gains on hand-made records, and a
ledger with no runs still lists every claim of the data file with the paper's line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data import paths as P
from acemad_utils.data.transcripts import load_run, run_dir
from acemad_utils.experiments import assumption_map as AM
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.runner import run_experiment
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.report import claims as C
from acemad_utils.report import figures
from acemad_utils.report import power as PW
from acemad_utils.report import readable as RD
from acemad_utils.report import tables as TB
from acemad_utils.report.stats import adjust_pvalues
from tests.test_what_we_see import say


def records(method: str, correct: np.ndarray, benchmarks=("synthetic-arc_challenge", "synthetic-bbh")) -> list:
    """One minimal record per question: len(correct) questions split evenly over the benchmarks."""
    per = len(correct) // len(benchmarks)
    return [{"question_id": f"q{i}", "benchmark": benchmarks[i // per], "method": method, "final": {"correct": bool(c)},
             "status": "ok"} for i, c in enumerate(correct)]  # fmt: skip


RNG = np.random.default_rng(0)


def printed(cell: str, runs: dict, label: str, synthetic: bool, **names) -> str:
    """What one cell of notebook 08 prints (its own f-strings, run here): "1f549bd8" the SUMMARY line, "48a8a3f1"
    the ledger's title (nothing saved)."""
    out: list = []
    say("08_claims", cell, runs=runs, SRC=label, synthetic=synthetic, claims=C, figures=figures, grid={}, SEED=0,
        PROFILE="default", save_table=lambda *a, **k: None, print=out.append, **names)  # fmt: skip
    return out[0]


def summary(ledger: pd.DataFrame, runs: dict, label: str) -> str:
    return printed("1f549bd8", runs, label, C.source(runs)[0], ledger=ledger)


def title(synthetic: bool, label: str, runs: dict) -> str:
    return printed("48a8a3f1", runs, label, synthetic)


def cfg(method: str, **more) -> dict:
    return {"method": method, "n_agents": 5, "rounds": 3, **more}


def one(verdict: str, claim: str = "c", **more) -> pd.DataFrame:
    """A ledger of one row (what deciding reads of it)."""
    ours = {"ours [95% CI]": f"what gives {verdict}"}  # a verdict of its own from numbers of its own
    return pd.DataFrame([{**dict.fromkeys(C.COLUMNS, ""), "claim": claim, "verdict": verdict, **ours, **more}])


def test_verdict_rules():
    assert C.gain_verdict(0.5, 9) == C.HOLDS
    assert C.gain_verdict(0.5, 9, p_adjusted=0.2) == C.INCONCLUSIVE  # significant only before the correction
    assert C.gain_verdict(-9, 0) == C.FAILS
    assert C.gain_verdict(-1, 1) == C.INCONCLUSIVE
    assert C.value_verdict(49.92, 40, 55) == C.HOLDS
    assert C.value_verdict(49.92, 20, 40) == C.FAILS
    assert C.value_verdict(74, -10, 200, null=0.0) == C.INCONCLUSIVE
    assert C.flat_verdict(-3, 1.5) == C.HOLDS and C.flat_verdict(0.1, 5) == C.FAILS
    assert C.flat_verdict(-9, -4) == C.HOLDS  # "negligible improvement, or even degradation" (l.223)
    assert C.no_drop_verdict(-9, -1) == C.FAILS and C.no_drop_verdict(-1, 3) == C.HOLDS


@pytest.mark.parametrize(
    "a_rate, b_rate, verdict",
    [(0.8, 0.2, C.HOLDS), (0.2, 0.8, C.FAILS), (0.5, 0.5, C.NULL)],  # equal: no gain, none of the claimed +60
)
@pytest.mark.parametrize("synthetic", [True, False])
def test_a_paired_gain_gets_the_verdict_its_ci_implies_in_the_profiles_words(a_rate, b_rate, verdict, synthetic):
    n = 200
    base = RNG.random(n)  # shared difficulty: a and b are paired on the same questions
    recs = records("A", base < a_rate) + records("B", base < b_rate)
    paper = pd.DataFrame({"method": ["A", "B"], "Average (printed)": [80.0, 20.0]})  # claims +60: 200 give it power
    rows = C.gain_rows("A beats B", "l.1", recs, "A", ["B"], paper=paper)
    [row] = C.finalize(rows, synthetic=synthetic).to_dict("records")
    words = {C.HOLDS: C.HOLDS_SIM, C.FAILS: C.FAILS_SIM, C.NULL: C.NULL_SIM}
    words = words if synthetic else {C.HOLDS: C.SUPPORTED, C.FAILS: C.NOT_SUPPORTED, C.NULL: C.NULL}
    assert row["verdict"] == words[verdict] and row["n"] == n and "vs B" in row["note"]
    assert 0 <= row["p"] <= row["p (Holm)"] <= 1


def test_a_refutation_passes_the_holm_correction_a_confirmation_passes():
    """A CI below 0 fails a claimed gain only when its test passes Holm, as a CI above 0 needs to hold it: else the
    gain row reads "no effect of the claimed size" and a figure's row (judged on its CI) "inconclusive"."""
    others = [C.row(f"other {i}", "l.2", 5.0, n=300, kind="gain", ci=(-1.0, 1.0), p=0.5) for i in range(9)]
    gain = lambda: C.row("A beats B", "l.1", 5.0, n=300, kind="gain", ci=(-6.3, -0.2), p=0.044)
    judged = lambda: C.row("still rises at N=10", "l.522", "(figure)", n=300, p=0.044,
                           verdict=C.no_drop_verdict(-6.3, -0.2))  # fmt: skip
    for make, weak in ((gain, C.NULL_SIM), (judged, C.INCONCLUSIVE)):
        alone, among = (C.finalize([make(), *rest], synthetic=True).iloc[0] for rest in ([], others))
        assert (alone["verdict"], among["verdict"]) == (C.FAILS_SIM, weak)  # Holm p 0.044, then 0.44
        assert "before the Holm correction only" in among["note"] and "Holm" not in alone["note"]


def test_a_gain_that_may_be_zero_is_inconclusive():
    a = np.r_[np.ones(12), np.zeros(10), np.ones(18)]  # A alone right on 12 questions, B alone on 10
    b = np.r_[np.zeros(12), np.ones(10), np.ones(18)]
    rows = C.gain_rows("A beats B", "l.1", records("A", a) + records("B", b), "A", ["B"])
    assert C.finalize(rows, synthetic=True).verdict.tolist() == [C.INCONCLUSIVE]


@pytest.mark.parametrize(
    "claimed, synthetic, verdict", [(8.1, True, C.NULL_SIM), (8.1, False, C.NULL), (1.0, True, C.INCONCLUSIVE)]
)
def test_a_ci_that_stops_short_of_the_claimed_gain_is_no_effect_of_that_size(claimed, synthetic, verdict):
    gain = dict(kind="gain", ci=(-0.8, 1.4), p=0.6)  # +0.3 [-0.8, +1.4]: excludes +8.1, not +1.0
    rows = [C.row("MAD beats voting", "l.226", claimed, n=100_000, psi=0.05, **gain)]
    assert C.finalize(rows, synthetic=synthetic).verdict.tolist() == [verdict]


MAIN = {"AceMAD (T=3)": "acemad", "Majority Voting": "majority", "Decentralized MAD": "decentralized"}
MAIN["Sparse MAD"] = "sparse"  # Table 2's methods (its T=3 MMLU-Pro cell equals Sparse MAD's: a +0.00 gain)


@pytest.mark.parametrize("n_questions", [2, 8])
def test_a_real_model_ledger_from_a_handful_of_questions_supports_and_refutes_nothing(n_questions):
    """The local profile's run (8 demo questions at most): every row underpowered, not comparable or not run."""
    labels = {**MAIN, "AceMAD (T=2)": "acemad"}
    rates = dict(zip(labels, (0.9, 0.0, 0.1, 0.0, 0.0)))
    configs = {k: cfg(m) for k, m in labels.items()}
    runs = {"main": _run(rates, configs, params={}, n=n_questions)}
    runs["main"][0].update(synthetic=False, model="SmolLM2-135M-Instruct", backend="local")
    runs["main"][0]["population"] = {"synthetic": False, "model": "SmolLM2-135M-Instruct"}
    ledger = C.ledger(runs)
    assert not ledger.verdict.isin([C.SUPPORTED, C.NOT_SUPPORTED]).any(), ledger[["claim", "verdict"]]
    assert ledger.verdict.str.startswith(C.UNDERPOWERED).any()
    exact = ledger[ledger.claim.str.contains("49.92")]
    assert exact.verdict.tolist() == [C.ANOTHER_MODEL]
    assert "smoke test of the pipeline, not evidence" in summary(ledger, runs, "local")
    assert "a smoke test of the pipeline on a few questions" in title(False, "local", runs)


def test_holm_across_the_ledger_turns_a_lone_significant_gain_inconclusive():
    gain = dict(kind="gain", ci=(0.5, 3.0), n=10_000, psi=0.1)  # enough questions for the power rule
    alone = C.finalize([C.row("g", "l.1", None, p=0.03, **gain)], synthetic=False)
    assert alone.verdict.tolist() == [C.SUPPORTED] and alone["p (Holm)"].tolist() == [0.03]
    family = C.finalize([C.row(f"g{i}", "l.1", None, p=0.03, **gain) for i in range(5)], synthetic=False)
    assert set(family.verdict) == {C.INCONCLUSIVE} and np.allclose(family["p (Holm)"], 0.15)
    assert np.allclose(adjust_pvalues([0.01, 0.04, 0.03, np.nan])[:3], [0.03, 0.06, 0.06])
    base = RNG.random(100)  # a table's tests carry the raw and the Holm-adjusted p side by side
    recs = records("A", base < 0.6) + records("B", base < 0.4) + records("C", base < 0.5)
    t = TB.versus_best(recs, ["A", "C"], ["B"])
    assert list(t.columns) == TB.TEST_COLUMNS
    assert np.allclose(t.p_holm, adjust_pvalues(t.p_value.to_numpy())) and (t.p_holm >= t.p_value).all()


def test_gains_per_benchmark_carry_the_papers_difference_of_printed_cells():
    paper = TB.paper_table("table2_main_results", model="GPT-4o-mini")
    recs = records("AceMAD (T=3)", np.ones(40)) + records("Decentralized MAD", np.zeros(40))
    rows = C.gain_rows("x", "l.459", recs, "AceMAD (T=3)", ["Decentralized MAD"], paper=paper, per_benchmark=True)
    cells = paper.set_index("method")
    arc = cells.loc["AceMAD (T=3)", "ARC-C"] - cells.loc["Decentralized MAD", "ARC-C"]
    assert rows[0]["claim"].endswith("ARC-C (synthetic items)") and rows[0]["paper"] == f"{arc:+.2f}"
    assert [r["_ci"][0] > 0 for r in rows] == [True] * 3  # two benchmarks and the Average


def test_the_papers_own_cells_contradict_only_a_claim_made_for_every_cell():
    """Table 1 says "consistently" (l.226): a cell at or below Majority Voting contradicts it; Table 3's "all three
    substantially outperform" (l.468) is about the table: its tied or lower cells are remarked on, no contradiction."""
    notes = {r.claim: r.note for r in C.ledger({}).itertuples()}
    t1 = notes["Table 1 (N=5): MAD beats Majority Voting: Centralized MAD"]
    assert "THE PAPER'S OWN CELLS CONTRADICT IT" in t1 and "LogiQA -1.50" in t1
    t3 = notes["Table 3: heterogeneity beats homogeneous Decentralized MAD: AceMAD (Different Persona)"]
    assert "CONTRADICT" not in t3 and "MedQA +0.00" in t3 and "a claim not per cell" in t3


def test_relative_gain_is_the_ratio_of_averages():
    a = np.r_[np.ones(30), np.zeros(70)]  # 50 questions per benchmark: A 60% and 0%, B 30% on both
    b = np.r_[np.ones(15), np.zeros(35), np.ones(15), np.zeros(35)]
    point, lo, hi, n = C.relative_gain(records("A", a) + records("B", b), "A", "B")
    expected = 100 * (np.mean([a[:50].mean(), a[50:].mean()]) / np.mean([b[:50].mean(), b[50:].mean()]) - 1)
    assert point == pytest.approx(expected) and lo <= point <= hi and n == 100


def test_every_claim_of_the_data_file_is_listed_without_runs_and_says_what_the_paper_says():
    ledger = C.ledger({})
    assert list(ledger.columns) == C.COLUMNS and set(ledger.verdict) == {C.NOT_RUN}
    assert ledger.note.str.len().all(), ledger[ledger.note == ""].claim.tolist()  # each says why it was not run
    for e in C.CLAIMS:
        at = ledger[ledger.claim.str.startswith(e["claim"].format(n=5))]
        assert len(at) and (at["paper line"] == e["line"]).all(), e["claim"]
        assert all(f"l.{n}" in e["line"] for n in e.get("says", {})), e["claim"]
    said = {n for e in C.CLAIMS for n in e.get("says", {})}  # a claim dropped from the file fails here
    assert said >= {83, 91, 109, 111, 223, 226, 229, 459, 468, 511, 522, 1022, 1023, 1069, 1114}
    tex = P.shared_paper_dir().parent / "acemad_paper.tex"
    if not tex.is_file():
        pytest.skip(f"the paper is not at {tex} (set ACEMAD_PAPER_DIR)")
    lines = tex.read_text().splitlines()
    for e in C.CLAIMS:
        for n, words in e.get("says", {}).items():
            assert words in lines[n - 1], (n, words)


BENCHES = ("synthetic-arc_challenge", "synthetic-mmlu_pro")


def _run(rates: dict, configs: dict, *, params: dict, n: int = 200, model: str = "synthetic-population") -> tuple:
    """A synthetic run: {label: accuracy} over n shared questions (paired by a common difficulty)."""
    base = np.random.default_rng(1).random(n)
    recs = [r for lab, a in rates.items() for r in records(lab, base < a, BENCHES)]
    meta = {"synthetic": True, "methods": configs, "population": {"synthetic": True, "model": model, "params": params}}
    return meta, recs


def test_a_synthetic_ledger_speaks_of_the_simulation_and_names_its_assumption():
    configs = {lab: cfg(m) for lab, m in MAIN.items()}
    params = {"knowledge_link": 1.0, "calibration_by": "knowledge", "insight_calibration": 0.9}
    rates = {"AceMAD (T=3)": 0.6, "Majority Voting": 0.2, "Decentralized MAD": 0.3, "Sparse MAD": 0.3}
    runs = {"main": _run(rates, configs, params=params)}
    ledger = C.ledger(runs)
    assert not ledger.verdict.isin([C.SUPPORTED, C.NOT_SUPPORTED]).any()
    assert (ledger.verdict == C.HOLDS_SIM).any()
    exact = ledger[ledger.claim.str.contains("49.92|74%|20.31")]
    assert len(exact) == 3 and set(exact.verdict) == {C.NOT_COMPARABLE}
    llama = ledger[ledger.claim.str.endswith("gains smaller than GPT-4o-mini's")]
    assert llama.verdict.tolist() == [C.NOT_RUN] and "the Llama run" in llama.note.iloc[0]  # not main against itself
    every = ledger[ledger.claim.str.startswith("... on every benchmark")].iloc[0]
    assert every["paper"] == "not all > 0 (MMLU-Pro +0.00)"  # the paper's own T=3 MMLU-Pro gain
    line = summary(ledger, runs, "SYNTHETIC")
    assert line.startswith(f"SUMMARY: [SYNTHETIC] {len(ledger)} claims: ") and "(Holm across " in line
    assert "knowledge_link=1" in line and "real-model profile" in line
    runs["main"][0]["population"]["params"]["knowledge_link"] = 0.0
    assert "knowledge_link=0 (peer-prediction skill unrelated" in summary(ledger, runs, "SYNTHETIC")


def test_a_run_at_another_eta_is_judged_under_the_papers_labels_and_says_its_eta():
    """--set ETA=4 labels AceMAD 'AceMAD (T=3, eta=4)': the ledger still finds Table 2's run, and each row it
    measures says the eta; the baselines' run, with no AceMAD, keeps its rows as they were."""

    def ledger(eta: float) -> pd.DataFrame:
        ace, named = "AceMAD (T=3)" if eta == 2 else f"AceMAD (T=3, eta={eta:g})", "AceMAD (Different Persona)"
        configs = {ace: cfg("acemad", eta=eta), "Decentralized MAD": cfg("decentralized", eta=2.0)}
        main = _run({ace: 0.6, "Decentralized MAD": 0.3}, configs, params={})
        voting = {"Majority Voting": cfg("majority"), "Decentralized MAD": cfg("decentralized")}
        table3 = {named: cfg("acemad", eta=eta), "Decentralized MAD": cfg("decentralized")}  # a name, no eta in it
        return C.ledger({"main": main, "baselines": _run({"Majority Voting": 0.2, "Decentralized MAD": 0.3}, voting,
                                                          params={}),
                         "heterogeneity": _run({named: 0.6, "Decentralized MAD": 0.3}, table3, params={})}
                        ).set_index("claim")  # fmt: skip

    at2, at4 = ledger(2.0), ledger(4.0)
    pd.testing.assert_series_equal(at4.verdict, at2.verdict)  # the same rows judged the same way
    assert "no AceMAD run at other T in this profile's ROUNDS" in at4.note["T=3 is the optimal number of rounds"]
    judged = at4["ours [95% CI]"].astype(bool)
    eta = at4.note.str.contains("AceMAD at eta=4, not the paper's 2")
    table2 = at4.index.str.startswith(("AceMAD (T=3)", "Table 3"))
    assert judged[table2].sum() >= 4 and (eta == judged)[table2].all() and not at2.note.str.contains("eta=").any()
    assert not eta[at4.index.str.startswith("Table 1")].any() and (eta <= judged).all()


def test_a_baseline_whose_every_call_failed_leaves_its_rows_without_a_verdict_not_the_ledger_broken():
    configs = {lab: cfg(m) for lab, m in (("AceMAD (T=3)", "acemad"), ("Decentralized MAD", "decentralized"))}
    meta, recs = _run({"AceMAD (T=3)": 0.6}, configs, params={}, model="some-model")
    recs += [{**r, "method": "Decentralized MAD", "status": "failed", "final": None} for r in recs]
    ledger = C.ledger({"main": (meta, recs)}).set_index("claim")
    for claimed in ("20.31", "74% relative"):  # a gain and a ratio: each keeps its row and says why it is empty
        row = ledger.filter(like=claimed, axis=0)
        assert len(row) == 1 and "no question that both" in row.note.iloc[0] and row.verdict.iloc[0] == C.NOT_RUN


def test_the_ledgers_seed_draws_every_bootstrap_as_the_notebooks_seed_draws_their_tables():
    """SEED reaches the tables of notebooks 02-07 (tests/test_notebooks_clean.py), so the ledger that repeats their
    comparisons resamples with the same seed: its intervals move with it, its gains (the data) do not."""
    rates = {"AceMAD (T=3)": 0.6, "Majority Voting": 0.2, "Decentralized MAD": 0.3, "Sparse MAD": 0.3}
    ns = {1: 0.1, 3: 0.6, 10: 0.3}
    scaling = {f"AceMAD (N={n})": {"method": "acemad", "n_agents": n, "rounds": 3} for n in ns}
    runs = {"main": _run(rates, {lab: cfg(m) for lab, m in MAIN.items()}, params={}),
            "scaling": _run({f"AceMAD (N={n})": a for n, a in ns.items()}, scaling, params={})}  # fmt: skip
    at = {seed: C.ledger(runs, seed=seed).set_index("claim")["ours [95% CI]"] for seed in (0, 1)}
    moved = [
        "AceMAD (T=3) beats every baseline",
        "74% relative improvement over Decentralized MAD",
        "Gains most pronounced on BBH and ARC-C",
        "AceMAD's curve still rises at N=10 (no earlier peak)",
    ]
    for claim in moved:
        zero, one = at[0][claim], at[1][claim]
        assert zero != one and zero.split(" [")[0] == one.split(" [")[0], (claim, zero, one)
    assert C.ledger(runs, seed=1).equals(C.ledger(runs, seed=1))


def test_the_n_curve_is_judged_whole_and_a_decline_keeps_voting_flat():
    ns = {1: 0.1, 3: 0.6, 10: 0.3}  # rises to N=10, but peaked at N=3
    configs = {f"AceMAD (N={n})": {"method": "acemad", "n_agents": n, "rounds": 3} for n in ns}
    scaling = _run({f"AceMAD (N={n})": a for n, a in ns.items()}, configs, params={})
    votes = {f"Majority Voting (N={n})": {"method": "majority", "n_agents": n, "rounds": 0} for n in (1, 5)}
    baselines = _run({"Majority Voting (N=1)": 0.4, "Majority Voting (N=5)": 0.2}, votes, params={})
    ledger = C.ledger({"scaling": scaling, "baselines": baselines}).set_index("claim")
    assert ledger.loc["AceMAD improves from N=1 to N=10 (N=1 to N=10)", "verdict"] == C.HOLDS_SIM
    peak = ledger.loc["AceMAD's curve still rises at N=10 (no earlier peak)"]
    assert peak["verdict"] == C.FAILS_SIM and "peaks at N=3" in peak["note"]
    assert ledger.loc["Majority Voting stays flat (or degrades) in N (N=1 to N=5)", "verdict"] == C.HOLDS_SIM


def test_a_curve_that_falls_significantly_after_its_peak_does_not_improve_monotonically():
    """Decentralized MAD's N=5 barely above N=1 but far below its N=2 peak: 'improves monotonically' fails on the
    fall, it is not left inconclusive on the ends alone; a dip within noise stays inconclusive."""
    claim = "Decentralized MAD improves monotonically in N (N=1 to N=5)"

    def verdict(rates: dict) -> pd.Series:
        labels = {f"Decentralized MAD (N={n})": a for n, a in rates.items()}
        configs = {lab: {"method": "decentralized", "n_agents": n, "rounds": 3} for lab, n in zip(labels, rates)}
        return C.ledger({"baselines": _run(labels, configs, params={})}).set_index("claim").loc[claim]

    fall = verdict({1: 0.3, 2: 0.6, 5: 0.32})
    assert fall["verdict"] == C.FAILS_SIM and "falls after it" in fall["note"] and fall["ours [95% CI]"].startswith("-")
    assert verdict({1: 0.3, 2: 0.31, 5: 0.305})["verdict"] == C.INCONCLUSIVE


def test_lean_records_drop_the_rounds_except_the_ablations_acemad_debates():
    meta = {"methods": {"AceMAD (T=3)": {"method": "acemad"}, "Decentralized MAD": {"method": "decentralized"}}}
    rec = {"method": "AceMAD (T=3)", "question_id": "q", "final": {"correct": True}, "rounds": [[{}]], "status": "ok"}
    assert C.lean("default/main", meta, rec) == {k: v for k, v in rec.items() if k != "rounds"}
    assert C.lean("default/ablation", meta, rec) is rec
    assert "rounds" not in C.lean("default/ablation", meta, {**rec, "method": "Decentralized MAD"})


@pytest.mark.parametrize("experiment", ["ablation", "main"])
def test_a_lean_read_of_a_run_keeps_what_the_lean_keep_keeps_of_each_whole_record(tmp_outputs, experiment):
    """load_run(keep=lean) decodes only the scalars and final, and parses the ablation's AceMAD records whole: the
    records, their order and their keys' order are those of lean() applied to a whole read."""
    name = f"default/{experiment}"
    cfgs = [DebateConfig(method="acemad"), DebateConfig(method="majority"), DebateConfig(method="single")]
    run_experiment(name, make_items(6, seed=2), cfgs, SimPopulation(), progress=False)
    meta, whole = load_run(name)
    got = load_run(name, keep=C.lean)
    assert repr(got) == repr((meta, [C.lean(name, meta, r) for r in whole]))
    assert any("rounds" in r for r in got[1]) == (experiment == "ablation")


def test_the_controls_beside_table_2_are_not_the_papers_baselines():
    naive, skeptic = {"persona": "Assistant", "temperature": 0.7}, {"persona": "Skeptic", "temperature": 0.6}
    methods = {
        "AceMAD (T=3)": {"method": "acemad", "baseline_agent": naive},
        "Sparse MAD": {"method": "sparse", "baseline_agent": naive},
        "Majority Voting (AceMAD roster)": {"method": "majority", "roster": "acemad", "baseline_agent": naive},
        "Single Agent (AceMAD's Skeptic alone)": {"method": "single", "baseline_agent": skeptic},
    }
    assert C.paper_baselines({"methods": methods}, "AceMAD (T=3)") == ["Sparse MAD"]


def test_each_row_names_the_assumptions_that_flip_it_and_why_a_structural_one_cannot():
    grid = {C.BASE_POINT: one(C.HOLDS_SIM), "equal stubbornness": one(C.FAILS_SIM), "insight = 0.1": one(C.HOLDS_SIM)}
    runs = {"main": _run({}, {}, params={"crowd_insight": 0.0}, model="synthetic-population-original")}
    [text] = C.deciding(one(C.HOLDS_SIM), grid, runs)[C.DECIDED_BY]
    assert text == f"{C.FAILS_SIM} where equal stubbornness; {C.HOLDS_SIM} elsewhere ({C.BASE_POINT} and 1 more)"
    table1 = "Table 1 (N=5): MAD beats Majority Voting: Sparse MAD"
    grid = {k: one(v, table1) for k, v in ((C.BASE_POINT, C.NULL_SIM), ("crowd_insight = 0.2", C.HOLDS_SIM))}
    [text] = C.deciding(one(C.NULL_SIM, table1), grid, runs)[C.DECIDED_BY]
    assert text.startswith("by construction: ") and "crowd_insight = 0" in text
    assert f"{C.HOLDS_SIM} where crowd_insight = 0.2" in text
    runs["main"][0]["population"]["params"]["crowd_insight"] = 0.2  # no longer pinned: the grid alone decides
    assert not C.deciding(one(C.NULL_SIM, table1), grid, runs)[C.DECIDED_BY][0].startswith("by construction")
    runs["main"][0]["population"]["model"] = "synthetic-population"  # the population fitted to these very gaps
    [text] = C.deciding(one(C.HOLDS_SIM, table1), grid, runs)[C.DECIDED_BY]
    assert text.startswith("by construction in part: the fitted population was fitted to these gaps"), text


def test_a_row_whose_numbers_do_not_move_is_not_said_to_be_decided_where_only_holms_family_moved_it():
    """A homogeneous baseline never reads knowledge_link: its numbers are the same at that point, and a verdict that
    changes there changed through the other rows' p-values, which the column must say, not name the assumption."""
    claim, same = "Decentralized MAD improves monotonically in N", {"ours [95% CI]": "+1.0 [-0.5, +2.5]", "p": 0.01}
    grid = {C.BASE_POINT: one(C.HOLDS_SIM, claim, **same), "knowledge_link = 0": one(C.FAILS_SIM, claim, **same),
            "K = 3": one(C.FAILS_SIM, claim)}  # fmt: skip
    runs = {"main": _run({}, {}, params={}, model="synthetic-population-original")}
    [text] = C.deciding(one(C.HOLDS_SIM, claim), grid, runs)[C.DECIDED_BY]
    assert f"over the grid: {C.FAILS_SIM} where K = 3; {C.HOLDS_SIM} elsewhere ({C.BASE_POINT}); " in text, text
    assert f"{C.FAILS_SIM} where knowledge_link = 0 only through Holm's correction" in text


def test_the_heterogeneity_rows_name_the_structural_choices_they_rest_on():
    runs = {"main": _run({}, {}, params={"slow_escape": 0.25}, model="synthetic-population-original")}
    rows = {v: f"Table 3: heterogeneity beats homogeneous Decentralized MAD: AceMAD ({v})" for v in
            ("Different LLMs", "Different Thinking System", "Different Persona")}  # fmt: skip
    grid = {C.BASE_POINT: pd.concat([one(C.HOLDS_SIM, c) for c in rows.values()])}
    ledger = pd.concat([one(C.HOLDS_SIM, c) for c in rows.values()])
    text = dict(zip(rows, C.deciding(ledger, grid, runs)[C.DECIDED_BY]))
    assert (
        "drawn independently of the first model's" in text["Different LLMs"] and "2603.06612" in text["Different LLMs"]
    )
    assert text["Different Thinking System"].startswith("rests on slow_escape = 0.25")
    assert text["Different Persona"].startswith(C.HOLDS_SIM)


def test_a_row_the_grid_cannot_repeat_says_so_and_names_what_it_rests_on():
    """The profile's n decides a row the grid's smaller n leaves inconclusive everywhere: the grid then shows no
    deciding assumption, and the row must not read as if it did."""
    grid = {C.BASE_POINT: one(C.INCONCLUSIVE, n=50), "insight = 0.1": one(C.INCONCLUSIVE, n=50)}
    runs = {"main": _run({}, {}, params={"knowledge_link": 1.0})}
    [text] = C.deciding(one(C.HOLDS_SIM, n=300), grid, runs)[C.DECIDED_BY]
    assert text == (
        f"at the grid's n (50) the profile's point reads {C.INCONCLUSIVE}, and so does every point: the grid "
        f"does not show which assumption decides this row; {C.WHOLE}"
    )
    [same] = C.deciding(one(C.INCONCLUSIVE, n=300), grid, runs)[C.DECIDED_BY]
    assert same.startswith(C.INCONCLUSIVE), same
    grid["knowledge_link = 0"] = one(C.FAILS_SIM, n=50)  # a flip the grid does show is kept
    [flips] = C.deciding(one(C.HOLDS_SIM, n=300), grid, runs)[C.DECIDED_BY]
    assert flips.startswith("at the grid's n (50)") and f"{C.FAILS_SIM} where knowledge_link = 0" in flips


def test_a_stand_ins_rows_name_its_chosen_parameters_and_are_by_construction_only_when_compared():
    """Every row of a notebook 07 stand-in's run notes the parameters chosen from the paper's wording (or that it
    has the defaults); 'decided by' names them, by construction only for the comparison with GPT-4o-mini's gain."""
    meta = {"population": {"synthetic": True, "model": "synthetic-population:DeepSeek-V3.1", "params": {}}}
    assert "default parameters" in C.standin_note(meta)
    assert C.standin_note({"population": {"synthetic": True, "model": "synthetic-population", "params": {}}}) == ""
    configs = {"AceMAD (T=3)": {"method": "acemad", "n_agents": 5}, "Centralized MAD": {"method": "centralized"}}

    def stand_in(model: str, **params) -> tuple:
        rates = {"AceMAD (T=3)": 0.6, "Centralized MAD": 0.3}
        return _run(rates, configs, params=params, model=f"synthetic-population:{model}")

    runs = {"other_DeepSeek-V3.1_table4_deepseek": stand_in("DeepSeek-V3.1", trap_mean=0.5)}
    runs |= {
        "other_L_table5_llama8b": stand_in("L", insight_calibration=0.5),
        "other_Q_table2_main_results": stand_in("Q"),
    }
    ledger = C.deciding(C.ledger(runs), {}, runs).set_index("claim")
    deepseek = ledger[ledger["paper line"].str.contains("l.102[23]")]
    assert len(deepseek) >= 3 and deepseek.note.str.contains("STAND-IN parameters .*trap_mean=0.5").all()
    why = ledger[C.DECIDED_BY]
    assert why["Table 5 (Llama-3.1-8B): gains smaller than GPT-4o-mini's"].startswith("by construction: ")
    beats = why["Table 5 (Llama-3.1-8B): AceMAD beats the best MAD: AceMAD (T=3)"]
    assert "(insight_calibration=0.5; notebook 07)" in beats and not beats.startswith("by construction")
    default = why["Table 2 (Qwen3-235B-A22B): AceMAD beats the best MAD: AceMAD (T=3)"]
    assert "default parameters" in default and "chosen" not in default and "knowledge_link = 1" in default


def test_most_pronounced_on_bbh_and_arc_compares_their_gains_with_the_other_benchmarks():
    benches = ("synthetic-bbh", "synthetic-arc_challenge", "synthetic-logiqa", "synthetic-medqa")
    base = np.r_[np.zeros(100), np.zeros(100), np.ones(100), np.ones(100)]  # B: right on LogiQA and MedQA only
    a = np.r_[np.ones(60), np.zeros(40), np.ones(60), np.zeros(40), np.ones(200)]  # +60 on BBH and ARC-C, +0 else
    recs = records("A", a, benches) + records("B", base, benches)
    r = C.pronounced_row("most pronounced", "l.459", recs, "A", ["B"])
    assert r["verdict"] == C.HOLDS and r["ours [95% CI]"].startswith("+60.0") and r["n"] == 400
    r = C.pronounced_row("most pronounced", "l.459", records("B", base, benches) + records("A", a, benches), "B", ["A"])
    assert r["verdict"] == C.FAILS  # the other way round: the gains are largest elsewhere
    # judged as every gain in the ledger: its p joins Holm's family, and a CI below the paper's +14.46 is no effect of
    # the claimed size, not "inconclusive"
    even = records("A", np.tile(np.r_[np.ones(30), np.zeros(70)], 4), benches)  # +30 points on every benchmark
    r = C.pronounced_row("most pronounced", "l.459", even + records("B", base * 0, benches), "A", ["B"])
    assert r["_kind"] == "gain" and 0 < r["p"] <= 1
    [verdict] = C.finalize([{**r, "_claimed": 14.46}], synthetic=True).verdict
    assert verdict == C.NULL_SIM


def test_the_title_says_synthetic_only_of_a_synthetic_ledger_and_a_ledger_of_no_runs_says_so():
    """A real-model profile whose runs all failed leaves notebook 08 no run: its ledger says so, not SYNTHETIC."""
    assert "synthetic population" in title(True, "SYNTHETIC population (no LLM)", {})
    assert "synthetic" not in title(False, "model: gpt-4o-mini", {})
    synthetic, model = C.source({})
    label = figures.source_label(synthetic, model)
    assert not synthetic and "SYNTHETIC" not in label.upper() and "no run" in title(synthetic, label, {})
    assert "SYNTHETIC" not in summary(C.ledger({}), {}, label).upper()


def test_rows_whose_run_was_left_out_on_purpose_say_skipped():
    configs = {"Decentralized MAD": cfg("decentralized"), "AceMAD (Different Persona)": cfg("acemad")}
    ledger = C.ledger(
        {"heterogeneity": _run({"Decentralized MAD": 0.3, "AceMAD (Different Persona)": 0.5}, configs, params={})}
    )
    skipped = ledger[ledger.claim.str.endswith(C.DIFFERENT_LLMS)]
    assert len(skipped) == 1 and skipped.verdict.iloc[0] == C.NOT_RUN and "SECOND_MODEL" in skipped.note.iloc[0]
    configs = {"Decentralized MAD": cfg("decentralized"), "AceMAD (T=3)": cfg("acemad")}
    full = _run({"Decentralized MAD": 0.3, "AceMAD (T=3)": 0.5}, configs, params={})
    ledger = C.ledger({"full_datasets": full})  # notebook 07 with OTHER_MODELS: []
    other = ledger[ledger.claim.str.startswith(("Table 2 (Qwen", "Table 4", "Table 5"))]
    assert len(other) >= 3 and other.note.str.startswith("skipped: OTHER_MODELS").all()
    assert set(other.verdict) == {C.NOT_RUN}


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_a_grid_point_debated_in_memory_gives_the_records_and_ledger_of_its_written_runs(smoke_outputs):
    """In memory the grid debates only what the ledger reads (claims.reads), and skips no row it decides."""
    S = Setup(profile="default", benchmarks=["bbh", "mmlu_pro"], n_items=40, workers=1)
    point, runs = R.LEDGER_GRID[0], R.ledger_runs(R.LEDGER_GRID[0], S.seed, 6, S.benchmarks)
    memory = AM.ledger_runs(S, point, n_max=6)
    assert not any(run_dir(f"default/{r.name}", create=False).exists() for r in runs)  # nothing written
    disk = {r.name.split("__", 1)[1]: AM.run_with_meta(S, r, progress=False) for r in runs}

    def decided(runs: dict, read=lambda name, cfg: True) -> dict:  # who answered which question rightly, run by run
        return {k: [(r["method"], r["question_id"], r["final"]["correct"]) for r in v[1]
                    if read(k, v[0]["methods"][r["method"]])] for k, v in runs.items()}  # fmt: skip

    assert decided(memory) == decided(disk, C.reads) and decided(memory) != decided(disk)  # the same debates, fewer
    pd.testing.assert_frame_equal(C.ledger(memory), C.ledger(disk))
    kept = ~C.ledger(disk).verdict.isin([C.NOT_COMPARABLE, C.NOT_RUN])  # what deciding reads of a grid ledger
    pd.testing.assert_frame_equal(C.ledger(memory, values=False)[kept], C.ledger(disk)[kept])
    S.close()


def test_one_question_shows_no_interval_and_two_show_one():
    """A single question has nothing to resample: its accuracy and its paired gain carry no interval (a zero-width
    one would read as certainty), the table says so, and a claimed value cannot be judged from it."""
    bench = ("arc_challenge",)
    one = records("AceMAD", np.array([1]), bench) + records("Majority Voting", np.array([0]), bench)
    acc = TB.accuracy_long(one)
    assert acc["ci_lo"].isna().all() and acc["ci_hi"].isna().all()
    assert "100.0 [no interval: a benchmark or sample of one question]" in TB.wide(acc).to_string()
    gain = TB.versus_best(one, ["AceMAD"], ["Majority Voting"]).iloc[0]
    assert gain.n_paired == 1 and np.isnan(gain.gain_lo) and np.isnan(gain.gain_hi)
    assert C.value_verdict(100.0, gain.gain_lo, gain.gain_hi) == C.INCONCLUSIVE
    shown = RD.tests_table(TB.versus_best(one, ["AceMAD"], ["Majority Voting"]))
    assert (shown[["CI low", "CI high"]] == RD.MISSING).all(axis=None)  # not "+nan"
    two = records("AceMAD", np.array([1, 0]), bench) + records("Majority Voting", np.array([0, 0]), bench)
    lo, hi = TB.accuracy_long(two).query("method == 'AceMAD'")[["ci_lo", "ci_hi"]].iloc[0]
    assert lo < hi
    # an average over a benchmark of one question and one of many: the one-question benchmark would add no spread
    # to the bootstrap (it resamples to itself), so the average's interval would understate it; none is given
    many = records("AceMAD", np.array([1, 0, 1, 0]), ("bbh",))
    average = lambda recs: TB.accuracy_long(recs).query(f"benchmark == '{TB.AVERAGE}'").iloc[0]
    mixed = average(records("AceMAD", np.array([1]), bench) + many)
    assert mixed.accuracy == 75.0 and np.isnan(mixed.ci_lo) and np.isnan(mixed.ci_hi)
    both = average(records("AceMAD", np.array([1, 1]), bench) + many)
    assert both.ci_lo < both.ci_hi


def test_every_answer_the_same_gets_the_exact_interval_not_a_zero_width_one():
    """Ten right answers out of ten: the percentile bootstrap resamples only ones ("100.0 [100.0, 100.0]"), yet the
    rate is far from certain; the exact (Clopper-Pearson) 95% bound is 0.025^(1/10) = 69.2%. A paired gain of
    identical answers is not an accuracy and keeps its bootstrap."""
    ten = records("AceMAD", np.ones(10), ("bbh",)) + records("Voting", np.zeros(10), ("bbh",))
    ci, exact = TB.accuracy_long(ten).set_index(["method", "benchmark"])[["ci_lo", "ci_hi"]], 100 * 0.025**0.1
    assert tuple(ci.loc[("AceMAD", "bbh")]) == (pytest.approx(exact), 100)
    assert tuple(ci.loc[("Voting", "bbh")]) == (0, pytest.approx(100 - exact))
    assert ci.loc[("AceMAD", TB.AVERAGE), "ci_lo"] == pytest.approx(exact)
    mixed = TB.accuracy_long(records("A", np.ones(10), ("bbh",)) + records("A", np.zeros(10), ("arc_challenge",)))
    average = mixed.query(f"benchmark == '{TB.AVERAGE}'").iloc[0]  # each benchmark's exact bounds, averaged
    assert average.accuracy == 50 and average.ci_lo == pytest.approx(50 * 0.025**0.1) and average.ci_hi < 100
    varied = TB.accuracy_long(records("A", np.array([1, 0, 1, 1]), ("bbh",))).iloc[0]
    assert varied.ci_lo < varied.accuracy < varied.ci_hi  # both outcomes: the bootstrap's own interval
    same = TB.versus_best(records("A", np.ones(10), ("bbh",)) + records("B", np.ones(10), ("bbh",)), ["A"], ["B"])
    assert (same[["gain", "gain_lo", "gain_hi"]] == 0).all(axis=None)


def test_with_one_benchmark_its_average_is_that_column_with_the_same_test():
    """A question file of one benchmark shows that column and an Average that is the same numbers: the same test too
    (not a second, Monte Carlo p beside the exact one: 0.73 against 0.72 for one comparison)."""
    rng = np.random.default_rng(3)
    recs = records("A", rng.integers(0, 2, 24), ("bbh",)) + records("B", rng.integers(0, 2, 24), ("bbh",))
    t = TB.versus_best(recs, ["A"], ["B"]).set_index("benchmark")
    assert t.loc["bbh", "p_value"] == t.loc[TB.AVERAGE, "p_value"] and t.loc["bbh", "gain"] == t.loc[TB.AVERAGE, "gain"]


def test_a_real_model_row_is_powered_for_the_smaller_of_the_printed_and_the_recomputed_effect():
    """T = 3 over the next T prints a gain its own cells make +2.43: the row needs the n for +2.43, as make estimate
    plans it, and 'no effect of the claimed size' must exclude +2.43, not only the printed number."""
    r = C.row("T=3 is optimal", "l.459", 4.0, kind="gain", ci=(-7.0, 3.0), n=660, psi=0.34, again=2.43)
    assert C.needed(r, 18) >= PW.n_needed(0.0243, 0.34, 0.05 / 18, 0.8) > C.needed({**r, "_claimed": 4.0}, 18)
    assert C._decide({**r, "p (Holm)": 0.5}) == C.INCONCLUSIVE  # 3.0 > 2.43: the recomputed effect not excluded


def test_a_row_without_a_paired_discordance_is_powered_by_its_own_interval():
    """'Most pronounced on BBH and ARC-C' has no discordance: the least noise it could have made n look ample at a
    CI of 21 points; the row's own CI says how many questions the claimed effect needs."""
    r = C.row("pronounced", "l.459", None, kind="gain", ci=(-12.2, 8.8), n=600, psi=float("nan"))
    need = C.needed(r, 18)
    assert need > 600 * 10 and C._real_model({**r, "verdict": C.INCONCLUSIVE}, 18, "gpt-4o-mini").startswith(
        f"{C.UNDERPOWERED} (n = 600 of the ~{need:,} needed)")  # fmt: skip
    tiny = C.row("pronounced", "l.459", None, kind="gain", ci=(100.0, 100.0), n=2, psi=float("nan"))
    assert C.needed(tiny, 18) > 2  # a zero-width interval of two questions is no measurement of the noise


def test_an_exact_value_is_compared_on_the_model_its_own_run_used_and_a_fine_tune_is_another_model():
    value = C.row("Majority Voting reaches 75% on ARC-C", "l.1022", 75.0, kind="value", ci=(74.0, 76.0), n=10_000,
                  model="DeepSeek-V3.1", verdict=C.HOLDS)  # fmt: skip
    on = lambda ran, main: C._real_model({**value, "_ran": ran}, 18, main)
    assert on("deepseek-ai/DeepSeek-V3.1", "gpt-4o-mini") == C.HOLDS  # its run: DeepSeek, whatever the main run's
    assert on("fake-other", "deepseek-ai/DeepSeek-V3.1") == C.ANOTHER_MODEL
    main = {**value, "_model": "GPT-4o-mini", "_ran": ""}
    assert C._real_model(main, 18, "gpt-4o-mini-2024-07-18") == C.HOLDS  # a dated snapshot is the paper's model
    assert C._real_model(main, 18, "ft:gpt-4o-mini-2024-07-18:acme::abc123") == C.ANOTHER_MODEL


def test_no_question_lost_on_a_few_right_majorities_is_not_a_zero_width_interval():
    """AceMAD ending right on every right-majority question of a small run: the share lost is 0 with the exact upper
    bound, not '0.0 [0.0, 0.0]', so 'no penalty' (below 2 points) is not claimed from a handful of questions."""
    cfg_ = DebateConfig(method="acemad")
    recs = [run_question(q, SimPopulation(seed=1), cfg_) for q in make_items(40, k=4, seed=3)]
    for r in recs:
        r["final"]["correct"] = True  # none ended wrong
    meta = {"methods": {cfg_.label: {"method": "acemad"}}}
    (r,) = C._no_penalty({"line": "l.1114"}, (meta, recs), "No penalty", {"seed": 0})
    lo, hi = r["_ci"]
    assert lo == 0.0 and hi == pytest.approx(100 * (1 - 0.025 ** (1 / r["n"]))) and r["verdict"] != C.HOLDS


def test_an_exact_ratio_is_powered_by_its_own_interval_not_an_accuracys_noise():
    """+74% relative improvement: a ratio of averages is far noisier than an accuracy; at the n an accuracy needs,
    its CI (+/-10 points) cannot tell 74 from 79, so the row stays underpowered."""
    ratio = C.row("74% relative improvement", "l.459", "+74.0%", kind="value", ci=(21.3, 42.7), n=1_740,
                  verdict=C.FAILS)  # fmt: skip
    assert C._real_model(ratio, 45, "gpt-4o-mini").startswith(f"{C.UNDERPOWERED} (n = 1740 of the ~")


def test_a_stratified_average_is_powered_by_its_own_interval_when_that_needs_more_than_one_pooled_test():
    """Benchmarks of unequal size: the Average's stratified CI is wider than a pooled test's; the wider decides."""
    r = C.row("beats", "l.1", 8.0, kind="gain", ci=(2.0, 14.0), n=700, psi=0.30, verdict=C.HOLDS)
    pooled = PW.n_needed(0.08, 0.30, 0.05 / 18, 0.8)
    assert pooled < 700 < C.needed(r, 18) and C._real_model(r, 18, "gpt-4o-mini").startswith(C.UNDERPOWERED)


def test_only_the_papers_model_itself_is_the_papers_model():
    assert C.same_model("gpt-4o-mini", "GPT-4o-mini") and C.same_model("openai/gpt-4o-mini-2024-07-18", "GPT-4o-mini")
    assert C.same_model("deepseek-ai/DeepSeek-V3.1", "DeepSeek-V3.1")
    assert C.same_model("Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen3-235B-A22B-Instruct")  # the paper profile's name
    for other in ("gpt-4o-mini-search-preview", "ft:gpt-4o-mini-2024-07-18:acme::x", "DeepSeek-V3.1-Base", ""):
        assert not C.same_model(other, "GPT-4o-mini" if "gpt" in other or not other else "DeepSeek-V3.1")


def test_llamas_smaller_gain_is_compared_only_when_the_main_run_is_the_papers_model():
    """The paper's -15.17 is Llama's gap to GPT-4o-mini's gain: beside another main model it is not comparable."""
    loss = C.row("gains smaller than GPT-4o-mini's", "l.1069", -15.17, kind="loss", ci=(-30.0, -20.0), n=50_000,
                 psi=float("nan"), verdict=C.HOLDS)  # fmt: skip
    assert C._real_model({**loss, "_vs": "my-model-7b"}, 18, "my-model-7b") == C.ANOTHER_MODEL
    assert C._real_model({**loss, "_vs": "gpt-4o-mini"}, 18, "gpt-4o-mini") == C.HOLDS
