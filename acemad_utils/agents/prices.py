"""The one price table (USD per 1M tokens, with provider, source and date: `python -m acemad_utils.cost prices`). A call
is free only when known free (our own llama.cpp server, `free: true`): localhost may be a gateway to a paid provider.
A profile's `models:` key (ACEMAD_MODELS in every kernel) wins over the table."""

from __future__ import annotations

import functools
import json
from typing import Annotated, Literal, Optional

import msgspec

from acemad_utils.data.settings import env

ENV_MODELS = "ACEMAD_MODELS"  # the profile's `models:` terms, as JSON, for every notebook's kernel
USD = Annotated[float, msgspec.Meta(ge=0, le=1e6)]  # per 1M tokens: $1M would be a typo (or .inf)


class Price(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """USD per 1M tokens; a profile's `price:` mapping is converted to one (msgspec checks it)."""

    input: USD  # prompt tokens
    output: USD  # completion tokens
    cached_input: Optional[USD] = None  # cached prompt tokens (None: not recorded -> the input rate)
    batch_factor: Annotated[float, msgspec.Meta(ge=0, le=1)] = msgspec.field(default=1.0, name="batch")  # 0.5: 50% off
    source: str = "the profile's models: key"
    recorded: str = "given by the profile"  # when the figure was read, as recorded in this project
    provider: str = "the profile"  # whose price it is (a model has one price per provider)
    note: str = ""  # what the figure is, when it is not simply the provider's list price for this model

    def usd(self, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0.0, batch=False) -> float:
        cached = min(max(cached_tokens, 0.0), prompt_tokens)
        rate_cached = self.input if self.cached_input is None else self.cached_input
        cost = ((prompt_tokens - cached) * self.input + cached * rate_cached + completion_tokens * self.output) / 1e6
        return cost * (self.batch_factor if batch else 1.0)

    @property
    def free(self) -> bool:
        return self.input == 0 and self.output == 0 and not self.cached_input


FREE = Price(0.0, 0.0, 0.0, 1.0, "no bill: known to be free", "", provider="free")

_OPENAI = "https://openai.com/api/pricing"
_CARRIED = "carried over from the project's earlier llm.PRICES (no source recorded)"
_READ = "2026-11-24"  # the day the stored pages below were read
_DS_NOTE = "the price list in force from 2025-09-05; DeepSeek has no batch discount"
_LLAMA = ("https://cloudprice.net/models/friendliai/meta-llama-3.1-8b-instruct", "Amazon Bedrock (via cloudprice.net)",
          "hosted price; a self-hosted vLLM costs no bill: mark it `free: true` in the profile")  # fmt: skip
_QWEN = ("https://sg.langmart.ai/model-docs/models/qwen_qwen3-235b-a22b.html",
         "LangMart gateway, for qwen/qwen3-235b-a22b (April 2025 release)",
         "STAND-IN: the price of the April 2025 Qwen3-235B-A22B, not of the 2507 Instruct")  # fmt: skip
PRICES: dict[str, Price] = {
    # matches the stored copy of https://pecollective.com/tools/gpt-4o-mini-pricing ("April 2026")
    "gpt-4o-mini": Price(0.15, 0.60, 0.075, 0.5, _OPENAI, "2026-11", "OpenAI"),
    "DeepSeek-V3.1": Price(
        0.56, 1.68, 0.07, 1.0, "https://api-docs.deepseek.com/quick_start/pricing", _READ, "DeepSeek API", _DS_NOTE
    ),  # fmt: skip
    # Amazon Bedrock's rates as an aggregator lists them; DeepInfra's $0.03/$0.05 on the same page is cheaper:
    # the dearer figure keeps MAX_USD on the safe side
    "Llama-3.1-8B-Instruct": Price(0.22, 0.22, None, 0.5, _LLAMA[0], _READ, *_LLAMA[1:]),
    # no stored page priced the 2507 Instruct release: a gateway's price for the April 2025 model, of the right order
    "Qwen3-235B-A22B-Instruct-2507": Price(0.18, 0.54, None, 1.0, _QWEN[0], _READ, *_QWEN[1:]),
    # carried over without source or date: cached rate unknown (billed at input), Batch API's 50% assumed
    "gpt-4o": Price(2.50, 10.00, None, 0.5, _CARRIED, "unknown", "OpenAI"),
    "gpt-4.1-mini": Price(0.40, 1.60, None, 0.5, _CARRIED, "unknown", "OpenAI"),
    "gpt-4.1-nano": Price(0.10, 0.40, None, 0.5, _CARRIED, "unknown", "OpenAI"),
}


def lookup(model: str, table: dict = PRICES) -> Optional[Price]:
    """The entry of `model` in `table`: its exact name, else without the "org/" prefix, ignoring case."""
    base = model.rsplit("/", 1)[-1].lower()
    return table.get(model) or next((p for name, p in table.items() if name.rsplit("/", 1)[-1].lower() == base), None)


class _Terms(msgspec.Struct, forbid_unknown_fields=True):
    free: Optional[Literal[True]] = None
    price: Optional[Price] = None


def parse_terms(spec) -> dict[str, Price]:
    """A profile's `models:` mapping -> {model: Price} (FREE for `free: true`); ValueError naming the model and key."""
    if not isinstance(spec, (dict, type(None))):
        raise ValueError(f"models: need a mapping {{model name: {{free: true}} or {{price: {{...}}}}}}, got {spec!r}")
    out = {}
    for model, terms in (spec or {}).items():
        try:
            t = msgspec.convert(terms, _Terms)
        except msgspec.ValidationError as e:  # e.g. "Expected `float` >= 0.0 - at `$.price.input`"
            raise ValueError(f"models: {model}: {e} (USD per 1M tokens; batch is a multiplier, 0.5 = 50% off)"
                             ) from None  # fmt: skip
        if (t.free is None) == (t.price is None):
            raise ValueError(f"models: {model}: need exactly one of {{free: true}} or {{price: {{...}}}}, got "
                             f"{terms!r}")  # fmt: skip
        out[str(model)] = t.price or FREE
    return out


@functools.lru_cache(maxsize=4)
def _terms_of(raw: Optional[str]) -> dict[str, Price]:  # the profile's terms (ACEMAD_MODELS), parsed once
    try:
        return parse_terms(json.loads(raw)) if raw else {}
    except ValueError as e:  # JSONDecodeError, or terms parse_terms refuses: name the variable they came from
        raise ValueError(f"{ENV_MODELS}: {e}") from None


def price_of(model: str, extra: Optional[dict] = None) -> Optional[Price]:
    """The Price `model` is billed at: `extra`, then the profile's terms, then PRICES; None when unpriced."""
    return (lookup(model, extra) if extra else None) or lookup(model, _terms_of(env(ENV_MODELS))) or lookup(model)


HOW_TO_PRICE = (
    "price it in the profile (models: {{{model}: {{price: {{input: USD_PER_1M, output: USD_PER_1M}}}}}}; a question "
    "file or the API: the same as JSON in ACEMAD_MODELS), or mark it free there if its endpoint sends you no bill "
    "(models: {{{model}: {{free: true}}}}; a server you run yourself), or add it to acemad_utils/agents/prices.py"
)


def describe(model: str, p: Price) -> str:
    """One line on where a model's price comes from, for the estimate's footer."""
    if p.free:
        return f"{model}: free ({p.source})"
    cached = "" if p.cached_input is None else f", ${p.cached_input:g}/M cached input"
    batch = f", batch x{p.batch_factor:g}" if p.batch_factor != 1 else ", no batch discount"
    note = f"; {p.note}" if p.note else ""
    who = p.provider or "provider not recorded"
    return (f"{model}: ${p.input:g}/M input{cached}, ${p.output:g}/M output{batch} ({who}, {p.source}, recorded "
            f"{p.recorded}{note}; check current prices)")  # fmt: skip


def table() -> str:
    """The price table as text, with providers and sources, for the user to check."""
    return "\n".join([describe(m, p) for m, p in PRICES.items()] + [
        "USD per 1M tokens, as recorded in this project: check the provider's current prices before you spend. "
        "A profile overrides any of them, or marks a model free, under its models: key."])  # fmt: skip
