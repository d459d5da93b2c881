"""`chronicle audit`: every decision, in commit order, filterable by session, tool, errors and time."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from chronicle.projections import audit as audit_projection
from chronicle.projections.sql import iso
from chronicle.runtime.read_models import caught_up

from .common import DbOption, JsonOption, cli_errors, fail, open_store, out_console, print_json
from .render import short
from .tables import Column, fit_table

RELATIVE = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> str:
    """An ISO date/time (UTC if no offset) or a relative age like 30m, 2h, 7d → stored time format."""
    match = RELATIVE.match(text.strip())
    if match:
        now = now or datetime.now(timezone.utc)
        return iso(now - timedelta(**{UNITS[match.group(2)]: int(match.group(1))}))
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        fail(f"--since takes an ISO time like 2026-01-05 or 2026-01-05T09:00:00Z, or an age like 30m, 2h, 7d (got {text!r})", 2)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return iso(value)


def entry(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "position": row["position"], "time": row["at"], "session_id": row["session_id"], "turn": row["turn"],
        "turn_id": row["turn_id"], "tool_call_id": row["tool_call_id"], "kind": row["kind"], "name": row["name"],
        "status": row["status"], "is_error": bool(row["is_error"]),
        "detail": json.loads(row["detail"] or "{}"), "links": json.loads(row["links"] or "{}"),
    }


def audit(
    session: Annotated[Optional[str], typer.Option("--session", help="Only this session (id or unique prefix)")] = None,
    tool: Annotated[Optional[str], typer.Option("--tool", help="Only calls of this tool (and their approvals)")] = None,
    errors: Annotated[bool, typer.Option("--errors", help="Only failures: model errors, retries, failed tools, failed turns")] = False,
    since: Annotated[Optional[str], typer.Option("--since", help="From this time on: ISO (2026-01-05T09:00Z) or an age (30m, 2h, 7d)")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="At most this many entries")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Every decision (model call, tool call with input and result, approval, retry, undo, fork, failure)."""
    with cli_errors():
        since_text = parse_since(since) if since else None
        store = open_store(db)
        sid = str(store.resolve_session_id(session)) if session else None
        engine = caught_up(store)
        with engine.read() as tx:
            rows = audit_projection.query(tx, session=sid, tool=tool, errors=errors, since=since_text, limit=limit)
        entries = [entry(r) for r in rows]
        if as_json:
            for e in entries:
                print_json(e)
            return
        if not entries:
            out_console.print("no matching decisions")
            return
        columns = [
            Column("pos", justify="right"), Column("time", optional=True), Column("session"), Column("turn", justify="right"),
            Column("kind"), Column("name"), Column("status", optional=True), Column("detail", flex=True),
        ]
        rows = [
            {
                "pos": e["position"], "time": e["time"][5:19].replace("T", " "), "session": (e["session_id"] or "")[:8],
                "turn": e["turn"] or "", "kind": e["kind"], "name": escape(e["name"] or ""),
                "status": f"[red]{e['status'] or 'error'}[/]" if e["is_error"] else (e["status"] or ""),
                "detail": escape(short(_brief(e), 200)),
            }
            for e in entries
        ]
        table = fit_table(columns, rows, out_console.width)
        out_console.print(table)


def _brief(e: dict[str, Any]) -> str:
    d = e["detail"]
    # Who decided, and how when not in person: "by alice@laptop (--yes): ..."
    who = f"by {d['actor']}" + (f" ({d['by']})" if d.get("by") not in (None, "user") else "") if d.get("actor") else ""
    for key in ("output", "reason", "text", "input", "title", "final_text", "summary", "task"):
        if d.get(key):
            text = d[key] if isinstance(d[key], str) else json.dumps(d[key], ensure_ascii=False)
            return f"{who}: {text}" if who else text
    return who
