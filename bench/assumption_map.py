"""Where notebook 09's time goes: its assumption map (`run_map`) in process, wall seconds per phase.

    python bench/assumption_map.py            # the map's runs the notebook shows as on disk (a rerun)
    python bench/assumption_map.py --empty    # its map_* runs deleted first, so they are made again (from empty)

Runs notebook 09's package calls with the default profile's parameters in this checkout's outputs/ (notebook 01
must have run: `python -m acemad_utils.reproduce --profile default --only 01_subset_construction`), without a
kernel, and prints the map's wall seconds, then the seconds spent inside each phase (wall clock, not cProfile:
cProfile's per-call cost inflates the Python-heavy phases several times and misranks them): the runs the notebook
shows (`run_with_meta`), the debates (`run_batch` for the written runs, `debate` as arrays for every point),
writing the compressed file (`write_canonical`), encoding record lines; the re-decisions (`stack`,
`stack_debates`, `rescore`, `shuffled_decisions`); each point's tables (`map_row`). The phases nest, so they do
not add up. The 1-minute load is printed first and last. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from acemad_utils.data.paths import outputs  # noqa: E402
from acemad_utils.experiments import assumption_map as AM  # noqa: E402
from acemad_utils.experiments import registry, runner  # noqa: E402
from acemad_utils.experiments.setup import Setup  # noqa: E402
from acemad_utils.report import rescoring  # noqa: E402

BENCHMARKS = ["truthfulqa", "arc_challenge", "bbh", "logiqa", "medqa", "mmlu_pro"]
MAP = dict(BACKEND="sim", BENCHMARKS=BENCHMARKS, SEED=0, ETA=2.0, N_MAX=300)  # the rest: notebook 09's defaults
PHASES = [
    (AM, "run_with_meta"),
    (AM, "debate"),
    (runner, "run_batch"),
    (runner, "write_canonical"),
    (runner, "to_line"),
    (runner, "read_done"),
    (rescoring, "stack"),
    (rescoring, "stack_debates"),
    (rescoring, "rescore"),
    (rescoring, "shuffled_decisions"),
    (AM, "map_row"),
]


def _timed(spent: dict, calls: collections.Counter, module, name: str) -> None:
    """Replace module.name by a wrapper that adds its wall seconds to spent[name]."""
    fn = getattr(module, name)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t0
            calls[name] += 1

    setattr(module, name, wrapper)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--empty", action="store_true", help="delete outputs/runs/default/map_* first (make them again)")
    args = ap.parse_args(argv)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    if args.empty:
        for d in outputs("runs", "default").glob("map_*"):
            shutil.rmtree(d)
    spent: dict = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    for module, name in PHASES:
        _timed(spent, calls, module, name)
    setup = Setup(profile="default", backend="sim", source="synthetic", benchmarks=BENCHMARKS, n_items=600)
    runs, axes = registry.runs("09_assumption_map", MAP), registry.map_axes(MAP)
    t0 = time.perf_counter()
    table = AM.run_map(setup, runs, axes, eta=2.0)
    print(f"run_map: {time.perf_counter() - t0:.1f} s wall, {len(table)} map points, {len(runs)} runs")
    for name in dict.fromkeys(name for _, name in PHASES):
        print(f"  {name:<20} {spent[name]:6.2f} s in {calls[name]} calls")
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
