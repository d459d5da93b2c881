"""One page of a session for the viewer: a window of its turns, never the whole history.

A session may have thousands of turns; rendering its page must not read them all. So a page
reads the session aggregate (the branch's turn ids), the 20 turns it shows with their tool
calls, the log events of those turns (bounded by their log positions in SQL), and small
indexed queries on the audit and cost read models (who decided each approval, the newest
decisions, the cost of each call). Moving the time slider asks for another window.

Turns are numbered and paged as the CLI counts them (`history --at N`, `fork --at N`, `audit`, `why`:
runtime/timetravel.numbered_turns), so `?turn=3` is the turn `history --at 3` ends with. That count
keeps the turns an undo took back, and so does the page: they are shown where the log has them,
marked undone with the undo that took them back, and offer no Fork (the conversation they end is
not the branch's any more; fork the turn before them, or redo them first).

What a turn shows is what it recorded, step by step: the input, each retried attempt (its error
and the wait before the next one), each response with its tool calls, who decided an approval,
the results with file diffs, and how the turn ended if it did not complete.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.projections import audit_queries
from chronicle.projections.cost import CostReport, call_costs
from chronicle.projections.summaries import summaries
from chronicle.runtime.app import queries
from chronicle.runtime.notes import note_rows
from chronicle.runtime.read_models import ReadModelsMissing, caught_up_or_none
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.timetravel import TimeTravelError, numbered_turns

#: Turns on one page; the slider and the turn list move the window.
TURNS_SHOWN = 20
#: Turn numbers linked on either side of the page's window in the turn list.
NAV_SPAN = 5
#: Log events listed for the turns shown (the newest of them if more).
TIMELINE_LIMIT = 400
DECISION_KINDS = ("approval", "always_allow", "undo", "redo", "fork", "cancel", "resume", "steer")
UNFINISHED_TURN = ("failed", "cancelled", "stopped", "interrupted")
AGGREGATE_NAMES = {"Session": "session", "Turn": "turn", "ToolCall": "tool_call", "DelegatedTask": "task"}


#: What the page says when it is read from the events because the read models cannot catch up (caught_up_or_none).
READ_MODELS_NOTE = ("cost figures and approval decisions are not shown: the read models cannot catch up "
                    "(the disk holding the store is full, or the store refuses writes); free some space and reload")


def _read_models(store: ChronicleStore) -> Any:
    """The caught-up read models, or None when they cannot be written now (a full disk) or were never built for a
    read-only store: the page is then read from the events alone, as `GET /sessions` is (queries.sessions)."""
    try:
        return caught_up_or_none(store)
    except ReadModelsMissing:
        return None


def _children_from_events(store: ChronicleStore, session: Session) -> list[dict[str, Any]]:
    """The sub-agent tree below the session, read from its sessions' events (cost unknown)."""
    from chronicle.runtime.agents.tree import session_tree

    return [{**queries.session_row(store, node.session, None, None), "depth": node.depth}
            for node in session_tree(store, session) if node.depth > 0]


class NoSuchTurn(LookupError):
    """A `?turn=` the session does not have; its words say which turns it has, in one line."""


@dataclass
class TurnView:
    #: The turn's number as `history --at`, `fork --at`, `log`, `audit` and `why` count it (undone turns included):
    #: what the page heads it with, pages by and links to.
    number: int
    turn_id: str
    status: str
    started_at: str
    inherited: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: Taken off the branch by an undo (still in the log): {"event", "position", "actor", "at", "files"}, else None.
    undone: dict[str, Any] | None = None
    #: Whether Fork is offered: a turn on the branch that has ended (`fork --at` refuses a turn still running).
    forkable: bool = False


def turn_at_place(store: ChronicleStore, sid: UUID, place: int) -> int | None:
    """The number (as `history --at` counts) of the turn at `place` on the active branch, clamped to the branch
    as the page's old `?at=PLACE` was; None when the branch is empty."""
    session = store.session(sid, copy=False)
    head = list(session.head)
    if not head:
        return None
    number_of = {t: n for n, t in enumerate(numbered_turns(store, session), 1)}
    return number_of[head[max(1, min(place, len(head))) - 1]]


