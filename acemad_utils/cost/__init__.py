"""cost: what a profile will cost before anything is spent (no network, no key): `make estimate PROFILE=paper`.
estimate (replay and printout), endpoint (the modelled endpoint), items (item counts), prefix (prompt caching),
power (the questions each claim needs). Prices and the MAX_USD cap live in agents/ (enforced per call)."""

from acemad_utils.cost.estimate import estimate_profile, format_estimate

__all__ = ["estimate_profile", "format_estimate"]
