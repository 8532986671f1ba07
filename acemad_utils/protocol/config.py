"""One config dataclass for every method of the paper (AceMAD, its ablations and the baselines).

    from acemad_utils.protocol.config import DebateConfig
    cfg = DebateConfig(method="acemad", n_agents=5, rounds=3)          # the paper's defaults
    cfg.specs()      # 4 Generalists at T=0.1, 1 Skeptic at T=0.6 (crowd 80%, truth-holders 20%)
    cfg.label        # 'AceMAD (T=3)'
    DebateConfig(method="acemad", weighting="uniform").label   # 'AceMAD (T=3, uniform)'
    DebateConfig(method="majority").specs()       # 5 x the naive agent: plain assistant at T=0.7 (homogeneous)
    DebateConfig(method="majority", roster="acemad").label      # 'Majority Voting (AceMAD roster)'
    DebateConfig(method="self_consistency").label   # 'Self-consistency (15 samples)': AceMAD's N x T turns, one agent

Rosters (which agents a method gets; paper line numbers refer to ../shared/paper/acemad_paper.tex):
- AceMAD and its ablations: the crowd/truth-holder roster, 80% Generalists at T=0.1 + 20% Skeptics at T=0.6
  (l.597-600 "in main experiment"; heterogeneity is "the key difference" of AceMAD's setup, l.455).
- Every baseline (Single Agent, Majority Voting, the three MADs): one homogeneous roster of `baseline_agent`,
  by default NAIVE_AGENT = the plain assistant at T=0.7. The paper calls its baselines "homogeneous
  Decentralized MAD" (l.468) and gives one temperature for a non-AceMAD agent, the "naive single-agent
  baseline (Temperature = 0.7)" of the subset construction (l.604, also l.206); it never gives the baselines
  a persona (the persona prompts of l.1150-1152 belong to AceMAD's crowd and truth-holders).
- Self-consistency (ours, not the paper's: the compute-matched baseline of arXiv 2502.08788) is the naive agent
  sampled independently once per turn AceMAD takes at the same N and T (N x T samples, each the turn's calls: 15
  samples, 30 calls at N = 5, T = 3 with the paper's two calls per turn), decided by plurality.
- roster="acemad" gives a baseline AceMAD's roster (the control "same agents, only the protocol differs"),
  roster="homogeneous" gives AceMAD the baselines' roster, and a tuple of AgentSpecs sets every agent.

Bad values stop here, before any agent is built, with a message naming the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Optional, Union

from acemad_utils.protocol.schema import AgentSpec

# The paper's constants, written here once (every other module, the notebooks' parameters and the profiles read
# them from here): eta of the multiplicative-weights update (l.597-600), the debate's T and N, the share of the
# crowd in AceMAD's roster (80% Generalists, 20% Skeptics), the final rule's weight exponent (sum_i w_i^2 p_i), and
# the T values of Table 2's AceMAD rows.
ETA = 2.0
ROUNDS = 3
N_AGENTS = 5
CROWD_SHARE = 0.8
WEIGHT_EXPONENT = 2.0
TABLE2_ROUNDS = (2, 3, 5)
SCORING_RULES = ("brier", "log", "spherical")
WEIGHTINGS = ("peer_prediction", "self_belief", "uniform")

METHODS = ("single", "majority", "decentralized", "centralized", "sparse", "acemad", "self_consistency")
HISTORIES = ("full", "last_round", "peers_last")
# How a baseline MAD decides. "mean_belief" is the paper's Evaluation Metrics rule (l.617: every MAD decides by
# weighted voting, Eq. 4, with uniform weights for the baselines); "plurality" is Du et al.'s vote; "moderator"
# (Centralized MAD only) scores the moderator's final answer, the reading of Appendix Baselines (l.643).
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

GENERALIST = AgentSpec(persona="Generalist", temperature=0.1)
SKEPTIC = AgentSpec(persona="Skeptic", temperature=0.6)
# The naive agent: no persona beyond "You are a helpful assistant." at the subset construction's temperature
# (l.604). It builds the challenging subsets and is every baseline's agent (see the module docstring).
NAIVE_AGENT = AgentSpec(persona="Assistant", temperature=0.7)
# Completion caps of an LLM agent's two calls (tokens). The paper gives none; the argument's cap is the notebooks'
# ARGUE_MAX_TOKENS parameter (None: no cap), the commitment is a short JSON object.
ARGUE_MAX_TOKENS = 400
COMMIT_MAX_TOKENS = 200


@dataclass(frozen=True)
class DebateConfig:
    """Everything that defines a method run on one question (sampling settings live in AgentSpec).

    method          one of METHODS
    n_agents, rounds  N and T (Single Agent and Majority Voting ignore `rounds`)
    eta, scoring_rule, weight_exponent, weighting   AceMAD's update and final rule (Algorithm 1);
                    weighting='self_belief' / 'uniform' are the paper's ablations
    crowd_share     share of `crowd` agents; the rest are `truth_holder` agents, placed last
    roster          None: the paper's roster for the method (AceMAD: crowd + truth-holders; baselines:
                    homogeneous); "homogeneous" / "acemad" to choose one; or explicit per-agent specs
                    (a tuple of N AgentSpecs), e.g. one model per agent
    baseline_agent  the agent of the homogeneous roster (the naive agent: plain assistant, T=0.7)
    single_runs     independent runs averaged by the Single Agent baseline
    history         what an agent sees: all earlier rounds ('full', the paper), only the latest round
                    ('last_round'), or only its peers' latest arguments ('peers_last')
    mad_aggregator  how the baseline MADs decide: argmax of the mean final belief (the paper's
                    uniform-weight rule), a plurality vote of final answers (Du et al.) or, for Centralized
                    MAD only, the moderator's final answer; every record stores all of them (`decisions`)
    repeat_offset   added to the repeat index every agent is built and called with: runs with different
                    offsets draw independent samples (the subset construction uses one, so the Single Agent
                    baseline never replays the very draws that selected its items)
    seed            drives synthetic agents and tie-breaks
    name            optional display label overriding the derived one
    """

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
        def bad(what: str, allowed: str, value=None) -> ValueError:
            v = getattr(self, what) if value is None else value
            return ValueError(f"DebateConfig: {what}={v!r} is not allowed; {allowed}")

        choices = {"method": METHODS, "scoring_rule": SCORING_RULES, "weighting": WEIGHTINGS, "history": HISTORIES,
                   "mad_aggregator": MAD_AGGREGATORS}  # fmt: skip
        for what, allowed in choices.items():
            if getattr(self, what) not in allowed:
                raise bad(what, f"choose one of {allowed}")
        wholes = {"n_agents": (1, "N >= 1"), "rounds": (1, "T >= 1"), "repeat_offset": (0, ">= 0"),
                  "single_runs": (1, ">= 1")}  # fmt: skip
        for what, (lo, rule) in wholes.items():
            if not isinstance(getattr(self, what), int) or getattr(self, what) < lo:
                raise bad(what, f"need an integer {rule}")
        for what, name in (("eta", "eta"), ("weight_exponent", "exponent")):
            v = getattr(self, what)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise bad(what, f"need a finite {name} >= 0")
        if not 0.0 <= self.crowd_share <= 1.0:
            raise bad("crowd_share", "need 0 <= crowd_share <= 1")
        if self.mad_aggregator == "moderator" and self.method != "centralized":
            raise bad("mad_aggregator", "only Centralized MAD has a moderator")
        explicit = isinstance(self.roster, tuple) and all(isinstance(s, AgentSpec) for s in self.roster)
        if not (self.roster is None or explicit or (isinstance(self.roster, str) and self.roster in ROSTERS)):
            raise bad("roster", f"choose one of {ROSTERS}, None or a tuple of AgentSpecs")
        if explicit and len(self.roster) != self.n_agents:  # type: ignore[arg-type]
            raise bad("roster", f"need exactly n_agents={self.n_agents} specs", f"{len(self.roster)} specs")  # type: ignore[arg-type]
        if self.method == "self_consistency" and self.roster not in (None, "homogeneous"):
            raise bad("roster", "self-consistency samples the one baseline_agent: leave roster None")
        if self.method == "centralized" and self.n_agents < 2:
            raise bad("n_agents", "Centralized MAD needs N >= 2 debaters")

    # -------------------------------------------------------------- derived
    @property
    def n_truth_holders(self) -> int:
        """round-half-up of (1 - crowd_share) * N: 1 of 5, 2 of 10, 0 of 2 (a 2-agent crowd has no minority)."""
        return int(math.floor((1.0 - self.crowd_share) * self.n_agents + 0.5 + 1e-9))

    @property
    def samples(self) -> int:
        """Agents answering independently: N, or for self-consistency N x T (AceMAD's turns at this N and T, so
        as many calls per question: every turn, a sample's or a debater's, makes the same calls)."""
        return self.n_agents * self.rounds if self.method == "self_consistency" else self.n_agents

    @property
    def roster_kind(self) -> str:
        """'acemad' (crowd + truth-holders), 'homogeneous' (N x baseline_agent) or 'explicit' (a tuple)."""
        if isinstance(self.roster, tuple):
            return "explicit"
        if self.roster is not None:
            return self.roster
        return "acemad" if self.method == "acemad" else "homogeneous"

    def specs(self) -> list[AgentSpec]:
        """The agent roster. AceMAD's: crowd first, truth-holders last (so a ring places them apart from each
        other); the baselines': N copies of `baseline_agent`; an explicit tuple as given."""
        kind = self.roster_kind
        if kind == "explicit" and isinstance(self.roster, tuple):
            return list(self.roster)
        if kind == "homogeneous":
            return [self.baseline_agent] * self.samples
        n_th = self.n_truth_holders
        return [self.crowd] * (self.n_agents - n_th) + [self.truth_holder] * n_th

    @property
    def label(self) -> str:
        """The display label, e.g. 'Majority Voting (N=3)' or 'AceMAD (T=3, uniform)'. Notebooks and tables
        refer to methods only through it, so every N, T and profile yields consistent names."""
        return self.name or self._label(with_n=True)

    @property
    def family(self) -> str:
        """The label without the group size, for curves over N: 'Majority Voting', 'AceMAD (T=3)'."""
        return self.name or self._label(with_n=False)

    def _label(self, with_n: bool) -> str:
        base = METHOD_NAMES[self.method]
        extras = [f"N={self.n_agents}"] if with_n and self.n_agents != N_AGENTS and self.method != "single" else []
        default_roster = "acemad" if self.method == "acemad" else "homogeneous"
        if self.roster_kind != default_roster and self.roster_kind != "explicit":
            extras.append("AceMAD roster" if self.roster_kind == "acemad" else "homogeneous")
        if self.method == "self_consistency":
            return f"{base} ({self.samples} samples)"
        if self.method != "acemad":
            if self.method in ("decentralized", "centralized", "sparse") and self.mad_aggregator != "mean_belief":
                extras.append(self.mad_aggregator)
            return f"{base} ({', '.join(extras)})" if extras else base
        extras.append(f"T={self.rounds}")
        if self.weighting != "peer_prediction":
            extras.append(self.weighting)
        if self.scoring_rule != "brier":
            extras.append(self.scoring_rule)
        if self.eta != ETA:
            extras.append(f"eta={self.eta:g}")
        if self.weight_exponent != WEIGHT_EXPONENT:
            extras.append(f"k={self.weight_exponent:g}")
        return f"{base} ({', '.join(extras)})"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("name")
        return d

    @functools.cached_property  # asked for every record: computed once per config (frozen: it never changes)
    def hash(self) -> str:
        """Stable 12-hex id of every field that changes results (the display name does not)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def replace(self, **kw) -> DebateConfig:
        return dataclasses.replace(self, **kw)

    @classmethod
    def from_dict(cls, d: dict) -> DebateConfig:
        """Build from plain values (a profile file); unknown keys are an error that names them."""
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
