"""DebateConfig: one config for every method. Rosters: AceMAD 80% Generalists at T=0.1 + 20% Skeptics at T=0.6
(l.597-600; heterogeneity is "the key difference", l.455); every baseline N x the naive assistant at T=0.7
("homogeneous", l.468; the paper's one other temperature, l.604); roster="acemad" gives a baseline AceMAD's
agents, "homogeneous" the reverse."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Optional, Union

from acemad_utils.protocol.schema import AgentSpec

# The paper's constants: eta (l.595), T (l.459), N (l.454), the crowd's share (l.597-600), the exponent of
# sum_i w_i^2 p_i (l.583), Table 2's T (l.337).
ETA = 2.0
MAX_ETA = 1000.0  # far past a hard max already (exp(1000 x a 0.01 score gap)), and eta x T never overflows
ROUNDS = 3
N_AGENTS = 5
CROWD_SHARE = 0.8
WEIGHT_EXPONENT = 2.0
TABLE2_ROUNDS = (2, 3, 5)
SCORING_RULES = ("brier", "log", "spherical")
WEIGHTINGS = ("peer_prediction", "self_belief", "uniform")

METHODS = ("single", "majority", "decentralized", "centralized", "sparse", "acemad", "self_consistency")
HISTORIES = ("full", "last_round", "peers_last")  # what an agent reads: every round (the paper), the last, its peers'
# A baseline MAD decides by the mean belief (l.617: the rule of l.438 with uniform weights), Du et al.'s plurality,
# or (Centralized MAD) the moderator's final answer (l.643).
MAD_AGGREGATORS = ("mean_belief", "plurality", "moderator")
ROSTERS = ("homogeneous", "acemad")
METHOD_NAMES = {
    "single": "Single Agent",
    "majority": "Majority Voting",
    "decentralized": "Decentralized MAD",
    "centralized": "Centralized MAD",
    "sparse": "Sparse MAD",
    "acemad": "AceMAD",
    "self_consistency": "Self-consistency",
}


def at_paper_eta(label: str) -> str:
    """A label as at the paper's eta ('AceMAD (T=3, eta=4)' -> 'AceMAD (T=3)'): how a --set ETA run finds its row."""
    return re.sub(r", eta=[^,)]+", "", label)


GENERALIST = AgentSpec(persona="Generalist", temperature=0.1)
SKEPTIC = AgentSpec(persona="Skeptic", temperature=0.6)
# The naive agent: "You are a helpful assistant." at the subset construction's temperature (l.604).
NAIVE_AGENT = AgentSpec(persona="Assistant", temperature=0.7)
# Completion caps (tokens) of an LLM agent's two calls; the paper gives none.
ARGUE_MAX_TOKENS = 400
COMMIT_MAX_TOKENS = 200


