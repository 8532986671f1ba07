"""agents: who answers a debate turn, and what a call costs.

    client        LLMClient: the chat client on the openai SDK (cache, MAX_USD, breaker, deadlines, keys kept out)
    llm_agent     LLMAgent / LLMPopulation: one debater per AgentSpec over an LLMClient; pool: a round's agents at once
    cache         ResponseCache (sqlite); batch: CALLS_VIA batch / files; local_server: llama.cpp for a local GGUF
    sim, streams  the synthetic population (a batch of debates as arrays)
    prices, budget, tokenmodel the price table, the MAX_USD cap, characters -> tokens
Names load on first use (PEP 562): the client pulls in the openai SDK (~1 s), which a synthetic kernel never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acemad_utils.agents.client import GenerateConfig, LLMClient
    from acemad_utils.agents.llm_agent import LLMAgent, LLMPopulation
    from acemad_utils.agents.sim import SimParams, SimPopulation, make_items

_LAZY = {"GenerateConfig": "client", "LLMClient": "client", "LLMAgent": "llm_agent", "LLMPopulation": "llm_agent",
         "SimParams": "sim", "SimPopulation": "sim", "make_items": "sim"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = ["GenerateConfig", "LLMAgent", "LLMClient", "LLMPopulation", "SimParams", "SimPopulation", "make_items"]
