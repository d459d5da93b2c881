"""Read commands over the event store: sessions, log, history."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional
from uuid import UUID

import typer
from pydantic_core import to_jsonable_python
from rich.markup import escape

from chronicle.domain.context import build_context
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.projections.cost import CostReport
from chronicle.projections.summaries import summaries
from chronicle.runtime.agents.tree import TreeNode, walk
from chronicle.runtime.read_models import caught_up
from chronicle.runtime.store import ChronicleStore

from .common import DbOption, JsonOption, cli_errors, fail, open_store, out_console, print_json
from .render import short
from .tables import Column, fit_table

AGGREGATE_KINDS = {Session: "session", Turn: "turn", ToolCall: "tool_call"}
SKIP_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}


def session_row(store: ChronicleStore, session: Session, summary: dict[str, Any] | None = None,
                cost: float | None = None) -> dict[str, Any]:
    """`summary` and `cost` come from the projections (title, USD with sub-agents rolled up)."""
    status = session.status
    if session.active_turn_id is not None:
        status = store.turn(session.active_turn_id).status
    return {
        "session_id": str(session.id),
        "title": session.title or (summary or {}).get("title"),
        "status": status,
        "agent": session.spec.name,
        "created_at": session.created_at.isoformat(),
        "parent_session_id": str(session.parent_session_id) if session.parent_session_id else None,
        "forked_from": session.forked_from,
        "turns": len(session.head),
        "queued": len(session.queue),
        "cost": cost,
    }


def sessions(as_json: JsonOption = False, db: DbOption = None) -> None:
    """List sessions, oldest first."""
    with cli_errors():
        store = open_store(db)
        engine = caught_up(store)
        with engine.read() as tx:
            titles = summaries(tx)
            costs = CostReport(tx)
        rows = [
            session_row(store, session, titles.get(str(session.id)), costs.total_usd(str(session.id)))
            for session in store.sessions()
        ]
        if as_json:
            for row in rows:
                print_json(row)
            return
        if not rows:
            out_console.print("no sessions yet; start one with `chronicle run PROMPT` or try `chronicle demo`")
            return
        columns = [
            Column("session"), Column("agent"), Column("status"), Column("turns", justify="right"),
            Column("USD", optional=True, justify="right"), Column("created", optional=True), Column("title", flex=True),
        ]
        shown = [
            {
                "session": row["session_id"], "agent": f"{'  ' * (depth - 1)}↳ {row['agent']}" if depth else row["agent"],
                "status": row["status"], "turns": row["turns"], "USD": "" if row["cost"] is None else f"{row['cost']:.4f}",
                "created": row["created_at"][:19].replace("T", " "), "title": escape(row["title"] or ""),
            }
            for row, depth in tree_order(rows)
        ]
        out_console.print(fit_table(columns, shown, out_console.width))


def tree_order(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Sub-agent sessions right under their parent, oldest first at every level."""
    ids = {row["session_id"] for row in rows}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row["parent_session_id"] if row["parent_session_id"] in ids else None
        children.setdefault(parent, []).append(row)
    ordered: list[tuple[dict[str, Any], int]] = []

    def visit(parent: str | None, depth: int) -> None:
        for row in children.get(parent, []):
            ordered.append((row, depth))
            visit(row["session_id"], depth + 1)

    visit(None, 0)
    return ordered


def log_entries(store: ChronicleStore, session: Session, tree: bool = False) -> list[dict[str, Any]]:
    """Every stored event of the session, its turns and tool calls, in commit order.

    With `tree`, its sub-agents' events too, interleaved by position, each entry saying whose
    it is (session_id, agent, depth)."""
    owners: dict[UUID, dict[str, Any]] = {}
    for node in (walk(store, session) if tree else [TreeNode(session, 0)]):
        owner = {"session_id": str(node.session.id), "agent": node.session.spec.name, "depth": node.depth}
        owners.update({aid: owner for aid in store.aggregate_ids_of(node.session)})
    states: dict[UUID, Any] = {}
    entries = []
    for position, event in store.events_with_positions(owners):
        aggregate = event.mutate(states.get(event.originator_id))
        states[event.originator_id] = aggregate
        data = {k: v for k, v in event.__dict__.items() if k not in SKIP_FIELDS}
        if isinstance(aggregate, ToolCall):
            data.setdefault("tool_use_id", aggregate.tool_use_id)
            data.setdefault("name", aggregate.name)
            if aggregate.resolved and aggregate.status != "interrupted":
                block = aggregate.result_block()
                data.setdefault("output", block.content)
                data.setdefault("is_error", block.is_error)
        entries.append(
            {
                "position": position,
                "timestamp": event.timestamp.isoformat(),
                "aggregate": AGGREGATE_KINDS.get(type(aggregate), type(aggregate).__name__.lower()),
                "aggregate_id": str(event.originator_id),
                "version": event.originator_version,
                "event": type(event).__name__,
                "status": getattr(aggregate, "status", None),
                "data": to_jsonable_python(data),
                **(owners[event.originator_id] if tree else {}),
            }
        )
    return entries


