"""acemad_utils: the package behind the AceMAD notebooks (layers: command > pilot > notebook | reproduce | api |
integrations > cost > experiments > report | agents > data > protocol). Public API, imported on first use:

    from acemad_utils import estimate, make_question, run
    qs = [make_question("2+2?", ["3", "4"], answer="B")]
    print(estimate(qs, ["acemad", "majority"], model="gpt-4o-mini").line())  # calls, tokens, dollars: nothing sent
    results = run(qs, methods=["acemad", "majority"], synthetic=True)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: name -> the module that defines it; read on first access (module __getattr__, PEP 562)
_PUBLIC = {
    **dict.fromkeys(
        ["run", "estimate", "Result", "Results", "FailedRecords", "accuracy_table", "viewer_page"], "acemad_utils.api"
    ),
    **dict.fromkeys(["make_question", "read_questions"], "acemad_utils.data.own"),
    "Question": "acemad_utils.protocol.schema",
    "DebateConfig": "acemad_utils.protocol.config",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:  # stored: later lookups skip this function
        return globals().setdefault(name, getattr(importlib.import_module(_PUBLIC[name]), name))
    raise AttributeError(f"module 'acemad_utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
