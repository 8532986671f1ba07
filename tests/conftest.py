"""Fixtures shared by the test files (pytest finds them by name); a file that needs more builds on these."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from acemad_utils.agents import budget as B
from acemad_utils.data import benchmarks as data
from tests.fake_openai import FakeOpenAI, FaultInjector


@pytest.fixture
def tmp_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ACEMAD_ROOT=tmp_path: outputs/ and data/subsets/ go there (subprocesses and kernels inherit it)."""
    monkeypatch.setenv("ACEMAD_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture
def smoke_outputs(tmp_outputs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_outputs in smoke mode, set here rather than inherited from the shell."""
    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    return tmp_outputs


@pytest.fixture
def full_outputs(tmp_outputs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_outputs at full size (no smoke caps), with no spend cap, budget start or calls_via from the shell."""
    for var in ("ACEMAD_SMOKE", B.ENV_MAX, B.ENV_SINCE, "ACEMAD_CALLS_VIA"):
        monkeypatch.delenv(var, raising=False)
    return tmp_outputs


CANARY_KEY = "sk-acemad-SECRET-canary-123"  # an API key that no file, log or message may show


@pytest.fixture
def keyed_outputs(smoke_outputs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """smoke_outputs with OPENAI_API_KEY=CANARY_KEY, and no OPENAI_BASE_URL or spend cap from the shell."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    for var in ("OPENAI_BASE_URL", B.ENV_MAX):
        monkeypatch.delenv(var, raising=False)
    return smoke_outputs


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAI]:
    """tests/fake_openai.py's server answering every call well (no injected fault)."""
    with FakeOpenAI(FaultInjector(rate=0.0)) as srv:
        yield srv


def acemad_record(scores, right, labels: str = "ABCD", failed=(), **fields) -> dict:
    """A one-round AceMAD record: agents with these scores, right (answer A) or wrong (answer B); `failed` agents'
    commitments did not parse; `fields` are added to the record."""
    pad = [0] * (len(labels) - 2)
    entries = [
        {"agent": a, "p": ([0.9, 0.1] if ok else [0.1, 0.9]) + pad, "score": s, "parse_failure": a in failed}
        for a, (s, ok) in enumerate(zip(scores, right))
    ]
    return {"question_id": "q", "status": "ok", "labels": list(labels), "answer": "A", "rounds": [entries], **fields}


@pytest.fixture(scope="session")
def shared() -> Path:
    """The real benchmark files from $ACEMAD_DATA_DIR (CI sets it); the test is skipped without it."""
    raw = os.environ.get(data.ENV_VAR)
    if not raw:
        pytest.skip(f"{data.ENV_VAR} is not set: point it at the shared benchmarks directory to run this test")
    return data.data_root(raw)
