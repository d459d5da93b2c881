"""An event row deleted by hand (a hole in its aggregate's versions) is said as itself everywhere: one line
naming the aggregate and the missing event and pointing to `chronicle verify`, exit 1, from the CLI, the
library (ChronicleError code 1) and the HTTP API (409, not a 500 "internal error"); `doctor` finds the hole
(`missing_event`); and `run --session` records nothing for a session it cannot continue.

It used to be eventsourcing's `OriginatorVersionError: (4, 3)`, an internal error, and `doctor` said
"no problems found"."""

from __future__ import annotations

import json

import pytest

from chronicle import Chronicle, ChronicleError
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.tamper import Tamper


def _two_turns(db_url, workspace, tmp_path) -> str:  # type: ignore[no-untyped-def]
    script = write_script(tmp_path / "s.json", [
        [response(text("First."))],
        [response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")), response(text("It says hello."))],
        [response(text("Third."))],
    ])
    first = cli("run", "one", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    session = str(json_lines(first.stdout)[0]["session_id"])
    second = cli("run", "two", "--session", session, "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert second.returncode == 0, second.stderr
    return session


@pytest.fixture
def cut(db_url, workspace, tmp_path):  # type: ignore[no-untyped-def]
    """A two-turn session with the third event of its second turn (its first model response) deleted."""
    session = _two_turns(db_url, workspace, tmp_path)
    tamper = Tamper(db_url)
    turns = [tamper.event(p)[0] for p in tamper.positions() if tamper.event(p)[2].endswith("Turn.Created")]
    second = turns[1]
    position = next(p for p in tamper.positions() if tamper.event(p)[0] == second and tamper.event(p)[1] == 3)
    tamper.delete(position)
    line = f"turn {second}: event 3 is missing from the store (event 4 follows event 2: a row was deleted)"
    return db_url, session, tamper, second, line


def test_every_reader_names_the_missing_event_and_points_to_verify(cut, workspace, tmp_path):
    db_url, session, _tamper, _turn, line = cut
    for command in (["history", session], ["log", session, "--no-pager"], ["log", session, "--json"], ["why", session],
                    ["replay", session, "--workspace", str(workspace)], ["export", session, "--out", str(tmp_path / "b.json")]):
        shown = cli(*command, db=db_url)
        assert "internal error" not in shown.stderr, (command, shown.stderr)
        assert shown.returncode == 1 and line in shown.stderr and "`chronicle verify`" in shown.stderr, (command, shown.stderr)
        assert len(shown.stderr.strip().splitlines()) == 1, (command, shown.stderr)


def test_the_library_and_the_http_api_say_the_same_line(cut):
    db_url, session, _tamper, _turn, line = cut
    with Chronicle(db_url) as app:
        for call in (app.history, app.log, app.why):
            with pytest.raises(ChronicleError) as raised:
                call(session)
            assert raised.value.code == 1 and line in str(raised.value), call
        pytest.importorskip("fastapi")
        from fastapi.testclient import TestClient

        with TestClient(app.http_app(run_worker=False)) as client:
            for route in ("history", "log", "why"):
                answer = client.get(f"/sessions/{session}/{route}")
                assert answer.status_code == 409, (route, answer.text)
                assert answer.json()["code"] == 1 and line in answer.json()["error"], (route, answer.text)


def test_run_on_the_session_refuses_before_recording_its_input(cut, workspace, tmp_path):
    db_url, session, tamper, _turn, line = cut
    before = tamper.positions()
    script = write_script(tmp_path / "more.json", [response(text("never"))])
    run = cli("run", "three", "--session", session, "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert run.returncode == 1 and line in run.stderr and "internal error" not in run.stderr, run.stderr
    assert tamper.positions() == before  # no input queued that the session cannot run, no lease taken


def test_doctor_reports_the_hole_where_the_log_resumes(cut):
    db_url, _session, tamper, turn, _line = cut
    found = cli("doctor", "--json", db=db_url)
    assert found.returncode == 1, found.stdout + found.stderr
    (finding,) = [f for f in json_lines(found.stdout) if f["check"] == "missing_event"]
    after = next(p for p in tamper.positions() if tamper.event(p)[0] == turn and tamper.event(p)[1] == 4)
    assert (finding["aggregate_id"], finding["version"], finding["position"]) == (str(turn), 3, after), finding
    assert "event 3 is missing" in finding["detail"]
    said = cli("doctor", db=db_url)
    assert said.returncode == 1 and f"missing_event: position {after}: event 3 is missing" in said.stdout, said.stdout
    assert "chronicle verify" in said.stdout


def test_doctor_names_a_deleted_first_event_and_is_quiet_on_an_untouched_store(db_url, workspace, tmp_path):
    session = _two_turns(db_url, workspace, tmp_path)
    assert cli("doctor", db=db_url).returncode == 0
    tamper = Tamper(db_url)
    first = next(p for p in tamper.positions() if tamper.event(p)[2].endswith("Turn.Created"))
    turn = tamper.event(first)[0]
    tamper.delete(first)
    findings = [f for f in json_lines(cli("doctor", "--json", db=db_url).stdout) if f["check"] == "missing_event"]
    assert [(f["aggregate_id"], f["version"]) for f in findings] == [(str(turn), 1)]
    shown = cli("history", session, db=db_url)
    assert shown.returncode == 1 and f"turn {turn}: event 1 is missing from the store (its first event is event 2" in shown.stderr
    assert json.loads(cli("verify", session, "--json", db=db_url).stdout)["broken"]["kind"] == "missing"
