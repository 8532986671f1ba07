"""CALLS_VIA batch: a run's calls through the OpenAI Batch API (50% off, up to 24 h per batch); CALLS_VIA files:
the requests written as a Batch-API JSONL for another runner (vLLM run_batch), its output imported.

    LLMPopulation(..., calls_via="batch")              # runner.run_experiment does the rest
    python -m acemad_utils.agents.batch status         # batches recorded in the response cache
    python -m acemad_utils.agents.batch export requests.jsonl / import output.jsonl

Debates are round-synchronous (round t+1's prompts need round t's replies), so a batch run is a sequence of
passes: a question's first call that is not in the response cache is queued (`BatchQueue`) and `Deferred` tells
the runner it waits, not failed; `Batcher.flush()` submits the queue as one batch, polls it, and stores every
reply under the synchronous call's cache key (the transcripts are those of a synchronous run); the waiting
questions then run again from the cache. A request on the error file, missing from the output, or in an
expired batch is queued again; after `max_attempts` batches its question fails with the reason (retried on
resume). Every batch id and its request keys are written to the cache database (tables `batches`,
`batch_requests`) right after batches.create, so a process killed while polling adopts the batch on restart
instead of resubmitting it. An output line is stored only under a key recorded as asked. MAX_USD reserves every
request of a batch before it is submitted; batch calls are counted at the Batch API price.
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

from acemad_utils.agents.cache import ResponseCache, canonical_json, empty_reply, usage_tokens
from acemad_utils.agents.redact import redact
from acemad_utils.data.paths import outputs

TERMINAL = ("completed", "failed", "expired", "cancelled")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, created REAL NOT NULL, status TEXT NOT NULL, "
    "kind TEXT NOT NULL, n INTEGER NOT NULL, imported INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS batch_requests (batch_id TEXT NOT NULL, key TEXT NOT NULL, model TEXT NOT NULL, "
    "kind TEXT NOT NULL, mode TEXT, body TEXT NOT NULL, PRIMARY KEY (batch_id, key))",
)


def ensure_tables(cache: ResponseCache) -> None:
    with cache.connect() as conn, conn:
        for stmt in _SCHEMA:
            conn.execute(stmt)


def record_batch(cache: ResponseCache, batch_id: str, kind: str, entries: list, *, status: str = "submitted") -> None:
    """Store a submitted batch and its requests (key, model, mode, body) in one transaction."""
    ensure_tables(cache)
    with cache.connect() as conn, conn:
        conn.execute(
            "INSERT OR REPLACE INTO batches (id, created, status, kind, n, imported) VALUES (?, ?, ?, ?, ?, 0)",
            (batch_id, time.time(), status, kind, len(entries)),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO batch_requests (batch_id, key, model, kind, mode, body) VALUES (?, ?, ?, ?, ?, ?)",
            [(batch_id, e["key"], e["model"], kind, e["mode"], canonical_json(e["body"])) for e in entries],
        )


def open_batches(cache: ResponseCache, kind: Optional[str] = None) -> list[dict]:
    """Recorded batches not imported yet (submitted by this process or by one that was stopped)."""
    ensure_tables(cache)
    with cache.connect() as conn:
        rows = conn.execute(
            "SELECT id, kind, status, n FROM batches WHERE imported = 0 AND id NOT LIKE 'file:%' "
            + ("AND kind = ? " if kind else "")
            + "ORDER BY created",
            (kind,) if kind else (),
        ).fetchall()
        out = []
        for bid, k, status, n in rows:
            reqs = conn.execute(
                "SELECT key, model, kind, mode FROM batch_requests WHERE batch_id = ?", (bid,)
            ).fetchall()
            out.append(
                {
                    "id": bid,
                    "kind": k,
                    "status": status,
                    "n": n,
                    "requests": {key: {"model": m, "kind": kd, "mode": mode} for key, m, kd, mode in reqs},
                }
            )
    return out


def mark_batch(cache: ResponseCache, batch_id: str, status: str, imported: bool = False) -> None:
    with cache.connect() as conn, conn:
        conn.execute("UPDATE batches SET status = ?, imported = ? WHERE id = ?", (status, int(imported), batch_id))


def parse_output_line(line: dict) -> tuple[Optional[dict], Optional[str]]:
    """(cache value, None) for a usable reply, or (None, reason) for an error line."""
    err = line.get("error")
    resp = line.get("response") or {}
    if err:
        return None, f"batch error {err.get('code') or ''}: {err.get('message') or err}".strip()
    if resp.get("status_code") != 200:
        body = resp.get("body") or {}
        msg = (body.get("error") or {}).get("message") if isinstance(body, dict) else body
        return None, f"HTTP {resp.get('status_code')} in the batch: {str(msg)[:200]}"
    body = resp.get("body") or {}
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0].get("message"), dict):
        return None, "a batch reply that is not a chat completion"
    empty = empty_reply(choices[0])
    if empty is not None:  # a failed call, never cached (the client's rule, request.EmptyReply)
        return None, empty
    pt, ct, cached = usage_tokens(body.get("usage"))
    return {
        "text": redact(choices[0]["message"].get("content") or ""),  # as the client's replies: no key kept
        "finish_reason": choices[0].get("finish_reason"),
        "prompt_tokens": pt,
        "completion_tokens": ct,
        "cached_tokens": cached,
        "batch": True,
    }, None


def import_output(text: str, cache: ResponseCache, requests: Optional[dict] = None,
                  on_reply: Optional[Callable[[str, dict, dict], None]] = None) -> tuple[set, dict]:  # fmt: skip
    """Store every usable reply of a Batch-API output JSONL in the cache (custom_id = cache key). `requests`
    ({key: {"model", "kind", "mode"}}) says what was asked; by default it is read from the cache's batch
    tables. Returns (keys stored, {key: reason} of error lines)."""
    stored, errors = set(), {}
    if requests is None:
        ensure_tables(cache)
        with cache.connect() as conn:
            rows = conn.execute("SELECT key, model, kind, mode FROM batch_requests").fetchall()
        requests = {k: {"model": m, "kind": kd, "mode": mode} for k, m, kd, mode in rows}
    for raw in text.splitlines():
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a torn line: its request counts as missing and is asked again
        key = line.get("custom_id")
        req = requests.get(key)
        if req is None:
            continue  # not ours (or not recorded): never guess a key
        value, reason = parse_output_line(line)
        if value is None:
            errors[key] = reason
            continue
        value["mode"] = req.get("mode")
        cache.put(key, value, model=req["model"], kind=req["kind"])
        stored.add(key)
        if on_reply is not None:
            on_reply(key, req, value)
    return stored, errors


def request_line(key: str, body: dict) -> str:
    return json.dumps(
        {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body},
        ensure_ascii=False,
        sort_keys=True,
    )


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

    def __init__(self, queue: BatchQueue, cache: ResponseCache, *, max_attempts: int = 3, poll: float = 10.0,
                 poll_max: float = 300.0, completion_window: str = "24h",
                 export_dir: Optional[str] = None):  # fmt: skip
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
        f = client.sdk.files.create(file=("acemad_batch.jsonl", lines), purpose="batch")
        b = client.sdk.batches.create(
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

    def _wait_and_import(self, client, batch_id: str, requests: dict, should_stop, *, progress: bool,
                         held: float = 0.0) -> None:  # fmt: skip
        t0, delay, shown = time.monotonic(), self.poll, None
        while True:
            b = client.sdk.batches.retrieve(batch_id)
            counts = getattr(b, "request_counts", None)
            done = f", {counts.completed + counts.failed}/{counts.total} done" if counts else ""
            line = f"batch {batch_id}: {b.status}{done} ({time.monotonic() - t0:.0f} s)"
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
                text = client.sdk.files.content(fid).text
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
