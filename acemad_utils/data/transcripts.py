"""Reading a run's transcripts: outputs/runs/<name>/transcripts.jsonl[.gz] and meta.json (what every table reads).

    from acemad_utils.data.transcripts import load_run, read_jsonl
    meta, records = load_run("default/main")
    read_jsonl(run_dir("default/main") / "transcripts.jsonl")   # the .gz of a completed run, then appended lines

A run's records are JSON Lines. A completed run keeps them gzip-compressed in canonical order
(`transcripts.jsonl.gz`, written whole by the runner at the end of a run); records of a session that has not
completed yet are appended, one whole line each, to the plain `transcripts.jsonl` beside it. Readers take both,
the compressed file first, so a later line of the same (question, config, repeat) wins: `read_jsonl` on either
name reads the pair, and `zcat transcripts.jsonl.gz` shows the records in any shell.

Writing them (resumable, whole lines, canonical order) is experiments.runner's job; reading lives here, below
the report, so that tables, figures and the viewer read runs without importing the code that makes them.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import msgspec

from acemad_utils.data.damaged import damaged, read_json
from acemad_utils.data.paths import atomic_write, outputs


def run_dir(name: str, *, create: bool = True) -> Path:
    return outputs("runs", name, create=create)


TRANSCRIPTS = "transcripts.jsonl"  # the lines appended by a session that has not completed
COMPRESSED = TRANSCRIPTS + ".gz"  # a completed run's records, canonical order


def transcript_files(path: Path) -> list[Path]:
    """The files holding the records of `path` (either name of the pair), in read order: the compressed
    canonical file, then the plain one appended to since. Only those that exist."""
    path = Path(path)
    plain = path.with_name(path.name[: -len(".gz")]) if path.name.endswith(".gz") else path
    return [p for p in (plain.with_name(plain.name + ".gz"), plain) if p.exists()]


def transcript_bytes(path: Path) -> bytes:
    """The raw lines of the pair (see transcript_files), decompressed: what `cat`/`zcat` of both would show."""
    return b"".join(gunzip(p) if p.name.endswith(".gz") else p.read_bytes() for p in transcript_files(path))


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off while a run's records are parsed; what is alive at the end is then
    frozen (gc.freeze: never scanned again) and the collector is back as it was. Why: the collector runs every
    few hundred new containers and scans, sooner or later, every object alive. 10^5 parsed records are ~10^7
    lists, dicts and floats: with the collector on, loading a profile's runs took 8.7 s instead of 4.9 s, and
    every later scan of them (while tables are drawn) costs seconds again (bench/README.md). Records hold no
    reference cycles, so there is nothing in them for the collector to find; freezing is what CPython offers
    for such long-lived data. The cost: a reference cycle that was already garbage when the block ended is not
    freed (a little memory, never a result)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_on:
            gc.enable()


def parse_line(line: bytes | str):
    """One transcript line as Python objects: the objects `json.loads` gives, in half its time (msgspec; parsing
    is most of re-reading a run). A line msgspec does not take, i.e. the NaN / Infinity that `json.dumps` writes
    for a non-finite number or a lone surrogate, is parsed by `json.loads`, the writer's own reader: the same
    objects either way, and a line neither reads raises ValueError."""
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError:
        return json.loads(line)


def gz_fix(path: Path) -> str:
    """The fix for a damaged transcripts.jsonl.gz (truncated, garbled)."""
    return (
        "rerun the notebook that made it: the run keeps every record that can still be read from it, recomputes "
        f"the rest (model calls come from the response cache) and writes {path.name} whole again"
    )


SALVAGED: set[Path] = set()  # damaged .gz files read with salvage=True by this process (runner.write_canonical)


def gunzip(path: Path, *, salvage: bool = False) -> bytes:
    """The decompressed bytes of a .gz file. A damaged one (truncated, garbled: EOFError / BadGzipFile once,
    no file named) is DamagedFile naming it and gz_fix, or, with `salvage`, what could be decompressed before
    the damage, with one warning (a torn last line there is dropped by record_lines)."""
    raw = path.read_bytes()
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
        if not salvage:
            raise damaged(path, f"{type(e).__name__}: {e}", gz_fix(path)) from None
        good, d = [], zlib.decompressobj(wbits=31)  # gzip framing; chunks so that data before a bad block is kept
        for i in range(0, len(raw), 1 << 16):
            try:
                good.append(d.decompress(raw[i : i + (1 << 16)]))
            except zlib.error:
                break
        n = b"".join(good).count(b"\n")
        SALVAGED.add(path.resolve())  # the runner then writes it whole again even if no record was lost
        warnings.warn(
            f"{path} is damaged ({type(e).__name__}: {e}); reading the {n} whole lines before the damage, the run "
            "recomputes the rest",
            stacklevel=2,
        )
        return b"".join(good)


def record_lines(path: Path, *, salvage: bool = False) -> Iterator[tuple[dict, bytes]]:
    """(record, its line) for every record of the pair (see transcript_files); a torn or corrupt line (a crash
    mid-write) is dropped with a warning, never parsed. Only JSON objects are records: any other line (a
    number, a list, bad UTF-8) counts as corrupt. A damaged compressed file: see gunzip (`salvage`)."""
    for part in transcript_files(path):
        raw = gunzip(part, salvage=salvage) if part.name.endswith(".gz") else part.read_bytes()
        for n, line in enumerate(raw.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                rec = parse_line(line)
            except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                rec = None
            if isinstance(rec, dict):
                yield rec, line
            else:
                warnings.warn(f"{part}:{n}: dropped a torn/corrupt transcript line ({len(line)} bytes)", stacklevel=2)


def read_jsonl(path: Path) -> list[dict]:
    """Every record of the pair transcripts.jsonl(.gz), compressed file first (see record_lines)."""
    with gc_paused():
        return [rec for rec, _ in record_lines(path)]


def commitments(rec: dict) -> int:
    """How many commitments (p, and q where asked) a record holds: single runs, debate entries, moderator turns.
    A runner's summary view of a record (runner.SUMMARY_FIELDS, no rounds) carries the count itself."""
    if "commitments" in rec:
        return int(rec["commitments"])
    # sum(map(len, ...)): a table counts this for every record of every run, and a generator was 3x slower
    return len(rec.get("runs") or ()) + sum(map(len, rec.get("rounds") or ())) + len(rec.get("moderator") or ())


