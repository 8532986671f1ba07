"""Nothing outlives a killed driver. Synthetic runs no longer fork worker processes (the vectorized
population answers in the kernel's own process), so the reproduce driver's only children are its notebook
kernels: a SIGKILLed driver (the OOM killer, a closed terminal) must not leave a kernel computing on. jupyter_client
tells each kernel its parent (JPY_PARENT_PID) and ipykernel's parent poller ends the kernel once that parent is
gone; this test holds the project to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _kernels_of(pid: int) -> list[int]:
    """Processes whose parent is `pid` and whose command line runs an ipykernel."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rpartition(")")[2].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"ipykernel" in cmd:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(condition, seconds: float) -> bool:
    """Poll `condition` until it holds or `seconds` pass (a bound on a failing test, not a timing assertion)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
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
    ended = _wait(lambda: not any(map(_alive, kernels)), 30)
    left = [k for k in kernels if _alive(k)]
    for k in left:  # only when the test fails: leave nothing behind
        os.kill(k, signal.SIGKILL)
    assert ended and left == [], f"kernels {left} outlived the killed driver"
