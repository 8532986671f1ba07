"""Run experiments into transcripts: the single source of truth for every table and figure.

    from acemad_utils.data.transcripts import load_run
    from acemad_utils.experiments.runner import run_experiment
    path = run_experiment("theory_martingale", items, [cfg_a, cfg_b], population)
    meta, records = load_run("theory_martingale")

Layout: outputs/runs/<name>/transcripts.jsonl.gz (one JSON record per question x method x repeat; lines of a
session that has not completed are appended to transcripts.jsonl beside it, see run_files.py) and
meta.json (population/model, methods and their parameters, seed, data hash, git commit, and at the end of
every run_experiment a `summary`, see `summarize`).

Every question ends as a record: status "ok", or status "failed" with its "error" (redacted of secrets) and
`final.correct = False`; failed records are retried when the run is resumed.

Resumable: a record already on disk (same question, method config hash and repeat, status "ok") is never
recomputed, so an interrupted run continues where it stopped. How the files are written so that this
holds (whole lines, torn tails dropped, a canonical compressed file at the end) is run_files.py; this module is
the run loop: which questions run, in how many threads, and how a run stops. Its steps: `_open_run` (check the
inputs, write meta.json, read what is saved, list what is left) -> `_run_passes` (`_run_in_order` or
`_run_in_threads`, each question `_answer`ed and `_save`d; `_run_in_batches` for a batched population, a batch
of debates of one config at a time; batch-API passes) -> `_end_complete` or `_end_stopped`; the state they
share is one `_Run`. Everything runs in this process: the synthetic population's rounds are arrays
(protocol.debate), so no worker process is needed to keep up.

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
from acemad_utils.data.paths import outputs_root, progress_bars
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


def _check_inputs(name: str, questions: Sequence[Question], configs: Sequence[DebateConfig]) -> None:
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


def _run_meta(
    name: str, questions: Sequence[Question], configs: Sequence[DebateConfig], population: Population, **kw
) -> dict:
    """meta.json of a run: who answers which questions with which methods (kw: repeats, profile, extra)."""
    return {
        "experiment": name,
        "profile": kw["profile"],
        "synthetic": bool(population.synthetic),
        "population": population.describe(),
        "methods": {c.label: dict(c.to_dict(), config_hash=c.hash) for c in configs},
        "repeats": kw["repeats"],
        "n_questions": len(questions),
        "benchmarks": sorted({q.benchmark for q in questions}),
        "data_hash": data_hash(questions),
        "git_commit": git_commit(),
        **(kw["extra"] or {}),
    }


@dataclass
class _Run:
    """The state of one run_experiment call: what to run, what is saved, and why it stopped (if it did)."""

    name: str
    questions: Sequence[Question]
    configs: Sequence[DebateConfig]
    population: Population
    repeats: int
    workers: Optional[int]
    progress: bool
    meta: dict
    dir: Path
    done: dict  # record key -> (record, line) of the file: ok ones read back, and (SUMMARY_FIELDS, line) saved now
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
    fresh: set = field(default_factory=set)  # keys of records saved by this process as objects (not read back)

    @property
    def stopped(self) -> bool:
        return bool(self.stop.presses or self.over_budget or self.exported)


def _open_run(name, questions, configs, population, *, repeats, workers, profile, progress, extra_meta) -> _Run:
    """Check the inputs, write meta.json, read what is saved already (resume) and list what is left to run."""
    _check_inputs(name, questions, configs)
    d = run_dir(name)
    meta = _run_meta(name, questions, configs, population, repeats=repeats, profile=profile, extra=extra_meta)
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
    """One question of one method: its record, a failed record, or None when it did not run to an end
    (Ctrl-C, MAX_USD, or waiting for a batch)."""
    if run.stop.presses or run.over_budget:  # Ctrl-C or MAX_USD: questions not started yet are left for the resume
        return None
    q, c, r = job
    try:
        return with_usage_keys(run_question(q, run.population, c, r))
    except (BudgetExceeded, EndpointDown) as err:  # not this question's failure: stop starting questions
        run.over_budget.append(err)  # (MAX_USD: its paid calls are cached; a tripped breaker: the endpoint is down)
        return None
    except Deferred:  # its next call is queued for a batch: the question waits, it has not failed
        with run.lock:
            run.waiting.append(job)
        return None
    except Exception as err:  # a failed question is recorded with its reason and retried on resume
        if run.stop.presses:
            return None  # cut short by the interrupt, not a failure of its own
        return failed_record(q, c, run.population, r, err)


def _save(run: _Run, rec: Optional[dict]) -> None:
    """Append a record made in this process, whole (a second Ctrl-C waits for it); see _save_lines."""
    if rec is not None:
        _save_lines(run, [rec], [to_line(rec)])


#: What the run's summary (run_files.summarize) and its end read of a record saved in this session; the rest is
#: only in its line (run_and_load parses the lines: a record made here is never held twice, 1 GB for notebook 06).
SUMMARY_FIELDS = ("question_id", "config_hash", "repeat", "method", "status", "final", "usage", "error")


def _save_lines(run: _Run, recs: Sequence[dict], lines: Sequence[str]) -> None:
    """Append records' lines, whole (a second Ctrl-C waits for them), and count them on the progress bar once."""
    with run.lock:
        run.stop.saving = True
        try:
            assert run.out is not None  # opened by the pass that runs this question
            run.out.write_many(lines)
            for rec, line in zip(recs, lines):  # the line holds the record; what the summary reads is kept beside it
                view = {k: rec[k] for k in SUMMARY_FIELDS if k in rec}
                view["commitments"] = commitments(rec)  # the summary's parse-failure base (rounds are not kept)
                run.done[record_key(rec)] = (view, line)
                run.fresh.add(record_key(rec))
        finally:
            run.stop.saving = False
        for rec in recs:
            usage = rec.get("usage", {})
            for k in STEP_USAGE_KEYS:
                run.totals[k] += usage.get(k, 0)
            run.totals["failed"] += rec["status"] != "ok"
        run.bar.update(len(recs))
        t = run.totals
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
                _save(run, fut.result())
            if run.stop.presses >= 2:
                raise KeyboardInterrupt
            if run.stop.presses and not announced:
                announced = True
                running = sum(fu.running() for fu in pending)
                _notice(
                    f"interrupt: finishing {running} question(s) in flight, then stopping (Ctrl-C again to stop now)"
                )
    finally:
        ex.shutdown(wait=not run.stop.presses, cancel_futures=True)


