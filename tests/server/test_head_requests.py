"""HEAD is answered on every route that answers GET, with the GET's status and headers and no body: `HEAD /` was a
405, as was every route but /healthz (FastAPI routes answer only the methods they declare), so a monitor or load
balancer checking the viewer or a read route with HEAD saw it as broken. The routes are read from the app itself,
so a GET route added later is checked too."""

from __future__ import annotations

import httpx

from chronicle.runtime.server.api import ServerConfig, create_app
from tests.helpers import response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import serving


def get_paths(db: str) -> list[str]:
    app = create_app(ServerConfig(db=db, run_worker=False))
    try:
        return sorted({route.path for route in app.routes if "GET" in (getattr(route, "methods", None) or ())})
    finally:
        app.state.chronicle.close()


def test_head_answers_every_get_route_as_get_does_without_a_body(sqlite_url, workspace, tmp_path):
    paths = get_paths(f"sqlite:///{tmp_path / 'routes.db'}")
    assert {"/", "/healthz", "/sessions", "/sessions/{session_id}/events", "/ui/sessions/{session_id}", "/docs"} <= set(paths)
    script = write_script(tmp_path / "s.json", [response(text("hello"))])
    with serving(sqlite_url, workspace) as base, httpx.Client(base_url=base, timeout=30) as client:
        sid = client.post("/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"}).json()["session_id"]
        wait_for(lambda: client.get("/sessions").json()[0]["status"] == "idle", timeout=60)
        for path in paths:
            url = path.replace("{session_id}", sid)
            with client.stream("GET", url) as got:  # its headers only: a live stream is not read to its end
                status, kind = got.status_code, got.headers.get("content-type")
            head = client.head(url)  # on the same connection as the next request: a HEAD leaves it usable
            assert (head.status_code, head.headers.get("content-type")) == (status, kind), (url, head.status_code, head.headers)
            assert status == 200 and head.content == b"", (url, status, head.content[:200])
        assert client.head(f"/sessions/{sid}/approve").status_code == 405, "a route without GET still has no HEAD"
        assert client.head("/no/such/page").status_code == 404
        # A live stream asked for with HEAD ends with its headers: nothing is left open on the server.
        client.head(f"/sessions/{sid}/events?follow=true")
        wait_for(lambda: client.get("/healthz").json()["streams"]["open"] == 0, timeout=30)
