"""Profiles: which parameters each notebook gets, loaded and checked before anything runs.

    from acemad_utils.experiments.profiles import load_profile, run_env
    prof = load_profile("default", overrides={"SEED": 1})   # SystemExit naming the bad key or value
    run_env(prof)                                            # {"ACEMAD_MAX_USD": "50", ...} for the kernels

A profile is one small YAML file in profiles/ holding papermill parameters per notebook:

    profile: default
    description: ...
    common: {BACKEND: sim, SEED: 0}            # given to every notebook that declares the parameter
    notebooks:
      00_theory: {N_ITEMS: 400}
    max_usd: 50          # optional: stop sending paid calls before the run's spend passes $50 (budget.py)
    calls_via: sync      # optional: sync (default), batch (the OpenAI Batch API) or files (request JSONL for
                         # another Batch-API runner, e.g. vLLM run-batch), see batch.py

`max_usd` and `calls_via` are run settings, not notebook parameters: they reach every notebook's kernel as
the environment variables ACEMAD_MAX_USD and ACEMAD_CALLS_VIA (which, when already set, win over the
profile), and `--set MAX_USD=20` / `--set CALLS_VIA=batch` set them for one run.

Keys and values are checked before anything runs: an unknown top-level key, an unknown notebook, a
parameter that the notebook's `parameters` cell does not define, a value of the wrong type (the type of
the notebook's default) or out of range (PARAM_RULES) stops with a message naming it. `--set KEY=VALUE`
(YAML value) overrides a common parameter for this run only, e.g. an endpoint's URL that only this machine
knows.
"""

from __future__ import annotations

import ast
import difflib
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import yaml

from acemad_utils.data.paths import ROOT

PROFILE_KEYS = {"profile", "description", "common", "notebooks", "max_usd", "calls_via"}
#: Run settings (top-level profile keys, or --set NAME=...) -> the environment variable a kernel reads.
RUN_SETTINGS = {"max_usd": "ACEMAD_MAX_USD", "calls_via": "ACEMAD_CALLS_VIA"}
CALLS_VIA = ("sync", "batch", "files")
# Parameters that may be null although their notebook default is a number ("no limit": every item).
NULLABLE = {"N_ITEMS", "N_MAX", "FULL_N_MAX", "ARGUE_MAX_TOKENS"}


def _choices(names) -> Callable[[Any], Optional[str]]:
    allowed = list(names)

    def check(v) -> Optional[str]:
        vals = v if isinstance(v, list) else [v]
        bad = [x for x in vals if x not in allowed]
        return f"unknown name(s) {bad}{_hint(str(bad[0]), allowed)}; allowed: {allowed}" if bad else None

    return check


def _at_least(lo: float) -> Callable[[Any], Optional[str]]:
    def check(v) -> Optional[str]:
        vals = v if isinstance(v, list) else [v]
        bad = [x for x in vals if x is not None and not (math.isfinite(x) and x >= lo)]
        return f"need values >= {lo:g}, got {bad}" if bad else None

    return check


def _other_models(v) -> Optional[str]:
    """OTHER_MODELS (notebook 07): a list of {table, paper_model, model, base_url} with a table the paper printed."""
    from acemad_utils.experiments.registry import PAPER_TABLES

    keys = {"table", "paper_model", "model", "base_url"}
    for e in v:
        if not isinstance(e, dict) or set(e) != keys:
            return f"each entry needs exactly the keys {sorted(keys)}, got {e!r}"
        if e["table"] not in PAPER_TABLES:
            return f"unknown table {e['table']!r}{_hint(str(e['table']), PAPER_TABLES)}; tables: {sorted(PAPER_TABLES)}"
    return None


