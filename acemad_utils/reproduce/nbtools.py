"""`python -m acemad_utils.reproduce.nbtools store|strip`: the default run's executed notebooks over notebooks/*.ipynb
without what changes between runs (refusing one that failed, wrote stderr or shows a path), or every output dropped."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import nbformat

from acemad_utils.data.paths import ROOT
from acemad_utils.experiments import params

EXECUTED = ROOT / "outputs" / "notebooks" / "default"  # never outputs/smoke: the committed outputs are a full run
INJECTED = "injected-parameters"  # papermill's tag (and, here, the cell's fixed id)
VOLATILE_CELL_META = ("papermill", "execution", "collapsed", "scrolled")
VOLATILE_NB_META = ("papermill", "widgets")
INJECTED_HEADER = "# Parameters of the profile (injected by papermill; they differ from the defaults above)"


def code_cells(nb) -> list:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def problems(nb) -> list[str]:
    bad = []
    for i, c in enumerate(code_cells(nb)):
        if not c.get("execution_count"):
            bad.append(f"code cell {i} was not executed")
        for o in c.get("outputs", []):
            data = o.get("data") or {}
            if o.get("output_type") == "error":
                bad.append(f"code cell {i}: error {o.get('ename')}: {o.get('evalue')}")
            elif o.get("output_type") == "stream" and o.get("name") == "stderr":
                bad.append(f"code cell {i}: stderr {''.join(o.get('text', ''))[:120]!r}")
            text = "".join(o.get("text", "")) + "".join("".join(v) for k, v in data.items() if k.startswith("text/"))
            if "PosixPath(" in text:
                bad.append(f"code cell {i} shows a PosixPath")
            if str(ROOT) in text:
                bad.append(f"code cell {i} shows this machine's path {ROOT}")
            if "application/vnd.jupyter.widget-view+json" in data:
                bad.append(f"code cell {i} stores a widget (progress bars must be off: ACEMAD_PROGRESS=0)")
    return bad


def injection_repeats_defaults(nb) -> bool:
    """True when papermill's injected cell sets nothing the parameters cell does not set to the same value."""
    cells = {tag: c.source for c in nb.cells for tag in c.metadata.get("tags", []) if tag in (INJECTED, "parameters")}
    if len(cells) < 2:
        return False
    defaults = {k: v for k, (_, v) in params.assignments(cells["parameters"]).items()}
    return all(k in defaults and defaults[k] == v for k, (_, v) in params.assignments(cells[INJECTED]).items())


@functools.lru_cache(maxsize=1)
def lab_kernelspec() -> dict:
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    return {"display_name": spec.display_name, "language": spec.language, "name": "python3"}


def lean(nb) -> None:
    if injection_repeats_defaults(nb):
        nb.cells = [c for c in nb.cells if INJECTED not in c.metadata.get("tags", [])]
    for key in VOLATILE_NB_META:
        nb.metadata.pop(key, None)
    nb.metadata["kernelspec"] = lab_kernelspec()
    for c in nb.cells:
        for key in VOLATILE_CELL_META:
            c.metadata.pop(key, None)
        if c.cell_type == "code":  # one print can reach the kernel's stream in one chunk or two, by load
            merged: list = []
            for o in c.outputs:
                last = merged[-1] if merged else {}
                if o.output_type == "stream" and last.get("output_type") == "stream" and last["name"] == o.name:
                    last["text"] += o.text
                else:
                    merged.append(o)
            c.outputs = merged
        if INJECTED in c.metadata.get("tags", []):
            c["id"] = INJECTED  # papermill draws a random id on every run
            first, *rest = c.source.split("\n")
            c.source = "\n".join([INJECTED_HEADER, *rest]) if first.strip() == "# Parameters" else c.source


def store(path: Path, executed_dir: Path = EXECUTED) -> list[str]:
    """Write the executed copy of `path` over it, lean; returns what stopped it."""
    ran_path = executed_dir / path.name
    if not ran_path.exists():
        return [f"no executed copy {ran_path}: run `make notebooks` (the full default profile)"]
    ran = nbformat.read(ran_path, as_version=4)

    def sources(nb) -> list:
        return [(c.cell_type, c.source) for c in nb.cells if INJECTED not in c.metadata.get("tags", [])]

    if sources(ran) != sources(nbformat.read(path, as_version=4)):
        return [f"{ran_path} was run from an older version of {path.name}: run `make notebooks` again"]
    if bad := problems(ran):
        return bad
    lean(ran)
    nbformat.write(ran, path)
    return []


def strip(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if INJECTED not in c.metadata.get("tags", [])]
    for c in code_cells(nb):
        c.outputs, c.execution_count = [], None
    lean(nb)
    nbformat.write(nb, path)


def has_outputs(nb) -> bool:
    return any(c.get("outputs") or c.get("execution_count") for c in code_cells(nb))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # the first paragraph: whole sentences
    ap.add_argument("action", choices=("store", "strip"))
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--executed", type=Path, default=EXECUTED, help="where the executed copies are")
    args = ap.parse_intermixed_args(argv)
    failed = 0
    for p in args.notebooks or params.PATHS.values():
        if args.action == "strip":
            strip(p)
            print(f"strip: {p.name}")
            continue
        bad = store(p, args.executed)
        failed += bool(bad)
        print(f"store: {p.name}" + (" NOT STORED:\n    " + "\n    ".join(bad[:10]) if bad else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
