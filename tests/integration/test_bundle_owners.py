"""An import adds only the sessions its bundle carries, and says where it came from.

A bundle's digests and signature vouch for its events, not for whose they are: a Turn (and its tool calls) of an
unsigned bundle rewritten to name a session the target already holds, with the bundle's own chain redone, was
imported, and the target's `audit --session`, `cost` and `history --at` then read a turn nobody had in that
session, while `verify` and `doctor` passed (runtime/bundle_owners.py). And the import log kept only session ids:
now each import records its provenance, shown by `audit` (runtime/import_log.py). And `sessions`, oldest first, lists
an imported session by when it was created, not when it arrived."""

from __future__ import annotations

import base64
import hashlib
import json
from contextlib import closing
from pathlib import Path
from typing import Any, Callable
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.integration.test_bundle import other_store, rechained
from tests.tamper import Tamper


def recorded(db_url: str, workspace: Path, tmp_path: Path, name: str, *turns: Any) -> str:
    script = write_script(tmp_path / f"{name}.json", list(turns))
    run = cli("run", f"prompt of {name}", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    return str(json_lines(run.stdout)[0]["session_id"])


def reforged(url: str, data: dict[str, Any], edit: Callable[[Any], bool]) -> dict[str, Any]:
    """The bundle with each event passed to `edit` (which changes it in place and says whether it did), every changed
    event's state re-encoded and its source digest blanked, and the bundle's own chain redone: what anyone holding an
    unsigned bundle can write."""
    entries = []
    with closing(ChronicleStore(url)) as store:
        for entry in data["events"]:
            entry = dict(entry)
            event = store.mapper.to_domain_event(StoredEvent(originator_id=UUID(entry["originator_id"]), originator_version=entry["version"],
                                                             topic=entry["topic"], state=base64.b64decode(entry["state"])))
            if edit(event):
                entry["state"] = base64.b64encode(store.mapper.to_stored_event(event).state).decode()
                entry["log_digest"] = None
            entries.append(entry)
    return rechained(data, entries)


@pytest.mark.parametrize("listed", ["as the bundle's own", "as inherited"])
def test_a_bundle_that_moves_a_turn_into_a_session_the_target_holds_is_refused(db_url, workspace, tmp_path, request, listed):
    """The reviewer's attack: P's unsigned bundle, its turn and tool call rewritten to name fork F of the target, the input
    changed, the bundle chain redone. Listing the turn among a fork's inherited ones does not help: F is here."""
    from chronicle.domain.tool_call import ToolCall
    from chronicle.domain.turn import Turn

    session = recorded(db_url, workspace, tmp_path, "P", response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")),
                       response(text("It says hello.")))
    path = tmp_path / "p.json"
    assert cli("export", session, "--out", str(path), db=db_url).returncode == 0
    target = other_store(db_url, tmp_path, request, "target")
    here = recorded(target, workspace, tmp_path, "T", response(text("An answer of the target's own.")))
    fork = cli("fork", here, "--at", "1", db=target).stdout.strip()
    views = (("audit", "--session", fork, "--json"), ("cost", fork, "--json"), ("history", fork, "--json"))
    before = {args: cli(*args, db=target).stdout for args in views}
    events_before = len(Tamper(target).positions())

    moved: list[str] = []

    def into_fork(event: Any) -> bool:
        if isinstance(event, (Turn.Created, ToolCall.Requested)):
            object.__setattr__(event, "session_id", UUID(fork))
            moved.append(str(event.originator_id))
            if isinstance(event, Turn.Created):
                object.__setattr__(event, "input_text", "A QUESTION NOBODY ASKED")
            return True
        return False

    forged = reforged(db_url, json.loads(path.read_text()), into_fork)
    assert len(moved) == 2  # the turn and its tool call
    if listed == "as inherited":
        forged["manifest"] = {**forged["manifest"], "inherited": moved, "inherited_from": [fork]}
    path.write_text(json.dumps(forged))

    result = cli("import", str(path), db=target)
    line = result.stderr.strip()
    assert result.returncode == 1 and len(line.splitlines()) == 1, result.stdout + result.stderr
    assert f"belongs to session {fork}, which this store holds" in line and "nothing recorded" in line, line
    assert len(Tamper(target).positions()) == events_before
    assert {args: cli(*args, db=target).stdout for args in views} == before
    assert "A QUESTION NOBODY ASKED" not in cli("audit", "--json", db=target).stdout


def test_a_bundle_listing_a_session_it_does_not_carry_cannot_claim_its_turns(sqlite_url, workspace, tmp_path):
    """Naming the target's session in the manifest's `sessions` (with none of its events) does not make it the bundle's."""
    from chronicle.domain.turn import Turn

    session = recorded(sqlite_url, workspace, tmp_path, "P", response(text("Hello.")))
    path = tmp_path / "p.json"
    assert cli("export", session, "--out", str(path), db=sqlite_url).returncode == 0
    target = f"sqlite:///{tmp_path / 'target.db'}"
    victim = recorded(target, workspace, tmp_path, "V", response(text("The target's own.")))

    def into_victim(event: Any) -> bool:
        if isinstance(event, Turn.Created):
            object.__setattr__(event, "session_id", UUID(victim))
            return True
        return False

    forged = reforged(sqlite_url, json.loads(path.read_text()), into_victim)
    forged["manifest"] = {**forged["manifest"], "sessions": [session, victim]}
    path.write_text(json.dumps(forged))
    result = cli("import", str(path), db=target)
    assert result.returncode == 1 and f"lists session {victim}, whose events the bundle does not carry" in result.stderr, result.stderr


def test_an_import_records_and_audit_shows_where_the_bundle_came_from(db_url, workspace, tmp_path, request):
    session = recorded(db_url, workspace, tmp_path, "P", response(text("Hello.")))
    assert cli("keygen", str(tmp_path / "key.pem")).returncode == 0
    signed, unsigned = tmp_path / "signed.json", tmp_path / "unsigned.json"
    assert cli("export", session, "--out", str(signed), "--sign", str(tmp_path / "key.pem"), db=db_url).returncode == 0
    other = recorded(db_url, workspace, tmp_path, "Q", response(text("Hi.")))
    assert cli("export", other, "--out", str(unsigned), db=db_url).returncode == 0
    target = other_store(db_url, tmp_path, request, "target")
    who = {"CHRONICLE_ACTOR": "auditor@example"}
    done = cli("import", str(signed), "--key", str(tmp_path / "key.pem.pub"), "--json", db=target, env=who)
    assert done.returncode == 0, done.stderr
    assert cli("import", str(unsigned), db=target, env=who).returncode == 0
    manifest = json.loads(signed.read_text())["manifest"]
    public = json.loads(signed.read_text())["signature"]["public_key"]
    want = {"signed_by": public, "key_required": True, "bundle_head": manifest["head"], "source_head": manifest["source"]["head"],
            "exported_at": manifest["exported_at"], "bundle_sha256": hashlib.sha256(signed.read_bytes()).hexdigest(),
            "actor": "auditor@example"}
    assert json.loads(done.stdout)["provenance"] == want

    rows = [r for r in json_lines(cli("audit", "--json", db=target).stdout) if r["kind"] == "import"]
    assert [r["session_id"] for r in rows] == [session, other]
    assert rows[0]["detail"] == {"session_ids": [session], **want}
    assert rows[1]["detail"]["signed_by"] is None and rows[1]["detail"]["key_required"] is False
    assert [r["kind"] for r in json_lines(cli("audit", "--session", session, "--json", db=target).stdout)][-1] == "import"
    table = cli("audit", "--session", other, db=target, env={"COLUMNS": "400"}).stdout
    assert "unsigned" in table and "auditor@example" in table, table


def test_an_import_logged_before_provenance_was_kept_still_reads(sqlite_url, workspace, tmp_path):
    """A SessionsImported entry of class version 1 (no provenance), as older code wrote it: audit shows its row."""
    from chronicle.runtime.import_log import import_log

    session = recorded(sqlite_url, workspace, tmp_path, "P", response(text("Hello.")))
    with closing(ChronicleStore(sqlite_url)) as store:
        entry = import_log(store).trigger_event(session_ids=[UUID(session)], unanswered_turns=[], provenance=None)
        stored = store.mapper.to_stored_event(entry)
        mapper = store.mapper
        state = mapper.transcoder.decode(mapper.compressor.decompress(stored.state) if mapper.compressor else stored.state)
        assert state.pop("class_version") == 2 and state.pop("provenance") is None
        encoded = mapper.transcoder.encode(state)
        old = StoredEvent(originator_id=stored.originator_id, originator_version=stored.originator_version, topic=stored.topic,
                          state=mapper.compressor.compress(encoded) if mapper.compressor else encoded)
        store.recorder.insert_events([old])
        assert [e.provenance for e in import_log(store).get()] == [None]
    rows = [r for r in json_lines(cli("audit", "--json", db=sqlite_url).stdout) if r["kind"] == "import"]
    assert [(r["session_id"], r["detail"]) for r in rows] == [(session, {"session_ids": [session], "provenance": None})]
    assert "where from was not recorded" in cli("audit", db=sqlite_url, env={"COLUMNS": "400"}).stdout


def test_sessions_lists_an_imported_session_by_when_it_was_created_not_when_it_arrived(db_url, workspace, tmp_path, request):
    from chronicle.runtime.app.queries import sessions_from_aggregates

    older = recorded(db_url, workspace, tmp_path, "older", response(text("Made first, elsewhere.")))
    path = tmp_path / "older.json"
    assert cli("export", older, "--out", str(path), db=db_url).returncode == 0
    target = other_store(db_url, tmp_path, request, "target")
    newer = recorded(target, workspace, tmp_path, "newer", response(text("Made here, later.")))
    assert cli("import", str(path), db=target).returncode == 0
    assert [s["session_id"] for s in json_lines(cli("sessions", "--json", db=target).stdout)] == [older, newer]
    assert cli("sessions", db=target).stdout.index(older[:8]) < cli("sessions", db=target).stdout.index(newer[:8])
    with closing(ChronicleStore(target)) as store:  # the listing read from the aggregates (a read-only store's) agrees
        assert [s["session_id"] for s in sessions_from_aggregates(store)] == [older, newer]
