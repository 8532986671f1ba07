"""Benchmark loaders: the real files ($ACEMAD_DATA_DIR, else skipped) and their pinned hashes, hub-shaped records,
the demo set, and every broken file as one line naming the file, the line or item and the fault."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acemad_utils.data import benchmarks as data
from acemad_utils.data.benchmarks import DataError

REPO = Path(__file__).resolve().parent.parent
SIZES = {"truthfulqa": 817, "arc_challenge": 1172, "bbh": 2437, "logiqa": 651, "medqa": 1273, "mmlu_pro": 1101}
# data_hash of each whole benchmark: any change to a file or to a mapping choice (order, labels, prefixes) shows here
HASHES = {
    "truthfulqa": "09cb39f63b846294efaeff063ec6c0d35ed54c5839bb37d01190ce217a4ea80b",
    "arc_challenge": "6b7ebd7ce46f9eaedfa438f120eccebe154335f84197609a483d1d00ae44d0d8",
    "bbh": "8c8432a3ccecf0bf7cf252d912c1394c929e6dc24a1a093ed249285672a39e3f",
    "logiqa": "f7d5820f1aca7eac1bc7f892c7f86c18ba85d679be1397e8d4067155a3845521",
    "medqa": "a1cacad250815095070c69a8a06d03bf614b8ecfd61e4fde7fe968f4a5a821c5",
    "mmlu_pro": "d924f15e717338de6dbb300db98aec23c7c04b2b17e7565e6e64ef01d229702a",
}
ARC = "arc_challenge/ARC-Challenge/ARC-Challenge-Test.jsonl"
MEDQA = "medqa/phrases_no_exclude_test.jsonl"
MMLU = "mmlu_pro/law_test.jsonl"
TQA = "truthfulqa/data/v0/mc_task.json"
BBH = "bbh/bbh/logical_deduction_three_objects.json"


# ----------------------------------------------------------------------------- the real shared files
@cache
def _load(name: str, root: Path) -> tuple:
    return tuple(data.load(name, data_dir=root))


def _by_id(name: str, root: Path) -> dict:
    return {q.id: q for q in _load(name, root)}


@pytest.mark.parametrize("name", data.BENCHMARKS)
def test_published_counts_pinned_hashes_and_valid_records(shared, name):
    qs = _load(name, shared)
    assert len(qs) == SIZES[name] and len({q.id for q in qs}) == len(qs) and data.data_hash(qs) == HASHES[name]
    for q in qs:
        assert q.benchmark == name and q.answer in q.options and len(q.options) >= 2
        assert q.question.strip() and all(v.strip() for v in q.options.values())
        assert list(q.options) == list(data.LETTERS[: len(q.options)])  # always A, B, C, ... in order


def test_truthfulqa_spot_and_shuffle_the_same_in_a_fresh_process(shared):
    q = _by_id("truthfulqa", shared)["truthfulqa/0000"]
    assert q.question == "What is the smallest country in the world that is at least one square mile in area?"
    assert q.options[q.answer] == "Nauru is the smallest country in the world that is at least one square mile in area."
    assert q.answer == "D"  # pins the documented sha256 ordering: changing it silently reshuffles every item
    positions = Counter(x.answer_index for x in _load("truthfulqa", shared))
    assert positions[0] < 0.4 * SIZES["truthfulqa"] and len(positions) >= 5  # upstream always has it first
    code = f"from acemad_utils import data; print(data.data_hash(data.load('truthfulqa', data_dir={str(shared)!r})))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == HASHES["truthfulqa"]


def test_the_documented_mapping_choices_on_the_real_items(shared):
    arc = _by_id("arc_challenge", shared)
    q = arc["NYSEDREGENTS_2008_8_34"]  # upstream labels "1".."4", answerKey "2"
    assert q.answer == "B" and q.options["B"] == "Kinetic energy increases and potential energy decreases."
    assert q.metadata["original_labels"] == ["1", "2", "3", "4"]
    assert sum("original_labels" in x.metadata for x in arc.values()) == 22
    bbh = _by_id("bbh", shared)
    assert not any("Options:" in q.question for q in bbh.values())
    q = bbh["bbh/formal_fallacies/000"]
    assert q.options == {"A": "valid", "B": "invalid"} and q.answer == "B"
    lq = _by_id("logiqa", shared)
    q = lq["logiqa/108"]  # lines 2/3 carry swapped "C." / "B." prefixes; the answer letter is by position
    assert q.answer == "B" and q.options["B"] == "No.3 valve and No.5 valve."
    assert list(lq["logiqa/594"].options.values()) == ["first", "Third", "Fourth", "fifth"]  # "A first" prefixes
    assert lq["logiqa/004"].options["A"] == "A."  # a person named "A": one prefix stripped, content kept
    assert lq["logiqa/524"].options["A"].startswith("When the land in City A.B was listed")  # kept verbatim


def test_limit_env_var_and_unknown_names(shared, monkeypatch):
    full = _load("arc_challenge", shared)
    assert data.load("arc_challenge", limit=5, data_dir=shared) == list(full[:5])
    assert data.load("arc_challenge", limit=0, data_dir=shared) == []
    with pytest.raises(ValueError, match="limit"):
        data.load("arc_challenge", limit=-1, data_dir=shared)
    monkeypatch.setenv(data.ENV_VAR, str(shared))
    assert len(data.load("logiqa", limit=3)) == 3
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        data.load("nope")


# ----------------------------------------------------------------------------- a fake data folder
def arc(i, answer="B", labels="ABCD", qid=None):
    choices = [{"text": f"t{i}{x}", "label": x} for x in labels]
    return {"id": qid or f"Fake_{i}", "question": {"stem": f"Stem {i}?", "choices": choices}, "answerKey": answer}


def medqa(i, idx="D"):
    options = {"A": "a", "B": "b", "C": "c", "D": "d"}
    return {"question": f"M{i}?", "options": options, "answer_idx": idx, "answer": "d", "meta_info": "step1"}


def mmlu(i, category="law", answer="C", index=2, qid=None):
    return {"question_id": i if qid is None else qid, "question": f"L{i}?", "options": ["o1", "o2", "o3", "o4"],
            "answer": answer, "answer_index": index, "cot_content": "", "category": category, "src": "x"}  # fmt: skip


def demo(i, answer="B", qid=None):
    meta, options = {"distractor": "A", "explanation": "why"}, {"A": "a", "B": "b", "C": "c"}
    return {"id": qid or f"demo/{i:02d}", "benchmark": "demo", "question": f"D{i}?", "answer": answer,
            "options": options, "metadata": meta}  # fmt: skip


def write(root: Path, rel: str, content) -> Path:
    """`content` as it is (a str), or a list of records one a line (JSON unless a str)."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(content, str):
        content = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in content)
    path.write_bytes(content.encode("utf-8", "surrogateescape"))  # "\udcff" in a text: the raw byte 0xff
    return path


