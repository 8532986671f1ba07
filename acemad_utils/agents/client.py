"""The one place that talks to an LLM: the openai SDK (its timeouts and retries) plus a response cache, MAX_USD, a
breaker, keys kept out, and what the SDK lacks (its HTTP client _Guard): a deadline and a size cap on each response."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional
from urllib.parse import parse_qsl, urlparse, urlunparse

import httpx2
import openai

from acemad_utils.agents import budget as B
from acemad_utils.agents.cache import GarbledResponse, ResponseCache, parse_reply, reply_value, usage_of
from acemad_utils.agents.health import EndpointDown, emit
from acemad_utils.agents.local_server import is_own_server
from acemad_utils.agents.prices import price_of
from acemad_utils.agents.redact import redact, remember_secret, remember_url_secrets, safe_url, scrub
from acemad_utils.agents.tokenmodel import most_prompt_tokens, prompt_tokens, tokens
from acemad_utils.data.settings import env, seconds
from acemad_utils.protocol.schema import CALL_KEYS, USAGE_KEYS

DEFAULT_MODEL = "gpt-4o-mini"
# One attempt (TIMEOUT), a call with its retries (RETRY_TIME), one question's calls (QUESTION_TIME); a stored reply
# <= MAX_REPLY_BYTES (a 2 MB reply once wrote 1.4 GB). A server on this machine (serve()'s, or the user's llama.cpp
# or Ollama) shares this CPU or one GPU and queues the calls in flight: under load a long Decentralized MAD prompt
# took over 60 s on every attempt, and SmolLM2 on llama-cpp-python with 8 calls in flight timed out at 60 s, hence
# LOCAL_TIMEOUT for every loopback endpoint.
TIMEOUT, RETRY_TIME, QUESTION_TIME, LOCAL_TIMEOUT = 60.0, 180.0, 1800.0, 300.0
MAX_TOKENS, MAX_REPLY_BYTES, MAX_RESPONSE_BYTES = 1024, 16384, 8 * 2**20
SHARD = 32  # calls in flight per SDK client (its httpx pool)
MODES = ("json_schema", "json_object", "text")  # structured output, best first


class MissingAPIKey(RuntimeError): ...


class EndpointUnreachable(RuntimeError): ...  # the pre-flight's findings, before any paid call


class APIKeyRejected(RuntimeError): ...


class BatchUnsupported(RuntimeError): ...


class ModelNotServed(RuntimeError): ...


class EmptyReply(RuntimeError):  # a completion without text: never retried (the same request gets the same)
    def __init__(self, message: str, billed: dict):
        super().__init__(message)
        self.billed = billed  # its usage: a provider bills an empty reply (a reasoning model out of tokens) in full


class CallsStopped(RuntimeError): ...  # a second Ctrl-C stopped the run: no new call is sent


class CallDeadlineExceeded(openai.APITimeoutError):
    def __init__(self, request: httpx2.Request, message: str) -> None:
        openai.APIConnectionError.__init__(self, message=message, request=request)


class ResponseTooLarge(openai.APIConnectionError): ...  # a body past MAX_RESPONSE_BYTES: not retried


# inside the SDK's attempt loop: _Stop passes through unretried (the breaker tripped); _Garbled and _Slow are retried
# like a dropped connection and a timeout, then become GarbledResponse and CallDeadlineExceeded
class _Stop(openai.OpenAIError): ...


class _Garbled(httpx2.RemoteProtocolError): ...


class _Slow(httpx2.ReadTimeout): ...


@dataclass(frozen=True)
class GenerateConfig:
    """Per-call sampling. None means "leave it to the endpoint"."""

    temperature: Optional[float] = None
    seed: Optional[int] = None
    max_tokens: Optional[int] = None
    top_p: Optional[float] = None

    def params(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Completion:
    text: str
    mode: Optional[str]  # structured-output mode used (None for free text)
    cached: bool = False
    prompt_tokens: int = 0  # billed in this call (0 on a cache hit)
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the endpoint's prompt cache
    network_calls: int = 0
    finish_reason: Optional[str] = None
    retries: int = 0

    def usage(self) -> dict:
        u = {"calls": 1, "network_calls": self.network_calls, "cache_hits": int(self.cached),
             "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}  # fmt: skip
        return u | {k: v for k, v in (("cached_tokens", self.cached_tokens), ("retries", self.retries)) if v}


def endpoint_kind(base_url: Optional[str]) -> str:
    """'openai', 'local-llama.cpp' (loopback) or 'openai-compatible': in every cache key (never changed), not a cost."""
    host = urlparse(base_url).hostname if base_url else "api.openai.com"
    if host == "api.openai.com":
        return "openai"
    return "local-llama.cpp" if host in ("127.0.0.1", "localhost", "::1") else "openai-compatible"


def refuses_format(e: BaseException, accepted: bool = False) -> bool:
    """An endpoint refusing a structured-output mode: an error naming response_format (llama-cpp-python's server
    answers json_schema with a 500), or, while the mode has not answered yet, any 400 or 422 (a terse refusal); once
    it has, another 400 (a prompt too long) fails its call alone. Read in the endpoint's own words: inspect's error
    string also dumps the request, which always names response_format."""
    status, said = getattr(e, "status_code", None), str(getattr(e, "provider_message", None) or e)
    return isinstance(status, int) and ("response_format" in said or (not accepted and status in (400, 422)))


def request_body(model: str, messages: list, params: dict, mode: Optional[str], *, schema: Optional[dict]) -> dict:
    """The /chat/completions body of a call (also the `body` of a Batch API request line)."""
    kw: dict[str, Any] = dict(model=model, messages=messages, **params)
    if mode == "json_schema":
        kw["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": schema,
                                                                        "strict": True}}  # fmt: skip
    elif mode == "json_object":
        kw["response_format"] = {"type": "json_object", "schema": schema}  # llama.cpp turns it into a grammar
    return kw


def cap_reply(text: str, cap: int) -> tuple[str, bool]:
    """`text` cut to at most `cap` UTF-8 bytes with a visible mark (never a silent cut; idempotent)."""
    raw = text.encode("utf-8")
    if len(raw) <= cap:
        return text, False
    mark = f"\n[reply truncated by acemad: the endpoint sent {len(raw)} bytes, more than max_reply_bytes={cap}]"
    return raw[: max(0, cap - len(mark.encode()))].decode("utf-8", "ignore") + mark, True


_CAUSES = {"connection": "could not connect", "timeout": "timed out", "key rejected":
           "rejected the API key (HTTP 401/403)", "rate limit": "kept answering 429 (rate limit) beyond the retry "
           "budget", "server error": "kept answering 5xx beyond the retry budget"}  # fmt: skip


_LOOP: Optional[tuple[asyncio.AbstractEventLoop, int]] = None
_LOOP_LOCK = threading.Lock()


def _run(coro: Any) -> Any:
    """`coro` on the process's event loop for model calls (a daemon thread, started again after a fork)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP[1] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="acemad-calls", daemon=True).start()
            _LOOP = (loop, os.getpid())
    return asyncio.run_coroutine_threadsafe(coro, _LOOP[0]).result()


