"""data: what is read from disk.

benchmarks   the six benchmarks (and the demo set) as lists of protocol.Question; data_hash
files        reading benchmark files, with errors that name the file and line (DataError)
records      one mapper per benchmark: raw record -> Question
paths        where the repository, data and outputs live; atomic file writes
transcripts  reading a run's transcripts.jsonl[.gz] + meta.json (load_run), for every table and figure

    python -m acemad_utils.data summary     # the benchmark summary (the same as python -m acemad_utils.data.benchmarks)
"""

import importlib

# Imported on first use, not here: `python -m acemad_utils.data.benchmarks summary` imports this package first, and a
# submodule already in sys.modules then makes runpy print a RuntimeWarning the user did not cause.
_LAZY = {
    "DataError": "files",
    "data_hash": "benchmarks",
    "load": "benchmarks",
    "load_demo": "benchmarks",
    "load_run": "transcripts",
    "read_jsonl": "transcripts",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'acemad_utils.data' has no attribute {name!r}")
    return getattr(importlib.import_module(f"acemad_utils.data.{_LAZY[name]}"), name)
