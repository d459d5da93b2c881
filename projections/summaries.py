"""Summaries: one row per session with its first input, its title and its compaction summary.

Titles come from a recorded event (a cheap auxiliary model call made once, from the first
input); a failed title call is kept too, so `sessions` can say why a session has none.
Compaction events are recognised by name and a `summary` field, so the compaction feature
can record them without this projection having to change.
"""

from __future__ import annotations

from typing import Any

from chronicle.domain.session import Session

from .base import Projection, on
from .sql import Tx, iso


class SummariesProjection(Projection):
    name = "summaries"
    tables = {
        "proj_summaries": "session_id TEXT PRIMARY KEY, first_input TEXT, title TEXT, title_model TEXT, titled_at TEXT, "
                          "title_error TEXT, compaction_summary TEXT, compacted_at TEXT, compactions BIGINT",
    }

    @on(Session.Started)
    def _started(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("INSERT INTO proj_summaries VALUES (%s, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0)", (str(e.originator_id),))

    @on(Session.InputQueued, Session.InputWithAttachmentsQueued)
    def _input(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET first_input = %s WHERE session_id = %s AND first_input IS NULL",
                   (e.text, str(e.originator_id)))

    @on(Session.TitleSet)
    def _title(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET title = %s, title_model = %s, titled_at = %s, title_error = NULL "
                   "WHERE session_id = %s", (e.title, e.model or None, iso(e.timestamp), str(e.originator_id)))

    @on(Session.TitleFailed)
    def _title_failed(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET title_error = %s WHERE session_id = %s", (e.reason, str(e.originator_id)))

    def unhandled(self, tx: Tx, e: Any, position: int) -> None:
        if isinstance(e, Session.Compacted) and isinstance(e.summary, str):
            tx.execute(
                "UPDATE proj_summaries SET compaction_summary = %s, compacted_at = %s, compactions = compactions + 1 "
                "WHERE session_id = %s", (e.summary, iso(e.timestamp), str(e.originator_id)),
            )


def summaries(tx: Tx, session_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    rows = tx.dicts("SELECT * FROM proj_summaries ORDER BY session_id")
    return {r["session_id"]: r for r in rows if session_ids is None or r["session_id"] in session_ids}