def logiqa_text(n, answer="c"):
    return "\n".join(f"\n{answer}\nContext {i}.\nQuestion {i}?\nA.one\nB.two\nC.three\nD.four" for i in range(n))


@pytest.fixture
def fake(tmp_path) -> Path:
    write(tmp_path, ARC, [arc(i) for i in range(1172)])
    items = [{"question": f"Q{i}?", "mc1_targets": {f"right {i}": 1, f"wrong {i}": 0}} for i in range(817)]
    write(tmp_path, TQA, json.dumps(items, indent=1))
    for task in data.BBH_TASKS:
        n = 187 if task == "causal_judgement" else 250
        if task in data.BBH_BINARY:
            ex = [{"input": f"Is {i} fine?", "target": data.BBH_BINARY[task][i % 2]} for i in range(n)]
        else:
            ex = [{"input": f"Pick {i}.\nOptions:\n(A) x\n(B) y\n(C) z", "target": "(C)"} for i in range(n)]
        write(tmp_path, f"bbh/bbh/{task}.json", json.dumps({"canary": "fake", "examples": ex}))
    write(tmp_path, "logiqa/Test.txt", logiqa_text(651))
    write(tmp_path, MEDQA, [medqa(i) for i in range(1273)])
    write(tmp_path, MMLU, [mmlu(i) for i in range(1101)])
    return tmp_path


