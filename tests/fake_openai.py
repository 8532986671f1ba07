"""A fake OpenAI-compatible server on 127.0.0.1 (stdlib only): `script` (a list of replies, then `default`, or
f(body, n) -> Reply | str) answers chat completions and Batch API lines; a fault mode (MODES, set_mode) changes every
later reply; FaultInjector is a deterministic fake debater with seeded faults."""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import itertools
import json
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional, Union


@dataclass
class Reply:
    content: str = "ok"
    status: int = 200
    headers: dict = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (use > client timeout to provoke a timeout)
    drop: bool = False  # close the connection without answering
    raw: Optional[bytes] = None  # send these bytes as the body instead of a well-formed completion
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: Optional[int] = None  # reported as usage.prompt_tokens_details.cached_tokens when set
    kind: str = "ok"  # "ok" or the injected fault's name


Script = Union[Callable[[dict, int], Union[Reply, str]], Iterable[Union[Reply, str]], None]


def completion(content, model: str = "fake", n: int = 0, pt: int = 10, ct: int = 5, finish: str = "stop", **u) -> dict:
    """A chat.completion JSON (`content` a str, or the whole message dict)."""
    message = content if isinstance(content, dict) else {"role": "assistant", "content": content}
    usage = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct, **u}
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}  # fmt: skip


def completion_body(r: Reply, body: dict, n: int) -> dict:
    """The chat.completion JSON for a Reply (also the `body` of a Batch API output line)."""
    cached = {} if r.cached_tokens is None else {"prompt_tokens_details": {"cached_tokens": r.cached_tokens}}
    return completion(r.content, body.get("model", "fake"), n, r.prompt_tokens, r.completion_tokens, **cached)


def error(status: int, message: str = "error", **headers) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": None}})
    return Reply(status=status, raw=body.encode(), headers=headers)


#: Mode "unparseable": every reply is one of these (Spanish and Chinese prose, NaN / Infinity / negative beliefs,
#: labels that are no option), so every commitment fails to parse, also after the repair call.
UNPARSEABLE = (
    "Creo que la respuesta correcta es la primera opción, sin ninguna duda.",
    "我认为正确答案是第一个选项。",
    '{"self_prob": {"A": "NaN", "B": "NaN"}, "peer_prediction": {"A": "NaN"}}',
    '{"self_prob": {"A": Infinity, "B": 0.1}, "peer_prediction": {"A": Infinity}}',
    '{"self_prob": {"A": -0.7, "B": -0.3}, "peer_prediction": {"A": -1}}',
    '{"self_prob": {"Z": 0.9, "Q": 0.1}, "peer_prediction": {"Z": 1}}',
)
HOSTILE = "<!--<script>alert(1)</script>--> ]]> \u2028 </script><script>document.body.innerHTML=''</script>"


def _hash(body: dict) -> int:
    return int(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest(), 16)


def _hostile(text: str) -> str:
    """HOSTILE in a free-text reply, or in the "argument" of a JSON one (which then still parses)."""
    try:
        obj = json.loads(text)
    except ValueError:
        return f"{text} {HOSTILE}"
    if isinstance(obj, dict) and isinstance(obj.get("argument"), str):
        return json.dumps(obj | {"argument": obj["argument"] + " " + HOSTILE})
    return text


def _empty(body: dict) -> Reply:
    """Content null, or a tool call only (no content key at all), by the request's hash."""
    call = {"id": "call_0", "type": "function", "function": {"name": "answer", "arguments": "{}"}}
    tool = _hash(body) % 2
    message = {"role": "assistant", **({"tool_calls": [call]} if tool else {"content": None})}
    done = completion(message, body.get("model", "fake"), ct=0, finish="tool_calls" if tool else "length")
    return Reply(raw=json.dumps(done).encode(), kind="empty")


