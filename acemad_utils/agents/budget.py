"""MAX_USD: a spending cap that stops sending new paid calls before a run costs more than the user meant.

    from acemad_utils.agents.budget import Budget, BudgetExceeded
    b = Budget(max_usd=5.0)                  # or Budget.from_env(cache): ACEMAD_MAX_USD, ACEMAD_BUDGET_SINCE
    LLMClient(..., budget=b)                 # every cache miss reserves its estimated cost first
    b.spent, b.describe()

How it counts. Before a call is sent, its cost is estimated (prompt tokens from the token model of
acemad_utils.cost.estimate, completion tokens = the call's max_tokens, the most it can be billed) and reserved. If
spent + reserved + this estimate would pass MAX_USD, the call is not sent: BudgetExceeded is raised and
every later paid call is refused too (the run stops consistently, not call by call). When a call returns,
its reservation is replaced by its actual cost from the endpoint's `usage` (cached input at the cached
rate), or by the estimate when the endpoint reports no usage. Calls already in flight always finish and
are cached, so nothing paid for is lost: raising MAX_USD and rerunning replays them from the cache for free.

Across processes. `make reproduce` runs each notebook in its own kernel; reproduce exports
ACEMAD_MAX_USD and ACEMAD_BUDGET_SINCE (the run's start, epoch seconds), and each kernel's Budget starts from
what the response cache recorded as paid since then (`ResponseCache.usage_since`), so the cap holds for the
whole profile run, not per notebook. Without ACEMAD_BUDGET_SINCE the cap counts this process only.

Free calls (the project's own llama.cpp server, or a model the profile marks `free: true`; prices.py) are
never refused. Every other call is counted at its price, loopback endpoints included. A model without a price
cannot be counted, so a capped run refuses to call it: UnpricedModel (a BudgetExceeded) names the model and
how to price it or mark it free. reproduce checks every model of the profile before the first notebook, and
the client checks its model when it is built, so the refusal comes before any call.
"""

from __future__ import annotations

import threading
from typing import Optional

from acemad_utils.agents.prices import how_to_price
from acemad_utils.data.settings import env

ENV_MAX = "ACEMAD_MAX_USD"
ENV_SINCE = "ACEMAD_BUDGET_SINCE"


class BudgetExceeded(RuntimeError):
    """A paid call was not sent because it could take the run past MAX_USD. The runner treats it as "stop
    starting questions" (not as a failed question) and ends the run with one message (see runner)."""


class UnpricedModel(BudgetExceeded):
    """MAX_USD is set and a model the run would call has no price and is not known to be free: the cap could
    not count its calls, so none is sent."""

    def __init__(self, model: str):
        self.model = model
        super().__init__(unpriced_message([model]))


def unpriced_message(models) -> str:
    """Why a capped run will not start, and how to fix it, for the unpriced `models`."""
    names = ", ".join(repr(m) for m in models)
    return (
        f"MAX_USD is set but {names} {'has' if len(models) == 1 else 'have'} no price: the cap could not count "
        f"{'its' if len(models) == 1 else 'their'} calls, so nothing is sent. "
        + ("To fix it, " + how_to_price(models[0]) if len(models) == 1 else "For each MODEL, " + how_to_price("MODEL"))
        + ". An endpoint on localhost is not assumed free: it may be a gateway to a paid provider."
    )


def parse_max_usd(value) -> Optional[float]:
    """None for no cap ('' / None / 'none'), else a non-negative float (ValueError otherwise)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    x = float(value)
    if not x >= 0:
        raise ValueError(f"MAX_USD must be a number >= 0, got {value!r}")
    return x


class Budget:
    """A thread-safe spend counter with a cap. Shared by every client of a process (see current())."""

    def __init__(self, max_usd: Optional[float], spent_before: float = 0.0):
        self.max_usd = max_usd
        self.spent_before = spent_before  # paid by earlier processes of this run (other notebooks)
        self.spent = 0.0  # paid in this process (actual where reported, estimated otherwise)
        self.reserved = 0.0  # estimates of calls in flight
        self.calls = 0
        self.refused = 0
        self.exhausted = False
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, cache=None) -> Optional[Budget]:
        cap = parse_max_usd(env(ENV_MAX) or None)
        if cap is None:
            return None
        before = 0.0
        since = env(ENV_SINCE)
        if since and cache is not None:
            before = cache.spent_since(float(since))
        return cls(cap, before)

    @property
    def total(self) -> float:
        return self.spent_before + self.spent

    def reserve(self, estimate: Optional[float], model: str = "") -> float:
        """Reserve `estimate` USD for a call about to be sent, or raise BudgetExceeded. Returns the amount
        reserved (pass it to settle)."""
        if estimate is None:  # an unpriced model: the cap could not count it, so the call is not sent
            if self.max_usd is None:
                return 0.0
            with self._lock:
                self.refused += 1
            raise UnpricedModel(model)
        if estimate <= 0 or self.max_usd is None:
            return 0.0
        with self._lock:
            if self.exhausted or self.total + self.reserved + estimate > self.max_usd:
                self.exhausted = True
                self.refused += 1
                raise BudgetExceeded(self.message())
            self.reserved += estimate
            return estimate

    def settle(self, reserved: float, actual: Optional[float]) -> None:
        """A call came back (actual = its cost, None when unknown: the reservation stands as the estimate)."""
        with self._lock:
            self.reserved -= reserved
            self.spent += reserved if actual is None else actual
            self.calls += 1

    def release(self, reserved: float) -> None:
        """A call failed without being billed (it raised): drop its reservation."""
        with self._lock:
            self.reserved -= reserved

    def message(self) -> str:
        return (
            f"MAX_USD ${self.max_usd:.2f} reached: this run has spent about ${self.total:.2f} "
            f"(${self.spent:.2f} in this process), and the next call could pass the cap"
        )

    def describe(self) -> dict:
        with self._lock:
            return {
                "max_usd": self.max_usd,
                "spent_usd": round(self.total, 6),
                "spent_here_usd": round(self.spent, 6),
                "paid_calls_here": self.calls,
                "refused_calls": self.refused,
                "exhausted": self.exhausted,
            }


_CURRENT: Optional[Budget] = None
_CURRENT_KEY: Optional[tuple] = None
_LOCK = threading.Lock()


def current(cache=None) -> Optional[Budget]:
    """The process-wide Budget from the environment (None without ACEMAD_MAX_USD). One object for every client
    of the process, rebuilt when the environment changes (tests set it per test)."""
    global _CURRENT, _CURRENT_KEY
    key = (env(ENV_MAX), env(ENV_SINCE))
    with _LOCK:
        if key != _CURRENT_KEY:
            _CURRENT, _CURRENT_KEY = Budget.from_env(cache), key
        return _CURRENT
