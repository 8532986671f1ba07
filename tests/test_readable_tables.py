"""Tables a reader can read: no shown cell cut with '...', p-values as docs/reading.md writes them, no NaN shown as a
number: readable.html, and a scan of the committed notebooks' outputs (never outputs/, which may be stale)."""

from __future__ import annotations

import html as H
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from acemad_utils.protocol.schema import SYNTHETIC_LABEL
from acemad_utils.report import readable as RD
from acemad_utils.report import save

REPO = Path(__file__).resolve().parents[1]
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
RAW_P = re.compile(r"\d\.\d{6}e[-+]\d{2}")  # pandas' float repr of a small p: 9.999000e-05


def problems(nb) -> list[str]:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            page = (o.get("data") or {}).get("text/html", "")
            for raw in CELL.findall("".join(page) if isinstance(page, list) else page):
                text = H.unescape(re.sub(r"<[^>]+>", "", raw)).strip()
                if text.endswith("...") or RAW_P.search(text) or text in ("NaN", "nan"):
                    out.append(f"cell {cell.get('id')}: {text[-80:]!r}")
    return out


def test_a_shown_table_keeps_its_texts_whole_and_writes_p_and_missing_values_as_text():
    df = pd.DataFrame({"claim": ["a claim " * 20], "p": [1 / 10001], "p (Holm)": [0.5213], "n": [np.nan]})
    page = RD.html(df)
    cells = [H.unescape(c) for c in CELL.findall(page)]
    assert cells == [("a claim " * 20).strip(), "< 1e-4", "0.52", RD.MISSING]
    assert df["p"].dtype == float  # the frame (and the CSV saved from it) keeps its numbers
    ledger = pd.DataFrame({"claim": ["a claim " * 20, "b"], "p": [1 / 10001, 1.0], "n": [np.nan, 1]})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell()])
    shown = {"text/html": ledger._repr_html_()}  # pandas' own: the claim cut at 50 characters, NaN
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", shown, execution_count=1)]
    assert len(problems(nb)) == 2
    nb.cells[0].outputs[0]["data"]["text/html"] = RD.html(ledger)
    assert problems(nb) == []


def test_a_saved_markdown_table_writes_a_missing_number_as_a_shown_table_does(tmp_outputs):
    df = pd.DataFrame({"claim": ["a", "b"], "gain": [1.5, np.nan], "p (Holm)": [np.nan, 0.01], "n": [3, 4]})
    csv = save.save_table(df, "t", synthetic=True, companions={"more": df})
    md = csv.with_suffix(".md").read_text()
    assert "nan" not in md.lower() and md.count(RD.MISSING) == 4, md
    main, more = md.split("**more**")
    assert " 1.5000 " in main and " 0.0100 " in main and " 1.50 " in more  # the float formats kept
    back = pd.read_csv(csv)
    assert back["gain"].isna().tolist() == [False, True]  # the CSV keeps its empty cell
    assert back.columns[0] == "source" and set(back["source"]) == {SYNTHETIC_LABEL}  # a file opened alone says so
    real = pd.read_csv(save.save_table(df, "u", synthetic=False, source="gpt-4o-mini"))
    assert set(real["source"]) == {"gpt-4o-mini"} and real.drop(columns="source").equals(back.drop(columns="source"))


WITH_OUTPUTS = [
    p for p in sorted((REPO / "notebooks").glob("*.ipynb")) if any(c.get("outputs") for c in nbformat.read(p, 4).cells)
]


@pytest.mark.parametrize("path", WITH_OUTPUTS or [None], ids=lambda p: str(p.relative_to(REPO)) if p else "none")
def test_no_shown_table_cell_is_cut_or_an_unformatted_number(path):
    if path is None:
        pytest.skip("the committed notebooks carry no outputs: run `make notebooks`")
    assert problems(nbformat.read(path, as_version=4)) == []
