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
parameter that the notebook does not declare, a value of the wrong type or out of range (every parameter's type
and range: experiments/params.py), and any YAML value that is not plain data (!!binary, !!set, a date, a
!!python/... tag: PlainLoader) stops with one line naming the file, the notebook and what is allowed. `--set KEY=VALUE`
(YAML value) overrides a common parameter for this run only, e.g. an endpoint's URL that only this machine
knows.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from acemad_utils.agents.budget import parse_max_usd
from acemad_utils.agents.prices import ENV_MODELS, parse_terms
from acemad_utils.data.paths import ROOT
from acemad_utils.data.settings import ENV_VARS
from acemad_utils.experiments import params, registry
from acemad_utils.experiments.subsets import SET_MARK

PROFILE_KEYS = {"profile", "description", "common", "notebooks", "max_usd", "calls_via", "models", "jobs"}
#: Run settings (top-level profile keys, or --set NAME=...) -> the environment variable a kernel reads.
RUN_SETTINGS = {"max_usd": "ACEMAD_MAX_USD", "calls_via": "ACEMAD_CALLS_VIA", "models": ENV_MODELS}
CALLS_VIA = ("sync", "batch", "files")
MAX_JOBS = 8
#: What a notebook reads that other notebooks of the same `make reproduce` write: with `jobs` > 1 it starts only
#: after they ended (ok or not). "*" = every other notebook of the run. 02-07 read 01's challenging subsets;
#: 08 reads every run. 00 reads nothing of the others. Each notebook writes only its own runs, tables and figures.
READS = {
    **{nb: ("01_subset_construction",) for nb in params.NOTEBOOKS if nb[:2] in params.SETUP[1:]},
    "08_claims": ("*",),
}
#: With `jobs` > 1, these start before the other notebooks that may start too (then the order given). Notebook 09
#: takes as long as 02-07 together on the default profile: started after them (the order given), it ran alone at
#: the end while the other core idled; started once 01 ends, it runs beside them.
LONGEST = ("09_assumption_map",)


class PlainLoader(yaml.SafeLoader):
    """YAML's plain data only: a tag that makes anything else (!!binary bytes, !!set, !!omap, !!pairs, a date or
    timestamp, any !!python/... or local tag) is a ConstructorError, shown as one line (load_yaml)."""


def _refuse(loader: yaml.SafeLoader, node: yaml.Node) -> None:
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    what = "a date or timestamp (quote it to pass text)" if tag == "!!timestamp" else f"the tag {tag}"
    raise yaml.constructor.ConstructorError(
        None, None, f"{what} is not plain data (text, number, true/false, null, list, map)", node.start_mark
    )


for _tag in ("binary", "set", "omap", "pairs", "timestamp"):
    PlainLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)
PlainLoader.add_constructor(None, _refuse)  # every tag SafeLoader does not know either


