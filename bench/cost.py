"""Cost and speed: calls, tokens and seconds per question per method, and the paper profile's OpenAI bill.

Part 1 (table): every method of notebook 03 (N=5; MADs and AceMAD at T=3, AceMAD also at T=2 and T=5),
each on its own cold cache, against the fake endpoint of bench/_common.py (fixed-length replies, modelled
tokens: see the token model printed below, calibrated by bench/history.py). Seconds per question are
measured with an injected latency L per call (default 0.2 s): "alone" is one question by itself (the
protocol's critical path: agents of a round run concurrently), "in a run" is the throughput-bound cost
when F calls are in flight (calls x L / F; bench/throughput.py shows the library reaches >= 80% of it).

Part 2 (price): the `paper` profile end to end, priced two ways from ONE replay (acemad_utils.cost.estimate, the
same code as `make estimate PROFILE=paper`, so the two cannot drift): every notebook's configs as
profiles/paper.yaml runs them, with one shared response cache as `make reproduce` shares
outputs/cache/llm.sqlite, on a few real items per benchmark (ACEMAD_DATA_DIR, or ../shared/benchmarks;
the demo set when neither exists), scaled by the item counts (subset construction on the full test sets,
experiments on the challenging subsets inferred from the paper's Table 2):
  sync            every call at the synchronous price (input $0.15/M, output $0.60/M for gpt-4o-mini);
  batch           every call through the Batch API (50% off), no prompt-cache discount assumed.
The share OpenAI's prompt cache could serve (at the cached-input rate): bench/prefix.py.
Prices: acemad_utils/agents/prices.py (source and date per entry).

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

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.agents.prices import PRICES  # noqa: E402
from acemad_utils.cost import estimate as C  # noqa: E402
from acemad_utils.cost import items as CI  # noqa: E402
from acemad_utils.data import benchmarks as D  # noqa: E402
from acemad_utils.experiments import registry as R  # noqa: E402
from acemad_utils.protocol.config import DebateConfig  # noqa: E402
from acemad_utils.protocol.debate import run_question  # noqa: E402

PRICE = PRICES["gpt-4o-mini"]
PRICE_IN, PRICE_OUT = PRICE.input, PRICE.output


def nb03() -> list[DebateConfig]:
    """Notebook 03's baselines and AceMAD rows as the paper profile runs them (the registry; control left out)."""
    [run] = R.runs("03_main_results", C.notebook_params("paper", only=["03_main_results"])[1]["03_main_results"])
    return run["baselines"] + run["acemad"]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--arg-chars",
        type=int,
        nargs="+",
        default=[300, 600, 1760],
        help="argument lengths (chars) to price (default 300, 600 and 1760 = the 400-token argue cap)",
    )
    ap.add_argument("--table-arg-chars", type=int, default=600, help="argument length in part 1 (default 600)")
    ap.add_argument("--per-benchmark", type=int, default=3, help="items per benchmark in the replay (default 3)")
    ap.add_argument("--latency", type=float, default=0.2, help="injected seconds per call for the s/q columns")
    ap.add_argument("--in-flight", type=int, default=8, help="F for the 'in a run' column (LLMClient default 8)")
    ap.add_argument("--table-questions", type=int, default=3, help="questions per method in part 1 (default 3)")
    ap.add_argument(
        "--data-dir", default=None, help="benchmark files (default $ACEMAD_DATA_DIR or ../shared/benchmarks)"
    )
    ap.add_argument(
        "--subset-sizes",
        default=None,
        help="override, e.g. truthfulqa=223,arc_challenge=108,bbh=290,logiqa=320,medqa=310,mmlu_pro=654",
    )
    ap.add_argument("--quick", action="store_true", help="1 item per benchmark, 1 question per method")
    a = ap.parse_args(argv)
    if a.quick:
        a.per_benchmark, a.table_questions, a.arg_chars = 1, 1, [600]
    return a


