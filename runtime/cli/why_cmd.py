"""`chronicle why`: one decision's chain, from what the agent was asked to what it did next."""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from chronicle.runtime.app.why import why as explain

from .common import DbOption, JsonOption, cli_errors, open_store, out_console, pasted, print_json
from .render import short


def why(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix", show_default=False)],
    call: Annotated[Optional[str], typer.Argument(
        help="The tool call: its tool_use id as `history` shows it (tu_…), its id or a prefix, or a tool's name "
             "(its last call); default: the last tool call (the last answer if none was called)", show_default=False)] = None,
    turn: Annotated[Optional[int], typer.Option("--turn", min=1, help="Only in turn TURN (from 1, as history --at and audit number turns); without CALL, "
                                                "the turn's last model decision (its final answer)")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Why the agent made a decision: what it was asked, what it saw, what it decided, what was checked, what it did and what came next, each with the log positions that record it."""  # noqa: E501 - one paragraph
    with cli_errors():
        store = open_store(db, create=False)
        chain = explain(store, session, call, turn=turn)
        if as_json:
            print_json(chain)
            return
        show(chain, out_console, store.url)


def show(c: dict[str, Any], console: Console, url: str) -> None:
    """The chain as lines under their labels: what `why` prints, and chat's `/why`. `url`: the store's, for the
    `log` it suggests (runtime/pasteable.py)."""
    p = console.print
    d, call = c["decided"], c["tool_call"]
    what = f"{call['name']} ({call['tool_use_id']})" if call else "the answer"
    undone = "" if c.get("on_branch", True) else " [yellow](undone since: not on the active branch)[/]"
    p(f"[bold]Why {escape(what)}[/] — session {c['session_id'][:8]}, turn {c['turn']}, step {c['step']}{undone}")
    if c["delegated_by"]:
        parent = c["delegated_by"]
        p(_row("Started by", f"sub-agent {parent.get('instance') or parent['agent']} of session {parent['session_id'][:8]}"
                             + (f", via {parent.get('name')} ({parent.get('tool_use_id')})" if parent.get("name") else "")))
    asked = c["asked"]
    p(_row("Asked", f"{asked['agent']} was asked: {short(asked['input'], 160)}"))
    for s in asked["steering"]:
        p(_row("", f"then steered by {s['actor'] or 'someone'}: {short(s['text'], 140)}", position=s["position"]))
    saw = c["saw"]
    p(_row("Saw", f"{saw['messages']} message(s); the last: {short(_message_text(saw['last']), 160)}"))
    for m in saw.get("shaped_by") or []:
        p(_row("", f"{m['kind']} {m['name']} {m['action']}" + (f" ({m['where']})" if m.get("where") else ""), position=m["position"]))
    # A command to copy, never broken across lines: saw.history's, for the shell it is printed in (the field, data the
    # library returns too, reads no CHRONICLE_DB; this line, like the others' hints, does).
    history = pasted(f"history {c['session_id']} --at {c['turn']} --step {c['step']}", url)
    p(_row("", f"[dim]{history}[/]", raw=True), soft_wrap=True)
    decided = [f"text: {short(d['text'], 160)}"] if d["text"] else []
    if d["thinking"]:
        decided.insert(0, f"thinking: {short(d['thinking'], 160)}")
    decided += [f"called {u['name']}({short(json.dumps(u['input'], ensure_ascii=False), 120)}) [{u['id']}]" for u in d["tool_uses"]]
    decided.append(f"stop: {d['stop_reason']}" + (f", after {len(d['retries'])} retr{'y' if len(d['retries']) == 1 else 'ies'}"
                                                  if d["retries"] else ""))
    p(_row("Decided", f"{d['model'] or 'the model'}: " + decided[0], position=d.get("position")))
    for line in decided[1:]:
        p(_row("", line))
    if call:
        checks = [_check(k) for k in call["checks"]] or ["no approval asked" + (" (read-only)" if call.get("read_only") else "")]
        for i, line in enumerate(checks):
            p(_row("Checked" if i == 0 else "", line, raw=True))
        result = call["result"]
        did = f"{call['status']}" + (f" in {call['duration_ms']:.0f} ms" if call.get("duration_ms") else "")
        told = str(result["content"]) if result else call.get("reason") or ""
        if told.lower().startswith(f"{call['status']}:"):  # a denial's result reads "denied: REASON": said once
            told = told[len(call["status"]) + 1:].lstrip()
        if told:
            did += f": {short(told, 160)}"
        p(_row("Did", did, position=call.get("ended_position")))
        changed = [e.get("path") for e in call.get("effects") or [] if e.get("path")]
        if changed:
            p(_row("", "files: " + ", ".join(changed)))
    then = c["then"]
    if then is None:
        pass
    elif "step" in then:
        nxt = [f"called {u['name']}({short(json.dumps(u['input'], ensure_ascii=False), 100)})" for u in then["tool_uses"]]
        p(_row("Then", "; ".join(([short(then["text"], 160)] if then["text"] else []) + nxt) or str(then["stop_reason"])))
    elif "final_text" not in then:  # not ended: running, or waiting for an approval
        p(_row("Then", f"the turn is {then['turn_status'].replace('_', ' ')}"))
    else:
        end = then.get("final_text") or then.get("reason") or ""
        said = end and not (call is None and end == d["text"])  # the answer explained is the turn's end: said above
        p(_row("Then", f"the turn {then['turn_status']}" + (f": {short(end, 160)}" if said else "")))
    positions = f"evidence: log positions {', '.join(map(str, c['evidence']))}"
    held = c.get("evidence_in") or {"session_id": c["session_id"], "inherited": False, "present": True}
    log_hint = pasted(f"log {held['session_id'][:8]}", url)
    if not held["inherited"]:
        p(f"[dim]{positions} (`{log_hint}`)[/]", soft_wrap=True)
    elif held["present"]:  # an inherited turn: its rows are in the log of the session it was recorded in
        p(f"[dim]{positions}, recorded in session {held['session_id'][:8]}, which this fork inherits them from "
          f"(`{log_hint}`)[/]", soft_wrap=True)
    else:
        p(f"[dim]{positions}, recorded in session {held['session_id']}, which this fork inherits them from "
          "(not in this store: no `log` lists them)[/]", soft_wrap=True)


def _row(label: str, text: str, raw: bool = False, position: int | None = None) -> str:
    """One line under its label; `text` is escaped unless `raw` (it holds markup already)."""
    return f"[bold]{label:<10}[/] {text if raw else escape(text)}{_at(position)}"


def _at(position: int | None) -> str:
    return f"  [dim]@{position}[/]" if position is not None else ""


def _check(k: dict[str, Any]) -> str:
    who = k.get("actor") or k.get("by") or ""
    if k["kind"] == "approval_requested":
        return escape("approval asked" + (f": {k['reason']}" if k.get("reason") else "")) + _at(k["position"])
    if k["kind"] in ("approved", "denied"):
        how = f" ({k['by']})" if k.get("by") not in (None, "user", who) else ""
        why_ = f": {k['reason']}" if k.get("reason") else ""
        return escape(f"{k['kind']} by {who or 'someone'}{how}{why_}") + _at(k["position"])
    if k["kind"] == "guardrail":
        return escape(f"guardrail {k['name']} {k['action']} its result" + (f": {k['error']}" if k.get("error") else "")) + _at(k["position"])
    if k["kind"] == "secrets_redacted":
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(k["counts"].items()))
        return escape(f"secrets cut from its {k['where']}: {counts}") + _at(k["position"])
    return escape(k["kind"]) + _at(k.get("position"))


def _message_text(message: dict[str, Any] | None) -> str:
    if message is None:
        return "(none)"
    content = message.get("content")
    if isinstance(content, str):
        return f"{message['role']}: {content}"
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_result":
            body = block.get("content")
            body = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            parts.append(f"result of {block.get('tool_use_id')}{' (error)' if block.get('is_error') else ''}: {body}")
        elif kind == "tool_use":
            parts.append(f"{block.get('name')}(…)")
        else:
            parts.append(f"[{kind}]")
    return f"{message['role']}: " + " | ".join(parts)
