"""llama.cpp's prompt cache on the real local model: seconds per question with and without it.

`acemad_utils.agents.local_server.serve(prompt_cache=True)` starts llama-cpp-python's server with `--cache true
--cache_type ram --cache_size N`: after each reply the model state is saved under its tokens, and a new
prompt reloads the saved state with the longest common prefix instead of evaluating that prefix again.
Without it the server still reuses the KV cache of the previous prompt for their common prefix (one slot).

AceMAD N=3, T=2 (as bench/calls.py part C), two-call mode, the same demo questions in every run, each run on
its own cold response cache in a temp dir (every call goes to the server) and its own server process. The
modes alternate (off, on, on, off with --repeats 2) so a drift in the machine's load hits both. Prints
seconds per question, tokens, the share of identical replies between the modes, and the busy processes.

    python bench/prefix_cache.py                  # 10 demo questions, off/on/on/off (about 12 min on 2 idle cores)
    python bench/prefix_cache.py --quick          # 2 questions, off/on
    python bench/prefix_cache.py --questions 24 --repeats 1
    python bench/prefix_cache.py --questions 8 --repeats 1 --start-with on     # on, off

Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import busy_processes, local_gguf, machine_line, temp_outputs  # noqa: E402

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.data.transcripts import load_run  # noqa: E402
from acemad_utils.experiments import runner  # noqa: E402
from acemad_utils.protocol.config import DebateConfig  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=10, help="demo questions (default 10)")
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="off/on pairs, the second in reverse order (default 2)")
    ap.add_argument(
        "--start-with",
        choices=("off", "on"),
        default="off",
        help="the mode of the first run (a second invocation with 'on' balances the order)",
    )
    ap.add_argument("--max-tokens", type=int, nargs=2, default=(160, 120), metavar=("ARGUE", "COMMIT"))
    ap.add_argument("--quick", action="store_true", help="2 questions, one off/on pair")
    a = ap.parse_args(argv)
    if a.quick:
        a.questions, a.repeats = 2, 1
    return a


PREFIX = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
TOTAL = re.compile(r"total time =\s*([\d.]+) ms")
GEN = re.compile(r"\beval time =\s*([\d.]+) ms /\s*\d+ runs")


def server_log(path: Path) -> dict:
    """What the server's verbose log says per call: prompt tokens reused (the prefix already in the KV cache,
    from the previous prompt or a reloaded cache entry) and evaluated, prompt-cache hits and misses, and the
    server's seconds generating vs everything else (mostly prompt evaluation). llama.cpp's own "prompt eval
    time" line is not used: with llama-cpp-python it reports about 0 ms whatever the prompt length."""
    text = path.read_text(errors="replace") if path.exists() else ""
    pm = [(int(h), int(m)) for h, m in PREFIX.findall(text)]
    total = sum(float(x) for x in TOTAL.findall(text)) / 1000
    gen = sum(float(x) for x in GEN.findall(text)) / 1000
    return {
        "reused": sum(h for h, _ in pm),
        "evaluated": sum(m for _, m in pm),
        "calls": len(pm),
        "gen_s": gen,
        "other_s": total - gen,
        "hits": text.count("cache hit"),
        "misses": text.count("cache miss"),
    }


def messages(recs: list) -> list:
    return [(r["question_id"], e.get("message"), e.get("p")) for r in recs for rnd in r.get("rounds", []) for e in rnd]


