"""Routines' findings sent out (seed 001's heartbeat: "notifies via channel if findings").

A routine with `notify = "CHANNEL"` records that channel on each run when it fires (RoutineRun.Fired's
`notify`), as a channel input records `reply` when it is queued: the decision is the log's, so naming
a channel later does not send the findings of runs fired before. When the run's turn has ended, the
server's outbox (outbox.py) posts what it found to the channel's `reply_url` and records it as it
records a channel's reply (Session.ReplyDelivered / ReplyFailed, with `routine`): whichever process
ran the routine (a `chronicle worker`, `routines run`, chat's /heartbeat), once, after a restart too.

Findings: a completed turn's non-empty answer other than HEARTBEAT_OK (a heartbeat's, or any
routine's, "nothing to report" as settling reads it); a turn that did not complete is a failed run,
sent with status "failed" and no text. Nothing to report is neither posted nor recorded: it is
derived again from the turn whenever the outbox looks.

Runs are found through the routine index (routine_engine.RoutineRunLogged), read from where the
last look stopped; runs still waiting for their turn are kept in memory and looked at again. A
checkpoint of the workspace's (runtime/index_checkpoints.py) says below which index position no run
waits any more (posted, nothing to report, erased), advanced as they are let go: a restarted server
reads the index from there rather than every run ever fired.

`serve` says at start which routines' findings it posts, and where (`notified`): nothing else tells
a person that this server is the one their heartbeat's findings depend on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from chronicle.domain.ids import turn_id as make_turn_id
from chronicle.domain.routine_run import RoutineRun
from chronicle.runtime.index_checkpoints import CheckpointedRead
from chronicle.runtime.routine_engine import ROUTINE_RUN_INDEX_ID, RoutineEngine, routine_ok
from chronicle.runtime.shred_marks import forgotten_cause
from chronicle.runtime.store import ChronicleStore, NotFound

from .channels import ChannelConfig

if TYPE_CHECKING:
    from .outbox import Due


def notified(workspace: Path, channels: dict[str, ChannelConfig]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The workspace's routines with `notify`, by channel: (those this server posts, those it cannot:
    their channel is not among its own, as when `serve --agents` reads another chronicle.toml).
    A routine table that does not load raises RoutineError, as it stops `worker`."""
    from chronicle.runtime.routines import load_routines

    posted: dict[str, list[str]] = {}
    not_here: dict[str, list[str]] = {}
    for routine in load_routines(workspace):
        if routine.notify:
            config = channels.get(routine.notify)
            mine = config is not None and config.reply_url is not None
            (posted if mine else not_here).setdefault(routine.notify, []).append(routine.name)
    return posted, not_here


@dataclass(frozen=True)
class Watched:
    """A fired run whose findings are to be posted once its turn ends."""

    run_id: UUID
    routine: str
    channel: str
    session_id: UUID
    input_id: str
    #: Its entry's position in the routine index: the checkpoint stays below it while it waits.
    position: int


@dataclass
class Notices:
    """The runs of one workspace's routines (its `scope`) whose findings are due at a channel."""

    store: ChronicleStore
    workspace: Path
    waiting: dict[UUID, Watched] = field(default_factory=dict)
    read: CheckpointedRead | None = None  # made at the first look, when the workspace's scope is known

    def due(self, channels: dict[str, ChannelConfig]) -> list[Due]:
        """Every run whose turn ended with findings not posted yet; runs with nothing to report are let go."""
        from .outbox import Due

        self._read_index()
        found = []
        for run_id, watched in sorted(self.waiting.items()):
            config = channels.get(watched.channel)
            if config is None or config.reply_url is None:
                continue  # the channel went from this server's chronicle.toml: kept until it is back
            try:
                session = self.store.session(watched.session_id, copy=False)
            except NotFound:
                del self.waiting[run_id]  # erased
                continue
            tid = make_turn_id(session.id, watched.input_id)
            if str(tid) in session.replies:
                del self.waiting[run_id]  # posted already (before a restart, or by another server)
                continue
            if tid not in session.turns or session.active_turn_id == tid:
                continue  # not started yet, or still running
            turn = self.store.turn(tid)
            text = (turn.final_text or "").strip() if turn.status == "completed" else None
            if turn.status == "completed" and (not text or routine_ok(text)):
                del self.waiting[run_id]  # nothing to report: nothing is posted or recorded
                continue
            found.append(Due(session.id, tid, watched.channel, [], {
                "channel": watched.channel, "sender": None, "senders": [], "session_id": str(session.id),
                "turn_id": str(tid), "status": "completed" if text is not None else "failed", "text": text,
                "routine": watched.routine,
            }, routine=watched.routine, version=session.version))
        self._advance()
        return found

    def _advance(self) -> None:
        """Record how far no run waits: below the first one still waiting, or the whole index read."""
        if self.read is not None:
            self.read.advance_below(w.position for w in self.waiting.values())

    def _read_index(self) -> None:
        reader = RoutineEngine(self.store, self.workspace, spec=None, holder="")  # reading only: nothing is fired
        if self.read is None:
            self.read = CheckpointedRead(self.store, ROUTINE_RUN_INDEX_ID, "notices", reader.scope)
        for entry in self.read.new(reader.index):
            if entry.scope != reader.scope:
                continue  # another workspace's routine: its channel names are its chronicle.toml's
            try:
                run: Any = self.store.repository.get(entry.run_id)
            except AggregateNotFoundError:
                continue
            except Exception as exc:  # noqa: BLE001 - erased with its session (`chronicle forget`): nothing to post
                if forgotten_cause(exc) is None:
                    raise
                continue
            if isinstance(run, RoutineRun) and run.notify and run.session_id is not None and run.input_id is not None:
                self.waiting[run.id] = Watched(run.id, run.routine, run.notify, run.session_id, run.input_id,
                                                entry.originator_version)
