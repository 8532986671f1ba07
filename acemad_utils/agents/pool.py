"""The agents of one round at once: one process-wide thread pool for agent calls that do I/O.
ACEMAD_SEQUENTIAL=1 runs every agent call in the caller's thread (for pdb)."""

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


def agent_pool() -> ThreadPoolExecutor:
    """One pool, not one per round (threads cost CPU); its size only caps threads (the client bounds the calls in
    flight), and agent tasks never submit to it, so questions sharing it cannot deadlock."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=1024, thread_name_prefix="agent")
        return _POOL


def _forget_pool() -> None:
    # A forked child inherits the pool object but not its threads: work submitted there would never run.
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def map_agents(fn: Callable, items: Sequence) -> list:
    """[fn(x) for x in items], in the pool when there is more than one; every call finishes (and caches its
    reply) before the first error, if any, is raised."""
    if len(items) > 1 and not flag("ACEMAD_SEQUENTIAL"):
        pool = agent_pool()
        futures = [pool.submit(fn, x) for x in items[:-1]]
        try:  # the last one in the caller's thread, which would otherwise only wait
            last = fn(items[-1])
        finally:
            wait(futures)
        return [f.result() for f in futures] + [last]
    return [fn(x) for x in items]


def act_all(agents: Sequence[Agent], turns: Sequence[Turn]) -> list[Step]:
    """agents[i].act(turns[i]) for every agent of a round: concurrently when any of them does I/O."""
    if any(a.concurrent for a in agents):
        return map_agents(lambda pair: pair[0].act(pair[1]), list(zip(agents, turns)))
    return [a.act(t) for a, t in zip(agents, turns)]
