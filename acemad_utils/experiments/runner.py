"""Experiments into transcripts (outputs/runs/<name>/), resumably: an ok record is never recomputed, a failed one
retried; a complete run is rewritten compressed in canonical order, so a rerun gives the same bytes."""

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
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from itertools import groupby, islice
from pathlib import Path
from typing import Any, Optional

from isal import isal_zlib
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

FSYNC_EVERY_S = 1.0  # a synthetic run saves thousands of records a second: one fsync each would dominate
# transcripts.jsonl.gz by ISA-L (python-isal; standard gzip, any reader opens it), level 1 of its 0-3: notebook 03's
# 92 MB of lines in 0.08 CPU s and 13.9 MB, where zlib's fastest level took 0.31 s for 15.3 MB (bench/README.md).
COMPRESS_LEVEL = 1
#: More than this share of commitments unparsed (after the repair call): no result; the commands exit 1 and say so.
PARSE_FAILURE_LIMIT = 0.5
#: What the summary reads of a record saved in this session; the rest is only in its line (never held twice).
SUMMARY_FIELDS = ("question_id", "config_hash", "repeat", "method", "status", "final", "usage", "error")
#: Debates per batch: numpy's per-call overhead small, a Ctrl-C answered within a second. Records do not depend on it.
BATCH = 1024
# Description fields that say how an endpoint is reached, not who answers: a resume may change them.
_OPERATIONAL = {"endpoints", "structured_output", "structured_output_detection", "max_concurrency", "max_attempts"}


def failure_line(records: Sequence[dict], rerun: str = "Run the same again", *, table: bool = True) -> Optional[str]:
    """How many records failed per method and the first error, and that `rerun` retries them; None when none did."""
    bad = [r for r in records if r.get("status", "ok") != "ok"]
    if not bad:
        return None
    by = ", ".join(f"{m} {k}" for m, k in Counter(str(r.get("method")) for r in bad).items())
    where = ", left out of the table (its n says so)" if table else ""
    first = " ".join(str(bad[0].get("error", "")).split())[:400]
    return (f"{len(bad)} of {len(records)} records failed ({by}){where}; first error: {first}. {rerun} to retry them "
            "(answered calls come from the cache)")  # fmt: skip


def git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


class Appender:
    """Whole lines appended and flushed at once (a killed process loses nothing), fsynced every FSYNC_EVERY_S; a
    file a crash left without its last newline gets one first, so a torn line never glues to the next record."""

    def __init__(self, path: Path):
        self.f, self.synced = open(path, "ab"), time.monotonic()
        if self.f.tell():
            with open(path, "rb") as old:
                old.seek(-1, os.SEEK_END)
                if old.read(1) != b"\n":
                    self.f.write(b"\n")

    def write_many(self, lines: list[bytes]) -> None:
        """UTF-8 lines (records.to_line's), each given its newline."""
        self.f.write(b"\n".join([*lines, b""]))  # the empty last item: every line ends with a newline
        self.f.flush()
        if time.monotonic() - self.synced >= FSYNC_EVERY_S:
            os.fsync(self.f.fileno())
            self.synced = time.monotonic()

    def close(self) -> None:
        if self.f.tell():
            os.fsync(self.f.fileno())
        self.f.close()


def read_done(path: Path) -> dict[tuple, tuple[dict, bytes]]:
    """{(question_id, config_hash, repeat): (record, line)} of the ok records saved (of a damaged .gz, what is read)."""
    keys = ("question_id", "config_hash", "repeat")
    with gc_paused():
        return {
            (rec["question_id"], rec["config_hash"], rec["repeat"]): (rec, line)  # bytes, as written again
            for rec, line in record_lines(path, salvage=True)
            if all(k in rec for k in keys) and rec.get("status") == "ok"
        }


def failed_record(q: Question, cfg: DebateConfig, population: Population, repeat: int, err: BaseException) -> dict:
    final = {"answer": None, "correct": None if q.answer is None else False, "oracle_any_agent_correct": False}
    return {
        **base_record(q, cfg, population, repeat),
        "status": "failed",
        "error": redact(f"{type(err).__name__}: {err}")[:500],  # a server may echo the key in its message
        "final": {**final, "tie": False},
        "usage": dict.fromkeys(RECORD_USAGE_KEYS, 0),
    }


