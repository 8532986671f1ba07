"""The pilot (docs/own-model.md): AceMAD (T=3) and self-consistency on the k questions per benchmark the budget buys,
to learn whether AceMAD's premise holds on your model and how many questions the full run needs; its configs,
questions and response cache are the full run's own, so nothing is paid twice."""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Optional
from unittest import mock

import numpy as np

from acemad_utils import api
from acemad_utils.agents.budget import ENV_MAX, BudgetExceeded, paid_line, parse_max_usd
from acemad_utils.agents.prices import ENV_MODELS, HOW_TO_PRICE, parse_terms, price_of
from acemad_utils.agents.redact import safe_url
from acemad_utils.cost.estimate import dollars, estimate_profile, replay
from acemad_utils.cost.items import KEPT_SHARE, OVERALL_SHARE, item_counts, sample_items
from acemad_utils.cost.power import format_plan, plan
from acemad_utils.data.benchmarks import data_hash, data_root
from acemad_utils.data.own import read_questions
from acemad_utils.data.paths import atomic_write, outputs, outputs_root, python
from acemad_utils.data.settings import env
from acemad_utils.experiments import registry
from acemad_utils.experiments.profiles import load_profile, notebook_params
from acemad_utils.experiments.setup import Setup
from acemad_utils.experiments.subsets import THRESHOLD, item_stats, subset_config
from acemad_utils.protocol.config import ROUNDS, DebateConfig
from acemad_utils.protocol.schema import Question
from acemad_utils.report import power as PW
from acemad_utils.report import premise as PR

DEFAULT_USD = 5.0
UNDEFINED_RHO = "undefined (one of them is right on every question or on none; the power table assumes 0)"
MIN_K, MAX_K = 2, 100  # questions per benchmark: fewer says nothing, more is the full run's job
MARGIN = 1.5  # screen this many times the input items the kept share says k needs
PLANNED = 0.8  # the share of the budget a chosen k may cost: the estimate runs a few % low, and calls in flight
# hold their dearest cost against the cap, so a plan at the budget's edge would stop the pilot before its report

#: What the pilot says after its numbers when the premise check is not judged, fails, or has nothing to see.
VERDICT_LINES = {
    "not judged": "NOT JUDGED: {n_split} of the {n} questions split the agents into right and wrong, fewer than the "
    "{min_split} the premise check needs; a pilot on more questions (a larger --usd, or a larger file) can judge it",
    "fails": "STOP: the premise fails on this model: the agent whose peer prediction scores best does not know more "
    "than a random agent, so no gain of AceMAD can come from who scores well; a full run would pay to measure a "
    "mechanism that is absent here (docs/own-model.md)",
    # the questions, not the model: nothing for the weights to pick
    "unseen": "STOP: on these questions the agents were all right or all wrong together, so the weights had no one to "
    "pick and AceMAD cannot gain here; this says nothing of the premise on this model: questions it finds harder can "
    "test it (`run FILE --challenging` keeps those its naive agent fails; docs/own-model.md)",
}


def pilot_configs(P: dict) -> list[DebateConfig]:
    """AceMAD at the paper's T and self-consistency, as notebook 03's run makes them (same cache scopes)."""
    main = registry.main_results(P.get("ROUNDS") or [ROUNDS], P.get("ETA", 2.0), P.get("SEED", 0))
    return main.select("acemad", rounds=ROUNDS) + main["matched"]


def choose(stages: list, P: dict, terms: dict, counts: Callable[[int], list], usd: float, k: Optional[int],
           what: Callable, how: str) -> tuple[int, float, Callable]:  # fmt: skip
    """(k, budget, USD of question counts per stage), k given or the most the budget buys, priced from one replay of
    each (configs, sample questions) stage and printed before any call; refused when unpriced or over budget."""
    store: dict = {}  # one modelled cache, in order: what a stage shares with an earlier one is paid once
    by = [replay(cfgs, qs, P, store=store)["by"] for cfgs, qs in stages]
    units = [(dollars(b, terms, P.get("BACKEND") == "local"), sum(v[0] for v in b.values())) for b in by]
    usd_of = lambda ns: None if any(u is None for u, _ in units) else sum(u * n for (u, _), n in zip(units, ns))
    cap = parse_max_usd(env(ENV_MAX) or None)
    budget = usd if cap is None else min(usd, cap)  # --usd, or MAX_USD when that is lower
    if chosen := k is None:
        k = next((kk for kk in range(MAX_K, MIN_K, -1) if (usd_of(counts(kk)) or 0.0) <= PLANNED * budget), MIN_K)
    cost, calls = usd_of(counts(k)), sum(c * n for (_, c), n in zip(units, counts(k)))
    price = "unpriced" if cost is None else f"${cost:.2f}"  # never $0.00 for a model without a price
    print(f"{what(k)}; estimate {price} for {calls:,.0f} calls (none made yet), budget ${budget:.2f}"
          f"{f' (planned to {PLANNED:.0%} of it)' if chosen else ''}")  # fmt: skip
    if cost is None:
        raise ValueError(f"no estimate can be shown: {P.get('MODEL')!r} has no price, so the pilot will not start; "
                         f"to price it, {how}")  # fmt: skip
    if cost > budget:
        raise ValueError(f"a pilot of {k} questions per benchmark costs about ${cost:.2f}, over the ${budget:.2f} "
                         "budget")  # fmt: skip
    return k, budget, usd_of


