"""Reading a run (below report/, so tables read runs without the runner): transcripts.jsonl.gz, then the lines
appended since in transcripts.jsonl (a later line of the same record wins), and meta.json."""

from __future__ import annotations

import contextlib
import gc
import json
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Optional, cast

import msgspec
from isal import igzip, isal_zlib

from acemad_utils.data.paths import atomic_write, outputs

# What igzip raises for a bad deflate block: not an OSError, as BadGzipFile is (its stub types it as an instance)
_BAD_DEFLATE = cast(type[Exception], isal_zlib.error)


class DamagedFile(ValueError):
    """A file the project wrote cannot be read as it should; str() is the one line to show (file, what, fix)."""


def damaged(path: Path, what: str, fix: str) -> DamagedFile:
    return DamagedFile(f"{path} is damaged ({what}): {fix}")


def read_json(path: Path, *, need: Sequence[str] = (), fix: str) -> Any:
    """The JSON object in `path` holding every key of `need`, else DamagedFile naming `fix`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise damaged(path, f"not UTF-8 text: {e.reason} at byte {e.start}", fix) from None
    try:
        obj = json.loads(text)
    except ValueError as e:  # JSONDecodeError: truncated, garbled
        raise damaged(path, f"not whole JSON: {e}" if text.strip() else "empty", fix) from None
    if not isinstance(obj, dict):
        raise damaged(path, f"a JSON {type(obj).__name__}, not an object", fix)
    if missing := [k for k in need if k not in obj]:
        raise damaged(path, f"no {', '.join(map(repr, missing))}", fix)
    return obj


def run_dir(name: str, *, create: bool = True) -> Path:
    return outputs("runs", name, create=create)


TRANSCRIPTS = "transcripts.jsonl"  # the lines appended by a session that has not completed
COMPRESSED = TRANSCRIPTS + ".gz"  # a completed run's records, canonical order


def transcript_files(path: Path) -> list[Path]:
    """The existing files of the pair `path` names (either name), compressed first."""
    plain = Path(path).with_name(Path(path).name.removesuffix(".gz"))
    return [p for p in (plain.with_name(plain.name + ".gz"), plain) if p.exists()]


def transcript_bytes(path: Path) -> bytes:
    return b"".join(gunzip(p) if p.name.endswith(".gz") else p.read_bytes() for p in transcript_files(path))


@contextlib.contextmanager
def gc_paused():
    """The cyclic collector off while records are parsed, then what is alive frozen: 10^7 objects without cycles
    took 8.7 s instead of 4.9 s to load with it on, and every later scan cost seconds."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_on:
            gc.enable()


def parse_line(line: bytes | str):
    """json.loads in half its time (msgspec); what msgspec refuses (a lone surrogate, NaN) by json.loads."""
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError:
        return json.loads(line)


def scalars(rec: dict) -> dict:
    """A record's scalar fields and its `final`: what a reader of outcomes keeps (its lists and dicts dropped)."""
    return {k: v for k, v in rec.items() if k == "final" or not isinstance(v, (list, dict))}


_Scalar = Optional[str | int | float | bool] | msgspec.UnsetType
_List = list[msgspec.Raw] | msgspec.UnsetType  # a list's items kept unparsed: never built
_Dict = dict[str, msgspec.Raw] | msgspec.UnsetType
_SCALAR_KEYS = "answer benchmark config_hash error method method_kind question_id repeat schema status synthetic"
#: A record's keys, as parse_scalars reads them: its scalars and `final` decoded, its lists and dicts only scanned.
_KINDS: dict[str, Any] = {
    **dict.fromkeys(_SCALAR_KEYS.split(), _Scalar),
    "final": Any,
    **dict.fromkeys(("decisions", "usage"), _Dict),
    **dict.fromkeys(("labels", "moderator", "rounds", "runs"), _List),
}
_DROPPED = tuple(k for k, kind in _KINDS.items() if kind in (_List, _Dict))
# Its fields in the sorted order lines are written in. Any other key, or a value of another kind, fails: the whole
# line is parsed instead.
_Scalars = msgspec.defstruct(
    "_Scalars", [(k, _KINDS[k], msgspec.UNSET) for k in sorted(_KINDS)], forbid_unknown_fields=True
)
_SCALARS = msgspec.json.Decoder(_Scalars)


def parse_scalars(line: bytes) -> dict:
    """scalars(parse_line(line)), the same dict, without building the lists and dicts it drops (~5x faster)."""
    try:
        s = _SCALARS.decode(line)
    except msgspec.MsgspecError:  # another key, a value of another kind, NaN: the whole line
        return scalars(parse_line(line))
    return {k: v for k, v in msgspec.structs.asdict(s).items() if v is not msgspec.UNSET and k not in _DROPPED}


class Lean:
    """A `keep` for load_run: each record as its scalars and `final` (scalars(); read by parse_scalars, never built
    whole), but those `whole(name, meta, scalars)` picks, kept whole."""

    def __init__(self, whole: Callable[[str, dict, dict], bool]):
        self.whole = whole

    def __call__(self, name: str, meta: dict, record: dict) -> dict:
        return record if self.whole(name, meta, record) else scalars(record)


