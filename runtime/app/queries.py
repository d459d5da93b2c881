"""The read use cases: sessions, log, history, cost and audit, as the data `--json` prints.

Each returns plain JSON-ready dicts (one per line of `--json`), so the CLI renders them as
tables or JSON lines and the public API hands them over unchanged. Projections are caught up
first, so an answer includes every event committed before the query started.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID

from chronicle.domain.ids import board_index_id, notes_board_id, tool_call_ids
from chronicle.domain.notes import NoteBoard
from chronicle.domain.session import Session
from chronicle.domain.task_board import DelegatedTask
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.projections.cost import CostReport
from chronicle.projections.sql import iso
from chronicle.projections.summaries import summaries

from ..jsonable import jsonable
from ..store import ChronicleStore
from ..store_snapshots import apply_event
from .errors import AppError
from .session_listing import tree_order as tree_order  # the viewer and the CLI order rows with it

# The sub-agent tree (`log --tree`) and time travel (`history --at/--version`) are imported where
# they are used: they pull in the loop's tools, live events and asyncio, which `sessions`, `log`
# and `cost` never touch, and every command paid for them at start-up. So are the read models
# (every projection and the price table) and the domain's content models: both import pydantic,
# which `log` otherwise never needs.

AGGREGATE_KINDS: dict[type, str] = {Session: "session", Turn: "turn", ToolCall: "tool_call", DelegatedTask: "task", NoteBoard: "notes"}
SKIP_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}
RELATIVE = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def session_id(store: ChronicleStore, ref: str | UUID) -> UUID:
    """A full id or an unambiguous prefix, as people type them (NotFound otherwise)."""
    return ref if isinstance(ref, UUID) else store.resolve_session_id(ref)


def session_row(store: ChronicleStore, session: Session, summary: dict[str, Any] | None = None,
                cost: float | None = None, repair: str | None = None, job_cancelled: bool | None = None) -> dict[str, Any]:
    """`summary` and `cost` come from the projections (title, USD with sub-agents rolled up); `repair` is the status
    of the session's newest self-repair (retry, success, failed, manual_required), None if it never needed one.
    `job_cancelled`: whether the session is a job that `jobs cancel` cancelled (None: look its Job up), which lists it
    `cancelled` with nothing `queued` once no turn is in flight (projections/session_listing.py: as_listed)."""
    from chronicle.projections.session_listing import as_listed, unless_nobody_runs_it

    from ..leases import held_by_a_live_process

    status = session.status
    if session.active_turn_id is not None:
        status = unless_nobody_runs_it(store.turn(session.active_turn_id).status, True,
                                       lambda: held_by_a_live_process(store, session.id))
    last_id = last_turn_id(session)
    last = status if last_id is not None and last_id == session.active_turn_id else _turn_status(store, last_id)
    if job_cancelled is None:
        from ..jobs import cancelled

        job_cancelled = cancelled(store, session.id)
    status, queued = as_listed(status, len(session.queue), session.active_turn_id is not None, job_cancelled)
    return {
        "session_id": str(session.id),
        "title": session.title or (summary or {}).get("title"),
        "status": status,
        "agent": session.agent_name,
        "created_at": session.created_at.isoformat(),
        "parent_session_id": str(session.parent_session_id) if session.parent_session_id else None,
        "forked_from": session.forked_from,
        "turns": len(session.head),
        "queued": queued,
        "cost": cost,
        "repair": repair,
        "archived": bool(getattr(session, "archived", False)),
        "model": session.current_model or None,
        "instance": session.agent_instance or None,
        "last_turn_status": last,
    }


def last_turn_id(session: Session) -> UUID | None:
    """The session's last turn: the last it started (one undone since too), else a fork's last inherited one."""
    turns = getattr(session, "turns", None) or []
    return turns[-1] if turns else session.head[-1] if session.head else None


def _turn_status(store: ChronicleStore, turn_id: UUID | None) -> str | None:
    """How the turn ended (or stands), None for no turn, one this store does not hold (a fork's inherited turn imported
    without its session) or one with an event that does not decode (the listing goes on; `doctor` names the event)."""
    if turn_id is None:
        return None
    from ..store_errors import NotFound, UnreadableEvent

    try:
        return str(store.turn(turn_id).status)
    except (NotFound, UnreadableEvent):
        return None


def sessions(store: ChronicleStore, archived: bool = False) -> list[dict[str, Any]]:
    """Every session, oldest first (by its own creation time, so an imported session takes its place among
    those already here; index order among equal times): the rows of `sessions --json`; archived ones (and the
    sub-agents of archived ones) only with `archived` (`sessions --all`). A read-only store whose
    read models were never built still lists its sessions, from their events (cost unknown).

    Once the read models have caught up with the log, they hold every column (`session_listing.open_store_listing`, as
    `chronicle sessions` reads them on a connection of its own): a few indexed queries instead of loading every session (0.43 s at 3,000
    sessions for each page of the viewer). Whatever they cannot say for certain is read from the aggregates."""
    if not store.read_only:
        from ..read_models import caught_up_or_none
        from .session_listing import open_store_listing

        engine = caught_up_or_none(store)  # None: they cannot be written now (a full disk)
        listing = open_store_listing(engine, archived=archived) if engine is not None else None
        if listing is not None:
            return listing.rows
        if engine is None:
            return sessions_from_aggregates(store, archived, engine=None)
    return sessions_from_aggregates(store, archived)


_CATCH_UP: Any = object()


def sessions_from_aggregates(store: ChronicleStore, archived: bool = False, engine: Any = _CATCH_UP) -> list[dict[str, Any]]:
    """`sessions`' rows from every session's events (the read models give the same: tests/integration/test_session_listing.py).
    `engine=None`: the read models cannot be read (costs unknown)."""
    from chronicle.projections.session_listing import archived_trees, oldest_first

    listed = list(store.sessions())
    if not archived:
        hidden = archived_trees({s.id: s.parent_session_id for s in listed}, {s.id for s in listed if getattr(s, "archived", False)})
        listed = [s for s in listed if s.id not in hidden]
    listed = oldest_first(listed, lambda s: s.created_at)
    from ..read_models import ReadModelsMissing, caught_up_or_none

    repairs = latest_repairs(store)
    cancelled = cancelled_jobs(store)
    try:
        engine = caught_up_or_none(store) if engine is _CATCH_UP else engine
    except ReadModelsMissing:
        engine = None
    if engine is None:
        return [session_row(store, session, repair=repairs.get(session.id), job_cancelled=session.id in cancelled)
                for session in listed]
    with engine.read() as tx:
        titles = summaries(tx)
        costs = CostReport(tx)
        return [
            session_row(store, session, titles.get(str(session.id)), costs.total_usd(str(session.id)), repairs.get(session.id),
                        job_cancelled=session.id in cancelled)
            for session in listed
        ]


def cancelled_jobs(store: ChronicleStore) -> set[UUID]:
    """The sessions of the jobs `jobs cancel` cancelled, read from the job index once (not a lookup per session)."""
    from ..jobs import jobs

    return {job.session_id for job in jobs(store) if job.status == "cancelled"}


def latest_repairs(store: ChronicleStore) -> dict[UUID, str]:
    """Each session's newest self-repair status (runtime/self_repair.py), read from the repairs index."""
    from ..self_repair import SelfRepair

    found: dict[UUID, str] = {}
    for repair in SelfRepair(store).repairs():
        if repair.session_id is not None:
            found[repair.session_id] = repair.status
    return found


