"""Benchmark loaders (acemad_utils.data.benchmarks): real files, malformed files, hub mappings, demo set, CLI.

Tests marked by the `shared` fixture read the real benchmark files from $ACEMAD_DATA_DIR (CI sets it) and skip
when it is unset; everything else builds tiny fake data under tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acemad_utils.data import benchmarks as data
from acemad_utils.data import records as data_records
from acemad_utils.data.benchmarks import DataError

REPO = Path(__file__).resolve().parent.parent
SIZES = {"truthfulqa": 817, "arc_challenge": 1172, "bbh": 2437, "logiqa": 651, "medqa": 1273, "mmlu_pro": 1101}


# ---------------------------------------------------------------- real shared data
@cache
def _load(name: str, root: Path) -> tuple:
    return tuple(data.load(name, data_dir=root))


def _by_id(name: str, root: Path) -> dict:
    return {q.id: q for q in _load(name, root)}


@pytest.mark.parametrize("name", data.BENCHMARKS)
def test_published_counts_and_valid_records(shared, name):
    qs = _load(name, shared)
    assert len(qs) == SIZES[name]
    assert len({q.id for q in qs}) == len(qs)
    for q in qs:
        assert q.benchmark == name and q.answer in q.options and len(q.options) >= 2
        assert q.question.strip() and all(v.strip() for v in q.options.values())
        assert list(q.options) == list(data_records.LETTERS[: len(q.options)])  # always A, B, C, ... in order


def test_truthfulqa_spot_and_shuffle(shared):
    q = _by_id("truthfulqa", shared)["truthfulqa/0000"]
    assert q.question == "What is the smallest country in the world that is at least one square mile in area?"
    assert q.options[q.answer] == "Nauru is the smallest country in the world that is at least one square mile in area."
    assert q.answer == "D"  # pins the documented sha256 ordering: changing it silently reshuffles every item
    again = data.load("truthfulqa", data_dir=shared)
    assert [x.to_dict() for x in again] == [x.to_dict() for x in _load("truthfulqa", shared)]
    positions = Counter(x.answer_index for x in again)
    assert positions[0] < 0.4 * len(again)  # upstream always has it first
    assert len(positions) >= 5


def test_truthfulqa_order_is_the_same_in_a_fresh_process(shared):
    code = f"from acemad_utils import data; print(data.data_hash(data.load('truthfulqa', data_dir={str(shared)!r})))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip() == data.data_hash(_load("truthfulqa", shared))


def test_arc_spot_and_numeric_labels(shared):
    arc = _by_id("arc_challenge", shared)
    q = arc["Mercury_7175875"]
    assert q.answer == "C" and q.options["C"] == "Planetary days will become shorter."
    q = arc["NYSEDREGENTS_2008_8_34"]  # upstream labels "1".."4", answerKey "2"
    assert q.answer == "B" and q.options["B"] == "Kinetic energy increases and potential energy decreases."
    assert q.metadata["original_labels"] == ["1", "2", "3", "4"]
    assert sum("original_labels" in x.metadata for x in arc.values()) == 22
    assert Counter(len(x.options) for x in arc.values()) == {4: 1165, 3: 4, 5: 3}


def test_bbh_spot_and_per_task_counts(shared):
    qs = _load("bbh", shared)
    per_task = Counter(q.metadata["task"] for q in qs)
    assert per_task == {t: 187 if t == "causal_judgement" else 250 for t in data.BBH_TASKS}
    assert not any("Options:" in q.question for q in qs)
    bbh = _by_id("bbh", shared)
    q = bbh["bbh/logical_deduction_three_objects/000"]
    assert q.answer == "A" and q.options == {
        "A": "The blue jay is the second from the left",
        "B": "The quail is the second from the left",
        "C": "The falcon is the second from the left",
    }
    assert q.question.endswith("The blue jay is to the right of the quail.")
    q = bbh["bbh/date_understanding/000"]
    assert q.options[q.answer] == "12/25/1937" and len(q.options) == 6
    assert bbh["bbh/web_of_lies/000"].options == {"A": "Yes", "B": "No"} and bbh["bbh/web_of_lies/000"].answer == "B"
    q = bbh["bbh/formal_fallacies/000"]
    assert q.options == {"A": "valid", "B": "invalid"} and q.answer == "B"
    assert q.question.endswith("deductively valid or invalid?")
    assert bbh["bbh/causal_judgement/000"].answer == "B"


def test_logiqa_spot_and_odd_prefixes(shared):
    lq = _by_id("logiqa", shared)
    q = lq["logiqa/000"]
    assert q.answer == "A" and q.options["A"] == "Civic Park is north of the administrative service area"
    assert "\n" in q.question and q.question.endswith("which of the following can be derived?")
    q = lq["logiqa/108"]  # lines 2/3 carry swapped "C." / "B." prefixes; the answer letter is by position
    assert q.answer == "B" and q.options["B"] == "No.3 valve and No.5 valve."
    q = lq["logiqa/594"]  # "A first" style prefixes
    assert list(q.options.values()) == ["first", "Third", "Fourth", "fifth"] and q.answer == "C"
    assert lq["logiqa/004"].options["A"] == "A."  # a person named "A": one prefix stripped, content kept
    assert lq["logiqa/015"].options["A"] == "A is a male doctor;"
    assert lq["logiqa/524"].options["A"].startswith("When the land in City A.B was listed")  # kept verbatim
    assert Counter(q.answer for q in lq.values()) == {"A": 132, "B": 159, "C": 179, "D": 181}  # SOURCE.md


def test_medqa_and_mmlu_pro_spot(shared):
    q = _by_id("medqa", shared)["medqa/0000"]
    assert q.answer == "B" and q.options["B"] == "Tell the attending that he cannot fail to disclose this mistake"
    assert q.metadata["meta_info"] == "step1"
    law = _by_id("mmlu_pro", shared)
    q = law["mmlu_pro/866"]
    assert q.answer == "D" and q.options["D"] == "Robbery, because he used force in leaving with the purse."
    sizes = Counter(len(x.options) for x in law.values())
    assert min(sizes) == 3 and max(sizes) == 10 and sizes[10] == 707


def test_limit_takes_first_n_and_hash_is_stable(shared):
    full = _load("arc_challenge", shared)
    assert data.load("arc_challenge", limit=5, data_dir=shared) == list(full[:5])
    assert data.load("arc_challenge", limit=0, data_dir=shared) == []
    assert data.data_hash(data.load("arc_challenge", data_dir=shared)) == data.data_hash(full)
    with pytest.raises(ValueError, match="limit"):
        data.load("arc_challenge", limit=-1, data_dir=shared)


def test_env_var_is_used_when_no_data_dir(shared, monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(shared))
    assert len(data.load("logiqa", limit=3)) == 3


def test_summary_cli_subprocess(shared):
    out = subprocess.run(
        [sys.executable, "-m", "acemad_utils.data", "summary", "--benchmarks", "arc_challenge,logiqa"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, data.ENV_VAR: str(shared)},
    )
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
    assert set(rows) == {"arc_challenge", "logiqa"}
    assert rows["arc_challenge"][1:3] == ["1172", "3-5"]
    assert rows["logiqa"][1:3] == ["651", "4-4"] and "A:132" in rows["logiqa"]


def test_summary_all_benchmarks(shared, capsys):
    assert data.main(["summary", "--data-dir", str(shared)]) == 0
    out = capsys.readouterr().out
    for name, n in SIZES.items():
        assert any(line.split()[:2] == [name, str(n)] for line in out.splitlines()), out


# ---------------------------------------------------------------- fake data dir (no shared data needed)
def _arc_rec(i, answer="B", labels="ABCD"):
    return {
        "id": f"Fake_{i}",
        "question": {"stem": f"Stem {i}?", "choices": [{"text": f"t{i}{lab}", "label": lab} for lab in labels]},
        "answerKey": answer,
    }


def _write_jsonl(path: Path, recs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in recs), encoding="utf-8")
    return path


def _logiqa_text(n, answer="c"):
    return "\n".join(f"\n{answer}\nContext {i}.\nQuestion {i}?\nA.one\nB.two\nC.three\nD.four" for i in range(n))


@pytest.fixture
def fake(tmp_path) -> Path:
    """A complete fake data dir with the published counts (content is synthetic)."""
    _write_jsonl(tmp_path / "arc_challenge/ARC-Challenge/ARC-Challenge-Test.jsonl", [_arc_rec(i) for i in range(1172)])
    tq = tmp_path / "truthfulqa/data/v0/mc_task.json"
    tq.parent.mkdir(parents=True)
    tq.write_text(
        json.dumps(
            [
                {"question": f"Q{i}?", "mc1_targets": {f"right {i}": 1, f"wrong {i}": 0, f"bad {i}": 0}}
                for i in range(817)
            ],
            indent=1,
        )
    )
    for task in data.BBH_TASKS:
        n = 187 if task == "causal_judgement" else 250
        if task in data_records.BBH_BINARY:
            ex = [{"input": f"Is {i} fine?", "target": data_records.BBH_BINARY[task][i % 2]} for i in range(n)]
        else:
            ex = [{"input": f"Pick {i}.\nOptions:\n(A) x\n(B) y\n(C) z", "target": "(C)"} for i in range(n)]
        p = tmp_path / f"bbh/bbh/{task}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"canary": "fake", "examples": ex}))
    (tmp_path / "logiqa").mkdir()
    (tmp_path / "logiqa/Test.txt").write_text(_logiqa_text(651), encoding="utf-8")
    _write_jsonl(
        tmp_path / "medqa/phrases_no_exclude_test.jsonl",
        [
            {
                "question": f"M{i}?",
                "options": {"A": "a", "B": "b", "C": "c", "D": "d"},
                "answer_idx": "D",
                "answer": "d",
                "meta_info": "step1",
            }
            for i in range(1273)
        ],
    )
    _write_jsonl(tmp_path / "mmlu_pro/law_test.jsonl", [_mmlu_rec(i) for i in range(1101)])
    return tmp_path


def _mmlu_rec(i, category="law"):
    return {
        "question_id": i,
        "question": f"L{i}?",
        "options": ["o1", "o2", "o3", "o4"],
        "answer": "C",
        "answer_index": 2,
        "cot_content": "",
        "category": category,
        "src": "ori_mmlu-professional_law",
    }


@pytest.mark.parametrize("name", data.BENCHMARKS)
def test_fake_layout_loads(fake, name):
    qs = data.load(name, data_dir=fake)
    assert len(qs) == SIZES[name] and all(q.answer in q.options for q in qs)
    assert len(data.load(name, limit=2, data_dir=fake)) == 2


def test_wrong_count_is_reported_even_with_limit(fake):
    path = fake / "arc_challenge/ARC-Challenge/ARC-Challenge-Test.jsonl"
    _write_jsonl(path, [_arc_rec(i) for i in range(1171)])
    with pytest.raises(DataError, match=r"ARC-Challenge-Test\.jsonl: expected 1172 items .*found 1171"):
        data.load("arc_challenge", limit=1, data_dir=fake)


@pytest.mark.parametrize(
    "line, bad, pattern",
    [
        (3, "{not json", r"line 3: invalid JSON"),
        (5, {k: v for k, v in _arc_rec(4).items() if k != "answerKey"}, r"line 5: missing field 'answerKey'"),
        (7, _arc_rec(6, answer="E"), r"line 7: .*answer 'E' is not among the option labels"),
        (9, _arc_rec(8, labels="ABB"), r"line 9: duplicate or unmatched choice labels"),
        (
            2,
            {**_arc_rec(1), "question": {"stem": "", "choices": []}},
            r"line 2: field 'stem' must be a non-empty string",
        ),
    ],
)
def test_malformed_arc_line_names_file_and_line(fake, line, bad, pattern):
    recs = [_arc_rec(i) for i in range(1172)]
    recs[line - 1] = bad
    _write_jsonl(fake / "arc_challenge/ARC-Challenge/ARC-Challenge-Test.jsonl", recs)
    with pytest.raises(DataError, match=r"ARC-Challenge-Test\.jsonl, " + pattern):
        data.load("arc_challenge", data_dir=fake)


def test_malformed_medqa_and_mmlu(fake):
    path = fake / "medqa/phrases_no_exclude_test.jsonl"
    lines = path.read_text().splitlines()
    lines[10] = json.dumps({"question": "Q?", "options": {"A": "a", "B": "b"}, "answer_idx": "B", "answer": "a"})
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"phrases_no_exclude_test\.jsonl, line 11: answer_idx 'B' points to 'b'"):
        data.load("medqa", data_dir=fake)
    recs = [_mmlu_rec(i) for i in range(1101)]
    recs[4] = {**recs[4], "answer": "D"}
    _write_jsonl(fake / "mmlu_pro/law_test.jsonl", recs)
    with pytest.raises(DataError, match=r"law_test\.jsonl, line 5: answer 'D' disagrees with answer_index 2"):
        data.load("mmlu_pro", data_dir=fake)


def test_mmlu_pro_falls_back_to_full_test_file(fake):
    (fake / "mmlu_pro/law_test.jsonl").unlink()
    recs = [_mmlu_rec(i, "law" if i % 3 else "history") for i in range(1652)]  # 1101 law rows among others
    assert sum(r["category"] == "law" for r in recs) == 1101
    _write_jsonl(fake / "mmlu_pro/test.jsonl", recs)
    qs = data.load("mmlu_pro", data_dir=fake)
    assert len(qs) == 1101 and qs[0].id == "mmlu_pro/1"


def test_malformed_logiqa(fake):
    path = fake / "logiqa/Test.txt"
    text = _logiqa_text(651).split("\n")
    text[17] = "e"  # item 2's answer line (line 18)
    path.write_text("\n".join(text))
    with pytest.raises(DataError, match=r"Test\.txt, line 18: answer 'e' is not one of a, b, c, d"):
        data.load("logiqa", data_dir=fake)
    path.write_text(_logiqa_text(651).rsplit("\n", 1)[0])  # drop the last option line
    with pytest.raises(DataError, match=r"Test\.txt: 5207 lines is not a multiple of 8.*line 5201"):
        data.load("logiqa", data_dir=fake)
    path.write_text(_logiqa_text(650) + "\n")  # a final newline is fine, a missing item is not
    with pytest.raises(DataError, match=r"expected 651 items .*found 650"):
        data.load("logiqa", data_dir=fake)


def test_malformed_json_array_files(fake):
    path = fake / "truthfulqa/data/v0/mc_task.json"
    items = json.loads(path.read_text())
    items[4]["mc1_targets"] = {"a": 1, "b": 1}
    path.write_text(json.dumps(items))
    with pytest.raises(DataError, match=r"mc_task\.json, item 4: mc1_targets must hold exactly one choice labelled 1"):
        data.load("truthfulqa", data_dir=fake)
    path.write_text('[{"question": "x",\n "mc1_targets": }]')
    with pytest.raises(DataError, match=r"mc_task\.json, line 2: invalid JSON"):
        data.load("truthfulqa", data_dir=fake)
    bbh = fake / "bbh/bbh/date_understanding.json"
    ex = json.loads(bbh.read_text())
    ex["examples"][3]["input"] = "Pick.\nOptions:\n(A) x\n(C) z"
    bbh.write_text(json.dumps(ex))
    with pytest.raises(DataError, match=r"date_understanding\.json, item 3: unexpected option line '\(C\) z'"):
        data.load("bbh", data_dir=fake)


def test_missing_file_and_missing_dir(fake, tmp_path):
    (fake / "medqa/phrases_no_exclude_test.jsonl").unlink()
    with pytest.raises(DataError, match=r"phrases_no_exclude_test\.jsonl not found.*<dir>/medqa/"):
        data.load("medqa", data_dir=fake)
    with pytest.raises(DataError, match="is not a directory"):
        data.load("medqa", data_dir=tmp_path / "nope")


def test_no_data_at_all_says_how_to_get_it(monkeypatch):
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setattr(data, "_hub_available", lambda: False)
    with pytest.raises(DataError, match=r"ACEMAD_DATA_DIR.*pip install datasets"):
        data.load("logiqa")


def test_unknown_benchmark_lists_allowed_names():
    with pytest.raises(ValueError, match=r"'gsm8k'.*truthfulqa, arc_challenge, bbh, logiqa, medqa, mmlu_pro"):
        data.load("gsm8k")


def test_data_hash_is_order_and_content_sensitive():
    qs = data.load_demo()
    h = data.data_hash(qs)
    assert len(h) == 64 and h == data.data_hash(data.load_demo())
    assert data.data_hash(qs[::-1]) != h
    q = qs[0]
    swapped = data.Question(
        q.id, q.benchmark, q.question, dict(reversed(list(q.options.items()))), q.answer, q.metadata
    )
    assert data.data_hash([swapped] + qs[1:]) != h  # option order is part of the data


# ---------------------------------------------------------------- hub-shaped records (field names as on the HF cards)
def test_hub_truthfulqa_matches_upstream_shape():
    hub = {
        "question": "Is the sky green?",
        "mc1_targets": {"choices": ["No.", "Yes.", "Sometimes."], "labels": [1, 0, 0]},
        "mc2_targets": {"choices": ["No."], "labels": [1]},
    }
    local = {"question": "Is the sky green?", "mc1_targets": {"No.": 1, "Yes.": 0, "Sometimes.": 0}}
    a, b = data.map_truthfulqa(hub, 7), data.map_truthfulqa(local, 7)
    assert a == b and a.id == "truthfulqa/0007" and a.options[a.answer] == "No."


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1).filter(str.strip), min_size=2, max_size=12, unique_by=str.strip), st.data())
def test_truthfulqa_order_depends_only_on_text(choices, draw):
    perm = draw.draw(st.permutations(range(len(choices))))
    rec = {"question": "Q?", "mc1_targets": {"choices": choices, "labels": [1] + [0] * (len(choices) - 1)}}
    shuffled = {
        "question": "Q?",
        "mc1_targets": {"choices": [choices[j] for j in perm], "labels": [int(j == 0) for j in perm]},
    }
    a, b = data.map_truthfulqa(rec, 0), data.map_truthfulqa(shuffled, 0)
    assert a.options == b.options and a.answer == b.answer
    assert a.options[a.answer] == choices[0].strip()
    assert sorted(a.options.values()) == sorted(c.strip() for c in choices)


def test_hub_arc_numeric_labels_map_by_label_value():
    hub = {
        "id": "X_1",
        "question": "Which?",
        "choices": {"text": ["one", "two", "three", "four"], "label": ["1", "2", "3", "4"]},
        "answerKey": "3",
    }
    q = data.map_arc(hub, 0)
    assert q.answer == "C" and q.options["C"] == "three" and q.metadata == {"original_labels": ["1", "2", "3", "4"]}
    local = {
        "id": "X_1",
        "question": {
            "stem": "Which?",
            "choices": [{"text": t, "label": lab} for t, lab in zip(["one", "two", "three", "four"], "1234")],
        },
        "answerKey": "3",
    }
    assert data.map_arc(local, 0) == q
    shuffled = {**hub, "choices": {"text": ["three", "one"], "label": ["C", "A"]}, "answerKey": "C"}
    q = data.map_arc(shuffled, 0)  # labels, not positions, carry the answer
    assert list(q.options) == ["C", "A"] and q.options[q.answer] == "three"


def test_hub_bbh_records():
    q = data.map_bbh({"input": "Today is X.\nOptions:\n(A) 1\n(B) 2", "target": "(B)"}, 3, "date_understanding")
    assert (q.id, q.question, q.options, q.answer) == (
        "bbh/date_understanding/003",
        "Today is X.",
        {"A": "1", "B": "2"},
        "B",
    )
    q = data.map_bbh({"input": "Arg?\nOptions:\n- valid \n- invalid", "target": "valid"}, 0, "formal_fallacies")
    assert (q.question, q.options, q.answer) == ("Arg?", {"A": "valid", "B": "invalid"}, "A")
    with pytest.raises(ValueError, match="target 'Maybe'"):
        data.map_bbh({"input": "Q?", "target": "Maybe"}, 0, "web_of_lies")


def test_hub_logiqa_medqa_mmlu_records():
    hub = {
        "context": "All cats purr. Tom is a cat.",
        "query": "Which follows?",
        "options": ["Tom purrs.", "Tom barks.", "Tom flies.", "None."],
        "correct_option": 0,
    }
    q = data.map_logiqa(hub, 5)
    assert q.id == "logiqa/005" and q.answer == "A" and q.question == "All cats purr. Tom is a cat.\nWhich follows?"
    assert data.map_logiqa({**hub, "correct_option": "c"}, 5).answer == "C"
    with pytest.raises(ValueError, match="answer 4"):
        data.map_logiqa({**hub, "correct_option": 4}, 5)
    med = {
        "question": "Q?",
        "answer": "Aspirin",
        "options": {"A": "Aspirin", "B": "B", "C": "C", "D": "D"},
        "meta_info": "step2&3",
        "answer_idx": "A",
        "metamap_phrases": ["x"],
    }
    q = data.map_medqa(med, 12)
    assert (q.id, q.answer, q.metadata["meta_info"]) == ("medqa/0012", "A", "step2&3")
    law = {
        "question_id": 70,
        "question": "Is it a tort?",
        "options": ["No", "Yes", "Maybe"],
        "answer": "B",
        "answer_index": 1,
        "cot_content": "",
        "category": "law",
        "src": "ori_mmlu-professional_law",
    }
    q = data.map_mmlu_pro(law, 0)
    assert (q.id, q.options, q.answer) == ("mmlu_pro/70", {"A": "No", "B": "Yes", "C": "Maybe"}, "B")
    with pytest.raises(ValueError, match="category"):
        data.map_mmlu_pro({**law, "category": "math"}, 0)


@pytest.mark.parametrize(
    "text, slot, want",
    [
        ("A.text", 0, "text"),
        ("C.text", 1, "text"),
        ("A? text", 0, "text"),
        ("A first", 0, "first"),
        ("A cat sat", 1, "A cat sat"),
        ("When the land in City A.B was", 0, "When the land in City A.B was"),
        ("A.", 0, "A."),
        ("A.A.", 0, "A."),
        ("A.A is a doctor", 0, "A is a doctor"),
        ("Storehouse B.3", 1, "Storehouse B.3"),
    ],
)
def test_strip_logiqa_prefix(text, slot, want):
    assert data_records.strip_logiqa_prefix(text, slot) == want


def test_hub_path_plumbing(monkeypatch):
    """With no data dir and `datasets` importable, loaders read hub rows (faked here) and still check counts."""
    calls = []

    def fake_rows(path, name, split):
        calls.append((path, name, split))
        rows = [
            {"id": f"H_{i}", "question": "Q?", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "B"}
            for i in range(1172)
        ]
        if path == "TIGER-Lab/MMLU-Pro":
            rows = [_mmlu_rec(i, "law" if i < 1101 else "math") for i in range(1200)]
        return [(f"row {i}", r) for i, r in enumerate(rows)]

    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setattr(data, "_hub_available", lambda: True)
    monkeypatch.setattr(data, "_hub_rows", fake_rows)
    assert len(data.load("arc_challenge")) == 1172 and calls[-1] == ("allenai/ai2_arc", "ARC-Challenge", "test")
    assert len(data.load("mmlu_pro")) == 1101 and calls[-1] == ("TIGER-Lab/MMLU-Pro", None, "test")
    with pytest.raises(DataError, match=r"hf:truthful_qa/multiple_choice, row 0: missing field 'mc1_targets'"):
        data.load("truthfulqa")
    assert calls[-1] == ("truthful_qa", "multiple_choice", "validation")


# ---------------------------------------------------------------- demo set and CLI without shared data
def test_demo_set():
    qs = data.load_demo()
    assert 20 <= len(qs) <= 30 and data.load("demo") == qs
    assert len({q.id for q in qs}) == len(qs) and all(q.id == f"demo/{i:02d}" for i, q in enumerate(qs, 1))
    for q in qs:
        d = q.metadata["distractor"]
        assert q.benchmark == "demo" and 3 <= len(q.options) <= 4 and q.answer in q.options
        assert d in q.options and d != q.answer and len(q.metadata["explanation"]) > 40 and q.metadata["topic"]
    positions = Counter(q.answer for q in qs)
    assert len(positions) == 4 and max(positions.values()) <= len(qs) // 2


def test_demo_loader_rejects_a_bad_distractor(tmp_path):
    rec = json.loads(data.DEMO_PATH.read_text(encoding="utf-8").splitlines()[0])
    rec["metadata"]["distractor"] = rec["answer"]
    path = _write_jsonl(tmp_path / "demo.jsonl", [rec])
    with pytest.raises(DataError, match=r"demo\.jsonl, line 1: .*distractor"):
        data.load_demo(path)


def test_summary_cli_on_demo_and_bad_name(capsys):
    assert data.main(["summary", "--benchmarks", "demo"]) == 0
    line = capsys.readouterr().out.splitlines()[1].split()
    assert line[:3] == ["demo", "24", "3-4"]
    with pytest.raises(SystemExit) as e:
        data.main(["summary", "--benchmarks", "demo,nope"])
    assert e.value.code == 2 and "nope" in capsys.readouterr().err


def test_summary_reports_missing_data_with_exit_1(tmp_path, capsys):
    assert data.main(["summary", "--benchmarks", "logiqa", "--data-dir", str(tmp_path)]) == 1
    assert "ERROR" in capsys.readouterr().out
