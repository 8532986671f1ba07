"""What a notebook kernel pays before its first cell: the import time of `acemad_utils.notebook`.

    python bench/imports.py                      # this checkout: 7 fresh interpreters, min and median
    python bench/imports.py --ref /work/main     # the same for another checkout, paired in the same run
    python bench/imports.py --quick              # 3 interpreters each

For each checkout: seconds of `python -X importtime -c "import acemad_utils.notebook"` (the total importtime
reports for the top module, min and median over fresh interpreters, so nothing is cached in-process), the same for
`python -c pass` (the interpreter's own start), the heaviest third-party modules it loaded and whether the
openai SDK, tenacity, matplotlib, papermill or the LLM client were among them (a synthetic kernel needs none:
they load on first use). The target is under 0.8 s on a quiet machine. Prints figures only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, machine_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WATCH = ("openai", "tenacity", "matplotlib", "papermill", "acemad_utils.agents.client")


def importtime(checkout: Path, stmt: str) -> tuple[float, dict[str, float]]:
    """(total seconds of the top-level import, {module: cumulative seconds}) from one fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", stmt], cwd=checkout, env=env, capture_output=True, text=True
    ).stderr
    mods: dict[str, float] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cum, name = line.split("|")
        try:
            mods[name.strip()] = int(cum) / 1e6
        except ValueError:  # the header line
            continue
    total = sum(v for k, v in mods.items() if "." not in k and not k.startswith(" "))  # top-level packages
    top = next((v for k, v in mods.items() if k == stmt.removeprefix("import ")), total)
    return top, mods


def measure(checkout: Path, runs: int) -> None:
    times, mods = [], {}
    for _ in range(runs):
        t, mods = importtime(checkout, "import acemad_utils.notebook")
        times.append(t)
    bare = []
    for _ in range(runs):
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        t0 = os.times()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        t1 = os.times()
        bare.append(t1.elapsed - t0.elapsed)
    heavy = sorted(((v, k) for k, v in mods.items() if "." not in k), reverse=True)[:6]
    loaded = [m for m in WATCH if m in mods]
    print(
        f"{checkout}: import acemad_utils.notebook min {min(times):.3f} s, median {statistics.median(times):.3f} s "
        f"over {runs} interpreters (python -c pass: {min(bare):.3f} s wall) | {load()}"
    )
    print("  heaviest top-level packages (cumulative s): " + ", ".join(f"{k} {v:.3f}" for v, k in heavy))
    print(f"  loaded of {', '.join(WATCH)}: {', '.join(loaded) or 'none'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", type=Path, help="another checkout to measure in the same run (e.g. /work/main)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 interpreters per checkout")
    a = ap.parse_args(argv)
    runs = 3 if a.quick else a.runs
    print("== import time of acemad_utils.notebook (a notebook kernel's first line) ==")
    print(machine_line())
    for checkout in ([a.ref] if a.ref else []) + [ROOT]:
        measure(checkout.resolve(), runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
