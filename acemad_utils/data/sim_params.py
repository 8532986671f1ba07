"""The synthetic population's parameters (agents/sim.py, docs/population.md) as plain data.

Why here, below agents/ and report/: a run's meta stores them, and the report layer (the claims ledger, the
assumption map) reads and names them without importing the population that uses them (import-linter keeps
report/ and agents/ independent).
"""

from __future__ import annotations

from dataclasses import dataclass

from acemad_utils.protocol.schema import AgentSpec

#: An agent's latent state on an item, in the order state_probs returns their probabilities.
STATES = ("guess", "insight", "trapped", "naive")
CALIBRATION_BY = ("knowledge", "persona")
#: Personas whose P(insight) is `insight`; every other persona (Generalist, Assistant) uses `crowd_insight`.
TRUTH_HOLDER_PERSONAS = ("Skeptic",)


@dataclass(frozen=True)
class SimParams:
    trap_mean: float = 0.7  # mean per-item propensity of a non-insight agent to fall for the shared trap
    trap_concentration: float = 4.0  # Beta concentration of that propensity; smaller = more correlated errors
    insight: float = 0.5  # P(insight state | not guessing) for a Skeptic: sees through the trap
    crowd_insight: float = 0.0  # the same for a Generalist or an Assistant
    slow_escape: float = 0.15  # thinking="slow": P(insight) -> 1 - (1 - P)(1 - slow_escape)
    explore_base: float = 0.02  # P(guess state: uniform random answer) at temperature 0 ...
    explore_per_temp: float = 0.2  # ... plus this much per unit of temperature
    confidence_base: float = 0.9  # belief on the own answer at temperature 0 ...
    confidence_per_temp: float = 0.5  # ... minus this much per unit of temperature
    commit_concentration: float = 20.0  # Dirichlet concentration of expressed beliefs at temperature 1
    crowd_susceptibility: float = 0.3  # alpha of Eq. 1 for every agent not in the insight state
    insight_susceptibility: float = 0.1  # alpha of Eq. 1 for an agent in the insight state (stubborn truth-holder)
    crowd_calibration: float = 0.0  # unskilled predictors: 0 = false consensus; 1 = predicts its peers' mean
    insight_calibration: float = 0.9  # skilled predictors: how well they model the crowd
    knowledge_link: float = 1.0  # 1 = only insight agents are skilled predictors; 0 = skill unrelated to state
    calibration_by: str = "knowledge"  # "knowledge" (state decides) | "persona" (the earlier rule: Skeptic decides)
    moderator_susceptibility: float = 1.0  # the moderator adopts the mean stance it reads

    def __post_init__(self) -> None:
        for name in (
            "trap_mean",
            "insight",
            "crowd_insight",
            "slow_escape",
            "crowd_calibration",
            "insight_calibration",
            "knowledge_link",
            "crowd_susceptibility",
            "insight_susceptibility",
            "moderator_susceptibility",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"SimParams: {name}={v!r} must be a number in [0, 1]")
        for name in ("trap_concentration", "commit_concentration"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"SimParams: {name}={v!r} must be a number > 0")
        if self.calibration_by not in CALIBRATION_BY:
            raise ValueError(f"SimParams: calibration_by={self.calibration_by!r} must be one of {CALIBRATION_BY}")

    def p_insight(self, spec: AgentSpec) -> float:
        """P(insight state | not guessing) for an agent of this spec (persona and thinking style)."""
        p = self.insight if spec.persona in TRUTH_HOLDER_PERSONAS else self.crowd_insight
        if spec.thinking == "slow":
            p = 1.0 - (1.0 - p) * (1.0 - self.slow_escape)
        return p

    # min/max, not np.clip: the same value, without numpy's per-call overhead on a scalar (called per agent)
    def confidence(self, tau: float) -> float:
        return float(min(max(self.confidence_base - self.confidence_per_temp * tau, 0.3), 0.99))

    def explore(self, tau: float) -> float:
        return float(min(max(self.explore_base + self.explore_per_temp * tau, 0.0), 1.0))

    def concentration(self, tau: float) -> float:
        return self.commit_concentration / max(tau, 0.05)
