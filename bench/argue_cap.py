"""How often an argument reaches its token cap on the real local model.

The paper gives no cap on an argument; LLM agents cap it at ARGUE_MAX_TOKENS (protocol.config, the notebooks'
parameter of that name). A step-by-step ("slow", Table 3's Different Thinking System) truth-holder writes the
longest arguments, so it is the one a cap may cut off. This script serves SmolLM2-135M-Instruct with llama.cpp
(acemad_utils.agents.local_server.serve()), asks round-1 arguments for the first demo questions from the three
kinds of agent a run uses (the crowd's Generalist, the Skeptic truth-holder, the slow Generalist truth-holder,
and the baselines' plain assistant), and prints per kind how many reached the cap and the completion lengths.
No response cache: every call is a real call.

    python bench/argue_cap.py                     # 4 demo questions x 4 agents, cap 400 (about 3-6 min, 2 cores)
    python bench/argue_cap.py --questions 2 --cap 200

Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import local_gguf, machine_line  # noqa: E402

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.agents.local_server import serve  # noqa: E402
from acemad_utils.data.benchmarks import load_demo  # noqa: E402
from acemad_utils.protocol.config import ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS, NAIVE_AGENT  # noqa: E402
from acemad_utils.protocol.schema import AgentSpec, Turn  # noqa: E402

KINDS = {
    "crowd: Generalist T=0.1": AgentSpec("Generalist", 0.1),
    "truth-holder: Skeptic T=0.6": AgentSpec("Skeptic", 0.6),
    "truth-holder: Generalist T=0.6, slow": AgentSpec("Generalist", 0.6, thinking="slow"),
    "baseline: Assistant T=0.7": NAIVE_AGENT,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--cap", type=int, default=ARGUE_MAX_TOKENS)
    a = ap.parse_args()
    print(machine_line())
    gguf = local_gguf("local model part skipped")
    if gguf is None:
        return
    questions = load_demo()[: a.questions]
    with serve(gguf) as url:
        pop = LLMPopulation(model=Path(gguf).stem, base_url=url, cache=None, max_tokens=(a.cap, COMMIT_MAX_TOKENS))
        print(f"{Path(gguf).stem}, argue cap {a.cap} tokens, {len(questions)} demo questions, round 1, no cache")
        for kind, spec in KINDS.items():
            t0, lengths = time.time(), []
            for q in questions:
                [agent] = pop.agents([spec], q)
                _, usage = agent.argue(Turn(question=q, agent=0, round=1, history=()))
                lengths.append(usage["completion_tokens"])
            n = np.array(lengths)
            print(
                f"  {kind:<40} at the cap {int((n >= a.cap).sum())}/{len(n)}; completion tokens median "
                f"{int(np.median(n))}, max {int(n.max())} ({time.time() - t0:.0f} s)"
            )


if __name__ == "__main__":
    main()
