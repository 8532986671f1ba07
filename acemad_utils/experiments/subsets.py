"""Challenging subsets (paper l.604-611): the naive agent (T=0.7) answers every item 5 times and items right in < 40%
of them are kept (a parse failure is wrong); one set serves every model. The paper's manual check ("failures are due
to systematic misconceptions") is a number: the share of wrong answers on the top distractor beside its exact uniform
expectation. Files: data/subsets/<slug>/<benchmark>.jsonl and meta.json, byte-identical on rebuild but the date."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Optional

from acemad_utils.data import benchmarks as D
from acemad_utils.data import paths as P
from acemad_utils.data.sim_params import SYNTHETIC_SLUG  # noqa: F401 (a name of this module too: api, params, setup)
from acemad_utils.data.transcripts import damaged, read_json
from acemad_utils.protocol.config import NAIVE_AGENT, DebateConfig
from acemad_utils.protocol.schema import AgentSpec, Population, Question

#: Separates a profile's name from the --set values that shape its runs (profiles.run_key): 'default.set-SEED-1'
#: uses subsets '<model slug>.set-SEED-1', built from its own questions.
SET_MARK = ".set-"
SUBSET_REPEAT_OFFSET = 1_000_000  # the construction's draws are never the Single Agent baseline's (repeats 0..4)
THRESHOLD = 0.4  # the paper's rule: an item is kept when its runs are right in fewer than this share


#: The item pools (SOURCE, N_ITEMS, SEED) of the shipped profiles (default, local, paper): their subsets keep the bare
#: model slug. Subsets are shared by every profile with the same subset model and the same pool; another pool (a
#: profile of your own with another SEED or N_ITEMS) gets subsets of its own, never another pool's.
SHIPPED_POOLS = {("synthetic", 600, 0), ("demo", 8, 0), ("benchmarks", None, 0)}


def variant(profile: str, pool: tuple) -> str:
    """What follows the model slug in a subsets folder: the --set part of the run key, else the pool if not shipped."""
    if SET_MARK in profile:
        return SET_MARK + profile.split(SET_MARK, 1)[1]
    source, n_items, seed = pool
    return "" if pool in SHIPPED_POOLS else f".items-{source}-{n_items or 'all'}-seed{seed}"


def model_slug(model_name: str, synthetic: bool = False) -> str:
    """Filesystem-safe model name ('meta-llama/Llama-3-8B' -> 'meta-llama-Llama-3-8B'); every synthetic population
    is 'synthetic-population', except a named stand-in ('synthetic-population-<name>', notebook 07)."""
    if synthetic and not model_name.startswith(SYNTHETIC_SLUG + "-"):
        return SYNTHETIC_SLUG
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model_name).strip("-.")
    if not slug:
        raise ValueError(f"model name {model_name!r} gives an empty slug")
    return P.safe_segment(slug, f"model name {model_name!r} as a folder name")  # e.g. too long


def item_stats(rec: dict) -> dict:
    """Accuracy, wrong-answer distribution (label order) and parse failures of one Single Agent record (or of its
    question_id, benchmark, labels and runs' answer and correct: a subset decided in memory)."""
    labels, runs = rec["labels"], rec["runs"]
    answers, correct = [r["answer"] for r in runs], [bool(r["correct"]) for r in runs]
    counts = Counter(a for a, ok in zip(answers, correct) if not ok and a is not None)
    wrong = {lab: counts[lab] for lab in labels if counts[lab]}
    # Ties go to the earlier label, so the top distractor never depends on dict or thread order.
    top = max(wrong, key=lambda lab: (wrong[lab], -labels.index(lab))) if wrong else None
    return {
        "id": rec["question_id"],
        "benchmark": rec["benchmark"],
        "accuracy": sum(correct) / len(answers),
        "n_runs": len(answers),
        "n_options": len(labels),
        "wrong": wrong,
        "top_distractor": top,
        "parse_failures": sum(a is None for a in answers),
    }


@cache
def expected_top_count(n: int, m: int) -> Fraction:
    """E[largest count] of n answers uniform on m options, exactly: P(max <= t) = n!/m^n [x^n] (sum_{j<=t}
    x^j/j!)^m and E[max] = sum_{t<n} (1 - P(max <= t))."""
    if n == 0 or m <= 1:
        return Fraction(n)
    total = Fraction(0)
    for t in range(n):
        base = [Fraction(1, math.factorial(j)) for j in range(t + 1)]
        poly: list[Fraction] = [Fraction(1)]
        for _ in range(m):
            poly = [
                sum((poly[i] * base[d - i] for i in range(len(poly)) if 0 <= d - i <= t), Fraction(0))
                for d in range(n + 1)
            ]
        total += 1 - poly[n] * math.factorial(n) / Fraction(m) ** n
    return total


def misconception_share(stats: Sequence[dict]) -> tuple[Optional[float], Optional[float], int]:
    """(pooled top-distractor share, its uniform reference, n wrong answers); parse failures left out of both."""
    n_wrong = sum(sum(s["wrong"].values()) for s in stats)
    if not n_wrong:
        return None, None, 0
    top = sum(max(s["wrong"].values(), default=0) for s in stats)
    ref = sum(expected_top_count(sum(s["wrong"].values()), s["n_options"] - 1) for s in stats)
    return top / n_wrong, float(ref / n_wrong), n_wrong


def subsets_root() -> Path:
    return P.outputs("subsets") if P.smoke() else P.root() / "data" / "subsets"


class SubsetIncomplete(RuntimeError):
    """Some items failed: nothing is saved for that benchmark (never read as kept or dropped); a rerun retries them."""


@dataclass
class SubsetResult:
    benchmark: str
    model_slug: str
    kept: list[dict]  # one dict per kept item, exactly the saved jsonl lines
    summary: dict  # this benchmark's entry of meta.json
    path: Path
    stats: list[dict] = field(default_factory=list)  # every scored item, kept or not


def subset_config(seed: int = 0) -> DebateConfig:
    """The construction's Single Agent: the naive agent (plain assistant) at temperature 0.7, 5 runs."""
    spec = AgentSpec(NAIVE_AGENT.persona, 0.7)
    return DebateConfig(
        method="single", n_agents=1, single_runs=5, baseline_agent=spec, repeat_offset=SUBSET_REPEAT_OFFSET, seed=seed
    )


def build_subset(
    benchmark: str,
    questions: Sequence[Question],
    population: Population,
    model_name: str,
    *,
    seed: int = 0,
    limit: Optional[int] = None,
    progress: bool = True,
    workers: Optional[int] = None,
    variant: str = "",
    write_run: bool = True,
) -> SubsetResult:
    """Run the Single Agent 5 times per item, keep items with accuracy < THRESHOLD, save them under the slug.
    write_run=False (a synthetic population only: notebooks 08 and 09's map points): the same records debated in
    memory, no run written under outputs/runs; the saved subset is the same bytes."""
    qs = list(questions)[:limit]
    strays = [q.id for q in qs if q.benchmark != benchmark]
    if strays:
        raise ValueError(f"build_subset({benchmark!r}): questions from another benchmark, e.g. {strays[:3]}")
    synthetic = bool(population.synthetic)
    slug = model_slug(model_name, synthetic) + variant
    cfg = subset_config(seed)
    name = f"subset_{slug}_{benchmark}" + (f"_limit{limit}" if limit is not None else "")
    extra = {"purpose": "challenging subset", "threshold": THRESHOLD}
    from acemad_utils.experiments import runner  # the engine only to build: the driver imports only the names

    d = subsets_root() / slug
    if write_run:
        meta, records = runner.run_and_load(
            name, qs, [cfg], population, workers=workers, progress=progress, extra_meta=extra
        )
        stats = _stats(qs, records, cfg, d, benchmark)
    else:
        meta, stats = _in_memory(qs, population, cfg)
    by_id = {q.id: q for q in qs}  # only the kept items' hashes are saved
    kept = [dict(s, content_hash=D.data_hash([by_id[s["id"]]]), synthetic=synthetic)
            for s in stats if s["accuracy"] < THRESHOLD]  # fmt: skip
    share, ref, n_wrong = misconception_share(kept)
    desc = population.describe()
    summary = {
        "model": slug if synthetic else model_name,
        "model_slug": slug,
        "synthetic": synthetic,
        "endpoint_kind": desc.get("endpoint_kind")
        or next((e.get("endpoint") for e in desc.get("endpoints", [])), None),
        "seed": seed,
        "temperature": cfg.baseline_agent.temperature,
        "runs": cfg.single_runs,
        "threshold": THRESHOLD,
        "limit": limit,
        "experiment": name if write_run else None,  # None: decided in memory, no run under outputs/runs
        "config_hash": cfg.hash,
        "git_commit": meta["git_commit"],
        "data_hash": meta["data_hash"],
        "n_items_in": len(qs),
        # a synthetic population's parameters decide which items are challenging: another one's subset is stale
        "population_params": desc.get("params") if synthetic else None,
        "n_failed": 0,  # always: a subset with a failed item is not saved (SubsetIncomplete)
        "n_kept": len(kept),
        "mean_accuracy_kept": sum(s["accuracy"] for s in kept) / len(kept) if kept else None,
        "n_wrong_kept": n_wrong,
        "parse_failures_kept": sum(s["parse_failures"] for s in kept),
        "misconception_share": share,
        "uniform_reference": ref,
        "date": dt.datetime.now(dt.timezone.utc).date().isoformat(),  # the only field that differs on rebuild
    }
    path = d / f"{benchmark}.jsonl"
    P.atomic_write(path, "".join(json.dumps(k, ensure_ascii=False, sort_keys=True) + "\n" for k in kept))
    with _meta_edit(d) as m:
        m.update(model_slug=slug, synthetic=synthetic)
        m.setdefault("benchmarks", {})[benchmark] = summary
    return SubsetResult(benchmark, slug, kept, summary, path, stats)


def _stats(qs: Sequence[Question], records: list[dict], cfg: DebateConfig, d: Path, benchmark: str) -> list[dict]:
    """item_stats of every item of a written run; a failed item: nothing saved (SubsetIncomplete)."""
    by_id = {r["question_id"]: r for r in records if r["config_hash"] == cfg.hash and r["repeat"] == 0}
    ok = [by_id[q.id] for q in qs if q.id in by_id and by_id[q.id].get("status") == "ok"]
    if len(ok) < len(qs):  # complete or absent: a failed item would otherwise be saved as "not challenging"
        if d.exists():
            with _meta_edit(d) as m:
                (d / f"{benchmark}.jsonl").unlink(missing_ok=True)
                m.get("benchmarks", {}).pop(benchmark, None)
        failed = [r for r in records if r["config_hash"] == cfg.hash and r.get("status") != "ok"]
        raise SubsetIncomplete(
            f"challenging subset of {benchmark} not saved: {len(qs) - len(ok)} of {len(qs)} items failed (first: "
            f"{failed[0].get('error', 'no record') if failed else 'no record'}); fix the endpoint and rerun the same "
            "command: only the failed items are sent again"
        )
    return [item_stats(r) for r in ok]


def _in_memory(qs: Sequence[Question], population: Population, cfg: DebateConfig) -> tuple[dict, list[dict]]:
    """(the meta fields build_subset reads, item_stats of each item) of cfg's records on qs, from the array engine's
    answers without writing a run or building a record: only a synthetic population, whose answers are a function
    of (item, draw) and never fail, so nothing is lost that a rerun would need (the map builds 11 populations'
    subsets: writing and re-reading their transcripts was most of their time, and nothing read them)."""
    if not population.synthetic:
        raise ValueError("a subset is decided in memory only for a synthetic population: an endpoint's run is saved")
    from acemad_utils.experiments.runner import git_commit
    from acemad_utils.protocol.debate import debate

    stats: list[dict] = [{}] * len(qs)
    for b in debate(qs, population, cfg, [0] * len(qs)):
        for d, q, row in zip(b.index, b.questions, b.decisions["runs"][0].tolist()):  # each run's answer, -1: unparsed
            runs = [{"answer": q.labels[a] if a >= 0 else None, "correct": a == q.answer_index} for a in row]
            stats[d] = item_stats({"question_id": q.id, "benchmark": q.benchmark, "labels": q.labels, "runs": runs})
    return {"git_commit": git_commit(), "data_hash": D.data_hash(qs)}, stats


@contextlib.contextmanager
def _meta_edit(d: Path):
    """A model's meta.json to edit in place, under a lock on its folder (two builds of one model may merge at once)."""
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").exists() else {}
        before = json.dumps(meta)
        yield meta
        if json.dumps(meta) != before:
            P.atomic_write(d / "meta.json", json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    finally:
        os.close(fd)  # releases the lock


def _fix(path: Path) -> str:
    return (
        f"delete it (rm {path}) and rerun: the subset is built again from its saved run (records and model "
        "replies are kept, nothing is paid twice)"
    )


def _meta(path: Path) -> dict:
    meta = read_json(path, fix=_fix(path))
    if not isinstance(meta.get("benchmarks", {}), dict):
        raise damaged(path, "its 'benchmarks' is not a mapping", _fix(path))
    return meta


def load_subset(
    benchmark: str,
    model_slug: str,
    questions: Optional[Sequence[Question]] = None,
    population: Optional[Population] = None,
) -> list[Question]:
    """The saved subset's Questions, each verified by content hash; one another synthetic `population` selected, or
    saved with failed items, is missing (FileNotFoundError: callers build it again), never silently reused."""
    path = subsets_root() / P.safe_segment(model_slug, "model slug") / f"{benchmark}.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"no subset {path}; build it with notebook 01 (Setup.build_subsets)")
    meta = path.with_name("meta.json")
    entry = (_meta(meta).get("benchmarks", {}).get(benchmark) or {}) if meta.exists() else {}
    if population is not None and population.synthetic:
        if entry.get("population_params") != population.describe().get("params"):
            raise FileNotFoundError(f"the subset {path} was selected by another synthetic population; rebuild it")
    if entry.get("n_failed"):  # its failed items were saved as "not challenging": not a subset
        raise FileNotFoundError(f"the subset {path} was saved with failed items (meta.json n_failed); rebuild it")
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict) or not {"id", "content_hash"} <= set(item):
            raise damaged(path, f"line {n} is not a whole subset item", _fix(path))
        items.append(item)
    kept = entry.get("n_kept")  # a file cut at a line boundary once loaded 200 items where meta said 331
    if isinstance(kept, int) and kept != len(items):
        raise damaged(path, f"{len(items)} items where meta.json says {kept} were kept", _fix(path))
    pool = {q.id: q for q in (questions if questions is not None else D.load(benchmark))}
    out = []
    for item in items:
        q = pool.get(item["id"])
        if q is None:
            raise D.DataError(f"{path}: item {item['id']!r} is not in the {benchmark} questions")
        if D.data_hash([q]) != item["content_hash"]:
            raise D.DataError(
                f"{path}: item {item['id']!r} changed upstream (content hash differs); rebuild the subset"
            )
        out.append(q)
    return out


def subset_table(model_slug: str):
    """One row per benchmark of a model's subsets (read from meta.json)."""
    import pandas as pd

    path = subsets_root() / P.safe_segment(model_slug, "model slug") / "meta.json"
    if not path.exists():
        raise FileNotFoundError(f"no subsets for {model_slug!r} at {path}")
    rows = [
        {
            "benchmark": b,
            "items_in": m["n_items_in"],
            "kept": m["n_kept"],
            "kept_pct": 100.0 * m["n_kept"] / m["n_items_in"] if m["n_items_in"] else float("nan"),
            "mean_acc_kept": m["mean_accuracy_kept"],
            "misconception_share": m["misconception_share"],
            "uniform_reference": m["uniform_reference"],
            "synthetic": m["synthetic"],
        }
        for b, m in sorted(_meta(path)["benchmarks"].items())
    ]
    return pd.DataFrame(rows).set_index("benchmark")
