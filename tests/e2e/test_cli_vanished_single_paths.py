"""A tool named by a single import path (`shop_tools:refund`) that was deleted or renamed since the session started:
the path no longer loads at all, where a list path (`shop_tools:TOOLS`) holds one tool fewer. Both are the same
change to the session, so both are checked against its history alike: a tool it never called is a note and the
session goes on without it (for the main agent and for sub-agents); one it called refuses it, naming the session,
the agent and the tool, with nothing recorded. A new session is still refused a path that does not load."""

from __future__ import annotations

import json
from uuid import UUID

from chronicle.runtime.store import ChronicleStore
from tests.closed_at_end import closed_at_end
from tests.e2e.delegation_helpers import HALT_TOOL, SHOP_TOOLS, died_while_the_clerk_worked, refused
from tests.helpers import cli, json_lines, response, text, tool_use

SHOP = SHOP_TOOLS + HALT_TOOL
WITHOUT_REFUND = SHOP.replace("def refund(", "def refund_order(")  # renamed: shop_tools:refund names nothing now

CLERK = """
[agents.main]
tools = ["read_file"]

[agents.clerk]
description = "Handles orders"
tools = ["shop_tools:lookup_order", "shop_tools:refund", "shop_tools:halt"]
"""


def notes(run) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith("note:")]


def test_a_sub_agents_single_path_deleted_since_is_a_note_on_its_parent_not_a_wedge(db_url, workspace, tmp_path):
    """Neither agent ever called refund: the parent's run, resume and replay go on, and the clerk it starts from now
    on goes without refund (its spec says the path held none when it was spawned). A new session is still refused."""
    (workspace / "chronicle.toml").write_text(CLERK, encoding="utf-8")
    (workspace / "shop_tools.py").write_text(SHOP, encoding="utf-8")
    task = tool_use("d1", "delegate", tasks=[{"agent": "clerk", "task": "where is order 7"}])
    provider = f"scripted:{tmp_path / 's.json'}"
    (tmp_path / "s.json").write_text(json.dumps({"agents": {
        "main": [[response(text("hello"))], [response(task), response(text("the clerk found it"))], [response(text("third"))]],
        "clerk": [[response(tool_use("c1", "lookup_order", order_id="7")),
                   response(tool_use("c2", "task_complete", status="completed", summary="shipped"))]],
    }}), encoding="utf-8")
    first = cli("run", "hello", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    (workspace / "shop_tools.py").write_text(WITHOUT_REFUND, encoding="utf-8")
    note = (f"note: session {sid}: shop_tools:refund of sub-agent clerk no longer loads (shop_tools has no attribute "
            "'refund'), which held 'refund' when the session started; the sub-agents it starts now go without it")
    delegated = cli("run", "where is 7", "--session", sid, "--json", db=db_url)
    assert delegated.returncode == 0, delegated.stderr
    assert notes(delegated) == [note] and json_lines(delegated.stdout)[-1]["status"] == "completed"
    store = closed_at_end(ChronicleStore(db_url))
    [child] = [store.session(s) for s in store.session_ids() if store.session(s).parent_session_id]
    assert child.status == "idle" and child.spec.import_tools == {
        "shop_tools:lookup_order": ("lookup_order",), "shop_tools:refund": (), "shop_tools:halt": ("halt",)}
    assert cli("submit", "third", "--session", sid, db=db_url).returncode == 0
    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0 and notes(resumed) == [note], resumed.stderr
    replayed = cli("replay", sid, db=db_url)
    assert replayed.returncode == 0 and replayed.stdout.startswith("identical: 3 turn(s)"), (replayed.stdout, replayed.stderr)
    refused(cli("run", "new", "--provider", provider, "--workspace", str(workspace), db=db_url),
            "cannot load tool 'shop_tools:refund': shop_tools has no attribute 'refund'")


def test_a_main_agents_single_path_renamed_since_is_a_note_if_never_called_and_a_refusal_naming_the_agent_if_called(
        db_url, workspace, tmp_path):
    (workspace / "shop_tools.py").write_text(SHOP, encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        [response(tool_use("t1", "lookup_order", order_id="7")), response(text("shipped"))], [response(text("second"))],
    ]}}), encoding="utf-8")
    tools = ("--tools", "shop_tools:lookup_order", "--tools", "shop_tools:refund")
    started = [cli("run", "where is 7", "--provider", f"scripted:{script}", "--workspace", str(workspace), *tools, "--json",
                   db=db_url) for _ in range(2)]
    assert all(run.returncode == 0 for run in started), [run.stderr for run in started]
    never, called = (json_lines(run.stdout)[0]["session_id"] for run in started)
    (workspace / "shop_tools.py").write_text(WITHOUT_REFUND, encoding="utf-8")
    again = cli("run", "again", "--session", never, "--json", db=db_url)
    assert again.returncode == 0, again.stderr
    assert notes(again) == [f"note: session {never}: shop_tools:refund no longer loads (shop_tools has no attribute 'refund'); "
                            "it held 'refund' when the session started; the session goes on without it (its history never "
                            "called it)"]
    (workspace / "shop_tools.py").write_text(SHOP.replace("def lookup_order(", "def find_order("), encoding="utf-8")
    before = closed_at_end(ChronicleStore(db_url)).session(UUID(called)).version
    refused(cli("run", "again", "--session", called, db=db_url),
            f"session {called} (agent main): its history called 'lookup_order', which shop_tools:lookup_order no longer "
            "holds (shop_tools has no attribute 'lookup_order'); put it back there to continue this session, or start a "
            "new session")
    assert closed_at_end(ChronicleStore(db_url)).session(UUID(called)).version == before  # nothing recorded