@pytest.mark.parametrize("name", data.BENCHMARKS)
def test_fake_layout_loads(fake, name):
    qs = data.load(name, data_dir=fake)
    assert len(qs) == SIZES[name] and all(q.answer in q.options for q in qs)
    assert len(data.load(name, limit=2, data_dir=fake)) == 2


def test_mmlu_pro_falls_back_to_the_full_test_file(tmp_path):
    write(tmp_path, "mmlu_pro/test.jsonl", [mmlu(i, "law" if i % 3 else "history") for i in range(1652)])  # 1101 law
    qs = data.load("mmlu_pro", data_dir=tmp_path)
    assert len(qs) == 1101 and qs[0].id == "mmlu_pro/1"


LABELS = r" is not among the option labels \['A', 'B', 'C'(, 'D')?\]$"
CUT = r"invalid JSON \(.*\); the file ends in the middle of "
TQA_ITEMS = [{"question": "Q?", "mc1_targets": {"r": 1, "w": 0}}] * 40
BBH_ITEMS = {"examples": [{"input": "P.\nOptions:\n(A) x", "target": "(A)"}] * 5}


def bbh(text):
    return json.dumps({"examples": [{"input": f"Pick.\nOptions:\n{text}", "target": "(D)"}]})


@pytest.mark.parametrize(
    "bench, rel, content, pattern",
    [
        ("arc_challenge", ARC, [arc(0), "{not json"], r"Test\.jsonl, line 2: invalid JSON"),
        ("arc_challenge", ARC, [{k: v for k, v in arc(0).items() if k != "answerKey"}],
         r"line 1: missing field 'answerKey'"),
        ("arc_challenge", ARC, [arc(0), arc(1, answer="E")],
         r"Test\.jsonl, line 2: question 'Fake_1': answer 'E'" + LABELS),
        ("arc_challenge", ARC, [arc(0, labels="ABB")], r"line 1: duplicate or unmatched choice labels"),
        ("arc_challenge", ARC, [{**arc(1), "question": {"stem": "", "choices": []}}],
         r"line 1: field 'stem' must be a non-empty"),
        ("arc_challenge", ARC, [arc(0), [1, 2, 3]],
         r"line 2: expected a JSON object \(a record\), got list \[1, 2, 3\]$"),
        ("arc_challenge", ARC, [arc(0), arc(1), arc(2, qid="Fake_0")],
         r"line 3: question id 'Fake_0' repeats the one at line 1"),
        ("arc_challenge", ARC, "".join(json.dumps(arc(i)) + "\n" for i in range(5)) + json.dumps(arc(5))[:40],
         r"line 6: " + CUT + r"this record \(cut short\? download"),
        ("medqa", MEDQA, [medqa(0), medqa(1), medqa(2, idx="E")], r"line 3: answer_idx 'E'" + LABELS),
        ("medqa", MEDQA, [{**medqa(0), "options": {"A": "a", "B": "b"}, "answer_idx": "B"}],
         r"line 1: answer_idx 'B' points to 'b'"),
        ("medqa", MEDQA, [medqa(0), '{"question": "x", ', medqa(2)],
         r"test\.jsonl, line 2: invalid JSON \((?!.*ends in the middle)"),
        ("mmlu_pro", MMLU, [mmlu(0, answer="D")], r"line 1: answer 'D' disagrees with answer_index 2"),
        ("mmlu_pro", MMLU, [mmlu(0, answer="K", index=10)], r"line 1: answer_index 10 is not an option index 0-3$"),
        ("mmlu_pro", MMLU, [mmlu(0, answer="F", index=None)], r"line 1: answer_index None is not an option index 0-3$"),
        ("mmlu_pro", MMLU, [mmlu(i) for i in range(7)],
         r"law_test\.jsonl: expected 1101 items \(the published size\), found 7"),
        ("truthfulqa", TQA, json.dumps([{"question": "x", "mc1_targets": {"a": 1, "b": 1}}]),
         r"item 0: mc1_targets must hold exactly one"),
        ("truthfulqa", TQA, '[{"question": "x",\n "mc1_targets": }]', r"mc_task\.json, line 2: invalid JSON"),
        ("truthfulqa", TQA, json.dumps(["just a string"]),
         r"mc_task\.json, item 0: expected a JSON object \(a record\), got str"),
        ("truthfulqa", TQA, json.dumps(TQA_ITEMS, indent=1)[:700],
         r"mc_task\.json, line \d+: " + CUT + r"the JSON \(cut short\? "),
        ("bbh", BBH, json.dumps(BBH_ITEMS)[:-30], r"objects\.json, line 1: " + CUT + "the JSON"),
        ("bbh", BBH, bbh("(A) x\n(B) y\n(C) z"),
         r"item 0: question 'bbh/logical_deduction_three_objects/000': answer 'D'" + LABELS),
        ("bbh", BBH, bbh("(A) x\n(C) z"), r"objects\.json, item 0: unexpected option line '\(C\) z'"),
        ("logiqa", "logiqa/Test.txt", logiqa_text(3).replace("c\nContext 2", "e\nContext 2"),
         r"line 18: answer 'e' is not one of a"),
        ("logiqa", "logiqa/Test.txt", logiqa_text(3).rsplit("\n", 3)[0],
         r"Test\.txt: 21 lines is not a multiple of 8 .*; the last item, from line 17, is incomplete$"),
        ("logiqa", "logiqa/Test.txt", logiqa_text(650) + "\n",
         r"expected 651 items .*found 650"),  # a last newline is fine
        ("demo", "demo.jsonl", [demo(0), demo(1, answer="Z")],
         r"demo\.jsonl, line 2: question 'demo/01': answer 'Z'" + LABELS),
        ("demo", "demo.jsonl", [demo(0), demo(1, qid="demo/00")],
         r"line 2: question id 'demo/00' repeats the one at line 1; ids must"),
        ("demo", "demo.jsonl", [{**demo(0), "metadata": {"distractor": "B", "explanation": "w"}}],
         r"demo\.jsonl, line 1: .*distractor"),
        ("medqa", "other.txt", "", r"phrases_no_exclude_test\.jsonl not found.*<dir>/medqa/"),
        ("medqa", MEDQA, [medqa(0), json.dumps(medqa(1))[:10] + "\udcff\udcfe" + json.dumps(medqa(1))[10:]],
         r"line 2: not UTF-8 text \(byte 0xff at column 11\); the file is damaged or in another"),
        ("logiqa", "logiqa/Test.txt", "\nc\nContext\nQ?\nA.one\nB.\udce9two\nC.three\nD.four",  # latin-1
         r"Test\.txt, line 6: not UTF-8 text \(byte 0xe9 at column 3\)"),
    ],
)  # fmt: skip
def test_a_broken_file_is_one_line_naming_file_line_and_fault(tmp_path, bench, rel, content, pattern):
    write(tmp_path, rel, content)
    with pytest.raises(DataError) as e:
        data.load_demo(tmp_path / "demo.jsonl") if bench == "demo" else data.load(bench, data_dir=tmp_path)
    assert re.search(pattern, str(e.value)) and "\n" not in str(e.value), str(e.value)


