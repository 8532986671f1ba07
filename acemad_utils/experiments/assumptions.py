"""Notebook 09's assumption map: AceMAD's gain as a function of the synthetic population's assumptions.

    from acemad_utils.experiments import assumptions as AM
    table = AM.run_map(S, R.runs("09_assumption_map", P), R.map_axes(P))   # one row per map point
    ev = AM.evidence(S, runs)     # do agents who answer right predict their peers better? (any run's p and q)

Each map point is one AceMAD (T = 3) run of the synthetic population with some SimParams changed (registry
.assumption_map); "Standard MAD" is the same debate re-decided with uniform weights (no run, as notebook 05's
ablation), the best MAD baseline is the homogeneous Decentralized/Centralized/Sparse MAD on the same questions.
A point that changes what the baselines' naive agent answers (registry.SUBSET_PARAMS, e.g. trap_concentration)
gets the challenging subsets of its own population: "challenging" is always judged by the population that debates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

import pandas as pd

from acemad_utils.agents.sim import SimParams, SimPopulation
from acemad_utils.data.transcripts import load_run
from acemad_utils.experiments import fit, subsets
from acemad_utils.experiments import registry as R
from acemad_utils.experiments.runner import run_and_load
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.schema import Question
from acemad_utils.report import assumptions as RA
from acemad_utils.report import claims
from acemad_utils.report import rescoring as A
from acemad_utils.report.tables import AVERAGE, accuracy_long

ACEMAD = DebateConfig(method="acemad", rounds=3).label
UNIFORM = "Standard MAD (uniform weights, AceMAD's debate)"


def base_params(S: Setup) -> SimParams:
    """The profile's synthetic population's parameters (fitted or original), which the map's points override."""
    if not isinstance(S.population, SimPopulation):
        raise ValueError("the assumption map varies the synthetic population: run it with BACKEND='sim'")
    return S.population.params


def population(S: Setup, params: dict) -> SimPopulation:
    """The synthetic population of one map point (the profile's seed); batched: the runner answers it as arrays."""
    return SimPopulation(replace(base_params(S), **params), seed=S.seed)


def map_questions(
    S: Setup, params: dict, n_max: Optional[int], benchmarks: Optional[Sequence[str]] = None
) -> list[Question]:
    """The first n_max items of every benchmark's (of `benchmarks`, default the profile's) challenging subset,
    judged by the population of `params` (its SUBSET_PARAMS only; none: the profile's own subsets, notebook 01's)."""
    base = {k: v for k, v in R.overrides(params).items() if k in R.SUBSET_PARAMS}
    benches = list(benchmarks or S.benchmarks)
    if not base:
        return [q for b in benches for q in S.subset(b, n_max)]
    name = f"{subsets.SYNTHETIC_SLUG}-map-{R.params_slug(base)}"
    slug = subsets.model_slug(name, synthetic=True)
    pop, cap, out = population(S, base), S.per_run(n_max), []
    for b in benches:
        try:
            qs = S.load_subset(b, slug, pop)
        except FileNotFoundError:
            subsets.build_subset(
                S.bench_name(b), S.questions(b), pop, name, seed=S.seed, progress=False, workers=S.workers
            )
            qs = S.load_subset(b, slug, pop)
        out += qs[:cap] if cap else qs
    return out


def run_point(S: Setup, run: R.Run) -> list[dict]:
    """The records of one map run (made on first use, read back afterwards)."""
    return run_with_meta(S, run)[1]


def run_with_meta(S: Setup, run: R.Run, progress: bool = True) -> tuple[dict, list[dict]]:
    """(meta, records) of one map run, on the challenging subsets of its own population."""
    params = run.params or {}
    return run_and_load(
        f"{S.profile}/{run.name}",
        map_questions(S, params, run.cap, run.benchmarks),
        run.configs,
        population(S, params),
        workers=S.workers,
        profile=S.profile,
        progress=progress,
        extra_meta={"source": S.source, "model": S.model, "backend": S.backend, "map_params": params},
    )


def point_records(
    S: Setup, runs: Sequence[R.Run], params: dict, *, eta: float = 2.0, held: Optional[dict] = None
) -> list[dict]:
    """AceMAD's records at `params`, the same debate re-decided with uniform weights and with shuffled scores
    (rescoring.SHUFFLED), and the MAD baselines on the same questions, as one list for tables.versus_best.
    `held` (run_map's): {run name: records} of the last baselines run read, reused by the next point that shares it."""
    by_name = {r.name: r for r in runs}
    p = R.overrides(params)
    base = {k: v for k, v in p.items() if k in R.SUBSET_PARAMS}
    ace = run_point(S, by_name[f"map_{R.params_slug(p)}"])
    mine = [r for r in ace if r["method"] == ACEMAD]  # all of them: the run has one config
    arr = A.stack([r for r in mine if r.get("status") == "ok"], S.seed)  # one stack for both re-decisions
    uniform = A.reweighted_records(mine, {UNIFORM: "uniform"}, eta=eta, seed=S.seed, stacked=arr)
    shuffled = A.shuffled_records(mine, eta=eta, seed=S.seed, stacked=arr)
    name, held = f"map_baselines_{R.params_slug(base)}", {} if held is None else held
    if name not in held:
        # most points share the default's baselines and come one after the other (registry.map_points): reading the
        # same 5,400 records again for each was most of the map's reading; holding one run at a time bounds memory
        held.clear()
        held[name] = run_point(S, by_name[name])
    return ace + uniform + shuffled + held[name]


