"""History policy: prompt tokens per question for `full` (the paper), `last_round` and `peers_last`.

`DebateConfig.history` decides what an agent sees each round: every earlier round (`full`), only the
latest round (`last_round`, Choi et al.'s stateless debate), or only its peers' latest arguments
(`peers_last`). Prompt size is what differs, so we hold everything else fixed: AceMAD (full mesh,
commitments), the paper's two-call mode, a fake endpoint (bench/_common.py) whose every argument is
exactly `--arg-chars` characters, and tokens counted from each request body with the token model

    prompt tokens = sum over messages of ceil(chars / CHARS_PER_TOKEN) + 3 per message + 3 per request

(the fake endpoint reports these as usage, so the library's own counters carry them). Completion tokens
are the same for every policy (fixed-length replies) and are printed once.

Calibration (default when llama.cpp's server and the SmolLM2 GGUF are installed; --no-calibrate skips):
real debate prompts (argue and commit, histories of 0 to 20 messages of natural-English arguments) are sent
to SmolLM2-135M-Instruct with max_tokens=1, and its reported prompt_tokens are compared with the model;
the fitted characters per token and the model's error are printed.

    python bench/history.py                 # N in {3,5,10} x T in {2,3,5}, 3 demo questions each
    python bench/history.py --quick         # N in {3,5} x T in {2,3}, 1 question, no calibration
    python bench/history.py --real          # + the three policies on the real local model (N=3, T=3, 2 questions)

Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    CHARS_PER_TOKEN,
    MSG_OVERHEAD,
    PRIME,
    FakeServer,
    busy_processes,
    local_gguf,
    machine_line,  # noqa: E402
    prompt_tokens,
)

from acemad_utils.agents.llm_agent import LLMPopulation  # noqa: E402
from acemad_utils.data.benchmarks import load_demo  # noqa: E402
from acemad_utils.protocol.config import HISTORIES, DebateConfig  # noqa: E402
from acemad_utils.protocol.debate import run_question  # noqa: E402
from acemad_utils.protocol.prompts import PERSONAS, argue_prompt, commit_prompt  # noqa: E402
from acemad_utils.protocol.schema import Message, Turn  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-N", "--agents", type=int, nargs="+", default=[3, 5, 10])
    ap.add_argument("-T", "--rounds", type=int, nargs="+", default=[2, 3, 5])
    ap.add_argument("--questions", type=int, default=3, help="demo questions averaged per cell (default 3)")
    ap.add_argument("--arg-chars", type=int, default=600, help="argument length in characters (default 600)")
    ap.add_argument("--no-calibrate", action="store_true", help="skip the calibration on the local model")
    ap.add_argument("--real", action="store_true", help="also measure the policies on the real local model")
    ap.add_argument("--quick", action="store_true", help="N in {3,5}, T in {2,3}, 1 question, no calibration")
    a = ap.parse_args(argv)
    if a.quick:
        a.agents, a.rounds, a.questions, a.no_calibrate = [3, 5], [2, 3], 1, True
    return a


# ----------------------------------------------------------------------------- token table (fake endpoint)
def table(a) -> None:
    qs = load_demo()[: a.questions]
    print(
        f"AceMAD, calls=two, arguments of {a.arg_chars} chars, {len(qs)} demo question(s) per cell; "
        f"prompt tokens per question (thousands) by history policy"
    )
    print(
        f"{'N':>3} {'T':>3} {'calls/q':>7} {'full':>9} {'last_round':>11} {'peers_last':>11} "
        f"{'last/full':>9} {'peers/full':>10} {'completion':>10} {'total full':>10} {'total last':>10}"
    )
    with FakeServer(latency=0.0, arg_chars=a.arg_chars) as srv:
        pop = LLMPopulation(model="gpt-4o-mini", base_url=srv.url, api_key="sk-fake", cache=None, max_concurrency=32)
        for n in a.agents:
            for t in a.rounds:
                cell = {}
                for h in HISTORIES:
                    cfg = DebateConfig(method="acemad", n_agents=n, rounds=t, history=h)
                    recs = [run_question(q, pop, cfg) for q in qs]
                    cell[h] = {
                        k: float(np.mean([r["usage"][k] for r in recs]))
                        for k in ("calls", "prompt_tokens", "completion_tokens")
                    }
                f, lin, p = (cell[h]["prompt_tokens"] for h in HISTORIES)
                c = cell["full"]["completion_tokens"]
                print(
                    f"{n:>3} {t:>3} {cell['full']['calls']:>7.0f} {f / 1e3:>8.1f}k {lin / 1e3:>10.1f}k "
                    f"{p / 1e3:>10.1f}k "
                    f"{lin / f:>9.2f} {p / f:>10.2f} {c / 1e3:>9.1f}k {(f + c) / 1e3:>9.1f}k {(lin + c) / 1e3:>9.1f}k"
                )
    print(
        "(completion tokens are the same for the three policies; a commit prompt repeats the visible history, so "
        "with 'full' every round's prompt grows by N arguments)"
    )


# ----------------------------------------------------------------------------- calibration (local model)
def _calibration_prompts(arg_chars: int) -> list[list[dict]]:
    demo = load_demo()
    # Natural-English arguments: the demo explanations, repeated/cut to arg_chars.
    texts = [(d.metadata.get("explanation") or d.question) for d in demo]
    args = [((t + " ") * (arg_chars // max(1, len(t)) + 1))[:arg_chars] for t in texts]
    out = []
    for i, (n_hist, kind) in enumerate(
        [
            (0, "argue"),
            (0, "commit"),
            (3, "argue"),
            (3, "commit"),
            (6, "argue"),
            (10, "commit"),
            (15, "argue"),
            (20, "commit"),
        ]
    ):
        q = demo[i]
        hist = tuple(Message(j % 5, 1 + j // 5, args[(i + j) % len(args)]) for j in range(n_hist))
        turn = Turn(q, 0, 1 + n_hist // 5, hist, want_peer_prediction=True)
        user = argue_prompt(turn) if kind == "argue" else commit_prompt(turn, args[i])
        out.append(
            [
                {"role": "system", "content": PERSONAS["Skeptic" if i % 2 else "Generalist"]},
                {"role": "user", "content": user},
            ]
        )
    return out


def calibrate(a) -> None:
    import openai

    from acemad_utils.agents.local_server import serve

    gguf = local_gguf("calibration skipped")
    if gguf is None:
        return
    prompts = _calibration_prompts(a.arg_chars)
    rows = []
    with serve(gguf) as url:  # the longest prompt (20 arguments, ~3.3k tokens) fits serve()'s n_ctx of 8192
        sdk = openai.OpenAI(base_url=url, api_key="sk-no-key-required", max_retries=0, timeout=300)
        for msgs in prompts:
            r = sdk.chat.completions.create(model="local", messages=msgs, max_tokens=1, temperature=0)
            chars = sum(len(m["content"]) for m in msgs)
            rows.append((chars, r.usage.prompt_tokens, prompt_tokens(msgs)))
        sdk.close()
    chars, real, model = (np.array(x, float) for x in zip(*rows))
    fixed = len(prompts[0]) * MSG_OVERHEAD + PRIME
    cpt_fit = float(np.sum(chars * chars) / np.sum(chars * (real - fixed)))  # least squares of real-fixed = chars/cpt
    slope, icpt = np.polyfit(chars, real, 1)
    print(
        f"calibration against {Path(gguf).name} (llama.cpp's reported prompt_tokens, max_tokens=1), "
        f"{len(rows)} real debate prompts:"
    )
    print(f"{'chars':>7} {'real tokens':>11} {'model tokens':>12} {'model/real':>10}")
    for c, r, m in rows:
        print(f"{int(c):>7} {int(r):>11} {int(m):>12} {m / r:>10.3f}")
    err = model / real - 1
    print(
        f"chars/token: model {CHARS_PER_TOKEN:g}; fitted with the model's fixed overhead {cpt_fit:.2f}; free linear "
        "fit "
        f"real = {icpt:.1f} + chars / {1 / slope:.2f}. Model error vs SmolLM2: mean {100 * err.mean():+.1f}%, "
        f"range [{100 * err.min():+.1f}%, {100 * err.max():+.1f}%]."
    )
    print(
        "(SmolLM2's tokenizer is a 49k-entry BPE. GPT-4o-mini's o200k tokenizer cannot be run offline here; its larger "
        "vocabulary needs no more tokens than a 49k BPE on English prose, so for the paper's endpoint the model is "
        "unlikely to be low by more than the range above.)"
    )


def real_subset(a) -> None:
    import tempfile

    from acemad_utils.agents.local_server import serve

    gguf = local_gguf("real-model subset skipped")
    if gguf is None:
        return
    qs = load_demo()[:2]
    print(
        f"real local model {Path(gguf).name}: AceMAD N=3 T=3, calls=two, {len(qs)} demo questions, max_tokens 160/120, "
        f"tokens as reported by llama.cpp (busy: {busy_processes(0.5)})"
    )
    print(f"{'policy':<11} {'calls/q':>7} {'prompt tok/q':>12} {'compl. tok/q':>12} {'s/q':>6}")
    with serve(gguf) as url, tempfile.TemporaryDirectory() as tmp:
        for h in HISTORIES:
            pop = LLMPopulation(
                model=Path(gguf).stem,
                base_url=url,
                cache=f"{tmp}/{h}.sqlite",
                max_tokens=(160, 120),
                max_attempts=3,
                max_concurrency=2,
            )
            t0 = time.perf_counter()
            recs = [run_question(q, pop, DebateConfig(method="acemad", n_agents=3, rounds=3, history=h)) for q in qs]
            dt = time.perf_counter() - t0
            u = {
                k: float(np.mean([r["usage"][k] for r in recs]))
                for k in ("calls", "prompt_tokens", "completion_tokens")
            }
            print(
                f"{h:<11} {u['calls']:>7.1f} {u['prompt_tokens']:>12.0f} {u['completion_tokens']:>12.0f} "
                f"{dt / len(qs):>6.1f}"
            )
            pop.cache.close()


def main(argv=None) -> int:
    a = parse_args(argv)
    print("== acemad: tokens per question by history policy ==")
    print(machine_line())
    t0 = time.perf_counter()
    if not a.no_calibrate:
        calibrate(a)
        print()
    table(a)
    if a.real:
        print()
        real_subset(a)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
