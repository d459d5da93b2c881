"""History: each session's conversation on its active branch, as a UI shows it.

Turns own their messages (the user's input, each model response verbatim — failed ones too,
marked by their stop reason — and the tool results); a session's branch is the ordered list
of turn ids on its head. Undo shortens the branch and redo extends it, without touching
messages; a fork starts with a branch that names its parent's turns, copying nothing.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from pydantic import ConfigDict, TypeAdapter

from chronicle.domain.content import BlockList, sendable
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn
from chronicle.domain.turn_steps import is_kept_ref, resolve_kept
from chronicle.domain.wire_blocks import FINISHED_STOP_REASONS, dumps_as_is, has_cut_input

from .base import Projection, on
from .sql import Tx, dumps, iso
from .wire_text import segment, shown_messages

END_STATES: dict[type, str] = {
    Turn.Completed: "completed", Turn.Failed: "failed", Turn.Cancelled: "cancelled",
    Turn.Stopped: "stopped", Turn.Interrupted: "interrupted",
}


class HistoryProjection(Projection):
    name = "history"
    #: v2: each message carries the log position of the event that recorded it, so the
    #: conversation as of a point in the log is one indexed query (`history --at`, fork).
    #: v3: each message also carries `wire`, its blocks as the model is sent them (`Message.wire()`'s
    #: content, validated and normalised once, here), so a read of the past shows them without
    #: building a pydantic model per message (None: not sent, as `domain.context.step_messages`
    #: leaves out a response that did not finish, a cut tool input and their results); and
    #: `proj_history_marks` names the turns whose messages the rows cannot show alone (attachments,
    #: a guardrail's rewrite, a refusal: runtime/past_context.py reads those turns from events).
    #: v4: `proj_history_turn_ends`, each session's turn ends in order, so `history --at TURN`
    #: finds its cut in the projection, in the statement that reads the messages, instead of
    #: scanning the session's events for its TURN-th `TurnEnded` first.
    #: v5: a step's closing event refers to results kept earlier (Turn.ToolResultsKept, the only
    #: record of a completed tool's output): `proj_history_kept` holds them until their step closes.
    #: v6: `proj_history_spans`, each session's whole turns joined as wire text, `span_turns` at a
    #: time, while its branch only grew: `history --at TURN` on a long session reads a few spans and
    #: the rows of the turns after them, not two rows per turn (2,000 at 1,000 turns, the most of a
    #: cold PostgreSQL read). A message row's `content` is NULL where it equals its `wire` (nearly every
    #: row): stored once, as the spans store it again.
    #: v7: a turn whose final answer a guardrail rejected is marked from its failure on: later
    #: turns read a line saying it was withheld, not the rejected text.
    version = 7
    #: Turns per span. A read of the past fetches at most this many turns' rows beside its spans.
    span_turns = 32
    tables = {
        # `reshaped`: log position of the session's first undo, redo or compaction (None: its branch
        # has only ever grown, one turn at a time, so the branch as of a position is a prefix of it).
        "proj_history_sessions": "session_id TEXT PRIMARY KEY, agent TEXT, parent_session_id TEXT, "
                                 "forked_from TEXT, created_at TEXT, reshaped BIGINT",
        # `position`: of the event that put the turn on the branch.
        "proj_history_branch": "session_id TEXT NOT NULL, idx BIGINT NOT NULL, turn_id TEXT NOT NULL, position BIGINT, "
                               "PRIMARY KEY (session_id, idx)",
        "proj_history_turns": "turn_id TEXT PRIMARY KEY, session_id TEXT, number BIGINT, input_text TEXT, status TEXT, "
                              "final_text TEXT, reason TEXT, started_at TEXT, ended_at TEXT",
        # `content`: the blocks as recorded, NULL where that is exactly `wire` (read it as COALESCE(content, wire)).
        "proj_history_messages": "turn_id TEXT NOT NULL, seq BIGINT NOT NULL, step BIGINT, role TEXT, content TEXT, "
                                 "stop_reason TEXT, at TEXT, position BIGINT, wire TEXT, PRIMARY KEY (turn_id, seq)",
        # The session's `ordinal`-th `TurnEnded` (from 1, as `history --at` counts a session's own turns):
        # the turn it names, its log position and time.
        "proj_history_turn_ends": "session_id TEXT NOT NULL, ordinal BIGINT NOT NULL, turn_id TEXT, position BIGINT, at TEXT, "
                                  "PRIMARY KEY (session_id, ordinal)",
        # A turn with attachments, a guardrail's rewrite of its input or answer or rejection of its answer, or a
        # refusal, from `position` on.
        "proj_history_marks": "turn_id TEXT NOT NULL, position BIGINT NOT NULL, at TEXT, PRIMARY KEY (turn_id, position)",
        # Turns `first_idx` .. `end_idx - 1` of the session's branch (its turn ends `first_idx + 1` ..
        # `end_idx`), every message they show joined as one JSON array of wire messages; `roles`: the
        # first message's role and the last's, space-separated. Made only in order from the first turn
        # and only while the branch has grown one turn at a time, of turns with no mark.
        "proj_history_spans": "session_id TEXT NOT NULL, first_idx BIGINT NOT NULL, end_idx BIGINT NOT NULL, roles TEXT, "
                              "wire TEXT, PRIMARY KEY (session_id, end_idx)",
        # Results kept before their step closed, until the step's closing event refers to them.
        "proj_history_kept": "turn_id TEXT NOT NULL, step BIGINT NOT NULL, tool_use_id TEXT NOT NULL, block TEXT, "
                             "PRIMARY KEY (turn_id, step, tool_use_id)",
    }
    #: A turn's messages up to a log position (a turn as of one of its versions) found by index,
    #: not by reading every row of a long turn to test its position.
    indexes = ("CREATE INDEX IF NOT EXISTS proj_history_messages_position ON proj_history_messages (turn_id, position)",)

    @on(Session.Started)
    def _started(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute(
            "INSERT INTO proj_history_sessions VALUES (%s, %s, %s, %s, %s, %s)",
            (str(e.originator_id), (e.spec or {}).get("name"), _s(e.parent_session_id),
             dumps(e.forked_from) if e.forked_from else None, iso(e.timestamp), None),
        )
        self._append(tx, str(e.originator_id), [str(t) for t in e.head], position)

    @on(Session.TurnStarted)
    def _turn_started(self, tx: Tx, e: Any, position: int) -> None:
        self._append(tx, str(e.originator_id), [str(e.turn_id)], position)

    @on(Session.TurnsRedone)
    def _redone(self, tx: Tx, e: Any, position: int) -> None:
        self._reshaped(tx, e, position)
        self._append(tx, str(e.originator_id), [str(t) for t in e.turn_ids], position)

    @on(Session.TurnsUndone)
    def _undone(self, tx: Tx, e: Any, position: int) -> None:
        sid = str(e.originator_id)
        self._reshaped(tx, e, position)
        length = self._branch_length(tx, sid) - len(e.turn_ids)
        tx.execute("DELETE FROM proj_history_branch WHERE session_id = %s AND idx >= %s", (sid, length))
        tx.memo[("history.branch", sid)] = length

    @on(Session.Compacted)
    def _reshaped(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_history_sessions SET reshaped = %s WHERE session_id = %s AND reshaped IS NULL",
                   (position, str(e.originator_id)))

    @on(Session.TurnEnded)
    def _turn_ended(self, tx: Tx, e: Any, position: int) -> None:
        sid, key = str(e.originator_id), ("history.ends", str(e.originator_id))
        if key not in tx.memo:
            tx.memo[key] = int(tx.value("SELECT COUNT(*) FROM proj_history_turn_ends WHERE session_id = %s", (sid,)) or 0)
        tx.memo[key] += 1
        tx.insert_later("INSERT INTO proj_history_turn_ends VALUES (%s, %s, %s, %s, %s)",
                        (sid, tx.memo[key], str(e.turn_id), position, iso(e.timestamp)))
        if tx.memo[key] % self.span_turns == 0:
            self._span(tx, sid, tx.memo[key])

    def _span(self, tx: Tx, sid: str, end: int) -> None:
        """Join the session's last `span_turns` ended turns into a span, if the turns that ended are
        its branch's, in order, since its first turn or the span before, and none is marked: then
        every later cut of a branch that only grew shows exactly these messages for these turns (a
        finished turn records no further message)."""
        first = end - self.span_turns
        tx.flush(copy=False)  # the rows and turn ends queued in this transaction, so the reads below see them
        shape = tx.one("SELECT reshaped, forked_from, (SELECT COUNT(*) FROM proj_history_spans p WHERE p.session_id = %s "
                       "AND p.end_idx = %s) FROM proj_history_sessions WHERE session_id = %s", (sid, first, sid))
        if shape is None or shape[:2] != (None, None) or (first > 0 and not shape[2]):
            return
        ends = tx.rows("SELECT e.turn_id, b.turn_id FROM proj_history_turn_ends e LEFT JOIN proj_history_branch b "
                       "ON b.session_id = e.session_id AND b.idx = e.ordinal - 1 "
                       "WHERE e.session_id = %s AND e.ordinal > %s AND e.ordinal <= %s", (sid, first, end))
        if len(ends) != self.span_turns or any(ended != on_branch for ended, on_branch in ends):
            return
        found = tx.rows("SELECT b.idx, m.seq, m.step, m.role, m.stop_reason, m.wire, (SELECT COUNT(*) FROM proj_history_marks k "
                        "WHERE k.turn_id = b.turn_id) FROM proj_history_branch b JOIN proj_history_messages m ON m.turn_id = b.turn_id "
                        "WHERE b.session_id = %s AND b.idx >= %s AND b.idx < %s", (sid, first, end))
        if any(row[6] for row in found):
            return
        by_turn: dict[int, list[tuple[Any, ...]]] = {}
        for row in sorted(found, key=lambda r: (r[0], r[1])):
            by_turn.setdefault(row[0], []).append(row[1:6])
        joined = segment(shown_messages(by_turn[idx]) for idx in sorted(by_turn))
        if joined is not None:
            tx.execute("INSERT INTO proj_history_spans VALUES (%s, %s, %s, %s, %s)",
                       (sid, first, end, f"{joined.first_role} {joined.last_role}", joined.text))

    def _append(self, tx: Tx, sid: str, turn_ids: list[str], position: int) -> None:
        start = self._branch_length(tx, sid)
        for offset, turn_id in enumerate(turn_ids):
            tx.execute("INSERT INTO proj_history_branch VALUES (%s, %s, %s, %s)", (sid, start + offset, turn_id, position))
        tx.memo[("history.branch", sid)] = start + len(turn_ids)

    def _branch_length(self, tx: Tx, sid: str) -> int:
        """Counted once per transaction, then kept in memory: a batch counts each session once."""
        key = ("history.branch", sid)
        if key not in tx.memo:
            tx.memo[key] = int(tx.value("SELECT COUNT(*) FROM proj_history_branch WHERE session_id = %s", (sid,)) or 0)
        return tx.memo[key]

    @on(Turn.Created)
    def _turn_created(self, tx: Tx, e: Any, position: int) -> None:
        tid = str(e.originator_id)
        tx.execute(
            "INSERT INTO proj_history_turns VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (tid, str(e.session_id), e.number, e.input_text, "pending", None, None, iso(e.timestamp), None),
        )
        tx.memo[("history.seq", tid)] = 0  # a new turn has no messages yet
        content = [{"type": "text", "text": e.input_text}]
        self._message(tx, tid, None, "user", content, None, e.timestamp, position, SAME_AS_CONTENT)

    @on(Turn.ModelResponded)
    def _responded(self, tx: Tx, e: Any, position: int) -> None:
        response = e.response
        tid, content, stop = str(e.originator_id), response.get("content") or [], response.get("stop_reason")
        sent = is_sent(content, stop)
        tx.memo[("history.sent", tid, e.step)] = sent
        if stop == "refusal":
            self._mark(tx, e, position)  # the whole turn is left out of what the model reads
        recorded = response.get("content", [])
        # The content column keeps what was recorded; a response recorded without blocks sends none.
        wire = (SENDABLE_OF_CONTENT if recorded is content else sent_response(content, stop)) if sent else None
        self._message(tx, tid, e.step, "assistant", recorded, stop, e.timestamp, position, wire)

    @on(Turn.ToolResultsRecorded)
    def _results(self, tx: Tx, e: Any, position: int) -> None:
        tid = str(e.originator_id)
        sent = tx.memo.get(("history.sent", tid, e.step))
        if sent is None:  # the response was applied in an earlier transaction: its row says
            sent = self._response_sent(tx, tid, e.step)
        blocks = e.blocks
        if any(is_kept_ref(b) for b in blocks):
            blocks = resolve_kept(blocks, self._kept(tx, tid, e.step))
            tx.execute("DELETE FROM proj_history_kept WHERE turn_id = %s AND step = %s", (tid, e.step))
        # Results follow their response into the context only if that response is sent back.
        self._message(tx, tid, e.step, "user", blocks, None, e.timestamp, position, WIRE_OF_CONTENT if sent else None)

    @on(Turn.ToolResultsKept)
    def _kept_results(self, tx: Tx, e: Any, position: int) -> None:
        tid = str(e.originator_id)
        kept = self._kept(tx, tid, e.step)
        for block in e.blocks:
            kept[block["tool_use_id"]] = block
            # In the event's key order: read back by a later batch, the block must be the one a single batch holds,
            # or the message row it becomes differs from a rebuild's (its content stored apart from its wire form).
            tx.execute("INSERT INTO proj_history_kept VALUES (%s, %s, %s, %s)",
                       (tid, e.step, block["tool_use_id"], dumps(block, sort_keys=False)))

    @staticmethod
    def _kept(tx: Tx, tid: str, step: int) -> dict[str, Any]:
        key = ("history.kept", tid, step)
        if key not in tx.memo:
            rows = tx.rows("SELECT tool_use_id, block FROM proj_history_kept WHERE turn_id = %s AND step = %s", (tid, step))
            tx.memo[key] = {row[0]: json.loads(row[1]) for row in rows}
        return tx.memo[key]

    @staticmethod
    def _response_sent(tx: Tx, tid: str, step: int) -> bool:
        """Whether step `step`'s response row was found sent. It is the turn's newest row when its
        results arrive: read backwards by the key, one row, not every row of a long turn."""
        last = tx.one("SELECT step, wire FROM proj_history_messages WHERE turn_id = %s AND role = 'assistant' "
                      "ORDER BY seq DESC LIMIT 1", (tid,))
        if last is not None and last[0] == step:
            return last[1] is not None
        return tx.value("SELECT wire FROM proj_history_messages WHERE turn_id = %s AND step = %s AND role = 'assistant'",
                        (tid, step)) is not None

    @on(Turn.AttachmentsReferenced)
    def _attachments(self, tx: Tx, e: Any, position: int) -> None:
        self._mark(tx, e, position)

    @on(Turn.IterationsCompacted)
    def _steps_compacted(self, tx: Tx, e: Any, position: int) -> None:
        self._mark(tx, e, position)  # its older steps are read as a summary from then on: rebuilt from its events

    @on(Turn.GuardrailApplied)
    def _guardrail(self, tx: Tx, e: Any, position: int) -> None:
        if e.text is not None:  # only a rewrite changes what the model reads
            self._mark(tx, e, position)

    def _mark(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("INSERT INTO proj_history_marks VALUES (%s, %s, %s)", (str(e.originator_id), position, iso(e.timestamp)))

    def _message(
        self, tx: Tx, tid: str, step: int | None, role: str, content: list, stop: str | None, at: Any, position: int,
        wire: WireRule | str | None,
    ) -> None:
        """`wire` is None (not sent), the wire JSON, or says how the sent form follows from `content` (`WIRE_OF_CONTENT`,
        `SENDABLE_OF_CONTENT`, `SAME_AS_CONTENT`): worked out here, after the content's JSON, which is
        usually the wire form already."""
        # Messages are numbered in memory within a transaction: counted from the table once per
        # turn (its rows from earlier batches), then incremented. Rows are only ever counted
        # here, so they can be inserted together at the commit.
        key = ("history.seq", tid)
        if key not in tx.memo:
            tx.memo[key] = int(tx.value("SELECT COUNT(*) FROM proj_history_messages WHERE turn_id = %s", (tid,)) or 0)
        seq = tx.memo[key]
        tx.memo[key] = seq + 1
        text = dumps(content, sort_keys=False)
        if wire is SAME_AS_CONTENT:
            wire = text
        elif isinstance(wire, WireRule):
            wire = wire_form(content, text, sendable_only=wire is SENDABLE_OF_CONTENT)
        tx.insert_later("INSERT INTO proj_history_messages VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (tid, seq, step, role, None if wire == text else text, stop, iso(at), position, wire))

    @on(Turn.Started, Turn.Resumed)
    def _running(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_history_turns SET status = 'running' WHERE turn_id = %s", (str(e.originator_id),))

    @on(Turn.ApprovalRequested)
    def _awaiting(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("UPDATE proj_history_turns SET status = 'awaiting_approval' WHERE turn_id = %s", (str(e.originator_id),))

    @on(*END_STATES)
    def _ended(self, tx: Tx, e: Any, position: int) -> None:
        status = END_STATES[type(e)]
        ended = None if status == "interrupted" else iso(e.timestamp)
        if status == "failed" and (getattr(e, "error", None) or {}).get("guardrail"):
            self._mark(tx, e, position)  # a rejected answer is withheld from what the model reads (context_wire.sent_answer)
        tx.execute(
            "UPDATE proj_history_turns SET status = %s, final_text = %s, reason = %s, ended_at = %s WHERE turn_id = %s",
            (status, getattr(e, "final_text", None), getattr(e, "reason", None), ended, str(e.originator_id)),
        )


#: A message's blocks as `Message` validates them: known blocks inside pydantic-core in one call,
#: the rest block by block (`lenient_blocks`). Built at its first use: its schema took 18 ms of the
#: import, which every `history` and read-model command paid though few ever validate a block here.
_BLOCKS = TypeAdapter(BlockList, config=ConfigDict(defer_build=True))


class WireRule(Enum):
    """How a message row's wire form follows from its content (`_message`'s `wire`)."""

    #: Validated and dumped as `Message.wire()` does (an input's or tool results' blocks).
    WIRE_OF_CONTENT = "wire"
    #: The same, minus the blocks the API refuses back (`sendable`): a response sent back.
    SENDABLE_OF_CONTENT = "sendable"
    #: Exactly the content: a user's input text, one text block already.
    SAME_AS_CONTENT = "same"


WIRE_OF_CONTENT, SENDABLE_OF_CONTENT, SAME_AS_CONTENT = WireRule


def wire_form(blocks: list[Any], text: str, sendable_only: bool = False) -> str:
    """The wire form of blocks whose content JSON is `text`: `text` itself when the blocks dump as
    they are (nearly always: they were recorded from the wire), else validated and dumped."""
    if dumps_as_is(blocks, sendable_only) and "NaN" not in text and "Infinity" not in text:
        return text
    validated = _BLOCKS.validate_python(blocks)
    if sendable_only:
        validated = sendable(validated)
    return dumps(_BLOCKS.dump_python(validated, mode="json"), sort_keys=False)


def wire_of(blocks: list[Any]) -> str:
    """Blocks as `Message.wire()` gives them (validated, defaults filled in, the model's key order), as
    compact JSON: what `domain.context` sends for an input or a tool result."""
    return dumps(_BLOCKS.dump_python(_BLOCKS.validate_python(blocks), mode="json"), sort_keys=False)


def is_sent(content: list[Any], stop: str | None) -> bool:
    """Whether `domain.context.step_messages` sends a response back: it did not, when the response
    did not finish or a tool input was cut. A refusal counts as sent here; the reader leaves out its
    whole turn, as `turn_messages` does."""
    if stop not in FINISHED_STOP_REASONS:
        return False
    return not has_cut_input(content)


def sent_response(content: list[Any], stop: str | None) -> str | None:
    """A response's blocks as `domain.context.step_messages` sends them back (empty text left out), or
    None when it sends nothing of that step."""
    if not is_sent(content, stop):
        return None
    return wire_form(content, dumps(content, sort_keys=False), sendable_only=True)


def conversation(tx: Tx, session_id: str) -> list[dict[str, Any]]:
    """The session's active branch, message by message, oldest first."""
    return tx.dicts(
        "SELECT b.idx AS branch_index, t.turn_id, t.number AS turn, t.status AS turn_status, m.seq, m.step, m.role, "
        "COALESCE(m.content, m.wire) AS content, m.stop_reason, m.at FROM proj_history_branch b "
        "JOIN proj_history_turns t ON t.turn_id = b.turn_id "
        "JOIN proj_history_messages m ON m.turn_id = b.turn_id "
        "WHERE b.session_id = %s ORDER BY b.idx, m.seq",
        (session_id,),
    )


def _s(value: Any) -> str | None:
    return str(value) if value is not None else None
