"""Profiles: which parameters each notebook gets, loaded and checked before anything runs.

    from acemad_utils.experiments.profiles import load_profile, run_env
    prof = load_profile("default", overrides={"SEED": 1})   # SystemExit naming the bad key or value
    run_env(prof)                                            # {"ACEMAD_MAX_USD": "50", ...} for the kernels
    notebook_runs("03_main_results", "paper")               # the registry's runs, with the profile's parameters

    python -m acemad_utils.experiments.profiles --profile paper   # every run of every notebook (none is made)

A profile is one small YAML file in profiles/ holding papermill parameters per notebook:

    profile: default
    description: ...
    common: {BACKEND: sim, SEED: 0}            # given to every notebook that declares the parameter
    notebooks:
      00_theory: {N_ITEMS: 400}
    max_usd: 50          # optional: stop sending paid calls before the run's spend passes $50 (budget.py)
    calls_via: sync      # optional: sync (default), batch (the OpenAI Batch API) or files (request JSONL for
                         # another Batch-API runner, e.g. vLLM run-batch), see batch.py
    models:              # optional: price a model (USD per 1M tokens) or mark it free, over agents/prices.py
      Qwen/Qwen3-235B-A22B-Instruct-2507: {price: {input: 0.2, output: 0.6, cached_input: 0.1, batch: 0.5}}
      meta-llama/Llama-3.1-8B-Instruct: {free: true}    # your own vLLM: no bill
    jobs: 2              # optional: notebooks run side by side (synthetic notebooks only; default 1), see READS

`max_usd`, `calls_via` and `models` are run settings, not notebook parameters: they reach every notebook's
kernel as the environment variables ACEMAD_MAX_USD, ACEMAD_CALLS_VIA and ACEMAD_MODELS (JSON; any of them,
when already set, wins over the profile), and `--set MAX_USD=20` / `--set CALLS_VIA=batch` set them for one
run. An endpoint is free only when it is the project's own llama.cpp server or its model is marked `free: true`
here: any other model without a price is unpriced, and a run with MAX_USD refuses to call it (prices.py).

Keys and values are checked before anything runs: an unknown top-level key, an unknown notebook, a
parameter that the notebook's `parameters` cell does not define, a value of the wrong type (the type of
the notebook's default) or out of range (PARAM_RULES) stops with a message naming it. `--set KEY=VALUE`
(YAML value) overrides a common parameter for this run only, e.g. an endpoint's URL that only this machine
knows.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlparse

import papermill as pm
import yaml

from acemad_utils.agents.budget import parse_max_usd
from acemad_utils.agents.prices import ENV_MODELS, parse_terms
from acemad_utils.data.paths import ROOT
from acemad_utils.experiments import registry
from acemad_utils.experiments.registry import PAPER_TABLES
from acemad_utils.experiments.setup import BACKENDS, SOURCES, SYNTHETIC_K
from acemad_utils.protocol.config import METHODS

PROFILE_KEYS = {"profile", "description", "common", "notebooks", "max_usd", "calls_via", "models", "jobs"}
#: Run settings (top-level profile keys, or --set NAME=...) -> the environment variable a kernel reads.
RUN_SETTINGS = {"max_usd": "ACEMAD_MAX_USD", "calls_via": "ACEMAD_CALLS_VIA", "models": ENV_MODELS}
CALLS_VIA = ("sync", "batch", "files")
MAX_JOBS = 8
#: What a notebook reads that other notebooks of the same `make reproduce` write: with `jobs` > 1 it starts only
#: after they ended (ok or not). "*" = every other notebook of the run. 02-07 read 01's challenging subsets;
#: 08 reads every run. 00 reads nothing of the others. Each notebook writes only its own runs, tables and figures.
READS = {
    **{
        nb: ("01_subset_construction",)
        for nb in (
            "02_baselines",
            "03_main_results",
            "04_heterogeneity",
            "05_ablation",
            "06_scaling",
            "07_other_models",
        )
    },
    "08_claims": ("*",),
    # the map's default points use 01's subsets; on a real-model profile it measures 03's AceMAD run
    "09_assumption_map": ("01_subset_construction", "03_main_results"),
}
# Parameters that may be null although their notebook default is a number ("no limit": every item).
NULLABLE = {"N_ITEMS", "N_MAX", "FULL_N_MAX", "ARGUE_MAX_TOKENS"}
# Largest accepted values: more questions than any benchmark holds, more threads than an endpoint takes, more
# agents and rounds than a debate prompt fits.
MAX_ITEMS, MAX_WORKERS, MAX_AGENTS, MAX_ROUNDS = 1_000_000, 256, 100, 50


def _choices(names) -> Callable[[Any], Optional[str]]:
    allowed = list(names)

    def check(v) -> Optional[str]:
        vals = v if isinstance(v, list) else [v]
        bad = [x for x in vals if x not in allowed]
        return f"unknown name(s) {bad}{hint(str(bad[0]), allowed)}; allowed: {allowed}" if bad else None

    return check


def _at_least(lo: float) -> Callable[[Any], Optional[str]]:
    def check(v) -> Optional[str]:
        vals = v if isinstance(v, list) else [v]
        bad = [x for x in vals if x is not None and not (math.isfinite(x) and x >= lo)]
        return f"need values >= {lo:g}, got {bad}" if bad else None

    return check


def _between(lo: float, hi: float) -> Callable[[Any], Optional[str]]:
    """lo <= value <= hi for a number or every number of a list (null passes: NULLABLE decides)."""

    def check(v) -> Optional[str]:
        vals = v if isinstance(v, list) else [v]
        bad = [x for x in vals if x is not None and not (math.isfinite(x) and lo <= x <= hi)]
        return f"need values from {lo:g} to {hi:g}, got {bad}" if bad else None

    return check


def _non_empty(check: Callable[[Any], Optional[str]]) -> Callable[[Any], Optional[str]]:
    """A list parameter that must name at least one thing (BENCHMARKS=[] once ran nothing, silently)."""

    def both(v) -> Optional[str]:
        if isinstance(v, list) and not v:
            return "the list is empty: name at least one"
        return check(v)

    return both


def _url(v) -> Optional[str]:
    """An endpoint: empty (the default endpoint) or an http(s) URL with a host (never file:// or a bare path)."""
    if v in ("", None):
        return None
    u = urlparse(str(v))
    if u.scheme not in ("http", "https") or not u.hostname:
        return "need an http:// or https:// URL with a host (or empty for the default endpoint)"
    return None


def _other_models(v) -> Optional[str]:
    """OTHER_MODELS (notebook 07): a list of {table, paper_model, model, base_url} with a table the paper printed."""

    keys = {"table", "paper_model", "model", "base_url"}
    for e in v:
        if not isinstance(e, dict) or set(e) != keys:
            return f"each entry needs exactly the keys {sorted(keys)}, got {e!r}"
        if e["table"] not in PAPER_TABLES:
            return f"unknown table {e['table']!r}{hint(str(e['table']), PAPER_TABLES)}; tables: {sorted(PAPER_TABLES)}"
        if _url(e["base_url"]):
            return f"base_url {e['base_url']!r}: {_url(e['base_url'])}"
    return None


def _rules() -> dict[str, Callable[[Any], Optional[str]]]:
    """Range checks of the parameters whose meaning is known here (types come from the notebooks' defaults)."""

    return {
        "BACKEND": _choices(BACKENDS),
        "SOURCE": _choices(SOURCES),
        "BENCHMARKS": _non_empty(_choices(SYNTHETIC_K)),
        "METHODS": _non_empty(_choices(METHODS)),
        "CALLS": _choices(("two", "single")),
        "ETA": _at_least(0),
        # Upper bounds (issue 23: N_MAX=1e12 and WORKERS=1e6 were accepted): far above any benchmark or machine.
        "N_ITEMS": _between(1, MAX_ITEMS),
        "N_MAX": _between(1, MAX_ITEMS),
        "WORKERS": _between(1, MAX_WORKERS),
        "SEED": _at_least(0),
        "ROUNDS": _non_empty(_between(1, MAX_ROUNDS)),
        "N_VALUES": _non_empty(_between(1, MAX_AGENTS)),
        "N_TABLE": _between(1, MAX_AGENTS),
        "T_PHASE": _between(1, MAX_ROUNDS),
        "FULL_N_MAX": _between(1, MAX_ITEMS),
        "BASE_URL": _url,
        "SECOND_BASE_URL": _url,
        "ARGUE_MAX_TOKENS": _at_least(1),
        "OTHER_MODELS": _other_models,
        # notebook 09's map axes (SimParams fields: probabilities in [0, 1], a Beta concentration > 0)
        "LINKS": _non_empty(_between(0, 1)),
        "INSIGHTS": _non_empty(_between(0, 1)),
        "CROWD_CALIBRATIONS": _non_empty(_between(0, 1)),
        "TRAP_CONCENTRATIONS": _non_empty(_between(1e-3, 1e6)),
    }


def _type_error(key: str, value: Any, default: str) -> Optional[str]:
    """Why `value` cannot replace a parameter whose default is the Python literal `default`, or None."""
    try:
        ref = ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return None  # a default that is an expression: nothing to compare with
    if value is None:
        return None if key in NULLABLE or ref is None else "null is not allowed here"

    def ok(v, r) -> bool:
        if isinstance(r, bool) or isinstance(v, bool):
            return isinstance(v, bool) and isinstance(r, bool)
        if isinstance(r, float):
            return isinstance(v, (int, float))
        if isinstance(r, list):
            return isinstance(v, list) and all(ok(x, r[0]) for x in v) if r else isinstance(v, list)
        return isinstance(v, type(r))

    if ok(value, ref):
        return None
    return f"need a value like the notebook's default {default} ({type(ref).__name__})"


def _check_value(where: str, key: str, value: Any, default: str) -> None:
    why = _type_error(key, value, default)
    if why is None and key in _rules():
        why = _rules()[key](value)
    if why:
        raise SystemExit(f"{where}: {key} = {value!r} is not allowed: {why}")


def notebooks() -> dict[str, Path]:
    return {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}


def hint(word: str, choices) -> str:
    m = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


def load_profile(name_or_path: str, overrides: Optional[dict] = None) -> dict:
    path = Path(name_or_path)
    if not path.suffix:
        path = ROOT / "profiles" / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml"))
        raise SystemExit(
            f"profile {name_or_path!r}{hint(str(name_or_path), known)} not found; available profiles: {known}"
        )
    try:
        prof = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SystemExit(f"{path.name} is not valid YAML: {e}") from None
    if not isinstance(prof, dict) or not prof:
        raise SystemExit(
            f"{path.name} is empty or not a mapping: a profile needs at least `profile:` and `common:` "
            f"(see profiles/default.yaml)"
        )
    overrides = dict(overrides or {})
    for key in [*RUN_SETTINGS, "jobs"]:  # --set MAX_USD=... / CALLS_VIA=...: a run setting, not a notebook parameter
        for spelled in (key, key.upper()):
            if spelled in overrides:
                prof[key] = overrides.pop(spelled)
    if overrides:  # --set wins over the profile everywhere: common and any notebook's own value of that key
        prof["common"] = {**(prof.get("common") or {}), **overrides}
        for params in (prof.get("notebooks") or {}).values():
            for key in overrides:
                (params or {}).pop(key, None)
    bad = sorted(set(prof) - PROFILE_KEYS)
    if bad:
        named = ", ".join(f"{b!r}{hint(b, PROFILE_KEYS)}" for b in bad)
        raise SystemExit(f"{path.name}: unknown key(s) {named}; allowed: {sorted(PROFILE_KEYS)}")
    _check_run_settings(path.name, prof)
    nbs = notebooks()

    declared = {nb: pm.inspect_notebook(str(p)) for nb, p in nbs.items()}
    for key in prof.get("common") or {}:
        if not any(key in d for d in declared.values()):
            every = set().union(*declared.values())
            raise SystemExit(
                f"{path.name}: common parameter {key!r}{hint(key, every)} is not a parameter of any "
                f"notebook; notebook parameters are {sorted(every)}"
            )
    for nb, params in (prof.get("notebooks") or {}).items():
        if nb not in nbs:
            raise SystemExit(f"{path.name}: unknown notebook {nb!r}{hint(nb, nbs)}; notebooks: {sorted(nbs)}")
        for key in params or {}:
            if key not in declared[nb]:
                raise SystemExit(
                    f"{path.name}: notebook {nb} has no parameter {key!r}{hint(key, declared[nb])}; "
                    f"its parameters are {sorted(declared[nb])}"
                )
    for nb in nbs:  # every value a notebook will receive, against that notebook's default
        for key, value in params_for(prof, nb, declared[nb]).items():
            if key in declared[nb]:
                _check_value(f"{path.name} ({nb})", key, value, declared[nb][key]["default"])
    return prof


def _check_run_settings(where: str, prof: dict) -> None:

    if "max_usd" in prof:
        v = prof["max_usd"]
        try:
            if isinstance(v, bool):
                raise ValueError
            x = parse_max_usd(v)
            if x is not None and not math.isfinite(x):  # .inf is "no cap" in disguise: say none explicitly
                raise ValueError
        except (TypeError, ValueError):
            raise SystemExit(
                f"{where}: max_usd = {v!r} is not allowed: need a finite number of dollars >= 0, or none (null) "
                "for no cap"
            ) from None
    try:
        parse_terms(prof.get("models"))
    except ValueError as e:
        raise SystemExit(f"{where}: {e}") from None
    if "calls_via" in prof and prof["calls_via"] not in CALLS_VIA:
        v = prof["calls_via"]
        raise SystemExit(
            f"{where}: calls_via = {v!r} is not allowed{hint(str(v), CALLS_VIA)}; allowed: {list(CALLS_VIA)}"
        )
    v = prof.get("jobs", 1)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_JOBS:
        raise SystemExit(
            f"{where}: jobs = {v!r} is not allowed: need a whole number of notebooks at once, 1 to {MAX_JOBS}"
        )


def run_env(prof: dict) -> dict:
    """The environment variables the kernels get for the profile's run settings (the caller's own environment
    wins: ACEMAD_MAX_USD=5 make reproduce ... caps at $5 whatever the profile says)."""
    env = {}
    for key, var in RUN_SETTINGS.items():
        if os.environ.get(var) not in (None, ""):
            env[var] = os.environ[var]
        elif prof.get(key) is not None:
            env[var] = json.dumps(prof[key], sort_keys=True) if key == "models" else str(prof[key])
    return env


def params_for(prof: dict, name: str, declared) -> dict:
    """The papermill parameters notebook `name` gets from a profile: common ones it declares, then its own."""
    params = {k: v for k, v in (prof.get("common") or {}).items() if k in declared}
    params.update((prof.get("notebooks") or {}).get(name) or {})
    return params


def declared(nb_path) -> dict:
    """The parameters a notebook declares (its `parameters` cell), as values."""
    out = {}
    for k, v in pm.inspect_notebook(str(nb_path)).items():
        try:
            out[k] = ast.literal_eval(v["default"])
        except (ValueError, SyntaxError):
            pass
    return out


def notebook_params(
    profile: str, overrides: Optional[dict] = None, only: Optional[Sequence[str]] = None
) -> tuple[str, dict]:
    """(profile name, {notebook: every parameter it will get}) as reproduce passes them (checked the same way)."""
    prof = load_profile(profile, overrides)
    out = {}
    for nb, path in notebooks().items():
        if only and nb not in only:
            continue
        defaults = declared(path)
        out[nb] = {**defaults, **params_for(prof, nb, {k: None for k in defaults})}
    return prof.get("profile", profile), out


def notebook_runs(nb: str, profile: str = "paper", overrides: Optional[dict] = None) -> list[registry.Run]:
    """The runs notebook `nb` makes under a profile (its parameters as reproduce passes them)."""
    _, params = notebook_params(profile, overrides, only=[nb])
    return registry.runs(nb, params[nb])


def describe(profile: str = "paper", overrides: Optional[dict] = None) -> str:
    """Every run of every notebook under a profile: name, items, model, cap and config labels."""
    name, params = notebook_params(profile, overrides)
    lines = [f"runs of profile {name!r} (acemad_utils.experiments.profiles; 00_theory: synthetic simulations only)"]
    for nb, P in params.items():
        for r in registry.runs(nb, P):
            benches = (
                ["demo"] if P.get("SOURCE") == "demo" else list(r.benchmarks or ())
            )  # Setup: the demo set stands in
            where = ("challenging subsets" if r.on == "subset" else "input items") + " of " + ", ".join(benches)
            where += f", first {r.cap}" if r.cap else ""
            lines.append(
                f"  {nb:<24} {r.name:<40} {len(r.configs):>2} configs on {where}; "
                f"model {r.model or P.get('MODEL') or '(the profile backend default)'}"
            )
            lines += [f"      {g}: " + ", ".join(c.label for c in cs) for g, cs in r.groups.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="What every notebook runs under a profile (no run is made).")
    ap.add_argument("--profile", default="paper")
    print(describe(ap.parse_args().profile))
