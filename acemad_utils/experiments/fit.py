"""The synthetic population fitted to what the paper printed: its baselines (Tables 1 and 2, GPT-4o-mini).

    .venv/bin/python -m acemad_utils.experiments.fit        # fit (minutes): acemad_utils/data/fitted_population.json
    .venv/bin/python -m acemad_utils.experiments.fit --doc  # docs/population.md's block of fitted values, from it

What no baseline pins (the Skeptic's insight, knowledge_link, crowd_calibration) stays an axis of notebook 09. A
seeded coordinate pattern search: squared residuals plus RIDGE times the squared change from ORIGINAL (among equal
fits, the least changed one), so the same command writes the same file.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from acemad_utils.agents.sim import SimParams, SimPopulation, make_items
from acemad_utils.data.sim_params import FIT_FILE, ORIGINAL
from acemad_utils.experiments.paper_tables import BASELINES, MAD_METHODS
from acemad_utils.experiments.setup import SYNTHETIC_K
from acemad_utils.experiments.subsets import THRESHOLD, subset_config
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_batch
from acemad_utils.report.tables import paper_table

#: The fitted parameters and their search box.
BOUNDS = {
    "trap_mean": (0.3, 0.95),
    "trap_concentration": (0.3, 16.0),
    "crowd_insight": (0.0, 0.6),
    "crowd_copy": (0.0, 1.0),
    "insight_susceptibility": (0.0, 0.3),
}
PAPER_MODEL = "GPT-4o-mini"
N_FIT, SEED = 150, 0  # synthetic items per benchmark, the fit's seed
RIDGE = 1.0  # squared points per squared box-width of change from ORIGINAL
INSIGHT_RULE = "insight = crowd_insight (the Skeptic is a persona of the same model; notebook 09 varies it)"
CELL_COLUMNS = ["table", "cell", "paper", "simulated", "residual", "fitted"]


def _label(method: str) -> str:
    return DebateConfig(method=method).family


def targets() -> pd.DataFrame:
    """The printed cells the fit aims at (fitted: Table 2's five baselines, Table 1's MAD - Majority Voting gaps) and
    Table 1's four averages (shown beside)."""
    t2 = paper_table("table2_main_results", PAPER_MODEL).set_index("method")["Average (printed)"]
    t1 = paper_table("table1_voting_vs_mad").set_index("method")["Average (printed)"]
    mv = _label("majority")
    rows = [("Table 2", _label(m), float(t2[_label(m)]), True) for m in BASELINES]
    rows += [("Table 1", _label(m), float(t1[_label(m)]), False) for m in (("majority",) + MAD_METHODS)]
    rows += [("Table 1", f"{_label(m)} - {mv}", float(t1[_label(m)] - t1[mv]), True) for m in MAD_METHODS]
    return pd.DataFrame(rows, columns=["table", "cell", "paper", "fitted"])


def simulate(params: SimParams, *, n_items: int = N_FIT, seed: int = SEED) -> dict[str, float]:
    """Each baseline's Average accuracy (%) on the challenging subsets this population's naive agent selects
    (paper l.604-611), N = 5, T = 3."""
    pop = SimPopulation(params, seed=seed)
    acc: dict[str, list[float]] = {_label(m): [] for m in BASELINES}
    for b, k in SYNTHETIC_K.items():
        items = make_items(n_items, k=k, seed=seed, benchmark=f"synthetic-{b}")
        naive = run_batch(items, pop, subset_config(seed=seed), [0] * len(items))
        hard = [q for q, r in zip(items, naive) if r["final"]["correct"] < THRESHOLD]
        for m in BASELINES:
            recs = run_batch(hard, pop, DebateConfig(method=m, seed=seed), [0] * len(hard))
            acc[_label(m)].append(100 * float(np.mean([r["final"]["correct"] for r in recs])) if recs else np.nan)
    return {m: float(np.mean(v)) for m, v in acc.items()}


def cells(params: SimParams, *, n_items: int = N_FIT, seed: int = SEED, simulated: dict | None = None) -> pd.DataFrame:
    """The paper's printed baseline cells beside this population's (simulate), residual = simulated - paper."""
    sim = simulated if simulated is not None else simulate(params, n_items=n_items, seed=seed)
    out = targets()
    mv = _label("majority")
    out["simulated"] = [sim[c] if c in sim else sim[c.split(" - ")[0]] - sim[mv] for c in out["cell"]]
    out["residual"] = out["simulated"] - out["paper"]
    return out[CELL_COLUMNS]


