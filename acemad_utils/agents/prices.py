"""The one price table of the package: USD per 1M tokens, each entry with its source and the date it was read.

    from acemad_utils.agents.prices import PRICES, price_of, usd
    usd("gpt-4o-mini", prompt_tokens=1_000_000, completion_tokens=0)                  # 0.15
    usd("gpt-4o-mini", prompt_tokens=1_000_000, completion_tokens=0, cached_tokens=1_000_000)  # 0.075
    usd("gpt-4o-mini", 1_000_000, 0, batch=True)                                       # 0.075 (Batch API: 50% off)
    usd("my-local-model", 10, 10)                                                      # None: no price known

Prices change and differ by account, region and tier: CHECK THEM against the provider's page before relying
on any estimate here (`python -m acemad_utils.cost prices` prints this table with its sources). The dates
below are when the figures were recorded in this project, not a guarantee that they still hold.

`cached_tokens` are the prompt tokens the endpoint reported as served from its prompt cache
(`usage.prompt_tokens_details.cached_tokens`); they are part of `prompt_tokens` and billed at
`cached_input` instead of `input`. A model with no recorded cached rate bills them at the full input rate
(the conservative choice). `batch=True` applies the Batch API discount to the whole call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M prompt tokens
    output: float  # USD per 1M completion tokens
    cached_input: Optional[float]  # USD per 1M cached prompt tokens (None: not recorded -> the input rate)
    batch_factor: float  # multiplier for calls sent through the Batch API (0.5 = 50% off)
    source: str
    recorded: str  # when the figure was read, as recorded in this project

    def usd(
        self, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0.0, batch: bool = False
    ) -> float:
        cached = min(max(cached_tokens, 0.0), prompt_tokens)
        rate_cached = self.input if self.cached_input is None else self.cached_input
        cost = ((prompt_tokens - cached) * self.input + cached * rate_cached + completion_tokens * self.output) / 1e6
        return cost * (self.batch_factor if batch else 1.0)


_OPENAI = "https://openai.com/api/pricing"
_CARRIED = "carried over from the project's earlier llm.PRICES (no source recorded)"
PRICES: dict[str, Price] = {
    # The paper's model: input $0.15/M, cached input $0.075/M, output $0.60/M, Batch API 50% off.
    "gpt-4o-mini": Price(0.15, 0.60, 0.075, 0.5, _OPENAI, "2026-11"),
    # Older entries of this project, carried over from llm.PRICES: input/output only, no source or date was
    # recorded for them, their cached rate is unknown (billed here at the input rate) and the Batch API's 50%
    # is assumed as for gpt-4o-mini. Check all three before relying on them.
    "gpt-4o": Price(2.50, 10.00, None, 0.5, _CARRIED, "unknown"),
    "gpt-4.1-mini": Price(0.40, 1.60, None, 0.5, _CARRIED, "unknown"),
    "gpt-4.1-nano": Price(0.10, 0.40, None, 0.5, _CARRIED, "unknown"),
}


def price_of(model: str, extra: Optional[dict] = None) -> Optional[Price]:
    """The Price of `model` (extra: {model: Price or (input, output)} overrides), None when unknown."""
    p = (extra or {}).get(model, PRICES.get(model))
    if isinstance(p, tuple):  # the old (input, output) form of LLMClient(prices=...)
        p = Price(float(p[0]), float(p[1]), None, 0.5, "given by the caller", "")
    return p


def usd(
    model: str,
    prompt_tokens: float,
    completion_tokens: float,
    cached_tokens: float = 0.0,
    *,
    batch: bool = False,
    extra: Optional[dict] = None,
) -> Optional[float]:
    p = price_of(model, extra)
    return None if p is None else p.usd(prompt_tokens, completion_tokens, cached_tokens, batch)


def table() -> str:
    """The price table as text, with sources, for the user to check."""
    lines = [f"{'model':<14} {'input':>7} {'cached':>7} {'output':>7} {'batch':>6}  source (recorded)"]
    for m, p in PRICES.items():
        cached = "-" if p.cached_input is None else f"{p.cached_input:g}"
        lines.append(
            f"{m:<14} {p.input:>7g} {cached:>7} {p.output:>7g} {p.batch_factor:>6g}x  {p.source} ({p.recorded})"
        )
    lines.append(
        "USD per 1M tokens, as recorded in this project: check the provider's current prices before you spend."
    )
    return "\n".join(lines)
