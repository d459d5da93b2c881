"""`chronicle audit`: every decision, in commit order, filterable by session, tool, errors and time."""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from chronicle.runtime.app import queries

from .common import DbOption, JsonOption, RowCount, cli_errors, not_empty, open_store, out_console, print_json_rows, utf8_text
from .render import short
from .tables import Column, fit_table


def audit(
    session: Annotated[Optional[str], typer.Option("--session", callback=not_empty, help="Only this session (id or unique prefix)")] = None,
    tool: Annotated[Optional[str], typer.Option("--tool", callback=not_empty, help="Only calls of this tool (and their approvals)")] = None,
    errors: Annotated[bool, typer.Option("--errors", help="Only failures: model errors, retries, failed tools, failed turns")] = False,
    since: Annotated[Optional[str], typer.Option("--since", callback=not_empty, help="From this time on: ISO (2026-01-05T09:00Z) or an age (30m, 2h, 7d)")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", click_type=RowCount(), help="At most this many entries: the first ones")] = None,
    last: Annotated[Optional[int], typer.Option("--last", click_type=RowCount(), help="Only the newest N entries (still oldest first)")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Every decision (model call, tool call with input and result, approval, retry, undo, fork, failure)."""
    with cli_errors():
        if since:
            queries.parse_since(since)  # a bad --since is a usage error before the store is opened
        queries.audit_window(limit, last)  # and both is a usage error before the store is opened
        tool = utf8_text(tool, "--tool") if tool else tool  # a name is stored as UTF-8: as a prompt would be
        entries = queries.audit(open_store(db, create=False), session=session, tool=tool, errors=errors, since=since,
                                limit=limit, last=last)
        if as_json:
            print_json_rows(entries)
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
    if e["kind"] == "reply":  # a turn's answer posted back to its channel
        how = f"HTTP {d['http_status']}" if d.get("http_status") is not None else "no answer"
        whom = f"findings of routine {d['routine']}" if d.get("routine") else f"to {', '.join(d.get('senders') or [])}"
        said = f"{whom} via {d.get('channel')}: {how}, {d.get('attempts')} attempt(s)"
        return f"{said}: {d['error']}" if d.get("error") else said
    if e["kind"] == "import":
        return import_brief(d)
    if e["kind"] in ("undo", "redo"):  # how many turns, by whom (`--json` lists their ids)
        n = len(d.get("turn_ids") or [])
        return f"{n} turn{'s' if n != 1 else ''}" + (f" {who}" if who else "")
    if e["kind"] == "fork":  # where it was forked from, and by whom
        origin = (e.get("links") or {}).get("forked_from") or {}
        at = f" at turn {origin['turn']}" if origin.get("turn") is not None else ""
        return f"from {str(origin.get('session_id') or '?')[:8]}{at}" + (f" {who}" if who else "")
    if e["kind"] == "routine" and d.get("replaces_session_id"):  # a lightweight routine's session started anew
        return f"new session: the routine's session {d['replaces_session_id']} was erased"
    if d.get("channel") and d.get("senders") and d.get("text"):  # a channel's input: who sent it
        return f"from {', '.join(d['senders'])} via {d['channel']}: {d['text']}"
    if isinstance(d.get("counts"), dict) and d.get("where"):  # SecretsRedacted: what was cut out, never the secret
        return f"{d['where']}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(d["counts"].items()))
    for key in ("output", "reason", "text", "input", "title", "final_text", "summary", "task"):
        if d.get(key):
            text = d[key] if isinstance(d[key], str) else json.dumps(d[key], ensure_ascii=False)
            return f"{who}: {text}" if who else text
    return who


def import_brief(d: dict[str, Any]) -> str:
    """An import's row: what came in, signed by whom, which bundle, exported when from which source head, by whom."""
    sessions = f"{len(d.get('session_ids') or [])} session(s)"
    if "actor" not in d:
        return f"{sessions}; where from was not recorded (imported before Chronicle kept it)"
    signer = (f"signed by {d['signed_by'][:16]}…" + (" (--key required)" if d.get("key_required") else "")
              if d.get("signed_by") else "unsigned")
    head = d.get("source_head") or {}
    source = f"source head {head.get('position')}:{str(head.get('digest'))[:12]}…" if head else "source with no chain"
    file = f", sha256 {d['bundle_sha256'][:12]}…" if d.get("bundle_sha256") else ""
    return (f"{sessions}, {signer}; bundle head {str(d.get('bundle_head'))[:12]}…{file}, exported {d.get('exported_at')} "
            f"at {source}; by {d['actor']}")

