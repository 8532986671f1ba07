"""Hostile data files and question lists: every problem is a DataError (or ValueError) naming the file, the
line or item, and what is wrong; nothing is silently dropped, deduplicated or guessed.

Each loader family is hit at least once: JSONL (ARC, MedQA, MMLU-Pro, the demo set), JSON documents
(TruthfulQA's array, BBH's {"examples": [...]}) and LogiQA's plain text. Small files are enough: every
record is checked in order, before the item count is compared with the published size. No shared data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data import benchmarks as data
from acemad_utils.data import files as data_files
from acemad_utils.data import own
from acemad_utils.data.benchmarks import DataError
from acemad_utils.experiments.runner import run_experiment
from acemad_utils.protocol.config import DebateConfig

ARC = "arc_challenge/ARC-Challenge/ARC-Challenge-Test.jsonl"
MEDQA = "medqa/phrases_no_exclude_test.jsonl"
MMLU = "mmlu_pro/law_test.jsonl"
TQA = "truthfulqa/data/v0/mc_task.json"
BBH = "bbh/bbh/logical_deduction_three_objects.json"


def arc(i, answer="B", qid=None):
    return {
        "id": qid or f"Fake_{i}",
        "answerKey": answer,
        "question": {"stem": f"Stem {i}?", "choices": [{"text": f"t{i}{x}", "label": x} for x in "ABCD"]},
    }


def medqa(i, idx="D"):
    return {
        "question": f"M{i}?",
        "options": {"A": "a", "B": "b", "C": "c", "D": "d"},
        "answer_idx": idx,
        "answer": "d",
        "meta_info": "step1",
    }


def mmlu(i, answer="C", index=2, qid=None):
    return {
        "question_id": i if qid is None else qid,
        "question": f"L{i}?",
        "options": ["o1", "o2", "o3", "o4"],
        "answer": answer,
        "answer_index": index,
        "category": "law",
        "src": "x",
    }


def demo(i, answer="B", qid=None):
    return {
        "id": qid or f"demo/{i:02d}",
        "benchmark": "demo",
        "question": f"D{i}?",
        "options": {"A": "a", "B": "b", "C": "c"},
        "answer": answer,
        "metadata": {"distractor": "A", "explanation": "why"},
    }


def jsonl(root: Path, rel: str, recs, tail: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + tail, encoding="utf-8")
    return path


def fails(benchmark: str, root: Path, pattern: str) -> str:
    with pytest.raises(DataError) as e:
        data.load_demo(root / "demo.jsonl") if benchmark == "demo" else data.load(benchmark, data_dir=root)
    msg = str(e.value)
    assert re.search(pattern, msg), msg
    assert "\n" not in msg and "Traceback" not in msg
    return msg


# ----------------------------------------------------------------------------- files cut short
def test_jsonl_whose_last_line_is_cut(tmp_path):
    full = json.dumps(arc(5))
    jsonl(tmp_path, ARC, [arc(i) for i in range(5)], tail=full[:40])  # no final newline: the download stopped
    fails(
        "arc_challenge",
        tmp_path,
        r"ARC-Challenge-Test\.jsonl, line 6: invalid JSON \(.*\); the file ends in "
        r"the middle of this record \(cut short\? download it again\)$",
    )


def test_a_bad_line_that_is_not_the_last_is_not_called_a_cut(tmp_path):
    path = jsonl(tmp_path, MEDQA, [medqa(0)])
    path.write_text(path.read_text() + '{"question": "x", \n' + json.dumps(medqa(2)) + "\n")
    msg = fails("medqa", tmp_path, r"phrases_no_exclude_test\.jsonl, line 2: invalid JSON \(")
    assert "ends in the middle" not in msg


def test_jsonl_cut_at_a_line_boundary_fails_the_count(tmp_path):
    jsonl(tmp_path, MMLU, [mmlu(i) for i in range(7)])
    fails("mmlu_pro", tmp_path, r"law_test\.jsonl: expected 1101 items \(the published size\), found 7")


def test_json_documents_cut_in_the_middle(tmp_path):
    tqa = tmp_path / TQA
    tqa.parent.mkdir(parents=True)
    items = [{"question": f"Q{i}?", "mc1_targets": {f"right {i}": 1, f"wrong {i}": 0}} for i in range(40)]
    text = json.dumps(items, indent=1)
    tqa.write_text(text[: len(text) // 2])
    line = text[: len(text) // 2].count("\n") + 1
    fails(
        "truthfulqa",
        tmp_path,
        rf"mc_task\.json, line {line}: invalid JSON \(.*\); the file ends in the middle "
        r"of the JSON \(cut short\? download it again\)$",
    )
    bbh = tmp_path / BBH
    bbh.parent.mkdir(parents=True)
    text = json.dumps({"examples": [{"input": "Pick.\nOptions:\n(A) x\n(B) y", "target": "(A)"}] * 5})
    bbh.write_text(text[:-30])
    fails(
        "bbh",
        tmp_path,
        r"logical_deduction_three_objects\.json, line 1: invalid JSON .*the file ends in the "
        r"middle of the JSON",
    )


def test_logiqa_cut_inside_an_item(tmp_path):
    item = "\nc\nContext {i}.\nQuestion {i}?\nA.one\nB.two\nC.three\nD.four"
    path = tmp_path / "logiqa" / "Test.txt"
    path.parent.mkdir()
    path.write_text("\n".join(item.format(i=i) for i in range(3)).rsplit("\n", 3)[0])  # the last 3 options gone
    fails(
        "logiqa",
        tmp_path,
        r"Test\.txt: 21 lines is not a multiple of 8 .*; the last item, from line 17, is "
        r"incomplete$",
    )


# ----------------------------------------------------------------------------- records that are wrong
@pytest.mark.parametrize(
    "bench,write,pattern",
    [
        (
            "arc_challenge",
            lambda r: jsonl(r, ARC, [arc(0), arc(1, answer="E")]),
            r"ARC-Challenge-Test\.jsonl, line 2: question 'Fake_1': answer 'E' is not among the option labels "
            r"\['A', 'B', 'C', 'D'\]$",
        ),
        (
            "medqa",
            lambda r: jsonl(r, MEDQA, [medqa(0), medqa(1), medqa(2, idx="E")]),
            r"phrases_no_exclude_test\.jsonl, line 3: answer_idx 'E' is not among the option labels \['A', 'B', 'C', "
            r"'D'\]$",
        ),
        (
            "mmlu_pro",
            lambda r: jsonl(r, MMLU, [mmlu(0, answer="K", index=10)]),
            r"law_test\.jsonl, line 1: answer_index 10 is not an option index 0-3$",
        ),
        (
            "mmlu_pro",
            lambda r: jsonl(r, MMLU, [mmlu(0, answer="F", index=None) | {"answer_index": None}]),
            r"law_test\.jsonl, line 1: answer_index None is not an option index 0-3$",
        ),
        (
            "bbh",
            lambda r: (
                (r / BBH).parent.mkdir(parents=True)
                or (r / BBH).write_text(
                    json.dumps({"examples": [{"input": "Pick.\nOptions:\n(A) x\n(B) y\n(C) z", "target": "(D)"}]})
                )
            ),
            r"logical_deduction_three_objects\.json, item 0: question 'bbh/logical_deduction_three_objects/000': "
            r"answer 'D' is not among the option labels \['A', 'B', 'C'\]$",
        ),
        (
            "demo",
            lambda r: jsonl(r, "demo.jsonl", [demo(0), demo(1, answer="Z")]),
            r"demo\.jsonl, line 2: question 'demo/01': answer 'Z' is not among the option labels \['A', 'B', 'C'\]$",
        ),
    ],
)
def test_answer_outside_its_options(tmp_path, bench, write, pattern):
    write(tmp_path)
    fails(bench, tmp_path, pattern)


def test_a_line_that_is_json_but_not_a_record(tmp_path):
    jsonl(tmp_path, ARC, [arc(0), [1, 2, 3]])
    fails(
        "arc_challenge",
        tmp_path,
        r"ARC-Challenge-Test\.jsonl, line 2: expected a JSON object \(a record\), "
        r"got list \[1, 2, 3\]$",
    )
    tqa = tmp_path / TQA
    tqa.parent.mkdir(parents=True)
    tqa.write_text(json.dumps(["just a string"]))
    fails("truthfulqa", tmp_path, r"mc_task\.json, item 0: expected a JSON object \(a record\), got str")


def test_bytes_that_are_not_utf8(tmp_path):
    path = jsonl(tmp_path, MEDQA, [medqa(0), medqa(1)])
    raw = path.read_bytes().split(b"\n")
    raw[1] = raw[1][:10] + b"\xff\xfe" + raw[1][10:]
    path.write_bytes(b"\n".join(raw))
    fails(
        "medqa",
        tmp_path,
        r"phrases_no_exclude_test\.jsonl, line 2: not UTF-8 text \(byte 0xff at column 11\); "
        r"the file is damaged or in another encoding$",
    )
    lq = tmp_path / "logiqa" / "Test.txt"
    lq.parent.mkdir()
    lq.write_bytes(b"\nc\nContext\nQ?\nA.one\nB.\xe9two\nC.three\nD.four")  # latin-1, not UTF-8
    fails("logiqa", tmp_path, r"Test\.txt, line 6: not UTF-8 text \(byte 0xe9 at column 3\)")


# ----------------------------------------------------------------------------- duplicate ids
@pytest.mark.parametrize(
    "bench,write,pattern",
    [
        (
            "arc_challenge",
            lambda r: jsonl(r, ARC, [arc(0), arc(1), arc(2, qid="Fake_0")]),
            r"ARC-Challenge-Test\.jsonl, line 3: question id 'Fake_0' repeats the one at line 1; ids must be unique",
        ),
        (
            "mmlu_pro",
            lambda r: jsonl(r, MMLU, [mmlu(0, qid=70), mmlu(1, qid=71), mmlu(2, qid=70)]),
            r"law_test\.jsonl, line 3: question id 'mmlu_pro/70' repeats the one at line 1; ids must be unique",
        ),
        (
            "demo",
            lambda r: jsonl(r, "demo.jsonl", [demo(0), demo(1, qid="demo/00")]),
            r"demo\.jsonl, line 2: question id 'demo/00' repeats the one at line 1; ids must be unique",
        ),
    ],
)
def test_duplicate_ids_in_a_benchmark_name_both_places(tmp_path, bench, write, pattern):
    write(tmp_path)
    fails(bench, tmp_path, pattern)


def test_duplicate_ids_in_a_run_question_list(tmp_outputs):
    """A run keys its records by question id: a question listed twice is an error before anything runs
    (nothing is written), not a silent overwrite; repeats= is how one question is run several times."""
    items = make_items(4, k=4, seed=1)
    twice = items + [items[1]]
    cfg = DebateConfig(method="majority", n_agents=3)
    with pytest.raises(ValueError) as e:
        run_experiment("dupes", twice, [cfg], SimPopulation(seed=0), progress=False)
    assert str(e.value) == (
        f"experiment 'dupes': question id {items[1].id!r} is at positions 1 and 4 of the question "
        "list; each question may appear once (use repeats= to run one several times)"
    )
    assert not list(tmp_outputs.rglob("transcripts.jsonl*")) and not list(tmp_outputs.rglob("meta.json"))
    run_experiment("dupes", items, [cfg], SimPopulation(seed=0), repeats=2, progress=False)  # the right way


def test_every_cut_position_is_called_a_cut_and_a_wrong_character_is_not(tmp_path):
    """Wherever a download stops (inside a string, a number, true/false/null, between tokens), the message
    says the file ends mid-record; a wrong character with text after it is only invalid JSON."""
    rec = {**arc(5), "n": -12.5, "e": 1.5e-7, "t": True, "f": False, "z": None, "s": 'say "hi"'}
    line, doc = json.dumps(rec), json.dumps([rec] * 2, indent=1)
    path = tmp_path / "x.jsonl"
    for cut in range(1, len(line)):
        path.write_text(json.dumps(arc(0)) + "\n" + line[:cut])
        with pytest.raises(DataError, match="the file ends in the middle of this record"):
            data_files.jsonl_rows(path)
    path = tmp_path / "x.json"
    for cut in range(1, len(doc)):
        path.write_text(doc[:cut])
        with pytest.raises(DataError, match="the file ends in the middle of the JSON"):
            data_files.json_file(path)
    for bad in ('{"a": tru e}', '{"a": x}', '{"a": 1} extra'):
        path.write_text(bad)
        with pytest.raises(DataError) as e:
            data_files.json_file(path)
        assert "invalid JSON" in str(e.value) and "ends in the middle" not in str(e.value)


# ----------------------------------------------------------------------------- own question files: odd files
GOOD = '{"question": "2+2?", "options": ["3", "4"], "answer": "B"}\n'


def test_a_jsonl_with_a_bom_is_read_like_a_csv_with_one(tmp_path):
    from acemad_utils.data.own import read_questions

    plain, bom = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl"
    plain.write_text(GOOD)
    bom.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert read_questions(bom) == read_questions(plain)


@pytest.mark.parametrize(
    "line, says",
    [
        ("[" * 100_000 + "]" * 100_000, "line 1: JSON nested too deeply"),
        ('{"question": "2+2\\ud800?", "options": ["3", "4"], "answer": "B"}', "line 1"),
    ],
    ids=["deep", "lone surrogate"],
)
def test_a_question_file_that_is_not_records_is_one_line_naming_it(tmp_path, line, says):
    from acemad_utils.data.own import read_questions

    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataError) as e:
        read_questions(path)
    assert str(e.value).startswith(f"{path}") and says in str(e.value) and "\n" not in str(e.value)


def test_a_fifo_is_not_a_regular_file_not_a_missing_one(tmp_path):
    import os

    from acemad_utils.data.own import read_questions

    fifo = tmp_path / "q.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="not a regular file"):
        read_questions(fifo)
    with pytest.raises(DataError, match="no such file"):
        read_questions(tmp_path / "absent.jsonl")


# ----------------------------------------------------------------------------- any dataset by its columns
#: One made-up row in each published shape (never a benchmark item): ARC-Challenge (allenai/ai2_arc), MMLU-Pro
#: (TIGER-Lab/MMLU-Pro) and TruthfulQA multiple_choice (truthful_qa), with the columns the docs name for them.
SHAPES = {
    "arc": (
        {"id": "a1", "question": "Which melts first in the sun?", "answerKey": "2",
         "choices": {"text": ["a rock", "an ice cube", "a nail"], "label": ["1", "2", "3"]}},
        dict(question="question", choices="choices", answer="answerKey", id="id"), ("a1", "2", ["1", "2", "3"]),
    ),
    "mmlu_pro": (
        {"question_id": 12, "question": "Which number is even?", "options": ["3", "5", "8", "9"], "answer": "C",
         "answer_index": 2, "cot_content": "", "category": "math", "src": "made-up"},
        dict(question="question", choices="options", answer="answer_index", id="question_id"),
        ("12", "C", list("ABCD")),
    ),
    "truthfulqa": (
        {"question": "Can a goldfish remember things for months?",
         "mc1_targets": {"choices": ["Yes, for months.", "No, only for three seconds."], "labels": [1, 0]},
         "mc2_targets": {"choices": ["Yes, for months.", "Yes.", "No."], "labels": [1, 1, 0]}},
        dict(question="question", choices="mc1_targets"), (None, "A", ["A", "B"]),
    ),
}  # fmt: skip


def _write_shape(path: Path, rows: list) -> Path:
    if path.suffix == ".jsonl":
        jsonl(path.parent, path.name, rows)
    elif path.suffix == ".csv":  # nested columns written out as JSON, as pandas' to_csv of a JSON-decoded frame
        cols = list(rows[0])
        lines = [",".join(cols)] + [
            ",".join(
                '"' + (json.dumps(r[c]) if isinstance(r[c], (dict, list)) else str(r[c])).replace('"', '""') + '"'
                for c in cols
            )
            for r in rows
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_published_shapes_by_their_columns(tmp_path, shape, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow", reason="Parquet needs pyarrow (pip install pyarrow)")
    row, cols, (qid, gold, labels) = SHAPES[shape]
    if suffix == ".csv" and isinstance(row.get("answer_index"), int):
        cols = dict(cols, answer="answer")  # every CSV cell is text: the letter column (docs/own-questions.md)
    (q,) = own.read_columns(_write_shape(tmp_path / f"{shape}{suffix}", [row]), **cols)
    assert q.question == row["question"] and list(q.options) == labels and q.answer == gold
    assert q.id == (qid or own.content_id(q.question, q.options))


def test_multi_answer_targets_are_refused_in_one_line(tmp_path):
    row = SHAPES["truthfulqa"][0]
    path = _write_shape(tmp_path / "tqa.jsonl", [row, row])
    with pytest.raises(DataError) as e:
        own.read_columns(path, choices="mc2_targets")
    assert str(e.value) == (
        f"{path}, line 1: column 'mc2_targets' marks 2 choices correct; AceMAD scores one answer per question "
        "(a multi-answer target such as TruthfulQA's mc2_targets: use mc1_targets)"
    )


@pytest.mark.parametrize(
    "cols,pattern",
    [
        (dict(choices="choice"), r"line 1: no column 'choice' \(--choices-col\); the row has \['id', 'question'"),
        (dict(choices="choices", answer="key"), r"line 1: no column 'key' \(--answer-col\)"),
        (dict(choices="choices", answer="answerKey", id="nope"), r"line 1: no column 'nope' \(--id-col\)"),
        (dict(question="question.stem", choices="choices"), r"no column 'question.stem' \(--question-col\)"),
        (dict(choices="id"), r"line 1: field 'options' must be a list of texts or a label -> text map"),
    ],
)
def test_a_wrong_column_is_one_line_naming_it(tmp_path, cols, pattern):
    path = _write_shape(tmp_path / "arc.jsonl", [SHAPES["arc"][0]])
    with pytest.raises(DataError, match=pattern) as e:
        own.read_columns(path, **cols)
    assert "\n" not in str(e.value)


def test_nested_columns_option_columns_and_index_answers(tmp_path):
    """ARC's original nesting (question.stem, a list of {text, label}), one column per option, 0-based indexes."""
    choices = [{"text": "one", "label": "A"}, {"text": "two", "label": "B"}]
    arc = {"id": "x", "answerKey": "B", "question": {"stem": "Pick two?", "choices": choices}}
    (q,) = own.read_columns(jsonl(tmp_path, "o.jsonl", [arc]), "question.stem", "question.choices", "answerKey", "id")
    assert (q.question, q.options, q.answer) == ("Pick two?", {"A": "one", "B": "two"}, "B")
    csv = tmp_path / "cols.csv"
    csv.write_text("q,A,B,C,gold\nWhich?,x,y,,y\n", encoding="utf-8")
    (q,) = own.read_columns(csv, "q", "A,B,C", "gold")
    assert q.options == {"A": "x", "B": "y"} and q.answer == "B"
    bad = jsonl(tmp_path, "i.jsonl", [{"question": "q?", "options": ["a", "b"], "answer_index": 2}])
    with pytest.raises(DataError, match=r"line 1: answer index 2 is outside the 2 options \(0-based\)"):
        own.read_columns(bad, choices="options", answer="answer_index")


def test_parquet_without_an_engine_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in ("pyarrow", "fastparquet") else real(n))
    with pytest.raises(DataError, match=r"x\.parquet: reading Parquet needs pyarrow: pip install pyarrow"):
        own.read_columns(path, choices="options")
