"""The committed notebooks carry the default profile's executed outputs; this module writes and checks them.

    python -m acemad_utils.reproduce.nbtools store   # outputs/notebooks/default/*.ipynb (a full default run, what
                                                     # `make notebooks` just executed) -> notebooks/*.ipynb
    python -m acemad_utils.reproduce.nbtools strip   # drop every output (e.g. before reviewing a source diff)

Why: a reader browsing the repository should see every table, figure, debate view and "What we see" paragraph
without running anything, and nbval (strict, `make nbval`) re-executes the committed notebooks and compares
every output with the stored one. `store` keeps what a reader needs and nothing that changes from run to run:
cell timings, papermill's run metadata (paths, durations, the environment), execution timestamps and widget
state go. Papermill's injected-parameters cell goes too when it only repeats the notebook's own parameters cell
(the default profile: two look-alike "# Parameters" cells otherwise); when it changes a value it stays, under a
fixed id and a first line saying so. The kernelspec is written as JupyterLab writes it (the installed python3
kernel's display name, "Python 3 (ipykernel)"), so opening a committed notebook in `make lab` and autosaving
changes nothing. It refuses a notebook whose run failed, printed to stderr, left a cell unexecuted, shows a
PosixPath or this machine's repository path, or whose cells no longer match the source notebook (rerun `make
notebooks`).
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from pathlib import Path

import nbformat

from acemad_utils.data.paths import ROOT

NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "outputs" / "notebooks" / "default"  # never outputs/smoke: the committed outputs are a full run
INJECTED = "injected-parameters"  # papermill's tag (and, here, the cell's fixed id)
VOLATILE_CELL_META = ("papermill", "execution", "collapsed", "scrolled")
VOLATILE_NB_META = ("papermill", "widgets")
INJECTED_HEADER = "# Parameters of the profile (injected by papermill; they differ from the defaults above)"


def code_cells(nb) -> list:
    """The code cells of a notebook, read by nbformat or as plain JSON (dict access works for both)."""
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def problems(nb) -> list[str]:
    """Why these outputs must not be committed (empty when they may): errors, stderr, unexecuted code cells,
    a PosixPath or an absolute path of this checkout shown, widgets (dead without their kernel)."""
    bad = []
    for i, c in enumerate(code_cells(nb)):
        if not c.get("execution_count"):
            bad.append(f"code cell {i} was not executed")
        for o in c.get("outputs", []):
            kind = o.get("output_type")
            if kind == "error":
                bad.append(f"code cell {i}: error {o.get('ename')}: {o.get('evalue')}")
            elif kind == "stream" and o.get("name") == "stderr":
                bad.append(f"code cell {i}: stderr {''.join(o.get('text', ''))[:120]!r}")
            text = "".join(o.get("text", "")) + "".join(
                v if isinstance(v, str) else "".join(v)
                for k, v in (o.get("data") or {}).items()
                if k.startswith("text/")
            )
            if "PosixPath(" in text:
                bad.append(f"code cell {i} shows a PosixPath")
            if str(ROOT) in text:
                bad.append(f"code cell {i} shows this machine's path {ROOT}")
            if "application/vnd.jupyter.widget-view+json" in (o.get("data") or {}):
                bad.append(f"code cell {i} stores a widget (progress bars must be off: ACEMAD_PROGRESS=0)")
    return bad


def _assigned(source: str) -> dict:
    """name -> literal value of the top-level `NAME = literal` lines of a parameters cell (others are skipped)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def _tagged(nb, tag: str) -> list:
    return [c for c in nb.cells if tag in c.metadata.get("tags", [])]


def injection_repeats_defaults(nb) -> bool:
    """True when papermill's injected cell sets nothing the notebook's parameters cell does not already set to
    the same value (then the outputs were computed with the notebook's own defaults)."""
    injected, params = _tagged(nb, INJECTED), _tagged(nb, "parameters")
    if not injected or not params:
        return False
    defaults = _assigned(params[0].source)
    return all(k in defaults and defaults[k] == v for k, v in _assigned(injected[0].source).items())


@functools.lru_cache(maxsize=1)
def lab_kernelspec() -> dict:
    """The kernelspec metadata JupyterLab writes on save: the installed python3 kernel's display name."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    return {"display_name": spec.display_name, "language": spec.language, "name": "python3"}


def lean(nb) -> None:
    """Drop what changes from run to run (timings, papermill's record of paths and environment, widget state),
    papermill's injected cell when it repeats the defaults, and write the kernelspec as JupyterLab does."""
    if injection_repeats_defaults(nb):
        nb.cells = [c for c in nb.cells if INJECTED not in c.metadata.get("tags", [])]
    for key in VOLATILE_NB_META:
        nb.metadata.pop(key, None)
    nb.metadata["kernelspec"] = lab_kernelspec()
    for c in nb.cells:
        for key in VOLATILE_CELL_META:
            c.metadata.pop(key, None)
        if INJECTED in c.metadata.get("tags", []):
            c["id"] = INJECTED  # papermill draws a random id on every run
            lines = c.source.split("\n")
            if lines and lines[0].strip() == "# Parameters":
                c.source = "\n".join([INJECTED_HEADER, *lines[1:]])


def sources(nb) -> list[tuple[str, str]]:
    """The notebook's cells as (type, source), papermill's injected cell left out."""
    return [(c.cell_type, c.source) for c in nb.cells if INJECTED not in c.metadata.get("tags", [])]


def store(path: Path, executed_dir: Path = EXECUTED) -> list[str]:
    """Write the executed copy of `path` (from `executed_dir`) over it, lean; returns the problems that stopped it."""
    ran_path = executed_dir / path.name
    if not ran_path.exists():
        return [f"no executed copy {ran_path}: run `make notebooks` (the full default profile)"]
    ran = nbformat.read(ran_path, as_version=4)
    if sources(ran) != sources(nbformat.read(path, as_version=4)):
        return [f"{ran_path} was run from an older version of {path.name}: run `make notebooks` again"]
    bad = problems(ran)
    if bad:
        return bad
    lean(ran)
    nbformat.write(ran, path)
    return []


def strip(path: Path) -> None:
    """Every output and execution count removed (papermill's injected cell, if any, removed too)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if INJECTED not in c.metadata.get("tags", [])]
    for c in code_cells(nb):
        c.outputs, c.execution_count = [], None
    lean(nb)
    nbformat.write(nb, path)


def has_outputs(nb) -> bool:
    return any(c.get("outputs") or c.get("execution_count") for c in code_cells(nb))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=("store", "strip"))
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument(
        "--executed",
        type=Path,
        default=EXECUTED,
        help="where the executed copies are (default outputs/notebooks/default, a full run; tests store a smoke run)",
    )
    args = ap.parse_intermixed_args(argv)  # options before or after the notebooks
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    failed = 0
    for p in paths:
        if args.action == "strip":
            strip(p)
            print(f"strip: {p.name}")
            continue
        bad = store(p, args.executed)
        failed += bool(bad)
        print(f"store: {p.name}" + ("" if not bad else " NOT STORED:\n    " + "\n    ".join(bad[:10])))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
