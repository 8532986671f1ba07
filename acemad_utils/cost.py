"""What a profile will cost, before any money is spent: calls, tokens and dollars per notebook, no network.

    python -m acemad_utils.cost estimate --profile paper          # = make estimate PROFILE=paper
    python -m acemad_utils.cost estimate --profile paper --arg-chars 1760 --per-benchmark 3
    python -m acemad_utils.cost prices                            # the price table with its sources

    from acemad_utils.cost import estimate_profile, format_estimate
    est = estimate_profile("paper")            # Estimate: rows per notebook + total
    print(format_estimate(est))

How. The profile's notebooks are replayed exactly as `make reproduce` runs them (the configs each notebook
builds from its parameters, `plan()` below, in notebook order, with ONE shared response cache as
outputs/cache/llm.sqlite is shared) on a few sample items per benchmark, against an in-process model of
the endpoint (`ModelClient`): no socket, no SDK client, no key needed. Its replies are deterministic
functions of the request (arguments of `arg_chars` characters, JSON commitments), and its token counts come
from the token model (acemad_utils.tokenmodel). Identical calls (the same prompt in the same scope: round-1
arguments every debate method asks, AceMAD T=2 as a prefix of T=5, configs repeated across notebooks) are
counted once, as the real cache pays them once. Per-item figures are scaled by the item counts:
  - the subset construction (notebook 01) runs on every input item: the published test-set sizes
    (data.PUBLISHED_SIZES) capped by N_ITEMS;
  - experiments run on the challenging subsets: their real size when they are already built, else the sizes
    inferred from the paper's Table 2 (PAPER_SUBSETS: every printed accuracy is k/n with one n per
    benchmark), or the paper's kept share of the input items when N_ITEMS caps them; then capped by N_MAX.
Sample items: real benchmark items at length quantiles when ACEMAD_DATA_DIR names the files (read locally,
never from the hub), else distinct demo questions per benchmark (the output says which).

Uncertainty: arguments are the largest unknown (real models write 70 to 400 tokens); `--arg-chars` prices
another length (1760 = the 400-token argue cap, an upper bound). Prices: acemad_utils/prices.py (source and
date per entry; check them). The estimate is printed by `reproduce` before the first notebook of a paid
(`BACKEND: openai`) profile, and bench/cost.py uses the same functions, so the two cannot drift.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from . import data as D
from .prices import PRICES, price_of
from .prices import table as price_table
from .tokenmodel import CHARS_PER_TOKEN, MSG_OVERHEAD, PRIME, prompt_tokens, tokens  # noqa: F401 (re-exported)
from .tokenmodel import describe as token_model

BENCHMARKS = ("truthfulqa", "arc_challenge", "bbh", "logiqa", "medqa", "mmlu_pro")
#: Challenging-subset sizes inferred from the paper's Table 2 (every printed accuracy is k/n with this n).
PAPER_SUBSETS = {"truthfulqa": 223, "arc_challenge": 108, "bbh": 290, "logiqa": 320, "medqa": 310, "mmlu_pro": 654}
#: Full test sets (the subset construction runs on all of them): data.PUBLISHED_SIZES.
FULL_SIZES = {"truthfulqa": 817, "arc_challenge": 1172, "logiqa": 651, "medqa": 1273, "mmlu_pro": 1101,
              "bbh": sum(v for k, v in D.PUBLISHED_SIZES.items() if k.startswith("bbh/"))}
#: Share of input items the paper's subsets kept, for item counts capped by N_ITEMS (and for other sources).
KEPT_SHARE = {b: PAPER_SUBSETS[b] / FULL_SIZES[b] for b in BENCHMARKS}
OVERALL_SHARE = sum(PAPER_SUBSETS.values()) / sum(FULL_SIZES.values())
DEFAULT_ARG_CHARS = 600  # ~136 tokens, the README's reference length


# ----------------------------------------------------------------------------- the modelled endpoint
FILLER = ("Most people pick the familiar answer, but the evidence points elsewhere: the premise hides a common "
          "misconception, and checking each option against what is actually known rules out the popular one. ")


def argument_text(n_chars: int, seed: str) -> str:
    """A fixed-length argument naming a stance; the text is unique per request (a reference from the seed), so
    two different requests never produce the same text (which would make later prompts collide by chance)."""
    head = f"I argue for option {'ABCD'[int(seed[:2], 16) % 4]} (ref {seed[2:14]}). "
    return (head + FILLER * (n_chars // len(FILLER) + 2))[:n_chars]


def _dist(labels, h: bytes, off: int) -> dict:
    w = [1 + h[(off + i) % len(h)] for i in range(len(labels))]
    s = sum(w)
    return {lab: round(x / s, 4) for lab, x in zip(labels, w)}


def debate_reply(body: dict, arg_chars: int, salt: str = "") -> tuple[str, int, int]:
    """(content, prompt_tokens, completion_tokens) for one chat request body; `salt` varies the sample.
    Free text (argue, moderator) gets an `arg_chars` argument; a structured call gets JSON with self_prob /
    peer_prediction over the schema's labels (+ an argument when the schema asks for one)."""
    msgs = body.get("messages") or []
    # The per-call seed (derived by the library from the call's scope) is part of the sample, as for a real
    # model: two agents sending the same prompt get different replies.
    h = hashlib.sha256((json.dumps(msgs, sort_keys=True) + f"|seed={body.get('seed')}" + salt).encode()).digest()
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema")
    if not schema:
        content = argument_text(arg_chars, h.hex())
    else:
        props = schema.get("properties", {})
        labels = list((props.get("self_prob") or {}).get("properties", {})) or ["A", "B"]
        out = {}
        if "argument" in props:
            out["argument"] = argument_text(arg_chars, h.hex())
        out["self_prob"] = _dist(labels, h, 0)
        if "peer_prediction" in props:
            out["peer_prediction"] = _dist(labels, h, 7)
        content = json.dumps(out)
    return content, prompt_tokens(msgs), tokens(content)


