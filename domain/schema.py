"""Schema versions: every event class and every snapshotted aggregate declares its class_version.

To change an event's fields: bump its version here AND on the class, add
`upcast_v{N}_v{N+1}(state)` to it, and — if the aggregate's state changes — bump the
aggregate's class_version with its own upcaster for snapshots (forgetting that one silently
drops fields on snapshot loads). tests/unit/test_schema_versions.py fails for an event class
missing from this table; tests/fixtures/v1_store.db holds events and snapshots of version 1.
"""

from __future__ import annotations

from eventsourcing.domain import DomainEvent

from .attachment import Attachment
from .lease import SessionLease
from .session import Session
from .tool_call import ToolCall
from .turn import Turn

AGGREGATES = (Session, Turn, ToolCall, SessionLease, Attachment)
AGGREGATE_VERSIONS = {"Session": 9, "Turn": 4, "ToolCall": 1, "SessionLease": 1, "Attachment": 1}
#: v2 of Session.TurnsUndone/TurnsRedone/SteeringQueued/CancelRequested, Turn.Resumed/Cancelled and
#: ToolCall.Approved/Denied: `actor`, who decided (None on older events). v3 of ToolCall.Approved: `reason`,
#: why a mechanism (the approval policy) approved; None on older events and for a person's answer.
#: v3 of Session.TurnsUndone/TurnsRedone: `files` and `workspace`, the file writes owed until FilesRestored/FilesReapplied.
EVENT_VERSIONS = {
    "Session.Created": 1, "Session.Started": 2, "Session.InputQueued": 2, "Session.TurnStarted": 1,
    "Session.TurnEnded": 2, "Session.TurnsUndone": 3, "Session.TurnsRedone": 3, "Session.TitleSet": 1,
    "Session.TitleFailed": 1, "Session.ToolAlwaysAllowed": 1, "Session.SteeringQueued": 2,
    "Session.SteeringDelivered": 1, "Session.SteeringRequeued": 1, "Session.CancelRequested": 2,
    "Session.Compacted": 1, "Session.CompactionFailed": 1, "Session.FilesRestored": 1, "Session.InputWithAttachmentsQueued": 2,
    "Session.FilesReapplied": 1, "Session.WorkerFailed": 1, "Session.Archived": 1, "Session.Unarchived": 1,
    "Session.ModelChanged": 1,
    # Seed 001's auth mode: asked, given (its value never recorded), cancelled by a control.
    "Session.CredentialRequested": 1, "Session.CredentialProvided": 1, "Session.CredentialCancelled": 2,
    # v2 of Session.InputQueued/InputWithAttachmentsQueued: `origin`, the channel and senders of a channel's input.
    # v2 of Session.ReplyDelivered/ReplyFailed: `routine`, whose findings a routine's `notify` posted.
    "Session.ReplyDelivered": 2, "Session.ReplyFailed": 2,
    "Turn.Created": 1, "Turn.Started": 1, "Turn.ApprovalRequested": 1, "Turn.Resumed": 2, "Turn.Completed": 1,
    "Turn.Failed": 1, "Turn.Cancelled": 2, "Turn.Stopped": 1, "Turn.Interrupted": 1, "Turn.ModelResponded": 3,
    "Turn.ModelCallRetried": 2, "Turn.ToolResultsRecorded": 1, "Turn.ToolResultsKept": 1, "Turn.AttachmentsReferenced": 1, "Turn.GuardrailApplied": 1,
    "Turn.MiddlewareApplied": 1, "Turn.IterationsCompacted": 1, "Turn.IterationCompactionFailed": 1,
    "ToolCall.Created": 1, "ToolCall.Requested": 1, "ToolCall.ApprovalRequested": 2, "ToolCall.Approved": 3, "ToolCall.Denied": 2,
    "ToolCall.Started": 1, "ToolCall.Completed": 3, "ToolCall.Failed": 2, "ToolCall.Skipped": 1,
    "ToolCall.Cancelled": 1, "ToolCall.Interrupted": 1, "ToolCall.EffectsRecorded": 1,
    # A sync function left running by a cancel or a timeout that ended later (runtime/tools/threads.py).
    "ToolCall.FinishedAfterAbandon": 1,
    "SessionLease.Created": 1, "SessionLease.Acquired": 1, "SessionLease.Renewed": 1, "SessionLease.Released": 1,
    "Attachment.Created": 1,
    # Secrets cut out of an input, a response or a tool result before it was recorded (runtime/secret_scan.py).
    "Session.SecretsRedacted": 1, "Turn.SecretsRedacted": 1, "ToolCall.SecretsRedacted": 1,
}


def event_classes(aggregate: type) -> dict[str, type]:
    """The aggregate's event classes by qualified name (the shared `Event` base left out)."""
    return {
        value.__qualname__: value for name, value in vars(aggregate).items()
        if isinstance(value, type) and issubclass(value, DomainEvent) and name != "Event"
    }


def declare_versions() -> None:
    """Write each event's version onto its class (the mapper reads `class_version`, default 1)."""
    for aggregate in AGGREGATES:
        for qualname, cls in event_classes(aggregate).items():
            if "class_version" not in vars(cls):
                cls.class_version = declared_version(cls) or EVENT_VERSIONS.get(qualname, 1)  # type: ignore[attr-defined]


def declared_version(cls: type) -> int | None:
    """The version an event class states in its own body. `@event(Cls)` replaces `Cls` with a
    subclass of the same name that the mapper resolves by topic; without this, that subclass
    would get the table's value and silently skip the upcasters the class itself declares."""
    for base in cls.__mro__[1:]:
        if base.__qualname__ == cls.__qualname__ and "class_version" in vars(base):
            return int(vars(base)["class_version"])
    return None


declare_versions()
