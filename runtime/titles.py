"""Session titles: made once, from the first input, by a cheap auxiliary call, recorded as an event.

The call goes through the session's own provider as an auxiliary request (no tools; the
scripted provider answers it without consuming the agent's responses). It runs alongside the
first model call and is recorded right after it through `update_session`, which applies it to
a fresh copy and retries on a version conflict (other processes write to a busy session). A
failed title call is recorded as TitleFailed and never fails the turn.
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


def _input_of(turn: Any) -> str:
    """The input as the model reads it: an inbound guardrail's change keeps what it removed from the title call too."""
    text = getattr(turn, "model_input", None)
    return turn.input_text if text is None else text


class TitleHook(Hook):
    def __init__(self, provider: Provider, store: Any, clock: Clock = SYSTEM_CLOCK) -> None:
        self.provider = provider
        self.store = store
        self.clock = clock
        self.pending: dict[Any, asyncio.Future] = {}
        self.asked: set[Any] = set()

    async def before_model_call(self, session: Any, turn: Any, request: ModelRequest) -> None:
        # Sub-agent sessions are named by their parent's task; only top-level sessions get a title call.
        wanted = session.title is None and session.title_error is None and session.turns[:1] == [turn.id] and session.parent_session_id is None
        if wanted and session.id not in self.asked:
            self.asked.add(session.id)
            self.pending[session.id] = asyncio.ensure_future(self._ask(session.spec, _input_of(turn), request))
        return None

    async def after_model_call(self, session: Any, turn: Any, response: Any) -> None:
        task = self.pending.pop(session.id, None)
        if task is None:
            return
        try:
            title, error, usage, model = await task
        except Exception as exc:  # noqa: BLE001 - a title must never fail the turn
            title, error, usage, model = None, f"{type(exc).__name__}: {exc}", {}, ""
        now = self.clock.now()

        def record(fresh: Any) -> None:
            # Applied to a fresh copy: other processes write to a busy session too.
            if fresh.title is not None or fresh.title_error is not None:
                return
            if title:
                from .secret_scan import scanner_for  # model text: scanned like any other before it is recorded

                found = scanner_for(fresh.spec.workspace).text(title)
                fresh.set_title(found.value, now, usage=usage, model=model)
                fresh.note_redactions("title", found.counts, now)
            else:
                fresh.fail_title(error or "the title call returned no text", now, usage=usage, model=model)

        self.store.update_session(session.id, record)

    async def _ask(self, spec: Any, first_input: str, request: ModelRequest) -> tuple[str | None, str | None, dict, str]:
        # The auxiliary model recorded on the spec ([models] auxiliary), else the model this turn asks.
        ask = ModelRequest(
            model=spec.auxiliary_model(request.model), system=TITLE_SYSTEM,
            messages=[Message(role="user", content=[TextBlock(text=first_input[:4000])])],
            tools=[], max_tokens=32, agent=spec.name, session_id=request.session_id, turn_number=request.turn_number,
            auxiliary="title",
        )
        response = await self.provider.stream(ask, ignore_deltas)
        usage = response.usage.model_dump()
        model = response.model or ask.model
        if response.stop_reason == "error":
            message = response.error.message if response.error else "unknown error"
            return None, f"title call failed: {message}", usage, model
        return clean_title(response.text) or None, None, usage, model