@dataclass(frozen=True)
class DebateConfig:
    """A method run on one question. `roster`: None (the method's own), "homogeneous", "acemad" or N AgentSpecs;
    `repeat_offset` shifts every draw (the Single Agent never replays the draws that chose its subset)."""

    method: str = "acemad"
    n_agents: int = N_AGENTS
    rounds: int = ROUNDS
    eta: float = ETA
    scoring_rule: str = "brier"
    weight_exponent: float = WEIGHT_EXPONENT
    weighting: str = "peer_prediction"
    crowd_share: float = CROWD_SHARE
    crowd: AgentSpec = GENERALIST
    truth_holder: AgentSpec = SKEPTIC
    roster: Union[None, str, tuple[AgentSpec, ...]] = None
    baseline_agent: AgentSpec = NAIVE_AGENT
    single_runs: int = 5
    history: str = "full"
    mad_aggregator: str = "mean_belief"
    repeat_offset: int = 0
    seed: int = 0
    name: Optional[str] = field(default=None, compare=False)

    def __post_init__(self) -> None:
        whole = lambda v, lo: isinstance(v, int) and v >= lo
        finite = lambda v: isinstance(v, (int, float)) and math.isfinite(v) and v >= 0
        explicit = isinstance(self.roster, tuple) and all(isinstance(s, AgentSpec) for s in self.roster)
        choices = {"method": METHODS, "scoring_rule": SCORING_RULES, "weighting": WEIGHTINGS, "history": HISTORIES,
                   "mad_aggregator": MAD_AGGREGATORS}  # fmt: skip
        checks = [*((f, getattr(self, f) in allowed, f"choose one of {allowed}") for f, allowed in choices.items()),
                  ("n_agents", whole(self.n_agents, 1), "need an integer N >= 1"),
                  ("rounds", whole(self.rounds, 1), "need an integer T >= 1"),
                  ("repeat_offset", whole(self.repeat_offset, 0), "need an integer >= 0"),
                  ("seed", whole(self.seed, 0), "need an integer >= 0"),
                  ("single_runs", whole(self.single_runs, 1), "need an integer >= 1"),
                  ("eta", finite(self.eta) and self.eta <= MAX_ETA, f"need 0 <= eta <= {MAX_ETA:g}"),
                  ("weight_exponent", finite(self.weight_exponent), "need a finite exponent >= 0"),
                  ("crowd_share", finite(self.crowd_share) and self.crowd_share <= 1.0, "need 0 <= crowd_share <= 1"),
                  ("mad_aggregator", self.mad_aggregator != "moderator" or self.method == "centralized",
                   "only Centralized MAD has a moderator"),
                  ("roster", explicit or self.roster in (None, *ROSTERS),
                   f"choose one of {ROSTERS}, None or a tuple of AgentSpecs"),
                  ("roster", not explicit or len(self.roster) == self.n_agents,  # type: ignore[arg-type]
                   f"need exactly n_agents={self.n_agents} specs"),
                  ("roster", self.method != "self_consistency" or self.roster in (None, "homogeneous"),
                   "self-consistency samples the one baseline_agent: leave roster None"),
                  ("n_agents", self.method != "centralized" or whole(self.n_agents, 2),
                   "Centralized MAD needs N >= 2 debaters")]  # fmt: skip
        for what, ok, allowed in checks:
            if not ok:
                raise ValueError(f"DebateConfig: {what}={getattr(self, what)!r} is not allowed; {allowed}")

    @property
    def n_truth_holders(self) -> int:
        """round-half-up of (1 - crowd_share) * N: 1 of 5, 0 of 2."""
        return int(math.floor((1.0 - self.crowd_share) * self.n_agents + 0.5 + 1e-9))

    @property
    def samples(self) -> int:
        """N, or N x T for self-consistency (AceMAD's calls)."""
        return self.n_agents * self.rounds if self.method == "self_consistency" else self.n_agents

    @property
    def roster_kind(self) -> str:
        if isinstance(self.roster, tuple):
            return "explicit"
        if self.roster is not None:
            return self.roster
        return "acemad" if self.method == "acemad" else "homogeneous"

    def specs(self) -> list[AgentSpec]:
        """The agents; AceMAD's crowd first, truth-holders last."""
        if isinstance(self.roster, tuple):
            return list(self.roster)
        if self.roster_kind == "homogeneous":
            return [self.baseline_agent] * self.samples
        n_th = self.n_truth_holders
        return [self.crowd] * (self.n_agents - n_th) + [self.truth_holder] * n_th

    @functools.cached_property  # every record asks (frozen: it never changes)
    def label(self) -> str:
        """Every table's label, e.g. 'AceMAD (T=3, uniform)'."""
        return self._named() or self._label(with_n=True)

    @functools.cached_property
    def family(self) -> str:
        return self._named() or self._label(with_n=False)

    def _named(self) -> Optional[str]:
        """The config's name, with an eta that is not the paper's as its label would say it ('AceMAD (Different
        Persona, eta=4)'; at_paper_eta takes it off again)."""
        if not self.name or self.method != "acemad" or self.eta == ETA:
            return self.name
        return f"{self.name[:-1]}, eta={self.eta:g})" if self.name.endswith(")") else f"{self.name} (eta={self.eta:g})"

    def _label(self, with_n: bool) -> str:
        base, kind = METHOD_NAMES[self.method], self.roster_kind
        if self.method == "self_consistency":
            return f"{base} ({self.samples} samples)"
        extras = [f"N={self.n_agents}"] if with_n and self.n_agents != N_AGENTS and self.method != "single" else []
        if kind not in ("explicit", "acemad" if self.method == "acemad" else "homogeneous"):
            extras.append("AceMAD roster" if kind == "acemad" else "homogeneous")
        if self.method in ("decentralized", "centralized", "sparse"):  # the aggregator and T where not the paper's
            extras += [self.mad_aggregator] if self.mad_aggregator != "mean_belief" else []
            extras += [f"T={self.rounds}"] if self.rounds != ROUNDS else []
        if self.method == "acemad":  # T always, every other setting where it is not the paper's
            extras.append(f"T={self.rounds}")
            extras += [x for x in (self.weighting, self.scoring_rule) if x not in ("peer_prediction", "brier")]
            extras += [f"eta={self.eta:g}"] if self.eta != ETA else []
            extras += [f"k={self.weight_exponent:g}"] if self.weight_exponent != WEIGHT_EXPONENT else []
        return f"{base} ({', '.join(extras)})" if extras else base

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "name"}

    @functools.cached_property  # asked for every record: computed once per config (frozen: it never changes)
    def hash(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def replace(self, **kw) -> DebateConfig:
        return dataclasses.replace(self, **kw)

    @classmethod
    def from_dict(cls, d: dict) -> DebateConfig:
        """From plain values (a profile file); an unknown key is an error naming it."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            hints = {k: difflib.get_close_matches(k, known, n=1) for k in unknown}
            msg = ", ".join(f"{k!r}" + (f" (did you mean {h[0]!r}?)" if h else "") for k, h in hints.items())
            raise ValueError(f"DebateConfig: unknown key(s) {msg}; allowed keys are {sorted(known)}")
        d = dict(d)
        for key in ("crowd", "truth_holder", "baseline_agent"):
            if isinstance(d.get(key), dict):
                d[key] = AgentSpec(**d[key])
        if d.get("roster") is not None and not isinstance(d["roster"], str):
            d["roster"] = tuple(AgentSpec(**s) if isinstance(s, dict) else s for s in d["roster"])
        return cls(**d)
