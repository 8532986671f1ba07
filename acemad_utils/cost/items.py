"""Item counts and sample items of the cost estimate: how many questions each run asks, and the few items per
benchmark the replay runs them on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from acemad_utils.agents.sim import make_items
from acemad_utils.data import benchmarks as D
from acemad_utils.data.paths import smoke
from acemad_utils.data.settings import env
from acemad_utils.experiments import subsets
from acemad_utils.experiments.setup import SMOKE, SYNTHETIC_K

#: Challenging-subset sizes inferred from the paper's Table 2 (every printed accuracy is k/n with this n).
PAPER_SUBSETS = {"truthfulqa": 223, "arc_challenge": 108, "bbh": 290, "logiqa": 320, "medqa": 310, "mmlu_pro": 654}
#: Share of input items the paper's subsets kept, for item counts capped by N_ITEMS (and for other sources).
KEPT_SHARE = {b: PAPER_SUBSETS[b] / D.FULL_SIZES[b] for b in D.BENCHMARKS}
OVERALL_SHARE = sum(PAPER_SUBSETS.values()) / sum(D.FULL_SIZES.values())


def item_counts(b: str, P: dict) -> tuple[int, int, str]:
    """(input items, challenging-subset items, where the subset size comes from) of benchmark b."""
    n, source = P.get("N_ITEMS"), P.get("SOURCE", "benchmarks")
    if source == "demo":
        full = 24 if n is None else min(24, n)
    elif source == "synthetic":
        full = n or 600
    else:
        full = D.FULL_SIZES.get(b, 0) if n is None else min(D.FULL_SIZES.get(b, n), n)
    if smoke():
        full = min(full, SMOKE[P.get("BACKEND", "openai")][0])
    model = P.get("SUBSET_MODEL") or P.get("MODEL") or ""
    if source in ("benchmarks", "demo") and model:  # synthetic subsets: another slug
        try:
            pool = subsets.variant(P.get("PROFILE", ""), (source, n, P.get("SEED", 0)))  # Setup's folder
            path = subsets.subsets_root() / (subsets.model_slug(model, synthetic=False) + pool) / f"{b}.jsonl"
            if path.exists():
                return full, min(full, sum(1 for x in path.read_text().splitlines() if x.strip())), "built subset"
        except Exception:  # an unreadable subset: the inferred sizes stand in
            pass
    if source == "benchmarks" and full == D.FULL_SIZES.get(b):
        return full, PAPER_SUBSETS[b], "paper Table 2"
    return full, int(round(full * KEPT_SHARE.get(b, OVERALL_SHARE))), "paper's kept share"


def sample_items(
    benchmarks: Sequence[str], per_benchmark: int, source: str = "benchmarks", data_dir: Optional[str] = None
) -> tuple[dict, str]:
    """A few items per benchmark: real ones at length quantiles when the files are local (never the hub), else
    distinct demo questions per benchmark. Returns ({benchmark: [Question]}, where they came from)."""
    d = data_dir or env(D.ENV_VAR)
    out, used_real, demo = {}, False, D.load_demo()
    for i, b in enumerate(benchmarks):
        if source == "synthetic":
            out[b] = make_items(per_benchmark, k=SYNTHETIC_K.get(b, 4), seed=i, benchmark=f"synthetic-{b}")
            continue
        qs = []
        if source == "benchmarks" and d and Path(d).is_dir():
            try:
                qs = D.load(b, data_dir=d)
            except Exception:  # a missing file: the demo set stands in, and the output says so
                pass
        if not qs:
            k = max(1, min(per_benchmark, len(demo) // max(1, len(benchmarks))))
            out[b] = [demo[(i * k + j) % len(demo)] for j in range(k)]  # distinct per benchmark: no false cache hits
            continue
        used_real = True
        order = np.argsort([len(q.question) + len(q.options_str()) for q in qs], kind="stable")
        out[b] = [qs[order[int((j + 0.5) / per_benchmark * (len(qs) - 1))]] for j in range(per_benchmark)]
    real = f"real items from {d}" if used_real else "demo questions (no local benchmark files: set ACEMAD_DATA_DIR)"
    return out, "synthetic items" if source == "synthetic" else real
