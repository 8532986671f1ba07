"""Response cache for LLM calls (sqlite, WAL; batch.py's tables too): the key covers all that decides a sample and the
caller's scope (five agents with one prompt get five samples); never a key or a URL. An unusable cache stops the run
before any call and is never deleted for you (its replies may have cost money); a reply is checked as it is parsed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any, Optional

from acemad_utils.agents.prices import price_of
from acemad_utils.agents.redact import preview, redact

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, kind TEXT NOT NULL,
    value TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, created REAL NOT NULL, status TEXT NOT NULL,
    kind TEXT NOT NULL, n INTEGER NOT NULL, imported INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS batch_requests (batch_id TEXT NOT NULL, key TEXT NOT NULL, model TEXT NOT NULL,
    kind TEXT NOT NULL, mode TEXT, body TEXT NOT NULL, PRIMARY KEY (batch_id, key));
CREATE TABLE IF NOT EXISTS billed (model TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL);
"""


class CacheError(RuntimeError): ...  # the cache file cannot be used (the message names the file and the fix)


def _cache_error(path: str, err: BaseException, opening: bool) -> CacheError:
    msg, folder = str(err), os.path.dirname(os.path.abspath(path))
    when = " No model call was made." if opening else ""
    if "readonly" in msg or "read-only" in msg:
        return CacheError(f"the response cache {path} is read-only ({msg}): make the file and its directory {folder} "
                          "writable (sqlite also writes a -wal and a -shm file beside it), or move the cache "
                          "elsewhere; replies must be stored or a rerun pays for them again." + when)  # fmt: skip
    if "unable to open" in msg or "disk I/O" in msg:
        what = f"{path} is a directory" if os.path.isdir(path) else f"its directory {folder} must exist and be writable"
        return CacheError(f"cannot open the response cache {path} ({msg}): {what}." + when)
    if "database or disk is full" in msg:
        return CacheError(f"the response cache {path} cannot grow ({msg}): free disk space, then rerun (answered "
                          "questions are kept in the transcripts)." + when)  # fmt: skip
    damaged = isinstance(err, sqlite3.DatabaseError) and not isinstance(err, sqlite3.OperationalError)
    if damaged or "malformed" in msg or "not a database" in msg:
        return CacheError(f"the response cache {path} is damaged or not a cache ({msg}): delete it (and {path}-wal, "
                          f"{path}-shm if present) to start a fresh cache; its stored replies are lost and will be "
                          f"asked again (`sqlite3 {path} .recover` may salvage part of them first).{when}")  # fmt: skip
    return CacheError(f"the response cache {path} failed ({type(err).__name__}: {msg})." + when)


class GarbledResponse(RuntimeError): ...  # a 2xx that is not a completion: retried (a proxy's page is transient)


_FIELDS = ("id", "choices", "created", "model", "object", "service_tier", "system_fingerprint", "usage")


def _bad_usage(usage: Any) -> str:
    """The usage field that is not a finite count >= 0, quoted, or ''."""
    if usage is None:
        return ""
    if not isinstance(usage, dict):
        return repr(usage)[:60]
    details = usage.get("prompt_tokens_details")
    fields = {**usage, **({"cached_tokens": details.get("cached_tokens")} if isinstance(details, dict) else {})}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"):
        v = fields.get(name)
        if not (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e15)):
            return f"{name}={v!r:.40}"
    return ""


