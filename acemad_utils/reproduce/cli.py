"""Regenerate every table and figure: run the numbered notebooks headlessly with papermill.

    python -m acemad_utils.reproduce                     # profile "default" (synthetic, minutes)
    python -m acemad_utils.reproduce --profile local     # the real local model (later issue)
    python -m acemad_utils.reproduce --only 00_theory
    python -m acemad_utils.reproduce --profile paper --set SECOND_BASE_URL=http://127.0.0.1:8001/v1

Profiles (profiles/*.yaml: papermill parameters per notebook, plus the run settings max_usd and
calls_via) are loaded and checked by reproduce_profile.py before anything runs; `--set KEY=VALUE` (YAML
value) overrides a common parameter or run setting for this run only. Before the first notebook of a
profile whose backend is `openai` (paid), the cost estimate of acemad_utils.cost.estimate is printed (no call is
made for it), with the MAX_USD in force.

Executed notebooks go to outputs/notebooks/ (git-ignored). On success one line per notebook is printed: its
time and the summary it prints last. A notebook that fails prints one line with the exception's type and
message (keys redacted) and the path of the executed notebook holding the full traceback; the other
notebooks still run, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional

import yaml

from acemad_utils.data.paths import outputs
from acemad_utils.experiments.profiles import (  # noqa: F401
    CALLS_VIA,
    NULLABLE,
    PROFILE_KEYS,
    RUN_SETTINGS,
    _hint,
    _params,
    load_profile,
    notebooks,
    run_env,
)

# The kernel's own log stays out of a run's output: ipykernel warns under every notebook that its loopback TCP
# sockets are unencrypted, and jupyter_client interrupts (SIGINT) a kernel before shutting it down, which a
# kernel still busy logs as "ERROR | KeyboardInterrupt caught in kernel." (seen on a loaded machine). A cell's
# error is not a log line: papermill raises it, so failures still show.
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]


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
    # No progress bars in the kernels (data.paths.progress_bars): the executed notebook would store them as stderr
    # text or dead widgets; the terminal has this driver's one line per notebook.
    env["ACEMAD_PROGRESS"] = "0"
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
    from acemad_utils.agents.budget import parse_max_usd
    from acemad_utils.cost.estimate import estimate_profile, format_estimate

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
            nb = pm.execute_notebook(
                str(nbs[name]),
                str(out),
                parameters=params,
                cwd=str(nbs[name].parent),
                kernel_name="python3",
                progress_bar=False,
                log_output=False,
                extra_arguments=KERNEL_ARGS,
            )  # no kernel log lines (KERNEL_ARGS)
        except KeyboardInterrupt:  # Ctrl-C here also reaches the kernel, whose run stops between records
            print(
                f"[{name_of_profile}] {name} interrupted after {time.time() - t0:.1f}s; the later notebooks did not "
                f"run; rerun the same command to resume (saved records and cached calls are kept)",
                flush=True,
            )
            return 130
        except pm.PapermillExecutionError as e:
            if e.ename in ("RunInterrupted", "KeyboardInterrupt"):  # the kernel saw the Ctrl-C first
                print(
                    f"[{name_of_profile}] {name} {_one_line(e.ename, e.evalue)}; the later notebooks did not run",
                    flush=True,
                )
                return 130
            failed += 1
            if e.ename in ("BudgetStop", "BudgetExceeded", "BatchExported"):  # every later notebook would stop too
                rest = selected[i + 1 :]
                why = "the batch export" if e.ename == "BatchExported" else "MAX_USD"
                print(
                    f"[{name_of_profile}] {name} stopped by {why} after {time.time() - t0:.1f}s: "
                    f"{_one_line(e.ename, e.evalue)}" + (f"\n    not started: {', '.join(rest)}" if rest else ""),
                    flush=True,
                )
                return 1
            print(
                f"[{name_of_profile}] {name} FAILED after {time.time() - t0:.1f}s: {_one_line(e.ename, e.evalue)}\n"
                f"    full traceback: {_rel(out)} (cell {e.exec_count})",
                flush=True,
            )
            continue
        print(f"[{name_of_profile}] {name} {time.time() - t0:6.1f}s  {_last_summary(nb)}", flush=True)
    if failed:
        print(f"[{name_of_profile}] {failed} of {len(selected)} notebook(s) failed", flush=True)
    return 1 if failed else 0


def _one_line(ename: str, evalue: str, limit: int = 600) -> str:
    from acemad_utils.agents.client import redact  # an endpoint's error text can echo a key

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
                    return line[len("SUMMARY:") :].strip()
    return "(no summary line)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="default", help="profile name in profiles/ or a path to a YAML file")
    ap.add_argument("--only", nargs="*", help="notebook names (e.g. 00_theory)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a common parameter for this run (VALUE is YAML), e.g. BASE_URL=http://127.0.0.1:8000/v1",
    )
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
