"""Every run each notebook makes, built from its parameters, so the estimate, bench/ and the tests read the lists the
notebooks run: `setup.run(registry.main_results([2, 3, 5], eta=2.0), n_max=N_MAX).pick("acemad", rounds=3)`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

from acemad_utils.agents.sim import SimParams
from acemad_utils.data.sim_params import CALIBRATION_GRID, MAP_SWEEPS
from acemad_utils.experiments import params

# MAD_METHODS and VOTING_VS_MAD are re-exported: notebooks and tests read them as R.<name>
from acemad_utils.experiments.paper_tables import (  # noqa: F401
    ALL_BENCHMARKS,
    BASELINES,
    MAD_METHODS,
    PAPER_TABLES,
    VOTING_VS_MAD,
)
from acemad_utils.experiments.subsets import model_slug, subset_config
from acemad_utils.protocol.config import ETA, GENERALIST, ROUNDS, SKEPTIC, DebateConfig


@dataclass
class Run:
    """One Setup.run: named groups of configs over `on` ("subset" or "input") items of `benchmarks`, by `model`."""

    name: str
    groups: dict
    on: str = "subset"
    benchmarks: Optional[Sequence[str]] = None
    model: Optional[str] = None
    base_url: Optional[str] = None
    cap: Optional[int] = None
    notebook: str = ""
    params: Optional[dict] = None  # synthetic population overrides (SimParams fields; notebook 09's map points)

    @property
    def configs(self) -> list[DebateConfig]:
        return [c for g in self.groups.values() for c in g]

    def __getitem__(self, group: str) -> list[DebateConfig]:
        return self.groups[group]

    def labels(self, *groups: str) -> list[str]:
        return [c.label for g in (groups or self.groups) for c in self.groups[g]]

    def select(self, method: Optional[str] = None, *, group: Optional[str] = None, **fields: Any) -> list[DebateConfig]:
        """The configs with `method` (a METHODS name or a label), in `group`, and these DebateConfig fields."""
        if group is not None and group not in self.groups:
            raise ValueError(f"run {self.name!r} has no group {group!r}; its groups: {list(self.groups)}")
        known = {f.name for f in dataclasses.fields(DebateConfig)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"DebateConfig has no field(s) {unknown}; fields: {sorted(known)}")
        pool = self.groups[group] if group is not None else self.configs
        return [
            c
            for c in pool
            if method in (None, c.method, c.label) and all(getattr(c, k) == v for k, v in fields.items())
        ]

    def config(self, method: Optional[str] = None, *, group: Optional[str] = None, **fields: Any) -> DebateConfig:
        """The one config select() finds; none or several is a ValueError naming what was run."""
        found = self.select(method, group=group, **fields)
        if len(found) == 1:
            return found[0]
        asked = ", ".join([*([f"{method!r}"] if method else []), *(f"{k}={v!r}" for k, v in fields.items())])
        asked += f" in group {group!r}" if group else ""
        what = "no config" if not found else f"{len(found)} configs ({', '.join(c.label for c in found)})"
        raise ValueError(
            f"{self.notebook or 'run'} {self.name!r}: {what} matches {asked or 'everything'}; this run made: "
            + "; ".join(f"{g}: {', '.join(c.label for c in cs)}" for g, cs in self.groups.items())
        )

    def label(self, method: Optional[str] = None, *, group: Optional[str] = None, **fields: Any) -> str:
        return self.config(method, group=group, **fields).label

    def family(self, method: Optional[str] = None, *, group: Optional[str] = None, **fields: Any) -> str:
        """The one family (label without N, for curves over N) of the configs select() finds."""
        families = sorted({c.family for c in self.select(method, group=group, **fields)})
        if len(families) != 1:
            self.config(method, group=group, **fields)  # none: the ValueError naming what was run
            raise ValueError(f"run {self.name!r}: {len(families)} families match {method!r}: {families}")
        return families[0]


@dataclass(frozen=True)
class RunResult:
    """What Setup.run returns: the Run (whose config/label/labels/family answer here too), meta and records."""

    run: Run
    meta: dict
    records: list[dict]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.meta, self.records))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "run":  # copy/pickle probe before `run` is set
            raise AttributeError(name)
        return getattr(self.run, name)

    def pick(self, method: Optional[str] = None, *, group: Optional[str] = None, **fields: Any) -> list[dict]:
        """The records (every status) of the one config that Run.config finds."""
        label = self.run.label(method, group=group, **fields)
        return [r for r in self.records if r.get("method") == label]


# ----------------------------------------------------------------------------- one function per experiment
def baselines(n_values: Sequence[int], n_table: int, seed: int = 0) -> Run:
    """Notebook 02 (Table 1, Figure 2): the four methods at every N, T = 3; Centralized MAD from N = 2 (a star)."""
    ns = sorted(set(n_values) | {n_table})
    return Run(
        "baselines",
        {
            m: [DebateConfig(method=m, n_agents=n, seed=seed) for n in ns if not (m == "centralized" and n < 2)]
            for m in VOTING_VS_MAD
        },
    )


SKEPTIC_ALONE = "Single Agent (AceMAD's Skeptic alone)"


def controls(seed: int = 0) -> list[DebateConfig]:
    """The controls that could embarrass the protocol, with AceMAD's agents: debate without weights, the Skeptic
    alone, voting without debate."""
    return [
        DebateConfig(method="decentralized", roster="acemad", seed=seed),
        DebateConfig(method="single", baseline_agent=SKEPTIC, seed=seed, name=SKEPTIC_ALONE),
        DebateConfig(method="majority", roster="acemad", seed=seed),
    ]


def main_results(rounds: Sequence[int], eta: float, seed: int = 0) -> Run:
    """Notebook 03 (Table 2): baselines, controls, AceMAD at every T of `rounds` and at T = 3 (the headline), and
    self-consistency at AceMAD's calls (ours)."""
    ts = sorted({*rounds, ROUNDS})
    sc = DebateConfig(method="self_consistency", seed=seed)  # N = 5, T = 3: 15 samples, named as ours in every table
    return Run(
        "main",
        {
            "baselines": [DebateConfig(method=m, seed=seed) for m in BASELINES],
            "control": controls(seed),
            "acemad": [DebateConfig(method="acemad", rounds=t, eta=eta, seed=seed) for t in ts],
            "matched": [sc.replace(name=f"{sc.label[:-1]}; ours, not the paper's)")],
        },
    )


