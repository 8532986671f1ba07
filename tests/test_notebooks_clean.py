"""The committed notebooks: a caption after every figure, and either no outputs at all or the full default
profile's executed outputs, clean (acemad_utils.reproduce.nbtools). While a branch carries them stripped, the
output checks skip, saying so. (Their parameters cells: tests/test_params.py.)"""

import ast
import inspect
import re
import types
from pathlib import Path

import nbformat
import pytest

from acemad_utils.reproduce import nbtools

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FIGURE = re.compile(r"\bsave_figure\(")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_is_the_cells_value_and_has_a_caption(path):
    cells = nbformat.read(path, as_version=4).cells
    for i, c in enumerate(cells):
        if c.cell_type == "code" and FIGURE.search(c.source):
            assert c.source.rstrip().splitlines()[-1].startswith("save_figure("), f"{path.name} cell {i}: end with it"
            nxt = cells[i + 1] if i + 1 < len(cells) else None
            assert nxt is not None and nxt.cell_type == "markdown" and nxt.source.startswith("**Figure"), (
                f"{path.name} cell {i}: a caption cell (**Figure ...**) must follow"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_are_complete_and_clean(path):
    nb = nbformat.read(path, as_version=4)
    if not nbtools.has_outputs(nb):
        pytest.skip(f"{path.name} is committed without outputs: `make notebooks` writes them (full default run)")
    assert not nbtools.problems(nb), f"{path.name}: {nbtools.problems(nb)[:5]}; rerun `make notebooks`"
    assert not [k for k in nbtools.VOLATILE_NB_META if k in nb.metadata], f"{path.name}: volatile metadata kept"
    assert not [k for c in nb.cells for k in nbtools.VOLATILE_CELL_META if k in c.metadata], "cell timings kept"
    figures = [c for c in nbtools.code_cells(nb) if FIGURE.search(c.source)]
    assert all(any("image/png" in (o.get("data") or {}) for o in c.outputs) for c in figures), "a figure not shown"
    for o in (o for c in nbtools.code_cells(nb) for o in c.outputs):
        data = o.get("data") or {}
        if "<table" in "".join(data.get("text/html", "")):  # a table: its HTML, plus one line
            assert len("".join(data.get("text/plain", "")).splitlines()) <= 1, f"{path.name}: a table twice"


def _executed(*outputs, source="x = 1", tags=()) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source, outputs=list(outputs), execution_count=1)
    cell.metadata.update({"tags": list(tags), "papermill": {"duration": 1.5}, "execution": {"x": "2026"}})
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["papermill"] = {"input_path": "/somewhere/nb.ipynb", "duration": 3.0}
    return nb


def test_problems_names_what_must_not_be_committed():
    out = nbformat.v4.new_output
    assert nbtools.problems(_executed(out("stream", name="stdout", text="SUMMARY: 1\n"))) == []
    assert nbtools.problems(_executed(out("stream", name="stderr", text="50%|##  |\n")))
    assert nbtools.problems(_executed(out("error", ename="ValueError", evalue="x", traceback=[])))
    assert nbtools.problems(
        _executed(out("execute_result", data={"text/plain": "PosixPath('f.png')"}, execution_count=1))
    )
    assert nbtools.problems(_executed(out("stream", name="stdout", text=f"wrote {nbtools.ROOT}/outputs/x.html\n")))
    unrun = _executed()
    unrun.cells[0].execution_count = None
    assert nbtools.problems(unrun) == ["code cell 0 was not executed"]


