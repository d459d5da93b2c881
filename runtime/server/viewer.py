"""The web audit viewer: server-rendered pages over the same public API the JSON routes use.

No build step and no framework on the page: Jinja templates, a few lines of inline script for
the time slider, the confirm-then-POST buttons and the live EventSource. Everything the model
or a tool wrote is escaped by Jinja's autoescaping; nothing recorded is ever marked safe.

A session page is addressed by turn as the CLI counts turns (`?turn=N` is what `history --at N` shows);
its older `?at=PLACE`, a place on the active branch, redirects there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from chronicle.client import Chronicle
from chronicle.runtime.app import queries
from chronicle.runtime.app.errors import AppError
from chronicle.runtime.bounds import LARGEST
from chronicle.runtime.store import ForgottenSession, NotFound

from . import session_page as session_view

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(["html"]))
PAGE_SIZE = 100
#: The heading of a viewer page that failed, by HTTP status (404 has a page of its own).
HEADINGS = {400: "Bad request", 409: "Not possible", 422: "Bad request", 500: "Internal error", 503: "Unavailable"}


def mount_viewer(app: FastAPI, chronicle: Chronicle) -> None:
    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        # `root`: where the app is mounted in a host application ("" when it is the whole server): every link is under it.
        return HTMLResponse(TEMPLATES.get_template(name).render(store=chronicle.store.describe(), root=mounted_at(request),
                                                                **context), status_code=status_code)

    def error_page(request: Request, status: int, line: str) -> HTMLResponse:
        """A viewer page load that fails (error_answers.py): the one line the API would answer, as a page."""
        if status == 404:
            return page(request, "not_found.html", status_code=404, line=line)
        return page(request, "error.html", status_code=status, line=line, heading=HEADINGS.get(status, "Something went wrong"))

    app.state.error_page = error_page

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    @app.get("/ui/sessions", response_class=HTMLResponse, include_in_schema=False)
    def sessions_page(request: Request, q: str = "", status: str = "",
                      page_no: int = Query(0, alias="page", ge=0, le=LARGEST)) -> HTMLResponse:
        """PAGE_SIZE sessions a page; `?page=N` (from 0) is what the page's own links ask for."""
        rows = chronicle.sessions()
        statuses = sorted({r["status"] for r in rows})
        needle = q.strip().lower()
        shown = [
            (row, depth) for row, depth in queries.tree_order(rows)
            if (not needle or needle in f"{row['session_id']} {row.get('agent', '')} {row.get('instance') or ''} "
                                       f"{row.get('title') or ''}".lower())
            and (not status or row["status"] == status)
        ]
        start = page_no * PAGE_SIZE
        return page(request, "sessions.html", rows=shown[start:start + PAGE_SIZE], more=len(shown) > start + PAGE_SIZE, page=page_no,
                    q=q, status=status, statuses=statuses, first=start + 1, last=min(start + PAGE_SIZE, len(shown)),
                    total=len(shown), last_page=max(0, (len(shown) - 1) // PAGE_SIZE))

    @app.get("/ui/sessions/{session_id}", response_class=HTMLResponse, include_in_schema=False)
    def session_page(request: Request, session_id: str, turn: int | None = Query(None, le=LARGEST),
                     at: int | None = Query(None, le=LARGEST),
                     all: bool = False) -> Response:
        """A window of turns as of turn `turn` (as `history --at` counts), never the whole history: see
        session_page.py. The old `?at=PLACE` (a place on the active branch) is answered with a redirect to the
        same page at that turn's `?turn=`, so a link kept from before lands where it did."""
        try:
            sid = queries.session_id(chronicle.store, session_id)
        except ForgottenSession as exc:  # erased by `chronicle forget`: 409, as the API answers
            raise HTTPException(status_code=409, detail=str(exc)) from None
        except (NotFound, AppError) as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None
        if at is not None:
            number = None if turn is not None else session_view.turn_at_place(chronicle.store, sid, at)
            return RedirectResponse(_with_turn(request, number), status_code=307)
        try:
            context = session_view.build(chronicle.store, sid, turn, every_turn=all)
        except session_view.NoSuchTurn as exc:  # a page for a browser, JSON for a program (error_answers.py)
            raise HTTPException(status_code=404, detail=str(exc)) from None
        return page(request, "session.html", **context)

    @app.get("/ui/sessions/{session_id}/why", response_class=HTMLResponse, include_in_schema=False)
    def why_page(request: Request, session_id: str, call: str | None = None, turn: int | None = None) -> HTMLResponse:
        """One decision's chain (runtime/app/why.py), linked from each tool call of the session page; it links back
        with the turn's number as `why` gives it, which is the session page's `?turn=` (undone turns are shown too)."""
        chain = chronicle.why(session_id, call, turn=turn)
        tool = chain["tool_call"]
        return page(request, "why.html", chain=chain, what=f"{tool['name']} ({tool['tool_use_id']})" if tool else "the answer")


def mounted_at(request: Request) -> str:
    """The path a host application mounted this one at (ASGI's `root_path`), without a trailing slash."""
    return str(request.scope.get("root_path") or "").rstrip("/")


def _with_turn(request: Request, number: int | None) -> str:
    """The request's own path and query with `at` replaced by `turn=number` in its place (dropped when None: a `turn`
    given beside it wins, and an empty branch has no turn to name), every other parameter kept as it came."""
    query = parse_qsl(request.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    kept: list[tuple[str, str]] = []
    for key, value in query:
        if key != "at":
            kept.append((key, value))
        elif number is not None and ("turn", str(number)) not in kept:
            kept.append(("turn", str(number)))
    raw = request.scope.get("raw_path") or quote(request.scope["path"]).encode()
    # "//host/…" would be a redirect to another site: one leading slash, always (as auth.py's login redirect).
    return "/" + raw.decode("latin-1").lstrip("/") + (f"?{urlencode(kept)}" if kept else "")
