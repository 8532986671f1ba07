"""The synthetic population (backend "sim", docs/population.md): the paper's mechanism as a generative model of
agents' knowledge, a round of D debates x N agents as arrays; no LLM, labelled synthetic. Each item has a shared trap
and propensity pi; each agent a latent state (STATES) from its persona and temperature, from which its answer,
stubbornness (Eq. 1's alpha) and peer-prediction skill follow. Draws are counter-based (agents.streams), keyed by
(seed, question id, repeat, role): a debate's numbers do not depend on its batch, its order or the process."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import asdict
from typing import Optional

import numpy as np

from acemad_utils.agents import streams
from acemad_utils.data.sim_params import CALIBRATION_BY as CALIBRATION_BY  # re-exported
from acemad_utils.data.sim_params import STATES, TRUTH_HOLDER_PERSONAS
from acemad_utils.data.sim_params import SimParams as SimParams  # re-exported: defined below agents/ (data/)
from acemad_utils.protocol.config import GENERALIST
from acemad_utils.protocol.schema import SYNTHETIC_LABEL as SYNTHETIC_LABEL  # re-exported
from acemad_utils.protocol.schema import AgentSpec, Commits, Population, Question

#: Purpose counters of a debate's draws (agents.streams): the initial answer, one commitment per round, the copy.
_INIT, _COMMIT, _COPY = 0, 1, 2
_GUESS, _INSIGHT, _TRAPPED = STATES.index("guess"), STATES.index("insight"), STATES.index("trapped")


def _rng(*parts) -> np.random.Generator:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:16], "little"))


def items(questions: Sequence[Question], params: SimParams, seed: int, model: Optional[str] = None):
    """Each item's truth, trap and propensity pi (arrays), shared by one model's agents (correlated errors); another
    model draws its own (Table 3). A question without a gold answer gets a hidden truth drawn from its id."""
    truths = tuple(-1 if q.answer is None else q.answer_index for q in questions)
    mean, conc = params.trap_mean, params.trap_concentration
    return _items(tuple(q.id for q in questions), len(questions[0].options), truths, mean, conc, seed, model)


@functools.lru_cache(maxsize=64)  # every method of a map point asks for the same items (read-only arrays)
def _items(qids: tuple, k: int, truths: tuple, mean: float, conc: float, seed: int, model: Optional[str]):
    out = np.array([_item(qid, k, truth, mean, conc, seed, model) for qid, truth in zip(qids, truths)]).T
    out.flags.writeable = False
    return out[0].astype(int), out[1].astype(int), out[2]


@functools.lru_cache(maxsize=65536)  # map points debate overlapping subsets of the same questions
def _item(qid: str, k: int, truth: int, mean: float, conc: float, seed: int, model: Optional[str]) -> tuple:
    if truth < 0:
        truth = int(_rng("truth", seed, qid).integers(k))
    rng = _rng("item", seed, qid) if model is None else _rng("item", seed, qid, "model", model)
    wrong = [i for i in range(k) if i != truth]
    trap = wrong[rng.integers(len(wrong))]  # drawn before pi: the order of a seeded stream's draws is its numbers
    return truth, trap, rng.beta(max(mean * conc, 1e-6), max((1 - mean) * conc, 1e-6))


class SimBatch:
    """N agents (specs) on D debates (questions x repeats, all with K options), one role."""

    def __init__(self, pop: SimPopulation, specs: Sequence[AgentSpec], questions: Sequence[Question], repeats, role):
        prm, n, k = pop.params, len(specs), len(questions[0].options)
        self.specs, self.questions, self.role, self.texts = list(specs), list(questions), role, pop.texts
        self.keys = streams.debate_keys(pop.seed, tuple(q.id for q in questions), tuple(repeats), role)[:, None]
        self.agent = np.arange(n)[None, :]
        truth, trap, states = self._state_probs(pop)  # (D, 1), (D, N), (D, N, 4)
        self.states = states
        # the initial uniforms of each agent: state, guess, link, skill
        u = streams.uniforms(self.keys[..., None], self.agent[..., None], _INIT, np.arange(4))
        # near-copies: the state and guess uniforms of the spec's first agent, with P copy(T) (a moderator never)
        lead = np.array([self.specs.index(s) for s in self.specs])
        p_copy = np.array([prm.copy(s.temperature) for s in self.specs]) * (lead < np.arange(n))
        if role != "moderator" and p_copy.any():
            copies = streams.uniforms(self.keys, self.agent, _COPY) < p_copy  # (D, N)
            u = np.where(copies[..., None] & (np.arange(4) < 2), u[:, lead, :], u)
        cdf = np.cumsum(states, axis=-1)
        state = np.minimum((cdf / cdf[..., -1:] <= u[..., :1]).sum(axis=-1), len(STATES) - 1)
        guess = np.minimum((u[..., 1] * k).astype(int), k - 1)
        top = np.where(state == _GUESS, guess, np.where(state == _TRAPPED, trap, truth))
        conf = np.array([prm.confidence(s.temperature) for s in specs])[None, :, None]
        self.belief = np.where(np.arange(k) == top[..., None], conf, (1.0 - conf) / (k - 1))
        opt = np.arange(k)  # P(initial answer = each option), summed over the states
        probs = states[..., :1] / k + np.where(opt == trap[..., None], states[..., 2:3], 0.0)
        probs = probs + np.where(opt == truth[..., None], states[..., 1:2] + states[..., 3:4], 0.0)
        expected = conf * probs + (1.0 - conf) / (k - 1) * (1.0 - probs)  # every agent's expected initial belief
        if n > 1:  # what a calibrated agent predicts of its peers in round 1
            others = ~np.eye(n, dtype=bool)
            self.expected_peers = (others[None, :, :, None] * expected[:, None, :, :]).sum(axis=2) / (n - 1)
        else:  # no peers: an agent alone predicts its own expected belief
            self.expected_peers = expected
        # r: the roster's mean P(insight), the rate of skilled predictors at every knowledge_link (moderator: none)
        self._roles(prm, state, u, rate=float(states[0, :, 1].mean()) if role != "moderator" else 0.0)
        self.conc = np.array([prm.concentration(s.temperature) for s in specs])[None, :, None]

    def _state_probs(self, pop: SimPopulation):
        """Each debate's truth (D, 1), each agent's trap (D, N) (its model's) and P(each of STATES) (D, N, 4)."""
        prm = pop.params
        models = [s.model or pop.model for s in self.specs]
        drawn = {m: items(self.questions, prm, pop.seed, m) for m in dict.fromkeys(models)}
        trap, pi = (np.stack([drawn[m][i] for m in models], axis=1) for i in (1, 2))
        e = np.array([prm.explore(s.temperature) for s in self.specs])[None, :]
        ins = (1.0 - e) * np.array([prm.p_insight(s) for s in self.specs])[None, :]
        trapped = (1.0 - e - ins) * pi
        states = np.stack(np.broadcast_arrays(e, ins, trapped, 1.0 - e - ins - trapped), axis=-1)
        return drawn[models[0]][0][:, None], trap, states

    def _roles(self, prm: SimParams, state: np.ndarray, u: np.ndarray, rate: float) -> None:
        """Susceptibility alpha and calibration from the state ("knowledge": skilled in insight with P knowledge_link,
        else Bernoulli(rate); "persona": every Skeptic)."""
        insight = state == _INSIGHT
        persona = np.array([s.persona in TRUTH_HOLDER_PERSONAS for s in self.specs])[None, :]
        if prm.calibration_by == "persona":
            skilled = stubborn = np.broadcast_to(persona, state.shape)
        else:
            skilled, stubborn = np.where(u[..., 2] < prm.knowledge_link, insight, u[..., 3] < rate), insight
        if self.role == "moderator":
            alpha = np.full(state.shape, prm.moderator_susceptibility)
        else:
            alpha = np.where(stubborn, prm.insight_susceptibility, prm.crowd_susceptibility)
        self.state, self.skilled, self.alpha = state, skilled, alpha[..., None]  # latent: tests read them
        self.cal = np.where(skilled, prm.insight_calibration, prm.crowd_calibration)[..., None]

    def act(self, t: int, seen: np.ndarray, view, want_q: bool) -> Commits:
        """Round t: Eq. 1 toward the mean stance seen (NaN: none), a Dirichlet commitment and, if asked,
        q = (1 - cal) p + cal m (m: the stances seen, else the peers' expected belief)."""
        has = ~np.isnan(seen[..., :1])  # (D, N, 1)
        if has.any():
            self.belief = np.where(has, (1 - self.alpha) * self.belief + self.alpha * np.nan_to_num(seen), self.belief)
        alpha = np.maximum(self.belief * self.conc, 1e-3)
        p = np.maximum(streams.dirichlet(alpha, self.keys[..., None], self.agent[..., None], _COMMIT, t), 1e-9)
        p = p / p.sum(axis=-1, keepdims=True)
        q = (1 - self.cal) * p + self.cal * np.where(has, np.nan_to_num(seen), self.expected_peers) if want_q else None
        return Commits(p, q, self.messages(p) if self.texts else [[""] * p.shape[1]] * p.shape[0])

    @functools.cached_property
    def _templates(self) -> tuple[list, list]:
        """Each agent's kind, and per debate and kind each option's text before and after the percentage (once per
        kind and question, not per agent and round)."""
        kinds = ["moderator" if self.role == "moderator" else s.persona for s in self.specs]
        unique = list(dict.fromkeys(kinds))
        parts = [[_parts(k, opts) for k in unique] for opts in (tuple(q.options.items()) for q in self.questions)]
        return [unique.index(k) for k in kinds], parts

    def messages(self, P: np.ndarray) -> list[list[str]]:
        """The argument texts of a round, [D][N]: a template sentence stating the stance."""
        top = P.argmax(axis=-1)
        pct = np.rint(100 * np.take_along_axis(P, top[..., None], axis=-1)[..., 0]).astype(int)
        kind, parts = self._templates
        return [
            [f"{pp[j][t][0]}{c}{pp[j][t][1]}" for j, t, c in zip(kind, top_d, pct_d)]
            for pp, top_d, pct_d in zip(parts, top.tolist(), pct.tolist())
        ]


_TEMPLATES = {
    "Generalist": "Most people would agree: the answer is {label} ({text}); I am {pct}% sure.",
    "Assistant": "I think the answer is {label} ({text}); I am {pct}% sure.",
    "Skeptic": "The popular answer may be a trap. Checking the reasoning, I argue for {label} ({text}); {pct}% sure.",
    "moderator": "Summary of the arguments: the group leans to {label} ({text}) with {pct}% support.",
}


@functools.lru_cache(maxsize=1 << 14)  # a round formats ~10^4 texts: two concatenations each, not a format
def _parts(kind: str, options: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Per option, the text of its argument before and after the percentage."""
    pct = "\x00pct\x00"
    return tuple(tuple(_TEMPLATES[kind].format(label=lab, text=txt, pct=pct).split(pct)) for lab, txt in options)  # type: ignore[misc]


class SimPopulation(Population):
    """The synthetic agents; `seed` fixes every draw; `model` is the default synthetic model whose traps agents
    without their own AgentSpec.model share (notebook 07's stand-ins for the paper's other LLMs)."""

    synthetic = True
    batched = True
    name = "sim"

    def __init__(self, params: Optional[SimParams] = None, seed: int = 0, model: Optional[str] = None, texts=True):
        # texts=False: every argument text is "" (a caller that reads only the numbers: notebook 09's map points)
        self.params, self.seed, self.model, self.texts = params or SimParams(), seed, model, texts

    def batch_agents(self, specs: Sequence[AgentSpec], questions: Sequence[Question], repeats, role="debater"):
        if role == "moderator":  # Centralized MAD's moderator: a crowd agent of the paper's roster
            return SimBatch(self, [GENERALIST], questions, repeats, "moderator")
        return SimBatch(self, specs, questions, repeats, "debater")  # a solo run draws as a debater of one

    def describe(self) -> dict:
        model = "synthetic-population" if self.model is None else f"synthetic-population:{self.model}"
        return {"name": self.name, "synthetic": True, "backend": "sim", "model": model, "endpoint_kind": "none",
                "seed": self.seed, "params": asdict(self.params),
                "draws": "counter-based (agents.streams)"}  # fmt: skip


def make_items(n: int, k: int = 4, seed: int = 0, benchmark: str = "synthetic") -> list[Question]:
    """n synthetic multiple-choice items with k options and a uniformly placed answer."""
    rng = _rng("items", seed, benchmark, k)
    labels = [chr(65 + i) for i in range(k)]
    answers = [labels[int(rng.integers(k))] for _ in range(n)]
    text = "Synthetic item {} (a misconception with one tempting distractor)."
    options = {lab: f"option {lab}" for lab in labels}
    return [
        Question(f"{benchmark}/{seed}/{i:05d}", benchmark, text.format(i), dict(options), a, {"synthetic": True})
        for i, a in enumerate(answers)
    ]
