"""Run experiments into transcripts: the single source of truth for every table and figure.

    path = run_experiment("theory_martingale", items, [cfg_a, cfg_b], population)
    meta, records = run_and_load("theory_martingale", items, [cfg_a, cfg_b], population)

outputs/runs/<name>/ holds transcripts.jsonl.gz and meta.json (run_files.py). Every question ends as a record, "ok"
or "failed" with its redacted "error"; an "ok" record on disk is never recomputed, so a stopped run resumes. Ctrl-C:
the first press starts no new question and saves those in flight; a second stops waiting for them (their calls land
in the response cache); either way `RunInterrupted` says "interrupted: N of M records saved; rerun to resume".
"""

from __future__ import annotations

import contextlib
import fcntl
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tqdm.auto import tqdm

from acemad_utils.agents.batch import BatchExported, Deferred
from acemad_utils.agents.budget import BudgetExceeded
from acemad_utils.agents.health import EndpointDown
from acemad_utils.agents.locks import run_lock
from acemad_utils.agents.redact import redact
from acemad_utils.data.benchmarks import data_hash
from acemad_utils.data.paths import progress_bars
from acemad_utils.data.transcripts import (
    TRANSCRIPTS,
    commitments,
    gc_paused,
    parse_line,
    read_meta,
    run_dir,
    write_questions,
)
from acemad_utils.experiments.run_files import (
    Appender,
    check_resumable,
    cut_torn_tail,
    failed_record,
    git_commit,
    order_keys,
    read_done,
    record_key,
    remove_stale_temp_files,
    summarize,
    usage_delta,
    with_usage_keys,
    write_canonical,
    write_meta,
)
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_batch, run_question
from acemad_utils.protocol.records import to_line
from acemad_utils.protocol.schema import USAGE_KEYS as STEP_USAGE_KEYS
from acemad_utils.protocol.schema import Population, Question, zero_usage


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C ended a run; str() is the one line to show."""


class BudgetStop(BudgetExceeded):
    """MAX_USD ended a run: no new paid call was sent, calls in flight finished (and are cached); str() says what
    was spent and how to continue."""


class _Interrupts:
    """SIGINT presses: the first only sets a flag; a second raises KeyboardInterrupt, never while a line is written."""

    def __init__(self):
        self.presses = 0
        self.saving = False

    def _handler(self, signum, frame):
        self.presses += 1
        if self.presses >= 2 and not self.saving:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self):
        try:
            old = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread: signals cannot reach us here anyway
            yield self
            return
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, old)


#: What the summary reads of a record saved in this session; the rest is only in its line (never held twice).
SUMMARY_FIELDS = ("question_id", "config_hash", "repeat", "method", "status", "final", "usage", "error")
#: Debates per batch: numpy's per-call overhead small, a Ctrl-C answered within a second. Records do not depend on it.
BATCH = 1024


@dataclass
class _Run:
    """One run_experiment call: what to run, what is saved, and why it stopped (if it did)."""

    name: str
    questions: Sequence[Question]
    configs: Sequence[DebateConfig]
    population: Population
    repeats: int
    workers: Optional[int]
    progress: bool
    meta: dict
    dir: Path
    done: dict  # record key -> (record, line): ok ones read back, and (SUMMARY_FIELDS view, line) saved now
    todo: list  # (question, config, repeat) still to run in this pass
    usage_before: Optional[dict]
    stop: _Interrupts = field(default_factory=_Interrupts)
    over_budget: list = field(default_factory=list)  # a BudgetExceeded (MAX_USD) or EndpointDown (circuit breaker)
    waiting: list = field(default_factory=list)  # CALLS_VIA batch: questions waiting for a queued call (Deferred)
    exported: list = field(default_factory=list)  # CALLS_VIA files: the BatchExported that ended the pass loop
    lock: Any = field(default_factory=threading.Lock)
    totals: dict = field(default_factory=lambda: {**zero_usage(), "failed": 0})  # for the progress bar
    bar: Any = None
    out: Optional[Appender] = None
    fresh: set = field(default_factory=set)  # keys of records saved by this process (not read back)
    final: list = field(default_factory=list)  # every key in the file's final order


def _open_run(name, questions, configs, population, repeats, workers, profile, progress, extra_meta) -> _Run:
    """Check the inputs, write meta.json, read what is saved already (resume) and list what is left to run."""
    labels = [c.label for c in configs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"two configs share a label in experiment {name!r}: {labels}; give one a name=")
    seen: dict[str, int] = {}
    for i, q in enumerate(questions):  # records are keyed by question id: a repeat would overwrite, not add
        if q.id in seen:
            raise ValueError(
                f"experiment {name!r}: question id {q.id!r} is at positions {seen[q.id]} and {i} of the "
                "question list; each question may appear once (use repeats= to run one several times)"
            )
        seen[q.id] = i
    d = run_dir(name)
    meta = {
        "experiment": name,
        "profile": profile,
        "synthetic": bool(population.synthetic),
        "population": population.describe(),
        "methods": {c.label: dict(c.to_dict(), config_hash=c.hash) for c in configs},
        "repeats": repeats,
        "n_questions": len(questions),
        "benchmarks": sorted({q.benchmark for q in questions}),
        "data_hash": data_hash(questions),
        "git_commit": git_commit(),
        **(extra_meta or {}),
    }
    check_resumable(d, meta)
    remove_stale_temp_files(d)  # left by a process killed mid-write (we hold the run's lock: no writer is alive)
    cut_torn_tail(d / TRANSCRIPTS)
    done = read_done(d / TRANSCRIPTS)  # before meta.json is rewritten: a damaged file leaves the old summary
    write_meta(d / "meta.json", meta)
    write_questions(d, questions)  # the viewer shows each question's text and options above its debate
    usage_before = population.usage() if callable(getattr(population, "usage", None)) else None
    todo = [(q, c, r) for c in configs for q in questions for r in range(repeats) if (q.id, c.hash, r) not in done]
    return _Run(name, questions, configs, population, repeats, workers, progress, meta, d, done, todo, usage_before)


def _answer(run: _Run, job) -> Optional[dict]:
    """One question of one method: its record, a failed record, or None when it did not run to an end."""
    if run.stop.presses or run.over_budget:  # questions not started yet are left for the resume
        return None
    q, c, r = job
    try:
        return with_usage_keys(run_question(q, run.population, c, r))
    except (BudgetExceeded, EndpointDown) as err:  # not this question's failure: stop starting questions
        run.over_budget.append(err)
        return None
    except Deferred:  # its next call is queued for a batch: the question waits, it has not failed
        with run.lock:
            run.waiting.append(job)
        return None
    except Exception as err:  # a failed question is recorded with its reason and retried on resume
        return None if run.stop.presses else failed_record(q, c, run.population, r, err)


def _save(run: _Run, recs: Sequence[Optional[dict]]) -> None:
    """Append records' lines, whole (a second Ctrl-C waits for them), and count them on the progress bar."""
    recs = [r for r in recs if r is not None]
    if not recs:
        return
    lines = [to_line(rec) for rec in recs]
    with run.lock:
        run.stop.saving = True
        try:
            assert run.out is not None  # opened by the pass that runs this question
            run.out.write_many(lines)
            for rec, line in zip(recs, lines):
                view = {k: rec[k] for k in SUMMARY_FIELDS if k in rec}
                view["commitments"] = commitments(rec)  # the summary's parse-failure base (rounds are not kept)
                run.done[record_key(rec)] = (view, line)
                run.fresh.add(record_key(rec))
        finally:
            run.stop.saving = False
        t = run.totals
        for rec in recs:
            for k in STEP_USAGE_KEYS:
                t[k] += rec.get("usage", {}).get(k, 0)
            t["failed"] += rec["status"] != "ok"
        run.bar.update(len(recs))
        tokens = t["prompt_tokens"] + t["completion_tokens"]
        run.bar.set_postfix(calls=t["calls"], hits=t["cache_hits"], tok=tokens, failed=t["failed"], refresh=False)