def build(store: ChronicleStore, sid: UUID, turn: int | None, every_turn: bool = False) -> dict[str, Any]:
    """The template's context for the session page as of turn `turn` (as `history --at` counts; None: now)."""
    session = store.session(sid, copy=False)
    numbered = numbered_turns(store, session)
    total = len(numbered)
    if turn is not None and not 1 <= turn <= total:
        which = f"its turns are 1 to {total}" if total else "it has no turn yet"
        raise NoSuchTurn(f"session {sid} has no turn {turn}: {which}, numbered as `chronicle history --at N` counts them")
    end = total if turn is None else turn
    start = 1 if every_turn else max(1, end - TURNS_SHOWN + 1)
    turns = store.turns(numbered[start - 1:end]) if end else []
    calls = {turn.id: store.tool_calls_of(turn) for turn in turns}
    owners = sorted({str(t.session_id) for t in turns} | {str(sid)})
    engine = _read_models(store)
    if engine is None:  # they cannot be written now (a full disk): the page is read from the events, without them
        trail, decisions, by_model, costs = [], [], [], []
        row = queries.session_row(store, session, None, None)
        children = _children_from_events(store, session)
    else:
        with engine.read() as tx:
            trail = audit_queries.for_sessions_turns(tx, owners, [str(t.id) for t in turns])
            decisions = [queries.audit_entry(r) for r in audit_queries.newest(tx, str(sid), DECISION_KINDS, 50)]
            report = CostReport(tx)
            by_model = [r for r in CostReport(tx, by="model").for_session(str(sid)) if r.get("scope") == "total"]
            costs = call_costs(tx, str(sid))
            titles = summaries(tx, [str(sid)])
            row = queries.session_row(store, session, titles.get(str(sid)), report.total_usd(str(sid)))
            children = _children(store, report, str(sid))
    decided = _decisions_by_call(trail)
    on_branch = set(session.head)
    undone = _undone_by(store, sid, [t.id for t in turns if t.id not in on_branch])
    views = [
        _turn_view(start + i, turn, calls[turn.id], decided, inherited=turn.session_id != session.id,
                   origin=session.input_origins.get(turn.input_id) if turn.session_id == session.id else None)
        for i, turn in enumerate(turns)
    ]
    for view, shown in zip(views, turns, strict=True):
        if shown.id not in on_branch:
            view.undone = undone.get(shown.id, {"event": None})
        view.forkable = shown.id in on_branch and shown.id != session.active_turn_id
    forkable = [v.number for v in views if v.forkable]
    return {
        "row": row, "turn": turn if turn is None else end, "total_turns": total, "first_shown": start, "last_shown": end,
        "undone_count": total - len(on_branch & set(numbered)),
        # Undo and Redo offered only when they can act: the branch has a turn, an undo is there to take back.
        "can_undo": bool(session.head) and session.active_turn_id is None, "can_redo": bool(session.redo_stack),
        # The actions card's Fork: the last turn shown that Fork is offered on, numbered as `fork --at` takes it
        "fork_at": forkable[-1] if forkable else None,
        "turns": views, "turn_nav": _turn_nav(start, end, total), "page_size": TURNS_SHOWN,
        "earlier": start - 1 if start > 1 else None,
        "later": min(total, end + TURNS_SHOWN) if end < total else None,
        "pending": _pending(store, session), "decisions": decisions, "cost_svg": _cost_svg(costs),
        "notes": _notes(store, sid, turn), "notes_at": turn,
        "by_model": by_model, "children": children, "log_rows": _timeline(store, session, turns, calls),
        "head": store.max_position(),
        # Said on the page when the read models could not be read: what it lacks, and why.
        "read_models_note": READ_MODELS_NOTE if engine is None else None,
        # Followed over the event stream while a turn runs, and on a page of the present (no ?turn=) while idle too:
        # a turn started elsewhere (the CLI, a worker, a channel) then shows up on it rather than never.
        "live": turn is None or row["status"] in ("busy", "queued", "running", "awaiting_approval") or bool(row.get("queued")),
    }


def _notes(store: ChronicleStore, sid: UUID, turn: int | None) -> list[dict[str, Any]]:
    """The shared notes as the page's moment saw them: as they stood when turn `turn` ended (`notes --at`), or now. A
    turn not ended yet (or whose past this store cannot read) shows them as they are now."""
    if turn is not None:
        try:
            return note_rows(store, sid, turn)
        except TimeTravelError:
            pass
    return note_rows(store, sid)


