"""The runner takes the profile's lock (and the response cache's for an LLM run): a notebook run by hand beside
another run refuses with one line (or queues with ACEMAD_LOCK_WAIT=1); the driver's kernels skip the lock it holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from acemad_utils.agents.locks import LOCK_HOLDER_ENV, LockRefused, RunLock, run_lock
from acemad_utils.data import paths as P
from tests.fake_openai import FakeOpenAI, FaultInjector

KEY = "sk-lock-test-key-123456"
REPO = Path(__file__).resolve().parent.parent

# What a notebook cell run by hand does: one LLM run of profile 'probe' (3 demo questions, AceMAD N=2 T=1).
BY_HAND = """
import os, sys
os.environ["ACEMAD_ROOT"] = sys.argv[1]
from acemad_utils.agents.locks import LockRefused
from acemad_utils.data.benchmarks import load_demo
from acemad_utils.experiments.setup import Setup
from acemad_utils.protocol.config import DebateConfig
S = Setup(profile='probe', backend='openai', source='demo', model='m', base_url=sys.argv[2], workers=2)
try:
    meta, recs = S.run('locked', [DebateConfig(method='acemad', n_agents=2, rounds=1)], questions=load_demo()[:3])
    print('DONE', meta['summary']['ok'], flush=True)
except LockRefused as e:
    print('REFUSED', e, flush=True)
S.close()
"""


def _by_hand(root: Path, url: str, **env) -> subprocess.Popen:
    full = {**os.environ, "OPENAI_API_KEY": KEY, "ACEMAD_SMOKE": "1", "PYTHONPATH": str(REPO)}
    full.pop(LOCK_HOLDER_ENV, None)  # only a test that names the driver passes it
    full.update(env)
    return subprocess.Popen(
        [sys.executable, "-c", BY_HAND, str(root), url], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_two_runs_at_once_pay_each_call_once(smoke_outputs):
    """Two processes start the same LLM run at once: one runs, the other refuses with one line naming the holder;
    every request is distinct. The server holds every call until one process has ended (an event, not a sleep)."""
    plan = FaultInjector(0.0)
    one_ended = threading.Event()

    def held(body, n):
        one_ended.wait(300)
        return plan(body, n)

    with FakeOpenAI(held) as srv:
        procs = [_by_hand(smoke_outputs, srv.url, ACEMAD_CALL_TIMEOUT="600") for _ in range(2)]

        def finish(proc: subprocess.Popen) -> tuple:
            try:
                return proc.communicate(timeout=600)
            finally:
                one_ended.set()

        with ThreadPoolExecutor(2) as pool:
            outs = list(pool.map(finish, procs))
        bodies = [json.dumps(b, sort_keys=True) for b in srv.requests]
    lines = [o.strip() for o, _ in outs]
    assert sorted(x.split()[0] for x in lines) == ["DONE", "REFUSED"], outs
    refused = next(x for x in lines if x.startswith("REFUSED"))
    assert "another run holds" in refused and "ACEMAD_LOCK_WAIT=1" in refused and "pid " in refused
    assert len(refused.splitlines()) == 1
    assert bodies and len(bodies) == len(set(bodies))  # nothing paid twice


def test_a_run_by_hand_queues_with_lock_wait(smoke_outputs):
    called, plan = threading.Event(), FaultInjector(0.0)
    with FakeOpenAI(lambda body, n: called.set() or plan(body, n)) as srv:
        with RunLock("probe", llm=True):
            proc = _by_hand(smoke_outputs, srv.url, ACEMAD_LOCK_WAIT="1")
            first = proc.stdout.readline()  # printed just before it blocks on the lock
            assert "waiting for the run holding" in first
            assert not called.wait(1.0) and proc.poll() is None  # while we hold the lock it sends nothing
        out, err = proc.communicate(timeout=300)
        assert out.splitlines()[-1] == "DONE 3", (out, err)
        assert srv.count > 0


@pytest.mark.slow  # over 5 s on a loaded 2-core machine (make test-fast leaves it out)
def test_a_kernel_of_the_driver_skips_the_lock_the_driver_holds(smoke_outputs, monkeypatch):
    """The driver (this process) holds the lock and names itself in LOCK_HOLDER_ENV; its kernel (a child) runs."""
    with RunLock("probe", llm=True):
        with FakeOpenAI(FaultInjector(0.0)) as srv:
            proc = _by_hand(smoke_outputs, srv.url)  # no env: refused
            assert proc.communicate(timeout=300)[0].startswith("REFUSED")
            out, err = _by_hand(smoke_outputs, srv.url, **{LOCK_HOLDER_ENV: f"{os.getpid()}:probe"}).communicate(
                timeout=300
            )
            assert out.startswith("DONE 3"), err[-2000:]
        # a stranger naming us in the variable but not our child: refused (the pid must be an ancestor)
        monkeypatch.setenv(LOCK_HOLDER_ENV, "1:probe")
        with pytest.raises(LockRefused, match="another run holds probe/.lock"), run_lock("probe/x", llm=False):
            pass


@pytest.mark.parametrize("kind", ["directory", "dangling link", "link to a file"])
def test_a_lock_path_that_is_not_a_plain_file_is_one_line(smoke_outputs, kind, tmp_path):
    lock = P.outputs("runs", "probe") / ".lock"
    if kind == "directory":
        lock.mkdir()
    elif kind == "dangling link":
        lock.symlink_to(tmp_path / "nowhere" / "x")
    else:
        (tmp_path / "f").write_text("")
        lock.symlink_to(tmp_path / "f")
    with pytest.raises(LockRefused) as e, RunLock("probe", llm=False):
        pass
    msg = str(e.value)
    assert str(lock) in msg and "remove it (rm" in msg and "\n" not in msg
    assert ("a directory" if kind == "directory" else "a symbolic link") in msg