def log(store: ChronicleStore, ref: str | UUID, tree: bool = False) -> list[dict[str, Any]]:
    """Every stored event of the session, its turns and tool calls, its board's tasks and its tree's notes, in commit
    order (`log --json`).

    With `tree`, its sub-agents' events too, interleaved by position, each entry saying whose
    it is (session_id, agent, depth)."""
    return LogTail(store, ref, tree).read()


class LogTail:
    """The log read in steps: `read()` returns the entries committed since the previous call
    (`log --follow` polls it). The aggregates' states are kept between calls, so each step reads
    only the new events, not the session again.

    A session's tool calls are named by its turns (a call's id is derived from its turn, step
    and tool_use id), so a step reads the sessions' and turns' events first, replays them, then
    reads the events of every call those turns name, and returns both in log order: each event
    is read and decoded once. Both reads stop at the log's head as it was when the step began,
    so a call committed meanwhile is not returned before the turn event that names it.

    The members' board index logs (the tasks posted on their boards) are read in the first of those
    reads, within the same bounds, and the task ids kept: a step reads only the entries posted since
    the last one, however long the boards are and however often other sessions move the log's head
    (`log --follow` used to read every member's whole board index at each such poll)."""

    def __init__(self, store: ChronicleStore, ref: str | UUID, tree: bool = False) -> None:
        self.store, self.tree = store, tree
        self.session_id = session_id(store, ref)
        self.states: dict[UUID, Any] = {}
        self.after: int | None = None
        #: Sub-agents linked by `parent_session_id` alone (old stores), found at the first read (`--tree`).
        self.parents: dict[UUID, list[UUID]] | None = None
        #: The tasks posted on each member's board, in the order posted, as far as read (its board index log).
        self.posted: dict[UUID, list[UUID]] = {}
        #: A sub-agent's own task, on its parent's board (runtime/session_scope.py): looked up at the first read.
        self.own_task: list[UUID] | None = None

    def _members(self) -> list[tuple[Session, dict[str, Any]]]:
        """The session (with `tree`, and its sub-agents'), each with the owner its entries name."""
        session = self.store.session(self.session_id)
        nodes = [(session, 0)]
        if self.tree:
            from ..agents.tree import session_tree, sub_agents_by_parent

            if self.parents is None:  # read once: a child a delegate call names later is found from the call
                self.parents = sub_agents_by_parent(self.store)
            nodes = [(node.session, node.depth) for node in session_tree(self.store, session, self.parents)]
        # a sub-agent's entries name its instance too (seed 004: two researchers of one tree told apart)
        return [(member, {"session_id": str(member.id), "agent": member.agent_name, "depth": depth,
                          **({"instance": member.agent_instance} if member.agent_instance else {})}) for member, depth in nodes]

    def read(self) -> list[dict[str, Any]]:
        head = self.store.max_position()
        if self.after is not None and head <= self.after:
            return []
        members = self._members()
        bounds = (0 if self.after is None else self.after + 1, head)  # only what was committed since the last look
        owners: dict[UUID, dict[str, Any]] = {}
        for member, owner in members:
            owners.update(dict.fromkeys([member.id, *member.turns], owner))
        entries: list[dict[str, Any]] = []
        from_turn: list[tuple[dict[str, Any], ToolCall]] = []
        boards = {board_index_id(member.id): member.id for member, _ in members}
        self._replay(owners, bounds, entries, from_turn, boards)
        calls: dict[UUID, dict[str, Any]] = {}
        for member, owner in members:
            for turn_id in member.turns:
                turn = self.states.get(turn_id)
                if isinstance(turn, Turn):
                    calls.update(dict.fromkeys(tool_call_ids(turn_id, turn.steps), owner))
        self._replay(calls, bounds, entries, from_turn)
        # The tasks, and the tree's shared notes (its top-level session's board), in one read.
        root = members[0][0]
        notes = {notes_board_id(root.id): members[0][1]} if root.parent_session_id is None else {}
        self._replay({**self._tasks(members), **notes}, bounds, entries, from_turn)
        entries.sort(key=lambda entry: entry["position"])
        self.after = head
        # A completed call's output is stored by its turn, in the same commit: filled in once read.
        for data, call in from_turn:
            turn = self.states.get(call.turn_id)
            if isinstance(turn, Turn):
                data["output"] = turn.output_for(call.step, call.tool_use_id)
        return entries

    def _tasks(self, members: list[tuple[Session, dict[str, Any]]]) -> dict[UUID, dict[str, Any]]:
        """The members' board tasks (runtime/session_scope.py): those posted on a board, as its index
        has been read so far, and those a delegate call opened, named by the calls already replayed (a task's id is
        derived from its child's, which is derived from the call); and a sub-agent's own, as `export` takes it."""
        from chronicle.domain.ids import child_session_id, task_id

        tasks: dict[UUID, dict[str, Any]] = {}
        root, root_owner = members[0]
        if self.own_task is None:  # the same for the session's life: its delegate item named it
            from ..task_board import sub_agent_task_id

            found = sub_agent_task_id(self.store, root)
            self.own_task = [] if found is None else [found]
        tasks.update(dict.fromkeys(self.own_task, root_owner))
        for member, owner in members:
            tasks.update(dict.fromkeys(self.posted.get(member.id, ()), owner))
            for turn_id in member.turns:
                turn = self.states.get(turn_id)
                if not isinstance(turn, Turn):
                    continue
                for call_id in tool_call_ids(turn_id, turn.steps):
                    call = self.states.get(call_id)
                    if isinstance(call, ToolCall) and call.name == "delegate":
                        children = range(len(call.input.get("tasks") or []))
                        tasks.update(dict.fromkeys((task_id(child_session_id(call.id, i)) for i in children), owner))
        return tasks

    def _replay(self, owners: dict[UUID, dict[str, Any]], bounds: tuple[int, int], entries: list[dict[str, Any]],
                from_turn: list[tuple[dict[str, Any], ToolCall]], boards: dict[UUID, UUID] | None = None) -> None:
        """`boards`: board index log ids to the member whose board each lists; their entries, read in the same
        query, are kept in `posted` (an index entry is no event of the session's: none is shown)."""
        boards = boards or {}
        for position, event in self.store.events_with_positions([*owners, *boards], positions=bounds):
            if event.originator_id in boards:
                self.posted.setdefault(boards[event.originator_id], []).append(event.task_id)
                continue
            aggregate = apply_event(self.states.get(event.originator_id), event)
            self.states[event.originator_id] = aggregate
            entries.append(self._entry(position, event, aggregate, owners, from_turn))

    def _entry(self, position: int, event: Any, aggregate: Any, owners: dict[UUID, dict[str, Any]],
               from_turn: list[tuple[dict[str, Any], ToolCall]]) -> dict[str, Any]:
        data = {k: v for k, v in event.__dict__.items() if k not in SKIP_FIELDS}
        waits = False
        if isinstance(aggregate, ToolCall):
            data.setdefault("tool_use_id", aggregate.tool_use_id)
            data.setdefault("name", aggregate.name)
            # A late end (FinishedAfterAbandon) carries its own output and `raised`: the call's result is not its.
            late = isinstance(event, ToolCall.FinishedAfterAbandon)
            if aggregate.resolved and aggregate.status != "interrupted" and not late:
                if aggregate.status == "completed" and aggregate.output is None:
                    data["output"], data["is_error"] = "", aggregate.is_error  # until its turn's result is read
                    waits = True
                else:
                    output, is_error = aggregate.result()
                    data["output"] = output if data.get("output") is None else data["output"]
                    data.setdefault("is_error", is_error)
        elif isinstance(event, Turn.ToolResultsRecorded) and isinstance(aggregate, Turn):
            data["blocks"] = aggregate.steps[event.step]["results"]  # references to kept results resolved
        entry = {
            "position": position,
            "timestamp": event.timestamp.isoformat(),
            "aggregate": AGGREGATE_KINDS.get(type(aggregate), type(aggregate).__name__.lower()),
            "aggregate_id": str(event.originator_id),
            "version": event.originator_version,
            "event": type(event).__name__,
            "status": getattr(aggregate, "status", None),
            "data": jsonable(data),
            **(owners[event.originator_id] if self.tree else {}),
        }
        if waits:
            from_turn.append((entry["data"], aggregate))
        return entry


