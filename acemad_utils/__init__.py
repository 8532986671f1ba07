"""acemad_utils: the thin package behind the AceMAD notebooks.

Modules, one concern each (data flows top to bottom):
    schema      Question, AgentSpec, Turn, Step, Agent / Population interfaces
    config      DebateConfig: one dataclass for every method and ablation
    beliefs     pure numpy math: normalize, peer-prediction scores, multiplicative weights, aggregators
    protocols   Single Agent, Majority Voting, Decentralized / Centralized / Sparse MAD, AceMAD
    sim         the synthetic agent population (the Challenging Interval as a generative model)
    runner      experiments -> outputs/runs/<name>/transcripts.jsonl + meta.json (resumable); runner_files
    analysis    transcripts -> arrays; re-scoring with any rule, eta or aggregator (no model calls)
    stats       bootstrap confidence intervals and paired tests
    paths       where data and outputs live; atomic file writes
    data        benchmark loaders into one Question type; the demo set
    subsets     challenging subsets (single agent at T=0.7, 5 runs, keep accuracy < 40%)
    theory      the Monte Carlo checks of notebook 00
    report      tables -> CSV + Markdown, figures -> PNG + PDF
    reproduce   the papermill driver behind `make reproduce` (profiles checked in reproduce_profile)
    llm, cache, agents, local_server   OpenAI-compatible client, response cache, LLM agents, llama.cpp server
                (llm_request, llm_retry, llm_usage, llm_redact: the client's parts)
"""
__version__ = "0.1.0"
