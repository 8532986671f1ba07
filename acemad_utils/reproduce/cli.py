"""Regenerate every table and figure: run the numbered notebooks headlessly with papermill.

    python -m acemad_utils.reproduce                     # profile "default" (synthetic, minutes)
    python -m acemad_utils.reproduce --profile local     # the real local model (later issue)
    python -m acemad_utils.reproduce --only 00_theory
    python -m acemad_utils.reproduce --profile paper --set SECOND_BASE_URL=http://127.0.0.1:8001/v1

Profiles (profiles/*.yaml: papermill parameters per notebook, plus the run settings max_usd and
calls_via) are loaded and checked by experiments/profiles.py before anything runs; `--set KEY=VALUE` (YAML
value) overrides a common parameter or run setting for this run only; one that changes what the runs are (SEED,
N_ITEMS, ...: profiles.run_key) names the run '<profile>.set-SEED-1', whose runs, subsets and tables go beside the
profile's own. Before the first notebook of a
profile whose backend is `openai` (paid), the cost estimate of acemad_utils.cost.estimate is printed (no call is
made for it), with the MAX_USD in force.

Executed notebooks go to outputs/notebooks/ (git-ignored). On success one line per notebook is printed: its
time and the summary it prints last. A notebook that fails prints one line with the exception's type and
message (keys redacted) and the path of the executed notebook holding the full traceback; the other
notebooks still run, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from pathlib import Path
from typing import Optional

import nbformat
import papermill as pm
from nbclient.exceptions import DeadKernelError
from papermill.translators import PythonTranslator, papermill_translators

from acemad_utils.agents.budget import parse_max_usd, unpriced_message
from acemad_utils.agents.health import PROGRESS_ENV
from acemad_utils.agents.locks import LOCK_HOLDER_ENV
from acemad_utils.agents.redact import URL_SECRETS_ENV, hide_url, redact, safe_url
from acemad_utils.cost.estimate import Estimate, estimate_profile, format_estimate
from acemad_utils.data.paths import CHECKOUT, CHECKOUT_ENV, UnsafeName, outputs, safe_segment
from acemad_utils.data.settings import env
from acemad_utils.experiments import params as schema
from acemad_utils.experiments.profiles import (
    LONGEST,
    READS,
    Endpoint,
    endpoints,
    hint,
    load_profile,
    notebooks,
    params_for,
    parse_sets,
    run_env,
    run_key,
)
from acemad_utils.reproduce import uptodate
from acemad_utils.reproduce.guard import (
    InterruptibleKernelManager,
    ProfileLock,
    ProgressTail,
    failed_records,
    failure_lines,
    interrupt_kernels,
    parse_failure_lines,
    parse_failures,
)

# The kernel's own log stays out of a run's output: ipykernel warns under every notebook that its loopback TCP
# sockets are unencrypted, and jupyter_client interrupts (SIGINT) a kernel before shutting it down, which a
# kernel still busy logs as "ERROR | KeyboardInterrupt caught in kernel." (seen on a loaded machine). A cell's
# error is not a log line: papermill raises it, so failures still show.
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]

#: Exceptions after which every later notebook would stop the same way: the run ends with one line.
STOPPERS = {
    "BudgetStop": "MAX_USD",
    "BudgetExceeded": "MAX_USD",
    "UnpricedModel": "MAX_USD",
    "BatchExported": "the batch export",
    "EndpointDown": "the circuit breaker (the endpoint kept failing)",
    "BatchUnsupported": "CALLS_VIA batch (the endpoint has no Batch API)",
}


class LiteralTranslator(PythonTranslator):
    """Papermill's parameters cell written as Python literals only: repr of a checked plain value (params.literal).
    Papermill's own translator writes a value of another type (bytes from a YAML !!binary) between quotes as it
    is, which once ran code in the kernel; this one refuses it (profiles refuse it first)."""

    @classmethod
    def translate(cls, val):
        return schema.literal(val)


for _name in ("python3", "python"):  # find_translator looks up the kernel's name, then its language
    papermill_translators.register(_name, LiteralTranslator)


# nbclient logs "Kernel died while waiting for execute reply." (and papermill its own notes) through papermill's
# logger: the driver prints one line per notebook that says it, so those lines would only repeat it.
logging.getLogger("papermill").setLevel(logging.CRITICAL)


def run(
    profile: str = "default",
    only: list[str] | None = None,
    overrides: Optional[dict] = None,
    wait: bool = False,
    *,
    force: bool = False,
) -> int:
    prof = load_profile(profile, overrides)
    # --set values that shape the runs (SEED, N_ITEMS, ...) give the run a name of its own: new runs, subsets,
    # tables and executed notebooks beside the profile's, never a refusal to resume its runs (profiles.run_key).
    name_of_profile = run_key(profile, loaded=(prof, load_profile(profile) if overrides else prof))
    if name_of_profile != (prof.get("profile") or Path(profile).stem):
        print(
            f"[{name_of_profile}] --set changes what the runs are: they go to outputs/runs/{name_of_profile}, "
            f"beside the profile's own; tables and figures are suffixed __{name_of_profile}",
            flush=True,
        )
    try:  # before anything is written: the name becomes folders under outputs/
        safe_segment(name_of_profile, "profile name")
    except UnsafeName as e:
        raise SystemExit(str(e)) from None
    nbs = notebooks()
    selected = only or list(nbs)
    for name in selected:
        if name not in nbs:
            raise SystemExit(f"unknown notebook {name!r}{hint(name, nbs)}; notebooks: {sorted(nbs)}")
    jobs = prof.get("jobs", 1)
    if jobs > 1 and _uses_llm(prof, selected):  # one endpoint, one response cache, one MAX_USD: one at a time
        raise SystemExit(
            f"[{name_of_profile}] jobs = {jobs}: notebooks run side by side only when none calls an LLM (backend "
            "sim); this run has LLM notebooks: use jobs: 1 (the default)"
        )
    _preflight(f"[{name_of_profile}]", prof, selected)  # before the estimate, the lock and the first notebook
    # One folder per profile: `make reproduce` then `make reproduce PROFILE=local` keeps both executed copies.
    out_dir = outputs("notebooks", name_of_profile)
    env = run_env(prof)
    # MAX_USD counts what the whole run paid since now, across the notebooks' kernels (budget.Budget.from_env).
    env["ACEMAD_BUDGET_SINCE"] = repr(time.time())
    # No progress bars in the kernels (data.paths.progress_bars): the executed notebook would store them as stderr
    # text or dead widgets; the terminal has this driver's one line per notebook.
    env["ACEMAD_PROGRESS"] = "0"
    # The kernels import this checkout, the one whose code the fingerprints hash: two checkouts sharing one venv once
    # had ours stamped up to date while the kernels (the venv's editable install) wrote the other one's tables.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH")) if p)
    env[CHECKOUT_ENV] = str(CHECKOUT)  # the kernels refuse to run another checkout (notebook.py)
    est = _print_estimate(prof, profile, overrides, selected, env=env)
    unpriced = sorted({r.model for r in est.unpriced()}) if est is not None else []
    if unpriced and env.get("ACEMAD_MAX_USD") not in (None, ""):  # the cap could not count them: start nothing
        raise SystemExit(f"[{name_of_profile}] not started: {unpriced_message(unpriced)}")
    llm = _uses_llm(prof, selected)
    with ProfileLock(name_of_profile, llm=llm, wait=wait):  # one run per profile (and per cache): never pay twice
        progress = outputs("runs", name_of_profile) / ".progress.log"
        env[PROGRESS_ENV] = str(progress)  # the kernels' progress lines (agents/health.py), shown here
        env[URL_SECRETS_ENV] = "{}"  # filled by _hide_urls; restored (dropped) when the run ends
        env[LOCK_HOLDER_ENV] = (
            f"{os.getpid()}:{name_of_profile}"  # the runner in our kernels: this driver holds the lock for them
        )
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # papermill's kernels inherit this process's environment
        try:
            stamp = uptodate.Stamp(name_of_profile)
            prints = _fingerprints(prof, name_of_profile, nbs, selected, env)
            todo = selected if force else uptodate.stale(prints, stamp.recorded, READS)
            _print_up_to_date(f"[{name_of_profile}]", [n for n in selected if n not in todo], out_dir)
            with ProgressTail(progress, prefix=f"[{name_of_profile}] "):
                code = _run_notebooks(prof, name_of_profile, nbs, todo, out_dir=out_dir, jobs=jobs) if todo else 0
            if code != 0:
                stamp.forget()
            elif note := stamp.save(prints, ran=todo, reads=READS):
                print(f"[{name_of_profile}] {note}", flush=True)
            return code
        finally:
            _restore(saved)


def _preflight(tag: str, prof: dict, selected: list, timeout: float = 10.0) -> None:
    """Every endpoint the selected notebooks will call (profiles.endpoints: MODEL, SECOND_MODEL, each OTHER_MODELS
    entry) checked at once, in parallel, before anything runs: key present, host reachable, key accepted, model
    served (LLMClient.preflight), and with CALLS_VIA batch its Batch API (check_batch_api). Why here: each
    notebook's kernel checks only its own endpoints, so a second endpoint that was down stopped the paper profile
    at notebook 04, after ~$81 of notebooks 01-03, and a missing key failed every notebook in turn. SystemExit
    with one line per endpoint that fails: the parameter, the redacted URL, the cause and the fix."""
    eps = endpoints({nb: {**schema.defaults(nb), **params_for(prof, nb, schema.names(nb))} for nb in selected})
    if not eps:
        return
    from acemad_utils.agents.client import LLMClient  # the SDK (~1 s) only for a profile that calls an endpoint

    batch = (run_env(prof).get("ACEMAD_CALLS_VIA") or "sync") == "batch"  # as the kernels will see it

    def check(ep: Endpoint, model: bool) -> Optional[str]:
        """Free checks first (model=False: key, GET /models, GET /batches); then, once every endpoint passed them,
        the model (model=True: its one-token request, when the listing lacks the model, goes to a live endpoint
        of a run that will start)."""
        try:
            client = LLMClient(ep.model, ep.url or None, free=True)  # free: prices are the estimate's business
            try:
                first = ep.setting.split(",")[0]
                setting = first.split(" / ")[-1] if " / " in first else f"{first.split()[0]}'s base_url"
                client.preflight(timeout, check_model=model, setting=setting)
                if batch and not model:
                    client.check_batch_api(timeout)
            finally:
                client.close()
        except Exception as e:  # MissingAPIKey, EndpointUnreachable, APIKeyRejected, ModelNotServed, a bad URL
            skip = f"; or run without it: {ep.skip}" if ep.skip else ""
            where = f"{ep.model} at {safe_url(ep.url or None)}, notebooks {', '.join(ep.notebooks)}"
            return f"{tag} not started: {ep.setting} ({where}): {str(e).rstrip('.')}{skip}"
        return None

    with ThreadPoolExecutor(max_workers=len(eps), thread_name_prefix="preflight") as pool:
        for model in (False, True):
            lines = [x for x in pool.map(lambda ep: check(ep, model), eps) if x]  # noqa: B023 (used at once)
            if lines:
                raise SystemExit(redact("\n".join(" ".join(x.split()) for x in lines)))


def _fingerprints(prof: dict, name_of_profile: str, nbs: dict, selected: list, env: dict) -> dict:
    """What each selected notebook would run now (uptodate.fingerprint), URL credentials taken out first."""
    env_items = uptodate.environment(env)
    out = {}
    for name in selected:
        params = params_for(prof, name, schema.names(name))
        params.setdefault("PROFILE", name_of_profile)
        out[name] = uptodate.fingerprint(nbs[name], _hide_urls(params), env_items)
    return out


def _print_up_to_date(tag: str, names: list, out_dir: Path) -> None:
    """One line per notebook skipped as up to date (uptodate.py), with the summary its executed copy printed."""
    for name in names:
        try:
            summary = _last_summary(nbformat.read(str(out_dir / f"{name}.ipynb"), as_version=4))
        except (OSError, ValueError):
            summary = "(no summary line)"
        print(f"{tag} {name}  up to date  {summary}", flush=True)
    if names:
        print(
            f"{tag} {len(names)} notebook(s) up to date: nothing they read changed since the last clean run "
            f"(executed copies in {_rel(out_dir)}); --force runs them again",
            flush=True,
        )


def _restore(saved: dict) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _uses_llm(prof: dict, selected: list) -> bool:
    common, own = prof.get("common") or {}, prof.get("notebooks") or {}
    return any(((own.get(nb) or {}).get("BACKEND", common.get("BACKEND", "sim"))) != "sim" for nb in selected)


def _print_estimate(
    prof: dict, profile: str, overrides: Optional[dict], selected: list, *, env: dict
) -> Optional[Estimate]:
    """The cost estimate, before any money is spent, when a selected notebook runs on a paid (openai) backend.
    Returns it (None when none was made: no paid backend, or the estimate failed; with MAX_USD the client then
    refuses an unpriced model when it is built, before any call)."""
    common, own = prof.get("common") or {}, prof.get("notebooks") or {}
    if not any(((own.get(nb) or {}).get("BACKEND", common.get("BACKEND"))) == "openai" for nb in selected):
        return None

    est = None
    try:
        est = estimate_profile(profile, overrides, selected)
        text = format_estimate(est, parse_max_usd(env.get("ACEMAD_MAX_USD")))
    except Exception as e:  # the estimate must never stop a run; say why it is missing
        text = f"cost estimate unavailable ({type(e).__name__}: {e})"
    if env.get("ACEMAD_MAX_USD") in (None, ""):
        text += "\n  no MAX_USD set: nothing caps this run's spend (profile key max_usd:, or ACEMAD_MAX_USD)"
    print(text, flush=True)
    return est


def _execute(prof: dict, name_of_profile: str, name: str, path: Path, out: Path, **engine):
    """Run one notebook with the profile's parameters into `out` (papermill); returns the executed notebook.
    `engine`: more keywords for nbclient (side by side: the kernel manager that lets Ctrl-C through)."""
    params = params_for(prof, name, schema.names(name))
    params.setdefault("PROFILE", name_of_profile)  # every notebook declares PROFILE (experiments/params.py)
    params = _hide_urls(params)  # what papermill writes (parameters cell, metadata) holds no credentials
    return pm.execute_notebook(
        str(path),
        str(out),
        parameters=params,
        cwd=str(path.parent),
        kernel_name="python3",
        progress_bar=False,
        log_output=False,
        extra_arguments=KERNEL_ARGS,
        **engine,
    )  # no kernel log lines (KERNEL_ARGS)


def _hide_urls(value):
    """`value` (parameters, nested) with URL credentials taken out of every string; the full URLs go to the
    kernels in URL_SECRETS_ENV (the environment, never a file), where LLMPopulation puts them back."""
    if isinstance(value, dict):
        return {k: _hide_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide_urls(v) for v in value]
    if isinstance(value, str) and "://" in value:
        stored, hidden = hide_url(value)
        if hidden:
            with _ENV_LOCK:  # notebooks side by side start from threads
                known = json.loads(env(URL_SECRETS_ENV) or "{}")
                os.environ[URL_SECRETS_ENV] = json.dumps({**known, **hidden})
        return stored
    return value


_ENV_LOCK = threading.Lock()


def _run_notebooks(prof: dict, name_of_profile: str, nbs: dict, selected: list, *, out_dir: Path, jobs: int = 1) -> int:
    t_start = time.time()
    if jobs > 1:
        code = _side_by_side(prof, name_of_profile, nbs, selected, out_dir=out_dir, jobs=jobs)
    else:
        code = _one_by_one(prof, name_of_profile, nbs, selected, out_dir=out_dir)
    if code == 130:
        return code
    # Failed records are not results: the tables leave them out (and say how many), and the exit status is 1
    # so that no script takes this run's tables for a clean run's (README, "When the endpoint fails").
    lines = failure_lines(name_of_profile, failed_records(since=t_start))
    lines += parse_failure_lines(name_of_profile, parse_failures(since=t_start))
    for line in lines:
        print(redact(line), flush=True)
    return 1 if code or lines else 0


def _ok_line(tag: str, name: str, t0: float, nb) -> str:
    return f"{tag} {name} {time.time() - t0:6.1f}s  {_last_summary(nb)}{_failed_note(t0)}{_parse_note(t0)}"


def _parse_note(since: float) -> str:
    """The headline's count of commitments that did not parse in the notebook's runs (none: nothing)."""
    runs = parse_failures(since=since)
    n, of = sum(a for a, _ in runs.values()), sum(b for _, b in runs.values())
    return f"  [{n} of {of} commitments did not parse ({100 * n / of:.0f}%)]" if n else ""


def _one_by_one(prof: dict, name_of_profile: str, nbs: dict, selected: list, *, out_dir: Path) -> int:
    """The notebooks in order, in this thread; 130 on Ctrl-C, 1 if one failed, else 0."""
    failed, tag = 0, f"[{name_of_profile}]"
    for i, name in enumerate(selected):
        t0 = time.time()
        out = out_dir / f"{name}.ipynb"
        try:
            nb = _execute(prof, name_of_profile, name, nbs[name], out)
        except KeyboardInterrupt:  # Ctrl-C here also reaches the kernel, whose run stops between records
            print(
                f"{tag} {name} interrupted after {time.time() - t0:.1f}s; the later notebooks did not "
                f"run; rerun the same command to resume (saved records and cached calls are kept)",
                flush=True,
            )
            return 130
        except Exception as e:  # PapermillExecutionError (a cell raised), DeadKernelError, a full disk, ...
            outcome = _failed_notebook(tag, name, e, time.time() - t0, out, selected[i + 1 :])
            if outcome == "interrupted":
                return 130
            failed += 1
            if outcome == "stopped":
                break
            continue
        print(_ok_line(tag, name, t0, nb), flush=True)
    if failed:
        print(f"{tag} {failed} of {len(selected)} notebook(s) failed", flush=True)
    return 1 if failed else 0


def _ready(name: str, selected: list, ended: set) -> bool:
    """May `name` start: every notebook it reads (READS) that is part of this run has ended."""
    needs = READS.get(name, ())
    others = [n for n in selected if n != name] if "*" in needs else [n for n in needs if n in selected]
    return all(n in ended for n in others)


_INTERRUPTIBLE = {"kernel_manager_class": InterruptibleKernelManager}


def _side_by_side(prof: dict, name_of_profile: str, nbs: dict, selected: list, *, out_dir: Path, jobs: int) -> int:
    """Up to `jobs` notebooks at once (a kernel each), each started once the notebooks it reads have ended
    (READS), the LONGEST first, in the order given otherwise; a line per notebook as it ends. Why: a synthetic
    notebook is one busy core plus a kernel's start-up, so on 2 cores two at a time nearly halve a run (README,
    "Cost and speed"). Same outcomes as one by one: a failed notebook does not stop the others; MAX_USD-like stops and
    Ctrl-C start no further notebook. A terminal's Ctrl-C reaches the kernels too: their runs stop between
    records and their lines are printed; a second Ctrl-C stops waiting for them."""
    tag, state = f"[{name_of_profile}]", {"failed": 0, "code": 0, "driver_interrupted": 0}
    waiting, ended = list(selected), set[str]()
    running: dict[Future, tuple[str, float]] = {}  # a notebook in flight -> (its name, when it started)
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="notebook")
    try:
        while waiting or running:
            if not state["code"]:
                ready = sorted((n for n in waiting if _ready(n, selected, ended)), key=lambda n: n not in LONGEST)
                for name in ready[: jobs - len(running)]:
                    waiting.remove(name)
                    out = out_dir / f"{name}.ipynb"
                    job = pool.submit(_execute, prof, name_of_profile, name, nbs[name], out, **_INTERRUPTIBLE)
                    running[job] = (name, time.time())
            if not running:
                break
            try:
                finished, _ = wait_for(running, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                interrupt_kernels()  # as papermill does for the one notebook it runs in the main thread
                if state["driver_interrupted"]:  # the second Ctrl-C: the kernels' runs stop now; stop waiting
                    raise
                state["code"] = state["driver_interrupted"] = 130
                print(f"{tag} interrupted: waiting for {', '.join(n for n, _ in running.values())} to stop; the "
                      "later notebooks will not start (Ctrl-C again to stop waiting)", flush=True)  # fmt: skip
                continue
            for fut in finished:
                name, t0 = running.pop(fut)
                ended.add(name)
                _report(tag, name, fut, t0, out_dir=out_dir, waiting=waiting, state=state)
    except KeyboardInterrupt:
        state["code"] = 130
    finally:
        pool.shutdown(wait=state["code"] != 130, cancel_futures=True)
    if state["code"] == 130:
        if state["driver_interrupted"]:  # (a kernel that saw the Ctrl-C first has said so in its line)
            print(f"{tag} interrupted; rerun the same command to resume (saved records and cached calls are kept)")
        return 130
    if state["failed"]:
        print(f"{tag} {state['failed']} of {len(selected)} notebook(s) failed", flush=True)
    return state["code"] or (1 if state["failed"] else 0)


def _report(tag: str, name: str, fut: Future, t0: float, *, out_dir: Path, waiting: list, state: dict) -> None:
    """The line of a notebook that ended side by side; updates the run's failed count and exit code."""
    try:
        print(_ok_line(tag, name, t0, fut.result()), flush=True)
    except Exception as e:  # as in _one_by_one: every failure is one line, the other notebooks go on
        outcome = _failed_notebook(tag, name, e, time.time() - t0, out_dir / f"{name}.ipynb", waiting)
        if outcome == "interrupted":
            state["code"] = 130
            return
        state["failed"] += 1
        if outcome == "stopped" and not state["code"]:
            state["code"] = 1


