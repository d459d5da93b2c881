"""Reading the past and forking it; undo and redo, with the files they change, are runtime/undo_redo.py.

The repository can load an aggregate as of a version but knows no "as of time", so a point
in a session's past is mapped to a position in the log: the commit of the session's N-th event
(or of the event that ended turn TURN). Turns are then rebuilt from their events up to that
point. Events written in the same transaction carry the same `now`, so "up to that point"
also takes events stamped no later than the cut, which keeps a transaction whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable
from uuid import UUID, uuid4

from chronicle.domain.context_wire import compaction_entry, holding_compaction
from chronicle.domain.notes import shares_notes
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn

from .actor import recorded_actor
from .clock import SYSTEM_CLOCK, Clock
from .pasteable import pasteable
from .store import ChronicleStore, NotFound
from .store_snapshots import apply_event

# No tools here: reading the past (`history --at`, fork) needs none of them, and the tools package
# (with the asyncio its tools use) was a tenth of that command's imports.


class TimeTravelError(ValueError):
    """A point in the past that does not exist, or an undo that would lose someone's work."""

    #: CLI exit code: 1 for a state problem (a turn not ended yet, a file changed since).
    exit_code = 1


class MomentOutOfRange(TimeTravelError):
    """The argument names a turn, event or count that does not exist: a usage error (exit 2)."""

    exit_code = 2


@dataclass
class PastView:
    session: Session
    turns: list[Turn]
    position: int
    version: int


def _cut_of_event(store: ChronicleStore, session_id: UUID, version: int) -> tuple[int, datetime]:
    for position, event in store.events_with_positions([session_id], version=version):
        return position, event.timestamp
    raise MomentOutOfRange(f"session {session_id} has no event number {version}")


def turns_as_of(store: ChronicleStore, turn_ids: list[UUID], position: int, timestamp: datetime) -> list[Turn]:
    """Rebuild each turn from its events committed at or before the cut."""
    states: dict[UUID, Any] = {}
    for pos, event in store.events_with_positions(turn_ids):
        if pos <= position or event.timestamp <= timestamp:
            states[event.originator_id] = apply_event(states.get(event.originator_id), event)
    return [states[t] for t in turn_ids if t in states]


@dataclass
class Cut:
    """A point in a session's past: the session as it was then, and where that is in the log.

    `timestamp` is None when no turn on the branch was cut (the turns a fork inherited had all
    completed before it), so every event of those turns counts."""

    session: Session
    position: int
    timestamp: datetime | None
    version: int


def turns_at(store: ChronicleStore, cut: Cut) -> list[Turn]:
    if cut.timestamp is None:
        return store.turns(cut.session.head)
    return turns_as_of(store, cut.session.head, cut.position, cut.timestamp)


def cut_at_version(store: ChronicleStore, session_id: UUID, version: int, latest: Session | None = None) -> Cut:
    """The cut at the session's `version`-th event.

    `latest` is the session as loaded now, when the caller has it: a get of a long session
    deep-copies every turn id it holds (≈ 15 ms at 500 turns), so it is not loaded twice."""
    latest = latest if latest is not None else store.session(session_id, copy=False)
    if version < 1 or version > latest.version:
        raise MomentOutOfRange(f"session {session_id} has {latest.version} event(s); --version must be 1..{latest.version}")
    position, timestamp = _cut_of_event(store, session_id, version)
    return Cut(store.session(session_id, version=version), position, timestamp, version)


def as_of_version(store: ChronicleStore, session_id: UUID, version: int, latest: Session | None = None) -> PastView:
    """The session and its active branch as they were when its `version`-th event was recorded."""
    cut = cut_at_version(store, session_id, version, latest)
    return PastView(cut.session, turns_at(store, cut), cut.position, cut.version)


def turn_end_version(store: ChronicleStore, session: Session, own_number: int, shown_as: int | None = None) -> int:
    """The session's version at which its own turn `own_number` (counted from 1) ended.

    A session runs one turn at a time, so its N-th TurnEnded is normally its N-th turn's: that
    one event is read first (one indexed query, one decode); every TurnEnded is scanned only
    if it names another turn."""
    wanted = session.turns[own_number - 1]
    ended = _first_event(store, session.id, "TurnEnded", own_number - 1, lambda e: getattr(e, "turn_id", None) == wanted)
    if ended is not None:
        return int(ended.originator_version)
    raise TimeTravelError(
        f"turn {shown_as or own_number} of session {session.id} has not ended yet; "
        f"`{pasteable(f'resume {session.id}', store.url)}` may finish it"
    )


