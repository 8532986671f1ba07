"""acemad_utils: the package behind the AceMAD notebooks, one subpackage per concern.

Layers, top to bottom (a layer imports only from layers below it; import-linter checks this in `make test`):

    notebook | reproduce   the notebooks' one import line; the command line (profiles -> papermill -> outputs/)
    cost                   what a profile will cost before anything is spent (replays the registry, no network)
    experiments            the registry of the paper's experiments, the resumable runner, Setup, subsets, theory
    report                 tables with CIs, figures, re-scoring, narrative, the debate viewer
    agents                 who answers: OpenAI-compatible client, cache, batch, llama.cpp server, LLM agents,
                           the synthetic population; prices and the MAX_USD cap (enforced per call)
    data                   benchmark files -> Question, the demo set, paths, reading saved transcripts
    protocol               the paper's method, pure (no I/O library): types, config, beliefs/scores/weights,
                           commitment parsing, prompts, every debate method
"""

__version__ = "0.1.0"