def _failed_note(since: float) -> str:
    """The headline's warning when the notebook's runs hold failed records (left out of its tables)."""
    n = sum(k for k, _, _ in failed_records(since=since).values())
    return f"  [WARNING: {n} failed record(s), not counted in the tables; rerun to retry them]" if n else ""


def _disk_full(e: BaseException) -> bool:
    text = f"{getattr(e, 'ename', '')} {getattr(e, 'evalue', '')} {e}"
    return getattr(e, "errno", None) == errno.ENOSPC or "No space left on device" in text or "disk is full" in text


def _whole_or_removed(out: Path, seconds: float, what: str = "full traceback") -> str:
    """The executed notebook if this run (of `seconds`) wrote it whole; a truncated one (a full disk) is removed,
    so that it is never left as the only record of the run: the driver's line is. An older copy is not named."""
    try:
        if out.stat().st_mtime < time.time() - seconds - 1:
            return "no executed copy was written"
        nbformat.read(out, as_version=4)
        return f"{what}: {_rel(out)}"
    except FileNotFoundError:
        return "no executed copy was written"
    except Exception:  # truncated JSON
        out.unlink(missing_ok=True)
        return f"its executed copy {_rel(out)} could not be written whole and was removed"


def _broken_kernel_or_disk(tag: str, name: str, e: BaseException, seconds: float, out: Path, rest: list) -> str:
    """The one line of a notebook whose kernel died or whose disk filled up ('stopped' or 'failed')."""
    if _disk_full(e):
        where = getattr(e, "filename", None)
        where = f"writing {_rel(Path(where))}" if where else f"on the disk holding {_rel(out.parents[2])}"
        print(
            f"{tag} {name} FAILED after {seconds:.1f}s: the disk is full (ENOSPC {where}): free space there and "
            f"rerun the same command (saved records are kept; {_whole_or_removed(out, seconds)})"
            + (f"\n    not started: {', '.join(rest)}" if rest else ""),
            flush=True,
        )
        return "stopped"  # every later notebook writes to the same disk
    if isinstance(e, DeadKernelError) or getattr(e, "ename", "") == "DeadKernelError":
        ran = _whole_or_removed(out, seconds, "ran")
        print(
            f"{tag} {name} FAILED after {seconds:.1f}s: its kernel died (killed from outside, e.g. by the "
            f"out-of-memory killer); saved records are kept: rerun the same command; {ran}",
            flush=True,
        )
        return "failed"
    copy = _whole_or_removed(out, seconds)
    print(
        f"{tag} {name} FAILED after {seconds:.1f}s: {_one_line(type(e).__name__, str(e))}; {copy}",
        flush=True,
    )
    return "failed"


