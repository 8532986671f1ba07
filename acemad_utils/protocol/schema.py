"""Plain shared types: a question, an agent's spec, what an agent sees and says (beliefs ordered like labels)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import numpy as np

Persona = Literal["Generalist", "Skeptic", "Assistant"]
Thinking = Literal["fast", "slow"]
Role = Literal["debater", "moderator", "solo"]

USAGE_KEYS = ("calls", "prompt_tokens", "completion_tokens", "cache_hits")  # every Step's usage counters
CALL_KEYS = ("network_calls", "cached_tokens", "retries")  # what an endpoint call adds (the last two when not 0)
# every record's usage, 0 if need be: cached_tokens only where there were some
RECORD_USAGE_KEYS = (*USAGE_KEYS, "network_calls", "retries", "repairs", "parse_failures", "q_parse_failures")


def zero_usage() -> dict:
    return dict.fromkeys(USAGE_KEYS, 0)


def add_usage(total: dict, usage: Mapping[str, int]) -> dict:
    for k, v in usage.items():
        total[k] = total.get(k, 0) + v
    return total


@dataclass(frozen=True)
class Question:
    """A multiple-choice item: ordered label -> text; `answer` a label, or None (debated; tables leave it out)."""

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

    @functools.cached_property  # asked per agent and record (frozen: it never changes)
    def labels(self) -> tuple[str, ...]:
        return tuple(self.options)

    @functools.cached_property
    def answer_index(self) -> Optional[int]:
        return None if self.answer is None else self.labels.index(self.answer)

    def correct(self, idx: int) -> Optional[bool]:
        return None if self.answer is None else idx == self.answer_index

    def options_str(self) -> str:
        return "\n".join(f"{k}. {v}" for k, v in self.options.items())

    def to_dict(self) -> dict:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        return dict(d, options=dict(self.options), metadata=dict(self.metadata))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Question:
        answer = None if d.get("answer") is None else str(d["answer"])
        qid, bench, text = (str(d[k]) for k in ("id", "benchmark", "question"))
        return cls(qid, bench, text, dict(d["options"]), answer, dict(d.get("metadata", {})))


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
    """What an agent sees: `history` as its topology shows it, oldest first; `scope` keys the response cache, so
    identical prompts of different agents are sampled independently."""

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
    """An agent's turn: its argument, p and q (None: not asked); an unparsed commitment is uniform, flagged."""

    message: str
    p: np.ndarray
    q: Optional[np.ndarray] = None
    parse_failure: bool = False
    usage: dict = field(default_factory=zero_usage)
    info: dict = field(default_factory=dict)


@dataclass
class Commits:
    """One round of D debates x N agents: P, Q (D, N, K) (Q None unless asked; a NaN row: none given), texts [D][N],
    ok and q_ok (D, N; None: all parsed), usage [D][N] (None: no call was made)."""

    P: np.ndarray
    Q: Optional[np.ndarray]
    texts: list
    ok: Optional[np.ndarray] = None
    q_ok: Optional[np.ndarray] = None
    usage: Optional[list] = None


class Agent:
    """The engine calls `act(turn)`: by default the paper's two phases, argue then commit."""

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
        return {"name": self.name, "synthetic": self.synthetic}


class TurnAgents:
    """An Agent-per-turn population, batched: a round is one Turn per agent, run by `population.act_all`."""

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
        grid = [steps[d : d + len(agent_ids)] for d in range(0, len(steps), len(agent_ids))]
        col = lambda f: [[f(s) for s in g] for g in grid]  # one field of every step, [D][N]
        nan = np.full(len(steps[0].p), np.nan)
        Q = np.array(col(lambda s: nan if s.q is None else s.q)) if want_q else None
        ok = np.array(col(lambda s: not s.parse_failure))
        q_ok = np.array(col(lambda s: not s.info.get("q_parse_failure")))
        return Commits(
            np.array(col(lambda s: s.p)), Q, col(lambda s: s.message), ok, q_ok, col(lambda s: dict(s.usage))
        )
