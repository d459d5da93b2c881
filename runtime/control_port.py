"""The store-backed ControlPort: steering and cancel requests read from the Session's events.

The application hands this to the loop (runtime/app/loops.py); a loop built without one gets it
too, so steering and cancel work however the loop was made.
"""

from __future__ import annotations

import asyncio
from uuid import UUID

from .controls import CancelWatcher, Steering, pending_steering
from .store import ChronicleStore


class StoreControls:
    def __init__(self, store: ChronicleStore) -> None:
        self.store = store

    def pending_steering(self, session_id: UUID, turn_id: UUID) -> Steering | None:
        return pending_steering(self.store, session_id, turn_id)

    def watch_cancel(self, session_id: UUID, turn_id: UUID, task: asyncio.Task, just_started: bool = False) -> CancelWatcher:
        return CancelWatcher(self.store, session_id, turn_id, task, just_started=just_started)
