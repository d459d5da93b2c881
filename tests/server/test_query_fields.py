"""Query parameters the CLI's flags and the library take, which the HTTP routes did not read: FastAPI drops an unknown
query parameter without a word, so `?all=true` listed no archived session and `?since=` filtered nothing. A real
server, both backends."""

from __future__ import annotations

import httpx

from chronicle import Chronicle
from tests.helpers import response, text, tool_use, write_script
from tests.server.serving import serving, sse


def test_sessions_all_lists_archived_ones_and_audit_since_filters_by_time(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")),
        response(text("It says hello.")),
    ])
    with serving(db_url, workspace) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "read", "provider": f"scripted:{script}"}).json()["session_id"]
        assert sse(base, f"/sessions/{sid}/events")[-1][1]["status"] == "completed"

        recent = httpx.get(f"{base}/sessions/{sid}/audit", params={"since": "1h"})
        assert recent.status_code == 200 and any(r["kind"] == "tool_call" for r in recent.json())
        assert httpx.get(f"{base}/sessions/{sid}/audit", params={"since": "2999-01-01T00:00Z"}).json() == []
        bad = httpx.get(f"{base}/sessions/{sid}/audit", params={"since": "yesterday-ish"})
        assert bad.status_code == 400 and "--since" in bad.json()["error"]

        with Chronicle(db_url) as app:
            app.archive(sid)
        assert httpx.get(f"{base}/sessions").json() == []
        listed = httpx.get(f"{base}/sessions", params={"all": "true"}).json()
        assert [s["session_id"] for s in listed] == [sid]
