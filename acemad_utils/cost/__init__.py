"""cost: what a run will cost before anything is spent (no network, no key): `make estimate PROFILE=paper`.
estimate (the one replay against a modelled endpoint, and the printout), items (item counts), power (the
questions each claim needs). Prices and the MAX_USD cap live in agents/ (enforced per call)."""
