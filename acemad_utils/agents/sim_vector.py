"""The synthetic population of agents.sim, vectorized: the agents of a batch of debates as arrays.

    from acemad_utils.agents.sim_vector import VectorSimPopulation
    from acemad_utils.protocol.vectorized import run_batch
    pop = VectorSimPopulation(seed=0)                       # the same arguments as SimPopulation
    recs = run_batch(questions, pop, DebateConfig(method="acemad"), repeats=[0] * len(questions))

The model is agents.sim's, item for item and agent for agent (its docstring explains it): the same items
(sim.item_latent), the same initial answer distribution, Eq. 1 update, Dirichlet commitment and peer prediction,
computed for (D debates, N agents, K options) at once. Only the random streams differ: sim.SimAgent draws from
one seeded generator per agent, this module from counter-based draws (agents.streams) keyed by (seed, question id,
repeat, role) and counted by (agent, round, purpose), so a debate's draws do not depend on the batch it is in,
its order or the process. The two are the same distribution (tests/test_vectorized.py), not the same numbers.
SimPopulation stays the reference implementation; the runner uses this one for synthetic runs (`batched`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np

from acemad_utils.agents import streams
from acemad_utils.agents.sim import STATES, TRUTH_HOLDER_PERSONAS, SimPopulation, item_latent, message_text
from acemad_utils.protocol.schema import AgentSpec, Question

#: Purpose counters of a debate's draws (agents.streams): the initial answer, then one commitment per round.
_INIT, _COMMIT, _COPY = 0, 1, 2
_GUESS, _INSIGHT, _TRAPPED = STATES.index("guess"), STATES.index("insight"), STATES.index("trapped")
#: The moderator's spec (SimPopulation.moderator's).
MODERATOR = AgentSpec("Generalist", 0.1)


class SimBatch:
    """N agents (specs) on D debates (questions x repeats, all with K options), one role."""

    def __init__(
        self, pop: SimPopulation, specs: Sequence[AgentSpec], questions: Sequence[Question], repeats, role: str
    ):
        prm, n, k = pop.params, len(specs), len(questions[0].options)
        self.specs, self.questions, self.role = list(specs), list(questions), role
        self.keys = streams.debate_keys(pop.seed, [q.id for q in questions], repeats, role)[:, None]  # (D, 1)
        self.agent = np.arange(n)[None, :]
        truth, trap, states = self._state_probs(pop)  # (D, 1), (D, N), (D, N, 4): sim.state_probs of each agent
        # sim.SimAgent's 4 uniforms: state, a guess's answer, the link, the skill
        u = streams.uniforms(self.keys[..., None], self.agent[..., None], _INIT, np.arange(4))  # (D, N, 4)
        # near-copies (sim.SimAgent): the state and guess uniforms of the spec's first agent, with P copy(T)
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
        opt = np.arange(k)
        probs = states[..., :1] / k + np.where(opt == trap[..., None], states[..., 2:3], 0.0)
        probs = probs + np.where(opt == truth[..., None], states[..., 1:2] + states[..., 3:4], 0.0)  # sim._top_probs
        expected = conf * probs + (1.0 - conf) / (k - 1) * (1.0 - probs)  # sim.expected_belief of every agent
        if n > 1:
            others = ~np.eye(n, dtype=bool)
            self.expected_peers = (others[None, :, :, None] * expected[:, None, :, :]).sum(axis=2) / (n - 1)
        else:  # no peers: an agent alone predicts its own expected belief (as sim.SimAgent)
            self.expected_peers = expected
        # r of sim.insight_rate: the roster's mean P(insight); the moderator has no roster (SimPopulation.moderator)
        self._roles(prm, state, u, rate=float(states[0, :, 1].mean()) if role != "moderator" else 0.0)
        self.conc = np.array([prm.concentration(s.temperature) for s in specs])[None, :, None]

    def _state_probs(self, pop: SimPopulation):
        """Each debate's truth (D, 1), each agent's trap (D, N) (its model's item: sim.item_latent) and
        sim.state_probs of every agent (D, N, 4): guess, insight, trapped, naive."""
        prm = pop.params
        models = [s.model or pop.model for s in self.specs]
        items = {m: [item_latent(q, prm, pop.seed, m) for q in self.questions] for m in dict.fromkeys(models)}
        trap = np.array([[it.trap for it in items[m]] for m in models]).T
        pi = np.array([[it.pi for it in items[m]] for m in models]).T
        e = np.array([prm.explore(s.temperature) for s in self.specs])[None, :]
        ins = (1.0 - e) * np.array([prm.p_insight(s) for s in self.specs])[None, :]
        trapped = (1.0 - e - ins) * pi
        states = np.stack(np.broadcast_arrays(e, ins, trapped, 1.0 - e - ins - trapped), axis=-1)
        # the items' truth: the gold answer, or sim.item_latent's hidden draw for a question without one
        return np.array([it.truth for it in items[models[0]]])[:, None], trap, states

    def _roles(self, prm, state: np.ndarray, u: np.ndarray, rate: float) -> None:
        """Susceptibility alpha and calibration of every agent from its state (sim.is_skilled, sim.SimAgent)."""
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
        self.alpha = alpha[..., None]
        self.cal = np.where(skilled, prm.insight_calibration, prm.crowd_calibration)[..., None]

    def act(self, t: int, seen: np.ndarray, want_q: bool):
        """Round t: Eq. 1 toward the mean stance seen (where an agent saw one), then a Dirichlet commitment
        and, if asked, the peer prediction (sim.SimAgent.act)."""
        has = ~np.isnan(seen[..., :1])  # (D, N, 1)
        if has.any():
            self.belief = np.where(has, (1 - self.alpha) * self.belief + self.alpha * np.nan_to_num(seen), self.belief)
        alpha = np.maximum(self.belief * self.conc, 1e-3)
        p = np.maximum(streams.dirichlet(alpha, self.keys[..., None], self.agent[..., None], _COMMIT, t), 1e-9)
        p = p / p.sum(axis=-1, keepdims=True)
        q = None
        if want_q:
            q = (1 - self.cal) * p + self.cal * np.where(has, np.nan_to_num(seen), self.expected_peers)
        return p, q

    def messages(self, P: np.ndarray) -> list[list[str]]:
        """The argument texts of a round (sim.message_text), [D][N]."""
        top = P.argmax(axis=-1)
        pct = np.rint(100 * np.take_along_axis(P, top[..., None], axis=-1)[..., 0]).astype(int)
        kinds = ["moderator" if self.role == "moderator" else s.persona for s in self.specs]
        parts = [[_parts(kind, tuple(q.options.items())) for kind in kinds] for q in self.questions]
        return [
            [f"{pp[t][0]}{c}{pp[t][1]}" for pp, t, c in zip(parts_d, top_d, pct_d)]
            for parts_d, top_d, pct_d in zip(parts, top.tolist(), pct.tolist())
        ]


@functools.lru_cache(maxsize=1 << 14)
def _parts(kind: str, options: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Per option (label, text), the text of sim.message_text before and after its percentage (a round formats
    ~10^4 texts: two concatenations each instead of a template's format)."""
    q = Question(id="", benchmark="", question="", options=dict(options), answer=options[0][0])
    out = []
    for top in range(len(options)):
        before, after = message_text(kind, q, top, _PCT).split(_PCT)  # type: ignore[arg-type]  # a str stands in
        out.append((before, after))
    return tuple(out)


_PCT = "\x00pct\x00"


class VectorSimPopulation(SimPopulation):
    """SimPopulation whose debates the runner advances as arrays (protocol.vectorized): `batched`. Its agents()
    and moderator() are the reference SimPopulation's (per-agent path, for run_question)."""

    batched = True

    def batch_agents(self, specs: Sequence[AgentSpec], questions: Sequence[Question], repeats) -> SimBatch:
        return SimBatch(self, specs, questions, repeats, "debater")

    def batch_moderator(self, questions: Sequence[Question], repeats) -> SimBatch:
        return SimBatch(self, [MODERATOR], questions, repeats, "moderator")

    def describe(self) -> dict:
        # the draws are part of who answers: a run folder of the per-agent streams is not resumed with these
        return {**super().describe(), "draws": "counter-based (agents.streams)", "params": asdict(self.params)}