def heterogeneity(second_model: str, second_base_url: str = "", seed: int = 0, eta: float = ETA) -> Run:
    """Notebook 04 (Table 3): Decentralized MAD and one AceMAD per truth-holder ("Different LLMs": a second model)."""
    variants = {
        "AceMAD (Different Persona)": SKEPTIC,  # the main AceMAD's truth-holder
        "AceMAD (Different Thinking System)": replace(GENERALIST, temperature=SKEPTIC.temperature, thinking="slow"),
    }
    if second_model:
        variants["AceMAD (Different LLMs)"] = replace(
            GENERALIST, temperature=SKEPTIC.temperature, model=second_model, base_url=second_base_url or None
        )
    return Run(
        "heterogeneity",
        {
            "homogeneous": [DebateConfig(method="decentralized", seed=seed)],
            "variants": [
                DebateConfig(method="acemad", truth_holder=s, eta=eta, seed=seed, name=n) for n, s in variants.items()
            ],
        },
    )


def rosters(run: Run, group: str) -> str:
    """One line per config of `group`: its label and its agents (notebook 04 shows its variants before they run)."""
    return "\n".join(
        f"{c.label}: "
        + ", ".join(
            f"{s.persona} T={s.temperature}"
            + (f" {s.thinking}" if s.thinking != "fast" else "")
            + (f" on {s.model}" if s.model else "")
            for s in c.specs()
        )
        for c in run[group]
    )


