"""data: what is read from disk: benchmarks (Questions, data_hash, DataError naming file and line), own question
files, paths, transcripts (load_run). `python -m acemad_utils.data summary` (not `-m acemad_utils.data.benchmarks`:
runpy would warn that this package imported it first)."""

from acemad_utils.data.benchmarks import DataError, data_hash, load, load_demo
from acemad_utils.data.transcripts import load_run, read_jsonl

__all__ = ["DataError", "data_hash", "load", "load_demo", "load_run", "read_jsonl"]