def load_yaml(text: str, where: str) -> Any:
    """Plain data from YAML text (PlainLoader), or SystemExit with one line naming `where` and the place."""
    try:
        return yaml.load(text, Loader=PlainLoader)  # noqa: S506 (PlainLoader is SafeLoader with fewer tags)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        place = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        why = " ".join(str(getattr(e, "problem", None) or e).split())
        if isinstance(e, yaml.constructor.ConstructorError):
            raise SystemExit(f"{where}: refused{place}: {why}") from None
        raise SystemExit(f"{where} is not valid YAML{place}: {why}") from None


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` options (reproduce, estimate, pilot) as {KEY: plain data}; an empty VALUE is ""."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = load_yaml(value, f"--set {key.strip()}") if value.strip() else ""
    return out


def notebooks() -> dict[str, Path]:
    return {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}


def hint(word: str, choices) -> str:
    m = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


def load_profile(name_or_path: str, overrides: Optional[dict] = None) -> dict:
    """The profile, every key and value checked (SystemExit with one line naming the file, notebook and rule).
    `overrides` (--set NAME=VALUE) win over the profile: a run setting, or a parameter of every notebook."""
    path = Path(name_or_path)
    if not path.suffix:
        path = ROOT / "profiles" / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml"))
        raise SystemExit(
            f"profile {name_or_path!r}{hint(str(name_or_path), known)} not found; available profiles: {known}"
        )
    prof = load_yaml(path.read_text(), path.name)
    if not isinstance(prof, dict) or not prof:
        raise SystemExit(
            f"{path.name} is empty or not a mapping: a profile needs at least `profile:` and `common:` "
            f"(see profiles/default.yaml)"
        )
    overrides = dict(overrides or {})
    for key, value in overrides.items():  # before they are merged: a bad --set value is named as --set's
        why = params.not_plain(value)
        if why:
            raise SystemExit(f"--set {key}: the value holds {why}; only text, numbers, true/false, null, lists, maps")
    for key in [*RUN_SETTINGS, "jobs"]:  # --set MAX_USD=... / CALLS_VIA=...: a run setting, not a notebook parameter
        for spelled in (key, key.upper()):
            if spelled in overrides:
                prof[key] = overrides.pop(spelled)
    _check_shape(path.name, prof)
    if overrides:  # --set wins over the profile everywhere: common and any notebook's own value of that key
        prof["common"] = {**(prof.get("common") or {}), **overrides}
        for own in (prof.get("notebooks") or {}).values():
            for key in overrides:
                (own or {}).pop(key, None)
    _check_run_settings(path.name, prof)
    _check_parameters(path.name, prof)
    return prof


def _check_shape(where: str, prof: dict) -> None:
    """Known top-level keys, plain values, `common` a map and `notebooks` a map of maps."""
    bad = sorted(str(k) for k in set(prof) - PROFILE_KEYS)
    if bad:
        named = ", ".join(f"{b!r}{hint(b, PROFILE_KEYS)}" for b in bad)
        raise SystemExit(f"{where}: unknown key(s) {named}; allowed: {sorted(PROFILE_KEYS)}")
    for key, value in prof.items():
        why = params.not_plain(value)
        if why:
            raise SystemExit(
                f"{where}: {key} holds {why}; a profile holds text, numbers, true/false, null, lists, maps"
            )
    for key in ("profile", "description"):
        if key in prof and not isinstance(prof[key], str):
            raise SystemExit(f"{where}: {key} = {prof[key]!r} is not allowed: need text")
    if not isinstance(prof.get("common") or {}, dict):
        raise SystemExit(f"{where}: common must be a map of parameters, e.g. common: {{SEED: 0}}")
    own = prof.get("notebooks") or {}
    if not isinstance(own, dict) or not all(isinstance(v or {}, dict) for v in own.values()):
        raise SystemExit(
            f"{where}: notebooks must map notebook names to maps, e.g. notebooks: {{00_theory: {{SEED: 1}}}}"
        )


def _check_parameters(where: str, prof: dict) -> None:
    """Every parameter is a notebook's (experiments/params.py), and every value a notebook gets is allowed."""
    nbs = notebooks()
    declared = {nb: params.names(nb) for nb in nbs}
    every = set().union(*declared.values())
    for key in prof.get("common") or {}:
        if key not in every:
            raise SystemExit(
                f"{where}: common parameter {key!r}{hint(key, every)} is not a parameter of any "
                f"notebook; notebook parameters are {sorted(every)} (acemad_utils/experiments/params.py)"
            )
    for nb, own in (prof.get("notebooks") or {}).items():
        if nb not in nbs:
            raise SystemExit(f"{where}: unknown notebook {nb!r}{hint(nb, nbs)}; notebooks: {sorted(nbs)}")
        for key in own or {}:
            if key not in declared[nb]:
                raise SystemExit(
                    f"{where}: notebook {nb} has no parameter {key!r}{hint(key, declared[nb])}; "
                    f"its parameters are {sorted(declared[nb])}"
                )
    for nb in nbs:  # every value a notebook will receive
        for key, value in params_for(prof, nb, declared[nb]).items():
            params.check(f"{where} ({nb})", key, value)


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


#: Notebook parameters that say where or how fast, not what: a --set of one of them keeps the profile's runs.
NOT_SHAPING = ("PROFILE", "WORKERS", "BASE_URL", "SECOND_BASE_URL")


def run_key(name_or_path: str, overrides: Optional[dict] = None, *, loaded: Optional[tuple[dict, dict]] = None) -> str:
    """The name the runs of this profile with these --set overrides go under: the profile's own name when they
    change nothing that shapes a run (the questions, the agents, the configs: any notebook parameter but
    NOT_SHAPING, or one set to the profile's value), else '<profile>.set-<what>' (e.g. default.set-SEED-1, a hash
    when the values do not make a folder name): `--set SEED=1` then makes new runs and subsets beside the
    profile's own instead of refusing to resume them (a run holds one question set and one population)."""
    prof, base = loaded or (load_profile(name_or_path, overrides), load_profile(name_or_path))  # (with, without)
    name = prof.get("profile") or Path(name_or_path).stem
    changed: dict[str, Any] = {}
    for nb in notebooks():
        defaults = params.defaults(nb)
        now, was = {**defaults, **params_for(prof, nb, defaults)}, {**defaults, **params_for(base, nb, defaults)}
        changed.update({k: v for k, v in now.items() if k not in NOT_SHAPING and was[k] != v})
    if not changed:
        return name
    words = ".".join(f"{k}-{v}" for k, v in sorted(changed.items()))
    if len(words) > 60 or not all(c.isalnum() or c in "._-" for c in words):
        words = hashlib.sha256(json.dumps(changed, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{name}{SET_MARK}{words}"


def params_for(prof: dict, name: str, declared) -> dict:
    """The papermill parameters notebook `name` gets from a profile: common ones it declares, then its own."""
    params = {k: v for k, v in (prof.get("common") or {}).items() if k in declared}
    params.update((prof.get("notebooks") or {}).get(name) or {})
    return params


def notebook_params(
    profile: str, overrides: Optional[dict] = None, only: Optional[Sequence[str]] = None
) -> tuple[str, dict]:
    """(profile name, {notebook: every parameter it will get}) as reproduce passes them (checked the same way)."""
    prof = load_profile(profile, overrides)
    out = {}
    for nb in notebooks():
        if only and nb not in only:
            continue
        defaults = params.defaults(nb)
        out[nb] = {**defaults, **params_for(prof, nb, defaults)}
    return prof.get("profile", profile), out


def notebook_runs(nb: str, profile: str = "paper", overrides: Optional[dict] = None) -> list[registry.Run]:
    """The runs notebook `nb` makes under a profile (its parameters as reproduce passes them)."""
    _, params = notebook_params(profile, overrides, only=[nb])
    return registry.runs(nb, params[nb])


@dataclass(frozen=True)
class Endpoint:
    """One model at one OpenAI-compatible URL that a profile's notebooks call (BACKEND openai).
    setting: the profile parameters that name it; skip: the --set that runs the profile without it ("" for the
    main endpoint, which every LLM notebook needs); url "" = OPENAI_BASE_URL, else OpenAI's."""

    setting: str
    model: str
    url: str
    notebooks: tuple[str, ...]
    skip: str = ""


def endpoints(params_by_nb: dict) -> list[Endpoint]:
    """Every endpoint the notebooks (with these parameters, {notebook: params}) will call, once per (model, URL):
    the main model (MODEL at BASE_URL), notebook 04's SECOND_MODEL at SECOND_BASE_URL and each OTHER_MODELS entry
    of notebook 07 whose table has a benchmark in the run. The BACKEND local server is started by the run itself
    and the synthetic population calls nothing: neither is an endpoint. SUBSET_MODEL is not called (its subsets
    are read). Used by the reproduce driver's preflight and printed by `make estimate`."""
    found: dict[tuple[str, str], Endpoint] = {}

    def add(setting: str, model: str, url: str, nb: str, skip: str = "") -> None:
        old = found.get((model, url))
        if old is None:
            found[(model, url)] = Endpoint(setting, model, url, (nb,), skip)
            return
        both = f"{old.setting}, {setting}" if setting not in old.setting else old.setting
        skip = f"{old.skip} {skip}" if old.skip and skip and skip not in old.skip else (old.skip and skip)
        found[(model, url)] = Endpoint(both, model, url, tuple(dict.fromkeys((*old.notebooks, nb))), skip)

    for nb, P in params_by_nb.items():
        if P.get("BACKEND") != "openai" or not registry.runs(nb, P):
            continue
        url = P.get("BASE_URL") or os.environ.get("OPENAI_BASE_URL") or ""
        add("MODEL / BASE_URL", P.get("MODEL") or os.environ.get("ACEMAD_MODEL") or "gpt-4o-mini", url, nb)
        if nb.startswith("04") and P.get("SECOND_MODEL"):
            add("SECOND_MODEL / SECOND_BASE_URL", P["SECOND_MODEL"], P.get("SECOND_BASE_URL") or url, nb,
                "--set SECOND_MODEL=")  # fmt: skip
        benches = list(P.get("BENCHMARKS") or registry.ALL_BENCHMARKS)
        for i, e in enumerate(P.get("OTHER_MODELS") or [] if nb.startswith("07") else []):
            if registry.other_model(e, benches).benchmarks:
                add(f"OTHER_MODELS[{i}] ({e['table']})", e["model"], e.get("base_url") or url, nb,
                    "--set OTHER_MODELS=[]")  # fmt: skip
    return list(found.values())


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
    ap.add_argument("--parameters-doc", action="store_true", help="print docs/parameters.md (from params.SCHEMA)")
    args = ap.parse_args()
    if args.parameters_doc:
        print(params.markdown(ENV_VARS), end="")
    else:
        print(describe(args.profile))
