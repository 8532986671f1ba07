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

from collections.abc import Sequence
from dataclasses import asdict

import numpy as np

from acemad_utils.agents import streams
from acemad_utils.agents.sim import SimPopulation, item_latent, message_text
from acemad_utils.protocol.schema import AgentSpec, Question

#: Purpose counters of a debate's draws (agents.streams): the initial answer, then one commitment per round.
_INIT, _COMMIT = 0, 1
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
        probs = self._top_probs(pop, k)  # (D, N, K)
        conf = np.array([prm.confidence(s.temperature) for s in specs])[None, :, None]
        u = streams.uniforms(self.keys, self.agent, _INIT)  # (D, N)
        cdf = np.cumsum(probs, axis=-1)
        top = np.minimum((cdf / cdf[..., -1:] <= u[..., None]).sum(axis=-1), k - 1)
        self.belief = np.where(np.arange(k) == top[..., None], conf, (1.0 - conf) / (k - 1))
        expected = conf * probs + (1.0 - conf) / (k - 1) * (1.0 - probs)  # sim.expected_belief of every agent
        others = ~np.eye(n, dtype=bool)
        if n > 1:
            self.expected_peers = (others[None, :, :, None] * expected[:, None, :, :]).sum(axis=2) / (n - 1)
        else:  # no peers: an agent alone predicts its own expected belief (as sim.SimAgent)
            self.expected_peers = expected
        if role == "moderator":
            alpha = [prm.moderator_susceptibility] * n
        else:
            alpha = [prm.skeptic_susceptibility if s.persona == "Skeptic" else prm.crowd_susceptibility for s in specs]
        cal = [prm.skeptic_calibration if s.persona == "Skeptic" else prm.crowd_calibration for s in specs]
        self.alpha = np.array(alpha)[None, :, None]
        self.cal = np.array(cal)[None, :, None]
        self.conc = np.array([prm.concentration(s.temperature) for s in specs])[None, :, None]

    def _top_probs(self, pop: SimPopulation, k: int) -> np.ndarray:
        """P(initial answer = each option) (D, N, K): sim._top_probs for every agent of every debate."""
        prm = pop.params
        models = [s.model or pop.model for s in self.specs]
        items = {m: [item_latent(q, prm, pop.seed, m) for q in self.questions] for m in dict.fromkeys(models)}
        trap = np.array([[it.trap for it in items[m]] for m in models]).T  # (D, N)
        pi = np.array([[it.pi for it in items[m]] for m in models]).T
        truth = np.array([q.answer_index for q in self.questions])[:, None]
        keep = np.array(
            [
                (1.0 - prm.insight if s.persona == "Skeptic" else 1.0)
                * (1.0 - prm.slow_escape if s.thinking == "slow" else 1.0)
                for s in self.specs
            ]
        )
        p_trap = (pi * keep[None, :])[..., None]
        opt = np.arange(k)
        probs = np.where(opt == trap[..., None], p_trap, 0.0) + np.where(opt == truth[..., None], 1.0 - p_trap, 0.0)
        e = np.array([prm.explore(s.temperature) for s in self.specs])[None, :, None]
        return (1 - e) * probs + e / k

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
        """The argument texts of a round (sim's templates), [D][N]."""
        top = P.argmax(axis=-1)
        pct = np.rint(100 * np.take_along_axis(P, top[..., None], axis=-1)[..., 0]).astype(int)
        kinds = ["moderator" if self.role == "moderator" else s.persona for s in self.specs]
        return [
            [message_text(kind, q, int(t), int(c)) for kind, t, c in zip(kinds, top_d, pct_d)]
            for q, top_d, pct_d in zip(self.questions, top.tolist(), pct.tolist())
        ]


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
