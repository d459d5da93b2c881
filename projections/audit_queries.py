"""Reads of the audit trail (`proj_audit`, built by projections/audit.py): filtered, a few turns', a session's newest.

Apart from the projection because its readers (`chronicle audit`, the viewer) need only SQL over the table, not
the domain's event classes the projection dispatches on.
"""

from __future__ import annotations

from typing import Any

from .sql import Tx


def query(tx: Tx, session: str | None = None, tool: str | None = None, errors: bool = False,
          since: str | None = None, limit: int | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """The trail in commit order, filtered; `since` is an ISO time in the stored format. `limit`: the first rows
    only; `last`: the newest rows only (read from the end, still returned oldest first)."""
    where, params = [], []
    if session:
        where.append("session_id = %s")
        params.append(session)
    if tool:
        where.append("tool_call_id IS NOT NULL AND name = %s")
        params.append(tool)
    if errors:
        where.append("is_error = 1")
    if since:
        where.append("at >= %s")
        params.append(since)
    sql = "SELECT * FROM proj_audit" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY position"
    # A limit beyond any row count means "all": clamp to a 64-bit integer both databases accept.
    if last:
        return tx.dicts(f"{sql} DESC LIMIT {min(int(last), 2**63 - 1)}", params)[::-1]
    if limit:
        sql += f" LIMIT {min(int(limit), 2**63 - 1)}"
    return tx.dicts(sql, params)


def for_sessions_turns(tx: Tx, sessions: list[str], turn_ids: list[str]) -> list[dict[str, Any]]:
    """The trail of a few turns (a page of the viewer; a fork's inherited turns belong to its parent), in commit order."""
    if not turn_ids or not sessions:
        return []
    owners = ", ".join(["%s"] * len(sessions))
    marks = ", ".join(["%s"] * len(turn_ids))
    return tx.dicts(f"SELECT * FROM proj_audit WHERE session_id IN ({owners}) AND turn_id IN ({marks}) ORDER BY position",
                    [*sessions, *turn_ids])


def newest(tx: Tx, session: str, kinds: tuple[str, ...], limit: int) -> list[dict[str, Any]]:
    """The session's last `limit` rows of these kinds, oldest first, without reading the rest."""
    marks = ", ".join(["%s"] * len(kinds))
    rows = tx.dicts(f"SELECT * FROM proj_audit WHERE session_id = %s AND kind IN ({marks}) ORDER BY position DESC "
                    f"LIMIT {int(limit)}", [session, *kinds])
    return rows[::-1]