def history_messages(
    store: ChronicleStore, ref: str | UUID, at: int | None = None, version: int | None = None, step: int | None = None,
) -> list[Any]:
    """The messages the model reads next (the active branch), or as they were at a turn, an event,
    or a model call inside a turn (`step`, with `at`).

    Returns domain Messages; `history` gives their wire form."""
    sid = session_id(store, ref)
    if at is None and version is None and step is None:
        # What the model reads next is built from events, as the loop builds it.
        from chronicle.domain.context import build_context  # the content models: `log` needs none

        summary, view = store.session(sid).context_view()
        return build_context(store.turns(view), summary=summary)
    # Time travel imports the tools and asyncio (timetravel restores files); the present does not.
    from ..past_context import context_at

    cut = _cut(store, sid, at, version, step)
    # The past is read from the history projection by log position once it is current;
    # `context_at` rebuilds it from events if it is not, or if it cannot catch up (None).
    return context_at(store, cut, _history_caught_up(store))


def history(
    store: ChronicleStore, ref: str | UUID, at: int | None = None, version: int | None = None, step: int | None = None,
) -> list[dict[str, Any]]:
    """`history --json`: one {"role", "content"} object per message, in Anthropic's wire format.

    The past is shown from the history projection's wire rows without building a `Message`
    (runtime/past_wire.py, past_context.wire_at); what the model reads next, from events."""
    if at is None and version is None and step is None:
        # What the model reads next, from events as the loop builds it, in wire form without the
        # content models where the recorded blocks already are (domain/context_wire.py).
        from chronicle.domain.context_wire import wire_context

        summary, view = store.session(session_id(store, ref)).context_view()
        return wire_context(store.turns(view), summary=summary)
    sid = session_id(store, ref)
    _moment(at, version, step)
    from ..past_context import wire_at
    from ..past_wire import wire_at_step, wire_at_turn

    engine = _history_caught_up(store)
    if at is not None and engine is not None:
        shown = wire_at_turn(store, sid, at, engine) if step is None else wire_at_step(store, sid, at, step, engine)
        if shown is not None:
            return shown
    return wire_at(store, _cut(store, sid, at, version, step), engine)


