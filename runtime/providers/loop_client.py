"""An SDK's HTTP client that lives and ends with the event loop that made it.

An async HTTP pool cannot outlive its loop, so a provider keeps one client per loop. Each
`run_sync` (and each CLI command) runs its turns in a loop of its own, and the client it made was
left open when that loop ended: its sockets were closed only when the collector found them, each
with a ResourceWarning in whatever code ran then. Keyed by `id(loop)`, a later loop given the same
address could even have been handed the dead loop's client.

The client is closed inside its loop as the loop shuts down: an async generator started in the
loop is one that `asyncio.run` (and any loop's `shutdown_asyncgens`) finishes, and its `finally` awaits
the client's `close()`. The loop object itself, not its id, says whose client it is.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable


async def _closed_with_the_loop(client: Any) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await client.close()


class LoopClient:
    """`await get()`: this loop's client, made by `make()` on first use in it."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._closer: AsyncIterator[None] | None = None

    async def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None:
            client = self._make()
            closer = _closed_with_the_loop(client)
            await anext(closer)  # started here, so this loop closes it as it shuts down
            self._loop, self._client, self._closer = loop, client, closer
        return self._client
