"""`steer(sid, text, turn=None)`, as README documents it.

The method's parameter was named `message`, so `app.steer(sid, text="hi")`, written from README, was refused. It is
`text` now; `message=`, the name programs may have used, is still taken. A `turn` the session never had (a mistyped
id, another session's turn) was refused as one that "has ended (no turn is running)"; it is refused as no such turn.
"""

from __future__ import annotations

import inspect
import json
import re
import uuid
from pathlib import Path

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import response, text

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def scripted(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text("done"))]]}}), encoding="utf-8")
    return f"scripted:{path}"


def test_readme_and_the_signature_name_the_same_parameters():
    documented = re.search(r"`steer\(sid, ([^)]*)\)`", README)
    assert documented is not None
    names = [p.split("=")[0].strip() for p in documented.group(1).split(",")]
    parameters = list(inspect.signature(Chronicle.steer).parameters)
    assert names == ["text", "turn"] and parameters[1:3] == ["session", "text"] and "turn" in parameters


def test_steer_takes_text_by_name_and_its_former_name_too(db_url, workspace, tmp_path):
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[], provider=scripted(tmp_path)), "hi", workspace=workspace).session_id
        assert app.steer(sid, text="by its documented name")["outcome"] == "queued"
        assert app.steer(sid, "by position")["outcome"] == "queued"
        assert app.steer(sid, message="by its former name")["outcome"] == "queued"  # a deprecated overload for type checkers
        inputs = [e["data"]["text"] for e in app.log(sid) if e["event"] == "InputQueued"]
        assert inputs[-3:] == ["by its documented name", "by position", "by its former name"]

        for call, said in ((lambda: app.steer(sid), "steer(): text is required"),
                           (lambda: app.steer(sid, "one", message="two"), "not both")):
            with pytest.raises(ChronicleError) as refused:
                call()
            assert refused.value.code == 2 and said in str(refused.value)
        assert len([e for e in app.log(sid) if e["event"] == "InputQueued"]) == len(inputs)  # nothing recorded


def test_a_turn_the_session_never_had_is_refused_as_no_such_turn(db_url, workspace, tmp_path):
    with Chronicle(db_url) as app:
        done = app.run_sync(Agent(tools=[], provider=scripted(tmp_path)), "hi", workspace=workspace)
        sid, before = done.session_id, len(app.log(done.session_id))
        stranger = uuid.uuid4()
        with pytest.raises(ChronicleError) as refused:
            app.steer(sid, "hi", turn=stranger)
        assert refused.value.code == 1
        assert str(refused.value) == f"session {sid} has no turn {stranger}; nothing was steered"
        with pytest.raises(ChronicleError) as ended:  # a turn it had, now over: said so, as before
            app.steer(sid, "too late", turn=done.turn_id)
        assert ended.value.code == 1 and f"turn {done.turn_id} has ended (no turn is running)" in str(ended.value)
        assert len(app.log(sid)) == before
