"""Repeated prompt prefixes in a cost replay's paid calls: what OpenAI's prompt cache could serve."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

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
