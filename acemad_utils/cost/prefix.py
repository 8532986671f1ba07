"""Repeated prompt prefixes (prompt caching) in a cost replay's paid calls: what OpenAI's prompt cache could serve."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

#: OpenAI's prompt caching: prompts of at least 1024 tokens, cached in 128-token steps beyond that
#: (https://platform.openai.com/docs/guides/prompt-caching, as recorded in this project 2026-11; best effort,
#: entries are evicted after minutes of inactivity, so a share computed here is an upper bound).
CACHE_MIN_TOKENS, CACHE_STEP = 1024, 128


def _serialized(messages) -> str:
    """The bytes a prefix cache compares: roles and contents in order."""
    return "".join(f"\x1e{m.get('role')}\x1f{m.get('content') or ''}" for m in messages)


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search on slice equality: C-speed comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def cacheable(lcp_tokens: float) -> float:
    """Tokens OpenAI's prompt cache can serve for a shared prefix of lcp_tokens (0 below 1024, then 128 steps)."""
    if lcp_tokens < CACHE_MIN_TOKENS:
        return 0.0
    return float(CACHE_MIN_TOKENS + (lcp_tokens - CACHE_MIN_TOKENS) // CACHE_STEP * CACHE_STEP)


def prefix_shares(log: Sequence[tuple]) -> dict:
    """Of the prompt tokens of the paid calls in `log` (ModelClient's (scope, model, messages, prompt_tokens),
    in the order sent): the share that repeats a prefix of an earlier call of the same agent (same question,
    agent, repeat and role: any round, any call kind), of an earlier call of any agent on the same question,
    and what OpenAI's cache rule (>= 1024 tokens, 128-token steps) would serve of the latter."""

    def agent_of(scope: str) -> str:
        return "|".join(
            p
            for p in scope.split("|")
            if not p.startswith("round=") and p not in ("argue", "commit", "repair", "act", "act-repair")
        )

    seen_agent: dict = {}  # (model, agent) -> sorted earlier prompts
    seen_question: dict = {}  # (model, question) -> sorted earlier prompts
    total = same = anyq = eligible = 0.0
    per_call = []  # OpenAI-cacheable tokens of each call, in log order

    def best(sorted_list: list, s: str) -> int:
        i = bisect.bisect_left(sorted_list, s)
        return max([common_prefix_len(s, sorted_list[j]) for j in (i - 1, i) if 0 <= j < len(sorted_list)] or [0])

    for scope, model, messages, pt in log:
        s = _serialized(messages)
        chars_per_tok = max(len(s), 1) / max(pt, 1)
        ka, kq = (model, agent_of(scope)), (model, scope.split("|")[0])
        la, lq = seen_agent.setdefault(ka, []), seen_question.setdefault(kq, [])
        a_tok = min(pt, best(la, s) / chars_per_tok)
        q_tok = min(pt, best(lq, s) / chars_per_tok)
        total += pt
        same += a_tok
        anyq += q_tok
        c = cacheable(q_tok) if pt >= CACHE_MIN_TOKENS else 0.0
        eligible += c
        per_call.append(c)
        bisect.insort(la, s)
        bisect.insort(lq, s)
    share = lambda x: x / total if total else 0.0
    return {
        "prompt_tokens": total,
        "same_agent": share(same),
        "same_question": share(anyq),
        "openai_cacheable": share(eligible),
        "per_call": per_call,
    }
