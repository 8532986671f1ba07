"""What the reproduce command watches around its notebooks: one run per profile, progress, failed records, Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from acemad_utils.agents.locks import LockRefused, RunLock
from acemad_utils.data.paths import outputs
from acemad_utils.data.transcripts import read_jsonl
from acemad_utils.experiments.run_files import PARSE_FAILURE_LIMIT


class ProfileLock(RunLock):
    """One run per profile (agents/locks.py): a refusal is one line."""

    def __enter__(self) -> ProfileLock:
        try:
            super().__enter__()
        except LockRefused as e:
            raise SystemExit(str(e)) from None
        return self


class ProgressTail:
    """Print the whole lines the kernels append to `path` (health.emit) while the block runs."""

    def __init__(self, path: Path, prefix: str = "", poll: float = 1.0):
        self.path, self.prefix, self.poll, self._pos = Path(path), prefix, poll, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="acemad-progress-tail", daemon=True)

    def __enter__(self) -> ProgressTail:
        self.path.write_text("")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            self._flush()

    def _flush(self) -> None:
        with contextlib.suppress(OSError), open(self.path, encoding="utf-8", errors="replace") as f:
            f.seek(self._pos)
            chunk = f.read()
            whole = chunk[: chunk.rfind("\n") + 1]
            self._pos += len(whole.encode("utf-8"))
            for line in whole.splitlines():
                print(f"{self.prefix}{line}", flush=True)


def _metas(since: float):
    root = outputs("runs")
    for path in sorted(root.rglob("meta.json")):
        with contextlib.suppress(OSError, ValueError):
            if path.stat().st_mtime >= since - 1 and isinstance(meta := json.loads(path.read_text()), dict):
                yield path.parent, str(path.parent.relative_to(root)), meta


def failed_records(since: float) -> dict[str, tuple[int, dict, str]]:
    """name -> (n, {method: n}, first error) of the runs written since `since` holding failed records."""
    out = {}
    for folder, name, meta in _metas(since):
        if not (meta.get("summary") or {}).get("failed"):
            continue
        hashes = {m.get("config_hash") for m in (meta.get("methods") or {}).values()}
        bad = [
            r
            for r in read_jsonl(folder / "transcripts.jsonl")
            if r.get("status") == "failed" and r.get("config_hash") in hashes
        ]
        if bad:
            out[name] = (len(bad), dict(Counter(str(r.get("method")) for r in bad)), str(bad[0].get("error", "")))
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


def failure_lines(profile: str, runs: dict[str, tuple[int, dict, str]]) -> list[str]:
    lines = [
        f"[{profile}] {name}: {n} failed record(s) ({', '.join(f'{m} {k}' for m, k in by.items())}); first error: "
        f"{' '.join(err.split())[:200]}"
        for name, (n, by, err) in runs.items()
    ]
    return lines + [
        f"[{profile}] failed records are left out of every table (their n says so) and retried by the same "
        "command: rerun it once the endpoint is healthy (answered calls come from the cache)"
    ] * bool(lines)


class InterruptibleKernelManager(AsyncKernelManager):
    """Remembers each kernel's process group: kernels run in sessions of their own, so a terminal's Ctrl-C reaches
    only the driver, and notebooks side by side run in threads that never see papermill's KeyboardInterrupt."""

    groups: set[int] = set()
    _lock = threading.Lock()

    async def _async_post_start_kernel(self, **kw) -> None:
        await super()._async_post_start_kernel(**kw)
        if pgid := getattr(self.provisioner, "pgid", None):
            with self._lock:
                InterruptibleKernelManager.groups.add(pgid)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        with self._lock:
            InterruptibleKernelManager.groups.discard(getattr(self.provisioner, "pgid", None))
        await super()._async_cleanup_resources(restart)


def interrupt_kernels() -> None:
    with InterruptibleKernelManager._lock:
        groups = sorted(InterruptibleKernelManager.groups)
    for pgid in groups:
        with contextlib.suppress(OSError):  # a kernel that has just ended
            os.killpg(pgid, signal.SIGINT)