def inherited_turns(store: ChronicleStore, session: Session) -> list[UUID]:
    """The turns a fork started with (its parent's, by reference); none for other sessions."""
    return list(store.first_head(session.id)) if session.forked_from else []


def numbered_turns(store: ChronicleStore, session: Session) -> list[UUID]:
    """Every turn of the session's conversation, numbered as `history --at N`, `fork --at N`, `log`, `audit` and
    `why` number them: turn N is the list's N-th. A fork's inherited turns come first, then the session's own in the
    order they began, undone ones included (an undo takes a turn off the branch, never out of the count), so after
    an undo and a new turn the new turn is 3, not 2."""
    return [*inherited_turns(store, session), *session.turns]


def _nth_event(store: ChronicleStore, session_id: UUID, topic_suffix: str, n: int) -> tuple[int, Any] | None:
    """(log position, event) of the session's n-th event of this kind, if it has that many."""
    for found in store.events_with_positions([session_id], topic_suffix=topic_suffix, offset=n - 1, limit=1):
        return found
    return None


def _own_turn_end(store: ChronicleStore, session_id: UUID, own: int, fork: bool) -> Cut | None:
    """The cut at the end of the session's own turn `own`, if its own-th TurnEnded names it
    (and the session is a fork or not, as `fork` says); None to look closer."""
    found = _nth_event(store, session_id, ".TurnEnded", own)
    if found is None:
        return None
    position, ended = found
    then = store.session(session_id, version=ended.originator_version)
    if bool(then.forked_from) != fork or len(then.turns) < own or then.turns[own - 1] != getattr(ended, "turn_id", None):
        return None
    return Cut(then, position, ended.timestamp, then.version)


def cut_at_turn(store: ChronicleStore, session_id: UUID, number: int) -> Cut:
    """The cut at the end of turn `number`, counted as the conversation shows turns: on a fork,
    the turns inherited from its parent come first, then its own, so `history --at`,
    `fork --at` and `sessions` agree.

    The session's own N-th turn is the N-th in its turn list; when its N-th TurnEnded names
    that turn, that is the cut: one one-row query (which also gives the cut's log position)
    and the session as of that event, never the whole session as it is now (a long session's
    snapshot is most of such a read). A session that is not a fork shows only its own turns,
    so that is tried first; a fork reads its first version to count what it inherited."""
    if number >= 1 and (cut := _own_turn_end(store, session_id, number, fork=False)) is not None:
        return cut
    start = store.session(session_id, version=1)
    if start.forked_from and number - len(start.head) >= 1:
        if (cut := _own_turn_end(store, session_id, number - len(start.head), fork=True)) is not None:
            return cut
    session = store.session(session_id, copy=False)  # only read here
    numbered = numbered_turns(store, session)
    total, inherited = len(numbered), len(numbered) - len(session.turns)
    if number < 1 or number > total:
        from_fork = f" ({inherited} inherited from the session it was forked from)" if inherited else ""
        raise MomentOutOfRange(f"session {session_id} has {total} turn(s){from_fork}; TURN must be 1..{total}")
    if number <= inherited:
        # Inherited turns had all completed before the fork, so they are as they were then.
        start = store.session(session_id, version=1)
        position, _ = _cut_of_event(store, session_id, 1)
        held = _compaction_at_inherited(store, session_id, start, number)
        start.compaction, start.compactions = held, [compaction_entry(held)] if held else []
        start.head = numbered[:number]
        return Cut(start, position, None, 1)
    own = number - inherited
    return cut_at_version(store, session_id, turn_end_version(store, session, own, shown_as=number), latest=session)


def _held(session: Session, head: list[UUID]) -> dict[str, Any] | None:
    """The session's compaction that holds on a branch of `head` (the newest whose turns are the branch's first), else None."""
    return holding_compaction(head, session.compactions)


