"""acemad_utils: the package behind the AceMAD notebooks, one subpackage per concern.

Layers, top to bottom (a layer imports only from layers below it; import-linter checks this in `make test`):

    command                `python -m acemad_utils run FILE`: your question file -> runs, table, viewer page
    notebook | reproduce | api | integrations
                           the notebooks' one import line; the command line (profiles -> papermill -> outputs/);
                           the public API on your own questions (below); inspect_ai solvers (optional extra)
    cost                   what a profile will cost before anything is spent (replays the registry, no network)
    experiments            the registry of the paper's experiments, the resumable runner, Setup, subsets, theory
    report                 tables with CIs, figures, re-scoring, the debate viewer
    agents                 who answers: OpenAI-compatible client, cache, batch, llama.cpp server, LLM agents,
                           the synthetic population; prices and the MAX_USD cap (enforced per call)
    data                   benchmark files -> Question, the demo set, paths, reading saved transcripts
    protocol               the paper's method, pure (no I/O library): types, config, beliefs/scores/weights,
                           commitment parsing, prompts, every debate method

Public API (imported on first use, so `import acemad_utils` stays light; see docs/own-questions.md):

    from acemad_utils import make_question, run
    results = run([make_question("2+2?", ["3", "4"], answer="B")], methods=["acemad", "majority"], synthetic=True)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: name -> the module that defines it; read on first access (module __getattr__, PEP 562)
_PUBLIC = {
    "run": "acemad_utils.api",
    "Result": "acemad_utils.api",
    "Results": "acemad_utils.api",
    "accuracy_table": "acemad_utils.api",
    "viewer_page": "acemad_utils.api",
    "make_question": "acemad_utils.data.own",
    "read_questions": "acemad_utils.data.own",
    "Question": "acemad_utils.protocol.schema",
    "DebateConfig": "acemad_utils.protocol.config",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'acemad_utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