def _run_in_threads(run: _Run) -> None:
    """Questions in a thread pool (populations that do I/O; the client bounds the calls in flight)."""
    ex = ThreadPoolExecutor(max_workers=run.workers, thread_name_prefix="question")
    try:
        pending = {ex.submit(_answer, run, j) for j in run.todo}
        announced = False
        while pending:
            # a short timeout so a Ctrl-C is noticed while every worker is busy
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for fut in finished:
                _save(run, [fut.result()])
            if run.stop.presses >= 2:
                raise KeyboardInterrupt
            if run.stop.presses and not announced:
                announced = True
                n = sum(fu.running() for fu in pending)
                msg = f"interrupt: finishing {n} question(s) in flight, then stopping (Ctrl-C again to stop now)"
                print(redact(msg), file=sys.stderr, flush=True)
    finally:
        ex.shutdown(wait=not run.stop.presses, cancel_futures=True)


def _run_here(run: _Run) -> None:
    """In this thread: a batched population's questions as arrays of BATCH debates per config (a batch that raises
    is recorded as failed, question by question), any other's one after the other."""
    if not getattr(run.population, "batched", False):
        for job in run.todo:
            if run.stop.presses or run.over_budget:
                return
            _save(run, [_answer(run, job)])
        return
    by_config: dict[str, list[tuple]] = {}
    for job in run.todo:
        by_config.setdefault(job[1].hash, []).append(job)
    for jobs in by_config.values():
        for start in range(0, len(jobs), BATCH):
            if run.stop.presses:
                return
            part = jobs[start : start + BATCH]
            try:
                recs = [
                    with_usage_keys(r)
                    for r in run_batch([j[0] for j in part], run.population, part[0][1], [j[2] for j in part])
                ]
            except Exception as err:
                recs = [failed_record(q, c, run.population, r, err) for q, c, r in part]
            _save(run, recs)


