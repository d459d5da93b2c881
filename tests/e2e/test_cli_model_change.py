"""A session's model is a recorded fact: `chronicle model` and `run --session --model` record a change
(Session.ModelChanged) that every later turn uses, whichever process runs it; replay asks each turn's own
model; bad input records nothing (both backends)."""

from __future__ import annotations

from typing import Any

from tests.helpers import cli, json_lines, response, text, write_script


def _asked(db_url: str, sid: str) -> list[str]:
    """The model each model call of the session asked, in order (the scripted provider answers as asked)."""
    rows = json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
    return [r["name"] for r in rows if r["kind"] == "model_call"]


def _events(db_url: str, sid: str) -> list[dict[str, Any]]:
    return json_lines(cli("log", sid, "--json", db=db_url).stdout)


def _start(db_url: str, workspace: Any, tmp_path: Any, answers: int = 6) -> tuple[str, str]:
    script = write_script(tmp_path / "s.json", [response(text(f"answer {i}")) for i in range(answers)])
    provider = f"scripted:{script}"
    ran = cli("run", "first", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    return json_lines(ran.stdout)[0]["session_id"], provider


def test_a_recorded_model_change_holds_for_run_resume_worker_and_replay_and_is_audited(db_url, workspace, tmp_path):
    sid, _ = _start(db_url, workspace, tmp_path)
    shown = cli("model", sid, "--json", db=db_url)
    assert shown.returncode == 0, shown.stderr
    assert json_lines(shown.stdout)[0]["model"] == "scripted"

    changed = cli("model", sid[:8], "model-two", "--json", db=db_url, env={"CHRONICLE_ACTOR": "alice"})
    assert changed.returncode == 0, changed.stderr
    row = json_lines(changed.stdout)[0]
    assert (row["model"], row["previous"], row["changed"], row["changed_by"], row["applies_from"]) == (
        "model-two", "scripted", True, "alice", "now")

    # A later `run` in another process, without --model, keeps the recorded model.
    assert cli("run", "second", "--session", sid, db=db_url).returncode == 0
    # `run --session --model` records the change and says so on one line.
    third = cli("run", "third", "--session", sid, "--model", "model-three", db=db_url, env={"CHRONICLE_ACTOR": "bob"})
    assert third.returncode == 0, third.stderr
    assert "model-two → model-three (recorded)" in third.stderr
    # CHRONICLE_MODEL picks a new session's model only; it does not move a recorded session.
    assert cli("run", "fourth", "--session", sid, db=db_url, env={"CHRONICLE_MODEL": "from-env"}).returncode == 0
    # A worker and `resume` run queued input on the recorded model too.
    assert cli("submit", "fifth", "--session", sid, db=db_url).returncode == 0
    assert cli("worker", "--once", db=db_url).returncode == 0
    assert cli("submit", "sixth", "--session", sid, db=db_url).returncode == 0
    assert cli("resume", sid, db=db_url).returncode == 0

    assert _asked(db_url, sid) == ["scripted", "model-two", "model-three", "model-three", "model-three", "model-three"]
    changes = [r for r in json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout) if r["kind"] == "model_changed"]
    assert [(r["name"], r["detail"]["previous"], r["detail"]["actor"]) for r in changes] == [
        ("model-two", "scripted", "alice"), ("model-three", "model-two", "bob")]
    listed = {r["session_id"]: r for r in json_lines(cli("sessions", "--json", db=db_url).stdout)}
    assert listed[sid]["model"] == "model-three"
    assert "scripted → model-two by alice" in cli("log", sid, db=db_url).stdout

    replayed = cli("replay", sid, db=db_url)  # each turn asks the model it recorded asking: the fingerprints match
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "identical: 6 turn(s)" in replayed.stdout
    by_model = {r["model"]: r["calls"] for r in json_lines(cli("cost", sid, "--by", "model", "--json", db=db_url).stdout)
                if r["scope"] == "self"}
    assert by_model == {"scripted": 1, "model-two": 1, "model-three": 4}


def test_a_bad_model_name_or_budget_exits_2_and_records_nothing(db_url, workspace, tmp_path):
    sid, _ = _start(db_url, workspace, tmp_path)
    before = len(_events(db_url, sid))
    for args in ((""), ("two words"), ("x", "--thinking", "5"), ("x", "--thinking", "-1")):
        args = (args,) if isinstance(args, str) else args
        refused = cli("model", sid, *args, db=db_url)
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    refused = cli("run", "hello", "--session", sid, "--model", "two words", db=db_url)
    assert refused.returncode == 2 and "not a model name" in refused.stderr
    assert len(_events(db_url, sid)) == before  # no change, and no input either
    assert cli("model", "no-such-session", "m", db=db_url).returncode == 2
    # the same model again is no change: nothing is recorded
    same = cli("model", sid, "scripted", "--json", db=db_url)
    assert same.returncode == 0 and json_lines(same.stdout)[0]["changed"] is False
    assert len(_events(db_url, sid)) == before


def test_a_thinking_budget_is_recorded_and_asked_with_each_model_call(db_url, workspace, tmp_path):
    sid, _ = _start(db_url, workspace, tmp_path)
    changed = cli("model", sid, "--thinking", "2048", "--json", db=db_url)
    assert changed.returncode == 0, changed.stderr
    row = json_lines(changed.stdout)[0]
    assert (row["model"], row["thinking_tokens"]) == ("scripted", 2048)
    assert cli("run", "again", "--session", sid, db=db_url).returncode == 0
    deltas = [e["data"]["request_delta"] for e in _events(db_url, sid) if e["event"] == "ModelResponded"]
    assert [d.get("thinking_tokens") for d in deltas] == [None, 2048]
    # changing the model keeps the recorded budget; 0 turns thinking off
    assert json_lines(cli("model", sid, "m2", "--json", db=db_url).stdout)[0]["thinking_tokens"] == 2048
    assert json_lines(cli("model", sid, "--thinking", "0", "--json", db=db_url).stdout)[0]["thinking_tokens"] == 0
