"""The claims ledger (report/claims.py): verdict rules, paired gains on hand-made records, and a ledger with no
runs still lists every claim with the paper's line."""

from __future__ import annotations

import numpy as np
import pytest

from acemad_utils.report import claims as C
from acemad_utils.report import tables as TB


def records(method: str, correct: np.ndarray, benchmarks=("synthetic-arc_challenge", "synthetic-bbh")) -> list:
    """One minimal record per question: len(correct) questions split evenly over the benchmarks."""
    per = len(correct) // len(benchmarks)
    return [
        {
            "question_id": f"q{i}",
            "benchmark": benchmarks[i // per],
            "method": method,
            "final": {"correct": bool(c)},
            "status": "ok",
        }
        for i, c in enumerate(correct)
    ]


RNG = np.random.default_rng(0)


def test_verdict_rules():
    assert C.gain_verdict(0.5, 9) == C.SUPPORTED
    assert C.gain_verdict(-9, 0) == C.NOT_SUPPORTED
    assert C.gain_verdict(-1, 1) == C.INCONCLUSIVE
    assert C.value_verdict(49.92, 40, 55) == C.SUPPORTED
    assert C.value_verdict(49.92, 20, 40) == C.NOT_SUPPORTED
    assert C.value_verdict(74, -10, 200, null=0.0) == C.INCONCLUSIVE
    assert C.flat_verdict(-3, 1.5) == C.SUPPORTED and C.flat_verdict(0.1, 5) == C.NOT_SUPPORTED


@pytest.mark.parametrize(
    "a_rate, b_rate, verdict",
    [(0.8, 0.2, C.SUPPORTED), (0.2, 0.8, C.NOT_SUPPORTED), (0.5, 0.5, C.NOT_SUPPORTED)],  # equal: no gain
)
def test_a_paired_gain_gets_the_verdict_its_ci_implies(a_rate, b_rate, verdict):
    n = 200
    base = RNG.random(n)  # shared difficulty: a and b are paired on the same questions
    recs = records("A", base < a_rate) + records("B", base < b_rate)
    [row] = C.gain_rows("A beats B", "l.1", recs, "A", ["B"])
    assert row["verdict"] == verdict and row["n"] == n and "vs B" in row["note"]


def test_a_gain_that_may_be_zero_is_inconclusive():
    a = np.r_[np.ones(12), np.zeros(10), np.ones(18)]  # A alone right on 12 questions, B alone on 10
    b = np.r_[np.zeros(12), np.ones(10), np.ones(18)]
    [row] = C.gain_rows("A beats B", "l.1", records("A", a) + records("B", b), "A", ["B"])
    assert row["verdict"] == C.INCONCLUSIVE


def test_gains_per_benchmark_carry_the_papers_difference_of_printed_cells():
    paper = TB.paper_table("table2_main_results", model="GPT-4o-mini")
    recs = records("AceMAD (T=3)", np.ones(40)) + records("Decentralized MAD", np.zeros(40))
    rows = C.gain_rows("x", "l.459", recs, "AceMAD (T=3)", ["Decentralized MAD"], paper=paper, per_benchmark=True)
    cells = paper.set_index("method")
    arc = cells.loc["AceMAD (T=3)", "ARC-C"] - cells.loc["Decentralized MAD", "ARC-C"]
    assert rows[0]["claim"].endswith("ARC-C (synthetic items)") and rows[0]["paper"] == f"{arc:+.2f}"
    assert [r["verdict"] for r in rows] == [C.SUPPORTED] * 3  # two benchmarks and the Average


def test_relative_gain_is_the_ratio_of_averages():
    a = np.r_[np.ones(30), np.zeros(70)]  # 50 questions per benchmark: A 60% and 0%, B 30% on both
    b = np.r_[np.ones(15), np.zeros(35), np.ones(15), np.zeros(35)]
    point, lo, hi, n = C.relative_gain(records("A", a) + records("B", b), "A", "B")
    expected = 100 * (np.mean([a[:50].mean(), a[50:].mean()]) / np.mean([b[:50].mean(), b[50:].mean()]) - 1)
    assert point == pytest.approx(expected) and lo <= point <= hi and n == 100


def test_a_ledger_without_runs_lists_every_claim_as_not_run():
    ledger = C.ledger({})
    assert list(ledger.columns) == C.COLUMNS
    assert len(ledger) >= 10 and set(ledger.verdict) == {C.NOT_RUN}
    assert ledger["paper line"].str.contains(r"l\.\d+").all()
    for line in ("l.226", "l.229", "l.459", "l.468", "l.511", "l.522", "l.1020", "l.1069", "l.1114"):
        assert ledger["paper line"].str.contains(line, regex=False).any(), line


def test_the_synthetic_title_says_so():
    assert "synthetic population" in C.title(True, "SYNTHETIC population (no LLM)")
    assert "synthetic" not in C.title(False, "model: gpt-4o-mini")
