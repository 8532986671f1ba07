"""Your own questions -> checked `Question`s before any model call (docs/own-questions.md): one record (make_question),
a .jsonl or .csv file of the own format (read_questions) or any .jsonl, .csv or .parquet table by its columns
(read_columns). Whatever becomes a path or a prompt is checked; every problem is one DataError line naming file, row
and field."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from acemad_utils.data.benchmarks import LETTERS, DataError, build, jsonl_rows, utf8_text
from acemad_utils.data.paths import safe_segment
from acemad_utils.protocol.schema import Question

MAX_FILE_BYTES = 20_000_000  # a question file larger than this is refused before it is parsed
MAX_ROWS = 10_000  # questions per file (each is debated by every method: 10^4 x 6 methods is already large)
MAX_OPTIONS = len(LETTERS)  # a list of options is labelled A..Z
MAX_TEXT = 20_000  # characters of a question (it is sent in every prompt of its debate)
MAX_OPTION = 2_000  # characters of an option
DEFAULT_BENCHMARK = "own"
FIELDS = ("id", "benchmark", "question", "options", "answer", "metadata")
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,16}")
# tab, newline, CR are fine; a lone surrogate (a JSON "\\ud800" escape) could never be written to a transcript
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")

Options = Union[Sequence[str], Mapping[str, str]]


def _text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {field!r} must be a non-empty string, got {value!r:.60}")
    if len(value) > limit:
        raise ValueError(f"field {field!r} has {len(value)} characters, more than the {limit} allowed")
    if bad := _CONTROL.search(value):
        raise ValueError(f"field {field!r} holds the control character {bad.group()!r} at {bad.start()}")
    return value.strip()


def _options(value: Any) -> dict[str, str]:
    """A list (labelled A, B, ...) or a label -> text map, checked."""
    if isinstance(value, str) or not isinstance(value, (Mapping, Sequence)):
        raise ValueError(f"field 'options' must be a list of texts or a label -> text map, got {value!r:.60}")
    if not 2 <= len(value) <= MAX_OPTIONS:
        raise ValueError(f"field 'options' has {len(value)} options; 2 to {MAX_OPTIONS} are allowed")
    pairs = list(value.items()) if isinstance(value, Mapping) else list(zip(LETTERS, value))
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
    """'q-' + 12 hex of sha256(question, options): not the answer, so adding one later keeps the cached replies."""
    blob = json.dumps([question, [[k, v] for k, v in options.items()]], ensure_ascii=False, separators=(",", ":"))
    return "q-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def make_question(
    question: str, options: Options, *, answer: Optional[str] = None, id: Optional[str] = None,
    benchmark: str = DEFAULT_BENCHMARK, metadata: Optional[Mapping[str, Any]] = None,
) -> Question:  # fmt: skip
    """One checked question (ValueError naming the field); `answer` is a label or an option's exact text; `metadata`
    is kept on the question and in the run's questions.json, never sent to a model."""
    text = _text(question, "question", MAX_TEXT)
    opts = _options(options)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError(f"field 'metadata' must be an object (a key -> value map), got {metadata!r:.60}")
    try:  # it is hashed into the run's name and saved: a date or a numpy number would fail there, without a name
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"field 'metadata' must hold JSON values only (strings, numbers, lists, objects): {e}"
        ) from None
    qid = content_id(text, opts) if id in (None, "") else _id(str(id) if type(id) is int else id)  # not True
    bench = safe_segment(benchmark, "field 'benchmark'")
    return Question(qid, bench, text, opts, _answer(answer, opts), dict(metadata or {}))


def _id(value: Any) -> str:
    """An id of safe parts joined by '/' ('capital-au', or a benchmark's form 'demo/01'): never '..' or a path."""
    if isinstance(value, str) and len(value) <= 256:
        for part in value.split("/"):
            safe_segment(part, "field 'id'")  # its one-line message names the offending part
        return value
    raise ValueError(f"field 'id' must be a string of at most 256 characters, got {value!r:.60}")


