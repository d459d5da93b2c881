"""A Hook's inbound and final checks see who sent the turn's input (Checked.origin), from the session's record."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from chronicle.runtime.hooks import Checked, Hook, Hooks


class Seen(Hook):
    def __init__(self) -> None:
        self.origins: list[object] = []

    async def check_inbound(self, session, turn, checked: Checked) -> Checked:  # type: ignore[no-untyped-def]
        self.origins.append(checked.origin)
        return checked

    async def check_final(self, session, turn, checked: Checked) -> Checked:  # type: ignore[no-untyped-def]
        self.origins.append(checked.origin)
        return checked


def test_inbound_and_final_checks_get_the_origin_the_input_was_queued_with():
    origin = {"channel": "signal", "senders": ["alice@example.com"], "reply": None}
    session = SimpleNamespace(input_origins={"i-2": origin})
    seen = Seen()
    hooks = Hooks([seen])
    asyncio.run(hooks.check_inbound(session, SimpleNamespace(input_id="i-2"), "hello"))
    asyncio.run(hooks.check_final(session, SimpleNamespace(input_id="i-2"), "answer"))
    asyncio.run(hooks.check_inbound(session, SimpleNamespace(input_id="i-1"), "typed"))
    assert seen.origins == [origin, origin, None]
    assert seen.origins[0] is not origin, "a copy: a hook cannot change what the session recorded"
