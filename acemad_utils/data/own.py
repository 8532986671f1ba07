"""Your own questions: one record or a JSONL / CSV file -> checked `Question`s, before any model call.

    from acemad_utils.data.own import make_question, read_questions
    q = make_question("2+2?", ["3", "4"], answer="B")          # options as a list (labels A, B, ...) or a map
    qs = read_questions("my_questions.jsonl")                   # or .csv; DataError("<file>, line 3: field ...")

A record has `question` (text), `options` (a list of texts, labelled A, B, C, ... in order, or a label -> text
map) and optionally `answer` (a label, or the exact text of one option), `id` and `benchmark`. In a CSV file,
`options` is one cell holding a JSON list or map, or the options are columns named `A`, `B`, ... (empty cells
dropped). Without an `id`, the id is `q-` and the first 12 hex digits of the sha256 of the question and its
options, so a changed question is a new question; with one, the runs are still keyed by the file's content
(`data_hash`), so changing a question under its id never reuses a stale record.

Everything that later becomes a path or a prompt is checked as a profile's values are (data.paths.safe_segment):
ids and benchmark names are safe path segments; option labels are 1-16 letters, digits, '_' or '-'; texts are
non-empty, without control characters, and bounded (MAX_TEXT, MAX_OPTION); a file is bounded (MAX_FILE_BYTES,
MAX_ROWS, MAX_OPTIONS) and must be UTF-8. Every problem is one DataError line naming the file, the row and the
field.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from acemad_utils.data.files import DataError, build, jsonl_rows
from acemad_utils.data.paths import UnsafeName, safe_segment
from acemad_utils.data.records import LETTERS
from acemad_utils.protocol.schema import Question

MAX_FILE_BYTES = 20_000_000  # a question file larger than this is refused before it is parsed
MAX_ROWS = 10_000  # questions per file (each is debated by every method: 10^4 x 6 methods is already large)
MAX_OPTIONS = len(LETTERS)  # a list of options is labelled A..Z
MAX_TEXT = 20_000  # characters of a question (it is sent in every prompt of its debate)
MAX_OPTION = 2_000  # characters of an option
DEFAULT_BENCHMARK = "own"
FIELDS = ("id", "benchmark", "question", "options", "answer")
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,16}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")  # tab, newline, CR are fine; a lone
# surrogate (a JSON "\\ud800" escape) is not text: it could never be written to a transcript

Options = Union[Sequence[str], Mapping[str, str]]


def _text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {field!r} must be a non-empty string, got {value!r:.60}")
    if len(value) > limit:
        raise ValueError(f"field {field!r} has {len(value)} characters, more than the {limit} allowed")
    bad = _CONTROL.search(value)
    if bad:
        raise ValueError(f"field {field!r} holds the control character {bad.group()!r} at {bad.start()}")
    return value.strip()


def _options(value: Any) -> dict[str, str]:
    """A list (labelled A, B, ...) or a label -> text map, checked."""
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) > MAX_OPTIONS:
            raise ValueError(f"field 'options' has {len(value)} options, more than the {MAX_OPTIONS} allowed")
        pairs = list(zip(LETTERS, value))
    else:
        raise ValueError(f"field 'options' must be a list of texts or a label -> text map, got {value!r:.60}")
    if len(pairs) < 2:
        raise ValueError(f"field 'options' needs at least 2 options, got {len(pairs)}")
    if len(pairs) > MAX_OPTIONS:
        raise ValueError(f"field 'options' has {len(pairs)} options, more than the {MAX_OPTIONS} allowed")
    out = {}
    for label, text in pairs:
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise ValueError(f"field 'options': label {label!r:.40} must be 1-16 letters, digits, '_' or '-'")
        out[label] = _text(text, f"options[{label}]", MAX_OPTION)
    texts = list(out.values())
    if len(set(texts)) < len(texts):
        raise ValueError("field 'options' repeats an option text; each option must differ")
    return out


def _answer(value: Any, options: Mapping[str, str]) -> Optional[str]:
    """A label, or the exact text of one option (mapped to its label); None/'' for no gold answer."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"field 'answer' must be an option label or text, got {value!r:.60}")
    if value in options:
        return value
    by_text = [k for k, v in options.items() if v == value.strip()]
    if by_text:
        return by_text[0]
    raise ValueError(f"field 'answer': {value!r:.60} is not one of the option labels {list(options)}")


