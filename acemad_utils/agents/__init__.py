"""agents: who answers a debate turn, and what a call costs.

    client        LLMClient: the one place that talks to an OpenAI-compatible endpoint (request, retry, usage,
                  redaction: request.py, retry.py, usage.py, redact.py)
    cache         ResponseCache: every reply in sqlite (JSON values), keyed by prompt and call scope
    batch         CALLS_VIA batch / files: the OpenAI Batch API and vLLM's run_batch (batch_store: its tables)
    local_server  start and stop llama.cpp's OpenAI-compatible server for a local GGUF model
    llm_agent     LLMAgent / LLMPopulation: one debater per AgentSpec over an LLMClient
    sim           SimPopulation: the synthetic population (no LLM), per agent: the reference implementation
    sim_vector    VectorSimPopulation: the same model for a batch of debates as arrays (what the runs use)
    streams       counter-based random draws (keyed by debate, counted by agent, round, purpose)
    prices        the price table; budget: the MAX_USD cap; tokenmodel: characters -> tokens
Prices and the cap live here, not in cost/, because the client enforces them on every call.
"""

from acemad_utils.agents.client import GenerateConfig, LLMClient
from acemad_utils.agents.llm_agent import LLMAgent, LLMPopulation
from acemad_utils.agents.sim import SimParams, SimPopulation, make_items

__all__ = ["GenerateConfig", "LLMAgent", "LLMClient", "LLMPopulation", "SimParams", "SimPopulation", "make_items"]
