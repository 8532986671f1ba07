"""Throughput of Algorithm 1's array math (acemad_utils.protocol.debate) and of the engine on the synthetic population.

Measures agent-round updates per second for B questions x T rounds x N agents x K options through the
full AceMAD pipeline

    peer_scores (Brier)  ->  mwu_weights (eta)  ->  weighted_scores + argmax_tiebreak (squared weights, tie-break keys)

and each stage on its own. Every measurement is repeated; the best and the median wall time
(time.perf_counter) are reported. One agent-round update = one agent's score + weight update in one
round of one question, so a pipeline pass performs B * T * N of them.

    python bench/engine.py                 # B=20000, T=3, N=5, K=4
    python bench/engine.py --quick         # tiny run (smoke test)
    python bench/engine.py -B 100000 -N 7 --repeats 9

Then the engine (acemad_utils.protocol.debate.run_batch with the synthetic population, agents.sim): debates per
second of whole records (draws, Eq. 1, commitments, scores, weights, decisions, stored entries) for --debates
questions of one config, per method, beside the same debates' arrays alone (the population's rounds without
records) and one question at a time (run_question, a batch of one, on a tenth of them). `--no-batch` skips it.

Prints figures only; it asserts nothing about timings.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

try:
    from acemad_utils.protocol import beliefs as B
except ImportError:  # run as `python bench/engine.py` from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from acemad_utils.protocol import beliefs as B
from acemad_utils.protocol.config import SCORING_RULES  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-B", "--questions", type=int, default=20000, help="questions in the batch (default 20000)")
    ap.add_argument("-T", "--rounds", type=int, default=3, help="debate rounds (default 3)")
    ap.add_argument("-N", "--agents", type=int, default=5, help="agents (default 5)")
    ap.add_argument("-K", "--options", type=int, default=4, help="answer options (default 4)")
    ap.add_argument("--eta", type=float, default=2.0, help="MWU rate (default 2.0, the paper's)")
    ap.add_argument("--exponent", type=float, default=2.0, help="weight exponent of the decision (default 2)")
    ap.add_argument("--rule", choices=SCORING_RULES, default="brier", help="scoring rule (default brier)")
    ap.add_argument("--repeats", type=int, default=7, help="timed repetitions per measurement (default 7)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed warm-up runs (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic beliefs (default 0)")
    ap.add_argument("--quick", action="store_true", help="tiny run: B=200, repeats=3 (smoke test)")
    ap.add_argument("--debates", type=int, default=5000, help="debates per batch-engine measurement (default 5000)")
    ap.add_argument("--no-batch", action="store_true", help="skip the batch engine's figure")
    args = ap.parse_args(argv)
    if args.quick:
        args.questions, args.repeats, args.warmup, args.debates = 200, 3, 1, 200
    for name in ("questions", "rounds", "agents", "options", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if args.agents < 2:
        ap.error("--agents must be >= 2 (peer scores need peers)")
    return args


def synthetic(b: int, t: int, n: int, k: int, seed: int):
    """Random beliefs / peer predictions on the simplex, shape (B, T, N, K), plus tie-break keys (B, K)."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(k), size=(b, t, n))
    Q = rng.dirichlet(np.ones(k), size=(b, t, n))
    keys = rng.random((b, k))  # stands in for tiebreak_keys (computed once per question, timed separately)
    return P, Q, keys


