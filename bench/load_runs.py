"""Reading a profile's runs back: what notebook 08 (and every rerun) pays, parser by parser.

    python bench/load_runs.py                 # the default profile's runs (run `make reproduce` first)
    python bench/load_runs.py --profile local
    python bench/load_runs.py --quick         # one run only (the largest)

For the runs under outputs/runs/<profile>/ (theory runs excluded, as notebook 08 reads them), prints the MB
of lines and the seconds to (a) decompress them (data.transcripts.gunzip), (b) parse every line with json.loads,
with the garbage collector on as Python leaves it, (c) the same with the collector paused, (d) msgspec.json.decode
with the collector paused (what data.transcripts.parse_line does), and (e) load_run itself for every run (decompress,
parse, pick the latest record per key; the collector paused and the records frozen, data.transcripts.gc_paused).
Each of (b) to (d) starts from an empty heap of records but keeps what it parsed until the end of its pass,
as a notebook does. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from acemad_utils.data.paths import outputs  # noqa: E402
from acemad_utils.data.transcripts import gunzip, load_run, transcript_files  # noqa: E402


def _lines(runs: list[Path]) -> list[list[bytes]]:
    out = []
    for d in runs:
        raw = b"".join(
            gunzip(p) if p.name.endswith(".gz") else p.read_bytes() for p in transcript_files(d / "transcripts.jsonl")
        )
        out.append([line for line in raw.split(b"\n") if line.strip()])
    return out


def _timed(label: str, fn, *, collector: bool) -> None:
    was = gc.isenabled()
    (gc.enable if collector else gc.disable)()
    t0 = time.perf_counter()
    kept = fn()
    secs = time.perf_counter() - t0
    (gc.enable if was else gc.disable)()
    print(f"  {label:<58} {secs:6.2f} s")
    del kept
    gc.collect()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="default")
    ap.add_argument("--quick", action="store_true", help="only the largest run")
    args = ap.parse_args()
    base = outputs("runs", args.profile)
    runs = [d for d in sorted(base.iterdir()) if (d / "meta.json").is_file() and not d.name.startswith("theory")]
    if not runs:
        sys.exit(f"no runs under {base}: run `make reproduce` first")
    if args.quick:
        runs = [max(runs, key=lambda d: sum(p.stat().st_size for p in d.iterdir()))]
    t0 = time.perf_counter()
    lines = _lines(runs)
    secs = time.perf_counter() - t0
    n = sum(map(len, lines))
    mb = sum(len(x) for part in lines for x in part) / 1e6
    print(f"{len(runs)} run(s) of {args.profile}: {n} records, {mb:.0f} MB of lines")
    print(f"  {'(a) decompress (gunzip: ISA-L)':<58} {secs:6.2f} s")
    _timed("(b) json.loads, collector on", lambda: [[json.loads(x) for x in p] for p in lines], collector=True)
    _timed("(c) json.loads, collector paused", lambda: [[json.loads(x) for x in p] for p in lines], collector=False)
    dec = msgspec.json.decode
    _timed("(d) msgspec.json.decode, collector paused", lambda: [[dec(x) for x in p] for p in lines], collector=False)
    names = [f"{args.profile}/{d.name}" for d in runs]
    _timed("(e) load_run of every run (decompress + (d) + latest per key)", lambda: [load_run(x) for x in names],
           collector=True)  # fmt: skip


if __name__ == "__main__":
    main()