def content_id(question: str, options: Mapping[str, str]) -> str:
    """'q-' + 12 hex digits of sha256 over the question and its labelled options (not the answer: adding a gold
    answer later keeps the id, so an endpoint's cached replies are reused)."""
    blob = json.dumps([question, [[k, v] for k, v in options.items()]], ensure_ascii=False, separators=(",", ":"))
    return "q-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def _segment(value: Any, field: str) -> str:
    """An id or benchmark name: one safe path segment (the rule of profile and run names)."""
    try:
        return safe_segment(value, f"field {field!r}")
    except UnsafeName:
        raise ValueError(
            f"field {field!r}: {value!r:.60} is not allowed; use letters, digits, '.', '_' or '-' (at most 128, "
            "not starting with '.' or '-')"
        ) from None


def make_question(
    question: str,
    options: Options,
    *,
    answer: Optional[str] = None,
    id: Optional[str] = None,
    benchmark: str = DEFAULT_BENCHMARK,
) -> Question:
    """One checked question (ValueError naming the field). `answer` is a label or an option's exact text."""
    text = _text(question, "question", MAX_TEXT)
    opts = _options(options)
    qid = content_id(text, opts) if id is None or id == "" else _segment(str(id) if isinstance(id, int) else id, "id")
    return Question(qid, _segment(benchmark, "benchmark"), text, opts, _answer(answer, opts))


def from_record(rec: Mapping[str, Any], index: int = 0) -> Question:
    """A question from one record of a file (a dict with FIELDS); ValueError/KeyError naming the field."""
    unknown = [k for k in rec if k not in FIELDS]
    if unknown:
        raise ValueError(f"unknown field(s) {unknown[:5]}; a question has {list(FIELDS)}")
    bench = rec.get("benchmark") or DEFAULT_BENCHMARK
    return make_question(rec["question"], rec["options"], answer=rec.get("answer"), id=rec.get("id"), benchmark=bench)


def _csv_record(row: dict) -> dict:
    """A CSV row as a record: `options` as one JSON cell, or one column per label (A, B, ...; empty cells dropped)."""
    rec = {k: v for k, v in row.items() if k in FIELDS and k != "options" and v not in (None, "")}
    label_cols = [k for k in row if k not in FIELDS]
    if row.get("options"):
        try:
            rec["options"] = json.loads(row["options"])
        except json.JSONDecodeError as e:
            raise ValueError(f"field 'options' must be a JSON list or map in one cell ({e.msg})") from None
    elif label_cols:
        rec["options"] = {k: v for k, v in row.items() if k in label_cols and v not in (None, "")}
    return rec


def _csv_rows(path: Path, raw: bytes) -> list[tuple[str, Any]]:
    text = _decode(path, raw)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if reader.fieldnames is None:
        raise DataError(f"{path}: empty CSV file (the first row names the columns: question, options, answer, id)")
    for name in reader.fieldnames:
        if name not in FIELDS and not _LABEL.fullmatch(name or ""):
            raise DataError(f"{path}, line 1: column {name!r:.40} is neither one of {list(FIELDS)} nor an option label")
    rows = []
    for row in reader:
        if None in row:
            raise DataError(f"{path}, line {reader.line_num}: more cells than columns")
        try:
            rows.append((f"line {reader.line_num}", _csv_record(row)))
        except ValueError as e:
            raise DataError(f"{path}, line {reader.line_num}: {e}") from None
    return rows


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path}, line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x}); save the file as UTF-8"
        ) from None


def read_questions(path: Union[str, Path]) -> list[Question]:
    """The questions of a .jsonl or .csv file, all checked (DataError: file, row, field) before anything runs."""
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".csv"):
        raise DataError(f"{path}: a question file must end in .jsonl or .csv")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():  # a folder, a FIFO (whose read would wait for a writer), a device
        raise DataError(f"{path}: not a regular file; give the path of a .jsonl or .csv file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise DataError(f"{path}: {size} bytes is more than the {MAX_FILE_BYTES} a question file may have")
    raw = path.read_bytes()
    if path.suffix.lower() == ".csv":
        rows = _csv_rows(path, raw)
    else:
        _decode(path, raw)  # the whole file is UTF-8 before any line is read (jsonl_rows also names the line)
        rows = jsonl_rows(path)
    if len(rows) > MAX_ROWS:
        raise DataError(f"{path}: {len(rows)} questions is more than the {MAX_ROWS} a file may hold; split it")
    if not rows:
        raise DataError(f"{path}: no questions")
    return build(path, rows, from_record, None)
