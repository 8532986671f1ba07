"""Regenerate every table and figure: the numbered notebooks through papermill into outputs/ (profile checked, every
endpoint checked, cost printed, profile locked, each notebook not up to date run; one line each), watching progress,
failed records and Ctrl-C. Exit status: 0, 1 (a notebook or records failed), 130 (Ctrl-C). papermill, nbclient and
the estimate are imported only when something runs: an up-to-date run costs the checks, not seconds of imports."""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from pathlib import Path
from typing import Any, Optional
from unittest import mock

from jupyter_core.utils import run_sync  # on this thread's event loop, the one nbclient runs its kernel on

from acemad_utils.agents.budget import paid_line, parse_max_usd, unpriced_message
from acemad_utils.agents.health import PROGRESS_ENV
from acemad_utils.agents.locks import LOCK_HOLDER_ENV, LockRefused, RunLock
from acemad_utils.agents.redact import URL_SECRETS_ENV, hide_url, redact, safe_url
from acemad_utils.data.benchmarks import DataError, data_root
from acemad_utils.data.paths import CHECKOUT, CHECKOUT_ENV, UnsafeName, outputs, safe_segment
from acemad_utils.data.settings import env
from acemad_utils.data.transcripts import load_run
from acemad_utils.experiments import params as schema
from acemad_utils.experiments import subsets
from acemad_utils.experiments.profiles import (
    LONGEST,
    READS,
    endpoints,
    hint,
    load_profile,
    notebook_params,
    notebooks,
    params_for,
    parse_sets,
    reads,
    run_env,
    run_key,
)
from acemad_utils.experiments.runner import PARSE_FAILURE_LIMIT, failure_line
from acemad_utils.reproduce import uptodate

# The kernels' own log stays out of the run's output (unencrypted-loopback warnings, "KeyboardInterrupt caught");
# a cell's error is raised by papermill, so failures still show.
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
NO_SUMMARY = "(no summary line)"