def ablation(seed: int = 0, eta: float = ETA) -> Run:
    """Notebook 05 (Figure 4): AceMAD, whose commitments the ablations re-decide, Standard MAD (l.511's uniform-weight
    bar, run as Decentralized MAD with AceMAD's agents: docs/paper-choices.md) and notebook 03's other two controls."""
    return Run(
        "ablation",
        {
            "full": [DebateConfig(method="acemad", eta=eta, seed=seed)],
            "standard": [DebateConfig(method="decentralized", roster="acemad", seed=seed)],
            "controls": controls(seed)[1:],  # the Skeptic alone and Majority Voting with AceMAD's agents
        },
    )


def scaling(n_values: Sequence[int], seed: int = 0, eta: float = ETA) -> Run:
    """Notebook 06 (Figure 5): AceMAD (T = 3) and Majority Voting at every N of n_values."""
    return Run(
        "scaling",
        {
            "acemad": [DebateConfig(method="acemad", n_agents=n, eta=eta, seed=seed) for n in n_values],
            "majority": [DebateConfig(method="majority", n_agents=n, seed=seed) for n in n_values],
        },
    )


def table_configs(table: str, seed: int = 0, eta: float = ETA) -> tuple[list[DebateConfig], list[DebateConfig]]:
    """(baseline configs, AceMAD configs) of one of PAPER_TABLES, N = 5."""
    if table not in PAPER_TABLES:
        raise ValueError(f"table {table!r} is not one of {sorted(PAPER_TABLES)}")
    spec = PAPER_TABLES[table]
    return (
        [DebateConfig(method=m, seed=seed) for m in spec["baselines"]],
        [DebateConfig(method="acemad", rounds=t, eta=eta, seed=seed) for t in spec["rounds"]],
    )


def other_model(entry: dict, benchmarks: Sequence[str], seed: int = 0, eta: float = ETA) -> Run:
    """Notebook 07: one printed table (entry["table"]) with one model (an OTHER_MODELS entry) on its benchmarks."""
    table = entry["table"]
    base, ace = table_configs(table, seed, eta)
    return Run(
        f"other_{model_slug(entry['model'])}_{table}",
        {"baselines": base, "acemad": ace},
        benchmarks=[b for b in PAPER_TABLES[table]["benchmarks"] if b in benchmarks],
        model=entry["model"],
        base_url=entry.get("base_url") or None,
    )


def full_datasets(benchmarks: Sequence[str], n_max: Optional[int], seed: int = 0, eta: float = ETA) -> Run:
    """Notebook 07 (Table 6): Decentralized MAD vs AceMAD (T = 3) on the first n_max items of the full test sets."""
    base, ace = table_configs("table6_full_datasets", seed, eta)
    return Run("full_datasets", {"baselines": base, "acemad": ace}, on="input", benchmarks=list(benchmarks), cap=n_max)


# Notebook 09's reference points beside the grid: no peer-prediction skill anywhere, and the earlier calibration.
MAP_REFERENCES: dict[str, dict] = {
    "no skilled predictor (link 0, insight_calibration 0)": {"knowledge_link": 0.0, "insight_calibration": 0.0},
    "calibration and stubbornness by persona (the earlier rule)": {"calibration_by": "persona"},
}
# SimParams fields that change what the baselines' agents answer: a point moving one gets its own subsets and
# baseline runs; every other point shares the default's.
SUBSET_PARAMS = ("trap_mean", "trap_concentration", "crowd_insight", "crowd_copy", "explore_base", "explore_per_temp")


def subset_params(p: dict) -> dict:
    """The overrides among SUBSET_PARAMS: what picks a map point's subsets and baseline runs."""
    return {k: v for k, v in p.items() if k in SUBSET_PARAMS}


def overrides(params: dict) -> dict:
    """The point's SimParams overrides that differ from the defaults (so a default point is one shared run)."""
    SimParams(**params)  # a bad axis value stops here, naming the field
    default = SimParams()
    return {k: v for k, v in sorted(params.items()) if getattr(default, k) != v}