def _history_caught_up(store: ChronicleStore) -> Any:
    """The history projection caught up, or None when it cannot be written now (the disk holding the store is
    full, or the database refuses writes): the past is then rebuilt from events (`context_at`, `wire_at`)."""
    from ..past_context import history_engine
    from ..store_errors import is_disk_full, is_read_only_error

    try:
        engine = history_engine(store)
        engine.catch_up()
    except Exception as exc:
        if not (is_disk_full(exc) or is_read_only_error(exc)):
            raise
        return None
    return engine


def origin_words(origin: dict[str, Any] | None) -> str:
    """How `log`, `history` and `audit` say where an input came from: "from alice via signal"."""
    if not origin:
        return ""
    return f"from {', '.join(origin.get('senders') or ['?'])} via {origin.get('channel') or '?'}"


def input_origin_labels(store: ChronicleStore, ref: str | UUID) -> dict[int, str]:
    """For `history`: the index of each message (as `history` shows the present) that a channel's
    input begins, with where it came from ("from alice via signal"). The wire stays what the model
    reads; who sent an input is the session's record (InputQueued's `origin`), not part of it."""
    from chronicle.domain.context_wire import turn_wire

    session = store.session(session_id(store, ref))
    if not session.input_origins:
        return {}
    summary, view = session.context_view()
    labels: dict[int, str] = {}
    count, last_role = (1, "user") if summary else (0, None)
    for turn in store.turns(view):
        for index, message in enumerate(turn_wire(turn)):
            if message["role"] != last_role:
                count, last_role = count + 1, message["role"]
            origin = session.input_origins.get(turn.input_id)
            if index == 0 and origin:
                labels[count - 1] = origin_words(origin)
    return labels


