"""An event a newer Chronicle wrote (stored with a class_version above what this code's class reads) is refused with
one line naming the event class and both versions, never decoded as if it were of this release's shape: `doctor`
lists it as unreadable, the read models pass over it, a reader of its aggregate names it. A snapshot of a newer
aggregate class is passed over as a cache miss. Forged here by raising the stored class_version. Both backends."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.runtime.event_versions import NewerEvent
from chronicle.runtime.read_models import projection_engine
from chronicle.runtime.store import ChronicleStore, UnreadableEvent
from tests.closed_at_end import closed_at_end
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.tamper import Tamper


def session_with_a_tool_call(db_url: str, workspace: Any, tmp_path: Any) -> str:
    script = write_script(tmp_path / "s.json", [
        response(text("Writing."), tool_use("tu_1", "write_file", path="a.txt", content="alpha\n")), response(text("Wrote a.txt.")),
    ])
    run = cli("run", "write a.txt", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    return str(json_lines(run.stdout)[0]["session_id"])


def raised(state: bytes, store: ChronicleStore, bump: Any) -> bytes:
    """`state` with its class_version changed by `bump` (the stored form: compressed if it was)."""
    compressor = store.mapper.compressor
    plain = compressor.decompress(state) if compressor else state
    decoded = json.loads(plain)
    bump(decoded)
    return json.dumps(decoded, separators=(",", ":")).encode()


def test_an_event_stored_with_a_newer_class_version_is_refused_listed_by_doctor_and_passed_over_by_read_models(
        db_url, workspace, tmp_path):
    sid = session_with_a_tool_call(db_url, workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
    tamper = Tamper(db_url)
    [(position, call_id, version)] = [(p, *tamper.event(p)[:2]) for p in tamper.positions()
                                      if tamper.event(p)[2].endswith("ToolCall.Completed")]
    reads = ToolCall.Completed.class_version
    tamper.set_state(position, raised(tamper.event(position)[3], store, lambda s: s.update(class_version=reads + 1)))
    [row] = store.recorder.select_notifications(position, 1)

    fresh = closed_at_end(ChronicleStore(db_url))
    try:
        fresh.mapper.to_domain_event(row)
    except NewerEvent as exc:
        said = str(exc)
    else:
        raise AssertionError("an event of a newer class_version was decoded")
    assert said == (f"ToolCall.Completed of {call_id} v{version} is stored as class_version {reads + 1}, which this release "
                    f"reads only up to {reads}: a newer Chronicle wrote it; upgrade Chronicle to read it")
    try:
        fresh.tool_call(call_id)
    except UnreadableEvent as exc:
        assert f"event {version} (chronicle.domain.tool_call:ToolCall.Completed) cannot be decoded: NewerEvent: " in str(exc)
    else:
        raise AssertionError("a tool call holding an event of a newer class_version was loaded")

    engine = projection_engine(fresh)
    engine.rebuild()
    assert "NewerEvent" in engine.unreadable[position] and "a newer Chronicle wrote it" in engine.unreadable[position]
    listed = cli("sessions", "--json", db=db_url)
    assert listed.returncode == 0 and [s["session_id"] for s in json_lines(listed.stdout)] == [sid], listed.stderr

    found = cli("doctor", "--json", db=db_url)
    assert found.returncode == 1, found.stdout + found.stderr
    [finding] = [f for f in json_lines(found.stdout) if f["position"] == position]
    assert finding["check"] == "unreadable_event" and finding["aggregate_id"] == str(call_id)
    assert "NewerEvent" in finding["detail"] and "upgrade Chronicle to read it" in finding["detail"]
    shown = cli("doctor", db=db_url).stdout
    assert f"unreadable_event: position {position}: " in shown and "run a Chronicle at least as new as the one that wrote it" in shown


def test_an_event_of_this_releases_class_version_or_older_still_decodes(db_url, workspace, tmp_path):
    """The check costs an older event nothing: one stored at version 1 of Session.Started (v2 now) is upcast as before."""
    sid = session_with_a_tool_call(db_url, workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
    tamper = Tamper(db_url)
    position = next(p for p in tamper.positions() if tamper.event(p)[2].endswith("Session.Started"))
    assert Session.Started.class_version == 2
    tamper.set_state(position, raised(tamper.event(position)[3], store, lambda s: s.update(class_version=2)))
    assert closed_at_end(ChronicleStore(db_url)).session(UUID(sid)).id == UUID(sid)


def test_a_snapshot_of_a_newer_aggregate_class_is_passed_over_and_listed_by_doctor(db_url, workspace, tmp_path):
    sid = UUID(session_with_a_tool_call(db_url, workspace, tmp_path))
    store = closed_at_end(ChronicleStore(db_url))
    store.take_snapshot(sid)
    tamper = Tamper(db_url)
    table = "stored_snapshots" if tamper.sqlite else tamper.events.replace("chronicle_events", "chronicle_snapshots")
    key = sid.hex if tamper.sqlite else sid
    [(state, version)] = tamper.run(f"SELECT state, originator_version FROM {table} WHERE originator_id = %s", (key,))
    reads = Session.class_version
    forged = raised(bytes(state), store, lambda s: s["state"].update(class_version=reads + 1, title="from a newer release"))
    tamper.run(f"UPDATE {table} SET state = %s WHERE originator_id = %s", (forged, key))

    loaded = closed_at_end(ChronicleStore(db_url)).session(sid)
    assert loaded.title != "from a newer release" and loaded.version == version  # read from its events
    found = cli("doctor", "--json", db=db_url)
    [finding] = [f for f in json_lines(found.stdout) if f["check"] == "unreadable_snapshot"]
    assert finding["aggregate_id"] == str(sid) and "NewerEvent" in finding["detail"], finding