def _failed_notebook(tag: str, name: str, e, seconds: float, out: Path, rest: list) -> str:
    """Print the one line of a notebook that raised; 'interrupted' (Ctrl-C), 'stopped' (every later notebook
    would stop the same way: MAX_USD, a batch export, the circuit breaker, a full disk) or 'failed'."""
    if not isinstance(e, pm.PapermillExecutionError) or _disk_full(e):
        return _broken_kernel_or_disk(tag, name, e, seconds, out, rest)
    if e.ename in ("RunInterrupted", "KeyboardInterrupt"):  # the kernel saw the Ctrl-C first
        print(f"{tag} {name} {_one_line(e.ename, e.evalue)}; the later notebooks did not run", flush=True)
        return "interrupted"
    if e.ename in STOPPERS:
        print(
            f"{tag} {name} stopped by {STOPPERS[e.ename]} after {seconds:.1f}s: {_one_line(e.ename, e.evalue)}"
            + (f"\n    not started: {', '.join(rest)}" if rest else ""),
            flush=True,
        )
        return "stopped"
    print(
        f"{tag} {name} FAILED after {seconds:.1f}s: {_one_line(e.ename, e.evalue)}\n"
        f"    full traceback: {_rel(out)} (cell {e.exec_count})",
        flush=True,
    )
    return "failed"


def _one_line(ename: str, evalue: str, limit: int = 600) -> str:

    if ename in STOPPERS:
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
    ap.add_argument(
        "--wait", action="store_true", help="if another run of this profile is going, wait for it instead of exiting"
    )
    ap.add_argument(
        "--force",
        action="store_true",
        help="run every selected notebook, also those up to date (nothing they read changed since the last clean run)",
    )
    ap.add_argument(
        "--jobs", type=int, help="notebooks at once (synthetic notebooks only; default: the profile's jobs, else 1)"
    )
    args = ap.parse_args(argv)
    overrides = ({} if args.jobs is None else {"jobs": args.jobs}) | parse_sets(args.set)
    return run(args.profile, args.only, overrides, wait=args.wait, force=args.force)


if __name__ == "__main__":
    sys.exit(main())