def run(profile: str = "default", only: list[str] | None = None, overrides: Optional[dict] = None,
        wait: bool = False, *, force: bool = False) -> int:  # fmt: skip
    prof = load_profile(profile, overrides)
    name = run_key(profile, loaded=(prof, load_profile(profile) if overrides else prof))
    tag = f"[{name}]"
    if name != (prof.get("profile") or Path(profile).stem):
        print(f"{tag} --set changes what the runs are: they go to outputs/runs/{name}, beside the profile's own; "
              f"tables and figures are suffixed __{name}", flush=True)  # fmt: skip
    try:  # before anything is written: the name becomes folders under outputs/
        safe_segment(name, "profile name")
    except UnsafeName as e:
        raise SystemExit(str(e)) from None
    nbs = notebooks()
    selected = only or list(nbs)
    for nb in selected:
        if nb not in nbs:
            raise SystemExit(f"unknown notebook {nb!r}{hint(nb, nbs)}; notebooks: {sorted(nbs)}")
    for key in sorted(overrides or {}):  # a notebook parameter (not a run setting) some selected ones do not declare
        declared_by = schema.notebooks_of(key)
        if declared_by and (missed := [nb for nb in selected if nb not in declared_by]):
            near = {nb: [p for p in schema.names(nb) if p.startswith(f"{key}_")] for nb in missed}  # 00's ETA_PHASE
            said = [nb + (f" (it takes {', '.join(near[nb])})" if near[nb] else "") for nb in missed]
            print(f"{tag} --set {key} does not reach {', '.join(said)}: {'it does' if len(missed) == 1 else 'they do'}"
                  f" not take {key}", flush=True)  # fmt: skip
    jobs, llm = prof.get("jobs", 1), _uses_llm(prof, selected)
    if jobs > 1 and llm:  # one endpoint, one response cache, one MAX_USD: one at a time
        raise SystemExit(f"{tag} jobs = {jobs}: notebooks run side by side only when none calls an LLM (backend "
                         "sim); this run has LLM notebooks: use jobs: 1 (the default)")  # fmt: skip
    out_dir = outputs("notebooks", name)
    env = run_env(prof) | {
        "ACEMAD_BUDGET_SINCE": repr(time.time()),  # MAX_USD counts what the whole run paid since now
        "ACEMAD_PROGRESS": "0",  # no progress bars stored in executed notebooks: the driver prints progress
        # the kernels import this checkout, the one whose code the fingerprints hash, and refuse another one
        "PYTHONPATH": os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH")) if p),
        CHECKOUT_ENV: str(CHECKOUT),
    }
    with ProfileLock(name, llm=llm, wait=wait):  # one run per profile (and per cache): never pay twice
        progress = outputs("runs", name) / ".progress.log"
        env |= {PROGRESS_ENV: str(progress), URL_SECRETS_ENV: "{}", LOCK_HOLDER_ENV: f"{os.getpid()}:{name}"}
        with mock.patch.dict(os.environ, env):  # papermill's kernels inherit it; restored after the run
            stamp, env_items = uptodate.Stamp(name), uptodate.environment(env)
            prints = {
                nb: uptodate.fingerprint(nbs[nb], _hide_urls({"PROFILE": name} | params_for(prof, nb)), env_items)
                for nb in selected
            }
            needs = reads(prof, READS)
            todo = selected if force else uptodate.stale(prints, stamp.recorded, needs)
            current = [nb for nb in selected if nb not in todo]
            for nb in current:
                print(f"{tag} {nb}  up to date  {_last_summary(out_dir / f'{nb}.ipynb')}", flush=True)
            if current:
                print(f"{tag} {len(current)} notebook(s) up to date: nothing they read changed since the last clean "
                      f"run (executed copies in {_rel(out_dir)}); --force runs them again", flush=True)  # fmt: skip
            if todo:  # checked and priced for what runs: a rerun with every notebook up to date sends nothing
                # local and instant: said with the endpoints' free checks, so one try lists every problem
                local = _data_preflight(tag, prof, todo) + _subset_preflight(tag, name, prof, todo)
                _preflight(tag, prof, todo, also=local)
                screened = [FIRST, *todo] if _screens(name, prof, todo) else todo  # its subsets built on the way
                est = _print_estimate(prof, profile, overrides, screened, env=env)
                unpriced = sorted({r.model for r in est.unpriced()}) if est is not None else []
                if unpriced and env.get("ACEMAD_MAX_USD") not in (None, ""):  # the cap could not count them
                    raise SystemExit(f"{tag} not started: {unpriced_message(unpriced)}")
            with progress_tail(progress, prefix=f"{tag} "):
                code = _run_notebooks(prof, name, nbs, todo, out_dir=out_dir, jobs=jobs, needs=needs) if todo else 0
            cap = parse_max_usd(env.get("ACEMAD_MAX_USD") or None)
            if llm and todo and (paid := paid_line(float(env["ACEMAD_BUDGET_SINCE"]), cap)):
                print(f"{tag} {paid}", flush=True)
            if code != 0:
                stamp.forget()
            elif note := stamp.save(prints, ran=todo, reads=needs):
                print(f"{tag} {note}", flush=True)
            if code == 0 and todo:  # where to look, as the up-to-date line says on a rerun
                print(f"{tag} done: executed notebooks in {_rel(out_dir)}; tables and figures in "
                      f"{_rel(outputs('tables', create=False))}, {_rel(outputs('figures', create=False))}",
                      flush=True)  # fmt: skip
            return code