class _Guard(httpx2.AsyncClient):
    """The SDK's HTTP client: every attempt bounded in time and size, counted, and held to the concurrency bound."""

    def __init__(self, owner: LLMClient, **kw: Any) -> None:
        super().__init__(follow_redirects=False, headers={"Accept-Encoding": "identity"}, **kw)
        self.owner = owner

    async def send(self, request: httpx2.Request, *, stream: bool = False, **kw: Any) -> httpx2.Response:
        # the call this attempt belongs to, named in a header the SDK copies onto every attempt (a contextvar
        # would not reach it under nest_asyncio, which papermill's kernels apply)
        o, call = self.owner, self.owner._calls.get(request.headers.pop("x-acemad-call", ""))
        if call is None:  # off the hot path (GET /models, the model probe): bounded, not counted
            return await self._bounded(request, **kw)
        if o._sem is None:
            o._sem = asyncio.Semaphore(o.max_concurrency)
            threading.Thread(target=o._heartbeat, name="acemad-progress", daemon=True).start()
        async with o._sem:
            if o.down is not None:  # checked once a slot is free: the calls queued behind a dead endpoint never go
                raise _Stop(o.down)
            call["n"] = call.get("n", 0) + 1
            o.add_usage(network_calls=1)
            o._flight[id(request)] = time.monotonic()
            o._t0 = o._t0 or time.monotonic()
            try:
                response = await self._bounded(request, **kw)
            except Exception as e:
                o._failed_n += 1
                call["last"] = e
                if not isinstance(e, ResponseTooLarge):  # a body, not the connection
                    o.failed("timeout" if isinstance(e, httpx2.TimeoutException) else "connection", e)
                raise
            finally:
                o._flight.pop(id(request), None)
        o._answered += 1
        call["last"] = response
        if response.status_code in (401, 403):
            o.failed("key rejected", openai.AuthenticationError(f"Error code: {response.status_code}",
                             response=response, body=None))  # fmt: skip
        elif 300 <= response.status_code < 400:  # never followed: the key stays with the host named
            raise openai.APIStatusError(f"the endpoint {o.where} redirects {request.url.path} "
                                        f"({(response.headers.get('location') or 'no Location')[:200]}); redirects "
                                        "are never followed (the key is sent to the host you named only): set the "
                                        "base URL to the final one", response=response, body=None)  # fmt: skip
        elif request.method == "POST":  # in a call: its chat completion
            if response.status_code < 300:
                try:
                    call["reply"] = parse_reply(response.content, f"the endpoint {o.where}")
                except GarbledResponse as e:
                    call["last"] = _Garbled(str(e), request=request)  # what the call's deadline then reports
                    raise call["last"] from None
            elif response.status_code >= 500 and call.get("json_mode") and b"response_format" in response.content:
                response.headers["x-should-retry"] = "false"  # a refused format: asked again one mode lower
        return response

    async def _bounded(self, request: httpx2.Request, **kw: Any) -> httpx2.Response:
        """One attempt's whole response within the timeout, its raw body read to at most the cap (never inflated)."""
        try:
            async with asyncio.timeout(self.owner.timeout):  # type: ignore[attr-defined]  # 3.11 (requires-python)
                response = await super().send(request, stream=True, **kw)
                try:
                    body = bytearray()
                    announced = response.headers.get("content-length", "0")
                    async for chunk in response.aiter_raw():
                        body += chunk
                        if len(body) > MAX_RESPONSE_BYTES or (announced.isdigit() and
                                                              int(announced) > MAX_RESPONSE_BYTES):  # fmt: skip
                            raise ResponseTooLarge(message=(
                                f"the endpoint {self.owner.where} answered {request.method} {request.url.path} "
                                f"with more than {MAX_RESPONSE_BYTES} bytes; nothing past the cap was read: it is "
                                "not an OpenAI-compatible reply, check the base URL"), request=request)  # fmt: skip
                finally:
                    await response.aclose()
        except TimeoutError:
            raise _Slow(f"the whole response did not arrive within {self.owner.timeout:g} s", request=request) from None
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]  # never inflated
        return httpx2.Response(response.status_code, headers=headers, content=bytes(body), request=request)


