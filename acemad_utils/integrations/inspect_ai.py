"""AceMAD and the baseline MADs as inspect_ai solvers, for any multiple-choice Task (`pip install -e '.[inspect]'`).

    inspect eval my_task.py --solver acemad_utils/acemad --model openai/gpt-4o-mini    (any MC task; the
        package's entry point registers acemad_utils/{acemad,decentralized,sparse,centralized,majority})
    inspect eval my_task.py --solver acemad_utils/acemad --model-role skeptic=openai/gpt-4o   (Table 3's
        "Different LLMs": roles generalist, skeptic and moderator; each defaults to the eval's model)

    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import choice
    from acemad_utils.integrations.inspect_ai import acemad, decisions
    task = Task(dataset=[Sample(input="2+2?", choices=["3", "4"], target="B")], solver=acemad(),
                scorer=[choice(), decisions()])
    eval(task, model="openai-api/local/my-model", model_base_url="http://127.0.0.1:8000/v1")

Each sample is debated by the notebooks' own code: protocol/debate.py's `run_question` with the LLM agents of
agents/llm_agent.py (the paper's prompts, commitment parsing and repair), whose client here is inspect's model
API: `get_model(role=...)` per persona, so every provider, retry, limit, cache and log of inspect applies. Option i
is labelled A, B, ... The decided answer is marked in `state.choices` and written as "ANSWER: X" to
`state.output`, so `choice()` scores it; the full transcript record is in the sample's store under "acemad", a
compact view (per round each agent's p, q, score and weight; AceMAD's decision beside the re-decisions of the
same debate) in `state.metadata["acemad"]`, and each call in its own transcript span ("round 2 · agent 3 ·
commit"). `decisions()` scores those re-decisions: the paired comparisons of one eval, at no extra call.

How the synchronous debate engine meets inspect's async model API: each sample's debate runs in a thread of its
own (anyio's worker threads with a limiter per sample: never inspect's or asyncio's default executor, so no number
of samples can starve the calls it waits for), the agents of a round act at once (agents/pool.py, as in every LLM
run), and each call is awaited on the eval's event loop in the sample's context (its transcript, limits, roles).
Needs inspect's asyncio backend (the default).

A sample that cannot be debated (no choices, options the question check refuses) is scored as failed with its
reason, and the others go on. A sample whose commitments mostly do not parse (more than PARSE_FAILURE_LIMIT after
the repair call) is an error with one line: inspect's `fail_on_error` then fails the eval, as `make reproduce`
fails such a run (pass `fail_on_error=0.5` to fail it only when most samples are so).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
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
    get_model,
)
from inspect_ai.scorer import Score, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import span

from acemad_utils.agents.client import Completion, LLMClient
from acemad_utils.agents.llm_agent import LLMAgent
from acemad_utils.agents.pool import act_all
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


class InspectClient:
    """The one method of agents.client.LLMClient an LLMAgent calls (`generate`), answered by an inspect Model on
    the eval's event loop, in the sample's context. Structured output is asked for only with `structured=True`
    (not every provider has it); a commitment that does not parse is repaired once, as with LLMClient."""

    def __init__(self, model: Model, loop: asyncio.AbstractEventLoop, *, structured: bool = False,
                 cache: bool | CachePolicy = False):  # fmt: skip
        self.model, self.loop, self.structured, self.cache = model, loop, structured, cache
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
        """One call through inspect's model API (its own retries and timeouts apply); `deadline` (time.monotonic(),
        the agent's per-question bound, agents/client.py) bounds the wait for the answer."""
        chat = [_ROLES[m["role"]](content=m["content"]) for m in messages]
        params = config.params()
        cfg = GenerateConfig(**{k: params[k] for k in ("temperature", "seed", "max_tokens", "top_p") if k in params})
        if self.structured and schema is not None:
            from inspect_ai.model import ResponseSchema  # noqa: PLC0415  (only when asked for)
            from inspect_ai.util import JSONSchema  # noqa: PLC0415

            cfg = cfg.merge(
                GenerateConfig(
                    response_schema=ResponseSchema(name="commit", json_schema=JSONSchema.model_validate(schema))
                )
            )
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        # Submitted from a copy of the sample's context: the task the loop makes for the call inherits it.
        run = self.context.copy().run
        out = run(asyncio.run_coroutine_threadsafe, self._call(chat, cfg, scope), self.loop).result(wait)
        u = out.usage
        return Completion(
            text=out.completion,
            mode="json_schema" if self.structured and schema is not None else None,
            prompt_tokens=u.input_tokens if u else 0,
            completion_tokens=u.output_tokens if u else 0,
            network_calls=1,
            finish_reason=str(out.stop_reason),
        )


def role(spec: AgentSpec) -> Optional[str]:
    """The inspect model role of an agent: "generalist" or "skeptic" (AceMAD's personas), else None (the eval's
    model; the baselines' plain assistant)."""
    return spec.persona.lower() if spec.persona in ("Generalist", "Skeptic") else None


