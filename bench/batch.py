"""CALLS_VIA batch vs sync on notebook 03's methods: batches per run, requests per batch, wall time, transcripts.

Each experiment runs twice on the fake endpoint (bench/_common.py: deterministic debate replies, a fixed
latency per synchronous call, a fixed completion delay per batch), each time on its own cold response cache
in a temp dir: once with CALLS_VIA sync, once with CALLS_VIA batch (acemad_utils/agents/batch.py; the fake's
/v1/files and /v1/batches). Experiments: AceMAD T = 2, 3, 5 alone (the paper's roster, N = 5), then
notebook 03's whole run in one experiment as the notebook runs it (Single Agent, Majority Voting,
Decentralized, Centralized and Sparse MAD, Decentralized MAD with AceMAD's roster, AceMAD T = 2, 3, 5).
Questions: generated 4-option items through the LLM path (LLMPopulation pointed at the fake endpoint).

Printed per experiment: batches submitted (a T-round debate in the two-call mode needs 2T, plus one per
repair round), requests per batch, requests in all against the synchronous run's network calls, wall time
of both modes, the batch run's time beyond the batches' completion delay (the library's own overhead:
reruns of the waiting questions from the cache, uploads, polls, imports), and whether the transcripts are
identical once the usage counters are removed. The batch delay here is short (a real batch takes minutes
to 24 hours), so the wall times measure the library, not the Batch API: a real batch run takes about
batches x the API's completion time.

    python bench/batch.py              # 30 questions, 200 ms per call, 1 s per batch (about 2 min)
    python bench/batch.py --quick      # 6 questions, AceMAD T = 2 and notebook 03

Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FakeServer, machine_line, strip_usage, temp_outputs  # noqa: E402

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.data.transcripts import read_jsonl  # noqa: E402
from acemad_utils.experiments import (
    profiles,  # noqa: E402
    runner,
)


def nb03():
    """notebook 03's run under the paper profile, from the registry (its configs in its order)."""
    [run] = profiles.notebook_runs("03_main_results", "paper")
    return run


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=30, help="questions per experiment (default 30)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per synchronous call (default 0.2)")
    ap.add_argument("--batch-delay", type=float, default=1.0, help="seconds until a batch completes (default 1)")
    ap.add_argument("--poll", type=float, default=0.1, help="the client's batch poll interval, fixed (default 0.1 s)")
    ap.add_argument("--concurrency", type=int, default=32, help="calls in flight, sync mode (default 32)")
    ap.add_argument("--arg-chars", type=int, default=600)
    ap.add_argument("--quick", action="store_true", help="6 questions; AceMAD T=2 and notebook 03 only")
    a = ap.parse_args(argv)
    if a.quick:
        a.questions = 6
    return a


def canonical(path: Path) -> list:
    """The run's records in canonical order (question, method, repeat), usage counters removed."""
    recs = [strip_usage(r) for r in read_jsonl(path)]
    return sorted(recs, key=lambda r: (r["question_id"], r["method"], r.get("repeat", 0)))


def run_once(tmp: Path, name: str, qs, configs, via: str, a) -> dict:
    """One run on a fresh fake endpoint (its request counters then belong to this run alone)."""
    with FakeServer(latency=a.latency, arg_chars=a.arg_chars, batch_delay=a.batch_delay) as srv:
        return _run(srv, tmp, name, qs, configs, via, a)


