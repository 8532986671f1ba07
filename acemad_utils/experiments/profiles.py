"""Profiles (profiles/*.yaml: parameters `common` and per `notebooks`, run settings, `jobs`), checked once up front."""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import yaml

from acemad_utils.agents.budget import parse_max_usd
from acemad_utils.agents.prices import ENV_MODELS, parse_terms
from acemad_utils.data.paths import ROOT
from acemad_utils.data.settings import ENV_VARS
from acemad_utils.experiments import params
from acemad_utils.experiments.subsets import SET_MARK

if TYPE_CHECKING:  # the registry (numpy, the population) only where runs are listed: not on an up-to-date run
    from acemad_utils.experiments import registry

PROFILE_KEYS = {"profile", "description", "common", "notebooks", "max_usd", "calls_via", "models", "jobs"}
RUN_SETTINGS = {"max_usd": "ACEMAD_MAX_USD", "calls_via": "ACEMAD_CALLS_VIA", "models": ENV_MODELS}
CALLS_VIA = ("sync", "batch", "files")
MAX_JOBS = 8
#: What a notebook reads that others write ("*": every other notebook): it starts after them, and runs when they ran.
READS = {
    **{nb: ("01_subset_construction",) for nb in params.NOTEBOOKS[2:]},  # 02-09 run on 01's subsets
    "08_claims": ("*",),
}
#: ... and what a notebook reads only on a real model: notebook 09's measured premise (table 9b) is notebook 03's run.
REAL_MODEL_READS = {"09_assumption_map": ("03_main_results",)}
#: Started first when jobs > 1: notebook 09 takes as long as 02-07 together.
LONGEST = ("09_assumption_map",)
#: Notebook parameters that say where or how fast, not what: a --set of one keeps the profile's runs.
NOT_SHAPING = ("PROFILE", "WORKERS", "BASE_URL", "SECOND_BASE_URL")


