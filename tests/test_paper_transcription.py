"""data/paper/ is the project's own transcription of the paper's printed Tables 1-6 (data/paper/README.md); it must
agree cell by cell with the shared transcription when that is at hand ($ACEMAD_PAPER_DIR, as in CI)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path

import pandas as pd
import pytest

from acemad_utils.data import paths as P
from acemad_utils.report import tables as TB


def printed(path: Path) -> pd.DataFrame:
    """A transcription with each cell as its printed number ('5.50' == '5.5'), else its stripped text."""

    def number(text: str):
        try:
            return Decimal(text.strip())
        except InvalidOperation:
            return text.strip()

    return pd.read_csv(path, dtype=str, keep_default_na=False).map(number)


def test_the_six_printed_tables_are_in_the_repository():
    assert sorted(p.stem for p in P.PAPER.glob("*.csv")) == sorted(TB.PRINTED_TABLES)
    assert "Liu" in (P.PAPER / "README.md").read_text()  # the citation travels with the numbers


@pytest.mark.parametrize("name", TB.PRINTED_TABLES)
def test_transcription_matches_the_shared_copy_cell_by_cell(name):
    shared = P.shared_paper_dir()
    if not shared.is_dir():
        pytest.skip(f"no shared transcription of the paper's tables at {shared} (set ACEMAD_PAPER_DIR to compare)")
    assert (shared / f"{name}.csv").is_file(), f"the shared folder {shared} has no {name}.csv"
    pd.testing.assert_frame_equal(printed(P.PAPER / f"{name}.csv"), printed(shared / f"{name}.csv"))


def test_paper_table_needs_no_environment_variable(monkeypatch):
    monkeypatch.delenv("ACEMAD_PAPER_DIR", raising=False)
    df = TB.paper_table("table2_main_results", model="GPT-4o-mini")
    assert len(df) == 8 and "model" not in df
    row = df[df["method"] == "AceMAD (T=3)"].iloc[0]
    assert row["Average (printed)"] == 49.92 and row["Average (recomputed)"] == 43.25  # the paper's own slip, shown
    for name in TB.PRINTED_TABLES:
        t = TB.paper_table(name)
        cells = [c for c in t.columns if c not in ("model", "method", "Average (printed)", "Average (recomputed)")]
        assert len(t) and (t["Average (recomputed)"] == t[cells].mean(axis=1).round(2)).all()
    assert list(TB.paper_table("table6_full_datasets")["Average (recomputed)"]) == [65.1, 69.24]  # printed 65.11
    with pytest.raises(FileNotFoundError):
        TB.paper_table("nope")


def test_an_altered_copy_is_detected(tmp_path):
    src = P.PAPER / "table2_main_results.csv"
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    altered = {
        "same_precision": df.assign(**{"MMLU-Pro": df["MMLU-Pro"].str.replace("5.50", "5.5")}),  # the same number
        "cell": df.assign(BBH=df["BBH"].where(df.method != "Sparse MAD", "63.01")),
        "reordered": df.iloc[::-1],
        "narrow": df.drop(columns="BBH"),
    }
    for name, copy in altered.items():
        copy.to_csv(tmp_path / f"{name}.csv", index=False)
    pd.testing.assert_frame_equal(printed(src), printed(tmp_path / "same_precision.csv"))
    for name in ("cell", "reordered", "narrow"):
        with pytest.raises(AssertionError):
            pd.testing.assert_frame_equal(printed(src), printed(tmp_path / f"{name}.csv"))


def test_paper_order_follows_each_printed_tables_own_columns():
    bench = ["synthetic-truthfulqa", "synthetic-arc_challenge", "synthetic-bbh", "synthetic-medqa", "demo"]
    long = pd.DataFrame(
        [{"method": m, "benchmark": b, "accuracy": 0.0} for m in ("X", "Y") for b in [*bench, TB.AVERAGE]]
    )
    t2 = TB.paper_order(long, "table2_main_results")  # "demo", not printed: after the printed ones
    printed = [f"synthetic-{b}" for b in ("arc_challenge", "truthfulqa", "medqa", "bbh")]
    assert list(t2[t2.method == "X"].benchmark) == [*printed, "demo", TB.AVERAGE]
    t5 = TB.paper_order(long, "table5_llama8b")
    assert list(t5[t5.method == "Y"].benchmark)[:3] == ["synthetic-truthfulqa", "synthetic-medqa", "synthetic-bbh"]
    assert list(dict.fromkeys(t5.method)) == ["X", "Y"] and len(t5) == len(long)
