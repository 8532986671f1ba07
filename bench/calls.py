"""Single-call mode vs the paper's two-call mode: calls, tokens and accuracy side by side.

`LLMPopulation(calls="two")` (the paper, and the default of every profile) makes two LLM calls per agent
per round: argue, then commit (p, q). `calls="single"` asks for the argument and the commitment in one
structured reply. Three measurements:

A. Synthetic population: it makes no LLM call, and the call mode is a property of LLM agents only, so
   single and two are the same process there (same seeds, same transcripts); one accuracy is printed.
B. Fake endpoint (bench/_common.py, fixed-length replies, modelled tokens): calls and prompt/completion
   tokens per question for every method of notebook 03 (N=5, T=3), each method in its own cold cache.
C. The real local model (SmolLM2-135M-Instruct via acemad_utils.agents.local_server.serve(), the demo set),
   AceMAD N=3, T=2, both modes, each on its own cold cache in a temp dir (every call is a real call):
   calls, tokens, seconds, accuracy with a 95% bootstrap CI (stats.bootstrap_ci), the paired difference
   with its CI (stats.bootstrap_ci of the differences) and a paired test (tables.paired_test: exact McNemar).

    python bench/calls.py                   # A + B + C on the 24 demo questions (about 13 min on 2 idle cores)
    python bench/calls.py --quick           # A + B small, C on 2 questions
    python bench/calls.py --local-questions 24 --agents 5 --rounds 3
    python bench/calls.py --no-local        # A + B only (seconds)

Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FakeServer, busy_processes, local_gguf, machine_line, temp_outputs, token_model  # noqa: E402

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.data.transcripts import load_run  # noqa: E402
from acemad_utils.experiments import (
    profiles,  # noqa: E402
    runner,
)
from acemad_utils.protocol.config import DebateConfig  # noqa: E402
from acemad_utils.report.stats import bootstrap_ci  # noqa: E402
from acemad_utils.report.tables import paired_test  # noqa: E402


def nb03() -> list[DebateConfig]:
    """Notebook 03's baselines and AceMAD rows as the paper profile runs them (the registry; control left out)."""
    [run] = profiles.notebook_runs("03_main_results", "paper")
    return run["baselines"] + run["acemad"]


PLACEHOLDER = "<your argument>"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fake-questions", type=int, default=10, help="questions per method on the fake endpoint")
    ap.add_argument("--arg-chars", type=int, default=600, help="fake argument length in characters (default 600)")
    ap.add_argument(
        "--local-questions", type=int, default=24, help="demo questions on the local model (default 24: all)"
    )
    ap.add_argument("--agents", type=int, default=3, help="N for the local run (default 3)")
    ap.add_argument("--rounds", type=int, default=2, help="T for the local run (default 2)")
    ap.add_argument(
        "--max-tokens",
        type=int,
        nargs=2,
        default=(160, 120),
        metavar=("ARGUE", "COMMIT"),
        help="completion budgets on the local model (single mode gets their sum; default 160 120)",
    )
    ap.add_argument("--no-local", action="store_true", help="skip C (the real local model)")
    ap.add_argument("--quick", action="store_true", help="B on 3 questions, C on 2 questions")
    a = ap.parse_args(argv)
    if a.quick:
        a.fake_questions, a.local_questions = 3, 2
    return a


def per_question(recs: list[dict], key: str) -> float:
    return float(np.mean([r["usage"].get(key, 0) for r in recs]))


# ----------------------------------------------------------------------------- A: synthetic
def part_a() -> None:
    from acemad_utils.agents.sim import SimPopulation, make_items
    from acemad_utils.protocol.debate import run_question

    items = make_items(300, k=4, seed=0)
    cfg = DebateConfig(method="acemad", n_agents=5, rounds=3)
    recs = [run_question(q, SimPopulation(seed=0), cfg) for q in items]
    acc, lo, hi = bootstrap_ci([float(r["final"]["correct"]) for r in recs])
    calls = sum(r["usage"]["calls"] for r in recs)
    print(
        "A. synthetic population: a round is one array step whatever the call mode (the mode exists only in "
        "LLMPopulation),\n   so single and two are the same process with the same draws: one result for both."
    )
    print(
        f"   AceMAD N=5 T=3 on 300 synthetic items: accuracy {100 * acc:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}], "
        f"LLM calls {calls}, tokens 0"
    )


