"""Your own questions: one record or a JSONL / CSV / Parquet file -> checked `Question`s, before any model call.

    q = make_question("2+2?", ["3", "4"], answer="B")          # options as a list (labels A, B, ...) or a map
    qs = read_questions("my_questions.jsonl")                   # or .csv; DataError("<file>, line 3: field ...")
    qs = read_columns("arc.parquet", question="question", choices="choices", answer="answerKey")  # any shape

A record has `question`, `options` (texts labelled A, B, ... in order, or a label -> text map; in a CSV one JSON
cell or one column per label) and optionally `answer` (a label or an option's exact text), `id`, `benchmark`.
Without an id, the id is `q-` + 12 hex digits of sha256(question, options). Everything that becomes a path or a
prompt is checked (safe path segments, labels, non-empty bounded texts without control characters, bounded UTF-8
files); every problem is one DataError line naming the file, row and field.
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

from acemad_utils.data.benchmarks import LETTERS, DataError, build, jsonl_rows
from acemad_utils.data.paths import UnsafeName, safe_segment
from acemad_utils.protocol.schema import Question

MAX_FILE_BYTES = 20_000_000  # a question file larger than this is refused before it is parsed
MAX_ROWS = 10_000  # questions per file (each is debated by every method: 10^4 x 6 methods is already large)
MAX_OPTIONS = len(LETTERS)  # a list of options is labelled A..Z
MAX_TEXT = 20_000  # characters of a question (it is sent in every prompt of its debate)
MAX_OPTION = 2_000  # characters of an option
DEFAULT_BENCHMARK = "own"
FIELDS = ("id", "benchmark", "question", "options", "answer")
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,16}")
# tab, newline, CR are fine; a lone surrogate (a JSON "\\ud800" escape) could never be written to a transcript
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")

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
    if by_text := [k for k, v in options.items() if v == value.strip()]:
        return by_text[0]
    raise ValueError(f"field 'answer': {value!r:.60} is not one of the option labels {list(options)}")


def content_id(question: str, options: Mapping[str, str]) -> str:
    """'q-' + 12 hex digits of sha256 over the question and its labelled options (not the answer: adding one later
    keeps the id and the cached replies)."""
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
    question: str, options: Options, *, answer: Optional[str] = None, id: Optional[str] = None,
    benchmark: str = DEFAULT_BENCHMARK,
) -> Question:  # fmt: skip
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


def _csv(path: Path, raw: bytes, record, own: bool = False) -> list[tuple[str, Any]]:
    """[(where, record(row))] of a CSV file; `own`: the own-questions format's columns checked first."""
    reader = csv.DictReader(io.StringIO(_decode(path, raw), newline=""))
    if own and reader.fieldnames is None:
        raise DataError(f"{path}: empty CSV file (the first row names the columns: question, options, answer, id)")
    for name in reader.fieldnames or [] if own else []:
        if name not in FIELDS and not _LABEL.fullmatch(name or ""):
            raise DataError(f"{path}, line 1: column {name!r:.40} is neither one of {list(FIELDS)} nor an option label")
    rows = []
    for row in reader:
        if None in row:
            raise DataError(f"{path}, line {reader.line_num}: more cells than columns")
        try:
            rows.append((f"line {reader.line_num}", record(row)))
        except ValueError as e:
            raise DataError(f"{path}, line {reader.line_num}: {e}") from None
    return rows


def _json_cells(row: dict) -> dict:
    """A CSV row with each cell holding a JSON list or object (a nested column written out) read as that JSON."""
    rec: dict = {}
    for k, v in row.items():
        rec[k] = v
        if isinstance(v, str) and v.lstrip()[:1] in ("[", "{"):
            try:
                rec[k] = json.loads(v)
            except json.JSONDecodeError:
                pass  # a text that starts with a bracket
    return rec


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path}, line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x}); save the file as UTF-8"
        ) from None