def main(argv=None) -> int:
    from acemad_utils.agents.local_server import PROMPT_CACHE_BYTES, serve
    from acemad_utils.data.benchmarks import load_demo

    a = parse_args(argv)

    def stop(*_):  # `kill PID` stops the server and removes the temp dir too (a KeyboardInterrupt unwinds both)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print("== acemad: llama.cpp prompt cache on the local model ==")
    print(machine_line())
    gguf = local_gguf("skipped")
    if gguf is None:
        return 0
    qs = load_demo()[: a.questions]
    cfg = DebateConfig(method="acemad", n_agents=a.agents, rounds=a.rounds)
    order = []
    first = a.start_with == "on"
    for i in range(a.repeats):
        order += [first, not first] if i % 2 == 0 else [not first, first]
    print(
        f"{Path(gguf).name}, {len(qs)} demo questions, {cfg.label}, two-call mode, max_tokens argue/commit "
        f"{a.max_tokens[0]}/{a.max_tokens[1]}, workers 1, max_concurrency 2; prompt cache = --cache true "
        f"--cache_type ram --cache_size {PROMPT_CACHE_BYTES}; cold response cache per run; order "
        f"{' '.join('on' if x else 'off' for x in order)}"
    )
    t_start = time.perf_counter()
    runs = []
    with temp_outputs() as tmp:
        for i, on in enumerate(order):
            before = busy_processes()
            log = tmp / f"server{i}.log"
            with serve(gguf, prompt_cache=on, log_path=str(log)) as url:
                pop = LLMPopulation(
                    model=Path(gguf).stem,
                    base_url=url,
                    cache=str(tmp / f"run{i}.sqlite"),
                    max_tokens=tuple(a.max_tokens),
                    max_concurrency=2,
                    max_attempts=3,
                )
                t0 = time.perf_counter()
                runner.run_experiment(f"pc{i}", qs, [cfg], pop, workers=1, progress=False)
                wall = time.perf_counter() - t0
                u = pop.usage()
                pop.cache.close()
            _, recs = load_run(f"pc{i}")
            sl = server_log(log)
            runs.append(
                {
                    "on": on,
                    "wall": wall,
                    "usage": u,
                    "recs": recs,
                    "before": before,
                    "log": sl,
                    "failed": sum(r["status"] != "ok" for r in recs),
                }
            )
            n = len(qs)
            print(
                f"  run {i + 1} prompt cache {'on ' if on else 'off'}: {wall / n:6.2f} s/question  "
                f"({u['network_calls']} calls, {u['prompt_tokens'] / n:.0f} prompt + {u['completion_tokens'] / n:.0f} "
                f"completion tokens/question, {runs[-1]['failed']} failed; busy before: {before})",
                flush=True,
            )
            print(
                f"    server: prompt tokens reused {sl['reused'] / n:.0f}/question, evaluated {sl['evaluated'] / n:.0f}"
                f"/question ({sl['calls']} calls); {sl['gen_s'] / n:.1f} s/question generating, {sl['other_s'] / n:.1f}"
                f" s/question on the rest (prompt evaluation, cache saves and loads); prompt-cache hits {sl['hits']}, "
                f"misses {sl['misses']}",
                flush=True,
            )
    n = len(qs)
    print("\nseconds per question (each run on a cold response cache):")
    for on in (False, True):
        w = [r["wall"] / n for r in runs if r["on"] == on]
        toks = [(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"]) for r in runs if r["on"] == on]
        print(
            f"  prompt cache {'on ' if on else 'off'}: mean {statistics.mean(w):.2f} s/q  runs "
            f"[{', '.join(f'{x:.2f}' for x in w)}]  ms per token "
            f"{1000 * sum(r['wall'] for r in runs if r['on'] == on) / sum(toks):.2f}"
        )
    off = statistics.mean(r["wall"] for r in runs if not r["on"])
    on_ = statistics.mean(r["wall"] for r in runs if r["on"])
    print(f"  on / off = {on_ / off:.3f}")
    ref = messages(runs[0]["recs"])
    for r in runs[1:]:
        m = messages(r["recs"])
        same = sum(x == y for x, y in zip(ref, m))
        print(
            f"  replies identical to run 1 ({'on' if runs[0]['on'] else 'off'}) in a run with the cache "
            f"{'on' if r['on'] else 'off'}: {same}/{max(len(ref), len(m))}"
        )
    print(f"busy processes after: {busy_processes()}")
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