# ----------------------------------------------------------------------------- B: fake endpoint
def part_b(a) -> None:
    from acemad_utils.agents.sim import make_items

    qs = make_items(a.fake_questions, k=4, seed=0, benchmark="fake")
    print(
        f"\nB. fake endpoint, {a.fake_questions} questions (4 options) per method, arguments of {a.arg_chars} chars; "
        f"{token_model()}"
    )
    print(
        f"   {'method':<24} {'mode':<6} {'calls/q':>8} {'prompt tok/q':>12} {'compl. tok/q':>12} {'total tok/q':>11} "
        f"{'calls x':>8} {'tokens x':>8}"
    )
    configs = nb03()  # before temp_outputs: the registry reads the repository's profiles
    with FakeServer(latency=0.0, arg_chars=a.arg_chars) as srv, temp_outputs() as tmp:
        for cfg in configs:
            row = {}
            for mode in ("two", "single"):
                pop = LLMPopulation(
                    model="gpt-4o-mini",
                    base_url=srv.url,
                    api_key="sk-fake",
                    calls=mode,
                    cache=str(tmp / f"{cfg.hash}_{mode}.sqlite"),
                    max_concurrency=16,
                )
                name = f"calls_{cfg.hash}_{mode}"
                runner.run_experiment(name, qs, [cfg], pop, workers=4, progress=False)
                _, recs = load_run(name)
                pop.cache.close()
                c, p, o = (per_question(recs, k) for k in ("calls", "prompt_tokens", "completion_tokens"))
                row[mode] = (c, p + o)
                ratio = "" if mode == "two" else f"{c / row['two'][0]:>8.2f} {(p + o) / row['two'][1]:>8.2f}"
                print(f"   {cfg.label:<24} {mode:<6} {c:>8.1f} {p:>12.0f} {o:>12.0f} {p + o:>11.0f} {ratio}")
    print(
        "   (calls x / tokens x = single / two. Centralized MAD's moderator and the Single Agent's solo runs "
        "follow the same mode.)"
    )


