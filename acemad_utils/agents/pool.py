"""Where the agents of one round run at once: one process-wide thread pool for agent calls that do I/O.

    from acemad_utils.agents.pool import act_all, map_agents
    steps = act_all(agents, turns)              # agents[i].act(turns[i]), in threads when the agents do I/O
    map_agents(fn, items)                       # [fn(x) for x in items], concurrently, order kept

protocol/debate.py only says *which* agents act in a round (Population.act_all); an LLM population runs them
here. ACEMAD_SEQUENTIAL=1 runs every agent call in the caller's thread instead (for debugging with pdb).
"""

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


def sequential() -> bool:
    """ACEMAD_SEQUENTIAL=1: every agent call in the caller's thread."""
    return flag("ACEMAD_SEQUENTIAL")


def agent_pool() -> ThreadPoolExecutor:
    """One process-wide pool for agent calls. Why not a pool per round: creating and joining N threads every
    round costs client CPU that, at 64 calls in flight, the GIL-bound client does not have (bench/throughput.py).
    Its size only caps threads (the LLM client's semaphore bounds the calls in flight), and agent tasks never
    submit to this pool themselves, so question threads sharing it cannot deadlock."""
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
    if len(items) > 1 and not sequential():
        pool = agent_pool()
        futures = [pool.submit(fn, x) for x in items[:-1]]
        try:  # the last one in the caller's thread, which would otherwise only wait: one thread hand-off less
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