def _moment(at: int | None, version: int | None, step: int | None) -> None:
    """One moment, named one way: a turn's end, a session event, or one step of a turn."""
    if at is not None and version is not None:
        raise AppError("--at and --version pick a moment each; give one of them", 2)
    if step is not None and at is None:
        raise AppError("--step names a model call inside a turn: give the turn with --at TURN", 2)


def _cut(store: ChronicleStore, sid: UUID, at: int | None, version: int | None, step: int | None) -> Any:
    from ..timetravel import TimeTravelError, cut_at_step, cut_at_turn, cut_at_version

    _moment(at, version, step)
    try:
        if at is not None:
            return cut_at_turn(store, sid, at) if step is None else cut_at_step(store, sid, at, step)
        return cut_at_version(store, sid, version or 0)
    except TimeTravelError as exc:
        raise AppError(str(exc), exc.exit_code) from None


def cost(store: ChronicleStore, ref: str | UUID | None = None, by: str | None = None) -> list[dict[str, Any]]:
    """`cost --json`: for a session its "self", "total" and "child" objects; else one "total" per session.

    The one path to a cost figure: the cost projection (chat's /cost and the budget guard read it too)."""
    if by not in (None, "model", "day"):
        raise AppError(f"--by takes model or day, not {by!r}", 2)
    from ..read_models import caught_up

    sid = str(session_id(store, ref)) if ref else None
    engine = caught_up(store)
    with engine.read() as tx:
        report = CostReport(tx, by=by)
        return report.for_session(sid) if sid else report.all_sessions()


