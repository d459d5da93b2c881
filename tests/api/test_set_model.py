"""`Chronicle.set_model`, `run(model=)` on a continued session and `POST /sessions/{id}/model` record the same
Session.ModelChanged as `chronicle model`, check their arguments, and record nothing on bad input (both backends)."""

from __future__ import annotations

import json

import httpx
import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import response, text
from tests.server.serving import serving


def scripted(tmp_path, turns: int = 4) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text(f"answer {i}"))] for i in range(turns)]}}), encoding="utf-8")
    return f"scripted:{path}"


def asked(app: Chronicle, sid: str) -> list[str]:
    return [r["name"] for r in app.audit(session=sid) if r["kind"] == "model_call"]


def test_set_model_and_run_with_a_model_record_a_change_every_later_turn_uses(db_url, workspace, tmp_path):
    agent = Agent(provider=scripted(tmp_path))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "first", workspace=workspace).session_id
        row = app.set_model(sid, "lib-model", thinking_tokens=0, actor="svc")
        assert (row["model"], row["previous"], row["thinking_tokens"], row["changed_by"]) == ("lib-model", "scripted", 0, "svc")
        assert app.model(sid)["model"] == "lib-model"
        assert app.run_sync(agent, "second", session=sid).status == "completed"
        assert app.run_sync(agent, "third", session=sid, model="run-model").status == "completed"
        assert app.run_sync(agent, "fourth", session=sid).status == "completed"
        assert asked(app, sid) == ["scripted", "lib-model", "run-model", "run-model"]
        assert [r["detail"]["actor"] for r in app.audit(session=sid) if r["kind"] == "model_changed"][0] == "svc"
        assert next(s for s in app.sessions() if s["session_id"] == sid)["model"] == "run-model"


@pytest.mark.parametrize("call, code", [
    (lambda app, sid: app.set_model(sid, ""), 2),
    (lambda app, sid: app.set_model(sid, "two words"), 2),
    (lambda app, sid: app.set_model(sid, "m", thinking_tokens=-5), 2),
    (lambda app, sid: app.set_model(sid, "m", thinking_tokens=100), 2),
    (lambda app, sid: app.set_model(sid, None), 2),
])
def test_set_model_refuses_bad_arguments_with_code_2_and_records_nothing(sqlite_url, workspace, tmp_path, call, code):
    with Chronicle(sqlite_url) as app:
        sid = app.run_sync(Agent(provider=scripted(tmp_path)), "first", workspace=workspace).session_id
        before = len(app.log(sid))
        with pytest.raises(ChronicleError) as caught:
            call(app, sid)
        assert caught.value.code == code and "\n" not in str(caught.value)
        assert len(app.log(sid)) == before


def test_the_model_route_records_a_change_with_the_callers_identity_and_checks_its_body(db_url, workspace, tmp_path):
    provider = scripted(tmp_path)
    with serving(db_url, workspace) as base:
        created = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": provider})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        for bad in ({"model": 5}, {"model": ""}, {"model": "m", "thinking_tokens": "2048"}, {"model": "m", "extra": 1}):
            refused = httpx.post(f"{base}/sessions/{sid}/model", json=bad)
            assert refused.status_code == 422, (bad, refused.text)
        assert httpx.post(f"{base}/sessions/{sid}/model", json={"model": "two words"}).status_code == 400
        changed = httpx.post(f"{base}/sessions/{sid}/model", json={"model": "http-model", "thinking_tokens": 2048},
                             headers={"X-Chronicle-Actor": "carol"})
        assert changed.status_code == 200, changed.text
        assert (changed.json()["model"], changed.json()["changed_by"]) == ("http-model", "carol")
        assert httpx.get(f"{base}/sessions/{sid}/model").json()["thinking_tokens"] == 2048
        assert httpx.post(f"{base}/sessions/no-such/model", json={"model": "m"}).status_code == 404


def test_a_change_while_a_turn_waits_for_approval_applies_from_the_next_turn(db_url, workspace, tmp_path):
    from tests.helpers import tool_use

    path = tmp_path / "b.json"
    path.write_text(json.dumps({"agents": {"main": [
        [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ran it"))],
        [response(text("next"))],
    ]}}), encoding="utf-8")
    agent = Agent(provider=f"scripted:{path}")
    with Chronicle(db_url) as app:
        paused = app.run_sync(agent, "run it", workspace=workspace)
        assert paused.status == "awaiting_approval"
        row = app.set_model(paused.session_id, "later-model")
        assert (row["applies_from"], row["running_turn_id"]) == ("next_turn", paused.turn_id)
        app.approve(paused.session_id)
        assert app.resume(paused.session_id).status == "completed"  # the paused turn goes on with its own model
        assert app.run_sync(agent, "again", session=paused.session_id).status == "completed"
        assert asked(app, paused.session_id) == ["scripted", "scripted", "later-model"]
        assert "identical" in app.replay(paused.session_id)["verdict"]


def test_a_new_session_refuses_a_model_name_a_change_refuses_over_http_the_cli_and_the_library(sqlite_url, workspace, tmp_path):
    """`POST /sessions {"model": "m\\u0000"}` (or "<img src=x>") was a 201, and `run --model $'m\\x01'` recorded it,
    while `POST /sessions/{id}/model` refused the same name: a new session's model is now checked as a change is."""
    from tests.helpers import cli

    provider = scripted(tmp_path)
    bad_names = ("m\u0000", "<img src=x>", "m\x01", "two words")
    with serving(sqlite_url, workspace, extra=("--no-worker",)) as base:
        for name in bad_names:
            refused = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": provider, "model": name})
            assert refused.status_code == 400, (name, refused.text)
            assert refused.json()["error"].startswith("not a model name: ") and refused.json()["code"] == 2, refused.text
            changed = httpx.post(f"{base}/sessions/no-such/model", json={"model": name})
            assert changed.status_code in (400, 404)
        assert httpx.get(f"{base}/sessions").json() == [], "nothing was recorded"
        kept = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": provider, "model": " org/model@rev "})
        assert kept.status_code == 201, kept.text
        assert httpx.get(f"{base}/sessions/{kept.json()['session_id']}/model").json()["model"] == "org/model@rev"
    refused_cli = cli("run", "hi", "--provider", provider, "--model", "m\x01", "--workspace", str(workspace), db=sqlite_url)
    assert refused_cli.returncode == 2 and "not a model name: 'm\\x01'" in refused_cli.stderr, refused_cli.stderr
    with Chronicle(sqlite_url) as app:
        with pytest.raises(ChronicleError) as caught:
            app.run_sync(Agent(provider=provider, model="<img src=x>"), "hi", workspace=workspace)
        assert caught.value.code == 2 and str(caught.value).startswith("not a model name: '<img src=x>'")
        assert [s["session_id"] for s in app.sessions()] == [kept.json()["session_id"]]
