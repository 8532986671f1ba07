"""agents: who answers a debate turn, and what a call costs.

    client        LLMClient: the one place that talks to an OpenAI-compatible endpoint (request, retry, usage,
                  redaction, HTTP with deadlines: request.py, retry.py, usage.py, redact.py, transport.py)
    pool          the agents of one round at once (threads), for populations whose agents do I/O
    cache         ResponseCache: every reply in sqlite (JSON values), keyed by prompt and call scope
    batch         CALLS_VIA batch / files: the OpenAI Batch API and vLLM's run_batch (batch_store: its tables)
    local_server  start and stop llama.cpp's OpenAI-compatible server for a local GGUF model
    llm_agent     LLMAgent / LLMPopulation: one debater per AgentSpec over an LLMClient
    sim           SimPopulation: the synthetic population (no LLM), a batch of debates as arrays
    streams       counter-based random draws (keyed by debate, counted by agent, round, purpose)
    prices        the price table; budget: the MAX_USD cap; tokenmodel: characters -> tokens
Prices and the cap live here, not in cost/, because the client enforces them on every call.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acemad_utils.agents.client import GenerateConfig, LLMClient
    from acemad_utils.agents.llm_agent import LLMAgent, LLMPopulation
    from acemad_utils.agents.sim import SimParams, SimPopulation, make_items

# Loaded on first use (PEP 562), not here: importing any agents/ module runs this file, and the client pulls in
# the openai SDK (~1 s), which a synthetic profile's notebook kernel never uses.
_LAZY = {
    "GenerateConfig": "client",
    "LLMClient": "client",
    "LLMAgent": "llm_agent",
    "LLMPopulation": "llm_agent",
    "SimParams": "sim",
    "SimPopulation": "sim",
    "make_items": "sim",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = ["GenerateConfig", "LLMAgent", "LLMClient", "LLMPopulation", "SimParams", "SimPopulation", "make_items"]
