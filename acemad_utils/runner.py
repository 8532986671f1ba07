"""Run experiments into transcripts: the single source of truth for every table and figure.

    from acemad_utils.runner import run_experiment, load_run
    path = run_experiment("theory_martingale", items, [cfg_a, cfg_b], population)
    meta, records = load_run("theory_martingale")

Layout: outputs/runs/<name>/transcripts.jsonl (one JSON record per question x method x repeat) and
meta.json (population/model, methods and their parameters, seed, data hash, git commit, and at the end of
every run_experiment a `summary`, see `summarize`).

Every question ends as a record: status "ok", or status "failed" with its "error" (redacted of secrets) and
`final.correct = False`; failed records are retried when the run is resumed.

Resumable: a record already on disk (same question, method config hash and repeat, status "ok") is never
recomputed, so an interrupted run continues where it stopped. Every line is written whole and flushed
(fsync) before the next; a torn last line left by a crash is detected and dropped, never parsed as data
(and cut off before new lines are appended, so a new record is never glued to it). When the run is complete
the file is rewritten in canonical order (atomic rename), so a rerun gives the same bytes whatever the
thread timing was.

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
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Optional, Sequence

from tqdm.auto import tqdm

from .batch import BatchExported, Deferred
from .budget import BudgetExceeded
from .config import DebateConfig
from .data import data_hash
from .llm import redact
from .paths import ROOT, atomic_write, outputs
from .protocols import _base_record, run_question
from .schema import Population, Question


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


def git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def run_dir(name: str) -> Path:
    return outputs("runs", name)


def read_jsonl(path: Path) -> list[dict]:
    """Read records; a torn or corrupt line (a crash mid-write) is dropped with a warning, never parsed.
    Only JSON objects are records: any other line (a number, a list, bad UTF-8) counts as corrupt."""
    out = []
    if not path.exists():
        return out
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            rec = None
        if isinstance(rec, dict):
            out.append(rec)
        else:
            warnings.warn(f"{path}:{n}: dropped a torn/corrupt transcript line ({len(line)} bytes)")
    return out


def _cut_torn_tail(path: Path) -> None:
    """A file that does not end with a newline was cut by a crash mid-write. A tail that is a whole record
    (only the newline was lost) gets its newline; anything else is a torn line and is cut off, so appended
    records start on a line of their own and the torn bytes are never read as a record."""
    if not path.exists():
        return
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        keep = 0
        pos = size
        while pos > 0:  # find the last newline, reading backwards in blocks
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            i = f.read(step).rfind(b"\n")
            if i >= 0:
                keep = pos + i + 1
                break
        f.seek(keep)
        tail = f.read()
        try:
            rec = json.loads(tail)
        except (ValueError, RecursionError):
            rec = None
        if isinstance(rec, dict) and _valid(rec):
            f.seek(size)
            f.write(b"\n")
        else:
            warnings.warn(f"{path}: dropped a torn last line ({size - keep} bytes) left by an interrupted run")
            f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())


def _valid(rec: dict) -> bool:
    return all(k in rec for k in ("question_id", "config_hash", "repeat", "status"))


def _key(rec: dict) -> tuple:
    return (rec["question_id"], rec["config_hash"], rec["repeat"])


def _write_line(f, rec: dict) -> None:
    f.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    f.flush()
    os.fsync(f.fileno())


#: Per-record usage counters (always present in a record's "usage"; agent entries list the non-zero ones).
USAGE_KEYS = ("calls", "network_calls", "cache_hits", "retries", "prompt_tokens", "completion_tokens",
              "repairs", "parse_failures", "q_parse_failures")


def _failed_record(q: Question, cfg: DebateConfig, population: Population, repeat: int, err: BaseException) -> dict:
    return {**_base_record(q, cfg, population, repeat), "status": "failed",
            "error": redact(f"{type(err).__name__}: {err}")[:500],  # a server may echo the key in its message
            "final": {"answer": None, "correct": False, "oracle_any_agent_correct": False, "tie": False},
            "usage": dict.fromkeys(USAGE_KEYS, 0)}


def _with_usage_keys(rec: dict) -> dict:
    usage = rec.setdefault("usage", {})
    for k in USAGE_KEYS:
        usage.setdefault(k, 0)
    return rec


def _usage_delta(after: dict, before: dict) -> dict:
    out = {}
    for k, v in after.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        b = before.get(k, 0)
        out[k] = v - (b if isinstance(b, (int, float)) else 0)
    if "cost_usd" in after:
        a, b = after["cost_usd"], before.get("cost_usd")
        out["cost_usd"] = None if a is None or b is None else round(a - b, 6)
    return out


def summarize(records: Sequence[dict], expected: Optional[int] = None) -> dict:
    """Run-level counts from transcript records: questions (distinct), records (expected = questions x
    methods x repeats, present, missing), ok, failed (with their errors), calls, network calls, retries,
    cache hits, repairs, parse failures, tokens; `correct` sums final.correct over ok records (a failed
    record is never correct). Usage of questions that failed is not in any record (see the run's
    `session` counters)."""
    out: dict = {"questions": len({r["question_id"] for r in records}),
                 "expected": len(records) if expected is None else expected,
                 "records": len(records),
                 "ok": sum(r.get("status") == "ok" for r in records),
                 "failed": sum(r.get("status") == "failed" for r in records)}
    out["missing"] = out["expected"] - out["records"]
    for k in USAGE_KEYS:
        out[k] = sum(int(r.get("usage", {}).get(k, 0) or 0) for r in records)
    out["correct"] = float(sum(float(r["final"]["correct"]) for r in records
                               if r.get("status") == "ok" and r.get("final")))
    out["errors"] = [{"question_id": r["question_id"], "method": r.get("method"), "repeat": r.get("repeat"),
                      "error": r.get("error", "")} for r in records if r.get("status") == "failed"][:50]
    return out


# Description fields that do not change what agents answer: how an endpoint is reached, not who answers.
_OPERATIONAL = {"endpoints", "structured_output", "structured_output_detection", "max_concurrency", "max_attempts"}


def _identity(desc) -> str:
    """The part of a population's description that defines its answers (models, seed, sampling, prompts)."""
    if not isinstance(desc, dict):
        return str(desc)
    keep = {k: v for k, v in desc.items() if k not in _OPERATIONAL}
    keep.setdefault("calls", "two")  # runs saved before the single-call mode existed used two calls
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _who(meta: dict, field: str, ident: str) -> str:
    """A readable identity for the refusal message: who answered (models, seed) or which questions."""
    if field == "data_hash":
        return f"{meta.get('n_questions')} questions of {meta.get('benchmarks')} (data hash {ident})"
    pop = meta.get("population")
    if not isinstance(pop, dict):
        return f"{pop} ({ident})"
    models = pop.get("models") or [pop.get("model", pop.get("name"))]
    return f"{', '.join(map(str, models))} with seed {pop.get('seed')} (identity {ident})"


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
            raise ValueError(f"experiment {name!r}: question id {q.id!r} is at positions {seen[q.id]} and {i} of the "
                             "question list; each question may appear once (use repeats= to run one several times)")
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
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        for field, a, b in (("data_hash", old.get("data_hash"), meta["data_hash"]),
                            ("population", _identity(old.get("population")), _identity(meta["population"]))):
            if a != b:
                raise ValueError(
                    f"{d} holds a run with a different {field}: saved {_who(old, field, a)}, this run "
                    f"{_who(meta, field, b)}; resuming would mix results. Delete {d} or choose another experiment name."
                )
    atomic_write(meta_path, json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")

    usage_before = population.usage() if callable(getattr(population, "usage", None)) else None
    _cut_torn_tail(tr_path)
    done = {_key(r): r for r in read_jsonl(tr_path) if _valid(r) and r.get("status") == "ok"}
    todo = [(q, c, r) for c in configs for q in questions for r in range(repeats) if (q.id, c.hash, r) not in done]
    lock = threading.Lock()
    totals = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "failed": 0}

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
            return _with_usage_keys(run_question(q, population, c, r))
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
            return _failed_record(q, c, population, r, err)

    bar = tqdm(total=len(todo), desc=name, disable=not progress or not todo, unit="q", smoothing=0.05)
    with stop.installed(), open(tr_path, "a", encoding="utf-8") as f:
        def save(rec):
            if rec is None:
                return
            with lock:
                stop.saving = True  # a second Ctrl-C waits until the line is on disk
                try:
                    _write_line(f, rec)
                    done[_key(rec)] = rec
                finally:
                    stop.saving = False
                for k in ("calls", "cache_hits", "prompt_tokens", "completion_tokens"):
                    totals[k] += rec.get("usage", {}).get(k, 0)
                totals["failed"] += rec["status"] != "ok"
                bar.update(1)
                bar.set_postfix(calls=totals["calls"], hits=totals["cache_hits"],
                                tok=totals["prompt_tokens"] + totals["completion_tokens"], failed=totals["failed"], refresh=False)

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
                                _notice(f"interrupt: finishing {running} question(s) in flight, then stopping "
                                        "(Ctrl-C again to stop now)")
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
        keys = set(_order_keys(questions, configs, repeats))
        summary = summarize([rec for k, rec in done.items() if k in keys], expected=len(keys))
        summary["interrupted"] = True
        if usage_before is not None:
            summary["session"] = _usage_delta(population.usage(), usage_before)
        if over_budget and not stop.presses:
            summary["stopped_by"] = "MAX_USD"
        elif exported and not stop.presses:
            summary["stopped_by"] = "batch export"
        meta["summary"] = summary
        atomic_write(meta_path, json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
        if over_budget and not stop.presses:
            raise BudgetStop(f"{over_budget[0]}. Run {name!r} stopped: {summary['records']} of {summary['expected']} "
                             "records saved, calls in flight finished and cached. To continue, raise MAX_USD (profile "
                             "key max_usd: or the ACEMAD_MAX_USD variable) and rerun: every paid reply is cached, so "
                             "the part already paid for costs nothing again.") from None
        if exported and not stop.presses:
            raise BatchExported(f"run {name!r}: {summary['records']} of {summary['expected']} records saved; "
                                f"{exported[0]}") from None
        raise RunInterrupted(f"interrupted: {summary['records']} of {summary['expected']} records saved; "
                             "rerun to resume") from None

    # Canonical order: configs as given, questions as given, repeats ascending (the latest record per key).
    order = {k: i for i, k in enumerate(_order_keys(questions, configs, repeats))}
    final = sorted((rec for k, rec in done.items() if k in order), key=lambda rec: order[_key(rec)])
    # Records of configs that are not part of this run stay in the file (nothing is lost); load_run skips them.
    ours = len(final)
    final += [rec for k, rec in done.items() if k not in order]  # `done` holds every ok record of the file
    atomic_write(tr_path, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in final))

    # The summary: counts over this run's records (all sessions), plus what this session spent (the client's
    # own counters, which also include the calls of questions that failed).
    summary = summarize(final[:ours], expected=len(order))
    if usage_before is not None:
        summary["session"] = _usage_delta(population.usage(), usage_before)
    meta["summary"] = summary
    atomic_write(meta_path, json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return d


def _order_keys(questions, configs, repeats) -> list[tuple]:
    return [(q.id, c.hash, r) for c in configs for q in questions for r in range(repeats)]


def load_run(name: str) -> tuple[dict, list[dict]]:
    d = run_dir(name)
    meta_path = d / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"no run named {name!r} under {d.parent}; run its notebook first")
    meta = json.loads(meta_path.read_text())
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    return meta, [r for r in read_jsonl(d / "transcripts.jsonl") if r["config_hash"] in hashes]