# ----------------------------------------------------------------------------- C: local model
def part_c(a) -> None:
    from acemad_utils.agents.local_server import serve
    from acemad_utils.data.benchmarks import load_demo

    gguf = local_gguf("\nC. skipped")
    if gguf is None:
        return
    qs = load_demo()[: a.local_questions]
    cfg = DebateConfig(method="acemad", n_agents=a.agents, rounds=a.rounds)
    print(
        f"\nC. real local model {Path(gguf).name} (llama.cpp server on 127.0.0.1), {len(qs)} demo questions, "
        f"{cfg.label}; max_tokens argue/commit {a.max_tokens[0]}/{a.max_tokens[1]} "
        f"(single: {sum(a.max_tokens)}); cold cache per mode"
    )
    print(f"   busy processes before: {busy_processes()}")
    res = {}
    with serve(gguf) as url, temp_outputs() as tmp:
        for mode in ("two", "single"):
            pop = LLMPopulation(
                model=Path(gguf).stem,
                base_url=url,
                calls=mode,
                cache=str(tmp / f"local_{mode}.sqlite"),
                max_tokens=tuple(a.max_tokens),
                max_concurrency=2,
                max_attempts=3,
            )
            t0 = time.perf_counter()
            runner.run_experiment(f"local_{mode}", qs, [cfg], pop, workers=1, progress=False)
            wall = time.perf_counter() - t0
            _, recs = load_run(f"local_{mode}")
            u = pop.usage()
            pop.cache.close()
            entries = [e for r in recs for rnd in r.get("rounds", []) for e in rnd]
            res[mode] = {
                "recs": recs,
                "wall": wall,
                "usage": u,
                "load": busy_processes(0.5),
                "correct": np.array([float(r["final"]["correct"]) for r in recs]),
                "failed": sum(r["status"] != "ok" for r in recs),
                "parse_failures": sum(e["parse_failure"] for e in entries),
                # no argument: the schema's placeholder copied verbatim, or an empty message (the library
                # blanks a copied placeholder and flags it argument_missing)
                "no_arg": sum(e["message"].strip() in ("", PLACEHOLDER) for e in entries),
                "entries": len(entries),
                "arg_chars": float(np.mean([len(e["message"]) for e in entries])) if entries else 0.0,
            }
    n = len(qs)
    print(
        f"   {'mode':<6} {'calls/q':>7} {'net calls/q':>11} {'prompt tok/q':>12} {'compl. tok/q':>12} {'s/q':>6} "
        f"{'accuracy [95% CI]':>22} {'parse fail':>10} {'no argument':>12} {'mean arg chars':>14}"
    )
    for mode, r in res.items():
        u = r["usage"]
        acc, lo, hi = bootstrap_ci(r["correct"])
        print(
            f"   {mode:<6} {u['calls'] / n:>7.1f} {u['network_calls'] / n:>11.1f} {u['prompt_tokens'] / n:>12.0f} "
            f"{u['completion_tokens'] / n:>12.0f} {r['wall'] / n:>6.1f} "
            f"{f'{100 * acc:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]':>22} {r['parse_failures']:>5}/{r['entries']:<4} "
            f"{r['no_arg']:>6}/{r['entries']:<5} {r['arg_chars']:>14.0f}"
        )
    two, one = res["two"], res["single"]
    ids2 = [r["question_id"] for r in two["recs"]]
    ids1 = [r["question_id"] for r in one["recs"]]
    assert ids1 == ids2, "both modes must cover the same questions in the same order"
    d, dlo, dhi = bootstrap_ci(np.asarray(one["correct"], dtype=float) - np.asarray(two["correct"], dtype=float))
    p = paired_test(one["correct"], two["correct"])
    a2 = bootstrap_ci(two["correct"])
    inside = dlo <= 0 <= dhi
    print(
        f"   single - two: {100 * d:+.1f} points, paired 95% CI [{100 * dlo:+.1f}, {100 * dhi:+.1f}], "
        f"exact McNemar p = {p:.3g} (discordant pairs: single right only "
        f"{int(np.sum((one['correct'] == 1) & (two['correct'] == 0)))}, two right only "
        f"{int(np.sum((one['correct'] == 0) & (two['correct'] == 1)))})"
    )
    print(
        f"   -> the difference is {'within' if inside else 'OUTSIDE'} its 95% CI around 0 "
        f"({'no detectable accuracy change' if inside else 'a detectable change'}); "
        f"single-mode accuracy {'lies' if a2[1] <= one['correct'].mean() <= a2[2] else 'does NOT lie'} inside "
        f"two-mode's CI [{100 * a2[1]:.1f}, {100 * a2[2]:.1f}]. n = {n} questions: wide intervals."
    )
    u2, u1 = two["usage"], one["usage"]
    print(
        f"   single/two ratios: calls {u1['calls'] / u2['calls']:.2f}, network calls "
        f"{u1['network_calls'] / u2['network_calls']:.2f}, "
        f"prompt tokens {u1['prompt_tokens'] / max(1, u2['prompt_tokens']):.2f}, completion tokens "
        f"{u1['completion_tokens'] / max(1, u2['completion_tokens']):.2f}, wall {one['wall'] / two['wall']:.2f}"
    )
    print(
        f"   failed records: two {two['failed']}, single {one['failed']}; busy processes during/after: "
        f"two [{two['load']}], single [{one['load']}]"
    )


def main(argv=None) -> int:
    a = parse_args(argv)
    print("== acemad: single-call vs two-call mode ==")
    print(machine_line())
    t0 = time.perf_counter()
    part_a()
    part_b(a)
    if not a.no_local:
        part_c(a)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
