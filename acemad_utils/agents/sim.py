"""A synthetic agent population (backend="sim"): the paper's Challenging Interval as a generative model.

    from acemad_utils.agents.sim import SimPopulation, SimParams, make_items
    pop = SimPopulation(SimParams(crowd_calibration=0.0), seed=0)
    items = make_items(200, k=4, seed=0)             # synthetic questions, benchmark "synthetic"

No LLM is involved; everything made with it is labelled synthetic. Each item gets, from (seed, question id):
- a shared *trap* distractor d != truth (the common misconception);
- a shared trap propensity pi ~ Beta(trap_mean * c, (1 - trap_mean) * c). Every crowd agent on the item
  falls for the trap with the same pi, so errors are positively correlated across agents
  (P(err_j | err_i) > P(err_j) whenever pi varies between items: Definition "Challenging Interval").

Agents (persona -> role; temperature -> confidence and noise):
- Generalist = crowd. Initial answer: with prob explore(tau) a uniform random option, else the trap with
  prob pi, else the truth. Belief: confidence(tau) on that answer, the rest spread evenly.
- Assistant (the plain "You are a helpful assistant." of the naive agent, every baseline's agent) behaves
  exactly like the crowd: same trap, same susceptibility, same false-consensus peer prediction; only its
  temperature differs (0.7: more exploration, less confidence). So a homogeneous baseline roster has no
  truth-holder in the synthetic world, as with a real model that was given no critical persona.
- Skeptic = truth-holder. Sees through the trap with prob `insight` (answers the truth); otherwise draws
  like the crowd.
- thinking="slow" escapes the trap with extra prob `slow_escape` (any persona).
- An agent whose AgentSpec names a model gets that model's own trap and propensity (different LLMs hold
  different misconceptions); agents with model None share the population's default model
  (`SimPopulation(model=...)`; None = the subset model of the default profile).
- Debate (Eq. 1 of the paper): each round an agent's belief moves linearly toward the mean stance of the
  peers it can see, p <- (1 - alpha) p + alpha * mean(peer stances); alpha is `crowd_susceptibility`
  for Generalists and the smaller `skeptic_susceptibility` for Skeptics (truth-holders are stubborn).
- What an agent commits/argues is a Dirichlet sample around its belief with concentration
  `commit_concentration / tau` (mean-preserving noise, so equal alphas keep the martingale of Prop. 1).
- Peer prediction q = (1 - cal) * p + cal * m, where m is the agent's model of its peers' mean belief
  (the expected initial belief of its peers in round 1, the mean of the peer stances it saw afterwards).
  cal = `crowd_calibration` (default 0: false consensus, "everyone thinks like me") for Generalists and
  `skeptic_calibration` (default 0.9: models the crowd's error) for Skeptics.
- The moderator (Centralized MAD) believes the mean of the stances it reads.
Arguments are short template sentences that state the stance.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from acemad_utils.protocol.schema import SYNTHETIC_LABEL as SYNTHETIC_LABEL  # re-exported: it was defined here
from acemad_utils.protocol.schema import Agent, AgentSpec, Population, Question, Step, Turn, zero_usage


@dataclass(frozen=True)
class SimParams:
    trap_mean: float = 0.7  # mean per-item propensity of a crowd agent to fall for the shared trap
    trap_concentration: float = 4.0  # Beta concentration of that propensity; smaller = more correlated errors
    insight: float = 0.5  # P(a Skeptic sees through the trap on an item)
    slow_escape: float = 0.15  # extra P(escaping the trap) for thinking="slow"
    explore_base: float = 0.02  # P(uniform random answer) at temperature 0 ...
    explore_per_temp: float = 0.2  # ... plus this much per unit of temperature
    confidence_base: float = 0.9  # belief on the own answer at temperature 0 ...
    confidence_per_temp: float = 0.5  # ... minus this much per unit of temperature
    commit_concentration: float = 20.0  # Dirichlet concentration of expressed beliefs at temperature 1
    crowd_susceptibility: float = 0.3  # alpha of Eq. 1 for Generalists
    skeptic_susceptibility: float = 0.1  # alpha of Eq. 1 for Skeptics
    crowd_calibration: float = 0.0  # 0 = false consensus; 1 = crowd predicts its peers perfectly in expectation
    skeptic_calibration: float = 0.9  # how well truth-holders model the crowd
    moderator_susceptibility: float = 1.0  # the moderator adopts the mean stance it reads

    def __post_init__(self) -> None:
        for name in (
            "trap_mean",
            "insight",
            "slow_escape",
            "crowd_calibration",
            "skeptic_calibration",
            "crowd_susceptibility",
            "skeptic_susceptibility",
            "moderator_susceptibility",
        ):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"SimParams: {name}={v!r} must lie in [0, 1]")
        for name in ("trap_concentration", "commit_concentration"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SimParams: {name} must be > 0")

    # min/max, not np.clip: the same value, without numpy's per-call overhead on a scalar (called per agent)
    def confidence(self, tau: float) -> float:
        return float(min(max(self.confidence_base - self.confidence_per_temp * tau, 0.3), 0.99))

    def explore(self, tau: float) -> float:
        return float(min(max(self.explore_base + self.explore_per_temp * tau, 0.0), 1.0))

    def concentration(self, tau: float) -> float:
        return self.commit_concentration / max(tau, 0.05)


def _rng(*parts) -> np.random.Generator:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:16], "little"))


@dataclass(frozen=True)
class Item:
    """The latent Challenging-Interval structure of one question."""

    truth: int
    trap: int
    pi: float
    k: int


def item_latent(q: Question, params: SimParams, seed: int, model: Optional[str] = None) -> Item:
    """The item's trap and trap propensity. Agents of the same model share them (correlated errors);
    an agent whose AgentSpec names another model gets its own draw: different LLMs hold different
    misconceptions (Table 3, "different LLMs")."""
    return _item_latent(q.id, len(q.options), q.answer_index, params, seed, model)


# Every agent of every method on a question asks for the same few items (one per model): a pure function of
# its arguments, so kept instead of redrawn (a seeded generator costs more than the rest of an agent's turn).
@functools.lru_cache(maxsize=65536)
def _item_latent(qid: str, k: int, truth: int, params: SimParams, seed: int, model: Optional[str]) -> Item:
    rng = _rng("item", seed, qid) if model is None else _rng("item", seed, qid, "model", model)
    wrong = [i for i in range(k) if i != truth]
    trap = int(wrong[rng.integers(len(wrong))])
    a = params.trap_mean * params.trap_concentration
    b = (1 - params.trap_mean) * params.trap_concentration
    return Item(truth, trap, float(rng.beta(max(a, 1e-6), max(b, 1e-6))), k)


def _top_probs(item: Item, spec: AgentSpec, params: SimParams) -> np.ndarray:
    """P(initial answer = each option) for an agent of this spec on this item."""
    p_trap = item.pi
    if spec.persona == "Skeptic":
        p_trap *= 1.0 - params.insight
    if spec.thinking == "slow":
        p_trap *= 1.0 - params.slow_escape
    probs = np.zeros(item.k)
    probs[item.trap] = p_trap
    probs[item.truth] = 1.0 - p_trap
    e = params.explore(spec.temperature)
    return (1 - e) * probs + e / item.k


def _draw(rng: np.random.Generator, p: np.ndarray) -> int:
    """rng.choice(len(p), p=p), the same draw from the same one uniform, without choice()'s checks (p is ours:
    finite, non-negative, sums to 1): the inverse of the normalised cumulative distribution."""
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    return int(np.searchsorted(cdf, rng.random(), side="right"))


def _belief_on(top: int, k: int, conf: float) -> np.ndarray:
    b = np.full(k, (1.0 - conf) / (k - 1))
    b[top] = conf
    return b


def expected_belief(item: Item, spec: AgentSpec, params: SimParams) -> np.ndarray:
    """E[initial belief] of an agent of this spec: what a well-calibrated peer would predict in round 1."""
    conf = params.confidence(spec.temperature)
    probs = _top_probs(item, spec, params)
    return conf * probs + (1 - conf) / (item.k - 1) * (1 - probs)


_TEMPLATES = {
    "Generalist": "Most people would agree: the answer is {label} ({text}); I am {pct}% sure.",
    "Assistant": "I think the answer is {label} ({text}); I am {pct}% sure.",
    "Skeptic": "The popular answer may be a trap. Checking the reasoning, I argue for {label} ({text}); {pct}% sure.",
    "moderator": "Summary of the arguments: the group leans to {label} ({text}) with {pct}% support.",
}


class SimAgent(Agent):
    concurrent = False  # pure numpy, no I/O: threads would only add overhead

    def __init__(
        self,
        q: Question,
        spec: AgentSpec,
        index: int,
        item: Item,
        *,
        peer_specs: Sequence[AgentSpec],
        params: SimParams,
        seed: int,
        repeat: int,
        role: str = "debater",
        peer_items: Optional[Sequence[Item]] = None,
        peer_beliefs: Optional[Sequence[np.ndarray]] = None,
    ):
        self.spec, self.q, self.index, self.item, self.params, self.role = spec, q, index, item, params, role
        self.rng = _rng("agent", seed, q.id, index, repeat, role)
        k = len(q.options)
        top = _draw(self.rng, _top_probs(item, spec, params))
        self.belief = _belief_on(top, k, params.confidence(spec.temperature))
        if peer_beliefs is None:  # expected_belief of every agent of the debate (the population computes it once)
            peer_items = peer_items or [item] * len(peer_specs)
            peer_beliefs = [expected_belief(it, s, params) for it, s in zip(peer_items, peer_specs)]
        others = [b for j, b in enumerate(peer_beliefs) if j != index] or [expected_belief(item, spec, params)]
        self.expected_peers = np.mean(others, axis=0)
        if role == "moderator":
            self.alpha = params.moderator_susceptibility
        elif spec.persona == "Skeptic":
            self.alpha = params.skeptic_susceptibility
        else:
            self.alpha = params.crowd_susceptibility
        self.calibration = params.skeptic_calibration if spec.persona == "Skeptic" else params.crowd_calibration
        self._last_round = 0

    def act(self, turn: Turn) -> Step:
        # Eq. 1: move toward the stances of the peers seen in the previous round (once per round).
        prev = [
            m.stance
            for m in turn.history
            if m.round == turn.round - 1 and m.agent != self.index and m.stance is not None
        ]
        if self.role == "moderator":  # the moderator reads the arguments of the current round
            prev = [m.stance for m in turn.history if m.round == turn.round and m.agent != -1 and m.stance is not None]
        # np.mean(prev, axis=0), computed once per turn: the same sum and division without np.mean's wrappers
        seen = np.add.reduce(np.asarray(prev), axis=0) / len(prev) if prev else None
        if seen is not None and turn.round > self._last_round:
            self.belief = (1 - self.alpha) * self.belief + self.alpha * seen
        self._last_round = turn.round
        p = self.rng.dirichlet(np.maximum(self.belief * self.params.concentration(self.spec.temperature), 1e-3))
        p = np.maximum(p, 1e-9)
        p = p / p.sum()
        q = None
        if turn.want_peer_prediction:
            model = seen if seen is not None else self.expected_peers
            q = (1 - self.calibration) * p + self.calibration * model
        top = int(np.argmax(p))
        key = "moderator" if self.role == "moderator" else self.spec.persona
        text = _TEMPLATES[key].format(
            label=self.q.labels[top], text=self.q.options[self.q.labels[top]], pct=round(100 * p[top])
        )
        return Step(message=text, p=p, q=q, usage=zero_usage(), info={"stance": p})


class SimPopulation(Population):
    """Agent source for synthetic debates. `seed` fixes every draw; results do not depend on call order.

    `model` names the population's default synthetic model: agents without their own AgentSpec.model get that
    model's traps and propensities (None: the default profile's subset model). Notebook 07 uses named models
    with their own SimParams as labelled synthetic stand-ins for the paper's other LLMs."""

    synthetic = True
    name = "sim"
    pure = True  # every draw is seeded from (seed, question, agent, repeat): no order or process dependence

    def __init__(self, params: Optional[SimParams] = None, seed: int = 0, model: Optional[str] = None):
        self.params = params or SimParams()
        self.seed = seed
        self.model = model

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list[Agent]:
        items = [item_latent(question, self.params, self.seed, s.model or self.model) for s in specs]
        beliefs = [expected_belief(it, s, self.params) for it, s in zip(items, specs)]
        return [
            SimAgent(
                question,
                s,
                i,
                items[i],
                peer_specs=specs,
                params=self.params,
                seed=self.seed,
                repeat=repeat,
                peer_beliefs=beliefs,
            )
            for i, s in enumerate(specs)
        ]

    def moderator(self, question: Question, repeat: int = 0) -> Agent:
        item = item_latent(question, self.params, self.seed, self.model)
        return SimAgent(
            question,
            AgentSpec("Generalist", 0.1),
            -1,
            item,
            peer_specs=[],
            params=self.params,
            seed=self.seed,
            repeat=repeat,
            role="moderator",
        )

    def describe(self) -> dict:
        d = {
            "name": self.name,
            "synthetic": True,
            "backend": "sim",
            "model": "synthetic-population",
            "endpoint_kind": "none",
            "seed": self.seed,
            "params": asdict(self.params),
        }
        if self.model is not None:  # only then: a default population keeps its description (and run identity)
            d["model"] = f"synthetic-population:{self.model}"
        return d


def make_items(n: int, k: int = 4, seed: int = 0, benchmark: str = "synthetic") -> list[Question]:
    """n synthetic multiple-choice items with k options and a uniformly placed answer."""
    rng = _rng("items", seed, benchmark, k)
    labels = [chr(65 + i) for i in range(k)]
    out = []
    for i in range(n):
        ans = labels[int(rng.integers(k))]
        out.append(
            Question(
                id=f"{benchmark}/{seed}/{i:05d}",
                benchmark=benchmark,
                question=f"Synthetic item {i} (a misconception with one tempting distractor).",
                options={lab: f"option {lab}" for lab in labels},
                answer=ans,
                metadata={"synthetic": True},
            )
        )
    return out