class ModelClient:
    """Stands in for llm.LLMClient in a replay: same generate() signature and cache-key semantics, replies from
    debate_reply, a dict as the shared response cache. It never opens a socket or builds an SDK client.
    `log` (a list) receives (scope, model, messages, prompt_tokens) of every paid (non-cached) call."""

    def __init__(self, model: str, kind: str, store: dict, arg_chars: int, log: Optional[list] = None):
        self.model, self.kind, self.store, self.arg_chars, self.log = model, kind, store, arg_chars, log
        self._lock = threading.Lock()
        self._stats = dict.fromkeys(("calls", "network_calls", "cache_hits", "prompt_tokens", "completion_tokens"), 0)
        self.by_model: dict[str, list[int]] = {}  # model -> [network calls, prompt, completion]

    def generate(self, messages, config=None, *, schema=None, scope: str = "", model=None):
        from .cache import ResponseCache
        from .llm import Completion, GenerateConfig

        model = model or self.model
        params = (config or GenerateConfig()).params()
        key = ResponseCache.key(model=model, kind=self.kind, params=params, messages=list(messages),
                                fmt=None if schema is None else {"schema": schema}, scope=scope)
        with self._lock:
            self._stats["calls"] += 1
            hit = self.store.get(key)
            if hit is not None:
                self._stats["cache_hits"] += 1
                return Completion(text=hit, mode="json_schema" if schema else None, cached=True)
        body = {"messages": list(messages), "seed": params.get("seed")}
        if schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"schema": schema}}
        text, pt, ct = debate_reply(body, self.arg_chars)
        with self._lock:
            self.store[key] = text
            for k, v in (("network_calls", 1), ("prompt_tokens", pt), ("completion_tokens", ct)):
                self._stats[k] += v
            m = self.by_model.setdefault(model, [0, 0, 0])
            m[0], m[1], m[2] = m[0] + 1, m[1] + pt, m[2] + ct
            if self.log is not None:
                self.log.append((scope, model, list(messages), pt))
        return Completion(text=text, mode="json_schema" if schema else None, prompt_tokens=pt, completion_tokens=ct,
                          network_calls=1)

    def stats(self) -> dict:
        with self._lock:
            return {**self._stats, "cost_usd": None}

    def describe(self) -> dict:
        return {"model": self.model, "endpoint": self.kind, "structured_output": "json_schema"}


