"""Plain shared types: a question, an agent's spec, what an agent sees and says; beliefs are numpy vectors ordered
like `Question.labels`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import numpy as np

Persona = Literal["Generalist", "Skeptic", "Assistant"]
Thinking = Literal["fast", "slow"]
Role = Literal["debater", "moderator", "solo"]

#: The usage counters every Step carries (an LLM agent adds more, e.g. network_calls, repairs, parse_failures).
USAGE_KEYS = ("calls", "prompt_tokens", "completion_tokens", "cache_hits")
#: What a call to an endpoint adds (usage.Completion.usage; cached_tokens and retries only when not 0).
CALL_KEYS = ("network_calls", "cached_tokens", "retries")
#: In every transcript record's usage, 0 if need be (experiments/runner.py): the above but cached_tokens (only where
#: there were some) and what an LLM agent's parsing adds.
RECORD_USAGE_KEYS = (*USAGE_KEYS, "network_calls", "retries", "repairs", "parse_failures", "q_parse_failures")


def zero_usage() -> dict:
    """Every key of USAGE_KEYS at 0, in that order (transcripts keep it)."""
    return dict.fromkeys(USAGE_KEYS, 0)


def add_usage(total: dict, usage: Mapping[str, int]) -> dict:
    for k, v in usage.items():
        total[k] = total.get(k, 0) + v
    return total


@dataclass(frozen=True)
class Question:
    """One multiple-choice item. `options` is ordered label -> text; `answer` is a label, or None for a question
    without a gold answer (it can be debated; its records have `correct` None and tables leave it out)."""

    id: str
    benchmark: str
    question: str
    options: Mapping[str, str]
    answer: Optional[str] = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if len(self.options) < 2:
            raise ValueError(f"question {self.id!r}: needs at least 2 options, got {len(self.options)}")
        if self.answer is not None and self.answer not in self.options:
            raise ValueError(
                f"question {self.id!r}: answer {self.answer!r} is not among the option labels {list(self.options)}"
            )

    @functools.cached_property  # asked per agent and record: once per question (frozen: it never changes)
    def labels(self) -> tuple[str, ...]:
        return tuple(self.options)

    @functools.cached_property
    def answer_index(self) -> Optional[int]:
        return None if self.answer is None else self.labels.index(self.answer)

    def correct(self, idx: int) -> Optional[bool]:
        """Is option `idx` (-1: no answer) the gold answer? None when the question has no gold answer."""
        return None if self.answer is None else idx == self.answer_index

    def options_str(self) -> str:
        return "\n".join(f"{k}. {v}" for k, v in self.options.items())

    def to_dict(self) -> dict:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        return dict(d, options=dict(self.options), metadata=dict(self.metadata))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Question:
        return cls(
            id=str(d["id"]),
            benchmark=str(d["benchmark"]),
            question=str(d["question"]),
            options=dict(d["options"]),
            answer=None if d.get("answer") is None else str(d["answer"]),
            metadata=dict(d.get("metadata", {})),
        )


@dataclass(frozen=True)
class AgentSpec:
    """Who an agent is (the paper's heterogeneity, Section 4.2); model/base_url None: the run's endpoint."""

    persona: Persona = "Generalist"
    temperature: float = 0.1
    thinking: Thinking = "fast"
    model: Optional[str] = None
    base_url: Optional[str] = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Message:
    agent: int  # -1 for the moderator
    round: int
    text: str


@dataclass(frozen=True)
class Turn:
    """What an agent sees when it acts: `history` is what its topology shows, oldest first. `scope` keys the
    response cache, so identical prompts of different agents are still sampled independently."""

    question: Question
    agent: int
    round: int  # 1-based
    history: tuple[Message, ...]
    role: Role = "debater"
    want_peer_prediction: bool = True
    repeat: int = 0

    @property
    def scope(self) -> str:
        return f"{self.question.id}|agent={self.agent}|round={self.round}|repeat={self.repeat}|role={self.role}"


@dataclass
class Step:
    """An agent's turn: its argument and commitment, p and q distributions over the labels (q None when not asked);
    an unparsed commitment is uniform with parse_failure=True and never counts as an answer."""

    message: str
    p: np.ndarray
    q: Optional[np.ndarray] = None
    parse_failure: bool = False
    usage: dict = field(default_factory=zero_usage)
    info: dict = field(default_factory=dict)


@dataclass
class Commits:
    """One round of D debates x N agents, as the engine (protocol.debate) stores it: beliefs P and peer predictions
    Q (D, N, K) (Q None unless asked; a NaN row where an agent gave none), the arguments [D][N], whether each
    belief and forecast parsed (D, N; None: all did) and each turn's usage [D][N] (None: no call was made)."""

    P: np.ndarray
    Q: Optional[np.ndarray]
    texts: list
    ok: Optional[np.ndarray] = None
    q_ok: Optional[np.ndarray] = None
    usage: Optional[list] = None


class Agent:
    """An agent: the engine calls `act(turn)`, by default the paper's two phases, argue then commit."""

    spec: AgentSpec = AgentSpec()
    #: True when `act` does I/O and the engine may run the agents of one round in threads.
    concurrent: bool = False

    def argue(self, turn: Turn) -> tuple[str, dict]:
        raise NotImplementedError

    def commit(self, turn: Turn, argument: str) -> Step:
        raise NotImplementedError

    def act(self, turn: Turn) -> Step:
        text, usage = self.argue(turn)
        step = self.commit(turn, text)
        step.message = text
        add_usage(step.usage, usage)
        return step


#: What every table, figure and view made from a synthetic population says it is.
SYNTHETIC_LABEL = "SYNTHETIC population (no LLM)"


class Population:
    """An agent source: the agents of one question (LLM agents, test doubles), or of a batch (agents.sim)."""

    synthetic: bool = False
    name: str = "population"
    #: True when batch_agents answers a round of D debates as arrays (agents.sim): the runner then batches.
    batched: bool = False

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list[Agent]:
        raise NotImplementedError

    def moderator(self, question: Question, repeat: int = 0) -> Agent:
        raise NotImplementedError

    def batch_agents(self, specs: Sequence[AgentSpec], questions: Sequence[Question], repeats, role: str):
        """The agents of a batch of debates: .act(t, seen, view, want_q) -> Commits; agents.sim answers as arrays."""
        return TurnAgents(self, specs, questions, repeats, role)

    def act_all(self, agents: Sequence[Agent], turns: Sequence[Turn]) -> list[Step]:
        """Every agent of one round acts on its turn, here one after another (agents/pool.py: at once)."""
        return [a.act(t) for a, t in zip(agents, turns)]

    def describe(self) -> dict:
        """For meta.json (model, endpoint kind, parameters; never a secret)."""
        return {"name": self.name, "synthetic": self.synthetic}


class TurnAgents:
    """The batched face of an Agent-per-turn population: each debate's agents are built by the population
    (`agents`, `moderator`) and a round is one Turn per agent, run together by `population.act_all` (threads for
    an LLM population: agents/pool.py)."""

    def __init__(self, population: Population, specs, questions, draws, role: str):
        self.population, self.questions, self.draws, self.role = population, questions, draws, role
        if role == "moderator":
            self.agents = [[population.moderator(q, r)] for q, r in zip(questions, draws)]
            self.specs = [self.agents[0][0].spec]
        else:
            self.agents = [population.agents(specs, q, r) for q, r in zip(questions, draws)]
            self.specs = list(specs)

    def act(self, t: int, seen, view: Callable[[int, int], tuple], want_q: bool) -> Commits:
        agent_ids = [-1] if self.role == "moderator" else range(len(self.specs))
        turns = [
            Turn(q, i, t, view(d, i), role=self.role, want_peer_prediction=want_q, repeat=r)  # type: ignore[arg-type]
            for d, (q, r) in enumerate(zip(self.questions, self.draws))
            for i in agent_ids
        ]
        steps = self.population.act_all([a for per in self.agents for a in per], turns)
        D, N = len(self.questions), len(agent_ids)
        grid = [steps[d * N : (d + 1) * N] for d in range(D)]
        nan = np.full(len(steps[0].p), np.nan)
        return Commits(
            P=np.array([[s.p for s in g] for g in grid]),
            Q=np.array([[nan if s.q is None else s.q for s in g] for g in grid]) if want_q else None,
            texts=[[s.message for s in g] for g in grid],
            ok=np.array([[not s.parse_failure for s in g] for g in grid]),
            q_ok=np.array([[not s.info.get("q_parse_failure") for s in g] for g in grid]),
            usage=[[dict(s.usage) for s in g] for g in grid],
        )