def _preflight(tag: str, prof: dict, selected: list, timeout: float = 10.0, also: Sequence[str] = ()) -> None:
    """Every endpoint the selected notebooks call, checked before anything runs (a second endpoint that was down once
    stopped the paper profile at notebook 04, after ~$81 of notebooks 01-03); one line per failing endpoint, after
    the problems found already (`also`), and no model's paid probe while any is left."""
    eps = endpoints({nb: params_for(prof, nb, defaults=True) for nb in selected})
    if not eps:
        if also:
            raise SystemExit("\n".join(also))
        return
    # the SDK (~1 s) only for a profile that calls an endpoint
    from acemad_utils.agents.cache import ResponseCache
    from acemad_utils.agents.client import EndpointUnreachable, LLMClient

    batch = (run_env(prof).get("ACEMAD_CALLS_VIA") or "sync") == "batch"
    cache = outputs("cache", create=False) / "llm.sqlite"

    def holds(model: str) -> bool:  # the response cache holds replies of `model`: a rerun it may answer whole
        if not cache.exists():
            return False
        with contextlib.closing(ResponseCache(cache)) as c:
            return c.holds(model)

    excused: set = set()  # unreachable, but the cache may answer them: said once, not checked again

    def check(ep, model: bool) -> Optional[str]:
        if ep in excused:
            return None
        first = ep.setting.split(",")[0]
        setting = first.split(" / ")[-1] if " / " in first else f"{first.split()[0]}'s base_url"
        where = f"{ep.model} at {safe_url(ep.url or None)}, notebooks {', '.join(ep.notebooks)}"
        try:  # prices are the estimate's business
            with contextlib.closing(LLMClient(ep.model, ep.url or None, free=True)) as client:
                client.preflight(timeout, check_model=model, setting=setting)
                if batch and not model:
                    client.check_batch_api(timeout)
        except Exception as e:  # MissingAPIKey, EndpointUnreachable, APIKeyRejected, ModelNotServed, a bad URL
            # a --force rerun the cache may answer whole: go on, as the kernels' clients do (they check at the first
            # call the cache cannot answer)
            if isinstance(e, EndpointUnreachable) and not batch and holds(ep.model):
                print(redact(f"{tag} {ep.setting} ({where}): {str(e).rstrip('.')}; running on: the response cache "
                             "holds this model's replies, and the first call it cannot answer stops with this "
                             "message"), flush=True)  # fmt: skip
                excused.add(ep)
                return None
            skip = f"; or run without it: {ep.skip}" if ep.skip else ""
            return f"{tag} not started: {ep.setting} ({where}): {str(e).rstrip('.')}{skip}"
        return None

    with ThreadPoolExecutor(max_workers=len(eps), thread_name_prefix="preflight") as pool:
        for model in (False, True):  # the free checks of every endpoint before any model's one-token request
            lines = [x for x in pool.map(lambda ep: check(ep, model), eps) if x]  # noqa: B023 (used at once)
            if lines := [*also, *(redact(" ".join(x.split())) for x in lines)]:
                raise SystemExit("\n".join(lines))


def _data_preflight(tag: str, prof: dict, selected: list) -> list[str]:
    """SOURCE=benchmarks with no benchmark files to read stops the run before it starts, in one line, not in seven
    notebooks' errors after the first ones ran (and, on a paid profile, were paid)."""
    if any(params_for(prof, nb, defaults=True).get("SOURCE") == "benchmarks" for nb in selected):
        try:
            data_root()
        except DataError as e:
            return [f"{tag} not started: SOURCE=benchmarks: {e}; or --set SOURCE=demo (the 24 demo questions)"]
    return []


FIRST = "01_subset_construction"


def _subsets_of(name: str, P: dict) -> Optional[Path]:
    """The folder of the challenging subsets a notebook with parameters P reads (SUBSET_MODEL's, else MODEL's), or
    None while none are built there."""
    variant = subsets.variant(name, (P.get("SOURCE"), P.get("N_ITEMS"), P.get("SEED", 0)))
    where = subsets.subsets_root() / (subsets.model_slug(str(P.get("SUBSET_MODEL") or P.get("MODEL") or "")) + variant)
    return where if where.is_dir() and any(where.iterdir()) else None


def _screens(name: str, prof: dict, selected: list) -> bool:
    """Whether a selected paid notebook will build the subsets it reads itself (notebook 01 not selected, its model's
    subsets not built yet): the estimate must price that screening too."""
    if FIRST in selected:
        return False
    readers = [params_for(prof, nb, defaults=True) for nb in selected if "SUBSET_MODEL" in schema.names(nb)]
    return any(P.get("BACKEND") == "openai" and _subsets_of(name, P) is None for P in readers)


