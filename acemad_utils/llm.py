"""The one place that talks to an LLM: an OpenAI-compatible chat client with structured output,
retries, a concurrency bound, a response cache and token/cost accounting.

    from acemad_utils.llm import LLMClient, GenerateConfig
    client = LLMClient()                         # OPENAI_API_KEY, OPENAI_BASE_URL, ACEMAD_MODEL (default gpt-4o-mini)
    client = LLMClient(base_url="http://127.0.0.1:8080/v1", cache="outputs/cache/llm.sqlite")  # local: no key needed
    r = client.generate([{"role": "user", "content": "Say hi"}], GenerateConfig(temperature=0.1, seed=0),
                        schema=None, scope="q1|agent=0|round=1|repeat=0|role=debater|argue")
    r.text, r.prompt_tokens, r.cached
    client.stats()     # {"calls", "network_calls", "cache_hits", "prompt_tokens", "completion_tokens", "retries",
                       #  "failures", "cost_usd", ...}

Structured output (`schema=` a JSON schema) is asked for in the best way the endpoint supports:
OpenAI's `json_schema` (strict) -> llama.cpp's `{"type": "json_object", "schema": ...}` -> plain text (the
caller parses). The mode is detected once per client, on a 400/422 or any error naming response_format
(llama-cpp-python answers with a 500), and remembered; `structured=` fixes it instead.

Only one retry layer: the SDK's retries are off (max_retries=0) and tenacity retries rate limits (honouring
Retry-After), timeouts, connection errors, garbled bodies and 5xx with exponential backoff + jitter, a
bounded number of times. A BoundedSemaphore shared by all threads bounds the calls in flight (held only
during the HTTP call, not while backing off), so callers may use thread pools freely.

A 200 whose body is not a usable completion (garbage, truncated JSON, an HTML page from a proxy, no
choices) is a garbled body: retried like a 5xx (a proxy's error page during a restart is transient), never
returned as text. When the attempts run out, GarbledResponse says what the endpoint sent instead (its first
200 characters, redacted) and how many attempts were made, e.g. "the endpoint http://127.0.0.1:8080/v1
answered a chat completion with a 2xx reply whose body is not JSON: '<html>...' (6 attempts; ...)".

`preflight()` (called by agents.LLMPopulation unless preflight=False) does one free GET /models with a short
timeout, so an unreachable base URL or a rejected key stops the run with a clear message before any paid call.

Keys are read from arguments or the environment and never written anywhere (not to the cache, not to
describe(), not to error messages we build); `redact(text)` removes key-like strings from text that is about
to be stored (the runner redacts failed questions' error messages). An error raised by `generate` is
scrubbed before it leaves this module (`scrub`): a server that echoes the key in its error body (some
proxies answer a 401 with "Incorrect API key provided: <the key>", unmasked) cannot put it in the
exception's str, repr, args, body, response or request (whose Authorization header is dropped).
Token counters count tokens actually sent over the network; cache hits cost nothing. Prompt tokens the
endpoint served from its prompt cache (`usage.prompt_tokens_details.cached_tokens`) are counted as
`cached_tokens` and priced at the cached-input rate (prices.py). With a budget (MAX_USD, budget.py) every
cache miss reserves its estimated cost before it is sent and may be refused (BudgetExceeded). With a
batch queue (CALLS_VIA batch, batch.py) a cache miss is queued instead of sent (batch.Deferred).
"""
from __future__ import annotations

import email.utils
import json
import os
import re
import threading
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Optional, Sequence
from urllib.parse import urlparse

import openai
from openai.types.chat import ChatCompletion
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from . import budget as B
from .cache import ResponseCache
from .prices import PRICES, price_of  # noqa: F401 (PRICES re-exported: llm.PRICES predates prices.py)
from .tokenmodel import prompt_tokens as _model_prompt_tokens
from .tokenmodel import tokens as _model_tokens

DEFAULT_MODEL = "gpt-4o-mini"
MODES = ("json_schema", "json_object", "text")  # best first
LOCAL_DUMMY_KEY = "sk-no-key-required"
# PRICES (USD per 1M tokens, with sources) lives in prices.py, the package's one price table; extend it per
# client with LLMClient(prices={model: Price(...) or (input, output)}).


class MissingAPIKey(RuntimeError):
    pass


