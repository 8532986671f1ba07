"""Cost and speed: calls, tokens and seconds per question per method, and the paper profile's OpenAI bill.

Part 1 (table): every method of notebook 03 (N=5; MADs and AceMAD at T=3, AceMAD also at T=2 and T=5),
each on its own cold cache, against the fake endpoint of bench/_common.py (fixed-length replies, modelled
tokens: see the token model printed below, calibrated by bench/history.py). Seconds per question are
measured with an injected latency L per call (default 0.2 s): "alone" is one question by itself (the
protocol's critical path: agents of a round run concurrently), "in a run" is the throughput-bound cost
when F calls are in flight (calls x L / F; bench/throughput.py shows the library reaches >= 80% of it).

Part 2 (price): the `paper` profile end to end (notebooks 01-06 with profiles/paper.yaml: full benchmark
files for the subset construction, the full challenging subsets for every experiment, the paper's two-call
mode) is replayed on the fake endpoint with one shared response cache, exactly as `make reproduce
PROFILE=paper` shares outputs/cache/llm.sqlite: identical calls (the same prompt in the same scope, e.g.
the round-1 arguments every debate method asks for, AceMAD T=2 as a prefix of T=5, the ablation's
weightings that only re-decide, N=5 configs repeated across notebooks) are paid once. Network tokens per
question are measured on a few real items per benchmark (chosen at length quantiles; the demo set when no
benchmark files are found) and scaled by the item counts:
  - subset construction (notebook 01) runs on the full test sets (data.PUBLISHED_SIZES);
  - experiments run on the challenging subsets; their sizes are inferred from the paper's Table 2: every
    printed accuracy is k/n for the same n per benchmark (ARC-C 108, LogiQA 320, MMLU-Pro 654,
    TruthfulQA 223, MedQA 310, BBH 290 = 1,905 items); `--subset-sizes` overrides.
Price: gpt-4o-mini, $0.15 per 1M input and $0.60 per 1M output tokens (acemad_utils.llm.PRICES).

    python bench/cost.py                  # both parts, arguments of 300 / 600 / 1760 chars (about 3 min)
    python bench/cost.py --quick          # 1 item per benchmark, one argument length
    python bench/cost.py --arg-chars 600 1200 --latency 0.2 --in-flight 8

Prints figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CHARS_PER_TOKEN, ROOT, FakeServer, machine_line, temp_outputs, token_model  # noqa: E402

from acemad_utils import data as D  # noqa: E402
from acemad_utils.agents import LLMPopulation  # noqa: E402
from acemad_utils.config import DebateConfig  # noqa: E402
from acemad_utils.llm import PRICES  # noqa: E402
from acemad_utils.protocols import run_question  # noqa: E402
from acemad_utils.schema import AgentSpec  # noqa: E402

BENCHMARKS = ("truthfulqa", "arc_challenge", "bbh", "logiqa", "medqa", "mmlu_pro")
#: Challenging-subset sizes inferred from the paper's Table 2 (every printed accuracy is k/n with this n).
PAPER_SUBSETS = {"truthfulqa": 223, "arc_challenge": 108, "bbh": 290, "logiqa": 320, "medqa": 310, "mmlu_pro": 654}
#: Full test sets (subset construction runs on all of them): data.PUBLISHED_SIZES.
FULL_SIZES = {"truthfulqa": 817, "arc_challenge": 1172, "logiqa": 651, "medqa": 1273, "mmlu_pro": 1101,
              "bbh": sum(v for k, v in D.PUBLISHED_SIZES.items() if k.startswith("bbh/"))}
PRICE_IN, PRICE_OUT = PRICES["gpt-4o-mini"]


def nb03() -> list[DebateConfig]:
    return [DebateConfig(method=m) for m in ("single", "majority", "decentralized", "centralized", "sparse")] + \
           [DebateConfig(method="acemad", rounds=t) for t in (2, 3, 5)]


def paper_profile() -> list[tuple[str, list[DebateConfig]]]:
    """The configs each notebook runs under profiles/paper.yaml (SEED 0, N_MAX null, CALLS two), in order."""
    n02 = sorted({1, 2, 3, 5} | {5})
    nb02 = [DebateConfig(method=m, n_agents=n, rounds=3) for m in ("majority", "decentralized", "centralized", "sparse")
            for n in n02 if not (m == "centralized" and n < 2)]
    nb04 = [DebateConfig(method="decentralized")] + [  # SECOND_MODEL is "" in the paper profile: no 'Different LLMs'
        DebateConfig(method="acemad", truth_holder=s, name=n) for n, s in
        (("AceMAD (Different Persona)", AgentSpec("Skeptic", 0.6)),
         ("AceMAD (Different Thinking System)", AgentSpec("Generalist", 0.6, thinking="slow")))]
    nb05 = [DebateConfig(method="acemad", rounds=3, weighting=w, name=n) for w, n in
            (("peer_prediction", "Full protocol"), ("self_belief", "Self-belief only"), ("uniform", "Uniform weights"))]
    nb06 = [DebateConfig(method=m, n_agents=n, rounds=3) for m in ("acemad", "majority") for n in (1, 2, 3, 5, 7, 10, 12, 15)]
    return [("02_baselines", nb02), ("03_main_results", nb03()), ("04_heterogeneity", nb04), ("05_ablation", nb05),
            ("06_scaling", nb06)]


def subset_config() -> DebateConfig:
    """Notebook 01: the Single Agent (Generalist, T=0.7) answers every item 5 times (subsets.build_subset)."""
    return DebateConfig(method="single", n_agents=1, single_runs=5, crowd=AgentSpec("Generalist", 0.7))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arg-chars", type=int, nargs="+", default=[300, 600, 1760],
                    help="argument lengths (chars) to price (default 300, 600 and 1760 = the 400-token argue cap)")
    ap.add_argument("--table-arg-chars", type=int, default=600, help="argument length in part 1 (default 600)")
    ap.add_argument("--per-benchmark", type=int, default=3, help="items per benchmark in the replay (default 3)")
    ap.add_argument("--latency", type=float, default=0.2, help="injected seconds per call for the s/q columns")
    ap.add_argument("--in-flight", type=int, default=8, help="F for the 'in a run' column (LLMClient default 8)")
    ap.add_argument("--table-questions", type=int, default=3, help="questions per method in part 1 (default 3)")
    ap.add_argument("--data-dir", default=None, help="benchmark files (default $ACEMAD_DATA_DIR or ../shared/benchmarks)")
    ap.add_argument("--subset-sizes", default=None,
                    help="override, e.g. truthfulqa=223,arc_challenge=108,bbh=290,logiqa=320,medqa=310,mmlu_pro=654")
    ap.add_argument("--quick", action="store_true", help="1 item per benchmark, 1 question per method")
    a = ap.parse_args(argv)
    if a.quick:
        a.per_benchmark, a.table_questions, a.arg_chars = 1, 1, [600]
    return a


# ----------------------------------------------------------------------------- items
def sample_items(a) -> tuple[dict, str]:
    """A few real items per benchmark, at length quantiles (so their mean length is close to the benchmark's)."""
    d = a.data_dir or os.environ.get("ACEMAD_DATA_DIR") or str(ROOT.parent / "shared" / "benchmarks")
    out, notes = {}, []
    for b in BENCHMARKS:
        try:
            qs = D.load(b, data_dir=d) if Path(d).is_dir() else []
        except Exception as e:  # no files: fall back to the demo set, and say so
            qs, err = [], e
            notes.append(f"{b}: {type(err).__name__}")
        if not qs:
            demo = D.load_demo()
            out[b] = (demo[:a.per_benchmark], None)
            continue
        length = np.array([len(q.question) + len(q.options_str()) for q in qs])
        order = np.argsort(length, kind="stable")
        qtl = [(i + 0.5) / a.per_benchmark for i in range(a.per_benchmark)]
        picked = [qs[order[int(x * (len(qs) - 1))]] for x in qtl]
        out[b] = (picked, float(length.mean()))
    src = f"real items from {d}" if any(v[1] for v in out.values()) else "the demo set (no benchmark files found)"
    return out, src + (f" (fallback to demo for {notes})" if notes else "")


def header_chars(q) -> int:
    return len(q.question) + len(q.options_str())


# ----------------------------------------------------------------------------- part 1
def part1(a) -> None:
    qs = D.load_demo()[: a.table_questions]
    L, F = a.latency, a.in_flight
    print(f"Part 1: notebook 03's methods, {len(qs)} demo question(s) each, cold cache per method, arguments of "
          f"{a.table_arg_chars} chars; fake endpoint latency L = {L:g} s")
    print(f"{'method':<24} {'calls/q':>7} {'critical path':>13} {'prompt tok/q':>12} {'compl. tok/q':>12} "
          f"{'s/q alone':>9} {f's/q @F={F}':>10} {'$/1k q (4o-mini)':>16}")
    rows = []
    with FakeServer(latency=L, arg_chars=a.table_arg_chars) as srv, temp_outputs() as tmp:
        for cfg in nb03():
            pop = LLMPopulation(model="gpt-4o-mini", base_url=srv.url, api_key="sk-fake",
                                cache=str(tmp / f"{cfg.hash}.sqlite"), max_concurrency=64)
            recs, walls = [], []
            for q in qs:
                t0 = time.perf_counter()
                recs.append(run_question(q, pop, cfg))
                walls.append(time.perf_counter() - t0)
            pop.cache.close()
            c, p, o = (float(np.mean([r["usage"][k] for r in recs])) for k in ("calls", "prompt_tokens", "completion_tokens"))
            alone = float(np.mean(walls))
            usd = (p * PRICE_IN + o * PRICE_OUT) / 1e6 * 1000
            rows.append((cfg.label, c, alone / L, p, o, alone, c * L / F, usd))
            print(f"{cfg.label:<24} {c:>7.1f} {alone / L:>13.1f} {p:>12.0f} {o:>12.0f} {alone:>9.2f} {c * L / F:>10.2f} "
                  f"{usd:>16.2f}")
    print("(critical path = calls in sequence = s/q alone / L; s/q @F = calls x L / F, the bound a run reaches "
          "at F calls in flight; $ = modelled tokens x gpt-4o-mini price)")
    return rows


# ----------------------------------------------------------------------------- part 2
def replay(items: dict, arg_chars: int, calls: str, shared: bool) -> dict:
    """Run the paper profile on the sampled items; network tokens per item, per stage and benchmark."""
    stages = [("01_subsets", [subset_config()])] + paper_profile()
    out = {}
    with FakeServer(latency=0.0, arg_chars=arg_chars) as srv, temp_outputs() as tmp:
        def population(tag):
            return LLMPopulation(model="gpt-4o-mini", base_url=srv.url, api_key="sk-fake", calls=calls,
                                 cache=str(tmp / f"{tag}.sqlite"), max_concurrency=16)
        pop = population("shared")
        for stage, cfgs in stages:
            for cfg in cfgs:
                p = pop if shared else population(f"{stage}_{cfg.hash}")
                for b, (qs, _) in items.items():
                    before = p.usage()
                    for q in qs:  # sequential: no two identical calls race, so dedup is exact
                        run_question(q, p, cfg)
                    after = p.usage()
                    acc = out.setdefault((stage, b), {"calls": 0.0, "network_calls": 0.0, "prompt_tokens": 0.0,
                                                      "completion_tokens": 0.0, "agent_calls": 0.0})
                    for k in ("network_calls", "prompt_tokens", "completion_tokens"):
                        acc[k] += (after.get(k, 0) - before.get(k, 0)) / len(qs)
                    acc["agent_calls"] += (after["calls"] - before["calls"]) / len(qs)
                if not shared:
                    p.cache.close()
        pop.cache.close()
    return out


def price(per_item: dict, sizes: dict, full: dict) -> tuple[dict, float, float, float]:
    by_stage, tin, tout, calls = {}, 0.0, 0.0, 0.0
    for (stage, b), u in per_item.items():
        n = full[b] if stage == "01_subsets" else sizes[b]
        s = by_stage.setdefault(stage, [0.0, 0.0, 0.0, 0.0])
        s[0] += u["network_calls"] * n
        s[1] += u["prompt_tokens"] * n
        s[2] += u["completion_tokens"] * n
        s[3] += u["agent_calls"] * n
        tin += u["prompt_tokens"] * n
        tout += u["completion_tokens"] * n
        calls += u["network_calls"] * n
    return by_stage, tin, tout, calls


def usd(tin: float, tout: float) -> float:
    return (tin * PRICE_IN + tout * PRICE_OUT) / 1e6


def part2(a) -> None:
    items, src = sample_items(a)
    sizes = dict(PAPER_SUBSETS)
    if a.subset_sizes:
        sizes.update({k: int(v) for k, v in (kv.split("=") for kv in a.subset_sizes.split(","))})
    print(f"\nPart 2: the paper profile's full run, priced for gpt-4o-mini (${PRICE_IN}/1M in, ${PRICE_OUT}/1M out)")
    print(f"items replayed: {a.per_benchmark} per benchmark, {src}")
    print(f"{'benchmark':<14} {'full set':>8} {'subset':>7} {'replayed mean chars':>19} {'benchmark mean chars':>20}")
    for b, (qs, mean_len) in items.items():
        print(f"{b:<14} {FULL_SIZES[b]:>8} {sizes[b]:>7} {np.mean([header_chars(q) for q in qs]):>19.0f} "
              f"{'-' if mean_len is None else f'{mean_len:.0f}':>20}")
    print(f"subset sizes: {'inferred from the paper (Table 2)' if not a.subset_sizes else 'given'}: "
          f"{sum(sizes.values())} items; subset construction on {sum(FULL_SIZES.values())} items")
    for arg in a.arg_chars:
        cap = " = every argument at max_tokens 400, an upper bound" if arg >= 1760 else ""
        print(f"\n-- arguments of {arg} chars (~{arg / CHARS_PER_TOKEN:.0f} tokens{cap}) --")
        res = {}
        for label, calls, shared in (("two calls, shared cache (as make reproduce)", "two", True),
                                     ("two calls, no cross-config reuse", "two", False),
                                     ("single call, shared cache", "single", True)):
            t0 = time.perf_counter()
            per_item = replay(items, arg, calls, shared)
            res[label] = price(per_item, sizes, FULL_SIZES) + (time.perf_counter() - t0,)
        by_stage, tin, tout, calls, _ = res["two calls, shared cache (as make reproduce)"]
        print(f"{'stage (two calls, shared cache)':<32} {'agent calls':>12} {'network calls':>13} {'input Mtok':>10} "
              f"{'output Mtok':>11} {'USD':>8}")
        for stage, (nc, pi, po, ac) in by_stage.items():
            print(f"{stage:<32} {ac:>12,.0f} {nc:>13,.0f} {pi / 1e6:>10.1f} {po / 1e6:>11.2f} {usd(pi, po):>8.2f}")
        print(f"{'total':<32} {sum(v[3] for v in by_stage.values()):>12,.0f} {calls:>13,.0f} {tin / 1e6:>10.1f} "
              f"{tout / 1e6:>11.2f} {usd(tin, tout):>8.2f}")
        print(f"{'variant':<46} {'network calls':>13} {'input Mtok':>10} {'output Mtok':>11} {'USD':>8} {'replay s':>8}")
        for label, (_, ti, to, nc, secs) in res.items():
            print(f"{label:<46} {nc:>13,.0f} {ti / 1e6:>10.1f} {to / 1e6:>11.2f} {usd(ti, to):>8.2f} {secs:>8.1f}")


def main(argv=None) -> int:
    a = parse_args(argv)
    print("== acemad: cost and speed ==")
    print(machine_line())
    print(token_model())
    t0 = time.perf_counter()
    part1(a)
    part2(a)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
