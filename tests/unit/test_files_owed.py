"""Session.files_owed: an undo/redo --files owes its files from its record until FilesRestored/FilesReapplied."""

from __future__ import annotations

import pytest

from chronicle.domain.errors import DomainError
from chronicle.domain.session import Session
from tests.unit.test_session_controls import NOW, session_with_turns


def test_an_undo_with_files_owes_them_until_its_files_restored_and_refuses_another_undo_or_redo_meanwhile():
    session, ids = session_with_turns(2)
    session.undo(1, NOW, files=True, workspace="/ws")
    assert session.files_owed == {"kind": "undo", "turn_ids": ids[1:], "workspace": "/ws"}
    with pytest.raises(DomainError, match="not all written yet"):
        session.undo(1, NOW)
    with pytest.raises(DomainError, match="not all written yet"):
        session.redo(NOW)
    session.record_files_restored(ids[1:], [{"path": "a.txt", "action": "restored"}], NOW)
    assert session.files_owed is None
    session.redo(NOW, files=True, workspace="/ws")
    assert session.files_owed == {"kind": "redo", "turn_ids": ids[1:], "workspace": "/ws"}
    session.record_files_reapplied(ids[1:], [{"path": "a.txt", "action": "reapplied"}], NOW)
    assert session.files_owed is None


def test_an_undo_without_files_owes_nothing_and_older_events_and_snapshots_read_as_owing_nothing():
    session, _ = session_with_turns(1)
    session.undo(1, NOW)
    assert session.files_owed is None
    state = {"turn_ids": [], "actor": None}
    Session.TurnsUndone.upcast_v2_v3(state)
    assert state == {"turn_ids": [], "actor": None, "files": False, "workspace": None}
    snapshot: dict = {}
    Session.upcast_v7_v8(snapshot)
    assert snapshot == {"files_owed": None}


def test_files_are_recorded_written_once_per_undo_or_redo_that_owes_them():
    session, ids = session_with_turns(2)
    with pytest.raises(DomainError, match="no undo --files of these turns owes its files"):
        session.record_files_restored(ids[1:], [{"path": "a.txt", "action": "restored"}], NOW)
    session.undo(1, NOW, files=True, workspace="/ws")
    with pytest.raises(DomainError, match="no redo --files"):
        session.record_files_reapplied(ids[1:], [{"path": "a.txt", "action": "reapplied"}], NOW)
    session.record_files_restored(ids[1:], [{"path": "a.txt", "action": "restored"}], NOW)
    with pytest.raises(DomainError, match="recorded written already"):
        session.record_files_restored(ids[1:], [{"path": "a.txt", "action": "refused: changed since"}], NOW)
    assert session.files_owed is None
