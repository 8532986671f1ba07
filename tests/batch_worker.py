"""A batch-mode run in its own process, for tests/test_batch.py (which kills it while it polls, then restarts it).

    python tests/batch_worker.py ROOT NAME BASE_URL CACHE N_QUESTIONS

Runs AceMAD (N=3, T=2) on N synthetic questions with calls_via="batch" against the fake endpoint at BASE_URL
(ACEMAD_ROOT=ROOT), then prints the run's summary as JSON. Every setting is fixed here or, for the questions and
the config, in tests/resume_worker.py.
"""

from __future__ import annotations

import json
import os
import sys

from tests.resume_worker import N_AGENTS, ROUNDS, config, questions  # noqa: F401 (test_batch.py reads them here)

BATCH = dict(poll=0.05, poll_max=0.2, max_attempts=3)


def population(url: str, cache: str, calls_via: str, **kw):
    """kind="openai" unless given: kind=None is as a profile builds it (a 127.0.0.1 URL is "local-llama.cpp")."""
    from acemad_utils.agents.llm_agent import LLMPopulation

    kw = {"kind": "openai", "max_concurrency": 8} | kw
    return LLMPopulation(
        model="gpt-4o-mini", base_url=url, api_key="sk-fake-batch", cache=cache, calls_via=calls_via,
        batch_options=BATCH, **{k: v for k, v in kw.items() if v is not None})  # fmt: skip


def main(argv: list[str]) -> int:
    root, name, url, cache, n = argv
    os.environ["ACEMAD_ROOT"] = root
    from acemad_utils.experiments.runner import run_experiment

    d = run_experiment(name, questions(int(n)), [config()], population(url, cache, "batch"), workers=4, progress=False)
    print(json.dumps(json.loads((d / "meta.json").read_text())["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
