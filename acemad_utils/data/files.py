"""Reading benchmark files: rows of (where, record) and their checks, with errors that say where.

Every error is a DataError naming the file, the line (or item, in a JSON array) and the problem: a wrong item
count, a malformed record, a file cut short ("the file ends in the middle of ..."), bytes that are not UTF-8, a
line that is not an object, an answer not among the options, a repeated question id (both places named).
LogiQA's plain text cannot tell a last option cut mid-word from a short one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from acemad_utils.protocol.schema import Question


class DataError(ValueError):
    """A benchmark file is missing, malformed or has the wrong number of items."""


def build(
    source: Any, rows: Iterable[tuple[str, Any]], mapper: Callable[[Any, int], Question], expected: int | None
) -> list[Question]:
    """Map (where, record) rows to Questions, turning any problem into a DataError that says where it is."""
    out, first = [], dict[str, str]()  # question id -> where it was first seen
    for i, (where, rec) in enumerate(rows):
        if not isinstance(rec, Mapping):
            raise DataError(f"{source}, {where}: expected a JSON object (a record), got {type(rec).__name__} "
                            f"{json.dumps(rec, default=str)[:60]}")  # fmt: skip
        try:
            q = mapper(rec, i)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            why = f"missing field {e.args[0]!r}" if isinstance(e, KeyError) else str(e)
            raise DataError(f"{source}, {where}: {why}") from e
        if q.id in first:
            raise DataError(f"{source}, {where}: question id {q.id!r} repeats the one at {first[q.id]}; ids must "
                            "be unique (transcripts are keyed by them)")  # fmt: skip
        first[q.id] = where
        out.append(q)
    if expected is not None and len(out) != expected:
        raise DataError(f"{source}: expected {expected} items (the published size), found {len(out)}")
    return out


def _utf8(path: Path, raw: bytes, line_no: int = 0) -> str:
    """Decode, or say where the first byte that is not UTF-8 is."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = line_no or raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}, line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {col}); "
                        "the file is damaged or in another encoding") from None  # fmt: skip


_CUT = "; the file ends in the middle of this record (cut short? download it again)"


_LITERAL_START = re.compile(r"-?[0-9.eE+\-]*|t(r(ue?)?)?|f(a(l(se?)?)?)?|n(u(ll?)?)?")


def _at_end(e: json.JSONDecodeError, text: str) -> bool:
    """Did the parser run out of text (rather than meet a wrong character)? True when nothing but the start
    of a number or of true/false/null follows the error, or a string never found its closing quote."""
    return bool(_LITERAL_START.fullmatch(text[e.pos :].strip())) or e.msg.startswith("Unterminated string")


def jsonl_rows(path: Path) -> list[tuple[str, Any]]:
    rows = []
    lines = path.read_bytes().split(b"\n")
    last = max((n for n, b in enumerate(lines, 1) if b.strip()), default=0)
    for n, raw in enumerate(lines, 1):
        line = _utf8(path, raw, n)
        if n == 1:
            line = line.removeprefix("\ufeff")  # a BOM (Excel, Notepad), accepted as in a CSV
        if line.strip():
            try:
                rows.append((f"line {n}", json.loads(line)))
            except RecursionError:
                raise DataError(f"{path}, line {n}: JSON nested too deeply to be a record") from None
            except json.JSONDecodeError as e:
                # the last line of a file without its final newline that stops before its record does: cut short
                cut = n == last == len(lines) and _at_end(e, line)
                raise DataError(
                    f"{path}, line {n}: invalid JSON ({e.msg}, column {e.colno}){_CUT if cut else ''}"
                ) from None
    return rows


def json_file(path: Path) -> Any:
    text = _utf8(path, path.read_bytes())
    try:
        return json.loads(text)
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to be a benchmark file") from None
    except json.JSONDecodeError as e:
        cut = _CUT.replace("this record", "the JSON") if _at_end(e, text) else ""
        raise DataError(f"{path}, line {e.lineno}: invalid JSON ({e.msg}){cut}") from None


def json_items(path: Path, obj: Any, key: str | None = None) -> list[tuple[str, Any]]:
    """Rows of a JSON-array file; positions are item numbers (0-based) because the file has no record lines."""
    items = obj.get(key) if key and isinstance(obj, dict) else obj
    if not isinstance(items, list):
        raise DataError(f"{path}: expected a JSON list{f' under {key!r}' if key else ''}")
    return [(f"item {i}", r) for i, r in enumerate(items)]


def logiqa_rows(path: Path) -> list[tuple[str, Any]]:
    lines = [x.rstrip("\r") for x in _utf8(path, path.read_bytes()).split("\n")]
    if len(lines) % 8 == 1 and lines[-1] == "":
        lines.pop()  # a final newline
    if len(lines) % 8:
        raise DataError(f"{path}: {len(lines)} lines is not a multiple of 8 (blank, answer, context, question, "
                        f"4 options); the last item, from line {len(lines) // 8 * 8 + 1}, is incomplete")  # fmt: skip
    rows = []
    for i in range(0, len(lines), 8):
        blank, ans, context, query, *opts = lines[i : i + 8]
        if blank.strip():
            raise DataError(f"{path}, line {i + 1}: expected the blank line that starts an item, got {blank:.60!r}")
        if ans.strip() not in ("a", "b", "c", "d"):
            raise DataError(f"{path}, line {i + 2}: answer {ans!r} is not one of a, b, c, d")
        rec = {"context": context, "query": query, "options": opts, "correct_option": ans.strip()}
        rows.append((f"item {i // 8} (lines {i + 1}-{i + 8})", rec))
    return rows


def need(root: Path, rel: str) -> Path:
    path = root / rel
    if not path.is_file():
        raise DataError(f"{path} not found: the data directory must follow the layout in "
                        f"`acemad_utils.data.benchmarks` (expected <dir>/{rel})")  # fmt: skip
    return path
