"""Fixtures shared by the test files (pytest finds them by name; no import needed).

    tmp_outputs   data/ and outputs/ of a temporary checkout: paths.ROOT and paths.DATA point under tmp_path,
                  so a test never reads or writes the real checkout's runs (runner.outputs reads ROOT at call time)
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
from acemad_utils.data import paths as P
from tests.fake_openai import FakeOpenAI, FaultInjector


@pytest.fixture
def tmp_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(P, "ROOT", tmp_path)
    monkeypatch.setattr(P, "DATA", tmp_path / "data")
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
