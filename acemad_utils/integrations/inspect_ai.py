"""AceMAD and the baseline MADs as inspect_ai solvers for any multiple-choice Task (docs/own-questions.md, section 3):
`inspect eval my_task.py --solver acemad_utils/acemad --model M`. Each sample is debated by the notebooks' own engine
whose client is inspect's model API (`get_model(role=...)` per persona: inspect's providers, retries, cache and log);
the engine is synchronous, so each debate runs in a thread of its own, each call awaited on the eval's loop."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Sequence
from typing import Any, Optional, cast

import anyio
import numpy as np
from inspect_ai.model import (
    CachePolicy,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
    ResponseSchema,
    get_model,
)
from inspect_ai.scorer import Metric, SampleScore, Score, Target, accuracy, metric, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import JSONSchema, span

from acemad_utils.agents.client import MODES, CallsStopped, Completion, LLMClient, refuses_format
from acemad_utils.agents.llm_agent import LLMAgent, _choice
from acemad_utils.agents.pool import act_all
from acemad_utils.agents.redact import remember_secret, scrub
from acemad_utils.data.benchmarks import LETTERS
from acemad_utils.data.own import make_question
from acemad_utils.experiments.runner import PARSE_FAILURE_LIMIT
from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import NAIVE_AGENT, DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.protocol.schema import AgentSpec, Population, Question
from acemad_utils.report import premise as PR
from acemad_utils.report import rescoring as A

STORE_KEY = "acemad"  # the transcript record in the sample's store; the compact view in metadata
_ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
# (model, base URL) -> (the structured-output mode to ask, accepted yet), client.MODES best first, as the engine's own
# client detects it: a commitment asks for its JSON schema, as the command's does, not only in its prompt's words
_MODES: dict[tuple, tuple[str, bool]] = {}
#: One structured call per (model, base URL) asks until a mode is accepted; the others wait for its answer instead
#: of each being refused in the mode it is about to drop (2 samples at once: 18 refused requests, now at most 3).
#: A call waits at most PROBE_WAIT seconds (or to its deadline), then asks as it would have.
_PROBING: dict[tuple, threading.Lock] = {}
PROBE_WAIT = 60.0


def _with_format(cfg: GenerateConfig, schema: dict, mode: str) -> GenerateConfig:
    """`cfg` asking for `schema` in `mode`: inspect's response_schema (json_schema), or llama.cpp's json_object with
    a schema (its grammar) in the body of an OpenAI-compatible provider (json_object); text mode never asks here."""
    if mode == "json_schema":
        rs = ResponseSchema(name="response", json_schema=JSONSchema.model_validate(schema), strict=True)
        return cfg.merge(GenerateConfig(response_schema=rs))
    return cfg.merge(GenerateConfig(extra_body={"response_format": {"type": "json_object", "schema": schema}}))


class InspectClient:
    """LLMClient's `generate` answered by an inspect Model on the eval's loop in the sample's context: a commitment
    asks for its schema in the best structured-output mode the model accepts, as LLMClient does."""

    def __init__(self, model: Model, loop: asyncio.AbstractEventLoop, cache: bool | CachePolicy = False):
        self.model, self.loop, self.cache, self.stopped = model, loop, cache, False
        if isinstance(key := getattr(model.api, "api_key", None), str) and key:
            remember_secret(key)  # an endpoint may echo it in an error, which inspect writes to the eval log
        self.context = contextvars.copy_context()  # the sample's: its transcript, limits and model roles

    async def _call(self, chat: list, config: GenerateConfig, scope: str) -> ModelOutput:
        *_, kind = scope.split("|")
        tag = dict(p.split("=", 1) for p in scope.split("|") if "=" in p)  # Turn.scope: agent=, round=, ...
        cache = self.cache
        if cache:  # the same prompt from two agents, rounds or kinds is two calls, never one cached reply
            policy = cache if isinstance(cache, CachePolicy) else CachePolicy()
            cache = policy.model_copy(update={"scopes": {**policy.scopes, "acemad": scope.split("|", 1)[-1]}})
        async with span(f"round {tag.get('round')} · agent {tag.get('agent')} · {kind}", type="acemad"):
            return await self.model.generate(chat, config=config, cache=cache)

    def generate(self, messages, config, *, schema=None, scope: str = "", model=None, deadline=None) -> Completion:
        if self.stopped:
            raise CallsStopped("the sample was cancelled (a time limit or Ctrl-C): no new call is sent")
        chat = [_ROLES[m["role"]](content=m["content"]) for m in messages]
        params = config.params()
        cfg = GenerateConfig(**{k: params[k] for k in ("temperature", "seed", "max_tokens", "top_p") if k in params})
        where = (str(self.model), getattr(self.model.api, "base_url", None))
        mode, known = ("text", True) if schema is None else _MODES.get(where, (MODES[0], False))
        probing = _PROBING.setdefault(where, threading.Lock())
        wait = PROBE_WAIT if deadline is None else min(max(0.0, deadline - time.monotonic()), PROBE_WAIT)
        if held := not known and probing.acquire(timeout=wait):  # else it waited its time: it asks as it would have
            mode, known = _MODES.get(where, (MODES[0], False))  # what the probe before this one settled
            if known:
                probing.release()
                held = False
        try:
            out = self._ask(chat, cfg, schema, scope, where, mode, known, deadline)
        finally:
            if held:
                probing.release()
        u = out.usage
        pt, ct = (u.input_tokens, u.output_tokens) if u else (0, 0)
        return Completion(out.completion, None, prompt_tokens=pt, completion_tokens=ct, network_calls=1,
                          finish_reason=str(out.stop_reason))  # fmt: skip

    def _ask(self, chat, cfg, schema, scope: str, where: tuple, mode: str, known: bool, deadline) -> ModelOutput:
        while True:
            call = cfg if mode == "text" else _with_format(cfg, schema, mode)
            # a mode not yet accepted is asked without inspect's retries (only the openai SDK's own two): inspect
            # retries a 5xx until its timeout, and llama-cpp-python's server refuses json_schema with a 500
            call = call if known else call.merge(GenerateConfig(max_retries=0))
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            # Submitted from a copy of the sample's context: the task the loop makes for the call inherits it.
            run = self.context.copy().run
            try:
                out = run(asyncio.run_coroutine_threadsafe, self._call(chat, call, scope), self.loop).result(wait)
            except Exception as e:
                last = getattr(e, "last_attempt", None)  # tenacity's RetryError: inspect gave up; its last error
                err = last.exception() if last is not None and last.failed else e
                # A refusal naming the format steps down even in a mode accepted before, as LLMClient does: what is
                # kept per URL may be another server's (a restart, or another eval on the same port).
                if mode != "text" and refuses_format(err, accepted=known):
                    mode, known = MODES[MODES.index(mode) + 1], False  # the next mode, itself not yet accepted
                    _MODES[where] = (mode, False)
                elif known:
                    raise
                else:  # another failure: the same mode again, with inspect's retries
                    known = True
                continue
            if schema is not None:
                _MODES[where] = (mode, True)
            return out


class InspectPopulation(Population):
    """LLM agents whose models are the eval's roles (AceMAD's personas; else the eval's model)."""

    def __init__(self, clients: dict, *, seed: Optional[int], calls: str):
        self.clients, self.seed, self.calls = clients, seed, calls  # role (None: the eval's model) -> client

    def _agent(self, spec: AgentSpec, role: Optional[str]) -> LLMAgent:
        return LLMAgent(spec, cast(LLMClient, self.clients[role]), seed=self.seed, calls=self.calls)

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list:
        return [self._agent(s, s.persona.lower() if s.persona in ("Generalist", "Skeptic") else None) for s in specs]

    def moderator(self, question: Question, repeat: int = 0) -> LLMAgent:
        return self._agent(NAIVE_AGENT, "moderator")

    def act_all(self, agents, turns):
        return act_all(agents, turns)  # the agents of a round at once, each awaiting its call on the eval's loop


