"""The HTTP under one chat completion: pooled keep-alive connections and a deadline on the whole response.

    from acemad_utils.agents.transport import Transport
    t = Transport("http://127.0.0.1:8080/v1", "sk-...", timeout=60.0)
    status, headers, raw = t.post("/chat/completions", body_bytes, deadline=time.monotonic() + 60)
    t.close()

Why not the openai SDK's client for the hot call: it costs 4-6 ms of CPU per call (request transforms, httpx,
pydantic parsing), which at 64 calls in flight caps a GIL-bound client at about half its in-flight bound
(bench/throughput.py, bench/README.md). This is http.client over a LIFO pool of keep-alive connections, one per
call in flight, and the caller parses the JSON itself. The SDK is still used for everything off the hot path
(GET /models, the Batch API).

Why a deadline of our own: an SDK or socket timeout bounds the gap between two bytes, so an endpoint that sends
one byte a second never times out. Here every socket operation (connect, send, each read of the
status line, headers and body) waits at most min(timeout, what is left of the deadline), and one that would start
after it raises CallDeadlineExceeded: a call ends by its deadline however slowly the endpoint sends, silent or
trickling (docs/faults.md). `timeout` still bounds each wait, as the SDK's did.

Why a cap on the body: an endpoint that sends without end (chunked forever, `Content-Length: 50000000000`, an
HTTP/1.0 body ended only by closing) once filled the memory before any deadline: no response is read past
MAX_RESPONSE_BYTES (a chat completion is kilobytes, a models listing rarely a megabyte), and the error names the
endpoint (ResponseTooLarge). Replies are never inflated (Accept-Encoding: identity; a gzip body is not JSON).

Errors are the SDK's exception classes (APIConnectionError, APITimeoutError, APIStatusError and its subclasses),
so retry.py, health.py and redact.py classify and scrub them as before; CallDeadlineExceeded is an
APITimeoutError. A connection reused from the pool that the server had closed is retried once on a new
connection before anything was read (as urllib3 does), within the same deadline.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import socket
import threading
import time
from typing import BinaryIO, Optional
from urllib.parse import unquote, urlparse
from urllib.request import getproxies, proxy_bypass

import openai

try:  # the HTTP library the installed SDK is built on (openai 3.x: httpx2, before: httpx): its errors carry its types
    import httpx2 as httpx
except ImportError:  # pragma: no cover (depends on the installed SDK)
    import httpx  # type: ignore[no-redef]

# The SDK's class per status (openai._client's _make_status_error, which is private): the same types callers
# and tests catch (a 429 is a RateLimitError).
_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}
# Reused keep-alive connection closed by the server before it answered: retried once on a fresh connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class CallDeadlineExceeded(openai.APITimeoutError):
    """The whole response (connect, headers and body) did not arrive within the call's deadline: a timeout for
    the retries and the circuit breaker (health.fault_kind)."""

    def __init__(
        self,
        request: httpx.Request,
        message: str = "Request timed out: the whole response did not arrive by the call's deadline.",
    ) -> None:
        openai.APIConnectionError.__init__(self, message=message, request=request)


#: The most bytes of one response body read from any endpoint (chat completion or models listing).
MAX_RESPONSE_BYTES = 8 * 2**20


class ResponseTooLarge(openai.APIConnectionError):
    """The endpoint's response body passed MAX_RESPONSE_BYTES (nothing more was read): str() is the line to show."""

    def __init__(self, request: httpx.Request, message: str) -> None:
        openai.APIConnectionError.__init__(self, message=message, request=request)


def too_large(url: str, what: str, cap: int, detail: str) -> str:
    """The one line of a response over the cap: the endpoint, the request, what was seen."""
    return (
        f"the endpoint {url} answered {what} with more than {cap} bytes ({detail}); nothing past the cap was read: "
        "it is not an OpenAI-compatible reply, check the base URL"
    )