def _rules() -> dict[str, Callable[[Any], Optional[str]]]:
    """Range checks of the parameters whose meaning is known here (types come from the notebooks' defaults)."""
    from acemad_utils.experiments.setup import BACKENDS, SOURCES, SYNTHETIC_K
    from acemad_utils.protocol.config import METHODS

    return {
        "BACKEND": _choices(BACKENDS),
        "SOURCE": _choices(SOURCES),
        "BENCHMARKS": _choices(SYNTHETIC_K),
        "METHODS": _choices(METHODS),
        "CALLS": _choices(("two", "single")),
        "ETA": _at_least(0),
        "N_ITEMS": _at_least(1),
        "N_MAX": _at_least(1),
        "WORKERS": _at_least(1),
        "SEED": _at_least(0),
        "ROUNDS": _at_least(1),
        "N_VALUES": _at_least(1),
        "N_TABLE": _at_least(1),
        "T_PHASE": _at_least(1),
        "FULL_N_MAX": _at_least(1),
        "ARGUE_MAX_TOKENS": _at_least(1),
        "OTHER_MODELS": _other_models,
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


def _hint(word: str, choices) -> str:
    m = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


def load_profile(name_or_path: str, overrides: Optional[dict] = None) -> dict:
    path = Path(name_or_path)
    if not path.suffix:
        path = ROOT / "profiles" / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml"))
        raise SystemExit(
            f"profile {name_or_path!r}{_hint(str(name_or_path), known)} not found; available profiles: {known}"
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
    for key in RUN_SETTINGS:  # --set MAX_USD=... / CALLS_VIA=...: a run setting, not a notebook parameter
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
        named = ", ".join(f"{b!r}{_hint(b, PROFILE_KEYS)}" for b in bad)
        raise SystemExit(f"{path.name}: unknown key(s) {named}; allowed: {sorted(PROFILE_KEYS)}")
    _check_run_settings(path.name, prof)
    nbs = notebooks()
    import papermill as pm

    declared = {nb: pm.inspect_notebook(str(p)) for nb, p in nbs.items()}
    for key in prof.get("common") or {}:
        if not any(key in d for d in declared.values()):
            every = set().union(*declared.values())
            raise SystemExit(
                f"{path.name}: common parameter {key!r}{_hint(key, every)} is not a parameter of any "
                f"notebook; notebook parameters are {sorted(every)}"
            )
    for nb, params in (prof.get("notebooks") or {}).items():
        if nb not in nbs:
            raise SystemExit(f"{path.name}: unknown notebook {nb!r}{_hint(nb, nbs)}; notebooks: {sorted(nbs)}")
        for key in params or {}:
            if key not in declared[nb]:
                raise SystemExit(
                    f"{path.name}: notebook {nb} has no parameter {key!r}{_hint(key, declared[nb])}; "
                    f"its parameters are {sorted(declared[nb])}"
                )
    for nb in nbs:  # every value a notebook will receive, against that notebook's default
        for key, value in _params(prof, nb, declared[nb]).items():
            if key in declared[nb]:
                _check_value(f"{path.name} ({nb})", key, value, declared[nb][key]["default"])
    return prof


def _check_run_settings(where: str, prof: dict) -> None:
    from acemad_utils.agents.budget import parse_max_usd

    if "max_usd" in prof:
        v = prof["max_usd"]
        try:
            if isinstance(v, bool):
                raise ValueError
            parse_max_usd(v)
        except (TypeError, ValueError):
            raise SystemExit(
                f"{where}: max_usd = {v!r} is not allowed: need a number of dollars >= 0, or null for no cap"
            ) from None
    if "calls_via" in prof and prof["calls_via"] not in CALLS_VIA:
        v = prof["calls_via"]
        raise SystemExit(
            f"{where}: calls_via = {v!r} is not allowed{_hint(str(v), CALLS_VIA)}; allowed: {list(CALLS_VIA)}"
        )


def run_env(prof: dict) -> dict:
    """The environment variables the kernels get for the profile's run settings (the caller's own environment
    wins: ACEMAD_MAX_USD=5 make reproduce ... caps at $5 whatever the profile says)."""
    env = {}
    for key, var in RUN_SETTINGS.items():
        if os.environ.get(var) not in (None, ""):
            env[var] = os.environ[var]
        elif prof.get(key) is not None:
            env[var] = str(prof[key])
    return env


def _params(prof: dict, name: str, declared) -> dict:
    """The papermill parameters notebook `name` gets from a profile: common ones it declares, then its own."""
    params = {k: v for k, v in (prof.get("common") or {}).items() if k in declared}
    params.update((prof.get("notebooks") or {}).get(name) or {})
    return params
