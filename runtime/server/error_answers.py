"""How a failure becomes the server's HTTP answer: one JSON shape (`error` and `code`, the CLI's exit code for
that kind of failure), a status that says what kind of failure it was, and the operator's log for the store's
failures. A browser asking for a viewer page (`Accept: text/html`, under `/ui/`) gets the same line as a page
(the viewer registers how to draw it: `app.state.error_page`) rather than a JSON object on a blank screen.

Apart from the routes (api.py) because it is one idea: every route raises what the use cases raise, and these
handlers alone decide what a client sees.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Callable, Mapping

from eventsourcing.persistence import PersistenceError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from psycopg import Error as DriverError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from chronicle.errors import ChronicleError
from chronicle.runtime.app.errors import UNAVAILABLE, first_line
from chronicle.runtime.store_errors import StoreUnavailable

log = logging.getLogger("chronicle.server")


#: What draws an error as a viewer page: (request, status, the one line) -> the page.
ErrorPage = Callable[[Request, int, str], Response]


def http_code(status: int) -> int:
    """The CLI's exit code for an answer the server makes itself: a request it refuses as asked is a usage error (2),
    one the state forbids (409) or a failure of the server's is 1."""
    return 2 if 400 <= status < 500 and status != 409 else 1


def _for_browser(request: Request) -> ErrorPage | None:
    draw: ErrorPage | None = getattr(request.app.state, "error_page", None)
    if draw is None or "text/html" not in request.headers.get("accept", ""):
        return None
    path, root = request.scope.get("path", ""), str(request.scope.get("root_path") or "")
    if root and path.startswith(root):
        path = path[len(root):]
    return draw if path == "/" or path.startswith("/ui/") else None


def answer(request: Request, body: dict[str, Any], status: int, headers: Mapping[str, str] | None = None) -> Response:
    """`body` as JSON, or as a viewer page for a browser's page load (`_for_browser`)."""
    draw = _for_browser(request)
    if draw is not None:
        return draw(request, status, str(body["error"]))
    return JSONResponse(body, status_code=status, headers=headers)


def answer_errors(app: FastAPI) -> None:
    @app.exception_handler(ChronicleError)
    async def _chronicle_error(request: Request, exc: ChronicleError) -> Response:
        # What is missing is said by the use case (AppError.kind), not guessed from the words: a model named
        # "no session" was a 404, and a new message that happened not to match was not.
        status = 404 if exc.not_found else 503 if exc.kind == UNAVAILABLE else {2: 400, 3: 409}.get(exc.code, 409)
        if status == 503:  # the operator's log says it too, as for any store failure (`_store_error`)
            log.error("%s %s: %s", request.method, request.url.path, exc)
        return answer(request, {"error": str(exc), "code": exc.code}, status)

    @app.exception_handler(StarletteHTTPException)  # FastAPI's, the router's 404/405 and the body limit's 413
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        said = _unreadable(exc)
        if said is not None:
            return answer(request, {"error": said, "code": 2, "problems": [{"field": "", "error": said}]}, 400)
        if exc.status_code == 405 and (allowed := _methods_of(request)):
            line = f"method {request.method} not allowed on {request.url.path}: it takes {', '.join(allowed)}"
            return answer(request, {"error": line, "code": 2}, 405, {**(exc.headers or {}), "Allow": ", ".join(allowed)})
        return answer(request, {"error": exc.detail, "code": http_code(exc.status_code)}, exc.status_code, exc.headers)

    @app.exception_handler(PersistenceError)
    @app.exception_handler(DriverError)
    @app.exception_handler(sqlite3.Error)
    async def _store_error(request: Request, exc: Exception) -> Response:
        """The store failed (a lost database, a full disk): 503 with one line; the log keeps the traceback, except
        for a store unavailable for a reason it names (store_errors.StoreUnavailable), said in one line."""
        if isinstance(exc, StoreUnavailable):
            log.error("%s %s: the store is unavailable: %s", request.method, request.url.path, first_line(exc))
        else:
            log.error("%s %s: the store failed", request.method, request.url.path, exc_info=exc)
        # `code` as the ChronicleError answers have it (runtime/app/errors.UNAVAILABLE): the CLI's exit code for it.
        return answer(request, {"error": f"the store is unavailable: {first_line(exc)}", "code": 1}, 503)

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> Response:
        """Anything else: JSON, never a traceback to the client (uvicorn logs it)."""
        return answer(request, {"error": f"internal error ({type(exc).__name__}); the server's log has the details", "code": 1}, 500)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        said = _not_json(request, errors)
        if said is not None:
            return answer(request, {"error": said, "code": 2, "problems": [{"field": "", "error": said}]}, 400)
        problems = [{"field": ".".join(str(p) for p in e["loc"] if p != "body"), "error": e["msg"]} for e in errors]
        first = problems[0] if problems else {"field": "", "error": "invalid request"}
        return answer(request, {"error": f"{first['field'] or 'the body'}: {first['error']}", "code": 2, "problems": problems}, 422)


def _methods_of(request: Request) -> list[str]:
    """Every method the request's path takes: the router's 405 named the first route of the path only (`Allow: GET`
    on /sessions, which POST creates sessions on)."""
    scope = {**request.scope, "method": ""}  # no route matches an empty method fully: each of the path's matches partly
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.matches(scope)[0] != Match.NONE:
            methods |= set(route.methods or ())
    if "GET" in methods:  # answered wherever GET is (head_requests.py)
        methods.add("HEAD")
    return sorted(methods)


#: What FastAPI answers for a JSON body it failed to read other than as malformed JSON (its words, matched exactly).
_FASTAPI_UNREADABLE = "There was an error parsing the body"


def _unreadable(exc: StarletteHTTPException) -> str | None:
    """What to say of a JSON body FastAPI could not read for a reason other than malformed JSON: bytes that are not
    UTF-8 (`{"prompt": "\xe9"}` in Latin-1), or arrays nested deeper than the parser goes. FastAPI answered its own
    `There was an error parsing the body`, in no words of ours and without `problems`; the cause it kept says why."""
    if exc.status_code != 400 or exc.detail != _FASTAPI_UNREADABLE:
        return None
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return (f"the body is not valid JSON: it is not UTF-8 text (byte 0x{cause.object[cause.start]:02x} at "
                f"position {cause.start}); send the JSON encoded as UTF-8")
    if isinstance(cause, RecursionError):
        return "the body is not valid JSON: it is nested too deep to read; send a flatter object"
    return f"the body is not valid JSON: it could not be read ({type(cause).__name__ if cause else 'unknown error'})"


def _not_json(request: Request, errors: Any) -> str | None:
    """What to say when the body is not JSON at all: malformed (its location is a character offset, not a field), or
    sent as another media type, which FastAPI hands the model as raw text ("Input should be a valid dictionary")."""
    if not errors:
        return None
    first = errors[0]
    if first["type"] == "json_invalid":
        why = (first.get("ctx") or {}).get("error") or first["msg"]
        return f"the body is not valid JSON: {why} (at character {first['loc'][-1]})"
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if tuple(first["loc"]) == ("body",) and isinstance(first.get("input"), (str, bytes)) and not media.endswith("json"):
        return f"the body is not JSON (Content-Type: {media or 'none'}): send a JSON object as application/json"
    return None
