"""What a run will cost before any money is spent, from ONE replay of its configs on a few items against a modelled
endpoint (no socket, no key; bench/_common.py serves the same replies over HTTP) with one modelled response cache, so
identical calls are paid once, as the real cache pays them. `make estimate PROFILE=paper` (= `python -m
acemad_utils.cost estimate`; `prices`: the price table), api.estimate, the command and the pilot all scale it."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from acemad_utils.agents import prices, tokenmodel
from acemad_utils.agents.budget import parse_max_usd
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.agents.client import Completion, GenerateConfig, endpoint_kind
from acemad_utils.agents.llm_agent import LLMPopulation
from acemad_utils.agents.prices import ENV_MODELS, FREE, HOW_TO_PRICE, parse_terms, price_of
from acemad_utils.agents.redact import safe_url
from acemad_utils.agents.tokenmodel import CHARS_PER_TOKEN, prompt_tokens, tokens
from acemad_utils.cost.items import item_counts, sample_items
from acemad_utils.cost.power import format_plan, plan, profile_model
from acemad_utils.data.benchmarks import BENCHMARKS
from acemad_utils.data.settings import env
from acemad_utils.experiments import registry
from acemad_utils.experiments.profiles import endpoints, load_profile, notebook_params, parse_sets
from acemad_utils.protocol.config import ARGUE_MAX_TOKENS
from acemad_utils.protocol.debate import run_question

DEFAULT_ARG_CHARS = 600  # ~136 tokens, the README's reference length; arguments are the largest unknown
MOST_ARG_CHARS = round(ARGUE_MAX_TOKENS * CHARS_PER_TOKEN)  # every argument at its max_tokens: a run's ceiling
FILLER = (
    "Most people pick the familiar answer, but the evidence points elsewhere: the premise hides a common "
    "misconception, and checking each option against what is actually known rules out the popular one. "
)
# Wall time: calls in flight are at most WORKERS, so a run takes ~calls x CALL_SECONDS / WORKERS, never less than
# a provider's rate limit allows.
CALL_SECONDS = 2.0  # a debate call of a GPT-4o-mini-class model: ~136 argument tokens in ~2 s (assumed)
#: OpenAI's published limits for gpt-4o-mini at usage tier 3 (recorded 2025): a common ceiling, check yours.
RATE_LIMIT = (5_000, 4_000_000, "OpenAI usage tier 3, gpt-4o-mini")


def argument_text(n_chars: int, seed: str) -> str:
    """A fixed-length argument, unique per request (so later prompts never collide by chance)."""
    head = f"I argue for option {'ABCD'[int(seed[:2], 16) % 4]} (ref {seed[2:14]}). "
    return (head + FILLER * (n_chars // len(FILLER) + 2))[:n_chars]


def _dist(labels, h: bytes, off: int) -> dict:
    w = [1 + h[(off + i) % len(h)] for i in range(len(labels))]
    return {lab: round(x / sum(w), 4) for lab, x in zip(labels, w)}


def debate_reply(body: dict, arg_chars: int, salt: str = "") -> tuple[str, int, int]:
    """(content, prompt_tokens, completion_tokens) of one chat request body: an argument, or the commitment JSON."""
    msgs = body.get("messages") or []
    # the per-call seed is part of the sample, as for a real model: two agents with one prompt get different replies
    h = hashlib.sha256((json.dumps(msgs, sort_keys=True) + f"|seed={body.get('seed')}" + salt).encode()).digest()
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema")
    if not schema:
        content = argument_text(arg_chars, h.hex())
    else:
        props = schema.get("properties", {})
        labels = list((props.get("self_prob") or {}).get("properties", {})) or ["A", "B"]
        out: dict[str, object] = {"argument": argument_text(arg_chars, h.hex())} if "argument" in props else {}
        out["self_prob"] = _dist(labels, h, 0)
        if "peer_prediction" in props:
            out["peer_prediction"] = _dist(labels, h, 7)
        content = json.dumps(out)
    return content, prompt_tokens(msgs), tokens(content)


class ModelClient:
    """The LLM client's generate() against debate_reply, a dict as the response cache; `tally`: calls "asked" and,
    per model, [calls sent, prompt, completion tokens]."""

    def __init__(self, model: str, kind: str, store: dict, arg_chars: int, tally: dict):
        self.model, self.kind, self.store, self.arg_chars, self.tally = model, kind, store, arg_chars, tally
        self._lock = threading.Lock()

    def generate(self, messages, config=None, *, schema=None, scope: str = "", model=None, deadline=None):
        model, params = model or self.model, (config or GenerateConfig()).params()
        fmt, mode = (None, None) if schema is None else ({"schema": schema}, "json_schema")
        key = ResponseCache.key(model=model, kind=self.kind, params=params, messages=[*messages], fmt=fmt, scope=scope)
        with self._lock:
            self.tally["asked"] = self.tally.get("asked", 0) + 1
            if (hit := self.store.get(key)) is not None:
                return Completion(text=hit, mode=mode, cached=True)
        body = {"messages": list(messages), "seed": params.get("seed"), "response_format": fmt}
        text, pt, ct = debate_reply(body, self.arg_chars)
        with self._lock:
            self.store[key] = text
            m = self.tally.setdefault(model, [0, 0, 0])
            m[0], m[1], m[2] = m[0] + 1, m[1] + pt, m[2] + ct
        return Completion(text=text, mode=mode, prompt_tokens=pt, completion_tokens=ct, network_calls=1)


def replay_population(model: str, store: dict, arg_chars: int = DEFAULT_ARG_CHARS, calls: str = "two", *,
                      seed: int = 0, base_url: Optional[str] = None, tally: Optional[dict] = None, **kw):  # fmt: skip
    """An LLMPopulation whose clients are ModelClients (kind from the URL, as for the real client)."""
    counts: dict = {} if tally is None else tally

    class ReplayPopulation(LLMPopulation):
        def client(self, url):  # never an LLMClient: no SDK, no key, no socket
            key = url or self.base_url
            with self._lock:
                if key not in self._clients:
                    mc = ModelClient(str(self.model), endpoint_kind(key), store, arg_chars, counts)
                    self._clients[key] = mc  # type: ignore[assignment]
                return self._clients[key]

    return ReplayPopulation(model, base_url, seed=seed, calls=calls, preflight=False, calls_via="sync", **kw)


def replay(configs: Sequence, questions: Sequence, P: dict, *, store: Optional[dict] = None,
           arg_chars: int = DEFAULT_ARG_CHARS, model: Optional[str] = None, base_url: Optional[str] = None,
           **pop_kw) -> dict:  # fmt: skip
    """{"agent_calls": calls asked, "by": {model: [calls sent, prompt, completion tokens]}} per question; `store`
    the modelled response cache (shared across calls of replay: paid once)."""
    tally: dict = {}
    url = base_url or P.get("BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None
    pop = replay_population(model or profile_model(P), {} if store is None else store, arg_chars,
                            P.get("CALLS", "two"), seed=P.get("SEED", 0), base_url=url, tally=tally,
                            **pop_kw)  # fmt: skip
    for cfg in configs:
        for q in questions:
            run_question(q, pop, cfg)
    n = len(questions)
    return {"agent_calls": tally.pop("asked", 0) / n, "by": {m: [x / n for x in v] for m, v in tally.items()}}


def dollars(by: dict, terms: Optional[dict] = None, free: bool = False) -> Optional[float]:
    """USD of {model: [calls, prompt, completion tokens]}; None when a model is unpriced."""
    priced = [FREE if free else price_of(m, terms) for m in by]
    if None in priced:
        return None
    return float(sum(p.usd(v[1], v[2]) for p, v in zip(priced, by.values()) if p is not None))


# ----------------------------------------------------------------------------- a profile, per notebook
@dataclass
class Row:
    notebook: str
    model: str
    questions: float = 0.0  # questions x configs run (records)
    agent_calls: float = 0.0  # calls the agents ask for (cache hits included)
    calls: float = 0.0  # calls sent (paid)
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    usd: Optional[float] = 0.0  # None: unpriced (no price and not known to be free)
    usd_batch: Optional[float] = 0.0
    free: bool = False  # the project's own llama.cpp server, or `free: true` in the profile


@dataclass
class Estimate:
    profile: str
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    arg_chars: int = DEFAULT_ARG_CHARS
    seconds: float = 0.0
    terms: dict = field(default_factory=dict)  # the profile's models: terms the rows were priced with
    endpoints: list = field(default_factory=list)  # profiles.Endpoint: what the reproduce driver checks first
    workers: int = 0  # the profile's WORKERS: the wall time's divisor

    def total(self, paid_only: bool = False) -> Row:
        """Sum of the rows (dollars of the priced ones); paid_only: priced rows that are not free."""
        t = Row("total", "")
        for r in (r for r in self.rows if not (paid_only and (r.free or r.usd is None))):
            for f in dataclasses.fields(Row)[2:-1]:
                setattr(t, f.name, (getattr(t, f.name) or 0.0) + (getattr(r, f.name) or 0.0))
        return t

    def unpriced(self) -> list[Row]:
        return [r for r in self.rows if r.usd is None]


def estimate_profile(profile: str, overrides: Optional[dict] = None, only: Optional[Sequence[str]] = None, *,
                     per_benchmark: int = 2, arg_chars: int = DEFAULT_ARG_CHARS,
                     data_dir: Optional[str] = None) -> Estimate:  # fmt: skip
    """The estimate of a profile as reproduce runs it, priced with its `models:` terms over the price table."""
    name, params = notebook_params(profile, overrides, only)
    terms = parse_terms(load_profile(profile, overrides).get("models"))
    terms = {} if env(ENV_MODELS) else terms  # an ACEMAD_MODELS already set wins, as for the kernels
    t0 = time.perf_counter()
    llm = {nb: P for nb, P in params.items() if P.get("BACKEND", "sim") != "sim"}
    est = Estimate(name, arg_chars=arg_chars, terms=terms, endpoints=endpoints(params),
                   workers=max((P.get("WORKERS") or 0 for P in llm.values()), default=0))  # fmt: skip
    stages = [(st, P) for nb, P in llm.items() for st in registry.runs(nb, P)]
    if not stages:
        est.notes.append("no LLM calls: every notebook uses the synthetic population (BACKEND sim)")
        return est
    source = stages[0][1].get("SOURCE", "benchmarks")
    if source == "demo":
        stages = [(dataclasses.replace(st, benchmarks=["demo"]), P) for st, P in stages]
    benches = sorted({b for st, _ in stages for b in st.benchmarks or ()}, key=lambda b: (b not in BENCHMARKS, b))
    items, src = sample_items(benches, per_benchmark, source, data_dir)
    est.notes.append(f"items replayed: {per_benchmark} per benchmark, {src}")
    store: dict = {}  # one cache for the whole profile, as outputs/cache/llm.sqlite
    rows: dict = {}  # (notebook, model) -> Row, in notebook order
    subset_src = set()
    for st, P in stages:
        for b in (b for b in st.benchmarks or () if items.get(b)):
            outside = st.on == "input" and st.name != "subsets"  # Table 6: pays only items outside the subsets
            m0 = st.model or profile_model(P)
            per = replay(st.configs, items[b], P, store={} if outside else store, arg_chars=arg_chars, model=m0,
                         base_url=st.base_url)  # fmt: skip
            full, sub, why = item_counts(b, P)
            n = full if st.on == "input" else sub
            n = n if st.cap is None else min(n, st.cap)
            scale = n * (1 - sub / full) if outside and full else n  # the items whose calls are paid
            if st.on == "subset":
                subset_src.add(why)
            for m, v in [*per["by"].items(), (m0, None)]:
                r = rows.setdefault((st.notebook, m), Row(st.notebook, m, free=True))
                r.free = r.free and P.get("BACKEND") == "local"  # free only on the project's own server
                if v is None:
                    r.questions += n * len(st.configs)
                    r.agent_calls += per["agent_calls"] * n
                else:
                    r.calls, r.prompt_tokens, r.completion_tokens = (
                        x + y * scale for x, y in zip((r.calls, r.prompt_tokens, r.completion_tokens), v)
                    )
    for r in rows.values():
        p = FREE if r.free else price_of(r.model, terms)
        r.free = p is not None and p.free
        r.usd, r.usd_batch = (None, None) if p is None else (p.usd(r.prompt_tokens, r.completion_tokens, 0, b)
                                                             for b in (False, True))  # fmt: skip
    est.rows = [r for r in rows.values() if r.questions or r.calls]
    est.notes.append("subset sizes: " + ", ".join(sorted(subset_src)) if subset_src else "no subset runs")
    est.seconds = time.perf_counter() - t0
    return est


def wall_hours(calls: float, tokens: float, workers: int, call_seconds: float = CALL_SECONDS) -> tuple[float, float]:
    """(hours at `workers` calls in flight, the floor RATE_LIMIT puts under any WORKERS) for `calls` sent."""
    rpm, tpm, _ = RATE_LIMIT
    return calls * call_seconds / max(workers, 1) / 3600, max(calls / rpm, tokens / tpm) / 60


# ----------------------------------------------------------------------------- one run of your own questions
@dataclass
class RunEstimate:
    """What running configs on questions will send (replies already cached are not paid again), at DEFAULT_ARG_CHARS
    per argument; most_usd: at MOST_ARG_CHARS, the most the run can cost (None: unpriced, or not computed)."""

    calls: float
    prompt_tokens: float
    completion_tokens: float
    usd: Optional[float]  # None: some model is unpriced
    unpriced: list
    seconds: float  # wall time at CALL_SECONDS with `workers` calls in flight
    workers: int
    most_usd: Optional[float] = None

    def line(self) -> str:
        usd = f"${self.usd:,.2f}" if self.usd is not None else f"unpriced ({', '.join(self.unpriced)}; no price)"
        span = lambda s: f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"
        # a single llama.cpp or Ollama server answers one call at a time: 8 in flight wait in its queue
        one = f", ~{span(self.calls * CALL_SECONDS)} one at a time" if self.workers > 1 else ""
        most = "" if self.most_usd is None else (f"about ${self.most_usd:,.2f} if every argument runs to its "
                                                  f"{ARGUE_MAX_TOKENS}-token cap, ")  # fmt: skip
        usd += "" if self.usd is None else f" (arguments of ~{DEFAULT_ARG_CHARS / CHARS_PER_TOKEN:.0f} tokens)"
        return (f"estimate: {self.calls:,.0f} calls, {_m(self.prompt_tokens + self.completion_tokens)} tokens, {usd}, "
                f"{most}~{span(self.seconds)} at "
                f"{CALL_SECONDS:g} s per call and {self.workers} in flight{one} (cached replies are not paid "
                "again)")  # fmt: skip


#: Above this many agents x rounds a debate's prompts grow with N x T (100 x 50: gigabytes to build), so calls and
#: tokens are fitted from replays on FIT_GRID: per question they are polynomials of degree <= 2 in N and in T.
DIRECT_MAX = 64
FIT_GRID = [(n, t) for n in (5, 10, 15) for t in (1, 2, 3)]  # N a multiple of 5: the roster's shares stay exact


def estimate_run(questions: Sequence, configs: Sequence, model: str, *, moderator=None, workers: int = 8,
                 sample: int = 12, seed: int = 0, chars: Optional[int] = DEFAULT_ARG_CHARS) -> RunEstimate:  # fmt: skip
    """`replay` of `configs` on up to `sample` evenly spaced questions (3 per fitted config), scaled to all, with
    arguments of `chars`; and again at MOST_ARG_CHARS for most_usd (chars None: that replay itself)."""
    picked = list(questions)[:: max(1, len(questions) // sample)][:sample]
    kw = {} if moderator is None else {"moderator_spec": moderator}
    P = {"MODEL": model, "SEED": seed, "BASE_URL": None}
    per_item = lambda cfgs, qs: replay(cfgs, qs, P, arg_chars=chars or MOST_ARG_CHARS, **kw)["by"]
    direct = [c for c in configs if c.n_agents * c.rounds <= DIRECT_MAX]
    parts = [per_item(direct, picked)] if direct else []
    basis = lambda n, t: [n**i * t**j for i in range(3) for j in range(3)]
    x = np.array([basis(n, t) for n, t in FIT_GRID], float)
    for c in (c for c in configs if c not in direct):
        pts = [per_item([c.replace(n_agents=n, rounds=t)], picked[:3]) for n, t in FIT_GRID]
        y = {m: np.array([p.get(m, [0, 0, 0]) for p in pts], float) for p in pts for m in p}
        at = np.array(basis(c.n_agents, c.rounds), float)
        parts.append({m: [max(0.0, float(at @ np.linalg.solve(x, v[:, k]))) for k in range(3)] for m, v in y.items()})
    by: dict = {}
    for got in parts:
        for m, v in got.items():
            by[m] = [a + b * len(questions) for a, b in zip(by.get(m, [0.0, 0.0, 0.0]), v)]
    calls, pt, ct = (sum(v[k] for v in by.values()) for k in range(3))
    unpriced = sorted(m for m in by if price_of(m) is None)
    most = chars and estimate_run(questions, configs, model, moderator=moderator, sample=sample, seed=seed,
                                  chars=None).usd  # fmt: skip
    return RunEstimate(calls, pt, ct, dollars(by), unpriced, calls * CALL_SECONDS / workers, workers, most or None)


# ----------------------------------------------------------------------------- the printout
def _m(x: float) -> str:
    return f"{x / 1e6:,.1f} M" if x >= 1e5 else f"{x:,.0f}"


def _usd(x: Optional[float], free: bool = False) -> str:
    return "$0 (free)" if free else ("unpriced" if x is None else f"${x:,.2f}")


def format_estimate(est: Estimate, max_usd: Optional[float] = None, call_seconds: float = CALL_SECONDS) -> str:
    lines = [f"cost estimate for profile {est.profile!r} (no call made; arguments of {est.arg_chars} chars, "
             f"~{est.arg_chars / CHARS_PER_TOKEN:.0f} tokens):"]  # fmt: skip
    if not est.rows:
        return "\n".join(lines + [f"  {n}" for n in est.notes])
    lines.append(f"  {'notebook':<24} {'model':<34} {'questions':>10} {'calls sent':>11} {'prompt tok':>11} "
                 f"{'compl. tok':>11} {'USD':>10} {'USD batch':>10}")  # fmt: skip
    t = est.total()
    lines += [f"  {r.notebook:<24} {r.model[:34]:<34} {r.questions:>10,.0f} {r.calls:>11,.0f} "
              f"{_m(r.prompt_tokens):>11} {_m(r.completion_tokens):>11} {_usd(r.usd, r.free):>10} "
              f"{_usd(r.usd_batch, r.free):>10}"
              for r in [*est.rows, t]]  # fmt: skip
    if unpriced := est.unpriced():
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in unpriced)
        lines.append(f"  total: ${t.usd:,.2f} sync, ${t.usd_batch:,.2f} batch + {len(unpriced)} unpriced "
                     f"row{'s' * (len(unpriced) != 1)} ({_m(tokens)} tokens)")  # fmt: skip
        lines.append(f"  unpriced (no price, not known to be free): {', '.join(sorted({r.model for r in unpriced}))}; "
                     "to price one, " + HOW_TO_PRICE.format(model="MODEL"))  # fmt: skip
    lines += [f"  {n}" for n in est.notes]
    for e in est.endpoints:  # each endpoint beside its price (the URL without credentials)
        p = price_of(e.model, est.terms)
        price = "unpriced" if p is None else "free" if p.free else f"${p.input:g}/M input, ${p.output:g}/M output"
        lines.append(f"  endpoint {e.setting}: {e.model} at {safe_url(e.url or None)} ({price})")
    if est.endpoints:
        lines.append("  reproduce checks every endpoint above (key, server, model) before its first notebook")
    if est.workers and t.calls:
        tok = t.prompt_tokens + t.completion_tokens
        at = {w: wall_hours(t.calls, tok, w, call_seconds)[0] for w in (est.workers, 4 * est.workers, 256) if w <= 256}
        rpm, tpm, whose = RATE_LIMIT
        lines.append(
            f"  wall time at ~{call_seconds:g} s per call (--call-seconds), calls in flight = WORKERS: "
            + ", ".join(f"WORKERS={w} ~{h:,.1f} h" for w, h in at.items())
            + f" (--set WORKERS=N); a rate limit of {rpm:,} requests and {tpm / 1e6:g}M tokens per minute ({whose}; "
            f"check yours) puts a floor of ~{wall_hours(t.calls, tok, est.workers, call_seconds)[1]:,.1f} h under "
            "any WORKERS, and the Batch API takes up to 24 h per pass"
        )
    for m in sorted({r.model for r in est.rows if r.usd is not None and not r.free}):
        if (p := price_of(m, est.terms)) is not None:
            lines.append(f"  price {prices.describe(m, p)}")
    lines.append(f"  {tokenmodel.describe()}; arguments are the largest unknown: --arg-chars 1760 (the 400-token cap) "
                 "gives an upper bound")  # fmt: skip
    if max_usd is not None:
        lines.append(f"  MAX_USD ${max_usd:,.2f}: no new paid call is sent once the run's spend would pass it")
        if unpriced:
            lines.append("  MAX_USD is set: a run will not start while a model above is unpriced")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # the first paragraph: whole sentences
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
        print(prices.table())
        return 0
    overrides = parse_sets(a.set)
    est = estimate_profile(a.profile, overrides, a.only, per_benchmark=a.per_benchmark, arg_chars=a.arg_chars,
                           data_dir=a.data_dir)  # fmt: skip
    print(format_estimate(est, parse_max_usd(env("ACEMAD_MAX_USD") or None), a.call_seconds))
    print(f"  (estimated in {est.seconds:.1f} s)")
    if est.rows:  # what the questions can show (no power for a synthetic profile)
        print("\n" + format_plan(plan(notebook_params(a.profile, overrides, a.only)[1], est=est)))
    return 0
