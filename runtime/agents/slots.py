"""A global cap on sub-agents running at once in this process, across the whole tree.

Each `delegate` runs its tasks concurrently, so a fan-out of 16 tasks at depth 2 ran 16 + 16×16 = 272
children at once (each with its model calls and tools). A child runs only while it holds one of
`CHRONICLE_MAX_CONCURRENT_SUBAGENTS` slots (default 8); a child that delegates gives its slot back
while it waits for its own children and takes one again to continue, so a tree deeper than the cap
queues instead of deadlocking. Slots are per event loop: each `asyncio.run` has its own pool.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import AsyncIterator
from weakref import WeakKeyDictionary

_holding: ContextVar[bool] = ContextVar("chronicle_subagent_slot", default=False)
_pools: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = WeakKeyDictionary()


def cap() -> int:
    from ..environment import EnvironmentSettingError, environment

    try:
        return environment().max_concurrent_subagents
    except EnvironmentSettingError:
        return 8  # a bad value was already refused, before anything ran, by the command that started


def _pool() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = asyncio.Semaphore(cap())
    return pool


@asynccontextmanager
async def child_slot() -> AsyncIterator[None]:
    """Hold a slot while a sub-agent runs."""
    pool = _pool()
    await pool.acquire()
    token = _holding.set(True)
    try:
        yield
    finally:
        _holding.reset(token)
        pool.release()


@asynccontextmanager
async def waiting_for_children() -> AsyncIterator[None]:
    """Around a sub-agent's wait for its own children: its slot is free meanwhile (no deadlock)."""
    if not _holding.get():
        yield
        return
    pool = _pool()
    pool.release()
    try:
        yield
    finally:
        await pool.acquire()
