"""Shared helpers of the bench/ scripts: a fake endpoint in its own process, a token model, temp outputs.

    from _common import FakeServer, token_model, temp_outputs, machine_line
    with FakeServer(latency=0.2, arg_chars=600) as srv:      # a separate process: its CPU is not ours
        pop = LLMPopulation(model="gpt-4o-mini", base_url=srv.url, api_key="sk-fake", cache=None)
        ...
        srv.stats()   # {"count", "max_in_flight", "cpu_s", ...} measured inside the server process

The fake endpoint is tests/fake_openai.FakeOpenAI (unchanged) run in a child process
(`python bench/_common.py --serve CONFIG`), so its request handling never competes with the measured
client for the GIL. Two settings of that private process differ from the test fixture, both to make it a
faithful stand-in for a real endpoint and not a bottleneck: HTTP/1.1 keep-alive (the OpenAI SDK pools
connections) with TCP_NODELAY, and a listen backlog of 1024 instead of socketserver's 5.

Replies are a deterministic function of the request (sha256 of its messages and per-call seed), so a cold
rerun gives the same transcript as the first run (with sampled=True they also depend on the arrival number, like an LLM
sampled at temperature > 0):
- a free-text call (argue, moderator summary) gets an argument of exactly `arg_chars` characters;
- a structured call (commit, or single-call "act") gets JSON with self_prob / peer_prediction over the
  labels named in the request's schema (+ an `arg_chars` argument when the schema asks for one).
Every reply reports usage from the token model below (the fake's own usage is fixed at 10/5), so the
library's own counters and transcripts carry modelled token counts.

Token model (acemad_utils/agents/tokenmodel.py, calibrated once against the real local model, see bench/history.py):
    tokens(text)            = ceil(len(text) / CHARS_PER_TOKEN)
    prompt_tokens(messages) = sum over messages of tokens(content) + MSG_OVERHEAD, + PRIME
Replies: acemad_utils.cost.estimate.debate_reply, the same model `make estimate` replays in process.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/x.py` from a checkout without installing
    sys.path.insert(0, str(ROOT))


def local_gguf(skipped: str) -> Optional[str]:
    """The local model's GGUF path if the llama.cpp server can run here, else None after printing
    "<skipped>: <why>" (a bench part that needs the real model is skipped, never faked)."""
    from acemad_utils.agents.local_server import LocalServerError, check_server_installed, default_gguf

    try:
        check_server_installed()
        return default_gguf()
    except LocalServerError as e:
        print(f"{skipped}: {e}")
        return None


# ----------------------------------------------------------------------------- token model
# One token model and one fake debate model for the package's estimates and these scripts (they cannot drift):
# acemad_utils/agents/tokenmodel.py (calibration notes there) and acemad_utils/cost/estimate.py.
from acemad_utils.agents.tokenmodel import CHARS_PER_TOKEN, MSG_OVERHEAD, PRIME, prompt_tokens, tokens  # noqa: E402,F401
from acemad_utils.agents.tokenmodel import describe as token_model  # noqa: E402,F401
from acemad_utils.cost.estimate import FILLER, argument_text, debate_reply  # noqa: E402,F401


# ----------------------------------------------------------------------------- machine
def load() -> str:
    try:
        a, b, c = os.getloadavg()
        return f"load {a:.2f} {b:.2f} {c:.2f}"
    except OSError:
        return "load n/a"


def machine_line() -> str:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return (
        f"machine: python {platform.python_version()} | {usable} usable cores | {platform.machine()} "
        f"{platform.system()} {platform.release()} | {load()} (1/5/15 min)"
    )


def _proc_ticks() -> dict:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    raw = f.read()
                name = raw[raw.index("(") + 1 : raw.rindex(")")]
                fields = raw[raw.rindex(")") + 2 :].split()
                out[int(d)] = (name, int(fields[11]) + int(fields[12]))  # utime + stime
            except (OSError, ValueError, IndexError):
                pass
    return out


def busy_processes(interval: float = 1.0, min_share: float = 0.15) -> str:
    """Other processes using >= min_share of a core over the next `interval` seconds (from /proc), so the
    CPU contention behind a timing is on record. Excludes this process and its children."""
    try:
        a = _proc_ticks()
        time.sleep(interval)
        b = _proc_ticks()
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return "n/a"
    mine = {os.getpid()}
    busy = []
    for pid, (name, t) in b.items():
        if pid in mine or pid not in a:
            continue
        share = (t - a[pid][1]) / hz / interval
        if share >= min_share:
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                cmd = name
            if str(Path(__file__).resolve()) in cmd:  # our own fake server
                continue
            busy.append((share, f"{name}[{' '.join(cmd.split()[1:3])[:60]}] {100 * share:.0f}%"))
    return ", ".join(x for _, x in sorted(busy, reverse=True)) or "none"


def strip_usage(obj):
    """obj without any "usage" entry at any depth (records, rounds, the Single Agent's runs): usage says how a
    reply was obtained (network, cache or batch), not what it was, so runs are compared without it."""
    if isinstance(obj, dict):
        return {k: strip_usage(v) for k, v in obj.items() if k != "usage"}
    if isinstance(obj, list):
        return [strip_usage(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------- temp outputs
@contextlib.contextmanager
def temp_outputs(prefix: str = "acemad_bench_") -> Iterator[Path]:
    """ACEMAD_ROOT at a temp dir (paths.root() reads it at call time; child processes inherit it): outputs/,
    runs and subsets go there, never under the repo."""
    import shutil

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    saved = os.environ.get("ACEMAD_ROOT")
    os.environ["ACEMAD_ROOT"] = str(tmp)
    try:
        yield tmp
    finally:
        if saved is None:
            os.environ.pop("ACEMAD_ROOT", None)
        else:
            os.environ["ACEMAD_ROOT"] = saved
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- the server process
class FakeServer:
    """tests/fake_openai.FakeOpenAI in a child process with a fixed latency per request."""

    def __init__(self, latency: float = 0.0, arg_chars: int = 600, sampled: bool = False, batch_delay: float = 0.0):
        """sampled=True: the reply also depends on the request's arrival number, like an LLM sampled at
        temperature > 0 (two identical requests get different answers). batch_delay: seconds from
        batches.create until a batch completes (its lines are answered without the per-call latency)."""
        self.cfg = {"latency": latency, "arg_chars": arg_chars, "sampled": sampled, "batch_delay": batch_delay}
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""

    def __enter__(self) -> FakeServer:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", json.dumps(self.cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise RuntimeError(f"fake server did not start: {self.url!r}")
        return self

    def _cmd(self, c: str) -> dict:
        self.proc.stdin.write(c + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def stats(self) -> dict:
        """count, max_in_flight, in_flight, cpu_s (server process CPU seconds), batches (lines per batch, in
        submission order) and batch_statuses."""
        return self._cmd("stats")

    def reset(self) -> dict:
        return self._cmd("reset")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def _serve(cfg: dict) -> None:
    import http.server
    import socketserver

    sys.path.insert(0, str(ROOT / "tests"))
    import fake_openai as F

    # Private to this process: keep-alive like a real endpoint, and a backlog that a burst of 64 connects
    # cannot overflow (socketserver's default of 5 drops SYNs; the client then waits 1 s to retransmit).
    http.server.BaseHTTPRequestHandler.protocol_version = "HTTP/1.1"
    socketserver.TCPServer.request_queue_size = 1024
    # With keep-alive, headers and body go out as two writes; Nagle + the client's delayed ACK would hold
    # the body back ~40 ms per reply. Real servers set TCP_NODELAY too.
    socketserver.StreamRequestHandler.disable_nagle_algorithm = True
    latency, arg_chars, sampled = float(cfg["latency"]), int(cfg["arg_chars"]), bool(cfg.get("sampled"))

    def script(body, n):
        content, pt, ct = debate_reply(body, arg_chars, salt=f"#{n}" if sampled else "")
        return F.Reply(content, delay=latency, prompt_tokens=pt, completion_tokens=ct)

    srv = F.FakeOpenAI(script, batch_delay=float(cfg.get("batch_delay", 0.0)))
    with srv:
        print(srv.url, flush=True)
        cpu0 = time.process_time()
        for line in sys.stdin:
            c = line.strip()
            if c == "quit":
                break
            with srv._lock:
                st = {
                    "count": srv.count,
                    "max_in_flight": srv.max_in_flight,
                    "in_flight": srv.in_flight,
                    "cpu_s": time.process_time() - cpu0,
                    "batches": [b["request_counts"]["total"] for b in srv.batches.values()],
                    "batch_statuses": [b["status"] for b in srv.batches.values()],
                }
                if c == "reset":
                    srv.count, srv.max_in_flight = 0, srv.in_flight
                    srv.requests.clear()
                    cpu0 = time.process_time()
                elif c == "stats":
                    pass
            print(json.dumps(st), flush=True)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--serve":
    _serve(json.loads(sys.argv[2]))
