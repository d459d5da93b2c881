"""The rows of `chronicle sessions` from the summaries and cost tables alone.

This module imports nothing of the domain, of eventsourcing or of the other projections: listing
sessions from the aggregates meant importing the domain (eventsourcing builds ~220 event classes
into dataclasses), which was most of the command's start-up. It reads what SummariesProjection
(v2) keeps for it, through any `Rows` (a bare connection, or a projection transaction), and gives
exactly the rows `runtime/app/queries.py: sessions` builds from the aggregates when the tables
are current; deciding that they are is the caller's part (runtime/app/session_listing.py).
"""

from __future__ import annotations

import functools
import json
from datetime import datetime, timezone
from typing import Any, Callable, Hashable, Mapping, TypeVar

from .cost_report import CostReport, Rows

#: The summaries projection's version (SummariesProjection.version): bump it when its tables change.
#: v2: what `sessions` shows (status, turns, queue, archived, fork, index order, repairs); v3 the model; v4 a
#: sub-agent's instance name; v5 whether the session is a cancelled job (Job.Cancelled); v6 its last turn, whose status
#: the listing's `last_turn_status` is.
SUMMARIES_VERSION = 6
SUMMARIES_KEY = f"projection:summaries:v{SUMMARIES_VERSION}"

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class Deferred(LookupError):
    """The tables cannot say what the aggregates would (an undecodable event, a running turn with
    no recorded status): the caller reads the aggregates instead, which report it as they do."""


def archived_trees(parents: Mapping[K, K | None], archived: set[K]) -> set[K]:
    """The sessions `sessions` hides without --all: each archived one and every sub-agent under it,
    however deep (a parent link that loops is followed once). Shared by the read-model listing and
    the aggregate one (runtime/app/queries.py), so the two cannot disagree on what is hidden."""

    def under_archived(sid: K | None) -> bool:
        seen: set[K] = set()
        while sid is not None and sid not in seen:
            if sid in archived:
                return True
            seen.add(sid)
            sid = parents.get(sid)
        return False

    return {sid for sid in parents if under_archived(sid)}


def as_listed(status: str, queued: int, in_flight: bool, job_cancelled: bool) -> tuple[str, int]:
    """The listing's `status` and `queued` for a session. A cancelled job (`jobs cancel`) with no turn in flight is
    over: `cancelled`, as `jobs` says, with nothing `queued`, since no worker and no `resume` runs its inputs
    (runtime/app/worker.py: cancelled_before_start). It was listed `idle` with its input `queued` forever, which the
    table showed as `queued (1)`, "waiting for a worker". A turn in flight is listed by its own status until it ends.
    Shared by the read-model listing and the aggregate one (runtime/app/queries.py), so the two cannot disagree."""
    if job_cancelled and not in_flight:
        return "cancelled", 0
    return status, queued


#: The statuses of a turn in flight that a process should be running now (not one paused for a person's decision).
RUN_BY_A_PROCESS = frozenset({"pending", "running"})


def unless_nobody_runs_it(status: str, in_flight: bool, held: Callable[[], bool]) -> str:
    """A turn in flight `running` (or `pending`) whose session's lease no live process holds — its process was killed
    (`kill -9`, a crash, a machine lost) and the lease expired, or its holder is a process of this machine that is gone —
    is listed `interrupted`: nothing will end it but `resume` (or a worker), as the refusals of a busy session say
    (runtime/app/stalled.py). `held` is asked only then: the listing looks up no lease for a session at rest. Shared by
    the read-model listing and the aggregate one, so the two cannot disagree."""
    if in_flight and status in RUN_BY_A_PROCESS and not held():
        return "interrupted"
    return status


