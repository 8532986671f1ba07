"""One chat-completion request and the check of its reply: no retries, no fallback, no counting.

    from acemad_utils.agents.request import GenerateConfig, request_body, send
    body = request_body("gpt-4o-mini", messages, GenerateConfig(seed=0).params(), "json_schema", schema)
    resp = send(sdk, body, where="http://127.0.0.1:8080/v1")  # a ChatCompletion, or GarbledResponse
    resp = send(sdk, body, where, slot=semaphore)             # the HTTP call only while holding `slot`

Structured output (`schema=`) is asked for in one of MODES, best first: OpenAI's `json_schema` (strict),
llama.cpp's `{"type": "json_object", "schema": ...}` (it turns the schema into a grammar), or plain text (the
caller parses). Which mode an endpoint takes is llm_retry's business.

A 200 whose body is not a usable completion (garbage, truncated JSON, an HTML page from a proxy, no
choices) is a garbled body: `send` raises GarbledResponse, which the client retries like a 5xx (a proxy's
error page during a restart is transient), so it is never returned as text. The message says what the
endpoint sent instead (its first 200 characters, redacted).
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any, Optional

from openai.types.chat import ChatCompletion

from acemad_utils.agents.redact import preview, safe_url

MODES = ("json_schema", "json_object", "text")  # best first


class GarbledResponse(RuntimeError):
    """A 2xx whose body is not a usable chat completion (retried like a 5xx)."""


@dataclass(frozen=True)
class GenerateConfig:
    """Per-call sampling. None means "leave it to the endpoint"."""

    temperature: Optional[float] = None
    seed: Optional[int] = None
    max_tokens: Optional[int] = None
    top_p: Optional[float] = None

    def params(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def request_body(model: str, messages: list, params: dict, mode: Optional[str], *, schema: Optional[dict]) -> dict:
    """The /chat/completions body of a call (also the `body` of a Batch API request line)."""
    kw: dict[str, Any] = dict(model=model, messages=messages, **params)
    if mode == "json_schema":
        kw["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": schema, "strict": True},
        }
    elif mode == "json_object":
        kw["response_format"] = {"type": "json_object", "schema": schema}  # llama.cpp turns it into a grammar
    return kw


def send(sdk, body: dict, where: Optional[str], slot: AbstractContextManager = nullcontext()) -> ChatCompletion:
    """POST one body while holding `slot` (the client's concurrency bound); the reply if it is a usable
    completion, else GarbledResponse naming `where` (a base URL). The reply is checked after `slot` is let go."""
    try:
        with slot:
            # client.post is the SDK's documented call for a raw request: same auth, errors, timeouts and
            # parsing into ChatCompletion as chat.completions.create, minus its re-walk of the whole body
            # against the request TypedDicts (~0.6 ms of CPU per call with a JSON schema; bench/throughput.py).
            resp = sdk.post("/chat/completions", body=body, cast_to=ChatCompletion)
    except json.JSONDecodeError as e:  # a JSON content type over a body that is not JSON (or is cut short)
        raise GarbledResponse(_garbled(where, "whose body is not JSON", preview(e.doc))) from None
    # The SDK hands back whatever a 2xx body held (a str for an HTML page, a list, a completion without
    # choices): anything but a usable completion is a garbled body, retried, never returned.
    choices = getattr(resp, "choices", None)
    if isinstance(resp, (str, bytes)):
        raise GarbledResponse(_garbled(where, "whose body is not JSON", preview(resp)))
    if not isinstance(resp, ChatCompletion) or not isinstance(choices, list):
        shown = (
            resp.model_dump_json(exclude_unset=True)
            if isinstance(resp, ChatCompletion)
            else json.dumps(resp, default=str)
        )
        raise GarbledResponse(_garbled(where, "whose JSON body is not a chat completion", preview(shown)))
    if not choices:
        raise GarbledResponse(_garbled(where, "with no choices", preview(resp.model_dump_json(exclude_unset=True))))
    if getattr(choices[0], "message", None) is None:
        raise GarbledResponse(
            _garbled(where, "whose first choice has no message", preview(resp.model_dump_json(exclude_unset=True)))
        )
    return resp


def _garbled(where: Optional[str], what: str, shown: str) -> str:
    return f"the endpoint {safe_url(where)} answered a chat completion with a 2xx reply {what}: {shown}"
