"""A synthetic agent population (backend="sim"): the paper's mechanism as a generative model of agents' knowledge.

    from acemad_utils.agents.sim import SimPopulation, SimParams, make_items
    pop = SimPopulation(SimParams(knowledge_link=1.0), seed=0)
    items = make_items(200, k=4, seed=0)             # synthetic questions, benchmark "synthetic"

No LLM is involved; everything made with it is labelled synthetic. docs/population.md explains every parameter
and which result rests on which assumption. This per-agent SimAgent is the reference implementation.

The items: the Challenging Interval (paper l.130-145, Definition 1). Each item gets, from (seed, question id):
- a shared *trap* distractor d != truth (the common misconception, l.145);
- a shared trap propensity pi ~ Beta(trap_mean * c, (1 - trap_mean) * c), c = `trap_concentration`. Every
  agent of one model falls for the trap with the same pi, so errors are positively correlated across agents
  (P(err_j | err_i) > P(err_j) whenever pi varies between items; smaller c = more correlated errors).
  An agent whose AgentSpec names a model gets that model's own trap and pi (different LLMs hold different
  misconceptions); agents with model None share the population's default model (`SimPopulation(model=...)`).

The agents: Asymmetric Cognitive Potential (l.99-101, Theorem 2 at l.288-296) as a latent state. On each item
each agent draws ONE state at the start of the debate (STATES, state_probs):
- `guess`   with prob explore(temperature): a uniform random answer; knows neither the truth nor the trap.
- `insight` with prob P_insight(persona, thinking): sees through the trap, answers the truth AND knows the
  misconception: the truth-holder's second-order knowledge ("truth-holders can anticipate the specific errors the
  majority will commit", l.101). P_insight = `insight` for a Skeptic, `crowd_insight` for a Generalist or an
  Assistant; thinking="slow" raises it to 1 - (1 - P)(1 - slow_escape).
- `trapped` with prob pi: answers the trap (the hallucinating majority's "false consensus", l.101, l.296);
- `naive`   otherwise: answers the truth without knowing why the crowd errs ("merely holding correct beliefs",
  l.273).
A persona or a thinking style changes only how likely each state is; what an agent does follows from its state.
With the defaults each persona's ANSWER distribution is the one of the earlier persona model.

Peer prediction follows from the state (the assumption the paper's Theorem 2 makes: "Assume E possesses a correct
second-order model of the crowd's error", l.290), with one named link `knowledge_link` L in [0, 1]:
- skilled = (state == insight) with prob L, else an independent Bernoulli(r), r = the debate roster's mean
  P(state = insight): the expected number of skilled predictors is the same at every L, only WHO is skilled
  changes. L = 1 (default): only those who see through the trap model the crowd; L = 0: skill is unrelated to
  knowing the truth (and to persona).
- calibration cal = `insight_calibration` if skilled else `crowd_calibration` (0 = false consensus, "everyone
  thinks like me"); peer prediction q = (1 - cal) * p + cal * m, where m is the agent's model of its peers' mean
  belief (the expected initial belief of its peers in round 1, the mean of the peer stances it saw afterwards).
- Debate (Eq. 1): each round p <- (1 - alpha) p + alpha * mean(peer stances seen); alpha = `insight_susceptibility`
  for an agent in the insight state (a truth-holder who knows why the crowd errs is stubborn), else
  `crowd_susceptibility`.
- `calibration_by="persona"` keeps the earlier rule for comparison: every Skeptic gets insight_calibration and
  insight_susceptibility, everyone else the crowd's values, whatever its state (a Skeptic that fell for the trap
  still predicts the crowd well: the score then rewards the label, not the knowledge).
- What an agent commits/argues is a Dirichlet sample around its belief with concentration
  `commit_concentration / tau` (mean-preserving noise, so equal alphas keep the martingale of Prop. 1).
- The Assistant (every baseline's agent) is a crowd agent (crowd_insight, its temperature 0.7), so a homogeneous
  baseline roster has no truth-holder unless crowd_insight > 0. The moderator (Centralized MAD) believes the mean
  of the stances it reads.
- Near-copies (`crowd_copy`): with P crowd_copy * (1 - temperature) an agent takes the state (and a guess's answer)
  of the first agent of its roster with the same AgentSpec: the four Generalists of one prompt at temperature 0.1
  are then near-copies sharing one state on an item (their commitments still differ by the Dirichlet noise).
Random draws of an agent, in order, from its own seeded generator: 4 uniforms (state, guess answer, link, skill),
then one Dirichlet sample per turn; the copy decision from a generator of its own. Arguments are short template
sentences that state the stance.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from acemad_utils.data.sim_params import CALIBRATION_BY as CALIBRATION_BY  # re-exported
from acemad_utils.data.sim_params import STATES as STATES  # re-exported
from acemad_utils.data.sim_params import TRUTH_HOLDER_PERSONAS as TRUTH_HOLDER_PERSONAS  # re-exported
from acemad_utils.data.sim_params import SimParams as SimParams  # re-exported: defined below agents/ (data/)
from acemad_utils.protocol.config import GENERALIST
from acemad_utils.protocol.schema import SYNTHETIC_LABEL as SYNTHETIC_LABEL  # re-exported: it was defined here
from acemad_utils.protocol.schema import Agent, AgentSpec, Population, Question, Step, Turn, zero_usage


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
    truth = q.answer_index
    if truth is None:  # no gold answer: the simulation still needs a truth, drawn (hidden) from the question id
        truth = int(_rng("truth", seed, q.id).integers(len(q.options)))
    return _item_latent(q.id, len(q.options), truth, params, seed, model)


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


def state_probs(item: Item, spec: AgentSpec, params: SimParams) -> np.ndarray:
    """P(each of STATES) for an agent of this spec on this item: guess, insight, trapped, naive."""
    e = params.explore(spec.temperature)
    ins = (1.0 - e) * params.p_insight(spec)
    trapped = (1.0 - e - ins) * item.pi
    return np.array([e, ins, trapped, 1.0 - e - ins - trapped])


def _top_probs(item: Item, spec: AgentSpec, params: SimParams) -> np.ndarray:
    """P(initial answer = each option) for an agent of this spec on this item (summed over its states)."""
    g, ins, trapped, naive = state_probs(item, spec, params)
    probs = np.full(item.k, g / item.k)
    probs[item.trap] += trapped
    probs[item.truth] += ins + naive
    return probs


def draw_state(item: Item, spec: AgentSpec, params: SimParams, u: np.ndarray) -> tuple[int, int]:
    """(state index into STATES, initial answer) from the agent's first two uniforms u[0] (state: the inverse of
    the cumulative state_probs) and u[1] (a guess's uniform answer)."""
    cdf = np.cumsum(state_probs(item, spec, params))
    state = min(int(np.searchsorted(cdf / cdf[-1], u[0], side="right")), len(STATES) - 1)
    if state == 0:  # guess
        return state, min(int(u[1] * item.k), item.k - 1)
    return state, item.trap if state == 2 else item.truth


def insight_rate(items: Sequence[Item], specs: Sequence[AgentSpec], params: SimParams) -> float:
    """r: the debate roster's mean P(insight state), the rate of skilled predictors at every knowledge_link."""
    if not specs:
        return 0.0
    return float(np.mean([state_probs(it, s, params)[1] for it, s in zip(items, specs)]))


def is_skilled(state: int, spec: AgentSpec, params: SimParams, u: np.ndarray, rate: float) -> bool:
    """Whether the agent models the crowd (insight_calibration) or predicts false consensus (crowd_calibration).
    "knowledge": its insight state with prob knowledge_link (u[2]), else a Bernoulli(rate) draw (u[3]) unrelated
    to its state; "persona": the earlier rule, every Skeptic."""
    if params.calibration_by == "persona":
        return spec.persona in TRUTH_HOLDER_PERSONAS
    if u[2] < params.knowledge_link:
        return STATES[state] == "insight"
    return bool(u[3] < rate)


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


def message_text(kind: str, q: Question, top: int, pct: int) -> str:
    """The argument of an agent of `kind` (a persona, or "moderator") that argues for option `top` at pct %."""
    label = q.labels[top]
    return _TEMPLATES[kind].format(label=label, text=q.options[label], pct=pct)


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
        roster_insight_rate: Optional[float] = None,
    ):
        self.spec, self.q, self.index, self.item, self.params, self.role = spec, q, index, item, params, role
        self.rng = _rng("agent", seed, q.id, index, repeat, role)
        if peer_items is None:
            peer_items = [item] * len(peer_specs)
        if roster_insight_rate is None:
            roster_insight_rate = insight_rate(peer_items, peer_specs, params)
        u = self.rng.random(4)  # state, guess answer, link, skill: a fixed count, so later draws never shift
        lead = list(peer_specs).index(spec) if spec in peer_specs else index
        # a near-copy takes the state and guess uniforms of its spec's first agent (own generator for the decision:
        # the agent's own draws stay those of a population without copies)
        if lead < index and _rng("copy", seed, q.id, index, repeat, role).random() < params.copy(spec.temperature):
            u[:2] = _rng("agent", seed, q.id, lead, repeat, role).random(4)[:2]
        self.state, top = draw_state(item, spec, params, u)
        self.skilled = is_skilled(self.state, spec, params, u, roster_insight_rate)
        self.belief = _belief_on(top, len(q.options), params.confidence(spec.temperature))
        if peer_beliefs is None:  # expected_belief of every agent of the debate (the population computes it once)
            peer_beliefs = [expected_belief(it, s, params) for it, s in zip(peer_items, peer_specs)]
        others = [b for j, b in enumerate(peer_beliefs) if j != index] or [expected_belief(item, spec, params)]
        self.expected_peers = np.mean(others, axis=0)
        stubborn = (
            spec.persona in TRUTH_HOLDER_PERSONAS
            if params.calibration_by == "persona"
            else STATES[self.state] == "insight"
        )
        if role == "moderator":
            self.alpha = params.moderator_susceptibility
        else:
            self.alpha = params.insight_susceptibility if stubborn else params.crowd_susceptibility
        self.calibration = params.insight_calibration if self.skilled else params.crowd_calibration
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

    def __init__(self, params: Optional[SimParams] = None, seed: int = 0, model: Optional[str] = None):
        self.params = params or SimParams()
        self.seed = seed
        self.model = model

    def agents(self, specs: Sequence[AgentSpec], question: Question, repeat: int = 0) -> list[Agent]:
        items = [item_latent(question, self.params, self.seed, s.model or self.model) for s in specs]
        beliefs = [expected_belief(it, s, self.params) for it, s in zip(items, specs)]
        rate = insight_rate(items, specs, self.params)
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
                peer_items=items,
                roster_insight_rate=rate,
            )
            for i, s in enumerate(specs)
        ]

    def moderator(self, question: Question, repeat: int = 0) -> Agent:
        item = item_latent(question, self.params, self.seed, self.model)
        return SimAgent(
            question,
            GENERALIST,  # the moderator: a crowd agent of the paper's roster
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