def oldest_first(rows: list[R], created_at: Callable[[R], Any]) -> list[R]:
    """`rows` by their session's own creation time (ISO text or a datetime), index order among equal times.
    The index lists a session when it arrives in this store: an imported session, created in its source
    long before, came after every session already here, so `sessions` stopped being oldest first. Shared by
    the read-model listing and the aggregate one (runtime/app/queries.py). A time that does not parse
    keeps its place after the others."""

    def when(row: R) -> tuple[int, datetime]:
        value = created_at(row)
        try:
            at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
        except ValueError:
            return 1, datetime.min.replace(tzinfo=timezone.utc)
        return 0, at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)

    return sorted(rows, key=when)


def listed_ids(rows: Rows) -> list[str]:
    """Every indexed session id, oldest first, archived ones too (`ChronicleStore.session_ids`)."""
    return [r["session_id"] for r in rows.dicts("SELECT session_id FROM proj_summaries_index ORDER BY listed")]


def session_rows(rows: Rows, archived: bool = False, held: Callable[[str], bool] = lambda sid: True) -> list[dict[str, Any]]:
    """The objects `sessions --json` prints, oldest first; archived sessions (and sub-agents of
    archived ones) only with `archived`. Raises Deferred when only the aggregates can answer.
    `held(session_id)`: whether a live process holds the session's lease (asked only of a turn in flight that a process
    should be running: unless_nobody_runs_it)."""
    if rows.dicts("SELECT position FROM proj_summaries_unreadable LIMIT 1"):
        raise Deferred("an event the projections passed over")
    found = rows.dicts(
        "SELECT s.session_id, s.title, s.status, s.active_turn_id, t.status AS turn_status, s.agent, s.created_at, "
        "s.parent_session_id, s.forked_from, s.turns, s.queue, s.archived, s.model, s.instance, s.job_cancelled, "
        "s.last_turn_id, lt.status AS last_turn_status FROM proj_summaries_index i "
        "JOIN proj_summaries s ON s.session_id = i.session_id "
        "LEFT JOIN proj_summaries_turns t ON t.turn_id = s.active_turn_id "
        "LEFT JOIN proj_summaries_turns lt ON lt.turn_id = s.last_turn_id ORDER BY i.listed"
    )
    if not archived:
        hidden = archived_trees({r["session_id"]: r["parent_session_id"] for r in found},
                                {r["session_id"] for r in found if r["archived"]})
        found = [r for r in found if r["session_id"] not in hidden]
    found = oldest_first(found, lambda r: r["created_at"])
    repairs = {
        r["session_id"]: r["status"]
        for r in rows.dicts("SELECT session_id, status FROM proj_summaries_repairs "
                            "WHERE listed IS NOT NULL AND session_id IS NOT NULL AND status IS NOT NULL ORDER BY listed")
    }
    costs = CostReport(rows)
    listing = []
    for r in found:
        status, last = r["status"], r["last_turn_status"]  # None: no turn yet (or a fork's inherited one not here)
        if r["active_turn_id"] is not None:
            if r["turn_status"] is None:
                raise Deferred(f"session {r['session_id']}: its running turn has no recorded status")
            sid: str = r["session_id"]
            status = unless_nobody_runs_it(r["turn_status"], True, functools.partial(held, sid))
            if r["last_turn_id"] == r["active_turn_id"]:
                last = status
        status, queued = as_listed(status, 0 if r["queue"] in (None, "", "[]") else len(json.loads(r["queue"])),
                                   r["active_turn_id"] is not None, bool(r["job_cancelled"]))
        listing.append({
            "session_id": r["session_id"],
            "title": r["title"],
            "status": status,
            "agent": r["agent"],
            "created_at": r["created_at"],
            "parent_session_id": r["parent_session_id"],
            "forked_from": None if r["forked_from"] is None else json.loads(r["forked_from"]),
            "turns": int(r["turns"]),
            "queued": queued,
            "cost": costs.total_usd(r["session_id"]),
            "repair": repairs.get(r["session_id"]),
            "archived": bool(r["archived"]),
            "model": r["model"] or None,
            "instance": r["instance"] or None,
            "last_turn_status": last,
        })
    return listing
