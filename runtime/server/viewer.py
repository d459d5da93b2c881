"""The web audit viewer: server-rendered pages over the same public API the JSON routes use.

No build step and no framework on the page: Jinja templates, a few lines of inline script for
the time slider, the confirm-then-POST buttons and the live EventSource. Everything the model
or a tool wrote is escaped by Jinja's autoescaping; nothing recorded is ever marked safe.
"""

from __future__ import annotations

import difflib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from chronicle.client import Chronicle
from chronicle.runtime.app import queries
from chronicle.runtime.app.errors import AppError
from chronicle.runtime.pricing import price
from chronicle.runtime.store import NotFound

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(["html"]))
PAGE_SIZE = 100
MESSAGES_SHOWN = 200
LOG_SHOWN = 300


def mount_viewer(app: FastAPI, chronicle: Chronicle, guard: list[Any]) -> None:
    def page(name: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(TEMPLATES.get_template(name).render(store=chronicle.store.describe(), **context))

    @app.get("/", response_class=HTMLResponse, dependencies=guard, include_in_schema=False)
    @app.get("/ui/sessions", response_class=HTMLResponse, dependencies=guard, include_in_schema=False)
    def sessions_page(q: str = "", status: str = "", page_no: int = 0) -> HTMLResponse:
        rows = chronicle.sessions()
        statuses = sorted({r["status"] for r in rows})
        needle = q.strip().lower()
        shown = [
            (row, depth) for row, depth in queries.tree_order(rows)
            if (not needle or needle in f"{row['session_id']} {row.get('agent', '')} {row.get('title') or ''}".lower())
            and (not status or row["status"] == status)
        ]
        start = page_no * PAGE_SIZE
        return page("sessions.html", rows=shown[start:start + PAGE_SIZE], more=len(shown) > start + PAGE_SIZE, page=page_no,
                    q=q, status=status, statuses=statuses)

    @app.get("/ui/sessions/{session_id}", response_class=HTMLResponse, dependencies=guard, include_in_schema=False)
    def session_page(session_id: str, request: Request, at: int | None = None, all: bool = False) -> HTMLResponse:
        try:
            sid = str(queries.session_id(chronicle.store, session_id))
        except (NotFound, AppError) as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None
        rows = chronicle.sessions()
        row = next(r for r in rows if r["session_id"] == sid)
        log = chronicle.log(sid)
        turn_ends = [e for e in log if e["aggregate"] == "session" and e["event"] == "TurnEnded"]
        total_turns = _turn_count(chronicle, sid, turn_ends)
        at = at if at is None or total_turns == 0 else max(1, min(at, total_turns))
        history = chronicle.history(sid, at=at)
        effects = _effects(log)
        messages = [_message(m, effects) for m in history]
        hidden = 0 if all else max(0, len(messages) - MESSAGES_SHOWN)
        audit = chronicle.audit(session=sid)
        decisions = [a for a in audit if a["kind"] in ("approval", "always_allow", "undo", "redo", "fork", "cancel", "resume", "steer")]
        pending = [
            {"tool_call_id": e["aggregate_id"], "name": e["data"].get("name", ""),
             "input_json": json.dumps(_inputs(log).get(e["aggregate_id"], {}), indent=2, ensure_ascii=False)}
            for e in log if e["aggregate"] == "tool_call" and e["event"] == "ApprovalRequested"
            and _status_of(log, e["aggregate_id"]) == "awaiting_approval"
        ]
        children = [{**r, "depth": depth} for r, depth in queries.tree_order(rows) if depth and _descends(rows, r, sid)]
        return page(
            "session.html", row=row, at=at, total_turns=total_turns, messages=messages[hidden:], hidden=hidden,
            pending=pending, decisions=decisions[-50:], cost_svg=_cost_svg(log),
            by_model=[r for r in chronicle.cost(sid, by="model") if r.get("scope") in ("total", None)],
            children=children, log_rows=log[-LOG_SHOWN:], log_total=len(log), head=log[-1]["position"] if log else 0,
            live=row["status"] in ("busy", "queued") or row.get("queued"),
        )


def _turn_count(chronicle: Chronicle, sid: str, turn_ends: list[dict[str, Any]]) -> int:
    """Turns on the branch as `history --at` numbers them (inherited turns of a fork first)."""
    session = chronicle.store.session(queries.session_id(chronicle.store, sid), copy=False)
    return len(session.head)


def _status_of(log: list[dict[str, Any]], aggregate_id: str) -> str:
    status = ""
    for e in log:
        if e["aggregate_id"] == aggregate_id:
            status = e.get("status") or status
    return status


def _inputs(log: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["aggregate_id"]: e["data"].get("input") or {} for e in log if e["aggregate"] == "tool_call" and e["event"] == "Requested"}


def _effects(log: list[dict[str, Any]]) -> dict[str, str]:
    """tool_use id → a unified diff of the files the call wrote, from its recorded before/after."""
    diffs: dict[str, str] = {}
    for e in log:
        if e["aggregate"] != "tool_call" or e["event"] != "Completed":
            continue
        parts = []
        for effect in e["data"].get("effects") or []:
            if effect.get("kind") != "file":
                continue
            before, after = effect.get("before") or "", effect.get("after") or ""
            if not isinstance(before, str) or not isinstance(after, str):
                continue
            path = effect.get("path", "?")
            parts.append("".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                                      f"a/{path}", f"b/{path}")) or f"(no change to {path})")
        if parts:
            diffs[e["data"].get("tool_use_id") or ""] = "\n".join(parts)
    return diffs


