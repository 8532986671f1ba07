"""Run experiments into transcripts, the single source of truth for every table and figure, resumably.

    path = run_experiment("theory_martingale", items, [cfg_a, cfg_b], population)
    meta, records = run_and_load("theory_martingale", items, [cfg_a, cfg_b], population)

outputs/runs/<name>/ holds transcripts.jsonl(.gz) and meta.json. Every question ends as a record, "ok" or "failed"
with its redacted "error"; an "ok" record on disk is never recomputed, so a stopped run resumes. Lines are written
whole and flushed at once (`Appender`; fsynced at most once a second: a synthetic run saves thousands a second); a
torn last line from a crash is never glued to the next (`Appender`); a run resumes only into a folder that asked
the same questions of the same agents (`check_resumable`); a complete run is written once more, whole, compressed, in
canonical order (`write_canonical`), so a rerun gives the same bytes. Ctrl-C: the first press starts no new question
and saves those in flight; a second stops waiting for them (their calls land in the response cache); either way
`RunInterrupted` says "interrupted: N of M records saved; rerun to resume".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Optional

from tqdm.auto import tqdm

from acemad_utils.agents.batch import BatchExported, Deferred
from acemad_utils.agents.budget import BudgetExceeded
from acemad_utils.agents.health import EndpointDown
from acemad_utils.agents.locks import run_lock
from acemad_utils.agents.redact import redact, strip_url_secrets
from acemad_utils.data.benchmarks import data_hash
from acemad_utils.data.paths import ROOT, atomic_write, progress_bars
from acemad_utils.data.transcripts import (
    COMPRESSED,
    SALVAGED,
    TRANSCRIPTS,
    commitments,
    gc_paused,
    read_meta,
    record_lines,
    run_dir,
    write_questions,
)
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.debate import run_batch, run_question
from acemad_utils.protocol.records import base_record, to_line
from acemad_utils.protocol.schema import RECORD_USAGE_KEYS, Population, Question, zero_usage
from acemad_utils.protocol.schema import USAGE_KEYS as STEP_USAGE_KEYS


# ----------------------------------------------------------------------------- the files of a run
def git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def is_record(rec: dict) -> bool:
    return "question_id" in rec and "config_hash" in rec and "repeat" in rec and "status" in rec


def record_key(rec: dict) -> tuple:
    return (rec["question_id"], rec["config_hash"], rec["repeat"])


FSYNC_EVERY_S = 1.0
COMPRESS_LEVEL = 4  # of transcripts.jsonl.gz (write_canonical)


class Appender:
    """Whole lines appended and flushed at once (a killed process loses nothing), fsynced every FSYNC_EVERY_S. A
    file a crash left without its last newline gets one first: a whole record keeps its line, a torn line stays a
    line of its own (dropped, with a warning, by every reader; the completed run rewrites the file without it)."""

    def __init__(self, path: Path):
        self.f = open(path, "ab")
        if self.f.tell():
            with open(path, "rb") as old:
                old.seek(-1, os.SEEK_END)
                if old.read(1) != b"\n":
                    self.f.write(b"\n")
        self.synced = time.monotonic()

    def write_many(self, lines) -> None:
        self.f.write("".join(line + "\n" for line in lines).encode("utf-8"))
        self.f.flush()
        if time.monotonic() - self.synced >= FSYNC_EVERY_S:
            os.fsync(self.f.fileno())
            self.synced = time.monotonic()

    def close(self) -> None:
        if self.f.tell():
            os.fsync(self.f.fileno())
        self.f.close()


def read_done(path: Path) -> dict[tuple, tuple[dict, str]]:
    """{record_key: (record, line)} of the ok records saved (compressed file, then appended lines; the latest wins;
    a damaged .gz gives what can be read, and the run writes it whole again)."""
    with gc_paused():
        return {
            record_key(rec): (rec, line.decode("utf-8"))
            for rec, line in record_lines(path, salvage=True)
            if is_record(rec) and rec.get("status") == "ok"
        }


def remove_stale_temp_files(d: Path) -> list[Path]:
    """Remove the temp files (atomic_write's) a killed process left in run folder `d`; only under the run's lock."""
    gone = [p for p in d.glob("*.tmp") if p.is_file() and p.name.startswith((COMPRESSED + ".", "meta.json."))]
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


def failed_record(q: Question, cfg: DebateConfig, population: Population, repeat: int, err: BaseException) -> dict:
    return {
        **base_record(q, cfg, population, repeat),
        "status": "failed",
        "error": redact(f"{type(err).__name__}: {err}")[:500],  # a server may echo the key in its message
        "final": {
            "answer": None,
            "correct": None if q.answer is None else False,
            "oracle_any_agent_correct": False,
            "tie": False,
        },
        "usage": dict.fromkeys(RECORD_USAGE_KEYS, 0),
    }


def with_usage_keys(rec: dict) -> dict:
    usage = rec.setdefault("usage", {})
    for k in RECORD_USAGE_KEYS:
        usage.setdefault(k, 0)
    return rec


def usage_delta(after: dict, before: dict) -> dict:
    out: dict[str, object] = {}
    for k, v in after.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        b = before.get(k, 0)
        out[k] = v - (b if isinstance(b, (int, float)) else 0)
    if "cost_usd" in after:
        a, b = after["cost_usd"], before.get("cost_usd")
        out["cost_usd"] = None if a is None or b is None else round(a - b, 6)
    return out


#: A run where more than this share of the commitments did not parse (after the repair call) is no result: the
#: reproduce command and `python -m acemad_utils run` exit 1 and say so; below it, tables count them beside n.
PARSE_FAILURE_LIMIT = 0.5


def summarize(records: Sequence[dict], expected: Optional[int] = None) -> dict:
    """Run-level counts from records: questions, expected, records, missing, ok, failed (and their errors), usage,
    commitments, correct (over ok records)."""
    out: dict = {
        "questions": len({r["question_id"] for r in records}),
        "expected": len(records) if expected is None else expected,
        "records": len(records),
        "ok": sum(r.get("status") == "ok" for r in records),
        "failed": sum(r.get("status") == "failed" for r in records),
    }
    out["missing"] = out["expected"] - out["records"]
    usages = [r.get("usage", {}) for r in records]
    for k in RECORD_USAGE_KEYS:
        out[k] = sum(int(u.get(k, 0) or 0) for u in usages)
    out["commitments"] = sum(commitments(r) for r in records if r.get("status") == "ok")  # parse_failures' base
    out["correct"] = float(
        sum(
            float(r["final"]["correct"])
            for r in records
            if r.get("status") == "ok" and r.get("final") and r["final"].get("correct") is not None
        )
    )
    out["errors"] = [
        {
            "question_id": r["question_id"],
            "method": r.get("method"),
            "repeat": r.get("repeat"),
            "error": r.get("error", ""),
        }
        for r in records
        if r.get("status") == "failed"
    ][:50]
    return out


# Description fields that do not change what agents answer: how an endpoint is reached, not who answers.
_OPERATIONAL = {"endpoints", "structured_output", "structured_output_detection", "max_concurrency", "max_attempts"}


def identity(desc) -> str:
    """The part of a population's description that defines its answers (models, seed, sampling, prompts)."""
    if not isinstance(desc, dict):
        return str(desc)
    keep = {k: v for k, v in desc.items() if k not in _OPERATIONAL}
    keep.setdefault("calls", "two")  # runs saved before the single-call mode existed used two calls
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


def write_meta(path: Path, meta: dict) -> None:
    """meta.json, whole, with no URL keeping its credentials (a base_url with user:password@ or ?api_key=)."""
    atomic_write(path, strip_url_secrets(json.dumps(meta, indent=2, sort_keys=True, default=str)) + "\n")


def check_resumable(d: Path, meta: dict) -> None:
    """Refuse to resume into `d` when its saved run asked other questions or other agents (ValueError)."""
    meta_path = d / "meta.json"
    if not meta_path.exists():
        return
    old = read_meta(meta_path, need=("methods", "data_hash", "population"))  # DamagedFile: delete it alone

    def who(meta: dict, what: str, ident: str) -> str:  # who answered (models, seed) or which questions
        if what == "data_hash":
            return f"{meta.get('n_questions')} questions of {meta.get('benchmarks')} (data hash {ident})"
        pop = meta.get("population")
        if not isinstance(pop, dict):
            return f"{pop} ({ident})"
        models = pop.get("models") or [pop.get("model", pop.get("name"))]
        return f"{', '.join(map(str, models))} with seed {pop.get('seed')} (identity {ident})"

    for what, a, b in (
        ("data_hash", old.get("data_hash"), meta["data_hash"]),
        ("population", identity(old.get("population")), identity(meta["population"])),
    ):
        if a != b:
            raise ValueError(
                f"{d} holds a run with a different {what}: saved {who(old, what, str(a))}, this run "
                f"{who(meta, what, b)}; resuming would mix results. Delete {d} or choose another experiment name."
            )


def write_canonical(path: Path, done: dict, final: list[tuple]) -> None:
    """Write the lines of `done` ({key: (record, line)}) in the order of `final` to transcripts.jsonl.gz and remove
    the appended plain file `path`; nothing is written when the .gz already holds exactly these lines."""
    gz = path.with_name(COMPRESSED)
    if path.exists() or not gz.exists() or list(done) != final or gz.resolve() in SALVAGED:
        # mtime=0: the same records give the same bytes. Level 4, not 1 or 6: on notebook 06's run (110 MB of lines)
        # level 1 gives 18.9 MB in 0.36 s, level 4 16.6 MB in 0.64 s, level 6 15.5 MB in 1.15 s (bench/README.md)
        atomic_write(gz, _gzipped(done[k][1] for k in final))
        path.unlink(missing_ok=True)
        SALVAGED.discard(gz.resolve())


def _gzipped(lines, chunk: int = 1 << 12) -> bytes:
    """gzip.compress(lines + newlines, COMPRESS_LEVEL, mtime=0)'s bytes (zlib writes the gzip frame), a few thousand
    lines at a time (never one string: 110 MB for notebook 06's run)."""
    z, it = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, 31), iter(lines)
    parts = [z.compress(("\n".join(part) + "\n").encode("utf-8")) for part in iter(lambda: [*islice(it, chunk)], [])]
    return b"".join(parts) + z.flush()


# ----------------------------------------------------------------------------- the run
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
    fresh: dict = field(default_factory=dict)  # records saved by this process, by key: handed back, never re-parsed
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


def _save(run: _Run, maybe: Sequence[Optional[dict]]) -> None:
    """Append records' lines, whole (a second Ctrl-C waits for them), and count them on the progress bar."""
    recs = [r for r in maybe if r is not None]
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
                run.fresh[record_key(rec)] = rec
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
    is recorded as failed, question by question), any other's one after the other (a Ctrl-C ends it between two)."""
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
    keys = ((q.id, c.hash, r) for c in run.configs for q in run.questions for r in range(run.repeats))
    order = {k: i for i, k in enumerate(keys)}
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
    """run_experiment's run, then what load_run(name) returns: (meta, records), without parsing any record again
    (the ones this process made are handed back as made; the ones read when the run resumed, as read)."""
    run = _run(name, questions, configs, population, **kw)
    meta = read_meta(run.dir / "meta.json")
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    return meta, [run.fresh[k] if k in run.fresh else run.done[k][0] for k in run.final if k[1] in hashes]
