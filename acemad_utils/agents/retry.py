"""When the LLM client tries a call again, and in which structured-output mode: the policy, not the request.

    from acemad_utils.agents.retry import retrying, with_mode_fallback, backoff_wait
    resp = retrying(lambda: send(...), max_attempts=6, wait=lambda s: backoff_wait(s, (1.0, 60.0), 120.0),
                    mode="json_schema", on_retry=lambda state: None)
    resp, mode = with_mode_fallback(lambda mode: ..., current=lambda: client.mode, auto=True,
                                    downgrade=client._downgrade)

Only one retry layer: the SDK's retries are off (max_retries=0) and tenacity retries rate limits (honouring
Retry-After, up to retry_after_max), timeouts, connection errors, garbled bodies and 5xx with exponential
backoff + jitter, a bounded number of times.

Mode fallback (llm_request.MODES, best first): an endpoint that refuses our response_format (a 400/422, or
any error naming response_format: llama-cpp-python answers with a 500) is asked again one mode lower. Such a
refusal is never retried in the same mode. The client detects the mode once and remembers it.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from typing import Any, Optional, TypeVar

import openai
from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_random_exponential

from acemad_utils.agents.request import MODES, GarbledResponse

T = TypeVar("T")


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


def backoff_wait(state, backoff: tuple[float, float], retry_after_max: float) -> float:
    """Seconds to wait before the next attempt: the server's Retry-After (capped), else jittered exponential."""
    ra = retry_after(state.outcome.exception() if state.outcome else None)
    if ra is not None:
        return min(ra, retry_after_max)
    return wait_random_exponential(multiplier=backoff[0], max=backoff[1])(state)


def retrying(
    call: Callable[[], T],
    *,
    max_attempts: int,
    wait: Callable,
    mode: Optional[str],
    on_retry: Callable,
    max_time: Optional[float] = None,
) -> T:
    """call() until it succeeds, fails for good, max_attempts are used or max_time seconds have passed since
    the first attempt (the last error is raised): a call's retries are bounded in time as well as in number."""
    stop: Any = stop_after_attempt(max_attempts)
    if max_time is not None:
        stop = stop | stop_after_delay(max_time)
    policy = Retrying(
        stop=stop,
        wait=wait,
        retry=retry_if_exception(lambda e: retryable(e) and not format_rejected(e, mode)),
        reraise=True,
        before_sleep=on_retry,
    )
    return policy(call)


def next_mode(failed: str) -> str:
    """The mode to try after the endpoint refused `failed`."""
    return MODES[MODES.index(failed) + 1]


def with_mode_fallback(
    attempt: Callable[[Optional[str]], T],
    current: Callable[[], Optional[str]],
    auto: bool,
    downgrade: Callable[[Optional[str]], None],
) -> tuple[T, Optional[str]]:
    """(attempt(mode), mode): on a refused response_format (auto detection only) downgrade and ask again."""
    while True:
        mode = current()
        try:
            return attempt(mode), mode
        except openai.APIStatusError as e:
            if not (auto and format_rejected(e, mode)):
                raise
            downgrade(mode)  # endpoint rejected this response_format: try the next mode
