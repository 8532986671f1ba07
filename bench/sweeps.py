"""What halving the default profile's CPU would take: the two assumption sweeps at their size and at half, and the
fixed cost of a notebook kernel.

    python bench/sweeps.py            # 08's grid at GRID_N_MAX 50 and 25, 09's map at N_MAX 300 and 150
    python bench/sweeps.py --quick    # 10 and 5, 40 and 20 (seconds)

Reads the default profile's runs in this checkout's outputs/ (like bench/assumption_map.py: run `make reproduce`
first; map subsets it lacks are built under data/subsets/). Prints, per size, the CPU seconds of the sweep in
process (`time.process_time`) and what the smaller size costs the reader: for the grid, how many ledger rows' "decided
by" text changes and how many rows change verdict somewhere; for the map, the mean width of its gains' 95% CIs. Then
one notebook kernel that only imports (papermill, a kernel, `import acemad_utils.notebook` and pyplot): the CPU of
the driver and of the kernel process, a floor every one of the ten notebooks pays. The 1-minute load first and last.
Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
import numpy as np  # noqa: E402

from acemad_utils.experiments import assumption_map as AM  # noqa: E402
from acemad_utils.experiments import registry  # noqa: E402
from acemad_utils.experiments.setup import Setup  # noqa: E402
from acemad_utils.notebook import claims, profile_runs  # noqa: E402
from acemad_utils.reproduce.cli import KERNEL_ARGS  # noqa: E402

BENCHMARKS = ["truthfulqa", "arc_challenge", "bbh", "logiqa", "medqa", "mmlu_pro"]


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def grid(setup: Setup, sizes: list[int]) -> None:
    runs = profile_runs("default", exclude=("theory", "map_"), keep=claims.lean)  # notebook 08's own read
    ledger, said = claims.ledger(runs, seed=0), {}
    for n in sizes:
        t = time.process_time()
        points = AM.ledger_grid(setup, n_max=n, seed=0)
        cpu = time.process_time() - t
        said[n] = claims.deciding(ledger, points, runs)[claims.DECIDED_BY]
        flips = int(said[n].str.contains(" elsewhere (", regex=False).sum())
        print(
            f"08 grid, GRID_N_MAX={n}: {cpu:.1f} CPU s ({len(points)} ledgers); {flips} of {len(ledger)} rows "
            "change verdict somewhere"
        )
    first, *rest = sizes
    for n in rest:
        differ = int((said[n] != said[first]).sum())
        print(f"  'decided by' differs at {n} from {first}: {differ} of {len(ledger)} rows")


def map_(setup: Setup, sizes: list[int]) -> None:
    for n in sizes:
        params = dict(BACKEND="sim", BENCHMARKS=BENCHMARKS, SEED=0, ETA=2.0, N_MAX=n)
        runs, axes = registry.runs("09_assumption_map", params), registry.map_axes(params)
        t = time.process_time()
        table = AM.run_map(setup, runs, axes, eta=2.0)
        cpu = time.process_time() - t
        widths = [(table[c.replace("_lo", "_hi")] - table[c]).mean() for c in table.columns if str(c).endswith("_lo")]
        print(
            f"09 map, N_MAX={n}: {cpu:.1f} CPU s ({len(table)} points); mean 95% CI width of its gains "
            f"{np.nanmean(widths):.2f} points"
        )


def kernel_floor() -> None:
    import papermill

    cell = nbformat.v4.new_code_cell("import acemad_utils.notebook\nimport matplotlib.pyplot")
    nb = nbformat.v4.new_notebook(cells=[cell])
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "floor.ipynb")
        nbformat.write(nb, src)
        own, kids, t = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
        papermill.execute_notebook(str(src), str(Path(tmp, "out.ipynb")), cwd=str(ROOT), kernel_name="python3",
                                   progress_bar=False, log_output=False, extra_arguments=KERNEL_ARGS)  # fmt: skip
        own, kids = _cpu(resource.RUSAGE_SELF) - own, _cpu(resource.RUSAGE_CHILDREN) - kids
    print(
        f"one kernel that only imports: driver {own:.1f} CPU s, kernel {kids:.1f} CPU s, "
        f"{time.perf_counter() - t:.1f} s wall; x10 notebooks: {10 * (own + kids):.0f} CPU s"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="grid at 10 and 5, map at 40 and 20")
    args = ap.parse_args(argv)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    setup = Setup(profile="default", backend="sim", source="synthetic", benchmarks=BENCHMARKS, n_items=600)
    grid(setup, [10, 5] if args.quick else [50, 25])
    map_(setup, [40, 20] if args.quick else [300, 150])
    kernel_floor()
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
