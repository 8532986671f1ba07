"""Benchmarks -> `schema.Question` (`load("arc_challenge", limit=50)`, `data_hash(qs)`), read from `data_dir`, else
$ACEMAD_DATA_DIR in the upstream layout of FILES, else the Hugging Face hub (HUB); every error is a one-line DataError
naming the file, the line (or item) and the problem. Mappings are deterministic (no RNG, no `hash()`): TruthfulQA's
choices ordered by sha256 (its right answer is always first upstream), ARC's "1".."4" labels to letters, LogiQA
options by position with one "A." / "A?" / "A " prefix stripped."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from acemad_utils.data.paths import ROOT
from acemad_utils.data.settings import env
from acemad_utils.protocol.schema import Question

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TRUTHFULQA_SALT = "acemad/truthfulqa-mc1/v1"  # changing it reshuffles every TruthfulQA item: don't.

#: The logic-related multiple-choice BBH tasks (the paper's "logic" subset); 7 lettered MC, 3 binary.
BBH_TASKS = tuple(
    f"{task}_{n}_objects"
    for task in ("logical_deduction", "tracking_shuffled_objects")
    for n in ("three", "five", "seven")
) + ("date_understanding", "web_of_lies", "formal_fallacies", "causal_judgement")
BBH_BINARY = {"web_of_lies": ("Yes", "No"), "causal_judgement": ("Yes", "No"), "formal_fallacies": ("valid", "invalid")}


def _text(rec: Mapping[str, Any], key: str) -> str:
    v = rec[key]
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"field {key!r} must be a non-empty string, got {v!r:.60}")
    return v


def _question(qid: str, bench: str, text: str, options: Mapping[str, Any], *, answer: str, meta: dict) -> Question:
    for label, opt in options.items():
        if not isinstance(opt, str) or not opt.strip():
            raise ValueError(f"option {label!r} must be a non-empty string, got {opt!r:.60}")
    return Question(qid, bench, text.strip(), {k: v.strip() for k, v in options.items()}, answer, meta)


def map_truthfulqa(rec: Mapping[str, Any], index: int) -> Question:
    """mc1_targets: the hub's {"choices": [...], "labels": [0/1...]} or upstream's {choice text: 0/1}."""
    q, t = _text(rec, "question"), rec["mc1_targets"]
    choices, labels = (list(t["choices"]), list(t["labels"])) if "choices" in t else (list(t), list(t.values()))
    if len(choices) != len(labels) or labels.count(1) != 1 or set(labels) - {0, 1}:
        raise ValueError(f"mc1_targets must hold exactly one choice labelled 1 (labels {labels})")
    sha = lambda j: hashlib.sha256(f"{TRUTHFULQA_SALT}\x1f{q}\x1f{choices[j]}".encode()).hexdigest()
    order = sorted(range(len(choices)), key=lambda j: (sha(j), j))
    options = {LETTERS[k]: choices[j] for k, j in enumerate(order)}
    answer = LETTERS[order.index(labels.index(1))]
    return _question(f"truthfulqa/{index:04d}", "truthfulqa", q, options, answer=answer, meta={"upstream_index": index})


def _arc_letter(label: Any) -> str:
    s = str(label).strip()
    if len(s) == 1 and s in LETTERS:
        return s
    if s.isdigit() and 1 <= int(s) <= len(LETTERS):
        return LETTERS[int(s) - 1]
    raise ValueError(f"choice label {label!r} is neither a letter nor a number 1-{len(LETTERS)}")


def map_arc(rec: Mapping[str, Any], index: int) -> Question:
    """The hub's question=str, choices={"text", "label"}; upstream's question={"stem", "choices": [{text, label}]}."""
    if isinstance(rec["question"], Mapping):
        stem, ch = _text(rec["question"], "stem"), rec["question"]["choices"]
        texts, labels = [c["text"] for c in ch], [c["label"] for c in ch]
    else:
        stem, texts, labels = _text(rec, "question"), list(rec["choices"]["text"]), list(rec["choices"]["label"])
    letters = [_arc_letter(x) for x in labels]
    if len(set(letters)) != len(letters) or len(texts) != len(letters):
        raise ValueError(f"duplicate or unmatched choice labels {labels}")
    meta = {} if letters == labels else {"original_labels": [str(x) for x in labels]}
    qid, answer, options = _text(rec, "id"), _arc_letter(rec["answerKey"]), dict(zip(letters, texts))
    return _question(qid, "arc_challenge", stem, options, answer=answer, meta=meta)


_BBH_OPTION = re.compile(r"\(([A-Z])\)\s*(.*)")


def map_bbh(rec: Mapping[str, Any], index: int, task: str) -> Question:
    text, target = _text(rec, "input"), _text(rec, "target").strip()
    stem, sep, block = text.rpartition("\nOptions:\n")
    lines = [x.strip() for x in block.split("\n") if x.strip()] if sep else []
    if task in BBH_BINARY:
        choices = BBH_BINARY[task]
        listed = tuple(x.lstrip("- ").strip() for x in lines)
        if sep and listed != choices:  # formal_fallacies/causal_judgement inline "- valid\n- invalid"
            raise ValueError(f"options block {listed} differs from the expected {choices}")
        if target not in choices:
            raise ValueError(f"target {target!r} is not one of {choices}")
        options, answer = dict(zip("AB", choices)), "AB"[choices.index(target)]
        stem = stem if sep else text
    else:
        if not sep:
            raise ValueError("no '\\nOptions:\\n' block in input")
        options = {}
        for line in lines:
            m = _BBH_OPTION.fullmatch(line)
            if not m or m.group(1) != LETTERS[len(options)]:
                raise ValueError(f"unexpected option line {line!r} (want '({LETTERS[len(options)]}) ...')")
            options[m.group(1)] = m.group(2)
        m = re.fullmatch(r"\(([A-Z])\)", target)
        if not m:
            raise ValueError(f"target {target!r} is not of the form '(X)'")
        answer = m.group(1)
    return _question(f"bbh/{task}/{index:03d}", "bbh", stem, options, answer=answer, meta={"task": task})


def strip_logiqa_prefix(text: str, slot: int) -> str:
    """Drop one option prefix: "A." "C." "A?" (any of A-D: some items swap letters) or "A " (own letter only)."""
    m = re.match(r"[A-D][.?]\s*", text) or re.match(rf"{LETTERS[slot]}\s+", text)
    return text[m.end() :] if m and text[m.end() :].strip() else text


def map_logiqa(rec: Mapping[str, Any], index: int) -> Question:
    """{"context", "query", "options": [4 str], "correct_option"}: an int on the hub, a letter a-d in the file."""
    opts, v = list(rec["options"]), rec["correct_option"]
    if len(opts) != 4:
        raise ValueError(f"expected 4 options, got {len(opts)}")
    options = {LETTERS[j]: strip_logiqa_prefix(str(o).strip(), j) for j, o in enumerate(opts)}
    text = f"{_text(rec, 'context').strip()}\n{_text(rec, 'query').strip()}"
    s = str(v).strip()
    i = int(s) if s.isdigit() and not isinstance(v, bool) else LETTERS.find(s.upper()) if len(s) == 1 else -1
    if not 0 <= i < 4:
        raise ValueError(f"answer {v!r} is not an option index 0-3 or letter a-d")
    answer = LETTERS[i]
    return _question(f"logiqa/{index:03d}", "logiqa", text, options, answer=answer, meta={})


def map_medqa(rec: Mapping[str, Any], index: int) -> Question:
    options, ans = dict(rec["options"]), str(rec["answer_idx"]).strip()
    if ans not in options:
        raise ValueError(f"answer_idx {ans!r} is not among the option labels {list(options)}")
    if "answer" in rec and options.get(ans) != rec["answer"]:
        raise ValueError(f"answer_idx {ans!r} points to {options.get(ans)!r:.60}, not to answer {rec['answer']!r:.60}")
    meta = {"meta_info": rec.get("meta_info")}
    return _question(f"medqa/{index:04d}", "medqa", _text(rec, "question"), options, answer=ans, meta=meta)


def map_mmlu_pro(rec: Mapping[str, Any], index: int) -> Question:
    opts, ans = list(rec["options"]), str(rec["answer"]).strip()
    if rec.get("category", "law") != "law":
        raise ValueError(f"category is {rec['category']!r}, expected 'law'")
    if not 2 <= len(opts) <= 10:
        raise ValueError(f"expected 2-10 options, got {len(opts)}")
    if "answer_index" in rec:
        i = rec["answer_index"]
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(opts):
            raise ValueError(f"answer_index {i!r} is not an option index 0-{len(opts) - 1}")
        if LETTERS[i] != ans:
            raise ValueError(f"answer {ans!r} disagrees with answer_index {i!r}")
    qid, meta = f"mmlu_pro/{rec['question_id']}", {"question_id": rec["question_id"], "src": rec.get("src")}
    return _question(qid, "mmlu_pro", _text(rec, "question"), dict(zip(LETTERS, opts)), answer=ans, meta=meta)


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


def utf8_text(path: Path, raw: bytes, line_no: int = 0) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = line_no or raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}, line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {col}); "
                        "the file is damaged or in another encoding") from None  # fmt: skip


# what is left when a download stops inside a number or a literal (an open string says so itself)
_LITERAL_START = re.compile(r"-?[0-9.eE+\-]*|t(r(ue?)?)?|f(a(l(se?)?)?)?|n(u(ll?)?)?")


def _loads(path: Path, text: str, line: int | None, may_be_cut: bool = True) -> Any:
    """json.loads of a .jsonl `line` (None: a whole .json file), a fault as one line naming where it is."""
    where = f", line {line}" if line else ""
    try:
        return json.loads(text)
    except RecursionError:
        raise DataError(f"{path}{where}: JSON nested too deeply to be data") from None
    except json.JSONDecodeError as e:
        cut = may_be_cut and (e.msg.startswith("Unterminated") or _LITERAL_START.fullmatch(text[e.pos :].strip()))
        the = "this record" if line else "the JSON"
        cut_msg = f"; the file ends in the middle of {the} (cut short? download it again)" if cut else ""
        raise DataError(f"{path}, line {line or e.lineno}: invalid JSON ({e.msg}, column {e.colno}){cut_msg}") from None
    except ValueError as e:  # an integer of more digits than Python converts (4,300)
        raise DataError(f"{path}{where}: a number too long to be data ({str(e).split(':')[0]})") from None


def jsonl_rows(path: Path) -> list[tuple[str, Any]]:
    lines = path.read_bytes().split(b"\n")
    last = max((n for n, b in enumerate(lines, 1) if b.strip()), default=0)
    # a BOM (Excel, Notepad) is accepted as in a CSV; only the last line of a file without its final newline is cut
    return [
        (f"line {n}", _loads(path, text, n, n == last == len(lines)))
        for n, raw in enumerate(lines, 1)
        if (text := utf8_text(path, raw, n).removeprefix("\ufeff" if n == 1 else "")).strip()
    ]


def json_file(path: Path) -> Any:
    return _loads(path, utf8_text(path, path.read_bytes()), None)


def logiqa_rows(path: Path) -> list[tuple[str, Any]]:
    lines = [x.rstrip("\r") for x in utf8_text(path, path.read_bytes()).split("\n")]
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


ENV_VAR = "ACEMAD_DATA_DIR"
DEMO_PATH = ROOT / "data" / "demo" / "demo.jsonl"

#: Published sizes; a mismatch means a wrong or damaged file, never something to ignore.
PUBLISHED_SIZES = {"truthfulqa": 817, "arc_challenge": 1172, "logiqa": 651, "medqa": 1273, "mmlu_pro": 1101,
                   **{f"bbh/{t}": 187 if t == "causal_judgement" else 250 for t in BBH_TASKS}}  # fmt: skip
#: Full test sets per benchmark (BBH: its tasks together); the subset construction runs on all of them.
FULL_SIZES = {
    **{b: n for b, n in PUBLISHED_SIZES.items() if not b.startswith("bbh/")},
    "bbh": sum(n for b, n in PUBLISHED_SIZES.items() if b.startswith("bbh/")),
}

NO_DATA_HELP = (
    f"no benchmark data available: set {ENV_VAR} (in Python also data_dir=) to a directory in the layout described "
    "in `acemad_utils.data.benchmarks` (e.g. <dir>/truthfulqa/data/v0/mc_task.json), or `pip install datasets` and "
    "be online to read the Hugging Face hub; the demo questions (SOURCE=demo, `load_demo()`) need neither"
)


#: The hub datasets (path, config, split) read when no data directory is given (bbh: one config per task).
HUB = {
    "truthfulqa": ("truthful_qa", "multiple_choice", "validation"),
    "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge", "test"),
    "bbh": ("lukaemon/bbh", None, "test"), "logiqa": ("lucasmccabe/logiqa", None, "test"),
    "medqa": ("GBaker/MedQA-USMLE-4-options", None, "test"), "mmlu_pro": ("TIGER-Lab/MMLU-Pro", None, "test"),
}  # fmt: skip


def _json_items(path: Path, key: str | None = None) -> list[tuple[str, Any]]:
    """Rows of a JSON-array file (under `key`), numbered as items (0-based): the file has no record lines."""
    obj = json_file(path)
    items = obj.get(key) if key and isinstance(obj, dict) else obj
    if not isinstance(items, list):
        raise DataError(f"{path}: expected a JSON list{f' under {key!r}' if key else ''}")
    return [(f"item {i}", r) for i, r in enumerate(items)]


#: benchmark -> (its file under the data directory, reader, mapper); BBH: one file per task.
FILES: dict[str, tuple[str, Callable[[Path], list], Callable]] = {
    "truthfulqa": ("truthfulqa/data/v0/mc_task.json", _json_items, map_truthfulqa),
    "arc_challenge": ("arc_challenge/ARC-Challenge/ARC-Challenge-Test.jsonl", jsonl_rows, map_arc),
    "bbh": ("bbh/bbh/{task}.json", functools.partial(_json_items, key="examples"), map_bbh),
    "logiqa": ("logiqa/Test.txt", logiqa_rows, map_logiqa),
    "medqa": ("medqa/phrases_no_exclude_test.jsonl", jsonl_rows, map_medqa),
    "mmlu_pro": ("mmlu_pro/test.jsonl", jsonl_rows, map_mmlu_pro),
}
BENCHMARKS: tuple[str, ...] = tuple(FILES)


def _hub_available() -> bool:
    return importlib.util.find_spec("datasets") is not None


def _hub_rows(path: str, name: str | None, split: str) -> list[tuple[str, Any]]:
    import datasets  # noqa: PLC0415  (lazily: an optional dependency)

    return [(f"row {i}", dict(r)) for i, r in enumerate(datasets.load_dataset(path, name, split=split))]


def _load(benchmark: str, root: Path | None) -> list[Question]:
    """Every item of a benchmark from <root> (None: the hub), count-checked per file (BBH: per task)."""
    rel, read, mapper = FILES[benchmark]
    law_only = benchmark == "mmlu_pro" and root is not None and (root / "mmlu_pro/law_test.jsonl").is_file()
    out = []
    for task in BBH_TASKS if benchmark == "bbh" else [None]:
        hub = (HUB[benchmark][0], task or HUB[benchmark][1], HUB[benchmark][2])
        src: Any = "hf:" + "/".join(x for x in hub[:2] if x)
        if root is None:
            rows = _hub_rows(*hub)
        else:
            src = root / (part := "mmlu_pro/law_test.jsonl" if law_only else rel.format(task=task))
            if not src.is_file():
                raise DataError(f"{src} not found: the data directory must follow the layout in "
                                f"`acemad_utils.data.benchmarks` (expected <dir>/{part})")  # fmt: skip
            rows = read(src)
        if benchmark == "mmlu_pro" and not law_only:  # all 14 categories; non-dict rows go on to fail in the mapper
            rows = [(w, r) for w, r in rows if not isinstance(r, dict) or r.get("category") == "law"]
        m = functools.partial(mapper, task=task) if task else mapper
        out += build(src, rows, m, PUBLISHED_SIZES[f"bbh/{task}" if task else benchmark])
    return out


def data_root(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The local data directory to read, or None when the hub should be used."""
    raw = data_dir if data_dir is not None else env(ENV_VAR) or None
    if raw is None:
        if not _hub_available():
            raise DataError(NO_DATA_HELP)
        return None
    path = Path(raw).expanduser()
    if not path.is_absolute() and not path.exists() and (ROOT / path).is_dir():
        path = (ROOT / path).resolve()  # CI's ACEMAD_DATA_DIR=../shared/benchmarks works from any cwd
    if not path.is_dir():
        where = "data_dir" if data_dir is not None else ENV_VAR
        raise DataError(f"{where}={os.fspath(raw)!r} is not a directory; {NO_DATA_HELP}")
    return path


