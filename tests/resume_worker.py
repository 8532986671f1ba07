"""`python tests/resume_worker.py ROOT NAME BASE_URL CACHE N_QUESTIONS WORKERS`: a debate run in its own process for
tests/test_resume.py, under ACEMAD_ROOT=ROOT; prints meta["summary"] as JSON, or on Ctrl-C the one-line message and
exit 130. Everything else is fixed here, so two invocations differ only in the fake server and what is on disk."""

from __future__ import annotations

import json
import os
import sys

N_AGENTS, ROUNDS, ITEM_SEED, RUN_SEED = 3, 2, 21, 0
MODEL = "fake-resume-model"
CLIENT = dict(timeout=1.0, max_attempts=5, max_concurrency=6)


def questions(n: int):
    from acemad_utils.agents.sim import make_items

    return make_items(n, k=4, seed=ITEM_SEED)


def config():
    from acemad_utils.protocol.config import DebateConfig

    return DebateConfig(method="acemad", n_agents=N_AGENTS, rounds=ROUNDS)


def main(argv: list[str]) -> int:
    root, name, url, cache, n, workers = argv
    os.environ["ACEMAD_ROOT"] = root
    from acemad_utils.agents.llm_agent import LLMPopulation
    from acemad_utils.experiments.runner import RunInterrupted, run_experiment

    pop = LLMPopulation(model=MODEL, base_url=url, cache=cache, seed=RUN_SEED, **CLIENT)
    try:
        bar = os.environ.get("RESUME_PROGRESS") == "1"  # a progress bar on stderr, as on a terminal
        d = run_experiment(name, questions(int(n)), [config()], pop, workers=int(workers), progress=bar)
    except RunInterrupted as e:
        print(e, file=sys.stderr)
        return 130
    print(json.dumps(json.loads((d / "meta.json").read_text())["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
