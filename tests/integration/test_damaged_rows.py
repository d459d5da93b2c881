"""Rows damaged by hand, as a user with database access would: every command names the damage or
works around it, none fails with an internal error.

- A state rewritten as SQLite TEXT (valid UTF-8 or not) is an edit, not a crash.
- An event that does not decode is named as itself by `log` (all its forms), like every reader.
- A snapshot that does not decode is a cache miss: the events are loaded, `doctor` names it and
  `doctor --repair` deletes it.
"""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from chronicle.runtime.store import ChronicleStore
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
    """One byte in the middle of the stored (compressed) state replaced, as a hand edit would: by one it is not (an
    'A' written over an 'A' left the event whole now and then, and the readers rightly read it)."""
    state = tamper.event(position)[3]
    tamper.set_state(position, state[:40] + bytes([state[40] ^ 0x5A]) + state[41:])
    assert tamper.event(position)[3] != state


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


# -- 3. a snapshot that does not decode ----------------------------------------------------------

def _snapshots(tamper: Tamper) -> str:
    return "stored_snapshots" if tamper.sqlite else tamper.events.replace("chronicle_events", "chronicle_snapshots")


def test_a_snapshot_that_does_not_decode_is_passed_over_named_by_doctor_and_deleted_by_repair(db_url, workspace, tmp_path):
    session = _session(db_url, workspace, tmp_path)
    store = ChronicleStore(db_url)
    turn_id = store.session(UUID(session)).turns[0]
    store.take_snapshot(turn_id)
    store.take_snapshot(UUID(session))
    before = cli("history", session, "--json", db=db_url)
    assert before.returncode == 0, before.stderr

    tamper = Tamper(db_url)
    table = _snapshots(tamper)
    key = turn_id.hex if tamper.sqlite else turn_id
    tamper.run(f"UPDATE {table} SET state = "
               + ("cast(substr(state, 1, 30) || x'00' || substr(state, 32) AS blob)" if tamper.sqlite
                  else "overlay(state PLACING '\\x00'::bytea FROM 31)")
               + " WHERE originator_id = %s", (key,))
    ((version,),) = tamper.run(f"SELECT originator_version FROM {table} WHERE originator_id = %s", (key,))

    after = cli("history", session, "--json", db=db_url)
    _no_crash(after)
    assert after.returncode == 0, after.stderr
    assert json_lines(after.stdout) == json_lines(before.stdout)
    warnings = [line for line in after.stderr.splitlines() if "snapshot" in line]
    assert len(warnings) == 1 and str(turn_id) in warnings[0] and f"version {version}" in warnings[0], after.stderr
    assert ChronicleStore(db_url).turn(turn_id).final_text == "Wrote a.txt."
    replayed = cli("replay", session, "--workspace", str(workspace), db=db_url)
    _no_crash(replayed)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert tamper.run(f"SELECT COUNT(*) FROM {table} WHERE originator_id = %s", (key,)) == [(1,)]  # a cache: nothing recorded

    found = cli("doctor", "--json", db=db_url)
    assert found.returncode == 1, found.stdout + found.stderr
    (finding,) = json_lines(found.stdout)
    assert (finding["check"], finding["aggregate_id"], finding["version"], finding["repaired"]) == (
        "unreadable_snapshot", str(turn_id), version, False)
    shown = cli("doctor", db=db_url)
    assert f"unreadable_snapshot: snapshot of {turn_id} at version {version}" in shown.stdout, shown.stdout

    mended = cli("doctor", "--repair", "--json", db=db_url)
    assert mended.returncode == 0, mended.stdout + mended.stderr
    assert [f["repaired"] for f in json_lines(mended.stdout)] == [True]
    assert tamper.run(f"SELECT COUNT(*) FROM {table} WHERE originator_id = %s", (key,)) == [(0,)]
    assert cli("doctor", db=db_url).returncode == 0
    checked = cli("verify", "--json", db=db_url)
    assert checked.returncode == 0 and json.loads(checked.stdout)["snapshots"] == 1, checked.stdout


def test_a_session_with_a_snapshot_that_does_not_decode_runs_its_next_turn(db_url, workspace, tmp_path):
    session = _session(db_url, workspace, tmp_path)
    store = ChronicleStore(db_url)
    store.take_snapshot(UUID(session))
    tamper = Tamper(db_url)
    key = UUID(session).hex if tamper.sqlite else UUID(session)
    tamper.run(f"UPDATE {_snapshots(tamper)} SET state = %s WHERE originator_id = %s", (b"\xff\x00\xff", key))

    script = write_script(tmp_path / "next.json", [response(text("Second answer."))])
    run = cli("run", "again", "--session", session, "--provider", f"scripted:{script}", "--workspace", str(workspace),
              "--json", db=db_url)
    _no_crash(run)
    assert run.returncode == 0, run.stderr
    assert len(ChronicleStore(db_url).session(UUID(session)).head) == 2