def _subset_preflight(tag: str, name: str, prof: dict, selected: list) -> list[str]:
    """A notebook that reads another model's challenging subsets (SUBSET_MODEL) where none are stops the run before it
    pays for the others: notebook 01 builds MODEL's subsets, never SUBSET_MODEL's."""
    built = params_for(prof, FIRST, defaults=True).get("MODEL") if FIRST in selected else None  # this run builds
    for nb in selected:
        P = params_for(prof, nb, defaults=True)
        sub, model = P.get("SUBSET_MODEL"), P.get("MODEL")
        if P.get("BACKEND") == "sim" or not sub or sub in (model, built):
            continue
        if _subsets_of(name, P) is None:
            return [f"{tag} not started: {nb} reads the challenging subsets of SUBSET_MODEL {sub!r}, and none are "
                    f"built (notebook 01 here builds MODEL {model!r}'s, not these): build them first with MODEL="
                    f"{sub!r} (a copy of the profile with only MODEL changed then reuses them), or --set "
                    "SUBSET_MODEL='' to select this model's own"]  # fmt: skip
    return []


def _print_estimate(prof: dict, profile: str, overrides: Optional[dict], selected: list, *, env: dict) -> Any:
    """The cost estimate of an LLM profile, printed before it runs (never stopping it); None when there is none."""
    if not _uses_llm(prof, selected, ("openai",)):
        return None
    est = None
    try:
        from acemad_utils.cost.estimate import estimate_profile, format_estimate  # the engine replay: a paid run only
        from acemad_utils.cost.power import format_plan, plan

        est = estimate_profile(profile, overrides, selected)
        text = format_estimate(est, parse_max_usd(env.get("ACEMAD_MAX_USD")))
        # and the questions each claim needs, beside the dollars: what the run can and cannot settle, before it pays
        text += "\n" + format_plan(plan(notebook_params(profile, overrides, selected)[1], est=est))
    except Exception as e:  # say why it is missing
        text = f"cost estimate unavailable ({type(e).__name__}: {e})"
    if env.get("ACEMAD_MAX_USD") in (None, ""):
        text += "\n  no MAX_USD set: nothing caps this run's spend (profile key max_usd:, or ACEMAD_MAX_USD)"
    print(text, flush=True)
    return est


def _uses_llm(prof: dict, selected: list, backend: tuple = ("local", "openai")) -> bool:
    return any(params_for(prof, nb, defaults=True).get("BACKEND") in backend for nb in selected)


@functools.cache
def _papermill():
    """papermill with LiteralTranslator registered and its notes silenced (nbclient's "Kernel died ..." would only
    repeat the driver's one line per notebook)."""
    # nbformat's schema has no IRI format, yet jsonschema compiles rfc3987_syntax's grammars at import for one: ~2.5
    # CPU-s of every run that executes a notebook; blocked, jsonschema leaves that optional checker out
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import papermill as pm
    from papermill.translators import papermill_translators

    for name in ("python3", "python"):  # find_translator looks up the kernel's name, then its language
        papermill_translators.register(name, literal_translator())
    logging.getLogger("papermill").setLevel(logging.CRITICAL)
    return pm


@functools.cache
def literal_translator():
    """The injected parameters as Python literals only (params.literal): papermill's own translator writes a value
    of another type (bytes from a YAML !!binary) between quotes as it is, which once ran code in the kernel."""
    from papermill.translators import PythonTranslator

    class LiteralTranslator(PythonTranslator):
        @classmethod
        def translate(cls, val):
            return schema.literal(val)

    return LiteralTranslator