#: Each fault mode: the reply it gives instead of the script's `r` (fake, request body, r, Authorization value).
#: down closes the connection; hang holds it for hang_max s (or until the mode changes); trickle sends the reply
#: one byte every trickle_interval s, status line included.
MODE_REPLIES: dict[str, Callable] = {
    "ok": lambda f, body, r, auth: r,
    "down": lambda f, body, r, auth: Reply(drop=True, kind="down"),
    "hang": lambda f, body, r, auth: r,
    "trickle": lambda f, body, r, auth: r,
    "429": lambda f, body, r, auth: error(429, "rate limited (fake)", **{"Retry-After": f.retry_after}),
    "401": lambda f, body, r, auth: error(401, f"Incorrect API key provided: {auth.removeprefix('Bearer ')}"),
    "huge": lambda f, body, r, auth: Reply(r.content + "x" * max(0, f.huge_bytes - len(r.content)), kind="huge"),
    "hostile": lambda f, body, r, auth: Reply(_hostile(r.content), kind="hostile"),
    "unparseable": lambda f, body, r, auth: Reply(UNPARSEABLE[_hash(body) % len(UNPARSEABLE)], kind="unparseable"),
    "empty": lambda f, body, r, auth: _empty(body),
}
MODES = tuple(MODE_REPLIES)


