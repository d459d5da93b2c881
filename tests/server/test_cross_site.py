"""A web page the user visits cannot use the server behind their back (runtime/server/cross_site.py): a real
`chronicle serve` on loopback without a token, sent what a browser sends for another site's page.

Each request here is one a page of any site could make without asking the server first: `fetch(url, {method:
"POST", mode: "no-cors"})` with no body, a text/plain string, a Blob (no Content-Type at all, which FastAPI parses as
JSON), a form; or any request of a page whose name was pointed at 127.0.0.1 (DNS rebinding). Before, each of them
approved the pending bash call, or started a session with the page's prompt."""

from __future__ import annotations

import httpx

from tests.helpers import cli, response, text, tool_use, write_script
from tests.recovery import wait_for
from tests.server.serving import serving


def _decided(base: str, sid: str) -> list[str]:
    return [e["event"] for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] in ("Approved", "Denied")]


def test_a_request_another_sites_page_could_send_unasked_is_refused_and_changes_nothing(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_b", "bash", command="echo pwned > out.txt")),
                                                 response(text("Done."))])
    with serving(sqlite_url, workspace) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "run it", "provider": f"scripted:{script}"}).json()["session_id"]
        wait_for(lambda: any(e["event"] == "ApprovalRequested" for e in httpx.get(f"{base}/sessions/{sid}/log").json()), timeout=60)
        evil = {"Origin": "http://evil.example"}
        simple = [  # (what a page's fetch or form sends, Origin left out: the Content-Type rule alone must refuse it)
            {},
            {"headers": {"Content-Type": "text/plain;charset=UTF-8"}, "content": b"{}"},
            {"headers": {"Content-Type": "application/x-www-form-urlencoded"}, "content": b"always=true"},
            {"headers": {"Content-Type": "multipart/form-data; boundary=x"}, "content": b"--x--\r\n"},
            {"headers": {"Content-Type": "text/plain; application/json"}, "content": b"{}"},
        ]
        for request in simple:
            for origin in ({}, evil):
                refused = httpx.post(f"{base}/sessions/{sid[:2]}/approve", **{**request, "headers": {**request.get("headers", {}), **origin}})
                assert refused.status_code in (403, 415) and refused.json()["code"] == 2, (request, refused.text)
                if not origin:
                    assert refused.status_code == 415 and "Content-Type: application/json" in refused.json()["error"], refused.text
        blob = httpx.post(f"{base}/sessions", content=b'{"prompt": "rm -rf ~", "provider": "scripted:x"}')  # a Blob: no type
        assert blob.status_code == 415, blob.text
        for path in ("undo", "redo", "fork", "cancel", "compact", "deny"):
            assert httpx.post(f"{base}/sessions/{sid}/{path}").status_code == 415, path
        for origin in ("http://evil.example", "null", f"{base}.evil.example", "http://127.0.0.1", "http://[::1"):
            refused = httpx.post(f"{base}/sessions/{sid}/approve", json={}, headers={"Origin": origin})
            assert refused.status_code == 403 and refused.json()["error"].startswith(f"Origin: {origin} is not"), refused.text
        port = base.rsplit(":", 1)[1]
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.nip.io:{port}", f"localhost.evil.example:{port}"):
            rebound = httpx.get(f"{base}/sessions", headers={"Host": host})
            assert rebound.status_code == 403 and rebound.json() == {"error": rebound.json()["error"], "code": 2}, host
            assert rebound.json()["error"].startswith(f"Host: {host} is not a name of this machine"), rebound.text
            assert sid not in rebound.text
            assert httpx.post(f"{base}/sessions/{sid}/approve", json={}, headers={"Host": host}).status_code == 403
        assert _decided(base, sid) == [], "nothing was approved"
        assert [s["session_id"] for s in httpx.get(f"{base}/sessions").json()] == [sid], "no session was started"

        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST", f"viewer.localhost:{port}", f"[::1]:{port}"):
            assert httpx.get(f"{base}/sessions", headers={"Host": host}).status_code == 200, host
        # What the viewer sends (its own origin, and its header), and what a program sends: both are let through.
        approved = httpx.post(f"{base}/sessions/{sid}/approve", headers={"X-Chronicle-Viewer": "1", "Origin": base})
        assert approved.status_code == 200, approved.text
        assert _decided(base, sid) == ["Approved"]
        wait_for(lambda: httpx.get(f"{base}/sessions").json()[0]["status"] == "idle", timeout=60)
        assert (workspace / "out.txt").exists()
        fork = httpx.post(f"{base}/sessions/{sid}/fork", headers={"Content-Type": "application/json"})
        assert fork.status_code == 200, "an empty body with the JSON type is the defaults, as documented"


def test_a_proxys_public_name_is_allowed_by_the_operator_and_nothing_else(sqlite_url, workspace, tmp_path):
    """A reverse proxy on the same machine passes its public name as Host (Caddy does), or its own upstream's and
    the page's Origin (nginx's default): CHRONICLE_SERVER_ALLOWED_HOSTS names it, and only it is let through."""
    env = {"CHRONICLE_SERVER_ALLOWED_HOSTS": "Chronicle.Example.com, ops.example.net"}
    with serving(sqlite_url, workspace, extra=("--no-worker",), env_extra=env) as base:
        assert httpx.get(f"{base}/sessions", headers={"Host": "chronicle.example.com"}).status_code == 200
        assert httpx.get(f"{base}/sessions", headers={"Host": "chronicle.example.com.evil.example"}).status_code == 403
        for origin in ("https://chronicle.example.com", "https://ops.example.net:8443"):
            created = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": "scripted:none"}, headers={"Origin": origin})
            assert created.status_code != 403, created.text
        assert httpx.post(f"{base}/sessions", json={"prompt": "hi"}, headers={"Origin": "https://example.com"}).status_code == 403
    refused = cli("serve", "--port", "0", "--workspace", str(workspace), db=sqlite_url,
                  env={"CHRONICLE_SERVER_ALLOWED_HOSTS": "https://chronicle.example.com"})
    assert refused.returncode == 2 and "CHRONICLE_SERVER_ALLOWED_HOSTS" in refused.stderr, refused.stderr
