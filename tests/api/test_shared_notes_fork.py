"""A fork starts with the shared notes of its parent's tree as they stood at the turn it was forked at (seed 004):
the turns its model reads speak of those notes. Recorded as `NoteBoard.Inherited` in the fork's own save; the two
boards go their own ways after. `notes --at TURN` (CLI, library, HTTP) shows the notes at a turn, counted as
`history --at` counts. Both backends, through the CLI and the scripted provider, as tests/api/test_shared_notes.py."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path
from uuid import UUID

import pytest
from eventsourcing.persistence import IntegrityError

from chronicle import Agent, Chronicle, ChronicleError
from chronicle.domain.ids import notes_board_id
from chronicle.domain.notes import NoteBoard
from chronicle.runtime import timetravel
from chronicle.runtime.notes import read_board
from chronicle.runtime.store import ChronicleStore, ForgottenSession, NotFound
from tests.api.test_shared_notes import REGISTRY, use
from tests.helpers import cli, json_lines, pg_statements, response, sqlite_statements, text, write_script

#: Turn 1 writes the plan, turn 2 delegates to a researcher who writes findings, turn 3 rewrites the plan and adds a
#: note, turn 4 deletes the findings. A fork's own turns are numbered after the turns it inherits (docs/providers.md).
MAIN = [
    [response(use("w1", "write_note", name="plan", text="plan v1")), response(text("t1"))],
    [response(use("d2", "delegate", tasks=[{"agent": "researcher", "task": "look it up"}])), response(text("t2"))],
    [response(use("w3", "write_note", name="plan", text="plan v2"), use("l3", "write_note", name="late", text="after")),
     response(text("t3"))],
    [response(use("x4", "delete_note", name="findings")), response(text("t4"))],
]
RESEARCHER = [response(use("rw", "write_note", name="findings", text="the API is v2")), response(text("found"))]


def _session(db_url: str, workspace: Path, tmp_path: Path, turns: int, env: dict[str, str] | None = None) -> str:
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "s.json", MAIN, researcher=RESEARCHER)
    sid = None
    for n in range(turns):
        args = ("--session", sid) if sid else ("--provider", f"scripted:{script}", "--workspace", str(workspace))
        done = cli("run", f"turn {n + 1}", *args, "--json", db=db_url, env=env)
        assert done.returncode == 0, done.stderr
        sid = sid or json_lines(done.stdout)[0]["session_id"]
    assert sid is not None
    return sid


def _notes(db_url: str, sid: str, *at: str, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    done = cli("notes", sid, *at, "--json", db=db_url, env=env)
    assert done.returncode == 0, done.stderr
    return [(row["name"], row["text"]) for row in json_lines(done.stdout)]


def _fork(db_url: str, sid: str, at: int, env: dict[str, str] | None = None) -> str:
    done = cli("fork", sid, "--at", str(at), db=db_url, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _board_events(db_url: str, session_id: str) -> list[object]:
    store = ChronicleStore(db_url)
    try:
        return list(store.events.get(notes_board_id(UUID(session_id))))
    finally:
        store.close()


def test_a_fork_starts_with_the_notes_of_its_turn_and_the_boards_go_their_own_ways(db_url, workspace, tmp_path):
    sid = _session(db_url, workspace, tmp_path, turns=3)
    parent_before = _notes(db_url, sid)
    assert parent_before == [("findings", "the API is v2"), ("late", "after"), ("plan", "plan v2")]
    fork = _fork(db_url, sid, 2)
    # The notes as turn 2 ended: turn 1's plan, and the findings the researcher wrote inside turn 2's delegate call;
    # not turn 3's rewrite of the plan nor its new note.
    assert _notes(db_url, fork) == [("findings", "the API is v2"), ("plan", "plan v1")]
    rows = {r["name"]: r for r in json_lines(cli("notes", fork, "--json", db=db_url).stdout)}
    parent_rows = {r["name"]: r for r in json_lines(cli("notes", sid, "--at", "2", "--json", db=db_url).stdout)}
    assert rows == parent_rows  # each note kept as written: the writer (the sub-agent for the findings) and its time
    assert rows["findings"]["session_id"] not in (sid, fork) and rows["plan"]["session_id"] == sid
    events = _board_events(db_url, fork)
    assert [type(e).__qualname__ for e in events] == ["NoteBoard.Opened", "NoteBoard.Inherited"]
    inherited = events[1]
    assert inherited.from_session_id == UUID(sid) and inherited.turn == 2  # type: ignore[attr-defined]
    assert _notes(db_url, sid) == parent_before  # the parent's board only read

    # Later writes do not cross: the fork's turn (its own first, numbered 3: the script's third) writes on its board
    # only, and the parent's next turn deletes on its own only.
    done = cli("run", "on the fork", "--session", fork, "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    forked = {r["name"]: r for r in json_lines(cli("notes", fork, "--json", db=db_url).stdout)}
    assert [(n, r["text"]) for n, r in sorted(forked.items())] == [("findings", "the API is v2"), ("late", "after"),
                                                                   ("plan", "plan v2")]
    assert forked["plan"]["session_id"] == fork
    assert json_lines(cli("notes", sid, "--json", db=db_url).stdout) == json_lines(
        cli("notes", sid, "--at", "3", "--json", db=db_url).stdout)  # nothing the fork wrote
    done = cli("run", "turn 4", "--session", sid, "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert _notes(db_url, sid) == [("late", "after"), ("plan", "plan v2")]
    assert "findings" in forked and _notes(db_url, fork)[0] == ("findings", "the API is v2")

    # The log shows the fork's board as the fork's: its start, with what it inherited.
    logged = [(e["event"], e["data"]) for e in json_lines(cli("log", fork, "--json", db=db_url).stdout)
              if e["aggregate"] == "notes"]
    assert logged[0] == ("Opened", {"session_id": fork})
    assert logged[1][0] == "Inherited" and logged[1][1]["from_session_id"] == sid and logged[1][1]["turn"] == 2
    assert [n["name"] for n in logged[1][1]["notes"]] == ["findings", "plan"]
    table = cli("log", fork, "--no-pager", db=db_url, env={"COLUMNS": "250"})
    assert f"2 notes from {sid[:8]} at turn 2: findings, plan" in table.stdout, table.stdout


def test_a_fork_from_the_end_of_the_branch_and_a_fork_of_a_fork_inherit_too(db_url, workspace, tmp_path):
    sid = _session(db_url, workspace, tmp_path, turns=2)
    with Chronicle(db_url) as app:
        at_end = app.fork(sid)  # chat's /fork: from the end of the branch, turn 2
        assert app.notes(at_end) == app.notes(sid, at=2) == app.notes(sid)
        again = app.fork(at_end, at=1)  # an inherited turn of a fork: the notes of the parent's tree then
        assert [n["name"] for n in app.notes(again)] == ["plan"] == [n["name"] for n in app.notes(sid, at=1)]
        # At each turn a fork inherited, the notes are its parent's at that turn
        for number in (1, 2):
            assert app.notes(at_end, at=number) == app.notes(sid, at=number), number


def test_a_fork_is_saved_with_its_notes_or_not_at_all(db_url, workspace, tmp_path, monkeypatch):
    sid = _session(db_url, workspace, tmp_path, turns=1)
    fork_id = UUID("00000000-0000-4000-8000-00000000f0c5")
    monkeypatch.setattr(timetravel, "uuid4", lambda: fork_id)
    store = ChronicleStore(db_url)
    try:
        # Something already holds the fork's board: its save fails, and so must the fork's, as a crash between two
        # saves would leave a fork whose model reads of notes it cannot read.
        taken = NoteBoard(id=notes_board_id(fork_id), session_id=fork_id, timestamp=store.session(UUID(sid)).created_on)
        store.save(taken)
        with pytest.raises(IntegrityError):
            timetravel.fork(store, UUID(sid), 1)
        with pytest.raises(NotFound):
            store.session(fork_id)
        assert fork_id not in store.session_ids()
    finally:
        store.close()


def _statements(db_url: str, run) -> int:  # noqa: ANN001
    """How many SQL statements `run(store)` makes on a store just opened (as a `chronicle fork` command opens one)."""
    if db_url.startswith("sqlite"):
        with sqlite_statements() as seen:
            store = ChronicleStore(db_url)
        try:
            opened = len(seen)
            run(store)
            return len(seen) - opened
        finally:
            store.close()
    store = ChronicleStore(db_url)
    try:
        store.session_ids()  # the pool's first connection made, as the bench's cold store has it before its clock
        return len(pg_statements(lambda: run(store)))
    finally:
        store.close()


def test_a_fork_of_a_tree_without_notes_tools_reads_no_board(db_url, workspace, tmp_path):
    script = tmp_path / "one.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("ok"))]}}), encoding="utf-8")
    plain = Agent(tools=["read_file"], provider=f"scripted:{script}")
    noting = Agent(tools=["read_file", "list_notes", "read_note", "write_note"], provider=f"scripted:{script}")
    with Chronicle(db_url) as app:
        plain_sid = UUID(app.run_sync(plain, "one", workspace=workspace).session_id)
        noting_sid = UUID(app.run_sync(noting, "one", workspace=workspace).session_id)
    forks: dict[UUID, UUID] = {}

    def fork_of(sid: UUID):  # noqa: ANN202
        def run(store: ChronicleStore) -> None:
            forks[sid] = timetravel.fork(store, sid, 1).id
        return run

    # Sessions of one shape: a fork of either makes the same reads, but for the board of a tree that may have notes
    # (read once, and none written: no board for its fork either).
    plain_count = _statements(db_url, fork_of(plain_sid))
    noting_count = _statements(db_url, fork_of(noting_sid))
    assert noting_count == plain_count + 1, (plain_count, noting_count)
    assert _board_events(db_url, str(forks[plain_sid])) == [] == _board_events(db_url, str(forks[noting_sid]))


def test_notes_at_a_turn_on_the_cli_the_library_and_http_and_a_bad_turn_as_history_refuses_it(db_url, workspace, tmp_path):
    import httpx

    from tests.server.serving import serving

    sid = _session(db_url, workspace, tmp_path, turns=3)
    assert _notes(db_url, sid, "--at", "1") == [("plan", "plan v1")]
    assert _notes(db_url, sid, "--at", "2") == [("findings", "the API is v2"), ("plan", "plan v1")]
    assert _notes(db_url, sid, "--at", "3") == _notes(db_url, sid)
    at_two = json_lines(cli("notes", sid, "--at", "2", "--json", db=db_url).stdout)
    assert set(at_two[0]) == {"name", "text", "session_id", "tool_call_id", "written_at"}  # the shape without --at
    # A fork's inherited turns, then its own, numbered as history --at numbers them
    fork = _fork(db_url, sid, 2)
    assert _notes(db_url, fork, "--at", "1") == [("plan", "plan v1")]
    assert _notes(db_url, fork, "--at", "2") == _notes(db_url, sid, "--at", "2")
    for bad, code in (("0", 2), ("4", 2)):
        notes, history = cli("notes", sid, "--at", bad, db=db_url), cli("history", sid, "--at", bad, db=db_url)
        assert notes.returncode == history.returncode == code, (bad, notes.stderr, history.stderr)
        if bad == "4":
            assert notes.stderr.strip() == history.stderr.strip() == f"error: session {sid} has 3 turn(s); TURN must be 1..3"
    with Chronicle(db_url) as app:
        assert app.notes(sid, at=2) == at_two
        assert app.notes(sid[:8], at=1) == json_lines(cli("notes", sid, "--at", "1", "--json", db=db_url).stdout)
        for bad in (0, 4):
            with pytest.raises(ChronicleError) as refused:
                app.notes(sid, at=bad)
            assert refused.value.code == 2
    with serving(db_url, workspace) as base:
        assert httpx.get(f"{base}/sessions/{sid}/notes", params={"at": 2}).json() == at_two
        assert httpx.get(f"{base}/sessions/{sid}/notes").json() == json_lines(cli("notes", sid, "--json", db=db_url).stdout)
        for bad in ("0", "4"):
            answer = httpx.get(f"{base}/sessions/{sid}/notes", params={"at": bad})
            assert answer.status_code == 400 and answer.json()["code"] == 2, answer.text
        assert httpx.get(f"{base}/sessions/{sid}/notes", params={"at": "two"}).status_code == 422
        # the viewer's page as of turn 1 shows the notes as they stood then; as of now, as they are
        then, now = (httpx.get(f"{base}/ui/sessions/{sid}", params=p).text for p in ({"turn": 1}, {}))
        assert "when turn 1 ended" in then and "plan v1" in then and "the API is v2" not in then
        assert "the API is v2" in now and "when turn" not in now


def test_forget_erases_a_fork_s_inherited_notes_with_its_tree(db_url, workspace, tmp_path, monkeypatch):
    key = base64.b64encode(os.urandom(32)).decode()
    env = {"CHRONICLE_CIPHER_KEY": key}
    sid = _session(db_url, workspace, tmp_path, turns=1, env=env)
    fork = _fork(db_url, sid, 1, env=env)
    assert _notes(db_url, fork, env=env) == [("plan", "plan v1")]
    forgot = cli("forget", fork, "--yes", "--json", db=db_url, env=env)
    assert forgot.returncode == 0, forgot.stderr
    assert {sid, fork} <= set(json.loads(forgot.stdout)["session_ids"])
    gone = cli("notes", fork, "--json", db=db_url, env=env)
    assert gone.returncode == 1 and "forgotten" in gone.stderr
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", key)
    store = ChronicleStore(db_url)
    try:
        board = notes_board_id(UUID(fork))
        assert store.recorder.select_events(board)  # its events stay, under the tree's destroyed key
        with pytest.raises(ForgottenSession):
            read_board(store, board)
    finally:
        store.close()


def test_a_fork_s_inherited_notes_are_exported_verified_and_imported(db_url, workspace, tmp_path):
    sid = _session(db_url, workspace, tmp_path, turns=2)
    fork = _fork(db_url, sid, 2)
    verified = cli("verify", fork, "--json", db=db_url)
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True, verified.stdout + verified.stderr
    bundle = tmp_path / "fork.json"
    assert cli("export", fork, "--out", str(bundle), db=db_url).returncode == 0
    board = str(notes_board_id(UUID(fork)))
    carried = [e for e in json.loads(bundle.read_text(encoding="utf-8"))["events"] if e["originator_id"] == board]
    assert [e["topic"].rsplit(".", 1)[-1] for e in carried] == ["Opened", "Inherited"]
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    imported = cli("import", str(bundle), db=elsewhere)
    assert imported.returncode == 0, imported.stderr
    assert _notes(elsewhere, fork) == _notes(db_url, fork) == [("findings", "the API is v2"), ("plan", "plan v1")]
    # Its last inherited turn is answered from its own record; an earlier one ran in a session this store lacks.
    assert _notes(elsewhere, fork, "--at", "2") == _notes(db_url, sid, "--at", "2")
    earlier = cli("notes", fork, "--at", "1", db=elsewhere)
    assert earlier.returncode == 1 and "not in this store" in earlier.stderr, earlier.stderr
    assert json.loads(cli("verify", fork, "--json", db=elsewhere).stdout)["ok"] is True


@pytest.fixture(params=["v1", "v2"])
def old_store(request, db_url, tmp_path) -> str:
    from tests.integration.test_old_stores import FIXTURES, copy_into_postgres

    fixture = FIXTURES / f"{request.param}_store.db"
    if db_url.startswith("sqlite"):
        shutil.copy(fixture, tmp_path / "chronicle.db")
    else:
        copy_into_postgres(fixture, db_url)
    return db_url


def test_an_old_store_still_forks_and_its_forks_have_no_board(old_store):
    listed = json_lines(cli("sessions", "--json", db=old_store).stdout)
    assert listed
    for row in listed:
        sid = row["session_id"]
        done = cli("fork", sid, "--at", "1", "--json", db=old_store)
        assert done.returncode == 0, (sid, done.stderr)
        fork = json.loads(done.stdout)["session_id"]
        assert _notes(old_store, fork) == [] == _notes(old_store, sid, "--at", "1")
        assert _board_events(old_store, fork) == []
