"""The token model behind every estimate (no tokenizer): 4.4 chars/token is least squares against llama.cpp's
prompt_tokens for SmolLM2-135M on 8 debate prompts (bench/history.py); o200k (gpt-4o-mini) is as efficient on prose."""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4.4
MSG_OVERHEAD, PRIME = 3, 3  # OpenAI documents ~3 tokens per message and 3 per reply


def tokens(text: str) -> int:
    return int(math.ceil(len(text or "") / CHARS_PER_TOKEN))


def prompt_tokens(messages) -> int:
    return sum(tokens(str(m.get("content") or "")) + MSG_OVERHEAD for m in messages) + PRIME


def most_prompt_tokens(messages) -> int:
    """What no byte-level tokenizer passes (one token per UTF-8 byte): MAX_USD holds a call at this until the endpoint
    has reported a count (a script the token model undercounts, e.g. CJK, would let the first wave past the cap)."""
    return sum(len(str(m.get("content") or "").encode()) + MSG_OVERHEAD for m in messages) + PRIME


def describe() -> str:
    return (
        f"token model: ceil(chars/{CHARS_PER_TOKEN:g}) per text, +{MSG_OVERHEAD}/message +{PRIME}/request "
        f"(prompt); ceil(chars/{CHARS_PER_TOKEN:g}) (completion)"
    )
