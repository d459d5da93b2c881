"""Why the agent made one decision (`chronicle why`): the chain from what it was asked to what it did.

`audit` lists every decision in commit order; answering "why did it call that tool?" from it means
reading a turn's rows side by side with `history --at T --step S`. This puts one decision's chain
in one answer, each part from the events that recorded it, with their log positions as evidence:

- asked: the turn's input and the steering that reached the model before this step;
- saw: what the model was sent for the step (its size, and the message just before the decision:
  the input, a tool's result or a steering message), as `history --at T --step S` shows it all;
- decided: the model's response at that step (text, thinking, the tool uses with their input);
- checked: what happened to the call before it ran (approval asked, given or refused, and by whom);
- did: the call's end (status, result as the model read it, duration, files changed);
- then: what the model did next with that result (the next step, or how the turn ended);
- delegated_by: for a sub-agent, the parent's call that started it.

The decision is a tool call named by its tool_use id (as `history` shows it), its id or unique
prefix, or a tool's name (its last call); by default the last tool call of the active branch, or, on a
branch that called none, its last turn's answer. With `turn` and no call, the turn's last model decision (its
final answer, or where it stopped).
Turns are numbered as `history --at`, `log` and `audit` number them; a call undone since is found too, after the
active branch, and says so (`on_branch: false`).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from chronicle.domain.ids import tool_call_id
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from ..pasteable import pasteable
from ..store import ChronicleStore, NotFound
from ..timetravel import numbered_turns
from .errors import NOT_FOUND, AppError
from .queries import history, session_id

#: The longest text of a result or a message this answer repeats; `history` and `audit` show it whole.
SHOWN = 2000
#: Turns read at a time while looking for the decision, from the branch's end.
SCAN = 20


def why(store: ChronicleStore, ref: str | UUID, call: str | None = None, turn: int | None = None) -> dict[str, Any]:
    """`why SESSION [CALL] [--turn N] --json`. Unknown calls and turns are AppError 1; a turn out of range 2."""
    sid = session_id(store, ref)
    session = store.session(sid)
    numbered = numbered_turns(store, session)
    number, found, step, use = _decision(store, sid, numbered, list(session.head), call, turn)
    chain: dict[str, Any] = {"session_id": str(sid), "turn": number, "turn_id": str(found.id), "step": step,
                             "on_branch": found.id in session.head}
    evidence: set[int] = set()
    turn_events = list(store.events_with_positions([found.id]))
    chain["asked"] = _asked(store, found, step, turn_events, evidence)
    chain["saw"] = _saw(store, sid, number, step)
    chain["decided"] = _decided(found, step, turn_events, evidence)
    chain["saw"]["shaped_by"] = _shaped_by(turn_events, chain["decided"].get("position"), evidence)
    chain["tool_call"] = _call(store, found, step, use, evidence) if use is not None else None
    chain["then"] = _then(found, step, turn_events, evidence)
    chain["delegated_by"] = _parent(store, session)
    chain["evidence"] = sorted(evidence)
    chain["evidence_in"] = _evidence_in(store, sid, found)
    return chain


def _evidence_in(store: ChronicleStore, sid: UUID, turn: Turn) -> dict[str, Any]:
    """The session whose `log` lists the evidence: the turn's own. A fork's inherited turn was recorded in the
    session it was forked from (or that one's origin), and `log FORK` lists only what the fork recorded, so
    pointing at the fork's log named positions it does not show. `present`: whether this store holds that
    session (a fork imported without its origin brings the turns, not the session)."""
    if turn.session_id == sid:
        return {"session_id": str(sid), "inherited": False, "present": True}
    try:
        store.session(turn.session_id, copy=False)
        present = True
    except NotFound:
        present = False
    return {"session_id": str(turn.session_id), "inherited": True, "present": present}


def _decision(store: ChronicleStore, sid: UUID, numbered: list[UUID], head: list[UUID], call: str | None,
              turn: int | None) -> tuple[int, Turn, int, dict[str, Any] | None]:
    """(turn number, turn, step, tool_use block or None) of the decision asked about.

    Turns are numbered as `history --at`, `log` and `audit` number them (a fork's inherited ones first, then the
    session's own in the order they began, undone ones included), so the `history --at T --step S` the answer
    prints is that turn's. A call is looked for on the active branch first, from its end a few turns at a time
    (the decision asked about is usually recent, and a session long), then among the turns undone since: an
    auditor's question is often about what was taken back."""
    if not numbered:
        raise AppError(f"session {sid} has no turn yet: nothing was decided", 1)
    if turn is not None and not 1 <= turn <= len(numbered):
        raise AppError(f"session {sid} has {len(numbered)} turn(s); --turn takes 1 to {len(numbered)}", 2)
    number_of = {t: n for n, t in enumerate(numbered, 1)}
    if call is None:
        if turn is not None:
            return _answer(store, sid, numbered, turn)
        if not head:
            raise AppError(f"every turn of session {sid} was undone: name a CALL or --turn N to explain one of them", 1)
        if (found := _scan(store, head, number_of, "")) is not None:
            return found
        # Nothing named and no tool ever called: the last decision there is is the last turn's answer.
        return _answer(store, sid, numbered, number_of[head[-1]])
    wanted = call.strip()
    on_branch = set(head)
    places = [[numbered[turn - 1]]] if turn is not None else [head, [t for t in numbered if t not in on_branch]]
    # A tool_use id or a call's id, or a tool's name, names a call exactly (its last, if it is named more than once);
    # only when nothing is named exactly is CALL taken as the beginning of a call's id, which must then be unique:
    # a tool called `cafe` is its call, not a call whose id begins "cafe".
    for place in places:
        if (found := _scan(store, place, number_of, wanted)) is not None:
            return found
    if len(wanted) >= 4:
        matches = [m for place in places for m in _prefixed(store, place, number_of, wanted.lower())]
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = "; ".join(f"turn {n} step {step} {block.get('name')} {tool_call_id(t.id, step, block['id'])}"
                              for n, t, step, block in matches[:5])
            more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
            raise AppError(f"{wanted!r} begins the ids of {len(matches)} tool calls ({shown}{more}); give more of the id, "
                           "or --turn N", 2)
    where = f"turn {turn} of session {sid}" if turn is not None else f"session {sid}, its active branch or undone turns"
    # Code 2, as a --turn out of range and a session id that names nothing: CALL is an argument as typed.
    raise AppError(f"no tool call {wanted!r} on {where}; name one by its tool_use id as `history` shows it, its tool call "
                   f"id or a prefix, or its tool's name: `{pasteable(f'audit --session {sid}', store.url)}` lists every call", 2, kind=NOT_FOUND)


def _scan(store: ChronicleStore, turns: list[UUID], number_of: dict[UUID, int],
          wanted: str) -> tuple[int, Turn, int, dict[str, Any]] | None:
    """The last tool call in `turns` that `wanted` names exactly, by its tool_use id, its id or its tool's name (any
    call when empty), read from their end."""
    last = len(turns)
    while last >= 1:
        start = max(1, last - SCAN + 1)
        for t in reversed(store.turns(turns[start - 1:last])):
            for entry in reversed(t.steps):
                for block in reversed(entry["response"].get("content", [])):
                    if block.get("type") != "tool_use":
                        continue
                    cid = str(tool_call_id(t.id, entry["step"], block["id"]))
                    if not wanted or wanted in (block["id"], block.get("name")) or wanted.lower() == cid:
                        return number_of[t.id], t, entry["step"], block
        last = start - 1
    return None


def _prefixed(store: ChronicleStore, turns: list[UUID], number_of: dict[UUID, int],
              prefix: str) -> list[tuple[int, Turn, int, dict[str, Any]]]:
    """Every tool call in `turns` whose id begins `prefix`, the newest first."""
    found = []
    for t in reversed(store.turns(turns)):
        for entry in reversed(t.steps):
            for block in reversed(entry["response"].get("content", [])):
                if block.get("type") == "tool_use" and str(tool_call_id(t.id, entry["step"], block["id"])).startswith(prefix):
                    found.append((number_of[t.id], t, entry["step"], block))
    return found


def _answer(store: ChronicleStore, sid: UUID, numbered: list[UUID], turn: int) -> tuple[int, Turn, int, None]:
    """Turn `turn`'s last model decision: its final answer, or where it stopped."""
    [found] = store.turns([numbered[turn - 1]])
    if not found.steps:
        raise AppError(f"turn {turn} of session {sid} made no model call", 1)
    return turn, found, len(found.steps) - 1, None


def _asked(store: ChronicleStore, turn: Turn, step: int, events: list[tuple[int, Any]], evidence: set[int]) -> dict[str, Any]:
    evidence.add(events[0][0])  # Turn.Created holds the input
    steering = []
    # Steering is recorded on the turn's session (which may be a fork's parent, for an inherited turn).
    delivered = {}
    for position, e in store.events_with_positions([turn.session_id], topic_suffix=".SteeringDelivered"):
        if e.turn_id == turn.id and e.step < step:
            for steer_id in e.steer_ids:
                delivered[steer_id] = position
    if delivered:
        for position, e in store.events_with_positions([turn.session_id], topic_suffix=".SteeringQueued"):
            if e.steer_id in delivered:
                steering.append({"text": e.text, "actor": e.actor, "at": e.timestamp.isoformat(), "position": position})
                evidence.update((position, delivered[e.steer_id]))
    return {"input": turn.input_text, "input_id": turn.input_id, "agent": turn.agent, "steering": steering}


def _saw(store: ChronicleStore, sid: UUID, position: int, step: int) -> dict[str, Any]:
    """The request's size and the message just before the decision, as `history --at --step` shows them."""
    messages = history(store, sid, at=position, step=step)
    last = messages[-1] if messages else None
    return {
        "messages": len(messages),
        "last": _clip_message(last) if last is not None else None,
        # data, the same from the CLI, the library and HTTP: not shaped by the CHRONICLE_DB of the process asking
        "history": pasteable(f"history {sid} --at {position} --step {step}", store.url, shell=False),
    }


def _shaped_by(events: list[tuple[int, Any]], decided_at: int | None, evidence: set[int]) -> list[dict[str, Any]]:
    """The turn's guardrails and middleware recorded before the decision: what changed what the model was sent."""
    shaped = []
    for position, e in events:
        if decided_at is not None and position > decided_at:
            break
        if isinstance(e, (Turn.GuardrailApplied, Turn.MiddlewareApplied)):
            mark = dict(e.mark)
            kind = "guardrail" if isinstance(e, Turn.GuardrailApplied) else "middleware"
            shaped.append({"kind": kind, "name": mark.get(kind), "action": mark.get("action"), "where": mark.get("where"),
                           "position": position})
            evidence.add(position)
    return shaped


def _decided(turn: Turn, step: int, events: list[tuple[int, Any]], evidence: set[int]) -> dict[str, Any]:
    entry = turn.steps[step]
    response = entry["response"]
    content = response.get("content", [])
    responded = next(((p, e) for p, e in events if isinstance(e, Turn.ModelResponded) and e.step == step), None)
    retried = [(p, e) for p, e in events if isinstance(e, Turn.ModelCallRetried) and e.step == step]
    retries = [{"attempt": e.attempt, "reason": e.reason, "position": p} for p, e in retried]
    evidence.update(p for p, _ in retried)
    decided: dict[str, Any] = {
        "at": entry.get("at"),
        "model": response.get("model"),
        **_said(content),
        "thinking": "".join(b.get("thinking") or "" for b in content if b.get("type") == "thinking"),
        "stop_reason": response.get("stop_reason"),
        "usage": response.get("usage"),
        "retries": retries,
    }
    if responded is not None:
        evidence.add(responded[0])
        decided.update(latency_ms=responded[1].latency_ms, attempts=responded[1].attempts, position=responded[0])
    return decided


def _call(store: ChronicleStore, turn: Turn, step: int, use: dict[str, Any], evidence: set[int]) -> dict[str, Any]:
    cid = tool_call_id(turn.id, step, use["id"])
    checks: list[dict[str, Any]] = []
    ends: dict[str, Any] = {}
    requested = None
    for position, e in store.events_with_positions([cid]):
        evidence.add(position)
        if isinstance(e, ToolCall.Requested):
            requested = position
        elif isinstance(e, ToolCall.ApprovalRequested):
            checks.append({"kind": "approval_requested", "reason": e.reason, "at": e.timestamp.isoformat(), "position": position})
        elif isinstance(e, ToolCall.Approved):
            checks.append({"kind": "approved", "by": e.by, "actor": e.actor, "always": e.always, "reason": e.reason,
                           "at": e.timestamp.isoformat(), "position": position})
        elif isinstance(e, ToolCall.Denied):
            checks.append({"kind": "denied", "by": e.by, "actor": e.actor, "reason": e.reason,
                           "at": e.timestamp.isoformat(), "position": position})
        elif isinstance(e, ToolCall.SecretsRedacted):
            checks.append({"kind": "secrets_redacted", "where": e.where, "counts": dict(e.counts), "position": position})
        elif isinstance(e, (ToolCall.Completed, ToolCall.Failed, ToolCall.Skipped, ToolCall.Cancelled, ToolCall.Interrupted)):
            ends = {"ended_at": e.timestamp.isoformat(), "ended_position": position}
    if requested is None:  # the response asked for it, but the call was never recorded (the turn ended first)
        return {"tool_call_id": str(cid), "tool_use_id": use["id"], "name": use.get("name"), "input": use.get("input"),
                "read_only": None, "status": "never requested", "reason": None, "attempts": 0, "duration_ms": None,
                "effects": [], "checks": [], "result": None, "requested_position": None}
    found = store.tool_call(cid)
    # A guardrail that changed (or failed open on) the result the model read is recorded among the call's effects.
    checks += [{"kind": "guardrail", "name": m["guardrail"], "action": m.get("action"), "where": m.get("where"),
                "error": m.get("error"), "position": ends.get("ended_position")} for m in found.effects if "guardrail" in m]
    result = None
    if found.resolved:
        block = turn.result_of(found)
        content = block.content if isinstance(block.content, str) else str(block.content)
        result = {"content": _clip(content), "is_error": block.is_error}
    return {
        "tool_call_id": str(cid), "tool_use_id": found.tool_use_id, "name": found.name, "input": found.input,
        "read_only": bool(found.flags.get("read_only")), "status": found.status, "reason": found.reason,
        "attempts": found.attempts, "duration_ms": found.duration_ms,
        "effects": [m for m in found.effects if "guardrail" not in m],
        "checks": checks, "result": result, "requested_position": requested, **ends,
    }


def _then(turn: Turn, step: int, events: list[tuple[int, Any]], evidence: set[int]) -> dict[str, Any] | None:
    """The next model decision in the turn, or how the turn ended after this one."""
    if step + 1 < len(turn.steps):
        nxt = turn.steps[step + 1]
        content = nxt["response"].get("content", [])
        for position, e in events:
            if isinstance(e, Turn.ModelResponded) and e.step == step + 1:
                evidence.add(position)
        return {"step": step + 1, **_said(content), "stop_reason": nxt["response"].get("stop_reason")}
    if not turn.finished:
        return {"turn_status": turn.status}
    end = next(((p, e) for p, e in reversed(events) if type(e).__name__ in _TURN_ENDS), None)
    if end is not None:
        evidence.add(end[0])
    return {"turn_status": turn.status, "final_text": turn.final_text, "reason": turn.reason}


def _said(content: list[dict[str, Any]]) -> dict[str, Any]:
    """A response's text and the tools it called, with their input: what a decision and the next one show."""
    return {
        "text": "".join(b.get("text") or "" for b in content if b.get("type") == "text"),
        "tool_uses": [{"id": b["id"], "name": b.get("name"), "input": b.get("input")} for b in content if b.get("type") == "tool_use"],
    }


_TURN_ENDS = {"Completed", "Failed", "Cancelled", "Stopped", "Interrupted"}


def _parent(store: ChronicleStore, session: Any) -> dict[str, Any] | None:
    if session.parent_session_id is None:
        return None
    out: dict[str, Any] = {"session_id": str(session.parent_session_id), "agent": session.spec.name}
    if session.spec.instance:  # seed 004: which of its agent's children this one is
        out["instance"] = session.spec.instance
    if session.parent_tool_call_id is not None:
        parent_call = store.find_tool_call(session.parent_tool_call_id)
        out["tool_call_id"] = str(session.parent_tool_call_id)
        if parent_call is not None:
            out.update(tool_use_id=parent_call.tool_use_id, name=parent_call.name, input=parent_call.input)
    return out


def _clip(text: str) -> str:
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


def _clip_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": _clip(content)}
    blocks = []
    for block in content or []:
        block = dict(block)
        for key in ("text", "content", "thinking"):
            if isinstance(block.get(key), str):
                block[key] = _clip(block[key])
        blocks.append(block)
    return {**message, "content": blocks}

