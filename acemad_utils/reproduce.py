"""Regenerate every table and figure: run the numbered notebooks headlessly with papermill.

    python -m acemad_utils.reproduce                     # profile "default" (synthetic, minutes)
    python -m acemad_utils.reproduce --profile local     # the real local model (later issue)
    python -m acemad_utils.reproduce --only 00_theory
    python -m acemad_utils.reproduce --profile paper --set SECOND_BASE_URL=http://127.0.0.1:8001/v1

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
profile), and `--set MAX_USD=20` / `--set CALLS_VIA=batch` set them for one run. Before the first notebook
of a profile whose backend is `openai` (paid), the cost estimate of acemad_utils.cost is printed (no call
is made for it), with the MAX_USD in force.

Keys and values are checked before anything runs: an unknown top-level key, an unknown notebook, a
parameter that the notebook's `parameters` cell does not define, a value of the wrong type (the type of
the notebook's default) or out of range (PARAM_RULES) stops with a message naming it. `--set KEY=VALUE`
(YAML value) overrides a common parameter for this run only, e.g. an endpoint's URL that only this machine
knows.

Executed notebooks go to outputs/notebooks/ (git-ignored). On success one line per notebook is printed: its
time and the summary it prints last. A notebook that fails prints one line with the exception's type and
message (keys redacted) and the path of the executed notebook holding the full traceback; the other
notebooks still run, and the exit status is 1.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from .paths import ROOT, outputs

PROFILE_KEYS = {"profile", "description", "common", "notebooks", "max_usd", "calls_via"}
#: Run settings (top-level profile keys, or --set NAME=...) -> the environment variable a kernel reads.
RUN_SETTINGS = {"max_usd": "ACEMAD_MAX_USD", "calls_via": "ACEMAD_CALLS_VIA"}
CALLS_VIA = ("sync", "batch", "files")
# Parameters that may be null although their notebook default is a number ("no limit": every item).
NULLABLE = {"N_ITEMS", "N_MAX", "FULL_N_MAX"}


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
    from .experiments import PAPER_TABLES

    keys = {"table", "paper_model", "model", "base_url"}
    for e in v:
        if not isinstance(e, dict) or set(e) != keys:
            return f"each entry needs exactly the keys {sorted(keys)}, got {e!r}"
        if e["table"] not in PAPER_TABLES:
            return f"unknown table {e['table']!r}{_hint(str(e['table']), PAPER_TABLES)}; tables: {sorted(PAPER_TABLES)}"
    return None


def _rules() -> dict[str, Callable[[Any], Optional[str]]]:
    """Range checks of the parameters whose meaning is known here (types come from the notebooks' defaults)."""
    from .config import METHODS
    from .experiments import BACKENDS, SOURCES, SYNTHETIC_K

    return {"BACKEND": _choices(BACKENDS), "SOURCE": _choices(SOURCES), "BENCHMARKS": _choices(SYNTHETIC_K),
            "METHODS": _choices(METHODS), "CALLS": _choices(("two", "single")), "ETA": _at_least(0),
            "N_ITEMS": _at_least(1), "N_MAX": _at_least(1), "WORKERS": _at_least(1), "SEED": _at_least(0),
            "ROUNDS": _at_least(1), "N_VALUES": _at_least(1), "N_TABLE": _at_least(1), "T_PHASE": _at_least(1),
            "FULL_N_MAX": _at_least(1), "OTHER_MODELS": _other_models}


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
        raise SystemExit(f"profile {name_or_path!r}{_hint(str(name_or_path), known)} not found; available profiles: {known}")
    try:
        prof = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SystemExit(f"{path.name} is not valid YAML: {e}")
    if not isinstance(prof, dict) or not prof:
        raise SystemExit(f"{path.name} is empty or not a mapping: a profile needs at least `profile:` and `common:` "
                         f"(see profiles/default.yaml)")
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
            raise SystemExit(f"{path.name}: common parameter {key!r}{_hint(key, every)} is not a parameter of any "
                             f"notebook; notebook parameters are {sorted(every)}")
    for nb, params in (prof.get("notebooks") or {}).items():
        if nb not in nbs:
            raise SystemExit(f"{path.name}: unknown notebook {nb!r}{_hint(nb, nbs)}; notebooks: {sorted(nbs)}")
        for key in params or {}:
            if key not in declared[nb]:
                raise SystemExit(f"{path.name}: notebook {nb} has no parameter {key!r}{_hint(key, declared[nb])}; "
                                 f"its parameters are {sorted(declared[nb])}")
    for nb in nbs:  # every value a notebook will receive, against that notebook's default
        for key, value in _params(prof, nb, declared[nb]).items():
            if key in declared[nb]:
                _check_value(f"{path.name} ({nb})", key, value, declared[nb][key]["default"])
    return prof


def _check_run_settings(where: str, prof: dict) -> None:
    from .budget import parse_max_usd

    if "max_usd" in prof:
        v = prof["max_usd"]
        try:
            if isinstance(v, bool):
                raise ValueError
            parse_max_usd(v)
        except (TypeError, ValueError):
            raise SystemExit(f"{where}: max_usd = {v!r} is not allowed: need a number of dollars >= 0, or null for no cap")
    if "calls_via" in prof and prof["calls_via"] not in CALLS_VIA:
        v = prof["calls_via"]
        raise SystemExit(f"{where}: calls_via = {v!r} is not allowed{_hint(str(v), CALLS_VIA)}; allowed: {list(CALLS_VIA)}")


def run_env(prof: dict) -> dict:
    """The environment variables the kernels get for the profile's run settings (the caller's own environment
    wins: ACEMAD_MAX_USD=5 make reproduce ... caps at $5 whatever the profile says)."""
    import os

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


def run(profile: str = "default", only: list[str] | None = None, overrides: Optional[dict] = None) -> int:
    prof = load_profile(profile, overrides)
    name_of_profile = prof.get("profile", profile)
    nbs = notebooks()
    selected = only or list(nbs)
    for name in selected:
        if name not in nbs:
            raise SystemExit(f"unknown notebook {name!r}{_hint(name, nbs)}; notebooks: {sorted(nbs)}")
    # One folder per profile: `make reproduce` then `make reproduce PROFILE=local` keeps both executed copies.
    out_dir = outputs("notebooks", name_of_profile)
    import os

    env = run_env(prof)
    # MAX_USD counts what the whole run paid since now, across the notebooks' kernels (budget.Budget.from_env).
    env["ACEMAD_BUDGET_SINCE"] = repr(time.time())
    _print_estimate(prof, profile, overrides, selected, env)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # papermill's kernels inherit this process's environment
    try:
        return _run_notebooks(prof, name_of_profile, nbs, selected, out_dir)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _print_estimate(prof: dict, profile: str, overrides: Optional[dict], selected: list, env: dict) -> None:
    """The cost estimate, before any money is spent, when a selected notebook runs on a paid (openai) backend."""
    common, own = prof.get("common") or {}, prof.get("notebooks") or {}
    if not any(((own.get(nb) or {}).get("BACKEND", common.get("BACKEND"))) == "openai" for nb in selected):
        return
    from .budget import parse_max_usd
    from .cost import estimate_profile, format_estimate

    try:
        est = estimate_profile(profile, overrides, selected)
        text = format_estimate(est, parse_max_usd(env.get("ACEMAD_MAX_USD")))
    except Exception as e:  # the estimate must never stop a run; say why it is missing
        text = f"cost estimate unavailable ({type(e).__name__}: {e})"
    if env.get("ACEMAD_MAX_USD") in (None, ""):
        text += "\n  no MAX_USD set: nothing caps this run's spend (profile key max_usd:, or ACEMAD_MAX_USD)"
    print(text, flush=True)


def _run_notebooks(prof: dict, name_of_profile: str, nbs: dict, selected: list, out_dir: Path) -> int:
    import papermill as pm

    failed = 0
    for i, name in enumerate(selected):
        declared = pm.inspect_notebook(str(nbs[name]))
        params = _params(prof, name, declared)
        if "PROFILE" in declared:
            params.setdefault("PROFILE", name_of_profile)
        t0 = time.time()
        out = out_dir / f"{name}.ipynb"
        try:
            nb = pm.execute_notebook(str(nbs[name]), str(out), parameters=params, cwd=str(nbs[name].parent),
                                     kernel_name="python3", progress_bar=False, log_output=False,
                                     # The kernel's own log (e.g. ipykernel's warning that its loopback TCP
                                     # sockets are unencrypted) would print under every notebook; errors still show.
                                     extra_arguments=["--IPKernelApp.log_level=ERROR"])
        except KeyboardInterrupt:  # Ctrl-C here also reaches the kernel, whose run stops between records
            print(f"[{name_of_profile}] {name} interrupted after {time.time() - t0:.1f}s; the later notebooks did not "
                  f"run; rerun the same command to resume (saved records and cached calls are kept)", flush=True)
            return 130
        except pm.PapermillExecutionError as e:
            if e.ename in ("RunInterrupted", "KeyboardInterrupt"):  # the kernel saw the Ctrl-C first
                print(f"[{name_of_profile}] {name} {_one_line(e.ename, e.evalue)}; the later notebooks did not run",
                      flush=True)
                return 130
            failed += 1
            if e.ename in ("BudgetStop", "BudgetExceeded", "BatchExported"):  # every later notebook would stop too
                rest = selected[i + 1:]
                why = "the batch export" if e.ename == "BatchExported" else "MAX_USD"
                print(f"[{name_of_profile}] {name} stopped by {why} after {time.time() - t0:.1f}s: "
                      f"{_one_line(e.ename, e.evalue)}" + (f"\n    not started: {', '.join(rest)}" if rest else ""),
                      flush=True)
                return 1
            print(f"[{name_of_profile}] {name} FAILED after {time.time() - t0:.1f}s: {_one_line(e.ename, e.evalue)}\n"
                  f"    full traceback: {_rel(out)} (cell {e.exec_count})", flush=True)
            continue
        print(f"[{name_of_profile}] {name} {time.time() - t0:6.1f}s  {_last_summary(nb)}", flush=True)
    if failed:
        print(f"[{name_of_profile}] {failed} of {len(selected)} notebook(s) failed", flush=True)
    return 1 if failed else 0


def _one_line(ename: str, evalue: str, limit: int = 600) -> str:
    from .llm import redact  # an endpoint's error text can echo a key

    if ename in ("BudgetStop", "BudgetExceeded", "BatchExported"):
        limit = 1200  # the message says how to continue: keep it whole
    text = " ".join(str(evalue).split())
    return redact(f"{ename}: {text[:limit]}{' ...' if len(text) > limit else ''}")


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _last_summary(nb) -> str:
    """The notebook's final 'SUMMARY: ...' line, if it printed one."""
    for cell in reversed(nb.cells):
        for o in cell.get("outputs", []):
            for line in str(o.get("text", "")).splitlines():
                if line.startswith("SUMMARY:"):
                    return line[len("SUMMARY:"):].strip()
    return "(no summary line)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="default", help="profile name in profiles/ or a path to a YAML file")
    ap.add_argument("--only", nargs="*", help="notebook names (e.g. 00_theory)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a common parameter for this run (VALUE is YAML), e.g. BASE_URL=http://127.0.0.1:8000/v1")
    args = ap.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return run(args.profile, args.only, overrides)


if __name__ == "__main__":
    sys.exit(main())
