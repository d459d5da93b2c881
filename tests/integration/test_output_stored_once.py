"""A tool's output is stored once, by its turn (issue 12, "each fact stored once").

A read-only tool's output is in the step's closing event; the output of one that must not run
twice is kept by the turn in the commit that ends the call, and the closing event refers to it.
ToolCall.Completed (v3) carries none. Everything that shows a call's output — `log --json`,
the audit trail, the calls of a turn, the conversation — still shows it, live and rebuilt.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from chronicle.domain.ids import tool_call_id
from chronicle.runtime.app.queries import audit, history_messages, log
from chronicle.runtime.jsonable import jsonable
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, tool_use, write_script

READ_MARK = "read-mark-6d1f"
BASH_MARK = "bash-42-mark"  # printed by the command, not written in it (its input is stored too)
SCRIPT = [
    response(text("Reading."), tool_use("r1", "read_file", path="marked.txt")),
    response(tool_use("b1", "bash", command="echo bash-$((6*7))-mark")),
    response(text("Done.")),
]


def run_once(db_url: str, workspace: Any, tmp_path: Any) -> tuple[ChronicleStore, UUID]:
    (workspace / "marked.txt").write_text(f"{READ_MARK}\n", encoding="utf-8")
    script = write_script(tmp_path / "s.json", SCRIPT)
    ran = cli("run", "read, then run", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=db_url)
    assert ran.returncode == 0, ran.stderr
    store = ChronicleStore(db_url)
    return store, store.session_ids()[-1]


def stored_fields(store: ChronicleStore, aggregate_id: UUID) -> list[tuple[str, str]]:
    """Each stored event of the aggregate as (class name, its fields as JSON)."""
    return [(type(e).__name__, json.dumps(jsonable({k: v for k, v in vars(e).items() if k != "timestamp"})))
            for e in store.events.get(aggregate_id)]


def test_each_output_is_stored_in_exactly_one_event_and_read_back_everywhere(db_url, workspace, tmp_path):
    store, sid = run_once(db_url, workspace, tmp_path)
    session = store.session(sid)
    turn = store.turn(session.turns[0])
    read, bash = (tool_call_id(turn.id, step, use) for step, use in ((0, "r1"), (1, "b1")))
    events = [(str(aid), name, fields) for aid in (sid, turn.id, read, bash) for name, fields in stored_fields(store, aid)]
    for mark, holder in ((READ_MARK, "ToolResultsRecorded"), (BASH_MARK, "ToolResultsKept")):
        holding = [(aid, name) for aid, name, fields in events if mark in fields]
        assert holding == [(str(turn.id), holder)], f"{mark} is stored in {holding}"
    assert [json.loads(fields)["output"] for _, name, fields in events if name == "Completed" and "is_error" in fields] == [None, None]

    # the model read both, in order, and the turn gives each call's result
    results = [b for step in turn.steps for b in step["results"] if b.get("type") == "tool_result"]
    assert [(b["tool_use_id"], READ_MARK in b["content"] or BASH_MARK in b["content"]) for b in results] == [("r1", True), ("b1", True)]
    assert BASH_MARK in turn.result_of(store.tool_call(bash)).content
    assert [(c.name, c.output is not None and (READ_MARK in c.output or BASH_MARK in c.output))
            for c in store.tool_calls_of(turn)] == [("read_file", True), ("bash", True)]

    # log --json: each Completed entry shows its output; the closing event its results, resolved
    entries = log(store, sid)
    completed = {e["data"]["name"]: e["data"]["output"] for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Completed"}
    assert READ_MARK in completed["read_file"] and BASH_MARK in completed["bash"]
    closing = [e["data"]["blocks"] for e in entries if e["event"] == "ToolResultsRecorded"]
    assert all("content" in b for blocks in closing for b in blocks)

    # the audit trail and the conversation, as projected
    rows = [r for r in audit(store, session=str(sid)) if r["kind"] == "tool_call"]
    outputs = {r["name"]: r["detail"].get("output", "") for r in rows}
    assert READ_MARK in outputs["read_file"] and BASH_MARK in outputs["bash"]
    for messages in (history_messages(store, sid), history_messages(store, sid, at=1)):  # from events; from the projection
        shown = json.dumps([m.model_dump(mode="json") for m in messages])
        assert shown.count(READ_MARK) == 1 and shown.count(BASH_MARK) == 1 and '"kept"' not in shown


def test_a_result_that_ran_before_an_approval_wait_is_kept_by_the_turn_and_read_after_approval(db_url, workspace, tmp_path):
    (workspace / "marked.txt").write_text(f"{READ_MARK}\n", encoding="utf-8")
    script = write_script(tmp_path / "s.json", [
        response(tool_use("r1", "read_file", path="marked.txt"), tool_use("b1", "bash", command="echo bash-$((6*7))-mark")),
        response(text("Done.")),
    ])
    provider = ("--provider", f"scripted:{script}", "--workspace", str(workspace))
    paused = cli("run", "read, then run", *provider, db=db_url)
    assert paused.returncode == 3, paused.stderr  # bash waits for approval; read_file has run
    store = ChronicleStore(db_url)
    sid = store.session_ids()[-1]
    turn = store.turn(store.session(sid).active_turn_id)
    assert READ_MARK in turn.steps[0]["kept"]["r1"]["content"] and turn.steps[0]["results"] is None
    assert store.tool_call(tool_call_id(turn.id, 0, "r1")).output is None  # the wait saved it, the turn holds its output

    assert cli("approve", str(sid), db=db_url).returncode == 0
    resumed = cli("resume", str(sid), *provider, db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    turn = ChronicleStore(db_url).turn(turn.id)
    assert [(b["tool_use_id"], READ_MARK in b["content"] or BASH_MARK in b["content"]) for b in turn.steps[0]["results"]] == [
        ("r1", True), ("b1", True)]
    holding = [name for name, fields in stored_fields(store, turn.id) if READ_MARK in fields]
    assert holding == ["ToolResultsKept"]
