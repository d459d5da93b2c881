"""Approve or deny the tool calls a paused turn waits on: one transaction, retried on a race.

`chronicle approve/deny`, chat's inline answer (through the loop's approver) and the public API
record decisions here or in the loop's tool runner — never through a copy of this retry loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from chronicle.domain.errors import DomainError
from chronicle.domain.tool_call import ToolCall

from ..actor import recorded_actor
from ..clock import SYSTEM_CLOCK, Clock
from ..pasteable import pasteable
from ..secret_scan import scanned_text
from ..session_work import pending_approvals
from ..store import ChronicleStore
from .errors import NOT_FOUND, AppError
from .queries import session_id

Verdict = Literal["approve", "deny"]


@dataclass(frozen=True)
class Decided:
    session_id: UUID
    calls: list[ToolCall]
    verdict: Verdict

    def rows(self) -> list[dict[str, str]]:
        """`approve/deny --json`: one object per decided call."""
        return [
            {"session_id": str(self.session_id), "tool_call_id": str(c.id), "tool_use_id": c.tool_use_id, "name": c.name, "status": c.status}
            for c in self.calls
        ]


def decide(store: ChronicleStore, ref: str | UUID, verdict: Verdict, tool_call: str | None = None, always: bool = False,
           reason: str = "denied by the user", clock: Clock = SYSTEM_CLOCK, actor: str | None = None) -> Decided:
    """Apply a decision to the chosen waiting calls (all of them unless `tool_call`) and the session at once.

    `actor`: who decides (default: this process's user@host; a server passes its caller)."""
    sid = session_id(store, ref)
    actor = recorded_actor(actor)
    for _ in range(20):
        record = store.session(sid)
        waiting = pending_approvals(store, record)
        if not waiting:
            raise AppError(f"session {sid} has no tool call awaiting approval; `{pasteable(f'history {sid}', store.url)}` shows where it stands",
                           kind=NOT_FOUND)
        chosen = waiting
        if tool_call:
            chosen = [c for c in waiting if str(c.id).startswith(tool_call.lower()) or c.tool_use_id == tool_call]
            if len(chosen) != 1:
                listed = ", ".join(f"{c.id} ({c.name}, {c.tool_use_id})" for c in waiting)
                raise AppError(f"{'no' if not chosen else 'more than one'} tool call awaiting approval matches {tool_call!r}; awaiting: {listed}",
                               kind=None if chosen else NOT_FOUND)
        now = clock.now()
        try:
            for call in chosen:
                if verdict == "approve":
                    call.approve(now, by="user", always=always, actor=actor)
                    if always:
                        record.allow_always(call.name, now)
                else:  # the reason is the tool result the model reads, and history/why/audit show it
                    call.deny(now, reason=scanned_text(call, "denial reason", reason, record.spec.workspace, now), actor=actor)
        except DomainError as exc:
            raise AppError(str(exc)) from None
        try:
            store.save(*chosen, record)
            return Decided(sid, chosen, verdict)
        except IntegrityError:
            continue
    raise AppError(f"session {sid} kept changing while recording the decision; try again")


def approve(store: ChronicleStore, ref: str | UUID, tool_call: str | None = None, always: bool = False,
            actor: str | None = None) -> Decided:
    return decide(store, ref, "approve", tool_call=tool_call, always=always, actor=actor)


def deny(store: ChronicleStore, ref: str | UUID, tool_call: str | None = None, reason: str | None = None,
         actor: str | None = None) -> Decided:
    return decide(store, ref, "deny", tool_call=tool_call, reason=reason or "denied by the user", actor=actor)


__all__ = ["Decided", "approve", "decide", "deny", "pending_approvals"]