def replay_population(model: str, store: dict, arg_chars: int = DEFAULT_ARG_CHARS, calls: str = "two",
                      seed: int = 0, base_url: Optional[str] = None, log: Optional[list] = None):
    """An agents.LLMPopulation whose clients are ModelClients (kind from base_url as for the real client)."""
    from .agents import LLMPopulation
    from .llm import endpoint_kind

    class ReplayPopulation(LLMPopulation):
        def client(self, url):  # never an LLMClient: no SDK, no key, no socket
            key = url or self.base_url
            with self._lock:
                if key not in self._clients:
                    self._clients[key] = ModelClient(self.model, endpoint_kind(key), store, arg_chars, log)
                return self._clients[key]

    return ReplayPopulation(model=model, base_url=base_url, seed=seed, calls=calls, preflight=False, calls_via="sync")


# ----------------------------------------------------------------------------- what each notebook runs
@dataclass
class Stage:
    """One notebook's runs: configs over `on` items ("input": every input item, "subset": the challenging
    subsets) of `benchmarks`, against `model` at `base_url` (the profile's endpoint when None)."""
    notebook: str
    configs: list
    on: str = "subset"
    benchmarks: Sequence[str] = BENCHMARKS
    model: Optional[str] = None
    base_url: Optional[str] = None
    cap: Optional[int] = None  # questions per benchmark (N_MAX / FULL_N_MAX)


def plan(nb: str, P: dict) -> list[Stage]:
    """The runs notebook `nb` makes with parameters P (mirrors the notebooks' code; tests/test_cost.py checks
    the config hashes of 02-06 against the notebooks' source)."""
    from .config import DebateConfig
    from .experiments import PAPER_TABLES, table_configs
    from .schema import AgentSpec
    from .subsets import subset_config

    seed, n_max = P.get("SEED", 0), P.get("N_MAX")
    benches = list(P.get("BENCHMARKS") or BENCHMARKS)
    if nb.startswith("01_"):
        return [Stage(nb, [subset_config(seed=seed)], on="input", benchmarks=benches)]
    if nb.startswith("02_"):
        ns = sorted(set(P.get("N_VALUES", [1, 2, 3, 5])) | {P.get("N_TABLE", 5)})
        cfgs = [DebateConfig(method=m, n_agents=n, rounds=3, seed=seed) for m in ("majority", "decentralized",
                "centralized", "sparse") for n in ns if not (m == "centralized" and n < 2)]
        return [Stage(nb, cfgs, benchmarks=benches, cap=n_max)]
    if nb.startswith("03_"):
        eta = P.get("ETA", 2.0)
        cfgs = [DebateConfig(method=m, seed=seed) for m in ("single", "majority", "decentralized", "centralized", "sparse")]
        cfgs += [DebateConfig(method="decentralized", roster="acemad", seed=seed)]
        cfgs += [DebateConfig(method="acemad", rounds=t, eta=eta, seed=seed) for t in P.get("ROUNDS", [2, 3, 5])]
        return [Stage(nb, cfgs, benchmarks=benches, cap=n_max)]
    if nb.startswith("04_"):
        variants = {"AceMAD (Different Persona)": AgentSpec("Skeptic", 0.6),
                    "AceMAD (Different Thinking System)": AgentSpec("Generalist", 0.6, thinking="slow")}
        if P.get("SECOND_MODEL"):
            variants["AceMAD (Different LLMs)"] = AgentSpec("Generalist", 0.6, model=P["SECOND_MODEL"],
                                                            base_url=P.get("SECOND_BASE_URL") or None)
        cfgs = [DebateConfig(method="decentralized", seed=seed)] + [
            DebateConfig(method="acemad", truth_holder=s, seed=seed, name=n) for n, s in variants.items()]
        return [Stage(nb, cfgs, benchmarks=benches, cap=n_max)]
    if nb.startswith("05_"):
        return [Stage(nb, [DebateConfig(method="acemad", rounds=3, seed=seed)], benchmarks=benches, cap=n_max)]
    if nb.startswith("06_"):
        cfgs = [DebateConfig(method=m, n_agents=n, rounds=3, seed=seed) for m in ("acemad", "majority")
                for n in P.get("N_VALUES", [1, 2, 3, 5, 7, 10, 12, 15])]
        return [Stage(nb, cfgs, benchmarks=benches, cap=n_max)]
    if nb.startswith("07_") and P.get("BACKEND") != "sim":
        out = []
        for e in P.get("OTHER_MODELS") or []:
            spec = PAPER_TABLES[e["table"]]
            base, ace = table_configs(e["table"], seed=seed, eta=P.get("ETA", 2.0))
            out.append(Stage(f"{nb} ({e['model']})", base + ace, on="input" if spec["full"] else "subset",
                             benchmarks=[b for b in spec["benchmarks"] if b in benches or spec["full"]],
                             model=e["model"], base_url=e.get("base_url") or None,
                             cap=P.get("FULL_N_MAX") if spec["full"] else n_max))
        return out
    return []


