"""LLM debaters: one LLMAgent per AgentSpec, built by LLMPopulation (one client per endpoint). Heterogeneity (Section
4.2) is configuration only: persona, temperature, thinking, model and base_url come from each AgentSpec."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Optional

import numpy as np

from acemad_utils.agents.batch import Batcher
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import QUESTION_TIME, GenerateConfig, LLMClient
from acemad_utils.agents.pool import act_all
from acemad_utils.agents.redact import restore_url, safe_url
from acemad_utils.data.paths import outputs
from acemad_utils.data.settings import env, seconds
from acemad_utils.protocol.commit import commit_schema, parse_commit
from acemad_utils.protocol.config import ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS, NAIVE_AGENT
from acemad_utils.protocol.prompts import PERSONAS, argue_prompt, commit_prompt, repair_prompt, single_prompt, wants_q
from acemad_utils.protocol.schema import Agent, AgentSpec, Population, Question, Step, Turn, add_usage


def _choice(name: str, value, allowed: tuple):
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; choose one of {allowed}")
    return value


class LLMAgent(Agent):
    """A debater, moderator or solo agent on an endpoint; calls "two" (argue, then commit: the paper) or "single"."""

    concurrent = True

    def __init__(self, spec: AgentSpec, client: LLMClient, *, seed: Optional[int] = 0,
                 max_tokens: tuple[Optional[int], Optional[int]] = (ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS),
                 calls: str = "two", deadline: Optional[float] = None):  # fmt: skip
        self.calls = _choice("calls", calls, ("two", "single"))
        self.spec, self.client, self.seed, self.max_tokens, self.deadline = spec, client, seed, max_tokens, deadline

    def _gen(self, user: str, kind: str, turn: Turn, max_tokens, *, schema=None, more: Sequence[dict] = ()):
        messages = [{"role": "system", "content": PERSONAS[self.spec.persona]}, {"role": "user", "content": user},
                    *more]  # fmt: skip
        scope = f"{turn.scope}|{kind}"
        return self.client.generate(messages, self.call_config(scope, max_tokens), schema=schema, scope=scope,
                                    model=self.spec.model, deadline=self.deadline)  # fmt: skip

    def call_config(self, scope: str, max_tokens: Optional[int]) -> GenerateConfig:
        """A per-call seed from the run seed and the scope: reproducible, yet agents with one prompt draw apart."""
        seed = None if self.seed is None else int.from_bytes(
            hashlib.sha256(f"{self.seed}|{scope}".encode()).digest()[:4], "little") >> 1  # fmt: skip
        return GenerateConfig(temperature=self.spec.temperature, seed=seed, max_tokens=max_tokens)

    def argue(self, turn: Turn) -> tuple[str, dict]:
        r = self._gen(argue_prompt(turn, self.spec.thinking), "argue", turn, self.max_tokens[0])
        return r.text.strip(), r.usage()

    def commit(self, turn: Turn, argument: str) -> Step:
        return self._committed(turn, commit_prompt(turn, argument), "commit", argument=False, message=argument)

    def act(self, turn: Turn) -> Step:
        if self.calls == "two":
            return super().act(turn)  # the paper: argue, then commit
        argue, commit = self.max_tokens
        return self._committed(turn, single_prompt(turn, self.spec.thinking), "act", argument=True,
                               max_tokens=None if argue is None or commit is None else argue + commit)  # fmt: skip

    def _committed(self, turn: Turn, user: str, kind: str, argument: bool, *, message: str = "",
                   max_tokens: Optional[int] = None) -> Step:  # fmt: skip
        """A commitment parsed, repaired once, else uniform and flagged (never an answer); argument: single-call."""
        labels, options, want_q = turn.question.labels, turn.question.options, wants_q(turn)
        schema = commit_schema(labels, want_q, argument)
        max_tokens = max_tokens or self.max_tokens[1]
        r = self._gen(user, kind, turn, max_tokens, schema=schema)
        usage = r.usage()
        p, q, rep = parse_commit(r.text, labels, want_q, options, argument=argument)
        first_argument = rep.get("argument", "")
        info: dict = {}
        if p is None or (want_q and q is None):  # one repair: the model sees its reply and is asked for the JSON only
            info["commit_raw"] = r.text[:200]
            fix = [{"role": "assistant", "content": r.text},
                   {"role": "user", "content": repair_prompt(labels, want_q, argument)}]  # fmt: skip
            r2 = self._gen(user, "repair" if kind == "commit" else f"{kind}-repair", turn, max_tokens, schema=schema,
                           more=fix)  # fmt: skip
            add_usage(usage, r2.usage())
            p2, q2, rep2 = parse_commit(r2.text, labels, want_q, options, argument=argument)
            info["repaired"] = p2 is not None and (q2 is not None or not want_q)
            if p2 is not None:
                p, rep, q = p2, rep2, q2 if q2 is not None else q
            elif p is None:
                info["repair_raw"] = r2.text[:200]
        if argument and not (message := rep["argument"] or first_argument):  # the repaired reply's, else the first's
            info["argument_missing"] = True
        k, failure = len(labels), p is None
        p = np.full(k, 1.0 / k) if p is None else p
        if want_q and q is None:
            q = np.full(k, 1.0 / k)  # the self belief stands; an unread forecast is "no information"
            info["q_parse_failure"] = True
            usage["q_parse_failures"] = 1
        # counted in the usage so they reach the transcript (per agent entry and per record) and the run summary
        if "repaired" in info:
            usage["repairs"] = 1
        if failure:
            usage["parse_failures"] = 1
        if rep.get("fixes"):
            info["parse_fixes"] = rep["fixes"]
        return Step(message=message, p=p, q=q if want_q else None, parse_failure=failure, usage=usage, info=info)


class LLMPopulation(Population):
    """LLMAgents from AgentSpecs, one LLMClient per endpoint; calls_via "sync", "batch" (the Batch API) or "files"
    (requests written to outputs/batch/) give the same transcripts; question_time bounds one question's calls."""

    synthetic = False
    name = "llm"

    def __init__(self, model: Optional[str] = None, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 *, cache=None, seed: Optional[int] = 0,
                 max_tokens: tuple[Optional[int], Optional[int]] = (ARGUE_MAX_TOKENS, COMMIT_MAX_TOKENS),
                 calls: str = "two", moderator_spec: AgentSpec = NAIVE_AGENT, preflight: bool = True,
                 calls_via: Optional[str] = None, batch_options: Optional[dict] = None,
                 question_time: Optional[float] = None, **client_kwargs):  # fmt: skip
        self.model, self.base_url, self._api_key = model, base_url, api_key
        self.question_time = seconds("ACEMAD_QUESTION_TIMEOUT", question_time, QUESTION_TIME)
        self.cache = ResponseCache(cache) if isinstance(cache, (str, os.PathLike)) else cache
        self.seed, self.max_tokens = seed, (max_tokens[0], max_tokens[1])
        self.calls = _choice("calls", calls, ("two", "single"))
        self.moderator_spec, self.client_kwargs, self.preflight = moderator_spec, client_kwargs, preflight
        self._clients: dict[Optional[str], LLMClient] = {}
        self._lock = threading.Lock()
        self.calls_via = _choice(
            "calls_via", calls_via or env("ACEMAD_CALLS_VIA") or "sync", ("sync", "batch", "files")
        )
        self.batcher: Optional[Batcher] = None  # runner.run_experiment flushes it between passes
        if self.calls_via != "sync":
            if self.cache is None:
                raise ValueError(f"calls_via={self.calls_via!r} needs a response cache: batch replies are read back "
                                 "from it")  # fmt: skip
            # files: the queue is written for another Batch-API runner (vLLM run-batch) and the run stops
            export = {"export_dir": str(outputs("batch"))} if self.calls_via == "files" else {}
            self.batcher = Batcher(self.cache, **(export | (batch_options or {})))
        self.client(None)  # fail early (a missing API key, an unreachable endpoint) before any question runs

    def client(self, base_url: Optional[str]) -> LLMClient:
        key = base_url or self.base_url
        with self._lock:
            if key not in self._clients:
                # restore_url: the credentials the reproduce driver kept out of the notebook (redact.hide_url)
                client = LLMClient(self.model, restore_url(key), self._api_key if key == self.base_url else None,
                                   cache=self.cache, **self.client_kwargs)  # fmt: skip
                rerun = self.batcher is None and self.cache is not None and self.cache.holds(client.model)
                if self.preflight and rerun:  # its cache may answer every call, and then none is sent
                    client.check_first = True
                elif self.preflight:
                    client.preflight()
                if self.batcher is not None:  # whatever the address: loopback may be a gateway with a Batch API
                    if self.calls_via == "batch" and self.preflight:
                        client.check_batch_api()  # BatchUnsupported: one line, before any question runs
                    client.batch_queue = self.batcher
                self._clients[key] = client
            return self._clients[key]

    def _agent(self, spec: AgentSpec, deadline: float) -> LLMAgent:
        return LLMAgent(spec, self.client(spec.base_url), seed=self.seed, max_tokens=self.max_tokens,
                        calls=self.calls, deadline=deadline)  # fmt: skip

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list[Agent]:
        deadline = time.monotonic() + self.question_time  # one question's calls, whichever agent makes them
        return [self._agent(s, deadline) for s in specs]

    def moderator(self, question: Question, repeat: int = 0) -> Agent:
        return self._agent(self.moderator_spec, time.monotonic() + self.question_time)

    def act_all(self, agents: Sequence[Agent], turns: Sequence[Turn]) -> list[Step]:
        return act_all(agents, turns)  # in threads: each agent waits on the endpoint (pool.py)

    def stop(self, stopped: bool = True) -> None:
        """A second Ctrl-C: no client sends a new call, so the questions in flight end at their next one, not after
        their last (the process's exit waits for them); False: calls again (a population reused by a later run)."""
        for c in list(self._clients.values()):
            c.stopped = stopped

    def usage(self) -> dict:
        """Counters summed over every endpoint (cost None if any is unknown)."""
        stats, total = [c.stats() for c in list(self._clients.values())], Counter[str]()
        for s in stats:
            total.update({k: v for k, v in s.items() if isinstance(v, int)})  # update keeps zero counts
        costs = [s["cost_usd"] for s in stats]
        return dict(total) | {"cost_usd": None if None in costs else sum(costs, 0.0)}

    def _endpoint_id(self, key: Optional[str]) -> str:
        """An endpoint's name in meta.json, the same in every session whatever order its first calls came in (a
        resume merges by it): "run", or a role's endpoint by a digest of its address without credentials."""
        if key == self.base_url:
            return "run"
        return "role endpoint " + hashlib.sha256(safe_url(restore_url(key)).encode()).hexdigest()[:8]

    def describe(self) -> dict:
        # what it was built with: a per-agent model is the method's (meta.json); models used would change the identity
        clients = list(self._clients.values())
        return {"name": self.name, "synthetic": False, "models": sorted({c.model for c in clients}),
                "endpoints": [{"id": self._endpoint_id(k)} | c.describe() for k, c in list(self._clients.items())],
                "seed": self.seed,
                "max_tokens": {"argue": self.max_tokens[0], "commit": self.max_tokens[1]}, "calls": self.calls,
                "moderator": self.moderator_spec.to_dict()}  # fmt: skip