class FakeOpenAI:
    def __init__(self, script: Script = None, default: Union[Reply, str, Callable] = "ok", models_status: int = 200,
                 batch_delay: float = 0.0, batch_error: Optional[Callable] = None,
                 batch_missing: Optional[Callable] = None, expire: Iterable[int] = (), mode: str = "ok",
                 retry_after: str = "1", huge_bytes: int = 2_000_000, hang_max: float = 120.0,
                 trickle_interval: float = 1.0, models: Optional[list] = None, batch_api: bool = True):  # fmt: skip
        self.batch_api = batch_api  # False: /files and /batches answer 404, as llama.cpp's server does
        self.models = models  # served: listed, and a chat request for another model gets 404 (None: any, "fake" listed)
        self.unserved: list[str] = []  # the model names of chat requests refused that way (not counted)
        self.mode, self.retry_after, self.huge_bytes, self.hang_max = "ok", retry_after, huge_bytes, hang_max
        self.trickle_interval, self.default, self.models_status = trickle_interval, default, models_status
        self.set_mode(mode)
        self.modes: Counter = Counter()  # chat requests answered in each mode
        self._fn = script if callable(script) else None
        self._queue = deque(script) if script is not None and not callable(script) else deque()
        self.requests: list[dict] = []
        self.auth: set[str] = set()  # Authorization values seen
        self.targets: list[str] = []  # request targets as sent (path and query)
        self.count = self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self.batch_delay, self.batch_error, self.batch_missing = batch_delay, batch_error, batch_missing
        self.expire = set(expire)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.batch_lines: list[str] = []  # every custom_id submitted
        self._seen_ids: Counter = Counter()  # custom_id -> batches it was in (the attempt number)

    # ------------------------------------------------------------------ Batch API
    def _batch_view(self, bid: str) -> dict:
        """The batch object; its lines are answered (once) when its delay has passed."""
        with self._lock:
            b = self.batches[bid]
            if b["status"] == "in_progress" and time.monotonic() - b["_t0"] >= self.batch_delay:
                self._finish(b)
            return {k: v for k, v in b.items() if not k.startswith("_")}

    def _finish(self, b: dict) -> None:  # under self._lock
        lines = [json.loads(x) for x in self.files[b["input_file_id"]].decode().splitlines() if x.strip()]
        out, err = [], []
        for line in [] if b["_n"] in self.expire else lines:
            cid, body, n = line["custom_id"], line["body"], self.count
            attempt, self.count = self._seen_ids[cid] - 1, n + 1
            if self.batch_missing and self.batch_missing(cid, body, attempt):
                continue
            if msg := self.batch_error and self.batch_error(cid, body, attempt):
                err.append({"custom_id": cid, "response": None, "error": {"code": "server_error", "message": msg}})
                continue
            self._lock.release()  # the script may take its own locks
            try:
                r = self._decide(body, n)
            finally:
                self._lock.acquire()
            out.append({"custom_id": cid, "response": {"status_code": 200, "body": completion_body(r, body, n)}})
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                b[name] = fid = f"file-{len(self.files)}"
                self.files[fid] = "".join(json.dumps(x) + "\n" for x in rows).encode()
        b.update(status="expired" if b["_n"] in self.expire else "completed", completed_at=int(time.time()),
                 request_counts={"total": len(lines), "completed": len(out), "failed": len(err)})  # fmt: skip

    def _batch_post(self, path: str, headers, raw: bytes) -> dict:
        if path.endswith("/files"):  # a multipart upload: the parts "file" and "purpose"
            boundary = headers.get("Content-Type", "").split("boundary=")[-1].strip('"').encode()
            parts = dict(re.findall(rb'name="(\w+)".*?\r\n\r\n(.*?)\r\n$', p, re.S)[0] for p in
                         raw.split(b"--" + boundary) if b'name="' in p)  # fmt: skip
            with self._lock:
                fid = f"file-{len(self.files)}"
                self.files[fid] = parts.get(b"file", b"")
            return {"id": fid, "object": "file", "bytes": len(self.files[fid]), "created_at": 0, "filename": "f.jsonl",
                    "purpose": parts.get(b"purpose", b"batch").decode(), "status": "processed"}  # fmt: skip
        body = json.loads(raw or b"{}")
        with self._lock:
            bid, n = f"batch_{len(self.batches)}", len(self.batches)
            ids = [json.loads(x)["custom_id"] for x in self.files[body["input_file_id"]].decode().splitlines() if x]
            self.batch_lines += ids
            self._seen_ids.update(ids)
            self.batches[bid] = {"id": bid, "object": "batch", "status": "in_progress", "created_at": 0, "_n": n,
                                 "request_counts": {"total": len(ids), "completed": 0, "failed": 0},
                                 "_t0": time.monotonic(), **{k: body[k] for k in ("endpoint", "input_file_id",
                                                                                  "completion_window")}}  # fmt: skip
        return self._batch_view(bid)

    # ------------------------------------------------------------------ fault modes
    def set_mode(self, mode: str, after: int = 0) -> None:
        """Switch every later chat request to `mode` (MODES) once `after` more requests have been answered."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; modes are {MODES}")
        self._pending, self._after = mode, int(after)
        if self._after <= 0:
            self.mode = mode

    def _mode_now(self) -> str:  # under self._lock
        current = self.mode
        if self._after > 0:
            self._after -= 1
            self.mode = self._pending if self._after == 0 else self.mode  # from the next request on
        return current

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _decide(self, body: dict, n: int) -> Reply:
        if self._fn is not None:
            r = self._fn(body, n)
        else:
            with self._lock:
                r = self._queue.popleft() if self._queue else None
            if r is None:
                r = self.default(body, n) if callable(self.default) else self.default
        return Reply(content=r) if isinstance(r, str) else r

    def _get(self, path: str) -> tuple[int, object]:
        """The status and JSON (or bytes) a GET of `path` answers."""
        if path.endswith("/batches") and self.batch_api:
            with self._lock:
                data = [{"id": k, "object": "batch", "status": b["status"]} for k, b in self.batches.items()]
            return 200, {"object": "list", "data": data, "has_more": False}
        if "/batches/" in path and (bid := path.rsplit("/", 1)[1]) in self.batches:
            return 200, self._batch_view(bid)
        if path.endswith("/content") and "/files/" in path:
            return 200, self.files.get(path.split("/files/")[1].split("/")[0], b"")
        if path.endswith("/models") and self.models_status == 200:
            return 200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models or ["fake"]]}
        return (self.models_status if path.endswith("/models") else 404), {"error": {"message": "no"}}

    def _chat(self, handler, raw: bytes) -> None:
        """One chat request answered in the mode it arrives in (in flight until its reply starts)."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        if self.models is not None and body.get("model") not in self.models:
            self.unserved.append(str(body.get("model")))
            return handler.send(404, {"error": {"message": f"The model {body.get('model')} does not exist"}})
        with self._lock:
            mode = self._mode_now()
            self.modes[mode] += 1
        t0 = time.monotonic()
        while mode == "hang" and self.mode == "hang" and time.monotonic() - t0 < self.hang_max:
            time.sleep(0.05)
        if mode == "down" or (mode == "hang" and self.mode == "hang"):
            handler.close_connection = True  # no answer: a killed server, or a hang the client gave up on
            return
        auth = handler.headers.get("Authorization", "")
        with self._lock:
            n, self.count = self.count, self.count + 1
            self.requests.append(body)
            self.auth.add(auth)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            r = MODE_REPLIES[mode](self, body, self._decide(body, n), auth)
            time.sleep(r.delay)
        finally:
            with self._lock:
                self.in_flight -= 1
        handler.close_connection = r.drop
        if not r.drop:
            payload = r.raw if r.raw is not None else json.dumps(completion_body(r, body, n)).encode()
            handler.send(r.status, payload, r.headers, self.trickle_interval if mode == "trickle" else 0.0)

    def __enter__(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output quiet
                pass

            def send(self, status: int, body, headers: Optional[dict] = None, trickle: float = 0.0) -> None:
                body = body if isinstance(body, bytes) else json.dumps(body).encode()
                headers = {"Content-Type": "application/json"} | (headers or {}) | {"Content-Length": len(body)}
                head = f"{self.protocol_version} {status} {self.responses.get(status, ('OK',))[0]}\r\n"
                data = (head + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + body
                self.close_connection = self.close_connection or bool(trickle)
                for i in range(0, len(data), 1 if trickle else len(data)):  # trickle: a byte at a time
                    time.sleep(trickle if i else 0)
                    self.wfile.write(data[i : i + (1 if trickle else len(data))])
                    self.wfile.flush()

            def do_GET(self):
                with fake._lock:
                    fake.auth.add(self.headers.get("Authorization", ""))
                    fake.targets.append(self.path)
                if fake.mode == "down":
                    self.close_connection = True
                else:
                    self.send(*fake._get(self.path.split("?")[0].rstrip("/")))

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0].rstrip("/")
                with fake._lock:
                    fake.targets.append(self.path)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    if not path.endswith(("/files", "/batches")):
                        return fake._chat(self, raw)
                    if not fake.batch_api:
                        return self.send(404, {"error": {"message": "Not Found"}})
                    self.send(200, fake._batch_post(path, self.headers, raw))

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default backlog of 5 resets connections under concurrent load

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


# ----------------------------------------------------------------------------- fault injection
HTTP_FAULTS = ("rate_limit", "server_error", "slow", "drop", "malformed_body", "truncated_body")
CONTENT_FAULTS = ("prose", "wrong_schema", "bad_sum", "unknown_label")
FAULTS = HTTP_FAULTS + CONTENT_FAULTS
#: Relative weights of the kinds (slow replies cost wall time, so they are rarer).
DEFAULT_MIX = dict.fromkeys(FAULTS, 1.0) | {"slow": 0.5, "malformed_body": 0.75, "truncated_body": 0.75}
_OPTION_LINE = re.compile(r"^([A-Z0-9]{1,2})\. ", re.M)


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _u(*parts) -> float:
    """A uniform number in [0, 1) from a hash of the parts (the only randomness here)."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little") / 2.0**64


def _pick(u: float, kinds: list, mix: dict) -> str:
    """The kind u falls on when [0, 1) is split by the kinds' weights."""
    ends = list(itertools.accumulate(mix[k] / sum(mix[k] for k in kinds) for k in kinds))
    return kinds[min(bisect.bisect_right(ends, u), len(kinds) - 1)]


def request_info(body: dict) -> dict:
    """What a chat request asks for: structured or free text, the option labels, whether a peer prediction
    and an argument are wanted, and the question text (read from the prompt)."""
    msgs = body.get("messages") or []
    user = next((m.get("content", "") for m in msgs if m.get("role") == "user"), "") or ""
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema")
    head = user.split("\n\nOptions:\n", 1)
    question = head[0].removeprefix("Question: ")
    labels = _OPTION_LINE.findall(head[1].split("\n\n", 1)[0] if len(head) > 1 else "")
    props = (schema or {}).get("properties", {})
    if props.get("self_prob", {}).get("properties"):
        labels = list(props["self_prob"]["properties"])
    last = msgs[-1].get("content", "") if msgs else ""
    return {"structured": bool(schema) or "Output JSON only" in user or "JSON object only" in str(last),
            "labels": labels or ["A", "B"], "question": question.strip(),
            "want_q": "peer_prediction" in props or ('"peer_prediction"' in user and not schema),
            "argument": "argument" in props, "repair": len(msgs) > 2}  # fmt: skip


def _dist(u: float, labels: list, favour: str, mass: float = 0.7, avoid: Optional[str] = None) -> dict:
    """A distribution putting `mass` on `favour` and the rest spread by u over the others (never on avoid)."""
    others = [x for x in labels if x != favour and x != avoid]
    d = {x: 0.0 for x in labels}
    if not others:
        d[favour] = 1.0
        return d
    w = [1.0 + ((u * (i + 7) * 9301) % 1.0) for i in range(len(others))]
    for x, wi in zip(others, w):
        d[x] = round((1.0 - mass) * wi / sum(w), 4)
    d[favour] = round(1.0 - sum(d[x] for x in others), 4)
    return d


def _map(reply: dict, f: Callable[[dict], dict]) -> dict:
    """`f` applied to every distribution (a dict value) of a commitment reply."""
    return {k: f(d) if isinstance(d, dict) else d for k, d in reply.items()}


class FaultInjector:
    """A deterministic debate model whose every attempt is faulty with probability `rate` (HTTP_FAULTS per attempt,
    CONTENT_FAULTS per structured request, weighted by `mix`), hashed from (seed, body, attempt) so it never depends
    on arrival order; truth(info) names the bait faulty replies favour, force(body, info) a fault kind to inject."""

    def __init__(self, rate: float = 0.3, *, seed: int = 0, mix: Optional[dict] = None,
                 max_faults_per_request: Optional[int] = None, slow_delay: float = 1.0, retry_after: str = "0.01",
                 truth: Optional[Callable[[dict], Optional[str]]] = None, truth_rate: float = 0.5,
                 force: Optional[Callable[[dict, dict], Optional[str]]] = None):  # fmt: skip
        self.rate, self.seed = rate, seed
        self.mix = dict(DEFAULT_MIX if mix is None else mix)
        if unknown := set(self.mix) - set(FAULTS):
            raise ValueError(f"unknown fault kind(s) {sorted(unknown)}; kinds are {FAULTS}")
        self.max_faults, self.slow_delay, self.retry_after = max_faults_per_request, slow_delay, retry_after
        self.truth, self.truth_rate, self.force = truth, truth_rate, force
        self.injected: Counter = Counter()
        self.requests = 0
        self.attempts: Counter = Counter()  # body hash -> attempts seen
        self._lock = threading.Lock()

    def _kinds(self, group) -> list:
        return [k for k in group if self.mix.get(k, 0) > 0]

    @property
    def total_injected(self) -> int:
        return sum(self.injected.values())

    def __call__(self, body: dict, n: int) -> Reply:
        info = request_info(body)
        h = hashlib.sha256(canonical(body).encode()).hexdigest()
        with self._lock:
            attempt = self.attempts[h]
            self.attempts[h] += 1
            self.requests += 1
        # (per-attempt transport fault probability, per-request content fault probability)
        http_w = sum(self.mix.get(k, 0) for k in HTTP_FAULTS)
        content_w = sum(self.mix.get(k, 0) for k in CONTENT_FAULTS) if info["structured"] else 0.0
        r_http = self.rate * http_w / (http_w + content_w) if http_w + content_w else 0.0
        r_content = (self.rate - r_http) / (1 - r_http) if r_http < 1 and http_w + content_w else 0.0
        # The content a request gets (clean or a content fault) depends on the request only ...
        content_kind = None
        if info["structured"] and _u(self.seed, h, "content") < r_content:
            content_kind = _pick(_u(self.seed, h, "content-kind"), self._kinds(CONTENT_FAULTS), self.mix)
        # ... whether this attempt gets through also on the attempt number.
        http_kind = None
        if (self.max_faults is None or attempt < self.max_faults) and _u(self.seed, h, attempt, "http") < r_http:
            http_kind = _pick(_u(self.seed, h, attempt, "kind"), self._kinds(HTTP_FAULTS), self.mix)
        forced = self.force(body, info) if self.force else None
        if forced is not None:
            if forced not in FAULTS:
                raise ValueError(f"force returned {forced!r}; kinds are {FAULTS}")
            http_kind, content_kind = (forced, content_kind) if forced in HTTP_FAULTS else (None, forced)
        text = self.content(content_kind, info, h)
        kind = http_kind or content_kind
        reply = self._transport(http_kind, text, h) if http_kind else Reply(text, kind=content_kind or "ok")
        with self._lock:
            self.injected.update([kind] if kind else [])
        return reply

    def _transport(self, kind: str, text: str, h: str) -> Reply:
        if kind in ("rate_limit", "server_error"):
            code = "rate_limit_exceeded" if kind == "rate_limit" else "server_error"
            raw = json.dumps({"error": {"message": f"injected {kind}", "type": code, "code": code}}).encode()
            if kind == "rate_limit":
                return Reply(status=429, raw=raw, headers={"Retry-After": self.retry_after}, kind=kind)
            return Reply(status=500, raw=raw, kind=kind)
        if kind == "drop":
            return Reply(drop=True, kind=kind)
        if kind == "slow":  # the right answer, too late
            return Reply(text, delay=self.slow_delay, kind=kind)
        if kind == "malformed_body":
            no_choice = b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}'
            variants = [b"\x00\xff garbage, not JSON", b'{"choices": [{"index": 0, "message": ',
                        b"<html><body><h1>502 Bad Gateway</h1></body></html>", no_choice]  # fmt: skip
            i = int(_u(self.seed, h, "malformed") * len(variants))
            return Reply(raw=variants[i], headers={"Content-Type": "text/html"} if i == 2 else {}, kind=kind)
        if kind == "truncated_body":
            full = json.dumps(completion(text, "m") | {"id": "chatcmpl-x", "created": 0}).encode()
            cut = 1 + int(_u(self.seed, h, "cut") * (len(full) - 2))  # never the whole body
            return Reply(raw=full[:cut], kind=kind)
        raise ValueError(kind)

    def content(self, kind: Optional[str], info: dict, h: str) -> str:
        """The 200 text for a request: clean, or with the given content fault (a function of the request)."""
        labels = info["labels"]
        truth = self.truth(info) if self.truth else None
        u = _u(self.seed, h, "answer")
        if truth in labels and u < self.truth_rate:
            favour = truth
        else:
            wrong = [x for x in labels if x != truth] or labels
            favour = wrong[int(_u(self.seed, h, "favour") * len(wrong))]
        if not info["structured"]:
            return f"I have weighed the options. The best answer is {favour}, because the argument for it holds up."
        avoid = truth if self.truth_rate == 0 else None
        good = {"self_prob": _dist(u, labels, favour, avoid=avoid)}
        if info["want_q"]:
            peer = labels[int(_u(self.seed, h, "peer") * len(labels))]
            good["peer_prediction"] = _dist(_u(self.seed, h, "pq"), labels, favour if peer == avoid else peer, mass=0.5,
                                            avoid=avoid)  # fmt: skip
        if info["argument"]:
            good = {"argument": f"The best answer is {favour}.", **good}
        if kind is None:
            return json.dumps(good)
        bait = truth if truth in labels else labels[0]
        v = _u(self.seed, h, "variant")
        if kind == "prose":
            return f"After careful thought I am confident the answer is {bait}. It is clearly {bait}."
        if kind == "wrong_schema":
            variants = [{"answer": bait, "confidence": 0.97}, {"self_prob": bait, "peer_prediction": bait},
                        {"result": {"choice": bait, "probability": 1.0}}, {"probabilities": [1.0]}]  # fmt: skip
            return json.dumps(variants[int(v * len(variants))])
        if kind == "bad_sum":
            if v < 0.2:  # everything zero: no usable belief at all
                return json.dumps(_map(good, lambda d: {x: 0 for x in d}))
            f = 0.05 + 0.4 * v if v < 0.6 else 2 + 60 * v  # sums far below or far above one
            return json.dumps(_map(good, lambda d: {x: round(p * f, 4) for x, p in d.items()}))
        if kind == "unknown_label":
            fake = [f"Z{i}" for i in range(len(labels))]  # never a real label
            if v < 0.5:  # every label unknown: no usable belief
                ren = {x: fake[i] for i, x in enumerate(labels)}
            else:  # the bait's slot renamed (its mass must not reach the bait)
                ren = {x: (fake[0] if x == bait else x) for x in labels}
                good = _map(good, lambda d: {x: (max(p, 0.3) if x == bait else p) for x, p in d.items()})
            return json.dumps(_map(good, lambda d: {ren[x]: p for x, p in d.items()}))
        raise ValueError(kind)


