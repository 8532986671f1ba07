"""One chat-completion request and the check of its reply: no retries, no fallback, no counting.

    from acemad_utils.agents.request import GenerateConfig, parse_reply, request_body
    body = request_body("gpt-4o-mini", messages, GenerateConfig(seed=0).params(), "json_schema", schema)
    reply = parse_reply(raw_bytes, where="http://127.0.0.1:8080/v1")  # the completion's JSON, or GarbledResponse

Structured output (`schema=`) is asked for in one of MODES, best first: OpenAI's `json_schema` (strict),
llama.cpp's `{"type": "json_object", "schema": ...}` (it turns the schema into a grammar), or plain text (the
caller parses). Which mode an endpoint takes is retry.py's business.

A 200 whose body is not a usable completion (garbage, truncated JSON, an HTML page from a proxy, no
choices) is a garbled body: `parse_reply` raises GarbledResponse, which the client retries like a 5xx (a proxy's
error page during a restart is transient), so it is never returned as text. The message says what the
endpoint sent instead (its first 200 characters, redacted).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Optional

from acemad_utils.agents.redact import preview, safe_url

MODES = ("json_schema", "json_object", "text")  # best first


class GarbledResponse(RuntimeError):
    """A 2xx whose body is not a usable chat completion (retried like a 5xx)."""


class EmptyReply(RuntimeError):
    """A completion without text (content null or blank: a refusal, a tool call only, a reasoning model out of
    tokens). The call fails (never retried: the same request gets the same; never cached: a rerun asks again)."""


def empty_reply(choice: Any) -> Optional[str]:
    """Why a completion's first choice holds no text to read, or None when it has some."""
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str) and content.strip():
        return None
    tools = len(message.get("tool_calls") or []) if isinstance(message, dict) else 0
    what = "content null" if content is None else "blank content"
    extra = f", {tools} tool call(s) only" if tools else ""
    return f"an empty reply ({what}{extra}, finish_reason {choice.get('finish_reason')!r})"


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


def parse_reply(data: bytes, where: Optional[str]) -> dict:
    """The JSON of a 2xx chat-completion body if it is a usable completion (a list of choices whose first has a
    message), else GarbledResponse naming `where` (a base URL) and quoting what was sent instead."""
    try:
        reply = json.loads(data)
    except ValueError:  # not JSON (an HTML page from a proxy), or cut short
        raise GarbledResponse(_garbled(where, "whose body is not JSON", preview(data))) from None
    except RecursionError:  # [[[[...]]]] deeper than the parser goes
        raise GarbledResponse(_garbled(where, "whose JSON is nested too deeply", preview(data))) from None
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        shown = _shown(reply) if isinstance(reply, dict) else json.dumps(reply, default=str)
        raise GarbledResponse(_garbled(where, "whose JSON body is not a chat completion", preview(shown)))
    choices = reply["choices"]
    if not choices:
        raise GarbledResponse(_garbled(where, "with no choices", preview(_shown(reply))))
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), (str, type(None))):
        raise GarbledResponse(_garbled(where, "whose first choice has no message", preview(_shown(reply))))
    content = message.get("content") or ""
    if _SURROGATE.search(content):  # a "\ud800" escape: not text, no transcript could hold it
        raise GarbledResponse(_garbled(where, "whose content holds a lone surrogate (not text)", preview(content)))
    bad = _bad_usage(reply.get("usage"))
    if bad:  # the cost and MAX_USD are counted from it: a count that is not one is never priced
        raise GarbledResponse(_garbled(where, f"whose usage {bad} is not a token count", preview(_shown(reply))))
    return reply


_SURROGATE = re.compile("[\ud800-\udfff]")


def _bad_usage(usage: Any) -> str:
    """The usage field that is not a finite count >= 0 ("lots", 1e400, -5), quoted; '' when every one is."""
    if usage is None:
        return ""
    if not isinstance(usage, dict):
        return repr(usage)[:60]
    details = usage.get("prompt_tokens_details")
    fields = {**usage, **({"cached_tokens": details.get("cached_tokens")} if isinstance(details, dict) else {})}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"):
        v = fields.get(name)
        ok = v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e15)
        if not ok:
            return f"{name}={v!r:.40}"
    return ""


# The order the SDK's ChatCompletion prints its fields in: a quoted body reads as it always has.
_FIELDS = ("id", "choices", "created", "model", "object", "service_tier", "system_fingerprint", "usage")


def _shown(reply: dict) -> str:
    ordered = {k: reply[k] for k in _FIELDS if k in reply} | {k: v for k, v in reply.items() if k not in _FIELDS}
    return json.dumps(ordered, separators=(",", ":"), default=str)


def _garbled(where: Optional[str], what: str, shown: str) -> str:
    return f"the endpoint {safe_url(where)} answered a chat completion with a 2xx reply {what}: {shown}"