def _run_in_order(run: _Run) -> None:
    """Questions one after the other in this thread (a synthetic population: pure numpy, threads only slow it)."""
    for job in run.todo:
        if run.stop.presses or run.over_budget:
            break
        _save(run, _answer(run, job))


# ----------------------------------------------------------------------------- batched populations: arrays
#: Debates per batch of a batched population (protocol.debate): large enough that numpy's per-call overhead
#: is small beside the arrays' work, small enough that a Ctrl-C waits for a fraction of a second. The records do
#: not depend on it (every draw is keyed by its debate: agents.streams).
BATCH = 1024


def _answer_batch(run: _Run, jobs: Sequence[tuple]) -> list[dict]:
    """The records of jobs (question, config, repeat) of one config, answered as one batch of arrays. A batch
    that raises is recorded as failed, question by question, with its reason (retried on resume)."""
    cfg = jobs[0][1]
    try:
        recs = run_batch([q for q, _, _ in jobs], run.population, cfg, [r for _, _, r in jobs])
    except Exception as err:
        return [failed_record(q, c, run.population, r, err) for q, c, r in jobs]
    return [with_usage_keys(rec) for rec in recs]


def _run_in_batches(run: _Run) -> None:
    """Each config's questions in batches of BATCH debates, in this process (protocol.debate: a round of a
    whole batch is a few numpy calls, so one process keeps up; no worker to fork, stop or keep in step)."""
    by_config: dict[str, list[tuple]] = {}
    for job in run.todo:
        by_config.setdefault(job[1].hash, []).append(job)
    for jobs in by_config.values():
        for start in range(0, len(jobs), BATCH):
            if run.stop.presses:
                return
            recs = _answer_batch(run, jobs[start : start + BATCH])
            _save_lines(run, recs, [to_line(rec) for rec in recs])


