"""Read commands over the event store: sessions, log, history."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from chronicle.runtime.app import queries

from .common import DbOption, JsonOption, cli_errors, fail, open_store, out_console, print_json
from .render import short
from .tables import Column, fit_table, unique_prefixes


def sessions(as_json: JsonOption = False, db: DbOption = None) -> None:
    """List sessions, oldest first."""
    with cli_errors():
        rows = queries.sessions(open_store(db, create=False))
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
        short = unique_prefixes(row["session_id"] for row in rows)  # every session is listed, so unique among all
        shown = [
            {
                "session": short[row["session_id"]], "agent": f"{'  ' * (depth - 1)}↳ {row['agent']}" if depth else row["agent"],
                "status": row["status"], "turns": row["turns"], "USD": "" if row["cost"] is None else f"{row['cost']:.4f}",
                "created": row["created_at"][:19].replace("T", " "), "title": escape(row["title"] or ""),
            }
            for row, depth in queries.tree_order(rows)
        ]
        out_console.print(fit_table(columns, shown, out_console.width))


def log(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    as_json: JsonOption = False,
    tree: Annotated[bool, typer.Option("--tree", help="Interleave the events of its sub-agent sessions, by position")] = False,
    db: DbOption = None,
) -> None:
    """Show every stored event of a session, its turns and tool calls, in commit order."""
    with cli_errors():
        entries = queries.log(open_store(db, create=False), session, tree=tree)
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
    with cli_errors():
        store = open_store(db, create=False)
        sid = store.resolve_session_id(session)
        messages = queries.history_messages(store, sid, at=at, version=version)
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
