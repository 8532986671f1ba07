"""Saturating the endpoint: questions per second against the latency bound, for several in-flight limits.

A loopback fake endpoint (tests/fake_openai.FakeOpenAI in its own process, see bench/_common.py) answers
every request after a fixed injected latency L. With at most F calls in flight and C calls per question,
no client can beat

    limit = F / L / C   questions per second

We run `runner.run_experiment` (AceMAD, N=5, T=3, the paper's two-call mode: C = 30) with
`LLMClient(max_concurrency=F)` and runner `workers = ceil(2 F / N)` questions at once (N agents act
concurrently within a round; twice the F/N questions that would exactly fill F, because an agent that has
finished its round waits for the round's slowest peer and its slot would otherwise stay empty), a cold
response cache in a temp dir (as a real run has), and report questions/s and its share of the limit, with
checks that the fake server is not what we measure: the largest number of requests it saw at once must
reach F, and its own CPU time is printed. Two diagnostic runs at the largest F follow: workers exactly
F/N, and a 1 s latency (5x less client CPU per second at the same F).

    python bench/throughput.py                 # F in {1, 8, 32, 64}, L = 200 ms, 6 F questions each (~6 min)
    python bench/throughput.py --quick         # F in {1, 64}, 2 F questions (about 30 s)
    python bench/throughput.py --inflight 64 --latency 1.0
    python bench/throughput.py --profile       # + a per-thread CPU profile of the F=64 run (cProfile)

Also printed (skipped with --quick): the client CPU spent per call, split by layer (openai SDK alone,
LLMClient, + response cache, + protocol/runner), measured sequentially at zero latency: the CPU ceiling on
questions/s is (cores free) / (CPU per question). Prints figures only; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FakeServer, busy_processes, load, machine_line, temp_outputs  # noqa: E402

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.agents.sim import make_items  # noqa: E402
from acemad_utils.experiments import runner  # noqa: E402
from acemad_utils.protocol.config import DebateConfig  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inflight", type=int, nargs="+", default=[1, 8, 32, 64], help="in-flight bounds F")
    ap.add_argument("--latency", type=float, default=0.2, help="injected seconds per request (default 0.2)")
    ap.add_argument("--per-inflight", type=float, default=6.0, help="questions per unit of F (default 6)")
    ap.add_argument("-N", "--agents", type=int, default=5)
    ap.add_argument("-T", "--rounds", type=int, default=3)
    ap.add_argument("--calls", choices=("two", "single"), default="two", help="LLM calls per agent-round")
    ap.add_argument(
        "--workers-factor",
        type=float,
        default=2.0,
        help="runner workers = ceil(factor * F / N) (default 2: surplus questions fill the slots that agents "
        "leave idle while they wait for their round's slowest peer; 1 = exactly F agents)",
    )
    ap.add_argument("--no-cache", action="store_true", help="run without the response cache")
    ap.add_argument("--profile", action="store_true", help="per-thread CPU profile of the largest F")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the CPU-per-call breakdown")
    ap.add_argument(
        "--no-diagnose",
        action="store_true",
        help="skip the two diagnostic runs at the largest F (workers factor 1; latency 1 s)",
    )
    ap.add_argument("--quick", action="store_true", help="F in {1, 64}, 2 F questions, no breakdown/diagnostics")
    a = ap.parse_args(argv)
    if a.quick:
        a.inflight, a.per_inflight, a.no_breakdown, a.no_diagnose = [1, 64], 2.0, True, True
    return a


class Timestamps:
    """Wrap runner.run_question to record when each question finishes (for a steady-state rate)."""

    def __init__(self):
        self.t: list[float] = []
        self._orig = runner.run_question

    def __enter__(self):
        def wrapped(*a, **k):
            rec = self._orig(*a, **k)
            self.t.append(time.perf_counter())
            return rec

        runner.run_question = wrapped
        return self

    def __exit__(self, *exc):
        runner.run_question = self._orig


def steady_rate(ts: list[float]) -> float:
    """Questions/s between the 20th and the 80th percentile completion (no ramp-up, no tail)."""
    ts = sorted(ts)
    if len(ts) < 10:
        return float("nan")
    i, j = int(0.2 * len(ts)), int(0.8 * len(ts))
    return (j - i) / (ts[j] - ts[i]) if ts[j] > ts[i] else float("nan")


def run_one(
    srv: FakeServer,
    tmp: Path,
    f: int,
    a,
    latency: float,
    tag: str,
    profile: bool = False,
    workers_factor: Optional[float] = None,
    per_inflight: Optional[float] = None,
) -> dict:
    cpq = (2 if a.calls == "two" else 1) * a.agents * a.rounds
    nq = max(2, int(round((per_inflight or a.per_inflight) * f)))
    workers = max(1, math.ceil((workers_factor or a.workers_factor) * f / a.agents))
    cache = None if a.no_cache else str(tmp / f"cache_{tag}_{f}.sqlite")
    pop = LLMPopulation(
        model="gpt-4o-mini", base_url=srv.url, api_key="sk-fake", cache=cache, calls=a.calls, max_concurrency=f
    )
    qs = make_items(nq, k=4, seed=f, benchmark=f"bench-{tag}")
    cfg = DebateConfig(method="acemad", n_agents=a.agents, rounds=a.rounds)
    srv.reset()
    prof = ThreadProfiles() if profile else None
    c0 = time.process_time()
    t0 = time.perf_counter()
    with Timestamps() as stamps:
        if prof:
            with prof:
                runner.run_experiment(f"tp_{tag}_{f}", qs, [cfg], pop, workers=workers, progress=False)
        else:
            runner.run_experiment(f"tp_{tag}_{f}", qs, [cfg], pop, workers=workers, progress=False)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    st = srv.stats()
    u = pop.usage()
    if pop.cache is not None:
        pop.cache.close()
    for c in pop._clients.values():
        c.close()
    limit = f / latency / cpq
    return {
        "label": tag,
        "latency": latency,
        "F": f,
        "workers": workers,
        "questions": nq,
        "wall": wall,
        "qps": nq / wall,
        "steady": steady_rate(stamps.t),
        "limit": limit,
        "calls": st["count"],
        "expected_calls": nq * cpq,
        "max_in_flight": st["max_in_flight"],
        "client_cpu": cpu,
        "server_cpu": st["cpu_s"],
        "failures": u.get("failures", 0),
        "prof": prof,
        "load": load(),
    }


def print_rows(rows: list[dict], latency: float, cpq: int) -> None:
    print(
        f"{'run':<10} {'L s':>4} {'F':>4} {'workers':>7} {'questions':>9} {'wall s':>7} {'q/s':>7} "
        f"{'steady q/s':>10} {'limit q/s':>9} "
        f"{'% limit':>8} {'% steady':>8} {'calls':>7} {'srv max in flight':>17} {'client CPU ms/call':>18} "
        f"{'srv CPU ms/call':>15}"
    )
    for r in rows:
        ok = "" if r["calls"] == r["expected_calls"] else f" (expected {r['expected_calls']})"
        print(
            f"{r['label']:<10} {r['latency']:>4.1f} {r['F']:>4} {r['workers']:>7} {r['questions']:>9} "
            f"{r['wall']:>7.1f} {r['qps']:>7.3f} {r['steady']:>10.3f} "
            f"{r['limit']:>9.3f} {100 * r['qps'] / r['limit']:>7.1f}% {100 * r['steady'] / r['limit']:>7.1f}% "
            f"{r['calls']:>7}{ok} {r['max_in_flight']:>17} {1e3 * r['client_cpu'] / max(1, r['calls']):>18.2f} "
            f"{1e3 * r['server_cpu'] / max(1, r['calls']):>15.2f}"
        )
    print(
        f"(limit = F / L / {cpq} calls per question; '% steady' uses the rate between the 20th and "
        f"80th percentile completions; loads after each run: {'; '.join(r['load'] for r in rows)})"
    )


# ----------------------------------------------------------------------------- profiling
class ThreadProfiles:
    """cProfile every thread started inside the block, timing each by its own CPU clock (time.thread_time)."""

    def __init__(self):
        import threading

        self.profiles = []
        self._threading = threading
        self._orig = threading.Thread.run

    def __enter__(self):
        import cProfile

        profiles, orig = self.profiles, self._orig

        def run(th):
            p = cProfile.Profile(time.thread_time)
            profiles.append(p)
            p.enable()
            try:
                orig(th)
            finally:
                p.disable()

        self._threading.Thread.run = run
        return self

    def __exit__(self, *exc):
        self._threading.Thread.run = self._orig

    def report(self, top: int = 25) -> None:
        import io
        import pstats

        ps = [p for p in self.profiles if p.getstats()]
        st = pstats.Stats(ps[0])
        for p in ps[1:]:
            st.add(p)
        total = sum(v[2] for v in st.stats.values())  # tottime summed = profiled CPU
        print(
            f"per-thread CPU profile: {len(ps)} threads, {total:.1f} CPU s profiled (cProfile inflates the total; "
            "compare shares)"
        )
        groups = {
            "openai SDK (request build, transform, response parse)": "/openai/",
            "httpx/httpcore/h11 (HTTP, the SDK's)": ("httpx", "httpcore", "/h11/"),
            "http.client/email (HTTP, transport.py)": ("http/client.py", "/email/"),
            "socket send/recv (loopback kernel work)": "_socket.socket",
            "sqlite3 (response cache)": "sqlite3",
            "tenacity (retry wrapper)": "/tenacity/",
            "json": "/json/",
            "acemad_utils": "/acemad_utils/",
            "threading/concurrent.futures": ("threading.py", "concurrent/futures"),
            "typing/copy/pydantic": ("typing.py", "copy.py", "pydantic"),
        }
        share = {g: 0.0 for g in groups}
        for (fn, _line, name), v in st.stats.items():
            key = f"{fn}:{name}"
            for g, pats in groups.items():
                if any(p in key for p in ((pats,) if isinstance(pats, str) else pats)):
                    share[g] += v[2]
                    break
        print("self CPU by layer:")
        for g, s in sorted(share.items(), key=lambda kv: -kv[1]):
            print(f"  {g:<55} {100 * s / total:5.1f}%")
        buf = io.StringIO()
        st.stream = buf
        st.sort_stats("tottime").print_stats(top)
        lines = buf.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print("\n".join(x.replace(str(Path(sys.prefix)), "<venv>") for x in lines[start:] if x.strip()))


# ----------------------------------------------------------------------------- CPU per call
def cpu_breakdown(n_questions: int = 10) -> None:
    """Client CPU per LLM call, layer by layer, sequential at zero latency (ACEMAD_SEQUENTIAL=1)."""
    import openai

    from acemad_utils.agents.client import GenerateConfig, LLMClient

    os.environ["ACEMAD_SEQUENTIAL"] = "1"
    cfg = DebateConfig(method="acemad", n_agents=5, rounds=3)
    rows = []
    with FakeServer(latency=0.0) as srv, temp_outputs() as tmp:
        msgs = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Question: ...\n" + "x" * 1500},
        ]
        n = 300

        def timed(fn, n):
            fn()  # warm-up (connection, imports)
            s0 = srv.stats()["cpu_s"]
            c0 = time.process_time()
            for _ in range(n):
                fn()
            return (time.process_time() - c0) / n, (srv.stats()["cpu_s"] - s0) / n

        sdk = openai.OpenAI(api_key="sk-fake", base_url=srv.url, max_retries=0)
        rows.append(
            (
                "openai SDK chat.completions.create alone",
                *timed(lambda: sdk.chat.completions.create(model="gpt-4o-mini", messages=msgs, temperature=0.1), n),
            )
        )
        # what LLMClient once used: client.post skips create()'s re-walk of the body
        from openai.types.chat import ChatCompletion

        from acemad_utils.agents.transport import Transport

        body = dict(model="gpt-4o-mini", messages=msgs, temperature=0.1)
        rows.append(
            (
                "openai SDK client.post alone (LLMClient's old path)",
                *timed(lambda: sdk.post("/chat/completions", body=body, cast_to=ChatCompletion), n),
            )
        )
        http = Transport(srv.url, "sk-fake", timeout=60.0)
        rows.append(
            (
                "transport.Transport.post + json (LLMClient's path)",
                *timed(
                    lambda: json.loads(
                        http.post("/chat/completions", json.dumps(body).encode(), deadline=time.monotonic() + 60)[2]
                    ),
                    n,
                ),
            )
        )
        cl = LLMClient("gpt-4o-mini", srv.url, "sk-fake", max_concurrency=1)
        rows.append(
            (
                "LLMClient.generate (retries, semaphore, stats)",
                *timed(lambda: cl.generate(msgs, GenerateConfig(temperature=0.1, seed=1)), n),
            )
        )
        clc = LLMClient("gpt-4o-mini", srv.url, "sk-fake", max_concurrency=1, cache=str(tmp / "bd.sqlite"))
        k = [0]

        def cached():
            k[0] += 1
            clc.generate(msgs, GenerateConfig(temperature=0.1, seed=1), scope=str(k[0]))

        rows.append(("LLMClient.generate + cold cache (get miss + put)", *timed(cached, n)))
        for label, cache in (
            ("full debate via run_experiment, no cache", None),
            ("full debate via run_experiment, cold cache", str(tmp / "bd2.sqlite")),
        ):
            pop = LLMPopulation(
                model="gpt-4o-mini", base_url=srv.url, api_key="sk-fake", cache=cache, max_concurrency=1
            )
            runner.run_experiment(
                "bd_warm", make_items(1, seed=99, benchmark="bd"), [cfg], pop, workers=1, progress=False
            )
            s0, c0 = srv.stats()["cpu_s"], time.process_time()
            runner.run_experiment(
                f"bd_{cache is None}",
                make_items(n_questions, seed=7, benchmark="bd"),
                [cfg],
                pop,
                workers=1,
                progress=False,
            )
            calls = n_questions * 30
            rows.append((label, (time.process_time() - c0) / calls, (srv.stats()["cpu_s"] - s0) / calls))
    os.environ.pop("ACEMAD_SEQUENTIAL", None)
    print(f"{'layer (cumulative)':<52} {'client CPU ms/call':>18} {'server CPU ms/call':>18}")
    for label, c, s in rows:
        print(f"{label:<52} {1e3 * c:>18.2f} {1e3 * s:>18.2f}")
    full = rows[-1][1]
    print(
        f"sequential CPU ceiling at 30 calls/question: ~{1 / (full * 30):.1f} questions/s per free core (client only; "
        f"the fake server adds {1e3 * rows[-1][2]:.2f} ms/call in its own process). Compare the client CPU ms/call "
        "measured under concurrency in the table above: the difference is the cost of concurrency itself."
    )


def main(argv=None) -> int:
    a = parse_args(argv)
    cpq = (2 if a.calls == "two" else 1) * a.agents * a.rounds
    print("== acemad throughput against a fixed-latency endpoint ==")
    print(machine_line())
    print(f"other busy processes at start: {busy_processes()}")
    print(
        f"AceMAD N={a.agents} T={a.rounds}, calls={a.calls} ({cpq} calls/question), latency {1e3 * a.latency:g} ms, "
        f"{'no cache' if a.no_cache else 'cold sqlite cache in a temp dir'}, workers = ceil({a.workers_factor:g} F / N)"
    )
    rows = []
    with FakeServer(latency=a.latency) as srv, temp_outputs() as tmp:
        for f in a.inflight:
            rows.append(run_one(srv, tmp, f, a, a.latency, "main", profile=a.profile and f == max(a.inflight)))
        big = rows[-1]
        if not a.no_diagnose:
            rows.append(run_one(srv, tmp, big["F"], a, a.latency, "diag-w1", workers_factor=1.0))
    if not a.no_diagnose:
        with FakeServer(latency=1.0) as srv, temp_outputs() as tmp:
            rows.append(run_one(srv, tmp, big["F"], a, 1.0, "diag-L1s", per_inflight=2.0))
    print_rows(rows, a.latency, cpq)
    if not a.no_diagnose:
        print(
            "diagnostics: 'diag-w1' = workers exactly F/N (agents that finish early idle at the round barrier, their "
            "slots stay empty); 'diag-L1s' = latency 1 s, i.e. 5x less client CPU per second at the same F: if it "
            "reaches the limit, the shortfall at L = 0.2 s is CPU (GIL) cost per call, not the protocol's structure"
        )
    target = 0.9 if big["F"] <= 64 else 0.8  # the bar: 90% at 64 in flight, 80% at 256
    verdict = "meets" if big["qps"] >= target * big["limit"] else "misses"
    print(
        f"F={big['F']}: {100 * big['qps'] / big['limit']:.1f}% of the limit -> {verdict} the {100 * target:.0f}% "
        f"target; client CPU {1e3 * big['client_cpu'] / max(1, big['calls']):.2f} ms/call; "
        f"server reached {big['max_in_flight']}/{big['F']} requests in flight; "
        f"client used {big['client_cpu'] / big['wall']:.2f} cores, the fake server "
        f"{big['server_cpu'] / big['wall']:.2f}"
    )
    if big["prof"] is not None:
        print()
        big["prof"].report()
    if not a.no_breakdown:
        print("\n-- client CPU per call, by layer (sequential, zero latency) --")
        cpu_breakdown()
        print(f"other busy processes at end: {busy_processes()} | {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
