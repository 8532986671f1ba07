"""Free reruns: a notebook-sized experiment run twice; the second run must make zero network calls.

Run 1: `runner.run_experiment` with an LLMPopulation on a loopback fake endpoint (100 ms per request, its
own process; bench/_common.py) and a fresh response cache, over a few methods of notebook 03. Then the
transcripts are deleted (the run directory), the response cache is kept, and run 2 repeats the same
experiment with a new population on the same cache. Reported: requests the fake server received in each
run (counted at the server), wall times and their ratio, and whether run 2's transcripts equal run 1's.
Done twice: A with a deterministic endpoint (reply = function of the request), B with a "sampled" one
(reply also depends on arrival order, like a real LLM at temperature > 0) and enough runner workers that
several methods debate the same question at once (as with a short subset and many configs).
Everything is written under a temp dir (ACEMAD_ROOT points there), never under outputs/.

    python bench/rerun.py             # 30 questions, Majority / Decentralized / Centralized / AceMAD (T=3)
    python bench/rerun.py --quick     # 8 questions, Majority + AceMAD (T=3)
    python bench/rerun.py -n 50 --latency 0.1 --workers 8

Prints figures only; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FakeServer, busy_processes, machine_line, strip_usage, temp_outputs  # noqa: E402

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.agents.sim import make_items  # noqa: E402
from acemad_utils.data import transcripts  # noqa: E402
from acemad_utils.data.benchmarks import load_demo  # noqa: E402
from acemad_utils.data.transcripts import transcript_bytes  # noqa: E402
from acemad_utils.experiments import (
    profiles,  # noqa: E402
    runner,
)
from acemad_utils.protocol.config import DebateConfig  # noqa: E402


def methods() -> dict[str, DebateConfig]:
    """Notebook 03's baselines and AceMAD (T=3) by method, as the paper profile runs them (the registry)."""
    [run] = profiles.notebook_runs("03_main_results", "paper")
    return {c.method: c for c in run["baselines"] + [c for c in run["acemad"] if c.rounds == 3]}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--questions", type=int, default=30, help="questions (default 30: the 24 demo + synthetic)")
    ap.add_argument(
        "--methods",
        nargs="+",
        choices=sorted(methods()),
        default=["majority", "decentralized", "centralized", "acemad"],
    )
    ap.add_argument("--latency", type=float, default=0.1, help="injected seconds per request (default 0.1)")
    ap.add_argument("--workers", type=int, default=8, help="runner workers (notebook default WORKERS=8)")
    ap.add_argument("--max-concurrency", type=int, default=16, help="LLMClient calls in flight (default 16)")
    ap.add_argument("--no-sampled", action="store_true", help="skip part B (the sampled endpoint)")
    ap.add_argument("--quick", action="store_true", help="8 questions, Majority + AceMAD (T=3)")
    a = ap.parse_args(argv)
    if a.quick:
        a.questions, a.methods = 8, ["majority", "acemad"]
    return a


def questions(n: int):
    demo = load_demo()
    return demo[:n] + make_items(max(0, n - len(demo)), k=4, seed=0, benchmark="synthetic-demo")


def run(srv: FakeServer, cache: Path, qs, cfgs, a, workers: int) -> dict:
    pop = LLMPopulation(
        model="gpt-4o-mini", base_url=srv.url, api_key="sk-fake", cache=str(cache), max_concurrency=a.max_concurrency
    )
    srv.reset()
    t0 = time.perf_counter()
    d = runner.run_experiment("rerun", qs, cfgs, pop, workers=workers, progress=False)
    wall = time.perf_counter() - t0
    st = srv.stats()
    raw = transcript_bytes(d / "transcripts.jsonl")
    _meta, recs = transcripts.load_run("rerun")
    u = pop.usage()
    pop.cache.close()
    return {"wall": wall, "requests": st["count"], "bytes": raw, "records": recs, "usage": u, "dir": d}


