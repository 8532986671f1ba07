"""How much of a debate's prompt is a repeated prefix (what an endpoint's prompt cache could serve).

AceMAD N=5, T=3 (the paper's two-call mode) on a few demo questions, prompts built by the real prompt
builders (acemad_utils.agents.llm_agent) through acemad_utils.cost.estimate's in-process model of the endpoint:
no network.
For every paid call, in the order sent, the longest prefix it shares with an earlier call
  - of the same agent (same question, agent, repeat; any round, argue or commit),
  - of any agent on the same question,
and what OpenAI's rule would cache of the latter (prompts >= 1024 tokens, 128-token steps; best effort,
so an upper bound). Also prints where the first difference between consecutive prompts of one agent falls,
which shows whether the prompts are prefix-stable (shared parts first, in identical bytes).

    python bench/prefix.py                      # 6 demo questions, 600-char arguments
    python bench/prefix.py --questions 12 --arg-chars 1760 -N 5 -T 3

Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_line, token_model  # noqa: E402

from acemad_utils.cost import estimate as C  # noqa: E402
from acemad_utils.cost import prefix as CP  # noqa: E402
from acemad_utils.data.benchmarks import load_demo  # noqa: E402
from acemad_utils.protocol.config import DebateConfig  # noqa: E402
from acemad_utils.protocol.debate import run_question  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--arg-chars", type=int, default=600)
    ap.add_argument("-N", type=int, default=5)
    ap.add_argument("-T", type=int, default=3)
    a = ap.parse_args(argv)
    print("== acemad: repeated prompt prefixes ==")
    print(machine_line())
    print(token_model())
    qs = load_demo()[: a.questions]
    cfg = DebateConfig(method="acemad", n_agents=a.N, rounds=a.T)
    log: list = []
    pop = C.replay_population("gpt-4o-mini", {}, a.arg_chars, log=log)
    for q in qs:
        run_question(q, pop, cfg)
    s = CP.prefix_shares(log)
    print(
        f"{cfg.label}, {len(qs)} demo questions, {len(log)} calls, {s['prompt_tokens']:,.0f} prompt tokens, "
        f"arguments of {a.arg_chars} chars"
    )
    print(
        "  share of prompt tokens that repeat a prefix of an earlier call of the same agent: "
        f"{100 * s['same_agent']:.1f}%"
    )
    print(
        "  ... of an earlier call of any agent on the same question:                    "
        f"{100 * s['same_question']:.1f}%"
    )
    print(
        f"  ... that OpenAI's prompt cache could serve (>= 1024 tokens, 128-token steps):  "
        f"{100 * s['openai_cacheable']:.1f}%"
    )
    # Where consecutive prompts of one agent first differ: prefix-stable prompts differ only after the shared part.
    by_agent: dict = {}
    for scope, _, messages, _ in log:
        parts = scope.split("|")
        by_agent.setdefault("|".join(parts[:2]), []).append((parts[2], parts[-1], messages[-1]["content"]))
    ((agent, calls),) = list(by_agent.items())[:1]
    print(f"  one agent ({agent}): where each prompt first differs from the previous one of that agent")
    for (rnd, kind, text), (_, _, prev) in zip(calls[1:], calls[:-1]):
        i = CP.common_prefix_len(text, prev)
        print(f"    {rnd} {kind:<7} {len(text):>6} chars, first difference at char {i:>6}: {text[i : i + 50]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