# ----------------------------------------------------------------------------- part 1
def part1(a) -> None:
    qs = D.load_demo()[: a.table_questions]
    L, F = a.latency, a.in_flight
    print(
        f"Part 1: notebook 03's methods, {len(qs)} demo question(s) each, cold cache per method, arguments of "
        f"{a.table_arg_chars} chars; fake endpoint latency L = {L:g} s"
    )
    print(
        f"{'method':<24} {'calls/q':>7} {'critical path':>13} {'prompt tok/q':>12} {'compl. tok/q':>12} "
        f"{'s/q alone':>9} {f's/q @F={F}':>10} {'$/1k q (4o-mini)':>16}"
    )
    rows = []
    configs = nb03()  # before temp_outputs: the registry reads the repository's profiles
    with FakeServer(latency=L, arg_chars=a.table_arg_chars) as srv, temp_outputs() as tmp:
        for cfg in configs:
            pop = LLMPopulation(
                model="gpt-4o-mini",
                base_url=srv.url,
                api_key="sk-fake",
                cache=str(tmp / f"{cfg.hash}.sqlite"),
                max_concurrency=64,
            )
            recs, walls = [], []
            for q in qs:
                t0 = time.perf_counter()
                recs.append(run_question(q, pop, cfg))
                walls.append(time.perf_counter() - t0)
            pop.cache.close()
            c, p, o = (
                float(np.mean([r["usage"][k] for r in recs])) for k in ("calls", "prompt_tokens", "completion_tokens")
            )
            alone = float(np.mean(walls))
            usd = (p * PRICE_IN + o * PRICE_OUT) / 1e6 * 1000
            rows.append((cfg.label, c, alone / L, p, o, alone, c * L / F, usd))
            print(
                f"{cfg.label:<24} {c:>7.1f} {alone / L:>13.1f} {p:>12.0f} {o:>12.0f} {alone:>9.2f} {c * L / F:>10.2f} "
                f"{usd:>16.2f}"
            )
    print(
        "(critical path = calls in sequence = s/q alone / L; s/q @F = calls x L / F, the bound a run reaches "
        "at F calls in flight; $ = modelled tokens x gpt-4o-mini price)"
    )
    return rows


# ----------------------------------------------------------------------------- part 2
def part2(a) -> None:
    data_dir = a.data_dir or os.environ.get("ACEMAD_DATA_DIR") or str(ROOT.parent / "shared" / "benchmarks")
    overrides = {}
    if a.subset_sizes:  # the estimate reads subset sizes from acemad_utils.cost.items.PAPER_SUBSETS
        CI.PAPER_SUBSETS.update({k: int(v) for k, v in (kv.split("=") for kv in a.subset_sizes.split(","))})
    print(
        f"\nPart 2: the paper profile's full run (make reproduce PROFILE=paper), priced for gpt-4o-mini "
        f"(${PRICE.input:g}/M in, ${PRICE.cached_input:g}/M cached in, ${PRICE.output:g}/M out, batch "
        f"x{PRICE.batch_factor:g}; {PRICE.source}, recorded {PRICE.recorded})"
    )
    for arg in a.arg_chars:
        cap = " = every argument at max_tokens 400, an upper bound" if arg >= 1760 else ""
        print(f"\n-- arguments of {arg} chars (~{arg / CHARS_PER_TOKEN:.0f} tokens{cap}) --")
        t0 = time.perf_counter()
        est = C.estimate_profile("paper", overrides, per_benchmark=a.per_benchmark, arg_chars=arg, data_dir=data_dir)
        print("\n".join(est.notes))
        print(
            f"{'notebook':<24} {'model':<14} {'calls sent':>11} {'input Mtok':>10} "
            f"{'output Mtok':>11} {'sync $':>9} {'batch $':>9}"
        )
        for r in est.rows + [est.total(paid_only=True)]:
            if r.free or r.usd is None:
                continue
            print(
                f"{r.notebook:<24} {r.model[:14]:<14} {r.calls:>11,.0f} {r.prompt_tokens / 1e6:>10.1f} "
                f"{r.completion_tokens / 1e6:>11.2f} {r.usd:>9.2f} {r.usd_batch:>9.2f}"
            )
        t = est.total(paid_only=True)
        print(
            f"agent calls asked {t.agent_calls:,.0f}, sent {t.calls:,.0f} (the rest are identical calls the shared "
            f"response cache answers)"
        )
        single = C.estimate_profile(
            "paper", {**overrides, "CALLS": "single"}, per_benchmark=a.per_benchmark, arg_chars=arg, data_dir=data_dir
        ).total(paid_only=True)
        print(
            f"single-call mode (--set CALLS=single): {single.calls:,.0f} calls sent, "
            f"{single.prompt_tokens / 1e6:.1f} M input, {single.completion_tokens / 1e6:.2f} M output tokens, "
            f"sync ${single.usd:.2f}, batch "
            f"${single.usd_batch:.2f}"
        )
        unpriced = est.unpriced()
        if unpriced:
            print(
                "unpriced (no price in agents/prices.py or the profile's models:, not known to be free): "
                + ", ".join(f"{r.notebook} {r.model} {r.calls:,.0f} calls" for r in unpriced)
            )
        print(f"(replay {time.perf_counter() - t0:.1f} s)")


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
