"""When the LLM client tries a call again, and in which structured-output mode: the policy, not the loop.

    from acemad_utils.agents.retry import backoff_delay, format_rejected, next_mode, retryable
    retryable(exc)                         # 429, 408, 409, 5xx, timeouts, dropped connections, garbled bodies
    format_rejected(exc, "json_schema")    # the endpoint refused our response_format: ask one mode lower
    backoff_delay(exc, attempt, (1.0, 60.0), 120.0)   # Retry-After (capped), else jittered exponential

The loop itself is LLMClient._with_retries (client.py), read top-down with the rest of a call. Why not tenacity
any more: its callbacks (wait, before_sleep, the attempt) made one call enter client.py 9 times, and the
loop is a dozen lines. Only one retry layer: the SDK is not on the hot path and its own retries are off.

Mode fallback (request.MODES, best first): an endpoint that refuses our response_format (a 400/422, or
any error naming response_format: llama-cpp-python answers with a 500) is asked again one mode lower. Such a
refusal is never retried in the same mode. The client detects the mode once and remembers it.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from typing import Optional

import openai

from acemad_utils.agents.request import MODES, GarbledResponse


def retryable(exc: BaseException) -> bool:
    if isinstance(
        exc, (openai.APIConnectionError, json.JSONDecodeError, openai.APIResponseValidationError, GarbledResponse)
    ):
        return True  # timeouts, refused/dropped connections, a garbled body from a proxy
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def format_rejected(exc: BaseException, mode: Optional[str]) -> bool:
    """Did the endpoint refuse our response_format? A 400/422, or any error naming response_format:
    llama-cpp-python answers an unknown format type with a 500 validation error."""
    if mode not in ("json_schema", "json_object") or not isinstance(exc, openai.APIStatusError):
        return False
    return exc.status_code in (400, 422) or "response_format" in str(exc)


def retry_after(exc: Optional[BaseException]) -> Optional[float]:
    """Seconds the server asked us to wait (Retry-After / retry-after-ms), if any."""
    resp = getattr(exc, "response", None)
    if resp is None:
        return None
    h = resp.headers
    try:
        if h.get("retry-after-ms"):
            return float(h["retry-after-ms"]) / 1000
        ra = h.get("retry-after")
        if ra is None:
            return None
        try:
            return max(0.0, float(ra))
        except ValueError:  # an HTTP date
            return max(0.0, email.utils.parsedate_to_datetime(ra).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def backoff_delay(
    exc: Optional[BaseException], attempt: int, backoff: tuple[float, float], retry_after_max: float
) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): the server's Retry-After (capped at
    retry_after_max), else a jittered exponential, uniform in [0, min(backoff max, base * 2 ** (attempt - 1))]
    ("full jitter", what tenacity's wait_random_exponential drew before)."""
    ra = retry_after(exc)
    if ra is not None:
        return min(ra, retry_after_max)
    return random.uniform(0, min(backoff[1], backoff[0] * 2 ** (attempt - 1)))


def next_mode(failed: str) -> str:
    """The mode to try after the endpoint refused `failed`."""
    return MODES[MODES.index(failed) + 1]
