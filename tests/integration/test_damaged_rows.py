"""Rows damaged by hand, as a user with database access would: every command names the damage or
works around it, none fails with an internal error.

- A state rewritten as SQLite TEXT (valid UTF-8 or not) is an edit, not a crash.
- An event that does not decode is named as itself by `log` (all its forms), like every reader.
"""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.tamper import Tamper


def _session(db_url, workspace, tmp_path) -> str:  # type: ignore[no-untyped-def]
    script = write_script(tmp_path / "s.json", [
        response(text("Writing."), tool_use("tu_1", "write_file", path="a.txt", content="alpha\n")),
        response(text("Wrote a.txt.")),
    ])
    run = cli("run", "write a.txt", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    return str(json_lines(run.stdout)[0]["session_id"])


def _model_response_position(tamper: Tamper) -> tuple[int, UUID, int]:
    """The first Turn.ModelResponded event: position, turn id, version."""
    for position in tamper.positions():
        oid, version, topic, _ = tamper.event(position)
        if topic.endswith("Turn.ModelResponded"):
            return position, oid, version
    raise AssertionError("no model response recorded")


def _no_crash(result) -> None:  # type: ignore[no-untyped-def]
    assert "internal error" not in result.stderr, result.stderr


# -- 1. SQLite TEXT where a BLOB was -------------------------------------------------------------

TEXT_TAMPERS = {
    "json_text": "UPDATE stored_events SET state = '{\"x\":1}' WHERE rowid = ?",
    "invalid_utf8_text": "UPDATE stored_events SET state = substr(state, 1, 40) || x'41' || substr(state, 42) WHERE rowid = ?",
}


@pytest.mark.parametrize("tamper_sql", TEXT_TAMPERS.values(), ids=TEXT_TAMPERS.keys())
def test_a_state_rewritten_as_sqlite_text_is_an_edit_that_verify_doctor_and_readers_name(sqlite_url, workspace, tmp_path, tamper_sql):
    session = _session(sqlite_url, workspace, tmp_path)
    tamper = Tamper(sqlite_url)
    position, turn_id, version = _model_response_position(tamper)
    tamper.run(tamper_sql, (position,))
    assert tamper.run("SELECT typeof(state) FROM stored_events WHERE rowid = ?", (position,)) == [("text",)]

    checked = cli("verify", db=sqlite_url)
    _no_crash(checked)
    assert checked.returncode == 1
    assert checked.stdout.startswith(f"broken at position {position} (Turn {str(turn_id)[:8]} ModelResponded v{version}): edited"), checked.stdout
    one = cli("verify", session, "--json", db=sqlite_url)
    _no_crash(one)
    assert one.returncode == 1 and json.loads(one.stdout)["broken"]["kind"] == "edited"

    found = cli("doctor", "--json", db=sqlite_url)
    _no_crash(found)
    assert found.returncode == 1
    (finding,) = [f for f in json_lines(found.stdout) if f["position"] == position]
    assert finding["check"] in ("unreadable_event", "misfit_event") and finding["aggregate_id"] == str(turn_id)

    for command in (["log", session, "--no-pager"], ["history", session, "--no-pager"]):
        shown = cli(*command, db=sqlite_url)
        _no_crash(shown)
        assert shown.returncode == 1 and f"turn {turn_id}: event {version}" in shown.stderr, (command, shown.stderr)


# -- 2. an event that does not decode, read by `log` and the others ------------------------------

def _damage_event(tamper: Tamper, position: int) -> None:
    """One byte in the middle of the stored (compressed) state replaced, as a hand edit would."""
    tamper.run(f"UPDATE {tamper.events} SET state = "
               + ("cast(substr(state, 1, 40) || x'41' || substr(state, 42) AS blob)" if tamper.sqlite
                  else "overlay(state PLACING '\\x41'::bytea FROM 41)")
               + f" WHERE {tamper.pos} = %s", (position,))


def test_an_event_that_does_not_decode_is_named_as_itself_by_log_and_the_other_readers(db_url, workspace, tmp_path):
    session = _session(db_url, workspace, tmp_path)
    tamper = Tamper(db_url)
    position, turn_id, version = _model_response_position(tamper)
    _damage_event(tamper, position)
    named = f"turn {turn_id}: event {version} (chronicle.domain.turn:Turn.ModelResponded) cannot be decoded"

    for command in (["log", session, "--no-pager"], ["log", session, "--json"], ["log", session, "--tree", "--json"],
                    ["log", session, "--follow", "--json"],
                    ["history", session, "--json"], ["replay", session], ["undo", session],
                    ["export", session, "--out", str(tmp_path / "out.json")]):
        shown = cli(*command, db=db_url)
        _no_crash(shown)
        assert shown.returncode == 1 and named in shown.stderr, (command, shown.stderr)
    for command in (["sessions", "--json"], ["audit", "--json"], ["cost", "--json"], ["cost", session, "--json"],
                    ["audit", "--session", session, "--json"], ["history", session, "--at", "1", "--json"]):
        read = cli(*command, db=db_url)
        _no_crash(read)
        assert read.returncode == 0, (command, read.stderr)