def parse_reply(data: bytes, where: str) -> dict:
    """The JSON of a 2xx chat-completion body, else GarbledResponse quoting (redacted) what `where` sent instead."""

    def garbled(what: str, shown: Any) -> GarbledResponse:
        if isinstance(shown, dict):  # in the order the SDK prints a ChatCompletion
            shown = json.dumps({k: shown[k] for k in _FIELDS if k in shown} | shown, separators=(",", ":"))
        return GarbledResponse(f"{where} answered a chat completion with a 2xx reply {what}: {preview(shown)}")

    try:
        reply = json.loads(data)
    except ValueError:
        raise garbled("whose body is not JSON", data) from None
    except RecursionError:
        raise garbled("whose JSON is nested too deeply", data) from None
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        raise garbled("whose JSON body is not a chat completion", reply if isinstance(reply, dict) else
                      json.dumps(reply, default=str))  # fmt: skip
    if not reply["choices"]:
        raise garbled("with no choices", reply)
    first = reply["choices"][0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), (str, type(None))):
        raise garbled("whose first choice has no message", reply)
    if re.search("[\ud800-\udfff]", message.get("content") or ""):  # a "\ud800" escape: no transcript holds it
        raise garbled("whose content holds a lone surrogate (not text)", message["content"])
    if bad := _bad_usage(reply.get("usage")):  # the cost and MAX_USD are counted from it
        raise garbled(f"whose usage {bad} is not a token count", reply)
    return reply


