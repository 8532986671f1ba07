"""Where the default profile's time goes: cProfile over what notebooks 06_scaling and 00_theory do.

    python bench/profile_notebooks.py             # 06 (N_MAX 200) and 00 (400 items), default parameters
    python bench/profile_notebooks.py --quick     # 60 items / 20 questions per benchmark (no subsets saved yet)
    python bench/profile_notebooks.py --part 06   # one of them
    python bench/profile_notebooks.py --top 40    # more rows

Runs the notebooks' package calls in process (no kernel, no papermill), the same calls with the default
profile's parameters, into a temporary outputs/ folder (ACEMAD_OUTPUTS is not a thing: run_dir is
redirected), and prints cProfile's top functions by total (own) time and by cumulative time for each part:
06's `Setup.run` of the scaling experiment (subsets built first, outside the profile, as notebook 01 does),
then 00's `theory.run_all` and the four tables it draws. Prints figures; asserts nothing about time.
The questions are answered in this process (the runner has no worker processes), which cProfile sees.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from acemad_utils.data import transcripts  # noqa: E402
from acemad_utils.experiments import registry as R  # noqa: E402
from acemad_utils.experiments import runner, theory  # noqa: E402
from acemad_utils.experiments.setup import Setup  # noqa: E402


def _profiled(label: str, fn, top: int) -> None:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    fn()
    prof.disable()
    print(f"\n=== {label}: {time.perf_counter() - t0:.1f} s wall (under cProfile) ===")
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
        lines = buf.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print(f"--- by {key} ---")
        print("\n".join(lines[start : start + top + 1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--part", choices=("06", "00", "both"), default="both", help="which notebook to profile")
    args = ap.parse_args()
    n_items, n_max, theory_items = (60, 20, 60) if args.quick else (600, 200, 400)
    tmp = Path(tempfile.mkdtemp(prefix="acemad-prof-"))
    # every run folder under the temp dir: run_dir is looked up by the runner and by load_run
    redirect = lambda name: (tmp / name).mkdir(parents=True, exist_ok=True) or tmp / name
    transcripts.run_dir = runner.run_dir = redirect
    theory.load_run = transcripts.load_run
    S = Setup(profile="default", backend="sim", source="synthetic", n_items=n_items)
    for b in S.benchmarks:  # notebook 01's work, not profiled
        S.subset(b, n_max)
    X = R.scaling([1, 2, 3, 5, 7, 10, 12, 15], 0)
    if args.part != "00":
        _profiled("06_scaling: S.run(scaling)", lambda: S.run(X.name, X.configs, n_max), args.top)

    def theory_nb():
        theory.run_all(n_items=theory_items, seed=0, rounds=6, progress=False)
        theory.martingale()
        theory.score_separation()
        theory.submartingale()
        theory.phase_table()

    if args.part != "06":
        _profiled("00_theory: run_all + tables", theory_nb, args.top)


if __name__ == "__main__":
    main()