def params_slug(params: dict) -> str:
    """A run-name fragment of a point's overrides ('default' for none); a short number only where exact."""
    num = lambda v: f"{v:g}" if float(f"{v:g}") == v else repr(float(v))
    parts = [f"{k}{num(v)}" if isinstance(v, (int, float)) else f"{k}-{v}" for k, v in overrides(params).items()]
    return "_".join(parts) or "default"


#: notebook 09's parameter -> the map axis it sets (absent ones: MAP_AXES)
MAP_PARAMS = {
    "LINKS": "knowledge_link",
    "INSIGHTS": "insight",
    "TRAP_CONCENTRATIONS": "trap_concentration",
    "CROWD_CALIBRATIONS": "crowd_calibration",
    "CROWD_COPIES": "crowd_copy",
}

MAP_AXES = {axis: tuple(params.defaults("09_assumption_map")[name]) for name, axis in MAP_PARAMS.items()}


def map_axes(P: dict) -> dict:
    return {axis: tuple(P.get(name) or MAP_AXES[axis]) for name, axis in MAP_PARAMS.items()}


def map_points(axes: dict) -> list[tuple[str, dict]]:
    """(axis, SimParams overrides) of every map point: two grids over knowledge_link, the sweeps, the references."""
    pts = [("grid", {"knowledge_link": a, "insight": b}) for a in axes["knowledge_link"] for b in axes["insight"]]
    pts += [
        (CALIBRATION_GRID, {"knowledge_link": a, "crowd_calibration": c})
        for a in axes["knowledge_link"]
        for c in axes["crowd_calibration"]
    ]
    pts += [(ax, {ax: v}) for ax in MAP_SWEEPS for v in axes[ax]]
    return pts + list(MAP_REFERENCES.items())


def assumption_map(axes: dict, eta: float = ETA, seed: int = 0) -> list[Run]:
    """Notebook 09: one AceMAD run per distinct map point, the baselines once per distinct SUBSET_PARAMS value."""
    out: dict[str, Run] = {}
    ace = [DebateConfig(method="acemad", rounds=ROUNDS, eta=eta, seed=seed)]
    mads = [DebateConfig(method=m, seed=seed) for m in MAD_METHODS]
    voting = [DebateConfig(method=m, seed=seed) for m in ("single", "majority")]
    for _, p in map_points(axes):
        p = overrides(p)
        base = subset_params(p)
        for name, groups, point in (
            (f"map_baselines_{params_slug(base)}", {"baselines": mads, "voting": voting}, base),
            (f"map_{params_slug(p)}", {"acemad": ace}, p),
        ):
            out.setdefault(name, Run(name, groups, params=dict(point)))
    return list(out.values())


@dataclass(frozen=True)
class LedgerPoint:
    """A point of the claims ledger's grid: name, meaning, SimParams overrides, the only benchmarks run (None: all)."""

    name: str
    means: str
    params: dict
    benchmarks: Optional[tuple[str, ...]] = None


#: The population's assumptions no printed number fixes, each moved one at a time; notebook 08 recomputes every
#: ledger row at each point (assumption_map.ledger_grid) and says which flip it.
LEDGER_GRID = (
    LedgerPoint("knowledge_link = 0", "peer-prediction skill unrelated to knowing the truth", {"knowledge_link": 0.0}),
    LedgerPoint(
        "near-copy Generalists",
        "the four Generalists (one prompt, temperature 0.1) share one state on an item 90% of the time",
        {"crowd_copy": 1.0},
    ),
    LedgerPoint("independent Generalists", "each Generalist draws its own state on an item", {"crowd_copy": 0.0}),
    LedgerPoint(
        "equal stubbornness",
        "truth-holders as susceptible as the crowd (insight_susceptibility = crowd_susceptibility)",
        {"insight_susceptibility": SimParams().crowd_susceptibility},
    ),
    LedgerPoint("insight = 0.05", "the Skeptic almost never sees through the trap", {"insight": 0.05}),
    LedgerPoint("insight = 0.5", "the Skeptic sees through the trap half the time (the original)", {"insight": 0.5}),
    LedgerPoint("crowd_insight = 0", "no Generalist ever sees through the trap (the original)", {"crowd_insight": 0.0}),
    LedgerPoint("crowd_insight = 0.3", "Generalists see through the trap more often", {"crowd_insight": 0.3}),
    LedgerPoint("crowd_calibration = 0.5", "the unskilled crowd half predicts its peers", {"crowd_calibration": 0.5}),
    LedgerPoint("trap_mean = 0.5", "a weaker shared trap", {"trap_mean": 0.5}),
    LedgerPoint("K = 3", "three options: BBH's items only", {}, ("bbh",)),
    LedgerPoint("K = 10", "ten options: MMLU-Pro's items only", {}, ("mmlu_pro",)),
)
#: The notebooks whose runs the ledger grid repeats (07's stand-ins and full test sets are not varied)
LEDGER_NOTEBOOKS = ("02_baselines", "03_main_results", "04_heterogeneity", "05_ablation", "06_scaling")