def _with_usage_keys(rec: dict) -> dict:
    for k in RECORD_USAGE_KEYS:
        rec.setdefault("usage", {}).setdefault(k, 0)
    return rec


def usage_delta(after: dict, before: dict) -> dict:
    num = lambda v: isinstance(v, (int, float))
    out: dict[str, object] = {
        k: v - (before.get(k, 0) if num(before.get(k, 0)) else 0)
        for k, v in after.items()
        if num(v) and not isinstance(v, bool)
    }
    if "cost_usd" in after:
        a, b = after["cost_usd"], before.get("cost_usd")
        out["cost_usd"] = None if a is None or b is None else round(a - b, 6)
    return out


def summarize(records: Sequence[dict], expected: Optional[int] = None) -> dict:
    """Run-level counts for meta.json: records, ok, failed (with errors), usage, commitments, correct."""
    ok = [r for r in records if r.get("status") == "ok"]
    failed = [r for r in records if r.get("status") == "failed"]
    out: dict = {
        "questions": len({r["question_id"] for r in records}),
        "expected": len(records) if expected is None else expected,
        "records": len(records),
        "ok": len(ok),
        "failed": len(failed),
    }
    out["missing"] = out["expected"] - out["records"]
    usages = [r.get("usage") or {} for r in records]
    for k in RECORD_USAGE_KEYS:
        out[k] = sum(int(u.get(k, 0) or 0) for u in usages)
    out["commitments"] = sum(commitments(r) for r in ok)  # parse_failures' base
    out["correct"] = float(
        sum(float(r["final"]["correct"]) for r in ok if (r.get("final") or {}).get("correct") is not None)
    )
    fields = ("question_id", "method", "repeat")
    out["errors"] = [{**{k: r.get(k) for k in fields}, "error": r.get("error", "")} for r in failed][:50]
    return out


def identity(desc) -> str:
    """The part of a population's description that defines its answers (models, seed, sampling, prompts)."""
    if not isinstance(desc, dict):
        return str(desc)
    keep = {"calls": "two", **{k: v for k, v in desc.items() if k not in _OPERATIONAL}}  # older runs: two calls
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


def write_meta(path: Path, meta: dict) -> None:
    """meta.json, whole, with no URL keeping its credentials (a base_url with user:password@ or ?api_key=)."""
    atomic_write(path, strip_url_secrets(json.dumps(meta, indent=2, sort_keys=True, default=str)) + "\n")


def check_resumable(d: Path, meta: dict) -> Optional[dict]:
    """Refuse (ValueError) to resume into `d` when its saved run asked other questions or other agents; else the
    saved meta.json (None: a new run)."""
    if not (d / "meta.json").exists():
        return None
    old = read_meta(d / "meta.json", need=("methods", "data_hash", "population"))  # DamagedFile: delete it alone

    def who(m: dict, what: str, ident: str) -> str:
        if what == "data_hash":
            return f"{m.get('n_questions')} questions of {m.get('benchmarks')} (data hash {ident})"
        pop = m.get("population")
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
    return old


def how_answered(now: dict, before: Any) -> dict:
    """`now` (a population's description) with its endpoints found so far: what this session has not yet seen of
    an endpoint (the models asked, the mode its commitments were answered in: a resume that calls nothing) is kept
    from `before`, matched by the endpoint's id (by position in a meta.json written before ids)."""
    if not isinstance(now, dict) or "endpoints" not in now:
        return now
    old: list = [b for b in (before.get("endpoints") or [] if isinstance(before, dict) else []) if isinstance(b, dict)]
    new: list = now["endpoints"]
    by_id = {b["id"]: b for b in old if "id" in b}
    keyed, merged = bool(by_id), []
    for i, n in enumerate(new):
        b = by_id.pop(n.get("id"), None) if keyed else (old[i] if i < len(old) else None)
        merged.append({**b, **n} if b is not None and b.get("endpoint") == n.get("endpoint") else n)
    return {**now, "endpoints": merged + (list(by_id.values()) if keyed else old[len(new) :])}


