"""The default path's fast paths keep every result: worker processes, the paused collector, the line parser.

The runner answers the questions of a pure population in forked worker processes (runner._run_in_processes)
and saves their lines in question order in the parent. These tests hold it to what one process does: the
transcript file is byte-identical to a run in one process, run_and_load returns what load_run reads, a
resume after a Ctrl-C ends with the bytes of an uninterrupted run, and no worker is left behind.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.data import paths as P
from acemad_utils.data import transcripts
from acemad_utils.data.transcripts import gc_paused, parse_line, transcript_bytes
from acemad_utils.experiments import runner
from acemad_utils.protocol.config import DebateConfig

CONFIGS = [DebateConfig(method="acemad", n_agents=5, rounds=3), DebateConfig(method="majority", n_agents=5)]


@pytest.fixture
def tmp_outputs(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "ROOT", tmp_path)
    monkeypatch.setattr(P, "DATA", tmp_path / "data")
    return tmp_path


def test_worker_processes_write_the_bytes_of_one_process(tmp_outputs, monkeypatch):
    items = make_items(300, k=4, seed=5)  # 600 questions: enough for 2 workers (2 * CHUNK each)
    monkeypatch.setenv(runner.PROCESSES_ENV, "1")
    one = runner.run_experiment("one", items, CONFIGS, SimPopulation(seed=3), progress=False)
    monkeypatch.setenv(runner.PROCESSES_ENV, "2")
    pool_runs = []
    real = runner._run_in_processes
    monkeypatch.setattr(runner, "_run_in_processes", lambda run, n: pool_runs.append(n) or real(run, n))
    meta, records = runner.run_and_load("two", items, CONFIGS, SimPopulation(seed=3), progress=False)
    assert pool_runs == [2]  # the questions really went to two worker processes
    assert transcript_bytes(one / "transcripts.jsonl") == transcript_bytes(runner.run_dir("two") / "transcripts.jsonl")
    assert records == transcripts.load_run("two")[1]  # the parsed lines, as load_run reads them
    assert meta["summary"]["ok"] == 600


def _opened(name: str, items) -> runner._Run:
    """A run's state as the runner opens it (meta.json written, nothing answered yet)."""
    kw = dict(repeats=1, workers=None, profile="t", progress=False, extra_meta=None)
    return runner._open_run(name, items, CONFIGS, SimPopulation(), **kw)


def test_few_questions_or_impure_populations_stay_in_this_process(tmp_outputs, monkeypatch):
    monkeypatch.setenv(runner.PROCESSES_ENV, "2")
    run = _opened("few", make_items(20, seed=1))
    assert runner.processes_for(run) == 1  # 40 questions: not worth a fork
    run.todo = run.todo * 10
    assert runner.processes_for(run) == 2
    run.population = type("Impure", (SimPopulation,), {"pure": False})()
    assert runner.processes_for(run) == 1
    monkeypatch.setenv(runner.PROCESSES_ENV, "two")
    run.population = SimPopulation()
    with pytest.raises(ValueError, match="ACEMAD_PROCESSES='two'"):
        runner.processes_for(run)


WORKER = """
import sys
from pathlib import Path
from acemad_utils.data import paths
paths.ROOT = Path(sys.argv[1])
from acemad_utils.agents.sim import SimPopulation, make_items
from acemad_utils.experiments.runner import RunInterrupted, run_experiment
from acemad_utils.protocol.config import DebateConfig
cfg = [DebateConfig(method="acemad", n_agents=15, rounds=5), DebateConfig(method="decentralized", n_agents=15)]
try:
    run_experiment("pool", make_items(1500, k=5, seed=9), cfg, SimPopulation(seed=1), progress=False)
except RunInterrupted as e:
    print(e, file=sys.stderr)
    sys.exit(130)
"""


def _worker(root: Path) -> subprocess.Popen:
    env = {**os.environ, "ACEMAD_SMOKE": "0", runner.PROCESSES_ENV: "2"}
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


