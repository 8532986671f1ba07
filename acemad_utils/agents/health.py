"""An endpoint's health as a run shows it, without the SDK (the runner imports it): the breaker's one line and the
progress line, appended to ACEMAD_PROGRESS_FILE (the reproduce command prints it; a kernel's stderr reaches no one)."""

from __future__ import annotations

import sys

from tqdm import tqdm

from acemad_utils.agents.redact import redact
from acemad_utils.data.settings import env

PROGRESS_ENV = "ACEMAD_PROGRESS_FILE"


class EndpointDown(RuntimeError):
    """The circuit breaker tripped: str() is the one line to show (cause, endpoint, the same command resumes)."""


def emit(line: str) -> None:
    line, path = redact(line), env(PROGRESS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    else:  # above a progress bar on the terminal, never glued to its end
        tqdm.write(line, file=sys.stderr)
