"""One run per profile and per response cache, wherever the calls are made: the reproduce driver and the runner.

    from acemad_utils.agents.locks import RunLock, run_lock
    with RunLock("default", llm=True):          # LockRefused naming the holder if another run has it
        ...
    with run_lock("default/main", llm=True):    # what runner.run_experiment takes around every run
        ...

An advisory lock (fcntl.flock, released by the kernel when the process dies, so a crash never leaves a stale
lock) on outputs/runs/<profile>/.lock and, when the run calls an LLM, on the response cache's
outputs/cache/.lock (every LLM profile shares the cache, so two of them could pay for one call). The lock file
holds who took it (pid, host, start time, the command line with keys and URL credentials removed), which a
refusal names. Two runs of one profile once sent 5,948 requests for 3,918 distinct ones, and a
notebook run by hand in JupyterLab while `make reproduce` ran the same profile paid 279 calls twice, because
only the driver took the lock. Now the runner takes it too; the kernels the driver starts skip it (the driver
holds it for them: LOCK_HOLDER_ENV names its pid and profile; the pid must be an ancestor of the kernel and
the one written in the profile's lock file). A lock path that is a directory or a symbolic link is refused
with one line naming it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from acemad_utils.agents.redact import redact
from acemad_utils.data.paths import outputs
from acemad_utils.data.settings import env, flag

LOCK_HOLDER_ENV = "ACEMAD_LOCKED_BY"  # '<pid>:<profile>' of the reproduce driver holding the locks for its kernels
LOCK_WAIT_ENV = "ACEMAD_LOCK_WAIT"  # 1: a run started by hand queues behind the holder instead of refusing


class LockRefused(RuntimeError):
    """Another run holds the lock, or the lock path is not a plain file; str() is the one line to show."""


class RunLock:
    """Hold the profile's (and, for LLM runs, the cache's) advisory lock for a `with` block.
    `hint`: how to queue instead, for the refusal (the driver's --wait, a notebook's ACEMAD_LOCK_WAIT=1)."""

    def __init__(self, profile: str, *, llm: bool, wait: bool = False, hint: str = "rerun with --wait"):
        self.paths = [outputs("runs", profile) / ".lock"] + ([outputs("cache") / ".lock"] if llm else [])
        self.profile, self.wait, self.hint = profile, wait, hint
        self._fds: list[int] = []

    def __enter__(self) -> RunLock:
        try:
            for path in self.paths:
                self._fds.append(self._take(path))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for fd in self._fds:
            os.close(fd)  # releases the lock
        self._fds.clear()

    def _take(self, path: Path) -> int:
        fd = open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(path)
            if not self.wait:
                os.close(fd)
                raise LockRefused(
                    f"[{self.profile}] another run holds {path.parent.name}/{path.name}: {holder}; it would pay for "
                    f"the same calls twice. Wait for it to finish, or {self.hint} to queue behind it"
                ) from None
            print(f"[{self.profile}] waiting for the run holding {path}: {holder}", flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(_me()) + "\n").encode(), 0)
        return fd


def open_lock_file(path: Path) -> int:
    """The lock file's descriptor (created if absent). A directory or a symbolic link there (a dangling one
    made IsADirectoryError / FileNotFoundError tracebacks) is refused with one line naming the fix."""
    what = "a symbolic link" if path.is_symlink() else "a directory" if path.is_dir() else None
    if what is None:
        try:  # O_NOFOLLOW: a link made between the check and the open is refused too (ELOOP)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            what = f"not a file this run can open ({type(e).__name__}: {e.strerror})"
    fix = "rm -r" if what == "a directory" else "rm"
    raise LockRefused(
        f"lock path {path} is {what}; it must be a plain file (it holds only who runs): remove it ({fix} {path}) "
        "and rerun"
    )


def _me() -> dict:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": redact(" ".join(sys.argv))[:300],  # keys and URL credentials out
    }


def _holder_pid(path: Path):
    try:
        h = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return h if isinstance(h, dict) else {}


def _holder(path: Path) -> str:
    h = _holder_pid(path)
    if not h:
        return "a process that has not written its name yet"
    return f"pid {h.get('pid')} on {h.get('host')} since {h.get('since')} ({h.get('command')})"


def _ancestors() -> set[int]:
    """The pids of this process's parents, up to init (Linux /proc; elsewhere the parent only)."""
    out, pid = set(), os.getppid()
    for _ in range(64):
        if pid <= 1 or pid in out:
            break
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])  # field 4 (ppid), after the command name in parentheses
    return out


def held_for_us() -> bool:
    """True in a kernel of a reproduce driver that holds its profile's lock (and the cache's for an LLM run):
    LOCK_HOLDER_ENV is '<pid>:<profile>', that pid is an ancestor of this process and the one written in the
    profile's lock file. Every run of the kernel is then covered, a subset run (a folder of its own) too."""
    pid, _, profile = env(LOCK_HOLDER_ENV).partition(":")
    if not pid.isdigit() or int(pid) not in _ancestors():
        return False
    try:
        path = outputs("runs", profile) / ".lock"
    except ValueError:  # not a profile name
        return False
    return _holder_pid(path).get("pid") == int(pid)


@contextlib.contextmanager
def run_lock(name: str, *, llm: bool) -> Iterator[None]:
    """The lock of run `name` ('<profile>/<experiment>', or a run of its own such as a subset's) for a block:
    nothing to do in a kernel of the reproduce driver that holds it; else RunLock, refusing (LockRefused) or,
    with ACEMAD_LOCK_WAIT=1, queueing behind the holder."""
    lock = RunLock(name.split("/")[0], llm=llm, wait=flag(LOCK_WAIT_ENV),
                   hint=f"set {LOCK_WAIT_ENV}=1")  # fmt: skip
    if held_for_us():
        yield
        return
    with lock:
        yield