def experiment(a, qs, cfgs, sampled: bool, workers: int) -> dict:
    with FakeServer(latency=a.latency, sampled=sampled) as srv, temp_outputs() as tmp:
        cache = tmp / "cache" / "llm.sqlite"
        r1 = run(srv, cache, qs, cfgs, a, workers)
        shutil.rmtree(r1["dir"])  # delete the transcripts (and meta.json); keep the response cache
        cache_mb = sum(p.stat().st_size for p in cache.parent.glob("llm.sqlite*")) / 1e6
        r2 = run(srv, cache, qs, cfgs, a, workers)
    same_bytes = r1["bytes"] == r2["bytes"]
    c1, c2 = strip_usage(r1["records"]), strip_usage(r2["records"])
    differing = [(x["method"], x["question_id"]) for x, y in zip(c1, c2) if x != y]
    print(
        f"{'run':<28} {'wall s':>8} {'requests at server':>18} {'client calls':>12} {'cache hits':>10} "
        f"{'records ok':>10}"
    )
    for name, r in (("1: cold cache", r1), ("2: transcripts deleted, warm", r2)):
        u = r["usage"]
        print(
            f"{name:<28} {r['wall']:>8.2f} {r['requests']:>18} {u['calls']:>12} {u['cache_hits']:>10} "
            f"{sum(x['status'] == 'ok' for x in r['records']):>10}/{len(r['records'])}"
        )
    print(f"response cache kept between runs: {cache_mb:.1f} MB (sqlite + WAL)")
    print(
        f"run 2 network calls: {r2['requests']} (must be 0) | wall time ratio run2/run1 = "
        f"{r2['wall'] / r1['wall']:.4f} "
        f"({r1['wall'] / max(r2['wall'], 1e-9):.0f}x faster)"
    )
    print(
        f"transcripts equal: content (every field but the 'usage' counters) {c1 == c2 and len(c1) == len(c2)}"
        f"{f' ({len(differing)} of {len(c1)} records differ, e.g. {differing[:3]})' if differing else ''}; "
        f"byte-identical files {same_bytes}"
    )
    if not same_bytes:
        keys = ("network_calls", "cache_hits", "prompt_tokens", "completion_tokens")
        s1 = {k: sum(x["usage"].get(k, 0) for x in r1["records"]) for k in keys}
        s2 = {k: sum(x["usage"].get(k, 0) for x in r2["records"]) for k in keys}
        print(
            f"  usage counters differ by design (how a reply was obtained): run 1 {json.dumps(s1)}, "
            f"run 2 {json.dumps(s2)}"
        )
    shared = r1["usage"]["cache_hits"]
    print(
        f"cold run: {r1['usage']['calls']} agent calls, {r1['requests']} requests, {shared} cache hits within the run "
        "(identical calls are shared between methods: every method's round-1 arguments, the baselines' round-1 "
        "commitments, and AceMAD's arguments, which are Decentralized MAD's)"
    )
    return {"r1": r1, "r2": r2, "equal": c1 == c2, "differing": differing}


def main(argv=None) -> int:
    a = parse_args(argv)
    qs = questions(a.questions)
    by_method = methods()
    cfgs = [by_method[m] for m in a.methods]
    print("== acemad free reruns: cold run, delete transcripts, warm run on the kept response cache ==")
    print(machine_line())
    print(f"other busy processes at start: {busy_processes()}")
    print(
        f"{len(qs)} questions ({min(len(qs), 24)} demo + {max(0, len(qs) - 24)} synthetic) x methods "
        f"{[c.label for c in cfgs]}; fake endpoint latency {1e3 * a.latency:g} ms; workers {a.workers}, "
        f"max_concurrency {a.max_concurrency}"
    )
    print(f"\n-- A. deterministic endpoint (reply = function of the request), workers {a.workers} --")
    experiment(a, qs, cfgs, sampled=False, workers=a.workers)
    if not a.no_sampled:
        w = min(64, len(qs) * len(cfgs))
        print(
            f"\n-- B. sampled endpoint (two identical requests get different replies, like temperature > 0), "
            f"workers {w} so that several methods work on the same question at the same time --"
        )
        b = experiment(a, qs, cfgs, sampled=True, workers=w)
        if not b["equal"]:
            print(
                "  -> a cold run's transcript can disagree with the cache it leaves behind: when two methods send the "
                "same (scope, prompt) at the same time, both miss, both are sampled, each method keeps its own "
                "sample, and the cache keeps the last one written; a warm rerun then gives both methods that one."
            )
    print(f"other busy processes at end: {busy_processes()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
