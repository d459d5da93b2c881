"""What keeps a web page the user visits from using the server: cross-site requests and DNS rebinding.

Without a token (the default on loopback) nothing else stands between a page of any site and the API. A browser
lets any page send a "simple" request to any address without asking the server first (a CORS preflight): a POST
whose Content-Type is text/plain, a form's types, or none at all. `fetch(url, {method: "POST", mode: "no-cors"})`
approved a pending bash call so, and a body-less one undid, forked or cancelled; the page cannot read the answer,
but it does not need to. So every state-changing request (anything but GET, HEAD, OPTIONS) must carry what such a
request cannot: `Content-Type: application/json` or the viewer's `X-Chronicle-Viewer` header, either of which makes
the browser ask first, and this server grants no preflight. A request that says it comes from a page (`Origin`) of
another origin is refused too.

DNS rebinding gets round both: a page of evil.example whose name then resolves to 127.0.0.1 is, to the browser,
the same origin as the server, and may read and write it all. Its requests still name evil.example in `Host`, so
a request that reached the server on a loopback address must name a loopback host (localhost, 127.0.0.1, [::1]),
or one the operator lists in CHRONICLE_SERVER_ALLOWED_HOSTS (a reverse proxy on the same machine that passes its
public name on). Requests to another address (a server bound off loopback) need the token, which such a page lacks.
"""

from __future__ import annotations

from typing import Any, Iterable
from urllib.parse import urlsplit

from starlette.responses import JSONResponse

from .auth import SAFE_METHODS, VIEWER_HEADER
from .loopback import loopback_ip, loopback_name

#: What a program adds to a request that changes something (said in the refusal).
JSON_HEADER = "Content-Type: application/json"


class CrossSiteGuard:
    """ASGI middleware: refuses a request a web page could have made without the user meaning it (403 or 415,
    JSON `{error, code}`), before anything else reads it."""

    def __init__(self, app: Any, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(name.strip().lower().rstrip(".") for name in allowed_hosts if name.strip())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, why = refusal
        await JSONResponse({"error": why, "code": 2}, status_code=status,
                           headers={"Cache-Control": "no-store"})(scope, receive, send)

    def refusal(self, scope: Any) -> tuple[int, str] | None:
        headers = _headers(scope)
        host = headers.get("host", "")
        if _reached_on_loopback(scope) and host and not self._trusted(_host_name(host)):
            return 403, (f"Host: {host} is not a name of this machine: a server on loopback answers only to localhost, "
                         "127.0.0.1 or [::1] (a page of another site whose name was pointed here must not read it); "
                         "a reverse proxy that passes another name lists it in CHRONICLE_SERVER_ALLOWED_HOSTS")
        if scope.get("method", "GET") in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and not self._own_origin(origin, host):
            return 403, (f"Origin: {origin} is not this server's origin: a page of another site may not make changes "
                         "here (a reverse proxy whose public name differs from the Host it sends lists that name in "
                         "CHRONICLE_SERVER_ALLOWED_HOSTS)")
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if _is_json(media) or headers.get(VIEWER_HEADER.lower()):
            return None
        return 415, (f"Content-Type: {media or 'none'}: a request that changes something must send {JSON_HEADER}, "
                     f"with a JSON body or none (curl -X POST -H 'content-type: application/json' URL); this keeps "
                     "web pages of other sites, which cannot send it, from making changes")

    def _trusted(self, name: str) -> bool:
        return loopback_name(name) or name in self.allowed

    def _own_origin(self, origin: str, host: str) -> bool:
        """Whether `Origin` is the server's own: the same host and port the request was sent to (the scheme is not
        compared: a proxy that ends TLS passes https pages' requests on as http), or a name the operator allows."""
        try:
            parts = urlsplit(origin.strip())
            name = (parts.hostname or "").rstrip(".")
            netloc = parts.netloc.lower()
        except ValueError:  # a malformed port or address: not an origin of anything
            return False
        if parts.scheme not in ("http", "https") or not netloc:  # "null": a sandboxed frame, a file, a data: URL
            return False
        return netloc == host.strip().lower() or name in self.allowed


def _headers(scope: Any) -> dict[str, str]:
    """The request's headers by name, the first of a repeated one: as Starlette, and so the routes, read them."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def _reached_on_loopback(scope: Any) -> bool:
    """Whether the connection came in on a loopback address of this machine (the socket's own end), as it does for
    every request of a server bound to loopback, and for a local one of a server bound to every address."""
    server = scope.get("server")
    if not server:
        return False
    return loopback_ip(str(server[0]))  # not an address: a Unix socket's path, or a test client's name


def _host_name(host: str) -> str:
    """The name in a Host header, without its port: `[::1]:8765` -> `::1`, `Localhost.:80` -> `localhost`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_json(media: str) -> bool:
    """application/json, or a JSON type of its own (application/merge-patch+json): none is one a page may send
    without asking the server first."""
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