class _TooLarge(http.client.HTTPException):
    """Internal: the body passed the cap (turned into ResponseTooLarge, with the endpoint, by Transport)."""


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each bounded by min(gap timeout, time left before the connection's deadline)."""

    def __init__(self, conn: _Conn, sock: socket.socket):
        self.conn, self.sock = conn, sock

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        self.sock.settimeout(self.conn.wait())
        return self.sock.recv_into(b)


class _DeadlineSocket:
    """What http.client sees as the socket: sendall and makefile bounded by the deadline."""

    def __init__(self, conn: _Conn, sock: socket.socket):
        self.conn, self.sock = conn, sock

    def sendall(self, data) -> None:
        self.sock.settimeout(self.conn.wait())
        self.sock.sendall(data)

    def makefile(self, mode: str, *a, **kw):
        return io.BufferedReader(_DeadlineReader(self.conn, self.sock))

    def close(self) -> None:  # http.client closes before the body of a will_close reply is read: _Conn.close does
        pass

    def settimeout(self, t) -> None:  # http.client sets it after connect; every operation sets its own
        pass


class _Conn:
    """One keep-alive connection (http.client) whose operations all end by `deadline` (time.monotonic())."""

    def __init__(self, host: str, port: int, https: bool, gap: float, tunnel: Optional[tuple[str, int, dict]]):
        # https through a proxy: TLS to the proxy's CONNECT tunnel; http through one: absolute-form requests
        cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
        self.http = cls(host, port, timeout=gap)
        if tunnel is not None and https:
            self.http.set_tunnel(tunnel[0], tunnel[1], headers=tunnel[2])
        self.gap = gap
        self.deadline = float("inf")
        self.raw_sock: Optional[socket.socket] = None
        self.used = False

    def wait(self) -> float:
        """Seconds the next socket operation may wait; CallDeadlineExceeded when none is left."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _Expired()
        return min(self.gap, left)

    def open(self) -> None:
        self.http.timeout = self.wait()
        self.http.connect()
        sock = self.raw_sock = self.http.sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.http.sock = _DeadlineSocket(self, sock)
        # one reader per connection: nothing it has buffered is lost between two replies
        self.rfile: BinaryIO = io.BufferedReader(_DeadlineReader(self, sock))

    def close(self) -> None:
        self.http.close()
        if self.raw_sock is not None:
            self.raw_sock.close()
            self.raw_sock = None


_MAX_LINE, _MAX_HEADERS = 65536, 100  # http.client's limits


def _line(rfile: BinaryIO) -> bytes:
    line = rfile.readline(_MAX_LINE + 1)
    if len(line) > _MAX_LINE:
        raise http.client.LineTooLong("header line")
    return line


def read_response(rfile: BinaryIO, cap: Optional[int] = None) -> tuple[int, dict[str, str], bytes, bool]:
    """(status, headers with lower-case names, body, whether the server closes the connection) of one HTTP/1.x
    response. Why not http.client.HTTPResponse: its header parsing goes through the email package, about a third of
    the client's CPU per call (bench/README.md); this reads the same framing (Content-Length, chunked, or until
    the connection closes; interim 1xx replies skipped) with http.client's errors and limits; a body over `cap`
    (default MAX_RESPONSE_BYTES) is _TooLarge before more than the cap is read or allocated."""
    cap = MAX_RESPONSE_BYTES if cap is None else cap
    while True:
        line = _line(rfile)
        if not line:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        version, _, rest = line.partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/") or not code.isdigit():
            raise http.client.BadStatusLine(repr(line[:100]))
        headers: dict[str, str] = {}
        for _ in range(_MAX_HEADERS + 1):
            h = _line(rfile)
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.partition(b":")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        else:
            raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")
        status = int(code)
        if status >= 200:
            break
    connection = headers.get("connection", "").lower()
    will_close = "close" in connection or (version == b"HTTP/1.0" and "keep-alive" not in connection)
    if status in (204, 304):
        return status, headers, b"", will_close
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return status, headers, _chunked(rfile, cap), will_close
    if "content-length" in headers:
        try:
            n = int(headers["content-length"])
        except ValueError:
            raise http.client.HTTPException(f"bad Content-Length {headers['content-length'][:40]!r}") from None
        if n > cap:
            raise _TooLarge(f"Content-Length: {n}")
        data = rfile.read(n)
        if len(data) < n:
            raise http.client.IncompleteRead(data, n - len(data))
        return status, headers, data, will_close
    data = rfile.read(cap + 1)  # no length: the body ends when the connection does
    if len(data) > cap:
        raise _TooLarge("a body without a length that did not end")
    return status, headers, data, True


def _chunked(rfile: BinaryIO, cap: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = _line(rfile).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise http.client.IncompleteRead(b"".join(parts)) from None
        if size == 0:
            while _line(rfile) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(parts)
        total += size
        if total > cap:
            raise _TooLarge("a chunked body that did not end")
        chunk = rfile.read(size)
        if len(chunk) < size:
            raise http.client.IncompleteRead(b"".join(parts) + chunk, size - len(chunk))
        parts.append(chunk)
        rfile.read(2)  # the CRLF after each chunk


class _Expired(Exception):
    """Internal: the deadline passed inside a socket operation (turned into CallDeadlineExceeded)."""


class Transport:
    """POSTs to one base URL over a pool of keep-alive connections (thread-safe)."""

    def __init__(self, base_url: Optional[str], api_key: str, *, timeout: float):
        u = urlparse(base_url or "https://api.openai.com/v1")
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base URL must be http(s)://host[:port]/path, got scheme {u.scheme!r}")
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname, u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        self.url = f"{u.scheme}://{self.host}:{self.port}{self.prefix}"  # no userinfo, no query: safe in errors
        self.timeout = timeout
        self._proxy = self._proxy_for(u.scheme)
        default_port = self.port == (443 if self.https else 80)
        host = self.host if default_port else f"{self.host}:{self.port}"
        if ":" in self.host:  # an IPv6 literal is bracketed in Host
            host = f"[{self.host}]" if default_port else f"[{self.host}]:{self.port}"
        # Every request's header block but its first line and length, built once: a request goes out in one
        # send (http.client's two sends per request doubled the loopback kernel work, bench/README.md).
        self._head = (
            f"Host: {host}\r\nAccept-Encoding: identity\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\nAuthorization: Bearer {api_key}\r\n"
        ).encode("latin-1")
        if self._proxy is not None and not self.https:  # http through a proxy: its credentials on every request
            self._head += "".join(f"{k}: {v}\r\n" for k, v in self._proxy[2].items()).encode("latin-1")
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()

    def _proxy_for(self, scheme: str) -> Optional[tuple[str, int, dict]]:
        """(proxy host, port, headers) when HTTP(S)_PROXY applies to this host (the SDK's httpx honours them)."""
        if proxy_bypass(self.host):
            return None
        proxy = getproxies().get(scheme)
        if not proxy:
            return None
        p = urlparse(proxy if "://" in proxy else f"http://{proxy}")
        headers = {}
        if p.username or p.password:
            userpass = f"{unquote(p.username or '')}:{unquote(p.password or '')}".encode()
            headers["Proxy-Authorization"] = "Basic " + base64.b64encode(userpass).decode()
        return p.hostname or "", p.port or 80, headers

    def _conn(self, reuse: bool = True) -> _Conn:
        with self._lock:
            if reuse and self._idle:
                return self._idle.pop()
        if self._proxy is None:
            return _Conn(self.host, self.port, self.https, self.timeout, None)
        host, port, headers = self._proxy
        return _Conn(host, port, self.https, self.timeout, (self.host, self.port, headers))

    def _target(self, path: str) -> str:
        if self._proxy is not None and not self.https:
            return f"http://{self.host}:{self.port}{self.prefix}{path}"  # absolute-form through an HTTP proxy
        return self.prefix + path

    def post(self, path: str, body: bytes, *, deadline: float) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body bytes) of one POST, ended by `deadline` (time.monotonic()) whatever the
        endpoint sends; SDK exception classes on failure (APITimeoutError, APIConnectionError)."""
        for attempt in range(2):
            conn = self._conn(reuse=attempt == 0)  # a retry never takes another idle one: it may be stale too
            reused = conn.used
            conn.deadline = deadline
            try:
                if not reused:
                    conn.open()
                first = f"POST {self._target(path)} HTTP/1.1\r\n".encode("latin-1")
                conn.http.sock.sendall(first + self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
                status, headers, data, will_close = read_response(conn.rfile)
            except _Expired:
                conn.close()
                raise CallDeadlineExceeded(request=self._request(path)) from None
            except _TooLarge as e:
                conn.close()
                line = too_large(self.url, f"POST {path}", MAX_RESPONSE_BYTES, str(e))
                raise ResponseTooLarge(self._request(path), line) from None
            except TimeoutError:
                conn.close()
                if time.monotonic() >= deadline - 0.01:  # the wait was cut to the deadline, not the gap timeout
                    raise CallDeadlineExceeded(request=self._request(path)) from None
                raise openai.APITimeoutError(request=self._request(path)) from None
            except _STALE as e:
                conn.close()
                if reused:
                    continue  # the server closed an idle connection: once more on a new one
                raise openai.APIConnectionError(message=_what(e), request=self._request(path)) from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise openai.APIConnectionError(message=_what(e), request=self._request(path)) from None
            conn.used = True
            if will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
            return status, headers, data
        raise AssertionError("unreachable: the second attempt returns or raises")

    def status_error(self, path: str, status: int, headers, data: bytes) -> openai.APIStatusError:
        """The SDK's error for a non-2xx answer (RateLimitError for 429, ...), message as the SDK words it."""
        try:
            body = json.loads(data)
        except ValueError:
            body = data.decode("utf-8", "replace")
        err = body.get("error", body) if isinstance(body, dict) else body
        message = err.get("message") if isinstance(err, dict) and isinstance(err.get("message"), str) else None
        if 300 <= status < 400:  # never followed: the key stays with the host named
            where = headers.get("location") or "no Location"
            message = (
                f"the endpoint {self.url} redirects {path} ({where[:200]}); redirects are never followed (the key "
                "is sent to the host you named only): set the base URL to the final one"
            )
        response = httpx.Response(status, headers=list(headers.items()), content=data, request=self._request(path))
        cls = _STATUS_ERRORS.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
        return cls(f"Error code: {status} - {message or body}", response=response, body=err)

    def expired(self, path: str, why: str) -> CallDeadlineExceeded:
        """The error of a call whose deadline passed before it was sent (`why`)."""
        return CallDeadlineExceeded(request=self._request(path), message=f"Request timed out: {why}.")

    def _request(self, path: str) -> httpx.Request:
        return httpx.Request("POST", self.url + path)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


