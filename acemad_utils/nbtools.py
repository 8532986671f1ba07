"""Keep committed notebooks clean: no outputs, except the smoke-mode output of checked cells.

    python -m acemad_utils.nbtools strip      # remove every output except those of NBVAL_CHECK_OUTPUT cells
    python -m acemad_utils.nbtools refresh    # re-run every notebook in smoke mode and store only the
                                              # outputs of its NBVAL_CHECK_OUTPUT cells (then nbval compares them)

Why: the notebooks are the paper's artefacts and are committed without outputs, but nbval should still
check the cells that print stable numbers. A cell whose first line is `# NBVAL_CHECK_OUTPUT` prints a
deterministic smoke-mode summary (seeded synthetic population); its stored output is that summary, and
`pytest --nbval-lax` fails when a change moves it. tests/test_notebooks_clean.py enforces the rule.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat

from .paths import ROOT

CHECK = "# NBVAL_CHECK_OUTPUT"


def is_checked(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith(CHECK)


def _clean(cell, outputs=()) -> None:
    cell.outputs = [o for o in outputs if o.get("output_type") in ("stream", "execute_result")
                    and o.get("name", "stdout") == "stdout"]
    for o in cell.outputs:  # no execution counts or timing metadata: diffs show only real changes
        if o.get("output_type") == "execute_result":
            o["metadata"], o["execution_count"] = {}, None
    cell.execution_count = 1 if cell.outputs else None  # nbval ignores reference outputs of "unrun" cells
    cell.metadata.pop("execution", None)
    cell.metadata.pop("papermill", None)


def strip(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            _clean(cell, cell.outputs if is_checked(cell) else ())
    nb.metadata.pop("papermill", None)
    nbformat.write(nb, path)


def refresh(path: Path) -> None:
    """Execute in smoke mode (papermill, temp copy) and keep only the checked cells' outputs."""
    import papermill as pm

    os.environ["ACEMAD_SMOKE"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / path.name
        pm.execute_notebook(str(path), str(out), cwd=str(path.parent), kernel_name="python3", progress_bar=False,
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])  # no TCP warning per notebook
        ran = nbformat.read(out, as_version=4)
    nb = nbformat.read(path, as_version=4)
    by_source = {c.source: c.outputs for c in ran.cells if is_checked(c)}
    for cell in nb.cells:
        if cell.cell_type == "code":
            _clean(cell, by_source.get(cell.source, ()) if is_checked(cell) else ())
    nbformat.write(nb, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=("strip", "refresh"))
    ap.add_argument("notebooks", nargs="*", type=Path)
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for p in paths:
        (strip if args.action == "strip" else refresh)(p)
        print(f"{args.action}: {p.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