@contextlib.contextmanager
def as_max_usd(budget: float) -> Iterator[None]:
    """The pilot's budget as the run's MAX_USD, enforced per call; a stop says how to finish the pilot."""
    with mock.patch.dict(os.environ, {ENV_MAX: str(budget)}):
        try:
            yield
        except BudgetExceeded as e:
            e.args = (f"{e.args[0]}\nThe pilot's budget (${budget:.2f}: --usd, or MAX_USD when lower) stopped it. "
                      "Rerun the same command to finish it (what it paid is cached), with a larger --usd or a smaller "
                      "--per-benchmark.", *e.args[1:])  # fmt: skip
            raise


def report(
    records: Sequence[dict], configs: Sequence[DebateConfig], synthetic: bool, seed: int = 0
) -> tuple[str, dict]:
    """The premise check, the gain split, AceMAD against self-consistency (n for 80% power) and a STOP line when the
    premise fails or cannot be seen; and the observed numbers. `seed` draws the bootstraps, as the run's seed does."""
    table = PR.premise(records, seed)
    by = [{r["question_id"]: r["final"].get("correct") for r in records if r["config_hash"] == c.hash} for c in configs]
    ids = [q for q in by[0] if q in by[1] and by[0][q] is not None and by[1][q] is not None]
    a, b = (np.array([bool(x[q]) for q in ids]) for x in by)  # AceMAD, self-consistency: paired correctness
    obs: dict = {"n": len(ids)}
    if ids:
        obs |= dict(zip(("effect", "discordance"), PW.observed(a, b)), acemad=a.mean(), matched=b.mean(),
                    rho=PW.correlation(a, b))  # fmt: skip
    lines = ["premise check (report/premise.py):"]
    r = None if table.empty else table[table["round"].astype(str) == "all"].iloc[0]  # over all rounds
    if r is not None:
        lines += [table.round(3).to_string(index=False),
                  f"parse failures: {100 * r['parse_failure']:.1f}% of AceMAD's commitments did not parse"]  # fmt: skip
    split = PR.split(records, seed, others=[configs[1].label])  # re-decided from AceMAD's commitments: no new call
    if not split.empty:
        shown = split.round(3).to_string(index=False, na_rep="")  # AceMAD's own row: its accuracy, no difference
        lines += ["the gain split (AceMAD minus each control, points, paired):", shown]
    lines.append(PR.premise_sentence(table, synthetic, split))
    tokens = [sum(r["usage"].get("prompt_tokens", 0) + r["usage"].get("completion_tokens", 0) for r in records
                  if r["config_hash"] == c.hash) for c in configs]  # fmt: skip
    if all(tokens):  # matched in calls: what each spent in tokens (so in dollars) is not the same
        ratio = f"{tokens[0] / tokens[1]:.1f}x"
        lines.append(f"tokens sent and received: AceMAD {tokens[0]:,}, {configs[1].label} {tokens[1]:,} ({ratio}): "
                     "the two are matched in calls, not in tokens or dollars")  # fmt: skip
    if obs["n"]:
        lines.append(
            f"observed on {obs['n']} paired questions: AceMAD {100 * obs['acemad']:.1f}%, "
            f"{configs[1].label} {100 * obs['matched']:.1f}%, gain {100 * obs['effect']:+.1f} points; discordance "
            f"{obs['discordance']:.3f} (questions where exactly one is right), correlation rho "
            + (f"{obs['rho']:+.2f}" if obs["rho"] == obs["rho"] else UNDEFINED_RHO)
        )
        lines.append(
            f"to tell AceMAD from the same calls spent on sampling at the gain seen here, 80% power at alpha 0.05 "
            f"needs about {PW.n_needed(obs['effect'], obs['discordance']):,} questions (this pilot's gain is itself "
            f"uncertain at n = {obs['n']})"
            if obs["effect"]
            else "AceMAD and self-consistency tied here: no gain over the same calls to size a run for"
        )
    if r is not None and r["verdict"] in VERDICT_LINES:
        lines.append(VERDICT_LINES[r["verdict"]].format(n_split=r["n_split"], n=r["n"], min_split=PR.MIN_SPLIT))
    return "\n".join(lines), obs