def _file(path: Union[str, Path], suffixes: tuple[str, ...]) -> tuple[Path, bytes]:
    """The bytes of a question file, checked: its suffix, that it is a file, its size."""
    path = Path(path)
    if path.suffix.lower() not in suffixes:
        raise DataError(f"{path}: a question file must end in {' or '.join(suffixes)}")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():  # a folder, a FIFO (whose read would wait for a writer), a device
        raise DataError(f"{path}: not a regular file; give the path of a {' or '.join(suffixes)} file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise DataError(f"{path}: {size} bytes is more than the {MAX_FILE_BYTES} a question file may have")
    return path, path.read_bytes()


def _counted(path: Path, rows: list) -> list:
    if len(rows) > MAX_ROWS:
        raise DataError(f"{path}: {len(rows)} questions is more than the {MAX_ROWS} a file may hold; split it")
    if not rows:
        raise DataError(f"{path}: no questions")
    return rows


def read_questions(path: Union[str, Path]) -> list[Question]:
    """The questions of a .jsonl or .csv file, all checked (DataError: file, row, field) before anything runs."""
    path, rows = table_rows(path, (".jsonl", ".csv"))
    return build(path, rows, from_record, None)


# ----------------------------------------------------------------------------- any dataset by its columns
def _plain(v: Any) -> Any:
    """A Parquet cell as JSON would give it: arrays -> lists, numpy scalars -> Python numbers, NaN -> None."""
    if hasattr(v, "tolist"):  # numpy arrays and scalars
        v = v.tolist()
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return None if isinstance(v, float) and v != v else v


def _parquet_rows(path: Path) -> list[tuple[str, Any]]:
    import importlib.util

    if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
        raise DataError(f"{path}: reading Parquet needs pyarrow: pip install pyarrow (then run the same command)")
    import pandas as pd  # only here: a JSONL or CSV file never loads it

    try:
        frame = pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001 (a damaged or foreign file: one line, not the engine's traceback)
        raise DataError(f"{path}: not a readable Parquet file ({type(e).__name__}: {str(e)[:120]})") from None
    return [
        (f"row {i + 1}", {str(k): _plain(v) for k, v in rec.items()}) for i, rec in enumerate(frame.to_dict("records"))
    ]


def table_rows(
    path: Union[str, Path], suffixes: tuple[str, ...] = (".jsonl", ".csv", ".parquet")
) -> tuple[Path, list[tuple[str, Any]]]:
    """(path, [(where, record)]) of a question file (own format: suffixes without .parquet) or of any table."""
    path, raw = _file(path, suffixes)
    suffix, own = path.suffix.lower(), ".parquet" not in suffixes
    if suffix == ".parquet":
        return path, _counted(path, _parquet_rows(path))
    if suffix == ".csv":
        return path, _counted(path, _csv(path, raw, _csv_record if own else _json_cells, own))
    _decode(path, raw)  # the whole file is UTF-8 before any line is read (jsonl_rows also names the line)
    return path, _counted(path, jsonl_rows(path))


def _column(rec: Mapping[str, Any], name: str, flag: str) -> Any:
    """The value of column `name`; a dotted name reaches into nested objects (`question.stem`)."""
    if name in rec:
        return rec[name]
    value: Any = rec
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise ValueError(f"no column {name!r} ({flag}); the row has {list(rec)[:12]}")
        value = value[part]
    return value


def _choices(value: Any, col: str) -> tuple[Any, Optional[str]]:
    """(options, the answer label they mark or None) of a choices cell in a published shape: a list of texts
    (MMLU-Pro), a label -> text map, ARC's {"text": [...], "label": [...]} or a list of {"text", "label"},
    TruthfulQA's {"choices": [...], "labels": [0/1]} (mc1_targets) or text -> 0/1 map. Several 1s are refused."""
    marks, m = None, isinstance(value, Mapping)
    lists = lambda a, b: m and isinstance(value.get(a), list) and isinstance(value.get(b), list)
    if lists("text", "label"):
        value = dict(zip(value["label"], value["text"]))
    elif (
        isinstance(value, list) and value and all(isinstance(x, Mapping) and {"text", "label"} <= set(x) for x in value)
    ):
        value = {x["label"]: x["text"] for x in value}
    elif lists("choices", "labels"):
        value, marks = value["choices"], value["labels"]
    elif m and value and all(v in (0, 1) and not isinstance(v, str) for v in value.values()):
        value, marks = list(value), list(value.values())
    if marks is None:
        return value, None
    if len(marks) != len(value) or any(m not in (0, 1) for m in marks):
        raise ValueError(f"column {col!r}: its labels must be one 0 or 1 per choice")
    right = [i for i, m in enumerate(marks) if m == 1]
    if len(right) != 1:
        raise ValueError(
            f"column {col!r} marks {len(right)} choices correct; AceMAD scores one answer per question "
            "(a multi-answer target such as TruthfulQA's mc2_targets: use mc1_targets)"
        )
    return value, LETTERS[right[0]] if right[0] < len(LETTERS) else None


def _answer_value(value: Any, labels: Sequence[str]) -> Any:
    """An answer cell: a label or an option's text as is, a whole number a 0-based position (MMLU-Pro)."""
    if isinstance(value, bool):
        raise ValueError(f"an answer must be a label, an option's text or a 0-based index, got {value!r}")
    if isinstance(value, int):
        if not 0 <= value < len(labels):
            raise ValueError(f"answer index {value} is outside the {len(labels)} options (0-based)")
        return labels[value]
    return value


def column_mapper(question: str, choices: str, answer: Optional[str] = None, id: Optional[str] = None):
    """A mapper (record, index) -> Question reading the named columns (benchmarks.build's mapper; see read_columns)."""
    multi = [c.strip() for c in choices.split(",")] if "," in choices else None

    def mapper(rec: Mapping[str, Any], index: int) -> Question:
        if multi:  # one column per option, labelled by its name; empty cells dropped
            cells = {c: _column(rec, c, "--choices-col") for c in multi}
            options: Any = {c: v for c, v in cells.items() if v not in (None, "")}
            marked = None
        else:
            options, marked = _choices(_column(rec, choices, "--choices-col"), choices)
        opts = _options(options)
        gold = (
            marked
            if answer is None or answer == choices
            else _answer_value(_column(rec, answer, "--answer-col"), list(opts))
        )
        qid = None if id is None else _column(rec, id, "--id-col")
        return make_question(
            _column(rec, question, "--question-col"), opts, answer=None if gold is None else str(gold),
            id=None if qid is None else str(qid),
        )  # fmt: skip

    return mapper


def read_columns(
    path: Union[str, Path], question: str = "question", choices: str = "choices", answer: Optional[str] = None,
    id: Optional[str] = None, skipped: Optional[list] = None,
) -> list[Question]:  # fmt: skip
    """The questions of a .jsonl, .csv or .parquet file in any shape, by its columns: `choices` one column in a
    published shape (_choices) or several comma-separated, one option each; `answer` a label, text or 0-based index
    (None: none, or the one the 0/1 labels mark); `id` a column of unique ids. With a `skipped` list, a row failing
    its checks is left out and its one line appended there (a published set with a defective item)."""
    path, rows = table_rows(path)
    mapper = column_mapper(question, choices, answer, id)
    if skipped is not None:
        good = []
        for where, rec in rows:
            try:
                build(path, [(where, rec)], mapper, None)
                good.append((where, rec))
            except DataError as e:
                skipped.append(str(e))
        if not good:
            raise DataError(f"{path}: no row passes the checks, e.g. {skipped[0]}")
        rows = good
    return build(path, rows, mapper, None)
