"""Every public argument that takes a list refuses a lone string (or path, or bytes) — which Python would iterate
as characters — with ChronicleError 2 naming the argument, and records nothing, on both backends."""

from __future__ import annotations

import asyncio
import json

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import response, text


def scripted(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text("first"))], [response(text("never"))]]}}), encoding="utf-8")
    return f"scripted:{path}"


async def streamed(app, agent, workspace, attachments):
    return [event async for event in app.stream(agent, "look", workspace=workspace, attachments=attachments)]


@pytest.mark.parametrize("call, argument", [
    (lambda app, agent, ws, sid: app.run_sync(agent, "look", workspace=ws, attachments=str(ws / "a.txt")), "attachments"),
    (lambda app, agent, ws, sid: app.run_sync(agent, "look", session=sid, attachments=ws / "a.txt"), "attachments"),
    (lambda app, agent, ws, sid: app.run_sync(agent, "look", workspace=ws, attachments=b"%PDF-1.4"), "attachments"),
    (lambda app, agent, ws, sid: asyncio.run(streamed(app, agent, ws, str(ws / "a.txt"))), "attachments"),
    (lambda app, agent, ws, sid: app.submit(agent, "later", workspace=ws, attachments=str(ws / "a.txt")), "attachments"),
    (lambda app, agent, ws, sid: app.submit(agent, "later", session=sid, attachments=str(ws / "a.txt")), "attachments"),
    (lambda app, agent, ws, sid: app.routines(workspace=ws, routines="nightly"), "routines"),
    (lambda app, agent, ws, sid: app.tick_routines(workspace=ws, routines="nightly"), "routines"),
])
def test_a_lone_string_where_a_list_belongs_is_a_chronicle_error_2_naming_it(db_url, workspace, tmp_path, call, argument):
    (workspace / "a.txt").write_text("hello", encoding="utf-8")
    agent = Agent(tools=[], provider=scripted(tmp_path))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "start", workspace=workspace).session_id
        before = (app.sessions(), app.log(sid))
        with pytest.raises(ChronicleError) as refused:
            call(app, agent, workspace, sid)
        assert refused.value.code == 2 and argument in str(refused.value)
        assert (app.sessions(), app.log(sid)) == before  # nothing recorded


@pytest.mark.parametrize("field, value", [("tools", "read_file"), ("agents", "helper"), ("mcp_servers", "files"),
                                          ("guardrails", "check"), ("middleware", "timing"), ("hooks", "audit")])
def test_an_agent_field_taking_a_list_refuses_a_lone_string(field, value):
    with pytest.raises(ChronicleError) as refused:
        Agent(**{field: value})
    assert refused.value.code == 2 and f"{field} takes a list" in str(refused.value)
