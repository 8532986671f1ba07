"""What the LLM client's calls used and cost: one completion's usage, a client's counters, the MAX_USD hold.

    from acemad_utils.agents.usage import Accounting, Completion, usage_tokens
    acc = Accounting(kind="openai", prices={})          # free=True: the project's own llama.cpp server
    acc.add(calls=1); acc.count_tokens("gpt-4o-mini", 1200, 80, cached=1024)
    acc.stats()        # {"calls", "network_calls", "cache_hits", "prompt_tokens", ..., "cost_usd", "tokens_by_model"}
    acc.call_cost("gpt-4o-mini", 1200, 80)   # USD; 0 when free, None for an unpriced model (prices.py)

Token counters count tokens actually sent over the network; cache hits cost nothing. Prompt tokens the
endpoint served from its prompt cache (`usage.prompt_tokens_details.cached_tokens`) are counted as
`cached_tokens` and priced at the cached-input rate (prices.py). With a budget (MAX_USD, budget.py) every
cache miss reserves its estimated cost before it is sent and may be refused (BudgetExceeded), then settles
`actual_cost` (client.LLMClient._within_budget).
The counter names are schema.py's (USAGE_KEYS, CALL_KEYS).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from acemad_utils.agents.prices import price_of
from acemad_utils.agents.tokenmodel import prompt_tokens as _model_prompt_tokens
from acemad_utils.agents.tokenmodel import tokens as _model_tokens
from acemad_utils.protocol.schema import CALL_KEYS, USAGE_KEYS

#: A client's counters: every call's usage, plus the calls that failed for good.
STATS_KEYS = (*USAGE_KEYS, *CALL_KEYS, "failures")
_TOKENS = ("prompt_tokens", "completion_tokens", "cached_tokens")


@dataclass
class Completion:
    text: str
    mode: Optional[str]  # structured-output mode used (None for free text)
    cached: bool = False
    prompt_tokens: int = 0  # billed in this call (0 on a cache hit)
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the endpoint's prompt cache (billed at the cached rate)
    network_calls: int = 0
    finish_reason: Optional[str] = None
    retries: int = 0  # failed attempts that were retried (429, 5xx, timeout, dropped connection, garbled body)

    def usage(self) -> dict:
        u = {
            "calls": 1,
            "network_calls": self.network_calls,
            "cache_hits": int(self.cached),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.cached_tokens:
            u["cached_tokens"] = self.cached_tokens
        if self.retries:
            u["retries"] = self.retries
        return u


def usage_tokens(u: Any) -> tuple[int, int, int]:
    """(prompt, completion, cached prompt) tokens of a completion's `usage` (an SDK object or a dict; 0 for
    what the endpoint did not report). cached = usage.prompt_tokens_details.cached_tokens (OpenAI's prompt cache)."""
    if u is None:
        return 0, 0, 0
    get = lambda o, k: o.get(k) if isinstance(o, dict) else getattr(o, k, None)
    details = get(u, "prompt_tokens_details")
    cached = get(details, "cached_tokens") if details is not None else None
    return _count(get(u, "prompt_tokens")), _count(get(u, "completion_tokens")), _count(cached)


def _count(v: Any) -> int:
    """A reported token count, or 0 for one that is not a count ("lots", 1e400, negative: never a negative cost;
    a chat reply with such a usage is refused first, request.parse_reply)."""
    try:
        return max(int(v or 0), 0)
    except (TypeError, ValueError, OverflowError):
        return 0


class Accounting:
    """Thread-safe counters and cost of one client (one endpoint `kind`; `prices` extend prices.PRICES; `free`:
    the endpoint is known to bill nothing, the project's own llama.cpp server)."""

    def __init__(self, kind: str, prices: dict, free: bool = False):
        self.kind, self.prices, self.free = kind, prices, free
        self._lock = threading.Lock()
        self._stats = dict.fromkeys(STATS_KEYS, 0)
        # model -> [prompt, completion, cached] billed tokens, synchronous calls and Batch API calls apart
        self._by_model: dict[tuple[str, bool], list[int]] = {}
        self._modes: dict[str, int] = {}  # completions served per structured mode (incl. cache hits)

    def add(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                self._stats[k] += v

    def count_mode(self, mode: Optional[str]) -> None:
        if mode is not None:
            with self._lock:
                self._modes[mode] = self._modes.get(mode, 0) + 1

    def count_tokens(self, model: str, pt: int, ct: int, cached: int = 0, *, batch: bool = False) -> None:
        """Add one billed call's tokens to the counters (batch: sent through the Batch API, priced at its rate)."""
        with self._lock:
            for k, v in zip(_TOKENS, (pt, ct, cached)):
                self._stats[k] += v
            tok = self._by_model.setdefault((model, batch), [0, 0, 0])
            tok[0] += pt
            tok[1] += ct
            tok[2] += cached

    def call_cost(
        self,
        model: str,
        prompt_tokens: float,
        completion_tokens: float,
        cached_tokens: float = 0.0,
        *,
        batch: bool = False,
    ) -> Optional[float]:
        """USD of one call on this endpoint (0 when free; None for an unpriced model, loopback or not)."""
        if self.free:
            return 0.0
        p = price_of(model, self.prices)
        return None if p is None else p.usd(prompt_tokens, completion_tokens, cached_tokens, batch)

    def estimate_cost(self, model: str, messages: Sequence[dict], params: dict, batch: bool = False) -> Optional[float]:
        """The most a call can cost before it is sent: modelled prompt tokens, completion = its max_tokens
        (the most it can be billed; 1000 when unset)."""
        return self.call_cost(model, _model_prompt_tokens(messages), params.get("max_tokens") or 1000, 0, batch=batch)

    def stats(self) -> dict:
        """Counters summed over the client's life, plus a cost estimate (None if a model has no price)."""
        with self._lock:
            out: dict = dict(self._stats)
            by_model = {m: list(t) for m, t in self._by_model.items()}
            out["modes"] = dict(self._modes)
        cost: Optional[float] = 0.0  # free calls cost 0; an unpriced model makes the estimate None
        for (m, batch), (pt, ct, cached) in by_model.items():
            c = self.call_cost(m, pt, ct, cached, batch=batch)
            if c is None or cost is None:
                cost = None
                break
            cost += c
        out["cost_usd"] = cost
        tbm: dict = {}
        for (m, batch), t in by_model.items():
            e = tbm.setdefault(m, dict.fromkeys(_TOKENS, 0))
            for k, v in zip(_TOKENS, t):
                e[k] += v
            if batch:
                e["batch_prompt_tokens"] = e.get("batch_prompt_tokens", 0) + t[0]
        out["tokens_by_model"] = tbm
        return out

    def actual_cost(self, model: str, messages: list, out: Completion) -> Optional[float]:
        """USD a finished call cost: its reported usage, or when the endpoint reported none, the modelled tokens
        of what was sent and received (what MAX_USD settles, budget.py)."""
        if out.prompt_tokens or out.completion_tokens:
            return self.call_cost(model, out.prompt_tokens, out.completion_tokens, out.cached_tokens)
        return self.call_cost(model, _model_prompt_tokens(messages), _model_tokens(out.text))