def test_a_sub_agent_in_flight_that_called_a_single_path_deleted_since_refuses_its_parent_naming_both(db_url, workspace,
                                                                                                       tmp_path):
    store, child, parent = died_while_the_clerk_worked(db_url, workspace, tmp_path, CLERK, SHOP)
    (workspace / "shop_tools.py").write_text(WITHOUT_REFUND, encoding="utf-8")
    before = {sid: store.session(sid).version for sid in (parent, child.id)}
    refused(cli("resume", str(parent), db=db_url),
            f"session {child.id} (sub-agent clerk of session {parent}): its history called 'refund', which shop_tools:refund "
            "no longer holds (shop_tools has no attribute 'refund'); put it back there")
    store = closed_at_end(ChronicleStore(db_url))
    assert {sid: store.session(sid).version for sid in (parent, child.id)} == before
    (workspace / "shop_tools.py").write_text(SHOP, encoding="utf-8")  # put back: the same child finishes
    resumed = cli("resume", str(parent), db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert closed_at_end(ChronicleStore(db_url)).session(parent).active_turn_id is None


GATED = '''
from chronicle import tool


@tool(requires_approval=True)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"
'''


def test_a_session_awaiting_approval_whose_tools_no_longer_load_says_so_before_anyone_approves(db_url, workspace, tmp_path):
    """`resume` said `awaiting approval`; only after `approve` did it say the session cannot go on (the approval recorded
    for nothing). It now checks the session's tools first, and the library's resume too, recording nothing."""
    from chronicle import Chronicle, ChronicleError

    (workspace / "shop_tools.py").write_text(GATED, encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[response(tool_use("t1", "refund", order_id="7")),
                                                       response(text("refunded"))]]}}), encoding="utf-8")
    paused = cli("run", "refund 7", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--tools",
                 "shop_tools:refund", "--json", db=db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    (workspace / "shop_tools.py").write_text(GATED.replace("def refund(", "def refund_order("), encoding="utf-8")
    said = (f"session {sid} (agent main): its history called 'refund', which shop_tools:refund no longer holds (shop_tools has "
            "no attribute 'refund'); put it back there")
    line = refused(cli("resume", sid, db=db_url), said, "(it awaits approval of refund, but neither approving nor denying "
                                                         "lets it go on until then)")
    every = cli("resume", "--all", db=db_url)
    assert every.returncode == 2 and said in every.stderr and "paused:" not in every.stderr, every.stderr
    import sys

    sys.path.insert(0, str(workspace))  # the workspace's module, as this process would load it (renamed there)
    try:
        with Chronicle(db_url) as app:
            try:
                app.resume(sid)
            except ChronicleError as exc:
                assert exc.code == 2 and str(exc) == line.removeprefix("error: ")
            else:
                raise AssertionError("the library's resume said nothing of the tool gone")
    finally:
        sys.path.remove(str(workspace))
        sys.modules.pop("shop_tools", None)
    from chronicle.runtime.session_work import pending_approvals

    store = closed_at_end(ChronicleStore(db_url))
    assert [c.name for c in pending_approvals(store, store.session(UUID(sid)))] == ["refund"]  # nothing decided or recorded
    (workspace / "shop_tools.py").write_text(GATED, encoding="utf-8")  # put back: the pause is what resume says again
    again = cli("resume", sid, db=db_url)
    assert again.returncode == 3 and f"session {sid} awaits approval of refund" in again.stderr, again.stderr
