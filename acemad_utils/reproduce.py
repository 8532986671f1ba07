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

PROFILE_KEYS = {"profile", "description", "common", "notebooks"}
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
    if overrides:  # --set wins over the profile everywhere: common and any notebook's own value of that key
        prof["common"] = {**(prof.get("common") or {}), **overrides}
        for params in (prof.get("notebooks") or {}).values():
            for key in overrides:
                (params or {}).pop(key, None)
    bad = sorted(set(prof) - PROFILE_KEYS)
    if bad:
        named = ", ".join(f"{b!r}{_hint(b, PROFILE_KEYS)}" for b in bad)
        raise SystemExit(f"{path.name}: unknown key(s) {named}; allowed: {sorted(PROFILE_KEYS)}")
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


def _params(prof: dict, name: str, declared) -> dict:
    """The papermill parameters notebook `name` gets from a profile: common ones it declares, then its own."""
    params = {k: v for k, v in (prof.get("common") or {}).items() if k in declared}
    params.update((prof.get("notebooks") or {}).get(name) or {})
    return params


def run(profile: str = "default", only: list[str] | None = None, overrides: Optional[dict] = None) -> int:
    import papermill as pm

    prof = load_profile(profile, overrides)
    name_of_profile = prof.get("profile", profile)
    nbs = notebooks()
    selected = only or list(nbs)
    for name in selected:
        if name not in nbs:
            raise SystemExit(f"unknown notebook {name!r}{_hint(name, nbs)}; notebooks: {sorted(nbs)}")
    # One folder per profile: `make reproduce` then `make reproduce PROFILE=local` keeps both executed copies.
    out_dir = outputs("notebooks", name_of_profile)
    failed = 0
    for name in selected:
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
            print(f"[{name_of_profile}] {name} FAILED after {time.time() - t0:.1f}s: {_one_line(e.ename, e.evalue)}\n"
                  f"    full traceback: {_rel(out)} (cell {e.exec_count})", flush=True)
            continue
        print(f"[{name_of_profile}] {name} {time.time() - t0:6.1f}s  {_last_summary(nb)}", flush=True)
    if failed:
        print(f"[{name_of_profile}] {failed} of {len(selected)} notebook(s) failed", flush=True)
    return 1 if failed else 0


def _one_line(ename: str, evalue: str) -> str:
    from .llm import redact  # an endpoint's error text can echo a key

    text = " ".join(str(evalue).split())
    return redact(f"{ename}: {text[:600]}{' ...' if len(text) > 600 else ''}")


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
