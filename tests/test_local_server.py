"""serve()'s prompt cache reaches llama-cpp-python's server as its own settings, only when asked for (no server is
started here; the real one: tests/test_local_model.py)."""

from __future__ import annotations

import importlib.util
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from acemad_utils.agents import local_server as LS
from acemad_utils.data import paths as P


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
    plain = LS.server_command("/m.gguf", 1)
    off = parse_model_from_args(ModelSettings, parser.parse_args(plain[plain.index("--model") :]))
    assert off.cache is False


def test_a_server_ends_with_the_process_that_started_it():
    """A kernel SIGKILLed (with its driver, by the OOM killer) never runs serve()'s cleanup: the server it started
    gets SIGTERM from the kernel's end (here http.server stands in for llama.cpp's, started the same way)."""
    starter = (  # prints the server's pid once it serves (past its start), then waits to be killed
        "import socket, subprocess, sys, time\nfrom acemad_utils.agents import local_server as LS\n"
        "port = LS.free_port()\n"
        "p = subprocess.Popen(LS.tied('http.server', [str(port), '--bind', '127.0.0.1']), stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL)\n"
        "while socket.socket().connect_ex(('127.0.0.1', port)):\n    time.sleep(0.05)\n"
        "print(p.pid, flush=True)\ntime.sleep(300)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(P.CHECKOUT)}
    parent = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True, env=env)
    server = int(parent.stdout.readline())
    assert _alive(server)
    parent.kill()
    parent.wait(timeout=30)
    deadline = time.monotonic() + 30  # a bound, not a wait
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _alive(server)
    if left:  # only when the test fails: leave nothing behind
        os.kill(server, signal.SIGKILL)
    assert not left, "the server outlived the process that started it"


def _alive(pid: int) -> bool:  # not a zombie either (its parent is gone: init reaps it)
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
    except (FileNotFoundError, IndexError):
        return False