def sample_question(state: TaskState) -> Question:
    """The sample as a checked Question (choices labelled A, B, ...; the target as gold answer when it is a label),
    with the id the command gives the same question: a string sample id as it is, else (inspect numbers samples
    without one) the content id. The id and the repeat (epoch - 1) seed the debate, so the same questions and seed
    debate as they do through the command and the API."""
    if not state.choices:
        raise ValueError(f"sample {state.sample_id!r}: the AceMAD solvers need a multiple-choice Sample (choices=)")
    options = [c.value for c in state.choices]
    target = state.target.text.strip().upper() if len(state.target.target) == 1 else ""  # as choice() reads it
    answer = target if target in LETTERS[: len(options)] else None
    if isinstance(state.sample_id, str):  # an id the command would refuse ('a b', 'x:1') keeps the content id
        with contextlib.suppress(ValueError):
            return make_question(state.input_text, options, answer=answer, id=state.sample_id, benchmark="inspect")
    return make_question(state.input_text, options, answer=answer, benchmark="inspect")


def paired(record: dict, cfg: DebateConfig) -> dict:
    """AceMAD's decision beside re-decisions of the same debate (no model call), and `premise_lift`."""
    arr = A.stack([record], cfg.seed)
    rescore = lambda w: A.rescore(arr, cfg.eta, exponent=cfg.weight_exponent, rule=cfg.scoring_rule, weighting=w)
    answers = {
        "acemad": rescore(cfg.weighting),
        "uniform": rescore("uniform"),
        "self_belief": rescore("self_belief"),
        "surprisingly_popular": B.surprisingly_popular(
            B.votes(arr.P[:, -1], arr.valid[:, -1]), arr.Q[:, -1], arr.keys, arr.option_mask
        ),
        "majority_round1": A.initial_plurality(arr),
    }
    label = lambda a: record["labels"][int(a)] if a >= 0 else None  # -1: no answer
    out: dict[str, Any] = {k: label(v[0]) for k, v in answers.items()}
    out["shuffled"] = [label(a) for a in A.shuffled_decisions(arr, cfg.eta, cfg.weight_exponent, seed=cfg.seed)[:, 0]]
    rows = PR.question_rounds([record])  # the premise: the top scorer right, minus an agent picked at random
    out["premise_lift"] = None if rows.empty else float((rows["top_right"] - rows["share_right"]).mean())
    return out


