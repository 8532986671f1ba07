"""data: what is read from disk: benchmarks (Questions, data_hash, DataError naming file and line), own question
files, paths, transcripts (load_run)."""

from acemad_utils.data.benchmarks import DataError, data_hash, load, load_demo
from acemad_utils.data.transcripts import load_run, read_jsonl

__all__ = ["DataError", "data_hash", "load", "load_demo", "load_run", "read_jsonl"]