def _compaction_at_inherited(store: ChronicleStore, fork_id: UUID, start: Session, number: int) -> dict[str, Any] | None:
    """The compaction the conversation had at a fork's inherited turn `number` (`start`: the fork's first version).

    A fork records the compaction holding where it was cut in the save that starts it (`fork`); without one, none
    held at any turn it inherited (a compaction holding at an earlier turn of a branch holds at its later turns too,
    until a later one replaces it). At the cut itself the recorded one is the answer, as the fork's model read it;
    at an earlier turn it is the one that held in the session that ran that turn as the turn ended, which may be
    none: a parent compacted after that turn read it uncompacted until then."""
    found = next(iter(store.events_with_positions([fork_id], topic_suffix=".Compacted", limit=1)), None)
    if found is None or found[1].originator_version != 2 or found[1].timestamp != start.created_on:
        return None  # none recorded with the start (or a fork from before forks recorded one: its model read none)
    head = list(start.head)
    if number == len(head):
        return _held(store.session(fork_id, version=2), head)
    return _compaction_when_ended(store, start, head[number - 1], head[:number])


def _compaction_when_ended(store: ChronicleStore, fork: Session, turn_id: UUID, head: list[UUID]) -> dict[str, Any] | None:
    """The compaction that held on `head` as `turn_id` ended, in the session that ran it: the fork's parent, or
    further up when the parent had inherited it too (each fork's first head names the turns it did not run)."""
    origin = fork.forked_from or {}
    while origin.get("session_id"):
        owner = UUID(str(origin["session_id"]))
        first = store.session(owner, version=1)
        if turn_id not in first.head:
            for _, ended in store.events_with_positions([owner], topic_suffix=".TurnEnded"):
                if getattr(ended, "turn_id", None) == turn_id:
                    return _held(store.session(owner, version=ended.originator_version), head)
            return None
        origin = first.forked_from or {}
    return None


def cut_at_step(store: ChronicleStore, session_id: UUID, number: int, step: int) -> Cut:
    """The cut just before the model's answer to step `step` of turn `number` (steps numbered as
    `log` shows them, from 0) was recorded: what the model had been sent for that call.

    The turn is found as `cut_at_turn` finds it; the cut is its last event before that answer,
    and the session is taken as it stood just before the answer (its branch, and a summary if one
    was made during the turn, before that call included), so a long turn's middle is one indexed
    read away, not its replay. An inherited turn's step: the session that ran it, as it stood then."""
    try:
        end = cut_at_turn(store, session_id, number)
        # Turn `number` is the one that had just ended there: the branch's last (not its `number`-th, which is
        # another turn, or none, once an undo has taken turns off the branch before it).
        turn_id = end.session.head[-1]
    except MomentOutOfRange:
        raise
    except TimeTravelError:
        # A turn not ended yet (running, or waiting for approval): the steps it took are the past already, and
        # what the model was sent for one of them is what a person asks before approving what it decided.
        latest = store.session(session_id)
        numbered = numbered_turns(store, latest)
        if not 1 <= number <= len(numbered) or numbered[number - 1] not in latest.head:
            raise
        end = Cut(latest, 0, None, latest.version)
        turn_id = numbered[number - 1]
    answered = step_answer(store, turn_id, step)
    if answered is None:
        raise MomentOutOfRange(f"turn {number} of session {session_id} has no step {step}; "
                                f"`{pasteable(f'log {session_id}', store.url)}` lists its steps")
    before = next(iter(store.events_with_positions([turn_id], version=answered.originator_version - 1)))
    position, timestamp = before[0], before[1].timestamp
    # The session as it stood just before the answer, not as of the turn's last event before it: the loop compacts
    # between a step's results and the next call (runtime/turn_compaction.py), and that `Session.Compacted` is
    # recorded after the turn's last event and read by the call (replay places it there too: replay_compaction.py).
    answered_at = next(iter(store.events_with_positions([turn_id], version=answered.originator_version)))[0]
    version = store.latest_version(session_id, answered_at - 1)
    if not version:
        # An inherited turn's steps were taken before the fork existed: the session that ran it, as it stood then.
        session = _owner_at(store, turn_id, answered_at - 1, end.session)
        return Cut(session, position, timestamp, end.version)
    return Cut(store.session(session_id, version=version), position, timestamp, version)


