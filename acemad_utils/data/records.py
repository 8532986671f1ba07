"""Benchmark records -> `schema.Question`: one mapper per benchmark, shared by local files and the hub.

    from acemad_utils.data.records import map_arc
    q = map_arc({"id": "x", "question": "2+2?", "choices": {"text": ["3", "4"], "label": ["A", "B"]},
                 "answerKey": "B"}, index=0)

A mapper raises KeyError / ValueError (with what is wrong) on a malformed record; `data_files.build` adds
where it is.

Choices made here (all deterministic, no RNG state, no Python `hash()`):
- TruthfulQA: upstream lists the correct MC1 answer first, so the choices are ordered by
  sha256(TRUTHFULQA_SALT | question | choice text) and then labelled A, B, C, ...; the order depends only
  on the text, so it is the same on every run and machine and does not give the answer away.
- ARC: 22 test items use labels "1".."4"; they are mapped to letters by value (1->A, 2->B, ...) through the
  label field (never by position) so every benchmark uses letter labels; the originals are kept in
  metadata["original_labels"].
- BBH: MC tasks' options are parsed from the "Options:\\n(A) ..." block and removed from the question text;
  binary tasks get two options, A/B = Yes/No (web_of_lies, causal_judgement) or valid/invalid
  (formal_fallacies).
- LogiQA: options are read by line position (the answer letter refers to it); a leading "A." / "C." / "A?"
  prefix (any letter A-D, since some items swap letters) or "A " (own letter only) is stripped, never more.
  Items whose letter is embedded mid-line (e.g. item 524, "City A.B") are kept verbatim.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from acemad_utils.protocol.schema import Question

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TRUTHFULQA_SALT = "acemad/truthfulqa-mc1/v1"  # changing it reshuffles every TruthfulQA item: don't.

#: The logic-related multiple-choice BBH tasks (the paper's "logic" subset); 7 lettered MC, 3 binary.
BBH_TASKS = (
    "logical_deduction_three_objects",
    "logical_deduction_five_objects",
    "logical_deduction_seven_objects",
    "tracking_shuffled_objects_three_objects",
    "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects",
    "date_understanding",
    "web_of_lies",
    "formal_fallacies",
    "causal_judgement",
)
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


def _sha(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def map_truthfulqa(rec: Mapping[str, Any], index: int) -> Question:
    """Hub shape mc1_targets={"choices": [...], "labels": [0/1...]} or upstream shape {choice text: 0/1}."""
    q, t = _text(rec, "question"), rec["mc1_targets"]
    choices, labels = (list(t["choices"]), list(t["labels"])) if "choices" in t else (list(t), list(t.values()))
    if len(choices) != len(labels) or labels.count(1) != 1 or set(labels) - {0, 1}:
        raise ValueError(f"mc1_targets must hold exactly one choice labelled 1 (labels {labels})")
    if len(choices) > len(LETTERS):
        raise ValueError(f"{len(choices)} choices is more than {len(LETTERS)} letters")
    order = sorted(range(len(choices)), key=lambda j: (_sha(f"{TRUTHFULQA_SALT}\x1f{q}\x1f{choices[j]}"), j))
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
    """Hub shape question=str, choices={"text": [...], "label": [...]};
    upstream question={"stem", "choices": [{text, label}]}."""
    if isinstance(rec["question"], Mapping):
        stem, ch = _text(rec["question"], "stem"), rec["question"]["choices"]
        texts, labels = [c["text"] for c in ch], [c["label"] for c in ch]
    else:
        stem, texts, labels = _text(rec, "question"), list(rec["choices"]["text"]), list(rec["choices"]["label"])
    letters = [_arc_letter(x) for x in labels]
    if len(set(letters)) != len(letters) or len(texts) != len(letters):
        raise ValueError(f"duplicate or unmatched choice labels {labels}")
    meta = {} if letters == labels else {"original_labels": [str(x) for x in labels]}
    return _question(
        _text(rec, "id"),
        "arc_challenge",
        stem,
        dict(zip(letters, texts)),
        answer=_arc_letter(rec["answerKey"]),
        meta=meta,
    )


_BBH_OPTION = re.compile(r"\(([A-Z])\)\s*(.*)")


def map_bbh(rec: Mapping[str, Any], index: int, task: str) -> Question:
    """BBH example {"input", "target"} (same fields upstream and on lukaemon/bbh)."""
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


def _choice_index(v: Any, n: int) -> int:
    """0-based int, digit string, or letter a-d/A-D -> index (hub stores an int, the raw file a letter)."""
    s = str(v).strip()
    i = int(s) if s.isdigit() and not isinstance(v, bool) else LETTERS.find(s.upper()) if len(s) == 1 else -1
    if not 0 <= i < n:
        raise ValueError(f"answer {v!r} is not an option index 0-{n - 1} or letter a-{LETTERS[n - 1].lower()}")
    return i


def map_logiqa(rec: Mapping[str, Any], index: int) -> Question:
    """Hub shape {"context", "query", "options": [4 str], "correct_option"}; the local reader builds the same."""
    opts = list(rec["options"])
    if len(opts) != 4:
        raise ValueError(f"expected 4 options, got {len(opts)}")
    options = {LETTERS[j]: strip_logiqa_prefix(str(o).strip(), j) for j, o in enumerate(opts)}
    text = f"{_text(rec, 'context').strip()}\n{_text(rec, 'query').strip()}"
    return _question(
        f"logiqa/{index:03d}", "logiqa", text, options, answer=LETTERS[_choice_index(rec["correct_option"], 4)], meta={}
    )


def map_medqa(rec: Mapping[str, Any], index: int) -> Question:
    """{"question", "options": {"A": ...}, "answer_idx", "answer", "meta_info"} (upstream file = hub dataset)."""
    options, ans = dict(rec["options"]), str(rec["answer_idx"]).strip()
    if ans not in options:
        raise ValueError(f"answer_idx {ans!r} is not among the option labels {list(options)}")
    if "answer" in rec and options.get(ans) != rec["answer"]:
        raise ValueError(f"answer_idx {ans!r} points to {options.get(ans)!r:.60}, not to answer {rec['answer']!r:.60}")
    return _question(
        f"medqa/{index:04d}",
        "medqa",
        _text(rec, "question"),
        options,
        answer=ans,
        meta={"meta_info": rec.get("meta_info")},
    )


def map_mmlu_pro(rec: Mapping[str, Any], index: int) -> Question:
    """{"question_id", "question", "options": [3-10 str], "answer": letter, "answer_index", "category", "src"}."""
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
    meta = {"question_id": rec["question_id"], "src": rec.get("src")}
    return _question(
        f"mmlu_pro/{rec['question_id']}",
        "mmlu_pro",
        _text(rec, "question"),
        dict(zip(LETTERS, opts)),
        answer=ans,
        meta=meta,
    )
