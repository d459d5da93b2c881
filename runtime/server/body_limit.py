"""The largest request body the server reads (`CHRONICLE_SERVER_MAX_BODY_BYTES`, 2 MiB by default).

Without a limit a 50 MB prompt was read, parsed and recorded whole (201), holding every other
request for 14-18 s, and 155 MB of prompts made a 1.1 GB SQLite file. A body whose Content-Length
is over the limit is answered 413 before any of it is read; a body without one (chunked) is
counted as it arrives and refused as soon as it passes the limit. The HTTP API takes text only
(prompts, messages, flags), so one limit serves every route.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse


class BodyTooLarge(HTTPException):
    """Raised from `receive` when a body passes the limit: FastAPI lets an HTTPException through
    its body parsing, so the app's handler answers it as JSON like any other error."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=refusal(limit))


def refusal(limit: int) -> str:
    return (f"the request body is over the server's limit of {limit} bytes (CHRONICLE_SERVER_MAX_BODY_BYTES); "
            "send less, or serve with a larger limit")


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, never reading more than the limit."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            # Connection: close, as the rest of the body is never read.
            await JSONResponse({"error": refusal(self.limit), "code": 2}, status_code=413,
                               headers={"Connection": "close"})(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await JSONResponse({"error": refusal(self.limit), "code": 2}, status_code=413,
                               headers={"Connection": "close"})(scope, receive, send)


def _content_length(scope: Any) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
