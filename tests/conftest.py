"""Fixtures shared by the test files (pytest finds them by name; no import needed).

    tmp_outputs   ACEMAD_ROOT=tmp_path: outputs/ and data/subsets/ are written there (paths.root() reads it at each
                  call; subprocesses and kernels inherit it), never in the real checkout
    smoke_outputs tmp_outputs with ACEMAD_SMOKE=1 set here, not inherited, so smoke paths hold in any shell
    fake_server   tests/fake_openai.py's server answering every call well (no injected fault), stopped after
    shared        the real benchmark files from $ACEMAD_DATA_DIR (CI sets it); the test is skipped without it

A file that needs more (a budget variable unset, a key set) builds on these in its own fixture.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from acemad_utils.data import benchmarks as data
from tests.fake_openai import FakeOpenAI, FaultInjector


@pytest.fixture
def tmp_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ACEMAD_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture
def smoke_outputs(tmp_outputs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ACEMAD_SMOKE", "1")
    return tmp_outputs


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(FaultInjector(rate=0.0)) as srv:
        yield srv


@pytest.fixture(scope="session")
def shared() -> Path:
    raw = os.environ.get(data.ENV_VAR)
    if not raw:
        pytest.skip(f"{data.ENV_VAR} is not set: point it at the shared benchmarks directory to run this test")
    return data.data_root(raw)