def shuffled(qs: Sequence[Question], seed: int) -> list[Question]:
    """A seeded order: the pilot takes its first k (a random sample per benchmark)."""
    return [qs[i] for i in np.random.default_rng(seed).permutation(len(qs))]


def finish(parts: Sequence[Optional[str]], path: Path) -> None:
    """Print the pilot's report (its parts but the empty ones) and keep it beside the run's transcripts."""
    text = "\n".join(p for p in parts if p)
    atomic_write(path, text + "\n")
    print(f"{text}\n(this report: {path})")


def pilot_profile(profile: str, overrides: dict, *, usd: float, k: Optional[int], dry_run: bool) -> int:
    name, params = notebook_params(profile, overrides)
    P = {**params["03_main_results"], "PROFILE": name}
    if P.get("BACKEND", "sim") == "sim":
        raise ValueError(f"profile {name!r} runs the synthetic population: a pilot is for a model (BACKEND openai)")
    if P.get("SOURCE") == "benchmarks":
        data_root()  # no benchmark files: one line now, not a plan the pilot cannot run
    terms = {} if env(ENV_MODELS) else parse_terms(load_profile(profile, overrides).get("models"))
    cfgs, seed, n_max = pilot_configs(P), P.get("SEED", 0), P.get("N_MAX")
    benches = ["demo"] if P.get("SOURCE") == "demo" else list(P["BENCHMARKS"])
    counts = {b: item_counts(b, P) for b in benches}  # (input items, subset items, "built subset" or a guess)
    todo = [b for b in benches if counts[b][2] != "built subset"]  # no subset yet: screen input items first
    if todo and P.get("SUBSET_MODEL") not in ("", None, P.get("MODEL")):
        raise ValueError(
            f"no challenging subset of {todo[0]!r} for SUBSET_MODEL {P['SUBSET_MODEL']!r}: build them first "
            "(make reproduce ARGS='--only 01_subset_construction'), or set SUBSET_MODEL='' to screen with MODEL"
        )
    share = lambda b: KEPT_SHARE.get(b, OVERALL_SHARE)
    screened = lambda b, kk: min(counts[b][0], math.ceil(MARGIN * kk / share(b)))
    items = sample_items(benches, 2, P.get("SOURCE", "benchmarks"))[0]
    stages = [([subset_config(seed=seed)], items[b]) for b in todo] + [(cfgs, items[b]) for b in benches]
    asked = lambda b, kk: (  # what screening a few input items keeps (demo: 24 in all), or what a subset holds
        min(kk, math.ceil(screened(b, kk) * share(b))) if b in todo else min(kk, counts[b][1], n_max or kk)
    )
    per_stage = lambda kk: [screened(b, kk) for b in todo] + [asked(b, kk) for b in benches]
    where = f"screened input items ({', '.join(todo)}: no subset built yet)" if todo else "their challenging subsets"

    def what(kk: int) -> str:
        n, methods = sum(asked(b, kk) for b in benches), " and ".join(c.label for c in cfgs)
        if n < kk * len(benches):  # a small source (demo: 24 items): all it has, not what the budget would buy
            return f"pilot of profile {name!r}: {methods} on about {n} questions of {where}, all there are"
        return f"pilot of profile {name!r}: {methods} on {kk} questions per benchmark of {where}"

    kk, budget, _ = choose(stages, P, terms, per_stage, usd, k, what, HOW_TO_PRICE.format(model=P.get("MODEL")))
    if dry_run:
        return 0
    S, since = Setup.from_params(P), time.time()
    try:
        with as_max_usd(budget):
            sample = []
            for b in S.benchmarks:
                if b not in todo:  # the full run's own questions (its first N_MAX), a seeded sample of them
                    sample += shuffled(S.load_subset(b, S.subset_slug)[:n_max], seed)[:kk]
                    continue
                # Under N_MAX the full run asks the first kept items: screen in input order so the pilot's are
                # among them; else in a seeded order (a random sample).
                pool = S.questions(b) if n_max else shuffled(S.questions(b), seed)
                screen = pool[: screened(b, kk)]  # a run's name holds its questions' hash: a larger pilot is a new run
                _, recs = S.run(f"pilot-screen-{b}-{data_hash(screen)[:12]}", [subset_config(seed=seed)],
                                questions=screen)  # fmt: skip
                keep = {s["id"] for s in map(item_stats, recs) if s["accuracy"] < THRESHOLD}
                kept = [q for q in screen if q.id in keep]
                print(f"{b}: screened {len(screen)} input items, {len(kept)} challenging (the subset rule)")
                sample += kept[:kk]
            _, records = S.run(f"pilot-{data_hash(sample)[:12]}", cfgs, questions=sample)
    finally:
        S.close()
    text, obs = report(records, cfgs, S.synthetic, seed)
    rho = obs["rho"] if obs.get("rho") == obs.get("rho") else None  # undefined (NaN): the table's independence
    table = plan(params, rho=rho, est=estimate_profile(profile, overrides))
    failed = api.failure_line(records, "Rerun the same command")  # exit 1, as make reproduce and the run command
    undefined = "" if rho is not None or not obs.get("n") else f"rho: {UNDEFINED_RHO} on the {obs['n']} pilot questions"
    finish([text, format_plan(table, rho, f"(n = {obs['n']} pilot questions)"), undefined, failed,
            "the full run (make reproduce) replays these calls from the response cache: nothing here is paid twice",
            paid_line(since, budget)], outputs("tables", name) / "pilot.txt")  # fmt: skip
    return 1 if failed else 0