def _run_passes(run: _Run) -> None:
    """Run every question left. CALLS_VIA batch: a pass runs every question until its first call that is not
    cached yet (queued, the question waits); the queue goes out as one batch, its replies land in the cache,
    and the waiting questions run again, until none waits (batch.py). Synchronous populations make one pass."""
    pop = run.population
    concurrent = getattr(pop, "concurrent", not pop.synthetic) and (run.workers or 1) > 1
    batcher = getattr(pop, "batcher", None)
    while True:
        run.waiting.clear()
        try:
            if concurrent:
                _run_in_threads(run)
            else:  # CPU-bound: the collector would rescan the growing set of saved records (gc_paused)
                with gc_paused():
                    _run_in_batches(run) if getattr(pop, "batched", False) else _run_in_order(run)
        except KeyboardInterrupt:
            run.stop.presses = max(run.stop.presses, 2)
        if not run.waiting or run.stop.presses or run.over_budget or batcher is None:
            return
        try:
            batcher.flush(should_stop=lambda: bool(run.stop.presses), progress=run.progress)
        except BudgetExceeded as err:
            run.over_budget.append(err)
            return
        except BatchExported as err:  # CALLS_VIA files: the queue is on disk for another runner
            run.exported.append(err)
            return
        except KeyboardInterrupt:
            run.stop.presses = max(run.stop.presses, 2)
            return
        if run.stop.presses:
            return
        run.todo = list(run.waiting)


def _summary(run: _Run, records: Sequence[dict], expected: int) -> dict:
    """Counts over this run's records (all sessions), plus what this session spent (the client's own counters,
    which also include the calls of questions that failed)."""
    summary = summarize(records, expected=expected)
    if run.usage_before is not None:
        summary["session"] = usage_delta(run.population.usage(), run.usage_before)  # type: ignore[attr-defined]  # LLM populations only (usage_before is None otherwise)
    return summary


def _end_stopped(run: _Run) -> None:
    """The run stopped early (Ctrl-C, MAX_USD, a batch export): the file holds whole records only; say in
    meta.json what is there and raise the one-line exception that stops the caller."""
    keys = set(order_keys(run.questions, run.configs, run.repeats))
    summary = _summary(run, [rec for k, (rec, _) in run.done.items() if k in keys], len(keys))
    summary["interrupted"] = True
    pressed = bool(run.stop.presses)
    down = [e for e in run.over_budget if isinstance(e, EndpointDown)]
    if down and not pressed:
        summary["stopped_by"] = "circuit breaker"
    elif run.over_budget and not pressed:
        summary["stopped_by"] = "MAX_USD"
    elif run.exported and not pressed:
        summary["stopped_by"] = "batch export"
    run.meta["summary"] = summary
    write_meta(run.dir / "meta.json", run.meta)
    saved = f"{summary['records']} of {summary['expected']} records saved"
    if down and not pressed:
        raise EndpointDown(f"{down[0]} (run {run.name!r}: {saved})") from None
    if run.over_budget and not pressed:
        raise BudgetStop(
            f"{run.over_budget[0]}. Run {run.name!r} stopped: {saved}, calls in flight finished and cached. To "
            "continue, raise MAX_USD (profile key max_usd: or the ACEMAD_MAX_USD variable) and rerun: every paid "
            "reply is cached, so the part already paid for costs nothing again."
        ) from None
    if run.exported and not pressed:
        raise BatchExported(f"run {run.name!r}: {saved}; {run.exported[0]}") from None
    raise RunInterrupted(f"interrupted: {saved}; rerun to resume") from None