def _run_passes(run: _Run) -> None:
    """Run every question left. CALLS_VIA batch: a pass runs each question until its first call not cached yet
    (queued: it waits); the queue goes out as one batch, and the waiting questions run again, until none waits."""
    pop = run.population
    concurrent = getattr(pop, "concurrent", not pop.synthetic) and (run.workers or 1) > 1
    batcher = getattr(pop, "batcher", None)
    while True:
        run.waiting.clear()
        try:
            if concurrent:
                _run_in_threads(run)
            else:  # CPU-bound: the collector would rescan the growing set of saved records
                with gc_paused():
                    _run_here(run)
            if not run.waiting or run.stop.presses or run.over_budget or batcher is None:
                return
            batcher.flush(should_stop=lambda: bool(run.stop.presses), progress=run.progress)
        except KeyboardInterrupt:
            run.stop.presses = max(run.stop.presses, 2)
        except BudgetExceeded as err:
            run.over_budget.append(err)
        except BatchExported as err:  # CALLS_VIA files: the queue is on disk for another runner
            run.exported.append(err)
        if run.stop.presses or run.over_budget or run.exported:
            return
        run.todo = list(run.waiting)


def _finish(run: _Run) -> None:
    """Write the summary to meta.json. Complete: the records whole, compressed, in canonical order (configs, then
    questions as given, repeats ascending). Stopped early: the file holds whole records; raise the one-line reason."""
    order = {k: i for i, k in enumerate(order_keys(run.questions, run.configs, run.repeats))}
    ours = sorted((k for k in run.done if k in order), key=order.__getitem__)
    run.final = ours + [k for k in run.done if k not in order]  # the file's order: every other ok record after ours
    pressed = bool(run.stop.presses)
    down = [e for e in run.over_budget if isinstance(e, EndpointDown)]
    why = "circuit breaker" if down else "MAX_USD" if run.over_budget else "batch export" if run.exported else None
    stopped = pressed or why is not None
    if stopped:
        records = [rec for k, (rec, _) in run.done.items() if k in order]
    else:
        write_canonical(run.dir / TRANSCRIPTS, run.done, run.final)
        records = [run.done[k][0] for k in ours]
    summary = summarize(records, expected=len(order))
    if run.usage_before is not None:  # what this session spent (also the calls of questions that failed)
        summary["session"] = usage_delta(run.population.usage(), run.usage_before)  # type: ignore[attr-defined]
    if stopped:
        summary["interrupted"] = True
        if why and not pressed:
            summary["stopped_by"] = why
    run.meta["summary"] = summary
    write_meta(run.dir / "meta.json", run.meta)
    saved = f"{summary['records']} of {summary['expected']} records saved"
    if pressed:
        raise RunInterrupted(f"interrupted: {saved}; rerun to resume") from None
    if not stopped:
        return
    if down:
        raise EndpointDown(f"{down[0]} (run {run.name!r}: {saved})") from None
    if run.over_budget:
        raise BudgetStop(
            f"{run.over_budget[0]}. Run {run.name!r} stopped: {saved}, calls in flight finished and cached. To "
            "continue, raise MAX_USD (profile key max_usd: or the ACEMAD_MAX_USD variable) and rerun: every paid "
            "reply is cached, so the part already paid for costs nothing again."
        ) from None
    raise BatchExported(f"run {run.name!r}: {saved}; {run.exported[0]}") from None


@contextlib.contextmanager
def _folder_lock(d: Path):
    """One writer per run folder: two notebooks side by side may ask for the same run (a challenging subset neither
    has yet); the second waits here, then resumes the first's records."""
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".writer.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, also when this process dies
        yield


def _run(name, questions, configs, population, repeats=1, workers=None, profile="default", progress=True,
         extra_meta=None) -> _Run:  # fmt: skip
    """Everything run_experiment does, under the run's locks (agents/locks.py: a notebook run by hand while the
    reproduce driver runs the same profile refuses with one line instead of paying for the calls twice)."""
    with run_lock(name, llm=not population.synthetic), _folder_lock(run_dir(name)):
        run = _open_run(name, questions, configs, population, repeats, workers, profile, progress, extra_meta)
        shown = progress and run.todo and progress_bars()
        run.bar = tqdm(total=len(run.todo), desc=name, disable=not shown, unit="q", smoothing=0.05)
        with run.stop.installed():
            run.out = Appender(run.dir / TRANSCRIPTS) if run.todo else None
            try:
                _run_passes(run)
            finally:
                if run.out is not None:
                    run.out.close()
        run.bar.close()
        _finish(run)
        return run


def run_experiment(name: str, questions: Sequence[Question], configs: Sequence[DebateConfig], population, **kw) -> Path:
    """Run every config on every question and save transcripts; returns the run directory. kw: repeats (1), workers
    (questions in threads when the population does I/O), profile, progress, extra_meta (added to meta.json)."""
    return _run(name, questions, configs, population, **kw).dir


def run_and_load(name: str, questions: Sequence[Question], configs: Sequence[DebateConfig], population, **kw):
    """run_experiment's run, then what load_run(name) returns: (meta, records), without parsing the records that
    were read from the file when the run started a second time."""
    run = _run(name, questions, configs, population, **kw)
    meta = read_meta(run.dir / "meta.json")
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    with gc_paused():
        records = [
            parse_line(run.done[k][1]) if k in run.fresh else run.done[k][0] for k in run.final if k[1] in hashes
        ]
    return meta, records
