"""Nothing outlives a killed driver: the reproduce driver's only children are its notebook kernels, and a SIGKILLed
driver (the OOM killer, a closed terminal) must not leave one computing on (ipykernel's parent poller ends a kernel
whose JPY_PARENT_PID is gone)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _stat(pid) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return ["X", "0"]


def _kernels_of(pid: int) -> list[int]:
    return [int(s.parent.name) for s in Path("/proc").glob("[0-9]*/stat")
            if _stat(s.parent.name)[1] == str(pid) and b"ipykernel" in _cmdline(s.parent)]  # fmt: skip


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _wait(condition, seconds: float) -> bool:
    """Poll `condition` until it holds or `seconds` pass (a bound on a failing test, not a timing assertion)."""
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.1)
    return condition()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_kernel_ends_when_its_driver_is_killed():
    env = {**os.environ, "ACEMAD_SMOKE": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "acemad_utils.reproduce", "--profile", "default", "--only", "00_theory"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kernels: list[int] = []
    try:
        assert _wait(lambda: bool(kernels.extend(_kernels_of(proc.pid)) or kernels), 120), "no kernel started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    alive = lambda: [k for k in kernels if _stat(k)[0] not in ("Z", "X")]  # noqa: E731
    ended = _wait(lambda: not alive(), 30)
    left = alive()
    for k in left:  # only when the test fails: leave nothing behind
        os.kill(k, signal.SIGKILL)
    assert ended and left == [], f"kernels {left} outlived the killed driver"
