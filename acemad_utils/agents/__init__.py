"""agents: who answers a debate turn (llm_agent over client, or sim), and what a call costs. Nothing is imported here:
the client pulls in the openai SDK (~1 s), which a synthetic kernel never uses."""
