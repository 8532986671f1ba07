"""Notebook 08's work (read a profile's runs, build the claims ledger) and its peak memory, lean or whole.

    python bench/ledger_memory.py                # the ledger as notebook 08 builds it: records without rounds
    python bench/ledger_memory.py --whole        # every record whole, as notebook 08 once read them
    /usr/bin/time -v python bench/ledger_memory.py   # the process's "Maximum resident set size" too

Needs the profile's runs (notebooks 01-07 run first). Prints the number of records read, the ledger's counts,
the seconds and the process's peak RSS (resource.getrusage; Linux reports KiB). Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from acemad_utils.data.transcripts import profile_runs  # noqa: E402
from acemad_utils.report import claims as C  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default")
    ap.add_argument("--whole", action="store_true", help="keep every record whole (the earlier notebook 08)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    runs = profile_runs(args.profile, exclude=("theory",), keep=None if args.whole else C.lean)
    t1 = time.perf_counter()
    ledger = C.ledger(runs)
    t2 = time.perf_counter()
    synthetic, model = C.source(runs)
    n = sum(len(r) for _, r in runs.values())
    print(f"{'whole' if args.whole else 'lean'} records: {len(runs)} runs, {n} records read in {t1 - t0:.1f} s")
    print(f"ledger: {len(ledger)} rows in {t2 - t1:.1f} s; {ledger.verdict.map(C.category).value_counts().to_dict()}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