def meta_fix(path: Path) -> str:
    """The fix for a damaged meta.json of a run: it is derived, so deleting it alone keeps every result."""
    return (
        f"it only describes the run and the run writes it again: delete that file alone (rm {path}) and rerun the "
        "notebook that made it; the saved records beside it are kept, so the results come back byte-identical"
    )


def read_meta(path: Path, *, need: tuple[str, ...] = ("methods",)) -> dict:
    """A run's meta.json (DamagedFile naming it and meta_fix when it is not a run description holding `need`;
    the runner, which checks who answered which questions, also needs data_hash and population)."""
    meta = read_json(path, need=need, fix=meta_fix(path))
    if not isinstance(meta["methods"], dict) or not all(
        isinstance(m, dict) and "config_hash" in m for m in meta["methods"].values()
    ):
        raise damaged(path, "its 'methods' are not {label: {config_hash, ...}}", meta_fix(path))
    return meta


def load_run(name: str, *, keep: Optional[Callable[[str, dict, dict], dict]] = None) -> tuple[dict, list[dict]]:
    """(meta, records) of a run. `keep(name, meta, record)`, if given, returns what to keep of each record as it
    is read (the lines are streamed): notebook 08 keeps only the fields its tables read (claims.lean), so a
    profile's runs fit in memory at once."""
    d = run_dir(name)
    meta_path = d / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"no run named {name!r} under {d.parent}; run its notebook first")
    meta = read_meta(meta_path)
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    latest = {}  # a record appended after the run completed (a retried failure) replaces the earlier one
    with gc_paused():
        for r, _ in record_lines(d / TRANSCRIPTS):
            if r.get("config_hash") in hashes:
                latest[(r.get("question_id"), r["config_hash"], r.get("repeat"))] = (
                    r if keep is None else keep(name, meta, r)
                )
        return meta, list(latest.values())


def profile_runs(
    profile: str, *, exclude: tuple[str, ...] = (), keep: Optional[Callable[[str, dict, dict], dict]] = None
) -> dict[str, tuple[dict, list[dict]]]:
    """Every run of a profile that has a meta.json, {experiment name: (meta, records)} (the claims ledger's input);
    runs whose name starts with one of `exclude` are not read at all; `keep` as in load_run."""
    base = outputs("runs", profile)
    names = [d.name for d in sorted(base.iterdir()) if (d / "meta.json").is_file() and not d.name.startswith(exclude)]
    return {name: load_run(f"{profile}/{name}", keep=keep) for name in names}


# ----------------------------------------------------------------------------- the questions of a run
QUESTIONS = "questions.json"  # {question id: {"benchmark", "text", "options": [[label, text], ...], "synthetic"}}


def question_entry(q) -> dict:
    """What the viewer shows of a question (a protocol Question): its text and options; `synthetic` for the
    generated items of the synthetic population (their benchmark is "synthetic-...")."""
    return {
        "benchmark": q.benchmark,
        "text": q.question,
        "options": [[str(k), str(v)] for k, v in q.options.items()],
        "synthetic": str(q.benchmark).startswith("synthetic"),
    }


def write_questions(d: Path, questions) -> None:
    """questions.json beside a run's transcripts: every question's text and options keyed by id, merged with
    what is there (a resumed or extended run keeps the earlier ones). Why a side file and not the records: one
    copy per question instead of one per method and repeat, and runs recorded before it still load."""
    path = Path(d) / QUESTIONS
    old = read_questions(Path(d))
    new = {**old, **{q.id: question_entry(q) for q in questions}}
    if new != old:
        atomic_write(path, json.dumps(new, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def read_questions(d: Path) -> dict:
    """A run's questions.json ({} when the run predates it)."""
    path = Path(d) / QUESTIONS
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
