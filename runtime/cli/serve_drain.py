"""How `chronicle serve` stops under a supervisor: the first SIGTERM (or Ctrl-C) drains, a second one stops at once.

uvicorn's own handling closes the listening socket at the first signal and then waits for the app's lifespan, which
waited for the worker's turns: for up to 30 s a supervisor's health check and a load balancer saw a server that was
down while it was still finishing work, and the process ended by re-raising the signal (exit 143). Here the first
signal begins the app's drain (runtime/server/draining.py) and uvicorn goes on serving; once the worker has finished
the turns in hand, uvicorn's shutdown runs as before (live streams end, the lifespan closes the store) and the
process exits 0. A drain that outlasts its limit, or a second signal, stops at once as `chronicle worker` does on
its second: the running commands' process groups killed, the turns left in flight to their leases.
"""

from __future__ import annotations

import asyncio
import os
import sys
from types import FrameType
from typing import Any, Callable, NoReturn

import uvicorn

from chronicle.runtime.server.draining import Drain

#: Exit status of a stop at once by a second signal, as `chronicle worker`'s (128 + SIGTERM).
STOPPED_AT_ONCE = 143


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, drain: Drain, say: Callable[[str], Any]) -> None:
        super().__init__(config)
        self.drain, self.say = drain, say
        self.signals = 0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's handler of SIGINT and SIGTERM, run on the main thread, which runs the event loop: the drain
        begins from the loop (it logs and flushes the channels' held bursts, which a signal must not interrupt)."""
        self.signals += 1
        if self.signals > 1:
            self.stop_now("stopped at once by a second signal", STOPPED_AT_ONCE)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not serving (yet, or any more): nothing to drain
            self.should_exit = True
            return
        loop.call_soon_threadsafe(self.begin)

    def begin(self) -> None:
        if self.drain.draining:
            return
        if self.drain.worker is not None:  # said before the worker's own line (`draining (finishing N session(s) in hand)`)
            self.say(f"chronicle: draining: new work is refused (503, Retry-After) and /healthz answers 503 draining "
                     f"until the turns in hand have ended (at most {self.drain.limit_s:g} s); a second signal stops at once")
        self.drain.begin()

    async def on_tick(self, counter: int) -> bool:
        """uvicorn's look, ten times a second, at whether to stop: once the drain is over."""
        if self.drain.draining and not self.should_exit:
            if self.drain.finished():
                self.say("chronicle: drained: the turns in hand have ended; stopping" if self.drain.worker is not None
                         else "chronicle: stopping (this server runs no worker: nothing to drain)")
                self.should_exit = True
            elif self.drain.left_s() <= 0:
                self.stop_now(f"the drain limit ({self.drain.limit_s:g} s) passed", 0)
        return await super().on_tick(counter)

    def stop_now(self, why: str, code: int) -> NoReturn:
        """No turn ends, and no command a tool started outlives the process either (Worker.abandon)."""
        if self.drain.worker is not None:
            self.drain.worker.abandon(why)
        else:
            from chronicle.runtime.tools.shell import kill_running_commands

            self.say(f"chronicle: {why}; {kill_running_commands()} running command(s) killed")
        sys.stderr.flush()
        os._exit(code)