SALVAGED: set[Path] = set()  # damaged .gz files read with salvage=True by this process (runner.write_canonical)


def gunzip(path: Path, *, salvage: bool = False) -> bytes:
    """A .gz file's bytes; a damaged one is DamagedFile, or with `salvage` what precedes the damage (a warning)."""
    raw = path.read_bytes()
    try:
        return igzip.decompress(raw)
    except (OSError, EOFError, _BAD_DEFLATE) as e:
        if not salvage:
            fix = (
                "rerun the notebook that made it: the run keeps every record that can still be read from it, "
                f"recomputes the rest (model calls come from the response cache) and writes {path.name} whole again"
            )
            raise damaged(path, f"{type(e).__name__}: {e}", fix) from None
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


def record_lines(path: Path, *, salvage: bool = False, parse=parse_line) -> Iterator[tuple[dict, bytes]]:
    """(record, line) for every record of the pair (`parse`: parse_line or parse_scalars); a torn or corrupt line is
    dropped with a warning."""
    for part in transcript_files(path):
        raw = gunzip(part, salvage=salvage) if part.name.endswith(".gz") else part.read_bytes()
        for n, line in enumerate(raw.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                rec = parse(line)
            except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                rec = None
            if isinstance(rec, dict):
                yield rec, line
            else:
                warnings.warn(f"{part}:{n}: dropped a torn/corrupt transcript line ({len(line)} bytes)", stacklevel=2)


def read_jsonl(path: Path) -> list[dict]:
    with gc_paused():
        return [rec for rec, _ in record_lines(path)]


def commitments(rec: dict) -> int:
    """How many commitments a record holds (a runner's summary view carries the count itself)."""
    if "commitments" in rec:
        return int(rec["commitments"])
    return len(rec.get("runs") or ()) + sum(map(len, rec.get("rounds") or ())) + len(rec.get("moderator") or ())


def read_meta(path: Path, *, need: tuple[str, ...] = ("methods",)) -> dict:
    fix = (
        f"it only describes the run and the run writes it again: delete that file alone (rm {path}) and rerun the "
        "notebook that made it; the saved records beside it are kept, so the results come back byte-identical"
    )
    meta = read_json(path, need=need, fix=fix)
    methods = meta["methods"]
    if not isinstance(methods, dict) or not all(isinstance(m, dict) and "config_hash" in m for m in methods.values()):
        raise damaged(path, "its 'methods' are not {label: {config_hash, ...}}", fix)
    return meta


def load_run(name: str, *, keep: Optional[Callable[[str, dict, dict], dict]] = None) -> tuple[dict, list[dict]]:
    """(meta, records) of a run; `keep(name, meta, record)`: what to keep of each (a profile's runs fit in memory; a
    Lean one never builds what it drops)."""
    d = run_dir(name)
    meta_path = d / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"no run named {name!r} under {d.parent}; run its notebook first")
    meta = read_meta(meta_path)
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    latest = {}  # a record appended after the run completed (a retried failure) replaces the earlier one
    lean = keep if isinstance(keep, Lean) else None  # records read as what it keeps: not passed to it again
    with gc_paused():
        for r, line in record_lines(d / TRANSCRIPTS, parse=parse_scalars if lean else parse_line):
            if r.get("config_hash") in hashes:
                kept = r
                if lean and lean.whole(name, meta, r):
                    kept = parse_line(line)
                elif keep is not None and not lean:
                    kept = keep(name, meta, r)
                latest[(r.get("question_id"), r["config_hash"], r.get("repeat"))] = kept
        return meta, list(latest.values())


def profile_runs(
    profile: str, *, exclude: tuple[str, ...] = (), keep: Optional[Callable[[str, dict, dict], dict]] = None
) -> dict[str, tuple[dict, list[dict]]]:
    """{name: (meta, records)} of a profile's runs with a meta.json, but those whose name starts with `exclude`."""
    base = outputs("runs", profile)
    names = [d.name for d in sorted(base.iterdir()) if (d / "meta.json").is_file() and not d.name.startswith(exclude)]
    return {name: load_run(f"{profile}/{name}", keep=keep) for name in names}


# ----------------------------------------------------------------------------- the questions of a run
QUESTIONS = "questions.json"  # {question id: {"benchmark", "text", "options": [[label, text], ...], "synthetic",
# "metadata" if the question has any}}


def write_questions(d: Path, questions) -> None:
    """questions.json beside a run's records, merged: one copy per question, not one per method and repeat."""
    path = Path(d) / QUESTIONS
    old = read_questions(Path(d))
    new = old | {
        q.id: {
            "benchmark": q.benchmark,
            "text": q.question,
            "options": [[str(k), str(v)] for k, v in q.options.items()],
            "synthetic": str(q.benchmark).startswith("synthetic"),
            **({"metadata": dict(q.metadata)} if q.metadata else {}),
        }
        for q in questions
    }
    if new != old:
        atomic_write(path, json.dumps(new, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def read_questions(d: Path) -> dict:
    path = Path(d) / QUESTIONS
    fix = "delete it and run the same command again: the run writes its questions anew (its records are kept)"
    return read_json(path, fix=fix) if path.exists() else {}
