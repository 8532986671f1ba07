"""Run experiments into transcripts: the single source of truth for every table and figure.

    from acemad_utils.experiments.runner import run_experiment, load_run
    path = run_experiment("theory_martingale", items, [cfg_a, cfg_b], population)
    meta, records = load_run("theory_martingale")

Layout: outputs/runs/<name>/transcripts.jsonl (one JSON record per question x method x repeat) and
meta.json (population/model, methods and their parameters, seed, data hash, git commit, and at the end of
every run_experiment a `summary`, see `summarize`).

Every question ends as a record: status "ok", or status "failed" with its "error" (redacted of secrets) and
`final.correct = False`; failed records are retried when the run is resumed.

Resumable: a record already on disk (same question, method config hash and repeat, status "ok") is never
recomputed, so an interrupted run continues where it stopped. How the files are written so that this
holds (whole lines, torn tails dropped, a canonical rewrite at the end) is runner_files.py; this module is
the run loop: which questions run, in how many threads, and how a run stops.

Ctrl-C (SIGINT, when run_experiment runs in the main thread): the first press starts no new question and
lets the questions in flight finish and be saved (a line on stderr says how many); a second press stops
waiting for them (their calls still finish in the background and land in the response cache, so the resume
gets them free; the process exits once they have). Records are only ever written between presses, whole:
no torn line. meta.json then gets a `summary` with "interrupted": true, and run_experiment raises
`RunInterrupted` (a KeyboardInterrupt) whose message is the one line "interrupted: N of M records saved;
rerun to resume". No thread prints a traceback. Command-line entry points print that message and exit 130.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Optional

from tqdm.auto import tqdm

from acemad_utils.agents.batch import BatchExported, Deferred
from acemad_utils.agents.budget import BudgetExceeded
from acemad_utils.agents.redact import redact
from acemad_utils.data.benchmarks import data_hash
from acemad_utils.data.paths import progress_bars
from acemad_utils.data.transcripts import load_run, read_jsonl, run_dir  # noqa: F401 (load_run, read_jsonl: this module's public face)
from acemad_utils.experiments.run_files import (
    check_resumable,
    cut_torn_tail,
    failed_record,
    git_commit,
    is_record,
    order_keys,
    read_jsonl,
    record_key,
    summarize,
    usage_delta,
    with_usage_keys,
    write_canonical,
    write_line,
    write_meta,
)
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.protocol.schema import RECORD_USAGE_KEYS, Population, Question, zero_usage
from acemad_utils.protocol.schema import USAGE_KEYS as STEP_USAGE_KEYS

from acemad_utils.experiments.run_files import cut_torn_tail as _cut_torn_tail  # noqa: E402,F401
from acemad_utils.experiments.run_files import identity as _identity  # noqa: E402,F401


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C ended a run; str() is the one line to show ("interrupted: N of M records saved; rerun to resume")."""


class BudgetStop(BudgetExceeded):
    """MAX_USD ended a run: no new paid call was sent, calls in flight finished (and are cached), questions
    not finished are left for a resume. str() is the one message to show: what was spent and how to continue."""


class _Interrupts:
    """SIGINT presses during a run. The handler never raises while a record is being written (`saving`), so a
    line is always written whole; the first press only sets a flag (the run stops starting questions), a
    second one outside a write raises KeyboardInterrupt to stop waiting."""

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


def _notice(line: str) -> None:
    print(redact(line), file=sys.stderr, flush=True)


