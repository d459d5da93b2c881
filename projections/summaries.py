"""Summaries: one row per session with its first input, its title and its compaction summary,
and (v2) everything `chronicle sessions` shows of it.

Titles come from a recorded event (a cheap auxiliary model call made once, from the first
input); a failed title call is kept too, so `sessions` can say why a session has none.
Compaction events are recognised by name and a `summary` field, so the compaction feature
can record them without this projection having to change.

v2 keeps what `sessions` reads from the aggregates (status, branch length, queue, archived,
fork origin, the running turn's status, the session index's order, the newest self-repair; v3 the
model it runs on, Session.ModelChanged; v4 a sub-agent's instance name; v5 whether it is a job that was
cancelled, Job.Cancelled, which no Session event records; v6 its last turn: the last it started, else a fork's last
inherited one) so
that the listing can be answered with plain SQL by session_listing.py, without importing the
domain. The handlers follow the Session aggregate's `@event` bodies field for field; a test
compares the two listings on stores with forks, sub-agents, queues, failures and repairs.
"""

from __future__ import annotations

import json
from typing import Any

from chronicle.domain.job import Job
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn

from .base import Projection, on
from .session_listing import SUMMARIES_VERSION
from .sql import Tx, dumps, iso

#: The status each Turn event leaves its turn in (the `self.status = …` of domain/turn.py).
TURN_STATUS = {
    Turn.Started: "running", Turn.ApprovalRequested: "awaiting_approval", Turn.Resumed: "running",
    Turn.Completed: "completed", Turn.Failed: "failed", Turn.Cancelled: "cancelled", Turn.Stopped: "stopped",
    Turn.Interrupted: "interrupted",
}
#: What a repair attempt's result makes of the repair's status (domain/repair.py).
REPAIR_STATUS = {"retry": "retrying", "success": "resolved"}