def load(benchmark: str, limit: int | None = None, data_dir: str | os.PathLike | None = None) -> list[Question]:
    """All questions of one benchmark (count-checked), then the first `limit` of them."""
    if benchmark == "demo":
        qs = load_demo()
    elif benchmark in FILES:
        qs = _load(benchmark, data_root(data_dir))
    else:
        raise ValueError(f"unknown benchmark {benchmark!r}; allowed: {', '.join(BENCHMARKS + ('demo',))}")
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        qs = qs[:limit]
    return qs


def _map_demo(rec: Mapping[str, Any], index: int) -> Question:
    q = Question.from_dict(rec)
    d = q.metadata.get("distractor")
    if q.benchmark != "demo" or d not in q.options or d == q.answer or not q.metadata.get("explanation"):
        raise ValueError("demo items need benchmark 'demo', an explanation and a distractor label != answer")
    return q


def load_demo(path: str | os.PathLike | None = None) -> list[Question]:
    """The project's own misconception questions (data/demo/demo.jsonl); no benchmark data needed."""
    path = Path(path) if path is not None else DEMO_PATH
    return build(path, jsonl_rows(path), _map_demo, None)


def data_hash(questions: Sequence[Question]) -> str:
    """sha256 (hex) of the canonical JSON of the questions: same questions, same order -> same hash, anywhere."""
    canonical = [q.to_dict() | {"options": [[k, v] for k, v in q.options.items()]} for q in questions]  # in order
    blob = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