def write_canonical(path: Path, done: dict, final: list[tuple]) -> None:
    """The lines of `done` in the order of `final` to transcripts.jsonl.gz (mtime 0, compressed in chunks: 110 MB for
    notebook 06), the appended file removed; nothing when the .gz holds them already."""
    gz = path.with_name(COMPRESSED)
    if path.exists() or not gz.exists() or list(done) != final or gz.resolve() in SALVAGED:
        z, it = isal_zlib.compressobj(COMPRESS_LEVEL, isal_zlib.DEFLATED, 31), (done[k][1] for k in final)
        parts = [z.compress(b"\n".join([*p, b""])) for p in iter(lambda: [*islice(it, 4096)], [])]  # UTF-8 lines
        atomic_write(gz, b"".join(parts) + z.flush())
        path.unlink(missing_ok=True)
        SALVAGED.discard(gz.resolve())


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C ended a run; str() is the one line to show."""


class BudgetStop(BudgetExceeded):
    """MAX_USD ended a run: no new paid call was sent, calls in flight finished (and are cached)."""


class _Run:
    """One run_experiment call: what to run, what is saved, and why it stopped (if it did)."""

    def __init__(self, name, questions, configs, population, repeats=1, workers=None, profile="default",
                 progress=True, extra_meta=None):  # fmt: skip
        labels = [c.label for c in configs]
        if len(set(labels)) != len(labels):
            raise ValueError(f"two configs share a label in experiment {name!r}: {labels}; give one a name=")
        seen: dict[str, int] = {}
        for i, q in enumerate(questions):  # records are keyed by question id: a repeat would overwrite, not add
            if q.id in seen:
                raise ValueError(
                    f"experiment {name!r}: question id {q.id!r} is at positions {seen[q.id]} and {i} of the "
                    "question list; each question may appear once"
                )
            seen[q.id] = i
        self.name, self.questions, self.population = name, questions, population
        self.workers, self.progress, self.dir = workers, progress, run_dir(name)
        # every (question, config, repeat) in canonical order: configs, then questions as given, repeats ascending
        self.jobs = [(q, c, r) for c in configs for q in questions for r in range(repeats)]
        self.meta = {
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
        # Ctrl-C presses; a second raises, never while a line is written nor inside the pool's wait(): raised there
        # it can leave the waiter's lock held, and the question threads then hang the exit (the loop polls instead)
        self.presses, self.saving, self.polling = 0, False, False
        self.over_budget: list = []  # a BudgetExceeded (MAX_USD) or EndpointDown (circuit breaker)
        self.waiting: list = []  # CALLS_VIA batch: questions waiting for a queued call (Deferred)
        self.exported: list = []  # CALLS_VIA files: the BatchExported that ended the pass loop
        self.lock, self.totals = threading.Lock(), {**zero_usage(), "failed": 0}
        self.fresh: dict = {}  # records saved by this process, by key: handed back, never re-parsed
        self.out: Optional[Appender] = None
        self.bar: Any = None

    def open(self) -> None:
        """Check the folder, remove temp files a killed writer left (we hold its lock), read what is saved."""
        before = (check_resumable(self.dir, self.meta) or {}).get("population")
        self.meta["population"] = how_answered(self.meta["population"], before)
        for p in self.dir.glob("*.tmp"):
            if p.is_file() and p.name.startswith((COMPRESSED + ".", "meta.json.")):
                p.unlink(missing_ok=True)
        self.done = read_done(self.dir / TRANSCRIPTS)  # before meta.json is rewritten: a damaged file keeps it
        write_meta(self.dir / "meta.json", self.meta)
        write_questions(self.dir, self.questions)  # the viewer shows each question above its debate
        self.usage_before = self.population.usage() if callable(getattr(self.population, "usage", None)) else None
        self.todo = [(q, c, r) for q, c, r in self.jobs if (q.id, c.hash, r) not in self.done]

    def _sigint(self, signum, frame) -> None:
        self.presses += 1
        if self.presses >= 2 and not self.saving and not self.polling:
            raise KeyboardInterrupt

    def answer(self, job) -> Optional[dict]:
        """One question of one method: its record, a failed record, or None when it did not run to an end."""
        if self.presses or self.over_budget:  # questions not started yet are left for the resume
            return None
        q, c, r = job
        try:
            return _with_usage_keys(run_question(q, self.population, c, r))
        except (BudgetExceeded, EndpointDown) as err:  # not this question's failure: stop starting questions
            self.over_budget.append(err)
        except Deferred:  # its next call is queued for a batch: the question waits, it has not failed
            with self.lock:
                self.waiting.append(job)
        except Exception as err:  # a failed question is recorded with its reason and retried on resume
            return None if self.presses else failed_record(q, c, self.population, r, err)
        return None

    def save(self, maybe: Sequence[Optional[dict]]) -> None:
        """Append records' lines, whole (a second Ctrl-C waits for them), and count them on the progress bar."""
        recs = [r for r in maybe if r is not None]
        if not recs:
            return
        lines = [to_line(rec) for rec in recs]
        with self.lock:
            self.saving = True
            try:
                assert self.out is not None
                self.out.write_many(lines)
                for rec, line in zip(recs, lines):
                    view = {k: rec[k] for k in SUMMARY_FIELDS if k in rec}
                    view["commitments"] = commitments(rec)  # the summary's parse-failure base (rounds are not kept)
                    key = (rec["question_id"], rec["config_hash"], rec["repeat"])
                    self.done[key], self.fresh[key] = (view, line), rec
            finally:
                self.saving = False
            t = self.totals
            for rec in recs:
                for k in STEP_USAGE_KEYS:
                    t[k] += rec.get("usage", {}).get(k, 0)
                t["failed"] += rec["status"] != "ok"
            self.bar.update(len(recs))
            tok = t["prompt_tokens"] + t["completion_tokens"]
            self.bar.set_postfix(calls=t["calls"], hits=t["cache_hits"], tok=tok, failed=t["failed"], refresh=False)

    def in_threads(self) -> None:
        """Questions in a thread pool (populations that do I/O; the client bounds the calls in flight)."""
        ex = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="question")
        self.polling = True  # a second Ctrl-C is noticed below within 0.2 s, never raised inside wait()
        try:
            pending, announced = {ex.submit(self.answer, j) for j in self.todo}, False
            while pending:  # a short timeout so a Ctrl-C is noticed while every worker is busy
                finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in finished:
                    self.save([fut.result()])
                if self.presses >= 2:
                    raise KeyboardInterrupt
                if self.presses and not announced:
                    announced, n = True, sum(fu.running() for fu in pending)
                    msg = f"interrupt: finishing {n} question(s) in flight, then stopping (Ctrl-C again to stop now)"
                    tqdm.write(redact(msg), file=sys.stderr)  # above the progress bar, never glued to its end
        finally:
            self.polling = False
            ex.shutdown(wait=not self.presses, cancel_futures=True)

    def here(self) -> None:
        """In this thread: a batched population's questions as arrays of BATCH debates per config (a batch that
        raises is recorded as failed, question by question), any other's one after the other."""
        if not getattr(self.population, "batched", False):
            for job in self.todo:
                if self.presses or self.over_budget:
                    return
                self.save([self.answer(job)])
            return
        for _, group in groupby(self.todo, key=lambda job: job[1].hash):  # todo: config by config
            jobs = list(group)
            for start in range(0, len(jobs), BATCH):
                if self.presses:
                    return
                part, cfg = jobs[start : start + BATCH], jobs[start][1]
                try:
                    recs = [_with_usage_keys(r) for r in run_batch([j[0] for j in part], self.population, cfg,
                                                                  [j[2] for j in part])]  # fmt: skip
                except Exception as err:
                    recs = [failed_record(q, c, self.population, r, err) for q, c, r in part]
                self.save(recs)

    def passes(self) -> None:
        """Run every question left. CALLS_VIA batch: a pass runs each question until its first call not cached yet
        (queued: it waits); the queue goes out as one batch, and the waiting questions run again, until none waits."""
        pop = self.population
        concurrent = getattr(pop, "concurrent", not pop.synthetic) and (self.workers or 1) > 1
        batcher, stop = getattr(pop, "batcher", None), getattr(pop, "stop", lambda stopped: None)
        stop(False)  # a population reused after a run stopped by a second Ctrl-C calls again
        while True:
            self.waiting.clear()
            try:
                if concurrent:
                    self.in_threads()
                else:  # CPU-bound: the collector would rescan the growing set of saved records
                    with gc_paused():
                        self.here()
                if not self.waiting or self.presses or self.over_budget or batcher is None:
                    return
                batcher.flush(should_stop=lambda: bool(self.presses), progress=self.progress)
            except KeyboardInterrupt:
                self.presses = max(self.presses, 2)
                stop(True)  # the questions still in flight end at their next call
            except BudgetExceeded as err:
                self.over_budget.append(err)
            except BatchExported as err:  # CALLS_VIA files: the queue is on disk for another runner
                self.exported.append(err)
            if self.presses or self.over_budget or self.exported:
                return
            self.todo = list(self.waiting)

    def finish(self) -> None:
        """The summary to meta.json. Complete: the records whole, compressed, in canonical order (self.jobs').
        Stopped early: the file holds whole records; raise why."""
        order = {(q.id, c.hash, r): i for i, (q, c, r) in enumerate(self.jobs)}
        ours = sorted((k for k in self.done if k in order), key=order.__getitem__)
        self.final = ours + [k for k in self.done if k not in order]  # every other ok record after ours
        down = [e for e in self.over_budget if isinstance(e, EndpointDown)]
        why = (
            "circuit breaker" if down else "MAX_USD" if self.over_budget else "batch export" if self.exported else None
        )
        stopped = bool(self.presses) or why is not None
        if not stopped:
            write_canonical(self.dir / TRANSCRIPTS, self.done, self.final)
        summary = summarize([self.done[k][0] for k in ours], expected=len(order))
        if self.usage_before is not None:  # what this session spent (also the calls of questions that failed)
            summary["session"] = usage_delta(self.population.usage(), self.usage_before)
        if stopped:
            summary["interrupted"] = True
            summary.update({"stopped_by": why} if why and not self.presses else {})
        self.meta["summary"] = summary
        now = how_answered(self.population.describe(), self.meta["population"])  # how the endpoints answered
        if isinstance(now, dict) and identity(now) == identity(self.meta["population"]):
            self.meta["population"] = now
        write_meta(self.dir / "meta.json", self.meta)
        saved = f"{summary['records']} of {summary['expected']} records saved"
        if self.presses:
            raise RunInterrupted(f"interrupted: {saved}; rerun to resume") from None
        if down:
            raise EndpointDown(f"{down[0]} (run {self.name!r}: {saved})") from None
        if self.over_budget:
            raise BudgetStop(
                f"{str(self.over_budget[0]).rstrip('.')}. Run {self.name!r} stopped: {saved}, calls in flight "
                "finished and cached. MAX_USD caps one command: to continue, rerun (it may spend up to MAX_USD again) "
                "or raise MAX_USD (profile key max_usd: or the ACEMAD_MAX_USD variable) and rerun; every paid reply "
                "is cached, so the part already paid for costs nothing again."
            ) from None
        if self.exported:
            raise BatchExported(f"run {self.name!r}: {saved}; {self.exported[0]}") from None


