"""The web audit viewer: server-rendered pages over the same public API the JSON routes use.

No build step and no framework on the page: Jinja templates, a few lines of inline script for
the time slider, the confirm-then-POST buttons and the live EventSource. Everything the model
or a tool wrote is escaped by Jinja's autoescaping; nothing recorded is ever marked safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from chronicle.client import Chronicle
from chronicle.runtime.app import queries
from chronicle.runtime.app.errors import AppError
from chronicle.runtime.store import ForgottenSession, NotFound

from . import session_page as session_view

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(["html"]))
PAGE_SIZE = 100


def mount_viewer(app: FastAPI, chronicle: Chronicle) -> None:
    def page(name: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(TEMPLATES.get_template(name).render(store=chronicle.store.describe(), **context))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    @app.get("/ui/sessions", response_class=HTMLResponse, include_in_schema=False)
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

    @app.get("/ui/sessions/{session_id}", response_class=HTMLResponse, include_in_schema=False)
    def session_page(session_id: str, at: int | None = None, all: bool = False) -> HTMLResponse:
        """A window of turns (as of turn `at`), never the whole history: see session_page.py."""
        try:
            sid = queries.session_id(chronicle.store, session_id)
        except ForgottenSession as exc:  # erased by `chronicle forget`: 409, as the API answers
            raise HTTPException(status_code=409, detail=str(exc)) from None
        except (NotFound, AppError) as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None
        return page("session.html", **session_view.build(chronicle.store, sid, at, every_turn=all))

    @app.get("/ui/sessions/{session_id}/why", response_class=HTMLResponse, include_in_schema=False)
    def why_page(session_id: str, call: str | None = None, turn: int | None = None) -> HTMLResponse:
        """One decision's chain (runtime/app/why.py), linked from each tool call of the session page."""
        chain = chronicle.why(session_id, call, turn=turn)
        # The session page numbers the branch's turns by their place on it; `why` numbers them as `history --at` does.
        head = [str(t) for t in chronicle.store.session(UUID(chain["session_id"]), copy=False).head]
        chain["branch_turn"] = head.index(chain["turn_id"]) + 1 if chain["turn_id"] in head else None
        tool = chain["tool_call"]
        return page("why.html", chain=chain, what=f"{tool['name']} ({tool['tool_use_id']})" if tool else "the answer")


