"""Keep committed notebooks clean: no outputs, except the smoke-mode output of checked cells.

    python -m acemad_utils.reproduce.nbtools strip      # remove every output except those of NBVAL_CHECK_OUTPUT cells
    python -m acemad_utils.reproduce.nbtools refresh    # re-run every notebook in smoke mode and store only the
                                              # SUMMARY: lines of its NBVAL_CHECK_OUTPUT cells (nbval compares them)

Why: the notebooks are the paper's artefacts and are committed without outputs, but nbval should still
check the cells that print stable numbers. A cell whose first line is `# NBVAL_CHECK_OUTPUT` prints a
deterministic smoke-mode summary (seeded synthetic population). The rule: the stored output of a checked
cell is exactly its stdout lines that start with `SUMMARY:` (one stream; any other line, stderr, or a
displayed value is dropped), and every other cell stores nothing. `pytest --nbval-lax` fails when a change
moves a summary; tests/test_notebooks_clean.py enforces the rule.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat
import papermill as pm

from acemad_utils.data.paths import ROOT

CHECK = "# NBVAL_CHECK_OUTPUT"

# The kernel's own log stays out of a run's output: ipykernel warns under every notebook that its loopback TCP
# sockets are unencrypted, and jupyter_client interrupts (SIGINT) a kernel before shutting it down, which a
# kernel still busy logs as "ERROR | KeyboardInterrupt caught in kernel." (seen on a loaded machine). A cell's
# error is not a log line: papermill raises it, so failures still show.
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]
SUMMARY = "SUMMARY:"


def is_checked(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith(CHECK)


def summary_lines(outputs) -> list[str]:
    """The stdout lines of `outputs` that start with SUMMARY: (each with its newline, if it had one)."""
    return [
        line
        for o in outputs
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
        for line in "".join(o.get("text", "")).splitlines(keepends=True)
        if line.startswith(SUMMARY)
    ]


def stored_outputs(cell, outputs=None) -> list:
    """What a committed cell keeps of `outputs` (default: its own): a checked cell its SUMMARY: lines as one
    stdout stream, any other cell nothing."""
    lines = summary_lines(cell.outputs if outputs is None else outputs) if is_checked(cell) else []
    return [nbformat.v4.new_output("stream", name="stdout", text="".join(lines))] if lines else []


def clean_cell(cell, outputs=()) -> None:
    cell.outputs = list(outputs)
    cell.execution_count = 1 if cell.outputs else None  # nbval ignores reference outputs of "unrun" cells
    cell.metadata.pop("execution", None)
    cell.metadata.pop("papermill", None)


def strip(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            clean_cell(cell, stored_outputs(cell))
    nb.metadata.pop("papermill", None)
    nbformat.write(nb, path)


def refresh(path: Path) -> None:
    """Execute in smoke mode (papermill, temp copy) and keep only the checked cells' SUMMARY: lines."""

    os.environ["ACEMAD_SMOKE"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / path.name
        pm.execute_notebook(
            str(path),
            str(out),
            cwd=str(path.parent),
            kernel_name="python3",
            progress_bar=False,
            extra_arguments=KERNEL_ARGS,
        )
        ran = nbformat.read(out, as_version=4)
    nb = nbformat.read(path, as_version=4)
    by_source = {c.source: c.outputs for c in ran.cells if is_checked(c)}
    for cell in nb.cells:
        if cell.cell_type == "code":
            clean_cell(cell, stored_outputs(cell, by_source.get(cell.source, [])))
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
