"""The files of a run: transcripts.jsonl and meta.json, written so that a run can always be resumed.

    from acemad_utils.data.transcripts import read_jsonl
    from acemad_utils.experiments.run_files import summarize
    records = read_jsonl(Path("outputs/runs/theory_martingale/transcripts.jsonl"))
    summarize(records)     # {"questions", "expected", "records", "ok", "failed", "calls", ..., "errors"}

Every line is written whole and flushed to the OS before the next (`Appender`), so a killed process loses
nothing it saved; the file is fsynced at most once a second and when it is closed, so a synthetic run, which
saves thousands of records a second, does not wait on the disk for each one (a power cut can lose the last
second, which the resume recomputes or, for a model, reads back from the response cache). A torn last line
left by a crash is detected and dropped, never parsed as data (`read_jsonl`), and cut off before new lines are
appended (`cut_torn_tail`), so a new record is never glued to it. A run is resumed only into a directory whose
saved run asked the same questions of the same agents (`check_resumable`). When a run is complete its records
are written once more, whole and gzip-compressed, in canonical order (`write_canonical`:
transcripts.jsonl.gz; the appended plain file goes), so a rerun gives the same bytes whatever the thread
timing was; readers take both files (data/transcripts.py). The run loop itself is runner.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import struct
import subprocess
import time
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from acemad_utils.agents.redact import redact, strip_url_secrets
from acemad_utils.data.paths import ROOT, atomic_write
from acemad_utils.data.transcripts import COMPRESSED, SALVAGED, commitments, gc_paused, read_meta, record_lines
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.records import base_record
from acemad_utils.protocol.schema import RECORD_USAGE_KEYS, Population, Question


def git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cut_torn_tail(path: Path) -> None:
    """A file that does not end with a newline was cut by a crash mid-write. A tail that is a whole record
    (only the newline was lost) gets its newline; anything else is a torn line and is cut off, so appended
    records start on a line of their own and the torn bytes are never read as a record."""
    if not path.exists():
        return
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        keep = 0
        pos = size
        while pos > 0:  # find the last newline, reading backwards in blocks
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            i = f.read(step).rfind(b"\n")
            if i >= 0:
                keep = pos + i + 1
                break
        f.seek(keep)
        tail = f.read()
        try:
            rec = json.loads(tail)
        except (ValueError, RecursionError):
            rec = None
        if isinstance(rec, dict) and is_record(rec):
            f.seek(size)
            f.write(b"\n")
        else:
            warnings.warn(
                f"{path}: dropped a torn last line ({size - keep} bytes) left by an interrupted run", stacklevel=2
            )
            f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())


def is_record(rec: dict) -> bool:
    return "question_id" in rec and "config_hash" in rec and "repeat" in rec and "status" in rec


def record_key(rec: dict) -> tuple:
    return (rec["question_id"], rec["config_hash"], rec["repeat"])


FSYNC_EVERY_S = 1.0
COMPRESS_LEVEL = 4  # of transcripts.jsonl.gz (write_canonical)


class Appender:
    """Appends whole lines to a run's plain transcript file: each one flushed to the OS at once (a killed
    process loses nothing written), fsynced at most every FSYNC_EVERY_S seconds and on close (why: module
    docstring)."""

    def __init__(self, path: Path):
        self.f = open(path, "a", encoding="utf-8")
        self.synced = time.monotonic()

    def write(self, line: str) -> None:
        self.write_many([line])

    def write_many(self, lines) -> None:
        """Whole lines, flushed together (a batch of records: one system call, not one per line)."""
        self.f.write("".join(line + "\n" for line in lines))
        self.f.flush()
        if time.monotonic() - self.synced >= FSYNC_EVERY_S:
            os.fsync(self.f.fileno())
            self.synced = time.monotonic()

    def close(self) -> None:
        if self.f.tell():
            os.fsync(self.f.fileno())
        self.f.close()


def read_done(path: Path) -> dict[tuple, tuple[dict, str]]:
    """The ok records already saved for a run (compressed file, then appended lines; the latest line of a key
    wins): {record_key: (record, its line)}. A damaged compressed file gives what can be read of it (one
    warning line): the run recomputes the rest and writes the file whole again when it completes."""
    with gc_paused():
        return {
            record_key(rec): (rec, line.decode("utf-8"))
            for rec, line in record_lines(path, salvage=True)
            if is_record(rec) and rec.get("status") == "ok"
        }


def remove_stale_temp_files(d: Path) -> list[Path]:
    """Remove the temp files (atomic_write's '<name>.<random>.tmp') a killed process left in run folder `d`
    (a SIGKILL during compression left a 2 MB transcripts.jsonl.gz.*.tmp for good). Only call it while holding
    the run's lock: then no other process is writing one."""
    gone = [p for p in d.glob("*.tmp") if p.is_file() and p.name.startswith((COMPRESSED + ".", "meta.json."))]
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


def failed_record(q: Question, cfg: DebateConfig, population: Population, repeat: int, err: BaseException) -> dict:
    return {
        **base_record(q, cfg, population, repeat),
        "status": "failed",
        "error": redact(f"{type(err).__name__}: {err}")[:500],  # a server may echo the key in its message
        "final": {
            "answer": None,
            "correct": None if q.answer is None else False,
            "oracle_any_agent_correct": False,
            "tie": False,
        },
        "usage": dict.fromkeys(RECORD_USAGE_KEYS, 0),
    }


def with_usage_keys(rec: dict) -> dict:
    usage = rec.setdefault("usage", {})
    for k in RECORD_USAGE_KEYS:
        usage.setdefault(k, 0)
    return rec


def usage_delta(after: dict, before: dict) -> dict:
    out: dict[str, object] = {}
    for k, v in after.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        b = before.get(k, 0)
        out[k] = v - (b if isinstance(b, (int, float)) else 0)
    if "cost_usd" in after:
        a, b = after["cost_usd"], before.get("cost_usd")
        out["cost_usd"] = None if a is None or b is None else round(a - b, 6)
    return out


#: A run where more than this share of the commitments did not parse (after the repair call) is no result: the
#: reproduce command and `python -m acemad_utils run` exit 1 and say so (once: replies in Spanish, "NaN"
#: beliefs, wrong letters gave 369 parse failures, "AceMAD 0.0% vs 0.0%" and exit status 0). Below it, every table
#: cell counts them beside n.
PARSE_FAILURE_LIMIT = 0.5


def summarize(records: Sequence[dict], expected: Optional[int] = None) -> dict:
    """Run-level counts from transcript records: questions (distinct), records (expected = questions x
    methods x repeats, present, missing), ok, failed (with their errors), calls, network calls, retries,
    cache hits, repairs, parse failures, tokens; `correct` sums final.correct over ok records (a failed
    record is never correct). Usage of questions that failed is not in any record (see the run's
    `session` counters)."""
    out: dict = {
        "questions": len({r["question_id"] for r in records}),
        "expected": len(records) if expected is None else expected,
        "records": len(records),
        "ok": sum(r.get("status") == "ok" for r in records),
        "failed": sum(r.get("status") == "failed" for r in records),
    }
    out["missing"] = out["expected"] - out["records"]
    usages = [r.get("usage", {}) for r in records]  # looked up once, not once per key (every rerun summarizes)
    for k in RECORD_USAGE_KEYS:
        out[k] = sum(int(u.get(k, 0) or 0) for u in usages)
    out["commitments"] = sum(commitments(r) for r in records if r.get("status") == "ok")  # parse_failures' base
    out["correct"] = float(
        sum(
            float(r["final"]["correct"])
            for r in records
            if r.get("status") == "ok" and r.get("final") and r["final"].get("correct") is not None
        )
    )
    out["errors"] = [
        {
            "question_id": r["question_id"],
            "method": r.get("method"),
            "repeat": r.get("repeat"),
            "error": r.get("error", ""),
        }
        for r in records
        if r.get("status") == "failed"
    ][:50]
    return out


# Description fields that do not change what agents answer: how an endpoint is reached, not who answers.
_OPERATIONAL = {"endpoints", "structured_output", "structured_output_detection", "max_concurrency", "max_attempts"}


def identity(desc) -> str:
    """The part of a population's description that defines its answers (models, seed, sampling, prompts)."""
    if not isinstance(desc, dict):
        return str(desc)
    keep = {k: v for k, v in desc.items() if k not in _OPERATIONAL}
    keep.setdefault("calls", "two")  # runs saved before the single-call mode existed used two calls
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


def who(meta: dict, field: str, ident: str) -> str:
    """A readable identity for the refusal message: who answered (models, seed) or which questions."""
    if field == "data_hash":
        return f"{meta.get('n_questions')} questions of {meta.get('benchmarks')} (data hash {ident})"
    pop = meta.get("population")
    if not isinstance(pop, dict):
        return f"{pop} ({ident})"
    models = pop.get("models") or [pop.get("model", pop.get("name"))]
    return f"{', '.join(map(str, models))} with seed {pop.get('seed')} (identity {ident})"


def order_keys(questions, configs, repeats) -> list[tuple]:
    return [(q.id, c.hash, r) for c in configs for q in questions for r in range(repeats)]


def write_meta(path: Path, meta: dict) -> None:
    """meta.json, whole; no URL in it keeps its credentials (an AgentSpec's base_url set by hand in a notebook
    with user:password@ or ?api_key=: the config hash is the config's, only the stored text is cleaned)."""
    atomic_write(path, strip_url_secrets(json.dumps(meta, indent=2, sort_keys=True, default=str)) + "\n")


def check_resumable(d: Path, meta: dict) -> None:
    """Refuse to resume into `d` when its saved run asked other questions or other agents (ValueError)."""
    meta_path = d / "meta.json"
    if not meta_path.exists():
        return
    old = read_meta(meta_path, need=("methods", "data_hash", "population"))  # DamagedFile: delete it alone
    for field, a, b in (
        ("data_hash", old.get("data_hash"), meta["data_hash"]),
        ("population", identity(old.get("population")), identity(meta["population"])),
    ):
        if a != b:
            raise ValueError(
                f"{d} holds a run with a different {field}: saved {who(old, field, str(a))}, this run "
                f"{who(meta, field, b)}; resuming would mix results. Delete {d} or choose another experiment name."
            )


def write_canonical(path: Path, done: dict, keys: list[tuple]) -> list[dict]:
    """Write the run's records, whole, to transcripts.jsonl.gz in canonical order and remove the plain file
    `path` that sessions appended to: the records of `keys` (configs as given, questions as given, repeats
    ascending) first, then every other ok record of the file (configs that are not part of this run: nothing is
    lost; load_run skips them). `done` maps record keys to (record, line). Nothing is written when the
    compressed file already holds exactly these lines (a rerun with everything on disk). Returns this run's
    records, in order."""
    order = {k: i for i, k in enumerate(keys)}
    ours = sorted((k for k in done if k in order), key=order.__getitem__)
    final = ours + [k for k in done if k not in order]  # `done` holds every ok record of the file
    gz = path.with_name(COMPRESSED)
    if path.exists() or not gz.exists() or list(done) != final or gz.resolve() in SALVAGED:
        # mtime=0: the same records give the same bytes. Level 4, not 1 or 6: on notebook 06's run (110 MB of lines)
        # level 1 gives 18.9 MB in 0.36 s, level 4 16.6 MB in 0.64 s, level 6 15.5 MB in 1.15 s (bench/README.md)
        atomic_write(gz, _gzipped(done[k][1] for k in final))
        path.unlink(missing_ok=True)
        SALVAGED.discard(gz.resolve())
    return [done[k][0] for k in ours]


def _gzipped(lines, chunk: int = 1 << 12) -> bytes:
    """gzip.compress(all lines + newlines, COMPRESS_LEVEL, mtime=0), the same bytes (its header, raw deflate and
    trailer), compressed a few thousand lines at a time: the file's text is never one string in memory (110 MB
    for notebook 06's run)."""
    deflate = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -15)
    parts, crc, size = [gzip.compress(b"", compresslevel=COMPRESS_LEVEL, mtime=0)[:10]], 0, 0
    batch: list[str] = []
    for n, line in enumerate(lines, 1):
        batch.append(line)
        if n % chunk == 0:
            data = ("\n".join(batch) + "\n").encode("utf-8")
            parts.append(deflate.compress(data))
            crc, size = zlib.crc32(data, crc), size + len(data)
            batch.clear()
    data = ("\n".join(batch) + "\n").encode("utf-8") if batch else b""
    parts += [deflate.compress(data), deflate.flush()]
    crc, size = zlib.crc32(data, crc), size + len(data)
    return b"".join(parts) + struct.pack("<LL", crc, size & 0xFFFFFFFF)
