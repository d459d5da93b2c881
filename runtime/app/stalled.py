"""Why a busy session stays busy when no process runs it, for the commands that refuse a busy session.

`undo`, `redo`, `fork` and `archive` wait for a session's turn to end. After a process running it was killed
(`kill -9`, a crash, a machine lost), the turn is still in flight and nothing will end it: "cancel or wait for
the running turn" then sent the user to wait for ever. The session's lease says whether a live process runs it;
when none does, the refusal says what ends the turn instead.
"""

from __future__ import annotations

from uuid import UUID

from ..leases import held_by_a_live_process
from ..pasteable import pasteable
from ..store import ChronicleStore


def stalled_note(store: ChronicleStore, sid: UUID) -> str:
    """"" while the session is idle or a live process holds it; else what to run, starting with "; "."""
    try:
        session = store.session(sid)
        if session.active_turn_id is None or held_by_a_live_process(store, sid):
            return ""
        turn = store.turn(session.active_turn_id)
    except Exception:  # noqa: BLE001 - a note for a refusal already being said: without it, the refusal stands
        return ""
    if turn.status == "awaiting_approval":
        return (f"; its turn waits for an approval: `{pasteable(f'approve {sid}', store.url)}` (or `deny`), then "
                f"`{pasteable(f'resume {sid}', store.url)}` ends it")
    return (f"; no process is running it (the one that did stopped): `{pasteable(f'resume {sid}', store.url)}` "
            f"continues the turn, or `{pasteable(f'cancel {sid}', store.url)}` then `resume` ends it")
