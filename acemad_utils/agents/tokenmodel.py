"""The token model behind every estimate (no tokenizer, no network): characters -> tokens.

    from acemad_utils.agents.tokenmodel import tokens, prompt_tokens
    prompt_tokens([{"role": "user", "content": "Say hi"}])     # 1 + 3 + 3 = 7

    tokens(text)            = ceil(len(text) / CHARS_PER_TOKEN)
    prompt_tokens(messages) = sum over messages of tokens(content) + MSG_OVERHEAD, + PRIME

CHARS_PER_TOKEN was calibrated once by bench/history.py against llama.cpp's reported prompt_tokens for
SmolLM2-135M on 8 real debate prompts (600-14,000 chars): least-squares 4.43 chars/token with the overheads
below (4.0 overestimated those prompts by 6% on average, up to 12%). GPT-4o-mini's o200k vocabulary is at
least as efficient on English prose, so the model is, if anything, slightly high for the paper's endpoint.
Used by acemad_utils.cost.estimate (estimates), acemad_utils.agents.budget (MAX_USD reservations) and bench/.
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4.4
#: tokens of chat-template framing per message (role markers) and per request (assistant prime);
#: OpenAI documents ~3 per message + 3 per reply for its chat format.
MSG_OVERHEAD = 3
PRIME = 3


def tokens(text: str, cpt: float = CHARS_PER_TOKEN) -> int:
    return int(math.ceil(len(text or "") / cpt))


def prompt_tokens(messages, cpt: float = CHARS_PER_TOKEN) -> int:
    return sum(tokens(str(m.get("content") or ""), cpt) + MSG_OVERHEAD for m in messages) + PRIME


def describe() -> str:
    return (
        f"token model: ceil(chars/{CHARS_PER_TOKEN:g}) per text, +{MSG_OVERHEAD}/message +{PRIME}/request "
        f"(prompt); ceil(chars/{CHARS_PER_TOKEN:g}) (completion)"
    )
