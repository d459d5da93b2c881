"""The hash chain catches every kind of tampering, on both backends, and says where."""

from __future__ import annotations

import json
import shutil
from contextlib import closing
from pathlib import Path
from uuid import UUID

import pytest
from eventsourcing.persistence import IntegrityError

from chronicle.runtime.chain import link_digest
from chronicle.runtime.compression import SizedZlib
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.verify import Verifier
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.tamper import Tamper

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "v1_store.db"


def recorded_session(db_url: str, workspace: Path, tmp_path: Path) -> str:
    script = write_script(tmp_path / "s.json", [
        response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")),
        response(text("It says hello.")),
    ])
    run = cli("run", "what is in hello.txt?", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    return json_lines(run.stdout)[0]["session_id"]


def verify(db_url: str, session: str | None = None):  # type: ignore[no-untyped-def]
    with closing(ChronicleStore(db_url)) as store:
        verifier = Verifier(store)
        if session is None:
            return verifier.verify_all()
        return verifier.verify_session(UUID(session))


@pytest.fixture
def recorded(db_url, workspace, tmp_path):  # type: ignore[no-untyped-def]
    session = recorded_session(db_url, workspace, tmp_path)
    return db_url, session, Tamper(db_url)


def test_an_untouched_store_verifies_with_counts_and_a_head(recorded):
    db_url, session, tamper = recorded
    result = cli("verify", "--json", db=db_url)
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = json.loads(result.stdout)
    positions = tamper.positions()
    assert verdict["ok"] and verdict["events"] == verdict["chained"] == len(positions) and verdict["unchained"] == 0
    assert verdict["head"]["position"] == positions[-1] and verdict["head"]["digest"] == tamper.links()[-1][2].hex()
    one = cli("verify", session[:8], db=db_url)
    assert one.returncode == 0 and one.stdout.startswith(f"verified session tree {session[:8]}"), one.stdout
    assert f"head {positions[-1]}:" in one.stdout


def test_an_edited_payload_is_named_with_its_position_and_event(recorded):
    db_url, session, tamper = recorded
    # States are stored compressed (runtime/compression.py): edit the JSON and store it compressed again.
    plain = SizedZlib()
    target = next(p for p in tamper.positions() if b"hello world" in plain.decompress(tamper.event(p)[3]))
    oid, version, _topic, state = tamper.event(target)
    tamper.set_state(target, plain.compress(plain.decompress(state).replace(b"hello world", b"HELLO WORLD")))
    for scope in (None, session):
        broken = verify(db_url, scope).broken
        assert broken is not None and broken.kind == "edited" and broken.position == target, broken
        assert broken.aggregate_id == str(oid) and broken.version == version and "content" in broken.detail
    result = cli("verify", db=db_url)
    assert result.returncode == 1 and f"broken at position {target} " in result.stdout and "edited" in result.stdout


def test_a_deleted_row_is_reported_missing_where_it_was(recorded):
    db_url, session, tamper = recorded
    target = tamper.positions()[3]
    oid, version, _, _ = tamper.event(target)
    tamper.delete(target)
    for scope in (None, session):
        broken = verify(db_url, scope).broken
        assert broken is not None and broken.kind == "missing" and broken.position == target, broken
        assert broken.aggregate_id == str(oid) and broken.version == version


def test_two_swapped_rows_are_reported_reordered(recorded):
    db_url, session, tamper = recorded
    positions = tamper.positions()
    a, b = positions[2], positions[5]
    tamper.swap(a, b)
    for scope in (None, session):
        broken = verify(db_url, scope).broken
        assert broken is not None and broken.kind == "reordered" and broken.position == a, broken
        assert f"position {b}" in broken.detail


def test_a_forged_row_is_reported_inserted(recorded):
    db_url, session, tamper = recorded
    sid = UUID(session)
    last_version = max(v for p in tamper.positions() for (o, v, _, _) in [tamper.event(p)] if o == sid)
    _, _, topic, state = next(tamper.event(p) for p in reversed(tamper.positions()) if tamper.event(p)[0] == sid)
    forged = tamper.insert(sid, last_version + 1, topic, state)
    for scope in (None, session):
        broken = verify(db_url, scope).broken
        assert broken is not None and broken.kind == "inserted" and broken.position == forged, broken
        assert broken.aggregate_id == session and broken.version == last_version + 1


def test_an_edited_digest_is_told_apart_from_an_edited_payload(recorded):
    db_url, session, tamper = recorded
    position, digest = tamper.link(4)
    tamper.set_digest(4, bytes(32))
    broken = verify(db_url).broken
    assert broken is not None and broken.kind == "edited" and broken.position == position and broken.seq == 4
    assert "stored digest was changed" in broken.detail


def test_a_rewritten_chain_passes_alone_but_not_against_an_earlier_anchor(recorded, tmp_path):
    db_url, _session, tamper = recorded
    anchor = tmp_path / "anchor.json"
    written = cli("verify", "--anchor", str(anchor), db=db_url)
    assert written.returncode == 0 and f"anchor written to {anchor}" in " ".join(written.stderr.split())
    assert json.loads(anchor.read_text())["digest"] == tamper.links()[-1][2].hex()
    again = cli("verify", "--anchor", str(anchor), "--force", "--json", db=db_url)
    assert json.loads(again.stdout)["anchor_written"] == str(anchor)  # `anchor` is the one checked with --against
    # Edit an early payload, then recompute every digest from there on, as a careful forger would.
    links = tamper.links()
    target = links[2][1]
    tamper.set_state(target, tamper.event(target)[3] + b" ")
    prev = links[1][2]
    for seq, position, _ in links[2:]:
        oid, version, topic, state = tamper.event(position)
        prev = link_digest(prev, seq, position, oid, version, topic, state)
        tamper.set_digest(seq, prev)
    assert cli("verify", db=db_url).returncode == 0
    result = cli("verify", "--against", str(anchor), "--json", db=db_url)
    assert result.returncode == 1
    broken = json.loads(result.stdout)["broken"]
    assert broken["kind"] == "rewritten" and broken["position"] == links[-1][1]


def test_a_conflicting_save_leaves_no_link_behind(db_url):
    """…however often it fails on the same pooled connection (on PostgreSQL the save is one call of
    the stored function, rolled back whole when its insert conflicts), and the next save chains."""
    from datetime import datetime, timezone
    from uuid import uuid4

    from chronicle.domain.lease import SessionLease  # any aggregate will do

    store = ChronicleStore(db_url)
    lease = SessionLease(id=uuid4(), session_id=uuid4(), timestamp=datetime.now(timezone.utc))
    store.save(lease)
    for _ in range(3):  # again and again on the pool's one connection
        twin = SessionLease(id=lease.id, session_id=lease.session_id, timestamp=datetime.now(timezone.utc))
        with pytest.raises(IntegrityError):
            store.save(twin)
    other = SessionLease(id=uuid4(), session_id=uuid4(), timestamp=datetime.now(timezone.utc))
    store.save(other)
    store.close()
    verdict = verify(db_url)
    assert verdict.ok and verdict.chained == verdict.events == 2


def test_every_link_the_store_writes_is_the_digest_verify_computes(db_url):
    """On PostgreSQL the server computes the links (the save function, `runtime/chain_postgres.py`);
    each one, for saves of one and of several events, non-ASCII topics, and empty, binary and
    large states, is recomputed here with `link_digest` from the row it names."""
    from uuid import uuid4

    from eventsourcing.persistence import StoredEvent

    from chronicle.runtime.chain import GENESIS

    store = ChronicleStore(db_url)
    oid = uuid4()
    saves = [
        [StoredEvent(uuid4(), 1, "chronicle.domain.x:Ü.Made", b"")],
        [StoredEvent(oid, 1, "t:é∂", bytes(range(256)) * 40), StoredEvent(oid, 2, "t:二", b"\x00"),
         StoredEvent(oid, 3, "t", b'{"a":1}')],
        [StoredEvent(uuid4(), 7, "t:" + "x" * 300, b"\xff" * 70_000)],
    ]
    positions = [p for save in saves for p in store.recorder.insert_events(save)]
    tamper = Tamper(db_url)
    links = tamper.links()
    assert [(seq, position) for seq, position, _ in links] == list(enumerate(positions, start=1))
    prev = GENESIS
    for seq, position, digest in links:
        prev = link_digest(prev, seq, position, *tamper.event(position))
        assert digest == prev, (seq, position)
    store.close()


def test_the_v1_store_verifies_as_unchained_before_its_first_new_event(tmp_path, workspace):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    url = f"sqlite:///{db}"
    result = cli("verify", db=url)
    assert result.returncode == 0 and "0 events chained" in result.stdout and "unchained before position" in result.stdout
    count = len(Tamper(url).positions())
    recorded_session(url, workspace, tmp_path)
    verdict = json.loads(cli("verify", "--json", db=url).stdout)
    assert verdict["ok"] and verdict["unchained"] == count and verdict["unchained_before"] == count + 1
    assert verdict["chained"] == verdict["events"] - count > 0


def test_a_snapshot_that_no_longer_matches_its_events_is_named_by_verify(db_url, workspace, tmp_path):
    """Snapshots are not chained (they are pruned caches); verify re-derives each from its events instead."""
    session = recorded_session(db_url, workspace, tmp_path)
    store = ChronicleStore(db_url)
    turn_id = store.session(UUID(session)).turns[0]
    store.take_snapshot(turn_id)
    store.take_snapshot(UUID(session))
    store.close()
    verdict = verify(db_url)
    assert verdict.ok and verdict.snapshots == 2, verdict.line()

    tamper = Tamper(db_url)
    table = "stored_snapshots" if tamper.sqlite else tamper.events.replace("chronicle_events", "chronicle_snapshots")
    key = turn_id.hex if tamper.sqlite else turn_id
    (state,) = tamper.run(f"SELECT state FROM {table} WHERE originator_id = %s", (key,))[0]
    plain = SizedZlib()  # states are stored compressed: forge the JSON and store it compressed again
    forged = plain.compress(plain.decompress(bytes(state)).replace(b"It says hello.", b"It says goodbye"))
    assert forged != bytes(state)
    tamper.run(f"UPDATE {table} SET state = %s WHERE originator_id = %s", (forged, key))
    with closing(ChronicleStore(db_url)) as store:
        assert "goodbye" in store.turn(turn_id).final_text  # loading trusts the snapshot: hence the check

    verdict = verify(db_url)
    assert not verdict.ok and verdict.broken.kind == "snapshot" and verdict.broken.aggregate_id == str(turn_id)
    result = cli("verify", db=db_url)
    assert result.returncode == 1 and result.stdout.startswith(f"broken snapshot of {str(turn_id)[:8]}"), result.stdout


def test_verifying_a_fork_checks_the_turns_it_inherits_from_its_parent(recorded, workspace, tmp_path):
    db_url, session, tamper = recorded
    fork = cli("fork", session, "--at", "1", db=db_url).stdout.strip()
    script = write_script(tmp_path / "f.json", [[], [response(text("The fork's own answer."))]])
    assert cli("run", "on the fork", "--session", fork, "--provider", f"scripted:{script}", "--workspace", str(workspace),
               db=db_url).returncode == 0
    clean = json.loads(cli("verify", fork, "--json", db=db_url).stdout)
    with closing(ChronicleStore(db_url)) as store:
        alone = len(store.aggregate_ids_of(store.session(UUID(fork))))
    assert clean["ok"] and clean["inherited"] > 0 and clean["events"] > alone
    # The parent's answer, rewritten as plain JSON (a state may be stored uncompressed), as the fork shows it.
    plain = SizedZlib()
    target = next(p for p in tamper.positions()
                  if tamper.event(p)[2].endswith("Turn.ModelResponded") and b"It says hello." in plain.decompress(tamper.event(p)[3]))
    oid, version, _topic, state = tamper.event(target)
    tamper.set_state(target, plain.decompress(state).replace(b"It says hello.", b"It says naught."))
    shown = [b.get("text") for m in json_lines(cli("history", fork, "--json", db=db_url).stdout) for b in m["content"]]
    assert "It says naught." in shown  # what the fork shows depends on the parent's row
    for scope in (fork, session):
        broken = verify(db_url, scope).broken
        assert broken is not None and broken.kind == "edited" and broken.position == target, (scope, broken)
        assert broken.aggregate_id == str(oid) and broken.version == version
    result = cli("verify", fork, db=db_url)
    assert result.returncode == 1 and f"broken at position {target} " in result.stdout, result.stdout


def snapshots_table(tamper: Tamper) -> str:
    return "stored_snapshots" if tamper.sqlite else tamper.events.replace("chronicle_events", "chronicle_snapshots")


def test_verifying_a_session_compares_its_trees_snapshots_with_their_events(recorded):
    """`history` and `why` of a session read its snapshots: a forged one must fail `verify SESSION` as it fails `verify`."""
    db_url, session, tamper = recorded
    with closing(ChronicleStore(db_url)) as store:
        turn_id = store.session(UUID(session)).turns[0]
        store.take_snapshot(turn_id)
    assert verify(db_url, session).snapshots == 1
    table, key = snapshots_table(tamper), turn_id.hex if tamper.sqlite else turn_id
    (state,) = tamper.run(f"SELECT state FROM {table} WHERE originator_id = %s", (key,))[0]
    plain = SizedZlib()
    forged = plain.compress(plain.decompress(bytes(state)).replace(b'"hello.txt"', b'"/etc/shadow"'))
    assert forged != bytes(state)
    tamper.run(f"UPDATE {table} SET state = %s WHERE originator_id = %s", (forged, key))
    assert "/etc/shadow" in cli("history", session, "--json", db=db_url).stdout  # what the forged snapshot shows

    verdict = verify(db_url, session)
    assert not verdict.ok and verdict.broken.kind == "snapshot" and verdict.broken.aggregate_id == str(turn_id)
    result = cli("verify", session[:8], db=db_url)
    assert result.returncode == 1 and result.stdout.startswith(f"broken snapshot of {str(turn_id)[:8]}"), result.stdout


def test_an_anchor_written_from_another_store_says_so(db_url, workspace, tmp_path):
    here = recorded_session(db_url, workspace, tmp_path)
    anchor = tmp_path / "here.json"
    assert cli("verify", "--anchor", str(anchor), db=db_url).returncode == 0
    written = json.loads(anchor.read_text())
    assert written["store"]["backend"] == ("sqlite" if db_url.startswith("sqlite") else "postgresql")
    assert cli("verify", here, "--against", str(anchor), db=db_url).returncode == 0

    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = f"sqlite:///{other_dir / 'other.db'}"
    recorded_session(other, workspace, other_dir)
    result = cli("verify", "--against", str(anchor), "--json", db=other)
    assert result.returncode == 1, result.stdout + result.stderr
    broken = json.loads(result.stdout)["broken"]
    assert broken["kind"] == "other_store" and "this anchor is from another store" in broken["detail"], broken
    said = cli("verify", "--against", str(anchor), db=other)
    assert said.returncode == 1 and "this anchor is from another store" in said.stdout and "rewritten" not in said.stdout

    # An anchor written before anchors named their store is checked as before.
    old = tmp_path / "old.json"
    old.write_text(json.dumps({k: v for k, v in written.items() if k != "store"}))
    assert cli("verify", "--against", str(old), db=db_url).returncode == 0
    assert json.loads(cli("verify", "--against", str(old), "--json", db=other).stdout)["broken"]["kind"] in ("rewritten", "missing")


def test_a_deleted_chain_link_is_reported_missing_not_inserted(recorded):
    db_url, session, tamper = recorded
    seq = len(tamper.links()) // 2
    position, _ = tamper.link(seq)
    tamper.run(f"DELETE FROM {tamper.chain} WHERE seq = %s", (seq,))
    for scope in (None, session):
        broken = verify(db_url, scope).broken
        assert broken is not None and broken.kind == "missing" and broken.position == position, (scope, broken)
        assert f"seq {seq}" in broken.detail and "still in the log" in broken.detail


def test_an_event_moved_to_another_session_is_named_as_moved(db_url, workspace, tmp_path):
    first = recorded_session(db_url, workspace, tmp_path)
    second_dir = tmp_path / "again"
    second_dir.mkdir()
    second = recorded_session(db_url, workspace, second_dir)
    tamper = Tamper(db_url)
    # The first session's last event, given to the second session at a version it does not have.
    position = max(p for p in tamper.positions() if tamper.event(p)[0] == UUID(first))
    oid, version, _topic, _state = tamper.event(position)
    key = UUID(second).hex if tamper.sqlite else UUID(second)
    tamper.run(f"UPDATE {tamper.events} SET originator_id = %s, originator_version = 99 WHERE {tamper.pos} = %s", (key, position))
    for scope in (None, second):
        verdict = verify(db_url, scope)
        broken = verdict.broken
        assert broken is not None and broken.position == position and broken.aggregate_id == str(oid), (scope, broken)
        assert "moved to another aggregate" in broken.detail and f"{second[:8]} v99" in broken.detail
    result = cli("verify", second, db=db_url)
    assert result.returncode == 1 and f"broken at position {position} " in result.stdout, result.stdout + result.stderr
    assert "moved to another aggregate" in result.stdout and result.stderr == ""


def test_a_session_that_does_not_load_is_one_verdict_not_verified(recorded):
    db_url, session, tamper = recorded
    plain = SizedZlib()
    target = next(p for p in tamper.positions() if tamper.event(p)[2].endswith("ToolCall.Completed"))
    tamper.set_state(target, plain.compress(b'{"timestamp": "2024-01-01T00:00:00+00:00"}'))
    result = cli("verify", session, db=db_url)
    assert result.returncode == 1 and result.stderr == "", result.stdout + result.stderr
    [line] = result.stdout.strip().splitlines()
    assert line.startswith(f"session tree {session[:8]} not verified: it does not load from the log"), line
    assert f"broken at position {target} " in line and "chronicle doctor" in line
    assert "Error" not in line and "verified the whole log" not in line
    verdict = json.loads(cli("verify", session, "--json", db=db_url).stdout)
    assert not verdict["ok"] and verdict["unloadable"] and verdict["broken"]["position"] == target


def test_an_existing_anchor_file_is_not_overwritten_without_force(recorded, tmp_path):
    db_url, _session, _tamper = recorded
    anchor = tmp_path / "head.json"
    anchor.write_text("kept\n")
    refused = cli("verify", "--anchor", str(anchor), db=db_url)
    assert refused.returncode == 2 and "--force" in refused.stderr and "exists" in refused.stderr, refused.stderr
    assert anchor.read_text() == "kept\n"
    assert cli("verify", "--anchor", str(anchor), "--force", db=db_url).returncode == 0
    assert "digest" in json.loads(anchor.read_text())
