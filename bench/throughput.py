"""Can the SDK client keep an endpoint fed at a real model's latency? The client of this tree against the client of
a baseline commit (default main, its own http.client transport), in one command, on the same endpoint.

A tiny asyncio endpoint (its own process: its CPU is not the client's) answers every chat completion after the
latency its model name asks for ("sleep-1.5": 1.5 s), as a real LLM does. For each latency L and in-flight bound
F, each client (its own process, its own GIL) sends `--waves` x F calls from F threads with
LLMClient(max_concurrency=F), no cache, prompts of 2,000 characters. No client can beat F / L calls per second;
`fed` is the share of that bound it reached (1.00: the endpoint never waited on the client), `cpu/call` the
client process's CPU per call. The baseline is `git archive <ref> acemad_utils` in a temp dir.

    python bench/throughput.py                                # L in {1, 2} s, F in {64, 256}, 4 waves (~2 min)
    python bench/throughput.py --quick                        # L = 1 s, F = 64, 2 waves
    python bench/throughput.py --latency 1 --inflight 256 --waves 8 --baseline 06b308a

Prints figures and the load; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One keep-alive connection: each request answered after its model's latency."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0
            )
            body = json.loads(await reader.readexactly(length)) if length else {}
            model = str(body.get("model", ""))
            await asyncio.sleep(float(model[6:]) if model.startswith("sleep-") else 0.0)
            text = "I have weighed the options. " * 20
            reply = json.dumps({"id": "b", "object": "chat.completion", "created": 0, "model": model, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 500, "completion_tokens": 120}}).encode()  # fmt: skip
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(reply), reply))  # fmt: skip
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _serve() -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


def _client(url: str, latency: float, inflight: int, calls: int) -> None:
    """One side: `calls` chat completions from `inflight` threads; prints wall, CPU and calls as JSON."""
    from concurrent.futures import ThreadPoolExecutor

    from acemad_utils.agents.client import LLMClient

    c = LLMClient(f"sleep-{latency:g}", url, "sk-bench", max_concurrency=inflight, max_attempts=1, timeout=120)
    messages = [{"role": "user", "content": "Question: which option? " + "x" * 2000}]
    c.generate(messages, scope="warm-up")  # the SDK's import and first connection are not what we measure
    cpu, t0 = time.process_time(), time.monotonic()
    with ThreadPoolExecutor(inflight) as ex:
        list(ex.map(lambda i: c.generate(messages, scope=str(i)), range(calls)))
    print(json.dumps({"wall": time.monotonic() - t0, "cpu": time.process_time() - cpu, "calls": calls}), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, nargs="+", default=[1.0, 2.0], help="seconds per call (default 1 2)")
    ap.add_argument("--inflight", type=int, nargs="+", default=[64, 256], help="in-flight bounds F (default 64 256)")
    ap.add_argument("--waves", type=int, default=4, help="calls = waves x F (default 4)")
    ap.add_argument("--quick", action="store_true", help="L = 1 s, F = 64, 2 waves (under a minute)")
    ap.add_argument("--baseline", default="main", help="git ref of the client to compare with (default main)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--client", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.serve:
        asyncio.run(_serve())
        return 0
    if a.client:
        _client(a.client[0], float(a.client[1]), int(a.client[2]), int(a.client[3]))
        return 0
    if a.quick:
        a.latency, a.inflight, a.waves = [1.0], [64], 2
    base = tempfile.mkdtemp(prefix="acemad-baseline-")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.baseline, "acemad_utils"], capture_output=True,
                             check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", a.baseline], capture_output=True, text=True)
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"  # type: ignore[union-attr]
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; baseline {a.baseline} ({rev.stdout.strip()})")
    print(
        f"{'L s':>4} {'F':>4} {'calls':>5} | {'this tree: calls/s':>18} {'fed':>5} {'cpu/call':>8} | "
        f"{'baseline: calls/s':>17} {'fed':>5} {'cpu/call':>8} | {'ratio':>5}"
    )
    try:
        for latency in a.latency:
            for f in a.inflight:
                n, out = a.waves * f, []
                for path in (str(ROOT), base):
                    env = {**os.environ, "PYTHONPATH": path, "OPENAI_API_KEY": "sk-bench"}
                    env.pop("ACEMAD_MAX_USD", None)
                    run = subprocess.run([sys.executable, __file__, "--client", url, str(latency), str(f), str(n)],
                                         env=env, capture_output=True, text=True, check=True, cwd=path)  # fmt: skip
                    r = json.loads(run.stdout.strip().splitlines()[-1])
                    rate = r["calls"] / r["wall"]
                    out.append(f"{rate:>18.1f} {rate / (f / latency):>5.2f} {1000 * r['cpu'] / r['calls']:>6.2f}ms")
                    out.append(rate)
                print(f"{latency:>4g} {f:>4} {n:>5} | {out[0]} | {out[2][1:]} | {out[1] / out[3]:>5.2f}", flush=True)
        print(f"load {os.getloadavg()[0]:.2f} at the end")
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
