"""An endpoint's health as a run sees it: a circuit breaker, a progress line, a cap on what a reply may store.

    from acemad_utils.agents.health import Breaker, EndpointDown, Heartbeat, cap_reply
    breaker = Breaker("http://127.0.0.1:8080/v1", threshold=8)
    breaker.check()                      # EndpointDown once tripped: no further call is sent
    breaker.attempt_failed(exc)          # every failed attempt (connection, timeout, 401/403 count at once)
    breaker.call_failed(exc)             # a call whose retries are used up (429, 5xx count here)
    breaker.succeeded()                  # any answer resets the count
    beat = Heartbeat(lambda: "3 answered, 0 failed", busy=lambda: True, interval=30)  # a line every 30 s
    text, truncated = cap_reply(text, 65536)

Why a breaker: with every call failing, a run used to retry each call 6 times with 120 s timeouts and then
record the question as failed, for every question, for hours, and end on an unrelated error. After
`threshold` consecutive failures of the same kind the breaker trips; every later call raises EndpointDown at
once (the runner stops starting questions, saves nothing for the ones cut short) and its message is the one
line to show: the cause, the endpoint and that the same command resumes. Connection errors, timeouts and
rejected keys count per attempt (each is already proof the endpoint is unusable, and a hung endpoint would
otherwise take timeout x attempts to count once); rate limits and 5xx only when a call's retry budget is
used up (a 429 with Retry-After is the server pacing us, not a fault).

The progress line goes to the file named by ACEMAD_PROGRESS_FILE when set (the reproduce command prints it on
the terminal, where the notebook kernel's stderr does not reach), else to stderr.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Optional

from acemad_utils.agents.redact import redact
from acemad_utils.data.settings import env

PROGRESS_ENV = "ACEMAD_PROGRESS_FILE"
#: Fault kinds that count per attempt; the others count when a call's retries are used up.
PER_ATTEMPT = ("connection", "timeout", "key rejected")
TRUNCATED_MARK = "\n[reply truncated by acemad: the endpoint sent {n} bytes, more than max_reply_bytes={cap}]"


class EndpointDown(RuntimeError):
    """The circuit breaker tripped: str() is the one line to show (cause, endpoint, the same command resumes)."""


def fault_kind(exc: BaseException) -> Optional[str]:
    """The kind of endpoint fault an error is, or None when it says nothing about the endpoint's health."""
    # The SDK is looked up, not imported: an error can only be one of its classes once the client has loaded it,
    # and the runner, which imports this module, must not cost a synthetic kernel the SDK's ~1 s.
    openai = sys.modules.get("openai")
    if openai is None:
        return None
    if isinstance(exc, openai.APITimeoutError):  # a subclass of APIConnectionError: test it first
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code in (401, 403):
            return "key rejected"
        if exc.status_code == 429:
            return "rate limit"
        if exc.status_code >= 500:
            return "server error"
    return None


_CAUSES = {
    "connection": "could not connect",
    "timeout": "timed out",
    "key rejected": "rejected the API key (HTTP 401/403)",
    "rate limit": "kept answering 429 (rate limit) beyond the retry budget",
    "server error": "kept answering 5xx beyond the retry budget",
}


class Breaker:
    """Consecutive failures of one kind, shared by every thread of a client; trips at `threshold`."""

    def __init__(self, where: str, threshold: int = 8):
        if threshold < 1:
            raise ValueError(f"breaker threshold must be >= 1, got {threshold}")
        self.where, self.threshold = where, threshold
        self.kind: Optional[str] = None
        self.count = 0
        self.message: Optional[str] = None
        self._lock = threading.Lock()

    def check(self) -> None:
        if self.message is not None:
            raise EndpointDown(self.message)

    def succeeded(self) -> None:
        with self._lock:
            self.kind, self.count = None, 0

    def attempt_failed(self, exc: BaseException) -> None:
        kind = fault_kind(exc)
        if kind in PER_ATTEMPT:
            self._count(kind, exc)

    def call_failed(self, exc: BaseException) -> None:
        kind = fault_kind(exc)
        if kind is not None and kind not in PER_ATTEMPT:
            self._count(kind, exc)

    def _count(self, kind: str, exc: BaseException) -> None:
        with self._lock:
            self.count = self.count + 1 if kind == self.kind else 1
            self.kind = kind
            if self.count >= self.threshold and self.message is None:
                detail = " ".join(redact(f"{type(exc).__name__}: {exc}").split())[:200]
                self.message = (
                    f"stopped: {self.count} consecutive calls to {self.where} {_CAUSES[kind]} (last: {detail}); "
                    "nothing failed was saved as an answer: fix the endpoint"
                    + (" or the key" if kind == "key rejected" else "")
                    + " and run the same command to resume"
                )


class Heartbeat:
    """A daemon thread that emits `line()` every `interval` seconds while `busy()` is true."""

    def __init__(self, line: Callable[[], str], busy: Callable[[], bool], interval: float = 30.0):
        self.line, self.busy, self.interval = line, busy, interval
        self._started = False
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._loop, name="acemad-progress", daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval)
            if self.busy():
                emit(self.line())


def emit(line: str) -> None:
    """One progress line: appended to $ACEMAD_PROGRESS_FILE (read by the reproduce command) or on stderr."""
    line = redact(line)
    path = env(PROGRESS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    else:
        print(line, file=sys.stderr, flush=True)


def cap_reply(text: str, cap: int) -> tuple[str, bool]:
    """`text` cut to at most `cap` UTF-8 bytes, a visible mark saying so included (never a silent cut; a cut
    text is within the cap, so cutting it again changes nothing)."""
    raw = text.encode("utf-8")
    if len(raw) <= cap:
        return text, False
    mark = TRUNCATED_MARK.format(n=len(raw), cap=cap)
    return raw[: max(0, cap - len(mark.encode()))].decode("utf-8", "ignore") + mark, True


def interval_from_env(default: float = 30.0) -> float:
    """ACEMAD_PROGRESS_SECONDS overrides the progress interval (tests use a short one)."""
    v = env("ACEMAD_PROGRESS_SECONDS")
    return float(v) if v else default
