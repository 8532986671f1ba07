"""The one place that talks to an LLM: an OpenAI-compatible chat client with structured output,
retries, a concurrency bound, a response cache and token/cost accounting.

    from acemad_utils.agents.client import LLMClient, GenerateConfig
    client = LLMClient()                         # OPENAI_API_KEY, OPENAI_BASE_URL, ACEMAD_MODEL (default gpt-4o-mini)
    client = LLMClient(base_url="http://127.0.0.1:8080/v1", cache="outputs/cache/llm.sqlite")  # local: no key needed
    r = client.generate([{"role": "user", "content": "Say hi"}], GenerateConfig(temperature=0.1, seed=0),
                        schema=None, scope="q1|agent=0|round=1|repeat=0|role=debater|argue")
    r.text, r.prompt_tokens, r.cached
    client.stats()     # {"calls", "network_calls", "cache_hits", "prompt_tokens", "completion_tokens", "retries",
                       #  "failures", "cost_usd", ...}

One call reads top-down in `generate`: the cache (`_cached`, `_store`), the budget (`_within_budget`), the
retries (`_with_retries`), the send (`_send`, once per attempt), each entered once. The parts it uses:
    request.py    one request: its body per structured-output mode, the check of the reply (GarbledResponse)
    retry.py      what is retried and how long to wait (Retry-After, jittered backoff), the mode fallback order
    transport.py  the HTTP: pooled keep-alive connections, a deadline on the whole response
    usage.py      Completion, usage and cost accounting; budget.py the MAX_USD hold
    redact.py     keys kept out of text, exceptions and URLs (redact, scrub, safe_url)

Structured output (`schema=` a JSON schema) is asked for in the best way the endpoint supports. The mode is
detected once per client and remembered; `structured=` fixes it instead. A BoundedSemaphore shared by all
threads bounds the calls in flight (held only during the HTTP call, not while backing off), so callers may
use thread pools freely. When a garbled body's attempts run out, GarbledResponse says what the endpoint
sent and how many attempts were made, e.g. "the endpoint http://127.0.0.1:8080/v1 answered a chat
completion with a 2xx reply whose body is not JSON: '<html>...' (6 attempts; ...)".

`preflight()` (called by agents.LLMPopulation unless preflight=False) does one free GET /models with a short
timeout, so an unreachable base URL or a rejected key stops the run with a clear message before any paid call.
An error raised by `generate` is scrubbed of keys before it leaves this module (redact.scrub).
With a batch queue (CALLS_VIA batch, batch.py) a cache miss is queued instead of sent (batch.Deferred).
A reply without text (content null, a tool call only) is EmptyReply: the call fails and nothing is cached.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any, Optional
from urllib.parse import urlparse

import openai

from acemad_utils.agents import budget as B
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.health import Breaker, Heartbeat, cap_reply, interval_from_env
from acemad_utils.agents.local_server import is_own_server
from acemad_utils.agents.prices import price_of
from acemad_utils.agents.redact import redact, remember_secret, safe_url, scrub
from acemad_utils.agents.request import (
    MODES,
    EmptyReply,
    GarbledResponse,
    GenerateConfig,
    empty_reply,
    parse_reply,
    request_body,
)
from acemad_utils.agents.retry import backoff_delay, format_rejected, next_mode, retryable
from acemad_utils.agents.transport import BoundedClient, CallDeadlineExceeded, ResponseTooLarge, Transport
from acemad_utils.agents.usage import Accounting, Completion, usage_tokens
from acemad_utils.data.settings import env

DEFAULT_MODEL = "gpt-4o-mini"
# Bounds on one call: a debate turn answers in seconds, so a call that has not answered in a minute is
# a hung endpoint; retries of one call stop after RETRY_TIME s whatever the attempt count; a call without its
# own max_tokens gets MAX_TOKENS; no reply stores more than MAX_REPLY_BYTES (a 2 MB reply once wrote 1.4 GB).
TIMEOUT = 60.0
RETRY_TIME = 180.0
# TIMEOUT bounds the whole response of one attempt (connect, headers and body, however slowly the
# endpoint sends: transport.py), RETRY_TIME a call with its retries and backoff, QUESTION_TIME every call of one
# question (llm_agent.LLMPopulation). A run of 3 rounds makes 6 calls per agent one after another.
QUESTION_TIME = 1800.0
MAX_TOKENS = 1024
MAX_REPLY_BYTES = 16384  # 3x the longest reply max_tokens=1024 allows (~5 KB of text)
BREAKER_THRESHOLD = 8
LOCAL_DUMMY_KEY = "sk-no-key-required"
DEFAULT_CONFIG = GenerateConfig()  # generate()'s default sampling settings (frozen: safe to share)
# PRICES (USD per 1M tokens, with sources) lives in prices.py, the package's one price table; extend it per
# client with LLMClient(prices={model: Price(...) or (input, output)}).


class MissingAPIKey(RuntimeError):
    pass


class EndpointUnreachable(RuntimeError):
    """The pre-flight GET /models could not connect (wrong base URL, server not running, no network)."""


class APIKeyRejected(RuntimeError):
    """The pre-flight GET /models was answered 401/403: the endpoint refuses this key."""


class BatchUnsupported(RuntimeError):
    """CALLS_VIA batch against an endpoint without the Batch API (GET /batches answered 404/405/501)."""


class ModelNotServed(RuntimeError):
    """The pre-flight's model check: the endpoint's listing lacks the model and a one-token request for it was
    refused (HTTP 404, or 400 naming the model)."""


def endpoint_kind(base_url: Optional[str]) -> str:
    """'openai' for the default endpoint, 'local-llama.cpp' for a loopback server (what local_server starts),
    else 'openai-compatible'. Pass kind= to LLMClient to override. The kind is part of every cache key, so it
    stays as it was; it says nothing about cost: a loopback server may be a gateway to a paid provider. Whether
    a call is free is LLMClient.free (the project's own llama.cpp server) or the profile's terms (prices.py)."""
    host = urlparse(base_url).hostname if base_url else "api.openai.com"
    if host == "api.openai.com":
        return "openai"
    if host in ("127.0.0.1", "localhost", "::1"):
        return "local-llama.cpp"
    return "openai-compatible"


def _api_key(api_key: Optional[str], kind: str) -> str:
    """The key to send: the argument or OPENAI_API_KEY (remembered for redaction); a placeholder for a local
    server, which ignores it (the SDK wants one); MissingAPIKey for OpenAI itself."""
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if key:
        remember_secret(key)
        return key
    if kind == "openai":
        raise MissingAPIKey(
            "no OpenAI API key: set OPENAI_API_KEY (or use a local endpoint via "
            "OPENAI_BASE_URL / the 'local' profile, which needs no key)"
        )
    return LOCAL_DUMMY_KEY


class LLMClient:
    """Thread-safe chat client for one endpoint (one base URL); the model may be overridden per call.

    max_concurrency  calls in flight at once, shared by every thread using this client
    timeout          seconds one attempt may take, its whole response however slowly the endpoint sends (default
                     TIMEOUT, or $ACEMAD_CALL_TIMEOUT); also the longest wait for any one byte
    max_attempts     total attempts per call (1 = no retry)
    retry_time       seconds within which a call ends, retries and backoff included, whatever max_attempts says
    breaker          consecutive failures of one kind that stop every further call (health.Breaker)
    max_tokens       completion cap of a call that does not set its own
    max_reply_bytes  the most a stored reply keeps (cut with a visible mark, health.cap_reply)
    backoff          (base, max) seconds of the jittered exponential backoff; Retry-After is honoured up to
                     retry_after_max
    structured       "auto" (detect) or one of MODES
    cache            a ResponseCache, a path to one, or None
    prices           {model: prices.Price or (input, output)} added to prices.PRICES
    budget           a budget.Budget (MAX_USD); default: the process-wide one from ACEMAD_MAX_USD, if set. With a
                     cap, a client whose model is unpriced is refused when built (budget.UnpricedModel)
    free             the endpoint bills nothing; default: it is a llama.cpp server local_server.serve() started
                     in this process (local_server.is_own_server). Any other endpoint is priced per model
    """

    _flight: dict[int, float]
    _t0: Optional[float]

    def __init__(
        self,
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        kind: Optional[str] = None,
        max_concurrency: int = 8,
        timeout: Optional[float] = None,
        max_attempts: int = 6,
        retry_time: float = RETRY_TIME,
        breaker: int = BREAKER_THRESHOLD,
        max_tokens: int = MAX_TOKENS,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        backoff: tuple[float, float] = (1.0, 60.0),
        retry_after_max: float = 120.0,
        structured: str = "auto",
        cache: ResponseCache | str | os.PathLike | None = None,
        prices: Optional[dict] = None,
        budget: Optional[B.Budget] = None,
        free: Optional[bool] = None,
    ):
        self.model = model or env("ACEMAD_MODEL") or DEFAULT_MODEL
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._base_url = base_url  # for error messages only (safe_url); never in describe() or the cache
        self.kind = kind or endpoint_kind(base_url)
        self.free = is_own_server(base_url) if free is None else free
        key = _api_key(api_key, self.kind)
        if structured != "auto" and structured not in MODES:
            raise ValueError(f"structured={structured!r}: choose 'auto' or one of {MODES}")
        self._auto = structured == "auto"
        self.mode = MODES[0] if self._auto else structured
        timeout = float(env("ACEMAD_CALL_TIMEOUT") or TIMEOUT) if timeout is None else timeout
        self.timeout, self.retry_time = timeout, retry_time
        self.max_tokens, self.max_reply_bytes = max_tokens, max_reply_bytes
        self.breaker = Breaker(safe_url(base_url), threshold=breaker)
        self._sdk = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)  # off the hot path
        self._http = Transport(base_url, key, timeout=timeout)  # chat completions (transport.py)
        self._sem = threading.BoundedSemaphore(max_concurrency)
        self.max_concurrency = max_concurrency
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.retry_after_max = retry_after_max
        self.cache = ResponseCache(cache) if isinstance(cache, (str, os.PathLike)) else cache
        self.prices = dict(prices or {})  # extra prices over prices.PRICES (see price_of)
        self.budget = budget if budget is not None else B.current(self.cache)
        capped = self.budget is not None and self.budget.max_usd is not None
        if capped and not self.free and price_of(self.model, self.prices) is None:
            raise B.UnpricedModel(self.model)  # refused before any call, even the preflight's GET
        self.batch_queue: Any = None  # batch.BatchQueue when calls go through the Batch API (LLMPopulation sets it)
        self._lock = threading.Lock()  # guards self.mode and the progress counters
        self.accounting = Accounting(self.kind, self.prices, free=self.free)  # counters and cost (usage.py)
        # attempts in flight (id -> start time), answered, failed, first start: the progress line
        self._flight, self._answered, self._failed_n, self._t0 = {}, 0, 0, None
        self._heartbeat = Heartbeat(self._progress_line, lambda: bool(self._flight), interval_from_env())

    # ------------------------------------------------------------------ public
    def generate(
        self,
        messages: Sequence[dict],
        config: GenerateConfig = DEFAULT_CONFIG,
        *,
        schema: Optional[dict] = None,
        scope: str = "",
        model: Optional[str] = None,
        deadline: Optional[float] = None,
    ) -> Completion:
        """One chat completion. `schema` asks for JSON matching it; `scope` separates cache entries of
        otherwise identical calls (agent, round, repeat, call kind); `deadline` (time.monotonic()) ends the call
        and its retries, e.g. its question's (LLMAgent). Top-down: the cache, the budget, the retries, the send,
        each entered once (the send once per attempt)."""
        model = model or self.model
        messages = [dict(m) for m in messages]
        params = config.params()
        params.setdefault("max_tokens", self.max_tokens)  # every call has a completion cap
        self.add_usage(calls=1)
        # The *requested* format is keyed, not the transport mode, so a warm rerun hits the cache before
        # the mode has been re-detected.
        key = None
        if self.cache is not None:
            fmt = None if schema is None else {"schema": schema}
            key = ResponseCache.key(model=model, kind=self.kind, params=params, messages=messages, fmt=fmt, scope=scope)
        # identical concurrent calls: one request, one stored reply
        with self.cache.single_flight(key) if key is not None and self.cache is not None else contextlib.nullcontext():
            hit = self._cached(key)
            if hit is not None:
                return hit
            if self.batch_queue is not None:  # CALLS_VIA batch: queue it, the question waits (batch.Deferred)
                mode = self.mode if schema is not None else None
                body = self.request_body(model, messages, params, mode, schema=schema)
                self.batch_queue.defer(self, key, model, body, mode=mode)
            out = self._within_budget(model, messages, params, schema, deadline)
            self._store(key, model, out)
            return out

    # Accounting (usage.Accounting): kept as client methods, batch.py and callers use them.
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
        return self.accounting.call_cost(model, prompt_tokens, completion_tokens, cached_tokens, batch=batch)

    def estimate_cost(self, model: str, messages: Sequence[dict], params: dict, batch: bool = False) -> Optional[float]:
        """The most a call can cost before it is sent (usage.Accounting.estimate_cost)."""
        return self.accounting.estimate_cost(model, messages, params, batch)

    def count_tokens(self, model: str, pt: int, ct: int, cached: int = 0, *, batch: bool = False) -> None:
        """Add one billed call's tokens to the counters (batch: sent through the Batch API, priced at its rate)."""
        self.accounting.count_tokens(model, pt, ct, cached, batch=batch)

    def stats(self) -> dict:
        """Counters summed over this client's life, plus a cost estimate (None if a model has no price)."""
        return self.accounting.stats()

    request_body = staticmethod(request_body)  # the /chat/completions body of a call (request.py)

    def describe(self) -> dict:
        """JSON-able, secret-free: model, endpoint kind, structured-output mode. Never the key or the URL."""
        return {
            "model": self.model,
            "endpoint": self.kind,
            "structured_output": self.mode,
            "structured_output_detection": "auto" if self._auto else "fixed",
            "max_concurrency": self.max_concurrency,
            "max_attempts": self.max_attempts,
        }

    def preflight(self, timeout: float = 10.0, *, check_model: bool = False, setting: str = "") -> None:
        """One free GET /models (never a completion): raise EndpointUnreachable when no connection can be made
        to the base URL, APIKeyRejected on 401/403. Any other answer (even 404 from a server without /models)
        proves the endpoint is there; a server that accepts the connection but is too busy to answer in time
        gets a warning, not an error. check_model: the model must be served (_check_served). setting: the
        parameter the fix names (default BASE_URL / OPENAI_BASE_URL)."""
        where = safe_url(self._base_url)
        try:
            listing = self._models(timeout)
        except ResponseTooLarge:  # its own line (the endpoint, the cap), not "cannot reach"
            raise
        except openai.APIConnectionError as e:  # refused, DNS failure, connect timeout, or a slow answer
            cause = type(e.__cause__).__name__ if e.__cause__ is not None else ""
            slow = isinstance(e, CallDeadlineExceeded) or cause in ("ReadTimeout", "WriteTimeout")
            if isinstance(e, openai.APITimeoutError) and slow:
                warnings.warn(
                    f"the model endpoint {where} accepted the connection but did not answer GET /models "
                    f"within {timeout:g} s; continuing (it may be busy)",
                    stacklevel=2,
                )
                return
            setting = setting or "BASE_URL / OPENAI_BASE_URL"
            fix = (
                f"check the network connection, or set {setting} to an OpenAI-compatible server"
                if self._base_url is None
                else f"start the server, or set {setting} to a running OpenAI-compatible server such as "
                "http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp), or unset it for api.openai.com"
            )
            raise EndpointUnreachable(
                f"cannot reach the model endpoint {where} (GET /models: "
                f"{cause or type(e).__name__}); {fix}. No paid call was made."
            ) from None
        except openai.APIStatusError as e:
            if e.status_code in (401, 403):
                raise APIKeyRejected(
                    f"the endpoint {where} rejected the API key (HTTP {e.status_code} on GET /models): check "
                    "OPENAI_API_KEY (the key is read from the environment only and never printed). "
                    "No paid call was made."
                ) from None
        except Exception:  # an answer we cannot parse still proves the server is there
            return
        if check_model:
            self._check_served(listing, timeout, where)

    def _check_served(self, listing: Any, timeout: float, where: str) -> None:
        """ModelNotServed when the endpoint does not serve self.model: its GET /models listing names other models
        and a one-token request for this one is refused with 400/404. Why the request: a llama.cpp server lists
        its file's name and answers any model name, so a listing alone would refuse it. The request is sent only
        when the listing lacks the model (one token; free on such a server); any other outcome passes."""
        try:
            served = [str(m["id"]) for m in json.loads(listing.http_response.content)["data"]]
        except Exception:  # no listing to read: nothing to check against
            return
        if not served or self.model in served:
            return
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": "OK"}], "max_tokens": 1})
        try:
            status, headers, data = self._http.post(
                "/chat/completions", body.encode(), deadline=time.monotonic() + timeout
            )
        except Exception:  # slow or dropped: the listing proved the endpoint is there; the run will tell
            return
        if status == 404 or (status == 400 and b"model" in data.lower()):  # not, e.g., a refused max_tokens
            shown = ", ".join(served[:8]) + (f" and {len(served) - 8} more" if len(served) > 8 else "")
            raise ModelNotServed(
                f"the endpoint {where} does not serve the model {self.model!r} (HTTP {status}; GET /models lists "
                f"{shown}): set the model to one it serves. No paid call was made."
            ) from None

    def check_batch_api(self, timeout: float = 10.0) -> None:
        """BatchUnsupported (one line, the fix in it) when the endpoint has no Batch API: a free GET /batches
        answered 404, 405 or 501 (llama.cpp's server, most gateways). Whether the Batch API applies is the
        endpoint's answer, never its address: a loopback URL may be a gateway that has one. Any other outcome
        passes (a down endpoint is preflight's to report)."""
        try:
            self._sdk.with_options(timeout=timeout, max_retries=0).batches.with_raw_response.list(limit=1)
        except openai.APIStatusError as e:
            if e.status_code in (404, 405, 501):
                raise BatchUnsupported(
                    f"CALLS_VIA=batch: the endpoint {safe_url(self._base_url)} has no Batch API (GET /batches: HTTP "
                    f"{e.status_code}): use CALLS_VIA=files to write the requests for its own batch runner (vLLM "
                    "run-batch), or CALLS_VIA=sync. No paid call was made."
                ) from None
        except Exception:  # noqa: BLE001 (unreachable or garbled: the preflight and the run say so)
            return

    def _models(self, timeout: float) -> Any:
        """GET /models with the SDK, ended after `timeout` s however slowly the endpoint sends: the SDK's timeout
        bounds each gap between bytes only, so the call runs in a daemon thread that is let go at
        the deadline (like a silent server: the preflight warns and the run goes on)."""
        out: list = []

        bounded = BoundedClient(safe_url(self._base_url), time.monotonic() + timeout + 1.0, timeout=timeout)

        def get() -> None:  # through BoundedClient: a listing without end is cut, and stops at the deadline
            try:
                out.append(
                    self._sdk.with_options(
                        timeout=timeout, max_retries=0, http_client=bounded
                    ).models.with_raw_response.list()
                )
            except Exception as e:  # noqa: BLE001 (re-raised in the caller's thread)
                out.append(e.__cause__ if isinstance(e.__cause__, ResponseTooLarge) else e)
            finally:
                bounded.close()

        t = threading.Thread(target=get, daemon=True, name="acemad-preflight")
        t.start()
        t.join(timeout + 1.0)  # + 1 s: the SDK's own connect or read timeout, when it fires, says more
        if not out:
            raise self._http.expired("/models", f"GET /models did not end within {timeout:g} s")
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]

    def close(self) -> None:
        self._http.close()
        self._sdk.close()

    # ------------------------------------------------------------------ one call, top-down
    def add_usage(self, **kw: int) -> None:
        self.accounting.add(**kw)

    def _cached(self, key: Optional[str]) -> Optional[Completion]:
        """The stored reply of `key`, if any (a cache hit: no budget, no network)."""
        hit = None if key is None or self.cache is None else self.cache.get(key)
        if hit is None:
            return None
        self.add_usage(cache_hits=1)
        self.accounting.count_mode(hit.get("mode"))
        return Completion(
            text=cap_reply(hit["text"], self.max_reply_bytes)[0],
            mode=hit.get("mode"),
            cached=True,
            finish_reason=hit.get("finish_reason"),
        )

    def _store(self, key: Optional[str], model: str, out: Completion) -> None:
        if key is None or self.cache is None:
            return
        value = {
            "text": out.text,
            "mode": out.mode,
            "finish_reason": out.finish_reason,
            "prompt_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens,
            "cached_tokens": out.cached_tokens,
            **({"free": True} if self.free else {}),  # cache.spent_since: not part of a capped run's spend
        }
        self.cache.put(key, value, model=model, kind=self.kind)

    def _within_budget(self, model: str, messages: list, params: dict, schema, deadline) -> Completion:
        """The MAX_USD hold: reserve the call's most expensive estimate (BudgetExceeded stops here, before
        anything is sent), then settle its actual cost, or release the hold when the call failed."""
        if self.budget is None:
            return self._with_retries(model, messages, params, schema, deadline)
        held = self.budget.reserve(self.accounting.estimate_cost(model, messages, params), model)
        try:
            out = self._with_retries(model, messages, params, schema, deadline)
        except BaseException:
            self.budget.release(held)
            raise
        self.budget.settle(held, self.accounting.actual_cost(model, messages, out))
        return out

    def _with_retries(self, model: str, messages: list, params: dict, schema, deadline) -> Completion:
        """Attempts until one answers, the error is final, max_attempts are used or the call's time is up
        (retry_time after it started, or the question's deadline); the structured-output fallback (an endpoint
        that refuses our response_format is asked again one mode lower, with fresh attempts)."""
        t0 = time.monotonic()
        stop_at = t0 + self.retry_time if deadline is None else min(t0 + self.retry_time, deadline)
        attempt = network = retries = 0
        while True:
            mode = self.mode if schema is not None else None
            attempt += 1
            try:
                self.breaker.check()  # tripped: no further call is sent (EndpointDown is not retried)
                network += 1
                reply = self._send(request_body(model, messages, params, mode, schema=schema), stop_at)
            except Exception as e:
                if self._auto and format_rejected(e, mode):
                    self._downgrade(mode)  # endpoint rejected this response_format: the next mode, new attempts
                    attempt = 0
                    continue
                self.breaker.attempt_failed(e)
                wait = self._retry_in(e, attempt, mode, stop_at)
                if wait is None:
                    self._failed(e, network)
                    raise
                retries += 1
                self.add_usage(retries=1)
                time.sleep(wait)
                continue
            self.breaker.succeeded()
            return self._completion(model, mode, reply, network=network, retries=retries)

    def _send(self, body: dict, stop_at: float) -> dict:
        """One attempt: POST while holding a concurrency slot, ended by min(slot + timeout, stop_at) however
        slowly the endpoint sends (transport.py); the reply checked after the slot is let go."""
        raw = json.dumps(body).encode()
        with self._slot(stop_at):
            status, headers, data = self._http.post(
                "/chat/completions", raw, deadline=min(time.monotonic() + self.timeout, stop_at)
            )
        if not 200 <= status < 300:
            raise self._http.status_error("/chat/completions", status, headers, data)
        reply = parse_reply(data, self._base_url)
        empty = empty_reply(reply["choices"][0])
        if empty is not None:  # a failed call, not an answer: never stored, so a rerun asks again
            raise EmptyReply(
                f"the endpoint {safe_url(self._base_url)} sent {empty} for model {body.get('model')!r}: a refusal or "
                "a reasoning model out of tokens; nothing was cached, fix the model or its max_tokens and rerun"
            )
        return reply

    def _retry_in(self, e: Exception, attempt: int, mode: Optional[str], stop_at: float) -> Optional[float]:
        """Seconds to wait before the next attempt, or None when `e` ends the call: not retryable, attempts used
        up, or the next attempt could not start before the call's time is up."""
        if not retryable(e) or format_rejected(e, mode) or attempt >= self.max_attempts:
            return None
        if self.breaker.message is not None:  # tripped: the next attempt raises EndpointDown, do not sleep first
            return 0.0
        wait = backoff_delay(e, attempt, self.backoff, self.retry_after_max)
        return wait if time.monotonic() + wait < stop_at else None

    def _failed(self, e: Exception, network: int) -> None:
        """A call that failed for good: counted, shown to the breaker, its message made useful and key-free."""
        self.add_usage(failures=1)
        self.breaker.call_failed(e)
        if isinstance(e, GarbledResponse) and network > 1:
            e.args = (
                f"{e.args[0]} ({network} attempts; a proxy or server that is not an OpenAI-compatible "
                "/v1 endpoint answers like this: check BASE_URL / OPENAI_BASE_URL)",
            )
        scrub(e)  # a server may echo the key in its error body: nothing leaves this module with it

    def _completion(self, model: str, mode: Optional[str], reply: dict, *, network: int, retries: int) -> Completion:
        choice = reply["choices"][0]
        pt, ct, cached = usage_tokens(reply.get("usage"))
        self.count_tokens(model, pt, ct, cached)
        self.accounting.count_mode(mode)
        # A reply that echoes the key (a proxy, a prompt injection) is stored, shown and cached without it.
        text, cut = cap_reply(redact(choice["message"].get("content") or ""), self.max_reply_bytes)
        return Completion(
            text=text,
            mode=mode,
            prompt_tokens=pt,
            completion_tokens=ct,
            cached_tokens=cached,
            network_calls=network,
            finish_reason="length" if cut else choice.get("finish_reason"),
            retries=retries,
        )

    def _downgrade(self, failed: Optional[str]) -> None:
        with self._lock:
            if self.mode == failed:  # several threads may fail at once; move down one step only
                self.mode = next_mode(failed)

    @contextlib.contextmanager
    def _slot(self, stop_at: float):
        """The concurrency bound, held for the HTTP call only; each entry is one network call (and is in flight
        for the progress line until it ends). Waiting for a slot ends at stop_at too, like a timeout."""
        if not self._sem.acquire(timeout=max(0.0, stop_at - time.monotonic())):
            raise self._http.expired("/chat/completions", "no free slot among the calls in flight before the deadline")
        try:
            self.add_usage(network_calls=1)
            token = object()
            with self._lock:
                self._t0 = self._t0 or time.monotonic()
                self._flight[id(token)] = time.monotonic()
            self._heartbeat.start()
            ok = False
            try:
                yield
                ok = True
            finally:
                with self._lock:
                    self._flight.pop(id(token), None)
                    self._answered += ok
                    self._failed_n += not ok
        finally:
            self._sem.release()

    def _progress_line(self) -> str:
        """done / failed / in flight / elapsed, for the heartbeat (health.Heartbeat)."""
        now = time.monotonic()
        with self._lock:
            flight = sorted(self._flight.values())
            done, failed, t0 = self._answered, self._failed_n, self._t0 or now
        oldest = f" (oldest {now - flight[0]:.0f} s)" if flight else ""
        return (
            f"[calls] {self.model} at {safe_url(self._base_url)}: {done} answered, {failed} failed, "
            f"{len(flight)} in flight{oldest}, {now - t0:.0f} s elapsed"
        )