def _execute(prof: dict, name_of_profile: str, name: str, path: Path, out: Path, warm: Optional[dict] = None):
    """papermill on one notebook, in a kernel of its own, or with `warm` (this thread's {"km": ...}) in the kernel
    an earlier notebook of the run left, reset to what a new one starts from (notebook.fresh_kernel)."""
    km = warm.get("km") if warm is not None else None
    if warm is not None and km is not None and not (run_sync(km.is_alive)() and _fresh(km, path.parent)):
        _stop(warm)
        km = None
    if warm is not None and km is None:
        km = warm["km"] = _kernel_manager()(kernel_name="python3")  # started by papermill, kept after it
    try:
        return _papermill().execute_notebook(
            str(path),
            str(out),
            parameters=_hide_urls({"PROFILE": name_of_profile} | params_for(prof, name)),
            cwd=str(path.parent),
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            extra_arguments=KERNEL_ARGS,
            kernel_manager_class=_kernel_manager(),  # lets the driver pass a Ctrl-C on to the kernels
            km=km,
            # a paid run's executed copy grows cell by cell (what a user follows on a long run); a synthetic one's
            # is written once at its end (or at its error): 0.7 CPU s of the default profile's rewrites
            request_save_on_cell_execute=warm is None,
        )
    except BaseException:  # a failed notebook's kernel (perhaps dead, or stopped by Ctrl-C) is not used again
        if warm is not None:
            _stop(warm)
        raise


def _fresh(km, cwd: Path) -> bool:
    """notebook.fresh_kernel(cwd) run in km's kernel; False when it did not say ok within a minute."""

    async def reset() -> bool:
        kc = km.client()
        kc.start_channels()
        try:
            code = f"__import__('acemad_utils.notebook', fromlist=['_']).fresh_kernel({str(cwd)!r})"
            msg_id = kc.execute(code, silent=True, store_history=False)
            while (reply := await kc.get_shell_msg(timeout=60))["parent_header"].get("msg_id") != msg_id:
                pass
            return reply["content"]["status"] == "ok"
        finally:
            kc.stop_channels()

    try:
        return run_sync(reset)()
    except Exception:  # no reply (queue.Empty), a closed socket: a new kernel instead
        return False


def _stop(warm: dict) -> None:
    """Shut down this thread's warm kernel, if any (in the thread whose event loop started it)."""
    if (km := warm.pop("km", None)) is not None and km.has_kernel:
        with contextlib.suppress(Exception):
            run_sync(km.shutdown_kernel)(now=False)


_ENV_LOCK = threading.Lock()


def _hide_urls(value):
    """`value` with URL credentials taken out; the full URLs reach the kernels in URL_SECRETS_ENV, never a file."""
    if isinstance(value, dict):
        return {k: _hide_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide_urls(v) for v in value]
    if isinstance(value, str) and "://" in value:
        stored, hidden = hide_url(value)
        if hidden:
            with _ENV_LOCK:  # notebooks side by side start from threads
                os.environ[URL_SECRETS_ENV] = json.dumps({**json.loads(env(URL_SECRETS_ENV) or "{}"), **hidden})
        return stored
    return value


