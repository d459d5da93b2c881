"""How a failure becomes the server's HTTP answer: one JSON shape (`error`, and `code` where the CLI has an exit
code for it), a status that says what kind of failure it was, and the operator's log for the store's failures.

Apart from the routes (api.py) because it is one idea: every route raises what the use cases raise, and these
handlers alone decide what a client sees.
"""

from __future__ import annotations

import logging
import sqlite3

from eventsourcing.persistence import PersistenceError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg import Error as DriverError
from starlette.exceptions import HTTPException as StarletteHTTPException

from chronicle.errors import ChronicleError
from chronicle.runtime.app.errors import UNAVAILABLE, first_line
from chronicle.runtime.store_errors import StoreUnavailable

log = logging.getLogger("chronicle.server")


def answer_errors(app: FastAPI) -> None:
    @app.exception_handler(ChronicleError)
    async def _chronicle_error(request: Request, exc: ChronicleError) -> JSONResponse:
        # What is missing is said by the use case (AppError.kind), not guessed from the words: a model named
        # "no session" was a 404, and a new message that happened not to match was not.
        status = 404 if exc.not_found else 503 if exc.kind == UNAVAILABLE else {2: 400, 3: 409}.get(exc.code, 409)
        if status == 503:  # the operator's log says it too, as for any store failure (`_store_error`)
            log.error("%s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"error": str(exc), "code": exc.code}, status_code=status)

    @app.exception_handler(StarletteHTTPException)  # FastAPI's, the router's 404/405 and the body limit's 413
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(PersistenceError)
    @app.exception_handler(DriverError)
    @app.exception_handler(sqlite3.Error)
    async def _store_error(request: Request, exc: Exception) -> JSONResponse:
        """The store failed (a lost database, a full disk): 503 with one line; the log keeps the traceback, except
        for a store unavailable for a reason it names (store_errors.StoreUnavailable), said in one line."""
        if isinstance(exc, StoreUnavailable):
            log.error("%s %s: the store is unavailable: %s", request.method, request.url.path, first_line(exc))
        else:
            log.error("%s %s: the store failed", request.method, request.url.path, exc_info=exc)
        # `code` as the ChronicleError answers have it (runtime/app/errors.UNAVAILABLE): the CLI's exit code for it.
        return JSONResponse({"error": f"the store is unavailable: {first_line(exc)}", "code": 1}, status_code=503)

    @app.exception_handler(Exception)
    async def _internal_error(_: Request, exc: Exception) -> JSONResponse:
        """Anything else: JSON, never a traceback to the client (uvicorn logs it)."""
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); the server's log has the details"},
                            status_code=500)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if errors and errors[0]["type"] == "json_invalid":  # its location is a character offset, not a field
            why = (errors[0].get("ctx") or {}).get("error") or errors[0]["msg"]
            said = f"the body is not valid JSON: {why} (at character {errors[0]['loc'][-1]})"
            return JSONResponse({"error": said, "problems": [{"field": "", "error": said}]}, status_code=400)
        problems = [{"field": ".".join(str(p) for p in e["loc"] if p != "body"), "error": e["msg"]} for e in errors]
        first = problems[0] if problems else {"field": "", "error": "invalid request"}
        return JSONResponse({"error": f"{first['field'] or 'the body'}: {first['error']}", "problems": problems},
                            status_code=422)
