"""The paper's printed numbers: read from the project's data/paper/ (no variable), Average recomputed from the row."""

from __future__ import annotations

import pytest

from acemad_utils.data import paths as P
from acemad_utils.report import tables as TB

CSV = """model,method,ARC-C,LogiQA,Average
M1,Single Agent,20.0,10.0,15.0
M1,AceMAD (T=3),40.0,30.0,49.92
M2,Single Agent,50.0,60.0,55.0
"""


def test_printed_and_recomputed_average_side_by_side(monkeypatch, tmp_path):
    (tmp_path / "table2_main_results.csv").write_text(CSV)
    monkeypatch.setattr(P, "PAPER", tmp_path)
    df = TB.paper_table("table2_main_results", model="M1")
    assert list(df["method"]) == ["Single Agent", "AceMAD (T=3)"] and "model" not in df
    assert list(df["Average (printed)"]) == [15.0, 49.92]  # the paper's own (wrong) 49.92 is kept as printed...
    assert list(df["Average (recomputed)"]) == [15.0, 35.0]  # ...beside the mean of its cells
    assert len(TB.paper_table("table2_main_results")) == 3


def test_a_missing_table_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setattr(P, "PAPER", tmp_path)
    with pytest.raises(FileNotFoundError, match="no nope.csv"):
        TB.paper_table("nope")


def test_shared_dir_defaults_beside_the_repo_and_a_relative_variable_resolves_from_the_root(monkeypatch, tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "repo").mkdir()
    monkeypatch.setattr(P, "ROOT", tmp_path / "repo")
    monkeypatch.delenv("ACEMAD_PAPER_DIR", raising=False)
    assert P.shared_paper_dir() == tmp_path / "shared" / "paper" / "tables"
    (tmp_path / "elsewhere" / "cwd").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere" / "cwd")  # ../tables does not exist from here...
    monkeypatch.setenv("ACEMAD_PAPER_DIR", "../tables")  # ...but does from the repo root
    assert P.shared_paper_dir() == tmp_path / "repo" / "../tables"