def _run_notebooks(
    prof: dict, name_of_profile: str, nbs: dict, selected: list, *, out_dir: Path, jobs: int = 1, needs: dict
) -> int:
    """Up to `jobs` notebooks at once, each after the ones it `needs` (profiles.reads; LONGEST first); without an LLM,
    each slot's notebooks share one kernel, reset between them (_execute). A failure does not stop the others; a
    STOPPER or Ctrl-C starts no further one. Ctrl-C reaches the kernels; a second one stops waiting."""
    tag, t_start, failed, code, interrupted = f"[{name_of_profile}]", time.time(), 0, 0, False
    waiting, ended, running = list(selected), set[str](), dict[Future, tuple[str, float, int]]()
    # One thread per slot, each with its kernel: a synthetic run's notebooks reuse it (no LLM: nothing a kernel
    # was started with, such as an endpoint's URL, differs between them); a paid run's get a kernel each.
    slots = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"notebook{i}") for i in range(jobs)]
    warm: list[Optional[dict]] = [None if _uses_llm(prof, selected) else {} for _ in slots]
    free = list(range(jobs))
    try:
        while waiting or running:
            if not code:
                ready = [n for n in waiting if all(m in ended for m in selected if m != n and _reads(needs, n, m))]
                for nb in sorted(ready, key=lambda n: n not in LONGEST)[: len(free)]:
                    waiting.remove(nb)
                    i = free.pop(0)
                    args = (prof, name_of_profile, nb, nbs[nb], out_dir / f"{nb}.ipynb")
                    running[slots[i].submit(_execute, *args, warm=warm[i])] = (nb, time.time(), i)
            for i in free if not waiting else ():  # an idle kernel no notebook will use gives its memory back
                if kernel := warm[i]:
                    slots[i].submit(_stop, kernel)
            if not running:
                break
            try:
                finished, _ = wait_for(running, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                interrupt_kernels()  # jupyter_client starts kernels in sessions of their own
                if interrupted:  # the second Ctrl-C: stop waiting
                    raise
                code, interrupted = 130, True
                print(f"{tag} interrupted: waiting for {', '.join(n for n, _, _ in running.values())} to stop; the "
                      "later notebooks will not start (Ctrl-C again to stop waiting)", flush=True)  # fmt: skip
                continue
            for fut in finished:
                nb, t0, i = running.pop(fut)
                ended.add(nb)
                free.append(i)
                try:
                    print(_ok_line(tag, nb, t0, fut.result()), flush=True)
                except Exception as e:
                    line, outcome = _failed_notebook(tag, nb, e, time.time() - t0, out_dir / f"{nb}.ipynb", waiting)
                    print(line, flush=True)
                    if outcome == "interrupted":
                        code = 130
                        continue
                    failed += 1
                    code = code or int(outcome == "stopped")
    except KeyboardInterrupt:
        code = 130
    finally:
        for slot, kernel in zip(slots, warm):
            if kernel is not None:
                slot.submit(_stop, kernel)
            slot.shutdown(wait=code != 130, cancel_futures=False)
    if code == 130:
        if interrupted:  # (a kernel that saw the Ctrl-C first has said so in its line)
            print(f"{tag} interrupted; rerun the same command to resume (saved records and cached calls are kept)")
        return 130
    if failed:
        print(f"{tag} {failed} of {len(selected)} notebook(s) failed", flush=True)
    lines = failure_lines(name_of_profile, failed_records(since=t_start))
    lines += parse_failure_lines(name_of_profile, parse_failures(since=t_start))
    for line in lines:
        print(redact(line), flush=True)
    return 1 if failed or code or lines else 0


def _reads(needs: dict, name: str, other: str) -> bool:
    return "*" in needs.get(name, ()) or other in needs.get(name, ())


def _ok_line(tag: str, name: str, t0: float, nb) -> str:
    runs = parse_failures(since=t0)
    n, of = sum(a for a, _ in runs.values()), sum(b for _, b in runs.values())
    bad = sum(int((meta.get("summary") or {}).get("failed") or 0) for _, _, meta in _metas(since=t0))  # its count
    return (
        f"{tag} {name} {time.time() - t0:6.1f}s  {_last_summary(nb)}"
        + (f"  [WARNING: {bad} failed record(s), not counted in the tables; rerun to retry them]" if bad else "")
        + (f"  [{n} of {of} commitments did not parse ({100 * n / of:.0f}%)]" if n else "")
    )


def _whole_or_removed(out: Path, seconds: float, what: str = "full traceback") -> str:
    try:
        if out.stat().st_mtime >= time.time() - seconds - 1:  # else an earlier run's copy
            json.loads(out.read_bytes())
            return f"{what}: {_rel(out)}"
    except FileNotFoundError:
        pass
    except ValueError:  # truncated JSON
        out.unlink(missing_ok=True)
        return f"its executed copy {_rel(out)} could not be written whole and was removed"
    return "no executed copy was written"


def _failed_notebook(tag: str, name: str, e: BaseException, seconds: float, out: Path, rest: list) -> tuple[str, str]:
    """Its one line, and 'interrupted', 'stopped' (every later notebook would stop the same way) or 'failed'."""
    ename, evalue = getattr(e, "ename", type(e).__name__), getattr(e, "evalue", str(e))
    head, one = f"{tag} {name} FAILED after {seconds:.1f}s:", _one_line(ename, evalue)
    rest_line = f"\n    not started: {', '.join(rest)}" if rest else ""
    if getattr(e, "errno", None) == errno.ENOSPC or any(
        s in f"{ename} {evalue} {e}" for s in ("No space left on device", "disk is full")
    ):
        where = getattr(e, "filename", None)
        where = f"writing {_rel(Path(where))}" if where else f"on the disk holding {_rel(out.parents[2])}"
        return (f"{head} the disk is full (ENOSPC {where}): free space there and rerun the same command (saved "
                f"records are kept; {_whole_or_removed(out, seconds)}){rest_line}", "stopped")  # fmt: skip
    if ename == "DeadKernelError":
        return (f"{head} its kernel died (killed from outside, e.g. by the out-of-memory killer); saved records are "
                f"kept: rerun the same command; {_whole_or_removed(out, seconds, 'ran')}", "failed")  # fmt: skip
    if type(e).__name__ != "PapermillExecutionError":
        return f"{head} {one}; {_whole_or_removed(out, seconds)}", "failed"
    if ename in ("RunInterrupted", "KeyboardInterrupt"):  # the kernel saw the Ctrl-C first (outside a run: no words)
        said = one if str(evalue).strip() else "interrupted outside a run (its saved records are kept)"
        return f"{tag} {name} {said}; the later notebooks did not run", "interrupted"
    if ename in STOPPERS:
        return f"{tag} {name} stopped by {STOPPERS[ename]} after {seconds:.1f}s: {one}{rest_line}", "stopped"
    return f"{head} {one}\n    full traceback: {_rel(out)} (cell {getattr(e, 'exec_count', '?')})", "failed"


def _one_line(ename: str, evalue: str) -> str:
    limit = 1200 if ename in STOPPERS else 600  # a stopper says how to continue: keep it whole
    text = " ".join(str(evalue).split())
    return redact(f"{ename}: {text[:limit]}{' ...' if len(text) > limit else ''}")


def _rel(path: Path) -> str:
    return str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


def _last_summary(nb) -> str:
    """The executed notebook's (or its file's) last "SUMMARY:" line."""
    try:
        nb = json.loads(Path(nb).read_bytes()) if isinstance(nb, Path) else nb
        outs = [o.get("text", "") for c in nb["cells"] for o in c.get("outputs", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return NO_SUMMARY
    lines = [x for o in outs for x in ("".join(o) if isinstance(o, list) else str(o)).splitlines()]
    return next((x[len("SUMMARY:") :].strip() for x in reversed(lines) if x.startswith("SUMMARY:")), NO_SUMMARY)


class ProfileLock(RunLock):
    """One run per profile (agents/locks.py): a refusal is one line."""

    def __enter__(self) -> ProfileLock:
        try:
            super().__enter__()
        except LockRefused as e:
            raise SystemExit(str(e)) from None
        return self


@contextlib.contextmanager
def progress_tail(path: Path, prefix: str = "", poll: float = 1.0):
    """Print the whole lines the kernels append to `path` (health.emit) while the block runs."""
    pos, stop = 0, threading.Event()

    def flush() -> None:
        nonlocal pos
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
            f.seek(pos)
            whole = (chunk := f.read())[: chunk.rfind("\n") + 1]
            pos += len(whole.encode("utf-8"))
            for line in whole.splitlines():
                print(f"{prefix}{line}", flush=True)

    def loop() -> None:
        while not stop.wait(poll):
            flush()

    Path(path).write_text("")
    thread = threading.Thread(target=loop, name="acemad-progress-tail", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        flush()


def _metas(since: float):
    root = outputs("runs")
    for path in sorted(root.rglob("meta.json")):
        with contextlib.suppress(OSError, ValueError):
            if path.stat().st_mtime >= since - 1 and isinstance(meta := json.loads(path.read_text()), dict):
                yield path.parent, str(path.parent.relative_to(root)), meta


def failed_records(since: float) -> dict[str, list[dict]]:
    """name -> the current records of each run written since `since` that holds failed ones."""
    out = {}
    for _, name, meta in _metas(since):
        if (meta.get("summary") or {}).get("failed"):
            with contextlib.suppress(OSError, ValueError):  # a damaged run: its notebook has said so
                _, current = load_run(name, keep=lambda _n, _m, r: {k: r.get(k) for k in ("method", "status", "error")})
                if any(r.get("status") == "failed" for r in current):  # a retried failure is replaced, not counted
                    out[name] = current
    return out


def parse_failures(since: float) -> dict[str, tuple[int, int]]:
    """name -> (unparsed, commitments) of the runs written since `since`."""
    out = {}
    for _, name, meta in _metas(since):
        summary = meta.get("summary") or {}
        if isinstance(summary, dict) and (n := int(summary.get("parse_failures") or 0)):
            out[name] = (n, max(int(summary.get("commitments") or 0), n))
    return out


def parse_failure_lines(profile: str, runs: dict[str, tuple[int, int]]) -> list[str]:
    return [
        f"[{profile}] {name}: {n} of {of} commitments ({100 * n / of:.0f}%) did not parse after the repair call, "
        f"more than the {PARSE_FAILURE_LIMIT:.0%} a result may have: its tables measure no beliefs. Check the "
        "model's replies (commit_raw in the transcripts) and the MODEL / BASE_URL"
        for name, (n, of) in runs.items()
        if n > PARSE_FAILURE_LIMIT * of
    ]


def failure_lines(profile: str, runs: dict[str, list[dict]]) -> list[str]:
    rerun = "Rerun the same command once the endpoint is healthy"
    return [f"[{profile}] {name}: {failure_line(records, rerun)}" for name, records in runs.items()]


_GROUPS: set[int] = set()  # the running kernels' process groups
_GROUPS_LOCK = threading.Lock()


@functools.cache
def _kernel_manager():
    """A kernel manager remembering each kernel's process group: kernels run in sessions of their own, so a
    terminal's Ctrl-C reaches only the driver, and notebooks side by side run in threads that never see papermill's
    KeyboardInterrupt."""
    from jupyter_client.manager import AsyncKernelManager

    class InterruptibleKernelManager(AsyncKernelManager):
        async def _async_post_start_kernel(self, **kw) -> None:
            await super()._async_post_start_kernel(**kw)
            if pgid := getattr(self.provisioner, "pgid", None):
                with _GROUPS_LOCK:
                    _GROUPS.add(pgid)

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            with _GROUPS_LOCK:
                _GROUPS.discard(getattr(self.provisioner, "pgid", None))
            await super()._async_cleanup_resources(restart)

    return InterruptibleKernelManager


def interrupt_kernels() -> None:
    with _GROUPS_LOCK:
        groups = sorted(_GROUPS)
    for pgid in groups:
        with contextlib.suppress(OSError):  # a kernel that has just ended
            os.killpg(pgid, signal.SIGINT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # the first paragraph: whole sentences
    ap.add_argument("--profile", default="default", help="profile name in profiles/ or a path to a YAML file")
    ap.add_argument("--only", nargs="*", help="notebook names (e.g. 00_theory)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a parameter or run "
                    "setting for this run (VALUE is YAML), e.g. BASE_URL=http://127.0.0.1:8000/v1")  # fmt: skip
    ap.add_argument("--wait", action="store_true", help="wait for another run of this profile instead of exiting")
    ap.add_argument("--force", action="store_true", help="run every selected notebook, also those up to date")
    ap.add_argument("--jobs", type=int, help="notebooks at once (synthetic only; default: the profile's, else 1)")
    args = ap.parse_args(argv)
    overrides = ({} if args.jobs is None else {"jobs": args.jobs}) | parse_sets(args.set)
    return run(args.profile, args.only, overrides, wait=args.wait, force=args.force)