class InspectPopulation(Population):
    """LLM agents (agents/llm_agent.py) whose models are the eval's roles; the agents of a round act at once."""

    synthetic = False
    name = "inspect_ai"

    def __init__(self, clients: dict, *, seed: Optional[int], calls: str):
        self.clients, self.seed, self.calls = clients, seed, calls  # role (None: the eval's model) -> client

    def _agent(self, spec: AgentSpec, role: Optional[str]) -> LLMAgent:
        return LLMAgent(spec, cast(LLMClient, self.clients[role]), seed=self.seed, calls=self.calls)

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list:
        return [self._agent(s, role(s)) for s in specs]

    def moderator(self, question: Question, repeat: int = 0) -> LLMAgent:
        return self._agent(NAIVE_AGENT, "moderator")

    def act_all(self, agents, turns):
        return act_all(agents, turns)  # in threads: each waits on its call, awaited on the eval's loop

    def describe(self) -> dict:
        models = {str(r): str(c.model) for r, c in self.clients.items()}
        return {"name": self.name, "synthetic": False, "models": models, "seed": self.seed}


def sample_question(state: TaskState) -> Question:
    """The sample as a Question: its input text, its choices labelled A, B, ... and, when the target is one of
    those letters, the gold answer (else None: the record is not scored by the project, only by inspect)."""
    if not state.choices:
        raise ValueError(f"sample {state.sample_id!r}: the AceMAD solvers need a multiple-choice Sample (choices=)")
    options = [c.value for c in state.choices]
    labels = [chr(ord("A") + i) for i in range(len(options))]
    target = state.target.text.strip() if len(state.target.target) == 1 else ""
    qid = f"sample-{state.sample_id}-epoch-{state.epoch}"
    return dataclasses.replace(
        make_question(state.input_text, dict(zip(labels, options)), answer=target if target in labels else None),
        id=qid.replace(" ", "_"),
        benchmark="inspect",
    )


def paired(record: dict, cfg: DebateConfig) -> dict:
    """AceMAD's decision beside the re-decisions of the same debate (report/rescoring.py, no model call): uniform
    and self-belief weights, surprisingly popular on the final p and q, the round-1 plurality (what Majority Voting
    says with these agents), under `shuffled` the decisions of N_SHUFFLES permutations of the scores, and
    `premise_lift` (report/premise.py; None without a gold answer): over the rounds, whether the top-scoring agent
    is right minus the share of right agents."""
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
    labels = record["labels"]
    out: dict[str, Any] = {k: labels[int(v[0])] if v[0] >= 0 else None for k, v in answers.items()}
    shuffled = A.shuffled_decisions(arr, cfg.eta, cfg.weight_exponent, seed=cfg.seed)[:, 0]
    out["shuffled"] = [labels[int(a)] if a >= 0 else None for a in shuffled]
    rows = PR.question_rounds([record])  # the premise: the top scorer right, minus an agent picked at random
    out["premise_lift"] = None if rows.empty else float((rows["top_right"] - rows["share_right"]).mean())
    return out


def compact(record: dict, cfg: Optional[DebateConfig] = None) -> dict:
    """What the log viewer shows in the sample's metadata: the answer, per round each agent's p, q, score and
    weight, and AceMAD's paired decisions (the full record, with messages and usage, is in the store)."""
    rounds = [record["runs"]] if "runs" in record else record.get("rounds") or []
    keys = ("agent", "persona", "p", "q", "score", "weight", "parse_failure")
    out = {
        "method": record["method"],
        "labels": record["labels"],
        "answer": record["final"].get("answer"),
        "rounds": [[{k: e.get(k) for k in keys} for e in r] for r in rounds],
        "usage": record.get("usage", {}),
    }
    if cfg is not None and cfg.method == "acemad":
        out["decisions"] = paired(record, cfg)
    elif "decisions" in record:  # a baseline MAD's stored rules
        out["decisions"] = {k: d["answer"] for k, d in record["decisions"].items()}
    return out


def _finish(state: TaskState, record: dict, cfg: Optional[DebateConfig] = None) -> None:
    """Mark the decided option in state.choices and write 'ANSWER: X' to the output: what choice() reads."""
    state.store.set(STORE_KEY, record)
    state.metadata[STORE_KEY] = compact(record, cfg)
    answer = record["final"].get("answer")
    labels = record["labels"]
    for i in range(len(state.choices)):
        state.choices.mark_choice(i, labels[i] == answer)
    text = f"ANSWER: {answer}" if answer is not None else "no answer: no agent's commitment could be parsed"
    _output(state, text)


def _output(state: TaskState, text: str) -> None:
    state.output = ModelOutput.from_content(model=str(state.model), content=text)
    state.messages.append(ChatMessageAssistant(content=text))


