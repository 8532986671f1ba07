"""The agents of one round at once, in one process-wide thread pool (not one per round: threads cost CPU). Its size
only caps threads (the client bounds the calls in flight), and agent tasks never submit to it, so questions sharing
it cannot deadlock. ACEMAD_SEQUENTIAL=1 runs every agent call in the caller's thread (for pdb)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Optional

from acemad_utils.data.settings import flag
from acemad_utils.protocol.schema import Agent, Step, Turn

_POOL: Optional[ThreadPoolExecutor] = None
_POOL_LOCK = threading.Lock()


def _forget_pool() -> None:  # a forked child inherits the pool object but not its threads: its work would never run
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def map_agents(fn: Callable, items: Sequence) -> list:
    """[fn(x) for x in items], in the pool when there is more than one; every call finishes (and caches its reply)
    before the first error, if any, is raised."""
    if len(items) <= 1 or flag("ACEMAD_SEQUENTIAL"):
        return [fn(x) for x in items]
    global _POOL
    with _POOL_LOCK:
        _POOL = _POOL or ThreadPoolExecutor(max_workers=1024, thread_name_prefix="agent")
    futures = [_POOL.submit(fn, x) for x in items[:-1]]
    try:  # the last one in the caller's thread, which would otherwise only wait
        last = fn(items[-1])
    finally:
        wait(futures)
    return [f.result() for f in futures] + [last]


def act_all(agents: Sequence[Agent], turns: Sequence[Turn]) -> list[Step]:
    """agents[i].act(turns[i]) for every agent of a round: concurrently when any of them does I/O."""
    if any(a.concurrent for a in agents):
        return map_agents(lambda pair: pair[0].act(pair[1]), list(zip(agents, turns)))
    return [a.act(t) for a, t in zip(agents, turns)]