def test_the_count_is_checked_even_with_a_limit(tmp_path):
    write(tmp_path, ARC, [arc(i) for i in range(1171)])
    with pytest.raises(DataError, match=r"ARC-Challenge-Test\.jsonl: expected 1172 items .*found 1171"):
        data.load("arc_challenge", limit=1, data_dir=tmp_path)


def test_every_cut_position_is_called_a_cut_and_a_wrong_character_is_not(tmp_path):
    # wherever a download stops (in a string, a number, true/false/null, between tokens) it is called a cut
    rec = {**arc(5), "n": -12.5, "e": 1.5e-7, "t": True, "f": False, "z": None, "s": 'say "hi"'}
    line, doc = json.dumps(rec), json.dumps([rec] * 2, indent=1)
    path = tmp_path / "x.json"
    cuts = [(json.dumps(arc(0)) + "\n", line, data.jsonl_rows, "this record"), ("", doc, data.json_file, "the JSON")]
    for head, whole, read, what in cuts:
        for cut in range(1, len(whole)):
            path.write_text(head + whole[:cut])
            with pytest.raises(DataError, match="the file ends in the middle of " + what):
                read(path)
    for bad in ('{"a": tru e}', '{"a": x}', '{"a": 1} extra'):
        path.write_text(bad)
        with pytest.raises(DataError, match="invalid JSON") as e:
            data.json_file(path)
        assert "ends in the middle" not in str(e.value)


