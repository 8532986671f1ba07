"""The paper's printed numbers: read from ACEMAD_PAPER_DIR (never shipped), Average recomputed from the row."""
from __future__ import annotations

import pandas as pd
import pytest

from acemad_utils import paths as P
from acemad_utils import tables as TB

CSV = """model,method,ARC-C,LogiQA,Average
M1,Single Agent,20.0,10.0,15.0
M1,AceMAD (T=3),40.0,30.0,49.92
M2,Single Agent,50.0,60.0,55.0
"""


def test_without_acemad_paper_dir_the_table_says_how_to_get_the_numbers(monkeypatch):
    monkeypatch.delenv("ACEMAD_PAPER_DIR", raising=False)
    df = TB.paper_table("table2_main_results", model="M1")
    assert df.shape == (1, 1) and "ACEMAD_PAPER_DIR" in df.iloc[0, 0]


def test_printed_and_recomputed_average_side_by_side(monkeypatch, tmp_path):
    (tmp_path / "table2_main_results.csv").write_text(CSV)
    monkeypatch.setenv("ACEMAD_PAPER_DIR", str(tmp_path))
    df = TB.paper_table("table2_main_results", model="M1")
    assert list(df["method"]) == ["Single Agent", "AceMAD (T=3)"] and "model" not in df
    assert list(df["Average (printed)"]) == [15.0, 49.92]  # the paper's own (wrong) 49.92 is kept as printed...
    assert list(df["Average (recomputed)"]) == [15.0, 35.0]  # ...beside the mean of its cells
    assert len(TB.paper_table("table2_main_results")) == 3


def test_relative_dir_resolves_from_the_repo_root_and_a_missing_file_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "t.csv").write_text(CSV)
    (tmp_path / "repo").mkdir()
    monkeypatch.setattr(P, "ROOT", tmp_path / "repo")
    (tmp_path / "elsewhere" / "cwd").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere" / "cwd")  # ../tables does not exist from here...
    monkeypatch.setenv("ACEMAD_PAPER_DIR", "../tables")  # ...but does from the repo root, as in CI
    assert isinstance(TB.paper_table("t"), pd.DataFrame) and P.paper_dir() == tmp_path / "repo" / "../tables"
    with pytest.raises(FileNotFoundError, match="no nope.csv"):
        TB.paper_table("nope")