def _run(name, questions, configs, population, **kw) -> _Run:
    """run_experiment under the profile's lock (a notebook run by hand beside the driver refuses instead of paying
    twice) and one writer per run folder (flock, released on death)."""
    run = _Run(name, questions, configs, population, **kw)
    run.dir.mkdir(parents=True, exist_ok=True)
    with run_lock(name, llm=not population.synthetic), open(run.dir / ".writer.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # two notebooks may ask for one run: the second resumes the first's
        run.open()
        shown = run.progress and run.todo and progress_bars()
        run.bar = tqdm(total=len(run.todo), desc=name, disable=not shown, unit="q", smoothing=0.05)
        with contextlib.ExitStack() as stack:
            with contextlib.suppress(ValueError):  # not the main thread: no signal reaches us here anyway
                old = signal.signal(signal.SIGINT, run._sigint)
                stack.callback(signal.signal, signal.SIGINT, old)
            if run.todo:
                run.out = Appender(run.dir / TRANSCRIPTS)
                stack.callback(run.out.close)
            run.passes()
        run.bar.close()
        run.finish()
        return run


def run_experiment(name: str, questions: Sequence[Question], configs: Sequence[DebateConfig], population, **kw) -> Path:
    """Run every config on every question and save transcripts; returns the run directory. kw: repeats (1), workers
    (questions in threads when the population does I/O), profile, progress, extra_meta (added to meta.json)."""
    return _run(name, questions, configs, population, **kw).dir


def run_and_load(name: str, questions: Sequence[Question], configs: Sequence[DebateConfig], population, **kw) -> Any:
    """run_experiment's run, then (meta, records) as load_run(name) gives them, without parsing any record again."""
    run = _run(name, questions, configs, population, **kw)
    meta = read_meta(run.dir / "meta.json")
    hashes = {m["config_hash"] for m in meta["methods"].values()}
    return meta, [run.fresh[k] if k in run.fresh else run.done[k][0] for k in run.final if k[1] in hashes]