def run_experiment(
    name: str,
    questions: Sequence[Question],
    configs: Sequence[DebateConfig],
    population: Population,
    repeats: int = 1,
    workers: Optional[int] = None,
    profile: str = "default",
    progress: bool = True,
    extra_meta: Optional[dict] = None,
) -> Path:
    """Run every config on every question (x repeats) and save transcripts; returns the run directory.

    workers: questions run concurrently (threads) when the population does I/O; synthetic runs are
    sequential (pure numpy, the GIL would make threads slower).
    """
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
    meta_path, tr_path = d / "meta.json", d / "transcripts.jsonl"
    check_resumable(d, meta)
    write_meta(meta_path, meta)

    usage_before = population.usage() if callable(getattr(population, "usage", None)) else None
    cut_torn_tail(tr_path)
    done = {record_key(r): r for r in read_jsonl(tr_path) if is_record(r) and r.get("status") == "ok"}
    todo = [(q, c, r) for c in configs for q in questions for r in range(repeats) if (q.id, c.hash, r) not in done]
    lock = threading.Lock()
    totals = {**zero_usage(), "failed": 0}  # for the progress bar

    stop = _Interrupts()
    over_budget: list = []  # the first BudgetExceeded: MAX_USD reached, stop starting questions
    waiting: list = []  # CALLS_VIA batch: questions waiting for a queued call (Deferred), run again after the batch
    batcher = getattr(population, "batcher", None)
    exported: list = []  # CALLS_VIA files: the BatchExported that ended the pass loop

    def one(job):
        if stop.presses or over_budget:  # Ctrl-C or MAX_USD: questions not started yet are left for the resume
            return None
        q, c, r = job
        try:
            return with_usage_keys(run_question(q, population, c, r))
        except BudgetExceeded as err:  # not a failure of the question: its paid calls are cached, resume it later
            over_budget.append(err)
            return None
        except Deferred:  # its next call is queued for a batch: the question waits, it has not failed
            with lock:
                waiting.append(job)
            return None
        except Exception as err:  # a failed question is recorded with its reason and retried on resume
            if stop.presses:
                return None  # cut short by the interrupt, not a failure of its own
            return failed_record(q, c, population, r, err)

    show = progress and bool(todo) and progress_bars()
    bar = tqdm(total=len(todo), desc=name, disable=not show, unit="q", smoothing=0.05)
    with stop.installed(), open(tr_path, "a", encoding="utf-8") as f:

        def save(rec):
            if rec is None:
                return
            with lock:
                stop.saving = True  # a second Ctrl-C waits until the line is on disk
                try:
                    write_line(f, rec)
                    done[record_key(rec)] = rec
                finally:
                    stop.saving = False
                for k in STEP_USAGE_KEYS:
                    totals[k] += rec.get("usage", {}).get(k, 0)
                totals["failed"] += rec["status"] != "ok"
                bar.update(1)
                bar.set_postfix(
                    calls=totals["calls"],
                    hits=totals["cache_hits"],
                    tok=totals["prompt_tokens"] + totals["completion_tokens"],
                    failed=totals["failed"],
                    refresh=False,
                )

        # Populations that do I/O (LLMs) run questions in threads; the client bounds the calls in flight.
        concurrent = getattr(population, "concurrent", not population.synthetic) and (workers or 1) > 1
        # CALLS_VIA batch: a pass runs every question until its first call that is not cached yet (queued,
        # the question waits); the queue goes out as one batch, its replies land in the cache, and the waiting
        # questions run again, until none waits (batch.py). Synchronous populations make exactly one pass.
        while True:
            waiting.clear()
            try:
                if concurrent:
                    ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="question")
                    try:
                        pending = {ex.submit(one, j) for j in todo}
                        announced = False
                        while pending:
                            # a short timeout so a Ctrl-C is noticed while every worker is busy
                            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                            for fut in finished:
                                save(fut.result())
                            if stop.presses >= 2:
                                raise KeyboardInterrupt
                            if stop.presses and not announced:
                                announced = True
                                running = sum(fu.running() for fu in pending)
                                _notice(
                                    f"interrupt: finishing {running} question(s) in flight, then stopping "
                                    "(Ctrl-C again to stop now)"
                                )
                    finally:
                        ex.shutdown(wait=not stop.presses, cancel_futures=True)
                else:
                    for job in todo:
                        if stop.presses or over_budget:
                            break
                        save(one(job))
            except KeyboardInterrupt:
                stop.presses = max(stop.presses, 2)
            if not waiting or stop.presses or over_budget or batcher is None:
                break
            try:
                batcher.flush(should_stop=lambda: bool(stop.presses), progress=progress)
            except BudgetExceeded as err:
                over_budget.append(err)
                break
            except BatchExported as err:  # CALLS_VIA files: the queue is on disk for another runner
                exported.append(err)
                break
            except KeyboardInterrupt:
                stop.presses = max(stop.presses, 2)
                break
            if stop.presses:
                break
            todo = list(waiting)
    bar.close()

    if stop.presses or over_budget or exported:  # the file holds whole records only; say what is there, stop the caller
        keys = set(order_keys(questions, configs, repeats))
        summary = summarize([rec for k, rec in done.items() if k in keys], expected=len(keys))
        summary["interrupted"] = True
        if usage_before is not None:
            summary["session"] = usage_delta(population.usage(), usage_before)
        if over_budget and not stop.presses:
            summary["stopped_by"] = "MAX_USD"
        elif exported and not stop.presses:
            summary["stopped_by"] = "batch export"
        meta["summary"] = summary
        write_meta(meta_path, meta)
        if over_budget and not stop.presses:
            raise BudgetStop(
                f"{over_budget[0]}. Run {name!r} stopped: {summary['records']} of {summary['expected']} "
                "records saved, calls in flight finished and cached. To continue, raise MAX_USD (profile "
                "key max_usd: or the ACEMAD_MAX_USD variable) and rerun: every paid reply is cached, so "
                "the part already paid for costs nothing again."
            ) from None
        if exported and not stop.presses:
            raise BatchExported(
                f"run {name!r}: {summary['records']} of {summary['expected']} records saved; {exported[0]}"
            ) from None
        raise RunInterrupted(
            f"interrupted: {summary['records']} of {summary['expected']} records saved; rerun to resume"
        ) from None

    # Canonical order: configs as given, questions as given, repeats ascending (the latest record per key).
    keys = order_keys(questions, configs, repeats)
    ours = write_canonical(tr_path, done, keys)

    # The summary: counts over this run's records (all sessions), plus what this session spent (the client's
    # own counters, which also include the calls of questions that failed).
    summary = summarize(ours, expected=len(set(keys)))
    if usage_before is not None:
        summary["session"] = usage_delta(population.usage(), usage_before)
    meta["summary"] = summary
    write_meta(meta_path, meta)
    return d