def test_store_keeps_outputs_and_drops_what_changes_between_runs(tmp_path):
    src, ran_dir = tmp_path / "01_x.ipynb", tmp_path / "ran"
    ran_dir.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), src)
    # one print that reached the kernel's stream in two chunks (it does, by load) is stored as one output
    ran = _executed(*(nbformat.v4.new_output("stream", name="stdout", text=t) for t in ("SUMMARY: 1", "\n")))
    ran.cells.insert(0, nbformat.v4.new_code_cell('PROFILE = "default"\n', execution_count=1))
    ran.cells[0].metadata["tags"] = [nbtools.INJECTED]
    nbformat.write(ran, ran_dir / src.name)
    assert nbtools.store(src, ran_dir) == []
    kept = nbformat.read(src, as_version=4)
    assert "papermill" not in kept.metadata and not {"papermill", "execution"} & set(kept.cells[1].metadata)
    assert kept.cells[0].id == nbtools.INJECTED  # a fixed id: papermill draws a new one every run
    assert [o["text"] for o in kept.cells[1].outputs] == ["SUMMARY: 1\n"]
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 2")]), src)  # an older run: refused
    assert "older version" in nbtools.store(src, ran_dir)[0]
    assert nbformat.read(src, as_version=4).cells[0].source == "x = 2"


def _with_parameters(defaults: str, injected: str) -> nbformat.NotebookNode:
    nb = _executed()
    cells = [nbformat.v4.new_code_cell(src, execution_count=i) for i, src in enumerate((defaults, injected), 1)]
    cells[0].metadata["tags"], cells[1].metadata["tags"] = ["parameters"], [nbtools.INJECTED]
    nb.cells = [*cells, *nb.cells]
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def test_lean_drops_an_injected_cell_that_repeats_the_defaults_and_writes_labs_kernelspec():
    same = _with_parameters('# Parameters\nPROFILE: str = "default"\nN: int = 3  # items\n', "# Parameters\nN = 3\n")
    nbtools.lean(same)
    assert len(same.cells) == 2 and all(nbtools.INJECTED not in c.metadata.get("tags", []) for c in same.cells)
    # what JupyterLab writes on save (it marks a notebook saying "Python 3" modified at once and autosaves it)
    assert same.metadata["kernelspec"]["display_name"] == nbtools.lab_kernelspec()["display_name"] != "Python 3"
    differs = _with_parameters("N: int = 3\n", "# Parameters\nN = 400\n")
    nbtools.lean(differs)
    assert differs.cells[1].source == nbtools.INJECTED_HEADER + "\nN = 400\n"
    new = _with_parameters("N = 3\n", "# Parameters\nM = 3\n")  # a name the defaults lack: kept
    nbtools.lean(new)
    assert len(new.cells) == 3


def _unseeded_calls(path: Path) -> list[str]:
    """Calls of an acemad_utils function with a `seed` parameter that is not given one (by keyword or position)."""
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    trees = [
        ast.parse("\n".join("" if s.lstrip().startswith(("%", "!")) else s for s in c.splitlines())) for c in cells
    ]
    ns: dict = {}
    for node in (n for t in trees for n in ast.walk(t)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("acemad_utils"):
            exec(compile(ast.Module([node], []), str(path), "exec"), ns)
    out = []
    for node in (n for t in trees for n in ast.walk(t) if isinstance(n, ast.Call)):
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            fn = getattr(ns[f.value.id], f.attr, None) if isinstance(ns.get(f.value.id), types.ModuleType) else None
        else:
            fn = ns.get(f.id) if isinstance(f, ast.Name) else None
        try:
            params = list(inspect.signature(fn).parameters) if callable(fn) else []
        except (TypeError, ValueError):
            params = []
        starred = any(isinstance(a, ast.Starred) for a in node.args)  # *args: it may hold the seed
        given = starred or any(k.arg in ("seed", None) for k in node.keywords)
        if "seed" in params and not given and params.index("seed") >= len(node.args):
            out.append(ast.unparse(node)[:100])
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_seed_reaches_every_draw_a_notebook_makes(path):
    """SEED is the seed "of items, synthetic agents, tie-breaks and bootstraps": every call that draws (a bootstrap
    interval, a permutation p, a tie-break, a sample of examples) is given it, so `--set SEED=1` redraws them all."""
    assert _unseeded_calls(path) == []
