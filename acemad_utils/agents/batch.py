"""CALLS_VIA batch: send a run's calls through the OpenAI Batch API (50% off, up to 24 h per batch).

    make reproduce PROFILE=paper ARGS="--set CALLS_VIA=batch"        # or calls_via: batch in the profile
    LLMPopulation(..., calls_via="batch")                              # in code; runner.run_experiment does the rest
    python -m acemad_utils.agents.batch status                                 # batches recorded in the response cache
    python -m acemad_utils.agents.batch import OUTPUT.jsonl                    # a Batch-API output file -> the cache

The loop. Debates are round-synchronous: round t+1's prompts need round t's replies. So a run in batch mode is
a sequence of passes. In a pass every question runs as usual, and the first call of a question that is not in
the response cache is not sent: it is queued (`BatchQueue`), and `Deferred` tells the runner the question is
waiting, not failed. When every question has finished or is waiting, `Batcher.flush()` submits the queue as
one batch (files.create(purpose="batch"), batches.create(endpoint="/v1/chat/completions",
completion_window="24h")), polls batches.retrieve with backoff and a progress line, reads the output and error
files and stores every reply in the response cache under its key (the key of the synchronous call: a batch
run and a synchronous run share the cache and write the same transcripts). The waiting questions then run
again, served from the cache up to their next missing call. A debate of T rounds in the two-call mode takes
2T batches (argue, commit per round), plus one for repairs when a commitment needs one.

Failures. A request on the error file, a line missing from the output, an expired, cancelled or failed batch
are queued again for the next batch; after `max_attempts` batches a request is given up and the question is
recorded as failed with the reason (like a synchronous call whose retries ran out), and retried on resume.

Restarts. Every submitted batch id and the keys of its requests are written to the response cache database
(tables `batches` and `batch_requests`) right after batches.create returns and before any polling, so a
process that is killed while it waits picks the batch up when it is started again (it polls the recorded
batch instead of resubmitting its requests). A kill inside the few milliseconds between batches.create and
that write would resubmit; nothing else does.

Other servers. `export_requests` writes the queue as a Batch-API request JSONL (custom_id = cache key) and
`import_output` stores a Batch-API output JSONL in the cache, e.g. for vLLM's offline runner:
    python -m acemad_utils.agents.batch export requests.jsonl     # the requests the last batch pass queued
    python -m vllm.entrypoints.openai.run_batch -i requests.jsonl -o output.jsonl --model <model>
    python -m acemad_utils.agents.batch import output.jsonl
    make reproduce ...                                      # the next pass reads those replies from the cache
Cost: batch calls are counted at the Batch API price (prices.Price.batch_factor); MAX_USD reserves every
request of a batch before submitting it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Optional

from acemad_utils.agents.batch_store import (
    ensure_tables,
    import_output,
    mark_batch,
    open_batches,
    record_batch,
    request_line,
)
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.data.paths import outputs

TERMINAL = ("completed", "failed", "expired", "cancelled")


class Deferred(Exception):
    """A call was queued for the next batch instead of being sent: its question waits (runner: not a failure)."""


class BatchExported(RuntimeError):
    """CALLS_VIA files: the queue was written as a Batch-API request JSONL for another runner; the run stops
    (like an interrupt) until its output is imported. str() says which file and what to do next."""


class BatchRequestFailed(RuntimeError):
    """A request failed in every batch it was sent in (error line, missing line, expired batch)."""


# ----------------------------------------------------------------------------- queue and batcher
class BatchQueue:
    """Cache misses of a pass, by key (one entry per distinct call), with the client that would have sent it."""

    def __init__(self):
        self._lock = threading.Lock()
        self.entries: dict[str, dict] = {}
        self.failed: dict[str, str] = {}  # key -> reason, after max_attempts batches

    def defer(self, client, key: str, model: str, body: dict, *, mode: Optional[str]) -> None:
        with self._lock:
            reason = self.failed.get(key)
            if reason is None:
                self.entries.setdefault(key, {"key": key, "model": model, "body": body, "mode": mode, "client": client})
        if reason is not None:
            raise BatchRequestFailed(reason)
        raise Deferred(key)

    def take(self) -> list[dict]:
        with self._lock:
            out, self.entries = list(self.entries.values()), {}
        return out


class Batcher:
    """Submits a BatchQueue through each client's SDK and waits for it (see the module doc)."""

    def __init__(
        self,
        queue: BatchQueue,
        cache: ResponseCache,
        *,
        max_attempts: int = 3,
        poll: float = 10.0,
        poll_max: float = 300.0,
        completion_window: str = "24h",
        export_dir: Optional[str] = None,
    ):
        """export_dir: write each batch there as a request JSONL and stop (CALLS_VIA files) instead of submitting."""
        self.queue, self.cache, self.export_dir = queue, cache, export_dir
        self.max_attempts, self.poll, self.poll_max = max_attempts, poll, poll_max
        self.completion_window = completion_window
        self.attempts: dict[str, int] = {}
        self.reasons: dict[str, str] = {}
        self.submitted = 0  # requests submitted by this process
        self.batches = 0
        self.last_requests: list[dict] = []

    def flush(self, should_stop: Callable[[], bool] = lambda: False, progress: bool = True) -> None:
        """Resolve every queued request: stored in the cache, or given up after max_attempts batches."""
        entries = {e["key"]: e for e in self.queue.take()}
        self.last_requests = list(entries.values())
        if self.export_dir is not None:
            self._export(list(entries.values()))
        while entries and not should_stop():
            clients = {id(e["client"]): e["client"] for e in entries.values()}
            for client in clients.values():
                mine = {k: e for k, e in entries.items() if e["client"] is client}
                self._one_round(client, mine, should_stop, progress)
            for k in list(entries):
                if self.cache.get(k) is not None:
                    entries.pop(k)
                elif self.attempts.get(k, 0) >= self.max_attempts:
                    self.queue.failed[k] = (
                        f"{self.reasons.get(k, 'no reply')} (in {self.attempts[k]} batch(es); rerun to try again)"
                    )
                    entries.pop(k)

    def _export(self, entries: list) -> None:
        assert self.export_dir is not None  # only CALLS_VIA files exports

        os.makedirs(self.export_dir, exist_ok=True)
        path = os.path.join(self.export_dir, f"requests-{time.strftime('%Y%m%d-%H%M%S')}-{len(entries)}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for e in entries:
                f.write(request_line(e["key"], e["body"]) + "\n")
        for kind in {e["client"].kind for e in entries}:  # so `import` knows each key's model, kind and mode
            record_batch(
                self.cache,
                f"file:{path}:{kind}",
                kind,
                [e for e in entries if e["client"].kind == kind],
                status="exported",
            )
        out = path.replace("requests-", "output-")
        raise BatchExported(
            f"wrote {len(entries)} request(s) to {path}. Run them with a Batch-API runner, e.g. `python -m "
            f"vllm.entrypoints.openai.run_batch -i {path} -o {out} --model <model>`, then `python -m "
            f"acemad_utils.agents.batch import {out}` and rerun: the next pass reads those replies from the cache"
        )

    def _one_round(self, client, entries: dict, should_stop, progress: bool) -> None:
        """Adopt batches a stopped process left open; submit what they do not cover; wait; import."""
        covered: set = set()
        for b in open_batches(self.cache, client.kind):
            covered |= set(b["requests"])
            self._wait_and_import(client, b["id"], b["requests"], should_stop, progress=progress)
            if should_stop():
                return
        todo = [e for k, e in entries.items() if k not in covered and self.cache.get(k) is None]
        if not todo:
            return
        held = self._reserve(client, todo)
        lines = "".join(request_line(e["key"], e["body"]) + "\n" for e in todo).encode()
        f = client._sdk.files.create(file=("acemad_batch.jsonl", lines), purpose="batch")
        b = client._sdk.batches.create(
            input_file_id=f.id, endpoint="/v1/chat/completions", completion_window=self.completion_window
        )
        record_batch(self.cache, b.id, client.kind, todo)  # before any polling: a restart adopts it
        self.submitted += len(todo)
        self.batches += 1
        requests = {e["key"]: {"model": e["model"], "kind": client.kind, "mode": e["mode"]} for e in todo}
        self._wait_and_import(client, b.id, requests, should_stop, progress=progress, held=held)

    def _reserve(self, client, todo: list) -> float:
        """MAX_USD: reserve every request of the batch at the Batch API price, or raise BudgetExceeded
        (nothing sent)."""
        if client.budget is None:
            return 0.0
        est = 0.0
        for e in todo:
            c = client.estimate_cost(e["model"], e["body"]["messages"], e["body"], batch=True)
            if c is None:
                return client.budget.reserve(None, e["model"])
            est += c
        return client.budget.reserve(est, todo[0]["model"])

    def _wait_and_import(
        self, client, batch_id: str, requests: dict, should_stop, *, progress: bool, held: float = 0.0
    ) -> None:
        t0, delay, shown = time.monotonic(), self.poll, None
        while True:
            b = client._sdk.batches.retrieve(batch_id)
            counts = getattr(b, "request_counts", None)
            line = (
                f"batch {batch_id}: {b.status}"
                + (f", {counts.completed + counts.failed}/{counts.total} done" if counts else "")
                + f" ({time.monotonic() - t0:.0f} s)"
            )
            if progress and line.split(" (")[0] != shown:
                shown = line.split(" (")[0]
                print(line, file=sys.stderr, flush=True)
            if b.status in TERMINAL:
                break
            wake = time.monotonic() + delay
            while time.monotonic() < wake:  # short naps: a Ctrl-C is noticed within a second, not after poll_max
                if should_stop():
                    return  # recorded as open: the next start polls it again
                time.sleep(min(1.0, max(0.0, wake - time.monotonic())))
            delay = min(delay * 1.5, self.poll_max)
        spent = [0.0]

        def on_reply(key, req, value):
            client.count_tokens(
                req["model"], value["prompt_tokens"], value["completion_tokens"], value["cached_tokens"], batch=True
            )
            client.add_usage(network_calls=1)
            c = client.call_cost(
                req["model"], value["prompt_tokens"], value["completion_tokens"], value["cached_tokens"], batch=True
            )
            spent[0] += c or 0.0

        stored: set = set()
        errors: dict = {}
        for fid in (getattr(b, "output_file_id", None), getattr(b, "error_file_id", None)):
            if fid:
                text = client._sdk.files.content(fid).text
                s, e = import_output(text, self.cache, requests, on_reply)
                stored |= s
                errors.update(e)
        if client.budget is not None:
            client.budget.settle(held, spent[0])
        why_missing = f"batch {b.status}" if b.status != "completed" else "missing from the batch output"
        for key in requests:
            if key in stored:
                continue
            self.attempts[key] = self.attempts.get(key, 0) + 1
            self.reasons[key] = errors.get(key, why_missing)
        mark_batch(self.cache, batch_id, b.status, imported=True)


# ----------------------------------------------------------------------------- command line
def main(argv=None) -> int:

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default=None, help="the response cache (default outputs/cache/llm.sqlite)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status", help="batches recorded in the cache")
    i = sub.add_parser("import", help="store a Batch-API output JSONL in the cache")
    i.add_argument("output")
    e = sub.add_parser("export", help="write the requests of the open batches (or all) as a Batch-API request JSONL")
    e.add_argument("out")
    a = ap.parse_args(argv)
    cache = ResponseCache(a.cache or outputs("cache") / "llm.sqlite")
    ensure_tables(cache)
    if a.cmd == "status":
        with cache.connect() as conn:
            found = conn.execute("SELECT id, status, kind, n, imported, created FROM batches ORDER BY created")
            batches = found.fetchall()
            if not batches:
                print(f"no batches recorded in {cache.path}")
            for row in batches:
                print(
                    f"{row[0]}  {row[1]:<10} {row[2]:<18} {row[3]:>6} requests  "
                    f"{'imported' if row[4] else 'open'}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(row[5]))}"
                )
        return 0
    if a.cmd == "import":
        with open(a.output, encoding="utf-8") as f:
            stored, errors = import_output(f.read(), cache)
        print(f"stored {len(stored)} replies in {cache.path}; {len(errors)} error line(s)")
        return 0
    with cache.connect() as conn:
        rows = conn.execute(
            "SELECT key, body FROM batch_requests WHERE batch_id IN (SELECT id FROM batches WHERE imported = 0)"
        ).fetchall()
    missing = [(k, b) for k, b in rows if cache.get(k) is None]
    with open(a.out, "w", encoding="utf-8") as f:
        for k, body in missing:
            f.write(request_line(k, json.loads(body)) + "\n")
    print(f"wrote {len(missing)} request(s) to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
