"""Workers exit with their parent (issue 33.7): the forked worker processes of a synthetic run die when the
driver is SIGKILLed (prctl PR_SET_PDEATHSIG), instead of computing on for about a minute."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DRIVER = """
import sys
from pathlib import Path
from acemad_utils.data import paths
paths.ROOT = Path(sys.argv[1])
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.experiments.runner import run_experiment
from acemad_utils.protocol.config import DebateConfig
print('start', flush=True)
run_experiment('probe/workers', make_items(3000, k=4, seed=1), [DebateConfig(n_agents=60, rounds=10)],
               SimPopulation(seed=0), progress=False)
"""


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited (it waits for init to reap it)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker processes are Linux only")
def test_workers_exit_when_the_driver_is_killed(tmp_path):
    env = {**os.environ, "ACEMAD_PROCESSES": "2", "PYTHONPATH": str(REPO), "ACEMAD_SMOKE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "start"
    workers: list[int] = []
    deadline = time.monotonic() + 120
    while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        workers = _children(proc.pid)
    assert len(workers) >= 2, "the run did not start its worker processes"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # A task of 64 debates of 60 agents over 10 rounds takes several seconds: a worker that only notices its
    # parent's death between tasks is still alive after 3 s; one with PDEATHSIG is gone at once.
    deadline = time.monotonic() + 3
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if _alive(w)]
    for w in left:  # (only when the test fails: leave nothing behind)
        os.kill(w, signal.SIGKILL)
    assert left == [], f"workers {left} outlived the killed driver"