def _undone_by(store: ChronicleStore, sid: UUID, turn_ids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """turn id → the undo that took it off the branch (the last that named it: one redone and undone again was
    taken back by the second), read from the session's TurnsUndone events only, and only when a turn shown is off."""
    if not turn_ids:
        return {}
    wanted = set(turn_ids)
    found: dict[UUID, dict[str, Any]] = {}
    for position, event in store.events_with_positions([sid], topic_suffix=".TurnsUndone"):
        for undone in event.turn_ids:
            key = undone if isinstance(undone, UUID) else UUID(str(undone))
            if key in wanted:
                found[key] = {"event": "TurnsUndone", "position": position, "actor": event.actor,
                              "at": event.timestamp.isoformat(timespec="seconds"), "files": bool(event.files)}
    return found


def _turn_nav(start: int, end: int, total: int) -> list[int | None]:
    """Turn numbers to link: the first, those around the window, the last; None marks a gap."""
    wanted = sorted({1, total, *range(max(1, start - NAV_SPAN), min(total, end + NAV_SPAN) + 1)} - {0})
    shown: list[int | None] = []
    for number in wanted:
        if shown and shown[-1] is not None and number - shown[-1] > 1:
            shown.append(None)
        shown.append(number)
    return shown


def _decisions_by_call(trail: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """tool call id → its approval decision: approved or denied, by which mechanism, by whom."""
    found: dict[str, dict[str, Any]] = {}
    for row in trail:
        if row["kind"] == "approval" and row["tool_call_id"]:
            detail = json.loads(row["detail"] or "{}")
            found[row["tool_call_id"]] = {"status": row["status"], "by": detail.get("by"), "actor": detail.get("actor"),
                                          "always": detail.get("always"), "reason": detail.get("reason"), "position": row["position"]}
    return found


def _turn_view(number: int, turn: Turn, calls: list[ToolCall], decided: dict[str, dict[str, Any]], inherited: bool,
               origin: dict[str, Any] | None = None) -> TurnView:
    view = TurnView(number, str(turn.id), turn.status, turn.started_at.isoformat(timespec="seconds"), inherited)
    attached = [f"[{a.get('type', 'attachment')}: {a.get('name') or a.get('media_type') or ''}]"
                for a in getattr(turn, "attachments", None) or []]
    view.rows.append({"kind": "message", "role": "user", "from": queries.origin_words(origin),  # a channel's: who sent it
                      "blocks": [{"type": "text", "text": "\n".join([*attached, turn.input_text])}]})
    by_use = {(c.step, c.tool_use_id): c for c in calls}
    retries: dict[int, list[dict[str, Any]]] = {}
    for retry in turn.retries:
        retries.setdefault(int(retry.get("step", 0)), []).append(retry)
    for step in turn.steps:
        view.rows.extend(_retry_row(r) for r in retries.pop(int(step["step"]), []))
        response = step["response"]
        blocks = [_block(b, by_use.get((step["step"], b.get("id"))), decided) for b in response.get("content") or []]
        stop = response.get("stop_reason")
        if stop in ("error", "aborted", "max_tokens", "refusal"):
            error = response.get("error") or {}
            blocks.append({"type": "note", "text": f"stopped: {stop}" + (f" — {error.get('message')}" if error.get("message") else "")})
        view.rows.append({"kind": "message", "role": "assistant", "blocks": blocks})
        if step.get("results"):
            view.rows.append({"kind": "message", "role": "user", "blocks": [_block(b, None, decided) for b in step["results"]]})
    for left in sorted(retries):
        view.rows.extend(_retry_row(r) for r in retries[left])
    if turn.status in UNFINISHED_TURN:
        error = turn.error or {}
        view.rows.append({"kind": "end", "status": turn.status, "reason": turn.reason or "",
                          "error": json.dumps(error, ensure_ascii=False) if error else ""})
    return view


def _retry_row(retry: dict[str, Any]) -> dict[str, Any]:
    error = retry.get("error") or {}
    return {"kind": "retry", "attempt": retry.get("attempt"), "delay_s": retry.get("delay_s"),
            "error_kind": error.get("kind") or "", "status_code": error.get("status"),
            "message": error.get("message") or retry.get("reason") or ""}


def _block(block: dict[str, Any], call: ToolCall | None, decided: dict[str, dict[str, Any]]) -> dict[str, Any]:
    shown = dict(block)
    kind = block.get("type")
    if kind == "tool_use":
        shown["input_json"] = json.dumps(block.get("input") or {}, indent=2, ensure_ascii=False)
        if call is not None:
            shown["diff"] = _diff(call)
            shown["call_status"] = call.status
            shown["decision"] = decided.get(str(call.id))
    elif kind == "tool_result":
        inner = block.get("content")
        shown["text"] = inner if isinstance(inner, str) else "\n".join(
            b.get("text", f"[{b.get('type')}]") for b in inner or [] if isinstance(b, dict))
    elif kind not in ("text", "thinking", "redacted_thinking"):
        shown["raw"] = json.dumps(block, indent=2, ensure_ascii=False)[:4000]
    return shown


def _diff(call: ToolCall) -> str | None:
    """A unified diff of the files the call wrote, from its recorded before/after."""
    parts = []
    for effect in call.effects or []:
        if effect.get("kind") != "file":
            continue
        before, after = effect.get("before") or "", effect.get("after") or ""
        if not isinstance(before, str) or not isinstance(after, str):
            continue
        path = effect.get("path", "?")
        parts.append("".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"))
                     or f"(no change to {path})")
    return "\n".join(parts) or None


def _pending(store: ChronicleStore, session: Any) -> list[dict[str, Any]]:
    """The running turn's calls waiting for a decision."""
    if session.active_turn_id is None:
        return []
    turn = store.turn(session.active_turn_id)
    waiting = []
    for call_id in turn.awaiting:
        call = store.find_tool_call(call_id)
        if call is not None and call.status == "awaiting_approval":
            waiting.append({"tool_call_id": str(call.id), "name": call.name,
                            "input_json": json.dumps(call.input or {}, indent=2, ensure_ascii=False)})
    return waiting


def _children(store: ChronicleStore, report: CostReport, sid: str) -> list[dict[str, Any]]:
    """The sub-agent tree below the session, from the cost read model's parent links."""
    found: list[dict[str, Any]] = []

    def visit(parent: str, depth: int) -> None:
        for child in report.children.get(parent, []):
            session = store.session(UUID(child), copy=False)
            found.append({**queries.session_row(store, session, None, report.total_usd(child)), "depth": depth})
            visit(child, depth + 1)

    visit(sid, 1)
    return found


def _timeline(store: ChronicleStore, session: Session, turns: list[Turn], calls: dict[UUID, list[ToolCall]]) -> list[dict[str, Any]]:
    """The log events of the turns shown, and the session's own events and its tasks' between them, by
    position (as `log SESSION` has them): its board's, those its delegate calls opened, and for a
    sub-agent the task it works on, which sits on its parent's board."""
    from chronicle.domain.ids import child_session_id, task_id

    from ..task_board import board_task_ids, sub_agent_task_id

    sid = session.id
    ids = [i for turn in turns for i in (turn.id, *(c.id for c in calls[turn.id]))]
    tasks = [*board_task_ids(store, sid), *(task_id(child_session_id(c.id, i)) for cs in calls.values() for c in cs
                                           if c.name == "delegate" for i in range(len(c.input.get("tasks") or [])))]
    events = list(store.events_with_positions(ids))
    if events:
        bounds = (events[0][0], events[-1][0])
        events += list(store.events_with_positions([sid, *tasks], positions=bounds))
        own = sub_agent_task_id(store, session)
        if own is not None:  # opened (or claimed) before the child's first event, settled after its last: all of it
            events += list(store.events_with_positions([own]))
        events.sort(key=lambda pair: pair[0])
    names = {c.id: c.name for cs in calls.values() for c in cs}
    rows = []
    for position, event in events[-TIMELINE_LIMIT:]:
        owner, _, name = type(event).__qualname__.rpartition(".")
        rows.append({"position": position, "aggregate": AGGREGATE_NAMES.get(owner, owner.lower()), "event": name,
                     "detail": names.get(event.originator_id, "")})
    return rows


def _cost_svg(costs: list[float | None], width: int = 300, height: int = 90, points_max: int = 200) -> str:
    """Cumulative USD over the session's model calls, as a small inline SVG (numbers only: safe)."""
    points: list[float] = []
    total = 0.0
    for usd in costs:
        total += usd or 0.0
        points.append(total)
    if len(points) < 2 or total <= 0:
        return '<p class="muted">no priced model calls yet</p>'
    stride = max(1, len(points) // points_max)
    sampled = points[::stride] + ([points[-1]] if (len(points) - 1) % stride else [])
    step = width / (len(sampled) - 1)
    path = " ".join(f"{i * step:.1f},{height - 12 - (v / total) * (height - 24):.1f}" for i, v in enumerate(sampled))
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="cost over time">'
            f'<polyline fill="none" stroke="#1d1d1f" stroke-width="1.5" points="{path}"/>'
            f'<text x="0" y="{height - 1}">{len(points)} calls</text><text x="{width - 70}" y="10">${total:.4f}</text></svg>')
