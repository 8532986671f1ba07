"""What the reproduce command watches around its notebooks: one run per profile, progress, failed records.

    from acemad_utils.reproduce.guard import ProfileLock, ProgressTail, failed_records
    with ProfileLock(profile, llm=True, wait=False):       # SystemExit naming the holder if another run has it
        with ProgressTail(path, prefix="[paper] "):        # prints the kernels' progress lines on this terminal
            ...
    failed_records(since=t0)   # {run name: (n failed, {method: n}, first error)} of runs written since t0

One run per profile: agents/locks.py (the runner takes the same lock, so a notebook run by hand queues or
refuses too); ProfileLock is its form for the driver (a refusal exits with one line).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Optional

from jupyter_client.manager import AsyncKernelManager

from acemad_utils.agents.locks import LockRefused, RunLock
from acemad_utils.data.paths import outputs
from acemad_utils.data.transcripts import read_jsonl
from acemad_utils.experiments.run_files import PARSE_FAILURE_LIMIT


class ProfileLock(RunLock):
    """The driver's RunLock: a refusal is a SystemExit (one line, exit status 1); the kernels it starts skip
    the runner's own lock (agents/locks.py, LOCK_HOLDER_ENV)."""

    def __enter__(self) -> ProfileLock:
        try:
            super().__enter__()
        except LockRefused as e:
            raise SystemExit(str(e)) from None
        return self


class ProgressTail:
    """Print the lines the kernels append to `path` (health.emit) on this terminal while the block runs."""

    def __init__(self, path: Path, prefix: str = "", poll: float = 1.0):
        self.path, self.prefix, self.poll = Path(path), prefix, poll
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._pos = 0

    def __enter__(self) -> ProgressTail:
        self.path.write_text("")
        self._thread = threading.Thread(target=self._loop, name="acemad-progress-tail", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            self._flush()

    def _flush(self) -> None:
        with contextlib.suppress(OSError), open(self.path, encoding="utf-8", errors="replace") as f:
            f.seek(self._pos)
            chunk = f.read()
            end = chunk.rfind("\n") + 1  # whole lines only
            self._pos += len(chunk[:end].encode("utf-8"))
            for line in chunk[:end].splitlines():
                print(f"{self.prefix}{line}", flush=True)


def failed_records(since: float) -> dict[str, tuple[int, dict, str]]:
    """Runs whose meta.json was written at or after `since` and that hold failed records: run name ->
    (n failed, {method: n}, the first error). Failed records are retried by a rerun of the same command."""
    root = outputs("runs")
    out = {}
    for meta_path in sorted(root.rglob("meta.json")):
        if meta_path.stat().st_mtime < since - 1:
            continue
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if not (meta.get("summary") or {}).get("failed"):
            continue
        hashes = {m.get("config_hash") for m in (meta.get("methods") or {}).values()}
        bad = [
            r
            for r in read_jsonl(meta_path.parent / "transcripts.jsonl")
            if r.get("status") == "failed" and r.get("config_hash") in hashes
        ]
        if bad:
            by = Counter(str(r.get("method")) for r in bad)
            out[str(meta_path.parent.relative_to(root))] = (len(bad), dict(by), str(bad[0].get("error", "")))
    return out


def _summaries(since: float):
    """(run name, summary) of every run whose meta.json was written at or after `since`."""
    root = outputs("runs")
    for meta_path in sorted(root.rglob("meta.json")):
        if meta_path.stat().st_mtime < since - 1:
            continue
        try:
            summary = json.loads(meta_path.read_text()).get("summary") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(summary, dict):
            yield str(meta_path.parent.relative_to(root)), summary


def parse_failures(since: float) -> dict[str, tuple[int, int]]:
    """Runs written since `since` with commitments that did not parse: run name -> (unparsed, commitments)."""
    out = {}
    for name, summary in _summaries(since):
        n, of = int(summary.get("parse_failures") or 0), int(summary.get("commitments") or 0)
        if n:
            out[name] = (n, max(of, n))
    return out


def parse_failure_lines(profile: str, runs: dict[str, tuple[int, int]]) -> list[str]:
    """One line per run where more than PARSE_FAILURE_LIMIT of the commitments did not parse (the run's exit
    status is then 1): its accuracies are those of a parser's fallback, not of the model."""
    return [
        f"[{profile}] {name}: {n} of {of} commitments ({100 * n / of:.0f}%) did not parse after the repair call, "
        f"more than the {PARSE_FAILURE_LIMIT:.0%} a result may have: its tables measure no beliefs. Check the "
        "model's replies (commit_raw in the transcripts) and the MODEL / BASE_URL"
        for name, (n, of) in runs.items()
        if n > PARSE_FAILURE_LIMIT * of
    ]


def failure_lines(profile: str, runs: dict[str, tuple[int, dict, str]]) -> list[str]:
    """One line per run with failed records (counts per method, the first error) and the retry command."""
    lines = []
    for name, (n, by, err) in runs.items():
        per = ", ".join(f"{m} {k}" for m, k in by.items())
        lines.append(f"[{profile}] {name}: {n} failed record(s) ({per}); first error: {' '.join(err.split())[:200]}")
    if lines:
        lines.append(
            f"[{profile}] failed records are left out of every table (their n says so) and retried by the same "
            "command: rerun it once the endpoint is healthy (answered calls come from the cache)"
        )
    return lines


# ----------------------------------------------------------------------------- Ctrl-C for notebooks side by side
class InterruptibleKernelManager(AsyncKernelManager):
    """nbclient's kernel manager (papermill's default) that remembers the process group of every kernel it
    starts until it is cleaned up, so that `interrupt_kernels` can pass a Ctrl-C on. Why: jupyter_client starts
    each kernel in a session of its own, so a terminal's Ctrl-C reaches only the driver; one notebook at a time,
    papermill (in the driver's main thread) interrupts its kernel, but notebooks side by side run in worker
    threads, which never see the KeyboardInterrupt."""

    groups: set[int] = set()
    _lock = threading.Lock()

    async def _async_post_start_kernel(self, **kw) -> None:
        await super()._async_post_start_kernel(**kw)
        pgid = getattr(self.provisioner, "pgid", None)
        if pgid:
            with self._lock:
                InterruptibleKernelManager.groups.add(pgid)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        pgid = getattr(self.provisioner, "pgid", None)
        with self._lock:
            InterruptibleKernelManager.groups.discard(pgid)
        await super()._async_cleanup_resources(restart)


def interrupt_kernels() -> int:
    """SIGINT to every running kernel's process group (what the Interrupt button does); how many got it."""
    with InterruptibleKernelManager._lock:
        groups = sorted(InterruptibleKernelManager.groups)
    sent = 0
    for pgid in groups:
        with contextlib.suppress(OSError):  # a kernel that has just ended
            os.killpg(pgid, signal.SIGINT)
            sent += 1
    return sent