class EndpointUnreachable(RuntimeError):
    """The pre-flight GET /models could not connect (wrong base URL, server not running, no network)."""


class APIKeyRejected(RuntimeError):
    """The pre-flight GET /models was answered 401/403: the endpoint refuses this key."""


class GarbledResponse(RuntimeError):
    """A 2xx whose body is not a usable chat completion (retried like a 5xx)."""


_SECRETS: set[str] = set()  # keys this process has been given (in memory only), for redact()
_KEYLIKE = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-*.]{6,}")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9\-._~+/*]+=*")  # RFC 6750 token characters (and our ***)


def redact(text: str) -> str:
    """`text` without API keys: every key given to a client or in OPENAI_API_KEY, `sk-...`-like tokens and
    `Bearer ...` credentials become '***'. Use on anything derived from an error before storing it."""
    text = str(text)
    env = os.environ.get("OPENAI_API_KEY")
    for secret in sorted(_SECRETS | ({env} if env else set()), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _KEYLIKE.sub(lambda m: m.group(1) + "-***", text)
    return _BEARER.sub(lambda m: m.group(1) + "***", text)


def _redact_obj(obj: Any, depth: int = 0) -> Any:
    """A JSON-like value (an error body) with every string redacted."""
    if isinstance(obj, str):
        return redact(obj)
    if depth > 20:
        return obj
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: _redact_obj(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_redact_obj(v, depth + 1) for v in obj)
    return obj


def scrub(exc: BaseException) -> BaseException:
    """`exc` (changed in place, type kept) with no key left in what it shows or carries: args, message and
    body redacted, an SDK error's request replaced by a bare one (no Authorization header, no credentials in
    the URL) and its response by a copy with a redacted body; the same for its cause/context chain. Callers
    still see the same class and status_code (a RateLimitError stays one)."""
    seen: set[int] = set()
    e: Optional[BaseException] = exc
    while e is not None and id(e) not in seen and len(seen) < 10:
        seen.add(id(e))
        try:
            e.args = tuple(_redact_obj(a) for a in e.args)
            if isinstance(e, openai.APIError):
                e.message = redact(e.message)
                for field in ("body", "code", "param", "type"):  # the SDK copies these out of the error body
                    if hasattr(e, field):
                        setattr(e, field, _redact_obj(getattr(e, field)))
                req = getattr(e, "request", None)
                if req is not None:
                    e.request = type(req)(req.method, safe_url(str(req.url)))
                resp = getattr(e, "response", None)
                if resp is not None:
                    try:
                        text = resp.text
                    except Exception:  # a body that was never read: nothing to show
                        text = ""
                    e.response = type(resp)(resp.status_code, headers=[(k, redact(v)) for k, v in resp.headers.items()
                                                                       if k.lower() != "set-cookie"],
                                            content=redact(text).encode(), request=e.request)
        except Exception:  # an exotic exception type with read-only fields: its args were the best we could do
            pass
        e = e.__cause__ or e.__context__
    return exc


def _preview(text: Any, n: int = 200) -> str:
    """The first n characters of what an endpoint sent, quoted and redacted, for an error message."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    text = str(text)
    if not text.strip():
        return "an empty body" if not text else f"a body of {len(text)} blank characters"
    more = f"... ({len(text)} characters)" if len(text) > n else ""
    return redact(repr(text[:n])) + more


def safe_url(url: Optional[str]) -> str:
    """A base URL for messages: no user:password@, no query string."""
    if not url:
        return "https://api.openai.com/v1 (the default)"
    u = urlparse(url)
    host = u.hostname or ""
    if u.port:
        host += f":{u.port}"
    return f"{u.scheme}://{host}{u.path}" if u.scheme else url.split("?")[0]


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
    cached_tokens: int = 0  # of prompt_tokens, served from the endpoint's prompt cache (billed at the cached rate)
    network_calls: int = 0
    finish_reason: Optional[str] = None
    retries: int = 0  # failed attempts that were retried (429, 5xx, timeout, dropped connection, garbled body)

    def usage(self) -> dict:
        u = {"calls": 1, "network_calls": self.network_calls, "cache_hits": int(self.cached),
             "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}
        if self.cached_tokens:
            u["cached_tokens"] = self.cached_tokens
        if self.retries:
            u["retries"] = self.retries
        return u


def usage_tokens(u: Any) -> tuple[int, int, int]:
    """(prompt, completion, cached prompt) tokens of a completion's `usage` (an SDK object or a dict; 0 for
    what the endpoint did not report). cached = usage.prompt_tokens_details.cached_tokens (OpenAI's prompt cache)."""
    if u is None:
        return 0, 0, 0
    get = (lambda o, k: o.get(k) if isinstance(o, dict) else getattr(o, k, None))
    details = get(u, "prompt_tokens_details")
    cached = get(details, "cached_tokens") if details is not None else None
    return int(get(u, "prompt_tokens") or 0), int(get(u, "completion_tokens") or 0), int(cached or 0)


def endpoint_kind(base_url: Optional[str]) -> str:
    """'openai' for the default endpoint, 'local-llama.cpp' for a loopback server (what local_server starts),
    else 'openai-compatible'. Pass kind= to LLMClient to override."""
    host = urlparse(base_url).hostname if base_url else "api.openai.com"
    if host == "api.openai.com":
        return "openai"
    if host in ("127.0.0.1", "localhost", "::1"):
        return "local-llama.cpp"
    return "openai-compatible"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APIConnectionError, json.JSONDecodeError, openai.APIResponseValidationError,
                        GarbledResponse)):
        return True  # timeouts, refused/dropped connections, a garbled body from a proxy
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _format_rejected(exc: BaseException, mode: Optional[str]) -> bool:
    """Did the endpoint refuse our response_format? A 400/422, or any error naming response_format:
    llama-cpp-python answers an unknown format type with a 500 validation error."""
    if mode not in ("json_schema", "json_object") or not isinstance(exc, openai.APIStatusError):
        return False
    return exc.status_code in (400, 422) or "response_format" in str(exc)


