"""AceMAD and the baseline MADs as inspect_ai solvers, for any multiple-choice Task (`pip install -e '.[inspect]'`).

    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import choice
    from acemad_utils.integrations.inspect_ai import acemad, decentralized
    task = Task(dataset=[Sample(input="2+2?", choices=["3", "4"], target="B")], solver=acemad(), scorer=choice())
    eval(task, model="openai-api/local/my-model", model_base_url="http://127.0.0.1:8000/v1")

    inspect eval my_task.py --model openai/gpt-4o-mini            (my_task.py's Task uses solver=acemad())

Each sample is debated by the notebooks' own code: protocol/debate.py's `run_question` with the LLM agents of
agents/llm_agent.py (the paper's prompts, commitment parsing and repair from protocol/), whose client here is
inspect's model API (`get_model()`: the eval's model, so every inspect provider works; inspect's retries,
limits and logging apply). Option i of the sample is labelled answer_character(i) (A, B, ...). The decided
answer is marked in `state.choices` and written as "ANSWER: X" to `state.output`, so inspect's `choice()` scorer
scores it. The full transcript record (rounds x agents: messages, p, q, scores, weights; usage) is stored in the
sample's store under "acemad" and a compact view in `state.metadata["acemad"]`, so inspect's log viewer shows
the debate; with a single-letter target the record's `final.correct` is the project's own scoring of it.

How the synchronous debate engine meets inspect's async model API: the debate runs in a worker thread
(`asyncio.to_thread`), and each agent call is sent to the eval's event loop (`run_coroutine_threadsafe`), so
the agents of one round still call the model concurrently. Needs inspect's asyncio backend (the default).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any, Optional, cast

from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
    get_model,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver

from acemad_utils.agents.client import LLMClient
from acemad_utils.agents.llm_agent import LLMAgent
from acemad_utils.agents.usage import Completion
from acemad_utils.data.own import make_question
from acemad_utils.protocol.config import NAIVE_AGENT, DebateConfig
from acemad_utils.protocol.debate import run_question
from acemad_utils.protocol.schema import AgentSpec, Population, Question

STORE_KEY = "acemad"  # the transcript record in the sample's store; the compact view in metadata
_ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}


class InspectClient:
    """The one method of agents.client.LLMClient an LLMAgent calls (`generate`), answered by an inspect Model on
    the eval's event loop. Structured output is asked for only with `structured=True` (not every provider has
    it); the commitment prompt asks for JSON and a reply that does not parse is repaired once, as with LLMClient."""

    def __init__(self, model: Model, loop: asyncio.AbstractEventLoop, *, structured: bool = False):
        self.model, self.loop, self.structured = model, loop, structured

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
        out = asyncio.run_coroutine_threadsafe(self.model.generate(chat, config=cfg), self.loop).result(wait)
        u = out.usage
        return Completion(
            text=out.completion,
            mode="json_schema" if self.structured and schema is not None else None,
            prompt_tokens=u.input_tokens if u else 0,
            completion_tokens=u.output_tokens if u else 0,
            network_calls=1,
            finish_reason=str(out.stop_reason),
        )


class InspectPopulation(Population):
    """LLM agents (agents/llm_agent.py) whose model is the eval's inspect Model."""

    synthetic = False
    name = "inspect_ai"

    def __init__(self, client: InspectClient, *, seed: Optional[int], calls: str):
        self.client, self.seed, self.calls = client, seed, calls

    def _agent(self, spec: AgentSpec) -> LLMAgent:
        return LLMAgent(spec, cast(LLMClient, self.client), seed=self.seed, calls=self.calls)

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list:
        return [self._agent(s) for s in specs]

    def moderator(self, question: Question, repeat: int = 0) -> LLMAgent:
        return self._agent(NAIVE_AGENT)

    def describe(self) -> dict:
        return {"name": self.name, "synthetic": False, "model": str(self.client.model), "seed": self.seed}


