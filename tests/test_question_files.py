"""Question lists and your own question files: a question listed twice, odd files (a BOM, deep nesting, a FIFO)
and any dataset read by its columns (JSONL, CSV, Parquet). Every problem is one line naming the file and the row."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data import own
from acemad_utils.data.benchmarks import DataError
from acemad_utils.experiments.runner import run_experiment
from acemad_utils.protocol.config import DebateConfig


def jsonl(root: Path, rel: str, recs) -> Path:
    (root / rel).write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return root / rel


def test_duplicate_ids_in_a_run_question_list(tmp_outputs):
    """A run keys its records by question id: a question listed twice is an error before anything runs
    (nothing is written), not a silent overwrite; repeats= is how one question is run several times."""
    items = make_items(4, k=4, seed=1)
    cfg = DebateConfig(method="majority", n_agents=3)
    with pytest.raises(ValueError) as e:
        run_experiment("dupes", items + [items[1]], [cfg], SimPopulation(seed=0), progress=False)
    assert str(e.value) == (
        f"experiment 'dupes': question id {items[1].id!r} is at positions 1 and 4 of the question "
        "list; each question may appear once (use repeats= to run one several times)"
    )
    assert not list(tmp_outputs.rglob("transcripts.jsonl*")) and not list(tmp_outputs.rglob("meta.json"))
    run_experiment("dupes", items, [cfg], SimPopulation(seed=0), repeats=2, progress=False)  # the right way


GOOD = '{"question": "2+2?", "options": ["3", "4"], "answer": "B"}\n'


@pytest.mark.parametrize(
    "line, says",
    [("[" * 100_000 + "]" * 100_000, "line 1: JSON nested too deeply"),
     ('{"question": "2+2\\ud800?", "options": ["3", "4"], "answer": "B"}', "line 1")],
    ids=["deep", "lone surrogate"],
)  # fmt: skip
def test_odd_question_files(tmp_path, line, says):
    plain, bom = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl"
    plain.write_text(GOOD)
    bom.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert own.read_questions(bom) == own.read_questions(plain)  # a BOM, as a CSV may have one
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataError) as e:
        own.read_questions(path)
    assert str(e.value).startswith(f"{path}") and says in str(e.value) and "\n" not in str(e.value)
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(DataError, match="not a regular file"):
        own.read_questions(tmp_path / "fifo.jsonl")
    with pytest.raises(DataError, match="no such file"):
        own.read_questions(tmp_path / "absent.jsonl")


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
    import pandas as pd

    if path.suffix == ".jsonl":
        return jsonl(path.parent, path.name, rows)
    if path.suffix == ".parquet":
        pd.DataFrame(rows).to_parquet(path)
        return path
    # CSV: nested columns written out as JSON, as pandas' to_csv of a JSON-decoded frame
    pd.DataFrame([{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()} for r in rows]).to_csv(
        path, index=False
    )
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
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed: its import fails
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(DataError, match=r"x\.parquet: reading Parquet needs pyarrow: pip install pyarrow"):
        own.read_columns(path, choices="options")
