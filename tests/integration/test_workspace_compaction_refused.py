"""`compact --strategy workspace` appends the turns to memory/DATE.md before it records `Compacted` (a crash between
leaves them written twice, never lost). Refused when it records, because another process undid turns meanwhile, it
used to leave the block behind: a file saying turns were moved that are still in context. A failure now leaves the
workspace as it found it. The undo is placed between the compaction's read and its record by a store subclass."""

from __future__ import annotations

import asyncio

import pytest

from chronicle.domain.session import Session
from chronicle.runtime.app import controls as app_controls
from chronicle.runtime.clock import SYSTEM_CLOCK
from chronicle.runtime.sessions import submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.undo_redo import undo
from tests.helpers import response, text
from tests.integration.loop_harness import Harness


class UndoneMeanwhile(ChronicleStore):
    """A store on which another process undoes two turns just before the compaction records what it moved."""

    name = ChronicleStore.name  # eventsourcing names an application's tables after its class otherwise

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.given, self.raced = url, False

    def update_session(self, session_id, command, *others, **kwargs):  # type: ignore[no-untyped-def]
        if not self.raced:
            self.raced = True
            other = ChronicleStore(self.given)
            try:
                undo(other, session_id, 2)
            finally:
                other.close()
        return super().update_session(session_id, command, *others, **kwargs)


def three_turns(db_url, workspace, tmp_path) -> Harness:  # type: ignore[no-untyped-def]
    h = Harness(db_url, workspace, tmp_path, [[response(text(word))] for word in ("one", "two", "three")], tools=())
    for prompt in ("a", "b", "c"):
        assert h.run(prompt).status == "completed"
    return h


def compact_refused(db_url, session_id):  # type: ignore[no-untyped-def]
    store = UndoneMeanwhile(db_url)
    try:
        result = asyncio.run(app_controls.compact(store, session_id, "workspace", keep=1))
        assert store.raced
        events = list(store.events.get(session_id))
    finally:
        store.close()
    assert not result.ok and result.failed and "changed while" in result.reason, result
    assert [type(e) for e in events].count(Session.CompactionFailed) == 1
    assert not [e for e in events if isinstance(e, Session.Compacted)]
    return result


def test_a_refused_workspace_compaction_leaves_no_memory_file_behind(db_url, workspace, tmp_path):
    h = three_turns(db_url, workspace, tmp_path)
    before = sorted(p.name for p in workspace.iterdir())
    compact_refused(db_url, h.session_id)  # left memory/DATE.md with turns 1 and 2 "moved here"
    assert sorted(p.name for p in workspace.iterdir()) == before
    assert not (workspace / "memory").exists()
    h.store.close()


def test_a_refused_workspace_compaction_leaves_an_existing_memory_file_as_it_was(db_url, workspace, tmp_path):
    h = three_turns(db_url, workspace, tmp_path)
    (workspace / "memory").mkdir()
    notes = {}
    # The compaction appends to today's file (the system clock's UTC date): it exists already, an older one beside it.
    today = workspace / "memory" / f"{SYSTEM_CLOCK.now().date().isoformat()}.md"
    for path in (today, workspace / "memory" / "2020-01-01.md"):
        path.write_text(f"earlier notes in {path.name}\n", encoding="utf-8")
        notes[path] = path.read_bytes()
    compact_refused(db_url, h.session_id)
    assert {p: p.read_bytes() for p in notes} == notes
    assert sorted(p.name for p in (workspace / "memory").iterdir()) == sorted(p.name for p in notes)
    h.store.close()


class InputBeforeEachSave(ChronicleStore):
    """A store on which another process queues an input before every session write of the compaction: its record
    loses every race and gives up ("kept changing"), with nothing recorded."""

    name = ChronicleStore.name

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.other = ChronicleStore(url)
        self.queued = 0

    def save(self, *objs, **kwargs):  # type: ignore[no-untyped-def]
        for obj in objs:
            if isinstance(obj, Session) and obj.pending_events:
                submit_input(self.other, obj.id, f"meanwhile {self.queued}")
                self.queued += 1
        return super().save(*objs, **kwargs)

    def close(self) -> None:
        self.other.close()
        super().close()


def test_a_workspace_compaction_whose_record_fails_takes_its_block_back(db_url, workspace, tmp_path):
    h = three_turns(db_url, workspace, tmp_path)
    store = InputBeforeEachSave(db_url)
    try:
        with pytest.raises(RuntimeError, match="kept changing"):
            asyncio.run(app_controls.compact(store, h.session_id, "workspace", keep=1))
        assert store.queued >= 2
        assert not [e for e in store.events.get(h.session_id) if isinstance(e, Session.Compacted)]
    finally:
        store.close()
    assert not (workspace / "memory").exists()  # the block, the file and memory/ it made are gone
    h.store.close()