class SummariesProjection(Projection):
    name = "summaries"
    #: Kept in session_listing.py, whose reader checks this projection's position without importing it.
    version = SUMMARIES_VERSION
    tables = {
        "proj_summaries": "session_id TEXT PRIMARY KEY, first_input TEXT, title TEXT, title_model TEXT, titled_at TEXT, "
                          "title_error TEXT, compaction_summary TEXT, compacted_at TEXT, compactions BIGINT, "
                          "agent TEXT, created_at TEXT, parent_session_id TEXT, forked_from TEXT, status TEXT, "
                          "active_turn_id TEXT, turns BIGINT, queue TEXT, steering TEXT, archived BIGINT, model TEXT, "
                          "instance TEXT, job_cancelled BIGINT, last_turn_id TEXT",
        # The session index (runtime/store.py: SessionLogged, withdrawn by SessionUnlisted/Forgotten) in its order.
        "proj_summaries_index": "session_id TEXT PRIMARY KEY, listed BIGINT",
        "proj_summaries_turns": "turn_id TEXT PRIMARY KEY, status TEXT",
        # The repairs index (runtime/self_repair.py): each repair's session, status and last place in the index.
        "proj_summaries_repairs": "repair_id TEXT PRIMARY KEY, session_id TEXT, status TEXT, listed BIGINT",
        "proj_summaries_unreadable": "position BIGINT PRIMARY KEY, originator_id TEXT",
    }

    @on(Session.Started)
    def _started(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        tx.execute(
            "INSERT INTO proj_summaries VALUES (%s, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, "
            "%s, %s, %s, %s, 'idle', NULL, %s, '[]', '[]', 0, %s, %s, 0, %s)",
            (sid, (e.spec or {}).get("name", "main"), e.timestamp.isoformat(),
             str(e.parent_session_id) if e.parent_session_id else None,
             None if e.forked_from is None else dumps(e.forked_from), len(e.head), (e.spec or {}).get("model") or None,
             (e.spec or {}).get("instance") or None, str(e.head[-1]) if e.head else None),
        )
        tx.memo[("summaries.queues", sid)] = ([], [])

    @on(Session.InputQueued, Session.InputWithAttachmentsQueued)
    def _input(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        tx.execute("UPDATE proj_summaries SET first_input = %s WHERE session_id = %s AND first_input IS NULL", (e.text, sid))
        queue, steering = self._queues(tx, sid)
        self._save_queues(tx, sid, [*queue, e.input_id], steering)

    @on(Session.TurnStarted)
    def _turn_started(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        queue, steering = self._queues(tx, sid)
        self._save_queues(tx, sid, [q for q in queue if q != e.input_id], steering)
        tx.execute("UPDATE proj_summaries SET status = 'busy', active_turn_id = %s, last_turn_id = %s, turns = turns + 1 "
                   "WHERE session_id = %s", (str(e.turn_id), str(e.turn_id), sid))

    @on(Session.TurnEnded)
    def _turn_ended(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET status = 'idle', active_turn_id = NULL WHERE session_id = %s", (str(e.originator_id),))

    @on(Session.TurnsUndone)
    def _undone(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET turns = turns - %s WHERE session_id = %s", (len(e.turn_ids), str(e.originator_id)))

    @on(Session.TurnsRedone)
    def _redone(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET turns = turns + %s WHERE session_id = %s", (len(e.turn_ids), str(e.originator_id)))

    @on(Session.SteeringQueued)
    def _steering_queued(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        queue, steering = self._queues(tx, sid)
        self._save_queues(tx, sid, queue, [*steering, e.steer_id])

    @on(Session.SteeringDelivered)
    def _steering_delivered(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        queue, steering = self._queues(tx, sid)
        self._save_queues(tx, sid, queue, [s for s in steering if s not in e.steer_ids])

    @on(Session.SteeringRequeued)
    def _steering_requeued(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        queue, steering = self._queues(tx, sid)
        moved = [s for s in steering if s in e.steer_ids]
        self._save_queues(tx, sid, [*queue, *moved], [s for s in steering if s not in e.steer_ids])

    @on(Session.Archived, Session.Unarchived)
    def _archived(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET archived = %s WHERE session_id = %s",
                   (1 if isinstance(e, Session.Archived) else 0, str(e.originator_id)))

    @on(Session.ModelChanged)
    def _model_changed(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries SET model = %s WHERE session_id = %s", (e.model, str(e.originator_id)))

    @on(Job.Cancelled)
    def _job_cancelled(self, tx: Tx, e: Any, position: int) -> None:
        # A job and its session are created in one transaction (runtime/jobs.py: submit_job), so its row is there.
        tx.execute("UPDATE proj_summaries SET job_cancelled = 1 WHERE session_id = %s", (str(e.session_id),))

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

    # -- the running turn's status -------------------------------------------------------------

    @on(Turn.Created)
    def _turn_created(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("INSERT INTO proj_summaries_turns VALUES (%s, 'pending')", (str(e.originator_id),))

    @on(*TURN_STATUS)
    def _turn_status(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries_turns SET status = %s WHERE turn_id = %s", (TURN_STATUS[type(e)], str(e.originator_id)))

    # -- the index logs (their classes live in the runtime, so they are named) -----------------

    @on("SessionLogged")
    def _logged(self, tx: Tx, e: Any, position: int) -> None:
        # Listed once, where it was first indexed: a second entry for a listed session changes nothing.
        tx.execute("INSERT INTO proj_summaries_index VALUES (%s, %s) ON CONFLICT (session_id) DO NOTHING",
                   (str(e.session_id), e.originator_version))

    @on("SessionUnlisted", "SessionForgotten")
    def _withdrawn(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("DELETE FROM proj_summaries_index WHERE session_id = %s", (str(e.session_id),))

    @on("RepairLogged")
    def _repair_logged(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("INSERT INTO proj_summaries_repairs VALUES (%s, NULL, NULL, %s) "
                   "ON CONFLICT (repair_id) DO UPDATE SET listed = excluded.listed", (str(e.repair_id), e.originator_version))

    @on("Repair.Detected")
    def _repair_detected(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.session_id) if e.session_id is not None else None
        tx.execute("INSERT INTO proj_summaries_repairs VALUES (%s, %s, 'detected', NULL) "
                   "ON CONFLICT (repair_id) DO UPDATE SET session_id = excluded.session_id, status = excluded.status",
                   (str(e.originator_id), sid))

    @on("Repair.Attempted")
    def _repair_attempted(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_summaries_repairs SET status = %s WHERE repair_id = %s",
                   (REPAIR_STATUS.get(e.result, e.result), str(e.originator_id)))

    def passed_over(self, tx: Tx, position: int, originator_id: Any) -> None:
        tx.execute("INSERT INTO proj_summaries_unreadable VALUES (%s, %s)", (position, str(originator_id)))

    # -- queues, read once per transaction ------------------------------------------------------

    def _queues(self, tx: Tx, sid: str) -> tuple[list[str], list[str]]:
        """The input ids queued and the steering ids pending, as the aggregate holds them (in order)."""
        key = ("summaries.queues", sid)
        if key not in tx.memo:
            row = tx.one("SELECT queue, steering FROM proj_summaries WHERE session_id = %s", (sid,))
            tx.memo[key] = ([], []) if row is None else (json_list(row[0]), json_list(row[1]))
        return tx.memo[key]  # type: ignore[no-any-return]

    def _save_queues(self, tx: Tx, sid: str, queue: list[str], steering: list[str]) -> None:
        tx.memo[("summaries.queues", sid)] = (queue, steering)
        tx.execute("UPDATE proj_summaries SET queue = %s, steering = %s WHERE session_id = %s", (dumps(queue), dumps(steering), sid))


def json_list(text: str | None) -> list[str]:
    return list(json.loads(text)) if text else []


def summaries(tx: Tx, session_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    rows = tx.dicts("SELECT * FROM proj_summaries ORDER BY session_id")
    return {r["session_id"]: r for r in rows if session_ids is None or r["session_id"] in session_ids}