@pytest.mark.slow
def test_ctrl_c_in_a_run_of_worker_processes_then_resume(tmp_path):
    """SIGINT to the whole process group (a terminal's Ctrl-C) mid-run: the workers ignore it, the parent saves
    whole lines only and exits 130 with the one-line message; no worker outlives it; the resume completes to
    the bytes of an uninterrupted run."""
    root = tmp_path / "interrupted"
    path = root / "outputs" / "runs" / "pool" / "transcripts.jsonl"
    proc = _worker(root)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= 200:
            break
        time.sleep(0.01)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    kids = _children(proc.pid)
    assert len(kids) == 2, kids  # the two workers
    for pid in [proc.pid, *kids]:  # what the terminal does: every process of the group gets the signal
        os.kill(pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    raw = path.read_bytes()
    saved = raw.count(b"\n")
    assert err.strip().splitlines()[-1] == f"interrupted: {saved} of 3000 records saved; rerun to resume", err
    assert "Traceback" not in err and raw.endswith(b"\n")
    assert all(json.loads(line)["status"] == "ok" for line in raw.splitlines())  # whole records only
    assert not any(Path(f"/proc/{k}").exists() and _state(k) != "Z" for k in kids)  # no worker left running
    done = _worker(root)
    assert done.wait(timeout=300) == 0, done.stderr.read() if done.stderr else ""
    ref = _worker(tmp_path / "reference")
    assert ref.wait(timeout=300) == 0
    assert transcript_bytes(path) == transcript_bytes(tmp_path / "reference/outputs/runs/pool/transcripts.jsonl")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "gone"


def test_gc_paused_restores_the_collector_and_freezes_what_was_loaded():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        loaded = [[float(i)] for i in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() >= len(loaded)  # the loaded lists are never scanned again
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector that was off stays off
    finally:
        gc.enable()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=6))
@settings(max_examples=300, deadline=None)
def test_parse_line_gives_what_json_loads_gives(rec):
    """Every line json.dumps writes (NaN, Infinity, lone surrogates, big integers included) parses to the same
    objects as json.loads gives; NaN is compared by its repr."""
    line = json.dumps(rec, ensure_ascii=False, sort_keys=True)
    for raw in (line, line.encode("utf-8", "surrogatepass")):
        try:
            expected = json.loads(raw)
        except ValueError:
            with pytest.raises(ValueError):
                parse_line(raw)
            continue
        assert repr(parse_line(raw)) == repr(expected)


class _Stuck(SimPopulation):
    """A pure population whose worker hangs on one question (as if a lock held at fork time never came free)."""

    def agents(self, specs, question, repeat=0):
        if question.id.endswith("00150"):
            time.sleep(60)
        return super().agents(specs, question, repeat)


def test_a_stuck_worker_process_is_an_error_not_a_hang(tmp_outputs, monkeypatch):
    monkeypatch.setenv(runner.PROCESSES_ENV, "2")
    monkeypatch.setattr(runner, "WORKER_TIMEOUT_S", 2)
    items = make_items(300, k=4, seed=5)
    with pytest.raises(RuntimeError, match="a worker process answered no task of 64 questions in 2 s"):
        runner.run_experiment("stuck", items, CONFIGS[:1], _Stuck(seed=3), progress=False)
    saved = (runner.run_dir("stuck") / "transcripts.jsonl").read_bytes()
    assert saved.count(b"\n") == 128  # the two tasks before the stuck one, whole
    monkeypatch.setenv(runner.PROCESSES_ENV, "1")
    runner.run_experiment("stuck", items, CONFIGS[:1], SimPopulation(seed=3), progress=False)  # the resume
    assert len(transcripts.load_run("stuck")[1]) == 300


def test_no_worker_processes_outside_linux(tmp_outputs, monkeypatch):
    monkeypatch.setenv(runner.PROCESSES_ENV, "2")
    run = _opened("mac", make_items(300, seed=1))
    assert runner.processes_for(run) == 2
    monkeypatch.setattr(runner.sys, "platform", "darwin")
    assert runner.processes_for(run) == 1