def usage_of(reply: dict) -> dict:
    """The tokens a reply parse_reply accepted was billed for (0 where its usage says nothing)."""
    u = reply.get("usage") or {}
    details = u.get("prompt_tokens_details")
    cached = int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0)
    return {k: int(u.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")} | {"cached_tokens": cached}


def reply_value(reply: dict) -> tuple[Optional[dict], Optional[str]]:
    """(the text, finish_reason and tokens of a reply parse_reply accepted, None), else (None, why its first choice
    holds no text). A reply that echoes the key (a proxy, a prompt injection) is kept without it."""
    choice = reply["choices"][0]
    content = choice["message"].get("content")  # parse_reply: str or None
    if not (content or "").strip():
        tools = len(choice["message"].get("tool_calls") or [])
        extra = f", {tools} tool call(s) only" if tools else ""
        what = "content null" if content is None else "blank content"
        return None, f"an empty reply ({what}{extra}, finish_reason {choice.get('finish_reason')!r})"
    return {"text": redact(content), "finish_reason": choice.get("finish_reason"), **usage_of(reply)}, None


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


class ResponseCache(contextlib.AbstractContextManager):
    """A key -> JSON dict store; each write one INSERT OR REPLACE transaction (a crash leaves no half row)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        if self.path != ":memory:":
            try:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            except OSError as e:
                raise CacheError(f"cannot create the directory of the response cache {self.path} ({e.strerror}): "
                                 "make its parent writable, or move the cache elsewhere. No model call was made."
                                 ) from None  # fmt: skip
        self._conn: Optional[sqlite3.Connection] = None
        self._conn_lock = threading.RLock()  # one statement or transaction at a time on it
        self._lock = threading.Lock()  # guards _flights
        self._flights: dict[str, list] = {}  # key -> [lock, waiters]: see single_flight
        try:  # open it now, and prove it writable, so a bad cache stops the run before any paid call
            with self.connect() as conn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute("INSERT OR REPLACE INTO responses VALUES ('', '', '', '{}', 0)")
                finally:
                    conn.rollback()
        except sqlite3.Error as e:
            self.close()
            raise _cache_error(self.path, e, opening=True) from None

    @contextlib.contextmanager
    def single_flight(self, key: str):
        """Callers of one key one at a time: the others find the first's reply (a warm rerun equals the cold run)."""
        with self._lock:
            flight = self._flights.setdefault(key, [threading.Lock(), 0])
            flight[1] += 1
        try:
            with flight[0]:
                yield
        finally:
            with self._lock:
                flight[1] -= 1
                if flight[1] == 0:
                    del self._flights[key]

    @staticmethod
    def key(*, model: str, kind: str, params: dict, messages: list, fmt: Any, scope: str) -> str:
        blob = {"model": model, "kind": kind, "params": params, "messages": messages, "format": fmt, "scope": scope}
        return hashlib.sha256(canonical_json(blob).encode()).hexdigest()

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """The one connection, held for a statement or transaction (reentrant): under WAL a connection per thread
        would lose its page cache on every commit, and an agent thread's would stay open."""
        with self._conn_lock:
            if self._conn is None:
                conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                    with conn:
                        conn.executescript(_SCHEMA)
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn
            yield self._conn

    def _sql(self, sql: str, args: tuple = (), write: bool = False) -> list:
        try:
            with self.connect() as conn, conn if write else contextlib.nullcontext():
                return conn.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise _cache_error(self.path, e, opening=False) from None

    def get(self, key: str) -> Optional[dict]:
        rows = self._sql("SELECT value FROM responses WHERE key = ?", (key,))
        if not rows:
            return None
        try:
            value = json.loads(rows[0][0])
        except (ValueError, TypeError, RecursionError):
            value = None
        if isinstance(value, dict) and isinstance(value.get("text"), str) and value["text"].strip():
            return value
        # not a stored reply (garbled, edited, or an empty reply stored before they were failures): asked again
        self._sql("DELETE FROM responses WHERE key = ?", (key,), write=True)
        warnings.warn(f"the response cache {self.path}: dropped a damaged row (key {key[:12]}..., not a stored "
                      "reply); its call is asked again", stacklevel=2)  # fmt: skip
        return None

    def put(self, key: str, value: dict, *, model: str, kind: str) -> None:
        self._sql("INSERT OR REPLACE INTO responses (key, model, kind, value, created) VALUES (?, ?, ?, ?, ?)",
                  (key, model, kind, canonical_json(value), time.time()), write=True)  # fmt: skip

    def bill(self, model: str, tokens: dict, *, once: Optional[str] = None) -> None:
        """A billed reply with no text to store (an empty one): spending() counts its tokens; nothing reads it back.
        `once`: an id billed at most once (a Batch API output line imported again)."""
        value = canonical_json(tokens | ({"once": once} if once else {}))
        # once = NULL matches no row (SQL's NULL = NULL is not true): a call billed without an id always counts
        sql = ("INSERT INTO billed SELECT ?, ?, ? WHERE NOT EXISTS "
               "(SELECT 1 FROM billed WHERE json_extract(value, '$.once') = ?)")  # fmt: skip
        self._sql(sql, (model, value, time.time(), once), write=True)

    def spending(self, since: float) -> tuple[float, list[str]]:
        """USD of the replies stored or billed since `since` (epoch seconds; MAX_USD across kernels and the "paid:"
        line; free ones count 0), and the models among them with no price, which that sum could not count."""
        rows = self._sql(
            "SELECT model, COALESCE(json_extract(value, '$.batch'), 0), "
            "SUM(COALESCE(json_extract(value, '$.prompt_tokens'), 0)), "
            "SUM(COALESCE(json_extract(value, '$.completion_tokens'), 0)), "
            "SUM(COALESCE(json_extract(value, '$.cached_tokens'), 0)) FROM "
            "(SELECT key, model, value, created FROM responses UNION ALL SELECT 'billed', model, value, created "
            "FROM billed) WHERE created >= ? AND COALESCE(json_extract(value, '$.free'), 0) = 0 AND key != '' "
            "GROUP BY 1, 2",
            (since,),
        )
        usd = sum(p.usd(pt or 0, ct or 0, cached or 0, bool(batch)) for model, batch, pt, ct, cached in rows
                  if (p := price_of(model)))  # fmt: skip
        return usd, sorted({model for model, *_ in rows if not price_of(model)})

    def holds(self, model: str) -> bool:
        """Whether any reply of `model` is stored (a rerun, which may need no call at all)."""
        return bool(self._sql("SELECT 1 FROM responses WHERE model = ? LIMIT 1", (model,)))

    def __len__(self) -> int:
        return self._sql("SELECT COUNT(*) FROM responses")[0][0]

    def close(self) -> None:  # checkpoints the WAL into the main file; a later call reopens it
        with self._conn_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def __exit__(self, *exc) -> None:
        self.close()
