"""The Session aggregate: one conversation of one agent, its durable input queue and active branch.

The head is the list of turn ids on the active branch; undo moves turns from the head onto a
redo stack and never deletes anything. A fork starts with a head that references its parent's
turns, so forking copies no history.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .context_wire import compaction_entry
from .decided import Decided
from .errors import DomainError
from .event_type import EventType
from .session_lifecycle import SESSION_LIFECYCLE as SESSION_LIFECYCLE  # ops/diagrams.py and tests import it from here
from .session_rules import (
    check_archivable,
    check_model_choice,
    check_new_input,
    check_pending_steering,
    check_reply_unrecorded,
    check_steering,
    first_kept_after,
    turns_to_redo,
    turns_to_undo,
)
from .session_upcasts import (
    files_not_asked,
    input_v1_v2,
    reply_v1_v2,
    snapshot_v1_v2,
    snapshot_v2_v3,
    snapshot_v3_v4,
    snapshot_v4_v5,
    snapshot_v5_v6,
    snapshot_v6_v7,
    snapshot_v7_v8,
    snapshot_v8_v9,
    started_v1_v2,
    turn_ended_v1_v2,
)
from .session_view import SessionView

if TYPE_CHECKING:  # pydantic models are imported where they are used: replaying a session (log) builds none
    from .agent_spec import AgentSpec

    # The payload shapes type the event fields for mypy and runtime/vocabulary.py; decoding needs none.
    from .payloads import ContentBlock, FileRestored, ForkOrigin, InputOrigin, SpecRecord, Usage


class Session(SessionView, Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    #: What each version added, and how an older snapshot is read: session_upcasts.snapshot_vN_vN+1.
    class_version = 9

    upcast_v1_v2 = staticmethod(snapshot_v1_v2)
    upcast_v2_v3 = staticmethod(snapshot_v2_v3)
    upcast_v3_v4 = staticmethod(snapshot_v3_v4)
    upcast_v4_v5 = staticmethod(snapshot_v4_v5)
    upcast_v5_v6 = staticmethod(snapshot_v5_v6)
    upcast_v6_v7 = staticmethod(snapshot_v6_v7)
    upcast_v7_v8 = staticmethod(snapshot_v7_v8)
    upcast_v8_v9 = staticmethod(snapshot_v8_v9)

    class Started(Aggregate.Created, Event):
        """v2: `forked_from` is {"session_id", "turn"}; v1 events of chat's /fork held "turn_id"."""

        class_version = 2
        spec: SpecRecord
        parent_session_id: UUID | None
        parent_tool_call_id: UUID | None
        forked_from: ForkOrigin | None
        head: list[UUID]

        upcast_v1_v2 = staticmethod(started_v1_v2)

    @event(Started)
    def __init__(
        self,
        id: UUID,
        spec: dict[str, Any],
        parent_session_id: UUID | None,
        parent_tool_call_id: UUID | None,
        forked_from: dict[str, Any] | None,
        head: list[UUID],
        timestamp: datetime,
    ) -> None:
        self.spec_data = spec
        self.parent_session_id = parent_session_id
        self.parent_tool_call_id = parent_tool_call_id
        self.forked_from = forked_from
        self.status = "idle"
        self.head: list[UUID] = list(head)
        self.turns: list[UUID] = []
        self.redo_stack: list[list[UUID]] = []
        self.queue: list[dict[str, Any]] = []
        self.active_turn_id: UUID | None = None
        self.title: str | None = None
        self.title_error: str | None = None
        #: The newest Compacted, and every one oldest first: after an undo the newest may no longer hold, and an
        #: earlier one whose turns all stay on the branch does (SessionView.held_compaction).
        self.compaction: dict[str, Any] | None = None
        self.compactions: list[dict[str, Any]] = []
        self.always_allowed: list[str] = []
        self.steering: list[dict[str, Any]] = []
        self.cancel_requested: dict[str, Any] | None = None
        self.compaction_attempts = 0
        #: Model calls made for the session but outside its turns (titles, summaries): cost counts them.
        self.aux_calls: list[dict[str, Any]] = []
        self.created_at = timestamp
        self.archived = False
        #: Each ModelChanged (session_view.py reads them).
        self.model_changes: list[dict[str, Any]] = []
        #: input id -> {"channel", "senders"} for inputs a channel queued; turn id -> reply outcome.
        self.input_origins: dict[str, dict[str, Any]] = {}
        self.replies: dict[str, str] = {}
        #: {"name", "prompt", "tool_call_id"} while a tool waits for a credential: the next message is the secret.
        self.pending_auth: dict[str, Any] | None = None
        #: {"kind": "undo"|"redo", "turn_ids", "workspace"} between an undo/redo --files being recorded and
        #: its FilesRestored/FilesReapplied: the file writes the log says are owed (a crash may have cut them off).
        self.files_owed: dict[str, Any] | None = None

    @classmethod
    def start(
        cls,
        session_id: UUID,
        spec: AgentSpec,
        now: datetime,
        parent_session_id: UUID | None = None,
        parent_tool_call_id: UUID | None = None,
        forked_from: dict[str, Any] | None = None,
        head: list[UUID] | None = None,
    ) -> "Session":
        return cls(
            id=session_id,
            spec=spec.model_dump(mode="json"),
            parent_session_id=parent_session_id,
            parent_tool_call_id=parent_tool_call_id,
            forked_from=forked_from,
            head=list(head or []),
            timestamp=now,
        )

    # -- the durable input queue -------------------------------------------------------------

    def queue_input(self, input_id: str, text: str, now: datetime, kind: str = "prompt",
                    attachments: list[dict[str, Any]] | None = None, origin: dict[str, Any] | None = None) -> None:
        """`attachments`: reference blocks (domain/attachment.py), recorded with the input they came with;
        `origin`: the channel and senders of an input a channel queued ({"channel", "senders"})."""
        check_new_input(self, input_id, origin)
        if attachments:
            self._input_with_attachments_queued(input_id=input_id, text=text, kind=kind, attachments=list(attachments),
                                                origin=origin, timestamp=now)
        else:
            self._input_queued(input_id=input_id, text=text, kind=kind, origin=origin, timestamp=now)

    class InputWithAttachmentsQueued(Event):
        """v2: `origin`, the channel and senders of an input a channel queued (None otherwise, and before)."""

        class_version = 2
        input_id: str
        text: str
        kind: str
        attachments: list[ContentBlock]
        origin: InputOrigin | None

        upcast_v1_v2 = staticmethod(input_v1_v2)

    @event(InputWithAttachmentsQueued)
    def _input_with_attachments_queued(self, input_id: str, text: str, kind: str, attachments: list[dict[str, Any]],
                                       origin: dict[str, Any] | None, timestamp: datetime) -> None:
        self.queue.append({"input_id": input_id, "text": text, "kind": kind, "queued_at": timestamp.isoformat(),
                           "attachments": attachments})
        if origin:
            self.input_origins[input_id] = origin

    class InputQueued(Event):
        """v2: `origin`, as on InputWithAttachmentsQueued."""

        class_version = 2
        input_id: str
        text: str
        kind: str
        origin: InputOrigin | None

        upcast_v1_v2 = staticmethod(input_v1_v2)

    @event(InputQueued)
    def _input_queued(self, input_id: str, text: str, kind: str, origin: dict[str, Any] | None, timestamp: datetime) -> None:
        self.queue.append({"input_id": input_id, "text": text, "kind": kind, "queued_at": timestamp.isoformat()})
        if origin:
            self.input_origins[input_id] = origin

    # -- replies sent back to the channel an input came from -------------------------------------

    def record_reply(self, turn_id: UUID, channel: str, senders: list[str], receiver: str, delivered: bool,
                     attempts: int, status: int | None, error: str | None, now: datetime, routine: str | None = None) -> None:
        """What became of the answer of a turn a channel input started, posted to the channel's
        receiver (`receiver`: its address with any secret cut out). Once per turn. `routine`: the routine
        whose run's findings these are (a routine's `notify`; `senders` is then empty), None for a channel
        input's answer."""
        check_reply_unrecorded(self, turn_id)
        if delivered:
            self._reply_delivered(turn_id=turn_id, channel=channel, senders=list(senders), receiver=receiver,
                                  attempts=attempts, status=status, routine=routine, timestamp=now)
        else:
            self._reply_failed(turn_id=turn_id, channel=channel, senders=list(senders), receiver=receiver,
                               attempts=attempts, status=status, error=error or "failed", routine=routine, timestamp=now)

    class ReplyDelivered(Event):
        """v2: `routine`, the routine whose findings were posted (None for a channel input's answer, and before)."""

        class_version = 2
        turn_id: UUID
        channel: str
        senders: list[str]
        receiver: str
        attempts: int
        status: int | None
        routine: str | None

        upcast_v1_v2 = staticmethod(reply_v1_v2)

    @event(ReplyDelivered)
    def _reply_delivered(self, turn_id: UUID, channel: str, senders: list[str], receiver: str, attempts: int,
                         status: int | None, routine: str | None, timestamp: datetime) -> None:
        self.replies[str(turn_id)] = "delivered"

    class ReplyFailed(Event):
        """Every attempt failed (`status`: the receiver's last HTTP status, None if none answered); the
        turn is not affected, and the reply is not tried again. v2: `routine`, as on ReplyDelivered."""

        class_version = 2
        turn_id: UUID
        channel: str
        senders: list[str]
        receiver: str
        attempts: int
        status: int | None
        error: str
        routine: str | None

        upcast_v1_v2 = staticmethod(reply_v1_v2)

    @event(ReplyFailed)
    def _reply_failed(self, turn_id: UUID, channel: str, senders: list[str], receiver: str, attempts: int,
                      status: int | None, error: str, routine: str | None, timestamp: datetime) -> None:
        self.replies[str(turn_id)] = "failed"

    # -- secrets cut out before recording -----------------------------------------------------

    def note_redactions(self, where: str, counts: dict[str, int], now: datetime) -> None:
        """How many secrets of each kind were cut out of an input (`where`: "input ID" or "steering ID") before it was recorded."""
        if counts:
            self._secrets_redacted(where=where, counts=dict(counts), timestamp=now)

    class SecretsRedacted(Event):
        where: str
        counts: dict[str, int]

    @event(SecretsRedacted)
    def _secrets_redacted(self, where: str, counts: dict[str, int], timestamp: datetime) -> None:
        """Nothing changes: the count is the fact, for the audit (the text was redacted before it was recorded)."""

    # -- auth mode: a credential a tool asked for --------------------------------------------

    def await_credential(self, name: str, prompt: str, tool_call_id: str, now: datetime) -> None:
        """Enter auth mode (seed 001): the next user message is the credential, never an input."""
        self._credential_requested(name=name, prompt=prompt, tool_call_id=tool_call_id, timestamp=now)

    class CredentialRequested(Event):
        name: str
        prompt: str
        tool_call_id: str

    @event(CredentialRequested)
    def _credential_requested(self, name: str, prompt: str, tool_call_id: str, timestamp: datetime) -> None:
        self.pending_auth = {"name": name, "prompt": prompt, "tool_call_id": tool_call_id}

    def credential_provided(self, now: datetime) -> str:
        """The secret went to the credential store (runtime/credentials.py); only that it did is recorded."""
        if self.pending_auth is None:
            raise DomainError(f"session {self.id} is not waiting for a credential")
        name = str(self.pending_auth["name"])
        self._credential_provided(name=name, timestamp=now)
        return name

    class CredentialProvided(Event):
        name: str

    @event(CredentialProvided)
    def _credential_provided(self, name: str, timestamp: datetime) -> None:
        self.pending_auth = None

    def cancel_auth(self, reason: str, now: datetime, actor: str | None = None) -> None:
        """Any control submission (undo, cancel, ...) leaves auth mode; outside it nothing is recorded."""
        if self.pending_auth is not None:
            self._credential_cancelled(name=str(self.pending_auth["name"]), reason=reason, actor=actor, timestamp=now)

    class CredentialCancelled(Decided, Event):
        name: str
        reason: str

    @event(CredentialCancelled)
    def _credential_cancelled(self, name: str, reason: str, actor: str | None, timestamp: datetime) -> None:
        self.pending_auth = None

    # -- turns ---------------------------------------------------------------------------------

    def start_turn(self, turn_id: UUID, now: datetime) -> dict[str, Any]:
        """Take the oldest queued input (FIFO) and make it the running turn."""
        SESSION_LIFECYCLE.next_state("start_turn", self.status, self.id)
        if not self.queue:
            raise DomainError(f"session {self.id} has no queued input to start a turn from")
        item = self.queue[0]
        self._turn_started(turn_id=turn_id, input_id=item["input_id"], timestamp=now)
        return item

    class TurnStarted(Event):
        turn_id: UUID
        input_id: str

    @event(TurnStarted)
    def _turn_started(self, turn_id: UUID, input_id: str, timestamp: datetime) -> None:
        self.queue = [q for q in self.queue if q["input_id"] != input_id]
        self.status = "busy"
        self.active_turn_id = turn_id
        self.turns.append(turn_id)
        self.head.append(turn_id)
        self.redo_stack = []

    def end_turn(self, turn_id: UUID, now: datetime) -> None:
        """Free the session for its next input. How the turn ended is the Turn's own fact
        (Completed, Failed, Cancelled, Stopped), so it is not repeated here."""
        SESSION_LIFECYCLE.next_state("end_turn", self.status, self.id)
        if turn_id != self.active_turn_id:
            raise DomainError(f"turn {turn_id} is not the running turn of session {self.id}")
        self._turn_ended(turn_id=turn_id, timestamp=now)
        if self.steering:
            # Steering that no safe point delivered is not lost: it becomes the next input.
            self._steering_requeued(steer_ids=[s["steer_id"] for s in self.steering], timestamp=now)

    class TurnEnded(Event):
        """v2: no `status`; the turn's outcome is recorded once, on the Turn."""

        class_version = 2
        turn_id: UUID

        upcast_v1_v2 = staticmethod(turn_ended_v1_v2)

    @event(TurnEnded)
    def _turn_ended(self, turn_id: UUID, timestamp: datetime) -> None:
        self.status = "idle"
        self.active_turn_id = None
        self.cancel_requested = None

    # -- time travel ---------------------------------------------------------------------------

    def undo(self, count: int, now: datetime, actor: str | None = None, files: bool = False,
             workspace: str | None = None) -> list[UUID]:
        """`files`: the files these turns wrote are to be put back in `workspace` (owed until FilesRestored)."""
        undone = turns_to_undo(self, count)
        self.cancel_auth("undo", now, actor)
        self._turns_undone(turn_ids=undone, actor=actor, files=files, workspace=workspace if files else None, timestamp=now)
        return undone

    class TurnsUndone(Decided, Event):
        """v3: `files` (the files are owed, FilesRestored settles it) and the `workspace` they are in."""

        class_version = 3
        turn_ids: list[UUID]
        files: bool
        workspace: str | None

        upcast_v2_v3 = staticmethod(files_not_asked)

    @event(TurnsUndone)
    def _turns_undone(self, turn_ids: list[UUID], actor: str | None, files: bool, workspace: str | None,
                      timestamp: datetime) -> None:
        self.head = self.head[: len(self.head) - len(turn_ids)]
        self.redo_stack.append(list(turn_ids))
        self.files_owed = {"kind": "undo", "turn_ids": list(turn_ids), "workspace": workspace} if files else None

    def redo(self, now: datetime, actor: str | None = None, files: bool = False, workspace: str | None = None) -> list[UUID]:
        """`files`: the files these turns wrote are to be put back as they left them (owed until FilesReapplied)."""
        turn_ids = turns_to_redo(self)
        self.cancel_auth("redo", now, actor)
        self._turns_redone(turn_ids=turn_ids, actor=actor, files=files, workspace=workspace if files else None, timestamp=now)
        return turn_ids

    class TurnsRedone(Decided, Event):
        """v3: `files` and `workspace`, as TurnsUndone v3 (FilesReapplied settles them)."""

        class_version = 3
        turn_ids: list[UUID]
        files: bool
        workspace: str | None

        upcast_v2_v3 = staticmethod(files_not_asked)

    @event(TurnsRedone)
    def _turns_redone(self, turn_ids: list[UUID], actor: str | None, files: bool, workspace: str | None,
                      timestamp: datetime) -> None:
        self.redo_stack.pop()
        self.head.extend(turn_ids)
        self.files_owed = {"kind": "redo", "turn_ids": list(turn_ids), "workspace": workspace} if files else None

    def record_files_restored(self, turn_ids: list[UUID], files: list[dict[str, Any]], now: datetime) -> None:
        """The workspace files that undone turns changed were put back as they were before them."""
        if not files:
            raise DomainError("a file restoration needs at least one file")
        self._refuse_unowed("undo", turn_ids)
        self._files_restored(turn_ids=list(turn_ids), files=list(files), timestamp=now)

    class FilesRestored(Event):
        turn_ids: list[UUID]
        files: list[FileRestored]

    @event(FilesRestored)
    def _files_restored(self, turn_ids: list[UUID], files: list[dict[str, Any]], timestamp: datetime) -> None:
        self._files_written("undo", turn_ids)

    def record_files_reapplied(self, turn_ids: list[UUID], files: list[dict[str, Any]], now: datetime) -> None:
        """The files redone turns changed were put back as those turns left them (`redo --files`)."""
        if not files:
            raise DomainError("a file re-application needs at least one file")
        self._refuse_unowed("redo", turn_ids)
        self._files_reapplied(turn_ids=list(turn_ids), files=list(files), timestamp=now)

    class FilesReapplied(Event):
        turn_ids: list[UUID]
        files: list[FileRestored]

    @event(FilesReapplied)
    def _files_reapplied(self, turn_ids: list[UUID], files: list[dict[str, Any]], timestamp: datetime) -> None:
        self._files_written("redo", turn_ids)

    def _owes(self, kind: str, turn_ids: list[UUID]) -> bool:
        owed = self.files_owed
        return owed is not None and owed["kind"] == kind and list(owed["turn_ids"]) == list(turn_ids)

    def _refuse_unowed(self, kind: str, turn_ids: list[UUID]) -> None:
        """Files are recorded written once per undo/redo --files that owes them: a second record for the same one
        (another process finished them meanwhile) would say twice, differently, what happened to them."""
        if not self._owes(kind, turn_ids):
            raise DomainError(f"no {kind} --files of these turns owes its files (they were recorded written already); "
                              "nothing to record")

    def _files_written(self, kind: str, turn_ids: list[UUID]) -> None:
        """The files an undo or redo of these turns owed are written: nothing is owed any more."""
        if self._owes(kind, turn_ids):
            self.files_owed = None

    # -- descriptive facts ---------------------------------------------------------------------

    def set_title(self, title: str, now: datetime, usage: dict[str, Any] | None = None, model: str = "") -> None:
        if self.title is not None:
            raise DomainError(f"session {self.id} already has a title")
        self._title_set(title=title, usage=usage or {}, model=model, timestamp=now)

    class TitleSet(Event):
        title: str
        usage: Usage
        model: str

    @event(TitleSet)
    def _title_set(self, title: str, usage: dict[str, Any], model: str, timestamp: datetime) -> None:
        self.title = title
        self.aux_calls.append({"kind": "title", "model": model, "usage": usage, "at": timestamp.isoformat()})

    def fail_title(self, reason: str, now: datetime, usage: dict[str, Any] | None = None, model: str = "") -> None:
        """The title call failed; recorded (with any usage it cost) so it is not retried blindly."""
        if self.title is not None:
            raise DomainError(f"session {self.id} already has a title")
        self._title_failed(reason=reason, usage=usage or {}, model=model, timestamp=now)

    class TitleFailed(Event):
        reason: str
        usage: Usage
        model: str

    @event(TitleFailed)
    def _title_failed(self, reason: str, usage: dict[str, Any], model: str, timestamp: datetime) -> None:
        self.title_error = reason

    def archive(self, now: datetime, actor: str | None = None, queue_never_runs: bool = False) -> None:
        """Hide the session from listings. Nothing is deleted: the log stays whole, `sessions --all`
        shows it, `unarchive` brings it back (session_rules.check_archivable says which can go)."""
        check_archivable(self, queue_never_runs)
        self._archived(actor=actor, timestamp=now)

    class Archived(Event):
        actor: str | None

    @event(Archived)
    def _archived(self, actor: str | None, timestamp: datetime) -> None:
        self.archived = True

    def unarchive(self, now: datetime, actor: str | None = None) -> None:
        if not self.archived:
            raise DomainError(f"session {self.id} is not archived")
        self._unarchived(actor=actor, timestamp=now)

    class Unarchived(Event):
        actor: str | None

    @event(Unarchived)
    def _unarchived(self, actor: str | None, timestamp: datetime) -> None:
        self.archived = False

    def record_worker_failure(self, worker: str, error: str, failures: int, retry_in_s: float | None, now: datetime) -> None:
        """A worker could not advance this session. Recorded (not only logged) so `log` and `audit`
        show why a session stands still; `retry_in_s` None means the worker will not try it again."""
        self._worker_failed(worker=worker, error=error, failures=failures, retry_in_s=retry_in_s, timestamp=now)

    class WorkerFailed(Event):
        worker: str
        error: str
        failures: int
        retry_in_s: float | None

    @event(WorkerFailed)
    def _worker_failed(self, worker: str, error: str, failures: int, retry_in_s: float | None, timestamp: datetime) -> None:
        pass

    def change_model(self, model: str, now: datetime, thinking_tokens: int | None = None, actor: str | None = None) -> bool:
        """Run the session's next turns on `model` (`thinking_tokens`: the extended-thinking budget, 0 = off,
        None = the process's default). A running turn keeps its model; the change applies from the next one.
        Returns False, recording nothing, if the session already runs on exactly that."""
        check_model_choice(model, thinking_tokens)
        current = self.spec
        if current.model == model and current.thinking_tokens == thinking_tokens:
            return False
        self._model_changed(model=model, thinking_tokens=thinking_tokens, previous=current.model, actor=actor, timestamp=now)
        return True

    class ModelChanged(Event):
        model: str
        thinking_tokens: int | None
        previous: str
        actor: str | None

    @event(ModelChanged)
    def _model_changed(self, model: str, thinking_tokens: int | None, previous: str, actor: str | None, timestamp: datetime) -> None:
        self.model_changes.append({"model": model, "thinking_tokens": thinking_tokens, "actor": actor, "at": timestamp.isoformat(),
                                   "from_turn": len(self.turns)})

    def allow_always(self, tool_name: str, now: datetime) -> None:
        if tool_name not in self.always_allowed:
            self._tool_always_allowed(tool_name=tool_name, timestamp=now)

    class ToolAlwaysAllowed(Event):
        tool_name: str

    @event(ToolAlwaysAllowed)
    def _tool_always_allowed(self, tool_name: str, timestamp: datetime) -> None:
        self.always_allowed.append(tool_name)

    # -- steering and cancel requests (they may come from another process) ----------------------

    def steer(self, steer_id: str, text: str, now: datetime, wait_batch: bool = False, actor: str | None = None,
              turn_id: UUID | None = None) -> str:
        """Steer the running turn; with no turn running, the text becomes a normal queued input.
        `turn_id`: the turn the steerer means (chat, the one it shows; see session_rules.check_steering).

        Returns "steering" or "queued", so the caller can say which happened.
        """
        check_steering(self, text, turn_id)
        if self.active_turn_id is None:
            # A control, not the awaited credential: it leaves auth mode (seed 001), and its text is a message.
            self.cancel_auth("steer", now, actor)
            self.queue_input(steer_id, text, now, kind="prompt")
            return "queued"
        self._steering_queued(
            steer_id=steer_id, text=text, turn_id=self.active_turn_id, wait_batch=wait_batch, actor=actor, timestamp=now
        )
        return "steering"

    class SteeringQueued(Decided, Event):
        steer_id: str
        text: str
        turn_id: UUID
        wait_batch: bool

    @event(SteeringQueued)
    def _steering_queued(
        self, steer_id: str, text: str, turn_id: UUID, wait_batch: bool, actor: str | None, timestamp: datetime
    ) -> None:
        self.steering.append({"steer_id": steer_id, "text": text, "turn_id": turn_id, "wait_batch": wait_batch})

    def deliver_steering(self, steer_ids: list[str], turn_id: UUID, step: int, now: datetime) -> None:
        check_pending_steering(self, steer_ids)
        self._steering_delivered(steer_ids=steer_ids, turn_id=turn_id, step=step, timestamp=now)

    class SteeringDelivered(Event):
        steer_ids: list[str]
        turn_id: UUID
        step: int

    @event(SteeringDelivered)
    def _steering_delivered(self, steer_ids: list[str], turn_id: UUID, step: int, timestamp: datetime) -> None:
        self.steering = [s for s in self.steering if s["steer_id"] not in steer_ids]

    class SteeringRequeued(Event):
        steer_ids: list[str]

    @event(SteeringRequeued)
    def _steering_requeued(self, steer_ids: list[str], timestamp: datetime) -> None:
        for item in [s for s in self.steering if s["steer_id"] in steer_ids]:
            self.queue.append(
                {"input_id": item["steer_id"], "text": item["text"], "kind": "steering", "queued_at": timestamp.isoformat()}
            )
        self.steering = [s for s in self.steering if s["steer_id"] not in steer_ids]

    def request_cancel(self, reason: str, now: datetime, actor: str | None = None) -> UUID:
        """Ask whichever process runs the active turn to cancel it; it polls for this.

        A request the pending one already makes (this turn, this reason) records nothing: it would
        change nothing the loop reads, and requests back to back (a script cancelling in a loop)
        each took a session version, so the running loop's own session writes lost every race
        and the turn failed. The first request stays the record of who asked and why."""
        if self.active_turn_id is None:
            raise DomainError(f"session {self.id} has no turn running; nothing to cancel")
        if not self.cancel_pending(reason):
            self._cancel_requested(turn_id=self.active_turn_id, reason=reason, actor=actor, timestamp=now)
        return self.active_turn_id

    def cancel_pending(self, reason: str) -> bool:
        """Whether a cancel of the active turn, for `reason`, is already requested and not yet honoured."""
        request = self.cancel_requested
        return request is not None and request["turn_id"] == self.active_turn_id and request["reason"] == reason

    class CancelRequested(Decided, Event):
        turn_id: UUID
        reason: str

    @event(CancelRequested)
    def _cancel_requested(self, turn_id: UUID, reason: str, actor: str | None, timestamp: datetime) -> None:
        self.cancel_requested = {"turn_id": turn_id, "reason": reason}

    # -- compaction ----------------------------------------------------------------------------

    def compact(
        self, turn_ids: list[UUID], summary: str | None, strategy: str, now: datetime,
        usage: dict[str, Any] | None = None, model: str = "",
    ) -> None:
        """Record that ``turn_ids`` (a prefix of the head) are replaced by ``summary`` in context."""
        first_kept = first_kept_after(self, turn_ids)
        self._compacted(
            turn_ids=list(turn_ids), first_kept_turn_id=first_kept, summary=summary, strategy=strategy,
            usage=usage or {}, model=model, timestamp=now,
        )

    class Compacted(Event):
        turn_ids: list[UUID]
        first_kept_turn_id: UUID | None
        summary: str | None
        strategy: str
        usage: Usage
        model: str

    @event(Compacted)
    def _compacted(
        self, turn_ids: list[UUID], first_kept_turn_id: UUID | None, summary: str | None, strategy: str,
        usage: dict[str, Any], model: str, timestamp: datetime,
    ) -> None:
        self.compaction = {
            "summary": summary, "compacted_turn_ids": list(turn_ids), "first_kept_turn_id": first_kept_turn_id,
            "strategy": strategy, "at": timestamp.isoformat(),
        }
        self.compactions = [*self.compactions, compaction_entry(self.compaction)]
        self.compaction_attempts += 1
        self.aux_calls.append({"kind": "summary", "model": model, "usage": usage, "at": timestamp.isoformat()})

    def record_compaction_failure(
        self, reason: str, strategy: str, now: datetime, usage: dict[str, Any] | None = None, model: str = ""
    ) -> None:
        """A summary that failed changes nothing in the history, but it is a recorded fact."""
        self._compaction_failed(reason=reason, strategy=strategy, usage=usage or {}, model=model, timestamp=now)

    class CompactionFailed(Event):
        reason: str
        strategy: str
        usage: Usage
        model: str

    @event(CompactionFailed)
    def _compaction_failed(self, reason: str, strategy: str, usage: dict[str, Any], model: str, timestamp: datetime) -> None:
        self.compaction_attempts += 1
        if usage:
            self.aux_calls.append({"kind": "summary", "model": model, "usage": usage, "at": timestamp.isoformat()})
