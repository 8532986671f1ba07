"""cost: what a run will cost before anything is spent (no network, no key): `make estimate PROFILE=paper`.
estimate (the one replay and the printout), endpoint (the modelled endpoint), items (item counts), power (the
questions each claim needs). Prices and the MAX_USD cap live in agents/ (enforced per call)."""
