"""One run per profile and per response cache (two runs sharing the cache could pay for one call twice): filelock's
lock (the kernel releases it when the process dies), its holder named beside it (<lock>.holder) for the refusal.
The kernels the reproduce driver starts skip the locks it holds for them (LOCK_HOLDER_ENV)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sys
from pathlib import Path

from filelock import FileLock, Timeout

from acemad_utils.agents.redact import redact
from acemad_utils.data.paths import outputs
from acemad_utils.data.settings import env, flag

LOCK_HOLDER_ENV = "ACEMAD_LOCKED_BY"  # '<pid>:<profile>' of the reproduce driver holding the locks for its kernels
LOCK_WAIT_ENV = "ACEMAD_LOCK_WAIT"  # 1: a run started by hand queues behind the holder instead of refusing
HOLDER_SUFFIX = ".holder"  # rewritten by every run (the up-to-date check skips it)


class LockRefused(RuntimeError): ...  # another run holds the lock, or its path is not a plain file: one line


def _holder(path: Path) -> dict:
    try:
        h = json.loads(path.with_name(path.name + HOLDER_SUFFIX).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return h if isinstance(h, dict) else {}


class RunLock(contextlib.ExitStack):
    """The profile's (and, for LLM runs, the cache's) lock for a `with` block; `hint`: how to queue instead."""

    def __init__(self, profile: str, *, llm: bool, wait: bool = False, hint: str = "rerun with --wait"):
        super().__init__()
        self.paths = [outputs("runs", profile) / ".lock"] + ([outputs("cache") / ".lock"] if llm else [])
        self.profile, self.wait, self.hint = profile, wait, hint

    def __enter__(self) -> RunLock:
        try:
            for path in self.paths:
                self.callback(self._take(path).release)
        except BaseException:
            self.close()
            raise
        return self

    def _take(self, path: Path) -> FileLock:
        what = "a symbolic link" if path.is_symlink() else "a directory" if path.is_dir() else None
        if what is not None:
            raise LockRefused(f"lock path {path} is {what}; it must be a plain file (it holds only who runs): remove "
                              f"it ({'rm -r' if what == 'a directory' else 'rm'} {path}) and rerun")  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(path, thread_local=False, preserve_lock_file=True)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            h = _holder(path)
            who = (f"pid {h.get('pid')} on {h.get('host')} since {h.get('since')} ({h.get('command')})" if h
                   else "a process that has not written its name yet")  # fmt: skip
            if not self.wait:
                raise LockRefused(f"[{self.profile}] another run holds {path.parent.name}/{path.name}: {who}; it "
                                  f"would pay for the same calls twice. Wait for it to finish, or {self.hint} to "
                                  "queue behind it") from None  # fmt: skip
            print(f"[{self.profile}] waiting for the run holding {path}: {who}", flush=True)
            lock.acquire()
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": redact(" ".join(sys.argv))[:300],
              "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}  # fmt: skip
        path.with_name(path.name + HOLDER_SUFFIX).write_text(json.dumps(me) + "\n")
        return lock


def held_for_us() -> bool:
    """True in a kernel of the reproduce driver holding its profile's lock: LOCK_HOLDER_ENV names an ancestor (Linux
    /proc; elsewhere the parent) that holds it."""
    pid, _, profile = env(LOCK_HOLDER_ENV).partition(":")
    if not pid.isdigit():
        return False
    ancestors: set[int] = set()
    p = os.getppid()
    while p > 1 and p not in ancestors and len(ancestors) < 64:
        ancestors.add(p)
        try:
            p = int(Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()[1])  # ppid, after (command)
        except OSError:
            break
    if int(pid) not in ancestors:
        return False
    try:
        path = outputs("runs", profile) / ".lock"
    except ValueError:  # not a profile name
        return False
    return _holder(path).get("pid") == int(pid)


def run_lock(name: str, *, llm: bool) -> contextlib.AbstractContextManager:
    """The lock of run '<profile>/<experiment>': none in the holding driver's kernel, else RunLock (LOCK_WAIT_ENV)."""
    if held_for_us():
        return contextlib.nullcontext()
    return RunLock(name.split("/")[0], llm=llm, wait=flag(LOCK_WAIT_ENV), hint=f"set {LOCK_WAIT_ENV}=1")