def ledger_points(benchmarks: Sequence[str], grid: Sequence[LedgerPoint] = LEDGER_GRID) -> list[LedgerPoint]:
    """The grid's points these benchmarks and SimParams can express."""
    fields = {f.name for f in dataclasses.fields(SimParams)}
    known = [p for p in grid if set(p.params) <= fields and set(p.benchmarks or ()) <= set(benchmarks)]
    return [p for p in known if overrides(p.params) or (p.benchmarks and set(p.benchmarks) != set(benchmarks))]


def ledger_runs(point: LedgerPoint, seed: int, n_max: int, benchmarks: Sequence[str], eta: float = ETA) -> list[Run]:
    """The runs of LEDGER_NOTEBOOKS (default parameters, the profile's eta) at one grid point, n_max per benchmark."""
    benches = list(point.benchmarks or benchmarks)
    slug = params_slug(point.params) + ("_" + "-".join(point.benchmarks) if point.benchmarks else "")
    out = []
    for nb in LEDGER_NOTEBOOKS:
        for r in runs(nb, {"SEED": seed, "N_MAX": n_max, "BENCHMARKS": benches, "ETA": eta}):
            out.append(replace(r, name=f"map_ledger{n_max}_{slug}__{r.name}", params=dict(point.params)))
    return out


# ----------------------------------------------------------------------------- every run of a notebook
def runs(nb: str, P: dict) -> list[Run]:
    """Every run notebook `nb` makes with parameters P (missing ones: its defaults), in order."""
    P = {**params.defaults(nb), **P} if nb in params.NOTEBOOKS else P
    seed, eta, n_max = P.get("SEED", 0), P.get("ETA", ETA), P.get("N_MAX")
    benches = list(P.get("BENCHMARKS") or ALL_BENCHMARKS)
    full = P.get("FULL_BENCHMARKS") or PAPER_TABLES["table6_full_datasets"]["benchmarks"]
    make = {
        "01": lambda: [Run("subsets", {"single": [subset_config(seed=seed)]}, on="input")],  # 5 naive runs per item
        "02": lambda: [baselines(P["N_VALUES"], P["N_TABLE"], seed)],
        "03": lambda: [main_results(P["ROUNDS"], eta, seed)],
        "04": lambda: [heterogeneity(P.get("SECOND_MODEL") or "", P.get("SECOND_BASE_URL") or "", seed, eta)],
        "05": lambda: [ablation(seed, eta)],
        "06": lambda: [scaling(P["N_VALUES"], seed, eta)],
        "07": lambda: [
            *(other_model(e, benches, seed, eta) for e in P.get("OTHER_MODELS") or []),
            full_datasets(full, P.get("FULL_N_MAX"), seed, eta),
        ],
        # the map varies the synthetic population: nothing to run otherwise
        "09": lambda: assumption_map(map_axes(P), eta, seed) if P.get("BACKEND", "sim") == "sim" else [],
    }
    out: list[Run] = make.get(nb[:2], list)()
    for r in out:
        r.notebook = nb
        r.benchmarks = benches if r.benchmarks is None else r.benchmarks
        if r.on == "subset":
            r.cap = n_max
    return out