def _owner_at(store: ChronicleStore, turn_id: UUID, position: int, fallback: Session) -> Session:
    """The session that ran `turn_id` (a fork's parent, or further up) as it stood at `position`: what that turn's
    model calls read, a compaction made inside the turn included. `fallback` when that session is not in this store
    (a fork imported without its origin) or did not exist then."""

    created = next(iter(store.events_with_positions([turn_id], version=1)), None)
    owner = getattr(created[1], "session_id", None) if created is not None else None
    if owner is None:
        return fallback
    try:
        version = store.latest_version(owner, position)
        return store.session(owner, version=version) if version else fallback
    except NotFound:
        return fallback


def step_answer(store: ChronicleStore, turn_id: UUID, step: int) -> Any:
    """The turn's first recorded answer to step `step`: normally its (step + 1)-th answer, one
    indexed row; every answer is read only when an earlier step has none or more than one."""
    if step < 0:
        return None
    return _first_event(store, turn_id, "ModelResponded", step, lambda e: e.step == step)


def _first_event(store: ChronicleStore, aggregate_id: UUID, kind: str, guess: int, matches: Callable[[Any], bool]) -> Any:
    """The aggregate's first `kind` event that `matches`: its `guess`-th one (from 0) is read first,
    one indexed row; every one of that kind is read only if the guess is not it."""
    suffix = f".{kind}"
    first = store.events_with_positions([aggregate_id], topic_suffix=suffix, offset=guess, limit=1)
    for candidates in (first, store.events_with_positions([aggregate_id], topic_suffix=suffix)):
        for _, event in candidates:
            if type(event).__name__ == kind and matches(event):
                return event
    return None


def as_of_turn(store: ChronicleStore, session_id: UUID, number: int) -> PastView:
    """The conversation exactly as it was when turn `number` had completed, rebuilt from events."""
    cut = cut_at_turn(store, session_id, number)
    return PastView(cut.session, turns_at(store, cut), cut.position, cut.version)


def fork(
    store: ChronicleStore, session_id: UUID, number: int, clock: Clock = SYSTEM_CLOCK, actor: str | None = None,
    present: Session | None = None,
) -> Session:
    """A new session whose context is the parent's conversation as of turn `number`; no copying of turns. Its shared
    notes board starts with the parent tree's notes as they stood when that turn ended (runtime/notes.py).

    `actor`: who forked (default: this process's user@host), recorded in `forked_from` beside the
    origin, so the event keeps its fields and no upcaster is needed (older forks have no actor).
    `present`: the parent as loaded now, when the fork continues from the end of its branch (chat's
    /fork, `fork` without `--at`): the fork then starts from the parent's present conversation, with a
    compaction made since its last turn ended, not from that turn's end, which would hand the fork's model
    every turn the parent had stopped reading."""
    # The branch is all a fork needs: no turn is read.
    cut = Cut(present, 0, None, present.version) if present is not None else cut_at_turn(store, session_id, number)
    # The spec is recorded once, when the session starts, and no event changes it: the session as of
    # the cut has the one it has now, so the parent is not loaded again as it is now (a long
    # session's snapshot and the events after it were most of a fork's own time).
    now = clock.now()
    child = Session.start(
        uuid4(), cut.session.spec, now,
        forked_from={"session_id": str(session_id), "turn": number, "actor": recorded_actor(actor)},
        head=list(cut.session.head),
    )
    # The fork continues from the conversation as `history --at` shows it: a compaction of the parent's branch that
    # still holds at the cut holds on the fork too (recorded with it, in one save), or the fork's model would read
    # every turn the parent's had stopped reading.
    compaction = _held(cut.session, list(cut.session.head))
    if compaction:
        child.compact(list(compaction["compacted_turn_ids"]), compaction["summary"], compaction["strategy"], now)
    # The turns it continues from may speak of shared notes: the fork's board starts with those of the parent's tree
    # as they stood when turn `number` ended, saved with the fork (a crash leaves both or neither). A tree whose agents
    # have no notes tool has no board to read: its fork runs no query more than it did before boards were inherited.
    board = None
    if shares_notes(cut.session.spec):
        from .notes import inherited_board

        board = inherited_board(store, session_id, number, child.id, now, cut=None if present is not None else cut)
    store.create_session(child, *([board] if board is not None else []))
    return child
