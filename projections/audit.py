"""Audit: one row per decision — model call, tool call with its input and result, approval,
retry, undo, redo, fork, sub-agent start, failure — with time, session, turn and links.

The row's key is the event's log position, so the trail is in commit order and a rebuild
reproduces it exactly. Session, Turn and ToolCall events without a dedicated handler still
get a row (kind = their event name), so a decision recorded by a newer feature is never
silently missing from the trail.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chronicle.domain.ids import tool_call_id
from chronicle.domain.job import Job
from chronicle.domain.repair import Repair
from chronicle.domain.routine_run import RoutineRun
from chronicle.domain.session import Session
from chronicle.domain.stored_response import expand
from chronicle.domain.task_board import DelegatedTask
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.domain.turn_steps import is_kept_ref

from .base import Projection, on
from .sql import Tx, dumps, iso

#: ToolCall and Turn events that end something, by class: (row kind, status, is_error) for turns.
TOOL_REASON_ENDS = {ToolCall.Skipped: "skipped", ToolCall.Cancelled: "cancelled", ToolCall.Interrupted: "interrupted"}
TURN_REASON_ENDS = {Turn.Cancelled: ("cancel", "cancelled", False), Turn.Interrupted: ("interrupted", "interrupted", True)}
SKIP = {cls.__qualname__ for cls in (Turn.Started, Turn.ApprovalRequested, ToolCall.Started,
                                     Session.TurnStarted, Session.TurnEnded, ToolCall.Requested)}


ROUTINE_END = {c.__qualname__: status for c, status in ((RoutineRun.Skipped, "skipped"), (RoutineRun.Completed, "completed"),
                                                        (RoutineRun.Failed, "failed"))}
TASK_STATUS = {c.__qualname__: status for c, status in ((DelegatedTask.Claimed, "in_progress"), (DelegatedTask.Completed, "completed"),
                                                        (DelegatedTask.Failed, "failed"))}


def _with_output(detail: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """A completed call's row detail with its output: the row a v2 event (output on the call) gave,
    whichever path adds it, so a rebuild and a live run write the same row."""
    return {"input": detail.get("input"), "output": block.get("content", ""), **detail}


class AuditProjection(Projection):
    name = "audit"
    #: v2: delegated tasks and failure reflections (proj_audit_tasks), skills on session_start.
    #: v3: routine runs (proj_audit_routines), self-repairs (proj_audit_repairs).
    #: v4: guardrails that changed an input or a final answer, or failed open (Turn.GuardrailApplied).
    #: v5: decisions of middleware around a run (Turn.MiddlewareApplied); subtasks of a tool call that then
    #: failed (ToolCall.EffectsRecorded).
    #: v6: a completed call's output comes from its turn's result (ToolCall.Completed v3 has none).
    #: v7: a call still waiting for that result at the end of a transaction is listed in
    #: proj_audit_waiting, instead of being looked up by tool_call_id for every result.
    #: (ToolCall.FinishedAfterAbandon, newer than v7, gets its own row kind, tool_finished_late, and
    #: Session.ModelChanged its row model_changed: no store held one before, so no row built earlier
    #: changes and the version stays.)
    #: v8: an `import` row per SessionsImported (the sessions an import brought in, and from where).
    version = 8
    tables = {
        "proj_audit_sessions": "session_id TEXT PRIMARY KEY, parent_session_id TEXT, parent_tool_call_id TEXT",
        "proj_audit_turns": "turn_id TEXT PRIMARY KEY, session_id TEXT, number BIGINT",
        "proj_audit_tasks": "task_id TEXT PRIMARY KEY, parent_session_id TEXT, child_session_id TEXT, agent TEXT",
        "proj_audit_routines": "run_id TEXT PRIMARY KEY, session_id TEXT, routine TEXT",
        "proj_audit_repairs": "repair_id TEXT PRIMARY KEY, session_id TEXT, kind TEXT, target TEXT",
        "proj_audit_calls": "tool_call_id TEXT PRIMARY KEY, session_id TEXT, turn_id TEXT, tool_use_id TEXT, name TEXT, input TEXT",
        # A completed call whose output (in its turn's result) was not in the same transaction:
        # a batch ended inside the commit. Empty at rest.
        "proj_audit_waiting": "tool_call_id TEXT PRIMARY KEY, position BIGINT NOT NULL",
        "proj_audit": "position BIGINT PRIMARY KEY, at TEXT, session_id TEXT, turn_id TEXT, turn BIGINT, tool_call_id TEXT, "
                      "kind TEXT, name TEXT, status TEXT, is_error BIGINT, detail TEXT, links TEXT",
    }
    indexes = (
        "CREATE INDEX IF NOT EXISTS proj_audit_by_session ON proj_audit (session_id, position)",
        "CREATE INDEX IF NOT EXISTS proj_audit_by_time ON proj_audit (at)",
    )

    def _row(self, tx: Tx, e: Any, position: int, kind: str, session_id: str | None, *, turn_id: str | None = None,
             tool_call_id: str | None = None, name: str | None = None, status: str | None = None, is_error: bool = False,
             detail: dict[str, Any] | None = None, links: dict[str, Any] | None = None) -> tuple[tuple[str, int], tuple[Any, ...]]:
        """Queues the row; returns its handle and values, so a handler can still change it in this transaction."""
        number = self._turn(tx, turn_id)[1] if turn_id else None
        parents = self._parents(tx, session_id)
        all_links = {k: v for k, v in {
            "parent_session_id": parents[0] if parents else None,
            "parent_tool_call_id": parents[1] if parents else None,
            **(links or {}),
        }.items() if v is not None}
        values = (position, iso(e.timestamp), session_id, turn_id, number, tool_call_id, kind, name, status, int(is_error),
                  dumps(detail or {}), dumps(all_links))
        return tx.insert_later("INSERT INTO proj_audit VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", values), values

    # -- sessions ------------------------------------------------------------------------------

    @on(Session.Started)
    def _started(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        parent, call = _s(e.parent_session_id), _s(e.parent_tool_call_id)
        tx.execute("INSERT INTO proj_audit_sessions VALUES (%s, %s, %s)", (sid, parent, call))
        tx.memo[("audit.session", sid)] = (parent, call)
        kind = "fork" if e.forked_from else ("subagent_start" if parent else "session_start")
        spec = e.spec or {}
        self._row(tx, e, position, kind, sid, name=spec.get("name"),
                  detail={"agent": spec.get("name"), "model": spec.get("model"), "tools": spec.get("tools"),
                          "depth": spec.get("depth"), "head_turns": len(e.head),
                          **({"instance": spec["instance"]} if spec.get("instance") else {}),  # seed 004's instance name
                          **({"actor": e.forked_from["actor"]} if (e.forked_from or {}).get("actor") else {}),
                          **({"skills": [{k: s.get(k) for k in ("name", "mode", "version", "sha256")} for s in spec["skills"]]}
                             if spec.get("skills") else {})},
                  links={"forked_from": e.forked_from} if e.forked_from else None)

    @on(Session.InputQueued, Session.InputWithAttachmentsQueued)
    def _input(self, tx: Tx, e: Any, position: int) -> None:
        detail = {"input_id": e.input_id, "text": e.text}
        if getattr(e, "attachments", None):
            detail["attachments"] = [b["source"] for b in e.attachments]  # references (hash, type, size, name), never bytes
        origin = getattr(e, "origin", None)
        if origin:  # a channel's input: who sent it, and through which channel
            detail.update(channel=origin["channel"], senders=list(origin["senders"]))
        self._row(tx, e, position, "input", str(e.originator_id), name=origin["channel"] if origin else None, status=e.kind,
                  detail=detail)

    @on(Session.ReplyDelivered, Session.ReplyFailed)
    def _reply(self, tx: Tx, e: Any, position: int) -> None:
        """A turn's answer posted back to the channel its input came from (never the receiver's secrets)."""
        failed = isinstance(e, Session.ReplyFailed)
        detail = {"channel": e.channel, "senders": list(e.senders), "receiver": e.receiver, "attempts": e.attempts,
                  "http_status": e.status, **({"error": e.error} if failed else {}),
                  **({"routine": e.routine} if getattr(e, "routine", None) else {})}  # a routine's findings (its `notify`)
        self._row(tx, e, position, "reply", str(e.originator_id), turn_id=str(e.turn_id), name=e.channel,
                  status="failed" if failed else "delivered", is_error=failed, detail=detail)

    @on(Session.TurnsUndone, Session.TurnsRedone)
    def _undo(self, tx: Tx, e: Session.TurnsUndone | Session.TurnsRedone, position: int) -> None:
        kind = "undo" if isinstance(e, Session.TurnsUndone) else "redo"
        self._row(tx, e, position, kind, str(e.originator_id), detail={"turn_ids": [str(t) for t in e.turn_ids], "actor": e.actor})

    @on(Session.TitleSet)
    def _title(self, tx: Tx, e: Any, position: int) -> None:
        self._row(tx, e, position, "title", str(e.originator_id), name=e.model or None, detail={"title": e.title, "usage": e.usage})

    @on(Session.TitleFailed)
    def _title_failed(self, tx: Tx, e: Any, position: int) -> None:
        self._row(tx, e, position, "title", str(e.originator_id), name=e.model or None, status="failed", is_error=True,
                  detail={"reason": e.reason, "usage": e.usage})

    @on(Session.WorkerFailed)
    def _worker_failed(self, tx: Tx, e: Any, position: int) -> None:
        self._row(tx, e, position, "worker_failure", str(e.originator_id), name=e.worker, status=f"failure {e.failures}",
                  is_error=True, detail={"error": e.error, "failures": e.failures, "retry_in_s": e.retry_in_s})

    @on(Session.ModelChanged)
    def _model_changed(self, tx: Tx, e: Any, position: int) -> None:
        """Who moved the session to which model, so a turn on another model than the first is explained."""
        self._row(tx, e, position, "model_changed", str(e.originator_id), name=e.model, status="changed",
                  detail={"model": e.model, "previous": e.previous, "thinking_tokens": e.thinking_tokens, "actor": e.actor})

    @on(Session.ToolAlwaysAllowed)
    def _always(self, tx: Tx, e: Any, position: int) -> None:
        self._row(tx, e, position, "always_allow", str(e.originator_id), name=e.tool_name)

    # -- turns ---------------------------------------------------------------------------------

    @on(Turn.Created)
    def _turn_created(self, tx: Tx, e: Any, position: int) -> None:
        tid, sid = str(e.originator_id), str(e.session_id)
        tx.execute("INSERT INTO proj_audit_turns VALUES (%s, %s, %s)", (tid, sid, e.number))
        tx.memo[("audit.turn", tid)] = (sid, e.number)
        self._row(tx, e, position, "turn_start", sid, turn_id=tid, name=e.agent, detail={"input_id": e.input_id, "input": e.input_text})

    @on(Turn.ModelResponded)
    def _responded(self, tx: Tx, e: Turn.ModelResponded, position: int) -> None:
        tid = str(e.originator_id)
        response = expand(e.response)
        content = response.get("content", [])
        error = response.get("error")
        detail = {
            "step": e.step, "usage": response.get("usage"), "latency_ms": e.latency_ms, "attempts": e.attempts,
            "fingerprint": e.fingerprint, "tool_uses": [b.get("name") for b in content if b.get("type") == "tool_use"],
            "text": "".join(b.get("text") or "" for b in content if b.get("type") == "text"),
        }
        if error:
            detail["error"] = error
        self._row(tx, e, position, "model_call", self._session_of(tx, tid), turn_id=tid, name=response.get("model") or None,
                  status=response.get("stop_reason"), is_error=response.get("stop_reason") == "error", detail=detail)

    @on(Turn.ModelCallRetried)
    def _retry(self, tx: Tx, e: Turn.ModelCallRetried, position: int) -> None:
        tid = str(e.originator_id)
        error = e.error or {}  # every retry has one since v2 (older ones are upcast)
        self._row(tx, e, position, "retry", self._session_of(tx, tid), turn_id=tid, name=error.get("kind"), status=f"attempt {e.attempt}",
                  is_error=True, detail={"step": e.step, "attempt": e.attempt, "reason": e.reason, "delay_s": e.delay_s, "error": error})

    @on(Turn.Resumed)
    def _resumed(self, tx: Tx, e: Turn.Resumed, position: int) -> None:
        tid = str(e.originator_id)
        self._row(tx, e, position, "resume", self._session_of(tx, tid), turn_id=tid, detail={"reason": e.reason, "actor": e.actor})

    @on(Turn.GuardrailApplied)
    def _guardrail(self, tx: Tx, e: Any, position: int) -> None:
        tid = str(e.originator_id)
        mark = dict(e.mark)
        detail = {**{k: v for k, v in mark.items() if k not in ("guardrail", "action")}, "text": e.text}
        self._row(tx, e, position, "guardrail", self._session_of(tx, tid), turn_id=tid, name=mark.get("guardrail"),
                  status=mark.get("action"), is_error=mark.get("action") == "error", detail=detail)

    @on(Turn.MiddlewareApplied)
    def _middleware(self, tx: Tx, e: Any, position: int) -> None:
        tid = str(e.originator_id)
        mark = dict(e.mark)
        self._row(tx, e, position, "middleware", self._session_of(tx, tid), turn_id=tid, name=mark.get("middleware"),
                  status=mark.get("action"), detail={k: v for k, v in mark.items() if k not in ("middleware", "action")})

    @on(Turn.Completed)
    def _turn_completed(self, tx: Tx, e: Any, position: int) -> None:
        self._turn_end(tx, e, position, "turn_end", "completed", False, {"final_text": e.final_text})

    @on(Turn.Failed)
    def _turn_failed(self, tx: Tx, e: Any, position: int) -> None:
        self._turn_end(tx, e, position, "failure", "failed", True, {"reason": e.reason, "error": e.error})

    @on(Turn.Stopped)
    def _turn_stopped(self, tx: Tx, e: Any, position: int) -> None:
        self._turn_end(tx, e, position, "guard_stop", "stopped", True, {"reason": e.reason, "guard": e.guard})

    @on(*TURN_REASON_ENDS)
    def _turn_ended_for_a_reason(self, tx: Tx, e: Any, position: int) -> None:
        kind, status, is_error = next(v for cls, v in TURN_REASON_ENDS.items() if isinstance(e, cls))
        self._turn_end(tx, e, position, kind, status, is_error, {"reason": e.reason, "actor": getattr(e, "actor", None)})

    def _turn_end(self, tx: Tx, e: Any, position: int, kind: str, status: str, is_error: bool, fields: dict[str, Any]) -> None:
        tid = str(e.originator_id)
        detail = {k: v for k, v in fields.items() if v is not None}
        self._row(tx, e, position, kind, self._session_of(tx, tid), turn_id=tid, status=status, is_error=is_error, detail=detail)

    def _session_of(self, tx: Tx, turn_id: str) -> str | None:
        return self._turn(tx, turn_id)[0]

    # Lookups of rows that never change once written, kept per transaction (see Tx.memo).

    def _turn(self, tx: Tx, turn_id: str) -> tuple[str | None, int | None]:
        key = ("audit.turn", turn_id)
        if key not in tx.memo:
            row = tx.one("SELECT session_id, number FROM proj_audit_turns WHERE turn_id = %s", (turn_id,))
            tx.memo[key] = (row[0], row[1]) if row else (None, None)
        return tx.memo[key]

    def _parents(self, tx: Tx, session_id: str | None) -> tuple[str | None, str | None] | None:
        key = ("audit.session", session_id)
        if key not in tx.memo:
            row = tx.one("SELECT parent_session_id, parent_tool_call_id FROM proj_audit_sessions WHERE session_id = %s",
                         (session_id,))
            tx.memo[key] = (row[0], row[1]) if row else None
        return tx.memo[key]

    # -- tool calls ----------------------------------------------------------------------------

    @on(ToolCall.Requested)
    def _requested(self, tx: Tx, e: Any, position: int) -> None:
        row = (str(e.originator_id), str(e.session_id), str(e.turn_id), e.tool_use_id, e.name, dumps(e.input))
        tx.execute("INSERT INTO proj_audit_calls VALUES (%s, %s, %s, %s, %s, %s)", row)
        tx.memo[("audit.call", row[0])] = _call_of(row[1:])  # exactly what reading the row back gives

    def _call(self, tx: Tx, call_id: str) -> dict[str, Any]:
        key = ("audit.call", call_id)
        if key not in tx.memo:
            row = tx.one("SELECT session_id, turn_id, tool_use_id, name, input FROM proj_audit_calls WHERE tool_call_id = %s", (call_id,))
            tx.memo[key] = _call_of(row) if row else {"session_id": None, "turn_id": None, "tool_use_id": None, "name": None, "input": None}
        return tx.memo[key]

    @on(ToolCall.ApprovalRequested)
    def _approval_requested(self, tx: Tx, e: Any, position: int) -> None:
        reason = getattr(e, "reason", None)  # v2: why a hook asked (doom loop, the user's hook)
        self._tool_row(tx, e, position, "approval_requested", "awaiting_approval", False, {"reason": reason} if reason else {})

    @on(ToolCall.Approved)
    def _approved(self, tx: Tx, e: ToolCall.Approved, position: int) -> None:
        detail = {"by": e.by, "always": e.always, "actor": e.actor}
        if getattr(e, "reason", None):  # v3: why the approval policy approved
            detail["reason"] = e.reason
        self._tool_row(tx, e, position, "approval", "approved", False, detail)

    @on(ToolCall.Denied)
    def _denied(self, tx: Tx, e: ToolCall.Denied, position: int) -> None:
        self._tool_row(tx, e, position, "approval", "denied", False, {"by": e.by, "reason": e.reason, "actor": e.actor})

    @on(ToolCall.EffectsRecorded)
    def _effects(self, tx: Tx, e: Any, position: int) -> None:
        self._tool_row(tx, e, position, "tool_effects", "running", any(m.get("is_error") for m in e.effects), {"effects": e.effects})

    @on(ToolCall.FinishedAfterAbandon)
    def _finished_late(self, tx: Tx, e: ToolCall.FinishedAfterAbandon, position: int) -> None:
        """A sync function a cancel or a timeout could not stop ran to its end after its call ended."""
        self._tool_row(tx, e, position, "tool_finished_late", "failed" if e.raised else "completed", e.raised,
                       {"output": e.output, "raised": e.raised, "duration_ms": e.duration_ms})

    @on(ToolCall.Completed)
    def _tool_completed(self, tx: Tx, e: ToolCall.Completed, position: int) -> None:
        cid = str(e.originator_id)
        # Since v3 the output is stored by the turn, in the same commit: usually read next (_turn_results).
        output = e.output if e.output is not None else tx.memo.pop(("audit.output", cid), None)
        fields = {"output": output, "duration_ms": e.duration_ms, "effects": e.effects or None}
        queued = self._tool_end(tx, e, position, "completed", e.is_error, fields)
        if output is None:  # listed as waiting unless its result comes in this transaction (then struck off)
            waiting = tx.insert_later("INSERT INTO proj_audit_waiting VALUES (%s, %s)", (cid, position))
            tx.memo[("audit.ended", cid)] = (*queued, waiting)
        else:
            tx.memo[("audit.ended", cid)] = None

    @on(Turn.ToolResultsKept, Turn.ToolResultsRecorded)
    def _turn_results(self, tx: Tx, e: Any, position: int) -> None:
        """Gives a completed call's row its output, which the turn stores (ToolCall.Completed v3)."""
        tid = e.originator_id
        for block in e.blocks:
            if block.get("type") != "tool_result" or is_kept_ref(block):
                continue
            cid = str(tool_call_id(tid, e.step, block["tool_use_id"]))
            key = ("audit.ended", cid)
            if key in tx.memo:  # the call ended in this transaction
                ended = tx.memo.pop(key)
                if ended is not None:
                    handle, values, waiting = ended
                    tx.replace_later(handle, (*values[:10], dumps(_with_output(json.loads(values[10]), block)), *values[11:]))
                    tx.cancel_later(waiting)
                continue
            position_of = self._waiting(tx).pop(cid, None)
            if position_of is None:  # no completed row waits for it: its end (if any) comes later in this transaction
                tx.memo[("audit.output", cid)] = block.get("content", "")
                continue
            detail = json.loads(tx.value("SELECT detail FROM proj_audit WHERE position = %s", (position_of,)))
            tx.execute("UPDATE proj_audit SET detail = %s WHERE position = %s", (dumps(_with_output(detail, block)), position_of))
            tx.execute("DELETE FROM proj_audit_waiting WHERE tool_call_id = %s", (cid,))

    def _waiting(self, tx: Tx) -> dict[str, int]:
        """Completed calls left waiting for their output by earlier transactions, read once per
        transaction (the table is empty unless a batch ended inside a commit)."""
        key = ("audit.waiting",)
        if key not in tx.memo:
            tx.memo[key] = {cid: position for cid, position in tx.rows("SELECT tool_call_id, position FROM proj_audit_waiting")}
        return tx.memo[key]  # type: ignore[no-any-return]

    @on(ToolCall.Failed)
    def _tool_failed(self, tx: Tx, e: ToolCall.Failed, position: int) -> None:
        self._tool_end(tx, e, position, "failed", True, {"output": e.error, "duration_ms": e.duration_ms})

    @on(*TOOL_REASON_ENDS)
    def _tool_ended_for_a_reason(self, tx: Tx, e: Any, position: int) -> None:
        status = next(v for cls, v in TOOL_REASON_ENDS.items() if isinstance(e, cls))
        self._tool_end(tx, e, position, status, status == "interrupted", {"reason": e.reason})

    def _tool_end(self, tx: Tx, e: Any, position: int, status: str, is_error: bool,
                  fields: dict[str, Any]) -> tuple[tuple[str, int], tuple[Any, ...]]:
        tx.memo[("audit.ended", str(e.originator_id))] = None  # its result, recorded by the turn, adds nothing
        return self._tool_row(tx, e, position, "tool_call", status, is_error, {k: v for k, v in fields.items() if v is not None})

    def _tool_row(self, tx: Tx, e: Any, position: int, kind: str, status: str, is_error: bool,
                  extra: dict[str, Any]) -> tuple[tuple[str, int], tuple[Any, ...]]:
        cid = str(e.originator_id)
        call = self._call(tx, cid)
        return self._row(tx, e, position, kind, call["session_id"], turn_id=call["turn_id"], tool_call_id=cid, name=call["name"],
                  status=status, is_error=is_error, detail={"input": call["input"], **extra},
                  links={"tool_use_id": call["tool_use_id"]})

    # -- the task board and failure reflections ------------------------------------------------

    @on(DelegatedTask.Opened)
    def _task_opened(self, tx: Tx, e: Any, position: int) -> None:
        row = (str(e.originator_id), str(e.parent_session_id), str(e.child_session_id), e.agent)
        tx.execute("INSERT INTO proj_audit_tasks VALUES (%s, %s, %s, %s)", row)
        tx.memo[("audit.task", row[0])] = row[1:]
        self._row(tx, e, position, "task", row[1], name=e.agent, status="pending",
                  detail={"task": e.task, "index": e.index, "task_id": row[0]},
                  links={"child_session_id": row[2], "parent_tool_call_id": str(e.parent_tool_call_id)})

    @on(DelegatedTask.Posted)
    def _task_posted(self, tx: Tx, e: Any, position: int) -> None:
        """A task put on the session's board ahead of delegation: no child until one claims it."""
        row = (str(e.originator_id), str(e.parent_session_id), None, e.agent or None)
        tx.execute("INSERT INTO proj_audit_tasks VALUES (%s, %s, %s, %s)", row)
        tx.memo[("audit.task", row[0])] = row[1:]
        self._row(tx, e, position, "task", row[1], name=row[3], status="pending",
                  detail={"task": e.task, "task_id": row[0], "posted": True})

    @on(DelegatedTask.ClaimedByChild)
    def _task_claimed_by_child(self, tx: Tx, e: Any, position: int) -> None:
        tid, child = str(e.originator_id), str(e.child_session_id)
        parent, _, _ = self._task(tx, tid)
        tx.execute("UPDATE proj_audit_tasks SET child_session_id = %s, agent = %s WHERE task_id = %s", (child, e.agent, tid))
        tx.memo[("audit.task", tid)] = (parent, child, e.agent)
        self._row(tx, e, position, "task", parent, name=e.agent, status="in_progress",
                  detail={"task_id": tid, "claimed_by": e.agent, "child_session_id": child, "index": e.index},
                  links={"child_session_id": child, "parent_tool_call_id": str(e.parent_tool_call_id)})

    @on(*TASK_STATUS)
    def _task_status(self, tx: Tx, e: Any, position: int) -> None:
        parent, child, agent = self._task(tx, str(e.originator_id))
        status = TASK_STATUS[type(e).__qualname__]
        detail = {"task_id": str(e.originator_id), **({"summary": e.summary} if hasattr(e, "summary") else {"claimed_by": e.agent})}
        self._row(tx, e, position, "task", parent, name=agent, status=status, is_error=status == "failed", detail=detail,
                  links={"child_session_id": child})

    @on(DelegatedTask.SecretsRedacted)
    def _task_redacted(self, tx: Tx, e: Any, position: int) -> None:
        """Secrets cut out of a posted task's text: a row on its board's session, as a session's own count is."""
        tid = str(e.originator_id)
        parent, _, agent = self._task(tx, tid)
        self._row(tx, e, position, "secrets_redacted", parent, name=agent,
                  detail={"where": f"{e.where} {tid}", "counts": dict(e.counts), "task_id": tid})

    @on(DelegatedTask.ReflectionRecorded)
    def _reflection(self, tx: Tx, e: Any, position: int) -> None:
        parent, child, agent = self._task(tx, str(e.originator_id))
        self._row(tx, e, position, "reflection", parent, name=agent,
                  detail={"task_id": str(e.originator_id), "task": e.task, "what_happened": e.what_happened,
                          "reason": e.failure, "keywords": e.keywords},
                  links={"child_session_id": child})

    def _task(self, tx: Tx, task_id: str) -> tuple[str | None, str | None, str | None]:
        key = ("audit.task", task_id)
        if key not in tx.memo:
            row = tx.one("SELECT parent_session_id, child_session_id, agent FROM proj_audit_tasks WHERE task_id = %s", (task_id,))
            tx.memo[key] = (row[0], row[1], row[2]) if row else (None, None, None)
        return tx.memo[key]

    # -- routines --------------------------------------------------------------------------------

    @on(RoutineRun.Fired)
    def _routine_fired(self, tx: Tx, e: Any, position: int) -> None:
        row = (str(e.originator_id), _s(e.session_id), e.routine)
        tx.execute("INSERT INTO proj_audit_routines VALUES (%s, %s, %s)", row)
        tx.memo[("audit.routine", row[0])] = row[1:]
        self._row(tx, e, position, "routine", row[1], name=e.routine, status="fired",
                  detail={"run_id": row[0], "trigger": e.trigger, "due": e.due, "action": e.action, "holder": e.holder,
                          "input_id": e.input_id, "scope": e.scope, **({"notify": e.notify} if getattr(e, "notify", None) else {}),
                          **({"replaces_session_id": str(e.replaces_session_id)} if getattr(e, "replaces_session_id", None) else {})})

    @on(*ROUTINE_END)
    def _routine_end(self, tx: Tx, e: Any, position: int) -> None:
        key = ("audit.routine", str(e.originator_id))
        if key not in tx.memo:
            row = tx.one("SELECT session_id, routine FROM proj_audit_routines WHERE run_id = %s", (str(e.originator_id),))
            tx.memo[key] = (row[0], row[1]) if row else (None, None)
        session_id, routine = tx.memo[key]
        status = ROUTINE_END[type(e).__qualname__]
        detail = {k: v for k, v in {"run_id": str(e.originator_id), "reason": getattr(e, "reason", None),
                                    "summary": getattr(e, "summary", None), "usd": getattr(e, "usd", None)}.items() if v is not None}
        self._row(tx, e, position, "routine", session_id, name=routine, status=status, is_error=status == "failed", detail=detail)

    # -- background jobs -----------------------------------------------------------------------

    @on(Job.Submitted, Job.Cancelled)
    def _job(self, tx: Tx, e: Any, position: int) -> None:
        submitted = isinstance(e, Job.Submitted)
        detail = {"prompt": e.prompt, "origin": e.origin} if submitted else {"reason": e.reason}
        self._row(tx, e, position, "job", str(e.session_id), status="submitted" if submitted else "cancelled", detail=detail)

    # -- self-repair ---------------------------------------------------------------------------

    @on(Repair.Detected)
    def _repair_detected(self, tx: Tx, e: Any, position: int) -> None:
        row = (str(e.originator_id), _s(e.session_id), e.kind, e.target)
        tx.execute("INSERT INTO proj_audit_repairs VALUES (%s, %s, %s, %s)", row)
        tx.memo[("audit.repair", row[0])] = row[1:]
        self._row(tx, e, position, "repair", row[1], name=e.kind, status="detected", is_error=True,
                  detail={"repair_id": row[0], "target": e.target, "reason": e.detail})

    @on(Repair.Attempted)
    def _repair_attempted(self, tx: Tx, e: Any, position: int) -> None:
        key = ("audit.repair", str(e.originator_id))
        if key not in tx.memo:
            row = tx.one("SELECT session_id, kind, target FROM proj_audit_repairs WHERE repair_id = %s", (str(e.originator_id),))
            tx.memo[key] = (row[0], row[1], row[2]) if row else (None, None, None)
        session_id, kind, target = tx.memo[key]
        self._row(tx, e, position, "repair", session_id, name=kind, status=e.result, is_error=e.result in ("failed", "manual_required"),
                  detail={"repair_id": str(e.originator_id), "target": target, "reason": e.detail})

    # -- erasure (`chronicle forget`) ------------------------------------------------------------

    @on("SessionForgotten")
    def _forgotten(self, tx: Tx, e: Any, position: int) -> None:
        """The erased session's own rows are gone with its key; this row says who erased it and when."""
        self._row(tx, e, position, "forget", str(e.session_id), status="forgotten",
                  detail={"actor": e.actor, "tree_id": str(e.tree_id)})

    # -- `chronicle import` ----------------------------------------------------------------------

    @on("SessionsImported")
    def _imported(self, tx: Tx, e: Any, position: int) -> None:
        """Which sessions came in from where (runtime/import_log.py): the bundle's signer or `unsigned`, its digests,
        the source's head, who imported it. Filed under the bundle's first session, the one that was exported."""
        sessions = [str(s) for s in e.session_ids]
        origin = dict(e.provenance) if e.provenance is not None else {"provenance": None}  # an entry older than v2
        self._row(tx, e, position, "import", sessions[0] if sessions else None, status="imported",
                  detail={"session_ids": sessions, **origin})

    # -- anything newer ------------------------------------------------------------------------

    def unhandled(self, tx: Tx, e: Any, position: int) -> None:
        name = type(e).__qualname__
        owner, _, event = name.partition(".")
        if owner not in ("Session", "Turn", "ToolCall") or name in SKIP:
            return
        fields = {k: v for k, v in vars(e).items() if k not in ("originator_id", "originator_version", "timestamp", "originator_topic")}
        oid = str(e.originator_id)
        if owner == "Session":
            self._row(tx, e, position, _snake(event), oid, detail=fields)
        elif owner == "Turn":
            self._row(tx, e, position, _snake(event), self._session_of(tx, oid), turn_id=oid, detail=fields)
        else:
            self._tool_row(tx, e, position, _snake(event), _snake(event), False, fields)


def _call_of(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"session_id": row[0], "turn_id": row[1], "tool_use_id": row[2], "name": row[3], "input": json.loads(row[4])}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _s(value: Any) -> str | None:
    return str(value) if value is not None else None