def session_total(store: ChronicleStore, ref: str | UUID) -> dict[str, Any]:
    """The session's "total" cost object (itself and every sub-agent below it)."""
    objects = cost(store, ref)
    return next((o for o in objects if o["scope"] == "total"), objects[0] if objects else {})


def parse_since(text: str, now: datetime | None = None) -> str:
    """An ISO date/time (UTC if no offset) or a relative age like 30m, 2h, 7d → stored time format."""
    match = RELATIVE.match(text.strip())
    if match:
        now = now or datetime.now(timezone.utc)
        try:
            return iso(now - timedelta(**{UNITS[match.group(2)]: int(match.group(1))}))
        except OverflowError:
            raise AppError(f"--since {text!r} reaches before year 1; give a smaller age or an ISO time", 2) from None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AppError(
            f"--since takes an ISO time like 2026-01-05 or 2026-01-05T09:00:00Z, or an age like 30m, 2h, 7d (got {text!r})", 2
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return iso(value)


def audit_entry(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "position": row["position"], "time": row["at"], "session_id": row["session_id"], "turn": row["turn"],
        "turn_id": row["turn_id"], "tool_call_id": row["tool_call_id"], "kind": row["kind"], "name": row["name"],
        "status": row["status"], "is_error": bool(row["is_error"]),
        "detail": json.loads(row["detail"] or "{}"), "links": json.loads(row["links"] or "{}"),
    }


def audit_window(limit: int | None, last: int | None) -> None:
    """`--limit` keeps the first entries, `--last` the newest: one or the other (a usage error, before any read)."""
    if limit is not None and last is not None:
        raise AppError("give --limit (the first entries) or --last (the newest), not both", 2)


def audit(store: ChronicleStore, session: str | UUID | None = None, tool: str | None = None, errors: bool = False,
          since: str | None = None, limit: int | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """`audit --json`: every decision in commit order, filtered. `since` as `--since` takes it; `limit` keeps the
    first entries, `last` the newest (in commit order too)."""
    audit_window(limit, last)
    since_text = parse_since(since) if since else None
    from chronicle.projections import audit_queries  # `log` and `sessions` need none of the audit's reads

    from ..read_models import caught_up

    sid = str(session_id(store, session)) if session else None
    engine = caught_up(store)
    with engine.read() as tx:
        rows = audit_queries.query(tx, session=sid, tool=tool, errors=errors, since=since_text, limit=limit, last=last)
    return [audit_entry(r) for r in rows]
