"""cost: what a profile will cost before anything is spent (no network, no key).

    estimate   replay every run of a profile's notebooks on a modelled endpoint and scale by item counts
    endpoint   the modelled endpoint: deterministic replies and modelled token counts
    items      how many questions each run asks, and the sample items the replay uses
    prefix     repeated prompt prefixes (what a provider's prompt cache could serve)
The price table and the MAX_USD cap are in agents/ (prices, budget): the client enforces them per call.

    python -m acemad_utils.cost estimate --profile paper      # = make estimate PROFILE=paper
"""

from acemad_utils.cost.estimate import estimate_profile, format_estimate

__all__ = ["estimate_profile", "format_estimate"]
