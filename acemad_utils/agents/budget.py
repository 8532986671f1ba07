"""MAX_USD: each paid call reserves its dearest estimate (completion = its max_tokens) before it is sent, so a run stops
before it could pass the cap; kernels of one reproduce run share it through the response cache (ACEMAD_MAX_USD,
ACEMAD_BUDGET_SINCE). Free calls are never refused; an unpriced model cannot be counted."""

from __future__ import annotations

import math
import threading
from typing import Optional

from acemad_utils.agents.prices import HOW_TO_PRICE
from acemad_utils.data.settings import env

ENV_MAX = "ACEMAD_MAX_USD"
ENV_SINCE = "ACEMAD_BUDGET_SINCE"


class BudgetExceeded(RuntimeError): ...  # a paid call was not sent: it could take the run past MAX_USD


class UnpricedModel(BudgetExceeded):
    def __init__(self, model: str):
        self.model = model
        super().__init__(unpriced_message([model]))


def unpriced_message(models) -> str:
    """Why a capped run will not start for the unpriced `models`, and how to fix it."""
    how = HOW_TO_PRICE.format(model=models[0] if len(models) == 1 else "MODEL")
    return (f"MAX_USD is set but {', '.join(map(repr, models))} has no price: the cap could not count its calls, so "
            f"nothing is sent. To fix it, {how}. An endpoint on localhost is not assumed free: it may be a gateway to "
            "a paid provider.")  # fmt: skip


def parse_max_usd(value) -> Optional[float]:
    """None for no cap ('' / None / 'none'), else a non-negative float (ValueError otherwise)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    try:
        x = math.nan if isinstance(value, str) and "_" in value else float(value)  # float() reads "1_0" as 10
    except (TypeError, ValueError):
        x = math.nan
    if not 0 <= x < math.inf:  # NaN too; no cap is written '' or none, as a profile's max_usd
        raise ValueError(f"MAX_USD (ACEMAD_MAX_USD, a profile's max_usd or pilot --usd) must be a finite number >= 0 "
                         f"(none: no cap), got {value!r}")  # fmt: skip
    return x


def _usd(x: float) -> str:
    """Dollars to the cent, or to 4 places below a cent (a cap of $0.004 is not "$0.00")."""
    return f"${x:,.2f}" if x == 0 or x >= 0.01 else f"${x:.4f}"


class Budget:
    """A thread-safe spend counter with a cap (None: counts only); spent_before: earlier kernels of this run."""

    def __init__(self, max_usd: Optional[float], spent_before: float = 0.0):
        self.max_usd, self.spent_before = max_usd, spent_before
        self.spent = self.reserved = 0.0  # spent in this process; reserved: estimates of calls in flight
        self.exhausted = False  # once refused, every later paid call is refused (the run stops consistently)
        self._lock = threading.Lock()

    @property
    def total(self) -> float:  # paid by this run: earlier kernels and this process
        return self.spent_before + self.spent

    def reserve(self, estimate: Optional[float], model: str = "") -> float:
        """Reserve `estimate` USD for a call about to be sent (returned, for settle), or raise BudgetExceeded."""
        if estimate is None and self.max_usd is not None:
            raise UnpricedModel(model)
        if estimate is None or estimate <= 0 or self.max_usd is None:
            return 0.0
        with self._lock:
            total = self.total
            if self.exhausted or total + self.reserved + estimate > self.max_usd:
                self.exhausted = True
                raise BudgetExceeded(f"MAX_USD {_usd(self.max_usd)} reached: this run has spent about {_usd(total)} "
                                     f"({_usd(self.spent)} here), and the next call could pass the cap")  # fmt: skip
            self.reserved += estimate
            return estimate

    def settle(self, reserved: float, actual: Optional[float]) -> None:
        """A call came back: actual is its cost (None when unknown: the reservation stands), 0 when not billed."""
        with self._lock:
            self.reserved -= reserved
            self.spent += reserved if actual is None else actual


_CURRENT: tuple = (None, None)  # (environment it was built from, Budget)
_LOCK = threading.Lock()


def current(cache=None) -> Optional[Budget]:
    """The process's Budget from ACEMAD_MAX_USD (None without it), rebuilt when the environment changes, starting from
    what the response cache recorded as paid since ACEMAD_BUDGET_SINCE."""
    global _CURRENT
    key = (env(ENV_MAX), env(ENV_SINCE))
    with _LOCK:
        if key != _CURRENT[0]:
            cap, since = parse_max_usd(key[0] or None), key[1]
            before = cache.spending(float(since))[0] if cap is not None and since and cache is not None else 0.0
            _CURRENT = (key, None if cap is None else Budget(cap, before))
        return _CURRENT[1]


def paid_line(since: float, cap: Optional[float] = None) -> Optional[str]:
    """What a command paid, for its last lines: the priced replies the response cache stored since `since` (epoch
    seconds), beside the cap and the unpriced models it could not count; None when nothing was paid and no cap was
    set. A reply read back from the cache was paid once, when it was stored; free models count 0."""
    from acemad_utils.agents.cache import ResponseCache  # noqa: PLC0415 (sqlite only where a command ends)
    from acemad_utils.data.paths import outputs  # noqa: PLC0415

    path, usd, unpriced = outputs("cache", create=False) / "llm.sqlite", 0.0, []
    if path.is_file():
        with ResponseCache(path) as cache:
            usd, unpriced = cache.spending(since)
    if not usd and cap is None and not unpriced:
        return None
    shown = "under $0.01" if 0 < usd < 0.005 else f"about ${usd:,.2f}"
    of = "" if cap is None else f" of MAX_USD {_usd(cap)}"
    names = ", ".join(map(repr, unpriced))
    if unpriced and not usd:  # paid at a rate nobody told us: "$0.00" would mislead
        return f"paid: not known: the replies of {names} stored since this command started have no price to count"
    if unpriced:
        of += f", plus the replies of {names}, which have no price and are not counted"
    return f"paid: {shown}{of} (the priced replies stored since this command started, at agents/prices.py's prices)"
