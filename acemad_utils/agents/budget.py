"""MAX_USD: a spending cap that stops sending paid calls before a run costs more than the user meant.

Before a call is sent its most expensive estimate (modelled prompt tokens, completion = its max_tokens) is
reserved; if spent + reserved + estimate would pass the cap, BudgetExceeded and every later paid call is refused
(the run stops consistently). A returned call settles its actual cost (its `usage`, else the estimate). Calls in
flight finish and are cached: raising MAX_USD and rerunning replays them for free. Across notebook kernels,
reproduce exports ACEMAD_MAX_USD and ACEMAD_BUDGET_SINCE and each kernel starts from what the response cache
recorded as paid since then. Free calls are never refused; an unpriced model cannot be counted, so a capped run
refuses it before any call (UnpricedModel).
"""

from __future__ import annotations

import threading
from typing import Optional

from acemad_utils.agents.prices import how_to_price
from acemad_utils.data.settings import env

ENV_MAX = "ACEMAD_MAX_USD"
ENV_SINCE = "ACEMAD_BUDGET_SINCE"


class BudgetExceeded(RuntimeError):
    """A paid call was not sent: it could take the run past MAX_USD (the runner stops starting questions)."""


class UnpricedModel(BudgetExceeded):
    """MAX_USD is set and a model the run would call has no price and is not known to be free."""

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
            return {"max_usd": self.max_usd, "spent_usd": round(self.total, 6),
                    "spent_here_usd": round(self.spent, 6), "paid_calls_here": self.calls,
                    "refused_calls": self.refused, "exhausted": self.exhausted}  # fmt: skip


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