def log(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    as_json: JsonOption = False,
    tree: Annotated[bool, typer.Option("--tree", help="Interleave the events of its sub-agent sessions, by position")] = False,
    db: DbOption = None,
) -> None:
    """Show every stored event of a session, its turns and tool calls, in commit order."""
    with cli_errors():
        store = open_store(db)
        record = store.session(store.resolve_session_id(session))
        entries = log_entries(store, record, tree=tree)
        if as_json:
            for entry in entries:
                print_json(entry)
            return
        columns = [
            Column("pos", justify="right"), Column("time", optional=True), *([Column("agent")] if tree else []),
            Column("aggregate"), Column("event"), Column("status", optional=True), Column("detail", flex=True),
        ]
        rows = [
            {
                "pos": e["position"], "time": e["timestamp"][11:23], "agent": f"{'  ' * e['depth']}{e['agent']}" if tree else "",
                "aggregate": f"{e['aggregate']} {e['aggregate_id'][:8]}", "event": e["event"], "status": e["status"] or "",
                "detail": escape(describe(e)),
            }
            for e in entries
        ]
        table = fit_table(columns, rows, out_console.width)
        out_console.print(table)


def describe(entry: dict[str, Any]) -> str:
    data = entry["data"]
    event = entry["event"]
    if entry["aggregate"] == "tool_call":
        if event == "Requested":
            return f"{data['name']} {short(data.get('input'), 60)}"
        return short(data.get("output") or data.get("reason") or "", 70)
    if event == "ModelResponded":
        response = data["response"]
        kinds = ",".join(b["type"] for b in response.get("content", []))
        return f"step {data['step']}: {response.get('stop_reason')} [{kinds}]"
    if event == "ModelCallRetried":
        return short(f"attempt {data['attempt']} failed, retry in {data['delay_s']:.2f}s: {data['reason']}", 70)
    if event in ("Created", "InputQueued", "InputWithAttachmentsQueued"):
        return short(data.get("input_text") or data.get("text") or "", 70)
    return short(data.get("reason") or data.get("final_text") or "", 70)


def history(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    at: Annotated[Optional[int], typer.Option("--at", min=1, help="As it was when turn TURN (from 1) had completed")] = None,
    version: Annotated[Optional[int], typer.Option("--version", min=1, help="As of the session's N-th event")] = None,
    as_json: JsonOption = False,
    fmt: Annotated[str, typer.Option("--format", help="text (default), md (Markdown) or html: a transcript to read or hand on")] = "text",
    db: DbOption = None,
) -> None:
    """Show the messages the model will see next (the active branch), in Anthropic format; or as they were."""
    from chronicle.runtime.past_context import context_at, history_engine
    from chronicle.runtime.timetravel import TimeTravelError, cut_at_turn, cut_at_version

    with cli_errors():
        store = open_store(db)
        sid = store.resolve_session_id(session)
        if at is not None and version is not None:
            fail("--at and --version pick a moment each; give one of them", 2)
        if at is None and version is None:
            # What the model reads next is built from events, as the loop builds it.
            summary, view = store.session(sid).context_view()
            messages = build_context([store.turn(t) for t in view], summary=summary)
        else:
            try:
                cut = cut_at_turn(store, sid, at) if at is not None else cut_at_version(store, sid, version or 0)
            except TimeTravelError as exc:
                fail(str(exc), exc.exit_code)
            # The past is read from the history projection by log position once it is current;
            # `context_at` rebuilds it from events if it is not.
            engine = history_engine(store)
            engine.catch_up()
            messages = context_at(store, cut, engine)
        if as_json:
            for message in messages:
                print_json(message.wire())
            return
        if fmt != "text":
            from . import transcript

            render = {"md": transcript.markdown, "markdown": transcript.markdown, "html": transcript.html}.get(fmt)
            if render is None:
                fail(f"--format takes text, md or html (got {fmt!r})", 2)
            sys.stdout.write(render(str(sid), store.session(sid).title, messages))
            return
        for message in messages:
            colour = "green" if message.role == "user" else "cyan"
            out_console.rule(f"[{colour}]{message.role}[/]", align="left")
            for block in message.content:
                out_console.print(render_block(block), highlight=False)


def render_block(block: Any) -> str:
    from rich.markup import escape

    from .render import printable

    if block.type == "text":
        return escape(printable(block.text))
    if block.type == "thinking":
        return f"[dim italic]{escape(printable(block.thinking))}[/]"
    if block.type == "tool_use":
        return f"[cyan]⚙ {block.name}[/] {escape(short(block.input, 200))} [dim]({block.id})[/]"
    if block.type == "tool_result":
        mark = "[red]✗[/]" if block.is_error else "[green]✓[/]"
        return f"{mark} [dim]({block.tool_use_id})[/] {escape(short(block.content, 200))}"
    return f"[dim]{block.type}[/]"
