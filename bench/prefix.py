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
import bisect
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_line, token_model  # noqa: E402

from acemad_utils.cost import estimate as C  # noqa: E402
from acemad_utils.data.benchmarks import load_demo  # noqa: E402
from acemad_utils.protocol.config import DebateConfig  # noqa: E402
from acemad_utils.protocol.debate import run_question  # noqa: E402

#: OpenAI's prompt caching: prompts of at least 1024 tokens, cached in 128-token steps beyond that (recorded
#: 2026-11; entries are evicted after minutes of inactivity, so a share computed here is an upper bound).
CACHE_MIN_TOKENS, CACHE_STEP = 1024, 128
_KINDS = ("argue", "commit", "repair", "act", "act-repair")


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search on slice equality: C-speed comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if a[:mid] == b[:mid] else (lo, mid - 1)
    return lo


def cacheable(lcp_tokens: float) -> float:
    """Tokens OpenAI's prompt cache can serve for a shared prefix of lcp_tokens (0 below 1024, then 128 steps)."""
    if lcp_tokens < CACHE_MIN_TOKENS:
        return 0.0
    return float(CACHE_MIN_TOKENS + (lcp_tokens - CACHE_MIN_TOKENS) // CACHE_STEP * CACHE_STEP)


def prefix_shares(log: Sequence[tuple]) -> dict:
    """Of the prompt tokens of the paid calls in `log` ((scope, model, messages, prompt_tokens) in order sent): the
    share repeating a prefix of an earlier call of the same agent (question, agent, repeat, role), of any agent on
    the same question, and what OpenAI's cache rule would serve of the latter (also per call)."""
    seen: dict = {}  # (model, agent or question) -> sorted earlier prompts
    total = same = anyq = eligible = 0.0
    per_call = []

    def best(sorted_list: list, s: str) -> int:
        i = bisect.bisect_left(sorted_list, s)
        return max([common_prefix_len(s, sorted_list[j]) for j in (i - 1, i) if 0 <= j < len(sorted_list)] or [0])

    for scope, model, messages, pt in log:
        s = "".join(f"\x1e{m.get('role')}\x1f{m.get('content') or ''}" for m in messages)
        per_tok = max(len(s), 1) / max(pt, 1)
        agent = "|".join(p for p in scope.split("|") if not p.startswith("round=") and p not in _KINDS)
        la, lq = seen.setdefault(("a", model, agent), []), seen.setdefault(("q", model, scope.split("|")[0]), [])
        q_tok = min(pt, best(lq, s) / per_tok)
        total, same, anyq = total + pt, same + min(pt, best(la, s) / per_tok), anyq + q_tok
        per_call.append(cacheable(q_tok) if pt >= CACHE_MIN_TOKENS else 0.0)
        eligible += per_call[-1]
        bisect.insort(la, s)
        bisect.insort(lq, s)
    share = lambda x: x / total if total else 0.0
    return {"prompt_tokens": total, "same_agent": share(same), "same_question": share(anyq),
            "openai_cacheable": share(eligible), "per_call": per_call}  # fmt: skip


def logged_population(arg_chars: int, log: list):
    """The estimate's replay population, its paid calls logged as (scope, model, messages, prompt_tokens)."""
    pop = C.replay_population("gpt-4o-mini", {}, arg_chars)
    client = pop.client(None)
    generate = client.generate

    def logging(messages, config=None, *, scope: str = "", **kw):
        out = generate(messages, config, scope=scope, **kw)
        if not out.cached:
            log.append((scope, client.model, list(messages), out.prompt_tokens))
        return out

    client.generate = logging  # type: ignore[method-assign]
    return pop


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
    pop = logged_population(a.arg_chars, log)
    for q in qs:
        run_question(q, pop, cfg)
    s = prefix_shares(log)
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
        i = common_prefix_len(text, prev)
        print(f"    {rnd} {kind:<7} {len(text):>6} chars, first difference at char {i:>6}: {text[i : i + 50]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
