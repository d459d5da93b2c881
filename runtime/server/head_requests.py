"""HEAD wherever GET is answered: the GET's status and headers, without the body.

HTTP has a server answer HEAD on every resource it answers GET on (RFC 9110, 9.3.2), and monitors, load balancers
and `curl -I` ask with it; FastAPI's routes answer only the methods they declare, so `HEAD /` was a 405 and only
/healthz, which declared it, answered. Here a HEAD goes through the app as a GET: the response's start is sent as
it is (its Content-Length says what a GET would carry) and its body is not. Once the headers are out the app is
told the client has gone, so a live event stream asked for with HEAD ends there rather than running for as long
as its session does. A HEAD on a route without GET is still its 405, and on no route its 404.
"""

from __future__ import annotations

from typing import Any


class HeadAsGet:
    """ASGI middleware: a HEAD request is served as a GET whose body is dropped."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        answered = False

        async def headers_only(message: Any) -> None:
            nonlocal answered
            if answered:
                return
            if message["type"] == "http.response.start":
                await send(message)
            elif message["type"] in ("http.response.body", "http.response.pathsend"):  # the body's first part ends it
                answered = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        async def gone_once_answered() -> Any:
            if answered:
                return {"type": "http.disconnect"}
            return await receive()

        await self.app({**scope, "method": "GET"}, gone_once_answered, headers_only)