def run_map(S: Setup, runs: Sequence[R.Run], axes: dict, *, eta: float = 2.0, n_boot: int = 1000) -> pd.DataFrame:
    """One row per map point (registry.map_points): its parameters, AceMAD's and the baselines' average accuracy,
    and AceMAD's paired gain (points, 95% CI, p) over uniform weights, over shuffled scores and over the best MAD
    baseline, and the shuffled control's gain over uniform weights, with n.
    Without runs (a real-model profile) an empty frame whose attrs["note"] says why."""
    if not runs:
        out = pd.DataFrame(columns=RA.MAP_COLUMNS)
        out.attrs["note"] = "the assumption map varies the synthetic population; this profile runs a real model"
        return out
    mads = [c.label for c in next(r for r in runs if r.name.startswith("map_baselines_"))["baselines"]]
    rows, held = [], dict[str, list[dict]]()
    for axis, params in R.map_points(axes):
        recs = point_records(S, runs, params, eta=eta, held=held)
        point = replace(base_params(S), **params)
        rows.append(RA.map_row(axis, point, recs, ACEMAD, UNIFORM, mads, n_boot=n_boot, seed=S.seed))
    return pd.DataFrame(rows, columns=RA.MAP_COLUMNS)


def evidence_records(S: Setup, runs: Sequence[R.Run], links: Sequence[float] = (1.0, 0.0)) -> dict[str, list[dict]]:
    """The AceMAD (T = 3) records the premise is measured on, by label. Synthetic profile: the map runs at each
    knowledge_link of `links` (the defaults otherwise); a real model: this profile's notebook 03 run, if it exists
    (else its label says there is none, with no record)."""
    if runs:
        by_name = {r.name: r for r in runs}
        out = {}
        for link in links:
            name = f"map_{R.params_slug({'knowledge_link': link})}"
            if name in by_name:
                recs = [r for r in run_point(S, by_name[name]) if r["method"] == ACEMAD]
                out[f"synthetic, knowledge_link = {link:g}"] = recs
        return out or {"none": []}
    try:
        _, records = load_run(f"{S.profile}/main")
    except FileNotFoundError:
        return {f"{S.model}: no notebook 03 run of profile {S.profile} yet": []}
    return {S.model: [r for r in records if r["method"] == ACEMAD]}


def evidence(
    S: Setup, runs: Sequence[R.Run], links: Sequence[float] = (1.0, 0.0), *, records: Optional[dict] = None
) -> pd.DataFrame:
    """What a real model would have to show, measured from stored p and q: per round, the peer-prediction score of
    agents whose answer is right minus that of agents whose answer is wrong (report.assumptions.knowledge_gap), on
    evidence_records (`records`: the caller's, already read)."""
    held = evidence_records(S, runs, links) if records is None else records
    parts = [RA.knowledge_gap(recs, label=k, seed=S.seed) for k, recs in held.items()]
    return pd.concat(parts, ignore_index=True)


def ledger_runs(S: Setup, point: R.LedgerPoint, n_max: int) -> dict[str, tuple[dict, list[dict]]]:
    """{experiment name: (meta, records)} of notebooks 02-06 (their default parameters) with the population of one
    assumption point, on the first n_max items of each benchmark's challenging subset: what claims.ledger reads.
    Runs are named map_ledger<n_max>_<point>__<experiment>: notebook 08 reads the profile's runs without "map_" ones."""
    out = {}
    for run in R.ledger_runs(point, S.seed, n_max, S.benchmarks):
        meta, records = run_with_meta(S, run, progress=False)
        out[run.name.split("__", 1)[1]] = (meta, records)
    return out


def ledger_grid(S: Setup, n_max: int = 50, seed: int = 0) -> dict[str, pd.DataFrame]:
    """{point name: the claims ledger recomputed with the population of that point} over registry.LEDGER_GRID
    (the points this population can express; report.claims.deciding names what flips each row).
    Without the synthetic population (a real-model profile) an empty dict: there is no population to vary."""
    if not isinstance(S.population, SimPopulation):
        return {}
    points = [R.LedgerPoint(claims.BASE_POINT, "no assumption moved", {}), *R.ledger_points(S.benchmarks)]
    return {p.name: claims.ledger(ledger_runs(S, p, n_max), seed=seed) for p in points}


def grid_points(S: Setup) -> pd.DataFrame:
    """The ledger grid's points as notebook 08 shows them: name, meaning, overrides, and whether this population
    and these benchmarks can express it (a point that cannot is not varied, and the table says so)."""
    kept = {p.name for p in R.ledger_points(S.benchmarks)}
    return pd.DataFrame(
        [
            {
                "point": p.name,
                "what it assumes": p.means,
                "changed": ", ".join([*(f"{k}={v:g}" for k, v in p.params.items()), *(p.benchmarks or ())]),
                "varied": "yes" if p.name in kept else "no: this population or profile cannot express it",
            }
            for p in R.LEDGER_GRID
        ]
    )


def baseline_fit(S: Setup, runs: Sequence[R.Run]) -> pd.DataFrame:
    """The profile population's five baselines, measured on this notebook's own run (map_baselines_default: the
    challenging subsets at N_MAX), beside the paper's printed cells with residuals (fit.cells). Without runs (a
    real-model profile) an empty frame whose attrs["note"] says why."""
    run = next((r for r in runs if r.name == "map_baselines_default"), None)
    if run is None:
        out = pd.DataFrame(columns=fit.CELL_COLUMNS)
        out.attrs["note"] = "the fit compares the synthetic population's baselines; this profile runs a real model"
        return out
    recs = run_point(S, run)
    long = accuracy_long(recs, ci=False)
    avg = long[long["benchmark"] == AVERAGE].set_index("method")["accuracy"]
    return fit.cells(base_params(S), simulated={str(m): float(v) for m, v in avg.items()})