class BoundedClient(httpx.Client):
    """The SDK's HTTP client for a call off the hot path (GET /models): no redirect followed, nothing inflated (a
    gzip bomb stays its compressed bytes, not JSON), the body read to at most MAX_RESPONSE_BYTES and never past
    `deadline` (time.monotonic()), so a reader its caller let go stops instead of reading on."""

    def __init__(self, url: str, deadline: float, **kw) -> None:
        super().__init__(follow_redirects=False, **kw)
        self.url, self.deadline = url, deadline

    def send(self, request: httpx.Request, *, stream: bool = False, **kw) -> httpx.Response:
        response = super().send(request, stream=True, **kw)
        body = bytearray()
        try:
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > MAX_RESPONSE_BYTES:
                    what = f"{request.method} {request.url.path}"
                    raise ResponseTooLarge(
                        request, too_large(self.url, what, MAX_RESPONSE_BYTES, "a body that went on")
                    )
                if time.monotonic() > self.deadline:
                    raise httpx.ReadTimeout("the response did not end by the deadline", request=request)
        finally:
            response.close()
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]
        return httpx.Response(response.status_code, headers=headers, content=bytes(body), request=request)


def _what(e: BaseException) -> str:
    return f"Connection error: {type(e).__name__}: {e}" if str(e) else f"Connection error: {type(e).__name__}"
