"""The modelled endpoint of the cost replay: deterministic replies and modelled token counts, no socket or key.
bench/_common.py's fake HTTP endpoint serves the same replies."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Optional

from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import Completion, GenerateConfig, endpoint_kind
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.tokenmodel import prompt_tokens, tokens

DEFAULT_ARG_CHARS = 600  # ~136 tokens, the README's reference length

FILLER = (
    "Most people pick the familiar answer, but the evidence points elsewhere: the premise hides a common "
    "misconception, and checking each option against what is actually known rules out the popular one. "
)


def argument_text(n_chars: int, seed: str) -> str:
    """A fixed-length argument, unique per request (so later prompts never collide by chance)."""
    head = f"I argue for option {'ABCD'[int(seed[:2], 16) % 4]} (ref {seed[2:14]}). "
    return (head + FILLER * (n_chars // len(FILLER) + 2))[:n_chars]


def _dist(labels, h: bytes, off: int) -> dict:
    w = [1 + h[(off + i) % len(h)] for i in range(len(labels))]
    return {lab: round(x / sum(w), 4) for lab, x in zip(labels, w)}


def debate_reply(body: dict, arg_chars: int, salt: str = "") -> tuple[str, int, int]:
    """(content, prompt_tokens, completion_tokens) for one chat request body: free text gets an `arg_chars`
    argument, a structured call JSON with self_prob / peer_prediction over the schema's labels."""
    msgs = body.get("messages") or []
    # the per-call seed is part of the sample, as for a real model: two agents with one prompt get different replies
    h = hashlib.sha256((json.dumps(msgs, sort_keys=True) + f"|seed={body.get('seed')}" + salt).encode()).digest()
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema")
    if not schema:
        content = argument_text(arg_chars, h.hex())
    else:
        props = schema.get("properties", {})
        labels = list((props.get("self_prob") or {}).get("properties", {})) or ["A", "B"]
        out: dict[str, object] = {}
        if "argument" in props:
            out["argument"] = argument_text(arg_chars, h.hex())
        out["self_prob"] = _dist(labels, h, 0)
        if "peer_prediction" in props:
            out["peer_prediction"] = _dist(labels, h, 7)
        content = json.dumps(out)
    return content, prompt_tokens(msgs), tokens(content)


class ModelClient:
    """The LLM client's generate() and cache keys in a replay, a dict as the response cache. `tally` counts the calls
    asked ("asked") and, per model, [calls sent, prompt, completion tokens]."""

    def __init__(self, model: str, kind: str, store: dict, arg_chars: int, tally: dict):
        self.model, self.kind, self.store, self.arg_chars, self.tally = model, kind, store, arg_chars, tally
        self._lock = threading.Lock()

    def generate(self, messages, config=None, *, schema=None, scope: str = "", model=None, deadline=None):
        model = model or self.model
        params = (config or GenerateConfig()).params()
        fmt = None if schema is None else {"schema": schema}
        key = ResponseCache.key(model=model, kind=self.kind, params=params, messages=[*messages], fmt=fmt, scope=scope)
        mode = "json_schema" if schema else None
        with self._lock:
            self.tally["asked"] = self.tally.get("asked", 0) + 1
            if (hit := self.store.get(key)) is not None:
                return Completion(text=hit, mode=mode, cached=True)
        body = {"messages": list(messages), "seed": params.get("seed")}
        if schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"schema": schema}}
        text, pt, ct = debate_reply(body, self.arg_chars)
        with self._lock:
            self.store[key] = text
            m = self.tally.setdefault(model, [0, 0, 0])
            m[0], m[1], m[2] = m[0] + 1, m[1] + pt, m[2] + ct
        return Completion(text=text, mode=mode, prompt_tokens=pt, completion_tokens=ct, network_calls=1)


def replay_population(
    model: str, store: dict, arg_chars: int = DEFAULT_ARG_CHARS, calls: str = "two", *, seed: int = 0,
    base_url: Optional[str] = None, tally: Optional[dict] = None, **kw,
):  # fmt: skip
    """An LLMPopulation whose clients are ModelClients (kind from the URL, as for the real client)."""
    counts: dict = {} if tally is None else tally

    class ReplayPopulation(LLMPopulation):
        def client(self, url):  # never an LLMClient: no SDK, no key, no socket
            key = url or self.base_url
            with self._lock:
                if key not in self._clients:
                    mc = ModelClient(str(self.model), endpoint_kind(key), store, arg_chars, counts)
                    self._clients[key] = mc  # type: ignore[assignment]
                return self._clients[key]

    return ReplayPopulation(model, base_url, seed=seed, calls=calls, preflight=False, calls_via="sync", **kw)
