"""What notebooks 01-07 share: the profile's agents (sim, local or openai), questions, challenging subsets (built on
first use) and runs; smoke mode caps items and questions (SMOKE) so a notebook runs the same code:
`Setup(backend="sim", benchmarks=["arc_challenge"]).run(registry.main_results([3], 2.0), n_max=300)`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Optional, Union

from acemad_utils.agents.sim import SYNTHETIC_LABEL, SimParams, SimPopulation, make_items
from acemad_utils.data import benchmarks as D
from acemad_utils.data.paths import outputs, smoke
from acemad_utils.data.sim_params import POPULATIONS, population_named, stand_in
from acemad_utils.experiments import subsets
from acemad_utils.experiments.params import SETUP_NAMES, check, defaults
from acemad_utils.experiments.registry import Run, RunResult
from acemad_utils.experiments.runner import run_and_load
from acemad_utils.protocol.config import COMMIT_MAX_TOKENS, DebateConfig
from acemad_utils.protocol.schema import Population, Question

# Typical option count per benchmark, used only to shape synthetic item sets.
SYNTHETIC_K = {"truthfulqa": 5, "arc_challenge": 4, "bbh": 3, "logiqa": 4, "medqa": 4, "mmlu_pro": 10}
# Smoke-mode caps per backend: (items read per benchmark, questions per run); the local model answers in seconds.
SMOKE = {"sim": (60, 12), "local": (4, 1), "openai": (20, 3)}
_D = {n.lower(): v for n, v in defaults("02_baselines").items() if n in SETUP_NAMES}  # the notebooks' defaults


def _cap(n: Optional[int], cap: int) -> int:
    return cap if n is None else min(n, cap)


# Synthetic stand-ins for the paper's other models (BACKEND sim with MODEL set; notebook 07): traps drawn for the
# name and SimParams from the paper's words, never fitted to its numbers; unknown names get the defaults.
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
        # the profiles' one rule, before anything is written or called (PROFILE names folders)
        check({"PROFILE": profile, "BACKEND": backend, "POPULATION": population, "SOURCE": source,
               "BENCHMARKS": list(benchmarks)})  # fmt: skip
        self.profile, self.backend, self.source, self.seed, self.workers = profile, backend, source, seed, workers
        self.benchmarks = ["demo"] if source == "demo" else list(benchmarks)
        self.n_items = _cap(n_items, SMOKE[backend][0]) if smoke() else n_items
        self.subset_model = subset_model
        self.variant = subsets.variant(profile, (source, n_items, seed))  # --set values or another pool: own subsets
        # the argument's completion cap: the paper gives none (bench/argue_cap.py: how often the local model hits it)
        self.max_tokens = (argue_max_tokens, COMMIT_MAX_TOKENS)
        self._stack = contextlib.ExitStack()
        self._items: dict[str, list[Question]] = {}  # questions(b), loaded once (a real benchmark is a full file read)
        self._subsets: dict[tuple[str, str], list[Question]] = {}  # load_subset(b, slug), read and verified once
        self.population, self.model = self._population(population, model, base_url, calls)
        self.synthetic = self.population.synthetic

    @classmethod
    def from_params(cls, P: dict, **kw) -> Setup:
        """A Setup from a notebook's parameters (upper-case; absent: defaults), checked as a profile's are."""
        check(P)
        return cls(**{**{k.lower(): P[k] for k in SETUP_NAMES if k in P}, **kw})

    def _population(self, population: str, model: str, base_url: str, calls: str):
        if self.backend == "sim":
            base = POPULATIONS[population]  # the fitted population ({}) or the original
            if not model:  # another population selects other items: the original's subsets get a folder of their own
                name = subsets.SYNTHETIC_SLUG + ("" if not base else f"-{population}")
                return SimPopulation(SimParams(**base), seed=self.seed), name
            params = SimParams(**{**base, **SIM_STANDINS.get(model, {})})
            return SimPopulation(params, seed=self.seed, model=model), f"{subsets.SYNTHETIC_SLUG}-{model}"
        # Imported here: the LLM client pulls in the openai SDK (~1 s), which a synthetic kernel never uses.
        from acemad_utils.agents.llm_agent import LLMPopulation
        from acemad_utils.agents.local_server import default_gguf, model_name, serve

        if self.backend == "local":
            gguf = default_gguf()
            base_url, model = self._stack.enter_context(serve(gguf)), model or model_name(gguf)
        # WORKERS questions at once, as many calls in flight (one bound for the run)
        pop = LLMPopulation(
            model=model or None,
            base_url=base_url or None,
            cache=outputs("cache") / "llm.sqlite",
            seed=self.seed,
            calls=calls,
            max_concurrency=self.workers,
            max_tokens=self.max_tokens,
        )
        return pop, model if self.backend == "local" else pop.client(None).model

    def close(self) -> None:
        self._stack.close()

    def describe(self) -> str:
        who = SYNTHETIC_LABEL if self.synthetic else f"model {self.model} ({self.backend})"
        who += f", stand-in {self.model}" if self.synthetic and stand_in(self.model) else ""
        who += f", POPULATION {pop}" if self.synthetic and (pop := population_named(self.model)) else ""
        where = f"; challenging subsets of {self.subset_slug}" if self.subset_slug != self.slug else ""
        return f"profile {self.profile}: {who} on {self.source} items, benchmarks {self.benchmarks}{where}"

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

    def per_run(self, n_max: Optional[int]) -> Optional[int]:
        """Questions per benchmark and run: n_max, capped in smoke mode (SMOKE) by the one rule every run uses."""
        return _cap(n_max, SMOKE[self.backend][1]) if smoke() else n_max

    def full_questions(self, benchmarks: Sequence[str], n_max: Optional[int] = None) -> list[Question]:
        """The first n_max input items of each benchmark (Table 6; the demo set once)."""
        benches = self.benchmarks if self.source == "demo" else list(benchmarks)
        return [q for b in benches for q in self.questions(b)[: self.per_run(n_max)]]

    def build_subsets(self, progress: bool = True):
        """Build every benchmark's subset (resumable); returns the per-benchmark table."""
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
        return subsets.model_slug(self.subset_model or self.model, synthetic=self.synthetic) + self.variant

    def subset(self, b: str, n_max: Optional[int] = None) -> list[Question]:
        """The first n_max items of benchmark b's challenging subset; the Setup's own are built on first use."""
        try:
            qs = self.load_subset(b, self.subset_slug, self.population if self.subset_slug == self.slug else None)
        except FileNotFoundError:
            if self.subset_slug != self.slug:
                raise FileNotFoundError(
                    f"no challenging subset of {self.bench_name(b)!r} for the subset model {self.subset_model!r} "
                    f"under {subsets.subsets_root() / self.subset_slug}: build them first with that model (notebook 01 "
                    f"with MODEL={self.subset_model!r}), or set SUBSET_MODEL='' to build this model's own"
                ) from None
            self.build_subsets(progress=False)
            qs = self.load_subset(b, self.slug, self.population)
        return qs[:cap] if (cap := self.per_run(n_max)) else qs

    def load_subset(self, b: str, slug: str, population: Optional[Population] = None) -> list[Question]:
        """subsets.load_subset, once per Setup (notebook 09 asks for the same few at every map point)."""
        if (b, slug) not in self._subsets:
            self._subsets[b, slug] = subsets.load_subset(self.bench_name(b), slug, self.questions(b), population)
        return list(self._subsets[b, slug])

    def run(
        self,
        name: Union[str, Run],
        configs: Optional[Sequence[DebateConfig]] = None,
        n_max: Optional[int] = None,
        questions: Optional[Sequence[Question]] = None,
    ) -> RunResult:
        """A registry Run (or a name and configs) over every benchmark's challenging subset (or `questions`)."""
        if isinstance(name, Run) and configs is not None:
            raise TypeError("Setup.run(run, ...): a registry Run brings its own configs; pass n_max as a keyword")
        spec = name if isinstance(name, Run) else Run(name, {"configs": list(configs or [])})
        if questions is None:
            qs = [q for b in self.benchmarks for q in self.subset(b, n_max)]
        else:
            qs = list(questions)[: self.per_run(n_max)]
        meta, records = run_and_load(
            f"{self.profile}/{spec.name}",
            qs,
            spec.configs,
            self.population,
            workers=self.workers,
            profile=self.profile,
            extra_meta={"source": self.source, "model": self.model, "backend": self.backend},
        )
        return RunResult(spec, meta, records)