class LLMClient:
    """Thread-safe chat client for one base URL. timeout: one attempt ($ACEMAD_CALL_TIMEOUT); retry_time: a call with
    its retries; breaker: failures in a row that stop every later call; free: bills nothing (default: serve()'s)."""

    def __init__(self, model: Optional[str] = None, base_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 kind: Optional[str] = None, max_concurrency: int = 8, timeout: Optional[float] = None,
                 max_attempts: int = 6, retry_time: Optional[float] = None, breaker: int = 8,
                 max_reply_bytes: int = MAX_REPLY_BYTES,
                 cache: ResponseCache | str | os.PathLike | None = None, budget: Optional[B.Budget] = None,
                 free: Optional[bool] = None):  # fmt: skip
        self.model = model or env("ACEMAD_MODEL") or DEFAULT_MODEL
        url = base_url or os.environ.get("OPENAI_BASE_URL") or None  # never in describe() or the cache
        remember_url_secrets(url)  # an endpoint may echo them (a 401 quoting "Basic <user:password>")
        u = urlparse(url or "")  # the SDK appends paths to base_url: a query goes beside them, as default_query
        self._query = dict(parse_qsl(u.query, keep_blank_values=True)) or None
        self._base_url = urlunparse(u._replace(query="")) if u.query else url
        self.where = safe_url(self._base_url)
        self.kind = kind or endpoint_kind(self._base_url)
        self.free = is_own_server(self._base_url) if free is None else free
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and self.kind == "openai":
            raise MissingAPIKey("no OpenAI API key: set OPENAI_API_KEY (or use a local endpoint via OPENAI_BASE_URL "
                                "/ the 'local' profile, which needs no key)")  # fmt: skip
        if key:
            remember_secret(key)
        self._key = key or "sk-no-key-required"  # a local server ignores it; the SDK wants one
        self.mode = MODES[0]  # structured output: the best the endpoint accepts, detected on the first refusal
        self.settled: Optional[str] = None  # the mode of the first structured reply: self.mode is known to work
        self._probe: Optional[tuple[asyncio.Lock, asyncio.AbstractEventLoop]] = None
        own = LOCAL_TIMEOUT if endpoint_kind(self._base_url) == "local-llama.cpp" else TIMEOUT  # any loopback
        self.timeout = seconds("ACEMAD_CALL_TIMEOUT", timeout, own)
        self.retry_time = max(RETRY_TIME, 3 * self.timeout) if retry_time is None else retry_time
        self.max_tokens, self.max_reply_bytes = MAX_TOKENS, max_reply_bytes
        self.max_concurrency, self.max_attempts = max_concurrency, max_attempts
        if breaker < 1:
            raise ValueError(f"breaker threshold must be >= 1, got {breaker}")
        self.breaker = breaker
        self._fails: tuple[Optional[str], int] = (None, 0)  # the kind of the last failures in a row, and their count
        self.down: Optional[str] = None  # the breaker's one line, once tripped
        self.cache = ResponseCache(cache) if isinstance(cache, (str, os.PathLike)) else cache
        self.budget = budget or B.current(self.cache) or B.Budget(None)
        if self.budget.max_usd is not None and not self.free and price_of(self.model) is None:
            raise B.UnpricedModel(self.model)  # refused before any call, even the preflight's
        self.batch_queue: Any = None  # batch.Batcher when calls go through the Batch API (LLMPopulation sets it)
        self.stopped = False  # a second Ctrl-C (the runner): a question in flight ends at its next call
        self._token_ratio: Optional[float] = None  # the most prompt tokens reported per modelled one (None: none yet)
        self.check_first = False  # preflight() before the first call the cache cannot answer (LLMPopulation)
        self._listing: Any = None  # GET /models' answer, once a preflight read it: a second check reads no more
        self._check_lock = threading.Lock()
        self._lock = threading.Lock()
        self._stats = dict.fromkeys((*USAGE_KEYS, *CALL_KEYS, "failures"), 0)
        self._cost: Optional[float] = 0.0  # None once a model without a price was billed
        self._flight: dict[int, float] = {}
        self._calls: dict[str, dict] = {}  # id -> the attempts of a call in flight (_Guard)
        self._answered = self._failed_n = 0
        self._models: dict[str, None] = {}  # the models asked here, in order
        self._replied: dict[str, None] = {}  # the structured-output modes of the commitments answered (describe)
        self._t0: Optional[float] = None
        self._sem: Optional[asyncio.Semaphore] = None
        # one SDK client per SHARD calls in flight: one httpx pool of 256 fed a 1 s endpoint 0.35 (bench/throughput.py)
        self._sdk: dict[str, Any] = dict(api_key=self._key, base_url=self._base_url, default_query=self._query,
                                         timeout=self.timeout)  # fmt: skip
        self._shards = [openai.AsyncOpenAI(**self._sdk, max_retries=max_attempts - 1,
                                           http_client=_Guard(self, timeout=self.timeout))
                        for _ in range(-(-max_concurrency // SHARD))]  # fmt: skip
        self._aio, self._next = self._shards[0], itertools.count()

    @functools.cached_property
    def sdk(self) -> openai.OpenAI:
        """The synchronous SDK client, for the Batch API (its files pass the 8 MiB cap)."""
        return openai.OpenAI(**self._sdk)

    def generate(self, messages: Sequence[dict], config: GenerateConfig = GenerateConfig(), *,
                 schema: Optional[dict] = None, scope: str = "", model: Optional[str] = None,
                 deadline: Optional[float] = None) -> Completion:  # fmt: skip
        """One chat completion: `schema` asks for JSON, `scope` keys the caller, `deadline` ends it."""
        model, messages, params = model or self.model, [dict(m) for m in messages], config.params()
        params.setdefault("max_tokens", self.max_tokens)
        self.add_usage(calls=1)
        self._models.setdefault(model)  # a role's endpoint serves the role's model, not the run's: the [calls] line
        out = self._complete(model, messages, params, schema, scope, deadline)
        if schema is not None and out.mode:  # a cached reply keeps the mode it was asked in: a warm rerun says it too
            self._replied.setdefault(out.mode)
        return out

    def _complete(self, model: str, messages: list, params: dict, schema: Optional[dict], scope: str,
                  deadline: Optional[float]) -> Completion:  # fmt: skip
        if self.cache is None:
            return self._send(model, messages, params, schema, deadline)
        # the *requested* format is keyed, not the mode: a warm rerun hits before the mode is detected
        key = ResponseCache.key(model=model, kind=self.kind, params=params, messages=messages,
                                fmt=None if schema is None else {"schema": schema}, scope=scope)  # fmt: skip
        with self.cache.single_flight(key):
            if (hit := self.cache.get(key)) is not None:
                self.add_usage(cache_hits=1)
                return Completion(cap_reply(hit["text"], self.max_reply_bytes)[0], hit.get("mode"), cached=True,
                                  finish_reason=hit.get("finish_reason"))  # fmt: skip
            if self.batch_queue is not None:  # CALLS_VIA batch: queued, the question waits (batch.Deferred)
                mode = self.mode if schema is not None else None
                self.batch_queue.defer(self, key, model, request_body(model, messages, params, mode, schema=schema),
                                       mode=mode)  # fmt: skip
            try:
                out = self._send(model, messages, params, schema, deadline)
            except EmptyReply as e:  # nothing to store, but paid: MAX_USD in later kernels and "paid:" count it
                if any(e.billed.values()) and not self.free:
                    self.cache.bill(model, e.billed)
                raise
            self.cache.put(key, {"text": out.text, "mode": out.mode, "finish_reason": out.finish_reason,
                                 "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                                 "cached_tokens": out.cached_tokens, **({"free": True} if self.free else {})},
                           model=model, kind=self.kind)  # fmt: skip
            return out

    def _send(self, model: str, messages: list, params: dict, schema: Optional[dict],
              deadline: Optional[float]) -> Completion:  # fmt: skip
        """The call under MAX_USD: its dearest cost held before sending, settled at the reported usage."""
        if self.stopped:
            raise CallsStopped("the run was stopped by a second Ctrl-C: no new call is sent")
        if self.check_first:
            self._check_once()
        held = self.budget.reserve(self.estimate_cost(model, messages, params), model)
        try:
            out = _run(self._call(model, messages, params, schema, deadline))
        except BaseException as e:  # not billed, unless an empty reply reported its usage
            billed = e.billed if isinstance(e, EmptyReply) else None
            self.reported(messages, billed["prompt_tokens"] if billed else None)
            self.budget.settle(held, self.call_cost(model, *billed.values()) if billed else 0.0)
            raise
        reported = (out.prompt_tokens, out.completion_tokens, out.cached_tokens)
        self.reported(messages, out.prompt_tokens)
        self.budget.settle(held, self.call_cost(model, *reported) if any(reported[:2]) else
                           self.call_cost(model, prompt_tokens(messages), tokens(out.text)))  # fmt: skip
        return out

    async def _call(self, model: str, messages: list, params: dict, schema: Optional[dict],
                    deadline: Optional[float]) -> Completion:  # fmt: skip
        """Until a structured mode is accepted, one structured call at a time asks: the calls queued behind it would
        each be refused in the mode it is about to drop (a pilot's first wave: 40 refused requests, now 1). A call
        waits no longer than its own attempts could last, then asks as it would have."""
        args = (model, messages, params, schema, deadline)
        if schema is None or self.settled is not None:
            return await self._attempts(*args)
        if self._probe is None or self._probe[1] is not asyncio.get_running_loop():
            self._probe = (asyncio.Lock(), asyncio.get_running_loop())  # the loop's own (a fork makes a new one)
        lock, wait = self._probe[0], time.monotonic() + self.retry_time
        try:
            async with asyncio.timeout_at(wait if deadline is None else min(wait, deadline)):  # type: ignore[attr-defined]
                await lock.acquire()
        except TimeoutError:
            return await self._attempts(*args)
        try:
            if self.settled is None:
                return await self._attempts(*args)
        finally:
            lock.release()
        return await self._attempts(*args)

    async def _attempts(self, model: str, messages: list, params: dict, schema: Optional[dict],
                        deadline: Optional[float]) -> Completion:  # fmt: skip
        """The SDK's attempts until min(retry_time, deadline); a refused format is asked again one mode lower."""
        stop_at = time.monotonic() + self.retry_time
        stop_at = stop_at if deadline is None else min(stop_at, deadline)
        attempts = sent = 0  # attempts in this mode, network calls in all
        while True:
            mode = self.mode if schema is not None else None
            call: dict[str, Any] = {"json_mode": mode in ("json_schema", "json_object")}
            self._calls[str(id(call))] = call
            try:
                try:
                    async with asyncio.timeout_at(stop_at):  # type: ignore[attr-defined]
                        await self._shards[next(self._next) % len(self._shards)].post(
                            "/chat/completions", cast_to=httpx2.Response,
                            body=request_body(model, messages, params, mode, schema=schema),
                            options={"headers": {"x-acemad-call": str(id(call))}})  # fmt: skip
                finally:
                    self._calls.pop(str(id(call)), None)
                    attempts, sent = attempts + call.get("n", 0), sent + call.get("n", 0)
                value, empty = reply_value(call["reply"])
                if value is None:
                    billed = usage_of(call["reply"])
                    self.count_tokens(model, *billed.values())
                    raise EmptyReply(f"the endpoint {self.where} sent {empty} for model {model!r}: a refusal or a "
                                     "reasoning model out of tokens; nothing was cached, fix the model or its "
                                     "max_tokens and rerun", billed)  # fmt: skip
            except Exception as e:
                e = self._final(e, call, attempts)
                if mode in MODES[:2] and refuses_format(e, accepted=self.settled == mode):
                    with self._lock:
                        self.mode = MODES[MODES.index(mode) + 1] if self.mode == mode else self.mode
                    attempts = 0
                    continue
                self.add_usage(failures=1, retries=max(attempts - 1, 0))
                status = e.status_code if isinstance(e, openai.APIStatusError) else 0
                self.failed("rate limit" if status == 429 else "server error" if status >= 500 else None, e)
                raise scrub(e) from None
            self._fails = (None, 0)
            if mode is not None:
                self.settled = mode
            pt, ct, cached = value["prompt_tokens"], value["completion_tokens"], value["cached_tokens"]
            self.count_tokens(model, pt, ct, cached)
            self.add_usage(retries=attempts - 1)
            text, cut = cap_reply(value["text"], self.max_reply_bytes)  # redacted: no key stored, shown or cached
            return Completion(text, mode, prompt_tokens=pt, completion_tokens=ct, cached_tokens=cached,
                              network_calls=sent, finish_reason="length" if cut else value["finish_reason"],
                              retries=attempts - 1)  # fmt: skip

    def _final(self, e: Exception, call: dict, attempts: int) -> Exception:
        """The SDK's error, or ours for what the guard saw."""
        last, cause = call.get("last"), e.__cause__
        if isinstance(e, _Stop):
            return EndpointDown(str(e))
        if isinstance(e, TimeoutError):  # the call's deadline, during an attempt or a backoff: the last attempt's fault
            if isinstance(last, httpx2.Response) and last.status_code >= 400:
                return self._aio._make_status_error_from_response(last)
            if isinstance(last, httpx2.TransportError) and not isinstance(last, (_Garbled, httpx2.TimeoutException)):
                return openai.APIConnectionError(
                    message=f"Connection error: {last}", request=httpx2.Request("POST", self.where)
                )
            e, cause = openai.APITimeoutError(request=httpx2.Request("POST", self.where)), last
        if isinstance(cause, _Garbled):
            note = (f" ({attempts} attempts; a proxy or server that is not an OpenAI-compatible /v1 endpoint answers "
                    "like this: check BASE_URL / OPENAI_BASE_URL)") if attempts > 1 else ""  # fmt: skip
            return GarbledResponse(str(cause) + note)
        if isinstance(e, openai.APITimeoutError):
            why = str(cause) if isinstance(cause, _Slow) else "the call's time was up"
            queue = (f"; with up to {self.max_concurrency} calls in flight, a server that answers one at a time "
                     "(llama.cpp, Ollama) queues them: fewer workers (--workers, WORKERS) or a longer "
                     "ACEMAD_CALL_TIMEOUT") if self.max_concurrency > 1 else " (ACEMAD_CALL_TIMEOUT)"  # fmt: skip
            return CallDeadlineExceeded(httpx2.Request("POST", self.where), f"Request timed out: {why}{queue}.")
        return e

    def _heartbeat(self) -> None:
        """A progress line every ACEMAD_PROGRESS_SECONDS (30) while calls are in flight (health.emit)."""
        interval = seconds("ACEMAD_PROGRESS_SECONDS", None, 30.0)
        while True:
            time.sleep(interval)
            now, flight = time.monotonic(), sorted(self._flight.values())
            if flight:
                paid = f", about ${self._cost:,.2f} paid" if self._cost and not self.free else ""
                models = ", ".join(self._models) or self.model
                emit(f"[calls] {models} at {self.where}: {self._answered} answered, {self._failed_n} failed, "
                     f"{len(flight)} in flight (oldest {now - flight[0]:.0f} s), {now - (self._t0 or now):.0f} s "
                     f"elapsed{paid}")  # fmt: skip

    # ------------------------------------------------------------------ counters and cost
    def add_usage(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                self._stats[k] += v

    def count_tokens(self, model: str, pt: int, ct: int, cached: int = 0, *, batch: bool = False) -> Optional[float]:
        """Add one billed call's tokens (batch: through the Batch API, at its price); its cost."""
        cost = self.call_cost(model, pt, ct, cached, batch=batch)
        self.add_usage(prompt_tokens=pt, completion_tokens=ct, cached_tokens=cached)
        with self._lock:
            self._cost = None if cost is None or self._cost is None else self._cost + cost
        return cost

    def failed(self, kind: Optional[str], exc: BaseException) -> None:
        """The breaker: a dropped connection, timeout or 401/403 counts per attempt, a 429 or 5xx per failed call."""
        if kind is None:
            return
        with self._lock:
            self._fails = (kind, self._fails[1] + 1 if kind == self._fails[0] else 1)
            if self._fails[1] < self.breaker or self.down is not None:
                return
            detail = " ".join(redact(f"{type(exc).__name__}: {exc}").split())[:200]
            fix = "the endpoint or the key" if kind == "key rejected" else "the endpoint"
            self.down = (f"stopped: {self._fails[1]} consecutive calls to {self.where} {_CAUSES[kind]} (last: "
                         f"{detail}); nothing failed was saved as an answer: fix {fix} and run the same command to "
                         "resume")  # fmt: skip

    def call_cost(self, model: str, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0.0, *,
                  batch: bool = False) -> Optional[float]:  # fmt: skip
        """USD of one call on this endpoint (0 when free; None for an unpriced model, loopback or not)."""
        if self.free:
            return 0.0
        p = price_of(model)
        return None if p is None else p.usd(prompt_tokens, completion_tokens, cached_tokens, batch)

    def reported(self, messages: Sequence[dict], prompt_tokens_billed: Optional[int]) -> None:
        """The endpoint's count of a prompt: later holds scale the token model by the most it counted per modelled
        token (its tokenizer may count more, e.g. another script)."""
        if prompt_tokens_billed:
            with self._lock:
                ratio = prompt_tokens_billed / max(1, prompt_tokens(messages))
                self._token_ratio = max(self._token_ratio or 1.0, ratio)

    def estimate_cost(self, model: str, messages: Sequence[dict], params: dict, batch: bool = False) -> Optional[float]:
        """The most a call can cost before it is sent: completion = its max_tokens; prompt = the modelled tokens times
        the most this endpoint reported per modelled one, or one token per byte before it has reported any."""
        ratio = self._token_ratio
        modelled = most_prompt_tokens(messages) if ratio is None else prompt_tokens(messages) * ratio
        return self.call_cost(model, modelled, params.get("max_tokens") or 1000, 0, batch=batch)

    def stats(self) -> dict:
        """Counters summed over this client's life, plus cost_usd (None if a model has no price)."""
        with self._lock:
            return dict(self._stats) | {"cost_usd": self._cost}

    def describe(self) -> dict:
        """JSON-able, secret-free: never the key or the URL. Once known: `model`, the models asked here (a role's own
        endpoint serves the role's model); `structured_output`, the modes the commitments answered so far were asked
        in, cached ones too (the mode first asked may be refused: llama.cpp's json_schema)."""
        found = {"model": ", ".join(self._models), "structured_output": ", ".join(self._replied)}
        return {"endpoint": self.kind, "max_concurrency": self.max_concurrency, "max_attempts": self.max_attempts,
                **{k: v for k, v in found.items() if v}}  # fmt: skip

    # ------------------------------------------------------------------ before a run: free requests, no paid call
    def _free(self, path: str, timeout: float, body: Optional[dict] = None, **kw: Any) -> Any:
        """A free request (GET, or POST with `body`) without retries, ended by `timeout`: its response or its error."""

        async def ask() -> httpx2.Response:
            async with asyncio.timeout(timeout):  # type: ignore[attr-defined]  # 3.11 (requires-python)
                options: Any = {"max_retries": 0, **kw}
                if body is not None:
                    return await self._aio.post(path, cast_to=httpx2.Response, body=body, options=options)
                return await self._aio.get(path, cast_to=httpx2.Response, options=options)

        try:
            return _run(ask())
        except Exception as e:  # the caller decides what each outcome means
            return e

    def _check_once(self) -> None:
        """The preflight a rerun deferred to its first uncached call: its finding stops this and every later call
        (the breaker's path: the run saves what it has and says why)."""
        with self._check_lock:
            if not self.check_first:
                return
            try:
                self.preflight()
            except (EndpointUnreachable, APIKeyRejected, ModelNotServed) as e:
                self.down = str(e)
            finally:
                self.check_first = False
        if self.down is not None:
            raise EndpointDown(self.down)

    def preflight(self, timeout: float = 10.0, *, check_model: bool = False, setting: str = "",
                  model: Optional[str] = None) -> None:  # fmt: skip
        """One free GET /models before any paid call (check_model: the model, this client's or `model`, a role's on
        the same endpoint, must be served); setting: what to fix."""
        model = model or self.model
        listing = self._listing if self._listing is not None else self._free("/models", timeout)
        if isinstance(listing, (TimeoutError, openai.APITimeoutError)):
            warnings.warn(f"the model endpoint {self.where} accepted the connection but did not answer GET /models "
                          f"within {timeout:g} s; continuing (it may be busy)", stacklevel=2)  # fmt: skip
            return
        if isinstance(listing, ResponseTooLarge):  # no OpenAI-compatible endpoint: one line, as an unreachable one
            raise EndpointUnreachable(f"{listing} (GET /models). No paid call was made.") from None
        if isinstance(listing, openai.APIConnectionError):
            cause = type(listing.__cause__ or listing).__name__
            setting = setting or "BASE_URL / OPENAI_BASE_URL"
            fix = (f"check the network connection, or set {setting} to an OpenAI-compatible server" if
                   self._base_url is None else f"start the server, or set {setting} to a running OpenAI-compatible "
                   "server such as http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp), or unset it for "
                   "api.openai.com")  # fmt: skip
            raise EndpointUnreachable(f"cannot reach the model endpoint {self.where} (GET /models: {cause}); {fix}. "
                                      "No paid call was made.") from None  # fmt: skip
        if isinstance(listing, openai.APIStatusError) and listing.status_code in (401, 403):
            raise APIKeyRejected(f"the endpoint {self.where} rejected the API key (HTTP {listing.status_code} on GET "
                                 "/models): check OPENAI_API_KEY (the key is read from the environment only and "
                                 "never printed). No paid call was made.") from None  # fmt: skip
        self._listing = listing  # reached, key accepted: what a role's model on this endpoint is checked against
        # llama.cpp lists its file's name and answers any model: a listing without the model sends a one-token probe,
        # and only its 404 (or a 400 naming the model) refuses
        try:
            served = [str(m["id"]) for m in json.loads(listing.content)["data"]] if check_model else []
        except Exception:
            return
        if not served or model in served:
            return
        ok = [{"role": "user", "content": "OK"}]
        one_token = {"model": model, "max_tokens": 1, "messages": ok}
        held = self.budget.reserve(self.estimate_cost(model, ok, one_token), model)  # a paid call too
        probe = self._free("/chat/completions", timeout, body=one_token)
        self.budget.settle(held, None)  # its usage is not read: held at its dearest
        if isinstance(probe, openai.APIStatusError) and (probe.status_code == 404 or (
                probe.status_code == 400 and b"model" in probe.response.content.lower())):  # fmt: skip
            shown = ", ".join(served[:8]) + (f" and {len(served) - 8} more" if len(served) > 8 else "")
            raise ModelNotServed(f"the endpoint {self.where} does not serve the model {model!r} (HTTP "
                                 f"{probe.status_code}; GET /models lists {shown}): set the model to one it serves. "
                                 "No paid call was made.")  # fmt: skip

    def check_batch_api(self, timeout: float = 10.0) -> None:
        """BatchUnsupported when a free GET /batches answers 404, 405 or 501 (never judged by the address)."""
        got = self._free("/batches", timeout, params={"limit": 1})
        if isinstance(got, openai.APIStatusError) and got.status_code in (404, 405, 501):
            raise BatchUnsupported(f"CALLS_VIA=batch: the endpoint {self.where} has no Batch API (GET /batches: HTTP "
                                   f"{got.status_code}): use CALLS_VIA=files to write the requests for its own batch "
                                   "runner (vLLM run-batch), or CALLS_VIA=sync. No paid call was made.")  # fmt: skip

    def close(self) -> None:
        for shard in self._shards:
            with contextlib.suppress(Exception):
                _run(shard.close())
        if "sdk" in self.__dict__:  # built (cached_property)
            self.sdk.close()