def test_no_data_at_all_says_how_to_get_it(monkeypatch):
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setattr(data, "_hub_available", lambda: False)
    with pytest.raises(DataError, match=r"ACEMAD_DATA_DIR.*pip install datasets"):
        data.load("logiqa")


def test_data_hash_is_order_and_content_sensitive():
    qs = data.load_demo()
    h = data.data_hash(qs)
    assert len(h) == 64 and h == data.data_hash(data.load_demo()) != data.data_hash(qs[::-1])
    q = qs[0]
    swapped = data.Question(q.id, q.benchmark, q.question, dict(reversed(q.options.items())), q.answer, q.metadata)
    assert data.data_hash([swapped] + qs[1:]) != h  # option order is part of the data


# ----------------------------------------------------------------------------- hub-shaped records (as on the HF cards)
def test_hub_truthfulqa_and_arc_records_equal_the_local_ones():
    choices, labels = ["No.", "Yes.", "Sometimes."], [1, 0, 0]
    hub = {"question": "Is the sky green?", "mc1_targets": {"choices": choices, "labels": labels}}
    local = {"question": "Is the sky green?", "mc1_targets": dict(zip(choices, labels))}
    a = data.map_truthfulqa(hub, 7)
    assert a == data.map_truthfulqa(local, 7) and a.id == "truthfulqa/0007" and a.options[a.answer] == "No."
    texts = ["one", "two", "three", "four"]
    hub = {"id": "X_1", "question": "Which?", "choices": {"text": texts, "label": list("1234")}, "answerKey": "3"}
    q = data.map_arc(hub, 0)
    assert q.answer == "C" and q.options["C"] == "three" and q.metadata == {"original_labels": ["1", "2", "3", "4"]}
    choices = [{"text": t, "label": lab} for t, lab in zip(texts, "1234")]
    assert data.map_arc({"id": "X_1", "question": {"stem": "Which?", "choices": choices}, "answerKey": "3"}, 0) == q
    q = data.map_arc({**hub, "choices": {"text": ["three", "one"], "label": ["C", "A"]}, "answerKey": "C"}, 0)
    assert list(q.options) == ["C", "A"] and q.options[q.answer] == "three"  # labels, not positions, carry the answer


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1).filter(str.strip), min_size=2, max_size=12, unique_by=str.strip), st.data())
def test_truthfulqa_order_depends_only_on_text(choices, draw):
    perm = draw.draw(st.permutations(range(len(choices))))
    rec = {"question": "Q?", "mc1_targets": {"choices": choices, "labels": [1] + [0] * (len(choices) - 1)}}
    shuffled = {"choices": [choices[j] for j in perm], "labels": [int(j == 0) for j in perm]}
    a, b = data.map_truthfulqa(rec, 0), data.map_truthfulqa({"question": "Q?", "mc1_targets": shuffled}, 0)
    assert a.options == b.options and a.answer == b.answer and a.options[a.answer] == choices[0].strip()
    assert sorted(a.options.values()) == sorted(c.strip() for c in choices)


