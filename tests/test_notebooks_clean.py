"""Notebooks are committed without outputs and each has a papermill `parameters` cell of plain values.

The one exception: a cell whose first line is `# NBVAL_CHECK_OUTPUT` stores exactly its `SUMMARY:` lines (one
stdout stream, nothing else), the numbers nbval compares; `python -m acemad_utils.reproduce.nbtools refresh`
stores that.
"""

import ast
import json
from pathlib import Path

import nbformat
import pytest

from acemad_utils.reproduce import nbtools

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def not_summary(cell: dict) -> list:
    """What a checked cell stores besides SUMMARY: lines on stdout (empty when it follows the rule)."""
    bad = []
    for o in cell.get("outputs", []):
        if o.get("output_type") != "stream" or o.get("name") != "stdout":
            bad.append(f"a {o.get('output_type')} output" + (f" on {o['name']}" if o.get("name") else ""))
            continue
        bad += [repr(line) for line in "".join(o.get("text", "")).splitlines() if not line.startswith("SUMMARY:")]
    return bad


def test_there_are_notebooks():
    assert NOTEBOOKS, "no numbered notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stripped_and_parameterized(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    # Only cells marked NBVAL_CHECK_OUTPUT may keep an output: their deterministic smoke-mode summary,
    # which nbval compares (refresh with `python -m acemad_utils.reproduce.nbtools refresh`).
    checked = ["".join(c["source"]).lstrip().startswith("# NBVAL_CHECK_OUTPUT") for c in code]
    dirty = [i for i, c in enumerate(code) if not checked[i] and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, (
        f"{path.name}: code cells {dirty} hold outputs; run `python -m acemad_utils.reproduce.nbtools strip`"
    )
    assert any(checked), f"{path.name}: no NBVAL_CHECK_OUTPUT cell, so nbval checks no number"
    for i, c in enumerate(code):
        if checked[i]:
            assert c.get("outputs"), f"{path.name}: checked cell {i} has no stored output; run nbtools refresh"
            assert not not_summary(c), (
                f"{path.name}: checked cell {i} stores more than its SUMMARY: lines: "
                f"{not_summary(c)}; run `python -m acemad_utils.reproduce.nbtools refresh`"
            )
    params = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
    tree = ast.parse("".join(params[0]["source"]))
    for node in tree.body:  # plain UPPER_CASE = literal assignments only
        assert isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets), (
            f"{path.name}: parameters cell may only assign UPPER_CASE names"
        )
        ast.literal_eval(node.value)


def _checked_cell(*outputs) -> dict:
    return nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint('SUMMARY: ok')", outputs=list(outputs))


def test_a_checked_cell_keeping_any_other_line_is_caught():
    out = nbformat.v4.new_output
    summary = out("stream", name="stdout", text="SUMMARY: 33.3%\n")
    assert not_summary(_checked_cell(summary)) == []
    chatty = out("stream", name="stdout", text="SUMMARY: 33.3%\nloaded 360 items\n")
    assert not_summary(_checked_cell(chatty)) == ["'loaded 360 items'"]
    assert not_summary(_checked_cell(summary, out("stream", name="stderr", text="SUMMARY: warn\n")))
    assert not_summary(_checked_cell(summary, out("execute_result", data={"text/plain": "SUMMARY: 1"})))


def test_nbtools_stores_only_the_summary_lines_of_a_checked_cell():
    ran = [
        nbformat.v4.new_output("stream", name="stdout", text="loading...\nSUMMARY: a 1%\n"),
        nbformat.v4.new_output("stream", name="stderr", text="SUMMARY: not stdout\n"),
        nbformat.v4.new_output("stream", name="stdout", text="100%|#####|\nSUMMARY: b 2%"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "'SUMMARY: displayed'"}, execution_count=3),
    ]
    cell = _checked_cell()
    nbtools.clean_cell(cell, nbtools.stored_outputs(cell, ran))
    stored = [{"output_type": "stream", "name": "stdout", "text": "SUMMARY: a 1%\nSUMMARY: b 2%"}]
    assert [dict(o) for o in cell.outputs] == stored
    assert cell.execution_count == 1 and not not_summary(cell)
    other = nbformat.v4.new_code_cell("print('SUMMARY: not checked')", outputs=ran)
    nbtools.clean_cell(other, nbtools.stored_outputs(other))
    assert other.outputs == [] and other.execution_count is None
