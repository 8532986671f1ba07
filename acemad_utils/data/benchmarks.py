"""Benchmark loaders: every benchmark becomes a list of `schema.Question`.

    qs = load("arc_challenge", limit=50)       # reads $ACEMAD_DATA_DIR (or the hub); load("demo") = load_demo()
    data_hash(qs)                               # sha256 hex of the canonical JSON, stable everywhere
    python -m acemad_utils.data summary [--benchmarks arc_challenge,logiqa] [--data-dir DIR]

Where the data comes from, first match wins: (1) `data_dir`, else ACEMAD_DATA_DIR, a directory in the upstream
layout of FILES, e.g. <dir>/truthfulqa/data/v0/mc_task.json (mmlu_pro/law_test.jsonl is read before test.jsonl
filtered to law; a relative path is tried against the cwd, then the repo root); (2) the Hugging Face hub (HUB)
through `datasets` (optional, online); (3) a DataError saying how to get the data. Mappers: data.records.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from acemad_utils.data.files import DataError, build, json_file, json_items, jsonl_rows, logiqa_rows, need
from acemad_utils.data.paths import ROOT
from acemad_utils.data.records import BBH_TASKS, map_arc, map_bbh, map_logiqa, map_medqa, map_mmlu_pro, map_truthfulqa
from acemad_utils.data.settings import env
from acemad_utils.protocol.schema import Question

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
    f"no benchmark data available: set {ENV_VAR} (or pass data_dir) to a directory in the layout described in "
    "`acemad_utils.data.benchmarks` (e.g. <dir>/truthfulqa/data/v0/mc_task.json), or `pip install datasets` and be "
    "online to read the Hugging Face hub; `load_demo()` works without either"
)


#: The hub datasets (path, config, split) read when no data directory is given (bbh: one config per task).
HUB = {
    "truthfulqa": ("truthful_qa", "multiple_choice", "validation"),
    "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge", "test"),
    "bbh": ("lukaemon/bbh", None, "test"), "logiqa": ("lucasmccabe/logiqa", None, "test"),
    "medqa": ("GBaker/MedQA-USMLE-4-options", None, "test"), "mmlu_pro": ("TIGER-Lab/MMLU-Pro", None, "test"),
}  # fmt: skip
_json = lambda key=None: lambda p: json_items(p, json_file(p), key)
#: benchmark -> (its file under the data directory, reader, mapper); BBH: one file per task.
FILES: dict[str, tuple[str, Callable[[Path], list], Callable]] = {
    "truthfulqa": ("truthfulqa/data/v0/mc_task.json", _json(), map_truthfulqa),
    "arc_challenge": ("arc_challenge/ARC-Challenge/ARC-Challenge-Test.jsonl", jsonl_rows, map_arc),
    "bbh": ("bbh/bbh/{task}.json", _json("examples"), map_bbh),
    "logiqa": ("logiqa/Test.txt", logiqa_rows, map_logiqa),
    "medqa": ("medqa/phrases_no_exclude_test.jsonl", jsonl_rows, map_medqa),
    "mmlu_pro": ("mmlu_pro/test.jsonl", jsonl_rows, map_mmlu_pro),
}
BENCHMARKS: tuple[str, ...] = tuple(FILES)


def _hub_available() -> bool:
    return importlib.util.find_spec("datasets") is not None


def _hub_rows(path: str, name: str | None, split: str) -> list[tuple[str, Any]]:
    """Only online users get here; `datasets` is imported lazily so it stays an optional dependency."""
    import datasets  # noqa: PLC0415

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
            src = need(root, "mmlu_pro/law_test.jsonl" if law_only else rel.format(task=task))
            rows = read(src)
        if benchmark == "mmlu_pro" and not law_only:  # all 14 categories; non-dict rows go on to fail in the mapper
            rows = [(w, r) for w, r in rows if not isinstance(r, dict) or r.get("category") == "law"]
        m = functools.partial(mapper, task=task) if task else mapper
        out += build(src, rows, m, PUBLISHED_SIZES[f"bbh/{task}" if task else benchmark])
    return out


# ---------------------------------------------------------------- public API
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
    dupes = [k for k, n in Counter(q.id for q in qs).items() if n > 1]
    if dupes:
        raise DataError(f"{benchmark}: duplicate question ids {dupes[:5]}")
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


def _canonical(q: Question) -> dict:
    d = q.to_dict()
    d["options"] = [[k, v] for k, v in q.options.items()]  # a list keeps the option order under sort_keys
    return d


def data_hash(questions: Sequence[Question]) -> str:
    """sha256 (hex) of the canonical JSON of the questions: same questions, same order -> same hash, anywhere."""
    blob = json.dumps([_canonical(q) for q in questions], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def summarize(questions: Sequence[Question]) -> dict:
    """Items, option-count range and answer-label counts (in label order)."""
    sizes = [len(q.options) for q in questions]
    counts = Counter(q.answer for q in questions if q.answer is not None)
    return {
        "items": len(questions),
        "options": (min(sizes, default=0), max(sizes, default=0)),
        "answers": dict(sorted(counts.items(), key=lambda kv: (len(kv[0]), kv[0]))),
        "sha256": data_hash(questions),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acemad_utils.data", description="Benchmark data tools.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("summary", help="items, option counts and answer distribution per benchmark")
    cmd.add_argument(
        "--benchmarks", default=",".join(BENCHMARKS), help="comma-separated names (default: all; 'demo' allowed)"
    )
    cmd.add_argument("--data-dir", default=None, help=f"data directory (default: ${ENV_VAR})")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.benchmarks.split(",") if n.strip()]
    bad = [n for n in names if n not in BENCHMARKS + ("demo",)]
    if bad or not names:
        parser.error(f"unknown benchmark(s) {bad}; allowed: {', '.join(BENCHMARKS + ('demo',))}")
    status = 0
    print(f"{'benchmark':<14} {'items':>6}  {'options':<7}  {'sha256':<12}  answer distribution")
    for name in names:
        try:
            s = summarize(load(name, data_dir=args.data_dir))
        except DataError as e:
            print(f"{name:<14} ERROR: {e}")
            status = 1
            continue
        lo, hi = s["options"]
        dist = " ".join(f"{k}:{v}" for k, v in s["answers"].items())
        print(f"{name:<14} {s['items']:>6}  {f'{lo}-{hi}':<7}  {s['sha256'][:12]}  {dist}")
    return status


if __name__ == "__main__":
    sys.exit(main())