def compact(record: dict, cfg: DebateConfig) -> dict:
    """The sample's metadata: the answer, each agent's p, q, score and weight per round, the paired decisions."""
    keys = ("agent", "persona", "p", "q", "score", "weight", "parse_failure")
    out = {"question_id": record["question_id"], "method": record["method"], "labels": record["labels"],
           "answer": record["final"].get("answer"),
           "rounds": [[{k: e.get(k) for k in keys} for e in r] for r in _rounds(record)],
           "usage": record.get("usage", {})}  # fmt: skip
    if cfg.method == "acemad":
        out["decisions"] = paired(record, cfg)
    elif "decisions" in record:  # a baseline MAD's stored rules
        out["decisions"] = {k: d["answer"] for k, d in record["decisions"].items()}
    return out


def _rounds(record: dict) -> list:
    return [record["runs"]] if "runs" in record else record.get("rounds") or []


class UnparsedCommitments(RuntimeError):
    """More than PARSE_FAILURE_LIMIT of a sample's commitments did not parse: inspect's fail_on_error decides."""


def _solver(method: str, doc: str):
    """A registered solver of `method` (the entry point's acemad_utils/<method>): one debate per sample and epoch;
    -S options reach DebateConfig; `cache`: inspect's cache, keyed also by agent, round and kind."""

    def make(rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two", cache: bool = False,
             **config: Any) -> Solver:  # fmt: skip
        cfg = DebateConfig(method=method, n_agents=agents, rounds=rounds, seed=seed, **config)
        _choice("calls", calls, ("two", "single"))  # here, before any sample, not once per sample
        if not isinstance(cache, (bool, CachePolicy)):
            raise ValueError(f"cache={cache!r} is not allowed; choose true, false or a CachePolicy")

        async def solve(state: TaskState, generate: Generate) -> TaskState:
            try:
                q = sample_question(state)
            except ValueError as e:  # this sample cannot be debated: scored as failed, with its reason
                state.metadata[STORE_KEY] = {"error": str(e)}
                return _output(state, f"not debated: {e}")
            loop = asyncio.get_running_loop()
            clients = {
                r: InspectClient(get_model(role=r), loop, cache) for r in (None, "generalist", "skeptic", "moderator")
            }
            pop = InspectPopulation(clients, seed=seed, calls=calls)
            # A thread of its own per debate (a limiter per sample), not a shared pool its calls could need.
            try:  # a time limit or Ctrl-C cancels the sample now; its debate then sends no new call
                record = await anyio.to_thread.run_sync(
                    run_question, q, pop, cfg, state.epoch - 1, limiter=anyio.CapacityLimiter(1), abandon_on_cancel=True
                )
            except BaseException as e:  # the sample's error, logged by inspect: without a key the endpoint echoed
                for c in clients.values():
                    c.stopped = True
                if isinstance(e, Exception):
                    scrub(e)  # in place, its type kept
                raise
            state.store.set(STORE_KEY, record)
            state.metadata[STORE_KEY] = compact(record, cfg)
            answer = record["final"].get("answer")
            for i, label in enumerate(record["labels"]):  # what choice() reads
                state.choices.mark_choice(i, label == answer)
            _output(
                state, "no answer: no agent's commitment could be parsed" if answer is None else f"ANSWER: {answer}"
            )
            entries = [e for r in _rounds(record) for e in r] + record.get("moderator", [])
            n, of = sum(bool(e.get("parse_failure")) for e in entries), len(entries)
            if of and n > PARSE_FAILURE_LIMIT * of:
                raise UnparsedCommitments(
                    f"{record['question_id']}: {n} of {of} commitments ({100 * n / of:.0f}%) did not parse after the "
                    f"repair call, more than the {PARSE_FAILURE_LIMIT:.0%} a result may have: its answer measures no "
                    "beliefs. Check the model's replies (commit_raw in the sample's store) and the model"
                )
            return state

        return solve

    make.__doc__ = doc
    return solver(name=method)(make)