def unparsed(record: dict) -> Optional[str]:
    """One line when more than PARSE_FAILURE_LIMIT of the record's commitments did not parse (else None)."""
    entries = [e for r in ([record["runs"]] if "runs" in record else record.get("rounds", [])) for e in r]
    entries += record.get("moderator", [])
    n, of = sum(bool(e.get("parse_failure")) for e in entries), len(entries)
    if not of or n <= PARSE_FAILURE_LIMIT * of:
        return None
    return (
        f"{record['question_id']}: {n} of {of} commitments ({100 * n / of:.0f}%) did not parse after the repair "
        f"call, more than the {PARSE_FAILURE_LIMIT:.0%} a result may have: its answer measures no beliefs. Check "
        "the model's replies (commit_raw in the sample's store) and the model"
    )


class UnparsedCommitments(RuntimeError):
    """A sample whose commitments mostly did not parse (its message is one line)."""


def debate_solver(method: str, *, rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two",
                  structured: bool = False, cache: bool | CachePolicy = False, **config: Any) -> Solver:  # fmt: skip
    """A solver running `method` (config.METHODS) with DebateConfig(method, n_agents=agents, rounds=rounds,
    seed=seed, **config); one debate per sample (per epoch). `cache`: inspect's cache (True or a CachePolicy),
    keyed also by each call's agent, round and kind."""
    cfg = DebateConfig(method=method, n_agents=agents, rounds=rounds, seed=seed, **config)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        try:
            q = sample_question(state)
        except ValueError as e:  # this sample cannot be debated: scored as failed, with its reason
            state.metadata[STORE_KEY] = {"error": str(e)}
            _output(state, f"not debated: {e}")
            return state
        loop = asyncio.get_running_loop()
        clients = {
            r: InspectClient(get_model(role=r), loop, structured=structured, cache=cache)
            for r in (None, "generalist", "skeptic", "moderator")
        }
        pop = InspectPopulation(clients, seed=seed, calls=calls)
        # A thread of its own per debate (a limiter per sample), not a shared pool its calls could need.
        record = await anyio.to_thread.run_sync(run_question, q, pop, cfg, limiter=anyio.CapacityLimiter(1))
        _finish(state, record, cfg)
        line = unparsed(record)
        if line:
            raise UnparsedCommitments(line)
        return state

    return solve


@scorer(metrics={"*": [accuracy(), stderr()]})
def decisions():
    """AceMAD's decision beside the re-decisions of the same debate (solver metadata, no model call), each scored
    against the target: acemad, uniform, self_belief, surprisingly_popular, majority_round1 (1 right, 0 wrong)
    and shuffled (the share of the score permutations whose decision is right), and premise_lift (not a decision:
    the top scorer's correctness minus a random agent's, see `paired`). Paired: the same samples."""

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata.get(STORE_KEY) or {}
        if "decisions" not in meta:
            return Score(value={}, explanation=meta.get("error", "no debate decisions (an AceMAD solver's)"))
        right, lift = set(target.target), meta["decisions"].get("premise_lift")
        value = {
            k: float(np.mean([a in right for a in v])) if isinstance(v, list) else float(v in right)
            for k, v in meta["decisions"].items()
            if k != "premise_lift"
        }
        if lift is not None:  # its mean over samples (the "accuracy" metric) is the run's premise lift
            value["premise_lift"] = lift
        return Score(value=value, answer=meta.get("answer"), metadata={"decisions": meta["decisions"]})

    return score


@solver
def acemad(rounds: int = 3, agents: int = 5, eta: float = 2.0, seed: int = 0, calls: str = "two",
           cache: bool = False) -> Solver:  # fmt: skip
    """AceMAD (Algorithm 1): N agents argue for T rounds, commit p and q; weights by peer-prediction scores."""
    return debate_solver("acemad", rounds=rounds, agents=agents, seed=seed, calls=calls, eta=eta, cache=cache)


@solver
def decentralized(rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two", cache: bool = False) -> Solver:
    """Decentralized MAD (full mesh, Du et al.), decided by the mean final belief."""
    return debate_solver("decentralized", rounds=rounds, agents=agents, seed=seed, calls=calls, cache=cache)


@solver
def sparse(rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two", cache: bool = False) -> Solver:
    """Sparse MAD (ring topology)."""
    return debate_solver("sparse", rounds=rounds, agents=agents, seed=seed, calls=calls, cache=cache)


@solver
def centralized(rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two", cache: bool = False) -> Solver:
    """Centralized MAD (a moderator summarises each round; the moderator role's model)."""
    return debate_solver("centralized", rounds=rounds, agents=agents, seed=seed, calls=calls, cache=cache)


@solver
def majority(agents: int = 5, seed: int = 0, calls: str = "two", cache: bool = False) -> Solver:
    """Majority Voting: N independent answers, plurality."""
    return debate_solver("majority", agents=agents, seed=seed, calls=calls, cache=cache)