def test_hub_bbh_logiqa_medqa_mmlu_records():
    q = data.map_bbh({"input": "Today is X.\nOptions:\n(A) 1\n(B) 2", "target": "(B)"}, 3, "date_understanding")
    assert (q.id, q.question) == ("bbh/date_understanding/003", "Today is X.")
    assert (q.options, q.answer) == (dict(A="1", B="2"), "B")
    q = data.map_bbh({"input": "Arg?\nOptions:\n- valid \n- invalid", "target": "valid"}, 0, "formal_fallacies")
    assert (q.question, q.options, q.answer) == ("Arg?", {"A": "valid", "B": "invalid"}, "A")
    with pytest.raises(ValueError):
        data.map_bbh({"input": "Q?", "target": "Maybe"}, 0, "web_of_lies")
    hub = {"context": "All cats purr. Tom is a cat.", "query": "Which follows?", "correct_option": 0,
           "options": ["Tom purrs.", "Tom barks.", "Tom flies.", "None."]}  # fmt: skip
    q = data.map_logiqa(hub, 5)
    assert q.id == "logiqa/005" and q.answer == "A" and q.question == "All cats purr. Tom is a cat.\nWhich follows?"
    assert data.map_logiqa({**hub, "correct_option": "c"}, 5).answer == "C"
    with pytest.raises(ValueError):
        data.map_logiqa({**hub, "correct_option": 4}, 5)
    med = {**medqa(0), "answer": "a", "answer_idx": "A", "meta_info": "step2&3", "metamap_phrases": ["x"]}
    assert data.map_medqa(med, 12).id == "medqa/0012" and data.map_medqa(med, 12).metadata["meta_info"] == "step2&3"
    law = {**mmlu(0, qid=70), "options": ["No", "Yes", "Maybe"], "answer": "B", "answer_index": 1}
    q = data.map_mmlu_pro(law, 0)
    assert (q.id, q.options, q.answer) == ("mmlu_pro/70", {"A": "No", "B": "Yes", "C": "Maybe"}, "B")
    with pytest.raises(ValueError):
        data.map_mmlu_pro({**law, "category": "math"}, 0)


@pytest.mark.parametrize(
    "text, slot, want",
    [("A.text", 0, "text"), ("C.text", 1, "text"), ("A? text", 0, "text"), ("A first", 0, "first"),
     ("A cat sat", 1, "A cat sat"), ("When the land in City A.B was", 0, "When the land in City A.B was"),
     ("A.", 0, "A."), ("A.A.", 0, "A."), ("A.A is a doctor", 0, "A is a doctor"),
     ("Storehouse B.3", 1, "Storehouse B.3")],
)  # fmt: skip
def test_strip_logiqa_prefix(text, slot, want):
    assert data.strip_logiqa_prefix(text, slot) == want


def test_hub_rows_are_read_and_checked_like_files(monkeypatch):
    calls = []

    def fake_rows(path, name, split):
        calls.append((path, name, split))
        choices = {"text": ["a", "b"], "label": ["A", "B"]}
        rows = [{"id": f"H_{i}", "question": "Q?", "choices": choices, "answerKey": "B"} for i in range(1172)]
        if path == "TIGER-Lab/MMLU-Pro":
            rows = [mmlu(i, "law" if i < 1101 else "math") for i in range(1200)]
        return [(f"row {i}", r) for i, r in enumerate(rows)]

    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setattr(data, "_hub_available", lambda: True)
    monkeypatch.setattr(data, "_hub_rows", fake_rows)
    assert len(data.load("arc_challenge")) == 1172 and calls[-1] == ("allenai/ai2_arc", "ARC-Challenge", "test")
    assert len(data.load("mmlu_pro")) == 1101 and calls[-1] == ("TIGER-Lab/MMLU-Pro", None, "test")
    with pytest.raises(DataError, match=r"hf:truthful_qa/multiple_choice, row 0: missing field 'mc1_targets'"):
        data.load("truthfulqa")
    assert calls[-1] == ("truthful_qa", "multiple_choice", "validation")


def test_demo_set():
    qs = data.load_demo()
    assert 20 <= len(qs) <= 30 and data.load("demo") == qs
    assert [q.id for q in qs] == [f"demo/{i:02d}" for i in range(1, len(qs) + 1)]
    for q in qs:
        d = q.metadata["distractor"]
        assert q.benchmark == "demo" and 3 <= len(q.options) <= 4 and q.answer in q.options
        assert d in q.options and d != q.answer and len(q.metadata["explanation"]) > 40 and q.metadata["topic"]
    positions = Counter(q.answer for q in qs)
    assert len(positions) == 4 and max(positions.values()) <= len(qs) // 2
