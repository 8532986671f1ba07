"""CALLS_VIA batch (the OpenAI Batch API, 50% off) or files (a Batch-API JSONL for vLLM run_batch, then `python -m
acemad_utils.agents.batch import`): a question's first uncached call is queued (Deferred), flush() stores every reply
under the synchronous call's cache key and the questions run again from the cache, so the transcripts are a
synchronous run's. A batch is recorded right after batches.create: a killed process adopts it instead of paying twice.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional

from acemad_utils.agents import cache as C
from acemad_utils.agents.cache import ResponseCache
from acemad_utils.data.paths import outputs, python


class Deferred(Exception): ...  # a call queued for the next batch: its question waits (not a failure)


class BatchExported(RuntimeError): ...  # CALLS_VIA files: str() names the request file and what to do next


class BatchRequestFailed(RuntimeError): ...  # failed in every batch it was sent in


def record_batch(cache: ResponseCache, batch_id: str, kind: str, entries: list, *, status: str = "submitted") -> None:
    """Store a submitted batch and its requests (key, model, mode, body) in one transaction."""
    with cache.connect() as conn, conn:
        conn.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?, 0)",
                     (batch_id, time.time(), status, kind, len(entries)))  # fmt: skip
        conn.executemany(
            "INSERT OR REPLACE INTO batch_requests (batch_id, key, model, kind, mode, body) VALUES (?, ?, ?, ?, ?, ?)",
            [(batch_id, e["key"], e["model"], kind, e["mode"], C.canonical_json(e["body"])) for e in entries],
        )


def _requests(conn, where: str = "", args: tuple = ()) -> dict:
    rows = conn.execute(f"SELECT key, model, kind, mode FROM batch_requests {where}", args).fetchall()
    return {key: {"model": m, "kind": kd, "mode": mode} for key, m, kd, mode in rows}


def parse_output_line(line: dict) -> tuple[Optional[dict], Optional[str]]:
    """(cache value, None) for a usable reply, else (None, why not), read as the client reads a reply; an empty reply
    that reports usage gives (its tokens with "billed": True, why): nothing to store, but paid."""
    err, resp = line.get("error"), line.get("response") or {}
    if err:
        return None, f"batch error {err.get('code') or ''}: {err.get('message') or err}".strip()
    body = resp.get("body") or {}
    if resp.get("status_code") != 200:
        msg = (body.get("error") or {}).get("message") if isinstance(body, dict) else body
        return None, f"HTTP {resp.get('status_code')} in the batch: {str(msg)[:200]}"
    try:
        reply = C.parse_reply(json.dumps(body).encode(), "a batch output line")
    except C.GarbledResponse as e:
        return None, str(e)
    value, empty = C.reply_value(reply)  # as the client reads it; an empty reply is a failed call, never cached
    if value is None:
        billed = C.usage_of(reply)
        return ({**billed, "batch": True, "billed": True} if any(billed.values()) else None), empty
    return value | {"batch": True}, None


def _lines(text: str) -> Iterator[dict[str, Any]]:
    """An output JSONL's objects; a torn line is skipped (its request counts as missing and is asked again)."""
    for raw in filter(str.strip, text.splitlines()):
        with contextlib.suppress(ValueError):
            if isinstance(line := json.loads(raw), dict):
                yield line


def import_output(text: str, cache: ResponseCache, requests: dict) -> tuple[dict, dict, dict]:
    """Store the usable replies of an output JSONL (custom_id = cache key) to recorded `requests`: (stored, errors,
    billed). An empty reply the provider billed counts as paid (MAX_USD, "paid:") once per output line, however
    often the file is imported: the line's own id, one per answered request, keys it."""
    stored, errors, billed = {}, {}, {}
    for line in _lines(text):
        if (req := requests.get(key := line.get("custom_id"))) is None:
            continue
        value, reason = parse_output_line(line)
        if value is not None and reason is None:
            cache.put(str(key), value | {"mode": req.get("mode")}, model=req["model"], kind=req["kind"])
            stored[key] = value
            continue
        errors[key] = reason
        if value is not None:  # an empty reply the provider billed: nothing to store, but paid
            cache.bill(req["model"], value, once=str(line.get("id") or key))
            billed[key] = value
    return stored, errors, billed


def requests_jsonl(entries) -> str:
    """A Batch-API request JSONL of (cache key, /chat/completions body) pairs."""
    line = {"method": "POST", "url": "/v1/chat/completions"}
    return "".join(json.dumps(line | {"custom_id": k, "body": b}, ensure_ascii=False, sort_keys=True) + "\n"
                   for k, b in entries)  # fmt: skip


