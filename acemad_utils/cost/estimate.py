"""What a profile will cost, before any money is spent: calls, tokens and dollars per notebook, no network.

    python -m acemad_utils.cost estimate --profile paper          # = make estimate PROFILE=paper
    python -m acemad_utils.cost estimate --profile paper --arg-chars 1760 --per-benchmark 3
    python -m acemad_utils.cost prices                            # the price table with its sources
After the dollars, the command prints what the questions buy: per claim family, the questions planned, the n
that gives 80% power on the paper's claimed effect, and the planned run's power (acemad_utils.cost.power).

    from acemad_utils.cost.estimate import estimate_profile, format_estimate
    est = estimate_profile("paper")            # Estimate: rows per notebook + total
    print(format_estimate(est))

How. The profile's notebooks are replayed exactly as `make reproduce` runs them (the runs each notebook
makes with its parameters, acemad_utils.experiments.registry.runs(), in notebook order, with ONE shared
response cache as outputs/cache/llm.sqlite is shared) on a few sample items per benchmark, against an
in-process model of the endpoint (`ModelClient`): no socket, no SDK client, no key needed. Its replies are
deterministic functions of the request (arguments of `arg_chars` characters, JSON commitments), and its token
counts come from the token model (acemad_utils.agents.tokenmodel); see acemad_utils.cost.endpoint. Identical
calls (the same prompt in the same scope: round-1 arguments every debate method asks, AceMAD T=2 as a
prefix of T=5, configs repeated across notebooks) are
counted once, as the real cache pays them once. Per-item figures are scaled by the item counts:
  - the subset construction (notebook 01) runs on every input item: the published test-set sizes
    (data.PUBLISHED_SIZES) capped by N_ITEMS;
  - experiments run on the challenging subsets: their real size when they are already built, else the sizes
    inferred from the paper's Table 2 (PAPER_SUBSETS: every printed accuracy is k/n with one n per
    benchmark), or the paper's kept share of the input items when N_ITEMS caps them; then capped by N_MAX;
  - an experiment on the full test sets (notebook 07's Table 6, FULL_N_MAX) repeats configs whose subset
    items were paid already: it is replayed on a cold cache and pays only its items outside the subsets.
Sample items (acemad_utils.cost.items): real benchmark items at length quantiles when ACEMAD_DATA_DIR names
the files (read locally, never from the hub), else distinct demo questions per benchmark (the output says which).

Uncertainty: arguments are the largest unknown (real models write 70 to 400 tokens); `--arg-chars` prices
another length (1760 = the 400-token argue cap, an upper bound). Repeated prefixes (prompt caching,
estimate(prefix=True)): cost_prefix. The estimate is printed by `reproduce` before the first notebook of a
paid (`BACKEND: openai`) profile, and bench/cost.py uses the same functions, so the two cannot drift.

Prices: acemad_utils/agents/prices.py (provider, source and date per entry; check them), under the profile's
`models:` terms. Every row shows dollars, `$0 (free)` (the project's own llama.cpp server, BACKEND local, or a
model marked `free: true`) or `unpriced` (no price: an endpoint on localhost may be a paid gateway, so it is
never assumed free); the total reads "$X + N unpriced rows (T tokens)" and says how to price them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from acemad_utils.agents.budget import parse_max_usd
from acemad_utils.agents.prices import ENV_MODELS, FREE, HOW_TO_PRICE, parse_terms, price_of
from acemad_utils.agents.prices import describe as describe_price
from acemad_utils.agents.prices import table as price_table
from acemad_utils.agents.redact import safe_url
from acemad_utils.agents.tokenmodel import CHARS_PER_TOKEN
from acemad_utils.agents.tokenmodel import describe as token_model
from acemad_utils.cost.endpoint import DEFAULT_ARG_CHARS, replay_population
from acemad_utils.cost.items import item_counts, sample_items
from acemad_utils.cost.power import format_plan, plan
from acemad_utils.cost.prefix import prefix_shares
from acemad_utils.data.benchmarks import BENCHMARKS
from acemad_utils.data.settings import env
from acemad_utils.experiments import registry
from acemad_utils.experiments.profiles import endpoints, load_profile, notebook_params, parse_sets
from acemad_utils.protocol.debate import run_question


# ----------------------------------------------------------------------------- the replay
@dataclass
class Row:
    notebook: str
    model: str
    questions: int = 0  # questions x configs run (records)
    agent_calls: float = 0.0  # calls the agents ask for (cache hits included)
    calls: float = 0.0  # calls sent (paid)
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    usd: Optional[float] = 0.0  # None: unpriced (no price and not known to be free)
    usd_batch: Optional[float] = 0.0
    free: bool = False  # known to be free: the project's own llama.cpp server, or `free: true` in the profile
    cached_tokens: float = 0.0  # prompt tokens OpenAI's prompt cache could serve (estimate(prefix=True) only)
    usd_cached: Optional[float] = 0.0  # usd with those billed at the cached-input rate


# Wall time (format_estimate): calls in flight are at most WORKERS (one bound for the run, experiments/setup.py), so
# a run takes about calls x seconds per call / WORKERS, and never less than a provider's rate limits allow.
CALL_SECONDS = 2.0  # a debate call of a GPT-4o-mini-class model: ~136 argument tokens in ~2 s (assumed; --call-seconds)
#: (requests, tokens per minute, whose): OpenAI's published limits for gpt-4o-mini at usage tier 3 (tier 1: 500 and
#: 200k; tier 2: 5,000 and 2M; tier 5: 30,000 and 150M), recorded 2025: a common provider's ceiling, check yours.
RATE_LIMIT = (5_000, 4_000_000, "OpenAI usage tier 3, gpt-4o-mini")


@dataclass
class Estimate:
    profile: str
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    arg_chars: int = DEFAULT_ARG_CHARS
    seconds: float = 0.0
    terms: dict = field(default_factory=dict)  # the profile's models: terms the rows were priced with
    endpoints: list = field(default_factory=list)  # profiles.Endpoint: what the reproduce driver checks first
    workers: int = 0  # the profile's WORKERS (calls in flight at most): the wall time's divisor

    def total(self, paid_only: bool = False) -> Row:
        """Sum of the rows; its dollars are those of the priced rows (unpriced() says what they leave out).
        paid_only: the rows of priced endpoints that are not free."""
        t = Row("total", "")
        for r in self.rows:
            if paid_only and (r.free or r.usd is None):
                continue
            t.questions += r.questions
            for k in ("agent_calls", "calls", "prompt_tokens", "completion_tokens", "cached_tokens"):
                setattr(t, k, getattr(t, k) + getattr(r, k))
            for k in ("usd", "usd_batch", "usd_cached"):
                setattr(t, k, getattr(t, k) + (getattr(r, k) or 0.0))
        return t

    def unpriced(self) -> list[Row]:
        """The rows whose model has no price and is not known to be free: their dollars are unknown."""
        return [r for r in self.rows if r.usd is None]


def replay(
    stages: Sequence[registry.Run],
    items: dict,
    P: dict,
    arg_chars: int = DEFAULT_ARG_CHARS,
    log: Optional[list] = None,
    store: Optional[dict] = None,
    pops: Optional[dict] = None,
) -> list[tuple[registry.Run, str, dict]]:
    """Run every stage's (registry.Run's) configs on the sample items with one shared modelled cache. Returns, per
    stage and benchmark, the mean per item of: agent calls, and network calls / prompt / completion tokens per model."""

    store = {} if store is None else store
    pops = {} if pops is None else pops  # one population per endpoint; the store is what calls share
    model0 = P.get("MODEL") or "gpt-4o-mini"
    out = []
    for st in stages:
        m = st.model or model0
        key = (m, st.base_url)
        if key not in pops:
            pops[key] = replay_population(
                m,
                store,
                arg_chars,
                P.get("CALLS", "two"),
                seed=P.get("SEED", 0),
                base_url=st.base_url or P.get("BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None,
                log=log,
            )
        pop = pops[key]
        for b in st.benchmarks or ():
            qs = items.get(b) or []
            if not qs:
                continue
            before = _snapshot(pop)
            for cfg in st.configs:
                for q in qs:
                    run_question(q, pop, cfg)
            after = _snapshot(pop)
            per = {"agent_calls": (after["calls"] - before["calls"]) / len(qs), "by": {}}
            for (mm, kind), v in after["by"].items():
                w = before["by"].get((mm, kind), [0, 0, 0])
                per["by"][(mm, kind)] = [(v[i] - w[i]) / len(qs) for i in range(3)]
            out.append((st, b, per))
    return out


def _snapshot(pop) -> dict:
    by: dict = {}
    calls = 0
    for c in list(pop._clients.values()):
        calls += c.stats()["calls"]
        for m, v in c.by_model.items():
            e = by.setdefault((m, c.kind), [0, 0, 0])
            for i in range(3):
                e[i] += v[i]
    return {"calls": calls, "by": by}


def _stages(params_by_nb: dict) -> tuple[list, Optional[dict]]:
    """[(registry.Run, its notebook's params)] of every notebook that calls an LLM, and the first one's params."""
    stages, P0 = [], None
    for nb, P in params_by_nb.items():
        if P.get("BACKEND", "sim") == "sim":
            continue  # the synthetic population makes no LLM call
        P0 = P0 or P
        for st in registry.runs(nb, P):
            stages.append((st, P))
    if stages and P0 is not None and P0.get("SOURCE", "benchmarks") == "demo":
        stages = [(dataclasses.replace(st, benchmarks=["demo"]), P) for st, P in stages]
    return stages, P0


def _add_cached(rows: dict, log: list, spans: list) -> None:
    """Attribute the repeated-prefix tokens of each logged call (prefix_shares) to its row, scaled per item."""
    per_call = prefix_shares(log)["per_call"]
    for start, end, scale, nb_name in spans:
        for j in range(start, end):
            r = rows.get((nb_name, log[j][1]))
            if r is not None:
                r.cached_tokens += per_call[j] * scale


def _count(rows: dict, st: registry.Run, P: dict, per: dict, *, n: float, paid: float) -> None:
    """Add one stage-benchmark's replay (`per` item) to the rows of its notebook: `paid` items' calls and tokens
    per model, `n` items' questions and agent calls to the stage's own model. A row stays free only on the
    project's own llama.cpp server (BACKEND local), as the client prices it: an endpoint's kind or address says
    nothing about its bill (a gateway on localhost)."""
    local = P.get("BACKEND") == "local"
    for (m, _kind), (nc, pt, ct) in per["by"].items():
        r = rows.setdefault((st.notebook, m), Row(st.notebook, m, free=True))
        r.free = r.free and local
        r.calls += nc * paid
        r.prompt_tokens += pt * paid
        r.completion_tokens += ct * paid
    m0 = st.model or P.get("MODEL") or "gpt-4o-mini"
    main = rows.setdefault((st.notebook, m0), Row(st.notebook, m0, free=True))
    main.free = main.free and local
    main.questions += n * len(st.configs)
    main.agent_calls += per["agent_calls"] * n


def estimate(
    params_by_nb: dict,
    profile: str = "",
    *,
    per_benchmark: int = 2,
    arg_chars: int = DEFAULT_ARG_CHARS,
    data_dir: Optional[str] = None,
    prefix: bool = False,
    terms: Optional[dict] = None,
) -> Estimate:
    """The estimate of notebooks with these parameters ({notebook: params}); see the module doc.
    prefix=True also prices the repeated-prefix share of each notebook's prompt tokens at the cached-input rate
    (Row.cached_tokens, Row.usd_cached; OpenAI's rule, see prefix_shares: an upper bound).
    terms: the profile's `models:` ({model: Price}, prices.parse_terms) over the price table. A row is free only
    on the project's own llama.cpp server (BACKEND local) or for a model the terms mark free; a model with no
    price is unpriced (Row.usd None), whatever its endpoint."""
    t0 = time.perf_counter()
    est = Estimate(profile, arg_chars=arg_chars, terms=dict(terms or {}))
    stages, P0 = _stages(params_by_nb)
    if not stages:
        est.notes.append("no LLM calls: every notebook uses the synthetic population (BACKEND sim)")
        return est
    assert P0 is not None  # set with the first stage
    benches = sorted({b for st, _ in stages for b in st.benchmarks or ()}, key=lambda b: (b not in BENCHMARKS, b))
    items, src = sample_items(benches, per_benchmark, P0.get("SOURCE", "benchmarks"), data_dir)
    est.notes.append(f"items replayed: {per_benchmark} per benchmark, {src}")
    store: dict = {}  # one cache for the whole profile, as outputs/cache/llm.sqlite
    rows: dict = {}  # (notebook, model) -> Row, in notebook order
    subset_src = set()
    log: Optional[list] = [] if prefix else None
    spans = []  # (row key, first log index, last log index, items scale) to attribute cacheable tokens
    for st, P in stages:
        for b in st.benchmarks or ():
            start = len(log) if log is not None else 0
            # An experiment on the full test sets (Table 6) repeats configs the subset runs paid on the sample
            # items: replay it on a cold cache and pay only its items outside the challenging subsets.
            outside = st.on == "input" and st.name != "subsets"
            got = replay(
                [dataclasses.replace(st, benchmarks=[b])], items, P, arg_chars, store={} if outside else store, log=log
            )
            if not got:
                continue
            _, _, per = got[0]
            n, paid, why = _item_counts(st, b, P, outside=outside)
            if st.on == "subset":
                subset_src.add(why)
            if log is not None:
                spans.append((start, len(log), paid / len(items[b]), st.notebook))
            _count(rows, st, P, per, n=n, paid=paid)
    if log is not None:
        _add_cached(rows, log, spans)
    for r in rows.values():
        _price_row(r, terms)
    est.rows = [r for r in rows.values() if r.questions or r.calls]
    est.notes.append("subset sizes: " + ", ".join(sorted(subset_src)) if subset_src else "no subset runs")
    est.seconds = time.perf_counter() - t0
    return est


def _item_counts(st: registry.Run, b: str, P: dict, *, outside: bool) -> tuple[float, float, str]:
    """(items the run asks, items it pays for, where the subset size came from) for one benchmark: the subset or
    input size under the run's cap; a full-set run outside the subsets pays only for the items it adds."""
    full, sub, why = item_counts(b, P)
    n = full if st.on == "input" else sub
    if st.cap is not None:
        n = min(n, st.cap)
    return n, (n * (1 - sub / full) if outside and full else n), why


def _price_row(r: Row, terms: Optional[dict]) -> None:
    """Dollars of a row: 0 when free, None when unpriced, else at the model's price (profile terms first)."""
    p = FREE if r.free else price_of(r.model, terms)
    r.free = p is not None and p.free
    if p is None:
        r.usd = r.usd_batch = r.usd_cached = None
        return
    r.usd = p.usd(r.prompt_tokens, r.completion_tokens, 0, False)
    r.usd_batch = p.usd(r.prompt_tokens, r.completion_tokens, 0, True)
    r.usd_cached = p.usd(r.prompt_tokens, r.completion_tokens, r.cached_tokens)


def estimate_profile(
    profile: str, overrides: Optional[dict] = None, only: Optional[Sequence[str]] = None, **kw
) -> Estimate:
    """The estimate of a profile as reproduce runs it, priced with its `models:` terms over the price table."""
    name, params = notebook_params(profile, overrides, only)
    terms = parse_terms(load_profile(profile, overrides).get("models"))
    # as for the kernels (profiles.run_env): an ACEMAD_MODELS already in the environment wins over the profile's
    kw.setdefault("terms", {} if env(ENV_MODELS) else terms)
    est = estimate(params, name, **kw)
    est.endpoints = endpoints(params)
    est.workers = max((P.get("WORKERS") or 0 for P in params.values() if P.get("BACKEND", "sim") != "sim"), default=0)
    return est


def wall_hours(calls: float, tokens: float, workers: int, call_seconds: float = CALL_SECONDS) -> tuple[float, float]:
    """(hours at `workers` calls in flight, the floor RATE_LIMIT puts under any WORKERS) for `calls` sent."""
    rpm, tpm, _ = RATE_LIMIT
    return calls * call_seconds / max(workers, 1) / 3600, max(calls / rpm, tokens / tpm) / 60


def _wall_lines(est: Estimate, call_seconds: float) -> list[str]:
    t = est.total()
    if not est.workers or not t.calls:
        return []
    tokens = t.prompt_tokens + t.completion_tokens
    at = {w: wall_hours(t.calls, tokens, w, call_seconds)[0] for w in (est.workers, 4 * est.workers, 256) if w <= 256}
    floor = wall_hours(t.calls, tokens, est.workers, call_seconds)[1]
    rpm, tpm, whose = RATE_LIMIT
    return [
        f"  wall time at ~{call_seconds:g} s per call (--call-seconds), calls in flight = WORKERS: "
        + ", ".join(f"WORKERS={w} ~{h:,.1f} h" for w, h in at.items())
        + f" (--set WORKERS=N); a rate limit of {rpm:,} requests and {tpm / 1e6:g}M tokens per minute ({whose}; "
        f"check yours) puts a floor of ~{floor:,.1f} h under any WORKERS, and the Batch API takes up to 24 h per pass"
    ]


def _endpoint_lines(est: Estimate) -> list[str]:
    """Each endpoint beside its price: the parameter naming it, the model, the URL (no credentials)."""
    lines = []
    for e in est.endpoints:
        p = price_of(e.model, est.terms)
        price = "unpriced" if p is None else "free" if p.free else f"${p.input:g}/M input, ${p.output:g}/M output"
        lines.append(f"  endpoint {e.setting}: {e.model} at {safe_url(e.url or None)} ({price})")
    if lines:
        lines.append("  reproduce checks every endpoint above (key, server, model) before its first notebook")
    return lines


# ----------------------------------------------------------------------------- one run of your own questions
# The wall time printed before `python -m acemad_utils run` spends uses CALL_SECONDS (above), with --workers in flight.


@dataclass
class RunEstimate:
    """What running configs on questions will send (an upper bound: replies already cached are not paid again)."""

    calls: float
    prompt_tokens: float
    completion_tokens: float
    usd: Optional[float]  # None: some model is unpriced
    unpriced: list
    seconds: float  # wall time at CALL_SECONDS with `workers` calls in flight
    workers: int

    def line(self) -> str:
        usd = f"${self.usd:,.2f}" if self.usd is not None else f"unpriced ({', '.join(self.unpriced)}; no price)"
        hours = f"{self.seconds / 3600:.1f} h" if self.seconds >= 3600 else f"{self.seconds / 60:.1f} min"
        return (
            f"estimate: {self.calls:,.0f} calls, {_m(self.prompt_tokens + self.completion_tokens)} tokens, {usd}, "
            f"~{hours} at {CALL_SECONDS:g} s per call and {self.workers} in flight (at most: cached replies "
            "are not paid again)"
        )


#: Configs with at most this many agents x rounds are replayed as they are; above, a debate's history makes each
#: prompt grow with N x T (100 agents x 50 rounds: gigabytes of prompts to build), so calls and tokens are fitted
#: from replays on FIT_GRID: per question they are polynomials of degree <= 2 in N and in T (every agent of every
#: round reads up to N x T earlier arguments), which 3 x 3 points determine.
DIRECT_MAX = 64
FIT_GRID = [(n, t) for n in (5, 10, 15) for t in (1, 2, 3)]  # N a multiple of 5: the roster's shares stay exact


def _replayed(questions: Sequence, configs: Sequence, model: str, moderator, arg_chars: int, seed: int) -> dict:
    """{model: [calls, prompt tokens, completion tokens]} of one replay of `configs` on `questions`."""
    pop = replay_population(model, {}, arg_chars, seed=seed)
    if moderator is not None:
        pop.moderator_spec = moderator
    for cfg in configs:
        for q in questions:
            run_question(q, pop, cfg)
    out: dict = {}
    for (m, _kind), v in _snapshot(pop)["by"].items():
        out[m] = [a + b for a, b in zip(out.get(m, [0, 0, 0]), v)]
    return out


def _fitted(questions: Sequence, cfg, model: str, moderator, arg_chars: int, seed: int) -> dict:
    """_replayed of one large config, from replays on FIT_GRID (see DIRECT_MAX)."""
    import numpy as np

    def basis(n: float, t: float) -> list:
        return [n**i * t**j for i in range(3) for j in range(3)]

    points = [
        _replayed(questions, [cfg.replace(n_agents=n, rounds=t)], model, moderator, arg_chars, seed)
        for n, t in FIT_GRID
    ]
    x = np.array([basis(n, t) for n, t in FIT_GRID], dtype=float)
    at = np.array(basis(cfg.n_agents, cfg.rounds), dtype=float)
    out = {}
    for m in {m for p in points for m in p}:
        y = np.array([p.get(m, [0, 0, 0]) for p in points], dtype=float)
        out[m] = [max(0.0, float(at @ np.linalg.solve(x, y[:, k]))) for k in range(3)]
    return out


def estimate_run(
    questions: Sequence, configs: Sequence, model: str, *, moderator=None, workers: int = 8, sample: int = 12,
    arg_chars: int = DEFAULT_ARG_CHARS, seed: int = 0,
) -> RunEstimate:  # fmt: skip
    """Calls, tokens, dollars and wall time of running `configs` on `questions` with `model` (each AgentSpec's own
    model where it names one; `moderator` the Centralized moderator's AgentSpec): the replay above on up to
    `sample` of the questions (evenly spaced; 3 for a config fitted from smaller ones, see DIRECT_MAX), scaled to all
    of them, priced per model (prices.price_of)."""
    picked = list(questions)[:: max(1, len(questions) // sample)][:sample]
    direct = [c for c in configs if c.n_agents * c.rounds <= DIRECT_MAX]
    parts = [(_replayed(picked, direct, model, moderator, arg_chars, seed), len(questions) / len(picked))]
    few = picked[:3]
    for cfg in configs:
        if cfg not in direct:
            parts.append((_fitted(few, cfg, model, moderator, arg_chars, seed), len(questions) / len(few)))
    by: dict = {}
    for got, scale in parts:
        for m, v in got.items():
            by[m] = [a + b * scale for a, b in zip(by.get(m, [0.0, 0.0, 0.0]), v)]
    calls, pt, ct = (sum(v[k] for v in by.values()) for k in range(3))
    usd: Optional[float] = 0.0
    unpriced = sorted(m for m in by if price_of(m) is None)
    for m, (_n, p_, c_) in by.items():
        price = price_of(m)
        if price is not None and usd is not None:
            usd += price.usd(p_, c_)
    return RunEstimate(calls, pt, ct, None if unpriced else usd, unpriced, calls * CALL_SECONDS / workers, workers)


def _m(x: float) -> str:
    return f"{x / 1e6:,.1f} M" if x >= 1e5 else f"{x:,.0f}"


def _usd(x: Optional[float], free: bool = False) -> str:
    # Every row shows dollars: "$0 (free)" only when known to be free, "unpriced" when there is no price (a
    # server on localhost may be a gateway to a paid provider: never assumed free).
    return "$0 (free)" if free else ("unpriced" if x is None else f"${x:,.2f}")


def _total_line(est: Estimate) -> str:
    """ "total: $X sync, $Y batch" and, when rows are unpriced, "+ N unpriced rows (T tokens)"."""
    t = est.total()
    line = f"  total: ${t.usd:,.2f} sync, ${t.usd_batch:,.2f} batch"
    unpriced = est.unpriced()
    if unpriced:
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in unpriced)
        line += f" + {len(unpriced)} unpriced row{'s' if len(unpriced) != 1 else ''} ({_m(tokens)} tokens)"
    return line


def format_estimate(est: Estimate, max_usd: Optional[float] = None, call_seconds: float = CALL_SECONDS) -> str:
    lines = [
        f"cost estimate for profile {est.profile!r} (no call made; arguments of {est.arg_chars} chars, "
        f"~{est.arg_chars / CHARS_PER_TOKEN:.0f} tokens):"
    ]
    if not est.rows:
        return "\n".join(lines + [f"  {n}" for n in est.notes])
    lines.append(
        f"  {'notebook':<24} {'model':<34} {'questions':>10} {'calls sent':>11} {'prompt tok':>11} "
        f"{'compl. tok':>11} {'USD':>10} {'USD batch':>10}"
    )
    for r in est.rows + [est.total()]:
        lines.append(
            f"  {r.notebook:<24} {r.model[:34]:<34} {r.questions:>10,.0f} {r.calls:>11,.0f} "
            f"{_m(r.prompt_tokens):>11} {_m(r.completion_tokens):>11} {_usd(r.usd, r.free):>10} "
            f"{_usd(r.usd_batch, r.free):>10}"
        )
    unpriced = sorted({r.model for r in est.unpriced()})
    if unpriced:
        lines.append(_total_line(est))
        lines.append(
            f"  unpriced (no price, not known to be free): {', '.join(unpriced)}; to price one, "
            + HOW_TO_PRICE.format(model="MODEL")
        )
    lines += [f"  {n}" for n in est.notes]
    lines += _endpoint_lines(est) + _wall_lines(est, call_seconds)
    for m in sorted({r.model for r in est.rows if r.usd is not None and not r.free}):
        p = price_of(m, est.terms)
        if p is not None:  # a row with dollars has a price
            lines.append(f"  price {describe_price(m, p)}")
    lines.append(
        f"  {token_model()}; arguments are the largest unknown: --arg-chars 1760 (the 400-token cap) "
        "gives an upper bound"
    )
    if max_usd is not None:
        lines.append(f"  MAX_USD ${max_usd:,.2f}: no new paid call is sent once the run's spend would pass it")
        if unpriced:
            lines.append("  MAX_USD is set: a run will not start while a model above is unpriced")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("estimate", help="calls, tokens and dollars of a profile (no network)")
    e.add_argument("--profile", default="paper")
    e.add_argument("--only", nargs="*", help="notebook names")
    e.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as reproduce --set")
    e.add_argument("--arg-chars", type=int, default=DEFAULT_ARG_CHARS, help="modelled argument length (chars)")
    e.add_argument("--per-benchmark", type=int, default=2, help="sample items per benchmark (default 2)")
    e.add_argument("--data-dir", default=None, help="benchmark files for the sample items (default $ACEMAD_DATA_DIR)")
    e.add_argument("--call-seconds", type=float, default=CALL_SECONDS, help="seconds per call for the wall time")
    sub.add_parser("prices", help="the price table with sources")
    a = ap.parse_args(argv)
    if a.cmd == "prices":
        print(price_table())
        return 0
    overrides = parse_sets(a.set)
    est = estimate_profile(
        a.profile, overrides, a.only, per_benchmark=a.per_benchmark, arg_chars=a.arg_chars, data_dir=a.data_dir
    )
    print(format_estimate(est, parse_max_usd(env("ACEMAD_MAX_USD") or None), a.call_seconds))
    print(f"  (estimated in {est.seconds:.1f} s)")
    if est.rows:  # a profile that calls a model: what its questions can show (no power for a synthetic profile)
        print("\n" + format_plan(plan(notebook_params(a.profile, overrides, a.only)[1], est=est)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
