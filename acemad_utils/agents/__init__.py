"""agents: who answers a debate turn, and what a call costs.

    client      LLMClient on the openai SDK (cache, MAX_USD, breaker, deadlines, keys kept out); health, redact
    llm_agent   LLMAgent / LLMPopulation over LLMClients; pool: a round's agents at once
    cache       ResponseCache (sqlite); batch: CALLS_VIA batch / files; local_server: llama.cpp for a local GGUF
    sim, streams  the synthetic population;  prices, budget, tokenmodel: the price table, MAX_USD, chars -> tokens
    locks       one run per profile and per response cache
Nothing is imported here: the client pulls in the openai SDK (~1 s), which a synthetic kernel never uses.
"""