# ----------------------------------------------------------------------------- item counts and samples
def _subset_on_disk(b: str, P: dict) -> Optional[int]:
    """Size of an already-built challenging subset of b for the profile's subset model, if any."""
    try:
        from . import subsets

        model = P.get("SUBSET_MODEL") or P.get("MODEL") or ""
        if not model:
            return None
        path = subsets.subsets_root() / subsets.model_slug(model, synthetic=False) / f"{b}.jsonl"
        if path.exists():
            return sum(1 for line in path.read_text().splitlines() if line.strip())
    except Exception:  # no subset machinery or an unreadable file: fall back to the inferred sizes
        return None
    return None


def item_counts(b: str, P: dict) -> tuple[int, int, str]:
    """(input items, challenging-subset items, where the subset size comes from) of benchmark b."""
    from .experiments import SMOKE
    from .paths import smoke

    n_items = P.get("N_ITEMS")
    source = P.get("SOURCE", "benchmarks")
    backend = P.get("BACKEND", "openai")
    if source == "demo":
        full = 24 if n_items is None else min(24, n_items)
    elif source == "synthetic":
        full = n_items or 600
    else:
        full = FULL_SIZES.get(b, 0) if n_items is None else min(FULL_SIZES.get(b, n_items), n_items)
    if smoke():
        full = min(full, SMOKE[backend][0])
    disk = _subset_on_disk(b, P) if source == "benchmarks" else None
    if disk is not None:
        sub, why = min(disk, full), "built subset"
    elif source == "benchmarks" and full == FULL_SIZES.get(b):
        sub, why = PAPER_SUBSETS[b], "paper Table 2"
    else:
        sub, why = int(round(full * KEPT_SHARE.get(b, OVERALL_SHARE))), "paper's kept share"
    return full, sub, why


