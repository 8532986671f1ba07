"""data: what is read from disk.

benchmarks   the six benchmarks (and the demo set) as lists of protocol.Question; data_hash
files        reading benchmark files, with errors that name the file and line (DataError)
records      one mapper per benchmark: raw record -> Question
paths        where the repository, data and outputs live; atomic file writes
transcripts  reading a run's transcripts.jsonl[.gz] + meta.json (load_run), for every table and figure

    python -m acemad_utils.data summary     # the benchmark summary (data/__main__.py). Not `-m acemad_utils.data.
                                            # benchmarks`: this package imports that module first, and runpy then
                                            # prints a RuntimeWarning the user did not cause
"""

from acemad_utils.data.benchmarks import data_hash, load, load_demo
from acemad_utils.data.files import DataError
from acemad_utils.data.transcripts import load_run, read_jsonl

__all__ = ["DataError", "data_hash", "load", "load_demo", "load_run", "read_jsonl"]