def _end_complete(run: _Run) -> None:
    """Canonical order (configs as given, questions as given, repeats ascending; the latest record per key),
    compressed, and the summary in meta.json."""
    keys = order_keys(run.questions, run.configs, run.repeats)
    ours = write_canonical(run.dir / TRANSCRIPTS, run.done, keys)
    run.meta["summary"] = _summary(run, ours, len(set(keys)))
    write_meta(run.dir / "meta.json", run.meta)


def _run(name, questions, configs, population, **kw) -> _Run:
    """Everything run_experiment does, under the run's lock (agents/locks.py: a notebook run by hand while the
    reproduce driver runs the same profile refuses with one line instead of paying for the calls twice)."""
    with run_lock(name, llm=not population.synthetic), _folder_lock(run_dir(name)):
        return _run_locked(name, questions, configs, population, **kw)


@contextlib.contextmanager
def _folder_lock(d: Path):
    """One writer per run folder. The profile's lock admits every kernel of the driver that holds it, and two
    notebooks side by side can ask for the same run (a challenging subset neither has yet): the second waits here,
    then resumes the first's records, and neither sweeps away the other's temp files (remove_stale_temp_files)."""
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".writer.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, also when this process dies
        yield


def _run_locked(name, questions, configs, population, **kw) -> _Run:
    """Everything run_experiment does; returns the finished run's state (kw: run_experiment's keywords)."""
    run = _open_run(name, questions, configs, population, **kw)
    run.bar = tqdm(
        total=len(run.todo),
        desc=name,
        disable=not (run.progress and run.todo and progress_bars()),
        unit="q",
        smoothing=0.05,
    )
    with run.stop.installed():
        run.out = Appender(run.dir / TRANSCRIPTS) if run.todo else None
        try:
            _run_passes(run)
        finally:
            if run.out is not None:
                run.out.close()
    run.bar.close()
    if run.stopped:
        _end_stopped(run)
    _end_complete(run)
    return run


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
    root: Optional[Path] = None,
) -> Path:
    """Run every config on every question (x repeats) and save transcripts; returns the run directory.

    workers: questions run concurrently (threads) when the population does I/O; synthetic runs are
    sequential (pure numpy, the GIL would make threads slower).
    root: the outputs folder (runs/<name>/ is made under it); None: the repository's outputs/ (notebooks).
    """
    kw = dict(repeats=repeats, workers=workers, profile=profile, progress=progress, extra_meta=extra_meta)
    with outputs_root(root) if root is not None else contextlib.nullcontext():
        return _run(name, questions, configs, population, **kw).dir


_RUN_DEFAULTS = dict(repeats=1, workers=None, profile="default", progress=True, extra_meta=None)


def run_and_load(name: str, questions: Sequence[Question], configs: Sequence[DebateConfig], population, **kw):
    """run_experiment(name, questions, configs, population, **kw) (kw may hold root=), then what load_run(name) returns:
    (meta, records). The records are parsed from the lines written to the file, so they are load_run's own;
    lines that were read from the file when the run started (a rerun with everything on disk) are not
    parsed a second time."""
    root = kw.pop("root", None)
    with outputs_root(root) if root is not None else contextlib.nullcontext():
        run = _run(name, questions, configs, population, **{**_RUN_DEFAULTS, **kw})
    keys = order_keys(questions, configs, run.repeats)
    order = {k: i for i, k in enumerate(keys)}
    final = sorted((k for k in run.done if k in order), key=order.__getitem__)
    final += [k for k in run.done if k not in order]  # write_canonical's order: the file's
    meta = read_meta(run.dir / "meta.json")
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    records = []
    with gc_paused():
        for k in final:
            if k[1] in hashes:
                rec, line = run.done[k]
                records.append(parse_line(line) if k in run.fresh else rec)
    return meta, records
