"""Session titles: made once, from the first input, by a cheap auxiliary call, recorded as an event.

The call goes through the session's own provider as an auxiliary request (no tools; the
scripted provider answers it without consuming the agent's responses). It runs alongside the
first model call and is applied to the loop's own Session object, so it is saved with the
loop's next save of the session (no second writer, no version conflict). A failed title call
is recorded as TitleFailed and never fails the turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chronicle.domain.content import Message, TextBlock

from .clock import SYSTEM_CLOCK, Clock
from .hooks import Hook
from .providers.base import ModelRequest, Provider, ignore_deltas

TITLE_SYSTEM = (
    "Write a short title (at most 6 words) for a conversation that starts with the user's message below. "
    "Answer with the title only: no quotes, no punctuation at the end."
)
MAX_TITLE = 80


def clean_title(text: str) -> str:
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), "")
    line = line.strip("\"'`*# ").rstrip(".")
    return line[:MAX_TITLE].rstrip()


class TitleHook(Hook):
    def __init__(self, provider: Provider, clock: Clock = SYSTEM_CLOCK) -> None:
        self.provider = provider
        self.clock = clock
        self.pending: dict[Any, asyncio.Future] = {}

    async def before_model_call(self, session: Any, turn: Any, request: ModelRequest) -> None:
        wanted = session.title is None and session.title_error is None and turn.number == 1
        if wanted and session.id not in self.pending:
            self.pending[session.id] = asyncio.ensure_future(self._ask(session.spec, turn.input_text, request))
        return None

    async def after_model_call(self, session: Any, turn: Any, response: Any) -> None:
        task = self.pending.pop(session.id, None)
        if task is None:
            return
        try:
            title, error, usage, model = await task
        except Exception as exc:  # noqa: BLE001 - a title must never fail the turn
            title, error, usage, model = None, f"{type(exc).__name__}: {exc}", {}, ""
        if session.title is not None or session.title_error is not None:
            return
        now = self.clock.now()
        if title:
            session.set_title(title, now, usage=usage, model=model)
        else:
            session.fail_title(error or "the title call returned no text", now, usage=usage, model=model)

    async def _ask(self, spec: Any, first_input: str, request: ModelRequest) -> tuple[str | None, str | None, dict, str]:
        ask = ModelRequest(
            model=request.model, system=TITLE_SYSTEM, messages=[Message(role="user", content=[TextBlock(text=first_input[:4000])])],
            tools=[], max_tokens=32, agent=spec.name, session_id=request.session_id, turn_number=request.turn_number,
            auxiliary="title",
        )
        response = await self.provider.stream(ask, ignore_deltas)
        usage = response.usage.model_dump()
        model = response.model or request.model
        if response.stop_reason == "error":
            message = response.error.message if response.error else "unknown error"
            return None, f"title call failed: {message}", usage, model
        return clean_title(response.text) or None, None, usage, model
