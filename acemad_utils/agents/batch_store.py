"""Where batches are kept and how their files are read: the response cache's batch tables and Batch-API JSONL.

    from acemad_utils.agents.batch_store import record_batch, open_batches, import_output, request_line
    record_batch(cache, "batch_abc", "openai", entries)      # right after batches.create, before any polling
    open_batches(cache, "openai")                            # batches a stopped process left to import
    stored, errors = import_output(output_jsonl_text, cache) # replies -> the cache (custom_id = cache key)

Every submitted batch id and the keys of its requests are written to the response cache database (tables
`batches` and `batch_requests`), so a process that is killed while it waits picks the batch up when it is
started again. A Batch-API output line is stored under its custom_id only when that key was recorded as
asked: a key is never guessed. The submitting and polling loop is batch.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Optional

from acemad_utils.agents.cache import ResponseCache, canonical_json
from acemad_utils.agents.redact import redact
from acemad_utils.agents.request import empty_reply
from acemad_utils.agents.usage import usage_tokens

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, created REAL NOT NULL, status TEXT NOT NULL, "
    "kind TEXT NOT NULL, n INTEGER NOT NULL, imported INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS batch_requests (batch_id TEXT NOT NULL, key TEXT NOT NULL, model TEXT NOT NULL, "
    "kind TEXT NOT NULL, mode TEXT, body TEXT NOT NULL, PRIMARY KEY (batch_id, key))",
)


# ----------------------------------------------------------------------------- the cache's batch tables
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


# ----------------------------------------------------------------------------- reading an output file
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


def import_output(
    text: str,
    cache: ResponseCache,
    requests: Optional[dict] = None,
    on_reply: Optional[Callable[[str, dict, dict], None]] = None,
) -> tuple[set, dict]:
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
