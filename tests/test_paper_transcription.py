"""data/paper/ is the project's own transcription of the paper's printed Tables 1-6 (data/paper/README.md); it must
agree cell by cell with the shared transcription when that is at hand ($ACEMAD_PAPER_DIR, as in CI)."""

from __future__ import annotations

import shutil
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pandas as pd
import pytest

from acemad_utils.data import paths as P
from acemad_utils.report import tables as TB


def _number(text: str):
    """A printed cell as an exact decimal ('5.50' == '5.5'), else its stripped text."""
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        return text.strip()


def paper_differences(ours: Path, theirs: Path) -> list[str]:
    """Every difference between two transcriptions of one printed table: columns, rows (by model/method, in order),
    cells (as exact decimals)."""
    a, b = (pd.read_csv(f, dtype=str, keep_default_na=False) for f in (ours, theirs))
    name = Path(ours).name
    if list(a.columns) != list(b.columns):
        return [f"{name}: columns differ: ours {list(a.columns)}, shared {list(b.columns)}"]
    keys = [c for c in TB.KEY_COLUMNS if c in a.columns]
    ka, kb = (list(map(tuple, d[keys].to_numpy())) for d in (a, b))
    if ka != kb:
        return [
            f"{name}: rows differ: only ours {[k for k in ka if k not in kb]}, only shared "
            f"{[k for k in kb if k not in ka]}" + ("" if set(ka) != set(kb) else f", order ours {ka}, shared {kb}")
        ]
    return [
        f"{name}: row {' / '.join(key)}, column {c}: ours {ra[c]!r}, shared {rb[c]!r}"
        for key, (_, ra), (_, rb) in zip(ka, a.iterrows(), b.iterrows())
        for c in a.columns
        if c not in keys and _number(ra[c]) != _number(rb[c])
    ]


def test_the_six_printed_tables_are_in_the_repository():
    assert sorted(p.stem for p in P.PAPER.glob("*.csv")) == sorted(TB.PRINTED_TABLES)
    assert "Liu" in (P.PAPER / "README.md").read_text()  # the citation travels with the numbers


@pytest.mark.parametrize("name", TB.PRINTED_TABLES)
def test_transcription_matches_the_shared_copy_cell_by_cell(name):
    shared = P.shared_paper_dir()
    if not shared.is_dir():
        pytest.skip(f"no shared transcription of the paper's tables at {shared} (set ACEMAD_PAPER_DIR to compare)")
    assert (shared / f"{name}.csv").is_file(), f"the shared folder {shared} has no {name}.csv"
    diffs = paper_differences(P.PAPER / f"{name}.csv", shared / f"{name}.csv")
    assert not diffs, "\n".join(diffs)


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
    assert paper_differences(src, src) == []
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    same = tmp_path / "same_precision.csv"
    df.assign(**{"MMLU-Pro": df["MMLU-Pro"].str.replace("5.50", "5.5")}).to_csv(same, index=False)
    assert paper_differences(src, same) == []  # 5.50 and 5.5 are the same printed number
    df.loc[(df.model == "Qwen3-235B-A22B-Instruct") & (df.method == "Sparse MAD"), "BBH"] = "63.01"
    bad = tmp_path / "table2_main_results.csv"
    df.to_csv(bad, index=False)
    assert paper_differences(src, bad) == [
        "table2_main_results.csv: row Qwen3-235B-A22B-Instruct / Sparse MAD, column BBH: ours '63.10', shared '63.01'"
    ]
    shutil.copy(P.PAPER / "table1_voting_vs_mad.csv", tmp_path / "t1.csv")
    t1 = pd.read_csv(tmp_path / "t1.csv", dtype=str)
    t1.iloc[::-1].to_csv(tmp_path / "t1_reordered.csv", index=False)
    assert "rows differ" in paper_differences(tmp_path / "t1.csv", tmp_path / "t1_reordered.csv")[0]
    t1.drop(columns="BBH").to_csv(tmp_path / "t1_narrow.csv", index=False)
    assert "columns differ" in paper_differences(tmp_path / "t1.csv", tmp_path / "t1_narrow.csv")[0]


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
