"""serve()'s prompt cache reaches llama-cpp-python's server as its own settings, only when asked for (no server is
started here; the real one: tests/test_local_model.py)."""

from __future__ import annotations

import importlib.util
import io
from types import SimpleNamespace

import pytest

from acemad_utils.agents import local_server as LS


class Ready(io.BytesIO):
    status = 200


@pytest.fixture
def fake_start(monkeypatch):
    """serve() with Popen and the readiness probe faked: returns a function giving the command it ran."""
    monkeypatch.setattr(LS, "check_server_installed", lambda: None)
    started: list = []  # the commands serve() ran, in processes that never exit by themselves
    monkeypatch.setattr(LS.subprocess, "Popen", lambda cmd, **kw: started.append(cmd) or SimpleNamespace(
        returncode=None, poll=lambda: None, terminate=lambda: None, wait=lambda timeout=None: 0))  # fmt: skip
    monkeypatch.setattr(LS.urllib.request, "urlopen", lambda url, timeout=None: Ready(b"{}"))

    def start(**kw) -> list:
        with LS.serve(gguf="/m.gguf", port=8123, **kw) as url:
            assert url == "http://127.0.0.1:8123/v1"
        return started[-1]

    return start


def _opt(cmd: list, name: str):
    return cmd[cmd.index(name) + 1] if name in cmd else None


@pytest.mark.parametrize(
    "kw, env, on",
    [
        ({"prompt_cache": True}, "", True),
        ({"prompt_cache": False}, "1", False),
        ({}, "", LS.PROMPT_CACHE),
        ({}, "1", True),
        ({}, "off", False),
    ],
)
def test_the_prompt_cache_settings_reach_the_server_only_when_asked(fake_start, monkeypatch, kw, env, on):
    """The argument first, then ACEMAD_PROMPT_CACHE, then the default."""
    monkeypatch.setenv("ACEMAD_PROMPT_CACHE", env)
    cmd = fake_start(prompt_cache_bytes=1 << 28, **kw)
    assert _opt(cmd, "--model") == "/m.gguf" and _opt(cmd, "--n_ctx") == "8192"
    cache = [_opt(cmd, "--cache"), _opt(cmd, "--cache_type"), _opt(cmd, "--cache_size")]
    assert cache == (["true", "ram", str(1 << 28)] if on else [None] * 3)


def test_a_prompt_cache_value_that_is_not_on_or_off_is_refused(fake_start, monkeypatch):
    monkeypatch.setenv("ACEMAD_PROMPT_CACHE", "maybe")
    with pytest.raises(LS.LocalServerError, match="ACEMAD_PROMPT_CACHE"):
        fake_start()


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")
def test_the_installed_server_parses_the_command_into_its_cache_settings():
    """The names and value formats are the installed llama-cpp-python's (its own argument parser)."""
    import argparse

    pytest.importorskip("pydantic_settings")
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, Settings

    cmd = LS.server_command("/m.gguf", 8123, prompt_cache=True, prompt_cache_bytes=123456)
    parser = argparse.ArgumentParser()
    add_args_from_model(parser, Settings)
    args = parser.parse_args(cmd[cmd.index("--model") :])
    s = parse_model_from_args(ModelSettings, args)
    assert (s.cache, s.cache_type, s.cache_size, s.n_ctx) == (True, "ram", 123456, 8192)
    off = parse_model_from_args(ModelSettings, parser.parse_args(LS.server_command("/m.gguf", 1)[3:]))
    assert off.cache is False