def _retry_after(exc: Optional[BaseException]) -> Optional[float]:
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


class LLMClient:
    """Thread-safe chat client for one endpoint (one base URL); the model may be overridden per call.

    max_concurrency  calls in flight at once, shared by every thread using this client
    max_attempts     total attempts per call (1 = no retry)
    backoff          (base, max) seconds of the jittered exponential backoff; Retry-After is honoured up to
                     retry_after_max
    structured       "auto" (detect) or one of MODES
    cache            a ResponseCache, a path to one, or None
    prices           {model: prices.Price or (input, output)} added to prices.PRICES
    budget           a budget.Budget (MAX_USD); default: the process-wide one from ACEMAD_MAX_USD, if set
    """

    def __init__(self, model: Optional[str] = None, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 *, kind: Optional[str] = None, max_concurrency: int = 8, timeout: float = 120.0,
                 max_attempts: int = 6, backoff: tuple[float, float] = (1.0, 60.0), retry_after_max: float = 120.0,
                 structured: str = "auto", cache: ResponseCache | str | os.PathLike | None = None,
                 prices: Optional[dict] = None, budget: Optional[B.Budget] = None):
        self.model = model or os.environ.get("ACEMAD_MODEL") or DEFAULT_MODEL
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._base_url = base_url  # for error messages only (safe_url); never in describe() or the cache
        self.kind = kind or endpoint_kind(base_url)
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.kind == "openai":
                raise MissingAPIKey("no OpenAI API key: set OPENAI_API_KEY (or use a local endpoint via "
                                    "OPENAI_BASE_URL / the 'local' profile, which needs no key)")
            key = LOCAL_DUMMY_KEY  # local servers ignore the key but the SDK wants one
        else:
            _SECRETS.add(key)
        if structured != "auto" and structured not in MODES:
            raise ValueError(f"structured={structured!r}: choose 'auto' or one of {MODES}")
        self._auto = structured == "auto"
        self.mode = MODES[0] if self._auto else structured
        self._sdk = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)
        self._sem = threading.BoundedSemaphore(max_concurrency)
        self.max_concurrency = max_concurrency
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.retry_after_max = retry_after_max
        self.cache = ResponseCache(cache) if isinstance(cache, (str, os.PathLike)) else cache
        self.prices = dict(prices or {})  # extra prices over prices.PRICES (see price_of)
        self.budget = budget if budget is not None else B.current(self.cache)
        self.batch_queue = None  # batch.BatchQueue when calls go through the Batch API (LLMPopulation sets it)
        self._lock = threading.Lock()
        self._stats = dict.fromkeys(("calls", "network_calls", "cache_hits", "prompt_tokens", "completion_tokens",
                                     "cached_tokens", "retries", "failures"), 0)
        # model -> [prompt, completion, cached] billed tokens, synchronous calls and Batch API calls apart
        self._by_model: dict[tuple[str, bool], list[int]] = {}
        self._modes: dict[str, int] = {}  # completions served per structured mode (incl. cache hits)

    # ------------------------------------------------------------------ public
    def generate(self, messages: Sequence[dict], config: GenerateConfig = GenerateConfig(), *,
                 schema: Optional[dict] = None, scope: str = "", model: Optional[str] = None) -> Completion:
        """One chat completion. `schema` asks for JSON matching it; `scope` separates cache entries of
        otherwise identical calls (agent, round, repeat, call kind)."""
        model = model or self.model
        messages = [dict(m) for m in messages]
        params = config.params()
        self._add(calls=1)
        if self.cache is None:
            return self._paid_fetch(model, messages, params, schema)
        # The *requested* format is keyed, not the transport mode, so a warm rerun hits the cache before
        # the mode has been re-detected.
        key = ResponseCache.key(model=model, kind=self.kind, params=params, messages=messages,
                                fmt=None if schema is None else {"schema": schema}, scope=scope)
        with self.cache.single_flight(key):  # identical concurrent calls: one request, one stored reply
            hit = self.cache.get(key)
            if hit is not None:
                self._add(cache_hits=1)
                self._count_mode(hit.get("mode"))
                return Completion(text=hit["text"], mode=hit.get("mode"), cached=True,
                                  finish_reason=hit.get("finish_reason"))
            if self.batch_queue is not None:  # CALLS_VIA batch: queue it, the question waits (batch.Deferred)
                mode = self.mode if schema is not None else None
                self.batch_queue.defer(self, key, model, self.request_body(model, messages, params, mode, schema), mode)
            out = self._paid_fetch(model, messages, params, schema)
            self.cache.put(key, {"text": out.text, "mode": out.mode, "finish_reason": out.finish_reason,
                                 "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                                 "cached_tokens": out.cached_tokens}, model=model, kind=self.kind)
            return out

    def call_cost(self, model: str, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0.0,
                  batch: bool = False) -> Optional[float]:
        """USD of one call on this endpoint (0 on a local server; None for a remote model without a price)."""
        if self.kind == "local-llama.cpp":
            return 0.0
        p = price_of(model, self.prices)
        return None if p is None else p.usd(prompt_tokens, completion_tokens, cached_tokens, batch)

    def estimate_cost(self, model: str, messages: Sequence[dict], params: dict, batch: bool = False) -> Optional[float]:
        """The most a call can cost before it is sent: modelled prompt tokens, completion = its max_tokens
        (the most it can be billed; 1000 when unset)."""
        return self.call_cost(model, _model_prompt_tokens(messages), params.get("max_tokens") or 1000, 0, batch)

    def _paid_fetch(self, model: str, messages: list, params: dict, schema: Optional[dict]) -> Completion:
        """_fetch under MAX_USD: reserve the estimate (BudgetExceeded stops here, before anything is sent),
        then count the call's actual cost."""
        if self.budget is None:
            return self._fetch(model, messages, params, schema)
        held = self.budget.reserve(self.estimate_cost(model, messages, params), model)
        try:
            out = self._fetch(model, messages, params, schema)
        except BaseException:
            self.budget.release(held)
            raise
        if out.prompt_tokens or out.completion_tokens:
            actual = self.call_cost(model, out.prompt_tokens, out.completion_tokens, out.cached_tokens)
        else:  # no usage reported: the modelled tokens of what was sent and received
            actual = self.call_cost(model, _model_prompt_tokens(messages), _model_tokens(out.text))
        self.budget.settle(held, actual)
        return out

    def _fetch(self, model: str, messages: list, params: dict, schema: Optional[dict]) -> Completion:
        """The network part of `generate`: retries, structured-output fallback, token accounting."""
        counter = [0, 0]  # network calls, retries of this call
        try:
            while True:
                mode = self.mode if schema is not None else None
                try:
                    resp = self._with_retries(counter, model, messages, params, mode, schema)
                    break
                except openai.APIStatusError as e:
                    if not (self._auto and _format_rejected(e, mode)):
                        raise
                    self._downgrade(mode)  # endpoint rejected this response_format: try the next mode
        except Exception as e:
            self._add(failures=1)
            if isinstance(e, GarbledResponse) and counter[0] > 1:
                e.args = (f"{e.args[0]} ({counter[0]} attempts; a proxy or server that is not an OpenAI-compatible "
                          "/v1 endpoint answers like this: check BASE_URL / OPENAI_BASE_URL)",)
            # A server may echo the key in its error body: nothing leaves this module with it (see scrub).
            raise scrub(e)
        choice = resp.choices[0]
        pt, ct, cached = usage_tokens(resp.usage)
        self.count_tokens(model, pt, ct, cached)
        self._count_mode(mode)
        return Completion(text=choice.message.content or "", mode=mode, prompt_tokens=pt, completion_tokens=ct,
                          cached_tokens=cached, network_calls=counter[0], finish_reason=choice.finish_reason,
                          retries=counter[1])

    def count_tokens(self, model: str, pt: int, ct: int, cached: int = 0, batch: bool = False) -> None:
        """Add one billed call's tokens to the counters (batch: sent through the Batch API, priced at its rate)."""
        with self._lock:
            self._stats["prompt_tokens"] += pt
            self._stats["completion_tokens"] += ct
            self._stats["cached_tokens"] += cached
            tok = self._by_model.setdefault((model, batch), [0, 0, 0])
            tok[0] += pt
            tok[1] += ct
            tok[2] += cached

    def stats(self) -> dict:
        """Counters summed over this client's life, plus a cost estimate (None if a model has no price)."""
        with self._lock:
            out = dict(self._stats)
            by_model = {m: list(t) for m, t in self._by_model.items()}
            out["modes"] = dict(self._modes)
        cost: Optional[float] = 0.0  # local compute is free; an unpriced remote model makes the estimate None
        for (m, batch), (pt, ct, cached) in by_model.items():
            c = self.call_cost(m, pt, ct, cached, batch)
            if c is None:
                cost = None
                break
            cost += c
        out["cost_usd"] = cost
        tbm: dict = {}
        for (m, batch), t in by_model.items():
            e = tbm.setdefault(m, {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0})
            for k, v in zip(("prompt_tokens", "completion_tokens", "cached_tokens"), t):
                e[k] += v
            if batch:
                e["batch_prompt_tokens"] = e.get("batch_prompt_tokens", 0) + t[0]
        out["tokens_by_model"] = tbm
        return out

    def describe(self) -> dict:
        """JSON-able, secret-free: model, endpoint kind, structured-output mode. Never the key or the URL."""
        return {"model": self.model, "endpoint": self.kind, "structured_output": self.mode,
                "structured_output_detection": "auto" if self._auto else "fixed",
                "max_concurrency": self.max_concurrency, "max_attempts": self.max_attempts}

    def preflight(self, timeout: float = 10.0) -> None:
        """One free GET /models (never a completion): raise EndpointUnreachable when no connection can be made
        to the base URL, APIKeyRejected on 401/403. Any other answer (even 404 from a server without /models)
        proves the endpoint is there; a server that accepts the connection but is too busy to answer in time
        gets a warning, not an error."""
        where = safe_url(self._base_url)
        try:
            self._sdk.with_options(timeout=timeout, max_retries=0).models.with_raw_response.list()
        except openai.APIConnectionError as e:  # refused, DNS failure, connect timeout, or a slow answer
            cause = type(e.__cause__).__name__ if e.__cause__ is not None else ""
            if isinstance(e, openai.APITimeoutError) and cause in ("ReadTimeout", "WriteTimeout"):
                warnings.warn(f"the model endpoint {where} accepted the connection but did not answer GET /models "
                              f"within {timeout:g} s; continuing (it may be busy)", stacklevel=2)
                return
            fix = ("check the network connection, or set BASE_URL / OPENAI_BASE_URL to an OpenAI-compatible server"
                   if self._base_url is None else
                   "set BASE_URL / OPENAI_BASE_URL to a running OpenAI-compatible server such as "
                   "http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp), or unset it for api.openai.com")
            raise EndpointUnreachable(f"cannot reach the model endpoint {where} (GET /models: "
                                      f"{cause or type(e).__name__}); {fix}. No paid call was made.") from None
        except openai.APIStatusError as e:
            if e.status_code in (401, 403):
                raise APIKeyRejected(
                    f"the endpoint {where} rejected the API key (HTTP {e.status_code} on GET /models): check "
                    "OPENAI_API_KEY (the key is read from the environment only and never printed). "
                    "No paid call was made.") from None
        except Exception:  # an answer we cannot parse still proves the server is there
            pass

    def close(self) -> None:
        self._sdk.close()

    # ------------------------------------------------------------------ internals
    def _add(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                self._stats[k] += v

    def _count_mode(self, mode: Optional[str]) -> None:
        if mode is not None:
            with self._lock:
                self._modes[mode] = self._modes.get(mode, 0) + 1

    def _downgrade(self, failed: str) -> None:
        with self._lock:
            if self.mode == failed:  # several threads may fail at once; move down one step only
                self.mode = MODES[MODES.index(failed) + 1]

    def _wait(self, state) -> float:
        ra = _retry_after(state.outcome.exception() if state.outcome else None)
        if ra is not None:
            return min(ra, self.retry_after_max)
        return wait_random_exponential(multiplier=self.backoff[0], max=self.backoff[1])(state)

    def _with_retries(self, counter: list, model, messages, params, mode, schema):
        def retried(_state) -> None:
            self._add(retries=1)
            counter[1] += 1

        retrying = Retrying(stop=stop_after_attempt(self.max_attempts), wait=self._wait,
                            retry=retry_if_exception(lambda e: _retryable(e) and not _format_rejected(e, mode)),
                            reraise=True, before_sleep=retried)
        return retrying(self._call_once, counter, model, messages, params, mode, schema)

    @staticmethod
    def request_body(model: str, messages: list, params: dict, mode: Optional[str], schema: Optional[dict]) -> dict:
        """The /chat/completions body of a call (also the `body` of a Batch API request line)."""
        kw: dict[str, Any] = dict(model=model, messages=messages, **params)
        if mode == "json_schema":
            kw["response_format"] = {"type": "json_schema",
                                     "json_schema": {"name": "response", "schema": schema, "strict": True}}
        elif mode == "json_object":
            kw["response_format"] = {"type": "json_object", "schema": schema}  # llama.cpp turns it into a grammar
        return kw

    def _call_once(self, counter: list, model, messages, params, mode, schema):
        kw = self.request_body(model, messages, params, mode, schema)
        try:
            with self._sem:
                counter[0] += 1
                self._add(network_calls=1)
                # client.post is the SDK's documented call for a raw request: same auth, errors, timeouts and
                # parsing into ChatCompletion as chat.completions.create, minus its re-walk of the whole body
                # against the request TypedDicts (~0.6 ms of CPU per call with a JSON schema; bench/throughput.py).
                resp = self._sdk.post("/chat/completions", body=kw, cast_to=ChatCompletion)
        except json.JSONDecodeError as e:  # a JSON content type over a body that is not JSON (or is cut short)
            raise GarbledResponse(self._garbled("whose body is not JSON", _preview(e.doc))) from None
        # The SDK hands back whatever a 2xx body held (a str for an HTML page, a list, a completion without
        # choices): anything but a usable completion is a garbled body, retried, never returned.
        choices = getattr(resp, "choices", None)
        if isinstance(resp, (str, bytes)):
            raise GarbledResponse(self._garbled("whose body is not JSON", _preview(resp)))
        if not isinstance(resp, ChatCompletion) or not isinstance(choices, list):
            shown = (resp.model_dump_json(exclude_unset=True) if isinstance(resp, ChatCompletion)
                     else json.dumps(resp, default=str))
            raise GarbledResponse(self._garbled("whose JSON body is not a chat completion", _preview(shown)))
        if not choices:
            raise GarbledResponse(self._garbled("with no choices", _preview(resp.model_dump_json(exclude_unset=True))))
        if getattr(choices[0], "message", None) is None:
            raise GarbledResponse(self._garbled("whose first choice has no message",
                                                _preview(resp.model_dump_json(exclude_unset=True))))
        return resp

    def _garbled(self, what: str, shown: str) -> str:
        return f"the endpoint {safe_url(self._base_url)} answered a chat completion with a 2xx reply {what}: {shown}"
