"""The synthetic population's fast paths keep every result: batches of arrays (runner._Run.here), the paused
collector, the line parser; a resume after a Ctrl-C ends with the bytes of an uninterrupted run."""

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
from acemad_utils.data import transcripts
from acemad_utils.data.transcripts import gc_paused, parse_line, transcript_bytes
from acemad_utils.experiments import runner
from acemad_utils.protocol.config import DebateConfig

CONFIGS = [DebateConfig(method="acemad", n_agents=5, rounds=3), DebateConfig(method="majority", n_agents=5)]


def test_run_and_load_returns_what_load_run_reads(tmp_outputs, monkeypatch):
    items = make_items(300, k=4, seed=5)
    monkeypatch.setattr(runner, "BATCH", 64)
    meta, records = runner.run_and_load("two", items, CONFIGS, SimPopulation(seed=3), progress=False)
    assert records == transcripts.load_run("two")[1]  # the parsed lines, as load_run reads them
    assert meta["summary"]["ok"] == 600


WORKER = """
import os, sys
os.environ["ACEMAD_ROOT"] = sys.argv[1]
from acemad_utils.agents.sim import make_items
from acemad_utils.agents.sim import SimPopulation
from acemad_utils.experiments import runner
from acemad_utils.experiments.runner import RunInterrupted, run_experiment
from acemad_utils.protocol.config import DebateConfig
runner.BATCH = 16  # many batches: the interrupt lands between two of them
cfg = [DebateConfig(method="acemad", n_agents=15, rounds=5), DebateConfig(method="decentralized", n_agents=15)]
try:
    run_experiment("pool", make_items(1500, k=5, seed=9), cfg, SimPopulation(seed=1), progress=False)
except RunInterrupted as e:
    print(e, file=sys.stderr)
    sys.exit(130)
"""


def _worker(root: Path) -> subprocess.Popen:
    env = {**os.environ, "ACEMAD_SMOKE": "0"}
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


@pytest.mark.slow
def test_ctrl_c_in_a_batched_run_then_resume(tmp_path):
    """SIGINT (a terminal's Ctrl-C) mid-run: the run saves whole lines only and exits 130 with the one-line
    message; the resume completes to the bytes of an uninterrupted run."""
    root = tmp_path / "interrupted"
    path = root / "outputs" / "runs" / "pool" / "transcripts.jsonl"
    proc = _worker(root)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= 200:
            break
        time.sleep(0.01)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    raw = path.read_bytes()
    saved = raw.count(b"\n")
    assert err.strip().splitlines()[-1] == f"interrupted: {saved} of 3000 records saved; rerun to resume", err
    assert "Traceback" not in err and raw.endswith(b"\n")
    assert all(json.loads(line)["status"] == "ok" for line in raw.splitlines())  # whole records only
    done = _worker(root)
    assert done.wait(timeout=300) == 0, done.stderr.read() if done.stderr else ""
    ref = _worker(tmp_path / "reference")
    assert ref.wait(timeout=300) == 0
    assert transcript_bytes(path) == transcript_bytes(tmp_path / "reference/outputs/runs/pool/transcripts.jsonl")


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
@settings(max_examples=100, deadline=None)
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
