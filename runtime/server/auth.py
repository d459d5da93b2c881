"""Who may use the server: the token, sent as a header by programs and kept in a cookie by browsers.

With `CHRONICLE_SERVER_TOKEN` set, every path but /healthz needs it (the API docs and an unknown
path too). A program sends `Authorization: Bearer TOKEN`. A browser cannot send that header when
a URL is typed, and neither can the viewer's `EventSource`, so a browser logs in once with
`?token=TOKEN` on any page: the answer sets an HttpOnly, SameSite=Strict cookie (Secure over
https) and redirects to the same URL without the token, which so leaves the address bar and the
history. The cookie holds a value derived from the token (an HMAC), not the token itself, so it
cannot be replayed as a bearer token; every comparison takes constant time.

A cookie is sent by the browser on its own, so a request it alone authenticates could be forged
by another site (CSRF). SameSite=Strict keeps other sites' requests from carrying it, and on top
of that a state-changing request (anything but GET, HEAD, OPTIONS) authenticated by the cookie
alone must carry the header `X-Chronicle-Viewer`, which the viewer's own fetch sends and which
another origin cannot send without a CORS preflight that this server never grants.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

COOKIE = "chronicle_token"
VIEWER_HEADER = "X-Chronicle-Viewer"
OPEN_PATHS = frozenset({"/healthz"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The `code` of a refusal here, as every error answer has one (error_answers.http_code): the request, as asked, is refused.
REFUSED = 2
MISSING = "missing or wrong token: send Authorization: Bearer TOKEN (a browser: open /?token=TOKEN once)"


def cookie_value(token: str) -> str:
    """What the login cookie holds: derived from the token, never the token."""
    return hmac.new(token.encode(), b"chronicle viewer cookie", hashlib.sha256).hexdigest()


def same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class TokenGate:
    """ASGI middleware: a request without the token (header or cookie) is answered 401 here."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_value(token) if token else ""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.token or app_path(scope) in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        answer = self._refusal(Request(scope))
        if answer is None:
            await self.app(scope, receive, send)
        else:
            await answer(scope, receive, send)

    def _refusal(self, request: Request) -> Response | None:
        """None if the request may go on; otherwise what to answer (a login redirect, 401 or 403)."""
        assert self.token
        query = parse_qsl(request.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for key, value in query if key == "token"]
        if given and request.method in SAFE_METHODS:
            if not same(given[-1].strip(), self.token):
                return _unauthorised(request, "wrong token in ?token=")
            return self._login(request, [(k, v) for k, v in query if k != "token"])
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and same(bearer.strip(), self.token):
            return None
        if same(request.cookies.get(COOKIE, ""), self.cookie):
            if request.method in SAFE_METHODS or request.headers.get(VIEWER_HEADER):
                return None
            return JSONResponse({"error": f"{VIEWER_HEADER}: a state-changing request authenticated by the viewer's "
                                          f"cookie must send this header (it guards against cross-site requests); "
                                          f"a program sends Authorization: Bearer TOKEN instead", "code": REFUSED},
                                status_code=403)
        return _unauthorised(request, MISSING)

    def _login(self, request: Request, rest: list[tuple[str, str]]) -> Response:
        raw = request.scope.get("raw_path") or quote(request.scope["path"]).encode()
        # "//host/…" would be a redirect to another site: one leading slash, always.
        location = "/" + raw.decode("latin-1").lstrip("/") + (f"?{urlencode(rest)}" if rest else "")
        answer = RedirectResponse(location, status_code=303,
                                  headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})
        answer.set_cookie(COOKIE, self.cookie, path="/", httponly=True, samesite="strict",
                          secure=request.url.scheme == "https")
        return answer


def app_path(scope: Any) -> str:
    """The request's path within this app: a host application that mounts it puts its own prefix in `root_path`."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def _unauthorised(request: Request, why: str) -> Response:
    """401: a page that says how to log in for a browser's page load, JSON for everything else."""
    if "text/html" in request.headers.get("accept", ""):
        from .viewer import TEMPLATES, mounted_at

        page = TEMPLATES.get_template("token_needed.html").render(store="", why=why.split(":")[0], root=mounted_at(request))
        return HTMLResponse(page, status_code=401, headers={"Cache-Control": "no-store"})
    return JSONResponse({"error": why, "code": REFUSED}, status_code=401, headers={"WWW-Authenticate": "Bearer"})


def presents_token(request: Request, token: str) -> bool:
    """Whether a request on an open path (/healthz) carries the token, as header or login cookie: it may then be told
    what only the token's holders are (the server's notes name its channels and routines)."""
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and same(bearer.strip(), token):
        return True
    return same(request.cookies.get(COOKIE, ""), cookie_value(token))