def timeit(fn, repeats: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def cores() -> str:
    logical = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = logical
    return f"{usable} usable / {logical} logical"


def blas_threads() -> str:
    keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    set_ = [f"{k}={os.environ[k]}" for k in keys if k in os.environ]
    return ", ".join(set_) if set_ else "unset"


def fmt_rate(x: float) -> str:
    return f"{x:.3e}"


def main(argv=None) -> int:
    a = parse_args(argv)
    b, t, n, k = a.questions, a.rounds, a.agents, a.options
    updates = b * t * n

    print("== acemad_utils.protocol.debate engine benchmark ==")
    print(
        f"machine: python {platform.python_version()} | numpy {np.__version__} | cores {cores()} | "
        f"{platform.machine()} {platform.system()} {platform.release()} | BLAS threads env: {blas_threads()}"
    )
    print(
        f"shape: B={b} questions x T={t} rounds x N={n} agents x K={k} options "
        f"({updates:,} agent-round updates per pass) | rule={a.rule} eta={a.eta} exponent={a.exponent} | "
        f"repeats={a.repeats} (+{a.warmup} warm-up)"
    )

    P, Q, keys = synthetic(b, t, n, k, a.seed)
    # Precompute each stage's input so a stage timing is that stage alone.
    S = B.peer_scores(Q, P, a.rule)
    W = B.mwu_weights(S, a.eta)
    P_last, W_last = P[:, -1], W[:, -1]

    def pipeline():
        s = B.peer_scores(Q, P, a.rule)
        w = B.mwu_weights(s, a.eta)
        return B.argmax_tiebreak(B.weighted_scores(P[:, -1], w[:, -1], a.exponent), keys)[0]

    # Sanity (not timing): the pipeline answers every question with a valid option.
    ans = pipeline()
    if ans.shape != (b,) or ans.min() < 0 or ans.max() >= k:
        raise SystemExit(f"pipeline returned invalid answers: shape {ans.shape}, range [{ans.min()}, {ans.max()}]")

    stages = [
        ("peer_scores", lambda: B.peer_scores(Q, P, a.rule)),
        ("mwu_weights", lambda: B.mwu_weights(S, a.eta)),
        ("weighted_answer", lambda: B.argmax_tiebreak(B.weighted_scores(P_last, W_last, a.exponent), keys)[0]),
        ("pipeline (all three)", pipeline),
    ]
    print(f"{'stage':<22} {'best ms':>10} {'median ms':>10} {'updates/s (best)':>18} {'updates/s (median)':>19}")
    results = {}
    for name, fn in stages:
        ts = timeit(fn, a.repeats, a.warmup)
        best, med = min(ts), statistics.median(ts)
        results[name] = (best, med)
        print(
            f"{name:<22} {best * 1e3:>10.3f} {med * 1e3:>10.3f} {fmt_rate(updates / best):>18} "
            f"{fmt_rate(updates / med):>19}"
        )

    # Tie-break keys are hashed once per question (sha256 + a seeded generator): a per-question Python loop,
    # reported separately because the engine computes them once, outside the per-round math.
    ids = [f"q{i}" for i in range(min(b, 2000))]
    ts = timeit(lambda: B.tiebreak_keys(0, ids, k), max(1, min(a.repeats, 3)), 0)
    per_q = min(ts) / len(ids)
    print(
        f"{'tiebreak_keys':<22} {per_q * 1e6:>9.2f} us/question (best of {len(ts)}, {len(ids)} ids; not in the "
        "pipeline)"
    )

    best, med = results["pipeline (all three)"]
    print(
        f"agent-round updates/s: {fmt_rate(updates / best)} (target >= 1e6) "
        f"[best of {a.repeats}; median {fmt_rate(updates / med)}]"
    )
    if not a.no_batch:
        batch_engine(a)
    return 0


def batch_engine(a: argparse.Namespace) -> None:
    """Debates per second of the engine (whole records), its arrays alone, and one question at a time."""
    from acemad_utils.agents.sim import SimPopulation, make_items
    from acemad_utils.protocol.config import DebateConfig
    from acemad_utils.protocol.debate import run_batch, run_question

    items = make_items(a.debates, k=a.options, seed=a.seed)
    pop = SimPopulation(seed=a.seed)
    few = items[: max(1, a.debates // 10)]
    print(
        f"batch engine: {a.debates} debates of one config per call, K={a.options}, N={a.agents} (single: 5 runs), "
        f"T={a.rounds}; best of {max(1, min(a.repeats, 3))}"
    )
    print(f"{'method':<14} {'records/s':>11} {'arrays only/s':>14} {'one at a time/s':>16} {'speed-up':>9}")
    for method in ("single", "majority", "decentralized", "centralized", "sparse", "acemad"):
        cfg = DebateConfig(method=method, n_agents=a.agents, rounds=a.rounds, seed=a.seed)
        reps = max(1, min(a.repeats, 3))
        whole = min(timeit(lambda cfg=cfg: run_batch(items, pop, cfg, [0] * len(items)), reps, 0))
        arrays = min(timeit(lambda cfg=cfg: _rounds_only(pop, cfg, items), reps, 0))
        one = min(timeit(lambda cfg=cfg: [run_question(q, pop, cfg) for q in few], 1, 0))
        rate, ref_rate = a.debates / whole, len(few) / one
        print(f"{method:<14} {rate:>11.0f} {a.debates / arrays:>14.0f} {ref_rate:>16.0f} {rate / ref_rate:>8.1f}x")


def _rounds_only(pop, cfg, items) -> None:
    """The population's rounds of a debate config as arrays, no record: what the records add is the rest."""
    specs = cfg.specs() if cfg.method != "single" else cfg.specs()[:1] * cfg.single_runs
    agents = pop.batch_agents(specs, items, [0] * len(items))
    seen = np.full((len(items), len(specs), len(items[0].options)), np.nan)
    for t in range(1, (cfg.rounds if cfg.method not in ("single", "majority") else 1) + 1):
        P = agents.act(t, seen, None, cfg.method == "acemad").P
        seen = np.broadcast_to(P.mean(axis=1, keepdims=True), P.shape)


if __name__ == "__main__":
    sys.exit(main())
