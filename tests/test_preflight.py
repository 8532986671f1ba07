"""Every endpoint a profile will call is checked before its first notebook runs: a missing key, an endpoint that is
down or a model it does not serve stops the run at once, one line per endpoint naming the parameter, URL and fix."""

from __future__ import annotations

import socket
import time

import pytest
import yaml

from acemad_utils.experiments.profiles import endpoints, notebook_params
from acemad_utils.reproduce import cli as reproduce
from tests.fake_openai import FakeOpenAI


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}/v1"


def _run(tmp_path, monkeypatch, common: dict, notebooks: dict | None = None, only=None) -> list:
    """reproduce.run of a profile with these parameters; returns the notebooks it started (none are executed)."""
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"profile": "mine", "common": common, "notebooks": notebooks or {}}))
    started: list = []
    monkeypatch.setattr(reproduce, "_print_estimate", lambda *a, **k: None)
    monkeypatch.setattr(reproduce, "_run_notebooks", lambda prof, name, nbs, sel, **k: started.extend(sel) or 0)
    reproduce.run(str(path), only or ["03_main_results", "04_heterogeneity", "07_other_models"], force=True)
    return started


def test_a_second_endpoint_down_stops_the_run_before_any_notebook(tmp_path, monkeypatch, tmp_outputs):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight")
    dead = _dead_url()
    with FakeOpenAI() as srv:  # lists "fake" only: the model check would send its one-token request
        common = {"BACKEND": "openai", "MODEL": "main", "BASE_URL": srv.url}
        t0 = time.monotonic()
        with pytest.raises(SystemExit) as e:
            second = {"SECOND_MODEL": "b", "SECOND_BASE_URL": dead}
            _run(tmp_path, monkeypatch, common, {"04_heterogeneity": second, "07_other_models": {"OTHER_MODELS": []}})
        assert time.monotonic() - t0 < 30
        assert srv.count == 0  # nothing was sent, not even the model check's one-token request
    lines = str(e.value).splitlines()
    assert len(lines) == 1, lines
    assert "SECOND_MODEL / SECOND_BASE_URL" in lines[0] and dead in lines[0] and "cannot reach" in lines[0]
    assert "--set SECOND_MODEL=" in lines[0]  # the way to run without it


def test_a_missing_key_or_a_model_not_served_stops_the_run(tmp_path, monkeypatch, tmp_outputs):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(SystemExit, match=r"MODEL / BASE_URL \(gpt-4o-mini at https://api.openai.com.*OPENAI_API_KEY"):
        _run(tmp_path, monkeypatch, {"BACKEND": "openai"}, only=["03_main_results"])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight")
    with FakeOpenAI(models=["served-model"]) as srv:
        with pytest.raises(SystemExit, match="does not serve the model 'typo-model'.*lists served-model"):
            _run(
                tmp_path,
                monkeypatch,
                {"BACKEND": "openai", "MODEL": "typo-model", "BASE_URL": srv.url},
                only=["03_main_results"],
            )
        assert srv.count == 0 and srv.unserved == ["typo-model"]


def test_a_server_that_lists_another_name_but_answers_passes(tmp_path, monkeypatch, tmp_outputs):
    """A llama.cpp server lists its file's name and answers any model name: one one-token request says so."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight")
    with FakeOpenAI() as srv:  # lists "fake", answers anything
        started = _run(
            tmp_path, monkeypatch, {"BACKEND": "openai", "MODEL": "mine", "BASE_URL": srv.url}, only=["03_main_results"]
        )
        assert [b["max_tokens"] for b in srv.requests] == [1]
    assert started == ["03_main_results"]


def test_the_paper_profile_names_every_endpoint_and_runs_with_one():
    eps = endpoints(notebook_params("paper")[1])
    settings = " ".join(e.setting for e in eps)
    assert "MODEL / BASE_URL" in settings and "SECOND_MODEL / SECOND_BASE_URL" in settings
    assert all(f"OTHER_MODELS[{i}]" in settings for i in range(3))
    assert {e.url for e in eps} >= {"http://localhost:8000/v1", "http://localhost:4000/v1"}
    one = endpoints(notebook_params("paper", {"SECOND_MODEL": "", "OTHER_MODELS": []})[1])
    assert [(e.setting, e.model) for e in one] == [("MODEL / BASE_URL", "gpt-4o-mini")]


def test_batch_mode_against_an_endpoint_without_the_batch_api_stops_the_run(tmp_path, monkeypatch, tmp_outputs):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight")
    monkeypatch.setenv("ACEMAD_CALLS_VIA", "batch")
    with FakeOpenAI(models=["main"], batch_api=False) as srv:
        common = {"BACKEND": "openai", "MODEL": "main", "BASE_URL": srv.url}
        with pytest.raises(SystemExit, match="MODEL / BASE_URL .* no Batch API .*CALLS_VIA=files"):
            _run(tmp_path, monkeypatch, common, only=["03_main_results"])
        assert srv.count == 0
