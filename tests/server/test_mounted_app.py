"""`Chronicle.http_app()` mounted inside a program's own FastAPI application, under a prefix: the viewer's links,
its actions and its live stream stay under the prefix, the worker runs once the host enters the app's lifespan, and a
host that does not is told so on every route rather than accepting sessions no worker will ever run."""

from __future__ import annotations

import re
import time

import pytest

pytest.importorskip("fastapi")

from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from chronicle import Chronicle  # noqa: E402
from tests.helpers import response, text, write_script  # noqa: E402


def test_mounted_under_a_prefix_with_its_lifespan_it_runs_sessions_and_every_viewer_link_keeps_the_prefix(
        sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("answered under a prefix"))])
    chronicle_app = Chronicle(sqlite_url).http_app(workspace=workspace)
    host = FastAPI(lifespan=lambda _: chronicle_app.router.lifespan_context(chronicle_app))

    @host.get("/")
    def home() -> dict[str, str]:
        return {"app": "the program's own"}

    host.mount("/agent", chronicle_app)
    with TestClient(host) as client:
        assert client.get("/").json() == {"app": "the program's own"}
        made = client.post("/agent/sessions", json={"prompt": "hello", "provider": f"scripted:{script}"})
        assert made.status_code == 201, made.text
        sid = made.json()["session_id"]
        deadline = time.monotonic() + 60
        while (row := client.get("/agent/sessions").json()[0])["turns"] != 1 or row["status"] != "idle":  # the worker ran it
            assert time.monotonic() < deadline, "the mounted app's worker never ran the session"
            time.sleep(0.1)
        assert "answered under a prefix" in str(client.get(f"/agent/sessions/{sid}/history").json())

        listing = client.get("/agent/ui/sessions").text
        page = client.get(f"/agent/ui/sessions/{sid}").text
        for html in (listing, page):
            links = re.findall(r'href="(/[^"]*)"', html)
            assert links and all(link.startswith("/agent/") for link in links), links
        assert f'href="/agent/ui/sessions/{sid}"' in listing
        assert 'const root = "/agent";' in page  # the actions' fetch and the live stream are built on it
        assert "fetch(`${root}/sessions/" in page  # (and the live stream's EventSource, on a page of a running turn)
        assert client.get("/agent/healthz").json()["worker"]["running"] is True


def test_mounted_without_its_lifespan_every_route_says_so_instead_of_queueing_for_no_worker(sqlite_url, workspace):
    host = FastAPI()
    host.mount("/agent", Chronicle(sqlite_url).http_app(workspace=workspace))
    with TestClient(host) as client:
        for answer in (client.post("/agent/sessions", json={"prompt": "hello", "provider": "scripted:/nowhere.json"}),
                       client.get("/agent/sessions"), client.get("/agent/healthz")):
            assert answer.status_code == 503
            assert answer.json()["code"] == 1 and "lifespan never ran" in answer.json()["error"]
            assert "lifespan_context" in answer.json()["error"]
    with Chronicle(sqlite_url) as app:  # nothing was recorded
        assert app.sessions() == []