def load_yaml(text: str, where: str) -> Any:
    """Plain data only: a !!binary, !!set, date or any other tag is refused in one line, never reaching a kernel."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        place = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        why = " ".join(str(getattr(e, "problem", None) or e).split())
        if isinstance(e, yaml.constructor.ConstructorError):
            raise SystemExit(f"{where}: refused{place}: {why}") from None
        raise SystemExit(f"{where} is not valid YAML{place}: {why}") from None
    if held := params.not_plain(data):
        raise SystemExit(f"{where}: refused: it holds {held}; only text, numbers, true/false, null, lists and maps")
    return data


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        v = load_yaml(value, f"--set {key.strip()}") if value.strip() else ""
        number = isinstance(v, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", v)  # YAML 1.1: 1e-3 is text
        out[key.strip()] = float(v) if number else v
    return out


def notebooks() -> dict[str, Path]:
    return dict(params.PATHS)


def hint(word: str, choices) -> str:
    m = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


def load_profile(name_or_path: str, overrides: Optional[dict] = None) -> dict:
    """The profile, every key and value checked; `overrides` (--set NAME=VALUE) win everywhere for this run."""
    path = Path(name_or_path)
    path = ROOT / "profiles" / f"{name_or_path}.yaml" if not path.suffix else path
    if not path.exists():
        known = sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml"))
        raise SystemExit(
            f"profile {name_or_path!r}{hint(str(name_or_path), known)} not found; available profiles: {known}"
        )
    where, prof = path.name, load_yaml(path.read_text(), path.name)
    if not isinstance(prof, dict) or not prof:
        raise SystemExit(f"{where} is empty or not a mapping: a profile needs at least `profile:` and `common:` "
                         "(see profiles/default.yaml)")  # fmt: skip
    overrides = dict(overrides or {})
    for key in [*RUN_SETTINGS, "jobs"]:  # --set MAX_USD=... is a run setting, not a notebook parameter
        for spelled in (key, key.upper()):
            if spelled in overrides:
                prof[key] = overrides.pop(spelled)
    if bad := sorted(str(k) for k in set(prof) - PROFILE_KEYS):
        named = ", ".join(f"{b!r}{hint(b, PROFILE_KEYS)}" for b in bad)
        raise SystemExit(f"{where}: unknown key(s) {named}; allowed: {sorted(PROFILE_KEYS)}")
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
    if overrides:  # --set wins over common and over any notebook's own value of that key
        prof["common"] = {**(prof.get("common") or {}), **overrides}
        for mine in own.values():
            for key in overrides:
                (mine or {}).pop(key, None)
    _check_run_settings(where, prof)
    _check_parameters(where, prof)
    return prof


def _check_parameters(where: str, prof: dict) -> None:
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
                raise SystemExit(f"{where}: notebook {nb} has no parameter {key!r}{hint(key, declared[nb])}; "
                                 f"its parameters are {sorted(declared[nb])}")  # fmt: skip
    for nb in nbs:  # every value a notebook will receive
        for key, value in params_for(prof, nb).items():
            if refused := params.refusal(key, value):
                raise SystemExit(f"{where} ({nb}): {refused} (acemad_utils/experiments/params.py)")


def _check_run_settings(where: str, prof: dict) -> None:
    def fail(key: str, need: str) -> SystemExit:
        return SystemExit(f"{where}: {key} = {prof[key]!r} is not allowed{need}")

    if "max_usd" in prof:
        try:
            x = math.nan if isinstance(prof["max_usd"], bool) else parse_max_usd(prof["max_usd"])
        except (TypeError, ValueError):
            x = math.nan
        if x is not None and not math.isfinite(x):  # .inf is "no cap" in disguise: say none explicitly
            raise fail("max_usd", ": need a finite number of dollars >= 0, or none (null) for no cap")
    try:
        parse_terms(prof.get("models"))
    except ValueError as e:
        raise SystemExit(f"{where}: {e}") from None
    if "calls_via" in prof and prof["calls_via"] not in CALLS_VIA:
        raise fail("calls_via", f"{hint(str(prof['calls_via']), CALLS_VIA)}; allowed: {list(CALLS_VIA)}")
    v = prof.get("jobs", 1)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_JOBS:
        raise fail("jobs", f": need a whole number of notebooks at once, 1 to {MAX_JOBS}")


def run_env(prof: dict) -> dict:
    """The kernels' ACEMAD_* for the profile's run settings (the caller's own environment wins)."""
    env = {}
    for key, var in RUN_SETTINGS.items():
        if os.environ.get(var) not in (None, ""):
            env[var] = os.environ[var]
        elif prof.get(key) is not None:
            env[var] = json.dumps(prof[key], sort_keys=True) if key == "models" else str(prof[key])
    return env


def run_key(name_or_path: str, overrides: Optional[dict] = None, *, loaded: Optional[tuple[dict, dict]] = None) -> str:
    """Where the runs go: the profile's name, or '<profile>.set-<what>' (else a hash) when --set changes what a run
    is (a run holds one question set and one population)."""
    prof, base = loaded or (load_profile(name_or_path, overrides), load_profile(name_or_path))  # (with, without)
    changed: dict[str, Any] = {}
    for nb in notebooks():
        now, was = params_for(prof, nb, defaults=True), params_for(base, nb, defaults=True)
        changed.update({k: v for k, v in now.items() if k not in NOT_SHAPING and was[k] != v})
    changed = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in changed.items()}  # 4.0 as 4
    name = prof.get("profile") or Path(name_or_path).stem
    if not changed:
        return name
    words = ".".join(f"{k}-{v}" for k, v in sorted(changed.items()))
    if len(words) > 60 or not all(c.isalnum() or c in "._-" for c in words):
        words = hashlib.sha256(json.dumps(changed, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{name}{SET_MARK}{words}"


def reads(prof: dict, base: dict) -> dict:
    """`base` (READS), with REAL_MODEL_READS added for the notebooks this profile runs on a real model."""
    real = {nb: r for nb, r in REAL_MODEL_READS.items() if params_for(prof, nb, defaults=True)["BACKEND"] != "sim"}
    return {**base, **{nb: (*base.get(nb, ()), *r) for nb, r in real.items()}}


def params_for(prof: dict, nb: str, *, defaults: bool = False) -> dict:
    """What papermill injects into `nb` (the common parameters it declares, then its own), over defaults if asked."""
    declared = params.names(nb)
    return {
        **(params.defaults(nb) if defaults else {}),
        **{k: v for k, v in (prof.get("common") or {}).items() if k in declared},
        **((prof.get("notebooks") or {}).get(nb) or {}),
    }


def notebook_params(
    profile: str, overrides: Optional[dict] = None, only: Optional[Sequence[str]] = None
) -> tuple[str, dict]:
    prof = load_profile(profile, overrides)
    out = {nb: params_for(prof, nb, defaults=True) for nb in notebooks() if not only or nb in only}
    return prof.get("profile", profile), out


def notebook_runs(nb: str, profile: str = "paper", overrides: Optional[dict] = None) -> list[registry.Run]:
    from acemad_utils.experiments import registry

    return registry.runs(nb, notebook_params(profile, overrides, only=[nb])[1][nb])


@dataclass(frozen=True)
class Endpoint:
    """One model at one URL the notebooks call; skip: the --set that runs without it ("" for the main one)."""

    setting: str
    model: str
    url: str
    notebooks: tuple[str, ...]
    skip: str = ""


def endpoints(params_by_nb: dict) -> list[Endpoint]:
    """Every endpoint the notebooks ({notebook: params}) call on BACKEND openai, once per (model, URL)."""
    from acemad_utils.experiments import registry

    found: dict[tuple[str, str], list[tuple[str, str, str]]] = {}  # (model, url) -> [(setting, notebook, skip)]
    for nb, P in params_by_nb.items():
        if P.get("BACKEND") != "openai" or not registry.runs(nb, P):
            continue
        url = P.get("BASE_URL") or os.environ.get("OPENAI_BASE_URL") or ""
        model = P.get("MODEL") or os.environ.get("ACEMAD_MODEL") or "gpt-4o-mini"
        found.setdefault((model, url), []).append(("MODEL / BASE_URL", nb, ""))
        if nb.startswith("04") and P.get("SECOND_MODEL"):
            second = (P["SECOND_MODEL"], P.get("SECOND_BASE_URL") or url)
            found.setdefault(second, []).append(("SECOND_MODEL / SECOND_BASE_URL", nb, "--set SECOND_MODEL="))
        benches = list(P.get("BENCHMARKS") or registry.ALL_BENCHMARKS)
        for i, e in enumerate(P.get("OTHER_MODELS") or [] if nb.startswith("07") else []):
            if registry.other_model(e, benches).benchmarks:
                use = (f"OTHER_MODELS[{i}] ({e['table']})", nb, "--set OTHER_MODELS=[]")
                found.setdefault((e["model"], e.get("base_url") or url), []).append(use)
    out = []
    for (model, url), uses in found.items():
        settings, nbs, skips = (tuple(dict.fromkeys(column)) for column in zip(*uses))
        out.append(Endpoint(", ".join(settings), model, url, nbs, "" if "" in skips else " ".join(skips)))
    return out


def describe(profile: str = "paper", overrides: Optional[dict] = None) -> str:
    from acemad_utils.experiments import registry

    name, by_nb = notebook_params(profile, overrides)
    lines = [f"runs of profile {name!r} (acemad_utils.experiments.profiles; 00_theory: synthetic simulations only)"]
    for nb, P in by_nb.items():
        for r in registry.runs(nb, P):
            benches = ["demo"] if P.get("SOURCE") == "demo" else list(r.benchmarks or ())
            where = ("challenging subsets" if r.on == "subset" else "input items") + " of " + ", ".join(benches)
            where += f", first {r.cap}" if r.cap else ""
            model = r.model or P.get("MODEL") or "(the profile backend default)"
            lines.append(f"  {nb:<24} {r.name:<40} {len(r.configs):>2} configs on {where}; model {model}")
            lines += [f"      {g}: " + ", ".join(c.label for c in cs) for g, cs in r.groups.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="What every notebook runs under a profile (no run is made).")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--parameters-doc", action="store_true", help="print docs/parameters.md (from params.SCHEMA)")
    args = ap.parse_args()
    print(params.markdown(ENV_VARS), end="") if args.parameters_doc else print(describe(args.profile))