def sample_question(state: TaskState) -> Question:
    """The sample as a Question: its input text, its choices labelled A, B, ... and, when the target is one of
    those letters, the gold answer (else None: the record is not scored by the project, only by inspect)."""
    if not state.choices:
        raise ValueError(
            f"sample {state.sample_id!r}: the AceMAD solvers need a multiple-choice Sample (choices=[...])"
        )
    options = [c.value for c in state.choices]
    labels = [chr(ord("A") + i) for i in range(len(options))]
    target = state.target.text.strip() if len(state.target.target) == 1 else ""
    qid = f"sample-{state.sample_id}-epoch-{state.epoch}"
    return dataclasses.replace(
        make_question(state.input_text, dict(zip(labels, options)), answer=target if target in labels else None),
        id=qid.replace(" ", "_"),
        benchmark="inspect",
    )


def compact(record: dict) -> dict:
    """What the log viewer shows in the sample's metadata: the answer, and per round each agent's p, q, score
    and weight (the full record, with messages and usage, is in the store)."""
    rounds = [record["runs"]] if "runs" in record else record.get("rounds") or []
    keys = ("agent", "persona", "p", "q", "score", "weight", "parse_failure")
    return {
        "method": record["method"],
        "labels": record["labels"],
        "answer": record["final"].get("answer"),
        "rounds": [[{k: e.get(k) for k in keys} for e in r] for r in rounds],
        "usage": record.get("usage", {}),
    }


def _finish(state: TaskState, record: dict) -> None:
    """Mark the decided option in state.choices and write 'ANSWER: X' to the output: what choice() reads."""
    state.store.set(STORE_KEY, record)
    state.metadata[STORE_KEY] = compact(record)
    answer = record["final"].get("answer")
    labels = record["labels"]
    for i in range(len(state.choices)):
        state.choices.mark_choice(i, labels[i] == answer)
    text = f"ANSWER: {answer}" if answer is not None else "no answer: no agent's commitment could be parsed"
    state.output = ModelOutput.from_content(model=str(state.model), content=text)
    state.messages.append(ChatMessageAssistant(content=text))


def debate_solver(method: str, *, rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two",
                  structured: bool = False, **config: Any) -> Solver:  # fmt: skip
    """A solver running `method` (config.METHODS) with DebateConfig(method, n_agents=agents, rounds=rounds,
    seed=seed, **config); one debate per sample (per epoch)."""
    cfg = DebateConfig(method=method, n_agents=agents, rounds=rounds, seed=seed, **config)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        q = sample_question(state)
        client = InspectClient(get_model(), asyncio.get_running_loop(), structured=structured)
        pop = InspectPopulation(client, seed=seed, calls=calls)
        record = await asyncio.to_thread(run_question, q, pop, cfg)
        _finish(state, record)
        return state

    return solve


@solver
def acemad(rounds: int = 3, agents: int = 5, eta: float = 2.0, seed: int = 0, calls: str = "two") -> Solver:
    """AceMAD (Algorithm 1): N agents argue for T rounds, commit p and q; weights by peer-prediction scores."""
    return debate_solver("acemad", rounds=rounds, agents=agents, seed=seed, calls=calls, eta=eta)


@solver
def decentralized(rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two") -> Solver:
    """Decentralized MAD (full mesh, Du et al.), decided by the mean final belief."""
    return debate_solver("decentralized", rounds=rounds, agents=agents, seed=seed, calls=calls)


@solver
def sparse(rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two") -> Solver:
    """Sparse MAD (ring topology)."""
    return debate_solver("sparse", rounds=rounds, agents=agents, seed=seed, calls=calls)


@solver
def centralized(rounds: int = 3, agents: int = 5, seed: int = 0, calls: str = "two") -> Solver:
    """Centralized MAD (a moderator summarises each round)."""
    return debate_solver("centralized", rounds=rounds, agents=agents, seed=seed, calls=calls)


@solver
def majority(agents: int = 5, seed: int = 0, calls: str = "two") -> Solver:
    """Majority Voting: N independent answers, plurality."""
    return debate_solver("majority", agents=agents, seed=seed, calls=calls)