def _message(message: dict[str, Any], effects: dict[str, str]) -> dict[str, Any]:
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else []
    for block in content if isinstance(content, list) else []:
        shown = dict(block)
        if block.get("type") == "tool_use":
            shown["input_json"] = json.dumps(block.get("input") or {}, indent=2, ensure_ascii=False)
            shown["diff"] = effects.get(block.get("id", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            shown["text"] = inner if isinstance(inner, str) else "\n".join(
                b.get("text", f"[{b.get('type')}]") for b in inner or [] if isinstance(b, dict))
        elif block.get("type") not in ("text", "thinking", "redacted_thinking"):
            shown["raw"] = json.dumps(block, indent=2, ensure_ascii=False)[:4000]
        blocks.append(shown)
    return {"role": message["role"], "blocks": blocks}


def _descends(rows: list[dict[str, Any]], row: dict[str, Any], ancestor: str) -> bool:
    parents = {r["session_id"]: r["parent_session_id"] for r in rows}
    current = row["parent_session_id"]
    while current:
        if current == ancestor:
            return True
        current = parents.get(current)
    return False


def _cost_svg(log: list[dict[str, Any]], width: int = 300, height: int = 90) -> str:
    """Cumulative USD over the session's model calls, as a small inline SVG (numbers only: safe)."""
    points: list[float] = []
    total = 0.0
    for e in log:
        if e["aggregate"] == "turn" and e["event"] == "ModelResponded":
            response = e["data"].get("response") or {}
            usd = price(str(response.get("model") or ""), response.get("usage") or {},
                        at=datetime.fromisoformat(e["timestamp"])) if response.get("model") else None
            total += usd or 0.0
            points.append(total)
    if len(points) < 2 or total <= 0:
        return '<p class="muted">no priced model calls yet</p>'
    step = width / (len(points) - 1)
    path = " ".join(f"{i * step:.1f},{height - 12 - (v / total) * (height - 24):.1f}" for i, v in enumerate(points))
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="cost over time">'
            f'<polyline fill="none" stroke="#1d1d1f" stroke-width="1.5" points="{path}"/>'
            f'<text x="0" y="{height - 1}">{len(points)} calls</text><text x="{width - 70}" y="10">${total:.4f}</text></svg>')