def _params(x: np.ndarray) -> SimParams:
    vals: dict[str, Any] = {k: lo + float(v) * (hi - lo) for (k, (lo, hi)), v in zip(BOUNDS.items(), x)}
    return replace(SimParams(**ORIGINAL), **vals, insight=vals["crowd_insight"])


def _unit(p: dict) -> np.ndarray:
    return np.array([(p[k] - lo) / (hi - lo) for k, (lo, hi) in BOUNDS.items()])


def loss(x: np.ndarray, *, n_items: int = N_FIT, seed: int = SEED) -> float:
    c = cells(_params(x), n_items=n_items, seed=seed)
    r = c.loc[c["fitted"], "residual"].to_numpy()
    return float(np.sum(r**2) + RIDGE * np.sum((x - _unit(ORIGINAL)) ** 2))


def search(x0: np.ndarray, f, *, step: float = 0.25, tol: float = 1 / 32, log=print) -> tuple[np.ndarray, float]:
    """Coordinate pattern search in the unit box: move to the best of x +- step per coordinate, else halve the step."""
    x, fx = np.clip(x0, 0, 1), f(np.clip(x0, 0, 1))
    while step >= tol:
        trials = [np.clip(x + s * step * np.eye(len(x))[i], 0, 1) for i in range(len(x)) for s in (-1, 1)]
        trials = [t for t in trials if not np.array_equal(t, x)]
        scores = [f(t) for t in trials]
        best = int(np.argmin(scores))  # never empty: each coordinate can move one way at least
        if scores[best] < fx - 1e-9:
            x, fx = trials[best], scores[best]
            log(f"step {step:.4f}  loss {fx:8.3f}  " + ", ".join(f"{k} {getattr(_params(x), k):.4g}" for k in BOUNDS))
        else:
            step /= 2
    return x, fx


def run(n_items: int = N_FIT, seed: int = SEED, log=print) -> dict:
    """The fit, as the data file's content."""
    t0 = time.perf_counter()
    x, fx = search(_unit(ORIGINAL), lambda x: loss(x, n_items=n_items, seed=seed), log=log)
    log(f"search: {time.perf_counter() - t0:.0f} s")  # printed, not stored: the file is the same on every machine
    params = _params(x)
    fitted = {k: round(getattr(params, k), 4) for k in (*BOUNDS, "insight")}
    table = cells(SimParams(**{**ORIGINAL, **fitted}), n_items=n_items, seed=seed)
    return {
        "command": ".venv/bin/python -m acemad_utils.experiments.fit",
        "paper_model": PAPER_MODEL,
        "n_items_per_benchmark": n_items,
        "seed": seed,
        "ridge": RIDGE,
        "bounds": BOUNDS,
        "insight_rule": INSIGHT_RULE,
        "loss": round(fx, 4),
        "params": fitted,
        "cells": [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in table.to_dict("records")
        ],
    }


def params_table(params: SimParams) -> pd.DataFrame:
    """The fitted parameters: the original value, the committed fit's, and the profile population's."""
    return pd.DataFrame(
        [(k, ORIGINAL[k], v, getattr(params, k)) for k, v in committed()["params"].items()],
        columns=["parameter", "original", "fitted", "this profile"],
    )


def committed() -> dict:
    return json.loads(FIT_FILE.read_text(encoding="utf-8"))


def doc_block(fit: dict | None = None) -> str:
    """docs/population.md's block of fitted values (tests/test_population.py checks the page holds it)."""
    fit = fit or committed()
    lines = [
        f"Fitted by `{fit['command']}` (seed {fit['seed']}, {fit['n_items_per_benchmark']} synthetic items per "
        f"benchmark, loss {fit['loss']}); values in `acemad_utils/data/fitted_population.json`:",
        "",
        "| parameter | original | fitted |",
        "|---|---|---|",
        *(f"| `{k}` | {ORIGINAL[k]:g} | {v:g} |" for k, v in fit["params"].items()),
        "",
        "| table | cell | paper | simulated | residual | fitted on |",
        "|---|---|---|---|---|---|",
        *(
            f"| {c['table']} | {c['cell']} | {c['paper']:.2f} | {c['simulated']:.2f} | {c['residual']:+.2f} | "
            f"{'yes' if c['fitted'] else 'no (shown)'} |"
            for c in fit["cells"]
        ),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc", action="store_true", help="print docs/population.md's block from the committed fit")
    ap.add_argument("--n-items", type=int, default=N_FIT)
    args = ap.parse_args(argv)
    if args.doc:
        print(doc_block())
        return
    FIT_FILE.write_text(json.dumps(run(args.n_items), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FIT_FILE}")


if __name__ == "__main__":
    main()