def pilot_file(path: Path, args, *, usd: float, k: Optional[int], dry_run: bool) -> int:
    qs = [q for q in read_questions(path) if q.answer is not None]
    if not qs:
        raise ValueError(f"{path}: no question has an answer; the premise check needs gold answers")
    cfgs = api.configs(["acemad", "self_consistency"], seed=args.seed)  # what `run FILE` makes: same scopes
    pools = {b: shuffled([q for q in qs if q.benchmark == b], args.seed) for b in sorted({q.benchmark for q in qs})}
    P = {"MODEL": args.model, "BASE_URL": args.base_url or "", "SEED": args.seed, "BACKEND": "openai"}
    stages = [(cfgs, p[:2]) for p in pools.values()]
    per_stage = lambda kk: [min(kk, len(p)) for p in pools.values()]

    def what(kk: int) -> str:
        n, head = sum(per_stage(kk)), f"pilot of {path.name}: {' and '.join(c.label for c in cfgs)} on"
        if n == len(qs):  # a small file: all it has, not what the budget would buy
            return f"{head} all {n} of its answered questions ({len(pools)} benchmark(s))"
        return f"{head} {n} of its {len(qs)} answered questions ({kk} per benchmark, {len(pools)} benchmark(s))"

    how = (f'set {ENV_MODELS}=\'{{"{args.model}": {{"price": {{"input": USD_PER_1M, "output": USD_PER_1M}}}}}}\' '
           '(or {"free": true} for a server that sends you no bill)')  # fmt: skip
    kk, budget, usd_of = choose(stages, P, {}, per_stage, usd, k, what, how)
    if dry_run:
        return 0
    out, since = Path(args.out).expanduser().resolve(), time.time()
    with as_max_usd(budget), warnings.catch_warnings():
        warnings.simplefilter("ignore", api.FailedRecords)  # said in the report, below its table
        res = api.run([q for p in pools.values() for q in p[:kk]], ["acemad", "self_consistency"], model=args.model,
                      base_url=args.base_url, seed=args.seed, out=out, name="pilot", workers=args.workers,
                      progress=True)  # fmt: skip
    text, obs = report(res.records, cfgs, False, args.seed)
    failed = api.failure_line(res.records, "Rerun the same command")
    parts = [text, failed]
    if obs["n"] and obs["effect"]:
        n = PW.n_needed(obs["effect"], obs["discordance"])
        per = (usd_of([len(p) for p in pools.values()]) or 0) / len(qs)  # every question of the file
        # what the pilot's own questions cost at the endpoint's reported usage: a model that argues at length (or an
        # endpoint that counts tokens more densely) costs more than the estimate's token model says
        price, debated = price_of(args.model), {r["question_id"] for r in res.records}
        seen = sum(price.usd(r["usage"].get("prompt_tokens", 0), r["usage"].get("completion_tokens", 0))
                   for r in res.records) / len(debated) if price and debated else 0.0  # fmt: skip
        basis = "the pilot's own cost per question" if seen > per else "the estimate's price per question"
        pw = PW.power_at(len(qs), obs["effect"], obs["discordance"])
        cost = f"${max(per, seen) * n:,.2f} for these two methods (at {basis})"
        parts.append(f"the full file ({len(qs)} answered questions) has power {pw:.0%} for the gain seen here; ~{n:,} "
                     f"questions would cost about {cost}")  # fmt: skip
    run = [python(), "-m", "acemad_utils", "run", str(path), "--methods",
           "acemad,self_consistency", "--model", args.model, *(["--base-url", safe_url(args.base_url)] if args.base_url
           else []), "--seed", str(args.seed), "--out", str(args.out)]  # fmt: skip
    parts.append(f"`{shlex.join(run)}` (add methods to --methods) replays these calls from the response cache: "
                 "nothing here is paid twice")  # fmt: skip
    *folders, last = res.name.split("/")
    with outputs_root(out):
        finish([*parts, paid_line(since, budget)], outputs("tables", *folders) / f"{last}.txt")
    return 1 if failed else 0