def _output(state: TaskState, text: str) -> TaskState:
    state.output = ModelOutput.from_content(model=str(state.model), content=text)
    state.messages.append(ChatMessageAssistant(content=text))
    return state


DECISIONS = ("acemad", "uniform", "self_belief", "surprisingly_popular", "majority_round1", "shuffled")


@metric
def known_mean() -> Metric:
    """The mean over the samples where the value is known (NaN: a sample without a lift, e.g. no gold answer)."""

    def mean(scores: list[SampleScore]) -> float:
        known = [v for s in scores if not math.isnan(v := float(cast(float, s.score.value)))]
        return float(np.mean(known)) if known else math.nan

    return mean


@scorer(metrics={**{k: [accuracy(), stderr()] for k in DECISIONS}, "premise_lift": [known_mean()]})
def decisions():
    """Each of `paired`'s decisions scored against the target (shuffled: the share right), and premise_lift; every
    key in every score (inspect's metrics need them all): a sample not debated is 0, a lift unknown NaN."""

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata.get(STORE_KEY) or {}
        if set(meta.get("decisions") or ()) != {*DECISIONS, "premise_lift"}:  # not debated, or a baseline MAD's
            why = meta.get("error", "no AceMAD decisions (decisions() scores an AceMAD solver's)")
            return Score(value=dict.fromkeys(DECISIONS, 0.0) | {"premise_lift": math.nan}, explanation=why)
        right, lift = {t.upper() for t in target.target}, meta["decisions"].get("premise_lift")
        value = {
            k: float(np.mean([a in right for a in v])) if isinstance(v, list) else float(v in right)
            for k, v in meta["decisions"].items()
            if k != "premise_lift"
        }  # its mean over samples (known_mean) is the run's premise lift
        value["premise_lift"] = math.nan if lift is None else lift
        return Score(value=value, answer=meta.get("answer"), metadata={"decisions": meta["decisions"]})

    return score


acemad = _solver("acemad", "AceMAD (Algorithm 1): agents argue, commit p and q; weights from peer-prediction scores.")
decentralized = _solver("decentralized", "Decentralized MAD (full mesh, Du et al.), decided by the mean final belief.")
sparse = _solver("sparse", "Sparse MAD (ring topology).")
centralized = _solver("centralized", "Centralized MAD (a moderator, the moderator role's model, sums up each round).")
majority = _solver("majority", "Majority Voting: N independent answers, plurality.")