class Batcher:
    """A pass's cache misses, each sent in up to max_attempts batches by its client; export_dir: CALLS_VIA files."""

    def __init__(self, cache: ResponseCache, *, max_attempts: int = 3, poll: float = 10.0, poll_max: float = 300.0,
                 export_dir: Optional[str] = None):  # fmt: skip
        self.cache, self.export_dir = cache, export_dir
        self._lock = threading.Lock()
        self.entries: dict[str, dict] = {}
        self.failed: dict[str, str] = {}  # key -> reason, after max_attempts batches
        self.max_attempts, self.poll, self.poll_max = max_attempts, poll, poll_max
        self.tries: dict[str, tuple[int, str]] = {}  # key -> (batches it went unanswered in, the last reason)
        self.submitted = 0  # requests submitted by this process

    def defer(self, client, key: str, model: str, body: dict, *, mode: Optional[str]) -> None:
        """Queue a call (Deferred), or BatchRequestFailed once it failed max_attempts batches."""
        with self._lock:
            if (reason := self.failed.get(key)) is None:
                self.entries.setdefault(key, {"key": key, "model": model, "body": body, "mode": mode, "client": client})
        if reason is not None:
            raise BatchRequestFailed(reason)
        raise Deferred(key)

    def flush(self, should_stop: Callable[[], bool] = lambda: False, progress: bool = True) -> None:
        """Every queued request stored in the cache, or given up after max_attempts batches."""
        with self._lock:
            entries, self.entries = self.entries, {}
        if self.export_dir is not None:
            self._export(self.export_dir, list(entries.values()))
        while entries and not should_stop():
            for client in {id(e["client"]): e["client"] for e in entries.values()}.values():
                self._one_round(client, {k: e for k, e in entries.items() if e["client"] is client}, should_stop,
                                progress)  # fmt: skip
            for k in list(entries):
                if self.cache.get(k) is not None:
                    entries.pop(k)
                elif (tries := self.tries.get(k, (0, "")))[0] >= self.max_attempts:
                    self.failed[k] = f"{tries[1]} (in {tries[0]} batch(es); rerun to try again)"
                    entries.pop(k)

    def _export(self, export_dir: str, entries: list) -> None:
        os.makedirs(export_dir, exist_ok=True)
        path = os.path.join(export_dir, f"requests-{time.strftime('%Y%m%d-%H%M%S')}-{len(entries)}.jsonl")
        Path(path).write_text(requests_jsonl((e["key"], e["body"]) for e in entries), encoding="utf-8")
        for kind in {e["client"].kind for e in entries}:  # so `import` knows each key's model, kind and mode
            record_batch(self.cache, f"file:{path}:{kind}", kind, [e for e in entries if e["client"].kind == kind],
                         status="exported")  # fmt: skip
        out = path.replace("requests-", "output-")
        raise BatchExported(
            f"wrote {len(entries)} request(s) to {path}. Run them with a Batch-API runner, e.g. `python -m "
            f"vllm.entrypoints.openai.run_batch -i {path} -o {out} --model <model>`, then `{python()} -m "
            f"acemad_utils.agents.batch --cache {shlex.quote(str(self.cache.path))} import {out}` and rerun: the next "
            "pass reads those replies from the cache"
        )

    def _one_round(self, client, entries: dict, should_stop, progress: bool) -> None:
        """Adopt batches a stopped process left open; submit what they do not cover; wait; import."""
        with self.cache.connect() as conn:
            open_ = conn.execute("SELECT id FROM batches WHERE imported = 0 AND id NOT LIKE 'file:%' AND kind = ? "
                                 "ORDER BY created", (client.kind,)).fetchall()  # fmt: skip
            open_ = [(bid, _requests(conn, "WHERE batch_id = ?", (bid,))) for (bid,) in open_]
        covered = {key for _, requests in open_ for key in requests}
        for bid, requests in open_:
            self._wait_and_import(client, bid, requests, should_stop, progress)
            if should_stop():
                return
        todo = [e for k, e in entries.items() if k not in covered and self.cache.get(k) is None]
        if not todo:
            return
        # MAX_USD: every request at the Batch API price, or BudgetExceeded (none sent)
        costs = {e["key"]: client.estimate_cost(e["model"], e["body"]["messages"], e["body"], batch=True) for e in todo}
        unpriced = [e["model"] for e in todo if costs[e["key"]] is None]
        held = client.budget.reserve(None if unpriced else sum(costs.values()), (unpriced or [todo[0]["model"]])[0])
        lines = requests_jsonl((e["key"], e["body"]) for e in todo).encode()
        f = client.sdk.files.create(file=("acemad_batch.jsonl", lines), purpose="batch")
        b = client.sdk.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        record_batch(self.cache, b.id, client.kind, todo)  # before any polling: a restart adopts it
        self.submitted += len(todo)
        requests = {e["key"]: {"model": e["model"], "kind": client.kind, "mode": e["mode"]} for e in todo}
        stored = self._wait_and_import(client, b.id, requests, should_stop, progress, held)
        for k, v in stored.items():  # the next batch's holds follow the endpoint's counts, as a synchronous call's do
            client.reported(entries[k]["body"]["messages"], v["prompt_tokens"])

    def _wait_and_import(self, client, batch_id: str, requests: dict, should_stop, progress: bool,
                         held: float = 0.0) -> dict:  # fmt: skip
        """The replies it stored, by key ({} when stopped before the batch ended)."""
        t0, delay, shown = time.monotonic(), self.poll, None
        while True:
            b = client.sdk.batches.retrieve(batch_id)
            counts = getattr(b, "request_counts", None)
            line = f"batch {batch_id}: {b.status}" + (f", {counts.completed + counts.failed}/{counts.total} done"
                                                      if counts else "")  # fmt: skip
            if progress and line != shown:
                shown = line
                print(f"{line} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
            if b.status in ("completed", "failed", "expired", "cancelled"):
                break
            for _ in range(naps := math.ceil(delay)):  # naps of at most 1 s: a Ctrl-C is noticed within one
                if should_stop():
                    return {}  # recorded as open: the next start polls it again
                time.sleep(delay / naps)
            delay = min(delay * 1.5, self.poll_max)
        stored: dict = {}
        errors: dict = {}
        billed: dict = {}
        for fid in filter(None, (getattr(b, "output_file_id", None), getattr(b, "error_file_id", None))):
            s, e, paid = import_output(client.sdk.files.content(fid).text, self.cache, requests)
            stored, errors, billed = stored | s, errors | e, billed | paid
        spent = sum(client.count_tokens(requests[k]["model"], v["prompt_tokens"], v["completion_tokens"],
                                        v["cached_tokens"], batch=True) or 0.0
                    for k, v in (stored | billed).items())  # fmt: skip
        client.add_usage(network_calls=len(stored))
        client.budget.settle(held, spent)
        why_missing = f"batch {b.status}" if b.status != "completed" else "missing from the batch output"
        for key in requests.keys() - stored.keys():
            self.tries[key] = (self.tries.get(key, (0, ""))[0] + 1, errors.get(key, why_missing))
        with self.cache.connect() as conn, conn:
            conn.execute("UPDATE batches SET status = ?, imported = 1 WHERE id = ?", (b.status, batch_id))
        return stored


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # the first paragraph: whole sentences
    ap.add_argument("--cache", default=None, help="the response cache (default outputs/cache/llm.sqlite)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status", help="batches recorded in the cache")
    sub.add_parser("import", help="store a Batch-API output JSONL in the cache").add_argument("output")
    sub.add_parser("export", help="the open batches' requests as a Batch-API request JSONL").add_argument("out")
    a = ap.parse_args(argv)
    cache = ResponseCache(a.cache or outputs("cache") / "llm.sqlite")
    if a.cmd == "status":
        with cache.connect() as conn:
            batches = list(conn.execute("SELECT id, status, kind, n, imported, created FROM batches ORDER BY created"))
        if not batches:
            print(f"no batches recorded in {cache.path}")
        for bid, status, kind, n, imported, created in batches:
            print(f"{bid}  {status:<10} {kind:<18} {n:>6} requests  {'imported' if imported else 'open'}  "
                  f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(created))}")  # fmt: skip
    elif a.cmd == "import":
        try:
            text = Path(a.output).read_text(encoding="utf-8")
        except OSError as e:
            sys.exit(f"error: cannot read the output file: {e}")
        with cache.connect() as conn:
            requests = _requests(conn)
        ids = [line.get("custom_id") for line in _lines(text)]
        if ids and not any(k in requests for k in ids):  # another cache (another ACEMAD_ROOT, smoke): store nothing
            sys.exit(f"error: none of the {len(ids)} output lines answers a request recorded in {cache.path}; import "
                     "into the cache the run exported them from (--cache PATH, as the run's message says)")  # fmt: skip
        stored, errors, billed = import_output(text, cache, requests)
        unknown = sum(k not in requests for k in ids)
        print(f"stored {len(stored)} replies in {cache.path}; {len(errors)} error line(s)"
              + (f" ({len(billed)} of them empty replies that were billed: counted as paid)" if billed else "")
              + (f"; {unknown} line(s) answer no request recorded there (skipped)" if unknown else ""))  # fmt: skip
    else:
        with cache.connect() as conn:
            rows = conn.execute("SELECT key, body FROM batch_requests WHERE batch_id IN (SELECT id FROM batches "
                                "WHERE imported = 0)").fetchall()  # fmt: skip
        missing = [(k, b) for k, b in rows if cache.get(k) is None]
        Path(a.out).write_text(requests_jsonl((k, json.loads(b)) for k, b in missing), encoding="utf-8")
        print(f"wrote {len(missing)} request(s) to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