def sample_items(benchmarks: Sequence[str], per_benchmark: int, source: str = "benchmarks",
                 data_dir: Optional[str] = None) -> tuple[dict, str]:
    """A few items per benchmark: real ones at length quantiles when the files are local (never the hub),
    else distinct demo questions per benchmark. Returns ({benchmark: [Question]}, where they came from)."""
    d = data_dir or os.environ.get(D.ENV_VAR) or ""
    out, used_real = {}, False
    demo = D.load_demo()
    for i, b in enumerate(benchmarks):
        qs = []
        if source == "benchmarks" and d and Path(d).is_dir():
            try:
                qs = D.load(b, data_dir=d)
            except Exception:  # a missing file: the demo set stands in, and the output says so
                qs = []
        if source == "synthetic":
            from .experiments import SYNTHETIC_K
            from .sim import make_items
            out[b] = make_items(per_benchmark, k=SYNTHETIC_K.get(b, 4), seed=i, benchmark=f"synthetic-{b}")
            continue
        if not qs:
            k = max(1, min(per_benchmark, len(demo) // max(1, len(benchmarks))))
            out[b] = [demo[(i * k + j) % len(demo)] for j in range(k)]  # distinct per benchmark: no false cache hits
            continue
        used_real = True
        length = np.array([len(q.question) + len(q.options_str()) for q in qs])
        order = np.argsort(length, kind="stable")
        out[b] = [qs[order[int((j + 0.5) / per_benchmark * (len(qs) - 1))]] for j in range(per_benchmark)]
    src = ("synthetic items" if source == "synthetic" else
           f"real items from {d}" if used_real else "demo questions (no local benchmark files: set ACEMAD_DATA_DIR)")
    return out, src


def header_chars(q) -> int:
    return len(q.question) + len(q.options_str())


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
    usd: Optional[float] = 0.0
    usd_batch: Optional[float] = 0.0
    free: bool = False  # a local endpoint
    cached_tokens: float = 0.0  # prompt tokens OpenAI's prompt cache could serve (estimate(prefix=True) only)
    usd_cached: Optional[float] = 0.0  # usd with those billed at the cached-input rate


@dataclass
class Estimate:
    profile: str
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    arg_chars: int = DEFAULT_ARG_CHARS
    seconds: float = 0.0

    def total(self, paid_only: bool = False) -> Row:
        """Sum of the rows (paid_only: the rows of priced, non-local endpoints)."""
        t = Row("total", "")
        for r in self.rows:
            if paid_only and (r.free or r.usd is None):
                continue
            t.questions += r.questions
            for k in ("agent_calls", "calls", "prompt_tokens", "completion_tokens", "cached_tokens"):
                setattr(t, k, getattr(t, k) + getattr(r, k))
            for k in ("usd", "usd_batch", "usd_cached"):
                a, b = getattr(t, k), getattr(r, k)
                setattr(t, k, None if a is None or b is None else a + b)
        return t


def _price(model: str, kind: str, pt: float, ct: float, batch: bool) -> Optional[float]:
    if kind == "local-llama.cpp":
        return 0.0
    p = price_of(model)
    return None if p is None else p.usd(pt, ct, 0, batch)


def replay(stages: Sequence[Stage], items: dict, P: dict, arg_chars: int = DEFAULT_ARG_CHARS,
           log: Optional[list] = None, store: Optional[dict] = None, pops: Optional[dict] = None
           ) -> list[tuple[Stage, str, dict]]:
    """Run every stage's configs on the sample items with one shared modelled cache. Returns, per stage and
    benchmark, the mean per item of: agent calls, and network calls / prompt / completion tokens per model."""
    from .protocols import run_question

    store = {} if store is None else store
    pops = {} if pops is None else pops  # one population per endpoint; the store is what calls share
    model0 = P.get("MODEL") or "gpt-4o-mini"
    out = []
    for st in stages:
        m = st.model or model0
        key = (m, st.base_url)
        if key not in pops:
            pops[key] = replay_population(m, store, arg_chars, P.get("CALLS", "two"), P.get("SEED", 0),
                                          base_url=st.base_url or P.get("BASE_URL") or os.environ.get("OPENAI_BASE_URL")
                                          or None, log=log)
        pop = pops[key]
        for b in st.benchmarks:
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
    by, calls = {}, 0
    for c in list(pop._clients.values()):
        calls += c.stats()["calls"]
        for m, v in c.by_model.items():
            e = by.setdefault((m, c.kind), [0, 0, 0])
            for i in range(3):
                e[i] += v[i]
    return {"calls": calls, "by": by}


def _declared(nb_path: Path) -> dict:
    import papermill as pm

    out = {}
    for k, v in pm.inspect_notebook(str(nb_path)).items():
        try:
            out[k] = ast.literal_eval(v["default"])
        except (ValueError, SyntaxError):
            pass
    return out


def notebook_params(profile: str, overrides: Optional[dict] = None, only: Optional[Sequence[str]] = None) -> tuple[str, dict]:
    """(profile name, {notebook: every parameter it will get}) as reproduce would pass them (checked the same way)."""
    from . import reproduce as R

    prof = R.load_profile(profile, overrides)
    nbs = R.notebooks()
    out = {}
    for nb, path in nbs.items():
        if only and nb not in only:
            continue
        defaults = _declared(path)
        out[nb] = {**defaults, **R._params(prof, nb, {k: None for k in defaults})}
    return prof.get("profile", profile), out


def estimate(params_by_nb: dict, profile: str = "", per_benchmark: int = 2, arg_chars: int = DEFAULT_ARG_CHARS,
             data_dir: Optional[str] = None, prefix: bool = False) -> Estimate:
    """The estimate of notebooks with these parameters ({notebook: params}); see the module doc.
    prefix=True also prices the repeated-prefix share of each notebook's prompt tokens at the cached-input rate
    (Row.cached_tokens, Row.usd_cached; OpenAI's rule, see prefix_shares: an upper bound)."""
    from .llm import endpoint_kind

    t0 = time.perf_counter()
    est = Estimate(profile, arg_chars=arg_chars)
    stages, P0 = [], None
    for nb, P in params_by_nb.items():
        if P.get("BACKEND", "sim") == "sim":
            continue  # the synthetic population makes no LLM call
        P0 = P0 or P
        for st in plan(nb, P):
            stages.append((st, P))
    if not stages:
        est.notes.append("no LLM calls: every notebook uses the synthetic population (BACKEND sim)")
        return est
    benches = sorted({b for st, _ in stages for b in st.benchmarks}, key=lambda b: (b not in BENCHMARKS, b))
    source = P0.get("SOURCE", "benchmarks")
    if source == "demo":
        benches = ["demo"]
        stages = [(Stage(st.notebook, st.configs, st.on, ["demo"], st.model, st.base_url, st.cap), P) for st, P in stages]
    items, src = sample_items(benches, per_benchmark, source, data_dir)
    est.notes.append(f"items replayed: {per_benchmark} per benchmark, {src}")
    store: dict = {}  # one cache for the whole profile, as outputs/cache/llm.sqlite
    rows: dict = {}  # (notebook, model) -> Row, in notebook order
    subset_src = set()
    log: Optional[list] = [] if prefix else None
    spans = []  # (row key, first log index, last log index, items scale) to attribute cacheable tokens
    for st, P in stages:
        nb_name = st.notebook.split(" ")[0]
        local = P.get("BACKEND") == "local"
        for b in st.benchmarks:
            start = len(log) if log is not None else 0
            got = replay([Stage(st.notebook, st.configs, st.on, [b], st.model, st.base_url, st.cap)], items, P,
                         arg_chars, store=store, log=log)
            if not got:
                continue
            _, _, per = got[0]
            full, sub, why = item_counts(b, P)
            n = full if st.on == "input" else sub
            if st.on == "subset":
                subset_src.add(why)
            if st.cap is not None:
                n = min(n, st.cap)
            if log is not None:
                spans.append((start, len(log), n / len(items[b]), nb_name))
            for (m, kind), (nc, pt, ct) in per["by"].items():
                r = rows.setdefault((nb_name, m), Row(nb_name, m, free=True))
                r.free = r.free and (kind == "local-llama.cpp" or local)
                r.calls += nc * n
                r.prompt_tokens += pt * n
                r.completion_tokens += ct * n
            m0 = st.model or P.get("MODEL") or "gpt-4o-mini"
            main = rows.setdefault((nb_name, m0), Row(nb_name, m0, free=True))
            # free exactly when llm.LLMClient would price the endpoint at 0 (a local server)
            url = st.base_url or P.get("BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None
            main.free = main.free and (local or endpoint_kind(url) == "local-llama.cpp")
            main.questions += n * len(st.configs)
            main.agent_calls += per["agent_calls"] * n
    if log is not None:
        per_call = prefix_shares(log)["per_call"]
        for start, end, scale, nb_name in spans:
            for j in range(start, end):
                r = rows.get((nb_name, log[j][1]))
                if r is not None:
                    r.cached_tokens += per_call[j] * scale
    for r in rows.values():
        if r.free:
            r.usd = r.usd_batch = r.usd_cached = 0.0
        else:
            r.usd = _price(r.model, "remote", r.prompt_tokens, r.completion_tokens, False)
            r.usd_batch = _price(r.model, "remote", r.prompt_tokens, r.completion_tokens, True)
            p = price_of(r.model)
            r.usd_cached = None if p is None else p.usd(r.prompt_tokens, r.completion_tokens, r.cached_tokens)
    merged = rows
    est.rows = [r for r in merged.values() if r.questions or r.calls]
    est.notes.append("subset sizes: " + ", ".join(sorted(subset_src)) if subset_src else "no subset runs")
    est.seconds = time.perf_counter() - t0
    return est


def estimate_profile(profile: str, overrides: Optional[dict] = None, only: Optional[Sequence[str]] = None,
                     **kw) -> Estimate:
    name, params = notebook_params(profile, overrides, only)
    return estimate(params, name, **kw)


def _m(x: float) -> str:
    return f"{x / 1e6:,.1f} M" if x >= 1e5 else f"{x:,.0f}"


def _usd(x: Optional[float], free: bool = False) -> str:
    # "local": an endpoint on this machine, priced 0 like llm.LLMClient prices it (a gateway on localhost to a
    # paid provider is not counted: check that provider's prices yourself)
    return "local" if free else ("no price" if x is None else f"${x:,.2f}")


def format_estimate(est: Estimate, max_usd: Optional[float] = None) -> str:
    lines = [f"cost estimate for profile {est.profile!r} (no call made; arguments of {est.arg_chars} chars, "
             f"~{est.arg_chars / CHARS_PER_TOKEN:.0f} tokens):"]
    if not est.rows:
        return "\n".join(lines + [f"  {n}" for n in est.notes])
    lines.append(f"  {'notebook':<24} {'model':<22} {'questions':>10} {'calls sent':>11} {'prompt tok':>11} "
                 f"{'compl. tok':>11} {'USD':>10} {'USD batch':>10}")
    for r in est.rows + [est.total()]:
        lines.append(f"  {r.notebook:<24} {r.model[:22]:<22} {r.questions:>10,.0f} {r.calls:>11,.0f} "
                     f"{_m(r.prompt_tokens):>11} {_m(r.completion_tokens):>11} {_usd(r.usd, r.free):>10} "
                     f"{_usd(r.usd_batch, r.free):>10}")
    lines += [f"  {n}" for n in est.notes]
    models = sorted({r.model for r in est.rows if not r.free and price_of(r.model)})
    for m in models:
        p = PRICES[m] if m in PRICES else price_of(m)
        lines.append(f"  price {m}: ${p.input:g}/M input, ${p.output:g}/M output, batch x{p.batch_factor:g} "
                     f"({p.source}, recorded {p.recorded}; check current prices)")
    lines.append(f"  {token_model()}; arguments are the largest unknown: --arg-chars 1760 (the 400-token cap) "
                 "gives an upper bound")
    if max_usd is not None:
        lines.append(f"  MAX_USD ${max_usd:,.2f}: no new paid call is sent once the run's spend would pass it")
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
    sub.add_parser("prices", help="the price table with sources")
    a = ap.parse_args(argv)
    if a.cmd == "prices":
        print(price_table())
        return 0
    import yaml

    from .budget import parse_max_usd

    overrides = {}
    for item in a.set:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        overrides[k.strip()] = yaml.safe_load(v) if v.strip() else ""
    est = estimate_profile(a.profile, overrides, a.only, per_benchmark=a.per_benchmark, arg_chars=a.arg_chars,
                           data_dir=a.data_dir)
    print(format_estimate(est, parse_max_usd(os.environ.get("ACEMAD_MAX_USD"))))
    print(f"  (estimated in {est.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ----------------------------------------------------------------------------- repeated prefixes (prompt caching)
#: OpenAI's prompt caching: prompts of at least 1024 tokens, cached in 128-token steps beyond that
#: (https://platform.openai.com/docs/guides/prompt-caching, as recorded in this project 2026-11; best effort,
#: entries are evicted after minutes of inactivity, so a share computed here is an upper bound).
CACHE_MIN_TOKENS, CACHE_STEP = 1024, 128


def _serialized(messages) -> str:
    """The bytes a prefix cache compares: roles and contents in order."""
    return "".join(f"\x1e{m.get('role')}\x1f{m.get('content') or ''}" for m in messages)


def _lcp(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search on slice equality: C-speed comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def cacheable(lcp_tokens: float) -> float:
    """Tokens OpenAI's prompt cache can serve for a shared prefix of lcp_tokens (0 below 1024, then 128 steps)."""
    if lcp_tokens < CACHE_MIN_TOKENS:
        return 0.0
    return float(CACHE_MIN_TOKENS + (lcp_tokens - CACHE_MIN_TOKENS) // CACHE_STEP * CACHE_STEP)


def prefix_shares(log: Sequence[tuple]) -> dict:
    """Of the prompt tokens of the paid calls in `log` (ModelClient's (scope, model, messages, prompt_tokens),
    in the order sent): the share that repeats a prefix of an earlier call of the same agent (same question,
    agent, repeat and role: any round, any call kind), of an earlier call of any agent on the same question,
    and what OpenAI's cache rule (>= 1024 tokens, 128-token steps) would serve of the latter."""
    import bisect

    def agent_of(scope: str) -> str:
        return "|".join(p for p in scope.split("|") if not p.startswith("round=") and p not in
                        ("argue", "commit", "repair", "act", "act-repair"))

    seen_agent: dict = {}  # (model, agent) -> sorted earlier prompts
    seen_question: dict = {}  # (model, question) -> sorted earlier prompts
    total = same = anyq = eligible = 0.0
    per_call = []  # OpenAI-cacheable tokens of each call, in log order

    def best(sorted_list: list, s: str) -> int:
        i = bisect.bisect_left(sorted_list, s)
        return max([_lcp(s, sorted_list[j]) for j in (i - 1, i) if 0 <= j < len(sorted_list)] or [0])

    for scope, model, messages, pt in log:
        s = _serialized(messages)
        chars_per_tok = max(len(s), 1) / max(pt, 1)
        ka, kq = (model, agent_of(scope)), (model, scope.split("|")[0])
        la, lq = seen_agent.setdefault(ka, []), seen_question.setdefault(kq, [])
        a_tok = min(pt, best(la, s) / chars_per_tok)
        q_tok = min(pt, best(lq, s) / chars_per_tok)
        total += pt
        same += a_tok
        anyq += q_tok
        c = cacheable(q_tok) if pt >= CACHE_MIN_TOKENS else 0.0
        eligible += c
        per_call.append(c)
        bisect.insort(la, s)
        bisect.insort(lq, s)
    share = (lambda x: x / total if total else 0.0)
    return {"prompt_tokens": total, "same_agent": share(same), "same_question": share(anyq),
            "openai_cacheable": share(eligible), "per_call": per_call}