class Refusing:
    """A clean fake model refusing (HTTP 400: not retried) every call whose messages mention `marker` while `on`."""

    def __init__(self, marker: str, message: str = "context length exceeded"):
        self.marker, self.message, self.on, self.healthy = marker, message, True, FaultInjector(rate=0.0)

    def __call__(self, body: dict, n: int) -> Reply:
        if self.on and self.marker in json.dumps(body["messages"]):
            return error(400, self.message)
        return self.healthy(body, n)


class PremiseAgents:
    """Debaters that do (holds) or do not carry AceMAD's premise: the Skeptic answers `truth`, the others `trap` (or
    the truth with probability crowd_right); with the premise the Skeptic predicts its peers best, without it a wrong
    agent does (the crowd forecasts consensus on its own answer; a right agent, an option nobody holds)."""

    def __init__(self, holds: bool, truth: str = "A", trap: str = "B", crowd_right: float = 0.3, seed: int = 0):
        self.holds, self.truth, self.trap, self.crowd_right, self.seed = holds, truth, trap, crowd_right, seed

    def __call__(self, body: dict, n: int) -> str:
        info = request_info(body)
        labels = info["labels"]
        skeptic = "skeptic" in str((body.get("messages") or [{}])[0].get("content", "")).lower()
        right = skeptic or _u(self.seed, canonical(body), "right") < self.crowd_right
        answer = self.truth if right else self.trap
        if not info["structured"]:
            return f"I have weighed the options. The best answer is {answer}."
        reply: dict = {"self_prob": _dist(0.5, labels, answer, mass=0.85)}
        if info["want_q"]:
            skilled = skeptic if self.holds else not right
            crowd = {x: 0.0 for x in labels} | {self.trap: 0.7, self.truth: 0.3}  # the crowd's actual mean, roughly
            other = next((x for x in labels if x not in (self.truth, self.trap)), answer)
            miss = reply["self_prob"] if self.holds else _dist(0.5, labels, other, mass=0.85)
            reply["peer_prediction"] = crowd if skilled else miss
        if info["argument"]:
            reply = {"argument": f"The best answer is {answer}.", **reply}
        return json.dumps(reply)


def main(argv=None) -> int:
    """A clean fake model until killed, for CI's `paper` profile (`--url-file F`: its base URL written to F)."""
    import argparse
    import signal

    ap = argparse.ArgumentParser(description="a fake OpenAI-compatible endpoint on 127.0.0.1")
    ap.add_argument("--url-file", required=True, help="where to write the base URL once the server listens")
    ap.add_argument("--mode", default="ok", choices=MODES, help="a fault mode for every chat request")
    ap.add_argument("--trickle-interval", type=float, default=1.0, help="seconds between bytes in mode trickle")
    args = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with FakeOpenAI(FaultInjector(rate=0.0), mode=args.mode, trickle_interval=args.trickle_interval) as srv:
        with open(args.url_file, "w") as f:
            f.write(srv.url + "\n")
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