def from_record(rec: Mapping[str, Any], index: int = 0) -> Question:
    if unknown := [k for k in rec if k not in FIELDS]:
        raise ValueError(
            f"unknown field(s) {unknown[:5]}; a question has {list(FIELDS)} (a file with its own column "
            "names: the command's --question-col, --choices-col, --answer-col)"
        )
    bench = rec.get("benchmark") or DEFAULT_BENCHMARK
    return make_question(rec["question"], rec["options"], answer=rec.get("answer"), id=rec.get("id"), benchmark=bench,
                         metadata=_cell(rec.get("metadata")))  # fmt: skip


def _cell(value: Any) -> Any:
    """A CSV cell holding a JSON list or object (a nested column written out) as that JSON; any other cell as text."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass  # a text that starts with a bracket
    return value


def _csv(path: Path, own: bool) -> list[tuple[str, Any]]:
    """[(where, record)] of a CSV file; `own`: empty cells dropped, `options` one JSON cell or one column per label."""
    text = utf8_text(path, path.read_bytes()).removeprefix("\ufeff")  # a BOM (Excel) dropped
    reader, rows = csv.DictReader(io.StringIO(text, newline="")), []
    names = reader.fieldnames or []
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise DataError(f"{path}: column(s) {twice} appear more than once in the header")
    if own and names and "options" not in names and not [n for n in names if n not in FIELDS]:
        raise DataError(f"{path}: no option columns: give `options` (a JSON list) or one column per option (A, B, ...)")
    if own and "options" not in names and (extra := [n for n in names if n not in (*FIELDS, *LETTERS)]):
        raise DataError(  # else an "explanation" column would reach the model as an option, and give the answer away
            f"{path}: column(s) {extra} are neither fields ({', '.join(FIELDS)}) nor option letters (A, B, ...): "
            "every other column would be sent to the model as an option; remove them"
        )
    try:
        for row in reader:
            if None in row:
                raise DataError(f"{path}, line {reader.line_num}: more cells than columns")
            if None in row.values():  # csv fills a short row's last columns with None: its answer would vanish
                raise DataError(f"{path}, line {reader.line_num}: fewer cells than columns (or a quote left open)")
            rec = {k: _cell(v) if k == "options" or not own else v for k, v in row.items() if not own or v != ""}
            if own and "options" not in rec:
                rec["options"] = {k: rec.pop(k) for k in list(rec) if k not in FIELDS}
            rows.append((f"line {reader.line_num}", rec))
    except csv.Error as e:  # a cell past csv's field limit: the line its record starts on
        raise DataError(f"{path}, line {reader.line_num + 1}: {e} (a quote left open, or a cell too large)") from None
    return rows


def table_rows(path: Union[str, Path], own: bool = False) -> tuple[Path, list[tuple[str, Any]]]:
    """(path, [(where, record)]) of a question file: the own format (.jsonl, .csv), or any table (also .parquet)."""
    path, suffixes = Path(path), (".jsonl", ".csv") if own else (".jsonl", ".csv", ".parquet")
    if path.suffix.lower() not in suffixes:
        raise DataError(f"{path}: a question file must end in {' or '.join(suffixes)}")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():  # a folder, a FIFO (whose read would wait for a writer), a device
        raise DataError(f"{path}: not a regular file; give the path of a {' or '.join(suffixes)} file")
    if (size := path.stat().st_size) > MAX_FILE_BYTES:
        raise DataError(f"{path}: {size} bytes is more than the {MAX_FILE_BYTES} a question file may have")
    read = {".parquet": _parquet_rows, ".csv": lambda p: _csv(p, own)}.get(path.suffix.lower(), jsonl_rows)
    rows = read(path)
    if len(rows) > MAX_ROWS:
        raise DataError(f"{path}: {len(rows)} questions is more than the {MAX_ROWS} a file may hold; split it")
    if not rows:
        raise DataError(f"{path}: no questions")
    return path, rows


def read_questions(path: Union[str, Path]) -> list[Question]:
    """The questions of a .jsonl or .csv file, all checked (DataError: file, row, field) before anything runs."""
    return build(*table_rows(path, own=True), from_record, None)


# ----------------------------------------------------------------------------- any dataset by its columns
def _parquet_rows(path: Path) -> list[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # only here: JSONL and CSV never load it
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow: pip install pyarrow") from None
    try:
        recs = pq.read_table(path).to_pylist()  # plain Python values: lists, dicts, None for a missing cell
    except Exception as e:  # noqa: BLE001 (a damaged or foreign file: one line, not the engine's traceback)
        raise DataError(f"{path}: not a readable Parquet file ({type(e).__name__}: {str(e)[:120]})") from None
    return [(f"row {i + 1}", {str(k): v for k, v in rec.items()}) for i, rec in enumerate(recs)]


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
    if lists("text", "label") or (
        isinstance(value, list) and value and all(isinstance(x, Mapping) and {"text", "label"} <= set(x) for x in value)
    ):
        if not m:  # a list of {"text", "label"}: as ARC's two lists
            value = {"label": [x["label"] for x in value], "text": [x["text"] for x in value]}
        labels, texts = value["label"], value["text"]
        if len(labels) != len(texts) or len(set(map(str, labels))) != len(labels):
            raise ValueError(f"column {col!r}: its labels must be one distinct label per choice, got {labels!r:.80}")
        value = dict(zip(labels, texts))
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


def read_columns(
    path: Union[str, Path], question: str = "question", choices: str = "choices", answer: Optional[str] = None,
    id: Optional[str] = None, skipped: Optional[list] = None,
) -> list[Question]:  # fmt: skip
    """The questions of a .jsonl, .csv or .parquet file by its columns: `choices` one column in a published shape
    (_choices) or several comma-separated, one option each; `answer` a label, text or 0-based index; with a
    `skipped` list, a row failing its checks is left out and its one line appended there."""
    multi = [c.strip() for c in choices.split(",")] if "," in choices else None

    def mapper(rec: Mapping[str, Any], index: int) -> Question:
        if multi:  # one column per option, labelled by its name; empty cells dropped
            cells = {c: _column(rec, c, "--choices-col") for c in multi}
            options, gold = _options({c: v for c, v in cells.items() if v not in (None, "")}), None
        else:
            raw, gold = _choices(_column(rec, choices, "--choices-col"), choices)
            options = _options(raw)
        if answer is not None and answer != choices:
            gold = _column(rec, answer, "--answer-col")
            if isinstance(gold, bool):
                raise ValueError(f"an answer must be a label, an option's text or a 0-based index, got {gold!r}")
            if isinstance(gold, int):  # a 0-based position (MMLU-Pro's answer_index)
                if not 0 <= gold < len(options):
                    raise ValueError(f"answer index {gold} is outside the {len(options)} options (0-based)")
                gold = list(options)[gold]
        qid = None if id is None else _column(rec, id, "--id-col")
        if id is not None and (qid in (None, "") or isinstance(qid, (bool, float))):  # never 'None', 'True', '1.0'
            raise ValueError(f"--id-col {id!r}: an id must be text or a whole number, got {qid!r:.40}")
        text = _column(rec, question, "--question-col")
        return make_question(text, options, answer=None if gold is None else str(gold), id=qid)

    path, rows = table_rows(path)
    if skipped is not None:
        good = []
        for row in rows:
            try:
                build(path, [row], mapper, None)
                good.append(row)
            except DataError as e:
                skipped.append(str(e))
        if not good:
            raise DataError(f"{path}: no row passes the checks, e.g. {skipped[0]}")
        rows = good
    return build(path, rows, mapper, None)
