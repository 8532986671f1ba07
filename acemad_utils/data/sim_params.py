"""The synthetic population's parameters (docs/population.md) as plain data, below agents/ and report/."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from acemad_utils.protocol.schema import AgentSpec

#: An agent's latent state on an item, in the order of agents.sim.SimBatch.states.
STATES = ("guess", "insight", "trapped", "naive")
CALIBRATION_BY = ("knowledge", "persona")
#: Personas whose P(insight) is `insight`; every other persona (Generalist, Assistant) uses `crowd_insight`.
TRUTH_HOLDER_PERSONAS = ("Skeptic",)

#: Notebook 09's knowledge_link x crowd_calibration plane (beside "grid": knowledge_link x insight).
CALIBRATION_GRID = "grid_calibration"
#: Notebook 09's one-dimensional sweeps, each at the population's other values (Figure 9b).
MAP_SWEEPS = ("trap_concentration", "crowd_calibration", "crowd_copy")

#: SimParams' defaults: fitted to the paper's printed baselines (Tables 1-2, GPT-4o-mini) by experiments/fit.py.
FIT_FILE = Path(__file__).with_name("fitted_population.json")
FITTED: dict = json.loads(FIT_FILE.read_text(encoding="utf-8"))["params"]
#: The population before the fit (chosen from the paper's words, not its numbers), kept as a named variant.
ORIGINAL: dict[str, Any] = {
    "trap_mean": 0.7,
    "trap_concentration": 4.0,
    "insight": 0.5,
    "crowd_insight": 0.0,
    "crowd_copy": 0.0,
    "insight_susceptibility": 0.1,
}
#: The profile parameter POPULATION's values: SimParams overrides of each named population.
POPULATIONS: dict[str, dict[str, Any]] = {"fitted": {}, "original": ORIGINAL}


@dataclass(frozen=True)
class SimParams:
    # mean per-item propensity of a non-insight agent to fall for the shared trap
    trap_mean: float = FITTED["trap_mean"]
    # Beta concentration of that propensity; smaller = more correlated errors
    trap_concentration: float = FITTED["trap_concentration"]
    insight: float = FITTED["insight"]  # P(insight state | not guessing) for a Skeptic: sees through the trap
    crowd_insight: float = FITTED["crowd_insight"]  # the same for a Generalist or an Assistant
    # near-copies: P that an agent takes the latent state of the first agent of its roster with the same spec,
    # crowd_copy * (1 - temperature) (one prompt at low temperature answers alike; see copy())
    crowd_copy: float = FITTED["crowd_copy"]
    slow_escape: float = 0.15  # thinking="slow": P(insight) -> 1 - (1 - P)(1 - slow_escape)
    explore_base: float = 0.02  # P(guess state: uniform random answer) at temperature 0 ...
    explore_per_temp: float = 0.2  # ... plus this much per unit of temperature
    confidence_base: float = 0.9  # belief on the own answer at temperature 0 ...
    confidence_per_temp: float = 0.5  # ... minus this much per unit of temperature
    commit_concentration: float = 20.0  # Dirichlet concentration of expressed beliefs at temperature 1
    crowd_susceptibility: float = 0.3  # alpha of Eq. 1 for every agent not in the insight state
    # alpha of Eq. 1 for an agent in the insight state (stubborn truth-holder)
    insight_susceptibility: float = FITTED["insight_susceptibility"]
    crowd_calibration: float = 0.0  # unskilled predictors: 0 = false consensus; 1 = predicts its peers' mean
    insight_calibration: float = 0.9  # skilled predictors: how well they model the crowd
    knowledge_link: float = 1.0  # 1 = only insight agents are skilled predictors; 0 = skill unrelated to state
    calibration_by: str = "knowledge"  # "knowledge" (state decides) | "persona" (the earlier rule: Skeptic decides)
    moderator_susceptibility: float = 1.0  # the moderator adopts the mean stance it reads

    def __post_init__(self) -> None:
        shares = "trap_mean insight crowd_insight crowd_copy slow_escape crowd_calibration insight_calibration"
        alphas = "crowd_susceptibility insight_susceptibility moderator_susceptibility"
        for name in f"{shares} knowledge_link {alphas} trap_concentration commit_concentration".split():
            v, positive = getattr(self, name), name.endswith("concentration")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 if positive else 0 <= v <= 1):
                raise ValueError(f"SimParams: {name}={v!r} must be a number {'> 0' if positive else 'in [0, 1]'}")
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

    def copy(self, tau: float) -> float:
        """P that an agent at temperature tau shares its spec's first agent's state on an item (within a roster)."""
        return float(self.crowd_copy * min(max(1.0 - tau, 0.0), 1.0))

    def explore(self, tau: float) -> float:
        return float(min(max(self.explore_base + self.explore_per_temp * tau, 0.0), 1.0))

    def concentration(self, tau: float) -> float:
        return self.commit_concentration / max(tau, 0.05)


SYNTHETIC_SLUG = "synthetic-population"  # the synthetic population's model slug: folders and labels


def stand_in(slug: str) -> Optional[str]:
    """The model a synthetic slug stands in for ('synthetic-population-DeepSeek-V3.1' -> 'DeepSeek-V3.1', notebook 07);
    None for a synthetic population itself: the fitted 'synthetic-population' or another POPULATION's
    ('synthetic-population-original')."""
    name = _suffix(slug)
    return name if name and name not in POPULATIONS else None


def population_named(slug: str) -> Optional[str]:
    """The POPULATION a synthetic slug runs when it is not the fitted default ('synthetic-population-original' ->
    'original'); None for the fitted population and for the stand-ins."""
    name = _suffix(slug)
    return name if name in POPULATIONS else None


def _suffix(slug: str) -> str:
    return slug[len(SYNTHETIC_SLUG) + 1 :] if slug.startswith(SYNTHETIC_SLUG + "-") else ""
