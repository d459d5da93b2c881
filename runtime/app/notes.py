"""`chronicle notes SESSION [--at TURN]`, `Chronicle.notes` and `GET /sessions/{id}/notes`: one use case for all three.

With `at`, the notes as they stood when that turn ended, counted and refused as `history --at` counts and refuses
(a turn that does not exist: exit 2; one not ended yet: exit 1), so the two answer about the same moment.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ..store import ChronicleStore
from .errors import AppError
from .queries import session_id


def notes_of(store: ChronicleStore, ref: str | UUID, at: int | None = None) -> list[dict[str, Any]]:
    from ..notes import note_rows
    from ..timetravel import TimeTravelError

    sid = session_id(store, ref)
    try:
        return note_rows(store, sid, at)
    except TimeTravelError as exc:
        raise AppError(str(exc), exc.exit_code) from None
