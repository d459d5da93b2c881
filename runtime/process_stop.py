"""A turn's cancellation that nobody asked for: the process running it stops without ending it.

A worker that crashed (a look for work that raised what it did not expect: out of file descriptors, say) left
`asyncio.run` to cancel its turns on the way out, and each was recorded as "cancelled by the user": a wrong answer
in `audit`, and an input that no one runs again. As a second SIGTERM does (`Worker.abandon`), such a stop leaves its
turns in flight, recorded as far as they got, for their leases: another worker, or `chronicle resume`, continues them.
The worker cancels them itself, first, with a message that says so; the loop (runtime/loop.py) then records no end.
"""

from __future__ import annotations

#: What a cancellation's message starts with when the process stops its own turns (the rest says why).
MARK = "left in flight: "


def stopping_message(why: str) -> str:
    """The message to cancel a turn's task with when the process stops without ending it."""
    return f"{MARK}the process running it stopped ({why})"


def stopped_by_process(exc: BaseException | None) -> str | None:
    """Why the process stopped this turn, if `exc` is such a cancellation; None for any other (a user's, a cancel
    request's, a middleware's)."""
    for arg in getattr(exc, "args", ()) or ():
        if isinstance(arg, str) and arg.startswith(MARK):
            return arg[len(MARK):]
    return None