def _run(srv: FakeServer, tmp: Path, name: str, qs, configs, via: str, a) -> dict:
    workers = max(1, 2 * a.concurrency // 5)  # about 2F/N questions at once (bench/throughput.py)
    pop = LLMPopulation(
        model="gpt-4o-mini",
        base_url=srv.url,
        api_key="sk-fake",
        kind="openai",
        cache=str(tmp / f"{name}_{via}.sqlite"),
        calls_via=via,
        max_concurrency=a.concurrency,
        batch_options={"poll": a.poll, "poll_max": a.poll, "max_attempts": 3},
    )
    t0 = time.perf_counter()
    d = runner.run_experiment(f"{name}_{via}", qs, configs, pop, workers=workers, progress=False)
    wall = time.perf_counter() - t0
    after = srv.stats()
    u = pop.usage()
    out = {
        "wall": wall,
        "usage": u,
        "dir": d,
        "batches": after["batches"],
        "statuses": after["batch_statuses"],
        "server_requests": after["count"],
        "submitted": pop.batcher.submitted if pop.batcher else 0,
        "summary": runner.summarize(list(read_jsonl(d / "transcripts.jsonl"))),
    }
    pop.cache.close()
    return out


def main(argv=None) -> int:
    from acemad_utils.agents.sim import make_items

    a = parse_args(argv)
    for var in ("ACEMAD_CALLS_VIA", "ACEMAD_MAX_USD"):
        os.environ.pop(var, None)
    qs = make_items(a.questions, k=4, seed=0, benchmark="fake")
    run = nb03()
    ace = run["acemad"][:1] if a.quick else run["acemad"]
    exps = [(f"AceMAD T={c.rounds}", [c]) for c in ace]
    exps.append((f"notebook 03 ({len(run.configs)} methods, one run)", run.configs))
    print("== acemad: CALLS_VIA batch vs sync ==")
    print(machine_line())
    print(
        f"fake endpoint (tests/fake_openai.FakeOpenAI in its own process): {a.latency * 1000:.0f} ms per synchronous "
        f"call, batch completion delay {a.batch_delay:g} s after batches.create (batch lines get no per-call "
        f"latency), deterministic debate replies with {a.arg_chars}-char arguments; client: max_concurrency "
        f"{a.concurrency}, workers {max(1, 2 * a.concurrency // 5)}, batch poll every {a.poll:g} s (poll_max "
        f"{a.poll:g} s; the library's default is 10 s growing to 300 s), max_attempts 3; {len(qs)} generated "
        "4-option questions; two-call mode; each run on its own cold response cache"
    )
    rows = []
    t_all = time.perf_counter()
    with temp_outputs("acemad_bench_batch_") as tmp:
        for i, (label, configs) in enumerate(exps):
            sync = run_once(tmp, f"e{i}", qs, configs, "sync", a)
            bat = run_once(tmp, f"e{i}", qs, configs, "batch", a)
            same = canonical(sync["dir"] / "transcripts.jsonl") == canonical(bat["dir"] / "transcripts.jsonl")
            nb = len(bat["batches"])
            rounds = [c.rounds for c in configs if c.method == "acemad"]
            overhead = bat["wall"] - nb * a.batch_delay
            rows.append((label, nb, sync, bat, same))
            print(f"\n{label}: {len(configs)} method(s) x {len(qs)} questions")
            if len(configs) == 1:
                print(f"  batches submitted: {nb} (2T = {2 * rounds[0]}; repairs: {nb - 2 * rounds[0]})")
            else:
                print(f"  batches submitted: {nb} (the longest chain of calls of one question decides it)")
            print(f"  requests per batch: {bat['batches']}  (statuses: {', '.join(sorted(set(bat['statuses'])))})")
            print(
                f"  requests in all: {sum(bat['batches'])}; network calls of the sync run: "
                f"{sync['usage']['network_calls']}; agent calls asked for: {sync['summary']['calls']}"
            )
            print(
                f"  wall time: sync {sync['wall']:.1f} s, batch {bat['wall']:.1f} s "
                f"({bat['wall'] / sync['wall']:.2f}x); "
                f"batch run beyond {nb} x {a.batch_delay:g} s of batch delay: {overhead:.1f} s "
                f"({overhead / max(1, nb):.2f} s per batch)"
            )
            print(
                f"  records ok: sync {sync['summary']['ok']}/{sync['summary']['records']}, batch "
                f"{bat['summary']['ok']}/{bat['summary']['records']}; failures: sync {sync['usage']['failures']}, "
                f"batch {bat['usage']['failures']}"
            )
            print(f"  transcripts identical (usage counters removed): {'yes' if same else 'NO'}")
    print("\nsummary")
    print(
        f"  {'experiment':<34} {'batches':>7} {'requests':>8} {'max/batch':>9} {'sync s':>7} {'batch s':>7} "
        f"{'identical':>9}"
    )
    for label, nb, sync, bat, same in rows:
        print(
            f"  {label:<34} {nb:>7} {sum(bat['batches']):>8} {max(bat['batches'] or [0]):>9} {sync['wall']:>7.1f} "
            f"{bat['wall']:>7.1f} {'yes' if same else 'NO':>9}"
        )
    print(f"total {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
