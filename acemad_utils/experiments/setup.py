"""What notebooks 01-07 share: the profile's agents, its questions and challenging subsets, and runs.

    from acemad_utils.experiments.setup import Setup
    S = Setup(profile="default", backend="sim", source="synthetic", benchmarks=["arc_challenge"], n_items=600)
    qs = S.subset("arc_challenge", n_max=300)        # built (and cached) on first use
    recs = S.run("table2", [DebateConfig(method="majority")], n_max=300)
    S.close()                                         # stops a local server if one was started
    # another model on the subsets of the first one (the paper reuses one set of subsets across models)
    Q = Setup(backend="openai", model="DeepSeek-V3.1", subset_model="gpt-4o-mini", source="benchmarks")

backend  "sim"    the synthetic population (no LLM); with MODEL set, a labelled synthetic stand-in for that
                  model (SIM_STANDINS: its own misconceptions and parameters, notebook 07)
         "local"  llama.cpp's server on 127.0.0.1 with a GGUF (SmolLM2-135M by default, ACEMAD_GGUF overrides)
         "openai" any OpenAI-compatible endpoint: MODEL, BASE_URL (or OPENAI_BASE_URL), OPENAI_API_KEY
subset_model  whose challenging subsets the runs use: "" = this Setup's own model (built on first use);
              another name = that model's subsets, which must exist already (notebook 01 builds them)
calls    "two" (the paper: argue, then commit) or "single" (both in one structured reply; LLM backends)
source   "synthetic"   generated items (no download), one set per benchmark with that benchmark's typical
                       option count; benchmark names get a "synthetic-" prefix
         "benchmarks"  the real files (ACEMAD_DATA_DIR or the hub)
         "demo"        the 24 demo questions shipped in data/demo
Runs go to outputs/runs/<profile>/<name>/ and LLM responses to outputs/cache/llm.sqlite, so a rerun
continues where it stopped and a warm rerun makes no network call.

Smoke mode (ACEMAD_SMOKE=1: nbval, CI) caps the item counts per backend (SMOKE), because what takes seconds
with the synthetic population takes minutes with a real model on 2 CPU cores. The cap is applied here (items
read, questions per run, full-test-set questions), so a notebook runs the same code in both modes.

A notebook's setup cell is one call, acemad_utils.notebook.start("02_baselines", PROFILE=PROFILE, ...), which names
every Setup parameter of the notebook and builds Setup.from_params from them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

from acemad_utils.agents.sim import SYNTHETIC_LABEL, SimParams, SimPopulation, make_items
from acemad_utils.data import benchmarks as D
from acemad_utils.data.paths import outputs, safe_segment, smoke
from acemad_utils.data.sim_params import POPULATIONS
from acemad_utils.experiments import subsets
from acemad_utils.experiments.params import BACKENDS, SCHEMA, SOURCES, problem, setup_defaults
from acemad_utils.experiments.registry import Run, RunResult
from acemad_utils.experiments.runner import run_and_load
from acemad_utils.protocol.config import COMMIT_MAX_TOKENS, DebateConfig
from acemad_utils.protocol.schema import Population, Question

# Typical option count per benchmark, used only to shape synthetic item sets.
SYNTHETIC_K = {"truthfulqa": 5, "arc_challenge": 4, "bbh": 3, "logiqa": 4, "medqa": 4, "mmlu_pro": 10}
# Smoke-mode caps per backend: (items read per benchmark, questions per run). The real local model answers a
# call in seconds, so its smoke run keeps one question per notebook; the fake endpoint answers at once.
SMOKE = {"sim": (60, 12), "local": (4, 1), "openai": (20, 3)}
_D = setup_defaults()  # Setup's defaults are the notebook parameters' (experiments/params.py)


def _cap(n: Optional[int], cap: int) -> int:
    return cap if n is None else min(n, cap)


# Synthetic stand-ins for the paper's other models (BACKEND sim with MODEL set; notebook 07). Each gets its own
# misconceptions (traps drawn for its name) and SimParams chosen from the paper's words, never fitted to its
# numbers; every artefact made with them says SYNTHETIC. Unknown names get the default SimParams.
SIM_STANDINS: dict[str, dict[str, Any]] = {
    "Qwen3-235B-A22B-Instruct": {},
    # l.1022: DeepSeek-V3.1 "may have less severe correlated noise in its default generation patterns"
    "DeepSeek-V3.1": {"trap_mean": 0.5},
    # l.1071: the 8B model's "ability to maintain a stable and accurate peer-prediction is naturally more
    # constrained"; "higher baseline hallucination rates"
    "Llama-3.1-8B-Instruct": {"trap_mean": 0.8, "insight_calibration": 0.5},
}


class Setup:
    def __init__(
        self,
        *,
        profile: str = _D["profile"],
        backend: str = _D["backend"],
        population: str = _D["population"],
        source: str = _D["source"],
        benchmarks: Sequence[str] = tuple(_D["benchmarks"]),
        n_items: Optional[int] = _D["n_items"],
        seed: int = _D["seed"],
        model: str = _D["model"],
        base_url: str = _D["base_url"],
        workers: int = _D["workers"],
        calls: str = _D["calls"],
        subset_model: str = _D["subset_model"],
        argue_max_tokens: Optional[int] = _D["argue_max_tokens"],
    ):
        if backend not in BACKENDS:
            raise ValueError(f"BACKEND={backend!r} is not allowed; choose one of {BACKENDS}")
        if population not in POPULATIONS:
            raise ValueError(f"POPULATION={population!r} is not allowed; choose one of {tuple(POPULATIONS)}")
        self.population_name = population
        if source not in SOURCES:
            raise ValueError(f"SOURCE={source!r} is not allowed; choose one of {SOURCES}")
        unknown = [b for b in benchmarks if b not in SYNTHETIC_K]
        if unknown:
            raise ValueError(f"BENCHMARKS has unknown name(s) {unknown}; allowed: {sorted(SYNTHETIC_K)}")
        safe_segment(profile, "PROFILE")  # it names folders under outputs/: checked before anything is written
        self.profile, self.backend, self.source, self.seed, self.workers = profile, backend, source, seed, workers
        self.benchmarks = ["demo"] if source == "demo" else list(benchmarks)
        self.n_items = _cap(n_items, SMOKE[backend][0]) if smoke() else n_items
        self.calls = calls
        self.subset_model = subset_model
        self.variant = subsets.variant(profile)  # a run with shaping --set values: subsets of its own (run_key)
        # The argument's completion cap (tokens; None: none). The paper gives no cap; a step-by-step truth-holder
        # may need more than the default (bench/argue_cap.py measures how often the local model reaches it).
        self.max_tokens = (argue_max_tokens, COMMIT_MAX_TOKENS)
        self._stack = contextlib.ExitStack()
        self._items: dict[str, list[Question]] = {}  # questions(b), loaded once (a real benchmark is a full file read)
        self._subsets: dict[tuple[str, str], list[Question]] = {}  # load_subset(b, slug), read and verified once
        self.population, self.model = self._population(model, base_url)
        self.synthetic = self.population.synthetic

    #: notebook parameter -> Setup argument (from_params), from the schema
    PARAMS = {p.name: p.setup_arg for p in SCHEMA.values() if p.setup_arg}

    @classmethod
    def from_params(cls, P: dict, **kw) -> Setup:
        """A Setup from a notebook's parameters (upper-case names in P, e.g. globals(); absent ones keep their
        defaults); keyword arguments override them. Every schema parameter in P is checked first (a cell edited
        by hand in JupyterLab gets the profiles' one-line message, naming what is allowed)."""
        for name in SCHEMA.keys() & P.keys():
            why = problem(name, P[name])
            if why:
                raise ValueError(f"{name} = {P[name]!r} is not allowed ({why}); {name} takes {SCHEMA[name].allowed()}")
        return cls(**{**{a: P[k] for k, a in cls.PARAMS.items() if k in P}, **kw})

    # ------------------------------------------------------------------ agents
    def _population(self, model: str, base_url: str) -> tuple[Population, str]:
        if self.backend == "sim":
            base = POPULATIONS[self.population_name]  # the fitted population ({}) or the original
            if not model:  # the default profile's population: the subset model of every synthetic run
                # another population selects other items: the original's subsets get a folder of their own
                name = subsets.SYNTHETIC_SLUG + ("" if not base else f"-{self.population_name}")
                return SimPopulation(SimParams(**base), seed=self.seed), name
            params = SimParams(**{**base, **SIM_STANDINS.get(model, {})})
            return SimPopulation(params, seed=self.seed, model=model), f"{subsets.SYNTHETIC_SLUG}-{model}"

        # Imported here, not at module top: the LLM client pulls in the openai SDK (~1 s), which a synthetic
        # profile's kernel never uses.
        from acemad_utils.agents.llm_agent import LLMPopulation
        from acemad_utils.agents.local_server import default_gguf, serve

        cache = outputs("cache") / "llm.sqlite"
        if self.backend == "local":
            gguf = default_gguf()
            url = self._stack.enter_context(serve(gguf))
            name = model or Path(gguf).stem
            return LLMPopulation(
                model=name,
                base_url=url,
                cache=cache,
                seed=self.seed,
                calls=self.calls,
                max_concurrency=self.workers,
                max_tokens=self.max_tokens,
            ), name
        # WORKERS questions run at once and the client lets as many calls be in flight (one bound for the run).
        pop = LLMPopulation(
            model=model or None,
            base_url=base_url or None,
            cache=cache,
            seed=self.seed,
            calls=self.calls,
            max_concurrency=self.workers,
            max_tokens=self.max_tokens,
        )
        return pop, pop.client(None).model

    def close(self) -> None:
        self._stack.close()

    def describe(self) -> str:
        who = SYNTHETIC_LABEL if self.synthetic else f"model {self.model} ({self.backend})"
        if self.synthetic and self.model != subsets.SYNTHETIC_SLUG:
            who += f", stand-in {self.model}"
        where = f"; challenging subsets of {self.subset_slug}" if self.subset_slug != self.slug else ""
        return f"profile {self.profile}: {who} on {self.source} items, benchmarks {self.benchmarks}{where}"

    # ------------------------------------------------------------------ questions
    def bench_name(self, b: str) -> str:
        return f"synthetic-{b}" if self.source == "synthetic" else b

    def questions(self, b: str) -> list[Question]:
        """The input items of benchmark b (before the challenging-subset filter)."""
        if b not in self._items:
            if self.source == "synthetic":
                items = make_items(self.n_items or 600, k=SYNTHETIC_K[b], seed=self.seed, benchmark=self.bench_name(b))
            elif self.source == "demo":
                items = D.load_demo()[: self.n_items]
            else:
                items = D.load(b, limit=self.n_items)
            self._items[b] = items
        return list(self._items[b])

    def _n_max(self, n_max: Optional[int]) -> Optional[int]:
        """Questions per run: n_max, capped in smoke mode (SMOKE) by the one rule every run path uses."""
        return _cap(n_max, SMOKE[self.backend][1]) if smoke() else n_max

    def per_run(self, n_max: Optional[int]) -> Optional[int]:
        """Questions per benchmark and run for a caller that picks its own questions (notebook 09's map): n_max,
        capped in smoke mode like every run of this Setup."""
        return self._n_max(n_max)

    def full_questions(self, benchmarks: Sequence[str], n_max: Optional[int] = None) -> list[Question]:
        """The first n_max input items of each benchmark (no challenging-subset filter: Table 6). With the
        demo source every benchmark is the demo set, so it is taken once. Smoke mode caps n_max as run() does."""
        n_max = self._n_max(n_max)
        benches = self.benchmarks if self.source == "demo" else list(benchmarks)
        return [q for b in benches for q in self.questions(b)[:n_max]]

    def build_subsets(self, progress: bool = True):
        """Run the subset construction for every benchmark (resumable); returns the per-benchmark table."""
        self._subsets.clear()  # what load_subset read before may be rebuilt now
        for b in self.benchmarks:
            subsets.build_subset(
                self.bench_name(b),
                self.questions(b),
                self.population,
                self.model,
                seed=self.seed,
                progress=progress,
                workers=self.workers,
                variant=self.variant,
            )
        return subsets.subset_table(self.slug)

    @property
    def slug(self) -> str:
        return subsets.model_slug(self.model, synthetic=self.synthetic) + self.variant

    @property
    def subset_slug(self) -> str:
        """Whose subsets this Setup runs on: its own, or the subset model's."""
        if not self.subset_model:
            return self.slug
        return subsets.model_slug(self.subset_model, synthetic=self.synthetic) + self.variant

    def subset(self, b: str, n_max: Optional[int] = None) -> list[Question]:
        """The challenging subset of benchmark b (the first n_max kept items). The Setup's own subsets are built
        on first use; another subset model's must exist (a clear error says how to build them)."""
        name = self.bench_name(b)
        n_max = self._n_max(n_max)
        try:
            qs = self.load_subset(b, self.subset_slug, self.population if self.subset_slug == self.slug else None)
        except FileNotFoundError:
            if self.subset_slug != self.slug:
                raise FileNotFoundError(
                    f"no challenging subset of {name!r} for the subset model {self.subset_model!r} under "
                    f"{subsets.subsets_root() / self.subset_slug}: build them first with that model (notebook 01 "
                    f"with MODEL={self.subset_model!r}, or "
                    f"`python -m acemad_utils.experiments.subsets build --model ...`), "
                    f"or set SUBSET_MODEL='' to build this model's own"
                ) from None
            self.build_subsets(progress=False)
            qs = self.load_subset(b, self.slug, self.population)
        return qs[:n_max] if n_max else qs

    def load_subset(self, b: str, slug: str, population: Optional[Population] = None) -> list[Question]:
        """The saved challenging subset of benchmark b judged by `slug`'s population (subsets.load_subset: the
        items verified against their content hashes), read once per Setup: notebook 09 asks for the same few
        subsets at each of its map points, and a saved subset does not change under a running notebook. A missing
        one raises FileNotFoundError each time (nothing is cached), so the caller can build it and ask again; so does
        one that another synthetic population selected (`population`: the one whose subsets these must be)."""
        key = (b, slug)
        if key not in self._subsets:
            self._subsets[key] = subsets.load_subset(self.bench_name(b), slug, self.questions(b), population)
        return list(self._subsets[key])

    # ------------------------------------------------------------------ runs
    def run(
        self,
        name: Union[str, Run],
        configs: Optional[Sequence[DebateConfig]] = None,
        n_max: Optional[int] = None,
        questions: Optional[Sequence[Question]] = None,
    ) -> RunResult:
        """Run configs over every benchmark's challenging subset (or the given questions).

        `name` is a registry Run (its name and configs; `configs` stays None) or a run name with its configs.
        Returns a registry.RunResult: `meta, records = S.run(...)` unpacks it, and `.pick("acemad", rounds=3)`
        asks it for one config's records; meta["methods"][label] holds each config's parameters (e.g. n_agents).
        """
        if isinstance(name, Run):
            if configs is not None:
                raise TypeError("Setup.run(run, ...): a registry Run brings its own configs; pass n_max as a keyword")
            spec = name
        else:
            spec = Run(name, {"configs": list(configs or [])})
        if questions is not None:
            qs = list(questions)[: self._n_max(n_max)]
        else:
            qs = [q for b in self.benchmarks for q in self.subset(b, n_max)]
        meta, records = run_and_load(  # = run_experiment, then load_run, without parsing a rerun's records twice
            f"{self.profile}/{spec.name}",
            qs,
            spec.configs,
            self.population,
            workers=self.workers,
            profile=self.profile,
            extra_meta={"source": self.source, "model": self.model, "backend": self.backend},
        )
        return RunResult(spec, meta, records)
