"""Read commands over the event store: sessions, log, history."""

from __future__ import annotations

from typing import Annotated, Any, Optional
from uuid import UUID

import typer
from pydantic_core import to_jsonable_python
from rich.table import Table

from chronicle.domain.context import build_context
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.runtime.agents.tree import TreeNode, walk
from chronicle.runtime.session_cost import session_usd
from chronicle.runtime.store import ChronicleStore

from .common import DbOption, JsonOption, cli_errors, open_store, out_console, print_json
from .render import short

AGGREGATE_KINDS = {Session: "session", Turn: "turn", ToolCall: "tool_call"}
SKIP_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}


def session_row(store: ChronicleStore, session: Session) -> dict[str, Any]:
    status = session.status
    if session.active_turn_id is not None:
        status = store.turn(session.active_turn_id).status
    return {
        "session_id": str(session.id),
        "title": session.title,
        "status": status,
        "agent": session.spec.name,
        "created_at": session.created_at.isoformat(),
        "parent_session_id": str(session.parent_session_id) if session.parent_session_id else None,
        "forked_from": session.forked_from,
        "turns": len(session.head),
        "queued": len(session.queue),
        "cost": session_usd(store, session),
    }


def sessions(as_json: JsonOption = False, db: DbOption = None) -> None:
    """List sessions, oldest first."""
    with cli_errors():
        store = open_store(db)
        rows = [session_row(store, store.session(sid)) for sid in store.session_ids()]
        if as_json:
            for row in rows:
                print_json(row)
            return
        if not rows:
            out_console.print("no sessions yet; start one with `chronicle run PROMPT` or try `chronicle demo`")
            return
        table = Table("session", "agent", "title", "status", "turns", "created")
        for row, depth in tree_order(rows):
            agent = f"{'  ' * (depth - 1)}↳ {row['agent']}" if depth else row["agent"]
            table.add_row(row["session_id"], agent, row["title"] or "", row["status"], str(row["turns"]), row["created_at"][:19])
        out_console.print(table)


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
        table = Table(box=None, pad_edge=False, header_style="bold")
        columns = (("pos", 5), ("time", 12), *((("agent", 12),) if tree else ()), ("aggregate", 18), ("event", 19), ("status", 17))
        for name, width in columns:
            table.add_column(name, min_width=width, no_wrap=True)
        table.add_column("detail", no_wrap=True, overflow="ellipsis", max_width=max(16, out_console.width - 84 - (14 if tree else 0)))
        for e in entries:
            who = (f"{'  ' * e['depth']}{e['agent']}",) if tree else ()
            table.add_row(
                str(e["position"]), e["timestamp"][11:23], *who, f"{e['aggregate']} {e['aggregate_id'][:8]}",
                e["event"], e["status"] or "", describe(e),
            )
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
    if event in ("Created", "InputQueued"):
        return short(data.get("input_text") or data.get("text") or "", 70)
    return short(data.get("reason") or data.get("final_text") or "", 70)


def history(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Show the messages the model will see next (the active branch), in Anthropic format."""
    with cli_errors():
        store = open_store(db)
        record = store.session(store.resolve_session_id(session))
        summary, view = record.context_view()
        messages = build_context([store.turn(t) for t in view], summary=summary)
        if as_json:
            for message in messages:
                print_json(message.wire())
            return
        for message in messages:
            colour = "green" if message.role == "user" else "cyan"
            out_console.rule(f"[{colour}]{message.role}[/]", align="left")
            for block in message.content:
                out_console.print(render_block(block), highlight=False)


def render_block(block: Any) -> str:
    from rich.markup import escape

    if block.type == "text":
        return escape(block.text)
    if block.type == "thinking":
        return f"[dim italic]{escape(block.thinking)}[/]"
    if block.type == "tool_use":
        return f"[cyan]⚙ {block.name}[/] {escape(short(block.input, 200))} [dim]({block.id})[/]"
    if block.type == "tool_result":
        mark = "[red]✗[/]" if block.is_error else "[green]✓[/]"
        return f"{mark} [dim]({block.tool_use_id})[/] {escape(short(block.content, 200))}"
    return f"[dim]{block.type}[/]"
