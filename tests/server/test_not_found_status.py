"""The server answers 404 when the use case says what was asked for does not exist (AppError.kind), not when an
error's words happen to contain "no session": on both backends, every other refusal keeps its status."""

from __future__ import annotations

import json
import uuid

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import response, text, tool_use

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

#: What a body-less POST sends (runtime/server/cross_site.py): no body is every field's default.
JSON = {"Content-Type": "application/json"}


def scripted(tmp_path, turns):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture
def paused(db_url, workspace, tmp_path):
    """A session waiting for the approval of one bash call."""
    agent = Agent(provider=scripted(tmp_path, [[response(tool_use("tu_1", "bash", command="echo hi")), response(text("done"))]]))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "run it", workspace=workspace)
        assert result.status == "awaiting_approval"
        yield app, result.session_id


def test_a_session_call_or_pending_approval_that_does_not_exist_is_404(paused):
    app, sid = paused
    nobody = str(uuid.uuid4())
    with TestClient(app.http_app(run_worker=False)) as client:
        for answer in (client.get(f"/sessions/{nobody}/history"), client.get("/sessions/ffffffff/why"),
                       client.get(f"/sessions/{nobody}/model"), client.post(f"/sessions/{nobody}/steer", json={"message": "hi"}),
                       client.post(f"/sessions/{nobody}/undo", headers=JSON), client.post(f"/sessions/{nobody}/approve", headers=JSON),
                       client.post(f"/sessions/{nobody}/inputs", json={"prompt": "hi"})):
            assert answer.status_code == 404, (answer.request.url, answer.text)
            assert answer.json()["code"] == 2  # the exit code the CLI gives an unknown id, unchanged
        call = client.get(f"/sessions/{sid}/why", params={"call": "tu_9"})
        assert call.status_code == 404 and "no tool call 'tu_9'" in call.json()["error"]
        approval = client.post(f"/sessions/{sid}/approve", json={"tool_call": "tu_9"})
        assert approval.status_code == 404 and approval.json()["code"] == 1
        assert client.post(f"/sessions/{sid}/approve", headers=JSON).status_code == 200
        nothing_pending = client.post(f"/sessions/{sid}/deny", headers=JSON)
        assert nothing_pending.status_code == 404 and "no tool call awaiting approval" in nothing_pending.json()["error"]


def test_other_refusals_keep_their_status_whatever_their_words(paused):
    app, sid = paused
    with TestClient(app.http_app(run_worker=False)) as client:
        # Each of these quotes the caller's words back; "no session" / "matches no" in them made a 404 before.
        model = client.post(f"/sessions/{sid}/model", json={"model": "no session"})
        assert (model.status_code, model.json()["code"]) == (400, 2), model.text
        steer = client.post(f"/sessions/{sid}/steer", json={"message": "go", "turn_id": "matches no"})
        assert (steer.status_code, steer.json()["code"]) == (400, 2), steer.text
        # A turn number out of range stays the bad parameter it was (docs/server.md: 400).
        assert client.get(f"/sessions/{sid}/why", params={"turn": 9}).status_code == 400
        assert client.get(f"/sessions/{sid}/history", params={"at": 9}).status_code == 400
        # A state that forbids the request stays 409.
        steered = client.post(f"/sessions/{sid}/steer", json={"message": "go", "turn_id": str(uuid.uuid4())})
        assert (steered.status_code, steered.json()["code"]) == (409, 1), steered.text


def test_the_library_says_not_found_on_the_error_as_the_server_reads_it(paused):
    app, sid = paused
    with pytest.raises(ChronicleError) as unknown:
        app.history(str(uuid.uuid4()))
    assert unknown.value.code == 2 and unknown.value.not_found
    with pytest.raises(ChronicleError) as no_call:
        app.why(sid, "tu_9")
    assert no_call.value.code == 2 and no_call.value.not_found  # CALL names nothing: an argument, as a session id
    with pytest.raises(ChronicleError) as bad_model:
        app.set_model(sid, "no session")
    assert bad_model.value.code == 2 and not bad_model.value.not_found
